#!/usr/bin/env bash
# Runs every check and test of the workspace, installing what they need first.
# This is the README's test command and what CI runs (.ci/run).
#
# Needs: root (for apt-get), the Rust toolchain, and network access to Debian's
# package mirror and crates.io.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

# The cloud-init 25.1.4 oracle of the differential test (extracted, never
# installed) and the Debian python3 packages it imports.
step "cloud-init oracle"
scripts/fetch-cloud-init-oracle.sh

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet

step "cargo test"
cargo test --workspace --locked

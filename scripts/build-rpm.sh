#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the RPM for Amazon Linux 2023, RHEL/Rocky/Alma 9 and Fedora into
# target/generate-rpm/ (`make rpm`; docs/packaging.md): installs the pinned
# cargo-generate-rpm when that version is missing, builds the release binaries
# (CLI and hook), makes the man pages and shell completions with the build-time tool
# (`cargo run -p xtask -- man|completions DIR`), and packages it all from
# [package.metadata.generate-rpm] in cli/Cargo.toml (scriptlets in
# packaging/rpm/).
#
# Prints the path of the .rpm on the last line.
set -euo pipefail
cd "$(dirname "$0")/.."
# cargo_target, package_files.
# shellcheck source=scripts/package-files.sh
. scripts/package-files.sh

# Pinned: the package layout (file flags, scriptlet headers, payload
# compression, the automatic Requires) is cargo-generate-rpm's; a new version is
# a reviewed change.
CARGO_GENERATE_RPM_VERSION=0.21.1
if ! cargo install --list | grep -qx "cargo-generate-rpm v${CARGO_GENERATE_RPM_VERSION}:"; then
    cargo install cargo-generate-rpm --version "$CARGO_GENERATE_RPM_VERSION" --locked >&2
fi

target=$(cargo_target build-rpm)

# Two binaries: the CLI with the boot stage, and the DHCP clients' hook (the
# package links /usr/libexec/leasehook/leasehook-<client> to leasehook-hook).
cargo build --release --locked -p leasehook -p leasehook-hook >&2

# The man pages, shell completions and documentation, where the package's
# metadata (cli/Cargo.toml) takes them from.
gen="$target/release/pkg"
package_files "$gen"

out="$target/generate-rpm"
rm -f "$out"/leasehook-*.rpm
mkdir -p "$out"
# The file times and the build time in the header: the last commit's, so the
# same tree gives the same package (where there is no git, the current time).
if [ -z "${SOURCE_DATE_EPOCH:-}" ] && epoch=$(git log -1 --format=%ct 2>/dev/null); then
    export SOURCE_DATE_EPOCH="$epoch"
fi
# --auto-req builtin: the Requires come from the binaries' ELF dependencies
# (libc), the same on every build machine, whether or not it has rpm-build's
# find-requires.
cargo generate-rpm -p cli --auto-req builtin -o "$out/" >&2
ls "$out"/leasehook-*.rpm

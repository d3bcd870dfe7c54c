#!/usr/bin/env bash
# bench-detect.sh -- deciding the datasource on a fake root: leasehook's detect
# (in process and as a process) side by side with cloud-init 25.1.4's own
# ds-identify on the same roots (tests/benches/detect.rs). Prints numbers;
# asserts nothing.
#
# Usage: scripts/bench-detect.sh
# Needs what scripts/test.sh needs (it runs scripts/fetch-cloud-init-oracle.sh).
# With LEASEHOOK_BENCH_JSON naming a file, the numbers are also appended to it as
# a JSON line (for bench/run). Built with the netns feature as bench/run builds
# the benches, so one build serves both.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/fetch-cloud-init-oracle.sh trixie >/dev/null
cargo build --release --locked --quiet -p leasehook --bin leasehook
LEASEHOOK_BIN="$PWD/target/release/leasehook" \
    cargo bench --locked --quiet -p leasehook-tests --features netns --bench detect

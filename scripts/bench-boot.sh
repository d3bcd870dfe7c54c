#!/usr/bin/env bash
# bench-boot.sh -- the boot stages (leasehook init --local, then leasehook init)
# against the IMDS and devlxd emulators, side by side with cloud-init 25.1.4's
# own EC2 datasource get_data() against the same IMDS emulator
# (tests/benches/boot.rs, scripts/cloud-init-ec2-get-data.py). Prints numbers;
# asserts nothing.
#
# Usage: scripts/bench-boot.sh
# Needs what scripts/test.sh needs (it runs scripts/fetch-cloud-init-oracle.sh).
# With LEASEHOOK_BENCH_JSON naming a file, the numbers are also appended to it as
# a JSON line (for bench/run). Built with the netns feature as bench/run builds
# the benches, so one build serves both.
# Traffic goes to 127.0.0.1 and a unix socket in a temporary folder only.
set -euo pipefail
cd "$(dirname "$0")/.."

pydir=$(scripts/fetch-cloud-init-oracle.sh trixie | sed -n 's/^cloud-init oracle: .* at //p')
[[ -d "$pydir" ]] || {
    echo "bench-boot: no cloud-init oracle" >&2
    exit 1
}
cargo build --release --locked --quiet -p leasehook --bin leasehook
LEASEHOOK_BIN="$PWD/target/release/leasehook" LEASEHOOK_BENCH_CLOUD_INIT="$pydir" \
    cargo bench --locked --quiet -p leasehook-tests --features netns --bench boot

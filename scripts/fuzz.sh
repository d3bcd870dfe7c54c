#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# fuzz.sh -- runs every fuzz target of fuzz/ for a fixed time each; exits non-zero
# on a crash.
#
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
#
# SECONDS is the time per target (default 30). Without TARGETs, every target that
# `cargo fuzz list` shows runs, one after the other. Stable Rust has no sanitizer
# support in cargo-fuzz, so targets run with `-s none` (see docs/fuzzing.md); they
# are built with debug assertions, so an integer overflow is a crash too.
#
# Corpora grow under fuzz/corpus/<target>/ (only the seed-* files are committed),
# crash inputs land in fuzz/artifacts/<target>/, each run's libFuzzer output in
# fuzz/logs/<target>.log, and a table of executions per target is printed at the end.
# Not part of scripts/test.sh: it is slow and installs cargo-fuzz.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-30}
[[ $seconds =~ ^[0-9]+$ ]] || { echo "usage: $0 [SECONDS] [TARGET...]" >&2; exit 2; }
shift || true

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "==> installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

cd fuzz
if (($#)); then
    targets=("$@")
else
    mapfile -t targets < <(cargo fuzz list)
fi

echo "==> building ${#targets[@]} targets"
cargo fuzz build -s none --debug-assertions

mkdir -p logs
crashed=()
summary=()
for t in "${targets[@]}"; do
    echo "==> $t for ${seconds}s"
    mkdir -p "corpus/$t"
    log="logs/$t.log"
    if cargo fuzz run -s none --debug-assertions "$t" "corpus/$t" -- \
        -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1; then
        status=ok
    else
        status=CRASH
        crashed+=("$t")
    fi
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    corpus=$(find "corpus/$t" -type f | wc -l)
    summary+=("$(printf '%-20s %-6s %12s %10s %8s' "$t" "$status" "${execs:-?}" "${rate:-?}" "$corpus")")
done

echo
printf '%-20s %-6s %12s %10s %8s\n' target status executions exec/s corpus
printf '%s\n' "${summary[@]}"

if ((${#crashed[@]})); then
    echo
    for t in "${crashed[@]}"; do
        echo "!! $t crashed; see fuzz/logs/$t.log"
        sed -n 's|^.*Test unit written to \(.*\)$|   crash file: \1|p' "logs/$t.log"
        grep -m 1 -A 3 "panicked at" "logs/$t.log" | sed 's/^/   /' || true
    done
    exit 1
fi

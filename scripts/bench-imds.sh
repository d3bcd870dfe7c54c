#!/usr/bin/env bash
# bench-imds.sh -- one secondary-NIC event against an IMDS on loopback: requests
# made and wall time of leasehook's client (cargo bench --bench imds), side by
# side with cloud-init 25.1.4's own EC2 crawl (scripts/cloud-init-imds-crawl.py),
# both against the same `leasehook-emulator --cloud ec2` process. Prints numbers; asserts nothing.
#
# Usage: scripts/bench-imds.sh            (ROUNDS=N for cloud-init's rounds, default 20)
# Needs what scripts/test.sh needs (it runs scripts/fetch-cloud-init-oracle.sh).
# Traffic goes to 127.0.0.1 only. With LEASEHOOK_BENCH_JSON naming a file, both
# sides also append their numbers to it as JSON lines (for bench/run).
# The benches build with the netns feature, as bench/run builds them, so one
# build serves both (the feature only compiles the root-only benches in).
set -euo pipefail
cd "$(dirname "$0")/.."

readonly ROUNDS=${ROUNDS:-20}
readonly PY=/usr/bin/python3

pydir=$(scripts/fetch-cloud-init-oracle.sh trixie | sed -n 's/^cloud-init oracle: .* at //p')
[[ -d "$pydir" ]] || {
    echo "bench-imds: no cloud-init oracle" >&2
    exit 1
}

cargo build --release --locked --quiet -p leasehook-tests --bin leasehook-emulator
readonly EMU=target/release/leasehook-emulator

work=$(mktemp -d)
emu_pid=
cleanup() {
    # The emulator ends by the TERM we send: its status is not the script's.
    if [[ -n "$emu_pid" ]]; then
        kill "$emu_pid" 2>/dev/null || true
        wait "$emu_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The sample instance, also served under the dated API version cloud-init probes
# first (real IMDS serves every version; the emulator serves what the tree holds).
"$EMU" --cloud ec2 --dump-tree >"$work/sample.json"
"$PY" - "$work/sample.json" >"$work/tree.json" <<'PYEOF'
import json, sys
tree = json.load(open(sys.argv[1]))
tree["2021-03-23"] = tree["latest"]
json.dump(tree, sys.stdout)
PYEOF

"$EMU" --cloud ec2 --tree "@$work/tree.json" --bind 127.0.0.1:0 --require-token \
    --log "$work/requests.log" >"$work/addr" &
emu_pid=$!
for _ in $(seq 50); do
    [[ -s "$work/addr" ]] && break
    sleep 0.1
done
addr=$(head -n1 "$work/addr")
[[ -n "$addr" ]] || {
    echo "bench-imds: the emulator did not start" >&2
    exit 1
}
url="http://$addr"
echo "emulator: $url ($(nproc) cores, $(uname -r))"

echo
echo "== leasehook: one DHCPv4 event on the secondary NIC (new client each event)"
LEASEHOOK_BENCH_IMDS_URL="$url" LEASEHOOK_BENCH_IMDS_LOG="$work/requests.log" \
    cargo bench --locked --quiet -p leasehook-tests --features netns --bench imds 2>/dev/null |
    grep '^leasehook'

echo
echo "== cloud-init $(PYTHONPATH="$pydir" "$PY" -s -c 'from cloudinit import version; print(version.version_string())'): DataSourceEc2.crawl_metadata()"
PYTHONPATH="$pydir" "$PY" -s scripts/cloud-init-imds-crawl.py \
    --url "$url" --log "$work/requests.log" --rounds "$ROUNDS" >"$work/ci.json"
"$PY" - "$work/ci.json" <<'PYEOF'
import json, os, sys
r = json.load(open(sys.argv[1]))
w = sorted(r["wall_ms"])
q = sorted(set(r["requests"]))
reqs = str(q[0]) if len(q) == 1 else "%d-%d" % (q[0], q[-1])
print("cloud-init crawl requests=%s wall_ms median=%.3f p90=%.3f max=%.3f (n=%d)"
      % (reqs, w[(len(w) - 1) // 2], w[(len(w) - 1) * 9 // 10], w[-1], len(w)))
print("cloud-init import of DataSourceEc2 (once per hotplug process): %.1f ms" % r["import_ms"])
out = os.environ.get("LEASEHOOK_BENCH_JSON")
if out:
    pick = lambda p: w[(len(w) - 1) * p // 100]
    line = {"bench": "imds-cloud-init", "version": r["version"], "import_ms": r["import_ms"],
            "requests": {"min": q[0], "max": q[-1]},
            "crawl": {"n": len(w), "median_ms": pick(50), "p90_ms": pick(90), "max_ms": w[-1]}}
    with open(out, "a") as f:
        f.write(json.dumps(line) + "\n")
PYEOF

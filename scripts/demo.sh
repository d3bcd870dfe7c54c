#!/usr/bin/env bash
# The README's main command: builds leasehook, installs the Debian packages the
# demo needs, and runs leasehook-demo (tests/src/bin/leasehook-demo.rs) in a
# throwaway world of network namespaces. Needs root. Everything it creates is
# removed at the end, also after Ctrl-C or a failure.
set -euo pipefail
cd "$(dirname "$0")/.."

if ((EUID != 0)); then
    echo "demo.sh: run as root (it creates network namespaces)" >&2
    exit 1
fi

need=()
for p in isc-dhcp-client dnsmasq-base iproute2 python3; do
    dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || need+=("$p")
done
if ((${#need[@]})); then
    echo "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null ||
        { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null; }
fi

cargo build --locked --quiet --workspace --bins

cleanup() {
    # The demo's namespaces are named lht-<pid>-<n>-demo-{r,i}; everything it
    # started runs inside them.
    local ns
    for ns in $(ip netns list | awk '/^lht-[0-9]+-[0-9]+-demo-/ {print $1}'); do
        ip netns pids "$ns" | xargs -r kill 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
        rm -rf "/etc/netns/$ns"
    done
    rmdir /etc/netns 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

target/debug/leasehook-demo

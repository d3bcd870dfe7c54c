#!/usr/bin/env bash
# Runs every check and test of the workspace, installing what they need first.
# This is the README's test command and what CI runs (.ci/run).
#
# Needs: root (for apt-get), the Rust toolchain, and network access to Debian's
# package mirror and crates.io.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

# Debian packages the tests run: iproute2 (`ip`, network namespaces), the system
# python3 (lab servers and the cloud-init oracle), ISC dhclient and dnsmasq (the
# end-to-end tests; dnsmasq-base is the binary without the system service),
# systemd-networkd, networkd-dispatcher and dbus-daemon (the networkd end-to-end
# tests run them in a namespace), NetworkManager, dhcpcd and busybox's udhcpc
# (each client's end-to-end test runs the real one in a namespace; network-manager
# ships systemd units only, and policy-rc.d keeps the udev it pulls in from
# starting), ShellCheck for the hook files, and GNU time (the soak test reads
# each hook's peak memory from it).
ensure_packages() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    echo "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends "${missing[@]}" ||
        { apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}"; }
}

step "Debian packages"
ensure_packages iproute2 python3 isc-dhcp-client dnsmasq-base systemd networkd-dispatcher dbus shellcheck network-manager dhcpcd-base udhcpc time

# The cloud-init 25.1.4 oracle of the differential test (extracted, never
# installed) and the Debian python3 packages it imports.
step "cloud-init oracle"
scripts/fetch-cloud-init-oracle.sh

step "shellcheck"
shellcheck -s sh hooks/dhclient/leasehook hooks/dhclient/leasehook.sh hooks/networkd-dispatcher/50-leasehook \
    hooks/networkmanager/90-leasehook hooks/dhcpcd/90-leasehook hooks/udhcpc/leasehook.script
shellcheck scripts/*.sh .ci/run

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy"
cargo clippy --workspace --all-targets --locked --features leasehook-tests/netns -- -D warnings

step "cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet

# The netns feature compiles the tests that need root and a real kernel: they
# fail, never skip, when that is missing. The soak test drives the release shim
# (its memory limit is about the binary that ships) with a CI-sized number of
# events; `LEASEHOOK_SOAK_EVENTS=200` is the full run (docs/soak.md).
step "cargo test (with the netns tests)"
cargo build --workspace --locked --bins
cargo build --release --locked -p leasehook-dhclient
LEASEHOOK_SOAK_EVENTS="${LEASEHOOK_SOAK_EVENTS:-60}" cargo test --workspace --locked --features leasehook-tests/netns

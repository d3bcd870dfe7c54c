#!/usr/bin/env bash
# Runs every check and test of the workspace, installing what they need first.
# This is the README's test command and what CI runs (.ci/run).
#
# Needs: root (for apt-get), the Rust toolchain, and network access to Debian's
# package mirror and crates.io.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

# The test $1 of a package: builds it with `make $2` (whose last line is the
# package's path), runs the integration test $5 (feature $4) with the path in the
# variable $3, and says PASSED with what it checked ($6), or FAILED and exits 1.
package_test() {
    local name=$1 target=$2 var=$3 feature=$4 test=$5 checked=$6 pkg
    pkg=$(make -s "$target" | tail -n 1)
    ls -l "$pkg"
    if env "$var=$pkg" cargo test -p leasehook-tests --locked --features "$feature" --test "$test"; then
        echo "$name: PASSED ($checked)"
    else
        echo "$name: FAILED" >&2
        exit 1
    fi
}

# Debian packages the tests run: iproute2 (`ip`, network namespaces), the system
# python3 (lab servers and the cloud-init oracle), ISC dhclient and dnsmasq (the
# end-to-end tests; dnsmasq-base is the binary without the system service),
# systemd-networkd, networkd-dispatcher and dbus-daemon (the networkd end-to-end
# tests run them in a namespace), NetworkManager, dhcpcd and busybox's udhcpc
# (each client's end-to-end test runs the real one in a namespace; network-manager
# ships systemd units only, and policy-rc.d keeps the udev it pulls in from
# starting), ShellCheck for the hook files, and GNU time (the soak test reads
# each hook's peak memory from it), and rpm (the RPM test reads the .rpm with
# it and installs it into a throwaway root only).
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
ensure_packages iproute2 python3 isc-dhcp-client dnsmasq-base systemd networkd-dispatcher dbus shellcheck network-manager dhcpcd-base udhcpc \
    make gzip groff-base man-db bash-completion time rpm genisoimage \
    dosfstools fuseiso e2fsprogs util-linux

# The cloud-init oracles of the differential test, 25.1.4 (trixie) and 26.2
# (sid), extracted, never installed, and the Debian python3 packages they
# import. The tests fail, never skip, when one is missing.
step "cloud-init oracles (25.1.4, 26.2)"
scripts/fetch-cloud-init-oracle.sh all

# amazon-ec2-net-utils 2.4.1, the second oracle (tests/tests/ec2_net_utils.rs):
# extracted, never installed; it needs curl at run time.
step "amazon-ec2-net-utils oracle"
ensure_packages curl
scripts/fetch-ec2-net-utils-oracle.sh

# Debian's kernel for the tests that need 802.1Q VLAN links (tests/src/vm.rs):
# this kernel has none, so they run again inside a QEMU VM booted on it. The
# kernel and busybox-static are extracted under target/vm, never installed;
# kmod makes the kernel's modules.dep and loads its modules inside the VM, and
# ping is what the VLAN test sends.
step "VLAN kernel (QEMU VM)"
ensure_packages qemu-system-x86 kmod xz-utils iputils-ping
scripts/fetch-vlan-kernel.sh

step "shellcheck"
shellcheck -s sh hooks/dhclient/leasehook hooks/dhclient/leasehook.sh hooks/networkd-dispatcher/50-leasehook \
    hooks/networkmanager/90-leasehook hooks/dhcpcd/90-leasehook hooks/udhcpc/leasehook.script
shellcheck scripts/*.sh .ci/run
shellcheck -s sh tests/vm/init
shellcheck -s sh packaging/deb/postinst packaging/deb/prerm packaging/deb/postrm
shellcheck -s sh packaging/rpm/post packaging/rpm/preun packaging/rpm/postun

# The benchmark report's renderer and template against a recorded run: cheap, so
# the report cannot rot silently. (The benchmarks themselves run only through
# bench/run, never here: times are not test assertions.)
step "bench report renderer (smoke)"
python3 -m unittest discover -s bench -p 'test_*.py'
python3 bench/report.py --check bench/testdata/results.json

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy"
cargo clippy --workspace --all-targets --locked --features leasehook-tests/netns,leasehook-tests/package,leasehook-tests/rpm -- -D warnings

step "cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet

# The netns feature compiles the tests that need root and a real kernel: they
# fail, never skip, when that is missing. The soak test drives the release hook
# binary (its memory limit is about the binary that ships) with a CI-sized number
# of events; `LEASEHOOK_SOAK_EVENTS=200` is the full run (docs/soak.md).
step "cargo test (with the netns tests)"
cargo build --workspace --locked --bins
cargo build --release --locked -p leasehook -p leasehook-hook
LEASEHOOK_SOAK_EVENTS="${LEASEHOOK_SOAK_EVENTS:-60}" cargo test --workspace --locked --features leasehook-tests/netns

# The Debian package, last: it installs into this machine's /etc and /usr, where
# the other clients' end-to-end tests would see its networkd drop-in and its
# dhcpcd and NetworkManager hooks. Builds it (`make deb`), installs it, checks
# every file, runs dhclient against the installed hook and purges it.
step "Debian package: make deb, dpkg -i, dhclient end to end, dpkg --purge"
# build-deb.sh's (cargo-deb's) last line on standard output is the .deb's path.
package_test "package test" deb LEASEHOOK_DEB package package \
    "installed, checked, dhclient end to end, purged clean"

# The RPM (Amazon Linux 2023, RHEL 9 family, Fedora), after the Debian package
# test (it uses the same release build): `make rpm`, then its file list and
# flags, its scriptlets in a chroot with stubbed systemctl, an install into a
# throwaway root (`rpm --root`, never this machine's /), the RHEL dhclient.d
# hook under real dhclient in the namespace lab, and the erase.
step "RPM: make rpm, rpm -qlpv, scriptlets, rpm --root -i, dhclient.d end to end, rpm -e"
package_test "RPM test" rpm LEASEHOOK_RPM rpm package_rpm \
    "listed, scriptlets, installed into a throwaway root, dhclient.d end to end, erased clean"

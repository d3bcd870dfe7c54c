#!/usr/bin/env bash
# fetch-vlan-kernel.sh -- provide Debian's distribution kernel (trixie's
# linux-image-amd64, which has 802.1Q as the 8021q module) and an initramfs for
# the VM that tests/src/vm.rs boots for the tests that need VLAN links: this
# machine's and CI's kernel (Firecracker) has no 802.1Q.
#
# * The kernel and busybox-static .debs are fetched with a PRIVATE apt sources
#   list / lists / cache under target/vm/apt (scripts/deb-oracle.sh); the system
#   apt configuration is never changed and nothing is installed -- only unpacked
#   with `dpkg-deb -x` under target/vm. No kernel goes to /boot.
# * target/vm/kernel: the kernel package's tree, with modules.dep made by depmod
#   (the package leaves that to its postinst). Inside the VM,
#   /usr/lib/modules/VERSION points at it, so the kernel loads 8021q, veth,
#   macvlan... on demand through the host's own /sbin/modprobe (kmod).
# * target/vm/initramfs.cpio.gz: busybox-static, tests/vm/init as /init, and the
#   modules that mount the host's root (9p over virtio, overlayfs), decompressed
#   and numbered in load order.
# * target/vm/vmlinuz: the kernel image; target/vm/version: what was built from.
# * Idempotent: redone only when the kernel package, busybox or tests/vm/init
#   changed.
#
# Needs (as root, Debian): apt-get, dpkg-deb, kmod (depmod), xz; the VM itself
# needs qemu-system-x86 (scripts/test.sh installs both).
# Usage: scripts/fetch-vlan-kernel.sh   (paths relative to the repo root).
# Prints the kernel's version on its last line.
set -euo pipefail

cd "$(dirname "$0")/.."
# mirror_uri, apt_opts, private_apt_update, unpack_deb, lock_oracle_dir, KEYRING.
# shellcheck source=scripts/deb-oracle.sh
. scripts/deb-oracle.sh

readonly SUITE="trixie"
# The metapackage naming the suite's current kernel package.
readonly META="linux-image-amd64"
readonly BUSYBOX="busybox-static"
# The modules the initramfs loads to mount the root (their dependencies are added).
readonly ROOT_MODULES=(9pnet_virtio 9p overlay)
readonly INIT="tests/vm/init"

# lock_oracle_dir locks this folder (not target/oracle: the oracles' fetches
# need not wait for this one).
readonly ORACLE_DIR="$PWD/target/vm"
readonly APT_DIR="$ORACLE_DIR/apt"
readonly DEB_DIR="$ORACLE_DIR/debs"
readonly KERNEL="$ORACLE_DIR/kernel"
readonly BB_ROOT="$ORACLE_DIR/busybox"
readonly INITRAMFS="$ORACLE_DIR/initramfs.cpio.gz"
readonly STAMP="$ORACLE_DIR/version"

log() { printf 'fetch-vlan-kernel: %s\n' "$*" >&2; }
die() {
    printf 'fetch-vlan-kernel: ERROR: %s\n' "$*" >&2
    exit 1
}

# Downloads package $1 at version $2 into $DEB_DIR unless there; prints its path.
download() {
    local pkg=$1 ver=$2 deb opts
    mapfile -t opts < <(apt_opts "$APT_DIR")
    deb=$(find "$DEB_DIR" -maxdepth 1 -name "${pkg}_*.deb" -print -quit)
    if [[ -n "$deb" && "$(dpkg-deb -f "$deb" Version 2>/dev/null)" == "$ver" ]]; then
        printf '%s\n' "$deb"
        return 0
    fi
    rm -f "$DEB_DIR/${pkg}_"*.deb
    log "downloading $pkg=$ver"
    (cd "$DEB_DIR" && apt-get -q "${opts[@]}" download "$pkg=$ver" >&2) ||
        die "apt-get download $pkg=$ver failed"
    deb=$(find "$DEB_DIR" -maxdepth 1 -name "${pkg}_*.deb" -print -quit)
    [[ -n "$deb" && "$(dpkg-deb -f "$deb" Version)" == "$ver" ]] ||
        die "downloaded $pkg is not $ver"
    printf '%s\n' "$deb"
}

# The candidate version of package $1 in the private list.
candidate() {
    local opts
    mapfile -t opts < <(apt_opts "$APT_DIR")
    apt-cache "${opts[@]}" policy "$1" | awk '/Candidate:/ {print $2}'
}

# Builds the initramfs for kernel version $1 from $KERNEL and $BB_ROOT.
build_initramfs() {
    local kver=$1 tmp="$ORACLE_DIR/initramfs.tmp.$$" i=0 word ko name
    local -A seen=()
    rm -rf "$tmp"
    mkdir -p "$tmp"/{bin,modules,proc,sys,dev}
    cp "$BB_ROOT/usr/bin/busybox" "$tmp/bin/busybox"
    ln -s busybox "$tmp/bin/sh"
    cp "$INIT" "$tmp/init"
    chmod 755 "$tmp/init"
    # modprobe --show-depends: one `insmod PATH` a line, dependencies first.
    while read -r word ko _; do
        [[ "$word" == insmod ]] || continue
        [[ -z "${seen[$ko]:-}" ]] || continue
        seen[$ko]=1
        i=$((i + 1))
        name=$(basename "$ko" .xz)
        case "$ko" in
        *.ko.xz) xz -dc "$ko" >"$tmp/modules/$(printf '%02d' "$i")-$name" ;;
        *.ko) cp "$ko" "$tmp/modules/$(printf '%02d' "$i")-$name" ;;
        *) die "unexpected module file $ko" ;;
        esac
    done < <(modprobe -d "$KERNEL" -S "$kver" -a --show-depends "${ROOT_MODULES[@]}" ||
        die "modprobe --show-depends ${ROOT_MODULES[*]} failed")
    ((i > 0)) || die "no module found for ${ROOT_MODULES[*]}"
    log "initramfs: busybox, $INIT, $(cd "$tmp/modules" && echo *)"
    (cd "$tmp" && find . | LC_ALL=C sort | "$tmp/bin/busybox" cpio -o -H newc 2>/dev/null) |
        gzip -n -6 >"$INITRAMFS.tmp"
    mv "$INITRAMFS.tmp" "$INITRAMFS"
    rm -rf "$tmp"
}

main() {
    lock_oracle_dir
    if ! command -v depmod >/dev/null || ! command -v modprobe >/dev/null; then
        die "depmod/modprobe not found (Debian package kmod)"
    fi
    command -v xz >/dev/null || die "xz not found (Debian package xz-utils)"
    mkdir -p "$DEB_DIR"
    private_apt_update "$APT_DIR" "$SUITE"

    local opts meta_ver kpkg kver bb_ver want
    mapfile -t opts < <(apt_opts "$APT_DIR")
    meta_ver=$(candidate "$META")
    [[ -n "$meta_ver" && "$meta_ver" != "(none)" ]] || die "$SUITE has no $META"
    # linux-image-amd64 depends on exactly one linux-image-VERSION-amd64.
    kpkg=$(apt-cache "${opts[@]}" show "$META=$meta_ver" |
        awk -F': ' '$1 == "Depends" {print $2; exit}' | tr ',' '\n' |
        awk '$1 ~ /^linux-image-.*-amd64$/ {print $1; exit}')
    [[ -n "$kpkg" ]] || die "$META $meta_ver depends on no linux-image-*-amd64"
    kver=${kpkg#linux-image-}
    bb_ver=$(candidate "$BUSYBOX")
    [[ -n "$bb_ver" && "$bb_ver" != "(none)" ]] || die "$SUITE has no $BUSYBOX"
    # This script and tests/vm/init make the initramfs: a change to either redoes it.
    want="$kpkg $meta_ver $BUSYBOX $bb_ver $(cat "$INIT" scripts/fetch-vlan-kernel.sh | sha256sum | cut -d' ' -f1)"

    if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" && -s "$INITRAMFS" &&
        -s "$KERNEL/boot/vmlinuz-$kver" && -s "$KERNEL/usr/lib/modules/$kver/modules.dep" ]]; then
        log "up to date: $want"
        printf '%s\n' "$kver"
        return 0
    fi
    rm -f "$STAMP"

    local kdeb bbdeb
    kdeb=$(download "$kpkg" "$meta_ver")
    bbdeb=$(download "$BUSYBOX" "$bb_ver")
    if ! [[ -s "$KERNEL/usr/lib/modules/$kver/modules.dep" && -s "$KERNEL/boot/vmlinuz-$kver" &&
        -f "$KERNEL/.deb" && "$(cat "$KERNEL/.deb")" == "$(basename "$kdeb")" ]]; then
        unpack_deb "$kdeb" "$KERNEL"
        # depmod -b looks for BASE/lib/modules; the package has usr/lib/modules.
        ln -sfn usr/lib "$KERNEL/lib"
        log "depmod $kver"
        depmod -b "$KERNEL" "$kver" || die "depmod -b $KERNEL $kver failed"
        basename "$kdeb" >"$KERNEL/.deb"
    fi
    unpack_deb "$bbdeb" "$BB_ROOT"
    [[ -x "$BB_ROOT/usr/bin/busybox" ]] || die "$bbdeb has no usr/bin/busybox"
    modprobe -d "$KERNEL" -S "$kver" --show-depends 8021q >/dev/null ||
        die "kernel $kver has no 8021q module"
    build_initramfs "$kver"
    ln -sfn "kernel/boot/vmlinuz-$kver" "$ORACLE_DIR/vmlinuz"
    printf '%s\n' "$want" >"$STAMP"
    log "ready: $want"
    printf '%s\n' "$kver"
}

main "$@"

#!/usr/bin/env bash
# fetch-ec2-net-utils-oracle.sh -- provide amazon-ec2-net-utils 2.4.1 (Debian
# trixie) as an extracted "oracle" tree for tests/tests/ec2_net_utils.rs.
#
# * The .deb is fetched with a PRIVATE apt sources list / lists / cache under
#   target/oracle/apt (the same private trixie list as
#   scripts/fetch-cloud-init-oracle.sh, under the same lock: both scripts do it
#   with scripts/deb-oracle.sh); the system apt
#   configuration is never changed and the package is never installed -- only
#   unpacked with `dpkg-deb -x` into target/oracle/amazon-ec2-net-utils-2.4.1/root.
# * The test runs that tree's own usr/bin/setup-policy-routes and
#   usr/share/amazon-ec2-net-utils/lib.sh (LIBDIR_OVERRIDE) under systemd-networkd
#   in network namespaces; its runtime needs (curl, iproute2, systemd-networkd,
#   networkctl) are the machine's.
# * Idempotent: if the tree is present and complete it only re-verifies.
#
# Mirror URI is read at run time from the machine's own apt sources.
# Usage: scripts/fetch-ec2-net-utils-oracle.sh        (as root; paths relative to
#        the repo root). Prints the tree's root on its last line.
set -euo pipefail

cd "$(dirname "$0")/.."
# mirror_uri, apt_opts, private_apt_update, unpack_deb, lock_oracle_dir, KEYRING.
# shellcheck source=scripts/deb-oracle.sh
. scripts/deb-oracle.sh

readonly PKG="amazon-ec2-net-utils"
# trixie and sid ship 2.4.1 (Debian revision 2.4.1-2 at the time of writing);
# any Debian revision of upstream 2.4.1 is accepted.
readonly UPSTREAM="2.4.1"
readonly SUITE="trixie"
# What the test drives; an extracted tree missing one of them is redone.
readonly FILES=(
    usr/bin/setup-policy-routes
    usr/share/amazon-ec2-net-utils/lib.sh
    usr/lib/systemd/network/80-ec2.network
    usr/lib/systemd/system/policy-routes@.service
    usr/lib/udev/rules.d/99-vpc-policy-routes.rules
)

readonly ORACLE_DIR="$PWD/target/oracle"
readonly APT_DIR="$ORACLE_DIR/apt"
readonly DEB_DIR="$ORACLE_DIR/debs"
readonly TREE="$ORACLE_DIR/$PKG-$UPSTREAM"
readonly ROOT="$TREE/root"
# The Debian version the tree was extracted from.
readonly STAMP="$TREE/version"

log() { printf 'fetch-ec2-net-utils-oracle: %s\n' "$*" >&2; }
die() {
    printf 'fetch-ec2-net-utils-oracle: ERROR: %s\n' "$*" >&2
    exit 1
}

tree_ok() {
    local f
    [[ -f "$STAMP" ]] || return 1
    [[ "$(cat "$STAMP")" == "$UPSTREAM"-* ]] || return 1
    for f in "${FILES[@]}"; do
        [[ -s "$ROOT/$f" ]] || return 1
    done
    grep -q '^declare -i -r rule_base=10000$' "$ROOT/usr/share/amazon-ec2-net-utils/lib.sh"
}

# Downloads the package; prints the .deb's path.
download_deb() {
    local opts ver deb
    mkdir -p "$DEB_DIR"
    private_apt_update "$APT_DIR" "$SUITE"
    mapfile -t opts < <(apt_opts "$APT_DIR")
    ver=$(apt-cache "${opts[@]}" madison "$PKG" | awk -F'|' '{gsub(/ /, "", $2); print $2}' |
        grep -m1 "^$UPSTREAM-" || true)
    [[ -n "$ver" ]] || die "$SUITE has no $PKG $UPSTREAM-* (apt-cache madison $PKG)"
    deb="$DEB_DIR/${PKG}_${ver}_all.deb"
    if ! [[ -f "$deb" && "$(dpkg-deb -f "$deb" Version 2>/dev/null)" == "$ver" ]]; then
        rm -f "$deb"
        log "downloading $PKG=$ver"
        (cd "$DEB_DIR" && apt-get -q "${opts[@]}" download "$PKG=$ver" >&2) ||
            die "apt-get download $PKG=$ver failed"
    fi
    [[ "$(dpkg-deb -f "$deb" Package 2>/dev/null)" == "$PKG" &&
        "$(dpkg-deb -f "$deb" Version 2>/dev/null)" == "$ver" ]] ||
        die "downloaded $deb is not $PKG $ver"
    printf '%s\n' "$deb"
}

# Unpacks the .deb $1 into the tree and stamps its Debian version.
extract_deb() {
    rm -f "$STAMP"
    unpack_deb "$1" "$ROOT"
    dpkg-deb -f "$1" Version >"$STAMP"
}

main() {
    if ! tree_ok; then
        ((EUID == 0)) || die "must run as root (apt-get with private lists)"
        lock_oracle_dir
        if ! tree_ok; then
            local deb
            deb=$(download_deb)
            extract_deb "$deb"
            tree_ok || die "extracted tree ${ROOT#"$PWD"/} lacks one of: ${FILES[*]}"
        fi
    fi
    printf '%s oracle: %s at %s\n' "$PKG" "$(cat "$STAMP")" "$ROOT"
}

main "$@"

#!/usr/bin/env bash
# fetch-ec2-net-utils-oracle.sh -- provide amazon-ec2-net-utils 2.4.1 (Debian
# trixie) as an extracted "oracle" tree for tests/tests/ec2_net_utils.rs.
#
# * The .deb is fetched with a PRIVATE apt sources list / lists / cache under
#   target/oracle/apt (the same private trixie list as
#   scripts/fetch-cloud-init-oracle.sh, under the same lock); the system apt
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

readonly PKG="amazon-ec2-net-utils"
# trixie and sid ship 2.4.1 (Debian revision 2.4.1-2 at the time of writing);
# any Debian revision of upstream 2.4.1 is accepted.
readonly UPSTREAM="2.4.1"
readonly SUITE="trixie"
readonly KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
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

# First Debian (non-security) mirror URI of this machine's apt sources.
mirror_uri() {
    local uri="" f
    for f in /etc/apt/sources.list.d/*.sources; do
        [[ -f "$f" ]] || continue
        uri=$(awk 'tolower($1) == "uris:" {
                       for (i = 2; i <= NF; i++)
                           if ($i !~ /security/) { print $i; exit }
                   }' "$f")
        [[ -n "$uri" ]] && break
    done
    if [[ -z "$uri" ]]; then
        for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
            [[ -f "$f" ]] || continue
            uri=$(awk '$1 == "deb" {
                           for (i = 2; i <= NF; i++) {
                               if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; continue }
                               if ($i !~ /security/) print $i
                               exit
                           }
                       }' "$f" | head -n1)
            [[ -n "$uri" ]] && break
        done
    fi
    [[ -n "$uri" ]] || die "no Debian mirror URI found in /etc/apt/sources.list{,.d}"
    printf '%s\n' "${uri%/}"
}

# Everything apt writes (lists, pkgcache, lock) stays under $APT_DIR.
aopt() {
    printf '%s\n' \
        -o "Dir::Etc::sourcelist=$APT_DIR/sources.list" \
        -o "Dir::Etc::sourceparts=-" \
        -o "Dir::State::Lists=$APT_DIR/lists" \
        -o "Dir::Cache=$APT_DIR/cache" \
        -o "Acquire::Languages=none" \
        -o "APT::Sandbox::User=root"
}

# Downloads the package; prints the .deb's path.
download_deb() {
    local uri opts ver deb
    uri=$(mirror_uri)
    [[ -r "$KEYRING" ]] || die "$KEYRING missing (package debian-archive-keyring)"
    mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial" "$DEB_DIR"
    printf 'deb [signed-by=%s target=Packages] %s %s main\n' \
        "$KEYRING" "$uri" "$SUITE" >"$APT_DIR/sources.list"
    mapfile -t opts < <(aopt)
    log "apt-get update (private list: $uri $SUITE main)"
    apt-get -q --error-on=any "${opts[@]}" update >&2 ||
        die "private 'apt-get update' for $SUITE failed (mirror $uri)"
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

extract_deb() {
    local deb=$1 tmp="$TREE/root.tmp.$$"
    rm -rf "$tmp" "$ROOT" "$STAMP"
    mkdir -p "$tmp"
    log "extracting $(basename "$deb") into ${ROOT#"$PWD"/}"
    dpkg-deb -x "$deb" "$tmp" || {
        rm -rf "$tmp"
        die "dpkg-deb -x $deb failed"
    }
    mv "$tmp" "$ROOT"
    dpkg-deb -f "$deb" Version >"$STAMP"
}

main() {
    if ! tree_ok; then
        if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
            die "apt-get/dpkg-deb not found (Debian host required)"
        fi
        ((EUID == 0)) || die "must run as root (apt-get with private lists)"
        mkdir -p "$ORACLE_DIR"
        exec 9>"$ORACLE_DIR/.lock"
        flock 9
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

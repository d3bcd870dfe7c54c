#!/usr/bin/env bash
# fetch-cloud-init-oracle.sh -- provide cloud-init 25.1.4 (Debian trixie
# 25.1.4-1+deb13u1) and 26.2 (Debian sid 26.2-1) as import-only "oracle" trees
# for the system python.
#
# * Each .deb is fetched with a PRIVATE apt sources list / lists / cache under
#   target/oracle/apt-<suite>; the system apt configuration is never changed and
#   the package is never installed -- only unpacked with `dpkg-deb -x` into
#   target/oracle/cloud-init-<version>/root.
# * The Debian python3 packages that /usr/bin/python3 needs to import
#   cloudinit.sources.DataSourceEc2 and cloudinit.net.netplan from that tree
#   are installed with apt-get (missing ones only).
# * Idempotent: if a tree is present and importable it only re-verifies.
#
# Mirror URI is read at run time from the machine's own apt sources.
# Usage: scripts/fetch-cloud-init-oracle.sh [trixie|sid|all]   (default all; as
#        root; paths relative to the repo root). Then, for each version:
#   PYTHONPATH=target/oracle/cloud-init-25.1.4/root/usr/lib/python3/dist-packages \
#     /usr/bin/python3 tests/oracle/ci_oracle.py CASES.json
# sid moves: when its cloud-init is no longer 26.2-1, the download fails naming
# the version; update SID_* below (and the differential test's expected version).
set -euo pipefail

cd "$(dirname "$0")/.."
# mirror_uri, apt_opts, private_apt_update, unpack_deb, lock_oracle_dir, KEYRING.
# shellcheck source=scripts/deb-oracle.sh
. scripts/deb-oracle.sh

# suite -> (Debian version, upstream version)
readonly TRIXIE_DEB_VERSION="25.1.4-1+deb13u1" TRIXIE_VERSION="25.1.4"
readonly SID_DEB_VERSION="26.2-1" SID_VERSION="26.2"
readonly PY=/usr/bin/python3
# Minimal set found by trial on Debian 12 without the cloud-init package:
# python3-yaml (cloudinit.util), python3-requests (cloudinit.url_helper),
# python3-configobj (cloudinit.net.dhcp, imported by DataSourceEc2);
# python3-jinja2 and python3-jsonpatch (cloudinit.cmd.query, run by
# tests/oracle/ci_query.py for the `leasehook query` comparison).
readonly PY_PKGS=(python3-yaml python3-requests python3-configobj python3-jinja2 python3-jsonpatch)

readonly ORACLE_DIR="$PWD/target/oracle"
readonly DEB_DIR="$ORACLE_DIR/debs"
# Set per suite by select_suite.
SUITE="" CI_DEB_VERSION="" CI_VERSION="" APT_DIR="" DEB_FILE="" TREE="" ROOT="" PYDIR=""

select_suite() {
    SUITE=$1
    case "$SUITE" in
    trixie) CI_DEB_VERSION=$TRIXIE_DEB_VERSION CI_VERSION=$TRIXIE_VERSION ;;
    sid) CI_DEB_VERSION=$SID_DEB_VERSION CI_VERSION=$SID_VERSION ;;
    *) die "unknown suite '$SUITE' (trixie, sid or all)" ;;
    esac
    APT_DIR="$ORACLE_DIR/apt-$SUITE"
    DEB_FILE="$DEB_DIR/cloud-init_${CI_DEB_VERSION}_all.deb"
    TREE="$ORACLE_DIR/cloud-init-$CI_VERSION"
    ROOT="$TREE/root"
    PYDIR="$ROOT/usr/lib/python3/dist-packages"
}

log() { printf 'fetch-cloud-init-oracle: %s\n' "$*" >&2; }
die() {
    printf 'fetch-cloud-init-oracle: ERROR: %s\n' "$*" >&2
    exit 1
}

# Prints the cloud-init version importable from $PYDIR (and checks that the
# package really comes from $PYDIR, not from a system-installed cloud-init).
probe_oracle() {
    [[ -f "$PYDIR/cloudinit/version.py" ]] || return 1
    PYTHONPATH="$PYDIR" "$PY" -s - "$PYDIR" <<'EOF'
import os, sys
import cloudinit, cloudinit.version
import cloudinit.net.dhcp, cloudinit.net.netplan
import cloudinit.sources.DataSourceEc2
import cloudinit.cmd.query
want = os.path.realpath(sys.argv[1])
got = os.path.realpath(os.path.dirname(os.path.dirname(cloudinit.__file__)))
if got != want:
    sys.exit("cloudinit imported from %s, not %s" % (got, want))
print(cloudinit.version.version_string())
EOF
}

# Quiet variant: import errors are not shown.
oracle_version() { probe_oracle 2>/dev/null; }

is_installed() {
    [[ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null)" == "ii "* ]]
}

install_py_deps() {
    local missing=() p
    for p in "${PY_PKGS[@]}"; do
        is_installed "$p" || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    ((EUID == 0)) || die "must run as root to install: ${missing[*]}"
    log "installing ${missing[*]}"
    local apt=(apt-get -y -q --no-install-recommends -o DPkg::Lock::Timeout=120)
    if ! DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${missing[@]}" >&2; then
        log "apt-get install failed; running a system 'apt-get update' once and retrying"
        apt-get -q -o DPkg::Lock::Timeout=120 update >&2 ||
            die "system 'apt-get update' failed"
        DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${missing[@]}" >&2 ||
            die "apt-get install ${missing[*]} failed"
    fi
}

deb_ok() {
    [[ -f "$DEB_FILE" ]] &&
        [[ "$(dpkg-deb -f "$DEB_FILE" Package 2>/dev/null)" == cloud-init ]] &&
        [[ "$(dpkg-deb -f "$DEB_FILE" Version 2>/dev/null)" == "$CI_DEB_VERSION" ]]
}

download_deb() {
    deb_ok && return 0
    rm -f "$DEB_FILE"
    mkdir -p "$DEB_DIR"
    private_apt_update "$APT_DIR" "$SUITE"
    local aopt
    mapfile -t aopt < <(apt_opts "$APT_DIR")
    log "downloading cloud-init=$CI_DEB_VERSION ($SUITE)"
    (cd "$DEB_DIR" && apt-get -q "${aopt[@]}" download "cloud-init=$CI_DEB_VERSION" >&2) ||
        die "apt-get download cloud-init=$CI_DEB_VERSION failed ($SUITE has: $(apt-cache "${aopt[@]}" policy cloud-init 2>/dev/null | awk '/Candidate/ {print $2}'))"
    deb_ok || die "downloaded $DEB_FILE is not cloud-init $CI_DEB_VERSION"
}

report() {
    printf 'cloud-init oracle: %s at %s\n' "$1" "$PYDIR"
}

fetch_one() {
    select_suite "$1"
    local v
    # Fast path: nothing to do.
    if v=$(oracle_version) && [[ "$v" == "$CI_VERSION" ]]; then
        report "$v"
        return 0
    fi
    install_py_deps
    # The tree may be fine and only the python deps were missing.
    if ! { v=$(oracle_version) && [[ "$v" == "$CI_VERSION" ]]; }; then
        download_deb
        unpack_deb "$DEB_FILE" "$ROOT"
        v=$(probe_oracle) ||
            die "cloud-init from $PYDIR is not importable by $PY (see above)"
        [[ "$v" == "$CI_VERSION" ]] ||
            die "extracted cloud-init reports version '$v', expected $CI_VERSION"
    fi
    report "$v"
}

main() {
    [[ -x "$PY" ]] || die "$PY not found"
    local suites
    case "${1:-all}" in
    all) suites=(trixie sid) ;;
    *) suites=("$1") ;;
    esac
    lock_oracle_dir
    local s
    for s in "${suites[@]}"; do
        fetch_one "$s"
    done
}

main "$@"

# shellcheck shell=bash
# deb-oracle.sh -- what the oracle fetch scripts (fetch-cloud-init-oracle.sh,
# fetch-ec2-net-utils-oracle.sh) share; sourced, not run. A Debian package is
# fetched with a PRIVATE apt sources list / lists / cache under target/oracle and
# unpacked with `dpkg-deb -x`, never installed; the system apt configuration is
# never changed. The sourcing script defines `log MESSAGE` and `die MESSAGE`, and
# ORACLE_DIR (the scripts' shared folder, target/oracle).

readonly KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

# Takes the lock both scripts take on $ORACLE_DIR (made when missing), after
# checking that this is a Debian host; held on descriptor 9 until the script ends.
lock_oracle_dir() {
    if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
        die "apt-get/dpkg-deb not found (Debian host required)"
    fi
    mkdir -p "$ORACLE_DIR"
    exec 9>"$ORACLE_DIR/.lock"
    flock 9
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

# The apt options that keep everything apt writes (lists, pkgcache, lock) under
# the folder $1, one a line (read them with mapfile).
apt_opts() {
    printf '%s\n' \
        -o "Dir::Etc::sourcelist=$1/sources.list" \
        -o "Dir::Etc::sourceparts=-" \
        -o "Dir::State::Lists=$1/lists" \
        -o "Dir::Cache=$1/cache" \
        -o "Acquire::Languages=none" \
        -o "APT::Sandbox::User=root"
}

# Writes the private sources list under the folder $1 (suite $2's main, from this
# machine's mirror) and runs `apt-get update` on it; then `apt-get` and
# `apt-cache` with "$(apt_opts $1)" read that list only.
private_apt_update() {
    local dir=$1 suite=$2 uri opts
    uri=$(mirror_uri)
    [[ -r "$KEYRING" ]] || die "$KEYRING missing (package debian-archive-keyring)"
    mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
    printf 'deb [signed-by=%s target=Packages] %s %s main\n' \
        "$KEYRING" "$uri" "$suite" >"$dir/sources.list"
    mapfile -t opts < <(apt_opts "$dir")
    log "apt-get update (private list: $uri $suite main)"
    apt-get -q --error-on=any "${opts[@]}" update >&2 ||
        die "private 'apt-get update' for $suite failed (mirror $uri)"
}

# Unpacks the .deb $1 into the folder $2 (replaced), through a temporary folder
# beside it: a failed unpack leaves no half tree.
unpack_deb() {
    local deb=$1 root=$2
    local tmp="$root.tmp.$$"
    rm -rf "$tmp" "$root"
    mkdir -p "$tmp"
    log "extracting $(basename "$deb") into ${root#"$PWD"/}"
    dpkg-deb -x "$deb" "$tmp" || {
        rm -rf "$tmp"
        die "dpkg-deb -x $deb failed"
    }
    mv "$tmp" "$root"
}

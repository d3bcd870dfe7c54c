# shellcheck shell=bash
# package-files.sh -- what build-deb.sh and build-rpm.sh share; sourced, not run,
# from the repository root: cargo's target folder, and the files both packages
# ship beside the binaries, made with the build-time tool (`cargo run -p xtask --
# man|completions DIR`). Output goes to standard error or nowhere: the scripts'
# last line on standard output is the package's path.

# Prints cargo's target folder; $1, the script's name, starts the error.
cargo_target() {
    local target
    target=$(cargo metadata --format-version 1 --no-deps --locked |
        sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
    [ -n "$target" ] || {
        echo "$1: cannot find cargo's target folder" >&2
        exit 1
    }
    printf '%s\n' "$target"
}

# Makes, in the folder $1 (replaced), what both packages ship beside the
# binaries: man/ (the pages, gzipped), completions/ and doc/ (the user
# documentation and the README, gzipped).
package_files() {
    local gen=$1 f
    rm -rf "$gen"
    cargo run --locked -q -p xtask -- man "$gen/man" >/dev/null
    # -n: no name or time stamp in the gzip header, so the same pages give the
    # same bytes (reproducible packages).
    gzip -9n "$gen"/man/*.1 "$gen"/man/*.5
    cargo run --locked -q -p xtask -- completions "$gen/completions" >/dev/null
    # The documentation compressed, as Debian policy asks of /usr/share/doc (about
    # 300 KB of Markdown, 120 KB gzipped); `zless` reads it. The README too
    # (18 KB, 7 KB gzipped: the .deb is held to 8 MiB installed).
    mkdir -p "$gen/doc"
    for f in docs/*.md; do
        # The developers' documents (packaging/developer-docs) stay in the tree.
        grep -qxF "${f##*/}" packaging/developer-docs && continue
        gzip -9nc "$f" >"$gen/doc/${f##*/}.gz"
    done
    gzip -9nc README.md >"$gen/doc/README.md.gz"
}

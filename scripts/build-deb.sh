#!/usr/bin/env bash
# Builds the Debian package into target/debian/ (`make deb`; docs/packaging.md):
# installs the pinned cargo-deb when that version is missing, builds the release
# binaries, makes the man pages and shell completions with the build-time tool
# (`cargo run -p xtask -- man|completions DIR`, from the same clap definition the
# binary parses with, and leasehook.yaml(5) from the configuration keys' table),
# and packages it all with cargo-deb.
#
# cargo-deb prints the path of the .deb on the last line.
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned: the package layout (maintainer-script snippets, conffiles, compression)
# is cargo-deb's; a new version is a reviewed change.
CARGO_DEB_VERSION=3.8.0
if ! cargo install --list | grep -qx "cargo-deb v${CARGO_DEB_VERSION}:"; then
    cargo install cargo-deb --version "$CARGO_DEB_VERSION" --locked
fi

target=$(cargo metadata --format-version 1 --no-deps --locked |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
[ -n "$target" ] || { echo "build-deb: cannot find cargo's target folder" >&2; exit 1; }

# Two binaries: the CLI with the boot stage, and the DHCP clients' hook (the
# package links /usr/libexec/leasehook/leasehook-<client> to leasehook-hook).
cargo build --release --locked -p leasehook -p leasehook-hook

gen="$target/release/pkg"
rm -rf "$gen"
cargo run --locked -q -p xtask -- man "$gen/man" >/dev/null
# -n: no name or time stamp in the gzip header, so the same pages give the same
# bytes (reproducible packages).
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

rm -f "$target"/debian/leasehook_*.deb
cargo deb -p leasehook --no-build --output "$target/debian/"

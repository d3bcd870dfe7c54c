#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the RPM for Amazon Linux 2023, RHEL/Rocky/Alma 9 and Fedora into
# target/generate-rpm/ (`make rpm`; docs/packaging.md): installs the pinned
# cargo-generate-rpm when that version is missing, builds the release binaries
# (CLI and hook), makes the man pages and shell completions with the build-time tool
# (`cargo run -p xtask -- man|completions DIR`), and packages it all from
# [package.metadata.generate-rpm] in cli/Cargo.toml (scriptlets in
# packaging/rpm/).
#
# Prints the path of the .rpm on the last line.
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned: the package layout (file flags, scriptlet headers, payload
# compression, the automatic Requires) is cargo-generate-rpm's; a new version is
# a reviewed change.
CARGO_GENERATE_RPM_VERSION=0.21.1
if ! cargo install --list | grep -qx "cargo-generate-rpm v${CARGO_GENERATE_RPM_VERSION}:"; then
    cargo install cargo-generate-rpm --version "$CARGO_GENERATE_RPM_VERSION" --locked >&2
fi

target=$(cargo metadata --format-version 1 --no-deps --locked |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
[ -n "$target" ] || { echo "build-rpm: cannot find cargo's target folder" >&2; exit 1; }

# Two binaries: the CLI with the boot stage, and the DHCP clients' hook (the
# package links /usr/libexec/leasehook/leasehook-<client> to leasehook-hook).
cargo build --release --locked -p leasehook -p leasehook-hook >&2

gen="$target/release/pkg"
rm -rf "$gen"
cargo run --locked -q -p xtask -- man "$gen/man" >/dev/null
# -n: no name or time stamp in the gzip header (the same pages, the same bytes).
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

out="$target/generate-rpm"
rm -f "$out"/leasehook-*.rpm
mkdir -p "$out"
# The file times and the build time in the header: the last commit's, so the
# same tree gives the same package (where there is no git, the current time).
if [ -z "${SOURCE_DATE_EPOCH:-}" ] && epoch=$(git log -1 --format=%ct 2>/dev/null); then
    export SOURCE_DATE_EPOCH="$epoch"
fi
# --auto-req builtin: the Requires come from the binaries' ELF dependencies
# (libc), the same on every build machine, whether or not it has rpm-build's
# find-requires.
cargo generate-rpm -p cli --auto-req builtin -o "$out/" >&2
ls "$out"/leasehook-*.rpm

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
# cargo_target, package_files.
# shellcheck source=scripts/package-files.sh
. scripts/package-files.sh

# Pinned: the package layout (maintainer-script snippets, conffiles, compression)
# is cargo-deb's; a new version is a reviewed change.
CARGO_DEB_VERSION=3.8.0
if ! cargo install --list | grep -qx "cargo-deb v${CARGO_DEB_VERSION}:"; then
    cargo install cargo-deb --version "$CARGO_DEB_VERSION" --locked
fi

target=$(cargo_target build-deb)

# Two binaries: the CLI with the boot stage, and the DHCP clients' hook (the
# package links /usr/libexec/leasehook/leasehook-<client> to leasehook-hook).
cargo build --release --locked -p leasehook -p leasehook-hook

# The man pages, shell completions and documentation, where the package's
# metadata (cli/Cargo.toml) takes them from.
gen="$target/release/pkg"
package_files "$gen"

rm -f "$target"/debian/leasehook_*.deb
cargo deb -p leasehook --no-build --output "$target/debian/"

# leasehook's make targets. The checks and tests: scripts/test.sh.

.PHONY: deb
# The Debian package, in target/debian/ (docs/packaging.md).
deb:
	scripts/build-deb.sh

.PHONY: rpm
# The RPM (Amazon Linux 2023, RHEL 9 family, Fedora), in target/generate-rpm/
# (docs/packaging.md).
rpm:
	scripts/build-rpm.sh

.PHONY: man
# The manual pages, in target/man/ (made by the build-time xtask from the CLI's
# clap definition; `make deb` and `make rpm` make them for the packages).
man:
	cargo run --locked -q -p xtask -- man target/man

.PHONY: completions
# The bash, zsh and fish completion scripts, in target/completions/.
completions:
	cargo run --locked -q -p xtask -- completions target/completions

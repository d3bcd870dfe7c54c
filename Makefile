# leasehook's make targets. The checks and tests: scripts/test.sh.

.PHONY: deb
# The Debian package, in target/debian/ (docs/packaging.md).
deb:
	scripts/build-deb.sh

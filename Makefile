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

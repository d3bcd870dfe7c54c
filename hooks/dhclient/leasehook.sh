# leasehook.sh -- ISC dhclient hook for the RHEL family (RHEL, CentOS, Fedora,
# Amazon Linux 2). Installed as /etc/dhcp/dhclient.d/leasehook.sh (mode 0755:
# dhclient-script skips a dhclient.d script that is not executable).
#
# dhclient-script (bash) sources every executable /etc/dhcp/dhclient.d/*.sh and
# calls NAME_config after a lease is configured and NAME_restore when it goes
# away. Both only run
# leasehook-dhclient, which reads the reason and the lease from the environment
# itself, and ignore its status. Nothing exits, no option or variable changes.
# LEASEHOOK_DHCLIENT overrides the shim's path (tests pass it with dhclient -e).
leasehook_config() {
    "${LEASEHOOK_DHCLIENT:-/usr/libexec/leasehook/leasehook-dhclient}" || :
}

leasehook_restore() {
    "${LEASEHOOK_DHCLIENT:-/usr/libexec/leasehook/leasehook-dhclient}" || :
}

// SPDX-License-Identifier: Apache-2.0
//! busybox udhcpc for real: udhcpc gets leases from dnsmasq and runs leasehook's
//! script (`hooks/udhcpc/leasehook.script`, given with `-s`), which chains to
//! Debian's `/etc/udhcpc/default.script` to configure the address and then runs
//! `leasehook-udhcpc`, which asks the IMDS emulator and installs policy routing.
//! Each test builds its own world (`leasehook_tests::world`, `::clients`); the
//! tests are the scenario table every client runs (`leasehook_tests::scenarios`),
//! with udhcpc's row in `leasehook_tests::client` (SIGUSR1 renews, no DHCPv6).
//!
//! Compiled with the `netns` feature; needs root, udhcpc (busybox) and dnsmasq, and
//! fails, never skips, without them.

#![cfg(feature = "netns")]

leasehook_tests::client_table!(udhcpc => Udhcpc);

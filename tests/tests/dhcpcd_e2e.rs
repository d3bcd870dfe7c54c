// SPDX-License-Identifier: Apache-2.0
//! dhcpcd for real: dhcpcd gets leases from dnsmasq, its unmodified
//! `dhcpcd-run-hooks` sources leasehook's hook (`hooks/dhcpcd/90-leasehook`, bind
//! mounted as the only file of `/usr/lib/dhcpcd/dhcpcd-hooks` in dhcpcd's mount
//! namespace), and `leasehook-dhcpcd` asks the IMDS emulator and installs policy
//! routing. Settings reach the shim through `dhcpcd -e`, as dhcpcd clears its
//! hooks' environment. Each test builds its own world (`leasehook_tests::world`,
//! `::clients`); the tests are the scenario table every client runs
//! (`leasehook_tests::scenarios`), with dhcpcd's row in `leasehook_tests::client`.
//!
//! Compiled with the `netns` feature; needs root, dhcpcd (dhcpcd-base) and dnsmasq,
//! and fails, never skips, without them.

#![cfg(feature = "netns")]

leasehook_tests::client_table!(dhcpcd => Dhcpcd);

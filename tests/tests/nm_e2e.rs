// SPDX-License-Identifier: Apache-2.0
//! NetworkManager for real: NetworkManager (internal DHCP client) gets leases from
//! dnsmasq, its dispatcher runs leasehook's script (`hooks/networkmanager/90-leasehook`)
//! from the world's `/etc/NetworkManager/dispatcher.d`, and `leasehook-nm` asks the
//! IMDS emulator and installs policy routing. NetworkManager and nm-dispatcher talk
//! over a private D-Bus, in the instance's network namespace and a mount namespace
//! of their own (`World::start_nm`). Each test builds its own world; the tests are
//! the scenario table every client runs (`leasehook_tests::scenarios`), with
//! NetworkManager's row in `leasehook_tests::client`.
//!
//! Compiled with the `netns` feature; needs root, network-manager, dbus-daemon and
//! dnsmasq, and fails, never skips, without them.

#![cfg(feature = "netns")]

leasehook_tests::client_table!(nm => Nm);

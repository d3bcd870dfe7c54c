// SPDX-License-Identifier: Apache-2.0
//! The cloud table end to end: every cloud leasehook serves runs the same rows
//! (`leasehook_tests::cloud_rows`: two NICs with the secondary routed, unchanged
//! renewals writing nothing, the metadata service down keeping the last applied
//! state) in a namespace world with that cloud's DHCP and metadata emulator
//! (`leasehook_tests::clouds::Cloud`). What only one cloud has stays in that
//! cloud's own suite (`tests/tests/<cloud>_e2e.rs`).
//!
//! A cloud whose emulator serves the dual-stack (or IPv6-only) instance
//! (`Cloud::dual_stack_world`, `Cloud::ipv6_only_world`) also runs the IPv6
//! rows listed after `ipv6:` (`dual_stack`, `release6`, `ipv6_only`; issue
//! 34); its `ipv6_rows_listed` fails when the list and the worlds disagree.
//!
//! Compiled with the `netns` feature; needs root, isc-dhcp-client and dnsmasq,
//! and fails, never skips, without them.

#![cfg(feature = "netns")]

leasehook_tests::cloud_table!(ec2 => Ec2, ipv6: [dual_stack, release6, expire6, ipv6_only]);
leasehook_tests::cloud_table!(gce => Gce, ipv6: [dual_stack, release6, expire6, ipv6_only]);
leasehook_tests::cloud_table!(azure => Azure, ipv6: [dual_stack, release6, expire6]);
leasehook_tests::cloud_table!(aliyun => Aliyun, ipv6: [dual_stack, release6, expire6]);
leasehook_tests::cloud_table!(oracle => Oracle, ipv6: [dual_stack, ipv6_only]);
leasehook_tests::cloud_table!(openstack => OpenStack, ipv6: [dual_stack, release6, expire6, ipv6_only]);

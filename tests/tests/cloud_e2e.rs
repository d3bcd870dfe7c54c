// SPDX-License-Identifier: Apache-2.0
//! The cloud table end to end: every cloud leasehook serves runs the same rows
//! (`leasehook_tests::cloud_rows`: two NICs with the secondary routed, unchanged
//! renewals writing nothing, the metadata service down keeping the last applied
//! state) in a namespace world with that cloud's DHCP and metadata emulator
//! (`leasehook_tests::clouds::Cloud`). What only one cloud has stays in that
//! cloud's own suite (`tests/tests/<cloud>_e2e.rs`).
//!
//! Compiled with the `netns` feature; needs root, isc-dhcp-client and dnsmasq,
//! and fails, never skips, without them.

#![cfg(feature = "netns")]

leasehook_tests::cloud_table!(ec2 => Ec2);
leasehook_tests::cloud_table!(gce => Gce);
leasehook_tests::cloud_table!(azure => Azure);
leasehook_tests::cloud_table!(aliyun => Aliyun);
leasehook_tests::cloud_table!(oracle => Oracle);
leasehook_tests::cloud_table!(openstack => OpenStack);

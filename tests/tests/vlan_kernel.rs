// SPDX-License-Identifier: Apache-2.0
//! The VLAN kernel's harness (`leasehook_tests::vm`) carries a real 802.1Q test:
//! where this kernel has no VLAN (this machine's and CI's), the test runs again
//! inside the VM booted on Debian's kernel, and its result comes back. A macvlan
//! on the VLAN link (OCI bare-metal VNICs) answers too.
//!
//! Compiled only with the `netns` feature; it needs root, and fails, never
//! skips, when neither this kernel nor the VM (`scripts/fetch-vlan-kernel.sh`,
//! qemu-system-x86) can make a VLAN link.

#![cfg(feature = "netns")]
#![cfg(test)]

use leasehook_tests::netns::Netns;
use leasehook_tests::vm::{in_vlan_kernel, kernel_has_vlan};

/// Whether `from` gets an answer to a ping of `to` (sent out of `dev` when given).
fn pings_via(from: &Netns, to: &str, dev: Option<&str>) -> bool {
    let mut ping = from.command("ping");
    if let Some(dev) = dev {
        ping.args(["-I", dev]);
    }
    ping.args(["-c", "2", "-i", "0.5", "-W", "2", to])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn pings(from: &Netns, to: &str) -> bool {
    pings_via(from, to, None)
}

/// The 802.1Q id of `link` in `ns`, as `ip -d` reads it from the kernel.
fn vlan_id(ns: &Netns, link: &str) -> Option<u64> {
    let links = ns.ip_json(&["-d", "link", "show", "dev", link]);
    links[0]["linkinfo"]["info_data"]["id"].as_u64()
}

#[test]
fn a_vlan_link_carries_tagged_traffic_only() {
    if in_vlan_kernel("a_vlan_link_carries_tagged_traffic_only") {
        return;
    }
    assert!(kernel_has_vlan(), "this kernel (or the VM's) has no 802.1Q");
    // a's eth0 ⇄ b's eth0, a cable; b's VLAN 100 link lives in c, where it is
    // the only link: an untagged frame cannot reach c's address.
    let a = Netns::new("vma");
    let b = Netns::new("vmb");
    let c = Netns::new("vmc");
    a.veth_to("eth0", &b, "eth0", "02:00:00:00:01:02");
    a.ip(&["link", "set", "eth0", "up"]);
    b.ip(&["link", "set", "eth0", "up"]);
    b.ip(&[
        "link", "add", "link", "eth0", "name", "eth0.100", "type", "vlan", "id", "100",
    ]);
    b.ip(&["link", "set", "eth0.100", "netns", &c.name]);
    c.ip(&["address", "add", "10.100.0.2/24", "dev", "eth0.100"]);
    c.ip(&["link", "set", "eth0.100", "up"]);
    assert_eq!(vlan_id(&c, "eth0.100"), Some(100));

    // Tagged 100: through b's eth0 to c.
    a.ip(&[
        "link", "add", "link", "eth0", "name", "eth0.100", "type", "vlan", "id", "100",
    ]);
    a.ip(&["address", "add", "10.100.0.1/24", "dev", "eth0.100"]);
    a.ip(&["link", "set", "eth0.100", "up"]);
    assert_eq!(vlan_id(&a, "eth0.100"), Some(100));
    assert!(pings(&a, "10.100.0.2"), "no answer over VLAN 100");
    // A macvlan on the VLAN link (an OCI bare-metal VNIC's shape), its own MAC.
    a.ip(&[
        "link",
        "add",
        "link",
        "eth0.100",
        "name",
        "mv0",
        "address",
        "02:00:00:00:01:03",
        "type",
        "macvlan",
        "mode",
        "bridge",
    ]);
    a.ip(&["address", "add", "10.100.0.3/24", "dev", "mv0"]);
    a.ip(&["link", "set", "mv0", "up"]);
    assert!(
        pings_via(&a, "10.100.0.2", Some("mv0")),
        "no answer to the macvlan over VLAN 100"
    );

    // Untagged, the same addresses: nothing answers.
    a.ip(&["link", "del", "mv0"]);
    a.ip(&["link", "del", "eth0.100"]);
    a.ip(&["address", "add", "10.100.0.1/24", "dev", "eth0"]);
    assert!(
        !pings(&a, "10.100.0.2"),
        "an untagged ping reached the VLAN 100 address"
    );

    // Another tag: nothing answers either.
    a.ip(&["address", "del", "10.100.0.1/24", "dev", "eth0"]);
    a.ip(&[
        "link", "add", "link", "eth0", "name", "eth0.101", "type", "vlan", "id", "101",
    ]);
    a.ip(&["address", "add", "10.100.0.1/24", "dev", "eth0.101"]);
    a.ip(&["link", "set", "eth0.101", "up"]);
    assert!(
        !pings(&a, "10.100.0.2"),
        "a ping tagged 101 reached the VLAN 100 address"
    );
}

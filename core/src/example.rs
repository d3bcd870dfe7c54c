// SPDX-License-Identifier: Apache-2.0
//! Pure: the built-in example instance behind `leasehook plan --example`: three NICs
//! (a primary, a dual-stack secondary with a second address and a delegated prefix,
//! and a NIC on a second network card), each with a DHCP lease. A multi-card type
//! serves `network-card` on every NIC, card 0's included.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde_json::{Value, json};

use crate::model::{Family, IfName, Lease, Link, MacAddr, Reason};
use crate::plan::InterfaceLease;

/// The example's metadata tree, in the format of [`crate::metadata::parse_tree`].
pub fn metadata() -> Value {
    json!({
        "mac": "02:00:00:00:00:01",
        "instance-id": "i-0123456789abcdef0",
        "network": {"interfaces": {"macs": {
            "02:00:00:00:00:01": {
                "device-number": "0", "network-card": "0", "interface-id": "eni-0000000000000001",
                "local-ipv4s": "10.98.0.10", "subnet-ipv4-cidr-block": "10.98.0.0/24"
            },
            "02:00:00:00:00:02": {
                "device-number": "1", "network-card": "0", "interface-id": "eni-0000000000000002",
                "local-ipv4s": "10.98.1.20\n10.98.1.21",
                "subnet-ipv4-cidr-block": "10.98.1.0/24",
                "ipv4-prefix": "10.98.1.64/28",
                "ipv6s": "2600:1f18:0:1::20",
                "subnet-ipv6-cidr-blocks": "2600:1f18:0:1::/64"
            },
            "02:00:00:00:00:03": {
                "device-number": "1", "network-card": "1", "interface-id": "eni-0000000000000003",
                "local-ipv4s": "10.98.2.30", "subnet-ipv4-cidr-block": "10.98.2.0/24"
            }
        }}}
    })
}

fn name(s: &str) -> IfName {
    // The literals below are valid names; a failure here is a bug in this file.
    IfName::try_new(s).unwrap_or_else(|_| unreachable!("example interface name {s}"))
}

/// The example's links (eth1 has learned an IPv6 router from advertisements).
pub fn links() -> Vec<Link> {
    (1u8..=3)
        .map(|n| Link {
            name: name(&format!("eth{}", n - 1)),
            mac: MacAddr::new([2, 0, 0, 0, 0, n]),
            ipv6_router: (n == 2).then_some(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1)),
        })
        .collect()
}

/// The example's leases: DHCPv4 on every NIC, DHCPv6 on eth1.
pub fn leases() -> Vec<InterfaceLease> {
    let v4 = |ifname: &str, third: u8, host: u8| InterfaceLease {
        interface: name(ifname),
        lease: Lease {
            family: Family::V4,
            address: IpAddr::V4(Ipv4Addr::new(10, 98, third, host)),
            prefix_len: 24,
            routers: vec![IpAddr::V4(Ipv4Addr::new(10, 98, third, 1))],
            reason: Reason::Bound,
        },
    };
    vec![
        v4("eth0", 0, 10),
        v4("eth1", 1, 20),
        InterfaceLease {
            interface: name("eth1"),
            lease: Lease {
                family: Family::V6,
                address: IpAddr::V6(Ipv6Addr::new(0x2600, 0x1f18, 0, 1, 0, 0, 0, 0x20)),
                prefix_len: 128,
                routers: Vec::new(),
                reason: Reason::Bound,
            },
        },
        v4("eth2", 2, 30),
    ]
}

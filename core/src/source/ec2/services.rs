// SPDX-License-Identifier: Apache-2.0
//! Pure: the addresses EC2's own link-local services answer on besides the
//! shared `169.254.169.254` (`reference/clouds-and-clusters.md` §2): IMDS, the
//! Route 53 resolver and the time sync service over IPv6. The address gate
//! ([`crate::gate`]) refuses them as a NIC's address or a rule's source.

use std::net::{IpAddr, Ipv6Addr};

/// The addresses and whose service each is.
pub const SERVICES: &[(IpAddr, &str)] = &[
    (
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
        "EC2 metadata (IPv6)",
    ),
    (
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x253)),
        "EC2 DNS resolver (IPv6)",
    ),
    (
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x123)),
        "EC2 time sync (IPv6)",
    ),
];

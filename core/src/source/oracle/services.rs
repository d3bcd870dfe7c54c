// SPDX-License-Identifier: Apache-2.0
//! Pure: the address OCI's metadata service answers on over IPv6 besides the
//! shared `169.254.169.254` (`reference/clouds-and-clusters.md` §2). The address
//! gate ([`crate::gate`]) refuses it as a NIC's address or a rule's source.

use std::net::{IpAddr, Ipv6Addr};

/// The addresses and whose service each is.
pub const SERVICES: &[(IpAddr, &str)] = &[(
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xc1, 0, 0, 0, 0, 0xa9fe, 0xa9fe)),
    "OCI metadata (IPv6)",
)];

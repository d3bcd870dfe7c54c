// SPDX-License-Identifier: Apache-2.0
//! Pure: the address Alibaba Cloud's metadata service answers on
//! (`reference/clouds-and-clusters.md` §2), which is not link-local. The address
//! gate ([`crate::gate`]) refuses it as a NIC's address or a rule's source.

use std::net::{IpAddr, Ipv4Addr};

/// The addresses and whose service each is.
pub const SERVICES: &[(IpAddr, &str)] = &[(
    IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)),
    "Alibaba Cloud metadata",
)];

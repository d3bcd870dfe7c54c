// SPDX-License-Identifier: Apache-2.0
//! Pure: the address Azure's `WireServer` answers on besides the shared
//! `169.254.169.254` (IMDS); it is not link-local. The address gate
//! ([`crate::gate`]) refuses it as a NIC's address or a rule's source.

use std::net::{IpAddr, Ipv4Addr};

/// The addresses and whose service each is.
pub const SERVICES: &[(IpAddr, &str)] = &[(
    IpAddr::V4(Ipv4Addr::new(168, 63, 129, 16)),
    "Azure WireServer",
)];

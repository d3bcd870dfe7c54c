// SPDX-License-Identifier: Apache-2.0
//! Pure: the addresses GCE's metadata server answers on besides the shared
//! `169.254.169.254` (`metadata.google.internal`,
//! `reference/clouds-and-clusters.md` §2): none that leasehook reads.
//!
//! Its IPv6 address is left out on purpose (issue 34): peers' deny lists name
//! `fd20:ce::254` for it, but no Google page we could find says so (the
//! versions of Google's "Configure IPv6 for instances" we could read say "VMs
//! can connect to the metadata server only over IPv4, using 169.254.169.254"),
//! and an address here is one the gate refuses on every cloud. It goes here, with the page, once Google
//! documents it. The link-local IPv6 gateway (`gatewayIpv6`) is a router, which
//! the gate refuses as a NIC's address anyway (link-local).

use std::net::IpAddr;

/// The addresses and whose service each is.
pub const SERVICES: &[(IpAddr, &str)] = &[];

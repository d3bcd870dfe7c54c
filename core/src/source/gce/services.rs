// SPDX-License-Identifier: Apache-2.0
//! Pure: the addresses GCE's metadata server answers on besides the shared
//! `169.254.169.254` (`metadata.google.internal`,
//! `reference/clouds-and-clusters.md` §2): none that leasehook reads.

use std::net::IpAddr;

/// The addresses and whose service each is.
pub const SERVICES: &[(IpAddr, &str)] = &[];

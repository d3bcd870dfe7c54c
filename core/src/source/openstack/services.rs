// SPDX-License-Identifier: Apache-2.0
//! Pure: the addresses `OpenStack`'s metadata service answers on besides the
//! shared `169.254.169.254` (`reference/clouds-and-clusters.md` §2): none.

use std::net::IpAddr;

/// The addresses and whose service each is.
pub const SERVICES: &[(IpAddr, &str)] = &[];

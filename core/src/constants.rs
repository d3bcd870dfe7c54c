// SPDX-License-Identifier: Apache-2.0
//! Numbers and paths every part of leasehook agrees on.

/// `ec2-net-utils` profile: table (and rule priority) of device 0 on card 0, as
/// amazon-ec2-net-utils' `rule_base`.
pub const DEFAULT_TABLE_BASE: u32 = 10_000;

/// Tables the kernel reserves: unspec, default, main, local.
pub const RESERVED_TABLES: [u32; 4] = [0, 253, 254, 255];

// SPDX-License-Identifier: Apache-2.0
//! Fuzz target: systemd-networkd's lease file (`event::networkd::parse_lease_file`).
#![no_main]

use leasehook_core::event::networkd;
use leasehook_fuzz::text;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(lease) = networkd::parse_lease_file(&text(data)) {
        let _ = lease.interface_net();
    }
});

// SPDX-License-Identifier: Apache-2.0
//! Fuzz target: networkd-dispatcher's environment (`event::networkd::parse_dispatcher`)
//! and, after a NUL byte, a lease file to bind with it.
#![no_main]

use leasehook_core::event::networkd::{self, Dispatch};
use leasehook_core::model::Family;
use leasehook_fuzz::{env_of, parts, text};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let p = parts(&text(data), 2);
    let Ok(event) = networkd::parse_dispatcher(&env_of(&p[0])) else {
        return;
    };
    match event.dispatch() {
        Dispatch::ApplyLease => {
            if let Ok(lease) = networkd::parse_lease_file(&p[1]) {
                let _ = event.bound(lease);
            }
        }
        Dispatch::Remove(families) => {
            for f in families {
                let _ = event.removal(f);
            }
        }
        Dispatch::Ignore => {
            let _ = event.removal(Family::V6);
        }
    }
});

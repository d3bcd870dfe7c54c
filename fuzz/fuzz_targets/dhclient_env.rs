// SPDX-License-Identifier: Apache-2.0
//! Fuzz target: dhclient-script's environment (`event::dhclient`), built from
//! `KEY=VALUE` lines of the input.
#![no_main]

use leasehook_core::event::dhclient;
use leasehook_fuzz::{env_of, text};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = text(data);
    let env = env_of(&text);
    if let Some(reason) = env.get("reason") {
        let _ = dhclient::parse_reason(reason);
    }
    if let Ok(event) = dhclient::parse(&env) {
        let _ = event.action();
        for lease in event.new.iter().chain(event.old.iter()) {
            let _ = lease.interface_net();
        }
    }
});

// SPDX-License-Identifier: Apache-2.0
//! Fuzz target: dhcpcd-run-hooks' environment (`event::dhcpcd::parse`).
#![no_main]

use leasehook_core::event::dhcpcd;
use leasehook_fuzz::{env_of, text};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let env = env_of(&text(data));
    if let Some(reason) = env.get("reason") {
        let _ = dhcpcd::is_reason(reason);
    }
    let _ = dhcpcd::parse(&env);
});

// SPDX-License-Identifier: Apache-2.0
//! Fuzz target: a per-interface state file (`apply::state::InterfaceState`, the
//! JSON under the state folder that apply reads back on the next lease).
#![no_main]

use leasehook_core::apply::state::InterfaceState;
use leasehook_fuzz::text;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = serde_json::from_str::<InterfaceState>(&text(data));
});

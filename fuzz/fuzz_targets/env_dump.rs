// SPDX-License-Identifier: Apache-2.0
//! Fuzz target: the `KEY=VALUE` environment dump parser (`event::parse_env_dump`).
#![no_main]

use leasehook_core::event::parse_env_dump;
use leasehook_fuzz::text;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = parse_env_dump("fuzz", &text(data));
});

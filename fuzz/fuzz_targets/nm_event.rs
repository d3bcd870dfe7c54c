// SPDX-License-Identifier: Apache-2.0
//! Fuzz target: a NetworkManager dispatcher run (`event::nm::parse`): the first line
//! is the interface argument, the second the action, the rest `KEY=VALUE` lines.
#![no_main]

use leasehook_core::event::nm;
use leasehook_fuzz::{env_of, first_line, text};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = text(data);
    let (iface, rest) = first_line(&text);
    let (action, rest) = first_line(rest);
    let _ = nm::parse(iface, action, &env_of(rest));
});

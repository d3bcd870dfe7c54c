// SPDX-License-Identifier: Apache-2.0
//! Fuzz target: a busybox udhcpc script run (`event::udhcpc::parse`): the first line
//! is the event argument, the rest `KEY=VALUE` lines.
#![no_main]

use leasehook_core::event::udhcpc;
use leasehook_fuzz::{env_of, first_line, text};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = text(data);
    let (event, rest) = first_line(&text);
    let _ = udhcpc::parse(event, &env_of(rest));
});

// SPDX-License-Identifier: Apache-2.0
//! Fuzz target: the boot stage's cache file (`cache::record::parse`, the
//! `obj.json` under `var/lib/leasehook/instances/<id>/` read back at every boot),
//! and the folder name an instance id turns into.
#![no_main]

use leasehook_core::cache::record;
use leasehook_fuzz::{first_line, text};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let t = text(data);
    let (id, rest) = first_line(&t);
    let dir = record::instance_dir_name(id).unwrap_or_else(|_| "i-0123".to_owned());
    if let Ok(r) = record::parse(rest.as_bytes(), &dir) {
        // What parses must encode and parse back the same.
        let again = record::parse(&r.encode(), &dir);
        assert!(again.is_ok(), "a parsed record does not read back: {again:?}");
    }
});

// SPDX-License-Identifier: Apache-2.0
//! Fuzz target: `leasehook query` key paths (`query::parse`, aliases) looked up in
//! a fuzzed instance-data document, and the listing and suggestions on a miss.
#![no_main]

use leasehook_core::query;
use leasehook_fuzz::{first_line, text};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let t = text(data);
    let (path, doc) = first_line(&t);
    let Ok(doc) = serde_json::from_str::<serde_json::Value>(doc) else {
        return;
    };
    let path = query::alias(path).unwrap_or_else(|| path.to_owned());
    if let Ok(p) = query::parse(&path) {
        match query::lookup(&doc, &p) {
            Ok(v) => {
                let _ = query::list_keys(v, &p.to_string());
            }
            Err(_) => {
                let keys: Vec<String> = doc
                    .as_object()
                    .map(|m| m.keys().cloned().collect())
                    .unwrap_or_default();
                let _ = query::nearest(&path, keys.iter().map(String::as_str));
            }
        }
    }
    let _ = query::template_data(&doc);
});

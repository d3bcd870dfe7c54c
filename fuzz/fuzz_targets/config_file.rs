// SPDX-License-Identifier: Apache-2.0
//! Fuzz target: leasehook's configuration files (`config::parse_file`), two of
//! them merged as `config.yaml` and a `config.d` drop-in, then shown both ways.
#![no_main]

use std::path::Path;

use leasehook_core::config::{self, Origin, Sources};
use leasehook_fuzz::{parts, text};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let p = parts(&text(data), 2);
    let layers: Vec<_> = [
        ("/etc/leasehook/config.yaml", &p[0]),
        ("/etc/leasehook/config.d/50-fuzz.yaml", &p[1]),
    ]
    .into_iter()
    .filter_map(|(path, t)| config::parse_file(path, t).ok())
    .collect();
    if let Ok(loaded) = config::merge(Path::new("/"), Origin::Default, &layers, &Sources::default()) {
        let _ = config::show_yaml(&loaded);
        let _ = config::show_json(&loaded);
    }
});

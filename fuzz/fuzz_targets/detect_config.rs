// SPDX-License-Identifier: Apache-2.0
//! Fuzz target: the configuration detection reads (`source::detect::decide`, whose
//! pure readers live in `source/detect/config.rs`). The input's NUL-separated parts
//! are `cloud.cfg`, a `cloud.cfg.d/*.cfg` file, leasehook's own config file,
//! `ds-identify.cfg` and the kernel command line.
#![no_main]

use std::path::PathBuf;

use leasehook_core::source::detect::{self, ConfigText, Snapshot};
use leasehook_fuzz::{parts, text};
use libfuzzer_sys::fuzz_target;

fn file(path: &str, text: &str) -> ConfigText {
    ConfigText {
        path: path.to_owned(),
        text: text.to_owned(),
    }
}

fuzz_target!(|data: &[u8]| {
    let p = parts(&text(data), 5);
    let s = Snapshot {
        root: PathBuf::from("/"),
        virt: "kvm".to_owned(),
        virt_from: "fuzz".to_owned(),
        proc_cmdline: Some(p[4].clone()),
        leasehook_config: (!p[2].is_empty()).then(|| file("/etc/leasehook/leasehook.yaml", &p[2])),
        cloud_config: vec![
            file("/etc/cloud/cloud.cfg", &p[0]),
            file("/etc/cloud/cloud.cfg.d/90-fuzz.cfg", &p[1]),
        ],
        ds_identify_config: Some(p[3].clone()),
        ..Snapshot::default()
    };
    let _ = detect::decide(&s);
});

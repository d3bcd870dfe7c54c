// SPDX-License-Identifier: Apache-2.0
//! Fuzz target: the configuration detection reads (`source::detect::decide`, whose
//! pure readers live in `source/detect/config.rs`). The input's NUL-separated parts
//! are `cloud.cfg`, a `cloud.cfg.d/*.cfg` file, leasehook's `datasource_list`
//! (comma-separated),
//! `ds-identify.cfg` and the kernel command line.
#![no_main]

use std::path::PathBuf;

use leasehook_core::source::detect::{self, ConfigText, ConfiguredList, Snapshot};
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
        leasehook_datasource_list: (!p[2].is_empty()).then(|| ConfiguredList {
            names: p[2].split(',').map(str::to_owned).collect(),
            from: "/etc/leasehook/config.yaml line 1".to_owned(),
        }),
        cloud_config: vec![
            file("/etc/cloud/cloud.cfg", &p[0]),
            file("/etc/cloud/cloud.cfg.d/90-fuzz.cfg", &p[1]),
        ],
        ds_identify_config: Some(p[3].clone()),
        ..Snapshot::default()
    };
    let _ = detect::decide(&s);
});

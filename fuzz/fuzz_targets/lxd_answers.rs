// SPDX-License-Identifier: Apache-2.0
//! Fuzz target: dev-lxd's answers (`source::lxd::data`). The input's NUL-separated
//! parts are the `meta-data` YAML, the `/1.0/config` JSON list, the `/1.0/devices`
//! JSON, then config keys and values in turn; all are parsed alone, then assembled
//! into instance data.
#![no_main]

use leasehook_core::source::lxd::data::{self, Context, Raw};
use leasehook_fuzz::{parts, text};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let p = parts(&text(data), 4);
    let [meta, config, devices, rest] = [&p[0], &p[1], &p[2], &p[3]];
    if let Ok(m) = data::parse_mapping(meta, "meta-data") {
        let _ = data::instance_id(&m);
    }
    let _ = data::config_keys(config, "config");
    let devices = data::parse_devices(devices, "devices").ok();
    let fields: Vec<&str> = rest.split('\0').collect();
    let config: Vec<(String, String)> = fields
        .chunks(2)
        .map(|kv| match kv {
            [k, v] => ((*k).to_owned(), (*v).to_owned()),
            [k] => ((*k).to_owned(), String::new()),
            _ => (String::new(), String::new()),
        })
        .collect();
    let raw = Raw {
        meta_data: meta.clone(),
        config,
        devices,
    };
    for virt in ["lxc", "kvm"] {
        let ctx = Context {
            socket: "/dev/lxd/sock".to_owned(),
            virt: virt.to_owned(),
            machine: "x86_64".to_owned(),
        };
        if let Ok(d) = data::assemble(&raw, &ctx) {
            let _ = d.sensitive_keys();
            let _ = d.redacted_ds();
        }
    }
});

// SPDX-License-Identifier: Apache-2.0
//! Fuzz target: NoCloud's pure steps (`source::nocloud`): the command line
//! `ds=nocloud;...` form, then `collect`, `seedfrom`, `apply_seedfrom` and
//! `finish`. The input's NUL-separated parts are the DMI serial, the kernel
//! command line, the seed folder's `meta-data`, `user-data` and `network-config`,
//! cloud-init's `datasource.NoCloud` settings (JSON, as the YAML reader hands them
//! over), and the `seedfrom` folder's `meta-data` and `network-config`.
#![no_main]

use leasehook_core::source::nocloud::{self, Inputs, SeedFiles};
use leasehook_fuzz::{parts, text};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

fn some(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

fuzz_target!(|data: &[u8]| {
    let p = parts(&text(data), 8);
    let _ = nocloud::parse_cmdline("ds=nocloud", &p[1]);
    let config = match serde_json::from_str::<Value>(&p[5]) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let inputs = Inputs {
        dmi_serial: some(&p[0]),
        cmdline: some(&p[1]),
        seed: (!p[2].is_empty()).then(|| SeedFiles {
            source: "/var/lib/cloud/seed/nocloud/".to_owned(),
            meta_data: p[2].clone().into_bytes(),
            user_data: p[3].clone().into_bytes(),
            vendor_data: None,
            network_config: some(&p[4]).map(String::into_bytes),
        }),
        config,
        label: None,
    };
    let Ok(mut c) = nocloud::collect(&inputs) else {
        return;
    };
    if let Ok(Some(dir)) = nocloud::seedfrom(&c) {
        let seed = SeedFiles {
            source: dir,
            meta_data: p[6].clone().into_bytes(),
            user_data: Vec::new(),
            vendor_data: None,
            network_config: some(&p[7]).map(String::into_bytes),
        };
        if nocloud::apply_seedfrom(&mut c, &seed).is_err() {
            return;
        }
    }
    if let Ok(d) = nocloud::finish(c) {
        let _ = d.sensitive_keys();
        let _ = d.redacted_ds();
    }
});

// SPDX-License-Identifier: Apache-2.0
//! Fuzz target: IMDS leaf values (`metadata::leaf_values`) and each known key of a
//! `macs/<mac>/` folder (`metadata::parse_nic`) holding the input, as JSON when it
//! parses and else as the plain text IMDS serves.
#![no_main]

use leasehook_core::metadata;
use leasehook_core::model::MacAddr;
use leasehook_fuzz::text;
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

const KEYS: [&str; 9] = [
    "device-number",
    "network-card",
    "local-ipv4s",
    "ipv6s",
    "subnet-ipv4-cidr-block",
    "subnet-ipv6-cidr-blocks",
    "ipv4-prefix",
    "ipv6-prefix",
    "interface-id",
];

fuzz_target!(|data: &[u8]| {
    let text = text(data);
    let value = serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text));
    let _ = metadata::leaf_values("fuzz", &value);
    let Ok(mac) = "02:00:00:00:00:01".parse::<MacAddr>() else {
        return;
    };
    for key in KEYS {
        let mut folder = Map::new();
        folder.insert(key.to_owned(), value.clone());
        let _ = metadata::parse_nic(mac, "fuzz", &folder);
    }
    if let Value::String(s) = &value {
        let _ = s.parse::<MacAddr>();
    }
});

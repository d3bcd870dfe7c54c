// SPDX-License-Identifier: Apache-2.0
//! Fuzz target: EC2 IMDS answers (`source::ec2::identity::assemble`): the identity
//! document JSON, the single-value keys and per-MAC keys, checked by the metadata
//! tree parser. The input's NUL-separated parts are the document, `instance-id`,
//! `availability-zone`, `region`, `local-hostname`, `mac`, then MAC, key and value
//! in turn.
#![no_main]

use leasehook_core::source::ec2::identity::{self, Answers};
use leasehook_fuzz::{parts, text};
use libfuzzer_sys::fuzz_target;

fn some(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

fuzz_target!(|data: &[u8]| {
    let p = parts(&text(data), 7);
    let mut answers = Answers {
        identity_document: some(&p[0]),
        instance_id: some(&p[1]),
        availability_zone: some(&p[2]),
        region: some(&p[3]),
        local_hostname: some(&p[4]),
        mac: some(&p[5]),
        ..Answers::default()
    };
    let fields: Vec<&str> = p[6].split('\0').collect();
    for triple in fields.chunks(3) {
        if let [mac, key, value] = triple {
            answers
                .nics
                .entry((*mac).to_owned())
                .or_default()
                .insert((*key).to_owned(), (*value).to_owned());
        }
    }
    if let Ok(d) = identity::assemble(&answers, "http://169.254.169.254", "aws") {
        let _ = d.sensitive_keys();
        let _ = d.redacted_ds();
    }
});

// SPDX-License-Identifier: Apache-2.0
//! Pure: YAML as cloud-init reads it.
//!
//! cloud-init reads YAML 1.1 with PyYAML: `yes`/`on` are booleans, `0644` is octal,
//! and a key that appears twice keeps its last value (LXD relies on that: it
//! appends the user's `user.meta-data` to its own meta-data). serde-saphyr reads it
//! the same way with these options; it has no value type of its own, so documents
//! become `serde_json::Value`.

use serde_json::Value;

/// Parses YAML the way cloud-init (PyYAML) does: YAML 1.1 scalars, the last of
/// repeated keys, `0644` as octal. The error's message never quotes the document.
pub(crate) fn yaml(text: &str) -> std::result::Result<Value, serde_saphyr::Error> {
    let options = serde_saphyr::options! {
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::LastWins,
        legacy_octal_numbers: true,
        with_snippet: false,
    };
    serde_saphyr::from_str_with_options(text, options)
}

/// A scalar as text (`true`, `3`, `Ec2`); `None` for lists, mappings and null.
pub(crate) fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_reads_like_pyyaml() {
        let v = yaml("instance-id: a\nlocal-hostname: h\ninstance-id: b\nmode: 0644\nok: yes\n")
            .unwrap();
        assert_eq!(v["instance-id"], "b");
        assert_eq!(v["mode"], 420);
        assert_eq!(v["ok"], true);
        let e = yaml("secret: [unclosed\n").unwrap_err().to_string();
        assert!(!e.contains("secret"), "{e}");
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Pure: what every cloud's datasource builds alike from its answers, for the
//! boot stage's instance-data.

use serde_json::{Map, Value};

use crate::error::{Error, Problem, Result};

/// The text at `obj[k]`, trimmed: `None` when absent, null or empty. Another
/// type, or a control character in it, is an error naming the field `{at}{k}`
/// (`at`: where `obj` is in its document).
pub fn text_field(obj: &Map<String, Value>, k: &str, at: &str) -> Result<Option<String>> {
    let bad = |reason: &str, value: &str| Error::Metadata {
        key: format!("{at}{k}"),
        problem: Problem::bad(reason, value),
    };
    match obj.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            let t = s.trim();
            if t.chars().any(char::is_control) {
                return Err(bad("holds a control character", t));
            }
            Ok((!t.is_empty()).then(|| t.to_owned()))
        }
        Some(v) => Err(bad("not a string", &v.to_string())),
    }
}

/// cloud-init's `meta_data` keys a datasource copies its answers to, each that
/// has a value (an absent answer is an absent key, never an empty one), in
/// the order given.
pub fn known_keys<'a>(
    known: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
) -> Map<String, Value> {
    known
        .into_iter()
        .filter_map(|(k, v)| Some((k.to_owned(), Value::String(v?.to_owned()))))
        .collect()
}

/// The `meta_data` keys every cloud's datasource copies its answers to, as
/// cloud-init: `instance-id`, and `local-hostname` and `availability-zone`
/// when known; then the cloud's `more` ([`known_keys`]).
pub fn meta_data(
    instance_id: &str,
    local_hostname: Option<&str>,
    availability_zone: Option<&str>,
    more: &[(&str, Option<&str>)],
) -> Map<String, Value> {
    let mut md = known_keys([
        ("instance-id", Some(instance_id)),
        ("local-hostname", local_hostname),
        ("availability-zone", availability_zone),
    ]);
    md.extend(known_keys(more.iter().copied()));
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_field_is_trimmed_text_or_an_error_naming_it() {
        let obj = serde_json::json!({"a": " x ", "b": "", "c": null, "d": 1, "e": "x\ny"});
        let Value::Object(obj) = obj else { panic!() };
        let f = |k| text_field(&obj, k, "doc/");
        assert_eq!(f("a").unwrap().as_deref(), Some("x"));
        for none in ["b", "c", "z"] {
            assert_eq!(f(none).unwrap(), None);
        }
        assert!(f("d").unwrap_err().to_string().contains("doc/d"));
        let e = f("e").unwrap_err().to_string();
        assert!(
            e.contains("doc/e") && e.contains("control character"),
            "{e}"
        );
    }

    #[test]
    fn only_the_keys_with_a_value() {
        let md = known_keys([("instance-id", Some("i-1")), ("region", None)]);
        assert_eq!(Value::Object(md), serde_json::json!({"instance-id": "i-1"}));
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Pure: what every cloud's datasource builds alike from its answers, for the
//! boot stage's instance-data. How each reads its documents is
//! [`super::doc`]'s (a line of text: [`super::doc::text`]).

use serde_json::{Map, Value};

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
    fn only_the_keys_with_a_value() {
        let md = known_keys([("instance-id", Some("i-1")), ("region", None)]);
        assert_eq!(Value::Object(md), serde_json::json!({"instance-id": "i-1"}));
    }
}

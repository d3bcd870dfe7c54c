// SPDX-License-Identifier: Apache-2.0
//! Pure: what every cloud's datasource builds alike from its answers, for the
//! boot stage's instance-data.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_keys_with_a_value() {
        let md = known_keys([("instance-id", Some("i-1")), ("region", None)]);
        assert_eq!(Value::Object(md), serde_json::json!({"instance-id": "i-1"}));
    }
}

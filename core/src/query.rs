// SPDX-License-Identifier: Apache-2.0
//! Pure: the key paths `leasehook query` takes, and looking one up in instance data.
//!
//! A path is segments joined by dots: `v1.instance_id`, `ds.meta-data.mac`. A key
//! that holds a dot (LXD's config keys do) is written in double quotes:
//! `ds.config."user.user-data"`; inside quotes `\"` is a quote and `\\` a
//! backslash. Outside quotes `[` and `]` are reserved for bracket segments
//! (`ds.list[0]`, `ds["a.b"]`), which are not read yet: [`Segment`] is the place
//! they will be added, and the parser already refuses them with a message saying
//! so, so a path written for a later leasehook never silently means something
//! else now.
//!
//! Lookups name what is missing the way an operator asks again: `ds has no key
//! "foo" (its keys: config, meta-data)`.

use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use crate::error::{Error, Result};

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Segment {
    /// A mapping key, bare or quoted.
    Key(String),
}

/// A parsed key path: at least one segment.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyPath {
    segments: Vec<Segment>,
}

/// The most keys named in a "no such key" message.
const SHOWN_KEYS: usize = 12;

fn bad(path: &str, reason: impl Into<String>) -> Error {
    Error::Query {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

impl KeyPath {
    /// The segments, in order.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }
}

impl FromStr for KeyPath {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        parse(text)
    }
}

/// Parses a key path (see the module docs).
pub fn parse(text: &str) -> Result<KeyPath> {
    if text.is_empty() {
        return Err(bad("(empty)", "an empty key path"));
    }
    let mut segments = Vec::new();
    let mut chars = text.char_indices().peekable();
    loop {
        // One segment.
        let seg = if let Some((_, '"')) = chars.peek() {
            chars.next();
            let mut key = String::new();
            loop {
                match chars.next() {
                    None => return Err(bad(text, "a quoted key is not closed")),
                    Some((_, '"')) => break,
                    Some((i, '\\')) => match chars.next() {
                        Some((_, c @ ('"' | '\\'))) => key.push(c),
                        _ => {
                            return Err(bad(
                                text,
                                format!(
                                    "at character {}: only \\\" and \\\\ may follow a backslash",
                                    i + 1
                                ),
                            ));
                        }
                    },
                    Some((_, c)) => key.push(c),
                }
            }
            key
        } else {
            let mut key = String::new();
            while let Some((i, c)) = chars.peek().copied() {
                match c {
                    '.' => break,
                    '[' | ']' => {
                        return Err(bad(
                            text,
                            format!(
                                "at character {}: bracket segments ([0], [\"a.b\"]) are not supported yet; quote a key that holds a dot: \"a.b\"",
                                i + 1
                            ),
                        ));
                    }
                    '"' => {
                        return Err(bad(
                            text,
                            format!("at character {}: a quote may only start a segment", i + 1),
                        ));
                    }
                    _ => {
                        key.push(c);
                        chars.next();
                    }
                }
            }
            if key.is_empty() {
                return Err(bad(text, "an empty segment (two dots, or a dot at an end)"));
            }
            key
        };
        segments.push(Segment::Key(seg));
        match chars.next() {
            None => break,
            Some((_, '.')) => {
                if chars.peek().is_none() {
                    return Err(bad(text, "an empty segment (two dots, or a dot at an end)"));
                }
            }
            Some((i, _)) => {
                return Err(bad(
                    text,
                    format!("at character {}: a dot must follow a quoted key", i + 1),
                ));
            }
        }
    }
    Ok(KeyPath { segments })
}

/// Whether a key must be quoted to be written in a path.
fn needs_quotes(key: &str) -> bool {
    key.is_empty() || key.contains(['.', '"', '[', ']', '\\'])
}

impl fmt::Display for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Key(k) if needs_quotes(k) => {
                write!(f, "\"{}\"", k.replace('\\', "\\\\").replace('"', "\\\""))
            }
            Self::Key(k) => f.write_str(k),
        }
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.segments.iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            write!(f, "{s}")?;
        }
        Ok(())
    }
}

/// What kind of value stands where a mapping was expected, for messages.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// The value at `path` in `doc`.
pub fn lookup<'a>(doc: &'a Value, path: &KeyPath) -> Result<&'a Value> {
    let mut node = doc;
    for (depth, seg) in path.segments.iter().enumerate() {
        let so_far = || {
            let p = KeyPath {
                segments: path.segments.iter().take(depth).cloned().collect(),
            };
            if depth == 0 {
                "instance data".to_owned()
            } else {
                p.to_string()
            }
        };
        let Segment::Key(key) = seg;
        node = match node {
            Value::Object(map) => map.get(key).ok_or_else(|| {
                let mut keys: Vec<String> = map
                    .keys()
                    .take(SHOWN_KEYS)
                    .map(|k| Segment::Key(k.clone()).to_string())
                    .collect();
                if map.len() > SHOWN_KEYS {
                    keys.push("…".to_owned());
                }
                bad(
                    &path.to_string(),
                    format!(
                        "{} has no key {key:?} (its keys: {})",
                        so_far(),
                        if keys.is_empty() {
                            "none".to_owned()
                        } else {
                            keys.join(", ")
                        }
                    ),
                )
            })?,
            other => {
                return Err(bad(
                    &path.to_string(),
                    format!("{} is {}, not a mapping", so_far(), kind(other)),
                ));
            }
        };
    }
    Ok(node)
}

/// The keys of a mapping, sorted (what `--list-keys` prints).
pub fn list_keys(v: &Value, shown: &str) -> Result<Vec<String>> {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<String> = map.keys().cloned().collect();
            keys.sort();
            Ok(keys)
        }
        other => Err(bad(
            shown,
            format!("{} has no keys: it is {}", shown, kind(other)),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn keys(p: &KeyPath) -> Vec<&str> {
        p.segments()
            .iter()
            .map(|Segment::Key(k)| k.as_str())
            .collect()
    }

    #[test]
    fn paths_parse() {
        let cases: &[(&str, &[&str])] = &[
            ("v1", &["v1"]),
            ("v1.instance_id", &["v1", "instance_id"]),
            (
                "ds.meta-data.local-hostname",
                &["ds", "meta-data", "local-hostname"],
            ),
            (
                r#"ds.config."user.user-data""#,
                &["ds", "config", "user.user-data"],
            ),
            (r#""a.b""#, &["a.b"]),
            (r#""a.b".c"#, &["a.b", "c"]),
            (r#""""#, &[""]),
            (r#""say \"hi\"".x"#, &["say \"hi\"", "x"]),
            (r#""back\\slash""#, &["back\\slash"]),
            ("ünï.cødé", &["ünï", "cødé"]),
            ("a b.c", &["a b", "c"]),
        ];
        for (text, want) in cases {
            let p = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(keys(&p), *want, "{text}");
            // Display writes a path that parses back to the same segments.
            assert_eq!(parse(&p.to_string()).unwrap(), p, "{text} -> {p}");
        }
        assert_eq!(
            parse(r#"ds.config."user.user-data""#).unwrap().to_string(),
            r#"ds.config."user.user-data""#
        );
    }

    #[test]
    fn bad_paths_say_why() {
        let cases = [
            ("", "empty key path"),
            (".", "empty segment"),
            ("a.", "empty segment"),
            (".a", "empty segment"),
            ("a..b", "empty segment"),
            (r#""a.b"#, "not closed"),
            (r#""a"b"#, "character 4: a dot must follow a quoted key"),
            (r#"a"b""#, "character 2: a quote may only start a segment"),
            (r#""a\n""#, "only \\\" and \\\\ may follow"),
            ("ds.list[0]", "character 8: bracket segments"),
            (r#"ds["a.b"]"#, "bracket segments"),
            ("a]", "bracket segments"),
        ];
        for (text, want) in cases {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
            assert!(e.starts_with("instance-data key "), "{e}");
        }
    }

    #[test]
    fn lookups_name_what_is_missing() {
        let doc = json!({
            "v1": {"instance_id": "i-1", "region": null},
            "ds": {"config": {"user.user-data": "#cloud-config", "user.tag": "x"}, "list": [1]},
        });
        let at = |p: &str| lookup(&doc, &parse(p).unwrap()).cloned();
        assert_eq!(at("v1.instance_id").unwrap(), "i-1");
        assert_eq!(at("v1.region").unwrap(), Value::Null);
        assert_eq!(
            at(r#"ds.config."user.user-data""#).unwrap(),
            "#cloud-config"
        );
        assert_eq!(at("ds").unwrap()["list"], json!([1]));
        let cases = [
            (
                "nope",
                r#"instance data has no key "nope" (its keys: ds, v1)"#,
            ),
            (
                "ds.config.user",
                r#"ds.config has no key "user" (its keys: "user.tag", "user.user-data")"#,
            ),
            (
                "v1.instance_id.x",
                "v1.instance_id is a string, not a mapping",
            ),
            ("ds.list.0", "ds.list is a list, not a mapping"),
            ("v1.region.x", "v1.region is null, not a mapping"),
        ];
        for (p, want) in cases {
            let e = at(p).unwrap_err().to_string();
            assert!(e.contains(want), "{p}: {e}");
        }
        assert_eq!(list_keys(&doc, "instance data").unwrap(), ["ds", "v1"]);
        assert_eq!(
            list_keys(&doc["ds"]["config"], "ds.config").unwrap(),
            ["user.tag", "user.user-data"]
        );
        assert!(
            list_keys(&doc["ds"]["list"], "ds.list")
                .unwrap_err()
                .to_string()
                .contains("ds.list has no keys: it is a list")
        );
    }

    #[test]
    fn long_key_lists_are_cut() {
        let map: serde_json::Map<String, Value> =
            (0..20).map(|i| (format!("k{i:02}"), json!(i))).collect();
        let doc = json!({ "m": map });
        let e = lookup(&doc, &parse("m.x").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("k11, …)"), "{e}");
        assert!(!e.contains("k12"), "{e}");
    }
}

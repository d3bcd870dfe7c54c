// SPDX-License-Identifier: Apache-2.0
//! Pure: the key paths `leasehook query` takes, and looking one up in instance data.
//!
//! A path is segments joined by dots: `v1.instance_id`, `ds.meta-data.mac`. A key
//! that holds a dot (LXD's config keys do) is written in double quotes,
//! `ds.config."user.user-data"`, or in brackets, with or without quotes:
//! `ds.config["user.user-data"]`, `ds['1.0'].config`, `ds[1.0].config` (inside
//! quotes `\"` is the quote and `\\` a backslash; unquoted, a bracket holds
//! anything but `[`, `]` and quotes). Digits in brackets (`ds.list[0]`) pick an item
//! of a list, or the key spelled by the digits on a mapping. A bracket follows a
//! segment directly, without a dot, as in Python and Jinja.
//!
//! Lookups name what is missing the way an operator asks again, with the nearest
//! keys: `v1 has no key "instance-idd" (its keys: …); nearest: instance-id,
//! instance_id`.

use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use crate::error::{Error, Result};

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Segment {
    /// A mapping key: bare, quoted, or in brackets (`["a.b"]`, `[1.0]`).
    Key(String),
    /// Digits in brackets (`[0]`): an item of a list, or on a mapping the key
    /// spelled by the digits.
    Index(usize),
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

/// Reads a quoted key whose opening `quote` was just taken: `\<quote>` is the quote,
/// `\\` a backslash.
fn quoted(
    text: &str,
    quote: char,
    chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>,
) -> Result<String> {
    let mut key = String::new();
    loop {
        match chars.next() {
            None => return Err(bad(text, "a quoted key is not closed")),
            Some((_, c)) if c == quote => return Ok(key),
            Some((i, '\\')) => match chars.next() {
                Some((_, c)) if c == quote || c == '\\' => key.push(c),
                _ => {
                    return Err(bad(
                        text,
                        format!(
                            "at character {}: only \\{quote} and \\\\ may follow a backslash",
                            i + 1
                        ),
                    ));
                }
            },
            Some((_, c)) => key.push(c),
        }
    }
}

/// Reads a bracket segment whose `[` was just taken: `["a.b"]`, `['a.b']`, `[1.0]`,
/// `[0]`.
fn bracket(
    text: &str,
    chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>,
) -> Result<Segment> {
    let Some((_, q @ ('"' | '\''))) = chars.peek().copied() else {
        let mut key = String::new();
        loop {
            match chars.next() {
                None => return Err(bad(text, "a [ is not closed")),
                Some((_, ']')) => break,
                Some((i, c @ ('[' | '"' | '\''))) => {
                    return Err(bad(
                        text,
                        format!(
                            "at character {}: {c} inside brackets; quote the whole key: [\"a[b\"]",
                            i + 1
                        ),
                    ));
                }
                Some((_, c)) => key.push(c),
            }
        }
        if key.is_empty() {
            return Err(bad(text, "an empty bracket segment []"));
        }
        return Ok(match key.parse::<usize>() {
            Ok(n) if key.bytes().all(|b| b.is_ascii_digit()) => Segment::Index(n),
            _ => Segment::Key(key),
        });
    };
    chars.next();
    let seg = Segment::Key(quoted(text, q, chars)?);
    match chars.next() {
        Some((_, ']')) => Ok(seg),
        None => Err(bad(text, "a [ is not closed")),
        Some((i, _)) => Err(bad(
            text,
            format!(
                "at character {}: ] must follow a quoted key in brackets",
                i + 1
            ),
        )),
    }
}

/// Parses a key path (see the module docs).
pub fn parse(text: &str) -> Result<KeyPath> {
    const EMPTY: &str = "an empty segment (two dots, or a dot at an end)";
    if text.is_empty() {
        return Err(bad("(empty)", "an empty key path"));
    }
    let mut segments = Vec::new();
    let mut chars = text.char_indices().peekable();
    // Whether a dotted segment comes next: at the start and after each dot.
    let mut dotted = true;
    loop {
        if dotted {
            match chars.peek().copied() {
                Some((_, '[')) if segments.is_empty() => {
                    chars.next();
                    segments.push(bracket(text, &mut chars)?);
                }
                Some((_, '"')) => {
                    chars.next();
                    segments.push(Segment::Key(quoted(text, '"', &mut chars)?));
                }
                _ => {
                    let mut key = String::new();
                    while let Some((i, c)) = chars.peek().copied() {
                        match c {
                            '.' | '[' => break,
                            ']' => {
                                return Err(bad(
                                    text,
                                    format!("at character {}: a ] without its [", i + 1),
                                ));
                            }
                            '"' => {
                                return Err(bad(
                                    text,
                                    format!(
                                        "at character {}: a quote may only start a segment",
                                        i + 1
                                    ),
                                ));
                            }
                            _ => {
                                key.push(c);
                                chars.next();
                            }
                        }
                    }
                    if key.is_empty() {
                        return Err(bad(text, EMPTY));
                    }
                    segments.push(Segment::Key(key));
                }
            }
        }
        match chars.next() {
            None => break,
            Some((_, '.')) => {
                if chars.peek().is_none() {
                    return Err(bad(text, EMPTY));
                }
                dotted = true;
            }
            Some((_, '[')) => {
                segments.push(bracket(text, &mut chars)?);
                dotted = false;
            }
            Some((i, _)) => {
                return Err(bad(
                    text,
                    format!(
                        "at character {}: a dot or [ must follow a quoted key or ]",
                        i + 1
                    ),
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
            Self::Index(n) => write!(f, "[{n}]"),
        }
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.segments.iter().enumerate() {
            if i > 0 && matches!(s, Segment::Key(_)) {
                f.write_str(".")?;
            }
            write!(f, "{s}")?;
        }
        Ok(())
    }
}

/// A key as compared for suggestions: lower case, with `-`, `.` and `/` read as
/// `_` (the template aliases' spelling).
fn folded(key: &str) -> Vec<char> {
    key.chars()
        .map(|c| match c {
            '-' | '.' | '/' => '_',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

/// The Levenshtein distance of two keys.
fn distance(a: &[char], b: &[char]) -> usize {
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diag = i;
        let mut left = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let up = row.get(j + 1).copied().unwrap_or(usize::MAX);
            let cost = diag + usize::from(ca != cb);
            let here = cost.min(up + 1).min(left + 1);
            diag = up;
            if let Some(slot) = row.get_mut(j + 1) {
                *slot = here;
            }
            left = here;
        }
    }
    row.last().copied().unwrap_or(0)
}

/// The most keys offered as "nearest".
const NEAREST: usize = 3;

/// The existing keys nearest to `wanted`, best first: those within a third of its
/// length in edits (at least one), or that begin with it or it with them, ignoring
/// case and reading `-`, `.`, `/` as `_`.
pub fn nearest<'a>(wanted: &str, keys: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let w = folded(wanted);
    let limit = (w.len() / 3).max(1);
    let mut scored: Vec<(usize, &str)> = keys
        .into_iter()
        .filter_map(|k| {
            let f = folded(k);
            let d = distance(&w, &f);
            (d <= limit || f.starts_with(&w) || w.starts_with(&f)).then_some((d, k))
        })
        .collect();
    scored.sort_unstable();
    scored.into_iter().take(NEAREST).map(|(_, k)| k).collect()
}

/// What kind of value stands where a mapping was expected, for messages.
fn kind(v: &Value) -> &'static str {
    crate::model::json_kind(v, "a mapping")
}

/// "`so_far` has no key ..." with the keys there and the nearest ones.
fn no_key(path: &KeyPath, so_far: &str, key: &str, map: &serde_json::Map<String, Value>) -> Error {
    let show = |k: &str| Segment::Key(k.to_owned()).to_string();
    let mut keys: Vec<String> = map.keys().take(SHOWN_KEYS).map(|k| show(k)).collect();
    if map.len() > SHOWN_KEYS {
        keys.push("…".to_owned());
    }
    let near: Vec<String> = nearest(key, map.keys().map(String::as_str))
        .into_iter()
        .map(show)
        .collect();
    bad(
        &path.to_string(),
        format!(
            "{so_far} has no key {key:?} (its keys: {}){}",
            if keys.is_empty() {
                "none".to_owned()
            } else {
                keys.join(", ")
            },
            if near.is_empty() {
                String::new()
            } else {
                format!("; nearest: {}", near.join(", "))
            }
        ),
    )
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
        node = match (seg, node) {
            (Segment::Key(key), Value::Object(map)) => map
                .get(key)
                .ok_or_else(|| no_key(path, &so_far(), key, map))?,
            (Segment::Index(n), Value::Object(map)) => {
                let key = n.to_string();
                map.get(&key)
                    .ok_or_else(|| no_key(path, &so_far(), &key, map))?
            }
            (Segment::Index(n), Value::Array(items)) => items.get(*n).ok_or_else(|| {
                bad(
                    &path.to_string(),
                    format!(
                        "{} is a list of {} item(s): [{n}] is past its end",
                        so_far(),
                        items.len()
                    ),
                )
            })?,
            (Segment::Key(_), Value::Array(_)) => {
                return Err(bad(
                    &path.to_string(),
                    format!(
                        "{} is a list, not a mapping: pick an item with [0]",
                        so_far()
                    ),
                ));
            }
            (_, other) => {
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

/// A key's template alias: `-`, `.` and `/` become `_` (cloud-init's
/// `get_jinja_variable_alias`); `None` when the key has none of them.
pub fn alias(key: &str) -> Option<String> {
    key.contains(['-', '.', '/'])
        .then(|| key.replace(['-', '.', '/'], "_"))
}

/// Whether a top-level key is a versioned section (`v1`, `v2`, ...).
fn versioned(key: &str) -> bool {
    key.strip_prefix('v')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Adds each key's alias beside it, walking mappings and lists.
fn with_aliases(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut out: serde_json::Map<String, Value> = map
                .iter()
                .map(|(k, v)| (k.clone(), with_aliases(v)))
                .collect();
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for k in keys {
                if let Some(a) = alias(k)
                    && !out.contains_key(&a)
                    && let Some(v) = out.get(k).cloned()
                {
                    out.insert(a, v);
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(with_aliases).collect()),
        other => other.clone(),
    }
}

/// What a `--format` template sees: the document with cloud-init's conveniences
/// (`convert_jinja_instance_data`). Each key holding `-`, `.` or `/` also has an
/// alias with `_` in their place (`local_hostname`, `ds.meta_data`,
/// `ds["1.0"].config.user_user_data`), and the keys of each versioned section
/// (`v1`) are also at the top level (`{{ platform }}`, `{{ instance_id }}`).
///
/// Unlike cloud-init, neither ever replaces a key of the document: a real key wins
/// over an alias and over a `v1` key of the same name (cloud-init lets whichever
/// comes later in sorted order win); when two keys share an alias (`a-b`, `a.b`),
/// the first in sorted order has it. Lists are walked too.
pub fn template_data(doc: &Value) -> Value {
    let mut out = with_aliases(doc);
    if let Value::Object(top) = &mut out {
        let lifted: Vec<(String, Value)> = top
            .iter()
            .filter(|(k, _)| versioned(k))
            .filter_map(|(_, v)| v.as_object())
            .flat_map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())))
            .collect();
        for (k, v) in lifted {
            top.entry(k).or_insert(v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn keys(p: &KeyPath) -> Vec<String> {
        p.segments()
            .iter()
            .map(|s| match s {
                Segment::Key(k) => k.clone(),
                Segment::Index(n) => format!("#{n}"),
            })
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
            // Brackets, quoted (either quote) or not.
            (r#"ds["1.0"].config"#, &["ds", "1.0", "config"]),
            ("ds['1.0'].config", &["ds", "1.0", "config"]),
            ("ds[1.0].config", &["ds", "1.0", "config"]),
            (
                r#"ds.config["user.user-data"]"#,
                &["ds", "config", "user.user-data"],
            ),
            (
                "ds.config[user.user-data]",
                &["ds", "config", "user.user-data"],
            ),
            (r#"ds["1.0"]["config"]"#, &["ds", "1.0", "config"]),
            (r#"["a.b"].c"#, &["a.b", "c"]),
            (r#""a.b"["c"]"#, &["a.b", "c"]),
            ("ds.list[0]", &["ds", "list", "#0"]),
            ("m[10][2].x", &["m", "#10", "#2", "x"]),
            ("m[01]", &["m", "#1"]),
            ("m[-1]", &["m", "-1"]),
            ("m[a b]", &["m", "a b"]),
            (r#"m["a]b"]"#, &["m", "a]b"]),
            (r"m['it\'s']", &["m", "it's"]),
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
            (
                r#""a"b"#,
                "character 4: a dot or [ must follow a quoted key",
            ),
            (r#"a"b""#, "character 2: a quote may only start a segment"),
            (r#""a\n""#, "only \\\" and \\\\ may follow"),
            ("a]", "character 2: a ] without its ["),
            ("ds[", "a [ is not closed"),
            ("ds[1.0", "a [ is not closed"),
            (r#"ds["1.0""#, "a [ is not closed"),
            (r#"ds["1.0"#, "quoted key is not closed"),
            ("ds[]", "an empty bracket segment"),
            ("ds[a[b]", "character 5: [ inside brackets"),
            (r#"ds["a"b]"#, "character 7: ] must follow a quoted key"),
            ("ds[0]x", "character 6: a dot or [ must follow"),
            ("ds.[0]", "empty segment"),
            ("ds[0].", "empty segment"),
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

    /// cloud-init's LXD layout: config under the API version `1.0`.
    fn lxd_doc() -> Value {
        json!({
            "v1": {"platform": "lxd", "subplatform": "LXD socket API v. 1.0 (/dev/lxd/sock)",
                   "local-hostname": "myhost", "local_hostname": "myhost"},
            "ds": {
                "1.0": {"config": {"user.user-data": "#cloud-config\n", "user.tag": "blue"}},
                "meta-data": "instance-id: i-87018aed\n",
                "network_config": {"version": 1, "config": [{"type": "physical", "name": "eth0"}]},
            },
        })
    }

    fn ec2_doc() -> Value {
        json!({
            "v1": {"availability-zone": "us-east-1a", "availability_zone": "us-east-1a",
                   "instance-id": "i-0fedcba9876543210", "instance_id": "i-0fedcba9876543210"},
            "ds": {"meta-data": {
                "block-device-mapping": {"ami": "/dev/xvda"},
                "network": {"interfaces": {"macs": {"0e:12:34:56:78:9a": {"device-number": "0"}}}},
                "public-keys": {"0": {"openssh-key": "ssh-ed25519 AAAA"}},
            }},
        })
    }

    #[test]
    fn every_path_form_reaches_the_same_value() {
        let lxd = lxd_doc();
        let at = |doc: &Value, p: &str| lookup(doc, &parse(p).unwrap()).unwrap().clone();
        for p in [
            r#"ds."1.0".config"#,
            r#"ds["1.0"].config"#,
            "ds['1.0'].config",
            "ds[1.0].config",
            r#"ds["1.0"]["config"]"#,
        ] {
            assert_eq!(at(&lxd, p)["user.tag"], "blue", "{p}");
        }
        for p in [
            r#"ds."1.0".config."user.user-data""#,
            r#"ds[1.0].config["user.user-data"]"#,
            "ds[1.0].config[user.user-data]",
            "ds[1.0].config['user.user-data']",
        ] {
            assert_eq!(at(&lxd, p), "#cloud-config\n", "{p}");
        }
        assert_eq!(at(&lxd, "ds.network_config.config[0].name"), "eth0");
        assert_eq!(at(&lxd, "v1.local-hostname"), "myhost");

        let ec2 = ec2_doc();
        let mac = "0e:12:34:56:78:9a";
        for p in [
            format!(r#"ds.meta-data.network.interfaces.macs."{mac}".device-number"#),
            format!("ds.meta-data.network.interfaces.macs.{mac}.device-number"),
            format!(r#"ds["meta-data"].network.interfaces.macs["{mac}"]["device-number"]"#),
            format!("ds[meta-data].network[interfaces].macs[{mac}].device-number"),
        ] {
            assert_eq!(at(&ec2, &p), "0", "{p}");
        }
        // Digits on a mapping spell its key.
        assert_eq!(
            at(&ec2, "ds.meta-data.public-keys[0].openssh-key"),
            "ssh-ed25519 AAAA"
        );
        assert_eq!(
            at(&ec2, "ds.meta-data.public-keys.0.openssh-key"),
            "ssh-ed25519 AAAA"
        );
        assert_eq!(at(&ec2, "v1.availability_zone"), "us-east-1a");
    }

    #[test]
    fn misses_name_the_nearest_keys() {
        let lxd = lxd_doc();
        let ec2 = ec2_doc();
        let err = |doc: &Value, p: &str| lookup(doc, &parse(p).unwrap()).unwrap_err().to_string();
        let cases = [
            (
                &lxd,
                "ds[1.1].config",
                r#"ds has no key "1.1" (its keys: "1.0", meta-data, network_config); nearest: "1.0""#,
            ),
            (&lxd, "ds.meta_data", "nearest: meta-data"),
            (
                &lxd,
                r#"ds[1.0].config["user.tga"]"#,
                r#"nearest: "user.tag""#,
            ),
            (
                &lxd,
                "ds.network_config.config[3]",
                "ds.network_config.config is a list of 1 item(s): [3] is past its end",
            ),
            (
                &lxd,
                "ds.network_config.config.name",
                "is a list, not a mapping: pick an item with [0]",
            ),
            (&ec2, "v1.instance-idd", "nearest: instance-id, instance_id"),
            (
                &ec2,
                "v1.Availability-Zone",
                "nearest: availability-zone, availability_zone",
            ),
            (&ec2, "ds.meta-data.public-keys[1]", r#"has no key "1""#),
        ];
        for (doc, p, want) in cases {
            let e = err(doc, p);
            assert!(e.contains(want), "{p}: {e}");
            assert!(
                e.starts_with(&format!("instance-data key {}", parse(p).unwrap())),
                "{e}"
            );
        }
        // Far-off names suggest nothing.
        assert!(!err(&ec2, "v1.zzzzzzzz").contains("nearest"));
        assert_eq!(
            nearest("user", ["user.tag", "user.user-data", "x"]),
            ["user.tag", "user.user-data"]
        );
    }

    #[test]
    fn templates_see_v1_at_the_top_and_aliases() {
        let mut lxd = lxd_doc();
        lxd["platform"] = json!("a real top-level key");
        let t = template_data(&lxd);
        // v1 at the top level, with its own aliases; a real key wins.
        assert_eq!(t["subplatform"], "LXD socket API v. 1.0 (/dev/lxd/sock)");
        assert_eq!(t["platform"], "a real top-level key");
        assert_eq!(t["v1"]["platform"], "lxd");
        assert_eq!(t["local_hostname"], "myhost");
        assert_eq!(t["local-hostname"], "myhost");
        // Aliases at every depth, through lists.
        assert_eq!(t["ds"]["meta_data"], t["ds"]["meta-data"]);
        assert_eq!(t["ds"]["1_0"]["config"]["user_tag"], "blue");
        assert_eq!(
            t["ds"]["1.0"]["config"]["user_user_data"],
            "#cloud-config\n"
        );
        let ec2 = template_data(&json!({
            "v1": {"availability-zone": "us-east-1a"},
            "ds": {"items": [{"device-number": "0"}], "a-b": 1, "a.b": 2, "a_c": 3, "a-c": 4},
        }));
        assert_eq!(ec2["availability_zone"], "us-east-1a");
        assert_eq!(ec2["ds"]["items"][0]["device_number"], "0");
        assert_eq!(
            ec2["ds"]["a_b"], 1,
            "the first in sorted order has the alias"
        );
        assert_eq!(ec2["ds"]["a_c"], 3, "a real key wins over an alias");
        assert_eq!(alias("plain"), None);
        assert_eq!(
            alias("user.user-data/x").as_deref(),
            Some("user_user_data_x")
        );
        assert!(versioned("v1") && versioned("v12") && !versioned("v") && !versioned("vendordata"));
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

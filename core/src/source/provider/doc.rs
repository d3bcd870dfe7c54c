// SPDX-License-Identifier: Apache-2.0
//! Pure: the clouds' JSON documents read strictly into `#[derive(Deserialize)]`
//! types: the network ones (GCE's `network-interfaces`, Azure's `network`, OCI's
//! `vnics`, `OpenStack`'s `network_data.json`), the identity ones (EC2's
//! instance-identity document, Azure's `compute`, OCI's `instance`,
//! `OpenStack`'s `meta_data.json`) and saved metadata trees (ECS's).
//!
//! A cloud describes exactly the keys it reads as serde types; [`read`] parses
//! the (already size-capped) body and fills them. Keys the types do not name are
//! ignored, since clouds add keys. Everything else is an [`Error::Metadata`]
//! naming the key's path below the document (`links/0/id`) and showing the value
//! as received, escaped and cut by [`Problem`]'s display:
//!
//! * a required key missing (`…/mac: missing`);
//! * a value of the wrong type: a number for a string, a list for an object, an
//!   object given where a struct is expected even when every key of the struct is
//!   optional (serde would otherwise read a struct from a list);
//! * a value that does not parse (an address, a network, a MAC, a line of
//!   [`text`] holding a control character).
//!
//! A document the datasource publishes whole ([`read_object`]) is kept as
//! received beside its types, and capped in size by its reader.
//!
//! Enums are not read: a closed set of names (`OpenStack`'s link and network
//! types) is a `String` the cloud checks, since an unknown name is often to be
//! skipped rather than refused.
//!
//! What the types cannot say (a netmask that is not contiguous, an address
//! outside its subnet, a MAC listed twice, too many entries) each cloud checks
//! after reading and reports with [`bad`] or [`at_most`], naming the key the same
//! way.
//!
//! serde's own errors name neither the key nor the value; the small
//! [`Deserializer`] here walks the parsed [`Value`] and adds both as the error
//! travels out, so no document is ever walked by hand.

use std::fmt;

use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess};
use serde::de::{Expected, Unexpected, Visitor};
use serde::{Deserialize, forward_to_deserialize_any};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::model::{MacAddr, Problem};

/// Parses `body` as JSON into `T` (see the module docs). `what` names the
/// document in a syntax error (`Azure IMDS network: expected value at line 1
/// column 1`); `key` is the document's path, which every key error starts with.
pub fn read<T: DeserializeOwned>(body: &str, what: &str, key: &str) -> Result<T> {
    from_value(&parse(body, what)?, key)
}

/// Parses `body`, a JSON object of at most `max_bytes`, into `T` (as [`read`])
/// and keeps it as received too: for a document the datasource publishes whole
/// (instance-data's `ds`), unknown keys included. A larger body is an error
/// naming `key`, whatever the transport let through: the parse is pure and a
/// config drive's file or a saved answer has no client's cap.
pub fn read_object<T: DeserializeOwned>(
    body: &str,
    max_bytes: u64,
    what: &str,
    key: &str,
) -> Result<(T, Map<String, Value>)> {
    if u64::try_from(body.len()).map_or(true, |n| n > max_bytes) {
        let reason = format!("larger than {max_bytes} bytes");
        return Err(bad(key, reason, &body.len().to_string()));
    }
    let value = parse(body, what)?;
    let read = from_value(&value, key)?;
    match value {
        Value::Object(object) => Ok((read, object)),
        other => Err(bad(key, "not a JSON object", &other.to_string())),
    }
}

fn parse(body: &str, what: &str) -> Result<Value> {
    serde_json::from_str(body).map_err(|e| Error::Syntax {
        what: what.to_owned(),
        message: e.to_string(),
    })
}

/// Reads an already parsed `value` into `T`, strictly; errors name keys below
/// `key`.
pub fn from_value<T: DeserializeOwned>(value: &Value, key: &str) -> Result<T> {
    T::deserialize(Strict(value)).map_err(|f| f.with_value(value).into_error(key))
}

/// The error for a value the types accepted but the cloud's rules refuse.
pub fn bad(key: impl Into<String>, reason: impl Into<String>, value: &str) -> Error {
    Error::Metadata {
        key: key.into(),
        problem: Problem::bad(reason, value),
    }
}

/// `Ok` when `list` has at most `max` entries, else an error naming `key` that
/// says how many (`more than 64 NICs`, with `what` = `NICs`).
pub fn at_most<T>(list: &[T], max: usize, key: &str, what: &str) -> Result<()> {
    if list.len() > max {
        return Err(bad(
            key,
            format!("more than {max} {what}"),
            &list.len().to_string(),
        ));
    }
    Ok(())
}

/// `deserialize_with` for a MAC written `aa:bb:cc:dd:ee:ff` (either case).
pub fn mac<'de, D: Deserializer<'de>>(d: D) -> Result<MacAddr, D::Error> {
    let text = String::deserialize(d)?;
    text.parse::<MacAddr>()
        .map_err(|p| de::Error::custom(p.reason))
}

/// `deserialize_with` for one line of text that may be absent: trimmed, and
/// `None` when absent (with `#[serde(default)]`), `null` or empty, as cloud-init
/// reads an empty answer; a control character in it is an error (the text ends
/// up in logs, file names and instance-data).
pub fn text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let Some(text) = Option::<String>::deserialize(d)? else {
        return Ok(None);
    };
    let text = text.trim();
    if text.chars().any(char::is_control) {
        return Err(de::Error::custom("holds a control character"));
    }
    Ok((!text.is_empty()).then(|| text.to_owned()))
}

/// `deserialize_with` for a required line of [`text`]: absent is `missing`,
/// `null` or empty an error too.
pub fn required_text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    text(d)?.ok_or_else(|| de::Error::custom("empty"))
}

/// `deserialize_with` for a value kept as received, whatever its type (`null`
/// too: `Some(Value::Null)`); pair it with `#[serde(default)]` for `None` when
/// the key is absent.
pub fn kept<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// `deserialize_with` for a list that may be absent or `null` (both read as
/// empty); pair it with `#[serde(default)]`.
pub fn list<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

/// The last answer to one request: a document, or one key of a metadata tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Answer {
    /// Not asked yet.
    #[default]
    NotAsked,
    /// 404 (or no such file on a config drive, or a key its folder's listing
    /// does not name): nothing there yet.
    NotFound,
    /// The body.
    Body(String),
}

impl From<Option<String>> for Answer {
    /// A body, or `None` for 404.
    fn from(answer: Option<String>) -> Self {
        answer.map_or(Self::NotFound, Self::Body)
    }
}

impl Answer {
    /// The document read by `parse`; `T::default()` (nothing listed) before
    /// there is one.
    pub fn read<T: Default>(&self, parse: impl FnOnce(&str) -> Result<T>) -> Result<T> {
        match self {
            Self::Body(body) => parse(body),
            Self::NotAsked | Self::NotFound => Ok(T::default()),
        }
    }
}

/// What went wrong while reading, and where: the path grows as the error travels
/// out of the document, innermost key first.
#[derive(Debug)]
struct Fault {
    /// The keys and list indexes, innermost first.
    path: Vec<String>,
    /// Why the value was refused (`missing` for a required key).
    reason: String,
    /// The value as received, once known (never for a missing key).
    value: Option<String>,
    /// A required key was absent.
    missing: bool,
}

impl Fault {
    fn new(reason: String) -> Self {
        Self {
            path: Vec::new(),
            reason,
            value: None,
            missing: false,
        }
    }

    /// Records the value the error is about, unless a deeper one already did.
    fn with_value(mut self, v: &Value) -> Self {
        if !self.missing && self.value.is_none() {
            self.value = Some(match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            });
        }
        self
    }

    /// The error as it leaves the value at `segment` of its parent.
    fn within(self, segment: String, v: &Value) -> Self {
        let mut f = self.with_value(v);
        f.path.push(segment);
        f
    }

    fn into_error(self, root: &str) -> Error {
        let mut key = root.to_owned();
        for segment in self.path.iter().rev() {
            if !key.is_empty() {
                key.push('/');
            }
            key.push_str(segment);
        }
        let problem = if self.missing {
            Problem::missing()
        } else {
            Problem {
                reason: self.reason,
                value: self.value,
            }
        };
        Error::Metadata { key, problem }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path: Vec<&str> = self.path.iter().rev().map(String::as_str).collect();
        write!(f, "{}: {}", path.join("/"), self.reason)
    }
}

impl std::error::Error for Fault {}

/// `not a string`, `not a JSON list`, ... for what serde expected.
fn expected(exp: &dyn Expected) -> String {
    let exp = exp.to_string();
    match exp.as_str() {
        "a string" | "a borrowed string" => "not a string".to_owned(),
        "a sequence" => "not a JSON list".to_owned(),
        e if e.starts_with("struct ") || e == "a map" => "not a JSON object".to_owned(),
        e => format!("expected {e}"),
    }
}

impl de::Error for Fault {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self::new(msg.to_string())
    }

    fn invalid_type(_: Unexpected<'_>, exp: &dyn Expected) -> Self {
        Self::new(expected(exp))
    }

    fn invalid_value(_: Unexpected<'_>, exp: &dyn Expected) -> Self {
        Self::new(expected(exp))
    }

    fn missing_field(field: &'static str) -> Self {
        Self {
            path: vec![field.to_owned()],
            missing: true,
            ..Self::new("missing".to_owned())
        }
    }

    fn duplicate_field(field: &'static str) -> Self {
        Self {
            path: vec![field.to_owned()],
            ..Self::new("listed twice".to_owned())
        }
    }
}

/// A parsed JSON value read strictly into serde types.
#[derive(Clone, Copy)]
struct Strict<'de>(&'de Value);

impl<'de> Deserializer<'de> for Strict<'de> {
    type Error = Fault;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Fault> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(u), _, _) => visitor.visit_u64(u),
                (None, Some(i), _) => visitor.visit_i64(i),
                (None, None, f) => visitor.visit_f64(f.unwrap_or(f64::NAN)),
            },
            Value::String(s) => visitor.visit_borrowed_str(s),
            Value::Array(a) => visitor.visit_seq(Elements(a.iter().enumerate())),
            Value::Object(o) => visitor.visit_map(Entries {
                entries: o.iter(),
                pending: None,
            }),
        }
    }

    /// `null` is `None`; anything else is the value.
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Fault> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Fault> {
        visitor.visit_newtype_struct(self)
    }

    /// A struct only from a JSON object: serde's derive would also take a list.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Fault> {
        if self.0.is_object() {
            self.deserialize_any(visitor)
        } else {
            Err(refused(&visitor))
        }
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map enum
        identifier ignored_any
    }
}

/// The error for a value of another shape than `exp`.
fn refused(exp: &dyn Expected) -> Fault {
    de::Error::invalid_type(Unexpected::Other("JSON"), exp)
}

/// A JSON list's entries; an error in one gets its index.
struct Elements<'de>(std::iter::Enumerate<std::slice::Iter<'de, Value>>);

impl<'de> SeqAccess<'de> for Elements<'de> {
    type Error = Fault;

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Fault> {
        self.0
            .next()
            .map(|(i, v)| {
                seed.deserialize(Strict(v))
                    .map_err(|f| f.within(i.to_string(), v))
            })
            .transpose()
    }
}

/// A JSON object's entries; an error in a value gets its key.
struct Entries<'de> {
    entries: serde_json::map::Iter<'de>,
    pending: Option<(&'de String, &'de Value)>,
}

impl<'de> MapAccess<'de> for Entries<'de> {
    type Error = Fault;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Fault> {
        let Some((k, v)) = self.entries.next() else {
            return Ok(None);
        };
        self.pending = Some((k, v));
        seed.deserialize(BorrowedStrDeserializer::new(k)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Fault> {
        let (k, v) = self
            .pending
            .take()
            .ok_or_else(|| Fault::new("a value without a key".to_owned()))?;
        seed.deserialize(Strict(v))
            .map_err(|f| f.within(k.clone(), v))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::net::Ipv4Addr;

    use serde::Deserialize;

    use super::*;
    use crate::model::{InstanceNetwork, Lease, Link, Plan};
    use crate::plan::{InterfaceLease, PlanConfig, PlanInput, plan};

    /// The default-profile plan of `network` for links `(name, MAC, lease)`:
    /// what the clouds' tests compare.
    pub(crate) fn plan_nics(network: &InstanceNetwork, nics: &[(&str, &str, Lease)]) -> Plan {
        let (links, leases): (Vec<Link>, Vec<InterfaceLease>) = nics
            .iter()
            .map(|(name, mac, lease)| {
                let name = crate::model::IfName::try_new(name).unwrap();
                let link = Link {
                    name: name.clone(),
                    mac: mac.parse().unwrap(),
                    ipv6_router: None,
                };
                (
                    link,
                    InterfaceLease {
                        interface: name,
                        lease: lease.clone(),
                    },
                )
            })
            .unzip();
        let input = PlanInput {
            metadata: network,
            links: &links,
            leases: &leases,
            link_addresses: &[],
            next_hops: &[],
        };
        plan(&input, &PlanConfig::default()).unwrap()
    }

    /// Asserts that `plan` passes apply's validation (the gate for a plan not
    /// made here), its links `names` numbered 2, 3, ...
    pub(crate) fn assert_valid(plan: &Plan, names: &[&str]) {
        let index = names
            .iter()
            .zip(2..)
            .map(|(n, i)| (crate::model::IfName::try_new(n).unwrap(), i))
            .collect();
        crate::apply::validate(plan, &index).unwrap();
    }

    #[derive(Debug, Deserialize)]
    struct Nic {
        #[serde(deserialize_with = "mac")]
        mac: MacAddr,
        ip: Option<Ipv4Addr>,
        #[serde(default, deserialize_with = "list")]
        aliases: Vec<String>,
        mtu: Option<u16>,
        inner: Option<Inner>,
    }

    #[derive(Debug, Deserialize)]
    struct Inner {
        name: Option<String>,
        kind: Option<Kind>,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Kind {
        Phy,
        Vlan,
    }

    fn err(body: &str) -> String {
        read::<Vec<Nic>>(body, "test doc", "nics")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn unknown_keys_are_ignored_and_null_is_absent() {
        let nics: Vec<Nic> = read(
            r#"[{"mac":"42:01:0A:00:00:0A","ip":null,"aliases":null,"extra":{"deep":[1,{"x":2}]}},
                {"mac":"42:01:0a:00:00:0b","mtu":1460,"inner":{"name":"n","more":[]}}]"#,
            "test doc",
            "nics",
        )
        .unwrap();
        assert_eq!(nics[0].mac, "42:01:0a:00:00:0a".parse().unwrap());
        assert_eq!(nics[0].ip, None);
        assert!(nics[0].aliases.is_empty() && nics[0].inner.is_none());
        assert_eq!(nics[1].mtu, Some(1460));
        let inner = nics[1].inner.as_ref().unwrap();
        assert_eq!(
            (inner.name.as_deref(), inner.kind.as_ref()),
            (Some("n"), None)
        );
    }

    #[test]
    fn every_error_names_the_key_and_shows_the_value() {
        for (body, want) in [
            ("", "test doc: EOF"),
            ("{}", "metadata nics: not a JSON list (got \"{}\")"),
            ("[1]", "metadata nics/0: not a JSON object (got \"1\")"),
            ("[[]]", "metadata nics/0: not a JSON object (got \"[]\")"),
            ("[{}]", "metadata nics/0/mac: missing"),
            (
                "[{\"mac\":7}]",
                "metadata nics/0/mac: not a string (got \"7\")",
            ),
            (
                "[{\"mac\":\"42:01\"}]",
                "metadata nics/0/mac: not a MAC address (aa:bb:cc:dd:ee:ff) (got \"42:01\")",
            ),
            (
                r#"[{"mac":"42:01:0a:00:00:0a","ip":"10.0.0.300"}]"#,
                "metadata nics/0/ip: invalid IPv4 address syntax (got \"10.0.0.300\")",
            ),
            (
                r#"[{"mac":"42:01:0a:00:00:0a","aliases":["a",{"b":1}]}]"#,
                "metadata nics/0/aliases/1: not a string (got \"{\\\"b\\\":1}\")",
            ),
            (
                r#"[{"mac":"42:01:0a:00:00:0a","mtu":70000}]"#,
                "metadata nics/0/mtu: expected u16 (got \"70000\")",
            ),
            (
                r#"[{"mac":"42:01:0a:00:00:0a","mtu":-1}]"#,
                "metadata nics/0/mtu: expected u16 (got \"-1\")",
            ),
            (
                r#"[{"mac":"42:01:0a:00:00:0a","mtu":1.5}]"#,
                "metadata nics/0/mtu: expected u16 (got \"1.5\")",
            ),
            (
                r#"[{"mac":"42:01:0a:00:00:0a","inner":[]}]"#,
                "metadata nics/0/inner: not a JSON object (got \"[]\")",
            ),
            (
                r#"[{"mac":"42:01:0a:00:00:0a","inner":{"name":false}}]"#,
                "metadata nics/0/inner/name: not a string (got \"false\")",
            ),
            // No enum is read: a document's closed set is a string the cloud
            // checks.
            (
                r#"[{"mac":"42:01:0a:00:00:0a","inner":{"kind":"vlan"}}]"#,
                "metadata nics/0/inner/kind: expected enum Kind (got \"vlan\")",
            ),
        ] {
            assert!(err(body).starts_with(want), "{body:?}: {}", err(body));
        }
    }

    #[test]
    fn hostile_values_are_cut_and_escaped() {
        let long = "x".repeat(10_000);
        let e = err(&format!(r#"[{{"mac":"{long}\nERROR fake"}}]"#));
        assert!(!e.contains('\n'), "{e}");
        assert!(e.len() < 200, "{e}");
        assert!(e.contains("10011 chars in all"), "{e}");
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(read::<Vec<Nic>>(&deep, "test doc", "nics").is_err());
    }

    #[derive(Debug, Deserialize)]
    struct Identity {
        #[serde(deserialize_with = "required_text")]
        id: String,
        #[serde(default, deserialize_with = "text")]
        name: Option<String>,
        #[serde(default, deserialize_with = "kept")]
        keys: Option<Value>,
    }

    fn identity(body: &str) -> Result<(Identity, Map<String, Value>)> {
        read_object(body, 200, "test doc", "/doc")
    }

    #[test]
    fn text_is_one_trimmed_line_and_null_or_empty_is_none() {
        let (d, whole) = identity(r#"{"id": " i-1 ", "name": "", "other": [1]}"#).unwrap();
        assert_eq!((d.id.as_str(), d.name, d.keys), ("i-1", None, None));
        assert_eq!(whole["other"], serde_json::json!([1]));
        let (d, _) = identity(r#"{"id": "i-1", "name": null, "keys": null}"#).unwrap();
        assert_eq!((d.name, d.keys), (None, Some(Value::Null)));
        let (d, _) = identity(r#"{"id": "i-1", "name": "n", "keys": {"a": 1}}"#).unwrap();
        assert_eq!(d.name.as_deref(), Some("n"));
        assert_eq!(d.keys, Some(serde_json::json!({"a": 1})));
    }

    #[test]
    fn an_identity_error_names_the_key_and_shows_the_value() {
        for (body, want) in [
            ("{", "test doc: EOF"),
            ("[]", "metadata /doc: not a JSON object (got \"[]\")"),
            (r#"{"name": "n"}"#, "metadata /doc/id: missing"),
            (r#"{"id": null}"#, "metadata /doc/id: empty (got \"null\")"),
            (r#"{"id": " "}"#, "metadata /doc/id: empty (got \" \")"),
            (r#"{"id": 1}"#, "metadata /doc/id: not a string (got \"1\")"),
            (
                r#"{"id": "i", "name": ["n"]}"#,
                "metadata /doc/name: not a string (got \"[\\\"n\\\"]\")",
            ),
            (
                r#"{"id": "i\r\nERROR fake"}"#,
                "metadata /doc/id: holds a control character (got \"i\\r\\nERROR fake\")",
            ),
        ] {
            let e = identity(body).unwrap_err().to_string();
            assert!(e.starts_with(want), "{body}: {e}");
        }
        let big = format!(r#"{{"id": "{}"}}"#, "x".repeat(200));
        let e = identity(&big).unwrap_err().to_string();
        assert_eq!(e, "metadata /doc: larger than 200 bytes (got \"210\")");
    }

    #[test]
    fn at_most_counts() {
        assert!(at_most(&[1, 2], 2, "k", "NICs").is_ok());
        let e = at_most(&[1, 2, 3], 2, "k", "NICs").unwrap_err().to_string();
        assert_eq!(e, "metadata k: more than 2 NICs (got \"3\")");
    }
}

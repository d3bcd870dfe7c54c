// SPDX-License-Identifier: Apache-2.0
//! Pure: an IMDS `meta-data/` tree as JSON → [`InstanceNetwork`].
//!
//! The tree format is the one the IMDS emulator serves: an object per folder and a
//! leaf per key, a leaf being a string (several values separated by newlines, as IMDS
//! serves them), a list of strings, or a number. One value or many must both parse,
//! because cloud-init's crawler turns a multi-line leaf into a list and a one-line
//! leaf into a string, and fixtures come in both shapes. The object may be the
//! `meta-data` folder itself or a whole tree with `latest/meta-data` inside.
//!
//! Unknown keys are ignored (IMDS grows); known keys are parsed strictly and a bad
//! value is an error naming its full key path.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use ipnet::{Ipv4Net, Ipv6Net};
use serde_json::{Map, Value};

use crate::error::{Error, Problem, Result};
use crate::model::{InstanceNetwork, MacAddr, NicMetadata};

/// The folder holding one subfolder per MAC, relative to `meta-data/`.
pub const MACS_PATH: &str = "network/interfaces/macs";

/// Parses a JSON document holding a metadata tree.
pub fn parse_json(text: &str) -> Result<InstanceNetwork> {
    let value: Value = serde_json::from_str(text).map_err(|e| Error::Syntax {
        what: "metadata JSON".to_owned(),
        message: e.to_string(),
    })?;
    parse_tree(&value)
}

/// Parses a metadata tree (see the module docs for its shape).
pub fn parse_tree(root: &Value) -> Result<InstanceNetwork> {
    let md = meta_data_folder(root)?;
    let primary_mac = md
        .get("mac")
        .map(|v| scalar::<MacAddr>("mac", v))
        .transpose()?;
    let mut nics = Vec::new();
    if let Some(macs) = folder_at(md, MACS_PATH)? {
        for (name, value) in macs {
            let path = format!("{MACS_PATH}/{name}");
            let mac: MacAddr = name.parse().map_err(|p| Error::Metadata {
                key: path.clone(),
                problem: p,
            })?;
            let folder = value.as_object().ok_or_else(|| not_folder(&path, value))?;
            nics.push(parse_nic(mac, &path, folder)?);
        }
    }
    nics.sort_by_key(|n| n.mac);
    // Two folders for one MAC (differing only in case) would make planning ambiguous.
    if let Some([a, _]) = nics
        .windows(2)
        .find(|w| matches!(w, [a, b] if a.mac == b.mac))
    {
        return Err(Error::Metadata {
            key: MACS_PATH.to_owned(),
            problem: Problem::bad("MAC listed twice", &a.mac.to_string()),
        });
    }
    Ok(InstanceNetwork { primary_mac, nics })
}

/// Parses one `macs/<mac>/` folder given as a JSON object.
pub fn parse_nic(mac: MacAddr, path: &str, folder: &Map<String, Value>) -> Result<NicMetadata> {
    let key = |k: &str| format!("{path}/{k}");
    let list = |k: &str| -> Result<Vec<String>> {
        folder
            .get(k)
            .map_or(Ok(Vec::new()), |v| leaf_values(&key(k), v))
    };
    let one = |k: &str| -> Result<Option<u32>> {
        folder.get(k).map(|v| scalar::<u32>(&key(k), v)).transpose()
    };
    Ok(NicMetadata {
        mac,
        device_number: one("device-number")?,
        network_card: one("network-card")?,
        local_ipv4s: parse_all::<Ipv4Addr>(
            &key("local-ipv4s"),
            &list("local-ipv4s")?,
            "an IPv4 address",
        )?,
        ipv6s: parse_all::<Ipv6Addr>(&key("ipv6s"), &list("ipv6s")?, "an IPv6 address")?,
        subnet_ipv4_cidr_blocks: parse_all::<Ipv4Net>(
            &key("subnet-ipv4-cidr-block"),
            &list("subnet-ipv4-cidr-block")?,
            "an IPv4 CIDR",
        )?,
        subnet_ipv6_cidr_blocks: parse_all::<Ipv6Net>(
            &key("subnet-ipv6-cidr-blocks"),
            &list("subnet-ipv6-cidr-blocks")?,
            "an IPv6 CIDR",
        )?,
        ipv4_prefixes: parse_all::<Ipv4Net>(
            &key("ipv4-prefix"),
            &list("ipv4-prefix")?,
            "an IPv4 CIDR",
        )?,
        ipv6_prefixes: parse_all::<Ipv6Net>(
            &key("ipv6-prefix"),
            &list("ipv6-prefix")?,
            "an IPv6 CIDR",
        )?,
        interface_id: list("interface-id")?.into_iter().next(),
        routes: Vec::new(),
        gateways: Vec::new(),
    })
}

/// Splits one IMDS leaf into its values: newline-separated lines of a string (blank
/// lines dropped, surrounding whitespace trimmed), the items of a list, or a number.
pub fn leaf_values(key: &str, value: &Value) -> Result<Vec<String>> {
    let lines = |s: &str| {
        s.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    match value {
        Value::String(s) => Ok(lines(s)),
        Value::Number(n) => Ok(vec![n.to_string()]),
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    Value::String(s) => out.extend(lines(s)),
                    Value::Number(n) => out.push(n.to_string()),
                    other => return Err(wrong_type(key, other)),
                }
            }
            Ok(out)
        }
        other => Err(wrong_type(key, other)),
    }
}

fn scalar<T: FromStr>(key: &str, value: &Value) -> Result<T>
where
    T::Err: Into<Problem>,
{
    let values = leaf_values(key, value)?;
    match values.as_slice() {
        [one] => one.parse::<T>().map_err(|e| Error::Metadata {
            key: key.to_owned(),
            problem: e.into(),
        }),
        [] => Err(Error::Metadata {
            key: key.to_owned(),
            problem: Problem::bad("empty value", ""),
        }),
        _ => Err(Error::Metadata {
            key: key.to_owned(),
            problem: Problem::bad("expected one value", &values.join("\\n")),
        }),
    }
}

fn parse_all<T: FromStr>(key: &str, values: &[String], expected: &str) -> Result<Vec<T>> {
    values
        .iter()
        .map(|v| {
            v.parse::<T>().map_err(|_| Error::Metadata {
                key: key.to_owned(),
                problem: Problem::bad(format!("not {expected}"), v),
            })
        })
        .collect()
}

fn meta_data_folder(root: &Value) -> Result<&Map<String, Value>> {
    let top = root
        .as_object()
        .ok_or_else(|| not_folder("(top level)", root))?;
    if let Some(md) = folder_at(top, "latest/meta-data")? {
        return Ok(md);
    }
    if let Some(md) = folder_at(top, "meta-data")? {
        return Ok(md);
    }
    Ok(top)
}

fn folder_at<'a>(
    mut folder: &'a Map<String, Value>,
    path: &str,
) -> Result<Option<&'a Map<String, Value>>> {
    for part in path.split('/') {
        match folder.get(part) {
            None => return Ok(None),
            Some(Value::Object(child)) => folder = child,
            Some(other) => return Err(not_folder(path, other)),
        }
    }
    Ok(Some(folder))
}

fn kind(v: &Value) -> &'static str {
    crate::model::json_kind(v, "a folder")
}

fn not_folder(key: &str, v: &Value) -> Error {
    Error::Metadata {
        key: key.to_owned(),
        problem: Problem::bad(
            format!("expected a folder, found {}", kind(v)),
            &v.to_string(),
        ),
    }
}

fn wrong_type(key: &str, v: &Value) -> Error {
    Error::Metadata {
        key: key.to_owned(),
        problem: Problem::bad(
            format!("expected a string or a list of strings, found {}", kind(v)),
            &v.to_string(),
        ),
    }
}

impl From<std::num::ParseIntError> for Problem {
    fn from(e: std::num::ParseIntError) -> Self {
        Self {
            reason: format!("not a non-negative integer ({e})"),
            value: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_value_or_many() {
        let md = parse_tree(&json!({"latest": {"meta-data": {
            "mac": "02:00:00:00:00:01",
            "network": {"interfaces": {"macs": {
                "02:00:00:00:00:02": {"device-number": "1", "local-ipv4s": "10.0.1.20\n10.0.1.21\n", "ipv6s": ["2600::1", "2600::2"], "network-card": 0},
                "02:00:00:00:00:01": {"device-number": 0, "local-ipv4s": ["10.0.0.10"], "subnet-ipv4-cidr-block": "10.0.0.0/24"}
            }}}
        }}}))
        .unwrap();
        assert_eq!(md.primary_mac.unwrap().to_string(), "02:00:00:00:00:01");
        assert_eq!(md.nics.len(), 2);
        let n = &md.nics[1];
        assert_eq!(
            (
                n.device_number,
                n.network_card,
                n.local_ipv4s.len(),
                n.ipv6s.len()
            ),
            (Some(1), Some(0), 2, 2)
        );
    }

    #[test]
    fn bad_values_name_the_key() {
        let cases = [
            (
                json!({"network": {"interfaces": {"macs": {"02:00:00:00:00:02": {"local-ipv4s": "10.0.1.300"}}}}}),
                "metadata network/interfaces/macs/02:00:00:00:00:02/local-ipv4s: not an IPv4 address (got \"10.0.1.300\")",
            ),
            (
                json!({"network": {"interfaces": {"macs": {"02:00:00:00:00:02": {"subnet-ipv4-cidr-block": "10.0.1.0/33"}}}}}),
                "metadata network/interfaces/macs/02:00:00:00:00:02/subnet-ipv4-cidr-block: not an IPv4 CIDR (got \"10.0.1.0/33\")",
            ),
            (
                json!({"network": {"interfaces": {"macs": {"02:00:00:00:00:02": {"device-number": "-1"}}}}}),
                "metadata network/interfaces/macs/02:00:00:00:00:02/device-number: not a non-negative integer (invalid digit found in string)",
            ),
            (
                json!({"network": {"interfaces": {"macs": {"02:00:00:00:00:02": {"device-number": true}}}}}),
                "metadata network/interfaces/macs/02:00:00:00:00:02/device-number: expected a string or a list of strings, found a boolean (got \"true\")",
            ),
            (
                json!({"network": {"interfaces": {"macs": {"not-a-mac": {}}}}}),
                "metadata network/interfaces/macs/not-a-mac: not a MAC address (aa:bb:cc:dd:ee:ff) (got \"not-a-mac\")",
            ),
            (
                json!({"network": {"interfaces": {"macs": "x"}}}),
                "metadata network/interfaces/macs: expected a folder, found a string (got \"\\\"x\\\"\")",
            ),
            (
                json!({"mac": ["02:00:00:00:00:01", "02:00:00:00:00:02"]}),
                "metadata mac: expected one value (got \"02:00:00:00:00:01\\\\n02:00:00:00:00:02\")",
            ),
            (
                json!([1]),
                "metadata (top level): expected a folder, found a list (got \"[1]\")",
            ),
        ];
        for (tree, want) in cases {
            assert_eq!(parse_tree(&tree).unwrap_err().to_string(), want);
        }
        assert!(
            parse_json("{\"mac\": ")
                .unwrap_err()
                .to_string()
                .starts_with("metadata JSON: EOF")
        );
    }

    #[test]
    fn duplicate_macs_in_different_case_are_refused() {
        let tree = json!({"network": {"interfaces": {"macs": {"02:00:00:00:00:0a": {}, "02:00:00:00:00:0A": {}}}}});
        assert!(parse_tree(&tree).is_err());
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Pure: `nics:`, the operator's intent per NIC (SPEC §3.9): each entry a
//! `match` in the forms of `unmanaged` ([`Unmanaged`]) and any of `routes`
//! placed in the NIC's table, `rules` pointing at it, `prefix_addresses` and
//! `allow_default`.
//!
//! A file's `nics:` is read with every leaf's line ([`NicDoc`]), checked here,
//! and an error names the file, the line and the key
//! (`nics[0].routes[1].via`). The checked entries are kept as [`NicEntry`]
//! values; the planner decides what of them the NIC gets
//! ([`crate::plan`], "The operator's routes and rules" in `docs/planner.md`).
//! There is no environment form: a list of nested entries does not fit a
//! variable (`--help` and `docs/configuration.md` say so).

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_saphyr::Spanned;

use super::Unmanaged;
use crate::error::{BadValue, Error};
use crate::model::Problem;

/// The most addresses `prefix_addresses` takes out of each delegated prefix:
/// an EC2 IPv4 prefix is a /28, 16 addresses. More would be an IPv6 /80's
/// millions, each a kernel address and a netlink write at every apply.
pub const PREFIX_ADDRESSES_MAX: u8 = 16;

/// The lowest and highest priority an operator's rule may take: 0 is the
/// kernel's `local` rule, 32766 and 32767 the `main` and `default` ones (a rule
/// after `main` never sees the traffic main routes).
pub const RULE_PRIORITIES: std::ops::RangeInclusive<u32> = 1..=32765;

/// One `nics:` entry, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicEntry {
    /// The NICs it is for.
    #[serde(rename = "match")]
    pub matches: Unmanaged,
    /// Routes placed in the NIC's table.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<IntentRoute>,
    /// Rules `to PREFIX lookup <the NIC's table> priority P`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<IntentRule>,
    /// The first N addresses of each delegated prefix of the NIC, added to it
    /// (0: none, the default).
    #[serde(default)]
    pub prefix_addresses: u8,
    /// Lets a `/0`, the host's default router and another NIC's subnet be a
    /// destination (never a metadata service's address).
    #[serde(default)]
    pub allow_default: bool,
}

/// `routes: [{to, via}]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntentRoute {
    /// The destination (host bits zero).
    pub to: IpNet,
    /// The next hop.
    pub via: Via,
}

/// A route's next hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Via {
    /// `gateway`: the NIC's own router (its lease's, or the metadata's).
    Gateway,
    /// An address on the NIC's subnet.
    Address(IpAddr),
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Gateway => f.write_str("gateway"),
            Self::Address(a) => a.fmt(f),
        }
    }
}

impl std::str::FromStr for Via {
    type Err = Problem;
    fn from_str(s: &str) -> Result<Self, Problem> {
        if s == "gateway" {
            return Ok(Self::Gateway);
        }
        s.parse().map(Self::Address).map_err(|_| {
            Problem::bad(
                "expected gateway (the NIC's router) or an address on the NIC's subnet",
                s,
            )
        })
    }
}

impl Serialize for Via {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Via {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// `rules: [{to, priority}]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntentRule {
    /// The destination (host bits zero).
    pub to: IpNet,
    /// The rule's priority ([`RULE_PRIORITIES`]).
    pub priority: u32,
}

/// A `nics:` entry as a file writes it: every leaf with its line.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NicDoc {
    #[serde(rename = "match")]
    matches: Option<Spanned<Value>>,
    routes: Option<Vec<Spanned<RouteDoc>>>,
    rules: Option<Vec<Spanned<RuleDoc>>>,
    prefix_addresses: Option<Spanned<Value>>,
    allow_default: Option<Spanned<Value>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RouteDoc {
    to: Option<Spanned<Value>>,
    via: Option<Spanned<Value>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RuleDoc {
    to: Option<Spanned<Value>>,
    priority: Option<Spanned<Value>>,
}

/// Checks a file's `nics:` entries (`path` names the file in messages).
pub(super) fn check(path: &str, docs: Vec<Spanned<NicDoc>>) -> Result<Vec<NicEntry>, Error> {
    docs.into_iter()
        .enumerate()
        .map(|(i, d)| entry(path, i, d))
        .collect()
}

/// An error at `line` of `path` on `key`.
fn at(path: &str, line: u64, key: String, problem: impl Into<BadValue>) -> Error {
    Error::Config {
        origin: format!("{path} line {line}"),
        key,
        problem: Box::new(problem.into()),
    }
}

/// The value of a required leaf and its line; a missing one is an error at
/// the line of what holds it (`parent`).
fn required<'v>(
    path: &str,
    leaf: Option<&'v Spanned<Value>>,
    parent: u64,
    key: &str,
) -> Result<(&'v Value, u64), Error> {
    match leaf {
        Some(s) => Ok((&s.value, s.referenced.line())),
        None => Err(at(path, parent, key.to_owned(), Problem::missing())),
    }
}

fn text<'v>(v: &'v Value, expected: &'static str) -> Result<&'v str, BadValue> {
    match v {
        Value::String(s) => Ok(s),
        v => Err(BadValue::WrongType {
            expected,
            got: shown(v),
        }),
    }
}

/// A YAML value in a message, escaped and shortened by [`Problem`]'s display.
fn shown(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    let short: String = text.chars().take(64).collect();
    format!("{short:?}")
}

/// A destination: a prefix (or an address, its host prefix) with no host bits.
fn destination(v: &Value) -> Result<IpNet, BadValue> {
    let expected = "expected a prefix (192.0.2.0/24, 2001:db8::/48) or an address";
    let t = text(v, expected)?;
    let net = t
        .parse::<IpNet>()
        .or_else(|_| t.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| Problem::bad(expected, t))?;
    if net.trunc() != net {
        return Err(Problem::bad(
            format!("host bits are set: the prefix is {}", net.trunc()),
            t,
        )
        .into());
    }
    Ok(net)
}

fn whole(v: &Value, reason: &'static str) -> Result<u64, BadValue> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| Problem::bad(reason, &n.to_string()).into()),
        v => Err(BadValue::WrongType {
            expected: reason,
            got: shown(v),
        }),
    }
}

fn entry(path: &str, index: usize, doc: Spanned<NicDoc>) -> Result<NicEntry, Error> {
    let line = doc.referenced.line();
    let doc = doc.value;
    let key = |field: &str| format!("nics[{index}].{field}");
    let (value, at_line) = required(path, doc.matches.as_ref(), line, &key("match"))?;
    let matches = text(
        value,
        "expected a name or glob, a MAC, device-number:N, network-card:N or interface-id:ID",
    )
    .and_then(|t| {
        t.parse::<Unmanaged>().map_err(|problem| BadValue::Entry {
            entry: t.to_owned(),
            problem,
        })
    })
    .map_err(|e| at(path, at_line, key("match"), e))?;
    let routes = doc
        .routes
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(n, r)| route(path, &key(&format!("routes[{n}]")), &r))
        .collect::<Result<_, _>>()?;
    let rules = doc
        .rules
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(n, r)| rule(path, &key(&format!("rules[{n}]")), &r))
        .collect::<Result<_, _>>()?;
    let prefix_addresses = match &doc.prefix_addresses {
        None => 0,
        Some(leaf) => {
            let reason = "expected a whole number from 0 to 16 (the addresses of a /28 prefix)";
            whole(&leaf.value, reason)
                .and_then(|n| {
                    u8::try_from(n)
                        .ok()
                        .filter(|n| *n <= PREFIX_ADDRESSES_MAX)
                        .ok_or_else(|| Problem::bad(reason, &n.to_string()).into())
                })
                .map_err(|e| at(path, leaf.referenced.line(), key("prefix_addresses"), e))?
        }
    };
    let allow_default = match &doc.allow_default {
        None => false,
        Some(leaf) => match &leaf.value {
            Value::Bool(b) => *b,
            other => {
                return Err(at(
                    path,
                    leaf.referenced.line(),
                    key("allow_default"),
                    BadValue::WrongType {
                        expected: "expected true or false",
                        got: shown(other),
                    },
                ));
            }
        },
    };
    Ok(NicEntry {
        matches,
        routes,
        rules,
        prefix_addresses,
        allow_default,
    })
}

/// One `routes` entry; `prefix` is its key (`nics[0].routes[1]`).
fn route(path: &str, prefix: &str, doc: &Spanned<RouteDoc>) -> Result<IntentRoute, Error> {
    let line = doc.referenced.line();
    let field = |f: &str| format!("{prefix}.{f}");
    let (value, at_line) = required(path, doc.value.to.as_ref(), line, &field("to"))?;
    let to = destination(value).map_err(|e| at(path, at_line, field("to"), e))?;
    let (value, at_line) = required(path, doc.value.via.as_ref(), line, &field("via"))?;
    let via = text(value, "expected gateway or an address")
        .and_then(|t| t.parse::<Via>().map_err(BadValue::from))
        .map_err(|e| at(path, at_line, field("via"), e))?;
    if let Via::Address(addr) = via
        && addr.is_ipv4() != to.addr().is_ipv4()
    {
        return Err(at(
            path,
            at_line,
            field("via"),
            Problem::bad(
                "a next hop of the other family than `to`",
                &addr.to_string(),
            ),
        ));
    }
    Ok(IntentRoute { to, via })
}

/// One `rules` entry; `prefix` is its key (`nics[0].rules[1]`).
fn rule(path: &str, prefix: &str, doc: &Spanned<RuleDoc>) -> Result<IntentRule, Error> {
    let line = doc.referenced.line();
    let field = |f: &str| format!("{prefix}.{f}");
    let (value, at_line) = required(path, doc.value.to.as_ref(), line, &field("to"))?;
    let to = destination(value).map_err(|e| at(path, at_line, field("to"), e))?;
    let (value, at_line) = required(path, doc.value.priority.as_ref(), line, &field("priority"))?;
    let reason = "expected a priority from 1 to 32765 (before the main table's rule)";
    let priority = whole(value, reason)
        .and_then(|p| {
            u32::try_from(p)
                .ok()
                .filter(|p| RULE_PRIORITIES.contains(p))
                .ok_or_else(|| Problem::bad(reason, &p.to_string()).into())
        })
        .map_err(|e| at(path, at_line, field("priority"), e))?;
    Ok(IntentRule { to, priority })
}

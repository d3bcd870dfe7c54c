// SPDX-License-Identifier: Apache-2.0
//! Pure: every configuration key, its environment variable, how a value of it is
//! checked and stored, and how it is shown. One table, so the file, the
//! environment, the flags, `config show` and `--help` cannot disagree.

use std::sync::LazyLock;
use std::time::Duration;

use serde_json::{Value, json};

use super::{Settings, Unmanaged, datasource_kind};
use crate::constants::IMDS_ENDPOINTS;
use crate::error::BadValue;
use crate::model::Problem;
use crate::source::SourceKind;
use crate::source::provider::http::check_endpoint_for;

/// A value as a layer gives it: typed YAML from a file, text from the environment
/// or a flag.
#[derive(Debug, Clone, Copy)]
pub(super) enum Raw<'a> {
    Yaml(&'a Value),
    Text(&'a str),
}

type Setter = fn(&Key, &mut Settings, &Raw<'_>) -> Result<(), BadValue>;

/// One configuration key.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// The key as a file writes it, dotted for nested keys (`imds.budget_s`).
    pub name: &'static str,
    /// The environment variable that sets it, if any.
    pub env: Option<&'static str>,
    /// What it does and its default, for `--help` and `config show`.
    pub help: &'static str,
    pub(super) set: Setter,
    pub(super) show: fn(&Key, &Settings) -> Value,
}

/// Every key but `datasource.<Name>.fallback` (one per datasource, set in files
/// only) and `root` (see the module docs): leasehook's own, each
/// cloud's `<name>.endpoint` after `imdsv1_fallback`, in the registry's order
/// ([`crate::source::CLOUDS`]).
pub static KEYS: LazyLock<Vec<Key>> = LazyLock::new(|| {
    let mut keys = Vec::with_capacity(OWN.len() + crate::source::CLOUDS.len());
    for key in OWN {
        let mut key = *key;
        if key.name == "provider" {
            key.help = provider_help();
        }
        keys.push(key);
        if key.name == "imdsv1_fallback" {
            keys.extend(crate::source::CLOUDS.iter().filter_map(|c| {
                let e = c.endpoint?;
                Some(Key {
                    name: e.key,
                    env: Some(e.env),
                    help: e.help,
                    set: set_endpoint,
                    show: show_endpoint,
                })
            }));
        }
    }
    keys
});

/// `provider`'s help, naming every cloud of the registry. Made once, for the
/// process's life (the table is static).
fn provider_help() -> &'static str {
    let names: Vec<&str> = crate::source::CLOUDS.iter().map(|c| c.name).collect();
    let (last, rest) = names.split_last().map_or(("", &[][..]), |(l, r)| (*l, r));
    format!(
        "the cloud the hooks and refresh ask: auto (the boot stage's verdict, else DMI detection, else {first}), {} or {last} (default auto)",
        rest.join(", "),
        first = names.first().copied().unwrap_or_default(),
    )
    .leak()
}

/// The cloud whose `<name>.endpoint` `key` is.
fn endpoint_of(key: &Key) -> Option<(&'static str, crate::source::provider::EndpointKey)> {
    crate::source::CLOUDS.iter().find_map(|c| {
        c.endpoint
            .filter(|e| e.key == key.name)
            .map(|e| (c.name, e))
    })
}

/// Sets a cloud's `<name>.endpoint`, checked by its row.
fn set_endpoint(key: &Key, s: &mut Settings, r: &Raw<'_>) -> Result<(), BadValue> {
    let Some((cloud, e)) = endpoint_of(key) else {
        return Err(BadValue::UnknownKey);
    };
    let url = (e.check)(&word(r)?)?;
    s.cloud_endpoints.insert(cloud.to_owned(), url);
    Ok(())
}

/// A cloud's `<name>.endpoint`, or its default.
fn show_endpoint(key: &Key, s: &Settings) -> Value {
    match endpoint_of(key) {
        Some((cloud, e)) => json!(
            s.cloud_endpoints
                .get(cloud)
                .map_or(e.default, String::as_str)
        ),
        None => Value::Null,
    }
}

/// leasehook's own keys, in the order `config show` prints them.
const OWN: &[Key] = &[
    Key {
        name: "enabled",
        env: Some("LEASEHOOK_ENABLED"),
        help: "false: every hook, the worker, refresh, its timer and watch do nothing and ask nothing (default true)",
        set: |_, s, r| {
            s.enabled = boolean(r)?;
            Ok(())
        },
        show: |_, s| json!(s.enabled),
    },
    Key {
        name: "profile",
        env: Some("LEASEHOOK_PROFILE"),
        help: "table numbering: ec2-net-utils (10000 + 100*card + device, the default) or cloud-init (100 + the NIC's position)",
        set: |_, s, r| {
            let v = word(r)?;
            s.plan.profile = v.parse().map_err(BadValue::Refused)?;
            Ok(())
        },
        show: |_, s| json!(s.plan.profile.to_string()),
    },
    Key {
        name: "table_base",
        env: Some("LEASEHOOK_TABLE_BASE"),
        help: "table of device 0 on card 0 (default 10000)",
        set: |_, s, r| {
            s.plan.table_base = whole(r)?;
            Ok(())
        },
        show: |_, s| json!(s.plan.table_base),
    },
    Key {
        name: "priority_base",
        env: Some("LEASEHOOK_PRIORITY_BASE"),
        help: "rule priority of device 0 on card 0 (default: the table base)",
        set: |_, s, r| {
            s.plan.priority_base = Some(whole(r)?);
            Ok(())
        },
        show: |_, s| json!(s.plan.priority_base),
    },
    Key {
        name: "primary_rules",
        env: Some("LEASEHOOK_PRIMARY_RULES"),
        help: "give the primary NIC source rules too (default false)",
        set: |_, s, r| {
            s.plan.primary_rules = boolean(r)?;
            Ok(())
        },
        show: |_, s| json!(s.plan.primary_rules),
    },
    Key {
        name: "secondary_addresses",
        env: Some("LEASEHOOK_SECONDARY_ADDRESSES"),
        help: "add the secondary IPs and prefixes IMDS lists to their NIC (default true)",
        set: |_, s, r| {
            s.plan.secondary_addresses = boolean(r)?;
            Ok(())
        },
        show: |_, s| json!(s.plan.secondary_addresses),
    },
    Key {
        name: "unmanaged",
        env: Some("LEASEHOOK_UNMANAGED"),
        help: "NICs left alone: a name or glob (eth*, ens[5-9]), a MAC, device-number:N, network-card:N or interface-id:ID (comma-separated in the environment; default none)",
        set: |_, s, r| {
            s.unmanaged = list(r)?
                .iter()
                .map(|e| {
                    e.parse::<Unmanaged>().map_err(|problem| BadValue::Entry {
                        entry: e.clone(),
                        problem,
                    })
                })
                .collect::<Result<_, _>>()?;
            Ok(())
        },
        show: |_, s| {
            json!(
                s.unmanaged
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
            )
        },
    },
    Key {
        name: "nics",
        env: None,
        help: "per-NIC routes, rules and prefix addresses: a list of {match, routes: [{to, via}], rules: [{to, priority}], prefix_addresses, allow_default} (files only: no environment form; default none; docs/configuration.md)",
        set: |_, s, r| {
            let Raw::Yaml(v) = r else {
                return Err(BadValue::Refused(Problem {
                    reason: "set in a configuration file only".to_owned(),
                    value: None,
                }));
            };
            s.plan.nics = serde_json::from_value(Value::clone(v))
                .map_err(|e| bad("expected a list of nics entries", &e.to_string()))?;
            Ok(())
        },
        show: |_, s| serde_json::to_value(&s.plan.nics).unwrap_or(Value::Null),
    },
    Key {
        name: "kubernetes",
        env: Some("LEASEHOOK_KUBERNETES"),
        help: "a Kubernetes node with a VPC-native CNI: auto (detect), on or off (default auto; docs/kubernetes.md)",
        set: |_, s, r| {
            let v = match r {
                // YAML 1.1 readers take a bare on/off for a boolean.
                Raw::Yaml(Value::Bool(b)) => if *b { "on" } else { "off" }.to_owned(),
                r => word(r)?,
            };
            s.kubernetes = v.parse().map_err(BadValue::Refused)?;
            Ok(())
        },
        show: |_, s| json!(s.kubernetes.to_string()),
    },
    Key {
        name: "provider",
        env: Some("LEASEHOOK_PROVIDER"),
        help: "the cloud the hooks and refresh ask (the help names the registry's clouds)",
        set: |_, s, r| {
            s.provider = word(r)?.parse().map_err(BadValue::Refused)?;
            Ok(())
        },
        show: |_, s| json!(s.provider.to_string()),
    },
    Key {
        name: "imds.endpoints",
        env: Some("LEASEHOOK_IMDS_ENDPOINTS"),
        help: "IMDS base URLs, tried in order (comma-separated in the environment; default http://169.254.169.254,http://[fd00:ec2::254])",
        set: |_, s, r| {
            let urls = list(r)?;
            if urls.is_empty() {
                return Err(BadValue::EmptyList);
            }
            // Each a base URL as the provider seam takes one (no cloud's own rule).
            for url in &urls {
                check_endpoint_for(url, "imds.endpoints")?;
            }
            s.imds.endpoints = Some(urls);
            Ok(())
        },
        show: |_, s| match &s.imds.endpoints {
            Some(list) => json!(list),
            None => json!(IMDS_ENDPOINTS),
        },
    },
    Key {
        name: "imds.sync_budget_s",
        env: Some("LEASEHOOK_IMDS_SYNC_BUDGET_S"),
        help: "seconds a DHCP client may be held while IMDS catches up (default 3)",
        set: |_, s, r| {
            s.imds.sync_budget = seconds(r)?;
            Ok(())
        },
        show: |_, s| json!(s.imds.sync_budget.as_secs_f64()),
    },
    Key {
        name: "imds.budget_s",
        env: Some("LEASEHOOK_IMDS_BUDGET_S"),
        help: "seconds the whole IMDS wait may take, at least the sync budget (default 30)",
        set: |_, s, r| {
            s.imds.budget = seconds(r)?;
            Ok(())
        },
        show: |_, s| json!(s.imds.budget.as_secs_f64()),
    },
    Key {
        name: "imds.bind_interface",
        env: Some("LEASEHOOK_IMDS_BIND_INTERFACE"),
        help: "send a NIC's IMDS requests through that NIC, from its leased address (default true)",
        set: |_, s, r| {
            s.imds.bind_interface = boolean(r)?;
            Ok(())
        },
        show: |_, s| json!(s.imds.bind_interface),
    },
    Key {
        name: "imdsv1_fallback",
        env: Some("LEASEHOOK_IMDSV1_FALLBACK"),
        help: "use IMDSv1 when IMDS refuses a session token (default false)",
        set: |_, s, r| {
            s.imdsv1_fallback = boolean(r)?;
            Ok(())
        },
        show: |_, s| json!(s.imdsv1_fallback),
    },
    Key {
        name: "datasource_list",
        env: Some("LEASEHOOK_DATASOURCE_LIST"),
        help: "datasources init and detect consider, in order (comma-separated in the environment; default: what detection finds)",
        set: |_, s, r| {
            let names = list(r)?;
            if names.is_empty() {
                return Err(BadValue::EmptyList);
            }
            s.datasource_list = Some(names);
            Ok(())
        },
        show: |_, s| json!(s.datasource_list),
    },
    Key {
        name: "fallback",
        env: Some("LEASEHOOK_FALLBACK"),
        help: "use the cached datasource when none answers at boot (default true)",
        set: |_, s, r| {
            s.fallback.global = Some(boolean(r)?);
            Ok(())
        },
        show: |_, s| json!(s.fallback.global.unwrap_or(true)),
    },
    Key {
        name: "log_level",
        env: Some("LEASEHOOK_LOG_LEVEL"),
        help: "error, warn, info or debug (default info)",
        set: |_, s, r| {
            let v = word(r)?;
            s.log_level = match v.as_str() {
                "error" => log::LevelFilter::Error,
                "warn" => log::LevelFilter::Warn,
                "info" => log::LevelFilter::Info,
                "debug" => log::LevelFilter::Debug,
                _ => return Err(bad("expected error, warn, info or debug", &v)),
            };
            Ok(())
        },
        show: |_, s| json!(s.log_level.as_str().to_ascii_lowercase()),
    },
    Key {
        name: "metrics.textfile",
        env: Some("LEASEHOOK_METRICS_TEXTFILE"),
        help: "write the metrics to this absolute *.prom path for node-exporter's textfile collector after every event and refresh (default: off; empty: off)",
        set: |_, s, r| {
            let v = word(r)?;
            if v.is_empty() {
                s.metrics_textfile = None;
                return Ok(());
            }
            let path = std::path::PathBuf::from(&v);
            if !path.is_absolute() || path.extension().is_none_or(|x| x != "prom") {
                return Err(bad(
                    "expected an absolute path ending in .prom (the collector reads only those)",
                    &v,
                ));
            }
            s.metrics_textfile = Some(path);
            Ok(())
        },
        show: |_, s| json!(s.metrics_textfile),
    },
];

/// `datasource.<name>.fallback`.
pub(super) fn set_datasource_fallback(
    s: &mut Settings,
    name: &str,
    r: &Raw<'_>,
) -> Result<(), BadValue> {
    let Some(kind) = datasource_kind(name) else {
        // Every kind but `None`, in ds-identify's order.
        let known = SourceKind::all()
            .into_iter()
            .filter(|k| *k != SourceKind::None)
            .map(SourceKind::name)
            .collect();
        return Err(BadValue::UnknownDatasource {
            name: name.to_owned(),
            known,
        });
    };
    s.fallback.per_datasource.insert(kind, boolean(r)?);
    Ok(())
}

/// The value shown in a message: escaped and shortened.
fn bad(reason: &str, value: &str) -> BadValue {
    BadValue::Refused(Problem::bad(reason, value))
}

/// A YAML value in a message: the text of a string, else its JSON form; escaped
/// and shortened like every value in a message.
fn shown(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    let short: String = text.chars().take(64).collect();
    format!("{short:?}")
}

/// A YAML value of another type than the key takes.
fn wrong(expected: &'static str, v: &Value) -> BadValue {
    BadValue::WrongType {
        expected,
        got: shown(v),
    }
}

fn word(r: &Raw<'_>) -> Result<String, BadValue> {
    match r {
        Raw::Text(t) => Ok((*t).to_owned()),
        Raw::Yaml(Value::String(s)) => Ok(s.clone()),
        Raw::Yaml(v) => Err(wrong("expected a word", v)),
    }
}

fn boolean(r: &Raw<'_>) -> Result<bool, BadValue> {
    match r {
        Raw::Yaml(Value::Bool(b)) => Ok(*b),
        Raw::Text(t) => match *t {
            "1" | "true" | "yes" | "on" => Ok(true),
            "0" | "false" | "no" | "off" => Ok(false),
            _ => Err(bad("expected true or false", t)),
        },
        Raw::Yaml(v) => Err(wrong("expected true or false", v)),
    }
}

fn whole(r: &Raw<'_>) -> Result<u32, BadValue> {
    let reason = "expected a whole number from 0 to 4294967295";
    match r {
        Raw::Yaml(Value::Number(n)) => n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| bad(reason, &n.to_string())),
        Raw::Text(t) => t.parse().map_err(|_| bad(reason, t)),
        Raw::Yaml(v) => Err(wrong(reason, v)),
    }
}

fn seconds(r: &Raw<'_>) -> Result<Duration, BadValue> {
    let reason = "expected seconds from 0 to 3600";
    let (n, text) = match r {
        Raw::Yaml(Value::Number(n)) => (n.as_f64(), n.to_string()),
        Raw::Text(t) => (t.parse::<f64>().ok(), (*t).to_owned()),
        Raw::Yaml(v) => return Err(wrong(reason, v)),
    };
    n.filter(|s| s.is_finite() && (0.0..=3600.0).contains(s))
        .map(Duration::from_secs_f64)
        .ok_or_else(|| bad(reason, &text))
}

/// A list of words: a YAML sequence of strings, or comma-separated text (blanks
/// around items dropped, empty items refused).
fn list(r: &Raw<'_>) -> Result<Vec<String>, BadValue> {
    let items: Vec<String> = match r {
        Raw::Text(t) => t.split(',').map(|i| i.trim().to_owned()).collect(),
        Raw::Yaml(Value::Array(a)) => a
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.trim().to_owned()),
                v => Err(BadValue::WrongType {
                    expected: "expected a list of words",
                    got: format!("the item {}", shown(v)),
                }),
            })
            .collect::<Result<_, _>>()?,
        Raw::Yaml(v) => return Err(wrong("expected a list", v)),
    };
    if let Some(blank) = items.iter().find(|i| i.is_empty()) {
        return Err(bad("the list holds an empty item", blank));
    }
    Ok(items)
}

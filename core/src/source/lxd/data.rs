// SPDX-License-Identifier: Apache-2.0
//! Pure: dev-lxd answers → [`InstanceData`], as cloud-init's `DataSourceLXD` reads
//! them (SPEC §4.2).
//!
//! * `meta-data` is YAML; LXD appends the user's `user.meta-data` to its own, so a
//!   key may appear twice: the last value wins, as PyYAML keeps it.
//! * `/1.0/config` is a JSON list of routes (`/1.0/config/user.foo`); every
//!   `user.*` and `cloud-init.*` key is kept under `ds.config`.
//! * `cloud-init.user-data` / `user.user-data` are user-data, `*.vendor-data`
//!   vendor-data, `*.network-config` network-config; `cloud-init.*` wins over
//!   `user.*` (the ignored one is logged). `user.meta-data` is merged over the
//!   meta-data, key by key.
//! * Without a network-config, DHCPv4 on the fallback NIC: `eth0`, or under KVM/QEMU
//!   (LXD VMs) `enp5s0` (`enp0s5` on ppc64le, `enc9` on s390x).
//! * Incus serves the same API on `/dev/incus/sock` ([`Flavour`]): the same
//!   datasource (`LXD`, `cloud_name` `lxd`), with `platform` `incus` and a
//!   `subplatform` naming Incus and the socket.

use serde_json::{Map, Value, json};

use super::super::yaml::{scalar_text, yaml};
use super::super::{InstanceData, SourceKind};
use crate::constants::LXD_API_VERSION;
use crate::error::{Error, Problem, Result};

/// What dev-lxd answered, before it is interpreted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Raw {
    /// `GET /1.0/meta-data`.
    pub meta_data: String,
    /// Each config key that answered and its value, sorted by key.
    pub config: Vec<(String, String)>,
    /// `GET /1.0/devices`, when it answered.
    pub devices: Option<Value>,
}

/// The config keys that hold user-data, vendor-data or network-config, in the order
/// they win.
const ALIASES: [(&str, &str); 6] = [
    ("cloud-init.user-data", "user-data"),
    ("cloud-init.vendor-data", "vendor-data"),
    ("cloud-init.network-config", "network-config"),
    ("user.user-data", "user-data"),
    ("user.vendor-data", "vendor-data"),
    ("user.network-config", "network-config"),
];

fn bad(what: &str, reason: &str, value: &str) -> Error {
    Error::Datasource {
        datasource: SourceKind::Lxd,
        what: what.to_owned(),
        problem: Problem::bad(reason, value).to_string(),
    }
}

/// The name of the NIC cloud-init's LXD datasource configures when no
/// network-config is given: under KVM/QEMU (an LXD VM) the name the VM's NIC gets
/// on the architecture, else `eth0` (a container).
pub fn fallback_interface(virt: &str, machine: &str) -> &'static str {
    match (virt, machine) {
        ("kvm" | "qemu", "ppc64le") => "enp0s5",
        ("kvm" | "qemu", "s390x") => "enc9",
        ("kvm" | "qemu", _) => "enp5s0",
        _ => "eth0",
    }
}

/// DHCPv4 on `nic`, as network config v1 (what cloud-init generates).
pub fn default_network_config(nic: &str) -> Value {
    json!({
        "version": 1,
        "config": [{"type": "physical", "name": nic, "subnets": [{"type": "dhcp", "control": "auto"}]}]
    })
}

/// A YAML mapping from dev-lxd (`meta-data`, `user.meta-data`).
pub fn parse_mapping(text: &str, what: &str) -> Result<Map<String, Value>> {
    match yaml(text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(Value::Null) => Err(bad(what, "empty: a YAML mapping was expected", text)),
        Ok(_) => Err(bad(what, "not a YAML mapping", text)),
        Err(e) => Err(bad(what, &format!("not valid YAML ({e})"), text)),
    }
}

/// The config keys the `/1.0/config` answer lists (sorted, each once). Routes that
/// are not `/1.0/config/<key>` with a `user.` or `cloud-init.` key are logged and
/// left out: dev-lxd serves no others.
pub fn config_keys(body: &str, what: &str) -> Result<Vec<String>> {
    let v: Value = serde_json::from_str(body).map_err(|e| {
        bad(
            what,
            &format!("expected JSON, found something else ({e})"),
            body,
        )
    })?;
    let Value::Array(routes) = v else {
        return Err(bad(what, "expected a JSON list of config routes", body));
    };
    let prefix = format!("/{LXD_API_VERSION}/config/");
    let mut keys = Vec::new();
    for r in &routes {
        let Value::String(route) = r else {
            return Err(bad(what, "expected a JSON list of strings", &r.to_string()));
        };
        let key = route.strip_prefix(&prefix).unwrap_or_default();
        let plausible = !key.is_empty()
            && key.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'~' | b':' | b'%')
            });
        if plausible && (key.starts_with("user.") || key.starts_with("cloud-init.")) {
            keys.push(key.to_owned());
        } else {
            log::warn!(
                "LXD {what}: {}",
                Problem::bad("not a user.* or cloud-init.* config route; skipped", route)
            );
        }
    }
    keys.sort();
    keys.dedup();
    Ok(keys)
}

/// The `/1.0/devices` answer: a JSON object.
pub fn parse_devices(body: &str, what: &str) -> Result<Value> {
    match serde_json::from_str::<Value>(body) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(bad(what, "expected a JSON object of devices", body)),
        Err(e) => Err(bad(
            what,
            &format!("expected JSON, found something else ({e})"),
            body,
        )),
    }
}

/// The instance-id of a parsed meta-data mapping.
pub fn instance_id(meta: &Map<String, Value>) -> Result<String> {
    meta.get("instance-id")
        .and_then(scalar_text)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Error::Datasource {
            datasource: SourceKind::Lxd,
            what: "meta-data".to_owned(),
            problem: "no instance-id".to_owned(),
        })
}

/// Which server speaks the dev-lxd API: LXD (`/dev/lxd/sock`) or Incus
/// (`/dev/incus/sock`; older Incus versions serve `/dev/lxd/sock` too).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Flavour {
    /// LXD, or Incus on its LXD-compatible socket.
    #[default]
    Lxd,
    /// Incus on its own socket.
    Incus,
}

impl Flavour {
    /// The flavour a socket path names: `.../incus/sock` is Incus, anything else LXD.
    pub fn of_socket(socket: &std::path::Path) -> Self {
        if socket.ends_with("incus/sock") {
            Self::Incus
        } else {
            Self::Lxd
        }
    }

    /// instance-data's `platform`: `lxd` or `incus`.
    pub fn platform(self) -> &'static str {
        match self {
            Self::Lxd => "lxd",
            Self::Incus => "incus",
        }
    }

    /// The server's name in words: `LXD` or `Incus`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Lxd => "LXD",
            Self::Incus => "Incus",
        }
    }
}

/// Where the answers came from, and what decides the default network config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inputs {
    /// LXD or Incus.
    pub flavour: Flavour,
    /// The socket, as shown in `subplatform`.
    pub socket: String,
    /// The virtualisation (`kvm`, `lxc`, ...).
    pub virt: String,
    /// The machine architecture (`x86_64`, `ppc64le`, `s390x`, ...).
    pub machine: String,
}

/// Interprets dev-lxd's answers.
pub fn assemble(raw: &Raw, ctx: &Inputs) -> Result<InstanceData> {
    let mut meta = parse_mapping(&raw.meta_data, "meta-data")?;
    let config: Map<String, Value> = raw
        .config
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    if let Some((_, um)) = raw.config.iter().find(|(k, _)| k == "user.meta-data")
        && !um.trim().is_empty()
    {
        meta.extend(parse_mapping(um, "config user.meta-data")?);
    }
    let mut promoted: Map<String, Value> = Map::new();
    for (key, target) in ALIASES {
        let Some((_, value)) = raw.config.iter().find(|(k, _)| k == key) else {
            continue;
        };
        if promoted.contains_key(target) {
            log::warn!(
                "LXD {}: ignoring config {key} in favour of {}",
                ctx.socket,
                key.replacen("user.", "cloud-init.", 1)
            );
        } else {
            promoted.insert(target.to_owned(), Value::String(value.clone()));
        }
    }
    let text = |k: &str| promoted.get(k).and_then(Value::as_str).map(str::to_owned);
    let network_config = match text("network-config") {
        Some(nc) => Value::Object(parse_mapping(&nc, "network-config")?),
        None => default_network_config(fallback_interface(&ctx.virt, &ctx.machine)),
    };
    let mut ds = json!({
        "_metadata_api_version": LXD_API_VERSION,
        "config": config,
        "meta-data": raw.meta_data,
    });
    if let Some(obj) = ds.as_object_mut() {
        if let Some(devices) = raw
            .devices
            .as_ref()
            .filter(|d| d.as_object().is_some_and(|m| !m.is_empty()))
        {
            obj.insert("devices".to_owned(), devices.clone());
        }
        if let Some(nc) = text("network-config") {
            obj.insert("network-config".to_owned(), Value::String(nc));
        }
    }
    Ok(InstanceData {
        datasource: SourceKind::Lxd,
        instance_id: instance_id(&meta)?,
        local_hostname: meta.get("local-hostname").and_then(scalar_text),
        cloud_name: "lxd".to_owned(),
        platform: ctx.flavour.platform().to_owned(),
        subplatform: format!(
            "{} socket API v. {LXD_API_VERSION} ({})",
            ctx.flavour.name(),
            ctx.socket
        ),
        region: None,
        availability_zone: None,
        meta_data: meta,
        user_data: text("user-data").map(String::into_bytes),
        vendor_data: text("vendor-data").map(String::into_bytes),
        network_config: Some(network_config),
        ds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(virt: &str, machine: &str) -> Inputs {
        Inputs {
            flavour: Flavour::Lxd,
            socket: "/dev/lxd/sock".into(),
            virt: virt.into(),
            machine: machine.into(),
        }
    }

    fn raw(meta: &str, config: &[(&str, &str)]) -> Raw {
        Raw {
            meta_data: meta.into(),
            config: config
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            devices: None,
        }
    }

    #[test]
    fn fallback_nic_names() {
        let cases = [
            ("kvm", "x86_64", "enp5s0"),
            ("qemu", "aarch64", "enp5s0"),
            ("kvm", "ppc64le", "enp0s5"),
            ("kvm", "s390x", "enc9"),
            ("lxc", "s390x", "eth0"),
            ("none", "x86_64", "eth0"),
            ("unavailable", "x86_64", "eth0"),
        ];
        for (virt, machine, want) in cases {
            assert_eq!(fallback_interface(virt, machine), want, "{virt} {machine}");
        }
    }

    #[test]
    fn repeated_meta_data_keys_keep_the_last_value() {
        // LXD appends user.meta-data to its own meta-data (cloud-init PR #1054).
        let d = assemble(
            &raw(
                "#cloud-config\ninstance-id: me\nlocal-hostname: me\ninstance-id: i-87018aed\nlocal-hostname: myhost.internal",
                &[],
            ),
            &ctx("lxc", "x86_64"),
        )
        .unwrap();
        assert_eq!(d.instance_id, "i-87018aed");
        assert_eq!(d.local_hostname.as_deref(), Some("myhost.internal"));
        assert_eq!(d.network_config, Some(default_network_config("eth0")));
        assert_eq!(d.ds["meta-data"].as_str().unwrap().lines().count(), 5);
        assert_eq!(d.subplatform, "LXD socket API v. 1.0 (/dev/lxd/sock)");
    }

    #[test]
    fn cloud_init_keys_win_and_user_meta_data_merges() {
        let d = assemble(
            &raw(
                "instance-id: c1\nlocal-hostname: c1\n",
                &[
                    (
                        "cloud-init.network-config",
                        "version: 2\nethernets: {eth0: {dhcp4: true}}\n",
                    ),
                    ("cloud-init.user-data", "#cloud-config\nruncmd: [a]\n"),
                    ("user.meta-data", "local-hostname: from-user\nextra: 1\n"),
                    ("user.tag", "blue"),
                    ("user.user-data", "#cloud-config\nruncmd: [b]\n"),
                    ("user.vendor-data", "#cloud-config\nbootcmd: [v]\n"),
                ],
            ),
            &ctx("kvm", "x86_64"),
        )
        .unwrap();
        assert_eq!(
            d.user_data.as_deref(),
            Some(&b"#cloud-config\nruncmd: [a]\n"[..])
        );
        assert_eq!(
            d.vendor_data.as_deref(),
            Some(&b"#cloud-config\nbootcmd: [v]\n"[..])
        );
        assert_eq!(d.local_hostname.as_deref(), Some("from-user"));
        assert_eq!(d.meta_data["extra"], 1);
        assert_eq!(d.instance_id, "c1");
        assert_eq!(d.network_config.as_ref().unwrap()["version"], 2);
        assert_eq!(
            d.ds["network-config"],
            "version: 2\nethernets: {eth0: {dhcp4: true}}\n"
        );
        let keys: Vec<&String> = d.ds["config"].as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "cloud-init.network-config",
                "cloud-init.user-data",
                "user.meta-data",
                "user.tag",
                "user.user-data",
                "user.vendor-data"
            ]
        );
        assert_eq!(
            d.sensitive_keys(),
            [
                "ds/config/cloud-init.user-data",
                "ds/config/user.meta-data",
                "ds/config/user.user-data",
                "ds/config/user.vendor-data",
                "ds/meta-data"
            ]
        );
        assert!(d.ds.get("user-data").is_none());
    }

    #[test]
    fn incus_says_so_in_platform_and_subplatform() {
        let c = Inputs {
            flavour: Flavour::of_socket(std::path::Path::new("/dev/incus/sock")),
            socket: "/dev/incus/sock".into(),
            ..ctx("lxc", "x86_64")
        };
        let d = assemble(&raw("instance-id: i\n", &[]), &c).unwrap();
        assert_eq!(d.platform, "incus");
        assert_eq!(d.cloud_name, "lxd");
        assert_eq!(d.datasource, SourceKind::Lxd);
        assert_eq!(d.subplatform, "Incus socket API v. 1.0 (/dev/incus/sock)");
        for (path, want) in [
            ("/dev/lxd/sock", Flavour::Lxd),
            ("/r/dev/incus/sock", Flavour::Incus),
            ("/tmp/sock", Flavour::Lxd),
            ("/tmp/incus/sockets", Flavour::Lxd),
        ] {
            assert_eq!(
                Flavour::of_socket(std::path::Path::new(path)),
                want,
                "{path}"
            );
        }
    }

    #[test]
    fn garbage_is_a_clear_error() {
        let c = ctx("lxc", "x86_64");
        let cases = [
            (raw("", &[]), "LXD meta-data: empty"),
            (raw("[1, 2]", &[]), "LXD meta-data: not a YAML mapping"),
            (raw("a: [", &[]), "LXD meta-data: not valid YAML"),
            (
                raw("local-hostname: h\n", &[]),
                "LXD meta-data: no instance-id",
            ),
            (
                raw("instance-id: i\n", &[("user.meta-data", "- x\n")]),
                "LXD config user.meta-data: not a YAML mapping",
            ),
            (
                raw("instance-id: i\n", &[("user.network-config", "}{")]),
                "LXD network-config: not valid YAML",
            ),
        ];
        for (r, want) in cases {
            let e = assemble(&r, &c).unwrap_err().to_string();
            assert!(e.starts_with(want), "{e}");
        }
    }

    #[test]
    fn config_routes() {
        let what = "GET http://lxd/1.0/config";
        let keys = config_keys(
            r#"["/1.0/config/user.user-data", "/1.0/config/cloud-init.user-data", "/1.0/config/user.user-data",
                "/1.0/config/volatile.uuid", "/etc/passwd", "/1.0/config/user.a b", "/1.0/config/"]"#,
            what,
        )
        .unwrap();
        assert_eq!(keys, ["cloud-init.user-data", "user.user-data"]);
        for (body, want) in [
            (
                "<html>garbage</html>",
                "expected JSON, found something else",
            ),
            ("{\"a\": 1}", "expected a JSON list of config routes"),
            ("[1, 2]", "expected a JSON list of strings"),
        ] {
            let e = config_keys(body, what).unwrap_err().to_string();
            assert!(e.starts_with(&format!("LXD {what}: {want}")), "{e}");
        }
        assert!(parse_devices("{\"eth0\": {\"type\": \"nic\"}}", "d").is_ok());
        assert!(parse_devices("[]", "d").is_err());
        assert!(parse_devices("nope", "d").is_err());
    }
}

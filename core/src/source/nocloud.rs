// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the NoCloud datasource (SPEC §4.3), read as cloud-init's
//! `DataSourceNoCloud` reads it, from local files only.
//!
//! Where the data comes from, in the order cloud-init looks (for meta-data the
//! first place to name a key wins; user-data, vendor-data and network-config are
//! replaced by each later place that has them):
//!
//! 1. DMI `product_serial` holding `ds=nocloud[;key=value...]`;
//! 2. the kernel command line `ds=nocloud[;key=value...]` (`ds=nocloud-net` too);
//!    short keys: `i=` instance-id, `h=` local-hostname, `s=` seedfrom;
//! 3. the first seed folder, `/var/lib/cloud/seed/nocloud` then `nocloud-net`
//!    (and Ubuntu Core's `/writable/system-data/...` twins), holding `meta-data`
//!    (YAML) and `user-data`, optionally `vendor-data` and `network-config`;
//! 4. cloud-init's configuration, `datasource: {NoCloud: {seedfrom, user-data,
//!    meta-data, ...}}`;
//! 5. `seedfrom`, when one of the above names it: **a local folder only** (`file://`
//!    or a path, below the root), read like a seed folder. A network seed (`http://`,
//!    ...) is an error: leasehook does not fetch seeds over the network.
//!
//! A file system labelled `cidata`/`CIDATA` counts for detection, but leasehook
//! does not mount file systems: when it is the only seed, fetching is an error
//! saying so. The instance-id defaults to `nocloud`; `dsmode: disabled` in the
//! meta-data means "not this datasource". Parsing is pure ([`collect`],
//! [`apply_seedfrom`], [`finish`]); only [`NoCloud`] reads files.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::detect::config::CloudConfig;
use super::detect::read::cloud_config_files;
use super::detect::{CONTAINERS, NOCLOUD_LABELS};
use super::files::{first_line, read_limited, read_optional};
use super::yaml::{scalar_text, yaml};
use super::{Datasource, InstanceData, SourceKind};
use crate::constants::{NOCLOUD_SEED_DIRS, SEED_MAX_BYTES, UBUNTU_CORE_WRITABLE};
use crate::error::{Error, Problem, Result};

/// The most bytes read from `proc/1/cmdline`.
const CMDLINE_MAX_BYTES: u64 = 64 * 1024;

/// The files of one seed (a folder, or a local `seedfrom`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedFiles {
    /// Where they came from, as shown in `subplatform` and errors.
    pub source: String,
    /// `meta-data` (YAML).
    pub meta_data: Vec<u8>,
    /// `user-data`.
    pub user_data: Vec<u8>,
    /// `vendor-data`, when present.
    pub vendor_data: Option<Vec<u8>>,
    /// `network-config` (YAML), when present.
    pub network_config: Option<Vec<u8>>,
}

/// Everything read before it is known whether a `seedfrom` must be read too.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inputs {
    /// DMI `product_serial`.
    pub dmi_serial: Option<String>,
    /// The kernel command line (PID 1's in a container).
    pub cmdline: Option<String>,
    /// The first seed folder that holds `meta-data` and `user-data`.
    pub seed: Option<SeedFiles>,
    /// cloud-init's `datasource: {NoCloud: ...}` settings.
    pub config: Map<String, Value>,
    /// A `cidata` file system's by-label path, when there is one.
    pub label: Option<String>,
}

/// What has been gathered so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Collected {
    /// Meta-data; the first place to name a key wins.
    pub meta_data: Map<String, Value>,
    /// User-data.
    pub user_data: Option<Vec<u8>>,
    /// Vendor-data.
    pub vendor_data: Option<Vec<u8>>,
    /// Network configuration.
    pub network_config: Option<Value>,
    /// Where data came from (`dmi`, `cmdline`, a folder, `ds_config`, ...).
    pub found: Vec<String>,
}

fn datasource_error(what: &str, problem: String) -> Error {
    Error::Datasource {
        datasource: SourceKind::NoCloud,
        what: what.to_owned(),
        problem,
    }
}

/// Merges `new` into `cur`, keeping what `cur` already has (nested mappings are
/// merged the same way): cloud-init's `mergemanydict([cur, new])`.
fn merge_under(cur: &mut Map<String, Value>, new: Map<String, Value>) {
    for (k, v) in new {
        match (cur.get_mut(&k), v) {
            (None, v) => {
                cur.insert(k, v);
            }
            (Some(Value::Object(c)), Value::Object(n)) => merge_under(c, n),
            (Some(_), _) => {}
        }
    }
}

/// `ds=<id>[;key=value...]` in a command line, as cloud-init's
/// `parse_cmdline_data` reads it: the last word starting with `ds_id`, its
/// `;`-separated pairs, short keys expanded, a key without `=` being null.
pub fn parse_cmdline(ds_id: &str, cmdline: &str) -> Option<Map<String, Value>> {
    let padded = format!(" {cmdline} ");
    if !(padded.contains(&format!(" {ds_id} ")) || padded.contains(&format!(" {ds_id};"))) {
        return None;
    }
    let word = cmdline.split_whitespace().rfind(|w| w.starts_with(ds_id))?;
    let value = word.split_once('=').map_or("", |(_, v)| v);
    let mut fill = Map::new();
    for item in value.split(';').skip(1).filter(|i| !i.is_empty()) {
        let (k, v) = match item.split_once('=') {
            Some((k, v)) => (k, Value::String(v.to_owned())),
            None => (item, Value::Null),
        };
        let k = match k {
            "h" => "local-hostname",
            "i" => "instance-id",
            "s" => "seedfrom",
            other => other,
        };
        fill.insert(k.to_owned(), v);
    }
    Some(fill)
}

/// `ds=nocloud` or `ds=nocloud-net` in a command line (or DMI serial), with the
/// `dsmode` cloud-init derives: as given, else from the seed's scheme, else
/// `local` for `nocloud` and `net` for `nocloud-net`.
pub fn load_cmdline(cmdline: &str) -> Option<Map<String, Value>> {
    for (id, mode) in [("ds=nocloud", "local"), ("ds=nocloud-net", "net")] {
        let Some(mut fill) = parse_cmdline(id, cmdline) else {
            continue;
        };
        if fill.contains_key("dsmode") {
            return Some(fill);
        }
        let seed = fill
            .get("seedfrom")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let derived = if seed.is_empty() {
            Some(mode)
        } else if ["http://", "https://", "ftp://", "ftps://"]
            .iter()
            .any(|p| seed.starts_with(p))
        {
            Some("net")
        } else if seed.starts_with("file://") || seed.starts_with('/') {
            Some("local")
        } else {
            None
        };
        if let Some(m) = derived {
            fill.insert("dsmode".to_owned(), Value::String(m.to_owned()));
        }
        return Some(fill);
    }
    None
}

/// A YAML mapping from a seed (`meta-data`, `network-config`).
fn mapping(bytes: &[u8], what: &str) -> Result<Map<String, Value>> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| datasource_error(what, format!("not UTF-8 (byte {})", e.valid_up_to())))?;
    match yaml(text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(Value::Null) => Ok(Map::new()),
        Ok(_) => Err(datasource_error(
            what,
            Problem::bad("not a YAML mapping", text).to_string(),
        )),
        Err(e) => Err(datasource_error(what, format!("not valid YAML ({e})"))),
    }
}

/// A seed's files over what was collected (cloud-init's `_merge_new_seed`).
fn merge_seed(c: &mut Collected, seed: &SeedFiles) -> Result<()> {
    merge_under(
        &mut c.meta_data,
        mapping(&seed.meta_data, &format!("{}meta-data", seed.source))?,
    );
    if let Some(nc) = seed.network_config.as_ref().filter(|n| !n.is_empty()) {
        c.network_config = Some(Value::Object(mapping(
            nc,
            &format!("{}network-config", seed.source),
        )?));
    }
    c.user_data = Some(seed.user_data.clone());
    if let Some(vd) = &seed.vendor_data {
        c.vendor_data = Some(vd.clone());
    }
    Ok(())
}

/// A string or mapping value of cloud-init's NoCloud settings, as bytes.
fn config_bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::String(s) => s.clone().into_bytes(),
        other => other.to_string().into_bytes(),
    }
}

/// Steps 1–4 of the module docs: everything but `seedfrom`.
pub fn collect(i: &Inputs) -> Result<Collected> {
    let mut c = Collected::default();
    if let Some(md) = i.dmi_serial.as_deref().and_then(load_cmdline) {
        merge_under(&mut c.meta_data, md);
        c.found.push("dmi".to_owned());
    }
    if let Some(md) = i.cmdline.as_deref().and_then(load_cmdline) {
        merge_under(&mut c.meta_data, md);
        c.found.push("cmdline".to_owned());
    }
    if let Some(seed) = &i.seed {
        merge_seed(&mut c, seed)?;
        c.found.push(seed.source.trim_end_matches('/').to_owned());
    }
    if let Some(sf) = i.config.get("seedfrom") {
        c.meta_data.insert("seedfrom".to_owned(), sf.clone());
        c.found.push("ds_config_seedfrom".to_owned());
    }
    if let (Some(ud), Some(md)) = (i.config.get("user-data"), i.config.get("meta-data")) {
        let md = match md {
            Value::Object(m) => m.clone(),
            other => mapping(&config_bytes(other), "datasource.NoCloud.meta-data")?,
        };
        merge_under(&mut c.meta_data, md);
        if let Some(nc) = i.config.get("network-config").filter(|v| !v.is_null()) {
            c.network_config = Some(match nc {
                Value::Object(_) => nc.clone(),
                other => Value::Object(mapping(
                    &config_bytes(other),
                    "datasource.NoCloud.network-config",
                )?),
            });
        }
        c.user_data = Some(config_bytes(ud));
        if let Some(vd) = i.config.get("vendor-data") {
            c.vendor_data = Some(config_bytes(vd));
        }
        c.found.push("ds_config".to_owned());
    }
    if let Some(label) = &i.label {
        if c.found.is_empty() {
            return Err(datasource_error(
                label,
                "a NoCloud seed file system, but leasehook does not mount file systems: \
                 use a seed folder, or ds=nocloud;s=file:///PATH/ after mounting it"
                    .to_owned(),
            ));
        }
        log::warn!("NoCloud: {label} is not read (leasehook does not mount file systems)");
    }
    if c.found.is_empty() {
        return Err(Error::NotFound {
            datasource: SourceKind::NoCloud,
            reason: "no ds=nocloud on the kernel command line or in DMI product_serial, no seed folder holding meta-data and user-data, no NoCloud seed in cloud-init's configuration".to_owned(),
        });
    }
    Ok(c)
}

/// The local folder `seedfrom` names (a path or `file://` URL, with `%s` standing
/// for each file name when present), or `None` when there is no `seedfrom`. A
/// network seed is an error.
pub fn seedfrom(c: &Collected) -> Result<Option<String>> {
    let Some(v) = c.meta_data.get("seedfrom") else {
        return Ok(None);
    };
    let Some(s) = scalar_text(v).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let path = s.strip_prefix("file://").unwrap_or(&s);
    if !path.starts_with('/') {
        return Err(datasource_error(
            "seedfrom",
            Problem::bad(
                "leasehook reads only local seeds (a path or file:///...), not network ones",
                &s,
            )
            .to_string(),
        ));
    }
    Ok(Some(path.to_owned()))
}

/// The seed `seedfrom` named, over what was collected (meta-data keys already
/// known win; user-data, vendor-data and network-config are replaced).
pub fn apply_seedfrom(c: &mut Collected, seed: &SeedFiles) -> Result<()> {
    merge_under(
        &mut c.meta_data,
        mapping(&seed.meta_data, &format!("{}meta-data", seed.source))?,
    );
    c.user_data = Some(seed.user_data.clone());
    c.vendor_data.clone_from(&seed.vendor_data);
    c.network_config = match &seed.network_config {
        Some(nc) if !nc.is_empty() => Some(Value::Object(mapping(
            nc,
            &format!("{}network-config", seed.source),
        )?)),
        _ => None,
    };
    c.found.push(seed.source.clone());
    Ok(())
}

/// The instance data: defaults below what was collected (`instance-id: nocloud`,
/// `dsmode: net`); `dsmode: disabled` is "not this datasource".
pub fn finish(mut c: Collected) -> Result<InstanceData> {
    merge_under(
        &mut c.meta_data,
        json!({"instance-id": "nocloud", "dsmode": "net"})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    let get = |k: &str| c.meta_data.get(k).and_then(scalar_text);
    if get("dsmode").as_deref() == Some("disabled") {
        return Err(Error::NotFound {
            datasource: SourceKind::NoCloud,
            reason: "the meta-data says dsmode: disabled".to_owned(),
        });
    }
    let instance_id = get("instance-id")
        .ok_or_else(|| datasource_error("meta-data", "instance-id is not a string".to_owned()))?;
    Ok(InstanceData {
        datasource: SourceKind::NoCloud,
        local_hostname: get("local-hostname"),
        cloud_name: c
            .meta_data
            .get("cloud-name")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_owned(),
        platform: "nocloud".to_owned(),
        subplatform: format!("seed-dir ({})", c.found.join(",")),
        region: None,
        availability_zone: None,
        instance_id,
        ds: json!({"meta_data": c.meta_data}),
        meta_data: c.meta_data,
        user_data: c.user_data,
        vendor_data: c.vendor_data,
        network_config: c.network_config,
    })
}

/// The NoCloud datasource below a root folder.
#[derive(Debug, Clone)]
pub struct NoCloud {
    root: PathBuf,
    virt: String,
}

impl NoCloud {
    /// Reads below `root` (`/` in production).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            virt: "unavailable".to_owned(),
        }
    }

    /// The virtualisation (from detection): in a container the kernel command line
    /// is PID 1's.
    #[must_use]
    pub fn with_virt(mut self, virt: impl Into<String>) -> Self {
        self.virt = virt.into();
        self
    }

    fn shown(&self, rel: &str) -> String {
        self.root.join(rel).display().to_string()
    }

    /// Reads everything but `seedfrom`.
    pub fn inputs(&self) -> Result<Inputs> {
        let at = |rel: &str| self.root.join(rel);
        let container = CONTAINERS.contains(&self.virt.as_str());
        let cmdline = if container {
            read_limited(&at("proc/1/cmdline"), CMDLINE_MAX_BYTES)
                .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        } else {
            first_line(&at("proc/cmdline"))
        };
        let mut dirs: Vec<String> = NOCLOUD_SEED_DIRS.iter().map(|d| (*d).to_owned()).collect();
        if at(UBUNTU_CORE_WRITABLE).is_dir() {
            dirs.extend(
                NOCLOUD_SEED_DIRS
                    .iter()
                    .map(|d| format!("{UBUNTU_CORE_WRITABLE}/{d}")),
            );
        }
        let mut seed = None;
        for d in dirs {
            if let Some(s) = Self::seed_folder(&at(&d), &format!("{}/", self.shown(&d)))? {
                seed = Some(s);
                break;
            }
        }
        let mut warnings = Vec::new();
        let cloud = CloudConfig::parse(&cloud_config_files(&self.root, &mut warnings));
        for w in warnings.iter().chain(&cloud.warnings) {
            log::warn!("NoCloud: {w}");
        }
        let label = (!container)
            .then(|| {
                NOCLOUD_LABELS
                    .iter()
                    .map(|l| at(&format!("dev/disk/by-label/{l}")))
                    .find(|p| p.symlink_metadata().is_ok())
            })
            .flatten()
            .map(|p| p.display().to_string());
        Ok(Inputs {
            dmi_serial: first_line(&at("sys/class/dmi/id/product_serial")),
            cmdline,
            seed,
            config: cloud.nocloud_values,
            label,
        })
    }

    /// A seed folder's files: `None` unless it holds `meta-data` and `user-data`.
    fn seed_folder(dir: &Path, shown: &str) -> Result<Option<SeedFiles>> {
        let file = |name: &str| {
            let path = dir.join(name);
            read_optional(&path, SEED_MAX_BYTES)
                .map_err(|e| datasource_error(&path.display().to_string(), e.to_string()))
        };
        let (Some(meta_data), Some(user_data)) = (file("meta-data")?, file("user-data")?) else {
            return Ok(None);
        };
        Ok(Some(SeedFiles {
            source: shown.to_owned(),
            meta_data,
            user_data,
            vendor_data: file("vendor-data")?,
            network_config: file("network-config")?,
        }))
    }

    /// A local `seedfrom`, below the root: `meta-data` and `user-data` are required.
    fn seedfrom_files(&self, path: &str) -> Result<SeedFiles> {
        let name = |f: &str| {
            if path.contains("%s") {
                path.replace("%s", f)
            } else {
                format!("{}/{f}", path.trim_end_matches('/'))
            }
        };
        let read = |f: &str| {
            let p = name(f);
            let full = self.root.join(p.trim_start_matches('/'));
            read_optional(&full, SEED_MAX_BYTES)
                .map_err(|e| datasource_error(&format!("seedfrom {p}"), e.to_string()))
        };
        let required = |f: &str| {
            read(f)?.ok_or_else(|| {
                datasource_error(&format!("seedfrom {}", name(f)), "missing".to_owned())
            })
        };
        Ok(SeedFiles {
            source: path.to_owned(),
            meta_data: required("meta-data")?,
            user_data: required("user-data")?,
            vendor_data: read("vendor-data")?,
            network_config: read("network-config")?,
        })
    }
}

impl Datasource for NoCloud {
    fn kind(&self) -> SourceKind {
        SourceKind::NoCloud
    }

    fn fetch(&self) -> Result<InstanceData> {
        let mut c = collect(&self.inputs()?)?;
        if let Some(path) = seedfrom(&c)? {
            let seed = self.seedfrom_files(&path)?;
            apply_seedfrom(&mut c, &seed)?;
        }
        finish(c)
    }

    /// All of NoCloud is local files, so the check reads them as the fetch does
    /// and compares the instance-id: the two cannot disagree.
    fn check_instance_id(&self, cached: &InstanceData) -> Result<bool> {
        Ok(self.fetch()?.instance_id == cached.instance_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed(source: &str, meta: &str, user: &str) -> SeedFiles {
        SeedFiles {
            source: source.into(),
            meta_data: meta.as_bytes().to_vec(),
            user_data: user.as_bytes().to_vec(),
            vendor_data: None,
            network_config: None,
        }
    }

    #[test]
    fn command_line_parsing_matches_cloud_init() {
        let cases: [(&str, Option<Value>); 8] = [
            ("ro ds=nocloud quiet", Some(json!({"dsmode": "local"}))),
            (
                "ds=nocloud;s=file:///srv/seed/;i=iid-1;h=host1",
                Some(
                    json!({"seedfrom": "file:///srv/seed/", "instance-id": "iid-1", "local-hostname": "host1", "dsmode": "local"}),
                ),
            ),
            (
                "ds=nocloud;s=http://10.0.0.1/x/",
                Some(json!({"seedfrom": "http://10.0.0.1/x/", "dsmode": "net"})),
            ),
            ("ds=nocloud-net", Some(json!({"dsmode": "net"}))),
            (
                "ds=nocloud;dsmode=disabled;flag",
                Some(json!({"dsmode": "disabled", "flag": null})),
            ),
            (
                "ds=nocloud;;i=x;",
                Some(json!({"instance-id": "x", "dsmode": "local"})),
            ),
            ("xds=nocloud", None),
            ("ds=nocloudy", None),
        ];
        for (line, want) in cases {
            assert_eq!(load_cmdline(line).map(Value::Object), want, "{line}");
        }
    }

    #[test]
    fn first_place_wins_meta_data_and_last_wins_user_data() {
        let inputs = Inputs {
            dmi_serial: Some("ds=nocloud;i=from-dmi".into()),
            cmdline: Some("ds=nocloud;i=from-cmdline;h=cmdline-host".into()),
            seed: Some(seed(
                "/var/lib/cloud/seed/nocloud/",
                "instance-id: from-seed\nlocal-hostname: seed-host\nextra: {a: 1}\n",
                "#cloud-config\nseed: true\n",
            )),
            config: Map::new(),
            label: Some("/dev/disk/by-label/cidata".into()),
        };
        let c = collect(&inputs).unwrap();
        assert_eq!(c.found, ["dmi", "cmdline", "/var/lib/cloud/seed/nocloud"]);
        let d = finish(c).unwrap();
        assert_eq!(d.instance_id, "from-dmi");
        assert_eq!(d.local_hostname.as_deref(), Some("cmdline-host"));
        assert_eq!(d.meta_data["extra"]["a"], 1);
        assert_eq!(d.meta_data["dsmode"], "local");
        assert_eq!(
            d.user_data.as_deref(),
            Some(&b"#cloud-config\nseed: true\n"[..])
        );
        assert_eq!(
            d.subplatform,
            "seed-dir (dmi,cmdline,/var/lib/cloud/seed/nocloud)"
        );
        assert_eq!(d.ds["meta_data"]["instance-id"], "from-dmi");
        assert_eq!(d.cloud_name, "unknown");
    }

    #[test]
    fn seedfrom_is_local_only() {
        let mut c = collect(&Inputs {
            cmdline: Some("ds=nocloud;s=file:///srv/seed/;h=cmd".into()),
            ..Inputs::default()
        })
        .unwrap();
        assert_eq!(seedfrom(&c).unwrap().as_deref(), Some("/srv/seed/"));
        let mut s = seed(
            "/srv/seed/",
            "instance-id: seeded\nlocal-hostname: ignored\n",
            "ud",
        );
        s.network_config = Some(b"version: 2\n".to_vec());
        apply_seedfrom(&mut c, &s).unwrap();
        let d = finish(c).unwrap();
        assert_eq!(d.instance_id, "seeded");
        assert_eq!(d.local_hostname.as_deref(), Some("cmd"));
        assert_eq!(d.network_config, Some(json!({"version": 2})));

        let net = collect(&Inputs {
            cmdline: Some("ds=nocloud;s=https://example.invalid/seed/".into()),
            ..Inputs::default()
        })
        .unwrap();
        let e = seedfrom(&net).unwrap_err().to_string();
        assert!(
            e.starts_with("NoCloud seedfrom: leasehook reads only local seeds"),
            "{e}"
        );
    }

    #[test]
    fn defaults_disabled_and_nothing() {
        let d = finish(
            collect(&Inputs {
                cmdline: Some("ds=nocloud".into()),
                ..Inputs::default()
            })
            .unwrap(),
        )
        .unwrap();
        assert_eq!(d.instance_id, "nocloud");
        assert!(d.user_data.is_none());
        let disabled = collect(&Inputs {
            cmdline: Some("ds=nocloud;dsmode=disabled".into()),
            ..Inputs::default()
        })
        .unwrap();
        assert!(matches!(finish(disabled), Err(Error::NotFound { .. })));
        assert!(matches!(
            collect(&Inputs::default()),
            Err(Error::NotFound { .. })
        ));
        let label_only = collect(&Inputs {
            label: Some("/dev/disk/by-label/CIDATA".into()),
            ..Inputs::default()
        })
        .unwrap_err()
        .to_string();
        assert!(
            label_only.contains("does not mount file systems"),
            "{label_only}"
        );
    }

    #[test]
    fn cloud_config_settings_are_a_seed() {
        let config = json!({
            "meta-data": {"instance-id": "from-config"},
            "user-data": "#cloud-config\n{}\n",
            "network-config": "version: 1\nconfig: []\n"
        });
        let c = collect(&Inputs {
            config: config.as_object().cloned().unwrap(),
            ..Inputs::default()
        })
        .unwrap();
        assert_eq!(c.found, ["ds_config"]);
        let d = finish(c).unwrap();
        assert_eq!(d.instance_id, "from-config");
        assert_eq!(d.network_config.unwrap()["version"], 1);
    }

    #[test]
    fn corrupt_seeds_are_clear_errors() {
        for (meta, want) in [
            ("instance-id: [", "NoCloud /s/meta-data: not valid YAML"),
            ("- a\n- b\n", "NoCloud /s/meta-data: not a YAML mapping"),
            (
                "instance-id: [1, 2]\n",
                "NoCloud meta-data: instance-id is not a string",
            ),
        ] {
            let e = collect(&Inputs {
                seed: Some(seed("/s/", meta, "")),
                ..Inputs::default()
            })
            .and_then(finish)
            .unwrap_err()
            .to_string();
            assert!(e.starts_with(want), "{e}");
        }
        let mut bad = seed("/s/", "instance-id: i\n", "");
        bad.meta_data = vec![0xff, 0xfe];
        let e = collect(&Inputs {
            seed: Some(bad),
            ..Inputs::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("not UTF-8"), "{e}");
    }
}

// SPDX-License-Identifier: Apache-2.0
//! leasehook's configuration (SPEC §7): `/etc/leasehook/config.yaml`, then
//! `/etc/leasehook/config.d/*.yaml` in lexical order, then `LEASEHOOK_*`
//! environment variables, then command-line flags; a later layer wins a key. Every
//! value remembers where it came from ([`SettingOrigin`]), which `leasehook config show`
//! prints.
//!
//! Parsing a file ([`parse_file`]) and merging layers are pure; [`load`] reads the
//! files. Files are read strictly: an unknown key, a repeated key or a bad value is
//! an error naming the file, the line and the key, and nothing is used (a hook then
//! changes nothing; the boot stage stops).
//!
//! `root` (the prefix of every path, for tests) is not a file key: it decides where
//! the files are read from, so only `--root` and `LEASEHOOK_ROOT` set it.
//! `--config FILE` (or `LEASEHOOK_CONFIG`) reads that one file instead of
//! `config.yaml` and `config.d` (`/dev/null`: no file, the defaults).

mod keys;
mod nics;
mod show;
#[cfg(test)]
mod tests;
mod unmanaged;

use std::collections::BTreeMap;
use std::fmt;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use serde_saphyr::Spanned;

use crate::constants::{CONFIG_MAX_BYTES, LEASEHOOK_CONFIG, LEASEHOOK_CONFIG_D};
use crate::error::{Error, Result};
use crate::event::Env;
use crate::model::SourceKind;
use crate::model::{IfName, MacAddr, NicMetadata};
use crate::plan::PlanConfig;

pub use crate::error::{BadEntry, BadValue};
pub use keys::{KEYS, Key};
pub use nics::{IntentRoute, IntentRule, NicEntry, PREFIX_ADDRESSES_MAX, RULE_PRIORITIES, Via};
pub use show::{show_json, show_yaml};
pub use unmanaged::{Unmanaged, glob_match};

/// `fallback:` settings: global, and per datasource (`datasource: {Ec2: {fallback:
/// false}}`). A datasource's own setting wins; without either, fallback is on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FallbackPolicy {
    /// `fallback:` at the top of the configuration.
    pub global: Option<bool>,
    /// `datasource.<Name>.fallback`.
    pub per_datasource: BTreeMap<SourceKind, bool>,
}

impl FallbackPolicy {
    /// Whether the cache of `kind` may stand in, and which setting said no.
    pub fn allows(&self, kind: SourceKind) -> Result<(), FallbackOff> {
        match (self.per_datasource.get(&kind), self.global) {
            (Some(true), _) | (None, Some(true) | None) => Ok(()),
            (Some(false), _) => Err(FallbackOff::Datasource(kind)),
            (None, Some(false)) => Err(FallbackOff::Global),
        }
    }
}

/// Which setting turns the cache's fallback off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FallbackOff {
    /// `datasource.<Name>.fallback: false`.
    #[error("datasource.{0}.fallback is false")]
    Datasource(SourceKind),
    /// `fallback: false`.
    #[error("fallback is false")]
    Global,
}

/// The environment variable that names the prefix of every path.
pub const ROOT_ENV: &str = "LEASEHOOK_ROOT";
/// The environment variable that names one configuration file to read instead of
/// `config.yaml` and `config.d`.
pub const CONFIG_ENV: &str = "LEASEHOOK_CONFIG";

/// The `--help` section on where the hooks' and the CLI's settings come from,
/// listing every `LEASEHOOK_*` variable ([`environment`]).
pub fn env_help() -> String {
    let mut out = String::from(
        "Configuration: /etc/leasehook/config.yaml, then /etc/leasehook/config.d/*.yaml,\n\
         then these environment variables (`leasehook config show` prints the result):\n",
    );
    for (var, help) in environment() {
        let _ = writeln!(out, "  {var:<30} {help}");
    }
    out
}

/// Every environment variable leasehook's programs read, with what it does:
/// `LEASEHOOK_ROOT`, `LEASEHOOK_CONFIG`, then one per key (for `--help` and the
/// manual pages).
pub fn environment() -> impl Iterator<Item = (&'static str, &'static str)> {
    let sources = [
        (ROOT_ENV, "prefix of every file path (default /)"),
        (
            CONFIG_ENV,
            "read this file instead of /etc/leasehook/config.yaml and config.d",
        ),
    ];
    sources
        .into_iter()
        .chain(KEYS.iter().filter_map(|k| Some((k.env?, k.help))))
}

/// Every setting, merged, with defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Prefix of every file path (`/` in production).
    pub root: PathBuf,
    /// `enabled`: `false` turns every hook, the worker, `refresh` and `watch`
    /// into a no-op.
    pub enabled: bool,
    /// `profile`, `table_base`, `priority_base`, `primary_rules`, `secondary_addresses`.
    pub plan: PlanConfig,
    /// `unmanaged`: NICs leasehook leaves alone.
    pub unmanaged: Vec<Unmanaged>,
    /// `kubernetes`: detect a Kubernetes node with a VPC-native CNI, or say so.
    pub kubernetes: crate::kubernetes::Mode,
    /// `provider`: which cloud the hooks and `refresh` ask (`auto`: the boot
    /// stage's verdict, else EC2).
    pub provider: crate::source::provider::ProviderChoice,
    /// `imds.*`.
    pub imds: ImdsSettings,
    /// `imdsv1_fallback`.
    pub imdsv1_fallback: bool,
    /// Each cloud's `<name>.endpoint` that is set, by the cloud's name (one not
    /// set: the cloud's defaults, [`crate::source::provider::EndpointKey`]).
    pub cloud_endpoints: BTreeMap<String, String>,
    /// `datasource_list` (`None`: what detection finds).
    pub datasource_list: Option<Vec<String>>,
    /// `fallback` and `datasource.<Name>.fallback`.
    pub fallback: FallbackPolicy,
    /// `log_level`.
    pub log_level: log::LevelFilter,
    /// `metrics.textfile`: where the metrics are written for node-exporter's
    /// textfile collector after every event and refresh (`None`: nowhere).
    pub metrics_textfile: Option<PathBuf>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            root: PathBuf::from("/"),
            enabled: true,
            plan: PlanConfig::default(),
            unmanaged: Vec::new(),
            kubernetes: crate::kubernetes::Mode::default(),
            provider: crate::source::provider::ProviderChoice::default(),
            imds: ImdsSettings::default(),
            imdsv1_fallback: false,
            cloud_endpoints: BTreeMap::new(),
            datasource_list: None,
            fallback: FallbackPolicy::default(),
            log_level: log::LevelFilter::Info,
            metrics_textfile: None,
        }
    }
}

/// `imds.*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImdsSettings {
    /// `imds.endpoints` (`None`: [`crate::constants::IMDS_ENDPOINTS`]).
    pub endpoints: Option<Vec<String>>,
    /// `imds.sync_budget_s`: how long a DHCP client may be held.
    pub sync_budget: Duration,
    /// `imds.budget_s`: how long the whole wait may take (a hook's is never less
    /// than its synchronous budget); how long the boot stage retries EC2.
    pub budget: Duration,
    /// `imds.bind_interface`: send a NIC's requests through that NIC.
    pub bind_interface: bool,
}

impl Default for ImdsSettings {
    fn default() -> Self {
        Self {
            endpoints: None,
            sync_budget: crate::constants::IMDS_SYNC_BUDGET,
            budget: crate::constants::IMDS_BUDGET,
            bind_interface: true,
        }
    }
}

impl Settings {
    /// Whether the NIC `name` (MAC `mac`, when known) is listed in `unmanaged`.
    pub fn is_unmanaged(&self, name: &IfName, mac: Option<MacAddr>) -> bool {
        self.unmanaged.iter().any(|u| u.matches(name, mac))
    }
}

/// What the `unmanaged` entries that need the metadata say of the NIC the
/// metadata describes as `nic` (`None`: the metadata does not list it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataVerdict<'a> {
    /// No entry names it.
    Managed,
    /// This entry names it.
    Unmanaged(&'a Unmanaged),
    /// This entry might: the metadata does not say yet (no device-number).
    Unknown(&'a Unmanaged),
}

/// [`MetadataVerdict`] of `entries` for `nic`.
pub fn unmanaged_by_metadata<'a>(
    entries: &'a [Unmanaged],
    nic: Option<&NicMetadata>,
) -> MetadataVerdict<'a> {
    let mut unknown = None;
    for u in entries.iter().filter(|u| u.needs_metadata()) {
        match nic.and_then(|n| u.matches_nic(n)) {
            Some(true) => return MetadataVerdict::Unmanaged(u),
            Some(false) => {}
            None => unknown = unknown.or(Some(u)),
        }
    }
    unknown.map_or(MetadataVerdict::Managed, MetadataVerdict::Unknown)
}

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingOrigin {
    /// Nothing set it.
    Default,
    /// A configuration file, at this line.
    File {
        /// The file, as it was read (root included).
        path: String,
        /// The line of the value (1-based; 0 when the parser did not say).
        line: u64,
    },
    /// An environment variable.
    Env(String),
    /// A command-line flag.
    Flag(String),
}

impl fmt::Display for SettingOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Default => f.write_str("default"),
            Self::File { path, line: 0 } => f.write_str(path),
            Self::File { path, line } => write!(f, "{path} line {line}"),
            Self::Env(var) => write!(f, "environment {var}"),
            Self::Flag(flag) => write!(f, "flag {flag}"),
        }
    }
}

/// A command-line flag that sets a key (its value as text, as an environment
/// variable would give it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flag {
    /// The key, as in the file (`table_base`, `imds.budget_s`).
    pub key: &'static str,
    /// The flag as the user wrote it (`--table-base`).
    pub flag: &'static str,
    /// The value.
    pub value: String,
}

/// Where to read from: what the command line and the environment say.
#[derive(Debug, Clone, Default)]
pub struct Layers {
    /// `--root` (wins over `LEASEHOOK_ROOT`).
    pub root: Option<PathBuf>,
    /// `--config FILE` (wins over `LEASEHOOK_CONFIG`): read only this file, as given
    /// (not below the root).
    pub file: Option<PathBuf>,
    /// The environment (`LEASEHOOK_*` are read).
    pub env: Env,
    /// Flags that set keys; they win over everything.
    pub flags: Vec<Flag>,
}

impl Layers {
    /// Reading with this environment and nothing from the command line.
    pub fn from_env(env: Env) -> Self {
        Self {
            env,
            ..Self::default()
        }
    }

    /// The root flag (`--root DIR`), when given.
    #[must_use]
    pub fn with_root(mut self, root: Option<PathBuf>) -> Self {
        self.root = root;
        self
    }

    /// The configuration file flag (`--config FILE`), when given.
    #[must_use]
    pub fn with_file(mut self, file: Option<PathBuf>) -> Self {
        self.file = file;
        self
    }

    /// A flag that sets `key`, when given.
    #[must_use]
    pub fn with_flag(
        mut self,
        key: &'static str,
        flag: &'static str,
        value: Option<String>,
    ) -> Self {
        if let Some(value) = value {
            self.flags.push(Flag { key, flag, value });
        }
        self
    }

    fn env_value(&self, var: &str) -> Option<&str> {
        self.env
            .get(var)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The root: `--root`, else `LEASEHOOK_ROOT`, else `/`, and where it came from.
    pub fn resolve_root(&self) -> (PathBuf, SettingOrigin) {
        if let Some(r) = &self.root {
            return (r.clone(), SettingOrigin::Flag("--root".to_owned()));
        }
        match self.env_value(ROOT_ENV) {
            Some(r) => (PathBuf::from(r), SettingOrigin::Env(ROOT_ENV.to_owned())),
            None => (PathBuf::from("/"), SettingOrigin::Default),
        }
    }

    /// The files to read, in order, and whether each must exist. `--config
    /// /dev/null` reads none.
    pub fn files(&self, root: &Path) -> Result<Vec<(PathBuf, bool)>> {
        let explicit = self
            .file
            .clone()
            .or_else(|| self.env_value(CONFIG_ENV).map(PathBuf::from));
        if let Some(f) = explicit {
            if f == Path::new("/dev/null") {
                return Ok(Vec::new());
            }
            return Ok(vec![(f, true)]);
        }
        let mut out = vec![(root.join(LEASEHOOK_CONFIG), false)];
        let dir = root.join(LEASEHOOK_CONFIG_D);
        match std::fs::read_dir(&dir) {
            Ok(entries) => {
                let mut names: Vec<PathBuf> = entries
                    .filter_map(std::result::Result::ok)
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                            !n.starts_with('.')
                                && Path::new(n).extension().is_some_and(|e| e == "yaml")
                        })
                    })
                    .collect();
                names.sort();
                out.extend(names.into_iter().map(|p| (p, true)));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&dir, &e)),
        }
        Ok(out)
    }
}

/// The merged settings and where each value came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loaded {
    /// The settings.
    pub settings: Settings,
    /// Each key that was set (`imds.budget_s`, `datasource.Ec2.fallback`) and where
    /// its value came from; keys not listed are defaults.
    pub origins: BTreeMap<String, SettingOrigin>,
    /// The files read, in order.
    pub files: Vec<String>,
}

impl Loaded {
    /// The `datasource_list` setting and where it came from, when it is set: what
    /// detection is handed ([`crate::source::detect::ReadOptions`]).
    pub fn datasource_list(&self) -> Option<crate::source::detect::ConfiguredList> {
        self.settings
            .datasource_list
            .as_ref()
            .map(|names| crate::source::detect::ConfiguredList {
                names: names.clone(),
                from: self.origin("datasource_list").to_string(),
            })
    }

    /// Where `key`'s value came from.
    pub fn origin(&self, key: &str) -> SettingOrigin {
        self.origins
            .get(key)
            .cloned()
            .unwrap_or(SettingOrigin::Default)
    }
}

/// One parsed configuration file: each key it sets, the value and its line.
#[derive(Debug, Clone, PartialEq)]
pub struct Layer {
    /// The file.
    pub path: String,
    /// `(key, value, line)` in the order of [`KEYS`]; `datasource.<Name>.fallback`
    /// after them.
    pub values: Vec<(String, Value, u64)>,
}

/// Reads every layer and merges them (see the module docs).
pub fn load(sources: &Layers) -> Result<Loaded> {
    let (root, root_origin) = sources.resolve_root();
    let mut layers = Vec::new();
    for (path, required) in sources.files(&root)? {
        if !required && !path.exists() {
            continue;
        }
        let text = crate::source::files::read_text(&path, CONFIG_MAX_BYTES).map_err(|source| {
            Error::Read {
                path: format!("{path:?}"),
                source,
            }
        })?;
        layers.push(parse_file(&path.display().to_string(), &text)?);
    }
    merge(&root, root_origin, &layers, sources)
}

/// Merges parsed files, then the environment, then flags, over the defaults.
pub fn merge(
    root: &Path,
    root_origin: SettingOrigin,
    layers: &[Layer],
    sources: &Layers,
) -> Result<Loaded> {
    let mut loaded = Loaded::default();
    loaded.settings.root = root.to_path_buf();
    if root_origin != SettingOrigin::Default {
        loaded.origins.insert("root".to_owned(), root_origin);
    }
    for layer in layers {
        loaded.files.push(layer.path.clone());
        for (key, value, line) in &layer.values {
            let origin = SettingOrigin::File {
                path: layer.path.clone(),
                line: *line,
            };
            set(&mut loaded, key, &keys::Raw::Yaml(value), origin)?;
        }
    }
    for key in KEYS.iter() {
        if let Some(var) = key.env
            && let Some(v) = sources.env_value(var)
        {
            set(
                &mut loaded,
                key.name,
                &keys::Raw::Text(v),
                SettingOrigin::Env(var.to_owned()),
            )?;
        }
    }
    for f in &sources.flags {
        set(
            &mut loaded,
            f.key,
            &keys::Raw::Text(&f.value),
            SettingOrigin::Flag(f.flag.to_owned()),
        )?;
    }
    Ok(loaded)
}

fn set(loaded: &mut Loaded, key: &str, raw: &keys::Raw<'_>, origin: SettingOrigin) -> Result<()> {
    let result = match key
        .strip_prefix("datasource.")
        .and_then(|k| k.strip_suffix(".fallback"))
    {
        Some(name) => keys::set_datasource_fallback(&mut loaded.settings, name, raw),
        None => match KEYS.iter().find(|k| k.name == key) {
            Some(k) => (k.set)(k, &mut loaded.settings, raw),
            None => Err(BadValue::UnknownKey),
        },
    };
    result.map_err(|problem| Error::Config {
        origin: origin.to_string(),
        key: key.to_owned(),
        problem: Box::new(problem),
    })?;
    loaded.origins.insert(key.to_owned(), origin);
    Ok(())
}

/// The keys of a file, as written: every field a spanned leaf, unknown keys refused.
/// Read by hand ([`FileVisitor`]) because a cloud's section (`gce:`) is a key of
/// the registry's ([`crate::source::CLOUDS`]), not a field written here.
#[derive(Debug, Default)]
struct FileDoc {
    enabled: Option<Spanned<Value>>,
    profile: Option<Spanned<Value>>,
    table_base: Option<Spanned<Value>>,
    priority_base: Option<Spanned<Value>>,
    primary_rules: Option<Spanned<Value>>,
    secondary_addresses: Option<Spanned<Value>>,
    unmanaged: Option<Spanned<Value>>,
    /// `nics:`, read with every leaf's line ([`nics::NicDoc`]).
    nics: Option<Spanned<Vec<Spanned<nics::NicDoc>>>>,
    kubernetes: Option<Spanned<Value>>,
    provider: Option<Spanned<Value>>,
    imds: Option<ImdsDoc>,
    imdsv1_fallback: Option<Spanned<Value>>,
    /// Each cloud's section, by its endpoint key, in the file's order.
    clouds: Vec<(&'static str, EndpointDoc)>,
    datasource_list: Option<Spanned<Value>>,
    fallback: Option<Spanned<Value>>,
    datasource: Option<BTreeMap<String, PerSourceDoc>>,
    log_level: Option<Spanned<Value>>,
    metrics: Option<MetricsDoc>,
    root: Option<Spanned<Value>>,
}

/// A file's top-level keys, for the "expected one of" of an unknown one:
/// leasehook's own, with every cloud that has an endpoint after
/// `imdsv1_fallback`.
static FILE_FIELDS: std::sync::LazyLock<Vec<&'static str>> = std::sync::LazyLock::new(|| {
    let mut fields = vec![
        "enabled",
        "profile",
        "table_base",
        "priority_base",
        "primary_rules",
        "secondary_addresses",
        "unmanaged",
        "nics",
        "kubernetes",
        "provider",
        "imds",
        "imdsv1_fallback",
    ];
    fields.extend(
        crate::source::CLOUDS
            .iter()
            .filter(|c| c.endpoint.is_some())
            .map(|c| c.name),
    );
    fields.extend([
        "datasource_list",
        "fallback",
        "datasource",
        "log_level",
        "metrics",
        "root",
    ]);
    fields
});

impl<'de> Deserialize<'de> for FileDoc {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_map(FileVisitor)
    }
}

/// Reads a [`FileDoc`] key by key.
struct FileVisitor;

impl<'de> serde::de::Visitor<'de> for FileVisitor {
    type Value = FileDoc;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a mapping of leasehook's keys")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<FileDoc, A::Error> {
        let mut doc = FileDoc::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "enabled" => doc.enabled = map.next_value()?,
                "profile" => doc.profile = map.next_value()?,
                "table_base" => doc.table_base = map.next_value()?,
                "priority_base" => doc.priority_base = map.next_value()?,
                "primary_rules" => doc.primary_rules = map.next_value()?,
                "secondary_addresses" => doc.secondary_addresses = map.next_value()?,
                "unmanaged" => doc.unmanaged = map.next_value()?,
                "nics" => doc.nics = map.next_value()?,
                "kubernetes" => doc.kubernetes = map.next_value()?,
                "provider" => doc.provider = map.next_value()?,
                "imdsv1_fallback" => doc.imdsv1_fallback = map.next_value()?,
                "datasource_list" => doc.datasource_list = map.next_value()?,
                "fallback" => doc.fallback = map.next_value()?,
                "log_level" => doc.log_level = map.next_value()?,
                "root" => doc.root = map.next_value()?,
                "imds" => doc.imds = map.next_value()?,
                "datasource" => doc.datasource = map.next_value()?,
                "metrics" => doc.metrics = map.next_value()?,
                name => {
                    let Some(endpoint) = crate::source::CLOUDS
                        .iter()
                        .find(|c| c.name == name)
                        .and_then(|c| c.endpoint)
                    else {
                        return Err(serde::de::Error::unknown_field(
                            name,
                            FILE_FIELDS.as_slice(),
                        ));
                    };
                    let section: Option<EndpointDoc> = map.next_value()?;
                    doc.clouds.push((endpoint.key, section.unwrap_or_default()));
                }
            }
        }
        Ok(doc)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ImdsDoc {
    endpoints: Option<Spanned<Value>>,
    sync_budget_s: Option<Spanned<Value>>,
    budget_s: Option<Spanned<Value>>,
    bind_interface: Option<Spanned<Value>>,
}

/// A cloud's section: its endpoint.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EndpointDoc {
    endpoint: Option<Spanned<Value>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MetricsDoc {
    textfile: Option<Spanned<Value>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PerSourceDoc {
    fallback: Option<Spanned<Value>>,
}

/// What a YAML error may say: the position, a key name when it is one, and the
/// parser's words when they quote nothing of the file. `--config /etc/shadow`
/// must not print a line of it (the parser takes `root:HASH:...` for a key).
fn yaml_error(e: &serde_saphyr::Error) -> String {
    let text = e.to_string();
    let (what, at) = match text.rfind(" at line ") {
        Some(i) => text.split_at(i),
        None => (text.as_str(), ""),
    };
    let key_name = |k: &str| {
        !k.is_empty()
            && k.len() <= 64
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    };
    let shown = |k: &str| {
        if key_name(k) {
            format!("`{k}`")
        } else {
            "(not shown: it is not a key name)".to_owned()
        }
    };
    let what = if let Some(rest) = what.strip_prefix("unknown field `") {
        // "unknown field `K`, expected one of a, b": the list is ours.
        match rest.rsplit_once("`, expected ") {
            Some((k, _)) if key_name(k) => what.to_owned(),
            Some((_, expected)) => {
                format!("an unknown field (not shown: it is not a key name), expected {expected}")
            }
            None => "an unknown field (not shown: it is not a key name)".to_owned(),
        }
    } else if let Some(rest) = what.strip_prefix("duplicate mapping key: ") {
        let k = rest.split(", set DuplicateKeyPolicy").next().unwrap_or("");
        if key_name(k) {
            what.to_owned()
        } else {
            format!("duplicate mapping key {}", shown(k))
        }
    } else if what.contains(['`', '\'', '"']) || what.chars().any(char::is_control) {
        "not YAML leasehook can read (the text is not shown)".to_owned()
    } else {
        what.to_owned()
    };
    format!("{what}{at}")
}

/// Parses one configuration file (pure). `path` is only used in messages.
pub fn parse_file(path: &str, text: &str) -> Result<Layer> {
    let options = serde_saphyr::options! {
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::Error,
        with_snippet: false,
    };
    let doc: Option<FileDoc> =
        serde_saphyr::from_str_with_options(text, options).map_err(|e| Error::Config {
            origin: path.to_owned(),
            key: String::new(),
            problem: Box::new(BadValue::Syntax(yaml_error(&e))),
        })?;
    let doc = doc.unwrap_or_default();
    if let Some(root) = &doc.root {
        return Err(Error::Config {
            origin: format!("{path} line {}", root.referenced.line()),
            key: "root".to_owned(),
            problem: Box::new(BadValue::RootInFile),
        });
    }
    let mut values = Vec::new();
    let mut put = |key: &str, v: Option<Spanned<Value>>| {
        if let Some(v) = v {
            values.push((key.to_owned(), v.value, v.referenced.line()));
        }
    };
    let imds = doc.imds.unwrap_or_default();
    put("enabled", doc.enabled);
    put("profile", doc.profile);
    put("table_base", doc.table_base);
    put("priority_base", doc.priority_base);
    put("primary_rules", doc.primary_rules);
    put("secondary_addresses", doc.secondary_addresses);
    put("unmanaged", doc.unmanaged);
    if let Some(n) = doc.nics {
        // Checked here, where every leaf's line is known; kept as the checked
        // entries' JSON, which the key's setter reads back.
        let entries = nics::check(path, n.value)?;
        let value = serde_json::to_value(entries).map_err(|e| Error::Config {
            origin: path.to_owned(),
            key: "nics".to_owned(),
            problem: Box::new(BadValue::Syntax(e.to_string())),
        })?;
        put("nics", Some(Spanned::new(value, n.referenced, n.defined)));
    }
    put("kubernetes", doc.kubernetes);
    put("provider", doc.provider);
    put("imds.endpoints", imds.endpoints);
    put("imds.sync_budget_s", imds.sync_budget_s);
    put("imds.budget_s", imds.budget_s);
    put("imds.bind_interface", imds.bind_interface);
    put("imdsv1_fallback", doc.imdsv1_fallback);
    for (key, section) in doc.clouds {
        put(key, section.endpoint);
    }
    put("datasource_list", doc.datasource_list);
    put("fallback", doc.fallback);
    put("log_level", doc.log_level);
    put("metrics.textfile", doc.metrics.unwrap_or_default().textfile);
    for (name, per) in doc.datasource.unwrap_or_default() {
        put(&format!("datasource.{name}.fallback"), per.fallback);
    }
    Ok(Layer {
        path: path.to_owned(),
        values,
    })
}

/// A datasource name as the configuration writes it, when leasehook implements it.
fn datasource_kind(name: &str) -> Option<SourceKind> {
    SourceKind::from_name(name).filter(|k| *k != SourceKind::None)
}

// SPDX-License-Identifier: Apache-2.0
//! Pure: the instance-data documents — `instance-data-sensitive.json` (root only)
//! and `instance-data.json` (world-readable, secrets redacted) — built from an
//! [`InstanceData`] and where it came from (SPEC §5).
//!
//! The layout follows cloud-init's:
//!
//! * `v1`: the standard keys, four of them in both spellings (`cloud_name` and
//!   `cloud-name`, `instance_id` / `instance-id`, `local_hostname` /
//!   `local-hostname`, `availability_zone` / `availability-zone`), plus `cloud_id`,
//!   `platform`, `subplatform`, `region` and `_beta_keys`;
//! * `ds`: the source's raw data, as the source shaped it, with `_doc`;
//! * `sensitive_keys`: the slash paths of every sensitive value, sorted;
//!   `base64_encoded_keys`: the paths of byte values carried as base64.
//!
//! Two additions: `userdata` and `vendordata` hold user-data and vendor-data
//! themselves (cloud-init keeps them in separate files and its `query` splices them
//! in), so `leasehook query userdata` needs no second file; and `leasehook` says
//! where the data came from — fetched this boot, or restored from the cache and why
//! — in which stage, and when.
//!
//! **Redaction.** A value is sensitive when its key, or its slash path from the top
//! of the document, compared without regard to case, is one of
//! [`crate::source::SENSITIVE_KEYS`]. [`redact`] replaces each with
//! [`crate::source::REDACTED`], walking mappings and — stricter than cloud-init —
//! lists too, so a sensitive key nested in a list is not shown either. LXD's raw
//! meta-data text (`ds/meta-data`) is sensitive too when the user set
//! `user.meta-data`, which LXD appends to it
//! ([`crate::source::contextual_sensitive`]).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::fmt;

use crate::error::{Error, Result};
use crate::source::{InstanceData, REDACTED, contextual_sensitive, is_sensitive};

/// The two boot stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// `leasehook init --local`: before networking; local files and the LXD socket.
    Local,
    /// `leasehook init`: once the network is up.
    Network,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Local => "local",
            Self::Network => "network",
        })
    }
}

/// Where the instance data in use came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// Fetched from the datasource this boot.
    Fetched,
    /// The cache, after the datasource confirmed the instance-id.
    CacheChecked,
    /// The cache, because no configured datasource answered.
    CacheFallback,
    /// No datasource and no usable cache: the `None` datasource.
    NoDatasource,
}

impl Origin {
    /// Whether the data came from the cache.
    pub fn from_cache(self) -> bool {
        matches!(self, Self::CacheChecked | Self::CacheFallback)
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Fetched => "fetched",
            Self::CacheChecked => "restored from the cache (instance-id confirmed)",
            Self::CacheFallback => "restored from the cache (fallback)",
            Self::NoDatasource => "no datasource",
        })
    }
}

/// `ds._doc`: the shape under `ds` is each source's own.
pub const DS_DOC: &str = "EXPERIMENTAL: The structure and format of content scoped under the 'ds' key may change in subsequent releases of leasehook.";

/// The document's own `_doc`.
pub const DOC: &str = "Instance data written by leasehook's boot stage: cloud-init's v1 keys, the datasource's raw data under ds, and where it came from under leasehook. Query it with `leasehook query`.";

/// Where the data came from: the `leasehook` section of the documents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// Fetched, or restored from the cache (and how), or no datasource.
    pub origin: Origin,
    /// The stage that decided.
    pub stage: Stage,
    /// Why the cache was or was not used, in words.
    pub cache: String,
    /// When the data was fetched from the datasource, in milliseconds since the
    /// epoch (for restored data: when it was cached).
    pub fetched_at_ms: Option<u64>,
    /// When the stage decided, in milliseconds since the epoch.
    pub decided_at_ms: u64,
}

/// One refinement of a cloud's id by region (cloud-init's `canonical_cloud_id`):
/// on cloud `cloud`, a region starting with `prefix` makes the cloud id `id`. Each
/// cloud declares its own ([`crate::source::provider::CloudSource::region_ids`]);
/// the caller hands them in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionId {
    /// The cloud name it applies to (`aws`).
    pub cloud: &'static str,
    /// How the region starts (`cn-`).
    pub prefix: &'static str,
    /// The cloud id it gives (`aws-china`).
    pub id: &'static str,
}

/// cloud-init's `canonical_cloud_id`: the cloud name, refined by region as the
/// first of `refined` that applies says (AWS's China and US government
/// partitions, Azure's China cloud); the platform when the cloud is unknown.
pub fn cloud_id(
    cloud_name: &str,
    region: Option<&str>,
    platform: &str,
    refined: &[RegionId],
) -> String {
    const UNKNOWN: &str = "unknown";
    let cloud = if cloud_name.is_empty() {
        UNKNOWN
    } else {
        cloud_name
    };
    let or_platform = || {
        if cloud == UNKNOWN {
            platform.to_owned()
        } else {
            cloud.to_owned()
        }
    };
    let region = region.filter(|r| !r.is_empty() && *r != UNKNOWN);
    let Some(region) = region else {
        return or_platform();
    };
    refined
        .iter()
        .find(|r| region.starts_with(r.prefix) && cloud == r.cloud)
        .map_or_else(or_platform, |r| r.id.to_owned())
}

/// The `v1` mapping; `refined` as [`cloud_id`] reads it.
pub fn v1(d: &InstanceData, refined: &[RegionId]) -> Value {
    json!({
        "_beta_keys": ["subplatform"],
        "availability-zone": d.availability_zone,
        "availability_zone": d.availability_zone,
        "cloud-name": d.cloud_name,
        "cloud_name": d.cloud_name,
        "cloud_id": cloud_id(&d.cloud_name, d.region.as_deref(), &d.platform, refined),
        "instance-id": d.instance_id,
        "instance_id": d.instance_id,
        "local-hostname": d.local_hostname,
        "local_hostname": d.local_hostname,
        "platform": d.platform,
        "region": d.region,
        "subplatform": d.subplatform,
    })
}

/// Bytes as a JSON value: a string when UTF-8, else base64 (`b64 = true`).
fn blob(bytes: Option<&[u8]>) -> (Value, bool) {
    match bytes {
        None => (Value::Null, false),
        Some(b) => match std::str::from_utf8(b) {
            Ok(text) => (Value::String(text.to_owned()), false),
            Err(_) => (Value::String(BASE64.encode(b)), true),
        },
    }
}

/// The slash paths of sensitive values, sorted.
pub fn sensitive_paths(doc: &Value) -> Vec<String> {
    let mut out = Vec::new();
    // The walk lends each value mutably, for `redact`; a copy keeps `doc` as it is.
    walk(&mut doc.clone(), "", &mut |path, _| {
        out.push(path.to_owned());
    });
    if let Some(ds) = doc.get("ds") {
        out.extend(contextual_sensitive(ds).into_iter().map(str::to_owned));
    }
    out.sort();
    out.dedup();
    out
}

/// The document with every sensitive value replaced by [`REDACTED`].
pub fn redact(doc: &Value) -> Value {
    let mut out = doc.clone();
    walk(&mut out, "", &mut |_, v| {
        *v = Value::String(REDACTED.to_owned());
    });
    if let Some(ds) = doc.get("ds") {
        for path in contextual_sensitive(ds) {
            if let Some(key) = path.strip_prefix("ds/")
                && let Some(v) = out.get_mut("ds").and_then(|d| d.get_mut(key))
            {
                *v = Value::String(REDACTED.to_owned());
            }
        }
    }
    out
}

/// Calls `found` with the slash path of each sensitive value (mappings and lists
/// walked; a sensitive value is not walked further).
fn walk(v: &mut Value, path: &str, found: &mut dyn FnMut(&str, &mut Value)) {
    let join = |k: &str| {
        if path.is_empty() {
            k.to_owned()
        } else {
            format!("{path}/{k}")
        }
    };
    match v {
        Value::Object(map) => {
            for (k, child) in map.iter_mut() {
                let p = join(k);
                if is_sensitive(k, &p) {
                    found(&p, child);
                } else {
                    walk(child, &p, found);
                }
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter_mut().enumerate() {
                walk(child, &join(&i.to_string()), found);
            }
        }
        _ => {}
    }
}

/// The full (sensitive) document; `refined` as [`cloud_id`] reads it.
pub fn document(d: &InstanceData, p: &Provenance, refined: &[RegionId]) -> Value {
    let mut ds = d.ds.clone();
    match &mut ds {
        Value::Object(m) => {
            m.insert("_doc".to_owned(), Value::from(DS_DOC));
        }
        other => {
            // A source always shapes `ds` as a mapping; keep anything else visible.
            *other = json!({"_doc": DS_DOC, "value": other.clone()});
        }
    }
    let (userdata, user_is_base64) = blob(d.user_data.as_deref());
    let (vendordata, vendor_is_base64) = blob(d.vendor_data.as_deref());
    let mut base64_keys = Vec::new();
    if user_is_base64 {
        base64_keys.push("userdata");
    }
    if vendor_is_base64 {
        base64_keys.push("vendordata");
    }
    let mut doc = Map::new();
    doc.insert("_doc".to_owned(), Value::from(DOC));
    doc.insert("base64_encoded_keys".to_owned(), json!(base64_keys));
    doc.insert("ds".to_owned(), ds);
    doc.insert(
        "leasehook".to_owned(),
        json!({
            "datasource": d.datasource,
            "origin": p.origin,
            "restored_from_cache": p.origin.from_cache(),
            "stage": p.stage,
            "cache": p.cache,
            "fetched_at_ms": p.fetched_at_ms,
            "decided_at_ms": p.decided_at_ms,
        }),
    );
    doc.insert("userdata".to_owned(), userdata);
    doc.insert("v1".to_owned(), v1(d, refined));
    doc.insert("vendordata".to_owned(), vendordata);
    let mut doc = Value::Object(doc);
    let paths = sensitive_paths(&doc);
    if let Value::Object(m) = &mut doc {
        m.insert("sensitive_keys".to_owned(), json!(paths));
    }
    doc
}

/// Both files' bytes: the sensitive document, and the public one redacted from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// `instance-data-sensitive.json` (mode 0600).
    pub sensitive: Vec<u8>,
    /// `instance-data.json` (mode 0644).
    pub public: Vec<u8>,
}

/// Renders both documents as pretty JSON with a final newline; `refined` as
/// [`cloud_id`] reads it.
pub fn render(d: &InstanceData, p: &Provenance, refined: &[RegionId]) -> Result<Rendered> {
    let doc = document(d, p, refined);
    let public = redact(&doc);
    let bytes = |v: &Value| -> Result<Vec<u8>> {
        let mut b = serde_json::to_vec_pretty(v).map_err(|e| Error::Syntax {
            what: "instance data".to_owned(),
            message: e.to_string(),
        })?;
        b.push(b'\n');
        Ok(b)
    };
    Ok(Rendered {
        sensitive: bytes(&doc)?,
        public: bytes(&public)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lxd() -> InstanceData {
        InstanceData {
            local_hostname: Some("c1".into()),
            user_data: Some(b"#cloud-config\npassword: hunter2\n".to_vec()),
            vendor_data: Some(vec![0x1f, 0x8b, 0x08]),
            ds: json!({
                "_metadata_api_version": "1.0",
                "config": {
                    "user.user-data": "#cloud-config\npassword: hunter2\n",
                    "Cloud-Init.Vendor-Data": "vendor secret",
                    "user.meta-data": "instance-id: c1",
                    "user.network-config": "version: 2",
                    "user.tag": "blue"
                },
                "meta-data": "instance-id: c1\n",
                "nested": [{"UserData": "in a list"}]
            }),
            ..InstanceData::lxd_example("c1")
        }
    }

    fn prov(origin: Origin) -> Provenance {
        Provenance {
            origin,
            stage: Stage::Local,
            cache: "no cache (missing)".into(),
            fetched_at_ms: Some(1_700_000_000_000),
            decided_at_ms: 1_700_000_000_500,
        }
    }

    #[test]
    fn cloud_ids() {
        let cases = [
            ("aws", Some("us-east-1"), "ec2", "aws"),
            ("aws", Some("cn-north-1"), "ec2", "aws-china"),
            ("aws", Some("us-gov-west-1"), "ec2", "aws-gov"),
            ("brightbox", Some("cn-1"), "ec2", "brightbox"),
            ("azure", Some("chinaeast"), "azure", "azure-china"),
            ("aws", None, "ec2", "aws"),
            ("unknown", None, "nocloud", "nocloud"),
            ("unknown", Some("r1"), "nocloud", "nocloud"),
            ("", Some("unknown"), "lxd", "lxd"),
            ("lxd", Some(""), "lxd", "lxd"),
        ];
        // The clouds' rows declare cloud-init's refinements.
        let refined = crate::source::region_ids();
        for (cloud, region, platform, want) in cases {
            assert_eq!(
                cloud_id(cloud, region, platform, &refined),
                want,
                "{cloud} {region:?} {platform}"
            );
        }
    }

    #[test]
    fn v1_has_both_spellings() {
        let mut d = lxd();
        d.region = Some("eu-central-1".into());
        d.availability_zone = Some("eu-central-1a".into());
        let v = v1(&d, &[]);
        for (a, b) in [
            ("cloud_name", "cloud-name"),
            ("instance_id", "instance-id"),
            ("local_hostname", "local-hostname"),
            ("availability_zone", "availability-zone"),
        ] {
            assert_eq!(v[a], v[b], "{a}");
            assert!(!v[a].is_null(), "{a}");
        }
        assert_eq!(v["cloud_id"], "lxd");
        assert_eq!(v["platform"], "lxd");
        assert_eq!(v["region"], "eu-central-1");
        assert_eq!(v["subplatform"], "LXD socket API v. 1.0 (/dev/lxd/sock)");
    }

    #[test]
    fn the_public_document_holds_no_secret() {
        let r = render(&lxd(), &prov(Origin::Fetched), &[]).unwrap();
        let public = String::from_utf8(r.public.clone()).unwrap();
        let sensitive = String::from_utf8(r.sensitive.clone()).unwrap();
        for secret in ["hunter2", "vendor secret", "in a list", "instance-id: c1"] {
            assert!(!public.contains(secret), "{secret} leaked: {public}");
        }
        assert!(sensitive.contains("hunter2"));
        let p: Value = serde_json::from_slice(&r.public).unwrap();
        let s: Value = serde_json::from_slice(&r.sensitive).unwrap();
        assert_eq!(p["userdata"], REDACTED);
        assert_eq!(p["vendordata"], REDACTED);
        assert_eq!(p["ds"]["config"]["user.user-data"], REDACTED);
        assert_eq!(p["ds"]["config"]["Cloud-Init.Vendor-Data"], REDACTED);
        assert_eq!(p["ds"]["config"]["user.meta-data"], REDACTED);
        assert_eq!(p["ds"]["config"]["user.network-config"], "version: 2");
        assert_eq!(p["ds"]["config"]["user.tag"], "blue");
        assert_eq!(p["ds"]["nested"][0]["UserData"], REDACTED);
        // LXD appended user.meta-data to the raw meta-data text: redacted too
        // (cloud-init shows it), and listed.
        assert_eq!(p["ds"]["meta-data"], REDACTED);
        assert_eq!(s["ds"]["meta-data"], "instance-id: c1\n");
        // Vendor-data is gzip: base64 in the sensitive file, and said so.
        assert_eq!(s["vendordata"], "H4sI");
        assert_eq!(s["base64_encoded_keys"], json!(["vendordata"]));
        assert_eq!(
            s["sensitive_keys"],
            json!([
                "ds/config/Cloud-Init.Vendor-Data",
                "ds/config/user.meta-data",
                "ds/config/user.user-data",
                "ds/meta-data",
                "ds/nested/0/UserData",
                "userdata",
                "vendordata"
            ])
        );
        assert_eq!(p["sensitive_keys"], s["sensitive_keys"]);
        // Everything else is the same in both.
        for key in ["v1", "leasehook", "base64_encoded_keys", "_doc"] {
            assert_eq!(p[key], s[key], "{key}");
        }
        assert_eq!(s["ds"]["_doc"], DS_DOC);
        assert_eq!(s["leasehook"]["origin"], "fetched");
        assert_eq!(s["leasehook"]["restored_from_cache"], false);
        assert!(r.public.ends_with(b"}\n"));
    }

    #[test]
    fn provenance_marks_restored_data() {
        let mut p = prov(Origin::CacheFallback);
        p.stage = Stage::Network;
        p.cache = "used: no configured datasource answered".into();
        let doc = document(&lxd(), &p, &[]);
        assert_eq!(doc["leasehook"]["origin"], "cache-fallback");
        assert_eq!(doc["leasehook"]["restored_from_cache"], true);
        assert_eq!(doc["leasehook"]["stage"], "network");
        assert_eq!(doc["leasehook"]["datasource"], "LXD");
        assert_eq!(doc["leasehook"]["fetched_at_ms"], 1_700_000_000_000_u64);
        let back: Provenance = serde_json::from_value(json!({
            "origin": "cache-checked", "stage": "local", "cache": "x",
            "fetched_at_ms": null, "decided_at_ms": 1
        }))
        .unwrap();
        assert_eq!(back.origin, Origin::CacheChecked);
    }

    #[test]
    fn no_user_data_is_null_and_redaction_still_hides_the_key() {
        let mut d = lxd();
        d.user_data = None;
        d.ds = json!({"meta_data": {"instance-id": "c1"}});
        let doc = document(&d, &prov(Origin::Fetched), &[]);
        assert_eq!(doc["userdata"], Value::Null);
        assert_eq!(redact(&doc)["userdata"], REDACTED);
        assert_eq!(doc["ds"]["meta_data"]["instance-id"], "c1");
        let weird = InstanceData {
            ds: json!("not a mapping"),
            ..d
        };
        let doc = document(&weird, &prov(Origin::Fetched), &[]);
        assert_eq!(doc["ds"]["value"], "not a mapping");
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Pure: [`InstanceData`], what fetching a datasource returns, and which of its
//! values are sensitive.
//!
//! It carries what cloud-init's `instance-data.json` is made of (SPEC §5): the
//! standard `v1` values (datasource, instance-id, local-hostname, region,
//! availability zone, platform, subplatform, cloud name), user-data, vendor-data,
//! network-config, and the source's raw data as `ds`, shaped as cloud-init shapes
//! it for that source.
//!
//! **Sensitive values.** A key is sensitive when its name, or its slash-separated
//! path, compared without regard to case, is one of [`SENSITIVE_KEYS`] — cloud-init's
//! list plus LXD's `user.*` / `cloud-init.*` user-data, vendor-data and meta-data keys.
//! [`InstanceData::redacted_ds`] is the world-readable view.
//!
//! One value is sensitive by what sits beside it: LXD appends the user's
//! `user.meta-data` to its own `/1.0/meta-data` answer, so the raw meta-data text
//! of an LXD `ds` (`ds/meta-data`) carries that value too whenever `ds/config`
//! holds a meta-data key ([`META_DATA_CARRIES_USER_VALUE`], [`contextual_sensitive`]).
//!
//! **Bytes.** User-data and vendor-data are bytes (EC2 user-data is often gzip). In
//! JSON they are a string when they are UTF-8 and otherwise `ci-b64:` followed by
//! their base64, as cloud-init writes bytes.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::SourceKind;

/// What world-readable instance data shows instead of a sensitive value.
pub const REDACTED: &str = "redacted for non-root user";

/// Keys (or slash-separated paths) whose values are sensitive, lower case.
pub const SENSITIVE_KEYS: &[&str] = &[
    // cloud-init's `sensitive_metadata_keys`.
    "combined_cloud_config",
    "merged_cfg",
    "merged_system_cfg",
    "security-credentials",
    "userdata",
    "user-data",
    "user_data",
    "vendordata",
    "vendor-data",
    "ds/vendor_data",
    // LXD's config keys that hold user-data, vendor-data or meta-data (SPEC §4.2).
    "user.user-data",
    "user.vendor-data",
    "user.meta-data",
    "cloud-init.user-data",
    "cloud-init.vendor-data",
    "cloud-init.meta-data",
];

/// The slash path (below the document, `ds` first) of LXD's raw meta-data text,
/// which carries `user.meta-data` when the user set it.
pub const META_DATA_CARRIES_USER_VALUE: &str = "ds/meta-data";

/// The config keys (lower case) whose value LXD appends to `/1.0/meta-data`.
const APPENDED_META_DATA_KEYS: [&str; 2] = ["user.meta-data", "cloud-init.meta-data"];

/// The slash paths, below `ds` (`ds/...`), that are sensitive because of what sits
/// beside them: `ds/meta-data` when `ds/config` holds `user.meta-data` or
/// `cloud-init.meta-data` (compared without regard to case).
pub fn contextual_sensitive(ds: &Value) -> Vec<&'static str> {
    let appended = ds
        .get("config")
        .and_then(Value::as_object)
        .is_some_and(|config| {
            config
                .keys()
                .any(|k| APPENDED_META_DATA_KEYS.contains(&k.to_ascii_lowercase().as_str()))
        });
    if appended && ds.get("meta-data").is_some() {
        vec![META_DATA_CARRIES_USER_VALUE]
    } else {
        Vec::new()
    }
}

/// Prefix of a byte string that is not UTF-8, in JSON.
const B64_PREFIX: &str = "ci-b64:";

/// What a datasource says about this instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceData {
    /// Which datasource said it.
    pub datasource: SourceKind,
    /// The instance-id.
    pub instance_id: String,
    /// `local-hostname`, when the source names one.
    pub local_hostname: Option<String>,
    /// cloud-init's `cloud_name`: `aws`, `lxd`, `unknown`, ...
    pub cloud_name: String,
    /// cloud-init's `platform`: `ec2`, `lxd`, `nocloud`.
    pub platform: String,
    /// cloud-init's `subplatform`: where the data came from, for example
    /// `metadata (http://169.254.169.254)` or `seed-dir (/var/lib/cloud/seed/nocloud)`.
    pub subplatform: String,
    /// The region, when the source names one.
    pub region: Option<String>,
    /// The availability zone, when the source names one.
    pub availability_zone: Option<String>,
    /// The parsed meta-data (a mapping).
    pub meta_data: Map<String, Value>,
    /// User-data, as the source served it. Sensitive.
    #[serde(with = "blob")]
    pub user_data: Option<Vec<u8>>,
    /// Vendor-data, as the source served it. Sensitive.
    #[serde(with = "blob")]
    pub vendor_data: Option<Vec<u8>>,
    /// Network configuration (cloud-init network config v1 or v2), when the source
    /// gives one or a default applies.
    pub network_config: Option<Value>,
    /// The source's raw data, as cloud-init shapes it under `ds`.
    pub ds: Value,
}

impl InstanceData {
    /// What `datasource` says, with only the `v1` names set: its `instance_id`,
    /// `platform` (also its `cloud_name`: cloud-init names both after the cloud
    /// but on EC2 and a config drive) and `subplatform`. Nothing else is known
    /// yet: no hostname, region, zone, meta-data, user-data, vendor-data or
    /// network config, and an empty `ds`; the source sets what its answers say.
    pub fn new(
        datasource: SourceKind,
        instance_id: String,
        platform: &str,
        subplatform: String,
    ) -> Self {
        Self {
            datasource,
            instance_id,
            local_hostname: None,
            cloud_name: platform.to_owned(),
            platform: platform.to_owned(),
            subplatform,
            region: None,
            availability_zone: None,
            meta_data: Map::new(),
            user_data: None,
            vendor_data: None,
            network_config: None,
            ds: Value::Object(Map::new()),
        }
    }

    /// The slash-separated paths, below `ds`, of sensitive values (sorted).
    pub fn sensitive_keys(&self) -> Vec<String> {
        let mut out = Vec::new();
        sensitive_paths(&self.ds, "ds", &mut out);
        out.extend(
            contextual_sensitive(&self.ds)
                .into_iter()
                .map(str::to_owned),
        );
        out.sort();
        out
    }

    /// `ds` with every sensitive value replaced by [`REDACTED`].
    pub fn redacted_ds(&self) -> Value {
        let mut ds = self.ds.clone();
        redact(&mut ds, "ds");
        for path in contextual_sensitive(&self.ds) {
            if let Some(key) = path.strip_prefix("ds/")
                && let Some(v) = ds.get_mut(key)
            {
                *v = Value::String(REDACTED.to_owned());
            }
        }
        ds
    }
}

/// Whether a key at `path` holds a sensitive value.
pub fn is_sensitive(key: &str, path: &str) -> bool {
    let (k, p) = (key.to_ascii_lowercase(), path.to_ascii_lowercase());
    SENSITIVE_KEYS.iter().any(|s| *s == k || *s == p)
}

fn sensitive_paths(v: &Value, path: &str, out: &mut Vec<String>) {
    if let Value::Object(map) = v {
        for (k, child) in map {
            let p = format!("{path}/{k}");
            if is_sensitive(k, &p) {
                out.push(p);
            } else {
                sensitive_paths(child, &p, out);
            }
        }
    }
}

fn redact(v: &mut Value, path: &str) {
    if let Value::Object(map) = v {
        for (k, child) in map.iter_mut() {
            let p = format!("{path}/{k}");
            if is_sensitive(k, &p) {
                *child = Value::String(REDACTED.to_owned());
            } else {
                redact(child, &p);
            }
        }
    }
}

/// Serde for `Option<Vec<u8>>`: UTF-8 as a string, anything else (or UTF-8 that
/// happens to start with the prefix) as `ci-b64:<base64>`.
mod blob {
    use super::B64_PREFIX;
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD as BASE64;
    use serde::{Deserialize, Deserializer, Serializer};

    #[allow(clippy::ref_option)] // serde's `with` hands the field by reference
    pub(super) fn serialize<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            None => s.serialize_none(),
            Some(bytes) => match std::str::from_utf8(bytes) {
                Ok(text) if !text.starts_with(B64_PREFIX) => s.serialize_some(text),
                _ => s.serialize_some(&format!("{B64_PREFIX}{}", BASE64.encode(bytes))),
            },
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<u8>>, D::Error> {
        let Some(text) = Option::<String>::deserialize(d)? else {
            return Ok(None);
        };
        match text.strip_prefix(B64_PREFIX) {
            Some(b64) => BASE64
                .decode(b64)
                .map(Some)
                .map_err(|e| serde::de::Error::custom(format!("bad {B64_PREFIX} value: {e}"))),
            None => Ok(Some(text.into_bytes())),
        }
    }
}

#[cfg(test)]
impl InstanceData {
    /// An LXD container's data, for tests: `instance_id`, and no hostname, user data,
    /// vendor data or network configuration; `ds` empty.
    pub(crate) fn lxd_example(instance_id: &str) -> Self {
        Self::new(
            SourceKind::Lxd,
            instance_id.into(),
            "lxd",
            "LXD socket API v. 1.0 (/dev/lxd/sock)".into(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample(ds: Value, user_data: Option<Vec<u8>>) -> InstanceData {
        InstanceData {
            local_hostname: Some("h".into()),
            user_data,
            ds,
            ..InstanceData::lxd_example("i-1")
        }
    }

    #[test]
    fn sensitive_keys_match_names_and_paths_without_regard_to_case() {
        let d = sample(
            json!({
                "config": {
                    "user.user-data": "#cloud-config", "USER.Meta-Data": "x",
                    "cloud-init.vendor-data": "v", "user.network-config": "n", "user.tag": "t"
                },
                "meta-data": "instance-id: i-1",
                "vendor_data": {"enabled": true},
                "nested": {"userData": "u", "list": [{"user-data": "not walked"}]}
            }),
            None,
        );
        assert_eq!(
            d.sensitive_keys(),
            [
                "ds/config/USER.Meta-Data",
                "ds/config/cloud-init.vendor-data",
                "ds/config/user.user-data",
                "ds/meta-data",
                "ds/nested/userData",
                "ds/vendor_data",
            ]
        );
        let r = d.redacted_ds();
        assert_eq!(r["config"]["user.user-data"], REDACTED);
        assert_eq!(r["config"]["user.network-config"], "n");
        assert_eq!(r["config"]["user.tag"], "t");
        // LXD appends `user.meta-data` to its raw meta-data text: with that key set,
        // the text is redacted too (cloud-init leaves it readable).
        assert_eq!(r["meta-data"], REDACTED);
        assert_eq!(r["nested"]["list"][0]["user-data"], "not walked");
        // The original is untouched.
        assert_eq!(d.ds["config"]["user.user-data"], "#cloud-config");
    }

    #[test]
    fn raw_meta_data_is_readable_without_user_meta_data() {
        for (config, redacted) in [
            (json!({"user.tag": "t"}), false),
            (json!({}), false),
            (json!({"user.meta-data": ""}), true),
            (json!({"Cloud-Init.Meta-Data": "x: 1"}), true),
        ] {
            let d = sample(
                json!({"config": config, "meta-data": "instance-id: i-1\nsecret: s\n"}),
                None,
            );
            let r = d.redacted_ds();
            let shown = r["meta-data"] == REDACTED;
            assert_eq!(shown, redacted, "{config}");
            assert_eq!(
                d.sensitive_keys().contains(&"ds/meta-data".to_owned()),
                redacted,
                "{config}"
            );
        }
        // Not LXD-shaped (no config mapping): nothing extra.
        let d = sample(json!({"meta-data": {"user.meta-data": 1}}), None);
        assert!(contextual_sensitive(&d.ds).is_empty());
    }

    #[test]
    fn bytes_round_trip_through_json() {
        for bytes in [
            b"#cloud-config\n{}\n".to_vec(),
            vec![0x1f, 0x8b, 0x08, 0x00, 0xff],
            b"ci-b64:looks like a prefix".to_vec(),
            Vec::new(),
        ] {
            let d = sample(json!({}), Some(bytes.clone()));
            let text = serde_json::to_string(&d).unwrap();
            let back: InstanceData = serde_json::from_str(&text).unwrap();
            assert_eq!(back.user_data.as_deref(), Some(bytes.as_slice()), "{text}");
        }
        let d = sample(json!({}), Some(vec![0xff, 0x00]));
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(v["user_data"], "ci-b64:/wA=");
        assert_eq!(v["vendor_data"], Value::Null);
        assert_eq!(v["datasource"], "LXD");
        let bad = v.to_string().replace("ci-b64:/wA=", "ci-b64:***");
        assert!(serde_json::from_str::<InstanceData>(&bad).is_err());
    }
}

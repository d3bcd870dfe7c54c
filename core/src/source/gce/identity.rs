// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the GCE datasource — the instance-level data the boot stage needs,
//! as cloud-init's `DataSourceGCE` reads it, with the same client as the hot-plug
//! wait.
//!
//! | request | for |
//! |---|---|
//! | `instance/id` | instance-id (required) |
//! | `instance/zone` | `projects/P/zones/Z`: availability zone Z, region Z without its last `-` part |
//! | `instance/hostname` | local-hostname: its first label, as cloud-init (GCE's FQDNs are long) |
//! | `instance/network-interfaces/?recursive=true` | the NICs, in instance-data's `meta-data` |
//! | `instance/attributes/user-data` | user-data, bytes (404: none) |
//! | `instance/attributes/user-data-encoding` | `base64`: user-data is decoded (only read when there is user-data) |
//!
//! A request that fails in a way waiting can fix is sent again with the wait's
//! jittered backoff, within one budget for the whole fetch. What the answers mean
//! is pure ([`assemble`]).

use base64::Engine as _;
use serde_json::{Value, json};

use super::nic::{INTERFACES_PATH, parse_interfaces};
use super::{GCE_ROOT, Gce};
use crate::constants::IMDS_MAX_USER_DATA_BYTES;
use crate::error::{Error, Problem, Result};
use crate::source::provider::doc;
use crate::source::provider::http::Fetch;
use crate::source::provider::instance::meta_data;
use crate::source::provider::retry::{ClientSource, Retrying};
use crate::source::provider::{Clock, SystemClock, WaitPolicy};
use crate::source::{Datasource, InstanceData, SourceKind};

/// What the metadata server answered, before it is interpreted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answers {
    /// `instance/id`.
    pub id: Option<String>,
    /// `instance/zone`.
    pub zone: Option<String>,
    /// `instance/hostname`.
    pub hostname: Option<String>,
    /// `instance/network-interfaces/?recursive=true`.
    pub interfaces: Option<String>,
    /// `instance/attributes/user-data`.
    pub user_data: Option<Vec<u8>>,
    /// `instance/attributes/user-data-encoding`.
    pub user_data_encoding: Option<String>,
}

/// Fetches the keys of the module docs' table.
pub fn fetch_answers(fetch: &dyn Fetch, policy: &WaitPolicy, clock: &dyn Clock) -> Result<Answers> {
    let r = Retrying::new(policy, clock, "GCE");
    let get = |key: &str| r.get(fetch, &format!("{GCE_ROOT}/{key}"));
    let mut a = Answers {
        id: get("instance/id")?,
        zone: get("instance/zone")?,
        hostname: get("instance/hostname")?,
        interfaces: get(INTERFACES_PATH.trim_start_matches('/'))?,
        ..Answers::default()
    };
    let path = format!("{GCE_ROOT}/instance/attributes/user-data");
    a.user_data = r.get_bytes(fetch, &path, IMDS_MAX_USER_DATA_BYTES)?;
    if a.user_data.is_some() {
        a.user_data_encoding = get("instance/attributes/user-data-encoding")?;
    }
    r.log_fetched("GCE");
    Ok(a)
}

fn trimmed(v: Option<&String>) -> Option<String> {
    v.map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// Interprets the answers; `endpoint` is the base URL that gave them.
pub fn assemble(a: &Answers, endpoint: &str) -> Result<InstanceData> {
    let instance_id = trimmed(a.id.as_ref()).ok_or_else(|| Error::Metadata {
        key: format!("{GCE_ROOT}/instance/id"),
        problem: Problem::missing(),
    })?;
    if instance_id.chars().any(char::is_control) {
        return Err(Error::Metadata {
            key: format!("{GCE_ROOT}/instance/id"),
            problem: Problem::bad("holds a control character", &instance_id),
        });
    }
    // cloud-init: the zone's last path part; the region is the zone without its
    // last `-` part (`us-central1-a` → `us-central1`).
    let availability_zone = trimmed(a.zone.as_ref())
        .and_then(|z| z.rsplit('/').next().map(str::to_owned))
        .filter(|z| !z.is_empty());
    let region = availability_zone
        .as_deref()
        .and_then(|z| z.rsplit_once('-'))
        .map(|(r, _)| r.to_owned());
    let hostname = trimmed(a.hostname.as_ref());
    let local_hostname = hostname
        .as_deref()
        .and_then(|h| h.split('.').next())
        .filter(|h| !h.is_empty())
        .map(str::to_owned);
    let interfaces = match &a.interfaces {
        Some(body) => {
            parse_interfaces(body)?;
            doc::read(body, "GCE network-interfaces", INTERFACES_PATH)?
        }
        None => Value::Array(Vec::new()),
    };
    let user_data = match (&a.user_data, a.user_data_encoding.as_deref().map(str::trim)) {
        (Some(raw), Some("base64")) => Some(
            base64::engine::general_purpose::STANDARD
                .decode(raw.trim_ascii())
                .map_err(|e| Error::Metadata {
                    key: format!("{GCE_ROOT}/instance/attributes/user-data"),
                    problem: Problem::bad(format!("user-data-encoding base64, but {e}"), ""),
                })?,
        ),
        (raw, _) => raw.clone(),
    };
    let mut md = meta_data(
        &instance_id,
        hostname.as_deref(),
        availability_zone.as_deref(),
        &[],
    );
    md.insert("network-interfaces".to_owned(), interfaces);
    let ds = json!({"meta_data": Value::Object(md.clone())});
    Ok(InstanceData {
        local_hostname,
        region,
        availability_zone,
        meta_data: md,
        user_data,
        ds,
        ..InstanceData::new(
            SourceKind::Gce,
            instance_id,
            "gce",
            format!("metadata ({endpoint}{GCE_ROOT}/)"),
        )
    })
}

/// The GCE datasource: a metadata client and the retry budget.
pub type GceSource = ClientSource<Gce>;

impl Datasource for GceSource {
    fn kind(&self) -> SourceKind {
        SourceKind::Gce
    }

    fn fetch(&self) -> Result<InstanceData> {
        let answers = fetch_answers(&self.client, &self.policy, &SystemClock)?;
        assemble(&answers, self.client.endpoint())
    }

    /// One request, `instance/id`.
    fn check_instance_id(&self, cached: &InstanceData) -> Result<bool> {
        let r = Retrying::new(&self.policy, &SystemClock, "GCE");
        let id = trimmed(
            r.get(&self.client, &format!("{GCE_ROOT}/instance/id"))?
                .as_ref(),
        )
        .ok_or_else(|| Error::Metadata {
            key: format!("{GCE_ROOT}/instance/id"),
            problem: Problem::missing(),
        })?;
        Ok(id == cached.instance_id)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::error::ImdsErrorKind;
    use crate::source::provider::fake::{FakeClock, Scripted};

    fn gce(user_data: Option<(&str, Option<&str>)>) -> Scripted<'static> {
        let mut answers: BTreeMap<String, String> = [
            ("instance/id", "4520031799277581759"),
            ("instance/zone", "projects/123456789/zones/us-central1-a"),
            ("instance/hostname", "vm-1.us-central1-a.c.project.internal"),
            (
                "instance/network-interfaces/?recursive=true",
                super::super::nic::tests::TWO,
            ),
        ]
        .into_iter()
        .map(|(k, v)| (format!("{GCE_ROOT}/{k}"), v.to_owned()))
        .collect();
        if let Some((ud, enc)) = user_data {
            answers.insert(
                format!("{GCE_ROOT}/instance/attributes/user-data"),
                ud.to_owned(),
            );
            if let Some(e) = enc {
                answers.insert(
                    format!("{GCE_ROOT}/instance/attributes/user-data-encoding"),
                    e.to_owned(),
                );
            }
        }
        Scripted::answering(answers)
    }

    fn run(s: &Scripted<'_>) -> Result<InstanceData> {
        let clock = FakeClock::new();
        let policy = crate::source::provider::fake::policy(30_000);
        let a = fetch_answers(s, &policy, &clock)?;
        assemble(&a, "http://169.254.169.254")
    }

    fn http(status: u16) -> Error {
        Error::Imds {
            method: "GET",
            url: "u".into(),
            kind: ImdsErrorKind::Http {
                status,
                retry_after: None,
            },
        }
    }

    #[test]
    fn identity_as_cloud_init_reads_it() {
        let s = gce(Some(("#cloud-config\n{}\n", None)));
        let d = run(&s).unwrap();
        assert_eq!(d.instance_id, "4520031799277581759");
        assert_eq!(d.availability_zone.as_deref(), Some("us-central1-a"));
        assert_eq!(d.region.as_deref(), Some("us-central1"));
        assert_eq!(d.local_hostname.as_deref(), Some("vm-1"));
        assert_eq!(d.cloud_name, "gce");
        assert_eq!(d.platform, "gce");
        assert_eq!(d.datasource, SourceKind::Gce);
        assert_eq!(d.user_data.as_deref(), Some(&b"#cloud-config\n{}\n"[..]));
        assert_eq!(
            d.subplatform,
            "metadata (http://169.254.169.254/computeMetadata/v1/)"
        );
        assert_eq!(
            d.meta_data["network-interfaces"].as_array().unwrap().len(),
            2
        );
        // id, zone, hostname, NICs, user-data, its encoding.
        assert_eq!(s.count(), 6);
    }

    #[test]
    fn base64_user_data_is_decoded_and_none_costs_no_encoding_request() {
        let d = run(&gce(Some(("I2Nsb3VkLWNvbmZpZwo=", Some("base64"))))).unwrap();
        assert_eq!(d.user_data.as_deref(), Some(&b"#cloud-config\n"[..]));
        let e = run(&gce(Some(("!!", Some("base64"))))).unwrap_err();
        assert!(e.to_string().contains("user-data"), "{e}");
        let s = gce(None);
        let d = run(&s).unwrap();
        assert_eq!(d.user_data, None);
        assert_eq!(s.count(), 5);
    }

    #[test]
    fn a_missing_id_or_garbage_nics_fail_and_503s_are_retried() {
        let s = gce(None).without(&format!("{GCE_ROOT}/instance/id"));
        assert!(run(&s).unwrap_err().to_string().contains("instance/id"));
        let s = gce(None).value(
            &format!("{GCE_ROOT}/instance/network-interfaces/?recursive=true"),
            "{",
        );
        assert!(run(&s).is_err());
        let s = gce(None);
        s.fail_next((0..3).map(|_| http(503)).collect());
        assert!(run(&s).is_ok());
        assert_eq!(s.count(), 5 + 3);
    }
}

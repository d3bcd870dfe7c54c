// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the `OpenStack` and `ConfigDrive` datasources — the instance-level
//! data the boot stage needs, as cloud-init's `DataSourceOpenStack` (the metadata
//! service) and `DataSourceConfigDrive` (the drive) read it.
//!
//! | file (below `openstack/latest/`) | for |
//! |---|---|
//! | `meta_data.json` | `uuid`: instance-id (required); `hostname`: local-hostname (its first label, as cloud-init's `get_hostname`); `availability_zone`; the rest as `meta-data` |
//! | `user_data` | user-data, bytes (absent: none) |
//! | `network_data.json` | checked, and kept in instance-data's `ds` (absent: none) |
//!
//! cloud-init's names for them: `cloud_name` is the datasource's name in lower
//! case (`openstack`, `configdrive`: neither file names a `cloud-name`),
//! `platform` is `openstack` for both, `subplatform` is `metadata (<base URL>)`
//! for the service and `config-disk (<device>)` for the drive. `admin_pass` and
//! `random_seed` of `meta_data.json` are left out of what is published:
//! `instance-data.json` is world-readable, and cloud-init's list of sensitive
//! keys names neither.
//!
//! Against the metadata service a request that fails in a way waiting can fix
//! (a 429 of Neutron's rate limit, a 5xx, a timeout) is sent again with the
//! wait's jittered backoff, within one budget for the whole fetch. The drive is
//! read once, in one mount. What the answers mean is pure ([`assemble`]).

use serde::Deserialize;
use serde_json::{Map, Value};

use super::configdrive::{ConfigDrive, MAX_FILE_BYTES};
use super::nic::parse_network_data;
use super::{META_DATA_PATH, NETWORK_DATA_PATH, OPENSTACK_ROOT, OpenStack, USER_DATA_PATH};
use crate::constants::IMDS_MAX_USER_DATA_BYTES;
use crate::error::{Error, Problem, Result};
use crate::source::provider::doc;
use crate::source::provider::http::Fetch;
use crate::source::provider::instance::meta_data;
use crate::source::provider::retry::{ClientSource, Retrying};
use crate::source::provider::{Clock, SystemClock, WaitPolicy};
use crate::source::{Datasource, InstanceData, SourceKind};

/// Keys of `meta_data.json` never published (see the module docs).
pub const WITHHELD: [&str; 2] = ["admin_pass", "random_seed"];

/// The files as read, before they are interpreted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answers {
    /// `meta_data.json`.
    pub meta_data: Option<String>,
    /// `network_data.json`.
    pub network_data: Option<String>,
    /// `user_data`.
    pub user_data: Option<Vec<u8>>,
}

/// `file`'s path below the base URL: below [`OPENSTACK_ROOT`].
pub(crate) fn path(file: &str) -> String {
    format!("{OPENSTACK_ROOT}{file}")
}

/// Fetches the files of the module docs' table from the metadata service:
/// three requests.
pub fn fetch_answers(fetch: &dyn Fetch, policy: &WaitPolicy, clock: &dyn Clock) -> Result<Answers> {
    let r = Retrying::new(policy, clock, "OpenStack");
    let mut a = Answers {
        meta_data: r.get(fetch, &path(META_DATA_PATH))?,
        network_data: r.get(fetch, &path(NETWORK_DATA_PATH))?,
        ..Answers::default()
    };
    a.user_data = r.get_bytes(fetch, &path(USER_DATA_PATH), IMDS_MAX_USER_DATA_BYTES)?;
    r.log_fetched("OpenStack");
    Ok(a)
}

/// The same files from a config drive, in one mount.
pub fn read_drive(drive: &ConfigDrive) -> Result<Answers> {
    let files = [META_DATA_PATH, NETWORK_DATA_PATH, USER_DATA_PATH]
        .map(|f| format!("{}{f}", OPENSTACK_ROOT.trim_start_matches('/')));
    let refs: Vec<&str> = files.iter().map(String::as_str).collect();
    let mut got = drive.read(&refs)?.into_iter();
    let text = |b: Option<Vec<u8>>, name: &str| -> Result<Option<String>> {
        b.map(|b| {
            String::from_utf8(b).map_err(|_| Error::Metadata {
                key: format!("config drive {name}"),
                problem: Problem::bad("not UTF-8", ""),
            })
        })
        .transpose()
    };
    Ok(Answers {
        meta_data: text(got.next().flatten(), "meta_data.json")?,
        network_data: text(got.next().flatten(), "network_data.json")?,
        user_data: got.next().flatten(),
    })
}

/// The keys of `meta_data.json` read; the others are published as they are.
#[derive(Deserialize)]
struct MetaData {
    #[serde(deserialize_with = "doc::required_text")]
    uuid: String,
    #[serde(default, deserialize_with = "doc::text")]
    hostname: Option<String>,
    #[serde(default, deserialize_with = "doc::text")]
    availability_zone: Option<String>,
}

/// Interprets the answers: `kind` is [`SourceKind::OpenStack`] or
/// [`SourceKind::ConfigDrive`], `from` the base URL or the drive's device.
pub fn assemble(a: &Answers, kind: SourceKind, from: &str) -> Result<InstanceData> {
    let file = format!("{OPENSTACK_ROOT}{META_DATA_PATH}");
    let body = a.meta_data.as_deref().ok_or_else(|| Error::Metadata {
        key: file.clone(),
        problem: Problem::missing(),
    })?;
    // As much as the drive reads (the service's client reads less).
    let (read, mut md): (MetaData, _) =
        doc::read_object(body, MAX_FILE_BYTES, "OpenStack meta_data.json", &file)?;
    for w in WITHHELD {
        md.remove(w);
    }
    let MetaData {
        uuid: instance_id,
        hostname,
        availability_zone,
    } = read;
    let local_hostname = hostname
        .as_deref()
        .and_then(|h| h.split('.').next())
        .filter(|h| !h.is_empty())
        .map(str::to_owned);
    let network_data = match &a.network_data {
        Some(body) => {
            parse_network_data(body)?;
            doc::read(
                body,
                "OpenStack network_data.json",
                &path(NETWORK_DATA_PATH),
            )?
        }
        None => Value::Null,
    };
    // cloud-init copies `uuid` to `instance-id` and `hostname` to
    // `local-hostname` (helpers/openstack.py's KEY_COPIES).
    md.extend(meta_data(
        &instance_id,
        hostname.as_deref(),
        availability_zone.as_deref(),
        &[],
    ));
    let mut ds = Map::new();
    ds.insert("meta_data".to_owned(), Value::Object(md.clone()));
    if !network_data.is_null() {
        ds.insert("network_data".to_owned(), network_data);
    }
    let (cloud_name, subplatform) = match kind {
        SourceKind::ConfigDrive => ("configdrive", format!("config-disk ({from})")),
        _ => ("openstack", format!("metadata ({from})")),
    };
    Ok(InstanceData {
        local_hostname,
        cloud_name: cloud_name.to_owned(),
        availability_zone,
        meta_data: md,
        user_data: a.user_data.clone(),
        ds: Value::Object(ds),
        ..InstanceData::new(kind, instance_id, "openstack", subplatform)
    })
}

/// The `OpenStack` datasource: the metadata client and the retry budget.
pub type OpenStackSource = ClientSource<OpenStack>;

fn instance_id_of(body: Option<&str>) -> Result<String> {
    let a = Answers {
        meta_data: body.map(str::to_owned),
        ..Answers::default()
    };
    assemble(&a, SourceKind::OpenStack, "").map(|d| d.instance_id)
}

impl Datasource for OpenStackSource {
    fn kind(&self) -> SourceKind {
        SourceKind::OpenStack
    }

    fn fetch(&self) -> Result<InstanceData> {
        let answers = fetch_answers(&self.client, &self.policy, &SystemClock)?;
        assemble(&answers, SourceKind::OpenStack, self.client.endpoint())
    }

    /// One request, `meta_data.json`.
    fn check_instance_id(&self, cached: &InstanceData) -> Result<bool> {
        let r = Retrying::new(&self.policy, &SystemClock, "OpenStack");
        let meta_data = r.get(&self.client, &path(META_DATA_PATH))?;
        Ok(instance_id_of(meta_data.as_deref())? == cached.instance_id)
    }
}

/// The `ConfigDrive` datasource: a drive below the root.
#[derive(Debug)]
pub struct ConfigDriveSource {
    drive: ConfigDrive,
}

impl ConfigDriveSource {
    /// The datasource reading `drive`.
    pub fn new(drive: ConfigDrive) -> Self {
        Self { drive }
    }
}

impl Datasource for ConfigDriveSource {
    fn kind(&self) -> SourceKind {
        SourceKind::ConfigDrive
    }

    fn fetch(&self) -> Result<InstanceData> {
        let answers = read_drive(&self.drive)?;
        assemble(
            &answers,
            SourceKind::ConfigDrive,
            &self.drive.device().display().to_string(),
        )
    }

    /// One read of the drive's `meta_data.json`.
    fn check_instance_id(&self, cached: &InstanceData) -> Result<bool> {
        let a = read_drive(&self.drive)?;
        Ok(instance_id_of(a.meta_data.as_deref())? == cached.instance_id)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::error::ImdsErrorKind;
    use crate::source::provider::fake::{FakeClock, Scripted};
    use serde_json::json;

    pub(crate) const META: &str = r#"{"uuid": "83679162-1378-4288-a2d4-70e13ec132aa",
        "hostname": "test.novalocal", "name": "test", "availability_zone": "nova",
        "launch_index": 0, "project_id": "f7ac731cc11f40efbc03a9f9e1d1d21f",
        "public_keys": {"mykey": "ssh-rsa AAAA test"}, "admin_pass": "s3cret",
        "random_seed": "c2VlZA==", "devices": [], "meta": {"role": "web"}}"#;

    fn service(user_data: Option<&str>) -> Scripted<'static> {
        let mut answers: BTreeMap<String, String> = [
            ("meta_data.json", META),
            ("network_data.json", super::super::nic::tests::TWO),
        ]
        .into_iter()
        .map(|(k, v)| (format!("{OPENSTACK_ROOT}/{k}"), v.to_owned()))
        .collect();
        if let Some(ud) = user_data {
            answers.insert(format!("{OPENSTACK_ROOT}/user_data"), ud.to_owned());
        }
        Scripted::answering(answers)
    }

    fn run(s: &Scripted<'_>) -> Result<InstanceData> {
        let clock = FakeClock::new();
        let policy = crate::source::provider::fake::policy(30_000);
        let a = fetch_answers(s, &policy, &clock)?;
        assemble(&a, SourceKind::OpenStack, "http://169.254.169.254")
    }

    #[test]
    fn identity_as_cloud_init_reads_it() {
        let s = service(Some("#cloud-config\n{}\n"));
        let d = run(&s).unwrap();
        assert_eq!(d.instance_id, "83679162-1378-4288-a2d4-70e13ec132aa");
        assert_eq!(d.local_hostname.as_deref(), Some("test"));
        assert_eq!(d.availability_zone.as_deref(), Some("nova"));
        assert_eq!(d.region, None);
        assert_eq!(d.cloud_name, "openstack");
        assert_eq!(d.platform, "openstack");
        assert_eq!(d.subplatform, "metadata (http://169.254.169.254)");
        assert_eq!(d.datasource, SourceKind::OpenStack);
        assert_eq!(d.user_data.as_deref(), Some(&b"#cloud-config\n{}\n"[..]));
        assert_eq!(d.meta_data["instance-id"], json!(d.instance_id));
        assert_eq!(d.meta_data["local-hostname"], json!("test.novalocal"));
        assert_eq!(d.meta_data["meta"]["role"], json!("web"));
        // Never published.
        for w in WITHHELD {
            assert!(!d.meta_data.contains_key(w), "{w}");
            assert!(!d.ds.to_string().contains("s3cret"));
        }
        assert_eq!(d.ds["network_data"]["links"].as_array().unwrap().len(), 3);
        // meta_data.json, network_data.json, user_data.
        assert_eq!(s.count(), 3);
        // A config drive: its own names.
        let a = Answers {
            meta_data: Some(META.to_owned()),
            ..Answers::default()
        };
        let d = assemble(&a, SourceKind::ConfigDrive, "/dev/disk/by-label/config-2").unwrap();
        assert_eq!(d.cloud_name, "configdrive");
        assert_eq!(d.platform, "openstack");
        assert_eq!(d.subplatform, "config-disk (/dev/disk/by-label/config-2)");
        assert_eq!(d.user_data, None);
    }

    #[test]
    fn a_missing_uuid_or_garbage_fail_and_429s_are_retried() {
        let s = service(None).without(&format!("{OPENSTACK_ROOT}/meta_data.json"));
        assert!(run(&s).unwrap_err().to_string().contains("meta_data.json"));
        let file = "metadata /openstack/latest/meta_data.json";
        for (bad, want) in [
            ("[]", format!("{file}: not a JSON object (got \"[]\")")),
            ("{", "OpenStack meta_data.json: EOF".to_owned()),
            // The one required key.
            ("{\"hostname\": \"x\"}", format!("{file}/uuid: missing")),
            // A key read of the wrong type.
            (
                "{\"uuid\": 7}",
                format!("{file}/uuid: not a string (got \"7\")"),
            ),
            (
                "{\"uuid\": \"u\", \"availability_zone\": {}}",
                format!("{file}/availability_zone: not a string (got \"{{}}\")"),
            ),
            // A value that does not parse.
            (
                "{\"uuid\": \"a\\nb\"}",
                format!("{file}/uuid: holds a control character (got \"a\\nb\")"),
            ),
        ] {
            let s = service(None).value(&format!("{OPENSTACK_ROOT}/meta_data.json"), bad);
            let e = run(&s).unwrap_err().to_string();
            assert!(e.starts_with(&want), "{bad}: {e}");
        }
        // Keys not read may be anything, and are published as they are.
        let odd = r#"{"uuid": "u", "hostname": null, "keys": [{"data": 1}], "launch_index": null}"#;
        let s = service(None).value(&format!("{OPENSTACK_ROOT}/meta_data.json"), odd);
        let d = run(&s).unwrap();
        assert_eq!((d.instance_id.as_str(), d.local_hostname), ("u", None));
        assert_eq!(d.meta_data["keys"][0]["data"], 1);
        assert_eq!(d.meta_data["launch_index"], Value::Null);
        let s = service(None).value(&format!("{OPENSTACK_ROOT}/network_data.json"), "{");
        assert!(run(&s).is_err());
        // Neutron's rate limit: 429s retried within the budget.
        let s = service(None);
        s.fail_next(
            (0..3)
                .map(|_| Error::Imds {
                    method: "GET",
                    url: "u".into(),
                    kind: ImdsErrorKind::Http {
                        status: 429,
                        retry_after: None,
                    },
                })
                .collect(),
        );
        assert!(run(&s).is_ok());
        assert_eq!(s.count(), 3 + 3);
    }
}

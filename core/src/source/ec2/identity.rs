// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the EC2 datasource — the instance-level data the boot stage needs,
//! fetched key by key with the same client (token, cache, endpoints) as the
//! hot-plug wait, never by crawling the tree (SPEC §4.1).
//!
//! | request | for |
//! |---|---|
//! | `dynamic/instance-identity/document` | instance-id, region, availability zone (JSON) |
//! | `meta-data/instance-id`, `meta-data/placement/availability-zone`, `meta-data/placement/region` | only when there is no identity document (EC2-API clouds other than AWS) |
//! | `meta-data/local-hostname` | local-hostname (404: none) |
//! | `meta-data/mac` | the primary NIC |
//! | `meta-data/network/interfaces/macs/` and, per MAC, its listing | which NICs, which keys |
//! | per MAC, each key of [`NicKey`] its listing names | device-number, network-card, addresses, subnets, prefixes |
//! | `user-data` | user-data, as bytes (404: none) |
//!
//! A request that fails in a way waiting can fix (a timeout, a refused connection,
//! 5xx, 429) is sent again with the hot-plug wait's jittered backoff, honouring a
//! 503's `Retry-After`, within one budget for the whole fetch (30 s by default).
//! What the answers mean is pure ([`assemble`]); the network part is checked with
//! the same parser as every other metadata tree.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::nic::{NicKey, Request};
use super::wait::{Clock, SystemClock, WaitPolicy};
use super::{Ec2, Fetch};
use crate::constants::{
    IMDS_IDENTITY_DOCUMENT, IMDS_MAX_BODY_BYTES, IMDS_MAX_USER_DATA_BYTES, IMDS_META_DATA,
    IMDS_USER_DATA,
};
use crate::error::{Error, Problem, Result};
use crate::metadata::parse_tree;
use crate::source::provider::doc;
use crate::source::provider::imdsv2::{listed_nics, listing};
use crate::source::provider::retry::Retrying;
use crate::source::{Datasource, InstanceData, SourceKind};

/// What IMDS answered, before it is interpreted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answers {
    /// `dynamic/instance-identity/document`.
    pub identity_document: Option<String>,
    /// `meta-data/instance-id` (only read without a document).
    pub instance_id: Option<String>,
    /// `meta-data/placement/availability-zone` (only read without a document).
    pub availability_zone: Option<String>,
    /// `meta-data/placement/region` (only read without a document).
    pub region: Option<String>,
    /// `meta-data/local-hostname`.
    pub local_hostname: Option<String>,
    /// `meta-data/mac`.
    pub mac: Option<String>,
    /// Per MAC, each key read and its value.
    pub nics: BTreeMap<String, BTreeMap<String, String>>,
    /// `user-data`.
    pub user_data: Option<Vec<u8>>,
}

/// Fetches the keys of the module docs' table, sending each request again while
/// waiting can fix its failure.
pub fn fetch_answers(fetch: &dyn Fetch, policy: &WaitPolicy, clock: &dyn Clock) -> Result<Answers> {
    let r = Retrying::new(policy, clock, "metadata");
    let get = |path: &str| r.get(fetch, path);
    let md = |key: &str| format!("{IMDS_META_DATA}/{key}");
    let mut a = Answers {
        identity_document: get(IMDS_IDENTITY_DOCUMENT)?,
        ..Answers::default()
    };
    if a.identity_document.is_none() {
        a.instance_id = get(&md("instance-id"))?;
        a.availability_zone = get(&md("placement/availability-zone"))?;
        a.region = get(&md("placement/region"))?;
    }
    a.local_hostname = get(&md("local-hostname"))?;
    a.mac = get(&md("mac"))?;
    for (name, mac) in listed_nics(get)? {
        let Some(keys) = get(&Request::Listing.path(mac))? else {
            continue;
        };
        let keys = listing(&keys);
        let mut folder = BTreeMap::new();
        for k in NicKey::ALL {
            if keys.iter().any(|l| l == k.name())
                && let Some(v) = get(&Request::Key(k).path(mac))?
            {
                folder.insert(k.name().to_owned(), v);
            }
        }
        a.nics.insert(name, folder);
    }
    a.user_data = r.get_bytes(fetch, IMDS_USER_DATA, IMDS_MAX_USER_DATA_BYTES)?;
    r.log_fetched("EC2");
    Ok(a)
}

/// The keys of the instance-identity document read: each may be absent, as
/// on EC2-API clouds other than AWS; the rest of the document is kept as it is.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct IdentityDocument {
    #[serde(default, deserialize_with = "doc::text")]
    instance_id: Option<String>,
    #[serde(default, deserialize_with = "doc::text")]
    availability_zone: Option<String>,
    #[serde(default, deserialize_with = "doc::text")]
    region: Option<String>,
}

/// The largest identity document read (as much as the client reads; AWS's is
/// under 1 KiB).
const MAX_DOCUMENT_BYTES: u64 = IMDS_MAX_BODY_BYTES;

/// Interprets the answers: `endpoint` is the base URL that gave them, `cloud_name`
/// the platform detection identified (`aws`, `brightbox`, ...).
pub fn assemble(a: &Answers, endpoint: &str, cloud_name: &str) -> Result<InstanceData> {
    let (read, document) = match &a.identity_document {
        None => (IdentityDocument::default(), None),
        Some(text) => {
            let (read, document) = doc::read_object(
                text,
                MAX_DOCUMENT_BYTES,
                "EC2 instance-identity document",
                IMDS_IDENTITY_DOCUMENT,
            )?;
            (read, Some(document))
        }
    };
    let trimmed = |v: &Option<String>| {
        v.as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let instance_id = read
        .instance_id
        .or_else(|| trimmed(&a.instance_id))
        .ok_or_else(|| Error::Metadata {
            key: "instance-id".to_owned(),
            problem: Problem::missing(),
        })?;
    let availability_zone = read
        .availability_zone
        .or_else(|| trimmed(&a.availability_zone));
    // cloud-init: the document's region, else the zone without its letter.
    let region = read.region.or_else(|| trimmed(&a.region)).or_else(|| {
        availability_zone
            .as_deref()
            .and_then(|z| z.strip_suffix(|c: char| c.is_ascii_lowercase()))
            .map(str::to_owned)
    });
    let mut md = Map::new();
    md.insert("instance-id".to_owned(), json!(instance_id));
    if let Some(h) = trimmed(&a.local_hostname) {
        md.insert("local-hostname".to_owned(), json!(h));
    }
    if let Some(m) = trimmed(&a.mac) {
        md.insert("mac".to_owned(), json!(m));
    }
    if let Some(z) = &availability_zone {
        md.insert(
            "placement".to_owned(),
            json!({"availability-zone": z, "region": region}),
        );
    }
    let macs: Map<String, Value> = a
        .nics
        .iter()
        .map(|(mac, keys)| (mac.clone(), json!(keys)))
        .collect();
    md.insert("network".to_owned(), json!({"interfaces": {"macs": macs}}));
    let md_value = Value::Object(md.clone());
    // The same parser as every metadata tree: a garbage value is an error naming
    // its key, here rather than later in the plan.
    parse_tree(&md_value)?;
    let meta_data = md;
    let mut ds = json!({"_metadata_api_version": "latest", "meta-data": md_value});
    if let (Some(d), Some(obj)) = (document, ds.as_object_mut()) {
        obj.insert(
            "dynamic".to_owned(),
            json!({"instance-identity": {"document": d}}),
        );
    }
    Ok(InstanceData {
        local_hostname: meta_data
            .get("local-hostname")
            .and_then(Value::as_str)
            .map(str::to_owned),
        cloud_name: cloud_name.to_owned(),
        region,
        availability_zone,
        meta_data,
        user_data: a.user_data.clone(),
        ds,
        ..InstanceData::new(
            SourceKind::Ec2,
            instance_id,
            "ec2",
            format!("metadata ({endpoint})"),
        )
    })
}

/// The EC2 datasource: an IMDS client, the platform detection identified, and the
/// retry budget.
#[derive(Debug)]
pub struct Ec2Source {
    client: Ec2,
    cloud_name: String,
    policy: WaitPolicy,
}

impl Ec2Source {
    /// The datasource behind `client`, on AWS.
    pub fn new(client: Ec2) -> Self {
        Self {
            client,
            cloud_name: "aws".to_owned(),
            policy: WaitPolicy::default(),
        }
    }

    /// The cloud detection identified ([`super::detect::Ec2Platform`]).
    #[must_use]
    pub fn with_cloud_name(mut self, cloud_name: impl Into<String>) -> Self {
        self.cloud_name = cloud_name.into();
        self
    }

    /// How long and how often failing requests are sent again.
    #[must_use]
    pub fn with_policy(mut self, policy: WaitPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The IMDS client.
    pub fn client(&self) -> &Ec2 {
        &self.client
    }
}

impl Datasource for Ec2Source {
    fn kind(&self) -> SourceKind {
        SourceKind::Ec2
    }

    fn fetch(&self) -> Result<InstanceData> {
        let answers = fetch_answers(&self.client, &self.policy, &SystemClock)?;
        assemble(&answers, self.client.active_endpoint(), &self.cloud_name)
    }

    /// One request, `meta-data/instance-id` (plus the token when none is cached).
    fn check_instance_id(&self, cached: &InstanceData) -> Result<bool> {
        let id = Retrying::new(&self.policy, &SystemClock, "metadata")
            .get(&self.client, &format!("{IMDS_META_DATA}/instance-id"))?
            .map(|s| s.trim().to_owned())
            .ok_or_else(|| Error::Metadata {
                key: "instance-id".to_owned(),
                problem: Problem::missing(),
            })?;
        Ok(id == cached.instance_id)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::error::ImdsErrorKind;
    use crate::source::provider::fake::{FakeClock, Scripted};

    const MACS: &str = "/latest/meta-data/network/interfaces/macs";

    fn aws() -> BTreeMap<String, String> {
        let doc = r#"{"instanceId": "i-0abc", "region": "eu-central-1", "availabilityZone": "eu-central-1a", "accountId": "1"}"#;
        [
            ("/latest/dynamic/instance-identity/document", doc),
            ("/latest/meta-data/local-hostname", "ip-10-0-0-10.eu-central-1.compute.internal"),
            ("/latest/meta-data/mac", "02:00:00:00:00:01"),
            ("/latest/meta-data/network/interfaces/macs/", "02:00:00:00:00:01/\n02:00:00:00:00:02/"),
            ("/latest/meta-data/network/interfaces/macs/02:00:00:00:00:01/", "device-number\nlocal-ipv4s\nsubnet-ipv4-cidr-block\nowner-id"),
            ("/latest/meta-data/network/interfaces/macs/02:00:00:00:00:01/device-number", "0"),
            ("/latest/meta-data/network/interfaces/macs/02:00:00:00:00:01/local-ipv4s", "10.0.0.10"),
            ("/latest/meta-data/network/interfaces/macs/02:00:00:00:00:01/subnet-ipv4-cidr-block", "10.0.0.0/24"),
            ("/latest/meta-data/network/interfaces/macs/02:00:00:00:00:02/", "device-number\nipv6s"),
            ("/latest/meta-data/network/interfaces/macs/02:00:00:00:00:02/device-number", "1"),
            ("/latest/meta-data/network/interfaces/macs/02:00:00:00:00:02/ipv6s", "2600:1f18::20"),
            ("/latest/user-data", "#cloud-config\n{}\n"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    fn script(answers: BTreeMap<String, String>) -> Scripted<'static> {
        Scripted::answering(answers)
    }

    fn policy() -> WaitPolicy {
        crate::source::provider::fake::policy(30_000)
    }

    #[test]
    fn fetches_keys_not_the_tree() {
        let s = script(aws());
        let a = fetch_answers(&s, &policy(), &FakeClock::new()).unwrap();
        let asked = s.requests();
        // Never a folder but the MAC listings, never a key the listing lacks
        // (owner-id is listed but not needed).
        assert_eq!(asked.len(), 12, "{asked:#?}");
        assert!(
            !asked
                .iter()
                .any(|p| p.ends_with("/owner-id") || p == "/latest/meta-data/")
        );
        assert!(!asked.iter().any(|p| p.ends_with("/instance-id")));
        let d = assemble(&a, "http://169.254.169.254", "aws").unwrap();
        assert_eq!(d.instance_id, "i-0abc");
        assert_eq!(d.region.as_deref(), Some("eu-central-1"));
        assert_eq!(d.availability_zone.as_deref(), Some("eu-central-1a"));
        assert_eq!(d.subplatform, "metadata (http://169.254.169.254)");
        assert_eq!(
            d.ds["meta-data"]["network"]["interfaces"]["macs"]["02:00:00:00:00:02"]["ipv6s"],
            "2600:1f18::20"
        );
        assert_eq!(
            d.ds["dynamic"]["instance-identity"]["document"]["accountId"],
            "1"
        );
        let net = parse_tree(&d.ds["meta-data"]).unwrap();
        assert_eq!(net.nics.len(), 2);
        assert_eq!(net.primary_mac, Some("02:00:00:00:00:01".parse().unwrap()));
        assert_eq!(d.user_data.as_deref(), Some(&b"#cloud-config\n{}\n"[..]));
    }

    #[test]
    fn without_a_document_the_meta_data_keys_are_read() {
        let mut m = aws();
        m.remove("/latest/dynamic/instance-identity/document");
        m.remove("/latest/user-data");
        m.insert(
            "/latest/meta-data/instance-id".into(),
            "i-brightbox\n".into(),
        );
        m.insert(
            "/latest/meta-data/placement/availability-zone".into(),
            "gb1-a".into(),
        );
        let a = fetch_answers(&script(m), &policy(), &FakeClock::new()).unwrap();
        let d = assemble(&a, "http://169.254.169.254", "brightbox").unwrap();
        assert_eq!(d.instance_id, "i-brightbox");
        assert_eq!(d.availability_zone.as_deref(), Some("gb1-a"));
        // cloud-init's rule: the zone without its last letter.
        assert_eq!(d.region.as_deref(), Some("gb1-"));
        assert!(d.user_data.is_none());
        assert!(d.ds.get("dynamic").is_none());
        assert_eq!(d.cloud_name, "brightbox");
    }

    #[test]
    fn transient_errors_are_retried_with_backoff_and_others_are_not() {
        let s = script(aws());
        let http = |status| Error::Imds {
            method: "GET",
            url: "u".into(),
            kind: ImdsErrorKind::Http {
                status,
                retry_after: None,
            },
        };
        s.fail(
            "/latest/meta-data/mac",
            vec![http(503), http(500), http(429)],
        );
        let c = FakeClock::new();
        assert!(fetch_answers(&s, &policy(), &c).is_ok());
        assert_eq!(c.slept().as_millis(), 100 + 200 + 400);

        let s = script(aws());
        s.fail("/latest/meta-data/mac", vec![http(403)]);
        let e = fetch_answers(&s, &policy(), &FakeClock::new()).unwrap_err();
        assert!(e.to_string().contains("HTTP 403"), "{e}");

        let s = script(aws());
        s.fail(
            "/latest/meta-data/mac",
            (0..1000).map(|_| http(503)).collect(),
        );
        let c = FakeClock::new();
        let e = fetch_answers(&s, &policy().with_budget(Duration::from_secs(5)), &c).unwrap_err();
        assert!(e.to_string().contains("HTTP 503"), "{e}");
        assert_eq!(c.slept().as_millis(), 5000);
    }

    #[test]
    fn garbage_is_a_clear_error() {
        const DOC: &str = "/latest/dynamic/instance-identity/document";
        let cases = [
            (DOC, "not json", "EC2 instance-identity document: expected"),
            (DOC, "[1]", "document: not a JSON object (got \"[1]\")"),
            // Every key of the document may be absent; the instance-id then
            // comes from nowhere (meta-data's is only read without a document).
            (DOC, "{}", "instance-id: missing"),
            // A key read of the wrong type.
            (
                DOC,
                r#"{"instanceId": "i-0abc", "region": 7}"#,
                "metadata /latest/dynamic/instance-identity/document/region: not a string (got \"7\")",
            ),
            // A key read that does not parse: one line of text.
            (
                DOC,
                r#"{"instanceId": "i-0abc\u001b[2J"}"#,
                "document/instanceId: holds a control character (got \"i-0abc\\u{1b}[2J\")",
            ),
            (
                &format!("{MACS}/02:00:00:00:00:01/device-number"),
                "zero",
                "device-number",
            ),
            (&format!("{MACS}/"), "not-a-mac/", "network/interfaces/macs"),
        ];
        for (path, body, want) in cases {
            let mut m = aws();
            m.insert(path.to_owned(), body.to_owned());
            let e = fetch_answers(&script(m), &policy(), &FakeClock::new())
                .and_then(|a| assemble(&a, "e", "aws"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{path}: {e}");
        }
    }

    #[test]
    fn the_document_is_kept_whole_and_keys_not_read_may_be_anything() {
        let mut m = aws();
        let doc = r#"{"instanceId": " i-0abc ", "region": null, "availabilityZone": "",
            "devpayProductCodes": null, "marketplaceProductCodes": [1, {"x": []}],
            "version": 2017, "pendingTime": {"odd": true}}"#;
        m.insert(
            "/latest/dynamic/instance-identity/document".into(),
            doc.into(),
        );
        m.insert(
            "/latest/meta-data/placement/availability-zone".into(),
            "unread".into(),
        );
        let a = fetch_answers(&script(m), &policy(), &FakeClock::new()).unwrap();
        let d = assemble(&a, "http://169.254.169.254", "aws").unwrap();
        assert_eq!(d.instance_id, "i-0abc");
        // null and empty are absent: no zone, so no region either.
        assert_eq!((d.region, d.availability_zone), (None, None));
        let kept = &d.ds["dynamic"]["instance-identity"]["document"];
        assert_eq!(kept["marketplaceProductCodes"][1]["x"], json!([]));
        assert_eq!(kept["instanceId"], " i-0abc ");
        assert_eq!(kept["version"], 2017);
    }
}

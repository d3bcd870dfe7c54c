// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the `AliYun` datasource — the instance-level data the boot stage
//! needs from ECS's metadata service, key by key with the same client (token,
//! cache) as the hot-plug wait, never by crawling the tree.
//!
//! | request | for |
//! |---|---|
//! | `meta-data/instance-id` | instance-id (required) |
//! | `meta-data/region-id`, `meta-data/zone-id` | region, availability zone (cloud-init's `AliYun`) |
//! | `meta-data/hostname` | local-hostname (cloud-init's `AliYun` reads `hostname`) |
//! | `meta-data/mac` | the primary NIC |
//! | `meta-data/network/interfaces/macs/` and per MAC each key of [`NicKey::ALL`] | the NICs, checked with the hot-plug wait's parser |
//! | `user-data` | user-data, as bytes (404: none) |
//!
//! A request that fails in a way waiting can fix is sent again with the wait's
//! jittered backoff, within one budget for the whole fetch, as EC2's. What the
//! answers mean is pure ([`assemble`]).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::Aliyun;
use super::nic::{NicKey, key_path, parse_folder};
use crate::constants::{IMDS_MAX_USER_DATA_BYTES, IMDS_META_DATA, IMDS_USER_DATA};
use crate::error::{Error, Problem, Result};
use crate::model::MacAddr;
use crate::source::provider::http::Fetch;
use crate::source::provider::imdsv2::listed_nics;
use crate::source::provider::instance::known_keys;
use crate::source::provider::retry::{ClientSource, Retrying};
use crate::source::provider::wait::{Clock, SystemClock, WaitPolicy};
use crate::source::{Datasource, InstanceData, SourceKind};

/// What the service answered, before it is interpreted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answers {
    /// `meta-data/instance-id`.
    pub instance_id: Option<String>,
    /// `meta-data/region-id`.
    pub region_id: Option<String>,
    /// `meta-data/zone-id`.
    pub zone_id: Option<String>,
    /// `meta-data/hostname`.
    pub hostname: Option<String>,
    /// `meta-data/mac`.
    pub mac: Option<String>,
    /// Per MAC, each key that answered.
    pub nics: BTreeMap<MacAddr, BTreeMap<NicKey, String>>,
    /// `user-data`.
    pub user_data: Option<Vec<u8>>,
}

/// Fetches the keys of the module docs' table.
pub fn fetch_answers(fetch: &dyn Fetch, policy: &WaitPolicy, clock: &dyn Clock) -> Result<Answers> {
    let r = Retrying::new(policy, clock, "metadata");
    let get = |path: &str| r.get(fetch, path);
    let md = |key: &str| format!("{IMDS_META_DATA}/{key}");
    let mut a = Answers {
        instance_id: get(&md("instance-id"))?,
        region_id: get(&md("region-id"))?,
        zone_id: get(&md("zone-id"))?,
        hostname: get(&md("hostname"))?,
        mac: get(&md("mac"))?,
        ..Answers::default()
    };
    for (_, mac) in listed_nics(get)? {
        let mut folder = BTreeMap::new();
        for k in NicKey::ALL {
            if let Some(v) = get(&key_path(mac, k))? {
                folder.insert(k, v);
            }
        }
        a.nics.insert(mac, folder);
    }
    a.user_data = r.get_bytes(fetch, IMDS_USER_DATA, IMDS_MAX_USER_DATA_BYTES)?;
    r.log_fetched("AliYun");
    Ok(a)
}

/// A one-line value: trimmed, non-empty, without control characters.
fn one_line(key: &str, v: Option<&String>) -> Result<Option<String>> {
    let Some(v) = v.map(|s| s.trim()).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    if v.chars().any(char::is_control) || v.len() > 255 {
        return Err(Error::Metadata {
            key: key.to_owned(),
            problem: Problem::bad("not a one-line value of at most 255 bytes", v),
        });
    }
    Ok(Some(v.to_owned()))
}

/// Interprets the answers; `endpoint` is the base URL that gave them.
pub fn assemble(a: &Answers, endpoint: &str) -> Result<InstanceData> {
    let instance_id =
        one_line("instance-id", a.instance_id.as_ref())?.ok_or_else(|| Error::Metadata {
            key: "instance-id".to_owned(),
            problem: Problem::missing(),
        })?;
    let region = one_line("region-id", a.region_id.as_ref())?;
    let zone = one_line("zone-id", a.zone_id.as_ref())?;
    let hostname = one_line("hostname", a.hostname.as_ref())?;
    let mac = one_line("mac", a.mac.as_ref())?;
    if let Some(m) = &mac {
        m.parse::<MacAddr>().map_err(|problem| Error::Metadata {
            key: "mac".to_owned(),
            problem,
        })?;
    }
    let mut md = known_keys([
        ("instance-id", Some(instance_id.as_str())),
        ("region-id", region.as_deref()),
        ("zone-id", zone.as_deref()),
        ("hostname", hostname.as_deref()),
        ("mac", mac.as_deref()),
    ]);
    let mut macs = Map::new();
    for (m, folder) in &a.nics {
        // The hot-plug wait's parser: garbage is an error naming its key, here
        // rather than later in a plan.
        parse_folder(*m, folder)?;
        let keys: Map<String, Value> = folder
            .iter()
            .map(|(k, v)| (k.name().to_owned(), json!(v.trim())))
            .collect();
        macs.insert(m.to_string(), Value::Object(keys));
    }
    md.insert("network".to_owned(), json!({"interfaces": {"macs": macs}}));
    let ds = json!({"_metadata_api_version": "latest", "meta-data": Value::Object(md.clone())});
    Ok(InstanceData {
        local_hostname: hostname,
        region,
        availability_zone: zone,
        meta_data: md,
        user_data: a.user_data.clone(),
        ds,
        ..InstanceData::new(
            SourceKind::AliYun,
            instance_id,
            "aliyun",
            format!("metadata ({endpoint})"),
        )
    })
}

/// The `AliYun` datasource: an ECS metadata client and the retry budget.
pub type AliyunSource = ClientSource<Aliyun>;

impl Datasource for AliyunSource {
    fn kind(&self) -> SourceKind {
        SourceKind::AliYun
    }

    fn fetch(&self) -> Result<InstanceData> {
        let answers = fetch_answers(&self.client, &self.policy, &SystemClock)?;
        assemble(&answers, self.client.endpoint())
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
    use super::*;
    use crate::source::provider::fake::{FakeClock, Scripted};

    const MACS: &str = "/latest/meta-data/network/interfaces/macs";

    fn ecs() -> BTreeMap<String, String> {
        [
            ("/latest/meta-data/instance-id", "i-bp1abc\n"),
            ("/latest/meta-data/region-id", "cn-hangzhou"),
            ("/latest/meta-data/zone-id", "cn-hangzhou-i"),
            ("/latest/meta-data/hostname", "iZbp1abcZ"),
            ("/latest/meta-data/mac", "00:16:3e:00:00:01"),
            (
                &format!("{MACS}/") as &str,
                "00:16:3e:00:00:01/\n00:16:3e:00:00:02/",
            ),
            (
                &format!("{MACS}/00:16:3e:00:00:01/primary-ip-address"),
                "192.168.0.10",
            ),
            (
                &format!("{MACS}/00:16:3e:00:00:01/private-ipv4s"),
                r#"["192.168.0.10"]"#,
            ),
            (
                &format!("{MACS}/00:16:3e:00:00:01/vswitch-cidr-block"),
                "192.168.0.0/24",
            ),
            (
                &format!("{MACS}/00:16:3e:00:00:01/gateway"),
                "192.168.0.253",
            ),
            (
                &format!("{MACS}/00:16:3e:00:00:01/network-interface-id"),
                "eni-bp1",
            ),
            (
                &format!("{MACS}/00:16:3e:00:00:02/primary-ip-address"),
                "192.168.1.20",
            ),
            (
                &format!("{MACS}/00:16:3e:00:00:02/private-ipv4s"),
                r#"["192.168.1.20","192.168.1.21"]"#,
            ),
            (
                &format!("{MACS}/00:16:3e:00:00:02/netmask"),
                "255.255.255.0",
            ),
            (
                &format!("{MACS}/00:16:3e:00:00:02/gateway"),
                "192.168.1.253",
            ),
            ("/latest/user-data", "#cloud-config\n{}\n"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    fn run(answers: BTreeMap<String, String>) -> (Result<InstanceData>, usize) {
        let script = Scripted::answering(answers);
        let clock = FakeClock::new();
        let policy = crate::source::provider::fake::policy(30_000);
        let out = fetch_answers(&script, &policy, &clock)
            .and_then(|a| assemble(&a, "http://100.100.100.200"));
        let asked = script.count();
        (out, asked)
    }

    #[test]
    fn instance_data_carries_cloud_init_v1_keys() {
        let (d, asked) = run(ecs());
        let d = d.unwrap();
        // Five top-level keys, the listing, each key of a folder per NIC,
        // user-data.
        assert_eq!(asked, 5 + 1 + 2 * NicKey::ALL.len() + 1);
        assert_eq!(d.datasource, SourceKind::AliYun);
        assert_eq!(d.instance_id, "i-bp1abc");
        assert_eq!(d.cloud_name, "aliyun");
        assert_eq!(d.platform, "aliyun");
        assert_eq!(d.region.as_deref(), Some("cn-hangzhou"));
        assert_eq!(d.availability_zone.as_deref(), Some("cn-hangzhou-i"));
        assert_eq!(d.local_hostname.as_deref(), Some("iZbp1abcZ"));
        assert_eq!(d.subplatform, "metadata (http://100.100.100.200)");
        assert_eq!(
            d.ds["meta-data"]["network"]["interfaces"]["macs"]["00:16:3e:00:00:02"]["netmask"],
            "255.255.255.0"
        );
        assert_eq!(d.user_data.as_deref(), Some(&b"#cloud-config\n{}\n"[..]));
    }

    #[test]
    fn garbage_and_missing_keys_are_clear_errors() {
        let cases = [
            (
                "/latest/meta-data/instance-id",
                None,
                "instance-id: missing",
            ),
            (
                "/latest/meta-data/hostname",
                Some("a\u{1b}[2Jb"),
                "hostname",
            ),
            ("/latest/meta-data/mac", Some("eth0"), "mac"),
            (
                &format!("{MACS}/") as &str,
                Some("../../x/"),
                "network/interfaces/macs",
            ),
            (
                &format!("{MACS}/00:16:3e:00:00:02/private-ipv4s"),
                Some("192.168.1.20"),
                "private-ipv4s",
            ),
        ];
        for (path, body, want) in cases {
            let mut m = ecs();
            match body {
                Some(b) => m.insert(path.to_owned(), b.to_owned()),
                None => m.remove(path),
            };
            let e = run(m).0.unwrap_err().to_string();
            assert!(e.contains(want), "{path}: {e}");
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the Azure datasource — who this VM is, for the boot stage, in one
//! request: `GET /metadata/instance?api-version=2021-02-01` (compute and network
//! at once). What the answer means is pure ([`assemble`]).
//!
//! | instance-data v1 | from |
//! |---|---|
//! | `instance_id` | `compute.vmId` |
//! | `region` | `compute.location` |
//! | `availability_zone` | `compute.zone` (empty: none) |
//! | `local_hostname` | `compute.name` |
//! | `cloud_name`, `platform` | `azure` (cloud-init's `DataSourceAzure`) |
//! | user-data | `compute.userData` (base64), when set |
//!
//! The network part is parsed with the hot-plug wait's strict parser
//! ([`nic::parse_network`]): a garbage answer is an error, never an instance
//! without NICs. `userData` is kept out of `ds` (it is the sensitive user-data).
//! A request that fails in a way waiting can fix (a timeout, 5xx, 429) is sent
//! again with the wait's backoff and its `Retry-After`, within one budget.

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};

use super::nic;
use super::{Azure, Fetch, INSTANCE_PATH, VM_ID_PATH};
use crate::error::{Error, Problem, Result};
use crate::source::provider::doc;
use crate::source::provider::instance::meta_data;
use crate::source::provider::retry::{ClientSource, Retrying};
use crate::source::provider::wait::{Clock, SystemClock, WaitPolicy};
use crate::source::{Datasource, InstanceData, SourceKind};

/// The most bytes of user-data kept (Azure allows 64 KiB).
const MAX_USER_DATA_BYTES: usize = 64 * 1024;

/// The largest answer read: the network answer's cap ([`nic::MAX_BODY_BYTES`]).
const MAX_ANSWER_BYTES: u64 = nic::MAX_BODY_BYTES as u64;

/// Where user-data is in the answer, for its errors.
const USER_DATA_KEY: &str = "compute/userData";

/// `fetch.get(path)`, sent again while it fails in a way waiting can fix.
pub fn get_retrying(
    fetch: &dyn Fetch,
    path: &str,
    policy: &WaitPolicy,
    clock: &dyn Clock,
) -> Result<String> {
    Retrying::new(policy, clock, "Azure IMDS").retry(path, || fetch.get(path))
}

fn missing(key: &str) -> Error {
    Error::Metadata {
        key: key.to_owned(),
        problem: Problem::missing(),
    }
}

/// The answer's two parts, both required; `compute` is read into [`Compute`],
/// `network` by the hot-plug wait's parser, and both are kept as received.
#[derive(Deserialize)]
struct InstanceDoc {
    compute: Value,
    network: Value,
}

/// The keys of `compute` read (see the module docs' table).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Compute {
    #[serde(deserialize_with = "doc::required_text")]
    vm_id: String,
    #[serde(default, deserialize_with = "doc::text")]
    location: Option<String>,
    #[serde(default, deserialize_with = "doc::text")]
    zone: Option<String>,
    #[serde(default, deserialize_with = "doc::text")]
    name: Option<String>,
    /// Base64; empty is none.
    #[serde(default, deserialize_with = "doc::text")]
    user_data: Option<String>,
}

/// `compute.userData` decoded: at most 64 KiB.
fn user_data(b64: Option<&str>) -> Result<Option<Vec<u8>>> {
    let Some(b64) = b64 else {
        return Ok(None);
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        // Not shown: user-data is sensitive.
        .map_err(|e| doc::bad(USER_DATA_KEY, format!("not base64 ({e})"), ""))?;
    if bytes.len() > MAX_USER_DATA_BYTES {
        let reason = "larger than 64 KiB once decoded";
        return Err(doc::bad(USER_DATA_KEY, reason, &bytes.len().to_string()));
    }
    Ok(Some(bytes))
}

/// Interprets one answer of `/metadata/instance`; `endpoint` is the base URL that
/// gave it.
pub fn assemble(text: &str, endpoint: &str) -> Result<InstanceData> {
    let (answer, _): (InstanceDoc, _) =
        doc::read_object(text, MAX_ANSWER_BYTES, "Azure IMDS instance", "instance")?;
    nic::parse_network(&answer.network.to_string())?;
    let c: Compute = doc::from_value(&answer.compute, "compute")?;
    let user_data = user_data(c.user_data.as_deref())?;
    let md = meta_data(
        &c.vm_id,
        c.name.as_deref(),
        c.zone.as_deref(),
        &[("region", c.location.as_deref())],
    );
    // `userData` is the sensitive user-data: kept out of `ds`.
    let mut compute = answer.compute;
    if let Value::Object(keys) = &mut compute {
        keys.remove("userData");
    }
    let ds = json!({
        "_metadata_api_version": super::API_VERSION,
        "meta_data": md.clone(),
        "imds": {"compute": compute, "network": answer.network},
    });
    Ok(InstanceData {
        local_hostname: c.name,
        region: c.location,
        availability_zone: c.zone,
        meta_data: md,
        user_data,
        ds,
        ..InstanceData::new(
            SourceKind::Azure,
            c.vm_id,
            "azure",
            format!("metadata ({endpoint})"),
        )
    })
}

/// The Azure datasource: an IMDS client and the retry budget.
pub type AzureSource = ClientSource<Azure>;

impl Datasource for AzureSource {
    fn kind(&self) -> SourceKind {
        SourceKind::Azure
    }

    fn fetch(&self) -> Result<InstanceData> {
        let text = get_retrying(&self.client, INSTANCE_PATH, &self.policy, &SystemClock)?;
        assemble(&text, self.client.endpoint())
    }

    /// One request, `compute/vmId` as text.
    fn check_instance_id(&self, cached: &InstanceData) -> Result<bool> {
        let id = get_retrying(
            &self.client,
            &format!("{VM_ID_PATH}?format=text"),
            &self.policy,
            &SystemClock,
        )?;
        let id = id.trim();
        if id.is_empty() {
            return Err(missing("compute/vmId"));
        }
        Ok(id == cached.instance_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(compute: &Value) -> String {
        json!({
            "compute": compute,
            "network": {"interface": [{"macAddress": "000D3A000001",
                "ipv4": {"ipAddress": [{"privateIpAddress": "10.0.0.4"}],
                         "subnet": [{"address": "10.0.0.0", "prefix": "24"}]}}]}
        })
        .to_string()
    }

    #[test]
    fn compute_maps_to_instance_data_v1() {
        let text = answer(&json!({
            "vmId": "02aab8a4-74ef-476e-8182-f6d2ba4166a6",
            "location": "westeurope",
            "zone": "2",
            "name": "vm-one",
            "userData": "I2Nsb3VkLWNvbmZpZwo=",
            "osType": "Linux"
        }));
        let d = assemble(&text, "http://169.254.169.254").unwrap();
        assert_eq!(d.datasource, SourceKind::Azure);
        assert_eq!(d.instance_id, "02aab8a4-74ef-476e-8182-f6d2ba4166a6");
        assert_eq!(d.region.as_deref(), Some("westeurope"));
        assert_eq!(d.availability_zone.as_deref(), Some("2"));
        assert_eq!(d.local_hostname.as_deref(), Some("vm-one"));
        assert_eq!(d.cloud_name, "azure");
        assert_eq!(d.platform, "azure");
        assert_eq!(d.user_data.as_deref(), Some(&b"#cloud-config\n"[..]));
        // The user-data is not repeated in `ds`.
        assert!(!d.ds.to_string().contains("I2Nsb3Vk"));
        assert_eq!(d.ds["imds"]["compute"]["osType"], "Linux");
        // An empty zone is none.
        let d = assemble(
            &answer(&json!({"vmId": "x", "location": "eastus", "zone": ""})),
            "http://169.254.169.254",
        )
        .unwrap();
        assert_eq!(d.availability_zone, None);
        assert_eq!(d.user_data, None);
    }

    #[test]
    fn bad_answers_are_errors_naming_the_key_and_showing_the_value() {
        for (bad, want) in [
            ("garbage".to_owned(), "Azure IMDS instance: expected value"),
            (
                "[]".to_owned(),
                "metadata instance: not a JSON object (got \"[]\")",
            ),
            // Both parts are required.
            (
                json!({"compute": {"vmId": "x"}}).to_string(),
                "metadata instance/network: missing",
            ),
            (
                answer(&json!({"location": "eastus"})),
                "metadata compute/vmId: missing",
            ),
            (
                answer(&json!({"vmId": " "})),
                "metadata compute/vmId: empty (got \" \")",
            ),
            (
                json!({"compute": {"vmId": "x"}, "network": {"interface": [{"macAddress": "zz"}]}})
                    .to_string(),
                "metadata network/interface/0/macAddress: not 12 hex digits (got \"zz\")",
            ),
            // A key read of the wrong type.
            (
                answer(&json!({"vmId": 7})),
                "metadata compute/vmId: not a string (got \"7\")",
            ),
            (
                answer(&json!({"vmId": "x", "zone": ["1"]})),
                "metadata compute/zone: not a string (got \"[\\\"1\\\"]\")",
            ),
            (
                answer(&json!("compute")),
                "metadata compute: not a JSON object (got \"compute\")",
            ),
            // A value that does not parse.
            (
                answer(&json!({"vmId": "x", "name": "evil\nhost"})),
                "metadata compute/name: holds a control character",
            ),
            (
                answer(&json!({"vmId": "x", "userData": "%%%"})),
                "metadata compute/userData: not base64",
            ),
        ] {
            let e = assemble(&bad, "http://169.254.169.254")
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(want), "{bad}: {e}");
        }
        // The user-data is sensitive: a bad one is not shown.
        let e = assemble(&answer(&json!({"vmId": "x", "userData": "c2VjcmV0%"})), "e")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("c2VjcmV0"), "{e}");
        let big = answer(&json!({"vmId": "x", "userData": "A".repeat(nic::MAX_BODY_BYTES)}));
        let e = assemble(&big, "e").unwrap_err().to_string();
        assert!(e.starts_with("metadata instance: larger than"), "{e}");
    }

    #[test]
    fn keys_not_read_may_be_anything_and_are_kept() {
        let text = answer(&json!({
            "vmId": "x", "zone": null, "name": null, "userData": null,
            "tagsList": [{"name": "a"}], "osProfile": null, "platformFaultDomain": 0,
        }));
        let d = assemble(&text, "e").unwrap();
        assert_eq!(d.instance_id, "x");
        assert_eq!((d.local_hostname, d.availability_zone), (None, None));
        assert_eq!(d.ds["imds"]["compute"]["tagsList"][0]["name"], "a");
        assert_eq!(d.ds["imds"]["compute"]["platformFaultDomain"], 0);
        assert!(d.ds["imds"]["compute"].get("userData").is_none());
    }
}

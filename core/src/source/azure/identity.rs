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
use serde_json::{Map, Value, json};

use super::nic;
use super::{Azure, Fetch, INSTANCE_PATH, VM_ID_PATH};
use crate::error::{Error, Problem, Result};
use crate::source::provider::instance::{meta_data, text_field};
use crate::source::provider::retry::{ClientSource, Retrying};
use crate::source::provider::wait::{Clock, SystemClock, WaitPolicy};
use crate::source::{Datasource, InstanceData, SourceKind};

/// The most bytes of user-data kept (Azure allows 64 KiB).
const MAX_USER_DATA_BYTES: usize = 64 * 1024;

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

/// `compute.userData`: base64, at most 64 KiB once decoded; empty is none.
fn user_data(v: Option<Value>) -> Result<Option<Vec<u8>>> {
    let bad = |reason: String, value: &str| Error::Metadata {
        key: "compute/userData".to_owned(),
        problem: Problem::bad(reason, value),
    };
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(s.trim())
                .map_err(|e| bad(format!("not base64 ({e})"), ""))?;
            if bytes.len() > MAX_USER_DATA_BYTES {
                return Err(bad(
                    "larger than 64 KiB".to_owned(),
                    &bytes.len().to_string(),
                ));
            }
            Ok(Some(bytes))
        }
        Some(_) => Err(bad("not a string".to_owned(), "")),
    }
}

/// Interprets one answer of `/metadata/instance`; `endpoint` is the base URL that
/// gave it.
pub fn assemble(text: &str, endpoint: &str) -> Result<InstanceData> {
    if text.len() > nic::MAX_BODY_BYTES {
        return Err(Error::Metadata {
            key: "instance".to_owned(),
            problem: Problem::bad("answer too large", &text.len().to_string()),
        });
    }
    let root: Value = serde_json::from_str(text).map_err(|e| Error::Syntax {
        what: "Azure IMDS instance".to_owned(),
        message: e.to_string(),
    })?;
    let Value::Object(mut root) = root else {
        return Err(Error::Metadata {
            key: "instance".to_owned(),
            problem: Problem::bad("not a JSON object", ""),
        });
    };
    let network = root.remove("network").ok_or_else(|| missing("network"))?;
    nic::parse_network(&network.to_string())?;
    let mut compute = match root.remove("compute") {
        Some(Value::Object(c)) => c,
        Some(_) => {
            return Err(Error::Metadata {
                key: "compute".to_owned(),
                problem: Problem::bad("not a JSON object", ""),
            });
        }
        None => return Err(missing("compute")),
    };
    let text_of = |c: &Map<String, Value>, k: &str| text_field(c, k, "compute/");
    let instance_id = text_of(&compute, "vmId")?.ok_or_else(|| missing("compute/vmId"))?;
    let region = text_of(&compute, "location")?;
    let availability_zone = text_of(&compute, "zone")?;
    let local_hostname = text_of(&compute, "name")?;
    let user_data = user_data(compute.remove("userData"))?;
    let md = meta_data(
        &instance_id,
        local_hostname.as_deref(),
        availability_zone.as_deref(),
        &[("region", region.as_deref())],
    );
    let ds = json!({
        "_metadata_api_version": super::API_VERSION,
        "meta_data": md.clone(),
        "imds": {"compute": compute, "network": network},
    });
    Ok(InstanceData {
        datasource: SourceKind::Azure,
        instance_id,
        local_hostname,
        cloud_name: "azure".to_owned(),
        platform: "azure".to_owned(),
        subplatform: format!("metadata ({endpoint})"),
        region,
        availability_zone,
        meta_data: md,
        user_data,
        vendor_data: None,
        network_config: None,
        ds,
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
    fn bad_answers_are_errors() {
        for bad in [
            "garbage".to_owned(),
            "[]".to_owned(),
            json!({"compute": {"vmId": "x"}}).to_string(),
            json!({"compute": {"vmId": "x"}, "network": {"interface": [{"macAddress": "zz"}]}})
                .to_string(),
            answer(&json!({"location": "eastus"})),
            answer(&json!({"vmId": 7})),
            answer(&json!({"vmId": "x", "name": "evil\nhost"})),
            answer(&json!({"vmId": "x", "userData": "%%%"})),
            answer(&json!("compute")),
        ] {
            assert!(assemble(&bad, "http://169.254.169.254").is_err(), "{bad}");
        }
    }
}

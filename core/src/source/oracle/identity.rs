// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the `Oracle` datasource — the instance-level data the boot stage
//! needs, as cloud-init's `DataSourceOracle` reads it, with the same client as
//! the consistency wait. One request, `GET /opc/v2/instance/` (sent again while
//! it fails in a way waiting can fix, within the wait's budget); what its answer
//! means is pure ([`assemble`]).
//!
//! | key of the instance document | becomes |
//! |---|---|
//! | `id` | instance-id (required) |
//! | `hostname`, else `displayName` | local-hostname |
//! | `ociAdName`, else `availabilityDomain` | availability zone (cloud-init reads `ociAdName`) |
//! | `canonicalRegionName`, else `region` | region |
//! | `displayName` | meta-data `name` |
//! | `metadata.user_data` | user-data, base64-decoded (cloud-init's rule) |
//! | `metadata.ssh_authorized_keys` | meta-data `public_keys` |
//!
//! instance-data's v1 keys as cloud-init 25.1.4 gives them on OCI: `cloud_name`
//! and `platform` `oracle`, `subplatform` `metadata (<endpoint>/opc/v2/)`; `ds`
//! is the instance document, as cloud-init keeps its crawled metadata (its
//! `metadata.user_data` is sensitive, redacted in the world-readable file).

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::wait::retrying;
use super::{INSTANCE_PATH, Oracle, V2_ROOT};
use crate::constants::IMDS_MAX_USER_DATA_BYTES;
use crate::error::{Error, Problem, Result};
use crate::source::provider::http::Fetch;
use crate::source::provider::instance::{meta_data, text_field};
use crate::source::provider::retry::ClientSource;
use crate::source::provider::{Clock, SystemClock, WaitPolicy};
use crate::source::{Datasource, InstanceData, SourceKind};

/// The instance document's text: one `GET /opc/v2/instance/`, asked again within
/// `policy` while it fails in a way waiting can fix (a 404 included).
pub fn fetch_document(fetch: &dyn Fetch, policy: &WaitPolicy, clock: &dyn Clock) -> Result<String> {
    let bytes = retrying(policy, clock, INSTANCE_PATH, || {
        fetch.get_bytes(INSTANCE_PATH, IMDS_MAX_USER_DATA_BYTES)
    })?;
    String::from_utf8(bytes).map_err(|e| Error::Metadata {
        key: INSTANCE_PATH.to_owned(),
        problem: Problem::bad(
            format!("not UTF-8 (byte {})", e.utf8_error().valid_up_to()),
            "",
        ),
    })
}

fn key(name: &str) -> String {
    format!("{INSTANCE_PATH}{name}")
}

/// [`text_field`] of the instance document (`at`: where `obj` is in it).
fn field(obj: &Map<String, Value>, k: &str, at: &str) -> Result<Option<String>> {
    text_field(obj, k, &key(at))
}

/// Interprets the instance document; `endpoint` is the base URL that gave it.
pub fn assemble(document: &str, endpoint: &str) -> Result<InstanceData> {
    let root: Value = serde_json::from_str(document).map_err(|e| Error::Syntax {
        what: "OCI IMDS instance".to_owned(),
        message: e.to_string(),
    })?;
    let Value::Object(doc) = &root else {
        return Err(Error::Metadata {
            key: INSTANCE_PATH.to_owned(),
            problem: Problem::bad("not a JSON object", &root.to_string()),
        });
    };
    let instance_id = field(doc, "id", "")?.ok_or_else(|| Error::Metadata {
        key: key("id"),
        problem: Problem::missing(),
    })?;
    let display_name = field(doc, "displayName", "")?;
    let local_hostname = field(doc, "hostname", "")?.or_else(|| display_name.clone());
    let availability_zone = match field(doc, "ociAdName", "")? {
        Some(z) => Some(z),
        None => field(doc, "availabilityDomain", "")?,
    };
    let region = match field(doc, "canonicalRegionName", "")? {
        Some(r) => Some(r),
        None => field(doc, "region", "")?,
    };
    let (user_data, public_keys) = match doc.get("metadata") {
        None | Some(Value::Null) => (None, None),
        Some(Value::Object(m)) => {
            let user_data = field(m, "user_data", "metadata/")?
                .map(|b64| {
                    base64::engine::general_purpose::STANDARD
                        .decode(b64.as_bytes())
                        .map_err(|e| Error::Metadata {
                            key: key("metadata/user_data"),
                            problem: Problem::bad(format!("not base64 ({e})"), ""),
                        })
                })
                .transpose()?;
            (user_data, m.get("ssh_authorized_keys").cloned())
        }
        Some(v) => {
            return Err(Error::Metadata {
                key: key("metadata"),
                problem: Problem::bad("not a JSON object", &v.to_string()),
            });
        }
    };
    let mut md = meta_data(
        &instance_id,
        local_hostname.as_deref(),
        availability_zone.as_deref(),
        &[("name", display_name.as_deref())],
    );
    md.insert("launch-index".to_owned(), json!(0));
    if let Some(k) = public_keys {
        md.insert("public_keys".to_owned(), k);
    }
    Ok(InstanceData {
        datasource: SourceKind::Oracle,
        instance_id,
        local_hostname,
        cloud_name: "oracle".to_owned(),
        platform: "oracle".to_owned(),
        subplatform: format!("metadata ({endpoint}{V2_ROOT}/)"),
        region,
        availability_zone,
        meta_data: md,
        user_data,
        vendor_data: None,
        network_config: None,
        ds: root,
    })
}

/// The `Oracle` datasource: a metadata client and the retry budget.
pub type OracleSource = ClientSource<Oracle>;

impl Datasource for OracleSource {
    fn kind(&self) -> SourceKind {
        SourceKind::Oracle
    }

    fn fetch(&self) -> Result<InstanceData> {
        let doc = fetch_document(&self.client, &self.policy, &SystemClock)?;
        assemble(&doc, self.client.endpoint())
    }

    /// One request, the instance document, whose `id` is compared.
    fn check_instance_id(&self, cached: &InstanceData) -> Result<bool> {
        let doc = fetch_document(&self.client, &self.policy, &SystemClock)?;
        Ok(assemble(&doc, self.client.endpoint())?.instance_id == cached.instance_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// cloud-init's recorded `/opc/v2/instance/` answer's shape.
    const DOC: &str = r#"{
  "availabilityDomain" : "qIZq:PHX-AD-1",
  "faultDomain" : "FAULT-DOMAIN-2",
  "compartmentId" : "ocid1.tenancy.oc1..aaaa",
  "displayName" : "instance-20200320-1400",
  "hostname" : "instance-20200320-1400",
  "id" : "ocid1.instance.oc1.phx.anyhqljt",
  "image" : "ocid1.image.oc1.phx.aaaa",
  "metadata" : {
    "ssh_authorized_keys" : "ssh-rsa AAAAB3Nza truncated",
    "user_data" : "IyEvYmluL3NoCnRvdWNoIC90bXAvZm9v"
  },
  "region" : "phx",
  "canonicalRegionName" : "us-phoenix-1",
  "ociAdName" : "phx-ad-3",
  "shape" : "VM.Standard2.1",
  "state" : "Running"
}"#;

    #[test]
    fn the_instance_document_as_cloud_init_reads_it() {
        let d = assemble(DOC, "http://169.254.169.254").unwrap();
        assert_eq!(d.datasource, SourceKind::Oracle);
        assert_eq!(d.instance_id, "ocid1.instance.oc1.phx.anyhqljt");
        assert_eq!(d.local_hostname.as_deref(), Some("instance-20200320-1400"));
        assert_eq!(d.cloud_name, "oracle");
        assert_eq!(d.platform, "oracle");
        assert_eq!(d.subplatform, "metadata (http://169.254.169.254/opc/v2/)");
        assert_eq!(d.availability_zone.as_deref(), Some("phx-ad-3"));
        assert_eq!(d.region.as_deref(), Some("us-phoenix-1"));
        assert_eq!(
            d.user_data.as_deref(),
            Some(&b"#!/bin/sh\ntouch /tmp/foo"[..])
        );
        assert_eq!(d.meta_data["name"], "instance-20200320-1400");
        assert_eq!(d.meta_data["launch-index"], 0);
        assert_eq!(d.meta_data["public_keys"], "ssh-rsa AAAAB3Nza truncated");
        assert_eq!(d.ds["shape"], "VM.Standard2.1");
        assert!(
            d.sensitive_keys()
                .contains(&"ds/metadata/user_data".to_owned()),
            "{:?}",
            d.sensitive_keys()
        );
    }

    #[test]
    fn fallbacks_and_bad_documents() {
        let d = assemble(
            r#"{"id":"ocid1.instance.x","displayName":"web-1","availabilityDomain":"AD-1","region":"iad"}"#,
            "http://[fd00:c1::a9fe:a9fe]",
        )
        .unwrap();
        assert_eq!(d.local_hostname.as_deref(), Some("web-1"));
        assert_eq!(d.availability_zone.as_deref(), Some("AD-1"));
        assert_eq!(d.region.as_deref(), Some("iad"));
        assert_eq!(d.user_data, None);
        assert_eq!(
            d.subplatform,
            "metadata (http://[fd00:c1::a9fe:a9fe]/opc/v2/)"
        );
        for (bad, named) in [
            ("{}", "/opc/v2/instance/id"),
            (r#"{"id": "  "}"#, "/opc/v2/instance/id"),
            (r#"{"id": 5}"#, "/opc/v2/instance/id"),
            (r#"{"id": "a\u0000b"}"#, "control character"),
            ("[]", "not a JSON object"),
            ("<html>", "OCI IMDS instance"),
            (r#"{"id":"x","metadata":[]}"#, "metadata"),
            (r#"{"id":"x","metadata":{"user_data":"!!"}}"#, "user_data"),
            (r#"{"id":"x","hostname":7}"#, "hostname"),
        ] {
            let e = assemble(bad, "http://169.254.169.254")
                .unwrap_err()
                .to_string();
            assert!(e.contains(named), "{bad}: {e}");
        }
    }
}

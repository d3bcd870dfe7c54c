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
use serde::Deserialize;
use serde_json::{Value, json};

use super::wait::retrying;
use super::{INSTANCE_PATH, Oracle, V2_ROOT};
use crate::constants::IMDS_MAX_USER_DATA_BYTES;
use crate::error::{Error, Problem, Result};
use crate::source::provider::doc;
use crate::source::provider::http::Fetch;
use crate::source::provider::instance::meta_data;
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

/// The keys of the instance document read (see the module docs' table).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InstanceDoc {
    #[serde(deserialize_with = "doc::required_text")]
    id: String,
    #[serde(default, deserialize_with = "doc::text")]
    display_name: Option<String>,
    #[serde(default, deserialize_with = "doc::text")]
    hostname: Option<String>,
    #[serde(default, deserialize_with = "doc::text")]
    oci_ad_name: Option<String>,
    #[serde(default, deserialize_with = "doc::text")]
    availability_domain: Option<String>,
    #[serde(default, deserialize_with = "doc::text")]
    canonical_region_name: Option<String>,
    #[serde(default, deserialize_with = "doc::text")]
    region: Option<String>,
    /// `null` is none.
    metadata: Option<Metadata>,
}

/// The keys of the instance document's `metadata` read.
#[derive(Deserialize)]
struct Metadata {
    /// Base64.
    #[serde(default, deserialize_with = "doc::text")]
    user_data: Option<String>,
    /// Copied to meta-data as it is, whatever its type.
    #[serde(default, deserialize_with = "doc::kept")]
    ssh_authorized_keys: Option<Value>,
}

/// The document's key path, for errors: [`INSTANCE_PATH`] without its `/`.
fn root() -> &'static str {
    INSTANCE_PATH.trim_end_matches('/')
}

/// Interprets the instance document; `endpoint` is the base URL that gave it.
pub fn assemble(document: &str, endpoint: &str) -> Result<InstanceData> {
    // As much as `fetch_document` reads: the document carries the user-data.
    let (doc, root_keys): (InstanceDoc, _) = doc::read_object(
        document,
        IMDS_MAX_USER_DATA_BYTES,
        "OCI IMDS instance",
        root(),
    )?;
    let (user_data, public_keys) = match doc.metadata {
        None => (None, None),
        Some(m) => {
            let user_data = m
                .user_data
                .map(|b64| {
                    base64::engine::general_purpose::STANDARD
                        .decode(b64.as_bytes())
                        .map_err(|e| {
                            let key = format!("{}/metadata/user_data", root());
                            // Not shown: user-data is sensitive.
                            doc::bad(key, format!("not base64 ({e})"), "")
                        })
                })
                .transpose()?;
            (user_data, m.ssh_authorized_keys)
        }
    };
    let local_hostname = doc.hostname.or_else(|| doc.display_name.clone());
    let availability_zone = doc.oci_ad_name.or(doc.availability_domain);
    let mut md = meta_data(
        &doc.id,
        local_hostname.as_deref(),
        availability_zone.as_deref(),
        &[("name", doc.display_name.as_deref())],
    );
    md.insert("launch-index".to_owned(), json!(0));
    if let Some(k) = public_keys {
        md.insert("public_keys".to_owned(), k);
    }
    Ok(InstanceData {
        local_hostname,
        region: doc.canonical_region_name.or(doc.region),
        availability_zone,
        meta_data: md,
        user_data,
        ds: Value::Object(root_keys),
        ..InstanceData::new(
            SourceKind::Oracle,
            doc.id,
            "oracle",
            format!("metadata ({endpoint}{V2_ROOT}/)"),
        )
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
        for (bad, want) in [
            ("{}", "metadata /opc/v2/instance/id: missing"),
            (r#"{"id": "  "}"#, "metadata /opc/v2/instance/id: empty"),
            (r#"{"id": null}"#, "metadata /opc/v2/instance/id: empty"),
            // A key read of the wrong type.
            (
                r#"{"id": 5}"#,
                "metadata /opc/v2/instance/id: not a string (got \"5\")",
            ),
            (
                r#"{"id":"x","hostname":7}"#,
                "metadata /opc/v2/instance/hostname: not a string (got \"7\")",
            ),
            (
                r#"{"id":"x","metadata":[]}"#,
                "metadata /opc/v2/instance/metadata: not a JSON object (got \"[]\")",
            ),
            (
                r#"{"id":"x","metadata":{"user_data":{}}}"#,
                "metadata /opc/v2/instance/metadata/user_data: not a string",
            ),
            // A value that does not parse.
            (
                r#"{"id": "a\u0000b"}"#,
                "metadata /opc/v2/instance/id: holds a control character",
            ),
            (
                r#"{"id":"x","metadata":{"user_data":"!!"}}"#,
                "metadata /opc/v2/instance/metadata/user_data: not base64",
            ),
            ("[]", "metadata /opc/v2/instance: not a JSON object"),
            ("<html>", "OCI IMDS instance: expected value"),
        ] {
            let e = assemble(bad, "http://169.254.169.254")
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(want), "{bad}: {e}");
        }
    }

    #[test]
    fn bad_user_data_is_not_shown() {
        let e = assemble(r#"{"id":"x","metadata":{"user_data":"c2VjcmV0%"}}"#, "e")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("user_data: not base64") && !e.contains("c2VjcmV0"),
            "{e}"
        );
    }

    #[test]
    fn keys_not_read_may_be_anything_and_ssh_keys_are_copied_as_they_are() {
        let d = assemble(
            r#"{"id":"x","hostname":null,"displayName":"","timeCreated":1584,
                "agentConfig":{"pluginsConfig":[{"name":"a"}]},
                "metadata":{"ssh_authorized_keys":null,"user_data":null,"extra":[1]}}"#,
            "e",
        )
        .unwrap();
        assert_eq!(d.local_hostname, None);
        assert_eq!(d.user_data, None);
        assert_eq!(d.meta_data["public_keys"], Value::Null);
        assert_eq!(d.ds["agentConfig"]["pluginsConfig"][0]["name"], "a");
        let d = assemble(
            r#"{"id":"x","metadata":{"ssh_authorized_keys":["k"]}}"#,
            "e",
        )
        .unwrap();
        assert_eq!(d.meta_data["public_keys"], json!(["k"]));
        assert!(assemble(r#"{"id":"x","metadata":null}"#, "e").is_ok());
    }
}

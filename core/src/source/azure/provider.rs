// SPDX-License-Identifier: Apache-2.0
//! Performs IO: Azure as a [`Provider`]. Requests are never bound to the event's
//! NIC: IMDS answers only the primary NIC's primary address, which is where the
//! main table sends them. The boot stage's datasource is [`AzureSource`].

use std::path::{Path, PathBuf};

use super::identity::AzureSource;
use super::wait::wait_for_nic;
use super::{Azure, ENDPOINT, nic};
use crate::error::Result;
use crate::instance_data::RegionId;
use crate::source::provider::wait::{Clock, Outcome, WaitPolicy};
use crate::source::provider::{
    AddressKeys, Cloud, CloudSource, EndpointKey, Identity, NicEvent, Provider, ProviderKind,
};
use crate::source::{Datasource, SourceKind};

/// The Azure provider: the base URL every client it makes asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AzureProvider {
    root: PathBuf,
    endpoint: Option<String>,
}

impl AzureProvider {
    /// A provider asking `endpoint` (`None`: `http://169.254.169.254`), pacing
    /// its requests through `<root>/run/leasehook/`. Fails on an endpoint that is
    /// not an `http://` IP literal.
    pub fn try_new(root: impl AsRef<Path>, endpoint: Option<&str>) -> Result<Self> {
        let p = Self {
            root: root.as_ref().to_owned(),
            endpoint: endpoint.map(str::to_owned),
        };
        p.client()?;
        Ok(p)
    }

    /// A client with the provider's settings.
    pub fn client(&self) -> Result<Azure> {
        let azure = Azure::new().with_pace_root(&self.root);
        match &self.endpoint {
            None => Ok(azure),
            Some(e) => azure.with_endpoint(e),
        }
    }
}

impl Provider for AzureProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::of(&CLOUD)
    }

    fn wait_for_nic(&self, nic: &NicEvent, policy: &WaitPolicy, clock: &dyn Clock) -> Outcome {
        match self.client() {
            Ok(azure) => wait_for_nic(
                &azure.with_deadline(std::time::Instant::now() + policy.budget),
                nic,
                policy,
                clock,
            ),
            Err(e) => Outcome::Failed(e),
        }
    }
}

impl Identity for AzureProvider {
    fn datasource(&self, policy: WaitPolicy) -> Result<Box<dyn Datasource>> {
        let client = self
            .client()?
            .with_deadline(std::time::Instant::now() + policy.budget);
        Ok(Box::new(AzureSource::new(client).with_policy(policy)))
    }
}

/// Azure for the hooks.
pub static CLOUD: Cloud = Cloud {
    name: "azure",
    kinds: &[SourceKind::Azure],
    check: super::detect::check,
    seeds: super::detect::seeds,
    platform: |_| None,
    endpoint: Some(EndpointKey {
        key: "azure.endpoint",
        env: "LEASEHOOK_AZURE_ENDPOINT",
        help: "the Azure IMDS base URL, an http:// IP literal (default http://169.254.169.254)",
        default: ENDPOINT,
        check: |url| Ok(Azure::new().with_endpoint(url)?.endpoint().to_owned()),
    }),
    provider: |s| Ok(Box::new(AzureProvider::try_new(s.root, s.endpoint)?)),
    parse_saved: nic::parse_saved,
    live: None,
    address_keys: AddressKeys {
        ipv4: Some("ipv4.ipAddress"),
        ipv6: Some("ipv6.ipAddress"),
        ipv4_prefix: None,
        ipv6_prefix: None,
    },
};

/// Azure's datasource for the boot stage.
pub static SOURCE: CloudSource = CloudSource {
    cloud: &CLOUD,
    local_stage: |_| Some("IMDS needs the network"),
    datasource: |s, _, policy| AzureProvider::try_new(s.root, s.endpoint)?.datasource(policy),
    region_ids: &[RegionId {
        cloud: "azure",
        prefix: "china",
        id: "azure-china",
    }],
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceKind;
    use crate::source::provider::ProviderChoice;

    #[test]
    fn auto_resolves_to_azure_on_an_azure_verdict_and_the_name_parses() {
        assert_eq!(
            ProviderChoice::Auto.resolve(Some(SourceKind::Azure)),
            ProviderKind::of(&crate::source::azure::CLOUD)
        );
        assert_eq!(
            ProviderChoice::Auto.resolve(None),
            ProviderKind::of(&crate::source::ec2::CLOUD)
        );
        assert_eq!(
            "azure".parse::<ProviderChoice>().unwrap(),
            ProviderChoice::Named(ProviderKind::of(&crate::source::azure::CLOUD))
        );
        assert_eq!(
            ProviderKind::of(&crate::source::azure::CLOUD).to_string(),
            "azure"
        );
    }

    #[test]
    fn an_endpoint_that_is_not_an_ip_literal_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let e = AzureProvider::try_new(root.path(), Some("http://metadata.azure.internal"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("azure.endpoint"), "{e}");
        let p = AzureProvider::try_new(root.path(), Some("http://127.0.0.1:1")).unwrap();
        assert_eq!(p.kind(), ProviderKind::of(&crate::source::azure::CLOUD));
        assert_eq!(p.client().unwrap().endpoint(), "http://127.0.0.1:1");
        assert_eq!(
            AzureProvider::try_new(root.path(), None)
                .unwrap()
                .client()
                .unwrap()
                .endpoint(),
            crate::source::azure::ENDPOINT
        );
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: Google Compute Engine as a [`Provider`]: one [`Gce`] client per
//! NIC wait (the metadata server answers from any NIC: requests are not bound),
//! and the boot stage's datasource, [`GceSource`].

use super::identity::GceSource;
use super::nic::Answer;
use super::{GCE_ENDPOINT, Gce, nic};
use crate::error::Result;
use crate::source::provider::session::Document;
use crate::source::provider::{
    AddressKeys, Clock, Cloud, CloudSource, EndpointKey, Identity, NicEvent, Outcome, Provider,
    ProviderKind, WaitPolicy,
};
use crate::source::{Datasource, SourceKind};

/// The GCE provider: the base URL every client it makes asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GceProvider {
    endpoint: String,
}

impl GceProvider {
    /// A provider asking `endpoint` (`None`: 169.254.169.254). Fails on an endpoint
    /// that is not an `http://` IP literal.
    pub fn try_new(endpoint: Option<&str>) -> Result<Self> {
        let p = Self {
            endpoint: endpoint.unwrap_or(GCE_ENDPOINT).to_owned(),
        };
        p.client()?;
        Ok(p)
    }

    /// A client with the provider's settings.
    pub fn client(&self) -> Result<Gce> {
        Gce::new().with_endpoint(&self.endpoint)
    }
}

impl Provider for GceProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::of(&CLOUD)
    }

    fn wait_for_nic(&self, nic: &NicEvent, policy: &WaitPolicy, clock: &dyn Clock) -> Outcome {
        match self.client() {
            Ok(gce) => Answer::wait(&gce, nic, policy, clock),
            Err(e) => Outcome::Failed(e),
        }
    }
}

impl Identity for GceProvider {
    fn datasource(&self, policy: WaitPolicy) -> Result<Box<dyn Datasource>> {
        Ok(Box::new(GceSource::new(self.client()?).with_policy(policy)))
    }
}

/// GCE for the hooks; `leasehook watch` follows its NIC list live.
pub static CLOUD: Cloud = Cloud {
    name: "gce",
    kinds: &[SourceKind::Gce],
    check: super::detect::check,
    seeds: |_| Vec::new(),
    platform: |_| None,
    endpoint: Some(EndpointKey {
        key: "gce.endpoint",
        env: "LEASEHOOK_GCE_ENDPOINT",
        help: "the Google Compute Engine metadata server's base URL, an http:// IP literal (default http://169.254.169.254)",
        default: GCE_ENDPOINT,
        check: |url| Ok(Gce::new().with_endpoint(url)?.endpoint().to_owned()),
    }),
    provider: |s| Ok(Box::new(GceProvider::try_new(s.endpoint)?)),
    parse_saved: |text| nic::parse_interfaces(text).map(|nics| nic::network(&nics)),
    live: Some(super::follow::LIVE),
    address_keys: AddressKeys {
        ipv4: Some("ip"),
        ipv6: Some("ipv6s"),
        ipv4_prefix: Some("ip-aliases"),
        ipv6_prefix: Some("ipv6"),
    },
};

/// GCE's datasource for the boot stage.
pub static SOURCE: CloudSource = CloudSource {
    cloud: &CLOUD,
    local_stage: |_| Some("the metadata server needs the network"),
    datasource: |s, _, policy| GceProvider::try_new(s.endpoint)?.datasource(policy),
    region_ids: &[],
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceKind;
    use crate::source::provider::ProviderChoice;

    #[test]
    fn auto_resolves_to_gce_on_a_gce_verdict_and_the_name_parses() {
        assert_eq!(
            ProviderChoice::Auto.resolve(Some(SourceKind::Gce)),
            ProviderKind::of(&crate::source::gce::CLOUD)
        );
        assert_eq!(
            "gce".parse::<ProviderChoice>().unwrap(),
            ProviderChoice::Named(ProviderKind::of(&crate::source::gce::CLOUD))
        );
        assert_eq!(
            ProviderKind::of(&crate::source::gce::CLOUD).to_string(),
            "gce"
        );
    }

    #[test]
    fn the_endpoint_is_checked_when_the_provider_is_built() {
        let e = GceProvider::try_new(Some("http://metadata.google.internal"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("gce.endpoint"), "{e}");
        let p = GceProvider::try_new(None).unwrap();
        assert_eq!(p.kind(), ProviderKind::of(&crate::source::gce::CLOUD));
        assert_eq!(p.client().unwrap().endpoint(), GCE_ENDPOINT);
    }
}

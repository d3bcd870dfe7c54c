// SPDX-License-Identifier: Apache-2.0
//! Performs IO: Google Compute Engine as a [`Provider`]: one [`Gce`] client per
//! NIC wait (the metadata server answers from any NIC: requests are not bound),
//! and the boot stage's datasource, [`GceSource`].

use super::identity::GceSource;
use super::wait::wait_for_nic;
use super::{GCE_ENDPOINT, Gce};
use crate::error::Result;
use crate::source::Datasource;
use crate::source::provider::{
    Clock, Identity, NicEvent, Outcome, Provider, ProviderKind, WaitPolicy,
};

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
        ProviderKind::Gce
    }

    fn wait_for_nic(&self, nic: &NicEvent, policy: &WaitPolicy, clock: &dyn Clock) -> Outcome {
        match self.client() {
            Ok(gce) => wait_for_nic(&gce, nic, policy, clock),
            Err(e) => Outcome::Failed(e),
        }
    }
}

impl Identity for GceProvider {
    fn datasource(&self, policy: WaitPolicy) -> Result<Box<dyn Datasource>> {
        Ok(Box::new(GceSource::new(self.client()?).with_policy(policy)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceKind;
    use crate::source::provider::ProviderChoice;

    #[test]
    fn auto_resolves_to_gce_on_a_gce_verdict_and_the_name_parses() {
        assert_eq!(
            ProviderChoice::Auto.resolve(Some(SourceKind::Gce)),
            ProviderKind::Gce
        );
        assert_eq!(
            "gce".parse::<ProviderChoice>().unwrap(),
            ProviderChoice::Named(ProviderKind::Gce)
        );
        assert_eq!(ProviderKind::Gce.to_string(), "gce");
    }

    #[test]
    fn the_endpoint_is_checked_when_the_provider_is_built() {
        let e = GceProvider::try_new(Some("http://metadata.google.internal"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("gce.endpoint"), "{e}");
        let p = GceProvider::try_new(None).unwrap();
        assert_eq!(p.kind(), ProviderKind::Gce);
        assert_eq!(p.client().unwrap().endpoint(), GCE_ENDPOINT);
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: Oracle Cloud as a [`Provider`]: one [`Oracle`] client per
//! question (requests are never bound to the event's NIC: OCI answers through
//! the primary VNIC, where the main table sends them), the consistency wait for
//! a NIC that has DHCP (the primary), [`Provider::unleased`] for the secondary
//! VNICs that have none, and the boot stage's datasource, [`OracleSource`].

use super::identity::OracleSource;
use super::vnic::OciNetwork;
use super::wait::fetch_unleased;
use super::{ENDPOINT_KEY, ENDPOINTS, Oracle, check_endpoint, vnic};
use crate::error::Result;
use crate::source::provider::session::Document;
use crate::source::provider::{
    AddressKeys, Clock, Cloud, CloudSource, EndpointKey, Identity, NicEvent, Outcome, Provider,
    ProviderKind, Unleased, WaitPolicy,
};
use crate::source::{Datasource, SourceKind};

/// The OCI provider: the endpoint override every client it makes asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OracleProvider {
    endpoint: Option<String>,
}

impl OracleProvider {
    /// A provider asking `endpoint` (`None`: 169.254.169.254, then
    /// `[fd00:c1::a9fe:a9fe]`). Fails on an endpoint that is not an `http://` IP
    /// literal.
    pub fn try_new(endpoint: Option<&str>) -> Result<Self> {
        let p = Self {
            endpoint: endpoint.map(str::to_owned),
        };
        p.client()?;
        Ok(p)
    }

    /// A client with the provider's settings.
    pub fn client(&self) -> Result<Oracle> {
        match &self.endpoint {
            None => Ok(Oracle::new()),
            Some(e) => Oracle::new().with_endpoint(e),
        }
    }
}

impl Provider for OracleProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::of(&CLOUD)
    }

    fn wait_for_nic(&self, nic: &NicEvent, policy: &WaitPolicy, clock: &dyn Clock) -> Outcome {
        match self.client() {
            Ok(oci) => OciNetwork::wait(&oci, nic, policy, clock),
            Err(e) => Outcome::Failed(e),
        }
    }

    /// Every VNIC but the primary (OCI's DHCP serves the primary only), with the
    /// leases DHCP would have given: one `GET /opc/v2/vnics/`.
    fn unleased(&self, policy: &WaitPolicy, clock: &dyn Clock) -> Option<Result<Unleased>> {
        Some(
            self.client()
                .and_then(|oci| fetch_unleased(&oci, policy, clock)),
        )
    }
}

impl Identity for OracleProvider {
    fn datasource(&self, policy: WaitPolicy) -> Result<Box<dyn Datasource>> {
        Ok(Box::new(
            OracleSource::new(self.client()?).with_policy(policy),
        ))
    }
}

/// Oracle Cloud Infrastructure for the hooks.
pub static CLOUD: Cloud = Cloud {
    name: "oracle",
    kinds: &[SourceKind::Oracle],
    check: super::detect::check,
    seeds: |_| Vec::new(),
    platform: |_| None,
    endpoint: Some(EndpointKey {
        key: ENDPOINT_KEY,
        env: "LEASEHOOK_ORACLE_ENDPOINT",
        help: "the Oracle Cloud metadata base URL, an http:// IP literal, asked instead of both defaults (default http://169.254.169.254, then http://[fd00:c1::a9fe:a9fe])",
        default: ENDPOINTS[0],
        check: check_endpoint,
    }),
    provider: |s| Ok(Box::new(OracleProvider::try_new(s.endpoint)?)),
    parse_saved: vnic::parse_saved,
    live: None,
    address_keys: AddressKeys {
        ipv4: Some("privateIp"),
        ipv6: Some("ipv6Addresses"),
        ipv4_prefix: None,
        ipv6_prefix: None,
    },
};

/// Oracle Cloud's datasource for the boot stage.
pub static SOURCE: CloudSource = CloudSource {
    cloud: &CLOUD,
    local_stage: |_| Some("the OCI metadata service needs the network"),
    datasource: |s, _, policy| OracleProvider::try_new(s.endpoint)?.datasource(policy),
    region_ids: &[],
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceKind;
    use crate::source::provider::ProviderChoice;

    #[test]
    fn auto_resolves_to_oracle_on_an_oracle_verdict_and_the_name_parses() {
        assert_eq!(
            ProviderChoice::Auto.resolve(Some(SourceKind::Oracle)),
            ProviderKind::of(&crate::source::oracle::CLOUD)
        );
        assert_eq!(
            "oracle".parse::<ProviderChoice>().unwrap(),
            ProviderChoice::Named(ProviderKind::of(&crate::source::oracle::CLOUD))
        );
        assert_eq!(
            ProviderKind::of(&crate::source::oracle::CLOUD).to_string(),
            "oracle"
        );
    }

    #[test]
    fn the_endpoint_is_checked_when_the_provider_is_built() {
        let e = OracleProvider::try_new(Some("http://metadata.oraclecloud.com"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("oracle.endpoint"), "{e}");
        let p = OracleProvider::try_new(Some("http://127.0.0.1:1")).unwrap();
        assert_eq!(p.kind(), ProviderKind::of(&crate::source::oracle::CLOUD));
        assert_eq!(p.client().unwrap().endpoints(), ["http://127.0.0.1:1"]);
        assert_eq!(
            OracleProvider::try_new(None)
                .unwrap()
                .client()
                .unwrap()
                .endpoints()
                .len(),
            2
        );
    }

    #[test]
    fn unleased_is_asked_and_an_unreachable_service_is_an_error() {
        // Nothing listens on this port: the answer is an error (refresh then
        // changes nothing), never "no VNICs".
        let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", dead.local_addr().unwrap());
        drop(dead);
        let p = OracleProvider::try_new(Some(&url)).unwrap();
        let policy = WaitPolicy::default().with_budget(std::time::Duration::ZERO);
        let got = p.unleased(&policy, &crate::source::provider::SystemClock);
        assert!(matches!(got, Some(Err(_))), "{got:?}");
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: Alibaba Cloud ECS as a [`Provider`]: one [`Aliyun`] client per
//! NIC wait, bound to that NIC and its leased IPv4 address unless
//! `imds.bind_interface` is off (the service answers any address of the VPC, and
//! a NIC's own requests leave through it), its token shared through the on-disk
//! cache; the boot stage's datasource is [`AliyunSource`].

use std::path::{Path, PathBuf};

use super::identity::AliyunSource;
use super::wait::ECS_WAIT;
use super::{Aliyun, ENDPOINT_KEY, check_endpoint, nic};
use crate::error::Result;
use crate::source::provider::wait::{Clock, Outcome, WaitPolicy};
use crate::source::provider::{
    AddressKeys, Cloud, CloudSource, EndpointKey, Identity, NicEvent, Provider, ProviderKind,
};
use crate::source::{Datasource, SourceKind};

/// The ECS provider: the settings every client it makes is built with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliyunProvider {
    root: PathBuf,
    endpoint: Option<String>,
    bind_interface: bool,
}

impl AliyunProvider {
    /// A provider whose token cache lives under `root`, asking `endpoint` (`None`:
    /// `http://100.100.100.200`). Fails on an endpoint that is not an `http://`
    /// IP literal.
    pub fn try_new(root: impl AsRef<Path>, endpoint: Option<&str>) -> Result<Self> {
        let p = Self {
            root: root.as_ref().to_owned(),
            endpoint: endpoint.map(str::to_owned),
            bind_interface: false,
        };
        p.client()?;
        Ok(p)
    }

    /// Binds each NIC's requests to that NIC (config `imds.bind_interface`).
    #[must_use]
    pub fn with_bind_interface(mut self, on: bool) -> Self {
        self.bind_interface = on;
        self
    }

    /// A client with the provider's settings, bound to no interface.
    pub fn client(&self) -> Result<Aliyun> {
        let c = Aliyun::try_new(&self.root)?;
        match &self.endpoint {
            Some(e) => c.with_endpoint(e),
            None => Ok(c),
        }
    }

    fn nic_client(&self, nic: &NicEvent) -> Result<Aliyun> {
        let c = self.client()?;
        if !self.bind_interface {
            return Ok(c);
        }
        let source = nic
            .leases()
            .iter()
            .map(|l| l.address)
            .find(std::net::IpAddr::is_ipv4);
        Ok(c.with_interface(nic.interface().as_str(), source))
    }
}

impl Provider for AliyunProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::of(&CLOUD)
    }

    fn wait_for_nic(&self, nic: &NicEvent, policy: &WaitPolicy, clock: &dyn Clock) -> Outcome {
        match self.nic_client(nic) {
            Ok(c) => ECS_WAIT.wait(&c, nic, policy, clock),
            Err(e) => Outcome::Failed(e),
        }
    }
}

impl Identity for AliyunProvider {
    fn datasource(&self, policy: WaitPolicy) -> Result<Box<dyn Datasource>> {
        Ok(Box::new(
            AliyunSource::new(self.client()?).with_policy(policy),
        ))
    }
}

/// Alibaba Cloud ECS for the hooks (requests bound to the NIC, like EC2's).
pub static CLOUD: Cloud = Cloud {
    name: "aliyun",
    kinds: &[SourceKind::AliYun],
    check: super::detect::check,
    seeds: super::detect::seeds,
    platform: |_| None,
    endpoint: Some(EndpointKey {
        key: ENDPOINT_KEY,
        env: "LEASEHOOK_ALIYUN_ENDPOINT",
        help: "Alibaba Cloud ECS metadata base URL, an http:// IP literal (default http://100.100.100.200)",
        default: super::ENDPOINTS[0],
        check: check_endpoint,
    }),
    provider: |s| {
        Ok(Box::new(
            AliyunProvider::try_new(s.root, s.endpoint)?.with_bind_interface(s.bind_interface),
        ))
    },
    parse_saved: nic::parse_saved,
    live: None,
    address_keys: AddressKeys {
        ipv4: Some("private-ipv4s"),
        ipv6: Some("ipv6s"),
        ipv4_prefix: None,
        ipv6_prefix: Some("ipv6-prefixes"),
    },
};

/// Alibaba Cloud's datasource for the boot stage.
pub static SOURCE: CloudSource = CloudSource {
    cloud: &CLOUD,
    local_stage: |_| Some("the ECS metadata service needs the network"),
    datasource: |s, _, policy| AliyunProvider::try_new(s.root, s.endpoint)?.datasource(policy),
    region_ids: &[],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_checked_when_the_provider_is_built() {
        let root = tempfile::tempdir().unwrap();
        let e = AliyunProvider::try_new(root.path(), Some("http://metadata.aliyun"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("aliyun.endpoint"), "{e}");
        let p = AliyunProvider::try_new(root.path(), Some("http://127.0.0.1:1")).unwrap();
        assert_eq!(p.kind(), ProviderKind::of(&crate::source::aliyun::CLOUD));
        assert_eq!(p.client().unwrap().endpoint(), "http://127.0.0.1:1");
        let d = AliyunProvider::try_new(root.path(), None).unwrap();
        assert_eq!(d.client().unwrap().endpoint(), "http://100.100.100.200");
        assert_eq!(
            d.datasource(WaitPolicy::default()).unwrap().kind(),
            crate::source::SourceKind::AliYun
        );
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: EC2 as a [`Provider`]: one [`Ec2`] client per NIC wait, bound to
//! that NIC and its leased IPv4 address (unless `imds.bind_interface` is off: IMDS
//! throttles per ENI), its token shared through the on-disk cache; the boot
//! stage's datasource is [`Ec2Source`].

use std::path::{Path, PathBuf};

use super::identity::Ec2Source;
use super::wait::{Clock, EC2_WAIT, Outcome, WaitPolicy};
use super::{Ec2, NicEvent};
use crate::error::Result;
use crate::instance_data::RegionId;
use crate::source::provider::{AddressKeys, Cloud, CloudSource, Identity, Provider, ProviderKind};
use crate::source::{Datasource, SourceKind};

/// The EC2 provider: the settings every client it makes is built with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ec2Provider {
    root: PathBuf,
    endpoints: Vec<String>,
    imdsv1_fallback: bool,
    bind_interface: bool,
    cloud_name: Option<String>,
}

impl Ec2Provider {
    /// A provider whose token cache lives under `root`, asking `endpoints` (empty:
    /// the defaults). Fails on an endpoint that is not an `http://` IP literal.
    pub fn try_new(root: impl AsRef<Path>, endpoints: &[String]) -> Result<Self> {
        let p = Self {
            root: root.as_ref().to_owned(),
            endpoints: endpoints.to_vec(),
            imdsv1_fallback: false,
            bind_interface: false,
            cloud_name: None,
        };
        p.client()?;
        Ok(p)
    }

    /// Allows IMDSv1 when the token is refused (config `imdsv1_fallback`).
    #[must_use]
    pub fn with_imdsv1_fallback(mut self, on: bool) -> Self {
        self.imdsv1_fallback = on;
        self
    }

    /// Binds each NIC's requests to that NIC (config `imds.bind_interface`).
    #[must_use]
    pub fn with_bind_interface(mut self, on: bool) -> Self {
        self.bind_interface = on;
        self
    }

    /// The cloud name the datasource reports (`aws`, or what DMI says).
    #[must_use]
    pub fn with_cloud_name(mut self, name: &str) -> Self {
        self.cloud_name = Some(name.to_owned());
        self
    }

    /// A client with the provider's settings, bound to no interface.
    pub fn client(&self) -> Result<Ec2> {
        let ec2 = Ec2::try_new(&self.root)?.with_imdsv1_fallback(self.imdsv1_fallback);
        if self.endpoints.is_empty() {
            Ok(ec2)
        } else {
            ec2.with_endpoints(self.endpoints.iter())
        }
    }

    /// The client for one NIC's requests: bound to that NIC and its IPv4 lease
    /// address (unless binding is off).
    fn nic_client(&self, nic: &NicEvent) -> Result<Ec2> {
        let ec2 = self.client()?;
        if !self.bind_interface {
            return Ok(ec2);
        }
        let source = nic
            .leases()
            .iter()
            .map(|l| l.address)
            .find(std::net::IpAddr::is_ipv4);
        Ok(ec2.with_interface(nic.interface().as_str(), source))
    }
}

impl Provider for Ec2Provider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::of(&CLOUD)
    }

    fn wait_for_nic(&self, nic: &NicEvent, policy: &WaitPolicy, clock: &dyn Clock) -> Outcome {
        match self.nic_client(nic) {
            Ok(ec2) => EC2_WAIT.wait(&ec2, nic, policy, clock),
            Err(e) => Outcome::Failed(e),
        }
    }
}

impl Identity for Ec2Provider {
    fn datasource(&self, policy: WaitPolicy) -> Result<Box<dyn Datasource>> {
        let mut source = Ec2Source::new(self.client()?).with_policy(policy);
        if let Some(name) = &self.cloud_name {
            source = source.with_cloud_name(name);
        }
        Ok(Box::new(source))
    }
}

/// EC2 for the hooks: IMDS at `imds.endpoints`, no key of its own. The first
/// row: `provider: auto` falls back to it.
pub static CLOUD: Cloud = Cloud {
    name: "ec2",
    kinds: &[SourceKind::Ec2],
    check: super::detect::check,
    seeds: |_| Vec::new(),
    platform: |s| super::detect::ec2_platform(s).map(|(p, _)| p.cloud_name()),
    endpoint: None,
    provider: |s| {
        Ok(Box::new(
            Ec2Provider::try_new(s.root, s.imds_endpoints)?
                .with_imdsv1_fallback(s.imdsv1_fallback)
                .with_bind_interface(s.bind_interface),
        ))
    },
    parse_saved: crate::metadata::parse_json,
    live: None,
    address_keys: AddressKeys {
        ipv4: Some("local-ipv4s"),
        ipv6: Some("ipv6s"),
        ipv4_prefix: Some("ipv4-prefix"),
        ipv6_prefix: Some("ipv6-prefix"),
    },
};

/// EC2's datasource for the boot stage.
pub static SOURCE: CloudSource = CloudSource {
    cloud: &CLOUD,
    local_stage: |_| Some("IMDS needs the network"),
    datasource: |s, _, policy| {
        Ec2Provider::try_new(s.root, s.imds_endpoints)?
            .with_imdsv1_fallback(s.imdsv1_fallback)
            .with_cloud_name(s.cloud_name)
            .datasource(policy)
    },
    region_ids: &[
        RegionId {
            cloud: "aws",
            prefix: "cn-",
            id: "aws-china",
        },
        RegionId {
            cloud: "aws",
            prefix: "us-gov-",
            id: "aws-gov",
        },
    ],
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceKind;
    use crate::source::provider::ProviderChoice;

    #[test]
    fn auto_resolves_to_ec2_whatever_the_boot_stage_recorded_until_another_exists() {
        for recorded in [
            None,
            Some(SourceKind::Ec2),
            Some(SourceKind::Lxd),
            Some(SourceKind::NoCloud),
            Some(SourceKind::None),
        ] {
            assert_eq!(
                ProviderChoice::Auto.resolve(recorded),
                ProviderKind::of(&crate::source::ec2::CLOUD)
            );
        }
        assert_eq!(
            ProviderChoice::Named(ProviderKind::of(&crate::source::ec2::CLOUD))
                .resolve(Some(SourceKind::Lxd)),
            ProviderKind::of(&crate::source::ec2::CLOUD)
        );
    }

    #[test]
    fn an_endpoint_that_is_not_an_ip_literal_is_refused_when_the_provider_is_built() {
        let root = tempfile::tempdir().unwrap();
        let e = Ec2Provider::try_new(root.path(), &["http://metadata.example".to_owned()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("metadata.example"), "{e}");
        let p = Ec2Provider::try_new(root.path(), &["http://127.0.0.1:1".to_owned()]).unwrap();
        assert_eq!(p.kind(), ProviderKind::of(&crate::source::ec2::CLOUD));
        assert_eq!(p.client().unwrap().endpoints(), ["http://127.0.0.1:1"]);
    }
}

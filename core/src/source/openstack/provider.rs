// SPDX-License-Identifier: Apache-2.0
//! Performs IO: `OpenStack` as a [`Provider`]. With a config drive below the root
//! ([`ConfigDrive::find`]) every answer comes from it and the metadata service is
//! never asked; else one [`OpenStack`] client per wait (the service answers from
//! any NIC: requests are not bound). The boot stage's datasources are
//! [`OpenStackSource`] and [`ConfigDriveSource`].

use std::path::{Path, PathBuf};

use super::configdrive::ConfigDrive;
use super::identity::{self, ConfigDriveSource, OpenStackSource};
use super::nic::{self, parse_network_data};
use super::wait::{ServiceAnswer, from_drive, log_skipped};
use super::{NETWORK_DATA_PATH, OPENSTACK_ENDPOINT, OPENSTACK_ROOT, OpenStack};
use crate::error::{Error, Problem, Result};
use crate::source::provider::retry::Retrying;
use crate::source::provider::session::Document;
use crate::source::provider::{
    AddressKeys, Clock, Cloud, CloudSource, EndpointKey, Identity, NicEvent, Outcome, Provider,
    ProviderKind, Unleased, WaitPolicy,
};
use crate::source::{Datasource, SourceKind};

/// The `OpenStack` provider: the root a config drive is looked for below, and the
/// base URL every client it makes asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenStackProvider {
    root: PathBuf,
    endpoint: String,
}

/// The drive's `network_data.json` path.
fn drive_path() -> String {
    format!(
        "{}{NETWORK_DATA_PATH}",
        OPENSTACK_ROOT.trim_start_matches('/')
    )
}

/// The drive's `network_data.json`, as text.
fn read_drive_network_data(drive: &ConfigDrive) -> Result<Option<String>> {
    let path = drive_path();
    let got = drive.read(&[path.as_str()])?.into_iter().next().flatten();
    got.map(|b| {
        String::from_utf8(b).map_err(|_| Error::Metadata {
            key: "config drive network_data.json".to_owned(),
            problem: Problem::bad("not UTF-8", ""),
        })
    })
    .transpose()
}

impl OpenStackProvider {
    /// A provider asking `endpoint` (`None`: 169.254.169.254), or a config drive
    /// below `root` when there is one. Fails on an endpoint that is not an
    /// `http://` IP literal.
    pub fn try_new(root: impl AsRef<Path>, endpoint: Option<&str>) -> Result<Self> {
        let p = Self {
            root: root.as_ref().to_owned(),
            endpoint: endpoint.unwrap_or(OPENSTACK_ENDPOINT).to_owned(),
        };
        p.client()?;
        Ok(p)
    }

    /// A client with the provider's settings.
    pub fn client(&self) -> Result<OpenStack> {
        OpenStack::new().with_endpoint(&self.endpoint)
    }

    /// The config drive below the root, if any (ISO 9660 or vfat; see
    /// [`ConfigDrive::find`]), each step of reading it bounded by `budget`.
    pub fn drive(&self, budget: std::time::Duration) -> Option<ConfigDrive> {
        ConfigDrive::find(&self.root, budget)
    }

    /// The datasource of `kind`: [`SourceKind::ConfigDrive`] reads the drive (an
    /// error when there is none), anything else the metadata service.
    pub fn datasource_of(
        &self,
        kind: SourceKind,
        policy: WaitPolicy,
    ) -> Result<Box<dyn Datasource>> {
        if kind == SourceKind::ConfigDrive {
            let drive = self.drive(policy.budget).ok_or_else(|| Error::Io {
                path: format!("{:?}", self.root.join(super::configdrive::BY_LABEL)),
                message: "no config drive (config-2, iso9660 or vfat) below the root".to_owned(),
            })?;
            return Ok(Box::new(ConfigDriveSource::new(drive)));
        }
        Ok(Box::new(
            OpenStackSource::new(self.client()?).with_policy(policy),
        ))
    }
}

impl Provider for OpenStackProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::of(&CLOUD)
    }

    fn wait_for_nic(&self, nic: &NicEvent, policy: &WaitPolicy, clock: &dyn Clock) -> Outcome {
        if let Some(drive) = self.drive(policy.budget) {
            log::debug!(
                "{}: reading network_data.json from the config drive {}",
                nic.interface(),
                drive.device().display()
            );
            return from_drive(read_drive_network_data(&drive), nic);
        }
        match self.client() {
            Ok(c) => ServiceAnswer::wait(&c, nic, policy, clock),
            Err(e) => Outcome::Failed(e),
        }
    }

    /// The links on static networks (`ipv4`, `ipv6`: no DHCP), from one read of
    /// `network_data.json` (the drive's, else one request retried within
    /// `policy`).
    fn unleased(&self, policy: &WaitPolicy, clock: &dyn Clock) -> Option<Result<Unleased>> {
        let body = match self.drive(policy.budget) {
            Some(drive) => read_drive_network_data(&drive),
            None => self.client().and_then(|c| {
                Retrying::new(policy, clock, "OpenStack")
                    .get(&c, &identity::path(NETWORK_DATA_PATH))
            }),
        };
        Some(body.and_then(|b| {
            let b = b.ok_or_else(|| Error::Metadata {
                key: format!("{OPENSTACK_ROOT}{NETWORK_DATA_PATH}"),
                problem: Problem::missing(),
            })?;
            let data = parse_network_data(&b)?;
            log_skipped(&nic::Answer::Body(b));
            Ok(Unleased {
                nics: nic::unleased(&data),
                network: nic::network(&data),
                owns_links: false,
            })
        }))
    }
}

impl Identity for OpenStackProvider {
    /// The drive's `ConfigDrive` datasource when there is a drive (the metadata
    /// service is then never asked), else the service's `OpenStack`.
    fn datasource(&self, policy: WaitPolicy) -> Result<Box<dyn Datasource>> {
        if let Some(drive) = self.drive(policy.budget) {
            return Ok(Box::new(ConfigDriveSource::new(drive)));
        }
        self.datasource_of(SourceKind::OpenStack, policy)
    }
}

/// `OpenStack` for the hooks (a config drive when there is one, else the
/// metadata service).
pub static CLOUD: Cloud = Cloud {
    name: "openstack",
    kinds: &[SourceKind::OpenStack, SourceKind::ConfigDrive],
    check: super::detect::check,
    seeds: super::detect::seeds,
    platform: |_| None,
    endpoint: Some(EndpointKey {
        key: "openstack.endpoint",
        env: "LEASEHOOK_OPENSTACK_ENDPOINT",
        help: "the OpenStack metadata service's base URL, an http:// IP literal (default http://169.254.169.254; a config drive, when there is one, is read instead)",
        default: OPENSTACK_ENDPOINT,
        check: |url| Ok(OpenStack::new().with_endpoint(url)?.endpoint().to_owned()),
    }),
    provider: |s| Ok(Box::new(OpenStackProvider::try_new(s.root, s.endpoint)?)),
    parse_saved: nic::parse_saved,
    live: None,
    address_keys: AddressKeys {
        ipv4: Some("networks[].ip_address"),
        ipv6: Some("networks[].ip_address"),
        ipv4_prefix: None,
        ipv6_prefix: None,
    },
};

/// `OpenStack`'s datasources for the boot stage.
pub static SOURCE: CloudSource = CloudSource {
    cloud: &CLOUD,
    local_stage: |kind| {
        (kind != SourceKind::ConfigDrive)
            .then_some("the OpenStack metadata service needs the network")
    },
    datasource: |s, kind, policy| {
        OpenStackProvider::try_new(s.root, s.endpoint)?.datasource_of(kind, policy)
    },
    region_ids: &[],
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::provider::ProviderChoice;

    #[test]
    fn auto_resolves_to_openstack_on_either_verdict_and_the_name_parses() {
        for v in [SourceKind::OpenStack, SourceKind::ConfigDrive] {
            assert_eq!(
                ProviderChoice::Auto.resolve(Some(v)),
                ProviderKind::of(&crate::source::openstack::CLOUD)
            );
        }
        assert_eq!(
            "openstack".parse::<ProviderChoice>().unwrap(),
            ProviderChoice::Named(ProviderKind::of(&crate::source::openstack::CLOUD))
        );
        assert_eq!(
            ProviderKind::of(&crate::source::openstack::CLOUD).to_string(),
            "openstack"
        );
        let e = "digitalocean"
            .parse::<ProviderChoice>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("oracle or openstack"), "{e}");
    }

    #[test]
    fn the_endpoint_is_checked_and_a_drive_picks_the_datasource() {
        let root = tempfile::tempdir().unwrap();
        let e = OpenStackProvider::try_new(root.path(), Some("http://metadata.local"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("openstack.endpoint"), "{e}");
        let p = OpenStackProvider::try_new(root.path(), None).unwrap();
        assert_eq!(p.kind(), ProviderKind::of(&crate::source::openstack::CLOUD));
        assert_eq!(p.client().unwrap().endpoint(), OPENSTACK_ENDPOINT);
        assert_eq!(
            p.datasource(WaitPolicy::default()).unwrap().kind(),
            SourceKind::OpenStack
        );
        assert!(
            p.datasource_of(SourceKind::ConfigDrive, WaitPolicy::default())
                .is_err()
        );
        let by = root.path().join("dev/disk/by-label");
        std::fs::create_dir_all(&by).unwrap();
        // Not a drive: neither ISO 9660 nor vfat (issue 30, item 1).
        std::fs::write(by.join("config-2"), b"not an image").unwrap();
        assert_eq!(
            p.datasource(WaitPolicy::default()).unwrap().kind(),
            SourceKind::OpenStack
        );
        // An ISO 9660 volume descriptor: a drive (read only when fetched).
        let mut iso = vec![0u8; 64 * 1024];
        iso[32769..32774].copy_from_slice(b"CD001");
        std::fs::write(by.join("config-2"), iso).unwrap();
        assert_eq!(
            p.datasource(WaitPolicy::default()).unwrap().kind(),
            SourceKind::ConfigDrive
        );
    }
}

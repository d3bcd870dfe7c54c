// SPDX-License-Identifier: Apache-2.0
//! Pure: what detecting a datasource says, and the one trait every datasource
//! implements. A datasource's kind, [`SourceKind`], is a plain value in
//! [`crate::model`] (the error type names it, so it sits below everything); the
//! set of kinds is here, read from the clouds' rows ([`crate::source::CLOUDS`]).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

use super::instance::InstanceData;
use crate::error::Result;
pub use crate::model::SourceKind;

impl SourceKind {
    /// Every kind, in ds-identify's order (`None` last): LXD, NoCloud and
    /// `None`, and the kinds of every cloud's row.
    pub fn all() -> Vec<Self> {
        let mut all: Vec<Self> = [Self::Lxd, Self::NoCloud, Self::None]
            .into_iter()
            .chain(super::CLOUDS.iter().flat_map(|c| c.kinds.iter().copied()))
            .collect();
        all.sort();
        all.dedup();
        all
    }

    /// The kind a `datasource_list` entry or a `ds=` value names, compared without
    /// regard to case. `nocloud-net` (cloud-init's `DataSourceNoCloudNet`, the same
    /// source read in the network stage) is NoCloud. Any other name is a datasource
    /// leasehook does not implement: `None`.
    pub fn from_name(name: &str) -> Option<Self> {
        let n = name.trim();
        if n.eq_ignore_ascii_case("nocloud-net") || n.eq_ignore_ascii_case("nocloudnet") {
            return Some(Self::NoCloud);
        }
        Self::all()
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(n))
    }
}

/// Reads cloud-init's name back, exactly as it is written (`GCE`, not `gce`).
impl<'de> Deserialize<'de> for SourceKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Self::all()
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "unknown datasource {name:?}, expected one of {}",
                    Self::all()
                        .iter()
                        .map(|k| k.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })
    }
}

/// What a datasource's check says, in ds-identify's three words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Check {
    /// The platform says it is this source.
    Found,
    /// It may be this source (EC2 on an unidentified platform with `strict_id`
    /// off). ds-identify's default policy (`maybe=none`) does not list it.
    Maybe,
    /// It is not this source.
    NotFound,
}

/// A check's answer and why, in words an operator can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The answer.
    pub check: Check,
    /// Why, naming the file or value that decided it.
    pub reason: String,
}

impl Finding {
    /// `Found`, because `reason`.
    pub fn found(reason: impl Into<String>) -> Self {
        Self {
            check: Check::Found,
            reason: reason.into(),
        }
    }

    /// `Maybe`, because `reason`.
    pub fn maybe(reason: impl Into<String>) -> Self {
        Self {
            check: Check::Maybe,
            reason: reason.into(),
        }
    }

    /// `NotFound`, because `reason`.
    pub fn not_found(reason: impl Into<String>) -> Self {
        Self {
            check: Check::NotFound,
            reason: reason.into(),
        }
    }
}

/// One datasource: a data-only interface (no method writes anything).
///
/// Each implementation holds its own seams (a root folder, a socket path, an IMDS
/// client), handed in when it is built, so tests point it at an emulator or a
/// temporary folder.
pub trait Datasource: fmt::Debug {
    /// Which datasource this is.
    fn kind(&self) -> SourceKind;

    /// Reads the instance's data: IO at the edge, parsing pure. A source that is not
    /// there at all is [`crate::Error::NotFound`]; one that answers garbage is
    /// [`crate::Error::Datasource`].
    fn fetch(&self) -> Result<InstanceData>;

    /// Cheaply checks whether `cached` still describes this instance (its
    /// instance-id is the current one). `Ok(false)` means another instance; an
    /// error means the source cannot tell right now.
    fn check_instance_id(&self, cached: &InstanceData) -> Result<bool>;
}

/// The kinds by their short names, for tests written when they were an enum's
/// variants (`use SourceKind::{Ec2, ...}`).
#[cfg(test)]
pub(crate) mod short {
    #![allow(non_upper_case_globals)] // the variants' names, as before
    use super::SourceKind;
    pub(crate) const Ec2: SourceKind = SourceKind::Ec2;
    pub(crate) const Gce: SourceKind = SourceKind::Gce;
    pub(crate) const Lxd: SourceKind = SourceKind::Lxd;
    pub(crate) const NoCloud: SourceKind = SourceKind::NoCloud;
    pub(crate) const NoneDs: SourceKind = SourceKind::None;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_without_regard_to_case() {
        for k in SourceKind::all() {
            assert_eq!(SourceKind::from_name(k.name()), Some(k));
            assert_eq!(SourceKind::from_name(&k.name().to_lowercase()), Some(k));
            assert_eq!(SourceKind::from_name(&k.name().to_uppercase()), Some(k));
            assert_eq!(k.to_string(), k.name());
        }
        assert_eq!(
            SourceKind::from_name("nocloud-net"),
            Some(SourceKind::NoCloud)
        );
        assert_eq!(
            SourceKind::from_name("NoCloudNet"),
            Some(SourceKind::NoCloud)
        );
        for other in ["Hetzner", "GCE ", "", "Ec2x", "LXD "] {
            assert_eq!(
                SourceKind::from_name(other),
                match other {
                    "LXD " => Some(SourceKind::Lxd),
                    "GCE " => Some(SourceKind::Gce),
                    _ => None,
                },
                "{other:?}"
            );
        }
    }

    #[test]
    fn serialises_as_cloud_init_names() {
        let json = serde_json::to_string(&SourceKind::all()).unwrap();
        assert_eq!(
            json,
            r#"["ConfigDrive","NoCloud","Azure","AliYun","Ec2","GCE","OpenStack","Oracle","LXD","None"]"#
        );
        let back: Vec<SourceKind> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, SourceKind::all());
        assert_eq!(
            serde_json::to_string(&[Check::Found, Check::Maybe, Check::NotFound]).unwrap(),
            r#"["found","maybe","not-found"]"#
        );
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Pure: the closed set of datasources, what detecting one says, and the one trait
//! every datasource implements.
//!
//! The set is closed (SPEC §5: Ec2, LXD, NoCloud and the final `None`), so it is an
//! enum: selection, logs and cache tags name a [`SourceKind`], never a string.
//! Names are cloud-init's spelling (`Ec2`, `LXD`, `NoCloud`, `None`) and are matched
//! without regard to case, as cloud-init matches `datasource_list` entries.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::detect::Snapshot;
use super::instance::InstanceData;
use crate::error::Result;

/// A datasource leasehook knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum SourceKind {
    /// The EC2 instance metadata service (IMDS).
    Ec2,
    /// LXD's dev-lxd socket, `/dev/lxd/sock`.
    #[serde(rename = "LXD")]
    Lxd,
    /// NoCloud seeds: folders, the kernel command line, DMI.
    NoCloud,
    /// No datasource: the end of every list ds-identify writes.
    None,
}

impl SourceKind {
    /// Every kind, in the order ds-identify's built-in list names them (`None` last).
    pub const ALL: [Self; 4] = [Self::NoCloud, Self::Ec2, Self::Lxd, Self::None];

    /// cloud-init's name: `Ec2`, `LXD`, `NoCloud`, `None`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ec2 => "Ec2",
            Self::Lxd => "LXD",
            Self::NoCloud => "NoCloud",
            Self::None => "None",
        }
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
        Self::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(n))
    }

    /// cloud-init's `platform` for instance data: `ec2`, `lxd`, `nocloud`, `none`.
    pub fn platform(self) -> &'static str {
        match self {
            Self::Ec2 => "ec2",
            Self::Lxd => "lxd",
            Self::NoCloud => "nocloud",
            Self::None => "none",
        }
    }
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
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
pub struct Verdict {
    /// The answer.
    pub check: Check,
    /// Why, naming the file or value that decided it.
    pub reason: String,
}

impl Verdict {
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

    /// Whether the instance has this datasource, decided from a snapshot of the
    /// root's files (see [`super::detect`]): no network, no IO of its own.
    fn detect(&self, snapshot: &Snapshot) -> Verdict;

    /// Reads the instance's data: IO at the edge, parsing pure. A source that is not
    /// there at all is [`crate::Error::NotFound`]; one that answers garbage is
    /// [`crate::Error::Datasource`].
    fn fetch(&self) -> Result<InstanceData>;

    /// Cheaply checks whether `cached` still describes this instance (its
    /// instance-id is the current one). `Ok(false)` means another instance; an
    /// error means the source cannot tell right now.
    fn check_instance_id(&self, cached: &InstanceData) -> Result<bool>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_without_regard_to_case() {
        for k in SourceKind::ALL {
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
        for other in ["Azure", "GCE", "", "Ec2x", "LXD "] {
            assert_eq!(
                SourceKind::from_name(other),
                (other == "LXD ").then_some(SourceKind::Lxd),
                "{other:?}"
            );
        }
    }

    #[test]
    fn serialises_as_cloud_init_names() {
        let json = serde_json::to_string(&SourceKind::ALL).unwrap();
        assert_eq!(json, r#"["NoCloud","Ec2","LXD","None"]"#);
        let back: Vec<SourceKind> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, SourceKind::ALL);
        assert_eq!(
            serde_json::to_string(&[Check::Found, Check::Maybe, Check::NotFound]).unwrap(),
            r#"["found","maybe","not-found"]"#
        );
    }
}

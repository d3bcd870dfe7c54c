// SPDX-License-Identifier: Apache-2.0
//! Pure: what detecting a datasource says, and the one trait every datasource
//! implements. The closed set of datasources, [`SourceKind`], is a plain value in
//! [`crate::model`] (the error type names it, so it sits below everything).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::instance::InstanceData;
use crate::error::Result;
pub use crate::model::SourceKind;

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
        let json = serde_json::to_string(&SourceKind::ALL).unwrap();
        assert_eq!(
            json,
            r#"["ConfigDrive","NoCloud","Azure","AliYun","Ec2","GCE","OpenStack","Oracle","LXD","None"]"#
        );
        let back: Vec<SourceKind> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, SourceKind::ALL);
        assert_eq!(
            serde_json::to_string(&[Check::Found, Check::Maybe, Check::NotFound]).unwrap(),
            r#"["found","maybe","not-found"]"#
        );
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Pure: the boot stage's decisions — which stage tries which datasource, whether
//! the cached datasource may stand in when none answers, and the words the log and
//! `boot.json` use for each datasource tried.
//!
//! No files, no sockets, no clock: [`super::run`] gathers the facts (the detection,
//! the cache as read, what each source answered) and asks these functions.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::config::FallbackPolicy;
use crate::instance_data::Stage;
use crate::model::SourceKind;
use crate::source::detect::Detection;
use crate::source::provider::CloudSource;

/// What a stage does with a datasource of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Check the cache against it and fetch it in this stage.
    Try,
    /// Leave it to the network stage, for this reason.
    Defer(&'static str),
    /// Nothing (`None` ends the list; it is what no datasource means).
    Skip,
}

/// Which stage tries `kind`. NoCloud is local files; LXD is a unix socket, local
/// too — except in a VM whose socket is not there yet (the LXD agent starts it
/// later in boot), which the network stage tries; a cloud's datasource is as its
/// row `cloud` says ([`CloudSource::local_stage`]: its metadata service needs the
/// network, a config drive does not).
pub fn role(
    kind: SourceKind,
    stage: Stage,
    lxd_socket_present: bool,
    virt: &str,
    cloud: Option<&CloudSource>,
) -> Role {
    match (kind, stage) {
        (SourceKind::None, _) => Role::Skip,
        (_, Stage::Network) | (SourceKind::NoCloud, Stage::Local) => Role::Try,
        (SourceKind::Lxd, Stage::Local) => {
            if !lxd_socket_present && matches!(virt, "kvm" | "qemu") {
                Role::Defer("an LXD VM whose agent has not made /dev/lxd/sock yet")
            } else {
                Role::Try
            }
        }
        (_, Stage::Local) => match cloud.and_then(|c| (c.local_stage)(kind)) {
            Some(why) => Role::Defer(why),
            None => Role::Try,
        },
    }
}

/// The datasources the configuration names (whether or not found): the list the
/// detection produced and every source it checked. A cached datasource outside
/// this set is "no longer configured".
pub fn configured(d: &Detection) -> Vec<SourceKind> {
    let mut out: Vec<SourceKind> = d.datasource_list.clone();
    for k in d.checks.keys() {
        if !out.contains(k) {
            out.push(*k);
        }
    }
    out
}

/// What became of one datasource in one stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tried {
    /// Fetched.
    Fetched,
    /// The cache's instance-id is still this source's: the cache was used.
    CacheMatched,
    /// The source names another instance-id than the cache.
    CacheMismatch,
    /// The source could not confirm the cache's instance-id.
    CheckFailed,
    /// The source is not there.
    NotFound,
    /// The source is there but failed.
    Failed,
    /// Left to the network stage.
    Deferred,
    /// Configured, but the detection did not find it.
    NotDetected,
}

/// One datasource tried, in one stage, with its result and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// Which datasource.
    pub datasource: SourceKind,
    /// In which stage.
    pub stage: Stage,
    /// What became of it.
    pub result: Tried,
    /// Why, in words (an error message, a detection reason).
    pub detail: String,
}

impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.result {
            Tried::Fetched => "fetched",
            Tried::CacheMatched => "instance-id matches the cache",
            Tried::CacheMismatch => "instance-id differs from the cache",
            Tried::CheckFailed => "instance-id check failed",
            Tried::NotFound => "not found",
            Tried::Failed => "failed",
            Tried::Deferred => "left to the network stage",
            Tried::NotDetected => "not detected",
        };
        write!(f, "{} ({} stage): {what}", self.datasource, self.stage)?;
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// The cache as the fallback decision sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheView {
    /// No cache.
    Missing,
    /// A cache that cannot be used (and was set aside), and why.
    Corrupt(String),
    /// A readable cache record.
    Valid {
        /// Its datasource.
        datasource: SourceKind,
        /// Its instance-id.
        instance_id: String,
    },
}

/// Why the cache was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotUsed {
    /// There is none.
    Missing,
    /// It is unreadable, truncated, of another version, or a symlink (set aside).
    Corrupt(String),
    /// Its datasource is not in the configured list any more.
    NoLongerConfigured {
        /// The cached datasource.
        datasource: SourceKind,
        /// What is configured now.
        configured: Vec<SourceKind>,
    },
    /// The configuration turns fallback off.
    Disabled(crate::config::FallbackOff),
    /// The cache describes another instance than the one this machine last was,
    /// or the datasource said so this boot.
    InstanceIdMismatch {
        /// The cache's instance-id.
        cached: String,
        /// Who says otherwise, and what.
        said: String,
    },
}

impl fmt::Display for NotUsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing => f.write_str("no cache (missing)"),
            Self::Corrupt(why) => write!(f, "the cache is corrupt ({why})"),
            Self::NoLongerConfigured {
                datasource,
                configured,
            } => {
                let list: Vec<&str> = configured.iter().map(|k| k.name()).collect();
                write!(
                    f,
                    "the cached datasource {datasource} is no longer configured (configured: [{}])",
                    list.join(", ")
                )
            }
            Self::Disabled(why) => write!(f, "fallback to the cache is disabled ({why})"),
            Self::InstanceIdMismatch { cached, said } => {
                write!(
                    f,
                    "instance-id mismatch: the cache holds {cached:?}; {said}"
                )
            }
        }
    }
}

/// Whether the cached datasource may stand in now that no configured datasource
/// answered (SPEC §5): it must parse, still be configured, not have fallback turned
/// off, and describe this machine's instance — the one `data/instance-id` names,
/// and not one a datasource denied this boot.
pub fn fallback(
    cache: &CacheView,
    configured: &[SourceKind],
    policy: &FallbackPolicy,
    previous_instance_id: Option<&str>,
    attempts: &[Attempt],
) -> Result<(), NotUsed> {
    let (datasource, instance_id) = match cache {
        CacheView::Missing => return Err(NotUsed::Missing),
        CacheView::Corrupt(why) => return Err(NotUsed::Corrupt(why.clone())),
        CacheView::Valid {
            datasource,
            instance_id,
        } => (*datasource, instance_id),
    };
    if !configured.contains(&datasource) {
        return Err(NotUsed::NoLongerConfigured {
            datasource,
            configured: configured.to_vec(),
        });
    }
    policy.allows(datasource).map_err(NotUsed::Disabled)?;
    if let Some(denied) = attempts
        .iter()
        .find(|a| a.datasource == datasource && a.result == Tried::CacheMismatch)
    {
        return Err(NotUsed::InstanceIdMismatch {
            cached: instance_id.clone(),
            said: format!("{datasource} said {}", denied.detail),
        });
    }
    if let Some(prev) = previous_instance_id
        && prev != instance_id
    {
        return Err(NotUsed::InstanceIdMismatch {
            cached: instance_id.clone(),
            said: format!("data/instance-id says {prev:?}"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::source::short::{Ec2, Lxd, NoCloud, NoneDs};

    fn attempt(k: SourceKind, result: Tried, detail: &str) -> Attempt {
        Attempt {
            datasource: k,
            stage: Stage::Network,
            result,
            detail: detail.into(),
        }
    }

    #[test]
    fn roles_per_stage() {
        let cases = [
            (Ec2, Stage::Local, true, "kvm", "defer"),
            (Ec2, Stage::Network, false, "kvm", "try"),
            (SourceKind::ConfigDrive, Stage::Local, false, "kvm", "try"),
            (SourceKind::OpenStack, Stage::Local, false, "kvm", "defer"),
            (NoCloud, Stage::Local, false, "lxc", "try"),
            (NoCloud, Stage::Network, false, "lxc", "try"),
            (Lxd, Stage::Local, true, "lxc", "try"),
            (Lxd, Stage::Local, false, "lxc", "try"),
            (Lxd, Stage::Local, true, "kvm", "try"),
            (Lxd, Stage::Local, false, "kvm", "defer"),
            (Lxd, Stage::Local, false, "qemu", "defer"),
            (Lxd, Stage::Network, false, "kvm", "try"),
            (NoneDs, Stage::Local, false, "lxc", "skip"),
            (NoneDs, Stage::Network, false, "lxc", "skip"),
        ];
        for (k, stage, sock, virt, want) in cases {
            let got = match role(k, stage, sock, virt, crate::source::cloud_source(k)) {
                Role::Try => "try",
                Role::Defer(_) => "defer",
                Role::Skip => "skip",
            };
            assert_eq!(got, want, "{k} {stage} socket={sock} {virt}");
        }
    }

    fn valid(k: SourceKind, id: &str) -> CacheView {
        CacheView::Valid {
            datasource: k,
            instance_id: id.into(),
        }
    }

    /// Name, cache, configured, policy, data/instance-id, attempts, expected.
    type Case<'a> = (
        &'a str,
        CacheView,
        Vec<SourceKind>,
        &'a FallbackPolicy,
        Option<&'a str>,
        &'a [Attempt],
        &'a str,
    );

    #[test]
    #[allow(clippy::too_many_lines)] // one table
    fn fallback_table() {
        let on = FallbackPolicy::default();
        let global_off = FallbackPolicy {
            global: Some(false),
            ..FallbackPolicy::default()
        };
        let ec2_off = FallbackPolicy {
            per_datasource: [(Ec2, false)].into(),
            ..FallbackPolicy::default()
        };
        let off_but_lxd_on = FallbackPolicy {
            global: Some(false),
            per_datasource: [(Lxd, true)].into(),
        };
        let mismatch = [attempt(
            Ec2,
            Tried::CacheMismatch,
            "this is another instance",
        )];
        let failed = [attempt(Ec2, Tried::CheckFailed, "IMDS disabled")];
        let cases: Vec<Case<'_>> = vec![
            (
                "used",
                valid(Ec2, "i-1"),
                vec![Ec2, NoneDs],
                &on,
                Some("i-1"),
                &failed,
                "ok",
            ),
            (
                "first boot record, no data/instance-id",
                valid(Ec2, "i-1"),
                vec![Ec2],
                &on,
                None,
                &[],
                "ok",
            ),
            (
                "missing",
                CacheView::Missing,
                vec![Ec2],
                &on,
                None,
                &[],
                "no cache (missing)",
            ),
            (
                "corrupt",
                CacheView::Corrupt("truncated".into()),
                vec![Ec2],
                &on,
                None,
                &[],
                "the cache is corrupt (truncated)",
            ),
            (
                "not configured",
                valid(Lxd, "c1"),
                vec![NoCloud, NoneDs],
                &on,
                Some("c1"),
                &[],
                "the cached datasource LXD is no longer configured (configured: [NoCloud, None])",
            ),
            (
                "global off",
                valid(Ec2, "i-1"),
                vec![Ec2],
                &global_off,
                Some("i-1"),
                &[],
                "fallback to the cache is disabled (fallback is false)",
            ),
            (
                "per datasource off",
                valid(Ec2, "i-1"),
                vec![Ec2],
                &ec2_off,
                Some("i-1"),
                &[],
                "fallback to the cache is disabled (datasource.Ec2.fallback is false)",
            ),
            (
                "per datasource off, other source",
                valid(Lxd, "c1"),
                vec![Lxd],
                &ec2_off,
                Some("c1"),
                &[],
                "ok",
            ),
            (
                "per datasource on beats global off",
                valid(Lxd, "c1"),
                vec![Lxd],
                &off_but_lxd_on,
                Some("c1"),
                &[],
                "ok",
            ),
            (
                "the source denied the id",
                valid(Ec2, "i-1"),
                vec![Ec2],
                &on,
                Some("i-1"),
                &mismatch,
                "instance-id mismatch: the cache holds \"i-1\"; Ec2 said this is another instance",
            ),
            (
                "data/instance-id names another",
                valid(Ec2, "i-1"),
                vec![Ec2],
                &on,
                Some("i-2"),
                &[],
                "instance-id mismatch: the cache holds \"i-1\"; data/instance-id says \"i-2\"",
            ),
            // Order: configuration is checked before identity.
            (
                "not configured and mismatched",
                valid(Lxd, "c1"),
                vec![Ec2],
                &on,
                Some("c2"),
                &[],
                "no longer configured",
            ),
        ];
        for (name, cache, conf, policy, prev, attempts, want) in cases {
            let got = match fallback(&cache, &conf, policy, prev, attempts) {
                Ok(()) => "ok".to_owned(),
                Err(e) => e.to_string(),
            };
            assert!(got.contains(want), "{name}: {got}");
        }
    }

    #[test]
    fn attempts_read_as_log_lines() {
        let a = Attempt {
            datasource: Ec2,
            stage: Stage::Network,
            result: Tried::CheckFailed,
            detail: "IMDS disabled".into(),
        };
        assert_eq!(
            a.to_string(),
            "Ec2 (network stage): instance-id check failed: IMDS disabled"
        );
        let json = serde_json::to_value(&a).unwrap();
        assert_eq!(json["result"], "check-failed");
        assert_eq!(json["stage"], "network");
        assert_eq!(json["datasource"], "Ec2");
        assert!(
            crate::instance_data::Origin::CacheFallback.from_cache()
                && !crate::instance_data::Origin::Fetched.from_cache()
        );
    }

    #[test]
    fn configured_is_the_list_and_every_check() {
        let mut d = Detection {
            datasource_list: vec![Ec2, NoneDs],
            checks: BTreeMap::new(),
            reasons: BTreeMap::new(),
            list_from: String::new(),
            virt: String::new(),
            disabled: None,
            warnings: Vec::new(),
        };
        d.checks.insert(Lxd, crate::source::Check::NotFound);
        d.checks.insert(Ec2, crate::source::Check::Found);
        assert_eq!(configured(&d), [Ec2, NoneDs, Lxd]);
    }
}

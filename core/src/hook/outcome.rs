// SPDX-License-Identifier: Apache-2.0
//! What one lease event came to ([`HookOutcome`]), and its label in the
//! metrics.

use crate::apply::Report;
use crate::error::Result;

/// What [`super::handle`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookOutcome {
    /// The reason needs nothing (`PREINIT`, ...).
    Ignored,
    /// The plan was applied (complete: IMDS agreed with the lease).
    Applied(Report),
    /// The wait ended without IMDS agreeing: what the lease proves was applied.
    AppliedPartial(Report),
    /// The family's objects were removed.
    Removed(Report),
    /// The wait continues in a detached worker with this pid.
    Deferred(u32),
    /// Nothing changed; the reason is logged.
    Kept(String),
    /// The interface is listed in `unmanaged`: nothing was done.
    Unmanaged,
}

/// The `outcome` label of a hook's result in `leasehook_events_total`
/// ([`crate::metrics`]; here, not there, so the metrics module, which the
/// providers' HTTP paths count requests with, imports nothing of the hook).
pub fn metrics_outcome(result: &Result<HookOutcome>) -> &'static str {
    match result {
        Ok(HookOutcome::Ignored) => "ignored",
        Ok(HookOutcome::Applied(r)) if r.writes() == 0 => "unchanged",
        Ok(HookOutcome::Applied(_)) => "applied",
        Ok(HookOutcome::AppliedPartial(_)) => "partial",
        Ok(HookOutcome::Removed(_)) => "removed",
        Ok(HookOutcome::Deferred(_)) => "deferred",
        Ok(HookOutcome::Kept(_)) => "kept",
        Ok(HookOutcome::Unmanaged) => "unmanaged",
        Err(e) if crate::metrics::is_conflict(e) => "conflict",
        Err(_) => "error",
    }
}

#[cfg(test)]
mod tests {
    use super::{HookOutcome, Report, metrics_outcome};
    use crate::error::Error;
    use crate::model::IfName;

    #[test]
    fn outcomes_are_labelled() {
        let conflict = Error::TableConflict {
            iface: IfName::try_new("eth1").unwrap(),
            table: 10001,
            others: vec!["eth2".to_owned()],
        };
        for (r, want) in [
            (Ok(HookOutcome::Applied(Report::default())), "unchanged"),
            (
                Ok(HookOutcome::AppliedPartial(Report::default())),
                "partial",
            ),
            (Ok(HookOutcome::Deferred(7)), "deferred"),
            (Ok(HookOutcome::Kept(String::new())), "kept"),
            (Err(conflict), "conflict"),
            (Err(Error::InvalidPlan(String::new())), "error"),
        ] {
            assert_eq!(metrics_outcome(&r), want);
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: what the hook and its worker do alike once the wait is over: apply
//! the metadata's answer for the event's family through the one commit path
//! ([`crate::commit`]), or tear it down on a remove reason.

use super::{
    HookConfig, HookOutcome, commit_guarded, kernel_inputs, lease_of, log_refused, plan_one,
    table_held_by_other, unmanaged_by_metadata,
};
use crate::apply::state::{self, Paths};
use crate::apply::{Applier, Report};
use crate::error::Result;
use crate::model::{LeaseEvent, Link};

/// Plans and commits the event's family from `network` (the wait's answer); with
/// `partial`, what the lease alone proves, and only when nothing of that family
/// was applied before.
#[allow(clippy::too_many_arguments)] // the event, its link, the OS's links, the answer, where to record
pub(super) fn apply_outcome<A: Applier + ?Sized>(
    applier: &mut A,
    paths: &Paths,
    event: &LeaseEvent,
    link: &(Link, u32),
    os: &[Link],
    network: &crate::model::InstanceNetwork,
    cfg: &HookConfig,
    partial: bool,
) -> Result<HookOutcome> {
    // Before anything is read or planned: an unmanaged NIC is never touched.
    match unmanaged_by_metadata(cfg, network, link.0.mac, partial) {
        Some((true, why)) => {
            log::info!("{} is {why}", event.interface);
            return Ok(HookOutcome::Unmanaged);
        }
        Some((false, why)) => return Ok(HookOutcome::Kept(why)),
        None => {}
    }
    let recorded = state::read_state_or_set_aside(paths, &event.interface);
    if partial
        && recorded
            .as_ref()
            .is_some_and(|st| st.families.contains_key(&event.family))
    {
        return Ok(HookOutcome::Kept(format!(
            "IMDS incomplete: keeping the {} state applied before",
            event.family
        )));
    }
    // The kernel as it is after the wait, read once: the plan is made from it
    // and applied on it (nothing is written in between).
    let seen = applier.snapshot()?;
    let mut planned = link.0.clone();
    let (addresses, next_hops) = kernel_inputs(&seen, &mut planned);
    let p = plan_one(
        cfg,
        network,
        &planned,
        os,
        &[lease_of(event)?],
        (&addresses, &next_hops),
    )?;
    log_refused(&p);
    if let Some(why) = table_held_by_other(paths, &p, cfg, link.0.mac) {
        log::warn!("{why}");
        return Ok(HookOutcome::Kept(why));
    }
    if partial {
        match p.interfaces.first().and_then(|i| i.table) {
            Some(t) => log::warn!("applying what the lease alone proves (table {t})"),
            None => {
                log::warn!("the table cannot be known (no valid device-number): applying no rules");
            }
        }
    }
    let lease = lease_of(event)?;
    // A lease on a MAC no record names: a hot-plug, refreshed more often for a
    // while by `leasehook watch` (the primary is left to the timer). Applied
    // partially (the metadata lagging the attach) most of all.
    let hot =
        !p.interfaces.iter().any(|i| i.primary) && super::hotplug::is_new_mac(paths, link.0.mac);
    let report = commit_guarded(
        applier,
        paths,
        &p,
        (recorded.as_ref(), Some(&seen)),
        network,
        std::slice::from_ref(&lease),
    )?;
    crate::metrics::succeeded(&event.interface);
    if hot {
        super::hotplug::record(paths, &event.interface, link.0.mac);
    }
    log::info!(
        "{} change(s) for {} {}",
        report.writes(),
        event.interface,
        event.family
    );
    Ok(if partial {
        HookOutcome::AppliedPartial(report)
    } else {
        HookOutcome::Applied(report)
    })
}

pub(super) fn remove<A: Applier + ?Sized>(
    applier: &mut A,
    paths: &Paths,
    event: &LeaseEvent,
) -> Result<Report> {
    let recorded = state::read_state_or_set_aside(paths, &event.interface);
    // A NIC leasehook configured from the metadata (no DHCP serves it) is not a
    // DHCP client's to take down: a client started on it anyway fails, and its
    // FAIL or EXPIRE would remove the address the NIC lives on.
    if let Some(st) = &recorded
        && st
            .leases()
            .iter()
            .any(|l| l.family == event.family && l.reason == crate::model::Reason::Metadata)
    {
        log::info!(
            "{} {}: configured from the metadata, not by a DHCP client: its {} changes nothing",
            event.interface,
            event.family,
            event.reason
        );
        return Ok(Report::default());
    }
    let report = crate::commit::remove(
        applier,
        paths,
        &event.interface,
        Some(event.family),
        recorded,
    )?;
    for e in &report.errors {
        log::warn!("{e}");
    }
    log::info!(
        "removed {} object(s) of {} {}",
        report.writes(),
        event.interface,
        event.family
    );
    Ok(report)
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
    use super::{HookOutcome, metrics_outcome};
    use crate::error::Error;
    use crate::model::IfName;

    #[test]
    fn outcomes_are_labelled() {
        use crate::apply::Report;
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

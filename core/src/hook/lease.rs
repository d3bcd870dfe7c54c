// SPDX-License-Identifier: Apache-2.0
//! Performs IO: what the hook and its worker do alike under the interface's
//! lock: an apply reason's NIC gated, found, asked about and applied
//! ([`wait_and_apply_lease`], over the one [`wait_and_apply`]), or a remove
//! reason's family torn down ([`remove`]).

use std::time::{Duration, Instant};

use super::HookConfig;
use super::cni::{Gate, kubernetes_gate, leave_to_cni};
use super::effects::Effects;
use super::hotplug;
use super::outcome::HookOutcome;
use super::planning::{find_link, lease_of, os_links};
use super::wait_apply::{
    Answer, Applied, Ask, Next, Prepared, SeenLinks, Target, log_missing, unanswered,
    wait_and_apply,
};
use crate::apply::state::{self, Paths};
use crate::apply::{Applier, Report};
use crate::error::Result;
use crate::model::LeaseEvent;
use crate::source::provider::{NicEvent, Outcome, PrimaryUse};

/// How a caller of [`wait_and_apply_lease`] takes part: `until` (by the
/// caller's clock) ends the wait, which lasts at least `floor`; `on_cni` runs
/// when the NIC is the CNI's, before it is left to it; `decide` is the
/// caller's answer to the wait's outcome ([`lease_next`], or a hand-over).
pub(super) struct LeaseWait<C, D> {
    /// When the wait must end.
    pub until: Instant,
    /// The shortest wait, however late it starts.
    pub floor: Duration,
    /// Run before the CNI's ENI is left to it.
    pub on_cni: C,
    /// The caller's answer to the wait's outcome.
    pub decide: D,
}

/// The event's NIC under its lock: the Kubernetes gate, its link (one dump),
/// the wait for the cloud and the plan applied ([`wait_and_apply`]). A lease
/// on a MAC no record names is a hot-plug, refreshed more often for a while by
/// `leasehook watch` (the primary is left to the timer).
pub(super) fn wait_and_apply_lease<C, D>(
    fx: &mut Effects<'_>,
    paths: &Paths,
    event: &LeaseEvent,
    cfg: &HookConfig,
    how: LeaseWait<C, D>,
) -> Result<HookOutcome>
where
    C: FnOnce(),
    D: FnOnce(Outcome) -> Result<Next<HookOutcome>>,
{
    let cfg = &match kubernetes_gate(fx.kernel, cfg, &event.interface)? {
        Gate::Plan(c) => *c,
        Gate::Cni(why) => {
            (how.on_cni)();
            return leave_to_cni(fx.kernel, paths, &event.interface, &why).map(HookOutcome::Kept);
        }
    };
    let recorded = state::read_state_or_set_aside(paths, &event.interface);
    if let Some(why) = recorded.as_ref().and_then(|st| from_metadata(st, event)) {
        return Ok(HookOutcome::Kept(why));
    }
    let read_at = Instant::now();
    let kernel_links = fx.kernel.links()?;
    let (link, _) = find_link(&kernel_links, &event.interface)?;
    let os = os_links(&kernel_links, cfg);
    let lease = lease_of(event)?;
    let nic = NicEvent::try_new(event.interface.clone(), link.mac, vec![lease.clone()])?
        .with_peers(os.iter().map(|l| l.mac))
        .with_primary_use(PrimaryUse::of(&cfg.plan));
    let target = Target {
        link,
        os,
        leases: vec![lease],
        recorded,
        links: SeenLinks::new(kernel_links, read_at),
    };
    let budget = how
        .until
        .saturating_duration_since(fx.clock.now())
        .max(how.floor);
    let mut hot = false;
    let applied = wait_and_apply(
        fx,
        (paths, cfg),
        (&Ask::lease(nic, budget), &target),
        how.decide,
        |_, p| {
            hot = !p.interfaces.iter().any(|i| i.primary)
                && hotplug::is_new_mac(paths, target.link.mac);
            Ok(Prepared::AS_SEEN)
        },
    )?;
    Ok(match applied {
        Applied::Committed { report, partial } => {
            crate::metrics::succeeded(&event.interface);
            if hot {
                hotplug::record(paths, &event.interface, target.link.mac);
            }
            log::info!(
                "{} change(s) for {} {}",
                report.writes(),
                event.interface,
                event.family
            );
            if partial {
                HookOutcome::AppliedPartial(report)
            } else {
                HookOutcome::Applied(report)
            }
        }
        Applied::Unmanaged(true, why) => {
            log::info!("{} is {why}", event.interface);
            HookOutcome::Unmanaged
        }
        Applied::Unmanaged(false, why) | Applied::KeptPartial(why) => HookOutcome::Kept(why),
        Applied::TableHeld(why) => {
            log::warn!("{why}");
            HookOutcome::Kept(why)
        }
        Applied::Stopped(o) => o,
    })
}

/// The lease path's answer to a wait that ended: a complete answer is applied,
/// an incomplete one for what the lease alone proves, a failure changes
/// nothing.
pub(super) fn lease_next(outcome: Outcome) -> Next<HookOutcome> {
    match outcome {
        Outcome::Complete(network) => Next::complete(network),
        Outcome::Partial { network, missing } => {
            log_missing(&missing);
            Next::Apply(Answer {
                network,
                partial: true,
            })
        }
        Outcome::Failed(e) => Next::Stop(HookOutcome::Kept(unanswered(&e))),
    }
}

/// Tears down the event's family on `event`'s interface and forgets it.
pub(super) fn remove<A: Applier + ?Sized>(
    applier: &mut A,
    paths: &Paths,
    event: &LeaseEvent,
) -> Result<Report> {
    let recorded = state::read_state_or_set_aside(paths, &event.interface);
    // A NIC leasehook configured from the metadata (no DHCP serves it), or from
    // the address the kernel configured from router advertisements, is not a
    // DHCP client's to take down: a client started on it anyway fails, and its
    // FAIL or EXPIRE would remove the address the NIC lives on (or its rules).
    if let Some(why) = recorded.as_ref().and_then(|st| from_metadata(st, event)) {
        log::info!("{why}");
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

/// Why `event` changes nothing, when its family of the NIC was configured from
/// the metadata ([`crate::model::Reason::Metadata`]: a NIC without DHCP) or from
/// router advertisements ([`crate::model::Reason::Autoconf`]): that
/// family is `refresh`'s, which follows the metadata. A DHCP client run on such
/// a NIC anyway (OCI serves secondary VNICs DHCPv6) gets the address the
/// metadata gave, already routed: planning its lease over the metadata's would
/// take that address away (it is leasehook's), and the next refresh would add
/// it again.
fn from_metadata(st: &state::InterfaceState, event: &LeaseEvent) -> Option<String> {
    st.leases()
        .iter()
        .any(|l| l.family == event.family && !l.reason.is_dhcp_client())
        .then(|| {
            format!(
                "{} {}: configured from the metadata or router advertisements, not by a DHCP \
                 client: its {} changes nothing",
                event.interface, event.family, event.reason
            )
        })
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the one wait-then-apply of the hook, its worker and `refresh`
//! ([`wait_and_apply`]), and its apply half ([`apply_answer`]) for the NICs
//! whose answer needs no wait (the ones the cloud serves no DHCP).
//!
//! Each caller says what it makes of the wait's outcome ([`Next`]: the hook
//! hands an incomplete answer over to its worker, `refresh` keeps what was
//! applied) and takes its own last step before the commit ([`Prepared`]: a
//! link brought up, a renamed link's old policy routing removed). In between,
//! one path: the metadata's `unmanaged` entries, the kernel read once (one
//! snapshot, planned from and applied on), the plan made once, the table
//! check, and the commit ([`crate::commit`]).

use std::time::{Duration, Instant};

use super::HookConfig;
use super::effects::{Effects, Kernel};
use super::planning::{kernel_inputs, log_refused, plan_one, table_held_by_other};
use super::unmanaged::unmanaged_by_metadata;
use crate::apply::state::{self, InterfaceState, Paths};
use crate::apply::{KernelLink, Report, Snapshot};
use crate::constants::LINKS_FRESH;
use crate::error::{Error, Result};
use crate::model::{InstanceNetwork, Lease, Link, Missing, Plan};
use crate::source::provider::{NicEvent, Outcome, WaitPolicy};

/// What the cloud is asked: the NIC and its leases, within `policy`.
pub(super) struct Ask {
    /// The NIC event the provider waits on.
    pub nic: NicEvent,
    /// The wait's budget and pacing.
    pub policy: WaitPolicy,
    /// Observed in the metrics' wait histogram (a lease event's wait; a
    /// refresh's check is not).
    pub timed: bool,
}

impl Ask {
    /// A lease event's wait (timed), within `budget`.
    pub(super) fn lease(nic: NicEvent, budget: Duration) -> Self {
        Self {
            nic,
            policy: WaitPolicy::default().with_budget(budget),
            timed: true,
        }
    }
}

/// The NIC a plan is made for, and what it is made from besides the answer.
pub(super) struct Target {
    /// The NIC's link now (named as the kernel names it now; the IPv6 router is
    /// read from the snapshot).
    pub link: Link,
    /// The OS's links, for the `cloud-init` order.
    pub os: Vec<Link>,
    /// The leases planned from: the event's, the recorded ones, or the
    /// metadata's for a NIC without DHCP.
    pub leases: Vec<Lease>,
    /// The state recorded for the NIC (under its lock), which its new state is
    /// built on.
    pub recorded: Option<InterfaceState>,
    /// The kernel's links the NIC was found in.
    pub links: SeenLinks,
}

/// A links dump and when it was read: the snapshot the plan is made from
/// reuses it while it is fresh ([`LINKS_FRESH`]), so an event whose wait took
/// no time dumps the links once.
pub(super) struct SeenLinks {
    links: Vec<KernelLink>,
    at: Instant,
}

impl SeenLinks {
    /// `links`, read at `at` (the instant before the dump was asked for).
    pub(super) fn new(links: Vec<KernelLink>, at: Instant) -> Self {
        Self { links, at }
    }

    /// The links, while younger than [`LINKS_FRESH`].
    fn fresh(&self) -> Option<Vec<KernelLink>> {
        (self.at.elapsed() <= LINKS_FRESH).then(|| self.links.clone())
    }
}

/// The metadata's answer a plan is made from.
pub(super) struct Answer {
    /// What the metadata said.
    pub network: InstanceNetwork,
    /// Incomplete: only what the lease alone proves is applied, and only when
    /// nothing of its family was applied before.
    pub partial: bool,
}

/// What a caller makes of the wait's outcome.
pub(super) enum Next<T> {
    /// Plan from this answer and commit.
    Apply(Answer),
    /// Stop here with the caller's own result.
    Stop(T),
}

impl<T> Next<T> {
    /// Apply a complete answer.
    pub(super) fn complete(network: InstanceNetwork) -> Self {
        Self::Apply(Answer {
            network,
            partial: false,
        })
    }
}

/// What a caller's last step before the commit decided.
pub(super) enum Prepared<T> {
    /// Commit. `wrote`: the kernel was written since the snapshot (a link
    /// brought up, a rename's teardown), so the commit reads it again;
    /// `afresh`: the recorded state was removed with the old name's objects
    /// (a rename), so the new state starts from none.
    Commit {
        /// The kernel changed since the snapshot.
        wrote: bool,
        /// The recorded state is gone.
        afresh: bool,
    },
    /// Stop here with the caller's own result.
    Stop(T),
}

impl<T> Prepared<T> {
    /// Commit on the snapshot the plan was made from.
    pub(super) const AS_SEEN: Self = Self::Commit {
        wrote: false,
        afresh: false,
    };
}

/// How a wait-and-apply ended.
pub(super) enum Applied<T> {
    /// Planned and committed.
    Committed {
        /// What the commit wrote.
        report: Report,
        /// From an incomplete answer.
        partial: bool,
    },
    /// An `unmanaged` entry names the NIC by its metadata (`true`), or may and
    /// the incomplete answer does not say yet (`false`): nothing planned.
    Unmanaged(bool, String),
    /// An incomplete answer for a family applied before: it stays as it was.
    KeptPartial(String),
    /// The plan's table is another NIC's ([`table_held_by_other`]): nothing
    /// written. Not logged yet.
    TableHeld(String),
    /// The caller stopped: its answer to the wait's outcome, or its last step's.
    Stopped(T),
}

/// Waits for the cloud to agree with `ask`, lets the caller decide on the
/// outcome, then [`apply_answer`].
pub(super) fn wait_and_apply<T>(
    fx: &mut Effects<'_>,
    (paths, cfg): (&Paths, &HookConfig),
    (ask, target): (&Ask, &Target),
    decide: impl FnOnce(Outcome) -> Result<Next<T>>,
    prepare: impl FnOnce(&mut dyn Kernel, &Plan) -> Result<Prepared<T>>,
) -> Result<Applied<T>> {
    let waiting = fx.clock.now();
    let outcome = fx.provider.wait_for_nic(&ask.nic, &ask.policy, fx.clock);
    let waited = fx.clock.now().saturating_duration_since(waiting);
    if ask.timed {
        crate::metrics::waited(waiting, fx.clock.now());
    }
    match decide(outcome)? {
        Next::Stop(t) => Ok(Applied::Stopped(t)),
        Next::Apply(answer) => {
            // A wait that took time (on the clock it slept on, which tests
            // fake) may have seen a link come, go or be renamed.
            let links = if waited <= LINKS_FRESH {
                target.links.fresh()
            } else {
                None
            };
            apply_on(fx.kernel, (paths, cfg), (target, links), &answer, prepare)
        }
    }
}

/// Plans `target` from `answer` and commits it: nothing when the metadata's
/// `unmanaged` entries name the NIC, or an incomplete answer finds its family
/// applied before; otherwise the kernel is read once (the plan is made from
/// that snapshot and applied on it), the plan made once, refused when its table
/// is another NIC's, and committed after the caller's `prepare`.
pub(super) fn apply_answer<T>(
    kernel: &mut dyn Kernel,
    (paths, cfg): (&Paths, &HookConfig),
    target: &Target,
    answer: &Answer,
    prepare: impl FnOnce(&mut dyn Kernel, &Plan) -> Result<Prepared<T>>,
) -> Result<Applied<T>> {
    let links = target.links.fresh();
    apply_on(kernel, (paths, cfg), (target, links), answer, prepare)
}

/// [`apply_answer`], its snapshot on `links` when they are fresh.
fn apply_on<T>(
    kernel: &mut dyn Kernel,
    (paths, cfg): (&Paths, &HookConfig),
    (target, links): (&Target, Option<Vec<KernelLink>>),
    answer: &Answer,
    prepare: impl FnOnce(&mut dyn Kernel, &Plan) -> Result<Prepared<T>>,
) -> Result<Applied<T>> {
    let Answer { network, partial } = answer;
    // Before anything is read or planned: an unmanaged NIC is never touched.
    if let Some((named, why)) = unmanaged_by_metadata(cfg, network, target.link.mac, *partial) {
        return Ok(Applied::Unmanaged(named, why));
    }
    if *partial
        && let Some(st) = &target.recorded
        && let Some(family) = target
            .leases
            .iter()
            .map(|l| l.family)
            .find(|f| st.families.contains_key(f))
    {
        return Ok(Applied::KeptPartial(format!(
            "IMDS incomplete: keeping the {family} state applied before"
        )));
    }
    // The kernel as it is after the wait, read once: the plan is made from it
    // and applied on it (unless the caller writes in between).
    let seen = match links {
        Some(links) => kernel.snapshot_on(links)?,
        None => kernel.snapshot()?,
    };
    let mut link = target.link.clone();
    let (addresses, next_hops) = kernel_inputs(&seen, &mut link);
    let p = plan_one(
        cfg,
        network,
        &link,
        &target.os,
        &target.leases,
        (&addresses, &next_hops),
    )?;
    log_refused(&p);
    if let Some(why) = table_held_by_other(paths, &p, cfg, target.link.mac) {
        return Ok(Applied::TableHeld(why));
    }
    if *partial {
        match p.interfaces.first().and_then(|i| i.table) {
            Some(t) => log::warn!("applying what the lease alone proves (table {t})"),
            None => {
                log::warn!("the table cannot be known (no valid device-number): applying no rules");
            }
        }
    }
    let (wrote, afresh) = match prepare(kernel, &p)? {
        Prepared::Commit { wrote, afresh } => (wrote, afresh),
        Prepared::Stop(t) => return Ok(Applied::Stopped(t)),
    };
    let recorded = target.recorded.as_ref().filter(|_| !afresh);
    let report = commit_guarded(
        kernel,
        paths,
        &p,
        (recorded, (!wrote).then_some(&seen)),
        network,
        &target.leases,
    )?;
    Ok(Applied::Committed {
        report,
        partial: *partial,
    })
}

/// Why nothing was applied when IMDS did not answer.
pub(super) fn unanswered(e: &Error) -> String {
    format!(
        "IMDS did not answer usefully ({e}): nothing applied, as the table cannot be known without \
         device-number; whatever was applied before stays"
    )
}

/// Whether the wait may go on after `e` (in a worker).
pub(super) fn retryable(e: &Error) -> bool {
    matches!(e, Error::Imds { kind, .. } if kind.is_retryable())
}

/// Logs what the metadata still lacked when the wait ended.
pub(super) fn log_missing(missing: &[Missing]) {
    let list: Vec<String> = missing.iter().map(ToString::to_string).collect();
    log::warn!(
        "IMDS did not agree with the lease within the budget; missing: {}",
        list.join("; ")
    );
}

/// Commits a one-interface plan ([`crate::commit::commit`]) with the leases it
/// was planned from; a table another NIC holds is recorded in this interface's
/// state (for `status`) and returned as the error, with nothing written. With
/// `seen` (the snapshot the plan was made from, no write since), the kernel is
/// not read again ([`crate::commit::commit_seen`]).
fn commit_guarded(
    applier: &mut dyn Kernel,
    paths: &Paths,
    p: &Plan,
    (recorded, seen): (Option<&InterfaceState>, Option<&Snapshot>),
    network: &InstanceNetwork,
    leases: &[Lease],
) -> Result<Report> {
    let own: Vec<InterfaceState> = recorded.cloned().into_iter().collect();
    match seen {
        Some(seen) => crate::commit::commit_seen(applier, paths, p, (&own, leases), seen),
        None => crate::commit::commit(applier, paths, p, &own, leases),
    }
    .inspect_err(|e| {
        if crate::metrics::is_conflict(e) {
            crate::metrics::conflict();
        }
        if matches!(e, Error::TableConflict { .. }) {
            record_conflict(paths, recorded, p, network, e);
        }
    })
}

/// Records a table conflict in the interface's state file, for `leasehook status`:
/// what was applied before stays as it was; only the list of refusals changes.
fn record_conflict(
    paths: &Paths,
    recorded: Option<&InterfaceState>,
    p: &Plan,
    network: &InstanceNetwork,
    e: &Error,
) {
    let Error::TableConflict {
        iface,
        table,
        others,
    } = e
    else {
        return;
    };
    let Some(ip) = p.interfaces.iter().find(|i| &i.name == iface) else {
        return;
    };
    let device = network
        .nic(ip.mac)
        .and_then(|n| n.device_number)
        .map_or_else(|| "?".to_owned(), |d| d.to_string());
    let mut st = recorded.cloned().unwrap_or_else(|| {
        let mut empty = ip.clone();
        empty.families.clear();
        empty.table = None;
        InterfaceState::record(None, &empty, p.profile)
    });
    st.refused = vec![crate::gate::Refused::new(
        "device-number",
        device,
        crate::gate::Refusal::TableClaimed {
            table: *table,
            others: others.clone(),
        },
    )];
    if let Err(e) = state::save_if_changed(paths, recorded, st, state::unix_ms()) {
        log::warn!("{e}");
    }
}

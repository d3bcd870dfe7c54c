// SPDX-License-Identifier: Apache-2.0
//! Performs IO: one DHCP event under the interface's lock (steps 1–4 of the
//! [`super`] overview): a newer event supersedes a waiting worker, the lock is
//! taken (or the event queued for a worker), remove reasons tear down, apply
//! reasons wait for IMDS and apply, or hand the rest of the wait over.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use super::HookConfig;
use super::effects::Effects;
use super::lease::{LeaseWait, lease_next, remove, wait_and_apply_lease};
use super::outcome::HookOutcome;
use super::wait_apply::{Next, retryable};
use super::worker::{
    hand_over, is_our_worker, pending_worker, queue_for_worker, read_generation, remove_pending,
    waiting_for, write_generation,
};
use crate::apply::state::{self, Paths};
use crate::error::Result;
use crate::model::{Action, IfName, LeaseEvent};
use crate::source::provider::{Clock, Outcome};

/// Stops the interface's waiting worker, if any: a newer event supersedes it. The
/// hand-over file is left to [`handle`], which drops it under the lock. A worker
/// already in `signalled` is not signalled (nor logged) again: a stopped one
/// (SIGSTOP) stays until continued, and one line says so, not one per look.
pub(super) fn supersede_worker(paths: &Paths, name: &IfName, signalled: &mut BTreeSet<u32>) {
    let pid = pending_worker(paths, name).filter(|pid| {
        *pid != std::process::id() && !signalled.contains(pid) && is_our_worker(*pid, name)
    });
    if let Some((pid, p)) = pid.and_then(|pid| {
        Some((
            pid,
            rustix::process::Pid::from_raw(i32::try_from(pid).ok()?)?,
        ))
    }) {
        signalled.insert(pid);
        match rustix::process::kill_process(p, rustix::process::Signal::TERM) {
            Ok(()) => log::info!("stopped the waiting worker {pid}: a newer event supersedes it"),
            Err(e) => log::debug!("worker {pid} already gone ({e})"),
        }
    }
}

/// Takes the interface's lock for a new event. A waiting worker holds the lock for
/// its whole wait, and the new event supersedes it, so while the lock is busy the
/// worker the hand-over names is stopped, again at each look. Stopping it once,
/// before queueing, is not enough: a hook that held the lock then may hand over and
/// start its worker only afterwards, and that worker, taking the lock first, would
/// hold this event (and the DHCP client) for the rest of its wait.
///
/// The wait ends at `until`: `Ok(None)` when the lock is still busy then (a
/// `refresh`, `apply` or `flush`, or a worker that does not stop, holds it).
pub(super) fn lock_for_event(
    paths: &Paths,
    name: &IfName,
    until: Instant,
    signalled: &mut BTreeSet<u32>,
    clock: &dyn Clock,
) -> Result<Option<state::InterfaceLock>> {
    let mut waiting = false;
    loop {
        if let Some(lock) = state::try_lock_interface(paths, name)? {
            return Ok(Some(lock));
        }
        supersede_worker(paths, name, signalled);
        if !waiting {
            log::debug!("{name}: the interface's lock is busy; waiting for it");
            waiting = true;
        }
        if clock.now() >= until {
            return Ok(None);
        }
        clock.sleep(crate::constants::HOOK_LOCK_POLL);
    }
}

/// [`super::handle`] with the kernel, the provider and the clock handed in.
pub fn handle_with(
    fx: &mut Effects<'_>,
    event: &LeaseEvent,
    cfg: &HookConfig,
    worker: &Path,
) -> Result<HookOutcome> {
    if event.action() == Action::Ignore {
        return Ok(HookOutcome::Ignored);
    }
    if !cfg.unmanaged.is_empty() {
        let mac = fx
            .kernel
            .links()?
            .into_iter()
            .find(|l| l.name == event.interface)
            .and_then(|l| l.mac);
        if cfg.is_unmanaged(&event.interface, mac) {
            log::info!(
                "{} is unmanaged (configuration key unmanaged): left alone",
                event.interface
            );
            return Ok(HookOutcome::Unmanaged);
        }
    }
    let started = state::unix_ms();
    let t0 = fx.clock.now();
    let sync_end = t0 + cfg.sync_budget;
    let paths = Paths::new(&cfg.root);
    let mut signalled = BTreeSet::new();
    supersede_worker(&paths, &event.interface, &mut signalled);
    let Some(_lock) = lock_for_event(&paths, &event.interface, sync_end, &mut signalled, fx.clock)?
    else {
        return queue_for_worker(&paths, event, cfg, worker, started);
    };
    let generation = read_generation(&paths, &event.interface).saturating_add(1);
    if let Err(e) = write_generation(&paths, &event.interface, generation) {
        // A full run/leasehook must not keep a RELEASE from removing what it
        // should: the counter only tells a waiting worker to stand down, and its
        // hand-over is dropped below anyway.
        log::warn!("{e}; going on without the event counter");
    }
    // A hand-over still here is older than this event: drop it now, under the lock.
    // Its worker, if it has not taken the lock yet, then finds none and stands
    // down; left in place, it would outlive that worker (the soak test found such
    // files when a hook queued behind the one that handed over).
    remove_pending(&paths, &event.interface);
    if event.action() == Action::Remove {
        return remove(fx.kernel, &paths, event).map(HookOutcome::Removed);
    }
    let decide = |outcome: Outcome| match outcome {
        // What is still missing may come: the rest of the wait goes to a worker.
        o @ (Outcome::Partial { .. } | Outcome::Failed(_))
            if cfg.budget > cfg.sync_budget
                && !matches!(&o, Outcome::Failed(e) if !retryable(e)) =>
        {
            let deadline_ms =
                started.saturating_add(u64::try_from(cfg.budget.as_millis()).unwrap_or(u64::MAX));
            let missing = waiting_for(&o);
            hand_over(
                &paths,
                event,
                generation,
                (started, deadline_ms),
                missing,
                worker,
            )
            .map(Next::Stop)
        }
        o => Ok(lease_next(o)),
    };
    wait_and_apply_lease(
        fx,
        &paths,
        event,
        cfg,
        LeaseWait {
            // What the lock wait left of the synchronous budget.
            until: sync_end,
            floor: Duration::ZERO,
            on_cni: || {},
            decide,
        },
    )
}

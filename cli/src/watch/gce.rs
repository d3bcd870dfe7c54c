// SPDX-License-Identifier: Apache-2.0
//! Performs IO: `leasehook watch`'s follower of GCE's metadata (SPEC §3.10,
//! docs/refresh.md).
//!
//! One long poll on the NIC list at a time
//! ([`leasehook_core::source::gce::live`]: `wait_for_change=true` with the last
//! `ETag`, held by the server up to three minutes). Each answer is parsed
//! strictly and compared by MAC with the one before
//! ([`leasehook_core::source::gce::change`]); each NIC it changed, attached or
//! detached that has a recorded plan goes through the refresh path the timer
//! runs, for that interface alone ([`hook::refresh_changed`]). The first answer
//! refreshes every recorded NIC once (whatever changed before the follower
//! started).
//!
//! While the poll is live the follower keeps its heartbeat
//! ([`hook::live`], `run/leasehook/gce-live.json`) fresh, listing the NICs it
//! follows; the timer's `refresh` then asks nothing for them. An error (no
//! answer, an HTTP error, garbage) removes the heartbeat, so the timer takes
//! over, and the follower asks again after a pause of 1 s doubling to 60 s. A
//! NIC whose refresh failed is left out of the heartbeat until one succeeds.
//!
//! The request runs on a thread of its own; the follower looks at the stop
//! flag every 200 ms, so SIGTERM ends it at once, request open or not.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use leasehook_core::apply::state::{self as apply_state, Paths};
use leasehook_core::error::Result as CoreResult;
use leasehook_core::hook::live::{self, HEARTBEAT_EVERY, Heartbeat};
use leasehook_core::hook::{self, HookConfig, RefreshOutcome};
use leasehook_core::model::{IfName, MacAddr};
use leasehook_core::source::gce::change::{Changes, Snapshot, changes};
use leasehook_core::source::gce::live::{Backoff, LONG_POLL_TIMEOUT, Polled};
use leasehook_core::source::gce::{Gce, GceProvider};

use super::Context;

/// How often the stop flag is looked at.
const TICK: Duration = Duration::from_millis(200);

/// Whether this machine's provider is GCE (the configured `provider`, else the
/// boot stage's verdict, else DMI: as the hooks decide).
pub(super) fn applies(ctx: &Context<'_>) -> bool {
    match hook::provider(&ctx.cfg) {
        Ok(p) => p.kind().cloud().followed_live,
        Err(e) => {
            log::warn!("GCE metadata: {e}: not followed");
            false
        }
    }
}

struct Follower {
    paths: Paths,
    cfg: HookConfig,
    gce: Arc<Gce>,
    /// The last answer and its `ETag`.
    last: Option<(Snapshot, String)>,
    /// When the metadata last answered (ms since the epoch).
    answered_ms: u64,
    /// Whether the long poll is live (the last request answered usefully).
    live: bool,
    /// NICs whose refresh failed since their last change.
    failed: BTreeSet<MacAddr>,
    backoff: Backoff,
}

/// Follows the NIC list's long poll below `ctx.root` until `stop` is set.
pub(super) fn follow(ctx: &Context<'_>, stop: &AtomicBool) {
    let endpoint = ctx.cfg.cloud_endpoints.get("gce").map(String::as_str);
    let gce = match GceProvider::try_new(endpoint).and_then(|p| p.client()) {
        Ok(g) => g,
        Err(e) => {
            log::error!("GCE metadata: {e}: not followed");
            return;
        }
    };
    log::info!(
        "GCE metadata: following the NIC list at {} (long poll, {} s)",
        gce.endpoint(),
        LONG_POLL_TIMEOUT.as_secs()
    );
    let mut f = Follower {
        paths: Paths::new(PathBuf::from(ctx.root)),
        cfg: ctx.cfg.clone(),
        gce: Arc::new(gce),
        last: None,
        answered_ms: 0,
        live: false,
        failed: BTreeSet::new(),
        backoff: Backoff::default(),
    };
    let (mut answers, mut errors) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        let Some(result) = f.ask(stop) else { break };
        match result.and_then(|p| Snapshot::parse(&p.body).map(|s| (s, p.etag))) {
            Ok((snapshot, etag)) => {
                answers += 1;
                f.backoff.succeeded();
                f.answered(snapshot, etag);
            }
            Err(e) => {
                errors += 1;
                f.live = false;
                f.clear_heartbeat();
                let pause = f.backoff.failed();
                log::warn!(
                    "GCE metadata: the long poll failed: {e}; the refresh timer serves every NIC \
                     meanwhile; asking again in {} s",
                    pause.as_secs()
                );
                sleep(pause, stop);
            }
        }
    }
    f.clear_heartbeat();
    log::info!("GCE metadata: stopped ({answers} answer(s), {errors} error(s))");
}

/// Sleeps `pause`, or less when `stop` is set.
fn sleep(pause: Duration, stop: &AtomicBool) {
    let end = Instant::now() + pause;
    while !stop.load(Ordering::Relaxed) {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(TICK));
    }
}

impl Follower {
    /// One request, on a thread of its own: its answer, or `None` when `stop`
    /// was set first (the request is abandoned with the process).
    fn ask(&mut self, stop: &AtomicBool) -> Option<CoreResult<Polled>> {
        let (tx, rx) = mpsc::channel();
        let gce = Arc::clone(&self.gce);
        let etag = self.last.as_ref().map(|(_, e)| e.clone());
        let spawned = std::thread::Builder::new()
            .name("gce-long-poll".into())
            .spawn(move || {
                let _ = tx.send(gce.poll_interfaces(etag.as_deref(), LONG_POLL_TIMEOUT));
            });
        if let Err(e) = spawned {
            log::warn!("GCE metadata: no thread for the request: {e}");
            sleep(self.backoff.failed(), stop);
            return (!stop.load(Ordering::Relaxed))
                .then(|| self.gce.poll_interfaces(None, LONG_POLL_TIMEOUT));
        }
        let mut beat = Instant::now();
        loop {
            match rx.recv_timeout(TICK) {
                Ok(r) => return Some(r),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if stop.load(Ordering::Relaxed) {
                        return None;
                    }
                    if beat.elapsed() >= HEARTBEAT_EVERY {
                        beat = Instant::now();
                        self.heartbeat();
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    log::warn!("GCE metadata: the request's thread ended without an answer");
                    return Some(self.gce.poll_interfaces(None, LONG_POLL_TIMEOUT));
                }
            }
        }
    }

    /// A good answer: the NICs it changed are refreshed, the heartbeat renewed.
    fn answered(&mut self, snapshot: Snapshot, etag: String) {
        self.answered_ms = apply_state::unix_ms();
        let what = match &self.last {
            None => {
                log::info!(
                    "GCE metadata: {} NIC(s) listed (ETag {etag}); refreshing every recorded NIC once",
                    snapshot.nics.len()
                );
                None
            }
            Some((_, old)) if *old == etag => {
                log::debug!("GCE metadata: unchanged (ETag {etag})");
                Some(Changes::default())
            }
            Some((old, _)) => Some(changes(old, &snapshot)),
        };
        if !self.live {
            // Errors before: the timer may have run meanwhile, and the follower
            // takes over again now.
            log::info!("GCE metadata: the long poll is live; the timer leaves its NICs to it");
        }
        self.live = true;
        match what {
            None => self.refresh(None, &snapshot.macs()),
            Some(c) if c.is_empty() => {
                log::debug!("GCE metadata: new ETag {etag}, nothing routed changed");
            }
            Some(c) => {
                log::info!("GCE metadata: {c} (ETag {etag})");
                for mac in c.all() {
                    match self.interface_of(mac) {
                        Some(name) => self.refresh(Some(&name), &[mac]),
                        None => log::info!(
                            "GCE metadata: {mac} has no recorded plan: its lease configures it"
                        ),
                    }
                }
            }
        }
        self.last = Some((snapshot, etag));
        self.heartbeat();
    }

    /// The recorded interface with `mac`, if any.
    fn interface_of(&self, mac: MacAddr) -> Option<IfName> {
        let (states, _) = apply_state::list_states(&self.paths);
        states.into_iter().find(|s| s.mac == mac).map(|s| s.name)
    }

    /// The refresh path for `only` (every recorded NIC: `None`); `macs` are the
    /// NICs concerned, left out of the heartbeat while their refresh fails.
    fn refresh(&mut self, only: Option<&IfName>, macs: &[MacAddr]) {
        let outcomes = match hook::refresh_changed(only, &self.cfg) {
            Ok(o) => o,
            Err(e) => {
                log::warn!("GCE metadata: refresh failed: {e}; the timer asks again");
                self.failed.extend(macs);
                return;
            }
        };
        let mut failed = false;
        for outcome in outcomes {
            match outcome {
                RefreshOutcome::Refreshed(name, report) => log::info!(
                    "GCE metadata: {name} refreshed ({} change(s))",
                    report.writes()
                ),
                RefreshOutcome::LinkGone(name, report) => log::info!(
                    "GCE metadata: {name}: link gone, {} change(s)",
                    report.writes()
                ),
                RefreshOutcome::Renamed { from, to, .. } => {
                    log::info!("GCE metadata: {from} is {to} now; routing moved");
                }
                RefreshOutcome::Addressed(name, report)
                | RefreshOutcome::Unlisted(name, report) => log::info!(
                    "GCE metadata: {name}: {} change(s) from the metadata",
                    report.writes()
                ),
                RefreshOutcome::Kept(name, why) => {
                    log::info!("GCE metadata: {name}: unchanged ({why})");
                }
                RefreshOutcome::Unchecked(name, why) => {
                    failed = true;
                    log::warn!("GCE metadata: {name}: not checked: {why}; the timer asks again");
                }
            }
        }
        if failed {
            self.failed.extend(macs);
        } else {
            for m in macs {
                self.failed.remove(m);
            }
        }
    }

    /// Renews the heartbeat while the poll is live.
    fn heartbeat(&self) {
        let Some((snapshot, etag)) = self.last.as_ref().filter(|_| self.live) else {
            return;
        };
        let hb = Heartbeat {
            pid: std::process::id(),
            at_ms: apply_state::unix_ms(),
            answered_ms: self.answered_ms,
            etag: etag.clone(),
            macs: snapshot
                .macs()
                .into_iter()
                .filter(|m| !self.failed.contains(m))
                .collect(),
        };
        if let Err(e) = live::write(&self.paths, &hb) {
            log::warn!("GCE metadata: heartbeat: {e}");
        }
    }

    fn clear_heartbeat(&self) {
        if let Err(e) = live::clear(&self.paths) {
            log::warn!("GCE metadata: heartbeat: {e}");
        }
    }
}

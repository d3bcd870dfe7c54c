// SPDX-License-Identifier: Apache-2.0
//! Performs IO: `leasehook watch`'s follower of a cloud's NIC list, when the
//! cloud's row says it can be followed live
//! ([`leasehook_core::source::provider::Cloud::live`]: GCE's long poll; SPEC
//! §3.10, docs/refresh.md).
//!
//! One request on the list at a time (the row's
//! [`leasehook_core::source::provider::live::LiveFeed`]: GCE's
//! `wait_for_change=true` with the last `ETag`, held by the server up to three
//! minutes). Each answer is compared by MAC with the one before
//! ([`leasehook_core::source::provider::live::changes`]); each NIC it changed,
//! attached or detached that has a recorded plan goes through the refresh path
//! the timer runs, for that interface alone ([`hook::refresh_changed`]). The
//! first answer refreshes every recorded NIC once (whatever changed before the
//! follower started).
//!
//! While the request is live the follower keeps its heartbeat ([`hook::live`],
//! `run/leasehook/<cloud>-live.json`) fresh, listing the NICs it follows; the
//! timer's `refresh` then asks nothing for them. An error (no answer, an HTTP
//! error, garbage) removes the heartbeat, so the timer takes over, and the
//! follower asks again after a pause of 1 s doubling to 60 s. A NIC whose
//! refresh failed is left out of the heartbeat until one succeeds.
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
use leasehook_core::source::provider::live::{Backoff, Changes, Live, LiveFeed, LiveList, changes};
use leasehook_core::source::provider::{Cloud, Setup};

use super::Context;

/// How often the stop flag is looked at.
const TICK: Duration = Duration::from_millis(200);

/// The cloud whose NIC list is followed, when this machine's provider (the
/// configured `provider`, else the boot stage's verdict, else DMI: as the hooks
/// decide) can be followed live.
pub(super) fn applies(ctx: &Context<'_>) -> Option<&'static Cloud> {
    match hook::provider(&ctx.cfg) {
        Ok(p) => Some(p.kind().cloud()).filter(|c| c.live.is_some()),
        Err(e) => {
            log::warn!("the provider: {e}: no NIC list followed live");
            None
        }
    }
}

struct Follower {
    paths: Paths,
    cfg: HookConfig,
    /// The cloud's name (the heartbeat's file) and its follower's label.
    cloud: &'static str,
    label: &'static str,
    feed: Arc<dyn LiveFeed>,
    /// The last answer.
    last: Option<LiveList>,
    /// When the metadata last answered (ms since the epoch).
    answered_ms: u64,
    /// Whether the long poll is live (the last request answered usefully).
    live: bool,
    /// NICs whose refresh failed since their last change.
    failed: BTreeSet<MacAddr>,
    backoff: Backoff,
}

/// Follows `cloud`'s NIC list below `ctx.root` until `stop` is set.
pub(super) fn follow(ctx: &Context<'_>, cloud: &'static Cloud, stop: &AtomicBool) {
    let Some(Live { label, feed }) = cloud.live else {
        return;
    };
    let mut setup = Setup::new(ctx.root);
    setup.endpoint = ctx.cfg.cloud_endpoints.get(cloud.name).map(String::as_str);
    let feed = match feed(&setup) {
        Ok(f) => f,
        Err(e) => {
            log::error!("{label}: {e}: not followed");
            return;
        }
    };
    log::info!("{label}: following {}", feed.describe());
    let mut f = Follower {
        paths: Paths::new(PathBuf::from(ctx.root)),
        cfg: ctx.cfg.clone(),
        cloud: cloud.name,
        label,
        feed: Arc::from(feed),
        last: None,
        answered_ms: 0,
        live: false,
        failed: BTreeSet::new(),
        backoff: Backoff::default(),
    };
    let (mut answers, mut errors) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        let Some(result) = f.ask(stop) else { break };
        match result {
            Ok(list) => {
                answers += 1;
                f.backoff.succeeded();
                f.answered(list);
            }
            Err(e) => {
                errors += 1;
                f.live = false;
                f.clear_heartbeat();
                let pause = f.backoff.failed();
                log::warn!(
                    "{label}: the long poll failed: {e}; the refresh timer serves every NIC \
                     meanwhile; asking again in {} s",
                    pause.as_secs()
                );
                sleep(pause, stop);
            }
        }
    }
    f.clear_heartbeat();
    log::info!("{label}: stopped ({answers} answer(s), {errors} error(s))");
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
    fn ask(&mut self, stop: &AtomicBool) -> Option<CoreResult<LiveList>> {
        let (tx, rx) = mpsc::channel();
        let feed = Arc::clone(&self.feed);
        let version = self.last.as_ref().map(|l| l.version.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("{}-live", self.cloud))
            .spawn(move || {
                let _ = tx.send(feed.poll(version.as_deref()));
            });
        if let Err(e) = spawned {
            log::warn!("{}: no thread for the request: {e}", self.label);
            sleep(self.backoff.failed(), stop);
            return (!stop.load(Ordering::Relaxed)).then(|| self.feed.poll(None));
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
                    log::warn!(
                        "{}: the request's thread ended without an answer",
                        self.label
                    );
                    return Some(self.feed.poll(None));
                }
            }
        }
    }

    /// A good answer: the NICs it changed are refreshed, the heartbeat renewed.
    fn answered(&mut self, list: LiveList) {
        self.answered_ms = apply_state::unix_ms();
        let (label, etag) = (self.label, &list.version);
        let what = match &self.last {
            None => {
                log::info!(
                    "{label}: {} NIC(s) listed (ETag {etag}); refreshing every recorded NIC once",
                    list.nics.len()
                );
                None
            }
            Some(old) if old.version == *etag => {
                log::debug!("{label}: unchanged (ETag {etag})");
                Some(Changes::default())
            }
            Some(old) => Some(changes(&old.nics, &list.nics)),
        };
        if !self.live {
            // Errors before: the timer may have run meanwhile, and the follower
            // takes over again now.
            log::info!("{label}: the long poll is live; the timer leaves its NICs to it");
        }
        self.live = true;
        match what {
            None => self.refresh(None, &list.macs()),
            Some(c) if c.is_empty() => {
                log::debug!("{label}: new ETag {etag}, nothing routed changed");
            }
            Some(c) => {
                log::info!("{label}: {c} (ETag {etag})");
                for mac in c.all() {
                    match self.interface_of(mac) {
                        Some(name) => self.refresh(Some(&name), &[mac]),
                        None => log::info!(
                            "{label}: {mac} has no recorded plan: its lease configures it"
                        ),
                    }
                }
            }
        }
        self.last = Some(list);
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
        let label = self.label;
        let outcomes = match hook::refresh_changed(only, &self.cfg) {
            Ok(o) => o,
            Err(e) => {
                log::warn!("{label}: refresh failed: {e}; the timer asks again");
                self.failed.extend(macs);
                return;
            }
        };
        let mut failed = false;
        for outcome in outcomes {
            match outcome {
                RefreshOutcome::Refreshed(name, report) => {
                    log::info!("{label}: {name} refreshed ({} change(s))", report.writes());
                }
                RefreshOutcome::LinkGone(name, report) => {
                    log::info!("{label}: {name}: link gone, {} change(s)", report.writes());
                }
                RefreshOutcome::Renamed { from, to, .. } => {
                    log::info!("{label}: {from} is {to} now; routing moved");
                }
                RefreshOutcome::Addressed(name, report)
                | RefreshOutcome::Unlisted(name, report) => log::info!(
                    "{label}: {name}: {} change(s) from the metadata",
                    report.writes()
                ),
                RefreshOutcome::Kept(name, why) => {
                    log::info!("{label}: {name}: unchanged ({why})");
                }
                RefreshOutcome::Unchecked(name, why) => {
                    failed = true;
                    log::warn!("{label}: {name}: not checked: {why}; the timer asks again");
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
        let Some(list) = self.last.as_ref().filter(|_| self.live) else {
            return;
        };
        let hb = Heartbeat {
            pid: std::process::id(),
            at_ms: apply_state::unix_ms(),
            answered_ms: self.answered_ms,
            etag: list.version.clone(),
            macs: list
                .macs()
                .into_iter()
                .filter(|m| !self.failed.contains(m))
                .collect(),
        };
        if let Err(e) = live::write(&self.paths, self.cloud, &hb) {
            log::warn!("{}: heartbeat: {e}", self.label);
        }
    }

    fn clear_heartbeat(&self) {
        if let Err(e) = live::clear(&self.paths, self.cloud) {
            log::warn!("{}: heartbeat: {e}", self.label);
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: `leasehook watch`'s follower of hot-plugged NICs (issue 35, SPEC
//! §3.10: the refresh timer, "shorter for a while after a hot-plug").
//!
//! The hook path records a hot-plug (`run/leasehook/hotplug/<ifname>.json`, see
//! `leasehook_core::hook::hotplug`) when it routes a MAC no record names; this
//! follower reads those records and runs the refresh path for that one NIC on the
//! cadence `leasehook_core::cadence` decides (every 5 s for 60 s, done earlier
//! after six quiet checks in a row), then leaves it to the timer and removes the
//! record. The decisions are the pure `Schedule`'s; this file only reads the
//! records, refreshes and sleeps.
//!
//! Idle cost: with nothing hot it looks at the records' folder once a second (one
//! directory read; nothing when the folder does not exist) and otherwise sleeps,
//! waking every [`TICK`] only to see a stop request.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use leasehook_core::apply::state::{Paths, unix_ms};
use leasehook_core::cadence::{Cadence, Check, Done, Schedule};
use leasehook_core::hook::{self, HookConfig, RefreshOutcome, hotplug};
use leasehook_core::model::IfName;

use super::Context;

/// The pause between two looks at the records when nothing is due sooner.
const IDLE: Duration = Duration::from_secs(1);

/// The longest a stop request goes unseen.
const TICK: Duration = Duration::from_millis(100);

/// Follows the hot-plug records below `ctx.root` until `stop` is set.
pub(super) fn follow(ctx: &Context<'_>, stop: &AtomicBool) {
    let paths = Paths::new(ctx.root);
    let mut schedule = Schedule::new(Cadence::DEFAULT);
    let mut checks = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let records = hotplug::hotplugs(&paths);
        for (name, plug) in schedule.observe(&records, unix_ms()) {
            log::debug!("hot-plug of {name} ({}) is past its minute", plug.mac);
            hotplug::forget(&paths, &name);
        }
        for name in schedule.due(unix_ms()) {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let check = refresh_once(&name, &ctx.cfg);
            checks += 1;
            let Some(done) = schedule.checked(&name, check, unix_ms()) else {
                continue;
            };
            log::info!(
                "hot-plug of {name}: {}; left to the refresh timer",
                match done {
                    Done::Settled => "the metadata was complete and unchanged for 30 s",
                    Done::Expired => "its minute is over",
                    Done::Left => "the refresh leaves it alone",
                }
            );
            // Only the record this cadence was for: a newer one (plugged again
            // meanwhile) starts its own.
            if records.get(&name) == hotplug::hotplugs(&paths).get(&name) {
                hotplug::forget(&paths, &name);
            }
        }
        pause(schedule.sleep_for(unix_ms(), IDLE), stop);
    }
    log::info!("hot-plug follower: stopped ({checks} check(s))");
}

/// Sleeps `wait` in ticks, returning early on a stop request.
fn pause(wait: Duration, stop: &AtomicBool) {
    let end = Instant::now() + wait;
    loop {
        let now = Instant::now();
        if stop.load(Ordering::SeqCst) || now >= end {
            return;
        }
        std::thread::sleep((end - now).min(TICK));
    }
}

/// The refresh path the timer runs, for `name` alone; what it found.
fn refresh_once(name: &IfName, cfg: &HookConfig) -> Check {
    let outcomes = match hook::refresh(Some(name), cfg) {
        Ok(o) => o,
        Err(e) => {
            log::warn!("hot-plug of {name}: {e:#}; trying again");
            return Check::Unchecked;
        }
    };
    let mut check = Check::Left;
    for outcome in outcomes {
        check = match outcome {
            RefreshOutcome::Refreshed(n, r) | RefreshOutcome::Addressed(n, r) if n == *name => {
                if r.writes() == 0 {
                    log::debug!("hot-plug of {name}: unchanged");
                    Check::Unchanged
                } else {
                    log::info!("hot-plug of {name}: {} change(s)", r.writes());
                    Check::Changed
                }
            }
            RefreshOutcome::Unchecked(n, why) if n == *name => {
                log::info!("hot-plug of {name}: not checked: {why}; trying again");
                Check::Unchecked
            }
            RefreshOutcome::Kept(n, why) if n == *name => {
                log::info!("hot-plug of {name}: {why}");
                Check::Left
            }
            // Renamed, its link gone, no longer listed: not this NIC any more.
            _ => continue,
        };
    }
    check
}

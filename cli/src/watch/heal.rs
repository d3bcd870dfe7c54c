// SPDX-License-Identifier: Apache-2.0
//! Performs IO: `leasehook watch`'s self-healing follower (SPEC §3.10,
//! docs/refresh.md#self-healing), started on every machine.
//!
//! It listens to the kernel's link, address, route and rule notifications
//! ([`leasehook_core::apply::monitor`]); a notification that may mean something
//! was removed starts a burst, and once the burst is over
//! ([`leasehook_core::heal::Debounce`]) one check puts back what a record says
//! must exist and the kernel no longer holds ([`Healer`]). Idle, the thread
//! sleeps in `recv(2)`, waking every [`POLL`] to look at the stop flag.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use leasehook_core::apply::monitor::{Monitor, Notice, Wait};
use leasehook_core::apply::netlink::NetlinkApplier;
use leasehook_core::heal::run::Healer;
use leasehook_core::heal::{BUSY_RETRY, Debounce};

use super::Context;

/// The longest the thread sleeps before it looks at the stop flag.
const POLL: Duration = Duration::from_millis(150);
/// The pause after the socket failed before it is opened again.
const REOPEN: Duration = Duration::from_secs(5);

/// Puts back what others remove, for the NICs recorded below `ctx.root`, until
/// `stop` is set.
pub(super) fn follow(ctx: &Context<'_>, stop: &AtomicBool) {
    let mut healer = Healer::new(ctx.root, ctx.loaded.settings.metrics_textfile.clone());
    let mut applier: Option<NetlinkApplier> = None;
    let mut debounce = Debounce::default();
    // What was removed while no watcher ran (a restart, the boot) is put back too.
    debounce.retry_at(Instant::now());
    let mut checks = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let mut monitor = match Monitor::try_new() {
            Ok(m) => m,
            Err(e) => {
                log::error!("self-healing: {e}; trying again in {} s", REOPEN.as_secs());
                pause(stop, REOPEN);
                continue;
            }
        };
        log::info!("self-healing: following the kernel's link, address, route and rule changes");
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if debounce.due(now) {
                debounce.checked();
                checks += 1;
                check(&mut healer, &mut applier, &mut debounce, now);
                continue;
            }
            match monitor.wait(debounce.wait(now, POLL)) {
                Ok(Wait::Notices(n)) => {
                    if n.iter().any(Notice::may_remove) {
                        debounce.note(Instant::now());
                    }
                }
                Ok(Wait::Overrun) => {
                    log::debug!("self-healing: notifications were dropped; checking everything");
                    debounce.note(Instant::now());
                }
                Ok(Wait::Timeout) => {}
                Err(e) => {
                    log::warn!("self-healing: {e}; opening the socket again");
                    debounce.note(Instant::now());
                    pause(stop, Duration::from_secs(1));
                    break;
                }
            }
        }
    }
    log::info!("self-healing: stopped ({checks} check(s))");
}

/// One check; a NIC skipped for its lock is looked at again a second later.
fn check(
    healer: &mut Healer,
    applier: &mut Option<NetlinkApplier>,
    debounce: &mut Debounce,
    now: Instant,
) {
    let kernel = match applier {
        Some(a) => a,
        None => match NetlinkApplier::try_new() {
            Ok(a) => applier.insert(a),
            Err(e) => {
                log::warn!("self-healing: {e}");
                debounce.retry_at(now + BUSY_RETRY);
                return;
            }
        },
    };
    match healer.check(kernel, now) {
        Ok(done) => {
            if !done.busy.is_empty() {
                log::debug!(
                    "self-healing: {} busy (a hook or refresh holds the lock); again in {} s",
                    done.busy.join(", "),
                    BUSY_RETRY.as_secs()
                );
                debounce.retry_at(now + BUSY_RETRY);
            }
        }
        Err(e) => {
            log::warn!("self-healing: the kernel cannot be read: {e}");
            // A new connection next time.
            *applier = None;
            debounce.retry_at(now + BUSY_RETRY);
        }
    }
}

/// Sleeps `total`, in steps of [`POLL`], until `stop` is set.
fn pause(stop: &AtomicBool, total: Duration) {
    let end = Instant::now() + total;
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        std::thread::sleep(POLL);
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Pure: the self-healing's decisions (SPEC §3.10, `leasehook watch`).
//!
//! Between leases someone else may take leasehook's routing away (an `ip rule
//! flush`, a network manager that reapplies, SUSE's cloud-netconfig cleanup).
//! The watcher hears it from netlink ([`crate::apply::monitor`]) and, once the
//! burst of notifications is over ([`Debounce`]), compares each NIC's record with
//! what the kernel holds of leasehook's protocol ([`missing`]) and decides per
//! NIC ([`Engine::decide`]):
//!
//! * its lock is held: a hook, worker or refresh is at work and applies the plan
//!   itself ([`Verdict::Busy`]);
//! * its link is gone or is another NIC now: left to the udev rule and the
//!   refresh path, which remove its rules ([`Verdict::NoLink`]);
//! * a conflict is recorded for it: leasehook stopped fighting for it until the
//!   next lease event or refresh that commits it ([`Verdict::Stopped`]);
//! * nothing missing ([`Verdict::Intact`]);
//! * missing, and fewer than [`MAX_REPAIRS`] repairs in the last [`WINDOW`]:
//!   put the missing objects back ([`Verdict::Repair`]);
//! * missing again after that many: stop, and record a conflict naming what was
//!   taken ([`Verdict::GiveUp`]).
//!
//! Times are [`Instant`]s handed in (the caller's clock; tests use their own).
//! The IO half is [`run`].

pub mod run;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::diff::State;
use crate::model::IfName;

/// A burst of notifications is over after this much quiet.
pub const QUIET: Duration = Duration::from_millis(150);
/// A burst that does not end is checked this long after its first notification
/// anyway (a loop that removes a rule every 100 ms is not a reason to wait).
pub const LONGEST_BURST: Duration = Duration::from_millis(500);
/// How many repairs of one NIC [`WINDOW`] allows before leasehook stops.
pub const MAX_REPAIRS: usize = 3;
/// The window of [`MAX_REPAIRS`].
pub const WINDOW: Duration = Duration::from_secs(60);
/// When a NIC was skipped for its lock, it is looked at again this much later
/// (its holder usually has applied the plan by then; then nothing is missing).
pub const BUSY_RETRY: Duration = Duration::from_secs(1);

/// One repair per burst of notifications: when the next check is due.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Debounce {
    first: Option<Instant>,
    last: Option<Instant>,
    retry: Option<Instant>,
}

impl Debounce {
    /// A notification that may mean something was removed, at `now`.
    pub fn note(&mut self, now: Instant) {
        self.first.get_or_insert(now);
        self.last = Some(now);
    }

    /// Check again at `at` even without a notification.
    pub fn retry_at(&mut self, at: Instant) {
        self.retry = Some(self.retry.map_or(at, |r| r.min(at)));
    }

    /// When the next check is due, if one is.
    pub fn due_at(&self) -> Option<Instant> {
        let burst = match (self.first, self.last) {
            (Some(first), Some(last)) => Some((last + QUIET).min(first + LONGEST_BURST)),
            _ => None,
        };
        match (burst, self.retry) {
            (Some(b), Some(r)) => Some(b.min(r)),
            (b, r) => b.or(r),
        }
    }

    /// Whether a check is due at `now`.
    pub fn due(&self, now: Instant) -> bool {
        self.due_at().is_some_and(|at| at <= now)
    }

    /// How long to wait for notifications at `now`: until the check is due, at
    /// most `poll`.
    pub fn wait(&self, now: Instant, poll: Duration) -> Duration {
        self.due_at()
            .map_or(poll, |at| at.saturating_duration_since(now).min(poll))
    }

    /// A check ran: the burst and the retry are served.
    pub fn checked(&mut self) {
        *self = Self::default();
    }
}

/// The objects of `recorded` that `owned` (what the kernel holds of leasehook's
/// protocol) does not hold. A rule recorded without a priority (the kernel
/// chose one) is held when a rule of the same source and table is.
pub fn missing(recorded: &State, owned: &State) -> State {
    State {
        rules: recorded
            .rules
            .iter()
            .filter(|r| match r.priority {
                Some(_) => !owned.rules.contains(*r),
                None => !owned
                    .rules
                    .iter()
                    .any(|o| o.from == r.from && o.table == r.table),
            })
            .cloned()
            .collect(),
        routes: recorded.routes.difference(&owned.routes).cloned().collect(),
        addresses: recorded
            .addresses
            .difference(&owned.addresses)
            .cloned()
            .collect(),
    }
}

/// The objects of a set in words, as `status` names drift: `rule from ... lookup
/// 10001 priority 10001; route ...`.
pub fn objects_text(s: &State) -> String {
    s.rules
        .iter()
        .map(|r| format!("rule {r}"))
        .chain(s.routes.iter().map(|r| format!("route {r}")))
        .chain(s.addresses.iter().map(|a| format!("address {a}")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// What the watcher knows of one recorded NIC when it checks.
#[derive(Debug, Clone, Copy)]
pub struct Nic<'a> {
    /// The interface.
    pub name: &'a IfName,
    /// What its record says must exist.
    pub recorded: &'a State,
    /// Its link exists, with the MAC the record names.
    pub link: bool,
    /// Its lock was free (and is now the watcher's).
    pub lock_free: bool,
    /// A conflict is recorded for it.
    pub stopped: bool,
}

/// What to do for one NIC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Everything recorded is there.
    Intact,
    /// Its lock is held: its holder applies the plan.
    Busy,
    /// Its link is gone (or another NIC's): the udev rule and refresh path's.
    NoLink,
    /// A conflict is recorded: not fought for until a lease event or refresh.
    Stopped,
    /// Put these back.
    Repair(State),
    /// Removed again after [`MAX_REPAIRS`] repairs within [`WINDOW`]: stop, and
    /// record a conflict naming these.
    GiveUp(State),
}

/// The repairs made per NIC, for [`MAX_REPAIRS`] within [`WINDOW`].
#[derive(Debug, Clone, Default)]
pub struct Engine {
    repairs: BTreeMap<IfName, Vec<Instant>>,
    given_up: BTreeSet<IfName>,
}

impl Engine {
    /// A new engine: no repair made yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// What to do for `nic` at `now`, `owned` being what the kernel holds of
    /// leasehook's (looked at only when the NIC is neither stopped nor busy).
    pub fn decide(&mut self, nic: &Nic<'_>, owned: &State, now: Instant) -> Verdict {
        if nic.stopped {
            return Verdict::Stopped;
        }
        if self.given_up.remove(nic.name) {
            // The conflict record went: a lease event or refresh committed the
            // NIC again, so the count starts afresh.
            self.repairs.remove(nic.name);
        }
        if !nic.lock_free {
            return Verdict::Busy;
        }
        if !nic.link {
            return Verdict::NoLink;
        }
        let gone = missing(nic.recorded, owned);
        if gone.is_empty() {
            return Verdict::Intact;
        }
        let made = self.repairs.entry(nic.name.clone()).or_default();
        made.retain(|t| now.saturating_duration_since(*t) < WINDOW);
        if made.len() >= MAX_REPAIRS {
            self.given_up.insert(nic.name.clone());
            return Verdict::GiveUp(gone);
        }
        made.push(now);
        Verdict::Repair(gone)
    }

    /// How many repairs of `name` are counted in the window now.
    pub fn repairs(&self, name: &IfName) -> usize {
        self.repairs.get(name).map_or(0, Vec::len)
    }

    /// Forgets the NICs that have no record any more (a RELEASE, a detached NIC).
    pub fn keep_only(&mut self, recorded: &BTreeSet<IfName>) {
        self.repairs.retain(|n, _| recorded.contains(n));
        self.given_up.retain(|n| recorded.contains(n));
    }
}

/// The conflict record's message when leasehook stops fighting for `name`.
pub fn conflict_message(name: &IfName, taken: &State) -> String {
    format!(
        "{name}: removed by something else again after {MAX_REPAIRS} repairs within {} s; leasehook stopped putting it back until the next lease event or refresh of {name} (docs/refresh.md#self-healing): {}",
        WINDOW.as_secs(),
        objects_text(taken)
    )
}

#[cfg(test)]
mod tests;

// SPDX-License-Identifier: Apache-2.0
//! Pure: the hot-plug cadence (issue 35, SPEC §3.10 "shorter for a while after a
//! hot-plug"): when to refresh a NIC that has just appeared, and when to leave it
//! to the 60 s timer again.
//!
//! A hot-plug (a lease on a MAC leasehook had not routed, a NIC without DHCP
//! configured for the first time) is recorded by the hook path with its time
//! ([`crate::hook::hotplug`]); `leasehook watch` reads the records and asks a
//! [`Schedule`] which NICs are due. The schedule holds no clock: every call is
//! handed `now` (Unix ms, the records' clock), so tests drive it with plain
//! numbers.
//!
//! The rule ([`Cadence::DEFAULT`]): a check every 5 s from the hot-plug, for 60 s;
//! earlier done once six checks in a row (30 s, cloud-init's whole hot-plug
//! window) found the metadata complete and nothing to change; a check that
//! changed something starts that count again. A check that could not be made
//! (the metadata did not answer, or was incomplete) neither counts nor stops the
//! cadence. A NIC the refresh leaves alone (unmanaged, the CNI's, gone) is done.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::model::{IfName, MacAddr};

/// How often and for how long a hot-plugged NIC is refreshed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cadence {
    /// The pause between two checks (and from the hot-plug to the first).
    pub interval: Duration,
    /// How long after the hot-plug the cadence lasts.
    pub window: Duration,
    /// Checks in a row that found nothing to change after which the NIC is done
    /// before the window ends.
    pub settle: u32,
}

impl Cadence {
    /// Every 5 s for 60 s, done after six quiet checks in a row.
    pub const DEFAULT: Self = Self {
        interval: Duration::from_secs(5),
        window: Duration::from_secs(60),
        settle: 6,
    };
}

impl Default for Cadence {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A hot-plug as its record says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HotPlug {
    /// The NIC's MAC.
    pub mac: MacAddr,
    /// When it was recorded (Unix ms).
    pub at_ms: u64,
}

/// What one check of a hot NIC found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// The metadata was complete and something was written.
    Changed,
    /// The metadata was complete and nothing changed.
    Unchanged,
    /// The metadata could not be asked, or was incomplete: try again on the
    /// cadence.
    Unchecked,
    /// The refresh leaves this NIC alone (unmanaged, the CNI's, its link gone,
    /// no plan): nothing more to check.
    Left,
}

/// Why a NIC left the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Done {
    /// [`Cadence::settle`] quiet checks in a row.
    Settled,
    /// The window ended.
    Expired,
    /// [`Check::Left`].
    Left,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hot {
    plug: HotPlug,
    next_ms: u64,
    quiet: u32,
}

/// The hot NICs and when each is due.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Schedule {
    cadence: Cadence,
    hot: BTreeMap<IfName, Hot>,
    /// Hot-plugs already done, so that their record (still there until removed)
    /// does not start them again.
    done: BTreeMap<IfName, HotPlug>,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Schedule {
    /// An empty schedule with `cadence`.
    pub fn new(cadence: Cadence) -> Self {
        Self {
            cadence,
            hot: BTreeMap::new(),
            done: BTreeMap::new(),
        }
    }

    /// Takes the records as they are now: a new hot-plug (a name not seen, or a
    /// newer record for it) is scheduled, its first check one interval after it
    /// was recorded; a NIC whose record is gone leaves the schedule. Returns the
    /// hot-plugs whose window had already ended when first seen (their records
    /// can go).
    pub fn observe(
        &mut self,
        records: &BTreeMap<IfName, HotPlug>,
        now_ms: u64,
    ) -> Vec<(IfName, HotPlug)> {
        self.hot.retain(|name, _| records.contains_key(name));
        self.done
            .retain(|name, plug| records.get(name) == Some(plug));
        let mut stale = Vec::new();
        for (name, plug) in records {
            if self.done.get(name) == Some(plug)
                || self.hot.get(name).is_some_and(|h| h.plug == *plug)
            {
                continue;
            }
            if now_ms >= self.end_ms(plug) {
                self.done.insert(name.clone(), *plug);
                stale.push((name.clone(), *plug));
                continue;
            }
            let next_ms = plug.at_ms.saturating_add(ms(self.cadence.interval));
            self.hot.insert(
                name.clone(),
                Hot {
                    plug: *plug,
                    next_ms,
                    quiet: 0,
                },
            );
        }
        stale
    }

    fn end_ms(&self, plug: &HotPlug) -> u64 {
        plug.at_ms.saturating_add(ms(self.cadence.window))
    }

    /// The NICs due for a check at `now_ms`, in name order.
    pub fn due(&self, now_ms: u64) -> Vec<IfName> {
        self.hot
            .iter()
            .filter(|(_, h)| h.next_ms <= now_ms)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Records what the check of `name` at `now_ms` found: the next check one
    /// interval later, or the NIC done (and why).
    pub fn checked(&mut self, name: &IfName, check: Check, now_ms: u64) -> Option<Done> {
        let mut hot = *self.hot.get(name)?;
        let done = match check {
            Check::Left => Some(Done::Left),
            Check::Unchanged => {
                hot.quiet = hot.quiet.saturating_add(1);
                (hot.quiet >= self.cadence.settle).then_some(Done::Settled)
            }
            Check::Changed => {
                hot.quiet = 0;
                None
            }
            Check::Unchecked => None,
        };
        hot.next_ms = now_ms.saturating_add(ms(self.cadence.interval));
        let done = done.or_else(|| (hot.next_ms > self.end_ms(&hot.plug)).then_some(Done::Expired));
        if done.is_some() {
            self.hot.remove(name);
            self.done.insert(name.clone(), hot.plug);
        } else {
            self.hot.insert(name.clone(), hot);
        }
        done
    }

    /// The NICs hot now.
    pub fn hot(&self) -> impl Iterator<Item = (&IfName, &HotPlug)> {
        self.hot.iter().map(|(n, h)| (n, &h.plug))
    }

    /// How long the follower may sleep from `now_ms`: until the next check, or
    /// `idle` (the pause between two looks at the records) when that is sooner
    /// or nothing is hot.
    pub fn sleep_for(&self, now_ms: u64, idle: Duration) -> Duration {
        self.hot
            .values()
            .map(|h| Duration::from_millis(h.next_ms.saturating_sub(now_ms)))
            .min()
            .map_or(idle, |d| d.min(idle))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(n: &str) -> IfName {
        IfName::try_new(n).unwrap()
    }

    fn plug(at_ms: u64) -> HotPlug {
        HotPlug {
            mac: "02:00:00:00:00:02".parse().unwrap(),
            at_ms,
        }
    }

    fn records(list: &[(&str, HotPlug)]) -> BTreeMap<IfName, HotPlug> {
        list.iter().map(|(n, p)| (name(n), *p)).collect()
    }

    /// Runs the schedule on a fake clock from `start` to `end` (ms), answering
    /// each check with `answer(check number, now)`; returns the check times and
    /// how the NIC was done.
    fn drive(
        s: &mut Schedule,
        start: u64,
        end: u64,
        mut answer: impl FnMut(usize, u64) -> Check,
    ) -> (Vec<u64>, Option<Done>) {
        let (mut times, mut done) = (Vec::new(), None);
        let mut now = start;
        while now <= end && done.is_none() {
            for n in s.due(now) {
                times.push(now);
                done = s.checked(&n, answer(times.len(), now), now);
            }
            now += 100;
        }
        (times, done)
    }

    #[test]
    fn every_5_s_for_60_s_then_the_timer() {
        let mut s = Schedule::new(Cadence::DEFAULT);
        assert!(
            s.observe(&records(&[("eth1", plug(1_000))]), 1_000)
                .is_empty()
        );
        assert!(s.due(1_000).is_empty());
        // Something changes every time (the metadata keeps moving): never settled.
        let (times, done) = drive(&mut s, 1_000, 100_000, |_, _| Check::Changed);
        let want: Vec<u64> = (1..=12).map(|k| 1_000 + k * 5_000).collect();
        assert_eq!(times, want);
        assert_eq!(done, Some(Done::Expired));
        assert!(s.due(100_000).is_empty());
        // Its record, still there, does not start it again.
        assert!(
            s.observe(&records(&[("eth1", plug(1_000))]), 100_000)
                .is_empty()
        );
        assert!(s.hot().next().is_none());
    }

    #[test]
    fn six_quiet_checks_in_a_row_end_it_early_and_a_change_restarts_the_count() {
        let mut s = Schedule::new(Cadence::DEFAULT);
        s.observe(&records(&[("eth1", plug(0))]), 0);
        let (times, done) = drive(&mut s, 0, 100_000, |_, _| Check::Unchanged);
        assert_eq!(times, [5_000, 10_000, 15_000, 20_000, 25_000, 30_000]);
        assert_eq!(done, Some(Done::Settled));

        // A secondary IP that the metadata adds at the third check: counted again
        // from there.
        let mut s = Schedule::new(Cadence::DEFAULT);
        s.observe(&records(&[("eth1", plug(0))]), 0);
        let (times, done) = drive(&mut s, 0, 100_000, |k, _| {
            if k == 3 {
                Check::Changed
            } else {
                Check::Unchanged
            }
        });
        assert_eq!(times.len(), 9, "{times:?}");
        assert_eq!(done, Some(Done::Settled));
    }

    #[test]
    fn unchecked_neither_counts_nor_stops_and_left_stops_at_once() {
        let mut s = Schedule::new(Cadence::DEFAULT);
        s.observe(&records(&[("eth1", plug(0))]), 0);
        let (times, done) = drive(&mut s, 0, 100_000, |_, _| Check::Unchecked);
        assert_eq!(times.len(), 12);
        assert_eq!(done, Some(Done::Expired));

        let mut s = Schedule::new(Cadence::DEFAULT);
        s.observe(&records(&[("eth1", plug(0))]), 0);
        let (times, done) = drive(&mut s, 0, 100_000, |_, _| Check::Left);
        assert_eq!((times.len(), done), (1, Some(Done::Left)));
    }

    #[test]
    fn a_record_past_its_window_is_stale_and_a_new_one_starts_again() {
        let mut s = Schedule::new(Cadence::DEFAULT);
        // The watcher started long after the hot-plug (a restart): nothing to do.
        let stale = s.observe(&records(&[("eth1", plug(0))]), 60_000);
        assert_eq!(stale, [(name("eth1"), plug(0))]);
        assert!(s.hot().next().is_none());
        // The NIC is plugged again (a newer record): hot again.
        s.observe(&records(&[("eth1", plug(70_000))]), 70_000);
        assert_eq!(s.due(75_000), [name("eth1")]);
        // Its record removed (flush): off the schedule.
        s.observe(&BTreeMap::new(), 76_000);
        assert!(s.due(80_000).is_empty());
    }

    #[test]
    fn the_follower_sleeps_until_the_next_check_or_its_idle_pause() {
        let idle = Duration::from_secs(1);
        let mut s = Schedule::new(Cadence::DEFAULT);
        assert_eq!(s.sleep_for(0, idle), idle);
        s.observe(&records(&[("eth1", plug(0)), ("eth2", plug(4_700))]), 4_500);
        assert_eq!(s.sleep_for(4_500, idle), Duration::from_millis(500));
        assert_eq!(s.sleep_for(5_000, idle), Duration::ZERO);
        s.checked(&name("eth1"), Check::Unchanged, 5_000);
        // eth2's first check at 9.7 s, eth1's second at 10 s: the idle pause first.
        assert_eq!(s.sleep_for(5_000, idle), idle);
        assert_eq!(s.sleep_for(9_000, idle), Duration::from_millis(700));
    }
}

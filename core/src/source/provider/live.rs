// SPDX-License-Identifier: Apache-2.0
//! Pure: a cloud's NIC list followed live, as `leasehook watch` follows it (SPEC
//! §3.10, docs/refresh.md). A cloud whose metadata can be waited on (GCE's long
//! poll) says so in its row ([`Live`]) and hands the watcher a [`LiveFeed`]: one
//! request at a time, each answer a [`LiveList`] (its version, and what each NIC
//! says that leasehook routes). The watcher compares each answer with the one
//! before by MAC ([`changes`]), refreshes the NICs that changed, backs off after
//! errors ([`Backoff`]) and keeps a heartbeat the timer's `refresh` reads; none of
//! that is the cloud's.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use super::Setup;
use crate::error::Result;
use crate::model::MacAddr;

/// How `leasehook watch` follows a cloud's NIC list: a cloud row's
/// [`super::Cloud::live`].
#[derive(Debug, Clone, Copy)]
pub struct Live {
    /// Names the follower in the log and in why the timer leaves a NIC to it
    /// (`GCE metadata`).
    pub label: &'static str,
    /// Builds the feed from the configuration (the cloud's endpoint).
    pub feed: fn(&Setup<'_>) -> Result<Box<dyn LiveFeed>>,
}

/// A cloud's NIC list as the watcher asks it: one request at a time, on a thread
/// of its own (so `Send + Sync`).
pub trait LiveFeed: Send + Sync {
    /// Where and how it asks, for the log (`the NIC list at http://... (long
    /// poll, 180 s)`).
    fn describe(&self) -> String;

    /// One request: the list once it differs from the answer whose version is
    /// `last` (`None`: at once), or when the service's hold ends. An answer that
    /// is not the list (garbage, an HTTP error) is an error, never an empty list.
    fn poll(&self, last: Option<&str>) -> Result<LiveList>;
}

/// One answer of a followed NIC list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveList {
    /// Its version (GCE's `ETag`), which the next request waits on.
    pub version: String,
    /// What each listed NIC says that leasehook routes, by MAC, as the cloud
    /// renders it: an equal rendering means nothing routed changed.
    pub nics: BTreeMap<MacAddr, String>,
}

impl LiveList {
    /// The MACs it lists.
    pub fn macs(&self) -> Vec<MacAddr> {
        self.nics.keys().copied().collect()
    }
}

/// What a new answer changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Listed in both, routing view different.
    pub changed: Vec<MacAddr>,
    /// Listed only now.
    pub added: Vec<MacAddr>,
    /// Listed only before.
    pub removed: Vec<MacAddr>,
}

impl Changes {
    /// Nothing leasehook routes changed.
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty() && self.added.is_empty() && self.removed.is_empty()
    }

    /// Every MAC concerned, changed first, then added, then removed.
    pub fn all(&self) -> Vec<MacAddr> {
        let mut v = self.changed.clone();
        v.extend(&self.added);
        v.extend(&self.removed);
        v
    }
}

impl fmt::Display for Changes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |v: &[MacAddr]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
        let mut parts = Vec::new();
        for (what, v) in [
            ("changed", &self.changed),
            ("added", &self.added),
            ("removed", &self.removed),
        ] {
            if !v.is_empty() {
                parts.push(format!("{what} {}", list(v).join(", ")));
            }
        }
        if parts.is_empty() {
            f.write_str("nothing routed changed")
        } else {
            f.write_str(&parts.join("; "))
        }
    }
}

/// Which NICs `new` changed against `old`, by MAC: a view that differs, a MAC
/// only in `new` (attached), a MAC only in `old` (detached).
pub fn changes<V: PartialEq>(old: &BTreeMap<MacAddr, V>, new: &BTreeMap<MacAddr, V>) -> Changes {
    let mut out = Changes::default();
    for (mac, view) in new {
        match old.get(mac) {
            None => out.added.push(*mac),
            Some(before) if before != view => out.changed.push(*mac),
            Some(_) => {}
        }
    }
    out.removed = old
        .keys()
        .filter(|m| !new.contains_key(m))
        .copied()
        .collect();
    out
}

/// The first pause after an error.
pub const BACKOFF_FIRST: Duration = Duration::from_secs(1);

/// The longest pause after errors.
pub const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// The pause after each error in a row: [`BACKOFF_FIRST`] doubling to
/// [`BACKOFF_MAX`]; an answer resets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            next: BACKOFF_FIRST,
        }
    }
}

impl Backoff {
    /// The pause after one more error.
    pub fn failed(&mut self) -> Duration {
        let now = self.next;
        self.next = (self.next * 2).min(BACKOFF_MAX);
        now
    }

    /// An answer came: the next error pauses [`BACKOFF_FIRST`] again.
    pub fn succeeded(&mut self) {
        self.next = BACKOFF_FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_a_minute_and_resets() {
        let mut b = Backoff::default();
        let seen: Vec<u64> = (0..8).map(|_| b.failed().as_secs()).collect();
        assert_eq!(seen, [1, 2, 4, 8, 16, 32, 60, 60]);
        b.succeeded();
        assert_eq!(b.failed(), BACKOFF_FIRST);
    }
}

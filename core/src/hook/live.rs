// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the heartbeat of `leasehook watch`'s live follower of a cloud's
//! NIC list, `run/leasehook/<cloud>-live.json` (`gce-live.json`; SPEC §3.10,
//! docs/refresh.md).
//!
//! While the follower's request on the NIC list is live (its last answer was
//! good and its next request is open) it keeps this record fresh: rewritten
//! after every answer and every [`HEARTBEAT_EVERY`] while it waits, removed
//! after an error and when it stops. The timer's `refresh` reads it: a NIC the
//! record lists ([`Heartbeat::covers`]), on that cloud, with a record younger than
//! [`HEARTBEAT_STALE`], is not asked about (the follower routes its changes
//! within seconds); its link checks (gone, renamed) still run. A follower that
//! died leaves a record that goes stale, and the timer asks again as before.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::apply::state::{self, Paths};
use crate::model::MacAddr;

/// The record's file name below `run/leasehook` for the cloud `cloud` (its
/// row's name).
pub fn file_name(cloud: &str) -> String {
    format!("{cloud}-live.json")
}

/// How often the follower rewrites it while its request is open.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(10);

/// How old a record may be and still be believed.
pub const HEARTBEAT_STALE: Duration = Duration::from_secs(30);

/// The record's size limit when read.
const MAX_BYTES: u64 = 16 * 1024;

/// What the follower says about its long poll.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    /// The follower's process.
    pub pid: u32,
    /// When it was written (ms since the epoch).
    pub at_ms: u64,
    /// When the metadata last answered.
    pub answered_ms: u64,
    /// The list's `ETag` then.
    pub etag: String,
    /// The NICs the list names: the ones followed.
    pub macs: Vec<MacAddr>,
}

impl Heartbeat {
    /// Whether the follower covers `mac` at `now_ms`: listed, and the record
    /// younger than [`HEARTBEAT_STALE`] (a clock that went back counts as fresh
    /// only up to the same bound).
    pub fn covers(&self, mac: MacAddr, now_ms: u64) -> bool {
        let stale = u64::try_from(HEARTBEAT_STALE.as_millis()).unwrap_or(u64::MAX);
        now_ms.abs_diff(self.at_ms) < stale && self.macs.contains(&mac)
    }

    /// Why the timer leaves `mac` to the follower named `label` (`GCE
    /// metadata`), for `refresh -v` and the last-event record.
    pub fn reason(&self, label: &str, now_ms: u64) -> String {
        format!(
            "followed live by `leasehook watch` ({label}, pid {}, answered {} s ago): \
             the metadata not asked",
            self.pid,
            now_ms.saturating_sub(self.answered_ms) / 1000
        )
    }
}

/// Writes the record of the cloud `cloud` (atomically).
pub fn write(paths: &Paths, cloud: &str, hb: &Heartbeat) -> crate::error::Result<()> {
    let bytes = serde_json::to_vec(hb).unwrap_or_default();
    state::write_run_file(paths, None, &file_name(cloud), &bytes, 0o644)
}

/// Removes the record of the cloud `cloud` (missing is fine).
pub fn clear(paths: &Paths, cloud: &str) -> crate::error::Result<()> {
    state::remove_run_file(paths, None, &file_name(cloud))
}

/// The record of the cloud `cloud`, `None` when missing or unreadable (logged
/// at debug: the timer then asks as it always did).
pub fn read(paths: &Paths, cloud: &str) -> Option<Heartbeat> {
    let name = file_name(cloud);
    let bytes = state::read_run_file(paths, None, &name, MAX_BYTES)
        .inspect_err(|e| log::debug!("{e}"))
        .ok()??;
    serde_json::from_slice(&bytes)
        .inspect_err(|e| log::debug!("{name}: {e}"))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hb(at_ms: u64) -> Heartbeat {
        Heartbeat {
            pid: 7,
            at_ms,
            answered_ms: at_ms - 5000,
            etag: "ab".to_owned(),
            macs: vec!["42:01:0a:00:00:0a".parse().unwrap()],
        }
    }

    #[test]
    fn covers_listed_macs_while_fresh() {
        let mac: MacAddr = "42:01:0a:00:00:0a".parse().unwrap();
        let other: MacAddr = "42:01:0a:00:00:0b".parse().unwrap();
        let h = hb(100_000);
        assert!(h.covers(mac, 100_000));
        assert!(h.covers(mac, 129_999));
        assert!(!h.covers(mac, 130_000));
        assert!(h.covers(mac, 80_000));
        assert!(!h.covers(mac, 60_000));
        assert!(!h.covers(other, 100_000));
        assert!(
            h.reason("GCE metadata", 110_000)
                .contains("(GCE metadata, pid 7, answered 15 s ago)")
        );
    }

    #[test]
    fn written_read_and_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::new(dir.path());
        assert_eq!(read(&paths, "gce"), None);
        write(&paths, "gce", &hb(100_000)).unwrap();
        assert!(paths.run_dir().join("gce-live.json").is_file());
        assert_eq!(read(&paths, "gce"), Some(hb(100_000)));
        assert_eq!(read(&paths, "other"), None);
        std::fs::write(paths.run_dir().join("gce-live.json"), b"{garbage").unwrap();
        assert_eq!(read(&paths, "gce"), None);
        clear(&paths, "gce").unwrap();
        clear(&paths, "gce").unwrap();
        assert_eq!(read(&paths, "gce"), None);
    }
}

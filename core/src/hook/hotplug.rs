// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the hot-plug records, `<root>/run/leasehook/hotplug/<ifname>.json`
//! (`{"mac": "...", "at_ms": N}`), which `leasehook watch` reads to refresh a new
//! NIC every 5 s for a minute ([`crate::cadence`]).
//!
//! Written by the hook path (the hook and its worker) when a lease is applied on
//! a MAC no recorded state names (a NIC that appeared, or one that leasehook had
//! not routed), and by `refresh` when it configures a NIC without DHCP for the
//! first time (the udev add path). Not for the primary NIC (nothing a secondary IP
//! added to it changes a table of leasehook's, unless configured to; the timer
//! follows it). One small file per NIC, replaced atomically, 0600, through the
//! run-file helpers of [`crate::apply::state`]; a record that cannot be written is
//! logged and changes nothing else (the timer still follows the NIC).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::apply::state::{self, Paths};
use crate::cadence::HotPlug;
use crate::error::Error;
use crate::model::{IfName, MacAddr};

/// The folder below `run/leasehook`.
pub const HOTPLUG: &str = "hotplug";

/// The largest record read, in bytes.
const MAX_BYTES: u64 = 4096;

/// Whether no recorded state names `mac` (a NIC leasehook has not routed this
/// boot). A state folder that cannot be read says nothing: not new.
pub(super) fn is_new_mac(paths: &Paths, mac: MacAddr) -> bool {
    let (states, errors) = state::list_states(paths);
    errors.is_empty() && !states.iter().any(|s| s.mac == mac)
}

/// Records a hot-plug of `name` (`mac`) now; a failure is logged.
pub(super) fn record(paths: &Paths, name: &IfName, mac: MacAddr) {
    let body = json!({"mac": mac.to_string(), "at_ms": state::unix_ms()}).to_string();
    match state::write_run_file(
        paths,
        Some(HOTPLUG),
        &format!("{}.json", name.as_str()),
        body.as_bytes(),
        0o600,
    ) {
        Ok(()) => {
            log::debug!(
                "{name}: {mac} is new: refreshed every 5 s for a minute by leasehook watch"
            );
        }
        Err(e) => log::warn!("{e}; the hot-plug of {name} is not recorded (the timer follows it)"),
    }
}

/// Removes `name`'s record (missing is fine); a failure is logged.
pub fn forget(paths: &Paths, name: &IfName) {
    if let Err(e) = state::remove_run_file(paths, Some(HOTPLUG), &format!("{}.json", name.as_str()))
    {
        log::warn!("{e}");
    }
}

/// What is wrong with a hot-plug record.
#[derive(Debug, thiserror::Error)]
pub enum BadRecord {
    /// Not JSON.
    #[error("{0}")]
    NotJson(#[source] serde_json::Error),
    /// No MAC, or not one.
    #[error("no MAC")]
    NoMac,
    /// No time.
    #[error("no time")]
    NoTime,
    /// The file is not named after an interface.
    #[error("not an interface name: {0}")]
    Name(#[source] crate::model::Problem),
}

/// Every readable record by interface; an unreadable or malformed one is logged
/// and skipped.
pub fn hotplugs(paths: &Paths) -> BTreeMap<IfName, HotPlug> {
    let (list, errors) = state::list_records(paths, HOTPLUG, |dir, file, stem| {
        let Some(bytes) = dir.read(file, MAX_BYTES).map_err(|p| dir.error(file, &p))? else {
            return Ok(None);
        };
        let bad = |why: BadRecord| Error::Corrupt {
            path: dir.path().join(file).display().to_string(),
            what: "not a hot-plug record",
            source: Box::new(why),
        };
        let v: Value = serde_json::from_slice(&bytes).map_err(|e| bad(BadRecord::NotJson(e)))?;
        let mac: MacAddr = v
            .get("mac")
            .and_then(Value::as_str)
            .and_then(|m| m.parse().ok())
            .ok_or_else(|| bad(BadRecord::NoMac))?;
        let at_ms = v
            .get("at_ms")
            .and_then(Value::as_u64)
            .ok_or_else(|| bad(BadRecord::NoTime))?;
        let name = IfName::try_new(stem).map_err(|p| bad(BadRecord::Name(p)))?;
        Ok(Some((name, HotPlug { mac, at_ms })))
    });
    for e in errors {
        log::warn!("{e}");
    }
    list.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_written_read_back_and_forgotten() {
        let root = tempfile::tempdir().unwrap();
        let paths = Paths::new(root.path());
        let name = IfName::try_new("eth1").unwrap();
        let mac: MacAddr = "02:00:00:00:00:02".parse().unwrap();
        assert!(is_new_mac(&paths, mac));
        assert!(hotplugs(&paths).is_empty());
        record(&paths, &name, mac);
        let got = hotplugs(&paths);
        assert_eq!(got.len(), 1);
        assert_eq!(got[&name].mac, mac);
        assert!(got[&name].at_ms > 0);
        // Garbage beside it is skipped, never a panic.
        state::write_run_file(&paths, Some(HOTPLUG), "eth2.json", b"{", 0o600).unwrap();
        assert_eq!(hotplugs(&paths).len(), 1);
        forget(&paths, &name);
        assert!(hotplugs(&paths).is_empty());
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the per-NIC last event record,
//! `<root>/run/leasehook/last-event/<ifname>.json`, which `leasehook status`
//! reads: which client ran the hook and why (its reason), when, and what came of
//! it (applied with N changes, unchanged, partial, deferred to a worker, removed,
//! kept and why, not checked (a refresh the metadata did not answer), a
//! conflict naming the object, an error with its cause, unmanaged).
//!
//! Written by the hook binary after each event, by the detached worker when its
//! wait ends and by `leasehook refresh` per NIC: one small file per NIC, replaced
//! atomically, 0600, through the run-file helpers of [`crate::apply::state`] (no
//! symlink followed, reads capped). The JSON is built and read by hand
//! ([`serde_json::Value`]): a handful of fields, no derive.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::outcome::HookOutcome;
use crate::apply::Report;
use crate::apply::state::{self, Paths};
use crate::error::{Error, Result};
use crate::model::IfName;

/// The folder below `run/leasehook`.
pub const LAST_EVENT: &str = "last-event";

/// The version written into the record; another is refused.
pub const LAST_EVENT_VERSION: u64 = 1;

/// The largest record read, in bytes (a record is well under 8 KiB).
pub const MAX_LAST_EVENT_BYTES: u64 = 64 * 1024;

/// The longest text kept in a record (an error's cause, a reason).
const MAX_TEXT: usize = 4096;

/// What came of an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventOutcome {
    /// The plan was applied with this many changes (at least one).
    Applied(usize),
    /// The plan was applied and the kernel already held it.
    Unchanged,
    /// The wait ended without the metadata agreeing: what the lease proves was
    /// applied, with this many changes (what is missing is in the state file).
    Partial(usize),
    /// The wait continues in the detached worker with this pid.
    Deferred(u32),
    /// The family's objects were removed (this many).
    Removed(usize),
    /// Nothing changed, and why.
    Kept(String),
    /// A refresh could not ask the metadata (why): what was applied stays,
    /// and a change of the NIC's metadata is not followed until it answers.
    Unchecked(String),
    /// Another NIC's table, or an object leasehook does not own in the way.
    Conflict(String),
    /// The event failed; the cause.
    Error(String),
    /// The NIC is listed in `unmanaged`.
    Unmanaged,
}

impl EventOutcome {
    /// The outcome's name in the record and in `status --format json`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Applied(_) => "applied",
            Self::Unchanged => "unchanged",
            Self::Partial(_) => "partial",
            Self::Deferred(_) => "deferred",
            Self::Removed(_) => "removed",
            Self::Kept(_) => "kept",
            Self::Unchecked(_) => "unchecked",
            Self::Conflict(_) => "conflict",
            Self::Error(_) => "error",
            Self::Unmanaged => "unmanaged",
        }
    }

    /// Whether the event failed (a conflict or an error): `status` is degraded.
    pub fn failed(&self) -> bool {
        matches!(self, Self::Conflict(_) | Self::Error(_))
    }

    /// What [`super::handle`], the worker or a refresh returned. `None` for an
    /// event that needs nothing (`PREINIT`): it leaves the record as it was.
    pub fn of(result: &Result<HookOutcome>) -> Option<Self> {
        Some(match result {
            Ok(HookOutcome::Ignored) => return None,
            Ok(HookOutcome::Applied(r)) => applied(r),
            Ok(HookOutcome::AppliedPartial(r)) => Self::Partial(r.writes()),
            Ok(HookOutcome::Removed(r)) => Self::Removed(r.writes()),
            Ok(HookOutcome::Deferred(pid)) => Self::Deferred(*pid),
            Ok(HookOutcome::Kept(why)) => Self::Kept(why.clone()),
            Ok(HookOutcome::Unmanaged) => Self::Unmanaged,
            Err(e) => Self::of_error(e),
        })
    }

    /// A failure: a conflict when another NIC holds the table or an object
    /// leasehook does not own is in the way (seen before the writes, or their
    /// `EEXIST`), else an error.
    pub fn of_error(e: &Error) -> Self {
        let text = e.to_string();
        let conflict = match e {
            Error::TableConflict { .. } | Error::Conflict { .. } => true,
            Error::Netlink { .. } | Error::NotRecorded { .. } => e.errno() == Some(libc::EEXIST),
            _ => false,
        };
        if conflict {
            Self::Conflict(text)
        } else {
            Self::Error(text)
        }
    }

    fn count(&self) -> Option<u64> {
        match self {
            Self::Applied(n) | Self::Partial(n) | Self::Removed(n) => {
                Some(u64::try_from(*n).unwrap_or(u64::MAX))
            }
            Self::Deferred(pid) => Some(u64::from(*pid)),
            _ => None,
        }
    }

    fn detail(&self) -> Option<&str> {
        match self {
            Self::Kept(s) | Self::Unchecked(s) | Self::Conflict(s) | Self::Error(s) => Some(s),
            _ => None,
        }
    }
}

/// A report's outcome: applied, or unchanged when it wrote nothing.
pub fn applied(r: &Report) -> EventOutcome {
    match r.writes() {
        0 => EventOutcome::Unchanged,
        n => EventOutcome::Applied(n),
    }
}

impl std::fmt::Display for EventOutcome {
    /// `applied 11 change(s)`, `conflict: ip -4 route add ...`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Applied(n) => write!(f, "applied {n} change(s)"),
            Self::Unchanged => f.write_str("applied, unchanged (the kernel held it all)"),
            Self::Partial(n) => write!(
                f,
                "applied what the lease alone proves ({n} change(s)); the metadata was incomplete"
            ),
            Self::Deferred(pid) => write!(f, "waiting for the metadata in worker {pid}"),
            Self::Removed(n) => write!(f, "removed {n} object(s)"),
            Self::Kept(why) => write!(f, "nothing changed: {why}"),
            Self::Unchecked(why) => write!(
                f,
                "not checked: {why}; what was applied before stays, unfollowed"
            ),
            Self::Conflict(why) => write!(f, "CONFLICT: {why}"),
            Self::Error(why) => write!(f, "FAILED: {why}"),
            Self::Unmanaged => f.write_str("unmanaged (configuration key unmanaged): left alone"),
        }
    }
}

/// One NIC's last event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastEvent {
    /// Who ran it: `dhclient`, `networkd`, `nm`, `dhcpcd`, `udhcpc`, `refresh`, ...
    pub client: String,
    /// The client's reason (`BOUND`, `RENEW`, ...; `REFRESH` for a refresh).
    pub reason: String,
    /// When its outcome was known, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// What came of it.
    pub outcome: EventOutcome,
}

/// Text from a record or an error, on one line, at most [`MAX_TEXT`] bytes, with
/// control characters replaced: it reaches a terminal.
fn clean(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if out.len() > MAX_TEXT {
        let mut end = MAX_TEXT;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
        out.push('…');
    }
    out
}

impl LastEvent {
    /// A record made now.
    pub fn now(client: &str, reason: &str, outcome: EventOutcome) -> Self {
        Self {
            client: client.to_owned(),
            reason: reason.to_owned(),
            at_ms: state::unix_ms(),
            outcome,
        }
    }

    /// The record as JSON (also `status --format json`'s `last_event`).
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("version".to_owned(), json!(LAST_EVENT_VERSION));
        m.insert("client".to_owned(), json!(clean(&self.client)));
        m.insert("reason".to_owned(), json!(clean(&self.reason)));
        m.insert("at_ms".to_owned(), json!(self.at_ms));
        m.insert("outcome".to_owned(), json!(self.outcome.kind()));
        if let Some(n) = self.outcome.count() {
            let key = if matches!(self.outcome, EventOutcome::Deferred(_)) {
                "pid"
            } else {
                "changes"
            };
            m.insert(key.to_owned(), json!(n));
        }
        if let Some(d) = self.outcome.detail() {
            m.insert("detail".to_owned(), json!(clean(d)));
        }
        Value::Object(m)
    }

    /// The record's file: [`LastEvent::to_json`]'s document, written by hand
    /// (the hooks write it on every event: no JSON tree built for it).
    pub fn to_bytes(&self) -> String {
        let q = |s: &str| serde_json::to_string(&clean(s)).unwrap_or_default();
        let mut out = format!(
            "{{\"version\":{LAST_EVENT_VERSION},\"client\":{},\"reason\":{},\"at_ms\":{},\"outcome\":\"{}\"",
            q(&self.client),
            q(&self.reason),
            self.at_ms,
            self.outcome.kind()
        );
        if let Some(n) = self.outcome.count() {
            let key = if matches!(self.outcome, EventOutcome::Deferred(_)) {
                "pid"
            } else {
                "changes"
            };
            let _ = write!(out, ",\"{key}\":{n}");
        }
        if let Some(d) = self.outcome.detail() {
            let _ = write!(out, ",\"detail\":{}", q(d));
        }
        out.push('}');
        out
    }

    /// Reads a record; what is wrong with a bad one.
    pub fn from_json(bytes: &[u8]) -> std::result::Result<Self, BadRecord> {
        let v: Value = serde_json::from_slice(bytes).map_err(BadRecord::NotJson)?;
        let field = |k: &'static str| v.get(k).ok_or(BadRecord::Missing(k));
        let text = |k: &'static str| field(k)?.as_str().map(clean).ok_or(BadRecord::NotText(k));
        let number = |k: &'static str| field(k)?.as_u64().ok_or(BadRecord::NotWhole(k));
        let version = number("version")?;
        if version != LAST_EVENT_VERSION {
            return Err(BadRecord::Version(version));
        }
        let whole = |k: &'static str| number(k).and_then(|n| fit(k, n));
        let outcome = match text("outcome")?.as_str() {
            "applied" => EventOutcome::Applied(whole("changes")?),
            "unchanged" => EventOutcome::Unchanged,
            "partial" => EventOutcome::Partial(whole("changes")?),
            "deferred" => EventOutcome::Deferred(number("pid").and_then(|n| fit("pid", n))?),
            "removed" => EventOutcome::Removed(whole("changes")?),
            "kept" => EventOutcome::Kept(text("detail")?),
            "unchecked" => EventOutcome::Unchecked(text("detail")?),
            "conflict" => EventOutcome::Conflict(text("detail")?),
            "error" => EventOutcome::Error(text("detail")?),
            "unmanaged" => EventOutcome::Unmanaged,
            other => return Err(BadRecord::Outcome(other.to_owned())),
        };
        Ok(Self {
            client: text("client")?,
            reason: text("reason")?,
            at_ms: number("at_ms")?,
            outcome,
        })
    }
}

/// What is wrong with a last event record.
#[derive(Debug, thiserror::Error)]
pub enum BadRecord {
    /// Not JSON.
    #[error("not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// A field is missing.
    #[error("no {0:?}")]
    Missing(&'static str),
    /// A field is not a string.
    #[error("{0:?} is not a string")]
    NotText(&'static str),
    /// A field is not a whole number.
    #[error("{0:?} is not a whole number")]
    NotWhole(&'static str),
    /// A whole number too large for its field.
    #[error("{key:?}: {source}")]
    OutOfRange {
        /// The field.
        key: &'static str,
        /// The conversion's error.
        #[source]
        source: std::num::TryFromIntError,
    },
    /// Written by another version.
    #[error("unknown record version {0}")]
    Version(u64),
    /// An outcome this version does not know.
    #[error("unknown outcome {0:?}")]
    Outcome(String),
}

/// `n` as the field `key`'s type.
fn fit<T: TryFrom<u64, Error = std::num::TryFromIntError>>(
    key: &'static str,
    n: u64,
) -> std::result::Result<T, BadRecord> {
    n.try_into()
        .map_err(|source| BadRecord::OutOfRange { key, source })
}

fn file_name(name: &IfName) -> String {
    format!("{name}.json")
}

/// The NIC's last event; `Ok(None)` when none was recorded. A symlink, a FIFO, a
/// file over [`MAX_LAST_EVENT_BYTES`] or one that is not a record is an error
/// naming the file.
pub fn read(paths: &Paths, name: &IfName) -> Result<Option<LastEvent>> {
    let file = file_name(name);
    let Some(bytes) = state::read_run_file(paths, Some(LAST_EVENT), &file, MAX_LAST_EVENT_BYTES)?
    else {
        return Ok(None);
    };
    LastEvent::from_json(&bytes)
        .map(Some)
        .map_err(|e| Error::Corrupt {
            path: format!("{:?}", paths.run_dir().join(LAST_EVENT).join(&file)),
            what: "not a last event record",
            source: Box::new(e),
        })
}

/// Replaces the NIC's record with `ev` (0600, atomically).
pub fn write(paths: &Paths, name: &IfName, ev: &LastEvent) -> Result<()> {
    let bytes = ev.to_bytes();
    state::write_run_file(
        paths,
        Some(LAST_EVENT),
        &file_name(name),
        bytes.as_bytes(),
        0o600,
    )
}

/// Records `ev` for the NIC; a `deferred` one only when the record was not
/// replaced after `started_ms` already (the worker the event started finished
/// first: its outcome is the newer). Only the file's time is read, never its
/// content. A failure is logged, never fatal: the record only informs `status`.
pub fn record(paths: &Paths, name: &IfName, ev: &LastEvent, started_ms: u64) {
    if matches!(ev.outcome, EventOutcome::Deferred(_))
        && let Ok(Some(t)) = state::run_file_modified(paths, LAST_EVENT, &file_name(name))
        && t.duration_since(std::time::UNIX_EPOCH)
            .is_ok_and(|d| d.as_millis() > u128::from(started_ms))
    {
        return;
    }
    if let Err(e) = write(paths, name, ev) {
        log::warn!("{e}; the last event is not recorded for leasehook status");
    }
}

/// The worker's record when its wait ends: the client it was started for (its
/// program name, `leasehook-dhclient --worker IF`; `worker` when started as
/// `leasehook-hook --worker IF`), the event's reason, the worker's outcome.
pub(super) fn record_worker(
    paths: &Paths,
    name: &IfName,
    reason: &str,
    result: &Result<HookOutcome>,
) {
    let Some(outcome) = EventOutcome::of(result) else {
        return;
    };
    let argv0 = std::env::args_os().next().unwrap_or_default();
    let client = std::path::Path::new(&argv0)
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("leasehook-"))
        .filter(|c| *c != "hook")
        .unwrap_or("worker")
        .to_owned();
    let ev = LastEvent::now(&client, reason, outcome);
    record(paths, name, &ev, ev.at_ms);
}

/// Every record, by interface name, and the errors of unreadable ones (a
/// record of another root's user, 0600, among them).
pub fn list(paths: &Paths) -> (Vec<(IfName, LastEvent)>, Vec<Error>) {
    state::list_records(paths, LAST_EVENT, |_, _, stem| {
        let Ok(name) = IfName::try_new(stem) else {
            return Ok(None);
        };
        Ok(read(paths, &name)?.map(|ev| (name, ev)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eth1() -> IfName {
        IfName::try_new("eth1").unwrap()
    }

    #[test]
    fn every_outcome_round_trips() {
        let t = tempfile::tempdir().unwrap();
        let paths = Paths::new(t.path());
        for outcome in [
            EventOutcome::Applied(11),
            EventOutcome::Unchanged,
            EventOutcome::Partial(3),
            EventOutcome::Deferred(4242),
            EventOutcome::Removed(2),
            EventOutcome::Kept("IMDS did not answer".to_owned()),
            EventOutcome::Unchecked("IMDS did not answer usefully (HTTP 503)".to_owned()),
            EventOutcome::Conflict("ip -4 route add ...: File exists".to_owned()),
            EventOutcome::Error("no link named eth1".to_owned()),
            EventOutcome::Unmanaged,
        ] {
            let ev = LastEvent::now("dhclient", "BOUND", outcome);
            write(&paths, &eth1(), &ev).unwrap();
            assert_eq!(read(&paths, &eth1()).unwrap(), Some(ev));
        }
        let file = t.path().join("run/leasehook/last-event/eth1.json");
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&file).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        let (all, errors) = list(&paths);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(all.len(), 1);
        assert_eq!(
            read(&paths, &IfName::try_new("eth2").unwrap()).unwrap(),
            None
        );
    }

    #[test]
    fn hostile_text_is_one_short_line() {
        let ev = LastEvent::now(
            "dhclient\n",
            "BOUND\x1b[31m",
            EventOutcome::Error("x".repeat(100_000)),
        );
        let back = LastEvent::from_json(ev.to_json().to_string().as_bytes()).unwrap();
        assert_eq!(back.client, "dhclient ");
        assert!(!back.reason.contains('\x1b'));
        let EventOutcome::Error(why) = back.outcome else {
            panic!("{back:?}")
        };
        assert!(why.len() <= MAX_TEXT + 3, "{}", why.len());
    }

    #[test]
    fn a_conflict_is_told_from_an_error() {
        let conflict = Error::Netlink {
            object: "ip -4 route add 10.98.1.0/24 dev eth1 table 10001".to_owned(),
            cause: crate::error::NetlinkCause::Kernel(std::io::Error::from_raw_os_error(
                libc::EEXIST,
            )),
            note: String::new(),
            rolled_back: 11,
            rollback_errors: Vec::new(),
        };
        let o = EventOutcome::of(&Err(conflict));
        assert!(
            matches!(&o, Some(EventOutcome::Conflict(w)) if w.contains("route add") && w.contains("rolled back the 11")),
            "{o:?}"
        );
        let in_the_way = Error::Conflict {
            iface: eth1(),
            object: "10.98.1.0/24 dev eth1 table 10001 proto static".to_owned(),
            table: 10001,
            protocol: 4,
            owner: String::new(),
            repeated: false,
        };
        let o = EventOutcome::of(&Err(in_the_way));
        assert!(
            matches!(&o, Some(EventOutcome::Conflict(w)) if w.contains("is in the way")),
            "{o:?}"
        );
        let o = EventOutcome::of(&Err(Error::NoSuchLink(eth1())));
        assert!(matches!(o, Some(EventOutcome::Error(_))), "{o:?}");
        assert!(o.is_some_and(|o| o.failed()));
        assert_eq!(EventOutcome::of(&Ok(HookOutcome::Ignored)), None);
    }

    #[test]
    fn bad_records_are_clear_errors() {
        let t = tempfile::tempdir().unwrap();
        let paths = Paths::new(t.path());
        let dir = t.path().join("run/leasehook/last-event");
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("eth1.json");
        for (body, want) in [
            (&b"\x00garbage"[..], "not a last event record: not JSON"),
            (&b"[]"[..], "not a last event record: no \"version\""),
            (
                &br#"{"version":7,"client":"c","reason":"r","at_ms":1,"outcome":"applied"}"#[..],
                "unknown record version 7",
            ),
            (
                &br#"{"version":1,"client":"c","reason":"r","at_ms":1,"outcome":"exploded"}"#[..],
                "unknown outcome \"exploded\"",
            ),
            (
                &br#"{"version":1,"client":"c","reason":"r","at_ms":1,"outcome":"applied"}"#[..],
                "no \"changes\"",
            ),
        ] {
            std::fs::write(&file, body).unwrap();
            let e = read(&paths, &eth1()).unwrap_err().to_string();
            assert!(
                e.contains("last-event/eth1.json") && e.contains(want),
                "{e}"
            );
        }
        // Oversized: refused from its size.
        let f = std::fs::File::create(&file).unwrap();
        f.set_len(MAX_LAST_EVENT_BYTES + 1).unwrap();
        let e = read(&paths, &eth1()).unwrap_err().to_string();
        assert!(e.contains("is larger than 65536 bytes"), "{e}");
        // A symlink: never followed.
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &file).unwrap();
        let e = read(&paths, &eth1()).unwrap_err().to_string();
        assert!(e.contains("is a symlink"), "{e}");
        let (all, errors) = list(&paths);
        assert!(all.is_empty() && errors.len() == 1, "{errors:?}");
        // Writing replaces the link itself, never its target.
        write(
            &paths,
            &eth1(),
            &LastEvent::now("nm", "up", EventOutcome::Unchanged),
        )
        .unwrap();
        assert!(!std::fs::symlink_metadata(&file).unwrap().is_symlink());
    }

    #[test]
    fn a_deferred_record_never_hides_the_workers_newer_one() {
        let t = tempfile::tempdir().unwrap();
        let paths = Paths::new(t.path());
        let started = state::unix_ms();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let worker = LastEvent::now("dhclient", "BOUND", EventOutcome::Applied(5));
        write(&paths, &eth1(), &worker).unwrap();
        let hook = LastEvent::now("dhclient", "BOUND", EventOutcome::Deferred(9));
        record(&paths, &eth1(), &hook, started);
        assert_eq!(read(&paths, &eth1()).unwrap(), Some(worker));
        // A later event's record replaces it.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let later = LastEvent::now("dhclient", "RENEW", EventOutcome::Deferred(10));
        record(&paths, &eth1(), &later, state::unix_ms());
        assert_eq!(read(&paths, &eth1()).unwrap(), Some(later));
    }

    #[test]
    fn the_file_is_the_json_document() {
        for outcome in [
            EventOutcome::Applied(11),
            EventOutcome::Deferred(4242),
            EventOutcome::Error("a \"quoted\" \\ cause\n".to_owned()),
        ] {
            let ev = LastEvent::now("dhclient", "BOUND", outcome);
            let v: Value = serde_json::from_str(&ev.to_bytes()).unwrap();
            assert_eq!(v, ev.to_json());
        }
    }
}

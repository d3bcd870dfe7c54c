// SPDX-License-Identifier: Apache-2.0
//! Performs IO: leasehook's metrics in the Prometheus text format (SPEC §3.11).
//!
//! A hook is one short process per DHCP event, its worker another, `refresh` a
//! third each minute: counters must outlive them. What a process counts (events,
//! metadata requests, the consistency wait, refusals, conflicts, the last success
//! per interface) is kept in memory ([`event`], `request`, ...) and added, once
//! at its end ([`flush`]), to `<root>/run/leasehook/metrics/counters` under
//! `counters.lock`: one lock, one read, one atomic write. `/run` is a tmpfs, so
//! the counters start from zero at boot. A counters file that is not what
//! [`flush`] writes (corrupt, planted, too large) is logged and counting starts
//! again from zero: a metric never fails an event.
//!
//! [`render`] adds what the records say now (`leasehook_interface_applied`,
//! `..._drift_objects` from a netlink dump, `leasehook_build_info`);
//! `leasehook status --format prometheus` prints it, and with `metrics.textfile`
//! set [`flush`] replaces that file for node-exporter's textfile collector
//! (a temporary file in the same folder, renamed over it).
//!
//! The in-memory part is a process-wide list, not a value handed around: the
//! requests are counted deep in every provider's HTTP path, and a hook process
//! handles one event.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::apply::state::{self, InterfaceState, Paths};
use crate::apply::{Applier, LinkIndex};
use crate::diff::State;
use crate::error::{Error, Result};
use crate::model::IfName;

/// `run/leasehook/metrics`: the counters and their lock.
pub const METRICS: &str = "metrics";
/// The counters' file in [`METRICS`].
pub const COUNTERS: &str = "counters";
const COUNTERS_LOCK: &str = "counters.lock";
/// The largest counters file read; a larger one is corrupt.
const MAX_COUNTERS_BYTES: u64 = 256 * 1024;

/// The consistency wait's histogram buckets: the `le` label and the bound in
/// microseconds (the synchronous budget is 3 s, the whole one 30 s). Every
/// stored value is a whole number (the wait's sum in microseconds, a timestamp
/// in milliseconds): no floating point is parsed or printed, which keeps the
/// hook binary smaller (issue 20's package limit).
const WAIT_BUCKETS: [(&str, u64); 9] = [
    ("0.05", 50_000),
    ("0.1", 100_000),
    ("0.25", 250_000),
    ("0.5", 500_000),
    ("1", 1_000_000),
    ("2.5", 2_500_000),
    ("5", 5_000_000),
    ("10", 10_000_000),
    ("30", 30_000_000),
];

const EVENTS: &str = "leasehook_events_total";
const REQUESTS: &str = "leasehook_metadata_requests_total";
const WAIT: &str = "leasehook_metadata_wait_seconds";
const REFUSALS: &str = "leasehook_refusals_total";
const CONFLICTS: &str = "leasehook_conflicts_total";
const LAST_SUCCESS: &str = "leasehook_interface_last_success_timestamp_seconds";
const APPLIED: &str = "leasehook_interface_applied";
const DRIFT: &str = "leasehook_interface_drift_objects";
const BUILD: &str = "leasehook_build_info";
const REPAIRS: &str = "leasehook_repairs_total";

/// Every metric: name, type, help, in the order printed.
const FAMILIES: [(&str, &str, &str); 10] = [
    (BUILD, "gauge", "leasehook's version; always 1."),
    (
        APPLIED,
        "gauge",
        "1 when the interface's record holds an applied plan, 0 when it holds only a refusal or conflict.",
    ),
    (
        LAST_SUCCESS,
        "gauge",
        "When an event or refresh last applied or confirmed the interface's plan (Unix time).",
    ),
    (
        DRIFT,
        "gauge",
        "Objects the interface's record holds that the kernel does not.",
    ),
    (
        EVENTS,
        "counter",
        "DHCP events handled since boot, by client, reason and outcome.",
    ),
    (
        REQUESTS,
        "counter",
        "Metadata service requests since boot, by provider and HTTP status (error: no answer).",
    ),
    (
        WAIT,
        "histogram",
        "How long the hooks' consistency wait for the metadata took.",
    ),
    (
        REFUSALS,
        "counter",
        "Values the address gate refused since boot, by reason.",
    ),
    (
        CONFLICTS,
        "counter",
        "Plans stopped by an object or table another owner holds, and NICs the watcher stopped putting back, since boot.",
    ),
    (
        REPAIRS,
        "counter",
        "Times the watcher put back objects of an interface that something else removed, since boot.",
    ),
];

/// A change one process makes to a stored series.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Change {
    /// Adds to a counter.
    Add(u64),
    /// Raises a gauge to at least this (a timestamp in milliseconds).
    Max(u64),
}

impl Change {
    /// Both changes as one (two of one series are always of one kind).
    fn merge(self, other: Self) -> Self {
        match (self, other) {
            (Self::Add(a), Self::Add(b)) => Self::Add(a.saturating_add(b)),
            (Self::Max(a) | Self::Add(a), Self::Max(b) | Self::Add(b)) => Self::Max(a.max(b)),
        }
    }
}

/// What this process counted and has not flushed yet, one entry per series:
/// bounded by the series, also in a process that never flushes (`leasehook
/// watch` runs the refresh code for days).
static PENDING: Mutex<BTreeMap<String, Change>> = Mutex::new(BTreeMap::new());

fn note(key: String, change: Change) {
    if let Ok(mut p) = PENDING.lock() {
        let merged = p.get(&key).map_or(change, |c| c.merge(change));
        p.insert(key, merged);
    }
}

/// Counts one handled DHCP event.
pub fn event(client: &str, reason: &str, outcome: &str) {
    note(
        series(
            EVENTS,
            &[("client", client), ("reason", reason), ("outcome", outcome)],
        ),
        Change::Add(1),
    );
}

/// Counts one metadata request of `provider`: `code` is the HTTP status, `None`
/// when no answer came (timeout, refused connection, ...).
pub(crate) fn request(provider: &str, code: Option<u16>) {
    let code = code.map_or_else(|| "error".to_owned(), |c| c.to_string());
    note(
        series(REQUESTS, &[("provider", provider), ("code", &code)]),
        Change::Add(1),
    );
}

/// Observes one consistency wait that started at `since`.
pub(crate) fn waited(since: Instant, now: Instant) {
    let us = u64::try_from(now.saturating_duration_since(since).as_micros()).unwrap_or(u64::MAX);
    for (le, _) in WAIT_BUCKETS.iter().filter(|(_, bound)| us <= *bound) {
        note(
            series(&format!("{WAIT}_bucket"), &[("le", le)]),
            Change::Add(1),
        );
    }
    note(
        series(&format!("{WAIT}_bucket"), &[("le", "+Inf")]),
        Change::Add(1),
    );
    // In microseconds; printed in seconds.
    note(format!("{WAIT}_sum"), Change::Add(us));
    note(format!("{WAIT}_count"), Change::Add(1));
}

/// Counts one value the address gate refused, by the refusal's kind
/// (`metadata-service`, `outside-subnet`, ... as `status --format json` names it).
pub(crate) fn refused(reason: &crate::gate::Refusal) {
    // The tag the state file writes first (`{"kind":"metadata-service",...}`),
    // through the serializer the state file already uses: a `Value` would
    // instantiate serde's code for the refusal types once more in the hook.
    let json = serde_json::to_vec(reason).unwrap_or_default();
    let kind = json
        .strip_prefix(b"{\"kind\":\"")
        .and_then(|rest| rest.split(|b| *b == b'"').next())
        .and_then(|k| std::str::from_utf8(k).ok())
        .unwrap_or("other");
    note(series(REFUSALS, &[("reason", kind)]), Change::Add(1));
}

/// Counts one plan stopped by what another owner holds.
pub(crate) fn conflict() {
    note(CONFLICTS.to_owned(), Change::Add(1));
}

/// Whether `e` is a conflict: a table another NIC claims, another owner's object
/// found in the NIC's table before anything was written (`Error::Conflict`,
/// repeated or not), or an add that ran into an object in the way (EEXIST).
pub(crate) fn is_conflict(e: &Error) -> bool {
    match e {
        Error::TableConflict { .. } | Error::Conflict { .. } => true,
        // The kernel's EEXIST only: a file's (the run folder's records keep
        // their errno too) is an error, not a conflict.
        Error::Netlink { .. } | Error::NotRecorded { .. } => e.errno() == Some(libc::EEXIST),
        _ => false,
    }
}

/// Counts one repair of the interface by the watcher (`leasehook watch`'s
/// self-healing).
pub(crate) fn repaired(name: &IfName) {
    note(
        series(REPAIRS, &[("interface", name.as_str())]),
        Change::Add(1),
    );
}

/// The repairs of `name` counted in `stored` ([`counters`]).
pub fn repairs(stored: &BTreeMap<String, u64>, name: &IfName) -> u64 {
    stored
        .get(&series(REPAIRS, &[("interface", name.as_str())]))
        .copied()
        .unwrap_or(0)
}

/// Records that the interface's plan was applied or confirmed now.
pub(crate) fn succeeded(name: &IfName) {
    note(
        series(LAST_SUCCESS, &[("interface", name.as_str())]),
        Change::Max(state::unix_ms()),
    );
}

/// Adds what this process counted to the counters below `root` and, with
/// `textfile`, rewrites that file ([`render`]). Problems are logged, never
/// returned: a metric must not fail an event.
pub fn flush(root: &Path, textfile: Option<&Path>) {
    let pending: Vec<(String, Change)> = PENDING
        .lock()
        .map(|mut p| std::mem::take(&mut *p).into_iter().collect())
        .unwrap_or_default();
    if !pending.is_empty()
        && let Err(e) = store(root, &pending)
    {
        log::warn!("metrics: {e}; this run's counts are lost");
    }
    if let Some(path) = textfile {
        let text = match crate::apply::netlink::NetlinkApplier::try_new() {
            Ok(mut k) => render(root, Some(&mut k)),
            Err(e) => {
                log::warn!("metrics: {e}; drift not shown");
                render(root, None)
            }
        };
        if let Err(e) = write_textfile(root, path, &text) {
            log::warn!("metrics: {e}");
        }
    }
}

/// One lock, one read, one atomic write of the counters file.
fn store(root: &Path, pending: &[(String, Change)]) -> Result<()> {
    let dir = crate::fs::run_folder_for_write(root, Some(METRICS))?;
    let lock = dir
        .open_lock(COUNTERS_LOCK, 0o600)
        .map_err(|p| dir.error(COUNTERS_LOCK, &p))?;
    // Held for a read and a write only: a holder that does not let go in a
    // second is stopped or hung, and the event goes on without its counts.
    let until = Instant::now() + Duration::from_secs(1);
    loop {
        match lock.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < until => {
                std::thread::sleep(crate::constants::HOOK_LOCK_POLL);
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(Error::Io {
                    path: dir.shown(COUNTERS_LOCK),
                    message: "held for more than 1 s".to_owned(),
                });
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(Error::io(&dir.path().join(COUNTERS_LOCK), &e));
            }
        }
    }
    let mut counters = read_in(&dir);
    for (key, change) in pending {
        let v = counters.entry(key.clone()).or_insert(0);
        match change {
            Change::Add(n) => *v = v.saturating_add(*n),
            Change::Max(n) => *v = (*v).max(*n),
        }
    }
    let mut text = String::new();
    for (k, v) in &counters {
        let _ = writeln!(text, "{k} {v}");
    }
    dir.write_atomic(COUNTERS, text.as_bytes(), 0o644)
}

/// The counters in `dir`; a file that is not what [`store`] writes is logged and
/// taken as empty (counting starts again).
fn read_in(dir: &crate::fs::Dir) -> BTreeMap<String, u64> {
    match dir.read(COUNTERS, MAX_COUNTERS_BYTES) {
        Ok(None) => BTreeMap::new(),
        Ok(Some(bytes)) => parse_counters(&bytes).unwrap_or_else(|why| {
            log::warn!(
                "metrics: {} {why}: the counters start again from zero",
                dir.shown(COUNTERS)
            );
            BTreeMap::new()
        }),
        Err(p) => {
            log::warn!(
                "metrics: {} {p}: the counters start again from zero",
                dir.shown(COUNTERS)
            );
            BTreeMap::new()
        }
    }
}

/// The stored counters below `root` (empty when none, or unusable: logged).
pub fn counters(root: &Path) -> BTreeMap<String, u64> {
    match crate::fs::run_folder(root, Some(METRICS), false) {
        Ok(Some(dir)) => read_in(&dir),
        Ok(None) => BTreeMap::new(),
        Err(e) => {
            log::warn!("metrics: {e}");
            BTreeMap::new()
        }
    }
}

/// Parses a counters file: one `series value` per line, each series exactly as
/// [`series`] writes one of leasehook's, each value finite and not negative.
fn parse_counters(bytes: &[u8]) -> std::result::Result<BTreeMap<String, u64>, BadCounters> {
    let text = std::str::from_utf8(bytes).map_err(|_| BadCounters::NotUtf8)?;
    let mut out = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let bad = || BadCounters::Line(n + 1);
        let (key, value) = line.rsplit_once(' ').ok_or_else(bad)?;
        let value: u64 = value.parse().map_err(|_| bad())?;
        if !stored_series(key) {
            return Err(bad());
        }
        out.insert(key.to_owned(), value);
    }
    Ok(out)
}

/// Why a counters file is not what [`store`] writes.
#[derive(Debug, thiserror::Error)]
enum BadCounters {
    /// Not UTF-8.
    #[error("is not UTF-8")]
    NotUtf8,
    /// A line (counted from 1) that is not `series value`.
    #[error("line {0}: not a counter leasehook writes")]
    Line(usize),
}

/// Whether `key` is a series leasehook stores, written as [`series`] writes it.
fn stored_series(key: &str) -> bool {
    let Some((name, labels)) = parse_series(key) else {
        return false;
    };
    let known = [EVENTS, REQUESTS, REFUSALS, CONFLICTS, LAST_SUCCESS, REPAIRS]
        .contains(&name.as_str())
        || name == format!("{WAIT}_bucket")
        || name == format!("{WAIT}_sum")
        || name == format!("{WAIT}_count");
    let pairs: Vec<(&str, &str)> = labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    known && series(&name, &pairs) == key
}

/// `name{label="value",...}` with the values escaped as the exposition format
/// wants (`\\`, `\"`, `\n`); `name` alone without labels.
pub fn series(name: &str, labels: &[(&str, &str)]) -> String {
    let mut s = name.to_owned();
    if labels.is_empty() {
        return s;
    }
    s.push('{');
    for (i, (k, v)) in labels.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{k}=\"{}\"", escape(v));
    }
    s.push('}');
    s
}

/// A label value escaped for the text format: backslash, double quote and line
/// feed.
pub fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Splits `name{k="v",...}` into its name and unescaped labels; `None` when it
/// is not that shape (metric and label names as the format allows them).
fn parse_series(key: &str) -> Option<(String, Vec<(String, String)>)> {
    let ident = |s: &str, colon: bool| {
        let mut b = s.bytes();
        b.next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_' || (colon && c == b':'))
            && b.all(|c| c.is_ascii_alphanumeric() || c == b'_' || (colon && c == b':'))
    };
    let Some((name, rest)) = key.split_once('{') else {
        return ident(key, true).then(|| (key.to_owned(), Vec::new()));
    };
    if !ident(name, true) {
        return None;
    }
    let mut labels = Vec::new();
    let mut chars = rest.chars().peekable();
    loop {
        let label: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if !ident(&label, false) || chars.next() != Some('"') {
            return None;
        }
        let mut value = String::new();
        loop {
            match chars.next()? {
                '"' => break,
                '\\' => value.push(match chars.next()? {
                    'n' => '\n',
                    c @ ('\\' | '"') => c,
                    _ => return None,
                }),
                c => value.push(c),
            }
        }
        labels.push((label, value));
        match chars.next()? {
            ',' => {}
            '}' if chars.peek().is_none() => return Some((name.to_owned(), labels)),
            _ => return None,
        }
    }
}

/// Every metric in the text format: the stored counters below `root`, and what
/// the interfaces' records say now; with `kernel`, the drift between them and
/// the kernel (a dump; a failed one is logged and the drift left out).
pub fn render(root: &Path, kernel: Option<&mut dyn Applier>) -> String {
    let paths = Paths::new(root);
    let stored = counters(root);
    let (states, errors) = state::list_states(&paths);
    for e in &errors {
        log::warn!("metrics: {e}");
    }
    let drift = kernel.and_then(|k| {
        drift(k, &states)
            .inspect_err(|e| log::warn!("metrics: drift not shown: {e}"))
            .ok()
    });
    let mut out = String::new();
    for (name, kind, help) in FAMILIES {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        match name {
            BUILD => {
                let s = series(BUILD, &[("version", env!("CARGO_PKG_VERSION"))]);
                let _ = writeln!(out, "{s} 1");
            }
            APPLIED => {
                for st in &states {
                    let table = st.table.map(|t| t.to_string()).unwrap_or_default();
                    let s = series(
                        APPLIED,
                        &[("interface", st.name.as_str()), ("table", &table)],
                    );
                    let _ = writeln!(out, "{s} {}", u8::from(!st.families.is_empty()));
                }
            }
            LAST_SUCCESS => {
                for st in states.iter().filter(|st| !st.families.is_empty()) {
                    let s = series(LAST_SUCCESS, &[("interface", st.name.as_str())]);
                    let ms = stored.get(&s).copied().unwrap_or(0).max(st.applied_at_ms);
                    let _ = writeln!(out, "{s} {}.{:03}", ms / 1000, ms % 1000);
                }
            }
            DRIFT => {
                for (iface, n) in drift.iter().flatten() {
                    let s = series(DRIFT, &[("interface", iface.as_str())]);
                    let _ = writeln!(out, "{s} {n}");
                }
            }
            WAIT => {
                let get = |k: &str| stored.get(k).copied().unwrap_or(0);
                let bucket = format!("{WAIT}_bucket");
                for le in WAIT_BUCKETS.iter().map(|(le, _)| *le).chain(["+Inf"]) {
                    let s = series(&bucket, &[("le", le)]);
                    let _ = writeln!(out, "{s} {}", get(&s));
                }
                let us = get(&format!("{WAIT}_sum"));
                let _ = writeln!(out, "{WAIT}_sum {}.{:06}", us / 1_000_000, us % 1_000_000);
                let _ = writeln!(out, "{WAIT}_count {}", get(&format!("{WAIT}_count")));
            }
            CONFLICTS => {
                let _ = writeln!(
                    out,
                    "{CONFLICTS} {}",
                    stored.get(CONFLICTS).copied().unwrap_or(0)
                );
            }
            _ => {
                for (k, v) in &stored {
                    if k.split('{').next() == Some(name) {
                        let _ = writeln!(out, "{k} {v}");
                    }
                }
            }
        }
    }
    out
}

/// Replaces `<root><path>` with `text`: a temporary file in the same folder
/// (`.leasehook-<pid>.tmp`, which the textfile collector skips: it reads
/// `*.prom`; created exclusively, never through a link), mode 0644
/// (node-exporter runs as another user), renamed over it.
pub fn write_textfile(root: &Path, path: &Path, text: &str) -> Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let target = root.join(path.strip_prefix("/").unwrap_or(path));
    let dir = target.parent().unwrap_or(Path::new("/"));
    let tmp = dir.join(format!(".leasehook-{}.tmp", std::process::id()));
    // A file of this name is a dead process's (pids are not reused while one
    // lives): gone before the exclusive create.
    let _ = std::fs::remove_file(&tmp);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .and_then(|mut f| {
            // The umask may have taken bits away: set them.
            f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))?;
            f.write_all(text.as_bytes())
        })
        .and_then(|()| std::fs::rename(&tmp, &target));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(&target, &e)
    })
}

/// Per recorded interface, how many of its recorded objects
/// ([`InterfaceState::objects`]) the kernel does not hold: one dump of links,
/// rules, routes and addresses. A rule recorded without a priority matches one
/// the kernel gave a priority.
pub fn drift<A: Applier + ?Sized>(
    kernel: &mut A,
    states: &[InterfaceState],
) -> Result<BTreeMap<IfName, usize>> {
    let links: LinkIndex = kernel
        .links()?
        .into_iter()
        .map(|l| (l.name, l.index))
        .collect();
    let recorded: BTreeSet<_> = states
        .iter()
        .flat_map(|st| st.objects().addresses)
        .collect();
    let have = kernel.observe(&links, &recorded)?.owned;
    Ok(states
        .iter()
        .map(|st| (st.name.clone(), missing(&st.objects(), &have)))
        .collect())
}

/// How many objects of `want` are not in `have`.
fn missing(want: &State, have: &State) -> usize {
    let rules = want
        .rules
        .iter()
        .filter(|r| {
            !have.rules.iter().any(|h| {
                h.from == r.from
                    && h.table == r.table
                    && (r.priority.is_none() || h.priority == r.priority)
            })
        })
        .count();
    rules
        + want.routes.difference(&have.routes).count()
        + want.addresses.difference(&have.addresses).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_kernels_eexist_is_a_conflict() {
        let file = Error::File {
            path: "\"/run/leasehook/x\"".to_owned(),
            source: std::io::Error::from_raw_os_error(libc::EEXIST),
        };
        assert!(!is_conflict(&file), "{file}");
        let table = Error::TableConflict {
            iface: IfName::try_new("eth1").unwrap(),
            table: 10001,
            others: vec!["eth2".to_owned()],
        };
        assert!(is_conflict(&table));
    }

    #[test]
    fn label_values_are_escaped_and_read_back() {
        let hostile = "a\\b\"c\nd}e,f=\"g";
        let s = series(EVENTS, &[("client", hostile), ("reason", "bound")]);
        assert_eq!(
            s,
            r#"leasehook_events_total{client="a\\b\"c\nd}e,f=\"g",reason="bound"}"#
        );
        let (name, labels) = parse_series(&s).unwrap();
        assert_eq!(name, EVENTS);
        assert_eq!(labels[0], ("client".to_owned(), hostile.to_owned()));
        assert!(stored_series(&s));
        assert_eq!(series(CONFLICTS, &[]), CONFLICTS);
    }

    #[test]
    fn a_corrupt_counters_file_is_refused_whole() {
        let good = "leasehook_conflicts_total 2\nleasehook_events_total{client=\"dhclient\",reason=\"bound\",outcome=\"applied\"} 1\n";
        assert_eq!(parse_counters(good.as_bytes()).unwrap().len(), 2);
        for bad in [
            "leasehook_conflicts_total -1\n",
            "leasehook_conflicts_total NaN\n",
            "leasehook_conflicts_total inf\n",
            "leasehook_conflicts_total 1.5\n",
            "leasehook_conflicts_total\n",
            "other_metric 1\n",
            "leasehook_events_total{client=\"x\"\n# HELP injected\n} 1\n",
            "leasehook_events_total{client=\"x\\q\"} 1\n",
            "leasehook_events_total{client=\"x\"}} 1\n",
            "leasehook_events_total{client=x} 1\n",
            "leasehook_conflicts_total 1 2\n",
            "\u{0}\u{ff}",
        ] {
            assert!(parse_counters(bad.as_bytes()).is_err(), "{bad:?}");
        }
        assert!(parse_counters(&[0xff, 0xfe]).is_err());
    }

    #[test]
    fn flush_adds_to_the_stored_counters_and_restarts_a_corrupt_file() {
        let root = tempfile::tempdir().unwrap();
        let paths = root.path();
        let ev = series(
            EVENTS,
            &[
                ("client", "nm"),
                ("reason", "bound"),
                ("outcome", "applied"),
            ],
        );
        store(
            paths,
            &[
                (ev.clone(), Change::Add(1)),
                (CONFLICTS.to_owned(), Change::Add(1)),
            ],
        )
        .unwrap();
        store(paths, &[(ev.clone(), Change::Add(1))]).unwrap();
        let got = counters(root.path());
        assert_eq!((got.get(&ev), got.get(CONFLICTS)), (Some(&2), Some(&1)));
        // A planted file: logged, counting starts again, the event goes on.
        let file = root.path().join("run/leasehook/metrics/counters");
        std::fs::write(&file, "leasehook_events_total{x=\"\n").unwrap();
        assert!(counters(root.path()).is_empty());
        store(paths, &[(ev.clone(), Change::Add(1))]).unwrap();
        assert_eq!(counters(root.path()).get(&ev), Some(&1));
        // A symlink in its place is not followed.
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &file).unwrap();
        assert!(counters(root.path()).is_empty());
        // Max keeps the larger timestamp.
        let ls = series(LAST_SUCCESS, &[("interface", "eth1")]);
        store(
            paths,
            &[(ls.clone(), Change::Max(5)), (ls.clone(), Change::Max(3))],
        )
        .unwrap();
        assert_eq!(counters(root.path()).get(&ls), Some(&5));
    }

    #[test]
    fn a_process_that_never_flushes_keeps_one_entry_per_series() {
        let key = series(REFUSALS, &[("reason", "test-only-never-flushed")]);
        for _ in 0..1000 {
            note(key.clone(), Change::Add(1));
        }
        let p = PENDING.lock().unwrap();
        assert_eq!(p.get(&key), Some(&Change::Add(1000)));
        assert_eq!(p.keys().filter(|k| **k == key).count(), 1);
        assert_eq!(Change::Max(3).merge(Change::Max(5)), Change::Max(5));
    }

    #[test]
    fn the_textfile_key_takes_an_absolute_prom_path() {
        let load = |v: &str| {
            let env: crate::event::Env = [
                ("LEASEHOOK_CONFIG", "/dev/null"),
                ("LEASEHOOK_METRICS_TEXTFILE", v),
            ]
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
            crate::config::load(&crate::config::Layers::from_env(env))
                .map(|l| l.settings.metrics_textfile)
        };
        let path = "/var/lib/prometheus/node-exporter/leasehook.prom";
        assert_eq!(load(path).unwrap(), Some(std::path::PathBuf::from(path)));
        assert_eq!(load("").unwrap(), None);
        for bad in ["leasehook.prom", "/var/lib/leasehook.txt", "/"] {
            let e = load(bad).unwrap_err().to_string();
            assert!(
                e.contains("LEASEHOOK_METRICS_TEXTFILE") && e.contains(".prom"),
                "{e}"
            );
        }
        let layer =
            crate::config::parse_file("f.yaml", "metrics:\n  textfile: /a/b.prom\n").unwrap();
        assert_eq!(layer.values.len(), 1);
        assert!(crate::config::parse_file("f.yaml", "metrics:\n  textfil: /a/b.prom\n").is_err());
    }

    #[test]
    fn render_has_every_family_once() {
        let root = tempfile::tempdir().unwrap();
        let text = render(root.path(), None);
        for (name, kind, _) in FAMILIES {
            assert_eq!(text.matches(&format!("# TYPE {name} {kind}\n")).count(), 1);
        }
        assert!(text.contains("leasehook_conflicts_total 0\n"), "{text}");
        assert!(text.contains("leasehook_metadata_wait_seconds_bucket{le=\"+Inf\"} 0\n"));
    }
}

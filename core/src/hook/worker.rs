// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the hand-over from a hook to its detached worker
//! (`run/leasehook/pending/<if>.json`, the event counter, the hand-over lock) and
//! the worker itself, which finishes the wait within the total budget.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::HookConfig;
use super::effects::Effects;
use super::last_event;
use super::lease::{LeaseWait, lease_next, remove, wait_and_apply_lease};
use super::outcome::HookOutcome;
use crate::apply::state::{self, Paths};
use crate::error::{Error, Result};
use crate::model::{Action, IfName, LeaseEvent};
use crate::source::provider::Outcome;

/// A hand-over from a hook to its worker: `<root>/run/leasehook/pending/<ifname>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Pending {
    /// The interface's event counter when the hook handed over.
    generation: u64,
    /// The worker's pid, once started.
    pid: Option<u32>,
    /// The event.
    event: LeaseEvent,
    /// When the whole budget ends, in milliseconds since the Unix epoch.
    deadline_ms: u64,
    /// Written without the interface's lock by a hook that could not take it
    /// within the synchronous budget: the worker bumps the event counter itself
    /// once it has the lock, and handles the event (removal included).
    #[serde(default)]
    queued: bool,
    /// When the event's wait began, in milliseconds since the Unix epoch (0:
    /// not known, a hand-over written before this field).
    #[serde(default)]
    since_ms: u64,
    /// What the metadata did not say yet when the hook handed over (for
    /// `leasehook status`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    missing: Vec<String>,
}

/// What the metadata's answer still lacks, one line each: the missing keys of
/// an incomplete answer, or the error of a failed one.
pub(super) fn waiting_for(o: &Outcome) -> Vec<String> {
    match o {
        Outcome::Partial { missing, .. } => missing.iter().map(ToString::to_string).collect(),
        Outcome::Failed(e) => vec![e.to_string()],
        Outcome::Complete(_) => Vec::new(),
    }
}

/// A hand-over to a detached worker, as `leasehook status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    /// The interface.
    pub name: IfName,
    /// The worker's pid, once started.
    pub pid: Option<u32>,
    /// The event's reason (`BOUND`, ...).
    pub reason: String,
    /// When the wait began, in milliseconds since the Unix epoch (0: not known).
    pub since_ms: u64,
    /// When the whole budget ends, in milliseconds since the Unix epoch.
    pub deadline_ms: u64,
    /// Queued behind a busy lock rather than waiting for the metadata.
    pub queued: bool,
    /// What the metadata did not say yet.
    pub missing: Vec<String>,
}

/// Every hand-over in `run/leasehook/pending/`, and the errors of unreadable
/// ones (a file that is not a hand-over is one).
pub fn waiting(paths: &Paths) -> (Vec<Waiting>, Vec<Error>) {
    state::list_records(paths, PENDING, |dir, f, stem| {
        let Ok(name) = IfName::try_new(stem) else {
            return Ok(None);
        };
        let Some(bytes) = dir
            .read(f, MAX_PENDING_BYTES)
            .map_err(|p| dir.error(f, &p))?
        else {
            return Ok(None);
        };
        let p = serde_json::from_slice::<Pending>(&bytes).map_err(|e| Error::Corrupt {
            path: format!("{:?}", dir.path().join(f)),
            what: "not a hand-over",
            source: Box::new(e),
        })?;
        Ok(Some(Waiting {
            name,
            pid: p.pid,
            reason: p.event.reason.to_string().to_ascii_uppercase(),
            since_ms: p.since_ms,
            deadline_ms: p.deadline_ms,
            queued: p.queued,
            missing: p.missing,
        }))
    })
}

/// `run/leasehook/handover/<ifname>.lock`: serialises the short read-check-write
/// of a hand-over between a hook holding the interface's lock and a newer one
/// queueing without it.
pub(super) const HANDOVER_LOCK: &str = "handover";

/// Runs `f` under the interface's hand-over lock (waited for at most 1 s: it is
/// only ever held for a file write and a fork).
pub(super) fn with_handover_lock<T>(
    paths: &Paths,
    name: &IfName,
    f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let dir = paths
        .run_folder(Some(HANDOVER_LOCK), true)?
        .ok_or_else(|| Error::Io {
            path: format!("{:?}", paths.run_dir().join(HANDOVER_LOCK)),
            message: "vanished".to_owned(),
        })?;
    let file_name = format!("{name}.lock");
    let file = dir
        .open_lock(&file_name, 0o600)
        .map_err(|p| dir.error(&file_name, &p))?;
    let until = Instant::now() + Duration::from_secs(1);
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(fs::TryLockError::WouldBlock) if Instant::now() < until => {
                std::thread::sleep(crate::constants::HOOK_LOCK_POLL);
            }
            Err(fs::TryLockError::WouldBlock) => {
                return Err(Error::Io {
                    path: format!("{:?}", dir.path().join(&file_name)),
                    message: "held for more than 1 s".to_owned(),
                });
            }
            Err(fs::TryLockError::Error(e)) => {
                return Err(Error::io(&dir.path().join(&file_name), &e));
            }
        }
    }
    f()
}

/// `run/leasehook/pending/<ifname>.json`.
pub(super) const PENDING: &str = "pending";

/// `run/leasehook/generation/<ifname>`.
pub(super) const GENERATION: &str = "generation";

/// The largest hand-over read (an event is well under 4 KiB).
pub(super) const MAX_PENDING_BYTES: u64 = 64 * 1024;

/// The largest event counter read.
pub(super) const MAX_GENERATION_BYTES: u64 = 64;

pub(super) fn pending_name(name: &IfName) -> String {
    format!("{name}.json")
}

/// The interface's event counter; 0 when missing. A counter that cannot be read
/// (a symlink, a FIFO, garbage, `/dev/zero`) is logged and counts as 0: it only
/// tells a worker whether a newer event came, and the hook rewrites it.
pub(super) fn read_generation(paths: &Paths, name: &IfName) -> u64 {
    match state::read_run_file(paths, Some(GENERATION), name.as_str(), MAX_GENERATION_BYTES) {
        Ok(b) => b
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0),
        Err(e) => {
            log::warn!("{e}; the event counter starts again");
            0
        }
    }
}

pub(super) fn write_generation(paths: &Paths, name: &IfName, generation: u64) -> Result<()> {
    state::write_run_file(
        paths,
        Some(GENERATION),
        name.as_str(),
        generation.to_string().as_bytes(),
        0o600,
    )
}

pub(super) fn read_pending(paths: &Paths, name: &IfName) -> Option<Pending> {
    match state::read_run_file(paths, Some(PENDING), &pending_name(name), MAX_PENDING_BYTES) {
        Ok(b) => serde_json::from_slice(&b?).ok(),
        Err(e) => {
            log::warn!("{e}; ignored");
            None
        }
    }
}

pub(super) fn write_pending(paths: &Paths, name: &IfName, p: &Pending) -> Result<()> {
    let json = serde_json::to_vec(p).map_err(|source| Error::Encode {
        path: format!(
            "{:?}",
            paths.run_dir().join(PENDING).join(pending_name(name))
        ),
        source,
    })?;
    state::write_run_file(paths, Some(PENDING), &pending_name(name), &json, 0o600)
}

/// The worker the interface's hand-over names, if any.
pub(super) fn pending_worker(paths: &Paths, name: &IfName) -> Option<u32> {
    read_pending(paths, name).and_then(|p| p.pid)
}

pub(super) fn remove_pending(paths: &Paths, name: &IfName) {
    if let Err(e) = state::remove_run_file(paths, Some(PENDING), &pending_name(name)) {
        log::warn!("{e}");
    }
}

/// Whether `pid` is a leasehook shim's worker for `name`, so that neither a recycled
/// pid nor another interface's worker that got a stale hand-over's pid is signalled.
pub(super) fn is_our_worker(pid: u32, name: &IfName) -> bool {
    let want = name.as_str().as_bytes();
    fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
        let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
        args.windows(2)
            .any(|w| matches!(w, [flag, iface] if *flag == b"--worker" && *iface == want))
    })
}

/// Hands the rest of the wait of `event` (handled under the lock as event number
/// `generation`) to a detached worker, unless a newer event queued itself
/// meanwhile.
pub(super) fn hand_over(
    paths: &Paths,
    event: &LeaseEvent,
    generation: u64,
    (since_ms, deadline_ms): (u64, u64),
    missing: Vec<String>,
    worker: &Path,
) -> Result<HookOutcome> {
    let mut pending = Pending {
        generation,
        pid: None,
        event: event.clone(),
        deadline_ms,
        queued: false,
        since_ms,
        missing,
    };
    let name = &event.interface;
    with_handover_lock(paths, name, || {
        // A newer event that could not take the lock queued itself
        // meanwhile: it supersedes this one, whose worker is not started.
        if read_pending(paths, name).is_some_and(|p| p.queued) {
            return Ok(HookOutcome::Kept(
                "a newer event is queued for this interface; it applies instead".to_owned(),
            ));
        }
        write_pending(paths, name, &pending)?;
        let pid = spawn_worker(worker, name)?;
        pending.pid = Some(pid);
        write_pending(paths, name, &pending)?;
        log::info!("IMDS does not agree with the lease yet; worker {pid} finishes the wait");
        Ok(HookOutcome::Deferred(pid))
    })
}

/// Hands an event whose lock stayed busy for the whole synchronous budget to a
/// worker (without the lock: under the hand-over lock only), which takes the lock
/// within the total budget and handles the event.
pub(super) fn queue_for_worker(
    paths: &Paths,
    event: &LeaseEvent,
    cfg: &HookConfig,
    worker: &Path,
    started_ms: u64,
) -> Result<HookOutcome> {
    let name = &event.interface;
    let deadline_ms =
        started_ms.saturating_add(u64::try_from(cfg.budget.as_millis()).unwrap_or(u64::MAX));
    let mut pending = Pending {
        generation: 0,
        pid: None,
        event: event.clone(),
        deadline_ms,
        queued: true,
        since_ms: started_ms,
        missing: Vec::new(),
    };
    let pid = with_handover_lock(paths, name, || {
        write_pending(paths, name, &pending)?;
        let pid = spawn_worker(worker, name)?;
        pending.pid = Some(pid);
        write_pending(paths, name, &pending)?;
        Ok(pid)
    })?;
    log::warn!(
        "{name}: the interface's lock is still held after {} ms (a refresh, apply or flush, or a worker that does not stop); worker {pid} takes the event and waits for the lock within the budget",
        cfg.sync_budget.as_millis()
    );
    Ok(HookOutcome::Deferred(pid))
}

/// [`super::run_worker`] (but for leaving the session) with the kernel, the provider
/// and the clock handed in.
pub fn run_worker_with(
    fx: &mut Effects<'_>,
    name: &IfName,
    cfg: &HookConfig,
) -> Result<HookOutcome> {
    let paths = Paths::new(&cfg.root);
    // The lock is waited for until the hand-over's deadline at most: a process
    // that never lets it go (a stopped `refresh`) must not keep a worker forever.
    let deadline_ms = read_pending(&paths, name).map_or_else(
        || {
            state::unix_ms()
                .saturating_add(u64::try_from(cfg.budget.as_millis()).unwrap_or(u64::MAX))
        },
        |p| p.deadline_ms,
    );
    let until =
        fx.clock.now() + Duration::from_millis(deadline_ms.saturating_sub(state::unix_ms()));
    let _lock = loop {
        if let Some(lock) = state::try_lock_interface(&paths, name)? {
            break lock;
        }
        if fx.clock.now() >= until {
            let e = Err(Error::Io {
                path: format!("{:?}", paths.lock_file(name)),
                message: "still held when the budget ended: the event is dropped (the next event or refresh applies it)".to_owned(),
            });
            let reason = read_pending(&paths, name).map(|p| p.event.reason.to_string());
            last_event::record_worker(
                &paths,
                name,
                &reason.unwrap_or_default().to_ascii_uppercase(),
                &e,
            );
            return e;
        }
        fx.clock.sleep(WORKER_LOCK_POLL);
    };
    let Some(mut pending) = read_pending(&paths, name) else {
        return Ok(HookOutcome::Kept(
            "no pending event (superseded)".to_owned(),
        ));
    };
    // Two hooks that handed over in turn each started a worker; the later
    // hand-over names its own. The earlier worker must not take that one over: a
    // newer event stops the worker the file names, and would wait for this one.
    if let Some(pid) = pending.pid.filter(|p| *p != std::process::id()) {
        return Ok(HookOutcome::Kept(format!(
            "the pending event belongs to worker {pid}"
        )));
    }
    if pending.queued {
        // Queued by a hook that could not take the lock: this is the event's
        // first handling under the lock, so it counts as a new event here.
        let generation = read_generation(&paths, name).saturating_add(1);
        if let Err(e) = write_generation(&paths, name, generation) {
            log::warn!("{e}; going on without the event counter");
        }
        pending.generation = generation;
        pending.queued = false;
        if pending.event.action() == Action::Remove {
            remove_pending(&paths, name);
            let result = remove(fx.kernel, &paths, &pending.event).map(HookOutcome::Removed);
            last_event::record_worker(&paths, name, &reason_of(&pending), &result);
            return result;
        }
        // Kept while the wait lasts, so that a newer event can stop this worker.
        write_pending(&paths, name, &pending)?;
    } else if pending.generation != read_generation(&paths, name) {
        remove_pending(&paths, name);
        return Ok(HookOutcome::Kept(
            "a newer event superseded this one".to_owned(),
        ));
    }
    let result = finish_wait(fx, &paths, &pending, cfg);
    remove_pending(&paths, name);
    last_event::record_worker(&paths, name, &reason_of(&pending), &result);
    result
}

fn reason_of(p: &Pending) -> String {
    p.event.reason.to_string().to_ascii_uppercase()
}

/// Finishes the wait of `pending`'s event within its deadline and applies.
/// Once the wait is over a newer event must not stop this worker (a SIGTERM
/// halfway through the writes would leave them unrecorded), so the hand-over
/// that names it goes first; that event then only waits for the lock, as long
/// as the writes take.
fn finish_wait(
    fx: &mut Effects<'_>,
    paths: &Paths,
    pending: &Pending,
    cfg: &HookConfig,
) -> Result<HookOutcome> {
    let event = &pending.event;
    let left = Duration::from_millis(pending.deadline_ms.saturating_sub(state::unix_ms()));
    let how = LeaseWait {
        until: fx.clock.now() + left,
        floor: Duration::from_millis(100),
        on_cni: || remove_pending(paths, &event.interface),
        decide: |outcome: Outcome| {
            remove_pending(paths, &event.interface);
            Ok(lease_next(outcome))
        },
    };
    wait_and_apply_lease(fx, paths, event, cfg, how)
}

/// How often a worker looks at the interface's lock again.
pub(super) const WORKER_LOCK_POLL: Duration = Duration::from_millis(50);

/// Starts the detached worker. Its standard input and output are closed. Its
/// standard error is the shim's only when that is a file or a terminal (where the
/// log goes when there is no journal or syslog); a pipe or socket is not passed
/// on, or a caller reading the shim's standard error to its end would wait for
/// the worker (up to the whole budget).
pub(super) fn spawn_worker(exe: &Path, name: &IfName) -> Result<u32> {
    let stderr = if stderr_is_file_or_terminal() {
        Stdio::inherit()
    } else {
        Stdio::null()
    };
    let child = Command::new(exe)
        .arg("--worker")
        .arg(name.as_str())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(|e| Error::io(exe, &e))?;
    Ok(child.id())
}

fn stderr_is_file_or_terminal() -> bool {
    use std::os::fd::AsFd as _;
    rustix::fs::fstat(std::io::stderr().as_fd()).is_ok_and(|st| {
        matches!(
            rustix::fs::FileType::from_raw_mode(st.st_mode),
            rustix::fs::FileType::RegularFile | rustix::fs::FileType::CharacterDevice
        )
    })
}

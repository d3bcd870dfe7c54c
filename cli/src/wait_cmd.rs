// SPDX-License-Identifier: Apache-2.0
//! `leasehook status --wait [--timeout S]`: waits until every NIC with a lease
//! (or an address from the metadata) is applied, for a unit that must start
//! after the routing (`leasehook-wait-online.service`, as
//! `systemd-networkd-wait-online`). It reads only run-time files, every
//! 200 ms: the state records (`run/leasehook/iface/`), the workers' hand-overs
//! (`run/leasehook/pending/`) and this boot's record; it never asks the
//! metadata service.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::bail;
use leasehook_core::apply::state::{self, Paths};
use leasehook_core::boot::state::{self as boot, Verdict};

/// How often the files are read again.
const POLL: Duration = Duration::from_millis(200);

/// The largest hand-over read (as the hooks' own limit).
const MAX_PENDING_BYTES: u64 = 64 * 1024;

/// Where the NICs stand now.
enum Seen {
    /// Every NIC known is applied (their names; none when there is no
    /// datasource, said in the text).
    Ready(String),
    /// Some NIC is still on its way: the NIC and why, one a line.
    Waiting(String),
    /// Some NIC will not get there by itself: the NIC and why, one a line.
    Failed(String),
}

/// Waits up to `timeout`: exit 0 once every NIC is applied, 1 when one failed
/// or the time ran out (the NICs that are not ready and why on standard error).
pub(crate) fn run(root: &Path, timeout: Duration) -> anyhow::Result<(String, ExitCode)> {
    let paths = Paths::new(root);
    let start = Instant::now();
    loop {
        match look(root, &paths)? {
            Seen::Ready(text) => return Ok((text, ExitCode::SUCCESS)),
            Seen::Failed(why) => {
                eprint!("{why}");
                eprintln!("leasehook: status --wait: not every NIC is applied");
                return Ok((String::new(), ExitCode::FAILURE));
            }
            Seen::Waiting(why) if start.elapsed() >= timeout => {
                eprint!("{why}");
                eprintln!(
                    "leasehook: status --wait: timed out after {} s",
                    timeout.as_secs()
                );
                return Ok((String::new(), ExitCode::FAILURE));
            }
            Seen::Waiting(_) => std::thread::sleep(POLL),
        }
    }
}

/// One look at the run-time files.
fn look(root: &Path, paths: &Paths) -> anyhow::Result<Seen> {
    let (states, errors) = state::list_states(paths);
    if let Some(e) = errors.first() {
        if !rustix::process::geteuid().is_root() {
            bail!("cannot read leasehook's state ({e}): run as root");
        }
        return Ok(Seen::Failed(format!("leasehook: {e}\n")));
    }
    let pending = pending(paths)?;
    let (mut waiting, mut failed, mut ready) = (String::new(), String::new(), Vec::new());
    for (name, pid, deadline_ms) in &pending {
        match pid {
            Some(pid) if !Path::new(&format!("/proc/{pid}")).exists() => {
                let _ = writeln!(
                    failed,
                    "{name}: its worker (pid {pid}) is gone without finishing the wait for the metadata"
                );
            }
            _ => {
                let left = deadline_ms.saturating_sub(state::unix_ms()) / 1000;
                let _ = writeln!(
                    waiting,
                    "{name}: a worker is waiting for the metadata ({left} s left of its budget)"
                );
            }
        }
    }
    // A worker takes its NIC's lock before it removes its hand-over and keeps
    // it until the state is written: a NIC whose lock is held is on its way
    // (as one a hook or a refresh is applying).
    let busy: Vec<String> = locked(paths)?
        .into_iter()
        .filter(|n| !pending.iter().any(|(p, ..)| p == n))
        .collect();
    for name in &busy {
        let _ = writeln!(
            waiting,
            "{name}: its lock is held (an event or a refresh is being applied)"
        );
    }
    for st in &states {
        let name = st.name.as_str();
        if pending.iter().any(|(n, ..)| n == name) || busy.iter().any(|n| n == name) {
            continue;
        }
        if st.missing.is_empty() {
            ready.push(name);
        } else {
            let list: Vec<String> = st.missing.iter().map(ToString::to_string).collect();
            let _ = writeln!(
                failed,
                "{name}: the metadata did not say, within the budget: {} (only what the lease \
                 proves is applied; the refresh timer asks again)",
                list.join("; ")
            );
        }
    }
    if !failed.is_empty() {
        return Ok(Seen::Failed(failed + &waiting));
    }
    if !waiting.is_empty() {
        return Ok(Seen::Waiting(waiting));
    }
    if ready.is_empty() {
        // Nothing recorded yet: no lease handled so far, unless this boot found
        // no datasource (then none will be).
        let verdict = boot::read(root, boot::boot_id(root).as_deref()).map(|b| b.verdict);
        return Ok(match verdict {
            Some(Verdict::NoDatasource | Verdict::Disabled) => {
                Seen::Ready("no datasource this boot: nothing to wait for\n".to_owned())
            }
            _ => Seen::Waiting("no NIC has an applied plan yet (no lease handled)\n".to_owned()),
        });
    }
    Ok(Seen::Ready(format!("applied: {}\n", ready.join(", "))))
}

/// The NICs whose lock (`run/leasehook/lock/IF.lock`) someone holds now: each
/// lock file is opened read-only (never created, never through a symlink) and
/// tried with a shared lock, let go at once.
fn locked(paths: &Paths) -> anyhow::Result<Vec<String>> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let Some(dir) = paths.run_folder(Some("lock"), false)? else {
        return Ok(Vec::new());
    };
    let names = dir.names().map_err(|p| dir.error(".", &p))?;
    let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
    let mut out = Vec::new();
    for file in &names {
        let Some(name) = file.strip_suffix(".lock") else {
            continue;
        };
        let Ok(f) = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(i32::try_from(flags.bits()).unwrap_or(0))
            .open(dir.path().join(file))
        else {
            continue;
        };
        if !f.metadata().is_ok_and(|m| m.is_file()) {
            continue;
        }
        if matches!(f.try_lock_shared(), Err(std::fs::TryLockError::WouldBlock)) {
            out.push(name.to_owned());
        }
    }
    Ok(out)
}

/// The hand-overs in `run/leasehook/pending/`: each NIC's name, its worker's pid
/// (none while queued) and when its budget ends (ms since the epoch).
fn pending(paths: &Paths) -> anyhow::Result<Vec<(String, Option<u64>, u64)>> {
    let Some(dir) = paths.run_folder(Some("pending"), false)? else {
        return Ok(Vec::new());
    };
    let names = dir.names().map_err(|p| dir.error(".", &p))?;
    let mut out = Vec::new();
    for file in &names {
        let Some(name) = file.strip_suffix(".json") else {
            continue;
        };
        if leasehook_core::fs::is_temp_name(file) {
            continue;
        }
        // Gone meanwhile: the worker finished.
        let Some(bytes) = state::read_run_file(paths, Some("pending"), file, MAX_PENDING_BYTES)?
        else {
            continue;
        };
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        let field = |k: &str| v.get(k).and_then(serde_json::Value::as_u64);
        out.push((
            name.to_owned(),
            field("pid"),
            field("deadline_ms").unwrap_or(0),
        ));
    }
    Ok(out)
}

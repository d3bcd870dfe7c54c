// SPDX-License-Identifier: Apache-2.0
//! Performs IO: one DHCP event end to end, shared by every DHCP client's shim.
//!
//! A shim parses its client's event into a [`LeaseEvent`] and calls [`handle`]:
//!
//! 1. A newer event supersedes the interface's detached worker, if one is waiting:
//!    it is stopped (SIGTERM, once per worker), also while the hook waits for the
//!    lock.
//! 2. The interface's lock is taken, its event counter bumped and any pending
//!    hand-over discarded. The lock is waited for within the synchronous budget:
//!    when a `refresh`, `apply`, `flush` or a stopped worker still holds it then,
//!    the event is *queued* — handed to a worker that waits for the lock within the
//!    total budget and then handles the event as the hook would have.
//! 3. *Remove* reasons tear down that family's rules, routes and secondary
//!    addresses. *Apply* reasons ask IMDS for what the lease cannot tell and wait,
//!    for what is left of the synchronous budget (3 s), until IMDS agrees with the
//!    lease.
//! 4. If it does, the plan is applied. If not, the rest of the wait is handed to one
//!    detached worker (the same shim, started again with `--worker IFNAME`) that
//!    takes the lock, checks that no newer event came meanwhile, finishes the wait
//!    within the total budget (30 s) and applies.
//!
//! **The bound.** The synchronous part — lock wait, IMDS wait, every request and
//! its token exchange — ends by the synchronous budget plus one IMDS request
//! timeout (2 s): no request starts once the budget is spent, and the request under
//! way ends within its timeout, token dance included (see [`crate::source::ec2`]).
//! The netlink writes that follow take milliseconds.
//!
//! On a Kubernetes node with a VPC-native CNI ([`crate::kubernetes`]) the CNI's
//! ENIs are left alone (the event is logged and skipped) and the primary's
//! secondary IPs stay the pods'; the hook, the worker and `refresh` all ask the
//! same gate.
//!
//! When the wait ends without IMDS agreeing, what the lease alone proves is applied
//! if nothing was applied for that family before; otherwise the last applied state
//! is kept. An IMDS error never removes anything.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::apply::netlink::NetlinkApplier;
use crate::apply::state::{self, InterfaceState, Paths};
use crate::apply::{self, Applier, Report};
use crate::config::{self, Layers, Settings, Unmanaged};
use crate::error::{Error, Result};
use crate::model::{Action, IfName, LeaseEvent, Link, MacAddr, Profile};
use crate::plan::{InterfaceLease, PlanConfig, PlanInput, plan};
use crate::source::ec2::{Ec2, NicEvent, Outcome, WaitPolicy};

/// What a shim needs to know besides the event: the hook's part of the
/// [configuration](crate::config).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookConfig {
    /// Prefix of every file path (`/` in production).
    pub root: PathBuf,
    /// The planner's knobs.
    pub plan: PlanConfig,
    /// IMDS base URLs, tried in order; empty means the defaults.
    pub endpoints: Vec<String>,
    /// Fall back to IMDSv1 when the token is refused.
    pub imdsv1_fallback: bool,
    /// How long the DHCP client may be held.
    pub sync_budget: Duration,
    /// How long the whole wait may take.
    pub budget: Duration,
    /// Send each NIC's IMDS requests through that NIC, from its leased address.
    pub imds_bind_interface: bool,
    /// NICs left alone.
    pub unmanaged: Vec<Unmanaged>,
    /// `kubernetes`: auto, on or off.
    pub kubernetes: crate::kubernetes::Mode,
}

/// The `--help` section on where a hook's settings come from, listing every
/// `LEASEHOOK_*` variable.
pub fn env_help() -> String {
    let mut out = String::from(
        "Configuration: /etc/leasehook/config.yaml, then /etc/leasehook/config.d/*.yaml,\n\
         then these environment variables (`leasehook config show` prints the result):\n",
    );
    for (var, help) in config::environment() {
        let _ = writeln!(out, "  {var:<30} {help}");
    }
    out
}

impl HookConfig {
    /// The hook's part of merged settings.
    pub fn from_settings(s: &Settings) -> Self {
        Self {
            root: s.root.clone(),
            plan: s.plan.clone(),
            endpoints: s.imds.endpoints.clone().unwrap_or_default(),
            imdsv1_fallback: s.imdsv1_fallback,
            sync_budget: s.imds.sync_budget,
            // The whole wait is never shorter than the part the client waits for.
            budget: s.imds.budget.max(s.imds.sync_budget),
            imds_bind_interface: s.imds.bind_interface,
            unmanaged: s.unmanaged.clone(),
            kubernetes: s.kubernetes,
        }
    }

    /// Reads the configuration files below `LEASEHOOK_ROOT` (or `/`) and the
    /// `LEASEHOOK_*` variables of `env`; a bad value is an error naming the file
    /// and line, or the variable.
    pub fn load(env: &crate::event::Env) -> Result<Self> {
        config::load(&Layers::from_env(env.clone())).map(|l| Self::from_settings(&l.settings))
    }

    /// Whether the NIC `name` (MAC `mac`, when known) is listed in `unmanaged`.
    pub fn is_unmanaged(&self, name: &IfName, mac: Option<MacAddr>) -> bool {
        self.unmanaged.iter().any(|u| u.matches(name, mac))
    }
}

/// What [`handle`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookOutcome {
    /// The reason needs nothing (`PREINIT`, ...).
    Ignored,
    /// The plan was applied (complete: IMDS agreed with the lease).
    Applied(Report),
    /// The wait ended without IMDS agreeing: what the lease proves was applied.
    AppliedPartial(Report),
    /// The family's objects were removed.
    Removed(Report),
    /// The wait continues in a detached worker with this pid.
    Deferred(u32),
    /// Nothing changed; the reason is logged.
    Kept(String),
    /// The interface is listed in `unmanaged`: nothing was done.
    Unmanaged,
}

/// A hand-over from a hook to its worker: `<root>/run/leasehook/pending/<ifname>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Pending {
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
}

/// `run/leasehook/handover/<ifname>.lock`: serialises the short read-check-write
/// of a hand-over between a hook holding the interface's lock and a newer one
/// queueing without it.
const HANDOVER_LOCK: &str = "handover";

/// Runs `f` under the interface's hand-over lock (waited for at most 1 s: it is
/// only ever held for a file write and a fork).
fn with_handover_lock<T>(paths: &Paths, name: &IfName, f: impl FnOnce() -> Result<T>) -> Result<T> {
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
const PENDING: &str = "pending";
/// `run/leasehook/generation/<ifname>`.
const GENERATION: &str = "generation";
/// `run/leasehook/refreshed/<ifname>`.
const REFRESHED: &str = "refreshed";
/// The largest hand-over read (an event is well under 4 KiB).
const MAX_PENDING_BYTES: u64 = 64 * 1024;
/// The largest event counter read.
const MAX_GENERATION_BYTES: u64 = 64;

fn pending_name(name: &IfName) -> String {
    format!("{name}.json")
}

/// The interface's event counter; 0 when missing. A counter that cannot be read
/// (a symlink, a FIFO, garbage, `/dev/zero`) is logged and counts as 0: it only
/// tells a worker whether a newer event came, and the hook rewrites it.
fn read_generation(paths: &Paths, name: &IfName) -> u64 {
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

fn write_generation(paths: &Paths, name: &IfName, generation: u64) -> Result<()> {
    state::write_run_file(
        paths,
        Some(GENERATION),
        name.as_str(),
        generation.to_string().as_bytes(),
        0o600,
    )
}

fn read_pending(paths: &Paths, name: &IfName) -> Option<Pending> {
    match state::read_run_file(paths, Some(PENDING), &pending_name(name), MAX_PENDING_BYTES) {
        Ok(b) => serde_json::from_slice(&b?).ok(),
        Err(e) => {
            log::warn!("{e}; ignored");
            None
        }
    }
}

fn write_pending(paths: &Paths, name: &IfName, p: &Pending) -> Result<()> {
    let json = serde_json::to_vec(p).map_err(|e| Error::Io {
        path: format!(
            "{:?}",
            paths.run_dir().join(PENDING).join(pending_name(name))
        ),
        message: e.to_string(),
    })?;
    state::write_run_file(paths, Some(PENDING), &pending_name(name), &json, 0o600)
}

fn remove_pending(paths: &Paths, name: &IfName) {
    if let Err(e) = state::remove_run_file(paths, Some(PENDING), &pending_name(name)) {
        log::warn!("{e}");
    }
}

/// Whether `pid` is a leasehook shim's worker for `name`, so that neither a recycled
/// pid nor another interface's worker that got a stale hand-over's pid is signalled.
fn is_our_worker(pid: u32, name: &IfName) -> bool {
    let want = name.as_str().as_bytes();
    fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
        let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
        args.windows(2)
            .any(|w| matches!(w, [flag, iface] if *flag == b"--worker" && *iface == want))
    })
}

/// Stops the interface's waiting worker, if any: a newer event supersedes it. The
/// hand-over file is left to [`handle`], which drops it under the lock. A worker
/// already in `signalled` is not signalled (nor logged) again: a stopped one
/// (SIGSTOP) stays until continued, and one line says so, not one per look.
fn supersede_worker(paths: &Paths, name: &IfName, signalled: &mut BTreeSet<u32>) {
    let pid = read_pending(paths, name).and_then(|p| p.pid).filter(|pid| {
        *pid != std::process::id() && !signalled.contains(pid) && is_our_worker(*pid, name)
    });
    if let Some((pid, p)) = pid.and_then(|pid| {
        Some((
            pid,
            rustix::process::Pid::from_raw(i32::try_from(pid).ok()?)?,
        ))
    }) {
        signalled.insert(pid);
        match rustix::process::kill_process(p, rustix::process::Signal::TERM) {
            Ok(()) => log::info!("stopped the waiting worker {pid}: a newer event supersedes it"),
            Err(e) => log::debug!("worker {pid} already gone ({e})"),
        }
    }
}

/// Takes the interface's lock for a new event. A waiting worker holds the lock for
/// its whole wait, and the new event supersedes it, so while the lock is busy the
/// worker the hand-over names is stopped, again at each look. Stopping it once,
/// before queueing, is not enough: a hook that held the lock then may hand over and
/// start its worker only afterwards, and that worker, taking the lock first, would
/// hold this event (and the DHCP client) for the rest of its wait.
///
/// The wait ends at `until`: `Ok(None)` when the lock is still busy then (a
/// `refresh`, `apply` or `flush`, or a worker that does not stop, holds it).
fn lock_for_event(
    paths: &Paths,
    name: &IfName,
    until: Instant,
    signalled: &mut BTreeSet<u32>,
) -> Result<Option<state::InterfaceLock>> {
    let mut waiting = false;
    loop {
        if let Some(lock) = state::try_lock_interface(paths, name)? {
            return Ok(Some(lock));
        }
        supersede_worker(paths, name, signalled);
        if !waiting {
            log::debug!("{name}: the interface's lock is busy; waiting for it");
            waiting = true;
        }
        if Instant::now() >= until {
            return Ok(None);
        }
        std::thread::sleep(crate::constants::HOOK_LOCK_POLL);
    }
}

/// Hands an event whose lock stayed busy for the whole synchronous budget to a
/// worker (without the lock: under the hand-over lock only), which takes the lock
/// within the total budget and handles the event.
fn queue_for_worker(
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

/// The OS's links with a MAC, for the `cloud-init` profile, which numbers a NIC by
/// its position among all NICs present in both the OS and IMDS; empty for
/// `ec2-net-utils`, whose table depends on the NIC alone. A MAC held by several
/// links (a VLAN on a NIC) counts once, by its first link in name order.
fn os_links<A: Applier + ?Sized>(applier: &mut A, cfg: &HookConfig) -> Result<Vec<Link>> {
    if cfg.plan.profile != Profile::CloudInit {
        return Ok(Vec::new());
    }
    let mut links: Vec<Link> = applier
        .links()?
        .into_iter()
        .filter_map(|k| {
            Some(Link {
                name: k.name,
                mac: k.mac?,
                ipv6_router: None,
            })
        })
        .collect();
    links.sort_by(|a, b| a.name.cmp(&b.name));
    let mut seen = std::collections::BTreeSet::new();
    links.retain(|l| seen.insert(l.mac));
    Ok(links)
}

/// Plans `link` alone: with `ec2-net-utils` from its own metadata, with
/// `cloud-init` among `os_links` (its position comes from every NIC's
/// `network-card`/`device-number` in `network`), and keeps only that interface
/// and the families of `leases`, the objects this event or refresh may change.
fn plan_one(
    cfg: &HookConfig,
    network: &crate::model::InstanceNetwork,
    link: &Link,
    os_links: &[Link],
    leases: &[crate::model::Lease],
    link_addresses: &[crate::model::Address],
) -> Result<crate::model::Plan> {
    let mut links: Vec<Link> = os_links
        .iter()
        .filter(|l| l.name != link.name && l.mac != link.mac)
        .cloned()
        .collect();
    links.push(link.clone());
    let iface_leases: Vec<InterfaceLease> = leases
        .iter()
        .map(|l| InterfaceLease {
            interface: link.name.clone(),
            lease: l.clone(),
        })
        .collect();
    let mut p = plan(
        &PlanInput {
            metadata: network,
            links: &links,
            leases: &iface_leases,
            link_addresses,
        },
        &cfg.plan,
    )?;
    let families: Vec<crate::model::Family> = leases.iter().map(|l| l.family).collect();
    p.interfaces.retain(|ip| ip.name == link.name);
    for ip in &mut p.interfaces {
        ip.families.retain(|f| families.contains(f));
        ip.routes.retain(|r| families.contains(&r.family()));
        ip.rules.retain(|r| families.contains(&r.family()));
        ip.addresses.retain(|a| families.contains(&a.family()));
        // cloud-init sets the table for either family's policy routing.
        if cfg.plan.profile == Profile::CloudInit && ip.routes.is_empty() && ip.rules.is_empty() {
            ip.table = None;
        }
    }
    Ok(p)
}

/// With `cloud-init` numbering, a NIC's table follows its position, which moves
/// when a NIC is attached before it in the order or detached: the table the plan
/// wants may still be another interface's, recorded when it was applied. Its
/// routes would collide (EEXIST) and its rules would be taken over, so this NIC
/// waits until that interface has moved (its next event or `refresh`).
/// A state with the NIC's own MAC is the NIC itself (under another name, before
/// `refresh` moves it), not another one.
fn table_held_by_other(
    paths: &Paths,
    p: &crate::model::Plan,
    cfg: &HookConfig,
    mac: MacAddr,
) -> Option<String> {
    if cfg.plan.profile != Profile::CloudInit {
        return None;
    }
    let table = p.interfaces.iter().find_map(|ip| ip.table)?;
    let (states, _) = state::list_states(paths);
    states
        .iter()
        .find(|st| st.mac != mac && st.tables().contains(&table))
        .map(|st| {
            format!(
                "table {table} (this NIC's position in the cloud-init order) is still {}'s: \
                 nothing changed until it moves (its next event or refresh)",
                st.name
            )
        })
}

/// Handles one event from a shim. `worker` is the shim's own executable, started
/// again with `--worker IFNAME` if the wait has to continue in the background.
pub fn handle(event: &LeaseEvent, cfg: &HookConfig, worker: &Path) -> Result<HookOutcome> {
    if event.action() == Action::Ignore {
        return Ok(HookOutcome::Ignored);
    }
    if !cfg.unmanaged.is_empty() {
        let mac = NetlinkApplier::try_new()?
            .links()?
            .into_iter()
            .find(|l| l.name == event.interface)
            .and_then(|l| l.mac);
        if cfg.is_unmanaged(&event.interface, mac) {
            log::info!(
                "{} is unmanaged (configuration key unmanaged): left alone",
                event.interface
            );
            return Ok(HookOutcome::Unmanaged);
        }
    }
    let started = state::unix_ms();
    let t0 = Instant::now();
    let sync_end = t0 + cfg.sync_budget;
    let paths = Paths::new(&cfg.root);
    let mut signalled = BTreeSet::new();
    supersede_worker(&paths, &event.interface, &mut signalled);
    let Some(_lock) = lock_for_event(&paths, &event.interface, sync_end, &mut signalled)? else {
        return queue_for_worker(&paths, event, cfg, worker, started);
    };
    let generation = read_generation(&paths, &event.interface).saturating_add(1);
    if let Err(e) = write_generation(&paths, &event.interface, generation) {
        // A full run/leasehook must not keep a RELEASE from removing what it
        // should: the counter only tells a waiting worker to stand down, and its
        // hand-over is dropped below anyway.
        log::warn!("{e}; going on without the event counter");
    }
    // A hand-over still here is older than this event: drop it now, under the lock.
    // Its worker, if it has not taken the lock yet, then finds none and stands
    // down; left in place, it would outlive that worker (the soak test found such
    // files when a hook queued behind the one that handed over).
    remove_pending(&paths, &event.interface);
    let mut applier = NetlinkApplier::try_new()?;
    if event.action() == Action::Remove {
        return remove(&mut applier, &paths, event).map(HookOutcome::Removed);
    }
    let cfg = &match kubernetes_gate(&mut applier, cfg, &event.interface)? {
        Gate::Plan(c) => c,
        Gate::Cni(why) => {
            return leave_to_cni(&mut applier, &paths, &event.interface, &why)
                .map(HookOutcome::Kept);
        }
    };
    let link = find_link(&mut applier, &event.interface)?;
    let os = os_links(&mut applier, cfg)?;
    let ec2 = nic_client(cfg, &event.interface, &[lease_of(event)?])?;
    let nic = nic_event(event, &link, &os)?;
    // What the lock wait left of the synchronous budget.
    let left = sync_end.saturating_duration_since(Instant::now());
    match ec2.wait_for_nic(&nic, &WaitPolicy::default().with_budget(left)) {
        Outcome::Complete(network) => apply_outcome(
            &mut applier,
            &paths,
            event,
            &link,
            &os,
            &network,
            cfg,
            false,
        ),
        Outcome::Failed(e) if !retryable(&e) => Ok(HookOutcome::Kept(unanswered(&e))),
        Outcome::Partial { .. } | Outcome::Failed(_) if cfg.budget > cfg.sync_budget => {
            let deadline_ms =
                started.saturating_add(u64::try_from(cfg.budget.as_millis()).unwrap_or(u64::MAX));
            let mut pending = Pending {
                generation,
                pid: None,
                event: event.clone(),
                deadline_ms,
                queued: false,
            };
            let name = &event.interface;
            with_handover_lock(&paths, name, || {
                // A newer event that could not take the lock queued itself
                // meanwhile: it supersedes this one, whose worker is not started.
                if read_pending(&paths, name).is_some_and(|p| p.queued) {
                    return Ok(HookOutcome::Kept(
                        "a newer event is queued for this interface; it applies instead".to_owned(),
                    ));
                }
                write_pending(&paths, name, &pending)?;
                let pid = spawn_worker(worker, name)?;
                pending.pid = Some(pid);
                write_pending(&paths, name, &pending)?;
                log::info!(
                    "IMDS does not agree with the lease yet; worker {pid} finishes the wait"
                );
                Ok(HookOutcome::Deferred(pid))
            })
        }
        Outcome::Partial { network, missing } => {
            log_missing(&missing);
            apply_outcome(&mut applier, &paths, event, &link, &os, &network, cfg, true)
        }
        Outcome::Failed(e) => Ok(HookOutcome::Kept(unanswered(&e))),
    }
}

/// Why nothing was applied when IMDS did not answer.
fn unanswered(e: &Error) -> String {
    format!(
        "IMDS did not answer usefully ({e}): nothing applied, as the table cannot be known without \
         device-number; whatever was applied before stays"
    )
}

/// The kernel's index of link `name` (`None` when there is no such link).
pub fn link_index(name: &IfName) -> Result<Option<u32>> {
    Ok(NetlinkApplier::try_new()?
        .links()?
        .into_iter()
        .find(|l| &l.name == name)
        .map(|l| l.index))
}

/// What `leasehook refresh` did for one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefreshOutcome {
    /// IMDS agrees with the recorded leases; the report holds the writes (none when
    /// nothing changed).
    Refreshed(IfName, Report),
    /// No link has the recorded MAC any more: the interface's rules, routes and
    /// state are gone.
    LinkGone(IfName, Report),
    /// The link with the recorded MAC has another name now: the policy routing moved
    /// to it.
    Renamed {
        /// The recorded name.
        from: IfName,
        /// The link's name now.
        to: IfName,
        /// Removals under the old name and writes under the new one.
        report: Report,
    },
    /// Nothing changed, and why (IMDS did not answer, said less than before, ...).
    Kept(IfName, String),
}

/// `<root>/run/leasehook/refreshed/<ifname>`: its modification time is when the
/// interface was last refreshed (the file stays empty; refreshing rewrites nothing).
pub fn refresh_stamp(paths: &Paths, name: &IfName) -> PathBuf {
    paths.run_dir().join(REFRESHED).join(name.as_str())
}

/// When the interface was last refreshed (`None`: never, or the stamp is unusable,
/// which is logged).
pub fn refreshed_at(paths: &Paths, name: &IfName) -> Option<std::time::SystemTime> {
    state::run_file_modified(paths, REFRESHED, name.as_str())
        .inspect_err(|e| log::warn!("{e}"))
        .ok()
        .flatten()
}

fn touch(paths: &Paths, name: &IfName) {
    if let Err(e) = state::touch_run_file(paths, REFRESHED, name.as_str()) {
        log::warn!("{e}");
    }
}

fn remove_stamp(paths: &Paths, name: &IfName) {
    if let Err(e) = state::remove_run_file(paths, Some(REFRESHED), name.as_str()) {
        log::warn!("{e}");
    }
}

/// Re-checks every interface with a recorded plan (or only `only`) between leases:
/// asks IMDS again for that NIC's keys (one client, its token reused), plans from
/// the recorded leases, and applies the difference. Unchanged → no netlink write and
/// no state file written; an IMDS error or an incomplete answer changes nothing. A
/// link that is gone takes its rules, routes and state with it; a link found under
/// another name by its MAC takes them over. Each interface is handled under its lock,
/// so a refresh never races a lease event.
pub fn refresh(only: Option<&IfName>, cfg: &HookConfig) -> Result<Vec<RefreshOutcome>> {
    let paths = Paths::new(&cfg.root);
    let (states, errors) = state::list_states(&paths);
    for e in errors {
        log::warn!("{e}");
    }
    let names: Vec<IfName> = states
        .into_iter()
        .map(|s| s.name)
        .filter(|n| only.is_none_or(|o| o == n))
        .collect();
    if let (Some(o), true) = (only, names.is_empty()) {
        return Ok(vec![RefreshOutcome::Kept(
            o.clone(),
            "no recorded plan".to_owned(),
        )]);
    }
    let mut applier = NetlinkApplier::try_new()?;
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let _lock = state::lock_interface(&paths, &name)?;
        let Some(st) = state::read_state_or_set_aside(&paths, &name) else {
            continue;
        };
        if cfg.is_unmanaged(&name, Some(st.mac)) {
            out.push(RefreshOutcome::Kept(
                name,
                "unmanaged (configuration key unmanaged): left alone".to_owned(),
            ));
            continue;
        }
        // The gate asks about the link's name now (it may have been renamed).
        let now = applier
            .links()?
            .into_iter()
            .find(|l| l.mac == Some(st.mac))
            .map_or_else(|| name.clone(), |l| l.name);
        let cfg = match kubernetes_gate(&mut applier, cfg, &now)? {
            Gate::Plan(c) => c,
            Gate::Cni(why) => {
                let why = leave_to_cni(&mut applier, &paths, &name, &why)?;
                out.push(RefreshOutcome::Kept(name, why));
                continue;
            }
        };
        out.push(refresh_one(&mut applier, &paths, &st, &cfg)?);
    }
    Ok(out)
}

fn refresh_one(
    applier: &mut NetlinkApplier,
    paths: &Paths,
    st: &InterfaceState,
    cfg: &HookConfig,
) -> Result<RefreshOutcome> {
    let name = st.name.clone();
    let links = applier.links()?;
    let Some(k) = links.iter().find(|l| l.mac == Some(st.mac)) else {
        let report = apply::teardown(applier, &name, None, Some(st))?;
        state::remove_state(paths, &name)?;
        remove_stamp(paths, &name);
        log::info!(
            "{name}: no link has {} any more; removed {} object(s)",
            st.mac,
            report.writes()
        );
        return Ok(RefreshOutcome::LinkGone(name, report));
    };
    let leases: Vec<crate::model::Lease> = st.leases();
    if leases.is_empty() {
        return Ok(RefreshOutcome::Kept(
            name,
            "no lease recorded (a plan applied by hand)".to_owned(),
        ));
    }
    let to = k.name.clone();
    let renamed = to != name;
    // A lease event on the new name takes this lock too.
    let _new_lock = if renamed {
        Some(state::lock_interface(paths, &to)?)
    } else {
        None
    };
    let link = Link {
        name: to.clone(),
        mac: st.mac,
        ipv6_router: applier.ipv6_default_router(k.index)?,
    };
    let os = os_links(applier, cfg)?;
    let nic =
        NicEvent::try_new(to.clone(), st.mac, leases.clone())?.with_peers(os.iter().map(|l| l.mac));
    // One client per NIC, bound to it; the token comes from the shared cache.
    let ec2 = nic_client(cfg, &to, &leases)?;
    let outcome = ec2.wait_for_nic(&nic, &WaitPolicy::default().with_budget(cfg.sync_budget));
    touch(paths, &to);
    let network = match outcome {
        Outcome::Complete(network) => network,
        Outcome::Partial { missing, .. } => {
            let list: Vec<String> = missing.iter().map(ToString::to_string).collect();
            let why = format!(
                "IMDS incomplete ({}); keeping the state applied before",
                list.join("; ")
            );
            let mut now = st.clone();
            now.missing = missing;
            state::save_if_changed(paths, Some(st), now, state::unix_ms())?;
            return Ok(RefreshOutcome::Kept(name, why));
        }
        Outcome::Failed(e) => return Ok(RefreshOutcome::Kept(name, unanswered(&e))),
    };
    let link_addresses = applier.link_addresses(&index_of(&links))?;
    let p = plan_one(cfg, &network, &link, &os, &leases, &link_addresses)?;
    log_refused(&p);
    if let Some(why) = table_held_by_other(paths, &p, cfg, st.mac) {
        log::warn!("{to}: {why}");
        return Ok(RefreshOutcome::Kept(name, why));
    }
    let mut removed = Report::default();
    let mut previous = Some(st.clone());
    if renamed {
        // Renamed (or re-added under another name), recognised by its MAC: the old
        // name's rules go, the new name gets the plan.
        removed = apply::teardown(applier, &name, None, Some(st))?;
        state::remove_state(paths, &name)?;
        remove_stamp(paths, &name);
        previous = None;
        log::info!(
            "{name}: its MAC {} is {to} now; moved its policy routing",
            st.mac
        );
    }
    let report = apply_guarded(applier, paths, &p, previous.as_ref(), &network)?;
    apply::record_or_roll_back(applier, &report, || {
        for ip in &p.interfaces {
            let now = InterfaceState::record(previous.clone(), &report.owned_part(ip), p.profile)
                .with_leases(&leases);
            state::save_if_changed(paths, previous.as_ref(), now, state::unix_ms())?;
        }
        Ok(())
    })?;
    if renamed {
        removed.ops.extend(report.ops);
        Ok(RefreshOutcome::Renamed {
            from: name,
            to,
            report: removed,
        })
    } else {
        Ok(RefreshOutcome::Refreshed(to, report))
    }
}

/// What the Kubernetes decision (SPEC §3.7, [`crate::kubernetes`]) says about
/// planning one interface.
enum Gate {
    /// Plan with this configuration (on a Kubernetes node: the primary's pod
    /// addresses left out).
    Plan(HookConfig),
    /// The CNI's ENI, and why: left alone.
    Cni(String),
}

/// The one place the hooks, the worker and `refresh` ask whether this is a
/// Kubernetes node and whether `name` is the CNI's ENI. On such a node a
/// `priority_base` that would put leasehook's rules before the CNI's is refused.
fn kubernetes_gate(applier: &mut NetlinkApplier, cfg: &HookConfig, name: &IfName) -> Result<Gate> {
    let (decision, view) = crate::kubernetes::observe::detect(cfg.kubernetes, &cfg.root, applier)?;
    if !decision.node {
        return Ok(Gate::Plan(cfg.clone()));
    }
    crate::kubernetes::check_priorities(
        true,
        cfg.plan.priority_base.unwrap_or(cfg.plan.table_base),
    )?;
    if let Some(why) = crate::kubernetes::cni_role(&view, name) {
        return Ok(Gate::Cni(format!(
            "{name} is the CNI's ENI ({why}) on this {}: left alone",
            decision.summary()
        )));
    }
    log::debug!("{}", decision.summary());
    let mut cfg = cfg.clone();
    cfg.plan.kubernetes = true;
    Ok(Gate::Plan(cfg))
}

/// Leaves the CNI's ENI `name` to the CNI: what leasehook applied to it before
/// (from before the CNI took it over) goes, only leasehook's own objects (protocol
/// 176). Returns the message to log.
fn leave_to_cni(
    applier: &mut NetlinkApplier,
    paths: &Paths,
    name: &IfName,
    why: &str,
) -> Result<String> {
    let Some(recorded) = state::read_state_or_set_aside(paths, name) else {
        return Ok(why.to_owned());
    };
    let report = apply::teardown(applier, name, None, Some(&recorded))?;
    for e in &report.errors {
        log::warn!("{e}");
    }
    state::remove_state(paths, name)?;
    Ok(format!(
        "{why}; removed {} object(s) leasehook had applied to it",
        report.writes()
    ))
}

/// The worker: finishes the wait a hook handed over. Returns `Kept` when a newer
/// event came meanwhile.
pub fn run_worker(name: &IfName, cfg: &HookConfig) -> Result<HookOutcome> {
    // Leave the DHCP client's session: a signal to its process group, or its
    // terminal going away, must not stop the wait.
    let _ = rustix::process::setsid();
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
        Instant::now() + Duration::from_millis(deadline_ms.saturating_sub(state::unix_ms()));
    let _lock = loop {
        if let Some(lock) = state::try_lock_interface(&paths, name)? {
            break lock;
        }
        if Instant::now() >= until {
            return Err(Error::Io {
                path: format!("{:?}", paths.lock_file(name)),
                message: "still held when the budget ended: the event is dropped (the next event or refresh applies it)".to_owned(),
            });
        }
        std::thread::sleep(WORKER_LOCK_POLL);
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
            let mut applier = NetlinkApplier::try_new()?;
            return remove(&mut applier, &paths, &pending.event).map(HookOutcome::Removed);
        }
        // Kept while the wait lasts, so that a newer event can stop this worker.
        write_pending(&paths, name, &pending)?;
    } else if pending.generation != read_generation(&paths, name) {
        remove_pending(&paths, name);
        return Ok(HookOutcome::Kept(
            "a newer event superseded this one".to_owned(),
        ));
    }
    let result = finish_wait(&paths, &pending, cfg);
    remove_pending(&paths, name);
    result
}

fn finish_wait(paths: &Paths, pending: &Pending, cfg: &HookConfig) -> Result<HookOutcome> {
    let event = &pending.event;
    let left = Duration::from_millis(pending.deadline_ms.saturating_sub(state::unix_ms()))
        .max(Duration::from_millis(100));
    let mut applier = NetlinkApplier::try_new()?;
    let cfg = &match kubernetes_gate(&mut applier, cfg, &event.interface)? {
        Gate::Plan(c) => c,
        Gate::Cni(why) => {
            remove_pending(paths, &event.interface);
            return leave_to_cni(&mut applier, paths, &event.interface, &why)
                .map(HookOutcome::Kept);
        }
    };
    let link = find_link(&mut applier, &event.interface)?;
    let os = os_links(&mut applier, cfg)?;
    let ec2 = nic_client(cfg, &event.interface, &[lease_of(event)?])?;
    let nic = nic_event(event, &link, &os)?;
    let outcome = ec2.wait_for_nic(&nic, &WaitPolicy::default().with_budget(left));
    // The wait is over: from here on a newer event must not stop this worker (a
    // SIGTERM halfway through the writes would leave them unrecorded), so the
    // hand-over that names it goes first. That event then only waits for the lock,
    // as long as the writes take.
    remove_pending(paths, &event.interface);
    match outcome {
        Outcome::Complete(network) => {
            apply_outcome(&mut applier, paths, event, &link, &os, &network, cfg, false)
        }
        Outcome::Partial { network, missing } => {
            log_missing(&missing);
            apply_outcome(&mut applier, paths, event, &link, &os, &network, cfg, true)
        }
        Outcome::Failed(e) => Ok(HookOutcome::Kept(unanswered(&e))),
    }
}

fn log_missing(missing: &[crate::model::Missing]) {
    let list: Vec<String> = missing.iter().map(ToString::to_string).collect();
    log::warn!(
        "IMDS did not agree with the lease within the budget; missing: {}",
        list.join("; ")
    );
}

fn retryable(e: &Error) -> bool {
    matches!(e, Error::Imds { kind, .. } if kind.is_retryable())
}

/// The IMDS client for one NIC's requests: bound to that NIC and its IPv4 lease
/// address (unless configured off).
fn nic_client(cfg: &HookConfig, iface: &IfName, leases: &[crate::model::Lease]) -> Result<Ec2> {
    let ec2 = client(cfg)?;
    if !cfg.imds_bind_interface {
        return Ok(ec2);
    }
    let source = leases
        .iter()
        .map(|l| l.address)
        .find(std::net::IpAddr::is_ipv4);
    Ok(ec2.with_interface(iface.as_str(), source))
}

fn client(cfg: &HookConfig) -> Result<Ec2> {
    let ec2 = Ec2::try_new(&cfg.root)?.with_imdsv1_fallback(cfg.imdsv1_fallback);
    if cfg.endpoints.is_empty() {
        Ok(ec2)
    } else {
        ec2.with_endpoints(cfg.endpoints.iter())
    }
}

fn find_link(applier: &mut NetlinkApplier, name: &IfName) -> Result<(Link, u32)> {
    let k = applier
        .links()?
        .into_iter()
        .find(|l| &l.name == name)
        .ok_or_else(|| Error::InvalidPlan(format!("no link named {name}")))?;
    let mac = k
        .mac
        .ok_or_else(|| Error::InvalidPlan(format!("{name} has no MAC address")))?;
    let ipv6_router = applier.ipv6_default_router(k.index)?;
    Ok((
        Link {
            name: k.name,
            mac,
            ipv6_router,
        },
        k.index,
    ))
}

fn nic_event(event: &LeaseEvent, link: &(Link, u32), os: &[Link]) -> Result<NicEvent> {
    Ok(
        NicEvent::try_new(event.interface.clone(), link.0.mac, vec![lease_of(event)?])?
            .with_peers(os.iter().map(|l| l.mac)),
    )
}

#[allow(clippy::too_many_arguments)] // the event, its link, the OS's links, the answer, where to record
fn apply_outcome<A: Applier>(
    applier: &mut A,
    paths: &Paths,
    event: &LeaseEvent,
    link: &(Link, u32),
    os: &[Link],
    network: &crate::model::InstanceNetwork,
    cfg: &HookConfig,
    partial: bool,
) -> Result<HookOutcome> {
    let recorded = state::read_state_or_set_aside(paths, &event.interface);
    if partial
        && recorded
            .as_ref()
            .is_some_and(|st| st.families.contains_key(&event.family))
    {
        return Ok(HookOutcome::Kept(format!(
            "IMDS incomplete: keeping the {} state applied before",
            event.family
        )));
    }
    let kernel_links = applier.links()?;
    let link_addresses = applier.link_addresses(&index_of(&kernel_links))?;
    let p = plan_one(
        cfg,
        network,
        &link.0,
        os,
        &[lease_of(event)?],
        &link_addresses,
    )?;
    log_refused(&p);
    if let Some(why) = table_held_by_other(paths, &p, cfg, link.0.mac) {
        log::warn!("{why}");
        return Ok(HookOutcome::Kept(why));
    }
    if partial {
        match p.interfaces.first().and_then(|i| i.table) {
            Some(t) => log::warn!("applying what the lease alone proves (table {t})"),
            None => {
                log::warn!("the table cannot be known (no valid device-number): applying no rules");
            }
        }
    }
    let lease = lease_of(event)?;
    let report = apply_guarded(applier, paths, &p, recorded.as_ref(), network)?;
    apply::record_or_roll_back(applier, &report, || {
        for ip in &p.interfaces {
            let now = InterfaceState::record(recorded.clone(), &report.owned_part(ip), p.profile)
                .with_leases(std::slice::from_ref(&lease));
            state::save_if_changed(paths, recorded.as_ref(), now, state::unix_ms())?;
        }
        Ok(())
    })?;
    log::info!(
        "{} change(s) for {} {}",
        report.writes(),
        event.interface,
        event.family
    );
    Ok(if partial {
        HookOutcome::AppliedPartial(report)
    } else {
        HookOutcome::Applied(report)
    })
}

fn index_of(links: &[apply::KernelLink]) -> apply::LinkIndex {
    links.iter().map(|l| (l.name.clone(), l.index)).collect()
}

/// Logs what the address gate refused, one line per value.
fn log_refused(p: &crate::model::Plan) {
    for ip in &p.interfaces {
        for r in &ip.refused {
            log::warn!("{}: refused {r}", ip.name);
        }
    }
}

/// Applies a one-interface plan knowing every interface's state; a table another
/// NIC holds is recorded in this interface's state (for `status`) and returned as
/// the error, with nothing written.
fn apply_guarded<A: Applier + ?Sized>(
    applier: &mut A,
    paths: &Paths,
    p: &crate::model::Plan,
    recorded: Option<&InterfaceState>,
    network: &crate::model::InstanceNetwork,
) -> Result<Report> {
    match apply::apply_plan(applier, p, &with_others(paths, recorded)) {
        Err(e @ Error::TableConflict { .. }) => {
            record_conflict(paths, recorded, p, network, &e);
            Err(e)
        }
        other => other,
    }
}

/// `own` (this interface's recorded state) and every other interface's, so the
/// applier can tell a table another NIC holds.
fn with_others(paths: &Paths, own: Option<&InterfaceState>) -> Vec<InterfaceState> {
    let (all, _) = state::list_states(paths);
    own.cloned()
        .into_iter()
        .chain(
            all.into_iter()
                .filter(|st| own.is_none_or(|o| o.name != st.name)),
        )
        .collect()
}

/// Records a table conflict in the interface's state file, for `leasehook status`:
/// what was applied before stays as it was; only the list of refusals changes.
fn record_conflict(
    paths: &Paths,
    recorded: Option<&InterfaceState>,
    p: &crate::model::Plan,
    network: &crate::model::InstanceNetwork,
    e: &Error,
) {
    let Error::TableConflict {
        iface,
        table,
        others,
    } = e
    else {
        return;
    };
    let Some(ip) = p.interfaces.iter().find(|i| &i.name == iface) else {
        return;
    };
    let device = network
        .nic(ip.mac)
        .and_then(|n| n.device_number)
        .map_or_else(|| "?".to_owned(), |d| d.to_string());
    let mut st = recorded.cloned().unwrap_or_else(|| {
        let mut empty = ip.clone();
        empty.families.clear();
        empty.table = None;
        InterfaceState::record(None, &empty, p.profile)
    });
    st.refused = vec![crate::gate::Refused::new(
        "device-number",
        device,
        crate::gate::Refusal::TableClaimed {
            table: *table,
            others: others.clone(),
        },
    )];
    if let Err(e) = state::save_if_changed(paths, recorded, st, state::unix_ms()) {
        log::warn!("{e}");
    }
}

fn lease_of(event: &LeaseEvent) -> Result<crate::model::Lease> {
    event
        .new
        .clone()
        .ok_or_else(|| Error::InvalidPlan(format!("{} event without a lease", event.reason)))
}

fn remove<A: Applier>(applier: &mut A, paths: &Paths, event: &LeaseEvent) -> Result<Report> {
    let recorded = state::read_state_or_set_aside(paths, &event.interface);
    let report = apply::teardown(
        applier,
        &event.interface,
        Some(event.family),
        recorded.as_ref(),
    )?;
    for e in &report.errors {
        log::warn!("{e}");
    }
    if let Some(mut st) = recorded {
        if st.forget(Some(event.family)) {
            state::remove_state(paths, &event.interface)?;
        } else {
            state::write_state(paths, &st)?;
        }
    }
    log::info!(
        "removed {} object(s) of {} {}",
        report.writes(),
        event.interface,
        event.family
    );
    Ok(report)
}

/// How often a worker looks at the interface's lock again.
const WORKER_LOCK_POLL: Duration = Duration::from_millis(50);

/// Starts the detached worker. Its standard input and output are closed. Its
/// standard error is the shim's only when that is a file or a terminal (where the
/// log goes when there is no journal or syslog); a pipe or socket is not passed
/// on, or a caller reading the shim's standard error to its end would wait for
/// the worker (up to the whole budget).
fn spawn_worker(exe: &Path, name: &IfName) -> Result<u32> {
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

/// The process environment as an [`Env`](crate::event::Env). Variables whose name
/// or value is not UTF-8 are left out: none of them is one a shim reads.
pub fn process_env() -> crate::event::Env {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// One run of a DHCP client's shim, for [`run_shim`].
#[derive(Debug, Clone)]
pub struct Shim<'a> {
    /// The program's name (`leasehook-nm`): log lines carry it, and the worker is
    /// `/usr/libexec/leasehook/<program>` when the running executable cannot be found.
    pub program: &'a str,
    /// `--worker IFNAME`: finish the wait a hook handed over, instead of an event.
    pub worker: Option<&'a str>,
    /// What every log line of an event run starts with: the interface and the
    /// client's reason. Built from the untrusted event with [`log_context`].
    pub context: crate::logging::Context,
}

/// A log context from an event's interface and reason: the interface is kept only
/// when it is a valid name, the reason only when `known` says it is one the client
/// sends, so a hostile value never reaches a log line unescaped.
pub fn log_context(
    iface: Option<&str>,
    reason: Option<&str>,
    known: impl Fn(&str) -> bool,
) -> crate::logging::Context {
    crate::logging::Context {
        iface: iface
            .and_then(|i| IfName::try_new(i).ok())
            .map(|i| i.to_string()),
        reason: reason.filter(|r| known(r)).map(str::to_owned),
    }
}

/// Everything a shim does after reading its command line, shared by every DHCP
/// client's shim: reads the configuration ([`config::load`]: files, then
/// `LEASEHOOK_*` variables), sets up logging at its `log_level`, and then either finishes a worker's
/// wait ([`run_worker`]) or turns the client's event into lease events with `parse`
/// (which may read files under the configured root, as networkd's lease file) and
/// [`handle`]s each, in order.
///
/// Returns the exit status of the shim contract: 0 done (applied, removed, ignored,
/// handed to the worker, or nothing changed on purpose), 1 a runtime error (every
/// event is still tried), 2 a malformed event or configuration (nothing is done).
pub fn run_shim(
    shim: &Shim<'_>,
    env: &crate::event::Env,
    parse: impl FnOnce(&HookConfig) -> Result<Vec<LeaseEvent>>,
) -> std::process::ExitCode {
    use std::process::ExitCode;
    let context = match shim.worker {
        Some(w) => log_context(Some(w), Some("worker"), |_| true),
        None => shim.context.clone(),
    };
    let loaded = config::load(&Layers::from_env(env.clone()));
    let level = loaded
        .as_ref()
        .map_or(log::LevelFilter::Info, |l| l.settings.log_level);
    crate::logging::init(shim.program, &context, level);
    let cfg = match loaded {
        Ok(l) => HookConfig::from_settings(&l.settings),
        Err(e) => {
            log::error!("{e}; nothing done");
            return ExitCode::from(2);
        }
    };
    let outcomes = if let Some(name) = shim.worker {
        match IfName::try_new(name) {
            Ok(n) => vec![run_worker(&n, &cfg)],
            Err(p) => {
                log::error!("--worker: {p}");
                return ExitCode::from(2);
            }
        }
    } else {
        let events = match parse(&cfg) {
            Ok(events) => events,
            Err(e) => {
                log::error!("{e}");
                // A malformed event is 2; failing to read what it refers to is 1.
                let input = matches!(
                    e,
                    Error::Event { .. } | Error::Syntax { .. } | Error::Argument { .. }
                );
                return ExitCode::from(if input { 2 } else { 1 });
            }
        };
        if events.is_empty() {
            log::debug!("nothing to do for this event");
        }
        let exe = std::env::current_exe()
            .unwrap_or_else(|_| Path::new("/usr/libexec/leasehook").join(shim.program));
        events.iter().map(|ev| handle(ev, &cfg, &exe)).collect()
    };
    let mut status = ExitCode::SUCCESS;
    for outcome in outcomes {
        match outcome {
            Ok(HookOutcome::Kept(why)) => log::warn!("nothing changed: {why}"),
            Ok(o) => log::debug!("{o:?}"),
            Err(e) => {
                log::error!("{e}");
                status = ExitCode::FAILURE;
            }
        }
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> crate::event::Env {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// A three-NIC instance as the hooks see it for eth2's DHCPv4 event with
    /// `profile: cloud-init`: eth2's own keys, and only the position keys of the
    /// others (what the wait fetches), in a kernel with all three links.
    fn cloud_init_world(
        eth2_device: &str,
    ) -> (
        crate::apply::record::RecordingApplier,
        crate::model::InstanceNetwork,
        LeaseEvent,
        HookConfig,
        tempfile::TempDir,
    ) {
        let macs = [
            "02:00:00:00:00:01",
            "02:00:00:00:00:02",
            "02:00:00:00:00:03",
        ];
        let network = crate::metadata::parse_tree(&serde_json::json!({
            "mac": macs[0],
            "network": {"interfaces": {"macs": {
                macs[0]: {"device-number": "0"},
                macs[1]: {"device-number": "1"},
                macs[2]: {"device-number": eth2_device, "local-ipv4s": "10.0.2.30\n10.0.2.31",
                          "subnet-ipv4-cidr-block": "10.0.2.0/24",
                          "ipv6s": "2600::30\n2600::31", "subnet-ipv6-cidr-blocks": "2600::/64"}
            }}}
        }))
        .unwrap();
        let applier = crate::apply::record::RecordingApplier {
            links: macs
                .iter()
                .zip(0u32..)
                .map(|(m, i)| crate::apply::KernelLink {
                    index: i + 2,
                    name: IfName::try_new(&format!("eth{i}")).unwrap(),
                    mac: Some(m.parse().unwrap()),
                })
                .collect(),
            ..Default::default()
        };
        let lease = crate::model::Lease {
            family: crate::model::Family::V4,
            address: "10.0.2.30".parse().unwrap(),
            prefix_len: 24,
            routers: vec!["10.0.2.1".parse().unwrap()],
            reason: crate::model::Reason::Bound,
        };
        let event = LeaseEvent {
            interface: IfName::try_new("eth2").unwrap(),
            family: crate::model::Family::V4,
            reason: crate::model::Reason::Bound,
            new: Some(lease),
            old: None,
        };
        let root = tempfile::tempdir().unwrap();
        let mut cfg = HookConfig::load(&env(&[
            ("LEASEHOOK_CONFIG", "/dev/null"),
            ("LEASEHOOK_PROFILE", "cloud-init"),
        ]))
        .unwrap();
        cfg.root = root.path().to_owned();
        (applier, network, event, cfg, root)
    }

    fn apply_eth2(
        applier: &mut crate::apply::record::RecordingApplier,
        network: &crate::model::InstanceNetwork,
        event: &LeaseEvent,
        cfg: &HookConfig,
    ) -> HookOutcome {
        let paths = Paths::new(&cfg.root);
        let os = os_links(applier, cfg).unwrap();
        let link = Link {
            name: event.interface.clone(),
            mac: "02:00:00:00:00:03".parse().unwrap(),
            ipv6_router: None,
        };
        apply_outcome(applier, &paths, event, &(link, 4), &os, network, cfg, false).unwrap()
    }

    #[test]
    fn cloud_init_profile_applies_the_events_nic_at_its_position() {
        let (mut k, network, event, cfg, _root) = cloud_init_world("2");
        let out = apply_eth2(&mut k, &network, &event, &cfg);
        assert!(matches!(out, HookOutcome::Applied(_)), "{out:?}");
        // Position 2 of (eth0, eth1, eth2): table 102, whichever leases were seen.
        let rules: Vec<String> = k.owned.rules.iter().map(ToString::to_string).collect();
        assert_eq!(
            rules,
            [
                "from 10.0.2.30/32 lookup 102",
                "from 10.0.2.31/32 lookup 102"
            ]
        );
        let routes: Vec<String> = k.owned.routes.iter().map(ToString::to_string).collect();
        assert_eq!(
            routes,
            [
                "default via 10.0.2.1 dev eth2 table 102",
                "10.0.2.0/24 dev eth2 table 102"
            ]
        );
        // cloud-init's secondary address (the subnet's prefix length), IPv4 only:
        // the IPv6 part waits for a DHCPv6 lease. Nothing on eth0 or eth1.
        let addrs: Vec<String> = k
            .owned
            .addresses
            .iter()
            .map(|a| format!("{} {}", a.dev, a.addr))
            .collect();
        assert_eq!(addrs, ["eth2 10.0.2.31/24"]);
        // Recorded under the cloud-init profile; a second event writes nothing.
        let st = state::read_state_or_set_aside(&Paths::new(&cfg.root), &event.interface).unwrap();
        assert_eq!(st.tables().into_iter().collect::<Vec<_>>(), [102]);
        let again = apply_eth2(&mut k, &network, &event, &cfg);
        assert!(
            matches!(&again, HookOutcome::Applied(r) if r.writes() == 0),
            "{again:?}"
        );
    }

    #[test]
    fn cloud_init_profile_waits_while_its_table_is_another_nics() {
        let (mut k, network, event, cfg, _root) = cloud_init_world("2");
        // eth1 holds table 102 from before (it was third before eth0's... a NIC
        // attached ahead of it moved it): eth2 must not take it over.
        let paths = Paths::new(&cfg.root);
        let held = crate::model::Plan {
            profile: Profile::CloudInit,
            interfaces: vec![crate::model::InterfacePlan {
                name: IfName::try_new("eth1").unwrap(),
                mac: "02:00:00:00:00:02".parse().unwrap(),
                primary: false,
                families: vec![crate::model::Family::V4],
                table: Some(102),
                metric: None,
                addresses: Vec::new(),
                routes: vec![crate::model::Route {
                    to: "10.0.1.0/24".parse().unwrap(),
                    via: None,
                    dev: IfName::try_new("eth1").unwrap(),
                    scope: None,
                    src: None,
                    table: 102,
                }],
                rules: vec![crate::model::Rule {
                    from: "10.0.1.20/32".parse().unwrap(),
                    table: 102,
                    priority: None,
                }],
                missing: Vec::new(),
                refused: Vec::new(),
            }],
        };
        let report = apply::apply_plan(&mut k, &held, &[]).unwrap();
        let ip = &held.interfaces[0];
        state::write_state(
            &paths,
            &InterfaceState::record(None, &report.owned_part(ip), Profile::CloudInit),
        )
        .unwrap();
        let before = k.owned.clone();
        let out = apply_eth2(&mut k, &network, &event, &cfg);
        let HookOutcome::Kept(why) = out else {
            panic!("{out:?}")
        };
        assert!(why.contains("table 102") && why.contains("eth1"), "{why}");
        assert_eq!(k.owned, before);
    }

    #[test]
    fn config_defaults_and_overrides() {
        let d = HookConfig::load(&env(&[("LEASEHOOK_CONFIG", "/dev/null")])).unwrap();
        assert_eq!(
            (d.root.to_str(), d.sync_budget, d.budget),
            (Some("/"), Duration::from_secs(3), Duration::from_secs(30))
        );
        assert_eq!(d.plan, PlanConfig::default());
        let c = HookConfig::load(&env(&[
            ("LEASEHOOK_ROOT", "/nonexistent/leasehook-test"),
            ("LEASEHOOK_TABLE_BASE", "20000"),
            ("LEASEHOOK_PRIMARY_RULES", "yes"),
            ("LEASEHOOK_SECONDARY_ADDRESSES", "false"),
            (
                "LEASEHOOK_IMDS_ENDPOINTS",
                "http://127.0.0.1:8080, http://[::1]:8080",
            ),
            ("LEASEHOOK_IMDS_SYNC_BUDGET_S", "0.5"),
            ("LEASEHOOK_IMDS_BUDGET_S", "0.1"),
            ("LEASEHOOK_UNMANAGED", "eth7"),
        ]))
        .unwrap();
        assert_eq!(c.root.to_str(), Some("/nonexistent/leasehook-test"));
        assert_eq!(c.plan.table_base, 20000);
        assert!(c.plan.primary_rules && !c.plan.secondary_addresses);
        assert_eq!(c.endpoints, ["http://127.0.0.1:8080", "http://[::1]:8080"]);
        assert!(c.is_unmanaged(&IfName::try_new("eth7").unwrap(), None));
        // The total budget is never shorter than the synchronous one.
        assert_eq!(
            (c.sync_budget, c.budget),
            (Duration::from_millis(500), Duration::from_millis(500))
        );
    }

    #[test]
    fn bad_config_values_name_the_variable() {
        for (var, value, want) in [
            (
                "LEASEHOOK_TABLE_BASE",
                "-1",
                "configuration environment LEASEHOOK_TABLE_BASE: table_base: expected a whole number from 0 to 4294967295 (got \"-1\")",
            ),
            (
                "LEASEHOOK_PRIMARY_RULES",
                "maybe",
                "configuration environment LEASEHOOK_PRIMARY_RULES: primary_rules: expected true or false (got \"maybe\")",
            ),
            (
                "LEASEHOOK_IMDS_BUDGET_S",
                "NaN",
                "configuration environment LEASEHOOK_IMDS_BUDGET_S: imds.budget_s: expected seconds from 0 to 3600 (got \"NaN\")",
            ),
            (
                "LEASEHOOK_PROFILE",
                "x",
                "configuration environment LEASEHOOK_PROFILE: profile: expected ec2-net-utils or cloud-init (got \"x\")",
            ),
        ] {
            assert_eq!(
                HookConfig::load(&env(&[("LEASEHOOK_CONFIG", "/dev/null"), (var, value)]))
                    .unwrap_err()
                    .to_string(),
                want
            );
        }
    }

    #[test]
    fn help_lists_every_variable() {
        let help = env_help();
        assert!(
            config::KEYS
                .iter()
                .filter_map(|k| k.env)
                .all(|v| help.contains(v))
        );
        assert!(help.contains("LEASEHOOK_ROOT") && help.contains("LEASEHOOK_CONFIG"));
    }
}

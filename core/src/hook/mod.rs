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
//!
//! # Layout
//!
//! This module holds the configuration, the provider factory and the entry
//! points, which build the production [`Effects`] and hand them to the `*_with`
//! functions of the modules below; none of those calls back up here.
//!
//! - `event`: one event under the interface's lock ([`handle_with`]);
//! - `worker`: the hand-over to a detached worker and the worker itself;
//! - [`refresh`]'s recorded NICs and the NICs without DHCP (`refresh`);
//! - `lease`: what the hook and its worker do alike (gate, link, wait, apply;
//!   a remove reason's teardown);
//! - `wait_apply`: the one wait-then-apply of the event, the worker and
//!   `refresh`: the plan made once per NIC from one kernel snapshot, and
//!   committed;
//! - `planning`: one NIC's plan and the checks made on it; `unmanaged`: the
//!   `unmanaged` key; `cni`: the Kubernetes gate;
//! - [`Effects`] and [`Kernel`], [`HookOutcome`]; [`last_event`], [`hotplug`]
//!   and [`live`], the run files `status` and `watch` read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::apply::Applier as _;
use crate::apply::netlink::NetlinkApplier;
use crate::config::{self, Layers, Settings, Unmanaged};
use crate::error::Result;
use crate::model::{Action, IfName, LeaseEvent};
use crate::plan::PlanConfig;
use crate::source::SourceKind;
use crate::source::detect::cloud_from_dmi;
use crate::source::detect::read::read_dmi;
use crate::source::provider::{Provider, ProviderChoice, Setup, SystemClock, auto_verdict};

mod cni;
mod effects;
mod event;
pub mod hotplug;
pub mod last_event;
mod lease;
#[cfg(test)]
mod lease_tests;
pub mod live;
mod outcome;
mod planning;
mod refresh;
#[cfg(test)]
mod tests;
mod unmanaged;
mod wait_apply;
mod worker;

pub use effects::{Effects, Kernel};
pub use event::handle_with;
pub use last_event::{EventOutcome, LastEvent};
pub use outcome::{HookOutcome, metrics_outcome};
pub use refresh::{
    RefreshOutcome, address_unleased_with, refresh_changed_with, refresh_stamp, refresh_with,
    refreshed_at,
};
pub use worker::{Waiting, run_worker_with, waiting};

/// What a shim needs to know besides the event: the hook's part of the
/// [configuration](crate::config).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookConfig {
    /// Prefix of every file path (`/` in production).
    pub root: PathBuf,
    /// `enabled`: `false` makes every entry point a no-op ([`inert`]).
    pub enabled: bool,
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
    /// `provider`: the cloud asked about a NIC.
    pub provider: ProviderChoice,
    /// Each cloud's `<name>.endpoint` that is set, by the cloud's name.
    pub cloud_endpoints: BTreeMap<String, String>,
}

impl HookConfig {
    /// The hook's part of merged settings.
    pub fn from_settings(s: &Settings) -> Self {
        Self {
            root: s.root.clone(),
            enabled: s.enabled,
            plan: s.plan.clone(),
            endpoints: s.imds.endpoints.clone().unwrap_or_default(),
            imdsv1_fallback: s.imdsv1_fallback,
            sync_budget: s.imds.sync_budget,
            // The whole wait is never shorter than the part the client waits for.
            budget: s.imds.budget.max(s.imds.sync_budget),
            imds_bind_interface: s.imds.bind_interface,
            unmanaged: s.unmanaged.clone(),
            kubernetes: s.kubernetes,
            provider: s.provider,
            cloud_endpoints: s.cloud_endpoints.clone(),
        }
    }

    /// Reads the configuration files below `LEASEHOOK_ROOT` (or `/`) and the
    /// `LEASEHOOK_*` variables of `env`; a bad value is an error naming the file
    /// and line, or the variable.
    pub fn load(env: &crate::event::Env) -> Result<Self> {
        config::load(&Layers::from_env(env.clone())).map(|l| Self::from_settings(&l.settings))
    }

    /// For tests: the built-in defaults (no configuration file) with the
    /// `LEASEHOOK_*` variables `vars`, everything below `root`.
    #[cfg(test)]
    pub(crate) fn for_test(root: &Path, vars: &[(&str, &str)]) -> Self {
        let env: crate::event::Env = [("LEASEHOOK_CONFIG", "/dev/null")]
            .iter()
            .chain(vars)
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let mut cfg = Self::load(&env).unwrap_or_else(|e| panic!("{vars:?}: {e}"));
        cfg.root = root.to_owned();
        cfg
    }
}

/// Handles one event from a shim. `worker` is the shim's own executable, started
/// again with `--worker IFNAME` if the wait has to continue in the background.
pub fn handle(event: &LeaseEvent, cfg: &HookConfig, worker: &Path) -> Result<HookOutcome> {
    if event.action() == Action::Ignore {
        return Ok(HookOutcome::Ignored);
    }
    with_real_effects(cfg, |fx| handle_with(fx, event, cfg, worker))
}

/// The worker: finishes the wait a hook handed over. Returns `Kept` when a newer
/// event came meanwhile.
pub fn run_worker(name: &IfName, cfg: &HookConfig) -> Result<HookOutcome> {
    // Leave the DHCP client's session: a signal to its process group, or its
    // terminal going away, must not stop the wait.
    let _ = rustix::process::setsid();
    with_real_effects(cfg, |fx| run_worker_with(fx, name, cfg))
}

/// Re-checks every interface with a recorded plan (or only `only`) between leases:
/// asks IMDS again for that NIC's keys (one client, its token reused), plans from
/// the recorded leases, and applies the difference. Unchanged → no netlink write and
/// no state file written; an IMDS error or an incomplete answer changes nothing. A
/// link that is gone takes its rules, routes and state with it; a link found under
/// another name by its MAC takes them over. Each interface is handled under its lock,
/// so a refresh never races a lease event.
///
/// On a cloud that serves some NICs no DHCP ([`Provider::unleased`]: OCI's
/// secondary VNICs) the metadata is asked once for them: a NIC it lists that has
/// a link (found by MAC) and no recorded plan is given its address, rules and
/// table ([`RefreshOutcome::Addressed`]), its link brought up only once the plan
/// adds something to it; a plan that covers nothing (every value refused, the
/// table another NIC's) is neither applied nor recorded, so the next refresh
/// evaluates it again. One recorded so is planned from what the metadata says
/// now (a new address replaces the old), and taken down to nothing when the
/// metadata no longer lists it ([`RefreshOutcome::Unlisted`]). A NIC listed
/// under a MAC that is nobody's ([`crate::model::MacAddr::nobodys`]) is refused
/// with a log line, and a NIC with a recorded DHCP lease is never one without
/// DHCP. A metadata error changes nothing.
pub fn refresh(only: Option<&IfName>, cfg: &HookConfig) -> Result<Vec<RefreshOutcome>> {
    with_real_effects(cfg, |fx| refresh_with(fx, only, cfg))
}

/// [`refresh`] for `leasehook watch`'s GCE follower, after the metadata changed:
/// asks the metadata even for a NIC the follower's heartbeat covers.
pub fn refresh_changed(only: Option<&IfName>, cfg: &HookConfig) -> Result<Vec<RefreshOutcome>> {
    with_real_effects(cfg, |fx| refresh_changed_with(fx, only, cfg))
}

/// The boot stage's and the udev add path's part of [`refresh`]: only the NICs
/// the cloud serves no DHCP ([`Provider::unleased`]; every one, or only `only`),
/// configured or followed as `refresh` does. On a cloud whose every NIC has DHCP
/// it asks nothing and returns nothing.
pub fn address_unleased(cfg: &HookConfig, only: Option<&IfName>) -> Result<Vec<RefreshOutcome>> {
    with_real_effects(cfg, |fx| address_unleased_with(fx, cfg, only))
}

/// Why the hooks, the worker, `refresh` and `watch` do nothing at all here, if
/// they must not: `enabled: false`, or, with `provider: auto`, a boot stage that
/// recorded "no datasource" this boot (a host that is no cloud instance: no
/// metadata service is asked). Reads `boot.json` only; asks nothing. When the
/// boot stage has not run this boot, DMI decides later, in [`provider`].
pub fn inert(cfg: &HookConfig) -> Option<&'static str> {
    if !cfg.enabled {
        return Some("disabled (configuration key enabled is false): nothing done");
    }
    let off_cloud = cfg.provider == ProviderChoice::Auto
        && crate::boot::state::read(&cfg.root, crate::boot::state::boot_id(&cfg.root).as_deref())
            .is_some_and(|b| b.verdict == crate::boot::state::Verdict::NoDatasource);
    off_cloud.then_some("the boot stage found no datasource this boot: nothing to do")
}

/// The provider `cfg` names; `auto` reads the boot stage's verdict in
/// `boot.json`, else DMI below the root (SPEC §4, no network). Fails on an
/// endpoint that is not an IP literal.
pub fn provider(cfg: &HookConfig) -> Result<Box<dyn Provider>> {
    let recorded = match cfg.provider {
        ProviderChoice::Auto => auto_verdict(
            crate::boot::state::read(&cfg.root, crate::boot::state::boot_id(&cfg.root).as_deref())
                .and_then(|b| b.datasource),
            || {
                let found = cloud_from_dmi(&read_dmi(&cfg.root));
                log::debug!(
                    "provider auto: no boot-stage verdict; DMI says {}",
                    found.map_or("no cloud", SourceKind::name)
                );
                found
            },
        ),
        ProviderChoice::Named(_) => None,
    };
    let kind = cfg.provider.resolve(recorded);
    kind.provider(&Setup {
        endpoint: cfg.cloud_endpoints.get(kind.name()).map(String::as_str),
        imds_endpoints: &cfg.endpoints,
        imdsv1_fallback: cfg.imdsv1_fallback,
        bind_interface: cfg.imds_bind_interface,
        ..Setup::new(&cfg.root)
    })
}

/// Runs `f` with the production effects: netlink, the configured provider, the
/// system clock (the one place the hooks build them).
fn with_real_effects<T>(
    cfg: &HookConfig,
    f: impl FnOnce(&mut Effects<'_>) -> Result<T>,
) -> Result<T> {
    let mut kernel = NetlinkApplier::try_new()?;
    let provider = provider(cfg)?;
    let mut fx = Effects {
        kernel: &mut kernel,
        provider: provider.as_ref(),
        clock: &SystemClock,
    };
    f(&mut fx)
}

/// The kernel's index of link `name` (`None` when there is no such link).
pub fn link_index(name: &IfName) -> Result<Option<u32>> {
    Ok(NetlinkApplier::try_new()?
        .links()?
        .into_iter()
        .find(|l| &l.name == name)
        .map(|l| l.index))
}

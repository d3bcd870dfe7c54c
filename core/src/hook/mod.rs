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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::apply::netlink::NetlinkApplier;
use crate::apply::state::{self, InterfaceState, Paths};
use crate::apply::{self, Applier, Report};
use crate::config::{self, Layers, Settings, Unmanaged};
use crate::error::{Error, Result};
use crate::model::{IfName, LeaseEvent, Link, MacAddr, Profile};
use crate::plan::{InterfaceLease, PlanConfig, PlanInput, plan};
use crate::source::SourceKind;
use crate::source::detect::cloud_from_dmi;
use crate::source::detect::read::read_dmi;
use crate::source::provider::{
    Clock, NicEvent, Provider, ProviderChoice, Setup, SystemClock, auto_verdict,
};

mod event;
pub mod hotplug;
pub mod last_event;
#[cfg(test)]
mod lease_tests;
pub mod live;
mod outcome;
mod refresh;
mod worker;

pub use event::{handle, handle_with};
pub use last_event::{EventOutcome, LastEvent};
pub use outcome::metrics_outcome;
pub use refresh::{
    RefreshOutcome, address_unleased, address_unleased_with, refresh, refresh_changed,
    refresh_changed_with, refresh_stamp, refresh_with, refreshed_at,
};
pub use worker::{Waiting, run_worker, run_worker_with, waiting};

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

/// The OS's links with a MAC (of `kernel_links`, the kernel's links), for the
/// `cloud-init` profile, which numbers a NIC by its position among all NICs
/// present in both the OS and IMDS; empty for `ec2-net-utils`, whose table
/// depends on the NIC alone. A MAC held by several links (a VLAN on a NIC)
/// counts once, by its first link in name order.
fn os_links(kernel_links: &[apply::KernelLink], cfg: &HookConfig) -> Vec<Link> {
    if cfg.plan.profile != Profile::CloudInit {
        return Vec::new();
    }
    let mut links: Vec<Link> = kernel_links
        .iter()
        .filter_map(|k| {
            Some(Link {
                name: k.name.clone(),
                mac: k.mac?,
                ipv6_router: None,
            })
        })
        .collect();
    links.sort_by(|a, b| a.name.cmp(&b.name));
    let mut seen = std::collections::BTreeSet::new();
    links.retain(|l| seen.insert(l.mac));
    links
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
    (link_addresses, next_hops): (&[crate::model::Address], &[crate::gate::Router]),
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
            next_hops,
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
            crate::metrics::conflict();
            format!(
                "table {table} (this NIC's position in the cloud-init order) is still {}'s: \
                 nothing changed until it moves (its next event or refresh)",
                st.name
            )
        })
}

/// What the `unmanaged` entries that need the metadata (`device-number:N`,
/// `network-card:N`, `interface-id:ID`) say of the NIC `mac`, asked right after
/// the metadata is read and before anything is planned: `Some((true, why))`
/// when an entry names it, `Some((false, why))` when, with `partial`, one might
/// and the metadata does not say yet (nothing is applied then either); `None`
/// when the NIC is leasehook's.
fn unmanaged_by_metadata(
    cfg: &HookConfig,
    network: &crate::model::InstanceNetwork,
    mac: MacAddr,
    partial: bool,
) -> Option<(bool, String)> {
    match config::unmanaged_by_metadata(&cfg.unmanaged, network.nic(mac)) {
        config::MetadataVerdict::Managed => None,
        config::MetadataVerdict::Unmanaged(u) => Some((
            true,
            format!("unmanaged (configuration key unmanaged, entry {u}): left alone"),
        )),
        config::MetadataVerdict::Unknown(u) => partial.then(|| {
            (
                false,
                format!(
                    "the metadata does not say yet whether the unmanaged entry {u} names \
                     this NIC: nothing applied"
                ),
            )
        }),
    }
}

/// Why nothing was applied when IMDS did not answer.
fn unanswered(e: &Error) -> String {
    format!(
        "IMDS did not answer usefully ({e}): nothing applied, as the table cannot be known without \
         device-number; whatever was applied before stays"
    )
}

/// The kernel the lease path is handed: the [`Applier`], and the reads and
/// writes only the hooks make (what the Kubernetes gate reads, bringing a link
/// up). [`NetlinkApplier`] in production; the recording fake in tests.
pub trait Kernel: Applier {
    /// What the Kubernetes gate decides on ([`crate::kubernetes::observe::detect`]).
    fn node_view(
        &mut self,
        mode: crate::kubernetes::Mode,
        root: &Path,
    ) -> Result<(crate::kubernetes::Decision, crate::kubernetes::NodeView)>;

    /// `ip link set IF up` for link `index` when it is down: a NIC the cloud
    /// serves no DHCP has no client to bring it up, and the kernel takes no route
    /// through a link that is down. `true` when it was down. Nothing is written
    /// for a link that is up, and nothing ever takes a link down.
    fn bring_up(&mut self, index: u32) -> Result<bool>;
}

impl Kernel for NetlinkApplier {
    fn node_view(
        &mut self,
        mode: crate::kubernetes::Mode,
        root: &Path,
    ) -> Result<(crate::kubernetes::Decision, crate::kubernetes::NodeView)> {
        crate::kubernetes::observe::detect(mode, root, self)
    }

    fn bring_up(&mut self, index: u32) -> Result<bool> {
        NetlinkApplier::bring_up(self, index)
    }
}

/// The recording fake holds no CNI's rules: the gate reads only the CNI files
/// below `root`.
impl Kernel for crate::apply::record::RecordingApplier {
    fn node_view(
        &mut self,
        mode: crate::kubernetes::Mode,
        root: &Path,
    ) -> Result<(crate::kubernetes::Decision, crate::kubernetes::NodeView)> {
        let view = crate::kubernetes::NodeView {
            cni_confs: if mode == crate::kubernetes::Mode::Off {
                Vec::new()
            } else {
                crate::kubernetes::observe::cni_confs(root)?
            },
            ..crate::kubernetes::NodeView::default()
        };
        Ok((crate::kubernetes::decide(mode, &view), view))
    }

    fn bring_up(&mut self, index: u32) -> Result<bool> {
        Ok(self.down.remove(&index))
    }
}

/// What the event path, the worker and `refresh` are handed: the kernel, the
/// cloud and the clock. Built once, at the entry points ([`handle`],
/// [`run_worker`], [`refresh`]), by `with_real_effects`.
pub struct Effects<'a> {
    /// The kernel (netlink in production).
    pub kernel: &'a mut dyn Kernel,
    /// The cloud asked about a NIC.
    pub provider: &'a dyn Provider,
    /// The clock the waits read and sleep on.
    pub clock: &'a dyn Clock,
}

impl std::fmt::Debug for Effects<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Effects")
            .field("provider", &self.provider)
            .finish_non_exhaustive()
    }
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

/// What the Kubernetes decision (SPEC §3.7, [`crate::kubernetes`]) says about
/// planning one interface.
enum Gate {
    /// Plan with this configuration (on a Kubernetes node: the primary's pod
    /// addresses left out).
    Plan(Box<HookConfig>),
    /// The CNI's ENI, and why: left alone.
    Cni(String),
}

/// The one place the hooks, the worker and `refresh` ask whether this is a
/// Kubernetes node and whether `name` is the CNI's ENI. On such a node a
/// `priority_base` that would put leasehook's rules before the CNI's is refused.
fn kubernetes_gate(kernel: &mut dyn Kernel, cfg: &HookConfig, name: &IfName) -> Result<Gate> {
    let (decision, view) = kernel.node_view(cfg.kubernetes, &cfg.root)?;
    if !decision.node {
        return Ok(Gate::Plan(Box::new(cfg.clone())));
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
    Ok(Gate::Plan(Box::new(cfg)))
}

/// Leaves the CNI's ENI `name` to the CNI: what leasehook applied to it before
/// (from before the CNI took it over) goes, only leasehook's own objects (protocol
/// 176). Returns the message to log.
fn leave_to_cni(
    applier: &mut dyn Kernel,
    paths: &Paths,
    name: &IfName,
    why: &str,
) -> Result<String> {
    let Some(recorded) = state::read_state_or_set_aside(paths, name) else {
        return Ok(why.to_owned());
    };
    let report = crate::commit::remove(applier, paths, name, None, Some(recorded))?;
    for e in &report.errors {
        log::warn!("{e}");
    }
    Ok(format!(
        "{why}; removed {} object(s) leasehook had applied to it",
        report.writes()
    ))
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

/// The link `name` among `kernel_links` (the kernel's links, one dump).
fn find_link(kernel_links: &[apply::KernelLink], name: &IfName) -> Result<(Link, u32)> {
    let k = kernel_links
        .iter()
        .find(|l| &l.name == name)
        .cloned()
        .ok_or_else(|| Error::NoSuchLink(name.clone()))?;
    let mac = k.mac.ok_or_else(|| {
        Error::InvalidPlan(format!(
            "{name} is no NIC leasehook manages (loopback, not Ethernet, another link's \
                 port, or a MAC that is all zeros, multicast or broadcast)"
        ))
    })?;
    // The IPv6 router is read with the main table when the plan is made
    // ([`kernel_inputs`]), after the wait.
    Ok((
        Link {
            name: k.name,
            mac,
            ipv6_router: None,
        },
        k.index,
    ))
}

/// What the planner reads of the kernel besides the links, from the snapshot
/// taken when the plan is made (and applied on, [`commit_guarded`]): every
/// link's addresses (`ip address`), and the main table of both families, which
/// gives the host's next hops (routers no NIC may hold, SPEC §3.8) and the IPv6
/// router `link` learned from router advertisements (set on it).
fn kernel_inputs(
    seen: &apply::Snapshot,
    link: &mut Link,
) -> (Vec<crate::model::Address>, Vec<crate::gate::Router>) {
    let index = seen.index();
    if let Some(i) = index.get(&link.name) {
        link.ipv6_router = apply::ipv6_router(&seen.main_routes, *i);
    }
    (
        seen.link_addresses(),
        apply::next_hops(&seen.main_routes, &index),
    )
}

fn nic_event(event: &LeaseEvent, link: &(Link, u32), os: &[Link]) -> Result<NicEvent> {
    Ok(
        NicEvent::try_new(event.interface.clone(), link.0.mac, vec![lease_of(event)?])?
            .with_peers(os.iter().map(|l| l.mac)),
    )
}

/// Logs what the address gate refused, one line per value.
fn log_refused(p: &crate::model::Plan) {
    for ip in &p.interfaces {
        for r in &ip.refused {
            crate::metrics::refused(&r.reason);
            log::warn!("{}: refused {r}", ip.name);
        }
    }
}

/// Commits a one-interface plan ([`crate::commit::commit`]) with the leases it
/// was planned from; a table another NIC holds is recorded in this interface's
/// state (for `status`) and returned as the error, with nothing written. With
/// `seen` (the snapshot the plan was made from, no write since), the kernel is
/// not read again ([`crate::commit::commit_seen`]).
fn commit_guarded<A: Applier + ?Sized>(
    applier: &mut A,
    paths: &Paths,
    p: &crate::model::Plan,
    (recorded, seen): (Option<&InterfaceState>, Option<&apply::Snapshot>),
    network: &crate::model::InstanceNetwork,
    leases: &[crate::model::Lease],
) -> Result<Report> {
    let own: Vec<InterfaceState> = recorded.cloned().into_iter().collect();
    match seen {
        Some(seen) => crate::commit::commit_seen(applier, paths, p, (&own, leases), seen),
        None => crate::commit::commit(applier, paths, p, &own, leases),
    }
    .inspect_err(|e| {
        if crate::metrics::is_conflict(e) {
            crate::metrics::conflict();
        }
        if matches!(e, Error::TableConflict { .. }) {
            record_conflict(paths, recorded, p, network, e);
        }
    })
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
    event.new.clone().ok_or_else(|| Error::NoLease {
        reason: event.reason.to_string(),
    })
}

#[cfg(test)]
mod tests {
    /// The provider of the cloud named `name`.
    fn kind(name: &str) -> crate::source::provider::ProviderKind {
        crate::source::provider::ProviderKind::from_name(name).unwrap()
    }

    use super::outcome::apply_outcome;
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
        let os = os_links(&applier.links().unwrap(), cfg);
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
    fn a_nic_unmanaged_by_its_metadata_is_never_touched() {
        for entry in ["device-number:2", "interface-id:eni-2", "network-card:0"] {
            let (mut k, mut network, event, mut cfg, _root) = cloud_init_world("2");
            cfg.unmanaged = vec![entry.parse().unwrap()];
            let mac: MacAddr = "02:00:00:00:00:03".parse().unwrap();
            if let Some(n) = network.nics.iter_mut().find(|n| n.mac == mac) {
                n.interface_id = Some("eni-2".to_owned());
            }
            let out = apply_eth2(&mut k, &network, &event, &cfg);
            assert_eq!(out, HookOutcome::Unmanaged, "{entry}");
            assert_eq!(
                k.owned,
                crate::apply::record::RecordingApplier::default().owned
            );
            assert!(
                state::read_state_or_set_aside(&Paths::new(&cfg.root), &event.interface).is_none()
            );
            // Another NIC's number: planned as usual.
            cfg.unmanaged = vec!["device-number:1".parse().unwrap()];
            let out = apply_eth2(&mut k, &network, &event, &cfg);
            assert!(matches!(out, HookOutcome::Applied(_)), "{entry}: {out:?}");
        }
        // A partial answer that does not say the device-number yet: nothing applied.
        let (mut k, mut network, event, mut cfg, _root) = cloud_init_world("2");
        cfg.unmanaged = vec!["device-number:2".parse().unwrap()];
        let mac: MacAddr = "02:00:00:00:00:03".parse().unwrap();
        if let Some(n) = network.nics.iter_mut().find(|n| n.mac == mac) {
            n.device_number = None;
        }
        let paths = Paths::new(&cfg.root);
        let os = os_links(&k.links().unwrap(), &cfg);
        let link = Link {
            name: event.interface.clone(),
            mac,
            ipv6_router: None,
        };
        let out = apply_outcome(
            &mut k,
            &paths,
            &event,
            &(link, 4),
            &os,
            &network,
            &cfg,
            true,
        )
        .unwrap();
        let HookOutcome::Kept(why) = out else {
            panic!("{out:?}")
        };
        assert!(why.contains("device-number:2"), "{why}");
        assert_eq!(
            k.owned,
            crate::apply::record::RecordingApplier::default().owned
        );
    }

    #[test]
    fn inert_when_disabled_or_off_cloud_this_boot() {
        let root = tempfile::tempdir().unwrap();
        let mut cfg = HookConfig::load(&env(&[("LEASEHOOK_CONFIG", "/dev/null")])).unwrap();
        cfg.root = root.path().to_owned();
        assert_eq!(inert(&cfg), None);
        cfg.enabled = false;
        assert!(inert(&cfg).is_some_and(|w| w.contains("enabled is false")));
        cfg.enabled = true;
        let run = root.path().join("run/leasehook");
        std::fs::create_dir_all(&run).unwrap();
        let boot = |verdict: &str, boot_id: &str| {
            serde_json::json!({
                "version": 1, "boot_id": boot_id, "stage": "local", "verdict": verdict,
                "datasource": "None", "instance_id": "iid-datasource-none",
                "origin": "no-datasource", "cache": "", "new_instance": null,
                "previous_instance_id": null, "configured": [], "deferred": [],
                "attempts": [], "fetched_at_ms": null, "decided_at_ms": 0
            })
            .to_string()
        };
        let id = root.path().join(crate::constants::BOOT_ID);
        std::fs::create_dir_all(id.parent().unwrap()).unwrap();
        std::fs::write(&id, "b1\n").unwrap();
        std::fs::write(run.join("boot.json"), boot("no-datasource", "b1")).unwrap();
        assert!(inert(&cfg).is_some_and(|w| w.contains("no datasource this boot")));
        // A named provider is asked all the same.
        cfg.provider = ProviderChoice::Named(kind("ec2"));
        assert_eq!(inert(&cfg), None);
        cfg.provider = ProviderChoice::Auto;
        // Another boot's verdict: DMI decides later, nothing inert.
        std::fs::write(run.join("boot.json"), boot("no-datasource", "b0")).unwrap();
        assert_eq!(inert(&cfg), None);
    }

    #[test]
    fn auto_without_a_boot_verdict_goes_by_dmi() {
        let root = tempfile::tempdir().unwrap();
        let mut cfg = HookConfig::load(&env(&[("LEASEHOOK_CONFIG", "/dev/null")])).unwrap();
        cfg.root = root.path().to_owned();
        // No boot.json, no DMI: EC2, as before the key.
        assert_eq!(provider(&cfg).unwrap().kind(), kind("ec2"));
        let dmi = root.path().join("sys/class/dmi/id");
        std::fs::create_dir_all(&dmi).unwrap();
        std::fs::write(dmi.join("product_name"), "Alibaba Cloud ECS\n").unwrap();
        assert_eq!(provider(&cfg).unwrap().kind(), kind("aliyun"));
        // A named provider is taken as named.
        cfg.provider = ProviderChoice::Named(kind("ec2"));
        assert_eq!(provider(&cfg).unwrap().kind(), kind("ec2"));
        // Another product: EC2.
        cfg.provider = ProviderChoice::Auto;
        std::fs::write(dmi.join("product_name"), "Alibaba Cloud ECS 2\n").unwrap();
        assert_eq!(provider(&cfg).unwrap().kind(), kind("ec2"));
        // Oracle Cloud's chassis asset tag: the OCI provider, whose answer to
        // `unleased` is asked (the other clouds' is None).
        std::fs::write(dmi.join("chassis_asset_tag"), "OracleCloud.com\n").unwrap();
        let p = provider(&cfg).unwrap();
        assert_eq!(p.kind(), kind("oracle"));
        cfg.cloud_endpoints
            .insert("oracle".to_owned(), "http://127.0.0.1:9".to_owned());
        let p = provider(&cfg).unwrap();
        let policy =
            crate::source::provider::WaitPolicy::default().with_budget(std::time::Duration::ZERO);
        let clock = crate::source::provider::SystemClock;
        assert!(matches!(p.unleased(&policy, &clock), Some(Err(_))));
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
}

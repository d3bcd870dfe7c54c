// SPDX-License-Identifier: Apache-2.0
//! Performs IO: `leasehook refresh`, which re-checks every recorded interface
//! against IMDS between leases, under each interface's lock.

use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Instant;

use super::HookConfig;
use super::cni::{Gate, kubernetes_gate, leave_to_cni};
use super::effects::{Effects, Kernel};
use super::planning::{configures_something, os_links};
use super::unmanaged::unmanaged_by_metadata;
use super::wait_apply::{
    Answer, Applied, Ask, Next, Prepared, SeenLinks, Target, apply_answer, unanswered,
    wait_and_apply,
};
use crate::apply::state::{self, InterfaceState, Paths};
use crate::apply::{KernelLink, Report};
use crate::error::Result;
use crate::model::{IfName, Lease, Link, Plan, Reason};
use crate::source::provider::{
    NicEvent, Outcome, PrimaryUse, Provider, Unleased, UnleasedNic, WaitPolicy,
};

/// `run/leasehook/refreshed/<ifname>`.
pub(super) const REFRESHED: &str = "refreshed";

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
    /// Nothing to check, or left alone, and why (unmanaged, the CNI's ENI, the
    /// primary with nothing to ask, no lease recorded). A NIC that could not be
    /// checked is [`RefreshOutcome::Unchecked`].
    Kept(IfName, String),
    /// A NIC the cloud serves no DHCP ([`Provider::unleased`], OCI's secondary
    /// VNICs), seen for the first time: given its address, rules and table from
    /// the metadata (its link brought up first when it was down).
    Addressed(IfName, Report),
    /// The metadata no longer lists this NIC among those it serves no DHCP (the
    /// VNIC was detached while its link stays, or the metadata dropped it): what
    /// leasehook configured on it, the address included, is gone.
    Unlisted(IfName, Report),
    /// The NIC could not be checked: the metadata did not answer (unreachable,
    /// errors until the budget ran out), said less than its plan needs, its table
    /// is another NIC's, or an error stopped the check. Nothing changed (what a
    /// failed commit wrote is rolled back) and the refresh stamp is not renewed:
    /// `leasehook refresh` names it and exits 1.
    Unchecked(IfName, String),
}

/// `<root>/run/leasehook/refreshed/<ifname>`: its modification time is when the
/// interface was last checked against the metadata with success (the file stays
/// empty; refreshing rewrites nothing). A check that failed leaves it as it was.
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

pub(super) fn touch(paths: &Paths, name: &IfName) {
    crate::metrics::succeeded(name);
    if let Err(e) = state::touch_run_file(paths, REFRESHED, name.as_str()) {
        log::warn!("{e}");
    }
}

pub(super) fn remove_stamp(paths: &Paths, name: &IfName) {
    if let Err(e) = state::remove_run_file(paths, Some(REFRESHED), name.as_str()) {
        log::warn!("{e}");
    }
}

/// [`super::refresh`] with the kernel, the provider and the clock handed in.
///
/// On GCE, a NIC that `leasehook watch`'s long poll follows (its heartbeat
/// fresh and listing the MAC, [`super::live`]) is not asked about: its link is
/// still checked (gone, renamed), and it is [`RefreshOutcome::Kept`] saying so.
pub fn refresh_with(
    fx: &mut Effects<'_>,
    only: Option<&IfName>,
    cfg: &HookConfig,
) -> Result<Vec<RefreshOutcome>> {
    refresh_scoped(fx, only, cfg, Scope::Timer)
}

/// [`super::refresh_changed`] with the kernel, the provider and the clock handed in.
pub fn refresh_changed_with(
    fx: &mut Effects<'_>,
    only: Option<&IfName>,
    cfg: &HookConfig,
) -> Result<Vec<RefreshOutcome>> {
    refresh_scoped(fx, only, cfg, Scope::Changed)
}

/// Which refresh runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// The timer's (and `leasehook refresh`'s): every recorded NIC, those a live
    /// follower covers without a request.
    Timer,
    /// The live follower's: every recorded NIC asked.
    Changed,
    /// The NICs without DHCP alone.
    Unleased,
}

/// [`super::address_unleased`] with the kernel, the provider and the clock handed in.
pub fn address_unleased_with(
    fx: &mut Effects<'_>,
    cfg: &HookConfig,
    only: Option<&IfName>,
) -> Result<Vec<RefreshOutcome>> {
    refresh_scoped(fx, only, cfg, Scope::Unleased)
}

/// [`refresh_with`], [`refresh_changed_with`] or, [`Scope::Unleased`], the NICs
/// without DHCP alone.
fn refresh_scoped(
    fx: &mut Effects<'_>,
    only: Option<&IfName>,
    cfg: &HookConfig,
    scope: Scope,
) -> Result<Vec<RefreshOutcome>> {
    let unleased_only = scope == Scope::Unleased;
    let policy = WaitPolicy::default().with_budget(cfg.sync_budget);
    let paths = Paths::new(&cfg.root);
    let (states, errors) = state::list_states(&paths);
    for e in errors {
        log::warn!("{e}");
    }
    // One NIC with a DHCP lease and a recorded plan needs no list of the NICs
    // without DHCP: its own question answers it (one request on the clouds
    // whose one document answers every NIC, where the list is that document).
    let unleased = if needs_unleased(&states, only, unleased_only) {
        ask_unleased(fx.provider, &policy, fx.clock)
    } else {
        None
    };
    if unleased_only && unleased.is_none() {
        return Ok(Vec::new());
    }
    let primary_mac = states.iter().find(|s| s.primary).map(|s| s.mac);
    // A state that holds no family (a run that configured nothing: every value
    // refused, a table claimed) is no plan: a NIC without DHCP it names is taken
    // as a new one again, never left for good as "no lease recorded".
    let recorded_macs: Vec<crate::model::MacAddr> = states
        .iter()
        .filter(|s| !s.families.is_empty())
        .map(|s| s.mac)
        .collect();
    let names: Vec<IfName> = states
        .into_iter()
        .map(|s| s.name)
        .filter(|n| only.is_none_or(|o| o == n))
        .collect();
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        // One NIC's error is that NIC's: the others are still checked.
        let asked = Asked {
            unleased: unleased.as_ref(),
            unleased_only,
            primary_mac,
            leave_followed: scope == Scope::Timer,
        };
        match refresh_recorded(fx, &paths, cfg, &name, &asked) {
            Ok(Some(o)) => out.push(o),
            Ok(None) => {}
            Err(e) => out.push(RefreshOutcome::Unchecked(name, e.to_string())),
        }
    }
    if let Some(Ok(u)) = &unleased {
        // The links leasehook creates (OCI bare metal's VLAN VNICs), before
        // any NIC is looked for by its MAC; deleted only with this answer in
        // hand and on a refresh of every NIC (the NICs above, unlisted, have
        // had their objects removed already).
        if u.owns_links {
            // An unmanaged NIC gets no link from leasehook; one it made before
            // stays (the NIC is still listed). A MAC no NIC can have (hostile
            // metadata) gets none either: it is refused below.
            let by_name = cfg
                .unmanaged
                .iter()
                .any(|e| matches!(e, crate::config::Unmanaged::Name(_)));
            let links = if by_name && !u.nics.is_empty() {
                fx.kernel.links().unwrap_or_default()
            } else {
                Vec::new()
            };
            let wanted: Vec<_> = u
                .nics
                .iter()
                .filter(|n| n.mac.nobodys().is_none() && !unmanaged_link(cfg, u, &links, n.mac))
                .filter_map(|n| Some((n.mac, n.link?)))
                .collect();
            let listed: Vec<_> = u.nics.iter().map(|n| n.mac).collect();
            let listed = only.is_none().then_some(listed.as_slice());
            let report = crate::apply::links::reconcile(fx.kernel, &wanted, listed);
            crate::commit::record_link_problems(&paths, &report.problems);
        }
        for nic in &u.nics {
            if let Some(why) = nic.mac.nobodys() {
                log::warn!(
                    "{}: listed without DHCP, refused: {why} (no NIC is matched by it)",
                    nic.mac
                );
                continue;
            }
            // Recorded: followed above (a DHCP client's NIC by its lease, never
            // as a NIC without DHCP).
            if recorded_macs.contains(&nic.mac) {
                continue;
            }
            if let Some(o) = address_new(fx, &paths, cfg, only, u, nic)? {
                out.push(o);
            }
        }
    }
    record_refresh(&paths, &out);
    if let (Some(o), true) = (only, out.is_empty()) {
        out.push(RefreshOutcome::Kept(
            o.clone(),
            "no recorded plan".to_owned(),
        ));
    }
    Ok(out)
}

/// One recorded NIC of [`refresh_scoped`], under its lock: `None` when it is not
/// this run's (gone meanwhile, not one without DHCP when only those are asked,
/// or evaluated later as a new NIC without DHCP).
fn refresh_recorded(
    fx: &mut Effects<'_>,
    paths: &Paths,
    cfg: &HookConfig,
    name: &IfName,
    asked: &Asked<'_>,
) -> Result<Option<RefreshOutcome>> {
    let Asked {
        unleased,
        unleased_only,
        primary_mac,
        leave_followed,
    } = *asked;
    let _lock = state::lock_interface(paths, name)?;
    let Some(st) = state::read_state_or_set_aside(paths, name) else {
        return Ok(None);
    };
    // Configured without a DHCP client: from the metadata (an address leasehook
    // added), or only from what the kernel configured itself (SLAAC). A NIC the
    // metadata lists without DHCP is the metadata's to follow even when its
    // recorded leases are all a DHCP client's (OCI's DHCPv6 on a secondary VNIC
    // came first): its IPv4 is still the metadata's to add.
    let leases = st.leases();
    let from_metadata = leases.iter().any(|l| l.reason == Reason::Metadata)
        || (!leases.is_empty() && leases.iter().all(|l| !l.reason.is_dhcp_client()))
        || (!st.families.is_empty() && listed(unleased, st.mac));
    if unleased_only && !from_metadata {
        return Ok(None);
    }
    if st.families.is_empty() && listed(unleased, st.mac) {
        // Evaluated again by the caller, as a new NIC without DHCP.
        return Ok(None);
    }
    if cfg.is_unmanaged(name, Some(st.mac)) {
        return Ok(Some(RefreshOutcome::Kept(
            name.clone(),
            "unmanaged (configuration key unmanaged): left alone".to_owned(),
        )));
    }
    // The gate asks about the link's name now (it may have been renamed).
    let now = fx
        .kernel
        .links()?
        .into_iter()
        .find(|l| l.mac == Some(st.mac))
        .map_or_else(|| name.clone(), |l| l.name);
    let cfg = match kubernetes_gate(fx.kernel, cfg, &now)? {
        Gate::Plan(c) => *c,
        Gate::Cni(why) => {
            let why = leave_to_cni(fx.kernel, paths, name, &why)?;
            return Ok(Some(RefreshOutcome::Kept(name.clone(), why)));
        }
    };
    if from_metadata {
        refresh_unleased(fx, paths, &st, &cfg, unleased).map(Some)
    } else {
        let asked = (primary_mac, leave_followed, unleased);
        refresh_one(fx, paths, &st, &cfg, asked).map(Some)
    }
}

/// Whether `unmanaged` names the NIC `mac` whose link leasehook would create:
/// by its MAC, by what the metadata says of it (`interface-id:nic0.5`, GCE's
/// name of a Dynamic NIC; an OCI VNIC's OCID), or by the name of a link that
/// already has its MAC (a glob cannot name a link not made yet).
fn unmanaged_link(
    cfg: &HookConfig,
    answer: &Unleased,
    links: &[crate::apply::KernelLink],
    mac: crate::model::MacAddr,
) -> bool {
    let by_metadata = answer.network.nic(mac).is_some_and(|nic| {
        cfg.unmanaged
            .iter()
            .any(|u| u.needs_metadata() && u.matches_nic(nic) == Some(true))
    });
    by_metadata
        || cfg
            .unmanaged
            .iter()
            .any(|u| matches!(u, crate::config::Unmanaged::Mac(m) if *m == mac))
        || links
            .iter()
            .any(|l| l.mac == Some(mac) && cfg.is_unmanaged(&l.name, Some(mac)))
}

/// What [`refresh_scoped`] learned once for every recorded NIC.
#[derive(Clone, Copy)]
struct Asked<'a> {
    /// The metadata's NICs without DHCP (`None`: not asked, or none on this cloud).
    unleased: Option<&'a Result<Unleased>>,
    /// Only the NICs without DHCP are refreshed.
    unleased_only: bool,
    /// The primary's MAC, as a recorded state says it.
    primary_mac: Option<crate::model::MacAddr>,
    /// A NIC a live GCE follower covers is left to it ([`Scope::Timer`]).
    leave_followed: bool,
}

/// Whether a refresh must ask the metadata for its NICs without DHCP: not when
/// it refreshes `only` one NIC whose recorded plan holds a family and whose
/// every lease is a DHCP client's (that list changes nothing for it: see
/// [`refresh_recorded`]; the timer's refresh of every NIC finds an address the
/// kernel configured from router advertisements besides its DHCP lease);
/// always for the NICs without DHCP, for every NIC, for a NIC whose plan holds
/// such an address, and for a NIC with no plan (it may be one without DHCP,
/// new).
fn needs_unleased(states: &[InterfaceState], only: Option<&IfName>, unleased_only: bool) -> bool {
    let Some(only) = only else {
        return true;
    };
    if unleased_only {
        return true;
    }
    !states.iter().any(|s| {
        s.name == *only
            && !s.families.is_empty()
            && s.leases().iter().all(|l| l.reason.is_dhcp_client())
    })
}

/// Whether the metadata's answer lists `mac` among the NICs without DHCP.
fn listed(unleased: Option<&Result<Unleased>>, mac: crate::model::MacAddr) -> bool {
    matches!(unleased, Some(Ok(u)) if u.nics.iter().any(|n| n.mac == mac))
}

/// [`Provider::unleased`], its error logged once here (each recorded NIC it
/// concerns says so again in its outcome).
fn ask_unleased(
    provider: &dyn Provider,
    policy: &WaitPolicy,
    clock: &dyn crate::source::provider::Clock,
) -> Option<Result<Unleased>> {
    let answer = provider.unleased(policy, clock)?;
    Some(answer.inspect_err(|e| log::warn!("the NICs without DHCP: {}", unanswered(e))))
}

/// A NIC [`Provider::unleased`] lists with no recorded plan: when a link has its
/// MAC (and `only`, if given, names it), it is given its address, rules and
/// table under its lock (its link brought up when the plan adds something; a
/// plan covering nothing is `Kept`, recorded nowhere). `None`: not this refresh's to touch (no link
/// with the MAC yet: the udev add path or the next refresh will see it; another
/// interface asked for).
fn address_new(
    fx: &mut Effects<'_>,
    paths: &Paths,
    cfg: &HookConfig,
    only: Option<&IfName>,
    answer: &Unleased,
    nic: &UnleasedNic,
) -> Result<Option<RefreshOutcome>> {
    let read_at = Instant::now();
    let links = fx.kernel.links()?;
    let Some(k) = links.iter().find(|l| l.mac == Some(nic.mac)) else {
        log::debug!(
            "{}: listed without DHCP, but no link has this MAC (yet)",
            nic.mac
        );
        return Ok(None);
    };
    let name = k.name.clone();
    if only.is_some_and(|o| *o != name) {
        return Ok(None);
    }
    if cfg.is_unmanaged(&name, Some(nic.mac)) {
        return Ok(Some(RefreshOutcome::Kept(
            name,
            "unmanaged (configuration key unmanaged): left alone".to_owned(),
        )));
    }
    if let Some((_, why)) = unmanaged_by_metadata(cfg, &answer.network, nic.mac, false) {
        return Ok(Some(RefreshOutcome::Kept(name, why)));
    }
    let cfg = match kubernetes_gate(fx.kernel, cfg, &name)? {
        Gate::Plan(c) => c,
        Gate::Cni(why) => return Ok(Some(RefreshOutcome::Kept(name, why))),
    };
    let (leases, lapsed) = in_force(fx.kernel, &links, &name, nic.leases.clone())?;
    if leases.is_empty() {
        let why = lapsed.unwrap_or_default();
        return Ok(Some(RefreshOutcome::Kept(name, why)));
    }
    if let Some(why) = lapsed {
        log::info!("{name}: {why}");
    }
    let _lock = state::lock_interface(paths, &name)?;
    // Another refresh (the timer's, udev's) may have recorded it meanwhile (a
    // state holding no family is none: see `refresh_scoped`).
    if state::read_state_or_set_aside(paths, &name).is_some_and(|st| !st.families.is_empty()) {
        return Ok(Some(RefreshOutcome::Kept(
            name,
            "recorded by another run meanwhile".to_owned(),
        )));
    }
    let target = Target {
        link: Link {
            name: name.clone(),
            mac: nic.mac,
            ipv6_router: None,
        },
        os: os_links(&links, &cfg),
        leases,
        recorded: None,
        links: SeenLinks::new(links.clone(), read_at),
    };
    let answer = Answer {
        network: answer.network.clone(),
        partial: false,
    };
    let applied = apply_answer(fx.kernel, (paths, &cfg), &target, &answer, |kernel, p| {
        // Every lease refused (or the table another NIC's): nothing is
        // recorded, so the next refresh evaluates it again, and the link is
        // left as it is.
        if p.interfaces.iter().all(|ip| ip.families.is_empty()) {
            let why = "no DHCP, but nothing to configure from the metadata (refused, see above): \
                       nothing recorded or brought up; the next refresh asks again"
                .to_owned();
            return Ok(Prepared::Stop(RefreshOutcome::Kept(name.clone(), why)));
        }
        // A link brought up has changed (the kernel adds its own addresses and
        // routes): the commit reads the kernel again.
        let wrote = bring_up(kernel, k.index, p, &name)?;
        Ok(Prepared::Commit {
            wrote,
            afresh: false,
        })
    })?;
    Ok(Some(match applied {
        Applied::Committed { report, .. } => {
            touch(paths, &name);
            // A NIC without DHCP configured for the first time: a hot-plug,
            // refreshed more often for a while by `leasehook watch`.
            super::hotplug::record(paths, &name, nic.mac);
            log::info!(
                "{name}: no DHCP on this NIC; configured from the metadata ({} change(s))",
                report.writes()
            );
            RefreshOutcome::Addressed(name, report)
        }
        Applied::TableHeld(why) => {
            log::warn!("{name}: {why}");
            RefreshOutcome::Kept(name, why)
        }
        Applied::Unmanaged(_, why) | Applied::KeptPartial(why) => RefreshOutcome::Kept(name, why),
        Applied::Stopped(o) => o,
    }))
}

/// Brings up link `index` (named `name`) for `p` when the plan adds something
/// to it and it is down (no DHCP client brings up a NIC without DHCP): `true`
/// when it was down, and the kernel has changed since.
fn bring_up(kernel: &mut dyn Kernel, index: u32, p: &Plan, name: &IfName) -> Result<bool> {
    let brought_up = configures_something(p) && kernel.bring_up(index)?;
    if brought_up {
        log::info!("{name}: brought up (no DHCP client serves it)");
    }
    Ok(brought_up)
}

/// The recorded NIC's link now, found by its MAC among `links`; `Err` with the
/// outcome when no link has it any more: its objects and state are gone.
fn link_now<'a>(
    kernel: &mut dyn Kernel,
    paths: &Paths,
    st: &InterfaceState,
    links: &'a [KernelLink],
) -> Result<std::result::Result<&'a KernelLink, RefreshOutcome>> {
    if let Some(k) = links.iter().find(|l| l.mac == Some(st.mac)) {
        return Ok(Ok(k));
    }
    let name = st.name.clone();
    let report = crate::commit::remove(kernel, paths, &name, None, Some(st.clone()))?;
    remove_stamp(paths, &name);
    log::info!(
        "{name}: no link has {} any more; removed {} object(s)",
        st.mac,
        report.writes()
    );
    Ok(Err(RefreshOutcome::LinkGone(name, report)))
}

/// Refreshes a recorded NIC whose address leasehook configured from the metadata
/// ([`Reason::Metadata`]): its link gone, its objects go (as any NIC's); else the
/// metadata's answer decides: listed, it is planned from the leases listed now;
/// not listed, its rules, routes, table and address go; not answered, nothing
/// changes.
fn refresh_unleased(
    fx: &mut Effects<'_>,
    paths: &Paths,
    st: &InterfaceState,
    cfg: &HookConfig,
    unleased: Option<&Result<Unleased>>,
) -> Result<RefreshOutcome> {
    let name = st.name.clone();
    let read_at = Instant::now();
    let links = fx.kernel.links()?;
    let k = match link_now(fx.kernel, paths, st, &links)? {
        Ok(k) => k,
        Err(gone) => return Ok(gone),
    };
    let answer = match unleased {
        Some(Ok(answer)) => answer,
        Some(Err(e)) => {
            return Ok(RefreshOutcome::Unchecked(
                name,
                format!("the metadata did not answer usefully ({e}): whatever was applied stays"),
            ));
        }
        None => {
            return Ok(RefreshOutcome::Kept(
                name,
                "configured from the metadata, but this provider serves every NIC DHCP: \
                 left as it is (`leasehook flush` removes it)"
                    .to_owned(),
            ));
        }
    };
    let Some(nic) = answer.nics.iter().find(|n| n.mac == st.mac) else {
        let report = crate::commit::remove(fx.kernel, paths, &name, None, Some(st.clone()))?;
        remove_stamp(paths, &name);
        log::info!(
            "{name}: the metadata no longer lists {} among the NICs without DHCP; removed {} \
             object(s), its address too",
            st.mac,
            report.writes()
        );
        return Ok(RefreshOutcome::Unlisted(name, report));
    };
    let (leases, why) = in_force(fx.kernel, &links, &k.name, metadata_leases(st, nic))?;
    let (now, lapsed) = drop_lapsed(fx.kernel, paths, st, &leases, why.as_deref())?;
    let Some(st) = now.as_ref().filter(|_| !leases.is_empty()) else {
        // Nothing in force: what lapsed is gone, the rest (if any) stays.
        if now.is_some() {
            touch(paths, &name);
        }
        return Ok(if lapsed.writes() > 0 || now.is_none() {
            RefreshOutcome::Refreshed(name, lapsed)
        } else {
            RefreshOutcome::Kept(
                name,
                why.unwrap_or_else(|| {
                    "nothing from the metadata to add: its DHCP client holds every family \
                     the metadata gives"
                        .to_owned()
                }),
            )
        });
    };
    let (target, _new_lock) = refresh_target(paths, st, cfg, (k, &links, read_at), leases)?;
    let answer = Answer {
        network: answer.network.clone(),
        partial: false,
    };
    let mut removed = Report::default();
    let applied = apply_answer(fx.kernel, (paths, cfg), &target, &answer, |kernel, p| {
        prepare_refreshed(
            kernel,
            paths,
            (st, &target.link.name),
            p,
            (Some(k.index), &mut removed),
        )
    })?;
    let out = refreshed(paths, st, &target.link.name, applied, removed);
    Ok(with_lapsed(out, &lapsed))
}

/// Of `leases` for the link `name` (among the kernel's `links`), those in
/// force: every one a DHCP client or the metadata stands for, and a
/// [`Reason::Autoconf`] one only while the kernel holds its address on the
/// link (one `ip address show` dump, made only when there is one): the kernel
/// configured it from router advertisements and drops it when its prefix's
/// lifetime runs out. With the leases, why any was left out, naming the
/// kernel's other global IPv6 addresses on the link: the metadata does not
/// vouch for them (privacy or stable-privacy addresses, another prefix's), so
/// they get no rule.
fn in_force(
    kernel: &mut dyn Kernel,
    links: &[KernelLink],
    name: &IfName,
    leases: Vec<Lease>,
) -> Result<(Vec<Lease>, Option<String>)> {
    if leases.iter().all(|l| l.reason != Reason::Autoconf) {
        return Ok((leases, None));
    }
    let index = links.iter().map(|l| (l.name.clone(), l.index)).collect();
    let held: Vec<ipnet::IpNet> = kernel
        .link_addresses(&index)?
        .into_iter()
        .filter(|a| a.dev == *name)
        .map(|a| a.addr)
        .collect();
    let (kept, lapsed): (Vec<Lease>, Vec<Lease>) = leases
        .into_iter()
        .partition(|l| l.reason != Reason::Autoconf || held.iter().any(|a| a.addr() == l.address));
    if lapsed.is_empty() {
        return Ok((kept, None));
    }
    let wanted: Vec<String> = lapsed.iter().map(|l| l.address.to_string()).collect();
    let others: Vec<String> = held
        .iter()
        .filter(|a| matches!(a.addr(), IpAddr::V6(v6) if !v6.is_unicast_link_local()))
        .filter(|a| !kept.iter().any(|l| l.address == a.addr()))
        .map(ToString::to_string)
        .collect();
    let mut why = format!(
        "IPv6 from router advertisements: the kernel holds no {} on {name} (the address \
         the metadata vouches for): no IPv6 rules until it does",
        wanted.join(", ")
    );
    if !others.is_empty() {
        let _ = write!(
            why,
            "; it holds {}, which the metadata does not vouch for (a privacy or \
             stable-privacy address, another prefix's): no rules from them",
            others.join(", ")
        );
    }
    Ok((kept, Some(why)))
}

/// Removes the policy routing of each family of `st` whose recorded lease no
/// DHCP client holds and which has no lease in `leases` now: a
/// [`Reason::Autoconf`] one (the kernel dropped the address, or the metadata
/// no longer vouches for it; `why`, when known, is logged), whose address is
/// the kernel's and never removed, or a [`Reason::Metadata`] one the metadata
/// no longer gives (a VNIC's IPv6 removed), its address with it. The state
/// afterwards (`None`: nothing left) and the removals.
fn drop_lapsed(
    kernel: &mut dyn Kernel,
    paths: &Paths,
    st: &InterfaceState,
    leases: &[Lease],
    why: Option<&str>,
) -> Result<(Option<InterfaceState>, Report)> {
    let lapsed: Vec<(crate::model::Family, Reason)> = st
        .leases()
        .iter()
        .filter(|l| !l.reason.is_dhcp_client() && !leases.iter().any(|n| n.family == l.family))
        .map(|l| (l.family, l.reason))
        .collect();
    let mut now = Some(st.clone());
    let mut report = Report::default();
    for (family, reason) in lapsed {
        let r = crate::commit::remove(kernel, paths, &st.name, Some(family), now.clone())?;
        report.ops.extend(r.ops);
        report.errors.extend(r.errors);
        if now.as_mut().is_some_and(|s| s.forget(Some(family))) {
            now = None;
        }
        let why = match reason {
            Reason::Autoconf => {
                why.unwrap_or("the metadata no longer vouches for an address the kernel configured")
            }
            _ => "the metadata no longer gives it",
        };
        log::info!("{}: removed its {family} policy routing ({why})", st.name);
    }
    if now.is_none() {
        remove_stamp(paths, &st.name);
    }
    Ok((now, report))
}

/// `out` with the removals of [`drop_lapsed`] in front of its writes.
fn with_lapsed(out: RefreshOutcome, lapsed: &Report) -> RefreshOutcome {
    if lapsed.ops.is_empty() && lapsed.errors.is_empty() {
        return out;
    }
    let merge = |mut r: Report| {
        let mut all = lapsed.clone();
        all.ops.append(&mut r.ops);
        all.errors.append(&mut r.errors);
        all.foreign = r.foreign;
        all
    };
    match out {
        RefreshOutcome::Refreshed(n, r) => RefreshOutcome::Refreshed(n, merge(r)),
        RefreshOutcome::Renamed { from, to, report } => RefreshOutcome::Renamed {
            from,
            to,
            report: merge(report),
        },
        other => other,
    }
}

/// What a NIC without DHCP is planned from when refreshed, per family: the
/// metadata's lease of it, unless a DHCP client's lease of that family is
/// recorded (OCI serves a secondary VNIC DHCPv6: that family is the client's,
/// never planned over from the metadata, and its client's events follow it).
/// A family configured from the metadata that it no longer gives (a VNIC's
/// IPv6 removed) is left out, and [`drop_lapsed`] removes it.
fn metadata_leases(st: &InterfaceState, nic: &UnleasedNic) -> Vec<Lease> {
    let recorded = st.leases();
    let by_client = |f: crate::model::Family| {
        recorded
            .iter()
            .any(|l| l.family == f && l.reason.is_dhcp_client())
    };
    nic.leases
        .iter()
        .filter(|l| !by_client(l.family))
        .cloned()
        .collect()
}

/// What a recorded NIC is planned as when refreshed: its link now (`k`, among
/// the kernel's `links`, read at `read_at`), the OS's links, `leases`, its
/// recorded state; and,
/// when its link has another name now, that name's lock (a lease event on the
/// new name takes it too).
fn refresh_target(
    paths: &Paths,
    st: &InterfaceState,
    cfg: &HookConfig,
    (k, links, read_at): (&KernelLink, &[KernelLink], Instant),
    leases: Vec<crate::model::Lease>,
) -> Result<(Target, Option<state::InterfaceLock>)> {
    let lock = if k.name == st.name {
        None
    } else {
        Some(state::lock_interface(paths, &k.name)?)
    };
    let target = Target {
        link: Link {
            name: k.name.clone(),
            mac: st.mac,
            ipv6_router: None,
        },
        os: os_links(links, cfg),
        leases,
        recorded: Some(st.clone()),
        links: SeenLinks::new(links.to_vec(), read_at),
    };
    Ok((target, lock))
}

/// Refreshes one recorded interface: its link by MAC (gone: its objects and state
/// go), the provider's answer for the recorded leases, then the plan applied
/// ([`wait_and_apply`]). With `leave_followed`, a NIC a live GCE follower covers
/// is [`RefreshOutcome::Kept`] once its link is found under its name.
///
/// An address the kernel configured from router advertisements that the
/// metadata vouches for (a [`Reason::Autoconf`] lease of `unleased`'s for the
/// NIC, else the recorded one when the metadata did not answer) is planned
/// with the recorded leases, for a family no DHCP client leased, while the
/// kernel holds it; one that lapsed has its family's policy routing removed.
pub(super) fn refresh_one(
    fx: &mut Effects<'_>,
    paths: &Paths,
    st: &InterfaceState,
    cfg: &HookConfig,
    (primary_mac, leave_followed, unleased): (
        Option<crate::model::MacAddr>,
        bool,
        Option<&Result<Unleased>>,
    ),
) -> Result<RefreshOutcome> {
    let name = st.name.clone();
    let read_at = Instant::now();
    let links = fx.kernel.links()?;
    let k = match link_now(fx.kernel, paths, st, &links)? {
        Ok(k) => k,
        Err(gone) => return Ok(gone),
    };
    let recorded = st.leases();
    if recorded.is_empty() {
        return Ok(RefreshOutcome::Kept(
            name,
            "no lease recorded (a plan applied by hand)".to_owned(),
        ));
    }
    let leases = with_autoconf(recorded, unleased, st.mac);
    let (leases, why) = in_force(fx.kernel, &links, &k.name, leases)?;
    let (now, lapsed) = drop_lapsed(fx.kernel, paths, st, &leases, why.as_deref())?;
    let Some(now) = now else {
        return Ok(RefreshOutcome::Refreshed(name, lapsed));
    };
    let st = &now;
    let primary_use = PrimaryUse::of(&cfg.plan);
    let objects = st.objects();
    if st.primary
        && primary_use == PrimaryUse::Nothing
        && objects.rules.is_empty()
        && objects.routes.is_empty()
        && objects.addresses.is_empty()
    {
        touch(paths, &k.name);
        return Ok(RefreshOutcome::Kept(
            name,
            "the primary NIC: this configuration adds nothing to it, nothing to ask".to_owned(),
        ));
    }
    if leave_followed
        && k.name == name
        && let Some(why) = followed(fx.provider.kind(), paths, st.mac)
    {
        return Ok(RefreshOutcome::Kept(name, why));
    }
    let (target, _new_lock) = refresh_target(paths, st, cfg, (k, &links, read_at), leases.clone())?;
    let mut nic = NicEvent::try_new(k.name.clone(), st.mac, leases)?
        .with_peers(target.os.iter().map(|l| l.mac))
        .with_primary_use(primary_use);
    if st.primary {
        nic = nic.known_primary();
    } else if let Some(primary) = primary_mac.filter(|m| *m != st.mac) {
        // Another NIC's record names the primary: not asked again.
        nic = nic.with_known_primary_mac(primary);
    }
    // The provider's client is bound to the NIC; the token comes from the shared cache.
    let ask = Ask {
        nic,
        policy: refresh_policy(cfg, st),
        timed: false,
    };
    let decide = |outcome| match outcome {
        Outcome::Complete(network) => Ok(Next::complete(network)),
        Outcome::Partial { missing, .. } => {
            let list: Vec<String> = missing.iter().map(ToString::to_string).collect();
            let why = format!(
                "IMDS incomplete ({}); keeping the state applied before",
                list.join("; ")
            );
            let mut now = st.clone();
            now.missing = missing;
            state::save_if_changed(paths, Some(st), now, state::unix_ms())?;
            Ok(Next::Stop(RefreshOutcome::Unchecked(name.clone(), why)))
        }
        Outcome::Failed(e) => Ok(Next::Stop(RefreshOutcome::Unchecked(
            name.clone(),
            format!("IMDS did not answer usefully ({e}); whatever was applied stays"),
        ))),
    };
    let mut removed = Report::default();
    let applied = wait_and_apply(fx, (paths, cfg), (&ask, &target), decide, |kernel, p| {
        prepare_refreshed(
            kernel,
            paths,
            (st, &target.link.name),
            p,
            (None, &mut removed),
        )
    })?;
    let out = refreshed(paths, st, &target.link.name, applied, removed);
    Ok(with_lapsed(out, &lapsed))
}

/// The recorded `leases` of a NIC a DHCP client serves (`mac`), with, for each
/// family none of them covers, the [`Reason::Autoconf`] lease the metadata's
/// answer (`unleased`) lists for the NIC, or, when it did not answer, the one
/// recorded. A recorded autoconf lease the answer no longer lists is dropped.
fn with_autoconf(
    leases: Vec<Lease>,
    unleased: Option<&Result<Unleased>>,
    mac: crate::model::MacAddr,
) -> Vec<Lease> {
    let (mut out, recorded): (Vec<Lease>, Vec<Lease>) =
        leases.into_iter().partition(|l| l.reason.is_dhcp_client());
    let listed: Vec<Lease> = match unleased {
        Some(Ok(u)) => u
            .nics
            .iter()
            .filter(|n| n.mac == mac)
            .flat_map(|n| n.leases.iter().cloned())
            .filter(|l| l.reason == Reason::Autoconf)
            .collect(),
        _ => recorded
            .into_iter()
            .filter(|l| l.reason == Reason::Autoconf)
            .collect(),
    };
    for l in listed {
        if !out.iter().any(|o| o.family == l.family) {
            out.push(l);
        }
    }
    out
}

/// The wait's policy for refreshing `st`: the synchronous budget, quiet when
/// the metadata agrees at once.
fn refresh_policy(cfg: &HookConfig, st: &InterfaceState) -> WaitPolicy {
    let mut policy = WaitPolicy::default().with_budget(cfg.sync_budget);
    // Unchanged is no news: an agreement at once is logged at debug.
    policy.quiet = true;
    if !st.missing.is_empty() {
        // Known incomplete (its worker gave up, or the last refresh found it so):
        // one round of requests, no retries within the budget, since the timer
        // asks again within a minute anyway. The first pause is the whole budget,
        // so the wait gives up after the first round.
        policy.min_delay = policy.budget;
        policy.max_delay = policy.budget;
    }
    policy
}

/// Why the timer leaves a NIC with `mac` to `leasehook watch`'s live follower,
/// when it does: on a cloud whose row says it is followed live, with a fresh
/// heartbeat that lists the MAC.
fn followed(
    kind: crate::source::provider::ProviderKind,
    paths: &Paths,
    mac: crate::model::MacAddr,
) -> Option<String> {
    let live = kind.cloud().live?;
    let hb = super::live::read(paths, kind.name())?;
    let now = state::unix_ms();
    hb.covers(mac, now).then(|| hb.reason(live.label, now))
}

/// A refreshed NIC's last step before its commit: its link brought up when it
/// has no DHCP client (`bring_up`, its index) and the plan adds something, and,
/// when its link has another name now, the old name's policy routing removed
/// (into `removed`) and its stamp with it.
fn prepare_refreshed(
    kernel: &mut dyn Kernel,
    paths: &Paths,
    (st, to): (&InterfaceState, &IfName),
    p: &Plan,
    (index, removed): (Option<u32>, &mut Report),
) -> Result<Prepared<RefreshOutcome>> {
    let name = &st.name;
    let mut wrote = match index {
        Some(index) => bring_up(kernel, index, p, to)?,
        None => false,
    };
    let renamed = to != name;
    if renamed {
        // Renamed (or re-added under another name), recognised by its MAC: the old
        // name's rules go, the new name gets the plan.
        *removed = crate::commit::remove(kernel, paths, name, None, Some(st.clone()))?;
        wrote |= removed.writes() > 0;
        remove_stamp(paths, name);
        log::info!(
            "{name}: its MAC {} is {to} now; moved its policy routing",
            st.mac
        );
    }
    Ok(Prepared::Commit {
        wrote,
        afresh: renamed,
    })
}

/// What a recorded NIC's refresh comes to once applied (its link named `to`
/// now): refreshed, renamed, or kept as it was (and why).
fn refreshed(
    paths: &Paths,
    st: &InterfaceState,
    to: &IfName,
    applied: Applied<RefreshOutcome>,
    mut removed: Report,
) -> RefreshOutcome {
    let name = st.name.clone();
    match applied {
        Applied::Committed { report, .. } => {
            // Checked and applied: only now is the refresh stamp renewed.
            touch(paths, to);
            if *to == name {
                RefreshOutcome::Refreshed(name, report)
            } else {
                removed.ops.extend(report.ops);
                RefreshOutcome::Renamed {
                    from: name,
                    to: to.clone(),
                    report: removed,
                }
            }
        }
        Applied::TableHeld(why) => {
            log::warn!("{to}: {why}");
            RefreshOutcome::Unchecked(name, why)
        }
        Applied::Unmanaged(_, why) | Applied::KeptPartial(why) => RefreshOutcome::Kept(name, why),
        Applied::Stopped(o) => o,
    }
}

/// `refresh`'s records for `leasehook status`, one per NIC it checked
/// ([`super::last_event`]).
fn record_refresh(paths: &Paths, outcomes: &[RefreshOutcome]) {
    use super::last_event::{EventOutcome, LastEvent, applied, record};
    use RefreshOutcome as R;
    for o in outcomes {
        let (name, outcome) = match o {
            R::Refreshed(n, r) | R::Addressed(n, r) => (n, applied(r)),
            R::Renamed { to, report, .. } => (to, applied(report)),
            R::LinkGone(n, r) | R::Unlisted(n, r) => (n, EventOutcome::Removed(r.writes())),
            R::Kept(n, why) => (n, EventOutcome::Kept(why.clone())),
            // The metadata could not be asked: what was applied stays (not a
            // failure of the NIC's routing; `refresh` itself exits 1, `status`
            // says degraded until a refresh checks it).
            R::Unchecked(n, why) => (n, EventOutcome::Unchecked(why.clone())),
        };
        let ev = LastEvent::now("refresh", "REFRESH", outcome);
        record(paths, name, &ev, ev.at_ms);
    }
}

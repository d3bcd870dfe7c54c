// SPDX-License-Identifier: Apache-2.0
//! One NIC's plan, as the hook, its worker and `refresh` make it: the links the
//! `cloud-init` order counts, the NIC's link, what the planner reads of the
//! kernel's snapshot, the plan cut down to the NIC and the families of its
//! leases, and the checks made on it before it is committed. Pure but for
//! [`table_held_by_other`], which reads the recorded states.

use super::HookConfig;
use crate::apply::state::{self, Paths};
use crate::apply::{self, KernelLink};
use crate::error::{Error, Result};
use crate::model::{
    Address, Family, IfName, InstanceNetwork, Lease, LeaseEvent, Link, MacAddr, Plan, Profile,
};
use crate::plan::{InterfaceLease, PlanInput, plan};

/// The OS's links with a MAC (of `kernel_links`, the kernel's links), for the
/// `cloud-init` profile, which numbers a NIC by its position among all NICs
/// present in both the OS and IMDS; empty for `ec2-net-utils`, whose table
/// depends on the NIC alone. A MAC held by several links (a VLAN on a NIC)
/// counts once, by its first link in name order.
pub(super) fn os_links(kernel_links: &[KernelLink], cfg: &HookConfig) -> Vec<Link> {
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

/// The link `name` among `kernel_links` (the kernel's links, one dump), and its
/// index.
pub(super) fn find_link(kernel_links: &[KernelLink], name: &IfName) -> Result<(Link, u32)> {
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
/// taken when the plan is made (and applied on): every link's addresses
/// (`ip address`), and the main table of both families, which gives the host's
/// next hops (routers no NIC may hold, SPEC §3.8) and the IPv6 router `link`
/// learned from router advertisements (set on it).
pub(super) fn kernel_inputs(
    seen: &apply::Snapshot,
    link: &mut Link,
) -> (Vec<Address>, Vec<crate::gate::Router>) {
    let index = seen.index();
    if let Some(i) = index.get(&link.name) {
        link.ipv6_router = apply::ipv6_router(&seen.main_routes, *i);
    }
    (
        seen.link_addresses(),
        apply::next_hops(&seen.main_routes, &index),
    )
}

/// Plans `link` alone: with `ec2-net-utils` from its own metadata, with
/// `cloud-init` among `os_links` (its position comes from every NIC's
/// `network-card`/`device-number` in `network`), and keeps only that interface
/// and the families of `leases`, the objects this event or refresh may change.
pub(super) fn plan_one(
    cfg: &HookConfig,
    network: &InstanceNetwork,
    link: &Link,
    os_links: &[Link],
    leases: &[Lease],
    (link_addresses, next_hops): (&[Address], &[crate::gate::Router]),
) -> Result<Plan> {
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
    let families: Vec<Family> = leases.iter().map(|l| l.family).collect();
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
pub(super) fn table_held_by_other(
    paths: &Paths,
    p: &Plan,
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

/// Logs what the address gate refused, one line per value.
pub(super) fn log_refused(p: &Plan) {
    for ip in &p.interfaces {
        for r in &ip.refused {
            crate::metrics::refused(&r.reason);
            log::warn!("{}: refused {r}", ip.name);
        }
    }
}

/// Whether `p` adds anything to its link (an address, a rule, a route): only
/// then is a link that is down brought up for it.
pub(super) fn configures_something(p: &Plan) -> bool {
    p.interfaces.iter().any(|ip| {
        !ip.families.is_empty()
            && (!ip.addresses.is_empty() || !ip.rules.is_empty() || !ip.routes.is_empty())
    })
}

/// The lease an apply reason carries.
pub(super) fn lease_of(event: &LeaseEvent) -> Result<Lease> {
    event.new.clone().ok_or_else(|| Error::NoLease {
        reason: event.reason.to_string(),
    })
}

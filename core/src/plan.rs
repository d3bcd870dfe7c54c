// SPDX-License-Identifier: Apache-2.0
//! Pure: (leases, instance metadata, links, config) → [`Plan`].
//!
//! Two schemes, chosen by [`Profile`]:
//!
//! * `ec2-net-utils` (default, SPEC §3.2): each secondary NIC gets table and rule
//!   priority `base + 100 * network-card + device-number`, a default route via the
//!   lease's router, the subnet route, and a `from` rule per address and delegated
//!   prefix. Only families with a lease are planned: the lease is the proof that the
//!   NIC is live in that family.
//! * `cloud-init` (SPEC §3.3): cloud-init's EC2 netplan rendering, table `100 + i`
//!   for the NIC at position `i` in (network-card, device-number, MAC) order.
//!
//! Where lease and metadata disagree, the plan keeps what the lease proves and lists
//! what is missing ([`Missing`]) instead of guessing.
//!
//! Every rule source and every address passes the address gate ([`crate::gate`])
//! first: what it refuses is listed in [`InterfacePlan::refused`] and left out, and
//! the rest of the plan goes on. Two NICs whose `device-number` gives one table
//! get neither rules nor routes (see `docs/planner.md`, "The address gate").

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use serde::{Deserialize, Serialize};

use crate::constants::{DEFAULT_TABLE_BASE, RESERVED_TABLES};
use crate::error::{Error, Problem, Result};
use crate::gate::{self, Bounds, Refusal, Refused};
use crate::model::{
    Address, Family, IfName, InstanceNetwork, InterfacePlan, Lease, Link, MacAddr, Missing,
    NicMetadata, Plan, Profile, Reason, Route, Rule, Scope,
};

/// The planner's knobs (SPEC §7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlanConfig {
    /// The scheme.
    pub profile: Profile,
    /// `ec2-net-utils`: table of device 0 on card 0.
    pub table_base: u32,
    /// `ec2-net-utils`: rule priority of device 0 on card 0 (defaults to `table_base`).
    pub priority_base: Option<u32>,
    /// `ec2-net-utils`: give the primary NIC rules too (off by default: rules on the
    /// primary break return traffic to containers on docker0).
    pub primary_rules: bool,
    /// `ec2-net-utils`: hold secondary addresses from the metadata on the link.
    pub secondary_addresses: bool,
    /// A Kubernetes node with a VPC-native CNI (SPEC §3.7): the primary NIC's
    /// secondary IPs and prefixes are the CNI's to hand to pods, never an address
    /// or a rule source. (The CNI's other ENIs are never planned: the hooks skip
    /// them.)
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub kubernetes: bool,
    /// `nics:`: the operator's routes, rules and prefix addresses per NIC
    /// (SPEC §3.9), each through the gate (`docs/planner.md`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nics: Vec<crate::config::NicEntry>,
}

impl Default for PlanConfig {
    fn default() -> Self {
        Self {
            profile: Profile::Ec2NetUtils,
            table_base: DEFAULT_TABLE_BASE,
            priority_base: None,
            primary_rules: false,
            secondary_addresses: true,
            kubernetes: false,
            nics: Vec::new(),
        }
    }
}

/// A lease and the interface it was leased on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceLease {
    /// The interface.
    pub interface: IfName,
    /// The lease in force on it.
    pub lease: Lease,
}

/// Everything the planner reads.
#[derive(Debug, Clone, Copy)]
pub struct PlanInput<'a> {
    /// The instance's network metadata.
    pub metadata: &'a InstanceNetwork,
    /// The links the operating system has.
    pub links: &'a [Link],
    /// The leases in force, at most one per interface and family.
    pub leases: &'a [InterfaceLease],
    /// The addresses the kernel's links hold (`ip address`), every link's: what
    /// another link holds is never a source or an address of the NIC planned.
    pub link_addresses: &'a [Address],
    /// The next hops of the kernel's main table (`ip route show table main`,
    /// read by the imperative shell): the host's routers, never a source or an
    /// address of any NIC ([`gate::Routers`]).
    pub next_hops: &'a [gate::Router],
}

impl<'a> PlanInput<'a> {
    /// The inputs without the kernel's state: no address held by a link, no
    /// router in the main table (`leasehook plan`, the benchmarks, tests).
    pub fn new(
        metadata: &'a InstanceNetwork,
        links: &'a [Link],
        leases: &'a [InterfaceLease],
    ) -> Self {
        Self {
            metadata,
            links,
            leases,
            link_addresses: &[],
            next_hops: &[],
        }
    }
}

#[cfg(test)]
thread_local! {
    /// How many plans this thread made, whoever asked (the hook, `refresh`, a
    /// consistency wait's check): the hook's tests pin one per event.
    pub(crate) static PLANS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Computes the plan. Fails only on inputs that contradict each other (a lease on an
/// interface with no link, two leases of one family on one interface) or on a table
/// number that overflows or hits a reserved table.
pub fn plan(input: &PlanInput<'_>, cfg: &PlanConfig) -> Result<Plan> {
    #[cfg(test)]
    PLANS.with(|n| n.set(n.get() + 1));
    check_inputs(input)?;
    let interfaces = match cfg.profile {
        Profile::Ec2NetUtils => plan_ec2_net_utils(input, cfg)?,
        Profile::CloudInit => plan_cloud_init(input),
    };
    Ok(Plan {
        profile: cfg.profile,
        interfaces,
    })
}

fn check_inputs(input: &PlanInput<'_>) -> Result<()> {
    let arg = |problem| Error::Argument {
        arg: "lease".to_owned(),
        problem,
    };
    let mut seen = BTreeSet::new();
    for l in input.leases {
        if !input.links.iter().any(|k| k.name == l.interface) {
            return Err(arg(Problem::bad(
                "no link with this name (and so no MAC)",
                l.interface.as_str(),
            )));
        }
        if !seen.insert((&l.interface, l.lease.family)) {
            return Err(arg(Problem::bad(
                format!("two {} leases for one interface", l.lease.family),
                l.interface.as_str(),
            )));
        }
    }
    let mut names = BTreeSet::new();
    for k in input.links {
        if !names.insert(&k.name) {
            return Err(Error::Argument {
                arg: "link".to_owned(),
                problem: Problem::bad("interface listed twice", k.name.as_str()),
            });
        }
    }
    Ok(())
}

fn lease_for<'a>(input: &PlanInput<'a>, name: &IfName, family: Family) -> Option<&'a Lease> {
    input
        .leases
        .iter()
        .find(|l| &l.interface == name && l.lease.family == family)
        .map(|l| &l.lease)
}

fn new_interface(link: &Link, primary: bool) -> InterfacePlan {
    InterfacePlan::empty(link.name.clone(), link.mac, primary)
}

impl InterfacePlan {
    /// The plan of the NIC `name` (`mac`) before anything is planned for it: no
    /// family covered, nothing to add, nothing missing or refused.
    pub fn empty(name: IfName, mac: MacAddr, primary: bool) -> Self {
        Self {
            name,
            mac,
            primary,
            families: Vec::new(),
            table: None,
            metric: None,
            addresses: Vec::new(),
            routes: Vec::new(),
            rules: Vec::new(),
            missing: Vec::new(),
            refused: Vec::new(),
        }
    }
}

/// Every address the NICs hold, each under its owner's name: the metadata's NICs
/// (by link name when the OS has them, else by MAC) and the kernel's links. Built
/// once per plan; a NIC's [`Bounds`] skip its own entries.
fn held_addresses(input: &PlanInput<'_>) -> gate::HeldAddresses {
    let name_of = |mac| {
        input
            .links
            .iter()
            .find(|l| l.mac == mac)
            .map_or_else(|| format!("the NIC {mac}"), |l| l.name.to_string())
    };
    let owners: Vec<String> = input.metadata.nics.iter().map(|n| name_of(n.mac)).collect();
    // Plain loops: the nested iterator chain this replaces cost a tenth of a
    // large plan (`core/benches/plan.rs`).
    let total = input
        .metadata
        .nics
        .iter()
        .map(|n| n.local_ipv4s.len() + n.ipv6s.len())
        .sum::<usize>()
        + input.link_addresses.len();
    let mut pairs: Vec<(&str, IpAddr)> = Vec::with_capacity(total);
    for (owner, n) in owners.iter().zip(&input.metadata.nics) {
        let owner = owner.as_str();
        pairs.extend(n.local_ipv4s.iter().map(|a| (owner, IpAddr::V4(*a))));
        pairs.extend(n.ipv6s.iter().map(|a| (owner, IpAddr::V6(*a))));
    }
    pairs.extend(kernel_addresses(input));
    gate::HeldAddresses::of(pairs)
}

fn kernel_addresses<'a>(input: &PlanInput<'a>) -> impl Iterator<Item = (&'a str, IpAddr)> + 'a {
    input
        .link_addresses
        .iter()
        .map(|a| (a.dev.as_str(), a.addr.addr()))
}

/// What the kernel's links hold, each under its link's name.
fn kernel_held(input: &PlanInput<'_>) -> gate::HeldAddresses {
    gate::HeldAddresses::of(kernel_addresses(input))
}

/// Every router's address the plan knows ([`gate::Routers`]): each lease's
/// routers, each NIC's gateways and route next hops the metadata names (or a
/// provider computes), and the kernel's main-table next hops. Built once per
/// plan; a router is refused on every NIC, not only its own.
fn routers(input: &PlanInput<'_>) -> gate::Routers {
    let name_of = |mac| {
        input
            .links
            .iter()
            .find(|l| l.mac == mac)
            .map_or_else(|| format!("the NIC {mac}"), |l| l.name.to_string())
    };
    let mut out: Vec<gate::Router> = input.next_hops.to_vec();
    for l in input.leases {
        out.extend(l.lease.routers.iter().map(|r| gate::Router {
            address: *r,
            whose: format!("{}'s lease router", l.interface),
        }));
    }
    for n in &input.metadata.nics {
        let owner = name_of(n.mac);
        out.extend(n.gateways.iter().map(|g| gate::Router {
            address: *g,
            whose: format!("the metadata's gateway of {owner}"),
        }));
        // A default route's gateway is the network's router. Another route's
        // next hop equal to an address the NIC lists is that route's fault:
        // it is refused as a next hop ([`next_hop`]), not the address.
        let own = |a: &IpAddr| match a {
            IpAddr::V4(v4) => n.local_ipv4s.contains(v4),
            IpAddr::V6(v6) => n.ipv6s.contains(v6),
        };
        out.extend(
            n.routes
                .iter()
                .filter(|r| r.to.prefix_len() == 0 || !own(&r.via))
                .map(|r| gate::Router {
                    address: r.via,
                    whose: format!("the gateway of {owner}'s route to {}", r.to),
                }),
        );
    }
    gate::Routers::new(out)
}

/// The NIC's subnets that pass the gate (IPv4 from `subnet-ipv4-cidr-block`, else
/// the lease's own network; IPv6 from `subnet-ipv6-cidr-blocks`), and what the
/// NICs hold (`held`, of which the link's own entries are skipped). Refused
/// subnets go to `refused`.
fn nic_bounds<'a>(
    link: &'a Link,
    nic: &NicMetadata,
    v4_lease: Option<&Lease>,
    (held, routers, local): (
        &'a gate::HeldAddresses,
        &'a gate::Routers,
        &'a gate::HeldAddresses,
    ),
    refused: &mut Vec<Refused>,
) -> Bounds<'a> {
    let mut subnets = Vec::new();
    let mut keep = |key: &str, net: IpNet, refused: &mut Vec<Refused>| match gate::check_subnet(net)
    {
        Ok(()) => {
            subnets.push(net.trunc());
            true
        }
        Err(r) => {
            refused.push(Refused::new(key, net, r));
            false
        }
    };
    let mut v4 = false;
    for s in &nic.subnet_ipv4_cidr_blocks {
        v4 |= keep("subnet-ipv4-cidr-block", IpNet::V4(*s), refused);
    }
    if !v4 && let Some(net) = v4_lease.and_then(Lease::interface_net) {
        keep("lease", net, refused);
    }
    for s in &nic.subnet_ipv6_cidr_blocks {
        keep("subnet-ipv6-cidr-blocks", IpNet::V6(*s), refused);
    }
    Bounds {
        subnets,
        held,
        me: link.name.as_str(),
        routers,
        local,
    }
}

/// The rules `from` each of `sources` that pass the gate; the rest go to `refused`
/// under `key`.
fn gated_rules(
    bounds: &Bounds<'_>,
    sources: impl IntoIterator<Item = (&'static str, IpNet)>,
    table: u32,
    priority: Option<u32>,
    refused: &mut Vec<Refused>,
) -> Vec<Rule> {
    sources
        .into_iter()
        .filter_map(|(key, from)| match bounds.source(from) {
            Ok(()) => Some(Rule {
                from: from.trunc(),
                to: None,
                table,
                priority,
            }),
            Err(r) => {
                refused.push(Refused::new(key, gate::shown(from), r));
                None
            }
        })
        .collect()
}

/// One family's addresses of a NIC as the metadata lists them: its addresses,
/// the leased one, its delegated prefixes. The IPv4 and IPv6 plans build their
/// rules and secondary addresses from it alike.
struct NicSources<'a, A, P> {
    addrs: &'a [A],
    leased: A,
    prefixes: &'a [P],
    /// Each address's verdict ([`Bounds::source`] of the host), which is its
    /// verdict as a rule source and as an address alike: the gate is asked
    /// once for both.
    verdicts: std::cell::OnceCell<Vec<std::result::Result<(), Refusal>>>,
}

impl<'a, A: Copy + Into<IpAddr>, P> NicSources<'a, A, P> {
    fn new(addrs: &'a [A], leased: A, prefixes: &'a [P]) -> Self {
        Self {
            addrs,
            leased,
            prefixes,
            verdicts: std::cell::OnceCell::new(),
        }
    }

    /// The addresses, each with its metadata key, value and verdict.
    fn checked(
        &self,
        bounds: &Bounds<'_>,
    ) -> impl Iterator<Item = (A, IpNet, &std::result::Result<(), Refusal>)> {
        let verdicts = self.verdicts.get_or_init(|| {
            // The list is mostly in order: each lookup in the sorted held
            // addresses and routers starts where the last one ended
            // ([`gate::Hosts`]) instead of a binary search over every NIC's.
            let mut hosts = bounds.hosts();
            self.addrs
                .iter()
                .map(|a| hosts.source((*a).into()))
                .collect()
        });
        self.addrs
            .iter()
            .zip(verdicts)
            .map(|(a, v)| (*a, IpNet::from((*a).into()), v))
    }

    fn family(&self) -> Family {
        Family::of(&self.leased.into())
    }

    /// The metadata keys a refusal names: the addresses', the prefixes'.
    fn keys(&self) -> (&'static str, &'static str) {
        match self.family() {
            Family::V4 => ("local-ipv4s", "ipv4-prefix"),
            Family::V6 => ("ipv6s", "ipv6-prefix"),
        }
    }
}

/// What the metadata lacks for the lease ([`Missing`]: the NIC's addresses, the
/// leased one among them, its subnet), then the lease's own gate and address;
/// false when the gate refuses the lease, and nothing more is planned for it.
fn lease_checks<A: Copy + PartialEq + Into<IpAddr>, P>(
    ip: &mut InterfacePlan,
    (link, lease, bounds): (&Link, &Lease, &Bounds<'_>),
    nic: &NicSources<'_, A, P>,
    subnets: &[P],
) -> bool {
    lease_gaps(
        lease.address,
        (!nic.addrs.is_empty(), nic.addrs.contains(&nic.leased)),
        !subnets.is_empty(),
        &mut ip.missing,
    );
    if !gate_lease(ip, lease, bounds) {
        return false;
    }
    metadata_address(ip, link, lease, bounds);
    true
}

/// What the NIC's metadata entry lacks for a lease of `leased`'s family, into
/// `missing`: any address of that family (else the leased one among them,
/// `lists.1`), and its subnet. The planner's check of each lease, and the
/// consistency wait's ([`crate::source::provider::complete::missing`]), which
/// lists what a plan would lack without planning.
pub(crate) fn lease_gaps(
    leased: IpAddr,
    (lists_any, lists_lease): (bool, bool),
    has_subnet: bool,
    missing: &mut Vec<Missing>,
) {
    let family = Family::of(&leased);
    if !lists_any {
        missing.push(Missing::Addresses { family });
    } else if !lists_lease {
        missing.push(Missing::LeaseAddress { address: leased });
    }
    if !has_subnet {
        missing.push(Missing::Subnet { family });
    }
}

/// The NIC's source rules to `table` at `priority`: one for each address, the
/// leased one and each delegated prefix that passes the gate; the rest are refused.
fn source_rules<A: Copy + PartialEq + Into<IpAddr>, P: Copy + Into<IpNet>>(
    ip: &mut InterfacePlan,
    bounds: &Bounds<'_>,
    nic: &NicSources<'_, A, P>,
    (table, priority): (u32, u32),
) {
    let (key, prefix_key) = nic.keys();
    ip.rules.reserve(nic.addrs.len() + nic.prefixes.len() + 1);
    let refused = &mut ip.refused;
    ip.rules.extend(
        nic.checked(bounds)
            .filter_map(|(_, from, verdict)| match verdict {
                Ok(()) => Some(Rule {
                    from,
                    to: None,
                    table,
                    priority: Some(priority),
                }),
                Err(r) => {
                    refused.push(Refused::new(key, gate::shown(from), r.clone()));
                    None
                }
            }),
    );
    // A leased address the metadata lists already has its rule, with the same
    // verdict ([`lease_checks`] let it pass): asking the gate again only adds a
    // repeat for the sort to move and drop (and breaks an ordered list).
    let lease =
        (!nic.addrs.contains(&nic.leased)).then(|| ("lease", IpNet::from(nic.leased.into())));
    let sources = lease
        .into_iter()
        .chain(nic.prefixes.iter().map(|p| (prefix_key, (*p).into())));
    let rules = gated_rules(bounds, sources, table, Some(priority), &mut ip.refused);
    ip.rules.extend(rules);
}

/// The NIC's addresses other than the leased one, as far as the gate lets them.
fn secondary_addresses<A: Copy + PartialEq + Into<IpAddr>, P>(
    ip: &mut InterfacePlan,
    bounds: &Bounds<'_>,
    nic: &NicSources<'_, A, P>,
    dev: &IfName,
) {
    let key = nic.keys().0;
    ip.addresses.reserve(nic.addrs.len());
    // One `extend`, not a `push` call per address (at `opt-level = "z"` it is
    // not inlined).
    let refused = &mut ip.refused;
    ip.addresses.extend(
        nic.checked(bounds)
            .filter(|(a, ..)| *a != nic.leased)
            .filter_map(|(_, addr, verdict)| match verdict {
                Ok(()) => Some(Address {
                    addr,
                    dev: dev.clone(),
                }),
                Err(r) => {
                    refused.push(Refused::new(key, gate::shown(addr), r.clone()));
                    None
                }
            }),
    );
}

/// The addresses that pass the gate; the rest go to `refused` under `key`.
fn gated_addresses(
    bounds: &Bounds<'_>,
    key: &str,
    addrs: impl IntoIterator<Item = IpNet>,
    dev: &IfName,
    refused: &mut Vec<Refused>,
) -> Vec<Address> {
    addrs
        .into_iter()
        .filter_map(|addr| match bounds.address(addr) {
            Ok(()) => Some(Address {
                addr,
                dev: dev.clone(),
            }),
            Err(r) => {
                refused.push(Refused::new(key, gate::shown(addr), r));
                None
            }
        })
        .collect()
}

/// Two NICs whose tables are one (two NICs with one `device-number`, or a NIC the
/// metadata lists with the same card and device-number) share no table: each such
/// NIC's plan is emptied (no family covered, so its last applied state is kept
/// as it is) and the conflict is listed.
fn refuse_shared_tables(out: &mut [InterfacePlan], metadata: &InstanceNetwork) {
    let mut claims: std::collections::BTreeMap<u32, Vec<String>> =
        std::collections::BTreeMap::new();
    for ip in out.iter() {
        if let Some(t) = ip.table {
            claims.entry(t).or_default().push(ip.name.to_string());
        }
    }
    let key = |n: &NicMetadata| (n.network_card.unwrap_or(0), n.device_number);
    let planned: BTreeSet<crate::model::MacAddr> = out
        .iter()
        .filter(|ip| ip.table.is_some())
        .map(|ip| ip.mac)
        .collect();
    for ip in out.iter_mut() {
        let Some(t) = ip.table else { continue };
        let me = metadata.nic(ip.mac);
        let mut others: Vec<String> = claims
            .get(&t)
            .into_iter()
            .flatten()
            .filter(|n| **n != ip.name.as_str())
            .cloned()
            .collect();
        if let Some(me) = me {
            others.extend(
                metadata
                    .nics
                    .iter()
                    // The numbers first: a MAC's comparison is a `memcmp` call.
                    .filter(|n| key(n) == key(me) && n.mac != me.mac && !planned.contains(&n.mac))
                    .filter(|n| {
                        n.device_number.unwrap_or(0) != 0 || n.network_card.unwrap_or(0) != 0
                    })
                    .map(|n| format!("the NIC {}", n.mac)),
            );
        }
        if others.is_empty() {
            continue;
        }
        others.sort();
        others.dedup();
        let device = me
            .and_then(|n| n.device_number)
            .map_or_else(|| "?".to_owned(), |d| d.to_string());
        ip.refused.push(Refused::new(
            "device-number",
            device,
            Refusal::TableClaimed { table: t, others },
        ));
        ip.families.clear();
        ip.table = None;
        ip.rules.clear();
        ip.routes.clear();
        ip.addresses.clear();
    }
}

/// `base + 100 * card + device`, refusing overflow and the kernel's reserved tables.
pub fn table_number(base: u32, card: u32, device: u32) -> Result<u32> {
    let n = card
        .checked_mul(100)
        .and_then(|c| c.checked_add(device))
        .and_then(|o| o.checked_add(base));
    let problem = |reason: &str| Error::Argument {
        arg: "table_base".to_owned(),
        problem: Problem::bad(reason, &format!("{base} + 100*{card} + {device}")),
    };
    match n {
        None => Err(problem("table number overflows 32 bits")),
        Some(t) if RESERVED_TABLES.contains(&t) => {
            Err(problem("table number is reserved (0, 253, 254, 255)"))
        }
        Some(t) => Ok(t),
    }
}

/// The NIC's network card and device number, when both can be trusted (SPEC §3.2,
/// [`planner.md`](../../docs/planner.md)); what cannot be trusted yet goes to
/// `missing`. The consistency wait's check reads them with the same rules
/// ([`crate::source::provider::complete::missing`]).
///
/// * `network-card` absent is card 0, unless another NIC of the instance reports a
///   `network-card`: then the instance type serves the key (multi-card types do, on
///   every NIC), and this NIC's has not propagated yet.
/// * `device-number: 0` is trusted on the primary and on a card other than 0
///   (multi-card types restart device numbers at 0 on every card). On a secondary
///   NIC of card 0 it is IMDS not having propagated the real number yet: card 0's
///   device 0 is the primary's.
pub(crate) fn card_and_device(
    metadata: &InstanceNetwork,
    nic: &NicMetadata,
    primary: bool,
    missing: &mut Vec<Missing>,
) -> (Option<u32>, Option<u32>) {
    let serves_cards = metadata
        .nics
        .iter()
        .any(|n| n.mac != nic.mac && n.network_card.is_some());
    let card = match nic.network_card {
        Some(c) => Some(c),
        None if serves_cards && !primary => {
            missing.push(Missing::NetworkCardNotPropagated);
            None
        }
        None => Some(0),
    };
    let device = match (nic.device_number, card) {
        (None, _) => {
            missing.push(Missing::DeviceNumber);
            None
        }
        (Some(0), Some(0)) if !primary => {
            missing.push(Missing::DeviceNumberNotPropagated);
            None
        }
        (Some(d), _) => Some(d),
    };
    (card, device)
}

fn plan_ec2_net_utils(input: &PlanInput<'_>, cfg: &PlanConfig) -> Result<Vec<InterfacePlan>> {
    let mut out = Vec::new();
    let held = held_addresses(input);
    let routers = routers(input);
    let local = kernel_held(input);
    // Only the operator's entries (`nics:`) read these.
    let (subnets, host_routers) = if cfg.nics.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        (nic_subnets(input), host_routers(input))
    };
    let mut links: Vec<&Link> = input.links.iter().collect();
    links.sort_by(|a, b| a.name.cmp(&b.name));
    for link in links {
        let v4 = lease_for(input, &link.name, Family::V4);
        let v6 = lease_for(input, &link.name, Family::V6);
        if v4.is_none() && v6.is_none() {
            continue;
        }
        let primary = input.metadata.primary_mac == Some(link.mac);
        let mut ip = new_interface(link, primary);
        ip.families = [v4.map(|_| Family::V4), v6.map(|_| Family::V6)]
            .into_iter()
            .flatten()
            .collect();
        if input.metadata.primary_mac.is_none() {
            ip.missing.push(Missing::PrimaryMac);
        }
        let Some(nic) = input.metadata.nic(link.mac) else {
            ip.missing.push(Missing::MacFolder);
            out.push(ip);
            continue;
        };
        let (card, device) = card_and_device(input.metadata, nic, primary, &mut ip.missing);
        let routed = (!primary || cfg.primary_rules)
            .then_some(card.zip(device))
            .flatten()
            .map(|(card, d)| -> Result<_> {
                let table = table_number(cfg.table_base, card, d)?;
                let priority = table_number(cfg.priority_base.unwrap_or(cfg.table_base), card, d)?;
                Ok((table, priority))
            })
            .transpose()?;
        ip.table = routed.map(|(t, _)| t);
        // The pods' addresses (SPEC §3.7): only the lease's own address stays a
        // rule source; no secondary IP or prefix becomes an address or a rule.
        let pods = cfg.kubernetes && primary;
        let pod_free;
        let nic = if pods {
            pod_free = without_pod_addresses(nic, v4, v6);
            &pod_free
        } else {
            nic
        };
        let no_addresses;
        let cfg = if pods {
            no_addresses = PlanConfig {
                secondary_addresses: false,
                ..cfg.clone()
            };
            &no_addresses
        } else {
            cfg
        };
        let bounds = nic_bounds(link, nic, v4, (&held, &routers, &local), &mut ip.refused);
        if let Some(lease) = v4 {
            plan_v4(&mut ip, link, nic, lease, routed, cfg, &bounds);
        }
        if let Some(lease) = v6 {
            plan_v6(&mut ip, link, nic, lease, routed, cfg, &bounds);
        }
        if !cfg.nics.is_empty() {
            let others = Others {
                subnets: &subnets,
                routers: &host_routers,
                me: link.mac,
            };
            operator_intent(&mut ip, link, nic, &cfg.nics, &bounds, &others);
        }
        sort_rules_and_addresses(&mut ip);
        out.push(ip);
    }
    refuse_shared_tables(&mut out, input.metadata);
    for ip in &mut out {
        if ip.primary && !cfg.primary_rules {
            let adds = cfg.secondary_addresses && !cfg.kubernetes;
            ip.missing.retain(|m| m.concerns_unrouted_primary(adds));
        }
        ip.refused.sort();
        ip.refused.dedup();
    }
    Ok(out)
}

/// Sorts the plan's addresses and rules as their `Ord` does, without repeats,
/// comparing prefixes with [`gate::net_order`]: `IpNet`'s own comparison (a
/// `memcmp` per address) took a seventh of the worst-case plan. Two elements
/// equal in these orders are equal in every field, so an unstable sort does.
fn sort_rules_and_addresses(ip: &mut InterfacePlan) {
    sorted_without_repeats(&mut ip.rules, |a, b| {
        gate::net_order(&a.from, &b.from)
            .then_with(|| (a.table, a.priority).cmp(&(b.table, b.priority)))
            .then_with(|| a.to.cmp(&b.to))
    });
    sorted_without_repeats(&mut ip.addresses, |a, b| {
        gate::net_order(&a.addr, &b.addr).then_with(|| a.dev.cmp(&b.dev))
    });
}

/// Sorts `list` by `order` and drops repeats, where two elements `order` finds
/// equal are equal. A list already strictly in order (a NIC's sources as the
/// metadata lists them, mostly) is left as it is after one pass of comparisons,
/// with no sort and no pass of equality tests for repeats.
fn sorted_without_repeats<T: PartialEq>(
    list: &mut Vec<T>,
    order: impl Fn(&T, &T) -> std::cmp::Ordering,
) {
    if list.is_sorted_by(|a, b| order(a, b).is_lt()) {
        return;
    }
    list.sort_unstable_by(&order);
    list.dedup();
}

/// The NIC as a Kubernetes node's CNI leaves it to the host: its secondary IPs and
/// prefixes belong to pods. Of `local-ipv4s` and `ipv6s` only the leased address
/// stays (else the first entry, the ENI's primary IP, which no pod gets), so the
/// planner still sees whether IMDS lists the lease.
fn without_pod_addresses(nic: &NicMetadata, v4: Option<&Lease>, v6: Option<&Lease>) -> NicMetadata {
    fn keep<T: Copy + PartialEq>(list: &mut Vec<T>, leased: Option<T>) {
        match leased.filter(|l| list.contains(l)) {
            Some(l) => *list = vec![l],
            None => list.truncate(1),
        }
    }
    let mut n = nic.clone();
    n.ipv4_prefixes.clear();
    n.ipv6_prefixes.clear();
    keep(
        &mut n.local_ipv4s,
        v4.and_then(|l| match l.address {
            IpAddr::V4(a) => Some(a),
            IpAddr::V6(_) => None,
        }),
    );
    keep(
        &mut n.ipv6s,
        v6.and_then(|l| match l.address {
            IpAddr::V6(a) => Some(a),
            IpAddr::V4(_) => None,
        }),
    );
    n
}

/// Refuses the family when the gate refuses its lease's address (another NIC's,
/// outside the subnet): the family is then not covered, so whatever was applied
/// for it before stays. `true` when the lease passed.
fn gate_lease(ip: &mut InterfacePlan, lease: &Lease, bounds: &Bounds<'_>) -> bool {
    match bounds.source(IpNet::from(lease.address)) {
        Ok(()) => true,
        Err(r) => {
            ip.refused.push(Refused::new("lease", lease.address, r));
            ip.families.retain(|f| *f != lease.family);
            false
        }
    }
}

/// A lease no DHCP client holds ([`Reason::Metadata`]: the cloud serves the NIC
/// no DHCP, OCI's secondary VNICs): its address, with the lease's prefix length,
/// is one the plan adds to the link, gated like every address and owned like a
/// secondary one. It is added `noprefixroute` ([`Address::no_prefix_route`]):
/// its subnet's route is the one the plan puts into the NIC's own table, never
/// the kernel's in main (a `10.0.0.0/8` subnet there would take every other
/// 10.x host's traffic out of this NIC).
fn metadata_address(ip: &mut InterfacePlan, link: &Link, lease: &Lease, bounds: &Bounds<'_>) {
    if lease.reason != Reason::Metadata {
        return;
    }
    if let Some(net) = lease.interface_net() {
        let addrs = gated_addresses(bounds, "lease", [net], &link.name, &mut ip.refused);
        ip.addresses.extend(addrs);
    }
}

fn plan_v4(
    ip: &mut InterfacePlan,
    link: &Link,
    nic: &NicMetadata,
    lease: &Lease,
    routed: Option<(u32, u32)>,
    cfg: &PlanConfig,
    bounds: &Bounds<'_>,
) {
    let IpAddr::V4(leased) = lease.address else {
        return;
    };
    let v4 = NicSources::new(&nic.local_ipv4s, leased, &nic.ipv4_prefixes);
    if !lease_checks(ip, (link, lease, bounds), &v4, &nic.subnet_ipv4_cidr_blocks) {
        return;
    }
    // The first subnet that passed the gate; without one, what the lease alone
    // proves (the leased address and its netmask), when that passed.
    let subnet = bounds.subnets.iter().find_map(|s| match s {
        IpNet::V4(n) => Some(*n),
        IpNet::V6(_) => None,
    });
    if let Some((table, priority)) = routed {
        // A lease without a router: the metadata's default gateway, when it
        // names one on the NIC's subnet (`OpenStack`'s `0.0.0.0/0` route).
        let metadata_gateway = metadata_default(nic, Family::V4, bounds);
        match lease_router(ip, lease, bounds).or(metadata_gateway) {
            Some(gateway) => {
                // A lease whose own network does not hold its gateway (GCE's /32
                // leases, whose gateway the option-121 route reaches): the table
                // gets the gateway's link route, so its default route works
                // whatever the main table holds (the kernel checks a gateway
                // within the route's table first, and the diff adds on-link
                // routes before the routes through them).
                if let IpAddr::V4(gw) = gateway
                    && !lease.interface_net().is_some_and(|n| n.contains(&gateway))
                    && gate::check_ip(gateway).is_ok()
                {
                    ip.routes.push(Route {
                        to: IpNet::V4(Ipv4Net::from(gw)),
                        via: None,
                        dev: link.name.clone(),
                        scope: Some(Scope::Link),
                        src: None,
                        table,
                    });
                }
                ip.routes.push(Route {
                    to: IpNet::V4(Ipv4Net::default()),
                    via: Some(gateway),
                    dev: link.name.clone(),
                    scope: None,
                    src: None,
                    table,
                });
            }
            None => ip.missing.push(Missing::Router { family: Family::V4 }),
        }
        if let Some(subnet) = subnet {
            ip.routes.push(Route {
                to: IpNet::V4(subnet),
                via: None,
                dev: link.name.clone(),
                scope: Some(Scope::Link),
                src: Some(lease.address),
                table,
            });
        }
        metadata_routes(ip, link, nic, Family::V4, table, bounds);
        source_rules(ip, bounds, &v4, (table, priority));
    }
    if cfg.secondary_addresses {
        secondary_addresses(ip, bounds, &v4, &link.name);
    }
}

fn plan_v6(
    ip: &mut InterfacePlan,
    link: &Link,
    nic: &NicMetadata,
    lease: &Lease,
    routed: Option<(u32, u32)>,
    cfg: &PlanConfig,
    bounds: &Bounds<'_>,
) {
    let IpAddr::V6(leased) = lease.address else {
        return;
    };
    let v6 = NicSources::new(&nic.ipv6s, leased, &nic.ipv6_prefixes);
    if !lease_checks(ip, (link, lease, bounds), &v6, &nic.subnet_ipv6_cidr_blocks) {
        return;
    }
    if let Some((table, priority)) = routed {
        // DHCPv6 names no router: the default goes through the router the cloud
        // publishes (a metadata lease's, OCI's `ipv6VirtualRouterIp`; a `::/0`
        // route, GCE's `gatewayIpv6`, Alibaba's `ipv6-gateway`, `OpenStack`'s
        // network route), else the one the kernel learned from router
        // advertisements, once it has learned one.
        if let Some(router) =
            published_router_v6(ip, nic, lease, bounds).or_else(|| link.ipv6_router.map(IpAddr::V6))
        {
            ip.routes.push(Route {
                to: IpNet::V6(Ipv6Net::default()),
                via: Some(router),
                dev: link.name.clone(),
                scope: None,
                src: None,
                table,
            });
        }
        ip.routes.extend(
            bounds
                .subnets
                .iter()
                .filter(|s| matches!(s, IpNet::V6(_)))
                .map(|s| Route {
                    to: *s,
                    via: None,
                    dev: link.name.clone(),
                    scope: None,
                    src: None,
                    table,
                }),
        );
        metadata_routes(ip, link, nic, Family::V6, table, bounds);
        // Without a route in the table the rules would only fall through to main:
        // leave them out until IMDS names the subnet or an RA names a router.
        if ip
            .routes
            .iter()
            .any(|r| r.table == table && r.family() == Family::V6)
        {
            source_rules(ip, bounds, &v6, (table, priority));
        }
    }
    if cfg.secondary_addresses {
        secondary_addresses(ip, bounds, &v6, &link.name);
    }
}

/// Whether `via` may be a next hop of the NIC: an address the gate lets any NIC
/// name ([`gate::check_ip`]), no address of this host (one the NIC lists or
/// holds, one another link holds: a gateway is never local), inside one of the
/// NIC's subnets that passed the gate.
fn next_hop(via: IpAddr, bounds: &Bounds<'_>) -> std::result::Result<(), Refusal> {
    gate::check_ip(via)?;
    not_this_host(via, bounds)?;
    let subnets: Vec<IpNet> = bounds
        .subnets
        .iter()
        .filter(|s| Family::of(&s.addr()) == Family::of(&via))
        .copied()
        .collect();
    if subnets.iter().any(|s| s.contains(&via)) {
        Ok(())
    } else if subnets.is_empty() {
        Err(Refusal::NoSubnet)
    } else {
        Err(Refusal::OutsideSubnet { subnets })
    }
}

/// The lease's first router. A lease no DHCP server gave ([`Reason::Metadata`]:
/// OCI's `virtualRouterIp`, `OpenStack`'s static network's `0.0.0.0/0` route) is
/// the metadata's word, so its router passes [`next_hop`] like every route the
/// metadata names (on the NIC's subnet, not an address of this host); a DHCP
/// server's router only has to be no address of this host (GCE's lies outside
/// the /32 lease, as the client took it). A refused one is listed under
/// `router`.
fn lease_router(ip: &mut InterfacePlan, lease: &Lease, bounds: &Bounds<'_>) -> Option<IpAddr> {
    let router = *lease.routers.first()?;
    let checked = if lease.reason == Reason::Metadata {
        next_hop(router, bounds)
    } else {
        local_next_hop(router, bounds)
    };
    match checked {
        Ok(()) => Some(router),
        Err(r) => {
            ip.refused.push(Refused::new("router", router, r));
            None
        }
    }
}

/// Refuses a next hop that is this host's: one a kernel link holds
/// ([`local_next_hop`]), one the NIC lists or another NIC holds.
fn not_this_host(via: IpAddr, bounds: &Bounds<'_>) -> std::result::Result<(), Refusal> {
    local_next_hop(via, bounds)?;
    if bounds.held.holds(via, bounds.me) {
        return Err(Refusal::LocalNextHop {
            owner: bounds.me.to_owned(),
        });
    }
    Ok(())
}

/// Refuses a next hop a kernel link holds (`ip address`): a gateway is never
/// this host's own address.
fn local_next_hop(via: IpAddr, bounds: &Bounds<'_>) -> std::result::Result<(), Refusal> {
    match bounds.local.inside(&IpNet::from(via), "") {
        Some(h) => Err(Refusal::LocalNextHop { owner: h.owner }),
        None => Ok(()),
    }
}

/// The metadata's default gateway of `family` for the NIC (a [`crate::model::NicRoute`] to
/// `/0`, `OpenStack`'s `network_data.json`), the first whose next hop passes
/// [`next_hop`].
fn metadata_default(nic: &NicMetadata, family: Family, bounds: &Bounds<'_>) -> Option<IpAddr> {
    nic.routes
        .iter()
        .filter(|r| r.to.prefix_len() == 0 && Family::of(&r.to.addr()) == family)
        .map(|r| r.via)
        .find(|via| Family::of(via) == family && published_next_hop(*via, bounds).is_ok())
}

/// The IPv6 router the cloud publishes for the NIC: the router of a lease the
/// metadata stands for ([`Reason::Metadata`]: OCI's `ipv6VirtualRouterIp`),
/// then each `::/0` route the metadata names (GCE's `gatewayIpv6`, Alibaba's
/// `ipv6-gateway`, `OpenStack`'s network route); the first that passes
/// [`published_next_hop`]. Each refused one is listed under `router`, so that
/// `status` and `explain` say why the table has no published default. A
/// DHCPv6 lease names none.
fn published_router_v6(
    ip: &mut InterfacePlan,
    nic: &NicMetadata,
    lease: &Lease,
    bounds: &Bounds<'_>,
) -> Option<IpAddr> {
    let leased = lease
        .routers
        .first()
        .filter(|_| lease.reason == Reason::Metadata)
        .copied();
    let routes = nic
        .routes
        .iter()
        .filter(|r| r.to.prefix_len() == 0 && matches!(r.to, IpNet::V6(_)))
        .map(|r| r.via);
    let mut tried: Vec<IpAddr> = Vec::new();
    for via in leased.into_iter().chain(routes) {
        if Family::of(&via) != Family::V6 || tried.contains(&via) {
            continue;
        }
        tried.push(via);
        match published_next_hop(via, bounds) {
            Ok(()) => return Some(via),
            Err(r) => ip.refused.push(Refused::new("router", via, r)),
        }
    }
    None
}

/// Whether a router the metadata publishes may be a next hop of the NIC. An
/// IPv6 link-local one (`fe80::/10`: OCI's `ipv6VirtualRouterIp`, GCE's
/// `gatewayIpv6`) is on the NIC's own link by definition, as the router the
/// kernel learns from advertisements is: it only must not be this host's
/// address ([`not_this_host`]). Every other one passes [`next_hop`].
fn published_next_hop(via: IpAddr, bounds: &Bounds<'_>) -> std::result::Result<(), Refusal> {
    match via {
        IpAddr::V6(a) if a.is_unicast_link_local() => not_this_host(via, bounds),
        _ => next_hop(via, bounds),
    }
}

/// The metadata's routes of `family` for the NIC but its default gateway
/// (`OpenStack`'s `network_data.json` `routes`), into the NIC's own table, never
/// the main one: each whose next hop passes [`next_hop`] and whose destination
/// passes [`gate::check_net`] (no special range, no metadata service); the rest
/// are listed in `refused` under `routes`. A destination the table already
/// routes (the subnet) is not repeated.
fn metadata_routes(
    ip: &mut InterfacePlan,
    link: &Link,
    nic: &NicMetadata,
    family: Family,
    table: u32,
    bounds: &Bounds<'_>,
) {
    for r in nic
        .routes
        .iter()
        .filter(|r| r.to.prefix_len() != 0 && Family::of(&r.to.addr()) == family)
    {
        let to = r.to.trunc();
        let checked = if Family::of(&r.via) == family {
            gate::check_net(to).and_then(|()| next_hop(r.via, bounds))
        } else {
            Err(Refusal::OutsideSubnet {
                subnets: bounds.subnets.clone(),
            })
        };
        if let Err(reason) = checked {
            ip.refused.push(Refused::new(
                "routes",
                format!("{to} via {}", r.via),
                reason,
            ));
            continue;
        }
        if ip
            .routes
            .iter()
            .any(|have| have.table == table && have.to == to)
        {
            continue;
        }
        ip.routes.push(Route {
            to,
            via: Some(r.via),
            dev: link.name.clone(),
            scope: None,
            src: None,
            table,
        });
    }
}

/// What an operator's destination must keep off ([`destination`]): the other
/// NICs' subnets and the host's default routers.
struct Others<'a> {
    /// Every NIC's subnets, each with its NIC's MAC and name ([`nic_subnets`]).
    subnets: &'a [(MacAddr, String, IpNet)],
    /// The host's default routers, each with its NIC's MAC when known
    /// ([`host_routers`]).
    routers: &'a [(Option<MacAddr>, gate::Router)],
    /// The NIC planned.
    me: MacAddr,
}

/// Every NIC's subnets, each with its MAC and its name (the link's, else the
/// MAC): the metadata's subnet blocks and each lease's own network.
fn nic_subnets(input: &PlanInput<'_>) -> Vec<(MacAddr, String, IpNet)> {
    let name_of = |mac: MacAddr| {
        input
            .links
            .iter()
            .find(|l| l.mac == mac)
            .map_or_else(|| format!("the NIC {mac}"), |l| l.name.to_string())
    };
    let mut out = Vec::new();
    for n in &input.metadata.nics {
        let name = name_of(n.mac);
        out.extend(
            n.subnet_ipv4_cidr_blocks
                .iter()
                .map(|s| (n.mac, name.clone(), IpNet::V4(s.trunc()))),
        );
        out.extend(
            n.subnet_ipv6_cidr_blocks
                .iter()
                .map(|s| (n.mac, name.clone(), IpNet::V6(s.trunc()))),
        );
    }
    for l in input.leases {
        let (Some(link), Some(net)) = (
            input.links.iter().find(|k| k.name == l.interface),
            l.lease.interface_net(),
        ) else {
            continue;
        };
        out.push((link.mac, link.name.to_string(), net.trunc()));
    }
    out
}

/// The host's default routers: the main table's next hops (read by the
/// shell), and the primary NIC's lease routers (what `leasehook plan`, which
/// reads no kernel, knows of the host's default).
fn host_routers(input: &PlanInput<'_>) -> Vec<(Option<MacAddr>, gate::Router)> {
    let mut out: Vec<(Option<MacAddr>, gate::Router)> =
        input.next_hops.iter().map(|r| (None, r.clone())).collect();
    let primary = input.metadata.primary_mac;
    for l in input.leases {
        let Some(link) = input.links.iter().find(|k| k.name == l.interface) else {
            continue;
        };
        if Some(link.mac) != primary {
            continue;
        }
        out.extend(l.lease.routers.iter().map(|r| {
            (
                Some(link.mac),
                gate::Router {
                    address: *r,
                    whose: format!("{}'s lease router", l.interface),
                },
            )
        }));
    }
    out
}

/// Whether `to` may be the destination of an operator's route or rule on the
/// NIC `bounds` are for (SPEC §3.9): no `/0`, no range holding the host's
/// default router (one outside the NIC's own subnets), none overlapping
/// another NIC's subnet — unless `allow_default` — and never a special range
/// or a metadata service's address ([`gate::check_net`]), which
/// `allow_default` does not lift.
fn destination(
    to: IpNet,
    allow_default: bool,
    bounds: &Bounds<'_>,
    others: &Others<'_>,
) -> std::result::Result<(), Refusal> {
    if to.prefix_len() == 0 {
        return if allow_default {
            Ok(())
        } else {
            Err(Refusal::Everything)
        };
    }
    gate::check_net(to)?;
    if allow_default {
        return Ok(());
    }
    let mine = |a: &IpAddr| bounds.subnets.iter().any(|s| s.contains(a));
    if let Some((_, r)) = others
        .routers
        .iter()
        .find(|(mac, r)| *mac != Some(others.me) && to.contains(&r.address) && !mine(&r.address))
    {
        return Err(Refusal::HostDefault {
            address: r.address,
            whose: r.whose.clone(),
        });
    }
    if let Some((_, owner, subnet)) = others
        .subnets
        .iter()
        .find(|(mac, _, n)| *mac != others.me && (n.contains(&to) || to.contains(n)))
    {
        return Err(Refusal::OtherSubnet {
            owner: owner.clone(),
            subnet: *subnet,
        });
    }
    Ok(())
}

/// The operator's entries (`nics:`, SPEC §3.9) that name the NIC — by its
/// link's name or MAC, or by its metadata as `unmanaged` decides — for each
/// family the plan covers: their routes into the NIC's table (`via: gateway`
/// is the router of the table's default route; an address must pass
/// [`next_hop`]), their rules `to PREFIX lookup <table>`, and the first
/// `prefix_addresses` addresses of each delegated prefix as host addresses.
/// Every destination passes [`destination`] and every address the gate's
/// [`Bounds::address`]; what is refused is listed under `nics[i]....`.
fn operator_intent(
    ip: &mut InterfacePlan,
    link: &Link,
    nic: &NicMetadata,
    entries: &[crate::config::NicEntry],
    bounds: &Bounds<'_>,
    others: &Others<'_>,
) {
    let covered = |ip: &InterfacePlan, net: &IpNet| ip.families.contains(&Family::of(&net.addr()));
    for (i, e) in entries.iter().enumerate() {
        if !(e.matches.matches(&link.name, Some(link.mac))
            || e.matches.matches_nic(nic) == Some(true))
        {
            continue;
        }
        for (j, r) in e.routes.iter().enumerate() {
            if !covered(ip, &r.to) {
                continue;
            }
            let key = format!("nics[{i}].routes[{j}]");
            let value = format!("{} via {}", r.to, r.via);
            let Some(table) = ip.table else {
                ip.refused.push(Refused::new(&key, value, Refusal::NoTable));
                continue;
            };
            let family = Family::of(&r.to.addr());
            let via = match r.via {
                crate::config::Via::Gateway => ip
                    .routes
                    .iter()
                    .find(|d| d.table == table && d.to.prefix_len() == 0 && d.family() == family)
                    .and_then(|d| d.via)
                    .ok_or(Refusal::NoGateway),
                crate::config::Via::Address(a) => next_hop(a, bounds).map(|()| a),
            };
            let checked = destination(r.to, e.allow_default, bounds, others).and(via);
            let via = match checked {
                Ok(via) => via,
                Err(reason) => {
                    ip.refused.push(Refused::new(&key, value, reason));
                    continue;
                }
            };
            // The plan's own route to the same destination (the default, the
            // subnet) stays; the kernel holds one route per destination and
            // table.
            if ip
                .routes
                .iter()
                .any(|have| have.table == table && have.to == r.to)
            {
                continue;
            }
            ip.routes.push(Route {
                to: r.to,
                via: Some(via),
                dev: link.name.clone(),
                scope: None,
                src: None,
                table,
            });
        }
        for (j, r) in e.rules.iter().enumerate() {
            if !covered(ip, &r.to) {
                continue;
            }
            let key = format!("nics[{i}].rules[{j}]");
            let value = format!("to {} priority {}", r.to, r.priority);
            let Some(table) = ip.table else {
                ip.refused.push(Refused::new(&key, value, Refusal::NoTable));
                continue;
            };
            if let Err(reason) = destination(r.to, e.allow_default, bounds, others) {
                ip.refused.push(Refused::new(&key, value, reason));
                continue;
            }
            let from = match r.to {
                IpNet::V4(_) => IpNet::V4(Ipv4Net::default()),
                IpNet::V6(_) => IpNet::V6(Ipv6Net::default()),
            };
            ip.rules.push(Rule {
                from,
                to: Some(r.to),
                table,
                priority: Some(r.priority),
            });
        }
        if e.prefix_addresses > 0 {
            let n = usize::from(e.prefix_addresses);
            let key = format!("nics[{i}].prefix_addresses");
            let v4 = nic.ipv4_prefixes.iter().map(|p| IpNet::V4(*p));
            let v6 = nic.ipv6_prefixes.iter().map(|p| IpNet::V6(*p));
            let hosts: Vec<IpNet> = v4
                .chain(v6)
                .filter(|p| covered(ip, p))
                .flat_map(|p| first_hosts(p, n))
                .collect();
            let addrs = gated_addresses(bounds, &key, hosts, &link.name, &mut ip.refused);
            ip.addresses.extend(addrs);
        }
    }
}

/// The first `n` addresses of `prefix` (its network address first: a cloud's
/// delegated prefix is routed to the NIC whole), as host prefixes.
fn first_hosts(prefix: IpNet, n: usize) -> impl Iterator<Item = IpNet> {
    let range = match prefix.trunc() {
        IpNet::V4(p) => {
            ipnet::IpAddrRange::from(ipnet::Ipv4AddrRange::new(p.network(), p.broadcast()))
        }
        IpNet::V6(p) => {
            ipnet::IpAddrRange::from(ipnet::Ipv6AddrRange::new(p.network(), p.broadcast()))
        }
    };
    range.take(n).map(IpNet::from)
}

/// cloud-init's NIC order: NICs present in both the OS and the metadata, sorted by
/// (network-card, device-number, MAC) with absent keys last.
pub fn cloud_init_order<'a>(input: &PlanInput<'a>) -> Vec<(&'a Link, &'a NicMetadata)> {
    let mut present: Vec<_> = input
        .links
        .iter()
        .filter_map(|l| input.metadata.nic(l.mac).map(|n| (l, n)))
        .collect();
    present.sort_by_key(|(l, n)| {
        (
            n.network_card.map_or(u64::MAX, u64::from),
            n.device_number.map_or(u64::MAX, u64::from),
            l.mac.to_string(),
        )
    });
    present
}

fn plan_cloud_init(input: &PlanInput<'_>) -> Vec<InterfacePlan> {
    let order = cloud_init_order(input);
    let held = held_addresses(input);
    let routers = routers(input);
    let local = kernel_held(input);
    let single = order.len() == 1;
    let mut out = Vec::with_capacity(order.len());
    for (idx, (link, nic)) in (0u32..).zip(order) {
        let mut ip = new_interface(link, idx == 0);
        let table = 100 + idx;
        ip.metric = (!single).then_some(100 * (idx + 1));
        ip.families.push(Family::V4);
        if !nic.ipv6s.is_empty() {
            ip.families.push(Family::V6);
        }
        // cloud-init reads the lease only for its router: the subnets are the
        // metadata's alone.
        let bounds = nic_bounds(link, nic, None, (&held, &routers, &local), &mut ip.refused);
        if !single && idx != 0 && nic.device_number.is_some() {
            cloud_init_pbr(&mut ip, input, link, nic, table, &bounds);
        }
        cloud_init_addresses(&mut ip, link, nic, &bounds);
        ip.refused.sort();
        ip.refused.dedup();
        out.push(ip);
    }
    out
}

fn cloud_init_pbr(
    ip: &mut InterfacePlan,
    input: &PlanInput<'_>,
    link: &Link,
    nic: &NicMetadata,
    table: u32,
    bounds: &Bounds<'_>,
) {
    let route = |to: IpNet, via: Option<IpAddr>| Route {
        to,
        via,
        dev: link.name.clone(),
        scope: None,
        src: None,
        table,
    };
    // The subnets the gate let through, as the metadata wrote them.
    let subnets = |v4: bool| -> Vec<IpNet> {
        let listed: Vec<IpNet> = if v4 {
            nic.subnet_ipv4_cidr_blocks
                .iter()
                .map(|s| IpNet::V4(*s))
                .collect()
        } else {
            nic.subnet_ipv6_cidr_blocks
                .iter()
                .map(|s| IpNet::V6(*s))
                .collect()
        };
        listed
            .into_iter()
            .filter(|s| gate::check_subnet(*s).is_ok())
            .collect()
    };
    let (subnets4, subnets6) = (subnets(true), subnets(false));
    if subnets4.is_empty() || nic.local_ipv4s.is_empty() {
        // cloud-init skips the whole family, default route included.
        if nic.subnet_ipv4_cidr_blocks.is_empty() {
            ip.missing.push(Missing::Subnet { family: Family::V4 });
        }
        if nic.local_ipv4s.is_empty() {
            ip.missing.push(Missing::Addresses { family: Family::V4 });
        }
    } else {
        ip.table = Some(table);
        // A router this host holds is refused, as in the default profile; a
        // lease without a router (Azure's secondary NICs): the metadata's
        // default gateway, as in the default profile.
        let router = match lease_for(input, &link.name, Family::V4) {
            Some(lease) if !lease.routers.is_empty() => lease_router(ip, lease, bounds),
            _ => metadata_default(nic, Family::V4, bounds),
        };
        match router {
            Some(router) => ip
                .routes
                .push(route(IpNet::V4(Ipv4Net::default()), Some(router))),
            None => ip.missing.push(Missing::Router { family: Family::V4 }),
        }
        ip.routes.extend(subnets4.iter().map(|s| route(*s, None)));
        let rules = gated_rules(
            bounds,
            nic.local_ipv4s
                .iter()
                .map(|a| ("local-ipv4s", IpNet::V4(Ipv4Net::from(*a)))),
            table,
            None,
            &mut ip.refused,
        );
        ip.rules.extend(rules);
    }
    if !nic.ipv6s.is_empty() {
        if subnets6.is_empty() {
            ip.missing.push(Missing::Subnet { family: Family::V6 });
        } else {
            ip.table = Some(table);
            ip.routes.extend(subnets6.iter().map(|s| route(*s, None)));
            let rules = gated_rules(
                bounds,
                nic.ipv6s
                    .iter()
                    .map(|a| ("ipv6s", IpNet::V6(Ipv6Net::from(*a)))),
                table,
                None,
                &mut ip.refused,
            );
            ip.rules.extend(rules);
        }
    }
}

/// cloud-init's secondary addresses: `local-ipv4s[1:]` with the subnet's prefix
/// length (24 when unknown), `ipv6s[1:]` as /128, sorted as strings.
fn cloud_init_addresses(
    ip: &mut InterfacePlan,
    link: &Link,
    nic: &NicMetadata,
    bounds: &Bounds<'_>,
) {
    let v4_len = nic
        .subnet_ipv4_cidr_blocks
        .first()
        .map_or(24, Ipv4Net::prefix_len);
    let v4 = nic
        .local_ipv4s
        .iter()
        .skip(1)
        .filter_map(|a| Ipv4Net::new(*a, v4_len).ok().map(IpNet::V4));
    let v6 = nic
        .ipv6s
        .iter()
        .skip(1)
        .map(|a| IpNet::V6(Ipv6Net::from(*a)));
    let mut addrs: Vec<IpNet> = v4.chain(v6).collect();
    // Each address's text once, not at every comparison (the sort is as stable).
    addrs.sort_by_cached_key(ToString::to_string);
    let mut refused = Vec::new();
    ip.addresses = addrs
        .into_iter()
        .filter_map(|addr| {
            let key = if addr.addr().is_ipv4() {
                "local-ipv4s"
            } else {
                "ipv6s"
            };
            gated_addresses(bounds, key, [addr], &link.name, &mut refused).pop()
        })
        .collect();
    ip.refused.extend(refused);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ordered list is kept as it is; any other is sorted and loses its
    /// repeats (a leased address listed again, sources out of order).
    #[test]
    fn sorted_without_repeats_sorts_unless_in_order() {
        for (list, want) in [
            (vec![1_u32, 2, 5, 9], vec![1, 2, 5, 9]),
            (vec![5, 1, 9, 2], vec![1, 2, 5, 9]),
            (vec![1, 2, 2, 5], vec![1, 2, 5]),
            (vec![2, 1, 9, 2, 1], vec![1, 2, 9]),
            (vec![], vec![]),
        ] {
            let mut got = list.clone();
            sorted_without_repeats(&mut got, Ord::cmp);
            assert_eq!(got, want, "{list:?}");
        }
    }
}

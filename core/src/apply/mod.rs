// SPDX-License-Identifier: Apache-2.0
//! Applying a plan to the kernel: the [`Applier`] seam and the logic around it.
//!
//! The logic here is the same for every applier: validate the whole plan against the
//! kernel's links before the first write, observe what leasehook owns, scope that to
//! the interfaces and families the plan covers, diff, write in a safe order, and roll
//! back what this run added if a write fails. Teardown is best effort: it goes through
//! every object and reports every failure.
//!
//! Two appliers implement the seam: [`netlink::NetlinkApplier`] (performs IO: a
//! plain synchronous netlink socket, netlink-packet-route's messages) and
//! [`record::RecordingApplier`] (an in-memory kernel for unit tests).

pub mod digest;
pub mod links;
pub mod monitor;
pub mod netlink;
pub mod record;
pub mod state;

use std::collections::{BTreeMap, BTreeSet};

use crate::diff::{Op, State, diff_states};
use crate::error::{Error, NetlinkCause, ObjectError, Result};
use crate::model::{Family, IfName, MacAddr, Plan};
use state::InterfaceState;

/// The protocol number leasehook puts on every route (`rtm_protocol`), rule
/// (`FRA_PROTOCOL`) and address (`IFA_PROTO`) it adds; `ip` shows it as
/// `proto 176` (or `proto leasehook` with the shipped `rt_protos.d` entry).
pub const PROTOCOL: u8 = 176;

/// A link as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KernelLink {
    /// The interface index.
    pub index: u32,
    /// The interface name.
    pub name: IfName,
    /// The MAC by which leasehook may match this link to a NIC of the metadata:
    /// `Some` only for a NIC ([`nic_mac`]); `lo`, a tunnel, another link's port or
    /// a link with an all-zero, multicast or broadcast address has none.
    pub mac: Option<MacAddr>,
}

/// What the kernel reports of a link that decides whether it is a NIC
/// ([`nic_mac`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkFacts<'a> {
    /// The link type is Ethernet (`ARPHRD_ETHER`; `lo` is `ARPHRD_LOOPBACK`,
    /// tunnels and `WireGuard` have others).
    pub ethernet: bool,
    /// `IFF_LOOPBACK`.
    pub loopback: bool,
    /// A port of another link (`IFLA_MASTER`, `IFF_SLAVE`): a bond's or
    /// bridge's member, Azure's accelerated-networking VF.
    pub port: bool,
    /// `IFLA_ADDRESS`.
    pub address: Option<&'a [u8]>,
}

/// Pure: the MAC of a link leasehook may take for a NIC, or why it is none. A NIC
/// is an Ethernet link (`ARPHRD_ETHER`), not loopback, not another link's port,
/// whose address is a station's (six bytes, not all zeros, group bit clear:
/// [`MacAddr::nobodys`]). Its driver or kind is not asked: a virtio, ENA,
/// `hv_netvsc` or mlx5 NIC is one, and so is a veth, which is what a LXD or
/// Incus container's NIC is (and the test lab's); a bridge or bond that took its
/// NIC's MAC (its member is a port) is where that NIC's DHCP client runs. (The
/// udev rule's `DEVPATH` test, which starts a unit only for NICs with a device
/// behind them, would leave a container's veth out.)
pub fn nic_mac(link: &LinkFacts<'_>) -> std::result::Result<MacAddr, &'static str> {
    if link.loopback {
        return Err("loopback");
    }
    if !link.ethernet {
        return Err("not an Ethernet link");
    }
    if link.port {
        return Err("a port of another link");
    }
    let mac = link
        .address
        .and_then(|a| <[u8; 6]>::try_from(a).ok())
        .map(MacAddr::new)
        .ok_or("no 6-byte hardware address")?;
    match mac.nobodys() {
        Some(why) => Err(why),
        None => Ok(mac),
    }
}

/// Interface name → index, for the links that exist now.
pub type LinkIndex = BTreeMap<IfName, u32>;

/// The seam between the apply logic and the kernel.
pub trait Applier {
    /// The kernel's links (`ip link show`). Links whose names leasehook would refuse
    /// (see [`IfName`]) are left out: they are never managed.
    fn links(&mut self) -> Result<Vec<KernelLink>>;

    /// What the kernel holds, from one dump of each kind (see [`Observed`]).
    fn observe(
        &mut self,
        links: &LinkIndex,
        recorded: &BTreeSet<crate::model::Address>,
    ) -> Result<Observed>;

    /// Every address on `links` (`ip address show`), anyone's: what the address
    /// gate needs to know other links hold. The default takes them from
    /// [`Applier::observe`]; the netlink applier makes one address dump.
    fn link_addresses(&mut self, links: &LinkIndex) -> Result<Vec<crate::model::Address>> {
        let seen = self.observe(links, &BTreeSet::new())?;
        Ok(seen
            .owned
            .addresses
            .into_iter()
            .chain(seen.foreign_addresses)
            .collect())
    }

    /// The routes of the kernel's main table, both families, from one dump
    /// (`ip route show table main`): the host's next hops ([`next_hops`]) and
    /// the IPv6 router a link learned ([`ipv6_router`]). The default has none.
    fn main_routes(&mut self) -> Result<Vec<MainRoute>> {
        Ok(Vec::new())
    }

    /// What the kernel holds now, one dump of each kind ([`Snapshot`]): what the
    /// planner reads of the kernel and what [`apply_plan_seen`] observes, so an
    /// event reads each kind once. The default asks [`Applier::links`],
    /// [`Applier::observe`] and [`Applier::main_routes`].
    fn snapshot(&mut self) -> Result<Snapshot> {
        let links = self.links()?;
        self.snapshot_on(links)
    }

    /// [`Applier::snapshot`] on `links`, dumped moments before by the caller
    /// (the hook's event found its NIC in them): the other kinds only, so an
    /// event whose wait took no time dumps the links once.
    fn snapshot_on(&mut self, links: Vec<KernelLink>) -> Result<Snapshot> {
        let seen = self.observe(&index_of(&links), &BTreeSet::new())?;
        let main_routes = self.main_routes()?;
        let addresses = seen
            .owned
            .addresses
            .into_iter()
            .map(|a| (a, true))
            .chain(seen.foreign_addresses.into_iter().map(|a| (a, false)))
            .collect();
        Ok(Snapshot {
            links,
            owned: State {
                addresses: BTreeSet::new(),
                ..seen.owned
            },
            addresses,
            foreign_routes: seen.foreign_routes,
            main_routes,
        })
    }

    /// Performs one operation.
    fn execute(&mut self, op: &Op, links: &LinkIndex) -> Result<()>;

    /// Performs operations in order and returns each one's result; a failure does
    /// not stop the ones after it (the caller rolls back). The default runs them one
    /// by one; the netlink applier pipelines them.
    fn execute_many(&mut self, ops: &[Op], links: &LinkIndex) -> Vec<Result<()>> {
        ops.iter().map(|op| self.execute(op, links)).collect()
    }
}

/// A route of the kernel's main table, as the planner's inputs need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MainRoute {
    /// The destination.
    pub to: ipnet::IpNet,
    /// Its next hops (`via`, every path of a multipath route).
    pub via: Vec<std::net::IpAddr>,
    /// The link it leaves by.
    pub oif: Option<u32>,
}

/// The main table's next hops as routers no NIC may hold (SPEC §3.8), each
/// named after the link it is reached by.
pub fn next_hops(routes: &[MainRoute], links: &LinkIndex) -> Vec<crate::gate::Router> {
    routes
        .iter()
        .flat_map(|r| {
            let dev = r
                .oif
                .and_then(|i| links.iter().find(|(_, idx)| **idx == i))
                .map_or_else(String::new, |(n, _)| format!(" (dev {n})"));
            r.via.iter().map(move |v| crate::gate::Router {
                address: *v,
                whose: format!("a next hop of the main table{dev}"),
            })
        })
        .collect()
}

/// The IPv6 default router link `index` learned from router advertisements
/// (`ip -6 route show default dev IF` in the main table).
pub fn ipv6_router(routes: &[MainRoute], index: u32) -> Option<std::net::Ipv6Addr> {
    routes
        .iter()
        .filter(|r| matches!(r.to, ipnet::IpNet::V6(_)) && r.to.prefix_len() == 0)
        .filter(|r| r.oif == Some(index))
        .flat_map(|r| &r.via)
        .find_map(|v| match v {
            std::net::IpAddr::V6(a) => Some(*a),
            std::net::IpAddr::V4(_) => None,
        })
}

/// What the kernel held at one moment, from one dump of each kind (links,
/// addresses, routes of every table, rules; [`Applier::snapshot`]). The planner's
/// kernel inputs (what other links hold, the main table's next hops, a link's
/// IPv6 router) and the applier's observation ([`apply_plan_seen`]) both read
/// it: an event dumps each kind once, where each of them used to dump its own.
/// Valid until the next write: whoever writes in between takes a new one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The links (`ip link show`).
    pub links: Vec<KernelLink>,
    /// leasehook's rules and routes (see [`Observed::owned`]); no addresses,
    /// which are all in `addresses`.
    pub owned: State,
    /// Every address on `links`, and whether it carries [`PROTOCOL`].
    pub addresses: Vec<(crate::model::Address, bool)>,
    /// See [`Observed::foreign_routes`].
    pub foreign_routes: Vec<ForeignRoute>,
    /// The main table's routes, both families (see [`Applier::main_routes`]).
    pub main_routes: Vec<MainRoute>,
}

impl Snapshot {
    /// Interface name → index of its links.
    pub fn index(&self) -> LinkIndex {
        index_of(&self.links)
    }

    /// Every address on the links, anyone's (see [`Applier::link_addresses`]).
    pub fn link_addresses(&self) -> Vec<crate::model::Address> {
        self.addresses.iter().map(|(a, _)| a.clone()).collect()
    }

    /// What [`Applier::observe`] reports from this snapshot with `recorded`:
    /// an address is leasehook's when it carries [`PROTOCOL`] or is recorded.
    pub fn observed(&self, recorded: &BTreeSet<crate::model::Address>) -> Observed {
        let mut owned = self.owned.clone();
        let mut foreign_addresses = BTreeSet::new();
        for (a, ours) in &self.addresses {
            if *ours || recorded.contains(a) {
                owned.addresses.insert(a.clone());
            } else {
                foreign_addresses.insert(a.clone());
            }
        }
        Observed {
            owned,
            foreign_addresses,
            foreign_routes: self.foreign_routes.clone(),
        }
    }
}

/// What [`Applier::observe`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// What leasehook owns (`ip rule` / `ip route show table all` / `ip address`
    /// filtered to its protocol number): rules and routes carrying [`PROTOCOL`],
    /// addresses carrying it as `IFA_PROTO`, plus any address in `recorded` that is
    /// present on its link (kernels before 5.18 do not keep `IFA_PROTO`).
    pub owned: State,
    /// Addresses on the links that leasehook does not own: neither carrying
    /// [`PROTOCOL`] nor recorded (another tool's: netplan, cloud-init, an operator).
    pub foreign_addresses: BTreeSet<crate::model::Address>,
    /// Routes of other protocols in tables leasehook may use (not main, local,
    /// default): what would refuse leasehook's route of the same table and
    /// destination with `File exists`.
    pub foreign_routes: Vec<ForeignRoute>,
}

/// A route of another protocol in a table leasehook may use.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ForeignRoute {
    /// Its table.
    pub table: u32,
    /// Its destination.
    pub to: ipnet::IpNet,
    /// Its gateway.
    pub via: Option<std::net::IpAddr>,
    /// Its device, when it is a link leasehook can name.
    pub dev: Option<IfName>,
    /// Its protocol (`rtm_protocol`).
    pub protocol: u8,
}

impl std::fmt::Display for ForeignRoute {
    /// As `ip route show table all` prints it: `10.0.1.0/24 dev eth1 table 10001
    /// proto static`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.to)?;
        if let Some(v) = self.via {
            write!(f, " via {v}")?;
        }
        if let Some(d) = &self.dev {
            write!(f, " dev {d}")?;
        }
        write!(
            f,
            " table {} proto {}",
            self.table,
            crate::coexist::protocol_name(self.protocol)
        )
    }
}

/// The first route of the plan whose table and destination a route of another
/// protocol holds: the kernel would refuse leasehook's (`File exists`), so the
/// plan's interface is kept off before any write ([`Error::Conflict`]).
fn check_foreign(plan: &Plan, foreign: &[ForeignRoute]) -> Result<()> {
    for ip in &plan.interfaces {
        for r in &ip.routes {
            if let Some(f) = foreign.iter().find(|f| f.table == r.table && f.to == r.to) {
                return Err(Error::Conflict {
                    iface: ip.name.clone(),
                    object: f.to_string(),
                    table: f.table,
                    protocol: f.protocol,
                    owner: String::new(),
                    repeated: false,
                });
            }
        }
    }
    Ok(())
}

/// What one apply or teardown did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Report {
    /// The writes made, in order.
    pub ops: Vec<Op>,
    /// Failures a teardown went past (empty for apply, which stops at the first).
    pub errors: Vec<ObjectError>,
    /// Addresses the plan wants that another tool already put on the link: left
    /// to their owner, neither added nor recorded (so never removed by leasehook).
    pub foreign: BTreeSet<crate::model::Address>,
}

impl Report {
    /// How many netlink writes were made.
    pub fn writes(&self) -> usize {
        self.ops.len()
    }

    /// `ip` without the addresses left to another tool: what to record as applied.
    pub fn owned_part(&self, ip: &crate::model::InterfacePlan) -> crate::model::InterfacePlan {
        let mut ip = ip.clone();
        ip.addresses.retain(|a| !self.foreign.contains(a));
        ip
    }
}

fn index_of(links: &[KernelLink]) -> LinkIndex {
    links.iter().map(|l| (l.name.clone(), l.index)).collect()
}

/// Checks a plan against the kernel's links before anything is written: every
/// interface exists, no table is shared by two interfaces, every route and rule is
/// consistent within itself.
pub fn validate(plan: &Plan, links: &LinkIndex) -> Result<()> {
    let bad = |msg: String| Err(Error::InvalidPlan(msg));
    let mut table_owner: BTreeMap<u32, &IfName> = BTreeMap::new();
    let mut names = BTreeSet::new();
    for ip in &plan.interfaces {
        if !names.insert(&ip.name) {
            return bad(format!("interface {} appears twice", ip.name));
        }
        if !links.contains_key(&ip.name) {
            return bad(format!("no link named {}", ip.name));
        }
        let tables = ip
            .rules
            .iter()
            .map(|r| r.table)
            .chain(ip.routes.iter().map(|r| r.table));
        for t in tables {
            if crate::constants::RESERVED_TABLES.contains(&t) {
                return bad(format!("{}: table {t} is reserved", ip.name));
            }
            if let Some(other) = table_owner.insert(t, &ip.name).filter(|o| **o != ip.name) {
                return bad(format!("table {t} is used by both {other} and {}", ip.name));
            }
        }
        for r in &ip.routes {
            if r.dev != ip.name {
                return bad(format!("{}: route {r} names another device", ip.name));
            }
            let fam = r.family();
            if r.via.is_some_and(|v| Family::of(&v) != fam)
                || r.src.is_some_and(|s| Family::of(&s) != fam)
            {
                return bad(format!("{}: route {r} mixes address families", ip.name));
            }
            if !ip.families.contains(&fam) {
                return bad(format!(
                    "{}: route {r} is of a family the plan does not cover",
                    ip.name
                ));
            }
        }
        for r in &ip.rules {
            if !ip.families.contains(&r.family()) {
                return bad(format!(
                    "{}: rule {r} is of a family the plan does not cover",
                    ip.name
                ));
            }
            if r.priority == Some(0) {
                return bad(format!(
                    "{}: rule {r} has priority 0, which comes before the local table",
                    ip.name
                ));
            }
            if let Err(why) = gate_rule(r, &ip.routes) {
                return bad(format!("{}: rule {r}: source refused: {why}", ip.name));
            }
        }
        for a in &ip.addresses {
            if a.dev != ip.name || !ip.families.contains(&a.family()) {
                return bad(format!(
                    "{}: address {a} does not belong to this interface's families",
                    ip.name
                ));
            }
            if let Err(why) = crate::gate::check_ip(a.addr.addr()) {
                return bad(format!("{}: address {a} refused: {why}", ip.name));
            }
        }
    }
    Ok(())
}

/// The address gate for a rule of a plan that was not made here (`apply --plan`):
/// the source passes [`crate::gate::check_net`], and a prefix (not a host) lies
/// strictly inside a route of the rule's table that is on the link (no gateway),
/// the subnet the planner put there. A hand-edited `from all` or `/0`, or a prefix
/// wider than the NIC's subnet, is refused.
fn gate_rule(
    r: &crate::model::Rule,
    routes: &[crate::model::Route],
) -> std::result::Result<(), crate::gate::Refusal> {
    use crate::gate::{Bounds, Refusal};
    // An operator's rule (`nics[].rules`): `from all` to a destination that
    // passed the planner's gate; here it must at least be no special range or
    // metadata service (a `/0` only `allow_default` plans).
    if let Some(to) = r.to {
        if r.from.prefix_len() != 0 {
            crate::gate::check_net(r.from)?;
        }
        return if to.prefix_len() == 0 {
            Ok(())
        } else {
            crate::gate::check_net(to)
        };
    }
    crate::gate::check_net(r.from)?;
    if r.from.prefix_len() == r.from.max_prefix_len() {
        return Ok(());
    }
    let subnets: Vec<ipnet::IpNet> = routes
        .iter()
        .filter(|rt| rt.table == r.table && rt.via.is_none() && rt.to.prefix_len() > 0)
        .map(|rt| rt.to.trunc())
        .collect();
    if subnets.is_empty() {
        return Err(Refusal::NoSubnet);
    }
    Bounds {
        subnets,
        ..Bounds::default()
    }
    .source(r.from)
}

/// What the plan wants that another link holds (the kernel's addresses of links
/// outside the plan's interface): a rule whose source covers such an address, or
/// the address itself. Checked after observing, before the first write.
fn check_other_links<'a>(
    plan: &Plan,
    held: impl Iterator<Item = &'a crate::model::Address>,
) -> Result<()> {
    let held = crate::gate::HeldAddresses::of(held.map(|a| (a.dev.as_str(), a.addr.addr())));
    for ip in &plan.interfaces {
        let covered = |net: &ipnet::IpNet| {
            held.inside(net, ip.name.as_str())
                .map(|h| format!("{} holds {}", h.owner, h.address))
        };
        for r in ip.rules.iter().filter(|r| r.to.is_none()) {
            if let Some(who) = covered(&r.from) {
                return Err(Error::InvalidPlan(format!(
                    "{}: rule {r}: source refused: {who}: another NIC's address",
                    ip.name
                )));
            }
        }
        for a in &ip.addresses {
            if let Some(who) = covered(&ipnet::IpNet::from(a.addr.addr())) {
                return Err(Error::InvalidPlan(format!(
                    "{}: address {a} refused: {who}: another NIC's address",
                    ip.name
                )));
            }
        }
    }
    Ok(())
}

/// A table of the plan that another interface holds: one of its routes (routes
/// are bound to a device, so the kernel says whose a table is) or a state file
/// recorded for a NIC whose link is still there. Two NICs with one
/// `device-number` then touch neither's rules.
fn check_tables(
    plan: &Plan,
    owned: &State,
    recorded: &[InterfaceState],
    links: &[KernelLink],
) -> Result<()> {
    for ip in &plan.interfaces {
        let tables: BTreeSet<u32> = ip
            .table
            .into_iter()
            .chain(ip.rules.iter().map(|r| r.table))
            .chain(ip.routes.iter().map(|r| r.table))
            .collect();
        for t in tables {
            let mut others: BTreeSet<String> = owned
                .routes
                .iter()
                .filter(|r| r.table == t && r.dev != ip.name)
                .filter(|r| !plan.interfaces.iter().any(|o| o.name == r.dev))
                .map(|r| r.dev.to_string())
                .collect();
            others.extend(
                recorded
                    .iter()
                    .filter(|st| st.name != ip.name && st.mac != ip.mac)
                    .filter(|st| !plan.interfaces.iter().any(|o| o.name == st.name))
                    .filter(|st| st.tables().contains(&t))
                    .filter(|st| links.iter().any(|l| l.mac == Some(st.mac)))
                    .map(|st| st.name.to_string()),
            );
            if !others.is_empty() {
                return Err(Error::TableConflict {
                    iface: ip.name.clone(),
                    table: t,
                    others: others.into_iter().collect(),
                });
            }
        }
    }
    Ok(())
}

/// The interfaces and families a run may touch, and which interface each of our
/// tables belongs to (rules are not bound to a device, so their table says whose
/// they are).
#[derive(Debug, Default)]
struct Scope {
    families: BTreeMap<IfName, BTreeSet<Family>>,
    table_owner: BTreeMap<u32, IfName>,
}

impl Scope {
    fn filter(&self, observed: &State) -> State {
        let has =
            |dev: &IfName, fam: Family| self.families.get(dev).is_some_and(|f| f.contains(&fam));
        State {
            rules: observed
                .rules
                .iter()
                .filter(|r| {
                    self.table_owner
                        .get(&r.table)
                        .is_some_and(|dev| has(dev, r.family()))
                })
                .cloned()
                .collect(),
            routes: observed
                .routes
                .iter()
                .filter(|r| has(&r.dev, r.family()))
                .cloned()
                .collect(),
            addresses: observed
                .addresses
                .iter()
                .filter(|a| has(&a.dev, a.family()))
                .cloned()
                .collect(),
        }
    }
}

/// Rules planned without a priority get one from the kernel; compare those
/// without it so they are not re-added on every run.
fn normalize(want: &State, mut have: State) -> State {
    have.rules = have
        .rules
        .into_iter()
        .map(|mut r| {
            let mut bare = r.clone();
            bare.priority = None;
            if want.rules.contains(&bare) {
                r.priority = None;
            }
            r
        })
        .collect();
    have
}

fn inverse(op: &Op) -> Op {
    match op.clone() {
        Op::AddRule(r) => Op::DelRule(r),
        Op::DelRule(r) => Op::AddRule(r),
        Op::AddRoute(r) => Op::DelRoute(r),
        Op::DelRoute(r) => Op::AddRoute(r),
        Op::AddAddress(a) => Op::DelAddress(a),
        Op::DelAddress(a) => Op::AddAddress(a),
    }
}

/// Applies `plan`: validates it, observes what is owned for the plan's
/// interfaces and families, and writes the difference. `recorded` is what earlier
/// runs recorded, every interface's (for rule ownership by table, the address
/// fallback, and a table another NIC holds: [`Error::TableConflict`]). A second
/// run of the same plan writes nothing. If a write fails, every write of this run is
/// undone in reverse order and the error names the object.
pub fn apply_plan<A: Applier + ?Sized>(
    applier: &mut A,
    plan: &Plan,
    recorded: &[InterfaceState],
) -> Result<Report> {
    let kernel_links = applier.links()?;
    apply_observed(applier, plan, recorded, &kernel_links, None)
}

/// [`apply_plan`] on what `seen` read of the kernel (taken after the last write,
/// under the interfaces' locks): no dump of its own, so a hook event that
/// planned from `seen` reads the kernel once.
pub fn apply_plan_seen<A: Applier + ?Sized>(
    applier: &mut A,
    plan: &Plan,
    recorded: &[InterfaceState],
    seen: &Snapshot,
) -> Result<Report> {
    apply_observed(applier, plan, recorded, &seen.links, Some(seen))
}

fn apply_observed<A: Applier + ?Sized>(
    applier: &mut A,
    plan: &Plan,
    recorded: &[InterfaceState],
    kernel_links: &[KernelLink],
    seen: Option<&Snapshot>,
) -> Result<Report> {
    let links = index_of(kernel_links);
    validate(plan, &links)?;
    let mut scope = Scope::default();
    for ip in &plan.interfaces {
        scope
            .families
            .entry(ip.name.clone())
            .or_default()
            .extend(ip.families.iter().copied());
        let tables = ip
            .rules
            .iter()
            .map(|r| r.table)
            .chain(ip.routes.iter().map(|r| r.table));
        scope
            .table_owner
            .extend(tables.map(|t| (t, ip.name.clone())));
    }
    for st in recorded
        .iter()
        .filter(|st| plan.interfaces.iter().any(|ip| ip.name == st.name))
    {
        for t in st.tables() {
            scope
                .table_owner
                .entry(t)
                .or_insert_with(|| st.name.clone());
        }
    }
    let recorded_addresses = recorded
        .iter()
        .flat_map(|st| st.families.values())
        .flat_map(|f| f.addresses.iter().cloned())
        .collect();
    let mut want = State::of_plan(plan);
    let observed = match seen {
        Some(seen) => seen.observed(&recorded_addresses),
        None => applier.observe(&links, &recorded_addresses)?,
    };
    check_tables(plan, &observed.owned, recorded, kernel_links)?;
    check_foreign(plan, &observed.foreign_routes)?;
    check_other_links(
        plan,
        observed
            .owned
            .addresses
            .iter()
            .chain(&observed.foreign_addresses),
    )?;
    // A wanted address someone else already holds is theirs: adding it would fail
    // (EEXIST) and recording it would let a teardown remove it.
    let foreign: BTreeSet<_> = observed
        .foreign_addresses
        .intersection(&want.addresses)
        .cloned()
        .collect();
    for a in &foreign {
        log::info!(
            "{} on {} is already there and not leasehook's: left to its owner",
            a.addr,
            a.dev
        );
        want.addresses.remove(a);
    }
    let have = normalize(&want, scope.filter(&observed.owned));
    let ops = diff_states(&want, &have);
    let mut report = execute_all(applier, &ops, &links, &observed)?;
    report.foreign = foreign;
    Ok(report)
}

/// Whose object an add that failed with EEXIST ran into, from what the kernel
/// held of leasehook's (`owned`, every interface's). The kernel tells rules apart
/// by protocol too, so a rule in the way is always leasehook's own; a route (keyed
/// by table, destination and metric) or an address (by address and link) is
/// leasehook's only when one of its own has that key.
fn in_the_way(op: &Op, seen: &Observed) -> Option<String> {
    const OURS: &str = ": an object of leasehook's own (protocol 176) that this plan does not cover is in the way (another interface's, sharing the table); it is left alone";
    let owned = &seen.owned;
    let foreign = |what: Option<&ForeignRoute>| {
        let what = what.map_or_else(String::new, |f| format!(" (route \"{f}\")"));
        format!(": something leasehook does not own{what} is in the way; it is left alone")
    };
    match op {
        Op::AddRule(_) => Some(OURS.to_owned()),
        Op::AddRoute(r) => Some(
            if owned
                .routes
                .iter()
                .any(|o| o.table == r.table && o.to == r.to)
            {
                OURS.to_owned()
            } else {
                foreign(
                    seen.foreign_routes
                        .iter()
                        .find(|f| f.table == r.table && f.to == r.to),
                )
            },
        ),
        Op::AddAddress(a) => Some(
            if owned
                .addresses
                .iter()
                .any(|o| o.dev == a.dev && o.addr.addr() == a.addr.addr())
            {
                OURS.to_owned()
            } else {
                foreign(None)
            },
        ),
        _ => None,
    }
}

fn execute_all<A: Applier + ?Sized>(
    applier: &mut A,
    ops: &[Op],
    links: &LinkIndex,
    seen: &Observed,
) -> Result<Report> {
    let results = applier.execute_many(ops, links);
    let Some(first_failure) = results.iter().position(Result::is_err) else {
        return Ok(Report {
            ops: ops.to_vec(),
            ..Report::default()
        });
    };
    // Undo every write that went through (pipelined writes after the failure too),
    // newest first.
    let done: Vec<&Op> = ops
        .iter()
        .zip(&results)
        .filter(|(_, r)| r.is_ok())
        .map(|(op, _)| op)
        .collect();
    let rolled_back = done.len();
    let mut rollback_errors = Vec::new();
    for undo in done.into_iter().rev().map(inverse) {
        if let Err(re) = applier.execute(&undo, links) {
            rollback_errors.push(re);
        }
    }
    let failed = results.into_iter().nth(first_failure).and_then(Result::err);
    let in_the_way = ops.get(first_failure).and_then(|op| in_the_way(op, seen));
    let object = || {
        ops.get(first_failure)
            .map(ToString::to_string)
            .unwrap_or_default()
    };
    Err(match failed {
        Some(Error::Netlink {
            object,
            cause,
            mut note,
            ..
        }) => {
            // EEXIST on an add: say whose object is in the way. What is in the way
            // is never adopted or replaced (docs/faults.md).
            if cause.errno() == Some(libc::EEXIST)
                && let Some(whose) = in_the_way
            {
                note.push_str(&whose);
            }
            Error::Netlink {
                object,
                cause,
                note,
                rolled_back,
                rollback_errors,
            }
        }
        Some(other) => Error::Netlink {
            object: object(),
            cause: NetlinkCause::Applier(Box::new(other)),
            note: String::new(),
            rolled_back,
            rollback_errors,
        },
        None => Error::Netlink {
            object: object(),
            cause: NetlinkCause::NoAnswer,
            note: String::new(),
            rolled_back,
            rollback_errors,
        },
    })
}

/// Records what a run applied with `save`; if that fails (a full or read-only
/// `/run`), undoes the run's writes, newest first, so the kernel and the record
/// keep agreeing on the last state that was both applied and recorded. The error
/// is `save`'s, naming the file, with what was rolled back.
pub fn record_or_roll_back<A: Applier + ?Sized>(
    applier: &mut A,
    report: &Report,
    save: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let Err(e) = save() else {
        return Ok(());
    };
    if report.ops.is_empty() {
        return Err(e);
    }
    let mut rollback_errors = Vec::new();
    match applier.links() {
        Ok(links) => {
            let links = index_of(&links);
            for undo in report.ops.iter().rev().map(inverse) {
                if let Err(re) = applier.execute(&undo, &links) {
                    rollback_errors.push(re);
                }
            }
        }
        Err(le) => rollback_errors.push(le),
    }
    Err(Error::NotRecorded {
        source: Box::new(e),
        rolled_back: report.ops.len(),
        rollback_errors,
    })
}

/// Removes leasehook's rules, routes and addresses of one interface (one family, or
/// both), also when the link is already gone: its rules are found by the tables
/// `recorded` names and by the tables of its remaining routes. Goes past failures
/// and reports them all; objects that vanished meanwhile are not failures.
pub fn teardown<A: Applier + ?Sized>(
    applier: &mut A,
    iface: &IfName,
    family: Option<Family>,
    recorded: Option<&InterfaceState>,
) -> Result<Report> {
    // One interface: its failures need no name in front.
    tear_down(applier, &[(iface, recorded)], family, false, false)
}

/// Tears down several interfaces as [`teardown`] does each (one family, or both),
/// and with `sweep` everything else leasehook owns too (a lost state file, a crash):
/// what `leasehook flush` does. One link dump and one observation serve them all,
/// and the deletes go to [`Applier::execute_many`] together (the netlink applier
/// packs them into few datagrams), so the cost does not grow with the number of
/// interfaces. An object two interfaces claim (a table both recorded) is deleted
/// once. A failure is named `IF: ...` after the interface whose object it was.
pub fn teardown_many<A: Applier + ?Sized>(
    applier: &mut A,
    targets: &[(&IfName, Option<&InterfaceState>)],
    family: Option<Family>,
    sweep: bool,
) -> Result<Report> {
    tear_down(applier, targets, family, sweep, true)
}

fn tear_down<A: Applier + ?Sized>(
    applier: &mut A,
    targets: &[(&IfName, Option<&InterfaceState>)],
    family: Option<Family>,
    sweep: bool,
    named: bool,
) -> Result<Report> {
    let links = index_of(&applier.links()?);
    let recorded_addresses = targets
        .iter()
        .filter_map(|(_, st)| *st)
        .flat_map(|st| st.objects().addresses)
        .collect();
    let observed = applier.observe(&links, &recorded_addresses)?.owned;
    let fam_ok = |f: Family| family.is_none_or(|want| want == f);
    // Each interface's objects, then (sweeping) the rest under no name.
    let mut claimed = State::default();
    let mut groups: Vec<(Option<&IfName>, State)> = Vec::new();
    for (iface, recorded) in targets {
        let iface = *iface;
        let mut tables: BTreeSet<u32> = recorded.map(InterfaceState::tables).unwrap_or_default();
        tables.extend(
            observed
                .routes
                .iter()
                .filter(|r| &r.dev == iface)
                .map(|r| r.table),
        );
        let mine = State {
            rules: observed
                .rules
                .iter()
                .filter(|r| tables.contains(&r.table) && fam_ok(r.family()))
                .filter(|r| !claimed.rules.contains(*r))
                .cloned()
                .collect(),
            routes: observed
                .routes
                .iter()
                .filter(|r| &r.dev == iface && fam_ok(r.family()))
                .filter(|r| !claimed.routes.contains(*r))
                .cloned()
                .collect(),
            addresses: observed
                .addresses
                .iter()
                .filter(|a| &a.dev == iface && fam_ok(a.family()))
                .filter(|a| !claimed.addresses.contains(*a))
                .cloned()
                .collect(),
        };
        claimed.rules.extend(mine.rules.iter().cloned());
        claimed.routes.extend(mine.routes.iter().cloned());
        claimed.addresses.extend(mine.addresses.iter().cloned());
        groups.push((Some(iface), mine));
    }
    if sweep {
        let rest = State {
            rules: observed.rules.difference(&claimed.rules).cloned().collect(),
            routes: observed
                .routes
                .difference(&claimed.routes)
                .cloned()
                .collect(),
            addresses: observed
                .addresses
                .difference(&claimed.addresses)
                .cloned()
                .collect(),
        };
        claimed.rules.extend(rest.rules.iter().cloned());
        claimed.routes.extend(rest.routes.iter().cloned());
        claimed.addresses.extend(rest.addresses.iter().cloned());
        groups.push((None, rest));
    }
    let owner = |op: &Op| -> Option<&IfName> {
        groups
            .iter()
            .find(|(_, st)| match op {
                Op::DelRule(r) => st.rules.contains(r),
                Op::DelRoute(r) => st.routes.contains(r),
                Op::DelAddress(a) => st.addresses.contains(a),
                Op::AddRule(_) | Op::AddRoute(_) | Op::AddAddress(_) => false,
            })
            .and_then(|(name, _)| *name)
            .filter(|_| named)
    };
    // Addresses first: the kernel walks its whole IPv6 routing tree for every IPv6
    // rule and address it deletes, and each address deleted takes its local route
    // out of that tree, so the rule deletes after them walk a small one (with
    // hundreds of addresses, most of a flush's time). Traffic from an address that
    // is gone needs no rule. Then every rule, so no traffic is steered into a table
    // that is being emptied, then the routes (through a gateway before on-link). An
    // IPv4 route the kernel removed with its source address is gone, no failure.
    let addresses = State {
        addresses: std::mem::take(&mut claimed.addresses),
        ..State::default()
    };
    let mut ops = diff_states(&State::default(), &addresses);
    ops.extend(diff_states(&State::default(), &claimed));
    let results = applier.execute_many(&ops, &links);
    let mut report = Report::default();
    for (op, result) in ops.iter().zip(results) {
        match result {
            Ok(()) => report.ops.push(op.clone()),
            // Gone already (the kernel removes routes with their link or address).
            Err(e @ Error::Netlink { .. }) if e.errno().is_some_and(is_gone) => {}
            Err(error) => report
                .errors
                .push(ObjectError::new(owner(op).cloned(), error)),
        }
    }
    Ok(report)
}

/// The object is not there any more: ENOENT, ESRCH, ENODEV, EADDRNOTAVAIL.
fn is_gone(errno: i32) -> bool {
    [libc::ENOENT, libc::ESRCH, libc::ENODEV, libc::EADDRNOTAVAIL].contains(&errno)
}

#[cfg(test)]
mod tests;

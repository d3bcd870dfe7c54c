// SPDX-License-Identifier: Apache-2.0
//! Pure: `leasehook explain` (issue 33, item 4) — why an address (or a NIC) is or
//! is not policy-routed, in sentences an operator reads.
//!
//! The binary gathers the [`Facts`] (the state records, pending workers, the
//! kernel's links, addresses and owned rules, the `unmanaged` entries, the
//! Kubernetes CNI's ENIs, the provider) and the kernel's answer to `ip route get`
//! ([`KernelRoute`]); [`explain`] decides. The first reason that applies wins:
//! a rule of ours routes it (checked against the kernel), the address gate refused
//! it (SPEC §3.8), the NIC is unmanaged, the CNI's, waiting for the metadata, the
//! primary (main table by design), or leasehook does not know it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use crate::apply::state::InterfaceState;
use crate::config::Unmanaged;
use crate::gate::{Refusal, Refused};
use crate::model::{Address, IfName, MacAddr, Reason, Rule};
use crate::source::provider::Cloud;

/// What the kernel answered for `ip route get TO from ADDR`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRoute {
    /// The destination asked about: an Internet address ([`KernelRoute::to`]).
    pub to: IpAddr,
    /// The table the route came from.
    pub table: u32,
    /// The link it leaves by.
    pub dev: Option<IfName>,
    /// The next hop.
    pub via: Option<IpAddr>,
}

impl KernelRoute {
    /// An empty answer for a packet from `src` to a public resolver's address
    /// (`8.8.8.8`, `2001:4860:4860::8888`): traffic a NIC's default route carries.
    pub fn to(src: IpAddr) -> Self {
        let to = match src {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::new(8, 8, 8, 8)),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::new(0x2001, 0x4860, 0x4860, 0, 0, 0, 0, 0x8888)),
        };
        Self {
            to,
            table: 0,
            dev: None,
            via: None,
        }
    }
}

impl std::fmt::Display for KernelRoute {
    /// `via 10.0.1.1 dev eth1 table 10001`, as `ip route get` prints it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(v) = self.via {
            write!(f, "via {v} ")?;
        }
        if let Some(d) = &self.dev {
            write!(f, "dev {d} ")?;
        }
        match self.table {
            254 => f.write_str("table main"),
            t => write!(f, "table {t}"),
        }
    }
}

/// A hook's hand-over to a worker still waiting for the metadata
/// (`run/leasehook/pending/<if>.json`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// The interface.
    pub iface: IfName,
    /// The worker's pid, once started.
    pub pid: Option<u32>,
    /// The lease address of the event it carries.
    pub address: Option<IpAddr>,
    /// When its budget ends, in milliseconds since the Unix epoch.
    pub deadline_ms: u64,
}

/// What `explain` reads, gathered by the binary.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// The state records.
    pub states: Vec<InterfaceState>,
    /// Workers waiting for the metadata.
    pub pending: Vec<Pending>,
    /// The kernel's links and their MACs.
    pub links: Vec<(IfName, Option<MacAddr>)>,
    /// Every address on those links.
    pub addresses: Vec<Address>,
    /// The rules with leasehook's protocol the kernel holds.
    pub kernel_rules: Vec<Rule>,
    /// The configuration's `unmanaged` entries.
    pub unmanaged: Vec<Unmanaged>,
    /// The Kubernetes CNI's ENIs, and why each is the CNI's.
    pub cni_enis: Vec<(IfName, String)>,
    /// The conflicts recorded by interface (`run/leasehook/conflict/<if>`:
    /// another owner's object in the NIC's table, [`crate::commit`]).
    pub conflicts: Vec<(String, String)>,
    /// Now, in milliseconds since the Unix epoch.
    pub now_ms: u64,
    /// The cloud whose metadata the addresses came from, when known: its row
    /// names the keys that list a NIC's addresses and prefixes.
    pub cloud: Option<&'static Cloud>,
}

/// The outcome, as `--format json` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A rule of ours sends it to its NIC's table, and the kernel holds it.
    Routed,
    /// The primary NIC's address: the main table routes it, by design.
    Primary,
    /// The record has the rule, the kernel does not (or answers another table).
    Drift,
    /// The address gate refused it.
    Refused,
    /// The NIC is listed in `unmanaged`.
    Unmanaged,
    /// The NIC is the Kubernetes CNI's.
    Cni,
    /// The metadata does not list it yet (a worker waits, or the record lacks keys).
    Waiting,
    /// Another owner's object in the NIC's table keeps leasehook off the NIC.
    Conflict,
    /// Its NIC is known, but leasehook applied nothing for it.
    NotApplied,
    /// Nothing leasehook knows holds it.
    Unknown,
}

impl Verdict {
    /// Its name in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Self::Routed => "routed",
            Self::Primary => "primary",
            Self::Drift => "drift",
            Self::Refused => "refused",
            Self::Unmanaged => "unmanaged",
            Self::Cni => "cni",
            Self::Waiting => "waiting",
            Self::Conflict => "conflict",
            Self::NotApplied => "not-applied",
            Self::Unknown => "unknown",
        }
    }

    /// Whether the address's traffic leaves by its NIC (exit status 0).
    pub fn routed(self) -> bool {
        matches!(self, Self::Routed | Self::Primary)
    }
}

/// Why one address is or is not routed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The address explained (`None`: a NIC without one).
    pub address: Option<IpAddr>,
    /// The kernel's answer for it, as text (`ip route get` or its error).
    pub kernel: Option<String>,
    /// The outcome.
    pub verdict: Verdict,
    /// The NIC it belongs to, when known.
    pub iface: Option<IfName>,
    /// The table that routes it.
    pub table: Option<u32>,
    /// The rules of ours whose source holds it.
    pub rules: Vec<Rule>,
    /// The reasoning, one sentence a line.
    pub lines: Vec<String>,
}

/// Which rule of SPEC §3.8 a refusal applies.
pub fn gate_rule(r: &Refusal) -> &'static str {
    match r {
        Refusal::Everything => "never a /0",
        Refusal::Special { .. } => {
            "never unspecified, loopback, multicast, broadcast or link-local"
        }
        Refusal::MetadataService { .. } => "never the metadata service's addresses",
        Refusal::OutsideSubnet { .. }
        | Refusal::WholeSubnet { .. }
        | Refusal::NoSubnet
        | Refusal::SubnetEdge { .. }
        | Refusal::TooWideSubnet => "never outside, or wider than, the NIC's subnet",
        Refusal::OtherNic { .. } => "never another NIC's address or subnet",
        Refusal::Router { .. } | Refusal::LocalNextHop { .. } => "never a router's address",
        Refusal::TableClaimed { .. } => "one table per NIC (SPEC §3.2)",
        Refusal::NoTable | Refusal::NoGateway => {
            "an operator's route or rule needs the NIC's table"
        }
        Refusal::HostDefault { .. } | Refusal::OtherSubnet { .. } => {
            "never the host's default or another NIC's subnet, unless allow_default (SPEC §3.9)"
        }
    }
}

fn holds(value: &str, addr: IpAddr) -> bool {
    value.parse::<IpAddr>().is_ok_and(|a| a == addr)
        || value.parse::<IpNet>().is_ok_and(|n| n.contains(&addr))
}

/// Why `addr` is or is not routed; `kernel` is the kernel's answer for it (an
/// error is only shown).
pub fn explain<E: std::fmt::Display>(
    addr: IpAddr,
    facts: &Facts,
    kernel: &Result<KernelRoute, E>,
) -> Explanation {
    let on_link = facts
        .addresses
        .iter()
        .find(|a| a.addr.addr() == addr)
        .map(|a| a.dev.clone());
    let with_rule = facts.states.iter().find_map(|s| {
        let rules: Vec<Rule> = s
            .families
            .values()
            .flat_map(|f| {
                // A rule to a destination (`nics[].rules`) routes by where
                // traffic goes, not by its source.
                f.rules
                    .iter()
                    .filter(|r| r.to.is_none() && r.from.contains(&addr))
            })
            .cloned()
            .collect();
        (!rules.is_empty()).then_some((s, rules))
    });
    let refused: Vec<(&InterfaceState, &Refused)> = facts
        .states
        .iter()
        .flat_map(|s| s.refused.iter().map(move |r| (s, r)))
        .filter(|(_, r)| holds(&r.value, addr))
        .collect();
    let pending = facts
        .pending
        .iter()
        .find(|p| p.address == Some(addr) || Some(&p.iface) == on_link.as_ref());
    let iface = with_rule
        .as_ref()
        .map(|(s, _)| s.name.clone())
        .or_else(|| {
            let leased = |s: &&InterfaceState| s.leases().iter().any(|l| l.address == addr);
            facts.states.iter().find(leased).map(|s| s.name.clone())
        })
        .or_else(|| refused.first().map(|(s, _)| s.name.clone()))
        .or_else(|| pending.map(|p| p.iface.clone()))
        .or_else(|| on_link.clone());
    let mut lines = vec![match (&iface, &on_link) {
        (Some(n), Some(l)) if n == l => format!("{addr} is an address of {n}."),
        (Some(n), Some(l)) => format!("{addr} is on {l}, and leasehook has it for {n}."),
        (Some(n), None) => format!("{addr} belongs to {n}; no link of this host holds it."),
        (None, _) => format!("{addr} is on no link of this host."),
    }];
    let (mut table, mut rules) = (None, Vec::new());
    let verdict = if let Some((s, found)) = with_rule {
        table = found.first().map(|r| r.table);
        let v = rule_reason(s, addr, &found, facts, kernel, &mut lines);
        rules = found;
        v
    } else if !refused.is_empty() {
        for (s, r) in &refused {
            lines.push(format!(
                "The address gate refused {} {} for {}: {} (SPEC §3.8: {}).",
                r.key,
                r.value,
                s.name,
                r.reason,
                gate_rule(&r.reason)
            ));
        }
        Verdict::Refused
    } else if let Some(n) = &iface {
        let (v, line) = nic_reason(n, facts, pending, Some(addr));
        lines.push(line);
        v
    } else {
        lines.push("No record, worker or link of leasehook's knows it: it is not an address of this instance's NICs as leasehook saw them (another host's, or a pod's?).".to_owned());
        Verdict::Unknown
    };
    let answer = match kernel {
        Ok(r) => format!("ip route get {} from {addr}: {r}", r.to),
        Err(e) => e.to_string(),
    };
    if verdict != Verdict::Unknown {
        lines.push(format!("The kernel answers now: {answer}."));
    }
    Explanation {
        address: Some(addr),
        kernel: Some(answer),
        verdict,
        iface,
        table,
        rules,
        lines,
    }
}

/// Why an address a rule of ours holds is routed, or drifted: where it came
/// from, each rule and whether the kernel holds it, and the kernel's table.
fn rule_reason<E: std::fmt::Display>(
    s: &InterfaceState,
    addr: IpAddr,
    found: &[Rule],
    facts: &Facts,
    kernel: &Result<KernelRoute, E>,
    lines: &mut Vec<String>,
) -> Verdict {
    lines.push(origin(s, addr, found, facts.cloud));
    for r in found {
        lines.push(format!(
            "Rule `{r}` sends its traffic to table {}{}.",
            r.table,
            if facts.kernel_rules.contains(r) {
                ""
            } else {
                "; the kernel does NOT hold this rule now (removed by someone else? `leasehook refresh` puts it back)"
            }
        ));
    }
    let table = found.first().map(|r| r.table);
    let held = found.iter().all(|r| facts.kernel_rules.contains(r));
    match kernel {
        Ok(k) if Some(k.table) != table => {
            if held {
                lines.push(format!("Yet the kernel takes it to table {}, not {}: a rule before ours (a lower priority, another tool's) matches first.", k.table, r_table(table)));
            }
            Verdict::Drift
        }
        _ if !held => Verdict::Drift,
        _ => Verdict::Routed,
    }
}

fn r_table(t: Option<u32>) -> String {
    t.map_or_else(|| "none".to_owned(), |t| t.to_string())
}

/// The addresses `--iface` explains: the NIC's recorded leases and rule sources
/// (a prefix by its first address), then what its link holds (link-local aside).
pub fn addresses_of(n: &IfName, facts: &Facts) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = Vec::new();
    let recorded = facts.states.iter().filter(|s| &s.name == n).flat_map(|s| {
        s.leases()
            .into_iter()
            .map(|l| l.address)
            .chain(s.families.values().flat_map(|f| {
                f.rules
                    .iter()
                    .filter(|r| r.to.is_none())
                    .map(|r| r.from.addr())
            }))
            .collect::<Vec<_>>()
    });
    let linked = facts
        .addresses
        .iter()
        .filter(|a| &a.dev == n && crate::gate::check_ip(a.addr.addr()).is_ok())
        .map(|a| a.addr.addr());
    for a in recorded.chain(linked) {
        if !out.contains(&a) {
            out.push(a);
        }
    }
    out
}

/// Why NIC `n` has no routing of ours (for `--iface` when it holds no address).
pub fn explain_nic(n: &IfName, facts: &Facts) -> Explanation {
    let pending = facts.pending.iter().find(|p| &p.iface == n);
    let (verdict, line) = nic_reason(n, facts, pending, None);
    Explanation {
        address: None,
        kernel: None,
        verdict,
        iface: Some(n.clone()),
        table: None,
        rules: Vec::new(),
        lines: vec![line],
    }
}

/// Which metadata key listed `addr`, as far as the record tells: the lease, an
/// address list or a delegated prefix; the key's name is the cloud's own
/// ([`Cloud::address_keys`]), said only when the cloud is known and has one.
fn origin(s: &InterfaceState, addr: IpAddr, rules: &[Rule], cloud: Option<&Cloud>) -> String {
    let name = &s.name;
    let v4 = addr.is_ipv4();
    // ` (local-ipv4s in ec2's metadata)`, or nothing.
    let key = |pick: fn(&Cloud) -> Option<&'static str>| {
        cloud
            .and_then(|c| pick(c).map(|k| format!(" ({k} in {}'s metadata)", c.name)))
            .unwrap_or_default()
    };
    let addresses = key(if v4 {
        |c| c.address_keys.ipv4
    } else {
        |c| c.address_keys.ipv6
    });
    if let Some(l) = s.leases().iter().find(|l| l.address == addr) {
        return match l.reason {
            Reason::Metadata => format!(
                "It is {name}'s address from the metadata{addresses}, which leasehook added (no DHCP serves {name})."
            ),
            Reason::Autoconf => format!(
                "It is the address the kernel configured on {name} from router advertisements, which the metadata vouches for{addresses}."
            ),
            _ => format!(
                "It is {name}'s DHCP lease address, which the metadata lists too{addresses}."
            ),
        };
    }
    match rules
        .iter()
        .find(|r| r.from.prefix_len() < r.from.max_prefix_len())
    {
        Some(r) => format!(
            "It is inside {}, a prefix the metadata delegates to {name}{}.",
            r.from,
            key(if v4 {
                |c| c.address_keys.ipv4_prefix
            } else {
                |c| c.address_keys.ipv6_prefix
            })
        ),
        None => format!("The metadata lists it as a secondary address of {name}{addresses}."),
    }
}

/// Why a NIC's address (`addr`, or the NIC itself) has no rule: unmanaged, the
/// CNI's, a conflict, waiting for the metadata, the primary, or nothing applied.
fn nic_reason(
    n: &IfName,
    facts: &Facts,
    pending: Option<&Pending>,
    addr: Option<IpAddr>,
) -> (Verdict, String) {
    let mac = facts.links.iter().find(|l| &l.0 == n).and_then(|l| l.1);
    let state = facts.states.iter().find(|s| &s.name == n);
    if let Some(u) = facts.unmanaged.iter().find(|u| u.matches(n, mac)) {
        return (
            Verdict::Unmanaged,
            format!(
                "{n} is unmanaged: the configuration's `unmanaged` entry `{u}` matches it, so leasehook leaves it alone."
            ),
        );
    }
    if let Some((_, why)) = facts.cni_enis.iter().find(|(e, _)| e == n) {
        return (
            Verdict::Cni,
            format!(
                "{n} is the Kubernetes CNI's ENI ({why}): leasehook leaves it, and its addresses, to the CNI."
            ),
        );
    }
    if let Some((_, message)) = facts.conflicts.iter().find(|(i, _)| i == n.as_str()) {
        return (
            Verdict::Conflict,
            format!(
                "leasehook keeps off {n}, where another owner holds what its plan needs: {message}"
            ),
        );
    }
    if let Some(p) = pending {
        let who = p
            .pid
            .map_or_else(|| "a worker".to_owned(), |pid| format!("worker {pid}"));
        return (
            Verdict::Waiting,
            format!(
                "{n} is waiting for the metadata: {who} waits for it to agree with the lease for {} s more, then applies what the lease proves.",
                p.deadline_ms.saturating_sub(facts.now_ms).div_ceil(1000)
            ),
        );
    }
    let Some(s) = state else {
        if !facts.links.iter().any(|l| &l.0 == n) {
            return (
                Verdict::Unknown,
                format!("There is no link {n} and no record of it."),
            );
        }
        return (
            Verdict::NotApplied,
            format!(
                "leasehook has no record for {n} (run/leasehook/iface/{n}.json): no DHCP event of it reached leasehook, or it was flushed."
            ),
        );
    };
    if !s.missing.is_empty() {
        let what: Vec<String> = s.missing.iter().map(ToString::to_string).collect();
        return (
            Verdict::Waiting,
            format!(
                "{n} is waiting for the metadata, which does not say yet: {}. leasehook applied only what the lease proves; `leasehook refresh` (the timer) asks again.",
                what.join("; ")
            ),
        );
    }
    if s.primary && addr.is_none_or(|a| s.leases().iter().any(|l| l.address == a)) {
        return (
            Verdict::Primary,
            format!(
                "{n} is the primary NIC: its traffic takes the main table (the DHCP client's default route); leasehook gives the primary no rules unless `primary_rules: true`."
            ),
        );
    }
    let table = r_table(s.table);
    // An IPv6 address the kernel configured from router advertisements beside
    // the one the metadata vouches for (issue 34: a privacy or stable-privacy
    // address, another prefix's): never a rule source.
    if let Some(a @ IpAddr::V6(_)) = addr
        && let Some(vouched) = s
            .leases()
            .iter()
            .find(|l| l.reason == crate::model::Reason::Autoconf && l.address != a)
    {
        return (
            Verdict::NotApplied,
            format!(
                "{a} is an address the kernel configured on {n} that the metadata does not vouch for (it vouches for {}, which the kernel configured from router advertisements): a privacy or stable-privacy address, or another prefix's, gets no rule (the cloud's port security drops its traffic anyway).",
                vouched.address
            ),
        );
    }
    (
        Verdict::NotApplied,
        match addr {
            Some(a) => format!(
                "{n} has a record (table {table}), but none of its rules holds {a}: the metadata did not list it when leasehook last applied."
            ),
            None => format!("{n} has a record (table {table}) and no rule."),
        },
    )
}

#[cfg(test)]
mod tests;

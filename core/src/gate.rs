// SPDX-License-Identifier: Apache-2.0
//! Pure: the address gate (SPEC §3.8), the one place that decides what may ever be
//! a rule source or an address leasehook adds.
//!
//! Every value that can end up as `from PREFIX` in a rule or as an address on a
//! link passes here: the planner asks for each source and address of each NIC, the
//! validator of `leasehook apply --plan` asks for each rule of a hand-made plan, and
//! every lease parser asks for the leased address ([`check_ip`]). What is refused is
//! never written; the caller records it ([`Refused`]) so that `leasehook plan`
//! prints it and the hooks log it, and the rest of the plan goes on.
//!
//! Two layers:
//!
//! * [`check_ip`] / [`check_net`]: what no NIC may ever hold, whatever the cloud
//!   says — unspecified, "this network" (`0.0.0.0/8`), loopback, multicast, the
//!   limited broadcast, link-local, the metadata services' own addresses
//!   ([`metadata_services`]), a `/0`. An IPv4-mapped IPv6 address
//!   (`::ffff:a.b.c.d`) is judged as the IPv4 address it carries, and refused
//!   anyway in an IPv6 list (an IPv6 rule never sees such a source).
//! * [`Bounds`]: what one NIC may hold — inside its subnet (not the subnet's
//!   network or broadcast address, a prefix strictly narrower than the subnet),
//!   nothing another NIC holds (its address, or a prefix that covers it), and no
//!   router's address ([`Routers`]: a lease's router, a NIC's gateway the metadata
//!   names or implies, a next hop of the kernel's main table).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net};
use serde::{Deserialize, Serialize};

use crate::source::services::CLOUD_SERVICES;

/// The link-local metadata address most clouds' metadata services share
/// (`reference/clouds-and-clusters.md` §2); a cloud's other addresses are its own
/// ([`crate::source::services`]).
pub const LINK_LOCAL_METADATA: (IpAddr, &str) = (
    IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)),
    "the link-local metadata service most clouds share",
);

/// The metadata services' own addresses, each with whose it is: the shared
/// link-local one ([`LINK_LOCAL_METADATA`]), then each cloud's own. A rule from
/// one of them, or the address on a link, cuts the host off from the service and
/// lets a local listener impersonate it.
pub fn metadata_services() -> impl Iterator<Item = &'static (IpAddr, &'static str)> {
    std::iter::once(&LINK_LOCAL_METADATA).chain(CLOUD_SERVICES.iter().copied().flatten())
}

/// A range no NIC's address may be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Special {
    /// `0.0.0.0`, `::`.
    Unspecified,
    /// `0.0.0.0/8`: "this network" (RFC 1122).
    ThisNetwork,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// `169.254.0.0/16`, `fe80::/10`.
    LinkLocal,
    /// `::ffff:0:0/96` in an IPv6 list.
    Ipv4Mapped,
}

impl fmt::Display for Special {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Unspecified => "unspecified",
            Self::ThisNetwork => "\"this network\"",
            Self::Loopback => "loopback",
            Self::Multicast => "multicast",
            Self::Broadcast => "broadcast",
            Self::LinkLocal => "link-local",
            Self::Ipv4Mapped => "IPv4-mapped, not an IPv6 address",
        })
    }
}

/// Why the gate refused a value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Refusal {
    /// A `/0`: every address.
    Everything,
    /// In (or, with `covers`, covering part of) a range no NIC's address may be in.
    Special {
        /// Which range.
        what: Special,
        /// The range.
        range: IpNet,
        /// The value is a prefix that covers part of the range.
        #[serde(default)]
        covers: bool,
    },
    /// A metadata service's own address (or, with `covers`, a prefix covering it).
    MetadataService {
        /// The address.
        address: IpAddr,
        /// Whose it is.
        service: String,
        /// The value is a prefix that covers the address.
        #[serde(default)]
        covers: bool,
    },
    /// Not inside any of the NIC's subnets of its family.
    OutsideSubnet {
        /// The NIC's subnets of the family.
        subnets: Vec<IpNet>,
    },
    /// A prefix as wide as (or wider than) the NIC's subnet.
    WholeSubnet {
        /// The subnet.
        subnet: IpNet,
    },
    /// A prefix on a NIC whose subnet of the family is not known, so nothing
    /// bounds it.
    NoSubnet,
    /// The subnet's network or broadcast address (IPv6: its subnet-router
    /// anycast address) as a host.
    SubnetEdge {
        /// The subnet.
        subnet: IpNet,
    },
    /// Another NIC holds this address, or one inside this prefix.
    OtherNic {
        /// Which NIC (its interface name, or its MAC when it has no link).
        owner: String,
        /// The address it holds.
        address: IpAddr,
    },
    /// Not a subnet a cloud hands out (shorter than /8 for IPv4, /16 for IPv6).
    TooWideSubnet,
    /// A router's address: a lease's router, a NIC's gateway (named by the
    /// metadata or computed from its subnet) or a next hop of the kernel's main
    /// table. Held by a NIC, a local listener would answer for the router.
    Router {
        /// The address.
        address: IpAddr,
        /// Whose router it is (`eth1's lease`, `the main table (dev eth0)`, ...).
        whose: String,
    },
    /// A next hop that this host holds (a NIC's own address, another link's):
    /// a gateway is never local.
    LocalNextHop {
        /// The NIC (or link) that holds it.
        owner: String,
    },
    /// An operator's route or rule (`nics:`) for a NIC that has no table of
    /// its own (the primary without `primary_rules`, a NIC not routed yet).
    NoTable,
    /// An operator's route `via: gateway` on a NIC whose table has no
    /// router of the route's family.
    NoGateway,
    /// An operator's destination (`nics:`) that holds the host's default
    /// router: its traffic would leave through this NIC (lifted by
    /// `allow_default: true`).
    HostDefault {
        /// The router.
        address: IpAddr,
        /// Whose it is.
        whose: String,
    },
    /// An operator's destination (`nics:`) that overlaps another NIC's subnet
    /// (lifted by `allow_default: true`).
    OtherSubnet {
        /// The NIC.
        owner: String,
        /// Its subnet.
        subnet: IpNet,
    },
    /// The NIC's `device-number` gives a table another NIC claims too.
    TableClaimed {
        /// The table.
        table: u32,
        /// The other NICs that claim it.
        others: Vec<String>,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |v: &[IpNet]| {
            v.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            Self::Everything => f.write_str("a /0 (every address)"),
            Self::Special {
                what,
                range,
                covers,
            } => write!(
                f,
                "{}{what} ({range})",
                if *covers { "covers " } else { "" }
            ),
            Self::MetadataService {
                address,
                service,
                covers,
            } => write!(
                f,
                "{}the metadata service's address {address} ({service})",
                if *covers { "covers " } else { "" }
            ),
            Self::OutsideSubnet { subnets } => {
                write!(f, "not inside the NIC's subnet ({})", list(subnets))
            }
            Self::WholeSubnet { subnet } => {
                write!(f, "as wide as the NIC's whole subnet {subnet}")
            }
            Self::NoSubnet => f.write_str("a prefix, and the NIC's subnet is not known"),
            Self::SubnetEdge {
                subnet: subnet @ IpNet::V4(_),
            } => {
                write!(f, "the network or broadcast address of the subnet {subnet}")
            }
            Self::SubnetEdge { subnet } => {
                write!(f, "the subnet-router anycast address of the subnet {subnet}")
            }
            Self::OtherNic { owner, address } => {
                write!(f, "{owner} holds {address}: another NIC's address")
            }
            Self::TooWideSubnet => {
                f.write_str("no cloud's subnet (shorter than /8 for IPv4, /16 for IPv6)")
            }
            Self::LocalNextHop { owner } => {
                write!(
                    f,
                    "a next hop {owner} holds itself: a gateway is never this host's address"
                )
            }
            Self::Router { address, whose } => {
                write!(
                    f,
                    "{address} is a router ({whose}), never an address of this host"
                )
            }
            Self::NoTable => f.write_str(
                "the NIC has no table of its own (the primary without primary_rules, or not routed yet)",
            ),
            Self::NoGateway => f.write_str("the NIC's table has no router of this family"),
            Self::HostDefault { address, whose } => write!(
                f,
                "holds the host's default router {address} ({whose}); allow_default: true lets it"
            ),
            Self::OtherSubnet { owner, subnet } => write!(
                f,
                "overlaps {owner}'s subnet {subnet}; allow_default: true lets it"
            ),
            Self::TableClaimed { table, others } => write!(
                f,
                "gives table {table}, which {} claim{} too: neither NIC's rules are touched",
                others.join(", "),
                if others.len() == 1 { "s" } else { "" }
            ),
        }
    }
}

/// A value the gate refused, with where it came from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Refused {
    /// Where the value came from: a metadata key (`ipv4-prefix`, `local-ipv4s`,
    /// `subnet-ipv4-cidr-block`, ...), `lease`, `device-number` or a plan's `rule`.
    pub key: String,
    /// The value, as text.
    pub value: String,
    /// Why.
    pub reason: Refusal,
}

impl Refused {
    /// A refusal of `value` from `key`.
    pub fn new(key: &str, value: impl fmt::Display, reason: Refusal) -> Self {
        Self {
            key: key.to_owned(),
            value: value.to_string(),
            reason,
        }
    }
}

impl fmt::Display for Refused {
    /// `ipv4-prefix 0.0.0.0/0: a /0 (every address)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.key, self.value, self.reason)
    }
}

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8) -> IpNet {
    // Evaluated at compile time (SPECIALS is a constant): a bad length would not
    // build.
    IpNet::new_assert(IpAddr::V4(Ipv4Addr::new(a, b, c, d)), len)
}

const fn v6(addr: Ipv6Addr, len: u8) -> IpNet {
    IpNet::new_assert(IpAddr::V6(addr), len)
}

/// The ranges of [`Special`], most specific reason first.
const SPECIALS: [(IpNet, Special); 11] = [
    (v4(0, 0, 0, 0, 32), Special::Unspecified),
    (v4(0, 0, 0, 0, 8), Special::ThisNetwork),
    (v4(127, 0, 0, 0, 8), Special::Loopback),
    (v4(224, 0, 0, 0, 4), Special::Multicast),
    (v4(255, 255, 255, 255, 32), Special::Broadcast),
    (v4(169, 254, 0, 0, 16), Special::LinkLocal),
    (v6(Ipv6Addr::UNSPECIFIED, 128), Special::Unspecified),
    (v6(Ipv6Addr::LOCALHOST, 128), Special::Loopback),
    (
        v6(Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8),
        Special::Multicast,
    ),
    (
        v6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10),
        Special::LinkLocal,
    ),
    (
        v6(Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, 0, 0), 96),
        Special::Ipv4Mapped,
    ),
];

/// A prefix as plain numbers, for the containment tests every source goes through
/// (`IpNet::contains` costs several times as much in the planner's hot loop).
#[derive(Debug, Clone, Copy)]
struct Bits {
    v6: bool,
    base: u128,
    len: u8,
}

impl Bits {
    fn of(net: &IpNet) -> Self {
        match net {
            IpNet::V4(n) => Self {
                v6: false,
                base: u128::from(u32::from(n.network())),
                len: n.prefix_len(),
            },
            IpNet::V6(n) => Self {
                v6: true,
                base: u128::from(n.network()),
                len: n.prefix_len(),
            },
        }
    }

    fn host(ip: IpAddr) -> Self {
        Self::of(&IpNet::from(ip))
    }

    /// The `len` leading bits of the family's width, as a mask.
    fn mask(self, len: u8) -> u128 {
        let width: u32 = if self.v6 { 128 } else { 32 };
        let len = u32::from(len).min(width);
        if len == 0 {
            return 0;
        }
        let ones = u128::MAX >> (128 - width);
        ones & !ones.checked_shr(len).unwrap_or(0)
    }

    fn contains(self, other: Self) -> bool {
        self.contains_masked(self.mask(self.len), other)
    }

    /// [`Bits::contains`], given `self`'s mask (`self.mask(self.len)`).
    fn contains_masked(self, mask: u128, other: Self) -> bool {
        self.v6 == other.v6 && self.len <= other.len && other.base & mask == self.base
    }

    fn overlaps(self, other: Self) -> bool {
        self.contains(other) || other.contains(self)
    }
}

/// A metadata service's address as [`Bits`], with the address and whose it is.
type Service = (Bits, IpAddr, &'static str);

/// [`SPECIALS`] and [`metadata_services`] as [`Bits`], in their order: computed
/// once, as every source and address of a plan is checked against all of them.
static FORBIDDEN: std::sync::LazyLock<(Vec<Bits>, Vec<Service>)> = std::sync::LazyLock::new(|| {
    (
        SPECIALS.iter().map(|(r, _)| Bits::of(r)).collect(),
        metadata_services()
            .map(|(a, s)| (Bits::host(*a), *a, *s))
            .collect(),
    )
});

/// An IPv4-mapped IPv6 prefix as the IPv4 prefix it carries.
fn mapped_v4(net: &IpNet) -> Option<IpNet> {
    let IpNet::V6(n) = net else { return None };
    let a = n.network().to_ipv4_mapped()?;
    let len = n.prefix_len().checked_sub(96)?;
    Ipv4Net::new(a, len).ok().map(IpNet::V4)
}

/// What no NIC may hold, for a prefix: a `/0`, or anything overlapping a
/// [`Special`] range or a metadata service's address. An IPv4-mapped IPv6 prefix
/// is judged as the IPv4 prefix it carries first (so `::ffff:127.0.0.1` is
/// loopback), then refused as IPv4-mapped.
pub fn check_net(net: IpNet) -> Result<(), Refusal> {
    let net = net.trunc();
    if net.prefix_len() == 0 {
        return Err(Refusal::Everything);
    }
    if let Some(inner) = mapped_v4(&net) {
        check_net(inner)?;
    }
    let service = |address: &IpAddr, service: &str, covers| Refusal::MetadataService {
        address: *address,
        service: service.to_owned(),
        covers,
    };
    // The most telling reason first: the service's own address, then the range
    // the value lies in, then a range or a service the (wide) value covers.
    let bits = Bits::of(&net);
    let host = net.prefix_len() == net.max_prefix_len();
    let (specials, services) = &*FORBIDDEN;
    let service_in = || {
        services
            .iter()
            .find(|(b, _, _)| bits.contains(*b))
            .map(|(_, a, s)| (a, *s))
    };
    if host && let Some((a, s)) = service_in() {
        return Err(service(a, s, false));
    }
    let special = |f: fn(Bits, Bits) -> bool, covers| {
        specials
            .iter()
            .zip(&SPECIALS)
            .find(|(b, _)| f(**b, bits))
            .map(|(_, (range, what))| Refusal::Special {
                what: *what,
                range: *range,
                covers,
            })
    };
    if let Some(r) = special(Bits::contains, false).or_else(|| special(Bits::overlaps, true)) {
        return Err(r);
    }
    if let Some((a, s)) = service_in() {
        return Err(service(a, s, true));
    }
    Ok(())
}

/// A value for a log line: an address without its host length (`10.0.1.20`), a
/// prefix with its length (`10.0.1.64/28`).
pub fn shown(net: IpNet) -> String {
    if net.prefix_len() == net.max_prefix_len() {
        net.addr().to_string()
    } else {
        net.to_string()
    }
}

/// What no NIC may hold, for one address (a lease's, a rule's source host).
pub fn check_ip(ip: IpAddr) -> Result<(), Refusal> {
    check_net(IpNet::from(ip))
}

/// Whether `net` may be a NIC's subnet: [`check_net`], and no shorter than /8
/// (IPv4) or /16 (IPv6) — no cloud hands out a subnet wider than that.
pub fn check_subnet(net: IpNet) -> Result<(), Refusal> {
    check_net(net)?;
    let min = match net {
        IpNet::V4(_) => 8,
        IpNet::V6(_) => 16,
    };
    if net.prefix_len() < min {
        return Err(Refusal::TooWideSubnet);
    }
    Ok(())
}

/// A subnet's first host (`10.0.1.1` for `10.0.1.0/24`): the gateway Azure and
/// OCI reserve in every subnet; `None` for a /31 or /32, which have none.
pub fn first_host(subnet: Ipv4Net) -> Option<Ipv4Addr> {
    if subnet.prefix_len() >= 31 {
        return None;
    }
    u32::from(subnet.network())
        .checked_add(1)
        .map(Ipv4Addr::from)
}

/// An address another NIC holds, and who holds it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Held {
    /// The address.
    pub address: IpAddr,
    /// The NIC: its interface name, or its MAC.
    pub owner: String,
}

/// The addresses NICs hold, sorted, for range lookups (a plan of 15 NICs with 100
/// addresses each checks every source against all of them). Each holder's name is
/// kept once: an entry is its address and the holder's place among the names.
/// The addresses of each family are a plain sorted array of integers, searched
/// apart from their holders: a binary search over them costs a fraction of one
/// over `(IpAddr, holder)` pairs, and the planner runs one per source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeldAddresses {
    /// Every IPv4 address, sorted, then by the holder's name, without repeats
    /// of a (address, holder) pair.
    v4: Vec<u32>,
    /// The holder of each of `v4` (an index into `owners`).
    v4_owners: Vec<usize>,
    /// The IPv6 addresses, as `v4`.
    v6: Vec<u128>,
    /// The holder of each of `v6`.
    v6_owners: Vec<usize>,
    /// The holders' names, sorted, each once.
    owners: Vec<String>,
}

/// `IpNet`'s order (by family, address, then length) on plain numbers: the
/// planner sorts its rules and addresses with it, where `IpNet`'s own comparison
/// compares the addresses' bytes through `memcmp` at every step.
pub(crate) fn net_order(left: &IpNet, right: &IpNet) -> std::cmp::Ordering {
    let v4 = |net: &Ipv4Net| u64::from(u32::from(net.addr())) << 8 | u64::from(net.prefix_len());
    match (left, right) {
        (IpNet::V4(l), IpNet::V4(r)) => v4(l).cmp(&v4(r)),
        (IpNet::V6(l), IpNet::V6(r)) => u128::from(l.addr())
            .cmp(&u128::from(r.addr()))
            .then(l.prefix_len().cmp(&r.prefix_len())),
        (IpNet::V4(_), IpNet::V6(_)) => std::cmp::Ordering::Less,
        (IpNet::V6(_), IpNet::V4(_)) => std::cmp::Ordering::Greater,
    }
}

/// The places in `keys` (sorted) of the values from `lo` to `hi`.
fn span<T: Ord + Copy>(keys: &[T], lo: T, hi: T) -> std::ops::Range<usize> {
    let start = keys.partition_point(|k| *k < lo);
    let rest = keys.get(start..).unwrap_or_default();
    // One address (every host source of a plan): its entries are the few right
    // after `start`, counted without a second binary search.
    let len = if lo == hi {
        rest.iter().take_while(|k| **k == lo).count()
    } else {
        rest.partition_point(|k| *k <= hi)
    };
    start..start + len
}

/// The first place in `keys` (sorted) whose value is not below `k`, searched
/// from `from` on (a galloping search: 1, 2, 4… places ahead, then a binary
/// search in the last step), or from the start when `k` lies before `from`. A
/// NIC's addresses come mostly in order, each next to the last in `keys`: one or
/// two comparisons each, where a binary search over a plan's thousands takes a
/// dozen.
fn lower_bound_from<T: Ord + Copy>(keys: &[T], k: T, from: usize) -> usize {
    let (before, after) = keys.split_at(from.min(keys.len()));
    if before.last().is_some_and(|b| *b >= k) {
        return before.partition_point(|x| *x < k);
    }
    let mut end = 1;
    while end < after.len() && after.get(end - 1).is_some_and(|x| *x < k) {
        end *= 2;
    }
    let window = after.get(..end.min(after.len())).unwrap_or_default();
    before.len() + window.partition_point(|x| *x < k)
}

/// Where a run of lookups ([`Hosts`]) got to in the sorted arrays
/// ([`HeldAddresses`], [`Routers`]), per family: the next lookup starts there.
/// Only a hint: any value gives the same answers.
#[derive(Debug, Clone, Copy, Default)]
struct Cursor {
    v4: usize,
    v6: usize,
    router: usize,
}

/// No address held by anyone.
pub static NOTHING_HELD: HeldAddresses = HeldAddresses {
    v4: Vec::new(),
    v4_owners: Vec::new(),
    v6: Vec::new(),
    v6_owners: Vec::new(),
    owners: Vec::new(),
};

/// Whether two names are equal, comparing their bytes only when they are not
/// the same slice (a holder's pairs all borrow its one name).
fn same(a: &str, b: &str) -> bool {
    std::ptr::eq(a, b) || a == b
}

impl HeldAddresses {
    /// The list, sorted and without repeats.
    pub fn new(held: &[Held]) -> Self {
        Self::of(held.iter().map(|h| (h.owner.as_str(), h.address)))
    }

    /// The list of (holder, address) pairs, sorted and without repeats.
    pub fn of<'s>(pairs: impl IntoIterator<Item = (&'s str, IpAddr)>) -> Self {
        let pairs: Vec<(&str, IpAddr)> = pairs.into_iter().collect();
        // Pairs come grouped by holder: a run of one holder is one name to
        // sort (a plan of 15 NICs with 100 addresses each sorted 1,500).
        let mut names: Vec<&str> = pairs.iter().map(|(o, _)| *o).collect();
        names.dedup_by(|a, b| same(a, b));
        names.sort_unstable();
        names.dedup();
        // The last one's place is asked again. Each family is sorted on its
        // own numbers: (u32, place) pairs sort several times faster than the
        // (family, u128, place) keys of both families did.
        let mut last: Option<(&str, usize)> = None;
        let mut v4: Vec<(u32, usize)> = Vec::with_capacity(pairs.len());
        let mut v6: Vec<(u128, usize)> = Vec::new();
        for &(owner, address) in &pairs {
            let at = match last {
                Some((name, at)) if same(name, owner) => at,
                _ => names.binary_search(&owner).unwrap_or_default(),
            };
            last = Some((owner, at));
            match address {
                IpAddr::V4(a) => v4.push((u32::from(a), at)),
                IpAddr::V6(a) => v6.push((u128::from(a), at)),
            }
        }
        // The names are sorted, so their places sort as the names do.
        v4.sort_unstable();
        v4.dedup();
        v6.sort_unstable();
        v6.dedup();
        let (v4, v4_owners) = v4.into_iter().unzip();
        let (v6, v6_owners) = v6.into_iter().unzip();
        Self {
            owners: names.into_iter().map(str::to_owned).collect(),
            v4,
            v4_owners,
            v6,
            v6_owners,
        }
    }

    fn owner(&self, at: usize) -> &str {
        self.owners.get(at).map_or("", String::as_str)
    }

    /// The entries from `lo` to `hi` (one family), in order: each address and
    /// its holder's place.
    fn within(&self, lo: IpAddr, hi: IpAddr) -> impl Iterator<Item = (IpAddr, usize)> + '_ {
        let (four, six) = match (lo, hi) {
            (IpAddr::V4(lo), IpAddr::V4(hi)) => (span(&self.v4, lo.into(), hi.into()), 0..0),
            (IpAddr::V6(lo), IpAddr::V6(hi)) => (0..0, span(&self.v6, lo.into(), hi.into())),
            _ => (0..0, 0..0),
        };
        let four = self
            .v4
            .get(four.clone())
            .unwrap_or_default()
            .iter()
            .map(|a| IpAddr::V4(Ipv4Addr::from(*a)))
            .zip(self.v4_owners.get(four).unwrap_or_default().iter().copied());
        let six = self
            .v6
            .get(six.clone())
            .unwrap_or_default()
            .iter()
            .map(|a| IpAddr::V6(Ipv6Addr::from(*a)))
            .zip(self.v6_owners.get(six).unwrap_or_default().iter().copied());
        four.chain(six)
    }

    /// Whether `owner` holds `ip` (its own entries only).
    pub fn holds(&self, ip: IpAddr, owner: &str) -> bool {
        self.within(ip, ip).any(|(_, at)| self.owner(at) == owner)
    }

    /// The place of `name` among the holders.
    fn place(&self, name: &str) -> Option<usize> {
        self.owners.binary_search_by(|o| o.as_str().cmp(name)).ok()
    }

    /// [`HeldAddresses::inside`] for one address, `ip`: its first holder other
    /// than the one at place `me` ([`HeldAddresses::place`]), searched from
    /// `cursor` on (which it moves).
    fn other_holder(&self, ip: IpAddr, me: Option<usize>, cursor: &mut Cursor) -> Option<Held> {
        // The cursor moves past the address's entries: the next (greater)
        // address is then the first one it looks at.
        let (at, owners) = match ip {
            IpAddr::V4(a) => {
                let k = u32::from(a);
                let at = lower_bound_from(&self.v4, k, cursor.v4);
                let n = self.v4.get(at..).unwrap_or_default();
                let owners = n.iter().take_while(|x| **x == k).count();
                cursor.v4 = at + owners;
                (at, owners)
            }
            IpAddr::V6(a) => {
                let k = u128::from(a);
                let at = lower_bound_from(&self.v6, k, cursor.v6);
                let n = self.v6.get(at..).unwrap_or_default();
                let owners = n.iter().take_while(|x| **x == k).count();
                cursor.v6 = at + owners;
                (at, owners)
            }
        };
        let places = match ip {
            IpAddr::V4(_) => &self.v4_owners,
            IpAddr::V6(_) => &self.v6_owners,
        };
        places
            .get(at..at + owners)
            .unwrap_or_default()
            .iter()
            .find(|o| Some(**o) != me)
            .map(|o| Held {
                address: ip,
                owner: self.owner(*o).to_owned(),
            })
    }

    /// The first address inside `net` that someone other than `me` holds.
    pub fn inside(&self, net: &IpNet, me: &str) -> Option<Held> {
        self.within(net.network(), net.broadcast())
            .find(|(_, at)| self.owner(*at) != me)
            .map(|(address, at)| Held {
                address,
                owner: self.owner(at).to_owned(),
            })
    }
}

/// A router's address, and whose router it is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Router {
    /// The address.
    pub address: IpAddr,
    /// Whose: `eth1's lease`, `the metadata's gateway of eth1`, `the main
    /// table's next hop (dev eth0)`.
    pub whose: String,
}

/// Every router's address the planner knows, sorted: the leases' routers, the
/// gateways and next hops the metadata names (or a provider computes) for any
/// NIC, and the next hops of the kernel's main table. None of them is ever an
/// address leasehook adds or a rule source (SPEC §3.8): a host that holds its
/// router's address answers for the router.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Routers {
    /// The routers, sorted, one per address.
    list: Vec<Router>,
    /// The IPv4 routers' addresses (the first of `list`), in the same order:
    /// searched apart from the routers, plain arrays of numbers (every source
    /// of a plan is looked up).
    v4: Vec<u32>,
    /// The IPv6 routers' addresses (the rest of `list`).
    v6: Vec<u128>,
}

/// No router known.
pub static NO_ROUTERS: Routers = Routers {
    list: Vec::new(),
    v4: Vec::new(),
    v6: Vec::new(),
};

impl Routers {
    /// The list, sorted; an address named twice keeps its first reason in
    /// sorted order.
    pub fn new(mut routers: Vec<Router>) -> Self {
        routers.sort();
        routers.dedup_by(|a, b| a.address == b.address);
        // `IpAddr` sorts IPv4 first: the routers are the IPv4 ones, then the IPv6 ones.
        let (mut v4, mut v6) = (Vec::new(), Vec::new());
        for r in &routers {
            match r.address {
                IpAddr::V4(a) => v4.push(u32::from(a)),
                IpAddr::V6(a) => v6.push(u128::from(a)),
            }
        }
        Self {
            list: routers,
            v4,
            v6,
        }
    }

    /// The router whose address is `ip`.
    pub fn find(&self, ip: IpAddr) -> Option<&Router> {
        self.find_from(ip, &mut Cursor::default())
    }

    /// [`Routers::find`] from `cursor` on (which it moves).
    fn find_from(&self, ip: IpAddr, cursor: &mut Cursor) -> Option<&Router> {
        // On numbers, which sort as the addresses do: `Ipv4Addr`'s comparison
        // is a `memcmp` call at each step.
        let (at, found) = match ip {
            IpAddr::V4(a) => {
                let k = u32::from(a);
                let at = lower_bound_from(&self.v4, k, cursor.router);
                (at, self.v4.get(at) == Some(&k))
            }
            IpAddr::V6(a) => {
                let k = u128::from(a);
                let at = lower_bound_from(&self.v6, k, cursor.router);
                (at, self.v6.get(at) == Some(&k))
            }
        };
        cursor.router = at + usize::from(found);
        let offset = if ip.is_ipv6() { self.v4.len() } else { 0 };
        found.then(|| self.list.get(offset + at)).flatten()
    }

    /// Every router, sorted by address.
    pub fn iter(&self) -> impl Iterator<Item = &Router> {
        self.list.iter()
    }
}

/// What one NIC may hold: its subnets (both families, each passed
/// [`check_subnet`]), what the NICs hold, of which the entries of `me` are its
/// own, and the routers no NIC may hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bounds<'a> {
    /// The NIC's subnets, each passed [`check_subnet`] ([`Bounds::source`] relies on it).
    pub subnets: Vec<IpNet>,
    /// What the NICs hold: the metadata's NICs, the kernel's links.
    pub held: &'a HeldAddresses,
    /// The owner name (see [`Held`]) of the NIC these bounds are for.
    pub me: &'a str,
    /// Every router's address known (any NIC's, the kernel's).
    pub routers: &'a Routers,
    /// What the kernel's links hold (`ip address`, every link's): no next hop
    /// may be one of them.
    pub local: &'a HeldAddresses,
}

/// [`Bounds::source`] of host after host, mostly in order (a NIC's addresses):
/// the NIC's subnets as numbers and its place among the holders are worked
/// out once, and each lookup in the sorted held addresses and routers starts
/// where the last one ended. Made by [`Bounds::hosts`].
#[derive(Debug)]
pub struct Hosts<'b, 'a> {
    bounds: &'b Bounds<'a>,
    /// The NIC's place among the holders ([`HeldAddresses`]), if it holds any.
    me: Option<usize>,
    /// `bounds.subnets` as [`Bits`] with their masks, in their order.
    subnets: Vec<(Bits, u128)>,
    cursor: Cursor,
}

impl Hosts<'_, '_> {
    /// [`Bounds::source`] of the host `ip`.
    pub fn source(&mut self, ip: IpAddr) -> Result<(), Refusal> {
        let bounds = self.bounds;
        bounds.source_at(IpNet::from(ip), Some(self))
    }
}

impl Default for Bounds<'_> {
    fn default() -> Self {
        Self {
            subnets: Vec::new(),
            held: &NOTHING_HELD,
            me: "",
            routers: &NO_ROUTERS,
            local: &NOTHING_HELD,
        }
    }
}

impl Bounds<'_> {
    fn subnets_of<'s>(&'s self, net: &'s IpNet) -> impl Iterator<Item = &'s IpNet> + Clone + 's {
        self.subnets.iter().filter(move |s| {
            matches!(
                (s, net),
                (IpNet::V4(_), IpNet::V4(_)) | (IpNet::V6(_), IpNet::V6(_))
            )
        })
    }
    /// Whether `net` may be the source of a rule of this NIC: [`check_net`];
    /// a host that is no router's address ([`Routers`]; a prefix may cover a
    /// router: the router's own packets are never this host's to send, and no
    /// cloud delegates a prefix holding its gateway); nothing another NIC holds
    /// inside it; a host inside one of the NIC's subnets
    /// of its family (any host when none is known), not that subnet's network or
    /// broadcast address; a prefix strictly inside a subnet (it may cover those
    /// two).
    pub fn source(&self, net: IpNet) -> Result<(), Refusal> {
        self.source_at(net, None)
    }

    /// [`Bounds::source`] for a run of hosts, a NIC's addresses, with what
    /// every one of them needs worked out once ([`Hosts`]).
    pub fn hosts(&self) -> Hosts<'_, '_> {
        Hosts {
            bounds: self,
            me: self.held.place(self.me),
            subnets: self
                .subnets
                .iter()
                .map(|s| {
                    let b = Bits::of(s);
                    (b, b.mask(b.len))
                })
                .collect(),
            cursor: Cursor::default(),
        }
    }

    fn source_at(&self, net: IpNet, hosts: Option<&mut Hosts<'_, '_>>) -> Result<(), Refusal> {
        let net = net.trunc();
        // The containment tests on numbers ([`Bits`]): `IpNet::contains`
        // compares addresses through `memcmp`, and this runs for every source
        // of a plan (thousands). The first subnet holding `net`, if any (a
        // subnet of the other family holds nothing of `net`'s).
        let bits = Bits::of(&net);
        let within = match &hosts {
            Some(h) => h
                .subnets
                .iter()
                .zip(&self.subnets)
                .find(|((b, mask), _)| b.contains_masked(*mask, bits))
                .map(|(_, s)| *s),
            None => self
                .subnets_of(&net)
                .find(|s| Bits::of(s).contains(bits))
                .copied(),
        };
        // Each of the NIC's subnets passed [`check_subnet`]: it overlaps no
        // special range and covers no metadata service, so nothing inside it
        // does either. Only a value outside them is checked (most of a plan's
        // thousands of sources are inside).
        if within.is_none() {
            check_net(net)?;
        }
        let host = net.prefix_len() == net.max_prefix_len();
        let mut start = Cursor::default();
        let (cursor, me) = match hosts {
            Some(h) => (&mut h.cursor, Some(h.me)),
            None => (&mut start, None),
        };
        if host && let Some(r) = self.routers.find_from(net.addr(), cursor) {
            return Err(Refusal::Router {
                address: r.address,
                whose: r.whose.clone(),
            });
        }
        let other = if host {
            let me = me.unwrap_or_else(|| self.held.place(self.me));
            self.held.other_holder(net.addr(), me, cursor)
        } else {
            self.held.inside(&net, self.me)
        };
        if let Some(h) = other {
            return Err(Refusal::OtherNic {
                owner: h.owner,
                address: h.address,
            });
        }
        let mut subnets = self.subnets_of(&net).peekable();
        if subnets.peek().is_none() {
            if !host {
                return Err(Refusal::NoSubnet);
            }
        } else if let Some(s) = within {
            if !host && s.prefix_len() >= net.prefix_len() {
                return Err(Refusal::WholeSubnet { subnet: s });
            }
            // IPv4 subnets up to /30 have a network and a broadcast address that
            // no host holds; IPv6 subnets up to /126 a subnet-router anycast
            // address (all host bits 0, RFC 4291 §2.6.1; a /127 has none, RFC
            // 6164), which the routers hold. A prefix strictly inside the subnet
            // may cover them: nothing is ever sent from them, so its rule takes
            // no one's traffic (amazon-ec2-net-utils routes such a prefix too).
            let edge = match s {
                IpNet::V4(s4) => {
                    s4.prefix_len() <= 30
                        && (net.addr() == IpAddr::V4(s4.network())
                            || net.addr() == IpAddr::V4(s4.broadcast()))
                }
                IpNet::V6(s6) => s6.prefix_len() <= 126 && net.addr() == IpAddr::V6(s6.network()),
            };
            if host && edge {
                return Err(Refusal::SubnetEdge { subnet: s });
            }
        } else {
            return Err(Refusal::OutsideSubnet {
                subnets: subnets.copied().collect(),
            });
        }
        Ok(())
    }

    /// Whether `addr` may be an address leasehook adds to this NIC: its host passes
    /// [`Bounds::source`]; its prefix (the cloud-init profile gives the subnet's
    /// length) is no wider than the subnet, or than /24 (IPv4) or /64 (IPv6) when
    /// no subnet is known.
    pub fn address(&self, addr: IpNet) -> Result<(), Refusal> {
        self.source(IpNet::from(addr.addr()))?;
        if addr.prefix_len() == addr.max_prefix_len() {
            return Ok(());
        }
        let mut subnets = self.subnets_of(&addr).peekable();
        if subnets.peek().is_none() {
            let floor = match addr {
                IpNet::V4(_) => 24,
                IpNet::V6(_) => 64,
            };
            return if addr.prefix_len() >= floor {
                Ok(())
            } else {
                Err(Refusal::NoSubnet)
            };
        }
        if subnets.clone().any(|s| s.contains(&addr.trunc())) {
            Ok(())
        } else {
            Err(Refusal::OutsideSubnet {
                subnets: subnets.copied().collect(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    fn held() -> HeldAddresses {
        HeldAddresses::new(&[
            Held {
                address: "10.98.0.10".parse().unwrap(),
                owner: "eth0".to_owned(),
            },
            Held {
                address: "10.98.1.20".parse().unwrap(),
                owner: "eth1".to_owned(),
            },
        ])
    }

    fn bounds(held: &HeldAddresses) -> Bounds<'_> {
        Bounds {
            subnets: vec![net("10.98.1.0/24"), net("fd00:98:1::/64")],
            held,
            me: "eth1",
            routers: &NO_ROUTERS,
            local: &NOTHING_HELD,
        }
    }

    #[test]
    fn lower_bound_from_is_partition_point_from_anywhere() {
        let keys = [1_u32, 3, 3, 3, 5, 8, 8, 13, 21, 21, 34];
        for k in 0..40 {
            for from in 0..=keys.len() + 2 {
                assert_eq!(
                    lower_bound_from(&keys, k, from),
                    keys.partition_point(|x| *x < k),
                    "{k} from {from}"
                );
            }
        }
    }

    /// [`Bounds::hosts`] answers as [`Bounds::source`] does, whatever the order
    /// of the hosts asked: in order, backwards, repeated, of both families,
    /// held by this NIC, by another, by both, or a router's.
    #[test]
    fn hosts_answer_as_source_in_any_order() {
        let held = HeldAddresses::of(
            [
                ("eth0", "10.98.1.5"),
                ("eth1", "10.98.1.5"),
                ("eth0", "10.98.1.9"),
                ("eth1", "10.98.1.10"),
                ("eth1", "10.98.1.11"),
                ("eth2", "10.98.1.12"),
                ("eth1", "fd00:98:1::10"),
                ("eth3", "fd00:98:1::11"),
            ]
            .map(|(o, a)| (o, a.parse().unwrap())),
        );
        let routers = Routers::new(
            [
                ("10.98.1.1", "a lease's"),
                ("fd00:98:1::1", "an RA's"),
                ("10.98.1.11", "a route's"),
            ]
            .map(|(a, w)| Router {
                address: a.parse().unwrap(),
                whose: w.to_owned(),
            })
            .to_vec(),
        );
        let b = Bounds {
            routers: &routers,
            ..bounds(&held)
        };
        let mut hosts: Vec<IpAddr> = [
            "10.98.1.0",
            "10.98.1.1",
            "10.98.1.5",
            "10.98.1.9",
            "10.98.1.10",
            "10.98.1.11",
            "10.98.1.12",
            "10.98.1.13",
            "10.98.1.255",
            "10.98.2.1",
            "127.0.0.1",
            "fd00:98:1::1",
            "fd00:98:1::10",
            "fd00:98:1::11",
            "fd00:98:1::12",
            "fd00:99::1",
        ]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
        let mut orders = vec![hosts.clone()];
        hosts.reverse();
        orders.push(hosts.clone());
        orders.push(
            hosts
                .iter()
                .chain(hosts.iter().rev())
                .chain(&hosts)
                .copied()
                .collect(),
        );
        for order in orders {
            let mut run = b.hosts();
            for ip in order {
                assert_eq!(run.source(ip), b.source(IpNet::from(ip)), "{ip}");
            }
        }
        // What the list holds: each kind of answer is asked about.
        let verdict = |a: &str| b.source(IpNet::from(a.parse::<IpAddr>().unwrap()));
        assert!(matches!(
            verdict("10.98.1.5"),
            Err(Refusal::OtherNic { .. })
        ));
        assert!(matches!(verdict("10.98.1.11"), Err(Refusal::Router { .. })));
        assert!(matches!(
            verdict("fd00:98:1::11"),
            Err(Refusal::OtherNic { .. })
        ));
        assert_eq!(verdict("10.98.1.10"), Ok(()));
        assert_eq!(verdict("fd00:98:1::10"), Ok(()));
    }

    #[test]
    fn never_usable_addresses() {
        for (value, want) in [
            ("0.0.0.0", "unspecified (0.0.0.0/32)"),
            ("0.1.2.3", "\"this network\" (0.0.0.0/8)"),
            ("127.0.0.1", "loopback (127.0.0.0/8)"),
            ("224.0.0.1", "multicast (224.0.0.0/4)"),
            ("255.255.255.255", "broadcast (255.255.255.255/32)"),
            ("169.254.1.1", "link-local (169.254.0.0/16)"),
            (
                "169.254.169.254",
                "the metadata service's address 169.254.169.254 (the link-local metadata service most clouds share)",
            ),
            (
                "100.100.100.200",
                "the metadata service's address 100.100.100.200 (Alibaba Cloud metadata)",
            ),
            (
                "fd00:ec2::254",
                "the metadata service's address fd00:ec2::254 (EC2 metadata (IPv6))",
            ),
            (
                "fd00:c1::a9fe:a9fe",
                "the metadata service's address fd00:c1::a9fe:a9fe (OCI metadata (IPv6))",
            ),
            ("::", "unspecified (::/128)"),
            ("::1", "loopback (::1/128)"),
            ("ff02::1", "multicast (ff00::/8)"),
            ("fe80::1", "link-local (fe80::/10)"),
            ("::ffff:127.0.0.1", "loopback (127.0.0.0/8)"),
            (
                "::ffff:169.254.169.254",
                "the metadata service's address 169.254.169.254 (the link-local metadata service most clouds share)",
            ),
            (
                "::ffff:10.0.0.1",
                "IPv4-mapped, not an IPv6 address (::ffff:0.0.0.0/96)",
            ),
        ] {
            let ip: IpAddr = value.parse().unwrap();
            assert_eq!(check_ip(ip).unwrap_err().to_string(), want, "{value}");
        }
        for ok in ["10.98.1.20", "100.64.0.1", "2600:1f18::1", "fd00:98:1::20"] {
            assert_eq!(check_ip(ok.parse().unwrap()), Ok(()), "{ok}");
        }
    }

    #[test]
    fn wide_prefixes_are_refused() {
        assert_eq!(check_net(net("0.0.0.0/0")), Err(Refusal::Everything));
        assert_eq!(check_net(net("::/0")), Err(Refusal::Everything));
        // The halves of everything overlap "this network" and link-local.
        assert!(check_net(net("0.0.0.0/1")).is_err());
        assert!(check_net(net("128.0.0.0/1")).is_err());
        assert!(check_net(net("8000::/1")).is_err());
        assert!(check_subnet(net("10.0.0.0/7")).is_err());
        assert_eq!(check_subnet(net("10.98.1.0/24")), Ok(()));
    }

    #[test]
    fn bounds_of_one_nic() {
        let held = held();
        let b = bounds(&held);
        assert_eq!(b.source(net("10.98.1.20/32")), Ok(()));
        assert_eq!(b.source(net("10.98.1.64/28")), Ok(()));
        assert_eq!(b.source(net("fd00:98:1::20/128")), Ok(()));
        assert_eq!(b.source(net("fd00:98:1:0:8000::/80")), Ok(()));
        for (value, want) in [
            ("10.98.2.1/32", "not inside the NIC's subnet (10.98.1.0/24)"),
            (
                "10.98.1.0/24",
                "as wide as the NIC's whole subnet 10.98.1.0/24",
            ),
            (
                "10.98.0.0/16",
                "eth0 holds 10.98.0.10: another NIC's address",
            ),
            ("10.97.0.0/16", "not inside the NIC's subnet (10.98.1.0/24)"),
            (
                "10.98.1.255/32",
                "the network or broadcast address of the subnet 10.98.1.0/24",
            ),
            (
                "10.98.1.0/32",
                "the network or broadcast address of the subnet 10.98.1.0/24",
            ),
            (
                "fd00:98:2::1/128",
                "not inside the NIC's subnet (fd00:98:1::/64)",
            ),
            (
                "fd00:98:1::/128",
                "the subnet-router anycast address of the subnet fd00:98:1::/64",
            ),
        ] {
            assert_eq!(
                b.source(net(value)).unwrap_err().to_string(),
                want,
                "{value}"
            );
        }
        // Another NIC's address, also inside a prefix; a NIC in the same subnet.
        let same = Bounds {
            subnets: vec![net("10.98.0.0/24")],
            ..bounds(&held)
        };
        assert_eq!(
            same.source(net("10.98.0.10/32")).unwrap_err().to_string(),
            "eth0 holds 10.98.0.10: another NIC's address"
        );
        assert!(same.source(net("10.98.0.0/28")).is_err());
        assert_eq!(same.source(net("10.98.0.20/32")), Ok(()));
        // No subnet known: hosts only.
        let none = Bounds::default();
        assert_eq!(none.source(net("2600::1/128")), Ok(()));
        assert_eq!(none.source(net("2600::/80")), Err(Refusal::NoSubnet));
    }

    #[test]
    fn added_addresses() {
        let held = held();
        let b = bounds(&held);
        assert_eq!(b.address(net("10.98.1.21/32")), Ok(()));
        assert_eq!(b.address(net("10.98.1.21/24")), Ok(()));
        assert!(b.address(net("10.98.1.21/16")).is_err());
        assert!(b.address(net("127.0.0.1/32")).is_err());
        let none = Bounds::default();
        assert_eq!(none.address(net("10.0.0.5/24")), Ok(()));
        assert_eq!(none.address(net("10.0.0.5/16")), Err(Refusal::NoSubnet));
    }
    #[test]
    fn net_order_is_ipnets_order() {
        let nets: Vec<IpNet> = [
            "10.0.0.1/32",
            "10.0.0.0/24",
            "10.0.0.0/32",
            "9.255.255.255/32",
            "255.255.255.255/32",
            "0.0.0.0/0",
            "::/0",
            "::1/128",
            "::ffff:10.0.0.1/128",
            "2600:1f18::/64",
            "2600:1f18::/80",
            "fe80::1/128",
        ]
        .iter()
        .map(|s| net(s))
        .collect();
        for a in &nets {
            for b in &nets {
                assert_eq!(net_order(a, b), a.cmp(b), "{a} vs {b}");
            }
        }
    }

    #[test]
    fn held_addresses_are_found_by_family_and_range() {
        let held = held();
        assert!(held.holds(net("10.98.1.20/32").addr(), "eth1"));
        assert!(!held.holds(net("10.98.1.20/32").addr(), "eth0"));
        assert_eq!(
            held.inside(&net("10.98.0.0/16"), "eth1").map(|h| h.owner),
            Some("eth0".to_owned())
        );
        assert_eq!(
            held.inside(&net("10.98.0.0/16"), "eth0").map(|h| h.owner),
            Some("eth1".to_owned())
        );
        // The same number in the other family is not held.
        assert_eq!(held.inside(&net("::a62:114/128"), ""), None);
        assert_eq!(held.inside(&net("10.98.2.0/24"), ""), None);
    }

    #[test]
    fn a_router_is_never_an_address_or_a_source() {
        let held = held();
        let routers = Routers::new(vec![
            Router {
                address: "10.98.1.1".parse().unwrap(),
                whose: "eth1's lease".to_owned(),
            },
            Router {
                address: "10.98.0.1".parse().unwrap(),
                whose: "the main table's next hop (dev eth0)".to_owned(),
            },
        ]);
        let b = Bounds {
            routers: &routers,
            ..bounds(&held)
        };
        assert_eq!(
            b.source(net("10.98.1.1/32")).unwrap_err().to_string(),
            "10.98.1.1 is a router (eth1's lease), never an address of this host"
        );
        // Added with its prefix (the cloud-init profile, a metadata lease): the
        // host part is what counts.
        assert!(matches!(
            b.address(net("10.98.1.1/24")),
            Err(Refusal::Router { .. })
        ));
        // Another subnet's router: still a router.
        let wide = Bounds {
            subnets: vec![net("10.98.0.0/16")],
            ..b.clone()
        };
        assert!(matches!(
            wide.address(net("10.98.0.1/32")),
            Err(Refusal::Router { .. })
        ));
        // Its neighbours and a prefix around it pass.
        assert_eq!(b.source(net("10.98.1.2/32")), Ok(()));
        assert_eq!(b.address(net("10.98.1.21/24")), Ok(()));
        assert_eq!(b.source(net("10.98.1.0/28")), Ok(()));
        assert_eq!(routers.find("10.98.0.2".parse().unwrap()), None);
    }
}

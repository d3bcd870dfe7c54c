// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the [`Applier`] that talks rtnetlink to the kernel of the current
//! network namespace.
//!
//! The dumps (links, rules, routes, addresses) and the writes go through one plain
//! (synchronous) netlink socket: writes pack many requests into one datagram, and
//! a dump's answer is looked at before it is parsed, so that what no caller reads
//! (the local table's routes, two for each address of the host) costs no parsing
//! (see `docs/performance.md`). The two single requests (bringing a link up, `ip
//! route get`) go through the same socket, answered and acknowledged: not through
//! rtnetlink's asynchronous handle, whose tokio runtime and connection were about
//! 70 KB of each release binary for two requests (docs/packaging.md).
//! The socket belongs to the network namespace the applier was created in.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use rtnetlink::packet_core::{
    NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REQUEST, NetlinkMessage, NetlinkPayload,
};
use rtnetlink::packet_route::address::{
    AddressAttribute, AddressFlags, AddressMessage, AddressProtocol,
};
use rtnetlink::packet_route::link::{
    InfoData, InfoKind, InfoVlan, LinkAttribute, LinkFlags, LinkInfo, LinkLayerType, LinkMessage,
};
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteMessage, RouteProtocol, RouteScope, RouteVia,
};
use rtnetlink::packet_route::rule::{RuleAction, RuleAttribute, RuleMessage};
use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};
use rtnetlink::sys::protocols::NETLINK_ROUTE;
use rtnetlink::sys::{Socket, SocketAddr};
use rtnetlink::{AddressMessageBuilder, RouteMessageBuilder};

use super::links::{LinkDetail, LinkKernel, LinkKind, NewKind, NewLink, nics_of};
use super::{Applier, KernelLink, LinkIndex, MainRoute, Observed, PROTOCOL, Snapshot};
use crate::diff::{Op, State};
use crate::error::{Error, NetlinkCause, Result};
use crate::kubernetes::{ForeignRoute, ForeignRule};
use crate::model::{Address, IfName, Route, Rule, Scope};

/// The tables whose rules and routes leasehook may own: everything but the
/// kernel's reserved ones.
fn owned_table(t: u32) -> bool {
    !crate::constants::RESERVED_TABLES.contains(&t)
}

/// Applies operations through rtnetlink.
#[derive(Debug)]
pub struct NetlinkApplier {
    writer: Writer,
    /// How many dump requests (`NLM_F_DUMP`) were sent: see [`Self::dumps`].
    dumps: usize,
}

/// A failed request: `object` as an `ip` command line, and why.
fn failure(object: String, cause: NetlinkCause) -> Error {
    Error::Netlink {
        object,
        cause,
        note: String::new(),
        rolled_back: 0,
        rollback_errors: Vec::new(),
    }
}

/// The netlink socket could not be opened.
fn setup(e: std::io::Error) -> Error {
    failure("netlink socket".to_owned(), NetlinkCause::Socket(e))
}

impl NetlinkApplier {
    /// Opens a netlink connection in the current network namespace.
    pub fn try_new() -> Result<Self> {
        let writer = Writer::try_new().map_err(setup)?;
        Ok(Self { writer, dumps: 0 })
    }

    /// How many dump requests (`NLM_F_DUMP`: every link, address, route or rule)
    /// this applier has sent to the kernel: what a hook event's reads cost
    /// (`docs/performance.md`; pinned by a namespace test).
    pub fn dumps(&self) -> usize {
        self.dumps
    }
}

impl NetlinkApplier {
    /// `ip link set IF up` for link `index` when it is not up (`IFF_UP`): `true`
    /// when it was down. A link that is up is not written to.
    pub fn bring_up(&mut self, index: u32) -> Result<bool> {
        let object = format!("ip link set {index} up");
        let mut get = LinkMessage::default();
        get.header.index = index;
        let up =
            self.writer
                .request(RouteNetlinkMessage::GetLink(get), 0, &object, |m| match m {
                    RouteNetlinkMessage::NewLink(m) => Some(m.header.flags.contains(LinkFlags::Up)),
                    _ => None,
                })?;
        if up.iter().all(|up| *up) {
            return Ok(false);
        }
        // What rtnetlink's `LinkUnspec::new_with_index(index).up()` sent: the
        // index, `IFF_UP` in the flags and in the change mask, no attribute; and
        // its `link().set()` flags.
        let mut set = LinkMessage::default();
        set.header.index = index;
        set.header.flags = LinkFlags::Up;
        set.header.change_mask = LinkFlags::Up;
        self.writer.request(
            RouteNetlinkMessage::SetLink(set),
            NLM_F_EXCL | NLM_F_CREATE,
            &object,
            |_| None::<()>,
        )?;
        Ok(true)
    }
}

impl NetlinkApplier {
    /// The rules other tools made (`ip rule` without leasehook's protocol), for
    /// [`crate::kubernetes`]: a CNI's rules. Read-only.
    pub fn foreign_rules(&mut self) -> Result<Vec<ForeignRule>> {
        self.dumps += 1;
        Ok(self
            .writer
            .rules()?
            .iter()
            .filter_map(foreign_rule_of)
            .collect())
    }

    /// The routes other tools made (`ip route show table all` without leasehook's
    /// protocol and without the `local` table), for [`crate::kubernetes`]: a CNI's
    /// per-ENI tables and pod routes. Read-only.
    pub fn foreign_routes(&mut self, links: &LinkIndex) -> Result<Vec<ForeignRoute>> {
        let names = names_of(links);
        self.dumps += 1;
        Ok(self
            .writer
            .routes("ip route show table all")?
            .iter()
            .filter_map(|m| foreign_route_of(m, &names))
            .collect())
    }
}

impl NetlinkApplier {
    /// `ip route get DST from SRC`: the route the kernel picks now for a packet
    /// from `src` to an Internet address ([`crate::explain::KernelRoute::to`]; one
    /// `RTM_GETROUTE`, not a dump), for `leasehook
    /// explain`. Read-only. An error is the kernel's answer too (an `src` this
    /// host does not hold is "network unreachable").
    pub fn route_get(
        &mut self,
        src: IpAddr,
        links: &LinkIndex,
    ) -> Result<crate::explain::KernelRoute> {
        let mut route = crate::explain::KernelRoute::to(src);
        let object = format!("ip route get {} from {src}", route.to);
        let mut query = match (src, route.to) {
            (IpAddr::V4(s), IpAddr::V4(d)) => RouteMessageBuilder::<Ipv4Addr>::new()
                .source_prefix(s, 32)
                .destination_prefix(d, 32)
                .build(),
            (IpAddr::V6(s), IpAddr::V6(d)) => RouteMessageBuilder::<Ipv6Addr>::new()
                .source_prefix(s, 128)
                .destination_prefix(d, 128)
                .build(),
            _ => return Err(failure(object, NetlinkCause::NoAnswer)),
        };
        // As `ip route get` asks: without it the kernel names table main whatever
        // table the route came from.
        query.header.flags |= RouteFlags::LookupTable;
        let msgs =
            self.writer.request(
                RouteNetlinkMessage::GetRoute(query),
                0,
                &object,
                |m| match m {
                    RouteNetlinkMessage::NewRoute(m) => Some(m),
                    _ => None,
                },
            )?;
        for m in &msgs {
            route.table = u32::from(m.header.table);
            for a in &m.attributes {
                match a {
                    RouteAttribute::Table(t) => route.table = *t,
                    RouteAttribute::Oif(i) => {
                        route.dev = links.iter().find(|l| l.1 == i).map(|l| l.0.clone());
                    }
                    other => route.via = route.via.or_else(|| gateway_of(other)),
                }
            }
        }
        Ok(route)
    }
}

/// Interface index → name, for the links that exist now.
fn names_of(links: &LinkIndex) -> std::collections::BTreeMap<u32, IfName> {
    links.iter().map(|(n, i)| (*i, n.clone())).collect()
}

/// IPv4 or IPv6 (`AF_INET`, `AF_INET6`), the first byte of a rule's or route's
/// header: what an `AF_UNSPEC` dump keeps (it also answers the multicast routers'
/// `ipmr` rules and routes, and MPLS routes, which are none of leasehook's
/// business).
fn ip_family(family: u8) -> bool {
    matches!(i32::from(family), libc::AF_INET | libc::AF_INET6)
}

/// `RT_TABLE_LOCAL` as a route's header names it: the kernel's routes to the
/// host's own addresses (two for each), which no caller reads.
const LOCAL_TABLE: u8 = 255;

/// The netlink header's length: a message's own header follows it.
const HEADER: usize = 16;

/// A dumped route's destination: its `RTA_DST` and prefix length, the family's
/// unspecified address for a default route.
fn destination(msg: &RouteMessage, dst: Option<IpAddr>) -> Option<IpNet> {
    let unspecified = match msg.header.address_family {
        AddressFamily::Inet6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        _ => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    };
    IpNet::new(
        dst.unwrap_or(unspecified),
        msg.header.destination_prefix_length,
    )
    .ok()
}

fn foreign_rule_of(msg: &RuleMessage) -> Option<ForeignRule> {
    let (mut src, mut dst) = (None, None);
    let (mut table, mut priority) = (u32::from(msg.header.table), 0);
    for a in &msg.attributes {
        match a {
            RuleAttribute::Protocol(p) if u8::from(*p) == PROTOCOL => return None,
            RuleAttribute::Source(ip) => src = Some(*ip),
            RuleAttribute::Destination(ip) => dst = Some(*ip),
            RuleAttribute::Table(t) => table = *t,
            RuleAttribute::Priority(p) => priority = *p,
            _ => {}
        }
    }
    if msg.header.action != RuleAction::ToTable {
        table = 0;
    }
    Some(ForeignRule {
        priority,
        from: src.and_then(|ip| IpNet::new(ip, msg.header.src_len).ok()),
        to: dst.and_then(|ip| IpNet::new(ip, msg.header.dst_len).ok()),
        table,
    })
}

fn foreign_route_of(
    msg: &RouteMessage,
    names: &std::collections::BTreeMap<u32, IfName>,
) -> Option<ForeignRoute> {
    if u8::from(msg.header.protocol) == PROTOCOL {
        return None;
    }
    let (mut dst, mut via, mut oif, mut table) = (None, None, None, u32::from(msg.header.table));
    for a in &msg.attributes {
        match a {
            RouteAttribute::Destination(d) => dst = route_ip(d),
            RouteAttribute::Gateway(g) => via = route_ip(g),
            RouteAttribute::Oif(i) => oif = Some(*i),
            RouteAttribute::Table(t) => table = *t,
            _ => {}
        }
    }
    // RT_TABLE_LOCAL: the kernel's own addresses.
    if table == 255 {
        return None;
    }
    let to = destination(msg, dst)?;
    Some(ForeignRoute {
        table,
        to,
        via,
        dev: oif.and_then(|i| names.get(&i).cloned()),
    })
}

/// A gateway attribute's address (`RTA_GATEWAY`, or `RTA_VIA` for an IPv4 route
/// through an IPv6 next hop).
fn gateway_of(a: &RouteAttribute) -> Option<IpAddr> {
    match a {
        RouteAttribute::Gateway(g) => route_ip(g),
        RouteAttribute::Via(RouteVia::Inet(v4)) => Some(IpAddr::V4(*v4)),
        RouteAttribute::Via(RouteVia::Inet6(v6)) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

/// A route of the main table (`RT_TABLE_MAIN`, 254), anyone's, with every next
/// hop (a multipath route's too); `None` for another table or family.
fn main_route_of(msg: &RouteMessage) -> Option<MainRoute> {
    if !matches!(
        msg.header.address_family,
        AddressFamily::Inet | AddressFamily::Inet6
    ) {
        return None;
    }
    let (mut dst, mut via, mut oif, mut table) =
        (None, Vec::new(), None, u32::from(msg.header.table));
    for a in &msg.attributes {
        match a {
            RouteAttribute::Destination(d) => dst = route_ip(d),
            RouteAttribute::Oif(i) => oif = Some(*i),
            RouteAttribute::Table(t) => table = *t,
            RouteAttribute::MultiPath(hops) => {
                via.extend(
                    hops.iter()
                        .flat_map(|h| h.attributes.iter().filter_map(gateway_of)),
                );
            }
            other => via.extend(gateway_of(other)),
        }
    }
    // RT_TABLE_MAIN
    if table != 254 {
        return None;
    }
    Some(MainRoute {
        to: destination(msg, dst)?,
        via,
        oif,
    })
}

/// A link as leasehook sees it. A link with a master (`IFLA_MASTER`) or the
/// `IFF_SLAVE` flag is a port of another link: Azure's accelerated-networking VF
/// (mlx4, mlx5, MANA) carries the same MAC as the synthetic `hv_netvsc` NIC it is
/// enslaved to, and bond or bridge ports are configured through their master. Such
/// a link is reported without a MAC, so no lookup by MAC (the hook's, refresh's,
/// apply's) can take it for the NIC: leasehook manages the synthetic NIC only and
/// never touches the VF.
///
/// Only a NIC ([`super::nic_mac`]: Ethernet, not loopback, a station's MAC) is
/// reported with a MAC: `lo` (whose address is all zeros) or a link with an
/// all-zero, multicast or broadcast address can never be taken for the NIC a
/// metadata answer lists under such a MAC.
fn link_of(msg: &LinkMessage) -> Option<LinkDetail> {
    let mut name = None;
    let mut address = None;
    let mut port = msg.header.flags.contains(LinkFlags::Port);
    let (mut kind, mut lower, mut alias) = (LinkKind::Device, None, None);
    for a in &msg.attributes {
        match a {
            LinkAttribute::IfName(n) => name = IfName::try_new(n).ok(),
            LinkAttribute::Address(bytes) => address = Some(bytes.as_slice()),
            LinkAttribute::Controller(_) => port = true,
            LinkAttribute::Link(i) => lower = Some(*i),
            LinkAttribute::IfAlias(s) => alias = Some(s.clone()),
            LinkAttribute::LinkInfo(infos) => {
                for i in infos {
                    if let LinkInfo::Kind(k) = i {
                        kind = match k {
                            InfoKind::Veth => LinkKind::Veth,
                            InfoKind::MacVlan => LinkKind::Macvlan,
                            InfoKind::Vlan => LinkKind::Vlan,
                            _ => LinkKind::Other,
                        };
                    }
                }
            }
            _ => {}
        }
    }
    let facts = super::LinkFacts {
        ethernet: msg.header.link_layer_type == LinkLayerType::Ether,
        loopback: msg.header.flags.contains(LinkFlags::Loopback),
        port,
        address,
    };
    Some(LinkDetail {
        index: msg.header.index,
        name: name?,
        mac: super::nic_mac(&facts).ok(),
        kind,
        lower,
        alias,
    })
}

fn route_ip(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

/// The rich parser [`rule_of_bytes`] replaced, kept as the tests' reference.
#[cfg(test)]
fn rule_of(msg: &RuleMessage) -> Option<Rule> {
    let mut owned = false;
    let (mut src, mut dst, mut table, mut priority) =
        (None, None, u32::from(msg.header.table), None);
    for a in &msg.attributes {
        match a {
            RuleAttribute::Protocol(p) => owned = u8::from(*p) == PROTOCOL,
            RuleAttribute::Source(ip) => src = Some(*ip),
            RuleAttribute::Destination(ip) => dst = Some(*ip),
            RuleAttribute::Table(t) => table = *t,
            RuleAttribute::Priority(p) => priority = Some(*p),
            _ => {}
        }
    }
    if !owned || msg.header.action != RuleAction::ToTable || !owned_table(table) {
        return None;
    }
    // A rule without FRA_SRC is `from all` (what a hand-edited plan or a /0
    // delegated prefix once installed): it is ours all the same, and must be seen so
    // that flush and the diff remove it.
    let from = match src {
        Some(ip) => IpNet::new(ip, msg.header.src_len).ok()?,
        None => match msg.header.family {
            AddressFamily::Inet => IpNet::V4(ipnet::Ipv4Net::default()),
            AddressFamily::Inet6 => IpNet::V6(ipnet::Ipv6Net::default()),
            _ => return None,
        },
    };
    let to = match dst {
        Some(ip) => Some(IpNet::new(ip, msg.header.dst_len).ok()?),
        None => None,
    };
    Some(Rule {
        from,
        to,
        table,
        priority,
    })
}

fn route_of(msg: &RouteMessage, names: &std::collections::BTreeMap<u32, IfName>) -> Option<Route> {
    if u8::from(msg.header.protocol) != PROTOCOL {
        return None;
    }
    let (mut dst, mut via, mut src, mut oif, mut table) =
        (None, None, None, None, u32::from(msg.header.table));
    for a in &msg.attributes {
        match a {
            RouteAttribute::Destination(d) => dst = route_ip(d),
            RouteAttribute::Gateway(g) => via = route_ip(g),
            RouteAttribute::PrefSource(s) => src = route_ip(s),
            RouteAttribute::Oif(i) => oif = Some(*i),
            RouteAttribute::Table(t) => table = *t,
            _ => {}
        }
    }
    if !owned_table(table) {
        return None;
    }
    let to = destination(msg, dst)?;
    let scope = (msg.header.scope == RouteScope::Link).then_some(Scope::Link);
    Some(Route {
        to,
        via,
        dev: names.get(&oif?)?.clone(),
        scope,
        src,
        table,
    })
}

/// The rich parser [`address_of_bytes`] replaced, kept as the tests' reference.
#[cfg(test)]
fn address_of(
    msg: &AddressMessage,
    names: &std::collections::BTreeMap<u32, IfName>,
) -> Option<(Address, bool)> {
    let (mut local, mut address, mut owned) = (None, None, false);
    for a in &msg.attributes {
        match a {
            AddressAttribute::Local(ip) => local = Some(*ip),
            AddressAttribute::Address(ip) => address = Some(*ip),
            AddressAttribute::Protocol(p) => owned = u8::from(*p) == PROTOCOL,
            _ => {}
        }
    }
    // IPv4 puts the interface address in IFA_LOCAL (IFA_ADDRESS is the peer);
    // IPv6 sends only IFA_ADDRESS.
    let ip = local.or(address)?;
    let addr = IpNet::new(ip, msg.header.prefix_len).ok()?;
    Some((
        Address {
            addr,
            dev: names.get(&msg.header.index)?.clone(),
        },
        owned,
    ))
}

/// Why a message read from its bytes does not parse.
const SHORT: &str = "a message shorter than its header";
/// See [`SHORT`].
const OVERRUN: &str =
    "an attribute that overruns its message, or an address of neither 4 nor 16 bytes";

/// Calls `each` with the type (the nested and byte-order flags cleared) and the
/// payload of every netlink attribute of `data`; `false` when one's length does
/// not fit (the message does not parse).
fn each_attribute(mut data: &[u8], mut each: impl FnMut(u16, &[u8])) -> bool {
    while let Some(&[l0, l1, k0, k1]) = data.get(..4) {
        let len = usize::from(u16::from_ne_bytes([l0, l1]));
        let kind = u16::from_ne_bytes([k0, k1]) & 0x3fff;
        let Some(payload) = data.get(4..len).filter(|_| len >= 4) else {
            return false;
        };
        each(kind, payload);
        data = data.get(len.next_multiple_of(4)..).unwrap_or_default();
    }
    true
}

/// An address attribute's payload as netlink-packet-route reads it: 4 bytes
/// IPv4, 16 bytes IPv6, anything else none.
fn ip_of(payload: &[u8]) -> Option<IpAddr> {
    if let Ok(b) = <[u8; 16]>::try_from(payload) {
        Some(IpAddr::from(b))
    } else {
        <[u8; 4]>::try_from(payload).ok().map(IpAddr::from)
    }
}

/// The first 4 bytes of `payload` as a `u32` in native byte order (as
/// netlink-packet-route's `parse_u32` reads one).
fn u32_of(payload: &[u8]) -> Option<u32> {
    payload
        .get(..4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_ne_bytes)
}

/// [`rule_of`] read from the message's bytes (netlink header first): `Ok(None)`
/// for a rule that is not leasehook's, an error for one that does not parse. The
/// `fib_rule_hdr` after the netlink header: family, `dst_len`, `src_len`, tos,
/// table, two reserved bytes, action, then a `u32` of flags; its attributes
/// follow it.
fn rule_of_bytes(msg: &[u8]) -> std::result::Result<Option<Rule>, &'static str> {
    const FRA_DST: u16 = 1;
    const FRA_SRC: u16 = 2;
    const FRA_PRIORITY: u16 = 6;
    const FRA_TABLE: u16 = 15;
    const FRA_PROTOCOL: u16 = 21;
    const FR_ACT_TO_TBL: u8 = 1;
    let Some(&[family, dst_len, src_len, _, table, _, _, action]) = msg.get(HEADER..HEADER + 8)
    else {
        return Err(SHORT);
    };
    let (mut owned, mut src, mut dst, mut table, mut priority) =
        (false, None, None, u32::from(table), None);
    let mut bad = false;
    let attrs = msg.get(HEADER + 12..).ok_or(SHORT)?;
    let fits = each_attribute(attrs, |kind, p| match kind {
        FRA_PROTOCOL => owned = p.first() == Some(&PROTOCOL),
        FRA_SRC => match ip_of(p) {
            Some(ip) => src = Some(ip),
            None => bad = true,
        },
        FRA_DST => match ip_of(p) {
            Some(ip) => dst = Some(ip),
            None => bad = true,
        },
        FRA_TABLE => match u32_of(p) {
            Some(t) => table = t,
            None => bad = true,
        },
        FRA_PRIORITY => match u32_of(p) {
            Some(v) => priority = Some(v),
            None => bad = true,
        },
        _ => {}
    });
    if !fits || bad {
        return Err(OVERRUN);
    }
    if !owned || action != FR_ACT_TO_TBL || !owned_table(table) {
        return Ok(None);
    }
    let from = match src {
        Some(ip) => IpNet::new(ip, src_len).ok(),
        None => match i32::from(family) {
            libc::AF_INET => Some(IpNet::V4(ipnet::Ipv4Net::default())),
            libc::AF_INET6 => Some(IpNet::V6(ipnet::Ipv6Net::default())),
            _ => None,
        },
    };
    // A destination that does not parse (a length past the family's) is no
    // rule leasehook wrote: it is not read as one without a destination.
    let to = match dst {
        Some(ip) => match IpNet::new(ip, dst_len) {
            Ok(n) => Some(n),
            Err(_) => return Ok(None),
        },
        None => None,
    };
    Ok(from.map(|from| Rule {
        from,
        to,
        table,
        priority,
    }))
}

/// [`address_of`] read from the message's bytes (netlink header first): an
/// error for one that does not parse. The `ifaddrmsg` after the netlink header:
/// family, prefix length, flags, scope, then the link's index (`u32`); its
/// attributes follow it.
fn address_of_bytes(
    msg: &[u8],
    names: &std::collections::BTreeMap<u32, IfName>,
) -> std::result::Result<Option<(Address, bool)>, &'static str> {
    const IFA_ADDRESS: u16 = 1;
    const IFA_LOCAL: u16 = 2;
    const IFA_PROTO: u16 = 11;
    let Some(&[_, prefix_len, _, _, i0, i1, i2, i3]) = msg.get(HEADER..HEADER + 8) else {
        return Err(SHORT);
    };
    let index = u32::from_ne_bytes([i0, i1, i2, i3]);
    let (mut local, mut address, mut owned, mut bad) = (None, None, false, false);
    let attrs = msg.get(HEADER + 8..).ok_or(SHORT)?;
    let fits = each_attribute(attrs, |kind, p| match kind {
        IFA_LOCAL => match ip_of(p) {
            Some(ip) => local = Some(ip),
            None => bad = true,
        },
        IFA_ADDRESS => match ip_of(p) {
            Some(ip) => address = Some(ip),
            None => bad = true,
        },
        IFA_PROTO => owned = p.first() == Some(&PROTOCOL),
        _ => {}
    });
    if !fits || bad {
        return Err(OVERRUN);
    }
    let found = || {
        let addr = IpNet::new(local.or(address)?, prefix_len).ok()?;
        Some((
            Address {
                addr,
                dev: names.get(&index)?.clone(),
            },
            owned,
        ))
    };
    Ok(found())
}

fn rule_message(r: &Rule) -> RuleMessage {
    let mut msg = RuleMessage::default();
    msg.header.family = match r.from {
        IpNet::V4(_) => AddressFamily::Inet,
        IpNet::V6(_) => AddressFamily::Inet6,
    };
    msg.header.src_len = r.from.prefix_len();
    msg.header.action = RuleAction::ToTable;
    // Tables above 255 travel in FRA_TABLE; the header then says RT_TABLE_UNSPEC.
    msg.header.table = u8::try_from(r.table).unwrap_or(0);
    msg.attributes.push(RuleAttribute::Table(r.table));
    // `from all` carries no source (the kernel reports it without FRA_SRC).
    if r.from.prefix_len() > 0 {
        msg.attributes.push(RuleAttribute::Source(r.from.addr()));
    }
    // `to PREFIX` (an operator's rule, `nics[].rules`): FRA_DST and its length.
    if let Some(to) = r.to {
        msg.header.dst_len = to.prefix_len();
        msg.attributes.push(RuleAttribute::Destination(to.addr()));
    }
    if let Some(p) = r.priority {
        msg.attributes.push(RuleAttribute::Priority(p));
    }
    msg.attributes
        .push(RuleAttribute::Protocol(RouteProtocol::from(PROTOCOL)));
    msg
}

fn route_message(
    r: &Route,
    index: u32,
) -> std::result::Result<RouteMessage, Box<dyn std::error::Error + Send + Sync>> {
    let scope = if r.scope == Some(Scope::Link) {
        RouteScope::Link
    } else {
        RouteScope::Universe
    };
    // The IpAddr builder checks that gateway and source match the destination's
    // family (a mismatch is an error, not a malformed message).
    let mut b = RouteMessageBuilder::<IpAddr>::new()
        .destination_prefix(r.to.addr(), r.to.prefix_len())?
        .output_interface(index)
        .table_id(r.table)
        .scope(scope)
        .protocol(RouteProtocol::from(PROTOCOL));
    if let Some(via) = r.via {
        b = b.gateway(via)?;
    }
    if let Some(src) = r.src {
        b = b.pref_source(src)?;
    }
    Ok(b.build())
}

fn address_message(a: &Address, index: u32) -> AddressMessage {
    match a.addr {
        IpNet::V4(n) => AddressMessageBuilder::<Ipv4Addr>::new()
            .index(index)
            .address(n.addr(), n.prefix_len())
            .build(),
        IpNet::V6(n) => AddressMessageBuilder::<Ipv6Addr>::new()
            .index(index)
            .address(n.addr(), n.prefix_len())
            .build(),
    }
}

/// The flags of an address leasehook adds (`IFA_FLAGS`): `nodad` for IPv6 (the
/// cloud assigned it; duplicate address detection only delays it), and
/// `noprefixroute` for an address with a prefix ([`Address::no_prefix_route`]).
fn address_flags(a: &Address) -> Option<AddressFlags> {
    let mut flags = AddressFlags::empty();
    if a.addr.addr().is_ipv6() {
        flags |= AddressFlags::Nodad;
    }
    if a.no_prefix_route() {
        flags |= AddressFlags::Noprefixroute;
    }
    (!flags.is_empty()).then_some(flags)
}

/// How many requests travel in one datagram: enough to save most system calls,
/// few enough that the acknowledgements fit the socket's receive buffer.
const BATCH: usize = 64;

/// A plain (synchronous) netlink socket for writes, so that many requests share
/// one `sendmsg` (rtnetlink sends one request per datagram), and for dumps, whose
/// answers are looked at before they are parsed (see the module docs).
#[derive(Debug)]
struct Writer {
    socket: Socket,
    seq: u32,
    buf: Vec<u8>,
}

/// Why a request of a batch failed, as plain data: one socket error answers for
/// every request of the batch.
#[derive(Debug, Clone)]
enum Refusal {
    /// The kernel's errno.
    Kernel(i32),
    /// The socket's error: its kind, errno and message.
    Socket(std::io::ErrorKind, Option<i32>, String),
}

impl Refusal {
    fn socket(e: &std::io::Error) -> Self {
        Self::Socket(e.kind(), e.raw_os_error(), e.to_string())
    }

    fn cause(self) -> NetlinkCause {
        match self {
            Self::Kernel(errno) => NetlinkCause::Kernel(std::io::Error::from_raw_os_error(errno)),
            Self::Socket(_, Some(errno), _) => {
                NetlinkCause::Socket(std::io::Error::from_raw_os_error(errno))
            }
            Self::Socket(kind, None, message) => {
                NetlinkCause::Socket(std::io::Error::new(kind, message))
            }
        }
    }
}

/// The kernel's answer to one request: `Ok`, or why not.
type Answer = std::result::Result<(), Refusal>;

impl Writer {
    fn try_new() -> std::io::Result<Self> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        socket.bind_auto()?;
        socket.connect(&SocketAddr::new(0, 0))?;
        // Error acknowledgements without a copy of the request: smaller answers.
        socket.set_cap_ack(true)?;
        Ok(Self {
            socket,
            seq: 1,
            buf: Vec::with_capacity(64 * 1024),
        })
    }

    /// Sends the dump request `payload` (`NLM_F_DUMP`) and returns what `pick`
    /// takes of every message of the answer that `wanted` keeps (called with the
    /// message's bytes, its netlink header first), parsed. An error answer, a
    /// message that does not parse or a failed socket is an error naming `what`.
    fn dump<T>(
        &mut self,
        payload: RouteNetlinkMessage,
        what: &str,
        wanted: impl Fn(&[u8]) -> bool,
        pick: impl Fn(RouteNetlinkMessage) -> Option<T>,
    ) -> Result<Vec<T>> {
        self.parsed(payload, NLM_F_REQUEST | NLM_F_DUMP, what, wanted, pick)
    }

    /// One request that is not a dump, `flags` added to `NLM_F_REQUEST |
    /// NLM_F_ACK`: what `pick` takes of the messages the kernel answers before
    /// its acknowledgement (a `get`'s one message, none for a `set`), parsed. An
    /// error answer is the kernel's errno; a failed socket an error naming `what`.
    fn request<T>(
        &mut self,
        payload: RouteNetlinkMessage,
        flags: u16,
        what: &str,
        pick: impl Fn(RouteNetlinkMessage) -> Option<T>,
    ) -> Result<Vec<T>> {
        self.parsed(
            payload,
            NLM_F_REQUEST | NLM_F_ACK | flags,
            what,
            |_| true,
            pick,
        )
    }

    /// [`Self::exchange`], each answer that `wanted` keeps parsed and given to
    /// `pick`.
    fn parsed<T>(
        &mut self,
        payload: RouteNetlinkMessage,
        flags: u16,
        what: &str,
        wanted: impl Fn(&[u8]) -> bool,
        pick: impl Fn(RouteNetlinkMessage) -> Option<T>,
    ) -> Result<Vec<T>> {
        self.exchange(payload, flags, what, |msg| {
            if !wanted(msg) {
                return Ok(None);
            }
            match NetlinkMessage::<RouteNetlinkMessage>::deserialize(msg) {
                Ok(NetlinkMessage {
                    payload: NetlinkPayload::InnerMessage(m),
                    ..
                }) => Ok(pick(m)),
                Ok(_) => Ok(None),
                Err(e) => Err(format!("{e}")),
            }
        })
    }

    /// [`Self::dump`] with `take` reading each message's bytes (netlink header
    /// first) itself: what it returns is kept, its error (why the message does
    /// not parse) fails the dump. The owned rules and the addresses are read so,
    /// without netlink-packet-route's message with its attribute list (a heap
    /// vector per message, an owned label per IPv4 address): an unchanged apply
    /// reads each of them once per run, 3,000 on a large instance.
    fn dump_raw<T>(
        &mut self,
        payload: RouteNetlinkMessage,
        what: &str,
        take: impl FnMut(&[u8]) -> std::result::Result<Option<T>, String>,
    ) -> Result<Vec<T>> {
        self.exchange(payload, NLM_F_REQUEST | NLM_F_DUMP, what, take)
    }

    /// Sends `payload` with the header's `flags` and gives `take` each message of
    /// the answer (its bytes, netlink header first) until the dump's end
    /// (`NLMSG_DONE`) or, for a request with `NLM_F_ACK`, the acknowledgement
    /// (`NLMSG_ERROR` with no errno). What `take` returns is
    /// kept; its error, an error answer or a failed socket is an error naming
    /// `what`.
    fn exchange<T>(
        &mut self,
        payload: RouteNetlinkMessage,
        flags: u16,
        what: &str,
        mut take: impl FnMut(&[u8]) -> std::result::Result<Option<T>, String>,
    ) -> Result<Vec<T>> {
        let mut found = Vec::new();
        let failed = |cause| failure(what.to_owned(), cause);
        let mut req = NetlinkMessage::from(payload);
        req.header.flags = flags;
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        req.header.sequence_number = seq;
        req.finalize();
        let mut out = vec![0; req.buffer_len()];
        req.serialize(&mut out);
        self.socket
            .send(&out, 0)
            .map_err(|e| failed(NetlinkCause::Socket(e)))?;
        loop {
            self.buf.clear();
            self.socket
                .recv_from(&mut self.buf, 0)
                .map_err(|e| failed(NetlinkCause::Socket(e)))?;
            let mut data = self.buf.as_slice();
            while let Some((kind, msg_seq, msg, rest)) = next_message(data) {
                data = rest;
                if msg_seq != seq {
                    continue;
                }
                match kind {
                    NLMSG_DONE | NLMSG_ERROR => {
                        // The errno, negated, follows the header (0: none).
                        let code = msg
                            .get(HEADER..HEADER + 4)
                            .and_then(|b| <[u8; 4]>::try_from(b).ok())
                            .map_or(0, i32::from_ne_bytes);
                        if code < 0 {
                            let errno = code.checked_neg().unwrap_or(libc::EIO);
                            return Err(failed(NetlinkCause::Kernel(
                                std::io::Error::from_raw_os_error(errno),
                            )));
                        }
                        if kind == NLMSG_DONE || flags & NLM_F_ACK != 0 {
                            return Ok(found);
                        }
                    }
                    _ => match take(msg) {
                        Ok(t) => found.extend(t),
                        Err(e) => {
                            return Err(failed(NetlinkCause::Socket(std::io::Error::new(
                                std::io::ErrorKind::InvalidData,
                                format!("an answer that does not parse: {e}"),
                            ))));
                        }
                    },
                }
            }
        }
    }

    /// Every link (`ip link show`).
    fn links(&mut self) -> Result<Vec<LinkMessage>> {
        self.dump(
            RouteNetlinkMessage::GetLink(LinkMessage::default()),
            "ip link show",
            |_| true,
            |m| match m {
                RouteNetlinkMessage::NewLink(m) => Some(m),
                _ => None,
            },
        )
    }

    /// Every rule of both families (`ip rule show`; `ip -6 rule show`), from one
    /// `AF_UNSPEC` dump: the kernel answers every family's rules in one request.
    fn rules(&mut self) -> Result<Vec<RuleMessage>> {
        self.dump(
            RouteNetlinkMessage::GetRule(RuleMessage::default()),
            "ip rule show",
            |msg| msg.get(HEADER).copied().is_some_and(ip_family),
            |m| match m {
                RouteNetlinkMessage::NewRule(m) => Some(m),
                _ => None,
            },
        )
    }

    /// Every route of both families in every table but the local one (`ip route
    /// show table all`), from one `AF_UNSPEC` dump: without strict checking the
    /// kernel dumps every table of every family; callers filter. The local
    /// table's routes (the header's `rtm_table`, the fifth byte after the netlink
    /// header) are passed over unparsed: every caller drops them.
    fn routes(&mut self, what: &str) -> Result<Vec<RouteMessage>> {
        self.dump(
            RouteNetlinkMessage::GetRoute(RouteMessageBuilder::<IpAddr>::new().build()),
            what,
            |msg| {
                msg.get(HEADER).copied().is_some_and(ip_family)
                    && msg.get(HEADER + 4) != Some(&LOCAL_TABLE)
            },
            |m| match m {
                RouteNetlinkMessage::NewRoute(m) => Some(m),
                _ => None,
            },
        )
    }

    /// leasehook's rules of both families ([`rule_of_bytes`]), from one
    /// `AF_UNSPEC` dump, as [`Self::rules`] reads every rule.
    fn owned_rules(&mut self) -> Result<Vec<Rule>> {
        self.dump_raw(
            RouteNetlinkMessage::GetRule(RuleMessage::default()),
            "ip rule show",
            |msg| {
                if !msg.get(HEADER).copied().is_some_and(ip_family) {
                    return Ok(None);
                }
                rule_of_bytes(msg).map_err(str::to_owned)
            },
        )
    }

    /// Every address of every link, read as [`address_of_bytes`] reads it (`ip
    /// address show`).
    fn link_addresses_of(
        &mut self,
        names: &std::collections::BTreeMap<u32, IfName>,
    ) -> Result<Vec<(Address, bool)>> {
        self.dump_raw(
            RouteNetlinkMessage::GetAddress(AddressMessage::default()),
            "ip address show",
            |msg| address_of_bytes(msg, names).map_err(str::to_owned),
        )
    }

    /// Sends `msgs` in one datagram and returns each one's answer, in order.
    fn send_batch(&mut self, mut msgs: Vec<NetlinkMessage<RouteNetlinkMessage>>) -> Vec<Answer> {
        let n = msgs.len();
        if n == 0 {
            return Vec::new();
        }
        let first = self.seq;
        self.seq = self.seq.wrapping_add(u32::try_from(n).unwrap_or(u32::MAX));
        let mut out = Vec::new();
        for (seq, msg) in (first..).zip(msgs.iter_mut()) {
            msg.header.sequence_number = seq;
            msg.finalize();
            let start = out.len();
            out.resize(start + msg.buffer_len().next_multiple_of(4), 0);
            if let Some(slot) = out.get_mut(start..start + msg.buffer_len()) {
                msg.serialize(slot);
            }
        }
        let failed_all = |e: &std::io::Error| vec![Err(Refusal::socket(e)); n];
        if let Err(e) = self.socket.send(&out, 0) {
            return failed_all(&e);
        }
        let mut answers: Vec<Option<Answer>> = vec![None; n];
        let mut pending = n;
        while pending > 0 {
            self.buf.clear();
            if let Err(e) = self.socket.recv_from(&mut self.buf, 0) {
                let mut all = failed_all(&e).into_iter();
                return answers
                    .into_iter()
                    .map(|a| a.or_else(|| all.next()).unwrap_or(Ok(())))
                    .collect();
            }
            let mut data = self.buf.as_slice();
            while let Ok(msg) = NetlinkMessage::<RouteNetlinkMessage>::deserialize(data) {
                let len = usize::try_from(msg.header.length)
                    .unwrap_or(0)
                    .next_multiple_of(4);
                if let NetlinkPayload::Error(e) = &msg.payload {
                    let idx = usize::try_from(msg.header.sequence_number.wrapping_sub(first))
                        .unwrap_or(usize::MAX);
                    if let Some(slot @ None) = answers.get_mut(idx) {
                        *slot = Some(match e.code {
                            None => Ok(()),
                            // The kernel sends the errno negated.
                            Some(_) => Err(Refusal::Kernel(
                                e.raw_code().checked_neg().unwrap_or(libc::EIO),
                            )),
                        });
                        pending -= 1;
                    }
                }
                match data.get(len..) {
                    Some(rest) if len > 0 && !rest.is_empty() => data = rest,
                    _ => break,
                }
            }
        }
        answers.into_iter().map(|a| a.unwrap_or(Ok(()))).collect()
    }
}

/// `NLMSG_ERROR` and `NLMSG_DONE`: an error (or acknowledgement) and a dump's end.
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;

/// The first netlink message of `data`: its type, its sequence number, its bytes
/// (header included) and the rest of `data`; `None` at the end or at a header that
/// does not fit.
fn next_message(data: &[u8]) -> Option<(u16, u32, &[u8], &[u8])> {
    let field = |at: usize| {
        data.get(at..at + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
    };
    let len = usize::try_from(u32::from_ne_bytes(field(0)?)).ok()?;
    let kind = data
        .get(4..6)
        .and_then(|b| <[u8; 2]>::try_from(b).ok())
        .map(u16::from_ne_bytes)?;
    let seq = u32::from_ne_bytes(field(8)?);
    let msg = data.get(..len).filter(|_| len >= HEADER)?;
    let rest = data.get(len.next_multiple_of(4)..).unwrap_or_default();
    Some((kind, seq, msg, rest))
}

/// Flags of an add request: `ip ... add` (create, fail if it exists).
const ADD: u16 = NLM_F_REQUEST | NLM_F_ACK | NLM_F_EXCL | NLM_F_CREATE;
/// Flags of a delete request.
const DEL: u16 = NLM_F_REQUEST | NLM_F_ACK;
/// Flags of a change to an existing object (`ip link set`).
const SET: u16 = NLM_F_REQUEST | NLM_F_ACK;

/// The netlink request for one operation, flagged like `ip ... add` (create,
/// exclusive) or `ip ... del`.
fn request_for(op: &Op, links: &LinkIndex) -> Result<NetlinkMessage<RouteNetlinkMessage>> {
    let failed = |cause: NetlinkCause| failure(op.to_string(), cause);
    let index = |dev: &IfName| {
        links
            .get(dev)
            .copied()
            .ok_or_else(|| failed(NetlinkCause::NoSuchLink(dev.clone())))
    };
    let (payload, flags) = match op {
        Op::AddRule(r) => (RouteNetlinkMessage::NewRule(rule_message(r)), ADD),
        Op::DelRule(r) => (RouteNetlinkMessage::DelRule(rule_message(r)), DEL),
        Op::AddRoute(r) => (
            RouteNetlinkMessage::NewRoute(
                route_message(r, index(&r.dev)?).map_err(|e| failed(NetlinkCause::Request(e)))?,
            ),
            ADD,
        ),
        Op::DelRoute(r) => (
            RouteNetlinkMessage::DelRoute(
                route_message(r, index(&r.dev)?).map_err(|e| failed(NetlinkCause::Request(e)))?,
            ),
            DEL,
        ),
        Op::AddAddress(a) => {
            let mut msg = address_message(a, index(&a.dev)?);
            msg.attributes
                .push(AddressAttribute::Protocol(AddressProtocol::from(PROTOCOL)));
            if let Some(flags) = address_flags(a) {
                msg.attributes.push(AddressAttribute::Flags(flags));
            }
            (RouteNetlinkMessage::NewAddress(msg), ADD)
        }
        Op::DelAddress(a) => (
            RouteNetlinkMessage::DelAddress(address_message(a, index(&a.dev)?)),
            DEL,
        ),
    };
    let mut req = NetlinkMessage::from(payload);
    req.header.flags = flags;
    Ok(req)
}

/// What one dump of addresses, routes and rules says, for the links `names`.
struct Dumped {
    owned: State,
    addresses: Vec<(Address, bool)>,
    foreign_routes: Vec<super::ForeignRoute>,
    main_routes: Vec<MainRoute>,
}

impl NetlinkApplier {
    /// Every address on `links`, and whether it carries leasehook's protocol.
    fn addresses(&mut self, links: &LinkIndex) -> Result<Vec<(Address, bool)>> {
        let names = names_of(links);
        self.dumps += 1;
        self.writer.link_addresses_of(&names)
    }

    /// One dump each of rules, routes (every table, both families) and
    /// addresses, read for the links of `links`.
    fn dump_state(&mut self, links: &LinkIndex) -> Result<Dumped> {
        let names = names_of(links);
        self.dumps += 3;
        let rules = self.writer.owned_rules()?;
        let routes = self.writer.routes("ip route show table all")?;
        let addresses = self.writer.link_addresses_of(&names)?;
        let owned = State {
            rules: rules.into_iter().collect(),
            routes: routes.iter().filter_map(|m| route_of(m, &names)).collect(),
            addresses: std::collections::BTreeSet::new(),
        };
        let foreign_routes = routes
            .iter()
            .filter_map(|m| {
                let r = foreign_route_of(m, &names).filter(|r| owned_table(r.table))?;
                Some(super::ForeignRoute {
                    table: r.table,
                    to: r.to,
                    via: r.via,
                    dev: r.dev,
                    protocol: u8::from(m.header.protocol),
                })
            })
            .collect();
        Ok(Dumped {
            owned,
            addresses,
            foreign_routes,
            main_routes: routes.iter().filter_map(main_route_of).collect(),
        })
    }
}

impl LinkKernel for NetlinkApplier {
    fn link_details(&mut self) -> Result<Vec<LinkDetail>> {
        self.dumps += 1;
        Ok(self.writer.links()?.iter().filter_map(link_of).collect())
    }

    /// On the synchronous socket, one datagram: the link created (`NLM_F_EXCL`),
    /// then its alias set by name; a link whose alias failed is deleted.
    fn add_link(&mut self, new: &NewLink, lower: u32) -> Result<u32> {
        let name = new.name.to_string();
        let mut info = vec![LinkInfo::Kind(InfoKind::MacVlan)];
        let mut made = LinkMessage::default();
        made.header.flags = LinkFlags::Up;
        made.header.change_mask = LinkFlags::Up;
        made.attributes = vec![
            LinkAttribute::IfName(name.clone()),
            LinkAttribute::Link(lower),
        ];
        let mac = match new.kind {
            NewKind::Macvlan(mac) => Some(mac),
            NewKind::Vlan(id, mac) => {
                info = vec![
                    LinkInfo::Kind(InfoKind::Vlan),
                    LinkInfo::Data(InfoData::Vlan(vec![InfoVlan::Id(id)])),
                ];
                mac
            }
        };
        if let Some(m) = mac {
            made.attributes
                .push(LinkAttribute::Address(m.octets().to_vec()));
        }
        made.attributes.push(LinkAttribute::LinkInfo(info));
        let mut marked = LinkMessage::default();
        marked.attributes = vec![
            LinkAttribute::IfName(name.clone()),
            LinkAttribute::IfAlias(new.alias()),
        ];
        let msgs = [(made, ADD), (marked, SET)].map(|(m, flags)| {
            let mut msg = NetlinkMessage::from(RouteNetlinkMessage::NewLink(m));
            msg.header.flags = flags;
            msg
        });
        let mut answers = self.writer.send_batch(msgs.into()).into_iter();
        let object = format!("ip link add {name}");
        if let Some(Err(e)) = answers.next() {
            return Err(failure(object, e.cause()));
        }
        let index = self
            .link_details()?
            .into_iter()
            .find(|d| d.name == new.name)
            .map(|d| d.index)
            .ok_or_else(|| failure(object, NetlinkCause::NoSuchLink(new.name.clone())))?;
        if let Some(Err(e)) = answers.next() {
            // Unmarked, it would never be leasehook's to delete.
            let _ = self.del_link(index);
            return Err(failure(format!("ip link set {name} alias"), e.cause()));
        }
        Ok(index)
    }

    fn del_link(&mut self, index: u32) -> Result<()> {
        let mut gone = LinkMessage::default();
        gone.header.index = index;
        let mut msg = NetlinkMessage::from(RouteNetlinkMessage::DelLink(gone));
        msg.header.flags = DEL;
        match self.writer.send_batch(vec![msg]).pop() {
            Some(Err(e)) => Err(failure(format!("ip link del {index}"), e.cause())),
            _ => Ok(()),
        }
    }
}

impl Applier for NetlinkApplier {
    fn links(&mut self) -> Result<Vec<KernelLink>> {
        Ok(nics_of(&self.link_details()?))
    }

    /// One dump each of rules, routes and addresses (both families in one
    /// `AF_UNSPEC` request each).
    fn observe(&mut self, links: &LinkIndex, recorded: &BTreeSet<Address>) -> Result<Observed> {
        let dumped = self.dump_state(links)?;
        // One address dump, split by owner.
        let mut state = dumped.owned;
        let mut foreign_addresses = BTreeSet::new();
        for (a, owned) in dumped.addresses {
            if owned || recorded.contains(&a) {
                state.addresses.insert(a);
            } else {
                foreign_addresses.insert(a);
            }
        }
        Ok(Observed {
            owned: state,
            foreign_addresses,
            foreign_routes: dumped.foreign_routes,
        })
    }

    fn link_addresses(&mut self, links: &LinkIndex) -> Result<Vec<Address>> {
        Ok(self.addresses(links)?.into_iter().map(|(a, _)| a).collect())
    }

    /// One dump of every family (`AF_UNSPEC`: the kernel answers IPv4 and
    /// IPv6 in one request), kept to the main table.
    fn main_routes(&mut self) -> Result<Vec<MainRoute>> {
        self.dumps += 1;
        Ok(self
            .writer
            .routes("ip route show table main")?
            .iter()
            .filter_map(main_route_of)
            .collect())
    }

    /// Four dumps: links, rules, routes (whose main table is also
    /// [`Applier::main_routes`]'s), addresses.
    fn snapshot(&mut self) -> Result<Snapshot> {
        let links = self.links()?;
        self.snapshot_on(links)
    }

    /// Three dumps: rules, routes, addresses, on `links`.
    fn snapshot_on(&mut self, links: Vec<KernelLink>) -> Result<Snapshot> {
        let dumped = self.dump_state(&super::index_of(&links))?;
        Ok(Snapshot {
            links,
            owned: dumped.owned,
            addresses: dumped.addresses,
            foreign_routes: dumped.foreign_routes,
            main_routes: dumped.main_routes,
        })
    }

    fn execute(&mut self, op: &Op, links: &LinkIndex) -> Result<()> {
        self.execute_many(std::slice::from_ref(op), links)
            .pop()
            .unwrap_or(Ok(()))
    }

    /// Sends the requests in batches of up to 64 netlink messages per
    /// datagram (`sendmsg` once, then read the acknowledgements). The kernel handles
    /// the messages of a datagram in order and answers each, failures included, so
    /// an address still goes in before the route that uses it as source.
    fn execute_many(&mut self, ops: &[Op], links: &LinkIndex) -> Vec<Result<()>> {
        let mut results = Vec::with_capacity(ops.len());
        for chunk in ops.chunks(BATCH) {
            let requests: Vec<Result<NetlinkMessage<RouteNetlinkMessage>>> =
                chunk.iter().map(|op| request_for(op, links)).collect();
            let ready: Vec<NetlinkMessage<RouteNetlinkMessage>> = requests
                .iter()
                .filter_map(|r| r.as_ref().ok().cloned())
                .collect();
            let mut answers = self.writer.send_batch(ready).into_iter();
            for (op, request) in chunk.iter().zip(requests) {
                results.push(match request {
                    Err(e) => Err(e),
                    Ok(_) => match answers.next() {
                        Some(Ok(())) => Ok(()),
                        Some(Err(why)) => Err(failure(op.to_string(), why.cause())),
                        None => Err(failure(op.to_string(), NetlinkCause::NoAnswer)),
                    },
                });
            }
        }
        results
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtnetlink::packet_route::address::AddressAttribute;
    use rtnetlink::packet_route::route::RouteProtocol;

    fn bytes(m: RouteNetlinkMessage) -> Vec<u8> {
        let mut msg = NetlinkMessage::from(m);
        msg.finalize();
        let mut out = vec![0; msg.buffer_len()];
        msg.serialize(&mut out);
        out
    }

    fn rule(from: &str, table: u32, priority: Option<u32>) -> Rule {
        Rule {
            from: from.parse().unwrap(),
            to: None,
            table,
            priority,
        }
    }

    /// The byte reader keeps what netlink-packet-route's message and `rule_of`
    /// kept, rule for rule: leasehook's rules of both families, with and without
    /// a priority, `from all`, a table in the header only; others' protocols, a
    /// non-table action and a reserved table dropped.
    #[test]
    fn rules_read_from_bytes_as_from_the_parsed_message() {
        let mut cases: Vec<RuleMessage> = [
            rule("10.0.0.5/32", 10001, Some(10001)),
            rule("10.0.0.0/28", 10001, None),
            rule("2600:1f18::100/128", 10002, Some(10002)),
            rule("0.0.0.0/0", 10003, Some(32000)),
            rule("::/0", 10004, Some(32000)),
            rule("10.0.0.9/32", 200, Some(5)),
            rule("10.0.0.9/32", 254, Some(5)),
        ]
        .iter()
        .map(rule_message)
        .collect();
        let mut theirs = rule_message(&rule("10.1.0.5/32", 10001, Some(7)));
        for a in &mut theirs.attributes {
            if let RuleAttribute::Protocol(p) = a {
                *p = RouteProtocol::Static;
            }
        }
        cases.push(theirs);
        let mut header_table = rule_message(&rule("10.2.0.5/32", 100, Some(9)));
        header_table
            .attributes
            .retain(|a| !matches!(a, RuleAttribute::Table(_)));
        cases.push(header_table);
        let mut blackhole = rule_message(&rule("10.3.0.5/32", 10001, Some(9)));
        blackhole.header.action = RuleAction::Blackhole;
        cases.push(blackhole);
        // An operator's rule to a destination (`nics[].rules`, issue 36), both
        // families: FRA_DST and its length travel and come back.
        let to = |from: &str, to: &str| Rule {
            to: Some(to.parse().unwrap()),
            ..rule(from, 10001, Some(9000))
        };
        let with_dst = [
            to("0.0.0.0/0", "198.51.100.0/24"),
            to("::/0", "2001:db8:100::/48"),
        ];
        cases.extend(with_dst.iter().map(rule_message));
        let mut ours = 0;
        for m in cases {
            let want = rule_of(&m);
            ours += usize::from(want.is_some());
            let got = rule_of_bytes(&bytes(RouteNetlinkMessage::NewRule(m.clone())));
            assert_eq!(got, Ok(want), "{m:?}");
        }
        assert_eq!(ours, 9);
        for r in with_dst {
            let got = rule_of_bytes(&bytes(RouteNetlinkMessage::NewRule(rule_message(&r))));
            assert_eq!(got, Ok(Some(r)));
        }
    }

    /// Addresses too: IPv4 (`IFA_LOCAL`, a label) and IPv6 (`IFA_ADDRESS` only),
    /// with and without leasehook's `IFA_PROTO`, on a known link and an unknown one.
    #[test]
    fn addresses_read_from_bytes_as_from_the_parsed_message() {
        let names: std::collections::BTreeMap<u32, IfName> =
            [(3, IfName::try_new("ens5").unwrap())].into();
        let mut cases = Vec::new();
        for (net, index, proto) in [
            ("10.0.0.5/24", 3, Some(PROTOCOL)),
            ("10.0.0.6/32", 3, None),
            ("2600:1f18::100/128", 3, Some(PROTOCOL)),
            ("2600:1f18::101/64", 3, Some(4)),
            ("10.0.0.7/32", 9, Some(PROTOCOL)),
        ] {
            let a = Address {
                addr: net.parse().unwrap(),
                dev: IfName::try_new("ens5").unwrap(),
            };
            let mut m = address_message(&a, index);
            if a.addr.addr().is_ipv4() {
                m.attributes
                    .push(AddressAttribute::Label("ens5".to_owned()));
            }
            if let Some(p) = proto {
                m.attributes.push(AddressAttribute::Protocol(p.into()));
            }
            cases.push(m);
        }
        let mut read = 0;
        for m in cases {
            let want = address_of(&m, &names);
            read += usize::from(want.is_some());
            let got = address_of_bytes(&bytes(RouteNetlinkMessage::NewAddress(m.clone())), &names);
            assert_eq!(got, Ok(want), "{m:?}");
        }
        assert_eq!(read, 4);
    }

    /// An attribute longer than its message, or an address of neither 4 nor 16
    /// bytes, is a message that does not parse (the dump fails), not a rule or an
    /// address read wrong.
    #[test]
    fn attributes_that_do_not_fit_do_not_parse() {
        let mut b = bytes(RouteNetlinkMessage::NewRule(rule_message(&rule(
            "10.0.0.5/32",
            10001,
            Some(1),
        ))));
        let at = HEADER + 12;
        let too_long = u16::try_from(b.len()).unwrap();
        b[at..at + 2].copy_from_slice(&too_long.to_ne_bytes());
        assert_eq!(rule_of_bytes(&b), Err(OVERRUN));
        let mut b = bytes(RouteNetlinkMessage::NewRule(rule_message(&rule(
            "10.0.0.5/32",
            10001,
            Some(1),
        ))));
        // FRA_TABLE (8 bytes) comes first: make it a 5-byte FRA_SRC.
        b[at..at + 4].copy_from_slice(&[5, 0, 2, 0]);
        assert_eq!(rule_of_bytes(&b), Err(OVERRUN));
        assert_eq!(rule_of_bytes(&b[..HEADER + 4]), Err(SHORT));
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the [`Applier`] that talks rtnetlink to the kernel of the current
//! network namespace.
//!
//! rtnetlink is asynchronous; the runtime it needs is a current-thread tokio runtime
//! private to [`NetlinkApplier`] (no thread is spawned), and every method blocks on
//! it. Nothing of tokio appears in the API. The netlink socket belongs to the
//! network namespace it was created in.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use futures_util::TryStreamExt as _;
use ipnet::IpNet;
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::packet_route::address::{
    AddressAttribute, AddressFlags, AddressMessage, AddressProtocol,
};
use rtnetlink::packet_route::link::{LinkAttribute, LinkMessage};
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteMessage, RouteProtocol, RouteScope,
};
use rtnetlink::packet_route::rule::{RuleAction, RuleAttribute, RuleMessage};
use rtnetlink::{AddressMessageBuilder, Handle, IpVersion, RouteMessageBuilder};

use super::{Applier, KernelLink, LinkIndex, PROTOCOL};
use crate::diff::{Op, State};
use crate::error::{Error, Result};
use crate::model::{Address, IfName, MacAddr, Route, Rule, Scope};

/// The tables whose rules and routes leasehook may own: everything but the
/// kernel's reserved ones.
fn owned_table(t: u32) -> bool {
    !crate::constants::RESERVED_TABLES.contains(&t)
}

/// Applies operations through rtnetlink.
#[derive(Debug)]
pub struct NetlinkApplier {
    rt: tokio::runtime::Runtime,
    handle: Handle,
}

fn nl_error(object: &str, e: &rtnetlink::Error) -> Error {
    let (message, errno) = match e {
        rtnetlink::Error::NetlinkError(m) => {
            let errno = m.raw_code().checked_neg();
            (m.to_io().to_string(), errno)
        }
        other => (other.to_string(), None),
    };
    Error::Netlink {
        object: object.to_owned(),
        message,
        errno,
        rolled_back: 0,
        rollback_errors: Vec::new(),
    }
}

impl NetlinkApplier {
    /// Opens a netlink connection in the current network namespace.
    pub fn try_new() -> Result<Self> {
        let setup = |e: std::io::Error| Error::Netlink {
            object: "netlink socket".to_owned(),
            message: e.to_string(),
            errno: e.raw_os_error(),
            rolled_back: 0,
            rollback_errors: Vec::new(),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .map_err(setup)?;
        let handle = rt.block_on(async {
            let (conn, handle, _) = rtnetlink::new_connection()?;
            tokio::spawn(conn);
            Ok::<_, std::io::Error>(handle)
        });
        Ok(Self {
            handle: handle.map_err(setup)?,
            rt,
        })
    }
}

fn link_of(msg: &LinkMessage) -> Option<KernelLink> {
    let mut name = None;
    let mut mac = None;
    for a in &msg.attributes {
        match a {
            LinkAttribute::IfName(n) => name = IfName::try_new(n).ok(),
            LinkAttribute::Address(bytes) => {
                mac = <[u8; 6]>::try_from(bytes.as_slice()).ok().map(MacAddr::new);
            }
            _ => {}
        }
    }
    Some(KernelLink {
        index: msg.header.index,
        name: name?,
        mac,
    })
}

fn route_ip(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

fn rule_of(msg: &RuleMessage) -> Option<Rule> {
    let mut owned = false;
    let (mut src, mut table, mut priority) = (None, u32::from(msg.header.table), None);
    for a in &msg.attributes {
        match a {
            RuleAttribute::Protocol(p) => owned = u8::from(*p) == PROTOCOL,
            RuleAttribute::Source(ip) => src = Some(*ip),
            RuleAttribute::Table(t) => table = *t,
            RuleAttribute::Priority(p) => priority = Some(*p),
            _ => {}
        }
    }
    if !owned || msg.header.action != RuleAction::ToTable || !owned_table(table) {
        return None;
    }
    let from = match src {
        Some(ip) => IpNet::new(ip, msg.header.src_len).ok()?,
        None => return None,
    };
    Some(Rule {
        from,
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
    let unspecified = match msg.header.address_family {
        AddressFamily::Inet6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        _ => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    };
    let to = IpNet::new(
        dst.unwrap_or(unspecified),
        msg.header.destination_prefix_length,
    )
    .ok()?;
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
    msg.attributes.push(RuleAttribute::Source(r.from.addr()));
    if let Some(p) = r.priority {
        msg.attributes.push(RuleAttribute::Priority(p));
    }
    msg.attributes
        .push(RuleAttribute::Protocol(RouteProtocol::from(PROTOCOL)));
    msg
}

fn route_message(r: &Route, index: u32) -> std::result::Result<RouteMessage, String> {
    let scope = if r.scope == Some(Scope::Link) {
        RouteScope::Link
    } else {
        RouteScope::Universe
    };
    let protocol = RouteProtocol::from(PROTOCOL);
    match (r.to, r.via, r.src) {
        (IpNet::V4(to), via, src) => {
            let mut b = RouteMessageBuilder::<Ipv4Addr>::new()
                .destination_prefix(to.addr(), to.prefix_len())
                .output_interface(index)
                .table_id(r.table)
                .scope(scope)
                .protocol(protocol);
            match via {
                Some(IpAddr::V4(g)) => b = b.gateway(g),
                Some(IpAddr::V6(_)) => return Err("IPv6 gateway on an IPv4 route".to_owned()),
                None => {}
            }
            match src {
                Some(IpAddr::V4(s)) => b = b.pref_source(s),
                Some(IpAddr::V6(_)) => return Err("IPv6 source on an IPv4 route".to_owned()),
                None => {}
            }
            Ok(b.build())
        }
        (IpNet::V6(to), via, src) => {
            let mut b = RouteMessageBuilder::<Ipv6Addr>::new()
                .destination_prefix(to.addr(), to.prefix_len())
                .output_interface(index)
                .table_id(r.table)
                .scope(scope)
                .protocol(protocol);
            match via {
                Some(IpAddr::V6(g)) => b = b.gateway(g),
                Some(IpAddr::V4(_)) => return Err("IPv4 gateway on an IPv6 route".to_owned()),
                None => {}
            }
            match src {
                Some(IpAddr::V6(s)) => b = b.pref_source(s),
                Some(IpAddr::V4(_)) => return Err("IPv4 source on an IPv6 route".to_owned()),
                None => {}
            }
            Ok(b.build())
        }
    }
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

impl Applier for NetlinkApplier {
    fn links(&mut self) -> Result<Vec<KernelLink>> {
        let handle = self.handle.clone();
        self.rt.block_on(async move {
            let msgs: Vec<LinkMessage> = handle
                .link()
                .get()
                .execute()
                .try_collect()
                .await
                .map_err(|e| nl_error("ip link show", &e))?;
            Ok(msgs.iter().filter_map(link_of).collect())
        })
    }

    fn observe(&mut self, links: &LinkIndex, recorded: &BTreeSet<Address>) -> Result<State> {
        let names: std::collections::BTreeMap<u32, IfName> =
            links.iter().map(|(n, i)| (*i, n.clone())).collect();
        let handle = self.handle.clone();
        self.rt.block_on(async move {
            let mut state = State::default();
            for version in [IpVersion::V4, IpVersion::V6] {
                let rules: Vec<RuleMessage> = handle
                    .rule()
                    .get(version)
                    .execute()
                    .try_collect()
                    .await
                    .map_err(|e| nl_error("ip rule show", &e))?;
                state.rules.extend(rules.iter().filter_map(rule_of));
            }
            // Without strict checking the kernel dumps every table; we filter here.
            let dumps = [
                RouteMessageBuilder::<Ipv4Addr>::new().build(),
                RouteMessageBuilder::<Ipv6Addr>::new().build(),
            ];
            for query in dumps {
                let routes: Vec<RouteMessage> = handle
                    .route()
                    .get(query)
                    .execute()
                    .try_collect()
                    .await
                    .map_err(|e| nl_error("ip route show table all", &e))?;
                state
                    .routes
                    .extend(routes.iter().filter_map(|m| route_of(m, &names)));
            }
            let addrs: Vec<AddressMessage> = handle
                .address()
                .get()
                .execute()
                .try_collect()
                .await
                .map_err(|e| nl_error("ip address show", &e))?;
            state.addresses.extend(
                addrs
                    .iter()
                    .filter_map(|m| address_of(m, &names))
                    .filter(|(a, owned)| *owned || recorded.contains(a))
                    .map(|(a, _)| a),
            );
            Ok(state)
        })
    }

    fn execute(&mut self, op: &Op, links: &LinkIndex) -> Result<()> {
        let object = op.to_string();
        let index = |dev: &IfName| {
            links.get(dev).copied().ok_or_else(|| Error::Netlink {
                object: object.clone(),
                message: format!("no link named {dev}"),
                errno: Some(19),
                rolled_back: 0,
                rollback_errors: Vec::new(),
            })
        };
        let invalid = |message: String| Error::Netlink {
            object: object.clone(),
            message,
            errno: None,
            rolled_back: 0,
            rollback_errors: Vec::new(),
        };
        let handle = self.handle.clone();
        let result = match op {
            Op::AddRule(r) => {
                let mut req = handle.rule().add();
                *req.message_mut() = rule_message(r);
                self.rt.block_on(req.execute())
            }
            Op::DelRule(r) => self
                .rt
                .block_on(handle.rule().del(rule_message(r)).execute()),
            Op::AddRoute(r) => {
                let msg = route_message(r, index(&r.dev)?).map_err(invalid)?;
                self.rt.block_on(handle.route().add(msg).execute())
            }
            Op::DelRoute(r) => {
                let msg = route_message(r, index(&r.dev)?).map_err(invalid)?;
                self.rt.block_on(handle.route().del(msg).execute())
            }
            Op::AddAddress(a) => {
                let i = index(&a.dev)?;
                let mut req = handle.address().add(i, a.addr.addr(), a.addr.prefix_len());
                let attrs = &mut req.message_mut().attributes;
                attrs.push(AddressAttribute::Protocol(AddressProtocol::from(PROTOCOL)));
                if a.addr.addr().is_ipv6() {
                    // The cloud assigned it; duplicate address detection only delays it.
                    attrs.push(AddressAttribute::Flags(AddressFlags::Nodad));
                }
                self.rt.block_on(req.execute())
            }
            Op::DelAddress(a) => {
                let msg = address_message(a, index(&a.dev)?);
                self.rt.block_on(handle.address().del(msg).execute())
            }
        };
        result.map_err(|e| nl_error(&object, &e))
    }
}

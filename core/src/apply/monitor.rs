// SPDX-License-Identifier: Apache-2.0
//! Performs IO: rtnetlink's notifications, for `leasehook watch`'s self-healing
//! (SPEC §3.10).
//!
//! A [`Monitor`] is one netlink socket bound to the multicast groups of links,
//! IPv4 and IPv6 addresses, routes and rules (what `ip monitor link address route
//! rule` listens to). It is blocking and needs no runtime: idle, the thread that
//! waits is asleep in `recv(2)`, and [`Monitor::wait`] returns at the latest
//! after the timeout it is given (`SO_RCVTIMEO`), so the caller can look at its
//! stop flag. What it returns is coarse, one [`Notice`] per message: the kind
//! of object, added or removed, its family, table, link and whether it carries
//! leasehook's protocol; the caller compares the records with the kernel to see
//! what is missing. A socket that overflowed (`ENOBUFS`: the kernel dropped
//! notifications) is [`Wait::Overrun`]: something changed, nobody knows what.
//!
//! The socket belongs to the network namespace it was created in, like the
//! applier's.

use std::os::fd::AsFd as _;
use std::time::Duration;

use rtnetlink::packet_core::{NetlinkMessage, NetlinkPayload};
use rtnetlink::packet_route::address::AddressAttribute;
use rtnetlink::packet_route::route::RouteAttribute;
use rtnetlink::packet_route::rule::RuleAttribute;
use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};
use rtnetlink::sys::protocols::NETLINK_ROUTE;
use rtnetlink::sys::{Socket, SocketAddr};

use super::PROTOCOL;
use crate::error::{Error, NetlinkCause, Result};
use crate::model::Family;

/// The multicast groups (`RTMGRP_*`, the legacy bit mask: every group here is
/// below 32): links, IPv4 addresses, routes and rules, IPv6 addresses, routes
/// and rules.
const GROUPS: u32 = 0x1 // RTMGRP_LINK
    | 0x10 // RTMGRP_IPV4_IFADDR
    | 0x40 // RTMGRP_IPV4_ROUTE
    | 0x80 // RTMGRP_IPV4_RULE
    | 0x100 // RTMGRP_IPV6_IFADDR
    | 0x400 // RTMGRP_IPV6_ROUTE
    | (1 << (19 - 1)); // RTNLGRP_IPV6_RULE

/// The receive buffer: a notification datagram is at most a page or two.
const BUFFER: usize = 64 * 1024;

/// The kind of object a notification is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A link (`RTM_NEWLINK`, `RTM_DELLINK`: also a link going up or down).
    Link,
    /// An address.
    Address,
    /// A route.
    Route,
    /// A policy rule.
    Rule,
}

/// One notification, coarsely.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notice {
    /// What kind of object.
    pub kind: Kind,
    /// Added or changed (`false`), or removed (`true`).
    pub removed: bool,
    /// Its family, for addresses, routes and rules.
    pub family: Option<Family>,
    /// Its table, for routes and rules.
    pub table: Option<u32>,
    /// Its link, for links, addresses and routes (a route's output link).
    pub ifindex: Option<u32>,
    /// It carries leasehook's protocol ([`PROTOCOL`]).
    pub ours: bool,
}

impl Notice {
    /// Whether the notice can mean that something leasehook recorded is gone: an
    /// object removed, a link changed (a link that went down took its routes with
    /// it, which IPv4 does not announce), or an object of another protocol added
    /// or replaced (`ip route replace` takes a route's place). An object of
    /// leasehook's own added (a hook's or the watcher's own write) cannot.
    pub fn may_remove(&self) -> bool {
        self.removed || self.kind == Kind::Link || !self.ours
    }
}

/// What [`Monitor::wait`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wait {
    /// Notifications (one datagram's).
    Notices(Vec<Notice>),
    /// The kernel dropped notifications (the socket's buffer overflowed):
    /// anything may have changed.
    Overrun,
    /// Nothing within the timeout (or a signal interrupted the wait).
    Timeout,
}

/// A subscriber to rtnetlink's notifications (see the module docs).
#[derive(Debug)]
pub struct Monitor {
    socket: Socket,
    buf: Vec<u8>,
    timeout: Option<Duration>,
}

fn socket_error(what: &str, e: std::io::Error) -> Error {
    Error::Netlink {
        object: what.to_owned(),
        cause: NetlinkCause::Socket(e),
        note: String::new(),
        rolled_back: 0,
        rollback_errors: Vec::new(),
    }
}

impl Monitor {
    /// Subscribes to the notifications of the current network namespace
    /// (`ip monitor link address route rule`).
    pub fn try_new() -> Result<Self> {
        let what = "netlink notification socket";
        let mut socket = Socket::new(NETLINK_ROUTE).map_err(|e| socket_error(what, e))?;
        socket
            .bind(&SocketAddr::new(0, GROUPS))
            .map_err(|e| socket_error(what, e))?;
        Ok(Self {
            socket,
            buf: Vec::with_capacity(BUFFER),
            timeout: None,
        })
    }

    /// Waits at most `timeout` (at least a millisecond) for notifications.
    pub fn wait(&mut self, timeout: Duration) -> Result<Wait> {
        let timeout = timeout.max(Duration::from_millis(1));
        if self.timeout != Some(timeout) {
            self.set_timeout(timeout)?;
        }
        self.buf.clear();
        match self.socket.recv(&mut self.buf, 0) {
            Ok(_) => Ok(Wait::Notices(parse(&self.buf))),
            Err(e) => match e.raw_os_error() {
                Some(libc::EAGAIN | libc::EINTR) => Ok(Wait::Timeout),
                Some(libc::ENOBUFS) => Ok(Wait::Overrun),
                _ => Err(socket_error("netlink notifications", e)),
            },
        }
    }

    /// `SO_RCVTIMEO` on the socket. netlink-sys has no setter and unsafe code is
    /// forbidden here, so the option is set through a duplicate of the socket's
    /// descriptor seen as a `UnixDatagram` (std's safe `setsockopt`): socket
    /// options belong to the socket, which both descriptors share; the duplicate
    /// is closed at once.
    fn set_timeout(&mut self, timeout: Duration) -> Result<()> {
        let what = "netlink notification socket: SO_RCVTIMEO";
        let dup = self
            .socket
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| socket_error(what, e))?;
        std::os::unix::net::UnixDatagram::from(dup)
            .set_read_timeout(Some(timeout))
            .map_err(|e| socket_error(what, e))?;
        self.timeout = Some(timeout);
        Ok(())
    }
}

/// Pure: the notifications of one datagram (messages that do not parse, and
/// other messages, are skipped).
pub fn parse(mut data: &[u8]) -> Vec<Notice> {
    let mut out = Vec::new();
    while let Ok(msg) = NetlinkMessage::<RouteNetlinkMessage>::deserialize(data) {
        let len = usize::try_from(msg.header.length)
            .unwrap_or(0)
            .next_multiple_of(4);
        if let NetlinkPayload::InnerMessage(m) = &msg.payload
            && let Some(n) = notice(m)
        {
            out.push(n);
        }
        match data.get(len..) {
            Some(rest) if len > 0 && !rest.is_empty() => data = rest,
            _ => break,
        }
    }
    out
}

fn family_of(f: AddressFamily) -> Option<Family> {
    match f {
        AddressFamily::Inet => Some(Family::V4),
        AddressFamily::Inet6 => Some(Family::V6),
        _ => None,
    }
}

fn notice(m: &RouteNetlinkMessage) -> Option<Notice> {
    use RouteNetlinkMessage as M;
    let blank = |kind, removed| Notice {
        kind,
        removed,
        family: None,
        table: None,
        ifindex: None,
        ours: false,
    };
    Some(match m {
        M::NewLink(l) | M::DelLink(l) => Notice {
            ifindex: Some(l.header.index),
            ..blank(Kind::Link, matches!(m, M::DelLink(_)))
        },
        M::NewAddress(a) | M::DelAddress(a) => Notice {
            family: family_of(a.header.family),
            ifindex: Some(a.header.index),
            ours: a
                .attributes
                .iter()
                .any(|at| matches!(at, AddressAttribute::Protocol(p) if u8::from(*p) == PROTOCOL)),
            ..blank(Kind::Address, matches!(m, M::DelAddress(_)))
        },
        M::NewRoute(r) | M::DelRoute(r) => {
            let mut n = Notice {
                family: family_of(r.header.address_family),
                table: Some(u32::from(r.header.table)),
                ours: u8::from(r.header.protocol) == PROTOCOL,
                ..blank(Kind::Route, matches!(m, M::DelRoute(_)))
            };
            for at in &r.attributes {
                match at {
                    RouteAttribute::Table(t) => n.table = Some(*t),
                    RouteAttribute::Oif(i) => n.ifindex = Some(*i),
                    _ => {}
                }
            }
            n
        }
        M::NewRule(r) | M::DelRule(r) => {
            let mut n = Notice {
                family: family_of(r.header.family),
                table: Some(u32::from(r.header.table)),
                ..blank(Kind::Rule, matches!(m, M::DelRule(_)))
            };
            for at in &r.attributes {
                match at {
                    RuleAttribute::Table(t) => n.table = Some(*t),
                    RuleAttribute::Protocol(p) => n.ours = u8::from(*p) == PROTOCOL,
                    _ => {}
                }
            }
            n
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtnetlink::packet_route::route::{RouteMessage, RouteProtocol};
    use rtnetlink::packet_route::rule::RuleMessage;

    fn bytes(payload: RouteNetlinkMessage) -> Vec<u8> {
        let mut msg = NetlinkMessage::from(payload);
        msg.finalize();
        let mut out = vec![0; msg.buffer_len()];
        msg.serialize(&mut out);
        out
    }

    #[test]
    fn a_datagram_of_several_messages_reads_as_one_notice_each() {
        let mut rule = RuleMessage::default();
        rule.header.family = AddressFamily::Inet;
        rule.attributes.push(RuleAttribute::Table(10001));
        rule.attributes
            .push(RuleAttribute::Protocol(RouteProtocol::from(PROTOCOL)));
        let mut route = RouteMessage::default();
        route.header.address_family = AddressFamily::Inet6;
        route.header.protocol = RouteProtocol::Boot;
        route.attributes.push(RouteAttribute::Table(10002));
        route.attributes.push(RouteAttribute::Oif(3));
        let mut data = bytes(RouteNetlinkMessage::DelRule(rule.clone()));
        data.extend(bytes(RouteNetlinkMessage::NewRoute(route)));
        data.extend(bytes(RouteNetlinkMessage::NewRule(rule)));
        let got = parse(&data);
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(
            got[0],
            Notice {
                kind: Kind::Rule,
                removed: true,
                family: Some(Family::V4),
                table: Some(10001),
                ifindex: None,
                ours: true,
            }
        );
        assert!(got[0].may_remove(), "a rule of ours removed");
        assert_eq!(got[1].kind, Kind::Route);
        assert_eq!(
            (got[1].family, got[1].table, got[1].ifindex, got[1].ours),
            (Some(Family::V6), Some(10002), Some(3), false)
        );
        assert!(
            got[1].may_remove(),
            "another protocol's route may replace ours"
        );
        assert!(!got[2].may_remove(), "our own rule added changes nothing");
    }

    #[test]
    fn garbage_is_no_notice_and_no_panic() {
        assert!(parse(&[]).is_empty());
        assert!(parse(&[0xff; 7]).is_empty());
        assert!(parse(&[0x10, 0, 0, 0, 0, 0, 0, 0]).is_empty());
    }
}

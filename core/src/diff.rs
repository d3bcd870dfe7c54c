// SPDX-License-Identifier: Apache-2.0
//! Pure: (desired [`Plan`], observed [`State`]) → the operations that turn one into
//! the other.
//!
//! The observed side is a plain value the netlink applier fills with what leasehook
//! owns (its protocol number on routes and rules) for the interfaces it is about to
//! touch; the caller scopes it, so the diff deletes everything observed that the plan
//! does not want. Operations come out in a safe order: rules are removed before the
//! routes they point at, addresses are added before routes that use them as source,
//! on-link routes before the routes through a gateway they reach (and removed after
//! them), and rules are added after every route, so traffic is never steered into
//! a half-filled table. The other added addresses come last, after the rules: a
//! packet from a new address then finds its rule from the first one on, and the
//! kernel, which walks its whole IPv6 routing tree at each new IPv6 rule, walks
//! it without the two routes each address brings (an IPv6 address is added
//! `nodad`, so it is in the tree at once): with 765 IPv6 addresses and as many
//! rules, that walk was over half of an apply's time.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::{Address, Plan, Route, Rule};

/// A set of rules, routes and addresses: what a plan wants, or what the kernel holds.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct State {
    /// Policy rules.
    pub rules: BTreeSet<Rule>,
    /// Routes (in any table).
    pub routes: BTreeSet<Route>,
    /// Addresses on links.
    pub addresses: BTreeSet<Address>,
}

impl State {
    /// Everything a plan wants, across its interfaces.
    pub fn of_plan(plan: &Plan) -> Self {
        let mut s = Self::default();
        for ip in &plan.interfaces {
            s.rules.extend(ip.rules.iter().cloned());
            s.routes.extend(ip.routes.iter().cloned());
            s.addresses.extend(ip.addresses.iter().cloned());
        }
        s
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.routes.is_empty() && self.addresses.is_empty()
    }
}

/// One change to the kernel's routing state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", content = "object", rename_all = "kebab-case")]
pub enum Op {
    /// `ip rule del ...`
    DelRule(Rule),
    /// `ip route del ...`
    DelRoute(Route),
    /// `ip address del ...`
    DelAddress(Address),
    /// `ip address add ...`
    AddAddress(Address),
    /// `ip route add ...`
    AddRoute(Route),
    /// `ip rule add ...`
    AddRule(Rule),
}

impl fmt::Display for Op {
    /// The operation as an `ip` command line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DelRule(r) => write!(f, "ip {} rule del {r}", r.family().ip_flag()),
            Self::DelRoute(r) => write!(f, "ip {} route del {r}", r.family().ip_flag()),
            Self::DelAddress(a) => write!(f, "ip {} address del {a}", a.family().ip_flag()),
            Self::AddAddress(a) => write!(
                f,
                "ip {} address add {a}{}",
                a.family().ip_flag(),
                if a.no_prefix_route() {
                    " noprefixroute"
                } else {
                    ""
                }
            ),
            Self::AddRoute(r) => write!(f, "ip {} route add {r}", r.family().ip_flag()),
            Self::AddRule(r) => write!(f, "ip {} rule add {r}", r.family().ip_flag()),
        }
    }
}

/// The operations that turn `observed` into what `desired` wants. Empty when the two
/// agree, so re-applying an unchanged plan writes nothing.
pub fn diff(desired: &Plan, observed: &State) -> Vec<Op> {
    diff_states(&State::of_plan(desired), observed)
}

/// [`diff`] over two plain states.
pub fn diff_states(want: &State, have: &State) -> Vec<Op> {
    let mut ops = Vec::new();
    ops.extend(have.rules.difference(&want.rules).cloned().map(Op::DelRule));
    // Routes through a gateway go before the on-link routes that may be the only
    // way to that gateway, and come after them when added (below).
    let (on_link, via): (Vec<&Route>, Vec<&Route>) = have
        .routes
        .difference(&want.routes)
        .partition(|r| r.via.is_none());
    ops.extend(via.into_iter().chain(on_link).cloned().map(Op::DelRoute));
    ops.extend(
        have.addresses
            .difference(&want.addresses)
            .cloned()
            .map(Op::DelAddress),
    );
    // Only the addresses a route names as its source go before the routes (the
    // kernel refuses a source the host does not hold); the rest come last.
    let sources: BTreeSet<std::net::IpAddr> = want.routes.iter().filter_map(|r| r.src).collect();
    let (early, late): (Vec<&Address>, Vec<&Address>) = want
        .addresses
        .difference(&have.addresses)
        .partition(|a| sources.contains(&a.addr.addr()));
    ops.extend(early.into_iter().cloned().map(Op::AddAddress));
    // The kernel checks a gateway in the route's own table first: its link route
    // must be there before the default route through it, because the main table
    // may not reach the gateway (a CNI took the subnet route out of main, a /32
    // lease).
    let (on_link, via): (Vec<&Route>, Vec<&Route>) = want
        .routes
        .difference(&have.routes)
        .partition(|r| r.via.is_none());
    ops.extend(on_link.into_iter().chain(via).cloned().map(Op::AddRoute));
    ops.extend(want.rules.difference(&have.rules).cloned().map(Op::AddRule));
    ops.extend(late.into_iter().cloned().map(Op::AddAddress));
    ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::IfName;

    fn rule(from: &str, table: u32) -> Rule {
        Rule {
            from: from.parse().unwrap(),
            to: None,
            table,
            priority: Some(table),
        }
    }

    #[test]
    fn one_changed_address_replaces_one_rule() {
        let have = State {
            rules: [rule("10.0.1.20/32", 10001), rule("10.0.1.21/32", 10001)].into(),
            ..State::default()
        };
        let want = State {
            rules: [rule("10.0.1.20/32", 10001), rule("10.0.1.22/32", 10001)].into(),
            ..State::default()
        };
        let ops = diff_states(&want, &have);
        assert_eq!(
            ops,
            vec![
                Op::DelRule(rule("10.0.1.21/32", 10001)),
                Op::AddRule(rule("10.0.1.22/32", 10001))
            ]
        );
        assert!(diff_states(&want, &want).is_empty());
    }

    /// The default route through 10.0.1.1 on `dev`, in table 10001.
    fn default_route(dev: IfName) -> Route {
        Route {
            to: "0.0.0.0/0".parse().unwrap(),
            via: Some("10.0.1.1".parse().unwrap()),
            dev,
            scope: None,
            src: None,
            table: 10001,
        }
    }

    #[test]
    fn order_is_safe() {
        let dev = IfName::try_new("eth1").unwrap();
        let route = default_route(dev.clone());
        let subnet = Route {
            to: "10.0.1.0/24".parse().unwrap(),
            via: None,
            src: Some("10.0.1.21".parse().unwrap()),
            ..route.clone()
        };
        let source = Address {
            addr: "10.0.1.21/32".parse().unwrap(),
            dev: dev.clone(),
        };
        let addr = Address {
            addr: "10.0.1.22/32".parse().unwrap(),
            dev,
        };
        let want = State {
            rules: [rule("10.0.1.20/32", 10001)].into(),
            routes: [route.clone(), subnet.clone()].into(),
            addresses: [source.clone(), addr.clone()].into(),
        };
        let ops = diff_states(&want, &State::default());
        // The route's source before the routes, the rule after them, and the
        // other address after the rule.
        assert_eq!(
            ops,
            vec![
                Op::AddAddress(source),
                Op::AddRoute(subnet),
                Op::AddRoute(route),
                Op::AddRule(rule("10.0.1.20/32", 10001)),
                Op::AddAddress(addr),
            ]
        );
        let undo = diff_states(&State::default(), &want);
        assert!(matches!(
            undo.as_slice(),
            [
                Op::DelRule(_),
                Op::DelRoute(_),
                Op::DelRoute(_),
                Op::DelAddress(_),
                Op::DelAddress(_)
            ]
        ));
        assert_eq!(
            undo[0].to_string(),
            "ip -4 rule del from 10.0.1.20/32 lookup 10001 priority 10001"
        );
    }

    #[test]
    fn on_link_routes_come_before_the_routes_through_their_gateway() {
        let dev = IfName::try_new("eth1").unwrap();
        let default = default_route(dev.clone());
        let subnet = Route {
            to: "10.0.1.0/24".parse().unwrap(),
            via: None,
            dev,
            scope: Some(crate::model::Scope::Link),
            src: Some("10.0.1.20".parse().unwrap()),
            table: 10001,
        };
        let want = State {
            routes: [default.clone(), subnet.clone()].into(),
            ..State::default()
        };
        assert_eq!(
            diff_states(&want, &State::default()),
            vec![Op::AddRoute(subnet.clone()), Op::AddRoute(default.clone())]
        );
        assert_eq!(
            diff_states(&State::default(), &want),
            vec![Op::DelRoute(default), Op::DelRoute(subnet)]
        );
    }
}

// SPDX-License-Identifier: Apache-2.0
//! The operator's per-NIC intent (`nics:`, SPEC §3.9, issue 36) through the
//! configuration and the planner: routes into the NIC's table, rules to a
//! destination, prefix addresses, and every refusal of the gate.

#![cfg(test)]

use std::path::Path;

use leasehook_core::config::{Layers, SettingOrigin, merge, parse_file};
use leasehook_core::diff::{Op, State, diff_states};
use leasehook_core::metadata;
use leasehook_core::model::{Family, IfName, InterfacePlan, Lease, Link, Plan, Reason};
use leasehook_core::plan::{InterfaceLease, PlanConfig, PlanInput, plan};
use leasehook_core::render;
use serde_json::{Value, json};

const MAC0: &str = "02:00:00:00:00:01";
const MAC1: &str = "02:00:00:00:00:02";
const MAC2: &str = "02:00:00:00:00:03";

fn name(n: &str) -> IfName {
    IfName::try_new(n).unwrap()
}

/// eth0 (primary, `10.98.0.0/24`), eth1 (device 1, `10.98.1.0/24` with the
/// delegated prefix `10.98.1.32/28`), eth2 (device 2, `10.98.2.0/24`).
fn tree() -> Value {
    json!({
        "mac": MAC0,
        "network": {"interfaces": {"macs": {
            MAC0: {"device-number": "0", "local-ipv4s": "10.98.0.10",
                   "subnet-ipv4-cidr-block": "10.98.0.0/24"},
            MAC1: {"device-number": "1", "local-ipv4s": "10.98.1.20",
                   "subnet-ipv4-cidr-block": "10.98.1.0/24",
                   "ipv4-prefix": "10.98.1.32/28",
                   "interface-id": "eni-1"},
            MAC2: {"device-number": "2", "local-ipv4s": "10.98.2.20",
                   "subnet-ipv4-cidr-block": "10.98.2.0/24"}
        }}}
    })
}

fn links() -> Vec<Link> {
    [("eth0", MAC0), ("eth1", MAC1), ("eth2", MAC2)]
        .into_iter()
        .map(|(n, m)| Link {
            name: name(n),
            mac: m.parse().unwrap(),
            ipv6_router: None,
        })
        .collect()
}

fn lease(iface: &str, addr: &str, router: &str) -> InterfaceLease {
    InterfaceLease {
        interface: name(iface),
        lease: Lease {
            family: Family::V4,
            address: addr.parse().unwrap(),
            prefix_len: 24,
            routers: vec![router.parse().unwrap()],
            reason: Reason::Bound,
        },
    }
}

fn leases() -> Vec<InterfaceLease> {
    vec![
        lease("eth0", "10.98.0.10", "10.98.0.1"),
        lease("eth1", "10.98.1.20", "10.98.1.1"),
        lease("eth2", "10.98.2.20", "10.98.2.1"),
    ]
}

/// The planner's settings of a configuration file.
fn config(yaml: &str) -> PlanConfig {
    let layer = parse_file("/c.yaml", yaml).unwrap();
    merge(
        Path::new("/"),
        SettingOrigin::Default,
        &[layer],
        &Layers::default(),
    )
    .unwrap()
    .settings
    .plan
}

fn plan_of(tree: &Value, yaml: &str) -> Plan {
    let md = metadata::parse_tree(tree).unwrap();
    plan(&PlanInput::new(&md, &links(), &leases()), &config(yaml)).unwrap()
}

fn nic<'p>(p: &'p Plan, n: &str) -> &'p InterfacePlan {
    p.interfaces.iter().find(|i| i.name.as_str() == n).unwrap()
}

fn routes(ip: &InterfacePlan) -> Vec<String> {
    ip.routes.iter().map(ToString::to_string).collect()
}

fn rules(ip: &InterfacePlan) -> Vec<String> {
    ip.rules.iter().map(ToString::to_string).collect()
}

fn refused(ip: &InterfacePlan) -> Vec<String> {
    ip.refused.iter().map(ToString::to_string).collect()
}

fn addresses(ip: &InterfacePlan) -> Vec<String> {
    ip.addresses.iter().map(|a| a.addr.to_string()).collect()
}

#[test]
fn routes_go_into_the_nics_table_via_its_gateway_or_an_address() {
    let p = plan_of(
        &tree(),
        "nics:\n  - match: eth1\n    routes:\n      - to: 192.0.2.0/24\n        via: gateway\n      - to: 203.0.113.0/24\n        via: 10.98.1.5\n",
    );
    let eth1 = nic(&p, "eth1");
    let r = routes(eth1);
    assert!(
        r.contains(&"192.0.2.0/24 via 10.98.1.1 dev eth1 table 10001".to_owned()),
        "{r:?}"
    );
    assert!(
        r.contains(&"203.0.113.0/24 via 10.98.1.5 dev eth1 table 10001".to_owned()),
        "{r:?}"
    );
    assert!(eth1.refused.is_empty(), "{:?}", refused(eth1));
    // Nothing on the NICs the entry does not name.
    assert!(
        !routes(nic(&p, "eth2"))
            .iter()
            .any(|r| r.contains("192.0.2"))
    );
}

#[test]
fn metadata_forms_of_match_name_the_nic() {
    for m in [
        "device-number:1",
        "interface-id:eni-1",
        "\"02:00:00:00:00:02\"",
        "eth[1]",
    ] {
        let p = plan_of(
            &tree(),
            &format!("nics:\n  - match: {m}\n    routes: [{{to: 192.0.2.0/24, via: gateway}}]\n"),
        );
        assert!(
            routes(nic(&p, "eth1"))
                .iter()
                .any(|r| r.starts_with("192.0.2.0/24")),
            "{m}"
        );
        assert!(
            !routes(nic(&p, "eth2"))
                .iter()
                .any(|r| r.starts_with("192.0.2.0/24")),
            "{m}"
        );
    }
}

#[test]
fn a_rule_sends_a_destination_to_the_nics_table() {
    let p = plan_of(
        &tree(),
        "nics:\n  - match: device-number:1\n    rules:\n      - to: 198.51.100.0/24\n        priority: 9000\n",
    );
    let eth1 = nic(&p, "eth1");
    assert!(
        rules(eth1)
            .contains(&"from 0.0.0.0/0 to 198.51.100.0/24 lookup 10001 priority 9000".to_owned()),
        "{:?}",
        rules(eth1)
    );
    // Every rendering carries the destination.
    let ip = render::ip(&p);
    assert!(
        ip.contains("ip -4 rule add from 0.0.0.0/0 to 198.51.100.0/24 lookup 10001 priority 9000"),
        "{ip}"
    );
    let json = render::json(&p);
    assert!(json.contains("\"to\": \"198.51.100.0/24\""), "{json}");
    let netplan = render::netplan(&p).to_string();
    assert!(netplan.contains("\"to\":\"198.51.100.0/24\""), "{netplan}");
    let networkd: String = render::networkd(&p).into_iter().map(|(_, c)| c).collect();
    assert!(
        networkd.contains("[RoutingPolicyRule]\nTo=198.51.100.0/24\nTable=10001\nPriority=9000"),
        "{networkd}"
    );
    // Removed like every rule: a plan without the entry deletes it.
    let without = plan_of(&tree(), "");
    let ops = diff_states(&State::of_plan(&without), &State::of_plan(&p));
    assert!(
        ops.iter()
            .any(|o| matches!(o, Op::DelRule(r) if r.to.is_some())),
        "{ops:?}"
    );
}

#[test]
fn the_gate_refuses_each_destination_with_its_reason() {
    let yaml = "nics:\n  - match: eth1\n    routes:\n      - {to: 0.0.0.0/0, via: gateway}\n      - {to: 169.254.169.254/32, via: gateway}\n      - {to: 10.98.2.0/25, via: gateway}\n      - {to: 10.98.0.0/16, via: gateway}\n      - {to: 192.0.2.0/24, via: 10.98.9.9}\n    rules:\n      - {to: 10.98.2.0/24, priority: 9000}\n      - {to: 0.0.0.0/0, priority: 9001}\n";
    let p = plan_of(&tree(), yaml);
    let eth1 = nic(&p, "eth1");
    let r = refused(eth1);
    for want in [
        "nics[0].routes[0] 0.0.0.0/0 via gateway: a /0",
        "nics[0].routes[1] 169.254.169.254/32 via gateway: the metadata service's address",
        "nics[0].routes[2] 10.98.2.0/25 via gateway: overlaps eth2's subnet 10.98.2.0/24",
        "nics[0].routes[3] 10.98.0.0/16 via gateway: holds the host's default router 10.98.0.1",
        "nics[0].routes[4] 192.0.2.0/24 via 10.98.9.9: not inside the NIC's subnet",
        "nics[0].rules[0] to 10.98.2.0/24 priority 9000: overlaps eth2's subnet",
        "nics[0].rules[1] to 0.0.0.0/0 priority 9001: a /0",
    ] {
        assert!(r.iter().any(|x| x.starts_with(want)), "{want}: {r:#?}");
    }
    // None of them is planned.
    assert!(
        eth1.rules.iter().all(|r| r.to.is_none()),
        "{:?}",
        rules(eth1)
    );
    assert_eq!(
        routes(eth1).len(),
        2,
        "the default and the subnet only: {:?}",
        routes(eth1)
    );
}

#[test]
fn allow_default_lets_a_slash_zero_but_never_the_metadata_service() {
    let yaml = "nics:\n  - match: eth1\n    allow_default: true\n    routes:\n      - {to: 10.98.2.0/25, via: gateway}\n      - {to: 169.254.169.254/32, via: gateway}\n    rules:\n      - {to: 0.0.0.0/0, priority: 9001}\n      - {to: 10.98.0.0/16, priority: 9002}\n      - {to: 169.254.0.0/16, priority: 9003}\n";
    let p = plan_of(&tree(), yaml);
    let eth1 = nic(&p, "eth1");
    let rl = rules(eth1);
    assert!(
        rl.contains(&"from 0.0.0.0/0 to 0.0.0.0/0 lookup 10001 priority 9001".to_owned()),
        "{rl:?}"
    );
    assert!(
        rl.contains(&"from 0.0.0.0/0 to 10.98.0.0/16 lookup 10001 priority 9002".to_owned()),
        "{rl:?}"
    );
    assert!(
        routes(eth1).contains(&"10.98.2.0/25 via 10.98.1.1 dev eth1 table 10001".to_owned()),
        "{:?}",
        routes(eth1)
    );
    let r = refused(eth1);
    assert!(
        r.iter().any(|x| x
            .starts_with("nics[0].routes[1] 169.254.169.254/32 via gateway: the metadata service")),
        "{r:?}"
    );
    assert!(
        r.iter()
            .any(|x| x.starts_with("nics[0].rules[2] to 169.254.0.0/16 priority 9003: link-local")),
        "{r:?}"
    );
}

#[test]
fn the_primary_without_a_table_refuses_routes_and_rules() {
    let p = plan_of(
        &tree(),
        "nics:\n  - match: eth0\n    routes: [{to: 192.0.2.0/24, via: gateway}]\n    rules: [{to: 198.51.100.0/24, priority: 9000}]\n",
    );
    let r = refused(nic(&p, "eth0"));
    assert!(
        r.iter()
            .any(|x| x.starts_with("nics[0].routes[0]") && x.contains("no table")),
        "{r:?}"
    );
    assert!(
        r.iter()
            .any(|x| x.starts_with("nics[0].rules[0]") && x.contains("no table")),
        "{r:?}"
    );
}

#[test]
fn prefix_addresses_take_the_first_n_and_leave_with_the_prefix() {
    let yaml = "nics:\n  - match: eth1\n    prefix_addresses: 2\n";
    let p = plan_of(&tree(), yaml);
    let a = addresses(nic(&p, "eth1"));
    assert!(a.contains(&"10.98.1.32/32".to_owned()), "{a:?}");
    assert!(a.contains(&"10.98.1.33/32".to_owned()), "{a:?}");
    assert!(!a.contains(&"10.98.1.34/32".to_owned()), "{a:?}");
    // Off by default.
    let none = addresses(nic(&plan_of(&tree(), ""), "eth1"));
    assert!(!none.iter().any(|x| x.starts_with("10.98.1.3")), "{none:?}");
    // The prefix leaves the metadata: so do its addresses.
    let mut t = tree();
    t["network"]["interfaces"]["macs"][MAC1]
        .as_object_mut()
        .unwrap()
        .remove("ipv4-prefix");
    let later = plan_of(&t, yaml);
    let ops = diff_states(&State::of_plan(&later), &State::of_plan(&p));
    let dels: Vec<String> = ops
        .iter()
        .filter_map(|o| match o {
            Op::DelAddress(a) => Some(a.addr.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(dels, ["10.98.1.32/32", "10.98.1.33/32"]);
}

#[test]
fn prefix_addresses_stay_off_a_kubernetes_primary() {
    let mut t = tree();
    t["network"]["interfaces"]["macs"][MAC0]["ipv4-prefix"] = json!("10.98.0.32/28");
    let md = metadata::parse_tree(&t).unwrap();
    let mut cfg = config("nics:\n  - match: eth0\n    prefix_addresses: 2\n");
    cfg.kubernetes = true;
    let p = plan(&PlanInput::new(&md, &links(), &leases()), &cfg).unwrap();
    let a = addresses(nic(&p, "eth0"));
    assert!(!a.iter().any(|x| x.starts_with("10.98.0.3")), "{a:?}");
    cfg.kubernetes = false;
    let p = plan(&PlanInput::new(&md, &links(), &leases()), &cfg).unwrap();
    let a = addresses(nic(&p, "eth0"));
    assert!(a.contains(&"10.98.0.32/32".to_owned()), "{a:?}");
}

#[test]
fn via_gateway_needs_a_router_in_the_nics_table() {
    let md = metadata::parse_tree(&tree()).unwrap();
    let mut leases = leases();
    leases[1].lease.routers.clear();
    let cfg = config(
        "nics:\n  - match: eth1\n    routes: [{to: 192.0.2.0/24, via: gateway}, {to: 203.0.113.0/24, via: 10.98.1.5}]\n",
    );
    let p = plan(&PlanInput::new(&md, &links(), &leases), &cfg).unwrap();
    let eth1 = nic(&p, "eth1");
    let r = refused(eth1);
    assert!(
        r.iter().any(|x| x.starts_with(
            "nics[0].routes[0] 192.0.2.0/24 via gateway: the NIC's table has no router"
        )),
        "{r:?}"
    );
    // An address on the subnet needs no router of the table.
    assert!(
        routes(eth1).contains(&"203.0.113.0/24 via 10.98.1.5 dev eth1 table 10001".to_owned()),
        "{:?}",
        routes(eth1)
    );
}

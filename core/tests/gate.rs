// SPDX-License-Identifier: Apache-2.0
//! The address gate through the planner and the apply validator, with the hostile
//! inputs of issue 18 ("Must never happen", items 1–4): each is refused by value
//! and reason, and the rest of the plan goes on.

#![cfg(test)]

use std::net::IpAddr;

use leasehook_core::Error;
use leasehook_core::apply::record::RecordingApplier;
use leasehook_core::apply::state::InterfaceState;
use leasehook_core::apply::{KernelLink, apply_plan};
use leasehook_core::diff::State;
use leasehook_core::metadata;
use leasehook_core::model::{
    Address, Family, IfName, InterfacePlan, Lease, Link, MacAddr, Plan, Profile, Reason, Route,
    Rule,
};
use leasehook_core::plan::{InterfaceLease, PlanConfig, PlanInput, plan};
use serde_json::{Value, json};

const MAC0: &str = "02:00:00:00:00:01";
const MAC1: &str = "02:00:00:00:00:02";
const MAC2: &str = "02:00:00:00:00:03";

fn name(n: &str) -> IfName {
    IfName::try_new(n).unwrap()
}

/// eth0 (primary, `10.98.0.10/24`) and eth1 (`10.98.1.20`, `.21` in `10.98.1.0/24`,
/// `fd00:98:1::20` in `fd00:98:1::/64`), as the fault matrix's world.
fn tree() -> Value {
    json!({
        "mac": MAC0,
        "network": {"interfaces": {"macs": {
            MAC0: {"device-number": "0", "local-ipv4s": "10.98.0.10",
                   "subnet-ipv4-cidr-block": "10.98.0.0/24"},
            MAC1: {"device-number": "1", "local-ipv4s": "10.98.1.20\n10.98.1.21",
                   "subnet-ipv4-cidr-block": "10.98.1.0/24",
                   "ipv6s": "fd00:98:1::20", "subnet-ipv6-cidr-blocks": "fd00:98:1::/64"}
        }}}
    })
}

fn links() -> Vec<Link> {
    vec![
        Link {
            name: name("eth0"),
            mac: MAC0.parse().unwrap(),
            ipv6_router: None,
        },
        Link {
            name: name("eth1"),
            mac: MAC1.parse().unwrap(),
            ipv6_router: Some("fe80::1".parse().unwrap()),
        },
    ]
}

fn v4_lease(iface: &str, addr: &str) -> InterfaceLease {
    InterfaceLease {
        interface: name(iface),
        lease: Lease {
            family: Family::V4,
            address: addr.parse().unwrap(),
            prefix_len: 24,
            routers: vec!["10.98.1.1".parse().unwrap()],
            reason: Reason::Bound,
        },
    }
}

fn v6_lease(iface: &str, addr: &str) -> InterfaceLease {
    InterfaceLease {
        interface: name(iface),
        lease: Lease {
            family: Family::V6,
            address: addr.parse().unwrap(),
            prefix_len: 128,
            routers: Vec::new(),
            reason: Reason::Bound,
        },
    }
}

/// What the kernel's eth0 holds, as the hooks pass it.
fn eth0_addresses() -> Vec<Address> {
    vec![Address {
        addr: "10.98.0.10/24".parse().unwrap(),
        dev: name("eth0"),
    }]
}

fn plan_with(tree: &Value, leases: &[InterfaceLease], held: &[Address]) -> Plan {
    let md = metadata::parse_tree(tree).unwrap();
    plan(
        &PlanInput {
            metadata: &md,
            links: &links(),
            leases,
            link_addresses: held,
            next_hops: &[],
        },
        &PlanConfig::default(),
    )
    .unwrap()
}

/// The plan of `tree` with eth1's DHCPv4 and DHCPv6 leases, and eth0's address held.
fn dual_stack_plan(tree: &Value) -> Plan {
    plan_with(
        tree,
        &[
            v4_lease("eth1", "10.98.1.20"),
            v6_lease("eth1", "fd00:98:1::20"),
        ],
        &eth0_addresses(),
    )
}

fn eth1(p: &Plan) -> &InterfacePlan {
    p.interfaces
        .iter()
        .find(|i| i.name.as_str() == "eth1")
        .unwrap()
}

fn sources(ip: &InterfacePlan) -> Vec<String> {
    ip.rules.iter().map(|r| r.from.to_string()).collect()
}

fn refused(ip: &InterfacePlan) -> Vec<String> {
    ip.refused.iter().map(ToString::to_string).collect()
}

fn set(tree: &mut Value, mac: &str, key: &str, value: &str) {
    tree["network"]["interfaces"]["macs"][mac][key] = json!(value);
}

#[test]
fn a_slash_zero_prefix_never_becomes_a_rule() {
    let mut t = tree();
    set(&mut t, MAC1, "ipv4-prefix", "0.0.0.0/0\n10.98.1.64/28");
    set(&mut t, MAC1, "ipv6-prefix", "::/0\nfd00:98:1:0:8000::/80");
    let p = dual_stack_plan(&t);
    let ip = eth1(&p);
    assert_eq!(
        sources(ip),
        [
            "10.98.1.20/32",
            "10.98.1.21/32",
            "10.98.1.64/28",
            "fd00:98:1::20/128",
            "fd00:98:1:0:8000::/80"
        ]
    );
    assert_eq!(
        refused(ip),
        [
            "ipv4-prefix 0.0.0.0/0: a /0 (every address)",
            "ipv6-prefix ::/0: a /0 (every address)"
        ]
    );
    // The rest of the plan goes on: both routes of each family are there.
    assert_eq!(ip.routes.len(), 4, "{:?}", ip.routes);
    assert!(p.is_complete());
}

#[test]
fn metadata_values_that_are_not_this_nics_addresses() {
    let mut t = tree();
    set(
        &mut t,
        MAC1,
        "local-ipv4s",
        "10.98.1.20\n0.0.0.0\n127.0.0.1\n255.255.255.255\n169.254.169.254\n10.98.0.10\n10.98.1.21",
    );
    set(
        &mut t,
        MAC1,
        "ipv4-prefix",
        "0.0.0.0/1\n128.0.0.0/1\n10.98.0.0/24",
    );
    set(
        &mut t,
        MAC1,
        "ipv6s",
        "fd00:98:1::20\nfd00:ec2::254\n::ffff:10.98.1.22",
    );
    let p = dual_stack_plan(&t);
    let ip = eth1(&p);
    assert_eq!(
        sources(ip),
        ["10.98.1.20/32", "10.98.1.21/32", "fd00:98:1::20/128"]
    );
    let addrs: Vec<String> = ip.addresses.iter().map(|a| a.addr.to_string()).collect();
    assert_eq!(addrs, ["10.98.1.21/32"]);
    assert_eq!(
        refused(ip),
        [
            "ipv4-prefix 0.0.0.0/1: covers unspecified (0.0.0.0/32)",
            "ipv4-prefix 10.98.0.0/24: eth0 holds 10.98.0.10: another NIC's address",
            "ipv4-prefix 128.0.0.0/1: covers multicast (224.0.0.0/4)",
            "ipv6s ::ffff:10.98.1.22: IPv4-mapped, not an IPv6 address (::ffff:0.0.0.0/96)",
            "ipv6s fd00:ec2::254: the metadata service's address fd00:ec2::254 (EC2 metadata (IPv6))",
            "local-ipv4s 0.0.0.0: unspecified (0.0.0.0/32)",
            "local-ipv4s 10.98.0.10: eth0 holds 10.98.0.10: another NIC's address",
            "local-ipv4s 127.0.0.1: loopback (127.0.0.0/8)",
            "local-ipv4s 169.254.169.254: the metadata service's address 169.254.169.254 (the link-local metadata service most clouds share)",
            "local-ipv4s 255.255.255.255: broadcast (255.255.255.255/32)",
        ]
    );
}

#[test]
fn the_primarys_address_leased_on_a_secondary_is_refused() {
    // The primary's address in eth1's lease: eth0 holds it (the kernel says so),
    // and the metadata's eth0 lists it too.
    let p = plan_with(
        &tree(),
        &[v4_lease("eth1", "10.98.0.10")],
        &eth0_addresses(),
    );
    let ip = eth1(&p);
    assert!(ip.rules.is_empty() && ip.routes.is_empty() && ip.addresses.is_empty());
    // The family is not covered: what was applied for it before stays.
    assert!(ip.families.is_empty());
    assert_eq!(
        refused(ip),
        ["lease 10.98.0.10: eth0 holds 10.98.0.10: another NIC's address"]
    );
    // The same from the kernel alone (the hooks fetch only eth1's metadata).
    let mut only_eth1 = tree();
    only_eth1["network"]["interfaces"]["macs"]
        .as_object_mut()
        .unwrap()
        .remove(MAC0);
    let p = plan_with(
        &only_eth1,
        &[v4_lease("eth1", "10.98.0.10")],
        &eth0_addresses(),
    );
    assert_eq!(
        refused(eth1(&p)),
        ["lease 10.98.0.10: eth0 holds 10.98.0.10: another NIC's address"]
    );
}

#[test]
fn a_hostile_subnet_bounds_nothing() {
    let mut t = tree();
    set(&mut t, MAC1, "subnet-ipv4-cidr-block", "0.0.0.0/0");
    set(&mut t, MAC1, "ipv4-prefix", "10.99.0.0/16");
    let p = plan_with(&t, &[v4_lease("eth1", "10.98.1.20")], &[]);
    let ip = eth1(&p);
    // The lease's own network stands in for the refused subnet.
    assert_eq!(
        ip.routes
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [
            "default via 10.98.1.1 dev eth1 table 10001",
            "10.98.1.0/24 dev eth1 scope link src 10.98.1.20 table 10001"
        ]
    );
    assert_eq!(
        refused(ip),
        [
            "ipv4-prefix 10.99.0.0/16: not inside the NIC's subnet (10.98.1.0/24)",
            "subnet-ipv4-cidr-block 0.0.0.0/0: a /0 (every address)"
        ]
    );
}

#[test]
fn two_nics_with_one_device_number_touch_neither() {
    let mut t = tree();
    t["network"]["interfaces"]["macs"][MAC2] = json!({
        "device-number": "1", "local-ipv4s": "10.98.2.30", "subnet-ipv4-cidr-block": "10.98.2.0/24"
    });
    let md = metadata::parse_tree(&t).unwrap();
    let mut l = links();
    l.push(Link {
        name: name("eth2"),
        mac: MAC2.parse().unwrap(),
        ipv6_router: None,
    });
    let leases = [
        v4_lease("eth1", "10.98.1.20"),
        v4_lease("eth2", "10.98.2.30"),
    ];
    let p = plan(
        &PlanInput {
            metadata: &md,
            links: &l,
            leases: &leases,
            link_addresses: &[],
            next_hops: &[],
        },
        &PlanConfig::default(),
    )
    .unwrap();
    for (ip, other) in p.interfaces.iter().zip(["eth2", "eth1"]) {
        assert!(ip.families.is_empty() && ip.rules.is_empty() && ip.routes.is_empty());
        assert_eq!(
            refused(ip),
            [format!(
                "device-number 1: gives table 10001, which {other} claims too: neither NIC's rules are touched"
            )]
        );
    }
    // With only eth1 in the OS, the metadata's other claim refuses it all the same.
    let p = plan(
        &PlanInput {
            metadata: &md,
            links: &links(),
            leases: &leases[..1],
            link_addresses: &[],
            next_hops: &[],
        },
        &PlanConfig::default(),
    )
    .unwrap();
    assert_eq!(
        refused(eth1(&p)),
        [
            "device-number 1: gives table 10001, which the NIC 02:00:00:00:00:03 claims too: neither NIC's rules are touched"
        ]
    );
}

// --- The validator of `apply --plan` ---------------------------------------------

fn kernel() -> RecordingApplier {
    RecordingApplier::with_links(links())
}

fn good_plan() -> Plan {
    plan_with(&tree(), &[v4_lease("eth1", "10.98.1.20")], &[])
}

fn with_rule(rule: &str, priority: u32) -> Plan {
    let mut p = good_plan();
    let ip = p
        .interfaces
        .iter_mut()
        .find(|i| i.name.as_str() == "eth1")
        .unwrap();
    ip.rules.push(Rule {
        from: rule.parse().unwrap(),
        to: None,
        table: 10001,
        priority: Some(priority),
    });
    p
}

#[test]
fn the_validator_refuses_what_the_gate_refuses() {
    for (from, priority, want) in [
        (
            "0.0.0.0/0",
            10001,
            "invalid plan: eth1: rule from 0.0.0.0/0 lookup 10001 priority 10001: source refused: a /0 (every address)",
        ),
        (
            "10.98.1.20/32",
            0,
            "invalid plan: eth1: rule from 10.98.1.20/32 lookup 10001 priority 0 has priority 0, which comes before the local table",
        ),
        (
            "128.0.0.0/1",
            10001,
            "invalid plan: eth1: rule from 128.0.0.0/1 lookup 10001 priority 10001: source refused: covers multicast (224.0.0.0/4)",
        ),
        (
            "10.0.0.0/8",
            10001,
            "invalid plan: eth1: rule from 10.0.0.0/8 lookup 10001 priority 10001: source refused: not inside the NIC's subnet (10.98.1.0/24)",
        ),
        (
            "127.0.0.1/32",
            10001,
            "invalid plan: eth1: rule from 127.0.0.1/32 lookup 10001 priority 10001: source refused: loopback (127.0.0.0/8)",
        ),
    ] {
        let mut k = kernel();
        let e = apply_plan(&mut k, &with_rule(from, priority), &[]).unwrap_err();
        assert_eq!(e.to_string(), want);
        assert!(k.writes.is_empty(), "{from}: wrote {:?}", k.writes);
    }
    let mut k = kernel();
    apply_plan(&mut k, &with_rule("10.98.1.64/28", 10001), &[]).unwrap();
}

#[test]
fn the_applier_refuses_another_links_address() {
    let mut k = kernel();
    k.foreign.addresses.insert(Address {
        addr: "10.98.1.99/24".parse().unwrap(),
        dev: name("eth0"),
    });
    let e = apply_plan(&mut k, &with_rule("10.98.1.96/28", 10001), &[]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid plan: eth1: rule from 10.98.1.96/28 lookup 10001 priority 10001: source refused: eth0 holds 10.98.1.99: another NIC's address"
    );
    assert!(k.writes.is_empty());
}

#[test]
fn a_table_another_nic_holds_is_a_conflict() {
    let p = good_plan();
    // eth2's routes in table 10001 (its device-number is eth1's too).
    let mut k = kernel();
    k.links.push(KernelLink {
        index: 9,
        name: name("eth2"),
        mac: Some(MAC2.parse().unwrap()),
    });
    let eth2_route = Route {
        to: "10.98.2.0/24".parse().unwrap(),
        via: None,
        dev: name("eth2"),
        scope: None,
        src: None,
        table: 10001,
    };
    let eth2_rule = Rule {
        from: "10.98.2.30/32".parse().unwrap(),
        to: None,
        table: 10001,
        priority: Some(10001),
    };
    k.owned.routes.insert(eth2_route.clone());
    k.owned.rules.insert(eth2_rule.clone());
    let before = k.owned.clone();
    let e = apply_plan(&mut k, &p, &[]).unwrap_err();
    assert!(
        matches!(e, Error::TableConflict { table: 10001, .. }),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "eth1: table 10001 is claimed by eth2 too (two NICs with one device-number): neither NIC's rules are touched"
    );
    assert_eq!(k.owned, before);
    assert!(k.writes.is_empty());

    // No route of eth2's left (its link went down), but its state records the
    // table and its link is there: still a conflict.
    let mut k = kernel();
    k.links.push(KernelLink {
        index: 9,
        name: name("eth2"),
        mac: Some(MAC2.parse().unwrap()),
    });
    k.owned.rules.insert(eth2_rule);
    let mut eth2_plan = eth1(&p).clone();
    eth2_plan.name = name("eth2");
    eth2_plan.mac = MAC2.parse().unwrap();
    let eth2_state = InterfaceState::record(None, &eth2_plan, Profile::Ec2NetUtils);
    let e = apply_plan(&mut k, &p, std::slice::from_ref(&eth2_state)).unwrap_err();
    assert!(matches!(e, Error::TableConflict { .. }), "{e}");
    assert!(k.writes.is_empty());
    // Its link gone (the NIC was detached, its device-number reused): no conflict.
    k.links.retain(|l| l.name.as_str() != "eth2");
    let r = apply_plan(&mut k, &p, std::slice::from_ref(&eth2_state)).unwrap();
    assert!(r.writes() > 0);
    assert_eq!(k.owned.rules, State::of_plan(&p).rules);
}

#[test]
fn lease_parsers_refuse_unusable_addresses() {
    use leasehook_core::event::{Env, dhclient, dhcpcd, networkd, nm, udhcpc};
    let env = |pairs: &[(&str, &str)]| -> Env {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    for (addr, why) in [
        ("0.0.0.0", "unspecified (0.0.0.0/32)"),
        ("127.0.0.1", "loopback (127.0.0.0/8)"),
        ("255.255.255.255", "broadcast (255.255.255.255/32)"),
        ("224.0.0.5", "multicast (224.0.0.0/4)"),
        (
            "169.254.169.254",
            "the metadata service's address 169.254.169.254 (the link-local metadata service most clouds share)",
        ),
    ] {
        let e = dhclient::parse(&env(&[
            ("reason", "BOUND"),
            ("interface", "eth1"),
            ("new_ip_address", addr),
            ("new_subnet_mask", "255.255.255.0"),
        ]))
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "dhclient variable new_ip_address: refused as a leased address: {why} (got \"{addr}\")"
            )
        );
        let e = dhcpcd::parse(&env(&[
            ("reason", "BOUND"),
            ("interface", "eth1"),
            ("new_ip_address", addr),
            ("new_subnet_cidr", "24"),
        ]))
        .unwrap_err();
        assert!(e.to_string().contains(why), "{e}");
        let e = udhcpc::parse(
            "bound",
            &env(&[
                ("interface", "eth1"),
                ("ip", addr),
                ("subnet", "255.255.255.0"),
            ]),
        )
        .unwrap_err();
        assert!(e.to_string().contains(why), "{e}");
        let e = nm::parse(
            "eth1",
            "up",
            &env(&[
                ("DHCP4_IP_ADDRESS", addr),
                ("DHCP4_SUBNET_MASK", "255.255.255.0"),
            ]),
        )
        .unwrap_err();
        assert!(e.to_string().contains(why), "{e}");
        let e = networkd::parse_lease_file(&format!("ADDRESS={addr}\nNETMASK=255.255.255.0\n"))
            .unwrap_err();
        assert!(e.to_string().contains(why), "{e}");
    }
    for addr in ["::", "::1", "fe80::1", "fd00:ec2::254", "::ffff:0.0.0.0"] {
        let e = dhclient::parse(&env(&[
            ("reason", "BOUND6"),
            ("interface", "eth1"),
            ("new_ip6_address", addr),
            ("new_ip6_prefixlen", "128"),
        ]))
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("dhclient variable new_ip6_address: refused as a leased address"),
            "{e}"
        );
    }
    // A removal still goes through whatever its old lease said.
    let ev = dhclient::parse(&env(&[
        ("reason", "EXPIRE"),
        ("interface", "eth1"),
        ("old_ip_address", "0.0.0.0"),
        ("old_subnet_mask", "255.255.255.0"),
    ]))
    .unwrap();
    assert_eq!(ev.old.unwrap().address, IpAddr::from([0, 0, 0, 0]));
    let _ = MacAddr::new([0; 6]);
}

/// A lease the metadata gave (`Reason::Metadata`, a NIC the cloud serves no DHCP):
/// its address, with the lease's prefix length, is one the plan adds, beside the
/// rules and the table a DHCP lease gets; a DHCP client's lease never is.
#[test]
fn a_metadata_lease_adds_its_address_with_its_prefix_and_a_dhcp_lease_does_not() {
    let metadata = |mut l: InterfaceLease| {
        l.lease.reason = Reason::Metadata;
        l
    };
    let p = plan_with(
        &tree(),
        &[metadata(v4_lease("eth1", "10.98.1.20"))],
        &eth0_addresses(),
    );
    let ip = eth1(&p);
    let addrs: Vec<String> = ip.addresses.iter().map(ToString::to_string).collect();
    assert_eq!(addrs, ["10.98.1.20/24 dev eth1", "10.98.1.21/32 dev eth1"]);
    assert_eq!(sources(ip), ["10.98.1.20/32", "10.98.1.21/32"]);
    assert_eq!(ip.table, Some(10001));
    assert!(p.is_complete(), "{:?}", ip.missing);
    let dhcp = plan_with(
        &tree(),
        &[v4_lease("eth1", "10.98.1.20")],
        &eth0_addresses(),
    );
    let addrs: Vec<String> = eth1(&dhcp)
        .addresses
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(addrs, ["10.98.1.21/32 dev eth1"]);
}

/// The gate holds for a metadata lease's address as for any: one another NIC
/// holds, or one outside the subnet, is refused, and the family is not covered.
#[test]
fn a_metadata_lease_with_another_nics_address_adds_nothing() {
    let mut l = v4_lease("eth1", "10.98.0.10");
    l.lease.reason = Reason::Metadata;
    let p = plan_with(&tree(), &[l], &eth0_addresses());
    let ip = eth1(&p);
    assert!(ip.addresses.is_empty(), "{:?}", ip.addresses);
    assert!(ip.rules.is_empty(), "{:?}", ip.rules);
    assert!(!ip.families.contains(&Family::V4));
    assert!(
        refused(ip)
            .iter()
            .any(|r| r.starts_with("lease 10.98.0.10")),
        "{:?}",
        refused(ip)
    );
}

// --- Issue 30, items 2, 3 and 10: routers, wide subnets, next hops -----------------

/// A router's address is never an address or a rule source: the lease's router
/// listed in `local-ipv4s` (EC2), the host's default gateway from the main table,
/// and a metadata lease whose address is its own route's gateway (`OpenStack`).
#[test]
fn a_routers_address_is_never_ours() {
    let mut t = tree();
    set(
        &mut t,
        MAC1,
        "local-ipv4s",
        "10.98.1.20\n10.98.1.1\n10.98.1.21",
    );
    let p = plan_with(&t, &[v4_lease("eth1", "10.98.1.20")], &eth0_addresses());
    let ip = eth1(&p);
    assert_eq!(sources(ip), ["10.98.1.20/32", "10.98.1.21/32"]);
    assert!(
        ip.addresses
            .iter()
            .all(|a| a.addr.addr().to_string() != "10.98.1.1")
    );
    assert_eq!(
        refused(ip),
        [
            "local-ipv4s 10.98.1.1: 10.98.1.1 is a router (eth1's lease router), never an address of this host"
        ]
    );
    // The main table's next hop (eth0's default gateway) on eth1.
    let mut t = tree();
    set(&mut t, MAC1, "local-ipv4s", "10.98.1.20\n10.98.1.99");
    let md = metadata::parse_tree(&t).unwrap();
    let hops = [leasehook_core::gate::Router {
        address: "10.98.1.99".parse().unwrap(),
        whose: "a next hop of the main table (dev eth0)".to_owned(),
    }];
    let p = plan(
        &PlanInput {
            metadata: &md,
            links: &links(),
            leases: &[v4_lease("eth1", "10.98.1.20")],
            link_addresses: &eth0_addresses(),
            next_hops: &hops,
        },
        &PlanConfig::default(),
    )
    .unwrap();
    assert_eq!(
        refused(eth1(&p)),
        [
            "local-ipv4s 10.98.1.99: 10.98.1.99 is a router (a next hop of the main table (dev eth0)), never an address of this host"
        ]
    );
}

/// Issue 30, item 10: a metadata lease (no DHCP) whose router is off the NIC's
/// subnet, and a route through the NIC's own address, are refused; the address
/// (with its prefix, `noprefixroute`), its subnet route and rule stay.
#[test]
fn metadata_next_hops_off_the_subnet_or_local_are_refused() {
    let data = leasehook_core::source::openstack::nic::parse_network_data(
        &json!({
            "links": [
                {"id": "l0", "type": "phy", "ethernet_mac_address": MAC0},
                {"id": "l1", "type": "phy", "ethernet_mac_address": MAC1}
            ],
            "networks": [
                {"id": "n0", "type": "ipv4_dhcp", "link": "l0"},
                {"id": "n1", "type": "ipv4", "link": "l1",
                 "ip_address": "10.98.1.20", "netmask": "255.0.0.0",
                 "routes": [
                    {"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "192.168.5.1"},
                    {"network": "198.51.100.0", "netmask": "255.255.255.0", "gateway": "10.98.1.20"}
                 ]}
            ]
        })
        .to_string(),
    )
    .unwrap();
    let md = leasehook_core::source::openstack::nic::network(&data);
    let unleased = leasehook_core::source::openstack::nic::unleased(&data);
    let leases: Vec<InterfaceLease> = unleased
        .iter()
        .filter(|n| n.mac == MAC1.parse().unwrap())
        .flat_map(|n| &n.leases)
        .map(|l| InterfaceLease {
            interface: name("eth1"),
            lease: l.clone(),
        })
        .collect();
    let p = plan(
        &PlanInput {
            metadata: &md,
            links: &links(),
            leases: &leases,
            link_addresses: &eth0_addresses(),
            next_hops: &[],
        },
        &PlanConfig::default(),
    )
    .unwrap();
    let ip = eth1(&p);
    let routes: Vec<String> = ip.routes.iter().map(ToString::to_string).collect();
    assert_eq!(routes.len(), 1, "{routes:?}");
    assert!(
        routes[0].starts_with("10.0.0.0/8 dev eth1 scope link src 10.98.1.20"),
        "{routes:?}"
    );
    assert_eq!(sources(ip), ["10.98.1.20/32"]);
    assert_eq!(ip.addresses.len(), 1);
    assert!(ip.addresses[0].no_prefix_route());
    let why = refused(ip).join("\n");
    assert!(
        why.contains("router 192.168.5.1: not inside the NIC's subnet (10.0.0.0/8)"),
        "{why}"
    );
    assert!(
        why.contains("routes 198.51.100.0/24 via 10.98.1.20: a next hop eth1 holds itself"),
        "{why}"
    );
}

/// Issue 30, item 2: the gateways a provider knows without a lease's word —
/// Azure's subnet's first host, OCI's `virtualRouterIp` and first host — are
/// routers: a NIC address equal to one is refused.
#[test]
fn provider_gateways_are_routers() {
    let azure = leasehook_core::source::azure::nic::parse_network(
        &json!({"interface": [
            {"macAddress": "020000000001",
             "ipv4": {"ipAddress": [{"privateIpAddress": "10.98.0.10"}],
                      "subnet": [{"address": "10.98.0.0", "prefix": "24"}]}},
            {"macAddress": "020000000002",
             "ipv4": {"ipAddress": [{"privateIpAddress": "10.98.1.20"}, {"privateIpAddress": "10.98.1.1"}],
                      "subnet": [{"address": "10.98.1.0", "prefix": "24"}]}}
        ]})
        .to_string(),
    )
    .unwrap();
    let md = leasehook_core::source::azure::nic::to_instance(&azure);
    let mut lease = v4_lease("eth1", "10.98.1.20");
    lease.lease.routers.clear();
    let p = plan(
        &PlanInput {
            metadata: &md,
            links: &links(),
            leases: &[lease],
            link_addresses: &eth0_addresses(),
            next_hops: &[],
        },
        &PlanConfig::default(),
    )
    .unwrap();
    assert_eq!(sources(eth1(&p)), ["10.98.1.20/32"]);
    assert_eq!(
        refused(eth1(&p)),
        [
            "local-ipv4s 10.98.1.1: 10.98.1.1 is a router (the gateway of eth1's route to 0.0.0.0/0), never an address of this host"
        ]
    );
    // OCI, `privateIp` and `virtualRouterIp` swapped: the first host is refused.
    let oci = leasehook_core::source::oracle::vnic::parse_saved(
        &json!([
            {"macAddr": MAC0, "privateIp": "10.98.0.10", "subnetCidrBlock": "10.98.0.0/24", "virtualRouterIp": "10.98.0.1"},
            {"macAddr": MAC1, "privateIp": "10.98.1.1", "subnetCidrBlock": "10.98.1.0/24", "virtualRouterIp": "10.98.1.20"}
        ])
        .to_string(),
    )
    .unwrap();
    let nic = oci.nic(MAC1.parse().unwrap()).unwrap();
    assert!(
        nic.gateways.contains(&"10.98.1.1".parse().unwrap()),
        "{:?}",
        nic.gateways
    );
    assert!(
        nic.gateways.contains(&"10.98.1.20".parse().unwrap()),
        "{:?}",
        nic.gateways
    );
}

// --- Issue 34: the IPv6 router a cloud publishes ----------------------------------

/// The IPv6 default route goes through the router the metadata publishes, a
/// link-local one included (OCI's `ipv6VirtualRouterIp`, GCE's `gatewayIpv6`:
/// on the NIC's link, outside every subnet), ahead of the router the kernel
/// learned from advertisements; one that is this host's own address is not a
/// router, and the RA's is used.
#[test]
fn a_published_ipv6_router_is_the_default_link_local_or_not() {
    let default_v6 = |p: &Plan| -> Vec<String> {
        eth1(p)
            .routes
            .iter()
            .filter(|r| r.to.to_string() == "::/0")
            .map(ToString::to_string)
            .collect()
    };
    let with_route = |via: &str| {
        let md = metadata::parse_tree(&tree()).unwrap();
        let mut md = md;
        let mac = MAC1.parse().unwrap();
        let nic = md.nics.iter_mut().find(|n| n.mac == mac).unwrap();
        nic.routes.push(leasehook_core::model::NicRoute {
            to: "::/0".parse().unwrap(),
            via: via.parse().unwrap(),
        });
        plan(
            &PlanInput {
                metadata: &md,
                links: &links(),
                leases: &[v6_lease("eth1", "fd00:98:1::20")],
                link_addresses: &[Address {
                    addr: "fe80::99/64".parse().unwrap(),
                    dev: name("eth0"),
                }],
                next_hops: &[],
            },
            &PlanConfig::default(),
        )
        .unwrap()
    };
    // The cloud's link-local router, not the RA's (fe80::1).
    let p = with_route("fe80::a9fe:a9fe");
    assert_eq!(
        default_v6(&p),
        ["default via fe80::a9fe:a9fe dev eth1 table 10001"]
    );
    assert_eq!(sources(eth1(&p)), ["fd00:98:1::20/128"]);
    // A global one on the NIC's subnet.
    let p = with_route("fd00:98:1::1");
    assert_eq!(
        default_v6(&p),
        ["default via fd00:98:1::1 dev eth1 table 10001"]
    );
    // This host's own link-local address (eth0's) is no router: the RA's is
    // used, and the refusal is listed (status and explain say why).
    let p = with_route("fe80::99");
    assert_eq!(default_v6(&p), ["default via fe80::1 dev eth1 table 10001"]);
    assert!(
        refused(eth1(&p))
            .iter()
            .any(|r| r.starts_with("router fe80::99")),
        "{:?}",
        refused(eth1(&p))
    );
    // A metadata lease's router (OCI's `ipv6VirtualRouterIp`) likewise.
    let mut l = v6_lease("eth1", "fd00:98:1::20");
    l.lease.reason = Reason::Metadata;
    l.lease.prefix_len = 64;
    l.lease.routers = vec!["fe80::200:17ff:fe00:1".parse().unwrap()];
    let p = plan_with(&tree(), &[l], &eth0_addresses());
    assert_eq!(
        default_v6(&p),
        ["default via fe80::200:17ff:fe00:1 dev eth1 table 10001"]
    );
}

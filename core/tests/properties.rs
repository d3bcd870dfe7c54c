// SPDX-License-Identifier: Apache-2.0
//! Property tests: parsers never panic on anything, and the planner keeps its
//! promises for every generated instance.

#![cfg(test)]
#![allow(clippy::too_many_lines)] // table-driven tests read best as one list

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use leasehook_core::apply::record::RecordingApplier;
use leasehook_core::apply::{Applier as _, KernelLink, LinkIndex, apply_plan};

use leasehook_core::diff::{State, diff};
use leasehook_core::event::{Env, dhclient, networkd, parse_env_dump};
use leasehook_core::metadata;
use leasehook_core::model::{Family, IfName, Lease, Link, MacAddr, Profile, Reason};
use leasehook_core::plan::{InterfaceLease, PlanConfig, PlanInput, plan};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Arbitrary JSON, biased towards the shapes metadata uses.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        ".{0,40}".prop_map(Value::String),
        "(10\\.0\\.[0-9]{1,3}\\.[0-9]{1,3}(/[0-9]{1,2})?\n?){1,3}".prop_map(Value::String),
        "0[0-9a-fA-F]:00:00:00:00:0[0-9]".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("network".to_owned()),
                    Just("interfaces".to_owned()),
                    Just("macs".to_owned()),
                    Just("mac".to_owned()),
                    Just("device-number".to_owned()),
                    Just("local-ipv4s".to_owned()),
                    Just("ipv6s".to_owned()),
                    Just("subnet-ipv4-cidr-block".to_owned()),
                    Just("latest".to_owned()),
                    Just("meta-data".to_owned()),
                    "0[0-9a-f]:00:00:00:00:0[0-9]",
                    ".{0,12}",
                ],
                inner,
                0..6,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn any_env() -> impl Strategy<Value = Env> {
    let key = prop_oneof![
        Just("reason".to_owned()),
        Just("interface".to_owned()),
        Just("new_ip_address".to_owned()),
        Just("new_subnet_mask".to_owned()),
        Just("new_routers".to_owned()),
        Just("old_ip_address".to_owned()),
        Just("old_subnet_mask".to_owned()),
        Just("new_ip6_address".to_owned()),
        Just("new_ip6_prefixlen".to_owned()),
        Just("IFACE".to_owned()),
        Just("STATE".to_owned()),
        Just("IP_ADDRS".to_owned()),
        Just("IP6_ADDRS".to_owned()),
        "[A-Za-z_]{1,12}",
    ];
    let value = prop_oneof![
        Just("BOUND".to_owned()),
        Just("RENEW6".to_owned()),
        Just("EXPIRE".to_owned()),
        Just("routable".to_owned()),
        Just("eth1".to_owned()),
        Just("255.255.255.0".to_owned()),
        "[0-9.: ]{0,20}",
        ".{0,30}",
    ];
    prop::collection::btree_map(key, value, 0..10)
}

proptest! {
    #[test]
    fn event_parsers_never_panic(env in any_env()) {
        let _ = dhclient::parse(&env);
        let _ = networkd::parse_dispatcher(&env);
    }

    #[test]
    fn text_parsers_never_panic(text in "(.{0,30}\n?){0,8}") {
        let _ = parse_env_dump("prop", &text);
        let _ = networkd::parse_lease_file(&text);
        let _ = metadata::parse_json(&text);
    }

    #[test]
    fn metadata_parser_never_panics(tree in any_json()) {
        let _ = metadata::parse_tree(&tree);
    }
}

/// One generated NIC: (device-number, network-card, #IPv4, #IPv6, has v4 subnet,
/// has v6 subnet, #v4 prefixes, in the OS, v4 lease, v6 lease).
type NicSpec = (
    Option<u32>,
    Option<u32>,
    usize,
    usize,
    bool,
    bool,
    usize,
    bool,
    bool,
    bool,
);

fn nic_spec() -> impl Strategy<Value = NicSpec> {
    (
        prop::option::weighted(0.9, 0u32..5),
        prop::option::weighted(0.3, 0u32..4),
        0usize..4,
        0usize..3,
        prop::bool::weighted(0.85),
        prop::bool::weighted(0.8),
        0usize..3,
        prop::bool::weighted(0.9),
        prop::bool::weighted(0.8),
        prop::bool::weighted(0.4),
    )
}

/// An instance to plan: its metadata, the kernel's links, the leases and what the
/// links hold (nothing in the plain generator's instances).
#[derive(Debug, Clone)]
struct Instance {
    metadata: leasehook_core::model::InstanceNetwork,
    links: Vec<Link>,
    leases: Vec<InterfaceLease>,
    held: Vec<leasehook_core::model::Address>,
}

impl Instance {
    /// The planner's input: this instance, with `next_hops` in the main table.
    fn input<'a>(&'a self, next_hops: &'a [leasehook_core::gate::Router]) -> PlanInput<'a> {
        PlanInput {
            metadata: &self.metadata,
            links: &self.links,
            leases: &self.leases,
            link_addresses: &self.held,
            next_hops,
        }
    }
}

fn instance() -> impl Strategy<Value = (Instance, bool, bool)> {
    (
        prop::collection::vec(nic_spec(), 1..7),
        prop::option::weighted(0.9, 0usize..7),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(specs, primary, ra, primary_rules, secondary_addresses)| {
            let mut macs = serde_json::Map::new();
            let mut links = Vec::new();
            let mut leases = Vec::new();
            for (i, (dn, card, n4, n6, sub4, sub6, p4, in_os, l4, l6)) in specs.iter().enumerate() {
                let i = u8::try_from(i).unwrap();
                let mac = MacAddr::new([2, 0, 0, 0, 0, i + 1]);
                let v4: Vec<String> = (0..*n4).map(|k| format!("10.0.{i}.{}", 10 + k)).collect();
                let v6: Vec<String> = (0..*n6)
                    .map(|k| format!("2600:1f18:0:{i}::{}", 20 + k))
                    .collect();
                let mut nic = serde_json::Map::new();
                if let Some(d) = dn {
                    nic.insert("device-number".into(), json!(d.to_string()));
                }
                if let Some(c) = card {
                    nic.insert("network-card".into(), json!(c.to_string()));
                }
                nic.insert("local-ipv4s".into(), json!(v4.join("\n")));
                nic.insert("ipv6s".into(), json!(v6));
                if *sub4 {
                    nic.insert(
                        "subnet-ipv4-cidr-block".into(),
                        json!(format!("10.0.{i}.0/24")),
                    );
                }
                if *sub6 {
                    nic.insert(
                        "subnet-ipv6-cidr-blocks".into(),
                        json!(format!("2600:1f18:0:{i}::/64")),
                    );
                }
                let prefixes: Vec<String> = (0..*p4)
                    .map(|k| format!("10.1.{i}.{}/28", 16 * k))
                    .collect();
                nic.insert("ipv4-prefix".into(), json!(prefixes));
                macs.insert(mac.to_string(), Value::Object(nic));
                if !in_os {
                    continue;
                }
                let name = IfName::try_new(&format!("eth{i}")).unwrap();
                links.push(Link {
                    name: name.clone(),
                    mac,
                    ipv6_router: ra.then(|| "fe80::1".parse().unwrap()),
                });
                if *l4 {
                    leases.push(InterfaceLease {
                        interface: name.clone(),
                        lease: Lease {
                            family: Family::V4,
                            address: IpAddr::V4(Ipv4Addr::new(10, 0, i, 10)),
                            prefix_len: 24,
                            routers: vec![IpAddr::V4(Ipv4Addr::new(10, 0, i, 1))],
                            reason: Reason::Bound,
                        },
                    });
                }
                if *l6 {
                    leases.push(InterfaceLease {
                        interface: name,
                        lease: Lease {
                            family: Family::V6,
                            address: IpAddr::V6(Ipv6Addr::new(
                                0x2600,
                                0x1f18,
                                0,
                                u16::from(i),
                                0,
                                0,
                                0,
                                0x20,
                            )),
                            prefix_len: 128,
                            routers: Vec::new(),
                            reason: Reason::Bound,
                        },
                    });
                }
            }
            let mut tree = json!({"network": {"interfaces": {"macs": macs}}});
            if let Some(p) = primary.filter(|p| *p < specs.len()) {
                tree["mac"] =
                    json!(MacAddr::new([2, 0, 0, 0, 0, u8::try_from(p).unwrap() + 1]).to_string());
            }
            let metadata = metadata::parse_tree(&tree).unwrap();
            (
                Instance {
                    metadata,
                    links,
                    leases,
                    held: Vec::new(),
                },
                primary_rules,
                secondary_addresses,
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn planner_promises((inst, primary_rules, secondary_addresses) in instance()) {
        let input = inst.input(&[]);
        for profile in [Profile::Ec2NetUtils, Profile::CloudInit] {
            let cfg = PlanConfig { profile, primary_rules, secondary_addresses, ..PlanConfig::default() };
            let p = plan(&input, &cfg).unwrap();

            // Re-applying an unchanged plan writes nothing: applied to an (empty)
            // in-memory kernel, what the kernel then holds is exactly the plan, the
            // diff against what it observes is empty, and a second apply writes
            // nothing (issue 18, item 12: this compared the plan with itself).
            let mut kernel = RecordingApplier {
                links: inst.links.iter().zip(2u32..).map(|(l, index)| KernelLink {
                    index,
                    name: l.name.clone(),
                    mac: Some(l.mac),
                }).collect(),
                ..RecordingApplier::default()
            };
            match apply_plan(&mut kernel, &p, &[]) {
                // Refused as a whole by the validator (two NICs claiming one
                // table, issue 18 item 4): nothing may have been written.
                Err(e @ leasehook_core::Error::InvalidPlan(_)) => {
                    prop_assert!(kernel.writes.is_empty(), "{e}: wrote {:?}", kernel.writes);
                }
                Err(e) => panic!("{e}"),
                Ok(first) => {
                    let index: LinkIndex =
                        kernel.links.iter().map(|l| (l.name.clone(), l.index)).collect();
                    let observed = kernel.observe(&index, &BTreeSet::new()).unwrap().owned;
                    prop_assert_eq!(&observed, &State::of_plan(&p));
                    prop_assert_eq!(
                        first.writes(),
                        observed.rules.len() + observed.routes.len() + observed.addresses.len()
                    );
                    prop_assert!(diff(&p, &observed).is_empty(), "{:?}", diff(&p, &observed));
                    let again = apply_plan(&mut kernel, &p, &[]).unwrap();
                    prop_assert_eq!(again.writes(), 0, "{:?}", again.ops);
                }
            }

            for ip in &p.interfaces {
                // Every rule's table holds a route of the rule's family.
                for rule in &ip.rules {
                    prop_assert!(
                        ip.routes.iter().any(|r| r.table == rule.table && r.family() == rule.family()),
                        "rule {rule} has no route in its table"
                    );
                }
                if profile == Profile::CloudInit {
                    // The primary (position 0) never gets policy routing.
                    prop_assert!(!ip.primary || ip.rules.is_empty());
                    continue;
                }
                // The default profile never gives the primary rules unless asked.
                if ip.primary && !primary_rules {
                    prop_assert!(ip.rules.is_empty() && ip.routes.is_empty() && ip.table.is_none());
                }
                // Tables are table_base + 100 * card + device.
                if let Some(t) = ip.table {
                    let nic = inst.metadata.nic(ip.mac).unwrap();
                    let want = cfg.table_base + 100 * nic.network_card.unwrap_or(0) + nic.device_number.unwrap();
                    prop_assert_eq!(t, want);
                    prop_assert!(ip.rules.iter().all(|r| r.table == t && r.priority == Some(t)));
                    prop_assert!(ip.routes.iter().all(|r| r.table == t));
                }
                // device-number 0 on a secondary is trusted only on a card other
                // than 0 (SPEC §3.2); a NIC without `network-card` while another NIC
                // has one is not planned as card 0.
                let nic = inst.metadata.nic(ip.mac);
                let card = nic.and_then(|n| n.network_card);
                let others_have_cards = inst
                    .metadata
                    .nics
                    .iter()
                    .any(|n| n.mac != ip.mac && n.network_card.is_some());
                if !ip.primary {
                    if nic.and_then(|n| n.device_number) == Some(0) && card.unwrap_or(0) == 0 {
                        prop_assert!(ip.table.is_none());
                    }
                    if card.is_none() && others_have_cards {
                        prop_assert!(ip.table.is_none());
                    }
                    // ... and is routed on card 1 and up (p4d, p5, trn1 layouts),
                    // unless another NIC claims the same card and device: that is
                    // a table conflict, and neither is routed (issue 18, item 4).
                    let claimed_twice = inst.metadata.nics.iter().any(|n| {
                        n.mac != ip.mac
                            && n.network_card == card
                            && n.device_number == nic.and_then(|m| m.device_number)
                    });
                    if let (Some(c @ 1..), Some(0), false) =
                        (card, nic.and_then(|n| n.device_number), claimed_twice)
                    {
                        prop_assert_eq!(ip.table, Some(cfg.table_base + 100 * c));
                    }
                }
                if !secondary_addresses {
                    prop_assert!(ip.addresses.is_empty());
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A Kubernetes node (issue 19): the primary's secondary IPs and prefixes never
    /// become an address or a rule source (only the lease's own address, or the
    /// ENI's primary IP, may have a rule), and every other NIC is planned exactly as
    /// on any instance.
    #[test]
    fn kubernetes_leaves_the_primarys_pod_addresses((inst, primary_rules, secondary_addresses) in instance()) {
        let input = inst.input(&[]);
        let plain = PlanConfig { primary_rules, secondary_addresses, ..PlanConfig::default() };
        let kube = PlanConfig { kubernetes: true, ..plain.clone() };
        let (a, b) = (plan(&input, &plain).unwrap(), plan(&input, &kube).unwrap());
        prop_assert_eq!(a.interfaces.len(), b.interfaces.len());
        for (x, y) in a.interfaces.iter().zip(&b.interfaces) {
            if !y.primary {
                prop_assert_eq!(x, y);
                continue;
            }
            prop_assert!(y.addresses.is_empty(), "{:?}", y.addresses);
            // The lease's own address, or (while IMDS does not list the lease) the
            // ENI's primary IP, IMDS's first entry: never a pod's.
            let nic = inst.metadata.nic(y.mac).unwrap();
            let own: Vec<IpAddr> = inst
                .leases
                .iter()
                .filter(|l| l.interface == y.name)
                .map(|l| l.lease.address)
                .chain(nic.local_ipv4s.first().map(|a| IpAddr::V4(*a)))
                .chain(nic.ipv6s.first().map(|a| IpAddr::V6(*a)))
                .collect();
            for r in &y.rules {
                prop_assert!(
                    r.from.prefix_len() == r.from.max_prefix_len() && own.contains(&r.from.addr()),
                    "rule {} is not from the lease's own address", r
                );
            }
            // Nothing else changes: the table and routes are the same.
            prop_assert_eq!(&x.routes, &y.routes);
            prop_assert_eq!(x.table, y.table);
        }
    }
}

#[test]
fn plan_is_deterministic_across_link_order() {
    let inst = Instance {
        metadata: metadata::parse_tree(&leasehook_core::example::metadata()).unwrap(),
        links: leasehook_core::example::links(),
        leases: leasehook_core::example::leases(),
        held: Vec::new(),
    };
    let mut reversed = inst.clone();
    reversed.links.reverse();
    let cfg = PlanConfig::default();
    assert_eq!(
        plan(&inst.input(&[]), &cfg).unwrap(),
        plan(&reversed.input(&[]), &cfg).unwrap()
    );
}

// --- The address gate (issue 18: "no plan ever contains a rule whose source is
// unusable or wider than the NIC's addresses") ----------------------------------

/// Ranges no rule source or added address may touch, written here on their own
/// (not taken from `leasehook_core::gate`), so the property checks the gate
/// rather than repeating it.
const NEVER: &[&str] = &[
    "0.0.0.0/8",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "224.0.0.0/4",
    "255.255.255.255/32",
    "100.100.100.200/32",
    "168.63.129.16/32",
    "::/128",
    "::1/128",
    "fe80::/10",
    "ff00::/8",
    "::ffff:0:0/96",
    "fd00:ec2::254/128",
    "fd00:c1::a9fe:a9fe/128",
];

fn touches_never(net: &ipnet::IpNet) -> bool {
    NEVER.iter().any(|r| {
        let r: ipnet::IpNet = r.parse().unwrap();
        r.contains(&net.network()) || net.contains(&r.network())
    })
}

/// One value for a NIC's address list: its own, another NIC's, or hostile.
fn hostile_host(i: u8, v6: bool) -> BoxedStrategy<String> {
    let own = if v6 {
        (20u8..24)
            .prop_map(move |k| format!("2600:1f18:0:{i}::{k}"))
            .boxed()
    } else {
        (10u8..14)
            .prop_map(move |k| format!("10.0.{i}.{k}"))
            .boxed()
    };
    let other = if v6 {
        (0u8..4)
            .prop_map(|j| format!("2600:1f18:0:{j}::20"))
            .boxed()
    } else {
        (0u8..4).prop_map(|j| format!("10.0.{j}.10")).boxed()
    };
    let bad: Vec<&str> = if v6 {
        vec![
            "::",
            "::1",
            "fe80::1",
            "ff02::1",
            "fd00:ec2::254",
            "::ffff:10.0.0.10",
            "fd00:c1::a9fe:a9fe",
        ]
    } else {
        vec![
            "0.0.0.0",
            "127.0.0.1",
            "255.255.255.255",
            "169.254.169.254",
            "224.0.0.1",
            "100.100.100.200",
            "0.1.2.3",
            "10.0.0.255",
        ]
    };
    prop_oneof![
        4 => own,
        1 => other,
        2 => prop::sample::select(bad).prop_map(str::to_owned),
    ]
    .boxed()
}

/// One value for a NIC's delegated prefixes or subnet: sane or hostile.
fn hostile_prefix(i: u8, v6: bool) -> BoxedStrategy<String> {
    let list: Vec<String> = if v6 {
        vec![
            format!("2600:1f18:0:{i}::/64"),
            format!("2600:1f18:0:{i}:8000::/80"),
            format!("2600:1f18:0:{}::/64", (i + 1) % 4),
            "2600:1f18::/32".to_owned(),
            "::/0".to_owned(),
            "8000::/1".to_owned(),
            "fe80::/64".to_owned(),
        ]
    } else {
        vec![
            format!("10.0.{i}.0/24"),
            format!("10.0.{i}.64/28"),
            format!("10.0.{i}.0/28"),
            format!("10.0.{}.0/24", (i + 1) % 4),
            "10.0.0.0/8".to_owned(),
            "0.0.0.0/0".to_owned(),
            "0.0.0.0/1".to_owned(),
            "128.0.0.0/1".to_owned(),
            "127.0.0.0/8".to_owned(),
            "169.254.169.0/24".to_owned(),
        ]
    };
    let sane: Vec<String> = list.iter().take(2).cloned().collect();
    prop_oneof![
        2 => prop::sample::select(sane),
        3 => prop::sample::select(list),
    ]
    .boxed()
}

type HostileNic = (
    Option<u32>,
    Vec<String>,
    Vec<String>,
    Vec<String>,
    Vec<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<(String, u8)>,
);

fn hostile_nic(i: u8) -> impl Strategy<Value = HostileNic> {
    (
        prop::option::weighted(0.9, prop_oneof![3 => Just(u32::from(i)), 1 => 0u32..3]),
        prop::collection::vec(hostile_host(i, false), 0..4),
        prop::collection::vec(hostile_host(i, true), 0..3),
        prop::collection::vec(hostile_prefix(i, false), 0..3),
        prop::collection::vec(hostile_prefix(i, true), 0..2),
        prop::option::weighted(0.8, hostile_prefix(i, false)),
        prop::option::weighted(0.6, hostile_prefix(i, true)),
        prop::option::weighted(0.5, hostile_host(i, true)),
        prop::option::weighted(
            0.9,
            (hostile_host(i, false), prop_oneof![Just(24u8), 0u8..33]),
        ),
    )
}

fn hostile_instance() -> impl Strategy<Value = Instance> {
    (
        hostile_nic(0),
        hostile_nic(1),
        hostile_nic(2),
        hostile_nic(3),
        2usize..5,
        prop::collection::vec((0u8..4, hostile_host(0, false)), 0..3),
    )
        .prop_filter_map("metadata the parser refuses", |(a, b, c, d, n, extra)| {
            let specs = [a, b, c, d];
            let mut macs = serde_json::Map::new();
            let (mut links, mut leases, mut held) = (Vec::new(), Vec::new(), Vec::new());
            for (i, (dn, v4, v6, p4, p6, s4, s6, l6, l4)) in specs.iter().take(n).enumerate() {
                let i = u8::try_from(i).unwrap();
                let mac = MacAddr::new([2, 0, 0, 0, 0, i + 1]);
                let mut nic = serde_json::Map::new();
                if let Some(d) = dn {
                    nic.insert("device-number".into(), json!(d.to_string()));
                }
                nic.insert("local-ipv4s".into(), json!(v4.join("\n")));
                nic.insert("ipv6s".into(), json!(v6.join("\n")));
                nic.insert("ipv4-prefix".into(), json!(p4.join("\n")));
                nic.insert("ipv6-prefix".into(), json!(p6.join("\n")));
                if let Some(s) = s4 {
                    nic.insert("subnet-ipv4-cidr-block".into(), json!(s));
                }
                if let Some(s) = s6 {
                    nic.insert("subnet-ipv6-cidr-blocks".into(), json!(s));
                }
                macs.insert(mac.to_string(), Value::Object(nic));
                let name = IfName::try_new(&format!("eth{i}")).unwrap();
                links.push(Link {
                    name: name.clone(),
                    mac,
                    ipv6_router: Some("fe80::1".parse().unwrap()),
                });
                // What the kernel says this link holds: its DHCP address.
                held.push(leasehook_core::model::Address {
                    addr: format!("10.0.{i}.10/24").parse().unwrap(),
                    dev: name.clone(),
                });
                if let Some((addr, len)) = l4 {
                    leases.push(InterfaceLease {
                        interface: name.clone(),
                        lease: Lease {
                            family: Family::V4,
                            address: addr.parse().ok()?,
                            prefix_len: *len,
                            routers: vec![IpAddr::V4(Ipv4Addr::new(10, 0, i, 1))],
                            reason: Reason::Bound,
                        },
                    });
                }
                if let Some(addr) = l6 {
                    leases.push(InterfaceLease {
                        interface: name,
                        lease: Lease {
                            family: Family::V6,
                            address: addr.parse().ok()?,
                            prefix_len: 128,
                            routers: Vec::new(),
                            reason: Reason::Bound,
                        },
                    });
                }
            }
            for (k, addr) in extra {
                let dev = IfName::try_new(&format!("eth{}", usize::from(k) % n)).unwrap();
                held.push(leasehook_core::model::Address {
                    addr: format!("{addr}/32").parse().ok()?,
                    dev,
                });
            }
            let tree = json!({"mac": MacAddr::new([2, 0, 0, 0, 0, 1]).to_string(),
                              "network": {"interfaces": {"macs": macs}}});
            let metadata = metadata::parse_tree(&tree).ok()?;
            Some(Instance {
                metadata,
                links,
                leases,
                held,
            })
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn no_rule_source_is_unusable_or_wider_than_the_nics_addresses(
        inst in hostile_instance(),
        primary_rules in any::<bool>(),
    ) {
        let input = inst.input(&[]);
        for profile in [Profile::Ec2NetUtils, Profile::CloudInit] {
            let cfg = PlanConfig { profile, primary_rules, ..PlanConfig::default() };
            let Ok(p) = plan(&input, &cfg) else { continue };
            let mut tables = std::collections::BTreeMap::new();
            for ip in &p.interfaces {
                let nic = inst.metadata.nic(ip.mac);
                // What this NIC may hold: its listed addresses and leases, its
                // delegated prefixes; its subnets no wider than /8 (IPv4), /16 (IPv6).
                let mut hosts: Vec<IpAddr> = inst
                    .leases
                    .iter()
                    .filter(|l| l.interface == ip.name)
                    .map(|l| l.lease.address)
                    .collect();
                let mut prefixes = Vec::new();
                let mut subnets: Vec<ipnet::IpNet> = inst
                    .leases
                    .iter()
                    .filter(|l| l.interface == ip.name)
                    .filter_map(|l| l.lease.interface_net())
                    .collect();
                if let Some(n) = nic {
                    hosts.extend(n.local_ipv4s.iter().map(|a| IpAddr::V4(*a)));
                    hosts.extend(n.ipv6s.iter().map(|a| IpAddr::V6(*a)));
                    prefixes.extend(n.ipv4_prefixes.iter().map(|p| ipnet::IpNet::V4(p.trunc())));
                    prefixes.extend(n.ipv6_prefixes.iter().map(|p| ipnet::IpNet::V6(p.trunc())));
                    subnets.extend(n.subnet_ipv4_cidr_blocks.iter().map(|s| ipnet::IpNet::V4(s.trunc())));
                    subnets.extend(n.subnet_ipv6_cidr_blocks.iter().map(|s| ipnet::IpNet::V6(s.trunc())));
                }
                subnets.retain(|s| s.prefix_len() >= if s.addr().is_ipv4() { 8 } else { 16 });
                // What other NICs hold: the metadata's and the kernel's.
                let mut others: Vec<IpAddr> = inst
                    .metadata
                    .nics
                    .iter()
                    .filter(|n| n.mac != ip.mac)
                    .flat_map(|n| {
                        n.local_ipv4s
                            .iter()
                            .map(|a| IpAddr::V4(*a))
                            .chain(n.ipv6s.iter().map(|a| IpAddr::V6(*a)))
                    })
                    .collect();
                others.extend(inst.held.iter().filter(|a| a.dev != ip.name).map(|a| a.addr.addr()));
                for r in &ip.rules {
                    let from = r.from;
                    prop_assert!(from.prefix_len() > 0, "{}: rule {r}: a /0", ip.name);
                    prop_assert!(!touches_never(&from), "{}: rule {r}: unusable source", ip.name);
                    prop_assert!(r.priority != Some(0), "{}: rule {r}: priority 0", ip.name);
                    prop_assert!(
                        !others.iter().any(|o| from.contains(o)),
                        "{}: rule {r} covers another NIC's address", ip.name
                    );
                    if from.prefix_len() == from.max_prefix_len() {
                        prop_assert!(hosts.contains(&from.addr()), "{}: rule {r}: not the NIC's address", ip.name);
                    } else {
                        prop_assert!(prefixes.contains(&from), "{}: rule {r}: not a delegated prefix", ip.name);
                        prop_assert!(
                            subnets.iter().any(|s| s.contains(&from) && s.prefix_len() < from.prefix_len()),
                            "{}: rule {r}: wider than the NIC's subnet {subnets:?}", ip.name
                        );
                    }
                    if let Some(t) = tables.insert(r.table, ip.name.clone()) {
                        prop_assert_eq!(&t, &ip.name, "table {} shared", r.table);
                    }
                }
                for a in &ip.addresses {
                    let host = a.addr.addr();
                    prop_assert!(hosts.contains(&host), "{}: address {a}: not the NIC's", ip.name);
                    prop_assert!(!touches_never(&ipnet::IpNet::from(host)), "{}: address {a}: unusable", ip.name);
                    prop_assert!(!others.contains(&host), "{}: address {a}: another NIC's", ip.name);
                    prop_assert!(a.addr.prefix_len() >= if host.is_ipv4() { 8 } else { 16 }, "{}: address {a}: too wide", ip.name);
                }
            }
        }
    }
}

/// The hostile generator is not vacuous: a good share of its instances plan rules,
/// and a good share have values the gate refuses.
#[test]
fn hostile_instances_plan_rules_and_refusals() {
    use proptest::strategy::ValueTree as _;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = hostile_instance();
    let (mut with_rules, mut with_prefix_rules, mut with_refusals) = (0, 0, 0);
    for _ in 0..300 {
        let inst = strategy.new_tree(&mut runner).unwrap().current();
        let p = plan(&inst.input(&[]), &PlanConfig::default()).unwrap();
        let rules = p.interfaces.iter().flat_map(|i| &i.rules);
        with_rules += usize::from(rules.clone().next().is_some());
        with_prefix_rules += usize::from(
            rules
                .clone()
                .any(|r| r.from.prefix_len() != r.from.max_prefix_len()),
        );
        with_refusals += usize::from(p.interfaces.iter().any(|i| !i.refused.is_empty()));
    }
    assert!(with_rules > 100, "{with_rules} of 300 plan rules");
    assert!(
        with_prefix_rules > 15,
        "{with_prefix_rules} of 300 plan prefix rules"
    );
    assert!(
        with_refusals > 150,
        "{with_refusals} of 300 refuse something"
    );
}

/// A router's address for a hostile instance (issue 30, item 2): NIC `j`'s
/// subnet's first host, or one of the addresses its NICs list, as often as not.
fn hostile_router() -> impl Strategy<Value = IpAddr> {
    (0u8..4, prop_oneof![Just(1u8), 10u8..14])
        .prop_map(|(j, k)| IpAddr::V4(Ipv4Addr::new(10, 0, j, k)))
}

/// Routers a hostile instance is given besides its leases': (the kernel's
/// main-table next hops, a NIC's gateways the metadata names, a NIC's route
/// next hops, routers added to a lease), and whether every lease is the
/// metadata's (a NIC without DHCP, whose address is added with its prefix).
type HostileRouters = (
    Vec<IpAddr>,
    Vec<(usize, IpAddr)>,
    Vec<(usize, IpAddr)>,
    Vec<(usize, IpAddr)>,
    bool,
);

fn hostile_routers() -> impl Strategy<Value = HostileRouters> {
    (
        prop::collection::vec(hostile_router(), 0..3),
        prop::collection::vec((0usize..4, hostile_router()), 0..3),
        prop::collection::vec((0usize..4, hostile_router()), 0..3),
        prop::collection::vec((0usize..4, hostile_router()), 0..3),
        any::<bool>(),
    )
}

/// The instance with `routers` given to it; returns the kernel's next hops and
/// every router's address the planner is told of.
fn with_routers(
    inst: &mut Instance,
    (hops, gateways, vias, lease_routers, unleased): &HostileRouters,
) -> (Vec<leasehook_core::gate::Router>, BTreeSet<IpAddr>) {
    let n = inst.metadata.nics.len().max(1);
    for (k, g) in gateways {
        if let Some(nic) = inst.metadata.nics.get_mut(k % n) {
            nic.gateways.push(*g);
        }
    }
    for (k, via) in vias {
        if let Some(nic) = inst.metadata.nics.get_mut(k % n) {
            nic.routes.push(leasehook_core::model::NicRoute {
                to: format!("192.168.{k}.0/24").parse().unwrap(),
                via: *via,
            });
        }
    }
    let v4: Vec<usize> = (0..inst.leases.len())
        .filter(|i| inst.leases[*i].lease.family == Family::V4)
        .collect();
    for (k, r) in lease_routers {
        if !v4.is_empty() {
            inst.leases[v4[k % v4.len()]].lease.routers.insert(0, *r);
        }
    }
    if *unleased {
        for l in &mut inst.leases {
            l.lease.reason = Reason::Metadata;
        }
    }
    let next_hops = hops
        .iter()
        .map(|a| leasehook_core::gate::Router {
            address: *a,
            whose: "a next hop of the main table".to_owned(),
        })
        .collect();
    let mut all: BTreeSet<IpAddr> = hops.iter().copied().collect();
    all.extend(
        inst.leases
            .iter()
            .flat_map(|l| l.lease.routers.iter().copied()),
    );
    for nic in &inst.metadata.nics {
        all.extend(nic.gateways.iter().copied());
        // A route's next hop that the NIC itself lists is that route's fault
        // (refused as a next hop, checked below), not the address's.
        let own = |a: &IpAddr| match a {
            IpAddr::V4(v4) => nic.local_ipv4s.contains(v4),
            IpAddr::V6(v6) => nic.ipv6s.contains(v6),
        };
        all.extend(
            nic.routes
                .iter()
                .filter(|r| r.to.prefix_len() == 0 || !own(&r.via))
                .map(|r| r.via),
        );
    }
    (next_hops, all)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Issue 30, items 2 and 3: for any metadata answer, no address leasehook
    /// adds and no rule source is a router's address the kernel (main-table next
    /// hops), a lease or the metadata knows; no route it plans goes to the main
    /// table (or any reserved one); and every address it adds with a prefix is
    /// added `noprefixroute`, so the kernel puts no prefix route into main either.
    #[test]
    fn no_router_is_ours_and_nothing_goes_to_main(
        inst in hostile_instance(),
        routers in hostile_routers(),
        primary_rules in any::<bool>(),
    ) {
        let mut inst = inst;
        let (next_hops, all) = with_routers(&mut inst, &routers);
        let input = inst.input(&next_hops);
        for profile in [Profile::Ec2NetUtils, Profile::CloudInit] {
            let cfg = PlanConfig { profile, primary_rules, ..PlanConfig::default() };
            let Ok(p) = plan(&input, &cfg) else { continue };
            for ip in &p.interfaces {
                for r in &ip.routes {
                    prop_assert!(
                        !leasehook_core::constants::RESERVED_TABLES.contains(&r.table),
                        "{}: route {r} goes to a reserved table (main)", ip.name
                    );
                    prop_assert!(r.via.is_none_or(|v| !inst.held.iter().any(|a| a.addr.addr() == v)),
                        "{}: route {r} through an address of this host", ip.name);
                    // A next hop the metadata names (not the DHCP server's router)
                    // is never an address the NIC lists.
                    let listed = inst.metadata.nic(ip.mac).is_some_and(|n| {
                        r.via.is_some_and(|v| match v {
                            IpAddr::V4(a) => n.local_ipv4s.contains(&a),
                            IpAddr::V6(a) => n.ipv6s.contains(&a),
                        })
                    });
                    let leased = inst.leases.iter().any(|l| {
                        l.interface == ip.name
                            && l.lease.reason != Reason::Metadata
                            && l.lease.routers.first().copied() == r.via
                    }) || inst.links.iter().any(|l| {
                        l.name == ip.name && l.ipv6_router.map(IpAddr::V6) == r.via
                    });
                    prop_assert!(!listed || leased, "{}: route {r} through an address it lists", ip.name);
                }
                for r in &ip.rules {
                    prop_assert!(
                        r.from.prefix_len() != r.from.max_prefix_len() || !all.contains(&r.from.addr()),
                        "{}: rule {r}: a router's address", ip.name
                    );
                }
                for a in &ip.addresses {
                    prop_assert!(!all.contains(&a.addr.addr()), "{}: address {a}: a router's", ip.name);
                    if a.addr.prefix_len() < a.addr.max_prefix_len() {
                        prop_assert!(a.no_prefix_route(), "{}: address {a}", ip.name);
                        let op = leasehook_core::diff::Op::AddAddress(a.clone()).to_string();
                        prop_assert!(op.ends_with(" noprefixroute"), "{op}");
                    }
                }
            }
        }
    }
}

/// The router generator is not vacuous: a good share of its instances refuse a
/// router's address, and a good share add an address with a prefix.
#[test]
fn hostile_routers_are_refused_and_prefixes_added() {
    use proptest::strategy::ValueTree as _;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = (hostile_instance(), hostile_routers());
    let (mut refused, mut prefixed) = (0, 0);
    for _ in 0..300 {
        let (mut inst, routers) = strategy.new_tree(&mut runner).unwrap().current();
        let (next_hops, _) = with_routers(&mut inst, &routers);
        let input = inst.input(&next_hops);
        for profile in [Profile::Ec2NetUtils, Profile::CloudInit] {
            let cfg = PlanConfig {
                profile,
                ..PlanConfig::default()
            };
            let Ok(p) = plan(&input, &cfg) else { continue };
            refused += usize::from(p.interfaces.iter().any(|i| {
                i.refused
                    .iter()
                    .any(|r| matches!(r.reason, leasehook_core::gate::Refusal::Router { .. }))
            }));
            prefixed += usize::from(p.interfaces.iter().any(|i| {
                i.addresses
                    .iter()
                    .any(|a| a.addr.prefix_len() < a.addr.max_prefix_len())
            }));
        }
    }
    assert!(refused > 100, "{refused} of 600 plans refuse a router");
    assert!(prefixed > 50, "{prefixed} of 600 plans add a prefix");
}

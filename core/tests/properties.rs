// SPDX-License-Identifier: Apache-2.0
//! Property tests: parsers never panic on anything, and the planner keeps its
//! promises for every generated instance.

#![allow(clippy::too_many_lines)] // table-driven tests read best as one list
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

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

#[derive(Debug, Clone)]
struct Instance {
    metadata: leasehook_core::model::InstanceNetwork,
    links: Vec<Link>,
    leases: Vec<InterfaceLease>,
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
        let input = PlanInput { metadata: &inst.metadata, links: &inst.links, leases: &inst.leases };
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
                // A NIC reading device-number 0 that is not the primary gets no table.
                if inst.metadata.nic(ip.mac).and_then(|n| n.device_number) == Some(0) && !ip.primary {
                    prop_assert!(ip.table.is_none());
                }
                if !secondary_addresses {
                    prop_assert!(ip.addresses.is_empty());
                }
            }
        }
    }
}

#[test]
fn plan_is_deterministic_across_link_order() {
    let md = metadata::parse_tree(&leasehook_core::example::metadata()).unwrap();
    let links = leasehook_core::example::links();
    let leases = leasehook_core::example::leases();
    let mut reversed = links.clone();
    reversed.reverse();
    let cfg = PlanConfig::default();
    let a = plan(
        &PlanInput {
            metadata: &md,
            links: &links,
            leases: &leases,
        },
        &cfg,
    )
    .unwrap();
    let b = plan(
        &PlanInput {
            metadata: &md,
            links: &reversed,
            leases: &leases,
        },
        &cfg,
    )
    .unwrap();
    assert_eq!(a, b);
}

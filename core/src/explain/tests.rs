// SPDX-License-Identifier: Apache-2.0
//! The reasoning of `leasehook explain`, one case a row.

use std::collections::BTreeMap;

use super::*;
use crate::apply::state::{FamilyState, STATE_VERSION};
use crate::gate::Refused;
use crate::model::{Family, Lease, Missing, Profile, Reason};

fn name(n: &str) -> IfName {
    IfName::try_new(n).unwrap()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn rule(from: &str, table: u32) -> Rule {
    Rule {
        from: from.parse().unwrap(),
        to: None,
        table,
        priority: Some(table),
    }
}

/// eth1 (table 10001): lease 10.0.1.20, rules for it, 10.0.1.21 and the prefix
/// 10.0.1.48/28; the gate refused 169.254.169.254. eth0: the primary, no table.
fn facts() -> Facts {
    let lease = |a: &str| Lease {
        family: Family::V4,
        address: ip(a),
        prefix_len: 24,
        routers: vec![],
        reason: Reason::Bound,
    };
    let state = |n: &str, mac: &str, table: Option<u32>, lease_addr: &str, rules: Vec<Rule>| {
        InterfaceState {
            version: STATE_VERSION,
            name: name(n),
            mac: mac.parse().unwrap(),
            profile: Profile::Ec2NetUtils,
            table,
            primary: table.is_none(),
            families: BTreeMap::from([(
                Family::V4,
                FamilyState {
                    rules,
                    routes: vec![],
                    addresses: vec![],
                    lease: Some(lease(lease_addr)),
                },
            )]),
            missing: vec![],
            refused: vec![],
            applied_at_ms: 0,
        }
    };
    let rules = vec![
        rule("10.0.1.20/32", 10001),
        rule("10.0.1.21/32", 10001),
        rule("10.0.1.48/28", 10001),
    ];
    let mut eth1 = state(
        "eth1",
        "02:00:00:00:00:02",
        Some(10001),
        "10.0.1.20",
        rules.clone(),
    );
    eth1.refused.push(Refused::new(
        "local-ipv4s",
        "169.254.169.254",
        Refusal::MetadataService {
            address: ip("169.254.169.254"),
            service: "EC2".to_owned(),
            covers: false,
        },
    ));
    let eth0 = state("eth0", "02:00:00:00:00:01", None, "10.0.0.10", vec![]);
    let addr = |a: &str, dev: &str| Address {
        addr: format!("{a}/24").parse().unwrap(),
        dev: name(dev),
    };
    Facts {
        states: vec![eth0, eth1],
        links: ["eth0", "eth1", "eth2", "eth3", "eth4"]
            .iter()
            .map(|n| (name(n), None))
            .collect(),
        addresses: vec![
            addr("10.0.0.10", "eth0"),
            addr("10.0.1.20", "eth1"),
            addr("10.0.1.21", "eth1"),
            addr("10.0.2.30", "eth2"),
            addr("10.0.3.40", "eth3"),
            addr("10.0.4.50", "eth4"),
        ],
        kernel_rules: rules,
        unmanaged: vec!["eth3".parse().unwrap()],
        cni_enis: vec![(name("eth4"), "table 2 routes through it".to_owned())],
        conflicts: Vec::new(),
        pending: vec![Pending {
            iface: name("eth2"),
            pid: Some(42),
            address: Some(ip("10.0.2.30")),
            deadline_ms: 20_500,
        }],
        now_ms: 1_000,
        cloud: None,
    }
}

fn answer(table: u32) -> KernelRoute {
    let mut r = KernelRoute::to(ip("10.0.1.20"));
    r.table = table;
    r.dev = Some(name("eth1"));
    r
}

#[test]
fn each_reason_wins_in_its_case() {
    let unreachable: Result<KernelRoute, String> = Err("Network is unreachable".to_owned());
    // (address, kernel's table (0: an error), verdict, NIC, a sentence's words)
    let rows: &[(&str, u32, Verdict, Option<&str>, &str)] = &[
        (
            "10.0.1.20",
            10001,
            Verdict::Routed,
            Some("eth1"),
            "eth1's DHCP lease address",
        ),
        (
            "10.0.1.21",
            10001,
            Verdict::Routed,
            Some("eth1"),
            "secondary address of eth1",
        ),
        (
            "10.0.1.50",
            0,
            Verdict::Routed,
            Some("eth1"),
            "inside 10.0.1.48/28, a prefix",
        ),
        (
            "10.0.1.21",
            254,
            Verdict::Drift,
            Some("eth1"),
            "the kernel takes it to table 254, not 10001: a rule before ours",
        ),
        (
            "169.254.169.254",
            0,
            Verdict::Refused,
            Some("eth1"),
            "never the metadata service's addresses",
        ),
        (
            "10.0.0.10",
            254,
            Verdict::Primary,
            Some("eth0"),
            "is the primary NIC",
        ),
        (
            "10.0.2.30",
            0,
            Verdict::Waiting,
            Some("eth2"),
            "worker 42 waits for it to agree with the lease for 20 s more",
        ),
        (
            "10.0.3.40",
            0,
            Verdict::Unmanaged,
            Some("eth3"),
            "`unmanaged` entry `eth3` matches it",
        ),
        (
            "10.0.4.50",
            0,
            Verdict::Cni,
            Some("eth4"),
            "the Kubernetes CNI's ENI (table 2 routes through it)",
        ),
        (
            "192.0.2.7",
            0,
            Verdict::Unknown,
            None,
            "is on no link of this host",
        ),
    ];
    for (a, table, verdict, nic, words) in rows {
        let kernel = if *table == 0 {
            unreachable.clone()
        } else {
            Ok(answer(*table))
        };
        let e = explain(ip(a), &facts(), &kernel);
        let text = e.lines.join("\n");
        assert_eq!(e.verdict, *verdict, "{a}:\n{text}");
        assert_eq!(e.iface.as_ref().map(IfName::as_str), *nic, "{a}");
        assert!(text.contains(words), "{a}: {words:?} missing from:\n{text}");
        assert_eq!(
            e.verdict.routed(),
            matches!(verdict, Verdict::Routed | Verdict::Primary)
        );
    }
}

/// Where an address came from names the key of the instance's cloud, and no
/// key when the cloud is unknown or has none for it.
#[test]
fn the_origin_names_the_clouds_own_key() {
    use crate::source::{azure, ec2, gce};
    let rows: &[(Option<&'static Cloud>, &str, &str)] = &[
        (
            None,
            "10.0.1.20",
            "eth1's DHCP lease address, which the metadata lists too.",
        ),
        (None, "10.0.1.21", "a secondary address of eth1."),
        (
            None,
            "10.0.1.50",
            "a prefix the metadata delegates to eth1.",
        ),
        (
            Some(&ec2::CLOUD),
            "10.0.1.21",
            "a secondary address of eth1 (local-ipv4s in ec2's metadata).",
        ),
        (
            Some(&ec2::CLOUD),
            "10.0.1.50",
            "delegates to eth1 (ipv4-prefix in ec2's metadata).",
        ),
        (
            Some(&gce::CLOUD),
            "10.0.1.20",
            "lists too (ip in gce's metadata).",
        ),
        (
            Some(&gce::CLOUD),
            "10.0.1.50",
            "delegates to eth1 (ip-aliases in gce's metadata).",
        ),
        (
            Some(&azure::CLOUD),
            "10.0.1.21",
            "secondary address of eth1 (ipv4.ipAddress in azure's metadata).",
        ),
        // Azure delegates no prefix: no key is named.
        (
            Some(&azure::CLOUD),
            "10.0.1.50",
            "a prefix the metadata delegates to eth1.",
        ),
    ];
    for (cloud, a, words) in rows {
        let mut f = facts();
        f.cloud = *cloud;
        let e = explain(ip(a), &f, &Ok::<_, String>(answer(10001)));
        let text = e.lines.join("\n");
        assert!(text.contains(words), "{a}: {words:?} missing from:\n{text}");
        if cloud.is_none() {
            assert!(!text.contains("metadata)"), "{a}: {text}");
        }
    }
}

/// A lease no DHCP client holds is not called one: the metadata's address
/// (OCI's VNIC without DHCP, leasehook added it) and the kernel's SLAAC address
/// (`OpenStack`) each say where they came from.
#[test]
fn the_origin_of_a_lease_no_dhcp_client_holds() {
    for (reason, words) in [
        (
            Reason::Metadata,
            "eth1's address from the metadata, which leasehook added (no DHCP serves eth1).",
        ),
        (
            Reason::Autoconf,
            "the address the kernel configured on eth1 from router advertisements",
        ),
        (Reason::Bound, "eth1's DHCP lease address"),
    ] {
        let mut f = facts();
        if let Some(l) = f.states[1]
            .families
            .get_mut(&Family::V4)
            .and_then(|fs| fs.lease.as_mut())
        {
            l.reason = reason;
        }
        let e = explain(ip("10.0.1.20"), &f, &Ok::<_, String>(answer(10001)));
        let text = e.lines.join("\n");
        assert!(
            text.contains(words),
            "{reason:?}: {words:?} missing from:\n{text}"
        );
        assert_eq!(
            reason == Reason::Bound,
            text.contains("DHCP lease"),
            "{text}"
        );
    }
}

#[test]
fn a_rule_the_kernel_lost_is_drift_and_missing_keys_are_waiting() {
    let mut f = facts();
    f.kernel_rules.retain(|r| r.from.addr() != ip("10.0.1.21"));
    let e = explain(ip("10.0.1.21"), &f, &Ok::<_, String>(answer(10001)));
    assert_eq!(e.verdict, Verdict::Drift);
    assert!(
        e.lines
            .join(" ")
            .contains("the kernel does NOT hold this rule now")
    );

    let mut f = facts();
    f.states[1].missing = vec![Missing::DeviceNumberNotPropagated];
    f.states[1].families.clear();
    let e = explain(ip("10.0.1.20"), &f, &Ok::<_, String>(answer(254)));
    assert_eq!(e.verdict, Verdict::Waiting, "{:?}", e.lines);
    assert!(
        e.lines
            .join(" ")
            .contains("device-number reads 0 on a secondary NIC")
    );
}

#[test]
fn a_recorded_conflict_keeps_the_nic_off() {
    let mut f = facts();
    f.states[1].families.clear();
    f.conflicts = vec![(
        "eth1".to_owned(),
        "eth1: route \"10.0.1.0/24 dev eth1 table 10001 proto static\" is in the way".to_owned(),
    )];
    let e = explain(ip("10.0.1.21"), &f, &Ok::<_, String>(answer(254)));
    assert_eq!(e.verdict, Verdict::Conflict, "{:?}", e.lines);
    assert!(!e.verdict.routed());
    let text = e.lines.join(" ");
    assert!(text.contains("leasehook keeps off eth1"), "{text}");
    assert!(text.contains("proto static"), "{text}");
}

#[test]
fn iface_lists_recorded_and_held_addresses() {
    let f = facts();
    let got: Vec<String> = addresses_of(&name("eth1"), &f)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(got, ["10.0.1.20", "10.0.1.21", "10.0.1.48"]);
    assert!(addresses_of(&name("eth9"), &f).is_empty());
    assert_eq!(explain_nic(&name("eth9"), &f).verdict, Verdict::Unknown);
    assert_eq!(explain_nic(&name("eth2"), &f).verdict, Verdict::Waiting);
    let mut f = f;
    f.pending.clear();
    assert_eq!(explain_nic(&name("eth2"), &f).verdict, Verdict::NotApplied);
    assert_eq!(explain_nic(&name("eth0"), &f).verdict, Verdict::Primary);
}

#[test]
fn every_refusal_names_a_gate_rule() {
    assert_eq!(gate_rule(&Refusal::Everything), "never a /0");
    assert!(gate_rule(&Refusal::NoSubnet).contains("subnet"));
}

#[test]
fn an_autoconf_address_the_metadata_does_not_vouch_for_is_named() {
    // Issue 34: eth1's IPv6 half is the kernel's SLAAC address; a privacy
    // address beside it is not routed, and explain says why.
    let mut f = facts();
    let slaac = "fd00:98:1::ff:fe00:2";
    let eth1 = f
        .states
        .iter_mut()
        .find(|s| s.name == name("eth1"))
        .unwrap();
    eth1.families.insert(
        Family::V6,
        FamilyState {
            rules: vec![rule(&format!("{slaac}/128"), 10001)],
            routes: vec![],
            addresses: vec![],
            lease: Some(Lease {
                family: Family::V6,
                address: ip(slaac),
                prefix_len: 64,
                routers: vec![],
                reason: Reason::Autoconf,
            }),
        },
    );
    let privacy = "fd00:98:1::8c1a:2b3c:4d5e:6f70";
    f.addresses.push(Address {
        addr: format!("{privacy}/64").parse().unwrap(),
        dev: name("eth1"),
    });
    let e = explain(ip(privacy), &f, &Ok::<_, String>(answer(254)));
    assert_eq!(e.verdict, Verdict::NotApplied, "{:?}", e.lines);
    let text = e.lines.join(" ");
    assert!(text.contains("does not vouch for"), "{text}");
    assert!(text.contains(slaac), "{text}");
}

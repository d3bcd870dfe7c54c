// SPDX-License-Identifier: Apache-2.0
//! The apply logic against the in-memory kernel.

use super::record::RecordingApplier;
use super::state::InterfaceState;
use super::*;
use crate::diff::Op;
use crate::model::{Address, Plan, Profile, Rule};
use crate::plan::{PlanConfig, PlanInput, plan};
use crate::{example, metadata};

fn example_plan() -> Plan {
    let md = metadata::parse_tree(&example::metadata()).unwrap();
    plan(
        &PlanInput::new(&md, &example::links(), &example::leases()),
        &PlanConfig::default(),
    )
    .unwrap()
}

fn kernel() -> RecordingApplier {
    RecordingApplier::with_links(example::links())
}

#[test]
fn apply_from_empty_then_reapply_writes_nothing() {
    let p = example_plan();
    let mut k = kernel();
    let first = apply_plan(&mut k, &p, &[]).unwrap();
    assert_eq!(
        first.writes(),
        State::of_plan(&p).rules.len()
            + State::of_plan(&p).routes.len()
            + State::of_plan(&p).addresses.len()
    );
    assert_eq!(k.owned, State::of_plan(&p));
    let second = apply_plan(&mut k, &p, &[]).unwrap();
    assert_eq!(second.writes(), 0);
}

#[test]
fn changing_one_secondary_ip_replaces_exactly_one_rule() {
    let mut p = example_plan();
    let mut k = kernel();
    apply_plan(&mut k, &p, &[]).unwrap();
    let eth1 = p
        .interfaces
        .iter_mut()
        .find(|i| i.name.as_str() == "eth1")
        .unwrap();
    let old = eth1
        .rules
        .iter()
        .position(|r| r.from.to_string() == "10.98.1.21/32")
        .unwrap();
    let mut new_rule = eth1.rules[old].clone();
    new_rule.from = "10.98.1.22/32".parse().unwrap();
    let old_rule = std::mem::replace(&mut eth1.rules[old], new_rule.clone());
    eth1.addresses = vec![Address {
        addr: "10.98.1.22/32".parse().unwrap(),
        dev: eth1.name.clone(),
    }];
    let old_addr = Address {
        addr: "10.98.1.21/32".parse().unwrap(),
        dev: eth1.name.clone(),
    };
    let report = apply_plan(&mut k, &p, &[]).unwrap();
    assert_eq!(
        report.ops,
        vec![
            Op::DelRule(old_rule),
            Op::DelAddress(old_addr),
            Op::AddRule(new_rule),
            Op::AddAddress(p.interfaces[1].addresses[0].clone())
        ]
    );
}

#[test]
fn foreign_objects_survive_apply_and_teardown() {
    let p = example_plan();
    let mut k = kernel();
    let foreign_rule = Rule {
        from: "10.98.1.99/32".parse().unwrap(),
        to: None,
        table: 10001,
        priority: Some(10001),
    };
    k.foreign.rules.insert(foreign_rule.clone());
    apply_plan(&mut k, &p, &[]).unwrap();
    let eth1 = IfName::try_new("eth1").unwrap();
    let report = teardown(&mut k, &eth1, None, None).unwrap();
    assert!(report.errors.is_empty());
    assert!(k.foreign.rules.contains(&foreign_rule));
    assert!(k.owned.rules.iter().all(|r| r.table != 10001));
    assert!(
        k.owned.rules.iter().any(|r| r.table == 10101),
        "eth2's rules stay"
    );
}

#[test]
fn a_wanted_address_someone_else_holds_is_left_to_them() {
    let p = example_plan();
    let mut k = kernel();
    let theirs = State::of_plan(&p)
        .addresses
        .into_iter()
        .next()
        .expect("the example has secondary addresses");
    k.foreign.addresses.insert(theirs.clone());
    let report = apply_plan(&mut k, &p, &[]).unwrap();
    assert_eq!(report.foreign, [theirs.clone()].into());
    assert!(!report.ops.contains(&Op::AddAddress(theirs.clone())));
    assert!(!k.owned.addresses.contains(&theirs));
    // What is recorded leaves it out, so a teardown never removes it.
    let ip = p
        .interfaces
        .iter()
        .find(|ip| ip.name == theirs.dev)
        .unwrap();
    let recorded = InterfaceState::record(None, &report.owned_part(ip), Profile::Ec2NetUtils);
    assert!(!recorded.objects().addresses.contains(&theirs));
    teardown(&mut k, &theirs.dev, None, Some(&recorded)).unwrap();
    assert!(k.foreign.addresses.contains(&theirs));
    // Once recorded as leasehook's (it added it earlier), it is not foreign.
    let mut k = kernel();
    let first = apply_plan(&mut k, &p, &[]).unwrap();
    assert!(first.foreign.is_empty());
    let mine = InterfaceState::record(None, ip, Profile::Ec2NetUtils);
    assert_eq!(apply_plan(&mut k, &p, &[mine]).unwrap().writes(), 0);
}

#[test]
fn a_failed_write_rolls_back_everything_this_run_added() {
    let p = example_plan();
    let mut k = kernel();
    let ops = crate::diff::diff(&p, &State::default());
    let victim = ops[ops.len() - 2].clone();
    k.fail_on = Some((victim.clone(), 22));
    let err = apply_plan(&mut k, &p, &[]).unwrap_err();
    match &err {
        Error::Netlink {
            object,
            rolled_back,
            rollback_errors,
            ..
        } => {
            assert_eq!(object, &victim.to_string());
            // Writes are pipelined: the one after the failed write went through too,
            // and is undone with the rest.
            assert_eq!(*rolled_back, ops.len() - 1);
            assert!(rollback_errors.is_empty());
        }
        other => panic!("unexpected error {other}"),
    }
    assert!(err.to_string().contains("rolled back"), "{err}");
    assert!(k.owned.is_empty(), "kernel left with {:?}", k.owned);
}

#[test]
fn invalid_plans_write_nothing() {
    let mut p = example_plan();
    let mut k = kernel();
    k.links.retain(|l| l.name.as_str() != "eth2");
    let err = apply_plan(&mut k, &p, &[]).unwrap_err();
    assert_eq!(err.to_string(), "invalid plan: no link named eth2");
    assert!(k.writes.is_empty());
    let mut k = kernel();
    p.interfaces[2].rules[0].table = 10001;
    p.interfaces[2].routes[0].table = 10001;
    assert!(
        apply_plan(&mut k, &p, &[])
            .unwrap_err()
            .to_string()
            .contains("used by both eth1 and eth2")
    );
    assert!(k.writes.is_empty());
}

#[test]
fn apply_of_one_family_leaves_the_other_alone() {
    let p = example_plan();
    let mut k = kernel();
    apply_plan(&mut k, &p, &[]).unwrap();
    // A DHCPv4 renew plans only IPv4 for eth1: its IPv6 objects must stay.
    let mut v4_only = p.clone();
    v4_only.interfaces.retain(|i| i.name.as_str() == "eth1");
    let eth1 = &mut v4_only.interfaces[0];
    eth1.families = vec![Family::V4];
    eth1.rules.retain(|r| r.family() == Family::V4);
    eth1.routes.retain(|r| r.family() == Family::V4);
    eth1.addresses.retain(|a| a.family() == Family::V4);
    assert_eq!(apply_plan(&mut k, &v4_only, &[]).unwrap().writes(), 0);
    assert_eq!(k.owned, State::of_plan(&p));
}

#[test]
fn teardown_after_the_link_vanished_removes_its_rules_by_recorded_table() {
    let p = example_plan();
    let mut k = kernel();
    apply_plan(&mut k, &p, &[]).unwrap();
    let eth1 = &p.interfaces[1];
    let recorded = InterfaceState::record(None, eth1, Profile::Ec2NetUtils);
    // The link goes; the kernel drops its routes and addresses, not its rules.
    k.links.retain(|l| l.name != eth1.name);
    k.owned.routes.retain(|r| r.dev != eth1.name);
    k.owned.addresses.retain(|a| a.dev != eth1.name);
    let report = teardown(&mut k, &eth1.name, None, Some(&recorded)).unwrap();
    assert_eq!(report.writes(), eth1.rules.len());
    assert!(k.owned.rules.iter().all(|r| r.table != 10001));
}

#[test]
fn teardown_goes_past_errors_and_reports_them_all() {
    let p = example_plan();
    let mut k = kernel();
    apply_plan(&mut k, &p, &[]).unwrap();
    let eth1 = &p.interfaces[1];
    k.fail_on = Some((Op::DelRule(eth1.rules[0].clone()), 1));
    let report = teardown(&mut k, &eth1.name, Some(Family::V4), None).unwrap();
    assert_eq!(report.errors.len(), 1);
    // The injected errno 1, as the kernel says it.
    assert!(
        report.errors[0]
            .to_string()
            .contains("Operation not permitted"),
        "{:?}",
        report.errors
    );
    // The cause is kept, typed: the kernel's errno, the interface not named
    // (one interface's teardown).
    assert_eq!(report.errors[0].error.errno(), Some(libc::EPERM));
    assert_eq!(report.errors[0].iface, None);
    // Everything else of eth1's IPv4 went; its IPv6 stayed.
    assert_eq!(
        k.owned
            .rules
            .iter()
            .filter(|r| r.table == 10001 && r.family() == Family::V4)
            .count(),
        1
    );
    assert!(
        k.owned
            .rules
            .iter()
            .any(|r| r.table == 10001 && r.family() == Family::V6)
    );
}

#[test]
fn state_records_families_and_tables() {
    let p = example_plan();
    let eth1 = &p.interfaces[1];
    let mut st = InterfaceState::record(None, eth1, Profile::Ec2NetUtils);
    assert_eq!(st.tables().into_iter().collect::<Vec<_>>(), vec![10001]);
    assert_eq!(st.objects().rules.len(), eth1.rules.len());
    assert!(!st.forget(Some(Family::V6)));
    assert!(st.forget(Some(Family::V4)));
}

#[test]
fn a_state_that_cannot_be_recorded_rolls_the_run_back() {
    // Disk full on /run: the kernel must not keep what no state file records
    // (fault matrix row `disk_full_state`).
    let p = example_plan();
    let mut k = kernel();
    let report = apply_plan(&mut k, &p, &[]).unwrap();
    assert!(report.writes() > 0);
    let err = record_or_roll_back(&mut k, &report, || {
        Err(Error::io(
            std::path::Path::new("/run/leasehook/iface/eth1.json"),
            &std::io::Error::from_raw_os_error(libc::ENOSPC),
        ))
    })
    .unwrap_err();
    assert_eq!(k.owned, State::default());
    // The cause is kept, not only its words.
    assert_eq!(err.errno(), Some(libc::ENOSPC));
    assert!(
        matches!(&err, Error::NotRecorded { source, .. } if matches!(**source, Error::File { .. }))
    );
    assert_eq!(
        err.to_string(),
        format!(
            "\"/run/leasehook/iface/eth1.json\": No space left on device (os error 28) (the state could not be recorded, so the {} change(s) of this run were rolled back)",
            report.writes()
        )
    );
    // Recorded: nothing to undo.
    let mut k = kernel();
    let report = apply_plan(&mut k, &p, &[]).unwrap();
    record_or_roll_back(&mut k, &report, || Ok(())).unwrap();
    assert_eq!(k.owned, State::of_plan(&p));
}

#[test]
fn an_undo_that_fails_is_kept_with_its_object_and_cause() {
    // The kernel refuses one undo: the error says which and why, typed (its
    // errno), and the rest of the run is still undone.
    let p = example_plan();
    let mut k = kernel();
    let report = apply_plan(&mut k, &p, &[]).unwrap();
    let stuck = inverse(&report.ops[0]);
    k.fail_on = Some((stuck.clone(), libc::EPERM));
    let err = record_or_roll_back(&mut k, &report, || {
        Err(Error::io(
            std::path::Path::new("/run/leasehook/iface/eth1.json"),
            &std::io::Error::from_raw_os_error(libc::ENOSPC),
        ))
    })
    .unwrap_err();
    let Error::NotRecorded {
        rolled_back,
        rollback_errors,
        ..
    } = &err
    else {
        panic!("unexpected error {err}");
    };
    assert_eq!(*rolled_back, report.writes());
    assert_eq!(rollback_errors.len(), 1, "{err}");
    assert_eq!(rollback_errors[0].errno(), Some(libc::EPERM));
    assert!(
        matches!(&rollback_errors[0], Error::Netlink { object, .. } if *object == stuck.to_string())
    );
    assert!(
        err.to_string().ends_with(&format!(
            "rolling back the {} change(s) of this run failed: {stuck}: Operation not permitted (os error 1))",
            report.writes()
        )),
        "{err}"
    );
    assert_eq!(
        k.owned.rules.len() + k.owned.routes.len() + k.owned.addresses.len(),
        1
    );
}

#[test]
fn eexist_names_whose_object_is_in_the_way() {
    // Issue 18, item 10: "not leasehook's" was said for leasehook's own objects
    // too. The kernel keys rules by protocol, so a rule in the way is ours; a route
    // is foreign unless one of ours has its table and destination.
    let p = example_plan();
    let ops = crate::diff::diff(&p, &State::default());
    let rule = ops
        .iter()
        .find(|o| matches!(o, Op::AddRule(_)))
        .unwrap()
        .clone();
    let route = ops
        .iter()
        .find(|o| matches!(o, Op::AddRoute(_)))
        .unwrap()
        .clone();
    let mut k = kernel();
    k.fail_on = Some((rule, 17));
    let e = apply_plan(&mut k, &p, &[]).unwrap_err().to_string();
    assert!(
        e.contains("an object of leasehook's own (protocol 176)"),
        "{e}"
    );
    assert!(!e.contains("does not own"), "{e}");
    let mut k = kernel();
    k.fail_on = Some((route.clone(), 17));
    let e = apply_plan(&mut k, &p, &[]).unwrap_err().to_string();
    assert!(e.contains("something leasehook does not own"), "{e}");
    // The same route of ours on another link (another interface sharing the table).
    let Op::AddRoute(mut theirs) = route.clone() else {
        unreachable!()
    };
    theirs.dev = IfName::try_new("eth2").unwrap();
    let mut k = kernel();
    k.owned.routes.insert(theirs);
    k.fail_on = Some((route, 17));
    let e = apply_plan(&mut k, &p, &[]).unwrap_err().to_string();
    assert!(e.contains("an object of leasehook's own"), "{e}");
}

#[test]
fn teardown_many_removes_every_interface_and_the_rest_in_one_run() {
    let p = example_plan();
    let mut k = kernel();
    apply_plan(&mut k, &p, &[]).unwrap();
    let foreign_rule = Rule {
        from: "10.98.1.99/32".parse().unwrap(),
        to: None,
        table: 10001,
        priority: Some(10001),
    };
    k.foreign.rules.insert(foreign_rule.clone());
    let (eth1, eth2) = (&p.interfaces[1], &p.interfaces[2]);
    let st1 = InterfaceState::record(None, eth1, Profile::Ec2NetUtils);
    // eth2's state file is lost: only the sweep finds its objects. eth1 is named
    // twice (a table two state files record): each object is deleted once.
    k.fail_on = Some((Op::DelRule(eth1.rules[0].clone()), 1));
    let report = teardown_many(
        &mut k,
        &[(&eth1.name, Some(&st1)), (&eth1.name, Some(&st1))],
        None,
        true,
    )
    .unwrap();
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    assert!(
        report.errors[0]
            .to_string()
            .starts_with("eth1: ip -4 rule del"),
        "{:?}",
        report.errors
    );
    let all = State::of_plan(&p);
    assert_eq!(
        report.writes(),
        all.rules.len() + all.routes.len() + all.addresses.len() - 1
    );
    assert_eq!(k.owned.rules, BTreeSet::from([eth1.rules[0].clone()]));
    assert!(k.owned.routes.is_empty() && k.owned.addresses.is_empty());
    assert!(k.foreign.rules.contains(&foreign_rule));
    assert!(eth2.rules.iter().all(|r| !k.owned.rules.contains(r)));
    // Addresses go first (each one shrinks the IPv6 tree the rule deletes walk),
    // then rules, then routes.
    let kinds: Vec<u8> = report
        .ops
        .iter()
        .map(|op| match op {
            Op::DelAddress(_) => 0,
            Op::DelRule(_) => 1,
            _ => 2,
        })
        .collect();
    assert!(kinds.is_sorted(), "{:?}", report.ops);
}

#[test]
fn teardown_many_without_sweep_leaves_other_interfaces() {
    let p = example_plan();
    let mut k = kernel();
    apply_plan(&mut k, &p, &[]).unwrap();
    let eth1 = &p.interfaces[1];
    let report = teardown_many(&mut k, &[(&eth1.name, None)], Some(Family::V6), false).unwrap();
    assert!(report.errors.is_empty());
    let mut left = State::of_plan(&p);
    left.rules
        .retain(|r| !(r.table == 10001 && r.family() == Family::V6));
    left.routes
        .retain(|r| !(r.dev == eth1.name && r.family() == Family::V6));
    left.addresses
        .retain(|a| !(a.dev == eth1.name && a.family() == Family::V6));
    assert_eq!(k.owned, left);
}

#[test]
fn only_an_ethernet_nic_with_a_stations_mac_is_matched_by_mac() {
    let nic = |ethernet, loopback, port, address: &[u8]| {
        nic_mac(&LinkFacts {
            ethernet,
            loopback,
            port,
            address: Some(address),
        })
    };
    let eth = [0x02, 0, 0x17, 0x05, 0xd1, 0xdb];
    // A NIC (a virtio or ENA NIC, or a container's veth): its MAC.
    assert_eq!(nic(true, false, false, &eth), Ok(MacAddr::new(eth)));
    // `lo`: ARPHRD_LOOPBACK, IFF_LOOPBACK, six zero bytes.
    assert_eq!(nic(false, true, false, &[0; 6]), Err("loopback"));
    // Even were it reported as Ethernet.
    assert_eq!(nic(true, true, false, &[0; 6]), Err("loopback"));
    // A tunnel, WireGuard (no address), a port (Azure's VF, a bond member).
    assert_eq!(
        nic(false, false, false, &[10, 0, 0, 1]),
        Err("not an Ethernet link")
    );
    assert_eq!(
        nic_mac(&LinkFacts {
            ethernet: true,
            loopback: false,
            port: false,
            address: None
        }),
        Err("no 6-byte hardware address")
    );
    assert_eq!(
        nic(true, false, false, &[2, 0, 0, 0, 0]),
        Err("no 6-byte hardware address")
    );
    assert_eq!(nic(true, false, true, &eth), Err("a port of another link"));
    // Ethernet links whose address is nobody's.
    for (bad, why) in [
        ([0u8; 6], "all-zero"),
        ([0xff; 6], "broadcast"),
        ([0x01, 0, 0x5e, 0, 0, 1], "multicast"),
    ] {
        let got = nic(true, false, false, &bad);
        assert!(got.is_err_and(|w| w.contains(why)), "{bad:?}: {got:?}");
    }
}

#[test]
fn a_foreign_route_in_the_table_keeps_the_nic_off_before_any_write() {
    // Issue 33, item 6: another tool's route (amazon-ec2-net-utils' through
    // networkd, `proto static`) with the table and destination leasehook wants:
    // refused before the first write, naming the route and its protocol, instead
    // of writing, meeting EEXIST and rolling back at every lease.
    let p = example_plan();
    let (ip, route) = p
        .interfaces
        .iter()
        .find_map(|ip| ip.routes.first().map(|r| (ip, r.clone())))
        .unwrap();
    let mut k = kernel();
    k.foreign.routes.insert(route.clone());
    let e = apply_plan(&mut k, &p, &[]).unwrap_err();
    assert!(matches!(e, Error::Conflict { .. }), "{e}");
    let want = format!(
        "{}: route \"{} {}dev {} table {} proto static\" is in the way (not leasehook's: proto static)",
        ip.name,
        route.to,
        route.via.map_or_else(String::new, |v| format!("via {v} ")),
        route.dev,
        route.table
    );
    assert!(e.to_string().starts_with(&want), "{e}\nwanted {want}");
    assert!(e.to_string().contains("nothing written"), "{e}");
    assert!(k.writes.is_empty(), "{:?}", k.writes);
    // In another table, or gone: applied.
    let mut elsewhere = route;
    elsewhere.table += 1;
    let mut k = kernel();
    k.foreign.routes.insert(elsewhere);
    apply_plan(&mut k, &p, &[]).unwrap();
}

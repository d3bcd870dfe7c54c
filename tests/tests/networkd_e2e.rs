// SPDX-License-Identifier: Apache-2.0
//! The real systemd-networkd and the real networkd-dispatcher in the instance
//! namespace (private mount namespace and D-Bus, `World::start_networkd`), dnsmasq and
//! the IMDS emulator on the VPC side: networkd's DHCPv4 lease ends in leasehook's
//! policy routing, and a link going down takes it away.
//!
//! The scenario table every client runs (`leasehook_tests::scenarios`, networkd's
//! row in `leasehook_tests::client`: carrier loss and link down end the lease, no
//! renewal hook, no DHCPv6) is `networkd::*`; beside it the tests only networkd
//! has (the hot-plug race through the dispatcher, a networkd restart, `degraded`).
//!
//! Compiled with the `netns` feature; needs root, systemd-networkd,
//! networkd-dispatcher, dbus-daemon and dnsmasq, and fails, never skips, without them.

#![cfg(feature = "netns")]
#![cfg(test)]

use std::time::Duration;

use leasehook_tests::world::{World, WorldOptions, wait_until};
use serde_json::json;

leasehook_tests::client_table!(networkd => Networkd);

const RULES: [&str; 2] = [
    "10001 from 10.98.1.20 lookup 10001 proto 176",
    "10001 from 10.98.1.21 lookup 10001 proto 176",
];

fn installed(w: &World) -> bool {
    let rules = w.our_rules();
    let routes = w.our_routes();
    RULES.iter().all(|r| rules.iter().any(|h| h == r))
        && routes.contains(
            &"default via 10.98.1.1 dev eth1 scope - src - table 10001 proto 176".to_owned(),
        )
        && routes.contains(
            &"10.98.1.0/24 via - dev eth1 scope link src 10.98.1.20 table 10001 proto 176"
                .to_owned(),
        )
}

fn report(w: &World) -> String {
    format!(
        "rules {:#?}\nroutes {:#?}\n--- dispatcher\n{}\n--- networkd\n{}",
        w.our_rules(),
        w.our_routes(),
        w.dispatcher_log(),
        std::fs::read_to_string(w.dir.0.join("networkd.log")).unwrap_or_default()
    )
}

#[test]
fn hot_plug_race_through_networkd() {
    let mac = "/latest/meta-data/network/interfaces/macs/02:00:00:00:00:02";
    let opts = WorldOptions {
        scenario: json!({"appear": [{"path": format!("{mac}/local-ipv4s"), "after": 3.0}]}),
        sync_budget_s: 0.5,
        budget_s: 20.0,
        ..WorldOptions::default()
    };
    let mut w = World::new("nwdrace", &opts);
    w.start_networkd(true);
    assert!(
        wait_until(Duration::from_secs(40), || installed(&w)),
        "{}",
        report(&w)
    );
    assert!(
        wait_until(Duration::from_secs(5), || !w.worker_pending("eth1")),
        "the worker did not finish"
    );
    let log = w.dispatcher_log();
    assert!(
        log.contains("eth1 routable: IMDS does not agree with the lease yet; worker"),
        "no hand-over:\n{log}"
    );
    assert!(
        log.contains("eth1 worker: eth1: IMDS agrees with the lease"),
        "{log}"
    );
}

/// With leasehook's drop-in, a networkd restart (which re-enumerates links, rules
/// and routes) leaves leasehook's rules and routes as they were.
#[test]
fn a_networkd_restart_keeps_the_policy_routing() {
    let mut w = World::new("nwdrestart", &WorldOptions::default());
    w.start_networkd(true);
    assert!(
        wait_until(Duration::from_secs(40), || installed(&w)),
        "{}",
        report(&w)
    );
    let before = (w.our_rules(), w.our_routes());
    w.restart_networkd();
    assert!(
        wait_until(Duration::from_secs(20), || std::fs::read_to_string(
            w.dir.0.join("networkd.log")
        )
        .unwrap_or_default()
        .matches("eth1: DHCPv4 address")
        .count()
            >= 2),
        "networkd did not take the lease again: {}",
        report(&w)
    );
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!((w.our_rules(), w.our_routes()), before, "{}", report(&w));
    assert_eq!(w.echo_from("10.98.1.21").as_deref(), Some("10.98.1.21"));
}

/// `degraded` without an IPv4 address (the DHCP address went away) removes
/// leasehook's IPv4 rules, which would name an address the link no longer has.
#[test]
fn losing_the_dhcp_address_removes_the_ipv4_policy_routing() {
    let mut w = World::new("nwddegr", &WorldOptions::default());
    w.start_networkd(true);
    assert!(
        wait_until(Duration::from_secs(40), || installed(&w)),
        "{}",
        report(&w)
    );
    w.inst
        .ip(&["address", "del", "10.98.1.20/24", "dev", "eth1"]);
    w.inst
        .ip(&["address", "del", "10.98.1.21/32", "dev", "eth1"]);
    assert!(
        wait_until(Duration::from_secs(20), || w.our_rules().is_empty()
            && w.our_routes().is_empty()),
        "{}",
        report(&w)
    );
    assert!(
        w.dispatcher_log().contains("eth1 degraded: removed"),
        "{}",
        w.dispatcher_log()
    );
}

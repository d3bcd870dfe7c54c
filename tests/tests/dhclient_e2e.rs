// SPDX-License-Identifier: Apache-2.0
//! The product working for real: ISC dhclient gets leases from dnsmasq, the
//! unmodified `dhclient-script` sources leasehook's exit hook, and the shim asks the
//! IMDS emulator and installs policy routing. Each test builds its own world
//! (`leasehook_tests::world`); the hook goes through `/etc/netns/<ns>/dhcp/`.
//!
//! The scenario table every client runs (`leasehook_tests::scenarios`, dhclient's
//! row in `leasehook_tests::client`) is `dhclient::*`; beside it the tests only
//! dhclient's world has (the hook's IMDS wait and worker, configuration files,
//! multi-card instances, the cloud-init profile, both NICs renewing at once).
//!
//! Compiled with the `netns` feature; needs root, isc-dhcp-client and dnsmasq, and
//! fails, never skips, without them.

#![cfg(feature = "netns")]
#![cfg(test)]
#![allow(clippy::too_many_lines)]

use std::time::Duration;

use leasehook_tests::world::{World, WorldOptions, wait_until};
use serde_json::json;

leasehook_tests::client_table!(dhclient => Dhclient);

const SECONDARY_RULES: [&str; 2] = [
    "10001 from 10.98.1.20 lookup 10001 proto 176",
    "10001 from 10.98.1.21 lookup 10001 proto 176",
];

fn bound(w: &World, rules: &[&str]) -> bool {
    let have = w.our_rules();
    rules.iter().all(|r| have.iter().any(|h| h == r))
}

fn secondary_routes_ok(w: &World) -> bool {
    let routes = w.our_routes();
    routes
        .contains(&"default via 10.98.1.1 dev eth1 scope - src - table 10001 proto 176".to_owned())
        && routes.contains(
            &"10.98.1.0/24 via - dev eth1 scope link src 10.98.1.20 table 10001 proto 176"
                .to_owned(),
        )
}

#[test]
fn hot_plug_race_ends_in_the_same_state_without_holding_dhclient() {
    let mac = "/latest/meta-data/network/interfaces/macs/02:00:00:00:00:02";
    let opts = WorldOptions {
        // IMDS lists the NIC but its address keys only appear 2 s after the first
        // request, well past the 0.5 s the hook may hold dhclient-script.
        scenario: json!({"appear": [{"path": format!("{mac}/local-ipv4s"), "after": 2.0},
                                    {"path": format!("{mac}/ipv6s"), "after": 2.5}]}),
        sync_budget_s: 0.5,
        budget_s: 15.0,
        ..WorldOptions::default()
    };
    let mut w = World::new("race", &opts);
    // Only eth1: IMDS is reached through its default route, and the emulator's clock
    // starts with this event's first request.
    w.bind("eth1", false);
    assert!(
        wait_until(Duration::from_secs(15), || bound(&w, &SECONDARY_RULES)
            && secondary_routes_ok(&w)),
        "{}",
        w.log("eth1", false)
    );
    assert!(w.wait_workers("eth1", 5), "the worker did not finish");
    let log = w.log("eth1", false);
    assert!(
        log.contains("eth1 BOUND: IMDS does not agree with the lease yet; worker"),
        "the hook did not hand over:\n{log}"
    );
    assert!(
        log.contains("eth1 worker: eth1: IMDS agrees with the lease"),
        "{log}"
    );
    assert!(
        w.inst
            .addresses()
            .contains(&"eth1 10.98.1.21/32".to_owned())
    );
    assert_eq!(w.our_rules().len(), 2, "{:#?}", w.our_rules());
}

#[test]
fn imds_unreachable_applies_nothing_and_says_why() {
    let opts = WorldOptions {
        tree: None,
        sync_budget_s: 0.3,
        budget_s: 1.5,
        ..WorldOptions::default()
    };
    let mut w = World::new("noimds", &opts);
    w.bind("eth0", false);
    w.bind("eth1", false);
    let said = "nothing applied, as the table cannot be known without device-number";
    w.wait_logged("eth1", said, 10, "");
    assert!(w.wait_workers("eth1", 5), "the worker did not finish");
    assert!(w.our_rules().is_empty() && w.our_routes().is_empty());
    // DHCP itself was not affected.
    assert!(
        w.inst
            .ip(&["-4", "addr", "show", "eth1"])
            .contains("10.98.1.20/24")
    );
}

#[test]
fn both_nics_at_once_and_repeated_renews_leave_exactly_the_plan() {
    let mut w = World::new(
        "busy",
        &WorldOptions {
            t1: Some(2),
            ..WorldOptions::default()
        },
    );
    w.dhclient_start("eth0", false);
    w.dhclient_start("eth1", false);
    assert!(
        wait_until(Duration::from_secs(40), || bound(&w, &SECONDARY_RULES)
            && secondary_routes_ok(&w)),
        "rules {:#?}\nroutes {:#?}\n--- eth1\n{}\n--- eth0\n{}",
        w.our_rules(),
        w.our_routes(),
        w.log("eth1", false),
        w.log("eth0", false)
    );
    let renews = |w: &World| {
        w.log("eth1", false)
            .matches("eth1 RENEW: 0 change(s)")
            .count()
    };
    assert!(
        wait_until(Duration::from_secs(30), || renews(&w) >= 2),
        "fewer than 2 renews:\n{}",
        w.log("eth1", false)
    );
    let rules = w.our_rules();
    assert_eq!(rules.len(), 2, "duplicate or missing rules: {rules:#?}");
    assert!(bound(&w, &SECONDARY_RULES));
    assert_eq!(w.our_routes().len(), 2, "{:#?}", w.our_routes());
    assert!(!w.worker_pending("eth0") && !w.worker_pending("eth1"));
}

#[test]
fn a_newer_event_supersedes_the_waiting_worker() {
    let mac = "/latest/meta-data/network/interfaces/macs/02:00:00:00:00:02";
    let opts = WorldOptions {
        // The secondary's addresses never show up within the test: the worker waits.
        scenario: json!({"appear": [{"path": format!("{mac}/local-ipv4s"), "after": 600.0}]}),
        sync_budget_s: 0.3,
        budget_s: 60.0,
        ..WorldOptions::default()
    };
    let mut w = World::new("supersede", &opts);
    w.bind("eth1", false);
    // Wait until the hook has handed over (the pending file names the worker's pid)
    // and dhclient-script has returned, so dhclient has written its lease file:
    // `dhclient -r` releases only a lease it has on file.
    let handed_over = || {
        std::fs::read_to_string(w.root.join("run/leasehook/pending/eth1.json"))
            .is_ok_and(|t| t.contains("\"pid\":") && !t.contains("\"pid\":null"))
    };
    assert!(
        wait_until(Duration::from_secs(10), || handed_over()
            && w.log("eth1", false).contains("bound to 10.98.1.20")),
        "no worker:\n{}",
        w.log("eth1", false)
    );
    // RELEASE while the worker waits: it is stopped, the release goes through at once.
    w.dhclient_end("eth1", false, true);
    let log = w.log("eth1", false);
    assert!(
        log.contains("eth1 RELEASE: stopped the waiting worker"),
        "{log}"
    );
    assert!(!w.worker_pending("eth1"));
    assert!(w.our_rules().is_empty() && w.our_routes().is_empty());
}

#[test]
fn configuration_files_below_the_root_reach_the_hook() {
    let mut w = World::new("config", &WorldOptions::default());
    let etc = w.root.join("etc/leasehook");
    std::fs::create_dir_all(etc.join("config.d")).unwrap();
    // The main file moves the tables; a drop-in, read after it, leaves eth1 alone
    // by its MAC.
    std::fs::write(etc.join("config.yaml"), "table_base: 20000\n").unwrap();
    let mac = w.inst.ip(&["-j", "link", "show", "eth1"]);
    let mac: serde_json::Value = serde_json::from_str(&mac).unwrap();
    let mac = mac[0]["address"].as_str().unwrap().to_owned();
    std::fs::write(
        etc.join("config.d/50-unmanaged.yaml"),
        format!("unmanaged: [\"{mac}\"]\n"),
    )
    .unwrap();
    w.bind("eth0", false);
    w.bind("eth1", false);
    let said = "eth1 is unmanaged (configuration key unmanaged): left alone";
    w.wait_logged("eth1", said, 10, "");
    assert!(w.our_rules().is_empty(), "{:#?}", w.our_rules());

    // Managed again: the main file's table_base applies.
    std::fs::remove_file(etc.join("config.d/50-unmanaged.yaml")).unwrap();
    w.dhclient_end("eth1", false, true);
    w.bind("eth1", false);
    assert!(
        wait_until(Duration::from_secs(10), || bound(
            &w,
            &["20001 from 10.98.1.20 lookup 20001 proto 176"]
        )),
        "{:#?}\n{}",
        w.our_rules(),
        w.log("eth1", false)
    );

    // A bad file: the hook says which file, line and key, changes nothing, and
    // DHCP is not affected.
    std::fs::write(
        etc.join("config.d/60-typo.yaml"),
        "\nimds:\n  budget_s: soon\n",
    )
    .unwrap();
    let before = w.our_rules();
    w.dhclient_end("eth1", false, true);
    w.bind("eth1", false);
    let said = "60-typo.yaml line 3: imds.budget_s: expected seconds from 0 to 3600";
    w.wait_logged("eth1", said, 10, "");
    // RELEASE could not remove anything either: the last applied state stays.
    assert_eq!(w.our_rules(), before);
}

/// The world's instance as a multi-card type (p4d, p5, trn1): `network-card` on
/// both NICs, eth1 on card 1 with device-number 0, as device numbers restart at 0
/// on every card. Table and priority `10000 + 100 * 1 + 0`.
fn multi_card_tree() -> serde_json::Value {
    use leasehook_tests::world::{MAC0, MAC1, default_tree};
    let mut tree = default_tree();
    let macs = &mut tree["latest"]["meta-data"]["network"]["interfaces"]["macs"];
    macs[MAC0]["network-card"] = json!("0");
    macs[MAC1]["network-card"] = json!("1");
    macs[MAC1]["device-number"] = json!("0");
    tree
}

const CARD_ONE_RULES: [&str; 2] = [
    "10100 from 10.98.1.20 lookup 10100 proto 176",
    "10100 from 10.98.1.21 lookup 10100 proto 176",
];

/// eth1 on card 1 gets table 10100, and traffic from both of its addresses passes
/// the source check to the echo host.
fn assert_card_one_routed(w: &World) {
    assert!(
        wait_until(Duration::from_secs(40), || bound(w, &CARD_ONE_RULES)),
        "no card-1 rules after BOUND on eth1: {:#?}\n{}",
        w.our_rules(),
        w.log("eth1", false)
    );
    let routes = w.our_routes();
    for want in [
        "default via 10.98.1.1 dev eth1 scope - src - table 10100 proto 176",
        "10.98.1.0/24 via - dev eth1 scope link src 10.98.1.20 table 10100 proto 176",
    ] {
        assert!(routes.contains(&want.to_owned()), "{want}: {routes:#?}");
    }
    // Nothing in card 0's numbering: not 10000 (device 0 read as card 0) or 10001.
    assert!(
        w.our_rules().iter().all(|r| r.starts_with("10100 ")),
        "{:#?}",
        w.our_rules()
    );
    for from in ["10.98.1.20", "10.98.1.21", "10.98.0.10"] {
        assert_eq!(
            w.echo_from(from).as_deref(),
            Some(from),
            "traffic from {from}"
        );
    }
}

fn start_both(w: &mut World) {
    w.bind("eth0", false);
    w.dhclient_start("eth1", false);
}

#[test]
fn multi_card_device_zero_on_card_one_is_routed_and_traffic_flows() {
    let mut w = World::new(
        "mcard",
        &WorldOptions {
            tree: Some(multi_card_tree()),
            ..WorldOptions::default()
        },
    );
    start_both(&mut w);
    assert_card_one_routed(&w);
    let log = w.log("eth1", false);
    assert!(!log.contains("not propagated"), "{log}");
}

#[test]
fn multi_card_network_card_appearing_late_is_waited_for_then_routed() {
    // eth1's network-card is missing for the first 6 s of IMDS's life (its
    // device-number reads 0 all along): longer than the hook's 3 s, so the
    // detached worker finishes the wait.
    let late = format!(
        "/latest/meta-data/network/interfaces/macs/{}/network-card",
        leasehook_tests::world::MAC1
    );
    let mut w = World::new(
        "mcardlate",
        &WorldOptions {
            tree: Some(multi_card_tree()),
            scenario: json!({"appear": [{"path": late, "after": 6.0}]}),
            ..WorldOptions::default()
        },
    );
    start_both(&mut w);
    assert_card_one_routed(&w);
    // The wait saw the key missing and asked for it again, directly.
    let imds = w.imds_log();
    let misses = imds
        .lines()
        .filter(|l| l.contains(&late) && l.ends_with(" 404"))
        .count();
    assert!(misses >= 1, "{imds}");
    assert!(
        imds.lines()
            .any(|l| l.contains(&late) && l.ends_with(" 200")),
        "{imds}"
    );
}

#[test]
fn cloud_init_profile_is_applied_at_lease_time_and_traffic_flows() {
    // `profile: cloud-init` in the hooks' configuration file. eth1 is second of
    // (eth0, eth1) in cloud-init's (network-card, device-number, MAC) order, from
    // the metadata: table 101 whether or not eth0's lease came first.
    let mut w = World::new("cinit", &WorldOptions::default());
    let etc = w.root.join("etc/leasehook");
    std::fs::create_dir_all(&etc).unwrap();
    std::fs::write(etc.join("config.yaml"), "profile: cloud-init\n").unwrap();
    w.dhclient_start("eth1", false);
    let rule = |from: &str| format!("from {from} lookup 101 proto 176");
    let has_rules = |w: &World| {
        let rules = w.our_rules();
        ["10.98.1.20", "10.98.1.21"]
            .iter()
            .all(|f| rules.iter().any(|r| r.ends_with(&rule(f))))
    };
    assert!(
        wait_until(Duration::from_secs(20), || has_rules(&w)),
        "no cloud-init rules after BOUND on eth1: {:#?}\n{}",
        w.our_rules(),
        w.log("eth1", false)
    );
    w.bind("eth0", false);
    w.wait_logged("eth0", "change(s) for eth0", 10, "");
    // eth0 (position 0) gets no policy routing; eth1's stays in 101.
    assert_eq!(w.our_rules().len(), 2, "{:#?}", w.our_rules());
    assert!(has_rules(&w));
    let routes = w.our_routes();
    assert!(
        routes.iter().all(|r| r.contains(" table 101 ")),
        "{routes:#?}"
    );
    // (Not the primary's traffic: eth1's lease came first, so dhclient's
    // main-table default route is eth1's, which is the DHCP client's business;
    // cloud-init sets route metrics in netplan for that, leasehook leaves the
    // main table.)
    w.assert_cloud_init_eth1();
}

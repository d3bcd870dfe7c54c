// SPDX-License-Identifier: Apache-2.0
//! `leasehook refresh` between leases, in the end-to-end world: the operator changes
//! the instance's metadata (the IMDS emulator restarts with another tree), a link
//! goes away, IMDS fails. Compiled with the `netns` feature; needs root.

#![cfg(feature = "netns")]
#![cfg(test)]
#![allow(clippy::too_many_lines)]

use std::process::Output;
use std::time::{Duration, Instant};

use leasehook_tests::netns::leasehook_bin;
use leasehook_tests::world::{
    MAC0, MAC1, World, WorldOptions, add_static_nic_metadata, default_tree, wait_until,
};
use serde_json::{Value, json};

fn tree_with_eth1_ips(ips: &str) -> Value {
    let mut t = default_tree();
    t["latest"]["meta-data"]["network"]["interfaces"]["macs"][MAC1]["local-ipv4s"] = json!(ips);
    t
}

/// Runs `leasehook refresh -v` inside the instance with the hooks' environment.
fn refresh(w: &World, extra: &[&str]) -> Output {
    let mut cmd = w.inst.command(leasehook_bin().to_str().unwrap());
    cmd.envs(w.hook_env().iter().map(|(k, v)| (k.as_str(), v.as_str())));
    cmd.env("LEASEHOOK_IMDS_SYNC_BUDGET_S", "1");
    cmd.args(["refresh", "-v"]).args(extra);
    cmd.output().unwrap()
}

fn text(o: &Output) -> String {
    assert!(
        o.status.success(),
        "refresh failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn a_new_secondary_ip_gets_exactly_its_rule_and_address() {
    let mut w = World::bound_two("refresh");
    let state = w.root.join("run/leasehook/iface/eth1.json");
    let mtime = || std::fs::metadata(&state).unwrap().modified().unwrap();

    // Unchanged: no netlink write (ip monitor sees nothing), no file written.
    let before = mtime();
    let (out, seen) = w.inst.monitor(&[], || text(&refresh(&w, &[])));
    assert!(out.contains("eth1: 0 change(s)"), "{out}");
    assert_eq!(seen, "", "an unchanged refresh changed the kernel");
    assert_eq!(
        mtime(),
        before,
        "an unchanged refresh rewrote the state file"
    );

    // The operator assigns 10.98.1.22 to the ENI.
    w.restart_imds(
        &tree_with_eth1_ips("10.98.1.20\n10.98.1.21\n10.98.1.22"),
        &json!({}),
    );
    let out = text(&refresh(&w, &["--iface", "eth1"]));
    assert_eq!(
        out,
        "ip -4 rule add from 10.98.1.22/32 lookup 10001 priority 10001\nip -4 address add 10.98.1.22/32 dev eth1\neth1: 2 change(s): 2 added, 0 removed\n"
    );
    assert!(
        w.our_rules()
            .contains(&"10001 from 10.98.1.22 lookup 10001 proto 176".to_owned())
    );
    assert_eq!(w.echo_from("10.98.1.22").as_deref(), Some("10.98.1.22"));

    // ... and takes 10.98.1.21 and 10.98.1.22 away again.
    w.restart_imds(&tree_with_eth1_ips("10.98.1.20"), &json!({}));
    let out = text(&refresh(&w, &["--iface", "eth1"]));
    assert!(
        out.ends_with("eth1: 4 change(s): 0 added, 4 removed\n"),
        "{out}"
    );
    assert_eq!(
        w.our_rules(),
        vec!["10001 from 10.98.1.20 lookup 10001 proto 176".to_owned()]
    );
    assert!(
        !w.inst
            .addresses()
            .iter()
            .any(|a| a.contains("10.98.1.21") || a.contains("10.98.1.22"))
    );

    let status = text(
        &w.inst
            .command(leasehook_bin().to_str().unwrap())
            .args(["status", "--root", w.root.to_str().unwrap()])
            .output()
            .unwrap(),
    );
    assert!(
        status.contains("refreshed 0 s ago") || status.contains("refreshed 1 s ago"),
        "{status}"
    );
    assert!(status.contains("lease 10.98.1.20/24"), "{status}");
}

#[test]
fn imds_failing_during_a_refresh_changes_nothing() {
    let mut w = World::bound_two("refresh503");
    let before = (w.our_rules(), w.our_routes(), w.inst.addresses());
    w.restart_imds(
        &tree_with_eth1_ips("10.98.1.20"),
        &json!({"rules": [{"path": "/latest/meta-data", "status": 503, "retry_after": 0}]}),
    );
    let t = Instant::now();
    let o = refresh(&w, &[]);
    let took = t.elapsed();
    let stderr = String::from_utf8_lossy(&o.stderr);
    // Not checked: exit 1, the NIC and the cause on standard error (issue 33).
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("leasehook: eth1: not checked: IMDS did not answer usefully"),
        "{stderr}"
    );
    assert_eq!((w.our_rules(), w.our_routes(), w.inst.addresses()), before);
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("eth1"))
        .collect();
    assert!(!warnings.is_empty(), "no log line: {stderr}");
    // Bounded by the budget (1 s here) plus one request's timeout; generous for a busy machine.
    assert!(took < Duration::from_secs(20), "refresh took {took:?}");
}

#[test]
fn a_deleted_link_loses_its_rules_on_refresh_and_through_the_udev_command() {
    for by_udev in [false, true] {
        let w = World::bound_two(if by_udev { "udev" } else { "gone" });
        // The ENI is detached: the link vanishes, its `from` rules stay behind.
        w.router.ip(&["link", "del", "gw1"]);
        assert!(w.our_rules().len() == 2, "rules are not bound to a device");
        if by_udev {
            // What hooks/udev/90-leasehook.rules runs for a removed interface.
            let run = leasehook_tests::udev_command("remove", "eth1");
            assert_eq!(run[0], "/usr/bin/leasehook", "{run:?}");
            let o = w
                .inst
                .command(leasehook_bin().to_str().unwrap())
                .args(&run[1..])
                .args(["--root", w.root.to_str().unwrap()])
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        } else {
            let out = text(&refresh(&w, &[]));
            assert!(
                out.contains("eth1: link gone; 2 change(s): 0 added, 2 removed"),
                "{out}"
            );
        }
        assert!(w.our_rules().is_empty(), "{:#?}", w.our_rules());
        assert!(!w.root.join("run/leasehook/iface/eth1.json").exists());
    }
}

#[test]
fn a_renamed_link_keeps_its_policy_routing_under_the_new_name() {
    let w = World::bound_two("rename");
    w.inst.ip(&["link", "set", "eth1", "down"]);
    w.inst.ip(&["link", "set", "eth1", "name", "ens6"]);
    w.inst.ip(&["link", "set", "ens6", "up"]);
    // The link went down with its old name: put back what the kernel dropped.
    let out = text(&refresh(&w, &[]));
    assert!(out.contains("eth1: now ens6;"), "{out}");
    let routes = w.our_routes();
    assert!(
        routes.contains(
            &"default via 10.98.1.1 dev ens6 scope - src - table 10001 proto 176".to_owned()
        ),
        "{routes:#?}"
    );
    assert_eq!(w.our_rules().len(), 2);
    assert!(
        w.root.join("run/leasehook/iface/ens6.json").exists()
            && !w.root.join("run/leasehook/iface/eth1.json").exists()
    );
    assert_eq!(w.echo_from("10.98.1.21").as_deref(), Some("10.98.1.21"));
}

/// Four NICs, one refresh: the requests it makes, counted in the emulator's log.
#[test]
fn requests_per_refresh_of_four_nics() {
    let mut tree = default_tree();
    for n in 2u8..4 {
        add_static_nic_metadata(&mut tree, n);
    }
    let mut w = World::new(
        "refresh4",
        &WorldOptions {
            tree: Some(tree),
            ..WorldOptions::default()
        },
    );
    w.bind("eth0", false);
    w.bind("eth1", false);
    // eth2 and eth3 get their addresses by hand and a BOUND event from the shim.
    for n in 2u8..4 {
        w.add_static_nic(n);
    }
    assert!(
        wait_until(Duration::from_secs(10), || w.our_rules().len() == 4),
        "{:#?}",
        w.our_rules()
    );
    let before = w.imds_log().lines().count();
    let out = text(&refresh(&w, &[]));
    let log = w.imds_log();
    let requests = log.lines().count() - before;
    // Each NIC's requests leave through that NIC, from its own address (IMDS
    // throttles per ENI): the emulator logs the peer of every request.
    // A secondary without `network-card` also asks the primary's once, through
    // itself: that request is its event's, not the primary's.
    let probe = "macs/02:00:00:00:00:01/network-card ";
    let peer = |l: &str| -> Option<String> {
        l.split_whitespace()
            .nth(1)?
            .rsplit_once(':')
            .map(|(ip, _port)| ip.to_owned())
    };
    for n in 0u8..4 {
        let mac = format!("macs/02:00:00:00:00:0{}/", n + 1);
        let peers: std::collections::BTreeSet<String> = log
            .lines()
            .skip(before)
            .filter(|l| l.contains(&mac) && !l.contains(probe))
            .filter_map(peer)
            .collect();
        let own = format!("10.98.{n}.{}", if n == 0 { 10 } else { 20 });
        assert_eq!(
            peers.into_iter().collect::<Vec<_>>(),
            vec![own.clone()],
            "requests for eth{n}'s keys"
        );
    }
    let probes: Vec<String> = log
        .lines()
        .skip(before)
        .filter(|l| l.contains(probe))
        .filter_map(peer)
        .collect();
    assert_eq!(probes, ["10.98.1.20", "10.98.2.20", "10.98.3.20"], "{log}");
    assert_eq!(out.matches(": 0 change(s)").count(), 4, "{out}");
    println!("refresh of 4 NICs (eth0 primary, eth1-eth3 secondary): {requests} IMDS requests");
    // Per NIC: meta-data/mac, the MAC's listing and the keys it lists for IPv4
    // (device-number, local-ipv4s, subnet-ipv4-cidr-block, interface-id): at most 6;
    // each secondary, whose folder lists no network-card, asks the primary's too.
    assert!(requests <= 6 + 3 * 7, "{requests} requests for 4 NICs");
}

#[test]
fn refresh_applies_the_cloud_init_profile_and_leaves_unmanaged_nics_alone() {
    let mut w = World::bound_two("refreshci");
    // Switched to cloud-init's numbering: eth1, second of (eth0, eth1) in
    // (network-card, device-number, MAC) order, moves from 10001 to table 101.
    let mut cmd = w.inst.command(leasehook_bin().to_str().unwrap());
    cmd.envs(w.hook_env().iter().map(|(k, v)| (k.as_str(), v.as_str())));
    cmd.env("LEASEHOOK_PROFILE", "cloud-init");
    let o = cmd.args(["refresh", "-v"]).output().unwrap();
    let out = text(&o);
    assert!(out.contains("eth1: "), "{out}");
    let rules = w.our_rules();
    for from in ["10.98.1.20", "10.98.1.21"] {
        assert!(
            rules
                .iter()
                .any(|r| r.ends_with(&format!("from {from} lookup 101 proto 176"))),
            "{rules:#?}"
        );
    }
    assert_eq!(rules.len(), 2, "{rules:#?}");
    w.assert_cloud_init_eth1();
    // Again: nothing changes.
    let mut cmd = w.inst.command(leasehook_bin().to_str().unwrap());
    cmd.envs(w.hook_env().iter().map(|(k, v)| (k.as_str(), v.as_str())));
    cmd.env("LEASEHOOK_PROFILE", "cloud-init");
    let again = text(&cmd.args(["refresh", "-v"]).output().unwrap());
    assert_eq!(again.matches(": 0 change(s)").count(), 2, "{again}");
    let before = (w.our_rules(), w.our_routes(), w.inst.addresses());

    // An unmanaged NIC is left as it is, even when IMDS no longer lists its
    // secondary address.
    w.restart_imds(&tree_with_eth1_ips("10.98.1.20"), &json!({}));
    let mut cmd = w.inst.command(leasehook_bin().to_str().unwrap());
    cmd.envs(w.hook_env().iter().map(|(k, v)| (k.as_str(), v.as_str())));
    cmd.env("LEASEHOOK_UNMANAGED", "eth1");
    let out = text(&cmd.args(["refresh", "-v"]).output().unwrap());
    assert!(out.contains("eth1: unchanged (unmanaged"), "{out}");
    assert_eq!((w.our_rules(), w.our_routes(), w.inst.addresses()), before);
}

/// Issue 31, item 4: the primary NIC's BOUND and a refresh, counted in the
/// emulator's log. With the defaults leasehook adds the primary's secondary IPs
/// and asks only `local-ipv4s` for them (plus `mac`, and the token when none is
/// cached); with `secondary_addresses: false` it configures nothing there and
/// asks `mac` alone on the event and nothing on a refresh. (Before: 7 requests a
/// BOUND, 6 a refresh.)
#[test]
fn the_primary_costs_only_what_leasehook_configures_on_it() {
    let imds_requests = |w: &World, before: usize| -> Vec<(String, String)> {
        w.imds_log()
            .lines()
            .skip(before)
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f[2].to_owned(), f[3].to_owned())
            })
            .collect()
    };
    for secondary in [true, false] {
        let mut tree = default_tree();
        tree["latest"]["meta-data"]["network"]["interfaces"]["macs"][MAC0]["local-ipv4s"] =
            json!("10.98.0.10\n10.98.0.11");
        let w = World::new(
            if secondary { "prim-sec" } else { "prim-none" },
            &WorldOptions {
                tree: Some(tree),
                extra_hook_env: vec![(
                    "LEASEHOOK_SECONDARY_ADDRESSES".to_owned(),
                    secondary.to_string(),
                )],
                ..WorldOptions::default()
            },
        );
        let mut w = w;
        let before = w.imds_log().lines().count();
        w.bind("eth0", false);
        let state = w.root.join("run/leasehook/iface/eth0.json");
        assert!(
            wait_until(Duration::from_secs(10), || state.exists()),
            "{}",
            w.log("eth0", false)
        );
        let bound = imds_requests(&w, before);
        let gets: Vec<&str> = bound
            .iter()
            .filter(|(m, _)| m == "GET")
            .map(|(_, p)| p.as_str())
            .collect();
        let mut want = vec!["/latest/meta-data/mac".to_owned()];
        if secondary {
            want.push(format!(
                "/latest/meta-data/network/interfaces/macs/{MAC0}/local-ipv4s"
            ));
        }
        assert_eq!(gets, want, "BOUND of the primary: {bound:?}");
        // The token is asked once, and then cached.
        assert!(bound.len() <= gets.len() + 1, "{bound:?}");
        let st: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
        assert_eq!(st["primary"], json!(true), "{st}");
        assert!(
            st["missing"].as_array().is_none_or(Vec::is_empty),
            "nothing is missing: {st}"
        );
        let added = w
            .inst
            .addresses()
            .contains(&"eth0 10.98.0.11/32".to_owned());
        assert_eq!(added, secondary, "{:?}", w.inst.addresses());

        let before = w.imds_log().lines().count();
        let out = text(&refresh(&w, &["--iface", "eth0"]));
        let refreshed = imds_requests(&w, before);
        println!(
            "secondary_addresses {secondary}: BOUND of the primary {} request(s) ({} GET), \
             refresh {} request(s)",
            bound.len(),
            gets.len(),
            refreshed.len()
        );
        if secondary {
            assert_eq!(
                refreshed,
                [(
                    "GET".to_owned(),
                    format!("/latest/meta-data/network/interfaces/macs/{MAC0}/local-ipv4s")
                )],
                "{out}"
            );
            assert!(out.contains("eth0: 0 change(s)"), "{out}");
        } else {
            assert!(refreshed.is_empty(), "{refreshed:?}\n{out}");
            assert!(
                out.contains("eth0: unchanged (the primary NIC: this configuration adds nothing"),
                "{out}"
            );
        }
        assert_eq!(
            w.inst
                .addresses()
                .contains(&"eth0 10.98.0.11/32".to_owned()),
            secondary
        );
    }
}

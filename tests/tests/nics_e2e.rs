// SPDX-License-Identifier: Apache-2.0
//! The operator's per-NIC intent (`nics:`, SPEC §3.9, issue 36) in the
//! end-to-end world: an operator route in eth1's table 10001 and a rule to the
//! echo host's range survive RENEW, `leasehook refresh` and a flush of eth0,
//! and leave with `leasehook flush --iface eth1`; a delegated /28 gives eth1
//! its first addresses and takes them away when the prefix leaves the
//! metadata. Compiled with the `netns` feature; needs root.

#![cfg(feature = "netns")]
#![cfg(test)]

use std::process::Output;

use leasehook_tests::netns::sibling_bin;
use leasehook_tests::world::{MAC1, World, default_tree, eth1_lease, output_text};
use serde_json::{Value, json};

/// The operator's route and rule in eth1's table.
const ROUTE: &str = "192.0.2.0/24 via 10.98.1.1 dev eth1 scope - src - table 10001 proto 176";
const RULE: &str = "9000 from all to 198.51.100.0/24 lookup 10001 proto 176";

fn write_config(w: &World, yaml: &str) {
    let dir = w.root.join("etc/leasehook");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.yaml"), yaml).unwrap();
}

/// eth1's lease event `reason` through `leasehook-dhclient`, as dhclient-script
/// runs it, with the hooks' environment.
fn hook(w: &World, reason: &str) -> Output {
    let bin = sibling_bin("leasehook-dhclient");
    let mut cmd = w.inst.command(bin.to_str().unwrap());
    cmd.envs(w.hook_env().iter().map(|(k, v)| (k.as_str(), v.as_str())));
    cmd.envs(eth1_lease(reason));
    cmd.output().unwrap()
}

fn ok(w: &World, args: &[&str]) -> String {
    w.leasehook_ok(args, &[], || format!("{:#?}", w.snapshot()))
}

fn has_route(w: &World) -> bool {
    w.our_routes().iter().any(|r| r == ROUTE)
}

fn has_rule(w: &World) -> bool {
    w.our_rules().iter().any(|r| r == RULE)
}

#[test]
fn an_operator_route_and_rule_live_in_eth1s_table_until_its_flush() {
    let w = World::bound_two("nics");
    // Before the rule, the echo host sees eth0's address (main's default).
    assert_eq!(
        w.inst.http_get("198.51.100.10", 80, None).as_deref(),
        Some("10.98.0.10")
    );
    write_config(
        &w,
        "nics:\n  - match: device-number:1\n    routes:\n      - to: 192.0.2.0/24\n        via: gateway\n    rules:\n      - to: 198.51.100.0/24\n        priority: 9000\n      - to: 10.98.0.0/24\n        priority: 9001\n",
    );
    let out = ok(&w, &["refresh", "-v", "--iface", "eth1"]);
    assert!(has_route(&w) && has_rule(&w), "{out}\n{:#?}", w.snapshot());
    // The rule to eth0's subnet is refused, and says why.
    assert!(
        !w.our_rules().iter().any(|r| r.contains("to 10.98.0.0/24")),
        "{:?}",
        w.our_rules()
    );
    // `status` lists it (and says degraded: a refusal is news).
    let status = output_text(&w.leasehook(&["status"], &[]));
    assert!(
        status.contains("refused: nics[0].rules[1] to 10.98.0.0/24 priority 9001: holds the host's default router 10.98.0.1"),
        "{status}"
    );
    // The rule sends the echo host's range through eth1: it sees eth1's address.
    assert_eq!(
        w.inst.http_get("198.51.100.10", 80, None).as_deref(),
        Some("10.98.1.20"),
        "{:#?}",
        w.snapshot()
    );

    // RENEW, refresh and a flush of eth0 leave them alone.
    let renew = hook(&w, "RENEW");
    assert!(renew.status.success(), "{}", output_text(&renew));
    assert!(
        has_route(&w) && has_rule(&w),
        "after RENEW: {}",
        output_text(&renew)
    );
    let out = ok(&w, &["refresh", "-v"]);
    assert!(out.contains("eth1: 0 change(s)"), "{out}");
    ok(&w, &["flush", "--iface", "eth0"]);
    assert!(has_route(&w) && has_rule(&w), "after flush of eth0");

    // `flush --iface eth1` takes them out with the rest of eth1's.
    ok(&w, &["flush", "--iface", "eth1"]);
    assert!(
        !has_route(&w) && !has_rule(&w),
        "after flush of eth1: {:#?}",
        w.snapshot()
    );
    assert_eq!(
        w.inst.http_get("198.51.100.10", 80, None).as_deref(),
        Some("10.98.0.10")
    );
}

fn tree_with_prefix(prefix: Option<&str>) -> Value {
    let mut t = default_tree();
    if let Some(p) = prefix {
        t["latest"]["meta-data"]["network"]["interfaces"]["macs"][MAC1]["ipv4-prefix"] = json!(p);
    }
    t
}

#[test]
fn a_delegated_prefix_gives_its_first_addresses_and_takes_them_back() {
    let mut w = World::bound_two("nicspfx");
    write_config(&w, "nics:\n  - match: eth1\n    prefix_addresses: 2\n");
    w.restart_imds(&tree_with_prefix(Some("10.98.1.32/28")), &json!({}));
    let out = ok(&w, &["refresh", "-v", "--iface", "eth1"]);
    let held = w.inst.addresses();
    for a in ["eth1 10.98.1.32/32", "eth1 10.98.1.33/32"] {
        assert!(held.iter().any(|h| h == a), "{a}: {out}\n{held:#?}");
    }
    assert!(!held.iter().any(|h| h.contains("10.98.1.34")), "{held:#?}");
    // Traffic from a prefix address leaves through eth1 (its /28's rule).
    w.assert_echoes(&["10.98.1.33"], || format!("{:#?}", w.snapshot()));

    // The prefix leaves the metadata: its addresses leave the NIC.
    w.restart_imds(&tree_with_prefix(None), &json!({}));
    let out = ok(&w, &["refresh", "-v", "--iface", "eth1"]);
    let held = w.inst.addresses();
    assert!(
        !held
            .iter()
            .any(|h| h.contains("10.98.1.32") || h.contains("10.98.1.33")),
        "{out}\n{held:#?}"
    );
}

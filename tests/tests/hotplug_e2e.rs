// SPDX-License-Identifier: Apache-2.0
//! Issue 35, item 3, in the end-to-end world: after a hot-plug (a lease on a MAC
//! leasehook had not routed) `leasehook watch` refreshes that NIC every 5 s for
//! a while, then leaves it to the timer. The lab runs no timer, so a change the
//! metadata makes is routed only if the watcher's cadence does it. Compiled with
//! the `netns` feature; needs root, isc-dhcp-client and dnsmasq, and fails, never
//! skips, without them.

#![cfg(feature = "netns")]
#![cfg(test)]

use std::process::Stdio;
use std::time::Duration;

use leasehook_tests::netns::{leasehook_bin, terminate};
use leasehook_tests::world::{MAC1, World, default_tree, wait_until};
use serde_json::json;

const NEW_RULE: &str = "10001 from 10.98.1.22 lookup 10001 proto 176";

/// eth1 bound (its hot-plug recorded, the primary's not); `leasehook watch`
/// started; the ENI gets 10.98.1.22 in the metadata: routed by the cadence, with
/// no timer; after six quiet checks the record is gone and the watcher asks the
/// metadata nothing more. Seen failing (10.98.1.22 never routed) with the hook
/// path writing no record.
#[test]
fn a_hot_plugged_nic_is_refreshed_every_5_s_then_left_to_the_timer() {
    let mut w = World::bound_two("pchotplug");
    let root = w.root.clone();
    let record = |n: &str| root.join(format!("run/leasehook/hotplug/{n}.json"));
    // The hook records the hot-plug after it committed eth1's plan, so just
    // after the state file `bound_two` waits for (seen missing once, under load).
    assert!(
        wait_until(Duration::from_secs(5), || record("eth1").exists()),
        "no hot-plug record for eth1"
    );
    assert!(!record("eth0").exists(), "the primary's hot-plug recorded");

    let mut cmd = w.inst.command(leasehook_bin().to_str().unwrap());
    cmd.envs(w.hook_env().iter().map(|(k, v)| (k.as_str(), v.as_str())));
    cmd.env("LEASEHOOK_LOG_LEVEL", "info");
    cmd.arg("watch")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let watch = cmd.spawn().unwrap();

    // The operator assigns 10.98.1.22 to the ENI.
    let mut tree = default_tree();
    tree["latest"]["meta-data"]["network"]["interfaces"]["macs"][MAC1]["local-ipv4s"] =
        json!("10.98.1.20\n10.98.1.21\n10.98.1.22");
    w.restart_imds(&tree, &json!({}));
    // Within the minute the timer would have taken (none runs here at all).
    let routed = wait_until(Duration::from_secs(40), || {
        w.our_rules().iter().any(|r| r == NEW_RULE)
    });
    // Quiet checks from then on: done, the record removed.
    let settled = routed && wait_until(Duration::from_secs(70), || !record("eth1").exists());
    // Then nothing more is asked.
    let before = w.imds_log().lines().count();
    if settled {
        std::thread::sleep(Duration::from_secs(7));
    }
    let after = w.imds_log().lines().count();
    let (status, _, log) = terminate(watch);
    assert!(routed, "10.98.1.22 not routed: {:#?}\n{log}", w.our_rules());
    assert!(
        log.contains("hot-plug of eth1: 2 change(s)"),
        "not the cadence's refresh: {log}"
    );
    assert!(settled, "the hot-plug never ended: {log}");
    assert!(
        log.contains("hot-plug of eth1: the metadata was complete and unchanged for 30 s"),
        "{log}"
    );
    assert_eq!(after, before, "asked the metadata after the cadence ended");
    assert!(status.success(), "{status}\n{log}");
    assert_eq!(w.echo_from("10.98.1.22").as_deref(), Some("10.98.1.22"));
}

// SPDX-License-Identifier: Apache-2.0
//! `leasehook watch` in the end-to-end world: a NIC device that LXD adds (the
//! devlxd emulator's `device` event, its MAC only in `/1.0/devices`) gets its
//! policy routing back through the refresh path once a link with that MAC exists,
//! and not before. Compiled with the `netns` feature; needs root (issue 23).

#![cfg(feature = "netns")]
#![cfg(test)]

use std::process::Stdio;
use std::time::{Duration, Instant};

use leasehook_tests::devlxd::{Config, Devlxd};
use leasehook_tests::netns::{leasehook_bin, terminate};
use leasehook_tests::world::{MAC1, World, WorldOptions, wait_until};

const ETH1_DEFAULT: &str = "default via 10.98.1.1 dev eth1 scope - src - table 10001 proto 176";

#[test]
fn a_nic_added_by_lxd_gets_its_routing_once_its_link_exists() {
    let mut w = World::new("lxdnic", &WorldOptions::default());
    w.bind("eth0", false);
    w.bind("eth1", false);
    assert!(
        wait_until(Duration::from_secs(10), || w
            .our_routes()
            .iter()
            .any(|r| r == ETH1_DEFAULT)),
        "{}",
        w.log("eth1", false)
    );
    // The NIC is unplugged: no link has its MAC, and its table lost its routes.
    w.inst.ip(&["link", "set", "eth1", "down"]);
    w.inst
        .ip(&["link", "set", "eth1", "address", "02:00:00:00:00:99"]);
    assert!(!w.our_routes().iter().any(|r| r == ETH1_DEFAULT));

    std::fs::create_dir_all(w.root.join("dev/lxd")).unwrap();
    let devlxd = Devlxd::start(
        &w.root.join("dev/lxd/sock"),
        Config::new("instance-id: lxdnic\n").devices(
            serde_json::json!({"eth0": {"type": "nic", "hwaddr": leasehook_tests::world::MAC0}}),
        ),
    )
    .unwrap();
    let mut cmd = w.inst.command(leasehook_bin().to_str().unwrap());
    cmd.envs(w.hook_env().iter().map(|(k, v)| (k.as_str(), v.as_str())));
    cmd.args(["watch", "--link-wait", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let watch = cmd.spawn().unwrap();
    assert!(wait_until(Duration::from_secs(10), || devlxd
        .event_streams()
        == 1));

    // LXD plugs the NIC back in: the event, then (later) the link.
    devlxd.add_nic("eth1", MAC1);
    assert!(wait_until(Duration::from_secs(10), || {
        devlxd.count("/1.0/devices") >= 2
    }));
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !w.our_routes().iter().any(|r| r == ETH1_DEFAULT),
        "routing came back before the link did"
    );
    let t = Instant::now();
    w.inst.ip(&["link", "set", "eth1", "address", MAC1]);
    w.inst.ip(&["link", "set", "eth1", "up"]);
    let back = wait_until(Duration::from_secs(20), || {
        w.our_routes().iter().any(|r| r == ETH1_DEFAULT)
    });
    let took = t.elapsed();
    let (status, _, log) = terminate(watch);
    assert!(back, "{:#?}\n{log}", w.our_routes());
    eprintln!("eth1's routing back {took:?} after its link appeared");
    assert!(status.success(), "{status}\n{log}");
    assert!(
        log.contains("NIC eth1 (02:00:00:00:00:02) added or updated"),
        "{log}"
    );
    assert_eq!(w.our_rules().len(), 2);
    assert_eq!(w.echo_from("10.98.1.21").as_deref(), Some("10.98.1.21"));
}

// SPDX-License-Identifier: Apache-2.0
//! NetworkManager for real: NetworkManager (internal DHCP client) gets leases from
//! dnsmasq, its dispatcher runs leasehook's script (`hooks/networkmanager/90-leasehook`)
//! from the world's `/etc/NetworkManager/dispatcher.d`, and `leasehook-nm` asks the
//! IMDS emulator and installs policy routing. NetworkManager and nm-dispatcher talk
//! over a private D-Bus, in the instance's network namespace and a mount namespace
//! of their own (`World::start_nm`). Each test builds its own world.
//!
//! Compiled with the `netns` feature; needs root, network-manager, dbus-daemon and
//! dnsmasq, and fails, never skips, without them.

#![cfg(feature = "netns")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::time::Duration;

use leasehook_tests::clients::hostile_options;
use leasehook_tests::world::{World, WorldOptions, wait_until};

#[test]
fn up_installs_policy_routing_and_down_removes_it() {
    let mut w = World::new("nm", &WorldOptions::default());
    w.start_nm(false);
    assert!(
        wait_until(Duration::from_secs(40), || w.secondary_pbr_installed()),
        "{}\n{}",
        w.pbr_report(),
        w.nm_log()
    );
    assert!(
        w.inst
            .addresses()
            .contains(&"eth1 10.98.1.21/32".to_owned()),
        "{}",
        w.pbr_report()
    );
    assert!(
        !w.our_rules().iter().any(|r| r.contains("10.98.0.")),
        "the primary got rules"
    );
    for src in ["10.98.1.20", "10.98.1.21", "10.98.0.10"] {
        assert_eq!(w.echo_from(src).as_deref(), Some(src), "traffic from {src}");
    }
    assert!(
        w.nm_log().contains("eth1 up: "),
        "every shim line names the interface and action:\n{}",
        w.nm_log()
    );
    w.nmcli(&["connection", "down", "leasehook-eth1"]);
    assert!(
        wait_until(Duration::from_secs(20), || w.secondary_pbr_gone()),
        "after down:\n{}\n{}",
        w.pbr_report(),
        w.nm_log()
    );
    assert!(w.nm_log().contains("eth1 down: removed"), "{}", w.nm_log());
    // Up again: the same state.
    w.nmcli(&["connection", "up", "leasehook-eth1"]);
    assert!(
        wait_until(Duration::from_secs(40), || w.secondary_pbr_installed()),
        "after up again:\n{}\n{}",
        w.pbr_report(),
        w.nm_log()
    );
    assert_eq!(w.our_rules().len(), 2, "{}", w.pbr_report());
}

#[test]
fn dhcpv6_adds_the_ipv6_rule() {
    let mut w = World::new("nm6", &WorldOptions::default());
    w.start_nm(true);
    let rule = "10001 from fd00:98:1::20 lookup 10001 proto 176";
    let route = "fd00:98:1::/64 via - dev eth1 scope - src - table 10001 proto 176";
    assert!(
        wait_until(Duration::from_secs(40), || w
            .our_rules()
            .contains(&rule.to_owned())
            && w.our_routes().contains(&route.to_owned())
            && w.secondary_pbr_installed()),
        "{}\n{}",
        w.pbr_report(),
        w.nm_log()
    );
    w.nmcli(&["connection", "down", "leasehook-eth1"]);
    assert!(
        wait_until(Duration::from_secs(20), || w.secondary_pbr_gone()),
        "after down:\n{}\n{}",
        w.pbr_report(),
        w.nm_log()
    );
}

#[test]
fn hostile_dhcp_options_reach_no_shell() {
    let marker = std::env::temp_dir().join(format!("leasehook-nm-pwned-{}", std::process::id()));
    let opts = WorldOptions {
        dnsmasq_extra: hostile_options(&marker),
        ..WorldOptions::default()
    };
    let mut w = World::new("nmhostile", &opts);
    w.start_nm(false);
    assert!(
        wait_until(Duration::from_secs(40), || w.secondary_pbr_installed()),
        "{}\n{}",
        w.pbr_report(),
        w.nm_log()
    );
    assert!(!marker.exists(), "a hostile option reached a shell");
    // The options did reach the dispatcher's environment (escaped by NetworkManager).
    assert!(
        w.nm_log()
            .contains("'up' [eth1]: environment: DHCP4_HOST_NAME=\\096touch"),
        "{}",
        w.nm_log()
    );
}

/// NetworkManager 1.42 renews without a dispatcher event when the lease stays the
/// same, but it re-syncs the link's addresses and routes: leasehook's secondary
/// address, table and rules must survive that.
#[test]
fn renewals_keep_the_policy_routing() {
    let mut w = World::new(
        "nmrenew",
        &WorldOptions {
            t1: Some(2),
            ..WorldOptions::default()
        },
    );
    w.start_nm(false);
    assert!(
        wait_until(Duration::from_secs(40), || w.secondary_pbr_installed()),
        "{}\n{}",
        w.pbr_report(),
        w.nm_log()
    );
    let before = (w.our_rules(), w.our_routes(), w.inst.addresses());
    let leases = |w: &World| {
        w.nm_log()
            .matches("dhcp4 (eth1): state changed new lease")
            .count()
    };
    assert!(
        wait_until(Duration::from_secs(30), || leases(&w) >= 3),
        "fewer than 2 renewals:\n{}",
        w.nm_log()
    );
    assert_eq!((w.our_rules(), w.our_routes(), w.inst.addresses()), before);
    assert_eq!(w.echo_from("10.98.1.21").as_deref(), Some("10.98.1.21"));
}

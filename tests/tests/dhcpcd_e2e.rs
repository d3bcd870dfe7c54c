// SPDX-License-Identifier: Apache-2.0
//! dhcpcd for real: dhcpcd gets leases from dnsmasq, its unmodified
//! `dhcpcd-run-hooks` sources leasehook's hook (`hooks/dhcpcd/90-leasehook`, bind
//! mounted as the only file of `/usr/lib/dhcpcd/dhcpcd-hooks` in dhcpcd's mount
//! namespace), and `leasehook-dhcpcd` asks the IMDS emulator and installs policy
//! routing. Settings reach the shim through `dhcpcd -e`, as dhcpcd clears its
//! hooks' environment. Each test builds its own world (`leasehook_tests::world`,
//! `::clients`).
//!
//! Compiled with the `netns` feature; needs root, dhcpcd (dhcpcd-base) and dnsmasq,
//! and fails, never skips, without them.

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

fn up(w: &mut World) {
    w.dhcpcd_start("eth0", false);
    assert!(
        w.wait_address("eth0", "10.98.0.10/24", 20),
        "eth0 got no lease:\n{}",
        w.client_log("dhcpcd", "eth0", false)
    );
    w.dhcpcd_start("eth1", false);
    assert!(
        wait_until(Duration::from_secs(20), || w.secondary_pbr_installed()),
        "no policy routing after BOUND on eth1:\n{}\n{}",
        w.pbr_report(),
        w.client_log("dhcpcd", "eth1", false)
    );
}

#[test]
fn bound_installs_policy_routing_release_and_stop_remove_it() {
    let mut w = World::new("dhcpcd", &WorldOptions::default());
    up(&mut w);
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
    let log = w.client_log("dhcpcd", "eth1", false);
    assert!(
        log.contains("eth1 BOUND: "),
        "every shim line names the interface and reason:\n{log}"
    );

    for release in [true, false] {
        if !release {
            w.dhcpcd_start("eth1", false);
            assert!(
                wait_until(Duration::from_secs(20), || w.secondary_pbr_installed()),
                "no policy routing after the restart:\n{}\n{}",
                w.pbr_report(),
                w.client_log("dhcpcd", "eth1", false)
            );
        }
        // -k releases (reason RELEASE, then STOP); -x stops (STOP).
        w.dhcpcd_end("eth1", false, release);
        assert!(
            wait_until(Duration::from_secs(10), || w.secondary_pbr_gone()),
            "after dhcpcd {}:\n{}\n{}",
            if release { "-k" } else { "-x" },
            w.pbr_report(),
            w.client_log("dhcpcd", "eth1", false)
        );
        assert!(
            w.client_log("dhcpcd", "eth1", false)
                .contains("eth1 STOP: removed"),
            "{}",
            w.client_log("dhcpcd", "eth1", false)
        );
    }
}

#[test]
fn dhcpv6_bound6_adds_the_ipv6_rule_and_release6_removes_it() {
    let mut w = World::new("dhcpcd6", &WorldOptions::default());
    w.dhcpcd_start("eth0", false);
    assert!(w.wait_address("eth0", "10.98.0.10/24", 20));
    w.dhcpcd_start("eth1", true);
    let rule = "10001 from fd00:98:1::20 lookup 10001 proto 176";
    let route = "fd00:98:1::/64 via - dev eth1 scope - src - table 10001 proto 176";
    assert!(
        wait_until(Duration::from_secs(20), || w
            .our_rules()
            .contains(&rule.to_owned())
            && w.our_routes().contains(&route.to_owned())),
        "{}\n{}",
        w.pbr_report(),
        w.client_log("dhcpcd", "eth1", true)
    );
    assert!(
        w.client_log("dhcpcd", "eth1", true)
            .contains("eth1 BOUND6: ")
    );
    w.dhcpcd_end("eth1", true, true);
    assert!(
        wait_until(Duration::from_secs(10), || w.our_rules().is_empty()
            && w.our_routes().is_empty()),
        "{}\n{}",
        w.pbr_report(),
        w.client_log("dhcpcd", "eth1", true)
    );
    assert!(
        w.client_log("dhcpcd", "eth1", true)
            .contains("eth1 RELEASE6: removed"),
        "{}",
        w.client_log("dhcpcd", "eth1", true)
    );
}

#[test]
fn hostile_dhcp_options_reach_no_shell() {
    let marker =
        std::env::temp_dir().join(format!("leasehook-dhcpcd-pwned-{}", std::process::id()));
    let opts = WorldOptions {
        dnsmasq_extra: hostile_options(&marker),
        ..WorldOptions::default()
    };
    let mut w = World::new("dhcpcdhostile", &opts);
    up(&mut w);
    assert!(!marker.exists(), "a hostile option reached a shell");
    // The private option 224 reached the hooks' environment (issue 18, item 11),
    // as dhcpcd hands it on (shell characters escaped).
    let sent = leasehook_tests::clients::hostile_private_option(&marker);
    let env = w.recorded_hook_env("dhcpcd", "eth1");
    let got: Vec<&String> = env
        .iter()
        .filter(|kv| kv.starts_with("new_lh_hostile="))
        .collect();
    assert!(
        got.iter()
            .any(|kv| kv.contains("touch") && kv.contains(&marker.display().to_string())),
        "option 224 ({sent:?}) did not reach the hook's environment: {got:?}"
    );
}

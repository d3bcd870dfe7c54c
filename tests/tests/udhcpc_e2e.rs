// SPDX-License-Identifier: Apache-2.0
//! busybox udhcpc for real: udhcpc gets leases from dnsmasq and runs leasehook's
//! script (`hooks/udhcpc/leasehook.script`, given with `-s`), which chains to
//! Debian's `/etc/udhcpc/default.script` to configure the address and then runs
//! `leasehook-udhcpc`, which asks the IMDS emulator and installs policy routing.
//! Each test builds its own world (`leasehook_tests::world`, `::clients`).
//!
//! Compiled with the `netns` feature; needs root, udhcpc (busybox) and dnsmasq, and
//! fails, never skips, without them.

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
    w.udhcpc_start("eth0");
    assert!(
        w.wait_address("eth0", "10.98.0.10/24", 20),
        "eth0 got no lease:\n{}",
        w.client_log("udhcpc", "eth0", false)
    );
    w.udhcpc_start("eth1");
    assert!(
        wait_until(Duration::from_secs(20), || w.secondary_pbr_installed()),
        "no policy routing after bound on eth1:\n{}\n{}",
        w.pbr_report(),
        w.client_log("udhcpc", "eth1", false)
    );
}

#[test]
fn bound_installs_policy_routing_and_release_removes_it() {
    let mut w = World::new("udhcpc", &WorldOptions::default());
    up(&mut w);
    // The chained default script configured the address (udhcpc does not). Its
    // default route via eth1 loses to eth0's in the main table (busybox's script
    // sets no metric): leasehook's table is what lets eth1's addresses out.
    assert!(
        w.inst
            .ip(&["-4", "addr", "show", "eth1"])
            .contains("10.98.1.20/24")
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
    let log = w.client_log("udhcpc", "eth1", false);
    assert!(
        log.contains("eth1 bound: "),
        "every shim line names the interface and event:\n{log}"
    );

    // SIGUSR2: udhcpc releases the lease and runs the script with `deconfig`.
    w.udhcpc_release("eth1");
    assert!(
        wait_until(Duration::from_secs(10), || w.secondary_pbr_gone()),
        "after release:\n{}\n{}",
        w.pbr_report(),
        w.client_log("udhcpc", "eth1", false)
    );
    assert!(
        !w.inst
            .ip(&["-4", "addr", "show", "eth1"])
            .contains("10.98.1.20"),
        "the default script did not deconfigure eth1"
    );
    assert!(
        w.client_log("udhcpc", "eth1", false)
            .contains("eth1 deconfig: removed"),
        "{}",
        w.client_log("udhcpc", "eth1", false)
    );
}

#[test]
fn hostile_dhcp_options_reach_no_shell() {
    let marker =
        std::env::temp_dir().join(format!("leasehook-udhcpc-pwned-{}", std::process::id()));
    let opts = WorldOptions {
        dnsmasq_extra: hostile_options(&marker),
        ..WorldOptions::default()
    };
    let mut w = World::new("udhcpchostile", &opts);
    up(&mut w);
    assert!(!marker.exists(), "a hostile option reached a shell");
    // The private option 224 reached the script's environment (issue 18, item
    // 11), as udhcpc hands on options it does not know: its bytes in hex.
    let sent = leasehook_tests::clients::hostile_private_option(&marker);
    let hex = sent.bytes().fold(String::new(), |mut h, b| {
        use std::fmt::Write as _;
        let _ = write!(h, "{b:02x}");
        h
    });
    let env = w.recorded_hook_env("udhcpc", "eth1");
    assert!(
        env.iter().any(|kv| kv == &format!("opt224={hex}")),
        "option 224 ({sent:?}) did not reach the script's environment as opt224={hex}: {:?}",
        env.iter()
            .filter(|kv| kv.starts_with("opt"))
            .collect::<Vec<_>>()
    );
    // The options did reach the client (and Debian's default script wrote them,
    // escaped by busybox, into the world's resolver file, not the machine's).
    let resolv = std::fs::read_to_string(w.resolv_conf()).unwrap();
    assert!(resolv.contains("domain"), "{resolv:?}");
}

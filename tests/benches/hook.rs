// SPDX-License-Identifier: Apache-2.0
//! Benchmark: the dhclient hook's wall time from the BOUND call to the rules being
//! installed, in the end-to-end world (IMDS emulator on the VPC side, token cached
//! from an earlier event). Needs root:
//!
//! `cargo bench -p leasehook-tests --features netns --bench hook`
//!
//! Each round removes eth1's policy routing (`leasehook flush`, not timed), then
//! runs `leasehook-dhclient` exactly as dhclient-script does, with a BOUND
//! environment, inside the instance namespace, and times it to its exit (the plan is
//! applied before it exits when IMDS agrees). A RENEW with nothing changed and
//! `ip netns exec ... true` (the cost of entering the namespace, included in both)
//! are timed the same way.

#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::time::{Duration, Instant};

use leasehook_tests::netns::{leasehook_bin, run, sibling_bin};
use leasehook_tests::world::{World, WorldOptions, wait_until};

const ROUNDS: usize = 31;

fn median_ms(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (ms(v[v.len() / 2]), ms(v[v.len() * 9 / 10]))
}

fn main() {
    let mut w = World::new("bench", &WorldOptions::default());
    w.bind("eth0", false);
    w.bind("eth1", false);
    assert!(
        wait_until(Duration::from_secs(20), || w.our_rules().len() == 2),
        "{}",
        w.log("eth1", false)
    );
    let root = w.root.display().to_string();
    let shim = sibling_bin("leasehook-dhclient").display().to_string();
    let lh = leasehook_bin().display().to_string();
    let hook = |reason: &str| -> Duration {
        let mut cmd = w.inst.command("env");
        cmd.args(["-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"])
            .arg(format!("reason={reason}"))
            .args([
                "interface=eth1",
                "new_ip_address=10.98.1.20",
                "new_subnet_mask=255.255.255.0",
                "new_routers=10.98.1.1",
            ])
            .arg(format!("LEASEHOOK_ROOT={root}"))
            .args(["LEASEHOOK_LOG_LEVEL=warn", &shim]);
        let t = Instant::now();
        run(&mut cmd);
        t.elapsed()
    };
    let (mut bound, mut renew, mut base) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        run(w
            .inst
            .command(&lh)
            .args(["flush", "--root", &root, "--iface", "eth1"]));
        assert!(w.our_rules().is_empty());
        bound.push(hook("BOUND"));
        assert_eq!(
            w.our_rules().len(),
            2,
            "BOUND did not install the rules before exiting"
        );
        renew.push(hook("RENEW"));
        let t = Instant::now();
        run(&mut w.inst.command("true"));
        base.push(t.elapsed());
    }
    let requests = w.imds_log().lines().count();
    let (b, b90) = median_ms(bound);
    let (r, r90) = median_ms(renew);
    let (n, n90) = median_ms(base);
    println!("dhclient hook, {ROUNDS} rounds, IMDS emulator in the VPC namespace (token cached):");
    println!("  BOUND, rules installed at exit : median {b:6.2} ms   p90 {b90:6.2} ms");
    println!("  RENEW, nothing changed        : median {r:6.2} ms   p90 {r90:6.2} ms");
    println!(
        "  ip netns exec ... true        : median {n:6.2} ms   p90 {n90:6.2} ms (included above)"
    );
    println!("  IMDS requests in all: {requests}");
}

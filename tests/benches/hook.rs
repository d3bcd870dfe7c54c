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
//!
//! Then two more NICs join (`eth2`, `eth3`, addresses set by hand and a BOUND event
//! each) and `leasehook refresh` — what the timer runs every minute — is timed on
//! the four NICs with nothing changed, counting its IMDS requests.
//!
//! With `LEASEHOOK_BENCH_JSON` set, the numbers are also appended to that file as
//! one JSON line (for `bench/run`). Ctrl-C stops between rounds and removes the
//! world (namespaces, processes, files).

#![allow(clippy::print_stdout, clippy::indexing_slicing)]

use std::time::{Duration, Instant};

use leasehook_tests::bench::{self, Stop, Summary};
use leasehook_tests::netns::{leasehook_bin, run, sibling_bin};
use leasehook_tests::world::{
    World, WorldOptions, add_static_nic_metadata, default_tree, wait_until,
};
use serde_json::{Value, json};

const ROUNDS: usize = 31;
/// The NICs `leasehook refresh` checks: eth0, eth1 and two added by hand.
const REFRESH_NICS: u8 = 4;

fn main() {
    let stop = Stop::install();
    let mut tree = default_tree();
    for n in 2..REFRESH_NICS {
        add_static_nic_metadata(&mut tree, n);
    }
    let mut world = World::new(
        "bench",
        &WorldOptions {
            tree: Some(tree),
            ..WorldOptions::default()
        },
    );
    world.bind("eth0", false);
    world.bind("eth1", false);
    assert!(
        wait_until(Duration::from_secs(20), || world.our_rules().len() == 2),
        "{}",
        world.log("eth1", false)
    );
    let mut out = hook_rounds(&world, &stop);
    out["refresh"] = refresh_rounds(&world, &stop);
    bench::emit("hook", out);
}

/// BOUND and RENEW through the shim, and entering the namespace, `ROUNDS` times.
fn hook_rounds(w: &World, stop: &Stop) -> Value {
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
        let started = Instant::now();
        run(&mut cmd);
        started.elapsed()
    };
    let (mut bound, mut renew, mut base) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        stop.check();
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
        let started = Instant::now();
        run(&mut w.inst.command("true"));
        base.push(started.elapsed());
    }
    let requests = w.imds_log().lines().count();
    let (bound, renew, base) = (Summary::of(&bound), Summary::of(&renew), Summary::of(&base));
    println!("dhclient hook, {ROUNDS} rounds, IMDS emulator in the VPC namespace (token cached):");
    for (name, s, note) in [
        ("BOUND, rules installed at exit ", &bound, ""),
        ("RENEW, nothing changed        ", &renew, ""),
        ("ip netns exec ... true        ", &base, " (included above)"),
    ] {
        println!(
            "  {name}: median {:6.2} ms   p90 {:6.2} ms{note}",
            s.median_ms, s.p90_ms
        );
    }
    println!("  IMDS requests in all: {requests}");
    json!({
        "rounds": ROUNDS,
        "bound": bound.json(),
        "renew": renew.json(),
        "netns_exec": base.json(),
        "imds_requests_total": requests,
    })
}

/// Adds NICs up to `REFRESH_NICS`, then times `leasehook refresh` with nothing
/// changed, `ROUNDS` times, counting its IMDS requests.
fn refresh_rounds(w: &World, stop: &Stop) -> Value {
    for n in 2..REFRESH_NICS {
        w.add_static_nic(n);
    }
    let nics = usize::from(REFRESH_NICS);
    assert!(
        wait_until(Duration::from_secs(10), || w.our_rules().len() == nics),
        "{:#?}",
        w.our_rules()
    );
    let lh = leasehook_bin().display().to_string();
    let (mut walls, mut counts) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        stop.check();
        let before = w.imds_log().lines().count();
        let mut cmd = w.inst.command(&lh);
        cmd.envs(w.hook_env().iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("LEASEHOOK_LOG_LEVEL", "warn")
            .args(["refresh", "-v"]);
        let started = Instant::now();
        let out = run(&mut cmd);
        walls.push(started.elapsed());
        counts.push(w.imds_log().lines().count() - before);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            text.matches(": 0 change(s)").count(),
            nics,
            "refresh changed something: {text}"
        );
    }
    let s = Summary::of(&walls);
    println!(
        "leasehook refresh, {nics} NICs, nothing changed: median {:6.2} ms   p90 {:6.2} ms, IMDS requests {}-{}",
        s.median_ms,
        s.p90_ms,
        counts.iter().min().unwrap_or(&0),
        counts.iter().max().unwrap_or(&0)
    );
    let mut v = s.json();
    v["nics"] = json!(nics);
    v["requests"] = bench::requests_json(&counts);
    v
}

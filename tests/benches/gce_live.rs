// SPDX-License-Identifier: Apache-2.0
//! Benchmark: GCE's metadata followed live (issue 35 item 2). In the GCE world
//! (both NICs bound by dhclient, `leasehook-emulator --cloud gce` on 169.254.169.254),
//! `leasehook watch` holds the NIC list's long poll; then:
//!
//! * **change → routed**: an alias range added to (then removed from) nic1's
//!   metadata through the emulator's control path, timed from just before the
//!   change until `ip rule` shows (no longer shows) its rule;
//! * **requests while idle**: the long polls the emulator sees over an idle
//!   window (`LEASEHOOK_BENCH_IDLE_S`, default 60 s), against what one run of
//!   the timer's `refresh` asks with no watcher (it runs every 60 s).
//!
//! Prints numbers (and a JSON line to `$LEASEHOOK_BENCH_JSON`, for
//! `bench/run`); asserts nothing about time. Needs root.
//!
//! Run: `cargo bench -p leasehook-tests --features netns --bench gce_live`
//! (`bench/run --only gcelive`).

#![allow(clippy::print_stdout, clippy::unwrap_used)]

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use leasehook_tests::bench::{self, Stop, Summary};
use leasehook_tests::gce_emulator::{LogEntry, long_polls, open_long_polls, read_log};
use leasehook_tests::netns::leasehook_bin;
use leasehook_tests::world::{CloudDhcp, MetadataService, World, WorldOptions, wait_until};
use serde_json::json;

const ROUNDS: usize = 20;
const NICS: &str = "/computeMetadata/v1/instance/network-interfaces";
const RULE: &str = "10001 from 10.98.1.32/28 lookup 10001 proto 176";

fn world() -> World {
    let opts = WorldOptions {
        tree: None,
        dhcp: CloudDhcp::Gce,
        metadata: Some(MetadataService {
            cloud: "gce".to_owned(),
            args: vec!["--bind".to_owned(), "169.254.169.254:80".to_owned()],
            addresses: Vec::new(),
        }),
        extra_hook_env: vec![("LEASEHOOK_PROVIDER".to_owned(), "gce".to_owned())],
        ..WorldOptions::default()
    };
    let mut w = World::with_option_121_hook("gcepoll-bench", &opts);
    w.bind_both_routed();
    w
}

fn gce_log(w: &World) -> Vec<LogEntry> {
    read_log(&w.dir.0.join("gce.log"))
}

fn plain_asks(w: &World) -> usize {
    gce_log(w)
        .iter()
        .filter(|e| e.path.starts_with(NICS) && !e.path.contains("wait_for_change"))
        .count()
}

fn leasehook(w: &World, args: &[&str]) -> std::process::Command {
    let mut cmd = w.inst.command(leasehook_bin().to_str().unwrap());
    cmd.envs(w.hook_env().iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("LEASEHOOK_LOG_LEVEL", "info")
        .args(args);
    cmd
}

fn set_aliases(w: &World, aliases: &serde_json::Value) {
    w.gce_set("instance/network-interfaces/1/ip-aliases", aliases);
}

fn stop_watch(mut watch: Child) {
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &watch.id().to_string()])
        .status();
    let _ = watch.wait();
}

fn main() {
    let stop = Stop::install();
    let idle_s: u64 = std::env::var("LEASEHOOK_BENCH_IDLE_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let w = world();
    let watch = leasehook(&w, &["watch"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(20), || open_long_polls(&gce_log(&w))
            == 1),
        "no long poll held: {:#?}",
        gce_log(&w)
    );
    let (mut added, mut removed) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        stop.check();
        for (aliases, present, into) in [
            (json!(["10.98.1.21/32", "10.98.1.32/28"]), true, &mut added),
            (json!(["10.98.1.21/32"]), false, &mut removed),
        ] {
            let t = Instant::now();
            set_aliases(&w, &aliases);
            let done = wait_until(Duration::from_secs(30), || {
                w.our_rules().iter().any(|r| r == RULE) == present
            });
            assert!(done, "{:#?}", w.our_rules());
            into.push(t.elapsed());
        }
    }
    // Idle: the long poll's requests, then the timer's (one refresh, no watcher).
    assert!(wait_until(Duration::from_secs(10), || open_long_polls(
        &gce_log(&w)
    ) == 1));
    let before = long_polls(&gce_log(&w));
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(idle_s) {
        stop.check();
        std::thread::sleep(Duration::from_millis(200));
    }
    let idle_polls = long_polls(&gce_log(&w)) - before;
    let open = open_long_polls(&gce_log(&w));
    stop_watch(watch);
    let asked = plain_asks(&w);
    let out = leasehook(&w, &["refresh"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let timer = plain_asks(&w) - asked;
    let per_minute = |n: usize| {
        f64::from(u32::try_from(n).unwrap_or(u32::MAX)) * 60.0
            / f64::from(u32::try_from(idle_s).unwrap_or(u32::MAX))
    };
    let (a, r) = (Summary::of(&added), Summary::of(&removed));
    println!(
        "leasehook gce-live added->routed median={:.1} ms p90={:.1} max={:.1} (n={}); \
         removed->unrouted median={:.1} ms p90={:.1} ms",
        a.median_ms, a.p90_ms, a.max_ms, a.n, r.median_ms, r.p90_ms
    );
    println!(
        "leasehook gce-live idle {idle_s} s: {idle_polls} new long poll(s), {open} open; \
         one timer refresh (no watcher) asks {timer}"
    );
    bench::emit(
        "gcelive",
        json!({
            "added": a.json(),
            "removed": r.json(),
            "idle_s": idle_s,
            "idle_long_polls": idle_polls,
            "idle_long_polls_per_min": per_minute(idle_polls),
            "open_long_polls": open,
            "timer_requests_per_run": timer,
            "timer_requests_per_min": timer,
        }),
    );
}

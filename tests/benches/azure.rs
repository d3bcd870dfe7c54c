// SPDX-License-Identifier: Apache-2.0
//! Benchmark: one secondary-NIC DHCPv4 event against the Azure IMDS emulator on
//! loopback — requests made and wall time — each with a new client and a new root
//! (as a new hook process on a machine whose last IMDS request is long past: no
//! pacing pause). The emulator's 5-requests-a-second limit is off so the events
//! can follow each other; leasehook's own pacing is what keeps a real VM under it.
//! Prints numbers (and a JSON line to `$LEASEHOOK_BENCH_JSON`, for `bench/run`);
//! asserts nothing about time.
//!
//! Run: `cargo bench -p leasehook-tests --bench azure`.

#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

use std::time::{Duration, Instant};

use leasehook_core::source::azure::AzureProvider;
use leasehook_core::source::provider::{NicEvent, Provider};
use leasehook_core::source::provider::{Outcome, SystemClock, WaitPolicy};
use leasehook_tests::azure_emulator::{Config, Emulator, world_instance};
use leasehook_tests::bench::{self, Stop};
use leasehook_tests::world::MAC1;
use serde_json::json;

const ROUNDS: usize = 200;

fn event() -> NicEvent {
    bench::bound_event("eth1", MAC1, "10.98.1.20", 24, "10.98.1.1")
}

fn main() {
    let mut cfg = Config::new(world_instance());
    cfg.rate_limit = None;
    let emu = Emulator::start("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let stop = Stop::install();
    let ev = event();
    let parent = ["/dev/shm", "/tmp"]
        .iter()
        .find(|p| std::path::Path::new(p).is_dir())
        .copied()
        .unwrap_or("/tmp");
    let (mut walls, mut counts): (Vec<Duration>, Vec<usize>) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        stop.check();
        let root = tempfile::tempdir_in(parent).unwrap();
        let before = emu.log().len();
        let started = Instant::now();
        let p = AzureProvider::try_new(root.path(), Some(&emu.base_url())).unwrap();
        let out = p.wait_for_nic(&ev, &WaitPolicy::default(), &SystemClock);
        walls.push(started.elapsed());
        assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
        counts.push(emu.log().len() - before);
    }
    let v = bench::report_requests("azure", "event", &walls, &counts);
    bench::emit("azure", json!({ "event": v }));
}

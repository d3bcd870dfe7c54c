// SPDX-License-Identifier: Apache-2.0
//! Benchmark: one secondary-NIC DHCPv4 event on Google Compute Engine against the
//! GCE metadata emulator on loopback (in-process): requests made and wall time of
//! the provider's consistency wait, with a new client per event (as each hook
//! process has), and of the boot stage's datasource fetch. Prints numbers (and a
//! JSON line to `$LEASEHOOK_BENCH_JSON`, for `bench/run`); asserts nothing about
//! time.
//!
//! Run: `cargo bench -p leasehook-tests --bench gce` (`bench/run --only gce`).

#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

use std::time::{Duration, Instant};

use leasehook_core::source::gce::GceProvider;
use leasehook_core::source::provider::{
    Identity as _, NicEvent, Outcome, Provider, SystemClock, WaitPolicy,
};
use leasehook_tests::bench::{self, Stop};
use leasehook_tests::gce_emulator::{Config, GceEmulator, world_tree};
use leasehook_tests::world::MAC1;
use serde_json::json;

const ROUNDS: usize = 200;

fn event() -> NicEvent {
    bench::bound_event("eth1", MAC1, "10.98.1.20", 32, "10.98.1.1")
}

fn report(name: &str, walls: &[Duration], requests: &[usize]) -> serde_json::Value {
    bench::report_requests("gce", name, walls, requests)
}

fn main() {
    let emu =
        GceEmulator::start("127.0.0.1:0".parse().unwrap(), Config::new(world_tree())).unwrap();
    let url = emu.base_url();
    let stop = Stop::install();
    let ev = event();
    let (mut walls, mut reqs) = (Vec::new(), Vec::new());
    let (mut ds_walls, mut ds_reqs) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        stop.check();
        let before = emu.log().len();
        let t = Instant::now();
        let out = GceProvider::try_new(Some(&url)).unwrap().wait_for_nic(
            &ev,
            &WaitPolicy::default(),
            &SystemClock,
        );
        walls.push(t.elapsed());
        assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
        reqs.push(emu.log().len() - before);

        let before = emu.log().len();
        let t = Instant::now();
        let data = GceProvider::try_new(Some(&url))
            .unwrap()
            .datasource(WaitPolicy::default())
            .unwrap()
            .fetch()
            .unwrap();
        ds_walls.push(t.elapsed());
        assert_eq!(data.cloud_name, "gce");
        ds_reqs.push(emu.log().len() - before);
    }
    println!("leasehook gce emulator {url}");
    bench::emit(
        "gce",
        json!({
            "event": report("event", &walls, &reqs),
            "datasource": report("datasource", &ds_walls, &ds_reqs),
        }),
    );
}

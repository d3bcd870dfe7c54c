// SPDX-License-Identifier: Apache-2.0
//! Benchmark: one secondary-NIC DHCPv4 event on Google Compute Engine against the
//! GCE metadata emulator on loopback (in-process): requests made and wall time of
//! the provider's consistency wait, with a new client per event (as each hook
//! process has), and of the boot stage's datasource fetch. Prints numbers (and a
//! JSON line to `$LEASEHOOK_BENCH_JSON`, for `bench/run`); asserts nothing about
//! time.
//!
//! Run: `cargo bench -p leasehook-tests --bench gce` (`bench/run --only gce`).

#![allow(clippy::print_stdout, clippy::unwrap_used)]

use leasehook_core::source::gce::GceProvider;
use leasehook_tests::bench::{self, ROUNDS, Stop};
use leasehook_tests::gce_emulator::{Config, GceEmulator, world_tree};
use leasehook_tests::world::MAC1;
use serde_json::json;

fn main() {
    let emu =
        GceEmulator::start("127.0.0.1:0".parse().unwrap(), Config::new(world_tree())).unwrap();
    let url = emu.base_url();
    let stop = Stop::install();
    let ev = bench::bound_event("eth1", MAC1, "10.98.1.20", 32, "10.98.1.1");
    let provider = || GceProvider::try_new(Some(&url)).unwrap();
    let asked = || emu.log().len();
    let event = bench::measure(("gce", "event"), &stop, ROUNDS, asked, || {
        bench::assert_complete(&provider(), &ev);
    });
    let datasource = bench::measure(("gce", "datasource"), &stop, ROUNDS, asked, || {
        bench::assert_fetches(&provider(), "gce");
    });
    println!("leasehook gce emulator {url}");
    bench::emit("gce", json!({ "event": event, "datasource": datasource }));
}

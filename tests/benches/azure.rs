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

#![allow(clippy::print_stdout, clippy::unwrap_used)]

use leasehook_core::source::azure::AzureProvider;
use leasehook_tests::azure_emulator::{Config, Emulator, world_instance};
use leasehook_tests::bench::{self, ROUNDS, Stop};
use leasehook_tests::world::MAC1;
use serde_json::json;

fn main() {
    // No rate limit: the benchmark measures one event at a time from fresh
    // clients, faster than IMDS's 5 a second.
    let cfg = Config::new(world_instance());
    let emu = Emulator::start("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let stop = Stop::install();
    let ev = bench::bound_event("eth1", MAC1, "10.98.1.20", 24, "10.98.1.1");
    // A new root for each event, made before (and removed after) the timing.
    let parent = bench::tmpfs_dir();
    let roots: Vec<_> = (0..ROUNDS)
        .map(|_| tempfile::tempdir_in(&parent).unwrap())
        .collect();
    let mut roots = roots.iter();
    let event = bench::measure(
        ("azure", "event"),
        &stop,
        ROUNDS,
        || emu.log().len(),
        || {
            let root = roots.next().unwrap();
            let p = AzureProvider::try_new(root.path(), Some(&emu.base_url())).unwrap();
            bench::assert_complete(&p, &ev);
        },
    );
    bench::emit("azure", json!({ "event": event }));
}

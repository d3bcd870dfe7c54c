// SPDX-License-Identifier: Apache-2.0
//! Benchmark: one secondary-NIC DHCPv4 event against the Alibaba Cloud ECS
//! metadata emulator on loopback (hardened mode: tokens required) — requests made
//! and wall time — cold (no cached token: the first hook process) and warm (a new
//! client reading the token cache: the next hook process), with the cache root
//! under `/dev/shm` (tmpfs, as `/run` is on a real host). Prints numbers and a
//! JSON line to `$LEASEHOOK_BENCH_JSON` (for `bench/run --only aliyun`); asserts
//! nothing about time.
//!
//! Run: `cargo bench -p leasehook-tests --bench aliyun`.

#![allow(clippy::print_stdout, clippy::unwrap_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use leasehook_core::source::aliyun::{Aliyun, ECS_WAIT};
use leasehook_core::source::provider::{NicEvent, Outcome, SystemClock, WaitPolicy};
use leasehook_tests::aliyun_emulator::{start_loopback, world_tree};
use leasehook_tests::bench::{self, ROUNDS, Stop};
use leasehook_tests::emulator::Emulator;
use leasehook_tests::world::MAC1;
use serde_json::json;

/// One event with a new client (as a new hook process has): wall time and requests.
fn one_event(emu: &Emulator, root: &std::path::Path, ev: &NicEvent) -> (Duration, usize) {
    let before = emu.log().len();
    let started = Instant::now();
    let client = Aliyun::try_new(root)
        .unwrap()
        .with_endpoint(&emu.base_url())
        .unwrap();
    let out = ECS_WAIT.wait(&client, ev, &WaitPolicy::default(), &SystemClock);
    let took = started.elapsed();
    assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
    (took, emu.log().len() - before)
}

fn report(name: &str, walls: &[Duration], requests: &[usize]) -> serde_json::Value {
    bench::report_requests("aliyun", name, walls, requests)
}

fn main() {
    let emu = start_loopback("127.0.0.1:0".parse().unwrap(), world_tree(), true).unwrap();
    let parent: PathBuf = std::env::var_os("LEASEHOOK_BENCH_ROOT_DIR")
        .map_or_else(|| PathBuf::from("/dev/shm"), PathBuf::from);
    let parent = if parent.is_dir() {
        parent
    } else {
        std::env::temp_dir()
    };
    let stop = Stop::install();
    let ev = bench::bound_event("eth1", MAC1, "10.98.1.20", 24, "10.98.1.253");
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    let (mut cold_req, mut warm_req) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        stop.check();
        let root = tempfile::tempdir_in(&parent).unwrap();
        let (t, n) = one_event(&emu, root.path(), &ev);
        cold.push(t);
        cold_req.push(n);
        let (t, n) = one_event(&emu, root.path(), &ev);
        warm.push(t);
        warm_req.push(n);
    }
    bench::emit(
        "aliyun",
        json!({
            "root_dir": parent,
            "cold": report("cold", &cold, &cold_req),
            "warm": report("warm", &warm, &warm_req),
        }),
    );
}

// SPDX-License-Identifier: Apache-2.0
//! Benchmark: Oracle Cloud's two questions of a two-VNIC instance against the OCI
//! IMDSv2 emulator on loopback — requests made and wall time — each with a new
//! provider (as a new process): the primary VNIC's DHCPv4 event
//! (`wait_for_nic`), and what one `leasehook refresh` asks for the secondary VNIC
//! that has no DHCP (`Provider::unleased`: the VNIC list, and the leases DHCP
//! would have given). The kernel side of the refresh (netlink, the plan) is the
//! hook benchmark's. Prints numbers (and a JSON line to `$LEASEHOOK_BENCH_JSON`,
//! for `bench/run`); asserts nothing about time.
//!
//! Run: `cargo bench -p leasehook-tests --bench oracle`.

#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

use std::time::{Duration, Instant};

use leasehook_core::source::oracle::OracleProvider;
use leasehook_core::source::provider::{NicEvent, Outcome, Provider, SystemClock, WaitPolicy};
use leasehook_tests::bench::{self, Stop};
use leasehook_tests::oracle_emulator::{Config, Emulator};
use leasehook_tests::world::MAC0;
use serde_json::json;

const ROUNDS: usize = 200;

fn primary_event() -> NicEvent {
    bench::bound_event("eth0", MAC0, "10.98.0.10", 24, "10.98.0.1")
}

fn summary(name: &str, walls: &[Duration], counts: &[usize]) -> serde_json::Value {
    bench::report_requests("oracle", name, walls, counts)
}

fn main() {
    let emu = Emulator::start("127.0.0.1:0".parse().unwrap(), Config::new()).unwrap();
    let url = emu.base_url();
    let stop = Stop::install();
    let ev = primary_event();
    let (mut walls, mut counts) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        stop.check();
        let before = emu.log().len();
        let started = Instant::now();
        let p = OracleProvider::try_new(Some(&url)).unwrap();
        let out = p.wait_for_nic(&ev, &WaitPolicy::default(), &SystemClock);
        walls.push(started.elapsed());
        assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
        counts.push(emu.log().len() - before);
    }
    let event = summary("event", &walls, &counts);
    let (mut walls, mut counts) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        stop.check();
        let before = emu.log().len();
        let started = Instant::now();
        let p = OracleProvider::try_new(Some(&url)).unwrap();
        let u = p
            .unleased(&WaitPolicy::default(), &SystemClock)
            .unwrap()
            .unwrap();
        walls.push(started.elapsed());
        assert_eq!(u.nics.len(), 1);
        counts.push(emu.log().len() - before);
    }
    let refresh = summary("refresh", &walls, &counts);
    bench::emit("oracle", json!({ "event": event, "refresh": refresh }));
}

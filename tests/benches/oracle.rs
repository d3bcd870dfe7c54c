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

use std::net::IpAddr;
use std::time::{Duration, Instant};

use leasehook_core::model::{Family, IfName, Lease, Reason};
use leasehook_core::source::oracle::OracleProvider;
use leasehook_core::source::provider::{NicEvent, Outcome, Provider, SystemClock, WaitPolicy};
use leasehook_tests::bench::{self, Stop, Summary};
use leasehook_tests::oracle_emulator::{Config, Emulator};
use leasehook_tests::world::MAC0;
use serde_json::json;

const ROUNDS: usize = 200;

fn primary_event() -> NicEvent {
    let address: IpAddr = "10.98.0.10".parse().unwrap();
    NicEvent::try_new(
        IfName::try_new("eth0").unwrap(),
        MAC0.parse().unwrap(),
        vec![Lease {
            family: Family::V4,
            address,
            prefix_len: 24,
            routers: vec!["10.98.0.1".parse().unwrap()],
            reason: Reason::Bound,
        }],
    )
    .unwrap()
}

fn summary(name: &str, walls: &[Duration], counts: &[usize]) -> serde_json::Value {
    let s = Summary::of(walls);
    let (lo, hi) = (
        counts.iter().min().copied().unwrap_or(0),
        counts.iter().max().copied().unwrap_or(0),
    );
    println!(
        "leasehook oracle {name} requests={lo}-{hi} wall_ms median={:.3} p90={:.3} max={:.3} (n={})",
        s.median_ms, s.p90_ms, s.max_ms, s.n
    );
    let mut v = s.json();
    v["requests"] = bench::requests_json(counts);
    v
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

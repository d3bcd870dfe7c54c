// SPDX-License-Identifier: Apache-2.0
//! Benchmark: one secondary-NIC DHCPv4 event against the IMDS emulator on
//! loopback — requests made and wall time — cold (no cached token: the first hook
//! process) and warm (a new client reading the token cache: the next hook process).
//! The cache root is under `/dev/shm` (tmpfs, as `/run` is on a real host), then
//! under `/tmp` (the VM's disk: the price of the cache write's fsyncs), or only
//! under `LEASEHOOK_BENCH_ROOT_DIR` when that names a folder.
//! Prints numbers (and a JSON line to `$LEASEHOOK_BENCH_JSON`, for `bench/run`);
//! asserts nothing about time.
//!
//! Run: `cargo bench -p leasehook-tests --bench imds`, which starts the emulator
//! in-process, or through `scripts/bench-imds.sh`, which points it at the
//! `leasehook-emulator --cloud ec2` (`LEASEHOOK_BENCH_IMDS_URL`, `LEASEHOOK_BENCH_IMDS_LOG`)
//! and runs cloud-init's crawl against the same emulator for comparison.

#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::cast_precision_loss
)]

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use leasehook_core::model::{Family, IfName, Lease, Reason};
use leasehook_core::source::ec2::{Ec2, NicEvent, Outcome, WaitPolicy};
use leasehook_tests::bench::{self, Stop, Summary};
use leasehook_tests::emulator::{Config, Emulator, SAMPLE_SECONDARY, sample_tree};
use serde_json::json;

const ROUNDS: usize = 200;

/// Where requests are counted: the in-process emulator, or the binary's log file.
enum Target {
    InProcess(Emulator),
    External { url: String, log: PathBuf },
}

impl Target {
    fn url(&self) -> String {
        match self {
            Self::InProcess(e) => e.base_url(),
            Self::External { url, .. } => url.clone(),
        }
    }

    fn requests(&self) -> usize {
        match self {
            Self::InProcess(e) => e.log().len(),
            Self::External { log, .. } => {
                std::fs::read_to_string(log).map_or(0, |s| s.lines().count())
            }
        }
    }
}

fn event() -> NicEvent {
    let address: IpAddr = "10.20.1.20".parse().unwrap();
    NicEvent::try_new(
        IfName::try_new("eth1").unwrap(),
        SAMPLE_SECONDARY.parse().unwrap(),
        vec![Lease {
            family: Family::V4,
            address,
            prefix_len: 24,
            routers: vec!["10.20.1.1".parse().unwrap()],
            reason: Reason::Bound,
        }],
    )
    .unwrap()
}

/// One event with a new client (as a new hook process has): wall time and requests.
fn one_event(target: &Target, root: &std::path::Path, ev: &NicEvent) -> (Duration, usize) {
    let before = target.requests();
    let started = Instant::now();
    let ec2 = Ec2::try_new(root)
        .unwrap()
        .with_endpoints([target.url()])
        .unwrap();
    let out = ec2.wait_for_nic(ev, &WaitPolicy::default());
    let took = started.elapsed();
    assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
    (took, target.requests() - before)
}

fn report(name: &str, walls: &[Duration], requests: &[usize]) -> serde_json::Value {
    let (lo, hi) = (
        requests.iter().min().copied().unwrap_or(0),
        requests.iter().max().copied().unwrap_or(0),
    );
    let reqs = if lo == hi {
        lo.to_string()
    } else {
        format!("{lo}-{hi}")
    };
    let s = Summary::of(walls);
    println!(
        "leasehook {name:<5} requests={reqs:<3} wall_ms median={:.3} p90={:.3} max={:.3} (n={})",
        s.median_ms, s.p90_ms, s.max_ms, s.n
    );
    let mut v = s.json();
    v["requests"] = bench::requests_json(requests);
    v
}

fn main() {
    let target = if let (Ok(url), Ok(log)) = (
        std::env::var("LEASEHOOK_BENCH_IMDS_URL"),
        std::env::var("LEASEHOOK_BENCH_IMDS_LOG"),
    ) {
        Target::External {
            url,
            log: log.into(),
        }
    } else {
        let mut cfg = Config::new(sample_tree());
        cfg.world.require_token = true;
        Target::InProcess(Emulator::start("127.0.0.1:0".parse().unwrap(), cfg).unwrap())
    };
    // The token cache lives in /run, a tmpfs on real hosts: bench on a tmpfs
    // (/dev/shm), then on the disk (/tmp), unless told where.
    let parents: Vec<PathBuf> = match std::env::var_os("LEASEHOOK_BENCH_ROOT_DIR") {
        Some(p) => vec![p.into()],
        None => ["/dev/shm", "/tmp"]
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.is_dir())
            .collect(),
    };
    let stop = Stop::install();
    let ev = event();
    let mut runs = Vec::new();
    for parent in &parents {
        println!(
            "leasehook token cache under {parent:?}, emulator {}",
            target.url()
        );
        let (mut cold, mut warm) = (Vec::new(), Vec::new());
        let (mut cold_req, mut warm_req) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            stop.check();
            let root = tempfile::tempdir_in(parent).unwrap();
            let (t, n) = one_event(&target, root.path(), &ev);
            cold.push(t);
            cold_req.push(n);
            let (t, n) = one_event(&target, root.path(), &ev);
            warm.push(t);
            warm_req.push(n);
        }
        runs.push(json!({
            "root_dir": parent,
            "cold": report("cold", &cold, &cold_req),
            "warm": report("warm", &warm, &warm_req),
        }));
    }
    bench::emit("imds", json!({ "runs": runs }));
}

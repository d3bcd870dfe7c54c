// SPDX-License-Identifier: Apache-2.0
//! Benchmark: one secondary-NIC DHCPv4 event against the IMDS emulator on
//! loopback — requests made and wall time — cold (no cached token: the first hook
//! process) and warm (a new client reading the token cache: the next hook process).
//! The cache root is under `/dev/shm` (tmpfs, as `/run` is on a real host) unless
//! `LEASEHOOK_BENCH_ROOT_DIR` names another folder.
//! Prints numbers; asserts nothing about time.
//!
//! Run: `cargo bench -p leasehook-tests --bench imds`, which starts the emulator
//! in-process, or through `scripts/bench-imds.sh`, which points it at the
//! `imds-emulator` binary (`LEASEHOOK_BENCH_IMDS_URL`, `LEASEHOOK_BENCH_IMDS_LOG`)
//! and runs cloud-init's crawl against the same emulator for comparison.

#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::cast_precision_loss
)]

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use leasehook_core::model::{Family, IfName, Lease, Reason};
use leasehook_core::source::ec2::{Ec2, NicEvent, Outcome, WaitPolicy};
use leasehook_tests::emulator::{Config, Emulator, SAMPLE_SECONDARY, sample_tree};

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

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() - 1) * p / 100]
}

fn report(name: &str, mut walls: Vec<Duration>, requests: &[usize]) {
    walls.sort();
    let (lo, hi) = (
        requests.iter().min().copied().unwrap_or(0),
        requests.iter().max().copied().unwrap_or(0),
    );
    let reqs = if lo == hi {
        lo.to_string()
    } else {
        format!("{lo}-{hi}")
    };
    println!(
        "leasehook {name:<5} requests={reqs:<3} wall_ms median={:.3} p90={:.3} max={:.3} (n={})",
        percentile(&walls, 50).as_secs_f64() * 1e3,
        percentile(&walls, 90).as_secs_f64() * 1e3,
        walls.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
        walls.len()
    );
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
        cfg.require_token = true;
        Target::InProcess(Emulator::start("127.0.0.1:0".parse().unwrap(), cfg).unwrap())
    };
    // The token cache lives in /run, a tmpfs on real hosts: bench on a tmpfs too
    // (/dev/shm) unless told otherwise, so fsync costs what it costs there.
    let parent = std::env::var_os("LEASEHOOK_BENCH_ROOT_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            let shm = PathBuf::from("/dev/shm");
            shm.is_dir().then_some(shm)
        })
        .unwrap_or_else(std::env::temp_dir);
    println!(
        "leasehook token cache under {parent:?}, emulator {}",
        target.url()
    );
    let ev = event();
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    let (mut cold_req, mut warm_req) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let root = tempfile::tempdir_in(&parent).unwrap();
        let (t, n) = one_event(&target, root.path(), &ev);
        cold.push(t);
        cold_req.push(n);
        let (t, n) = one_event(&target, root.path(), &ev);
        warm.push(t);
        warm_req.push(n);
    }
    report("cold", cold, &cold_req);
    report("warm", warm, &warm_req);
}

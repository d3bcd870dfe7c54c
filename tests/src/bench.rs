// SPDX-License-Identifier: Apache-2.0
//! Shared by the benchmark programs (`tests/benches/`): percentiles, the
//! machine-readable result line each benchmark appends for `bench/run`, and
//! a clean stop on Ctrl-C.
//!
//! Performs IO: [`emit`] appends to the file `$LEASEHOOK_BENCH_JSON` names;
//! [`Stop`] installs signal handlers.

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use leasehook_core::model::{Family, IfName, Lease, Reason};
use leasehook_core::source::provider::{
    Identity, NicEvent, Outcome, Provider, SystemClock, WaitPolicy,
};
use serde_json::{Value, json};

/// The environment variable naming the file the benchmarks append their JSON
/// lines to (one object per benchmark program, `{"bench": NAME, ...}`).
pub const JSON_ENV: &str = "LEASEHOOK_BENCH_JSON";

/// The `p`th percentile (0–100) of sorted samples: the sample at index
/// `(n - 1) · p / 100`, so the median of an odd count is its middle sample.
pub fn percentile<T: Copy + Default>(sorted: &[T], p: usize) -> T {
    sorted
        .get(sorted.len().saturating_sub(1) * p / 100)
        .copied()
        .unwrap_or_default()
}

/// Median, 90th percentile and maximum of wall times, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// How many samples.
    pub n: usize,
    /// The median, in ms.
    pub median_ms: f64,
    /// The 90th percentile, in ms.
    pub p90_ms: f64,
    /// The slowest sample, in ms.
    pub max_ms: f64,
}

impl Summary {
    /// Summarises durations (in any order).
    pub fn of(samples: &[Duration]) -> Self {
        Self::of_ms(
            &samples
                .iter()
                .map(|d| d.as_secs_f64() * 1e3)
                .collect::<Vec<_>>(),
        )
    }

    /// Summarises milliseconds (in any order).
    pub fn of_ms(samples: &[f64]) -> Self {
        let mut v = samples.to_vec();
        v.sort_by(f64::total_cmp);
        Self {
            n: v.len(),
            median_ms: percentile(&v, 50),
            p90_ms: percentile(&v, 90),
            max_ms: v.last().copied().unwrap_or_default(),
        }
    }

    /// `{"n", "median_ms", "p90_ms", "max_ms"}`.
    pub fn json(&self) -> Value {
        json!({"n": self.n, "median_ms": self.median_ms, "p90_ms": self.p90_ms, "max_ms": self.max_ms})
    }
}

/// The request counts of a run of events as JSON: `{"min", "max"}`.
pub fn requests_json(counts: &[usize]) -> Value {
    json!({
        "min": counts.iter().min().copied().unwrap_or(0),
        "max": counts.iter().max().copied().unwrap_or(0),
    })
}

/// Appends `{"bench": name, ...fields}` as one line to `$LEASEHOOK_BENCH_JSON`
/// when it is set (what `bench/run` collects); does nothing otherwise. Panics
/// when the file cannot be written: a benchmark run whose results are lost
/// must not look successful.
pub fn emit(name: &str, fields: Value) {
    let Some(path) = std::env::var_os(JSON_ENV) else {
        return;
    };
    let mut line = json!({ "bench": name });
    if let (Some(obj), Value::Object(extra)) = (line.as_object_mut(), fields) {
        obj.extend(extra);
    }
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| writeln!(f, "{line}"));
    if let Err(e) = written {
        panic!("failed to append the results to {path:?}: {e}");
    }
}

/// SIGINT and SIGTERM set a flag instead of ending the process, so that a
/// benchmark stops between rounds and its namespaces, emulators and temporary
/// folders are dropped (removed) on the way out.
#[derive(Debug, Clone)]
pub struct Stop(Arc<AtomicBool>);

impl Stop {
    /// Installs the handlers.
    pub fn install() -> Self {
        let flag = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            if let Err(e) = signal_hook::flag::register(sig, Arc::clone(&flag)) {
                panic!("failed to install a handler for signal {sig}: {e}");
            }
        }
        Self(flag)
    }

    /// Whether a stop was asked for.
    pub fn requested(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Unwinds (dropping, so cleaning up, everything on the stack) when a stop
    /// was asked for; call it between rounds.
    pub fn check(&self) {
        assert!(!self.requested(), "interrupted: stopping and cleaning up");
    }
}

/// A DHCPv4 `BOUND` event on `ifname` (`mac`) for `address`/`prefix_len`
/// behind `router`: what the cloud benchmarks hand their provider.
pub fn bound_event(
    ifname: &str,
    mac: &str,
    address: &str,
    prefix_len: u8,
    router: &str,
) -> NicEvent {
    let parse = |what: &str, v: &str| -> std::net::IpAddr {
        v.parse()
            .unwrap_or_else(|e| panic!("bound_event {what} {v:?}: {e}"))
    };
    let ifname = IfName::try_new(ifname).unwrap_or_else(|e| panic!("bound_event {ifname:?}: {e}"));
    let mac = mac
        .parse()
        .unwrap_or_else(|e| panic!("bound_event {mac:?}: {e:?}"));
    let lease = Lease {
        family: Family::V4,
        address: parse("address", address),
        prefix_len,
        routers: vec![parse("router", router)],
        reason: Reason::Bound,
    };
    NicEvent::try_new(ifname, mac, vec![lease]).unwrap_or_else(|e| panic!("bound_event: {e}"))
}

/// The rounds a cloud benchmark times each of its measurements.
pub const ROUNDS: usize = 200;

/// Runs `one` `rounds` times (a [`Stop`] asked for ends it between rounds) and
/// reports it as `cloud`'s measurement `name` ([`report_requests`]): the wall
/// time of each run and the requests it made (`asked`, the emulator's log
/// length, before and after it).
pub fn measure(
    (cloud, name): (&str, &str),
    stop: &Stop,
    rounds: usize,
    asked: impl Fn() -> usize,
    mut one: impl FnMut(),
) -> Value {
    let (mut walls, mut requests) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for _ in 0..rounds {
        stop.check();
        let before = asked();
        let started = Instant::now();
        one();
        walls.push(started.elapsed());
        requests.push(asked().saturating_sub(before));
    }
    report_requests(cloud, name, &walls, &requests)
}

/// `provider`'s wait for `ev` under the default policy, asserted complete (a
/// benchmark times only events that end as a hook's would on a healthy cloud).
pub fn assert_complete(provider: &dyn Provider, ev: &NicEvent) {
    let out = provider.wait_for_nic(ev, &WaitPolicy::default(), &SystemClock);
    assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
}

/// `provider`'s boot-stage datasource fetched under the default policy,
/// asserted to name `cloud_name`.
pub fn assert_fetches(provider: &dyn Identity, cloud_name: &str) {
    let data = provider
        .datasource(WaitPolicy::default())
        .and_then(|d| d.fetch())
        .unwrap_or_else(|e| panic!("{cloud_name} datasource: {e}"));
    assert_eq!(data.cloud_name, cloud_name);
}

/// Where a benchmark keeps its throwaway roots: `/dev/shm` (tmpfs, as `/run`
/// is on a real host) when there is one, else the temporary folder.
pub fn tmpfs_dir() -> std::path::PathBuf {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_owned()
    } else {
        std::env::temp_dir()
    }
}

/// Prints one result line (`leasehook CLOUD NAME requests=LO-HI wall_ms ...`)
/// and returns its JSON: the wall-time summary and the requests each event
/// made.
pub fn report_requests(cloud: &str, name: &str, walls: &[Duration], requests: &[usize]) -> Value {
    let s = Summary::of(walls);
    let (lo, hi) = (
        requests.iter().min().copied().unwrap_or(0),
        requests.iter().max().copied().unwrap_or(0),
    );
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "leasehook {cloud} {name:<10} requests={lo}-{hi} wall_ms median={:.3} p90={:.3} max={:.3} (n={})",
        s.median_ms, s.p90_ms, s.max_ms, s.n
    );
    let mut v = s.json();
    v["requests"] = requests_json(requests);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_odd_and_even_counts() {
        let v: Vec<f64> = (1..=31).map(f64::from).collect();
        let s = Summary::of_ms(&v);
        assert_eq!(
            (s.n, s.median_ms, s.p90_ms, s.max_ms),
            (31, 16.0, 28.0, 31.0)
        );
        assert_eq!(percentile::<u32>(&[], 50), 0);
        assert_eq!(percentile(&[1, 2, 3, 4], 50), 2);
    }

    #[test]
    fn requests_min_max() {
        assert_eq!(requests_json(&[7, 6, 7]), json!({"min": 6, "max": 7}));
    }
}

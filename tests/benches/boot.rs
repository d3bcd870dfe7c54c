// SPDX-License-Identifier: Apache-2.0
//! Benchmark: the boot stages — `leasehook init --local` then `leasehook init`, two
//! processes, wall time of each and of both — against the IMDS emulator on
//! loopback and the devlxd emulator on a unix socket, side by side with cloud-init
//! 25.1.4's own EC2 datasource `get_data()` against the same IMDS emulator.
//! Prints medians and 90th percentiles; asserts nothing about time.
//!
//! Scenarios (each round a boot: `<root>/run` emptied, `<root>/var/lib` kept unless
//! said):
//!
//! * `ec2-first`: no cache; the network stage fetches (token, 17 keys), caches and
//!   writes instance-data;
//! * `ec2-reboot`: the cache is confirmed with one request (and the token);
//! * `ec2-imds-off`: the token is refused (403): the cache stands in;
//! * `lxd-first`: no cache; the local stage fetches over the socket, the network
//!   stage trusts it;
//! * `lxd-reboot`: the local stage confirms the cache (meta-data, user.meta-data).
//!
//! Roots live under `/tmp` (the VM's ext4 disk, like `/var/lib`) and `/dev/shm`
//! (tmpfs, like `/run`), or `LEASEHOOK_BENCH_ROOT_DIR`.
//!
//! Run: `scripts/bench-boot.sh` (builds the release binary, fetches the oracle),
//! or `cargo bench -p leasehook-tests --bench boot` with `LEASEHOOK_BIN` naming a
//! `leasehook` binary and `LEASEHOOK_BENCH_CLOUD_INIT` the oracle's
//! `dist-packages` folder (without it cloud-init is not run). With
//! `LEASEHOOK_BENCH_JSON` set, the numbers are also appended to that file as one
//! JSON line (for `bench/run`).

#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::cast_precision_loss
)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use leasehook_tests::bench::{self, Stop, Summary};
use leasehook_tests::devlxd::{self, Devlxd, SAMPLE_META_DATA};
use leasehook_tests::emulator::{self, Emulator, Scenario, sample_tree};
use leasehook_tests::netns::leasehook_bin;
use leasehook_tests::workspace_root;
use serde_json::{Value, json};

const ROUNDS: usize = 60;
const CLOUD_INIT_ROUNDS: usize = 20;
const CLOUD_INIT_PROCESSES: usize = 5;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn stats(s: &Summary) -> String {
    format!("median {:6.2} p90 {:6.2}", s.median_ms, s.p90_ms)
}

/// One stage as a process; panics unless it exits with `want`.
fn stage(bin: &Path, root: &Path, local: bool, virt: &str, want: i32) -> Duration {
    let mut c = Command::new(bin);
    c.args(["init", "--root", root.to_str().unwrap(), "--virt", virt]);
    if local {
        c.arg("--local");
    }
    let t = Instant::now();
    let out = c.output().unwrap();
    let took = t.elapsed();
    assert_eq!(
        out.status.code(),
        Some(want),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

struct Times {
    local: Vec<f64>,
    net: Vec<f64>,
    both: Vec<f64>,
    requests: Vec<usize>,
}

impl Times {
    fn new() -> Self {
        Self {
            local: Vec::new(),
            net: Vec::new(),
            both: Vec::new(),
            requests: Vec::new(),
        }
    }
    /// Prints one line and returns the numbers as JSON.
    fn report(self, name: &str) -> Value {
        let (lo, hi) = (
            self.requests.iter().min().copied().unwrap_or(0),
            self.requests.iter().max().copied().unwrap_or(0),
        );
        let n = self.both.len();
        let (local, net, both) = (
            Summary::of_ms(&self.local),
            Summary::of_ms(&self.net),
            Summary::of_ms(&self.both),
        );
        println!(
            "leasehook {name:<13} requests={:<5} local {} | network {} | both {} ms (n={n})",
            if lo == hi {
                lo.to_string()
            } else {
                format!("{lo}-{hi}")
            },
            stats(&local),
            stats(&net),
            stats(&both),
        );
        json!({
            "scenario": name,
            "requests": bench::requests_json(&self.requests),
            "local": local.json(), "network": net.json(), "both": both.json(),
        })
    }
}

/// One boot: empties `run/` (and the cache when `fresh`), runs both stages.
fn one_boot(
    stop: &Stop,
    bin: &Path,
    root: &Path,
    virt: &str,
    fresh: bool,
    count: &dyn Fn() -> usize,
    t: &mut Times,
) {
    stop.check();
    let _ = fs::remove_dir_all(root.join("run"));
    if fresh {
        let _ = fs::remove_dir_all(root.join("var/lib/leasehook"));
    }
    let before = count();
    let a = stage(bin, root, true, virt, 0);
    let b = stage(bin, root, false, virt, 0);
    t.requests.push(count() - before);
    t.local.push(ms(a));
    t.net.push(ms(b));
    t.both.push(ms(a + b));
}

fn write(root: &Path, rel: &str, body: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, body).unwrap();
}

fn ec2_root(parent: &Path, url: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir_in(parent).unwrap();
    let r = root.path();
    write(
        r,
        "sys/class/dmi/id/product_uuid",
        "ec2e1916-9099-7caf-fd21-012345abcdef\n",
    );
    write(r, "sys/class/dmi/id/sys_vendor", "Amazon EC2\n");
    write(r, "proc/cmdline", "ro quiet\n");
    write(
        r,
        "etc/leasehook/config.yaml",
        &format!("imds:\n  endpoints: [\"{url}\"]\n"),
    );
    root
}

fn imds(tree: &Value, scenario: Value, log: Option<PathBuf>) -> Emulator {
    let mut cfg = emulator::Config::new(tree.clone());
    cfg.scenario = Scenario::from_value(scenario).unwrap();
    cfg.world.require_token = true;
    cfg.log_file = log;
    Emulator::start("127.0.0.1:0".parse().unwrap(), cfg).unwrap()
}

/// Every scenario with roots under `parent`; the numbers as JSON.
fn bench_root(stop: &Stop, bin: &Path, parent: &Path, tree: &Value) -> Value {
    println!("-- roots under {parent:?}");
    let emu = imds(tree, json!({}), None);
    let count = || emu.log().len();
    let root = ec2_root(parent, &emu.base_url());
    let mut first = Times::new();
    let mut reboot = Times::new();
    for _ in 0..ROUNDS {
        one_boot(stop, bin, root.path(), "kvm", true, &count, &mut first);
        one_boot(stop, bin, root.path(), "kvm", false, &count, &mut reboot);
    }
    let mut scenarios = vec![first.report("ec2-first"), reboot.report("ec2-reboot")];

    let off = imds(
        tree,
        json!({"rules": [{"path": "/latest/api/token", "method": "PUT", "status": 403}]}),
        None,
    );
    write(
        root.path(),
        "etc/leasehook/config.yaml",
        &format!("imds:\n  endpoints: [\"{}\"]\n", off.base_url()),
    );
    let count_off = || off.log().len();
    let mut fallback = Times::new();
    for _ in 0..ROUNDS {
        one_boot(
            stop,
            bin,
            root.path(),
            "kvm",
            false,
            &count_off,
            &mut fallback,
        );
    }
    scenarios.push(fallback.report("ec2-imds-off"));

    let root = tempfile::tempdir_in(parent).unwrap();
    fs::create_dir_all(root.path().join("dev/lxd")).unwrap();
    let d = Devlxd::start(
        &root.path().join("dev/lxd/sock"),
        devlxd::Config::new(SAMPLE_META_DATA)
            .key("user.user-data", "#cloud-config\n{}\n")
            .key("user.tag", "blue"),
    )
    .unwrap();
    let count = || d.log().len();
    let mut first = Times::new();
    let mut reboot = Times::new();
    for _ in 0..ROUNDS {
        one_boot(stop, bin, root.path(), "lxc", true, &count, &mut first);
        one_boot(stop, bin, root.path(), "lxc", false, &count, &mut reboot);
    }
    scenarios.push(first.report("lxd-first"));
    scenarios.push(reboot.report("lxd-reboot"));
    json!({"root_dir": parent, "scenarios": scenarios})
}

/// cloud-init's `get_data()` in process and as a whole process; the numbers as JSON.
fn cloud_init(stop: &Stop, pydir: &Path, tree: &Value) -> Value {
    let log = tempfile::NamedTempFile::new().unwrap();
    let emu = imds(tree, json!({}), Some(log.path().to_owned()));
    let script = workspace_root().join("scripts/cloud-init-ec2-get-data.py");
    let run = |rounds: usize| {
        let out = Command::new("/usr/bin/python3")
            .arg("-s")
            .arg(&script)
            .args(["--url", &emu.base_url(), "--log"])
            .arg(log.path())
            .args(["--rounds", &rounds.to_string()])
            .env("PYTHONPATH", pydir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    stop.check();
    let r = run(CLOUD_INIT_ROUNDS);
    let walls: Vec<f64> = r["wall_ms"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    let reqs: Vec<u64> = r["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    let in_process = Summary::of_ms(&walls);
    println!(
        "cloud-init {} DataSourceEc2.get_data() in process: requests={} {} ms (n={}); import {:.1} ms",
        r["version"].as_str().unwrap_or("?"),
        reqs.iter().max().copied().unwrap_or(0),
        stats(&in_process),
        reqs.len(),
        r["import_ms"].as_f64().unwrap_or(0.0)
    );
    let mut procs = Vec::new();
    for _ in 0..CLOUD_INIT_PROCESSES {
        stop.check();
        let t = Instant::now();
        run(1);
        procs.push(ms(t.elapsed()));
    }
    let process = Summary::of_ms(&procs);
    println!(
        "cloud-init one process (python start, import, get_data): {} ms (n={})",
        stats(&process),
        CLOUD_INIT_PROCESSES
    );
    json!({
        "version": r["version"],
        "import_ms": r["import_ms"],
        "requests": {"min": reqs.iter().min(), "max": reqs.iter().max()},
        "in_process": in_process.json(),
        "process": process.json(),
    })
}

fn main() {
    let bin = leasehook_bin();
    let mut tree = sample_tree();
    // cloud-init probes this dated API version first; real IMDS serves them all.
    tree["2021-03-23"] = tree["latest"].clone();
    println!(
        "leasehook binary {bin:?} ({} cores)",
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get)
    );
    let parents: Vec<PathBuf> = match std::env::var_os("LEASEHOOK_BENCH_ROOT_DIR") {
        Some(p) => vec![p.into()],
        None => ["/tmp", "/dev/shm"]
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.is_dir())
            .collect(),
    };
    let stop = Stop::install();
    let roots: Vec<Value> = parents
        .iter()
        .map(|p| bench_root(&stop, &bin, p, &tree))
        .collect();
    let ci = if let Some(pydir) = std::env::var_os("LEASEHOOK_BENCH_CLOUD_INIT") {
        cloud_init(&stop, Path::new(&pydir), &tree)
    } else {
        println!("cloud-init: not run (set LEASEHOOK_BENCH_CLOUD_INIT)");
        Value::Null
    };
    bench::emit(
        "boot",
        json!({
            "rounds": ROUNDS,
            "bin_bytes": fs::metadata(&bin).map_or(0, |m| m.len()),
            "roots": roots,
            "cloud_init": ci,
        }),
    );
}

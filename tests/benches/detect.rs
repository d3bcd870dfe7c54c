// SPDX-License-Identifier: Apache-2.0
//! Benchmark: deciding the datasource on a fake root — leasehook's `detect` in
//! process and as the `leasehook detect` process, side by side with cloud-init
//! 25.1.4's own `ds-identify` on the same root — and `/bin/true` as the price of
//! starting any process. Prints wall-time medians and 90th percentiles; asserts
//! nothing about time.
//!
//! Two roots: a Debian image on EC2 (Nitro DMI, the package's `cloud.cfg` and
//! `05_logging.cfg`, and the `90_dpkg.cfg` Debian writes, whose `datasource_list`
//! names 30 sources), and an LXD container (a live `/dev/lxd/sock`, no
//! configuration: ds-identify's built-in list).
//!
//! Run: `scripts/bench-detect.sh` (builds the release binary and fetches the
//! oracle), or `cargo bench -p leasehook-tests --bench detect` with
//! `LEASEHOOK_BIN` naming a `leasehook` binary. With `LEASEHOOK_BENCH_JSON` set,
//! the numbers are also appended to that file as one JSON line (for `bench/run`).

#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::cast_precision_loss
)]

use std::fs;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use leasehook_core::source::detect::{ReadOptions, detect};
use leasehook_tests::bench::{self, Stop, Summary};
use leasehook_tests::ds_identify::{
    ROOT_FS_BLKID, command, ds_identify, oracle_root, write_harness,
};
use leasehook_tests::workspace_root;
use serde_json::{Value, json};

const IN_PROCESS: usize = 2000;
const PROCESSES: usize = 300;
const ORACLE_RUNS: usize = 60;

const DPKG_LIST: &str = "datasource_list: [ NoCloud, ConfigDrive, OpenNebula, DigitalOcean, Azure, AltCloud, OVF, MAAS, GCE, OpenStack, CloudSigma, SmartOS, Bigstep, Scaleway, AliYun, Ec2, CloudStack, Hetzner, IBMCloud, Oracle, Exoscale, RbxCloud, UpCloud, VMware, Vultr, LXD, NWCS, Akamai, WSL, None ]\n";

fn write(root: &Path, rel: &str, body: &[u8]) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, body).unwrap();
}

fn base(root: &Path) {
    write(root, "proc/cmdline", b"BOOT_IMAGE=/vmlinuz-6.1.0-31-cloud-amd64 root=PARTUUID=0f0e ro console=tty0 console=ttyS0,115200\n");
    write(root, "proc/1/cmdline", b"/sbin/init\0");
    write(root, "proc/1/environ", b"");
    write(root, "proc/uptime", b"5.10 8.00\n");
}

fn ec2_root(root: &Path) {
    base(root);
    let uuid = "ec2e1916-9099-7caf-fd21-012345abcdef\n";
    for (f, v) in [
        ("sys_vendor", "Amazon EC2\n"),
        ("product_name", "m6i.large\n"),
        ("board_name", "\n"),
        ("chassis_asset_tag", "Amazon EC2\n"),
        ("product_uuid", uuid),
        ("product_serial", uuid),
    ] {
        write(root, &format!("sys/class/dmi/id/{f}"), v.as_bytes());
    }
    let etc = oracle_root().join("etc/cloud");
    for f in ["cloud.cfg", "cloud.cfg.d/05_logging.cfg"] {
        if let Ok(text) = fs::read(etc.join(f)) {
            write(root, &format!("etc/cloud/{f}"), &text);
        }
    }
    write(
        root,
        "etc/cloud/cloud.cfg.d/90_dpkg.cfg",
        DPKG_LIST.as_bytes(),
    );
}

fn lxd_root(root: &Path) -> UnixListener {
    base(root);
    fs::create_dir_all(root.join("dev/lxd")).unwrap();
    UnixListener::bind(root.join("dev/lxd/sock")).unwrap()
}

fn report(name: &str, walls: &[Duration]) -> Value {
    let s = Summary::of(walls);
    println!(
        "{name:<40} wall_ms median={:>8.3} p90={:>8.3} (n={})",
        s.median_ms, s.p90_ms, s.n
    );
    s.json()
}

fn time(stop: &Stop, n: usize, mut f: impl FnMut()) -> Vec<Duration> {
    (0..n)
        .map(|_| {
            stop.check();
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect()
}

fn leasehook_bin() -> Option<PathBuf> {
    let p = std::env::var_os("LEASEHOOK_BIN").map_or_else(
        || workspace_root().join("target/release/leasehook"),
        PathBuf::from,
    );
    p.is_file().then_some(p)
}

/// Times one root three ways; the numbers as JSON.
fn bench_root(stop: &Stop, name: &str, root: &Path, virt: &str, harness: Option<&Path>) -> Value {
    let d = detect(&ReadOptions::new(root).with_virt(virt)).unwrap();
    let list: Vec<&str> = d.datasource_list.iter().map(|k| k.name()).collect();
    println!("-- {name}: leasehook lists {list:?}");
    let mut out = json!({"root": name, "virt": virt, "leasehook_list": list});
    out["in_process"] = report(
        &format!("{name}: detect() in process"),
        &time(stop, IN_PROCESS, || {
            std::hint::black_box(detect(&ReadOptions::new(root).with_virt(virt)).unwrap());
        }),
    );
    match leasehook_bin() {
        Some(bin) => {
            out["process"] = report(
                &format!("{name}: leasehook detect (process)"),
                &time(stop, PROCESSES, || {
                    let ok = Command::new(&bin)
                        .args(["detect", "--root"])
                        .arg(root)
                        .args(["--virt", virt])
                        .stdout(Stdio::null())
                        .status()
                        .unwrap()
                        .success();
                    assert!(ok);
                }),
            );
        }
        None => println!(
            "{name}: leasehook detect (process): no release binary; run scripts/bench-detect.sh"
        ),
    }
    match harness {
        Some(h) => {
            let di = ds_identify();
            let out_di = command(h, &di, root, virt, ROOT_FS_BLKID).output().unwrap();
            let cfg = fs::read_to_string(root.join("run/cloud-init/cloud.cfg")).unwrap_or_default();
            let first = cfg.lines().next().unwrap_or_default().to_owned();
            println!(
                "-- {name}: ds-identify exits {:?} and writes {first:?}",
                out_di.status.code(),
            );
            out["ds_identify_writes"] = json!(first);
            out["ds_identify"] = report(
                &format!("{name}: ds-identify 25.1.4 (process)"),
                &time(stop, ORACLE_RUNS, || {
                    let status = command(h, &di, root, virt, ROOT_FS_BLKID)
                        .env("DEBUG_LEVEL", "0")
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status()
                        .unwrap();
                    assert!(status.code().is_some());
                }),
            );
        }
        None => println!("{name}: ds-identify: no oracle; run scripts/fetch-cloud-init-oracle.sh"),
    }
    out
}

fn main() {
    let stop = Stop::install();
    let work = tempfile::tempdir().unwrap();
    let harness = ds_identify()
        .is_file()
        .then(|| write_harness(work.path()).unwrap());
    let true_start = report(
        "/bin/true (process start)",
        &time(&stop, PROCESSES, || {
            assert!(Command::new("/bin/true").status().unwrap().success());
        }),
    );
    let ec2 = work.path().join("ec2");
    ec2_root(&ec2);
    let mut ec2_json = bench_root(&stop, "debian-ec2", &ec2, "kvm", harness.as_deref());
    ec2_json["cloud_cfg_bytes"] =
        json!(fs::metadata(ec2.join("etc/cloud/cloud.cfg")).map_or(0, |m| m.len()));
    ec2_json["dpkg_list_sources"] = json!(dpkg_list_len());
    let lxd = work.path().join("lxd");
    let _socket = lxd_root(&lxd);
    let lxd_json = bench_root(&stop, "lxd-container", &lxd, "lxc", harness.as_deref());
    bench::emit(
        "detect",
        json!({
            "bin_true": true_start,
            "bin_bytes": leasehook_bin().and_then(|b| fs::metadata(b).ok()).map(|m| m.len()),
            "roots": [ec2_json, lxd_json],
        }),
    );
}

/// How many sources Debian's `90_dpkg.cfg` names.
fn dpkg_list_len() -> usize {
    DPKG_LIST
        .split_once('[')
        .and_then(|(_, rest)| rest.split_once(']'))
        .map_or(0, |(list, _)| list.split(',').count())
}

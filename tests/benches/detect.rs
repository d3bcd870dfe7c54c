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
//! `LEASEHOOK_BIN` naming a `leasehook` binary.

#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::cast_precision_loss
)]

use std::fs;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use leasehook_core::source::detect::{ReadOptions, detect};
use leasehook_tests::ds_identify::{
    ROOT_FS_BLKID, command, ds_identify, oracle_root, write_harness,
};
use leasehook_tests::workspace_root;

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

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() - 1) * p / 100]
}

fn report(name: &str, mut walls: Vec<Duration>) {
    walls.sort();
    println!(
        "{name:<40} wall_ms median={:>8.3} p90={:>8.3} (n={})",
        percentile(&walls, 50).as_secs_f64() * 1e3,
        percentile(&walls, 90).as_secs_f64() * 1e3,
        walls.len()
    );
}

fn time(n: usize, mut f: impl FnMut()) -> Vec<Duration> {
    (0..n)
        .map(|_| {
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

fn bench_root(name: &str, root: &Path, virt: &str, harness: Option<&Path>) {
    let d = detect(&ReadOptions::new(root).with_virt(virt)).unwrap();
    println!(
        "-- {name}: leasehook lists {:?}",
        d.datasource_list
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
    );
    report(
        &format!("{name}: detect() in process"),
        time(IN_PROCESS, || {
            std::hint::black_box(detect(&ReadOptions::new(root).with_virt(virt)).unwrap());
        }),
    );
    match leasehook_bin() {
        Some(bin) => report(
            &format!("{name}: leasehook detect (process)"),
            time(PROCESSES, || {
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
        ),
        None => println!(
            "{name}: leasehook detect (process): no release binary; run scripts/bench-detect.sh"
        ),
    }
    match harness {
        Some(h) => {
            let di = ds_identify();
            let out = command(h, &di, root, virt, ROOT_FS_BLKID).output().unwrap();
            let cfg = fs::read_to_string(root.join("run/cloud-init/cloud.cfg")).unwrap_or_default();
            println!(
                "-- {name}: ds-identify exits {:?} and writes {:?}",
                out.status.code(),
                cfg.lines().next().unwrap_or_default()
            );
            report(
                &format!("{name}: ds-identify 25.1.4 (process)"),
                time(ORACLE_RUNS, || {
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
}

fn main() {
    let work = tempfile::tempdir().unwrap();
    let harness = ds_identify()
        .is_file()
        .then(|| write_harness(work.path()).unwrap());
    report(
        "/bin/true (process start)",
        time(PROCESSES, || {
            assert!(Command::new("/bin/true").status().unwrap().success());
        }),
    );
    let ec2 = work.path().join("ec2");
    ec2_root(&ec2);
    bench_root("debian-ec2", &ec2, "kvm", harness.as_deref());
    let lxd = work.path().join("lxd");
    let _socket = lxd_root(&lxd);
    bench_root("lxd-container", &lxd, "lxc", harness.as_deref());
}

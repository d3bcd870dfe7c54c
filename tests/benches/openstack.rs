// SPDX-License-Identifier: Apache-2.0
//! Benchmark: one secondary-NIC DHCPv4 event on `OpenStack`, against the
//! metadata service emulator on loopback (in-process, Neutron's rate limit off so
//! that the events can follow each other) and against a config drive image below
//! a temporary root (mounted read-only, read, unmounted: needs root): requests
//! made and wall time of the provider's consistency wait, with a new provider per
//! event (as each hook process has), and of the boot stage's datasource fetch.
//! Prints numbers (and a JSON line to `$LEASEHOOK_BENCH_JSON`, for `bench/run`);
//! asserts nothing about time.
//!
//! Run: `cargo bench -p leasehook-tests --features netns --bench openstack`
//! (`bench/run --only openstack`).

#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

use std::time::{Duration, Instant};

use leasehook_core::source::openstack::OpenStackProvider;
use leasehook_core::source::provider::{
    Identity as _, NicEvent, Outcome, Provider, SystemClock, WaitPolicy,
};
use leasehook_tests::bench::{self, Stop};
use leasehook_tests::openstack_emulator::{
    Config, OpenStackEmulator, make_config_drive, world_tree,
};
use leasehook_tests::world::MAC1;
use serde_json::json;

const ROUNDS: usize = 200;
const DRIVE_ROUNDS: usize = 50;

fn event() -> NicEvent {
    bench::bound_event("eth1", MAC1, "10.98.1.20", 24, "10.98.1.1")
}

fn report(name: &str, walls: &[Duration], requests: &[usize]) -> serde_json::Value {
    bench::report_requests("openstack", name, walls, requests)
}

fn main() {
    let emu = OpenStackEmulator::start("127.0.0.1:0".parse().unwrap(), Config::new(world_tree()))
        .unwrap();
    let url = emu.base_url();
    let stop = Stop::install();
    let ev = event();
    let empty = tempfile::tempdir().unwrap();
    let (mut walls, mut reqs) = (Vec::new(), Vec::new());
    let (mut ds_walls, mut ds_reqs) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        stop.check();
        let before = emu.log().len();
        let t = Instant::now();
        let out = OpenStackProvider::try_new(empty.path(), Some(&url))
            .unwrap()
            .wait_for_nic(&ev, &WaitPolicy::default(), &SystemClock);
        walls.push(t.elapsed());
        assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
        reqs.push(emu.log().len() - before);

        let before = emu.log().len();
        let t = Instant::now();
        let data = OpenStackProvider::try_new(empty.path(), Some(&url))
            .unwrap()
            .datasource(WaitPolicy::default())
            .unwrap()
            .fetch()
            .unwrap();
        ds_walls.push(t.elapsed());
        assert_eq!(data.cloud_name, "openstack");
        ds_reqs.push(emu.log().len() - before);
    }
    // The same event from a config drive (no request at all: the service is a
    // port nothing listens on).
    let root = tempfile::tempdir().unwrap();
    let image = root.path().join("config-drive.img");
    let fs = make_config_drive(&world_tree(), "config-2", &image);
    // mount -t iso9660 through the test's FUSE helper (tests/src/configdrive.rs):
    // the drive's times are FUSE's, not the kernel's.
    let _ns = leasehook_tests::configdrive::enter(leasehook_tests::configdrive::Helper::Fuse);
    let by = root.path().join("dev/disk/by-label");
    std::fs::create_dir_all(&by).unwrap();
    std::os::unix::fs::symlink(&image, by.join("config-2")).unwrap();
    let (mut drive_walls, mut drive_reqs) = (Vec::new(), Vec::new());
    for _ in 0..DRIVE_ROUNDS {
        stop.check();
        let t = Instant::now();
        let out = OpenStackProvider::try_new(root.path(), Some("http://127.0.0.1:9"))
            .unwrap()
            .wait_for_nic(&ev, &WaitPolicy::default(), &SystemClock);
        drive_walls.push(t.elapsed());
        assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
        drive_reqs.push(0);
    }
    println!("leasehook openstack emulator {url}, config drive {fs}");
    let mut drive = report("drive", &drive_walls, &drive_reqs);
    drive["fs"] = json!(fs);
    bench::emit(
        "openstack",
        json!({
            "event": report("event", &walls, &reqs),
            "datasource": report("datasource", &ds_walls, &ds_reqs),
            "drive": drive,
        }),
    );
}

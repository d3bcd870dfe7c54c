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
    // `Value[..]` (serde_json) inserts instead of panicking.
    clippy::indexing_slicing
)]

use leasehook_core::source::openstack::OpenStackProvider;
use leasehook_tests::bench::{self, ROUNDS, Stop};
use leasehook_tests::openstack_emulator::{
    Config, OpenStackEmulator, make_config_drive, world_tree,
};
use leasehook_tests::world::MAC1;
use serde_json::json;

const DRIVE_ROUNDS: usize = 50;

fn main() {
    let emu = OpenStackEmulator::start("127.0.0.1:0".parse().unwrap(), Config::new(world_tree()))
        .unwrap();
    let url = emu.base_url();
    let stop = Stop::install();
    let ev = bench::bound_event("eth1", MAC1, "10.98.1.20", 24, "10.98.1.1");
    let empty = tempfile::tempdir().unwrap();
    let provider = || OpenStackProvider::try_new(empty.path(), Some(&url)).unwrap();
    let asked = || emu.log().len();
    let event = bench::measure(("openstack", "event"), &stop, ROUNDS, asked, || {
        bench::assert_complete(&provider(), &ev);
    });
    let datasource = bench::measure(("openstack", "datasource"), &stop, ROUNDS, asked, || {
        bench::assert_fetches(&provider(), "openstack");
    });
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
    let mut drive = bench::measure(
        ("openstack", "drive"),
        &stop,
        DRIVE_ROUNDS,
        || 0,
        || {
            let p = OpenStackProvider::try_new(root.path(), Some("http://127.0.0.1:9")).unwrap();
            bench::assert_complete(&p, &ev);
        },
    );
    println!("leasehook openstack emulator {url}, config drive {fs}");
    drive["fs"] = json!(fs);
    bench::emit(
        "openstack",
        json!({ "event": event, "datasource": datasource, "drive": drive }),
    );
}

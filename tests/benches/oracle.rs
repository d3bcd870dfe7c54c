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

#![allow(clippy::print_stdout, clippy::unwrap_used)]

use leasehook_core::source::oracle::OracleProvider;
use leasehook_core::source::provider::{Provider as _, SystemClock, WaitPolicy};
use leasehook_tests::bench::{self, ROUNDS, Stop};
use leasehook_tests::oracle_emulator::{Config, Emulator};
use leasehook_tests::world::MAC0;
use serde_json::json;

fn main() {
    let emu = Emulator::start("127.0.0.1:0".parse().unwrap(), Config::default()).unwrap();
    let url = emu.base_url();
    let stop = Stop::install();
    let ev = bench::bound_event("eth0", MAC0, "10.98.0.10", 24, "10.98.0.1");
    let provider = || OracleProvider::try_new(Some(&url)).unwrap();
    let asked = || emu.log().len();
    let event = bench::measure(("oracle", "event"), &stop, ROUNDS, asked, || {
        bench::assert_complete(&provider(), &ev);
    });
    let refresh = bench::measure(("oracle", "refresh"), &stop, ROUNDS, asked, || {
        let u = provider()
            .unleased(&WaitPolicy::default(), &SystemClock)
            .unwrap()
            .unwrap();
        assert_eq!(u.nics.len(), 1);
    });
    bench::emit("oracle", json!({ "event": event, "refresh": refresh }));
}

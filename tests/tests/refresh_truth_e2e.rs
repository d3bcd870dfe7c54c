// SPDX-License-Identifier: Apache-2.0
//! Issue 33, items 1, 2 and 7, in the end-to-end world: `leasehook refresh` tells
//! the truth (a NIC it could not check is named, exit 1, and its refresh time is
//! not renewed; as non-root it says "run as root"), it is quiet when nothing
//! changed, a NIC known incomplete costs one round, and `leasehook status --wait`
//! returns once every NIC is applied, or names the one that is not. Compiled with
//! the `netns` feature; needs root.

#![cfg(feature = "netns")]
#![cfg(test)]
#![allow(clippy::too_many_lines)]

use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

use leasehook_tests::netns::{leasehook_bin, show};
use leasehook_tests::world::{World, WorldOptions, wait_until};
use serde_json::json;

const DEVICE_NUMBER: &str =
    "/latest/meta-data/network/interfaces/macs/02:00:00:00:00:02/device-number";

/// `leasehook ARGS` inside the instance with the hooks' environment (their root,
/// budgets), then `env` (later values win).
fn leasehook(w: &World, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut all = vec![("LEASEHOOK_IMDS_SYNC_BUDGET_S", "1")];
    all.extend_from_slice(env);
    w.leasehook(args, &all)
}

fn stamp(w: &World, iface: &str) -> PathBuf {
    w.root.join("run/leasehook/refreshed").join(iface)
}

/// IMDS down during a refresh: exit 1, each NIC named with the cause on the
/// terminal, nothing changed, no refresh stamp, and `status` shows no fresh
/// refresh time. Once IMDS is back, the refresh checks, stamps and exits 0.
#[test]
fn imds_down_during_refresh_exits_1_naming_the_nic_and_stamps_nothing() {
    let mut w = World::bound_two("truth503");
    let before = (w.our_rules(), w.our_routes(), w.inst.addresses());
    w.restart_imds(
        &leasehook_tests::world::default_tree(),
        &json!({"rules": [{"path": "/latest/meta-data", "status": 503, "retry_after": 0}]}),
    );
    let o = leasehook(&w, &["refresh"], &[]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    for nic in ["eth0", "eth1"] {
        assert!(
            stderr.contains(&format!(
                "leasehook: {nic}: not checked: IMDS did not answer usefully"
            )) && stderr.contains("HTTP 503"),
            "{nic} not named with its cause: {}",
            show(&o)
        );
        assert!(!stamp(&w, nic).exists(), "{nic} stamped: {}", show(&o));
    }
    assert!(
        stderr.contains("2 interface(s) not checked"),
        "{}",
        show(&o)
    );
    assert_eq!((w.our_rules(), w.our_routes(), w.inst.addresses()), before);
    let status = leasehook(&w, &["status"], &[]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        !text.contains("refreshed 0 s ago") && !text.contains("refreshed 1 s ago"),
        "a failed refresh shows as fresh: {text}"
    );
    // Degraded, naming each NIC the refresh could not check, until one does.
    assert_eq!(status.status.code(), Some(1), "{text}");
    for nic in ["eth0", "eth1"] {
        assert!(
            text.contains(&format!("{nic}: not checked by its last refresh (IMDS")),
            "{nic}: {text}"
        );
    }

    // IMDS back: checked, stamped, exit 0, and nothing printed (nothing changed).
    w.restart_imds(&leasehook_tests::world::default_tree(), &json!({}));
    let o = leasehook(&w, &["refresh"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(o.stdout.is_empty(), "{}", show(&o));
    for nic in ["eth0", "eth1"] {
        assert!(stamp(&w, nic).exists(), "{nic} not stamped: {}", show(&o));
    }
    let status = leasehook(&w, &["status"], &[]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains("refreshed 0 s ago") || text.contains("refreshed 1 s ago"),
        "{text}"
    );
    assert_eq!(status.status.code(), Some(0), "{text}");

    // A stamp is renewed only by a check that succeeds: IMDS down again, the
    // stamp keeps its time.
    let t = std::fs::metadata(stamp(&w, "eth1"))
        .unwrap()
        .modified()
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    w.restart_imds(
        &leasehook_tests::world::default_tree(),
        &json!({"rules": [{"path": "/latest/meta-data", "status": 503, "retry_after": 0}]}),
    );
    let o = leasehook(&w, &["refresh", "--iface", "eth1"], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert_eq!(
        std::fs::metadata(stamp(&w, "eth1"))
            .unwrap()
            .modified()
            .unwrap(),
        t,
        "a failed check renewed the stamp"
    );
}

/// An unchanged refresh prints nothing and logs nothing at the default level
/// (info); with -v it prints each NIC, and at debug it logs (so the log does
/// reach standard error here, and its silence at info is real).
#[test]
fn an_unchanged_refresh_is_quiet_without_v() {
    let w = World::bound_two("quiet");
    let info = [("LEASEHOOK_LOG_LEVEL", "info")];
    let first = leasehook(&w, &["refresh"], &info);
    assert_eq!(first.status.code(), Some(0), "{}", show(&first));
    let o = leasehook(&w, &["refresh"], &info);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(
        o.stdout.is_empty() && o.stderr.is_empty(),
        "an unchanged refresh said something: {}",
        show(&o)
    );
    let o = leasehook(&w, &["refresh", "-v"], &info);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("eth0: 0 change(s)") && out.contains("eth1: 0 change(s)"),
        "{}",
        show(&o)
    );
    let o = leasehook(&w, &["refresh"], &[("LEASEHOOK_LOG_LEVEL", "debug")]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("IMDS agrees with the lease after 1 round(s)"),
        "the log does not reach standard error here: {}",
        show(&o)
    );
}

/// eth1's device-number never shows up: its worker gives up after the budget
/// (1 s) and records what is missing. Then `status --wait` fails at once naming
/// eth1, and a refresh of the NIC known incomplete asks one round (no retries
/// for the 3 s budget), exits 1 and names what is missing.
#[test]
fn a_nic_known_incomplete_costs_one_round_and_fails_the_wait() {
    let opts = WorldOptions {
        scenario: json!({"appear": [{"path": DEVICE_NUMBER, "after": 600.0}]}),
        sync_budget_s: 0.3,
        budget_s: 1.0,
        ..WorldOptions::default()
    };
    let mut w = World::new("incomplete", &opts);
    w.bind("eth0", false);
    w.bind("eth1", false);
    let state = w.root.join("run/leasehook/iface/eth1.json");
    assert!(
        wait_until(Duration::from_secs(20), || !w.worker_pending("eth1")
            && std::fs::read_to_string(&state)
                .is_ok_and(|s| s.contains("device-number"))),
        "{}",
        w.log("eth1", false)
    );
    let t = Instant::now();
    let o = leasehook(&w, &["status", "--wait", "--timeout", "30"], &[]);
    let waited = t.elapsed();
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("eth1: the metadata did not say") && stderr.contains("device-number"),
        "{}",
        show(&o)
    );
    assert!(
        waited < Duration::from_secs(5),
        "waited {waited:?} for a failed NIC"
    );

    let before = w.imds_log().lines().count();
    let t = Instant::now();
    let o = leasehook(
        &w,
        &["refresh", "--iface", "eth1"],
        &[("LEASEHOOK_IMDS_SYNC_BUDGET_S", "3")],
    );
    let took = t.elapsed();
    let requests = w.imds_log().lines().count() - before;
    println!("refresh of a NIC known incomplete: {requests} request(s), {took:?}");
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("leasehook: eth1: not checked: IMDS incomplete")
            && stderr.contains("device-number"),
        "{}",
        show(&o)
    );
    // One round: well under the 3 s budget the retries would take.
    assert!(
        took < Duration::from_millis(1500),
        "took {took:?}: {}",
        show(&o)
    );
    assert!(!stamp(&w, "eth1").exists());
}

/// `status --wait` returns 0 once eth1's worker has applied its plan (the
/// device-number appears late), and times out (exit 1, eth1 named) while a
/// worker still waits.
#[test]
fn status_wait_returns_when_a_late_device_number_arrives() {
    // device-number appears 8 s after the emulator starts: the hook hands over
    // to a worker (budget 30 s), which applies once it shows up.
    let opts = WorldOptions {
        scenario: json!({"appear": [{"path": DEVICE_NUMBER, "after": 8.0}]}),
        sync_budget_s: 0.3,
        budget_s: 30.0,
        ..WorldOptions::default()
    };
    let mut w = World::new("waitlate", &opts);
    w.bind("eth0", false);
    w.bind("eth1", false);
    assert!(
        wait_until(Duration::from_secs(5), || w.worker_pending("eth1")),
        "no worker: {}",
        w.log("eth1", false)
    );
    // A short timeout while the worker waits: exit 1, eth1 named.
    let o = leasehook(&w, &["status", "--wait", "--timeout", "1"], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("eth1: a worker is waiting for the metadata")
            && stderr.contains("timed out after 1 s"),
        "{}",
        show(&o)
    );
    // Long enough: returns 0 once the worker is done, eth1's rules in place.
    let t = Instant::now();
    let o = leasehook(&w, &["status", "--wait", "--timeout", "60"], &[]);
    let waited = t.elapsed();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    println!("status --wait returned after {waited:?}");
    assert!(
        !w.worker_pending("eth1"),
        "returned while eth1's worker waits"
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("eth1"),
        "{}",
        show(&o)
    );
    assert!(
        w.our_rules()
            .iter()
            .any(|r| r.contains("from 10.98.1.20 lookup 10001")),
        "{:#?}",
        w.our_rules()
    );
}

/// As a user who cannot read the state: "run as root" on the terminal, exit 1,
/// for `refresh` and `status --wait` alike.
#[test]
fn non_root_refresh_and_wait_say_run_as_root() {
    let w = World::bound_two("nonroot");
    for args in [
        &["refresh"][..],
        &["status", "--wait", "--timeout", "1"][..],
    ] {
        let mut cmd = w.inst.command("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
        cmd.arg(leasehook_bin());
        cmd.envs(w.hook_env().iter().map(|(k, v)| (k.as_str(), v.as_str())));
        cmd.args(args);
        let o = cmd.output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", show(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("run as root"),
            "{args:?}: {}",
            show(&o)
        );
    }
}

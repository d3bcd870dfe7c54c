// SPDX-License-Identifier: Apache-2.0
//! `leasehook status` is the truth and a health check (issue 33, item 1): each
//! test runs the real binaries on a temporary root — the hooks in a network
//! namespace of the test's own, with the IMDS emulator on 127.0.0.1 inside it —
//! and asserts `status`'s exit code (0 healthy, 1 degraded, 2 error) and the
//! words it prints.
//!
//! The rows that need a namespace or root carry `#[cfg(feature = "netns")]`;
//! with the feature they fail, never skip, when root is missing.

#![cfg(test)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use leasehook_core::model::{Family, IfName, LeaseEvent, Reason};
use leasehook_tests::netns::{TempDir, leasehook_bin};
use serde_json::json;

/// `leasehook --root ROOT status ARGS` (under `wrap`, e.g. `setpriv ...`, and in
/// the namespace `ns` when given): its exit code and standard output and error.
fn status(ns: Option<&str>, wrap: &[&str], root: &Path, extra: &[&str]) -> (i32, String) {
    let mut argv: Vec<String> = Vec::new();
    if let Some(ns) = ns {
        argv.extend(["ip", "netns", "exec", ns].map(String::from));
    }
    argv.extend(wrap.iter().map(|s| (*s).to_owned()));
    argv.push(leasehook_bin().display().to_string());
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .arg("--root")
        .arg(root)
        .arg("status")
        .args(extra)
        .env_remove("LEASEHOOK_CONFIG")
        .env_remove("LEASEHOOK_ROOT");
    let out: Output = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

fn root_in(dir: &TempDir) -> PathBuf {
    let root = dir.0.join("root");
    std::fs::create_dir_all(root.join("etc/leasehook")).unwrap();
    root
}

#[test]
fn a_broken_configuration_is_an_error_with_its_message() {
    let dir = TempDir::new("stbadcfg");
    let root = root_in(&dir);
    std::fs::write(root.join("etc/leasehook/config.yaml"), "tabel_base: 1\n").unwrap();
    let (code, out) = status(None, &[], &root, &[]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("configuration: INVALID"), "{out}");
    assert!(out.contains("unknown field `tabel_base`"), "{out}");
    assert!(out.contains("status: error"), "{out}");
    // The same verdict in JSON, with its schema version.
    let (code, out) = status(None, &[], &root, &["--format", "json"]);
    assert_eq!(code, 2, "{out}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["status"], "error");
    assert_eq!(doc["configuration"]["valid"], false);
    assert!(
        doc["configuration"]["error"]
            .as_str()
            .unwrap()
            .contains("tabel_base")
    );
    // Fixed: healthy, 0, and `--json` is `--format json`.
    std::fs::write(root.join("etc/leasehook/config.yaml"), "table_base: 1\n").unwrap();
    let (code, out) = status(None, &[], &root, &["--json"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("\"status\": \"healthy\""), "{out}");
    let (code, out) = status(None, &[], &root, &["--format", "yaml"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("schema_version: 1"), "{out}");
}

/// A hand-over file as the hook writes it for `eth1`'s BOUND, naming `pid`, its
/// budget ending `deadline_in_ms` from now (negative: in the past).
fn write_pending(root: &Path, pid: u32, deadline_in_ms: i64) {
    let now = u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap();
    let event = LeaseEvent {
        interface: IfName::try_new("eth1").unwrap(),
        family: Family::V4,
        reason: Reason::Bound,
        new: None,
        old: None,
    };
    let dir = root.join("run/leasehook/pending");
    std::fs::create_dir_all(&dir).unwrap();
    let pending = json!({
        "generation": 1,
        "pid": pid,
        "event": event,
        "deadline_ms": now.saturating_add_signed(deadline_in_ms),
        "queued": false,
        "since_ms": now - 2000,
        "missing": ["device-number of 02:00:00:00:00:02"],
    });
    std::fs::write(dir.join("eth1.json"), pending.to_string()).unwrap();
}

#[test]
fn a_waiting_worker_is_shown_and_past_its_budget_degrades() {
    let dir = TempDir::new("stwait");
    let root = root_in(&dir);
    let mut worker = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = worker.id();
    write_pending(&root, pid, 25_000);
    let (code, out) = status(None, &[], &root, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "waiting: worker {pid}: BOUND waiting for the metadata (missing: device-number of 02:00:00:00:00:02) since 2 s ago; its budget ends in"
        )),
        "{out}"
    );
    write_pending(&root, pid, -10_000);
    let (code, out) = status(None, &[], &root, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("eth1: waiting past its budget"), "{out}");
    assert!(out.contains("its budget ENDED 10 s ago"), "{out}");
    let _ = worker.kill();
    let _ = worker.wait();
    // Within its budget, but the worker is gone: degraded too.
    write_pending(&root, pid, 25_000);
    let (code, out) = status(None, &[], &root, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&format!("its worker {pid} is gone")), "{out}");
}

#[test]
fn a_bad_record_is_an_error_never_a_panic() {
    let dir = TempDir::new("stbadrec");
    let root = root_in(&dir);
    let events = root.join("run/leasehook/last-event");
    std::fs::create_dir_all(&events).unwrap();
    std::fs::write(events.join("eth1.json"), "garbage").unwrap();
    let (code, out) = status(None, &[], &root, &[]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("state cannot be read") && out.contains("not a last event record"),
        "{out}"
    );
    assert!(!out.contains("panicked"), "{out}");
}

#[cfg(feature = "netns")]
mod lab {
    //! The rows that need a namespace and root.

    use std::os::unix::fs::PermissionsExt as _;

    use leasehook_tests::netns::{Netns, sibling_bin};
    use leasehook_tests::world::{EMULATOR, MAC0, MAC1, at_file, default_tree, start_first_line};

    use super::*;

    /// The instance: eth0 and eth1 addressed as dhclient leaves them, IMDS in the
    /// namespace, a root.
    struct Lab {
        imds: std::process::Child,
        url: String,
        ns: Netns,
        dir: TempDir,
        root: PathBuf,
    }

    impl Drop for Lab {
        fn drop(&mut self) {
            let _ = self.imds.kill();
            let _ = self.imds.wait();
        }
    }

    impl Lab {
        fn new(tag: &str) -> Self {
            Self::with_scenario(tag, &json!({}))
        }

        /// The lab with IMDS misbehaving as `scenario` says (tests/src/emulator.rs).
        fn with_scenario(tag: &str, scenario: &serde_json::Value) -> Self {
            let ns = Netns::new(tag);
            for (n, mac) in [(0, MAC0), (1, MAC1)] {
                let eth = format!("eth{n}");
                ns.veth(&eth, mac, &format!("vpc{n}"));
                let addr = format!("10.98.{n}.{}/24", 10 * (n + 1));
                ns.ip(&["address", "add", &addr, "dev", &eth]);
            }
            let dir = TempDir::new(tag);
            let root = root_in(&dir);
            let tree = dir.file("tree.json", &default_tree().to_string());
            let scenario = dir.file("scenario.json", &scenario.to_string());
            let mut cmd = ns.command(sibling_bin(EMULATOR).to_str().unwrap());
            cmd.args(["--cloud", "ec2", "--bind", "127.0.0.1:0", "--log"])
                .arg(dir.0.join("imds.log"))
                .arg("--require-token")
                .arg("--tree")
                .arg(at_file(&tree))
                .arg("--scenario")
                .arg(at_file(&scenario));
            let (imds, addr) = start_first_line(cmd, "leasehook-emulator --cloud ec2");
            Self {
                imds,
                url: format!("http://{addr}"),
                ns,
                dir,
                root,
            }
        }

        /// `leasehook-dhclient` for eth1's BOUND, as dhclient-script runs it (a
        /// clean environment), logging to standard error (`/dev/log` hidden in a
        /// mount namespace of its own).
        fn bound(&self) -> Output {
            self.bound_within("5", "5")
        }

        /// [`Lab::bound`], asserted to succeed.
        fn bound_ok(&self) {
            let out = self.bound();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }

        /// [`Lab::bound`] with the budgets the client waits for (`sync`) and the
        /// whole wait (`total`), in seconds.
        fn bound_within(&self, sync: &str, total: &str) -> Output {
            let mut argv = leasehook_tests::netns::logging_to_stderr(Some(&self.ns));
            argv.push("env".into());
            argv.push("-i".into());
            for (k, v) in [
                ("reason", "BOUND"),
                ("interface", "eth1"),
                ("new_ip_address", "10.98.1.20"),
                ("new_subnet_mask", "255.255.255.0"),
                ("new_routers", "10.98.1.1"),
                ("new_network_number", "10.98.1.0"),
                ("LEASEHOOK_IMDS_ENDPOINTS", &self.url),
                ("LEASEHOOK_IMDS_BIND_INTERFACE", "false"),
                ("LEASEHOOK_IMDS_SYNC_BUDGET_S", sync),
                ("LEASEHOOK_IMDS_BUDGET_S", total),
                ("LEASEHOOK_ROOT", self.root.to_str().unwrap()),
            ] {
                argv.push(format!("{k}={v}").into());
            }
            argv.push(sibling_bin("leasehook-dhclient").into());
            Command::new(&argv[0]).args(&argv[1..]).output().unwrap()
        }

        /// `leasehook refresh` against the lab's IMDS.
        fn refresh(&self) -> Output {
            let mut cmd = self.ns.command(leasehook_bin().to_str().unwrap());
            cmd.arg("--root")
                .arg(&self.root)
                .arg("refresh")
                .env_remove("LEASEHOOK_CONFIG")
                .env("LEASEHOOK_IMDS_ENDPOINTS", &self.url)
                .env("LEASEHOOK_IMDS_BIND_INTERFACE", "false");
            cmd.output().unwrap()
        }

        fn status(&self, args: &[&str]) -> (i32, String) {
            status(Some(&self.ns.name), &[], &self.root, args)
        }
    }

    #[test]
    fn healthy_then_drift_after_ip_rule_del() {
        let lab = Lab::new("stdrift");
        lab.bound_ok();
        let (code, text) = lab.status(&[]);
        assert_eq!(code, 0, "{text}");
        assert!(text.contains("last event: dhclient BOUND "), "{text}");
        assert!(text.contains(": applied 5 change(s)"), "{text}");
        assert!(text.contains("provider: ec2 (auto: "), "{text}");
        assert!(text.ends_with("status: healthy\n"), "{text}");
        // Someone deletes one of leasehook's rules: the record still counts it,
        // the kernel does not.
        lab.ns
            .ip(&["rule", "del", "from", "10.98.1.21", "lookup", "10001"]);
        let (code, text) = lab.status(&[]);
        assert_eq!(code, 1, "{text}");
        assert!(
            text.contains("DRIFT: not in the kernel: rule from 10.98.1.21/32 lookup 10001"),
            "{text}"
        );
        assert!(text.contains("status: degraded"), "{text}");
        let (code, text) = lab.status(&["--format", "json"]);
        assert_eq!(code, 1, "{text}");
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let drift = &doc["interfaces"][0]["drift"];
        assert_eq!(drift.as_array().map(Vec::len), Some(1), "{drift}");
        assert_eq!(doc["interfaces"][0]["last_event"]["outcome"], "applied");
        // `refresh` puts it back, and its record is the last event now.
        let out = lab.refresh();
        assert!(out.status.success(), "{out:?}");
        let (code, text) = lab.status(&["-v"]);
        assert_eq!(code, 0, "{text}");
        assert!(
            text.contains("last event: refresh REFRESH 0 s ago: applied 1 change(s)")
                || text.contains("last event: refresh REFRESH 1 s ago: applied 1 change(s)"),
            "{text}"
        );
        assert!(
            text.contains("    rule from 10.98.1.21/32 lookup 10001 priority 10001\n"),
            "{text}"
        );
        assert!(text.ends_with("status: healthy\n"), "{text}");
    }

    #[test]
    fn a_failed_apply_on_a_conflicting_route_is_shown() {
        let lab = Lab::new("stconflict");
        lab.ns.ip(&[
            "route",
            "add",
            "10.98.1.0/24",
            "dev",
            "eth1",
            "table",
            "10001",
            "proto",
            "static",
            "scope",
            "link",
            "src",
            "10.98.1.20",
        ]);
        let out = lab.bound();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (code, text) = lab.status(&[]);
        assert_eq!(code, 1, "{text}");
        assert!(text.contains("eth1 (nothing applied)"), "{text}");
        assert!(
            text.contains("last event: dhclient BOUND ")
                && text.contains(
                    "CONFLICT: eth1: route \"10.98.1.0/24 dev eth1 table 10001 proto static\" is in the way"
                ),
            "{text}"
        );
        assert!(text.contains("status: degraded"), "{text}");
    }

    #[test]
    fn non_root_is_told_to_run_as_root() {
        let lab = Lab::new("stnonroot");
        lab.bound_ok();
        // Every folder down to the root readable by anyone: only the 0600 files
        // (state, last event) keep nobody out, as on a real host.
        let mut p = lab.root.clone();
        while p.starts_with(&lab.dir.0) {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            p.pop();
        }
        let nobody = [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ];
        let (code, text) = status(Some(&lab.ns.name), &nobody, &lab.root, &[]);
        assert_eq!(code, 2, "{text}");
        assert!(text.contains("run as root"), "{text}");
        assert!(text.contains("status: error"), "{text}");
        // As root: healthy.
        let (code, text) = lab.status(&[]);
        assert_eq!(code, 0, "{text}");
    }

    #[test]
    fn a_worker_records_its_outcome_when_its_wait_ends() {
        // eth1's folder appears 2.5 s after the first request: the hook (1 s for
        // the client) hands the wait over, and the worker applies.
        let folder = format!("/latest/meta-data/network/interfaces/macs/{MAC1}");
        let lab = Lab::with_scenario(
            "stworker",
            &json!({"appear": [{"path": folder, "after": 2.5}]}),
        );
        let out = lab.bound_within("1", "15");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (code, text) = lab.status(&[]);
        assert_eq!(code, 0, "{text}");
        assert!(
            text.contains("last event: dhclient BOUND 0 s ago: waiting for the metadata in worker")
                || text.contains(
                    "last event: dhclient BOUND 1 s ago: waiting for the metadata in worker"
                ),
            "{text}"
        );
        assert!(text.contains("  waiting: worker "), "{text}");
        assert!(
            text.contains("BOUND waiting for the metadata (missing: "),
            "{text}"
        );
        let pending = lab.root.join("run/leasehook/pending/eth1.json");
        let t = std::time::Instant::now();
        while pending.exists() && t.elapsed() < std::time::Duration::from_secs(20) {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        // The worker removes the hand-over before its writes: give them a moment.
        let mut last = (0, String::new());
        for _ in 0..50 {
            last = lab.status(&[]);
            if last.1.contains(": applied 5 change(s)") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let (code, text) = last;
        assert_eq!(code, 0, "{text}");
        assert!(text.contains("last event: dhclient BOUND "), "{text}");
        assert!(text.contains(": applied 5 change(s)"), "{text}");
        assert!(!text.contains("waiting"), "{text}");
    }
}

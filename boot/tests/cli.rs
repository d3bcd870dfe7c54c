// SPDX-License-Identifier: Apache-2.0
//! `leasehook plan` as a user runs it: the example, real files, and every class of
//! malformed input, each of which must give exactly one clear error line and exit 1.

#![allow(clippy::too_many_lines)] // table-driven tests read best as one list
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn leasehook(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_leasehook"))
        .args(args)
        .output()
        .expect("failed to run leasehook")
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("leasehook-cli-{name}-{}", std::process::id()));
        fs::create_dir_all(&p).unwrap();
        Self(p)
    }
    fn file(&self, name: &str, body: &str) -> String {
        let p = self.0.join(name);
        fs::write(&p, body).unwrap();
        p.to_str().unwrap().to_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

const METADATA: &str = r#"{"mac": "02:00:00:00:00:01", "network": {"interfaces": {"macs": {
  "02:00:00:00:00:01": {"device-number": "0", "local-ipv4s": "10.0.0.10", "subnet-ipv4-cidr-block": "10.0.0.0/24"},
  "02:00:00:00:00:02": {"device-number": "1", "local-ipv4s": "10.0.1.20", "subnet-ipv4-cidr-block": "10.0.1.0/24"}}}}}"#;

const LEASE: &str = "reason=BOUND\ninterface=eth1\nnew_ip_address=10.0.1.20\nnew_subnet_mask=255.255.255.0\nnew_routers=10.0.1.1\n";

#[test]
fn example_prints_the_three_nic_plan_in_every_format() {
    let out = leasehook(&["plan", "--example"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("ip -4 rule add from 10.98.1.20/32 lookup 10001 priority 10001\n"),
        "{text}"
    );
    assert!(
        text.contains("ip -4 rule add from 10.98.2.30/32 lookup 10101 priority 10101\n"),
        "{text}"
    );
    for format in ["json", "netplan", "networkd"] {
        let out = leasehook(&["plan", "--example", "--format", format]);
        assert!(out.status.success(), "{format}");
        assert!(
            String::from_utf8(out.stdout).unwrap().contains("10001"),
            "{format}"
        );
    }
}

#[test]
fn plans_from_files() {
    let dir = TempDir::new("files");
    let md = dir.file("md.json", METADATA);
    let lease = dir.file("eth1.env", LEASE);
    let nd = dir.file(
        "3",
        "ADDRESS=10.0.1.20\nNETMASK=255.255.255.0\nROUTER=10.0.1.1\n",
    );
    let link1 = "eth1=02:00:00:00:00:02";
    let want = "ip -4 route add default via 10.0.1.1 dev eth1 table 10001\n";
    for lease_arg in [lease, format!("eth1={nd}")] {
        let out = leasehook(&[
            "plan",
            "--metadata",
            &md,
            "--link",
            link1,
            "--lease",
            &lease_arg,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8(out.stdout).unwrap().contains(want));
    }
}

/// Runs a bad invocation and returns its single stderr line.
fn one_error_line(args: &[&str]) -> String {
    let out = leasehook(args);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(out.stdout.is_empty(), "{args:?} printed to stdout");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "{args:?}: expected one error line, got {stderr:?}"
    );
    assert!(lines[0].starts_with("leasehook: error: "), "{stderr}");
    lines[0].to_owned()
}

#[test]
fn malformed_inputs_give_one_clear_line() {
    let dir = TempDir::new("bad");
    let md = dir.file("md.json", METADATA);
    let lease = dir.file("eth1.env", LEASE);
    let eth1_link = "eth1=02:00:00:00:00:02";
    let bad_lease = |name: &str, from: &str, to: &str| dir.file(name, &LEASE.replace(from, to));
    let bad_md = |name: &str, from: &str, to: &str| dir.file(name, &METADATA.replace(from, to));
    let cases: Vec<(Vec<String>, &str)> = vec![
        // bad IP in a lease
        (
            vec![md.clone(), bad_lease("ip.env", "10.0.1.20", "10.0.1.256")],
            "new_ip_address: not an IPv4 address (got \"10.0.1.256\")",
        ),
        // shell metacharacters in an option value
        (
            vec![
                md.clone(),
                bad_lease("meta.env", "10.0.1.1", "10.0.1.1;reboot"),
            ],
            "new_routers: not a list of IPv4 addresses (got \"10.0.1.1;reboot\")",
        ),
        (
            vec![md.clone(), bad_lease("meta2.env", "255.255.255.0", "$(id)")],
            "new_subnet_mask: not an IPv4 address (got \"$(id)\")",
        ),
        // injection-looking interface name
        (
            vec![
                md.clone(),
                bad_lease("if.env", "interface=eth1", "interface=eth1`id`"),
            ],
            "interface name may only hold",
        ),
        (
            vec![
                md.clone(),
                bad_lease("if2.env", "interface=eth1", "interface=../../etc"),
            ],
            "interface name may only hold",
        ),
        // bad CIDR and wrong types in metadata
        (
            vec![
                bad_md("cidr.json", "10.0.1.0/24", "10.0.1.0/40"),
                lease.clone(),
            ],
            "subnet-ipv4-cidr-block: not an IPv4 CIDR (got \"10.0.1.0/40\")",
        ),
        (
            vec![
                bad_md(
                    "type.json",
                    "\"device-number\": \"1\"",
                    "\"device-number\": {\"x\": 1}",
                ),
                lease.clone(),
            ],
            "device-number: expected a string or a list of strings, found a folder",
        ),
        (
            vec![
                bad_md("ip.json", "10.0.1.20", "10.0.1.20 && rm -rf /"),
                lease.clone(),
            ],
            "local-ipv4s: not an IPv4 address",
        ),
        // truncated JSON
        (
            vec![dir.file("trunc.json", &METADATA[..60]), lease.clone()],
            "metadata JSON: EOF while parsing",
        ),
    ];
    for (files, want) in cases {
        let line = one_error_line(&[
            "plan",
            "--metadata",
            &files[0],
            "--link",
            eth1_link,
            "--lease",
            &files[1],
        ]);
        assert!(line.contains(want), "want {want:?} in {line:?}");
    }
    // Arguments themselves.
    let arg_cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--link", "eth1;reboot=02:00:00:00:00:02"],
            "--link \"eth1;reboot=02:00:00:00:00:02\": interface name may only hold",
        ),
        (vec!["--link", "eth1=02:00:00:00:00"], "not a MAC address"),
        (
            vec!["--link", "eth1=02:00:00:00:00:02,ra=$(id)"],
            "is not an IPv6 address",
        ),
        (
            vec!["--link", eth1_link, "--lease", "/nonexistent/lease"],
            "failed to open \"/nonexistent/lease\"",
        ),
        (
            vec!["--lease", &lease],
            "no link with this name (and so no MAC)",
        ),
    ];
    for (extra, want) in arg_cases {
        let mut args = vec!["plan", "--metadata", md.as_str()];
        args.extend(extra);
        let line = one_error_line(&args);
        assert!(line.contains(want), "want {want:?} in {line:?}");
    }
    let line = one_error_line(&[
        "plan",
        "--metadata",
        &md,
        "--table-base",
        "252",
        "--link",
        eth1_link,
        "--lease",
        &lease,
    ]);
    assert!(line.contains("table number is reserved"), "{line}");
    assert!(Path::new(&md).exists());
}

#[test]
fn config_show_merges_files_environment_and_names_origins() {
    let t = TempDir::new("config");
    fs::create_dir_all(t.0.join("etc/leasehook/config.d")).unwrap();
    t.file(
        "etc/leasehook/config.yaml",
        "table_base: 20000\nprofile: cloud-init\n",
    );
    t.file(
        "etc/leasehook/config.d/10-site.yaml",
        "\nprofile: ec2-net-utils\n",
    );
    let root = t.0.to_str().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_leasehook"))
        .args(["config", "show", "--root", root])
        .env("LEASEHOOK_PRIMARY_RULES", "true")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    for want in [
        "table_base: 20000",
        "etc/leasehook/config.yaml line 1",
        "profile: \"ec2-net-utils\"",
        "config.d/10-site.yaml line 2",
        "primary_rules: true",
        "environment LEASEHOOK_PRIMARY_RULES",
        "priority_base: null",
    ] {
        assert!(text.contains(want), "{want:?} missing in\n{text}");
    }
    // The output is a configuration file giving the same settings.
    let shown = t.file("shown.yaml", &text);
    let again = leasehook(&["config", "show", "--config", &shown, "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(v["settings"]["table_base"], 20_000);
    assert_eq!(v["settings"]["primary_rules"], true);

    // The configuration reaches `plan`; its flags win.
    let md = t.file("md.json", METADATA);
    let lease = t.file("eth1.env", LEASE);
    let plan = |extra: &[&str]| {
        let mut args = vec!["plan", "--root", root, "--metadata", &md, "--lease", &lease];
        args.extend_from_slice(&[
            "--link",
            "eth0=02:00:00:00:00:01",
            "--link",
            "eth1=02:00:00:00:00:02",
        ]);
        args.extend_from_slice(extra);
        String::from_utf8(leasehook(&args).stdout).unwrap()
    };
    assert!(plan(&[]).contains("lookup 20001"), "{}", plan(&[]));
    assert!(plan(&["--table-base", "30000"]).contains("lookup 30001"));

    // A bad file is one line naming the file, line and key; exit status 1.
    t.file(
        "etc/leasehook/config.d/20-typo.yaml",
        "imds:\n  endpoints: [\"http://imds.example\"]\n",
    );
    let e = one_error_line(&["config", "show", "--root", root]);
    assert!(
        e.contains("20-typo.yaml line 2: imds.endpoints: ") && e.contains("IP address"),
        "{e}"
    );
}

/// `LEASEHOOK_ROOT` is `--root`'s default in every subcommand, not only in `plan`,
/// `config show` and `refresh`: `flush`, `apply`, `status`, `query`, `init` and
/// `detect` read (and write) below it too, so a test or an image build that sets
/// it never touches the machine's own `/run/leasehook` (issue 20, item 6).
#[test]
fn every_subcommand_reads_below_leasehook_root() {
    let dir = TempDir::new("root-env");
    fs::create_dir_all(dir.0.join("run/leasehook")).unwrap();
    let doc = r#"{"v1": {"instance_id": "i-from-leasehook-root"}}"#;
    dir.file("run/leasehook/instance-data.json", doc);
    dir.file("run/leasehook/instance-data-sensitive.json", doc);
    fs::create_dir_all(dir.0.join("var/lib/cloud/seed/nocloud")).unwrap();
    dir.file(
        "var/lib/cloud/seed/nocloud/meta-data",
        "instance-id: i-seed\n",
    );
    dir.file("var/lib/cloud/seed/nocloud/user-data", "#cloud-config\n");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_leasehook"))
            .args(args)
            .env("LEASEHOOK_ROOT", &dir.0)
            .env("LEASEHOOK_CONFIG", "/dev/null")
            .output()
            .unwrap()
    };
    let out = run(&["query", "v1.instance_id"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "\"i-from-leasehook-root\"\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["detect", "--virt", "none"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["checks"]["NoCloud"], "found", "{v}");
    // An explicit --root still wins over the variable.
    let other = TempDir::new("root-flag");
    let out = Command::new(env!("CARGO_BIN_EXE_leasehook"))
        .args(["detect", "--virt", "none", "--root"])
        .arg(&other.0)
        .env("LEASEHOOK_ROOT", &dir.0)
        .env("LEASEHOOK_CONFIG", "/dev/null")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["checks"]["NoCloud"], "not-found", "{v}");
}

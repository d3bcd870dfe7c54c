// SPDX-License-Identifier: Apache-2.0
//! `leasehook plan` as a user runs it: the example, real files, and every class of
//! malformed input, each of which must give exactly one clear error line and exit 1.

#![cfg(test)]
#![allow(clippy::too_many_lines)] // table-driven tests read best as one list

use std::fs;
use std::path::Path;
use std::process::Command;

mod common;
use common::{TempDir, leasehook, one_error_line};

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
    let dir = TempDir::new("cli-files");
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

#[test]
fn malformed_inputs_give_one_clear_line() {
    let dir = TempDir::new("cli-bad");
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
    let t = TempDir::new("cli-config");
    t.file(
        "etc/leasehook/config.yaml",
        "table_base: 20000\nprofile: cloud-init\n",
    );
    t.file(
        "etc/leasehook/config.d/10-site.yaml",
        "\nprofile: ec2-net-utils\n",
    );
    let root = t.path();
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

/// A state file for an interface no host has (`status` lists it, `refresh` and
/// `flush --iface` forget it), and a plan for it that `apply` refuses before any
/// write (the link is missing) but after taking its lock below the root.
const STATE: &str = r#"{"version": 1, "name": "lhcli0", "mac": "02:00:00:00:00:99", "profile": "ec2-net-utils", "table": null, "families": {}}"#;
const PLAN: &str = r#"{"profile": "ec2-net-utils", "interfaces": [{"name": "lhcli0", "mac": "02:00:00:00:00:99", "primary": false, "families": ["ipv4"], "table": 10001, "metric": null, "addresses": [], "routes": [], "rules": [], "missing": []}]}"#;

/// Where the root is given.
#[derive(Debug, Clone, Copy)]
enum RootGiven {
    /// `LEASEHOOK_ROOT=DIR leasehook SUB ...`.
    Env,
    /// `leasehook --root DIR SUB ...` (`LEASEHOOK_ROOT` names a decoy).
    Before,
    /// `leasehook SUB ... --root DIR` (`LEASEHOOK_ROOT` names a decoy).
    After,
}

/// One global `--root` (or `LEASEHOOK_ROOT`) in every subcommand, given before or
/// after it: `plan`, `config show`, `refresh`, `flush`, `apply`, `status`, `query`,
/// `init` and `detect` all read (and write) below it, so a test or an image build
/// that sets it never touches the machine's own `/etc/leasehook`, `/run/leasehook`
/// or `/var/lib/leasehook` (issue 20, item 6). A flag wins over the variable, and
/// nothing lands below the variable's folder then.
#[test]
fn every_subcommand_reads_below_leasehook_root() {
    for given in [RootGiven::Env, RootGiven::Before, RootGiven::After] {
        let dir = TempDir::new(&format!("cli-root-{given:?}"));
        let decoy = TempDir::new(&format!("cli-root-decoy-{given:?}"));
        dir.file("etc/leasehook/config.yaml", "table_base: 20000\n");
        let doc = r#"{"v1": {"instance_id": "i-from-leasehook-root"}}"#;
        dir.file("run/leasehook/instance-data.json", doc);
        dir.file("run/leasehook/instance-data-sensitive.json", doc);
        dir.file("run/leasehook/iface/lhcli0.json", STATE);
        dir.file(
            "var/lib/cloud/seed/nocloud/meta-data",
            "instance-id: i-seed\n",
        );
        dir.file("var/lib/cloud/seed/nocloud/user-data", "#cloud-config\n");
        let plan = dir.file("plan.json", PLAN);
        let run = |args: &[&str]| {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_leasehook"));
            match given {
                RootGiven::Env => cmd.args(args).env("LEASEHOOK_ROOT", &dir.0),
                RootGiven::Before => cmd
                    .arg("--root")
                    .arg(&dir.0)
                    .args(args)
                    .env("LEASEHOOK_ROOT", &decoy.0),
                RootGiven::After => cmd
                    .args(args)
                    .arg("--root")
                    .arg(&dir.0)
                    .env("LEASEHOOK_ROOT", &decoy.0),
            };
            let out = cmd.env_remove("LEASEHOOK_CONFIG").output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            (out.status.code(), text, err)
        };
        let ctx =
            |what: &str, out: &(Option<i32>, String, String)| format!("{given:?} {what}: {out:?}");

        let out = run(&["query", "v1.instance_id"]);
        assert_eq!(out.1, "i-from-leasehook-root\n", "{}", ctx("query", &out));
        let out = run(&["detect", "--virt", "none"]);
        let v: serde_json::Value = serde_json::from_str(&out.1).unwrap();
        assert_eq!(v["checks"]["NoCloud"], "found", "{}", ctx("detect", &out));
        // The configuration below the root reaches `plan` and `config show`.
        let out = run(&["plan", "--example"]);
        assert!(out.1.contains("lookup 20001"), "{}", ctx("plan", &out));
        let out = run(&["config", "show"]);
        let origin = match given {
            RootGiven::Env => "(environment LEASEHOOK_ROOT)",
            RootGiven::Before | RootGiven::After => "(flag --root)",
        };
        assert!(
            out.1
                .contains(&format!("# root: {} {origin}", dir.0.display()))
                && out.1.contains("table_base: 20000"),
            "{}",
            ctx("config show", &out)
        );
        let out = run(&["status"]);
        assert!(
            out.1.contains("lhcli0 02:00:00:00:00:99 (no table"),
            "{}",
            ctx("status", &out)
        );
        // `apply` locks below the root, then refuses the plan: no link lhcli0.
        let out = run(&["apply", "--plan", &plan]);
        assert!(
            out.0 == Some(1) && out.2.contains("no link named lhcli0"),
            "{}",
            ctx("apply", &out)
        );
        assert!(dir.0.join("run/leasehook/lock/lhcli0.lock").exists());
        // `refresh` finds the recorded interface gone and forgets it.
        let out = run(&["refresh"]);
        assert!(
            out.1.contains("lhcli0: link gone"),
            "{}",
            ctx("refresh", &out)
        );
        assert!(!dir.0.join("run/leasehook/iface/lhcli0.json").exists());
        // `flush --iface` forgets the state file below the root.
        dir.file("run/leasehook/iface/lhcli0.json", STATE);
        let out = run(&["flush", "--iface", "lhcli0"]);
        assert_eq!(out.0, Some(0), "{}", ctx("flush", &out));
        assert!(!dir.0.join("run/leasehook/iface/lhcli0.json").exists());
        // `init` writes its cache and boot record below the root.
        let out = run(&["init", "--local", "--virt", "none"]);
        assert!(
            out.1.contains("datasource NoCloud \"i-seed\""),
            "{}",
            ctx("init", &out)
        );
        assert!(dir.0.join("run/leasehook/boot.json").exists());
        assert!(
            dir.0
                .join("var/lib/leasehook/instances/i-seed/datasource.json")
                .exists()
        );
        // Nothing went below the variable's folder when the flag was given.
        assert_eq!(fs::read_dir(&decoy.0).unwrap().count(), 0, "{given:?}");
    }
}

/// The man page and completion generator is a build-time tool (`cargo run -p
/// xtask`), not a command of the binary the package ships.
#[test]
fn the_shipped_binary_has_no_generator() {
    let out = leasehook(&["generate", "man", "--out", "/nonexistent"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unrecognized subcommand 'generate'"),
        "{out:?}"
    );
}

#[test]
fn plan_reads_a_saved_azure_answer_with_provider_azure() {
    let dir = TempDir::new("cli-plan-azure");
    // The secondary is listed first: its table comes from its MAC, not the order.
    let md = dir.file(
        "azure.json",
        r#"{"compute": {"vmId": "x"}, "network": {"interface": [
            {"macAddress": "000D3A000001", "ipv4": {"ipAddress": [{"privateIpAddress": "10.0.0.4"}], "subnet": [{"address": "10.0.0.0", "prefix": "24"}]}},
            {"macAddress": "000D3A000002", "ipv4": {"ipAddress": [{"privateIpAddress": "10.0.1.20"}, {"privateIpAddress": "10.0.1.21"}], "subnet": [{"address": "10.0.1.0", "prefix": "24"}]}}
        ]}}"#,
    );
    let lease = dir.file(
        "lease.env",
        "reason=BOUND\ninterface=eth1\nnew_ip_address=10.0.1.20\nnew_subnet_mask=255.255.255.0\nnew_routers=10.0.1.1\n",
    );
    let args = [
        "plan",
        "--provider",
        "azure",
        "--metadata",
        md.as_str(),
        "--link",
        "eth0=00:0d:3a:00:00:01",
        "--link",
        "eth1=00:0d:3a:00:00:02",
        "--lease",
        lease.as_str(),
    ];
    let out = leasehook(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("rule add from 10.0.1.21/32 lookup 10001"),
        "{text}"
    );
    assert!(
        text.contains("route add default via 10.0.1.1 dev eth1 table 10001"),
        "{text}"
    );
    // Without --provider, the configured provider says whose metadata it is.
    let configured = Command::new(env!("CARGO_BIN_EXE_leasehook"))
        .args(["plan"])
        .args(&args[3..])
        .env("LEASEHOOK_PROVIDER", "azure")
        .output()
        .unwrap();
    assert_eq!(configured.stdout, out.stdout, "{configured:?}");
    // Read as EC2's tree it holds no NIC folder: no table for eth1.
    let out = leasehook(&[&["plan"][..], &args[3..]].concat());
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("lookup 10001"),
        "{out:?}"
    );
    // Read as GCE's answer it is refused, naming the provider.
    let out = leasehook(&[&["plan", "--provider", "gce"][..], &args[3..]].concat());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bad gce metadata"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Read as OCI's VNIC list it is refused too (not a JSON list).
    let out = leasehook(&[&["plan", "--provider", "oracle"][..], &args[3..]].concat());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bad oracle metadata"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // ... and as OpenStack's network_data.json (it has no `links`).
    let out = leasehook(&[&["plan", "--provider", "openstack"][..], &args[3..]].concat());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bad openstack metadata"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

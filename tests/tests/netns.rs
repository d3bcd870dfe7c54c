// SPDX-License-Identifier: Apache-2.0
//! `leasehook apply` / `flush` against the real Linux routing code, each test in a
//! fresh network namespace, checked independently through `ip -j`.
//!
//! Compiled only with the `netns` feature (`scripts/test.sh` turns it on); they need
//! root and fail, never skip, without it.

#![cfg(feature = "netns")]
#![cfg(test)]
#![allow(clippy::too_many_lines)]

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::Duration;

use leasehook_tests::netns::{Netns, TempDir, leasehook_bin, run};

/// The example instance's three links, with the example's MACs and DHCP addresses.
fn example_ns(tag: &str) -> Netns {
    let ns = Netns::new(tag);
    for i in 0..3 {
        ns.veth(
            &format!("eth{i}"),
            &format!("02:00:00:00:00:0{}", i + 1),
            &format!("peer{i}"),
        );
        ns.ip(&[
            "address",
            "add",
            &format!("10.98.{i}.{}/24", 10 * (i + 1)),
            "dev",
            &format!("eth{i}"),
        ]);
    }
    ns.ip(&[
        "-6",
        "address",
        "add",
        "2600:1f18:0:1::20/128",
        "dev",
        "eth1",
        "nodad",
    ]);
    ns
}

fn leasehook(ns: &Netns, args: &[&str]) -> std::process::Output {
    ns.command(leasehook_bin().to_str().unwrap())
        .args(args)
        .output()
        .unwrap()
}

fn ok(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "leasehook failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn plan_json(dir: &TempDir, args: &[&str]) -> String {
    let out = run(Command::new(leasehook_bin())
        .arg("plan")
        .args(args)
        .args(["--format", "json"]));
    dir.file("plan.json", std::str::from_utf8(&out.stdout).unwrap())
        .to_str()
        .unwrap()
        .to_owned()
}

fn apply(ns: &Netns, root: &TempDir, plan: &str) -> String {
    ok(&leasehook(
        ns,
        &[
            "apply",
            "-v",
            "--root",
            root.0.to_str().unwrap(),
            "--plan",
            plan,
        ],
    ))
}

#[test]
fn apply_from_empty_installs_the_plan() {
    let ns = example_ns("empty");
    let dir = TempDir::new("empty");
    let plan = plan_json(&dir, &["--example"]);
    let out = apply(&ns, &dir, &plan);
    assert!(
        out.ends_with("12 change(s): 12 added, 0 removed\n"),
        "{out}"
    );
    let rules = ns.rules();
    for want in [
        "10001 from 10.98.1.20 lookup 10001 proto 176",
        "10001 from 10.98.1.21 lookup 10001 proto 176",
        "10001 from 10.98.1.64/28 lookup 10001 proto 176",
        "10101 from 10.98.2.30 lookup 10101 proto 176",
        "10001 from 2600:1f18:0:1::20 lookup 10001 proto 176",
    ] {
        assert!(
            rules.iter().any(|r| r == want),
            "missing rule {want:?} in {rules:#?}"
        );
    }
    let routes = ns.routes();
    for want in [
        "default via 10.98.1.1 dev eth1 scope - src - table 10001 proto 176",
        "10.98.1.0/24 via - dev eth1 scope link src 10.98.1.20 table 10001 proto 176",
        "default via 10.98.2.1 dev eth2 scope - src - table 10101 proto 176",
        "default via fe80::1 dev eth1 scope - src - table 10001 proto 176",
        "2600:1f18:0:1::/64 via - dev eth1 scope - src - table 10001 proto 176",
    ] {
        assert!(
            routes.iter().any(|r| r == want),
            "missing route {want:?} in {routes:#?}"
        );
    }
    assert!(ns.addresses().contains(&"eth1 10.98.1.21/32".to_owned()));
    // Lookups through the rules resolve (a rule without a lookup action would fail).
    let get = ns.ip(&["route", "get", "192.0.2.9", "from", "10.98.1.21"]);
    assert!(get.contains("via 10.98.1.1 dev eth1 table 10001"), "{get}");
    // status reads the recorded state.
    let status = ok(&leasehook(
        &ns,
        &["status", "--root", dir.0.to_str().unwrap()],
    ));
    assert!(
        status.contains("eth1 02:00:00:00:00:02 (table 10001, profile ec2-net-utils)"),
        "{status}"
    );
}

#[test]
fn reapplying_the_same_plan_changes_nothing() {
    let ns = example_ns("again");
    let dir = TempDir::new("again");
    let plan = plan_json(&dir, &["--example"]);
    // `ip monitor` sees every change to rules, routes and addresses: the first apply
    // shows up in it, the second must not.
    let watch = |f: &dyn Fn() -> String| ns.monitor(&[], f);
    let (first, seen_first) = watch(&|| apply(&ns, &dir, &plan));
    assert!(first.ends_with("12 change(s): 12 added, 0 removed\n"));
    assert!(
        seen_first.contains("lookup 10001"),
        "ip monitor saw nothing of the first apply: {seen_first}"
    );
    let before = ns.snapshot();
    let state_file = dir.0.join("run/leasehook/iface/eth1.json");
    let written = std::fs::metadata(&state_file).unwrap().modified().unwrap();
    sleep(Duration::from_millis(20));
    let (second, seen_second) = watch(&|| apply(&ns, &dir, &plan));
    assert_eq!(
        std::fs::metadata(&state_file).unwrap().modified().unwrap(),
        written,
        "state file rewritten"
    );
    assert_eq!(second, "0 change(s): 0 added, 0 removed\n");
    // The kernel itself may still be adding IPv6 link-local addresses (and their
    // local routes) to the fresh links; those lines are not ours.
    let ours: Vec<&str> = seen_second
        .lines()
        .filter(|l| {
            (!l.contains("fe80:") || l.contains("proto 176"))
                && !l.trim_start().starts_with("valid_lft")
        })
        .collect();
    assert!(
        ours.is_empty(),
        "the second apply changed the kernel: {ours:#?}"
    );
    assert_eq!(ns.snapshot(), before);
}

/// An unchanged plan is still checked against the kernel, not against what was
/// recorded: a rule, a route and a secondary address deleted by hand (drift)
/// come back at the next apply of the same plan, and nothing else is written.
#[test]
fn reapplying_the_same_plan_restores_what_was_deleted_by_hand() {
    let ns = example_ns("drift");
    let dir = TempDir::new("drift");
    let plan = plan_json(&dir, &["--example"]);
    let first = apply(&ns, &dir, &plan);
    assert!(
        first.ends_with("12 change(s): 12 added, 0 removed\n"),
        "{first}"
    );
    // Rules of one priority are listed in the order they were added: compared
    // as sets.
    let sorted = || {
        let mut s = ns.snapshot();
        s.0.sort();
        s
    };
    // The second apply changes nothing and records its applied digest; the
    // third takes the fast path: the drift below must be seen all the same.
    assert_eq!(apply(&ns, &dir, &plan), "0 change(s): 0 added, 0 removed\n");
    assert!(!skipped(&ns, &dir, &plan).0.is_empty());
    let before = sorted();
    ns.ip(&["rule", "del", "from", "10.98.1.21", "lookup", "10001"]);
    ns.ip(&[
        "-6",
        "rule",
        "del",
        "from",
        "2600:1f18:0:1::20",
        "lookup",
        "10001",
    ]);
    ns.ip(&[
        "route",
        "del",
        "default",
        "via",
        "10.98.2.1",
        "table",
        "10101",
    ]);
    ns.ip(&["address", "del", "10.98.1.21/32", "dev", "eth1"]);
    assert_ne!(sorted(), before);
    let again = apply(&ns, &dir, &plan);
    assert!(
        again.ends_with("4 change(s): 4 added, 0 removed\n"),
        "{again}"
    );
    for (op, object) in [
        ("rule add", "from 10.98.1.21/32 lookup 10001"),
        ("rule add", "from 2600:1f18:0:1::20/128 lookup 10001"),
        ("route add", "via 10.98.2.1"),
        ("address add", "10.98.1.21/32"),
    ] {
        assert!(
            again.lines().any(|l| l.contains(op) && l.contains(object)),
            "{op} {object} not re-added: {again}"
        );
    }
    assert_eq!(sorted(), before);
    assert_eq!(apply(&ns, &dir, &plan), "0 change(s): 0 added, 0 removed\n");
}

/// The applied digest file (`run/leasehook/applied.digest`) and its inode: an
/// apply that changed nothing in full rewrites it (a new file, renamed over
/// the name); the fast path leaves it as it is.
fn digest_file(dir: &TempDir) -> Option<(String, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    let path = dir.0.join("run/leasehook/applied.digest");
    let meta = std::fs::symlink_metadata(&path).ok()?;
    Some((std::fs::read_to_string(&path).ok()?, meta.ino()))
}

/// The state files' names and inodes (each write is a new file renamed over
/// the name).
fn state_files(dir: &TempDir) -> Vec<(std::ffi::OsString, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    let mut files: Vec<_> = std::fs::read_dir(dir.0.join("run/leasehook/iface"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name(), e.metadata().unwrap().ino())
        })
        .collect();
    files.sort();
    files
}

/// Applies `plan` and says whether the fast path answered: "0 changes", and
/// no file written (the full path, when it changes nothing, rewrites the digest
/// file, or writes a state file and no digest). The output is the first string
/// when it was taken, the second when not.
fn skipped(ns: &Netns, dir: &TempDir, plan: &str) -> (String, String) {
    let before = (digest_file(dir), state_files(dir));
    let out = apply(ns, dir, plan);
    if before.0.is_some()
        && (digest_file(dir), state_files(dir)) == before
        && out == "0 change(s): 0 added, 0 removed\n"
    {
        (out, String::new())
    } else {
        (String::new(), out)
    }
}

/// Issue 32 item 6: an apply that would change nothing is answered from the
/// applied digest, and any input that changed takes the full path: the plan
/// file (one object), a state file deleted or corrupt (both repaired as
/// before), a rule, route or address deleted by hand; a symlink or FIFO at the
/// digest's path is neither followed nor waited on.
#[test]
fn an_unchanged_apply_is_answered_from_its_digest_until_an_input_changes() {
    let ns = example_ns("digest");
    let dir = TempDir::new("digest");
    let plan = plan_json(&dir, &["--example"]);
    let zero = "0 change(s): 0 added, 0 removed\n";
    assert!(apply(&ns, &dir, &plan).ends_with("12 change(s): 12 added, 0 removed\n"));
    // A changing apply records no digest; the first unchanged one does.
    assert_eq!(digest_file(&dir), None);
    assert_eq!(skipped(&ns, &dir, &plan), (String::new(), zero.to_owned()));
    assert!(digest_file(&dir).is_some());
    assert_eq!(skipped(&ns, &dir, &plan).0, zero);
    assert_eq!(skipped(&ns, &dir, &plan).0, zero);

    // A route deleted by hand: the full path puts it back.
    ns.ip(&[
        "route",
        "del",
        "default",
        "via",
        "10.98.2.1",
        "table",
        "10101",
    ]);
    let (fast, full) = skipped(&ns, &dir, &plan);
    assert_eq!(fast, "");
    assert!(
        full.ends_with("1 change(s): 1 added, 0 removed\n") && full.contains("via 10.98.2.1"),
        "{full}"
    );
    // The kernel is again as the digest saw it.
    assert_eq!(skipped(&ns, &dir, &plan).0, zero);

    // One object of the plan changed: applied.
    let text = std::fs::read_to_string(&plan).unwrap();
    assert!(text.contains("10.98.1.21"));
    std::fs::write(&plan, text.replace("10.98.1.21", "10.98.1.22")).unwrap();
    let (fast, full) = skipped(&ns, &dir, &plan);
    assert_eq!(fast, "");
    assert!(full.contains("10.98.1.22"), "{full}");
    assert_ne!(full, zero);
    assert!(ns.addresses().contains(&"eth1 10.98.1.22/32".to_owned()));
    assert_eq!(skipped(&ns, &dir, &plan).1, zero);
    assert_eq!(skipped(&ns, &dir, &plan).0, zero);

    // A state file deleted: the full path writes it again.
    let state = dir.0.join("run/leasehook/iface/eth1.json");
    let recorded = std::fs::read_to_string(&state).unwrap();
    std::fs::remove_file(&state).unwrap();
    assert_eq!(skipped(&ns, &dir, &plan).1, zero);
    assert!(state.exists(), "state file not written again");
    assert_eq!(skipped(&ns, &dir, &plan).1, zero);
    assert_eq!(skipped(&ns, &dir, &plan).0, zero);

    // A state file corrupt: set aside and written again.
    std::fs::write(&state, &recorded[..recorded.len() / 2]).unwrap();
    assert_eq!(skipped(&ns, &dir, &plan).1, zero);
    assert!(dir.0.join("run/leasehook/iface/eth1.json.corrupt").exists());
    assert!(std::fs::read_to_string(&state).unwrap().ends_with('}'));
    assert_eq!(skipped(&ns, &dir, &plan).1, zero);
    assert_eq!(skipped(&ns, &dir, &plan).0, zero);

    // A symlink at the digest's path, to a file holding the right digest:
    // not followed (the full path, which replaces the link, not its target).
    let digest = dir.0.join("run/leasehook/applied.digest");
    let (text, _) = digest_file(&dir).unwrap();
    let target = dir.file("elsewhere", &text);
    std::fs::remove_file(&digest).unwrap();
    std::os::unix::fs::symlink(&target, &digest).unwrap();
    assert_eq!(apply(&ns, &dir, &plan), zero);
    assert!(!std::fs::symlink_metadata(&digest).unwrap().is_symlink());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), text);
    assert_eq!(skipped(&ns, &dir, &plan).0, zero);

    // A FIFO there: not waited on.
    std::fs::remove_file(&digest).unwrap();
    run(Command::new("mkfifo").arg(&digest));
    assert_eq!(apply(&ns, &dir, &plan), zero);
    assert!(std::fs::symlink_metadata(&digest).unwrap().is_file());
    assert_eq!(skipped(&ns, &dir, &plan).0, zero);
}

#[test]
fn changing_one_secondary_ip_replaces_one_rule() {
    let ns = Netns::new("change");
    ns.veth("eth0", "02:00:00:00:00:01", "peer0");
    ns.veth("eth1", "02:00:00:00:00:02", "peer1");
    ns.ip(&["address", "add", "10.0.1.20/24", "dev", "eth1"]);
    let dir = TempDir::new("change");
    let lease = dir.file("eth1.env", "reason=BOUND\ninterface=eth1\nnew_ip_address=10.0.1.20\nnew_subnet_mask=255.255.255.0\nnew_routers=10.0.1.1\n");
    let md = |second: &str| {
        format!(
            r#"{{"mac": "02:00:00:00:00:01", "network": {{"interfaces": {{"macs": {{
               "02:00:00:00:00:01": {{"device-number": "0", "local-ipv4s": "10.0.0.10"}},
               "02:00:00:00:00:02": {{"device-number": "1", "local-ipv4s": "10.0.1.20\n{second}", "subnet-ipv4-cidr-block": "10.0.1.0/24"}}}}}}}}}}"#
        )
    };
    let args = |md: &Path| {
        vec![
            "--metadata".to_owned(),
            md.to_str().unwrap().to_owned(),
            "--link".to_owned(),
            "eth1=02:00:00:00:00:02".to_owned(),
            "--lease".to_owned(),
            lease.to_str().unwrap().to_owned(),
        ]
    };
    let md1 = dir.file("md1.json", &md("10.0.1.21"));
    let a1 = args(&md1);
    let plan1 = plan_json(&dir, &a1.iter().map(String::as_str).collect::<Vec<_>>());
    apply(&ns, &dir, &plan1);
    let md2 = dir.file("md2.json", &md("10.0.1.22"));
    let a2 = args(&md2);
    let plan2 = plan_json(&dir, &a2.iter().map(String::as_str).collect::<Vec<_>>());
    let out = apply(&ns, &dir, &plan2);
    assert_eq!(
        out,
        "ip -4 rule del from 10.0.1.21/32 lookup 10001 priority 10001\n\
         ip -4 address del 10.0.1.21/32 dev eth1\n\
         ip -4 rule add from 10.0.1.22/32 lookup 10001 priority 10001\n\
         ip -4 address add 10.0.1.22/32 dev eth1\n\
         4 change(s): 2 added, 2 removed\n"
    );
    let rules = ns.rules();
    assert!(rules.contains(&"10001 from 10.0.1.22 lookup 10001 proto 176".to_owned()));
    assert!(!rules.iter().any(|r| r.contains("10.0.1.21")));
}

#[test]
fn foreign_rules_survive_apply_and_flush() {
    let ns = example_ns("foreign");
    let dir = TempDir::new("foreign");
    ns.ip(&[
        "rule",
        "add",
        "from",
        "10.98.1.99",
        "lookup",
        "10001",
        "priority",
        "10001",
    ]);
    ns.ip(&[
        "route",
        "add",
        "203.0.113.0/24",
        "dev",
        "eth1",
        "table",
        "10001",
    ]);
    let plan = plan_json(&dir, &["--example"]);
    apply(&ns, &dir, &plan);
    let out = ok(&leasehook(
        &ns,
        &["flush", "--root", dir.0.to_str().unwrap()],
    ));
    assert!(
        out.ends_with("12 change(s): 0 added, 12 removed\n"),
        "{out}"
    );
    let rules = ns.rules();
    assert!(
        rules.contains(&"10001 from 10.98.1.99 lookup 10001 proto -".to_owned())
            || rules
                .iter()
                .any(|r| r.starts_with("10001 from 10.98.1.99 lookup 10001")),
        "{rules:#?}"
    );
    assert!(
        !rules.iter().any(|r| r.ends_with("proto 176")),
        "{rules:#?}"
    );
    assert!(
        ns.routes()
            .iter()
            .any(|r| r.starts_with("203.0.113.0/24 via - dev eth1")),
        "foreign route gone"
    );
    assert!(!ns.routes().iter().any(|r| r.ends_with("proto 176")));
    assert!(!ns.addresses().contains(&"eth1 10.98.1.21/32".to_owned()));
}

#[test]
fn a_failed_write_leaves_the_namespace_as_before() {
    let ns = example_ns("rollback");
    let dir = TempDir::new("rollback");
    let good = plan_json(&dir, &["--example"]);
    // Break eth2's default route: its gateway is on no link, which the kernel refuses
    // only after the addresses and eth1's routes went in.
    let text = std::fs::read_to_string(&good)
        .unwrap()
        .replace("\"10.98.2.1\"", "\"192.0.2.1\"");
    let bad = dir.file("bad.json", &text);
    let before = ns.snapshot();
    let out = leasehook(
        &ns,
        &[
            "apply",
            "--root",
            dir.0.to_str().unwrap(),
            "--plan",
            bad.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("ip -4 route add default via 192.0.2.1 dev eth2 table 10101"),
        "{err}"
    );
    assert!(err.contains("rolled back the"), "{err}");
    assert_eq!(ns.snapshot(), before);
    assert!(
        !dir.0.join("run/leasehook/iface/eth1.json").exists(),
        "state recorded for a failed apply"
    );
}

#[test]
fn flush_after_the_link_was_deleted_removes_its_rules() {
    let ns = example_ns("gone");
    let dir = TempDir::new("gone");
    let plan = plan_json(&dir, &["--example"]);
    apply(&ns, &dir, &plan);
    ns.ip(&["link", "del", "eth1"]);
    assert!(
        ns.rules()
            .iter()
            .any(|r| r.contains("lookup 10001 proto 176")),
        "rules are not bound to a device"
    );
    let out = ok(&leasehook(
        &ns,
        &[
            "flush",
            "-v",
            "--root",
            dir.0.to_str().unwrap(),
            "--iface",
            "eth1",
        ],
    ));
    assert!(out.ends_with("4 change(s): 0 added, 4 removed\n"), "{out}");
    assert!(!ns.rules().iter().any(|r| r.contains("lookup 10001")));
    assert!(
        ns.rules()
            .iter()
            .any(|r| r.contains("lookup 10101 proto 176")),
        "eth2 untouched"
    );
    assert!(!dir.0.join("run/leasehook/iface/eth1.json").exists());
}

/// The gateway of a table's default route is reachable only through that table's
/// own link route when the main table has no route to the subnet (a Kubernetes CNI
/// that took the ENI's subnet route out of main, a /32 lease): the kernel checks the
/// gateway in the route's table first, so apply must add on-link routes before the
/// routes through a gateway, and delete them after.
#[test]
fn a_default_route_whose_gateway_only_the_table_reaches() {
    let ns = example_ns("onlink");
    let dir = TempDir::new("onlink");
    ns.ip(&["route", "del", "10.98.1.0/24", "dev", "eth1"]);
    let plan = plan_json(&dir, &["--example"]);
    let out = apply(&ns, &dir, &plan);
    assert!(
        out.ends_with("12 change(s): 12 added, 0 removed\n"),
        "{out}"
    );
    let routes = ns.routes();
    assert!(
        routes
            .iter()
            .any(|r| r == "default via 10.98.1.1 dev eth1 scope - src - table 10001 proto 176"),
        "{routes:#?}"
    );
    let out = ok(&leasehook(
        &ns,
        &[
            "flush",
            "-v",
            "--root",
            dir.0.to_str().unwrap(),
            "--iface",
            "eth1",
        ],
    ));
    assert!(out.ends_with("removed\n"), "{out}");
    assert!(!ns.routes().iter().any(|r| r.contains("table 10001")));
}

/// Two namespaces as an instance and its VPC router. The router drops packets whose
/// source does not belong to the link they arrive on (`rp_filter=1`, as an ENI's
/// source/destination check does), so a connection from the secondary address only
/// works once policy routing sends it out of the secondary NIC.
#[test]
fn traffic_from_the_secondary_address_needs_the_plan() {
    let router = Netns::new("vpc");
    let inst = Netns::new("inst");
    for (i, mac) in [(0, "02:00:00:00:00:01"), (1, "02:00:00:00:00:02")] {
        let (gw, eth) = (format!("gw{i}"), format!("eth{i}"));
        router.ip(&[
            "link", "add", "name", &gw, "type", "veth", "peer", "name", &eth, "netns", &inst.name,
        ]);
        inst.ip(&["link", "set", &eth, "address", mac]);
        router.ip(&["address", "add", &format!("10.98.{i}.1/24"), "dev", &gw]);
        router.ip(&["link", "set", &gw, "up"]);
        inst.ip(&["link", "set", &eth, "up"]);
    }
    inst.ip(&["address", "add", "10.98.0.10/24", "dev", "eth0"]);
    inst.ip(&["address", "add", "10.98.1.20/24", "dev", "eth1"]);
    inst.ip(&["route", "add", "default", "via", "10.98.0.1", "dev", "eth0"]);
    router.ip(&["address", "add", "198.51.100.10/32", "dev", "lo"]);
    for key in [
        "net.ipv4.conf.all.rp_filter",
        "net.ipv4.conf.gw0.rp_filter",
        "net.ipv4.conf.gw1.rp_filter",
    ] {
        router.sysctl(key, "1");
    }
    // A listening socket completes handshakes by itself; no accept loop needed.
    let mut server = router
        .command("/usr/bin/python3")
        .args(["-c", "import socket,time\ns=socket.socket()\ns.bind(('198.51.100.10',8080))\ns.listen(64)\nprint('ready',flush=True)\ntime.sleep(60)"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Keep the pipe open until the end: the server must not die of SIGPIPE.
    let mut server_out = server.stdout.take().unwrap();
    let mut ready = [0u8; 6];
    server_out.read_exact(&mut ready).unwrap();
    assert_eq!(&ready, b"ready\n");
    let connect = |src: &str| {
        inst.command("/usr/bin/python3")
            .args(["-c", &format!("import socket\nsocket.create_connection(('198.51.100.10',8080),timeout=2,source_address=('{src}',0))")])
            .output()
            .unwrap()
            .status
            .success()
    };
    let primary_ok = connect("10.98.0.10");
    let secondary_before = connect("10.98.1.20");

    let dir = TempDir::new("traffic");
    let md = dir.file(
        "md.json",
        r#"{"mac": "02:00:00:00:00:01", "network": {"interfaces": {"macs": {
            "02:00:00:00:00:01": {"device-number": "0", "local-ipv4s": "10.98.0.10", "subnet-ipv4-cidr-block": "10.98.0.0/24"},
            "02:00:00:00:00:02": {"device-number": "1", "local-ipv4s": "10.98.1.20", "subnet-ipv4-cidr-block": "10.98.1.0/24"}}}}}"#,
    );
    let lease = dir.file("eth1.env", "reason=BOUND\ninterface=eth1\nnew_ip_address=10.98.1.20\nnew_subnet_mask=255.255.255.0\nnew_routers=10.98.1.1\n");
    let plan = plan_json(
        &dir,
        &[
            "--metadata",
            md.to_str().unwrap(),
            "--link",
            "eth1=02:00:00:00:00:02",
            "--lease",
            lease.to_str().unwrap(),
        ],
    );
    apply(&inst, &dir, &plan);
    let secondary_after = connect("10.98.1.20");
    server.kill().unwrap();
    server.wait().unwrap();
    drop(server_out);
    assert!(
        primary_ok,
        "the primary address cannot reach the server: the lab is broken"
    );
    assert!(
        !secondary_before,
        "the secondary address connected without policy routing: the lab does not check sources"
    );
    assert!(
        secondary_after,
        "the secondary address still cannot connect after `leasehook apply`"
    );
}

/// `leasehook flush` of many interfaces in one run (one observation, the deletes
/// batched): everything of leasehook's goes, on every interface, also what no state
/// file records any more (a lost file), and nothing of anyone else's: the namespace
/// is as it was before the first apply, foreign rules, routes and addresses in
/// leasehook's tables and on its links included.
#[test]
fn flush_of_many_interfaces_removes_exactly_ours() {
    const NICS: usize = 8;
    let ns = Netns::new("flushmany");
    let dir = TempDir::new("flushmany");
    let mut macs = Vec::new();
    let mut args: Vec<String> = Vec::new();
    for n in 0..NICS {
        let (name, mac) = (format!("ens{}", 5 + n), format!("02:00:00:00:02:{n:02x}"));
        ns.veth(&name, &mac, &format!("p{n}"));
        ns.ip(&["address", "add", &format!("10.{n}.0.10/24"), "dev", &name]);
        let v4: Vec<String> = (10..16).map(|k| format!("10.{n}.0.{k}")).collect();
        let v6: Vec<String> = (1..4)
            .map(|k| format!("2600:1f18:0:{n:x}::{k:x}"))
            .collect();
        macs.push(format!(
            r#""{mac}": {{"device-number": "{n}", "local-ipv4s": "{}", "ipv6s": "{}",
                "subnet-ipv4-cidr-block": "10.{n}.0.0/24", "subnet-ipv6-cidr-blocks": "2600:1f18:0:{n:x}::/64"}}"#,
            v4.join("\\n"),
            v6.join("\\n")
        ));
        let v4_lease = dir.file(
            &format!("{name}-4.env"),
            &format!("reason=BOUND\ninterface={name}\nnew_ip_address=10.{n}.0.10\nnew_subnet_mask=255.255.255.0\nnew_routers=10.{n}.0.1\n"),
        );
        let v6_lease = dir.file(
            &format!("{name}-6.env"),
            &format!("reason=BOUND6\ninterface={name}\nnew_ip6_address=2600:1f18:0:{n:x}::1\nnew_ip6_prefixlen=128\n"),
        );
        args.extend([
            "--link".to_owned(),
            format!("{name}={mac},ra=fe80::1"),
            "--lease".to_owned(),
            v4_lease.to_str().unwrap().to_owned(),
            "--lease".to_owned(),
            v6_lease.to_str().unwrap().to_owned(),
        ]);
    }
    let md = dir.file(
        "md.json",
        &format!(
            r#"{{"mac": "02:00:00:00:02:00", "network": {{"interfaces": {{"macs": {{{}}}}}}}}}"#,
            macs.join(",")
        ),
    );
    args.extend(["--metadata".to_owned(), md.to_str().unwrap().to_owned()]);
    // Someone else's objects, in leasehook's tables and on its links: a rule of
    // another protocol, a route of another protocol in table 10001 and one in main,
    // and an operator's address of each family.
    ns.ip(&[
        "rule",
        "add",
        "from",
        "10.1.0.99",
        "lookup",
        "10101",
        "priority",
        "10101",
    ]);
    ns.ip(&[
        "-6",
        "rule",
        "add",
        "from",
        "2600:1f18:0:1::99",
        "lookup",
        "10101",
        "priority",
        "10101",
    ]);
    ns.ip(&[
        "route",
        "add",
        "203.0.113.0/24",
        "dev",
        "ens6",
        "table",
        "10101",
    ]);
    ns.ip(&["route", "add", "198.51.100.0/24", "dev", "ens7"]);
    ns.ip(&["address", "add", "10.2.0.99/32", "dev", "ens7"]);
    ns.ip(&[
        "-6",
        "address",
        "add",
        "2600:1f18:0:2::99/128",
        "dev",
        "ens7",
        "nodad",
    ]);
    let before = ns.snapshot();
    let plan = plan_json(&dir, &args.iter().map(String::as_str).collect::<Vec<_>>());
    let applied = apply(&ns, &dir, &plan);
    let writes: usize = applied
        .lines()
        .last()
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    let ours = |s: &(Vec<String>, Vec<String>, Vec<String>)| {
        s.0.iter()
            .chain(&s.1)
            .filter(|l| l.ends_with("proto 176"))
            .count()
    };
    let during = ns.snapshot();
    assert!(ours(&during) > 10 * NICS, "{during:#?}");
    assert!(
        during.2.len() > before.2.len(),
        "no secondary address applied"
    );
    // One state file lost: its interface's objects are still leasehook's (protocol
    // 176) and go too.
    let iface = dir.0.join("run/leasehook/iface");
    std::fs::remove_file(iface.join("ens8.json")).unwrap();
    let out = ok(&leasehook(
        &ns,
        &["flush", "--root", dir.0.to_str().unwrap()],
    ));
    assert_eq!(
        out.lines().last().unwrap(),
        format!("{writes} change(s): 0 added, {writes} removed"),
        "{out}"
    );
    assert_eq!(ns.snapshot(), before);
    let left: Vec<_> = std::fs::read_dir(&iface)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "state files left: {left:?}");
    // Nothing of leasehook's is left to remove.
    let again = ok(&leasehook(
        &ns,
        &["flush", "--root", dir.0.to_str().unwrap()],
    ));
    assert_eq!(again, "0 change(s): 0 added, 0 removed\n");
}

/// A provider whose metadata agrees with every lease at once.
#[derive(Debug)]
struct Agrees(leasehook_core::model::InstanceNetwork);

impl leasehook_core::source::provider::Provider for Agrees {
    fn kind(&self) -> leasehook_core::source::provider::ProviderKind {
        leasehook_core::source::provider::ProviderKind::from_name("ec2").unwrap()
    }

    fn wait_for_nic(
        &self,
        _nic: &leasehook_core::source::ec2::NicEvent,
        _policy: &leasehook_core::source::provider::WaitPolicy,
        _clock: &dyn leasehook_core::source::provider::Clock,
    ) -> leasehook_core::source::provider::Outcome {
        leasehook_core::source::provider::Outcome::Complete(self.0.clone())
    }
}

/// Issue 32, items 4 and 6: a lease event reads the kernel's state once per
/// kind, not once per reader: one rule dump for the Kubernetes gate before the
/// wait, the links (to find the NIC) and, after a wait the metadata answered at
/// once, one snapshot on those links (rules, routes of both families and every
/// table, addresses) that the planner reads and the applier observes. An
/// unchanged RENEW sent 12 dump requests before, 6 with the links read twice.
#[test]
fn a_lease_event_dumps_each_kind_of_kernel_state_once() {
    use leasehook_core::hook::{Effects, HookConfig, HookOutcome, handle_with};
    use leasehook_core::model::{Family, IfName, Lease, LeaseEvent, Reason};

    let ns = Netns::new("perf-dumps");
    ns.veth("eth0", "02:00:00:00:00:01", "peer0");
    ns.veth("eth1", "02:00:00:00:00:02", "peer1");
    ns.ip(&["address", "add", "10.0.1.20/24", "dev", "eth1"]);
    let root = TempDir::new("perf-dumps");
    let env: leasehook_core::event::Env = [
        ("LEASEHOOK_CONFIG", "/dev/null"),
        ("LEASEHOOK_ROOT", root.0.to_str().unwrap()),
        ("LEASEHOOK_IMDS_BUDGET_S", "3"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    let cfg = HookConfig::load(&env).unwrap();
    let network = leasehook_core::metadata::parse_tree(&serde_json::json!({
        "mac": "02:00:00:00:00:01",
        "network": {"interfaces": {"macs": {
            "02:00:00:00:00:01": {"device-number": "0", "local-ipv4s": "10.0.0.10",
                                  "subnet-ipv4-cidr-block": "10.0.0.0/24"},
            "02:00:00:00:00:02": {"device-number": "1", "local-ipv4s": "10.0.1.20\n10.0.1.21",
                                  "subnet-ipv4-cidr-block": "10.0.1.0/24"}
        }}}
    }))
    .unwrap();
    let event = |reason| LeaseEvent {
        interface: IfName::try_new("eth1").unwrap(),
        family: Family::V4,
        reason,
        new: Some(Lease {
            family: Family::V4,
            address: "10.0.1.20".parse().unwrap(),
            prefix_len: 24,
            routers: vec!["10.0.1.1".parse().unwrap()],
            reason,
        }),
        old: None,
    };
    let (bound, renew) = ns.run_in(move || {
        let mut kernel = leasehook_core::apply::netlink::NetlinkApplier::try_new().unwrap();
        let provider = Agrees(network);
        let mut dumped = Vec::new();
        let mut outcomes = Vec::new();
        for reason in [Reason::Bound, Reason::Renew] {
            let before = kernel.dumps();
            let mut fx = Effects {
                kernel: &mut kernel,
                provider: &provider,
                clock: &leasehook_core::source::provider::SystemClock,
            };
            outcomes.push(
                handle_with(&mut fx, &event(reason), &cfg, Path::new("/nonexistent")).unwrap(),
            );
            dumped.push(kernel.dumps() - before);
        }
        (
            (dumped[0], outcomes.remove(0)),
            (dumped[1], outcomes.remove(0)),
        )
    });
    assert!(
        matches!(&bound.1, HookOutcome::Applied(r) if r.writes() == 5),
        "{:?}",
        bound.1
    );
    assert!(
        matches!(&renew.1, HookOutcome::Applied(r) if r.writes() == 0),
        "{:?}",
        renew.1
    );
    // Written, and seen by `ip`: what the snapshot held was the kernel's truth.
    let rules = ns.rules();
    assert!(
        rules.contains(&"10001 from 10.0.1.20 lookup 10001 proto 176".to_owned()),
        "{rules:?}"
    );
    // One rule dump (the Kubernetes gate), one link dump, then the snapshot's
    // three: rules, routes, addresses.
    assert_eq!((bound.0, renew.0), (5, 5));
}

/// Whether this kernel makes an 802.1Q VLAN (tried on `link` in `ns`, removed again).
fn vlan_works(ns: &Netns, link: &str) -> bool {
    let ok = Command::new("ip")
        .args([
            "-n", &ns.name, "link", "add", "link", link, "name", "probe9",
        ])
        .args(["type", "vlan", "id", "9"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        ns.ip(&["link", "del", "probe9"]);
    }
    ok
}

/// Issue 36 item 3, the real kernel's part: the macvlan leasehook creates
/// carries the VNIC's MAC and the alias `leasehook:<MAC>` (as `ip -d link`
/// shows them), is up, sits on the NIC, is found by the MAC; the operator's
/// macvlan of the same naming (no alias) is never leasehook's; with nothing
/// listed, only leasehook's link is deleted. Then a VLAN VNIC: on a kernel
/// without 802.1Q (this CI's) the VLAN is refused and the macvlan made for it
/// deleted again (the rollback, in the kernel); with 802.1Q both exist and the
/// lookup by MAC takes the VLAN, not the macvlan under it.
#[test]
fn links_leasehook_creates_are_marked_found_by_mac_and_only_they_are_deleted() {
    use leasehook_core::apply::Applier as _;
    use leasehook_core::apply::links::{
        LinkKernel as _, LinkKind, Lower, NewKind, NewLink, NicLink, Parent, reconcile,
    };
    use leasehook_core::apply::netlink::NetlinkApplier;
    use leasehook_core::model::{IfName, MacAddr};

    let ns = Netns::new("ocilinks");
    ns.veth("eth0", "02:00:00:00:00:01", "peer0");
    // The operator's macvlan, named as leasehook would name one, unmarked.
    ns.ip(&[
        "link", "add", "link", "eth0", "name", "eth0.7", "type", "macvlan",
    ]);
    ns.ip(&["link", "set", "eth0.7", "address", "02:aa:00:00:00:07"]);
    let names = |ns: &Netns| -> Vec<String> {
        let mut n: Vec<String> = ns
            .ip_json(&["link", "show"])
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["ifname"].as_str().unwrap().to_owned())
            .collect();
        n.sort();
        n
    };
    let vnic: MacAddr = "02:00:17:05:cf:51".parse().unwrap();
    let (eth0, made, found, details) = ns.run_in(move || {
        let mut k = NetlinkApplier::try_new().unwrap();
        let links = k.links().unwrap();
        let eth0 = links
            .iter()
            .find(|l| l.name.as_str() == "eth0")
            .unwrap()
            .index;
        let new = NewLink {
            name: IfName::try_new("eth0.100").unwrap(),
            lower: Lower::Index(eth0),
            kind: NewKind::Macvlan(vnic),
            owner: vnic,
        };
        let made = k.add_link(&new, eth0).unwrap();
        let found = k
            .links()
            .unwrap()
            .into_iter()
            .find(|l| l.mac == Some(vnic))
            .map(|l| l.name.to_string());
        (eth0, made, found, k.link_details().unwrap())
    });
    assert_eq!(found.as_deref(), Some("eth0.100"));
    let ours = details.iter().find(|d| d.index == made).unwrap();
    assert_eq!(
        (ours.kind, ours.lower, ours.ours()),
        (LinkKind::Macvlan, Some(eth0), Some(vnic))
    );
    let theirs = details
        .iter()
        .find(|d| d.name.as_str() == "eth0.7")
        .unwrap();
    assert_eq!((theirs.kind, theirs.ours()), (LinkKind::Macvlan, None));
    let shown = &ns.ip_json(&["-d", "link", "show", "eth0.100"])[0];
    assert_eq!(shown["ifalias"], "leasehook:02:00:17:05:cf:51", "{shown}");
    assert_eq!(shown["address"], "02:00:17:05:cf:51", "{shown}");
    assert_eq!(shown["link"], "eth0", "{shown}");
    assert_eq!(shown["linkinfo"]["info_kind"], "macvlan", "{shown}");
    assert!(
        shown["flags"].as_array().unwrap().iter().any(|f| f == "UP"),
        "{shown}"
    );

    // Nothing listed: leasehook's link goes, the operator's stays.
    let r = ns.run_in(|| reconcile(&mut NetlinkApplier::try_new().unwrap(), &[], Some(&[])));
    assert_eq!(r.deleted, [IfName::try_new("eth0.100").unwrap()], "{r:?}");
    assert_eq!(names(&ns), ["eth0", "eth0.7", "lo", "peer0"]);

    // A VLAN VNIC on physical NIC 0 (eth0, before peer0 by name).
    let vlan = vlan_works(&ns, "eth0");
    let want = [(
        vnic,
        NicLink::MacvlanVlan {
            parent: Parent::NicIndex(0),
            vlan: 5,
        },
    )];
    let (r, found) = ns.run_in(move || {
        let mut k = NetlinkApplier::try_new().unwrap();
        let r = reconcile(&mut k, &want, Some(&[vnic]));
        let found: Vec<String> = k
            .links()
            .unwrap()
            .into_iter()
            .filter(|l| l.mac == Some(vnic))
            .map(|l| l.name.to_string())
            .collect();
        (r, found)
    });
    if vlan {
        assert!(r.problems.is_empty(), "{r:?}");
        assert_eq!(found, ["eth0v5"], "{r:?}");
        let shown = &ns.ip_json(&["-d", "link", "show", "eth0v5"])[0];
        assert_eq!(shown["link"], "eth0.5", "{shown}");
        assert_eq!(shown["ifalias"], "leasehook:02:00:17:05:cf:51", "{shown}");
    } else {
        assert!(r.created.is_empty(), "{r:?}");
        assert!(
            r.problems
                .iter()
                .any(|p| p.contains("could not create eth0v5")),
            "{r:?}"
        );
        assert!(found.is_empty(), "{found:?}");
        assert_eq!(names(&ns), ["eth0", "eth0.7", "lo", "peer0"]);
    }
}

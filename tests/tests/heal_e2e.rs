// SPDX-License-Identifier: Apache-2.0
//! Issue 35, item 1, in the end-to-end world with real dhclient: `leasehook
//! watch` puts back what someone else removes (a rule deleted and the table
//! flushed come back, one repair logged, another protocol's rule at the same
//! priority untouched), and a loop that keeps deleting a rule ends in a recorded
//! conflict after three repairs, which `status` shows until a refresh clears it.
//! No refresh timer runs in the world: only the watcher can put things back.
//! The bounds are generous (10 s for a repair the watcher makes within 150-500 ms;
//! the latency is `bench/run watch`'s). Compiled with the `netns` feature; needs
//! root.

#![cfg(feature = "netns")]
#![cfg(test)]

use std::path::PathBuf;
use std::process::{Child, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use leasehook_tests::netns::{leasehook_bin, show};
use leasehook_tests::world::{World, wait_until};

/// eth1's table in the default world.
const TABLE: &str = "10001";

/// `leasehook watch` in the instance, its log in a file.
struct Watch {
    child: Child,
    log: PathBuf,
}

impl Watch {
    fn start(w: &World) -> Self {
        let log = w.dir.0.join("watch.log");
        let mut cmd = w.inst.command(leasehook_bin().to_str().unwrap());
        cmd.envs(w.hook_env().iter().map(|(k, v)| (k.as_str(), v.as_str())));
        cmd.arg("watch")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        let child = cmd.spawn().unwrap();
        let watch = Self { child, log };
        assert!(
            wait_until(Duration::from_secs(10), || watch
                .log()
                .contains("self-healing: following")),
            "the watcher did not start: {}",
            watch.log()
        );
        // Started with nothing missing: its first check repaired nothing.
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(
            watch.repairs("eth0") + watch.repairs("eth1"),
            0,
            "{}",
            watch.log()
        );
        watch
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The repair lines naming `iface`.
    fn repairs(&self, iface: &str) -> usize {
        self.log()
            .lines()
            .filter(|l| l.contains(&format!("{iface}: put back what something else removed")))
            .count()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// `leasehook ARGS` inside the instance with the hooks' environment.
fn leasehook(w: &World, args: &[&str]) -> Output {
    w.leasehook(args, &[])
}

/// eth1's rule (`ip rule` line): its priority and its selector.
fn eth1_rule(w: &World) -> (String, String) {
    // `10001 from 10.98.1.20/32 lookup 10001 proto 176`
    let line = w
        .our_rules()
        .into_iter()
        .find(|r| r.contains(&format!("lookup {TABLE} ")))
        .expect("eth1's rule");
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[1], "from", "{line}");
    (words[0].to_owned(), words[2].to_owned())
}

fn sorted_rules(w: &World) -> Vec<String> {
    let mut r = w.our_rules();
    r.sort();
    r
}

fn table_routes(w: &World) -> Vec<String> {
    let mut r: Vec<String> = w
        .our_routes()
        .into_iter()
        .filter(|r| r.contains(&format!("table {TABLE}")))
        .collect();
    r.sort();
    r
}

#[test]
fn a_deleted_rule_and_a_flushed_table_come_back_with_one_repair() {
    let w = World::bound_two("selfheal-a");
    let (prio, from) = eth1_rule(&w);
    let (rules, routes) = (sorted_rules(&w), table_routes(&w));
    assert!(!routes.is_empty());
    // Another tool's rule at our priority: never touched.
    w.inst.ip(&[
        "rule",
        "add",
        "from",
        "192.0.2.77",
        "lookup",
        TABLE,
        "priority",
        &prio,
        "proto",
        "static",
    ]);
    let theirs = |w: &World| {
        w.inst
            .rules()
            .into_iter()
            .any(|r| r.contains("from 192.0.2.77 ") && !r.ends_with("proto 176"))
    };
    assert!(theirs(&w));
    let watch = Watch::start(&w);

    // Both in one burst, as a manager reapplying its own plan does.
    let script = format!(
        "ip rule del from {from} lookup {TABLE} priority {prio} proto 176 && ip route flush table {TABLE}"
    );
    let out = w.inst.command("sh").args(["-c", &script]).output().unwrap();
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        wait_until(Duration::from_secs(10), || sorted_rules(&w) == rules
            && table_routes(&w) == routes),
        "not put back: rules {:?} routes {:?}\n{}",
        w.our_rules(),
        table_routes(&w),
        watch.log()
    );
    // One repair, naming the NIC, the rule and the routes.
    std::thread::sleep(Duration::from_millis(700));
    let log = watch.log();
    assert_eq!(watch.repairs("eth1"), 1, "{log}");
    assert_eq!(watch.repairs("eth0"), 0, "{log}");
    let line = log.lines().find(|l| l.contains("eth1: put back")).unwrap();
    assert!(
        line.contains(&format!("rule from {from}")) && line.contains(&format!("table {TABLE}")),
        "{line}"
    );
    assert!(theirs(&w), "another protocol's rule was touched\n{log}");
    // status: healthy again, the repair counted.
    let o = leasehook(&w, &["status", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let eth1 = doc["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "eth1")
        .unwrap();
    assert_eq!(eth1["repairs"], 1, "{}", show(&o));
    let o = leasehook(&w, &["status", "--format", "prometheus"]);
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .contains("leasehook_repairs_total{interface=\"eth1\"} 1\n"),
        "{}",
        show(&o)
    );
}

#[test]
fn a_rule_deleted_every_200_ms_ends_in_a_conflict_after_three_repairs() {
    let w = World::bound_two("selfheal-b");
    let (prio, from) = eth1_rule(&w);
    let rules = sorted_rules(&w);
    let watch = Watch::start(&w);
    let conflict = w.root.join("run/leasehook/conflict/eth1");

    let done = Arc::new(AtomicBool::new(false));
    let fighter = {
        let done = Arc::clone(&done);
        let mut cmd = w.inst.command("sh");
        cmd.args([
            "-c",
            &format!(
                "while :; do ip rule del from {from} lookup {TABLE} priority {prio} proto 176 2>/dev/null; sleep 0.2; done"
            ),
        ]);
        std::thread::spawn(move || {
            let mut child = cmd.spawn().unwrap();
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        })
    };
    let recorded = wait_until(Duration::from_secs(20), || conflict.exists());
    done.store(true, Ordering::Relaxed);
    fighter.join().unwrap();
    assert!(recorded, "no conflict recorded\n{}", watch.log());
    // Three repairs, then it stopped: the rule stays deleted.
    std::thread::sleep(Duration::from_secs(1));
    let log = watch.log();
    assert_eq!(watch.repairs("eth1"), 3, "{log}");
    assert!(
        !w.our_rules()
            .iter()
            .any(|r| r.contains(&format!("from {from}"))),
        "still fighting: {:?}\n{log}",
        w.our_rules()
    );
    let record = std::fs::read_to_string(&conflict).unwrap();
    assert!(
        record.contains("eth1: removed by something else again after 3 repairs")
            && record.contains(&format!("rule from {from}")),
        "{record}"
    );
    let o = leasehook(&w, &["status"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        text.contains("conflict: eth1: removed by something else again after 3 repairs"),
        "{}",
        show(&o)
    );
    let o = leasehook(&w, &["status", "--format", "yaml"]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("removed by something else again"),
        "{}",
        show(&o)
    );

    // A refresh commits eth1 again: the rule is back, the conflict cleared, and
    // the watcher fights for it again.
    let o = leasehook(&w, &["refresh"]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(!conflict.exists(), "{}", show(&o));
    assert_eq!(sorted_rules(&w), rules);
    let o = leasehook(&w, &["status"]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    w.inst.ip(&[
        "rule", "del", "from", &from, "lookup", TABLE, "priority", &prio, "proto", "176",
    ]);
    assert!(
        wait_until(Duration::from_secs(10), || sorted_rules(&w) == rules),
        "{}",
        watch.log()
    );
    assert!(wait_until(Duration::from_secs(5), || watch.repairs("eth1") == 4));
}

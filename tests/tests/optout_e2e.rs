// SPDX-License-Identifier: Apache-2.0
//! Issue 33, items 5 and 7: the off switch, the stable opt-outs and leasehook
//! inert where it does not belong, end to end in the namespace lab (every path
//! under the world's temp root):
//!
//! - `enabled: false` and `LEASEHOOK_ENABLED=0`: a BOUND exits 0, asks the IMDS
//!   emulator nothing and leaves the kernel and the run-time folder as they were;
//! - each `unmanaged` form (name glob, MAC, `device-number:N`, `network-card:N`,
//!   `interface-id:ID`) leaves eth1 untouched while eth0 is routed;
//! - off-cloud: `init` exits 0 ("no datasource: nothing to do"), and a BOUND then
//!   returns at once with no request; in another boot, DMI decides again;
//! - the udev remove rule leaves no lock file for a veth leasehook never managed.
//!
//! Compiled with the `netns` feature; needs root, isc-dhcp-client and dnsmasq, and
//! fails, never skips, without them.

#![cfg(feature = "netns")]
#![cfg(test)]

use std::process::Output;
use std::time::{Duration, Instant};

use leasehook_tests::netns::{Netns, TempDir, leasehook_bin, sibling_bin};
use leasehook_tests::world::{MAC1, World, WorldOptions, default_tree, wait_until};

/// eth1's BOUND as dhclient-script hands it to the shim (eth1's address set by
/// hand first, as the script does before its exit hooks), with `extra`
/// environment; its output and how long it took.
fn bound_eth1(w: &World, extra: &[(&str, &str)]) -> (Output, Duration) {
    if !w
        .inst
        .ip(&["-4", "addr", "show", "eth1"])
        .contains("10.98.1.20")
    {
        w.inst
            .ip(&["address", "add", "10.98.1.20/24", "dev", "eth1"]);
        w.inst
            .ip(&["route", "add", "default", "via", "10.98.1.1", "dev", "eth1"]);
    }
    let mut cmd = w
        .inst
        .command(sibling_bin("leasehook-dhclient").to_str().unwrap());
    cmd.env_clear()
        .envs(w.hook_env().iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .envs(extra.iter().copied())
        .env("reason", "BOUND")
        .env("interface", "eth1")
        .env("new_ip_address", "10.98.1.20")
        .env("new_subnet_mask", "255.255.255.0")
        .env("new_routers", "10.98.1.1");
    let t0 = Instant::now();
    let out = cmd.output().unwrap();
    (out, t0.elapsed())
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The files under the world's `run/leasehook` (none when it does not exist).
fn run_files(w: &World) -> Vec<String> {
    fn walk(dir: &std::path::Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p.display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(&w.root.join("run/leasehook"), &mut out);
    out
}

fn write_config(w: &World, text: &str) {
    let etc = w.root.join("etc/leasehook");
    std::fs::create_dir_all(&etc).unwrap();
    std::fs::write(etc.join("config.yaml"), text).unwrap();
}

#[test]
fn the_off_switch_asks_nothing_and_changes_nothing() {
    let w = World::new("off", &WorldOptions::default());
    let kernel = w.inst.snapshot();
    for (config, env) in [
        ("enabled: false\n", vec![]),
        ("", vec![("LEASEHOOK_ENABLED", "0")]),
    ] {
        write_config(&w, config);
        let (out, took) = bound_eth1(&w, &env);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("disabled (configuration key enabled is false): nothing done"),
            "{config:?} {env:?}: {}",
            stderr(&out)
        );
        assert_eq!(
            w.imds_log(),
            "",
            "{config:?} {env:?}: a request reached IMDS"
        );
        assert!(w.our_rules().is_empty() && w.our_routes().is_empty());
        assert!(run_files(&w).is_empty(), "{:#?}", run_files(&w));
        eprintln!("off switch ({config:?} {env:?}): BOUND took {took:?}");
        // refresh (the timer's command) is a no-op too.
        let r = w
            .inst
            .command(leasehook_bin().to_str().unwrap())
            .env_clear()
            .envs(w.hook_env().iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .envs(env.iter().copied())
            .arg("refresh")
            .output()
            .unwrap();
        assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
        assert_eq!(String::from_utf8_lossy(&r.stdout), "");
    }
    // The kernel as before (eth1's address and route are the test's own).
    let (rules, _, _) = w.inst.snapshot();
    assert_eq!(rules, kernel.0);
    // `status` says so.
    write_config(&w, "enabled: false\n");
    let s = w
        .inst
        .command(leasehook_bin().to_str().unwrap())
        .args(["status", "--root", w.root.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&s.stdout)
            .contains("disabled (configuration key enabled is false)"),
        "{s:?}"
    );
    // Switched on again, the same event asks IMDS and routes eth1: the event
    // above was one leasehook would have acted on.
    write_config(&w, "");
    let (out, _) = bound_eth1(&w, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!w.imds_log().is_empty());
    assert!(
        w.our_rules()
            .contains(&"10001 from 10.98.1.20 lookup 10001 proto 176".to_owned()),
        "{:#?}\n{}",
        w.our_rules(),
        stderr(&out)
    );
}

/// eth0 and eth1 bound by dhclient with `unmanaged: [entry]` (and the primary's
/// rules on, so eth0 is routed too): eth0 gets its rule and table, eth1 nothing.
fn unmanaged_leaves_eth1_alone(tag: &str, entry: &str, tree: serde_json::Value) {
    let opts = WorldOptions {
        tree: Some(tree),
        ..WorldOptions::default()
    };
    let mut w = World::new(tag, &opts);
    write_config(
        &w,
        &format!("primary_rules: true\nunmanaged: [\"{entry}\"]\n"),
    );
    w.bind("eth0", false);
    w.bind("eth1", false);
    let said = "eth1 is unmanaged (configuration key unmanaged";
    w.wait_logged("eth1", said, 15, entry);
    assert!(
        wait_until(Duration::from_secs(15), || w
            .our_rules()
            .iter()
            .any(|r| r.contains("from 10.98.0.10 lookup"))),
        "{entry}: eth0 not routed: {:#?}\n{}",
        w.our_rules(),
        w.log("eth0", false)
    );
    let ours = w.our_rules().join("\n") + &w.our_routes().join("\n");
    assert!(
        !ours.contains("10.98.1.") && !ours.contains("eth1"),
        "{entry}: eth1 was touched:\n{ours}"
    );
    assert!(
        !w.root.join("run/leasehook/iface/eth1.json").exists(),
        "{entry}: eth1 has a state"
    );
    // No secondary address either (10.98.1.21 is IMDS's).
    assert!(!w.inst.ip(&["addr", "show", "eth1"]).contains("10.98.1.21"));
}

#[test]
fn unmanaged_by_name_glob() {
    unmanaged_leaves_eth1_alone("um-glob", "eth[1-9]", default_tree());
}

#[test]
fn unmanaged_by_mac() {
    unmanaged_leaves_eth1_alone("um-mac", MAC1, default_tree());
}

#[test]
fn unmanaged_by_device_number() {
    unmanaged_leaves_eth1_alone("um-dev", "device-number:1", default_tree());
}

#[test]
fn unmanaged_by_interface_id() {
    unmanaged_leaves_eth1_alone(
        "um-eni",
        "interface-id:eni-0000000000000002",
        default_tree(),
    );
}

#[test]
fn unmanaged_by_network_card() {
    // A multi-card instance type: eth1 is device 0 on card 1.
    let mut tree = default_tree();
    let macs = &mut tree["latest"]["meta-data"]["network"]["interfaces"]["macs"];
    macs["02:00:00:00:00:01"]["network-card"] = "0".into();
    macs[MAC1]["network-card"] = "1".into();
    macs[MAC1]["device-number"] = "0".into();
    unmanaged_leaves_eth1_alone("um-card", "network-card:1", tree);
}

#[test]
fn off_cloud_init_exits_0_and_the_hook_asks_nothing() {
    let w = World::new("offcloud", &WorldOptions::default());
    let boot_id = w.root.join("proc/sys/kernel/random/boot_id");
    std::fs::create_dir_all(boot_id.parent().unwrap()).unwrap();
    std::fs::write(&boot_id, "b0000000-0000-4000-8000-000000000001\n").unwrap();
    // The world's root has no DMI, no seed, no LXD socket: no cloud.
    for local in [true, false] {
        let mut cmd = w.inst.command(leasehook_bin().to_str().unwrap());
        cmd.env_clear()
            .args(["init", "--root", w.root.to_str().unwrap()]);
        if local {
            cmd.arg("--local");
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("no datasource: nothing to do"),
            "{out:?}"
        );
    }
    let (out, took) = bound_eth1(&w, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(w.imds_log(), "", "a request reached IMDS: {}", stderr(&out));
    assert!(w.our_rules().is_empty() && w.our_routes().is_empty());
    assert!(
        stderr(&out).contains("the boot stage found no datasource this boot: nothing to do"),
        "{}",
        stderr(&out)
    );
    eprintln!("off-cloud BOUND took {took:?}");
    // Another boot, whose boot stage has not run: DMI decides, as before (no
    // cloud named: EC2), and IMDS is asked.
    std::fs::write(&boot_id, "b0000000-0000-4000-8000-000000000002\n").unwrap();
    let (out, _) = bound_eth1(&w, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!w.imds_log().is_empty(), "{}", stderr(&out));
}

#[test]
fn udev_remove_of_an_unknown_veth_leaves_no_lock_file() {
    let ns = Netns::new("optout-veth");
    let dir = TempDir::new("optout-veth");
    ns.ip(&[
        "link",
        "add",
        "veth9a8b7c",
        "type",
        "veth",
        "peer",
        "name",
        "veth9a8b7d",
    ]);
    ns.ip(&["link", "del", "veth9a8b7c"]);
    let run = leasehook_tests::udev_command("remove", "veth9a8b7c");
    assert_eq!(run[0], "/usr/bin/leasehook", "{run:?}");
    let out = ns
        .command(leasehook_bin().to_str().unwrap())
        .args(&run[1..])
        .env("LEASEHOOK_ROOT", &dir.0)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let lock = dir.0.join("run/leasehook/lock/veth9a8b7c.lock");
    assert!(!lock.exists(), "{lock:?} left behind");
    assert!(
        std::fs::read_dir(dir.0.join("run/leasehook/lock"))
            .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
            || std::fs::read_dir(dir.0.join("run/leasehook/lock"))
                .unwrap()
                .next()
                .is_none()
    );
}

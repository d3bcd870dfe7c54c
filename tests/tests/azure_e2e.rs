// SPDX-License-Identifier: Apache-2.0
//! Azure for real: the two-NIC world with the Azure IMDS emulator
//! (`leasehook_tests::azure_emulator`) on 169.254.169.254:80 in place of EC2's,
//! `LEASEHOOK_PROVIDER=azure`, and real DHCP clients (ISC dhclient, and
//! NetworkManager) running leasehook's hooks.
//!
//! The emulator answers only the primary NIC's primary address (10.98.0.10), as
//! IMDS does; every test checks from its log that no request came from anywhere
//! else (leasehook never binds a request to the event's NIC). The instance also
//! holds a VF-like link, `vf1`: a veth with eth1's MAC enslaved to a bridge (an
//! accelerated-networking VF carries the synthetic NIC's MAC and has a master),
//! given a lower interface index than eth1 so that a lookup by MAC that did not
//! skip it would find it first; it must never be touched.
//!
//! Compiled with the `netns` feature; needs root, isc-dhcp-client, dnsmasq and
//! network-manager, and fails, never skips, without them.

#![cfg(feature = "netns")]
#![cfg(test)]
#![allow(clippy::too_many_lines)]

use std::net::IpAddr;
use std::process::Output;
use std::time::Duration;

use leasehook_tests::azure_emulator::{HIDDEN_FILE, LOG_FILE, LogEntry, read_log};
use leasehook_tests::client::{Client, End, RENEW_T1};
use leasehook_tests::clouds::Cloud;
use leasehook_tests::netns::{Netns, leasehook_bin};
use leasehook_tests::shell::LogLine as _;
use leasehook_tests::world::{MAC1, World, WorldOptions, assert_primary_not_held, wait_until};

/// The primary NIC's primary address: the only source IMDS answers.
const PRIMARY: &str = "10.98.0.10";

/// Azure's DHCP options per NIC ([`CloudDhcp::Azure`]): the primary its router
/// and option 121, a secondary no router.
fn azure_opts() -> WorldOptions {
    Cloud::Azure.world(vec!["--allow-source".to_owned(), PRIMARY.to_owned()])
}

/// The world, with Debian's option-121 exit hook beside leasehook's: with
/// Azure's option 121 the primary's routes, the one to IMDS among them, come
/// from it.
fn world(tag: &str, opts: &WorldOptions) -> World {
    World::with_option_121_hook(tag, opts)
}

fn imds_log(w: &World) -> Vec<LogEntry> {
    read_log(&w.dir.0.join(LOG_FILE))
}

/// Every request came from the primary's primary address, with `Metadata: true`,
/// and was answered (none refused, none rate-limited); returns how many.
fn assert_primary_only(w: &World) -> usize {
    let log = imds_log(w);
    let primary: IpAddr = PRIMARY.parse().unwrap();
    let text: Vec<String> = log.iter().map(LogEntry::line).collect();
    assert!(!log.is_empty(), "no request reached IMDS");
    for e in &log {
        assert_eq!(
            e.source(),
            Some(primary),
            "a request did not come from the primary: {text:#?}"
        );
        assert_eq!(e.header, "true", "{text:#?}");
        assert_eq!(e.status, "200", "{text:#?}");
        assert!(
            e.url
                .starts_with("/metadata/instance/network?api-version=2021-02-01"),
            "{text:#?}"
        );
    }
    log.len()
}

/// Adds `vf1`, eth1's MAC on a veth enslaved to bridge `vfbr`, and gives it
/// eth1's interface index (eth1 goes to a namespace of its own for a moment and
/// comes back with a higher one): a lookup by MAC that did not skip the VF would
/// find it before eth1. Returns its `ip -d link` line (what must not change).
fn add_vf(w: &World) -> String {
    let index_of = |name: &str| {
        w.inst.ip_json(&["link", "show", name])[0]["ifindex"]
            .as_u64()
            .unwrap()
    };
    let index = index_of("eth1");
    let aside = Netns::new("azvf");
    w.inst.ip(&["link", "set", "eth1", "netns", &aside.name]);
    w.inst.ip(&[
        "link",
        "add",
        "vfbr",
        "address",
        "02:00:00:00:00:fe",
        "type",
        "bridge",
    ]);
    w.inst.ip(&[
        "link",
        "add",
        "vf1",
        "index",
        &index.to_string(),
        "type",
        "veth",
        "peer",
        "name",
        "vf1p",
    ]);
    w.inst.sysctl("net.ipv6.conf.vf1.disable_ipv6", "1");
    w.inst.ip(&["link", "set", "vf1", "address", MAC1]);
    w.inst.ip(&["link", "set", "vf1", "master", "vfbr"]);
    w.inst.ip(&["link", "set", "vf1", "up"]);
    aside.ip(&["link", "set", "eth1", "netns", &w.inst.name]);
    w.inst.ip(&["link", "set", "eth1", "up"]);
    let vf = w.inst.ip_json(&["link", "show", "vf1"]);
    assert_eq!(vf[0]["address"], MAC1);
    assert_eq!(vf[0]["master"], "vfbr");
    assert!(index_of("vf1") < index_of("eth1"));
    assert_eq!(
        w.inst.ip_json(&["link", "show", "eth1"])[0]["address"],
        MAC1
    );
    vf_state(w)
}

fn vf_state(w: &World) -> String {
    w.inst.ip(&["-d", "link", "show", "vf1"])
}

/// Nothing of leasehook's is on the VF, and it is as it was made.
fn assert_vf_untouched(w: &World, before: &str) {
    assert_eq!(vf_state(w), before, "the VF's link changed");
    let addrs = w.inst.ip(&["address", "show", "vf1"]);
    assert!(!addrs.contains("inet"), "the VF got an address: {addrs}");
    let routes = w.inst.ip(&["route", "show", "table", "all", "dev", "vf1"]);
    assert!(routes.trim().is_empty(), "the VF got routes: {routes}");
    assert!(
        !w.our_routes().iter().any(|r| r.contains("vf1")),
        "{}",
        w.pbr_report()
    );
    assert!(!w.root.join("run/leasehook/iface/vf1.json").exists());
}

fn report(w: &World, c: Client) -> String {
    let log: Vec<String> = imds_log(w).iter().map(LogEntry::line).collect();
    format!(
        "{}\n--- {} log\n{}\n--- IMDS\n{}",
        w.pbr_report(),
        c.name(),
        c.log(w, false),
        log.join("\n")
    )
}

fn wait_installed(w: &World, c: Client, when: &str) {
    assert!(
        wait_until(Duration::from_secs(40), || w.secondary_pbr_installed()),
        "no policy routing for eth1 {when}:\n{}",
        report(w, c)
    );
}

fn assert_traffic(w: &World, c: Client, sources: &[&str]) {
    w.assert_echoes(sources, || report(w, c));
}

/// Runs `leasehook refresh -v` in the instance with the hooks' environment.
fn refresh(w: &World) -> Output {
    let mut cmd = w.inst.command(leasehook_bin().to_str().unwrap());
    cmd.envs(w.hook_env().iter().map(|(k, v)| (k.as_str(), v.as_str())));
    cmd.env("LEASEHOOK_IMDS_SYNC_BUDGET_S", "1");
    cmd.args(["refresh", "-v"]);
    cmd.output().unwrap()
}

/// Lines of `ip monitor` output that concern leasehook's objects or the VF.
fn ours(monitor: &str) -> Vec<String> {
    monitor
        .lines()
        .filter(|l| {
            l.contains("proto 176")
                || l.contains("10.98.1.21")
                || l.contains("lookup 10001")
                || l.contains("vf1")
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn dhclient_routes_the_secondary_from_azure_metadata_and_leaves_the_vf_alone() {
    let c = Client::Dhclient;
    let opts = WorldOptions {
        t1: Some(RENEW_T1),
        ..azure_opts()
    };
    let mut w = world("az-dh", &opts);
    let vf = add_vf(&w);
    c.start(&mut w);
    wait_installed(&w, c, "after the lease");
    // The gateway of table 10001 is the subnet's first host (the lease's router).
    assert!(
        w.our_routes().contains(
            &"default via 10.98.1.1 dev eth1 scope - src - table 10001 proto 176".to_owned()
        ),
        "{}",
        report(&w, c)
    );
    assert_eq!(w.our_rules().len(), 2, "{}", report(&w, c));
    assert!(
        w.inst
            .addresses()
            .contains(&"eth1 10.98.1.21/32".to_owned()),
        "{}",
        report(&w, c)
    );
    assert_traffic(&w, c, &["10.98.1.20", "10.98.1.21", PRIMARY]);
    assert_vf_untouched(&w, &vf);
    let log = c.log(&w, false);
    assert!(
        log.contains("eth1: IMDS agrees with the lease after 1 round(s), 1 request(s)"),
        "one request answers the event:\n{log}"
    );

    // A refresh finds eth1 by its MAC, never the VF that carries it too.
    let out = refresh(&w);
    assert!(
        out.status.success(),
        "refresh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(w.secondary_pbr_installed(), "{}", report(&w, c));
    assert_vf_untouched(&w, &vf);

    // Renewals with unchanged metadata write nothing.
    let before = (w.our_rules(), w.our_routes(), w.inst.addresses());
    let renewals = |w: &World| c.log(w, false).matches("eth1 RENEW: 0 change(s)").count();
    let r0 = renewals(&w);
    let (renewed, seen) = w.inst.monitor(&["link"], || {
        wait_until(Duration::from_secs(40), || renewals(&w) >= r0 + 2)
    });
    assert!(renewed, "fewer than 2 renewals:\n{}", report(&w, c));
    assert_eq!(
        ours(&seen),
        Vec::<String>::new(),
        "a renewal changed objects"
    );
    assert_eq!((w.our_rules(), w.our_routes(), w.inst.addresses()), before);
    assert_vf_untouched(&w, &vf);

    // RELEASE removes everything.
    c.end(&mut w, End::Release);
    assert!(
        wait_until(Duration::from_secs(20), || w.secondary_pbr_gone()),
        "RELEASE left objects:\n{}",
        report(&w, c)
    );
    assert_vf_untouched(&w, &vf);
    let n = assert_primary_only(&w);
    assert!(n >= 3, "{n} requests");
}

#[test]
fn hot_plug_race_the_nic_appears_in_metadata_after_the_lease() {
    let c = Client::Dhclient;
    let opts = WorldOptions {
        sync_budget_s: 1.0,
        budget_s: 20.0,
        ..azure_opts()
    };
    let mut w = world("az-race", &opts);
    let vf = add_vf(&w);
    w.bind("eth0", false);
    // eth1's NIC is not in the metadata yet when its lease comes.
    let hidden = w.dir.0.join(HIDDEN_FILE);
    std::fs::write(&hidden, format!("{MAC1}\n")).unwrap();
    w.dhclient_start("eth1", false);
    let handed = wait_until(Duration::from_secs(30), || {
        c.log(&w, false)
            .contains("eth1 BOUND: IMDS does not agree with the lease yet; worker")
    });
    assert!(handed, "the hook did not hand over:\n{}", report(&w, c));
    // The client was let go at the sync budget: the lease's address is on the
    // link while the worker still waits.
    assert!(w.worker_pending("eth1"), "{}", report(&w, c));
    assert!(
        w.inst
            .ip(&["-4", "addr", "show", "eth1"])
            .contains("10.98.1.20/24")
    );
    assert!(w.our_rules().is_empty(), "{}", report(&w, c));
    std::thread::sleep(Duration::from_secs(2));
    std::fs::remove_file(&hidden).unwrap();
    wait_installed(&w, c, "once the NIC appeared");
    assert!(w.wait_workers("eth1", 10), "the worker did not finish");
    let log = c.log(&w, false);
    assert!(
        log.contains("eth1 worker: eth1: IMDS agrees with the lease"),
        "{log}"
    );
    assert_traffic(&w, c, &["10.98.1.20", "10.98.1.21"]);
    assert_vf_untouched(&w, &vf);
    // One request per round, never more than the 5 a second IMDS allows.
    let log = imds_log(&w);
    for (i, e) in log.iter().enumerate() {
        let within = log[i..].iter().filter(|o| o.t < e.t + 1.0).count();
        assert!(
            within <= 5,
            "{:#?}",
            log.iter().map(LogEntry::line).collect::<Vec<_>>()
        );
    }
    assert_primary_only(&w);
}

#[test]
fn networkmanager_routes_the_secondary_and_connection_down_removes_it() {
    let c = Client::Nm;
    let mut w = world("az-nm", &azure_opts());
    let vf = add_vf(&w);
    // Azure's DHCP routes 169.254.169.254 through the primary (option 121); so
    // does the world here, as NetworkManager brings both NICs up at once.
    w.inst.ip(&[
        "route",
        "add",
        "169.254.169.254/32",
        "dev",
        "eth0",
        "table",
        "300",
    ]);
    w.inst.ip(&[
        "rule",
        "add",
        "to",
        "169.254.169.254/32",
        "lookup",
        "300",
        "priority",
        "90",
    ]);
    c.start(&mut w);
    wait_installed(&w, c, "after the lease");
    assert_traffic(&w, c, &["10.98.1.20", "10.98.1.21", PRIMARY]);
    assert_vf_untouched(&w, &vf);
    c.end(&mut w, End::ConnectionDown);
    assert!(
        wait_until(Duration::from_secs(20), || w.secondary_pbr_gone()),
        "connection down left objects:\n{}",
        report(&w, c)
    );
    assert_vf_untouched(&w, &vf);
    // Requests made before eth0 had its address went out of eth0 from eth1's
    // address and were dropped by the VPC's source check before IMDS saw them;
    // every request IMDS saw came from the primary.
    assert_primary_only(&w);
}

/// Issue 31 items 1 and 3, with Azure's DHCP options ([`CloudDhcp::Azure`]): the
/// secondary's lease names no router, so its table's default route goes via the
/// subnet's first host, 10.98.1.1, and traffic from both of its addresses to a
/// host off the subnet passes the router's source check; and the primary's
/// BOUND is not held waiting for IMDS, which is reachable only once Debian's
/// `rfc3442-classless-routes` hook has installed option 121's routes: leasehook's
/// hook runs after it.
#[test]
fn a_router_less_secondary_gets_the_first_host_and_the_primary_bound_is_not_held() {
    let c = Client::Dhclient;
    let mut w = world("az-gw", &azure_opts());
    let (held, eth0) = w.bind_primary_timed();
    // Option 121's routes are there (the route to IMDS through the gateway).
    let main = w.inst.ip(&["-4", "route", "show"]);
    assert!(
        main.contains("169.254.169.254 via 10.98.0.1 dev eth0"),
        "{main}"
    );
    // Not waited out: the sync budget is 3 s; and IMDS answered the first round.
    assert_primary_not_held(held, &eth0);

    w.bind("eth1", false);
    wait_installed(&w, c, "after the router-less lease");
    // The lease named no router: dhclient-script put no default route on eth1.
    let eth1_default = w
        .inst
        .ip(&["-4", "route", "show", "default", "dev", "eth1"]);
    assert!(eth1_default.trim().is_empty(), "{eth1_default}");
    // What dnsmasq sent (log-dhcp): a router to the primary only, and option 121.
    let sent = std::fs::read_to_string(w.dir.0.join("dnsmasq.log")).unwrap();
    let options = |subnet: &str| {
        sent.lines()
            .filter(|l| l.contains("option:") && l.contains(" router ") && l.contains(subnet))
            .count()
    };
    assert!(
        options("10.98.0.1") > 0 && options("10.98.1.1") == 0,
        "{sent}"
    );
    assert!(sent.contains("classless-static-route"), "{sent}");
    assert!(
        w.our_routes().contains(
            &"default via 10.98.1.1 dev eth1 scope - src - table 10001 proto 176".to_owned()
        ),
        "{}",
        report(&w, c)
    );
    assert_traffic(&w, c, &["10.98.1.20", "10.98.1.21", PRIMARY]);
    assert_primary_only(&w);
}

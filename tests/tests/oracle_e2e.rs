// SPDX-License-Identifier: Apache-2.0
//! leasehook on Oracle Cloud (OCI), for real: the namespace world
//! (`leasehook_tests::world`) with the OCI IMDSv2 emulator
//! (`leasehook_tests::oracle_emulator`) on 169.254.169.254:80 in place of EC2's,
//! the hooks told `LEASEHOOK_PROVIDER=oracle` and nothing else (the default
//! endpoints). OCI's DHCP serves the primary VNIC only: `eth0` gets its lease
//! from a real client; `eth1`, the secondary VNIC, has no client at all and gets
//! its address, rules and table from `leasehook refresh` or the udev add path.
//!
//! | test | shows |
//! |---|---|
//! | [`dhclient_primary_vnic_waits_for_the_vnic_list`] | the primary's lease through dhclient's hook: one `GET /opc/v2/vnics/` with `Authorization: Bearer Oracle`, its table (with `primary_rules`), traffic; RELEASE removes it |
//! | [`dhcpcd_primary_vnic_waits_for_the_vnic_list`] | the same through dhcpcd |
//! | [`the_ipv6_endpoint_answers_when_the_ipv4_one_refuses`] | the service only on `[fd00:c1::a9fe:a9fe]:80` (169.254.169.254 refuses): the default endpoints fall back to it and the primary's event completes |
//! | [`refresh_addresses_the_secondary_vnic_and_takes_it_away_when_it_goes`] | refresh gives eth1 10.98.1.20/24, its rules and table, traffic passes the source check; again: nothing changes; IMDS down, 401, 503, garbage, dropped: nothing changes; `flush` removes the address too; the VNIC detached (no longer listed) removes everything; attached again, back; the link deleted removes everything |
//! | [`an_address_someone_else_configured_is_left_alone`] | the address put there first by hand gets rules and a table, is never removed (`flush`, detach) |
//! | [`a_vnic_listed_late_is_configured_by_the_next_refresh`] | the emulator lists eth1 only 4 s after its first answer (an attach the metadata has not caught up with): the first refresh configures nothing and removes nothing, the next one configures it |
//! | [`refresh_gives_the_secondary_vnic_its_ipv6_address_too`] | a VNIC with `ipv6Addresses` and `ipv6SubnetCidrBlock`: refresh adds `fd00:98:1::20/128` (the length a DHCPv6 client gives it) beside the IPv4 address, its rule and subnet route in the VNIC's table; again, nothing changes |
//! | [`a_bare_metal_vlan_vnic_is_linked_routed_and_removed`] | bare metal (`nicIndex`, issue 36 item 3; needs 802.1Q: in the VM on a kernel without it): refresh creates the VLAN VNIC's macvlan `eth1.100` and VLAN `eth1v100` on physical NIC 1 (alias `leasehook:<MAC>`), its address, rule and table on the VLAN, traffic passes the router's source check on VLAN 100; again: nothing changes; a 503: nothing changes; detached: leasehook's links, address, rule and table go, the operator's macvlan `eth1.200` stays |
//! | [`a_hostile_vnic_list_touches_neither_lo_nor_the_dhcp_primary`] | issue 30: the list's first entry a MAC no NIC has, eth0's MAC (its lease from a real dhclient) second, a VNIC with MAC `00:00:00:00:00:00` (10.200.0.5 in 10.0.0.0/8): eth0 stays the primary (no rules, no second address), `lo` gets nothing and `ip route get` of the gateway and of another subnet's host still leave by eth0; eth1 is configured and passes traffic |
//! | [`udev_add_path_configures_the_new_vnic`] | the command the udev rule chain runs for a new link (parsed from `hooks/udev/` and `hooks/systemd/`) brings eth1 up and configures it |
//! | [`the_boot_stage_configures_the_secondary_vnic`] | `leasehook init` (network stage) on a root whose DMI says Oracle, `provider` left `auto`: it detects Oracle, records it, and its last step brings eth1 up and configures it from the metadata (traffic passes); a second run changes nothing |
//!
//! Compiled with the `netns` feature; needs root, isc-dhcp-client, dhcpcd-base
//! and dnsmasq, and fails, never skips, without them.

#![cfg(feature = "netns")]
#![cfg(test)]
#![allow(clippy::too_many_lines)]

use std::process::Output;
use std::time::Duration;

use leasehook_core::source::oracle::vnic::device_slot;
use leasehook_tests::clouds::Cloud;
use leasehook_tests::netns::leasehook_bin;
use leasehook_tests::oracle_emulator::{DETACHED_FILE, FAULT_FILE, LOG_FILE, LogEntry, read_log};
use leasehook_tests::shell::LogLine as _;
use leasehook_tests::udev_add_command;
use leasehook_tests::world::{MAC0, MAC1, World, WorldOptions, output_text, wait_until};

fn table(mac: &str) -> u32 {
    10_000 + device_slot(mac.parse().unwrap())
}

fn oracle_opts(extra: &[(&str, &str)]) -> WorldOptions {
    // OCI's DHCP serves the primary VNIC only.
    let mut opts = Cloud::Oracle.world(Vec::new());
    opts.extra_hook_env.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    opts
}

/// A world whose hooks give the primary VNIC a table of its own
/// (`primary_rules`), and the primary's rule.
fn primary_rules_world(tag: &str) -> (World, String) {
    let w = World::new(tag, &oracle_opts(&[("LEASEHOOK_PRIMARY_RULES", "true")]));
    let t = table(MAC0);
    (w, format!("{t} from 10.98.0.10 lookup {t} proto 176"))
}

fn imds_log(w: &World) -> Vec<LogEntry> {
    read_log(&w.dir.0.join(LOG_FILE))
}

/// Every request asked `/opc/v2/` with the header; returns how many.
fn assert_v2_with_header(w: &World) -> usize {
    let log = imds_log(w);
    let text: Vec<String> = log.iter().map(LogEntry::line).collect();
    assert!(!log.is_empty(), "no request reached IMDS");
    for e in &log {
        assert_eq!(e.method, "GET", "{text:#?}");
        assert_eq!(e.header, "Bearer%20Oracle", "{text:#?}");
        assert!(e.url.starts_with("/opc/v2/"), "{text:#?}");
    }
    log.len()
}

fn report(w: &World) -> String {
    let log: Vec<String> = imds_log(w).iter().map(LogEntry::line).collect();
    format!(
        "rules {:#?}\nroutes {:#?}\naddresses {:#?}\n--- eth0\n{}\n--- OCI IMDS\n{}",
        w.our_rules(),
        w.our_routes(),
        w.inst.addresses(),
        w.log("eth0", false),
        log.join("\n")
    )
}

/// eth1's rule and routes, as refresh configures them.
fn eth1_rules() -> Vec<String> {
    let t = table(MAC1);
    vec![format!("{t} from 10.98.1.20 lookup {t} proto 176")]
}

fn eth1_routes() -> Vec<String> {
    let t = table(MAC1);
    vec![
        format!("10.98.1.0/24 via - dev eth1 scope link src 10.98.1.20 table {t} proto 176"),
        format!("default via 10.98.1.1 dev eth1 scope - src - table {t} proto 176"),
    ]
}

/// eth1's link is up (leasehook brings a VNIC without DHCP up).
fn assert_eth1_up(w: &World) {
    let link = w.inst.ip_json(&["link", "show", "eth1"]);
    assert!(
        link[0]["flags"]
            .as_array()
            .is_some_and(|flags| flags.iter().any(|f| f == "UP")),
        "eth1 not brought up: {link}"
    );
}

fn has_address(w: &World) -> bool {
    w.inst
        .addresses()
        .contains(&"eth1 10.98.1.20/24".to_owned())
}

/// eth1 is configured: its address, rule and routes.
fn eth1_configured(w: &World) -> bool {
    let (rules, routes) = (w.our_rules(), w.our_routes());
    has_address(w)
        && eth1_rules().iter().all(|r| rules.contains(r))
        && eth1_routes().iter().all(|r| routes.contains(r))
}

/// Nothing of leasehook's is left for eth1.
fn eth1_gone(w: &World) -> bool {
    let t = table(MAC1).to_string();
    !w.our_rules().iter().any(|r| r.contains(&t))
        && !w.our_routes().iter().any(|r| r.contains(&t))
        && !w.root.join("run/leasehook/iface/eth1.json").exists()
}

fn leasehook(w: &World, args: &[&str], extra: &[(&str, &str)]) -> Output {
    w.leasehook(args, extra)
}

/// `leasehook refresh -v`; asserts it succeeded; returns its output.
fn refresh(w: &World) -> String {
    refresh_with(w, &[])
}

fn refresh_with(w: &World, extra: &[(&str, &str)]) -> String {
    w.leasehook_ok(&["refresh", "-v"], extra, || report(w))
}

/// `leasehook refresh -v` while the metadata misbehaves: eth1 could not be
/// checked, so it exits 1 naming eth1 (issue 33); returns its output.
fn refresh_unchecked(w: &World, extra: &[(&str, &str)]) -> String {
    let out = leasehook(w, &["refresh", "-v"], extra);
    let text = output_text(&out);
    assert!(
        out.status.code() == Some(1) && text.contains("leasehook: eth1: not checked: "),
        "refresh did not fail naming eth1: {text}\n{}",
        report(w)
    );
    text
}

/// What a refresh may change, to compare before and after.
fn snapshot(w: &World) -> (Vec<String>, Vec<String>, Vec<String>) {
    (w.our_rules(), w.our_routes(), w.inst.addresses())
}

fn assert_traffic(w: &World, src: &str) {
    w.assert_echoes(&[src], || report(w));
}

#[test]
fn dhclient_primary_vnic_waits_for_the_vnic_list() {
    let (mut w, rule) = primary_rules_world("oci-dh");
    w.bind("eth0", false);
    let t = table(MAC0);
    assert!(
        wait_until(Duration::from_secs(30), || w.our_rules().contains(&rule)),
        "no table for the primary VNIC:\n{}",
        report(&w)
    );
    assert!(
        w.our_routes().contains(&format!(
            "default via 10.98.0.1 dev eth0 scope - src - table {t} proto 176"
        )),
        "{}",
        report(&w)
    );
    let log = w.log("eth0", false);
    assert!(
        log.contains("eth0: IMDS agrees with the lease after 1 round(s), 1 request(s)"),
        "one request answers the event:\n{log}"
    );
    assert_traffic(&w, "10.98.0.10");
    // No client on eth1 and no refresh: nothing there.
    assert!(!has_address(&w), "{}", report(&w));
    let n = assert_v2_with_header(&w);
    assert!(
        imds_log(&w)
            .iter()
            .all(|e| e.url == "/opc/v2/vnics/" && e.status == "200"),
        "{}",
        report(&w)
    );
    assert!(n >= 1);
    w.dhclient_end("eth0", false, true);
    assert!(
        wait_until(Duration::from_secs(20), || !w.our_rules().contains(&rule)),
        "RELEASE left the primary's rule:\n{}",
        report(&w)
    );
}

#[test]
fn dhcpcd_primary_vnic_waits_for_the_vnic_list() {
    let (mut w, rule) = primary_rules_world("oci-dc");
    w.dhcpcd_start("eth0", false);
    let ok = wait_until(Duration::from_secs(40), || w.our_rules().contains(&rule));
    let log = w.client_log("dhcpcd", "eth0", false);
    assert!(ok, "no table for the primary VNIC:\n{}\n{log}", report(&w));
    assert!(
        log.contains("eth0: IMDS agrees with the lease after 1 round(s), 1 request(s)"),
        "{log}"
    );
    assert_traffic(&w, "10.98.0.10");
    assert_v2_with_header(&w);
}

#[test]
fn refresh_addresses_the_secondary_vnic_and_takes_it_away_when_it_goes() {
    let mut w = World::new("oci-rf", &oracle_opts(&[]));
    w.bind("eth0", false);
    assert!(!has_address(&w), "{}", report(&w));

    let out = refresh(&w);
    assert!(eth1_configured(&w), "{out}\n{}", report(&w));
    assert!(
        out.contains("eth1: no DHCP, configured from the metadata"),
        "{out}"
    );
    assert_traffic(&w, "10.98.1.20");
    let state = std::fs::read_to_string(w.root.join("run/leasehook/iface/eth1.json")).unwrap();
    assert!(state.contains("metadata"), "{state}");

    // Again, unchanged: nothing changes.
    let before = snapshot(&w);
    refresh(&w);
    assert_eq!(snapshot(&w), before, "{}", report(&w));

    // IMDS errors change nothing: each fault, then IMDS gone altogether.
    let fault = w.dir.0.join(FAULT_FILE);
    let quick = [
        ("LEASEHOOK_IMDS_BUDGET_S", "1"),
        ("LEASEHOOK_IMDS_SYNC_BUDGET_S", "1"),
    ];
    for f in ["401", "503", "garbage", "not-json", "drop"] {
        std::fs::write(&fault, f).unwrap();
        let out = refresh_unchecked(&w, &quick);
        assert_eq!(snapshot(&w), before, "fault {f}: {out}\n{}", report(&w));
    }
    std::fs::remove_file(&fault).unwrap();
    w.router
        .ip(&["address", "del", "169.254.169.254/32", "dev", "lo"]);
    let out = refresh_unchecked(&w, &quick);
    assert_eq!(snapshot(&w), before, "IMDS down: {out}\n{}", report(&w));
    w.router
        .ip(&["address", "add", "169.254.169.254/32", "dev", "lo"]);
    assert_traffic(&w, "10.98.1.20");

    // flush removes the address too; the next refresh puts everything back.
    let out = leasehook(&w, &["flush", "--iface", "eth1"], &[]);
    assert!(out.status.success(), "{out:?}");
    assert!(eth1_gone(&w) && !has_address(&w), "{}", report(&w));
    refresh(&w);
    assert!(eth1_configured(&w), "{}", report(&w));

    // Detached: the metadata no longer lists it (its link stays): all of it goes.
    let detached = w.dir.0.join(DETACHED_FILE);
    std::fs::write(&detached, format!("{MAC1}\n")).unwrap();
    let out = refresh(&w);
    assert!(eth1_gone(&w) && !has_address(&w), "{out}\n{}", report(&w));
    assert!(out.contains("no longer"), "{out}");
    // Attached again: back.
    std::fs::remove_file(&detached).unwrap();
    refresh(&w);
    assert!(eth1_configured(&w), "{}", report(&w));
    assert_traffic(&w, "10.98.1.20");

    // The link deleted (the VNIC detached on a real VM): its rules and routes go.
    w.inst.ip(&["link", "del", "eth1"]);
    refresh(&w);
    assert!(eth1_gone(&w), "{}", report(&w));
    assert!(w.our_rules().is_empty(), "{}", report(&w));
    assert_v2_with_header(&w);
}

#[test]
fn an_address_someone_else_configured_is_left_alone() {
    let mut w = World::new("oci-fr", &oracle_opts(&[]));
    w.bind("eth0", false);
    w.inst
        .ip(&["address", "add", "10.98.1.20/24", "dev", "eth1"]);
    let out = refresh(&w);
    assert!(eth1_configured(&w), "{out}\n{}", report(&w));
    assert_traffic(&w, "10.98.1.20");
    let out = leasehook(&w, &["flush", "--iface", "eth1"], &[]);
    assert!(out.status.success(), "{out:?}");
    assert!(eth1_gone(&w), "{}", report(&w));
    assert!(
        has_address(&w),
        "flush removed a foreign address:\n{}",
        report(&w)
    );
    refresh(&w);
    assert!(eth1_configured(&w), "{}", report(&w));
    std::fs::write(w.dir.0.join(DETACHED_FILE), format!("{MAC1}\n")).unwrap();
    refresh(&w);
    assert!(eth1_gone(&w), "{}", report(&w));
    assert!(
        has_address(&w),
        "the detach removed a foreign address:\n{}",
        report(&w)
    );
}

#[test]
fn udev_add_path_configures_the_new_vnic() {
    let mut w = World::new("oci-ud", &oracle_opts(&[]));
    w.bind("eth0", false);
    // A VNIC just attached: its link is down, no address.
    w.inst.ip(&["link", "set", "eth1", "down"]);
    let mut run = udev_add_command("eth1");
    assert_eq!(
        run.first().map(String::as_str),
        Some("/usr/bin/leasehook"),
        "{run:?}"
    );
    run[0] = leasehook_bin().display().to_string();
    let mut cmd = w.inst.command(&run[0]);
    cmd.envs(w.hook_env().iter().map(|(k, v)| (k.as_str(), v.as_str())));
    cmd.args(&run[1..]);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eth1_up(&w);
    assert!(
        wait_until(Duration::from_secs(10), || eth1_configured(&w)),
        "{out:?}\n{}",
        report(&w)
    );
    assert_traffic(&w, "10.98.1.20");
    assert_v2_with_header(&w);
}

#[test]
fn a_vnic_listed_late_is_configured_by_the_next_refresh() {
    let mut opts = oracle_opts(&[]);
    if let Some(m) = opts.metadata.as_mut() {
        m.args.push("--scenario".to_owned());
        m.args
            .push(serde_json::json!({"appear": [{"mac": MAC1, "after": 4.0}]}).to_string());
    }
    let mut w = World::new("oci-late", &opts);
    w.bind("eth0", false);
    let out = refresh(&w);
    assert!(!has_address(&w) && eth1_gone(&w), "{out}\n{}", report(&w));
    assert!(
        wait_until(Duration::from_secs(20), || {
            refresh(&w);
            eth1_configured(&w)
        }),
        "eth1 never configured once listed:\n{}",
        report(&w)
    );
    assert_traffic(&w, "10.98.1.20");
}

#[test]
fn refresh_gives_the_secondary_vnic_its_ipv6_address_too() {
    let mut secondary =
        leasehook_tests::oracle_emulator::vnic(MAC1, "10.98.1.20", "10.98.1.0/24", "10.98.1.1", 2);
    secondary["ipv6Addresses"] = serde_json::json!(["fd00:98:1::20"]);
    secondary["ipv6SubnetCidrBlock"] = serde_json::json!("fd00:98:1::/64");
    let vnics = serde_json::json!([
        leasehook_tests::oracle_emulator::vnic(MAC0, "10.98.0.10", "10.98.0.0/24", "10.98.0.1", 1),
        secondary
    ]);
    let mut opts = oracle_opts(&[]);
    if let Some(m) = opts.metadata.as_mut() {
        m.args.push("--vnics".to_owned());
        m.args.push(vnics.to_string());
    }
    let mut w = World::new("oci-v6", &opts);
    w.bind("eth0", false);
    let out = refresh(&w);
    let t = table(MAC1);
    assert!(eth1_configured(&w), "{out}\n{}", report(&w));
    assert!(
        w.inst
            .addresses()
            .contains(&"eth1 fd00:98:1::20/128".to_owned()),
        "{out}\n{}",
        report(&w)
    );
    let rules = w.our_rules();
    assert!(
        rules.contains(&format!("{t} from fd00:98:1::20 lookup {t} proto 176")),
        "{out}\n{}",
        report(&w)
    );
    assert!(
        w.our_routes()
            .iter()
            .any(|r| r.starts_with("fd00:98:1::/64")),
        "{out}\n{}",
        report(&w)
    );
    // Again: nothing changes.
    let before = snapshot(&w);
    refresh(&w);
    assert_eq!(snapshot(&w), before, "{}", report(&w));
}

#[test]
fn a_hostile_vnic_list_touches_neither_lo_nor_the_dhcp_primary() {
    let vnic = leasehook_tests::oracle_emulator::vnic;
    let list = serde_json::json!([
        vnic(
            "02:00:17:00:00:99",
            "10.98.2.5",
            "10.98.2.0/24",
            "10.98.2.1",
            1
        ),
        vnic(MAC0, "10.98.0.10", "10.98.0.0/24", "10.98.0.1", 2),
        vnic(MAC1, "10.98.1.20", "10.98.1.0/24", "10.98.1.1", 3),
        vnic(
            "00:00:00:00:00:00",
            "10.200.0.5",
            "10.0.0.0/8",
            "10.0.0.1",
            4
        ),
    ]);
    let mut opts = oracle_opts(&[]);
    if let Some(m) = opts.metadata.as_mut() {
        m.args.push("--vnics".to_owned());
        m.args.push(list.to_string());
    }
    let mut w = World::new("oci-hostile", &opts);
    w.bind("eth0", false);
    let out = refresh(&w);
    assert!(
        out.contains("00:00:00:00:00:00: listed without DHCP, refused"),
        "{out}"
    );
    assert!(
        wait_until(Duration::from_secs(10), || eth1_configured(&w)),
        "{out}\n{}",
        report(&w)
    );
    // eth0 is the primary DHCP serves: no rules, no table, no second address.
    assert_eq!(w.our_rules(), eth1_rules(), "{out}\n{}", report(&w));
    let addrs = w.inst.addresses();
    let on = |dev: &str| -> Vec<&String> {
        addrs
            .iter()
            .filter(|a| a.starts_with(&format!("{dev} ")) && a.contains('.'))
            .collect()
    };
    assert_eq!(on("eth0"), ["eth0 10.98.0.10/24"], "{out}\n{}", report(&w));
    assert!(on("lo").is_empty(), "{out}\n{}", report(&w));
    for dst in ["10.98.0.1", "10.77.0.9"] {
        let r = &w.inst.ip_json(&["route", "get", dst])[0];
        assert_eq!(
            (r["type"].as_str(), r["dev"].as_str()),
            (None, Some("eth0")),
            "ip route get {dst}: {r}\n{out}"
        );
    }
    assert_traffic(&w, "10.98.1.20");
    assert_traffic(&w, "10.98.0.10");
    // Again: nothing changes.
    let before = snapshot(&w);
    let again = refresh(&w);
    assert_eq!(snapshot(&w), before, "{again}");
}

/// The bare-metal VLAN VNIC's MAC (OCI writes it upper case).
const VLAN_MAC: &str = "02:00:17:00:00:99";

#[test]
fn a_bare_metal_vlan_vnic_is_linked_routed_and_removed() {
    if leasehook_tests::vm::in_vlan_kernel("a_bare_metal_vlan_vnic_is_linked_routed_and_removed") {
        return;
    }
    // Bare metal (`nicIndex` on every entry): eth0 is physical NIC 0 and the
    // primary VNIC; the secondary VNIC is VLAN 100 on physical NIC 1, eth1.
    let vnic = leasehook_tests::oracle_emulator::vnic;
    let mut primary = vnic(MAC0, "10.98.0.10", "10.98.0.0/24", "10.98.0.1", 0);
    primary["nicIndex"] = serde_json::json!(0);
    let mut vlan = vnic(VLAN_MAC, "10.98.1.30", "10.98.1.0/24", "10.98.1.1", 100);
    vlan["nicIndex"] = serde_json::json!(1);
    let mut opts = oracle_opts(&[]);
    if let Some(m) = opts.metadata.as_mut() {
        m.args.push("--vnics".to_owned());
        m.args.push(serde_json::json!([primary, vlan]).to_string());
    }
    let mut w = World::new("oci-bm", &opts);
    // The VCN's side of the VLAN: the subnet's router on VLAN 100 of eth1's
    // wire, the source check (rp_filter) on it.
    w.router
        .ip(&["address", "del", "10.98.1.1/24", "dev", "gw1"]);
    w.router.ip(&[
        "link", "add", "link", "gw1", "name", "gw1.100", "type", "vlan", "id", "100",
    ]);
    w.router.sysctl("net.ipv4.conf.gw1/100.rp_filter", "1");
    w.router
        .ip(&["address", "add", "10.98.1.1/24", "dev", "gw1.100"]);
    w.router.ip(&["link", "set", "gw1.100", "up"]);
    w.bind("eth0", false);
    // The operator's macvlan on eth1, named as leasehook names one: never touched.
    w.inst.ip(&[
        "link", "add", "link", "eth1", "name", "eth1.200", "type", "macvlan",
    ]);
    let before = w.link_kinds();

    let out = refresh(&w);
    let alias = format!("leasehook:{VLAN_MAC}");
    let mut expected = before.clone();
    expected.push(format!("eth1.100 macvlan eth1 {alias}"));
    expected.push(format!("eth1v100 vlan eth1.100 {alias}"));
    expected.sort();
    assert_eq!(w.link_kinds(), expected, "{out}\n{}", report(&w));
    let shown = &w.inst.ip_json(&["-d", "link", "show", "eth1v100"])[0];
    assert_eq!(shown["address"], VLAN_MAC, "{shown}");
    assert_eq!(shown["linkinfo"]["info_data"]["id"], 100, "{shown}");
    // The address, rule and table on the VLAN, as for any VNIC without DHCP.
    let t = table(VLAN_MAC);
    assert!(
        wait_until(Duration::from_secs(10), || w
            .inst
            .addresses()
            .contains(&"eth1v100 10.98.1.30/24".to_owned())),
        "{out}\n{}",
        report(&w)
    );
    assert_eq!(
        w.our_rules(),
        [format!("{t} from 10.98.1.30 lookup {t} proto 176")],
        "{out}\n{}",
        report(&w)
    );
    let mut routes = w.our_routes();
    routes.sort();
    assert_eq!(
        routes,
        [
            format!(
                "10.98.1.0/24 via - dev eth1v100 scope link src 10.98.1.30 table {t} proto 176"
            ),
            format!("default via 10.98.1.1 dev eth1v100 scope - src - table {t} proto 176"),
        ],
        "{out}\n{}",
        report(&w)
    );
    assert_traffic(&w, "10.98.1.30");
    assert_traffic(&w, "10.98.0.10");

    // Again: nothing changes.
    let again = (w.link_kinds(), snapshot(&w));
    refresh(&w);
    assert_eq!((w.link_kinds(), snapshot(&w)), again, "{}", report(&w));
    // The metadata unreachable (503): nothing changes, no link goes.
    let fault = w.dir.0.join(FAULT_FILE);
    std::fs::write(&fault, "503").unwrap();
    let quick = [
        ("LEASEHOOK_IMDS_BUDGET_S", "1"),
        ("LEASEHOOK_IMDS_SYNC_BUDGET_S", "1"),
    ];
    let out = leasehook(&w, &["refresh", "-v"], &quick);
    let out = output_text(&out) + &format!("{:?}", out.status);
    assert!(out.contains("eth1v100: not checked: "), "{out}");
    assert_eq!(
        (w.link_kinds(), snapshot(&w)),
        again,
        "{out}\n{}",
        report(&w)
    );
    std::fs::remove_file(&fault).unwrap();

    // Detached: what leasehook created goes (links, address, rule, table), the
    // operator's macvlan and the physical NICs stay.
    std::fs::write(w.dir.0.join(DETACHED_FILE), format!("{VLAN_MAC}\n")).unwrap();
    let out = refresh(&w);
    assert_eq!(w.link_kinds(), before, "{out}\n{}", report(&w));
    assert!(w.our_rules().is_empty(), "{out}\n{}", report(&w));
    assert!(w.our_routes().is_empty(), "{out}\n{}", report(&w));
    assert!(
        !w.root.join("run/leasehook/iface/eth1v100.json").exists(),
        "{out}"
    );
    assert_traffic(&w, "10.98.0.10");
}

#[test]
fn the_ipv6_endpoint_answers_when_the_ipv4_one_refuses() {
    let mut opts = oracle_opts(&[("LEASEHOOK_PRIMARY_RULES", "true")]);
    if let Some(m) = opts.metadata.as_mut() {
        m.args = vec!["--bind".to_owned(), "[fd00:c1::a9fe:a9fe]:80".to_owned()];
        m.addresses = vec!["fd00:c1::a9fe:a9fe/128".to_owned()];
    }
    let mut w = World::new("oci-v6ep", &opts);
    // The VPC's IPv6 on the primary's subnet, and the route to the service.
    w.router.ip(&[
        "-6",
        "address",
        "add",
        "fd00:98::1/64",
        "dev",
        "gw0",
        "nodad",
    ]);
    w.inst.ip(&[
        "-6",
        "address",
        "add",
        "fd00:98::10/64",
        "dev",
        "eth0",
        "nodad",
    ]);
    w.inst.ip(&[
        "-6",
        "route",
        "add",
        "fd00:c1::a9fe:a9fe/128",
        "via",
        "fd00:98::1",
        "dev",
        "eth0",
    ]);
    w.bind("eth0", false);
    let t = table(MAC0);
    let rule = format!("{t} from 10.98.0.10 lookup {t} proto 176");
    assert!(
        wait_until(Duration::from_secs(30), || w.our_rules().contains(&rule)),
        "no table for the primary VNIC:\n{}",
        report(&w)
    );
    let log = w.log("eth0", false);
    assert!(
        log.contains("OCI IMDS: using endpoint http://[fd00:c1::a9fe:a9fe]"),
        "{log}"
    );
    assert!(
        imds_log(&w)
            .iter()
            .all(|e| e.peer.starts_with("[fd00:98::10]")),
        "{}",
        report(&w)
    );
    assert_v2_with_header(&w);
}

#[test]
fn the_boot_stage_configures_the_secondary_vnic() {
    let mut w = World::new("oci-boot", &oracle_opts(&[]));
    w.bind("eth0", false);
    w.inst.ip(&["link", "set", "eth1", "down"]);
    // The instance as the boot stage sees it: an OCI chassis, nothing cached.
    let dmi = w.root.join("sys/class/dmi/id");
    std::fs::create_dir_all(&dmi).unwrap();
    std::fs::write(dmi.join("chassis_asset_tag"), "OracleCloud.com\n").unwrap();
    let init = |w: &World| {
        let mut cmd = w.inst.command(leasehook_bin().to_str().unwrap());
        cmd.envs(
            w.hook_env()
                .iter()
                .filter(|(k, _)| k != "LEASEHOOK_PROVIDER")
                .map(|(k, v)| (k.as_str(), v.as_str())),
        );
        cmd.args(["init", "--virt", "kvm"]);
        let out = cmd.output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "init failed: {text}\n{}", report(w));
        text
    };
    let out = init(&w);
    assert!(
        out.contains("no DHCP: eth1: configured from the metadata"),
        "{out}\n{}",
        report(&w)
    );
    assert!(eth1_configured(&w), "{out}\n{}", report(&w));
    assert_eth1_up(&w);
    assert_traffic(&w, "10.98.1.20");
    // The next boot stage run (or a restart of the unit) changes nothing.
    let before = snapshot(&w);
    let out = init(&w);
    assert!(
        out.contains("no DHCP: eth1: followed the metadata (0 change(s))"),
        "{out}"
    );
    assert_eq!(snapshot(&w), before);
}

// SPDX-License-Identifier: Apache-2.0
//! leasehook on Alibaba Cloud ECS, for real: the namespace world
//! (`leasehook_tests::world`) with the ECS metadata emulator in hardened mode at
//! `100.100.100.200:80` on the router (`leasehook_tests::aliyun_emulator`, which
//! answers the VPC's addresses only) in place of IMDS, the hooks told
//! `LEASEHOOK_PROVIDER=aliyun` and nothing else (the default endpoint), real
//! dhclient and systemd-networkd.
//!
//! | test | shows |
//! |---|---|
//! | [`dhclient_routes_the_secondary_from_the_ecs_metadata`] | eth1's addresses get rules and a table with the right gateway, none for the primary; traffic from each address passes the router's source check; five `GET`s and one token `PUT` per event, every `GET` with a token, from the NIC's own address; the token cached in its own file |
//! | [`release_removes_everything_and_the_lease_back_restores_it`] | RELEASE and STOP remove rules, routes, the secondary address and the state file |
//! | [`renew_with_unchanged_metadata_writes_nothing`] | two renewals: no netlink object touched (`ip monitor`), `0 change(s)` |
//! | [`hot_plug_race_does_not_hold_dhclient`] | the NIC's folder appears 2 s after the lease: the client is let go after the sync budget, the worker completes |
//! | [`networkd_routes_the_secondary_from_the_ecs_metadata`] | the same plan through networkd and its dispatcher |
//!
//! Compiled with the `netns` feature; needs root, isc-dhcp-client, dnsmasq,
//! systemd-networkd, networkd-dispatcher and dbus-daemon, and fails, never skips,
//! without them.

#![cfg(feature = "netns")]
#![cfg(test)]

use std::time::Duration;

use leasehook_core::source::aliyun::nic::device_slot;
use leasehook_tests::aliyun_emulator::LOG_NAME;
use leasehook_tests::clouds::Cloud;
use leasehook_tests::emulator::LogEntry;
use leasehook_tests::netns::TempDir;
use leasehook_tests::shell::LogLine as _;
use leasehook_tests::world::{MAC1, World, WorldOptions, wait_until};
use serde_json::{Value, json};

/// eth1's table: `table_base` plus the slot of its MAC (19872).
fn table() -> u32 {
    10_000 + device_slot(MAC1.parse().unwrap())
}

fn rules() -> Vec<String> {
    let t = table();
    vec![
        format!("{t} from 10.98.1.20 lookup {t} proto 176"),
        format!("{t} from 10.98.1.21 lookup {t} proto 176"),
    ]
}

fn routes() -> Vec<String> {
    let t = table();
    vec![
        format!("10.98.1.0/24 via - dev eth1 scope link src 10.98.1.20 table {t} proto 176"),
        // ECS's router is the vSwitch's .253 (CloudDhcp::Aliyun).
        format!("default via 10.98.1.253 dev eth1 scope - src - table {t} proto 176"),
    ]
}

/// A world whose metadata service is the ECS emulator (`scenario`, hardened mode)
/// and whose hooks use the `aliyun` provider. The returned folder holds the
/// scenario file and lives as long as the world.
fn world(tag: &str, scenario: &Value, opts: WorldOptions) -> (World, TempDir) {
    let files = TempDir::new(&format!("{tag}-ecs"));
    let sc = files.file("scenario.json", &scenario.to_string());
    let cloud = Cloud::Aliyun.world(vec!["--scenario".to_owned(), format!("@{}", sc.display())]);
    let opts = WorldOptions {
        dhcp: cloud.dhcp,
        metadata: cloud.metadata,
        extra_hook_env: cloud.extra_hook_env,
        ..opts
    };
    (World::new(tag, &opts), files)
}

fn ecs_log(w: &World) -> Vec<LogEntry> {
    std::fs::read_to_string(w.dir.0.join(LOG_NAME))
        .unwrap_or_default()
        .lines()
        .filter_map(LogEntry::parse)
        .collect()
}

fn installed(w: &World) -> bool {
    let (have_rules, have_routes) = (w.our_rules(), w.our_routes());
    rules().iter().all(|r| have_rules.contains(r))
        && routes().iter().all(|r| have_routes.contains(r))
}

fn gone(w: &World) -> bool {
    w.our_rules().is_empty()
        && w.our_routes().is_empty()
        && !w
            .inst
            .addresses()
            .contains(&"eth1 10.98.1.21/32".to_owned())
        && !w.root.join("run/leasehook/iface/eth1.json").exists()
}

fn report(w: &World) -> String {
    let log: Vec<String> = ecs_log(w).iter().map(LogEntry::line).collect();
    format!(
        "rules {:#?}\nroutes {:#?}\naddresses {:#?}\n--- eth1\n{}\n--- ECS metadata\n{}",
        w.our_rules(),
        w.our_routes(),
        w.inst.addresses(),
        w.log("eth1", false),
        log.join("\n")
    )
}

fn wait_installed(w: &World, when: &str) {
    assert!(
        wait_until(Duration::from_secs(40), || installed(w)),
        "no policy routing for eth1 {when}:\n{}",
        report(w)
    );
}

#[test]
fn dhclient_routes_the_secondary_from_the_ecs_metadata() {
    let (mut w, _files) = world("ecs-apply", &json!({}), WorldOptions::default());
    w.bind("eth0", false);
    w.dhclient_start("eth1", false);
    wait_installed(&w, "after the lease");
    assert!(
        wait_until(Duration::from_secs(10), || w
            .inst
            .addresses()
            .contains(&"eth1 10.98.1.21/32".to_owned())),
        "no secondary address:\n{}",
        report(&w)
    );
    // Exactly eth1's plan: nothing for the primary, nothing of IPv6.
    let mut want = rules();
    want.sort();
    let mut have = w.our_rules();
    have.sort();
    assert_eq!(have, want, "{}", report(&w));
    assert_eq!(w.our_routes().len(), 2, "{}", report(&w));
    for src in ["10.98.1.20", "10.98.1.21", "10.98.0.10"] {
        assert_eq!(
            w.echo_from(src).as_deref(),
            Some(src),
            "traffic from {src}:\n{}",
            report(&w)
        );
    }
    let log = ecs_log(&w);
    // Every GET carried a valid token (hardened mode answers 401 without one),
    // and every request came from inside the VPC (else 403).
    assert!(
        log.iter().all(|e| e.status == "200" || e.status == "404"),
        "{}",
        report(&w)
    );
    // eth1's event: its requests leave through eth1, from its own address; the
    // metadata already agrees, so five GETs (eth0's event asked the same five
    // for its own folder, and the token's PUT once, cached for eth1).
    let eth1: Vec<&LogEntry> = log
        .iter()
        .filter(|e| e.peer.starts_with("10.98.1.20:"))
        .collect();
    let gets = eth1.iter().filter(|e| e.method == "GET").count();
    assert_eq!(gets, 5, "{}", report(&w));
    // One token for both NICs' events, or two when eth1's event started before
    // eth0's had cached its token; never one per request.
    let puts = log.iter().filter(|e| e.method == "PUT").count();
    assert!(
        (1..=2).contains(&puts),
        "{puts} token PUTs:\n{}",
        report(&w)
    );
    assert!(
        eth1.iter().filter(|e| e.method == "PUT").count() <= 1,
        "{}",
        report(&w)
    );
    assert!(w.root.join("run/leasehook/aliyun-token").is_file());
    assert!(!w.root.join("run/leasehook/imds-token").exists());
    assert!(
        w.log("eth1", false)
            .contains("eth1: IMDS agrees with the lease after 1 round(s), 5 request(s)"),
        "{}",
        report(&w)
    );
}

#[test]
fn release_removes_everything_and_the_lease_back_restores_it() {
    let (mut w, _files) = world("ecs-release", &json!({}), WorldOptions::default());
    w.bind("eth0", false);
    w.dhclient_start("eth1", false);
    wait_installed(&w, "after the lease");
    for release in [true, false] {
        w.dhclient_end("eth1", false, release);
        assert!(
            wait_until(Duration::from_secs(20), || gone(&w)),
            "{} left leasehook's objects or state:\n{}",
            if release { "RELEASE" } else { "STOP" },
            report(&w)
        );
        w.dhclient_start("eth1", false);
        wait_installed(&w, "with the lease back");
    }
    assert_eq!(w.our_rules().len(), 2, "{}", report(&w));
    assert_eq!(w.echo_from("10.98.1.21").as_deref(), Some("10.98.1.21"));
}

#[test]
fn hot_plug_race_does_not_hold_dhclient() {
    let folder = format!("/latest/meta-data/network/interfaces/macs/{MAC1}");
    // The folder appears 2 s after the first request, well past the 0.5 s the
    // hook may hold dhclient-script.
    let scenario = json!({"appear": [{"path": folder, "after": 2.0}]});
    let opts = WorldOptions {
        sync_budget_s: 0.5,
        budget_s: 15.0,
        ..WorldOptions::default()
    };
    let (mut w, _files) = world("ecs-race", &scenario, opts);
    // Only eth1, so the emulator's clock starts with this event.
    w.bind("eth1", false);
    wait_installed(&w, "after the folder appeared");
    assert!(w.wait_workers("eth1", 5), "the worker did not finish");
    let log = w.log("eth1", false);
    assert!(
        log.contains("eth1 BOUND: IMDS does not agree with the lease yet; worker"),
        "the hook did not hand over:\n{}",
        report(&w)
    );
    assert!(
        log.contains("eth1 worker: eth1: IMDS agrees with the lease"),
        "{}",
        report(&w)
    );
    // While the folder was missing, each round asked only `mac` (once) and the
    // folder's probe; the other keys were asked once it answered.
    let probes = ecs_log(&w)
        .iter()
        .filter(|e| e.path.ends_with("/primary-ip-address"))
        .count();
    assert!(probes >= 2, "{}", report(&w));
}

#[test]
fn networkd_routes_the_secondary_from_the_ecs_metadata() {
    let (mut w, _files) = world("ecs-nd", &json!({}), WorldOptions::default());
    w.start_networkd(true);
    wait_installed(&w, "through networkd");
    assert_eq!(w.echo_from("10.98.1.21").as_deref(), Some("10.98.1.21"));
    assert!(
        ecs_log(&w)
            .iter()
            .all(|e| e.status == "200" || e.status == "404"),
        "{}",
        report(&w)
    );
    // The link going down takes it away.
    w.inst.ip(&["link", "set", "eth1", "down"]);
    assert!(
        wait_until(Duration::from_secs(20), || w.our_rules().is_empty()),
        "{}",
        report(&w)
    );
}

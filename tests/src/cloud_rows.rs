// SPDX-License-Identifier: Apache-2.0
//! The rows every cloud's end-to-end suite runs, written once over [`Cloud`]
//! (the cloud table, `crate::clouds`), as [`crate::scenarios`] is for the DHCP
//! clients:
//!
//! | row | checks |
//! |---|---|
//! | [`secondary`] | two NICs: eth1 (leased, or on Oracle configured from the metadata by `leasehook refresh`) gets its rule and default route in its table, nothing for the primary; traffic from eth1's address leaves by eth1 and reaches the echo host, the primary's still by eth0 |
//! | [`unchanged`] | two renewals of eth1's lease (Oracle: two refreshes) with unchanged metadata replace no leasehook object (`ip monitor`, dumps before and after), and eth1's traffic still flows |
//! | [`metadata_down`] | the metadata service stopped: eth1's next renewal (Oracle: none) logs that it keeps the last applied state, `leasehook refresh` exits 1 naming eth1, the kernel is as before and eth1's traffic still flows |
//!
//! | [`dual_stack`] | both NICs dual-stack (IPv4 and IPv6 leased by the real dhclient, IPv6 routers from router advertisements; [`crate::world::Ipv6World`]): first, without leasehook, eth1's IPv6 address leaves by eth0 and the router's source check drops it; then eth1's IPv6 rules (its leased and secondary addresses) and default route through the router in its table, the secondary added, traffic from every IPv6 address of eth1 leaves by eth1 and reaches the IPv6 echo host, IPv4 as in [`secondary`], nothing for the primary |
//! | [`release6`] | dual-stack (eth1's DHCPv6 bound before its DHCPv4): `dhclient -6 -r` (RELEASE6) removes eth1's IPv6 rules, routes and secondary; `ip monitor` sees no IPv4 object touched and the IPv4 dumps are equal, IPv4 traffic flows |
//! | [`expire6`] | as `release6`, the lease expiring instead: the client gone, `dhclient-script` run with `reason=EXPIRE6` as dhclient runs it at the end of the valid lifetime (dnsmasq's shortest lease is 2 minutes) |
//! | [`ipv6_only`] | eth1 IPv6-only (no IPv4 in the metadata, no DHCPv4): its DHCPv6 lease is routed in its table while its BOUND6 holds dhclient less than 1 s (nothing waited for an IPv4 that never comes: the sync budget is 3 s), no wait round, no worker; traffic from every IPv6 address of eth1 passes |
//!
//! The IPv6 rows run for a cloud whose [`Cloud::dual_stack_world`] (and
//! [`Cloud::ipv6_only_world`]) gives its emulator's instance, listed in its
//! `cloud_table!` line ([`ipv6_rows`]).
//!
//! The boot stage's row for every cloud is `tests/tests/cloud_boot.rs`
//! (`fetch_then_cache`, on a fake root: no namespaces).
//! [`cloud_table!`](crate::cloud_table) makes one `#[test]` per (cloud, row):
//! `gce::secondary`, `oracle::metadata_down`, ...
//!
//! Performs IO: builds [`World`]s (network namespaces, dnsmasq, the cloud's
//! metadata emulator, dhclient).

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::client::RENEW_T1;
use crate::clouds::Cloud;
use serde_json::Value;

use crate::world::{
    ECHO6, Ipv6World, ROUTER_V6_LINK_LOCAL, World, WorldOptions, exit_hooks_seconds_of,
    output_text, wait_until,
};

/// One `#[test]` per row of [`crate::cloud_rows`] for a cloud, in a module
/// named after it: `cloud_table!(gce => Gce)` gives `gce::secondary`,
/// `gce::unchanged`, `gce::metadata_down`; with `ipv6: [dual_stack, release6,
/// ipv6_only]` the IPv6 rows too (those [`ipv6_rows`] names for the cloud:
/// `ipv6_rows_listed` fails when the list and the cloud's worlds disagree).
#[macro_export]
macro_rules! cloud_table {
    ($module:ident => $cloud:ident) => {
        $crate::cloud_table!($module => $cloud, ipv6: []);
    };
    ($module:ident => $cloud:ident, ipv6: [$($row:ident),* $(,)?]) => {
        /// The cloud rows (`leasehook_tests::cloud_rows`) for this cloud.
        mod $module {
            use $crate::clouds::Cloud;

            $(
                #[test]
                fn $row() {
                    $crate::cloud_rows::$row(Cloud::$cloud);
                }
            )*

            /// The IPv6 rows listed are exactly those the cloud's worlds allow.
            #[test]
            fn ipv6_rows_listed() {
                $crate::cloud_rows::assert_ipv6_rows_listed(
                    Cloud::$cloud,
                    &[$(stringify!($row)),*],
                );
            }

            #[test]
            fn secondary() {
                $crate::cloud_rows::secondary(Cloud::$cloud);
            }

            #[test]
            fn unchanged() {
                $crate::cloud_rows::unchanged(Cloud::$cloud);
            }

            #[test]
            fn metadata_down() {
                $crate::cloud_rows::metadata_down(Cloud::$cloud);
            }
        }
    };
}

/// eth1's leased (or configured) address, the source its traffic must leave by.
const ETH1: &str = "10.98.1.20";
/// eth0's address: its traffic stays on the main table.
const ETH0: &str = "10.98.0.10";

/// A world on `cloud`: its DHCP, its metadata emulator with the world's
/// instance, healthy, and the hooks' provider; Debian's option-121 exit hook
/// beside leasehook's where the cloud's leases need it (GCE, Azure). `opts`
/// gives the rest (T1, budgets).
fn world(cloud: Cloud, row: &str, opts: WorldOptions) -> World {
    let on = cloud.world(Vec::new());
    let opts = WorldOptions {
        dhcp: on.dhcp,
        metadata: on.metadata,
        extra_hook_env: on.extra_hook_env,
        ..opts
    };
    let tag = format!("{}-{row}", cloud.provider());
    match cloud {
        Cloud::Gce | Cloud::Azure => World::with_option_121_hook(&tag, &opts),
        _ => World::new(&tag, &opts),
    }
}

/// What a failure shows: leasehook's objects, eth1's and eth0's logs, the
/// emulator's requests.
fn report(cloud: Cloud, w: &World) -> String {
    let requests = std::fs::read_to_string(cloud.log(&w.dir.0))
        .or_else(|_| std::fs::read_to_string(w.dir.0.join("imds.log")))
        .unwrap_or_default();
    format!(
        "{}\n--- eth1\n{}\n--- eth0\n{}\n--- {}\n{requests}",
        w.pbr_report(),
        w.log("eth1", false),
        w.log("eth0", false),
        cloud.emulator()
    )
}

/// eth1's rule and default route are in its table.
fn eth1_routed(cloud: Cloud, w: &World) -> bool {
    let t = cloud.eth1_table();
    let rule = format!("{t} from {ETH1} lookup {t} proto 176");
    let table = format!("table {t} proto 176");
    w.our_rules().contains(&rule)
        && w.our_routes().iter().any(|r| {
            r.starts_with("default via ") && r.contains(" dev eth1 ") && r.ends_with(&table)
        })
}

/// Brings up both NICs the way the cloud does: eth0 by DHCP, eth1 by DHCP
/// (Oracle: by `leasehook refresh`, its DHCP serving the primary VNIC only), and
/// waits until eth1 is routed.
fn bring_up(cloud: Cloud, w: &mut World) {
    w.bind("eth0", false);
    if cloud.leases_secondary() {
        w.bind("eth1", false);
    } else {
        let out = w.leasehook_ok(&["refresh", "-v"], &[], || report(cloud, w));
        assert!(
            out.contains("eth1: no DHCP, configured from the metadata"),
            "{cloud:?}: {out}"
        );
    }
    assert!(
        wait_until(Duration::from_secs(40), || eth1_routed(cloud, w)),
        "{cloud:?}: no policy routing for eth1:\n{}",
        report(cloud, w)
    );
}

/// Traffic from each of `sources` reaches the echo host, and from eth1's
/// address it leaves by eth1 (the kernel's choice for that source).
fn assert_traffic(cloud: Cloud, w: &World, sources: &[&str]) {
    w.assert_echoes(sources, || format!("{cloud:?}\n{}", report(cloud, w)));
    for src in sources {
        let want = if *src == ETH1 { "eth1" } else { "eth0" };
        let r = &w
            .inst
            .ip_json(&["route", "get", "198.51.100.10", "from", src])[0];
        assert_eq!(
            r["dev"].as_str(),
            Some(want),
            "{cloud:?}: traffic from {src} leaves by {r}\n{}",
            report(cloud, w)
        );
    }
}

/// The secondary NIC routed: eth1's rule and default route in its table
/// ([`Cloud::eth1_table`]), no rule for the primary, no IPv6 from a DHCPv4
/// lease; eth1's traffic leaves by eth1, eth0's by eth0.
pub fn secondary(cloud: Cloud) {
    let mut w = world(cloud, "two-nics", WorldOptions::default());
    bring_up(cloud, &mut w);
    let rules = w.our_rules();
    assert!(
        rules.iter().all(|r| !r.contains(ETH0) && !r.contains(':')),
        "{cloud:?}: a rule for the primary or of IPv6:\n{}",
        report(cloud, &w)
    );
    let t = cloud.eth1_table().to_string();
    assert!(
        w.our_routes()
            .iter()
            .all(|r| r.contains(&format!("table {t} "))),
        "{cloud:?}: a route outside eth1's table:\n{}",
        report(cloud, &w)
    );
    assert_traffic(cloud, &w, &[ETH1, ETH0]);
    let state = w.root.join("run/leasehook/iface/eth1.json");
    assert!(state.is_file(), "{cloud:?}: no {}", state.display());
}

/// The lines of an `ip monitor` output that touch leasehook's objects: its
/// protocol, eth1's table, eth1's addresses.
pub fn ours(monitor: &str, table: u32) -> Vec<String> {
    let lookup = format!("lookup {table}");
    let in_table = format!("table {table}");
    monitor
        .lines()
        .filter(|l| {
            l.contains("proto 176")
                || l.contains("10.98.1.21")
                || l.contains(&lookup)
                || l.contains(&in_table)
        })
        .map(str::to_owned)
        .collect()
}

/// Renewals with unchanged metadata write nothing: eth1 renewed twice (T1 of
/// [`RENEW_T1`] s), each logged `eth1 RENEW: 0 change(s)` (Oracle: two
/// refreshes), no leasehook object deleted, added or replaced, the dumps equal.
pub fn unchanged(cloud: Cloud) {
    let opts = WorldOptions {
        t1: Some(RENEW_T1),
        ..WorldOptions::default()
    };
    let mut w = world(cloud, "unchanged", opts);
    bring_up(cloud, &mut w);
    let before = w.snapshot();
    let renewals = |w: &World| {
        w.log("eth1", false)
            .matches("eth1 RENEW: 0 change(s)")
            .count()
    };
    let r0 = renewals(&w);
    let (again, seen) = w.inst.monitor(&["link"], || {
        if cloud.leases_secondary() {
            wait_until(Duration::from_secs(60), || renewals(&w) >= r0 + 2)
        } else {
            for _ in 0..2 {
                w.leasehook_ok(&["refresh", "-v"], &[], || report(cloud, &w));
            }
            true
        }
    });
    assert!(
        again,
        "{cloud:?}: fewer than 2 renewals:\n{}",
        report(cloud, &w)
    );
    assert_eq!(
        ours(&seen, cloud.eth1_table()),
        Vec::<String>::new(),
        "{cloud:?}: a renewal changed leasehook's objects:\n{}",
        report(cloud, &w)
    );
    assert_eq!(
        w.snapshot(),
        before,
        "{cloud:?}: the dumps after the renewals differ"
    );
    assert_traffic(cloud, &w, &[ETH1]);
}

/// The metadata service down after eth1 was routed: the hook's next renewal
/// of eth1 logs that it keeps the last applied state, `leasehook refresh`
/// fails naming eth1 (exit 1), and the kernel keeps eth1's routing.
pub fn metadata_down(cloud: Cloud) {
    let opts = WorldOptions {
        t1: Some(RENEW_T1),
        budget_s: 2.0,
        sync_budget_s: 1.0,
        ..WorldOptions::default()
    };
    let mut w = world(cloud, "md-down", opts);
    bring_up(cloud, &mut w);
    let before = w.snapshot();
    w.stop_metadata();
    if cloud.leases_secondary() {
        let from = w.log("eth1", false).len();
        let kept = |w: &World| {
            let log = w.log("eth1", false);
            let new = log.get(from..).unwrap_or_default();
            new.contains("keeping the last applied state") || new.contains("nothing changed: ")
        };
        assert!(
            wait_until(Duration::from_secs(30), || kept(&w)),
            "{cloud:?}: no renewal kept the last applied state:\n{}",
            report(cloud, &w)
        );
        assert_eq!(
            w.snapshot(),
            before,
            "{cloud:?}: a renewal with the metadata down changed the kernel:\n{}",
            report(cloud, &w)
        );
    }
    let out = w.leasehook(&["refresh", "-v"], &[]);
    let text = output_text(&out);
    assert!(
        out.status.code() == Some(1) && text.contains("leasehook: eth1: not checked: "),
        "{cloud:?}: refresh did not fail naming eth1: {text}\n{}",
        report(cloud, &w)
    );
    assert_eq!(
        w.snapshot(),
        before,
        "{cloud:?}: refresh with the metadata down changed the kernel: {text}\n{}",
        report(cloud, &w)
    );
    assert_traffic(cloud, &w, &[ETH1]);
}

// --- IPv6 (issue 34) ---------------------------------------------------------------

/// The IPv6 rows `cloud` runs: `dual_stack` (and `release6`, `expire6` where
/// its DHCP leases the secondary) with a dual-stack world, `ipv6_only` with an
/// IPv6-only one.
pub fn ipv6_rows(cloud: Cloud) -> Vec<&'static str> {
    let mut rows = Vec::new();
    if cloud.dual_stack_world().is_some() {
        rows.push("dual_stack");
        if cloud.leases_secondary() {
            rows.extend(["release6", "expire6"]);
        }
    }
    if cloud.ipv6_only_world().is_some() {
        rows.push("ipv6_only");
    }
    rows
}

/// The IPv6 rows a `cloud_table!` line lists are [`ipv6_rows`]: a world wired
/// without its rows, or a row without its world, fails here.
pub fn assert_ipv6_rows_listed(cloud: Cloud, listed: &[&str]) {
    assert_eq!(
        listed,
        ipv6_rows(cloud),
        "{cloud:?}: the IPv6 rows of its cloud_table! line are not those its worlds \
         (Cloud::dual_stack_world, Cloud::ipv6_only_world) allow"
    );
}

/// The world of an IPv6 row: [`world`] with the metadata service serving
/// `doc` and the IPv6 world `v6`.
fn world6(cloud: Cloud, row: &str, doc: &Value, v6: Ipv6World, opts: WorldOptions) -> World {
    let on = cloud.world_serving(doc);
    let opts = WorldOptions {
        tree: on.tree,
        ipv6: Some(v6),
        ..opts
    };
    let tag = format!("{}-{row}", cloud.provider());
    let opts = WorldOptions {
        dhcp: on.dhcp,
        metadata: on.metadata,
        extra_hook_env: on.extra_hook_env,
        ..opts
    };
    match cloud {
        Cloud::Gce | Cloud::Azure => World::with_option_121_hook(&tag, &opts),
        _ => World::new(&tag, &opts),
    }
}

/// [`report`] with the IPv6 side: the main table's IPv6 routes, the DHCPv6
/// clients' and hooks' logs.
fn report6(cloud: Cloud, w: &World) -> String {
    format!(
        "{}\n--- main IPv6\n{}\n--- eth1 -6\n{}\n--- eth0 -6\n{}",
        report(cloud, w),
        w.inst.ip(&["-6", "route", "show", "table", "main"]),
        w.log("eth1", true),
        w.log("eth0", true)
    )
}

/// Whether the main table has the IPv6 default route `iface` learned from the
/// router's advertisements (through [`ROUTER_V6_LINK_LOCAL`]).
fn ra_router(w: &World, iface: &str) -> bool {
    w.inst
        .ip(&["-6", "route", "show", "default", "dev", iface])
        .contains(&format!("via {ROUTER_V6_LINK_LOCAL} "))
}

/// eth1's IPv6 routing: a rule from each of `sources`, the default route
/// through the router and the subnet of the first source (the leased
/// address: whatever prefix the cloud's metadata gives) in its table.
fn eth1_routed_v6(cloud: Cloud, w: &World, sources: &[&str]) -> bool {
    let t = cloud.eth1_table();
    let rules = w.our_rules();
    let routes = w.our_routes();
    let table = format!(" table {t} proto 176");
    let leased: Option<std::net::IpAddr> = sources.first().and_then(|s| s.parse().ok());
    let on_link = |r: &String| {
        let dst = r.split_whitespace().next().unwrap_or_default();
        r.contains(" via - dev eth1 ")
            && dst
                .parse::<ipnet::Ipv6Net>()
                .is_ok_and(|n| leased.is_some_and(|a| ipnet::IpNet::V6(n).contains(&a)))
    };
    sources
        .iter()
        .all(|s| rules.contains(&format!("{t} from {s} lookup {t} proto 176")))
        && routes.iter().any(|r| {
            r.starts_with(&format!("default via {ROUTER_V6_LINK_LOCAL} dev eth1 "))
                && r.ends_with(&table)
        })
        && routes.iter().any(|r| on_link(r) && r.ends_with(&table))
}

/// Whether eth1 holds `address` (any prefix length).
fn holds(w: &World, address: &str) -> bool {
    let prefix = format!("eth1 {address}/");
    w.inst.addresses().iter().any(|a| a.starts_with(&prefix))
}

/// The primary up, both families (its DHCPv4 and DHCPv6 by dhclient), and
/// both links' IPv6 routers learned from the router advertisements.
fn bring_up_primary6(cloud: Cloud, w: &mut World) {
    w.bind("eth0", false);
    w.bind("eth0", true);
    assert!(
        wait_until(Duration::from_secs(20), || ra_router(w, "eth0")
            && ra_router(w, "eth1")),
        "{cloud:?}: no IPv6 router learned from the advertisements:\n{}",
        report6(cloud, w)
    );
}

/// eth1's DHCPv6 (Oracle: `leasehook refresh`), waited for until eth1's IPv6
/// routing and secondaries are in place.
fn bring_up_eth1_v6(cloud: Cloud, w: &mut World, v6: &Ipv6World) {
    if cloud.leases_secondary() {
        w.bind("eth1", true);
    } else {
        w.leasehook_ok(&["refresh", "-v"], &[], || report6(cloud, w));
    }
    let all = v6.eth1_all();
    assert!(
        wait_until(Duration::from_secs(40), || eth1_routed_v6(cloud, w, &all)
            && all.iter().all(|a| holds(w, a))),
        "{cloud:?}: no IPv6 policy routing for eth1 ({all:?}):\n{}",
        report6(cloud, w)
    );
}

/// eth1's DHCPv4 (Oracle: `leasehook refresh`), waited for until eth1 is
/// routed.
fn bring_up_eth1_v4(cloud: Cloud, w: &mut World) {
    if cloud.leases_secondary() {
        w.bind("eth1", false);
    } else {
        w.leasehook_ok(&["refresh", "-v"], &[], || report6(cloud, w));
    }
    assert!(
        wait_until(Duration::from_secs(40), || eth1_routed(cloud, w)),
        "{cloud:?}: no policy routing for eth1:\n{}",
        report6(cloud, w)
    );
}

/// Traffic from each of eth1's IPv6 `sources` leaves by eth1 and reaches the
/// IPv6 echo host from that address (past the router's source check); from
/// `eth0` (its IPv6 address) by eth0.
fn assert_traffic6(cloud: Cloud, w: &World, sources: &[&str], eth0: &str) {
    for (src, dev) in sources.iter().map(|s| (*s, "eth1")).chain([(eth0, "eth0")]) {
        let r = &w.inst.ip_json(&["-6", "route", "get", ECHO6, "from", src])[0];
        assert_eq!(
            r["dev"].as_str(),
            Some(dev),
            "{cloud:?}: IPv6 traffic from {src} leaves by {r}\n{}",
            report6(cloud, w)
        );
        assert_eq!(
            w.echo6_from(src).as_deref(),
            Some(src),
            "{cloud:?}: IPv6 traffic from {src} did not reach {ECHO6}\n{}",
            report6(cloud, w)
        );
    }
}

/// Without leasehook, eth1's IPv6 address (put there by hand, then taken
/// away) leaves by eth0, the main table's IPv6 default, and the router's source
/// check drops it, while eth0's own passes: the check the rows rely on can
/// fail.
fn assert_source_check_drops(cloud: Cloud, w: &World, v6: &Ipv6World) {
    let a = v6.eth1.as_str();
    let host = format!("{a}/128");
    w.inst
        .ip(&["-6", "address", "add", &host, "dev", "eth1", "nodad"]);
    let r = &w.inst.ip_json(&["-6", "route", "get", ECHO6, "from", a])[0];
    assert_eq!(
        r["dev"].as_str(),
        Some("eth0"),
        "{cloud:?}: without leasehook, IPv6 traffic from {a} leaves by {r}\n{}",
        report6(cloud, w)
    );
    assert_eq!(
        w.echo6_from(a),
        None,
        "{cloud:?}: the router's IPv6 source check let {a} in by eth0\n{}",
        report6(cloud, w)
    );
    assert_eq!(
        w.echo6_from(&v6.eth0).as_deref(),
        Some(v6.eth0.as_str()),
        "{cloud:?}: eth0's IPv6 traffic does not reach {ECHO6}\n{}",
        report6(cloud, w)
    );
    w.inst.ip(&["-6", "address", "del", &host, "dev", "eth1"]);
}

/// The dual-stack world on `cloud`: both NICs lease IPv4 and IPv6 from the
/// real dhclient (eth1's secondary IPv6 by the plan), the routers come from
/// the advertisements. Before eth1 is leased, its IPv6 address without
/// leasehook is shown dropped by the router's source check; then every
/// IPv6 address of eth1 is routed in its table (its rules, the default through
/// the router, the subnet) and reaches the IPv6 echo host by eth1, IPv4 as
/// before, nothing for the primary.
pub fn dual_stack(cloud: Cloud) {
    let doc = cloud
        .dual_stack_world()
        .unwrap_or_else(|| panic!("{cloud:?} has no dual-stack world (Cloud::dual_stack_world)"));
    assert!(
        leasehook_core::gate::check_ip(ECHO6.parse().unwrap_or_else(|e| panic!("{e}"))).is_ok(),
        "the address gate refuses the IPv6 echo host {ECHO6}"
    );
    let v6 = cloud.ipv6_world(false);
    let mut w = world6(cloud, "dual", &doc, v6.clone(), WorldOptions::default());
    bring_up_primary6(cloud, &mut w);
    assert_source_check_drops(cloud, &w, &v6);
    bring_up_eth1_v4(cloud, &mut w);
    bring_up_eth1_v6(cloud, &mut w, &v6);
    let rules = w.our_rules();
    assert!(
        rules
            .iter()
            .all(|r| !r.contains(ETH0) && !r.contains(&format!(" {} ", v6.eth0))),
        "{cloud:?}: a rule for the primary:\n{}",
        report6(cloud, &w)
    );
    assert!(
        eth1_routed(cloud, &w),
        "{cloud:?}: eth1's IPv4 routing went:\n{}",
        report6(cloud, &w)
    );
    assert_traffic(cloud, &w, &[ETH1, ETH0]);
    assert_traffic6(cloud, &w, &v6.eth1_all(), &v6.eth0);
}

/// The lines of an `ip monitor` output that name an IPv4 address or prefix.
fn ipv4_lines(monitor: &str) -> Vec<String> {
    monitor
        .lines()
        .filter(|l| {
            l.split_whitespace().any(|t| {
                t.split('/')
                    .next()
                    .is_some_and(|a| a.parse::<Ipv4Addr>().is_ok())
            })
        })
        .map(str::to_owned)
        .collect()
}

/// [`crate::netns::Netns::monitor`] of the instance for a `during` that needs
/// the world mutable (ending a DHCP client).
fn monitor_mut<R>(w: &mut World, during: impl FnOnce(&mut World) -> R) -> (R, String) {
    let mut monitor = w
        .inst
        .command("ip")
        .args(["monitor", "rule", "route", "address"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("ip monitor: {e}"));
    std::thread::sleep(Duration::from_millis(200));
    let result = during(w);
    std::thread::sleep(Duration::from_millis(300));
    let _ = monitor.kill();
    let mut seen = String::new();
    if let Some(mut out) = monitor.stdout.take() {
        use std::io::Read as _;
        let _ = out.read_to_string(&mut seen);
    }
    let _ = monitor.wait();
    (result, seen)
}

/// The instance's IPv4 rules, routes of every table and addresses, as `ip`
/// prints them (the addresses' lifetimes, which count down, left out).
fn ipv4_dump(w: &World) -> String {
    let addresses: Vec<String> = w
        .inst
        .ip(&["-4", "address", "show"])
        .lines()
        .filter(|l| !l.contains("_lft "))
        .map(str::to_owned)
        .collect();
    format!(
        "{}{}{}",
        w.inst.ip(&["-4", "rule", "show"]),
        w.inst.ip(&["-4", "route", "show", "table", "all"]),
        addresses.join("\n")
    )
}

/// In the dual-stack world (eth1's DHCPv6 bound before its DHCPv4, the other
/// order than [`dual_stack`]), `dhclient -6 -r` on eth1 (RELEASE6) removes
/// the IPv6 half of eth1's routing (its rules, the routes of its table, the
/// secondary) and leaves every IPv4 object untouched: `ip monitor` sees none
/// changed, the IPv4 dumps before and after are equal, IPv4 traffic flows.
pub fn release6(cloud: Cloud) {
    ends6(cloud, "RELEASE6");
}

/// [`release6`] with the lease expiring instead (EXPIRE6: the client gone,
/// `dhclient-script` run as dhclient runs it when the valid lifetime ends,
/// [`World::dhclient_expire6`]): the same IPv6 half goes, IPv4 untouched.
pub fn expire6(cloud: Cloud) {
    ends6(cloud, "EXPIRE6");
}

/// eth1's DHCPv6 lease ended by `reason` (`RELEASE6`, `EXPIRE6`): its IPv6
/// policy routing goes, every IPv4 object stays.
fn ends6(cloud: Cloud, reason: &str) {
    let doc = cloud
        .dual_stack_world()
        .unwrap_or_else(|| panic!("{cloud:?} has no dual-stack world (Cloud::dual_stack_world)"));
    let v6 = cloud.ipv6_world(false);
    let row = if reason == "EXPIRE6" { "exp6" } else { "rel6" };
    let mut w = world6(cloud, row, &doc, v6.clone(), WorldOptions::default());
    bring_up_primary6(cloud, &mut w);
    bring_up_eth1_v6(cloud, &mut w, &v6);
    bring_up_eth1_v4(cloud, &mut w);
    let before = ipv4_dump(&w);
    let from = w.log("eth1", true).len();
    let t = cloud.eth1_table();
    let gone = |w: &World| {
        !w.our_routes()
            .iter()
            .any(|r| r.contains(':') && r.contains(&format!(" table {t} ")))
            && !w.our_rules().iter().any(|r| r.contains(':'))
            && !v6.eth1_all().iter().any(|a| holds(w, a))
    };
    let (removed, seen) = monitor_mut(&mut w, |w| {
        if reason == "EXPIRE6" {
            w.dhclient_expire6("eth1", &v6.eth1);
        } else {
            w.dhclient_end("eth1", true, true);
        }
        wait_until(Duration::from_secs(20), || gone(w))
    });
    assert!(
        removed,
        "{cloud:?}: {reason} left IPv6 routing for eth1:\n{}",
        report6(cloud, &w)
    );
    let log = w.log("eth1", true);
    assert!(
        log.get(from..)
            .unwrap_or_default()
            .contains(&format!("eth1 {reason}: removed")),
        "{cloud:?}: the hook did not log the {reason}:\n{log}"
    );
    assert_eq!(
        ipv4_lines(&seen),
        Vec::<String>::new(),
        "{cloud:?}: {reason} touched IPv4 objects:\n{seen}"
    );
    assert_eq!(
        ipv4_dump(&w),
        before,
        "{cloud:?}: the IPv4 dumps after {reason} differ"
    );
    assert!(
        eth1_routed(cloud, &w),
        "{cloud:?}: eth1's IPv4 routing went:\n{}",
        report6(cloud, &w)
    );
    assert_traffic(cloud, &w, &[ETH1, ETH0]);
}

/// eth1 IPv6-only (no IPv4 in the metadata, no DHCPv4 on its link): its
/// DHCPv6 lease is routed in its table as soon as it is bound, the exit hooks
/// holding dhclient less than 1 s (a wait for IPv4 would last the sync budget,
/// 3 s, and hand over to a worker), no wait round logged, no worker left;
/// eth1 has no IPv4 and no IPv4 rule; traffic from every IPv6 address of eth1
/// passes, eth0's IPv4 and IPv6 too.
pub fn ipv6_only(cloud: Cloud) {
    let doc = cloud
        .ipv6_only_world()
        .unwrap_or_else(|| panic!("{cloud:?} has no IPv6-only world (Cloud::ipv6_only_world)"));
    let v6 = cloud.ipv6_world(true);
    let mut w = world6(cloud, "v6only", &doc, v6.clone(), WorldOptions::default());
    bring_up_primary6(cloud, &mut w);
    let times = w.time_exit_hooks("eth1");
    let start = Instant::now();
    bring_up_eth1_v6(cloud, &mut w, &v6);
    let routed = start.elapsed();
    // A NIC no DHCP serves (Oracle's) is configured by `leasehook refresh`:
    // no client, no hook to hold.
    if cloud.leases_secondary() {
        assert_bound6_waited_not(cloud, &w, &times, routed);
    }
    let eth1_v4 = w.inst.ip(&["-4", "address", "show", "dev", "eth1"]);
    assert!(
        eth1_v4.trim().is_empty() && !w.our_rules().iter().any(|r| r.contains("10.98.1.")),
        "{cloud:?}: IPv4 on the IPv6-only eth1: {eth1_v4}\n{}",
        report6(cloud, &w)
    );
    assert_traffic6(cloud, &w, &v6.eth1_all(), &v6.eth0);
    w.assert_echoes(&[ETH0], || report6(cloud, &w));
}

/// eth1's BOUND6 exit hooks (timed in `times`) held dhclient less than 1 s,
/// no wait round was logged and no worker is left: nothing waited for IPv4
/// (`routed`: how long after `dhclient -6` started eth1 was routed).
fn assert_bound6_waited_not(cloud: Cloud, w: &World, times: &Path, routed: Duration) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let held = loop {
        match exit_hooks_seconds_of(times, &["BOUND6"]) {
            Some(held) => break held,
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            None => panic!(
                "{cloud:?}: eth1's BOUND6 exit hooks did not finish:\n{}",
                report6(cloud, w)
            ),
        }
    };
    eprintln!(
        "{cloud:?}: eth1 BOUND6 held dhclient {:.1} ms; routed {:.1} s after dhclient -6 started",
        held * 1000.0,
        routed.as_secs_f64()
    );
    let log = w.log("eth1", true);
    assert!(
        held < 1.0 && !log.contains("eth1: round ") && !w.worker_pending("eth1"),
        "{cloud:?}: eth1's BOUND6 waited ({held:.3} s):\n{}",
        report6(cloud, w)
    );
}

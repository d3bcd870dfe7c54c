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
//! The boot stage's row for every cloud is `tests/tests/cloud_boot.rs`
//! (`fetch_then_cache`, on a fake root: no namespaces).
//! [`cloud_table!`](crate::cloud_table) makes one `#[test]` per (cloud, row):
//! `gce::secondary`, `oracle::metadata_down`, ...
//!
//! Performs IO: builds [`World`]s (network namespaces, dnsmasq, the cloud's
//! metadata emulator, dhclient).

use std::time::Duration;

use crate::client::RENEW_T1;
use crate::clouds::Cloud;
use crate::world::{World, WorldOptions, output_text, wait_until};

/// One `#[test]` per row of [`crate::cloud_rows`] for a cloud, in a module
/// named after it: `cloud_table!(gce => Gce)` gives `gce::secondary`,
/// `gce::unchanged`, `gce::metadata_down`.
#[macro_export]
macro_rules! cloud_table {
    ($module:ident => $cloud:ident) => {
        /// The cloud rows (`leasehook_tests::cloud_rows`) for this cloud.
        mod $module {
            use $crate::clouds::Cloud;

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

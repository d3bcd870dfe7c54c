// SPDX-License-Identifier: Apache-2.0
//! The scenario table every DHCP client's end-to-end suite runs, written once over
//! [`Client`]:
//!
//! | scenario | checks |
//! |---|---|
//! | [`apply`] | the lease ends in eth1's rules, routes and secondary address, none for the primary, no IPv6 from a DHCPv4 lease, traffic from every address reaches the echo host |
//! | [`renew`] | two renewals replace no leasehook object (`ip monitor` and dumps before and after) |
//! | [`release`] | each of the client's [`Client::ends`] removes rules, routes, secondary address and state file; the lease back again gives exactly the plan |
//! | [`hostile`] | options that would run `touch MARKER` in a shell are delivered to the hooks, run nowhere, and the lease is still routed |
//! | [`ipv6`] | a DHCPv6 lease adds the IPv6 rule and route and its release removes them; a client without DHCPv6 ([`Ipv6::Absent`]) is checked to have no IPv6 path |
//!
//! [`client_table!`](crate::client_table) makes one `#[test]` per (client,
//! scenario): `dhclient::renew`, `udhcpc::ipv6`, ...
//!
//! Performs IO: builds [`World`]s (network namespaces, dnsmasq, the IMDS emulator,
//! the client).

use std::time::Duration;

use crate::client::{Client, Ipv6, RENEW_T1, RenewHook};
use crate::world::{World, WorldOptions, wait_until};

/// One `#[test]` per scenario of [`crate::scenarios`] for a client, in a module
/// named after it: `client_table!(dhcpcd => Dhcpcd)` gives `dhcpcd::apply`,
/// `dhcpcd::renew`, `dhcpcd::release`, `dhcpcd::hostile`, `dhcpcd::ipv6`.
#[macro_export]
macro_rules! client_table {
    ($module:ident => $client:ident) => {
        /// The scenario table (`leasehook_tests::scenarios`) for this client.
        mod $module {
            use $crate::client::Client;

            #[test]
            fn apply() {
                $crate::scenarios::apply(Client::$client);
            }

            #[test]
            fn renew() {
                $crate::scenarios::renew(Client::$client);
            }

            #[test]
            fn release() {
                $crate::scenarios::release(Client::$client);
            }

            #[test]
            fn hostile() {
                $crate::scenarios::hostile(Client::$client);
            }

            #[test]
            fn ipv6() {
                $crate::scenarios::ipv6(Client::$client);
            }
        }
    };
}

/// `text` from byte `from` on (all of it when the log was started anew since).
fn since(text: &str, from: usize) -> &str {
    text.get(from..).unwrap_or(text)
}

fn report(c: Client, w: &World, v6: bool) -> String {
    format!("{}\n--- {} log\n{}", w.pbr_report(), c.name(), c.log(w, v6))
}

fn wait_installed(c: Client, w: &World, when: &str) {
    assert!(
        wait_until(Duration::from_secs(40), || w.secondary_pbr_installed()),
        "{}: no policy routing for eth1 {when}:\n{}",
        c.name(),
        report(c, w, false)
    );
}

fn wait_line(c: Client, w: &World, v6: bool, from: usize, line: &str) {
    assert!(
        wait_until(Duration::from_secs(10), || since(&c.hook_log(w, v6), from)
            .contains(line)),
        "{}: the hook did not log {line:?}:\n{}",
        c.name(),
        report(c, w, v6)
    );
}

fn assert_traffic(c: Client, w: &World, sources: &[&str]) {
    w.assert_echoes(sources, || format!("{}\n{}", c.name(), report(c, w, false)));
}

/// The lease on eth1 ends in leasehook's policy routing and traffic flows.
pub fn apply(c: Client) {
    let mut w = World::new(&format!("{}-apply", c.name()), &WorldOptions::default());
    c.start(&mut w);
    wait_installed(c, &w, "after the lease");
    assert!(
        w.inst
            .ip(&["-4", "addr", "show", "eth1"])
            .contains("10.98.1.20/24"),
        "{}: the client did not configure the lease's address:\n{}",
        c.name(),
        report(c, &w, false)
    );
    assert!(
        w.inst
            .addresses()
            .contains(&"eth1 10.98.1.21/32".to_owned()),
        "{}: no secondary address:\n{}",
        c.name(),
        report(c, &w, false)
    );
    let rules = w.our_rules();
    assert!(
        !rules.iter().any(|r| r.contains("10.98.0.")),
        "{}: the primary got rules (the default profile gives it none): {rules:#?}",
        c.name()
    );
    assert!(
        !rules.iter().chain(&w.our_routes()).any(|o| o.contains(':')),
        "{}: a DHCPv4 lease installed IPv6 policy routing:\n{}",
        c.name(),
        w.pbr_report()
    );
    assert_traffic(c, &w, &["10.98.1.20", "10.98.1.21", "10.98.0.10"]);
    let log = c.hook_log(&w, false);
    assert!(
        log.contains(c.bound_line()),
        "{}: every hook line names the interface and event ({:?}):\n{log}",
        c.name(),
        c.bound_line()
    );
}

/// Lines of `ip monitor` output that concern leasehook's objects.
fn ours(monitor: &str) -> Vec<String> {
    monitor
        .lines()
        .filter(|l| {
            l.contains("proto 176") || l.contains("10.98.1.21") || l.contains("lookup 10001")
        })
        .map(str::to_owned)
        .collect()
}

/// Renewals that keep the lease leave every leasehook object in the kernel as it
/// was: none is deleted, added or replaced (`ip monitor`), and the dumps before
/// and after are equal.
pub fn renew(c: Client) {
    let opts = WorldOptions {
        t1: Some(RENEW_T1),
        ..WorldOptions::default()
    };
    let mut w = World::new(&format!("{}-renew", c.name()), &opts);
    c.start(&mut w);
    wait_installed(c, &w, "after the lease");
    let before = (w.our_rules(), w.our_routes(), w.inst.addresses());
    let line = match c.renew_hook() {
        RenewHook::Runs(line) | RenewHook::Silent { line, .. } => line,
    };
    let count = |w: &World| c.hook_log(w, false).matches(line).count();
    let lines0 = count(&w);
    // Each round: one renewal (dnsmasq's ACK) and, where the hook runs for it,
    // its line, before the next trigger (a SIGUSR1 to udhcpc while it renews
    // makes it start over, with `deconfig`).
    let ((renewed, hooks_done), seen) = w.inst.monitor(&[], || {
        let (mut renewed, mut hooks_done) = (true, true);
        for _ in 0..2 {
            let (acks, lines) = (w.secondary_acks(), count(&w));
            c.trigger_renew(&w);
            renewed &= wait_until(Duration::from_secs(30), || w.secondary_acks() > acks);
            if let RenewHook::Runs(_) = c.renew_hook() {
                hooks_done &= wait_until(Duration::from_secs(10), || count(&w) > lines);
            }
        }
        (renewed, hooks_done)
    });
    assert!(
        renewed,
        "{}: fewer than 2 renewals (dnsmasq's ACKs) within 30 s each:\n{}",
        c.name(),
        report(c, &w, false)
    );
    if let RenewHook::Silent { why, .. } = c.renew_hook() {
        assert_eq!(
            count(&w),
            lines0,
            "{}: the hook ran for a renewal ({line:?}), which the table says it does not: {why}",
            c.name()
        );
    }
    assert_eq!(
        ours(&seen),
        Vec::<String>::new(),
        "{}: a renewal changed leasehook's objects",
        c.name()
    );
    assert_eq!(
        (w.our_rules(), w.our_routes(), w.inst.addresses()),
        before,
        "{}: the dumps after the renewals differ",
        c.name()
    );
    assert!(
        hooks_done,
        "{}: the hook did not log {line:?} for every renewal:\n{}",
        c.name(),
        report(c, &w, false)
    );
    assert_traffic(c, &w, &["10.98.1.21"]);
}

/// Each way the client takes eth1's lease away removes everything of leasehook's
/// for eth1; the lease back again gives exactly the plan.
pub fn release(c: Client) {
    let mut w = World::new(&format!("{}-release", c.name()), &WorldOptions::default());
    c.start(&mut w);
    wait_installed(c, &w, "after the lease");
    let mut last = None;
    for &end in c.ends() {
        if let Some(prev) = last {
            c.again(&mut w, prev);
            wait_installed(c, &w, &format!("after {prev:?} and the lease back"));
        }
        let from = c.hook_log(&w, false).len();
        c.end(&mut w, end);
        assert!(
            wait_until(Duration::from_secs(20), || w.secondary_pbr_gone()),
            "{}: {end:?} left leasehook's objects or state:\n{}",
            c.name(),
            report(c, &w, false)
        );
        wait_line(c, &w, false, from, c.end_line(end));
        if c.drops_address() {
            assert!(
                wait_until(Duration::from_secs(10), || !w
                    .inst
                    .ip(&["-4", "addr", "show", "eth1"])
                    .contains("10.98.1.20")),
                "{}: {end:?} left the lease's address (the client did not act):\n{}",
                c.name(),
                report(c, &w, false)
            );
        }
        last = Some(end);
    }
    let last = last.unwrap_or_else(|| panic!("{} has no way to end a lease", c.name()));
    c.again(&mut w, last);
    wait_installed(c, &w, &format!("after {last:?} and the lease back"));
    assert_eq!(w.our_rules().len(), 2, "{}", w.pbr_report());
    assert_eq!(w.our_routes().len(), 2, "{}", w.pbr_report());
    assert_traffic(c, &w, &["10.98.1.21"]);
}

/// DHCP options whose values would run `touch MARKER` in a shell reach the
/// client's hooks, run nowhere, and the lease is routed as usual.
pub fn hostile(c: Client) {
    let marker = std::env::temp_dir().join(format!(
        "leasehook-{}-pwned-{}",
        c.name(),
        std::process::id()
    ));
    let _ = std::fs::remove_file(&marker);
    let mut w = World::new(&format!("{}-hostile", c.name()), &c.hostile_world(&marker));
    c.prepare_hostile(&w);
    c.start(&mut w);
    wait_installed(c, &w, "with hostile options in the lease");
    assert!(
        !marker.exists(),
        "{}: a hostile option reached a shell",
        c.name()
    );
    if let Err(why) = c.hostile_delivered(&w, &marker) {
        panic!("{}: {why}\n{}", c.name(), report(c, &w, false));
    }
    assert_traffic(c, &w, &["10.98.1.20", "10.98.1.21"]);
    assert!(
        !marker.exists(),
        "{}: a hostile option reached a shell",
        c.name()
    );
}

/// A DHCPv6 lease on eth1 adds the IPv6 rule and subnet route, its release removes
/// them; a client without DHCPv6 in leasehook is checked to have no IPv6 path.
pub fn ipv6(c: Client) {
    let (bound_line, released_line) = match c.ipv6() {
        Ipv6::Dhcpv6 {
            bound_line,
            released_line,
        } => (bound_line, released_line),
        Ipv6::Absent { why } => {
            eprintln!("{}: no IPv6: {why}", c.name());
            c.assert_no_ipv6_path();
            return;
        }
    };
    let mut w = World::new(&format!("{}-ipv6", c.name()), &WorldOptions::default());
    c.start_v6(&mut w);
    let rule = "10001 from fd00:98:1::20 lookup 10001 proto 176";
    let route = "fd00:98:1::/64 via - dev eth1 scope - src - table 10001 proto 176";
    assert!(
        wait_until(Duration::from_secs(40), || w
            .our_rules()
            .contains(&rule.to_owned())
            && w.our_routes().contains(&route.to_owned())
            && (!c.start_v6_leases_v4() || w.secondary_pbr_installed())),
        "{}: no IPv6 policy routing:\n{}",
        c.name(),
        report(c, &w, true)
    );
    wait_line(c, &w, true, 0, bound_line);
    let from = c.hook_log(&w, true).len();
    c.end_v6(&mut w);
    assert!(
        wait_until(Duration::from_secs(20), || w.our_rules().is_empty()
            && w.our_routes().is_empty()),
        "{}: the release left policy routing:\n{}",
        c.name(),
        report(c, &w, true)
    );
    wait_line(c, &w, true, from, released_line);
}

// SPDX-License-Identifier: Apache-2.0
//! leasehook on Alibaba Cloud ECS.
//!
//! * `in_process` (always compiled): the ECS provider's wait against the ECS
//!   emulator on loopback, on the dual-stack instance of the shared IPv6 world
//!   contract (`aliyun_emulator::dual_stack_world`): per family, the keys
//!   read, an IPv6 key published late holding only the IPv6 lease, hostile IPv6
//!   values refused, and the dual-stack ENI's plan.
//! * `world` (the `netns` feature), for real: the namespace world
//!   (`leasehook_tests::world`) with the ECS metadata emulator in hardened mode
//!   at `100.100.100.200:80` on the router (`leasehook_tests::aliyun_emulator`,
//!   which answers the VPC's addresses only) in place of IMDS, the hooks told
//!   `LEASEHOOK_PROVIDER=aliyun` and nothing else (the default endpoint), real
//!   dhclient and systemd-networkd.
//!
//! | test | shows |
//! |---|---|
//! | [`world::dhclient_routes_the_secondary_from_the_ecs_metadata`] | eth1's addresses get rules and a table with the right gateway, none for the primary; traffic from each address passes the router's source check; five `GET`s and one token `PUT` per event, every `GET` with a token, from the NIC's own address; the token cached in its own file |
//! | [`world::release_removes_everything_and_the_lease_back_restores_it`] | RELEASE and STOP remove rules, routes, the secondary address and the state file |
//! | [`world::renew_with_unchanged_metadata_writes_nothing`] | two renewals: no netlink object touched (`ip monitor`), `0 change(s)` |
//! | [`world::hot_plug_race_does_not_hold_dhclient`] | the NIC's folder appears 2 s after the lease: the client is let go after the sync budget, the worker completes |
//! | [`world::networkd_routes_the_secondary_from_the_ecs_metadata`] | the same plan through networkd and its dispatcher |
//!
//! Compiled with the `netns` feature; needs root, isc-dhcp-client, dnsmasq,
//! systemd-networkd, networkd-dispatcher and dbus-daemon, and fails, never skips,
//! without them.

#![cfg(test)]

mod in_process {
    use std::net::IpAddr;
    use std::time::{Duration, Instant};

    use leasehook_core::gate::Refusal;
    use leasehook_core::model::{
        Address, Family, IfName, InstanceNetwork, InterfacePlan, Lease, Link, MacAddr, Missing,
        Reason,
    };
    use leasehook_core::plan::{InterfaceLease, PlanConfig, PlanInput, plan};
    use leasehook_core::source::aliyun::AliyunProvider;
    use leasehook_core::source::aliyun::nic::device_slot;
    use leasehook_core::source::provider::{NicEvent, Outcome, Provider as _, SystemClock};
    use leasehook_tests::aliyun_emulator::{IPV6_GATEWAY, dual_stack_world, loopback_config};
    use leasehook_tests::clouds::budget;
    use leasehook_tests::emulator::{Emulator, Scenario};
    use leasehook_tests::world::{MAC0, MAC1};
    use serde_json::{Value, json};

    const MACS: &str = "/latest/meta-data/network/interfaces/macs";

    /// The IPv6 keys of a MAC folder.
    const V6_KEYS: [&str; 4] = [
        "ipv6s",
        "vswitch-ipv6-cidr-block",
        "ipv6-gateway",
        "ipv6-prefixes",
    ];

    /// The emulator (hardened mode) serving `tree` with `scenario`.
    fn start(tree: Value, scenario: Value) -> Emulator {
        let mut c = loopback_config(tree, true);
        c.scenario = Scenario::from_value(scenario).unwrap();
        Emulator::start("127.0.0.1:0".parse().unwrap(), c).unwrap()
    }

    /// eth1's lease of `address` (DHCPv4: /24 through the vSwitch's .253;
    /// DHCPv6: a /128, no router).
    fn event(address: &str) -> NicEvent {
        let address: IpAddr = address.parse().unwrap();
        let (prefix_len, routers) = match address {
            IpAddr::V4(_) => (24, vec!["10.98.1.253".parse().unwrap()]),
            IpAddr::V6(_) => (128, vec![]),
        };
        let lease = Lease {
            family: Family::of(&address),
            address,
            prefix_len,
            routers,
            reason: Reason::Bound,
        };
        NicEvent::try_new(
            IfName::try_new("eth1").unwrap(),
            MAC1.parse().unwrap(),
            vec![lease],
        )
        .unwrap()
    }

    /// The provider's wait for `event` (budget `secs`) against `emu`, its token
    /// cache in a folder of its own.
    fn wait(emu: &Emulator, event: &NicEvent, secs: u64) -> Outcome {
        let root = tempfile::tempdir().unwrap();
        AliyunProvider::try_new(root.path(), Some(&emu.base_url()))
            .unwrap()
            .wait_for_nic(event, &budget(secs), &SystemClock)
    }

    fn complete(out: Outcome) -> InstanceNetwork {
        match out {
            Outcome::Complete(net) => net,
            other => panic!("{other:?}"),
        }
    }

    /// The keys of eth1's folder asked, in order (`GET` only).
    fn asked(emu: &Emulator) -> Vec<String> {
        let folder = format!("{MACS}/{MAC1}/");
        emu.log()
            .iter()
            .filter(|e| e.method == "GET")
            .map(|e| {
                e.path
                    .strip_prefix(&folder)
                    .unwrap_or(e.path.as_str())
                    .to_owned()
            })
            .collect()
    }

    /// eth1's plan from `network` for `event`'s lease: eth0 (the primary)
    /// holding `fd00:98:0::10` and 10.98.0.10 in the kernel, as in the world.
    fn eth1_plan(network: &InstanceNetwork, event: &NicEvent) -> InterfacePlan {
        let link = |name: &str, mac: &str| Link {
            name: IfName::try_new(name).unwrap(),
            mac: mac.parse::<MacAddr>().unwrap(),
            ipv6_router: None,
        };
        let links = [link("eth0", MAC0), link("eth1", MAC1)];
        let leases: Vec<InterfaceLease> = event
            .leases()
            .iter()
            .map(|l| InterfaceLease {
                interface: event.interface().clone(),
                lease: l.clone(),
            })
            .collect();
        let held: Vec<Address> = ["10.98.0.10/24", "fd00:98:0::10/64"]
            .into_iter()
            .map(|a| Address {
                addr: a.parse().unwrap(),
                dev: IfName::try_new("eth0").unwrap(),
            })
            .collect();
        let mut input = PlanInput::new(network, &links, &leases);
        input.link_addresses = &held;
        let p = plan(&input, &PlanConfig::default()).unwrap();
        p.interfaces
            .into_iter()
            .find(|i| i.name.as_str() == "eth1")
            .unwrap()
    }

    fn lines<T: std::fmt::Display>(items: &[T]) -> Vec<String> {
        items.iter().map(ToString::to_string).collect()
    }

    /// eth1's table: `table_base` plus the slot of its MAC.
    fn table() -> u32 {
        10_000 + device_slot(MAC1.parse().unwrap())
    }

    #[test]
    fn a_dual_stack_nic_is_complete_per_family_with_its_own_keys() {
        let emu = start(dual_stack_world(), json!({}));
        // DHCPv6: the leased address listed, the vSwitch's block; the gateway
        // and the prefixes asked once (no prefix delegated: 404).
        let net = complete(wait(&emu, &event("fd00:98:1::20"), 10));
        assert_eq!(
            asked(&emu),
            [
                "/latest/meta-data/mac",
                "primary-ip-address",
                "ipv6s",
                "vswitch-ipv6-cidr-block",
                "ipv6-gateway",
                "ipv6-prefixes"
            ]
        );
        let nic = net.nic(MAC1.parse().unwrap()).unwrap();
        assert_eq!(
            lines(&nic.ipv6s),
            ["fd00:98:1::20", "fd00:98:1::21"],
            "{nic:?}"
        );
        assert_eq!(lines(&nic.subnet_ipv6_cidr_blocks), ["fd00:98:1::/64"]);
        assert_eq!(nic.routes.len(), 1);
        assert_eq!(nic.routes[0].to.to_string(), "::/0");
        assert_eq!(nic.routes[0].via.to_string(), IPV6_GATEWAY);
        assert_eq!(lines(&nic.gateways), [IPV6_GATEWAY]);
        assert!(nic.ipv6_prefixes.is_empty());
        // DHCPv4 on the same instance: five GETs, none of an IPv6 key.
        let emu = start(dual_stack_world(), json!({}));
        let net = complete(wait(&emu, &event("10.98.1.20"), 10));
        let a = asked(&emu);
        assert_eq!(a.len(), 5, "{a:?}");
        assert!(a.iter().all(|k| !V6_KEYS.contains(&k.as_str())), "{a:?}");
        let nic = net.nic(MAC1.parse().unwrap()).unwrap();
        assert!(nic.ipv6s.is_empty() && nic.subnet_ipv6_cidr_blocks.is_empty());
    }

    #[test]
    fn an_ipv6_key_published_late_holds_only_the_ipv6_lease() {
        // eth1's `ipv6s` appears 2 s after the first request.
        let late = || json!({"appear": [{"path": format!("{MACS}/{MAC1}/ipv6s"), "after": 2.0}]});
        // The IPv4 lease: complete at once, no IPv6 key asked, no round slept.
        let emu = start(dual_stack_world(), late());
        let t = Instant::now();
        complete(wait(&emu, &event("10.98.1.20"), 10));
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        let a = asked(&emu);
        assert!(a.iter().all(|k| !V6_KEYS.contains(&k.as_str())), "{a:?}");
        // The IPv6 lease: held until `ipv6s` answers, asking it alone again.
        let emu = start(dual_stack_world(), late());
        let t = Instant::now();
        let net = complete(wait(&emu, &event("fd00:98:1::20"), 10));
        assert!(
            t.elapsed() >= Duration::from_millis(1900),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(net.nics[0].ipv6s.len(), 2);
        let a = asked(&emu);
        let first = [
            "/latest/meta-data/mac",
            "primary-ip-address",
            "ipv6s",
            "vswitch-ipv6-cidr-block",
            "ipv6-gateway",
            "ipv6-prefixes",
        ];
        assert_eq!(a[..6], first, "{a:?}");
        assert!(a[6..].iter().all(|k| k == "ipv6s"), "{a:?}");
        assert!(a.len() >= 8, "{a:?}");
        // Never published within the budget: partial, only the IPv6 addresses
        // missing.
        let emu = start(
            dual_stack_world(),
            json!({"appear": [{"path": format!("{MACS}/{MAC1}/ipv6s"), "after": 60.0}]}),
        );
        let Outcome::Partial { missing, .. } = wait(&emu, &event("fd00:98:1::20"), 1) else {
            panic!("not partial")
        };
        assert_eq!(missing, [Missing::Addresses { family: Family::V6 }]);
    }

    #[test]
    fn the_dual_stack_enis_plan_routes_ipv6_through_the_published_gateway() {
        let emu = start(dual_stack_world(), json!({}));
        let ev = event("fd00:98:1::20");
        let net = complete(wait(&emu, &ev, 10));
        let p = eth1_plan(&net, &ev);
        let t = table();
        assert!(p.missing.is_empty() && p.refused.is_empty(), "{p:?}");
        assert_eq!(
            lines(&p.rules),
            [
                format!("from fd00:98:1::20/128 lookup {t} priority {t}"),
                format!("from fd00:98:1::21/128 lookup {t} priority {t}"),
            ]
        );
        assert_eq!(
            lines(&p.routes),
            [
                format!("default via {IPV6_GATEWAY} dev eth1 table {t}"),
                format!("fd00:98:1::/64 dev eth1 table {t}"),
            ]
        );
        // The secondary the metadata lists is added by the OS on ECS (as its
        // secondary private IPv4 addresses are): leasehook adds it.
        assert_eq!(lines(&p.addresses), ["fd00:98:1::21/128 dev eth1"]);
    }

    /// `dual_stack_world` with eth1's `key` reading `value`.
    fn hostile(key: &str, value: &str) -> Value {
        let mut tree = dual_stack_world();
        tree["latest"]["meta-data"]["network"]["interfaces"]["macs"][MAC1][key] = json!(value);
        tree
    }

    #[test]
    fn hostile_ipv6_values_are_refused() {
        let ev = event("fd00:98:1::20");
        let plan_of = |tree: Value| {
            let emu = start(tree, json!({}));
            let net = complete(wait(&emu, &ev, 10));
            eth1_plan(&net, &ev)
        };
        let t = table();
        let default = format!("default via {IPV6_GATEWAY} dev eth1 table {t}");
        // A /0 block: refused as the subnet, so no route and no rule.
        let p = plan_of(hostile("vswitch-ipv6-cidr-block", "::/0"));
        assert!(
            p.refused.iter().any(|r| r.reason == Refusal::Everything),
            "{:?}",
            p.refused
        );
        // Never the table's on-link route; the published gateway stays its
        // default.
        assert_eq!(lines(&p.routes), std::slice::from_ref(&default), "{p:?}");
        // The metadata service's address (ECS's, IPv4-mapped) among the
        // addresses: refused, the rest routed.
        let p = plan_of(hostile("ipv6s", "[fd00:98:1::20,::ffff:100.100.100.200]"));
        let refused: Vec<(&str, &Refusal)> = p
            .refused
            .iter()
            .map(|r| (r.value.as_str(), &r.reason))
            .collect();
        assert!(
            matches!(
                refused[..],
                [("::ffff:100.100.100.200", Refusal::MetadataService { .. })]
            ),
            "{refused:?}"
        );
        assert_eq!(
            lines(&p.rules),
            [format!("from fd00:98:1::20/128 lookup {t} priority {t}")]
        );
        // Another NIC's address (eth0 holds it): refused.
        let p = plan_of(hostile("ipv6s", "[fd00:98:1::20,fd00:98:0::10]"));
        assert!(
            p.refused
                .iter()
                .any(|r| r.value == "fd00:98::10" && matches!(r.reason, Refusal::OtherNic { .. })),
            "{:?}",
            p.refused
        );
        assert!(
            !lines(&p.addresses)
                .iter()
                .any(|a| a.contains("fd00:98::10/"))
        );
        // A gateway that is one of the NIC's addresses: the address is refused
        // (a router) and no default route goes through it.
        let p = plan_of(hostile("ipv6-gateway", "fd00:98:1::21"));
        assert!(
            p.refused
                .iter()
                .any(|r| r.value == "fd00:98:1::21" && matches!(r.reason, Refusal::Router { .. })),
            "{:?}",
            p.refused
        );
        assert!(
            !lines(&p.routes).iter().any(|r| r.starts_with("default")),
            "{p:?}"
        );
        assert!(p.addresses.is_empty(), "{p:?}");
        // Values that are no IPv6 value at all fail the wait, naming the key.
        for (key, value) in [
            ("ipv6-gateway", "fd00:99::1"),
            ("ipv6-gateway", "100.100.100.200"),
            ("vswitch-ipv6-cidr-block", "fd00:98:1::"),
            ("ipv6s", "[fd00:98:1::20;reboot]"),
        ] {
            let emu = start(hostile(key, value), json!({}));
            let Outcome::Failed(e) = wait(&emu, &ev, 10) else {
                panic!("{key} {value}: not failed")
            };
            assert!(e.to_string().contains(&format!("{MAC1}/{key}")), "{e}");
        }
    }
}

#[cfg(feature = "netns")]
mod world {

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
        let cloud =
            Cloud::Aliyun.world(vec!["--scenario".to_owned(), format!("@{}", sc.display())]);
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
}

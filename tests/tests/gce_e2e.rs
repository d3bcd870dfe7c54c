// SPDX-License-Identifier: Apache-2.0
//! Google Compute Engine end to end: the GCE provider against the GCE metadata
//! emulator (`leasehook_tests::gce_emulator`).
//!
//! * `in_process`: the provider's client, wait and datasource against the
//!   emulator on loopback: the header both ways, one request per round, the
//!   hot-plugged NIC's late entry, the faults (always compiled).
//! * `world` (the `netns` feature): the two-NIC world with the emulator on
//!   169.254.169.254:80, `LEASEHOOK_PROVIDER=gce`, and dnsmasq handing out GCE's
//!   leases: /32 with the routes in option 121 (the gateway's /32 on the link, then
//!   the default or the subnet through it). Debian's dhclient installs option-121
//!   routes with its `rfc3442-classless-routes` exit hook, which is copied into
//!   the world's private `/etc/netns/<ns>/dhcp/` next to leasehook's. Real
//!   dhclient and real systemd-networkd: the secondary's lease and its IP alias
//!   get rules and a table whose default route reaches the /32 lease's gateway,
//!   traffic from them passes the router's source check, RELEASE removes
//!   everything, renewals write nothing, and the hot-plug race hands over to the
//!   worker. A Dynamic NIC (VLAN 7 on nic1, issue 36) gets its VLAN, /32, rule
//!   and table from `refresh` and loses them when the list's 404 says it is gone
//!   (in a VM with Debian's kernel where the host has no 802.1Q).
//!   Needs root, isc-dhcp-client, dnsmasq, systemd-networkd,
//!   networkd-dispatcher and dbus-daemon, and fails, never skips, without them.

#![cfg(test)]
#![allow(clippy::too_many_lines)]

mod in_process {

    use leasehook_core::source::gce::GceProvider;
    use leasehook_core::source::provider::{
        Identity as _, NicEvent, Outcome, Provider, SystemClock,
    };
    use leasehook_tests::clouds::{
        assert_hot_plug_waited, assert_waits_fail, budget as policy, eth1_event, wait_faults,
    };
    use leasehook_tests::gce_emulator::{Config, GceEmulator, Scenario, world_tree};
    use leasehook_tests::world::MAC1;
    use serde_json::json;

    const NICS: &str = "/computeMetadata/v1/instance/network-interfaces/?recursive=true";

    fn start(scenario: serde_json::Value) -> GceEmulator {
        let mut c = Config::new(world_tree());
        c.scenario = Scenario::from_value(scenario).unwrap();
        GceEmulator::start("127.0.0.1:0".parse().unwrap(), c).unwrap()
    }

    /// eth1's lease as GCE gives it: a /32.
    fn event() -> NicEvent {
        eth1_event(32)
    }

    fn wait(emu: &GceEmulator, secs: u64) -> Outcome {
        GceProvider::try_new(Some(&emu.base_url()))
            .unwrap()
            .wait_for_nic(&event(), &policy(secs), &SystemClock)
    }

    #[test]
    fn one_request_with_the_header_when_the_metadata_agrees() {
        let emu = start(json!({}));
        let Outcome::Complete(net) = wait(&emu, 10) else {
            panic!("{:?}", emu.log())
        };
        let nic = net.nic(MAC1.parse().unwrap()).unwrap();
        assert_eq!(nic.device_number, Some(1));
        assert_eq!(nic.subnet_ipv4_cidr_blocks[0].to_string(), "10.98.1.0/24");
        assert_eq!(nic.ipv4_prefixes[0].to_string(), "10.98.1.21/32");
        let log = emu.log();
        assert_eq!(log.len(), 1, "{log:?}");
        assert_eq!(log[0].path, NICS);
        assert_eq!(log[0].flavor, "Google");
        assert_eq!(log[0].status, "200");
    }

    #[test]
    fn the_hot_plugged_nic_is_waited_for_one_request_a_round() {
        assert_hot_plug_waited(
            |after| json!({"appear": [{"nic": 1, "after": after}]}),
            start,
            wait,
            |emu| (emu.count("network-interfaces"), emu.log().len()),
        );
    }

    /// Each fault row: the wait fails (or gives up) and never reads the fault as
    /// an empty answer.
    #[test]
    fn faults_fail_the_wait_and_are_never_empty() {
        let mut faults = wait_faults("/computeMetadata", NICS.split('?').next().unwrap());
        let rule = json!({"rules": [{"path": "/computeMetadata", "action": "no-flavor"}]});
        faults.push(("no-flavor", rule, false));
        assert_waits_fail(
            faults,
            start,
            wait,
            |emu| emu.log().len(),
            |url| {
                GceProvider::try_new(Some(url)).unwrap().wait_for_nic(
                    &event(),
                    &policy(1),
                    &SystemClock,
                )
            },
        );
    }

    #[test]
    fn the_datasource_reads_the_identity_as_cloud_init() {
        let emu = start(json!({}));
        let ds = GceProvider::try_new(Some(&emu.base_url()))
            .unwrap()
            .datasource(policy(5))
            .unwrap();
        let d = ds.fetch().unwrap();
        assert_eq!(d.instance_id, "4520031799277581759");
        assert_eq!(d.region.as_deref(), Some("us-central1"));
        assert_eq!(d.availability_zone.as_deref(), Some("us-central1-a"));
        assert_eq!(d.local_hostname.as_deref(), Some("vm-1"));
        assert_eq!(d.cloud_name, "gce");
        assert_eq!(d.user_data.as_deref(), Some(&b"#cloud-config\n{}\n"[..]));
        assert!(ds.check_instance_id(&d).unwrap());
        // instance-data v1, as cloud-init writes it for GCE.
        let (doc, _) = leasehook_tests::clouds::fetched_instance_data(&d);
        let v1 = &doc["v1"];
        assert_eq!(v1["cloud_name"], "gce", "{doc:#}");
        assert_eq!(v1["platform"], "gce");
        assert_eq!(v1["region"], "us-central1");
        assert_eq!(v1["availability_zone"], "us-central1-a");
        assert_eq!(v1["instance_id"], "4520031799277581759");
        assert_eq!(v1["local_hostname"], "vm-1");
        assert_eq!(
            doc["ds"]["meta_data"]["network-interfaces"][1]["ip"],
            "10.98.1.20"
        );
        assert!(
            emu.log().iter().all(|e| e.flavor == "Google"
                && (e.status == "200" || e.path.ends_with("user-data-encoding"))),
            "{:?}",
            emu.log()
        );
        // id, zone, hostname, NICs, user-data, its encoding (404), the check.
        assert_eq!(emu.log().len(), 7, "{:?}", emu.log());
    }

    /// One raw GET: the status line, then the rest of the answer.
    fn raw_get(emu: &GceEmulator, path: &str, headers: &str) -> String {
        use std::io::{Read as _, Write as _};
        let mut s = std::net::TcpStream::connect(emu.addr()).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: metadata.google.internal\r\n{headers}Connection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn the_emulator_refuses_requests_without_the_header() {
        let emu = start(json!({}));
        let id = "/computeMetadata/v1/instance/id";
        assert!(raw_get(&emu, id, "").starts_with("HTTP/1.1 403"));
        assert!(
            raw_get(
                &emu,
                id,
                "Metadata-Flavor: Google\r\nX-Forwarded-For: 10.0.0.1\r\n"
            )
            .starts_with("HTTP/1.1 403")
        );
        let a = raw_get(
            &emu,
            "/computeMetadata/v1/instance/network-interfaces/1/",
            "Metadata-Flavor: Google\r\n",
        );
        assert!(a.starts_with("HTTP/1.1 200"), "{a}");
        assert!(
            a.to_ascii_lowercase().contains("metadata-flavor: google"),
            "{a}"
        );
        assert!(
            a.contains("ip-aliases/\n") && a.contains("gateway\n"),
            "{a}"
        );
    }
}

/// Issue 34: GCE's IPv6 keys through the provider's wait against the emulator's
/// dual-stack and IPv6-only worlds, each family complete on its own, and the
/// gate over what the wait returns.
mod ipv6 {
    use std::time::{Duration, Instant};

    use leasehook_core::model::{Family, IfName, InstanceNetwork, Lease, Link, Missing, Reason};
    use leasehook_core::plan::{InterfaceLease, PlanConfig, PlanInput, plan};
    use leasehook_core::source::gce::GceProvider;
    use leasehook_core::source::provider::{NicEvent, Outcome, Provider, SystemClock};
    use leasehook_tests::clouds::budget;
    use leasehook_tests::gce_emulator::{
        Config, ETH0_IPV6, ETH1_IPV6, ETH1_IPV6_RANGE, GceEmulator, IPV6_GATEWAY, dual_stack_world,
        ipv6_only_world,
    };
    use leasehook_tests::world::{MAC0, MAC1};
    use serde_json::{Value, json};

    const V4: &str = "10.98.1.20";

    fn start(tree: Value) -> GceEmulator {
        GceEmulator::start("127.0.0.1:0".parse().unwrap(), Config::new(tree)).unwrap()
    }

    /// A lease as GCE's DHCP gives it: IPv4 a /32 through its gateway, IPv6
    /// the range's first address, no router (DHCPv6 names none).
    fn lease(address: &str) -> Lease {
        let address: std::net::IpAddr = address.parse().unwrap();
        let v4 = address.is_ipv4();
        Lease {
            family: Family::of(&address),
            address,
            prefix_len: if v4 { 32 } else { 128 },
            routers: if v4 {
                vec![[10, 98, 1, 1].into()]
            } else {
                Vec::new()
            },
            reason: Reason::Bound,
        }
    }

    /// eth1's event with these leases.
    fn event(leases: &[&str]) -> NicEvent {
        let leases = leases.iter().map(|a| lease(a)).collect();
        NicEvent::try_new(
            IfName::try_new("eth1").unwrap(),
            MAC1.parse().unwrap(),
            leases,
        )
        .unwrap()
    }

    fn wait(emu: &GceEmulator, event: &NicEvent, secs: u64) -> Outcome {
        GceProvider::try_new(Some(&emu.base_url()))
            .unwrap()
            .wait_for_nic(event, &budget(secs), &SystemClock)
    }

    fn complete(emu: &GceEmulator, event: &NicEvent) -> InstanceNetwork {
        match wait(emu, event, 10) {
            Outcome::Complete(net) => net,
            other => panic!("{other:?}: {:?}", emu.log()),
        }
    }

    /// eth1's plan (eth0 linked too, no lease) over `net`, as `ip` lines.
    fn plan_eth1(net: &InstanceNetwork, leases: &[&str]) -> String {
        let links: Vec<Link> = [("eth0", MAC0), ("eth1", MAC1)]
            .iter()
            .map(|(n, m)| Link {
                name: IfName::try_new(n).unwrap(),
                mac: m.parse().unwrap(),
                ipv6_router: None,
            })
            .collect();
        let leases: Vec<InterfaceLease> = leases
            .iter()
            .map(|a| InterfaceLease {
                interface: IfName::try_new("eth1").unwrap(),
                lease: lease(a),
            })
            .collect();
        let p = plan(
            &PlanInput::new(net, &links, &leases),
            &PlanConfig::default(),
        )
        .unwrap();
        leasehook_core::render::ip(&p)
    }

    #[test]
    fn a_dual_stack_nic_is_complete_in_one_request() {
        let emu = start(dual_stack_world());
        let net = complete(&emu, &event(&[V4, ETH1_IPV6]));
        assert_eq!(emu.log().len(), 1, "{:?}", emu.log());
        let nic = net.nic(MAC1.parse().unwrap()).unwrap();
        assert_eq!(
            nic.ipv6s,
            [ETH1_IPV6.parse::<std::net::Ipv6Addr>().unwrap()]
        );
        assert_eq!(nic.ipv6_prefixes[0].to_string(), ETH1_IPV6_RANGE);
        assert_eq!(nic.subnet_ipv6_cidr_blocks[0].to_string(), "fd00:98:1::/64");
        assert!(
            nic.gateways.contains(&IPV6_GATEWAY.parse().unwrap()),
            "{nic:?}"
        );
        let eth0 = net.nic(MAC0.parse().unwrap()).unwrap();
        assert_eq!(eth0.ipv6s[0].to_string(), ETH0_IPV6);
        let text = plan_eth1(&net, &[V4, ETH1_IPV6]);
        for line in [
            "ip -6 route add default via fe80::1 dev eth1 table 10001",
            "ip -6 route add fd00:98:1::/64 dev eth1 table 10001",
            "ip -6 rule add from fd00:98:1::20:0:0/128 lookup 10001 priority 10001",
            "ip -6 rule add from fd00:98:1::20:0:0/96 lookup 10001 priority 10001",
            "ip -4 rule add from 10.98.1.20/32 lookup 10001 priority 10001",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}:\n{text}");
        }
        // The range's first address is the DHCPv6 client's, the rest the
        // VM's to use: leasehook adds no address.
        assert!(!text.contains("address add"), "{text}");
    }

    #[test]
    fn an_ipv6_only_nic_is_complete_from_its_dhcpv6_lease_alone() {
        let emu = start(ipv6_only_world());
        let net = complete(&emu, &event(&[ETH1_IPV6]));
        assert_eq!(emu.log().len(), 1, "{:?}", emu.log());
        let nic = net.nic(MAC1.parse().unwrap()).unwrap();
        assert!(nic.local_ipv4s.is_empty() && nic.subnet_ipv4_cidr_blocks.is_empty());
        let text = plan_eth1(&net, &[ETH1_IPV6]);
        assert!(
            text.contains("eth1 02:00:00:00:00:02 secondary table 10001 families ipv6\n")
                && text.contains("ip -6 route add default via fe80::1 dev eth1 table 10001")
                && !text.contains("ip -4"),
            "{text}"
        );
        // An IPv4 lease there waits for IPv4 keys that never come.
        match wait(&emu, &event(&[V4]), 1) {
            Outcome::Partial { missing, .. } => assert_eq!(
                missing,
                [
                    Missing::Subnet { family: Family::V4 },
                    Missing::Addresses { family: Family::V4 }
                ]
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn ipv6_keys_published_late_hold_only_the_ipv6_half() {
        let mut tree = dual_stack_world();
        let nic1 = tree["instance"]["network-interfaces"][1]
            .as_object_mut()
            .unwrap();
        let mut late: Vec<(String, Value)> = Vec::new();
        for key in ["ipv6s", "ipv6", "gateway-ipv6"] {
            late.push((key.to_owned(), nic1.remove(key).unwrap()));
        }
        let emu = start(tree);
        // The IPv4 lease is not held by the missing IPv6 keys.
        complete(&emu, &event(&[V4]));
        assert_eq!(emu.log().len(), 1, "{:?}", emu.log());
        // The IPv6 lease (and a dual event, for its IPv6 half) waits for them.
        let dual = event(&[V4, ETH1_IPV6]);
        let t0 = Instant::now();
        let net = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(600));
                for (key, value) in &late {
                    emu.set(
                        &format!("instance/network-interfaces/1/{key}"),
                        value.clone(),
                    )
                    .unwrap();
                }
            });
            complete(&emu, &dual)
        });
        assert!(t0.elapsed() >= Duration::from_millis(600));
        let rounds = emu.log().iter().filter(|e| e.method == "GET").count() - 1;
        assert!(rounds >= 2, "{:?}", emu.log());
        let nic = net.nic(MAC1.parse().unwrap()).unwrap();
        assert_eq!(nic.ipv6_prefixes[0].to_string(), ETH1_IPV6_RANGE);
        // Before they came, the IPv6 half alone was missing.
        let emu = start({
            let mut t = dual_stack_world();
            t["instance"]["network-interfaces"][1]["ipv6s"] = json!(null);
            t
        });
        match wait(&emu, &dual, 1) {
            Outcome::Partial { missing, .. } => assert_eq!(
                missing,
                [
                    Missing::Subnet { family: Family::V6 },
                    Missing::Addresses { family: Family::V6 }
                ]
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn hostile_ipv6_values_are_refused_by_the_gate() {
        let mut tree = dual_stack_world();
        let nic1 = &mut tree["instance"]["network-interfaces"][1];
        // A /0 range, the metadata service's own address (EC2's IPv6 IMDS, which
        // the gate refuses on every cloud) and eth0's address, listed for eth1.
        nic1["ipv6"] = json!(["::/0", "fd00:98:1:0:0:20::/96", "fd00:98::10:0:0/128"]);
        nic1["ipv6s"] = json!([
            "fd00:98:1:0:0:20:0:0",
            "fd00:ec2:0:0:0:0:0:254",
            "fd00:98:0:0:0:10:0:0"
        ]);
        let emu = start(tree);
        let net = complete(&emu, &event(&[V4, ETH1_IPV6]));
        let text = plan_eth1(&net, &[V4, ETH1_IPV6]);
        for line in [
            "# eth1 refused: ipv6-prefix ::/0: ",
            "# eth1 refused: ipv6s fd00:ec2::254: ",
            "# eth1 refused: ipv6s fd00:98::10:0:0: ",
            "# eth1 refused: ipv6-prefix fd00:98::10:0:0",
        ] {
            assert!(text.lines().any(|l| l.starts_with(line)), "{line}:\n{text}");
        }
        // The subnet is the first address's /64 alone: no route to where the
        // refused entries point.
        let routes: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("ip -6 route"))
            .collect();
        assert_eq!(
            routes,
            [
                "ip -6 route add default via fe80::1 dev eth1 table 10001",
                "ip -6 route add fd00:98:1::/64 dev eth1 table 10001",
            ],
            "{text}"
        );
        let rules: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("ip -6 rule"))
            .collect();
        assert_eq!(
            rules,
            [
                "ip -6 rule add from fd00:98:1::20:0:0/96 lookup 10001 priority 10001",
                "ip -6 rule add from fd00:98:1::20:0:0/128 lookup 10001 priority 10001",
            ],
            "{text}"
        );
    }
}

#[cfg(feature = "netns")]
mod world {
    use leasehook_tests::clouds::Cloud;
    use std::time::Duration;

    use leasehook_tests::gce_emulator::{LogEntry, read_log};
    use leasehook_tests::world::{World, WorldOptions, assert_primary_not_held, wait_until};
    use serde_json::json;

    const RULES: [&str; 2] = [
        "10001 from 10.98.1.20 lookup 10001 proto 176",
        "10001 from 10.98.1.21 lookup 10001 proto 176",
    ];
    const ROUTES: [&str; 3] = [
        "10.98.1.1 via - dev eth1 scope link src - table 10001 proto 176",
        "default via 10.98.1.1 dev eth1 scope - src - table 10001 proto 176",
        "10.98.1.0/24 via - dev eth1 scope link src 10.98.1.20 table 10001 proto 176",
    ];

    fn options(scenario: &serde_json::Value) -> WorldOptions {
        // GCE's leases ([`CloudDhcp::Gce`]): /32, the gateway's /32 on the link
        // and the rest through it (option 121); only nic0 gets a default route.
        WorldOptions {
            tree: None,
            ..Cloud::Gce.world(vec!["--scenario".to_owned(), scenario.to_string()])
        }
    }

    /// The world, with Debian's option-121 exit hook beside leasehook's.
    fn world(tag: &str, opts: &WorldOptions) -> World {
        World::with_option_121_hook(tag, opts)
    }

    fn requests(w: &World) -> Vec<LogEntry> {
        read_log(&w.dir.0.join("gce.log"))
    }

    fn report(w: &World) -> String {
        format!(
            "{}\n--- eth1\n{}\n--- gce.log\n{}",
            w.pbr_report(),
            w.log("eth1", false),
            std::fs::read_to_string(w.dir.0.join("gce.log")).unwrap_or_default()
        )
    }

    fn installed(w: &World) -> bool {
        let (rules, routes) = (w.our_rules(), w.our_routes());
        RULES.iter().all(|r| rules.iter().any(|h| h == r))
            && ROUTES.iter().all(|r| routes.iter().any(|h| h == r))
    }

    fn wait_installed(w: &World, when: &str) {
        assert!(
            wait_until(Duration::from_secs(40), || installed(w)),
            "no GCE policy routing for eth1 {when}:\n{}",
            report(w)
        );
    }

    /// guest-agent's local route for an IP alias (proto 66): the alias is the
    /// instance's without being an address of the link.
    fn alias_route(w: &World) {
        w.inst.ip(&[
            "route",
            "add",
            "to",
            "local",
            "10.98.1.21/32",
            "dev",
            "eth1",
            "proto",
            "66",
            "table",
            "local",
        ]);
    }

    fn assert_traffic(w: &World, sources: &[&str]) {
        w.assert_echoes(sources, || report(w));
    }

    /// Issue 31 item 3: nic0's /32 lease reaches the gateway, and so the
    /// metadata server, only through option 121's routes, which Debian's
    /// `rfc3442-classless-routes` exit hook installs. leasehook's hook
    /// (`zz-leasehook`) runs after it, so the primary's BOUND finds the server
    /// reachable at once and does not hold dhclient for the synchronous budget
    /// (3 s here): seen holding it 2.4 s under the old name `leasehook`.
    #[test]
    fn the_primarys_bound_is_not_held_waiting_for_option_121s_routes() {
        let mut w = world("gce-bound", &options(&json!({})));
        let (held, eth0) = w.bind_primary_timed();
        let main = w.inst.ip(&["-4", "route", "show"]);
        assert!(main.contains("default via 10.98.0.1 dev eth0"), "{main}");
        assert_primary_not_held(held, &eth0);
    }

    #[test]
    fn dhclient_slash_32_leases_get_a_table_whose_default_route_works() {
        let mut w = world("gce-apply", &options(&json!({})));
        w.bind("eth0", false);
        w.bind("eth1", false);
        wait_installed(&w, "after the lease");
        let addr = w.inst.ip(&["-4", "addr", "show", "eth1"]);
        assert!(
            addr.contains("10.98.1.20/32"),
            "not GCE's /32 lease: {addr}"
        );
        assert!(
            !w.inst.addresses().iter().any(|a| a.contains("10.98.1.21")),
            "an IP alias is a rule source, never an address: {:?}",
            w.inst.addresses()
        );
        assert_eq!(w.our_rules().len(), 2, "{}", report(&w));
        assert_eq!(w.our_routes().len(), 3, "{}", report(&w));
        alias_route(&w);
        assert_traffic(&w, &["10.98.1.20", "10.98.1.21", "10.98.0.10"]);
        // The primary's and the secondary's event: one request each, with the
        // header, from the instance.
        let reqs = requests(&w);
        assert!(
            reqs.iter()
                .all(|e| e.flavor == "Google" && e.status == "200"),
            "{reqs:?}"
        );
        assert_eq!(
            reqs.iter()
                .filter(|e| e.path.contains("network-interfaces"))
                .count(),
            2,
            "{reqs:?}"
        );
        // RELEASE removes everything of leasehook's for eth1.
        w.dhclient_end("eth1", false, true);
        assert!(
            wait_until(Duration::from_secs(20), || w.our_rules().is_empty()
                && w.our_routes().is_empty()),
            "RELEASE left policy routing:\n{}",
            report(&w)
        );
        assert!(
            w.log("eth1", false).contains("eth1 RELEASE: removed"),
            "{}",
            report(&w)
        );
        assert!(!w.root.join("run/leasehook/iface/eth1.json").exists());
        // The lease back: exactly the plan again.
        w.bind("eth1", false);
        wait_installed(&w, "after the lease came back");
        assert_eq!(w.our_routes().len(), 3, "{}", report(&w));
    }

    /// The Dynamic NIC's MAC (GCE derives a MAC from the address: 10.98.2.30).
    const DYNAMIC_MAC: &str = "42:01:0a:62:02:1e";

    /// Issue 36 item 3: a Dynamic NIC (VLAN 7 on nic1, the metadata's
    /// `vlan-network-interfaces/1/7`, no DHCP) gets its VLAN `eth1.7` with its
    /// MAC, its /32 address, rule and table from `refresh`; traffic from it
    /// passes the router's source check on VLAN 7; again, nothing changes; the
    /// operator's VLAN-named link is left alone; removed from the metadata
    /// (a 404), what leasehook created goes. Needs 802.1Q: in the VM on a
    /// kernel without it.
    #[test]
    fn a_dynamic_nic_is_linked_routed_and_removed() {
        if leasehook_tests::vm::in_vlan_kernel("world::a_dynamic_nic_is_linked_routed_and_removed")
        {
            return;
        }
        let mut w = world("gce-dyn", &options(&json!({})));
        // The VPC's side: the Dynamic NIC's subnet's gateway on VLAN 7 of
        // eth1's wire, the source check on it.
        w.router.ip(&[
            "link", "add", "link", "gw1", "name", "gw1.7", "type", "vlan", "id", "7",
        ]);
        w.router.sysctl("net.ipv4.conf.gw1/7.rp_filter", "1");
        w.router
            .ip(&["address", "add", "10.98.2.1/24", "dev", "gw1.7"]);
        w.router.ip(&["link", "set", "gw1.7", "up"]);
        w.bind("eth0", false);
        // Google's name for a VLAN of eth0, taken by the operator's macvlan.
        w.inst.ip(&[
            "link", "add", "link", "eth0", "name", "eth0.9", "type", "macvlan",
        ]);
        // Two Dynamic NICs as the metadata server lists them: VLAN 7 on nic1,
        // and VLAN 9 on nic0, whose name the operator's link holds.
        let entry = |mac: &str, subnet: u8, parent: u8, vlan: u16| {
            json!({
                "mac": mac, "ip": format!("10.98.{subnet}.30"), "gateway": format!("10.98.{subnet}.1"),
                "subnetmask": "255.255.255.0", "mtu": 1460, "vlan": vlan,
                "parent-interface": format!("/computeMetadata/v1/instance/network-interfaces/{parent}/"),
                "network": "projects/123456789/networks/dyn"
            })
        };
        w.gce_set(
            "instance/vlan-network-interfaces",
            &json!({
                "1": {"7": entry(DYNAMIC_MAC, 2, 1, 7)},
                "0": {"9": entry("42:01:0a:62:03:1e", 3, 0, 9)}
            }),
        );
        let before = w.link_kinds();

        let out = w.leasehook_ok(&["refresh", "-v"], &[], || report(&w));
        let alias = format!("leasehook:{DYNAMIC_MAC}");
        let mut expected = before.clone();
        expected.push(format!("eth1.7 vlan eth1 {alias}"));
        expected.sort();
        assert_eq!(w.link_kinds(), expected, "{out}\n{}", report(&w));
        assert!(
            out.contains("eth0.9 exists that leasehook did not create"),
            "{out}"
        );
        let shown = &w.inst.ip_json(&["-d", "link", "show", "eth1.7"])[0];
        assert_eq!(shown["address"], DYNAMIC_MAC, "{shown}");
        assert_eq!(shown["linkinfo"]["info_data"]["id"], 7, "{shown}");
        let t = 10_000
            + leasehook_core::source::provider::slot::device_slot(DYNAMIC_MAC.parse().unwrap());
        assert!(
            w.inst
                .addresses()
                .contains(&"eth1.7 10.98.2.30/32".to_owned()),
            "{out}\n{}",
            report(&w)
        );
        assert_eq!(
            w.our_rules(),
            [format!("{t} from 10.98.2.30 lookup {t} proto 176")],
            "{out}\n{}",
            report(&w)
        );
        let mut routes = w.our_routes();
        routes.sort();
        assert_eq!(
            routes,
            [
                format!(
                    "10.98.2.0/24 via - dev eth1.7 scope link src 10.98.2.30 table {t} proto 176"
                ),
                format!("10.98.2.1 via - dev eth1.7 scope link src - table {t} proto 176"),
                format!("default via 10.98.2.1 dev eth1.7 scope - src - table {t} proto 176"),
            ],
            "{out}\n{}",
            report(&w)
        );
        assert_traffic(&w, &["10.98.2.30", "10.98.0.10"]);
        // `status` names the link in the way.
        let status = w.leasehook(&["status"], &[]);
        let text = leasehook_tests::world::output_text(&status);
        assert!(text.contains("conflict: "), "{text}");

        // Again: nothing changes.
        let again = (
            w.link_kinds(),
            w.our_rules(),
            w.our_routes(),
            w.inst.addresses(),
        );
        w.leasehook_ok(&["refresh"], &[], || report(&w));
        assert_eq!(
            (
                w.link_kinds(),
                w.our_rules(),
                w.our_routes(),
                w.inst.addresses()
            ),
            again,
            "{}",
            report(&w)
        );

        // Removed (the metadata server's 404 for the list): leasehook's link,
        // address, rule and table go; the operator's link and the vNICs stay.
        w.gce_set("instance/vlan-network-interfaces", &serde_json::Value::Null);
        let out = w.leasehook_ok(&["refresh", "-v"], &[], || report(&w));
        assert_eq!(w.link_kinds(), before, "{out}\n{}", report(&w));
        assert!(w.our_rules().is_empty(), "{out}\n{}", report(&w));
        assert!(w.our_routes().is_empty(), "{out}\n{}", report(&w));
        assert!(
            !w.root.join("run/leasehook/iface/eth1.7.json").exists(),
            "{out}"
        );
        assert_traffic(&w, &["10.98.0.10"]);
    }

    #[test]
    fn dhclient_hot_plug_race_hands_over_to_the_worker() {
        // nic1's entry appears 8 s after the first request (eth0's event), well
        // past the 1 s the hook may hold dhclient-script.
        let opts = WorldOptions {
            sync_budget_s: 1.0,
            budget_s: 30.0,
            ..options(&json!({"appear": [{"nic": 1, "after": 8.0}]}))
        };
        let mut w = world("gce-race", &opts);
        w.bind("eth0", false);
        w.bind("eth1", false);
        assert!(
            wait_until(Duration::from_secs(6), || w.log("eth1", false).contains(
                "eth1 BOUND: IMDS does not agree with the lease yet; worker"
            )),
            "the hook did not hand over within its sync budget:\n{}",
            report(&w)
        );
        assert!(w.our_rules().is_empty(), "{}", report(&w));
        wait_installed(&w, "once nic1's entry appeared");
        assert!(w.wait_workers("eth1", 10), "the worker did not finish");
        let log = w.log("eth1", false);
        assert!(
            log.contains("eth1 worker: eth1: IMDS agrees with the lease"),
            "{log}"
        );
        let polls = requests(&w)
            .iter()
            .filter(|e| e.path.contains("network-interfaces"))
            .count();
        assert!(polls >= 3, "{polls} requests: the worker did not wait");
        assert_traffic(&w, &["10.98.1.20"]);
    }

    #[test]
    fn networkd_slash_32_leases_get_the_same_table() {
        let mut w = world("gce-nd", &options(&json!({})));
        w.start_networkd(true);
        wait_installed(&w, "from networkd's lease");
        assert!(
            w.inst
                .ip(&["-4", "addr", "show", "eth1"])
                .contains("10.98.1.20/32"),
            "{}",
            report(&w)
        );
        alias_route(&w);
        assert_traffic(&w, &["10.98.1.20", "10.98.1.21"]);
        w.router.ip(&["link", "set", "gw1", "down"]);
        assert!(
            wait_until(Duration::from_secs(20), || w.our_rules().is_empty()
                && w.our_routes().is_empty()),
            "carrier loss left policy routing:\n{}",
            report(&w)
        );
    }
}

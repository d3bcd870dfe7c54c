//! Issue 30, items 1, 4, 5: which link is a NIC, which NIC has no DHCP, and an
//! empty result is never final (`leasehook refresh` against OCI and `OpenStack`).

use std::fmt::Write as _;

use leasehook_tests::clouds::Cloud;
use leasehook_tests::netns::{Netns, sibling_bin};
use leasehook_tests::world::{MAC0, MAC1};
use serde_json::{Value, json};

use crate::gate::dhclient_vars;
use crate::instance::{Imds, Instance, OPENSTACK_RULES, ORACLE_RULES, STATE, owned, text};
use crate::matrix::{FileWant, Kernel, Row, Seen, snap};

matrix! {
    #[cfg(feature = "netns")]
    links_oci_zero_mac => Row {
        name: "links_oci_zero_mac",
        fault: "OCI lists a secondary VNIC with `\"macAddr\":\"00:00:00:00:00:00\"` (privateIp 10.200.0.5, subnetCidrBlock 10.0.0.0/8) at `leasehook refresh`",
        does: "refuses it (an all-zero MAC is nobody's; `lo` is no NIC): `lo` holds only 127.0.0.1/8 and ::1/128, `ip route get` of the gateway 10.98.0.1 and of 10.77.0.9 (another subnet) still answers `unicast dev eth0`; eth1 stays as it was",
        files: &[FileWant::Unchanged(STATE), FileWant::Absent("run/leasehook/iface/lo.json")],
        log: "00:00:00:00:00:00: listed without DHCP, refused: an all-zero MAC is nobody's",
        not_in_log: "lo: no DHCP",
        max_secs: 3.5,
        run: run_links_oci_zero_mac,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    links_openstack_zero_mac => Row {
        name: "links_openstack_zero_mac",
        fault: "OpenStack `network_data.json` with a static `ipv4` network (10.200.0.5, netmask 255.0.0.0) on a link whose `ethernet_mac_address` is 00:00:00:00:00:00, at `leasehook refresh`",
        does: "refuses it (an all-zero MAC is nobody's; `lo` is no NIC): `lo` holds only 127.0.0.1/8 and ::1/128, `ip route get` of the gateway 10.98.0.1 and of 10.77.0.9 still answers `unicast dev eth0`; eth1's DHCP plan stays",
        files: &[FileWant::Unchanged(STATE), FileWant::Absent("run/leasehook/iface/lo.json")],
        log: "00:00:00:00:00:00: listed without DHCP, refused: an all-zero MAC is nobody's",
        not_in_log: "lo: no DHCP",
        max_secs: 3.5,
        run: run_links_openstack_zero_mac,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    links_oci_dhcp_primary_listed_second => Row {
        name: "links_oci_dhcp_primary_listed_second",
        fault: "OCI lists eth0's MAC (its DHCP lease recorded by the hook) as a secondary VNIC, the first entry a MAC no NIC has",
        does: "eth0 stays the primary (OCI's DHCP serves the primary VNIC only; a NIC with a DHCP lease is never one without DHCP): no metadata address, no rules, no table on eth0; eth1 stays as it was",
        files: &[FileWant::Unchanged(STATE), FileWant::Unchanged("run/leasehook/iface/eth0.json")],
        log: "eth0: unchanged (nothing from the metadata to add: its DHCP client holds every family",
        not_in_log: "eth0: no DHCP",
        max_secs: 3.5,
        run: run_links_oci_dhcp_primary_listed_second,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    links_oci_refused_vnic_stays_down => Row {
        name: "links_oci_refused_vnic_stays_down",
        fault: "OCI lists eth1 (down, no address) with every value refused by the gate (privateIp 169.254.169.254, the metadata service's)",
        does: "configures nothing: eth1 is not brought up (still down), nothing is recorded, so the next refresh asks again",
        kernel: Kernel::NONE,
        files: &[FileWant::Absent(STATE)],
        log: "eth1: unchanged (no DHCP, but nothing to configure from the metadata",
        not_in_log: "eth1: brought up",
        max_secs: 3.5,
        run: run_links_oci_refused_vnic_stays_down,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    links_oci_refused_then_good => Row {
        name: "links_oci_refused_then_good",
        fault: "a refresh that saw every value of eth1 (no DHCP) refused, then a refresh whose metadata is good",
        does: "the second refresh configures eth1 (no empty state was recorded): brought up, 10.98.1.20/24, its rule and table; `ip route get 10.77.0.9 from 10.98.1.20` leaves by eth1 via 10.98.1.1",
        kernel: Kernel::Exactly { rules: ORACLE_RULES, routes: LINKS_ROUTES, addresses: &[] },
        files: &[FileWant::Holds(STATE, "\"reason\":\"metadata\"")],
        log: "eth1: no DHCP, configured from the metadata",
        not_in_log: "no lease recorded",
        max_secs: 3.5,
        run: || run_links_refused_then_good(Links::Oracle(LinksFirst::Refused)),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    links_oci_slot_collision_then_detached => Row {
        name: "links_oci_slot_collision_then_detached",
        fault: "OCI lists eth1 with another VNIC whose MAC has eth1's slot (table), then that VNIC is detached",
        does: "the first refresh refuses eth1 the shared table and records nothing; the next one configures eth1: 10.98.1.20/24, its rule and table",
        kernel: Kernel::Exactly { rules: ORACLE_RULES, routes: LINKS_ROUTES, addresses: &[] },
        files: &[FileWant::Holds(STATE, "\"reason\":\"metadata\"")],
        log: "eth1: no DHCP, configured from the metadata",
        not_in_log: "no lease recorded",
        max_secs: 3.5,
        run: || run_links_refused_then_good(Links::Oracle(LinksFirst::SlotTaken)),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    links_openstack_static_refused_then_good => Row {
        name: "links_openstack_static_refused_then_good",
        fault: "OpenStack: a refresh that saw eth1's static `ipv4` network refused (ip_address 169.254.169.254), then one whose static network is good (10.98.1.20/24, default gateway 10.98.1.1)",
        does: "the second refresh configures eth1 (no empty state was recorded): 10.98.1.20/24, its rule and table; `ip route get 10.77.0.9 from 10.98.1.20` leaves by eth1 via 10.98.1.1",
        kernel: Kernel::Exactly { rules: OPENSTACK_RULES, routes: LINKS_ROUTES, addresses: &[] },
        files: &[FileWant::Holds(STATE, "\"reason\":\"metadata\"")],
        log: "eth1: no DHCP, configured from the metadata",
        not_in_log: "no lease recorded",
        max_secs: 3.5,
        run: || run_links_refused_then_good(Links::OpenStack),
        ..Row::KEEPS
    };
}

/// eth1's table routes once it is configured from the metadata (OCI or an
/// `OpenStack` static network): table `10000 + slot(MAC1)`.
const LINKS_ROUTES: &[&str] = &[
    "10.98.1.0/24 via - dev eth1 scope link src 10.98.1.20 table 19872 proto 176",
    "default via 10.98.1.1 dev eth1 scope - src - table 19872 proto 176",
];

/// Which cloud a `links_*_refused_then_good` row asks, and for OCI what its
/// first answer does to eth1.
#[derive(Clone, Copy)]
enum Links {
    Oracle(LinksFirst),
    OpenStack,
}

#[derive(Clone, Copy)]
enum LinksFirst {
    /// Every value of eth1 refused (its `privateIp` is the metadata service's).
    Refused,
    /// Another VNIC listed whose MAC has eth1's slot (`MAC1 + 9999`).
    SlotTaken,
}

impl Instance {
    /// eth1 as OCI leaves a secondary VNIC (no address; `down`: not up either),
    /// and the instance's default route by eth0's gateway.
    fn links_world(tag: &str, down: bool) -> Self {
        let i = Self::new(tag);
        i.unaddress_eth1();
        if down {
            i.ns.ip(&["link", "set", "eth1", "down"]);
        }
        i.default_route_by_eth0();
        i
    }
}

/// A link's IPv4 and IPv6 addresses (`ip -j address show dev IF`), scope host
/// included, as `addr/len`.
pub(crate) fn links_addresses(ns: &Netns, dev: &str) -> Vec<String> {
    ns.ip_json(&["address", "show", "dev", dev])
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|l| l["addr_info"].as_array().cloned().unwrap_or_default())
        .filter(|a| a["scope"].as_str() != Some("link"))
        .map(|a| format!("{}/{}", a["local"].as_str().unwrap_or("?"), a["prefixlen"]))
        .collect()
}

/// `ip -j route get DST [from SRC]`: the kernel's answer as `TYPE dev DEV [via GW]`.
fn links_route_get(ns: &Netns, dst: &str, from: Option<&str>) -> String {
    let mut args = vec!["route", "get", dst];
    if let Some(src) = from {
        args.extend(["from", src]);
    }
    let v = ns.ip_json(&args);
    let r = &v[0];
    let mut out = format!(
        "{} dev {}",
        r["type"].as_str().unwrap_or("unicast"),
        r["dev"].as_str().unwrap_or("?")
    );
    if let Some(gw) = r["gateway"].as_str() {
        let _ = write!(out, " via {gw}");
    }
    out
}

/// Item 1's kernel: `lo` holds its own addresses only, and neither the gateway
/// nor another subnet's host is answered locally (a `local 10.0.0.0/8 dev lo`
/// would take both).
fn assert_lo_untouched(ns: &Netns, log: &str) {
    assert_eq!(
        links_addresses(ns, "lo"),
        ["127.0.0.1/8", "::1/128"],
        "lo was given an address; {log}"
    );
    for dst in ["10.98.0.1", "10.77.0.9"] {
        assert_eq!(
            links_route_get(ns, dst, None),
            format!(
                "unicast dev eth0{}",
                if dst == "10.98.0.1" {
                    ""
                } else {
                    " via 10.98.0.1"
                }
            ),
            "ip route get {dst}; {log}"
        );
    }
}

/// Whether link `dev` is administratively up.
fn links_is_up(ns: &Netns, dev: &str) -> bool {
    ns.ip_json(&["link", "show", "dev", dev])[0]["flags"]
        .as_array()
        .is_some_and(|f| f.iter().any(|x| x == "UP"))
}

/// The world's two VNICs and `extra`.
fn links_vnics(extra: Value) -> Value {
    let mut v = leasehook_tests::oracle_emulator::world_vnics();
    v.as_array_mut().unwrap().push(extra);
    v
}

fn run_links_oci_zero_mac() -> Seen {
    let mut i = Instance::links_world("flzero", false);
    i.bound_on(Cloud::Oracle);
    i.faulted(|i| {
        let zero = leasehook_tests::oracle_emulator::vnic(
            "00:00:00:00:00:00",
            "10.200.0.5",
            "10.0.0.0/8",
            "10.0.0.1",
            7,
        );
        let url = i.start(
            Cloud::Oracle,
            &Imds::Scenario(json!({"vnics": links_vnics(zero)})),
        );
        let (out, elapsed) = i.refresh(Cloud::Oracle, &url);
        assert_lo_untouched(&i.ns, &text(&out));
        (out, elapsed)
    })
}

fn run_links_openstack_zero_mac() -> Seen {
    let mut i = Instance::new("flozero");
    i.default_route_by_eth0();
    i.bound_on(Cloud::OpenStack);
    i.faulted(|i| {
        let mut tree = leasehook_tests::openstack_emulator::world_tree();
        let nd = &mut tree["network_data"];
        nd["links"].as_array_mut().unwrap().push(json!(
            {"id": "tapzero", "type": "ovs", "ethernet_mac_address": "00:00:00:00:00:00"}
        ));
        nd["networks"].as_array_mut().unwrap().push(json!(
            {"id": "networkz", "type": "ipv4", "link": "tapzero",
             "ip_address": "10.200.0.5", "netmask": "255.0.0.0",
             "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.0.0.1"}]}
        ));
        let url = i.start_tree(Cloud::OpenStack, Some(&tree), &Imds::healthy());
        let (out, elapsed) = i.refresh(Cloud::OpenStack, &url);
        assert_lo_untouched(&i.ns, &text(&out));
        (out, elapsed)
    })
}

fn run_links_oci_dhcp_primary_listed_second() -> Seen {
    let mut i = Instance::links_world("flprim", false);
    let url = i.start(Cloud::Oracle, &Imds::healthy());
    // eth0's DHCP lease through the hook, as dhclient runs it on OCI's primary.
    let mut env = owned(&dhclient_vars(&[
        ("interface", "eth0"),
        ("new_ip_address", "10.98.0.10"),
        ("new_routers", "10.98.0.1"),
    ]));
    env.extend(Cloud::Oracle.env(&url));
    let (out, _) = i.run_in::<&str>(&env, &sibling_bin("leasehook-dhclient"), &[]);
    assert!(out.status.success(), "eth0 BOUND: {}", text(&out));
    assert!(i.root.join("run/leasehook/iface/eth0.json").is_file());
    let (out, _) = i.refresh(Cloud::Oracle, &url);
    assert_eq!(snap(&i.ns).0, ORACLE_RULES, "refresh: {}", text(&out));
    i.faulted(|i| {
        let vnic = leasehook_tests::oracle_emulator::vnic;
        let hostile = json!([
            vnic(
                "02:00:17:00:00:99",
                "10.98.2.5",
                "10.98.2.0/24",
                "10.98.2.1",
                1
            ),
            vnic(MAC0, "10.98.0.10", "10.98.0.0/24", "10.98.0.1", 2),
            vnic(MAC1, "10.98.1.20", "10.98.1.0/24", "10.98.1.1", 3),
        ]);
        let url = i.start(Cloud::Oracle, &Imds::Scenario(json!({"vnics": hostile})));
        let (out, elapsed) = i.refresh(Cloud::Oracle, &url);
        let log = text(&out);
        assert_eq!(links_addresses(&i.ns, "eth0")[0], "10.98.0.10/24", "{log}");
        assert_eq!(
            links_addresses(&i.ns, "eth0")
                .iter()
                .filter(|a| a.contains('.'))
                .count(),
            1,
            "eth0 was given a metadata address; {log}"
        );
        assert_eq!(
            links_route_get(&i.ns, "10.77.0.9", Some("10.98.0.10")),
            "unicast dev eth0 via 10.98.0.1",
            "{log}"
        );
        (out, elapsed)
    })
}

/// Every value of eth1 refused: its `privateIp` is the metadata service's.
fn links_refused_vnics() -> Value {
    let vnic = leasehook_tests::oracle_emulator::vnic;
    json!([
        vnic(MAC0, "10.98.0.10", "10.98.0.0/24", "10.98.0.1", 1),
        vnic(MAC1, "169.254.169.254", "169.254.0.0/16", "169.254.0.1", 2),
    ])
}

fn run_links_oci_refused_vnic_stays_down() -> Seen {
    let i = Instance::links_world("fldown", true);
    i.faulted(|i| {
        let url = i.start(
            Cloud::Oracle,
            &Imds::Scenario(json!({"vnics": links_refused_vnics()})),
        );
        let (out, elapsed) = i.refresh(Cloud::Oracle, &url);
        assert!(
            !links_is_up(&i.ns, "eth1"),
            "eth1 was brought up for nothing: {}",
            text(&out)
        );
        assert!(
            links_addresses(&i.ns, "eth1")
                .iter()
                .all(|a| !a.contains('.'))
        );
        (out, elapsed)
    })
}

/// A first refresh whose answer gives eth1 nothing (`how`), then one whose
/// answer is good: the seen run is the second.
fn run_links_refused_then_good(how: Links) -> Seen {
    let mut i = Instance::links_world("flgood", true);
    let (cloud, first, good) = match how {
        Links::Oracle(first) => {
            let vnics = match first {
                LinksFirst::Refused => links_refused_vnics(),
                LinksFirst::SlotTaken => links_vnics(leasehook_tests::oracle_emulator::vnic(
                    "02:00:00:00:27:11",
                    "10.98.3.5",
                    "10.98.3.0/24",
                    "10.98.3.1",
                    9,
                )),
            };
            let first = i.start(Cloud::Oracle, &Imds::Scenario(json!({"vnics": vnics})));
            (Cloud::Oracle, first, None)
        }
        Links::OpenStack => {
            let mut tree = leasehook_tests::openstack_emulator::world_tree();
            tree["network_data"]["networks"][1] = json!({
                "id": "network1", "type": "ipv4", "link": "tap0b0b0b0b-01",
                "ip_address": "169.254.169.254", "netmask": "255.255.0.0"});
            let first = i.start_tree(Cloud::OpenStack, Some(&tree), &Imds::healthy());
            tree["network_data"]["networks"][1] = json!({
                "id": "network1", "type": "ipv4", "link": "tap0b0b0b0b-01",
                "ip_address": "10.98.1.20", "netmask": "255.255.255.0",
                "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.98.1.1"}]});
            (Cloud::OpenStack, first, Some(tree))
        }
    };
    let (out, _) = i.refresh(cloud, &first);
    assert!(out.status.success(), "first refresh: {}", text(&out));
    assert!(snap(&i.ns).0.is_empty(), "first refresh: {}", text(&out));
    i.faulted(|i| {
        let url = i.start_tree(cloud, good.as_ref(), &Imds::healthy());
        let (out, elapsed) = i.refresh(cloud, &url);
        let log = text(&out);
        assert!(links_is_up(&i.ns, "eth1"), "eth1 is down; {log}");
        assert!(
            links_addresses(&i.ns, "eth1").contains(&"10.98.1.20/24".to_owned()),
            "{log}"
        );
        assert_eq!(
            links_route_get(&i.ns, "10.77.0.9", Some("10.98.1.20")),
            "unicast dev eth1 via 10.98.1.1",
            "{log}"
        );
        (out, elapsed)
    })
}

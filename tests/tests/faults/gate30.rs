//! Hostile clouds (issue 30: gate): a router's address among a NIC's, a wide
//! subnet, `OpenStack` next hops off the subnet — on every cloud that can say so.

use leasehook_tests::clouds::Cloud;
use leasehook_tests::netns::Netns;
use leasehook_tests::world::{MAC0, MAC1};
use serde_json::{Value, json};

use crate::instance::{BASE_ROUTES, Imds, Instance, STATE, text, tree_with};
use crate::matrix::{FileWant, Kernel, Row, Seen};

matrix! {
    #[cfg(feature = "netns")]
    gate30_ec2_router_in_local_ipv4s => Row {
        name: "gate30_ec2_router_in_local_ipv4s",
        fault: "EC2 IMDS lists the lease's router among eth1's addresses (`local-ipv4s: [10.98.1.20, 10.98.1.1]`), BOUND",
        does: "refuses 10.98.1.1 as an address and a rule source, applies the rest; `ip route get 10.98.1.1` leaves by eth1, never `local`",
        kernel: Kernel::Exactly {
            rules: &["10001 from 10.98.1.20 lookup 10001 proto 176"],
            routes: BASE_ROUTES,
            addresses: &[],
        },
        files: &[FileWant::Holds(STATE, "\"kind\":\"router\"")],
        log: "eth1: refused local-ipv4s 10.98.1.1: 10.98.1.1 is a router (eth1's lease router), never an address of this host",
        run: run_gate30_ec2_router,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gate30_aliyun_own_gateway => Row {
        name: "gate30_aliyun_own_gateway",
        fault: "Alibaba ECS metadata lists eth1's own `gateway` in its `private-ipv4s` (`[\"10.98.1.20\",\"10.98.1.1\"]`), BOUND",
        does: "refuses 10.98.1.1 as an address and a rule source, applies the rest; `ip route get 10.98.1.1` leaves by eth1, never `local`",
        kernel: Kernel::Exactly {
            rules: &["19872 from 10.98.1.20 lookup 19872 proto 176"],
            routes: &[
                "10.98.1.0/24 via - dev eth1 scope link src 10.98.1.20 table 19872 proto 176",
                "default via 10.98.1.1 dev eth1 scope - src - table 19872 proto 176",
            ],
            addresses: &[],
        },
        files: &[FileWant::Holds(STATE, "\"kind\":\"router\"")],
        log: "eth1: refused local-ipv4s 10.98.1.1: 10.98.1.1 is a router (",
        run: run_gate30_aliyun_gateway,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gate30_oracle_private_ip_is_default_gateway => Row {
        name: "gate30_oracle_private_ip_is_default_gateway",
        fault: "OCI lists a secondary VNIC whose `privateIp` is the host's default gateway (10.98.0.1, `default via 10.98.0.1 dev eth0` in main), at `leasehook refresh`",
        does: "refuses the VNIC's address (a router's): eth1 gets no address, rule or route; `ip route get 10.98.0.1` leaves by eth0, never `local`",
        kernel: Kernel::NONE,
        files: &[],
        log: "eth1: refused lease 10.98.0.1: 10.98.0.1 is a router (",
        max_secs: 3.5,
        run: || run_gate30_oracle(&[("10.98.0.1", "10.98.0.0/24", "10.98.0.5")], "10.98.0.1"),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gate30_oracle_router_swapped => Row {
        name: "gate30_oracle_router_swapped",
        fault: "OCI lists eth1's VNIC with `privateIp` and `virtualRouterIp` swapped (`privateIp` 10.98.1.1, `virtualRouterIp` 10.98.1.20), at `leasehook refresh`",
        does: "refuses the VNIC's address (its subnet's first host, OCI's virtual router): eth1 gets no address, rule or route; `ip route get 10.98.1.1` is never `local`",
        kernel: Kernel::NONE,
        files: &[],
        log: "eth1: refused lease 10.98.1.1: 10.98.1.1 is a router (the metadata's gateway of eth1)",
        max_secs: 3.5,
        run: || run_gate30_oracle(&[("10.98.1.1", "10.98.1.0/24", "10.98.1.20")], "10.98.1.1"),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gate30_oracle_wide_subnet => Row {
        name: "gate30_oracle_wide_subnet",
        fault: "OCI lists eth1's VNIC in `subnetCidrBlock` 10.0.0.0/8, at `leasehook refresh` (`default via 10.98.0.1 dev eth0` in main)",
        does: "adds 10.98.1.20/8 `noprefixroute`: the /8's route is in eth1's table only, main gets none; `ip route get 10.5.0.9` (another subnet's host) leaves by eth0",
        kernel: Kernel::Exactly {
            rules: &["19872 from 10.98.1.20 lookup 19872 proto 176"],
            routes: &[
                "10.0.0.0/8 via - dev eth1 scope link src 10.98.1.20 table 19872 proto 176",
                "default via 10.98.1.1 dev eth1 scope - src - table 19872 proto 176",
            ],
            addresses: &[],
        },
        files: &[FileWant::Holds(STATE, "10.98.1.20/8")],
        log: "eth1: no DHCP on this NIC; configured from the metadata (4 change(s))",
        max_secs: 3.5,
        run: run_gate30_oracle_wide,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gate30_ec2_cloud_init_wide_subnet => Row {
        name: "gate30_ec2_cloud_init_wide_subnet",
        fault: "EC2 with `profile: cloud-init` and eth1's `subnet-ipv4-cidr-block` 10.0.0.0/8 (`local-ipv4s: [10.98.1.20, 10.98.1.21]`), BOUND",
        does: "adds 10.98.1.21/8 `noprefixroute` (cloud-init's length): 10.0.0.0/8 goes into table 101 only (the row checks table 101; the kernel column lists tables from 10000), main gets none; `ip route get 10.5.0.9` leaves by eth0",
        kernel: Kernel::NONE,
        files: &[FileWant::Holds(STATE, "10.98.1.21/8")],
        log: "5 change(s) for eth1 IPv4",
        run: run_gate30_cloud_init_wide,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gate30_openstack_address_is_route_gateway => Row {
        name: "gate30_openstack_address_is_route_gateway",
        fault: "OpenStack static `ipv4` network on eth1 whose `ip_address` is its route's `gateway` (10.98.1.1), at `leasehook refresh`",
        does: "refuses the address (a router's): eth1 gets no address, rule or route; `ip route get 10.98.1.1` is never `local`",
        kernel: Kernel::NONE,
        files: &[],
        log: "eth1: refused lease 10.98.1.1: 10.98.1.1 is a router (",
        max_secs: 3.5,
        run: || run_gate30_openstack(&json!({
            "id": "network1", "type": "ipv4", "link": "tap0b0b0b0b-01",
            "ip_address": "10.98.1.1", "netmask": "255.255.255.0",
            "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.98.1.1"}]}), "10.98.1.1"),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gate30_openstack_bad_next_hops => Row {
        name: "gate30_openstack_bad_next_hops",
        fault: "OpenStack static `ipv4` network on eth1 (10.98.1.20/24) whose default route's gateway is off its subnet (192.168.5.1) and whose other route goes via its own address, at `leasehook refresh`",
        does: "refuses both next hops, with their reasons; adds the address, its subnet route and rule only",
        kernel: Kernel::Exactly {
            rules: &["19872 from 10.98.1.20 lookup 19872 proto 176"],
            routes: &["10.98.1.0/24 via - dev eth1 scope link src 10.98.1.20 table 19872 proto 176"],
            addresses: &[],
        },
        files: &[FileWant::Holds(STATE, "\"kind\":\"local-next-hop\"")],
        log: "eth1: refused router 192.168.5.1: not inside the NIC's subnet (10.98.1.0/24)",
        max_secs: 3.5,
        run: || run_gate30_openstack(&json!({
            "id": "network1", "type": "ipv4", "link": "tap0b0b0b0b-01",
            "ip_address": "10.98.1.20", "netmask": "255.255.255.0",
            "routes": [
                {"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "192.168.5.1"},
                {"network": "198.51.100.0", "netmask": "255.255.255.0", "gateway": "10.98.1.20"}
            ]}), "10.98.1.1"),
        ..Row::KEEPS
    };
}

/// `ip -j route get ADDR` in the namespace: the route's type (`unicast` when
/// `ip` names none) and the device it leaves by.
fn route_get(ns: &Netns, addr: &str) -> (String, String) {
    let v = ns.ip_json(&["route", "get", addr]);
    let r = &v[0];
    (
        r["type"].as_str().unwrap_or("unicast").to_owned(),
        r["dev"].as_str().unwrap_or("?").to_owned(),
    )
}

/// What every issue-30 row checks beyond the matrix's columns: no link holds
/// the router `gw` and the kernel does not answer it locally; a host of another
/// 10.x subnet (10.5.0.9) leaves by eth0, the main table's default; and no
/// route on eth1 in main is wider than the /24 the test's DHCP address gives.
fn assert_gate30(i: &Instance, gw: &str, log: &str) {
    let (kind, dev) = route_get(&i.ns, gw);
    assert_ne!(
        kind, "local",
        "{gw} is answered locally (dev {dev}); log:\n{log}"
    );
    let held = i.ns.ip(&["-4", "-o", "address", "show"]);
    assert!(
        !held.contains(&format!("inet {gw}/")),
        "a link holds the router {gw}:\n{held}\nlog:\n{log}"
    );
    let (_, dev) = route_get(&i.ns, "10.5.0.9");
    assert_eq!(
        dev, "eth0",
        "another subnet's host leaves by {dev}; log:\n{log}"
    );
    let main =
        i.ns.ip_json(&["-4", "route", "show", "table", "main", "dev", "eth1"]);
    for r in main.as_array().into_iter().flatten() {
        let dst = r["dst"].as_str().unwrap_or("");
        assert!(dst == "10.98.1.0/24", "main holds {r} on eth1; log:\n{log}");
    }
}

/// A fresh instance with the host's default route via eth0 (eth1 without its
/// address when `dhcp` is false), `cloud`'s metadata service as `tree` and `how`
/// say, then eth1's BOUND (`dhcp`) or `leasehook refresh`, with `extra`: what
/// [`assert_gate30`] checks for the router `gw`, and what `more` checks.
fn hostile(
    cloud: Cloud,
    dhcp: bool,
    (tree, how): (Option<&Value>, &Imds),
    extra: &[(&str, &str)],
    gw: &str,
    more: impl FnOnce(&Instance, &str),
) -> Seen {
    let i = Instance::new(&format!("fg30{}", cloud.provider()));
    if !dhcp {
        i.unaddress_eth1();
    }
    i.default_route_by_eth0();
    i.faulted(|i| {
        let url = i.start_tree(cloud, tree, how);
        let (out, elapsed) = if dhcp {
            i.event(cloud, "BOUND", &url, extra)
        } else {
            i.refresh_env(cloud, &url, extra)
        };
        let log = text(&out);
        assert_gate30(i, gw, &log);
        more(i, &log);
        (out, elapsed)
    })
}

/// `ip route get 10.98.1.1` leaves by eth1.
fn router_by_eth1(i: &Instance, log: &str) {
    assert_eq!(route_get(&i.ns, "10.98.1.1").1, "eth1", "{log}");
}

fn run_gate30_ec2_router() -> Seen {
    let tree = tree_with(&[(MAC1, "local-ipv4s", "10.98.1.20\n10.98.1.1")]);
    let how = (Some(&tree), &Imds::healthy());
    hostile(Cloud::Ec2, true, how, &[], "10.98.1.1", router_by_eth1)
}

fn run_gate30_aliyun_gateway() -> Seen {
    let how = Imds::Scenario(json!({"values": [{
        "path": format!("/latest/meta-data/network/interfaces/macs/{MAC1}/private-ipv4s"),
        "value": "[\"10.98.1.20\",\"10.98.1.1\"]"}]}));
    hostile(
        Cloud::Aliyun,
        true,
        (None, &how),
        &[],
        "10.98.1.1",
        router_by_eth1,
    )
}

/// OCI listing eth0's VNIC and eth1's as `vnic` says (`privateIp`,
/// `subnetCidrBlock`, `virtualRouterIp`).
fn oracle_vnics((ip, subnet, router): (&str, &str, &str)) -> Imds {
    let vnic = leasehook_tests::oracle_emulator::vnic;
    Imds::Scenario(json!({"vnics": [
        vnic(MAC0, "10.98.0.10", "10.98.0.0/24", "10.98.0.1", 1),
        vnic(MAC1, ip, subnet, router, 2),
    ]}))
}

fn run_gate30_oracle(vnic: &[(&str, &str, &str)], gw: &str) -> Seen {
    let how = oracle_vnics(vnic[0]);
    hostile(Cloud::Oracle, false, (None, &how), &[], gw, |i, log| {
        assert_ne!(route_get(&i.ns, "10.98.0.1").1, "lo", "{log}");
    })
}

fn run_gate30_oracle_wide() -> Seen {
    let how = oracle_vnics(("10.98.1.20", "10.0.0.0/8", "10.98.1.1"));
    hostile(
        Cloud::Oracle,
        false,
        (None, &how),
        &[],
        "10.98.1.1",
        |i, log| {
            let addrs = i.ns.ip_json(&["-4", "address", "show", "dev", "eth1"]);
            let info = &addrs[0]["addr_info"][0];
            assert_eq!(info["local"], "10.98.1.20", "{addrs}\n{log}");
            assert_eq!(info["prefixlen"], 8, "{addrs}\n{log}");
            assert_eq!(info["noprefixroute"], true, "{addrs}\n{log}");
            assert_eq!(
                i.ns.ip_json(&["-4", "route", "show", "table", "main", "dev", "eth1"]),
                json!([]),
                "{log}"
            );
        },
    )
}

/// `network_data.json` putting eth1 (without its DHCP address) on the static
/// network `net`, at `leasehook refresh`.
fn run_gate30_openstack(net: &Value, gw: &str) -> Seen {
    let mut tree = leasehook_tests::openstack_emulator::world_tree();
    tree["network_data"]["networks"][1] = net.clone();
    let how = (Some(&tree), &Imds::healthy());
    hostile(Cloud::OpenStack, false, how, &[], gw, |_, _| {})
}

fn run_gate30_cloud_init_wide() -> Seen {
    let tree = tree_with(&[
        (MAC1, "subnet-ipv4-cidr-block", "10.0.0.0/8"),
        (MAC1, "local-ipv4s", "10.98.1.20\n10.98.1.21"),
    ]);
    let how = (Some(&tree), &Imds::healthy());
    let extra = [("LEASEHOOK_PROFILE", "cloud-init")];
    hostile(Cloud::Ec2, true, how, &extra, "10.98.1.1", |i, log| {
        let addrs = i.ns.ip_json(&["-4", "address", "show", "dev", "eth1"]);
        let wide = addrs[0]["addr_info"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["local"] == "10.98.1.21")
            .cloned()
            .unwrap_or_else(|| panic!("no 10.98.1.21 on eth1: {addrs}\n{log}"));
        assert_eq!(wide["prefixlen"], 8, "{addrs}\n{log}");
        assert_eq!(wide["noprefixroute"], true, "{addrs}\n{log}");
        let t101 = i.ns.ip(&["-4", "route", "show", "table", "101"]);
        assert!(
            t101.contains("10.0.0.0/8 dev eth1"),
            "table 101: {t101}\n{log}"
        );
    })
}

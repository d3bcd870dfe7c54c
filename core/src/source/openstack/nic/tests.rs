// SPDX-License-Identifier: Apache-2.0
//! Tests of the pure `network_data.json` model.

use std::net::{IpAddr, Ipv4Addr};

use super::*;
use crate::model::{IfName, Lease};
use crate::source::provider::doc::tests::{assert_valid, plan_nics};

/// The primary alone (Nova's shape for a DHCP network: no address, no route).
pub(crate) const ONLY0: &str = r#"{
  "links": [{"id": "tap1a2b3c4d-5e", "vif_id": "1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d",
             "type": "ovs", "mtu": 1450, "ethernet_mac_address": "FA:16:3E:00:00:0A"}],
  "networks": [{"id": "network0", "type": "ipv4_dhcp", "link": "tap1a2b3c4d-5e",
                "network_id": "d6b3a3a4-1111-2222-3333-444455556666"}],
  "services": [{"type": "dns", "address": "10.0.0.2"}]
}"#;

/// Two NICs; the second one's network lists its address, its default gateway
/// and an extra route, and a VLAN on it is skipped.
pub(crate) const TWO: &str = r#"{
  "links": [
    {"id": "tap1a2b3c4d-5e", "type": "ovs", "mtu": 1450, "ethernet_mac_address": "fa:16:3e:00:00:0a"},
    {"id": "tap9f8e7d6c-5b", "type": "phy", "mtu": 1500, "ethernet_mac_address": "fa:16:3e:00:01:14"},
    {"id": "vlan0", "type": "vlan", "vlan_link": "tap9f8e7d6c-5b", "vlan_id": 101,
     "vlan_mac_address": "fa:16:3e:00:01:14"}
  ],
  "networks": [
    {"id": "network0", "type": "ipv4_dhcp", "link": "tap1a2b3c4d-5e", "network_id": "n0"},
    {"id": "network1", "type": "ipv4_dhcp", "link": "tap9f8e7d6c-5b", "network_id": "n1",
     "ip_address": "10.0.1.20", "netmask": "255.255.255.0",
     "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.0.1.1"},
                {"network": "192.168.50.0", "netmask": "255.255.255.0", "gateway": "10.0.1.1"}]},
    {"id": "network2", "type": "ipv4", "link": "vlan0", "ip_address": "10.9.0.5", "netmask": "255.255.255.0"}
  ],
  "services": []
}"#;

const MAC0: &str = "fa:16:3e:00:00:0a";
const MAC1: &str = "fa:16:3e:00:01:14";

fn lease(ip: &str, prefix_len: u8, router: Option<&str>) -> Lease {
    let address: IpAddr = ip.parse().unwrap();
    Lease {
        family: Family::of(&address),
        address,
        prefix_len,
        routers: router.map(|r| r.parse().unwrap()).into_iter().collect(),
        reason: Reason::Bound,
    }
}

fn event(mac: &str, l: Lease) -> NicEvent {
    NicEvent::try_new(
        IfName::try_new("eth1").unwrap(),
        mac.parse().unwrap(),
        vec![l],
    )
    .unwrap()
}

#[test]
fn links_by_mac_networks_by_link_and_vlans_skipped() {
    let d = parse_network_data(TWO).unwrap();
    assert_eq!(d.links.len(), 2);
    assert_eq!(d.primary().unwrap().mac, MAC0.parse().unwrap());
    assert_eq!(d.links[0].mtu, Some(1450));
    assert_eq!(d.links[1].kind, "phy");
    assert_eq!(d.networks.len(), 2);
    assert_eq!(d.networks[1].kind, NetworkType::Ipv4Dhcp);
    assert_eq!(d.networks[1].address.unwrap().to_string(), "10.0.1.20/24");
    assert_eq!(d.networks[1].routes.len(), 2);
    assert_eq!(d.skipped.len(), 2, "{:?}", d.skipped);
    assert!(d.skipped[0].contains("vlan link"), "{:?}", d.skipped);
    assert!(d.skipped[1].contains("network2"), "{:?}", d.skipped);
    // Upper-case MACs match (cloud-init lowers them).
    let only = parse_network_data(ONLY0).unwrap();
    assert_eq!(only.links[0].mac, MAC0.parse().unwrap());
    let net = network(&d);
    assert_eq!(net.primary_mac, Some(MAC0.parse().unwrap()));
    let n1 = net.nic(MAC1.parse().unwrap()).unwrap();
    assert_eq!(n1.device_number, Some(device_slot(MAC1.parse().unwrap())));
    assert_eq!(n1.local_ipv4s, ["10.0.1.20".parse::<Ipv4Addr>().unwrap()]);
    assert_eq!(n1.subnet_ipv4_cidr_blocks[0].to_string(), "10.0.1.0/24");
    assert_eq!(n1.interface_id.as_deref(), Some("tap9f8e7d6c-5b"));
    let n0 = net.nic(MAC0.parse().unwrap()).unwrap();
    assert!(n0.local_ipv4s.is_empty() && n0.routes.is_empty());
    // Every type cloud-init knows, and one it does not.
    for (t, want) in [
        ("ipv4_dhcp", Some(NetworkType::Ipv4Dhcp)),
        ("ipv6_dhcp", Some(NetworkType::Ipv6Dhcp)),
        ("ipv6_dhcpv6-stateful", Some(NetworkType::Ipv6Dhcp)),
        ("ipv6_dhcpv6-stateless", Some(NetworkType::Ipv6Slaac)),
        ("ipv6_slaac", Some(NetworkType::Ipv6Slaac)),
        ("ipv4", Some(NetworkType::Ipv4Static)),
        ("static", Some(NetworkType::Ipv4Static)),
        ("ipv6", Some(NetworkType::Ipv6Static)),
        ("static6", Some(NetworkType::Ipv6Static)),
        ("manual", None),
    ] {
        assert_eq!(NetworkType::from_name(t), want, "{t}");
    }
    let unknown = ONLY0.replace("ipv4_dhcp", "manual");
    let d = parse_network_data(&unknown).unwrap();
    assert!(d.networks.is_empty());
    assert!(d.skipped[0].contains("manual"), "{:?}", d.skipped);
    // A bond, and a physical link without a MAC: skipped too.
    let d = parse_network_data(
        r#"{"links":[{"id":"b0","type":"bond","bond_links":["a"]},{"id":"a","type":"phy"}],
            "networks":[{"type":"ipv4_dhcp","link":"b0"}]}"#,
    )
    .unwrap();
    assert!(d.links.is_empty() && d.networks.is_empty());
    assert_eq!(d.skipped.len(), 3, "{:?}", d.skipped);
    assert!(
        parse_network_data(r#"{"links": []}"#)
            .unwrap()
            .links
            .is_empty()
    );
    // Not network_data.json at all (Azure's answer, say): an error, not "no NIC".
    let e = parse_network_data(r#"{"compute": {}, "network": {"interface": []}}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("network_data.json/links: missing"), "{e}");
}

#[test]
fn hostile_documents_are_errors_naming_the_key() {
    let link = r#"{"id":"a","type":"phy","ethernet_mac_address":"fa:16:3e:00:00:0a"}"#;
    let with = |networks: &str| format!(r#"{{"links":[{link}],"networks":[{networks}]}}"#);
    let cases = [
        (String::new(), "network_data.json: EOF"),
        ("[]".to_owned(), "not a JSON object"),
        (r#"{"links":{}}"#.to_owned(), "links: not a JSON list"),
        (r#"{"links":[1]}"#.to_owned(), "links/0: not a JSON object"),
        (r#"{"links":[{"type":"phy"}]}"#.to_owned(), "links/0/id: missing"),
        (r#"{"links":[{"id":"a"}]}"#.to_owned(), "links/0/type: missing"),
        (
            r#"{"links":[{"id":"a","type":"phy","ethernet_mac_address":"fa:16"}]}"#.to_owned(),
            "ethernet_mac_address",
        ),
        (
            r#"{"links":[{"id":"a","type":"phy","ethernet_mac_address":7}]}"#.to_owned(),
            "not a string",
        ),
        (
            r#"{"links":[{"id":"a","type":"phy","mtu":"big","ethernet_mac_address":"fa:16:3e:00:00:0a"}]}"#.to_owned(),
            "mtu",
        ),
        (format!(r#"{{"links":[{link},{link}]}}"#), "two links with one id"),
        (
            format!(
                r#"{{"links":[{link},{{"id":"b","type":"phy","ethernet_mac_address":"FA:16:3E:00:00:0A"}}]}}"#
            ),
            "two links with one MAC",
        ),
        (with(r#"{"type":"ipv4_dhcp","link":"zz"}"#), "names no link"),
        (with(r#"{"type":"ipv4_dhcp"}"#), "networks/0/link: missing"),
        (with(r#"{"type":"ipv4","link":"a"}"#), "ip_address: missing"),
        (
            with(r#"{"type":"ipv4","link":"a","ip_address":"10.0.0.5"}"#),
            "netmask: missing",
        ),
        (
            with(r#"{"type":"ipv4","link":"a","ip_address":"10.0.0.300","netmask":"255.255.255.0"}"#),
            "not an IP address",
        ),
        (
            with(r#"{"type":"ipv4","link":"a","ip_address":"10.0.0.5","netmask":"255.0.255.0"}"#),
            "contiguous",
        ),
        (
            with(r#"{"type":"ipv4","link":"a","ip_address":"10.0.0.5","netmask":"ffff::"}"#),
            "contiguous",
        ),
        (
            with(r#"{"type":"ipv6","link":"a","ip_address":"10.0.0.5","netmask":"255.255.255.0"}"#),
            "family",
        ),
        (
            with(r#"{"type":"ipv4_dhcp","link":"a","routes":[{"network":"10.1.0.0","netmask":"255.255.0.0"}]}"#),
            "routes/0/gateway: missing",
        ),
        (
            with(r#"{"type":"ipv4_dhcp","link":"a","routes":[{"network":"10.1.0.0","netmask":"255.255.0.0","gateway":"fe80::1"}]}"#),
            "family",
        ),
        (
            with(r#"{"type":"ipv4_dhcp","link":"a","routes":[{"network":"2001:db8::","netmask":"ffff:ffff::","gateway":"2001:db8::1"}]}"#),
            "another family",
        ),
        (
            with(r#"{"type":"ipv4_dhcp","link":"a","routes":"10.0.0.0/8"}"#),
            "routes: not a JSON list",
        ),
        (format!("{} trailing", with("")), "network_data.json: trailing"),
    ];
    for (body, want) in cases {
        let e = parse_network_data(&body).unwrap_err().to_string();
        assert!(e.contains(want), "{body}: {e}");
    }
    // Deeply nested garbage is an error, not a stack overflow; lists are capped.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(parse_network_data(&deep).is_err());
    let many = format!(r#"{{"links":[{}]}}"#, vec![link; MAX_LINKS + 1].join(","));
    let e = parse_network_data(&many).unwrap_err().to_string();
    assert!(e.contains("more than"), "{e}");
    let route = r#"{"network":"10.1.0.0","netmask":"255.255.0.0","gateway":"10.0.0.1"}"#;
    let routes = with(&format!(
        r#"{{"type":"ipv4_dhcp","link":"a","routes":[{}]}}"#,
        vec![route; MAX_ROUTES + 1].join(",")
    ));
    assert!(parse_network_data(&routes).is_err());
    // A hostile value is shown escaped, never as a new log line.
    let e = parse_network_data(
        r#"{"links":[{"id":"a","type":"phy","ethernet_mac_address":"x\nERROR fake"}]}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(!e.contains('\n'), "{e}");
    // A prefix length in either place is read.
    let d = parse_network_data(&with(
        r#"{"type":"ipv6","link":"a","ip_address":"2001:db8::5/64"},
           {"type":"ipv4","link":"a","ip_address":"10.0.0.5","netmask":"24"}"#,
    ))
    .unwrap();
    assert_eq!(d.networks[0].address.unwrap().to_string(), "2001:db8::5/64");
    assert_eq!(d.networks[1].address.unwrap().to_string(), "10.0.0.5/24");
}

#[test]
fn known_keys_are_read_strictly_and_their_errors_show_the_value() {
    let link = r#"{"id":"a","type":"phy","ethernet_mac_address":"fa:16:3e:00:00:0a"}"#;
    let doc =
        |links: &str, networks: &str| format!(r#"{{"links":[{links}],"networks":[{networks}]}}"#);
    let at = "metadata network_data.json";
    for (body, want) in [
        // Wrong types.
        (
            doc(r#"{"id":7,"type":"phy"}"#, ""),
            format!("{at}/links/0/id: not a string (got \"7\")"),
        ),
        (
            doc(r#"{"id":"a","type":"phy","mtu":-1}"#, ""),
            format!("{at}/links/0/mtu: expected u32 (got \"-1\")"),
        ),
        (
            doc(
                link,
                r#"{"type":"ipv4","link":"a","ip_address":["10.0.0.5"]}"#,
            ),
            format!("{at}/networks/0/ip_address: not a string"),
        ),
        (
            doc(
                link,
                r#"{"type":"ipv4_dhcp","link":"a","routes":[["10.1.0.0"]]}"#,
            ),
            format!("{at}/networks/0/routes/0: not a JSON object"),
        ),
        (
            r#"{"links":null}"#.to_owned(),
            format!("{at}/links: not a JSON list (got \"null\")"),
        ),
        // Missing keys.
        (
            doc(
                link,
                r#"{"type":"ipv4_dhcp","link":"a","routes":[{"netmask":"0","gateway":"10.0.0.1"}]}"#,
            ),
            format!("{at}/networks/0/routes/0/network: missing"),
        ),
        (
            doc(link, r#"{"link":"a"}"#),
            format!("{at}/networks/0/type: missing"),
        ),
        // Values that do not parse.
        (
            doc(
                link,
                r#"{"type":"ipv4_dhcp","link":"a","routes":[{"network":"10.1.0.0/16","netmask":"0","gateway":"10.0.0.1"}]}"#,
            ),
            format!(
                "{at}/networks/0/routes/0/network: invalid IP address syntax (got \"10.1.0.0/16\")"
            ),
        ),
        // Oversized: a value shown cut, too many networks.
        (
            doc(
                &format!(
                    r#"{{"id":"a","type":"phy","ethernet_mac_address":"{}"}}"#,
                    "f".repeat(5000)
                ),
                "",
            ),
            format!("{at}/links/0/ethernet_mac_address: not a MAC address"),
        ),
        (
            doc(
                link,
                &vec![r#"{"type":"ipv4_dhcp","link":"a"}"#; MAX_NETWORKS + 1].join(","),
            ),
            format!("{at}/networks: more than {MAX_NETWORKS} entries (got \"257\")"),
        ),
    ] {
        let e = parse_network_data(&body).unwrap_err().to_string();
        assert!(e.starts_with(&want), "{body}: {e}");
        assert!(e.len() < 300, "{e}");
    }
    // A skipped link's MAC is not read, whatever it says.
    let d = parse_network_data(&doc(
        &format!(r#"{link},{{"id":"v","type":"vlan","ethernet_mac_address":"not a MAC"}}"#),
        "",
    ))
    .unwrap();
    assert_eq!((d.links.len(), d.skipped.len()), (1, 1), "{d:?}");
}

#[test]
fn complete_once_the_link_and_a_network_of_the_family_are_listed() {
    let e = event(MAC1, lease("10.0.1.20", 24, Some("10.0.1.1")));
    let a = assess(&e, &Answer::NotAsked).unwrap();
    assert!(a.missing.contains(&Missing::MacFolder), "{:?}", a.missing);
    assert!(!assess(&e, &Answer::NotFound).unwrap().is_complete());
    // Only the primary listed yet: the hot-plugged port is missing.
    let a = assess(&e, &Answer::Body(ONLY0.to_owned())).unwrap();
    assert_eq!(a.missing, [Missing::MacFolder]);
    let a = assess(&e, &Answer::Body(TWO.to_owned())).unwrap();
    assert!(a.is_complete(), "{:?}", a.missing);
    // The network lists another address than the lease's: waited for.
    let other = event(MAC1, lease("10.0.1.21", 24, Some("10.0.1.1")));
    let a = assess(&other, &Answer::Body(TWO.to_owned())).unwrap();
    assert_eq!(
        a.missing,
        [Missing::LeaseAddress {
            address: "10.0.1.21".parse().unwrap()
        }]
    );
    // Nova's DHCP network lists no address: the lease's address and network.
    let e0 = event(MAC0, lease("10.0.0.10", 24, Some("10.0.0.1")));
    let a = assess(&e0, &Answer::Body(ONLY0.to_owned())).unwrap();
    assert!(a.is_complete(), "{:?}", a.missing);
    let n0 = a.network.nic(MAC0.parse().unwrap()).unwrap();
    assert_eq!(n0.local_ipv4s, ["10.0.0.10".parse::<Ipv4Addr>().unwrap()]);
    assert_eq!(n0.subnet_ipv4_cidr_blocks[0].to_string(), "10.0.0.0/24");
    // A DHCPv6 lease on a link with only IPv4 networks: waited for.
    let v6 = event(MAC0, lease("2001:db8::10", 128, None));
    let a = assess(&v6, &Answer::Body(ONLY0.to_owned())).unwrap();
    assert_eq!(
        a.missing,
        [
            Missing::Subnet { family: Family::V6 },
            Missing::Addresses { family: Family::V6 }
        ]
    );
    // ... and complete once an ipv6_dhcp network is listed, though Nova names no
    // subnet for it (nothing more would come).
    let with_v6 = ONLY0.replace(
        r#""services""#,
        r#""extra": 1, "services""#,
    )
    .replace(
        r#"[{"id": "network0""#,
        r#"[{"id": "n6", "type": "ipv6_dhcpv6-stateful", "link": "tap1a2b3c4d-5e"}, {"id": "network0""#,
    );
    let a = assess(&v6, &Answer::Body(with_v6)).unwrap();
    assert!(a.is_complete(), "{:?}", a.missing);
    // A static network naming the leased address serves a lease too.
    let st = r#"{"links":[{"id":"a","type":"phy","ethernet_mac_address":"fa:16:3e:00:01:14"}],
        "networks":[{"type":"ipv4","link":"a","ip_address":"10.0.1.20","netmask":"255.255.255.0"}]}"#;
    assert!(
        assess(&e, &Answer::Body(st.to_owned()))
            .unwrap()
            .is_complete()
    );
    assert!(assess(&e, &Answer::Body("garbage".to_owned())).is_err());
}

fn two_nic_plan(body: &str, nics: &[(&str, &str, Lease)]) -> crate::model::Plan {
    plan_nics(&network(&parse_network_data(body).unwrap()), nics)
}

#[test]
fn routes_go_into_the_nics_table_through_the_gate() {
    // eth1's network: its default gateway, an extra route via it, one via a
    // next hop off its subnet, one to the metadata service, one to loopback.
    let body = TWO.replace(
        r#"{"network": "192.168.50.0", "netmask": "255.255.255.0", "gateway": "10.0.1.1"}"#,
        r#"{"network": "192.168.50.0", "netmask": "255.255.255.0", "gateway": "10.0.1.1"},
           {"network": "172.16.0.0", "netmask": "255.240.0.0", "gateway": "10.0.9.1"},
           {"network": "169.254.169.254", "netmask": "255.255.255.255", "gateway": "10.0.1.2"},
           {"network": "127.0.0.0", "netmask": "255.0.0.0", "gateway": "10.0.1.2"},
           {"network": "10.0.1.0", "netmask": "255.255.255.0", "gateway": "10.0.1.1"}"#,
    );
    let p = two_nic_plan(
        &body,
        &[
            ("eth0", MAC0, lease("10.0.0.10", 24, Some("10.0.0.1"))),
            ("eth1", MAC1, lease("10.0.1.20", 24, Some("10.0.1.1"))),
        ],
    );
    let table = 10_000 + device_slot(MAC1.parse().unwrap());
    let text = crate::render::ip(&p);
    let want = format!(
        "# profile ec2-net-utils\n\
         # eth0 fa:16:3e:00:00:0a primary families ipv4\n\
         # eth0 missing: local-ipv4s not known\n\
         # eth1 fa:16:3e:00:01:14 secondary table {table} families ipv4\n\
         # eth1 refused: routes 127.0.0.0/8 via 10.0.1.2: loopback (127.0.0.0/8)\n\
         # eth1 refused: routes 169.254.169.254/32 via 10.0.1.2: the metadata service's address 169.254.169.254 (the link-local metadata service most clouds share)\n\
         # eth1 refused: routes 172.16.0.0/12 via 10.0.9.1: not inside the NIC's subnet (10.0.1.0/24)\n\
         ip -4 route add default via 10.0.1.1 dev eth1 table {table}\n\
         ip -4 route add 10.0.1.0/24 dev eth1 scope link src 10.0.1.20 table {table}\n\
         ip -4 route add 192.168.50.0/24 via 10.0.1.1 dev eth1 table {table}\n\
         ip -4 rule add from 10.0.1.20/32 lookup {table} priority {table}\n"
    );
    assert_eq!(text, want, "{text}");
    // Never the main table.
    assert!(
        p.interfaces
            .iter()
            .flat_map(|i| &i.routes)
            .all(|r| r.table == table)
    );
    assert_valid(&p, &["eth0", "eth1"]);
}

#[test]
fn a_metadata_default_gateway_stands_in_for_a_missing_router() {
    // A static IPv6 network with its default gateway, and a DHCPv6-style lease
    // (no router, no RA yet): the table's default route is the metadata's.
    let body = r#"{"links":[
        {"id":"a","type":"phy","ethernet_mac_address":"fa:16:3e:00:00:0a"},
        {"id":"b","type":"phy","ethernet_mac_address":"fa:16:3e:00:01:14"}],
      "networks":[
        {"type":"ipv4_dhcp","link":"a"},
        {"type":"ipv6","link":"b","ip_address":"2001:db8:1::20","netmask":"ffff:ffff:ffff:ffff::",
         "routes":[{"network":"::","netmask":"::","gateway":"2001:db8:1::1"},
                   {"network":"2001:db8:9::","netmask":"ffff:ffff:ffff:ffff::","gateway":"2001:db8:1::1"},
                   {"network":"::","netmask":"::","gateway":"2001:db8:7::1"}]}]}"#;
    let p = two_nic_plan(
        body,
        &[
            ("eth0", MAC0, lease("10.0.0.10", 24, Some("10.0.0.1"))),
            ("eth1", MAC1, lease("2001:db8:1::20", 128, None)),
        ],
    );
    let table = 10_000 + device_slot(MAC1.parse().unwrap());
    let text = crate::render::ip(&p);
    assert!(
        text.contains(&format!(
            "ip -6 route add default via 2001:db8:1::1 dev eth1 table {table}\n"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "ip -6 route add 2001:db8:9::/64 via 2001:db8:1::1 dev eth1 table {table}\n"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "ip -6 rule add from 2001:db8:1::20/128 lookup {table}"
        )),
        "{text}"
    );
    assert!(!text.contains("2001:db8:7::1"), "{text}");
}

#[test]
fn static_networks_are_unleased_nics_and_dhcp_ones_are_not() {
    let body = r#"{"links":[
        {"id":"a","type":"phy","ethernet_mac_address":"fa:16:3e:00:00:0a"},
        {"id":"b","type":"phy","ethernet_mac_address":"fa:16:3e:00:01:14"},
        {"id":"c","type":"phy","ethernet_mac_address":"fa:16:3e:00:02:1e"}],
      "networks":[
        {"type":"ipv4_dhcp","link":"a"},
        {"type":"ipv6_slaac","link":"a"},
        {"type":"ipv4","link":"b","ip_address":"10.0.1.20","netmask":"255.255.255.0",
         "routes":[{"network":"0.0.0.0","netmask":"0.0.0.0","gateway":"10.0.1.1"}]},
        {"type":"ipv6","link":"b","ip_address":"2001:db8:1::20","netmask":"ffff:ffff:ffff:ffff::"},
        {"type":"ipv4","link":"c","ip_address":"10.0.2.30","netmask":"255.255.255.0"},
        {"type":"ipv6_slaac","link":"c"}]}"#;
    let d = parse_network_data(body).unwrap();
    let u = unleased(&d);
    assert_eq!(u.len(), 2, "{u:?}");
    assert_eq!(u[0].mac, MAC1.parse().unwrap());
    assert_eq!(
        u[0].leases,
        [
            lease("10.0.1.20", 24, Some("10.0.1.1")),
            lease("2001:db8:1::20", 64, None)
        ]
        .map(|l| Lease {
            reason: Reason::Metadata,
            ..l
        })
    );
    // IPv6 from router advertisements: no lease of that family.
    assert_eq!(u[1].mac, "fa:16:3e:00:02:1e".parse().unwrap());
    assert_eq!(u[1].leases.len(), 1);
    assert!(u[1].leases[0].routers.is_empty());
    assert!(unleased(&parse_network_data(TWO).unwrap()).is_empty());
    // The primary (the first link) is never a NIC without DHCP, static or not.
    let static_primary = body.replace(
        r#"{"type":"ipv4_dhcp","link":"a"},"#,
        r#"{"type":"ipv4","link":"a","ip_address":"10.0.0.10","netmask":"255.255.255.0"},"#,
    );
    let u = unleased(&parse_network_data(&static_primary).unwrap());
    assert_eq!(u.len(), 2, "{u:?}");
    assert!(
        u.iter()
            .all(|n| n.mac != "fa:16:3e:00:00:0a".parse().unwrap())
    );
}

#[test]
fn state_files_without_routes_still_read_and_routes_round_trip() {
    let mut n = NicMetadata::empty(MAC1.parse().unwrap());
    let json = serde_json::to_string(&n).unwrap();
    assert!(!json.contains("routes"), "{json}");
    let back: NicMetadata = serde_json::from_str(&json).unwrap();
    assert_eq!(back, n);
    n.routes.push(NicRoute {
        to: "192.168.50.0/24".parse().unwrap(),
        via: "10.0.1.1".parse().unwrap(),
    });
    let json = serde_json::to_string(&n).unwrap();
    let back: NicMetadata = serde_json::from_str(&json).unwrap();
    assert_eq!(back, n);
    assert_eq!(
        parse_saved(TWO).unwrap(),
        network(&parse_network_data(TWO).unwrap())
    );
}

/// One link besides the primary, `fa:16:3e:00:01:14`, with `networks` (JSON
/// objects without their `link`, which is `b`).
fn on_eth1(networks: &[&str]) -> String {
    let nets: Vec<String> = networks
        .iter()
        .map(|n| n.replacen('{', r#"{"link":"b","#, 1))
        .collect();
    format!(
        r#"{{"links":[
        {{"id":"a","type":"phy","ethernet_mac_address":"fa:16:3e:00:00:0a"}},
        {{"id":"b","type":"phy","ethernet_mac_address":"fa:16:3e:00:01:14"}}],
      "networks":[{{"type":"ipv4_dhcp","link":"a"}}{}{}]}}"#,
        if nets.is_empty() { "" } else { "," },
        nets.join(",")
    )
}

/// The EUI-64 of `MAC1` (`fa:16:3e:00:01:14`) inside `2001:db8:1::/64`, as
/// Neutron gives a port on a SLAAC subnet and the kernel configures it.
const MAC1_SLAAC: &str = "2001:db8:1:0:f816:3eff:fe00:114";

/// Nova's SLAAC network since Pike: the port's address with the subnet's
/// netmask and its default gateway (`nova/virt/netutils.py` `_get_nets`).
fn slaac_network(kind: &str, address: &str) -> String {
    format!(
        r#"{{"type":"{kind}","ip_address":"{address}","netmask":"ffff:ffff:ffff:ffff::",
            "routes":[{{"network":"::","netmask":"::","gateway":"2001:db8:1::1"}}]}}"#
    )
}

fn autoconf(address: &str) -> Lease {
    Lease {
        reason: Reason::Autoconf,
        ..lease(address, 64, None)
    }
}

#[test]
fn eui64_is_neutrons_and_the_kernels_slaac_address() {
    // RFC 4291 appendix A: ff:fe in the middle, the universal/local bit flipped
    // (oslo.utils `get_ipv6_addr_by_EUI64`: `prefix.first + eui64 ^ (1 << 57)`).
    assert_eq!(
        eui64("fa:16:3e:00:01:14".parse().unwrap()),
        [0xf8, 0x16, 0x3e, 0xff, 0xfe, 0x00, 0x01, 0x14]
    );
    let mac1 = "02:00:00:00:00:02".parse().unwrap();
    let prefix: IpNet = "fd00:98:1::/64".parse().unwrap();
    assert_eq!(
        slaac_address(Some(prefix), mac1).unwrap().to_string(),
        "fd00:98:1::ff:fe00:2/64"
    );
    // The address a network lists is the one it vouches for.
    let listed: IpNet = format!("{MAC1_SLAAC}/64").parse().unwrap();
    assert_eq!(
        slaac_address(Some(listed), mac1).map(IpNet::V6),
        Some(listed)
    );
    // No address, an IPv4 one, a prefix SLAAC cannot fill (not /64): none.
    assert_eq!(slaac_address(None, mac1), None);
    assert_eq!(
        slaac_address(Some("10.0.0.0/24".parse().unwrap()), mac1),
        None
    );
    assert_eq!(
        slaac_address(Some("fd00:98:1::/56".parse().unwrap()), mac1),
        None
    );
}

#[test]
fn every_ipv6_network_type_and_what_it_gives_the_nic() {
    let mac1: MacAddr = MAC1.parse().unwrap();
    let types = [
        ("ipv6_slaac", NetworkType::Ipv6Slaac),
        ("ipv6_dhcpv6-stateless", NetworkType::Ipv6Slaac),
        ("ipv6_dhcpv6-stateful", NetworkType::Ipv6Dhcp),
        ("ipv6_dhcp", NetworkType::Ipv6Dhcp),
        ("ipv6", NetworkType::Ipv6Static),
        ("static6", NetworkType::Ipv6Static),
    ];
    for (name, kind) in types {
        let body = on_eth1(&[&slaac_network(name, MAC1_SLAAC)]);
        let d = parse_network_data(&body).unwrap();
        assert_eq!(d.networks[1].kind, kind, "{name}");
        // The address is the NIC's, with its subnet, whatever the type.
        let n = network(&d);
        let nic = n.nic(mac1).unwrap();
        assert_eq!(nic.ipv6s[0].to_string(), MAC1_SLAAC, "{name}");
        assert_eq!(
            nic.subnet_ipv6_cidr_blocks[0].to_string(),
            "2001:db8:1::/64",
            "{name}"
        );
        let u = unleased(&d);
        let got: Vec<Reason> = u.iter().flat_map(|n| &n.leases).map(|l| l.reason).collect();
        match kind {
            // From router advertisements: the kernel's address, never added.
            NetworkType::Ipv6Slaac => {
                assert_eq!(u[0].leases, [autoconf(MAC1_SLAAC)], "{name}");
            }
            // A DHCPv6 client's lease serves it.
            NetworkType::Ipv6Dhcp => assert!(got.is_empty(), "{name}: {got:?}"),
            // Static: leasehook adds it, with the network's gateway.
            _ => assert_eq!(
                u[0].leases,
                [Lease {
                    reason: Reason::Metadata,
                    ..lease(MAC1_SLAAC, 64, Some("2001:db8:1::1"))
                }],
                "{name}"
            ),
        }
        // A lease of the address agrees with the document, whatever the type.
        let a = assess(
            &event(MAC1, lease(MAC1_SLAAC, 128, None)),
            &Answer::Body(body),
        )
        .unwrap();
        assert!(a.is_complete(), "{name}: {:?}", a.missing);
    }
    // A SLAAC network naming its prefix alone: the EUI-64 of the link's MAC.
    let d = parse_network_data(&on_eth1(&[&slaac_network("ipv6_slaac", "2001:db8:1::")])).unwrap();
    assert_eq!(unleased(&d)[0].leases, [autoconf(MAC1_SLAAC)]);
    assert_eq!(
        network(&d).nic(mac1).unwrap().ipv6s[0].to_string(),
        MAC1_SLAAC
    );
    // Without an address (Nova before Pike never types one so; metal3 writes
    // it so): it vouches for no address, and the NIC gets no IPv6 lease.
    let d = parse_network_data(&on_eth1(&[r#"{"type":"ipv6_slaac"}"#])).unwrap();
    assert!(unleased(&d).is_empty());
    // A DHCPv6 network beside the SLAAC one hands out the address: its
    // client's lease is the NIC's, no autoconf lease.
    let d = parse_network_data(&on_eth1(&[
        &slaac_network("ipv6_slaac", MAC1_SLAAC),
        r#"{"type":"ipv6_dhcpv6-stateful"}"#,
    ]))
    .unwrap();
    assert!(unleased(&d).is_empty());
    // The primary's SLAAC is its own configuration's (the main table's).
    let primary = on_eth1(&[]).replace(
        r#"{"type":"ipv4_dhcp","link":"a"}"#,
        &slaac_network("ipv6_slaac", "2001:db8:1::f816:3eff:fe00:a").replacen(
            '{',
            r#"{"link":"a","#,
            1,
        ),
    );
    assert!(unleased(&parse_network_data(&primary).unwrap()).is_empty());
}

#[test]
fn hostile_slaac_values_are_errors_or_refused() {
    // An IPv4 address on a SLAAC network, a netmask of the other family: the
    // document is not used.
    for (net, key) in [
        (
            r#"{"type":"ipv6_slaac","ip_address":"10.0.1.20","netmask":"255.255.255.0"}"#,
            "networks/1/ip_address",
        ),
        (
            r#"{"type":"ipv6_slaac","ip_address":"2001:db8:1::5","netmask":"255.255.255.0"}"#,
            "networks/1/netmask",
        ),
        (
            r#"{"type":"ipv6_slaac","ip_address":"2001:db8:1::5","netmask":"ffff:0:ffff::"}"#,
            "networks/1/netmask",
        ),
    ] {
        let e = parse_network_data(&on_eth1(&[net]))
            .unwrap_err()
            .to_string();
        assert!(e.contains(key), "{e}");
    }
    // Addresses no NIC may hold as a source (loopback, multicast, link-local,
    // the metadata service's IPv6 address): vouched for, but refused by the
    // gate, so the NIC gets no rule from them.
    for bad in [
        "::1",
        "ff02::1",
        "fe80::f816:3eff:fe00:114",
        "fd00:ec2::254",
    ] {
        let body = on_eth1(&[&format!(
            r#"{{"type":"ipv6_slaac","ip_address":"{bad}","netmask":"ffff:ffff:ffff:ffff::"}}"#
        )]);
        let d = parse_network_data(&body).unwrap();
        let u = unleased(&d);
        let l = u[0].leases[0].clone();
        let p = plan_nics(&network(&d), &[("eth1", MAC1, l)]);
        let ip = &p.interfaces[0];
        assert!(
            ip.rules.is_empty() && ip.addresses.is_empty(),
            "{bad}: {p:?}"
        );
        assert!(!ip.refused.is_empty(), "{bad}: {p:?}");
    }
}

#[test]
fn a_slaac_address_is_routed_never_added() {
    let body = on_eth1(&[
        r#"{"type":"ipv4_dhcp"}"#,
        &slaac_network("ipv6_slaac", MAC1_SLAAC),
    ]);
    let d = parse_network_data(&body).unwrap();
    let l = unleased(&d)[0].leases[0].clone();
    let p = two_nic_plan(
        &body,
        &[
            ("eth0", MAC0, lease("10.0.0.10", 24, Some("10.0.0.1"))),
            ("eth1", MAC1, l),
        ],
    );
    let table = 10_000 + device_slot(MAC1.parse().unwrap());
    let text = crate::render::ip(&p);
    let want = format!(
        "# profile ec2-net-utils\n\
         # eth0 fa:16:3e:00:00:0a primary families ipv4\n\
         # eth0 missing: local-ipv4s not known\n\
         # eth1 fa:16:3e:00:01:14 secondary table {table} families ipv6\n\
         ip -6 route add default via 2001:db8:1::1 dev eth1 table {table}\n\
         ip -6 route add 2001:db8:1::/64 dev eth1 table {table}\n\
         ip -6 rule add from {MAC1_SLAAC}/128 lookup {table} priority {table}\n"
    );
    assert_eq!(text, want, "{text}");
    // The kernel's address is never one the plan adds (or so owns).
    assert!(p.interfaces.iter().all(|i| i.addresses.is_empty()), "{p:?}");
    assert_valid(&p, &["eth0", "eth1"]);
}

#[test]
fn completeness_is_per_family_and_an_ipv6_only_link_needs_no_ipv4() {
    // An IPv6-only port (no IPv4 network on the link): its DHCPv6 lease
    // agrees with the document alone.
    let v6_only = on_eth1(&[&slaac_network("ipv6_dhcpv6-stateful", MAC1_SLAAC)]);
    let v6 = event(MAC1, lease(MAC1_SLAAC, 128, None));
    let a = assess(&v6, &Answer::Body(v6_only.clone())).unwrap();
    assert!(a.is_complete(), "{:?}", a.missing);
    // So does its SLAAC address.
    let slaac_only = on_eth1(&[&slaac_network("ipv6_slaac", MAC1_SLAAC)]);
    let a = assess(
        &event(MAC1, autoconf(MAC1_SLAAC)),
        &Answer::Body(slaac_only),
    )
    .unwrap();
    assert!(a.is_complete(), "{:?}", a.missing);
    // ... named by its prefix alone: the EUI-64 inside it is the listed one.
    let prefix_only = on_eth1(&[&slaac_network("ipv6_slaac", "2001:db8:1::")]);
    let a = assess(
        &event(MAC1, autoconf(MAC1_SLAAC)),
        &Answer::Body(prefix_only),
    )
    .unwrap();
    assert!(a.is_complete(), "{:?}", a.missing);
    // A dual-stack port whose IPv6 network is not listed yet: the IPv4 lease
    // is complete, the IPv6 one waits, for IPv6 items alone.
    let v4_yet = on_eth1(&[r#"{"type":"ipv4_dhcp"}"#]);
    let v4 = event(MAC1, lease("10.0.1.20", 24, Some("10.0.1.1")));
    assert!(
        assess(&v4, &Answer::Body(v4_yet.clone()))
            .unwrap()
            .is_complete()
    );
    let a = assess(&v6, &Answer::Body(v4_yet)).unwrap();
    assert!(!a.missing.is_empty());
    assert!(
        a.missing.iter().all(|m| matches!(
            m,
            Missing::Addresses { family: Family::V6 } | Missing::Subnet { family: Family::V6 }
        )),
        "{:?}",
        a.missing
    );
    // A SLAAC address the network does not vouch for (a privacy address):
    // not the document's, waited for as a stale answer.
    let privacy = event(MAC1, autoconf("2001:db8:1::1234:5678:9abc:def0"));
    let a = assess(&privacy, &Answer::Body(v6_only)).unwrap();
    assert!(
        matches!(a.missing[..], [Missing::LeaseAddress { .. }]),
        "{:?}",
        a.missing
    );
}

// SPDX-License-Identifier: Apache-2.0
//! Pure: Google Compute Engine's NIC model, what one NIC event asks of it, and
//! whether its answer agrees with the lease (SPEC §3.5, §4.4).
//!
//! # What is fetched
//!
//! One request per round, `instance/network-interfaces/?recursive=true`: a JSON
//! list with one object per NIC, in attachment order (the list index N is
//! `nicN`). Of each object leasehook reads:
//!
//! | key | becomes | |
//! |---|---|---|
//! | the index N | `device-number` N: table `table_base + N` | nic0 is the primary |
//! | `mac` | the NIC's MAC | required |
//! | `ip` | `local-ipv4s` | must be the leased address |
//! | `gateway` and `subnetmask` | `subnet-ipv4-cidr-block` (the gateway's network) | required |
//! | `ipAliases` | `ipv4-prefix`: extra rule sources, through the address gate | optional |
//! | `ipv6s` | `ipv6s` (written uncompressed, `fd20:…:0:1:0:0`) | must list the DHCPv6-leased address |
//! | `ipv6` | `ipv6-prefix`: the NIC's /96 range, a rule source like an alias range | optional |
//! | the /64 around the first of `ipv6s` | `subnet-ipv6-cidr-blocks` | GCE publishes none |
//! | `gatewayIpv6` | a `::/0` route and a gateway: the table's IPv6 default route | optional |
//!
//! Every other key (`accessConfigs`, `forwardedIps`, `forwardedIpv6s`,
//! `dhcpv6Refresh`, `network`, `mtu`, ...) is ignored. The entries are read as
//! [`GceNic`]s through [`crate::source::provider::doc`]: a value of the wrong
//! type, a MAC, address or range that does not parse, a netmask that is not
//! contiguous, two NICs with one MAC, more than [`MAX_NICS`] entries or
//! [`MAX_ALIASES`] alias ranges, IPv6 addresses or IPv6 ranges is an error naming
//! its key (`…/network-interfaces/1/ipAliases/0`, `…/1/ipv6/0`) and showing its
//! value: the answer is not used.
//!
//! # IPv6 (issue 34)
//!
//! Google's words ("Configure IPv6 for instances",
//! <https://cloud.google.com/compute/docs/ip-addresses/configure-ipv6-address>,
//! quoted from the translated versions we could read):
//! an interface with IPv6 "is assigned a single /96 range of IPv6 addresses";
//! the metadata server answers the VM's DHCPv6 request with "the first IP
//! address of the /96 IP range", and "applications can use any of the IP
//! addresses in the /96 range"; the metadata server publishes the default route
//! by router advertisement, and `gateway-ipv6` names that router (a link-local
//! address). So, as GCE's alias ranges are (`ipAliases`: the VM's own, routed to
//! it, never an address leasehook adds), the /96 (`ipv6`) becomes a delegated
//! prefix, one rule `from` the whole range; nothing is added to the link (the
//! leased first address is the DHCPv6 client's, the rest of the range the
//! user's). The recursive answer's keys are as a GCE VM shows them
//! (siderolabs/talos's `platform/gcp/testdata/interfaces.json`: `ipv6` a list
//! of ranges, `ipv6s` a list of addresses, `gatewayIpv6`).
//!
//! GCE publishes no IPv6 subnet. Its subnets' IPv6 ranges are all /64s and each
//! NIC's /96 is carved from its subnet's ("The IPv6 subnet size is /64 …
//! Each IPv6-enabled VM will be assigned a /96 address range from the subnet",
//! Google Cloud blog, "Planning an IPv6 network on Google Cloud", 2023), so the
//! NIC's subnet is the /64 around the first address it lists (it lists one):
//! the gate then keeps the range and the other addresses inside it, and the
//! planner's subnet route goes into the NIC's table.
//!
//! # When the metadata agrees
//!
//! The answer, as an [`InstanceNetwork`], goes to the planner with the event's
//! link and lease, as EC2's does: complete once the NIC's entry exists, lists the
//! leased `ip` and names its subnet. GCE leases are /32 (the gateway is reached
//! through the option-121 route); the planner puts the gateway's link route in
//! the table before its default route (`docs/planner.md`).
//!
//! The check is per lease, so per family: a DHCPv6 lease is complete once the
//! entry lists its address in `ipv6s` (which also gives the subnet), and an
//! IPv6 key published late holds only an event's IPv6 lease; an IPv6-only NIC
//! (no `ip`, `gateway` or `subnetmask`) is planned from its DHCPv6 lease alone
//! and nothing waits for IPv4.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use serde::{Deserialize, Deserializer, de};

use crate::error::Result;
use crate::model::{InstanceNetwork, MacAddr, NicMetadata, NicRoute};
use crate::source::provider::doc::{self, bad};
use crate::source::provider::{Assessment, NicEvent, complete};

pub use crate::source::provider::doc::Answer;

use super::GCE_ROOT;

/// The path of the one request of the wait.
pub const INTERFACES_PATH: &str = "/instance/network-interfaces/?recursive=true";

/// The most NICs an answer may list (GCE allows 8, 10 on the largest types).
pub const MAX_NICS: usize = 64;

/// The most IP alias ranges, IPv6 addresses or IPv6 ranges one NIC may list.
pub const MAX_ALIASES: usize = 256;

/// One NIC as the metadata server describes it: the keys of its entry that
/// leasehook reads, read by [`parse_interfaces`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GceNic {
    /// The index N in the list (`nicN`): the entry's place, not a key.
    #[serde(skip)]
    pub index: u32,
    /// `mac`.
    #[serde(deserialize_with = "doc::mac")]
    pub mac: MacAddr,
    /// `ip`: the NIC's primary internal address.
    pub ip: Option<Ipv4Addr>,
    /// `gateway`.
    pub gateway: Option<Ipv4Addr>,
    /// `subnetmask`.
    pub subnetmask: Option<Ipv4Addr>,
    /// `ipAliases`: alias ranges (a bare address is a /32).
    #[serde(default, deserialize_with = "aliases")]
    pub ip_aliases: Vec<Ipv4Net>,
    /// `ipv6s`: the NIC's IPv6 addresses (the first of its range, which DHCPv6
    /// leases).
    #[serde(default, deserialize_with = "doc::list")]
    pub ipv6s: Vec<Ipv6Addr>,
    /// `ipv6`: the NIC's IPv6 ranges (its /96; a bare address is a /128).
    #[serde(default, deserialize_with = "ranges_v6")]
    pub ipv6: Vec<Ipv6Net>,
    /// `gatewayIpv6`: the router of the NIC's IPv6 default route (link-local).
    pub gateway_ipv6: Option<Ipv6Addr>,
}

impl GceNic {
    /// The subnet: the gateway's network under `subnetmask`.
    pub fn subnet(&self) -> Option<Ipv4Net> {
        let (gw, mask) = self.gateway.zip(self.subnetmask)?;
        Ipv4Net::with_netmask(gw, mask).ok().map(|n| n.trunc())
    }

    /// The IPv6 subnet: the /64 around the first of `ipv6s` (GCE publishes
    /// none; its IPv6 subnets are /64s and it lists one address, the first of
    /// the NIC's /96: see the module docs). Only the first: another entry's /64
    /// would be a subnet route to wherever that entry points, even when the gate
    /// refuses the entry itself (another NIC's address), and a leased address
    /// outside the first one's /64 is refused, not routed.
    pub fn ipv6_subnet(&self) -> Option<Ipv6Net> {
        let first = self.ipv6s.first()?;
        Ipv6Net::new(*first, 64).ok().map(|n| n.trunc())
    }

    /// The cloud-neutral metadata the planner reads.
    pub fn metadata(&self) -> NicMetadata {
        let mut n = NicMetadata::empty(self.mac);
        n.device_number = Some(self.index);
        n.local_ipv4s = self.ip.into_iter().collect();
        n.subnet_ipv4_cidr_blocks = self.subnet().into_iter().collect();
        n.ipv6s.clone_from(&self.ipv6s);
        n.subnet_ipv6_cidr_blocks = self.ipv6_subnet().into_iter().collect();
        // `gateway` is the NIC's default gateway: the planner takes it when the
        // lease names no router (GCE's DHCP names one on every NIC), through
        // the address gate. `gatewayIpv6` is the IPv6 one, which no DHCPv6
        // lease names: the planner takes it before the router advertisements'.
        let v4 = self.subnet().and(self.gateway).map(|via| NicRoute {
            to: IpNet::V4(Ipv4Net::default()),
            via: IpAddr::V4(via),
        });
        let v6 = self.gateway_ipv6.map(|via| NicRoute {
            to: IpNet::V6(Ipv6Net::default()),
            via: IpAddr::V6(via),
        });
        n.routes = v4.into_iter().chain(v6).collect();
        n.ipv4_prefixes.clone_from(&self.ip_aliases);
        n.ipv6_prefixes.clone_from(&self.ipv6);
        n.interface_id = Some(format!("nic{}", self.index));
        n.gateways = self
            .gateway
            .map(IpAddr::V4)
            .into_iter()
            .chain(self.gateway_ipv6.map(IpAddr::V6))
            .collect();
        n
    }
}

/// `ipAliases` (absent or `null`: none): each entry a range, or a bare address
/// (a /32).
fn aliases<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Ipv4Net>, D::Error> {
    struct Alias(Ipv4Net);
    impl<'de> Deserialize<'de> for Alias {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let s = String::deserialize(d)?;
            match s.split_once('/') {
                Some(_) => s.parse::<Ipv4Net>().ok(),
                None => s.parse::<Ipv4Addr>().ok().map(Ipv4Net::from),
            }
            .map(Alias)
            .ok_or_else(|| de::Error::custom("not an IPv4 range"))
        }
    }
    Ok(doc::list::<D, Alias>(d)?.into_iter().map(|a| a.0).collect())
}

/// `ipv6` (absent or `null`: none): each entry a range, or a bare address (a
/// /128).
fn ranges_v6<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Ipv6Net>, D::Error> {
    struct Range(Ipv6Net);
    impl<'de> Deserialize<'de> for Range {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let s = String::deserialize(d)?;
            match s.split_once('/') {
                Some(_) => s.parse::<Ipv6Net>().ok(),
                None => s.parse::<Ipv6Addr>().ok().map(Ipv6Net::from),
            }
            .map(Range)
            .ok_or_else(|| de::Error::custom("not an IPv6 range"))
        }
    }
    Ok(doc::list::<D, Range>(d)?.into_iter().map(|r| r.0).collect())
}

/// Parses the answer to [`INTERFACES_PATH`]: strict JSON, a list of
/// [`GceNic`] objects (see the module docs).
pub fn parse_interfaces(body: &str) -> Result<Vec<GceNic>> {
    let whole = format!("{GCE_ROOT}/instance/network-interfaces");
    let mut nics: Vec<GceNic> = doc::read(body, "GCE network-interfaces", &whole)?;
    doc::at_most(&nics, MAX_NICS, &whole, "NICs")?;
    for (nic, index) in nics.iter_mut().zip(0u32..) {
        nic.index = index;
    }
    for (i, nic) in nics.iter().enumerate() {
        if nics.iter().take(i).any(|n| n.mac == nic.mac) {
            return Err(bad(
                format!("{whole}/{i}/mac"),
                "two NICs with one MAC",
                &nic.mac.to_string(),
            ));
        }
        check_entry(nic, &format!("{whole}/{i}"))?;
    }
    Ok(nics)
}

/// What the types cannot say of one entry at `key` (a vNIC's, or a Dynamic
/// NIC's, [`super::vlan`]): a contiguous `subnetmask`, at most
/// [`MAX_ALIASES`] alias ranges, IPv6 addresses and IPv6 ranges.
pub(crate) fn check_entry(nic: &GceNic, key: &str) -> Result<()> {
    let key = |name: &str| format!("{key}/{name}");
    if let Some(m) = nic.subnetmask
        && Ipv4Net::with_netmask(Ipv4Addr::UNSPECIFIED, m).is_err()
    {
        return Err(bad(
            key("subnetmask"),
            "not a contiguous netmask",
            &m.to_string(),
        ));
    }
    doc::at_most(&nic.ip_aliases, MAX_ALIASES, &key("ipAliases"), "ranges")?;
    doc::at_most(&nic.ipv6s, MAX_ALIASES, &key("ipv6s"), "addresses")?;
    doc::at_most(&nic.ipv6, MAX_ALIASES, &key("ipv6"), "ranges")
}

/// The NICs as the planner reads them: nic0 is the primary.
pub fn network(nics: &[GceNic]) -> InstanceNetwork {
    let mut out = InstanceNetwork {
        primary_mac: nics.iter().find(|n| n.index == 0).map(|n| n.mac),
        nics: nics.iter().map(GceNic::metadata).collect(),
    };
    out.nics.sort_by_key(|n| n.mac);
    out
}

/// What the last answer to [`INTERFACES_PATH`] says about `event`. Fails on
/// an answer that does not parse.
pub fn assess(event: &NicEvent, answer: &Answer) -> Result<Assessment> {
    let network = answer.read(|body| parse_interfaces(body).map(|nics| network(&nics)))?;
    complete::assess(event, network)
}

#[cfg(test)]
pub(crate) mod tests {
    use std::net::IpAddr;

    use super::*;
    use crate::model::{Family, IfName, Lease, Missing, Reason};
    use crate::source::provider::doc::tests::{assert_valid, plan_nics};

    pub(crate) const TWO: &str = r#"[
      {"accessConfigs":[{"externalIp":"34.1.2.3","type":"ONE_TO_ONE_NAT"}],"dnsServers":["169.254.169.254"],
       "forwardedIps":[],"gateway":"10.0.0.1","ip":"10.0.0.10","ipAliases":[],"mac":"42:01:0a:00:00:0a",
       "mtu":1460,"network":"projects/1/networks/default","subnetmask":"255.255.255.0","targetInstanceIps":[]},
      {"gateway":"10.0.1.1","ip":"10.0.1.20","ipAliases":["10.0.1.64/30","10.0.1.99"],"mac":"42:01:0a:00:01:14",
       "mtu":1460,"network":"projects/1/networks/second","subnetmask":"255.255.255.0"}
    ]"#;

    fn event(ip: &str) -> NicEvent {
        let address: IpAddr = ip.parse().unwrap();
        NicEvent::try_new(
            IfName::try_new("eth1").unwrap(),
            "42:01:0a:00:01:14".parse().unwrap(),
            vec![Lease {
                family: Family::V4,
                address,
                prefix_len: 32,
                routers: vec!["10.0.1.1".parse().unwrap()],
                reason: Reason::Bound,
            }],
        )
        .unwrap()
    }

    #[test]
    fn two_nics_map_to_device_numbers_subnets_and_aliases() {
        let nics = parse_interfaces(TWO).unwrap();
        assert_eq!(nics.len(), 2);
        let n = &nics[1];
        assert_eq!(n.index, 1);
        assert_eq!(n.subnet().unwrap().to_string(), "10.0.1.0/24");
        assert_eq!(
            n.ip_aliases
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["10.0.1.64/30", "10.0.1.99/32"]
        );
        let net = network(&nics);
        assert_eq!(net.primary_mac, Some("42:01:0a:00:00:0a".parse().unwrap()));
        let m = net.nic(n.mac).unwrap();
        assert_eq!(m.device_number, Some(1));
        assert_eq!(m.network_card, None);
        assert_eq!(m.local_ipv4s, ["10.0.1.20".parse::<Ipv4Addr>().unwrap()]);
        assert_eq!(m.interface_id.as_deref(), Some("nic1"));
    }

    #[test]
    fn hostile_answers_are_errors_naming_the_key() {
        let cases = [
            ("", "GCE network-interfaces: EOF"),
            ("{\"mac\":\"42:01:0a:00:00:0a\"}", "not a JSON list"),
            ("[1]", "not a JSON object"),
            ("[{}]", "0/mac: missing"),
            ("[{\"mac\": 7}]", "not a string"),
            ("[{\"mac\": \"42:01\"}]", "not a MAC"),
            (
                "[{\"mac\":\"42:01:0a:00:00:0a\",\"ip\":\"10.0.0.300\"}]",
                "0/ip",
            ),
            (
                "[{\"mac\":\"42:01:0a:00:00:0a\",\"ip\":\"fd00::1\"}]",
                "0/ip: invalid IPv4 address syntax",
            ),
            (
                "[{\"mac\":\"42:01:0a:00:00:0a\",\"subnetmask\":\"255.0.255.0\"}]",
                "contiguous",
            ),
            (
                "[{\"mac\":\"42:01:0a:00:00:0a\",\"ipAliases\":\"10.0.0.0/8\"}]",
                "0/ipAliases: not a JSON list",
            ),
            (
                "[{\"mac\":\"42:01:0a:00:00:0a\",\"ipAliases\":[\"10.0.0.0/33\"]}]",
                "not an IPv4 range",
            ),
            (
                "[{\"mac\":\"42:01:0a:00:00:0a\",\"ipAliases\":[{}]}]",
                "not a string",
            ),
            (
                "[{\"mac\":\"42:01:0a:00:00:0a\"},{\"mac\":\"42:01:0A:00:00:0A\"}]",
                "two NICs",
            ),
            (
                "[{\"mac\":\"42:01:0a:00:00:0a\"}] trailing",
                "GCE network-interfaces: trailing",
            ),
            (
                "[{\"mac\":\"42:01:0a:00:00:0a\"",
                "GCE network-interfaces: EOF",
            ),
        ];
        for (body, want) in cases {
            let e = parse_interfaces(body).unwrap_err().to_string();
            assert!(e.contains(want), "{body:?}: {e}");
        }
        // Deeply nested garbage is an error, not a stack overflow.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse_interfaces(&deep).is_err());
        let many = format!(
            "[{}]",
            vec!["{\"mac\":\"42:01:0a:00:00:0a\"}"; MAX_NICS + 1].join(",")
        );
        assert!(
            parse_interfaces(&many)
                .unwrap_err()
                .to_string()
                .contains("more than")
        );
        // A hostile value is shown escaped and cut, never as a new log line.
        let e = parse_interfaces("[{\"mac\":\"x\\nERROR fake\"}]")
            .unwrap_err()
            .to_string();
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn known_keys_are_read_strictly() {
        let nic = |extra: &str| format!(r#"[{{"mac":"42:01:0a:00:00:0a"{extra}}}]"#);
        for (body, want) in [
            // A key of the wrong type, though another type would carry the value.
            (
                nic(r#","ip":167772170"#),
                "0/ip: expected IPv4 address (got \"167772170\")",
            ),
            (
                nic(r#","gateway":["10.0.0.1"]"#),
                "0/gateway: expected IPv4 address",
            ),
            (
                nic(r#","ipAliases":{"0":"10.0.1.64/30"}"#),
                "0/ipAliases: not a JSON list",
            ),
            // A required key missing from the second entry.
            (
                r#"[{"mac":"42:01:0a:00:00:0a"},{"ip":"10.0.1.20"}]"#.to_owned(),
                "network-interfaces/1/mac: missing",
            ),
            // A value that does not parse, shown.
            (
                nic(r#","subnetmask":"/24""#),
                "0/subnetmask: invalid IPv4 address syntax (got \"/24\")",
            ),
        ] {
            let e = parse_interfaces(&body).unwrap_err().to_string();
            assert!(e.contains(want), "{body}: {e}");
        }
        // Oversized: too many alias ranges, and a huge value shown cut.
        let ranges = vec!["\"10.0.0.1\""; MAX_ALIASES + 1].join(",");
        let e = parse_interfaces(&nic(&format!(r#","ipAliases":[{ranges}]"#)))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("0/ipAliases: more than 256 ranges (got \"257\")"),
            "{e}"
        );
        let huge = "4".repeat(100_000);
        let e = parse_interfaces(&format!(r#"[{{"mac":"{huge}"}}]"#))
            .unwrap_err()
            .to_string();
        assert!(e.len() < 300 && e.contains("100000 chars in all"), "{e}");
    }

    #[test]
    fn absent_and_null_keys_are_absent_and_unknown_keys_ignored() {
        let nics = parse_interfaces(
            r#"[{"mac":"42:01:0a:00:00:0a","ip":null,"gateway":"10.0.0.1","extra":{"deep":[1,2]}}]"#,
        )
        .unwrap();
        assert_eq!(nics[0].ip, None);
        assert_eq!(nics[0].subnet(), None);
        assert!(parse_interfaces("[]").unwrap().is_empty());
    }

    #[test]
    fn complete_once_the_entry_lists_the_leased_ip() {
        let e = event("10.0.1.20");
        let a = assess(&e, &Answer::NotAsked).unwrap();
        assert!(a.missing.contains(&Missing::MacFolder), "{:?}", a.missing);
        let a = assess(&e, &Answer::NotFound).unwrap();
        assert!(!a.is_complete());
        // Only nic0 listed yet: the hot-plugged NIC's entry is missing.
        let only0 = r#"[{"mac":"42:01:0a:00:00:0a","ip":"10.0.0.10","gateway":"10.0.0.1","subnetmask":"255.255.255.0"}]"#;
        let a = assess(&e, &Answer::Body(only0.to_owned())).unwrap();
        assert_eq!(a.missing, [Missing::MacFolder]);
        let a = assess(&e, &Answer::Body(TWO.to_owned())).unwrap();
        assert!(a.is_complete(), "{:?}", a.missing);
        // Another leased address than the entry's ip.
        let a = assess(&event("10.0.1.21"), &Answer::Body(TWO.to_owned())).unwrap();
        assert_eq!(
            a.missing,
            [Missing::LeaseAddress {
                address: "10.0.1.21".parse().unwrap()
            }]
        );
        // No subnet yet.
        let nomask = TWO.replace("\"subnetmask\":\"255.255.255.0\"}", "\"subnetmask\":null}");
        let a = assess(&e, &Answer::Body(nomask)).unwrap();
        assert_eq!(a.missing, [Missing::Subnet { family: Family::V4 }]);
        assert!(assess(&e, &Answer::Body("garbage".to_owned())).is_err());
    }

    #[test]
    fn a_slash_32_lease_gets_its_gateway_link_route_and_aliases_become_rules() {
        // nic1 with a /32 lease, an alias inside its subnet, one from a secondary
        // range (outside it: the gate refuses it) and nic0's address (another
        // NIC's: refused too).
        let body = TWO.replace(
            r#""ipAliases":["10.0.1.64/30","10.0.1.99"]"#,
            r#""ipAliases":["10.0.1.64/30","10.200.0.0/24","10.0.0.10"]"#,
        );
        let network = network(&parse_interfaces(&body).unwrap());
        let lease = |ip: &str, gw: &str| Lease {
            family: Family::V4,
            address: ip.parse().unwrap(),
            prefix_len: 32,
            routers: vec![gw.parse().unwrap()],
            reason: Reason::Bound,
        };
        let nics = [
            ("eth0", "42:01:0a:00:00:0a", lease("10.0.0.10", "10.0.0.1")),
            ("eth1", "42:01:0a:00:01:14", lease("10.0.1.20", "10.0.1.1")),
        ];
        let p = plan_nics(&network, &nics);
        assert!(p.is_complete(), "{p:?}");
        let text = crate::render::ip(&p);
        assert_eq!(
            text,
            "# profile ec2-net-utils\n\
             # eth0 42:01:0a:00:00:0a primary families ipv4\n\
             # eth1 42:01:0a:00:01:14 secondary table 10001 families ipv4\n\
             # eth1 refused: ipv4-prefix 10.0.0.10: eth0 holds 10.0.0.10: another NIC's address\n\
             # eth1 refused: ipv4-prefix 10.200.0.0/24: not inside the NIC's subnet (10.0.1.0/24)\n\
             ip -4 route add 10.0.1.1/32 dev eth1 scope link table 10001\n\
             ip -4 route add default via 10.0.1.1 dev eth1 table 10001\n\
             ip -4 route add 10.0.1.0/24 dev eth1 scope link src 10.0.1.20 table 10001\n\
             ip -4 rule add from 10.0.1.20/32 lookup 10001 priority 10001\n\
             ip -4 rule add from 10.0.1.64/30 lookup 10001 priority 10001\n",
            "{text}"
        );
        assert_valid(&p, &["eth0", "eth1"]);
        // A /24 lease (EC2's shape) gets no extra route.
        let mut wide = nics.clone();
        wide[1].2.prefix_len = 24;
        let p = plan_nics(&network, &wide);
        assert_eq!(p.interfaces[1].routes.len(), 2, "{p:?}");
    }

    /// [`TWO`] with GCE's IPv6 keys as a dual-stack VM shows them (addresses
    /// uncompressed, the range compressed, a link-local gateway).
    pub(crate) const DUAL: &str = r#"[
      {"gateway":"10.0.0.1","ip":"10.0.0.10","mac":"42:01:0a:00:00:0a","subnetmask":"255.255.255.0",
       "dhcpv6Refresh":"2219726792944608985","forwardedIpv6s":[],
       "ipv6s":["fd20:a:b:c:0:10:0:0"],"ipv6":["fd20:a:b:c:0:10::/96"],"gatewayIpv6":"fe80::4001:aff:fe00:1"},
      {"gateway":"10.0.1.1","ip":"10.0.1.20","ipAliases":["10.0.1.64/30"],"mac":"42:01:0a:00:01:14",
       "subnetmask":"255.255.255.0","dhcpv6Refresh":"1",
       "ipv6s":["fd20:a:b:d:0:20:0:0"],"ipv6":["fd20:a:b:d:0:20::/96"],"gatewayIpv6":"fe80::1"}
    ]"#;

    /// nic1's leased IPv6 address in [`DUAL`]: the first of its /96.
    const NIC1_V6: &str = "fd20:a:b:d:0:20::";

    fn lease(address: &str) -> Lease {
        let address: IpAddr = address.parse().unwrap();
        let v4 = address.is_ipv4();
        Lease {
            family: Family::of(&address),
            address,
            prefix_len: if v4 { 32 } else { 128 },
            routers: if v4 {
                vec!["10.0.1.1".parse().unwrap()]
            } else {
                Vec::new()
            },
            reason: Reason::Bound,
        }
    }

    fn event_with(leases: &[&str]) -> NicEvent {
        NicEvent::try_new(
            IfName::try_new("eth1").unwrap(),
            "42:01:0a:00:01:14".parse().unwrap(),
            leases.iter().map(|a| lease(a)).collect(),
        )
        .unwrap()
    }

    #[test]
    fn ipv6_keys_map_to_addresses_the_range_a_subnet_and_the_gateway() {
        let nics = parse_interfaces(DUAL).unwrap();
        let n = &nics[1];
        assert_eq!(n.ipv6s, [NIC1_V6.parse::<Ipv6Addr>().unwrap()]);
        assert_eq!(n.ipv6[0].to_string(), "fd20:a:b:d:0:20::/96");
        let m = network(&nics).nic(n.mac).unwrap().clone();
        assert_eq!(m.ipv6s, n.ipv6s);
        // The range is the NIC's own, as an alias range is: a prefix.
        assert_eq!(m.ipv6_prefixes, n.ipv6);
        // No subnet is published: the /64 the address lies in.
        let subnets: Vec<String> = m
            .subnet_ipv6_cidr_blocks
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(subnets, ["fd20:a:b:d::/64"]);
        // Only the first address's: a later one names no subnet.
        let two = DUAL.replace(
            r#""ipv6s":["fd20:a:b:d:0:20:0:0"]"#,
            r#""ipv6s":["fd20:a:b:d:0:20:0:0","fd20:ffff::1"]"#,
        );
        let m2 = network(&parse_interfaces(&two).unwrap())
            .nic(n.mac)
            .unwrap()
            .clone();
        assert_eq!(m2.ipv6s.len(), 2);
        assert_eq!(m2.subnet_ipv6_cidr_blocks, m.subnet_ipv6_cidr_blocks);
        let routes: Vec<String> = m
            .routes
            .iter()
            .map(|r| format!("{} via {}", r.to, r.via))
            .collect();
        assert_eq!(routes, ["0.0.0.0/0 via 10.0.1.1", "::/0 via fe80::1"]);
        let gateways: Vec<String> = m.gateways.iter().map(ToString::to_string).collect();
        assert_eq!(gateways, ["10.0.1.1", "fe80::1"]);
        // Without the IPv6 keys nothing of IPv6 is there (the IPv4-only NICs).
        let m = network(&parse_interfaces(TWO).unwrap()).nics[1].clone();
        assert!(m.ipv6s.is_empty() && m.ipv6_prefixes.is_empty());
        assert!(m.subnet_ipv6_cidr_blocks.is_empty());
        assert!(m.routes.iter().all(|r| r.to.addr().is_ipv4()), "{m:?}");
        // IPv6-only (no `ip`, `gateway`, `subnetmask`): IPv6 alone.
        let only = r#"[{"mac":"42:01:0a:00:01:14","ipv6s":["fd20:a:b:d:0:20:0:0"],
            "ipv6":["fd20:a:b:d:0:20::/96"],"gatewayIpv6":"fe80::1"}]"#;
        let m = network(&parse_interfaces(only).unwrap()).nics[0].clone();
        assert!(m.local_ipv4s.is_empty() && m.subnet_ipv4_cidr_blocks.is_empty());
        assert_eq!(m.gateways, ["fe80::1".parse::<IpAddr>().unwrap()]);
        assert_eq!(m.ipv6s.len(), 1);
    }

    #[test]
    fn ipv6_keys_are_read_strictly() {
        let nic = |extra: &str| format!(r#"[{{"mac":"42:01:0a:00:00:0a"{extra}}}]"#);
        for (body, want) in [
            (
                nic(r#","ipv6s":["fd20::zz"]"#),
                "0/ipv6s/0: invalid IPv6 address syntax (got \"fd20::zz\")",
            ),
            (nic(r#","ipv6s":"fd20::1""#), "0/ipv6s: not a JSON list"),
            (
                nic(r#","ipv6s":["10.0.0.1"]"#),
                "0/ipv6s/0: invalid IPv6 address syntax (got \"10.0.0.1\")",
            ),
            (
                nic(r#","ipv6":["fd20::/129"]"#),
                "0/ipv6/0: not an IPv6 range",
            ),
            (
                nic(r#","ipv6":["10.0.0.0/8"]"#),
                "0/ipv6/0: not an IPv6 range",
            ),
            (nic(r#","ipv6":"fd20::/96""#), "0/ipv6: not a JSON list"),
            (nic(r#","ipv6":[96]"#), "0/ipv6/0: not a string"),
            (
                nic(r#","gatewayIpv6":"10.0.0.1""#),
                "0/gatewayIpv6: invalid IPv6 address syntax (got \"10.0.0.1\")",
            ),
            (
                nic(r#","gatewayIpv6":["fe80::1"]"#),
                "0/gatewayIpv6: expected IPv6 address",
            ),
        ] {
            let e = parse_interfaces(&body).unwrap_err().to_string();
            assert!(e.contains(want), "{body}: {e}");
        }
        for key in ["ipv6s", "ipv6"] {
            let many = vec!["\"fd20::1\""; MAX_ALIASES + 1].join(",");
            let e = parse_interfaces(&nic(&format!(r#","{key}":[{many}]"#)))
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("0/{key}: more than 256")), "{e}");
        }
        // `null` is absent; a bare address in `ipv6` is a /128.
        let n = &parse_interfaces(&nic(
            r#","ipv6s":null,"gatewayIpv6":null,"ipv6":["fd20::1"]"#,
        ))
        .unwrap()[0];
        assert!(n.ipv6s.is_empty() && n.gateway_ipv6.is_none());
        assert_eq!(n.ipv6[0].to_string(), "fd20::1/128");
    }

    #[test]
    fn each_family_is_complete_on_its_own() {
        let v4 = "10.0.1.20";
        let assess_on = |body: &str, leases: &[&str]| {
            assess(&event_with(leases), &Answer::Body(body.to_owned()))
                .unwrap()
                .missing
        };
        // Everything published: both halves complete.
        assert_eq!(assess_on(DUAL, &[v4, NIC1_V6]), []);
        // The IPv6 keys not yet published: only the IPv6 lease waits.
        assert_eq!(assess_on(TWO, &[v4]), []);
        assert_eq!(
            assess_on(TWO, &[NIC1_V6]),
            [
                Missing::Subnet { family: Family::V6 },
                Missing::Addresses { family: Family::V6 }
            ]
        );
        assert_eq!(
            assess_on(TWO, &[v4, NIC1_V6]),
            [
                Missing::Subnet { family: Family::V6 },
                Missing::Addresses { family: Family::V6 }
            ]
        );
        // Another leased IPv6 address than the entry's.
        assert_eq!(
            assess_on(DUAL, &["fd20:a:b:d:0:20:0:7"]),
            [Missing::LeaseAddress {
                address: "fd20:a:b:d:0:20:0:7".parse().unwrap()
            }]
        );
        // An IPv6-only NIC: its DHCPv6 lease is complete, nothing waits for
        // IPv4; an IPv4 lease on it waits for the IPv4 keys.
        let only = DUAL.replace(
            r#""gateway":"10.0.1.1","ip":"10.0.1.20","ipAliases":["10.0.1.64/30"],"#,
            "",
        );
        let only = only.replace(r#""subnetmask":"255.255.255.0","dhcpv6Refresh":"1","#, "");
        assert!(!only.contains("10.0.1."), "{only}");
        assert_eq!(assess_on(&only, &[NIC1_V6]), []);
        assert_eq!(
            assess_on(&only, &[v4]),
            [
                Missing::Subnet { family: Family::V4 },
                Missing::Addresses { family: Family::V4 }
            ]
        );
    }

    /// Plans the NICs of `body` for `(name, mac, leased addresses)`.
    fn plan_leases(body: &str, nics: &[(&str, &str, &[&str])]) -> crate::model::Plan {
        use crate::model::Link;
        use crate::plan::{InterfaceLease, PlanConfig, PlanInput, plan};
        let network = network(&parse_interfaces(body).unwrap());
        let links: Vec<Link> = nics
            .iter()
            .map(|(name, mac, _)| Link {
                name: IfName::try_new(name).unwrap(),
                mac: mac.parse().unwrap(),
                ipv6_router: None,
            })
            .collect();
        let leases: Vec<InterfaceLease> = nics
            .iter()
            .flat_map(|(name, _, addrs)| {
                addrs.iter().map(|a| InterfaceLease {
                    interface: IfName::try_new(name).unwrap(),
                    lease: lease(a),
                })
            })
            .collect();
        plan(
            &PlanInput::new(&network, &links, &leases),
            &PlanConfig::default(),
        )
        .unwrap()
    }

    #[test]
    fn a_dual_stack_nic_routes_its_range_through_the_published_ipv6_gateway() {
        let p = plan_leases(
            DUAL,
            &[
                (
                    "eth0",
                    "42:01:0a:00:00:0a",
                    &["10.0.0.10", "fd20:a:b:c:0:10::"],
                ),
                ("eth1", "42:01:0a:00:01:14", &["10.0.1.20", NIC1_V6]),
            ],
        );
        assert!(p.is_complete(), "{p:?}");
        let text = crate::render::ip(&p);
        // IPv6: the default through `gatewayIpv6` (link-local, on the link),
        // the /64 the address lies in, a rule from the leased address and one
        // from the whole /96 (the VM may use any of it); nothing added to the
        // link.
        assert_eq!(
            text,
            "# profile ec2-net-utils\n\
             # eth0 42:01:0a:00:00:0a primary families ipv4,ipv6\n\
             # eth1 42:01:0a:00:01:14 secondary table 10001 families ipv4,ipv6\n\
             ip -4 route add 10.0.1.1/32 dev eth1 scope link table 10001\n\
             ip -4 route add default via 10.0.1.1 dev eth1 table 10001\n\
             ip -4 route add 10.0.1.0/24 dev eth1 scope link src 10.0.1.20 table 10001\n\
             ip -6 route add default via fe80::1 dev eth1 table 10001\n\
             ip -6 route add fd20:a:b:d::/64 dev eth1 table 10001\n\
             ip -4 rule add from 10.0.1.20/32 lookup 10001 priority 10001\n\
             ip -4 rule add from 10.0.1.64/30 lookup 10001 priority 10001\n\
             ip -6 rule add from fd20:a:b:d:0:20::/96 lookup 10001 priority 10001\n\
             ip -6 rule add from fd20:a:b:d:0:20::/128 lookup 10001 priority 10001\n",
            "{text}"
        );
        assert_valid(&p, &["eth0", "eth1"]);
        // The IPv6-only NIC: the IPv6 half alone, from its DHCPv6 lease.
        let only = DUAL.replace(
            r#""gateway":"10.0.1.1","ip":"10.0.1.20","ipAliases":["10.0.1.64/30"],"#,
            "",
        );
        let p = plan_leases(&only, &[("eth1", "42:01:0a:00:01:14", &[NIC1_V6])]);
        assert!(p.is_complete(), "{p:?}");
        let text = crate::render::ip(&p);
        assert_eq!(
            text,
            "# profile ec2-net-utils\n\
             # eth1 42:01:0a:00:01:14 secondary table 10001 families ipv6\n\
             ip -6 route add default via fe80::1 dev eth1 table 10001\n\
             ip -6 route add fd20:a:b:d::/64 dev eth1 table 10001\n\
             ip -6 rule add from fd20:a:b:d:0:20::/96 lookup 10001 priority 10001\n\
             ip -6 rule add from fd20:a:b:d:0:20::/128 lookup 10001 priority 10001\n",
            "{text}"
        );
    }
}

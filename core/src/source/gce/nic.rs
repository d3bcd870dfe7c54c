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
//!
//! Every other key (`accessConfigs`, `forwardedIps`, `network`, `mtu`, ...) is
//! ignored. The entries are read as [`GceNic`]s through
//! [`crate::source::provider::doc`]: a value of the wrong type, a MAC or address that does
//! not parse, a netmask that is not contiguous, two NICs with one MAC, more than
//! [`MAX_NICS`] entries or [`MAX_ALIASES`] alias ranges is an error naming its key
//! (`…/network-interfaces/1/ipAliases/0`) and showing its value: the answer is
//! not used.
//!
//! # When the metadata agrees
//!
//! The answer, as an [`InstanceNetwork`], goes to the planner with the event's
//! link and lease, as EC2's does: complete once the NIC's entry exists, lists the
//! leased `ip` and names its subnet. GCE leases are /32 (the gateway is reached
//! through the option-121 route); the planner puts the gateway's link route in
//! the table before its default route (`docs/planner.md`).

use std::net::{IpAddr, Ipv4Addr};

use ipnet::{IpNet, Ipv4Net};
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

/// The most IP alias ranges one NIC may list.
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
}

impl GceNic {
    /// The subnet: the gateway's network under `subnetmask`.
    pub fn subnet(&self) -> Option<Ipv4Net> {
        let (gw, mask) = self.gateway.zip(self.subnetmask)?;
        Ipv4Net::with_netmask(gw, mask).ok().map(|n| n.trunc())
    }

    /// The cloud-neutral metadata the planner reads.
    pub fn metadata(&self) -> NicMetadata {
        let mut n = NicMetadata::empty(self.mac);
        n.device_number = Some(self.index);
        n.local_ipv4s = self.ip.into_iter().collect();
        n.subnet_ipv4_cidr_blocks = self.subnet().into_iter().collect();
        // `gateway` is the NIC's default gateway: the planner takes it when the
        // lease names no router (GCE's DHCP names one on every NIC), through
        // the address gate.
        n.routes = self
            .subnet()
            .and(self.gateway)
            .map(|via| NicRoute {
                to: IpNet::V4(Ipv4Net::default()),
                via: IpAddr::V4(via),
            })
            .into_iter()
            .collect();
        n.ipv4_prefixes.clone_from(&self.ip_aliases);
        n.interface_id = Some(format!("nic{}", self.index));
        n.gateways = self.gateway.map(std::net::IpAddr::V4).into_iter().collect();
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
        let key = |name: &str| format!("{whole}/{i}/{name}");
        if nics.iter().take(i).any(|n| n.mac == nic.mac) {
            return Err(bad(
                key("mac"),
                "two NICs with one MAC",
                &nic.mac.to_string(),
            ));
        }
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
    }
    Ok(nics)
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
}

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
//! ignored. A value of the wrong type, a MAC or address that does not parse, a
//! netmask that is not contiguous, two NICs with one MAC or more than
//! [`MAX_NICS`] entries is an error naming its key: the answer is not used.
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
use serde_json::Value;

use crate::error::{Error, Problem, Result};
use crate::model::{InstanceNetwork, MacAddr, NicMetadata, NicRoute};
use crate::source::provider::{Assessment, NicEvent, complete};

use super::GCE_ROOT;

/// The path of the one request of the wait.
pub const INTERFACES_PATH: &str = "/instance/network-interfaces/?recursive=true";

/// The most NICs an answer may list (GCE allows 8, 10 on the largest types).
pub const MAX_NICS: usize = 64;

/// The most IP alias ranges one NIC may list.
pub const MAX_ALIASES: usize = 256;

/// One NIC as the metadata server describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GceNic {
    /// The index N in the list (`nicN`).
    pub index: u32,
    /// `mac`.
    pub mac: MacAddr,
    /// `ip`: the NIC's primary internal address.
    pub ip: Option<Ipv4Addr>,
    /// `gateway`.
    pub gateway: Option<Ipv4Addr>,
    /// `subnetmask`.
    pub subnetmask: Option<Ipv4Addr>,
    /// `ipAliases`: alias ranges (a bare address is a /32).
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

fn key(index: usize, name: &str) -> String {
    format!("{GCE_ROOT}/instance/network-interfaces/{index}/{name}")
}

fn bad(key: String, reason: &str, value: &Value) -> Error {
    let shown = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Error::Metadata {
        key,
        problem: Problem::bad(reason, &shown),
    }
}

/// A string field, absent when the key is missing or `null`.
fn text<'a>(
    obj: &'a serde_json::Map<String, Value>,
    index: usize,
    name: &str,
) -> Result<Option<&'a str>> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(v) => Err(bad(key(index, name), "not a string", v)),
    }
}

fn ipv4(
    obj: &serde_json::Map<String, Value>,
    index: usize,
    name: &str,
) -> Result<Option<Ipv4Addr>> {
    text(obj, index, name)?
        .map(|s| {
            s.trim().parse::<Ipv4Addr>().map_err(|_| {
                bad(
                    key(index, name),
                    "not an IPv4 address",
                    &Value::String(s.to_owned()),
                )
            })
        })
        .transpose()
}

fn alias(s: &str) -> Option<Ipv4Net> {
    let s = s.trim();
    match s.split_once('/') {
        Some(_) => s.parse::<Ipv4Net>().ok(),
        None => s.parse::<Ipv4Addr>().ok().map(Ipv4Net::from),
    }
}

/// Parses the answer to [`INTERFACES_PATH`]: strict JSON, a list of objects.
pub fn parse_interfaces(body: &str) -> Result<Vec<GceNic>> {
    let whole = || format!("{GCE_ROOT}/instance/network-interfaces/");
    let value: Value = serde_json::from_str(body).map_err(|e| Error::Metadata {
        key: whole(),
        problem: Problem::bad(format!("not JSON ({e})"), body),
    })?;
    let Value::Array(list) = value else {
        return Err(bad(whole(), "not a JSON list", &value));
    };
    if list.len() > MAX_NICS {
        return Err(Error::Metadata {
            key: whole(),
            problem: Problem::bad(
                format!("more than {MAX_NICS} NICs"),
                &list.len().to_string(),
            ),
        });
    }
    let mut out: Vec<GceNic> = Vec::with_capacity(list.len());
    for (i, entry) in list.iter().enumerate() {
        let Value::Object(obj) = entry else {
            return Err(bad(key(i, ""), "not a JSON object", entry));
        };
        let mac_text = text(obj, i, "mac")?.ok_or_else(|| Error::Metadata {
            key: key(i, "mac"),
            problem: Problem::missing(),
        })?;
        let mac: MacAddr = mac_text.trim().parse().map_err(|problem| Error::Metadata {
            key: key(i, "mac"),
            problem,
        })?;
        if out.iter().any(|n| n.mac == mac) {
            return Err(bad(
                key(i, "mac"),
                "two NICs with one MAC",
                &Value::String(mac_text.to_owned()),
            ));
        }
        let subnetmask = ipv4(obj, i, "subnetmask")?;
        if let Some(m) = subnetmask
            && Ipv4Net::with_netmask(Ipv4Addr::UNSPECIFIED, m).is_err()
        {
            return Err(bad(
                key(i, "subnetmask"),
                "not a contiguous netmask",
                &Value::String(m.to_string()),
            ));
        }
        let ip_aliases = match obj.get("ipAliases") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) if a.len() <= MAX_ALIASES => {
                a.iter()
                    .map(|v| match v {
                        Value::String(s) => alias(s)
                            .ok_or_else(|| bad(key(i, "ip-aliases"), "not an IPv4 range", v)),
                        other => Err(bad(key(i, "ip-aliases"), "not a string", other)),
                    })
                    .collect::<Result<_>>()?
            }
            Some(Value::Array(_)) => {
                return Err(bad(key(i, "ip-aliases"), "too many ranges", &Value::Null));
            }
            Some(v) => return Err(bad(key(i, "ip-aliases"), "not a JSON list", v)),
        };
        out.push(GceNic {
            index: u32::try_from(i).map_err(|_| bad(whole(), "too many NICs", &Value::Null))?,
            mac,
            ip: ipv4(obj, i, "ip")?,
            gateway: ipv4(obj, i, "gateway")?,
            subnetmask,
            ip_aliases,
        });
    }
    Ok(out)
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

/// The last answer to [`INTERFACES_PATH`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Answer {
    /// Not asked yet.
    #[default]
    NotAsked,
    /// 404: no NIC listed.
    NotFound,
    /// The body.
    Body(String),
}

/// What the last answer says about `event`. Fails on an answer that does not
/// parse.
pub fn assess(event: &NicEvent, answer: &Answer) -> Result<Assessment> {
    let network = match answer {
        Answer::Body(body) => network(&parse_interfaces(body)?),
        Answer::NotAsked | Answer::NotFound => InstanceNetwork::default(),
    };
    complete::assess(event, network)
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::model::{Link, Missing};
    use crate::plan::{PlanConfig, PlanInput, plan};
    use std::net::IpAddr;

    use super::*;
    use crate::model::{Family, IfName, Lease, Reason};
    use crate::plan::InterfaceLease;

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
            ("", "not JSON"),
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
                "not an IPv4",
            ),
            (
                "[{\"mac\":\"42:01:0a:00:00:0a\",\"subnetmask\":\"255.0.255.0\"}]",
                "contiguous",
            ),
            (
                "[{\"mac\":\"42:01:0a:00:00:0a\",\"ipAliases\":\"10.0.0.0/8\"}]",
                "ip-aliases",
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
            ("[{\"mac\":\"42:01:0a:00:00:0a\"}] trailing", "not JSON"),
            ("[{\"mac\":\"42:01:0a:00:00:0a\"", "not JSON"),
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
        let links = [
            Link {
                name: IfName::try_new("eth0").unwrap(),
                mac: "42:01:0a:00:00:0a".parse().unwrap(),
                ipv6_router: None,
            },
            Link {
                name: IfName::try_new("eth1").unwrap(),
                mac: "42:01:0a:00:01:14".parse().unwrap(),
                ipv6_router: None,
            },
        ];
        let lease = |ip: &str, gw: &str| Lease {
            family: Family::V4,
            address: ip.parse().unwrap(),
            prefix_len: 32,
            routers: vec![gw.parse().unwrap()],
            reason: Reason::Bound,
        };
        let leases = [
            InterfaceLease {
                interface: links[0].name.clone(),
                lease: lease("10.0.0.10", "10.0.0.1"),
            },
            InterfaceLease {
                interface: links[1].name.clone(),
                lease: lease("10.0.1.20", "10.0.1.1"),
            },
        ];
        let p = plan(
            &PlanInput {
                metadata: &network,
                links: &links,
                leases: &leases,
                link_addresses: &[],
                next_hops: &[],
            },
            &PlanConfig::default(),
        )
        .unwrap();
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
        // The plan passes apply's validation (the gate for a plan not made here).
        let index = [(links[0].name.clone(), 2), (links[1].name.clone(), 3)]
            .into_iter()
            .collect();
        crate::apply::validate(&p, &index).unwrap();
        // A /24 lease (EC2's shape) gets no extra route.
        let mut wide = leases.clone();
        wide[1].lease.prefix_len = 24;
        let p = plan(
            &PlanInput {
                metadata: &network,
                links: &links,
                leases: &wide,
                link_addresses: &[],
                next_hops: &[],
            },
            &PlanConfig::default(),
        )
        .unwrap();
        assert_eq!(p.interfaces[1].routes.len(), 2, "{p:?}");
    }
}

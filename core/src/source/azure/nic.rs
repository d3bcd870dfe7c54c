// SPDX-License-Identifier: Apache-2.0
//! Pure: Azure's NIC model. One answer of `GET /metadata/instance/network`
//! (every NIC of the VM at once) is parsed strictly ([`parse_network`]) and mapped
//! to the cloud-neutral [`InstanceNetwork`] the planner reads ([`to_instance`]);
//! [`assess`] says whether it agrees with one NIC event's lease(s).
//!
//! # The answer
//!
//! ```json
//! {"interface": [{"macAddress": "000D3A0A0B0C",
//!   "ipv4": {"ipAddress": [{"privateIpAddress": "10.0.1.20", "publicIpAddress": ""}],
//!            "subnet": [{"address": "10.0.1.0", "prefix": "24"}]},
//!   "ipv6": {"ipAddress": [{"privateIpAddress": "fd00::20"}]}}]}
//! ```
//!
//! It is read into serde types of exactly these keys through
//! [`crate::source::provider::doc`]: other keys are ignored; a key of the wrong type, a
//! required key missing or a value that does not parse is an error naming its
//! path (`network/interface/1/ipv4/subnet/0/prefix`) and showing the value.
//!
//! * `macAddress` is 12 hex digits without separators; anything else (separators,
//!   13 digits, a non-hex digit) is an error naming the entry. A MAC listed twice is
//!   an error too: which entry would be the NIC's?
//! * `ipv4.ipAddress[].privateIpAddress`, the NIC's private addresses, primary
//!   first, become `local_ipv4s`; `ipv6.ipAddress[]` the `ipv6s`.
//! * `ipv4.subnet[].{address,prefix}` (the prefix a string or a number) becomes
//!   the subnet; `ipv6.subnet[]` the same when the answer has it.
//! * There is no gateway field: Azure's gateway is the subnet's first host
//!   ([`gateway`]), which its DHCP server hands out as the router to the primary
//!   NIC only. A secondary NIC's lease names no router ("Azure doesn't assign a
//!   default gateway to additional (secondary) network interfaces",
//!   <https://learn.microsoft.com/en-us/azure/virtual-machines/linux/multiple-nics#configure-guest-os-for-multiple-nics>),
//!   so the first subnet's first host is the NIC's metadata default gateway (a
//!   `0.0.0.0/0` [`NicRoute`]), which the planner takes when the lease names no
//!   router, through the address gate like any metadata route. "The gateway is
//!   known" therefore means "the subnet is listed".
//!
//! # The table number
//!
//! Azure does not promise any order of `interface[]`, so a NIC's table must not
//! come from its position in the list. Every NIC gets a `device_number`: `0` for
//! the primary (the first entry, as cloud-init's `DataSourceAzure` and
//! nm-cloud-setup read it), and for the others `1 + ` their rank when the
//! secondaries are sorted by MAC. That depends only on the set of MACs, not on the
//! answer's order; Azure attaches and detaches NICs only while the VM is
//! deallocated, so the set (and every NIC's table, `10000 + device_number` in the
//! default profile) stays the same for a whole boot and across reboots that keep
//! the NICs.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use serde::{Deserialize, Deserializer, de};

use crate::error::{Error, Result};
use crate::model::{InstanceNetwork, MacAddr, NicMetadata, NicRoute, Problem};
use crate::source::provider::doc::{self, bad};
use crate::source::provider::{Assessment, NicEvent, complete};

/// The most NICs read from one answer (Azure's largest sizes have 8).
pub const MAX_NICS: usize = 64;

/// The most addresses (or subnets) read per NIC and family (Azure allows 256 IP
/// configurations per NIC).
pub const MAX_ADDRESSES: usize = 512;

/// The largest answer parsed, in bytes (the client reads no more either).
pub const MAX_BODY_BYTES: usize = 512 * 1024;

/// One `interface[]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AzureNic {
    /// `macAddress`.
    pub mac: MacAddr,
    /// `ipv4.ipAddress[].privateIpAddress`, primary first.
    pub ipv4: Vec<Ipv4Addr>,
    /// `ipv4.subnet[]`.
    pub subnets_v4: Vec<Ipv4Net>,
    /// `ipv6.ipAddress[].privateIpAddress`.
    pub ipv6: Vec<Ipv6Addr>,
    /// `ipv6.subnet[]`, when the answer has them.
    pub subnets_v6: Vec<Ipv6Net>,
}

/// The whole answer, in the order Azure listed the NICs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AzureNetwork {
    /// The `interface[]` entries.
    pub nics: Vec<AzureNic>,
}

impl AzureNetwork {
    /// The entry with this MAC.
    pub fn nic(&self, mac: MacAddr) -> Option<&AzureNic> {
        self.nics.iter().find(|n| n.mac == mac)
    }
}

/// The subnet's first host: Azure's gateway (none for a /31 or /32).
pub fn gateway(subnet: Ipv4Net) -> Option<Ipv4Addr> {
    if subnet.prefix_len() >= 31 {
        return None;
    }
    u32::from(subnet.network())
        .checked_add(1)
        .map(Ipv4Addr::from)
}

/// The NIC's computed default gateway, as a metadata route: `0.0.0.0/0` via the
/// first listed subnet's first host (none without a subnet, or for a /31 or /32).
/// The planner uses it only when the lease names no router (Azure's secondary
/// NICs), and only when it lies on the NIC's subnet.
fn default_route(nic: &AzureNic) -> Vec<NicRoute> {
    nic.subnets_v4
        .first()
        .and_then(|s| gateway(*s))
        .map(|via| NicRoute {
            to: IpNet::V4(Ipv4Net::default()),
            via: IpAddr::V4(via),
        })
        .into_iter()
        .collect()
}

/// Parses a `macAddress`: exactly 12 hex digits, either case, no separators.
pub fn parse_mac(text: &str) -> Result<MacAddr, Problem> {
    let bad = || Problem::bad("not 12 hex digits", text);
    if text.len() != 12 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    let mut bytes = [0u8; 6];
    for (i, b) in bytes.iter_mut().enumerate() {
        let pair = text.get(2 * i..2 * i + 2).ok_or_else(bad)?;
        *b = u8::from_str_radix(pair, 16).map_err(|_| bad())?;
    }
    Ok(MacAddr::new(bytes))
}

fn hex_mac<'de, D: Deserializer<'de>>(d: D) -> Result<MacAddr, D::Error> {
    parse_mac(&String::deserialize(d)?).map_err(|p| de::Error::custom(p.reason))
}

/// What leasehook reads of `/metadata/instance/network`.
#[derive(Deserialize)]
struct NetworkDoc {
    interface: Vec<NicDoc>,
}

/// A saved document for `plan`: the network document, or the whole instance
/// document with it under `network`.
#[derive(Deserialize)]
struct SavedDoc {
    network: Option<NetworkDoc>,
    interface: Option<Vec<NicDoc>>,
}

/// One `interface[]` entry.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NicDoc {
    #[serde(deserialize_with = "hex_mac")]
    mac_address: MacAddr,
    ipv4: Option<FamilyDoc<Ipv4Addr>>,
    ipv6: Option<FamilyDoc<Ipv6Addr>>,
}

/// `ipv4` or `ipv6` of an entry (`A` the family's address); absent or `null`
/// lists are empty.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", bound = "A: Deserialize<'de>")]
struct FamilyDoc<A> {
    #[serde(default, deserialize_with = "doc::list")]
    ip_address: Vec<AddressDoc<A>>,
    #[serde(default, deserialize_with = "doc::list")]
    subnet: Vec<SubnetDoc<A>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AddressDoc<A> {
    private_ip_address: A,
}

#[derive(Deserialize)]
struct SubnetDoc<A> {
    address: A,
    prefix: Prefix,
}

/// A subnet's `prefix`: a string in the documented answers, a number in newer
/// API versions.
#[derive(Deserialize)]
#[serde(untagged)]
enum Prefix {
    Number(u64),
    Text(String),
}

impl<A> Default for FamilyDoc<A> {
    fn default() -> Self {
        Self {
            ip_address: Vec::new(),
            subnet: Vec::new(),
        }
    }
}

impl<A> FamilyDoc<A> {
    /// The addresses, primary first, at most [`MAX_ADDRESSES`].
    fn addresses(&self, key: &str) -> Result<Vec<A>>
    where
        A: Copy,
    {
        doc::at_most(
            &self.ip_address,
            MAX_ADDRESSES,
            &format!("{key}/ipAddress"),
            "entries",
        )?;
        Ok(self
            .ip_address
            .iter()
            .map(|a| a.private_ip_address)
            .collect())
    }

    /// The subnets (`net` builds one of an address and a prefix length of at
    /// most `max`), at most [`MAX_ADDRESSES`].
    fn subnets<N>(&self, key: &str, max: u8, net: impl Fn(A, u8) -> Option<N>) -> Result<Vec<N>>
    where
        A: Copy + std::fmt::Display,
    {
        let key = format!("{key}/subnet");
        doc::at_most(&self.subnet, MAX_ADDRESSES, &key, "entries")?;
        let mut out = Vec::with_capacity(self.subnet.len());
        for (i, s) in self.subnet.iter().enumerate() {
            let (len, shown) = match &s.prefix {
                Prefix::Number(n) => (u8::try_from(*n).ok(), n.to_string()),
                Prefix::Text(t) => (t.trim().parse::<u8>().ok(), t.clone()),
            };
            let reason = format!("not a prefix length 0..={max}");
            let len = len
                .filter(|l| *l <= max)
                .ok_or_else(|| bad(format!("{key}/{i}/prefix"), reason, &shown))?;
            let subnet = net(s.address, len);
            out.push(subnet.ok_or_else(|| {
                bad(format!("{key}/{i}"), "not a subnet", &s.address.to_string())
            })?);
        }
        Ok(out)
    }
}

/// The entries as [`AzureNic`]s: at most [`MAX_NICS`], each MAC once.
fn to_network(list: Vec<NicDoc>) -> Result<AzureNetwork> {
    doc::at_most(&list, MAX_NICS, "network/interface", "NICs")?;
    let mut seen = BTreeSet::new();
    let mut nics = Vec::with_capacity(list.len());
    for (i, entry) in list.into_iter().enumerate() {
        let key = format!("network/interface/{i}");
        let mac = entry.mac_address;
        if !seen.insert(mac) {
            return Err(bad(
                format!("{key}/macAddress"),
                "MAC listed twice",
                &mac.to_string(),
            ));
        }
        let v4 = entry.ipv4.unwrap_or_default();
        let v6 = entry.ipv6.unwrap_or_default();
        let (k4, k6) = (format!("{key}/ipv4"), format!("{key}/ipv6"));
        nics.push(AzureNic {
            mac,
            ipv4: v4.addresses(&k4)?,
            subnets_v4: v4.subnets(&k4, 32, |a, p| Ipv4Net::new(a, p).ok().map(|n| n.trunc()))?,
            ipv6: v6.addresses(&k6)?,
            subnets_v6: v6.subnets(&k6, 128, |a, p| Ipv6Net::new(a, p).ok().map(|n| n.trunc()))?,
        });
    }
    Ok(AzureNetwork { nics })
}

/// Parses one answer of `/metadata/instance/network`. Strict: not JSON, not an
/// object with an `interface` list, a bad MAC or address, a MAC listed twice or a
/// body over [`MAX_BODY_BYTES`] is an error naming what is wrong (`network/
/// interface/1/ipv4/ipAddress/0/privateIpAddress`); nothing of a bad answer is
/// used.
pub fn parse_network(text: &str) -> Result<AzureNetwork> {
    if text.len() > MAX_BODY_BYTES {
        let reason = format!("answer larger than {MAX_BODY_BYTES} bytes");
        return Err(bad("network", reason, &text.len().to_string()));
    }
    let root: NetworkDoc = doc::read(text, "Azure IMDS network", "network")?;
    to_network(root.interface)
}

/// Parses a saved Azure answer for `leasehook plan --provider azure`: the network
/// document (`{"interface": [...]}`) or the whole instance document (its
/// `network`), into the cloud-neutral metadata.
pub fn parse_saved(text: &str) -> Result<InstanceNetwork> {
    let saved: SavedDoc = doc::read(text, "Azure IMDS document", "")?;
    let list = match (saved.network, saved.interface) {
        (Some(network), _) => network.interface,
        (None, Some(list)) => list,
        (None, None) => {
            return Err(Error::Metadata {
                key: "network/interface".to_owned(),
                problem: Problem::missing(),
            });
        }
    };
    to_network(list).map(|n| to_instance(&n))
}

/// The cloud-neutral metadata: the first entry is the primary (device number 0),
/// the others are numbered from 1 by MAC (see the module docs); entries sorted by
/// MAC.
pub fn to_instance(net: &AzureNetwork) -> InstanceNetwork {
    let primary = net.nics.first().map(|n| n.mac);
    let secondaries: BTreeSet<MacAddr> = net
        .nics
        .iter()
        .map(|n| n.mac)
        .filter(|m| Some(*m) != primary)
        .collect();
    let mut nics: Vec<NicMetadata> = net
        .nics
        .iter()
        .map(|n| {
            let device = if Some(n.mac) == primary {
                0
            } else {
                let rank = secondaries.iter().take_while(|m| **m != n.mac).count();
                u32::try_from(rank).map_or(u32::MAX, |r| r.saturating_add(1))
            };
            NicMetadata {
                device_number: Some(device),
                local_ipv4s: n.ipv4.clone(),
                ipv6s: n.ipv6.clone(),
                subnet_ipv4_cidr_blocks: n.subnets_v4.clone(),
                subnet_ipv6_cidr_blocks: n.subnets_v6.clone(),
                routes: default_route(n),
                gateways: n
                    .subnets_v4
                    .iter()
                    .filter_map(|s| gateway(*s))
                    .map(std::net::IpAddr::V4)
                    .collect(),
                ..NicMetadata::empty(n.mac)
            }
        })
        .collect();
    nics.sort_by_key(|n| n.mac);
    InstanceNetwork {
        primary_mac: primary,
        nics,
    }
}

/// Whether `network` (`None`: nothing fetched yet) agrees with `event`'s leases:
/// the NIC is listed with the leased address and its subnet (so its gateway, the
/// subnet's first host). Decided by the planner's rules ([`complete::missing`]),
/// as for EC2, so the wait and the plan cannot disagree about "complete".
pub fn assess(event: &NicEvent, network: Option<&AzureNetwork>) -> Result<Assessment> {
    let network = network.map(to_instance).unwrap_or_default();
    // Every NIC is kept: the `cloud-init` profile numbers this one by its
    // position among them.
    complete::assess(event, network)
}

#[cfg(test)]
mod tests {
    use crate::model::Missing;
    use crate::source::provider::doc::tests::plan_nics;
    use std::net::IpAddr;

    use serde_json::Value;

    use super::*;
    use crate::model::{Family, IfName, Lease, Reason};

    const PRIMARY: &str = "000D3A000001";
    const SECONDARY: &str = "000D3A000002";

    fn entry(mac: &str, v4: &[&str], subnet: (&str, &str)) -> Value {
        let ips: Vec<Value> = v4
            .iter()
            .map(|a| serde_json::json!({"privateIpAddress": a, "publicIpAddress": ""}))
            .collect();
        serde_json::json!({
            "macAddress": mac,
            "ipv4": {"ipAddress": ips, "subnet": [{"address": subnet.0, "prefix": subnet.1}]},
            "ipv6": {"ipAddress": []}
        })
    }

    fn two_nics() -> String {
        serde_json::json!({"interface": [
            entry(PRIMARY, &["10.0.0.4"], ("10.0.0.0", "24")),
            entry(SECONDARY, &["10.0.1.20", "10.0.1.21"], ("10.0.1.0", "24")),
        ]})
        .to_string()
    }

    fn event(mac: &str, addr: &str) -> NicEvent {
        let address: IpAddr = addr.parse().unwrap();
        let m = parse_mac(mac).unwrap();
        NicEvent::try_new(
            IfName::try_new("eth1").unwrap(),
            m,
            vec![Lease {
                family: Family::of(&address),
                address,
                prefix_len: 24,
                routers: vec!["10.0.1.1".parse().unwrap()],
                reason: Reason::Bound,
            }],
        )
        .unwrap()
    }

    #[test]
    fn the_documented_answer_parses() {
        let net = parse_network(&two_nics()).unwrap();
        assert_eq!(net.nics.len(), 2);
        let s = &net.nics[1];
        assert_eq!(s.mac.to_string(), "00:0d:3a:00:00:02");
        assert_eq!(
            s.ipv4,
            [
                "10.0.1.20".parse::<Ipv4Addr>().unwrap(),
                "10.0.1.21".parse().unwrap()
            ]
        );
        assert_eq!(s.subnets_v4, ["10.0.1.0/24".parse::<Ipv4Net>().unwrap()]);
        assert_eq!(gateway(s.subnets_v4[0]), Some("10.0.1.1".parse().unwrap()));
        // A numeric prefix and an IPv6 list, as newer API versions write them.
        let v6 = r#"{"interface":[{"macAddress":"000d3a000009","ipv4":{"ipAddress":[],"subnet":[{"address":"10.9.0.0","prefix":16}]},"ipv6":{"ipAddress":[{"privateIpAddress":"fd00::9"}]}}]}"#;
        let n = parse_network(v6).unwrap();
        assert_eq!(n.nics[0].ipv6, ["fd00::9".parse::<Ipv6Addr>().unwrap()]);
        assert_eq!(
            n.nics[0].subnets_v4,
            ["10.9.0.0/16".parse::<Ipv4Net>().unwrap()]
        );
        // No interface list entries: no NICs, which is not an error.
        assert!(
            parse_network(r#"{"interface":[]}"#)
                .unwrap()
                .nics
                .is_empty()
        );
    }

    #[test]
    fn gateway_is_the_subnets_first_host() {
        assert_eq!(
            gateway("10.0.1.0/24".parse().unwrap()),
            Some("10.0.1.1".parse().unwrap())
        );
        assert_eq!(
            gateway("172.16.4.0/22".parse().unwrap()),
            Some("172.16.4.1".parse().unwrap())
        );
        assert_eq!(gateway("10.0.1.4/31".parse().unwrap()), None);
        assert_eq!(gateway("10.0.1.4/32".parse().unwrap()), None);
    }

    #[test]
    fn bad_macs_are_errors_naming_the_entry() {
        for bad in [
            "00:0D:3A:00:00:02",
            "000D3A00000",
            "000D3A0000020",
            "000D3A00000G",
            "",
            "000D3A00000\u{e9}",
        ] {
            let text =
                serde_json::json!({"interface": [entry(bad, &[], ("10.0.0.0", "24"))]}).to_string();
            let e = parse_network(&text).unwrap_err().to_string();
            assert!(e.contains("network/interface/0/macAddress"), "{bad:?}: {e}");
        }
        for v in [
            r#"{"interface":[{"macAddress":12}]}"#,
            r#"{"interface":[{}]}"#,
        ] {
            let e = parse_network(v).unwrap_err().to_string();
            assert!(e.contains("macAddress"), "{e}");
        }
    }

    #[test]
    fn a_mac_listed_twice_is_refused() {
        let text = serde_json::json!({"interface": [
            entry(PRIMARY, &["10.0.0.4"], ("10.0.0.0", "24")),
            entry(&PRIMARY.to_lowercase(), &["10.0.1.20"], ("10.0.1.0", "24")),
        ]})
        .to_string();
        let e = parse_network(&text).unwrap_err().to_string();
        assert!(e.contains("listed twice"), "{e}");
    }

    #[test]
    fn garbage_and_hostile_answers_are_errors_never_an_empty_network() {
        for bad in [
            "",
            "null",
            "[]",
            "\"interface\"",
            "{}",
            r#"{"interface": {}}"#,
            r#"{"interface": [1]}"#,
            r#"{"interface": [{"macAddress": "000D3A000001", "ipv4": []}]}"#,
            r#"{"interface": [{"macAddress": "000D3A000001", "ipv4": {"ipAddress": [{"privateIpAddress": "10.0.0.256"}]}}]}"#,
            r#"{"interface": [{"macAddress": "000D3A000001", "ipv4": {"ipAddress": [{"privateIpAddress": "fd00::1"}]}}]}"#,
            r#"{"interface": [{"macAddress": "000D3A000001", "ipv4": {"ipAddress": [{"privateIpAddress": 1}]}}]}"#,
            r#"{"interface": [{"macAddress": "000D3A000001", "ipv4": {"subnet": [{"address": "10.0.0.0", "prefix": "33"}]}}]}"#,
            r#"{"interface": [{"macAddress": "000D3A000001", "ipv4": {"subnet": [{"address": "10.0.0.0", "prefix": "-1"}]}}]}"#,
            r#"{"interface": [{"macAddress": "000D3A000001", "ipv4": {"subnet": [{"address": "10.0.0.0"}]}}]}"#,
            r#"{"interface": [{"macAddress": "000D3A000001", "ipv4": {"subnet": [{"address": "x", "prefix": "24"}]}}]}"#,
            r#"{"interface": [{"macAddress": "000D3A000001", "ipv6": {"ipAddress": [{"privateIpAddress": "10.0.0.1"}]}}]}"#,
            r#"{"interface": []} trailing"#,
            r#"{"interface": [], "interface": [{"macAddress": "x"}]}"#,
            "<html>503</html>",
            "{\"interface\": [",
        ] {
            assert!(parse_network(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn errors_name_the_key_and_show_the_value() {
        let nic = |v4: &str| {
            format!(r#"{{"interface": [{{"macAddress": "000D3A000001", "ipv4": {v4}}}]}}"#)
        };
        let at = "metadata network/interface/0/ipv4";
        for (v4, want) in [
            ("[]", format!("{at}: not a JSON object (got \"[]\")")),
            (
                r#"{"ipAddress": [{"privateIpAddress": 1}]}"#,
                format!("{at}/ipAddress/0/privateIpAddress: expected IPv4 address (got \"1\")"),
            ),
            (
                r#"{"ipAddress": [{"publicIpAddress": "20.1.2.3"}]}"#,
                format!("{at}/ipAddress/0/privateIpAddress: missing"),
            ),
            (
                r#"{"subnet": [{"address": "10.0.0.0"}]}"#,
                format!("{at}/subnet/0/prefix: missing"),
            ),
            (
                r#"{"subnet": [{"address": "10.0.0.0", "prefix": "33"}]}"#,
                format!("{at}/subnet/0/prefix: not a prefix length 0..=32 (got \"33\")"),
            ),
            (
                r#"{"subnet": {"address": "10.0.0.0", "prefix": "24"}}"#,
                format!("{at}/subnet: not a JSON list"),
            ),
        ] {
            let e = parse_network(&nic(v4)).unwrap_err().to_string();
            assert!(e.starts_with(&want), "{v4}: {e}");
        }
        // An oversized value is shown cut.
        let long = "0".repeat(50_000);
        let e = parse_network(&format!(r#"{{"interface": [{{"macAddress": "{long}"}}]}}"#))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("network/interface/0/macAddress: not 12 hex digits"),
            "{e}"
        );
        assert!(e.len() < 200 && e.contains("50000 chars in all"), "{e}");
        // A saved document names its keys from its root.
        let e = parse_saved(r#"{"network": {"interface": [{}]}}"#)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "metadata network/interface/0/macAddress: missing");
        let e = parse_saved(r#"{"compute": {}}"#).unwrap_err().to_string();
        assert_eq!(e, "metadata network/interface: missing");
    }

    #[test]
    fn huge_answers_and_lists_are_refused() {
        let big = format!(
            r#"{{"interface": [], "pad": "{}"}}"#,
            "x".repeat(MAX_BODY_BYTES)
        );
        let e = parse_network(&big).unwrap_err().to_string();
        assert!(e.contains("larger than"), "{e}");
        let many: Vec<Value> = (0..=MAX_NICS)
            .map(|i| entry(&format!("000D3A{i:06X}"), &[], ("10.0.0.0", "24")))
            .collect();
        let e = parse_network(&serde_json::json!({ "interface": many }).to_string())
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than"), "{e}");
        let ips: Vec<String> = (0..=MAX_ADDRESSES)
            .map(|i| format!("10.0.{}.{}", i / 250, i % 250))
            .collect();
        let ips: Vec<&str> = ips.iter().map(String::as_str).collect();
        let text = serde_json::json!({"interface": [entry(PRIMARY, &ips, ("10.0.0.0", "16"))]})
            .to_string();
        assert!(
            parse_network(&text)
                .unwrap_err()
                .to_string()
                .contains("more than")
        );
        // Deeply nested garbage does not overflow the stack.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse_network(&deep).is_err());
    }

    #[test]
    fn table_numbers_do_not_follow_the_list_order() {
        let a = entry(PRIMARY, &["10.0.0.4"], ("10.0.0.0", "24"));
        let b = entry("000D3A0000FF", &["10.0.2.30"], ("10.0.2.0", "24"));
        let c = entry(SECONDARY, &["10.0.1.20"], ("10.0.1.0", "24"));
        let numbers = |list: Vec<&Value>| {
            let net = parse_network(&serde_json::json!({ "interface": list }).to_string()).unwrap();
            let inst = to_instance(&net);
            inst.nics
                .iter()
                .map(|n| (n.mac.to_string(), n.device_number))
                .collect::<Vec<_>>()
        };
        let one = numbers(vec![&a, &b, &c]);
        assert_eq!(
            one,
            [
                ("00:0d:3a:00:00:01".to_owned(), Some(0)),
                ("00:0d:3a:00:00:02".to_owned(), Some(1)),
                ("00:0d:3a:00:00:ff".to_owned(), Some(2)),
            ]
        );
        // The secondaries listed the other way round keep their numbers.
        assert_eq!(numbers(vec![&a, &c, &b]), one);
        let net = parse_network(&two_nics()).unwrap();
        assert_eq!(
            to_instance(&net)
                .primary_mac
                .map(|m| m.to_string())
                .as_deref(),
            Some("00:0d:3a:00:00:01")
        );
    }

    #[test]
    fn a_saved_instance_or_network_document_parses_for_plan() {
        let net = serde_json::from_str::<Value>(&two_nics()).unwrap();
        let whole = serde_json::json!({"compute": {"vmId": "x"}, "network": net}).to_string();
        let a = parse_saved(&whole).unwrap();
        assert_eq!(a, parse_saved(&two_nics()).unwrap());
        assert_eq!(a.nics.len(), 2);
        assert!(parse_saved("{\"network\": 5}").is_err());
        assert!(parse_saved("not json").is_err());
    }

    #[test]
    fn assess_wants_the_mac_the_address_and_the_subnet() {
        let net = parse_network(&two_nics()).unwrap();
        let a = assess(&event(SECONDARY, "10.0.1.20"), Some(&net)).unwrap();
        assert!(a.is_complete(), "{:?}", a.missing);
        assert_eq!(a.network.nics.len(), 2);
        // A second private address of the NIC is listed too.
        assert!(
            assess(&event(SECONDARY, "10.0.1.21"), Some(&net))
                .unwrap()
                .is_complete()
        );
        // Not listed yet: the hot-plug race.
        let a = assess(&event("000D3A000003", "10.0.3.5"), Some(&net)).unwrap();
        assert_eq!(a.missing, [Missing::MacFolder]);
        // Listed, without the leased address.
        let a = assess(&event(SECONDARY, "10.0.1.99"), Some(&net)).unwrap();
        assert_eq!(
            a.missing,
            [Missing::LeaseAddress {
                address: "10.0.1.99".parse().unwrap()
            }]
        );
        // Listed without a subnet: no gateway known.
        let text = serde_json::json!({"interface": [
            entry(PRIMARY, &["10.0.0.4"], ("10.0.0.0", "24")),
            {"macAddress": SECONDARY, "ipv4": {"ipAddress": [{"privateIpAddress": "10.0.1.20"}], "subnet": []}},
        ]})
        .to_string();
        let a = assess(
            &event(SECONDARY, "10.0.1.20"),
            Some(&parse_network(&text).unwrap()),
        )
        .unwrap();
        assert_eq!(a.missing, [Missing::Subnet { family: Family::V4 }]);
        // Nothing fetched yet.
        let a = assess(&event(SECONDARY, "10.0.1.20"), None).unwrap();
        assert!(!a.is_complete());
    }

    /// Azure's DHCP names no router for a secondary NIC ("Azure does not assign a
    /// default gateway to additional (secondary) network interfaces",
    /// <https://learn.microsoft.com/en-us/azure/virtual-machines/windows/multiple-nics#configure-guest-os-for-multiple-nics>):
    /// the table's default route goes via the subnet's first host, which the
    /// metadata reports as the NIC's default gateway.
    #[test]
    fn a_secondary_lease_without_a_router_gets_the_subnets_first_host() {
        let inst = to_instance(&parse_network(&two_nics()).unwrap());
        let secondary = inst
            .nics
            .iter()
            .find(|n| n.mac.to_string() == "00:0d:3a:00:00:02")
            .unwrap();
        assert_eq!(
            secondary.routes,
            [NicRoute {
                to: "0.0.0.0/0".parse().unwrap(),
                via: "10.0.1.1".parse().unwrap(),
            }]
        );
        let mac = secondary.mac.to_string();
        let planned = |routers: Vec<Ipv4Addr>| {
            let lease = Lease {
                family: Family::V4,
                address: "10.0.1.20".parse().unwrap(),
                prefix_len: 24,
                routers: routers.into_iter().map(IpAddr::V4).collect(),
                reason: Reason::Bound,
            };
            crate::render::ip(&plan_nics(&inst, &[("eth1", &mac, lease)]))
        };
        let text = planned(Vec::new());
        assert!(!text.contains("missing"), "{text}");
        assert!(
            text.contains("ip -4 route add default via 10.0.1.1 dev eth1 table 10001"),
            "{text}"
        );
        assert!(text.contains("from 10.0.1.21/32 lookup 10001"), "{text}");
        // A lease naming a router (the primary's shape) keeps its router.
        let text = planned(vec!["10.0.1.9".parse().unwrap()]);
        assert!(text.contains("default via 10.0.1.9 dev eth1"), "{text}");
        assert!(!text.contains("via 10.0.1.1 "), "{text}");
        // A /31 subnet has no first host to compute: no gateway, said so.
        let one = serde_json::json!({"interface": [
            entry(PRIMARY, &["10.0.0.4"], ("10.0.0.0", "24")),
            entry(SECONDARY, &["10.0.1.20"], ("10.0.1.20", "31")),
        ]})
        .to_string();
        let inst = to_instance(&parse_network(&one).unwrap());
        assert!(
            inst.nics
                .iter()
                .all(|n| n.routes.is_empty() || n.mac != secondary.mac)
        );
    }
}

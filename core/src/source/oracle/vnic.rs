// SPDX-License-Identifier: Apache-2.0
//! Pure: Oracle Cloud's VNIC model. One answer of `GET /opc/v2/vnics/` (every
//! VNIC of the instance at once, the primary first) is parsed strictly
//! ([`parse_vnics`]) and mapped to the cloud-neutral [`InstanceNetwork`] the
//! planner reads ([`to_instance`]); [`assess`] says whether it agrees with one
//! NIC event's lease(s), and [`unleased`] gives the VNICs no DHCP server serves
//! with the leases one would have given.
//!
//! # The answer
//!
//! ```json
//! [{"vnicId": "ocid1.vnic.oc1.phx.aaaa", "privateIp": "10.0.0.230",
//!   "vlanTag": 1039, "macAddr": "02:00:17:05:D1:DB",
//!   "virtualRouterIp": "10.0.0.1", "subnetCidrBlock": "10.0.0.0/24",
//!   "ipv6Addresses": ["2603:c020:4:a00::10"],
//!   "ipv6SubnetCidrBlock": "2603:c020:4:a00::/64",
//!   "ipv6VirtualRouterIp": "fe80::200:17ff:fe05:1"}]
//! ```
//!
//! | key | becomes | |
//! |---|---|---|
//! | `macAddr` | the NIC's MAC (either case) | required |
//! | `privateIp` | the NIC's IPv4 address (`local-ipv4s`) | required, inside `subnetCidrBlock` |
//! | `subnetCidrBlock` | the IPv4 subnet | required |
//! | `virtualRouterIp` | the IPv4 router (what OCI's DHCP hands the primary) | required, inside the subnet, not `privateIp` |
//! | `ipv6Addresses` | the IPv6 addresses (`ipv6s`) | optional, each inside `ipv6SubnetCidrBlock` when that is given |
//! | `ipv6SubnetCidrBlock`, `ipv6VirtualRouterIp` | the IPv6 subnet and router | optional |
//! | `vlanTag`, `nicIndex` | on bare metal, the VLAN and the physical NIC a secondary VNIC rides on | optional integers (0..=4095, 0..=31) |
//! | `vnicId` | the interface id, for logs | optional |
//!
//! Every other key is ignored. The entries are read as [`OciVnic`]s through
//! [`crate::source::provider::doc`]; anything else is an error naming the entry and key
//! (`vnics/1/privateIp`) and showing the value, and nothing of the answer is used: not JSON, not a list, an empty list (OCI
//! always lists the primary; an empty answer read as "no VNICs" would remove
//! every secondary's address), more than [`MAX_VNICS`] entries, a value of the
//! wrong type, a MAC or address that does not parse, a MAC or `privateIp` listed
//! twice, an address or router outside its subnet.
//!
//! # Virtual machine or bare metal
//!
//! On a virtual machine every VNIC is a NIC of its own with the VNIC's MAC (its
//! `vlanTag` is the hypervisor's business). On bare metal (cloud-init's test: the
//! first entry has `nicIndex`) the primary VNIC is the physical NIC, and a
//! secondary VNIC with a `vlanTag` other than 0 is a VLAN on physical NIC
//! `nicIndex`: Oracle's `secondary_vnic_all_configure.sh` creates a macvlan with
//! the VNIC's MAC on that NIC and a VLAN of that tag on the macvlan. Until someone
//! creates that link, no link has the VNIC's MAC, and leasehook (which finds NICs
//! by MAC) configures nothing for it ([`OciVnic::is_vlan`]; `docs/clouds.md` says
//! what creating it would take).
//!
//! # The table number
//!
//! The list is primary first, then in the order the VNICs were attached: a
//! VNIC's position moves when one before it is detached, so a table numbered by
//! position would move to another VNIC while its rules still point at it. A VNIC
//! keeps its MAC for its whole life (OCI assigns it when the VNIC is created, and
//! a detached secondary VNIC is deleted), so every VNIC's "device number" is
//! [`device_slot`] of its MAC (Alibaba's scheme, `1..=9999`): table
//! `table_base + slot`, the same on every event, boot and refresh, whichever VNICs
//! come and go. Two VNICs whose slots collide are caught by the planner before any
//! write (the second is refused the first's table).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use serde::Deserialize;

use crate::error::Result;
use crate::model::{Family, InstanceNetwork, Lease, MacAddr, NicMetadata, NicRoute, Reason};
use crate::source::provider::doc::{self, bad};
use crate::source::provider::{Assessment, NicEvent, Unleased, UnleasedNic, complete};

pub use crate::source::provider::slot::device_slot;

/// The most VNICs read from one answer (OCI's largest shapes allow a few dozen).
pub const MAX_VNICS: usize = 64;

/// The most IPv6 addresses read per VNIC (OCI allows 32).
pub const MAX_IPV6: usize = 64;

/// The largest VLAN tag.
pub const MAX_VLAN_TAG: u64 = 4095;

/// The largest physical NIC index (OCI's API: 0..=31).
pub const MAX_NIC_INDEX: u64 = 31;

/// One VNIC as `/opc/v2/vnics/` describes it: the keys of its entry that
/// leasehook reads, read by [`parse_vnics`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OciVnic {
    /// `vnicId` (the VNIC's OCID).
    pub vnic_id: Option<String>,
    /// `macAddr`.
    #[serde(rename = "macAddr", deserialize_with = "doc::mac")]
    pub mac: MacAddr,
    /// `privateIp`: the VNIC's primary private IPv4 address.
    pub private_ip: Ipv4Addr,
    /// `subnetCidrBlock`.
    #[serde(rename = "subnetCidrBlock")]
    pub subnet: Ipv4Net,
    /// `virtualRouterIp`: the subnet's router.
    #[serde(rename = "virtualRouterIp")]
    pub router: Ipv4Addr,
    /// `vlanTag` (at most [`MAX_VLAN_TAG`]).
    pub vlan_tag: Option<u16>,
    /// `nicIndex` (bare metal only; at most [`MAX_NIC_INDEX`]).
    pub nic_index: Option<u8>,
    /// `ipv6Addresses`.
    #[serde(rename = "ipv6Addresses", default, deserialize_with = "doc::list")]
    pub ipv6: Vec<Ipv6Addr>,
    /// `ipv6SubnetCidrBlock`.
    #[serde(rename = "ipv6SubnetCidrBlock")]
    pub ipv6_subnet: Option<Ipv6Net>,
    /// `ipv6VirtualRouterIp`.
    #[serde(rename = "ipv6VirtualRouterIp")]
    pub ipv6_router: Option<Ipv6Addr>,
}

impl OciVnic {
    /// Whether this VNIC is a VLAN on a physical NIC of a bare-metal instance
    /// (`bare_metal`, see [`OciNetwork::is_bare_metal`]): a `vlanTag` other than
    /// 0. No link has its MAC until a macvlan with it is created.
    pub fn is_vlan(&self, bare_metal: bool) -> bool {
        bare_metal && self.vlan_tag.is_some_and(|t| t != 0)
    }

    /// The cloud-neutral metadata the planner reads.
    pub fn metadata(&self) -> NicMetadata {
        NicMetadata {
            device_number: Some(device_slot(self.mac)),
            local_ipv4s: vec![self.private_ip],
            ipv6s: self.ipv6.clone(),
            subnet_ipv4_cidr_blocks: vec![self.subnet],
            subnet_ipv6_cidr_blocks: self.ipv6_subnet.into_iter().collect(),
            interface_id: self.vnic_id.clone(),
            // `virtualRouterIp` is the VNIC's default gateway when a lease names
            // no router (OCI's DHCP names it for the primary), through the gate.
            routes: vec![NicRoute {
                to: IpNet::V4(Ipv4Net::default()),
                via: IpAddr::V4(self.router),
            }],
            // The virtual router, and the subnet's first host that OCI reserves
            // for it (swapped with `privateIp`, it would still be refused).
            gateways: [Some(self.router), crate::gate::first_host(self.subnet)]
                .into_iter()
                .flatten()
                .map(IpAddr::V4)
                .collect(),
            ..NicMetadata::empty(self.mac)
        }
    }

    /// What a DHCP server would have handed this VNIC: `privateIp` with the
    /// subnet's prefix length and `virtualRouterIp`, and, when the VNIC has an
    /// IPv6 subnet and address, its first IPv6 address with the subnet's prefix
    /// length and `ipv6VirtualRouterIp` when given; each with
    /// [`Reason::Metadata`].
    pub fn leases(&self) -> Vec<Lease> {
        let mut out = vec![Lease {
            family: Family::V4,
            address: IpAddr::V4(self.private_ip),
            prefix_len: self.subnet.prefix_len(),
            routers: vec![IpAddr::V4(self.router)],
            reason: Reason::Metadata,
        }];
        if let (Some(subnet), Some(address)) = (self.ipv6_subnet, self.ipv6.first()) {
            out.push(Lease {
                family: Family::V6,
                address: IpAddr::V6(*address),
                prefix_len: subnet.prefix_len(),
                routers: self.ipv6_router.map(IpAddr::V6).into_iter().collect(),
                reason: Reason::Metadata,
            });
        }
        out
    }
}

/// The whole answer, in OCI's order (the primary first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciNetwork {
    /// The entries; never empty.
    pub vnics: Vec<OciVnic>,
}

impl OciNetwork {
    /// The primary VNIC: the first entry.
    pub fn primary(&self) -> Option<&OciVnic> {
        self.vnics.first()
    }

    /// The entry with this MAC.
    pub fn vnic(&self, mac: MacAddr) -> Option<&OciVnic> {
        self.vnics.iter().find(|v| v.mac == mac)
    }

    /// Whether the instance is bare metal: its first entry has `nicIndex`
    /// (cloud-init's `DataSourceOracle` test; virtual machines' entries have none).
    pub fn is_bare_metal(&self) -> bool {
        self.primary().is_some_and(|p| p.nic_index.is_some())
    }
}

/// What the types cannot say of entry `i`: ranges, subnets, the OCID's form.
/// Trims the subnets to their networks and drops an empty `vnicId`.
fn check(i: usize, v: &mut OciVnic) -> Result<()> {
    let key = |k: &str| format!("vnics/{i}/{k}");
    v.subnet = v.subnet.trunc();
    v.ipv6_subnet = v.ipv6_subnet.map(|n| n.trunc());
    let subnet = v.subnet;
    if !subnet.contains(&v.private_ip) {
        let reason = format!("outside subnetCidrBlock {subnet}");
        return Err(bad(key("privateIp"), reason, &v.private_ip.to_string()));
    }
    if !subnet.contains(&v.router) || v.router == v.private_ip {
        let reason = format!("not another host of subnetCidrBlock {subnet}");
        return Err(bad(key("virtualRouterIp"), reason, &v.router.to_string()));
    }
    doc::at_most(&v.ipv6, MAX_IPV6, &key("ipv6Addresses"), "addresses")?;
    if let Some(n) = v.ipv6_subnet
        && let Some(a) = v.ipv6.iter().find(|a| !n.contains(*a))
    {
        let reason = format!("outside ipv6SubnetCidrBlock {n}");
        return Err(bad(key("ipv6Addresses"), reason, &a.to_string()));
    }
    for (k, value, max) in [
        ("vlanTag", v.vlan_tag.map(u64::from), MAX_VLAN_TAG),
        ("nicIndex", v.nic_index.map(u64::from), MAX_NIC_INDEX),
    ] {
        if let Some(n) = value.filter(|n| *n > max) {
            return Err(bad(
                key(k),
                format!("not an integer 0..={max}"),
                &n.to_string(),
            ));
        }
    }
    v.vnic_id = match v.vnic_id.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(s) if s.chars().any(char::is_control) || s.len() > 255 => {
            return Err(bad(key("vnicId"), "not an OCID", s));
        }
        Some(s) => Some(s.to_owned()),
    };
    Ok(())
}

/// Parses one answer of `/opc/v2/vnics/`. Strict (see the module docs): an
/// answer that is not entirely right is an error naming what is wrong.
pub fn parse_vnics(text: &str) -> Result<OciNetwork> {
    let mut vnics: Vec<OciVnic> = doc::read(text, "OCI IMDS vnics", "vnics")?;
    if vnics.is_empty() {
        let reason = "an empty list (OCI always lists the primary VNIC)";
        return Err(bad("vnics", reason, "[]"));
    }
    doc::at_most(&vnics, MAX_VNICS, "vnics", "VNICs")?;
    let mut macs = BTreeSet::new();
    let mut addresses = BTreeSet::new();
    for (i, v) in vnics.iter_mut().enumerate() {
        check(i, v)?;
        if !macs.insert(v.mac) {
            let key = format!("vnics/{i}/macAddr");
            return Err(bad(key, "MAC listed twice", &v.mac.to_string()));
        }
        if !addresses.insert(v.private_ip) {
            let key = format!("vnics/{i}/privateIp");
            return Err(bad(key, "address listed twice", &v.private_ip.to_string()));
        }
    }
    Ok(OciNetwork { vnics })
}

/// Parses a saved `/opc/v2/vnics/` answer for `leasehook plan --provider oracle`.
pub fn parse_saved(text: &str) -> Result<InstanceNetwork> {
    parse_vnics(text).map(|n| to_instance(&n))
}

/// The cloud-neutral metadata: the first entry is the primary; every VNIC's
/// device number is its MAC's slot (module docs); entries sorted by MAC.
pub fn to_instance(net: &OciNetwork) -> InstanceNetwork {
    let mut nics: Vec<NicMetadata> = net.vnics.iter().map(OciVnic::metadata).collect();
    nics.sort_by_key(|n| n.mac);
    InstanceNetwork {
        primary_mac: net.primary().map(|p| p.mac),
        nics,
    }
}

/// Every VNIC but the primary, with the leases DHCP would have given them
/// ([`OciVnic::leases`]), in OCI's order; bare-metal VLAN VNICs included (they
/// have no link until one with their MAC is created).
pub fn unleased(net: &OciNetwork) -> Unleased {
    Unleased {
        nics: net
            .vnics
            .iter()
            .skip(1)
            .map(|v| UnleasedNic {
                mac: v.mac,
                leases: v.leases(),
            })
            .collect(),
        network: to_instance(net),
    }
}

/// Whether `network` (`None`: nothing fetched yet, or a 404) agrees with
/// `event`'s leases: the VNIC is listed with the leased address and its subnet.
/// Decided by the planner's rules ([`complete::missing`]), as for the other
/// clouds, so the wait and the plan cannot disagree about "complete".
///
/// OCI's DHCP serves the primary VNIC only, so the NIC a DHCP lease came to is
/// the primary whatever place the list gives its MAC: an answer whose first entry
/// is another MAC (a hostile or broken one) never gives the DHCP-served primary
/// a secondary's rules and table.
pub fn assess(event: &NicEvent, network: Option<&OciNetwork>) -> Result<Assessment> {
    let mut network = network.map(to_instance).unwrap_or_default();
    let by_dhcp = event.leases().iter().any(|l| l.reason != Reason::Metadata);
    if by_dhcp && network.nic(event.mac()).is_some() {
        network.primary_mac = Some(event.mac());
    }
    complete::assess(event, network)
}

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::{Map, Value};

    use super::*;
    use crate::model::IfName;
    use crate::model::Missing;
    use crate::source::provider::doc::tests::plan_nics;

    /// A virtual machine with a secondary VNIC (cloud-init's recorded answer's
    /// shape: no `nicIndex`, a `vlanTag` each).
    pub(crate) const VM_TWO: &str = r#"[ {
  "vnicId" : "ocid1.vnic.oc1.phx.primary",
  "privateIp" : "10.0.0.230",
  "vlanTag" : 1039,
  "macAddr" : "02:00:17:05:D1:DB",
  "virtualRouterIp" : "10.0.0.1",
  "subnetCidrBlock" : "10.0.0.0/24"
}, {
  "vnicId" : "ocid1.vnic.oc1.phx.secondary",
  "privateIp" : "10.0.1.20",
  "vlanTag" : 1041,
  "macAddr" : "00:00:17:02:2B:B1",
  "virtualRouterIp" : "10.0.1.1",
  "subnetCidrBlock" : "10.0.1.0/24",
  "ipv6Addresses" : ["2603:c020:4:a01::20", "2603:c020:4:a01::21"],
  "ipv6SubnetCidrBlock" : "2603:c020:4:a01::/64",
  "ipv6VirtualRouterIp" : "fe80::200:17ff:fe00:1"
} ]"#;

    /// A bare-metal instance: `nicIndex` on every entry, the secondary a VLAN.
    const BM_TWO: &str = r#"[ {
  "vnicId" : "ocid1.vnic.oc1.phx.bm0",
  "privateIp" : "10.0.0.8", "vlanTag" : 0, "macAddr" : "90:e2:ba:d4:f1:68",
  "virtualRouterIp" : "10.0.0.1", "subnetCidrBlock" : "10.0.0.0/24", "nicIndex" : 0
}, {
  "vnicId" : "ocid1.vnic.oc1.phx.bm1",
  "privateIp" : "10.0.4.5", "vlanTag" : 1, "macAddr" : "02:00:17:05:CF:51",
  "virtualRouterIp" : "10.0.4.1", "subnetCidrBlock" : "10.0.4.0/24", "nicIndex" : 0
} ]"#;

    fn mac(s: &str) -> MacAddr {
        s.parse().unwrap()
    }

    fn event(m: &str, addr: &str) -> NicEvent {
        let address: IpAddr = addr.parse().unwrap();
        NicEvent::try_new(
            IfName::try_new("ens3").unwrap(),
            mac(m),
            vec![Lease {
                family: Family::of(&address),
                address,
                prefix_len: 24,
                routers: vec!["10.0.0.1".parse().unwrap()],
                reason: Reason::Bound,
            }],
        )
        .unwrap()
    }

    #[test]
    fn the_documented_answers_parse() {
        let n = parse_vnics(VM_TWO).unwrap();
        assert_eq!(n.vnics.len(), 2);
        assert!(!n.is_bare_metal());
        let p = n.primary().unwrap();
        assert_eq!(p.mac, mac("02:00:17:05:d1:db"));
        assert_eq!(p.private_ip, "10.0.0.230".parse::<Ipv4Addr>().unwrap());
        assert_eq!(p.subnet, "10.0.0.0/24".parse::<Ipv4Net>().unwrap());
        assert_eq!(p.router, "10.0.0.1".parse::<Ipv4Addr>().unwrap());
        assert_eq!(p.vlan_tag, Some(1039));
        assert_eq!(p.nic_index, None);
        assert_eq!(p.vnic_id.as_deref(), Some("ocid1.vnic.oc1.phx.primary"));
        let s = &n.vnics[1];
        assert_eq!(s.ipv6.len(), 2);
        assert_eq!(
            s.ipv6_subnet,
            Some("2603:c020:4:a01::/64".parse::<Ipv6Net>().unwrap())
        );
        assert_eq!(
            s.ipv6_router,
            Some("fe80::200:17ff:fe00:1".parse::<Ipv6Addr>().unwrap())
        );
        // No VLAN on a virtual machine, whatever its vlanTag.
        assert!(!s.is_vlan(n.is_bare_metal()));

        let b = parse_vnics(BM_TWO).unwrap();
        assert!(b.is_bare_metal());
        assert!(!b.vnics[0].is_vlan(true));
        assert!(b.vnics[1].is_vlan(true));
        assert_eq!(b.vnics[1].nic_index, Some(0));
        assert_eq!(b.vnics[1].vlan_tag, Some(1));
        // A lone primary; null optional keys.
        let one = r#"[{"macAddr":"02:00:17:00:00:01","privateIp":"10.0.0.2","subnetCidrBlock":"10.0.0.0/24","virtualRouterIp":"10.0.0.1","vlanTag":null,"ipv6Addresses":null,"vnicId":null}]"#;
        assert_eq!(parse_vnics(one).unwrap().vnics.len(), 1);
    }

    /// One valid VNIC.
    const OK: &str = r#"{"macAddr":"02:00:17:00:00:01","privateIp":"10.0.0.2","subnetCidrBlock":"10.0.0.0/24","virtualRouterIp":"10.0.0.1"}"#;

    /// An answer of [`OK`] with key `k` set to the JSON `v` (`DELETE`: removed).
    fn with(k: &str, v: &str) -> String {
        let mut o: Map<String, Value> = serde_json::from_str(OK).unwrap();
        if v == "DELETE" {
            o.remove(k);
        } else {
            o.insert(k.to_owned(), serde_json::from_str(v).unwrap());
        }
        format!("[{}]", Value::Object(o))
    }

    #[test]
    fn each_error_names_the_entry_and_key_and_shows_the_value() {
        for (k, v, want) in [
            (
                "privateIp",
                "167772162",
                "vnics/0/privateIp: expected IPv4 address (got \"167772162\")",
            ),
            (
                "subnetCidrBlock",
                "[\"10.0.0.0/24\"]",
                "vnics/0/subnetCidrBlock: expected IPv4 network",
            ),
            ("macAddr", "DELETE", "vnics/0/macAddr: missing"),
            (
                "virtualRouterIp",
                "null",
                "vnics/0/virtualRouterIp: expected IPv4 address (got \"null\")",
            ),
            (
                "vlanTag",
                "\"12\"",
                "vnics/0/vlanTag: expected u16 (got \"12\")",
            ),
            (
                "vlanTag",
                "4096",
                "vnics/0/vlanTag: not an integer 0..=4095 (got \"4096\")",
            ),
            (
                "ipv6Addresses",
                "[\"fd00::1\", 2]",
                "vnics/0/ipv6Addresses/1: expected IPv6 address (got \"2\")",
            ),
            ("vnicId", "{}", "vnics/0/vnicId: not a string (got \"{}\")"),
        ] {
            let e = parse_vnics(&with(k, v)).unwrap_err().to_string();
            assert!(e.contains(want), "{k}={v}: {e}");
        }
    }

    #[test]
    fn garbage_and_hostile_answers_are_errors_never_an_empty_network() {
        let ok = OK;
        let cases: Vec<(String, &str)> = vec![
            (String::new(), "vnics"),
            ("null".into(), "vnics"),
            ("{}".into(), "vnics"),
            ("[]".into(), "empty list"),
            ("[1]".into(), "vnics/0: not a JSON object"),
            ("<html>503</html>".into(), "vnics"),
            ("[".into(), "vnics"),
            (format!("[{ok}] trailing"), "vnics"),
            (with("macAddr", "DELETE"), "macAddr"),
            (with("macAddr", "12"), "macAddr"),
            (with("macAddr", "\"02:00:17:00:00\""), "macAddr"),
            (with("macAddr", "\"0200170000 01\""), "macAddr"),
            (with("privateIp", "DELETE"), "privateIp"),
            (with("privateIp", "\"10.0.0.256\""), "privateIp"),
            (with("privateIp", "\"fd00::1\""), "privateIp"),
            (with("privateIp", "\"10.0.1.2\""), "outside subnetCidrBlock"),
            (with("subnetCidrBlock", "DELETE"), "subnetCidrBlock"),
            (
                with("subnetCidrBlock", "\"10.0.0.0/33\""),
                "subnetCidrBlock",
            ),
            (with("subnetCidrBlock", "\"10.0.0.0\""), "subnetCidrBlock"),
            (with("virtualRouterIp", "DELETE"), "virtualRouterIp"),
            (with("virtualRouterIp", "\"10.9.9.1\""), "virtualRouterIp"),
            (with("virtualRouterIp", "\"10.0.0.2\""), "virtualRouterIp"),
            (with("vlanTag", "4096"), "vlanTag"),
            (with("vlanTag", "-1"), "vlanTag"),
            (with("vlanTag", "\"12\""), "vlanTag"),
            (with("vlanTag", "1.5"), "vlanTag"),
            (with("nicIndex", "32"), "nicIndex"),
            (with("ipv6Addresses", "\"fd00::1\""), "ipv6Addresses"),
            (with("ipv6Addresses", "[1]"), "ipv6Addresses"),
            (with("ipv6Addresses", "[\"10.0.0.3\"]"), "ipv6Addresses"),
            (
                with("ipv6SubnetCidrBlock", "\"fd00::/129\""),
                "ipv6SubnetCidrBlock",
            ),
            (
                with("ipv6VirtualRouterIp", "\"10.0.0.1\""),
                "ipv6VirtualRouterIp",
            ),
            (with("vnicId", "\"ocid1\\u0007\""), "vnicId"),
        ];
        for (text, named) in &cases {
            let e = parse_vnics(text).unwrap_err().to_string();
            assert!(e.contains(named), "{text:?}: {e}");
        }
        // An IPv6 address outside its subnet.
        let mut o: Map<String, Value> = serde_json::from_str(ok).unwrap();
        o.insert("ipv6SubnetCidrBlock".into(), "2603:c020::/64".into());
        o.insert("ipv6Addresses".into(), serde_json::json!(["2603:c021::1"]));
        let e = parse_vnics(&format!("[{}]", Value::Object(o)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside ipv6SubnetCidrBlock"), "{e}");
        // The same MAC (in another case) or address twice.
        let twice = format!("[{ok},{}]", ok.replace("10.0.0.2", "10.0.0.3"));
        assert!(
            parse_vnics(&twice)
                .unwrap_err()
                .to_string()
                .contains("MAC listed twice")
        );
        let upper = ok.replace("02:00:17:00:00:01", "02:00:17:00:00:0A");
        let lower = ok
            .replace("02:00:17:00:00:01", "02:00:17:00:00:0a")
            .replace("10.0.0.2", "10.0.0.3");
        assert!(parse_vnics(&format!("[{upper},{lower}]")).is_err());
        let addr = format!("[{ok},{}]", ok.replace("00:01", "00:02"));
        assert!(
            parse_vnics(&addr)
                .unwrap_err()
                .to_string()
                .contains("address listed twice")
        );
    }

    #[test]
    fn huge_answers_are_refused_without_overflowing() {
        let many: Vec<String> = (0..=MAX_VNICS)
            .map(|i| {
                format!(
                    r#"{{"macAddr":"02:00:17:00:00:{i:02x}","privateIp":"10.0.0.{}","subnetCidrBlock":"10.0.0.0/24","virtualRouterIp":"10.0.0.1"}}"#,
                    i + 2
                )
            })
            .collect();
        let e = parse_vnics(&format!("[{}]", many.join(",")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than"), "{e}");
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse_vnics(&deep).is_err());
        let addrs: Vec<String> = (0..=MAX_IPV6).map(|i| format!("\"fd00::{i:x}\"")).collect();
        let text = format!(
            r#"[{{"macAddr":"02:00:17:00:00:01","privateIp":"10.0.0.2","subnetCidrBlock":"10.0.0.0/24","virtualRouterIp":"10.0.0.1","ipv6Addresses":[{}]}}]"#,
            addrs.join(",")
        );
        assert!(
            parse_vnics(&text)
                .unwrap_err()
                .to_string()
                .contains("more than")
        );
    }

    #[test]
    fn tables_follow_the_mac_never_the_position() {
        let three = r#"[
 {"macAddr":"02:00:17:00:00:01","privateIp":"10.0.0.2","subnetCidrBlock":"10.0.0.0/24","virtualRouterIp":"10.0.0.1"},
 {"macAddr":"02:00:17:00:00:02","privateIp":"10.0.1.2","subnetCidrBlock":"10.0.1.0/24","virtualRouterIp":"10.0.1.1"},
 {"macAddr":"02:00:17:00:00:03","privateIp":"10.0.2.2","subnetCidrBlock":"10.0.2.0/24","virtualRouterIp":"10.0.2.1"}]"#;
        let numbers = |text: &str| {
            to_instance(&parse_vnics(text).unwrap())
                .nics
                .iter()
                .map(|n| (n.mac, n.device_number))
                .collect::<Vec<_>>()
        };
        let all = numbers(three);
        assert_eq!(all.len(), 3);
        // The middle VNIC detached: the third keeps its number (a position
        // scheme would hand it the second's table).
        let mut v: Vec<Value> = serde_json::from_str(three).unwrap();
        v.remove(1);
        let after = numbers(&Value::Array(v).to_string());
        assert_eq!(after, [all[0], all[2]]);
        for (m, d) in &all {
            assert_eq!(*d, Some(device_slot(*m)));
            assert_ne!(*d, Some(0));
        }
        let inst = to_instance(&parse_vnics(three).unwrap());
        assert_eq!(inst.primary_mac, Some(mac("02:00:17:00:00:01")));
        assert!(inst.nics.windows(2).all(|w| w[0].mac < w[1].mac));
    }

    #[test]
    fn unleased_is_every_vnic_but_the_primary_with_what_dhcp_would_say() {
        let n = parse_vnics(VM_TWO).unwrap();
        let u = unleased(&n);
        assert_eq!(u.network, to_instance(&n));
        assert_eq!(u.nics.len(), 1);
        let s = &u.nics[0];
        assert_eq!(s.mac, mac("00:00:17:02:2b:b1"));
        assert_eq!(
            s.leases,
            [
                Lease {
                    family: Family::V4,
                    address: "10.0.1.20".parse().unwrap(),
                    prefix_len: 24,
                    routers: vec!["10.0.1.1".parse().unwrap()],
                    reason: Reason::Metadata,
                },
                Lease {
                    family: Family::V6,
                    address: "2603:c020:4:a01::20".parse().unwrap(),
                    prefix_len: 64,
                    routers: vec!["fe80::200:17ff:fe00:1".parse().unwrap()],
                    reason: Reason::Metadata,
                },
            ]
        );
        // IPv6 addresses without a subnet give no IPv6 lease (no prefix length).
        let no_subnet = VM_TWO.replace(r#""ipv6SubnetCidrBlock" : "2603:c020:4:a01::/64","#, "");
        let u = unleased(&parse_vnics(&no_subnet).unwrap());
        assert_eq!(u.nics[0].leases.len(), 1);
        // A lone primary: nothing unleased. Bare metal: the VLAN VNIC is listed.
        let one = r#"[{"macAddr":"02:00:17:00:00:01","privateIp":"10.0.0.2","subnetCidrBlock":"10.0.0.0/24","virtualRouterIp":"10.0.0.1"}]"#;
        assert!(unleased(&parse_vnics(one).unwrap()).nics.is_empty());
        let b = unleased(&parse_vnics(BM_TWO).unwrap());
        assert_eq!(b.nics.len(), 1);
        assert_eq!(b.nics[0].mac, mac("02:00:17:05:cf:51"));
    }

    #[test]
    fn assess_wants_the_vnic_its_address_and_its_subnet() {
        let n = parse_vnics(VM_TWO).unwrap();
        let a = assess(&event("02:00:17:05:d1:db", "10.0.0.230"), Some(&n)).unwrap();
        assert!(a.is_complete(), "{:?}", a.missing);
        assert_eq!(a.network.nics.len(), 2);
        let a = assess(&event("02:00:17:05:d1:db", "10.0.0.99"), Some(&n)).unwrap();
        assert_eq!(
            a.missing,
            [Missing::LeaseAddress {
                address: "10.0.0.99".parse().unwrap()
            }]
        );
        let a = assess(&event("02:00:17:00:00:99", "10.0.3.5"), Some(&n)).unwrap();
        assert_eq!(a.missing, [Missing::MacFolder]);
        assert!(
            !assess(&event("02:00:17:05:d1:db", "10.0.0.230"), None)
                .unwrap()
                .is_complete()
        );
    }

    #[test]
    fn the_nic_dhcp_serves_is_the_primary_wherever_the_list_puts_it() {
        // eth0's MAC listed second, after a MAC no NIC has.
        let hostile = r#"[
 {"macAddr":"02:00:17:00:00:99","privateIp":"10.0.9.2","subnetCidrBlock":"10.0.9.0/24","virtualRouterIp":"10.0.9.1"},
 {"macAddr":"02:00:17:05:D1:DB","privateIp":"10.0.0.230","subnetCidrBlock":"10.0.0.0/24","virtualRouterIp":"10.0.0.1"}]"#;
        let n = parse_vnics(hostile).unwrap();
        let ev = event("02:00:17:05:d1:db", "10.0.0.230");
        let a = assess(&ev, Some(&n)).unwrap();
        assert!(a.is_complete(), "{:?}", a.missing);
        assert_eq!(a.network.primary_mac, Some(mac("02:00:17:05:d1:db")));
        // So its plan has no table and no rules (no `primary_rules`).
        let nic = (
            ev.interface().as_str(),
            &*ev.mac().to_string(),
            ev.leases()[0].clone(),
        );
        let p = plan_nics(&a.network, &[nic]);
        assert!(p.interfaces[0].primary, "{p:?}");
        assert!(p.interfaces[0].rules.is_empty() && p.interfaces[0].table.is_none());
        // The list's own order otherwise (no event): its first entry.
        assert_eq!(to_instance(&n).primary_mac, Some(mac("02:00:17:00:00:99")));
    }

    #[test]
    fn a_saved_answer_parses_for_plan() {
        let inst = parse_saved(VM_TWO).unwrap();
        assert_eq!(inst.nics.len(), 2);
        assert!(parse_saved("{}").is_err());
    }
}

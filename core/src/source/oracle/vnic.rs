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
//! | `privateIp` | the NIC's IPv4 address (`local-ipv4s`) | inside `subnetCidrBlock` |
//! | `subnetCidrBlock` | the IPv4 subnet | with `privateIp` |
//! | `virtualRouterIp` | the IPv4 router (what OCI's DHCP hands the primary) | with `privateIp`, inside the subnet, not `privateIp` |
//! | `ipv6Addresses` | the IPv6 addresses (`ipv6s`), each a string | optional (OCI assigns up to 32), each inside `ipv6SubnetCidrBlock` when that is given |
//! | `ipv6SubnetCidrBlock` | the IPv6 subnet (OCI's are /64) | optional |
//! | `ipv6VirtualRouterIp` | the IPv6 router (link-local, `fe80::200:17ff:fe40:8972` in cloud-init's recorded answers): the NIC's `::/0` route and one of its gateways | optional |
//! | `vlanTag`, `nicIndex` | on bare metal, the VLAN and the physical NIC a secondary VNIC rides on | optional integers (0..=4095, 0..=31) |
//! | `vnicId` | the interface id, for logs | optional |
//!
//! # IPv6, and VNICs without IPv4
//!
//! A VNIC in an IPv6-only subnet has no IPv4 at all: no `privateIp`, no
//! `virtualRouterIp`, and `subnetCidrBlock` absent or the text `"<null>"`, as
//! OCI's serializer writes a block it has none of (cloud-init's recorded
//! answers `OPC_VM_IPV6_ONLY_SECONDARY_VNIC_RESPONSE` and
//! `OPC_VM_DUAL_STACK_SECONDARY_VNIC_RESPONSE`, `tests/unittests/sources/test_oracle.py`).
//! So the three IPv4 keys are read together: all three, or none (absent, `null`
//! or `"<null>"`, which every address and block key reads as absent); one or two
//! of them is an error naming the one missing. A VNIC listing neither family yet
//! is no error: it is listed without addresses, which the consistency wait reads
//! as "not propagated yet" and a NIC without DHCP as nothing to configure yet.
//!
//! OCI serves DHCPv4 to the primary VNIC only, but DHCPv6 to every VNIC of an
//! IPv6-enabled subnet (cloud-init issue 6844, measured on A1 shapes), so a DHCPv6
//! lease may come to a secondary VNIC: only a DHCPv4 lease says its NIC is the
//! primary ([`assess`]). Where leasehook adds a VNIC's IPv6 addresses itself (a
//! NIC without DHCP, [`OciVnic::leases`]) it adds them as /128: the length a
//! DHCPv6 client gives the same address (an `IA_NA` address), so a client run on
//! the VNIC anyway meets the same address, never a /64 it must refuse
//! (systemd-networkd "Ignoring DHCPv6 address .../128 which conflicts with
//! .../64", cloud-init issue 6867, an OCI instance losing IPv6 until the /64
//! expired); the subnet's route is the plan's, in the VNIC's own table, so the
//! /64 would bring nothing (cloud-init itself gives an IPv6-only VNIC's static
//! address /128).
//!
//! Every other key is ignored. The entries are read as [`OciVnic`]s through
//! [`crate::source::provider::doc`]; anything else is an error naming the entry and key
//! (`vnics/1/privateIp`) and showing the value, and nothing of the answer is used: not JSON, not a list, an empty list (OCI
//! always lists the primary; an empty answer read as "no VNICs" would remove
//! every secondary's address), more than [`MAX_VNICS`] entries, a value of the
//! wrong type, a MAC or address that does not parse, a MAC or `privateIp` listed
//! twice, an address or router outside its subnet, some but not all of the IPv4
//! keys. Where the IPv6 router leads (link-local or not, an address of this
//! host) is the address gate's to judge, value by value, as every cloud's
//! published router is: one wrong value must not cost every VNIC its answer.
//!
//! # Virtual machine or bare metal
//!
//! On a virtual machine every VNIC is a NIC of its own with the VNIC's MAC (its
//! `vlanTag` is the hypervisor's business). On bare metal (cloud-init's test: the
//! first entry has `nicIndex`) the primary VNIC is the physical NIC, and a
//! secondary VNIC with a `vlanTag` other than 0 is a VLAN on physical NIC
//! `nicIndex`: Oracle's `secondary_vnic_all_configure.sh` creates a macvlan with
//! the VNIC's MAC on that NIC and a VLAN of that tag on the macvlan. leasehook
//! does the same ([`unleased`] asks for a [`NicLink::MacvlanVlan`], which
//! `refresh` creates and owns: [`crate::apply::links`]), and the VLAN, found by
//! the VNIC's MAC, is configured like any VNIC without DHCP.
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

use crate::error::{Error, Result};
use crate::model::{
    Family, InstanceNetwork, Lease, MacAddr, NicMetadata, NicRoute, Problem, Reason,
};
use crate::model::{NicLink, Parent};
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
    /// `privateIp`: the VNIC's primary private IPv4 address (`None`: an
    /// IPv6-only VNIC).
    #[serde(default, deserialize_with = "ipv4_address")]
    pub private_ip: Option<Ipv4Addr>,
    /// `subnetCidrBlock` (`None`: an IPv6-only VNIC's, absent or `"<null>"`).
    #[serde(rename = "subnetCidrBlock", default, deserialize_with = "ipv4_network")]
    pub subnet: Option<Ipv4Net>,
    /// `virtualRouterIp`: the subnet's router (`None`: an IPv6-only VNIC).
    #[serde(rename = "virtualRouterIp", default, deserialize_with = "ipv4_address")]
    pub router: Option<Ipv4Addr>,
    /// `vlanTag` (at most [`MAX_VLAN_TAG`]).
    pub vlan_tag: Option<u16>,
    /// `nicIndex` (bare metal only; at most [`MAX_NIC_INDEX`]).
    pub nic_index: Option<u8>,
    /// `ipv6Addresses`.
    #[serde(rename = "ipv6Addresses", default, deserialize_with = "doc::list")]
    pub ipv6: Vec<Ipv6Addr>,
    /// `ipv6SubnetCidrBlock`.
    #[serde(
        rename = "ipv6SubnetCidrBlock",
        default,
        deserialize_with = "ipv6_network"
    )]
    pub ipv6_subnet: Option<Ipv6Net>,
    /// `ipv6VirtualRouterIp`: the IPv6 router, link-local on OCI.
    #[serde(
        rename = "ipv6VirtualRouterIp",
        default,
        deserialize_with = "ipv6_address"
    )]
    pub ipv6_router: Option<Ipv6Addr>,
}

/// The text OCI writes for a block a VNIC has none of (an IPv6-only VNIC's
/// `subnetCidrBlock`).
pub const OCI_NULL: &str = "<null>";

/// Reads a value that may be absent: `null`, [`OCI_NULL`] or (with
/// `#[serde(default)]`) no key are `None`; any other string parses as `T`, and
/// anything else is refused as "expected" what `T` is.
struct OrNull<T> {
    expecting: &'static str,
    parsed: std::marker::PhantomData<T>,
}

impl<'de, T: std::str::FromStr> serde::de::Visitor<'de> for OrNull<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_none<E: serde::de::Error>(self) -> std::result::Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_some<D: serde::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<Option<T>, D::Error> {
        d.deserialize_str(self)
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Option<T>, E> {
        if v == OCI_NULL {
            return Ok(None);
        }
        v.parse()
            .map(Some)
            .map_err(|_| E::invalid_value(serde::de::Unexpected::Str(v), &self))
    }
}

/// `deserialize_with` for an address or block that may be absent ([`OrNull`]).
fn or_null<'de, D: serde::Deserializer<'de>, T: std::str::FromStr>(
    d: D,
    expecting: &'static str,
) -> std::result::Result<Option<T>, D::Error> {
    d.deserialize_option(OrNull {
        expecting,
        parsed: std::marker::PhantomData,
    })
}

fn ipv4_address<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Ipv4Addr>, D::Error> {
    or_null(d, "IPv4 address")
}

fn ipv4_network<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Ipv4Net>, D::Error> {
    or_null(d, "IPv4 network")
}

fn ipv6_address<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Ipv6Addr>, D::Error> {
    or_null(d, "IPv6 address")
}

fn ipv6_network<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Ipv6Net>, D::Error> {
    or_null(d, "IPv6 network")
}

/// A VNIC's IPv4: its address, subnet and router, which OCI gives together or
/// not at all ([`OciVnic::ipv4`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OciIpv4 {
    /// `privateIp`.
    pub address: Ipv4Addr,
    /// `subnetCidrBlock`.
    pub subnet: Ipv4Net,
    /// `virtualRouterIp`.
    pub router: Ipv4Addr,
}

impl OciVnic {
    /// Whether this VNIC is a VLAN on a physical NIC of a bare-metal instance
    /// (`bare_metal`, see [`OciNetwork::is_bare_metal`]): a `vlanTag` other than
    /// 0. No link has its MAC until a macvlan with it is created.
    pub fn is_vlan(&self, bare_metal: bool) -> bool {
        bare_metal && self.vlan_tag.is_some_and(|t| t != 0)
    }

    /// The VNIC's IPv4 (`None`: an IPv6-only VNIC); [`parse_vnics`] has checked
    /// that the three keys come together.
    pub fn ipv4(&self) -> Option<OciIpv4> {
        Some(OciIpv4 {
            address: self.private_ip?,
            subnet: self.subnet?,
            router: self.router?,
        })
    }

    /// The cloud-neutral metadata the planner reads.
    pub fn metadata(&self) -> NicMetadata {
        let v4 = self.ipv4();
        // `virtualRouterIp` and `ipv6VirtualRouterIp` are the VNIC's default
        // gateways when a lease names no router (OCI's DHCP names the IPv4 one
        // for the primary; DHCPv6 never names one), through the gate: a
        // link-local IPv6 router is on the VNIC's link by definition.
        let routes = v4
            .map(|v4| NicRoute {
                to: IpNet::V4(Ipv4Net::default()),
                via: IpAddr::V4(v4.router),
            })
            .into_iter()
            .chain(self.ipv6_router.map(|r| NicRoute {
                to: IpNet::V6(Ipv6Net::default()),
                via: IpAddr::V6(r),
            }))
            .collect();
        // The virtual routers, and the IPv4 subnet's first host that OCI
        // reserves for it (swapped with `privateIp`, it would still be refused).
        let gateways = v4
            .into_iter()
            .flat_map(|v4| [Some(v4.router), crate::gate::first_host(v4.subnet)])
            .flatten()
            .map(IpAddr::V4)
            .chain(self.ipv6_router.map(IpAddr::V6))
            .collect();
        NicMetadata {
            device_number: Some(device_slot(self.mac)),
            local_ipv4s: self.private_ip.into_iter().collect(),
            ipv6s: self.ipv6.clone(),
            subnet_ipv4_cidr_blocks: self.subnet.into_iter().collect(),
            subnet_ipv6_cidr_blocks: self.ipv6_subnet.into_iter().collect(),
            interface_id: self.vnic_id.clone(),
            routes,
            gateways,
            ..NicMetadata::empty(self.mac)
        }
    }

    /// What a DHCP server would have handed this VNIC, each family on its own,
    /// each with [`Reason::Metadata`]: `privateIp` with the subnet's prefix
    /// length and `virtualRouterIp`, when the VNIC has IPv4; its first IPv6
    /// address as /128 (module docs) and `ipv6VirtualRouterIp` when given, once
    /// the VNIC lists an IPv6 address and its subnet (a subnet not published yet
    /// leaves the IPv6 half for a later refresh, never the IPv4 one). The other
    /// IPv6 addresses are the NIC's secondary ones, which the plan adds /128 too.
    pub fn leases(&self) -> Vec<Lease> {
        let v4 = self.ipv4().map(|v4| Lease {
            family: Family::V4,
            address: IpAddr::V4(v4.address),
            prefix_len: v4.subnet.prefix_len(),
            routers: vec![IpAddr::V4(v4.router)],
            reason: Reason::Metadata,
        });
        let v6 = self
            .ipv6_subnet
            .and(self.ipv6.first())
            .map(|address| Lease {
                family: Family::V6,
                address: IpAddr::V6(*address),
                prefix_len: IPV6_ADDRESS_LEN,
                routers: self.ipv6_router.map(IpAddr::V6).into_iter().collect(),
                reason: Reason::Metadata,
            });
        v4.into_iter().chain(v6).collect()
    }
}

/// The prefix length of the IPv6 addresses leasehook adds to a VNIC without
/// DHCP: a DHCPv6 client's (module docs).
pub const IPV6_ADDRESS_LEN: u8 = 128;

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

/// What the types cannot say of entry `i`: ranges, subnets, the IPv4 keys
/// together, the OCID's form. Trims the subnets to their networks and drops an
/// empty `vnicId`.
fn check(i: usize, v: &mut OciVnic) -> Result<()> {
    let key = |k: &str| format!("vnics/{i}/{k}");
    v.subnet = v.subnet.map(|n| n.trunc());
    v.ipv6_subnet = v.ipv6_subnet.map(|n| n.trunc());
    check_ipv4(v, &key)?;
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

/// The IPv4 keys of one entry: all three or none (module docs); the address
/// inside the subnet, the router another host of it.
fn check_ipv4(v: &OciVnic, key: &dyn Fn(&str) -> String) -> Result<()> {
    let given = [
        ("privateIp", v.private_ip.is_some()),
        ("subnetCidrBlock", v.subnet.is_some()),
        ("virtualRouterIp", v.router.is_some()),
    ];
    let Some(ip) = v.ipv4() else {
        if let (Some((with, _)), Some((without, _))) = (
            given.iter().find(|(_, g)| *g),
            given.iter().find(|(_, g)| !*g),
        ) {
            return Err(Error::Metadata {
                key: key(without),
                problem: Problem {
                    reason: format!(
                        "missing while {with} is given (a VNIC has privateIp, subnetCidrBlock \
                         and virtualRouterIp, or no IPv4 at all)"
                    ),
                    value: None,
                },
            });
        }
        return Ok(());
    };
    if !ip.subnet.contains(&ip.address) {
        let reason = format!("outside subnetCidrBlock {}", ip.subnet);
        return Err(bad(key("privateIp"), reason, &ip.address.to_string()));
    }
    if !ip.subnet.contains(&ip.router) || ip.router == ip.address {
        let reason = format!("not another host of subnetCidrBlock {}", ip.subnet);
        return Err(bad(key("virtualRouterIp"), reason, &ip.router.to_string()));
    }
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
        if let Some(ip) = v.private_ip
            && !addresses.insert(ip)
        {
            let key = format!("vnics/{i}/privateIp");
            return Err(bad(key, "address listed twice", &ip.to_string()));
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
/// ([`OciVnic::leases`]), in OCI's order; a bare-metal VLAN VNIC with the link
/// leasehook creates for it ([`NicLink::MacvlanVlan`] on physical NIC
/// `nicIndex`).
pub fn unleased(net: &OciNetwork) -> Unleased {
    let bare_metal = net.is_bare_metal();
    Unleased {
        nics: net
            .vnics
            .iter()
            .skip(1)
            .map(|v| UnleasedNic {
                mac: v.mac,
                leases: v.leases(),
                link: v.is_vlan(bare_metal).then(|| NicLink::MacvlanVlan {
                    parent: Parent::NicIndex(v.nic_index.unwrap_or_default()),
                    vlan: v.vlan_tag.unwrap_or_default(),
                }),
            })
            .collect(),
        network: to_instance(net),
        owns_links: bare_metal,
    }
}

/// Whether `network` (`None`: nothing fetched yet, or a 404) agrees with
/// `event`'s leases: the VNIC is listed with the leased address and its subnet,
/// family by family (a DHCPv4 lease waits for nothing of IPv6, a DHCPv6 lease
/// for nothing of IPv4). Decided by the planner's rules ([`complete::missing`]),
/// as for the other clouds, so the wait and the plan cannot disagree about
/// "complete".
///
/// OCI's DHCPv4 serves the primary VNIC only, so the NIC a DHCPv4 lease came to
/// is the primary whatever place the list gives its MAC: an answer whose first
/// entry is another MAC (a hostile or broken one) never gives the DHCP-served
/// primary a secondary's rules and table. DHCPv6 serves every VNIC (module
/// docs): a DHCPv6 lease says nothing of which VNIC is the primary, and the
/// list's order (the primary first) decides.
pub fn assess(event: &NicEvent, network: Option<&OciNetwork>) -> Result<Assessment> {
    let mut network = network.map(to_instance).unwrap_or_default();
    let by_dhcp4 = event
        .leases()
        .iter()
        .any(|l| l.family == Family::V4 && l.reason != Reason::Metadata);
    if by_dhcp4 && network.nic(event.mac()).is_some() {
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
        assert_eq!(
            p.ipv4(),
            Some(OciIpv4 {
                address: "10.0.0.230".parse().unwrap(),
                subnet: "10.0.0.0/24".parse().unwrap(),
                router: "10.0.0.1".parse().unwrap(),
            })
        );
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
                "vnics/0/virtualRouterIp: missing while privateIp is given",
            ),
            (
                "subnetCidrBlock",
                "\"<null>\"",
                "vnics/0/subnetCidrBlock: missing while privateIp is given",
            ),
            (
                "virtualRouterIp",
                "\"fe80::1\"",
                "vnics/0/virtualRouterIp: expected IPv4 address (got \"fe80::1\")",
            ),
            (
                "ipv6VirtualRouterIp",
                "[\"fe80::1\"]",
                "vnics/0/ipv6VirtualRouterIp: expected IPv6 address (got \"[\\\"fe80::1\\\"]\")",
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
                    prefix_len: 128,
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

    /// A dual-stack primary and an IPv6-only secondary, in the shape of
    /// cloud-init's recorded `OPC_DUAL_STACK_WITHI_IPV6_ONLY_SECONDARY_VNIC_RESPONSE`
    /// (the secondary's `subnetCidrBlock` is `"<null>"`, its other IPv4 keys
    /// absent; `ipv6Addresses` a list of strings), with two IPv6 addresses on the
    /// secondary.
    pub(crate) const DUAL_V6_ONLY_SECONDARY: &str = r#"[ {
  "ipv6Addresses" : [ "2603:c020:400d:5dbb::10" ],
  "ipv6SubnetCidrBlock" : "2603:c020:400d:5dbb::/64",
  "ipv6VirtualRouterIp" : "fe80::200:17ff:fe40:8972",
  "macAddr" : "02:00:17:0D:6B:BE",
  "privateIp" : "10.0.0.183",
  "subnetCidrBlock" : "10.0.0.0/24",
  "virtualRouterIp" : "10.0.0.1",
  "vlanTag" : 929,
  "vnicId" : "ocid1.vnic.oc1.iad.primary"
}, {
  "ipv6Addresses" : [ "2603:c020:400d:5d7e::20", "2603:c020:400d:5d7e::21" ],
  "ipv6SubnetCidrBlock" : "2603:c020:400d:5d7e::/64",
  "ipv6VirtualRouterIp" : "fe80::200:17ff:fe40:8972",
  "macAddr" : "02:00:17:18:F6:FF",
  "subnetCidrBlock" : "<null>",
  "vlanTag" : 2659,
  "vnicId" : "ocid1.vnic.oc1.iad.v6only"
} ]"#;

    const V6_PRIMARY: &str = "02:00:17:0d:6b:be";
    const V6_SECONDARY: &str = "02:00:17:18:f6:ff";
    const V6_ROUTER: &str = "fe80::200:17ff:fe40:8972";

    fn lease6(address: &str, prefix_len: u8, reason: Reason) -> Lease {
        Lease {
            family: Family::V6,
            address: address.parse().unwrap(),
            prefix_len,
            routers: Vec::new(),
            reason,
        }
    }

    fn lines(p: &crate::model::Plan) -> Vec<String> {
        crate::render::ip(p)
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn an_ipv6_only_vnic_parses_and_is_planned_from_ipv6_alone() {
        let net = parse_vnics(DUAL_V6_ONLY_SECONDARY).unwrap();
        let sec = net.vnic(mac(V6_SECONDARY)).unwrap();
        assert_eq!((sec.private_ip, sec.subnet, sec.router), (None, None, None));
        assert_eq!(sec.ipv4(), None);
        let md = sec.metadata();
        assert!(md.local_ipv4s.is_empty() && md.subnet_ipv4_cidr_blocks.is_empty());
        let router: IpAddr = V6_ROUTER.parse().unwrap();
        assert_eq!(
            md.routes,
            [NicRoute {
                to: "::/0".parse().unwrap(),
                via: router
            }]
        );
        assert_eq!(md.gateways, [router]);
        // The primary publishes both families' routers.
        let primary = net.primary().unwrap().metadata();
        assert_eq!(primary.routes.len(), 2);
        assert_eq!(primary.gateways.len(), 3);
        // Without DHCP: one IPv6 lease, /128, through the published router.
        let u = unleased(&net);
        assert_eq!(
            u.nics[0].leases,
            [Lease {
                routers: vec![router],
                ..lease6("2603:c020:400d:5d7e::20", 128, Reason::Metadata)
            }]
        );
        let plan = plan_nics(
            &u.network,
            &[("ens4", V6_SECONDARY, u.nics[0].leases[0].clone())],
        );
        let table = 10_000 + device_slot(mac(V6_SECONDARY));
        assert_eq!(
            lines(&plan),
            [
                "ip -6 address add 2603:c020:400d:5d7e::20/128 dev ens4".to_owned(),
                "ip -6 address add 2603:c020:400d:5d7e::21/128 dev ens4".to_owned(),
                format!("ip -6 route add default via {V6_ROUTER} dev ens4 table {table}"),
                format!("ip -6 route add 2603:c020:400d:5d7e::/64 dev ens4 table {table}"),
                format!(
                    "ip -6 rule add from 2603:c020:400d:5d7e::20/128 lookup {table} priority {table}"
                ),
                format!(
                    "ip -6 rule add from 2603:c020:400d:5d7e::21/128 lookup {table} priority {table}"
                ),
            ],
        );
        let ip = &plan.interfaces[0];
        assert_eq!(ip.families, [Family::V6]);
        assert!(ip.missing.is_empty() && ip.refused.is_empty(), "{ip:?}");

        // Every address and block key reads OCI's "<null>" (and null) as absent;
        // a VNIC listing neither family yet is no error, and has no lease.
        let nothing = r#"[{"macAddr":"02:00:17:00:00:01","privateIp":"<null>","subnetCidrBlock":null,"virtualRouterIp":"<null>","ipv6SubnetCidrBlock":"<null>","ipv6VirtualRouterIp":null}]"#;
        let empty = &parse_vnics(nothing).unwrap().vnics[0];
        assert!(empty.leases().is_empty() && empty.ipv6_subnet.is_none());
        assert!(empty.ipv6_router.is_none() && empty.metadata().routes.is_empty());
        assert!(empty.metadata().gateways.is_empty());
        let bare = r#"[{"macAddr":"02:00:17:00:00:01"}]"#;
        assert!(parse_vnics(bare).unwrap().vnics[0].leases().is_empty());
        // Addresses published before their subnet: no IPv6 lease yet.
        let late = DUAL_V6_ONLY_SECONDARY
            .replace(r#""ipv6SubnetCidrBlock" : "2603:c020:400d:5d7e::/64","#, "");
        assert!(
            unleased(&parse_vnics(&late).unwrap()).nics[0]
                .leases
                .is_empty()
        );
        // Some IPv4 keys without the others: an error naming the one missing.
        for (text, named) in [
            (with("privateIp", "\"<null>\""), "vnics/0/privateIp: missing while subnetCidrBlock"),
            (with("subnetCidrBlock", "null"), "vnics/0/subnetCidrBlock: missing while privateIp"),
            (
                r#"[{"macAddr":"02:00:17:00:00:01","virtualRouterIp":"10.0.0.1","ipv6Addresses":["fd00::1"]}]"#.to_owned(),
                "vnics/0/privateIp: missing while virtualRouterIp",
            ),
        ] {
            let e = parse_vnics(&text).unwrap_err().to_string();
            assert!(e.contains(named), "{text}: {e}");
        }
    }

    #[test]
    fn a_dhcpv6_lease_on_a_secondary_is_routed_as_the_secondary() {
        let n = parse_vnics(DUAL_V6_ONLY_SECONDARY).unwrap();
        // DHCPv6 serves every VNIC: its lease does not make the secondary the
        // primary (DHCPv4 does, for the one VNIC it serves).
        let ev = NicEvent::try_new(
            IfName::try_new("ens4").unwrap(),
            mac(V6_SECONDARY),
            vec![lease6("2603:c020:400d:5d7e::20", 128, Reason::Bound)],
        )
        .unwrap();
        let a = assess(&ev, Some(&n)).unwrap();
        assert!(a.is_complete(), "{:?}", a.missing);
        assert_eq!(a.network.primary_mac, Some(mac(V6_PRIMARY)));
        let lease = lease6("2603:c020:400d:5d7e::20", 128, Reason::Bound);
        let plan = plan_nics(&a.network, &[("ens4", V6_SECONDARY, lease)]);
        let table = 10_000 + device_slot(mac(V6_SECONDARY));
        // The leased address is the client's; the other is added; the default
        // route goes through the published link-local router at once.
        assert_eq!(
            lines(&plan),
            [
                "ip -6 address add 2603:c020:400d:5d7e::21/128 dev ens4".to_owned(),
                format!("ip -6 route add default via {V6_ROUTER} dev ens4 table {table}"),
                format!("ip -6 route add 2603:c020:400d:5d7e::/64 dev ens4 table {table}"),
                format!(
                    "ip -6 rule add from 2603:c020:400d:5d7e::20/128 lookup {table} priority {table}"
                ),
                format!(
                    "ip -6 rule add from 2603:c020:400d:5d7e::21/128 lookup {table} priority {table}"
                ),
            ],
        );
        // A DHCPv4 lease on the secondary's MAC (no such DHCP on OCI, or a
        // hostile list) is still taken as the primary's.
        let ev4 = event(V6_SECONDARY, "10.0.0.99");
        let a = assess(&ev4, Some(&n)).unwrap();
        assert_eq!(a.network.primary_mac, Some(mac(V6_SECONDARY)));
    }

    #[test]
    fn each_family_waits_for_its_own_keys_only() {
        // The primary's IPv6 not published yet.
        let v4_only = DUAL_V6_ONLY_SECONDARY.replacen(
            r#""ipv6Addresses" : [ "2603:c020:400d:5dbb::10" ],"#,
            "",
            1,
        );
        let n = parse_vnics(&v4_only).unwrap();
        // Its DHCPv4 lease is complete; its DHCPv6 lease waits for the address.
        let a = assess(&event(V6_PRIMARY, "10.0.0.183"), Some(&n)).unwrap();
        assert!(a.is_complete(), "{:?}", a.missing);
        let ev6 = NicEvent::try_new(
            IfName::try_new("ens3").unwrap(),
            mac(V6_PRIMARY),
            vec![lease6("2603:c020:400d:5dbb::10", 128, Reason::Bound)],
        )
        .unwrap();
        let a = assess(&ev6, Some(&n)).unwrap();
        assert_eq!(a.missing, [Missing::Addresses { family: Family::V6 }]);
        let a = assess(&ev6, Some(&parse_vnics(DUAL_V6_ONLY_SECONDARY).unwrap())).unwrap();
        assert!(a.is_complete(), "{:?}", a.missing);
        // The IPv6-only secondary's DHCPv6 lease never waits for an IPv4 key.
        let ev = NicEvent::try_new(
            IfName::try_new("ens4").unwrap(),
            mac(V6_SECONDARY),
            vec![lease6("2603:c020:400d:5d7e::21", 128, Reason::Bound)],
        )
        .unwrap();
        assert!(assess(&ev, Some(&n)).unwrap().is_complete());
    }

    #[test]
    fn hostile_ipv6_values_are_refused_by_the_gate_value_by_value() {
        let base: Vec<Value> = serde_json::from_str(DUAL_V6_ONLY_SECONDARY).unwrap();
        let plan_with = |key: &str, value: Value| {
            let mut v = base.clone();
            v[1][key] = value;
            let n = parse_vnics(&Value::Array(v).to_string()).unwrap();
            let u = unleased(&n);
            let lease = u.nics[0].leases.first().cloned();
            lease.map(|l| plan_nics(&u.network, &[("ens4", V6_SECONDARY, l)]))
        };
        let default_via = |p: &crate::model::Plan| {
            p.interfaces[0]
                .routes
                .iter()
                .filter(|r| r.to.prefix_len() == 0)
                .filter_map(|r| r.via)
                .collect::<Vec<_>>()
        };
        // Routers the gate refuses as a next hop: this VNIC's own address, the
        // metadata service's, special ranges, a global address off the subnet.
        for router in [
            "2603:c020:400d:5d7e::21",
            "fd00:c1::a9fe:a9fe",
            "::1",
            "::",
            "ff02::1",
            "2001:db8:9::1",
        ] {
            let p = plan_with("ipv6VirtualRouterIp", router.into()).unwrap();
            assert!(
                default_via(&p).is_empty(),
                "{router}: {:?}",
                p.interfaces[0].routes
            );
            // The rest of the NIC is still planned: its address, subnet route
            // and rules (the kernel's RA router may give the default later).
            assert_eq!(p.interfaces[0].families, [Family::V6]);
            assert!(!p.interfaces[0].rules.is_empty(), "{router}");
        }
        // A router inside the subnet (not link-local) passes too.
        let p = plan_with("ipv6VirtualRouterIp", "2603:c020:400d:5d7e::1".into()).unwrap();
        assert_eq!(
            default_via(&p),
            ["2603:c020:400d:5d7e::1".parse::<IpAddr>().unwrap()]
        );
        // An address the gate refuses (another VNIC's: the primary's, listed
        // again on the secondary in the same subnet) is refused alone; the
        // others are planned.
        let mut v = base.clone();
        v[1]["ipv6SubnetCidrBlock"] = "2603:c020:400d:5dbb::/64".into();
        v[1]["ipv6Addresses"] = serde_json::json!([
            "2603:c020:400d:5dbb::20",
            "2603:c020:400d:5dbb::10",
            "2603:c020:400d:5dbb::21"
        ]);
        let n = parse_vnics(&Value::Array(v).to_string()).unwrap();
        let u = unleased(&n);
        let p = plan_nics(
            &u.network,
            &[("ens4", V6_SECONDARY, u.nics[0].leases[0].clone())],
        );
        let ip = &p.interfaces[0];
        let primarys = "2603:c020:400d:5dbb::10";
        assert!(
            ip.refused
                .iter()
                .any(|r| r.key == "ipv6s" && r.value.starts_with(primarys)),
            "{:?}",
            ip.refused
        );
        let planned: Vec<String> = ip.addresses.iter().map(|a| a.addr.to_string()).collect();
        assert_eq!(
            planned,
            ["2603:c020:400d:5dbb::20/128", "2603:c020:400d:5dbb::21/128"]
        );
        assert!(
            ip.rules
                .iter()
                .all(|r| !r.from.to_string().starts_with(primarys))
        );
        // A subnet the gate refuses (the metadata service's, or wider than /16):
        // nothing is routed from it.
        for (subnet, addresses) in [
            ("fd00:c1::/64", serde_json::json!(["fd00:c1::20"])),
            ("2603::/8", serde_json::json!(["2603:c020:400d:5d7e::20"])),
        ] {
            let mut v = base.clone();
            v[1]["ipv6SubnetCidrBlock"] = subnet.into();
            v[1]["ipv6Addresses"] = addresses;
            let n = parse_vnics(&Value::Array(v).to_string()).unwrap();
            let u = unleased(&n);
            let p = plan_nics(
                &u.network,
                &[("ens4", V6_SECONDARY, u.nics[0].leases[0].clone())],
            );
            let ip = &p.interfaces[0];
            assert!(
                ip.routes.iter().all(|r| r.to.to_string() != subnet),
                "{subnet}: {:?}",
                ip.routes
            );
            assert!(!ip.refused.is_empty(), "{subnet}");
        }
    }

    #[test]
    fn a_saved_answer_parses_for_plan() {
        let inst = parse_saved(VM_TWO).unwrap();
        assert_eq!(inst.nics.len(), 2);
        assert!(parse_saved("{}").is_err());
    }
}

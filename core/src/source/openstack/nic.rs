// SPDX-License-Identifier: Apache-2.0
//! Pure: `OpenStack`'s `network_data.json` (Nova's metadata service and config
//! drive alike), what one NIC event asks of it, whether it agrees with the lease
//! (SPEC §3.5, §4.4), and the NICs it configures without DHCP.
//!
//! # What is read
//!
//! One document, `openstack/latest/network_data.json`: `links` (the NICs),
//! `networks` (each an IP configuration of one link, by the link's `id`) and
//! `services` (DNS, ignored). Strict JSON; of each entry leasehook reads:
//!
//! | key | becomes | |
//! |---|---|---|
//! | `links[].id` | what `networks[].link` names | required |
//! | `links[].type` | physical (`phy`, `ethernet`, `vif`, `ovs`, `tap`, ... any type but `vlan` and `bond`) | required |
//! | `links[].ethernet_mac_address` | the NIC's MAC, compared without case (cloud-init lowers it) | a physical link without one is skipped |
//! | `links[].mtu` | logged only (the DHCP client or cloud-init sets the MTU) | optional |
//! | `networks[].link`, `networks[].type` | the network's NIC and kind (below) | required |
//! | `networks[].ip_address`, `networks[].netmask` | an address of the NIC and its subnet (`ip_address` may carry `/len` instead of a `netmask`) | required for `ipv4`/`ipv6` |
//! | `networks[].routes[].{network, netmask, gateway}` | [`NicRoute`]s: a `/0` is the network's default gateway | optional |
//!
//! Network types, as cloud-init's `convert_net_json` reads them: `ipv4_dhcp` and
//! `ipv6_dhcp`, `ipv6_dhcpv6-stateful` (served by DHCP, so by leasehook's DHCP
//! hooks as on every cloud), `ipv6_slaac` and `ipv6_dhcpv6-stateless` (addresses
//! the kernel configures from router advertisements: see below), `ipv4` (also
//! `static`) and `ipv6` (also `static6`): static addresses no DHCP server hands
//! out, which [`unleased`] turns into the leases a DHCP server would have given.
//! Nova lists no address or route for an `ipv4_dhcp`/`ipv6_dhcp` network (those
//! come with the lease, option 121 included); the schema allows both on any
//! network, and where they are listed leasehook reads them.
//!
//! # IPv6 by router advertisement (SLAAC)
//!
//! Since Pike (2017, Nova commit ccebded0cb, "Update network metadata type
//! field for IPv6"), Nova names a Neutron subnet's `ipv6_address_mode` in the
//! type (`ipv6_slaac`, `ipv6_dhcpv6-stateless`, `ipv6_dhcpv6-stateful`) and
//! lists the port's address with the subnet's netmask and routes on it
//! (`nova/virt/netutils.py` `_get_nets`); before, such a subnet was
//! `ipv6_dhcp`. On a SLAAC subnet Neutron gives the port the EUI-64 of its MAC
//! inside the prefix (oslo.utils `netutils.get_ipv6_addr_by_EUI64`: the MAC with
//! `ff:fe` in its middle and the universal/local bit flipped, after the /64),
//! which is the address the kernel configures from the router's advertisement
//! with `addr_gen_mode` 0. No DHCPv6 lease ever names it, so [`unleased`] lists
//! it as an [`Reason::Autoconf`] lease: the address the network lists (or,
//! where a network names only its prefix, `ip_address` the prefix's all-zero
//! address, the EUI-64 of the link's MAC inside it: [`slaac_address`]). It is in
//! force only while the kernel holds it on the link (`leasehook refresh` and
//! the udev add path read the kernel's addresses); the NIC then gets its rules
//! and table, never the address itself. A network without an address (Nova
//! before Pike never types one `ipv6_slaac`; hand-written drives may) vouches
//! for no address: the kernel's are left without rules. So are the kernel's
//! other autoconf addresses (privacy or stable-privacy ones, another prefix's):
//! Neutron's port security drops their traffic anyway, since only the port's
//! fixed IPs may leave it.
//!
//! # One IPv6 address per port and subnet
//!
//! Nova lists the first IPv4 and the first IPv6 subnet of a port's network and,
//! of each, the port's first address (`get_network_metadata`,
//! `_get_first_network`, `subnet['ips'][0]`): the document never names a
//! secondary IPv6 address of a port, so there is none to add. Where a document
//! lists two IPv6 networks on one link (a drive written by hand), a static one
//! besides the leased (or autoconf) address is added as a secondary address like
//! any cloud's, with its subnet's prefix length.
//!
//! `vlan` and `bond` links (and the networks on them) are skipped and named in
//! [`NetworkData::skipped`], which the caller logs: leasehook plans only NICs the
//! kernel has a DHCP client or an address for, and creating VLAN or bond links is
//! not its business (cloud-init's netplan or the image does that).
//!
//! The keys of the table are read into serde types through
//! [`crate::source::provider::doc`], on every entry: a key of the wrong type is an error
//! even on a link or network that is then skipped (only a physical link's
//! `ethernet_mac_address` is parsed as a MAC). Errors name the key
//! (`network_data.json/networks/1/routes/0/gateway`) and show the value.
//!
//! A document without a `links` list (another cloud's answer), a value of the
//! wrong type, a MAC or address that does not parse, a netmask
//! that is not contiguous, two links with one `id` or MAC, a network naming a
//! link that is not listed, or more than [`MAX_LINKS`] / [`MAX_NETWORKS`] /
//! [`MAX_ROUTES`] entries is an error naming its key: the answer is not used.
//!
//! # The primary NIC and the table number
//!
//! Nova lists links in the instance's interface order: the first physical link
//! is the primary NIC (`eth0`). Nothing in the document says where any other NIC
//! sits for good (the list shifts when a NIC in the middle is detached); what is
//! fixed for a Neutron port's life is its MAC. So a NIC's "device number" is
//! [`crate::source::provider::slot::device_slot`], the same pure function of the
//! MAC in `1..=9999` as Alibaba's, and its table `table_base + slot` (rule
//! priority `priority_base + slot`). The same port gets the same table on every
//! event, boot and instance it is attached to; two ports whose slots collide are
//! caught by the planner before any write (the second one's plan is refused).
//!
//! # When the metadata agrees
//!
//! Complete once the link with the event's MAC is listed with a network for the
//! lease's family: `ipv4_dhcp` (or a static `ipv4` network listing the leased
//! address) for DHCPv4, `ipv6_dhcp` or `ipv6_dhcpv6-stateful` (or a static `ipv6`
//! listing it) for DHCPv6, and for the kernel's SLAAC address
//! ([`Reason::Autoconf`]) a SLAAC network vouching for it. Each lease is judged
//! by its own family's networks: an IPv6 network listed late holds only an IPv6
//! lease, and an IPv6-only link needs no IPv4 network. A network that lists an address other than the
//! lease's is stale: waited for. The NIC's metadata is then the listed addresses
//! and subnets, and for a DHCP network that lists none the lease's own address
//! and network (DHCP is what assigns them on `OpenStack`), with every route of
//! the link's networks; it goes to the planner with the event's link and lease,
//! as every provider's does.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv6Addr};

use ipnet::{IpNet, Ipv6Net};
use serde::Deserialize;

use crate::error::{Error, Problem, Result};
use crate::model::{
    Family, InstanceNetwork, Lease, MacAddr, Missing, NicMetadata, NicRoute, Reason,
};
use crate::source::provider::doc::{self, bad};
use crate::source::provider::slot::device_slot;
use crate::source::provider::{Assessment, NicEvent, UnleasedNic, complete};

pub use crate::source::provider::doc::Answer;

/// The document's name, for errors.
pub const NETWORK_DATA: &str = "network_data.json";

/// The most links one document may list (Nova allows far fewer NICs).
pub const MAX_LINKS: usize = 64;

/// The most networks one document may list.
pub const MAX_NETWORKS: usize = 256;

/// The most routes one network may list.
pub const MAX_ROUTES: usize = 64;

/// The EUI-64 interface identifier of `mac` (RFC 4291 appendix A): `ff:fe` in
/// its middle and the universal/local bit flipped, as the kernel and Neutron
/// compute a SLAAC address's last 64 bits.
pub fn eui64(mac: MacAddr) -> [u8; 8] {
    let m = mac.octets();
    [m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]]
}

/// The address a SLAAC network vouches for on the link with `mac`: the one it
/// lists, or, where it lists only a /64 prefix (`ip_address` the prefix's
/// all-zero address, which RFC 4291 §2.6.1 reserves for the subnet's routers
/// and no host holds), the EUI-64 of `mac` inside it. `None` without an
/// address, or for a prefix that is no /64 (SLAAC on Ethernet needs 64 bits of
/// interface identifier, RFC 4862 §5.5.3).
pub fn slaac_address(listed: Option<IpNet>, mac: MacAddr) -> Option<Ipv6Net> {
    let IpNet::V6(net) = listed? else {
        return None;
    };
    if net.addr() != net.network() {
        return Some(net);
    }
    if net.prefix_len() != 64 {
        return None;
    }
    let mut octets = net.network().octets();
    if let Some(host) = octets.get_mut(8..) {
        host.copy_from_slice(&eui64(mac));
    }
    Ipv6Net::new(Ipv6Addr::from(octets), 64).ok()
}

/// What kind of IP configuration a network is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NetworkType {
    /// `ipv4_dhcp`.
    Ipv4Dhcp,
    /// `ipv4` or `static`: a static IPv4 address.
    Ipv4Static,
    /// `ipv6_dhcp` or `ipv6_dhcpv6-stateful`: DHCPv6 hands out the address.
    Ipv6Dhcp,
    /// `ipv6_slaac` or `ipv6_dhcpv6-stateless`: addresses from router
    /// advertisements.
    Ipv6Slaac,
    /// `ipv6` or `static6`: a static IPv6 address.
    Ipv6Static,
}

impl NetworkType {
    /// The type named `s`, as cloud-init reads it; `None` for a type it does not
    /// know.
    pub fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "ipv4_dhcp" => Self::Ipv4Dhcp,
            "ipv4" | "static" => Self::Ipv4Static,
            "ipv6_dhcp" | "ipv6_dhcpv6-stateful" => Self::Ipv6Dhcp,
            "ipv6_slaac" | "ipv6_dhcpv6-stateless" => Self::Ipv6Slaac,
            "ipv6" | "static6" => Self::Ipv6Static,
            _ => return None,
        })
    }

    /// The family.
    pub fn family(self) -> Family {
        match self {
            Self::Ipv4Dhcp | Self::Ipv4Static => Family::V4,
            Self::Ipv6Dhcp | Self::Ipv6Slaac | Self::Ipv6Static => Family::V6,
        }
    }

    /// Whether it is a static address (no DHCP, no router advertisement).
    pub fn is_static(self) -> bool {
        matches!(self, Self::Ipv4Static | Self::Ipv6Static)
    }

    /// Whether a DHCP server (v4 or stateful v6) hands out its address.
    pub fn is_dhcp(self) -> bool {
        matches!(self, Self::Ipv4Dhcp | Self::Ipv6Dhcp)
    }
}

/// One physical link (a NIC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsLink {
    /// `id`.
    pub id: String,
    /// `ethernet_mac_address`.
    pub mac: MacAddr,
    /// `type`.
    pub kind: String,
    /// `mtu`.
    pub mtu: Option<u32>,
}

/// One network of a physical link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsNetwork {
    /// `id` (empty when absent).
    pub id: String,
    /// `link`: the link's `id`.
    pub link: String,
    /// `type`.
    pub kind: NetworkType,
    /// `ip_address` with the prefix length of `netmask`.
    pub address: Option<IpNet>,
    /// `routes`.
    pub routes: Vec<NicRoute>,
}

impl OsNetwork {
    /// The address the network gives the link with `mac`: the one it lists,
    /// and for a SLAAC network the one it vouches for ([`slaac_address`]).
    pub fn address_for(&self, mac: MacAddr) -> Option<IpNet> {
        if self.kind == NetworkType::Ipv6Slaac {
            return slaac_address(self.address, mac).map(IpNet::V6);
        }
        self.address
    }
}

/// A parsed `network_data.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkData {
    /// The physical links with a MAC, in the document's order.
    pub links: Vec<OsLink>,
    /// The networks of those links, in the document's order.
    pub networks: Vec<OsNetwork>,
    /// What was skipped and why (VLAN and bond links, links without a MAC,
    /// network types cloud-init does not know): the caller logs it.
    pub skipped: Vec<String>,
}

impl NetworkData {
    /// The link with this MAC.
    pub fn link(&self, mac: MacAddr) -> Option<&OsLink> {
        self.links.iter().find(|l| l.mac == mac)
    }

    /// The networks of `link`.
    pub fn networks_of<'a>(&'a self, link: &'a OsLink) -> impl Iterator<Item = &'a OsNetwork> {
        self.networks.iter().filter(move |n| n.link == link.id)
    }

    /// The primary NIC: the first link listed.
    pub fn primary(&self) -> Option<&OsLink> {
        self.links.first()
    }
}

/// What leasehook reads of `network_data.json` (`services` and every other key
/// are ignored). `links` is required: Nova always writes it, and an object
/// without it is some other document (another cloud's answer), never "no NIC".
#[derive(Deserialize)]
struct Document {
    links: Vec<LinkDoc>,
    #[serde(default, deserialize_with = "doc::list")]
    networks: Vec<NetworkDoc>,
}

/// A `links[]` entry.
#[derive(Deserialize)]
struct LinkDoc {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    /// Parsed only on a physical link: a VLAN's MAC is `vlan_mac_address`.
    ethernet_mac_address: Option<String>,
    mtu: Option<u32>,
}

/// A `networks[]` entry. Its address and netmask stay text until its type says
/// how to read them.
#[derive(Deserialize)]
struct NetworkDoc {
    id: Option<String>,
    link: String,
    #[serde(rename = "type")]
    kind: String,
    ip_address: Option<String>,
    netmask: Option<String>,
    #[serde(default, deserialize_with = "doc::list")]
    routes: Vec<RouteDoc>,
}

/// A `routes[]` entry of a network.
#[derive(Deserialize)]
struct RouteDoc {
    network: IpAddr,
    netmask: String,
    gateway: IpAddr,
}

fn ip(s: &str, key: &str) -> Result<IpAddr> {
    s.trim()
        .parse()
        .map_err(|_| bad(key, "not an IP address", s))
}

/// An address (or network) and a netmask of its family: dotted or colon form,
/// contiguous, or a bare prefix length.
fn with_mask(addr: IpAddr, mask: &str, key: &str) -> Result<IpNet> {
    let m = mask.trim();
    let net = if let Ok(len) = m.parse::<u8>() {
        IpNet::new(addr, len).ok()
    } else {
        m.parse::<IpAddr>()
            .ok()
            .filter(|mask| mask.is_ipv4() == addr.is_ipv4())
            .and_then(|mask| IpNet::with_netmask(addr, mask).ok())
    };
    let reason = "not a contiguous netmask of the address's family";
    net.ok_or_else(|| bad(key, reason, mask))
}

fn route(r: &RouteDoc, at: &str) -> Result<NicRoute> {
    let to = with_mask(r.network, &r.netmask, &format!("{at}/netmask"))?;
    if r.gateway.is_ipv4() != to.addr().is_ipv4() {
        let key = format!("{at}/gateway");
        return Err(bad(
            key,
            "not of the route's family",
            &r.gateway.to_string(),
        ));
    }
    Ok(NicRoute {
        to: to.trunc(),
        via: r.gateway,
    })
}

/// The links leasehook plans (physical, with a MAC), and what it skipped.
fn parse_links(
    links: Vec<LinkDoc>,
    skipped: &mut Vec<String>,
) -> Result<(Vec<OsLink>, BTreeSet<String>)> {
    doc::at_most(
        &links,
        MAX_LINKS,
        &format!("{NETWORK_DATA}/links"),
        "entries",
    )?;
    let mut out: Vec<OsLink> = Vec::new();
    let mut ids = BTreeSet::new();
    let mut skipped_ids = BTreeSet::new();
    for (i, link) in links.into_iter().enumerate() {
        let at = format!("{NETWORK_DATA}/links/{i}");
        let LinkDoc {
            id,
            kind,
            ethernet_mac_address,
            mtu,
        } = link;
        if !ids.insert(id.clone()) {
            return Err(bad(format!("{at}/id"), "two links with one id", &id));
        }
        if matches!(kind.as_str(), "vlan" | "bond") {
            skipped.push(format!(
                "link {id}: a {kind} link (leasehook routes physical NICs only)"
            ));
            skipped_ids.insert(id);
            continue;
        }
        let Some(mac_text) = ethernet_mac_address else {
            skipped.push(format!("link {id}: no ethernet_mac_address"));
            skipped_ids.insert(id);
            continue;
        };
        let key = format!("{at}/ethernet_mac_address");
        let mac: MacAddr = mac_text.trim().parse().map_err(|problem| Error::Metadata {
            key: key.clone(),
            problem,
        })?;
        if out.iter().any(|l| l.mac == mac) {
            return Err(bad(key, "two links with one MAC", &mac_text));
        }
        out.push(OsLink { id, mac, kind, mtu });
    }
    Ok((out, skipped_ids))
}

/// A network's `ip_address` with the prefix of its `netmask` (or of a `/len`
/// in `ip_address`); `None` when absent.
fn parse_address(net: &NetworkDoc, at: &str, kind: NetworkType) -> Result<Option<IpNet>> {
    let Some(a) = net.ip_address.as_deref() else {
        return Ok(None);
    };
    let key = format!("{at}/ip_address");
    let address = if let Some((addr, len)) = a.trim().split_once('/') {
        with_mask(ip(addr, &key)?, len, &key)?
    } else {
        let addr = ip(a, &key)?;
        match net.netmask.as_deref() {
            Some(m) => with_mask(addr, m, &format!("{at}/netmask"))?,
            None if kind.is_static() => {
                return Err(Error::Metadata {
                    key: format!("{at}/netmask"),
                    problem: Problem::missing(),
                });
            }
            // A DHCP network naming its address alone: the lease says the
            // prefix.
            None => IpNet::from(addr),
        }
    };
    if Family::of(&address.addr()) != kind.family() {
        return Err(bad(key, "not of the network type's family", a));
    }
    Ok(Some(address))
}

/// Parses a `network_data.json` (see the module docs).
pub fn parse_network_data(body: &str) -> Result<NetworkData> {
    let document: Document = doc::read(body, NETWORK_DATA, NETWORK_DATA)?;
    let mut skipped = Vec::new();
    let (links, skipped_links) = parse_links(document.links, &mut skipped)?;
    let key = format!("{NETWORK_DATA}/networks");
    doc::at_most(&document.networks, MAX_NETWORKS, &key, "entries")?;
    let mut networks = Vec::new();
    for (i, net) in document.networks.iter().enumerate() {
        let at = format!("{key}/{i}");
        let id = net.id.clone().unwrap_or_default();
        let link = net.link.as_str();
        if skipped_links.contains(link) {
            skipped.push(format!("network {id}: on link {link}, which is skipped"));
            continue;
        }
        if !links.iter().any(|l| l.id == link) {
            return Err(bad(format!("{at}/link"), "names no link listed", link));
        }
        let Some(kind) = NetworkType::from_name(&net.kind) else {
            skipped.push(format!(
                "network {id}: type {:?} is not one cloud-init knows",
                net.kind
            ));
            continue;
        };
        let address = parse_address(net, &at, kind)?;
        if kind.is_static() && address.is_none() {
            return Err(Error::Metadata {
                key: format!("{at}/ip_address"),
                problem: Problem::missing(),
            });
        }
        doc::at_most(&net.routes, MAX_ROUTES, &format!("{at}/routes"), "entries")?;
        let routes = net
            .routes
            .iter()
            .enumerate()
            .map(|(j, r)| route(r, &format!("{at}/routes/{j}")))
            .collect::<Result<Vec<_>>>()?;
        if let Some(r) = routes.iter().find(|r| Family::of(&r.via) != kind.family()) {
            let reason = "a route of another family than the network's";
            return Err(bad(
                format!("{at}/routes"),
                reason,
                &format!("{} via {}", r.to, r.via),
            ));
        }
        networks.push(OsNetwork {
            id,
            link: link.to_owned(),
            kind,
            address,
            routes,
        });
    }
    Ok(NetworkData {
        links,
        networks,
        skipped,
    })
}

/// The NIC's metadata from its networks alone: listed addresses, their subnets
/// and the routes of every network of the link.
fn nic_metadata(data: &NetworkData, link: &OsLink) -> NicMetadata {
    let mut n = NicMetadata::empty(link.mac);
    n.device_number = Some(device_slot(link.mac));
    n.interface_id = Some(link.id.clone());
    for net in data.networks_of(link) {
        match net.address_for(link.mac) {
            Some(IpNet::V4(a)) => {
                n.local_ipv4s.push(a.addr());
                if a.prefix_len() < 32 {
                    n.subnet_ipv4_cidr_blocks.push(a.trunc());
                }
            }
            Some(IpNet::V6(a)) => {
                n.ipv6s.push(a.addr());
                if a.prefix_len() < 128 {
                    n.subnet_ipv6_cidr_blocks.push(a.trunc());
                }
            }
            None => {}
        }
        n.routes.extend(net.routes.iter().copied());
    }
    n.local_ipv4s.dedup();
    n.ipv6s.dedup();
    n.subnet_ipv4_cidr_blocks.sort();
    n.subnet_ipv4_cidr_blocks.dedup();
    n.subnet_ipv6_cidr_blocks.sort();
    n.subnet_ipv6_cidr_blocks.dedup();
    n.routes.dedup();
    n
}

/// Every NIC as the planner reads it (no lease taken in): the first link is the
/// primary.
pub fn network(data: &NetworkData) -> InstanceNetwork {
    let mut out = InstanceNetwork {
        primary_mac: data.primary().map(|l| l.mac),
        nics: data.links.iter().map(|l| nic_metadata(data, l)).collect(),
    };
    out.nics.sort_by_key(|n| n.mac);
    out
}

/// The network the event's NIC is planned with: [`network`], and for each lease
/// served by a DHCP network that lists no address of the family, the lease's
/// own address and network on the NIC (DHCP assigns them on `OpenStack`).
fn network_for(data: &NetworkData, event: &NicEvent) -> InstanceNetwork {
    let mut out = network(data);
    let Some(link) = data.link(event.mac()) else {
        return out;
    };
    let Some(nic) = out.nics.iter_mut().find(|n| n.mac == link.mac) else {
        return out;
    };
    for lease in event.leases() {
        let listed = data
            .networks_of(link)
            .any(|n| n.kind.family() == lease.family && n.address_for(link.mac).is_some());
        let dhcp = data
            .networks_of(link)
            .any(|n| n.kind.is_dhcp() && n.kind.family() == lease.family);
        if listed || !dhcp {
            continue;
        }
        let net = lease.interface_net().map(|n| n.trunc());
        match (lease.address, net) {
            (IpAddr::V4(a), Some(IpNet::V4(s))) => {
                nic.local_ipv4s.push(a);
                if s.prefix_len() < 32 {
                    nic.subnet_ipv4_cidr_blocks.push(s);
                }
            }
            (IpAddr::V6(a), Some(IpNet::V6(s))) => {
                nic.ipv6s.push(a);
                if s.prefix_len() < 128 {
                    nic.subnet_ipv6_cidr_blocks.push(s);
                }
            }
            _ => {}
        }
    }
    out
}

/// What the last answer says about `event`. Fails on an answer that does not
/// parse.
pub fn assess(event: &NicEvent, answer: &Answer) -> Result<Assessment> {
    let data = answer.read(parse_network_data)?;
    let mut missing = Vec::new();
    // Families whose address only the lease names (a DHCP network listing none):
    // the document will never name their subnet either.
    let mut from_lease = BTreeSet::new();
    if let Some(link) = data.link(event.mac()) {
        for lease in event.leases() {
            let nets: Vec<&OsNetwork> = data
                .networks_of(link)
                .filter(|n| n.kind.family() == lease.family)
                .collect();
            let lists_lease = nets.iter().any(|n| {
                n.address_for(link.mac)
                    .is_some_and(|a| a.addr() == lease.address)
            });
            let lists_other = nets.iter().any(|n| n.address_for(link.mac).is_some());
            let dhcp = nets.iter().any(|n| n.kind.is_dhcp());
            if dhcp && !lists_other {
                from_lease.insert(lease.family);
                continue;
            }
            if lists_lease {
                continue;
            }
            missing.push(if lists_other {
                // Another address than the lease's: not updated yet.
                Missing::LeaseAddress {
                    address: lease.address,
                }
            } else {
                Missing::Addresses {
                    family: lease.family,
                }
            });
        }
    }
    let network = network_for(&data, event);
    missing.extend(
        complete::missing(event, &network, &complete::check_config())?
            .into_iter()
            .filter(|m| !matches!(m, Missing::Subnet { family } if from_lease.contains(family))),
    );
    missing.sort();
    missing.dedup();
    Ok(Assessment { network, missing })
}

/// The NICs `data` gives addresses no DHCP server hands out, each with the
/// leases their addresses stand for, per family:
///
/// * a static network of the family and no other kind of network of it on the
///   link: the lease a DHCP server would have given ([`Reason::Metadata`]: the
///   planner adds the address), the first static address with its prefix, and
///   the network's default gateway as its router;
/// * an IPv6 network whose addresses come from router advertisements
///   (`ipv6_slaac`, `ipv6_dhcpv6-stateless`) vouching for an address
///   ([`OsNetwork::address_for`]), and no DHCPv6 network that hands one out:
///   that address ([`Reason::Autoconf`]: the kernel configures it, the planner
///   routes it and never adds it), with no router (the table's default goes
///   through the network's `::/0` route, else the router the kernel learned
///   from the advertisements).
///
/// The primary NIC (the first link) is never one: its DHCP client (or the
/// image's network configuration) owns it, and the main table routes it.
pub fn unleased(data: &NetworkData) -> Vec<UnleasedNic> {
    let mut out = Vec::new();
    for link in data.links.iter().skip(1) {
        let mut leases = Vec::new();
        for family in [Family::V4, Family::V6] {
            let nets: Vec<&OsNetwork> = data
                .networks_of(link)
                .filter(|n| n.kind.family() == family)
                .collect();
            if let Some(lease) = autoconf_lease(&nets, link.mac) {
                leases.push(lease);
                continue;
            }
            if nets.iter().any(|n| !n.kind.is_static()) {
                continue;
            }
            let Some((net, addr)) = nets.iter().find_map(|n| n.address.map(|a| (*n, a))) else {
                continue;
            };
            let routers = net
                .routes
                .iter()
                .filter(|r| r.to.prefix_len() == 0)
                .map(|r| r.via)
                .take(1)
                .collect();
            leases.push(Lease {
                family,
                address: addr.addr(),
                prefix_len: addr.prefix_len(),
                routers,
                reason: Reason::Metadata,
            });
        }
        if !leases.is_empty() {
            out.push(UnleasedNic {
                mac: link.mac,
                leases,
                link: None,
            });
        }
    }
    out
}

/// The [`Reason::Autoconf`] lease of one family's networks `nets` of the link
/// with `mac`: the address the first SLAAC network vouches for, unless a DHCP
/// network of the family hands one out (its client's lease is the NIC's then).
fn autoconf_lease(nets: &[&OsNetwork], mac: MacAddr) -> Option<Lease> {
    if nets.iter().any(|n| n.kind.is_dhcp()) {
        return None;
    }
    let address = nets
        .iter()
        .filter(|n| n.kind == NetworkType::Ipv6Slaac)
        .find_map(|n| n.address_for(mac))?;
    Some(Lease {
        family: Family::V6,
        address: address.addr(),
        prefix_len: address.prefix_len(),
        routers: Vec::new(),
        reason: Reason::Autoconf,
    })
}

/// A saved `network_data.json` as `leasehook plan --provider openstack` reads it.
pub fn parse_saved(text: &str) -> Result<InstanceNetwork> {
    parse_network_data(text).map(|d| network(&d))
}

#[cfg(test)]
pub(crate) mod tests;

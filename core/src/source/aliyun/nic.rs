// SPDX-License-Identifier: Apache-2.0
//! Pure: what one NIC event needs from Alibaba Cloud ECS's metadata service, what
//! to ask for next, what the answers mean as cloud-neutral NIC metadata, and
//! whether they agree with the lease (the consistency decision of SPEC §3.5).
//!
//! # What is fetched
//!
//! The ECS tree is EC2's shape with other keys: the top-level `meta-data/mac`
//! names the primary NIC (ECS: "the MAC of eth0"), and each NIC has a folder
//! `network/interfaces/macs/<mac>/`. The keys a lease's family needs are
//! required, so no folder listing is read: a 404 is "not there (yet)". The keys
//! and their formats are Alibaba's "instance metadata" page
//! (<https://help.aliyun.com/zh/ecs/user-guide/view-instance-metadata>), which
//! lists these IPv6 keys for an ENI: `ipv6s`, `ipv6-prefixes`, `ipv6-gateway`,
//! `vswitch-ipv6-cidr-block` and `vpc-ipv6-cidr-blocks` (the VPC's /56, not
//! read, as `vpc-cidr-block` is not: the table routes the vSwitch's block).
//!
//! | key | needed for | becomes |
//! |---|---|---|
//! | `primary-ip-address` | every lease (read first: the folder exists once it answers) | the first of the NIC's IPv4 addresses |
//! | `private-ipv4s` | DHCPv4 | the NIC's IPv4 addresses (a JSON list, the primary among them); must hold the leased address |
//! | `vswitch-cidr-block` | DHCPv4 | the IPv4 subnet (the vSwitch's block) |
//! | `netmask` | DHCPv4, only while `vswitch-cidr-block` answers 404 | the subnet, from `primary-ip-address` and the mask |
//! | `gateway` | DHCPv4 | a check: it must lie in the subnet; the subnet counts as known only once it answers |
//! | `ipv6s` | DHCPv6 | the IPv6 addresses (`[a,b]`, brackets without quotes, not JSON); must hold the leased address |
//! | `vswitch-ipv6-cidr-block` | DHCPv6 (required) | the IPv6 subnet (a /64 on ECS) |
//! | `ipv6-gateway` | DHCPv6, asked once (404: none) | the table's IPv6 default route (a `::/0` route) and a router no NIC may hold; it must lie in the subnet or be link-local. Without it the default goes through the router the kernel learned from RAs |
//! | `ipv6-prefixes` | DHCPv6, asked once (404: none) | delegated IPv6 prefixes (one CIDR, or a list in `ipv6s`'s forms), each a rule source |
//!
//! A DHCPv4 event costs five `GET`s when the metadata already agrees (`mac`,
//! `primary-ip-address`, `private-ipv4s`, `vswitch-cidr-block`, `gateway`), a
//! DHCPv6 event six (`mac`, `primary-ip-address`, `ipv6s`,
//! `vswitch-ipv6-cidr-block`, `ipv6-gateway`, `ipv6-prefixes`), plus the
//! token's `PUT` when no cached token is fresh. What is absent or does not yet
//! say what the lease proves is asked again in the next round, nothing else.
//! Each family waits for its own keys only: a DHCPv4 event never asks an IPv6
//! key (an IPv6 key published late never holds the IPv4 lease), and a DHCPv6
//! event is complete once `ipv6s` lists the leased address and the vSwitch's
//! IPv6 block answers.
//!
//! ECS has no IPv6-only ENI: every ENI has a primary private IPv4 address from
//! its vSwitch's IPv4 block, IPv6 is an addition to a vSwitch
//! (<https://www.alibabacloud.com/help/en/ecs/user-guide/ip-address>), so
//! `primary-ip-address` stays the folder's probe for both families.
//!
//! # The table number
//!
//! ECS has no `device-number` (nor a network card): nothing in the metadata says
//! where a NIC sits. What is fixed for a NIC's life is its MAC: ECS gives an
//! elastic network interface its MAC when it is created, and it keeps it through
//! reboots, stops, detaching and attaching again. So the NIC's "device number" is
//! [`device_slot`], a pure function of the MAC in `1..=9999`, and its table is
//! `table_base + slot` (rule priority `priority_base + slot`, at most 19999 with
//! the defaults, before the main table's 32766). The same NIC gets the same table
//! on every event, boot and instance it is attached to, whatever the interface is
//! called and in whatever order NICs come and go, with no state to keep. Two NICs
//! whose slots collide (about one pair in ten thousand) are caught before any
//! write: the second one's plan is refused with the table held by the first
//! (`leasehook status` names it), never sharing it. The primary's slot is never 0,
//! so the planner's "device 0 on a secondary" rule does not apply.
//!
//! # When the metadata agrees
//!
//! The answers become one [`NicMetadata`]: what [`crate::plan::plan`] would list
//! as [`Missing`] for the event's link and lease (and waiting can fix), listed
//! without planning by [`complete::missing`], is what the wait is still waiting
//! for, so the wait and the plan cannot disagree about "complete".

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use serde::{Deserialize, Deserializer, de};
use serde_json::Value;

use crate::constants::IMDS_META_DATA;
use crate::error::{Error, Problem, Result};
use crate::metadata::MACS_PATH;
use crate::model::{Family, InstanceNetwork, MacAddr, Missing, NicMetadata, NicRoute};
use crate::source::provider::complete;
use crate::source::provider::doc::{self, Answer};
pub use crate::source::provider::slot::{SLOTS, device_slot};
pub use crate::source::provider::{Assessment, NicEvent};

/// The most addresses one list (`private-ipv4s`, `ipv6s`) may hold: ECS allows a
/// few dozen per NIC; more is not the metadata service talking.
pub const MAX_ADDRESSES: usize = 256;

/// A key of a MAC folder that leasehook reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NicKey {
    /// `primary-ip-address`.
    PrimaryIpAddress,
    /// `private-ipv4s` (a JSON list).
    PrivateIpv4s,
    /// `vswitch-cidr-block`.
    VswitchCidrBlock,
    /// `netmask`.
    Netmask,
    /// `gateway`.
    Gateway,
    /// `ipv6s` (`[a,b]`: brackets without quotes).
    Ipv6s,
    /// `vswitch-ipv6-cidr-block`.
    VswitchIpv6CidrBlock,
    /// `ipv6-gateway`.
    Ipv6Gateway,
    /// `ipv6-prefixes`.
    Ipv6Prefixes,
    /// `network-interface-id` (the boot stage's, for logs and instance-data).
    NetworkInterfaceId,
}

impl NicKey {
    /// Every key, in the order they are asked for.
    pub const ALL: [Self; 10] = [
        Self::PrimaryIpAddress,
        Self::PrivateIpv4s,
        Self::VswitchCidrBlock,
        Self::Netmask,
        Self::Gateway,
        Self::Ipv6s,
        Self::VswitchIpv6CidrBlock,
        Self::Ipv6Gateway,
        Self::Ipv6Prefixes,
        Self::NetworkInterfaceId,
    ];

    /// The key's name in the folder.
    pub fn name(self) -> &'static str {
        match self {
            Self::PrimaryIpAddress => "primary-ip-address",
            Self::PrivateIpv4s => "private-ipv4s",
            Self::VswitchCidrBlock => "vswitch-cidr-block",
            Self::Netmask => "netmask",
            Self::Gateway => "gateway",
            Self::Ipv6s => "ipv6s",
            Self::VswitchIpv6CidrBlock => "vswitch-ipv6-cidr-block",
            Self::Ipv6Gateway => "ipv6-gateway",
            Self::Ipv6Prefixes => "ipv6-prefixes",
            Self::NetworkInterfaceId => "network-interface-id",
        }
    }

    /// The key a folder entry names, if leasehook reads it.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// One request of the wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Request {
    /// The top-level `meta-data/mac`: the primary NIC.
    PrimaryMac,
    /// One key of the event's MAC folder.
    Key(NicKey),
}

impl Request {
    /// The request's path below the base URL.
    pub fn path(self, mac: MacAddr) -> String {
        match self {
            Self::PrimaryMac => format!("{IMDS_META_DATA}/mac"),
            Self::Key(k) => key_path(mac, k),
        }
    }
}

/// `/latest/meta-data/network/interfaces/macs/<mac>/<key>`.
pub fn key_path(mac: MacAddr, key: NicKey) -> String {
    format!("{IMDS_META_DATA}/{MACS_PATH}/{mac}/{}", key.name())
}

/// Everything fetched so far for one event: the last answer to each request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fetched {
    answers: BTreeMap<Request, Answer>,
}

impl Fetched {
    /// Nothing fetched yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the answer to `request` (`None` for 404).
    pub fn record(&mut self, request: Request, answer: Option<String>) {
        self.answers.insert(request, answer.into());
    }

    fn answer(&self, request: Request) -> &Answer {
        self.answers.get(&request).unwrap_or(&Answer::NotAsked)
    }

    /// Whether the MAC folder is known to exist: its `primary-ip-address`
    /// answered.
    pub fn folder_exists(&self) -> bool {
        self.value(NicKey::PrimaryIpAddress).is_some()
    }

    fn value(&self, k: NicKey) -> Option<&str> {
        match self.answer(Request::Key(k)) {
            Answer::Body(v) => Some(v.as_str()),
            Answer::NotAsked | Answer::NotFound => None,
        }
    }

    fn is_absent(&self, k: NicKey) -> bool {
        *self.answer(Request::Key(k)) == Answer::NotFound
    }

    /// The folder's keys that answered, with their bodies.
    fn folder(&self) -> BTreeMap<NicKey, String> {
        NicKey::ALL
            .into_iter()
            .filter_map(|k| Some((k, self.value(k)?.to_owned())))
            .collect()
    }
}

/// The metadata error for `key` of `mac`'s folder.
fn bad(mac: MacAddr, key: NicKey, reason: impl Into<String>, value: &str) -> Error {
    Error::Metadata {
        key: format!("{MACS_PATH}/{mac}/{}", key.name()),
        problem: Problem::bad(reason, value),
    }
}

/// A list of addresses, at most [`MAX_ADDRESSES`], each an address of the
/// family, duplicates dropped, order kept. `private-ipv4s` is a JSON list
/// (`["192.168.0.10", "192.168.0.11"]`), read strictly as a list of strings
/// (through [`crate::source::provider::doc`]). ECS writes `ipv6s` differently:
/// `[2408:4000::20,2408:4000::21]`, brackets and commas without quotes, which is
/// not JSON (Alibaba's terway CNI and cloud-init's Aliyun tests read it so); that
/// form is taken for `ipv6s` (and `ipv6-prefixes`), and a JSON list there too.
pub fn parse_address_list<A: std::str::FromStr + PartialEq>(
    mac: MacAddr,
    key: NicKey,
    text: &str,
) -> Result<Vec<A>> {
    let path = format!("{MACS_PATH}/{mac}/{}", key.name());
    let items: Vec<String> = match serde_json::from_str::<Value>(text.trim()) {
        Ok(value) => doc::from_value(&value, &path)?,
        Err(e) => match (key, unquoted_list(text)) {
            (NicKey::Ipv6s | NicKey::Ipv6Prefixes, Some(items)) => items,
            _ => return Err(bad(mac, key, format!("not a JSON list ({e})"), text)),
        },
    };
    doc::at_most(&items, MAX_ADDRESSES, &path, "addresses")?;
    let mut out: Vec<A> = Vec::with_capacity(items.len());
    for (i, s) in items.iter().enumerate() {
        let a: A = s
            .parse()
            .map_err(|_| doc::bad(format!("{path}/{i}"), "not an address of the family", s))?;
        if !out.contains(&a) {
            out.push(a);
        }
    }
    Ok(out)
}

/// The items of ECS's unquoted list, `[a,b]` (`[]`: none), white space around
/// each allowed; `None` when `text` is not one (no brackets, a quote, a bracket
/// inside, an empty item).
fn unquoted_list(text: &str) -> Option<Vec<String>> {
    let inner = text.trim().strip_prefix('[')?.strip_suffix(']')?.trim();
    if inner.contains(['"', '[', ']']) {
        return None;
    }
    if inner.is_empty() {
        return Some(Vec::new());
    }
    inner
        .split(',')
        .map(|item| {
            Some(item.trim())
                .filter(|i| !i.is_empty())
                .map(str::to_owned)
        })
        .collect()
}

/// One value of the family `T` (an address or a CIDR block), surrounding white
/// space allowed.
fn parse_one<T: std::str::FromStr>(mac: MacAddr, key: NicKey, text: &str, what: &str) -> Result<T> {
    text.trim()
        .parse()
        .map_err(|_| bad(mac, key, format!("not {what}"), text))
}

/// A dotted-quad netmask's prefix length; a mask whose ones are not contiguous is
/// refused.
fn netmask_prefix(mac: MacAddr, text: &str) -> Result<u8> {
    let mask: Ipv4Addr = parse_one(mac, NicKey::Netmask, text, "an IPv4 netmask")?;
    let bits = u32::from(mask);
    let ones = bits.leading_ones();
    if bits.checked_shl(ones).unwrap_or(0) != 0 {
        return Err(bad(mac, NicKey::Netmask, "not a contiguous netmask", text));
    }
    u8::try_from(ones).map_err(|_| bad(mac, NicKey::Netmask, "out of range", text))
}

/// The NIC's metadata from its folder's answers (`folder`: key → body, the keys
/// it does not have left out), in the cloud-neutral shape the planner reads.
/// Fails on a value that does not parse, naming its key.
pub fn parse_folder(mac: MacAddr, folder: &BTreeMap<NicKey, String>) -> Result<NicMetadata> {
    let mut nic = NicMetadata::empty(mac);
    nic.device_number = Some(device_slot(mac));
    let primary: Option<Ipv4Addr> = folder
        .get(&NicKey::PrimaryIpAddress)
        .map(|v| parse_one(mac, NicKey::PrimaryIpAddress, v, "an IPv4 address"))
        .transpose()?;
    let private: Vec<Ipv4Addr> = folder
        .get(&NicKey::PrivateIpv4s)
        .map(|v| parse_address_list(mac, NicKey::PrivateIpv4s, v))
        .transpose()?
        .unwrap_or_default();
    // The primary first, as EC2's `local-ipv4s`: the others become secondary
    // addresses. Without the list, the NIC's addresses are not known yet.
    if !private.is_empty() {
        nic.local_ipv4s.extend(primary);
        nic.local_ipv4s
            .extend(private.iter().filter(|a| Some(**a) != primary));
    }
    let subnet: Option<Ipv4Net> = match (
        folder.get(&NicKey::VswitchCidrBlock),
        folder.get(&NicKey::Netmask),
        primary,
    ) {
        (Some(block), _, _) => Some(
            parse_one::<Ipv4Net>(mac, NicKey::VswitchCidrBlock, block, "an IPv4 CIDR block")?
                .trunc(),
        ),
        (None, Some(mask), Some(p)) => {
            let len = netmask_prefix(mac, mask)?;
            Ipv4Net::new(p, len).ok().map(|n| n.trunc())
        }
        _ => None,
    };
    let gateway: Option<Ipv4Addr> = folder
        .get(&NicKey::Gateway)
        .map(|v| parse_one(mac, NicKey::Gateway, v, "an IPv4 address"))
        .transpose()?;
    if let (Some(g), Some(s)) = (gateway, subnet)
        && !s.contains(&g)
    {
        return Err(bad(
            mac,
            NicKey::Gateway,
            format!("not in the NIC's subnet {s}"),
            &g.to_string(),
        ));
    }
    // The subnet counts as known once the gateway is: a vSwitch whose gateway
    // the service does not name yet is not propagated.
    if let (Some(s), Some(g)) = (subnet, gateway) {
        nic.subnet_ipv4_cidr_blocks.push(s);
        // The NIC's default gateway when the lease names no router (ECS's DHCP
        // names one on every NIC), through the address gate.
        nic.routes.push(NicRoute {
            to: IpNet::V4(Ipv4Net::default()),
            via: IpAddr::V4(g),
        });
    }
    nic.gateways.extend(gateway.map(std::net::IpAddr::V4));
    parse_ipv6(mac, folder, &mut nic)?;
    if let Some(v) = folder.get(&NicKey::NetworkInterfaceId) {
        let id = v.trim();
        if id.is_empty()
            || id.len() > 64
            || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err(bad(mac, NicKey::NetworkInterfaceId, "not an ENI id", v));
        }
        nic.interface_id = Some(id.to_owned());
    }
    Ok(nic)
}

/// The folder's IPv6 keys into `nic`: `ipv6s` (the addresses), the
/// `vswitch-ipv6-cidr-block` (the subnet), `ipv6-gateway` (the default route of
/// the NIC's IPv6 table, a `::/0` [`NicRoute`], and one of its routers: it must
/// lie in the subnet, or be link-local) and `ipv6-prefixes` (delegated
/// prefixes). Each is read as strictly as the IPv4 keys: a value that does not
/// parse fails, naming its key; what is well formed but no NIC may hold (a /0,
/// a metadata service's address, another NIC's address, a gateway that is an
/// address of the NIC) is the planner's gate's to refuse, as for IPv4.
fn parse_ipv6(
    mac: MacAddr,
    folder: &BTreeMap<NicKey, String>,
    nic: &mut NicMetadata,
) -> Result<()> {
    if let Some(v) = folder.get(&NicKey::Ipv6s) {
        nic.ipv6s = parse_address_list::<Ipv6Addr>(mac, NicKey::Ipv6s, v)?;
    }
    let subnet: Option<Ipv6Net> = folder
        .get(&NicKey::VswitchIpv6CidrBlock)
        .map(|v| parse_one(mac, NicKey::VswitchIpv6CidrBlock, v, "an IPv6 CIDR block"))
        .transpose()?
        .map(|b: Ipv6Net| b.trunc());
    nic.subnet_ipv6_cidr_blocks.extend(subnet);
    let gateway: Option<Ipv6Addr> = folder
        .get(&NicKey::Ipv6Gateway)
        .map(|v| parse_one(mac, NicKey::Ipv6Gateway, v, "an IPv6 address"))
        .transpose()?;
    if let Some(g) = gateway {
        // ECS's gateway is an address of the vSwitch's block (Alibaba's example:
        // `2408:...:a204:ffff:ffff:ffff:fff7` in `2408:...:a204::/64`); a
        // link-local one is on the link by definition, as an RA's router is.
        if let Some(s) = subnet
            && !s.contains(&g)
            && !g.is_unicast_link_local()
        {
            return Err(bad(
                mac,
                NicKey::Ipv6Gateway,
                format!("not in the NIC's IPv6 subnet {s} nor link-local"),
                &g.to_string(),
            ));
        }
        // The IPv6 default route of the NIC's table goes through the router
        // the cloud publishes (ahead of the RA's), and that router is never an
        // address or a rule source of any NIC.
        nic.routes.push(NicRoute {
            to: IpNet::V6(Ipv6Net::default()),
            via: IpAddr::V6(g),
        });
        nic.gateways.push(IpAddr::V6(g));
    }
    if let Some(v) = folder.get(&NicKey::Ipv6Prefixes) {
        nic.ipv6_prefixes = parse_prefix_list(mac, v)?;
    }
    Ok(())
}

/// `ipv6-prefixes`: Alibaba's page shows one prefix
/// (`2001:db8:1234:1a00:XXXX::/80`) and calls the key a list; it is read as
/// one CIDR block or a list of them in `ipv6s`'s forms (`[a,b]` unquoted, or a
/// JSON list), at most [`MAX_ADDRESSES`], duplicates dropped, each truncated
/// to its network.
fn parse_prefix_list(mac: MacAddr, text: &str) -> Result<Vec<Ipv6Net>> {
    let key = NicKey::Ipv6Prefixes;
    let items: Vec<Ipv6Net> = if text.trim().starts_with('[') {
        parse_address_list(mac, key, text)?
    } else {
        vec![parse_one(
            mac,
            key,
            text,
            "an IPv6 CIDR block or a list of them",
        )?]
    };
    let mut out: Vec<Ipv6Net> = Vec::with_capacity(items.len());
    for p in items.into_iter().map(|p| p.trunc()) {
        if !out.contains(&p) {
            out.push(p);
        }
    }
    Ok(out)
}

/// The primary MAC `meta-data/mac` names.
fn parse_primary(text: &str) -> Result<MacAddr> {
    text.trim().parse().map_err(|problem| Error::Metadata {
        key: "mac".to_owned(),
        problem,
    })
}

/// The keys `event`'s leases need, in [`NicKey::ALL`] order (the folder probe
/// first; `netmask` only as a fallback, see [`next_request`]).
pub fn keys(event: &NicEvent) -> Vec<NicKey> {
    let has = |f: Family| event.leases().iter().any(|l| l.family == f);
    let mut out = vec![NicKey::PrimaryIpAddress];
    if has(Family::V4) {
        out.extend([
            NicKey::PrivateIpv4s,
            NicKey::VswitchCidrBlock,
            NicKey::Gateway,
        ]);
    }
    if has(Family::V6) {
        out.extend([
            NicKey::Ipv6s,
            NicKey::VswitchIpv6CidrBlock,
            NicKey::Ipv6Gateway,
            NicKey::Ipv6Prefixes,
        ]);
    }
    out
}

/// Parses what was fetched and lists what its plan (`ec2-net-utils` scheme, which
/// numbers the table from [`device_slot`]) still lacks ([`complete::missing`]). Fails on a value
/// that does not parse, naming its key.
pub fn assess(event: &NicEvent, fetched: &Fetched) -> Result<Assessment> {
    let primary_mac = match fetched.answer(Request::PrimaryMac) {
        Answer::Body(v) => Some(parse_primary(v)?),
        Answer::NotAsked | Answer::NotFound => None,
    };
    let mut nics = Vec::new();
    if fetched.folder_exists() {
        nics.push(parse_folder(event.mac(), &fetched.folder())?);
    }
    let network = InstanceNetwork { primary_mac, nics };
    complete::assess(event, network)
}

/// The keys that answer a missing item.
fn keys_for(missing: &Missing, fetched: &Fetched) -> Vec<NicKey> {
    let family = |a: &IpAddr| Family::of(a);
    match missing {
        Missing::MacFolder => vec![NicKey::PrimaryIpAddress],
        Missing::LeaseAddress { address } => match family(address) {
            Family::V4 => vec![NicKey::PrivateIpv4s],
            Family::V6 => vec![NicKey::Ipv6s],
        },
        Missing::Addresses { family: Family::V4 } => vec![NicKey::PrivateIpv4s],
        Missing::Addresses { family: Family::V6 } => vec![NicKey::Ipv6s],
        Missing::Subnet { family: Family::V4 } => {
            // Whatever of the block (or, without it, the mask) and the gateway
            // did not answer.
            let mut out = Vec::new();
            if fetched.value(NicKey::VswitchCidrBlock).is_none() {
                out.push(NicKey::VswitchCidrBlock);
                if fetched.is_absent(NicKey::VswitchCidrBlock) {
                    out.push(NicKey::Netmask);
                }
            }
            if fetched.value(NicKey::Gateway).is_none() {
                out.push(NicKey::Gateway);
            }
            out
        }
        Missing::Subnet { family: Family::V6 } => vec![NicKey::VswitchIpv6CidrBlock],
        _ => Vec::new(),
    }
}

/// The next request of a round that started from `missing` and has asked
/// `asked`: `mac` once (again while it is missing), then the folder probe
/// `primary-ip-address` (while it answers 404 the round ends there: no other key
/// can be there), then each key the leases need that was not read yet or that
/// `missing` needs again; `netmask` only while `vswitch-cidr-block` answers 404.
pub fn next_request(
    event: &NicEvent,
    fetched: &Fetched,
    missing: &[Missing],
    asked: &BTreeSet<Request>,
) -> Option<Request> {
    let again: BTreeSet<NicKey> = missing.iter().flat_map(|m| keys_for(m, fetched)).collect();
    let due = |r: &Request| !asked.contains(r);
    if (*fetched.answer(Request::PrimaryMac) == Answer::NotAsked
        || missing.contains(&Missing::PrimaryMac))
        && due(&Request::PrimaryMac)
    {
        return Some(Request::PrimaryMac);
    }
    if !fetched.folder_exists() {
        let probe = Request::Key(NicKey::PrimaryIpAddress);
        return due(&probe).then_some(probe);
    }
    let mut wanted = keys(event);
    if fetched.is_absent(NicKey::VswitchCidrBlock) && wanted.contains(&NicKey::VswitchCidrBlock) {
        wanted.push(NicKey::Netmask);
    }
    wanted
        .into_iter()
        .filter(|k| *fetched.answer(Request::Key(*k)) == Answer::NotAsked || again.contains(k))
        .map(Request::Key)
        .find(due)
}

/// The IP network of a family-neutral CIDR, for tests and callers that print.
#[must_use]
pub fn subnet_of(nic: &NicMetadata, family: Family) -> Option<IpNet> {
    match family {
        Family::V4 => nic.subnet_ipv4_cidr_blocks.first().map(|n| IpNet::V4(*n)),
        Family::V6 => nic.subnet_ipv6_cidr_blocks.first().map(|n| IpNet::V6(*n)),
    }
}

/// A saved ECS metadata tree: `{"latest": {"meta-data": M}}`, `{"meta-data": M}`
/// or the meta-data `M` itself, whichever it holds first.
#[derive(Deserialize)]
struct SavedTree {
    latest: Option<SavedLatest>,
    #[serde(rename = "meta-data")]
    meta_data: Option<SavedMetaData>,
    mac: Option<SavedMac>,
    network: Option<SavedNetwork>,
}

#[derive(Deserialize)]
struct SavedLatest {
    #[serde(rename = "meta-data")]
    meta_data: Option<SavedMetaData>,
}

/// The keys of the meta-data read.
#[derive(Deserialize)]
struct SavedMetaData {
    mac: Option<SavedMac>,
    network: Option<SavedNetwork>,
}

#[derive(Deserialize)]
struct SavedMac(#[serde(deserialize_with = "doc::mac")] MacAddr);

#[derive(Deserialize)]
struct SavedNetwork {
    interfaces: Option<SavedInterfaces>,
}

/// `network/interfaces/macs`: a folder per MAC.
#[derive(Deserialize)]
struct SavedInterfaces {
    macs: Option<BTreeMap<String, SavedFolder>>,
}

/// A MAC folder: each key of [`NicKey::ALL`] as the service answers it (text),
/// or `private-ipv4s` and `ipv6s` as a list.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct SavedFolder {
    #[serde(default, deserialize_with = "saved_answer")]
    primary_ip_address: Option<String>,
    #[serde(default, deserialize_with = "saved_answer")]
    private_ipv4s: Option<String>,
    #[serde(default, deserialize_with = "saved_answer")]
    vswitch_cidr_block: Option<String>,
    #[serde(default, deserialize_with = "saved_answer")]
    netmask: Option<String>,
    #[serde(default, deserialize_with = "saved_answer")]
    gateway: Option<String>,
    #[serde(default, deserialize_with = "saved_answer")]
    ipv6s: Option<String>,
    #[serde(default, deserialize_with = "saved_answer")]
    vswitch_ipv6_cidr_block: Option<String>,
    #[serde(default, deserialize_with = "saved_answer")]
    ipv6_gateway: Option<String>,
    #[serde(default, deserialize_with = "saved_answer")]
    ipv6_prefixes: Option<String>,
    #[serde(default, deserialize_with = "saved_answer")]
    network_interface_id: Option<String>,
}

impl SavedFolder {
    /// The answers, as the hook would have fetched them.
    fn answers(self) -> BTreeMap<NicKey, String> {
        [
            (NicKey::PrimaryIpAddress, self.primary_ip_address),
            (NicKey::PrivateIpv4s, self.private_ipv4s),
            (NicKey::VswitchCidrBlock, self.vswitch_cidr_block),
            (NicKey::Netmask, self.netmask),
            (NicKey::Gateway, self.gateway),
            (NicKey::Ipv6s, self.ipv6s),
            (NicKey::VswitchIpv6CidrBlock, self.vswitch_ipv6_cidr_block),
            (NicKey::Ipv6Gateway, self.ipv6_gateway),
            (NicKey::Ipv6Prefixes, self.ipv6_prefixes),
            (NicKey::NetworkInterfaceId, self.network_interface_id),
        ]
        .into_iter()
        .filter_map(|(k, v)| Some((k, v?)))
        .collect()
    }
}

/// A saved answer: its text, or a list's JSON text (what [`parse_folder`] reads
/// for `private-ipv4s`); `null` is none.
fn saved_answer<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::String(text) => Ok(Some(text)),
        list @ Value::Array(_) => Ok(Some(list.to_string())),
        _ => Err(de::Error::custom("not text or a list")),
    }
}

/// Parses a saved ECS metadata tree for `leasehook plan --provider aliyun`: a JSON
/// object as the EC2 tree (`{"latest": {"meta-data": {...}}}`, or the `meta-data`
/// object itself) with `mac` and `network/interfaces/macs/<mac>/` folders whose
/// keys are the service's answers (a list for `private-ipv4s` and `ipv6s`, or its
/// text), read through [`doc`]: other keys are ignored, a key read of another
/// shape is an error naming its path. Each folder goes through [`parse_folder`],
/// so the tables are those a hook would use.
pub fn parse_saved(text: &str) -> Result<InstanceNetwork> {
    let tree: SavedTree = doc::read(text, "ECS metadata JSON", "")?;
    let md = match (tree.latest.and_then(|l| l.meta_data), tree.meta_data) {
        (Some(md), _) | (None, Some(md)) => md,
        (None, None) => SavedMetaData {
            mac: tree.mac,
            network: tree.network,
        },
    };
    let macs = md
        .network
        .and_then(|n| n.interfaces)
        .and_then(|i| i.macs)
        .unwrap_or_default();
    let mut nics = Vec::new();
    for (name, folder) in macs {
        let mac: MacAddr = name
            .parse()
            .map_err(|p: Problem| doc::bad(format!("{MACS_PATH}/{name}"), p.reason, &name))?;
        nics.push(parse_folder(mac, &folder.answers())?);
    }
    nics.sort_by_key(|n| n.mac);
    Ok(InstanceNetwork {
        primary_mac: md.mac.map(|m| m.0),
        nics,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{IfName, Lease, Reason};

    const PRIMARY: &str = "00:16:3e:00:00:01";
    const SECONDARY: &str = "00:16:3e:00:00:02";

    fn mac(s: &str) -> MacAddr {
        s.parse().unwrap()
    }

    fn event(addr: &str) -> NicEvent {
        let address: IpAddr = addr.parse().unwrap();
        let routers = match address {
            IpAddr::V4(_) => vec!["192.168.1.253".parse().unwrap()],
            IpAddr::V6(_) => vec![],
        };
        NicEvent::try_new(
            IfName::try_new("eth1").unwrap(),
            mac(SECONDARY),
            vec![Lease {
                family: Family::of(&address),
                address,
                prefix_len: 24,
                routers,
                reason: Reason::Bound,
            }],
        )
        .unwrap()
    }

    type Tree = BTreeMap<Request, &'static str>;

    fn good() -> Tree {
        [
            (Request::PrimaryMac, PRIMARY),
            (Request::Key(NicKey::PrimaryIpAddress), "192.168.1.20"),
            (
                Request::Key(NicKey::PrivateIpv4s),
                r#"["192.168.1.21", "192.168.1.20"]"#,
            ),
            (Request::Key(NicKey::VswitchCidrBlock), "192.168.1.0/24"),
            (Request::Key(NicKey::Netmask), "255.255.255.0"),
            (Request::Key(NicKey::Gateway), "192.168.1.253"),
        ]
        .into_iter()
        .collect()
    }

    /// One round against `tree`; returns what it asked.
    fn round(ev: &NicEvent, state: &mut Fetched, missing: &[Missing], tree: &Tree) -> Vec<Request> {
        let mut asked = BTreeSet::new();
        let mut order = Vec::new();
        while let Some(r) = next_request(ev, state, missing, &asked) {
            asked.insert(r);
            order.push(r);
            state.record(r, tree.get(&r).map(|v| (*v).to_owned()));
        }
        order
    }

    #[test]
    fn slots_are_stable_never_zero_and_spread() {
        assert_eq!(device_slot(mac(SECONDARY)), device_slot(mac(SECONDARY)));
        // The MAC as a number, modulo 9999, plus one.
        assert_eq!(
            u64::from(device_slot(mac(SECONDARY))),
            0x0016_3e00_0002_u64 % 9_999 + 1
        );
        let mut seen = BTreeSet::new();
        for last in 0..=255u8 {
            let s = device_slot(MacAddr::new([0x00, 0x16, 0x3e, 0x12, 0x34, last]));
            assert!((1..=SLOTS).contains(&s));
            seen.insert(s);
        }
        // Consecutive MACs never share a slot.
        assert_eq!(seen.len(), 256);
        assert!(device_slot(MacAddr::new([0; 6])) == 1);
        assert!(device_slot(MacAddr::new([0xff; 6])) <= SLOTS);
    }

    #[test]
    fn consistent_metadata_takes_five_requests_in_one_round() {
        let ev = event("192.168.1.20");
        let mut state = Fetched::new();
        let start = assess(&ev, &state).unwrap();
        let asked = round(&ev, &mut state, &start.missing, &good());
        assert_eq!(
            asked,
            [
                Request::PrimaryMac,
                Request::Key(NicKey::PrimaryIpAddress),
                Request::Key(NicKey::PrivateIpv4s),
                Request::Key(NicKey::VswitchCidrBlock),
                Request::Key(NicKey::Gateway),
            ]
        );
        let a = assess(&ev, &state).unwrap();
        assert!(a.is_complete(), "{:?}", a.missing);
        let nic = a.network.nic(mac(SECONDARY)).unwrap();
        // The primary address first, then the others.
        assert_eq!(
            nic.local_ipv4s,
            [
                "192.168.1.20".parse::<Ipv4Addr>().unwrap(),
                "192.168.1.21".parse().unwrap()
            ]
        );
        assert_eq!(nic.device_number, Some(device_slot(mac(SECONDARY))));
        assert_eq!(nic.network_card, None);
        assert_eq!(
            subnet_of(nic, Family::V4),
            Some("192.168.1.0/24".parse().unwrap())
        );
        assert_eq!(a.network.primary_mac, Some(mac(PRIMARY)));
        // Nothing more to ask.
        assert_eq!(
            next_request(&ev, &state, &a.missing, &BTreeSet::new()),
            None
        );
    }

    #[test]
    fn a_missing_folder_ends_the_round_at_the_probe_and_is_asked_again() {
        let ev = event("192.168.1.20");
        let mut state = Fetched::new();
        let only_mac: Tree = [(Request::PrimaryMac, PRIMARY)].into_iter().collect();
        assert_eq!(
            round(&ev, &mut state, &[], &only_mac),
            [Request::PrimaryMac, Request::Key(NicKey::PrimaryIpAddress)]
        );
        let a = assess(&ev, &state).unwrap();
        assert_eq!(a.missing, [Missing::MacFolder]);
        // The next round: the probe again (mac is known), then the rest.
        assert_eq!(
            round(&ev, &mut state, &a.missing, &good()),
            [
                Request::Key(NicKey::PrimaryIpAddress),
                Request::Key(NicKey::PrivateIpv4s),
                Request::Key(NicKey::VswitchCidrBlock),
                Request::Key(NicKey::Gateway),
            ]
        );
        assert!(assess(&ev, &state).unwrap().is_complete());
    }

    #[test]
    fn a_late_address_is_the_only_key_asked_again() {
        let ev = event("192.168.1.30");
        let mut state = Fetched::new();
        round(&ev, &mut state, &[], &good());
        let a = assess(&ev, &state).unwrap();
        assert_eq!(
            a.missing,
            [Missing::LeaseAddress {
                address: "192.168.1.30".parse().unwrap()
            }]
        );
        let mut later = good();
        later.insert(
            Request::Key(NicKey::PrivateIpv4s),
            r#"["192.168.1.20","192.168.1.30"]"#,
        );
        assert_eq!(
            round(&ev, &mut state, &a.missing, &later),
            [Request::Key(NicKey::PrivateIpv4s)]
        );
        assert!(assess(&ev, &state).unwrap().is_complete());
    }

    #[test]
    fn without_the_block_the_netmask_gives_the_subnet_and_the_gateway_is_required() {
        let ev = event("192.168.1.20");
        let mut tree = good();
        tree.remove(&Request::Key(NicKey::VswitchCidrBlock));
        tree.remove(&Request::Key(NicKey::Gateway));
        let mut state = Fetched::new();
        let asked = round(&ev, &mut state, &[], &tree);
        assert_eq!(asked.last(), Some(&Request::Key(NicKey::Netmask)));
        let a = assess(&ev, &state).unwrap();
        // The mask is there, the gateway is not: not known yet.
        assert_eq!(a.missing, [Missing::Subnet { family: Family::V4 }]);
        tree.insert(Request::Key(NicKey::Gateway), "192.168.1.253");
        assert_eq!(
            round(&ev, &mut state, &a.missing, &tree),
            [
                Request::Key(NicKey::VswitchCidrBlock),
                Request::Key(NicKey::Gateway),
                Request::Key(NicKey::Netmask),
            ]
        );
        let a = assess(&ev, &state).unwrap();
        assert!(a.is_complete(), "{:?}", a.missing);
        assert_eq!(
            subnet_of(&a.network.nics[0], Family::V4),
            Some("192.168.1.0/24".parse().unwrap())
        );
    }

    /// The IPv6 keys of eth1's folder as ECS writes them: `ipv6s` in brackets
    /// without quotes, the vSwitch's /64, a gateway inside it (Alibaba's
    /// example: `...:ffff:ffff:ffff:fff7`), one delegated /80.
    fn v6_tree() -> Tree {
        let mut tree = good();
        tree.insert(Request::Key(NicKey::Ipv6s), "[2408:4000::20,2408:4000::21]");
        tree.insert(Request::Key(NicKey::VswitchIpv6CidrBlock), "2408:4000::/64");
        tree.insert(
            Request::Key(NicKey::Ipv6Gateway),
            "2408:4000::ffff:ffff:ffff:fff7",
        );
        tree.insert(
            Request::Key(NicKey::Ipv6Prefixes),
            "2408:4000:0:0:8000::/80",
        );
        tree
    }

    #[test]
    fn ipv6_leases_read_the_ipv6_keys_only() {
        let ev = event("2408:4000::20");
        let tree = v6_tree();
        let mut state = Fetched::new();
        assert_eq!(
            round(&ev, &mut state, &[], &tree),
            [
                Request::PrimaryMac,
                Request::Key(NicKey::PrimaryIpAddress),
                Request::Key(NicKey::Ipv6s),
                Request::Key(NicKey::VswitchIpv6CidrBlock),
                Request::Key(NicKey::Ipv6Gateway),
                Request::Key(NicKey::Ipv6Prefixes),
            ]
        );
        let a = assess(&ev, &state).unwrap();
        assert!(a.is_complete(), "{:?}", a.missing);
        let nic = &a.network.nics[0];
        assert_eq!(nic.ipv6s.len(), 2);
        assert_eq!(
            subnet_of(nic, Family::V6),
            Some("2408:4000::/64".parse().unwrap())
        );
        // The gateway is the table's IPv6 default route and a router.
        let gw: IpAddr = "2408:4000::ffff:ffff:ffff:fff7".parse().unwrap();
        assert_eq!(
            nic.routes,
            [NicRoute {
                to: "::/0".parse().unwrap(),
                via: gw
            }]
        );
        assert_eq!(nic.gateways, [gw]);
        assert_eq!(
            nic.ipv6_prefixes,
            ["2408:4000:0:0:8000::/80".parse::<Ipv6Net>().unwrap()]
        );
        // IPv4 keys were not read: no IPv4 address, subnet or route.
        assert!(nic.local_ipv4s.is_empty() && nic.subnet_ipv4_cidr_blocks.is_empty());
    }

    #[test]
    fn a_late_ipv6_key_holds_only_the_ipv6_lease() {
        // The folder answers its IPv4 keys; no IPv6 key is published yet.
        let v4 = event("192.168.1.20");
        let mut state = Fetched::new();
        let asked = round(&v4, &mut state, &[], &good());
        assert!(
            asked.iter().all(|r| !matches!(
                r,
                Request::Key(
                    NicKey::Ipv6s
                        | NicKey::VswitchIpv6CidrBlock
                        | NicKey::Ipv6Gateway
                        | NicKey::Ipv6Prefixes
                )
            )),
            "{asked:?}"
        );
        assert!(assess(&v4, &state).unwrap().is_complete());

        // The DHCPv6 lease waits for `ipv6s` and the block, and only for them.
        let v6 = event("2408:4000::20");
        let mut state = Fetched::new();
        round(&v6, &mut state, &[], &good());
        let a = assess(&v6, &state).unwrap();
        assert_eq!(
            a.missing,
            [
                Missing::Subnet { family: Family::V6 },
                Missing::Addresses { family: Family::V6 }
            ]
        );
        let mut later = good();
        later.insert(Request::Key(NicKey::Ipv6s), "[2408:4000::20]");
        assert_eq!(
            round(&v6, &mut state, &a.missing, &later),
            [
                Request::Key(NicKey::Ipv6s),
                Request::Key(NicKey::VswitchIpv6CidrBlock)
            ]
        );
        let a = assess(&v6, &state).unwrap();
        assert_eq!(a.missing, [Missing::Subnet { family: Family::V6 }]);
        later.insert(Request::Key(NicKey::VswitchIpv6CidrBlock), "2408:4000::/64");
        assert_eq!(
            round(&v6, &mut state, &a.missing, &later),
            [Request::Key(NicKey::VswitchIpv6CidrBlock)]
        );
        // Complete without a gateway (404): the RA's router is the default.
        let a = assess(&v6, &state).unwrap();
        assert!(a.is_complete(), "{:?}", a.missing);
        assert!(a.network.nics[0].routes.is_empty());
    }

    #[test]
    fn ipv6_keys_are_read_strictly_naming_the_key() {
        let read = |key: NicKey, body: &str| {
            let mut folder: BTreeMap<NicKey, String> = [
                (NicKey::PrimaryIpAddress, "192.168.1.20"),
                (NicKey::Ipv6s, "[2408:4000::20]"),
                (NicKey::VswitchIpv6CidrBlock, "2408:4000::/64"),
            ]
            .into_iter()
            .map(|(k, v)| (k, v.to_owned()))
            .collect();
            folder.insert(key, body.to_owned());
            parse_folder(mac(SECONDARY), &folder)
        };
        for (key, body, want) in [
            (
                NicKey::VswitchIpv6CidrBlock,
                "2408:4000::",
                "not an IPv6 CIDR",
            ),
            (
                NicKey::VswitchIpv6CidrBlock,
                "192.168.1.0/24",
                "not an IPv6 CIDR",
            ),
            (NicKey::Ipv6Gateway, "192.168.1.253", "not an IPv6 address"),
            (NicKey::Ipv6Gateway, "2408:4000::/64", "not an IPv6 address"),
            (NicKey::Ipv6Gateway, "[2408:4000::1]", "not an IPv6 address"),
            (NicKey::Ipv6Gateway, "2408:4001::1", "not in the NIC's IPv6"),
            (NicKey::Ipv6Prefixes, "2408:4000::", "not an IPv6 CIDR"),
            (NicKey::Ipv6Prefixes, "[2408:4000::/80,x]", "not an address"),
            (NicKey::Ipv6Prefixes, "[2408:4000::/80", "not a JSON list"),
            (NicKey::Ipv6Prefixes, "[10.0.0.0/28]", "not an address"),
        ] {
            let e = read(key, body).unwrap_err().to_string();
            assert!(e.contains(want), "{key:?} {body:?}: {e}");
            assert!(
                e.contains(&format!("{SECONDARY}/{}", key.name())),
                "{key:?}: {e}"
            );
        }
        // A link-local gateway is on the link; white space is allowed.
        let nic = read(NicKey::Ipv6Gateway, " fe80::1\n").unwrap();
        assert_eq!(nic.gateways, ["fe80::1".parse::<IpAddr>().unwrap()]);
        // Prefixes: one, or a list in either form, duplicates dropped.
        let p: Vec<Ipv6Net> = vec![
            "2408:4000:0:0:8000::/80".parse().unwrap(),
            "2408:4000:0:0:9000::/80".parse().unwrap(),
        ];
        for text in [
            "[2408:4000:0:0:8000::/80,2408:4000:0:0:9000::/80]",
            r#"["2408:4000:0:0:8000::/80", "2408:4000:0:0:9000::/80", "2408:4000:0:0:8000::1/80"]"#,
        ] {
            assert_eq!(read(NicKey::Ipv6Prefixes, text).unwrap().ipv6_prefixes, p);
        }
        assert!(
            read(NicKey::Ipv6Prefixes, "[]")
                .unwrap()
                .ipv6_prefixes
                .is_empty()
        );
    }

    #[test]
    fn ipv6s_is_read_in_ecs_unquoted_form_and_as_json() {
        let m = mac(SECONDARY);
        let read = |text: &str| parse_address_list::<Ipv6Addr>(m, NicKey::Ipv6s, text);
        let two: Vec<Ipv6Addr> = vec![
            "2408:4000::20".parse().unwrap(),
            "2408:4000::21".parse().unwrap(),
        ];
        assert_eq!(read("[2408:4000::20,2408:4000::21]").unwrap(), two);
        assert_eq!(read(" [ 2408:4000::20 , 2408:4000::21 ]\n").unwrap(), two);
        assert_eq!(read(r#"["2408:4000::20","2408:4000::21"]"#).unwrap(), two);
        assert_eq!(read("[2408:4000::20,2408:4000::20]").unwrap(), two[..1]);
        assert!(read("[]").unwrap().is_empty());
        for (text, want) in [
            ("2408:4000::20", "not a JSON list"),
            ("[2408:4000::20", "not a JSON list"),
            ("[2408:4000::20,,2408:4000::21]", "not a JSON list"),
            (r#"["2408:4000::20",2408:4000::21]"#, "not a JSON list"),
            ("[[2408:4000::20]]", "not a JSON list"),
            ("[192.168.1.20]", "not an address of the family"),
            ("[2408:4000::20; rm -rf /]", "not an address of the family"),
        ] {
            let e = read(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
            assert!(e.contains(&format!("{SECONDARY}/ipv6s")), "{e}");
        }
        // `private-ipv4s` is a JSON list on ECS: the unquoted form is refused.
        let e = parse_address_list::<Ipv4Addr>(m, NicKey::PrivateIpv4s, "[192.168.1.20]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a JSON list"), "{e}");
    }

    #[test]
    fn garbage_lists_and_hostile_values_fail_naming_the_key() {
        let cases: [(NicKey, &str, &str); 13] = [
            (NicKey::PrivateIpv4s, "192.168.1.20", "not a JSON list"),
            (NicKey::PrivateIpv4s, "[", "not a JSON list"),
            (NicKey::PrivateIpv4s, r#"{"a": 1}"#, "not a JSON list"),
            (NicKey::PrivateIpv4s, "[1]", "not a string"),
            (
                NicKey::PrivateIpv4s,
                r#"["192.168.1.999"]"#,
                "not an address",
            ),
            (NicKey::PrivateIpv4s, r#"["2408::1"]"#, "not an address"),
            (
                NicKey::PrivateIpv4s,
                r#"["192.168.1.20; rm -rf /"]"#,
                "not an address",
            ),
            (NicKey::PrimaryIpAddress, "192.168.1.20/24", "not an IPv4"),
            (NicKey::VswitchCidrBlock, "192.168.1.0", "not an IPv4 CIDR"),
            (NicKey::Gateway, "10.0.0.1", "not in the NIC's subnet"),
            (NicKey::Netmask, "255.0.255.0", "not a contiguous"),
            (NicKey::Ipv6s, r#"["192.168.1.20"]"#, "not an address"),
            (NicKey::NetworkInterfaceId, "eni-1\n/etc", "not an ENI id"),
        ];
        for (key, body, want) in cases {
            let mut folder: BTreeMap<NicKey, String> = [
                (NicKey::PrimaryIpAddress, "192.168.1.20"),
                (NicKey::PrivateIpv4s, r#"["192.168.1.20"]"#),
                (NicKey::Gateway, "192.168.1.253"),
            ]
            .into_iter()
            .map(|(k, v)| (k, v.to_owned()))
            .collect();
            if key == NicKey::Netmask {
                folder.remove(&NicKey::VswitchCidrBlock);
            } else {
                folder.insert(NicKey::VswitchCidrBlock, "192.168.1.0/24".to_owned());
            }
            folder.insert(key, body.to_owned());
            let e = parse_folder(mac(SECONDARY), &folder)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{key:?} {body:?}: {e}");
            assert!(
                e.contains(&format!(
                    "network/interfaces/macs/{SECONDARY}/{}",
                    key.name()
                )),
                "{e}"
            );
        }
        let long = format!(
            "[{}]",
            vec![r#""192.168.1.20""#; MAX_ADDRESSES + 1].join(",")
        );
        let mut folder = BTreeMap::new();
        folder.insert(NicKey::PrivateIpv4s, long);
        let e = parse_folder(mac(SECONDARY), &folder)
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than 256"), "{e}");
        // Duplicates are one address; an empty list is no address.
        let mut folder = BTreeMap::new();
        folder.insert(NicKey::PrimaryIpAddress, "192.168.1.20".to_owned());
        folder.insert(
            NicKey::PrivateIpv4s,
            r#" ["192.168.1.20","192.168.1.20"] "#.to_owned(),
        );
        assert_eq!(
            parse_folder(mac(SECONDARY), &folder)
                .unwrap()
                .local_ipv4s
                .len(),
            1
        );
        folder.insert(NicKey::PrivateIpv4s, "[]".to_owned());
        assert!(
            parse_folder(mac(SECONDARY), &folder)
                .unwrap()
                .local_ipv4s
                .is_empty()
        );
        // A primary MAC that is not one.
        let ev = event("192.168.1.20");
        let mut state = Fetched::new();
        state.record(Request::PrimaryMac, Some("eth0".into()));
        assert!(assess(&ev, &state).unwrap_err().to_string().contains("mac"));
    }

    #[test]
    fn an_absent_list_is_waited_for_not_read_as_empty() {
        let ev = event("192.168.1.20");
        let mut tree = good();
        tree.remove(&Request::Key(NicKey::PrivateIpv4s));
        let mut state = Fetched::new();
        round(&ev, &mut state, &[], &tree);
        let a = assess(&ev, &state).unwrap();
        assert_eq!(a.missing, [Missing::Addresses { family: Family::V4 }]);
        assert_eq!(
            next_request(&ev, &state, &a.missing, &BTreeSet::new()),
            Some(Request::Key(NicKey::PrivateIpv4s))
        );
    }

    #[test]
    fn a_saved_tree_plans_as_the_hook_would_and_garbage_is_named() {
        let tree = r#"{"latest": {"meta-data": {"mac": "00:16:3e:00:00:01",
            "network": {"interfaces": {"macs": {
              "00:16:3e:00:00:02": {"primary-ip-address": "10.98.1.20",
                "private-ipv4s": ["10.98.1.20", "10.98.1.21"],
                "vswitch-cidr-block": "10.98.1.0/24", "gateway": "10.98.1.253"}}}}}}}"#;
        let md = parse_saved(tree).unwrap();
        let mac: MacAddr = "00:16:3e:00:00:02".parse().unwrap();
        assert_eq!(md.primary_mac, Some("00:16:3e:00:00:01".parse().unwrap()));
        let nic = md.nic(mac).unwrap();
        assert_eq!(nic.device_number, Some(device_slot(mac)));
        assert_eq!(nic.local_ipv4s.len(), 2);
        // The other two shapes: the meta-data, or the meta-data alone.
        let inner = &tree[tree.find("{\"mac\"").unwrap()..tree.len() - 2];
        assert_eq!(parse_saved(inner).unwrap(), md);
        assert_eq!(
            parse_saved(&format!("{{\"meta-data\": {inner}}}")).unwrap(),
            md
        );
        // Keys not read may be anything; null is absent.
        let odd = tree.replace(
            "\"gateway\"",
            "\"vpc-id\": {\"x\": [1]}, \"ipv6s\": null, \"gateway\"",
        );
        assert_eq!(parse_saved(&odd).unwrap(), md);
        let macs = "metadata latest/meta-data/network/interfaces/macs";
        for (bad, want) in [
            ("[".to_owned(), "ECS metadata JSON: EOF".to_owned()),
            // A key read of the wrong type.
            (
                tree.replace("\"10.98.1.253\"", "7"),
                format!("{macs}/00:16:3e:00:00:02/gateway: not text or a list (got \"7\")"),
            ),
            (
                tree.replace("\"00:16:3e:00:00:01\"", "[]"),
                "metadata latest/meta-data/mac: not a string (got \"[]\")".to_owned(),
            ),
            (
                r#"{"network": {"interfaces": []}}"#.to_owned(),
                "metadata network/interfaces: not a JSON object (got \"[]\")".to_owned(),
            ),
            // A value that does not parse.
            (
                tree.replace("\"00:16:3e:00:00:01\"", "\"eth0\""),
                "metadata latest/meta-data/mac: not a MAC address (aa:bb:cc:dd:ee:ff) (got \"eth0\")"
                    .to_owned(),
            ),
            (
                tree.replace("\"00:16:3e:00:00:02\"", "\"../x\""),
                "metadata network/interfaces/macs/../x: not a MAC address".to_owned(),
            ),
            (
                tree.replace("\"10.98.1.21\"", "7"),
                "metadata network/interfaces/macs/00:16:3e:00:00:02/private-ipv4s".to_owned(),
            ),
        ] {
            let e = parse_saved(&bad).unwrap_err().to_string();
            assert!(e.starts_with(&want), "{bad}: {e}");
        }
    }

    #[test]
    fn a_dual_stack_eni_plans_ipv6_through_ecs_gateway_in_its_subnet() {
        // ECS's shape (Alibaba's page): the gateway is an address of the
        // vSwitch's /64, not link-local.
        let tree = r#"{"mac": "00:16:3e:00:00:01", "network": {"interfaces": {"macs": {
              "00:16:3e:00:00:02": {"primary-ip-address": "192.168.1.20",
                "private-ipv4s": ["192.168.1.20"], "vswitch-cidr-block": "192.168.1.0/24",
                "gateway": "192.168.1.253", "ipv6s": "[2408:4000::20,2408:4000::21]",
                "vswitch-ipv6-cidr-block": "2408:4000::/64",
                "ipv6-gateway": "2408:4000::ffff:ffff:ffff:fff7",
                "ipv6-prefixes": "2408:4000:0:0:8000::/80"}}}}}"#;
        let md = parse_saved(tree).unwrap();
        let m = mac(SECONDARY);
        let links = [crate::model::Link {
            name: IfName::try_new("eth1").unwrap(),
            mac: m,
            ipv6_router: None,
        }];
        let leases = [crate::plan::InterfaceLease {
            interface: IfName::try_new("eth1").unwrap(),
            lease: Lease {
                family: Family::V6,
                address: "2408:4000::20".parse().unwrap(),
                prefix_len: 128,
                routers: vec![],
                reason: Reason::Bound,
            },
        }];
        let input = crate::plan::PlanInput::new(&md, &links, &leases);
        let p = crate::plan::plan(&input, &crate::plan::PlanConfig::default()).unwrap();
        let ip = &p.interfaces[0];
        let t = 10_000 + device_slot(m);
        let show = |v: &[String]| v.join("\n");
        let routes: Vec<String> = ip.routes.iter().map(ToString::to_string).collect();
        let rules: Vec<String> = ip.rules.iter().map(ToString::to_string).collect();
        assert_eq!(
            show(&routes),
            format!(
                "default via 2408:4000::ffff:ffff:ffff:fff7 dev eth1 table {t}\n\
                 2408:4000::/64 dev eth1 table {t}"
            ),
            "{ip:?}"
        );
        assert_eq!(
            show(&rules),
            format!(
                "from 2408:4000::20/128 lookup {t} priority {t}\n\
                 from 2408:4000::21/128 lookup {t} priority {t}\n\
                 from 2408:4000:0:0:8000::/80 lookup {t} priority {t}"
            )
        );
        assert!(ip.refused.is_empty() && ip.missing.is_empty(), "{ip:?}");
        // The gateway is never an address of the NIC.
        let bad = tree.replace("2408:4000::21]", "2408:4000::ffff:ffff:ffff:fff7]");
        let md = parse_saved(&bad).unwrap();
        let input = crate::plan::PlanInput::new(&md, &links, &leases);
        let p = crate::plan::plan(&input, &crate::plan::PlanConfig::default()).unwrap();
        let refused: Vec<(&str, &str)> = p.interfaces[0]
            .refused
            .iter()
            .map(|r| (r.key.as_str(), r.value.as_str()))
            .collect();
        // Refused both ways: as the NIC's address (it is a router), and as the
        // router (it is the NIC's own address), so no default goes through it.
        assert_eq!(
            refused,
            [
                ("ipv6s", "2408:4000::ffff:ffff:ffff:fff7"),
                ("router", "2408:4000::ffff:ffff:ffff:fff7")
            ]
        );
        assert!(
            p.interfaces[0]
                .routes
                .iter()
                .all(|r| r.to.prefix_len() != 0),
            "{:?}",
            p.interfaces[0]
        );
    }

    #[test]
    fn a_saved_folder_reads_every_key_the_hook_fetches() {
        let folder: String = NicKey::ALL
            .iter()
            .map(|k| format!("\"{0}\": \"{0}\"", k.name()))
            .collect::<Vec<_>>()
            .join(", ");
        let folder: SavedFolder = doc::read(&format!("{{{folder}}}"), "test", "f").unwrap();
        let answers = folder.answers();
        assert_eq!(answers.keys().copied().collect::<Vec<_>>(), NicKey::ALL);
        assert!(answers.iter().all(|(k, v)| k.name() == v), "{answers:?}");
    }
}

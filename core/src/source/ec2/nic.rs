// SPDX-License-Identifier: Apache-2.0
//! Pure: what one NIC event needs from IMDS, what to ask for next, and whether the
//! answers so far agree with the lease (the consistency decision of SPEC §3.5).
//!
//! # What is fetched
//!
//! Only the event's MAC folder, and within it only the keys the lease's family
//! needs, plus the top-level `meta-data/mac` (which names the primary NIC). The MAC
//! folder's listing (`macs/<mac>/`) is read first: a key it does not list is absent,
//! so it costs no request, and a key it lists that then answers 404 is absent too,
//! because the folder is known to exist.
//!
//! | key | needed for | required |
//! |---|---|---|
//! | `device-number` | every lease | yes: the table number; `0` only on the primary MAC or a card other than 0 |
//! | `network-card` | every lease | no: absent on single-card instance types (card 0) |
//! | `local-ipv4s` | DHCPv4 | yes: must hold the leased address |
//! | `subnet-ipv4-cidr-block` | DHCPv4 | yes: the subnet route |
//! | `ipv4-prefix` | DHCPv4 | no: only when prefixes are delegated |
//! | `ipv6s` | DHCPv6 | yes: must hold the leased address |
//! | `subnet-ipv6-cidr-blocks` | DHCPv6 | yes: the subnet routes |
//! | `ipv6-prefix` | DHCPv6 | no: only when prefixes are delegated |
//! | `interface-id` | every lease | no: for logs only |
//!
//! A required key that is absent, or that does not yet say what the lease proves,
//! is asked for again in the next round (directly, without the listing); an
//! optional key is read once, except `network-card` while it is late (below).
//!
//! # The primary NIC
//!
//! Once `meta-data/mac` names the event's NIC as the primary, only what the
//! primary's plan uses with the configuration ([`NicEvent::primary_use`],
//! [`PrimaryUse::of`]) is asked ([`primary_keys`]): every key above with
//! `primary_rules` or the `cloud-init` profile; its secondary addresses' list
//! alone otherwise (`local-ipv4s`; `ipv6s` and `subnet-ipv6-cidr-blocks`, the
//! address gate's only bound for a /128 DHCPv6 lease), directly, without the
//! listing; nothing when it adds nothing. A NIC known to be the primary
//! ([`NicEvent::known_primary`], from its recorded state) is not asked `mac`.
//!
//! # Multi-card instance types
//!
//! `network-card` absent means card 0 on a single-card type and "not propagated
//! yet" on a multi-card type, which serves the key on every NIC. When the event's
//! NIC has none of its own (and is not the primary), the primary's
//! `macs/<primary>/network-card` is read once, after this NIC's keys: a value there
//! means the type serves the key, and the planner then reports
//! [`Missing::NetworkCardNotPropagated`] for this NIC, whose `network-card` is asked
//! again, directly, every round until it answers. A 404 there means a single-card
//! type: card 0. A NIC that names its own card costs no extra request.
//!
//! # When IMDS agrees
//!
//! The answers are parsed with the same parser as a whole metadata tree
//! ([`parse_nic`], [`parse_tree`]): what [`crate::plan::plan`] would list as
//! [`Missing`] for the event's own link and lease (and waiting can fix, see
//! [`Missing::is_metadata`]) is what the wait is still waiting for, listed
//! without planning by [`complete::missing`], whose test pins it to the
//! planner's list. So the wait and the plan cannot disagree about what
//! "complete" means.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use serde_json::{Map, Value, json};

use crate::constants::IMDS_META_DATA;
use crate::error::Result;
use crate::metadata::{MACS_PATH, parse_nic, parse_tree};
use crate::model::{Family, InstanceNetwork, MacAddr, Missing};
use crate::plan::PlanConfig;
use crate::source::provider::complete;
use crate::source::provider::doc::Answer;
pub use crate::source::provider::{Assessment, NicEvent, PrimaryUse};

/// A key of a MAC folder that leasehook reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NicKey {
    /// `device-number`.
    DeviceNumber,
    /// `network-card`.
    NetworkCard,
    /// `local-ipv4s`.
    LocalIpv4s,
    /// `subnet-ipv4-cidr-block`.
    SubnetIpv4,
    /// `ipv4-prefix`.
    Ipv4Prefix,
    /// `ipv6s`.
    Ipv6s,
    /// `subnet-ipv6-cidr-blocks`.
    SubnetIpv6,
    /// `ipv6-prefix`.
    Ipv6Prefix,
    /// `interface-id`.
    InterfaceId,
}

impl NicKey {
    /// Every key, in the order they are asked for.
    pub const ALL: [Self; 9] = [
        Self::DeviceNumber,
        Self::NetworkCard,
        Self::LocalIpv4s,
        Self::SubnetIpv4,
        Self::Ipv4Prefix,
        Self::Ipv6s,
        Self::SubnetIpv6,
        Self::Ipv6Prefix,
        Self::InterfaceId,
    ];

    /// The key's name in the folder.
    pub fn name(self) -> &'static str {
        match self {
            Self::DeviceNumber => "device-number",
            Self::NetworkCard => "network-card",
            Self::LocalIpv4s => "local-ipv4s",
            Self::SubnetIpv4 => "subnet-ipv4-cidr-block",
            Self::Ipv4Prefix => "ipv4-prefix",
            Self::Ipv6s => "ipv6s",
            Self::SubnetIpv6 => "subnet-ipv6-cidr-blocks",
            Self::Ipv6Prefix => "ipv6-prefix",
            Self::InterfaceId => "interface-id",
        }
    }

    /// The family whose lease needs this key; `None` for keys every lease needs.
    pub fn family(self) -> Option<Family> {
        match self {
            Self::LocalIpv4s | Self::SubnetIpv4 | Self::Ipv4Prefix => Some(Family::V4),
            Self::Ipv6s | Self::SubnetIpv6 | Self::Ipv6Prefix => Some(Family::V6),
            Self::DeviceNumber | Self::NetworkCard | Self::InterfaceId => None,
        }
    }

    /// Whether the wait cannot be done without it (see the module docs' table).
    pub fn is_required(self) -> bool {
        matches!(
            self,
            Self::DeviceNumber
                | Self::LocalIpv4s
                | Self::SubnetIpv4
                | Self::Ipv6s
                | Self::SubnetIpv6
        )
    }
}

/// One request of the wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Request {
    /// The top-level `meta-data/mac`: the primary NIC.
    PrimaryMac,
    /// The MAC folder's listing, `macs/<mac>/`.
    Listing,
    /// One key of the MAC folder.
    Key(NicKey),
    /// The primary NIC's `network-card`, read once when this NIC's folder does
    /// not list its own: whether the instance type serves the key at all (see the
    /// module docs).
    PrimaryNetworkCard(MacAddr),
    /// The `macs/` listing: which MACs IMDS knows (the `cloud-init` profile's
    /// order, see [`NicEvent::with_peers`]).
    Macs,
    /// A key (`device-number` or `network-card`) of another NIC of the OS.
    Peer(MacAddr, NicKey),
}

impl Request {
    /// The request's path below the base URL.
    pub fn path(self, mac: MacAddr) -> String {
        match self {
            Self::PrimaryMac => format!("{IMDS_META_DATA}/mac"),
            Self::Listing => format!("{IMDS_META_DATA}/{MACS_PATH}/{mac}/"),
            Self::Key(k) => format!("{IMDS_META_DATA}/{MACS_PATH}/{mac}/{}", k.name()),
            Self::PrimaryNetworkCard(primary) => format!(
                "{IMDS_META_DATA}/{MACS_PATH}/{primary}/{}",
                NicKey::NetworkCard.name()
            ),
            Self::Macs => format!("{IMDS_META_DATA}/{MACS_PATH}/"),
            Self::Peer(peer, k) => format!("{IMDS_META_DATA}/{MACS_PATH}/{peer}/{}", k.name()),
        }
    }
}

/// The keys `event` reads: the family-neutral ones and those of its leases'
/// families, in [`NicKey::ALL`] order.
pub fn keys(event: &NicEvent) -> Vec<NicKey> {
    NicKey::ALL
        .into_iter()
        .filter(|k| {
            k.family()
                .is_none_or(|f| event.leases().iter().any(|l| l.family == f))
        })
        .collect()
}

/// The keys the primary's plan uses when `event`'s NIC is the primary and the
/// configuration gives it no rules ([`NicEvent::primary_use`]), in
/// [`NicKey::ALL`] order; `None` when every key of [`keys`] is read (a secondary,
/// or [`PrimaryUse::Everything`]). Its secondary addresses need the lease
/// family's address list, and for DHCPv6 the subnet (a /128 lease bounds nothing
/// for the address gate; an IPv4 lease's network does): no listing,
/// `device-number`, `network-card`, prefix or `interface-id`. Nothing to add
/// needs nothing.
pub fn primary_keys(event: &NicEvent, fetched: &Fetched) -> Option<Vec<NicKey>> {
    if fetched.primary() != Some(event.mac()) {
        return None;
    }
    let wanted: &[NicKey] = match event.primary_use() {
        PrimaryUse::Everything => return None,
        PrimaryUse::SecondaryAddresses => &[NicKey::LocalIpv4s, NicKey::Ipv6s, NicKey::SubnetIpv6],
        PrimaryUse::Nothing => &[],
    };
    Some(
        keys(event)
            .into_iter()
            .filter(|k| wanted.contains(k))
            .collect(),
    )
}

/// Everything fetched so far for one event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fetched {
    primary_mac: Option<Answer>,
    listing: Listing,
    keys: BTreeMap<NicKey, Answer>,
    /// The primary's `network-card`, when it was asked: (the primary's MAC, answer).
    primary_card: Option<(MacAddr, Answer)>,
    /// The `macs/` listing, when asked (a 404 lists nothing).
    macs: Option<BTreeSet<MacAddr>>,
    /// Peers' keys.
    peer_keys: BTreeMap<(MacAddr, NicKey), Answer>,
}

/// What is known of the MAC folder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum Listing {
    /// Not asked yet.
    #[default]
    Unknown,
    /// 404: IMDS has no folder for this MAC (yet).
    NotFound,
    /// The folder's entries, without the trailing `/` of subfolders.
    Entries(BTreeSet<String>),
}

impl Fetched {
    /// Nothing fetched yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records IMDS's answer to `request` (`None` for 404).
    pub fn record(&mut self, request: Request, answer: Option<String>) {
        match request {
            Request::PrimaryMac => self.primary_mac = Some(Answer::from(answer)),
            Request::Listing => {
                self.listing = answer.map_or(Listing::NotFound, |body| {
                    Listing::Entries(
                        body.lines()
                            .map(|l| l.trim().trim_end_matches('/'))
                            .filter(|l| !l.is_empty())
                            .map(str::to_owned)
                            .collect(),
                    )
                });
            }
            Request::Key(k) => {
                self.keys.insert(k, Answer::from(answer));
            }
            Request::PrimaryNetworkCard(primary) => {
                self.primary_card = Some((primary, Answer::from(answer)));
            }
            Request::Macs => {
                self.macs = Some(answer.map_or_else(BTreeSet::new, |body| {
                    body.lines()
                        .filter_map(|l| l.trim().trim_end_matches('/').parse().ok())
                        .collect()
                }));
            }
            Request::Peer(peer, k) => {
                self.peer_keys.insert((peer, k), Answer::from(answer));
            }
        }
    }

    /// Whether the MAC folder is known to exist.
    pub fn folder_exists(&self) -> bool {
        matches!(self.listing, Listing::Entries(_))
    }

    /// The primary's MAC, once `meta-data/mac` answered with one.
    fn primary(&self) -> Option<MacAddr> {
        match &self.primary_mac {
            Some(Answer::Body(v)) => v.trim().parse().ok(),
            _ => None,
        }
    }

    /// Whether the primary's `network-card` is still to be asked: this NIC is not
    /// the primary and IMDS gave it no `network-card` of its own, so only another
    /// NIC can tell whether the key is late (a multi-card type) or not served at
    /// all (card 0). Asked once per event.
    fn needs_primary_card(&self, event: &NicEvent) -> Option<MacAddr> {
        // A peer's network-card (the primary's among them) says as much.
        let primary = self
            .primary()
            .filter(|p| *p != event.mac() && !event.peers().contains(p))?;
        let own = matches!(self.keys.get(&NicKey::NetworkCard), Some(Answer::Body(_)));
        (self.folder_exists() && !own && self.primary_card.is_none()).then_some(primary)
    }

    fn is_listed(&self, key: NicKey) -> bool {
        matches!(&self.listing, Listing::Entries(names) if names.contains(key.name()))
    }
}

/// Parses what was fetched and lists what its plan (`ec2-net-utils` scheme)
/// still lacks ([`complete::missing`]). Fails on a value that does not parse, naming its key.
pub fn assess(event: &NicEvent, fetched: &Fetched) -> Result<Assessment> {
    let primary_mac = match &fetched.primary_mac {
        Some(Answer::Body(v)) => parse_tree(&json!({ "mac": v }))?.primary_mac,
        _ => None,
    };
    let mut nics = Vec::new();
    // The primary read without its listing: the NIC is what its keys said.
    if fetched.folder_exists() || primary_keys(event, fetched).is_some() {
        let folder: Map<String, Value> = fetched
            .keys
            .iter()
            .filter_map(|(k, answer)| match answer {
                Answer::Body(v) => Some((k.name().to_owned(), Value::String(v.clone()))),
                Answer::NotAsked | Answer::NotFound => None,
            })
            .collect();
        let path = format!("{MACS_PATH}/{}", event.mac());
        nics.push(parse_nic(event.mac(), &path, &folder)?);
    }
    // Peers: only the position keys, for the cloud-init order and for telling a
    // late network-card from one the type does not serve.
    if let Some(listed) = &fetched.macs {
        for peer in listed.iter().filter(|m| event.peers().contains(m)) {
            let folder: Map<String, Value> = [NicKey::DeviceNumber, NicKey::NetworkCard]
                .into_iter()
                .filter_map(|k| match fetched.peer_keys.get(&(*peer, k)) {
                    Some(Answer::Body(v)) => Some((k.name().to_owned(), Value::String(v.clone()))),
                    _ => None,
                })
                .collect();
            nics.push(parse_nic(*peer, &format!("{MACS_PATH}/{peer}"), &folder)?);
        }
        nics.sort_by_key(|n| n.mac);
    }
    // What the primary says of `network-card` is what tells a late key from one
    // the instance type does not serve; the planner reads it from the primary's
    // (otherwise empty) entry.
    if let (Some((mac, Answer::Body(v))), Some(primary)) = (&fetched.primary_card, primary_mac)
        && *mac == primary
        && primary != event.mac()
    {
        let folder: Map<String, Value> = [(
            NicKey::NetworkCard.name().to_owned(),
            Value::String(v.clone()),
        )]
        .into_iter()
        .collect();
        nics.push(parse_nic(
            primary,
            &format!("{MACS_PATH}/{primary}"),
            &folder,
        )?);
        nics.sort_by_key(|n| n.mac);
    }
    let network = InstanceNetwork { primary_mac, nics };
    // What the primary's plan lacks depends on what it configures there (see
    // [`Missing::concerns_unrouted_primary`]); `Everything` waits for every key,
    // as for a routed NIC.
    let cfg = PlanConfig {
        primary_rules: event.primary_use() == PrimaryUse::Everything,
        secondary_addresses: event.primary_use() != PrimaryUse::Nothing,
        ..complete::check_config()
    };
    let missing = complete::missing(event, &network, &cfg)?;
    Ok(Assessment { network, missing })
}

/// The request that answers a missing item, if any.
fn request_for(missing: &Missing) -> Option<Request> {
    let by_family = |v4, v6, family| {
        Some(Request::Key(match family {
            Family::V4 => v4,
            Family::V6 => v6,
        }))
    };
    match missing {
        Missing::MacFolder => Some(Request::Listing),
        Missing::PrimaryMac => Some(Request::PrimaryMac),
        Missing::DeviceNumber | Missing::DeviceNumberNotPropagated => {
            Some(Request::Key(NicKey::DeviceNumber))
        }
        Missing::NetworkCardNotPropagated => Some(Request::Key(NicKey::NetworkCard)),
        Missing::LeaseAddress { address } => by_family(
            NicKey::LocalIpv4s,
            NicKey::Ipv6s,
            match address {
                IpAddr::V4(_) => Family::V4,
                IpAddr::V6(_) => Family::V6,
            },
        ),
        Missing::Addresses { family } => by_family(NicKey::LocalIpv4s, NicKey::Ipv6s, *family),
        Missing::Subnet { family } => by_family(NicKey::SubnetIpv4, NicKey::SubnetIpv6, *family),
        Missing::Router { .. } => None,
    }
}

/// The next request of a round, or `None` when the round is done.
///
/// `missing` is the assessment the round started from, `asked` what this round
/// has asked already. Never-fetched things come first: the top-level `mac`, the
/// MAC folder's listing, then each key the listing names. After that only what
/// `missing` points at is asked again.
pub fn next_request(
    event: &NicEvent,
    fetched: &Fetched,
    missing: &[Missing],
    asked: &BTreeSet<Request>,
) -> Option<Request> {
    let again: BTreeSet<Request> = missing.iter().filter_map(request_for).collect();
    let due = |r: Request, needed: bool| needed && !asked.contains(&r);
    if due(
        Request::PrimaryMac,
        fetched.primary_mac.is_none() || again.contains(&Request::PrimaryMac),
    ) {
        return Some(Request::PrimaryMac);
    }
    if let Some(wanted) = primary_keys(event, fetched) {
        // The primary, of which only these keys serve the plan: asked directly
        // (no listing), again while the plan still lacks them.
        return wanted.into_iter().map(Request::Key).find(|r| {
            let Request::Key(k) = *r else { return false };
            due(*r, !fetched.keys.contains_key(&k) || again.contains(r))
        });
    }
    if !fetched.folder_exists() {
        // Keys cannot be told absent before the folder exists.
        return due(Request::Listing, true).then_some(Request::Listing);
    }
    let key = keys(event).into_iter().map(Request::Key).find(|r| {
        let Request::Key(k) = *r else { return false };
        let needed = match fetched.keys.get(&k) {
            None => fetched.is_listed(k) || again.contains(r),
            Some(_) => again.contains(r),
        };
        due(*r, needed)
    });
    key.or_else(|| {
        let probe = Request::PrimaryNetworkCard(fetched.needs_primary_card(event)?);
        due(probe, true).then_some(probe)
    })
    .or_else(|| next_peer_request(event, fetched))
}

/// The next position key of a peer, each asked once: the `macs/` listing, then
/// per listed peer `device-number`, and `network-card` when the type serves it
/// (this NIC or a peer has one; asked after every `device-number`, so that the
/// first peer's answer, the primary's on a multi-card type, decides for all).
fn next_peer_request(event: &NicEvent, fetched: &Fetched) -> Option<Request> {
    if event.peers().is_empty() || !fetched.folder_exists() {
        return None;
    }
    let Some(listed) = &fetched.macs else {
        return Some(Request::Macs);
    };
    let listed: Vec<MacAddr> = listed
        .iter()
        .filter(|m| event.peers().contains(m))
        .copied()
        .collect();
    let unasked = |k: NicKey| {
        listed.iter().map(move |m| Request::Peer(*m, k)).find(
            |r| matches!(r, Request::Peer(m, k) if !fetched.peer_keys.contains_key(&(*m, *k))),
        )
    };
    unasked(NicKey::DeviceNumber).or_else(|| {
        let own = matches!(
            fetched.keys.get(&NicKey::NetworkCard),
            Some(Answer::Body(_))
        );
        let any_peer = fetched
            .peer_keys
            .iter()
            .any(|((_, k), v)| *k == NicKey::NetworkCard && matches!(v, Answer::Body(_)));
        // The primary (else the first listed peer) is asked in any case: a 404
        // there means a single-card type, and the others are not asked.
        let first = fetched
            .primary()
            .filter(|p| listed.contains(p))
            .or_else(|| listed.first().copied());
        match first {
            Some(m) if !fetched.peer_keys.contains_key(&(m, NicKey::NetworkCard)) => {
                Some(Request::Peer(m, NicKey::NetworkCard))
            }
            _ => (own || any_peer)
                .then(|| unasked(NicKey::NetworkCard))
                .flatten(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{IfName, Lease, Reason};
    use crate::plan::{InterfaceLease, PlanInput, plan};

    const PRIMARY: &str = "02:00:00:00:00:01";
    const SECONDARY: &str = "02:00:00:00:00:02";

    fn lease(addr: &str) -> Lease {
        let address: IpAddr = addr.parse().unwrap();
        Lease {
            family: Family::of(&address),
            address,
            prefix_len: if address.is_ipv4() { 24 } else { 128 },
            routers: Vec::new(),
            reason: Reason::Bound,
        }
    }

    fn event(mac: &str, leases: &[&str]) -> NicEvent {
        NicEvent::try_new(
            IfName::try_new("eth1").unwrap(),
            mac.parse().unwrap(),
            leases.iter().map(|a| lease(a)).collect(),
        )
        .unwrap()
    }

    /// Runs one round against a fake folder; returns the requests made.
    fn round(
        ev: &NicEvent,
        state: &mut Fetched,
        missing: &[Missing],
        tree: &BTreeMap<Request, Option<&str>>,
    ) -> Vec<Request> {
        let mut asked = BTreeSet::new();
        let mut order = Vec::new();
        while let Some(r) = next_request(ev, state, missing, &asked) {
            asked.insert(r);
            order.push(r);
            state.record(r, tree.get(&r).copied().flatten().map(str::to_owned));
        }
        order
    }

    fn tree(entries: &[(Request, &'static str)]) -> BTreeMap<Request, Option<&'static str>> {
        entries.iter().map(|(r, v)| (*r, Some(*v))).collect()
    }

    #[test]
    fn keys_follow_the_lease_families() {
        let names = |ev: &NicEvent| keys(ev).into_iter().map(NicKey::name).collect::<Vec<_>>();
        assert_eq!(
            names(&event(SECONDARY, &["10.0.1.20"])),
            [
                "device-number",
                "network-card",
                "local-ipv4s",
                "subnet-ipv4-cidr-block",
                "ipv4-prefix",
                "interface-id"
            ]
        );
        assert_eq!(
            names(&event(SECONDARY, &["2600::20"])),
            [
                "device-number",
                "network-card",
                "ipv6s",
                "subnet-ipv6-cidr-blocks",
                "ipv6-prefix",
                "interface-id"
            ]
        );
        assert_eq!(
            names(&event(SECONDARY, &["10.0.1.20", "2600::20"])).len(),
            9
        );
        let ifname = IfName::try_new("eth1").unwrap();
        let mac: MacAddr = SECONDARY.parse().unwrap();
        assert!(NicEvent::try_new(ifname.clone(), mac, vec![]).is_err());
        assert!(
            NicEvent::try_new(
                ifname.clone(),
                mac,
                vec![lease("10.0.0.1"), lease("10.0.0.2")]
            )
            .is_err()
        );
        let mut wrong = lease("10.0.0.1");
        wrong.family = Family::V6;
        assert!(NicEvent::try_new(ifname, mac, vec![wrong]).is_err());
    }

    #[test]
    fn paths() {
        let mac: MacAddr = SECONDARY.parse().unwrap();
        assert_eq!(Request::PrimaryMac.path(mac), "/latest/meta-data/mac");
        assert_eq!(
            Request::Listing.path(mac),
            "/latest/meta-data/network/interfaces/macs/02:00:00:00:00:02/"
        );
        assert_eq!(
            Request::Key(NicKey::SubnetIpv6).path(mac),
            "/latest/meta-data/network/interfaces/macs/02:00:00:00:00:02/subnet-ipv6-cidr-blocks"
        );
    }

    #[test]
    fn first_round_reads_only_listed_keys_of_the_family() {
        let ev = event(SECONDARY, &["10.0.1.20"]);
        let mut state = Fetched::new();
        let start = assess(&ev, &state).unwrap();
        assert_eq!(start.missing, [Missing::MacFolder, Missing::PrimaryMac]);
        let t = tree(&[
            (Request::PrimaryMac, PRIMARY),
            (
                Request::Listing,
                "device-number\ninterface-id\nipv4-associations/\nlocal-ipv4s\nmac\nsubnet-ipv4-cidr-block\nipv6s\nsubnet-ipv6-cidr-blocks",
            ),
            (Request::Key(NicKey::DeviceNumber), "1"),
            (Request::Key(NicKey::InterfaceId), "eni-2"),
            (Request::Key(NicKey::LocalIpv4s), "10.0.1.20\n10.0.1.21"),
            (Request::Key(NicKey::SubnetIpv4), "10.0.1.0/24"),
        ]);
        let asked = round(&ev, &mut state, &start.missing, &t);
        assert_eq!(
            asked,
            [
                Request::PrimaryMac,
                Request::Listing,
                Request::Key(NicKey::DeviceNumber),
                Request::Key(NicKey::LocalIpv4s),
                Request::Key(NicKey::SubnetIpv4),
                Request::Key(NicKey::InterfaceId),
                // No network-card of its own: does the instance type serve it?
                Request::PrimaryNetworkCard(PRIMARY.parse().unwrap()),
            ]
        );
        let done = assess(&ev, &state).unwrap();
        assert!(done.is_complete(), "{:?}", done.missing);
        let nic = &done.network.nics[0];
        assert_eq!(nic.device_number, Some(1));
        assert_eq!(nic.local_ipv4s.len(), 2);
        assert_eq!(nic.interface_id.as_deref(), Some("eni-2"));
        // Nothing left to ask.
        assert_eq!(
            next_request(&ev, &state, &done.missing, &BTreeSet::new()),
            None
        );
    }

    #[test]
    fn later_rounds_ask_only_for_what_is_missing() {
        // DHCPv6 on a secondary: ipv6s not listed yet, device-number reads 0.
        let ev = event(SECONDARY, &["2600::20"]);
        let mut state = Fetched::new();
        let t1 = tree(&[
            (Request::PrimaryMac, PRIMARY),
            (
                Request::Listing,
                "device-number\nipv6-prefix\nsubnet-ipv6-cidr-blocks",
            ),
            (Request::Key(NicKey::DeviceNumber), "0"),
            (Request::Key(NicKey::SubnetIpv6), "2600::/64"),
            (Request::Key(NicKey::Ipv6Prefix), "2600:0:0:0:8000::/80"),
        ]);
        let start = assess(&ev, &state).unwrap();
        assert_eq!(round(&ev, &mut state, &start.missing, &t1).len(), 6);
        let a1 = assess(&ev, &state).unwrap();
        assert_eq!(
            a1.missing,
            [
                Missing::DeviceNumberNotPropagated,
                Missing::Addresses { family: Family::V6 }
            ]
        );
        // Round 2: both still wrong; only those two keys are asked.
        let t2 = tree(&[(Request::Key(NicKey::DeviceNumber), "0")]);
        let asked = round(&ev, &mut state, &a1.missing, &t2);
        assert_eq!(
            asked,
            [
                Request::Key(NicKey::DeviceNumber),
                Request::Key(NicKey::Ipv6s)
            ]
        );
        let a2 = assess(&ev, &state).unwrap();
        assert_eq!(a2.missing, a1.missing);
        // Round 3: ipv6s appears, but without the leased address.
        let t3 = tree(&[
            (Request::Key(NicKey::DeviceNumber), "2"),
            (Request::Key(NicKey::Ipv6s), "2600::99"),
        ]);
        round(&ev, &mut state, &a2.missing, &t3);
        let a3 = assess(&ev, &state).unwrap();
        assert_eq!(
            a3.missing,
            [Missing::LeaseAddress {
                address: "2600::20".parse().unwrap()
            }]
        );
        let t4 = tree(&[(Request::Key(NicKey::Ipv6s), "2600::99\n2600::20")]);
        assert_eq!(
            round(&ev, &mut state, &a3.missing, &t4),
            [Request::Key(NicKey::Ipv6s)]
        );
        let a4 = assess(&ev, &state).unwrap();
        assert!(a4.is_complete(), "{:?}", a4.missing);
        assert_eq!(a4.network.nics[0].ipv6_prefixes.len(), 1);
    }

    #[test]
    fn device_number_zero_is_fine_on_the_primary() {
        let ev = event(PRIMARY, &["10.0.0.10"]);
        let mut state = Fetched::new();
        let t = tree(&[
            (Request::PrimaryMac, PRIMARY),
            (
                Request::Listing,
                "device-number\nlocal-ipv4s\nsubnet-ipv4-cidr-block",
            ),
            (Request::Key(NicKey::DeviceNumber), "0"),
            (Request::Key(NicKey::LocalIpv4s), "10.0.0.10"),
            (Request::Key(NicKey::SubnetIpv4), "10.0.0.0/24"),
        ]);
        round(&ev, &mut state, &[], &t);
        assert!(assess(&ev, &state).unwrap().is_complete());
    }

    /// The primary's whole folder, as IMDS serves it (every request would answer).
    fn primary_tree() -> BTreeMap<Request, Option<&'static str>> {
        tree(&[
            (Request::PrimaryMac, PRIMARY),
            (
                Request::Listing,
                "device-number\ninterface-id\nlocal-ipv4s\nipv6s\nsubnet-ipv4-cidr-block\nsubnet-ipv6-cidr-blocks",
            ),
            (Request::Key(NicKey::DeviceNumber), "0"),
            (Request::Key(NicKey::InterfaceId), "eni-1"),
            (Request::Key(NicKey::LocalIpv4s), "10.0.0.10\n10.0.0.11"),
            (Request::Key(NicKey::Ipv6s), "2600::10\n2600::11"),
            (Request::Key(NicKey::SubnetIpv4), "10.0.0.0/24"),
            (Request::Key(NicKey::SubnetIpv6), "2600::/64"),
        ])
    }

    #[test]
    fn the_primary_is_asked_only_what_its_plan_uses() {
        let mac = |m: &str| m.parse::<MacAddr>().unwrap();
        let v4 = || event(PRIMARY, &["10.0.0.10"]);
        let v6 = || event(PRIMARY, &["2600::10"]);
        let run = |ev: &NicEvent| {
            let mut state = Fetched::new();
            let start = assess(ev, &state).unwrap();
            let asked = round(ev, &mut state, &start.missing, &primary_tree());
            (asked, assess(ev, &state).unwrap())
        };
        // Rules on the primary (or the cloud-init profile): every key, as before.
        let (asked, a) = run(&v4().with_primary_use(PrimaryUse::Everything));
        assert_eq!(asked.len(), 6, "{asked:?}");
        assert!(a.is_complete(), "{:?}", a.missing);
        // Secondary addresses only: the address list of the lease's family.
        let (asked, a) = run(&v4().with_primary_use(PrimaryUse::SecondaryAddresses));
        assert_eq!(
            asked,
            [Request::PrimaryMac, Request::Key(NicKey::LocalIpv4s)]
        );
        assert!(a.is_complete(), "{:?}", a.missing);
        assert_eq!(a.network.nic(mac(PRIMARY)).unwrap().local_ipv4s.len(), 2);
        // DHCPv6: the addresses and the subnet, the address gate's only bound.
        let (asked, a) = run(&v6().with_primary_use(PrimaryUse::SecondaryAddresses));
        assert_eq!(
            asked,
            [
                Request::PrimaryMac,
                Request::Key(NicKey::Ipv6s),
                Request::Key(NicKey::SubnetIpv6)
            ]
        );
        assert!(a.is_complete(), "{:?}", a.missing);
        // Nothing to add: `mac` alone.
        for ev in [v4(), v6()] {
            let (asked, a) = run(&ev.with_primary_use(PrimaryUse::Nothing));
            assert_eq!(asked, [Request::PrimaryMac]);
            assert!(a.is_complete(), "{:?}", a.missing);
        }
        // A secondary is read in full whatever the primary's use.
        let ev = event(SECONDARY, &["10.0.1.20"]).with_primary_use(PrimaryUse::Nothing);
        let mut state = Fetched::new();
        let t = tree(&[
            (Request::PrimaryMac, PRIMARY),
            (
                Request::Listing,
                "device-number\nlocal-ipv4s\nsubnet-ipv4-cidr-block",
            ),
            (Request::Key(NicKey::DeviceNumber), "1"),
            (Request::Key(NicKey::LocalIpv4s), "10.0.1.20"),
            (Request::Key(NicKey::SubnetIpv4), "10.0.1.0/24"),
        ]);
        assert_eq!(round(&ev, &mut state, &[], &t).len(), 6);
        assert!(assess(&ev, &state).unwrap().is_complete());
    }

    #[test]
    fn the_primary_waits_until_its_list_holds_the_lease() {
        let ev = event(PRIMARY, &["10.0.0.10"]).with_primary_use(PrimaryUse::SecondaryAddresses);
        let mut state = Fetched::new();
        // Round 1: the list does not hold the lease yet.
        let t1 = tree(&[
            (Request::PrimaryMac, PRIMARY),
            (Request::Key(NicKey::LocalIpv4s), "10.0.0.11"),
        ]);
        round(&ev, &mut state, &[], &t1);
        let a1 = assess(&ev, &state).unwrap();
        assert_eq!(
            a1.missing,
            [Missing::LeaseAddress {
                address: "10.0.0.10".parse().unwrap()
            }]
        );
        // Round 2: only the list is asked again.
        let t2 = tree(&[(Request::Key(NicKey::LocalIpv4s), "10.0.0.10\n10.0.0.11")]);
        assert_eq!(
            round(&ev, &mut state, &a1.missing, &t2),
            [Request::Key(NicKey::LocalIpv4s)]
        );
        assert!(assess(&ev, &state).unwrap().is_complete());
        // A 404 (no folder yet, or no list) is waited out the same way.
        let mut state = Fetched::new();
        round(
            &ev,
            &mut state,
            &[],
            &tree(&[(Request::PrimaryMac, PRIMARY)]),
        );
        let a = assess(&ev, &state).unwrap();
        assert_eq!(a.missing, [Missing::Addresses { family: Family::V4 }]);
        assert_eq!(
            next_request(&ev, &state, &a.missing, &BTreeSet::new()),
            Some(Request::Key(NicKey::LocalIpv4s))
        );
    }

    #[test]
    fn the_plan_of_the_primary_from_its_list_alone_adds_its_secondary_ips_gated() {
        use crate::model::Link;
        let ev = event(PRIMARY, &["10.0.0.10"]).with_primary_use(PrimaryUse::SecondaryAddresses);
        let mut state = Fetched::new();
        // One of the list's entries lies outside the lease's network.
        let t = tree(&[
            (Request::PrimaryMac, PRIMARY),
            (
                Request::Key(NicKey::LocalIpv4s),
                "10.0.0.10\n10.0.0.11\n10.0.9.9",
            ),
        ]);
        round(&ev, &mut state, &[], &t);
        let a = assess(&ev, &state).unwrap();
        assert!(a.is_complete(), "{:?}", a.missing);
        let mut lease = lease("10.0.0.10");
        lease.routers = vec!["10.0.0.1".parse().unwrap()];
        let p = plan(
            &PlanInput {
                metadata: &a.network,
                links: &[Link {
                    name: IfName::try_new("eth0").unwrap(),
                    mac: PRIMARY.parse().unwrap(),
                    ipv6_router: None,
                }],
                leases: &[InterfaceLease {
                    interface: IfName::try_new("eth0").unwrap(),
                    lease,
                }],
                link_addresses: &[],
                next_hops: &[],
            },
            &PlanConfig::default(),
        )
        .unwrap();
        let text = crate::render::ip(&p);
        // The lease's network bounds the gate: 10.0.9.9 is refused; no table, no
        // rule, nothing missing.
        assert_eq!(
            text,
            "# profile ec2-net-utils\n\
             # eth0 02:00:00:00:00:01 primary families ipv4\n\
             # eth0 refused: local-ipv4s 10.0.9.9: not inside the NIC's subnet (10.0.0.0/24)\n\
             ip -4 address add 10.0.0.11/32 dev eth0\n",
            "{text}"
        );
    }

    #[test]
    fn missing_folder_then_listed_key_that_404s() {
        let ev = event(SECONDARY, &["10.0.1.20"]);
        let mut state = Fetched::new();
        // Round 1: no folder yet; only mac and the listing are asked.
        let t1 = tree(&[(Request::PrimaryMac, PRIMARY)]);
        let start = assess(&ev, &state).unwrap();
        assert_eq!(
            round(&ev, &mut state, &start.missing, &t1),
            [Request::PrimaryMac, Request::Listing]
        );
        let a1 = assess(&ev, &state).unwrap();
        assert_eq!(a1.missing, [Missing::MacFolder]);
        assert!(a1.network.nics.is_empty());
        // Round 2: the folder lists the subnet and a prefix, both of which 404.
        let t2 = tree(&[
            (
                Request::Listing,
                "device-number\nlocal-ipv4s\nsubnet-ipv4-cidr-block\nipv4-prefix",
            ),
            (Request::Key(NicKey::DeviceNumber), "1"),
            (Request::Key(NicKey::LocalIpv4s), "10.0.1.20"),
        ]);
        assert_eq!(
            round(&ev, &mut state, &a1.missing, &t2),
            [
                Request::Listing,
                Request::Key(NicKey::DeviceNumber),
                Request::Key(NicKey::LocalIpv4s),
                Request::Key(NicKey::SubnetIpv4),
                Request::Key(NicKey::Ipv4Prefix),
                Request::PrimaryNetworkCard(PRIMARY.parse().unwrap()),
            ]
        );
        let a2 = assess(&ev, &state).unwrap();
        assert_eq!(a2.missing, [Missing::Subnet { family: Family::V4 }]);
        // Round 3: the required subnet is asked again, the optional prefix is not.
        let t3 = tree(&[(Request::Key(NicKey::SubnetIpv4), "10.0.1.0/24")]);
        assert_eq!(
            round(&ev, &mut state, &a2.missing, &t3),
            [Request::Key(NicKey::SubnetIpv4)]
        );
        assert!(assess(&ev, &state).unwrap().is_complete());
    }

    #[test]
    fn peers_are_read_once_for_the_cloud_init_order() {
        const THIRD: &str = "02:00:00:00:00:03";
        const NOT_IN_IMDS: &str = "02:00:00:00:00:09";
        let mac = |m: &str| m.parse::<MacAddr>().unwrap();
        let peers = [mac(PRIMARY), mac(THIRD), mac(NOT_IN_IMDS), mac(SECONDARY)];
        let ev = event(SECONDARY, &["10.0.1.20"]).with_peers(peers);
        // The event's own MAC is not its peer.
        assert_eq!(ev.peers().len(), 3);
        let folder = "device-number\nlocal-ipv4s\nsubnet-ipv4-cidr-block";
        let macs = "02:00:00:00:00:01/\n02:00:00:00:00:02/\n02:00:00:00:00:03/";
        let base = [
            (Request::PrimaryMac, PRIMARY),
            (Request::Listing, folder),
            (Request::Key(NicKey::DeviceNumber), "1"),
            (Request::Key(NicKey::LocalIpv4s), "10.0.1.20"),
            (Request::Key(NicKey::SubnetIpv4), "10.0.1.0/24"),
            (Request::Macs, macs),
            (Request::Peer(mac(PRIMARY), NicKey::DeviceNumber), "0"),
            (Request::Peer(mac(THIRD), NicKey::DeviceNumber), "2"),
        ];

        // Single-card: the primary has no network-card, so no peer is asked for it.
        let mut state = Fetched::new();
        let asked = round(&ev, &mut state, &[], &tree(&base));
        assert_eq!(
            asked[3..],
            [
                Request::Key(NicKey::LocalIpv4s),
                Request::Key(NicKey::SubnetIpv4),
                Request::Macs,
                Request::Peer(mac(PRIMARY), NicKey::DeviceNumber),
                Request::Peer(mac(THIRD), NicKey::DeviceNumber),
                Request::Peer(mac(PRIMARY), NicKey::NetworkCard),
            ]
        );
        let a = assess(&ev, &state).unwrap();
        assert!(a.is_complete(), "{:?}", a.missing);
        let order: Vec<(MacAddr, Option<u32>)> = a
            .network
            .nics
            .iter()
            .map(|n| (n.mac, n.device_number))
            .collect();
        assert_eq!(
            order,
            [
                (mac(PRIMARY), Some(0)),
                (mac(SECONDARY), Some(1)),
                (mac(THIRD), Some(2))
            ]
        );
        // Nothing is asked again.
        assert_eq!(
            next_request(&ev, &state, &a.missing, &BTreeSet::new()),
            None
        );

        // Multi-card: the primary's network-card says the type serves it; every
        // peer's is read.
        let mut multi = base.to_vec();
        multi.push((Request::Peer(mac(PRIMARY), NicKey::NetworkCard), "0"));
        multi.push((Request::Peer(mac(THIRD), NicKey::NetworkCard), "1"));
        let mut state = Fetched::new();
        let asked = round(&ev, &mut state, &[], &tree(&multi));
        assert_eq!(
            asked[asked.len() - 2..],
            [
                Request::Peer(mac(PRIMARY), NicKey::NetworkCard),
                Request::Peer(mac(THIRD), NicKey::NetworkCard),
            ]
        );
        let a = assess(&ev, &state).unwrap();
        // This NIC has no network-card while its peers do: not propagated yet.
        assert_eq!(a.missing, [Missing::NetworkCardNotPropagated]);
        let third = a.network.nic(mac(THIRD)).unwrap();
        assert_eq!(
            (third.network_card, third.device_number),
            (Some(1), Some(2))
        );
    }

    #[test]
    fn garbage_values_fail_naming_the_key() {
        let ev = event(SECONDARY, &["10.0.1.20"]);
        let mut state = Fetched::new();
        state.record(Request::Listing, Some("local-ipv4s".into()));
        state.record(Request::Key(NicKey::LocalIpv4s), Some("10.0.1.999".into()));
        let e = assess(&ev, &state).unwrap_err();
        assert!(
            e.to_string()
                .contains("network/interfaces/macs/02:00:00:00:00:02/local-ipv4s"),
            "{e}"
        );
        let mut state = Fetched::new();
        state.record(Request::PrimaryMac, Some("not a mac".into()));
        assert!(assess(&ev, &state).unwrap_err().to_string().contains("mac"));
    }
}

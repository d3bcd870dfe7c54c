// SPDX-License-Identifier: Apache-2.0
//! Pure: Google Compute Engine's Dynamic NICs, the NICs that are VLANs on a
//! parent vNIC (issue 36 item 3): what the metadata server says of them, and
//! what leasehook creates and configures for them.
//!
//! # What Google gives
//!
//! A Dynamic NIC is a VLAN sub-interface of one of the instance's vNICs, with
//! a MAC, a subnet and addresses of its own, added and removed while the
//! instance runs ("Add Dynamic Network Interfaces to an instance",
//! <https://cloud.google.com/vpc/docs/add-dynamic-nics>). Nothing serves it
//! DHCP: the guest makes the VLAN. Google's manual steps, per Dynamic NIC:
//! read `instance/vlan-network-interfaces/VNIC_NUMBER/VLAN_ID/mac`, then
//! `ip link add link VNIC_NAME name VNIC_NAME.VLAN_ID type vlan id VLAN_ID`,
//! `ip addr add IP_ADDRESS dev …`, `ip link set dev … address MAC_ADDRESS`,
//! `ip link set up …`. The guest agent does the same when its
//! `vlan_setup_enabled` is set (off by default,
//! GoogleCloudPlatform/guest-agent `google_guest_agent/cfg/cfg.go`), naming the
//! link `gcp.<parent>.<vlan>` and adding a route to the gateway on the link
//! (`network/manager/dhclient_linux.go`).
//!
//! # What is fetched
//!
//! `instance/vlan-network-interfaces/?recursive=true` ([`VLANS_PATH`]): an
//! object keyed by the parent vNIC's index, each an object keyed by the VLAN
//! id, each entry shaped as a vNIC's entry of `network-interfaces` plus
//! `vlan` and `parentInterface` (`/computeMetadata/v1/instance/network-interfaces/0/`)
//! (the guest agent's `metadata.VlanInterface`; its test reads
//! `{"0": {"5": {"mac", "parentInterface", "mtu", "vlan", "ipv6"}}}`). A 404:
//! the instance has no Dynamic NIC. Of each entry leasehook reads the keys a
//! vNIC's entry gives ([`GceNic`]: `mac`, `ip`, `gateway`, `subnetmask`,
//! `ipAliases`, `ipv6s`, `ipv6`, `gatewayIpv6`), and checks `vlan` and
//! `parentInterface` against the keys it sits under. A parent index or VLAN
//! id that is not a number in range, an entry whose `vlan` or
//! `parentInterface` says otherwise, a MAC listed twice (or a vNIC's), more
//! than [`super::nic::MAX_NICS`] entries: an error naming the key, and the
//! answer is not used.
//!
//! # What leasehook makes of it
//!
//! * **The link**: a VLAN `<parent>.<vlan>` (Google's name; `nic<N>.<vlan>`
//!   when longer than 15 bytes) on the vNIC whose MAC `network-interfaces/<P>`
//!   gives, with the Dynamic NIC's MAC, up, marked `leasehook:<MAC>`
//!   ([`crate::apply::links`], [`NicLink::Vlan`]); its MTU is the parent's.
//! * **The addresses and routing**, as for any NIC without DHCP: `ip` as a /32
//!   (as Google's steps and the guest agent add it, and as GCE's DHCP leases
//!   it to vNICs) with `gateway` as its router, so the table gets the
//!   gateway's link route before its default route; the first of `ipv6s` as a
//!   /128 with `gatewayIpv6`. The subnet is the gateway's network under
//!   `subnetmask`, as for a vNIC; an entry without `subnetmask` has its own
//!   address as its subnet (the /32 the link holds).
//! * **The table**: [`device_slot`] of its MAC, the scheme of the clouds whose
//!   NICs have no device number (Alibaba, Oracle): the same on every refresh
//!   whichever Dynamic NICs come and go.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::{Ipv4Net, Ipv6Net};
use serde::Deserialize;
use serde_json::Value;

use super::GCE_ROOT;
use super::nic::{GceNic, MAX_NICS, check_entry, network};
use crate::error::Result;
use crate::model::{Family, InstanceNetwork, Lease, NicLink, Parent, Reason};
use crate::source::provider::doc::{self, bad};
use crate::source::provider::slot::device_slot;
use crate::source::provider::{Unleased, UnleasedNic};

/// The path of the Dynamic NICs' document, below [`GCE_ROOT`].
pub const VLANS_PATH: &str = "/instance/vlan-network-interfaces/?recursive=true";

/// The highest 802.1Q id (4095 is reserved).
const MAX_VLAN: u16 = 4094;

/// One Dynamic NIC: the vNIC it sits on, its VLAN id and its entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GceVlan {
    /// The parent vNIC's index in `network-interfaces` (`nicN`).
    pub parent: u32,
    /// The 802.1Q id.
    pub vlan: u16,
    /// The entry, read as a vNIC's is; its `index` is the parent's.
    pub nic: GceNic,
}

/// The keys of a Dynamic NIC's entry a vNIC's has not.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct VlanKeys {
    /// `vlan`: the id again.
    vlan: Option<u16>,
    /// `parentInterface`: the parent's path.
    #[serde(default, deserialize_with = "doc::text")]
    parent_interface: Option<String>,
}

impl GceVlan {
    /// GCE's name for it, `nic<P>.<vlan>`.
    pub fn gce_name(&self) -> String {
        format!("nic{}.{}", self.parent, self.vlan)
    }

    /// The cloud-neutral metadata: a vNIC's, with the table slot of its MAC,
    /// GCE's name as its id, and its own address as its subnet when the entry
    /// names no `subnetmask` (module docs).
    pub fn metadata(&self) -> crate::model::NicMetadata {
        let mut n = self.nic.metadata();
        n.device_number = Some(device_slot(self.nic.mac));
        n.interface_id = Some(self.gce_name());
        if n.subnet_ipv4_cidr_blocks.is_empty() {
            n.subnet_ipv4_cidr_blocks = self.nic.ip.map(Ipv4Net::from).into_iter().collect();
        }
        n
    }

    /// What a DHCP server would have handed it, each family on its own, with
    /// [`Reason::Metadata`]: `ip`/32 via `gateway` (both needed), the first of
    /// `ipv6s`/128 via `gatewayIpv6` (when given).
    pub fn leases(&self) -> Vec<Lease> {
        let v4 = self.nic.ip.zip(self.nic.gateway).map(|(ip, gw)| Lease {
            family: Family::V4,
            address: IpAddr::V4(ip),
            prefix_len: Ipv4Net::from(ip).prefix_len(),
            routers: vec![IpAddr::V4(gw)],
            reason: Reason::Metadata,
        });
        let v6 = self.nic.ipv6s.first().map(|a| Lease {
            family: Family::V6,
            address: IpAddr::V6(*a),
            prefix_len: Ipv6Net::from(*a).prefix_len(),
            routers: self.nic.gateway_ipv6.map(IpAddr::V6).into_iter().collect(),
            reason: Reason::Metadata,
        });
        v4.into_iter().chain(v6).collect()
    }
}

/// Parses the answer to [`VLANS_PATH`] (module docs); `vnics` are the
/// instance's vNICs, whose MACs no Dynamic NIC may have. Sorted by parent,
/// then VLAN id.
pub fn parse_vlans(body: &str, vnics: &[GceNic]) -> Result<Vec<GceVlan>> {
    let whole = format!("{GCE_ROOT}/instance/vlan-network-interfaces");
    let tree: BTreeMap<String, BTreeMap<String, Value>> =
        doc::read(body, "GCE vlan-network-interfaces", &whole)?;
    let mut out: Vec<GceVlan> = Vec::new();
    for (p, vlans) in &tree {
        let parent = number(p, &whole, u32::try_from(MAX_NICS - 1).unwrap_or(u32::MAX))?;
        for (v, entry) in vlans {
            let key = format!("{whole}/{p}/{v}");
            let vlan = number(v, &format!("{whole}/{p}"), u32::from(MAX_VLAN))
                .and_then(|n| u16::try_from(n).map_err(|_| bad(&key, "not a VLAN id", v)))?;
            if vlan == 0 {
                return Err(bad(&key, "not a VLAN id (1 to 4094)", v));
            }
            let mut nic: GceNic = doc::from_value(entry, &key)?;
            nic.index = parent;
            check_entry(&nic, &key)?;
            let keys: VlanKeys = doc::from_value(entry, &key)?;
            if let Some(id) = keys.vlan.filter(|id| *id != vlan) {
                return Err(bad(
                    format!("{key}/vlan"),
                    format!("not the id it is listed under ({vlan})"),
                    &id.to_string(),
                ));
            }
            let path = format!("{GCE_ROOT}/instance/network-interfaces/{parent}/");
            if let Some(pi) = keys.parent_interface.filter(|pi| *pi != path) {
                return Err(bad(
                    format!("{key}/parentInterface"),
                    format!("not the vNIC it is listed under ({path})"),
                    &pi,
                ));
            }
            let mut taken = vnics
                .iter()
                .map(|n| n.mac)
                .chain(out.iter().map(|o| o.nic.mac));
            if taken.any(|m| m == nic.mac) {
                return Err(bad(
                    format!("{key}/mac"),
                    "a MAC another NIC has",
                    &nic.mac.to_string(),
                ));
            }
            if out.len() >= MAX_NICS {
                return Err(bad(&whole, format!("more than {MAX_NICS} NICs"), "…"));
            }
            out.push(GceVlan { parent, vlan, nic });
        }
    }
    out.sort_by_key(|v| (v.parent, v.vlan));
    Ok(out)
}

/// A key of the tree that must be a decimal number up to `max`.
fn number(text: &str, under: &str, max: u32) -> Result<u32> {
    text.parse::<u32>()
        .ok()
        .filter(|n| *n <= max && !text.starts_with('+'))
        .ok_or_else(|| {
            bad(
                format!("{under}/{text}"),
                format!("not a number from 0 to {max}"),
                text,
            )
        })
}

/// The Dynamic NICs as [`Unleased`] NICs: each with its leases
/// ([`GceVlan::leases`]) and its VLAN on the vNIC `network-interfaces/<P>`
/// names by MAC; the metadata is the vNICs' and the Dynamic NICs' together.
/// A Dynamic NIC whose parent `vnics` does not list is logged and left out.
pub fn unleased(vnics: &[GceNic], vlans: &[GceVlan]) -> Unleased {
    let mut net: InstanceNetwork = network(vnics);
    let mut nics = Vec::with_capacity(vlans.len());
    for v in vlans {
        let Some(parent) = vnics.iter().find(|n| n.index == v.parent) else {
            log::warn!(
                "GCE Dynamic NIC {} ({}): its parent nic{} is not listed: left alone",
                v.gce_name(),
                v.nic.mac,
                v.parent
            );
            continue;
        };
        net.nics.push(v.metadata());
        nics.push(UnleasedNic {
            mac: v.nic.mac,
            leases: v.leases(),
            link: Some(NicLink::Vlan {
                parent: Parent::Mac(parent.mac),
                vlan: v.vlan,
            }),
        });
    }
    net.nics.sort_by_key(|n| n.mac);
    Unleased {
        nics,
        network: net,
        owns_links: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::gce::nic::parse_interfaces;

    const VNICS: &str = r#"[
      {"mac":"42:01:0a:00:00:0a","ip":"10.0.0.10","gateway":"10.0.0.1","subnetmask":"255.255.255.0"},
      {"mac":"42:01:0a:00:01:14","ip":"10.0.1.20","gateway":"10.0.1.1","subnetmask":"255.255.255.0"}
    ]"#;

    /// Two Dynamic NICs: VLAN 5 on nic0 (dual stack, with `subnetmask`), VLAN
    /// 7 on nic1 (as the guest agent's struct reads it: no `subnetmask`).
    const VLANS: &str = r#"{
      "1": {"7": {"mac":"42:01:0a:00:03:1e","ip":"10.0.3.30","gateway":"10.0.3.1",
                  "parentInterface":"/computeMetadata/v1/instance/network-interfaces/1/",
                  "vlan":7,"mtu":1460}},
      "0": {"5": {"mac":"42:01:0a:00:02:1e","ip":"10.0.2.30","gateway":"10.0.2.1",
                  "subnetmask":"255.255.255.0","ipAliases":["10.0.2.64/30"],
                  "ipv6s":["fd20:172:1610:7003:0:1:0:0"],"ipv6":["fd20:172:1610:7003:0:1::/96"],
                  "gatewayIpv6":"fe80::1","mtu":1460,"vlan":5,
                  "parentInterface":"/computeMetadata/v1/instance/network-interfaces/0/"}}
    }"#;

    fn vnics() -> Vec<GceNic> {
        parse_interfaces(VNICS).unwrap()
    }

    #[test]
    fn entries_are_read_per_parent_and_vlan_and_become_vlan_links() {
        let v = parse_vlans(VLANS, &vnics()).unwrap();
        assert_eq!(
            v.iter().map(|v| (v.parent, v.vlan)).collect::<Vec<_>>(),
            [(0, 5), (1, 7)]
        );
        let u = unleased(&vnics(), &v);
        assert!(u.owns_links);
        assert_eq!(u.nics.len(), 2);
        let first = &u.nics[0];
        assert_eq!(first.mac.to_string(), "42:01:0a:00:02:1e");
        assert_eq!(
            first.link,
            Some(NicLink::Vlan {
                parent: Parent::Mac("42:01:0a:00:00:0a".parse().unwrap()),
                vlan: 5
            })
        );
        let shown: Vec<String> = first
            .leases
            .iter()
            .map(|l| format!("{}/{} {:?}", l.address, l.prefix_len, l.routers))
            .collect();
        assert_eq!(
            shown,
            [
                "10.0.2.30/32 [10.0.2.1]",
                "fd20:172:1610:7003:0:1::/128 [fe80::1]"
            ]
        );
        assert!(first.leases.iter().all(|l| l.reason == Reason::Metadata));
        // The metadata: the vNICs and the Dynamic NICs, each with its table slot.
        assert_eq!(u.network.nics.len(), 4);
        assert_eq!(u.network.primary_mac, Some(vnics()[0].mac));
        let m = u.network.nic(first.mac).unwrap();
        assert_eq!(m.device_number, Some(device_slot(first.mac)));
        assert_eq!(m.interface_id.as_deref(), Some("nic0.5"));
        assert_eq!(m.subnet_ipv4_cidr_blocks[0].to_string(), "10.0.2.0/24");
        assert_eq!(m.ipv4_prefixes[0].to_string(), "10.0.2.64/30");
        assert_eq!(
            m.ipv6_prefixes[0].to_string(),
            "fd20:172:1610:7003:0:1::/96"
        );
        // No `subnetmask`: the address is its own subnet.
        let second = u.network.nic(u.nics[1].mac).unwrap();
        assert_eq!(
            second.subnet_ipv4_cidr_blocks[0].to_string(),
            "10.0.3.30/32"
        );
        assert_eq!(u.nics[1].leases.len(), 1);
    }

    #[test]
    fn an_entry_without_ip_or_gateway_has_no_ipv4_lease() {
        let body = r#"{"0":{"9":{"mac":"42:01:0a:00:09:09","ipv6s":["fd00::5"]}}}"#;
        let v = parse_vlans(body, &vnics()).unwrap();
        let leases = v[0].leases();
        assert_eq!(leases.len(), 1);
        assert_eq!(leases[0].family, Family::V6);
        assert!(leases[0].routers.is_empty());
        let body = r#"{"0":{"9":{"mac":"42:01:0a:00:09:09","ip":"10.0.9.9"}}}"#;
        assert!(parse_vlans(body, &vnics()).unwrap()[0].leases().is_empty());
    }

    #[test]
    fn a_dynamic_nic_whose_parent_is_not_listed_is_left_out() {
        let body =
            r#"{"3":{"9":{"mac":"42:01:0a:00:09:09","ip":"10.0.9.9","gateway":"10.0.9.1"}}}"#;
        let v = parse_vlans(body, &vnics()).unwrap();
        let u = unleased(&vnics(), &v);
        assert!(u.nics.is_empty());
        assert!(u.owns_links);
        assert_eq!(u.network.nics.len(), 2);
    }

    #[test]
    fn hostile_answers_are_errors_naming_the_key() {
        let root = "/computeMetadata/v1/instance/vlan-network-interfaces";
        let cases = [
            ("[]", root.to_owned()),
            (r#"{"x":{}}"#, format!("{root}/x")),
            (r#"{"-1":{}}"#, format!("{root}/-1")),
            (r#"{"+1":{}}"#, format!("{root}/+1")),
            (r#"{"64":{}}"#, format!("{root}/64")),
            (
                r#"{"0":{"0":{"mac":"42:01:0a:00:09:09"}}}"#,
                format!("{root}/0/0"),
            ),
            (
                r#"{"0":{"4095":{"mac":"42:01:0a:00:09:09"}}}"#,
                format!("{root}/0/4095"),
            ),
            (r#"{"0":{"5":[]}}"#, format!("{root}/0/5")),
            (
                r#"{"0":{"5":{"ip":"10.0.0.1"}}}"#,
                format!("{root}/0/5/mac"),
            ),
            (
                r#"{"0":{"5":{"mac":"42:01:0a:00:09:09","ip":"10.0.0.300"}}}"#,
                format!("{root}/0/5/ip"),
            ),
            (
                r#"{"0":{"5":{"mac":"42:01:0a:00:09:09","vlan":6}}}"#,
                format!("{root}/0/5/vlan"),
            ),
            (
                r#"{"0":{"5":{"mac":"42:01:0a:00:09:09","parentInterface":"/computeMetadata/v1/instance/network-interfaces/1/"}}}"#,
                format!("{root}/0/5/parentInterface"),
            ),
            (
                r#"{"0":{"5":{"mac":"42:01:0a:00:00:0a"}}}"#,
                format!("{root}/0/5/mac"),
            ),
            (
                r#"{"0":{"5":{"mac":"42:01:0a:00:09:09"},"6":{"mac":"42:01:0a:00:09:09"}}}"#,
                format!("{root}/0/6/mac"),
            ),
            (
                r#"{"0":{"5":{"mac":"42:01:0a:00:09:09","subnetmask":"255.0.255.0"}}}"#,
                format!("{root}/0/5/subnetmask"),
            ),
        ];
        for (body, key) in cases {
            let e = parse_vlans(body, &vnics()).unwrap_err().to_string();
            assert!(e.contains(&key), "{body}: {e}");
        }
        let mut many = serde_json::Map::new();
        for i in 1..=65u8 {
            many.insert(
                i.to_string(),
                serde_json::json!({"mac": format!("42:01:0a:00:aa:{i:02x}")}),
            );
        }
        let body = serde_json::json!({ "0": many }).to_string();
        let e = parse_vlans(&body, &vnics()).unwrap_err().to_string();
        assert!(e.contains("more than 64 NICs"), "{e}");
    }
}

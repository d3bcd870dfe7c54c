// SPDX-License-Identifier: Apache-2.0
//! Pure: the one "is it complete" check of every cloud's consistency wait
//! (SPEC §3.5): what the metadata fetched so far lacks for one NIC event's plan.
//!
//! The check lists exactly the [`Missing`] items the planner would list for the
//! event's NIC alone with its leases, under the `ec2-net-utils` scheme
//! ([`check_config`]), but without planning: the items depend only on the NIC's
//! own entry (is it there, its `device-number` and `network-card` read with the
//! planner's own `plan::card_and_device`, and whether each lease's family
//! lists addresses, the leased one, a subnet, judged by the planner's own
//! `plan::lease_gaps`) and on the top-level `mac`, never
//! on the gate, the routes or the kernel. So a BOUND event plans once, in the
//! hook, on the kernel as it is after the wait (issue 32 item 4), and the wait
//! and the plan still agree about "complete": this module's tests check the two
//! against each other over every combination of each input's kinds of value.

use std::net::IpAddr;

use crate::error::Result;
use crate::model::{InstanceNetwork, Missing, Profile};
use crate::plan::{PlanConfig, card_and_device, lease_gaps, table_number};

use super::{Assessment, NicEvent};

/// The configuration the check plans with: the `ec2-net-utils` scheme (the
/// table from the device number or the cloud's slot), the defaults otherwise.
pub fn check_config() -> PlanConfig {
    PlanConfig {
        profile: Profile::Ec2NetUtils,
        ..PlanConfig::default()
    }
}

/// What `network` says about `event` with [`check_config`]: the network, and
/// what its plan still lacks.
pub fn assess(event: &NicEvent, network: InstanceNetwork) -> Result<Assessment> {
    let missing = missing(event, &network, &check_config())?;
    Ok(Assessment { network, missing })
}

/// The metadata items the `ec2-net-utils` plan of `event`'s NIC (its link
/// alone, its leases) under `cfg` still lacks in `network`, sorted, each once:
/// what [`crate::plan::plan`] lists there and waiting can fix
/// ([`Missing::is_metadata`]). `cfg.profile` is not read: the check's scheme
/// is `ec2-net-utils`, whose table needs the device number. Fails where that
/// plan fails: a table or priority number that overflows.
pub fn missing(
    event: &NicEvent,
    network: &InstanceNetwork,
    cfg: &PlanConfig,
) -> Result<Vec<Missing>> {
    let mac = event.mac();
    let primary = network.primary_mac == Some(mac);
    let mut missing = Vec::new();
    if network.primary_mac.is_none() {
        missing.push(Missing::PrimaryMac);
    }
    if let Some(nic) = network.nic(mac) {
        let (card, device) = card_and_device(network, nic, primary, &mut missing);
        // The plan numbers the NIC's table and rules as soon as both are
        // trusted, and fails on a number that overflows: so does the check.
        if (!primary || cfg.primary_rules)
            && let Some((card, device)) = card.zip(device)
        {
            table_number(cfg.table_base, card, device)?;
            table_number(cfg.priority_base.unwrap_or(cfg.table_base), card, device)?;
        }
        for lease in event.leases() {
            // Per family: the NIC's addresses, the leased one among them, its
            // subnet (the planner's own checks of a lease, before its gate).
            let (lists, has_subnet) = match lease.address {
                IpAddr::V4(a) => (
                    (!nic.local_ipv4s.is_empty(), nic.local_ipv4s.contains(&a)),
                    !nic.subnet_ipv4_cidr_blocks.is_empty(),
                ),
                IpAddr::V6(a) => (
                    (!nic.ipv6s.is_empty(), nic.ipv6s.contains(&a)),
                    !nic.subnet_ipv6_cidr_blocks.is_empty(),
                ),
            };
            lease_gaps(lease.address, lists, has_subnet, &mut missing);
        }
    } else {
        missing.push(Missing::MacFolder);
    }
    // A primary without rules lacks only what it configures (its addresses).
    if primary && !cfg.primary_rules {
        let adds = cfg.secondary_addresses && !cfg.kubernetes;
        missing.retain(|m| m.concerns_unrouted_primary(adds));
    }
    missing.sort();
    missing.dedup();
    Ok(missing)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::{check_config, missing};
    use crate::error::Result;
    use crate::model::{
        Family, IfName, InstanceNetwork, Lease, Link, MacAddr, Missing, NicMetadata, Reason,
    };
    use crate::plan::{InterfaceLease, PlanConfig, PlanInput, plan};
    use crate::source::provider::NicEvent;

    /// What the check was before it stopped planning: the planner asked to plan
    /// the NIC alone with its leases, its metadata items kept.
    fn planned(
        event: &NicEvent,
        network: &InstanceNetwork,
        cfg: &PlanConfig,
    ) -> Result<Vec<Missing>> {
        let links = [Link {
            name: event.interface().clone(),
            mac: event.mac(),
            ipv6_router: None,
        }];
        let leases: Vec<InterfaceLease> = event
            .leases()
            .iter()
            .map(|l| InterfaceLease {
                interface: event.interface().clone(),
                lease: l.clone(),
            })
            .collect();
        let p = plan(&PlanInput::new(network, &links, &leases), cfg)?;
        let mut missing: Vec<Missing> = p
            .interfaces
            .into_iter()
            .flat_map(|i| i.missing)
            .filter(Missing::is_metadata)
            .collect();
        missing.sort();
        missing.dedup();
        Ok(missing)
    }

    fn lease(address: &str) -> Lease {
        let address: std::net::IpAddr = address.parse().unwrap();
        Lease {
            family: Family::of(&address),
            address,
            prefix_len: if address.is_ipv4() { 24 } else { 128 },
            routers: Vec::new(),
            reason: Reason::Bound,
        }
    }

    /// The configurations the clouds check with: the primary's use, Kubernetes,
    /// and numbering bases that overflow.
    fn configs() -> [PlanConfig; 6] {
        [
            check_config(),
            PlanConfig {
                primary_rules: true,
                ..check_config()
            },
            PlanConfig {
                secondary_addresses: false,
                ..check_config()
            },
            PlanConfig {
                kubernetes: true,
                ..check_config()
            },
            PlanConfig {
                primary_rules: true,
                table_base: u32::MAX - 150,
                ..check_config()
            },
            PlanConfig {
                priority_base: Some(u32::MAX - 150),
                ..check_config()
            },
        ]
    }

    /// The NIC `me`'s entries: none, or each combination of its `network-card`,
    /// its `device-number` (one that overflows the table included), each
    /// family's addresses (none, the leased `v4`/`v6`, another, both) and its
    /// subnet.
    fn entries(me: MacAddr, (v4, v6): (Ipv4Addr, Ipv6Addr)) -> Vec<Option<NicMetadata>> {
        let v4_other: Ipv4Addr = "10.0.1.30".parse().unwrap();
        let v6_other: Ipv6Addr = "2001:db8::30".parse().unwrap();
        let v4_lists = [vec![], vec![v4], vec![v4_other], vec![v4_other, v4]];
        let v6_lists = [vec![], vec![v6], vec![v6_other]];
        let mut out = vec![None];
        for card in [None, Some(0), Some(1)] {
            for device in [None, Some(0), Some(2), Some(u32::MAX)] {
                for (addrs4, subnet4) in v4_lists.iter().flat_map(|l| [(l, false), (l, true)]) {
                    for (addrs6, subnet6) in v6_lists.iter().flat_map(|l| [(l, false), (l, true)]) {
                        let mut n = NicMetadata::empty(me);
                        n.network_card = card;
                        n.device_number = device;
                        n.local_ipv4s.clone_from(addrs4);
                        n.ipv6s.clone_from(addrs6);
                        if subnet4 {
                            n.subnet_ipv4_cidr_blocks = vec!["10.0.1.0/24".parse().unwrap()];
                        }
                        if subnet6 {
                            n.subnet_ipv6_cidr_blocks = vec!["2001:db8::/64".parse().unwrap()];
                        }
                        out.push(Some(n));
                    }
                }
            }
        }
        out
    }

    /// The check and the planner agree on every combination of what the
    /// check reads: the top-level `mac` (none, this NIC, another), the NIC's
    /// entry ([`entries`]), a peer that serves `network-card` or not, the
    /// event's leases, and the configurations the clouds check with
    /// ([`configs`]).
    #[test]
    fn the_check_lists_what_the_plan_lists() {
        let me = MacAddr::new([2, 0, 0, 0, 0, 1]);
        let peer = MacAddr::new([2, 0, 0, 0, 0, 2]);
        let name = IfName::try_new("eth1").unwrap();
        let (v4, v6) = ("10.0.1.20", "2001:db8::20");
        let lease_sets = [vec![lease(v4)], vec![lease(v6)], vec![lease(v4), lease(v6)]];
        let entries = entries(me, (v4.parse().unwrap(), v6.parse().unwrap()));
        let cfgs = configs();
        let (mut cases, mut failures) = (0usize, 0usize);
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for leases in &lease_sets {
            let event = NicEvent::try_new(name.clone(), me, leases.clone()).unwrap();
            for primary_mac in [None, Some(me), Some(peer)] {
                for peer_card in [None, Some(1)] {
                    for entry in &entries {
                        let mut other = NicMetadata::empty(peer);
                        other.network_card = peer_card;
                        other.device_number = Some(0);
                        let network = InstanceNetwork {
                            primary_mac,
                            nics: entry.iter().cloned().chain([other]).collect(),
                        };
                        for cfg in &cfgs {
                            cases += 1;
                            let want = planned(&event, &network, cfg);
                            let got = missing(&event, &network, cfg);
                            match (&want, &got) {
                                (Ok(w), Ok(g)) => {
                                    seen.extend(w.iter().map(|m| format!("{m:?}")));
                                    assert_eq!(g, w, "{network:?} {leases:?} {cfg:?}");
                                }
                                (Err(w), Err(g)) => {
                                    failures += 1;
                                    assert_eq!(g.to_string(), w.to_string());
                                }
                                _ => panic!("{want:?} != {got:?}: {network:?} {leases:?} {cfg:?}"),
                            }
                        }
                    }
                }
            }
        }
        // Every kind of item and the overflow were among the cases.
        let kinds: BTreeSet<&str> = seen
            .iter()
            .map(|s| s.split([' ', '{']).next().unwrap_or_default())
            .collect();
        assert_eq!(kinds.len(), 8, "{kinds:?}");
        assert!(failures > 0 && cases > 50_000, "{failures} of {cases}");
    }
}

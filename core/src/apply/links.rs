// SPDX-License-Identifier: Apache-2.0
//! Links leasehook creates and owns: a NIC the cloud gives as a VLAN has no
//! link until the OS makes one (OCI bare metal: a macvlan with the VNIC's MAC
//! on physical NIC `nicIndex`, a VLAN `vlanTag` on it). [`plan_links`] is pure
//! (what to create, what to delete, what conflicts); [`reconcile`] performs IO
//! through a [`LinkKernel`] (netlink in production, the recording fake in
//! tests), rolling back what it made for a NIC when a later step fails.
//!
//! Ownership: every link leasehook creates carries the alias
//! `leasehook:<MAC>` (`IFLA_IFALIAS`, `ip link show` prints it). Only a link
//! with that alias is ever deleted, and only when the metadata answered and no
//! longer lists the MAC; a link of the same name without it is someone else's
//! (oci-utils', an operator's): left alone, the conflict logged.

use crate::error::Result;
use crate::model::{IfName, MacAddr};
pub use crate::model::{NicLink, Parent};

/// The alias prefix of a link leasehook created: `leasehook:<MAC>`.
pub const ALIAS_PREFIX: &str = "leasehook:";

/// What kind of link the kernel reports (`IFLA_INFO_KIND`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    /// No kind: a device with a driver (a physical NIC, virtio, ENA).
    Device,
    /// `veth` (a container's NIC, the test lab's).
    Veth,
    /// `macvlan`.
    Macvlan,
    /// `vlan` (802.1Q).
    Vlan,
    /// Any other (bridge, bond, tunnel, dummy...).
    Other,
}

/// A link as [`LinkKernel::link_details`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkDetail {
    /// The interface index.
    pub index: u32,
    /// The name.
    pub name: IfName,
    /// Its MAC when it is a NIC ([`super::nic_mac`]).
    pub mac: Option<MacAddr>,
    /// Its kind.
    pub kind: LinkKind,
    /// The link it sits on (`IFLA_LINK`: a macvlan's or VLAN's lower link).
    pub lower: Option<u32>,
    /// `IFLA_IFALIAS`.
    pub alias: Option<String>,
}

impl LinkDetail {
    /// The MAC of the NIC leasehook created this link for (its alias
    /// `leasehook:<MAC>`), `None` for anyone else's link.
    pub fn ours(&self) -> Option<MacAddr> {
        self.alias
            .as_deref()?
            .strip_prefix(ALIAS_PREFIX)?
            .parse()
            .ok()
    }
}

/// A link to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLink {
    /// Its name (at most 15 bytes, as [`IfName`] holds).
    pub name: IfName,
    /// The link it sits on.
    pub lower: Lower,
    /// What it is.
    pub kind: NewKind,
    /// The NIC it is made for (its alias is `leasehook:<MAC>`).
    pub owner: MacAddr,
}

impl NewLink {
    /// `leasehook:<MAC>`.
    pub fn alias(&self) -> String {
        format!("{ALIAS_PREFIX}{}", self.owner)
    }
}

/// The lower link of a [`NewLink`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lower {
    /// An existing link.
    Index(u32),
    /// The link made by the step before.
    Made,
}

/// The kind of a [`NewLink`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewKind {
    /// A macvlan with this MAC, the kernel's default mode (VEPA, which
    /// oci-utils gets: it names no mode).
    Macvlan(MacAddr),
    /// An 802.1Q VLAN with this id, with this MAC (`None`: its lower link's).
    Vlan(u16, Option<MacAddr>),
}

/// The link writes only leasehook makes.
pub trait LinkKernel {
    /// Every link with its kind, lower link and alias (`ip -d link show`).
    fn link_details(&mut self) -> Result<Vec<LinkDetail>>;

    /// `ip link add link LOWER name NAME [address MAC] up type macvlan|vlan
    /// [id N]`, then `ip link set NAME alias leasehook:<MAC>` (the kernel
    /// ignores an alias given at creation); a link whose alias could not be set
    /// is deleted again. Returns its index.
    fn add_link(&mut self, new: &NewLink, lower: u32) -> Result<u32>;

    /// `ip link del INDEX` (a macvlan's VLANs go with it).
    fn del_link(&mut self, index: u32) -> Result<()>;
}

/// Pure: the links as NICs ([`super::KernelLink`]): a link a VLAN with the
/// same MAC sits on (leasehook's macvlan, oci-utils') is no NIC: the VLAN is,
/// and the lookup by MAC finds it.
pub fn nics_of(details: &[LinkDetail]) -> Vec<super::KernelLink> {
    details
        .iter()
        .map(|d| {
            let under_vlan = details.iter().any(|v| {
                v.kind == LinkKind::Vlan
                    && v.lower == Some(d.index)
                    && v.mac.is_some()
                    && v.mac == d.mac
            });
            super::KernelLink {
                index: d.index,
                name: d.name.clone(),
                mac: d.mac.filter(|_| !under_vlan),
            }
        })
        .collect()
}

/// Pure: the physical NICs in OCI's `nicIndex` order, the convention
/// oci-utils' `secondary_vnic_all_configure.sh` follows: the NICs (a MAC of
/// their own, no port) that are devices (or veths, a container's NICs), not
/// leasehook's, sorted by the first number in their name (none: 0), then by
/// name. The kernel has no NIC index: this is a convention, not a guarantee.
pub fn physical_nics(details: &[LinkDetail]) -> Vec<&LinkDetail> {
    let mut nics: Vec<&LinkDetail> = details
        .iter()
        .filter(|d| d.mac.is_some() && matches!(d.kind, LinkKind::Device | LinkKind::Veth))
        .filter(|d| d.ours().is_none())
        .collect();
    let first_number = |n: &str| -> u64 {
        n.split(|c: char| !c.is_ascii_digit())
            .find(|s| !s.is_empty())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    };
    nics.sort_by(|a, b| {
        (first_number(a.name.as_str()), a.name.as_str())
            .cmp(&(first_number(b.name.as_str()), b.name.as_str()))
    });
    nics
}

/// Pure: a link's name, `<parent><sep><vlan>`, or `nic<n><sep><vlan>` when that
/// is longer than 15 bytes (an `enp94s0f0np0`).
fn name(parent: &IfName, n: usize, sep: char, vlan: u16) -> Option<IfName> {
    IfName::try_new(&format!("{parent}{sep}{vlan}"))
        .or_else(|_| IfName::try_new(&format!("nic{n}{sep}{vlan}")))
        .ok()
}

/// What [`plan_links`] decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkPlan {
    /// leasehook's links whose NIC the metadata no longer lists (a macvlan's
    /// VLAN not among them: it goes with the macvlan).
    pub delete: Vec<LinkDetail>,
    /// Per NIC, the links to create, in order.
    pub create: Vec<Vec<NewLink>>,
    /// Why a NIC gets no link: a name someone else's link holds, no parent.
    pub refused: Vec<String>,
}

/// Pure: what to create for `wanted` (each NIC's MAC and link) among the
/// kernel's links `details`, and, with `listed` (every MAC the metadata lists,
/// the unmanaged ones included), which of leasehook's links go: those whose
/// MAC is not among them. `None`: none goes.
pub fn plan_links(
    wanted: &[(MacAddr, NicLink)],
    details: &[LinkDetail],
    listed: Option<&[MacAddr]>,
) -> LinkPlan {
    let mut plan = LinkPlan::default();
    if let Some(listed) = listed {
        let gone: Vec<&LinkDetail> = details
            .iter()
            .filter(|d| d.ours().is_some_and(|m| !listed.contains(&m)))
            .collect();
        plan.delete = gone
            .iter()
            .filter(|d| !gone.iter().any(|g| Some(g.index) == d.lower))
            .map(|d| (*d).clone())
            .collect();
    }
    let nics = physical_nics(details);
    let by_name = |n: &IfName| details.iter().find(|d| d.name == *n);
    for (mac, link) in wanted {
        let (parent, vlan, macvlan) = match *link {
            NicLink::MacvlanVlan { parent, vlan } => (parent, vlan, true),
            NicLink::Vlan { parent, vlan } => (parent, vlan, false),
        };
        let found = match parent {
            Parent::NicIndex(i) => nics.get(usize::from(i)).map(|p| (*p, usize::from(i))),
            Parent::Mac(m) => nics
                .iter()
                .enumerate()
                .find(|(_, p)| p.mac == Some(m))
                .map(|(i, p)| (*p, i)),
        };
        let Some((p, n)) = found else {
            plan.refused
                .push(format!("{mac}: no {parent} to put VLAN {vlan} on"));
            continue;
        };
        let (Some(mname), Some(vname)) = (name(&p.name, n, '.', vlan), name(&p.name, n, 'v', vlan))
        else {
            plan.refused
                .push(format!("{mac}: no usable link name on {}", p.name));
            continue;
        };
        let vname = if macvlan { vname } else { mname.clone() };
        // Someone else's link already has the NIC's MAC (oci-utils made it):
        // it is the NIC, configured by the lookup by MAC.
        if nics_of(details)
            .iter()
            .any(|k| k.mac == Some(*mac) && by_name(&k.name).is_some_and(|d| d.ours().is_none()))
        {
            continue;
        }
        let mut steps = Vec::new();
        let mut lower = Lower::Index(p.index);
        if macvlan {
            match by_name(&mname) {
                Some(d) if d.ours() == Some(*mac) => lower = Lower::Index(d.index),
                Some(d) => {
                    plan.refused.push(conflict(*mac, d));
                    continue;
                }
                None => {
                    steps.push(NewLink {
                        name: mname,
                        lower,
                        kind: NewKind::Macvlan(*mac),
                        owner: *mac,
                    });
                    lower = Lower::Made;
                }
            }
        }
        match by_name(&vname) {
            Some(d) if d.ours() == Some(*mac) => {}
            Some(d) => {
                plan.refused.push(conflict(*mac, d));
                continue;
            }
            None => steps.push(NewLink {
                name: vname,
                lower,
                kind: NewKind::Vlan(vlan, (!macvlan).then_some(*mac)),
                owner: *mac,
            }),
        }
        if !steps.is_empty() {
            plan.create.push(steps);
        }
    }
    plan
}

fn conflict(mac: MacAddr, d: &LinkDetail) -> String {
    let alias = d
        .alias
        .as_deref()
        .filter(|a| !a.is_empty())
        .map_or_else(|| "no alias".to_owned(), |a| format!("alias {a:?}"));
    format!(
        "{mac}: a link named {} exists that leasehook did not create ({alias}): left alone, \
         no link created for this NIC",
        d.name
    )
}

/// What [`reconcile`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkReport {
    /// The links created, in order.
    pub created: Vec<IfName>,
    /// The links deleted.
    pub deleted: Vec<IfName>,
    /// Conflicts and refusals ([`LinkPlan::refused`]) and failures (each
    /// rolled back), as logged.
    pub problems: Vec<String>,
}

/// Creates the links `wanted` needs and, with `listed`, deletes leasehook's
/// links whose NIC is not among the MACs it holds (the caller passes it only
/// with an answer of the metadata in hand: never on a fetch failure; an
/// unmanaged NIC is listed, not wanted: its link, if leasehook made one, stays).
/// A NIC whose creation fails at a later step gets back what this run made for
/// it. Every problem is logged; none stops the other NICs.
pub fn reconcile(
    kernel: &mut dyn LinkKernel,
    wanted: &[(MacAddr, NicLink)],
    listed: Option<&[MacAddr]>,
) -> LinkReport {
    let mut report = LinkReport::default();
    let details = match kernel.link_details() {
        Ok(d) => d,
        Err(e) => {
            log::warn!("the links leasehook creates: {e}");
            report.problems.push(e.to_string());
            return report;
        }
    };
    let plan = plan_links(wanted, &details, listed);
    for why in plan.refused {
        log::warn!("{why}");
        report.problems.push(why);
    }
    for d in plan.delete {
        match kernel.del_link(d.index) {
            Ok(()) => {
                log::info!(
                    "{}: deleted (leasehook created it for {}, which the metadata no longer lists)",
                    d.name,
                    d.ours().map_or_else(String::new, |m| m.to_string())
                );
                report.deleted.push(d.name);
            }
            Err(e) => {
                log::warn!("{}: could not delete: {e}", d.name);
                report.problems.push(e.to_string());
            }
        }
    }
    for steps in plan.create {
        let mut made: Vec<(u32, &IfName)> = Vec::new();
        for step in &steps {
            let lower = match (step.lower, made.last()) {
                (Lower::Index(i), _) | (Lower::Made, Some(&(i, _))) => i,
                (Lower::Made, None) => break,
            };
            match kernel.add_link(step, lower) {
                Ok(i) => made.push((i, &step.name)),
                Err(e) => {
                    let why = format!("{}: could not create {}: {e}", step.owner, step.name);
                    log::warn!("{why}; what this run made for it is deleted again");
                    report.problems.push(why);
                    for (i, n) in made.drain(..).rev() {
                        if let Err(e) = kernel.del_link(i) {
                            log::warn!("{n}: rollback failed: {e}");
                            report.problems.push(e.to_string());
                        }
                    }
                    break;
                }
            }
        }
        for (step, (_, n)) in steps.iter().zip(made) {
            log::info!("{n}: created for {0} (alias {ALIAS_PREFIX}{0})", step.owner);
            report.created.push(n.clone());
        }
    }
    report
}

#[cfg(test)]
#[allow(clippy::many_single_char_names)]
mod tests {
    use super::*;
    use crate::apply::Applier as _;
    use crate::apply::record::{LinkExtra, RecordingApplier};
    use crate::model::Link;

    const VNIC: &str = "02:00:17:05:cf:51";
    const OTHER: &str = "02:00:17:05:cf:52";

    fn mac(m: &str) -> MacAddr {
        m.parse().unwrap()
    }

    fn name(n: &str) -> IfName {
        IfName::try_new(n).unwrap()
    }

    /// A bare-metal host: two physical NICs, numbered out of name order.
    fn host() -> RecordingApplier {
        RecordingApplier::with_links(
            [
                ("ens300f1", "90:e2:ba:00:00:02"),
                ("ens300f0", "90:e2:ba:00:00:01"),
            ]
            .iter()
            .map(|(n, m)| Link {
                name: name(n),
                mac: mac(m),
                ipv6_router: None,
            })
            .collect(),
        )
    }

    fn want(m: &str, nic: u8, vlan: u16) -> (MacAddr, NicLink) {
        let link = NicLink::MacvlanVlan {
            parent: Parent::NicIndex(nic),
            vlan,
        };
        (mac(m), link)
    }

    fn names(k: &RecordingApplier) -> Vec<String> {
        k.links.iter().map(|l| l.name.to_string()).collect()
    }

    #[test]
    fn the_macvlan_and_its_vlan_are_created_marked_and_the_vlan_is_the_nic() {
        let mut k = host();
        let r = reconcile(&mut k, &[want(VNIC, 1, 100)], Some(&[mac(VNIC)]));
        assert_eq!(
            r.created,
            [name("ens300f1.100"), name("ens300f1v100")],
            "{r:?}"
        );
        assert!(r.problems.is_empty(), "{r:?}");
        let d = k.link_details().unwrap();
        let m = d
            .iter()
            .find(|l| l.name.as_str() == "ens300f1.100")
            .unwrap();
        let v = d
            .iter()
            .find(|l| l.name.as_str() == "ens300f1v100")
            .unwrap();
        // On physical NIC 1 (ens300f1: same first number, then by name).
        assert_eq!(m.lower, Some(2));
        assert_eq!(
            (m.kind, v.kind, v.lower),
            (LinkKind::Macvlan, LinkKind::Vlan, Some(m.index))
        );
        assert_eq!((m.ours(), v.ours()), (Some(mac(VNIC)), Some(mac(VNIC))));
        assert_eq!(m.alias.as_deref(), Some("leasehook:02:00:17:05:cf:51"));
        // The lookup by MAC finds the VLAN, not the macvlan under it.
        let nics: Vec<_> = k
            .links()
            .unwrap()
            .into_iter()
            .filter(|l| l.mac == Some(mac(VNIC)))
            .collect();
        assert_eq!(nics.len(), 1);
        assert_eq!(nics[0].name.as_str(), "ens300f1v100");
        // Again: nothing to do.
        let again = reconcile(&mut k, &[want(VNIC, 1, 100)], Some(&[mac(VNIC)]));
        assert_eq!(again, LinkReport::default());
    }

    #[test]
    fn a_link_of_the_same_name_someone_else_made_is_left_alone() {
        let mut k = host();
        // The operator's macvlan, unmarked (another MAC, no alias).
        let idx = 9;
        k.links.push(crate::apply::KernelLink {
            index: idx,
            name: name("ens300f0.7"),
            mac: Some(mac("02:aa:00:00:00:01")),
        });
        k.details.insert(
            idx,
            LinkExtra {
                kind: LinkKind::Macvlan,
                lower: Some(3),
                alias: None,
            },
        );
        let before = names(&k);
        let r = reconcile(&mut k, &[want(VNIC, 0, 7)], Some(&[mac(VNIC)]));
        assert!(r.created.is_empty() && r.deleted.is_empty(), "{r:?}");
        assert!(r.problems[0].contains("did not create"), "{r:?}");
        assert_eq!(names(&k), before);
        // And a link already carrying the VNIC's MAC (oci-utils made it) is the NIC.
        k.links.push(crate::apply::KernelLink {
            index: 10,
            name: name("mine"),
            mac: Some(mac(OTHER)),
        });
        let r = reconcile(&mut k, &[want(OTHER, 0, 8)], Some(&[mac(OTHER)]));
        assert_eq!(r, LinkReport::default());
    }

    #[test]
    fn only_leasehooks_links_of_an_unlisted_nic_are_deleted() {
        let mut k = host();
        let both = [want(VNIC, 0, 100), want(OTHER, 0, 200)];
        reconcile(&mut k, &both, Some(&[mac(VNIC), mac(OTHER)]));
        // Someone else's macvlan with a leasehook-like name but no alias.
        k.links.push(crate::apply::KernelLink {
            index: 20,
            name: name("ens300f0.300"),
            mac: Some(mac("02:bb:00:00:00:01")),
        });
        k.details.insert(
            20,
            LinkExtra {
                kind: LinkKind::Macvlan,
                lower: Some(3),
                alias: Some("mine".into()),
            },
        );
        // Without the list (one NIC's refresh) nothing goes.
        let r = reconcile(&mut k, &[want(VNIC, 0, 100)], None);
        assert_eq!(r, LinkReport::default());
        assert_eq!(names(&k).len(), 7);
        // Listed but not wanted (unmanaged): its links stay.
        let r = reconcile(&mut k, &[], Some(&[mac(VNIC), mac(OTHER)]));
        assert_eq!(r, LinkReport::default());
        let r = reconcile(&mut k, &[want(VNIC, 0, 100)], Some(&[mac(VNIC)]));
        // The macvlan is deleted; its VLAN goes with it.
        assert_eq!(r.deleted, [name("ens300f0.200")], "{r:?}");
        assert_eq!(
            names(&k),
            [
                "ens300f1",
                "ens300f0",
                "ens300f0.100",
                "ens300f0v100",
                "ens300f0.300"
            ]
        );
        // Nothing listed any more: every link of leasehook's goes, the rest stays.
        reconcile(&mut k, &[], Some(&[]));
        assert_eq!(names(&k), ["ens300f1", "ens300f0", "ens300f0.300"]);
    }

    #[test]
    fn a_vlan_the_kernel_refuses_takes_its_macvlan_back() {
        let mut k = host();
        k.refuse_links.insert(name("ens300f0v5"));
        let r = reconcile(&mut k, &[want(VNIC, 0, 5)], Some(&[mac(VNIC)]));
        assert!(r.created.is_empty(), "{r:?}");
        assert!(
            r.problems[0].contains("could not create ens300f0v5"),
            "{r:?}"
        );
        assert_eq!(names(&k), ["ens300f1", "ens300f0"]);
        assert!(k.details.is_empty());
    }

    #[test]
    fn names_fit_in_15_bytes_and_the_parent_must_exist() {
        let d = vec![LinkDetail {
            index: 2,
            name: name("enp94s0f0np0"),
            mac: Some(mac("90:e2:ba:00:00:01")),
            kind: LinkKind::Device,
            lower: None,
            alias: None,
        }];
        let p = plan_links(&[want(VNIC, 0, 4095), want(OTHER, 3, 1)], &d, None);
        let made: Vec<&str> = p.create[0].iter().map(|n| n.name.as_str()).collect();
        assert_eq!(made, ["nic0.4095", "nic0v4095"]);
        assert!(
            p.refused[0].ends_with(": no physical NIC 3 to put VLAN 1 on"),
            "{p:?}"
        );
        // A GCE-style VLAN with its own MAC on the NIC with a given MAC.
        let gce = (
            mac(OTHER),
            NicLink::Vlan {
                parent: Parent::Mac(mac("90:e2:ba:00:00:01")),
                vlan: 12,
            },
        );
        let p = plan_links(&[gce], &d, None);
        let orphan = (
            mac(VNIC),
            NicLink::Vlan {
                parent: Parent::Mac(mac("42:01:0a:00:00:0a")),
                vlan: 3,
            },
        );
        assert!(
            plan_links(&[orphan], &d, None).refused[0]
                .ends_with(": no NIC with MAC 42:01:0a:00:00:0a to put VLAN 3 on")
        );
        assert_eq!(p.create[0].len(), 1);
        assert_eq!(p.create[0][0].name.as_str(), "enp94s0f0np0.12");
        assert_eq!(p.create[0][0].kind, NewKind::Vlan(12, Some(mac(OTHER))));
    }
}

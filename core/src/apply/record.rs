// SPDX-License-Identifier: Apache-2.0
//! Pure: an in-memory kernel implementing [`Applier`], for unit tests. It keeps
//! leasehook's objects and foreign ones apart, records every write, answers like the
//! kernel (EEXIST on a duplicate add, ENOENT on a missing delete, ENODEV for a link
//! it does not have) and can be told to fail a given operation.

use std::collections::BTreeSet;

use super::links::{LinkDetail, LinkKernel, LinkKind, NewKind, NewLink, nics_of};
use super::{Applier, KernelLink, LinkIndex, Observed};
use crate::diff::{Op, State};
use crate::error::{Error, NetlinkCause, Result};
use crate::model::{Address, IfName};

/// The in-memory kernel.
#[derive(Debug, Clone, Default)]
pub struct RecordingApplier {
    /// The links it has.
    pub links: Vec<KernelLink>,
    /// Objects carrying leasehook's protocol number.
    pub owned: State,
    /// Objects someone else added (never reported by `observe`).
    pub foreign: State,
    /// Every successful write, in order.
    pub writes: Vec<Op>,
    /// Fail this operation (once) with this errno.
    pub fail_on: Option<(Op, i32)>,
    /// The indexes of the links that are down (`ip link set IF up` takes one out).
    pub down: std::collections::BTreeSet<u32>,
    /// How many times the links were asked for ([`Applier::links`]).
    pub link_dumps: usize,
    /// What the kernel says of a link besides its name and MAC, by index (a
    /// link not here is a device with no alias).
    pub details: std::collections::BTreeMap<u32, LinkExtra>,
    /// Links that cannot be created (`add_link` fails with `EOPNOTSUPP`, as
    /// a kernel without 802.1Q answers), by name.
    pub refuse_links: BTreeSet<IfName>,
}

/// A link's kind, lower link and alias in the [`RecordingApplier`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkExtra {
    /// Its kind.
    pub kind: LinkKind,
    /// `IFLA_LINK`.
    pub lower: Option<u32>,
    /// `IFLA_IFALIAS`.
    pub alias: Option<String>,
}

impl RecordingApplier {
    /// The links' names, in the kernel's order.
    pub fn link_names(&self) -> Vec<&str> {
        self.links.iter().map(|l| l.name.as_str()).collect()
    }

    /// An empty kernel holding `links`, numbered from 2 as a machine's NICs are
    /// after `lo`.
    pub fn with_links(links: Vec<crate::model::Link>) -> Self {
        Self {
            links: links
                .into_iter()
                .zip(2u32..)
                .map(|(l, index)| KernelLink {
                    index,
                    name: l.name,
                    mac: Some(l.mac),
                })
                .collect(),
            ..Self::default()
        }
    }
}

impl RecordingApplier {
    fn detailed(&self) -> Vec<LinkDetail> {
        self.links
            .iter()
            .map(|l| {
                let x = self.details.get(&l.index);
                LinkDetail {
                    index: l.index,
                    name: l.name.clone(),
                    mac: l.mac,
                    kind: x.map_or(LinkKind::Device, |x| x.kind),
                    lower: x.and_then(|x| x.lower),
                    alias: x.and_then(|x| x.alias.clone()),
                }
            })
            .collect()
    }
}

fn link_err(what: String, errno: i32) -> Error {
    Error::Netlink {
        object: what,
        cause: NetlinkCause::Kernel(std::io::Error::from_raw_os_error(errno)),
        note: String::new(),
        rolled_back: 0,
        rollback_errors: Vec::new(),
    }
}

/// Answers as the kernel does: `EEXIST` for a name taken, `ENODEV` for a
/// lower link it does not have; deleting a link deletes the links on it.
impl LinkKernel for RecordingApplier {
    fn link_details(&mut self) -> Result<Vec<LinkDetail>> {
        self.link_dumps += 1;
        Ok(self.detailed())
    }

    fn add_link(&mut self, new: &NewLink, lower: u32) -> Result<u32> {
        let what = format!("ip link add {}", new.name);
        if self.refuse_links.contains(&new.name) {
            return Err(link_err(what, libc::EOPNOTSUPP));
        }
        if self.links.iter().any(|l| l.name == new.name) {
            return Err(link_err(what, libc::EEXIST));
        }
        let Some(under) = self.links.iter().find(|l| l.index == lower) else {
            return Err(link_err(what, libc::ENODEV));
        };
        let (kind, mac) = match new.kind {
            NewKind::Macvlan(m) => (LinkKind::Macvlan, Some(m)),
            NewKind::Vlan(_, m) => (LinkKind::Vlan, m.or(under.mac)),
        };
        let index = self.links.iter().map(|l| l.index).max().unwrap_or(1) + 1;
        self.links.push(KernelLink {
            index,
            name: new.name.clone(),
            mac,
        });
        self.details.insert(
            index,
            LinkExtra {
                kind,
                lower: Some(lower),
                alias: Some(new.alias()),
            },
        );
        Ok(index)
    }

    fn del_link(&mut self, index: u32) -> Result<()> {
        if !self.links.iter().any(|l| l.index == index) {
            return Err(link_err(format!("ip link del {index}"), libc::ENODEV));
        }
        let mut gone = vec![index];
        while let Some(i) = gone.pop() {
            self.links.retain(|l| l.index != i);
            self.details.remove(&i);
            gone.extend(
                self.details
                    .iter()
                    .filter(|(_, x)| x.lower == Some(i))
                    .map(|(j, _)| *j),
            );
        }
        Ok(())
    }
}

/// The kernel's answer `errno` to `op`.
fn err(op: &Op, errno: i32) -> Error {
    Error::Netlink {
        object: op.to_string(),
        cause: NetlinkCause::Kernel(std::io::Error::from_raw_os_error(errno)),
        note: String::new(),
        rolled_back: 0,
        rollback_errors: Vec::new(),
    }
}

impl Applier for RecordingApplier {
    fn links(&mut self) -> Result<Vec<KernelLink>> {
        self.link_dumps += 1;
        Ok(nics_of(&self.detailed()))
    }

    fn observe(&mut self, links: &LinkIndex, recorded: &BTreeSet<Address>) -> Result<Observed> {
        let mut owned = self.owned.clone();
        owned
            .addresses
            .extend(self.foreign.addresses.intersection(recorded).cloned());
        let foreign_addresses = self
            .foreign
            .addresses
            .iter()
            .filter(|a| links.contains_key(&a.dev) && !recorded.contains(a))
            .cloned()
            .collect();
        // Another tool's routes, as another protocol's (`proto static`).
        let foreign_routes = self
            .foreign
            .routes
            .iter()
            .filter(|r| !crate::constants::RESERVED_TABLES.contains(&r.table))
            .map(|r| super::ForeignRoute {
                table: r.table,
                to: r.to,
                via: r.via,
                dev: Some(r.dev.clone()),
                protocol: 4,
            })
            .collect();
        Ok(Observed {
            owned,
            foreign_addresses,
            foreign_routes,
        })
    }

    fn execute(&mut self, op: &Op, links: &LinkIndex) -> Result<()> {
        if let Some((_, errno)) = self.fail_on.take_if(|(o, _)| o == op) {
            return Err(err(op, errno));
        }
        let dev_missing = match op {
            Op::AddRoute(r) | Op::DelRoute(r) => !links.contains_key(&r.dev),
            Op::AddAddress(a) | Op::DelAddress(a) => !links.contains_key(&a.dev),
            Op::AddRule(_) | Op::DelRule(_) => false,
        };
        if dev_missing {
            return Err(err(op, libc::ENODEV));
        }
        let (owned, foreign) = (&mut self.owned, &self.foreign);
        let done = match op {
            Op::AddRule(r) => !foreign.rules.contains(r) && owned.rules.insert(r.clone()),
            Op::AddRoute(r) => !foreign.routes.contains(r) && owned.routes.insert(r.clone()),
            Op::AddAddress(a) => {
                !foreign.addresses.contains(a) && owned.addresses.insert(a.clone())
            }
            Op::DelRule(r) => owned.rules.remove(r),
            Op::DelRoute(r) => owned.routes.remove(r),
            Op::DelAddress(a) => owned.addresses.remove(a),
        };
        if !done {
            let adding = matches!(op, Op::AddRule(_) | Op::AddRoute(_) | Op::AddAddress(_));
            return Err(if adding {
                err(op, libc::EEXIST)
            } else {
                err(op, libc::ENOENT)
            });
        }
        self.writes.push(op.clone());
        Ok(())
    }
}

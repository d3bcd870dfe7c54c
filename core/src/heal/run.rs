// SPDX-License-Identifier: Apache-2.0
//! Performs IO: one self-healing check (the state files, the interfaces' locks,
//! one dump of each kind through the [`Applier`], the writes that put objects
//! back, the conflict record, the metrics). The decisions are
//! [`super::Engine`]'s.
//!
//! A check reads every state file, takes the lock of each NIC that has recorded
//! objects and no recorded conflict (a lock held is left alone: its holder
//! applies the plan), and, when it holds any, asks the kernel once for its links
//! and leasehook's objects. For every NIC it holds the lock of, what the record
//! says must exist and the kernel no longer holds is added back, in the diff's
//! order (addresses, on-link routes, routes through a gateway, rules), with one
//! log line naming the NIC and what was put back. Only leasehook's own recorded
//! objects are ever written, only added; nothing is deleted and no network
//! manager is asked to do anything.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Instant;

use super::{Engine, Nic, Verdict, conflict_message, objects_text};
use crate::apply::state::{self, InterfaceLock, Paths};
use crate::apply::{Applier, LinkIndex};
use crate::commit::CONFLICT;
use crate::diff::{State, diff_states};
use crate::error::Result;
use crate::model::IfName;

/// One recorded NIC as a check found it.
struct Seen {
    st: state::InterfaceState,
    want: State,
    stopped: bool,
    /// Its lock, when it was free.
    lock: Option<InterfaceLock>,
}

/// The self-healing of the NICs recorded below a root.
#[derive(Debug)]
pub struct Healer {
    paths: Paths,
    textfile: Option<PathBuf>,
    engine: Engine,
}

/// What one check did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checked {
    /// NICs whose missing objects were put back (every write went through).
    pub repaired: Vec<String>,
    /// NICs a write failed for (logged).
    pub failed: Vec<String>,
    /// NICs leasehook stopped fighting for at this check (conflict recorded).
    pub gave_up: Vec<String>,
    /// NICs skipped because their lock was held.
    pub busy: Vec<String>,
}

impl Healer {
    /// The self-healing of the NICs recorded below `root`; `textfile` is
    /// `metrics.textfile`.
    pub fn new(root: impl Into<PathBuf>, textfile: Option<PathBuf>) -> Self {
        Self {
            paths: Paths::new(root),
            textfile,
            engine: Engine::new(),
        }
    }

    /// One check at `now` (see the module docs).
    pub fn check<A: Applier + ?Sized>(&mut self, applier: &mut A, now: Instant) -> Result<Checked> {
        let (states, errors) = state::list_states(&self.paths);
        for e in &errors {
            log::debug!("self-healing: {e}");
        }
        let names: BTreeSet<_> = states.iter().map(|s| s.name.clone()).collect();
        self.engine.keep_only(&names);
        let mut seen = Vec::new();
        for st in states {
            let want = st.objects();
            if want.is_empty() {
                continue;
            }
            let stopped = matches!(
                state::read_run_file(&self.paths, Some(CONFLICT), st.name.as_str(), 4096),
                Ok(Some(_))
            );
            let lock = if stopped {
                None
            } else {
                state::try_lock_interface(&self.paths, &st.name)
                    .inspect_err(|e| log::warn!("self-healing: {}: {e}", st.name))
                    .ok()
                    .flatten()
            };
            seen.push(Seen {
                st,
                want,
                stopped,
                lock,
            });
        }
        let mut out = Checked::default();
        let (links, owned) = if seen.iter().any(|s| s.lock.is_some()) {
            let links = applier.links()?;
            let index: LinkIndex = links.iter().map(|l| (l.name.clone(), l.index)).collect();
            let recorded: BTreeSet<_> = seen
                .iter()
                .flat_map(|s| s.want.addresses.iter().cloned())
                .collect();
            let owned = applier.observe(&index, &recorded)?.owned;
            (links, owned)
        } else {
            (Vec::new(), State::default())
        };
        let index: LinkIndex = links.iter().map(|l| (l.name.clone(), l.index)).collect();
        let mut counted = false;
        for s in &seen {
            let name = &s.st.name;
            let nic = Nic {
                name,
                recorded: &s.want,
                link: links
                    .iter()
                    .any(|l| &l.name == name && l.mac.is_none_or(|m| m == s.st.mac)),
                lock_free: s.lock.is_some(),
                stopped: s.stopped,
            };
            match self.engine.decide(&nic, &owned, now) {
                Verdict::Intact | Verdict::Stopped => {}
                Verdict::NoLink => log::debug!(
                    "self-healing: {name}: its link is gone or another NIC's; left to the refresh path"
                ),
                Verdict::Busy => out.busy.push(name.to_string()),
                Verdict::Repair(gone) => {
                    counted = true;
                    let n = self.engine.repairs(name);
                    if put_back(applier, &index, name, &gone, n) {
                        out.repaired.push(name.to_string());
                    } else {
                        out.failed.push(name.to_string());
                    }
                }
                Verdict::GiveUp(gone) => {
                    counted = true;
                    self.give_up(name, &gone);
                    out.gave_up.push(name.to_string());
                }
            }
        }
        drop(seen);
        if counted {
            crate::metrics::flush(self.paths.root(), self.textfile.as_deref());
        }
        Ok(out)
    }

    /// Stops fighting for `name`: the conflict record (what `status` shows and
    /// the next commit of the NIC removes), logged and counted.
    fn give_up(&self, name: &IfName, gone: &State) {
        crate::metrics::conflict();
        let message = conflict_message(name, gone);
        log::warn!("{message}");
        if let Err(e) = state::write_run_file(
            &self.paths,
            Some(CONFLICT),
            name.as_str(),
            format!("{message}\n").as_bytes(),
            0o644,
        ) {
            log::warn!("self-healing: {e}");
        }
    }
}

/// Adds `gone` back for `name` (repair `n` of the window), in the diff's order,
/// and logs the repair or what failed: whether every write went through.
fn put_back<A: Applier + ?Sized>(
    applier: &mut A,
    index: &LinkIndex,
    name: &IfName,
    gone: &State,
    n: usize,
) -> bool {
    crate::metrics::repaired(name);
    let ops = diff_states(gone, &State::default());
    let failures: Vec<String> = applier
        .execute_many(&ops, index)
        .into_iter()
        .filter_map(std::result::Result::err)
        .map(|e| e.to_string())
        .collect();
    if failures.is_empty() {
        log::info!(
            "{name}: put back what something else removed (repair {n} of {} within {} s): {}",
            super::MAX_REPAIRS,
            super::WINDOW.as_secs(),
            objects_text(gone)
        );
        true
    } else {
        log::warn!(
            "{name}: putting back {} failed (repair {n} of {}): {}",
            objects_text(gone),
            super::MAX_REPAIRS,
            failures.join("; ")
        );
        false
    }
}

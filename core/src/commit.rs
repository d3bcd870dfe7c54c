// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the one way a plan reaches the kernel and the state files, and the
//! one way an interface's objects leave them. The hook event, the worker,
//! `leasehook refresh` and `leasehook apply` all commit through [`commit`]; the
//! removals of the hooks and `refresh` (a RELEASE, a link that is gone or renamed,
//! an ENI the CNI took over) go through [`remove`].
//!
//! [`commit`] is plan → apply → record, or roll back:
//!
//! 1. [`apply::apply_plan`] validates the whole plan, observes, diffs and writes
//!    (undoing its own writes when one fails), knowing every interface's recorded
//!    state so that a table another NIC holds is refused before any write.
//! 2. Each planned interface's state file is saved when its content changed (an
//!    unchanged plan writes no file).
//! 3. When a state file cannot be saved, the files this run saved before it are
//!    put back as they were (or removed, when there was none) and the run's kernel
//!    writes are rolled back ([`apply::record_or_roll_back`]): the kernel and the
//!    state files never disagree about what leasehook applied.
//!
//! [`remove`] is teardown → forget: the family's (or every) object of the
//! interface goes, best effort, and the state file forgets it (removed when
//! nothing is left).

use crate::apply::state::{self, InterfaceState, Paths};
use crate::apply::{self, Applier, Report, Snapshot};
use crate::error::{Error, Result};
use crate::model::{Family, IfName, Lease, Plan};

/// Applies `plan` and records it, or changes nothing (see the module docs).
///
/// `recorded` holds the state files of the plan's interfaces as read under their
/// locks (each is the previous state its new one is built on); every other
/// interface's state is read here, for the table check. `leases` are recorded with
/// the families they belong to (the hooks' and `refresh`'s leases; empty for a
/// plan applied by hand, which keeps what was recorded).
pub fn commit<A: Applier + ?Sized>(
    applier: &mut A,
    paths: &Paths,
    plan: &Plan,
    recorded: &[InterfaceState],
    leases: &[Lease],
) -> Result<Report> {
    commit_in(applier, paths, plan, (recorded, leases), None, None).map(|c| c.report)
}

/// [`commit`] on the kernel as `seen` read it ([`apply::apply_plan_seen`]): the
/// hooks plan from a [`Snapshot`] and apply on it, so an event reads the kernel
/// once. `seen` must be taken after the last write (under the locks).
pub fn commit_seen<A: Applier + ?Sized>(
    applier: &mut A,
    paths: &Paths,
    plan: &Plan,
    (recorded, leases): (&[InterfaceState], &[Lease]),
    seen: &Snapshot,
) -> Result<Report> {
    commit_in(applier, paths, plan, (recorded, leases), None, Some(seen)).map(|c| c.report)
}

/// What [`commit_read`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// The writes made, and the addresses left to another tool.
    pub report: Report,
    /// Whether a state file was written (a state whose content changed).
    pub saved: bool,
}

impl Committed {
    /// Nothing written anywhere: no netlink write, no state file, and no address
    /// left to another tool (which the full path logs). An apply of the same
    /// inputs would do the same: what `leasehook apply` records its applied
    /// digest for ([`apply::digest`]).
    pub fn changed_nothing(&self) -> bool {
        self.report.ops.is_empty() && self.report.foreign.is_empty() && !self.saved
    }
}

/// [`commit_seen`] with no lease, every other interface's state given
/// (`others`, as [`state::StateFiles::others`] read them with the bytes the
/// applied digest hashes), saying whether a state file was written: `leasehook
/// apply --plan`.
pub fn commit_read<A: Applier + ?Sized>(
    applier: &mut A,
    paths: &Paths,
    plan: &Plan,
    recorded: &[InterfaceState],
    others: Vec<InterfaceState>,
    seen: &Snapshot,
) -> Result<Committed> {
    commit_in(
        applier,
        paths,
        plan,
        (recorded, &[]),
        Some(others),
        Some(seen),
    )
}

fn commit_in<A: Applier + ?Sized>(
    applier: &mut A,
    paths: &Paths,
    plan: &Plan,
    (recorded, leases): (&[InterfaceState], &[Lease]),
    others: Option<Vec<InterfaceState>>,
    seen: Option<&Snapshot>,
) -> Result<Committed> {
    let others = others.unwrap_or_else(|| {
        // The plan's own files are not read again (each is as long as its plan).
        let own: Vec<&IfName> = recorded.iter().map(|o| &o.name).collect();
        state::list_states_but(paths, &own).0
    });
    let everyone = with_others(recorded, others);
    let outcome = match seen {
        Some(seen) => apply::apply_plan_seen(applier, plan, &everyone, seen),
        None => apply::apply_plan(applier, plan, &everyone),
    };
    let report = match outcome {
        Err(e @ Error::Conflict { .. }) => return Err(record_conflict(paths, e)),
        other => other?,
    };
    let mut saved = false;
    apply::record_or_roll_back(applier, &report, || {
        saved = save_all(paths, plan, &report, recorded, leases)?;
        Ok(())
    })?;
    forget_conflicts(paths, plan.interfaces.iter().map(|ip| &ip.name));
    Ok(Committed { report, saved })
}

/// Removes the conflict records of `names` (what a successful commit of them
/// does), logging what cannot be removed.
pub fn forget_conflicts<'a>(paths: &Paths, names: impl Iterator<Item = &'a IfName>) {
    for name in names {
        if let Err(e) = state::remove_run_file(paths, Some(CONFLICT), name.as_str()) {
            log::warn!("{e}");
        }
    }
}

/// Where a conflict is recorded, one file per interface below `run/leasehook`.
pub const CONFLICT: &str = "conflict";

/// The conflicts recorded below `run/leasehook/conflict/`: each interface's name
/// and message, for `status`.
pub fn recorded_conflicts(paths: &Paths) -> Vec<(String, String)> {
    let Ok(Some(dir)) = paths.run_folder(Some(CONFLICT), false) else {
        return Vec::new();
    };
    dir.names()
        .unwrap_or_default()
        .into_iter()
        .filter(|n| !crate::fs::is_temp_name(n))
        .filter_map(|n| {
            let text = dir.read(&n, 4096).ok()??;
            Some((n, String::from_utf8_lossy(&text).trim().to_owned()))
        })
        .collect()
}

/// The prefix of the conflict records of the links leasehook creates
/// ([`crate::apply::links`]): `link:<MAC>` per NIC, `link:kernel` for what
/// names none. No interface can be named so (the kernel refuses `:`).
pub const LINK_CONFLICT: &str = "link:";

/// Records the problems of the last [`crate::apply::links::reconcile`] below
/// `run/leasehook/conflict/` (one `link:<MAC>` file per NIC, by the MAC the
/// message starts with; `link:kernel` for the rest), removing the records of
/// problems that are gone, so `status` shows them (degraded) for as long as
/// they last.
pub fn record_link_problems(paths: &Paths, problems: &[String]) {
    let mut by_file = std::collections::BTreeMap::<String, Vec<&str>>::new();
    for p in problems {
        let mac = p
            .split_once(": ")
            .and_then(|(m, _)| m.parse::<crate::model::MacAddr>().ok());
        let file = mac.map_or_else(
            || format!("{LINK_CONFLICT}kernel"),
            |m| format!("{LINK_CONFLICT}{m}"),
        );
        by_file.entry(file).or_default().push(p);
    }
    if let Ok(Some(dir)) = paths.run_folder(Some(CONFLICT), false) {
        for old in dir.names().unwrap_or_default() {
            if old.starts_with(LINK_CONFLICT)
                && !by_file.contains_key(&old)
                && let Err(e) = state::remove_run_file(paths, Some(CONFLICT), &old)
            {
                log::warn!("{e}");
            }
        }
    }
    for (file, lines) in by_file {
        let mut text = lines.join("; ");
        // `status` reads at most 4 KiB of a record.
        if text.len() > 4000 {
            let mut cut = 4000;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push_str(" ...");
        }
        text.push('\n');
        write_conflict(paths, &file, &text);
    }
}

/// Writes `text` to the conflict record `file` unless it holds it already
/// (logging what cannot be written); whether it did hold it (a repeat).
fn write_conflict(paths: &Paths, file: &str, text: &str) -> bool {
    let before = state::read_run_file(paths, Some(CONFLICT), file, 4096);
    if before.ok().flatten().as_deref() == Some(text.as_bytes()) {
        return true;
    }
    if let Err(e) = state::write_run_file(paths, Some(CONFLICT), file, text.as_bytes(), 0o644) {
        log::warn!("{e}");
    }
    false
}

/// Names the owner of the route in the way of a conflict when a tool found below
/// the root uses its table or protocol ([`crate::coexist`]), and records the
/// message in `run/leasehook/conflict/<iface>`: the same message there already
/// makes it a repeat, which the hooks log below the warning level (warned once,
/// not at every lease). The record goes when a commit of the interface succeeds.
fn record_conflict(paths: &Paths, mut e: Error) -> Error {
    let found = crate::coexist::detect(paths.root());
    let Error::Conflict {
        iface,
        table,
        protocol,
        owner,
        ..
    } = &mut e
    else {
        return e;
    };
    *owner = crate::coexist::owner_of(&found, *table, *protocol);
    let name = iface.to_string();
    if write_conflict(paths, &name, &format!("{e}\n"))
        && let Error::Conflict { repeated, .. } = &mut e
    {
        *repeated = true;
    }
    e
}

/// Saves every planned interface's state whose content changed (whether one
/// was: the result); on the first failure the files saved before it are put
/// back, and the error returned.
fn save_all(
    paths: &Paths,
    plan: &Plan,
    report: &Report,
    recorded: &[InterfaceState],
    leases: &[Lease],
) -> Result<bool> {
    let mut written: Vec<(&IfName, Option<&InterfaceState>)> = Vec::new();
    for ip in &plan.interfaces {
        let previous = recorded.iter().find(|s| s.name == ip.name);
        let now = InterfaceState::record(previous.cloned(), &report.owned_part(ip), plan.profile)
            .with_leases(leases);
        match state::save_if_changed(paths, previous, now, state::unix_ms()) {
            Ok(true) => written.push((&ip.name, previous)),
            Ok(false) => {}
            Err(e) => {
                for (name, prev) in written {
                    let restored = match prev {
                        Some(st) => state::write_state(paths, st),
                        None => state::remove_state(paths, name),
                    };
                    if let Err(re) = restored {
                        log::warn!("{re}");
                    }
                }
                return Err(e);
            }
        }
    }
    Ok(!written.is_empty())
}

/// `own` (the states of the plan's interfaces) and every other interface's
/// (`others`), so the applier can tell a table another NIC holds.
fn with_others(own: &[InterfaceState], others: Vec<InterfaceState>) -> Vec<InterfaceState> {
    own.iter()
        .cloned()
        .chain(
            others
                .into_iter()
                .filter(|st| own.iter().all(|o| o.name != st.name)),
        )
        .collect()
}

/// Tears down `family` (every family: `None`) of interface `name` and forgets it
/// in the recorded state `recorded` (the state file goes when nothing is left).
/// Teardown is best effort: what could not be removed is in the report's errors,
/// for the caller to log or report.
pub fn remove<A: Applier + ?Sized>(
    applier: &mut A,
    paths: &Paths,
    name: &IfName,
    family: Option<Family>,
    recorded: Option<InterfaceState>,
) -> Result<Report> {
    let report = apply::teardown(applier, name, family, recorded.as_ref())?;
    if let Some(mut st) = recorded {
        if st.forget(family) {
            state::remove_state(paths, name)?;
        } else {
            state::write_state(paths, &st)?;
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::record::RecordingApplier;
    use crate::model::{InterfacePlan, Profile, Route, Rule};

    fn eth1() -> IfName {
        IfName::try_new("eth1").unwrap()
    }

    fn world() -> (RecordingApplier, tempfile::TempDir, Plan) {
        let applier = RecordingApplier {
            links: vec![crate::apply::KernelLink {
                index: 3,
                name: eth1(),
                mac: Some("02:00:00:00:00:02".parse().unwrap()),
            }],
            ..Default::default()
        };
        let plan = Plan {
            profile: Profile::Ec2NetUtils,
            interfaces: vec![InterfacePlan {
                name: eth1(),
                mac: "02:00:00:00:00:02".parse().unwrap(),
                primary: false,
                families: vec![Family::V4],
                table: Some(10001),
                metric: None,
                addresses: Vec::new(),
                routes: vec![Route {
                    to: "10.0.1.0/24".parse().unwrap(),
                    via: None,
                    dev: eth1(),
                    scope: None,
                    src: None,
                    table: 10001,
                }],
                rules: vec![Rule {
                    from: "10.0.1.20/32".parse().unwrap(),
                    to: None,
                    table: 10001,
                    priority: None,
                }],
                missing: Vec::new(),
                refused: Vec::new(),
            }],
        };
        (applier, tempfile::tempdir().unwrap(), plan)
    }

    #[test]
    fn commit_records_and_remove_forgets() {
        let (mut k, root, plan) = world();
        let paths = Paths::new(root.path());
        let report = commit(&mut k, &paths, &plan, &[], &[]).unwrap();
        assert_eq!(report.writes(), 2);
        let st = state::read_state_or_set_aside(&paths, &eth1()).unwrap();
        assert_eq!(st.tables().into_iter().collect::<Vec<_>>(), [10001]);
        // The same plan again: no write, no file rewritten.
        let again = commit(&mut k, &paths, &plan, std::slice::from_ref(&st), &[]).unwrap();
        assert_eq!(again.writes(), 0);
        let gone = remove(&mut k, &paths, &eth1(), Some(Family::V4), Some(st)).unwrap();
        assert_eq!(gone.writes(), 2);
        assert!(k.owned.rules.is_empty() && k.owned.routes.is_empty());
        assert!(state::read_state_or_set_aside(&paths, &eth1()).is_none());
    }

    #[test]
    fn a_conflict_is_recorded_named_and_repeated_once() {
        let (mut k, root, plan) = world();
        let paths = Paths::new(root.path());
        let theirs = plan.interfaces[0].routes[0].clone();
        k.foreign.routes.insert(theirs.clone());
        // amazon-ec2-net-utils is on the image: its table range names it.
        let rule = root
            .path()
            .join("usr/lib/udev/rules.d/99-vpc-policy-routes.rules");
        std::fs::create_dir_all(rule.parent().unwrap()).unwrap();
        std::fs::write(&rule, "SUBSYSTEM==\"net\"\n").unwrap();
        let first = commit(&mut k, &paths, &plan, &[], &[]).unwrap_err();
        assert!(!first.is_repeated_conflict(), "{first}");
        let text = first.to_string();
        assert!(
            text.contains("route \"10.0.1.0/24 dev eth1 table 10001 proto static\""),
            "{text}"
        );
        assert!(
            text.contains(
                "amazon-ec2-net-utils's (found: /usr/lib/udev/rules.d/99-vpc-policy-routes.rules)"
            ),
            "{text}"
        );
        let record = root.path().join("run/leasehook/conflict/eth1");
        assert_eq!(
            std::fs::read_to_string(&record).unwrap(),
            format!("{text}\n")
        );
        assert_eq!(
            recorded_conflicts(&paths),
            [("eth1".to_owned(), text.clone())]
        );
        // The next event meets the same route: a repeat, nothing written.
        let again = commit(&mut k, &paths, &plan, &[], &[]).unwrap_err();
        assert!(again.is_repeated_conflict(), "{again}");
        assert!(k.writes.is_empty(), "{:?}", k.writes);
        // Gone: applied, and the record with it.
        k.foreign.routes.remove(&theirs);
        commit(&mut k, &paths, &plan, &[], &[]).unwrap();
        assert!(!record.exists());
    }

    #[test]
    fn a_state_that_cannot_be_saved_rolls_the_kernel_back() {
        let (mut k, root, plan) = world();
        let paths = Paths::new(root.path());
        // A folder where eth1's state file goes: the save fails.
        std::fs::create_dir_all(paths.state_file(&eth1())).unwrap();
        let err = commit(&mut k, &paths, &plan, &[], &[]).unwrap_err();
        assert!(err.to_string().contains("rolled back"), "{err}");
        assert!(k.owned.rules.is_empty() && k.owned.routes.is_empty());
    }
}

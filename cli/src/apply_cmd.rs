// SPDX-License-Identifier: Apache-2.0
//! `leasehook apply`, `leasehook flush` and `leasehook refresh`: the plan in the
//! kernel, and the record of it under `<root>/run/leasehook/` (`leasehook
//! status` reads it: `status_cmd.rs`).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context as _, bail};
use leasehook_core::apply::netlink::NetlinkApplier;
use leasehook_core::apply::state::{self, InterfaceLock, InterfaceState, Paths, StateFiles};
use leasehook_core::apply::{self, Applier as _, KernelLink, Report, Snapshot, digest};
use leasehook_core::commit;
use leasehook_core::config::Loaded;
use leasehook_core::diff::Op;
use leasehook_core::error::ObjectError;
use leasehook_core::gate::{self, Bounds};
use leasehook_core::hook::{self, HookConfig, RefreshOutcome};
use leasehook_core::model::{Family, IfName, Plan};

use crate::cli::{ApplyArgs, FamilyArg, FlushArgs, RefreshArgs};

fn summary(report: &Report, verbose: bool) -> String {
    labelled(report, verbose, "")
}

/// The report's changes (as `ip` lines, when `verbose`), then one summary line
/// starting with `label`.
fn labelled(report: &Report, verbose: bool, label: &str) -> String {
    let added = report
        .ops
        .iter()
        .filter(|o| matches!(o, Op::AddRule(_) | Op::AddRoute(_) | Op::AddAddress(_)))
        .count();
    let mut out = String::new();
    if verbose {
        for op in &report.ops {
            let _ = writeln!(out, "{op}");
        }
    }
    let _ = writeln!(
        out,
        "{label}{} change(s): {added} added, {} removed",
        report.writes(),
        report.writes() - added
    );
    out
}

/// The most bytes a plan file may hold (a plan for fifteen NICs with every
/// address a cloud allows is well under 1 MiB).
pub(crate) const PLAN_MAX_BYTES: u64 = 4 * 1024 * 1024;

/// The plan file's bytes: a regular file (opened without blocking, so a FIFO or
/// a device such as `/dev/zero` is refused, never read) of at most
/// [`PLAN_MAX_BYTES`].
fn read_plan_file(path: &Path) -> anyhow::Result<Vec<u8>> {
    use rustix::fs::{Mode, OFlags};
    use std::io::Read as _;
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(std::io::Error::from)?;
    let file = std::fs::File::from(fd);
    if !file.metadata()?.is_file() {
        bail!("not a regular file");
    }
    let mut buf = Vec::new();
    (&file).take(PLAN_MAX_BYTES + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > PLAN_MAX_BYTES {
        bail!("larger than {PLAN_MAX_BYTES} bytes");
    }
    Ok(buf)
}

/// The gate every plan the planner makes has passed, for a plan made elsewhere
/// (SPEC 3.8): each interface is a link with a hardware address of its own (not
/// `lo`, not a link without an Ethernet address: all zeros, multicast), and each
/// address passes [`Bounds::address`] with the interface's subnets as the plan
/// states them (its on-link routes): a prefix no wider than that subnet, or than
/// /24 (IPv4) and /64 (IPv6) when the plan gives none. Rule sources, priorities
/// and the rest are checked by the applier's own validation.
fn gate_plan(plan: &Plan, links: &[KernelLink]) -> anyhow::Result<()> {
    for ip in &plan.interfaces {
        if let Some(l) = links.iter().find(|l| l.name == ip.name) {
            let nobodys = l
                .mac
                .is_none_or(|m| m.octets() == [0; 6] || m.octets()[0] & 1 == 1);
            if nobodys {
                bail!(
                    "{}: not an Ethernet NIC (no hardware address of its own); leasehook configures none but those",
                    ip.name
                );
            }
        }
        let subnets: Vec<_> = ip
            .routes
            .iter()
            .filter(|r| r.via.is_none() && r.to.prefix_len() > 0)
            .map(|r| r.to.trunc())
            .filter(|n| gate::check_subnet(*n).is_ok())
            .collect();
        let bounds = Bounds {
            subnets,
            me: ip.name.as_str(),
            ..Bounds::default()
        };
        for a in &ip.addresses {
            if let Err(why) = bounds.address(a.addr) {
                bail!(
                    "{}: address {} refused: {why}",
                    ip.name,
                    gate::shown(a.addr)
                );
            }
        }
    }
    Ok(())
}

/// What `apply` read under its locks: every state file's bytes and one dump
/// of each kind, taken after the locks (no one writes them meanwhile).
struct Locked {
    names: Vec<IfName>,
    _locks: Vec<InterfaceLock>,
    states: StateFiles,
    seen: Snapshot,
}

/// Locks `names` (in name order, so two runs never wait on each other in a
/// circle), then reads the state files and the kernel.
fn lock_and_read(
    paths: &Paths,
    applier: &mut NetlinkApplier,
    names: Vec<IfName>,
) -> anyhow::Result<Locked> {
    let locks = names
        .iter()
        .map(|n| state::lock_interface(paths, n))
        .collect::<Result<_, _>>()
        .context("failed to lock")?;
    let states = state::read_state_files(paths);
    let seen = applier.snapshot()?;
    Ok(Locked {
        names,
        _locks: locks,
        states,
        seen,
    })
}

/// `apply` with every state file and lock below `root`.
///
/// When the applied digest recorded by the last apply that changed nothing
/// matches this run's inputs (the plan's bytes, the state files' bytes, the
/// kernel's objects: [`digest`]), the result is that apply's, "0 change(s)",
/// and the plan is not parsed, gated or diffed. Otherwise the full path, on the
/// same reads, and when it changes nothing it records its digest.
pub(crate) fn apply(args: &ApplyArgs, root: &Path) -> anyhow::Result<String> {
    let bytes =
        read_plan_file(&args.plan).with_context(|| format!("failed to read {:?}", args.plan))?;
    let paths = Paths::new(root);
    let mut applier = NetlinkApplier::try_new()?;
    let build = digest::build_identity();
    let mut checked = None;
    // A recorded digest's names that cannot be locked or read are the full
    // path's to report (for the plan's own names): the check is skipped.
    if let Some(build) = build
        && let Some(rec) = digest::recorded(&paths)
        && let Some(locked) = lock_and_read(&paths, &mut applier, rec.names)
            .map_err(|e| log::debug!("{e:#}; applying in full"))
            .ok()
    {
        let now = digest::digest(build, &bytes, &locked.names, &locked.states, &locked.seen);
        if now == rec.digest {
            log::debug!(
                "applied digest {now:016x}: the plan, the state files and the kernel are as the last apply that changed nothing saw them; nothing to apply"
            );
            commit::forget_conflicts(&paths, locked.names.iter());
            return Ok(summary(&Report::default(), args.verbose));
        }
        log::debug!(
            "applied digest {now:016x}, {:016x} recorded: applying in full",
            rec.digest
        );
        checked = Some((locked, now));
    }
    let text =
        std::str::from_utf8(&bytes).with_context(|| format!("failed to read {:?}", args.plan))?;
    let plan: Plan = serde_json::from_str(text)
        .with_context(|| format!("{:?} is not a leasehook plan", args.plan))?;
    let mut names: Vec<IfName> = plan.interfaces.iter().map(|i| i.name.clone()).collect();
    names.sort();
    names.dedup();
    // What the check read serves the full path when it locked the same
    // interfaces (the plan is the one recorded, or one of the same NICs).
    let (locked, now) = match checked {
        Some((locked, now)) if locked.names == names => (locked, Some(now)),
        other => {
            drop(other);
            (lock_and_read(&paths, &mut applier, names)?, None)
        }
    };
    gate_plan(&plan, &locked.seen.links)
        .with_context(|| format!("{:?}: refused by the gate", args.plan))?;
    let recorded: Vec<InterfaceState> = locked
        .names
        .iter()
        .filter_map(|n| locked.states.own(&paths, n))
        .collect();
    // Every other interface's state is read too (a table of this plan that another
    // NIC's state records is a conflict), and when a state file cannot be written
    // the run's writes are undone and the files written before it put back.
    let own: Vec<&IfName> = locked.names.iter().collect();
    let done = commit::commit_read(
        &mut applier,
        &paths,
        &plan,
        &recorded,
        locked.states.others(&own),
        &locked.seen,
    )
    .context("failed to apply the plan")?;
    if let Some(build) = build
        && done.changed_nothing()
    {
        let digest = now.unwrap_or_else(|| {
            digest::digest(build, &bytes, &locked.names, &locked.states, &locked.seen)
        });
        let rec = digest::Recorded {
            digest,
            names: locked.names.clone(),
        };
        if let Err(e) = digest::record(&paths, &rec) {
            log::warn!("{e}");
        }
    }
    Ok(summary(&done.report, args.verbose))
}

/// `flush` with every state file and lock below `root`.
pub(crate) fn flush(args: &FlushArgs, root: &Path) -> anyhow::Result<String> {
    let paths = Paths::new(root);
    let family = args.family.map(|f| match f {
        FamilyArg::V4 => Family::V4,
        FamilyArg::V6 => Family::V6,
    });
    // An interface leasehook never touched (udev's remove of a pod's veth): no
    // state, no lock file; creating a lock to find nothing would leave one per
    // name in run/leasehook/lock/ until reboot.
    if let Some(i) = &args.iface
        && ![paths.state_file(i), paths.lock_file(i)]
            .iter()
            .any(|p| p.symlink_metadata().is_ok())
    {
        log::debug!("{i}: nothing recorded, nothing to flush");
        return Ok(summary(&Report::default(), args.verbose));
    }
    let mut applier = NetlinkApplier::try_new()?;
    let mut names: Vec<IfName> = if let Some(i) = &args.iface {
        vec![i.clone()]
    } else {
        let (states, errors) = state::list_states(&paths);
        for e in errors {
            log::warn!("{e}");
        }
        states.into_iter().map(|s| s.name).collect()
    };
    names.sort();
    names.dedup();
    // Every interface locked for the whole run, in name order (as `apply` does), so
    // one observation serves them all and the deletes go out together.
    let _locks: Vec<InterfaceLock> = names
        .iter()
        .map(|n| state::lock_interface(&paths, n))
        .collect::<Result<_, _>>()?;
    let recorded: Vec<(&IfName, Option<InterfaceState>)> = names
        .iter()
        .map(|n| (n, state::read_state_or_set_aside(&paths, n)))
        .collect();
    let targets: Vec<(&IfName, Option<&InterfaceState>)> =
        recorded.iter().map(|(n, st)| (*n, st.as_ref())).collect();
    // Without --iface and --family, also whatever is ours but recorded nowhere (a
    // lost state file, a crash).
    let sweep = args.iface.is_none() && family.is_none();
    let mut report = apply::teardown_many(&mut applier, &targets, family, sweep)?;
    for (name, st) in recorded {
        let Some(mut st) = st else { continue };
        let saved = if st.forget(family) {
            state::remove_state(&paths, name)
        } else {
            state::write_state(&paths, &st)
        };
        if let Err(error) = saved {
            report
                .errors
                .push(ObjectError::new(Some(name.clone()), error));
        }
    }
    if !report.errors.is_empty() {
        let errors: Vec<String> = report.errors.iter().map(ToString::to_string).collect();
        bail!("{}{}", summary(&report, args.verbose), errors.join("\n"));
    }
    Ok(summary(&report, args.verbose))
}

/// `refresh` with the configuration `main` loaded (its root included): what
/// changed on standard output (with `verbose`, also what did not and why), each
/// NIC that could not be checked on standard error, and exit 1 when there was
/// one. A state that cannot be read is an error, "run as root" when it is a
/// permission's.
pub(crate) fn refresh(
    args: &RefreshArgs,
    loaded: &Loaded,
) -> anyhow::Result<(String, std::process::ExitCode)> {
    let cfg = HookConfig::from_settings(&loaded.settings);
    if let Some(why) = hook::inert(&cfg) {
        log::debug!("{why}");
        let out = if args.verbose {
            format!("{why}\n")
        } else {
            String::new()
        };
        return Ok((out, std::process::ExitCode::SUCCESS));
    }
    let (_, unreadable) = state::list_states(&Paths::new(&cfg.root));
    if let Some(e) = unreadable.first()
        && !rustix::process::geteuid().is_root()
    {
        bail!("cannot read leasehook's state ({e}): run as root");
    }
    let mut out = String::new();
    let outcomes = if args.without_dhcp {
        hook::address_unleased(&cfg, args.iface.as_ref())?
    } else {
        hook::refresh(args.iface.as_ref(), &cfg)?
    };
    let mut unchecked = unreadable.len();
    for e in &unreadable {
        eprintln!("leasehook: not checked: {e}");
    }
    let any = !outcomes.is_empty();
    for outcome in outcomes {
        match outcome {
            RefreshOutcome::Refreshed(name, report) => {
                if args.verbose || report.writes() > 0 {
                    out.push_str(&labelled(&report, args.verbose, &format!("{name}: ")));
                }
            }
            RefreshOutcome::LinkGone(name, report) => {
                out.push_str(&labelled(
                    &report,
                    args.verbose,
                    &format!("{name}: link gone; "),
                ));
            }
            RefreshOutcome::Renamed { from, to, report } => {
                out.push_str(&labelled(
                    &report,
                    args.verbose,
                    &format!("{from}: now {to}; "),
                ));
            }
            RefreshOutcome::Addressed(name, report) => {
                out.push_str(&labelled(
                    &report,
                    args.verbose,
                    &format!("{name}: no DHCP, configured from the metadata; "),
                ));
            }
            RefreshOutcome::Unlisted(name, report) => {
                out.push_str(&labelled(
                    &report,
                    args.verbose,
                    &format!("{name}: no longer in the metadata; "),
                ));
            }
            RefreshOutcome::Kept(name, why) => {
                log::debug!("{name}: {why}");
                if args.verbose {
                    let _ = writeln!(out, "{name}: unchanged ({why})");
                }
            }
            RefreshOutcome::Unchecked(name, why) => {
                // Standard error, which the terminal and the unit's journal both
                // show (the log may go to syslog only).
                unchecked += 1;
                eprintln!("leasehook: {name}: not checked: {why}");
            }
        }
    }
    if !any && args.verbose {
        out.push_str(if args.without_dhcp {
            "no NIC without DHCP to configure\n"
        } else {
            "no interface has a recorded plan\n"
        });
    }
    if unchecked > 0 {
        eprintln!(
            "leasehook: refresh: {unchecked} interface(s) not checked; their refresh time stays as it was"
        );
        return Ok((out, std::process::ExitCode::FAILURE));
    }
    Ok((out, std::process::ExitCode::SUCCESS))
}

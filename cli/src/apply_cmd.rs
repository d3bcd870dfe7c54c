// SPDX-License-Identifier: Apache-2.0
//! `leasehook apply`, `leasehook flush` and `leasehook status`: the plan in the
//! kernel, and the record of it under `<root>/run/leasehook/`.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context as _, bail};
use leasehook_core::apply::netlink::NetlinkApplier;
use leasehook_core::apply::state::{self, InterfaceLock, InterfaceState, Paths};
use leasehook_core::apply::{self, Applier as _, KernelLink, Report};
use leasehook_core::commit;
use leasehook_core::config::Loaded;
use leasehook_core::diff::Op;
use leasehook_core::gate::{self, Bounds};
use leasehook_core::hook::{self, HookConfig, RefreshOutcome};
use leasehook_core::model::{Family, IfName, Plan};

use crate::cli::{ApplyArgs, FamilyArg, FlushArgs, RefreshArgs, StatusArgs};

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

/// The plan file's text: a regular file (opened without blocking, so a FIFO or a
/// device such as `/dev/zero` is refused, never read) of at most
/// [`PLAN_MAX_BYTES`].
fn read_plan_file(path: &Path) -> anyhow::Result<String> {
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
    Ok(String::from_utf8(buf)?)
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

/// `apply` with every state file and lock below `root`.
pub(crate) fn apply(args: &ApplyArgs, root: &Path) -> anyhow::Result<String> {
    let text =
        read_plan_file(&args.plan).with_context(|| format!("failed to read {:?}", args.plan))?;
    let plan: Plan = serde_json::from_str(&text)
        .with_context(|| format!("{:?} is not a leasehook plan", args.plan))?;
    let mut applier = NetlinkApplier::try_new()?;
    gate_plan(&plan, &applier.links()?)
        .with_context(|| format!("{:?}: refused by the gate", args.plan))?;
    let paths = Paths::new(root);
    let mut names: Vec<&IfName> = plan.interfaces.iter().map(|i| &i.name).collect();
    names.sort();
    names.dedup();
    // Locks in name order, so two runs never wait on each other in a circle.
    let _locks: Vec<InterfaceLock> = names
        .iter()
        .map(|n| state::lock_interface(&paths, n))
        .collect::<Result<_, _>>()
        .context("failed to lock")?;
    let recorded: Vec<InterfaceState> = names
        .iter()
        .filter_map(|n| state::read_state_or_set_aside(&paths, n))
        .collect();
    // Every other interface's state is read too (a table of this plan that another
    // NIC's state records is a conflict), and when a state file cannot be written
    // the run's writes are undone and the files written before it put back.
    let report = commit::commit(&mut applier, &paths, &plan, &recorded, &[])
        .context("failed to apply the plan")?;
    Ok(summary(&report, args.verbose))
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
        if let Err(e) = saved {
            report.errors.push(format!("{name}: {e}"));
        }
    }
    if !report.errors.is_empty() {
        bail!(
            "{}{}",
            summary(&report, args.verbose),
            report.errors.join("\n")
        );
    }
    Ok(summary(&report, args.verbose))
}

/// `refresh` with the configuration `main` loaded (its root included).
pub(crate) fn refresh(args: &RefreshArgs, loaded: &Loaded) -> anyhow::Result<String> {
    let cfg = HookConfig::from_settings(&loaded.settings);
    if let Some(why) = hook::inert(&cfg) {
        log::debug!("{why}");
        return Ok(if args.verbose {
            format!("{why}\n")
        } else {
            String::new()
        });
    }
    let mut out = String::new();
    let outcomes = if args.without_dhcp {
        hook::address_unleased(&cfg, args.iface.as_ref())?
    } else {
        hook::refresh(args.iface.as_ref(), &cfg)?
    };
    for outcome in outcomes {
        match outcome {
            RefreshOutcome::Refreshed(name, report) => {
                out.push_str(&labelled(&report, args.verbose, &format!("{name}: ")));
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
                log::warn!("{name}: {why}");
                let _ = writeln!(out, "{name}: unchanged ({why})");
            }
        }
    }
    if out.is_empty() {
        out.push_str(if args.without_dhcp {
            "no NIC without DHCP to configure\n"
        } else {
            "no interface has a recorded plan\n"
        });
    }
    Ok(out)
}

/// "12 s ago" for a time in milliseconds since the Unix epoch.
fn ago(ms: u64, now: u64) -> String {
    if ms == 0 {
        return "never".to_owned();
    }
    let s = now.saturating_sub(ms) / 1000;
    match s {
        0..120 => format!("{s} s ago"),
        120..7200 => format!("{} min ago", s / 60),
        _ => format!("{} h ago", s / 3600),
    }
}

fn refreshed_ms(paths: &Paths, name: &IfName) -> u64 {
    hook::refreshed_at(paths, name)
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `status` of what is recorded below `root`; `loaded` is the configuration
/// (`None` when it cannot be read: the `kubernetes` setting is then shown as
/// `auto`, though the hooks would change nothing at all).
pub(crate) fn status(
    args: &StatusArgs,
    root: &Path,
    loaded: Option<&Loaded>,
) -> anyhow::Result<String> {
    let paths = Paths::new(root);
    let kube_mode = loaded.map_or_else(leasehook_core::kubernetes::Mode::default, |l| {
        l.settings.kubernetes
    });
    let (states, errors) = state::list_states(&paths);
    for e in &errors {
        log::warn!("{e}");
    }
    let now = state::unix_ms();
    if args.json {
        let list: Vec<serde_json::Value> = states
            .iter()
            .map(|st| {
                let mut v = serde_json::to_value(st).unwrap_or_default();
                if let Some(obj) = v.as_object_mut() {
                    obj.insert(
                        "refreshed_at_ms".to_owned(),
                        serde_json::json!(refreshed_ms(&paths, &st.name)),
                    );
                }
                v
            })
            .collect();
        let all = serde_json::json!({
            "enabled": loaded.is_none_or(|l| l.settings.enabled),
            "datasource": crate::boot_status::json(root),
            "kubernetes": crate::kube_status::json(kube_mode, root),
            "interfaces": list,
        });
        return Ok(serde_json::to_string_pretty(&all)? + "\n");
    }
    let mut out = crate::boot_status::text(root);
    if loaded.is_some_and(|l| !l.settings.enabled) {
        out.push_str("disabled (configuration key enabled is false): the hooks, refresh and watch do nothing\n");
    }
    out.push_str(&crate::kube_status::text(kube_mode, root, ""));
    if states.is_empty() {
        out.push_str("no interface has an applied plan\n");
    }
    for st in &states {
        let table = st
            .table
            .map_or_else(|| "no table".to_owned(), |t| format!("table {t}"));
        let _ = writeln!(
            out,
            "{} {} ({}, profile {})",
            st.name, st.mac, table, st.profile
        );
        let _ = writeln!(
            out,
            "  applied {}, refreshed {}",
            ago(st.applied_at_ms, now),
            ago(refreshed_ms(&paths, &st.name), now)
        );
        for (fam, f) in &st.families {
            let lease = f.lease.as_ref().map_or_else(String::new, |l| {
                if l.reason == leasehook_core::model::Reason::Metadata {
                    format!(
                        ", address {}/{} from the metadata (no DHCP)",
                        l.address, l.prefix_len
                    )
                } else {
                    format!(", lease {}/{}", l.address, l.prefix_len)
                }
            });
            let _ = writeln!(
                out,
                "  {fam}: {} rule(s), {} route(s), {} address(es){lease}",
                f.rules.len(),
                f.routes.len(),
                f.addresses.len()
            );
        }
        for m in &st.missing {
            let _ = writeln!(out, "  IMDS still missing: {m}");
        }
        for r in &st.refused {
            let _ = writeln!(out, "  refused: {r}");
        }
    }
    Ok(out)
}

// SPDX-License-Identifier: Apache-2.0
//! `leasehook apply`, `leasehook flush` and `leasehook status`: the plan in the
//! kernel, and the record of it under `<root>/run/leasehook/`.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context as _, bail};
use leasehook_core::apply::netlink::NetlinkApplier;
use leasehook_core::apply::state::{self, InterfaceLock, InterfaceState, Paths};
use leasehook_core::apply::{self, Report};
use leasehook_core::commit;
use leasehook_core::config::Loaded;
use leasehook_core::diff::Op;
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

/// `apply` with every state file and lock below `root`.
pub(crate) fn apply(args: &ApplyArgs, root: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(&args.plan)
        .with_context(|| format!("failed to read {:?}", args.plan))?;
    let plan: Plan = serde_json::from_str(&text)
        .with_context(|| format!("{:?} is not a leasehook plan", args.plan))?;
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
    let mut applier = NetlinkApplier::try_new()?;
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
            "datasource": crate::boot_status::json(root),
            "kubernetes": crate::kube_status::json(kube_mode, root),
            "interfaces": list,
        });
        return Ok(serde_json::to_string_pretty(&all)? + "\n");
    }
    let mut out = crate::boot_status::text(root);
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

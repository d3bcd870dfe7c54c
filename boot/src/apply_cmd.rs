// SPDX-License-Identifier: Apache-2.0
//! `leasehook apply`, `leasehook flush` and `leasehook status`: the plan in the
//! kernel, and the record of it under `<root>/run/leasehook/`.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context as _, bail};
use clap::{Args, ValueEnum};
use leasehook_core::apply::netlink::NetlinkApplier;
use leasehook_core::apply::state::{self, InterfaceLock, InterfaceState, Paths};
use leasehook_core::apply::{self, Report};
use leasehook_core::config::{self, Layers};
use leasehook_core::diff::Op;
use leasehook_core::hook::{self, HookConfig, RefreshOutcome};
use leasehook_core::model::{Family, IfName, Plan};

/// Apply a plan (the JSON of `leasehook plan --format json`) to the kernel over
/// netlink.
///
/// Only what leasehook owns is touched: its rules, routes and addresses carry
/// protocol number 176, and the run is limited to the interfaces and families the
/// plan covers. What the kernel holds already is not written again, so applying the
/// same plan twice makes no change. The whole plan is checked before the first
/// write; if a write fails, what this run changed is undone.
#[derive(Debug, Args)]
pub(crate) struct ApplyArgs {
    /// The plan: JSON as printed by `leasehook plan --format json`.
    #[arg(long, value_name = "FILE")]
    plan: PathBuf,

    /// Prefix for every file leasehook reads or writes (state, locks).
    #[arg(long, value_name = "DIR", env = "LEASEHOOK_ROOT", default_value = "/")]
    root: PathBuf,

    /// Print every change as an `ip` command line.
    #[arg(long, short)]
    verbose: bool,
}

/// Remove leasehook's rules, routes and secondary addresses.
///
/// With --iface, only that interface's (also when the link is already gone: its
/// rules are found through the recorded state); without, everything leasehook owns.
/// Goes past failures and reports them all.
#[derive(Debug, Args)]
pub(crate) struct FlushArgs {
    /// Only this interface.
    #[arg(long, value_name = "IFNAME", value_parser = parse_ifname)]
    iface: Option<IfName>,

    /// Only this family.
    #[arg(long, value_enum)]
    family: Option<FamilyArg>,

    /// Prefix for every file leasehook reads or writes.
    #[arg(long, value_name = "DIR", env = "LEASEHOOK_ROOT", default_value = "/")]
    root: PathBuf,

    /// Print every change as an `ip` command line.
    #[arg(long, short)]
    verbose: bool,
}

/// Re-check every interface with a recorded plan between leases.
///
/// For each interface leasehook applied a lease's plan to (or only --iface), ask
/// IMDS again for that NIC's keys, plan from the recorded leases, and apply the
/// difference: an address the operator added to the ENI gets its rule, a removed
/// one loses it. Nothing changed means no netlink write and no state file written.
/// An IMDS error or an incomplete answer changes nothing. A link that is gone takes
/// its rules and state with it; a link found under another name by its MAC takes
/// them over. Runs under the same per-interface lock as the DHCP hooks. The IMDS and
/// planner settings are the hooks' (the configuration files, then LEASEHOOK_*
/// variables); NICs listed in `unmanaged` are left alone.
#[derive(Debug, Args)]
#[command(after_long_help = leasehook_core::hook::env_help())]
pub(crate) struct RefreshArgs {
    /// Only this interface.
    #[arg(long, value_name = "IFNAME", value_parser = parse_ifname)]
    iface: Option<IfName>,

    /// Prefix for every file leasehook reads or writes [default: the `LEASEHOOK_ROOT`
    /// variable, else /].
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,

    /// Read this configuration file instead of ROOT/etc/leasehook/config.yaml and
    /// config.d (/dev/null: none).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Print every change as an `ip` command line.
    #[arg(long, short)]
    verbose: bool,
}

/// Show the datasource in use (and whether it came from the cache, since when) and
/// what leasehook has applied, per interface.
#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,

    /// Prefix for every file leasehook reads.
    #[arg(long, value_name = "DIR", env = "LEASEHOOK_ROOT", default_value = "/")]
    root: PathBuf,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum FamilyArg {
    /// IPv4.
    #[value(name = "4")]
    V4,
    /// IPv6.
    #[value(name = "6")]
    V6,
}

fn parse_ifname(s: &str) -> Result<IfName, String> {
    IfName::try_new(s).map_err(|p| p.to_string())
}

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

pub(crate) fn apply(args: &ApplyArgs) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(&args.plan)
        .with_context(|| format!("failed to read {:?}", args.plan))?;
    let plan: Plan = serde_json::from_str(&text)
        .with_context(|| format!("{:?} is not a leasehook plan", args.plan))?;
    let paths = Paths::new(&args.root);
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
    // Every other interface's state too: a table of this plan that another NIC's
    // state records is a conflict (two NICs with one device-number).
    let (all, _) = state::list_states(&paths);
    let known: Vec<InterfaceState> = recorded
        .iter()
        .cloned()
        .chain(all.into_iter().filter(|st| !names.contains(&&st.name)))
        .collect();
    let mut applier = NetlinkApplier::try_new()?;
    let report =
        apply::apply_plan(&mut applier, &plan, &known).context("failed to apply the plan")?;
    // The kernel and the state files must agree: when a state file cannot be
    // written, the run's writes are undone and the files written before it are put
    // back.
    apply::record_or_roll_back(&mut applier, &report, || {
        let mut written: Vec<(&IfName, Option<&InterfaceState>)> = Vec::new();
        for ip in &plan.interfaces {
            let previous = recorded.iter().find(|s| s.name == ip.name);
            let now =
                InterfaceState::record(previous.cloned(), &report.owned_part(ip), plan.profile);
            // An unchanged plan writes no file either.
            match state::save_if_changed(&paths, previous, now, state::unix_ms()) {
                Ok(true) => written.push((&ip.name, previous)),
                Ok(false) => {}
                Err(e) => {
                    for (name, prev) in written {
                        let _ = match prev {
                            Some(st) => state::write_state(&paths, st),
                            None => state::remove_state(&paths, name),
                        };
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    })
    .context("failed to record the state")?;
    Ok(summary(&report, args.verbose))
}

pub(crate) fn flush(args: &FlushArgs) -> anyhow::Result<String> {
    let paths = Paths::new(&args.root);
    let family = args.family.map(|f| match f {
        FamilyArg::V4 => Family::V4,
        FamilyArg::V6 => Family::V6,
    });
    let mut applier = NetlinkApplier::try_new()?;
    let mut report = Report::default();
    let targets: Vec<IfName> = if let Some(i) = &args.iface {
        vec![i.clone()]
    } else {
        let (states, errors) = state::list_states(&paths);
        for e in errors {
            log::warn!("{e}");
        }
        states.into_iter().map(|s| s.name).collect()
    };
    for name in &targets {
        let _lock = state::lock_interface(&paths, name)?;
        let recorded = state::read_state_or_set_aside(&paths, name);
        let r = apply::teardown(&mut applier, name, family, recorded.as_ref())?;
        report.ops.extend(r.ops);
        report
            .errors
            .extend(r.errors.iter().map(|e| format!("{name}: {e}")));
        if let Some(mut st) = recorded {
            if st.forget(family) {
                state::remove_state(&paths, name)?;
            } else {
                state::write_state(&paths, &st)?;
            }
        }
    }
    if args.iface.is_none() && family.is_none() {
        // Whatever is ours but recorded nowhere (a lost state file, a crash).
        let r = apply::flush_all(&mut applier, &[])?;
        report.ops.extend(r.ops);
        report.errors.extend(r.errors);
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

pub(crate) fn refresh(args: &RefreshArgs) -> anyhow::Result<String> {
    let sources = Layers::from_env(hook::process_env())
        .with_root(args.root.clone())
        .with_file(args.config.clone());
    let cfg = HookConfig::from_settings(&config::load(&sources)?.settings);
    let mut out = String::new();
    for outcome in hook::refresh(args.iface.as_ref(), &cfg)? {
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
            RefreshOutcome::Kept(name, why) => {
                log::warn!("{name}: {why}");
                let _ = writeln!(out, "{name}: unchanged ({why})");
            }
        }
    }
    if out.is_empty() {
        out.push_str("no interface has a recorded plan\n");
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

/// The `kubernetes` setting the hooks read below `root` (`auto` when the
/// configuration cannot be read: the hooks would then change nothing at all).
fn kubernetes_mode(root: &std::path::Path) -> leasehook_core::kubernetes::Mode {
    let sources = Layers::from_env(hook::process_env()).with_root(Some(root.to_path_buf()));
    config::load(&sources).map_or_else(
        |_| leasehook_core::kubernetes::Mode::default(),
        |l| l.settings.kubernetes,
    )
}

pub(crate) fn status(args: &StatusArgs) -> anyhow::Result<String> {
    let paths = Paths::new(&args.root);
    let kube_mode = kubernetes_mode(&args.root);
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
            "datasource": crate::boot_status::json(&args.root),
            "kubernetes": crate::kube_status::json(kube_mode, &args.root),
            "interfaces": list,
        });
        return Ok(serde_json::to_string_pretty(&all)? + "\n");
    }
    let mut out = crate::boot_status::text(&args.root);
    out.push_str(&crate::kube_status::text(kube_mode, &args.root, ""));
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
                format!(", lease {}/{}", l.address, l.prefix_len)
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

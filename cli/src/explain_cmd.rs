// SPDX-License-Identifier: Apache-2.0
//! `leasehook explain ADDR | --iface IF`: gathers what [`leasehook_core::explain`]
//! decides from (performs IO, read-only): the state records and pending workers
//! below the root, the boot stage's datasource, the configuration's `unmanaged`,
//! and from the kernel (netlink) the links, their addresses, leasehook's rules,
//! the Kubernetes CNI's ENIs and `ip route get` for each address.

use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use leasehook_core::apply::netlink::NetlinkApplier;
use leasehook_core::apply::state::{self, Paths};
use leasehook_core::apply::{Applier as _, LinkIndex};
use leasehook_core::config::Loaded;
use leasehook_core::explain::{self, Explanation, Facts, Pending};
use leasehook_core::model::IfName;
use serde_json::json;

use crate::cli::{ExplainArgs, ExplainFormat};

/// Runs `explain`: exit 0 when every address explained is routed, 1 when one is
/// not, 2 when the facts cannot be read (the error on standard error).
pub(crate) fn run(
    args: &ExplainArgs,
    root: &Path,
    loaded: &anyhow::Result<Loaded>,
) -> (String, ExitCode) {
    match explain(args, root, loaded) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("leasehook: error: {e:#}");
            (String::new(), ExitCode::from(2))
        }
    }
}

fn explain(
    args: &ExplainArgs,
    root: &Path,
    loaded: &anyhow::Result<Loaded>,
) -> anyhow::Result<(String, ExitCode)> {
    let paths = Paths::new(root);
    let mut notes = Vec::new();
    let (states, errors) = state::list_states(&paths);
    if let Some(e) = errors.first() {
        anyhow::bail!("cannot read leasehook's state ({e}); run as root");
    }
    let mut facts = Facts {
        states,
        pending: pending(&paths)?,
        conflicts: leasehook_core::commit::recorded_conflicts(&paths),
        now_ms: state::unix_ms(),
        ..Facts::default()
    };
    let mut nl = NetlinkApplier::try_new().context("failed to open netlink")?;
    let links = nl.links()?;
    let index: LinkIndex = links.iter().map(|l| (l.name.clone(), l.index)).collect();
    facts.links = links.into_iter().map(|l| (l.name, l.mac)).collect();
    let seen = nl.observe(&index, &std::collections::BTreeSet::new())?;
    facts.kernel_rules = seen.owned.rules.into_iter().collect();
    facts.addresses = (seen.owned.addresses.into_iter())
        .chain(seen.foreign_addresses)
        .collect();
    let mode = match loaded {
        Ok(l) => {
            facts.unmanaged.clone_from(&l.settings.unmanaged);
            l.settings.kubernetes
        }
        Err(e) => {
            notes.push(format!(
                "The configuration does not load ({e:#}): `unmanaged` is not checked."
            ));
            leasehook_core::kubernetes::Mode::default()
        }
    };
    match leasehook_core::kubernetes::observe::detect(mode, root, &mut nl) {
        Ok((d, view)) if d.node => facts.cni_enis = leasehook_core::kubernetes::cni_enis(&view),
        Ok(_) => {}
        Err(e) => notes.push(format!("Kubernetes not checked: {e}.")),
    }
    let provider = provider(root, loaded);
    facts.cloud = cloud(root, loaded);
    let found: Vec<Explanation> = match (&args.address, &args.iface) {
        (Some(a), _) => vec![explain::explain(*a, &facts, &route(&mut nl, *a, &index))],
        (None, Some(n)) => {
            let addrs = explain::addresses_of(n, &facts);
            if addrs.is_empty() {
                vec![explain::explain_nic(n, &facts)]
            } else {
                addrs
                    .iter()
                    .map(|a| explain::explain(*a, &facts, &route(&mut nl, *a, &index)))
                    .collect()
            }
        }
        (None, None) => anyhow::bail!("give an address or --iface"),
    };
    let routed = found.iter().all(|e| e.verdict.routed());
    let out = match args.format {
        ExplainFormat::Text => text(&found, &provider, &notes),
        ExplainFormat::Json | ExplainFormat::Yaml => {
            let list: Vec<_> = found.iter().map(to_json).collect();
            let v = json!({
                "schema_version": 1,
                "routed": routed,
                "provider": provider,
                "notes": notes,
                "explanations": list,
            });
            if matches!(args.format, ExplainFormat::Yaml) {
                serde_saphyr::to_string(&v)?
            } else {
                serde_json::to_string_pretty(&v)? + "\n"
            }
        }
    };
    Ok((
        out,
        if routed {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        },
    ))
}

/// The kernel's answer for traffic from `addr`, or its error.
fn route(
    nl: &mut NetlinkApplier,
    addr: IpAddr,
    index: &LinkIndex,
) -> leasehook_core::Result<explain::KernelRoute> {
    nl.route_get(addr, index)
}

/// The workers waiting for the metadata (`run/leasehook/pending/*.json`).
fn pending(paths: &Paths) -> anyhow::Result<Vec<Pending>> {
    let Some(dir) = paths.run_folder(Some("pending"), false)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for file in dir.names().map_err(|p| dir.error(".", &p))? {
        let Some(name) = file
            .strip_suffix(".json")
            .and_then(|n| IfName::try_new(n).ok())
        else {
            continue;
        };
        let Some(bytes) = state::read_run_file(paths, Some("pending"), &file, 64 * 1024)? else {
            continue;
        };
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        out.push(Pending {
            iface: name,
            pid: v
                .pointer("/pid")
                .and_then(serde_json::Value::as_u64)
                .and_then(|p| u32::try_from(p).ok()),
            address: v
                .pointer("/event/new/address")
                .and_then(serde_json::Value::as_str)
                .and_then(|a| a.parse().ok()),
            deadline_ms: v
                .pointer("/deadline_ms")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0),
        });
    }
    Ok(out)
}

/// Which provider: the boot stage's datasource, else the configured choice.
fn provider(root: &Path, loaded: &anyhow::Result<Loaded>) -> String {
    use leasehook_core::boot::state as boot;
    match boot::read(root, boot::boot_id(root).as_deref()).and_then(|b| b.datasource) {
        Some(ds) => format!("{ds} (the boot stage's datasource)"),
        None => match loaded {
            Ok(l) => format!(
                "{} (configured; the boot stage found no datasource this boot)",
                l.settings.provider
            ),
            Err(_) => "unknown".to_owned(),
        },
    }
}

/// The cloud the hooks ask, as they choose it (the configured provider; `auto`:
/// the boot stage's verdict, else DMI, else the fallback), whose row names the
/// metadata keys; `None` when the configuration does not load.
fn cloud(
    root: &Path,
    loaded: &anyhow::Result<Loaded>,
) -> Option<&'static leasehook_core::source::provider::Cloud> {
    use leasehook_core::boot::state as boot;
    use leasehook_core::source::detect::{cloud_from_dmi, read::read_dmi};
    let choice = loaded.as_ref().ok()?.settings.provider;
    let recorded = boot::read(root, boot::boot_id(root).as_deref()).and_then(|b| b.datasource);
    let verdict = leasehook_core::source::provider::auto_verdict(recorded, || {
        cloud_from_dmi(&read_dmi(root))
    });
    Some(choice.resolve(verdict).cloud())
}

fn text(found: &[Explanation], provider: &str, notes: &[String]) -> String {
    let mut out = String::new();
    for e in found {
        let verdict = if e.verdict.routed() {
            "ROUTED"
        } else {
            "NOT ROUTED"
        };
        let _ = writeln!(out, "{verdict} ({})", e.verdict.name());
        for l in &e.lines {
            let _ = writeln!(out, "  {l}");
        }
    }
    let _ = writeln!(out, "Provider: {provider}.");
    for n in notes {
        let _ = writeln!(out, "{n}");
    }
    out
}

fn to_json(e: &Explanation) -> serde_json::Value {
    json!({
        "address": e.address,
        "verdict": e.verdict.name(),
        "routed": e.verdict.routed(),
        "interface": e.iface.as_ref().map(ToString::to_string),
        "table": e.table,
        "rules": e.rules.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "kernel": e.kernel,
        "reasons": e.lines,
    })
}

// SPDX-License-Identifier: Apache-2.0
//! `leasehook init --local` and `leasehook init`: the two boot stages (see
//! `leasehook_core::boot::run`), and the summary they print.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use leasehook_core::boot::run::{self, Facts, Options, RealSources, RunReport};
use leasehook_core::boot::state::Verdict;
use leasehook_core::boot::{Origin, Stage};
use leasehook_core::config::Loaded;
use leasehook_core::hook::{self, HookConfig, RefreshOutcome};

use crate::cli::InitArgs;

/// The exit code when no datasource answered and the cache could not stand in,
/// on a host where one was expected (see [`off_cloud`]: elsewhere 0).
pub(crate) const NO_DATASOURCE: u8 = 3;
/// The exit code when a datasource is in use but it could not be cached (or
/// `data/instance-id` not updated): this boot is fine, the next one has no fallback.
pub(crate) const CACHE_NOT_WRITTEN: u8 = 4;

/// Checks a `--virt` value: a systemd-detect-virt name.
pub(crate) fn check_virt(virt: &str) -> anyhow::Result<()> {
    let plausible = !virt.is_empty()
        && virt.len() <= 32
        && virt
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !plausible {
        bail!(
            "--virt {virt:?} is not a virtualisation name (lower-case letters, digits and -, such as kvm or lxc)"
        );
    }
    Ok(())
}

/// `2026-11-30T12:00:01Z` (RFC 3339, whole seconds) for milliseconds since the epoch.
pub(crate) fn when(ms: u64) -> String {
    i64::try_from(ms / 1000)
        .ok()
        .and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok())
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| format!("{ms} ms since the epoch"))
}

/// Whether the stage found no datasource on a host that is no cloud instance, as
/// far as leasehook can tell: no datasource detected (every one "not detected",
/// none fetched or failed), no cache problem, and no instance ever recorded here
/// (`data/instance-id`).
/// `init` then exits 0 ("no datasource: nothing to do") and systemd is not left
/// "degraded"; a host that was an instance and finds none, or a datasource that
/// was tried and failed, is still exit 3.
pub(crate) fn off_cloud(st: &leasehook_core::boot::state::BootState) -> bool {
    st.verdict == Verdict::NoDatasource
        && st
            .attempts
            .iter()
            .all(|a| a.result == leasehook_core::boot::decide::Tried::NotDetected)
        && st.cache_errors.is_empty()
        && st.previous_instance_id.is_none()
}

/// The summary `init` prints.
pub(crate) fn summary(report: &RunReport) -> String {
    let st = &report.state;
    let mut out = String::new();
    let what = match (st.verdict, st.datasource, &st.instance_id, st.origin) {
        (Verdict::Found, Some(ds), Some(id), Some(origin)) => {
            format!("datasource {ds} {id:?}, {origin}")
        }
        (Verdict::NeedsNetwork, ..) => format!(
            "left to the network stage: {}",
            st.deferred
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (Verdict::Disabled, ..) => "disabled; nothing to do".to_owned(),
        (Verdict::NoDatasource, ..) if off_cloud(st) => {
            "no datasource: nothing to do (none detected; not a cloud instance)".to_owned()
        }
        _ => "no datasource answered and the cache cannot stand in: datasource None".to_owned(),
    };
    let _ = writeln!(out, "{} stage: {what}", st.stage);
    if report.trusted {
        let _ = writeln!(
            out,
            "  decided earlier this boot by the {} stage; no datasource asked again",
            st.stage
        );
    }
    for a in &st.attempts {
        let _ = writeln!(out, "  tried: {a}");
    }
    for e in &st.cache_errors {
        let _ = writeln!(
            out,
            "  cache NOT written: {e} (the next boot cannot fall back to it)"
        );
    }
    if !st.cache.is_empty() {
        let _ = writeln!(out, "  cache: {}", st.cache);
    }
    if let Some(ms) = st.fetched_at_ms
        && st.origin.is_some_and(Origin::from_cache)
    {
        let _ = writeln!(out, "  data fetched {}", when(ms));
    }
    match (st.new_instance, &st.previous_instance_id) {
        (Some(true), prev) => {
            let _ = writeln!(
                out,
                "  a new instance (data/instance-id was {})",
                prev.as_deref()
                    .map_or("unset".to_owned(), |p| format!("{p:?}"))
            );
        }
        (Some(false), _) => {
            let _ = writeln!(out, "  not a new instance");
        }
        (None, _) => {}
    }
    out
}

/// The stage below `root` (every path read and written, the LXD socket too),
/// with the configuration `main` loaded.
pub(crate) fn run(
    args: &InitArgs,
    root: &Path,
    loaded: &Loaded,
) -> anyhow::Result<(String, ExitCode)> {
    if !root.is_dir() {
        bail!("--root {root:?} is not a folder");
    }
    if let Some(v) = &args.virt {
        check_virt(v)?;
    }
    let stage = if args.local {
        Stage::Local
    } else {
        Stage::Network
    };
    // `config` and `env` are what `Facts::gather` would load; `main` has loaded
    // them already.
    let options = Options {
        root: root.to_path_buf(),
        virt: args.virt.clone(),
        config: None,
        env: leasehook_core::event::Env::default(),
    };
    let ctx = Facts::gather_with(&options, loaded).context("failed to read the configuration")?;
    let sources = RealSources::new(&ctx);
    let report =
        run::run(stage, &ctx, &sources).with_context(|| format!("the {stage} stage failed"))?;
    let mut text = summary(&report);
    if stage == Stage::Network && report.state.verdict != Verdict::NoDatasource {
        text.push_str(&address_unleased(loaded));
        text.push_str(&other_tools(root));
    }
    let code = if off_cloud(&report.state) {
        ExitCode::SUCCESS
    } else if report.state.verdict == Verdict::NoDatasource {
        ExitCode::from(NO_DATASOURCE)
    } else if !report.state.cache_errors.is_empty() {
        ExitCode::from(CACHE_NOT_WRITTEN)
    } else {
        ExitCode::SUCCESS
    };
    Ok((text, code))
}

/// The routing tools found on the image that would fight leasehook
/// ([`leasehook_core::coexist`]): a line of the summary, and once per boot (the
/// network stage only) a warning when one of them is active.
fn other_tools(root: &Path) -> String {
    let found = leasehook_core::coexist::detect(root);
    if found.is_empty() {
        return String::new();
    }
    let list = leasehook_core::coexist::summary(&found);
    if leasehook_core::coexist::any_active(&found) {
        log::warn!(
            "other routing tools found: {list}; leasehook keeps off a NIC whose table another tool holds (docs/migrating.md)"
        );
    }
    format!("other routing tools: {list}\n")
}

/// The network stage's last step: the NICs the cloud serves no DHCP (OCI's
/// secondary VNICs) get their address, rules and table from the metadata, as
/// `leasehook refresh` gives them (the provider `auto` goes by the verdict just
/// recorded). Nothing is asked on a cloud whose every NIC has DHCP. A failure is
/// logged and printed, never the stage's: the timer's refresh tries again.
fn address_unleased(loaded: &Loaded) -> String {
    let cfg = HookConfig::from_settings(&loaded.settings);
    let mut out = String::new();
    if !cfg.enabled {
        log::debug!("the NICs without DHCP: left alone (configuration key enabled is false)");
        return out;
    }
    match hook::address_unleased(&cfg, None) {
        Ok(outcomes) => {
            for o in outcomes {
                let line = match o {
                    RefreshOutcome::Addressed(name, r) => {
                        format!(
                            "{name}: configured from the metadata ({} change(s))",
                            r.writes()
                        )
                    }
                    RefreshOutcome::Refreshed(name, r) => {
                        format!("{name}: followed the metadata ({} change(s))", r.writes())
                    }
                    RefreshOutcome::Renamed { to, report, .. } => {
                        format!(
                            "{to}: followed the metadata ({} change(s))",
                            report.writes()
                        )
                    }
                    RefreshOutcome::LinkGone(name, r) | RefreshOutcome::Unlisted(name, r) => {
                        format!("{name}: gone ({} object(s) removed)", r.writes())
                    }
                    RefreshOutcome::Kept(name, why) => format!("{name}: unchanged ({why})"),
                    RefreshOutcome::Unchecked(name, why) => format!("{name}: not checked ({why})"),
                };
                let _ = writeln!(out, "  no DHCP: {line}");
            }
        }
        Err(e) => {
            log::warn!("the NICs without DHCP were not configured: {e:#}");
            let _ = writeln!(out, "  no DHCP: not configured ({e})");
        }
    }
    out
}

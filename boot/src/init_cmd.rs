// SPDX-License-Identifier: Apache-2.0
//! `leasehook init --local` and `leasehook init`: the two boot stages (see
//! `leasehook_core::boot::run`), and the summary they print.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::Args;
use leasehook_core::boot::run::{self, Facts, Options, RealSources, RunReport};
use leasehook_core::boot::state::Verdict;
use leasehook_core::boot::{Origin, Stage};

/// The exit code when no datasource answered and the cache could not stand in.
pub(crate) const NO_DATASOURCE: u8 = 3;
/// The exit code when a datasource is in use but it could not be cached (or
/// `data/instance-id` not updated): this boot is fine, the next one has no fallback.
pub(crate) const CACHE_NOT_WRITTEN: u8 = 4;

/// Find the instance's datasource at boot, cache it, and write instance-data.
///
/// `--local` runs before networking: it reads NoCloud seeds and the LXD socket,
/// checks the cache against them, and leaves EC2 to the network stage. Without it
/// (after network-online.target) the network stage finishes what the local stage
/// left — it never asks again a datasource the local stage fetched, nor repeats a
/// check that failed. When no configured datasource answers, the cached one is used
/// if it still parses, is still configured and fallback is not off; every
/// datasource tried and why the cache was or was not used is logged.
///
/// Writes ROOT/var/lib/leasehook/ (the cache) and ROOT/run/leasehook/ (boot.json,
/// instance-data.json 0644, instance-data-sensitive.json 0600).
///
/// Exit codes: 0 a datasource is in use (fetched or from the cache), or the local
/// stage handed over to the network stage, or cloud-init is disabled; 3 no
/// datasource answered and no usable cache (instance-data then says datasource
/// None); 4 a datasource is in use but the cache (or data/instance-id) could not
/// be written, so the next boot has no fallback (`leasehook status` says so too);
/// 1 an error (bad configuration, unwritable state); 2 bad usage.
///
/// Configuration (ROOT/etc/leasehook/config.yaml and config.d, or --config; then
/// LEASEHOOK_* variables): `datasource_list`, `fallback`,
/// `datasource.<Name>.fallback`, `imds.endpoints`, `imds.budget_s`,
/// `imdsv1_fallback`. `leasehook config show` prints what is in effect.
#[derive(Debug, Args)]
pub(crate) struct InitArgs {
    /// Run the local stage (before networking).
    #[arg(long)]
    local: bool,

    /// Read and write every path below DIR instead of / (the LXD socket too).
    #[arg(long, value_name = "DIR", env = "LEASEHOOK_ROOT", default_value = "/")]
    root: PathBuf,

    /// Assume this virtualisation (kvm, lxc, none, ...), as `leasehook detect`
    /// takes it.
    #[arg(long, value_name = "NAME")]
    virt: Option<String>,

    /// Read this configuration file instead of ROOT/etc/leasehook/config.yaml and
    /// config.d (/dev/null: none).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

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

pub(crate) fn run(args: &InitArgs) -> anyhow::Result<(String, ExitCode)> {
    if !args.root.is_dir() {
        bail!("--root {:?} is not a folder", args.root);
    }
    if let Some(v) = &args.virt {
        check_virt(v)?;
    }
    let stage = if args.local {
        Stage::Local
    } else {
        Stage::Network
    };
    let options = Options {
        root: args.root.clone(),
        virt: args.virt.clone(),
        config: args.config.clone(),
        env: leasehook_core::hook::process_env(),
    };
    let ctx = Facts::gather(&options).context("failed to read the configuration")?;
    let sources = RealSources::new(&ctx);
    let report =
        run::run(stage, &ctx, &sources).with_context(|| format!("the {stage} stage failed"))?;
    let code = if report.state.verdict == Verdict::NoDatasource {
        ExitCode::from(NO_DATASOURCE)
    } else if !report.state.cache_errors.is_empty() {
        ExitCode::from(CACHE_NOT_WRITTEN)
    } else {
        ExitCode::SUCCESS
    };
    Ok((summary(&report), code))
}

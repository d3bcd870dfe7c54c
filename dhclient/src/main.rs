// SPDX-License-Identifier: Apache-2.0
//! `leasehook-dhclient`: run by the dhclient exit hook (`hooks/dhclient/`) with
//! dhclient-script's environment, which it reads itself — nothing passes through a
//! shell. It maps the reason (SPEC §6.1), asks IMDS for what the lease cannot tell,
//! plans and applies; see `leasehook_core::hook`.
//!
//! Configuration comes from `LEASEHOOK_*` variables (`--help` lists them; dhclient
//! passes them with `-e`). Logs go to the journal, else syslog, else standard
//! error, with the interface and reason on every line.
//!
//! Exit codes: 0 done (applied, removed, ignored, handed to the worker, or nothing
//! changed on purpose), 1 a runtime error (netlink, files, IMDS), 2 a malformed
//! environment or configuration. The hook ignores the status either way: a DHCP
//! lease must never fail because of leasehook.

use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _, Parser};
use leasehook_core::event::{Env, dhclient};
use leasehook_core::hook::{self, HookConfig, HookOutcome};
use leasehook_core::logging::{self, Context};
use leasehook_core::model::IfName;

/// Source policy routing for the DHCP lease in dhclient-script's environment.
///
/// Run by the dhclient exit hook, not by hand: it reads `reason`, `interface` and the
/// `new_*`/`old_*` lease variables dhclient-script exports. Exit status: 0 done, 1
/// runtime error, 2 malformed environment or configuration (the hook ignores it).
#[derive(Debug, Parser)]
#[command(name = "leasehook-dhclient", version)]
struct Cli {
    /// Finish the IMDS wait a hook handed over for this interface (started by the
    /// hook itself).
    #[arg(long, value_name = "IFNAME", hide = true)]
    worker: Option<String>,
}

fn env() -> Env {
    // Non-UTF-8 variables cannot be any of the ones we read; skip them.
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

fn main() -> ExitCode {
    let matches = Cli::command()
        .after_long_help(hook::env_help())
        .get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    let env = env();
    // The log context comes from the (untrusted) environment: only well-formed
    // values make it into log lines.
    let iface = cli
        .worker
        .as_deref()
        .or(env.get("interface").map(String::as_str));
    let context = Context {
        iface: iface
            .and_then(|i| IfName::try_new(i).ok())
            .map(|i| i.to_string()),
        reason: if cli.worker.is_some() {
            Some("worker".to_owned())
        } else {
            env.get("reason")
                .filter(|r| dhclient::parse_reason(r).is_some())
                .cloned()
        },
    };
    let level = env
        .get("LEASEHOOK_LOG_LEVEL")
        .and_then(|l| l.parse().ok())
        .unwrap_or(log::LevelFilter::Info);
    logging::init("leasehook-dhclient", &context, level);
    let cfg = match HookConfig::from_env(&env) {
        Ok(c) => c,
        Err(e) => {
            log::error!("{e}");
            return ExitCode::from(2);
        }
    };
    let outcome = if let Some(name) = &cli.worker {
        match IfName::try_new(name) {
            Ok(n) => hook::run_worker(&n, &cfg),
            Err(p) => {
                log::error!("--worker: {p}");
                return ExitCode::from(2);
            }
        }
    } else {
        let event = match dhclient::parse(&env) {
            Ok(ev) => ev,
            Err(e) => {
                log::error!("{e}");
                return ExitCode::from(2);
            }
        };
        let exe = std::env::current_exe()
            .unwrap_or_else(|_| "/usr/libexec/leasehook/leasehook-dhclient".into());
        hook::handle(&event, &cfg, &exe)
    };
    match outcome {
        Ok(HookOutcome::Kept(why)) => {
            log::warn!("nothing changed: {why}");
            ExitCode::SUCCESS
        }
        Ok(o) => {
            log::debug!("{o:?}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            log::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
//! `leasehook-networkd`: run by networkd-dispatcher (`hooks/networkd-dispatcher/`)
//! when a link changes state. It reads `IFACE`, `STATE`, `IP_ADDRS`, `IP6_ADDRS`,
//! `AdministrativeState` and `OperationalState` from its environment and the DHCPv4
//! lease from `/run/systemd/netif/leases/<ifindex>` (under `LEASEHOOK_ROOT`), and
//! then does what the dhclient shim does, with the same code
//! (`leasehook_core::hook`): lock, IMDS wait, worker, logging.
//!
//! States (`DispatcherEvent::dispatch`): `routable` applies the lease; `off` and
//! `no-carrier` remove both families; `degraded` without an IPv4 address removes
//! IPv4; others are ignored. A link networkd does not manage by DHCP (no lease file)
//! is left alone with one log line.
//!
//! Exit codes: 0 done, 1 a runtime error, 2 a malformed environment or
//! configuration.

use std::path::Path;
use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _, Parser};
use leasehook_core::event::Env;
use leasehook_core::event::networkd::{self, Dispatch};
use leasehook_core::hook::{self, HookConfig, HookOutcome};
use leasehook_core::logging::{self, Context};
use leasehook_core::model::IfName;

/// Source policy routing for the link networkd-dispatcher reports.
///
/// Run by networkd-dispatcher's scripts, not by hand. Exit status: 0 done, 1
/// runtime error, 2 malformed environment or configuration.
#[derive(Debug, Parser)]
#[command(name = "leasehook-networkd", version)]
struct Cli {
    /// Finish the IMDS wait a hook handed over for this interface (started by the
    /// shim itself).
    #[arg(long, value_name = "IFNAME", hide = true)]
    worker: Option<String>,
}

/// The most we read of a lease file: real ones are a few hundred bytes.
const MAX_LEASE_FILE: u64 = 64 * 1024;

fn read_lease_file(path: &Path) -> Result<Option<String>, String> {
    use std::io::Read as _;
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{path:?}: {e}")),
        Ok(m) if !m.is_file() => return Err(format!("{path:?}: not a regular file")),
        Ok(_) => {}
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_LEASE_FILE).read_to_string(&mut text))
        .map_err(|e| format!("{path:?}: {e}"))?;
    Ok(Some(text))
}

fn run(env: &Env, cfg: &HookConfig) -> Result<Vec<HookOutcome>, (u8, String)> {
    let runtime = |e: leasehook_core::Error| (1, e.to_string());
    let ev = networkd::parse_dispatcher(env).map_err(|e| (2, e.to_string()))?;
    let exe = std::env::current_exe()
        .unwrap_or_else(|_| "/usr/libexec/leasehook/leasehook-networkd".into());
    match ev.dispatch() {
        Dispatch::Ignore => Ok(vec![HookOutcome::Ignored]),
        Dispatch::Remove(families) => families
            .into_iter()
            .map(|f| hook::handle(&ev.removal(f), cfg, &exe).map_err(runtime))
            .collect(),
        Dispatch::ApplyLease => {
            let Some(index) = hook::link_index(&ev.iface).map_err(runtime)? else {
                return Ok(vec![HookOutcome::Kept(format!(
                    "no link named {}",
                    ev.iface
                ))]);
            };
            let path = cfg
                .root
                .join("run/systemd/netif/leases")
                .join(index.to_string());
            match read_lease_file(&path).map_err(|e| (1, e))? {
                None => Ok(vec![HookOutcome::Kept(format!(
                    "not managed by DHCP (no lease file {path:?}; network file {}); left alone",
                    ev.network_file.as_deref().unwrap_or("unknown")
                ))]),
                Some(text) => {
                    let lease =
                        networkd::parse_lease_file(&text).map_err(|e| (2, e.to_string()))?;
                    hook::handle(&ev.bound(lease), cfg, &exe)
                        .map(|o| vec![o])
                        .map_err(runtime)
                }
            }
        }
    }
}

fn main() -> ExitCode {
    let matches = Cli::command()
        .after_long_help(hook::env_help())
        .get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    // Non-UTF-8 variables cannot be any of the ones we read; skip them.
    let env: Env = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let iface = cli
        .worker
        .as_deref()
        .or(env.get("IFACE").map(String::as_str));
    let context = Context {
        iface: iface
            .and_then(|i| IfName::try_new(i).ok())
            .map(|i| i.to_string()),
        reason: if cli.worker.is_some() {
            Some("worker".to_owned())
        } else {
            networkd::parse_dispatcher(&env).ok().map(|e| e.state)
        },
    };
    let level = env
        .get("LEASEHOOK_LOG_LEVEL")
        .and_then(|l| l.parse().ok())
        .unwrap_or(log::LevelFilter::Info);
    logging::init("leasehook-networkd", &context, level);
    let cfg = match HookConfig::from_env(&env) {
        Ok(c) => c,
        Err(e) => {
            log::error!("{e}");
            return ExitCode::from(2);
        }
    };
    let outcomes = if let Some(name) = &cli.worker {
        match IfName::try_new(name) {
            Ok(n) => hook::run_worker(&n, &cfg)
                .map(|o| vec![o])
                .map_err(|e| (1, e.to_string())),
            Err(p) => Err((2, format!("--worker: {p}"))),
        }
    } else {
        run(&env, &cfg)
    };
    match outcomes {
        Ok(list) => {
            for o in list {
                match o {
                    HookOutcome::Kept(why) => log::info!("nothing changed: {why}"),
                    other => log::debug!("{other:?}"),
                }
            }
            ExitCode::SUCCESS
        }
        Err((code, message)) => {
            log::error!("{message}");
            ExitCode::from(code)
        }
    }
}

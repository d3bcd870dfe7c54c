// SPDX-License-Identifier: Apache-2.0
//! `leasehook-networkd`: run by networkd-dispatcher (`hooks/networkd-dispatcher/`)
//! when a link changes state. It reads `IFACE`, `STATE`, `IP_ADDRS`, `IP6_ADDRS`,
//! `AdministrativeState` and `OperationalState` from its environment and the DHCPv4
//! lease from `/run/systemd/netif/leases/<ifindex>` (under `LEASEHOOK_ROOT`), and
//! then does what the dhclient shim does, with the same code
//! (`crate::run_shim`): lock, IMDS wait, worker, logging.
//!
//! States (`DispatcherEvent::dispatch`): `routable` applies the lease; `off` and
//! `no-carrier` remove both families; `degraded` without an IPv4 address removes
//! IPv4; others are ignored. A link networkd does not manage by DHCP (no lease file)
//! is left alone with one log line.
//!
//! Exit codes: 0 done, 1 a runtime error, 2 a malformed environment or
//! configuration.

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use clap::Parser;
use leasehook_core::event::Env;
use leasehook_core::event::networkd::{self, Dispatch};
use leasehook_core::hook::{self, HookConfig};
use leasehook_core::model::LeaseEvent;

use crate::{Shim, log_context, parse_args, process_env, run_shim};

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

fn read_lease_file(path: &Path) -> leasehook_core::Result<Option<String>> {
    use std::io::Read as _;
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(leasehook_core::Error::io(path, &e)),
        Ok(m) if !m.is_file() => {
            return Err(leasehook_core::Error::Io {
                path: format!("{path:?}"),
                message: "not a regular file".to_owned(),
            });
        }
        Ok(_) => {}
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_LEASE_FILE).read_to_string(&mut text))
        .map_err(|e| leasehook_core::Error::io(path, &e))?;
    Ok(Some(text))
}

/// The lease events a dispatcher state change stands for. Reads the link's index
/// (netlink) and networkd's lease file for `routable`.
fn events(env: &Env, cfg: &HookConfig) -> leasehook_core::Result<Vec<LeaseEvent>> {
    let ev = networkd::parse_dispatcher(env)?;
    match ev.dispatch() {
        Dispatch::Ignore => Ok(Vec::new()),
        Dispatch::Remove(families) => Ok(families.into_iter().map(|f| ev.removal(f)).collect()),
        Dispatch::ApplyLease => {
            let Some(index) = hook::link_index(&ev.iface)? else {
                log::info!("no link named {}; nothing to do", ev.iface);
                return Ok(Vec::new());
            };
            let path = cfg
                .root
                .join("run/systemd/netif/leases")
                .join(index.to_string());
            match read_lease_file(&path)? {
                None => {
                    log::info!(
                        "not managed by DHCP (no lease file {path:?}; network file {}); left alone",
                        ev.network_file.as_deref().unwrap_or("unknown")
                    );
                    Ok(Vec::new())
                }
                Some(text) => Ok(vec![ev.bound(networkd::parse_lease_file(&text)?)]),
            }
        }
    }
}

/// Runs the hook for the command line `args` (`args[0]` the program name); a
/// worker is started as `worker_exe --worker IFNAME`.
pub(super) fn run(args: Vec<OsString>, worker_exe: &Path) -> ExitCode {
    let cli: Cli = parse_args(args);
    let env = process_env();
    let shim = Shim {
        program: "leasehook-networkd",
        worker: cli.worker.as_deref(),
        context: log_context(
            env.get("IFACE").map(String::as_str),
            networkd::parse_dispatcher(&env)
                .ok()
                .map(|e| e.state)
                .as_deref(),
            |_| true,
        ),
    };
    run_shim(&shim, &env, worker_exe, |cfg| events(&env, cfg))
}

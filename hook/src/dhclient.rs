// SPDX-License-Identifier: Apache-2.0
//! `leasehook-dhclient`: run by the dhclient exit hook (`hooks/dhclient/`) with
//! dhclient-script's environment, which it reads itself — nothing passes through a
//! shell. It maps the reason (SPEC §6.1) to a lease event and then does what every
//! shim does, with the same code (`crate::run_shim`): lock, IMDS
//! wait, plan, apply, detached worker, logging.
//!
//! Configuration comes from /etc/leasehook/config.yaml and config.d, then
//! `LEASEHOOK_*` variables (`--help` lists them; dhclient passes them with `-e`). Logs go to the journal, else syslog, else standard
//! error, with the interface and reason on every line.
//!
//! Exit codes: 0 done (applied, removed, ignored, handed to the worker, or nothing
//! changed on purpose), 1 a runtime error (netlink, files, IMDS), 2 a malformed
//! environment or configuration. The hook ignores the status either way: a DHCP
//! lease must never fail because of leasehook.

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use clap::Parser;
use leasehook_core::event::dhclient;

use crate::{Shim, log_context, parse_args, process_env, run_shim};

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

/// Runs the hook for the command line `args` (`args[0]` the program name); a
/// worker is started as `worker_exe --worker IFNAME`.
pub(super) fn run(args: Vec<OsString>, worker_exe: &Path) -> ExitCode {
    let cli: Cli = parse_args(args);
    let env = process_env();
    let shim = Shim {
        program: "leasehook-dhclient",
        worker: cli.worker.as_deref(),
        context: log_context(
            env.get("interface").map(String::as_str),
            env.get("reason").map(String::as_str),
            |r| dhclient::parse_reason(r).is_some(),
        ),
    };
    run_shim(&shim, &env, worker_exe, |_| {
        dhclient::parse(&env).map(|ev| vec![ev])
    })
}

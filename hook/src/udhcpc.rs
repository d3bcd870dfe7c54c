// SPDX-License-Identifier: Apache-2.0
//! `leasehook-udhcpc`: run by leasehook's udhcpc script (`hooks/udhcpc/leasehook.script`,
//! `udhcpc -s`) after the distribution's default script configured the address, with
//! udhcpc's event as its argument (`bound`, `renew`, `deconfig`, `leasefail`, `nak`)
//! and udhcpc's environment (`interface`, `ip`, `subnet`, `mask`, `router`, ...),
//! which it reads itself: nothing passes through a shell. It turns them into a lease
//! event (`leasehook_core::event::udhcpc`) and then does what the other shims do,
//! with the same code (`crate::run_shim`): lock, IMDS wait, worker,
//! logging.
//!
//! Exit codes: 0 done, 1 a runtime error, 2 a malformed event or configuration. The
//! script ignores the status: a lease never fails because of leasehook.

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use clap::Parser;
use leasehook_core::event::udhcpc;

use crate::{Shim, log_context, parse_args, process_env, run_shim};

/// Source policy routing for the DHCP lease udhcpc reports to its script.
///
/// Run by leasehook's udhcpc script, not by hand. Exit status: 0 done, 1 runtime
/// error, 2 malformed event or configuration (the script ignores it).
#[derive(Debug, Parser)]
#[command(name = "leasehook-udhcpc", version)]
struct Cli {
    /// udhcpc's event: bound, renew, deconfig, leasefail or nak.
    #[arg(required_unless_present = "worker")]
    event: Option<String>,
    /// Finish the IMDS wait a hook handed over for this interface (started by the
    /// shim itself).
    #[arg(long, value_name = "IFNAME", hide = true)]
    worker: Option<String>,
}

/// Runs the hook for the command line `args` (`args[0]` the program name); a
/// worker is started as `worker_exe --worker IFNAME`.
pub(super) fn run(args: Vec<OsString>, worker_exe: &Path) -> ExitCode {
    let cli: Cli = parse_args(args);
    let env = process_env();
    let event = cli.event.unwrap_or_default();
    let shim = Shim {
        program: "leasehook-udhcpc",
        worker: cli.worker.as_deref(),
        context: log_context(
            env.get("interface").map(String::as_str),
            Some(&event),
            |e| udhcpc::EVENTS.contains(&e),
        ),
    };
    run_shim(&shim, &env, worker_exe, |_| udhcpc::parse(&event, &env))
}

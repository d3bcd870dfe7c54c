// SPDX-License-Identifier: Apache-2.0
//! `leasehook-nm`: run by leasehook's NetworkManager dispatcher script
//! (`hooks/networkmanager/90-leasehook`) with the dispatcher's two arguments, the
//! interface and the action, and its environment (`DHCP4_IP_ADDRESS`,
//! `DHCP4_SUBNET_MASK`, `DHCP4_ROUTERS`, `DHCP6_IP6_ADDRESS`, `DEVICE_IP_IFACE`,
//! `CONNECTION_UUID`, ...), which it reads itself: nothing passes through a shell.
//! It turns them into lease events (`leasehook_core::event::nm`) and then does what
//! the other shims do, with the same code (`crate::run_shim`): lock,
//! IMDS wait, worker, logging.
//!
//! Exit codes: 0 done, 1 a runtime error, 2 a malformed event or configuration.
//! NetworkManager only logs a script's status; a connection never fails because of
//! leasehook.

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use clap::Parser;
use leasehook_core::event::nm;

use crate::{Shim, log_context, parse_args, process_env, run_shim};

/// Source policy routing for the DHCP lease NetworkManager's dispatcher reports.
///
/// Run by the dispatcher script, not by hand. Exit status: 0 done, 1 runtime error,
/// 2 malformed event or configuration.
#[derive(Debug, Parser)]
#[command(name = "leasehook-nm", version)]
struct Cli {
    /// The interface (the dispatcher's first argument).
    #[arg(required_unless_present = "worker")]
    interface: Option<String>,
    /// The action: up, dhcp4-change, dhcp6-change, down, ... (the second argument).
    #[arg(required_unless_present = "worker")]
    action: Option<String>,
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
    let (iface, action) = (
        cli.interface.unwrap_or_default(),
        cli.action.unwrap_or_default(),
    );
    let shim = Shim {
        program: "leasehook-nm",
        worker: cli.worker.as_deref(),
        context: log_context(Some(&iface), Some(&action), |a| nm::ACTIONS.contains(&a)),
    };
    run_shim(&shim, &env, worker_exe, |_| {
        let ev = nm::parse(&iface, &action, &env)?;
        if let Some(uuid) = &ev.connection_uuid {
            log::debug!("connection {uuid}");
        }
        Ok(ev.events)
    })
}

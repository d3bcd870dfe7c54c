// SPDX-License-Identifier: Apache-2.0
//! `leasehook-dhcpcd`: run by leasehook's dhcpcd hook (`hooks/dhcpcd/90-leasehook`,
//! sourced by `dhcpcd-run-hooks`) with dhcpcd's environment — `reason`, `interface`,
//! `new_*` and `old_*` — which it reads itself: nothing passes through a shell. It
//! turns them into lease events (`leasehook_core::event::dhcpcd`) and then does what
//! the other shims do, with the same code (`crate::run_env_client`): lock,
//! IMDS wait, worker, logging.
//!
//! dhcpcd clears the environment of its hooks: configuration (`LEASEHOOK_*`, `--help`
//! lists them) reaches the shim only through dhcpcd's `-e`/`env` option.
//!
//! Exit codes: 0 done, 1 a runtime error, 2 a malformed event or configuration. The
//! hook ignores the status: a lease never fails because of leasehook.

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use leasehook_core::event::dhcpcd;

use crate::{EnvClient, run_env_client};

/// The hook's name and `--help`.
const CLIENT: EnvClient = EnvClient {
    program: "leasehook-dhcpcd",
    help: "Source policy routing for the DHCP lease in dhcpcd-run-hooks' environment.\n\n\
           Run by the dhcpcd hook, not by hand. Exit status: 0 done, 1 runtime error, \
           2 malformed environment or configuration (the hook ignores it).",
};

/// Runs the hook for the command line `args` (`args[0]` the program name); a
/// worker is started as `worker_exe --worker IFNAME`.
pub(super) fn run(args: Vec<OsString>, worker_exe: &Path) -> ExitCode {
    run_env_client(CLIENT, args, worker_exe, dhcpcd::is_reason, dhcpcd::parse)
}

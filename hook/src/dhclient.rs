// SPDX-License-Identifier: Apache-2.0
//! `leasehook-dhclient`: run by the dhclient exit hook (`hooks/dhclient/`) with
//! dhclient-script's environment, which it reads itself — nothing passes through a
//! shell. It maps the reason (SPEC §6.1) to a lease event and then does what every
//! shim does, with the same code (`crate::run_env_client`): lock, IMDS
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

use leasehook_core::event::dhclient;

use crate::{EnvClient, run_env_client};

/// The hook's name and `--help`.
const CLIENT: EnvClient = EnvClient {
    program: "leasehook-dhclient",
    help: "Source policy routing for the DHCP lease in dhclient-script's environment.\n\n\
           Run by the dhclient exit hook, not by hand: it reads `reason`, `interface` \
           and the `new_*`/`old_*` lease variables dhclient-script exports. Exit \
           status: 0 done, 1 runtime error, 2 malformed environment or configuration \
           (the hook ignores it).",
};

/// Runs the hook for the command line `args` (`args[0]` the program name); a
/// worker is started as `worker_exe --worker IFNAME`.
pub(super) fn run(args: Vec<OsString>, worker_exe: &Path) -> ExitCode {
    run_env_client(
        CLIENT,
        args,
        worker_exe,
        |r| dhclient::parse_reason(r).is_some(),
        |env| dhclient::parse(env).map(|ev| vec![ev]),
    )
}

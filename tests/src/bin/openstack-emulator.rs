// SPDX-License-Identifier: Apache-2.0
//! Performs IO: `openstack-emulator`, an `OpenStack` metadata service emulator
//! (Nova behind Neutron's proxy) for tests and benchmarks (never for production).
//!
//! ```text
//! openstack-emulator [--bind ADDR:PORT] [--tree JSON] [--scenario JSON]
//!                    [--rate-limit COUNT/SECONDS] [--log FILE] [--dir DIR]
//! ```
//!
//! It serves the tree (default: the test world's two-NIC instance), prints the
//! address it bound on stdout and runs until killed. With `--dir` (the test
//! world's folder) the log goes to `DIR/openstack.log` unless `--log` says
//! otherwise. The formats are the `leasehook_tests::openstack_emulator` module's.

use std::process::ExitCode;

use clap::Parser;
use leasehook_tests::openstack_emulator::{
    Config, LOG_NAME, OpenStackEmulator, RateLimit, world_tree,
};
use leasehook_tests::shell;

const FORMATS: &str = "\
TREE (--tree): {\"meta_data\": {...}, \"network_data\": {...}, \"user_data\": \"...\"},
  served as /openstack/latest/meta_data.json, network_data.json and user_data (404
  without one) and under every dated version; / and /openstack list the versions,
  /openstack/latest/ the files. Every method answers as GET (Nova checks none;
  HEAD without the body); no header needed.

RATE LIMIT (--rate-limit 10/10, Neutron's defaults): a source address past COUNT
  requests in a sliding window of SECONDS gets 429 Too Many Requests.

SCENARIO (--scenario): {\"appear\": [{\"link\": 1, \"after\": 2.0}],
  \"rules\": [{\"path\": P, \"status\": 503, \"retry_after\": 1, \"from\": 0, \"until\": 1,
  \"count\": 2, \"delay\": 0.5}, {\"path\": P, \"action\": \"garbage|huge|drop\"}]}
  Times are seconds since the first request; a late link hides its networks too.

LOG: one line per request: SECONDS PEER METHOD PATH STATUS.";

/// An `OpenStack` metadata service emulator for tests and benchmarks.
#[derive(Debug, Parser)]
#[command(name = "openstack-emulator", version, after_long_help = FORMATS)]
struct Args {
    #[command(flatten)]
    common: shell::EmulatorArgs,
    /// The tree (JSON text); default: the test world's instance.
    #[arg(long, value_name = "JSON")]
    tree: Option<String>,
    /// Neutron's metadata rate limit, COUNT/SECONDS (e.g. 10/10); default off.
    #[arg(long, value_name = "COUNT/SECONDS")]
    rate_limit: Option<String>,
}

fn run(args: &Args) -> Result<(), String> {
    let config = Config {
        tree: shell::json_or("--tree", args.tree.as_deref(), world_tree)?,
        scenario: args.common.scenario()?,
        log_file: args.common.log_file(LOG_NAME),
        rate_limit: args
            .rate_limit
            .as_deref()
            .map(RateLimit::parse)
            .transpose()?,
    };
    let bind = args.common.bind;
    shell::announce_and_wait(bind, OpenStackEmulator::start(bind, config))
}

fn main() -> ExitCode {
    shell::main("openstack-emulator", || run(&Args::parse()))
}

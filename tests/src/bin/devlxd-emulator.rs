// SPDX-License-Identifier: Apache-2.0
//! Performs IO: `devlxd-emulator`, an LXD dev-lxd emulator on a unix socket for
//! tests and benchmarks (never for production).
//!
//! ```text
//! devlxd-emulator --socket PATH [--config FILE]
//! ```
//!
//! It binds the socket, prints its path on stdout once it listens, and serves
//! until killed (the socket file is removed on a clean stop). The configuration
//! format is described by `--help` and by the `leasehook_tests::devlxd` module.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use leasehook_tests::devlxd::{Config, Devlxd, SAMPLE_META_DATA};
use leasehook_tests::shell;

const FORMAT: &str = "\
CONFIG (--config): a JSON object
  {
    \"meta-data\": \"instance-id: c1\\nlocal-hostname: c1\\n\",
    \"config\":    {\"user.user-data\": \"#cloud-config\\n{}\\n\", \"user.tag\": \"blue\"},
    \"devices\":   {\"eth0\": {\"type\": \"nic\", \"network\": \"lxdbr0\"}},
    \"rules\":     [{\"path\": \"/1.0/meta-data\", \"status\": 500, \"count\": 3},
                  {\"path\": \"/1.0/config\", \"status\": 200, \"body\": \"<html>not JSON\"}]
  }
  meta-data (required): GET /1.0/meta-data, as given.
  config: GET /1.0/config lists /1.0/config/<key> for each key (sorted);
          GET /1.0/config/<key> answers the value, unknown keys 404.
  devices: GET /1.0/devices; absent or null answers 404 (LXD 4.0).
  rules: the first rule whose path equals the request's path answers status and
         body instead; with count, only the first `count` such requests.
Without --config it serves meta-data with repeated keys, as LXD does when
user.meta-data is set.";

/// An LXD dev-lxd emulator for tests and benchmarks.
#[derive(Debug, Parser)]
#[command(name = "devlxd-emulator", version, after_long_help = FORMAT)]
struct Args {
    /// Where to bind the unix socket (its folder must exist).
    #[arg(long, value_name = "PATH")]
    socket: PathBuf,
    /// What to serve (JSON; see --help).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

fn run(args: &Args) -> Result<(), String> {
    let config = match &args.config {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("{p:?}: {e}"))?;
            Config::from_json(&text).map_err(|e| format!("{p:?}: {e}"))?
        }
        None => Config::new(SAMPLE_META_DATA),
    };
    let emulator = Devlxd::start(&args.socket, config)
        .map_err(|e| format!("binding {:?}: {e}", args.socket))?;
    shell::announce(emulator.path().display())?;
    emulator.wait();
    Ok(())
}

fn main() -> ExitCode {
    shell::main("devlxd-emulator", || run(&Args::parse()))
}

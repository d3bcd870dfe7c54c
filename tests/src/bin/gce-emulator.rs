// SPDX-License-Identifier: Apache-2.0
//! Performs IO: `gce-emulator`, a Google Compute Engine metadata server emulator
//! for tests and benchmarks (never for production).
//!
//! ```text
//! gce-emulator [--bind ADDR:PORT] [--tree JSON] [--scenario JSON]
//!              [--allow-source PREFIX]... [--log FILE] [--dir DIR]
//! ```
//!
//! It serves the tree (default: the test world's two-NIC instance), prints the
//! address it bound on stdout and runs until killed. With `--dir` (the test
//! world's folder) the log goes to `DIR/gce.log` unless `--log` says otherwise.
//! The formats are the `leasehook_tests::gce_emulator` module's.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use leasehook_tests::gce_emulator::{Config, GceEmulator, Scenario, world_tree};

const FORMATS: &str = "\
TREE (--tree): {\"instance\": {...}, \"project\": {...}} with the path names
  (network-interfaces, ip-aliases, ...); served below /computeMetadata/v1/. A
  container answers its listing, or JSON with camelCase keys under
  ?recursive=true; a leaf its text; null or a missing key 404.

RULES: a request without Metadata-Flavor: Google, or with X-Forwarded-For, gets
  403; every answer carries Metadata-Flavor: Google. --allow-source limits the
  peers answered (others get 403).

SCENARIO (--scenario): {\"appear\": [{\"nic\": 1, \"after\": 2.0}],
  \"rules\": [{\"path\": P, \"status\": 503, \"retry_after\": 1, \"from\": 0, \"until\": 1,
  \"count\": 2, \"delay\": 0.5}, {\"path\": P, \"action\": \"garbage|huge|no-flavor|drop\"}]}
  Times are seconds since the first request.

LOG: one line per request: SECONDS PEER METHOD PATH?QUERY STATUS FLAVOR.";

/// A Google Compute Engine metadata server emulator for tests and benchmarks.
#[derive(Debug, Parser)]
#[command(name = "gce-emulator", version, after_long_help = FORMATS)]
struct Args {
    /// Where to listen; port 0 picks a free port (printed on stdout).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:0")]
    bind: SocketAddr,
    /// The tree (JSON text); default: the test world's instance.
    #[arg(long, value_name = "JSON")]
    tree: Option<String>,
    /// Late NICs and misbehaviour (JSON text; see --help).
    #[arg(long, value_name = "JSON")]
    scenario: Option<String>,
    /// Answer only peers in this prefix (repeatable).
    #[arg(long, value_name = "PREFIX")]
    allow_source: Vec<ipnet::IpNet>,
    /// Append one line per request to FILE.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// The test world's folder: the log goes to DIR/gce.log.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

fn run(args: Args) -> Result<(), String> {
    let tree = match &args.tree {
        Some(t) => serde_json::from_str(t).map_err(|e| format!("--tree: {e}"))?,
        None => world_tree(),
    };
    let scenario = match &args.scenario {
        Some(s) => {
            Scenario::from_value(serde_json::from_str(s).map_err(|e| format!("--scenario: {e}"))?)?
        }
        None => Scenario::default(),
    };
    let config = Config {
        tree,
        scenario,
        log_file: args.log.or_else(|| args.dir.map(|d| d.join("gce.log"))),
        allowed_sources: args.allow_source,
    };
    let emulator =
        GceEmulator::start(args.bind, config).map_err(|e| format!("binding {}: {e}", args.bind))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", emulator.addr())
        .and_then(|()| out.flush())
        .map_err(|e| format!("stdout: {e}"))?;
    drop(out);
    emulator.wait();
    Ok(())
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            #[allow(clippy::print_stderr)] // the one place the binary reports an error
            {
                eprintln!("gce-emulator: {e}");
            }
            ExitCode::FAILURE
        }
    }
}

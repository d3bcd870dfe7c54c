// SPDX-License-Identifier: Apache-2.0
//! Performs IO: `gce-emulator`, a Google Compute Engine metadata server emulator
//! for tests and benchmarks (never for production).
//!
//! ```text
//! gce-emulator [--bind ADDR:PORT] [--tree JSON] [--scenario JSON]
//!              [--allow-source PREFIX]... [--log FILE] [--dir DIR]
//! gce-emulator --set ADDR:PORT PATH JSON
//! ```
//!
//! It serves the tree (default: the test world's two-NIC instance), prints the
//! address it bound on stdout and runs until killed. With `--dir` (the test
//! world's folder) the log goes to `DIR/gce.log` unless `--log` says otherwise.
//! The formats are the `leasehook_tests::gce_emulator` module's. With `--set` it
//! is the client of a running emulator's control path instead: it replaces the
//! tree's value at PATH (`instance/network-interfaces/1/ip-aliases`) and exits.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use leasehook_tests::gce_emulator::{Config, GceEmulator, world_tree};
use leasehook_tests::shell;

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

LONG POLL: ?wait_for_change=true[&last_etag=E][&timeout_sec=S] is held until
  the answer's ETag changes or S seconds pass (logged `open`, then `200:held`).

CONTROL: --set ADDR:PORT PATH JSON replaces the running emulator's value at
  PATH (PUT /emulator/v1/PATH).

LOG: one line per request: SECONDS PEER METHOD PATH?QUERY STATUS FLAVOR.";

/// A Google Compute Engine metadata server emulator for tests and benchmarks.
#[derive(Debug, Parser)]
#[command(name = "gce-emulator", version, after_long_help = FORMATS)]
struct Args {
    #[command(flatten)]
    common: shell::EmulatorArgs,
    /// The tree (JSON text); default: the test world's instance.
    #[arg(long, value_name = "JSON")]
    tree: Option<String>,
    /// Answer only peers in this prefix (repeatable).
    #[arg(long, value_name = "PREFIX")]
    allow_source: Vec<ipnet::IpNet>,
    /// Change a running emulator's tree instead of serving: ADDR:PORT PATH JSON.
    #[arg(long, num_args = 3, value_names = ["ADDR:PORT", "PATH", "JSON"])]
    set: Vec<String>,
}

/// `--set`: one `PUT /emulator/v1/PATH` to a running emulator.
fn set(args: &[String]) -> Result<(), String> {
    use std::io::Read;
    let [addr, path, json] = args else {
        return Err("--set needs ADDR:PORT PATH JSON".to_owned());
    };
    let mut s = std::net::TcpStream::connect(addr).map_err(|e| format!("{addr}: {e}"))?;
    let path = path.trim_start_matches('/');
    write!(
        s,
        "PUT /emulator/v1/{path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{json}",
        json.len()
    )
    .map_err(|e| format!("{addr}: {e}"))?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)
        .map_err(|e| format!("{addr}: {e}"))?;
    if answer.starts_with("HTTP/1.1 200") {
        Ok(())
    } else {
        Err(format!(
            "{addr}: {}",
            answer.lines().last().unwrap_or_default()
        ))
    }
}

fn run(args: Args) -> Result<(), String> {
    if !args.set.is_empty() {
        return set(&args.set);
    }
    let config = Config {
        tree: shell::json_or("--tree", args.tree.as_deref(), world_tree)?,
        scenario: args.common.scenario()?,
        log_file: args.common.log_file("gce.log"),
        allowed_sources: args.allow_source,
    };
    let bind = args.common.bind;
    shell::announce_and_wait(bind, GceEmulator::start(bind, config))
}

fn main() -> ExitCode {
    shell::main("gce-emulator", || run(Args::parse()))
}

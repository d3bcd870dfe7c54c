// SPDX-License-Identifier: Apache-2.0
//! Performs IO: `imds-emulator`, an EC2 instance metadata service emulator for
//! tests and benchmarks (never for production).
//!
//! ```text
//! imds-emulator [--tree FILE] [--scenario FILE] [--bind ADDR:PORT]
//!               [--require-token] [--log FILE] [--dump-tree]
//! imds-emulator --reset [--bind ADDR:PORT] [--log FILE]
//! ```
//!
//! It serves the tree (default: a two-NIC sample instance), prints the address it
//! bound on stdout (useful with port 0) and runs until killed. The tree, scenario
//! and log formats are described by `--help` and by the `leasehook_tests::emulator`
//! module.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use leasehook_tests::emulator::{Config, Emulator, Resetter, Scenario, read_json, sample_tree};
use leasehook_tests::shell;

const FORMATS: &str = "\
TREE (--tree): a JSON object rooted at `/`, e.g. {\"latest\": {\"meta-data\": {...}}}.
  An object is a folder (its listing: keys one per line, subfolders with a trailing
  `/`); a string or number is a leaf; a list is a leaf of its items joined by
  newlines; null is 404.

VERSIONS: / lists EC2's dated versions and latest; /<version>/... reads the same
  tree as /latest/.... HEAD answers as GET without the body; other methods 405.

IMDSv2: PUT /latest/api/token with X-aws-ec2-metadata-token-ttl-seconds: 1..21600
  returns a token. A GET with an unknown or expired X-aws-ec2-metadata-token gets
  401; with --require-token a GET without one gets 401 too.

SCENARIO (--scenario): a JSON object with three optional lists. Times are seconds
  since the FIRST REQUEST. Paths match by whole segments (a path and everything
  below it).
  {
    \"appear\": [{\"path\": \"/latest/meta-data/network/interfaces/macs/MAC\", \"after\": 1.0},
               {\"path\": \"/latest/meta-data/network/interfaces/macs/MAC/ipv6s\", \"after\": 2.0}],
    \"values\": [{\"path\": \".../macs/MAC/device-number\", \"value\": \"0\", \"from\": 0, \"until\": 1.0}],
    \"rules\":  [{\"path\": \"/latest/api/token\", \"method\": \"PUT\", \"status\": 503,
                \"retry_after\": 1, \"count\": 1},
               {\"path\": \"/latest/meta-data/mac\", \"status\": 500, \"from\": 0.5, \"until\": 1.5},
               {\"path\": \"/latest/meta-data/instance-id\", \"delay\": 0.3},
               {\"path\": \"/latest/meta-data/hostname\", \"action\": \"garbage\"}]
  }
  appear: absent (404, left out of listings) until `after`.
  values: the leaf at exactly `path` reads `value` from `from` (default 0) until
          `until` (default for ever).
  rules:  the first matching rule (path, optional method, from/until window,
          `count` = only the first N matches) waits `delay` seconds, then answers
          `status` (+ `retry_after` seconds as Retry-After, + `body`), or does
          `action`: drop (read, never answered: the client times out), garbage
          (200, body not UTF-8), not-http (bytes that are not HTTP), huge (200 with
          `size` bytes, default 1 MiB). Neither: only the delay.

LOG (--log): one line per request, appended:  SECONDS PEER METHOD PATH STATUS
  (STATUS is the HTTP status, or drop / not-http / garbage / huge / reset). Tokens
  are never logged.

RESET (--reset): serve nothing; read each request and reset the connection (TCP
  RST), as an IMDS that crashes mid-request would.";

/// An EC2 instance metadata service emulator for tests and benchmarks.
#[derive(Debug, Parser)]
#[command(name = "imds-emulator", version, after_long_help = FORMATS)]
struct Args {
    /// The metadata tree (JSON); default: a two-NIC sample instance.
    #[arg(long, value_name = "FILE")]
    tree: Option<PathBuf>,
    /// Delays, windows and failures (JSON; see --help).
    #[arg(long, value_name = "FILE")]
    scenario: Option<PathBuf>,
    /// Where to listen; port 0 picks a free port (printed on stdout).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:0")]
    bind: SocketAddr,
    /// Answer 401 to a GET without a token.
    #[arg(long)]
    require_token: bool,
    /// Append one line per request to FILE.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Print the tree that would be served (JSON) and exit.
    #[arg(long)]
    dump_tree: bool,
    /// Serve nothing: read each request and reset the connection (TCP RST).
    #[arg(long, conflicts_with_all = ["tree", "scenario", "require_token", "dump_tree"])]
    reset: bool,
}

fn run(args: Args) -> Result<(), String> {
    if args.reset {
        let r = Resetter::start(args.bind, args.log.as_deref())
            .map_err(|e| format!("binding {}: {e}", args.bind))?;
        shell::announce(r.addr())?;
        r.wait();
        return Ok(());
    }
    let tree = match &args.tree {
        Some(p) => read_json(p)?,
        None => sample_tree(),
    };
    if args.dump_tree {
        let text = serde_json::to_string_pretty(&tree).map_err(|e| e.to_string())?;
        return shell::announce(text);
    }
    let scenario = match &args.scenario {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("{p:?}: {e}"))?;
            Scenario::from_json(&text).map_err(|e| format!("{p:?}: {e}"))?
        }
        None => Scenario::default(),
    };
    let config = Config {
        tree,
        scenario,
        require_token: args.require_token,
        log_file: args.log,
        headers: leasehook_tests::emulator::EC2_HEADERS,
        allowed_peers: Vec::new(),
        versions: leasehook_tests::emulator::EC2_VERSIONS,
    };
    shell::announce_and_wait(args.bind, Emulator::start(args.bind, config))
}

fn main() -> ExitCode {
    shell::main("imds-emulator", || run(Args::parse()))
}

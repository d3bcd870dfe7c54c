// SPDX-License-Identifier: Apache-2.0
//! Performs IO: `aliyun-emulator`, an Alibaba Cloud ECS instance metadata service
//! emulator for tests and benchmarks (never for production).
//!
//! ```text
//! aliyun-emulator [--tree FILE] [--scenario FILE] [--bind ADDR:PORT]
//!                 [--normal-mode] [--allow CIDR]... [--log FILE] [--dir DIR]
//! ```
//!
//! It serves the tree (default: the namespace world's two-NIC instance) in
//! hardened mode, prints the address it bound on stdout and runs until killed.
//! The tree, scenario and log formats are the IMDS emulator's
//! (`imds-emulator --help`); the dialect is `leasehook_tests::aliyun_emulator`'s.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use leasehook_tests::aliyun_emulator::{LOG_NAME, config, world_tree};
use leasehook_tests::emulator::{Emulator, Scenario, read_json};
use leasehook_tests::shell;

const FORMATS: &str = "\
HARDENED MODE (default): PUT /latest/api/token with
  X-aliyun-ecs-metadata-token-ttl-seconds: 1..21600 returns a token; a GET without
  a valid X-aliyun-ecs-metadata-token gets 401. --normal-mode answers GETs without
  a token too.

SOURCE ADDRESSES: only the VPC (--allow, default 10.98.0.0/16) is answered; any
  other address gets 403.

TREE, SCENARIO and LOG: as imds-emulator's (see imds-emulator --help). With --dir,
  the log is DIR/aliyun.log.";

/// An Alibaba Cloud ECS metadata service emulator for tests and benchmarks.
#[derive(Debug, Parser)]
#[command(name = "aliyun-emulator", version, after_long_help = FORMATS)]
struct Args {
    /// The metadata tree (JSON); default: the namespace world's instance.
    #[arg(long, value_name = "FILE")]
    tree: Option<PathBuf>,
    /// Delays, windows and failures (JSON; see imds-emulator --help).
    #[arg(long, value_name = "FILE")]
    scenario: Option<PathBuf>,
    /// Where to listen; port 0 picks a free port (printed on stdout).
    #[arg(long, value_name = "ADDR:PORT", default_value = "100.100.100.200:80")]
    bind: SocketAddr,
    /// Answer GETs without a token (ECS's normal mode).
    #[arg(long)]
    normal_mode: bool,
    /// The source addresses answered (repeatable); default the world's VPC.
    #[arg(long, value_name = "CIDR")]
    allow: Vec<ipnet::IpNet>,
    /// Append one line per request to FILE.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// The world's folder: the log goes to DIR/aliyun.log unless --log says.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

fn run(args: Args) -> Result<(), String> {
    let tree = match &args.tree {
        Some(p) => read_json(p)?,
        None => world_tree(),
    };
    let mut cfg = config(tree, !args.normal_mode);
    if let Some(p) = &args.scenario {
        let text = std::fs::read_to_string(p).map_err(|e| format!("{p:?}: {e}"))?;
        cfg.scenario = Scenario::from_json(&text).map_err(|e| format!("{p:?}: {e}"))?;
    }
    if !args.allow.is_empty() {
        cfg.allowed_peers = args.allow;
    }
    cfg.log_file = args.log.or_else(|| args.dir.map(|d| d.join(LOG_NAME)));
    shell::announce_and_wait(args.bind, Emulator::start(args.bind, cfg))
}

fn main() -> ExitCode {
    shell::main("aliyun-emulator", || run(Args::parse()))
}

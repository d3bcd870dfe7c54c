// SPDX-License-Identifier: Apache-2.0
//! Performs IO: `azure-emulator`, an Azure Instance Metadata Service emulator for
//! tests and benchmarks (never for production). The formats and the rules it
//! enforces are `leasehook_tests::azure_emulator`'s.
//!
//! ```text
//! azure-emulator [--bind ADDR:PORT] [--instance JSON|@FILE] [--scenario JSON|@FILE]
//!                [--allow-source IP]... [--dir DIR] [--log FILE]
//! ```
//!
//! It prints the address it bound on stdout and runs until killed. With `--dir`
//! (the test world appends its folder), requests are logged to
//! `DIR/azure-imds.log` and NICs named in `DIR/azure-hidden` are left out of the
//! network answer.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use leasehook_tests::azure_emulator::{
    Config, Emulator, HIDDEN_FILE, LOG_FILE, Scenario, world_instance,
};
use serde_json::Value;

/// An Azure IMDS emulator for tests and benchmarks.
#[derive(Debug, Parser)]
#[command(name = "azure-emulator", version)]
struct Args {
    /// Where to listen; port 0 picks a free port (printed on stdout).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:0")]
    bind: SocketAddr,
    /// The instance document (`compute`, `network`), JSON or @FILE; default: the
    /// test world's two-NIC VM.
    #[arg(long, value_name = "JSON")]
    instance: Option<String>,
    /// Late NICs and answer overrides, JSON or @FILE.
    #[arg(long, value_name = "JSON")]
    scenario: Option<String>,
    /// The only source address answered (the primary NIC's primary address);
    /// repeatable; none: any.
    #[arg(long, value_name = "IP")]
    allow_source: Vec<IpAddr>,
    /// The world's folder: the log and the hidden-NIC file live there.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The log file (default `DIR/azure-imds.log`).
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
}

fn json_arg(what: &str, v: &str) -> Result<Value, String> {
    let text = match v.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path).map_err(|e| format!("{what} {path}: {e}"))?,
        None => v.to_owned(),
    };
    serde_json::from_str(&text).map_err(|e| format!("{what}: {e}"))
}

fn run(args: Args) -> Result<(), String> {
    let instance = match &args.instance {
        Some(v) => json_arg("--instance", v)?,
        None => world_instance(),
    };
    let scenario = match &args.scenario {
        Some(v) => Scenario::from_value(json_arg("--scenario", v)?)?,
        None => Scenario::default(),
    };
    let config = Config {
        instance,
        scenario,
        allowed_sources: (!args.allow_source.is_empty()).then_some(args.allow_source),
        log_file: args
            .log
            .or_else(|| args.dir.as_ref().map(|d| d.join(LOG_FILE))),
        hidden_file: args.dir.as_ref().map(|d| d.join(HIDDEN_FILE)),
        rate_limit: Some(leasehook_tests::azure_emulator::RATE_LIMIT),
    };
    let emulator =
        Emulator::start(args.bind, config).map_err(|e| format!("binding {}: {e}", args.bind))?;
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
                eprintln!("azure-emulator: {e}");
            }
            ExitCode::FAILURE
        }
    }
}

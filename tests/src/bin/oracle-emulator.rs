// SPDX-License-Identifier: Apache-2.0
//! Performs IO: `oracle-emulator`, an Oracle Cloud (OCI) instance metadata
//! service emulator (IMDS version 2) for tests and benchmarks (never for
//! production). The formats and the rules it enforces are
//! `leasehook_tests::oracle_emulator`'s.
//!
//! ```text
//! oracle-emulator [--bind ADDR:PORT] [--vnics JSON|@FILE] [--instance JSON|@FILE]
//!                 [--scenario JSON|@FILE] [--dir DIR] [--log FILE]
//! ```
//!
//! It prints the address it bound on stdout and runs until killed. With `--dir`
//! (the test world appends its folder), requests are logged to
//! `DIR/oracle-imds.log` and VNICs named in `DIR/oracle-detached` are left out of
//! the `/opc/v2/vnics/` answer (detached); while `DIR/oracle-fault` exists,
//! every answer is the fault it names.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use leasehook_tests::oracle_emulator::{
    Config, DETACHED_FILE, Emulator, FAULT_FILE, LOG_FILE, Scenario, world_instance, world_vnics,
};
use serde_json::Value;

/// An OCI IMDS emulator for tests and benchmarks.
#[derive(Debug, Parser)]
#[command(name = "oracle-emulator", version)]
struct Args {
    /// Where to listen; port 0 picks a free port (printed on stdout).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:0")]
    bind: SocketAddr,
    /// The `/opc/v2/vnics/` list, JSON or @FILE; default: the test world's two
    /// VNICs.
    #[arg(long, value_name = "JSON")]
    vnics: Option<String>,
    /// The `/opc/v2/instance/` document, JSON or @FILE; default: the test
    /// world's.
    #[arg(long, value_name = "JSON")]
    instance: Option<String>,
    /// Late VNICs and answer overrides, JSON or @FILE.
    #[arg(long, value_name = "JSON")]
    scenario: Option<String>,
    /// The world's folder: the log and the detached-VNIC file live there.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The log file (default `DIR/oracle-imds.log`).
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
    let config = Config {
        vnics: match &args.vnics {
            Some(v) => json_arg("--vnics", v)?,
            None => world_vnics(),
        },
        instance: match &args.instance {
            Some(v) => json_arg("--instance", v)?,
            None => world_instance(),
        },
        scenario: match &args.scenario {
            Some(v) => Scenario::from_value(json_arg("--scenario", v)?)?,
            None => Scenario::default(),
        },
        log_file: args
            .log
            .or_else(|| args.dir.as_ref().map(|d| d.join(LOG_FILE))),
        detached_file: args.dir.as_ref().map(|d| d.join(DETACHED_FILE)),
        fault_file: args.dir.as_ref().map(|d| d.join(FAULT_FILE)),
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
                eprintln!("oracle-emulator: {e}");
            }
            ExitCode::FAILURE
        }
    }
}

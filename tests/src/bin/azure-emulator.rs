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

use std::net::IpAddr;
use std::process::ExitCode;

use clap::Parser;
use leasehook_tests::azure_emulator::{Config, Emulator, HIDDEN_FILE, LOG_FILE, world_instance};
use leasehook_tests::shell;

/// An Azure IMDS emulator for tests and benchmarks.
#[derive(Debug, Parser)]
#[command(name = "azure-emulator", version)]
struct Args {
    #[command(flatten)]
    common: shell::EmulatorArgs,
    /// The instance document (`compute`, `network`), JSON or @FILE; default: the
    /// test world's two-NIC VM.
    #[arg(long, value_name = "JSON")]
    instance: Option<String>,
    /// The only source address answered (the primary NIC's primary address);
    /// repeatable; none: any.
    #[arg(long, value_name = "IP")]
    allow_source: Vec<IpAddr>,
}

fn run(args: Args) -> Result<(), String> {
    let config = Config {
        instance: shell::json_or("--instance", args.instance.as_deref(), world_instance)?,
        scenario: args.common.scenario()?,
        allowed_sources: (!args.allow_source.is_empty()).then_some(args.allow_source),
        log_file: args.common.log_file(LOG_FILE),
        hidden_file: args.common.in_dir(HIDDEN_FILE),
        rate_limit: Some(leasehook_tests::azure_emulator::RATE_LIMIT),
    };
    let bind = args.common.bind;
    shell::announce_and_wait(bind, Emulator::start(bind, config))
}

fn main() -> ExitCode {
    shell::main("azure-emulator", || run(Args::parse()))
}

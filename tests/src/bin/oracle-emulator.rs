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

use std::process::ExitCode;

use clap::Parser;
use leasehook_tests::oracle_emulator::{
    Config, DETACHED_FILE, Emulator, FAULT_FILE, LOG_FILE, world_instance, world_vnics,
};
use leasehook_tests::shell;

/// An OCI IMDS emulator for tests and benchmarks.
#[derive(Debug, Parser)]
#[command(name = "oracle-emulator", version)]
struct Args {
    #[command(flatten)]
    common: shell::EmulatorArgs,
    /// The `/opc/v2/vnics/` list, JSON or @FILE; default: the test world's two
    /// VNICs.
    #[arg(long, value_name = "JSON")]
    vnics: Option<String>,
    /// The `/opc/v2/instance/` document, JSON or @FILE; default: the test
    /// world's.
    #[arg(long, value_name = "JSON")]
    instance: Option<String>,
}

fn run(args: &Args) -> Result<(), String> {
    let config = Config {
        vnics: shell::json_or("--vnics", args.vnics.as_deref(), world_vnics)?,
        instance: shell::json_or("--instance", args.instance.as_deref(), world_instance)?,
        scenario: args.common.scenario()?,
        log_file: args.common.log_file(LOG_FILE),
        detached_file: args.common.in_dir(DETACHED_FILE),
        fault_file: args.common.in_dir(FAULT_FILE),
    };
    let bind = args.common.bind;
    shell::announce_and_wait(bind, Emulator::start(bind, config))
}

fn main() -> ExitCode {
    shell::main("oracle-emulator", || run(&Args::parse()))
}

// SPDX-License-Identifier: Apache-2.0
//! `leasehook`: the boot stage and admin CLI. For now it offers `plan` (print the
//! policy-routing plan for given metadata, leases and links, touching nothing),
//! `apply` (put a plan into the kernel), `flush` (take leasehook's state out again),
//! `status` (what is applied), `refresh` (re-check recorded plans against IMDS) and
//! `detect` (which datasources the instance has).
//!
//! Exit codes: 0 success, 1 a runtime error (unreadable file, bad input), 2 a usage
//! error (reported by clap).

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod apply_cmd;
mod detect_cmd;
mod plan_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Source policy routing for multi-NIC cloud instances, installed the moment a DHCP
/// lease arrives.
#[derive(Debug, Parser)]
#[command(name = "leasehook", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Plan(plan_cmd::PlanArgs),
    Apply(apply_cmd::ApplyArgs),
    Flush(apply_cmd::FlushArgs),
    Status(apply_cmd::StatusArgs),
    Refresh(apply_cmd::RefreshArgs),
    Detect(detect_cmd::DetectArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    leasehook_core::logging::init(
        "leasehook",
        &leasehook_core::logging::Context::default(),
        log::LevelFilter::Info,
    );
    let result = match cli.command {
        Command::Plan(args) => plan_cmd::run(&args),
        Command::Apply(args) => apply_cmd::apply(&args),
        Command::Flush(args) => apply_cmd::flush(&args),
        Command::Status(args) => apply_cmd::status(&args),
        Command::Refresh(args) => apply_cmd::refresh(&args),
        Command::Detect(args) => detect_cmd::run(&args),
    };
    match result {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("leasehook: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    #[test]
    fn clap_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}

// SPDX-License-Identifier: Apache-2.0
//! `leasehook`: the boot stage and admin CLI. For now it offers `leasehook plan`,
//! which prints the policy-routing plan for given metadata, leases and links without
//! touching the system.
//!
//! Exit codes: 0 success, 1 a runtime error (unreadable file, bad input), 2 a usage
//! error (reported by clap).

#![allow(clippy::print_stdout, clippy::print_stderr)]

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Plan(args) => plan_cmd::run(&args),
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

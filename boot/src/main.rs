// SPDX-License-Identifier: Apache-2.0
//! `leasehook`: the boot stage and admin CLI. For now it offers `plan` (print the
//! policy-routing plan for given metadata, leases and links, touching nothing),
//! `apply` (put a plan into the kernel), `flush` (take leasehook's state out again),
//! `status` (what is applied), `refresh` (re-check recorded plans against IMDS),
//! `detect` (which datasources the instance has), `init` (the boot stages: find
//! the datasource, cache it, write instance-data), `query` (read instance-data)
//! and `config show` (the merged configuration and where each value came from).
//!
//! Exit codes: 0 success, 1 a runtime error (unreadable file, bad input), 2 a usage
//! error (reported by clap), 3 (`init`) no datasource and no usable cache.

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod apply_cmd;
mod boot_status;
mod config_cmd;
mod detect_cmd;
mod init_cmd;
mod plan_cmd;
mod query_cmd;
mod template;

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
    Init(init_cmd::InitArgs),
    Query(query_cmd::QueryArgs),
    Config(config_cmd::ConfigArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // log_level from the configuration below LEASEHOOK_ROOT (or /); a bad
    // configuration is reported by the command that reads it.
    let level = leasehook_core::config::load(&leasehook_core::config::Sources::from_env(
        leasehook_core::hook::process_env(),
    ))
    .map_or(log::LevelFilter::Info, |l| l.settings.log_level);
    leasehook_core::logging::init(
        "leasehook",
        &leasehook_core::logging::Context::default(),
        level,
    );
    let ok = |out: anyhow::Result<String>| out.map(|s| (s, ExitCode::SUCCESS));
    let result = match cli.command {
        Command::Plan(args) => ok(plan_cmd::run(&args)),
        Command::Apply(args) => ok(apply_cmd::apply(&args)),
        Command::Flush(args) => ok(apply_cmd::flush(&args)),
        Command::Status(args) => ok(apply_cmd::status(&args)),
        Command::Refresh(args) => ok(apply_cmd::refresh(&args)),
        Command::Detect(args) => ok(detect_cmd::run(&args)),
        Command::Init(args) => init_cmd::run(&args),
        Command::Query(args) => ok(query_cmd::run(&args)),
        Command::Config(args) => ok(config_cmd::run(&args)),
    };
    match result {
        Ok((out, code)) => {
            print!("{out}");
            code
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

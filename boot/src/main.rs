// SPDX-License-Identifier: Apache-2.0
//! `leasehook`: the boot stage and admin CLI. For now it offers `plan` (print the
//! policy-routing plan for given metadata, leases and links, touching nothing),
//! `apply` (put a plan into the kernel), `flush` (take leasehook's state out again),
//! `status` (what is applied), `refresh` (re-check recorded plans against IMDS),
//! `detect` (which datasources the instance has), `init` (the boot stages: find
//! the datasource, cache it, write instance-data), `query` (read instance-data),
//! `config show` (the merged configuration and where each value came from) and
//! `watch` (follow LXD/Incus events).
//!
//! Exit codes: 0 success, 1 a runtime error (unreadable file, bad input), 2 a usage
//! error (reported by clap), 3 (`init`) no datasource and no usable cache.

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod apply_cmd;
mod boot_status;
mod config_cmd;
mod detect_cmd;
mod generate_cmd;
mod init_cmd;
mod kube_status;
mod plan_cmd;
mod query_cmd;
mod template;
mod watch_cmd;

use std::process::ExitCode;

use clap::{CommandFactory as _, Parser, Subcommand};

/// Source policy routing for multi-NIC cloud instances, installed the moment a DHCP
/// lease arrives.
///
/// When a DHCP client binds a lease on a secondary NIC, leasehook's hook in the
/// client's hook folder asks the instance metadata service only for what
/// DHCP cannot tell (device-number, network card, secondary addresses, delegated
/// prefixes, IPv6 subnets) and installs source rules and a routing table for the NIC:
/// table 10000 + 100 × network-card + device-number (amazon-ec2-net-utils' scheme;
/// `profile: cloud-init` keeps cloud-init's EC2 netplan numbering instead, table
/// 100 + the NIC's position). Everything leasehook adds carries protocol 176 (`proto 176` in `ip
/// rule` and `ip route`), and it never touches what does not. Settings:
/// /etc/leasehook/config.yaml and config.d (`leasehook config show`).
///
/// This command is the boot stage and the administrator's tool: `init` finds the
/// instance's datasource at boot (EC2 IMDS, LXD's dev-lxd socket, NoCloud seeds) and
/// falls back to the cached one when none answers; `detect` shows which datasources
/// the instance has; `query` reads the instance data `init` wrote; `plan` prints the
/// policy routing for given metadata and leases without touching anything; `apply`,
/// `flush`, `status` and `refresh` put a plan into the kernel, take it out, show it
/// and re-check it against the metadata service. `leasehook SUBCOMMAND --help` (or
/// the leasehook-SUBCOMMAND(1) manual page) describes each.
#[derive(Debug, Parser)]
#[command(name = "leasehook", version, propagate_version = true)]
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
    Watch(watch_cmd::WatchArgs),
}

/// `leasehook generate WHAT --out DIR`: the manual pages and completion scripts,
/// for the package build. Parsed apart from [`Cli`] so that neither `--help`, the
/// man pages nor the completions offer it (`clap_complete` lists hidden subcommands
/// too).
#[derive(Debug, Parser)]
#[command(name = "leasehook generate")]
struct GenerateCli {
    #[command(flatten)]
    args: generate_cmd::GenerateArgs,
}

fn main() -> ExitCode {
    if std::env::args_os().nth(1).is_some_and(|a| a == "generate") {
        let generate = GenerateCli::parse_from(std::env::args_os().skip(1));
        return report(
            generate_cmd::run(&generate.args, Cli::command()).map(|s| (s, ExitCode::SUCCESS)),
        );
    }
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
        Command::Watch(args) => ok(watch_cmd::run(&args)),
    };
    report(result)
}

/// Prints a command's output, or its error on one line; the exit code.
fn report(result: anyhow::Result<(String, ExitCode)>) -> ExitCode {
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
        super::GenerateCli::command().debug_assert();
    }

    /// Every visible (sub)command's arguments, recursively, with the command's path.
    fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<(String, clap::Command)>) {
        out.push((path.to_owned(), cmd.clone()));
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            walk(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }

    /// `--help` and the man pages are made from these texts: a command, argument or
    /// value without one would show up as a bare name.
    #[test]
    fn every_command_argument_and_value_has_help_text() {
        let mut cmd = super::Cli::command();
        cmd.build();
        let mut all = Vec::new();
        walk(&cmd, "leasehook", &mut all);
        assert!(all.len() >= 9, "subcommands went missing: {}", all.len());
        let mut missing = Vec::new();
        for (path, c) in &all {
            if c.get_about()
                .is_none_or(|a| a.to_string().trim().is_empty())
            {
                missing.push(format!("{path}: no about"));
            }
            for arg in c.get_arguments().filter(|a| !a.is_hide_set()) {
                let id = arg.get_id().as_str();
                let help = arg.get_help().or(arg.get_long_help());
                if help.is_none_or(|h| h.to_string().trim().is_empty()) {
                    missing.push(format!("{path} {id}: no help"));
                }
                for value in arg
                    .get_possible_values()
                    .iter()
                    .filter(|v| !v.is_hide_set())
                {
                    // Boolean flags list true/false: those need no words.
                    if matches!(value.get_name(), "true" | "false") {
                        continue;
                    }
                    if value.get_help().is_none() {
                        missing.push(format!("{path} {id}={}: no help", value.get_name()));
                    }
                }
            }
        }
        assert!(
            missing.is_empty(),
            "help text missing:\n{}",
            missing.join("\n")
        );
    }

    /// The long help of the top level names every visible subcommand.
    #[test]
    fn top_level_help_lists_every_subcommand() {
        let help = super::Cli::command().render_long_help().to_string();
        for sub in super::Cli::command().get_subcommands() {
            let listed = help.contains(&format!("  {} ", sub.get_name()));
            assert_eq!(listed, !sub.is_hide_set(), "{}:\n{help}", sub.get_name());
        }
    }
}

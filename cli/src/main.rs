// SPDX-License-Identifier: Apache-2.0
//! `leasehook`: the boot stage and admin CLI. For now it offers `plan` (print the
//! policy-routing plan for given metadata, leases and links, touching nothing),
//! `apply` (put a plan into the kernel), `flush` (take leasehook's state out again),
//! `status` (what is applied; `--wait` until it is), `refresh` (re-check recorded plans against IMDS),
//! `detect` (which datasources the instance has), `init` (the boot stages: find
//! the datasource, cache it, write instance-data), `query` (read instance-data),
//! `config show` (the merged configuration and where each value came from) and
//! `watch` (follow LXD/Incus events). The DHCP clients' hooks are another binary,
//! `leasehook-hook` (hook/).
//!
//! Exit codes: 0 success, 1 a runtime error (unreadable file, bad input), 2 a usage
//! error (reported by clap), 3 (`init`) no datasource and no usable cache;
//! `status` has its own: 0 healthy, 1 degraded, 2 error (`status_cmd.rs`).

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod apply_cmd;
mod boot_status;
mod cli;
mod config_cmd;
mod detect_cmd;
mod explain_cmd;
mod init_cmd;
mod kube_status;
mod logging;
mod metrics_cmd;
mod plan_cmd;
mod query_cmd;
mod status_cmd;
mod template;
mod wait_cmd;
mod watch;

use std::path::Path;
use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory as _, FromArgMatches as _};
use leasehook_core::config::{self, Layers, Loaded};
use leasehook_core::event::Env;

use crate::cli::{Cli, Command};

impl Cli {
    /// Where the configuration comes from: the files below the root (or
    /// `--config`), the `LEASEHOOK_*` variables, then `plan`'s flags. `--root` is
    /// a flag only when given on the command line, so `config show` names the
    /// variable when `LEASEHOOK_ROOT` set it.
    fn sources(&self, matches: &ArgMatches) -> Layers {
        let from_flag = matches.value_source("root") == Some(ValueSource::CommandLine);
        let sources = Layers::from_env(process_env())
            .with_root(from_flag.then(|| self.root.clone()))
            .with_file(self.config.clone());
        match &self.command {
            Command::Plan(args) => plan_cmd::with_flags(sources, args),
            _ => sources,
        }
    }
}

/// The process environment as an [`Env`]. Variables whose name or value is not
/// UTF-8 are left out: none of them is one the CLI reads.
fn process_env() -> Env {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // The configuration, read once for the whole process; a bad one is reported by
    // the command that needs it (log_level falls back to info).
    let sources = cli.sources(&matches);
    let loaded = config::load(&sources).map_err(anyhow::Error::from);
    let level = loaded
        .as_ref()
        .map_or(log::LevelFilter::Info, |l| l.settings.log_level);
    logging::init("leasehook", &logging::Context::default(), level);
    report(run(cli.command, &sources.resolve_root().0, loaded))
}

/// Runs one subcommand with the root and the configuration `main` resolved.
fn run(
    command: Command,
    root: &Path,
    loaded: anyhow::Result<Loaded>,
) -> anyhow::Result<(String, ExitCode)> {
    let ok = |out: anyhow::Result<String>| out.map(|s| (s, ExitCode::SUCCESS));
    match command {
        Command::Plan(args) => ok(plan_cmd::run(&args, &loaded?)),
        Command::Apply(args) => ok(apply_cmd::apply(&args, root)),
        Command::Flush(args) => ok(apply_cmd::flush(&args, root)),
        Command::Status(args) if args.wait => {
            wait_cmd::run(root, std::time::Duration::from_secs(args.timeout))
        }
        Command::Status(args) => status_cmd::run(&args, root, loaded.as_ref()),
        Command::Refresh(args) => {
            let loaded = loaded?;
            let out = apply_cmd::refresh(&args, &loaded);
            metrics_cmd::flush(&loaded.settings);
            out
        }
        Command::Detect(args) => ok(detect_cmd::run(&args, root, &loaded?)),
        Command::Init(args) => init_cmd::run(&args, root, &loaded?),
        Command::Query(args) => ok(query_cmd::run(&args, root)),
        Command::Config(args) => ok(config_cmd::run(&args, &loaded?)),
        Command::Watch(args) => ok(watch::run(&args, root, &loaded?)),
        Command::Explain(args) => Ok(explain_cmd::run(&args, root, &loaded)),
    }
}

/// Prints a command's output, or its error on one line; the exit code.
fn report(result: anyhow::Result<(String, ExitCode)>) -> ExitCode {
    match result {
        Ok((out, code)) => {
            print!("{out}");
            code
        }
        Err(e) => {
            eprintln!("leasehook: error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line, `: `-separated. A cause whose words its
/// error already shows (leasehook's errors show their IO or kernel cause and also
/// keep it as `source()`) is not repeated.
fn one_line(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn an_error_line_names_each_cause_once() {
        let e = anyhow::Error::new(leasehook_core::Error::io(
            std::path::Path::new("/run/leasehook/lock/eth1.lock"),
            &std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        ))
        .context("failed to lock");
        assert_eq!(
            super::one_line(&e),
            "failed to lock: \"/run/leasehook/lock/eth1.lock\": permission denied"
        );
    }
}

// SPDX-License-Identifier: Apache-2.0
//! `leasehook-hook`: performs IO: the DHCP clients' hook, one binary for the five
//! clients, apart from the `leasehook` CLI so that a lease event maps only the
//! lease path's code (a hook's peak RSS follows the text pages it touches; see
//! docs/performance.md).
//!
//! The hooks run `/usr/libexec/leasehook/leasehook-<client>`, a symlink to
//! `/usr/libexec/leasehook/leasehook-hook`; [`dispatch`] picks the client from the
//! name the binary was started under (argv\[0\]'s file name: `leasehook-dhclient`,
//! `leasehook-networkd`, `leasehook-nm`, `leasehook-dhcpcd`, `leasehook-udhcpc`)
//! or from a first argument (`leasehook-hook dhclient ...`). Each client's module
//! parses its command line (its own `--help`, the hidden `--worker IFNAME`) and its
//! event; [`run_shim`] does the rest with the library's [`leasehook_core::hook`]:
//! configuration, logging, lock, IMDS wait, plan, apply, detached worker.
//!
//! The worker is started again through the path the hook was started through (the
//! symlink, so the worker is the same client's, logging under the same name) when
//! that path is this very binary; else through this binary with `--worker IFNAME`
//! as its first argument, which [`dispatch`] also takes (the worker's work does not
//! depend on the client: the event is in the hand-over file).
//!
//! Exit codes of every hook: 0 done (applied, removed, ignored, handed to the
//! worker, or nothing changed on purpose), 1 a runtime error (netlink, files, IMDS),
//! 2 a malformed environment, event or configuration. The hook scripts ignore the
//! status: a DHCP lease must never fail because of leasehook. Any other command
//! line (no client named) is a usage error: a message on standard error and 2.

mod dhclient;
mod dhcpcd;
// The CLI's log set-up, shared by both binaries without a crate of its own (one
// file, nothing public to version), the way the xtask includes cli/src/cli.rs.
#[path = "../../cli/src/logging.rs"]
mod logging;
mod networkd;
mod nm;
mod udhcpc;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub(crate) use leasehook_core::config::env_help;
use leasehook_core::config::{self, Layers};
use leasehook_core::event::Env;
use leasehook_core::hook::{self, HookConfig, HookOutcome};
use leasehook_core::metrics;
use leasehook_core::model::{IfName, LeaseEvent};
use leasehook_core::{Error, Result};

/// The binary's own name: the worker started without a client's name logs as it.
const PROGRAM: &str = "leasehook-hook";

fn main() -> ExitCode {
    dispatch()
}

/// The DHCP clients leasehook hooks, one front end each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Client {
    /// ISC dhclient (`hooks/dhclient/`).
    Dhclient,
    /// networkd-dispatcher (`hooks/networkd-dispatcher/`).
    Networkd,
    /// NetworkManager's dispatcher (`hooks/networkmanager/`).
    Nm,
    /// dhcpcd (`hooks/dhcpcd/`).
    Dhcpcd,
    /// busybox udhcpc (`hooks/udhcpc/`).
    Udhcpc,
}

impl Client {
    /// Every client, in the order the docs list them.
    pub(crate) const ALL: [Self; 5] = [
        Self::Dhclient,
        Self::Networkd,
        Self::Nm,
        Self::Dhcpcd,
        Self::Udhcpc,
    ];

    /// The first-argument name: `leasehook-hook dhclient ...`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Dhclient => "dhclient",
            Self::Networkd => "networkd",
            Self::Nm => "nm",
            Self::Dhcpcd => "dhcpcd",
            Self::Udhcpc => "udhcpc",
        }
    }

    /// The hook's program name, its file name in `/usr/libexec/leasehook/`: log
    /// lines carry it (`journalctl -t leasehook-dhclient`).
    pub(crate) fn program(self) -> &'static str {
        match self {
            Self::Dhclient => "leasehook-dhclient",
            Self::Networkd => "leasehook-networkd",
            Self::Nm => "leasehook-nm",
            Self::Dhcpcd => "leasehook-dhcpcd",
            Self::Udhcpc => "leasehook-udhcpc",
        }
    }

    fn from_program(name: &OsStr) -> Option<Self> {
        Self::ALL.into_iter().find(|c| name == c.program())
    }

    fn from_name(name: &OsStr) -> Option<Self> {
        Self::ALL.into_iter().find(|c| name == c.name())
    }

    /// Parses the client's command line (`args[0]` is the program name) and
    /// environment and runs the hook.
    fn run(self, args: Vec<OsString>, worker_exe: &Path) -> ExitCode {
        match self {
            Self::Dhclient => dhclient::run(args, worker_exe),
            Self::Networkd => networkd::run(args, worker_exe),
            Self::Nm => nm::run(args, worker_exe),
            Self::Dhcpcd => dhcpcd::run(args, worker_exe),
            Self::Udhcpc => udhcpc::run(args, worker_exe),
        }
    }
}

/// Runs the hook the command line names and returns its exit status. A hook is
/// chosen by argv\[0\]'s file name (`leasehook-<client>`, the symlinks the hooks
/// run) or by a first argument (`leasehook-hook <client> ...`); `leasehook-hook
/// --worker IFNAME` is the worker started when the path the hook ran through is
/// not known. Anything else is a usage error (2).
fn dispatch() -> ExitCode {
    let mut args: Vec<OsString> = std::env::args_os().collect();
    let argv0 = args.first().cloned().unwrap_or_default();
    if let Some(client) = Path::new(&argv0).file_name().and_then(Client::from_program) {
        let exe = worker_exe(Some(Path::new(&argv0)), client.program());
        return client.run(args, &exe);
    }
    let first = args.get(1).cloned().unwrap_or_default();
    if let Some(client) = Client::from_name(&first) {
        // `leasehook-hook dhclient ARGS`: the client sees `leasehook-dhclient ARGS`.
        args.splice(0..2, [OsString::from(client.program())]);
        let exe = worker_exe(None, client.program());
        return client.run(args, &exe);
    }
    if first == "--worker" {
        let name = args.get(2).and_then(|a| a.to_str()).unwrap_or_default();
        let exe = worker_exe(None, PROGRAM);
        return run_shim(
            &Shim {
                program: PROGRAM,
                worker: Some(name),
                context: logging::Context::default(),
            },
            &process_env(),
            &exe,
            |_| Ok(Vec::new()),
        );
    }
    usage()
}

/// The usage error of a command line that names no client: the message on
/// standard error, exit status 2 (as clap's usage errors).
#[allow(clippy::print_stderr)]
fn usage() -> ExitCode {
    let names: Vec<&str> = Client::ALL.iter().map(|c| c.name()).collect();
    eprintln!(
        "{PROGRAM}: the DHCP clients' hook, run by their hook scripts as \
         /usr/libexec/leasehook/leasehook-<client>\n\
         usage: {PROGRAM} <client> [ARGS]... (client: {}); the admin CLI is `leasehook`",
        names.join(", ")
    );
    ExitCode::from(2)
}

/// The executable a hook's worker is started as (`EXE --worker IFNAME`): the path
/// the hook was started through, when it leads to this very binary (a symlink
/// named for the client keeps the worker that client's); else this binary, whose
/// first argument `--worker` [`dispatch`] takes; else
/// `/usr/libexec/leasehook/<program>`, when the running executable cannot be found.
fn worker_exe(started_as: Option<&Path>, program: &str) -> PathBuf {
    let Ok(exe) = std::env::current_exe() else {
        return Path::new("/usr/libexec/leasehook").join(program);
    };
    // A bare name was found through PATH: not a path to start again.
    let through = started_as
        .filter(|p| p.components().count() > 1)
        .and_then(|p| {
            let same = std::fs::canonicalize(p).is_ok_and(|real| real == exe);
            same.then(|| std::path::absolute(p).ok()).flatten()
        });
    through.unwrap_or(exe)
}

/// The process environment as an [`Env`]. Variables whose name or value is not
/// UTF-8 are left out: none of them is one a hook reads.
pub(crate) fn process_env() -> Env {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// One run of a DHCP client's hook, for [`run_shim`].
#[derive(Debug, Clone)]
pub(crate) struct Shim<'a> {
    /// The program's name (`leasehook-nm`): log lines carry it.
    pub(crate) program: &'a str,
    /// `--worker IFNAME`: finish the wait a hook handed over, instead of an event.
    pub(crate) worker: Option<&'a str>,
    /// What every log line of an event run starts with: the interface and the
    /// client's reason. Built from the untrusted event with [`log_context`].
    pub(crate) context: logging::Context,
}

/// The `client` label of the metrics: the program's name without `leasehook-`
/// (`dhclient`, ...; `hook` for a worker started as `leasehook-hook`).
fn client_label(program: &str) -> &str {
    program.strip_prefix("leasehook-").unwrap_or(program)
}

/// A log context from an event's interface and reason: the interface is kept only
/// when it is a valid name, the reason only when `known` says it is one the client
/// sends, so a hostile value never reaches a log line unescaped.
pub(crate) fn log_context(
    iface: Option<&str>,
    reason: Option<&str>,
    known: impl Fn(&str) -> bool,
) -> logging::Context {
    logging::Context {
        iface: iface
            .and_then(|i| IfName::try_new(i).ok())
            .map(|i| i.to_string()),
        reason: reason.filter(|r| known(r)).map(str::to_owned),
    }
}

/// A client whose whole event is in its environment, `interface` and `reason` among
/// it (dhclient, dhcpcd): its command line holds only the hidden `--worker IFNAME`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EnvClient {
    /// The program's name (`leasehook-dhclient`): `--help`, `--version` and log lines
    /// carry it.
    pub(crate) program: &'static str,
    /// `--help`: what the hook is (its first paragraph, `-h`), who runs it, what it
    /// reads, its exit status.
    pub(crate) help: &'static str,
}

/// The command line of an [`EnvClient`]; its name and help text are the client's.
#[derive(Debug, clap::Parser)]
#[command(version)]
struct EnvCli {
    /// Finish the IMDS wait a hook handed over for this interface (started by the
    /// hook itself).
    #[arg(long, value_name = "IFNAME", hide = true)]
    worker: Option<String>,
}

/// Runs the hook of `client` for the command line `args` (`args[0]` the program
/// name): the log context from `interface` and `reason` (the reason kept when
/// `known` says the client sends it), and `parse` turning the environment into
/// lease events; a worker is started as `worker_exe --worker IFNAME`.
pub(crate) fn run_env_client(
    client: EnvClient,
    args: Vec<OsString>,
    worker_exe: &Path,
    known: impl Fn(&str) -> bool,
    parse: impl FnOnce(&Env) -> Result<Vec<LeaseEvent>>,
) -> ExitCode {
    let command = <EnvCli as clap::CommandFactory>::command()
        .name(client.program)
        .about(summary(client.help))
        .long_about(client.help);
    let cli: EnvCli = parse_command(command, args);
    let env = process_env();
    let shim = Shim {
        program: client.program,
        worker: cli.worker.as_deref(),
        context: log_context(
            env.get("interface").map(String::as_str),
            env.get("reason").map(String::as_str),
            known,
        ),
    };
    run_shim(&shim, &env, worker_exe, |_| parse(&env))
}

/// The first paragraph of `help` without its final period, as clap's derive makes
/// `-h`'s line of a doc comment.
fn summary(help: &'static str) -> &'static str {
    let first = help.split_once("\n\n").map_or(help, |(first, _)| first);
    first.strip_suffix('.').unwrap_or(first)
}

/// A client's command line `args` (`args[0]` the program name), parsed by its clap
/// definition with the configuration section appended to `--help`; a bad one, or
/// `--help`/`--version`, ends the process as clap does (status 2 or 0).
pub(crate) fn parse_args<C: clap::Parser>(args: Vec<OsString>) -> C {
    parse_command(C::command(), args)
}

/// [`parse_args`] with the clap definition `command` (of `C`, its name or help text
/// set at run time).
fn parse_command<C: clap::FromArgMatches>(command: clap::Command, args: Vec<OsString>) -> C {
    let matches = command.after_long_help(env_help()).get_matches_from(args);
    C::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// Everything a hook does after reading its command line, shared by every DHCP
/// client: reads the configuration ([`config::load`]: files, then `LEASEHOOK_*`
/// variables), sets up logging at its `log_level`, and then either finishes a
/// worker's wait ([`hook::run_worker`]) or turns the client's event into lease
/// events with `parse` (which may read files under the configured root, as
/// networkd's lease file) and [`hook::handle`]s each, in order, with `worker_exe`
/// as the executable a worker is started as.
///
/// With `enabled: false`, or when the boot stage found no datasource this boot
/// ([`hook::inert`]), it returns 0 at once: no event parsed, nothing asked.
///
/// Returns the exit status of the hook contract: 0 done (applied, removed, ignored,
/// handed to the worker, or nothing changed on purpose), 1 a runtime error (every
/// event is still tried), 2 a malformed event or configuration (nothing is done).
pub(crate) fn run_shim(
    shim: &Shim<'_>,
    env: &Env,
    worker_exe: &Path,
    parse: impl FnOnce(&HookConfig) -> Result<Vec<LeaseEvent>>,
) -> ExitCode {
    let context = match shim.worker {
        Some(w) => log_context(Some(w), Some("worker"), |_| true),
        None => shim.context.clone(),
    };
    let loaded = config::load(&Layers::from_env(env.clone()));
    let level = loaded
        .as_ref()
        .map_or(log::LevelFilter::Info, |l| l.settings.log_level);
    logging::init(shim.program, &context, level);
    let textfile = loaded
        .as_ref()
        .ok()
        .and_then(|l| l.settings.metrics_textfile.clone());
    let cfg = match loaded {
        Ok(l) => HookConfig::from_settings(&l.settings),
        Err(e) => {
            log::error!("{e}; nothing done");
            return ExitCode::from(2);
        }
    };
    // `enabled: false`, or no datasource this boot: nothing read, nothing asked.
    if let Some(why) = hook::inert(&cfg) {
        log::debug!("{why}");
        return ExitCode::SUCCESS;
    }
    // The `reason` label of each outcome's event (a worker's: `worker`).
    let mut reasons = Vec::new();
    let outcomes = if let Some(name) = shim.worker {
        reasons.push("worker".to_owned());
        match IfName::try_new(name) {
            Ok(n) => vec![hook::run_worker(&n, &cfg)],
            Err(p) => {
                log::error!("--worker: {p}");
                return ExitCode::from(2);
            }
        }
    } else {
        let events = match parse(&cfg) {
            Ok(events) => events,
            Err(e) => {
                log::error!("{e}");
                // A malformed event is 2; failing to read what it refers to is 1.
                let input = matches!(
                    e,
                    Error::Event { .. } | Error::Syntax { .. } | Error::Argument { .. }
                );
                // Counted too: a client whose events leasehook cannot read is
                // what an operator most needs to see.
                metrics::event(
                    client_label(shim.program),
                    "unknown",
                    if input { "malformed" } else { "error" },
                );
                metrics::flush(&cfg.root, textfile.as_deref());
                return ExitCode::from(if input { 2 } else { 1 });
            }
        };
        if events.is_empty() {
            log::debug!("nothing to do for this event");
        }
        reasons.extend(events.iter().map(|ev| ev.reason.to_string()));
        let paths = leasehook_core::apply::state::Paths::new(&cfg.root);
        let client = client_label(shim.program);
        // A NIC whose event of one family failed keeps that record over the
        // other family's success in the same run.
        let mut failed: Vec<IfName> = Vec::new();
        events
            .iter()
            .map(|ev| {
                let started = leasehook_core::apply::state::unix_ms();
                let result = hook::handle(ev, &cfg, worker_exe);
                // For `leasehook status`: what came of it, the error included.
                if let Some(outcome) = hook::EventOutcome::of(&result)
                    && (outcome.failed() || !failed.contains(&ev.interface))
                {
                    if outcome.failed() {
                        failed.push(ev.interface.clone());
                    }
                    let reason = ev.reason.to_string().to_ascii_uppercase();
                    let record = hook::LastEvent::now(client, &reason, outcome);
                    hook::last_event::record(&paths, &ev.interface, &record, started);
                }
                result
            })
            .collect()
    };
    let client = client_label(shim.program);
    let mut status = ExitCode::SUCCESS;
    for (outcome, reason) in outcomes.into_iter().zip(&reasons) {
        metrics::event(client, reason, hook::metrics_outcome(&outcome));
        match outcome {
            Ok(HookOutcome::Kept(why)) => log::warn!("nothing changed: {why}"),
            Ok(o) => log::debug!("{o:?}"),
            // Said as an error at the event that met it; a repeat is not news.
            Err(e) if e.is_repeated_conflict() => {
                log::info!("{e}");
                status = ExitCode::FAILURE;
            }
            Err(e) => {
                log::error!("{e}");
                status = ExitCode::FAILURE;
            }
        }
    }
    metrics::flush(&cfg.root, textfile.as_deref());
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_lists_every_variable() {
        let help = env_help();
        assert!(
            config::KEYS
                .iter()
                .filter_map(|k| k.env)
                .all(|v| help.contains(v))
        );
        assert!(help.contains("LEASEHOOK_ROOT") && help.contains("LEASEHOOK_CONFIG"));
    }

    #[test]
    fn clients_are_found_by_program_and_first_argument_names() {
        for c in Client::ALL {
            assert_eq!(Client::from_program(OsStr::new(c.program())), Some(c));
            assert_eq!(Client::from_name(OsStr::new(c.name())), Some(c));
            assert_eq!(c.program(), format!("leasehook-{}", c.name()));
        }
        for other in ["leasehook", "plan", "leasehook-plan", "dhclient.sh", ""] {
            assert_eq!(Client::from_program(OsStr::new(other)), None, "{other}");
        }
        // The CLI's subcommands are never taken for a client.
        assert_eq!(Client::from_name(OsStr::new("refresh")), None);
    }

    #[test]
    fn log_context_drops_hostile_values() {
        let c = log_context(Some("eth1\nx"), Some("BOUND\x1b"), |r| r == "BOUND");
        assert_eq!(c, logging::Context::default());
        let c = log_context(Some("eth1"), Some("BOUND"), |r| r == "BOUND");
        assert_eq!(c.iface.as_deref(), Some("eth1"));
        assert_eq!(c.reason.as_deref(), Some("BOUND"));
    }

    #[test]
    fn a_worker_starts_again_through_the_running_binary() {
        let exe = std::env::current_exe().unwrap();
        // Not this binary (or not a path): the running executable itself.
        assert_eq!(worker_exe(Some(Path::new("/bin/sh")), "p"), exe);
        assert_eq!(worker_exe(Some(Path::new("leasehook-dhclient")), "p"), exe);
        assert_eq!(worker_exe(None, "p"), exe);
        // A symlink to it: the symlink, so the worker keeps the client's name.
        let dir = std::env::temp_dir().join(format!("leasehook-hook-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let link = dir.join("leasehook-dhclient");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&exe, &link).unwrap();
        assert_eq!(worker_exe(Some(&link), "p"), link);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

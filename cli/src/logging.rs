// SPDX-License-Identifier: Apache-2.0
//! Performs IO: where the binary's log lines go, for the CLI and the hooks alike:
//! both binaries compile this file (`leasehook-hook` includes it with `#[path]`,
//! as the xtask includes cli.rs). The library only uses the `log` macros; the CLI's
//! `main` (or the hook's `run_shim`) calls [`init`] once.
//!
//! Lines go to the systemd journal when standard error is connected to it (a
//! systemd service, or networkd-dispatcher's children: `JOURNAL_STREAM`), with
//! `IFACE` and `REASON` fields for hooks so `journalctl IFACE=eth1` finds them;
//! else to syslog (`/dev/log`, which journald also serves: dhclient, dhcpcd and
//! NetworkManager clear their hooks' environment, so their lines arrive this way,
//! found by `journalctl -t leasehook-dhclient`); else to standard error. Every line starts with the context given to [`init`]
//! (for a hook, the interface and reason: `eth1 BOUND:`); no timestamp is added,
//! since journald and syslog add their own.

use std::io::Write as _;

use log::{LevelFilter, Log, Metadata, Record};

/// What a log line is about, put in front of every line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Context {
    /// The interface, for hooks.
    pub(crate) iface: Option<String>,
    /// The DHCP reason, for hooks.
    pub(crate) reason: Option<String>,
}

impl Context {
    fn prefix(&self) -> String {
        match (&self.iface, &self.reason) {
            (Some(i), Some(r)) => format!("{i} {r}: "),
            (Some(i), None) => format!("{i}: "),
            (None, Some(r)) => format!("{r}: "),
            (None, None) => String::new(),
        }
    }
}

struct Prefixed {
    inner: Box<dyn Log>,
    prefix: String,
    /// The level for leasehook's own lines; libraries' lines are kept to warnings
    /// (ureq's debug output would drown a hook's few lines).
    level: LevelFilter,
}

impl Log for Prefixed {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        let own = metadata.target().starts_with("leasehook");
        metadata.level()
            <= if own {
                self.level
            } else {
                self.level.min(LevelFilter::Warn)
            }
            && self.inner.enabled(metadata)
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        self.inner.log(
            &Record::builder()
                .args(format_args!("{}{}", self.prefix, record.args()))
                .level(record.level())
                .target(record.target())
                .module_path(record.module_path())
                .file(record.file())
                .line(record.line())
                .build(),
        );
    }

    fn flush(&self) {
        self.inner.flush();
    }
}

struct Stderr {
    program: String,
}

impl Log for Stderr {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &Record<'_>) {
        let _ = writeln!(
            std::io::stderr().lock(),
            "{}[{}]: {}: {}",
            self.program,
            std::process::id(),
            record.level(),
            record.args()
        );
    }

    fn flush(&self) {}
}

/// Where [`init`] sent the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sink {
    /// The systemd journal.
    Journal,
    /// syslog via `/dev/log`.
    Syslog,
    /// Standard error.
    Stderr,
}

/// Sets up logging for `program` with `context` in front of every line, at
/// `level`. Call once; a second call changes nothing.
pub(crate) fn init(program: &str, context: &Context, level: LevelFilter) -> Sink {
    let (inner, sink): (Box<dyn Log>, Sink) = if systemd_journal_logger::connected_to_journal() {
        let fields = context
            .iface
            .iter()
            .map(|i| ("IFACE", i.as_str()))
            .chain(context.reason.iter().map(|r| ("REASON", r.as_str())))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect::<Vec<_>>();
        match systemd_journal_logger::JournalLog::new() {
            Ok(j) => (
                Box::new(
                    j.with_extra_fields(fields)
                        .with_syslog_identifier(program.to_owned()),
                ),
                Sink::Journal,
            ),
            Err(_) => stderr_or_syslog(program),
        }
    } else {
        stderr_or_syslog(program)
    };
    if log::set_boxed_logger(Box::new(Prefixed {
        inner,
        prefix: context.prefix(),
        level,
    }))
    .is_ok()
    {
        log::set_max_level(level);
    }
    sink
}

fn stderr_or_syslog(program: &str) -> (Box<dyn Log>, Sink) {
    if std::path::Path::new("/dev/log").exists() {
        let formatter = syslog::Formatter3164 {
            facility: syslog::Facility::LOG_DAEMON,
            hostname: None,
            process: program.to_owned(),
            pid: std::process::id(),
        };
        if let Ok(logger) = syslog::unix(formatter) {
            return (Box::new(syslog::BasicLogger::new(logger)), Sink::Syslog);
        }
    }
    (
        Box::new(Stderr {
            program: program.to_owned(),
        }),
        Sink::Stderr,
    )
}

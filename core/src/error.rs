// SPDX-License-Identifier: Apache-2.0
//! The one error type of `leasehook-core`.
//!
//! Callers must tell a bad DHCP option from a garbage metadata answer and both from a
//! config mistake, so the variants follow the boundary where the input came in rather
//! than the Rust type that failed to parse. Every message names the variable, key or
//! file and shows the offending value escaped and shortened, so a hostile value can
//! neither forge log lines nor flood them.

use crate::model::SourceKind;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the pure core.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A variable of a DHCP client's hook environment is missing or malformed.
    #[error("{source_name} variable {var}: {problem}")]
    Event {
        /// Which event source (for example `dhclient`, `networkd`).
        source_name: &'static str,
        /// The variable name, for example `new_ip_address`.
        var: String,
        /// What is wrong with it.
        problem: Problem,
    },
    /// A key of the instance metadata is missing or malformed.
    #[error("metadata {key}: {problem}")]
    Metadata {
        /// The slash-separated key path, for example `network/interfaces/macs/<mac>/local-ipv4s`.
        key: String,
        /// What is wrong with it.
        problem: Problem,
    },
    /// A command-line style argument is malformed.
    #[error("argument {arg}: {problem}")]
    Argument {
        /// The argument name, for example `--link`.
        arg: String,
        /// What is wrong with it.
        problem: Problem,
    },
    /// A plan cannot be applied as it is (a link it names does not exist, two
    /// interfaces share a table, ...). Nothing was written.
    #[error("invalid plan: {0}")]
    InvalidPlan(String),
    /// The plan's table for `iface` is another NIC's (two NICs with one
    /// `device-number`): nothing was written, for either NIC.
    #[error(
        "{iface}: table {table} is claimed by {} too (two NICs with one device-number): neither NIC's rules are touched",
        others.join(", ")
    )]
    TableConflict {
        /// The interface whose plan was refused.
        iface: crate::model::IfName,
        /// The table both claim.
        table: u32,
        /// The other interfaces that hold it.
        others: Vec<String>,
    },
    /// A netlink request failed. `object` is the operation as an `ip` command line.
    #[error("{object}: {cause}{note}{}", rollback_note(*rolled_back, rollback_errors))]
    Netlink {
        /// The operation that failed, for example `ip -4 rule add from 10.0.1.20/32 lookup 10001`.
        object: String,
        /// Why: the kernel's answer, the socket's or the netlink library's error.
        #[source]
        cause: NetlinkCause,
        /// What leasehook adds to the cause (whose object is in the way), or empty.
        note: String,
        /// How many earlier changes of the same run were undone.
        rolled_back: usize,
        /// Changes that could not be undone: each error names its object and
        /// the kernel's cause.
        rollback_errors: Vec<Error>,
    },
    /// An interface the operation needs has no link (`ip link show` does not list it).
    #[error("no link named {0}")]
    NoSuchLink(crate::model::IfName),
    /// An event that should carry a lease carries none.
    #[error("{reason} event without a lease")]
    NoLease {
        /// The event's reason, as the DHCP client named it.
        reason: String,
    },
    /// Tearing down went through every object; these ones failed.
    #[error("{} object(s) could not be removed: {}", .0.len(), joined(.0))]
    Teardown(Vec<ObjectError>),
    /// A file or folder could not be read or written: the system said why.
    #[error("{path}: {source}")]
    File {
        /// The path (already root-prefixed, `{:?}`-quoted).
        path: String,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// A small local file (a configuration file, a seed) could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The path (already root-prefixed, `{:?}`-quoted).
        path: String,
        /// Why.
        #[source]
        source: ReadError,
    },
    /// A device (the config drive) could not be mounted read-only.
    #[error("{device}: mount read-only: {source}")]
    Mount {
        /// The device (`{:?}`-quoted).
        device: String,
        /// Why mount(8) did not mount it.
        #[source]
        source: ToolError,
    },
    /// A file's contents are not what leasehook writes there: `what` says what
    /// it should be, `source` what is wrong.
    #[error("{path}: {what}: {source}")]
    Corrupt {
        /// The path (already root-prefixed, `{:?}`-quoted).
        path: String,
        /// What the file should hold (`not a last event record`).
        what: &'static str,
        /// What is wrong with it: the parser's or the reader's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A record could not be encoded to be written at `path`.
    #[error("{path}: {source}")]
    Encode {
        /// The path (already root-prefixed, `{:?}`-quoted).
        path: String,
        /// The encoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// A file or folder is not as it must be, and no system or parser error
    /// says why (vanished, a lock held too long, a symlink or a FIFO standing
    /// there, an unknown version); `message` says how. An error that has a
    /// cause keeps it: [`Error::File`], [`Error::Read`], [`Error::Corrupt`],
    /// [`Error::Encode`], [`Error::Mount`].
    #[error("{path}: {message}")]
    Io {
        /// The path (already root-prefixed).
        path: String,
        /// What went wrong.
        message: String,
    },
    /// An instance-id cannot name its folder below `path` (the cache's
    /// `instances/`): nothing was written.
    #[error("{path}: {problem}")]
    CacheName {
        /// The folder (already root-prefixed, `{:?}`-quoted).
        path: String,
        /// Why the instance-id cannot name a folder.
        #[source]
        problem: crate::cache::record::Unnameable,
    },
    /// The applied state could not be recorded, so the run's writes were rolled
    /// back; `rollback_errors` are the ones that could not be.
    #[error("{source} ({})", not_recorded_note(*rolled_back, rollback_errors))]
    NotRecorded {
        /// Why the state could not be recorded.
        #[source]
        source: Box<Error>,
        /// How many changes of the run were to be rolled back.
        rolled_back: usize,
        /// What could not be undone (or the links that could not be read to
        /// undo anything): each error names its object and cause.
        rollback_errors: Vec<Error>,
    },
    /// A request to the EC2 instance metadata service failed. The message names the
    /// URL (never the token: it travels in a header only); `kind` says what failed so
    /// callers can tell a disabled IMDS from a slow one.
    #[error("IMDS {method} {url}: {kind}")]
    Imds {
        /// `GET` or `PUT`.
        method: &'static str,
        /// The URL asked for, base and path.
        url: String,
        /// What went wrong.
        kind: ImdsErrorKind,
    },
    /// A document (JSON, lease file) could not be parsed at all.
    #[error("{what}: {message}")]
    Syntax {
        /// What was being read.
        what: String,
        /// The parser's message.
        message: String,
    },
    /// A datasource answered, but not usefully: an HTTP error, an answer that is
    /// not what the source sends (garbage JSON, YAML that is not a mapping), a seed
    /// file that cannot be read. `what` names the request or the file.
    #[error("{datasource} {what}: {problem}")]
    Datasource {
        /// Which datasource.
        datasource: SourceKind,
        /// The request (`GET http://lxd/1.0/config`) or file it concerns.
        what: String,
        /// What is wrong, with the offending value escaped and shortened.
        problem: String,
    },
    /// A datasource is not there at all (its socket or seed is missing): callers
    /// try the next one, or the cache.
    #[error("{datasource} not found: {reason}")]
    NotFound {
        /// Which datasource.
        datasource: SourceKind,
        /// Why, naming the path or value that decided it.
        reason: String,
    },
    /// A configuration value is refused: a file's key (the origin names the file
    /// and line), an environment variable or a flag. An empty `key` means the file
    /// as a whole (not YAML, an unknown key: the message says which).
    #[error("configuration {origin}: {}{problem}", key_prefix(key))]
    Config {
        /// Where the value came from (`/etc/leasehook/config.yaml line 3`,
        /// `environment LEASEHOOK_TABLE_BASE`, `flag --table-base`).
        origin: String,
        /// The key (`imds.budget_s`), or empty.
        key: String,
        /// What is wrong, with the value escaped and shortened.
        #[source]
        problem: Box<BadValue>,
    },
    /// An instance-data key path (`leasehook query`) is malformed, or names what
    /// the instance data does not hold.
    #[error("instance-data key {path}: {reason}")]
    Query {
        /// The path as written.
        path: String,
        /// What is wrong, naming the segment.
        reason: String,
    },
    /// A route that is not leasehook's holds a table and destination the plan
    /// wants for `iface` (another tool's: docs/migrating.md). Seen before the
    /// first write: nothing was written for any interface of the plan.
    #[error(
        "{iface}: route \"{object}\" is in the way (not leasehook's: proto {}{}): leasehook keeps off {iface}, nothing written, until it is gone{}",
        crate::coexist::protocol_name(*protocol),
        if owner.is_empty() { String::new() } else { format!("; {owner}") },
        if *repeated { " (as at the last event)" } else { "" }
    )]
    Conflict {
        /// The interface kept off.
        iface: crate::model::IfName,
        /// The route in the way, as `ip route` prints it.
        object: String,
        /// Its table.
        table: u32,
        /// Its protocol number.
        protocol: u8,
        /// The tool found that uses that table or protocol, or empty.
        owner: String,
        /// The same conflict was recorded at the last event.
        repeated: bool,
    },
}

fn key_prefix(key: &str) -> String {
    if key.is_empty() {
        String::new()
    } else {
        format!("{key}: ")
    }
}

fn rollback_note(rolled_back: usize, errors: &[Error]) -> String {
    match (rolled_back, errors.is_empty()) {
        (0, true) => String::new(),
        (n, true) => format!(" (rolled back the {n} change(s) made before it)"),
        (n, false) => format!(
            " (rolled back {n} change(s); could not undo: {})",
            joined(errors)
        ),
    }
}

fn not_recorded_note(rolled_back: usize, errors: &[Error]) -> String {
    if errors.is_empty() {
        format!(
            "the state could not be recorded, so the {rolled_back} change(s) of this run were rolled back"
        )
    } else {
        format!(
            "the state could not be recorded; rolling back the {rolled_back} change(s) of this run failed: {}",
            joined(errors)
        )
    }
}

/// Errors one after the other, `; ` between them.
fn joined<E: std::fmt::Display>(errors: &[E]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// One object a teardown could not remove: the interface it belongs to when the
/// teardown covered several, and why (the error names the object, as an `ip`
/// command line, and the kernel's cause). Shared, so a report holding it can be
/// cloned; two are equal when they name the same interface and say the same.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}{error}", iface.as_ref().map(|n| format!("{n}: ")).unwrap_or_default())]
pub struct ObjectError {
    /// The interface, when the message must name it.
    pub iface: Option<crate::model::IfName>,
    /// What failed.
    #[source]
    pub error: std::sync::Arc<Error>,
}

impl ObjectError {
    /// `error` of the object of interface `iface` (`None`: the message does not
    /// name it).
    pub fn new(iface: Option<crate::model::IfName>, error: Error) -> Self {
        Self {
            iface,
            error: std::sync::Arc::new(error),
        }
    }
}

impl PartialEq for ObjectError {
    fn eq(&self, other: &Self) -> bool {
        self.iface == other.iface && self.error.to_string() == other.error.to_string()
    }
}

impl Eq for ObjectError {}

impl Error {
    /// An IO error on `path`, keeping the cause: [`Error::File`] with the same
    /// error (an OS error is rebuilt from its errno, anything else from its kind
    /// and message).
    pub fn io(path: &std::path::Path, e: &std::io::Error) -> Self {
        let source = e.raw_os_error().map_or_else(
            || std::io::Error::new(e.kind(), e.to_string()),
            std::io::Error::from_raw_os_error,
        );
        Self::File {
            path: format!("{path:?}"),
            source,
        }
    }

    /// A conflict ([`Error::Conflict`]) the last event met already: logged below
    /// the warning level, so it is said once, not at every lease.
    pub fn is_repeated_conflict(&self) -> bool {
        matches!(self, Self::Conflict { repeated: true, .. })
    }

    /// The errno behind this error, when the kernel or the system gave one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Self::Netlink { cause, .. } => cause.errno(),
            Self::File { source, .. } => source.raw_os_error(),
            Self::Read {
                source: ReadError::Io(e),
                ..
            } => e.raw_os_error(),
            Self::NotRecorded { source, .. } => source.errno(),
            _ => None,
        }
    }
}

/// Why a netlink request failed.
#[derive(Debug, thiserror::Error)]
pub enum NetlinkCause {
    /// The kernel refused it; its errno as an IO error.
    #[error("{0}")]
    Kernel(std::io::Error),
    /// The netlink socket failed (sending, receiving, opening).
    #[error("{0}")]
    Socket(std::io::Error),
    /// The netlink library refused to build the request (a gateway or source of
    /// another family than the destination): nothing was sent.
    #[error("{0}")]
    Request(Box<dyn std::error::Error + Send + Sync>),
    /// The request names a device that has no link: nothing was sent.
    #[error("no link named {0}")]
    NoSuchLink(crate::model::IfName),
    /// The kernel acknowledged every other request of the batch but this one.
    #[error("no answer from the kernel")]
    NoAnswer,
    /// The applier failed otherwise.
    #[error("{0}")]
    Applier(Box<Error>),
}

impl NetlinkCause {
    /// The kernel's (or the socket's) errno; `ENODEV` for a link that is not there.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Self::Kernel(e) | Self::Socket(e) => e.raw_os_error(),
            Self::NoSuchLink(_) => Some(libc::ENODEV),
            Self::Request(_) | Self::NoAnswer => None,
            Self::Applier(e) => e.errno(),
        }
    }
}

/// How an IMDS request failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ImdsErrorKind {
    /// The token request was refused with 403: the instance's metadata endpoint is
    /// switched off. Retrying does not help.
    #[error("IMDS disabled (the token request was refused with HTTP 403)")]
    Disabled,
    /// No complete answer in time.
    #[error("timed out ({phase})")]
    Timeout {
        /// Which timeout fired, for example `connect` or `whole request`.
        phase: String,
    },
    /// An HTTP status that is neither data nor "not found".
    #[error("HTTP {status}{}", retry_after.map(|d| format!(" (retry after {} s)", d.as_secs())).unwrap_or_default())]
    Http {
        /// The status code.
        status: u16,
        /// A 503's `Retry-After`, when it named a number of seconds.
        retry_after: Option<std::time::Duration>,
    },
    /// The connection failed: refused, reset, unreachable.
    #[error("{message}")]
    Io {
        /// The kind of the underlying IO error.
        kind: std::io::ErrorKind,
        /// Its message.
        message: String,
    },
    /// The answer is not what IMDS sends: not HTTP, not UTF-8, too large, a bad token.
    #[error("unusable answer: {reason}")]
    Garbage {
        /// What is wrong with it.
        reason: String,
    },
}

impl ImdsErrorKind {
    /// Whether asking again later may succeed: timeouts, connection errors, 5xx and
    /// 429. A disabled endpoint, a refused request and garbage stay what they are.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Timeout { .. } | Self::Io { .. } => true,
            Self::Http { status, .. } => *status >= 500 || *status == 429,
            Self::Disabled | Self::Garbage { .. } => false,
        }
    }
}

/// Why a configuration value (or key) is refused; [`Error::Config`] adds
/// where it came from.
#[derive(Debug, thiserror::Error)]
pub enum BadValue {
    /// The value is refused: why, and the value as given.
    #[error("{0}")]
    Refused(Problem),
    /// The file gives a value of another type.
    #[error("{expected}, got {got}")]
    WrongType {
        /// What the key takes (`expected a word`).
        expected: &'static str,
        /// The value given, escaped and shortened.
        got: String,
    },
    /// A list that must name something is empty.
    #[error("the list is empty")]
    EmptyList,
    /// One `unmanaged` entry is refused.
    #[error("{entry:?}: {problem}")]
    Entry {
        /// The entry as given.
        entry: String,
        /// Why.
        #[source]
        problem: BadEntry,
    },
    /// A metadata endpoint URL is refused by its datasource.
    #[error("{0}")]
    Endpoint(#[source] Box<Error>),
    /// `datasource.<name>.fallback` names no datasource leasehook implements.
    #[error("{name:?} is not a datasource leasehook implements ({})", known.join(", "))]
    UnknownDatasource {
        /// The name given.
        name: String,
        /// The names it may be, in ds-identify's order (the configuration, which
        /// reads the clouds' rows, hands them in).
        known: Vec<&'static str>,
    },
    /// The key is none of [`crate::config::KEYS`].
    #[error("not a key leasehook knows")]
    UnknownKey,
    /// The file is not YAML, or has a key leasehook does not know. The parser's
    /// message, with a key shown only when it looks like one (so the parser's own
    /// error is not kept: its text could show a hostile key).
    #[error("{0}; see docs/configuration.md for the keys")]
    Syntax(String),
    /// A file sets `root`, which decides where the files are read from.
    #[error("set only by --root or LEASEHOOK_ROOT (it decides where this file is read from)")]
    RootInFile,
}

impl From<Problem> for BadValue {
    fn from(p: Problem) -> Self {
        Self::Refused(p)
    }
}

impl From<Error> for BadValue {
    fn from(e: Error) -> Self {
        Self::Endpoint(Box::new(e))
    }
}

/// Why an `unmanaged` entry ([`crate::config::Unmanaged`]) is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadEntry {
    /// Not one of the forms (or a form with a bad value): the reason and the entry.
    #[error("{0}")]
    Form(Problem),
    /// A `:` makes it a MAC, but not a valid one.
    #[error(
        "{0} (a MAC is six two-digit hex groups; the other forms are \
         device-number:N, network-card:N and interface-id:ID)"
    )]
    Mac(Problem),
}

/// Why a small local file could not be read ([`Error::Read`]).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The system's error opening or reading it.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Something other than a regular file stands there (a FIFO, a folder).
    #[error("not a regular file")]
    NotAFile,
    /// Larger than the limit, in bytes.
    #[error("larger than {0} bytes")]
    TooLarge(u64),
    /// Not UTF-8 text; the offset of the first byte that is not.
    #[error("not UTF-8 (byte {0})")]
    NotUtf8(usize),
}

/// Why a system tool leasehook runs (mount(8), umount(8), head(1) on the config
/// drive) did not do its job.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// It is not installed.
    #[error(transparent)]
    Missing(Box<Error>),
    /// Starting it, or waiting for it, failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// It exited with an error: the first line of its standard error, its status.
    #[error("{message} ({status})")]
    Failed {
        /// The first line it wrote to standard error (`no message` when none).
        message: String,
        /// How it exited.
        status: std::process::ExitStatus,
    },
    /// It did not finish within the budget and was killed; the program's name.
    #[error("{0} did not finish within the budget; killed")]
    Killed(String),
    /// head(1) did not read the device's first bytes within the budget.
    #[error("its first bytes were not read within the budget")]
    HeadTimeout,
    /// The budget was spent before it could run.
    #[error("the budget is spent")]
    BudgetSpent,
}

/// What is wrong with a value (a plain value of [`crate::model`], named here too).
pub use crate::model::Problem;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_datasource_lists_every_known_one() {
        assert_eq!(
            BadValue::UnknownDatasource {
                name: "Hetzner".into(),
                known: vec!["NoCloud", "LXD"],
            }
            .to_string(),
            "\"Hetzner\" is not a datasource leasehook implements (NoCloud, LXD)"
        );
    }

    #[test]
    fn messages_escape_and_shorten_values() {
        let e = Error::Event {
            source_name: "dhclient",
            var: "interface".into(),
            problem: Problem::bad("invalid interface name", "eth0\n; reboot"),
        };
        assert_eq!(
            e.to_string(),
            r#"dhclient variable interface: invalid interface name (got "eth0\n; reboot")"#
        );
        let long = "x".repeat(100);
        let p = Problem::bad("too long", &long);
        assert!(p.to_string().ends_with("… 100 chars in all)"));
        assert_eq!(Problem::missing().to_string(), "missing");
    }
}

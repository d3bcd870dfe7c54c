//! The matrix's machinery: a row ([`Row`]), what its run saw ([`Seen`]), and the
//! checks every row gets ([`check`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use leasehook_tests::netns::Netns;

use crate::instance::{STATE, text};

/// One fault: how to cause it, and what must come of it.
pub(crate) struct Row {
    /// The test's name.
    pub(crate) name: &'static str,
    /// The fault (doc column 1).
    pub(crate) fault: &'static str,
    /// What leasehook does (doc column 2; the exit status is appended).
    pub(crate) does: &'static str,
    /// The exit status of the binary (`None`: a library call, no process).
    pub(crate) exit: Option<i32>,
    /// The kernel state afterwards.
    pub(crate) kernel: Kernel,
    /// The files afterwards, relative to the root.
    pub(crate) files: &'static [FileWant],
    /// A substring of the log (the binary's standard error; for library rows, the
    /// error) a user would see.
    pub(crate) log: &'static str,
    /// A substring the log must not hold (`""`: no such check), e.g. a warning
    /// repeated once per retry.
    pub(crate) not_in_log: &'static str,
    /// The faulted run may take at most this long (budget plus one request).
    pub(crate) max_secs: f64,
    /// Sets up, injects the fault, runs, and reports what it saw.
    pub(crate) run: fn() -> Seen,
}

/// The kernel state a row must leave.
pub(crate) enum Kernel {
    /// No kernel involved (the boot stage).
    NotInvolved,
    /// Exactly what it was before the fault: the last applied plan.
    AsBefore,
    /// Exactly these rules and routes in tables ≥ 10000 (anyone's), and these /32
    /// and /128 addresses, as `ip -j` shows them.
    Exactly {
        rules: &'static [&'static str],
        routes: &'static [&'static str],
        addresses: &'static [&'static str],
    },
}

/// What a file must be afterwards (paths relative to the root).
pub(crate) enum FileWant {
    /// Byte for byte what it was before the fault.
    Unchanged(&'static str),
    /// Not there.
    Absent(&'static str),
    /// There (file, folder or symlink), holding this text when it is a file.
    Holds(&'static str, &'static str),
}

impl Kernel {
    /// No rule, route or address of anyone's in tables ≥ 10000.
    pub(crate) const NONE: Self = Self::Exactly {
        rules: &[],
        routes: &[],
        addresses: &[],
    };

    fn describe(&self) -> String {
        match self {
            Self::NotInvolved => "— (no netlink)".to_owned(),
            Self::AsBefore => "as before the fault (the last applied plan)".to_owned(),
            Self::Exactly {
                rules,
                routes,
                addresses,
            } => {
                let list = |what: &str, items: &[&str]| {
                    if items.is_empty() {
                        format!("no {what}")
                    } else {
                        format!(
                            "{what} {}",
                            items
                                .iter()
                                .map(|i| format!("`{i}`"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    }
                };
                format!(
                    "{}; {}; {}",
                    list("rules", rules),
                    list("routes", routes),
                    list("addresses", addresses)
                )
            }
        }
    }
}

impl FileWant {
    fn describe(&self) -> String {
        match self {
            Self::Unchanged(p) => format!("`{p}` unchanged"),
            Self::Absent(p) => format!("no `{p}`"),
            Self::Holds(p, "") => format!("`{p}` there"),
            Self::Holds(p, s) => format!("`{p}` holds `{s}`"),
        }
    }
}

impl Row {
    /// The row as a line of `docs/faults.md`'s table.
    pub(crate) fn doc_line(&self) -> String {
        let mut files: Vec<String> = self.files.iter().map(FileWant::describe).collect();
        files.push("no temporary file".to_owned());
        let exit = self
            .exit
            .map_or_else(|| "library call".to_owned(), |c| format!("exit {c}"));
        format!(
            "| {} | {} ({exit}) | {} | {} | `{}` |",
            self.fault,
            self.does,
            self.kernel.describe(),
            files.join("; "),
            self.log
        )
    }
}

/// What a row's run saw.
pub(crate) struct Seen {
    pub(crate) exit: Option<i32>,
    pub(crate) log: String,
    pub(crate) root: PathBuf,
    pub(crate) files_before: BTreeMap<PathBuf, Vec<u8>>,
    pub(crate) kernel_before: Option<Snap>,
    pub(crate) kernel_after: Option<Snap>,
    pub(crate) elapsed: Duration,
    /// Namespaces, folders, mounts and processes, released after the checks.
    pub(crate) keep: Vec<Box<dyn std::any::Any>>,
}

/// How a run ended: its exit status (`None`: a library call), its log, its time.
pub(crate) struct Ran {
    pub(crate) exit: Option<i32>,
    pub(crate) log: String,
    pub(crate) elapsed: Duration,
}

impl From<(Output, Duration)> for Ran {
    fn from((out, elapsed): (Output, Duration)) -> Self {
        Self {
            exit: out.status.code(),
            log: text(&out),
            elapsed,
        }
    }
}

impl Row {
    /// The most common row (`..Row::KEEPS`): exit 0, the kernel and eth1's
    /// state file as before the fault, 3 s at most. A row names what differs.
    pub(crate) const KEEPS: Self = Self {
        name: "",
        fault: "",
        does: "",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "",
        not_in_log: "",
        max_secs: 3.0,
        run: || unreachable!("a row names its run"),
    };
}

/// Rules, routes and secondary addresses.
pub(crate) type Snap = (Vec<String>, Vec<String>, Vec<String>);

pub(crate) fn snap(ns: &Netns) -> Snap {
    let ours = |table: &str| table.parse::<u32>().is_ok_and(|t| t >= 10_000);
    let rules = ns
        .rules()
        .into_iter()
        .filter(|r| {
            r.split(" lookup ")
                .nth(1)
                .is_some_and(|t| ours(t.split(' ').next().unwrap_or("")))
        })
        .collect();
    let routes = ns
        .routes()
        .into_iter()
        .filter(|r| {
            r.split(" table ")
                .nth(1)
                .is_some_and(|t| ours(t.split(' ').next().unwrap_or("")))
        })
        .collect();
    let addresses = ns
        .addresses()
        .into_iter()
        .filter(|a| a.ends_with("/32") || a.ends_with("/128"))
        .collect();
    (rules, routes, addresses)
}

/// Every file under `root` (not following symlinks), with its bytes.
pub(crate) fn files_under(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let Ok(m) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if m.is_dir() {
                stack.push(p);
            } else if m.is_file() {
                let rel = p.strip_prefix(root).unwrap_or(&p).to_path_buf();
                // A huge (sparse) file planted by a row is never read.
                let body = if m.len() > 1 << 20 {
                    format!("<{} bytes>", m.len()).into_bytes()
                } else {
                    std::fs::read(&p).unwrap_or_default()
                };
                out.insert(rel, body);
            }
        }
    }
    out
}

/// The common checks of every row.
pub(crate) fn check(row: &Row) {
    let seen = (row.run)();
    let ctx = format!("row {:?}\nlog:\n{}", row.name, seen.log);
    // Shown with --nocapture: what a user would read.
    eprintln!(
        "{} ({:?}, exit {:?}):\n{}",
        row.name, seen.elapsed, seen.exit, seen.log
    );
    assert_eq!(seen.exit, row.exit, "exit status; {ctx}");
    assert!(seen.log.contains(row.log), "log lacks {:?}; {ctx}", row.log);
    assert!(
        row.not_in_log.is_empty() || !seen.log.contains(row.not_in_log),
        "log holds {:?}; {ctx}",
        row.not_in_log
    );
    assert!(
        seen.elapsed.as_secs_f64() <= row.max_secs,
        "took {:?}, more than {} s; {ctx}",
        seen.elapsed,
        row.max_secs
    );
    match &row.kernel {
        Kernel::NotInvolved => assert!(seen.kernel_after.is_none(), "{ctx}"),
        Kernel::AsBefore => {
            let before = seen
                .kernel_before
                .as_ref()
                .unwrap_or_else(|| panic!("no kernel snapshot; {ctx}"));
            assert!(
                !before.0.is_empty(),
                "no plan was applied before the fault; {ctx}"
            );
            assert_eq!(seen.kernel_after.as_ref(), Some(before), "kernel; {ctx}");
        }
        Kernel::Exactly {
            rules,
            routes,
            addresses,
        } => {
            let after = seen
                .kernel_after
                .as_ref()
                .unwrap_or_else(|| panic!("no kernel snapshot; {ctx}"));
            let own = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
            assert_eq!(after.0, own(rules), "rules; {ctx}");
            assert_eq!(after.1, own(routes), "routes; {ctx}");
            assert_eq!(after.2, own(addresses), "addresses; {ctx}");
        }
    }
    let now = files_under(&seen.root);
    for want in row.files {
        match want {
            FileWant::Unchanged(p) => {
                let before = seen.files_before.get(Path::new(p));
                assert!(
                    before.is_some(),
                    "{p} did not exist before the fault; {ctx}"
                );
                assert_eq!(now.get(Path::new(p)), before, "{p} changed; {ctx}");
            }
            FileWant::Absent(p) => assert!(
                std::fs::symlink_metadata(seen.root.join(p)).is_err(),
                "{p} exists; {ctx}"
            ),
            FileWant::Holds(p, text) => {
                assert!(
                    std::fs::symlink_metadata(seen.root.join(p)).is_ok(),
                    "{p} missing; {ctx}"
                );
                if !text.is_empty() {
                    let body = String::from_utf8_lossy(
                        now.get(Path::new(p))
                            .unwrap_or_else(|| panic!("{p} is not a readable file; {ctx}")),
                    )
                    .into_owned();
                    assert!(body.contains(text), "{p} lacks {text:?}: {body}; {ctx}");
                }
            }
        }
    }
    let temps: Vec<&PathBuf> = now
        .keys()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| leasehook_tests::netns::is_temp_file(&n.to_string_lossy()))
        })
        .collect();
    assert!(temps.is_empty(), "temporary files left: {temps:?}; {ctx}");
}

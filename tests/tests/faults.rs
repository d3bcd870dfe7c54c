// SPDX-License-Identifier: Apache-2.0
//! The fault matrix (issue 10, item 2): one table, [`ROWS`], of every fault
//! leasehook must survive, with what it does, the kernel state and the files it
//! leaves, and the log line a user sees. `docs/faults.md` is the same table;
//! `docs_list_every_row_exactly` checks that each row appears there word for word.
//!
//! Each row runs the real binaries where it can — `leasehook-dhclient` with a
//! synthetic dhclient environment in a network namespace of the test's own, its
//! IMDS emulator inside that namespace on 127.0.0.1; `leasehook init` on a
//! temporary root against the devlxd emulator — and the library where a fault has
//! to fall between two steps (a link deleted after the plan was validated). The
//! common checker ([`check`]) asserts, for every row: the exit status, the log
//! substring, the kernel (through `ip -j` in the row's namespace), the files under
//! the root, no temporary file left anywhere under the root, and that the run did
//! not outlast its budget.
//!
//! Rows that need root (namespaces, mounts, dropping capabilities) carry
//! `#[cfg(feature = "netns")]`; without the feature they are not compiled into
//! tests, and with it they fail, never skip, when root is missing.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::too_many_lines,
    clippy::print_stderr
)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::os::unix::fs::{PermissionsExt as _, symlink};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use leasehook_tests::devlxd::{self, Devlxd, SAMPLE_META_DATA};
use leasehook_tests::netns::{Netns, TempDir, leasehook_bin, run, sibling_bin};
use leasehook_tests::workspace_root;
use leasehook_tests::world::{MAC0, MAC1, default_tree, start_first_line};
use serde_json::{Value, json};

// --- The table ---------------------------------------------------------------------

/// One fault: how to cause it, and what must come of it.
struct Row {
    /// The test's name.
    name: &'static str,
    /// The fault (doc column 1).
    fault: &'static str,
    /// What leasehook does (doc column 2; the exit status is appended).
    does: &'static str,
    /// The exit status of the binary (`None`: a library call, no process).
    exit: Option<i32>,
    /// The kernel state afterwards.
    kernel: Kernel,
    /// The files afterwards, relative to the root.
    files: &'static [FileWant],
    /// A substring of the log (the binary's standard error; for library rows, the
    /// error) a user would see.
    log: &'static str,
    /// A substring the log must not hold (`""`: no such check), e.g. a warning
    /// repeated once per retry.
    not_in_log: &'static str,
    /// The faulted run may take at most this long (budget plus one request).
    max_secs: f64,
    /// Sets up, injects the fault, runs, and reports what it saw.
    run: fn() -> Seen,
}

/// The kernel state a row must leave.
enum Kernel {
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
enum FileWant {
    /// Byte for byte what it was before the fault.
    Unchanged(&'static str),
    /// Not there.
    Absent(&'static str),
    /// There (file, folder or symlink), holding this text when it is a file.
    Holds(&'static str, &'static str),
}

impl Kernel {
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
    fn doc_line(&self) -> String {
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
struct Seen {
    exit: Option<i32>,
    log: String,
    root: PathBuf,
    files_before: BTreeMap<PathBuf, Vec<u8>>,
    kernel_before: Option<Snap>,
    kernel_after: Option<Snap>,
    elapsed: Duration,
    /// Namespaces, folders, mounts and processes, released after the checks.
    keep: Vec<Box<dyn std::any::Any>>,
}

/// Rules, routes and secondary addresses.
type Snap = (Vec<String>, Vec<String>, Vec<String>);

fn snap(ns: &Netns) -> Snap {
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
fn files_under(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
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
fn check(row: &Row) {
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
            let before = seen.kernel_before.as_ref().expect("a kernel snapshot");
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
            let after = seen.kernel_after.as_ref().expect("a kernel snapshot");
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

/// Declares the rows once: the table ([`ROWS`], for the doc check) and one test per
/// row (with the row's attributes, such as the `netns` gate).
macro_rules! matrix {
    ($($(#[$attr:meta])* $name:ident => $row:expr;)*) => {
        matrix! { @table ROWS; $($(#[$attr])* $name => $row;)* }
    };
    (@table $table:ident; $($(#[$attr:meta])* $name:ident => $row:expr;)*) => {
        const $table: &[Row] = &[$($row),*];
        $(
            #[test]
            $(#[$attr])*
            fn $name() {
                let row = $row;
                assert_eq!(row.name, stringify!($name));
                check(&row);
            }
        )*
    };
}

/// The plan leasehook applies for eth1's DHCPv4 lease with the world's metadata.
const BASE_RULES: &[&str] = &[
    "10001 from 10.98.1.20 lookup 10001 proto 176",
    "10001 from 10.98.1.21 lookup 10001 proto 176",
];
const BASE_ROUTES: &[&str] = &[
    "10.98.1.0/24 via - dev eth1 scope link src 10.98.1.20 table 10001 proto 176",
    "default via 10.98.1.1 dev eth1 scope - src - table 10001 proto 176",
];
const STATE: &str = "run/leasehook/iface/eth1.json";
const TOKEN: &str = "run/leasehook/imds-token";
const RECORD: &str = "var/lib/leasehook/instances/i-87018aed/datasource.json";
const INSTANCE_ID: &str = "var/lib/leasehook/data/instance-id";
const INSTANCE_DATA: &str = "run/leasehook/instance-data.json";

matrix! {
    // --- IMDS, through leasehook-dhclient (RENEW after a good BOUND) --------------
    #[cfg(feature = "netns")]
    imds_down => Row {
        name: "imds_down",
        fault: "IMDS down (connection refused)",
        does: "retries with backoff for the budget, then keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE), FileWant::Unchanged(TOKEN)],
        log: "nothing changed: IMDS did not answer usefully",
        not_in_log: "",
        max_secs: 3.0,
        run: || imds_renew(&Imds::Down, None),
    };
    #[cfg(feature = "netns")]
    imds_slow => Row {
        name: "imds_slow",
        fault: "IMDS slow: every answer takes 0.5 s, the budget is 1 s",
        does: "stops asking when the budget is spent (overrun: at most the request under way); IMDS said too little, so keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "nothing changed: IMDS incomplete: keeping the IPv4 state applied before",
        not_in_log: "",
        max_secs: 3.0,
        run: || imds_renew(&Imds::Scenario(json!({"rules": [{"path": "/latest", "delay": 0.5}]})), None),
    };
    #[cfg(feature = "netns")]
    imds_hangs => Row {
        name: "imds_hangs",
        fault: "IMDS never answers (request read, no reply)",
        does: "each request times out after 2 s; keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "timed out (whole request)",
        not_in_log: "",
        max_secs: 4.0,
        run: || imds_renew(&Imds::Scenario(json!({"rules": [{"path": "/latest", "action": "drop"}]})), None),
    };
    #[cfg(feature = "netns")]
    imds_5xx => Row {
        name: "imds_5xx",
        fault: "IMDS answers 500 to everything",
        does: "retries with backoff for the budget, then keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE), FileWant::Unchanged(TOKEN)],
        log: "HTTP 500; keeping the last applied state",
        not_in_log: "",
        max_secs: 3.0,
        run: || imds_renew(&Imds::Scenario(json!({"rules": [{"path": "/latest", "status": 500}]})), None),
    };
    #[cfg(feature = "netns")]
    imds_401_mid_run => Row {
        name: "imds_401_mid_run",
        fault: "IMDS restarted (cached token refused) and refuses the new token once mid-run (401)",
        does: "fetches a new token and repeats the request, each time; applies the new address",
        exit: Some(0),
        kernel: Kernel::Exactly {
            rules: &[
                "10001 from 10.98.1.20 lookup 10001 proto 176",
                "10001 from 10.98.1.21 lookup 10001 proto 176",
                "10001 from 10.98.1.22 lookup 10001 proto 176",
            ],
            routes: BASE_ROUTES,
            addresses: &["eth1 10.98.1.21/32", "eth1 10.98.1.22/32"],
        },
        files: &[FileWant::Holds(STATE, "10.98.1.22/32"), FileWant::Holds(TOKEN, "expires")],
        log: "401, the token was refused; fetching a new one",
        not_in_log: "",
        max_secs: 3.0,
        run: || imds_renew(
            &Imds::Scenario(json!({"rules": [
                {"path": "/latest/meta-data/network", "method": "GET", "status": 401, "count": 1}
            ]})),
            Some("10.98.1.20\n10.98.1.21\n10.98.1.22"),
        ),
    };
    #[cfg(feature = "netns")]
    imds_403 => Row {
        name: "imds_403",
        fault: "IMDS disabled (403 on the token)",
        does: "fails the source at once, no retry, no IMDSv1; keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "IMDS disabled (the token request was refused with HTTP 403)",
        not_in_log: "",
        max_secs: 2.0,
        run: || imds_renew(
            &Imds::Scenario(json!({"rules": [{"path": "/latest/api/token", "method": "PUT", "status": 403}]})),
            None,
        ),
    };
    #[cfg(feature = "netns")]
    imds_partial => Row {
        name: "imds_partial",
        fault: "partial propagation: a new ENI whose subnet key IMDS never serves (BOUND)",
        does: "waits the budget, then applies what the lease alone proves and records what is missing",
        exit: Some(0),
        kernel: Kernel::Exactly {
            rules: BASE_RULES,
            routes: BASE_ROUTES,
            addresses: &["eth1 10.98.1.21/32"],
        },
        files: &[FileWant::Holds(STATE, "\"missing\":[{")],
        log: "applying what the lease alone proves (table 10001)",
        not_in_log: "",
        max_secs: 3.0,
        run: run_imds_partial,
    };
    #[cfg(feature = "netns")]
    imds_garbage => Row {
        name: "imds_garbage",
        fault: "IMDS answers garbage (200, body not UTF-8)",
        does: "fails at once (waiting cannot fix garbage); keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "unusable answer: not UTF-8",
        not_in_log: "",
        max_secs: 2.0,
        run: || imds_renew(&Imds::Scenario(json!({"rules": [{"path": "/latest/meta-data", "action": "garbage"}]})), None),
    };
    #[cfg(feature = "netns")]
    imds_reset => Row {
        name: "imds_reset",
        fault: "IMDS resets every connection (TCP RST)",
        does: "retries with backoff for the budget, then keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE), FileWant::Unchanged(TOKEN)],
        log: "Connection reset by peer",
        not_in_log: "",
        max_secs: 3.0,
        run: || imds_renew(&Imds::Reset, None),
    };

    // --- Azure IMDS, through leasehook-dhclient (RENEW after a good BOUND) ---------
    #[cfg(feature = "netns")]
    azure_down => Row {
        name: "azure_down",
        fault: "Azure IMDS down (connection refused)",
        does: "retries with backoff for the budget, then keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "nothing changed: IMDS did not answer usefully",
        not_in_log: "",
        max_secs: 3.0,
        run: || azure_renew(None),
    };
    #[cfg(feature = "netns")]
    azure_400 => Row {
        name: "azure_400",
        fault: "Azure IMDS answers 400 (the request refused)",
        does: "fails at once (asking again cannot fix a refused request); keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "HTTP 400; keeping the last applied state",
        not_in_log: "",
        max_secs: 2.0,
        run: || azure_renew(Some(&json!({"rules": [{"path": "/metadata", "status": 400}]}))),
    };
    #[cfg(feature = "netns")]
    azure_429_once => Row {
        name: "azure_429_once",
        fault: "Azure IMDS rate-limits the first request (429, `Retry-After: 1`); the budget (synchronous too) is 3 s",
        does: "waits the `Retry-After`, asks once more, finds nothing to change in the kernel and records the renewed lease",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Holds(STATE, "\"reason\":\"renew\"")],
        log: "IMDS agrees with the lease after 2 round(s), 2 request(s)",
        not_in_log: "",
        max_secs: 4.0,
        run: || azure_renew_budget(
            Some(&json!({"rules": [{"path": "/metadata", "status": 429, "retry_after": 1, "count": 1}]})),
            "3",
        ),
    };
    #[cfg(feature = "netns")]
    azure_429 => Row {
        name: "azure_429",
        fault: "Azure IMDS rate-limits every request (429, `Retry-After: 1`); the budget is 1 s",
        does: "a 429 is never read as \"no NIC\": gives up with the error; keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "HTTP 429 (retry after 1 s); keeping the last applied state",
        not_in_log: "",
        max_secs: 3.0,
        run: || azure_renew(Some(&json!({"rules": [{"path": "/metadata", "status": 429, "retry_after": 1}]}))),
    };
    #[cfg(feature = "netns")]
    azure_garbage => Row {
        name: "azure_garbage",
        fault: "Azure IMDS answers garbage (200, body not UTF-8)",
        does: "fails at once (waiting cannot fix garbage); keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "unusable answer: not UTF-8",
        not_in_log: "",
        max_secs: 2.0,
        run: || azure_renew(Some(&json!({"rules": [{"path": "/metadata", "action": "garbage"}]}))),
    };
    #[cfg(feature = "netns")]
    azure_not_json => Row {
        name: "azure_not_json",
        fault: "Azure IMDS answers an HTML error page with 200",
        does: "fails at once naming the answer; keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "Azure IMDS network: expected value",
        not_in_log: "",
        max_secs: 2.0,
        run: || azure_renew(Some(&json!({"rules": [{"path": "/metadata", "action": "not-json"}]}))),
    };
    #[cfg(feature = "netns")]
    azure_slow => Row {
        name: "azure_slow",
        fault: "Azure IMDS slow (every answer takes 0.6 s) and no longer lists eth1; the budget is 1 s",
        does: "stops asking when the budget is spent (overrun: at most the request under way); IMDS said too little, so keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "nothing changed: IMDS incomplete: keeping the IPv4 state applied before",
        not_in_log: "",
        max_secs: 3.0,
        run: || azure_renew(Some(&json!({
            "appear": [{"mac": MAC1, "after": 1000}],
            "rules": [{"path": "/metadata", "delay": 0.6}]
        }))),
    };

    // --- LXD, through `leasehook init --local` --------------------------------------
    lxd_socket_missing => Row {
        name: "lxd_socket_missing",
        fault: "LXD socket missing on a later boot (`security.devlxd=false`)",
        does: "warns, uses the cached datasource: the same instance",
        exit: Some(0),
        kernel: Kernel::NotInvolved,
        files: &[
            FileWant::Unchanged(RECORD),
            FileWant::Unchanged(INSTANCE_ID),
            FileWant::Holds(INSTANCE_DATA, "\"restored_from_cache\": true"),
        ],
        log: "using the cached LXD \"i-87018aed\"",
        not_in_log: "",
        max_secs: 5.0,
        run: || lxd_second_boot(LxdFault::SocketGone),
    };
    lxd_500 => Row {
        name: "lxd_500",
        fault: "LXD socket answers 500 to everything on a later boot",
        does: "retries 30 × 100 ms, then the check fails and the cached datasource stands in",
        exit: Some(0),
        kernel: Kernel::NotInvolved,
        files: &[
            FileWant::Unchanged(RECORD),
            FileWant::Unchanged(INSTANCE_ID),
            FileWant::Holds(INSTANCE_DATA, "\"restored_from_cache\": true"),
        ],
        log: "HTTP 500 (got \"broken\")",
        not_in_log: "(28 more time(s) at most)",
        max_secs: 8.0,
        run: || lxd_second_boot(LxdFault::Http500),
    };
    lxd_not_json => Row {
        name: "lxd_not_json",
        fault: "LXD socket answers HTML to `GET /1.0/config` on the first boot",
        does: "a clear error; no datasource, nothing cached (exit 3: datasource None)",
        exit: Some(3),
        kernel: Kernel::NotInvolved,
        files: &[
            FileWant::Absent("var/lib/leasehook/instances"),
            FileWant::Holds(INSTANCE_DATA, "iid-datasource-none"),
        ],
        log: "LXD GET http://lxd/1.0/config: expected JSON, found something else",
        not_in_log: "",
        max_secs: 5.0,
        run: run_lxd_not_json,
    };

    // --- The boot cache, on a later boot with no datasource -------------------------
    cache_corrupt => Row {
        name: "cache_corrupt",
        fault: "boot cache corrupt (not JSON)",
        does: "sets the record aside, boots with datasource None; the instance's data stays",
        exit: Some(3),
        kernel: Kernel::NotInvolved,
        files: &[
            FileWant::Holds("var/lib/leasehook/instances/i-87018aed/datasource.json.corrupt", "garbage"),
            FileWant::Unchanged(INSTANCE_ID),
        ],
        log: "corrupt (not JSON",
        not_in_log: "",
        max_secs: 5.0,
        run: || spoiled_cache(Spoil::Corrupt),
    };
    cache_truncated => Row {
        name: "cache_truncated",
        fault: "boot cache truncated (half the record)",
        does: "sets the record aside, boots with datasource None; the instance's data stays",
        exit: Some(3),
        kernel: Kernel::NotInvolved,
        files: &[
            FileWant::Holds("var/lib/leasehook/instances/i-87018aed/datasource.json.corrupt", "\"version\""),
            FileWant::Unchanged(INSTANCE_ID),
        ],
        log: "corrupt (truncated",
        not_in_log: "",
        max_secs: 5.0,
        run: || spoiled_cache(Spoil::Truncated),
    };
    cache_future_version => Row {
        name: "cache_future_version",
        fault: "boot cache written by a newer leasehook (version 7)",
        does: "refuses to guess, sets it aside, boots with datasource None",
        exit: Some(3),
        kernel: Kernel::NotInvolved,
        files: &[
            FileWant::Holds("var/lib/leasehook/instances/i-87018aed/datasource.json.corrupt", "\"version\": 7"),
            FileWant::Unchanged(INSTANCE_ID),
        ],
        log: "unknown cache version (version 7, written by a newer leasehook",
        not_in_log: "",
        max_secs: 5.0,
        run: || spoiled_cache(Spoil::Future),
    };
    #[cfg(feature = "netns")]
    cache_unreadable => Row {
        name: "cache_unreadable",
        fault: "boot cache unreadable (mode 000, no `CAP_DAC_OVERRIDE`)",
        does: "logs why, boots with datasource None; the record is kept where it is",
        exit: Some(3),
        kernel: Kernel::NotInvolved,
        files: &[FileWant::Holds(RECORD, ""), FileWant::Unchanged(INSTANCE_ID)],
        log: "datasource.json cannot be read: Permission denied (os error 13)",
        not_in_log: "",
        max_secs: 5.0,
        run: || spoiled_cache(Spoil::Unreadable),
    };
    cache_symlinked => Row {
        name: "cache_symlinked",
        fault: "boot cache record replaced by a symlink to another file",
        does: "never follows it: sets the link aside, boots with datasource None; the target is neither read nor written",
        exit: Some(3),
        kernel: Kernel::NotInvolved,
        files: &[
            FileWant::Holds("var/lib/leasehook/instances/i-87018aed/datasource.json.corrupt", ""),
            FileWant::Unchanged("outside/secret"),
            FileWant::Unchanged(INSTANCE_ID),
        ],
        log: "datasource.json is a symlink, which is never followed",
        not_in_log: "",
        max_secs: 5.0,
        run: || spoiled_cache(Spoil::Symlink),
    };
    cache_link_outside => Row {
        name: "cache_link_outside",
        fault: "the cache's `instance` link points outside the cache (`/etc`)",
        does: "never follows it: sets it aside, boots with datasource None",
        exit: Some(3),
        kernel: Kernel::NotInvolved,
        files: &[
            FileWant::Holds("var/lib/leasehook/instance.corrupt", ""),
            FileWant::Unchanged(RECORD),
            FileWant::Unchanged(INSTANCE_ID),
        ],
        log: "points at \"/etc\", outside",
        not_in_log: "",
        max_secs: 5.0,
        run: || spoiled_cache(Spoil::LinkOutside),
    };

    // --- Disk full ------------------------------------------------------------------
    #[cfg(feature = "netns")]
    disk_full_state => Row {
        name: "disk_full_state",
        fault: "disk full on the state folder (`run/leasehook/iface`, a full tmpfs) at a RENEW that adds an address",
        does: "the state cannot be recorded, so the kernel changes of the run are rolled back; an error names the file",
        exit: Some(1),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "run/leasehook/iface/eth1.json\": No space left on device",
        not_in_log: "",
        max_secs: 3.0,
        run: run_disk_full_state,
    };
    #[cfg(feature = "netns")]
    disk_full_cache => Row {
        name: "disk_full_cache",
        fault: "disk full on the cache folder (`var/lib/leasehook`, a full tmpfs) at the first boot",
        does: "the datasource is used and instance-data written; the failed cache write is an error naming the folder, kept in `boot.json` and shown by `leasehook status` (exit 4: the next boot has no fallback)",
        exit: Some(4),
        kernel: Kernel::NotInvolved,
        files: &[
            FileWant::Absent(RECORD),
            FileWant::Holds(INSTANCE_DATA, "\"instance_id\": \"i-87018aed\""),
            FileWant::Holds("run/leasehook/boot.json", "\"cache_errors\""),
        ],
        log: "cache NOT written: ",
        not_in_log: "",
        max_secs: 5.0,
        run: run_disk_full_cache,
    };

    // --- The kernel -----------------------------------------------------------------
    #[cfg(feature = "netns")]
    link_deleted_before_apply => Row {
        name: "link_deleted_before_apply",
        fault: "link deleted between plan (validated) and apply",
        does: "the first write fails; every write of the run that went through is undone; nothing recorded",
        exit: None,
        kernel: Kernel::Exactly { rules: &[], routes: &[], addresses: &[] },
        files: &[FileWant::Absent(STATE)],
        log: "ip -4 address add 10.98.1.21/32 dev eth1: No such device (os error 19)",
        not_in_log: "",
        max_secs: 5.0,
        run: run_link_deleted_before_apply,
    };
    #[cfg(feature = "netns")]
    foreign_rule_same_but_protocol => Row {
        name: "foreign_rule_same_but_protocol",
        fault: "someone else's rule identical to leasehook's but for its protocol (`proto static`)",
        does: "the kernel keys rules by protocol too (no EEXIST): leasehook adds its own beside it and never touches the foreign one",
        exit: Some(0),
        kernel: Kernel::Exactly {
            rules: &[
                "10001 from 10.98.1.20 lookup 10001 proto static",
                "10001 from 10.98.1.20 lookup 10001 proto 176",
                "10001 from 10.98.1.21 lookup 10001 proto 176",
            ],
            routes: BASE_ROUTES,
            addresses: &["eth1 10.98.1.21/32"],
        },
        files: &[FileWant::Holds(STATE, "10.98.1.20/32")],
        log: "5 change(s) for eth1 IPv4",
        not_in_log: "",
        max_secs: 3.0,
        run: || foreign_then_bound(&["rule", "add", "from", "10.98.1.20", "lookup", "10001", "priority", "10001", "proto", "static"]),
    };
    #[cfg(feature = "netns")]
    foreign_route_eexist => Row {
        name: "foreign_route_eexist",
        fault: "EEXIST: someone else's route in leasehook's table, identical but for its protocol",
        does: "seen before the first write: keeps off eth1 (nothing written, nothing adopted or replaced), the error names the route as `ip` prints it and its protocol, the conflict is recorded",
        exit: Some(1),
        kernel: Kernel::Exactly {
            rules: &[],
            routes: &["10.98.1.0/24 via - dev eth1 scope link src 10.98.1.20 table 10001 proto static"],
            addresses: &[],
        },
        files: &[FileWant::Absent(STATE), FileWant::Holds(CONFLICT, "proto static")],
        log: "eth1: route \"10.98.1.0/24 dev eth1 table 10001 proto static\" is in the way (not leasehook's: proto static): leasehook keeps off eth1, nothing written, until it is gone",
        not_in_log: "File exists",
        max_secs: 3.0,
        run: || foreign_then_bound(&["route", "add", "10.98.1.0/24", "dev", "eth1", "table", "10001", "proto", "static", "scope", "link", "src", "10.98.1.20"]),
    };
    #[cfg(feature = "netns")]
    foreign_route_next_event => Row {
        name: "foreign_route_next_event",
        fault: "the same foreign route, amazon-ec2-net-utils' udev rule on the image; BOUND (the conflict, an error), then RENEW",
        does: "RENEW meets the recorded conflict again: nothing written, no EEXIST and no rollback, said at `info` (once as an error, at BOUND), the owner named by the table it uses",
        exit: Some(1),
        kernel: Kernel::Exactly {
            rules: &[],
            routes: &["10.98.1.0/24 via - dev eth1 scope link src 10.98.1.20 table 10001 proto static"],
            addresses: &[],
        },
        files: &[FileWant::Absent(STATE), FileWant::Holds(CONFLICT, "amazon-ec2-net-utils")],
        log: "proto static; amazon-ec2-net-utils's (found: /usr/lib/udev/rules.d/99-vpc-policy-routes.rules)): leasehook keeps off eth1, nothing written, until it is gone (as at the last event)",
        not_in_log: "rolled back",
        max_secs: 3.0,
        run: run_foreign_route_next_event,
    };
    #[cfg(feature = "netns")]
    foreign_secondary_address => Row {
        name: "foreign_secondary_address",
        fault: "a secondary address another tool already put on the link (`ip address add 10.98.1.21/32 dev eth1`), then BOUND and RELEASE",
        does: "BOUND applies the rules and routes and leaves the address to its owner (not added, not recorded); RELEASE removes leasehook's objects and not the address",
        exit: Some(0),
        kernel: Kernel::Exactly { rules: &[], routes: &[], addresses: &["eth1 10.98.1.21/32"] },
        files: &[],
        log: "10.98.1.21/32 on eth1 is already there and not leasehook's: left to its owner",
        not_in_log: "File exists",
        max_secs: 3.0,
        run: foreign_address_bound_then_released,
    };

    // --- The address gate (issue 18, items 1-4) -------------------------------------
    #[cfg(feature = "netns")]
    gate_ipv4_prefix_everything => Row {
        name: "gate_ipv4_prefix_everything",
        fault: "IMDS `ipv4-prefix: 0.0.0.0/0` on eth1 (BOUND)",
        does: "refuses the prefix by value and reason, applies the rest of the plan; no `from all` rule, so the host's traffic stays on eth0",
        exit: Some(0),
        kernel: Kernel::Exactly {
            rules: BASE_RULES,
            routes: BASE_ROUTES,
            addresses: &["eth1 10.98.1.21/32"],
        },
        files: &[FileWant::Holds(STATE, "\"kind\":\"everything\"")],
        log: "eth1: refused ipv4-prefix 0.0.0.0/0: a /0 (every address)",
        not_in_log: "",
        max_secs: 3.0,
        run: || gate_bound("fg4all", &[(MAC1, "ipv4-prefix", "0.0.0.0/0")], &[]),
    };
    #[cfg(feature = "netns")]
    gate_ipv6_prefix_everything => Row {
        name: "gate_ipv6_prefix_everything",
        fault: "IMDS `ipv6-prefix: ::/0` on eth1 (BOUND6 for `fd00:98:1::20`)",
        does: "refuses the prefix by value and reason, applies the rest of the IPv6 plan",
        exit: Some(0),
        kernel: Kernel::Exactly {
            rules: &["10001 from fd00:98:1::20 lookup 10001 proto 176"],
            routes: &["fd00:98:1::/64 via - dev eth1 scope - src - table 10001 proto 176"],
            addresses: &[],
        },
        files: &[FileWant::Holds(STATE, "\"kind\":\"everything\"")],
        log: "eth1: refused ipv6-prefix ::/0: a /0 (every address)",
        not_in_log: "",
        max_secs: 3.0,
        run: || gate_bound("fg6all", &[(MAC1, "ipv6-prefix", "::/0")], &[
            ("reason", "BOUND6"),
            ("new_ip6_address", "fd00:98:1::20"),
            ("new_ip6_prefixlen", "128"),
        ]),
    };
    #[cfg(feature = "netns")]
    gate_lease_unspecified => Row {
        name: "gate_lease_unspecified",
        fault: "`new_ip_address=0.0.0.0` on eth1, whose device-number IMDS knows (BOUND)",
        does: "the shim refuses the lease before anything is planned: a malformed event, no worker",
        exit: Some(2),
        kernel: Kernel::Exactly { rules: &[], routes: &[], addresses: &[] },
        files: &[FileWant::Absent(STATE), FileWant::Absent("run/leasehook/pending/eth1.json")],
        log: "dhclient variable new_ip_address: refused as a leased address: unspecified (0.0.0.0/32) (got \"0.0.0.0\")",
        not_in_log: "",
        max_secs: 3.0,
        run: || gate_bound("fg0", &[], &[("new_ip_address", "0.0.0.0")]),
    };
    #[cfg(feature = "netns")]
    gate_lease_unspecified_dhcpcd => Row {
        name: "gate_lease_unspecified_dhcpcd",
        fault: "the same lease through dhcpcd (`reason=BOUND new_ip_address=0.0.0.0 new_subnet_cidr=24`)",
        does: "the dhcpcd shim refuses the lease the same way",
        exit: Some(2),
        kernel: Kernel::Exactly { rules: &[], routes: &[], addresses: &[] },
        files: &[FileWant::Absent(STATE)],
        log: "dhcpcd variable new_ip_address: refused as a leased address: unspecified (0.0.0.0/32)",
        not_in_log: "",
        max_secs: 3.0,
        run: || gate_shim("fg0d", "leasehook-dhcpcd", &[], &[
            ("reason", "BOUND"), ("interface", "eth1"), ("new_ip_address", "0.0.0.0"),
            ("new_subnet_cidr", "24"), ("new_routers", "10.98.1.1"),
        ]),
    };
    #[cfg(feature = "netns")]
    gate_lease_unspecified_udhcpc => Row {
        name: "gate_lease_unspecified_udhcpc",
        fault: "the same lease through udhcpc (`bound`, `ip=0.0.0.0 subnet=255.255.255.0`)",
        does: "the udhcpc shim refuses the lease the same way",
        exit: Some(2),
        kernel: Kernel::Exactly { rules: &[], routes: &[], addresses: &[] },
        files: &[FileWant::Absent(STATE)],
        log: "udhcpc variable ip: refused as a leased address: unspecified (0.0.0.0/32)",
        not_in_log: "",
        max_secs: 3.0,
        run: || gate_shim("fg0u", "leasehook-udhcpc", &["bound"], &[
            ("interface", "eth1"), ("ip", "0.0.0.0"), ("subnet", "255.255.255.0"),
            ("router", "10.98.1.1"),
        ]),
    };
    #[cfg(feature = "netns")]
    gate_lease_primary_address => Row {
        name: "gate_lease_primary_address",
        fault: "a RENEW on eth1 leasing the primary's address `10.98.0.10`, and IMDS lists it in eth1's `local-ipv4s` too",
        does: "refuses the lease and the address (eth0 holds it, the kernel says): the IPv4 family is left as it was, the refusal recorded",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Holds(STATE, "\"owner\":\"eth0\"")],
        log: "eth1: refused lease 10.98.0.10: eth0 holds 10.98.0.10: another NIC's address",
        not_in_log: "",
        max_secs: 3.0,
        run: run_gate_lease_primary_address,
    };
    #[cfg(feature = "netns")]
    gate_local_ipv4s_hostile => Row {
        name: "gate_local_ipv4s_hostile",
        fault: "IMDS `local-ipv4s` of eth1: `10.98.1.20`, `127.0.0.1`, `255.255.255.255`, `169.254.169.254` (BOUND)",
        does: "refuses each hostile value by value and reason: no rule and no /32 for them; the leased address's rule and routes stay",
        exit: Some(0),
        kernel: Kernel::Exactly {
            rules: &["10001 from 10.98.1.20 lookup 10001 proto 176"],
            routes: BASE_ROUTES,
            addresses: &[],
        },
        files: &[FileWant::Holds(STATE, "\"kind\":\"metadata-service\"")],
        log: "eth1: refused local-ipv4s 169.254.169.254: the metadata service's address 169.254.169.254",
        not_in_log: "",
        max_secs: 3.0,
        run: || gate_bound(
            "fglocal",
            &[(MAC1, "local-ipv4s", "10.98.1.20\n127.0.0.1\n255.255.255.255\n169.254.169.254")],
            &[],
        ),
    };
    #[cfg(feature = "netns")]
    gate_prefix_halves => Row {
        name: "gate_prefix_halves",
        fault: "IMDS `ipv4-prefix` of eth1: `0.0.0.0/1` and `128.0.0.0/1` (BOUND)",
        does: "refuses both halves of everything; applies the rest of the plan",
        exit: Some(0),
        kernel: Kernel::Exactly {
            rules: BASE_RULES,
            routes: BASE_ROUTES,
            addresses: &["eth1 10.98.1.21/32"],
        },
        files: &[FileWant::Holds(STATE, "0.0.0.0/1")],
        log: "eth1: refused ipv4-prefix 128.0.0.0/1: covers multicast (224.0.0.0/4)",
        not_in_log: "",
        max_secs: 3.0,
        run: || gate_bound("fghalf", &[(MAC1, "ipv4-prefix", "0.0.0.0/1\n128.0.0.0/1")], &[]),
    };
    #[cfg(feature = "netns")]
    gate_primary_subnet_on_secondary => Row {
        name: "gate_primary_subnet_on_secondary",
        fault: "IMDS `ipv4-prefix` of eth1: the primary's subnet `10.98.0.0/24` (BOUND)",
        does: "refuses it (eth0 holds 10.98.0.10 in it); applies the rest of the plan",
        exit: Some(0),
        kernel: Kernel::Exactly {
            rules: BASE_RULES,
            routes: BASE_ROUTES,
            addresses: &["eth1 10.98.1.21/32"],
        },
        files: &[FileWant::Holds(STATE, "10.98.0.0/24")],
        log: "eth1: refused ipv4-prefix 10.98.0.0/24: eth0 holds 10.98.0.10: another NIC's address",
        not_in_log: "",
        max_secs: 3.0,
        run: || gate_bound("fgpsub", &[(MAC1, "ipv4-prefix", "10.98.0.0/24")], &[]),
    };
    #[cfg(feature = "netns")]
    gate_two_nics_one_device_number => Row {
        name: "gate_two_nics_one_device_number",
        fault: "two NICs with one device-number: eth1 applied (device-number 1), then eth2 `02:00:00:00:00:03` (10.98.2.30, device-number 1 too) sends BOUND",
        does: "a conflict: eth2 gets nothing and eth1's rules are not touched; the error and `leasehook status` name both",
        exit: Some(1),
        kernel: Kernel::AsBefore,
        files: &[
            FileWant::Unchanged(STATE),
            FileWant::Holds("run/leasehook/iface/eth2.json", "\"kind\":\"table-claimed\""),
        ],
        log: "refused: device-number 1: gives table 10001, which eth1 claims too: neither NIC's rules are touched",
        not_in_log: "",
        max_secs: 3.0,
        run: run_gate_two_nics_one_device_number,
    };
    #[cfg(feature = "netns")]
    gate_from_all_rule_removed => Row {
        name: "gate_from_all_rule_removed",
        fault: "a `from all lookup 10001 proto 176` rule of leasehook's (an older version's), then BOUND",
        does: "the rule reader sees it (a rule of ours without a source): the diff removes it and the plan applies",
        exit: Some(0),
        kernel: Kernel::Exactly {
            rules: BASE_RULES,
            routes: BASE_ROUTES,
            addresses: &["eth1 10.98.1.21/32"],
        },
        files: &[FileWant::Holds(STATE, "10.98.1.20/32")],
        log: "6 change(s) for eth1 IPv4",
        not_in_log: "in the way",
        max_secs: 3.0,
        run: || foreign_then_bound(&["rule", "add", "from", "all", "lookup", "10001", "priority", "10001", "proto", "176"]),
    };
    #[cfg(feature = "netns")]
    gate_from_all_rule_flushed => Row {
        name: "gate_from_all_rule_flushed",
        fault: "the same `from all` rule of leasehook's, then `leasehook flush`",
        does: "flush finds and removes it",
        exit: Some(0),
        kernel: Kernel::Exactly { rules: &[], routes: &[], addresses: &[] },
        files: &[],
        log: "1 change(s): 0 added, 1 removed",
        not_in_log: "",
        max_secs: 3.0,
        run: run_gate_from_all_rule_flushed,
    };

    // --- Issue 18, items 5-10: bounded hooks ---------------------------------------
    #[cfg(feature = "netns")]
    bound_token_dance => Row {
        name: "bound_token_dance",
        fault: "IMDS slow and refusing the cached token: every answer takes 1.5 s, the stale token gets a 401 (401, token PUT, GET again), the budget is 1 s",
        does: "the token dance is one request: all of it ends within one request timeout (2 s), so the DHCP client is held at most the budget plus 2 s; keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "timed out (whole request",
        not_in_log: "",
        max_secs: 3.5,
        run: || imds_renew(&Imds::Scenario(json!({"rules": [{"path": "/latest", "delay": 1.5}]})), None),
    };
    #[cfg(feature = "netns")]
    bound_no_request_after_budget => Row {
        name: "bound_no_request_after_budget",
        fault: "IMDS answers 500 after 0.9 s, then never answers; the budget is 1 s",
        does: "no request starts once the budget is spent (nor after a pause that would end after it): one request, then the last applied state is kept",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "HTTP 500; keeping the last applied state",
        not_in_log: "timed out",
        max_secs: 2.0,
        run: run_no_request_after_budget,
    };
    #[cfg(feature = "netns")]
    bound_fifo_generation => Row {
        name: "bound_fifo_generation",
        fault: "a FIFO at `run/leasehook/generation/eth1` (RENEW)",
        does: "never opens it blocking: the counter is unreadable, so it starts again and the FIFO is replaced by a file; the event applies",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Holds("run/leasehook/generation/eth1", "1")],
        log: "generation/eth1\": is a special file; the event counter starts again",
        not_in_log: "",
        max_secs: 3.0,
        run: || run_planted(Plant::Fifo("run/leasehook/generation/eth1")),
    };
    #[cfg(feature = "netns")]
    bound_fifo_lock => Row {
        name: "bound_fifo_lock",
        fault: "a FIFO at `run/leasehook/lock/eth1.lock` (RENEW)",
        does: "refuses the lock file at once with an error naming it (a lock it cannot trust is never taken or replaced); nothing changed",
        exit: Some(1),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "lock/eth1.lock\": is a special file",
        not_in_log: "",
        max_secs: 3.0,
        run: || run_planted(Plant::Fifo("run/leasehook/lock/eth1.lock")),
    };
    #[cfg(feature = "netns")]
    bound_fifo_refreshed_stamp => Row {
        name: "bound_fifo_refreshed_stamp",
        fault: "a FIFO at `run/leasehook/refreshed/eth1`, then `leasehook refresh`",
        does: "never opens the stamp blocking: it is refused (logged) and the refresh goes on; IMDS agrees, so nothing changes",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "refreshed/eth1\": is a special file",
        not_in_log: "",
        max_secs: 3.0,
        run: run_fifo_refreshed_stamp,
    };
    #[cfg(feature = "netns")]
    bound_symlinked_run_dir => Row {
        name: "bound_symlinked_run_dir",
        fault: "`run/leasehook` is a symlink to another folder (RENEW)",
        does: "refuses it with an error naming it; nothing is read or written through it, nothing changed",
        exit: Some(1),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Absent("outside/lock"), FileWant::Absent("outside/generation"), FileWant::Absent("outside/iface")],
        log: "run/leasehook\": is a symlink, which is never followed; refusing to use it",
        not_in_log: "",
        max_secs: 3.0,
        run: || run_planted(Plant::SymlinkedRunDir),
    };
    #[cfg(feature = "netns")]
    bound_huge_state => Row {
        name: "bound_huge_state",
        fault: "`run/leasehook/iface/eth1.json` is 1.5 GB (sparse) and `run/leasehook/generation/eth1` a symlink to `/dev/zero` (RENEW)",
        does: "reads neither: the state file is refused by its size and set aside, the link is not followed; the kernel, observed, needs no change, and the state is recorded again",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[
            FileWant::Holds(STATE, "10.98.1.21/32"),
            FileWant::Holds("run/leasehook/iface/eth1.json.corrupt", ""),
        ],
        log: "is larger than 4194304 bytes; set aside",
        not_in_log: "",
        max_secs: 3.0,
        run: || run_planted(Plant::HugeState),
    };
    #[cfg(feature = "netns")]
    bound_lock_held_by_stopped_worker => Row {
        name: "bound_lock_held_by_stopped_worker",
        fault: "the interface's lock is held by a SIGSTOPped worker (RENEW with a new address; synchronous budget 1 s, total 15 s)",
        does: "signals the worker once, waits for the lock for the synchronous budget, then queues the event for a worker; once the lock is free the worker applies the new address",
        exit: Some(0),
        kernel: Kernel::Exactly {
            rules: &[
                "10001 from 10.98.1.20 lookup 10001 proto 176",
                "10001 from 10.98.1.21 lookup 10001 proto 176",
                "10001 from 10.98.1.22 lookup 10001 proto 176",
            ],
            routes: BASE_ROUTES,
            addresses: &["eth1 10.98.1.21/32", "eth1 10.98.1.22/32"],
        },
        files: &[FileWant::Holds(STATE, "10.98.1.22/32"), FileWant::Absent("run/leasehook/pending/eth1.json")],
        log: "the interface's lock is still held after 1000 ms",
        not_in_log: "",
        max_secs: 2.0,
        run: run_lock_held_by_stopped_worker,
    };
    #[cfg(feature = "netns")]
    bound_release_run_dir_full => Row {
        name: "bound_release_run_dir_full",
        fault: "`run/leasehook` full (a full tmpfs) at RELEASE",
        does: "the event counter cannot be written, which is logged; the removal goes on: every object of the lease and its state file are removed",
        exit: Some(0),
        kernel: Kernel::Exactly { rules: &[], routes: &[], addresses: &[] },
        files: &[FileWant::Absent(STATE)],
        log: "No space left on device (os error 28); going on without the event counter",
        not_in_log: "",
        max_secs: 3.0,
        run: run_release_run_dir_full,
    };
    #[cfg(feature = "netns")]
    bound_config_not_yaml => Row {
        name: "bound_config_not_yaml",
        fault: "`LEASEHOOK_CONFIG` names a file that is not leasehook's YAML (a copy of a shadow file)",
        does: "refuses the configuration, quoting only the position and what is wrong, never the file's content; nothing done",
        exit: Some(2),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "an unknown field (not shown: it is not a key name)",
        not_in_log: "FAKEHASH",
        max_secs: 3.0,
        run: run_config_not_yaml,
    };
    #[cfg(feature = "netns")]
    bound_stderr_read_to_end => Row {
        name: "bound_stderr_read_to_end",
        fault: "the caller reads the shim's standard error (a pipe) to its end while a worker waits (BOUND on a new ENI whose subnet IMDS never serves; total budget 15 s)",
        does: "the worker does not inherit the pipe: the caller's read ends when the shim exits, after the synchronous budget",
        exit: Some(0),
        kernel: Kernel::Exactly { rules: &[], routes: &[], addresses: &[] },
        files: &[FileWant::Holds("run/leasehook/pending/eth1.json", "\"pid\":")],
        log: "finishes the wait",
        not_in_log: "",
        max_secs: 3.0,
        run: run_stderr_read_to_end,
    };
    // --- Google Compute Engine, through leasehook-dhclient (issue 21; RENEW after
    // a good BOUND, `provider: gce`) ----------------------------------------------
    #[cfg(feature = "netns")]
    gce_down => Row {
        name: "gce_down",
        fault: "GCE metadata server down (connection refused)",
        does: "retries with backoff for the budget, then keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "Connection refused (os error 111); keeping the last applied state",
        not_in_log: "",
        max_secs: 4.0,
        run: || gce_renew(None),
    };
    #[cfg(feature = "netns")]
    gce_403 => Row {
        name: "gce_403",
        fault: "GCE metadata server answers 403 (the header refused)",
        does: "an error waiting cannot fix: keeps the last applied state at once",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "network-interfaces/?recursive=true: HTTP 403; keeping the last applied state",
        not_in_log: "",
        max_secs: 4.0,
        run: || gce_renew(Some(json!({"rules": [{"path": "/computeMetadata", "status": 403}]}))),
    };
    #[cfg(feature = "netns")]
    gce_400 => Row {
        name: "gce_400",
        fault: "GCE metadata server answers 400",
        does: "an error waiting cannot fix: keeps the last applied state at once",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "network-interfaces/?recursive=true: HTTP 400; keeping the last applied state",
        not_in_log: "",
        max_secs: 4.0,
        run: || gce_renew(Some(json!({"rules": [{"path": "/computeMetadata", "status": 400}]}))),
    };
    #[cfg(feature = "netns")]
    gce_429 => Row {
        name: "gce_429",
        fault: "GCE metadata server answers 429 for the whole budget",
        does: "retries with backoff for the budget, then keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "HTTP 429; keeping the last applied state",
        not_in_log: "",
        max_secs: 4.0,
        run: || gce_renew(Some(json!({"rules": [{"path": "/computeMetadata", "status": 429}]}))),
    };
    #[cfg(feature = "netns")]
    gce_garbage => Row {
        name: "gce_garbage",
        fault: "GCE metadata server answers bytes that are not JSON",
        does: "refuses the answer at once; keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "unusable answer: not UTF-8 (byte 0); keeping the last applied state",
        not_in_log: "",
        max_secs: 4.0,
        run: || gce_renew(Some(json!({"rules": [{"path": "/computeMetadata", "action": "garbage"}]}))),
    };
    #[cfg(feature = "netns")]
    gce_no_flavor => Row {
        name: "gce_no_flavor",
        fault: "an answer without `Metadata-Flavor: Google` (not Google's server)",
        does: "refuses the answer at once; keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "not Google's metadata server; keeping the last applied state",
        not_in_log: "",
        max_secs: 4.0,
        run: || gce_renew(Some(json!({"rules": [{"path": "/computeMetadata", "action": "no-flavor"}]}))),
    };
    #[cfg(feature = "netns")]
    gce_slow => Row {
        name: "gce_slow",
        fault: "GCE metadata server slow: its answer takes 1.5 s, the budget is 1 s",
        does: "the round's one request finishes within its 2 s timeout and counts: the metadata agrees, nothing to change",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Holds(STATE, "\"table\":10001")],
        log: "IMDS agrees with the lease after 1 round(s), 1 request(s)",
        not_in_log: "",
        max_secs: 4.0,
        run: || gce_renew(Some(json!({"rules": [{"path": "/computeMetadata", "delay": 1.5}]}))),
    };
    // --- issue 30: links (items 1, 4, 5): which link is a NIC, which NIC has no
    // DHCP, and an empty result is never final (`leasehook refresh`) -------------
    #[cfg(feature = "netns")]
    links_oci_zero_mac => Row {
        name: "links_oci_zero_mac",
        fault: "OCI lists a secondary VNIC with `\"macAddr\":\"00:00:00:00:00:00\"` (privateIp 10.200.0.5, subnetCidrBlock 10.0.0.0/8) at `leasehook refresh`",
        does: "refuses it (an all-zero MAC is nobody's; `lo` is no NIC): `lo` holds only 127.0.0.1/8 and ::1/128, `ip route get` of the gateway 10.98.0.1 and of 10.77.0.9 (another subnet) still answers `unicast dev eth0`; eth1 stays as it was",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE), FileWant::Absent("run/leasehook/iface/lo.json")],
        log: "00:00:00:00:00:00: listed without DHCP, refused: an all-zero MAC is nobody's",
        not_in_log: "lo: no DHCP",
        max_secs: 3.5,
        run: run_links_oci_zero_mac,
    };
    #[cfg(feature = "netns")]
    links_openstack_zero_mac => Row {
        name: "links_openstack_zero_mac",
        fault: "OpenStack `network_data.json` with a static `ipv4` network (10.200.0.5, netmask 255.0.0.0) on a link whose `ethernet_mac_address` is 00:00:00:00:00:00, at `leasehook refresh`",
        does: "refuses it (an all-zero MAC is nobody's; `lo` is no NIC): `lo` holds only 127.0.0.1/8 and ::1/128, `ip route get` of the gateway 10.98.0.1 and of 10.77.0.9 still answers `unicast dev eth0`; eth1's DHCP plan stays",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE), FileWant::Absent("run/leasehook/iface/lo.json")],
        log: "00:00:00:00:00:00: listed without DHCP, refused: an all-zero MAC is nobody's",
        not_in_log: "lo: no DHCP",
        max_secs: 3.5,
        run: run_links_openstack_zero_mac,
    };
    #[cfg(feature = "netns")]
    links_oci_dhcp_primary_listed_second => Row {
        name: "links_oci_dhcp_primary_listed_second",
        fault: "OCI lists eth0's MAC (its DHCP lease recorded by the hook) as a secondary VNIC, the first entry a MAC no NIC has",
        does: "eth0 stays the primary (OCI's DHCP serves the primary VNIC only; a NIC with a DHCP lease is never one without DHCP): no metadata address, no rules, no table on eth0; eth1 stays as it was",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE), FileWant::Unchanged("run/leasehook/iface/eth0.json")],
        log: "eth0: 0 change(s)",
        not_in_log: "eth0: no DHCP",
        max_secs: 3.5,
        run: run_links_oci_dhcp_primary_listed_second,
    };
    #[cfg(feature = "netns")]
    links_oci_refused_vnic_stays_down => Row {
        name: "links_oci_refused_vnic_stays_down",
        fault: "OCI lists eth1 (down, no address) with every value refused by the gate (privateIp 169.254.169.254, the metadata service's)",
        does: "configures nothing: eth1 is not brought up (still down), nothing is recorded, so the next refresh asks again",
        exit: Some(0),
        kernel: Kernel::Exactly { rules: &[], routes: &[], addresses: &[] },
        files: &[FileWant::Absent(STATE)],
        log: "eth1: unchanged (no DHCP, but nothing to configure from the metadata",
        not_in_log: "eth1: brought up",
        max_secs: 3.5,
        run: run_links_oci_refused_vnic_stays_down,
    };
    #[cfg(feature = "netns")]
    links_oci_refused_then_good => Row {
        name: "links_oci_refused_then_good",
        fault: "a refresh that saw every value of eth1 (no DHCP) refused, then a refresh whose metadata is good",
        does: "the second refresh configures eth1 (no empty state was recorded): brought up, 10.98.1.20/24, its rule and table; `ip route get 10.77.0.9 from 10.98.1.20` leaves by eth1 via 10.98.1.1",
        exit: Some(0),
        kernel: Kernel::Exactly { rules: ORACLE_RULES, routes: LINKS_ROUTES, addresses: &[] },
        files: &[FileWant::Holds(STATE, "\"reason\":\"metadata\"")],
        log: "eth1: no DHCP, configured from the metadata",
        not_in_log: "no lease recorded",
        max_secs: 3.5,
        run: || run_links_refused_then_good(Links::Oracle(LinksFirst::Refused)),
    };
    #[cfg(feature = "netns")]
    links_oci_slot_collision_then_detached => Row {
        name: "links_oci_slot_collision_then_detached",
        fault: "OCI lists eth1 with another VNIC whose MAC has eth1's slot (table), then that VNIC is detached",
        does: "the first refresh refuses eth1 the shared table and records nothing; the next one configures eth1: 10.98.1.20/24, its rule and table",
        exit: Some(0),
        kernel: Kernel::Exactly { rules: ORACLE_RULES, routes: LINKS_ROUTES, addresses: &[] },
        files: &[FileWant::Holds(STATE, "\"reason\":\"metadata\"")],
        log: "eth1: no DHCP, configured from the metadata",
        not_in_log: "no lease recorded",
        max_secs: 3.5,
        run: || run_links_refused_then_good(Links::Oracle(LinksFirst::SlotTaken)),
    };
    #[cfg(feature = "netns")]
    links_openstack_static_refused_then_good => Row {
        name: "links_openstack_static_refused_then_good",
        fault: "OpenStack: a refresh that saw eth1's static `ipv4` network refused (ip_address 169.254.169.254), then one whose static network is good (10.98.1.20/24, default gateway 10.98.1.1)",
        does: "the second refresh configures eth1 (no empty state was recorded): 10.98.1.20/24, its rule and table; `ip route get 10.77.0.9 from 10.98.1.20` leaves by eth1 via 10.98.1.1",
        exit: Some(0),
        kernel: Kernel::Exactly { rules: OPENSTACK_RULES, routes: LINKS_ROUTES, addresses: &[] },
        files: &[FileWant::Holds(STATE, "\"reason\":\"metadata\"")],
        log: "eth1: no DHCP, configured from the metadata",
        not_in_log: "no lease recorded",
        max_secs: 3.5,
        run: || run_links_refused_then_good(Links::OpenStack),
    };
    // --- issue 30: gate — a router's address, a wide subnet, OpenStack next hops -----
    #[cfg(feature = "netns")]
    gate30_ec2_router_in_local_ipv4s => Row {
        name: "gate30_ec2_router_in_local_ipv4s",
        fault: "EC2 IMDS lists the lease's router among eth1's addresses (`local-ipv4s: [10.98.1.20, 10.98.1.1]`), BOUND",
        does: "refuses 10.98.1.1 as an address and a rule source, applies the rest; `ip route get 10.98.1.1` leaves by eth1, never `local`",
        exit: Some(0),
        kernel: Kernel::Exactly {
            rules: &["10001 from 10.98.1.20 lookup 10001 proto 176"],
            routes: BASE_ROUTES,
            addresses: &[],
        },
        files: &[FileWant::Holds(STATE, "\"kind\":\"router\"")],
        log: "eth1: refused local-ipv4s 10.98.1.1: 10.98.1.1 is a router (eth1's lease router), never an address of this host",
        not_in_log: "",
        max_secs: 3.0,
        run: run_gate30_ec2_router,
    };
    #[cfg(feature = "netns")]
    gate30_aliyun_own_gateway => Row {
        name: "gate30_aliyun_own_gateway",
        fault: "Alibaba ECS metadata lists eth1's own `gateway` in its `private-ipv4s` (`[\"10.98.1.20\",\"10.98.1.1\"]`), BOUND",
        does: "refuses 10.98.1.1 as an address and a rule source, applies the rest; `ip route get 10.98.1.1` leaves by eth1, never `local`",
        exit: Some(0),
        kernel: Kernel::Exactly {
            rules: &["19872 from 10.98.1.20 lookup 19872 proto 176"],
            routes: &[
                "10.98.1.0/24 via - dev eth1 scope link src 10.98.1.20 table 19872 proto 176",
                "default via 10.98.1.1 dev eth1 scope - src - table 19872 proto 176",
            ],
            addresses: &[],
        },
        files: &[FileWant::Holds(STATE, "\"kind\":\"router\"")],
        log: "eth1: refused local-ipv4s 10.98.1.1: 10.98.1.1 is a router (",
        not_in_log: "",
        max_secs: 3.0,
        run: run_gate30_aliyun_gateway,
    };
    #[cfg(feature = "netns")]
    gate30_oracle_private_ip_is_default_gateway => Row {
        name: "gate30_oracle_private_ip_is_default_gateway",
        fault: "OCI lists a secondary VNIC whose `privateIp` is the host's default gateway (10.98.0.1, `default via 10.98.0.1 dev eth0` in main), at `leasehook refresh`",
        does: "refuses the VNIC's address (a router's): eth1 gets no address, rule or route; `ip route get 10.98.0.1` leaves by eth0, never `local`",
        exit: Some(0),
        kernel: Kernel::Exactly { rules: &[], routes: &[], addresses: &[] },
        files: &[],
        log: "eth1: refused lease 10.98.0.1: 10.98.0.1 is a router (",
        not_in_log: "",
        max_secs: 3.5,
        run: || run_gate30_oracle(&[("10.98.0.1", "10.98.0.0/24", "10.98.0.5")], "10.98.0.1"),
    };
    #[cfg(feature = "netns")]
    gate30_oracle_router_swapped => Row {
        name: "gate30_oracle_router_swapped",
        fault: "OCI lists eth1's VNIC with `privateIp` and `virtualRouterIp` swapped (`privateIp` 10.98.1.1, `virtualRouterIp` 10.98.1.20), at `leasehook refresh`",
        does: "refuses the VNIC's address (its subnet's first host, OCI's virtual router): eth1 gets no address, rule or route; `ip route get 10.98.1.1` is never `local`",
        exit: Some(0),
        kernel: Kernel::Exactly { rules: &[], routes: &[], addresses: &[] },
        files: &[],
        log: "eth1: refused lease 10.98.1.1: 10.98.1.1 is a router (the metadata's gateway of eth1)",
        not_in_log: "",
        max_secs: 3.5,
        run: || run_gate30_oracle(&[("10.98.1.1", "10.98.1.0/24", "10.98.1.20")], "10.98.1.1"),
    };
    #[cfg(feature = "netns")]
    gate30_oracle_wide_subnet => Row {
        name: "gate30_oracle_wide_subnet",
        fault: "OCI lists eth1's VNIC in `subnetCidrBlock` 10.0.0.0/8, at `leasehook refresh` (`default via 10.98.0.1 dev eth0` in main)",
        does: "adds 10.98.1.20/8 `noprefixroute`: the /8's route is in eth1's table only, main gets none; `ip route get 10.5.0.9` (another subnet's host) leaves by eth0",
        exit: Some(0),
        kernel: Kernel::Exactly {
            rules: &["19872 from 10.98.1.20 lookup 19872 proto 176"],
            routes: &[
                "10.0.0.0/8 via - dev eth1 scope link src 10.98.1.20 table 19872 proto 176",
                "default via 10.98.1.1 dev eth1 scope - src - table 19872 proto 176",
            ],
            addresses: &[],
        },
        files: &[FileWant::Holds(STATE, "10.98.1.20/8")],
        log: "eth1: no DHCP on this NIC; configured from the metadata (4 change(s))",
        not_in_log: "",
        max_secs: 3.5,
        run: run_gate30_oracle_wide,
    };
    #[cfg(feature = "netns")]
    gate30_ec2_cloud_init_wide_subnet => Row {
        name: "gate30_ec2_cloud_init_wide_subnet",
        fault: "EC2 with `profile: cloud-init` and eth1's `subnet-ipv4-cidr-block` 10.0.0.0/8 (`local-ipv4s: [10.98.1.20, 10.98.1.21]`), BOUND",
        does: "adds 10.98.1.21/8 `noprefixroute` (cloud-init's length): 10.0.0.0/8 goes into table 101 only (the row checks table 101; the kernel column lists tables from 10000), main gets none; `ip route get 10.5.0.9` leaves by eth0",
        exit: Some(0),
        kernel: Kernel::Exactly { rules: &[], routes: &[], addresses: &[] },
        files: &[FileWant::Holds(STATE, "10.98.1.21/8")],
        log: "5 change(s) for eth1 IPv4",
        not_in_log: "",
        max_secs: 3.0,
        run: run_gate30_cloud_init_wide,
    };
    #[cfg(feature = "netns")]
    gate30_openstack_address_is_route_gateway => Row {
        name: "gate30_openstack_address_is_route_gateway",
        fault: "OpenStack static `ipv4` network on eth1 whose `ip_address` is its route's `gateway` (10.98.1.1), at `leasehook refresh`",
        does: "refuses the address (a router's): eth1 gets no address, rule or route; `ip route get 10.98.1.1` is never `local`",
        exit: Some(0),
        kernel: Kernel::Exactly { rules: &[], routes: &[], addresses: &[] },
        files: &[],
        log: "eth1: refused lease 10.98.1.1: 10.98.1.1 is a router (",
        not_in_log: "",
        max_secs: 3.5,
        run: || run_gate30_openstack(&json!({
            "id": "network1", "type": "ipv4", "link": "tap0b0b0b0b-01",
            "ip_address": "10.98.1.1", "netmask": "255.255.255.0",
            "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.98.1.1"}]}), "10.98.1.1"),
    };
    #[cfg(feature = "netns")]
    gate30_openstack_bad_next_hops => Row {
        name: "gate30_openstack_bad_next_hops",
        fault: "OpenStack static `ipv4` network on eth1 (10.98.1.20/24) whose default route's gateway is off its subnet (192.168.5.1) and whose other route goes via its own address, at `leasehook refresh`",
        does: "refuses both next hops, with their reasons; adds the address, its subnet route and rule only",
        exit: Some(0),
        kernel: Kernel::Exactly {
            rules: &["19872 from 10.98.1.20 lookup 19872 proto 176"],
            routes: &["10.98.1.0/24 via - dev eth1 scope link src 10.98.1.20 table 19872 proto 176"],
            addresses: &[],
        },
        files: &[FileWant::Holds(STATE, "\"kind\":\"local-next-hop\"")],
        log: "eth1: refused router 192.168.5.1: not inside the NIC's subnet (10.98.1.0/24)",
        not_in_log: "",
        max_secs: 3.5,
        run: || run_gate30_openstack(&json!({
            "id": "network1", "type": "ipv4", "link": "tap0b0b0b0b-01",
            "ip_address": "10.98.1.20", "netmask": "255.255.255.0",
            "routes": [
                {"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "192.168.5.1"},
                {"network": "198.51.100.0", "netmask": "255.255.255.0", "gateway": "10.98.1.20"}
            ]}), "10.98.1.1"),
    };
}

/// Every row: the main table, then each cloud's own (issue 21).
fn every_row() -> Vec<&'static Row> {
    ROWS.iter()
        .chain(ALIYUN_ROWS)
        .chain(ORACLE_ROWS)
        .chain(OPENSTACK_ROWS)
        .chain(BOUNDS_ROWS)
        .collect()
}

#[test]
fn docs_list_every_row_exactly() {
    let path = workspace_root().join("docs/faults.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let mut missing = String::new();
    for row in every_row() {
        let line = row.doc_line();
        if !doc.lines().any(|l| l == line) {
            let _ = writeln!(missing, "{line}");
        }
    }
    assert!(
        missing.is_empty(),
        "docs/faults.md lacks these rows (or has them worded otherwise):\n{missing}"
    );
    let table_rows = doc
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| fault ") && !l.starts_with("|---"))
        .count();
    assert_eq!(
        table_rows,
        every_row().len(),
        "docs/faults.md has rows the test does not"
    );
}

// --- Processes and logs ----------------------------------------------------------

/// A child process, killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `cmd` and reads its first line (the address it bound).
fn start_with_addr(cmd: Command, what: &str) -> (Proc, String) {
    let (child, addr) = start_first_line(cmd, what);
    (Proc(child), addr)
}

/// The argument prefix that makes a binary log to standard error: the logger
/// prefers syslog when `/dev/log` exists, so the command runs in a private mount
/// namespace where `/dev/log` is `/dev/null` (connecting to it fails). Empty when
/// there is no `/dev/log`.
fn log_to_stderr() -> Vec<OsString> {
    if !Path::new("/dev/log").exists() {
        return Vec::new();
    }
    [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        "mount --bind /dev/null /dev/log && exec \"$@\"",
        "sh",
    ]
    .iter()
    .map(OsString::from)
    .collect()
}

/// A command running `program` with the log on standard error, inside `ns` when
/// given, under `wrap` (`setpriv ...`), with exactly the environment `env` when
/// given (dhclient-script's is clean).
fn command(
    ns: Option<&Netns>,
    env: Option<&[(String, String)]>,
    wrap: &[&str],
    program: &Path,
) -> Command {
    let mut argv: Vec<OsString> = Vec::new();
    if let Some(ns) = ns {
        argv.extend(["ip", "netns", "exec", ns.name.as_str()].map(OsString::from));
    }
    argv.extend(log_to_stderr());
    argv.extend(wrap.iter().map(OsString::from));
    if let Some(env) = env {
        argv.push("env".into());
        argv.push("-i".into());
        argv.extend(env.iter().map(|(k, v)| OsString::from(format!("{k}={v}"))));
    }
    argv.push(program.into());
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    cmd
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

// --- IMDS rows -------------------------------------------------------------------

/// A namespace with the instance's two NICs, addressed as dhclient leaves them
/// (eth0 10.98.0.10/24 primary, eth1 10.98.1.20/24 secondary), and a root.
struct Instance {
    imds: Option<Proc>,
    ns: Netns,
    dir: TempDir,
    root: PathBuf,
}

/// How IMDS misbehaves in the faulted run.
enum Imds {
    /// Not running: connections are refused.
    Down,
    /// The emulator with this scenario.
    Scenario(Value),
    /// Every connection reset.
    Reset,
}

impl Instance {
    fn new(tag: &str) -> Self {
        let ns = Netns::new(tag);
        for (n, mac) in [(0, MAC0), (1, MAC1)] {
            let eth = format!("eth{n}");
            ns.veth(&eth, mac, &format!("vpc{n}"));
            ns.ip(&[
                "address",
                "add",
                &format!("10.98.{n}.{}/24", 10 * (n + 1)),
                "dev",
                &eth,
            ]);
        }
        let dir = TempDir::new(tag);
        let root = dir.0.join("root");
        std::fs::create_dir_all(&root).unwrap();
        Self {
            imds: None,
            ns,
            dir,
            root,
        }
    }

    /// (Re)starts IMDS inside the namespace; returns its base URL.
    fn start_imds(&mut self, tree: &Value, how: &Imds) -> String {
        self.imds = None;
        let log = self.dir.0.join("imds.log");
        let mut cmd = self
            .ns
            .command(sibling_bin("imds-emulator").to_str().unwrap());
        cmd.args(["--bind", "127.0.0.1:0", "--log"]).arg(&log);
        match how {
            Imds::Down => return "http://127.0.0.1:9".to_owned(),
            Imds::Reset => {
                cmd.arg("--reset");
            }
            Imds::Scenario(s) => {
                let t = self.dir.file("tree.json", &tree.to_string());
                let sc = self.dir.file("scenario.json", &s.to_string());
                cmd.arg("--require-token")
                    .arg("--tree")
                    .arg(t)
                    .arg("--scenario")
                    .arg(sc);
            }
        }
        let (p, addr) = start_with_addr(cmd, "imds-emulator");
        self.imds = Some(p);
        format!("http://{addr}")
    }

    /// Runs `leasehook-dhclient` for eth1's lease with `reason`, as dhclient-script
    /// would (a clean environment), against IMDS at `endpoint`.
    fn shim(&self, reason: &str, endpoint: &str) -> (Output, Duration) {
        self.shim_env(reason, endpoint, &[])
    }

    /// [`Instance::shim`] with `extra` variables set after the others (a later
    /// `env -i` assignment wins).
    fn shim_env(&self, reason: &str, endpoint: &str, extra: &[(&str, &str)]) -> (Output, Duration) {
        let mut env: Vec<(String, String)> = [
            ("reason", reason),
            ("interface", "eth1"),
            ("new_ip_address", "10.98.1.20"),
            ("new_subnet_mask", "255.255.255.0"),
            ("new_routers", "10.98.1.1"),
            ("new_network_number", "10.98.1.0"),
            ("new_broadcast_address", "10.98.1.255"),
            ("LEASEHOOK_IMDS_ENDPOINTS", endpoint),
            ("LEASEHOOK_IMDS_BIND_INTERFACE", "false"),
            ("LEASEHOOK_IMDS_SYNC_BUDGET_S", "1"),
            ("LEASEHOOK_IMDS_BUDGET_S", "1"),
            ("LEASEHOOK_LOG_LEVEL", "info"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        env.push(("LEASEHOOK_ROOT".to_owned(), self.root.display().to_string()));
        if reason == "RENEW" {
            for (k, v) in [
                ("old_ip_address", "10.98.1.20"),
                ("old_subnet_mask", "255.255.255.0"),
                ("old_routers", "10.98.1.1"),
            ] {
                env.push((k.to_owned(), v.to_owned()));
            }
        }
        env.extend(
            extra
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        let t = Instant::now();
        let out = command(
            Some(&self.ns),
            Some(&env),
            &[],
            &sibling_bin("leasehook-dhclient"),
        )
        .output()
        .unwrap();
        (out, t.elapsed())
    }

    /// BOUND with a healthy IMDS: the last good state every fault starts from.
    fn bound(&mut self) {
        let url = self.start_imds(&default_tree(), &Imds::Scenario(json!({})));
        let (out, _) = self.shim("BOUND", &url);
        assert!(out.status.success(), "BOUND failed: {}", text(&out));
        assert_eq!(
            snap(&self.ns).0,
            BASE_RULES,
            "BOUND did not apply the plan: {}",
            text(&out)
        );
        assert!(self.root.join(STATE).is_file());
        self.imds = None;
    }

    fn seen(
        self,
        out: &Output,
        elapsed: Duration,
        before: Snap,
        files: BTreeMap<PathBuf, Vec<u8>>,
    ) -> Seen {
        Seen {
            exit: out.status.code(),
            log: text(out),
            root: self.root.clone(),
            files_before: files,
            kernel_before: Some(before),
            kernel_after: Some(snap(&self.ns)),
            elapsed,
            keep: vec![Box::new(self)],
        }
    }
}

// --- Google Compute Engine (issue 21) ---------------------------------------------

impl Instance {
    /// (Re)starts the GCE metadata emulator inside the namespace with `scenario`;
    /// returns its base URL.
    fn start_gce(&mut self, scenario: &Value) -> String {
        self.imds = None;
        let mut cmd = self
            .ns
            .command(sibling_bin("gce-emulator").to_str().unwrap());
        cmd.args([
            "--bind",
            "127.0.0.1:0",
            "--scenario",
            &scenario.to_string(),
            "--log",
        ])
        .arg(self.dir.0.join("gce.log"));
        let (p, addr) = start_with_addr(cmd, "gce-emulator");
        self.imds = Some(p);
        format!("http://{addr}")
    }
}

/// A good BOUND with `provider: gce`, then a RENEW while the metadata server
/// misbehaves as `how` says (`None`: down).
fn gce_renew(how: Option<Value>) -> Seen {
    let mut i = Instance::new("fgce");
    let url = i.start_gce(&json!({}));
    let env = |url: &str| {
        [
            ("LEASEHOOK_PROVIDER", "gce"),
            ("LEASEHOOK_GCE_ENDPOINT", url),
        ]
        .map(|(k, v)| (k, v.to_owned()))
    };
    let good = env(&url);
    let good: Vec<(&str, &str)> = good.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (out, _) = i.shim_env("BOUND", "http://127.0.0.1:9", &good);
    assert!(out.status.success(), "BOUND failed: {}", text(&out));
    assert_eq!(
        snap(&i.ns).0,
        BASE_RULES,
        "BOUND did not apply the plan: {}",
        text(&out)
    );
    i.imds = None;
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = match how {
        Some(s) => i.start_gce(&s),
        None => "http://127.0.0.1:9".to_owned(),
    };
    let bad = env(&url);
    let bad: Vec<(&str, &str)> = bad.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (out, elapsed) = i.shim_env("RENEW", "http://127.0.0.1:9", &bad);
    i.seen(&out, elapsed, before, files)
}

fn tree_with_eth1_ips(ips: Option<&str>) -> Value {
    let mut t = default_tree();
    if let Some(ips) = ips {
        t["latest"]["meta-data"]["network"]["interfaces"]["macs"][MAC1]["local-ipv4s"] = json!(ips);
    }
    t
}

/// A good BOUND, then a RENEW while IMDS misbehaves (serving `ips` as eth1's
/// addresses when it answers at all).
fn imds_renew(how: &Imds, ips: Option<&str>) -> Seen {
    let mut i = Instance::new("fimds");
    i.bound();
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_imds(&tree_with_eth1_ips(ips), how);
    let (out, elapsed) = i.shim("RENEW", &url);
    i.seen(&out, elapsed, before, files)
}

fn run_imds_partial() -> Seen {
    let mut i = Instance::new("fpart");
    let mut tree = default_tree();
    tree["latest"]["meta-data"]["network"]["interfaces"]["macs"][MAC1]["subnet-ipv4-cidr-block"] =
        Value::Null;
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_imds(&tree, &Imds::Scenario(json!({})));
    let (out, elapsed) = i.shim("BOUND", &url);
    i.seen(&out, elapsed, before, files)
}

// --- Azure rows ------------------------------------------------------------------

impl Instance {
    /// Starts the Azure emulator inside the namespace (the world's VM, both NICs)
    /// with `scenario`, or none at all (`None`: connections refused); its URL.
    fn start_azure(&mut self, scenario: Option<&Value>) -> String {
        self.imds = None;
        let Some(scenario) = scenario else {
            return "http://127.0.0.1:9".to_owned();
        };
        let mut cmd = self
            .ns
            .command(sibling_bin("azure-emulator").to_str().unwrap());
        cmd.args(["--bind", "127.0.0.1:0", "--scenario"])
            .arg(scenario.to_string())
            .arg("--log")
            .arg(self.dir.0.join("azure-imds.log"));
        let (p, addr) = start_with_addr(cmd, "azure-emulator");
        self.imds = Some(p);
        format!("http://{addr}")
    }

    /// `leasehook-dhclient` for eth1 with `reason`, `provider: azure` at `url`,
    /// the whole wait (and the part the client waits for) `budget` seconds.
    fn azure_shim(&self, reason: &str, url: &str, budget: &str) -> (Output, Duration) {
        self.shim_env(
            reason,
            "http://127.0.0.1:9",
            &[
                ("LEASEHOOK_PROVIDER", "azure"),
                ("LEASEHOOK_AZURE_ENDPOINT", url),
                ("LEASEHOOK_IMDS_BUDGET_S", budget),
                ("LEASEHOOK_IMDS_SYNC_BUDGET_S", budget),
            ],
        )
    }
}

/// A good BOUND against a healthy Azure IMDS, then a RENEW (budget 1 s) while it
/// misbehaves as `scenario` says (`None`: down).
fn azure_renew(scenario: Option<&Value>) -> Seen {
    azure_renew_budget(scenario, "1")
}

fn azure_renew_budget(scenario: Option<&Value>, budget: &str) -> Seen {
    let mut i = Instance::new("fazure");
    let url = i.start_azure(Some(&json!({})));
    let (out, _) = i.azure_shim("BOUND", &url, "1");
    assert!(out.status.success(), "BOUND failed: {}", text(&out));
    assert_eq!(
        snap(&i.ns).0,
        BASE_RULES,
        "BOUND did not apply: {}",
        text(&out)
    );
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_azure(scenario);
    let (out, elapsed) = i.azure_shim("RENEW", &url, budget);
    i.seen(&out, elapsed, before, files)
}

// --- Kernel rows -------------------------------------------------------------------

/// Someone else adds `ip ARGS` in the namespace, then a BOUND with a healthy IMDS.
fn foreign_then_bound(args: &[&str]) -> Seen {
    let mut i = Instance::new("fforeign");
    i.ns.ip(args);
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_imds(&default_tree(), &Imds::Scenario(json!({})));
    // A budget the whole wait fits in on a loaded machine: the row is about the
    // folder, not the wait.
    let (out, elapsed) = i.shim_env(
        "BOUND",
        &url,
        &[
            ("LEASEHOOK_LOG_LEVEL", "debug"),
            ("LEASEHOOK_IMDS_BUDGET_S", "5"),
            ("LEASEHOOK_IMDS_SYNC_BUDGET_S", "5"),
        ],
    );
    i.seen(&out, elapsed, before, files)
}

/// Where a conflict is recorded (`leasehook_core::commit::CONFLICT`).
#[cfg(feature = "netns")]
const CONFLICT: &str = "run/leasehook/conflict/eth1";

/// A foreign route in eth1's table and amazon-ec2-net-utils' udev rule in the
/// root; BOUND (checked here: the conflict is an error naming the route, its
/// protocol and the tool) and RENEW (the row: a repeat, nothing tried).
#[cfg(feature = "netns")]
fn run_foreign_route_next_event() -> Seen {
    let mut i = Instance::new("fforeign2");
    i.ns.ip(&[
        "route",
        "add",
        "10.98.1.0/24",
        "dev",
        "eth1",
        "table",
        "10001",
        "proto",
        "static",
        "scope",
        "link",
        "src",
        "10.98.1.20",
    ]);
    let rule = i
        .root
        .join("usr/lib/udev/rules.d/99-vpc-policy-routes.rules");
    std::fs::create_dir_all(rule.parent().unwrap()).unwrap();
    std::fs::write(&rule, "SUBSYSTEM==\"net\", ACTION==\"add\"\n").unwrap();
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_imds(&default_tree(), &Imds::Scenario(json!({})));
    let env = [
        ("LEASEHOOK_LOG_LEVEL", "info"),
        ("LEASEHOOK_IMDS_BUDGET_S", "5"),
        ("LEASEHOOK_IMDS_SYNC_BUDGET_S", "5"),
    ];
    let (bound, _) = i.shim_env("BOUND", &url, &env);
    let log = text(&bound);
    assert_eq!(bound.status.code(), Some(1), "{log}");
    assert!(
        log.contains("route \"10.98.1.0/24 dev eth1 table 10001 proto static\" is in the way")
            && log.contains("amazon-ec2-net-utils's (found: ")
            && !log.contains("as at the last event"),
        "{log}"
    );
    let (renew, elapsed) = i.shim_env("RENEW", &url, &env);
    i.seen(&renew, elapsed, before, files)
}

/// Another tool's secondary address on eth1, then BOUND (checked here: leasehook's
/// rules and routes are in, the state does not claim the address) and RELEASE;
/// the row checks BOUND's log and the kernel after RELEASE.
fn foreign_address_bound_then_released() -> Seen {
    let mut i = Instance::new("faddr");
    i.ns.ip(&["address", "add", "10.98.1.21/32", "dev", "eth1"]);
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_imds(&default_tree(), &Imds::Scenario(json!({})));
    let (bound, elapsed) = i.shim("BOUND", &url);
    let (rules, routes, _) = snap(&i.ns);
    assert_eq!(rules.len(), 2, "{rules:?}\n{}", text(&bound));
    assert_eq!(routes.len(), 2, "{routes:?}");
    let state = std::fs::read_to_string(i.root.join(STATE)).unwrap();
    // The rule from the address is leasehook's; the address is not.
    assert!(state.contains("\"addresses\":[]"), "{state}");
    let (released, _) = i.shim("RELEASE", &url);
    assert_eq!(released.status.code(), Some(0), "{}", text(&released));
    i.seen(&bound, elapsed, before, files)
}

/// Runs `f` on a thread that entered `ns` first (setns(2) is per thread, and a
/// netlink socket belongs to the namespace it was created in).
fn in_netns<T: Send + 'static>(ns: &Netns, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = PathBuf::from("/run/netns").join(&ns.name);
    std::thread::spawn(move || {
        let fd = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        rustix::thread::move_into_link_name_space(
            std::os::fd::AsFd::as_fd(&fd),
            Some(rustix::thread::LinkNameSpaceType::Network),
        )
        .unwrap_or_else(|e| panic!("setns {path:?}: {e}"));
        f()
    })
    .join()
    .unwrap()
}

/// An applier that deletes eth1 right before the first write: after the plan was
/// validated against the links, before anything was written.
struct DeleteLinkFirst {
    inner: leasehook_core::apply::netlink::NetlinkApplier,
    ns: String,
    done: bool,
}

impl leasehook_core::apply::Applier for DeleteLinkFirst {
    fn links(&mut self) -> leasehook_core::error::Result<Vec<leasehook_core::apply::KernelLink>> {
        self.inner.links()
    }
    fn observe(
        &mut self,
        links: &leasehook_core::apply::LinkIndex,
        recorded: &std::collections::BTreeSet<leasehook_core::model::Address>,
    ) -> leasehook_core::error::Result<leasehook_core::apply::Observed> {
        self.inner.observe(links, recorded)
    }
    fn execute(
        &mut self,
        op: &leasehook_core::diff::Op,
        links: &leasehook_core::apply::LinkIndex,
    ) -> leasehook_core::error::Result<()> {
        self.execute_many(std::slice::from_ref(op), links)
            .pop()
            .unwrap_or(Ok(()))
    }
    fn execute_many(
        &mut self,
        ops: &[leasehook_core::diff::Op],
        links: &leasehook_core::apply::LinkIndex,
    ) -> Vec<leasehook_core::error::Result<()>> {
        if !self.done {
            self.done = true;
            run(Command::new("ip").args(["-n", &self.ns, "link", "del", "eth1"]));
        }
        self.inner.execute_many(ops, links)
    }
}

fn run_link_deleted_before_apply() -> Seen {
    use leasehook_core::apply::{self, state};
    let i = Instance::new("flink");
    // The plan, as the hook makes it: eth1's lease and the world's metadata.
    let plan_out = run(Command::new(leasehook_bin())
        .arg("plan")
        .arg("--metadata")
        .arg(i.dir.file(
            "md.json",
            &default_tree()["latest"]["meta-data"].to_string(),
        ))
        .args(["--link", &format!("eth0={MAC0}"), "--link", &format!("eth1={MAC1}")])
        .arg("--lease")
        .arg(i.dir.file(
            "eth1.env",
            "reason=BOUND\ninterface=eth1\nnew_ip_address=10.98.1.20\nnew_subnet_mask=255.255.255.0\nnew_routers=10.98.1.1\n",
        ))
        .args(["--format", "json"]));
    let plan: leasehook_core::model::Plan = serde_json::from_slice(&plan_out.stdout).unwrap();
    assert!(
        plan.interfaces.iter().any(|p| !p.rules.is_empty()),
        "the plan has no rules: {}",
        String::from_utf8_lossy(&plan_out.stdout)
    );
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let (ns, root) = (i.ns.name.clone(), i.root.clone());
    let t = Instant::now();
    let result = in_netns(&i.ns, move || {
        let mut applier = DeleteLinkFirst {
            inner: apply::netlink::NetlinkApplier::try_new().unwrap(),
            ns,
            done: false,
        };
        let paths = state::Paths::new(&root);
        // What the hook does: apply, then record only what went in.
        apply::apply_plan(&mut applier, &plan, &[]).inspect(|_| {
            for ip in &plan.interfaces {
                let st = state::InterfaceState::record(None, ip, plan.profile);
                state::write_state(&paths, &st).unwrap();
            }
        })
    });
    let elapsed = t.elapsed();
    let log = match &result {
        Ok(r) => format!("applied {} change(s)", r.writes()),
        Err(e) => e.to_string(),
    };
    Seen {
        exit: None,
        log,
        root: i.root.clone(),
        files_before: files,
        kernel_before: Some(before),
        kernel_after: Some(snap(&i.ns)),
        elapsed,
        keep: vec![Box::new(i)],
    }
}

// --- Disk full ---------------------------------------------------------------------

/// A small tmpfs mounted on a test-owned folder, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Self {
        std::fs::create_dir_all(at).unwrap();
        run(Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "leasehook-fault",
            ])
            .arg(at));
        Self(at.to_path_buf())
    }

    /// Writes a filler file until the file system is full.
    fn fill(&self) {
        use std::io::Write as _;
        let mut f = std::fs::File::create(self.0.join("filler")).unwrap();
        let block = [0u8; 4096];
        loop {
            match f.write_all(&block).and_then(|()| f.sync_all()) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(28) => break,
                Err(e) => panic!("filling {:?}: {e}", self.0),
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn run_disk_full_state() -> Seen {
    let mut i = Instance::new("fdisk");
    let fs = Tmpfs::mount(&i.root.join("run/leasehook/iface"), "64k");
    i.bound();
    fs.fill();
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_imds(
        &tree_with_eth1_ips(Some("10.98.1.20\n10.98.1.21\n10.98.1.22")),
        &Imds::Scenario(json!({})),
    );
    let (out, elapsed) = i.shim("RENEW", &url);
    let mut seen = i.seen(&out, elapsed, before, files);
    // The mount goes first, then the namespace and folder.
    seen.keep.insert(0, Box::new(fs));
    seen
}

// --- LXD and the boot cache ------------------------------------------------------

/// A fake root for the boot stage.
struct BootRoot {
    dir: TempDir,
}

impl BootRoot {
    fn new(tag: &str) -> Self {
        Self {
            dir: TempDir::new(tag),
        }
    }
    fn path(&self) -> &Path {
        &self.dir.0
    }
    fn socket(&self) -> PathBuf {
        self.path().join("dev/lxd/sock")
    }
    fn lxd(&self, config: devlxd::Config) -> Devlxd {
        std::fs::create_dir_all(self.path().join("dev/lxd")).unwrap();
        Devlxd::start(&self.socket(), config).unwrap()
    }
    /// `leasehook init --local` on an LXD container.
    fn init(&self, wrap: &[&str]) -> (Output, Duration) {
        let mut cmd = command(None, None, wrap, &leasehook_bin());
        cmd.args(["init", "--local", "--virt", "lxc", "--root"])
            .arg(self.path())
            .env_remove("LEASEHOOK_IMDS_ENDPOINTS");
        let t = Instant::now();
        let out = cmd.output().unwrap();
        (out, t.elapsed())
    }
    /// The first boot with a healthy socket, which is then switched off; then the
    /// reboot empties `run/`.
    fn first_boot_then_socket_off(&self) {
        let d = self.lxd(lxd_config());
        let (out, _) = self.init(&[]);
        assert!(out.status.success(), "first boot: {}", text(&out));
        assert!(self.path().join(RECORD).is_file());
        drop(d);
        let _ = std::fs::remove_file(self.socket());
        let _ = std::fs::remove_dir_all(self.path().join("run"));
    }
    fn seen(
        self,
        out: &Output,
        elapsed: Duration,
        files: BTreeMap<PathBuf, Vec<u8>>,
        keep: Vec<Box<dyn std::any::Any>>,
    ) -> Seen {
        let mut keep = keep;
        let root = self.path().to_path_buf();
        keep.push(Box::new(self));
        Seen {
            exit: out.status.code(),
            log: text(out),
            root,
            files_before: files,
            kernel_before: None,
            kernel_after: None,
            elapsed,
            keep,
        }
    }
}

fn lxd_config() -> devlxd::Config {
    devlxd::Config::new(SAMPLE_META_DATA)
        .key("user.user-data", "#cloud-config\n{}\n")
        .key("user.tag", "blue")
}

#[derive(Clone, Copy)]
enum LxdFault {
    SocketGone,
    Http500,
}

fn lxd_second_boot(fault: LxdFault) -> Seen {
    let r = BootRoot::new("flxd");
    r.first_boot_then_socket_off();
    let mut keep: Vec<Box<dyn std::any::Any>> = Vec::new();
    if let LxdFault::Http500 = fault {
        let mut cfg = lxd_config();
        for p in ["/1.0", "/1.0/meta-data", "/1.0/config", "/1.0/devices"] {
            cfg = cfg.rule(p, 500, "broken", None);
        }
        keep.push(Box::new(r.lxd(cfg)));
    }
    let files = files_under(r.path());
    let (out, elapsed) = r.init(&[]);
    r.seen(&out, elapsed, files, keep)
}

fn run_lxd_not_json() -> Seen {
    let r = BootRoot::new("fljson");
    let d = r.lxd(lxd_config().rule("/1.0/config", 200, "<html>oops</html>", None));
    let files = files_under(r.path());
    let (out, elapsed) = r.init(&[]);
    r.seen(&out, elapsed, files, vec![Box::new(d)])
}

#[derive(Clone, Copy)]
enum Spoil {
    Corrupt,
    Truncated,
    Future,
    Unreadable,
    Symlink,
    LinkOutside,
}

fn spoiled_cache(spoil: Spoil) -> Seen {
    let r = BootRoot::new("fcache");
    r.first_boot_then_socket_off();
    let rec = r.path().join(RECORD);
    let cache = r.path().join("var/lib/leasehook");
    let mut wrap: Vec<&str> = Vec::new();
    match spoil {
        Spoil::Corrupt => std::fs::write(&rec, "\u{0}\u{1} garbage").unwrap(),
        Spoil::Truncated => {
            let t = std::fs::read(&rec).unwrap();
            std::fs::write(&rec, &t[..t.len() / 2]).unwrap();
        }
        Spoil::Future => {
            let t = std::fs::read_to_string(&rec).unwrap();
            assert!(t.contains("\"version\": 1"), "{t}");
            std::fs::write(&rec, t.replace("\"version\": 1", "\"version\": 7")).unwrap();
        }
        Spoil::Unreadable => {
            std::fs::set_permissions(&rec, std::fs::Permissions::from_mode(0o000)).unwrap();
            // Root reads anything; without these capabilities, mode 000 holds.
            wrap = vec![
                "setpriv",
                "--inh-caps=-all",
                "--bounding-set=-dac_override,-dac_read_search",
            ];
        }
        Spoil::Symlink => {
            let outside = r.path().join("outside");
            std::fs::create_dir_all(&outside).unwrap();
            std::fs::write(outside.join("secret"), "do not read or overwrite\n").unwrap();
            std::fs::remove_file(&rec).unwrap();
            symlink(outside.join("secret"), &rec).unwrap();
        }
        Spoil::LinkOutside => {
            std::fs::remove_file(cache.join("instance")).unwrap();
            symlink("/etc", cache.join("instance")).unwrap();
        }
    }
    let files = files_under(r.path());
    let (out, elapsed) = r.init(&wrap);
    r.seen(&out, elapsed, files, Vec::new())
}

fn run_disk_full_cache() -> Seen {
    let r = BootRoot::new("fdiskc");
    let fs = Tmpfs::mount(&r.path().join("var/lib/leasehook"), "16k");
    fs.fill();
    let d = r.lxd(lxd_config());
    let files = files_under(r.path());
    let (out, elapsed) = r.init(&[]);
    // What `leasehook status` says afterwards is part of what a user sees.
    let status = command(None, None, &[], &leasehook_bin())
        .args(["status", "--root"])
        .arg(r.path())
        .output()
        .unwrap();
    let mut seen = r.seen(&out, elapsed, files, vec![Box::new(fs), Box::new(d)]);
    seen.log.push_str(&String::from_utf8_lossy(&status.stdout));
    seen
}

// --- Issue 18, items 5-10: bounded hooks -----------------------------------------

/// A good BOUND, then a RENEW against IMDS that answers 500 after 0.9 s and then
/// never answers: the request a pause would have started at the budget's end
/// would hang for its whole timeout. The emulator must see exactly one request.
fn run_no_request_after_budget() -> Seen {
    let mut i = Instance::new("fbudget");
    i.bound();
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let seen_before = std::fs::read_to_string(i.dir.0.join("imds.log"))
        .unwrap_or_default()
        .lines()
        .count();
    let url = i.start_imds(
        &default_tree(),
        &Imds::Scenario(json!({"rules": [
            {"path": "/latest", "until": 0.9, "delay": 0.9, "status": 500},
            {"path": "/latest", "from": 0.9, "action": "drop"}
        ]})),
    );
    let (out, elapsed) = i.shim("RENEW", &url);
    let log = std::fs::read_to_string(i.dir.0.join("imds.log")).unwrap_or_default();
    let requests: Vec<&str> = log.lines().skip(seen_before).collect();
    assert_eq!(
        requests.len(),
        1,
        "a request started after the budget: {requests:?}\n{}",
        text(&out)
    );
    i.seen(&out, elapsed, before, files)
}

/// What a row plants under the root after a good BOUND.
#[derive(Clone, Copy)]
enum Plant {
    Fifo(&'static str),
    SymlinkedRunDir,
    HugeState,
}

fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    run(Command::new("mkfifo").arg(path));
}

/// A good BOUND, the plant, then a RENEW with a healthy IMDS.
fn run_planted(plant: Plant) -> Seen {
    let mut i = Instance::new("fplant");
    i.bound();
    match plant {
        Plant::Fifo(rel) => mkfifo(&i.root.join(rel)),
        Plant::SymlinkedRunDir => {
            let run_dir = i.root.join("run/leasehook");
            let outside = i.root.join("outside");
            std::fs::create_dir_all(&outside).unwrap();
            std::fs::rename(&run_dir, i.root.join("run/moved")).unwrap();
            symlink(&outside, &run_dir).unwrap();
        }
        Plant::HugeState => {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(i.root.join(STATE))
                .unwrap();
            f.set_len(1_500_000_000).unwrap();
            let g = i.root.join("run/leasehook/generation/eth1");
            std::fs::remove_file(&g).unwrap();
            symlink("/dev/zero", &g).unwrap();
        }
    }
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_imds(&default_tree(), &Imds::Scenario(json!({})));
    let (out, elapsed) = i.shim("RENEW", &url);
    i.seen(&out, elapsed, before, files)
}

/// A good BOUND, a FIFO where `refresh` keeps eth1's stamp, then `leasehook
/// refresh` with a healthy IMDS (issue 18, item 6: it hung there, holding the
/// interface's lock).
fn run_fifo_refreshed_stamp() -> Seen {
    let mut i = Instance::new("frefstamp");
    i.bound();
    mkfifo(&i.root.join("run/leasehook/refreshed/eth1"));
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_imds(&default_tree(), &Imds::Scenario(json!({})));
    let env: Vec<(String, String)> = [
        ("LEASEHOOK_ROOT", i.root.display().to_string()),
        ("LEASEHOOK_IMDS_ENDPOINTS", url),
        ("LEASEHOOK_IMDS_BIND_INTERFACE", "false".to_owned()),
        ("LEASEHOOK_IMDS_SYNC_BUDGET_S", "1".to_owned()),
        ("LEASEHOOK_LOG_LEVEL", "info".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let t = Instant::now();
    let mut out = command(Some(&i.ns), Some(&env), &[], &leasehook_bin())
        .arg("refresh")
        .output()
        .unwrap();
    let elapsed = t.elapsed();
    let stdout = out.stdout.clone();
    out.stderr.extend_from_slice(&stdout);
    i.seen(&out, elapsed, before, files)
}

/// A process that looks like eth1's waiting worker (`... --worker eth1` in its
/// command line), holds eth1's lock, is named by the hand-over and is stopped.
struct StoppedWorker(Child, u32);

impl StoppedWorker {
    fn start(i: &Instance) -> Self {
        let lock = i.root.join("run/leasehook/lock/eth1.lock");
        // `-o`: flock holds the lock, its child (no process of its own below
        // it: a busy loop, stopped at once) does not, so the lock goes with them.
        let child = Command::new("flock")
            .arg("-o")
            .arg(&lock)
            .args(["sh", "-c", "while :; do :; done", "--worker", "eth1"])
            .spawn()
            .unwrap();
        // flock runs sh as its child: the pid to name is sh's.
        let flock_pid = child.id();
        let until = Instant::now() + Duration::from_secs(5);
        let sh = loop {
            let kids =
                std::fs::read_to_string(format!("/proc/{flock_pid}/task/{flock_pid}/children"))
                    .unwrap_or_default();
            if let Some(pid) = kids.split_whitespace().next() {
                break pid.parse::<u32>().unwrap();
            }
            assert!(Instant::now() < until, "flock did not start its child");
            std::thread::sleep(Duration::from_millis(10));
        };
        let env: leasehook_core::event::Env = [
            ("reason", "BOUND"),
            ("interface", "eth1"),
            ("new_ip_address", "10.98.1.20"),
            ("new_subnet_mask", "255.255.255.0"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        let event = leasehook_core::event::dhclient::parse(&env).unwrap();
        let pending = json!({"generation": 1, "pid": sh, "event": event, "deadline_ms": 0});
        let dir = i.root.join("run/leasehook/pending");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("eth1.json"), pending.to_string()).unwrap();
        run(Command::new("kill").args(["-STOP", &sh.to_string()]));
        Self(child, sh)
    }
}

impl Drop for StoppedWorker {
    fn drop(&mut self) {
        // Continued, the worker takes the SIGTERM the hook sent it.
        let _ = Command::new("kill")
            .args(["-CONT", &self.1.to_string()])
            .status();
        std::thread::sleep(Duration::from_millis(100));
        let _ = Command::new("kill")
            .args(["-KILL", &self.1.to_string()])
            .stderr(std::process::Stdio::null())
            .status();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits (at most `secs`) until no hand-over is pending for eth1 and no worker
/// for it runs.
fn wait_for_worker(root: &Path, secs: u64) -> bool {
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        // The hand-over goes before the worker's writes; its last-event record
        // (for `leasehook status`), no longer "deferred", comes after them all.
        let record = std::fs::read_to_string(root.join("run/leasehook/last-event/eth1.json"))
            .unwrap_or_default();
        if !root.join("run/leasehook/pending/eth1.json").exists()
            && !record.contains("\"outcome\":\"deferred\"")
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn run_lock_held_by_stopped_worker() -> Seen {
    let mut i = Instance::new("fstop");
    i.bound();
    let holder = StoppedWorker::start(&i);
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_imds(
        &tree_with_eth1_ips(Some("10.98.1.20\n10.98.1.21\n10.98.1.22")),
        &Imds::Scenario(json!({})),
    );
    let (out, elapsed) = i.shim_env("RENEW", &url, &[("LEASEHOOK_IMDS_BUDGET_S", "15")]);
    let log = text(&out);
    assert_eq!(
        log.matches("stopped the waiting worker").count(),
        1,
        "one line per stopped worker:\n{log}"
    );
    let pending = std::fs::read_to_string(i.root.join("run/leasehook/pending/eth1.json")).unwrap();
    assert!(pending.contains("\"queued\":true"), "{pending}");
    // The stopped worker continues, takes its SIGTERM and lets the lock go; the
    // queued worker then takes the lock and applies.
    drop(holder);
    if !wait_for_worker(&i.root, 12) {
        let pending = std::fs::read_to_string(i.root.join("run/leasehook/pending/eth1.json"))
            .unwrap_or_default();
        let ps = Command::new("ps")
            .args(["-eo", "pid,stat,args"])
            .output()
            .unwrap();
        let ps = String::from_utf8_lossy(&ps.stdout).into_owned();
        let ps: Vec<&str> = ps
            .lines()
            .filter(|l| l.contains("--worker") || l.contains("flock"))
            .collect();
        panic!("the queued worker did not finish: {pending}\n{ps:#?}\n{log}");
    }
    i.seen(&out, elapsed, before, files)
}

fn run_release_run_dir_full() -> Seen {
    let mut i = Instance::new("frelfull");
    i.bound();
    let run_dir = i.root.join("run/leasehook");
    let saved = i.dir.0.join("saved-run");
    run(Command::new("cp").arg("-a").arg(&run_dir).arg(&saved));
    let fs = Tmpfs::mount(&run_dir, "64k");
    run(Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", saved.display()))
        .arg(&run_dir));
    fs.fill();
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_imds(&default_tree(), &Imds::Scenario(json!({})));
    let (out, elapsed) = i.shim("RELEASE", &url);
    // The filler is the tmpfs's, not leasehook's.
    let mut seen = i.seen(&out, elapsed, before, files);
    seen.keep.insert(0, Box::new(fs));
    seen
}

fn run_config_not_yaml() -> Seen {
    let mut i = Instance::new("fshadow");
    i.bound();
    let shadow = i.dir.file(
        "shadow",
        "root:$y$j9T$FAKEHASHsaltsalt$FAKEHASHvaluevaluevalue:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n",
    );
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_imds(&default_tree(), &Imds::Scenario(json!({})));
    let shadow = shadow.display().to_string();
    let (out, elapsed) = i.shim_env("RENEW", &url, &[("LEASEHOOK_CONFIG", &shadow)]);
    i.seen(&out, elapsed, before, files)
}

/// Kills the worker a hand-over names when dropped (before the namespace goes).
struct KillWorker(PathBuf);

impl Drop for KillWorker {
    fn drop(&mut self) {
        let pid = std::fs::read_to_string(&self.0)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| v["pid"].as_u64());
        if let Some(pid) = pid {
            let _ = Command::new("kill").arg(pid.to_string()).status();
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn run_stderr_read_to_end() -> Seen {
    let mut i = Instance::new("fstderr");
    let mut tree = default_tree();
    tree["latest"]["meta-data"]["network"]["interfaces"]["macs"][MAC1]["subnet-ipv4-cidr-block"] =
        Value::Null;
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_imds(&tree, &Imds::Scenario(json!({})));
    // `output()` reads standard error to its end: a worker holding the pipe would
    // keep it open for the whole 15 s budget.
    let (out, elapsed) = i.shim_env("BOUND", &url, &[("LEASEHOOK_IMDS_BUDGET_S", "15")]);
    let kill = KillWorker(i.root.join("run/leasehook/pending/eth1.json"));
    let mut seen = i.seen(&out, elapsed, before, files);
    seen.keep.insert(0, Box::new(kill));
    seen
}

// --- The address gate (issue 18, items 1-4) ----------------------------------------

/// Runs `program` (a shim built beside the tests) in the instance's namespace the
/// way its client would (a clean environment: `vars`, the row's `LEASEHOOK_*`),
/// with `args`, against IMDS at `endpoint`.
fn shim_in(
    i: &Instance,
    program: &str,
    args: &[&str],
    vars: &[(&str, &str)],
    endpoint: &str,
) -> (Output, Duration) {
    let mut env: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    for (k, v) in [
        ("LEASEHOOK_IMDS_ENDPOINTS", endpoint),
        ("LEASEHOOK_IMDS_BIND_INTERFACE", "false"),
        ("LEASEHOOK_IMDS_SYNC_BUDGET_S", "1"),
        ("LEASEHOOK_IMDS_BUDGET_S", "1"),
        ("LEASEHOOK_LOG_LEVEL", "info"),
    ] {
        env.push((k.to_owned(), v.to_owned()));
    }
    env.push(("LEASEHOOK_ROOT".to_owned(), i.root.display().to_string()));
    let mut cmd = command(Some(&i.ns), Some(&env), &[], &sibling_bin(program));
    cmd.args(args);
    let t = Instant::now();
    let out = cmd.output().unwrap();
    (out, t.elapsed())
}

/// eth1's dhclient BOUND environment, with `over` replacing or adding variables.
fn dhclient_vars<'a>(over: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut vars = vec![
        ("reason", "BOUND"),
        ("interface", "eth1"),
        ("new_ip_address", "10.98.1.20"),
        ("new_subnet_mask", "255.255.255.0"),
        ("new_routers", "10.98.1.1"),
    ];
    for (k, v) in over {
        vars.retain(|(key, _)| key != k);
        vars.push((k, v));
    }
    if over.iter().any(|(k, _)| *k == "new_ip6_address") {
        vars.retain(|(k, _)| !k.starts_with("new_") || k.starts_with("new_ip6"));
    }
    vars
}

/// The world's tree with `set` (MAC, key, value) applied.
fn tree_with(set: &[(&str, &str, &str)]) -> Value {
    let mut t = default_tree();
    for (mac, key, value) in set {
        t["latest"]["meta-data"]["network"]["interfaces"]["macs"][*mac][*key] = json!(value);
    }
    t
}

/// A fresh instance, IMDS serving the world's tree with `set`, and eth1's dhclient
/// BOUND (with `over`).
fn gate_bound(tag: &str, set: &[(&str, &str, &str)], over: &[(&str, &str)]) -> Seen {
    let mut i = Instance::new(tag);
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_imds(&tree_with(set), &Imds::Scenario(json!({})));
    let (out, elapsed) = shim_in(&i, "leasehook-dhclient", &[], &dhclient_vars(over), &url);
    i.seen(&out, elapsed, before, files)
}

/// A fresh instance and one run of another client's shim.
fn gate_shim(tag: &str, program: &str, args: &[&str], vars: &[(&str, &str)]) -> Seen {
    let mut i = Instance::new(tag);
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_imds(&default_tree(), &Imds::Scenario(json!({})));
    let (out, elapsed) = shim_in(&i, program, args, vars, &url);
    i.seen(&out, elapsed, before, files)
}

fn run_gate_lease_primary_address() -> Seen {
    let mut i = Instance::new("fgprim");
    i.bound();
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_imds(
        &tree_with(&[(MAC1, "local-ipv4s", "10.98.0.10\n10.98.1.20\n10.98.1.21")]),
        &Imds::Scenario(json!({})),
    );
    let (out, elapsed) = shim_in(
        &i,
        "leasehook-dhclient",
        &[],
        &dhclient_vars(&[
            ("reason", "RENEW"),
            ("new_ip_address", "10.98.0.10"),
            ("old_ip_address", "10.98.1.20"),
            ("old_subnet_mask", "255.255.255.0"),
        ]),
        &url,
    );
    i.seen(&out, elapsed, before, files)
}

fn run_gate_two_nics_one_device_number() -> Seen {
    const MAC2: &str = "02:00:00:00:00:03";
    let mut i = Instance::new("fgdev");
    i.bound();
    i.ns.veth("eth2", MAC2, "vpc2");
    i.ns.ip(&["address", "add", "10.98.2.30/24", "dev", "eth2"]);
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let mut tree = default_tree();
    tree["latest"]["meta-data"]["network"]["interfaces"]["macs"][MAC2] = json!({
        "device-number": "1", "interface-id": "eni-0000000000000003", "mac": MAC2,
        "local-ipv4s": "10.98.2.30", "subnet-ipv4-cidr-block": "10.98.2.0/24"
    });
    let url = i.start_imds(&tree, &Imds::Scenario(json!({})));
    let (mut out, elapsed) = shim_in(
        &i,
        "leasehook-dhclient",
        &[],
        &dhclient_vars(&[
            ("interface", "eth2"),
            ("new_ip_address", "10.98.2.30"),
            ("new_routers", "10.98.2.1"),
        ]),
        &url,
    );
    assert!(
        text(&out).contains("eth2: table 10001 is claimed by eth1 too (two NICs with one device-number): neither NIC's rules are touched"),
        "{}",
        text(&out)
    );
    // What `leasehook status` shows, after the hook's own lines: degraded (1),
    // eth2's last event a conflict.
    let status = Command::new(leasehook_bin())
        .args(["status", "--root"])
        .arg(&i.root)
        .output()
        .unwrap();
    assert_eq!(status.status.code(), Some(1), "{status:?}");
    out.stderr.extend_from_slice(&status.stdout);
    i.seen(&out, elapsed, before, files)
}

fn run_gate_from_all_rule_flushed() -> Seen {
    let i = Instance::new("fgflush");
    i.ns.ip(&[
        "rule", "add", "from", "all", "lookup", "10001", "priority", "10001", "proto", "176",
    ]);
    let before = snap(&i.ns);
    assert!(
        before
            .0
            .iter()
            .any(|r| r == "10001 from all lookup 10001 proto 176"),
        "{before:?}"
    );
    let files = files_under(&i.root);
    let t = Instant::now();
    let mut out = command(Some(&i.ns), None, &[], &leasehook_bin())
        .arg("flush")
        .arg("--root")
        .arg(&i.root)
        .output()
        .unwrap();
    let elapsed = t.elapsed();
    // The summary is on standard output; the row reads both.
    let stdout = out.stdout.clone();
    out.stderr.extend_from_slice(&stdout);
    i.seen(&out, elapsed, before, files)
}

// --- Alibaba Cloud ECS (issue 21): its metadata client through the shim ----------

/// eth1's plan with the `aliyun` provider: table `10000 + slot(MAC1)`.
const ALIYUN_RULES: &[&str] = &[
    "19872 from 10.98.1.20 lookup 19872 proto 176",
    "19872 from 10.98.1.21 lookup 19872 proto 176",
];
const ALIYUN_TOKEN: &str = "run/leasehook/aliyun-token";

matrix! {
    @table ALIYUN_ROWS;
    #[cfg(feature = "netns")]
    aliyun_down => Row {
        name: "aliyun_down",
        fault: "Alibaba ECS metadata down (connection refused)",
        does: "retries with backoff for the budget, then keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE), FileWant::Unchanged(ALIYUN_TOKEN)],
        log: "nothing changed: IMDS did not answer usefully",
        not_in_log: "",
        max_secs: 3.0,
        run: || aliyun_renew(&Imds::Down),
    };
    #[cfg(feature = "netns")]
    aliyun_disabled => Row {
        name: "aliyun_disabled",
        fault: "Alibaba ECS metadata restarted (cached token refused) and disabled (403 on the token)",
        does: "fails the source at once, no retry; keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "IMDS disabled (the token request was refused with HTTP 403)",
        not_in_log: "",
        max_secs: 3.0,
        run: || aliyun_renew(&Imds::Scenario(json!({"rules": [{"path": "/latest/api/token", "method": "PUT", "status": 403}]}))),
    };
    #[cfg(feature = "netns")]
    aliyun_400 => Row {
        name: "aliyun_400",
        fault: "Alibaba ECS metadata answers 400 to every GET",
        does: "fails at once (waiting cannot fix a bad request); keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "HTTP 400; keeping the last applied state",
        not_in_log: "",
        max_secs: 3.0,
        run: || aliyun_renew(&Imds::Scenario(json!({"rules": [{"path": "/latest/meta-data", "status": 400}]}))),
    };
    #[cfg(feature = "netns")]
    aliyun_429 => Row {
        name: "aliyun_429",
        fault: "Alibaba ECS metadata throttles (429 to every GET)",
        does: "retries with backoff for the budget, then keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE), FileWant::Unchanged(ALIYUN_TOKEN)],
        log: "HTTP 429; keeping the last applied state",
        not_in_log: "",
        max_secs: 3.0,
        run: || aliyun_renew(&Imds::Scenario(json!({"rules": [{"path": "/latest/meta-data", "status": 429}]}))),
    };
    #[cfg(feature = "netns")]
    aliyun_garbage_list => Row {
        name: "aliyun_garbage_list",
        fault: "Alibaba ECS metadata serves `private-ipv4s` that is not a JSON list",
        does: "fails at once, naming the key; keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "private-ipv4s: not a JSON list",
        not_in_log: "",
        max_secs: 3.0,
        run: || aliyun_renew(&Imds::Scenario(json!({"values": [{"path": format!("/latest/meta-data/network/interfaces/macs/{MAC1}/private-ipv4s"), "value": "10.98.1.20,10.98.1.21"}]}))),
    };
    #[cfg(feature = "netns")]
    aliyun_garbage_bytes => Row {
        name: "aliyun_garbage_bytes",
        fault: "Alibaba ECS metadata answers garbage (200, body not UTF-8)",
        does: "fails at once (waiting cannot fix garbage); keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "unusable answer: not UTF-8",
        not_in_log: "",
        max_secs: 3.0,
        run: || aliyun_renew(&Imds::Scenario(json!({"rules": [{"path": "/latest/meta-data", "action": "garbage"}]}))),
    };
    #[cfg(feature = "netns")]
    aliyun_slow => Row {
        name: "aliyun_slow",
        fault: "Alibaba ECS metadata slow: every answer takes 0.5 s, the budget is 1 s",
        does: "stops asking when the budget is spent; the metadata said too little, so keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "nothing changed: IMDS incomplete: keeping the IPv4 state applied before",
        not_in_log: "",
        max_secs: 3.0,
        run: || aliyun_renew(&Imds::Scenario(json!({"rules": [{"path": "/latest", "delay": 0.5}]}))),
    };
}

#[test]
fn aliyun_rows_use_the_mac_slot_table() {
    let slot = leasehook_core::source::aliyun::nic::device_slot(MAC1.parse().unwrap());
    let t = 10_000 + slot;
    assert_eq!(
        ALIYUN_RULES,
        [
            format!("{t} from 10.98.1.20 lookup {t} proto 176"),
            format!("{t} from 10.98.1.21 lookup {t} proto 176")
        ]
    );
}

impl Instance {
    /// (Re)starts the ECS metadata emulator inside the namespace (hardened mode,
    /// answering loopback); returns its base URL.
    fn start_aliyun(&mut self, how: &Imds) -> String {
        self.imds = None;
        let Imds::Scenario(s) = how else {
            return "http://127.0.0.1:9".to_owned();
        };
        let log = self.dir.0.join("aliyun.log");
        let sc = self.dir.file("aliyun-scenario.json", &s.to_string());
        let mut cmd = self
            .ns
            .command(sibling_bin("aliyun-emulator").to_str().unwrap());
        cmd.args(["--bind", "127.0.0.1:0", "--allow", "127.0.0.0/8", "--log"])
            .arg(&log)
            .arg("--scenario")
            .arg(sc);
        let (p, addr) = start_with_addr(cmd, "aliyun-emulator");
        self.imds = Some(p);
        format!("http://{addr}")
    }

    /// `leasehook-dhclient` for eth1 with the `aliyun` provider at `endpoint`.
    fn aliyun_shim(&self, reason: &str, endpoint: &str) -> (Output, Duration) {
        self.shim_env(
            reason,
            "http://127.0.0.1:9",
            &[
                ("LEASEHOOK_PROVIDER", "aliyun"),
                ("LEASEHOOK_ALIYUN_ENDPOINT", endpoint),
            ],
        )
    }
}

/// A good BOUND with the `aliyun` provider, then a RENEW while the ECS metadata
/// service misbehaves as `how` says (restarted: the cached token is refused).
fn aliyun_renew(how: &Imds) -> Seen {
    let mut i = Instance::new("faliyun");
    let url = i.start_aliyun(&Imds::Scenario(json!({})));
    let (out, _) = i.aliyun_shim("BOUND", &url);
    assert!(out.status.success(), "BOUND failed: {}", text(&out));
    assert_eq!(snap(&i.ns).0, ALIYUN_RULES, "BOUND: {}", text(&out));
    assert!(i.root.join(ALIYUN_TOKEN).is_file(), "{}", text(&out));
    i.imds = None;
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_aliyun(how);
    let (out, elapsed) = i.aliyun_shim("RENEW", &url);
    i.seen(&out, elapsed, before, files)
}

// --- Oracle Cloud (issue 22): a secondary VNIC without DHCP, through refresh ----

/// eth1's plan with the `oracle` provider: table `10000 + slot(MAC1)`, its one
/// address (configured from the metadata, so no secondary /32).
const ORACLE_RULES: &[&str] = &["19872 from 10.98.1.20 lookup 19872 proto 176"];

/// A row of the refresh of eth1, configured from OCI's metadata, while it
/// misbehaves as `how` says.
macro_rules! oracle_row {
    ($name:ident, $fault:expr, $does:expr, $log:expr, $how:expr) => {
        Row {
            name: stringify!($name),
            fault: $fault,
            does: $does,
            // eth1 could not be checked: `refresh` exits 1 (issue 33).
            exit: Some(1),
            kernel: Kernel::AsBefore,
            files: &[FileWant::Unchanged(STATE)],
            log: $log,
            not_in_log: "",
            max_secs: 3.5,
            run: || oracle_refresh(&$how),
        }
    };
}

const ORACLE_KEEPS: &str = "changes nothing (an error never means \"no VNICs\"): the address, rules and table applied before stay";

matrix! {
    @table ORACLE_ROWS;
    #[cfg(feature = "netns")]
    oracle_down => oracle_row!(oracle_down,
        "OCI IMDS down (connection refused) at `leasehook refresh`",
        "retries with backoff for the budget, then changes nothing: the address, rules and table applied before stay",
        "the metadata did not answer usefully", Imds::Down);
    #[cfg(feature = "netns")]
    oracle_401 => oracle_row!(oracle_401,
        "OCI IMDS answers 401 (the `Authorization` header refused)",
        ORACLE_KEEPS, "HTTP 401", Imds::Scenario(json!({"rules": [{"path": "/opc/v2", "status": 401}]})));
    #[cfg(feature = "netns")]
    oracle_503 => oracle_row!(oracle_503,
        "OCI IMDS answers 503 to every request; the budget is 1 s",
        "retries with backoff for the budget, then changes nothing: the address, rules and table applied before stay",
        "HTTP 503", Imds::Scenario(json!({"rules": [{"path": "/opc/v2", "status": 503}]})));
    #[cfg(feature = "netns")]
    oracle_404 => oracle_row!(oracle_404,
        "OCI IMDS answers 404 for the VNIC list (being updated) for the whole budget",
        "asks again for the budget (a 404 is never \"no VNICs\"), then changes nothing: the address, rules and table applied before stay",
        "HTTP 404", Imds::Scenario(json!({"rules": [{"path": "/opc/v2/vnics", "status": 404}]})));
    #[cfg(feature = "netns")]
    oracle_garbage => oracle_row!(oracle_garbage,
        "OCI IMDS answers garbage (200, body not UTF-8)",
        ORACLE_KEEPS, "not UTF-8", Imds::Scenario(json!({"rules": [{"path": "/opc/v2", "action": "garbage"}]})));
    #[cfg(feature = "netns")]
    oracle_not_json => oracle_row!(oracle_not_json,
        "OCI IMDS answers an HTML error page with 200",
        ORACLE_KEEPS, "OCI IMDS vnics", Imds::Scenario(json!({"rules": [{"path": "/opc/v2", "action": "not-json"}]})));
    #[cfg(feature = "netns")]
    oracle_empty_list => oracle_row!(oracle_empty_list,
        "OCI IMDS answers an empty VNIC list (`[]`)",
        ORACLE_KEEPS, "an empty list (OCI always lists the primary VNIC)", Imds::Scenario(json!({"vnics": []})));
    #[cfg(feature = "netns")]
    oracle_outside_subnet => oracle_row!(oracle_outside_subnet,
        "OCI IMDS lists eth1's `privateIp` outside its `subnetCidrBlock`",
        ORACLE_KEEPS, "outside subnetCidrBlock", Imds::Scenario(json!({"vnics": [
            leasehook_tests::oracle_emulator::vnic(MAC0, "10.98.0.10", "10.98.0.0/24", "10.98.0.1", 1),
            leasehook_tests::oracle_emulator::vnic(MAC1, "10.98.7.20", "10.98.1.0/24", "10.98.1.1", 2),
        ]})));
    #[cfg(feature = "netns")]
    oracle_slow => oracle_row!(oracle_slow,
        "OCI IMDS slow: its answer takes 2.5 s, the budget is 1 s",
        "the one request times out (2 s) and is not sent again past the budget; changes nothing: the address, rules and table applied before stay",
        "the metadata did not answer usefully", Imds::Scenario(json!({"rules": [{"path": "/opc/v2", "delay": 2.5}]})));
}

impl Instance {
    /// (Re)starts the OCI emulator inside the namespace: `how` is `Down` or a
    /// scenario whose `vnics` (default: the world's two) and `rules` it serves.
    fn start_oracle(&mut self, how: &Imds) -> String {
        self.imds = None;
        let Imds::Scenario(s) = how else {
            return "http://127.0.0.1:9".to_owned();
        };
        let log = self.dir.0.join("oracle-imds.log");
        let mut cmd = self
            .ns
            .command(sibling_bin("oracle-emulator").to_str().unwrap());
        cmd.args(["--bind", "127.0.0.1:0", "--log"]).arg(&log);
        if let Some(v) = s.get("vnics") {
            let f = self.dir.file("oracle-vnics.json", &v.to_string());
            cmd.arg("--vnics").arg(format!("@{}", f.display()));
        }
        let rules = json!({"rules": s.get("rules").cloned().unwrap_or(json!([]))});
        let f = self.dir.file("oracle-scenario.json", &rules.to_string());
        cmd.arg("--scenario").arg(format!("@{}", f.display()));
        let (p, addr) = start_with_addr(cmd, "oracle-emulator");
        self.imds = Some(p);
        format!("http://{addr}")
    }
}

/// eth1 without its DHCP address (OCI serves a secondary VNIC none), a good
/// `leasehook refresh` that configures it from the metadata, then a refresh while
/// OCI's metadata service misbehaves as `how` says.
fn oracle_refresh(how: &Imds) -> Seen {
    let mut i = Instance::new("foracle");
    i.ns.ip(&["address", "del", "10.98.1.20/24", "dev", "eth1"]);
    let url = i.start_oracle(&Imds::Scenario(json!({})));
    let (out, _) = i.refresh_run("oracle", &url);
    assert!(out.status.success(), "refresh failed: {}", text(&out));
    assert_eq!(snap(&i.ns).0, ORACLE_RULES, "refresh: {}", text(&out));
    assert!(
        i.ns.ip(&["-4", "address", "show", "eth1"])
            .contains("10.98.1.20/24"),
        "refresh did not address eth1: {}",
        text(&out)
    );
    i.imds = None;
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_oracle(how);
    let (out, elapsed) = i.refresh_run("oracle", &url);
    assert!(
        i.ns.ip(&["-4", "address", "show", "eth1"])
            .contains("10.98.1.20/24"),
        "the fault took eth1's address: {}",
        text(&out)
    );
    i.seen(&out, elapsed, before, files)
}

#[test]
fn oracle_rows_use_the_mac_slot_table() {
    let slot = leasehook_core::source::oracle::vnic::device_slot(MAC1.parse().unwrap());
    let t = 10_000 + slot;
    assert_eq!(
        ORACLE_RULES,
        [format!("{t} from 10.98.1.20 lookup {t} proto 176")]
    );
}

// --- OpenStack (issue 22): its metadata client and config drive through the shim ---

/// eth1's plan with the `openstack` provider and the emulator's world:
/// table `10000 + slot(MAC1)`, the lease's address the one rule source.
const OPENSTACK_RULES: &[&str] = &["19872 from 10.98.1.20 lookup 19872 proto 176"];

matrix! {
    @table OPENSTACK_ROWS;
    #[cfg(feature = "netns")]
    openstack_down => Row {
        name: "openstack_down",
        fault: "OpenStack metadata service down (connection refused)",
        does: "retries with backoff for the budget, then keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "Connection refused (os error 111); keeping the last applied state",
        not_in_log: "",
        max_secs: 4.0,
        run: || openstack_renew(None),
    };
    #[cfg(feature = "netns")]
    openstack_403 => Row {
        name: "openstack_403",
        fault: "OpenStack metadata service answers 403",
        does: "an error waiting cannot fix: keeps the last applied state at once",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "network_data.json: HTTP 403; keeping the last applied state",
        not_in_log: "",
        max_secs: 4.0,
        run: || openstack_renew(Some(json!({"rules": [{"path": "/openstack", "status": 403}]}))),
    };
    #[cfg(feature = "netns")]
    openstack_429 => Row {
        name: "openstack_429",
        fault: "Neutron's metadata rate limit: 429 for the whole budget",
        does: "retries with backoff for the budget, then keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "HTTP 429; keeping the last applied state",
        not_in_log: "",
        max_secs: 4.0,
        run: || openstack_renew(Some(json!({"rules": [{"path": "/openstack", "status": 429}]}))),
    };
    #[cfg(feature = "netns")]
    openstack_500 => Row {
        name: "openstack_500",
        fault: "OpenStack metadata service answers 500 (Nova unreachable behind the proxy)",
        does: "retries with backoff for the budget, then keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "HTTP 500; keeping the last applied state",
        not_in_log: "",
        max_secs: 4.0,
        run: || openstack_renew(Some(json!({"rules": [{"path": "/openstack", "status": 500}]}))),
    };
    #[cfg(feature = "netns")]
    openstack_garbage => Row {
        name: "openstack_garbage",
        fault: "OpenStack metadata service answers bytes that are not UTF-8",
        does: "refuses the answer at once; keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "unusable answer: not UTF-8 (byte 0); keeping the last applied state",
        not_in_log: "",
        max_secs: 4.0,
        run: || openstack_renew(Some(json!({"rules": [{"path": "/openstack", "action": "garbage"}]}))),
    };
    #[cfg(feature = "netns")]
    openstack_bad_link => Row {
        name: "openstack_bad_link",
        fault: "`network_data.json` with a network naming a link that is not listed",
        does: "refuses the document at once, naming the key; keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "network_data.json/networks/1/link: names no link listed",
        not_in_log: "",
        max_secs: 4.0,
        run: run_openstack_bad_link,
    };
    #[cfg(feature = "netns")]
    openstack_slow => Row {
        name: "openstack_slow",
        fault: "OpenStack metadata service slow: its answer takes 1.5 s, the budget is 1 s",
        does: "the round's one request finishes within its 2 s timeout and counts: the metadata agrees, nothing to change",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Holds(STATE, "\"table\":19872")],
        log: "IMDS agrees with the lease after 1 round(s), 1 request(s)",
        not_in_log: "",
        max_secs: 4.0,
        run: || openstack_renew(Some(json!({"rules": [{"path": "/openstack", "delay": 1.5}]}))),
    };
    #[cfg(feature = "netns")]
    openstack_drive_unmountable => Row {
        name: "openstack_drive_unmountable",
        fault: "a config drive labelled `config-2` that does not mount (an ISO 9660 volume descriptor and nothing else), the metadata service up",
        does: "fails at once (the drive is the source, the service is never asked); keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "mount read-only: ",
        not_in_log: "HTTP",
        max_secs: 4.0,
        run: run_openstack_drive_unmountable,
    };
}

#[test]
fn openstack_rows_use_the_mac_slot_table() {
    let slot = leasehook_core::source::aliyun::nic::device_slot(MAC1.parse().unwrap());
    let t = 10_000 + slot;
    assert_eq!(
        OPENSTACK_RULES,
        [format!("{t} from 10.98.1.20 lookup {t} proto 176")]
    );
}

impl Instance {
    /// (Re)starts the `OpenStack` metadata emulator inside the namespace with
    /// `tree` (`None`: the world's) and `scenario`; returns its base URL.
    fn start_openstack(&mut self, tree: Option<&Value>, scenario: &Value) -> String {
        self.imds = None;
        let mut cmd = self
            .ns
            .command(sibling_bin("openstack-emulator").to_str().unwrap());
        cmd.args(["--bind", "127.0.0.1:0", "--scenario", &scenario.to_string()]);
        if let Some(t) = tree {
            cmd.args(["--tree", &t.to_string()]);
        }
        cmd.arg("--log").arg(self.dir.0.join("openstack.log"));
        let (p, addr) = start_with_addr(cmd, "openstack-emulator");
        self.imds = Some(p);
        format!("http://{addr}")
    }

    /// `leasehook-dhclient` for eth1 with the `openstack` provider at `endpoint`.
    fn openstack_shim(&self, reason: &str, endpoint: &str) -> (Output, Duration) {
        self.shim_env(
            reason,
            "http://127.0.0.1:9",
            &[
                ("LEASEHOOK_PROVIDER", "openstack"),
                ("LEASEHOOK_OPENSTACK_ENDPOINT", endpoint),
            ],
        )
    }

    /// A good BOUND with `provider: openstack`.
    fn openstack_bound(&mut self) {
        let url = self.start_openstack(None, &json!({}));
        let (out, _) = self.openstack_shim("BOUND", &url);
        assert!(out.status.success(), "BOUND failed: {}", text(&out));
        assert_eq!(snap(&self.ns).0, OPENSTACK_RULES, "BOUND: {}", text(&out));
        self.imds = None;
    }
}

/// A good BOUND, then a RENEW while the metadata service misbehaves as `how`
/// says (`None`: down).
fn openstack_renew(how: Option<Value>) -> Seen {
    let mut i = Instance::new("fos");
    i.openstack_bound();
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = match how {
        Some(s) => i.start_openstack(None, &s),
        None => "http://127.0.0.1:9".to_owned(),
    };
    let (out, elapsed) = i.openstack_shim("RENEW", &url);
    i.seen(&out, elapsed, before, files)
}

fn run_openstack_bad_link() -> Seen {
    let mut i = Instance::new("fosln");
    i.openstack_bound();
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let mut tree = leasehook_tests::openstack_emulator::world_tree();
    tree["network_data"]["networks"][1]["link"] = json!("tap-not-listed");
    let url = i.start_openstack(Some(&tree), &json!({}));
    let (out, elapsed) = i.openstack_shim("RENEW", &url);
    i.seen(&out, elapsed, before, files)
}

fn run_openstack_drive_unmountable() -> Seen {
    let mut i = Instance::new("fosdr");
    i.openstack_bound();
    let by = i.root.join("dev/disk/by-label");
    std::fs::create_dir_all(&by).unwrap();
    let mut bytes = vec![0u8; 64 * 1024];
    bytes[32769..32774].copy_from_slice(b"CD001");
    std::fs::write(by.join("config-2"), bytes).unwrap();
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_openstack(None, &json!({}));
    let (out, elapsed) = i.openstack_shim("RENEW", &url);
    i.seen(&out, elapsed, before, files)
}

// --- issue 30: links (items 1, 4, 5): which link is a NIC, which NIC has no DHCP ---

/// eth1's table routes once it is configured from the metadata (OCI or an
/// `OpenStack` static network): table `10000 + slot(MAC1)`.
const LINKS_ROUTES: &[&str] = &[
    "10.98.1.0/24 via - dev eth1 scope link src 10.98.1.20 table 19872 proto 176",
    "default via 10.98.1.1 dev eth1 scope - src - table 19872 proto 176",
];

/// Which cloud a `links_*_refused_then_good` row asks, and for OCI what its
/// first answer does to eth1.
#[derive(Clone, Copy)]
enum Links {
    Oracle(LinksFirst),
    OpenStack,
}

#[derive(Clone, Copy)]
enum LinksFirst {
    /// Every value of eth1 refused (its `privateIp` is the metadata service's).
    Refused,
    /// Another VNIC listed whose MAC has eth1's slot (`MAC1 + 9999`).
    SlotTaken,
}

impl Instance {
    /// `leasehook refresh -v` with `provider` at `endpoint` (its
    /// `LEASEHOOK_<PROVIDER>_ENDPOINT`), budget 1 s; its standard output
    /// appended to its log.
    fn refresh_run(&self, provider: &str, endpoint: &str) -> (Output, Duration) {
        let env: Vec<(String, String)> = vec![
            ("LEASEHOOK_ROOT".to_owned(), self.root.display().to_string()),
            ("LEASEHOOK_PROVIDER".to_owned(), provider.to_owned()),
            (
                format!("LEASEHOOK_{}_ENDPOINT", provider.to_uppercase()),
                endpoint.to_owned(),
            ),
            ("LEASEHOOK_IMDS_SYNC_BUDGET_S".to_owned(), "1".to_owned()),
            ("LEASEHOOK_IMDS_BUDGET_S".to_owned(), "1".to_owned()),
            ("LEASEHOOK_LOG_LEVEL".to_owned(), "info".to_owned()),
        ];
        let t = Instant::now();
        // -v: an unchanged NIC, or one left as it is, is printed only so.
        let mut out = command(Some(&self.ns), Some(&env), &[], &leasehook_bin())
            .args(["refresh", "-v"])
            .output()
            .unwrap();
        let elapsed = t.elapsed();
        let stdout = out.stdout.clone();
        out.stderr.extend_from_slice(&stdout);
        (out, elapsed)
    }

    /// eth1 as OCI leaves a secondary VNIC (no address; `down`: not up either),
    /// and the instance's default route by eth0's gateway.
    fn links_world(tag: &str, down: bool) -> Self {
        let i = Self::new(tag);
        i.ns.ip(&["address", "del", "10.98.1.20/24", "dev", "eth1"]);
        if down {
            i.ns.ip(&["link", "set", "eth1", "down"]);
        }
        i.ns.ip(&["route", "add", "default", "via", "10.98.0.1", "dev", "eth0"]);
        i
    }
}

/// A link's IPv4 and IPv6 addresses (`ip -j address show dev IF`), scope host
/// included, as `addr/len`.
fn links_addresses(ns: &Netns, dev: &str) -> Vec<String> {
    ns.ip_json(&["address", "show", "dev", dev])
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|l| l["addr_info"].as_array().cloned().unwrap_or_default())
        .filter(|a| a["scope"].as_str() != Some("link"))
        .map(|a| format!("{}/{}", a["local"].as_str().unwrap_or("?"), a["prefixlen"]))
        .collect()
}

/// `ip -j route get DST [from SRC]`: the kernel's answer as `TYPE dev DEV [via GW]`.
fn links_route_get(ns: &Netns, dst: &str, from: Option<&str>) -> String {
    let mut args = vec!["route", "get", dst];
    if let Some(src) = from {
        args.extend(["from", src]);
    }
    let v = ns.ip_json(&args);
    let r = &v[0];
    let mut out = format!(
        "{} dev {}",
        r["type"].as_str().unwrap_or("unicast"),
        r["dev"].as_str().unwrap_or("?")
    );
    if let Some(gw) = r["gateway"].as_str() {
        let _ = write!(out, " via {gw}");
    }
    out
}

/// Item 1's kernel: `lo` holds its own addresses only, and neither the gateway
/// nor another subnet's host is answered locally (a `local 10.0.0.0/8 dev lo`
/// would take both).
fn assert_lo_untouched(ns: &Netns, log: &str) {
    assert_eq!(
        links_addresses(ns, "lo"),
        ["127.0.0.1/8", "::1/128"],
        "lo was given an address; {log}"
    );
    for dst in ["10.98.0.1", "10.77.0.9"] {
        assert_eq!(
            links_route_get(ns, dst, None),
            format!(
                "unicast dev eth0{}",
                if dst == "10.98.0.1" {
                    ""
                } else {
                    " via 10.98.0.1"
                }
            ),
            "ip route get {dst}; {log}"
        );
    }
}

/// Whether link `dev` is administratively up.
fn links_is_up(ns: &Netns, dev: &str) -> bool {
    ns.ip_json(&["link", "show", "dev", dev])[0]["flags"]
        .as_array()
        .is_some_and(|f| f.iter().any(|x| x == "UP"))
}

/// The world's two VNICs and `extra`.
fn links_vnics(extra: Value) -> Value {
    let mut v = leasehook_tests::oracle_emulator::world_vnics();
    v.as_array_mut().unwrap().push(extra);
    v
}

fn run_links_oci_zero_mac() -> Seen {
    let mut i = Instance::links_world("flzero", false);
    let url = i.start_oracle(&Imds::Scenario(json!({})));
    let (out, _) = i.refresh_run("oracle", &url);
    assert_eq!(snap(&i.ns).0, ORACLE_RULES, "refresh: {}", text(&out));
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let zero = leasehook_tests::oracle_emulator::vnic(
        "00:00:00:00:00:00",
        "10.200.0.5",
        "10.0.0.0/8",
        "10.0.0.1",
        7,
    );
    let url = i.start_oracle(&Imds::Scenario(json!({"vnics": links_vnics(zero)})));
    let (out, elapsed) = i.refresh_run("oracle", &url);
    assert_lo_untouched(&i.ns, &text(&out));
    i.seen(&out, elapsed, before, files)
}

fn run_links_openstack_zero_mac() -> Seen {
    let mut i = Instance::new("flozero");
    i.ns.ip(&["route", "add", "default", "via", "10.98.0.1", "dev", "eth0"]);
    i.openstack_bound();
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let mut tree = leasehook_tests::openstack_emulator::world_tree();
    let nd = &mut tree["network_data"];
    nd["links"].as_array_mut().unwrap().push(json!(
        {"id": "tapzero", "type": "ovs", "ethernet_mac_address": "00:00:00:00:00:00"}
    ));
    nd["networks"].as_array_mut().unwrap().push(json!(
        {"id": "networkz", "type": "ipv4", "link": "tapzero",
         "ip_address": "10.200.0.5", "netmask": "255.0.0.0",
         "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.0.0.1"}]}
    ));
    let url = i.start_openstack(Some(&tree), &json!({}));
    let (out, elapsed) = i.refresh_run("openstack", &url);
    assert_lo_untouched(&i.ns, &text(&out));
    i.seen(&out, elapsed, before, files)
}

fn run_links_oci_dhcp_primary_listed_second() -> Seen {
    let mut i = Instance::links_world("flprim", false);
    let url = i.start_oracle(&Imds::Scenario(json!({})));
    // eth0's DHCP lease through the hook, as dhclient runs it on OCI's primary.
    let (out, _) = i.shim_env(
        "BOUND",
        "http://127.0.0.1:9",
        &[
            ("interface", "eth0"),
            ("new_ip_address", "10.98.0.10"),
            ("new_routers", "10.98.0.1"),
            ("new_network_number", "10.98.0.0"),
            ("new_broadcast_address", "10.98.0.255"),
            ("LEASEHOOK_PROVIDER", "oracle"),
            ("LEASEHOOK_ORACLE_ENDPOINT", &url),
        ],
    );
    assert!(out.status.success(), "eth0 BOUND: {}", text(&out));
    assert!(i.root.join("run/leasehook/iface/eth0.json").is_file());
    let (out, _) = i.refresh_run("oracle", &url);
    assert_eq!(snap(&i.ns).0, ORACLE_RULES, "refresh: {}", text(&out));
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let vnic = leasehook_tests::oracle_emulator::vnic;
    let hostile = json!([
        vnic(
            "02:00:17:00:00:99",
            "10.98.2.5",
            "10.98.2.0/24",
            "10.98.2.1",
            1
        ),
        vnic(MAC0, "10.98.0.10", "10.98.0.0/24", "10.98.0.1", 2),
        vnic(MAC1, "10.98.1.20", "10.98.1.0/24", "10.98.1.1", 3),
    ]);
    let url = i.start_oracle(&Imds::Scenario(json!({"vnics": hostile})));
    let (out, elapsed) = i.refresh_run("oracle", &url);
    let log = text(&out);
    assert_eq!(links_addresses(&i.ns, "eth0")[0], "10.98.0.10/24", "{log}");
    assert_eq!(
        links_addresses(&i.ns, "eth0")
            .iter()
            .filter(|a| a.contains('.'))
            .count(),
        1,
        "eth0 was given a metadata address; {log}"
    );
    assert_eq!(
        links_route_get(&i.ns, "10.77.0.9", Some("10.98.0.10")),
        "unicast dev eth0 via 10.98.0.1",
        "{log}"
    );
    i.seen(&out, elapsed, before, files)
}

/// Every value of eth1 refused: its `privateIp` is the metadata service's.
fn links_refused_vnics() -> Value {
    let vnic = leasehook_tests::oracle_emulator::vnic;
    json!([
        vnic(MAC0, "10.98.0.10", "10.98.0.0/24", "10.98.0.1", 1),
        vnic(MAC1, "169.254.169.254", "169.254.0.0/16", "169.254.0.1", 2),
    ])
}

fn run_links_oci_refused_vnic_stays_down() -> Seen {
    let mut i = Instance::links_world("fldown", true);
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_oracle(&Imds::Scenario(json!({"vnics": links_refused_vnics()})));
    let (out, elapsed) = i.refresh_run("oracle", &url);
    assert!(
        !links_is_up(&i.ns, "eth1"),
        "eth1 was brought up for nothing: {}",
        text(&out)
    );
    assert!(
        links_addresses(&i.ns, "eth1")
            .iter()
            .all(|a| !a.contains('.'))
    );
    i.seen(&out, elapsed, before, files)
}

/// A first refresh whose answer gives eth1 nothing (`how`), then one whose
/// answer is good: the seen run is the second.
fn run_links_refused_then_good(how: Links) -> Seen {
    let mut i = Instance::links_world("flgood", true);
    let (provider, first, good) = match how {
        Links::Oracle(first) => {
            let vnics = match first {
                LinksFirst::Refused => links_refused_vnics(),
                LinksFirst::SlotTaken => links_vnics(leasehook_tests::oracle_emulator::vnic(
                    "02:00:00:00:27:11",
                    "10.98.3.5",
                    "10.98.3.0/24",
                    "10.98.3.1",
                    9,
                )),
            };
            let first = i.start_oracle(&Imds::Scenario(json!({"vnics": vnics})));
            ("oracle", first, None)
        }
        Links::OpenStack => {
            let mut tree = leasehook_tests::openstack_emulator::world_tree();
            tree["network_data"]["networks"][1] = json!({
                "id": "network1", "type": "ipv4", "link": "tap0b0b0b0b-01",
                "ip_address": "169.254.169.254", "netmask": "255.255.0.0"});
            let first = i.start_openstack(Some(&tree), &json!({}));
            tree["network_data"]["networks"][1] = json!({
                "id": "network1", "type": "ipv4", "link": "tap0b0b0b0b-01",
                "ip_address": "10.98.1.20", "netmask": "255.255.255.0",
                "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.98.1.1"}]});
            ("openstack", first, Some(tree))
        }
    };
    let (out, _) = i.refresh_run(provider, &first);
    assert!(out.status.success(), "first refresh: {}", text(&out));
    assert!(snap(&i.ns).0.is_empty(), "first refresh: {}", text(&out));
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = match good {
        None => i.start_oracle(&Imds::Scenario(json!({}))),
        Some(tree) => i.start_openstack(Some(&tree), &json!({})),
    };
    let (out, elapsed) = i.refresh_run(provider, &url);
    let log = text(&out);
    assert!(links_is_up(&i.ns, "eth1"), "eth1 is down; {log}");
    assert!(
        links_addresses(&i.ns, "eth1").contains(&"10.98.1.20/24".to_owned()),
        "{log}"
    );
    assert_eq!(
        links_route_get(&i.ns, "10.77.0.9", Some("10.98.1.20")),
        "unicast dev eth1 via 10.98.1.1",
        "{log}"
    );
    i.seen(&out, elapsed, before, files)
}

// --- issue 30: gate — a router's address, a wide subnet, OpenStack next hops -----

/// The default route a DHCP client on eth0 leaves in main (`default via
/// 10.98.0.1 dev eth0`): the host's router, and what `ip route get` answers for
/// every other subnet's host.
fn with_default_route(i: &Instance) {
    i.ns.ip(&["route", "add", "default", "via", "10.98.0.1", "dev", "eth0"]);
}

/// `ip -j route get ADDR` in the namespace: the route's type (`unicast` when
/// `ip` names none) and the device it leaves by.
fn route_get(ns: &Netns, addr: &str) -> (String, String) {
    let v = ns.ip_json(&["route", "get", addr]);
    let r = &v[0];
    (
        r["type"].as_str().unwrap_or("unicast").to_owned(),
        r["dev"].as_str().unwrap_or("?").to_owned(),
    )
}

/// What every issue-30 row checks beyond the matrix's columns: no link holds
/// the router `gw` and the kernel does not answer it locally; a host of another
/// 10.x subnet (10.5.0.9) leaves by eth0, the main table's default; and no
/// route on eth1 in main is wider than the /24 the test's DHCP address gives.
fn assert_gate30(i: &Instance, gw: &str, log: &str) {
    let (kind, dev) = route_get(&i.ns, gw);
    assert_ne!(
        kind, "local",
        "{gw} is answered locally (dev {dev}); log:\n{log}"
    );
    let held = i.ns.ip(&["-4", "-o", "address", "show"]);
    assert!(
        !held.contains(&format!("inet {gw}/")),
        "a link holds the router {gw}:\n{held}\nlog:\n{log}"
    );
    let (_, dev) = route_get(&i.ns, "10.5.0.9");
    assert_eq!(
        dev, "eth0",
        "another subnet's host leaves by {dev}; log:\n{log}"
    );
    let main =
        i.ns.ip_json(&["-4", "route", "show", "table", "main", "dev", "eth1"]);
    for r in main.as_array().into_iter().flatten() {
        let dst = r["dst"].as_str().unwrap_or("");
        assert!(dst == "10.98.1.0/24", "main holds {r} on eth1; log:\n{log}");
    }
}

fn run_gate30_ec2_router() -> Seen {
    let mut i = Instance::new("fg30ec2");
    with_default_route(&i);
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_imds(
        &tree_with(&[(MAC1, "local-ipv4s", "10.98.1.20\n10.98.1.1")]),
        &Imds::Scenario(json!({})),
    );
    let (out, elapsed) = shim_in(&i, "leasehook-dhclient", &[], &dhclient_vars(&[]), &url);
    assert_gate30(&i, "10.98.1.1", &text(&out));
    assert_eq!(route_get(&i.ns, "10.98.1.1").1, "eth1");
    i.seen(&out, elapsed, before, files)
}

fn run_gate30_aliyun_gateway() -> Seen {
    let mut i = Instance::new("fg30ali");
    with_default_route(&i);
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_aliyun(&Imds::Scenario(json!({"values": [{
        "path": format!("/latest/meta-data/network/interfaces/macs/{MAC1}/private-ipv4s"),
        "value": "[\"10.98.1.20\",\"10.98.1.1\"]"}]})));
    let (out, elapsed) = i.aliyun_shim("BOUND", &url);
    assert_gate30(&i, "10.98.1.1", &text(&out));
    assert_eq!(route_get(&i.ns, "10.98.1.1").1, "eth1");
    i.seen(&out, elapsed, before, files)
}

/// eth1 without its DHCP address (OCI serves a secondary VNIC none), the
/// host's default route via eth0, and one `leasehook refresh` while OCI lists
/// eth0's VNIC and eth1's as `vnic` says (`privateIp`, `subnetCidrBlock`,
/// `virtualRouterIp`).
fn gate30_oracle(
    tag: &str,
    vnic: (&str, &str, &str),
) -> (Instance, Output, Duration, Snap, BTreeMap<PathBuf, Vec<u8>>) {
    let mut i = Instance::new(tag);
    i.ns.ip(&["address", "del", "10.98.1.20/24", "dev", "eth1"]);
    with_default_route(&i);
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_oracle(&Imds::Scenario(json!({"vnics": [
        leasehook_tests::oracle_emulator::vnic(MAC0, "10.98.0.10", "10.98.0.0/24", "10.98.0.1", 1),
        leasehook_tests::oracle_emulator::vnic(MAC1, vnic.0, vnic.1, vnic.2, 2),
    ]})));
    let (out, elapsed) = i.refresh_run("oracle", &url);
    (i, out, elapsed, before, files)
}

fn run_gate30_oracle(vnic: &[(&str, &str, &str)], gw: &str) -> Seen {
    let (i, out, elapsed, before, files) = gate30_oracle("fg30oci", vnic[0]);
    assert_gate30(&i, gw, &text(&out));
    assert_ne!(route_get(&i.ns, "10.98.0.1").1, "lo", "{}", text(&out));
    i.seen(&out, elapsed, before, files)
}

fn run_gate30_oracle_wide() -> Seen {
    let (i, out, elapsed, before, files) =
        gate30_oracle("fg30wide", ("10.98.1.20", "10.0.0.0/8", "10.98.1.1"));
    let log = text(&out);
    let addrs = i.ns.ip_json(&["-4", "address", "show", "dev", "eth1"]);
    let info = &addrs[0]["addr_info"][0];
    assert_eq!(info["local"], "10.98.1.20", "{addrs}\n{log}");
    assert_eq!(info["prefixlen"], 8, "{addrs}\n{log}");
    assert_eq!(info["noprefixroute"], true, "{addrs}\n{log}");
    assert_eq!(
        i.ns.ip_json(&["-4", "route", "show", "table", "main", "dev", "eth1"]),
        json!([]),
        "{log}"
    );
    assert_gate30(&i, "10.98.1.1", &log);
    i.seen(&out, elapsed, before, files)
}

/// eth1 without its DHCP address, the host's default route via eth0, and one
/// `leasehook refresh` while `network_data.json` puts eth1 on the static
/// network `net`.
fn run_gate30_openstack(net: &Value, gw: &str) -> Seen {
    let mut i = Instance::new("fg30os");
    i.ns.ip(&["address", "del", "10.98.1.20/24", "dev", "eth1"]);
    with_default_route(&i);
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let mut tree = leasehook_tests::openstack_emulator::world_tree();
    tree["network_data"]["networks"][1] = net.clone();
    let url = i.start_openstack(Some(&tree), &json!({}));
    let (out, elapsed) = i.refresh_run("openstack", &url);
    assert_gate30(&i, gw, &text(&out));
    i.seen(&out, elapsed, before, files)
}

fn run_gate30_cloud_init_wide() -> Seen {
    let mut i = Instance::new("fg30ci");
    with_default_route(&i);
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_imds(
        &tree_with(&[
            (MAC1, "subnet-ipv4-cidr-block", "10.0.0.0/8"),
            (MAC1, "local-ipv4s", "10.98.1.20\n10.98.1.21"),
        ]),
        &Imds::Scenario(json!({})),
    );
    let (out, elapsed) = shim_in(
        &i,
        "leasehook-dhclient",
        &[],
        &dhclient_vars(&[("LEASEHOOK_PROFILE", "cloud-init")]),
        &url,
    );
    let log = text(&out);
    let addrs = i.ns.ip_json(&["-4", "address", "show", "dev", "eth1"]);
    let wide = addrs[0]["addr_info"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["local"] == "10.98.1.21")
        .cloned()
        .unwrap_or_else(|| panic!("no 10.98.1.21 on eth1: {addrs}\n{log}"));
    assert_eq!(wide["prefixlen"], 8, "{addrs}\n{log}");
    assert_eq!(wide["noprefixroute"], true, "{addrs}\n{log}");
    let t101 = i.ns.ip(&["-4", "route", "show", "table", "101"]);
    assert!(
        t101.contains("10.0.0.0/8 dev eth1"),
        "table 101: {t101}\n{log}"
    );
    assert_gate30(&i, "10.98.1.1", &log);
    i.seen(&out, elapsed, before, files)
}

// --- issue 30: bounds (config drive types and time, Azure's pace lock, a crowded
// CNI folder, `apply --plan`) ----------------------------------------------------

matrix! {
    @table BOUNDS_ROWS;
    #[cfg(feature = "netns")]
    bounds_ext2_config_drive => Row {
        name: "bounds_ext2_config_drive",
        fault: "an ext2 file system labelled `config-2` holding a `network_data.json`, the OpenStack metadata service up",
        does: "no config drive (only iso9660 and vfat are, as cloud-init's ConfigDrive): never mounted, logged; the metadata service is asked and agrees",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Holds(STATE, "\"table\":19872"), FileWant::Absent("run/leasehook/configdrive")],
        log: "holds neither iso9660 nor vfat; ignored",
        not_in_log: "mount read-only",
        max_secs: 4.0,
        run: run_bounds_ext2_config_drive,
    };
    #[cfg(feature = "netns")]
    bounds_stalled_config_drive => Row {
        name: "bounds_stalled_config_drive",
        fault: "a config drive (ISO 9660) whose mount never returns (mount(8) held), the budget 1 s",
        does: "mount(8) is killed at the budget (at least one request's 2 s); the mount point is detached and removed; keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE), FileWant::Holds("run/leasehook/configdrive", "")],
        log: "mount did not finish within the budget; killed",
        not_in_log: "",
        max_secs: 4.0,
        run: run_bounds_stalled_config_drive,
    };
    #[cfg(feature = "netns")]
    bounds_config_drive_left_mounted => Row {
        name: "bounds_config_drive_left_mounted",
        fault: "a config drive left mounted under `run/leasehook/configdrive/` by a run that was killed",
        does: "the next event detaches it and removes its folder, then reads the drive",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Holds(STATE, "\"table\":19872"), FileWant::Absent("run/leasehook/configdrive/999999999-0")],
        log: "was left mounted by an earlier run (process 999999999 is gone); detached",
        not_in_log: "",
        max_secs: 4.0,
        run: run_bounds_config_drive_left_mounted,
    };
    #[cfg(feature = "netns")]
    bounds_azure_pace_lock_held => Row {
        name: "bounds_azure_pace_lock_held",
        fault: "Azure: another process holds the pace file's lock (`run/leasehook/azure-imds.lock`) for 10 s, the budget 1 s",
        does: "waits for the lock until the budget ends, then asks nothing (never an unpaced request); keeps the last applied state",
        exit: Some(0),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "held the lock that paces Azure IMDS requests for the whole budget",
        not_in_log: "",
        max_secs: 3.0,
        run: run_bounds_azure_pace_lock_held,
    };
    #[cfg(feature = "netns")]
    bounds_cni_folder_crowded => Row {
        name: "bounds_cni_folder_crowded",
        fault: "3000 other files beside the AWS VPC CNI's `10-aws.conflist` in `etc/cni/net.d`",
        does: "finds the CNI's file among them: a Kubernetes node (the primary's addresses are the CNI's); eth1, no CNI's ENI, is routed",
        exit: Some(0),
        kernel: Kernel::Exactly { rules: BASE_RULES, routes: BASE_ROUTES, addresses: &["eth1 10.98.1.21/32"] },
        files: &[FileWant::Holds(STATE, "\"table\":10001")],
        log: "Kubernetes node (AWS VPC CNI): AWS VPC CNI configuration etc/cni/net.d/10-aws.conflist",
        not_in_log: "",
        max_secs: 7.0,
        run: run_bounds_cni_folder_crowded,
    };
    #[cfg(feature = "netns")]
    bounds_apply_plan_dev_zero => Row {
        name: "bounds_apply_plan_dev_zero",
        fault: "`leasehook apply --plan /dev/zero`",
        does: "refuses the file (not a regular file) without reading it; changes nothing",
        exit: Some(1),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "failed to read \"/dev/zero\": not a regular file",
        not_in_log: "",
        max_secs: 2.0,
        run: || bounds_apply_plan(None),
    };
    #[cfg(feature = "netns")]
    bounds_apply_plan_lo => Row {
        name: "bounds_apply_plan_lo",
        fault: "`leasehook apply --plan` with a hand-written plan adding 10.200.0.5/8 to `lo`",
        does: "refuses the plan (the gate: `lo` is no Ethernet NIC); changes nothing",
        exit: Some(1),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "lo: not an Ethernet NIC",
        not_in_log: "",
        max_secs: 2.0,
        run: || bounds_apply_plan(Some("lo")),
    };
    #[cfg(feature = "netns")]
    bounds_apply_plan_wide => Row {
        name: "bounds_apply_plan_wide",
        fault: "`leasehook apply --plan` with a hand-written plan adding 10.200.0.5/8 to eth1 (no subnet route in it)",
        does: "refuses the plan (the gate: a prefix wider than /24 with no subnet); changes nothing",
        exit: Some(1),
        kernel: Kernel::AsBefore,
        files: &[FileWant::Unchanged(STATE)],
        log: "eth1: address 10.200.0.5/8 refused",
        not_in_log: "",
        max_secs: 2.0,
        run: || bounds_apply_plan(Some("eth1")),
    };
    #[cfg(feature = "netns")]
    bounds_watch_stream_dropped => Row {
        name: "bounds_watch_stream_dropped",
        fault: "`leasehook watch`: `/1.0/events` accepts the upgrade, then drops every stream at once (4 s, then SIGTERM)",
        does: "reconnects with the doubling backoff (a handshake alone resets nothing: at most 8 connections in 4 s), warns once; exits on SIGTERM",
        exit: Some(0),
        kernel: Kernel::NotInvolved,
        files: &[],
        log: "reconnecting with backoff (logged once until it answers)",
        not_in_log: "answers again",
        max_secs: 1.0,
        run: || bounds_watch(leasehook_tests::hostile_ws::Hostile::Drop),
    };
    #[cfg(feature = "netns")]
    bounds_watch_bad_frame => Row {
        name: "bounds_watch_bad_frame",
        fault: "`leasehook watch`: `/1.0/events` accepts the upgrade, then sends one frame with a reserved opcode on every stream (4 s, then SIGTERM)",
        does: "the same: doubling backoff, at most 8 connections in 4 s, one warning; exits on SIGTERM",
        exit: Some(0),
        kernel: Kernel::NotInvolved,
        files: &[],
        log: "reconnecting with backoff (logged once until it answers)",
        not_in_log: "answers again",
        max_secs: 1.0,
        run: || bounds_watch(leasehook_tests::hostile_ws::Hostile::BadFrame),
    };
    #[cfg(feature = "netns")]
    bounds_watch_ping_flood => Row {
        name: "bounds_watch_ping_flood",
        fault: "`leasehook watch`: `/1.0/events` floods pings and reads nothing (SIGTERM after 4 s)",
        does: "writes wait at most a tick: exits on SIGTERM within a second (the run's time is the stop's)",
        exit: Some(0),
        kernel: Kernel::NotInvolved,
        files: &[],
        log: "LXD events: following",
        not_in_log: "",
        max_secs: 1.0,
        run: || bounds_watch(leasehook_tests::hostile_ws::Hostile::PingFlood),
    };
}

/// An ISO 9660 config drive of the emulator's world at `image`, named
/// `dev/disk/by-label/config-2` below `root`.
fn iso_drive(root: &Path, image: &Path) {
    leasehook_tests::openstack_emulator::make_config_drive(
        &leasehook_tests::openstack_emulator::world_tree(),
        "config-2",
        image,
    );
    let by = root.join("dev/disk/by-label");
    std::fs::create_dir_all(&by).unwrap();
    symlink(image, by.join("config-2")).unwrap();
}

fn run_bounds_ext2_config_drive() -> Seen {
    let mut i = Instance::new("fbext2");
    i.openstack_bound();
    let src = i.dir.0.join("ext2src/openstack/latest");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join("network_data.json"),
        leasehook_tests::openstack_emulator::world_tree()["network_data"].to_string(),
    )
    .unwrap();
    let image = i.dir.0.join("ext2.img");
    let out = Command::new("/usr/sbin/mke2fs")
        .args(["-q", "-F", "-t", "ext2", "-L", "config-2", "-d"])
        .arg(i.dir.0.join("ext2src"))
        .arg(&image)
        .arg("1024")
        .output()
        .unwrap();
    assert!(out.status.success(), "mke2fs: {}", text(&out));
    let by = i.root.join("dev/disk/by-label");
    std::fs::create_dir_all(&by).unwrap();
    symlink(&image, by.join("config-2")).unwrap();
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_openstack(None, &json!({}));
    let (out, elapsed) = i.openstack_shim("RENEW", &url);
    i.seen(&out, elapsed, before, files)
}

fn run_bounds_stalled_config_drive() -> Seen {
    use leasehook_tests::configdrive::{self, Helper};
    let mut i = Instance::new("fbstall");
    i.openstack_bound();
    // mount(8) runs a helper that never returns (this thread's namespace only).
    let ns = configdrive::enter(Helper::Stalls);
    iso_drive(&i.root, &i.dir.0.join("cd.iso"));
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let (out, elapsed) = i.openstack_shim("RENEW", "http://127.0.0.1:9");
    let points = i.root.join("run/leasehook/configdrive");
    assert_eq!(
        std::fs::read_dir(&points).unwrap().count(),
        0,
        "mount point left"
    );
    let mut seen = i.seen(&out, elapsed, before, files);
    seen.keep.push(Box::new(ns));
    seen
}

fn run_bounds_config_drive_left_mounted() -> Seen {
    use leasehook_tests::configdrive::{self, Helper};
    let i = Instance::new("fbleft");
    let ns = configdrive::enter(Helper::Fuse);
    let image = i.dir.0.join("cd.iso");
    iso_drive(&i.root, &image);
    let (out, _) = i.openstack_shim("BOUND", "http://127.0.0.1:9");
    assert!(out.status.success(), "BOUND failed: {}", text(&out));
    assert_eq!(snap(&i.ns).0, OPENSTACK_RULES, "BOUND: {}", text(&out));
    // A run killed while the drive was mounted: its folder, its process gone.
    let left = i.root.join("run/leasehook/configdrive/999999999-0");
    std::fs::create_dir_all(&left).unwrap();
    let out = Command::new("mount")
        .args(["-t", "iso9660", "-o", "ro"])
        .arg(&image)
        .arg(&left)
        .output()
        .unwrap();
    assert!(out.status.success(), "mount: {}", text(&out));
    assert_eq!(ns.mounts_holding(&i.root.display().to_string()).len(), 1);
    let before = snap(&i.ns);
    let files: BTreeMap<PathBuf, Vec<u8>> = files_under(&i.root)
        .into_iter()
        .filter(|(p, _)| !p.starts_with(&left))
        .collect();
    let (out, elapsed) = i.openstack_shim("RENEW", "http://127.0.0.1:9");
    let left_mounted = ns.mounts_holding(&i.root.display().to_string());
    assert!(
        left_mounted.is_empty(),
        "still mounted: {left_mounted:?}; {}",
        text(&out)
    );
    let mut seen = i.seen(&out, elapsed, before, files);
    seen.keep.push(Box::new(ns));
    seen
}

fn run_bounds_azure_pace_lock_held() -> Seen {
    let mut i = Instance::new("fbpace");
    let url = i.start_azure(Some(&json!({})));
    let (out, _) = i.azure_shim("BOUND", &url, "1");
    assert!(out.status.success(), "BOUND failed: {}", text(&out));
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    // Another process (a stopped worker) holds the pace file's lock.
    let lock = i.root.join("run/leasehook/azure-imds.lock");
    assert!(lock.is_file());
    let holder = Proc(
        Command::new("flock")
            .arg(&lock)
            .args(["sleep", "10"])
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(200));
    let (out, elapsed) = i.azure_shim("RENEW", &url, "1");
    let mut seen = i.seen(&out, elapsed, before, files);
    seen.keep.push(Box::new(holder));
    seen
}

fn run_bounds_cni_folder_crowded() -> Seen {
    let mut i = Instance::new("fbcni");
    let dir = i.root.join("etc/cni/net.d");
    std::fs::create_dir_all(&dir).unwrap();
    for n in 0..3000 {
        std::fs::write(dir.join(format!("00-other-{n:05}.conf")), "{}").unwrap();
    }
    std::fs::write(dir.join("10-aws.conflist"), "{}").unwrap();
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let url = i.start_imds(&default_tree(), &Imds::Scenario(json!({})));
    // A budget the whole wait fits in on a loaded machine: the row is about the
    // folder, not the wait.
    let (out, elapsed) = i.shim_env(
        "BOUND",
        &url,
        &[
            ("LEASEHOOK_LOG_LEVEL", "debug"),
            ("LEASEHOOK_IMDS_BUDGET_S", "5"),
            ("LEASEHOOK_IMDS_SYNC_BUDGET_S", "5"),
        ],
    );
    i.seen(&out, elapsed, before, files)
}

/// A good BOUND, then `leasehook apply --plan` with `/dev/zero` (`None`) or a
/// plan adding 10.200.0.5/8 to `iface`, without a subnet route.
fn bounds_apply_plan(iface: Option<&str>) -> Seen {
    let mut i = Instance::new("fbplan");
    i.bound();
    let plan = match iface {
        None => PathBuf::from("/dev/zero"),
        Some(dev) => {
            let mac = if dev == "lo" {
                "00:00:00:00:00:00"
            } else {
                MAC1
            };
            let body = json!({"profile": "ec2-net-utils", "interfaces": [{
                "name": dev, "mac": mac, "primary": false, "families": ["ipv4"],
                "table": 10050, "metric": null,
                "addresses": [{"addr": "10.200.0.5/8", "dev": dev}],
                "routes": [], "rules": [], "missing": []}]});
            i.dir.file("plan.json", &body.to_string())
        }
    };
    let before = snap(&i.ns);
    let files = files_under(&i.root);
    let t = Instant::now();
    let out = command(Some(&i.ns), None, &[], &leasehook_bin())
        .arg("apply")
        .arg("--plan")
        .arg(&plan)
        .arg("--root")
        .arg(&i.root)
        .output()
        .unwrap();
    let elapsed = t.elapsed();
    let lo = i.ns.ip(&["-j", "address", "show", "dev", "lo"]);
    assert!(!lo.contains("10.200.0.5"), "added to lo: {lo}");
    i.seen(&out, elapsed, before, files)
}

/// `leasehook watch` on an LXD root (booted by `leasehook init --local` against
/// the emulator), its socket then replaced by a server that misbehaves as `how`
/// says; SIGTERM after 4 s. The row's time is the stop's (SIGTERM to exit).
fn bounds_watch(how: leasehook_tests::hostile_ws::Hostile) -> Seen {
    use leasehook_tests::hostile_ws::{self, Hostile};
    let b = BootRoot::new("fbwatch");
    let d = b.lxd(lxd_config());
    let (out, _) = b.init(&[]);
    assert!(out.status.success(), "boot: {}", text(&out));
    drop(d);
    let _ = std::fs::remove_file(b.socket());
    let count = hostile_ws::serve(&b.socket(), how);
    let files = files_under(b.path());
    let mut cmd = command(None, None, &[], &leasehook_bin());
    cmd.args(["watch", "--config", "/dev/null", "--root"])
        .arg(b.path())
        .env_remove("LEASEHOOK_ROOT")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    std::thread::sleep(Duration::from_secs(4));
    let t = Instant::now();
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    let elapsed = t.elapsed();
    let log = text(&out);
    let seen = count.load(std::sync::atomic::Ordering::SeqCst);
    if how == Hostile::PingFlood {
        assert_eq!(seen, 1, "{seen} connections; {log}");
    } else {
        // 100 ms doubling: 0.1 + 0.2 + 0.4 + 0.8 + 1.6 s, about 6 tries in 4 s.
        assert!(seen <= 8, "{seen} connections in 4 s; {log}");
        // The stream's warnings (the resync's own failed requests aside).
        let warnings = log
            .lines()
            .filter(|l| l.contains("WARN: LXD events: the stream") || l.contains("cannot follow"))
            .count();
        assert_eq!(warnings, 1, "{warnings} warnings; {log}");
    }
    b.seen(&out, elapsed, files, Vec::new())
}

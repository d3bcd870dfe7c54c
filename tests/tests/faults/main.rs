// SPDX-License-Identifier: Apache-2.0
//! The fault matrix (issue 10, item 2): one table of every fault leasehook must
//! survive, with what it does, the kernel state and the files it leaves, and the
//! log line a user sees, one module an area, each with its rows (its `ROWS`).
//! `docs/faults.md` is the same table; `docs_list_every_row_exactly` checks that
//! each row appears there word for word.
//!
//! Each row runs the real binaries where it can — `leasehook-dhclient` with a
//! synthetic dhclient environment in a network namespace of the test's own, its
//! IMDS emulator inside that namespace on 127.0.0.1; `leasehook init` on a
//! temporary root against the devlxd emulator — and the library where a fault has
//! to fall between two steps (a link deleted after the plan was validated). The
//! common checker ([`matrix::check`]) asserts, for every row: the exit status, the log
//! substring, the kernel (through `ip -j` in the row's namespace), the files under
//! the root, no temporary file left anywhere under the root, and that the run did
//! not outlast its budget. What repeats for every cloud (a good BOUND, then a
//! RENEW while the metadata service misbehaves) is one function over the cloud
//! table ([`instance::renew`], `leasehook_tests::clouds::Cloud`).
//!
//! | module | rows |
//! |---|---|
//! | [`imds`] | EC2's IMDS through `leasehook-dhclient` |
//! | [`azure`], [`gce`], [`aliyun`], [`openstack`] | the same faults of each cloud's metadata service |
//! | [`oracle`] | OCI's, through `leasehook refresh` (a secondary VNIC has no DHCP) |
//! | [`boot`] | LXD and the boot cache, through `leasehook init --local` |
//! | [`disk`] | a full file system under the state and the cache |
//! | [`kernel`] | a link deleted mid-apply, other tools' rules, routes and addresses |
//! | [`gate`] | the address gate (issue 18, items 1-4) |
//! | [`bounded`] | bounded hooks (issue 18, items 5-10) |
//! | [`links`] | which link is a NIC, which NIC has no DHCP (issue 30) |
//! | [`gate30`] | hostile clouds: a router's address, a wide subnet, next hops (issue 30) |
//! | [`bounds`] | config drives, Azure's pace lock, the CNI folder, `apply --plan`, `watch` (issue 30) |
//!
//! Rows that need root (namespaces, mounts, dropping capabilities) carry
//! `#[cfg(feature = "netns")]`; without the feature they are not compiled into
//! tests, and with it they fail, never skip, when root is missing.

// A panic is how a row fails; `Value[..]` yields Null; `check` prints what a
// user would read (with --nocapture).
#![cfg(test)]

use std::fmt::Write as _;

use leasehook_tests::workspace_root;

use crate::matrix::Row;

/// Declares an area's rows once: its table (`ROWS`, for the doc check) and one
/// test per row (with the row's attributes, such as the `netns` gate).
macro_rules! matrix {
    ($($(#[$attr:meta])* $name:ident => $row:expr;)*) => {
        pub(crate) const ROWS: &[$crate::matrix::Row] = &[$($row),*];
        $(
            #[test]
            $(#[$attr])*
            fn $name() {
                let row = $row;
                assert_eq!(row.name, stringify!($name));
                $crate::matrix::check(&row);
            }
        )*
    };
}

mod aliyun;
mod azure;
mod boot;
mod bounded;
mod bounds;
mod disk;
mod gate;
mod gate30;
mod gce;
mod imds;
mod instance;
mod kernel;
mod links;
mod matrix;
mod openstack;
mod oracle;

/// Every row, area by area.
fn every_row() -> Vec<&'static Row> {
    [
        imds::ROWS,
        azure::ROWS,
        gce::ROWS,
        aliyun::ROWS,
        openstack::ROWS,
        oracle::ROWS,
        boot::ROWS,
        disk::ROWS,
        kernel::ROWS,
        gate::ROWS,
        bounded::ROWS,
        links::ROWS,
        gate30::ROWS,
        bounds::ROWS,
    ]
    .into_iter()
    .flatten()
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

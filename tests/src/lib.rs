// SPDX-License-Identifier: Apache-2.0
//! Support code for leasehook's end-to-end and differential tests.

// Test support: a panic is how a test reports failure, and `Value[..]` (serde_json)
// yields Null instead of panicking.
#![allow(
    clippy::print_stderr,
    clippy::panic,
    clippy::missing_panics_doc,
    clippy::indexing_slicing
)]

pub mod aliyun_emulator;
pub mod bench;
pub mod client;
pub mod clients;
pub mod cloud_rows;
pub mod clouds;
pub mod configdrive;
pub mod hostile_ws;
pub mod netns;
pub mod oracle_emulator;
pub mod scenarios;
pub mod shell;
pub mod vm;
pub mod world;

use std::path::PathBuf;

pub mod azure_emulator;
pub mod devlxd;
pub mod ds_identify;
pub mod emulator;
pub mod gce_emulator;
pub mod openstack_emulator;

/// Whether the tests run in CI, where a missing prerequisite must fail the test
/// instead of skipping it.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| v == "true" || v == "1")
}

/// The workspace root (the folder holding the root `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent().map_or(here.clone(), PathBuf::from)
}

/// The documents both packages ship, as installed paths
/// (`/usr/share/doc/leasehook/NAME.md.gz`), sorted: every `docs/*.md` but the
/// developers' ones `packaging/developer-docs` lists, exactly what
/// `scripts/build-deb.sh` and `scripts/build-rpm.sh` compress.
pub fn packaged_docs() -> Vec<String> {
    let root = workspace_root();
    let list = root.join("packaging/developer-docs");
    let text = std::fs::read_to_string(&list).unwrap_or_else(|e| panic!("{}: {e}", list.display()));
    let developers: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .unwrap_or_else(|e| panic!("docs/: {e}"))
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            std::path::Path::new(n)
                .extension()
                .is_some_and(|e| e == "md")
        })
        .filter(|n| !developers.contains(&n.as_str()))
        .map(|n| format!("/usr/share/doc/leasehook/{n}.gz"))
        .collect();
    docs.sort();
    docs
}

/// The command `hooks/udev/90-leasehook.rules` runs for a network interface's
/// `action` (`add`, `remove`), as udev would run it for `ifname`: the rule's
/// `RUN+=` words with `$name` replaced. Panics when the file has no such rule, so a
/// test of the udev path fails when the rule is gone.
pub fn udev_command(action: &str, ifname: &str) -> Vec<String> {
    let rules = std::fs::read_to_string(workspace_root().join("hooks/udev/90-leasehook.rules"))
        .unwrap_or_else(|e| panic!("hooks/udev/90-leasehook.rules: {e}"));
    let wanted = format!("ACTION==\"{action}\"");
    let line = rules
        .lines()
        .find(|l| {
            !l.trim_start().starts_with('#')
                && l.contains(&wanted)
                && l.contains("SUBSYSTEM==\"net\"")
        })
        .unwrap_or_else(|| panic!("no net {action} rule in hooks/udev/90-leasehook.rules"));
    let run = line
        .split("RUN+=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_else(|| panic!("no RUN+= in {line:?}"));
    run.split_whitespace()
        .map(|w| w.replace("$name", ifname))
        .collect()
}

/// What a NIC's `add` event ends up running: the udev rule hands the work to a
/// systemd template unit (`systemctl --no-block start UNIT@IF.service`, because
/// udev's programs have no network), whose `ExecStart=` is returned with `%i`
/// replaced by `ifname`. Panics when the chain is broken (no rule, another
/// command, no such unit in `hooks/systemd/`, no `ExecStart=`).
pub fn udev_add_command(ifname: &str) -> Vec<String> {
    let run = udev_command("add", ifname);
    let words: Vec<&str> = run.iter().map(String::as_str).collect();
    let unit = match words.as_slice() {
        ["/usr/bin/systemctl", "--no-block", "start", unit] => *unit,
        _ => panic!("the add rule runs {run:?}, not systemctl --no-block start UNIT"),
    };
    let Some((name, instance)) = unit
        .strip_suffix(".service")
        .and_then(|u| u.split_once('@'))
    else {
        panic!("{unit} is not an instance of a template unit");
    };
    assert_eq!(instance, ifname, "{unit}");
    let template = format!("{name}@.service");
    let text = std::fs::read_to_string(workspace_root().join("hooks/systemd").join(&template))
        .unwrap_or_else(|e| panic!("hooks/systemd/{template}: {e}"));
    // `-`: systemd's prefix for "a failure does not fail the unit".
    let exec = text
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .map_or_else(
            || panic!("no ExecStart= in {template}"),
            |e| e.trim_start_matches('-'),
        );
    exec.split_whitespace()
        .map(|w| w.replace("%i", ifname))
        .collect()
}

/// A small deterministic random generator (`SplitMix64`), so generated test inputs
/// are the same on every run and a failure names a reproducible case.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// Shuffles a slice in place (Fisher–Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = usize::try_from(self.below(i as u64 + 1)).unwrap_or(0);
            items.swap(i, j);
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
//! The applied digest: how `leasehook apply --plan` knows, without parsing the
//! plan or the state files, that it would change nothing (issue 32 item 6).
//!
//! [`digest`] is pure: one hash over every input the apply decides from, the
//! plan file's bytes, the state files' bytes ([`StateFiles`]) and the kernel as
//! one dump of each kind read it ([`Snapshot`]: links with their indexes and
//! MACs, leasehook's rules and routes, every address with its owner flag, the
//! other protocols' routes in tables leasehook may use), each as parsed and
//! normalized (never the messages' bytes: an address's lifetimes and a link's
//! counters change all the time), plus the build of the program deciding
//! ([`build_identity`]). An apply that changed nothing (no netlink write, no state
//! file written, no address left to another tool) records its digest
//! ([`record`]); the next apply whose inputs hash to the same value would make
//! the same decision from the same inputs, so it reports the same "0 changes"
//! without parsing, gating and diffing. Any other value, or a digest file that
//! is missing, unreadable, a symlink or a FIFO, or not of this form, is the full
//! path. The kernel is still dumped every time: drift (a rule deleted by hand)
//! changes the digest, and the full path repairs it.
//!
//! Performs IO only in [`recorded`], [`record`] and [`build_identity`]: the
//! digest file is `run/leasehook/applied.digest` (written atomically, never
//! followed through a symlink: [`crate::fs`]).

use std::hash::{Hash, Hasher};

use super::Snapshot;
use super::state::{self, Paths, StateFiles};
use crate::error::Result;
use crate::model::IfName;

/// The digest file's name, in `run/leasehook`.
pub const FILE: &str = "applied.digest";

/// The first word of the digest file's line, with the form's version.
const TAG: &str = "leasehook-applied-v1";

/// The largest digest file read (a line per file, 15 interface names are well
/// under 1 KiB).
const MAX_BYTES: u64 = 64 * 1024;

/// A recorded digest and the interfaces of its plan (sorted, each once): the
/// locks the check must hold before it reads the state files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The digest of the inputs of the apply that changed nothing.
    pub digest: u64,
    /// The plan's interfaces.
    pub names: Vec<IfName>,
}

/// Pure: the digest of one apply's inputs (see the module docs). `names` are
/// the plan's interfaces, sorted, each once; `build` is [`build_identity`]'s.
pub fn digest(
    build: u64,
    plan: &[u8],
    names: &[IfName],
    states: &StateFiles,
    seen: &Snapshot,
) -> u64 {
    // SipHash-1-3 with std's fixed keys: the same value in every run of one
    // build, which is all a digest kept in /run needs (`build` is hashed too,
    // so another build's digest never matches).
    let mut h = std::hash::DefaultHasher::new();
    TAG.hash(&mut h);
    build.hash(&mut h);
    plan.hash(&mut h);
    names.hash(&mut h);
    // The folder's error and each file's are told apart from bytes and from
    // each other only by their text: the full path treats every unreadable
    // file alike (its own: set aside and rewritten, so never recorded; another
    // interface's: passed over).
    states.folder.as_ref().map(ToString::to_string).hash(&mut h);
    states.files.len().hash(&mut h);
    for (file, bytes) in &states.files {
        file.hash(&mut h);
        match bytes {
            Ok(b) => (0u8, b.as_slice()).hash(&mut h),
            Err(e) => (1u8, e.to_string()).hash(&mut h),
        }
    }
    seen.links.hash(&mut h);
    seen.owned.rules.hash(&mut h);
    seen.owned.routes.hash(&mut h);
    seen.owned.addresses.hash(&mut h);
    seen.addresses.hash(&mut h);
    seen.foreign_routes.hash(&mut h);
    h.finish()
}

/// The running program's build: the device, inode, size and modification time
/// of `/proc/self/exe`. A package upgrade replaces the file, so a digest that
/// an older build recorded (`/run` outlives the upgrade) never matches: the new
/// build may decide otherwise from the same inputs. `None` (no `/proc`): no
/// digest is checked or recorded.
pub fn build_identity() -> Option<u64> {
    use std::os::unix::fs::MetadataExt as _;
    let m = std::fs::metadata("/proc/self/exe").ok()?;
    let mut h = std::hash::DefaultHasher::new();
    (
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        env!("CARGO_PKG_VERSION"),
    )
        .hash(&mut h);
    Some(h.finish())
}

/// Pure: the digest file's text for `recorded`: one line, the tag, the digest
/// in hex, then the interface names.
pub fn render(recorded: &Recorded) -> String {
    let mut line = format!("{TAG} {:016x}", recorded.digest);
    for n in &recorded.names {
        line.push(' ');
        line.push_str(n.as_str());
    }
    line.push('\n');
    line
}

/// Pure: [`render`]'s text read back; `None` for anything else (another
/// version, a name leasehook would refuse, names not sorted or repeated).
pub fn parse(text: &[u8]) -> Option<Recorded> {
    let text = std::str::from_utf8(text).ok()?.strip_suffix('\n')?;
    let mut words = text.split(' ');
    if words.next()? != TAG {
        return None;
    }
    let hex = words.next()?;
    if hex.len() != 16 {
        return None;
    }
    let digest = u64::from_str_radix(hex, 16).ok()?;
    let names = words
        .map(|w| IfName::try_new(w).ok())
        .collect::<Option<Vec<_>>>()?;
    if names.is_empty() || !names.is_sorted_by(|a, b| a < b) {
        return None;
    }
    Some(Recorded { digest, names })
}

/// The recorded digest, when there is one that reads: missing, a symlink, a
/// FIFO or another special file, too large or not [`render`]'s form is `None`
/// (the full path; never waited on, never followed).
pub fn recorded(paths: &Paths) -> Option<Recorded> {
    match state::read_run_file(paths, None, FILE, MAX_BYTES) {
        Ok(Some(bytes)) => {
            let r = parse(&bytes);
            if r.is_none() {
                log::debug!("{FILE}: not a digest leasehook wrote; applying in full");
            }
            r
        }
        Ok(None) => None,
        Err(e) => {
            log::debug!("{e}; applying in full");
            None
        }
    }
}

/// Records `recorded` (atomically, mode 0600).
pub fn record(paths: &Paths, recorded: &Recorded) -> Result<()> {
    state::write_run_file(paths, None, FILE, render(recorded).as_bytes(), 0o600)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::KernelLink;
    use crate::model::{Address, Rule};

    fn eth(n: u32) -> IfName {
        IfName::try_new(&format!("eth{n}")).unwrap()
    }

    fn world() -> (Vec<IfName>, StateFiles, Snapshot) {
        let states = StateFiles {
            files: vec![("eth1.json".to_owned(), Ok(b"{}".to_vec()))],
            ..StateFiles::default()
        };
        let mut seen = Snapshot {
            links: vec![KernelLink {
                index: 3,
                name: eth(1),
                mac: Some("02:00:00:00:00:02".parse().unwrap()),
            }],
            addresses: vec![(
                Address {
                    addr: "10.0.1.21/32".parse().unwrap(),
                    dev: eth(1),
                },
                true,
            )],
            ..Snapshot::default()
        };
        seen.owned.rules.insert(Rule {
            from: "10.0.1.21/32".parse().unwrap(),
            to: None,
            table: 10001,
            priority: Some(10001),
        });
        (vec![eth(1)], states, seen)
    }

    #[test]
    fn every_input_moves_the_digest() {
        let (names, states, seen) = world();
        let at = |plan: &[u8], names: &[IfName], st: &StateFiles, seen: &Snapshot| {
            digest(7, plan, names, st, seen)
        };
        let base = at(b"plan", &names, &states, &seen);
        assert_eq!(base, at(b"plan", &names, &states, &seen), "not stable");
        assert_ne!(base, digest(8, b"plan", &names, &states, &seen), "build");
        assert_ne!(base, at(b"plan ", &names, &states, &seen), "plan");
        assert_ne!(
            base,
            at(b"plan", &[eth(1), eth(2)], &states, &seen),
            "names"
        );
        let mut st = StateFiles::default();
        assert_ne!(base, at(b"plan", &names, &st, &seen), "state gone");
        st.files = vec![("eth1.json".to_owned(), Ok(b"{ }".to_vec()))];
        assert_ne!(base, at(b"plan", &names, &st, &seen), "state edited");
        let mut k = seen.clone();
        k.owned.rules.clear();
        assert_ne!(base, at(b"plan", &names, &states, &k), "rule deleted");
        let mut k = seen.clone();
        k.addresses[0].1 = false;
        assert_ne!(base, at(b"plan", &names, &states, &k), "address owner");
        let mut k = seen.clone();
        k.links[0].index = 4;
        assert_ne!(base, at(b"plan", &names, &states, &k), "link index");
        let mut k = seen.clone();
        k.addresses.clear();
        assert_ne!(base, at(b"plan", &names, &states, &k), "address deleted");
        // What the apply does not read: the main table's routes.
        let mut k = seen;
        k.main_routes.push(crate::apply::MainRoute {
            to: "0.0.0.0/0".parse().unwrap(),
            via: Vec::new(),
            oif: Some(3),
        });
        assert_eq!(base, at(b"plan", &names, &states, &k), "main table");
    }

    #[test]
    fn the_file_reads_back_and_nothing_else_does() {
        let r = Recorded {
            digest: 0x0123_4567_89ab_cdef,
            names: vec![eth(0), eth(1)],
        };
        let text = render(&r);
        assert_eq!(
            text,
            "leasehook-applied-v1 0123456789abcdef eth0 eth1\n".to_owned()
        );
        assert_eq!(parse(text.as_bytes()), Some(r));
        for bad in [
            "",
            "leasehook-applied-v1 0123456789abcdef eth0 eth1",
            "leasehook-applied-v2 0123456789abcdef eth0\n",
            "leasehook-applied-v1 123456789abcdef eth0\n",
            "leasehook-applied-v1 0123456789abcdeg eth0\n",
            "leasehook-applied-v1 0123456789abcdef\n",
            "leasehook-applied-v1 0123456789abcdef eth1 eth0\n",
            "leasehook-applied-v1 0123456789abcdef eth0 eth0\n",
            "leasehook-applied-v1 0123456789abcdef ../x\n",
        ] {
            assert_eq!(parse(bad.as_bytes()), None, "{bad:?}");
        }
    }
}

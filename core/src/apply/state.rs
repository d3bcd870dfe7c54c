// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the per-interface state files and locks under `/run/leasehook/`.
//!
//! `<root>/run/leasehook/iface/<ifname>.json` records what was applied for an
//! interface, per family, so `leasehook status` can show it and teardown can find
//! the rules of a link that is already gone. Writes are atomic (a temporary file in
//! the same folder, renamed over the name; no run-time file is fsynced: `/run` is a
//! tmpfs, and the kernel objects a state file records do not outlive the machine
//! either, see [`crate::fs`]). `<root>/run/leasehook/lock/
//! <ifname>.lock` serialises everything that changes one interface. Every path takes
//! a root prefix, so tests never touch the real `/run`.
//!
//! Every run-time file (these, and the hooks' event counters, hand-overs, refresh
//! stamps and the IMDS token) goes through [`crate::fs`]: from `run/leasehook` down
//! no symlink is followed (a symlinked `run/leasehook`, or a link at any folder or
//! file below it, is refused with an error naming it), only regular files are
//! opened, never blocking (a FIFO is refused at once), and reads are capped
//! ([`Paths::run_folder`], [`read_run_file`], [`write_run_file`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::diff::State;
use crate::error::{Error, Result};
use crate::fs::Dir;
use crate::model::{
    Address, Family, IfName, InterfacePlan, Lease, MacAddr, Missing, Profile, Route, Rule,
};

/// The version written into state files; a file of another version is refused.
pub const STATE_VERSION: u32 = 1;

/// The largest state file read, in bytes (a plan of hundreds of addresses is a
/// few tens of KiB).
pub const MAX_STATE_BYTES: u64 = 4 * 1024 * 1024;

/// The folders below `run/leasehook`.
pub const IFACE: &str = "iface";
/// The per-interface locks' folder.
pub const LOCK: &str = "lock";

/// Where leasehook keeps its runtime files, under a root prefix (`/` in production).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    root: PathBuf,
}

impl Paths {
    /// Paths under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The root prefix.
    pub fn root(&self) -> &std::path::Path {
        &self.root
    }

    /// `<root>/run/leasehook`.
    pub fn run_dir(&self) -> PathBuf {
        self.root.join("run/leasehook")
    }

    /// `<root>/run/leasehook/iface`.
    pub fn iface_dir(&self) -> PathBuf {
        self.run_dir().join("iface")
    }

    /// `<root>/run/leasehook/iface/<name>.json`.
    pub fn state_file(&self, name: &IfName) -> PathBuf {
        self.iface_dir().join(format!("{name}.json"))
    }

    /// `<root>/run/leasehook/lock/<name>.lock`.
    pub fn lock_file(&self, name: &IfName) -> PathBuf {
        self.run_dir().join(LOCK).join(format!("{name}.lock"))
    }

    /// Opens `<root>/run/leasehook` (`sub: None`) or a folder below it, creating
    /// them (mode 0755) when `create`; `Ok(None)` when missing and not created.
    /// `<root>/run` is the system's; from `leasehook` down a symlink, or anything
    /// but a folder, is refused with an error that names it.
    pub fn run_folder(&self, sub: Option<&str>, create: bool) -> Result<Option<Dir>> {
        crate::fs::run_folder(&self.root, sub, create)
    }
}

fn run_folder_for_write(paths: &Paths, sub: Option<&str>) -> Result<Dir> {
    crate::fs::run_folder_for_write(&paths.root, sub)
}

/// Reads the run-time file `name` (in `sub` below `run/leasehook`, or in it), at
/// most `limit` bytes: `Ok(None)` when it (or its folder) is missing; a symlink, a
/// FIFO or other special file, or a file over the limit is an error naming it.
pub fn read_run_file(
    paths: &Paths,
    sub: Option<&str>,
    name: &str,
    limit: u64,
) -> Result<Option<Vec<u8>>> {
    let Some(dir) = paths.run_folder(sub, false)? else {
        return Ok(None);
    };
    dir.read(name, limit).map_err(|p| dir.error(name, &p))
}

/// Replaces the run-time file `name` atomically, with `mode` (see [`crate::fs`]).
pub fn write_run_file(
    paths: &Paths,
    sub: Option<&str>,
    name: &str,
    bytes: &[u8],
    mode: u32,
) -> Result<()> {
    run_folder_for_write(paths, sub)?.write_atomic(name, bytes, mode)
}

/// Removes the run-time file `name` (missing is fine; a symlink there is removed,
/// never its target).
pub fn remove_run_file(paths: &Paths, sub: Option<&str>, name: &str) -> Result<()> {
    let Some(dir) = paths.run_folder(sub, false)? else {
        return Ok(());
    };
    dir.remove(name)
        .map(|_| ())
        .map_err(|p| dir.error(name, &p))
}

/// Sets the modification time of the run-time file `name` to now, creating it.
pub fn touch_run_file(paths: &Paths, sub: &str, name: &str) -> Result<()> {
    let dir = run_folder_for_write(paths, Some(sub))?;
    dir.touch(name, 0o644).map_err(|p| dir.error(name, &p))
}

/// The modification time of the run-time file `name`; `Ok(None)` when missing.
pub fn run_file_modified(
    paths: &Paths,
    sub: &str,
    name: &str,
) -> Result<Option<std::time::SystemTime>> {
    let Some(dir) = paths.run_folder(Some(sub), false)? else {
        return Ok(None);
    };
    dir.modified(name).map_err(|p| dir.error(name, &p))
}

/// What is applied for one family of an interface.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FamilyState {
    /// Rules.
    pub rules: Vec<Rule>,
    /// Routes.
    pub routes: Vec<Route>,
    /// Secondary addresses.
    pub addresses: Vec<Address>,
    /// The lease the objects were planned from (kept so `leasehook refresh` can plan
    /// again between leases); `None` for plans applied by hand.
    #[serde(default)]
    pub lease: Option<Lease>,
}

/// What is applied for one interface (the content of its state file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceState {
    /// [`STATE_VERSION`].
    pub version: u32,
    /// The interface.
    pub name: IfName,
    /// Its MAC when the plan was applied.
    pub mac: MacAddr,
    /// The scheme of the applied plan.
    pub profile: Profile,
    /// The table of the applied plan.
    pub table: Option<u32>,
    /// The NIC was the primary when the plan was applied (EC2's primary ENI
    /// cannot be detached: `refresh` need not ask again).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub primary: bool,
    /// What is applied, per family.
    pub families: BTreeMap<Family, FamilyState>,
    /// What the metadata did not say when the state was last recorded (empty when
    /// IMDS agreed with the leases).
    #[serde(default)]
    pub missing: Vec<Missing>,
    /// What the address gate refused when the state was last recorded, and a
    /// table another NIC claims too (shown by `leasehook status`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<crate::gate::Refused>,
    /// When the state last changed, in milliseconds since the Unix epoch.
    #[serde(default)]
    pub applied_at_ms: u64,
}

impl InterfaceState {
    /// Records `plan` (for the families it covers) over what `previous` recorded for
    /// the other families.
    pub fn record(previous: Option<Self>, plan: &InterfacePlan, profile: Profile) -> Self {
        let previous_at = previous.as_ref().map_or(0, |p| p.applied_at_ms);
        let mut families = previous.map(|p| p.families).unwrap_or_default();
        for fam in &plan.families {
            families.insert(
                *fam,
                FamilyState {
                    rules: plan
                        .rules
                        .iter()
                        .filter(|r| r.family() == *fam)
                        .cloned()
                        .collect(),
                    routes: plan
                        .routes
                        .iter()
                        .filter(|r| r.family() == *fam)
                        .cloned()
                        .collect(),
                    addresses: plan
                        .addresses
                        .iter()
                        .filter(|a| a.family() == *fam)
                        .cloned()
                        .collect(),
                    lease: None,
                },
            );
        }
        Self {
            version: STATE_VERSION,
            name: plan.name.clone(),
            mac: plan.mac,
            profile,
            table: plan.table,
            primary: plan.primary,
            families,
            missing: plan
                .missing
                .iter()
                .filter(|m| m.is_metadata())
                .cloned()
                .collect(),
            refused: plan.refused.clone(),
            applied_at_ms: previous_at,
        }
    }

    /// Records the leases the plan was made from, per family.
    #[must_use]
    pub fn with_leases(mut self, leases: &[Lease]) -> Self {
        for l in leases {
            if let Some(f) = self.families.get_mut(&l.family) {
                f.lease = Some(l.clone());
            }
        }
        self
    }

    /// Whether two states hold the same content (the time they were written aside).
    pub fn same_content(&self, other: &Self) -> bool {
        let mut a = self.clone();
        a.applied_at_ms = other.applied_at_ms;
        a == *other
    }

    /// The leases recorded, per family.
    pub fn leases(&self) -> Vec<Lease> {
        self.families
            .values()
            .filter_map(|f| f.lease.clone())
            .collect()
    }

    /// Forgets one family (or all); `true` when nothing is left.
    pub fn forget(&mut self, family: Option<Family>) -> bool {
        match family {
            Some(f) => {
                self.families.remove(&f);
            }
            None => self.families.clear(),
        }
        self.families.is_empty()
    }

    /// Every table this interface's rules and routes use.
    pub fn tables(&self) -> BTreeSet<u32> {
        self.families
            .values()
            .flat_map(|f| {
                f.rules
                    .iter()
                    .map(|r| r.table)
                    .chain(f.routes.iter().map(|r| r.table))
            })
            .chain(self.table)
            .collect()
    }

    /// Everything recorded, as one set.
    pub fn objects(&self) -> State {
        let mut s = State::default();
        for f in self.families.values() {
            s.rules.extend(f.rules.iter().cloned());
            s.routes.extend(f.routes.iter().cloned());
            s.addresses.extend(f.addresses.iter().cloned());
        }
        s
    }
}

/// Reads an interface's state file; `None` when there is none. A file that is a
/// symlink, unreadable, corrupt or of another version is an error (the caller logs
/// it and sets the file aside with [`set_aside`]).
pub fn read_state(paths: &Paths, name: &IfName) -> Result<Option<InterfaceState>> {
    let Some(dir) = paths.run_folder(Some(IFACE), false)? else {
        return Ok(None);
    };
    read_state_in(&dir, &format!("{name}.json"))
}

fn read_state_in(dir: &Dir, file: &str) -> Result<Option<InterfaceState>> {
    let Some(bytes) = dir
        .read(file, MAX_STATE_BYTES)
        .map_err(|p| dir.error(file, &p))?
    else {
        return Ok(None);
    };
    parse_state(&bytes, &dir.path().join(file)).map(Some)
}

/// A state file's content, read from `path`: corrupt or of another version is an
/// error naming it.
fn parse_state(bytes: &[u8], path: &std::path::Path) -> Result<InterfaceState> {
    let path = || format!("{path:?}");
    let st: InterfaceState = serde_json::from_slice(bytes).map_err(|e| Error::Corrupt {
        path: path(),
        what: "corrupt state file",
        source: Box::new(e),
    })?;
    if st.version != STATE_VERSION {
        return Err(Error::Io {
            path: path(),
            message: format!("unknown state version {}", st.version),
        });
    }
    Ok(st)
}

/// Every state file of `run/leasehook/iface` as bytes, read once: what `leasehook
/// apply` both parses ([`StateFiles::own`], [`StateFiles::others`]) and hashes
/// into its applied digest ([`super::digest`]), so the digest covers exactly
/// what the decision was made from.
#[derive(Debug, Default)]
pub struct StateFiles {
    /// The folder (`run/leasehook/iface`): the files' names are below it.
    pub dir: PathBuf,
    /// Why the folder could not be listed (a symlinked `iface`, a file there).
    pub folder: Option<Error>,
    /// Each `<name>.json` record (temporary files left over skipped), sorted by
    /// file name: its bytes, or why it could not be read (a FIFO, a symlink, too
    /// large).
    pub files: Vec<(String, Result<Vec<u8>>)>,
}

/// Reads every state file as [`list_states`] would, keeping the bytes.
pub fn read_state_files(paths: &Paths) -> StateFiles {
    let mut out = StateFiles {
        dir: paths.iface_dir(),
        ..StateFiles::default()
    };
    let (files, errors) = list_records(paths, IFACE, |dir, file, _| {
        Ok(match dir.read(file, MAX_STATE_BYTES) {
            // Gone since the folder was listed.
            Ok(None) => None,
            Ok(Some(bytes)) => Some((file.to_owned(), Ok(bytes))),
            Err(p) => Some((file.to_owned(), Err(dir.error(file, &p)))),
        })
    });
    out.files = files;
    // list_records reports only the folder's own errors here: every file's
    // is kept above.
    out.folder = errors.into_iter().next();
    out
}

impl StateFiles {
    /// Interface `name`'s state as [`read_state_or_set_aside`] reads it: a file
    /// that cannot be read or parsed is logged and set aside.
    pub fn own(&self, paths: &Paths, name: &IfName) -> Option<InterfaceState> {
        let bad = |e: &dyn std::fmt::Display| {
            match set_aside(paths, name) {
                Ok(to) => log::warn!("{e}; set aside as {to:?}"),
                Err(e2) => log::warn!("{e}; could not set it aside: {e2}"),
            }
            None
        };
        if let Some(e) = &self.folder {
            return bad(e);
        }
        let file = format!("{name}.json");
        match &self.files.iter().find(|(f, _)| *f == file)?.1 {
            Err(e) => bad(e),
            Ok(bytes) => match parse_state(bytes, &self.dir.join(&file)) {
                Ok(st) => Some(st),
                Err(e) => bad(&e),
            },
        }
    }

    /// Every readable state but those of `skip`, as [`list_states_but`] reads
    /// them (a file that cannot be read or parsed is passed over).
    pub fn others(&self, skip: &[&IfName]) -> Vec<InterfaceState> {
        self.files
            .iter()
            .filter(|(f, _)| {
                let stem = f.strip_suffix(".json").unwrap_or(f);
                !skip.iter().any(|s| s.as_str() == stem)
            })
            .filter_map(|(f, bytes)| parse_state(bytes.as_ref().ok()?, &self.dir.join(f)).ok())
            .collect()
    }
}

/// Reads an interface's state; a bad file is logged and set aside, never fatal:
/// the kernel, observed by protocol number, is the truth, and the file only helps.
pub fn read_state_or_set_aside(paths: &Paths, name: &IfName) -> Option<InterfaceState> {
    match read_state(paths, name) {
        Ok(st) => st,
        Err(e) => {
            match set_aside(paths, name) {
                Ok(to) => log::warn!("{e}; set aside as {to:?}"),
                Err(e2) => log::warn!("{e}; could not set it aside: {e2}"),
            }
            None
        }
    }
}

/// Renames a bad state file to `<name>.json.corrupt` so it is kept for inspection
/// but no longer read.
pub fn set_aside(paths: &Paths, name: &IfName) -> Result<PathBuf> {
    let file = format!("{name}.json");
    let dir = paths
        .run_folder(Some(IFACE), false)?
        .ok_or_else(|| Error::Io {
            path: format!("{:?}", paths.iface_dir()),
            message: "missing".to_owned(),
        })?;
    dir.set_aside(&file)
        .map(PathBuf::from)
        .map_err(|p| dir.error(&file, &p))
}

pub use crate::fs::unix_ms;

/// Writes `now` unless it holds the same content as `previous` (an unchanged plan
/// writes no file), stamping the time it changed. Returns whether it wrote.
pub fn save_if_changed(
    paths: &Paths,
    previous: Option<&InterfaceState>,
    mut now: InterfaceState,
    now_ms: u64,
) -> Result<bool> {
    if previous.is_some_and(|p| now.same_content(p)) {
        return Ok(false);
    }
    now.applied_at_ms = now_ms;
    write_state(paths, &now)?;
    Ok(true)
}

/// Writes an interface's state file.
pub fn write_state(paths: &Paths, st: &InterfaceState) -> Result<()> {
    let json = serde_json::to_vec(st).map_err(|source| Error::Encode {
        path: format!("{:?}", paths.state_file(&st.name)),
        source,
    })?;
    // Not fsynced (see the module docs).
    run_folder_for_write(paths, Some(IFACE))?.write_atomic(
        &format!("{}.json", st.name),
        &json,
        0o600,
    )
}

/// Removes an interface's state file (missing is fine).
pub fn remove_state(paths: &Paths, name: &IfName) -> Result<()> {
    remove_run_file(paths, Some(IFACE), &format!("{name}.json"))
}

/// Every readable state file, by interface name, and the errors of unreadable ones
/// (a symlinked or unusable folder among them).
pub fn list_states(paths: &Paths) -> (Vec<InterfaceState>, Vec<Error>) {
    list_records(paths, IFACE, |dir, file, _| read_state_in(dir, file))
}

/// [`list_states`] without the files of the interfaces `skip` names (not read).
pub fn list_states_but(paths: &Paths, skip: &[&IfName]) -> (Vec<InterfaceState>, Vec<Error>) {
    list_records(paths, IFACE, |dir, file, name| {
        if skip.iter().any(|s| s.as_str() == name) {
            return Ok(None);
        }
        read_state_in(dir, file)
    })
}

/// Reads every `<name>.json` record of the run-time folder `sub` (leftover
/// temporary files skipped) with `read(folder, file name, name)`: what it
/// returned, and the errors of the records it could not read and of the folder
/// itself (a symlinked or unusable one). A missing folder holds no record.
pub fn list_records<T>(
    paths: &Paths,
    sub: &str,
    mut read: impl FnMut(&Dir, &str, &str) -> Result<Option<T>>,
) -> (Vec<T>, Vec<Error>) {
    let dir = match paths.run_folder(Some(sub), false) {
        Ok(Some(d)) => d,
        Ok(None) => return (Vec::new(), Vec::new()),
        Err(e) => return (Vec::new(), vec![e]),
    };
    let names = match dir.names() {
        Ok(n) => n,
        Err(p) => return (Vec::new(), vec![dir.error(".", &p)]),
    };
    let (mut out, mut errors) = (Vec::new(), Vec::new());
    for f in &names {
        let Some(stem) = f
            .strip_suffix(".json")
            .filter(|stem| !stem.is_empty() && !crate::fs::is_temp_name(f))
        else {
            continue;
        };
        match read(&dir, f, stem) {
            Ok(Some(v)) => out.push(v),
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
    }
    (out, errors)
}

/// An exclusive lock on one interface, held until dropped.
#[derive(Debug)]
pub struct InterfaceLock {
    _file: File,
}

/// Takes the interface's lock, waiting for a holder to finish.
pub fn lock_interface(paths: &Paths, name: &IfName) -> Result<InterfaceLock> {
    let (path, file) = open_lock(paths, name)?;
    file.lock().map_err(|e| Error::io(&path, &e))?;
    Ok(InterfaceLock { _file: file })
}

/// Takes the interface's lock if nobody holds it (`None` when someone does).
pub fn try_lock_interface(paths: &Paths, name: &IfName) -> Result<Option<InterfaceLock>> {
    let (path, file) = open_lock(paths, name)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(InterfaceLock { _file: file })),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::io(&path, &e)),
    }
}

/// Opens the interface's lock file: no-follow, non-blocking, a regular file (a
/// symlink or FIFO planted there is refused, never followed or waited on).
fn open_lock(paths: &Paths, name: &IfName) -> Result<(PathBuf, File)> {
    let path = paths.lock_file(name);
    let dir = run_folder_for_write(paths, Some(LOCK))?;
    let file_name = format!("{name}.lock");
    let file = dir
        .open_lock(&file_name, 0o600)
        .map_err(|p| dir.error(&file_name, &p))?;
    Ok((path, file))
}

#[cfg(test)]
mod tests {
    //! Issue 18, item 6: no run-time file is followed through a symlink, waited on
    //! (a FIFO) or read without a limit.
    use super::*;
    use std::os::unix::fs::symlink;
    use std::sync::mpsc;
    use std::time::Duration;

    fn eth1() -> IfName {
        IfName::try_new("eth1").unwrap()
    }

    fn mkfifo(path: &std::path::Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let ok = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(ok.success());
    }

    /// Runs `f` on a thread; a hang (the bug) fails the test instead of holding it.
    fn finishes<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("{what} hangs"))
    }

    fn recorded(name: &str) -> InterfaceState {
        let name = IfName::try_new(name).unwrap();
        let plan = InterfacePlan {
            name: name.clone(),
            mac: "02:00:00:00:00:02".parse().unwrap(),
            primary: false,
            families: vec![Family::V4],
            table: Some(10001),
            metric: None,
            addresses: Vec::new(),
            routes: Vec::new(),
            rules: vec![Rule {
                from: "10.0.1.20/32".parse().unwrap(),
                to: None,
                table: 10001,
                priority: None,
            }],
            missing: Vec::new(),
            refused: Vec::new(),
        };
        InterfaceState::record(None, &plan, Profile::Ec2NetUtils)
    }

    /// `apply --plan` reads the state files once as bytes (what its applied
    /// digest hashes) and parses them as `read_state_or_set_aside` and
    /// `list_states_but` did: a good file is read, a corrupt one of the plan's
    /// interfaces set aside, a FIFO or corrupt file of another's passed over.
    #[test]
    fn state_files_read_once_parse_as_the_readers_did() {
        let root = tempfile::tempdir().unwrap();
        let paths = Paths::new(root.path());
        let (eth1, eth2, eth3) = (recorded("eth1"), recorded("eth2"), recorded("eth3"));
        for st in [&eth1, &eth2, &eth3] {
            write_state(&paths, st).unwrap();
        }
        let dir = root.path().join("run/leasehook/iface");
        std::fs::write(dir.join("eth9.json"), "{").unwrap();
        std::fs::write(dir.join("eth8.json"), "{").unwrap();
        std::fs::remove_file(dir.join("eth3.json")).unwrap();
        mkfifo(&dir.join("eth3.json"));
        let files = finishes("reading the state files", {
            let paths = paths.clone();
            move || read_state_files(&paths)
        });
        assert!(files.folder.is_none());
        let names: Vec<&str> = files.files.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            names,
            [
                "eth1.json",
                "eth2.json",
                "eth3.json",
                "eth8.json",
                "eth9.json"
            ]
        );
        let skip = [&eth1.name, &IfName::try_new("eth9").unwrap()];
        let mut others = files.others(&skip);
        let (mut before, _) = list_states_but(&paths, &skip);
        others.sort_by(|a, b| a.name.cmp(&b.name));
        before.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(others, before);
        assert_eq!(others, [eth2]);
        assert_eq!(files.own(&paths, &eth1.name), Some(eth1));
        assert_eq!(files.own(&paths, &IfName::try_new("eth7").unwrap()), None);
        assert_eq!(files.own(&paths, &IfName::try_new("eth9").unwrap()), None);
        assert!(dir.join("eth9.json.corrupt").exists());
        assert!(!dir.join("eth9.json").exists());
        assert_eq!(files.own(&paths, &IfName::try_new("eth3").unwrap()), None);
        assert!(dir.join("eth3.json.corrupt").exists());
    }

    #[test]
    fn fifos_are_refused_never_waited_on() {
        let t = tempfile::tempdir().unwrap();
        let paths = Paths::new(t.path());
        let run = paths.run_dir();
        mkfifo(&run.join("lock/eth1.lock"));
        mkfifo(&run.join("generation/eth1"));
        mkfifo(&run.join("refreshed/eth1"));
        mkfifo(&run.join("iface/eth1.json"));
        let p = paths.clone();
        let e = finishes("the lock", move || {
            try_lock_interface(&p, &eth1()).unwrap_err()
        });
        assert!(
            e.to_string()
                .contains("lock/eth1.lock\": is a special file"),
            "{e}"
        );
        let p = paths.clone();
        let e = finishes("the counter", move || {
            read_run_file(&p, Some("generation"), "eth1", 64).unwrap_err()
        });
        assert!(e.to_string().contains("is a special file"), "{e}");
        let p = paths.clone();
        let e = finishes("the stamp", move || {
            touch_run_file(&p, "refreshed", "eth1").unwrap_err()
        });
        assert!(e.to_string().contains("is a special file"), "{e}");
        let p = paths.clone();
        let e = finishes("the state", move || read_state(&p, &eth1()).unwrap_err());
        assert!(e.to_string().contains("is a special file"), "{e}");
    }

    #[test]
    fn symlinks_anywhere_below_run_leasehook_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let outside = t.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::create_dir_all(t.path().join("run")).unwrap();
        symlink(&outside, t.path().join("run/leasehook")).unwrap();
        let paths = Paths::new(t.path());
        let e = try_lock_interface(&paths, &eth1()).unwrap_err();
        assert!(
            e.to_string().ends_with(
                "run/leasehook\": is a symlink, which is never followed; refusing to use it"
            ),
            "{e}"
        );
        assert!(write_run_file(&paths, Some("generation"), "eth1", b"1", 0o600).is_err());
        assert!(touch_run_file(&paths, "refreshed", "eth1").is_err());
        let (states, errors) = list_states(&paths);
        assert!(states.is_empty() && errors.len() == 1, "{errors:?}");
        assert_eq!(
            std::fs::read_dir(&outside).unwrap().count(),
            0,
            "written through"
        );

        // A real run/leasehook with a symlinked folder, and dangling links at files.
        std::fs::remove_file(t.path().join("run/leasehook")).unwrap();
        let run = paths.run_dir();
        std::fs::create_dir_all(&run).unwrap();
        symlink(&outside, run.join("lock")).unwrap();
        assert!(
            try_lock_interface(&paths, &eth1())
                .unwrap_err()
                .to_string()
                .contains("lock\": is a symlink")
        );
        std::fs::create_dir_all(run.join("refreshed")).unwrap();
        symlink(outside.join("planted"), run.join("refreshed/eth1")).unwrap();
        assert!(touch_run_file(&paths, "refreshed", "eth1").is_err());
        std::fs::create_dir_all(run.join("generation")).unwrap();
        symlink("/dev/zero", run.join("generation/eth1")).unwrap();
        let e = read_run_file(&paths, Some("generation"), "eth1", 64).unwrap_err();
        assert!(e.to_string().contains("is a symlink"), "{e}");
        assert_eq!(
            std::fs::read_dir(&outside).unwrap().count(),
            0,
            "created through a link"
        );
    }

    #[test]
    fn reads_are_capped_before_reading() {
        let t = tempfile::tempdir().unwrap();
        let paths = Paths::new(t.path());
        std::fs::create_dir_all(paths.iface_dir()).unwrap();
        // A sparse 1.5 GB state file: refused from its size, not read into memory.
        let f = std::fs::File::create(paths.state_file(&eth1())).unwrap();
        f.set_len(1_500_000_000).unwrap();
        let e = read_state(&paths, &eth1()).unwrap_err();
        assert!(
            e.to_string().contains("is larger than 4194304 bytes"),
            "{e}"
        );
        assert!(read_state_or_set_aside(&paths, &eth1()).is_none());
        assert!(paths.iface_dir().join("eth1.json.corrupt").exists());
    }
}

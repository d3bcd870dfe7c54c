// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the per-interface state files and locks under `/run/leasehook/`.
//!
//! `<root>/run/leasehook/iface/<ifname>.json` records what was applied for an
//! interface, per family, so `leasehook status` can show it and teardown can find
//! the rules of a link that is already gone. Writes are atomic (a temporary file in
//! the same folder, fsync, rename, fsync of the folder). `<root>/run/leasehook/lock/
//! <ifname>.lock` serialises everything that changes one interface. Every path takes
//! a root prefix, so tests never touch the real `/run`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::diff::State;
use crate::error::{Error, Result};
use crate::model::{
    Address, Family, IfName, InterfacePlan, Lease, MacAddr, Missing, Profile, Route, Rule,
};

/// The version written into state files; a file of another version is refused.
pub const STATE_VERSION: u32 = 1;

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
        self.run_dir().join("lock").join(format!("{name}.lock"))
    }
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

fn io(path: &Path, e: &std::io::Error) -> Error {
    Error::io(path, e)
}

/// Creates `dir` (and its parents) with mode 0755 if missing, refusing a symlink.
fn ensure_dir(dir: &Path) -> Result<()> {
    match fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => Err(Error::Io {
            path: format!("{dir:?}"),
            message: "is a symlink; refusing to follow it".to_owned(),
        }),
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(Error::Io {
            path: format!("{dir:?}"),
            message: "exists and is not a folder".to_owned(),
        }),
        Err(_) => fs::create_dir_all(dir).map_err(|e| io(dir, &e)),
    }
}

/// Writes `bytes` to `path` atomically: a temporary file in the same folder, fsync,
/// rename over `path` (which replaces a symlink rather than following it), fsync of
/// the folder.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().ok_or_else(|| Error::Io {
        path: format!("{path:?}"),
        message: "no parent folder".to_owned(),
    })?;
    ensure_dir(dir)?;
    // Errors name `path`, the file the user knows, not the temporary one (which
    // is removed when `tmp` is dropped on the error path).
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| io(path, &e))?;
    tmp.as_file_mut()
        .write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| io(path, &e))?;
    tmp.persist(path).map_err(|e| io(path, &e.error))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io(dir, &e))
}

/// Reads an interface's state file; `None` when there is none. A file that is a
/// symlink, unreadable, corrupt or of another version is an error (the caller logs
/// it and sets the file aside with [`set_aside`]).
pub fn read_state(paths: &Paths, name: &IfName) -> Result<Option<InterfaceState>> {
    read_state_file(&paths.state_file(name))
}

fn read_state_file(path: &Path) -> Result<Option<InterfaceState>> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(path, &e)),
        Ok(m) if !m.is_file() => {
            return Err(Error::Io {
                path: format!("{path:?}"),
                message: "not a regular file".to_owned(),
            });
        }
        Ok(_) => {}
    }
    let text = fs::read_to_string(path).map_err(|e| io(path, &e))?;
    let st: InterfaceState = serde_json::from_str(&text).map_err(|e| Error::Io {
        path: format!("{path:?}"),
        message: format!("corrupt state file: {e}"),
    })?;
    if st.version != STATE_VERSION {
        return Err(Error::Io {
            path: format!("{path:?}"),
            message: format!("unknown state version {}", st.version),
        });
    }
    Ok(Some(st))
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
    let from = paths.state_file(name);
    let to = from.with_extension("json.corrupt");
    fs::rename(&from, &to).map_err(|e| io(&from, &e))?;
    Ok(to)
}

/// The current time in milliseconds since the Unix epoch (0 if the clock is before it).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

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
    let path = paths.state_file(&st.name);
    let json = serde_json::to_vec(st).map_err(|e| Error::Io {
        path: format!("{path:?}"),
        message: e.to_string(),
    })?;
    write_atomic(&path, &json)
}

/// Removes an interface's state file (missing is fine).
pub fn remove_state(paths: &Paths, name: &IfName) -> Result<()> {
    let path = paths.state_file(name);
    match fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(&path, &e)),
        _ => Ok(()),
    }
}

/// Every readable state file, by interface name, and the errors of unreadable ones.
pub fn list_states(paths: &Paths) -> (Vec<InterfaceState>, Vec<Error>) {
    let dir = paths.iface_dir();
    let Ok(entries) = fs::read_dir(&dir) else {
        return (Vec::new(), Vec::new());
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let (mut states, mut errors) = (Vec::new(), Vec::new());
    for f in files {
        match read_state_file(&f) {
            Ok(Some(st)) => states.push(st),
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
    }
    (states, errors)
}

/// An exclusive lock on one interface, held until dropped.
#[derive(Debug)]
pub struct InterfaceLock {
    _file: File,
}

/// Takes the interface's lock, waiting for a holder to finish.
pub fn lock_interface(paths: &Paths, name: &IfName) -> Result<InterfaceLock> {
    let (path, file) = open_lock(paths, name)?;
    file.lock().map_err(|e| io(&path, &e))?;
    Ok(InterfaceLock { _file: file })
}

/// Takes the interface's lock if nobody holds it (`None` when someone does).
pub fn try_lock_interface(paths: &Paths, name: &IfName) -> Result<Option<InterfaceLock>> {
    let (path, file) = open_lock(paths, name)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(InterfaceLock { _file: file })),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(io(&path, &e)),
    }
}

fn open_lock(paths: &Paths, name: &IfName) -> Result<(PathBuf, File)> {
    let path = paths.lock_file(name);
    if let Some(dir) = path.parent() {
        ensure_dir(dir)?;
    }
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| io(&path, &e))?;
    Ok((path, file))
}

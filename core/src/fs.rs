// SPDX-License-Identifier: Apache-2.0
//! Performs IO: files and folders below a trusted folder, reached one name at a time
//! through folder descriptors, never following a symlink. The one implementation
//! of every file leasehook keeps: the boot stage's cache and `boot.json`, and the
//! hooks' run-time files (state files, locks, event counters, hand-overs, refresh
//! stamps, the IMDS token).
//!
//! The cache (`/var/lib/leasehook`) and the run-time folder (`/run/leasehook`) hold
//! what the next boot and the next lease trust. Everything up to `/var/lib` and
//! `/run` is the system's (followed as usual); from leasehook's own folder down,
//! every name is opened relative to its folder's descriptor with `O_NOFOLLOW`, so a
//! symlink planted anywhere below — at a folder or at a file — is met, reported and
//! refused or set aside, never followed, and a folder swapped between two calls
//! cannot redirect the next one. Files are opened `O_NONBLOCK` and must be regular
//! files (a FIFO or a device where a file should be is refused at once, never
//! waited on), and reads are capped: a file larger than its limit is refused
//! without being read further.
//!
//! Writes are atomic: a new file (`O_CREAT | O_EXCL | O_NOFOLLOW`, created with its
//! final mode) in the same folder, written, fsynced, renamed over the name (which
//! replaces a symlink there rather than following it), and the folder fsynced.
//! Every file of the run-time folder (`/run/leasehook`, [`run_folder`] opens it
//! [`Dir::unsynced`]: state files, locks, counters, hand-overs, stamps, the
//! last-event record, the IMDS token, `boot.json`) leaves the two fsyncs out:
//! `/run` is a tmpfs, where they do nothing, and a reboot clears it, as it clears
//! the kernel's rules, routes and addresses those files describe; the rename alone
//! makes every reader see the old file or the new one. On a disk (a test's or a
//! benchmark's root) they cost milliseconds each, two per file. The cache
//! (`/var/lib/leasehook`), which the next boot trusts, stays durable.
//! A bad entry is never deleted: [`Dir::set_aside`] renames it to `NAME.corrupt`
//! (`NAME.corrupt.1`, ... when that is taken). Temporary files are named
//! `.NAME.PID.SEQ.NANOS.tmp` ([`is_temp_name`]).

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStringExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{
    AtFlags, CWD, FileType, Mode, OFlags, RenameFlags, Timespec, Timestamps, fchmod, fstat, fsync,
    futimens, mkdirat, openat, readlinkat, renameat, renameat_with, statat, symlinkat, unlinkat,
};
use rustix::io::Errno;

use crate::error::Error;

/// What is at a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// Nothing.
    Missing,
    /// A regular file.
    File,
    /// A folder.
    Dir,
    /// A symlink (never followed).
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Missing => "nothing",
            Self::File => "a file",
            Self::Dir => "a folder",
            Self::Symlink => "a symlink",
            Self::Other => "a special file",
        })
    }
}

/// Why a name could not be used.
#[derive(Debug)]
pub enum FileProblem {
    /// A symlink stands there.
    Symlink,
    /// Something other than what was wanted stands there.
    Wrong(Entry),
    /// Larger than the limit.
    TooLarge(u64),
    /// Another error.
    Io(io::Error),
}

impl fmt::Display for FileProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Symlink => f.write_str("is a symlink, which is never followed"),
            Self::Wrong(e) => write!(f, "is {e}"),
            Self::TooLarge(n) => write!(f, "is larger than {n} bytes"),
            // Shown after the name when reading: "…/datasource.json cannot be
            // read: Permission denied" (`Dir::error` shows the bare error).
            Self::Io(e) => write!(f, "cannot be read: {e}"),
        }
    }
}

impl From<Errno> for FileProblem {
    fn from(e: Errno) -> Self {
        Self::Io(e.into())
    }
}

/// Opens `<root>/run/leasehook` (`sub: None`) or the folder `sub` below it, creating
/// them (mode 0755) when `create`; `Ok(None)` when missing and not created.
/// `<root>/run` is the system's; from `leasehook` down every folder is opened
/// no-follow, and a symlink, or anything but a folder, is refused with an error that
/// names it. What the hooks' state files, locks, stamps and hand-overs and the IMDS
/// token cache are opened through.
pub fn run_folder(root: &Path, sub: Option<&str>, create: bool) -> Result<Option<Dir>, Error> {
    let parent = root.join(crate::constants::RUN_PARENT);
    let Some(base) = Dir::open_trusted(&parent, create)? else {
        return Ok(None);
    };
    let Some(run) = base.child_strict(crate::constants::RUN_NAME, create, 0o755)? else {
        return Ok(None);
    };
    // Nothing below `/run` is fsynced (see the module docs).
    let run = run.unsynced();
    match sub {
        None => Ok(Some(run)),
        Some(sub) => run.child_strict(sub, create, 0o755),
    }
}

/// [`run_folder`], created when missing: the folder a write goes to.
pub fn run_folder_for_write(root: &Path, sub: Option<&str>) -> Result<Dir, Error> {
    run_folder(root, sub, true)?.ok_or_else(|| Error::Io {
        path: format!(
            "{:?}",
            root.join(crate::constants::RUN_PARENT)
                .join(crate::constants::RUN_NAME)
        ),
        message: "vanished while being created".to_owned(),
    })
}

/// The current time in milliseconds since the Unix epoch (0 if the clock is before
/// it): the one wall-clock helper of the run-time files (deadlines, boot records).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A folder, held open.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
    /// Whether writes are fsynced (file and folder): everywhere but below the
    /// run-time folder (see the module docs and [`Dir::unsynced`]).
    synced: bool,
}

/// Names temporary files apart within one process.
static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// Whether `name` is one of this module's temporary names
/// (`.NAME.PID.SEQ.NANOS.tmp`): what a crash between creating and renaming leaves.
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with('.')
        && Path::new(name).extension().is_some_and(|x| x == "tmp")
        && name.split('.').count() >= 6
}

fn kind_of(mode: u32) -> Entry {
    match FileType::from_raw_mode(mode) {
        FileType::RegularFile => Entry::File,
        FileType::Directory => Entry::Dir,
        FileType::Symlink => Entry::Symlink,
        _ => Entry::Other,
    }
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

impl Dir {
    /// Opens the trusted folder `path` (symlinks in it followed, as the system's
    /// own paths are), creating it and its parents (mode 0755) when `create`.
    /// `Ok(None)` when it is missing and not to be created.
    pub fn open_trusted(path: &Path, create: bool) -> Result<Option<Self>, Error> {
        if create {
            std::fs::create_dir_all(path).map_err(|e| Error::io(path, &e))?;
        }
        match openat(
            CWD,
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => Ok(Some(Self {
                fd,
                path: path.to_owned(),
                synced: true,
            })),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(Error::io(path, &e.into())),
        }
    }

    /// This folder, its writes (and those of the folders opened below it) no
    /// longer fsynced: for files that describe what a reboot clears anyway (see
    /// the module docs).
    #[must_use]
    pub fn unsynced(mut self) -> Self {
        self.synced = false;
        self
    }

    /// The folder's path, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A name's path, for messages.
    pub fn shown(&self, name: &str) -> String {
        self.path.join(name).display().to_string()
    }

    /// An error about `name` in this folder: the system's error kept as
    /// [`Error::File`], else what stands there ([`Error::Io`]).
    pub fn error(&self, name: &str, p: &FileProblem) -> Error {
        let path = self.path.join(name);
        match p {
            // After `path: ` the bare error reads right, reading or writing.
            FileProblem::Io(e) => Error::io(&path, e),
            other => Error::Io {
                path: format!("{path:?}"),
                message: other.to_string(),
            },
        }
    }

    /// What is at `name` (not following a symlink).
    pub fn entry(&self, name: &str) -> Result<Entry, FileProblem> {
        match statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(kind_of(st.st_mode)),
            Err(Errno::NOENT) => Ok(Entry::Missing),
            Err(e) => Err(e.into()),
        }
    }

    /// Opens the folder `name`; `Ok(None)` when nothing is there.
    pub fn child(&self, name: &str) -> Result<Option<Self>, FileProblem> {
        match openat(&self.fd, name, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => Ok(Some(Self {
                fd,
                path: self.path.join(name),
                synced: self.synced,
            })),
            Err(Errno::NOENT) => Ok(None),
            Err(Errno::LOOP) => Err(FileProblem::Symlink),
            Err(Errno::NOTDIR) => Err(match self.entry(name)? {
                Entry::Symlink => FileProblem::Symlink,
                other => FileProblem::Wrong(other),
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// Opens the folder `name`, creating it with `mode` when missing. A symlink or
    /// anything else standing there is set aside (logged) and a folder made.
    pub fn child_for_write(&self, name: &str, mode: u32) -> Result<Self, Error> {
        match self.child(name) {
            Ok(Some(d)) => return Ok(d),
            Ok(None) => {}
            Err(p @ (FileProblem::Symlink | FileProblem::Wrong(_))) => {
                let to = self.set_aside(name).map_err(|e| self.error(name, &e))?;
                log::warn!(
                    "{} {p}; set aside as {to} and replaced by a folder",
                    self.shown(name)
                );
            }
            Err(p) => return Err(self.error(name, &p)),
        }
        match mkdirat(&self.fd, name, Mode::from_raw_mode(mode)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(self.error(name, &e.into())),
        }
        // Opened again without following: a symlink raced in is refused here.
        match self.child(name) {
            Ok(Some(d)) => Ok(d),
            Ok(None) => Err(self.error(name, &FileProblem::Wrong(Entry::Missing))),
            Err(p) => Err(self.error(name, &p)),
        }
    }

    /// Opens the folder `name` below this one, creating it with `mode` when
    /// `create` and it is missing; `Ok(None)` when missing and not to be created.
    /// Unlike [`Dir::child_for_write`], a symlink or anything else standing there is
    /// refused with an error that says so (the hooks' run-time folders: a planted
    /// link must not be "repaired" mid-lease either).
    pub fn child_strict(&self, name: &str, create: bool, mode: u32) -> Result<Option<Self>, Error> {
        let refuse = |p: &FileProblem| {
            let mut e = self.error(name, p);
            if let Error::Io { message, .. } = &mut e {
                message.push_str("; refusing to use it");
            }
            e
        };
        match self.child(name) {
            Ok(Some(d)) => return Ok(Some(d)),
            Ok(None) if !create => return Ok(None),
            Ok(None) => {}
            Err(p) => return Err(refuse(&p)),
        }
        match mkdirat(&self.fd, name, Mode::from_raw_mode(mode)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(self.error(name, &e.into())),
        }
        match self.child(name) {
            Ok(Some(d)) => Ok(Some(d)),
            Ok(None) => Err(self.error(name, &FileProblem::Wrong(Entry::Missing))),
            Err(p) => Err(refuse(&p)),
        }
    }

    /// Opens (creating with `mode`) the regular file `name` for a lock: no-follow,
    /// non-blocking, close-on-exec. A symlink, FIFO or anything else is refused.
    pub fn open_lock(&self, name: &str, mode: u32) -> Result<std::fs::File, FileProblem> {
        self.open_file(name, OFlags::RDWR | OFlags::CREATE, mode)
    }

    /// Sets the modification time of the regular file `name` to now, creating it
    /// (empty, with `mode`) when missing; never through a symlink, never blocking.
    pub fn touch(&self, name: &str, mode: u32) -> Result<(), FileProblem> {
        let f = self.open_file(name, OFlags::WRONLY | OFlags::CREATE, mode)?;
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_NOW,
        };
        futimens(
            &f,
            &Timestamps {
                last_access: now,
                last_modification: now,
            },
        )?;
        Ok(())
    }

    /// The modification time of the regular file `name`; `Ok(None)` when missing.
    pub fn modified(&self, name: &str) -> Result<Option<std::time::SystemTime>, FileProblem> {
        let st = match statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(Errno::NOENT) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        match kind_of(st.st_mode) {
            Entry::File => {}
            Entry::Symlink => return Err(FileProblem::Symlink),
            other => return Err(FileProblem::Wrong(other)),
        }
        let secs = u64::try_from(st.st_mtime).unwrap_or(0);
        let nanos = u32::try_from(st.st_mtime_nsec).unwrap_or(0);
        Ok(std::time::UNIX_EPOCH.checked_add(std::time::Duration::new(secs, nanos)))
    }

    /// Removes the entry `name` (a file, a symlink — not its target — or a special
    /// file; never a folder). `Ok(false)` when nothing was there.
    pub fn remove(&self, name: &str) -> Result<bool, FileProblem> {
        match unlinkat(&self.fd, name, AtFlags::empty()) {
            Ok(()) => Ok(true),
            Err(Errno::NOENT) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// The names in this folder (without `.` and `..`), sorted.
    pub fn names(&self) -> Result<Vec<String>, FileProblem> {
        let fd = openat(&self.fd, ".", DIR_FLAGS, Mode::empty())?;
        let mut out = Vec::new();
        for entry in rustix::fs::Dir::read_from(&fd)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name != "." && name != ".." {
                out.push(name);
            }
        }
        out.sort();
        Ok(out)
    }

    /// Opens the regular file `name` with `flags` (plus no-follow, non-blocking,
    /// close-on-exec), creating it with `mode` when `flags` say so.
    fn open_file(
        &self,
        name: &str,
        flags: OFlags,
        mode: u32,
    ) -> Result<std::fs::File, FileProblem> {
        let fd = match openat(
            &self.fd,
            name,
            flags | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        ) {
            Ok(fd) => fd,
            Err(Errno::LOOP) => return Err(FileProblem::Symlink),
            // O_CREAT on a dangling symlink with O_NOFOLLOW: ELOOP too, but some
            // file systems say EEXIST; look.
            Err(e @ (Errno::EXIST | Errno::ISDIR | Errno::NXIO)) => {
                return Err(match self.entry(name)? {
                    Entry::Symlink => FileProblem::Symlink,
                    Entry::File => FileProblem::Io(e.into()),
                    other => FileProblem::Wrong(other),
                });
            }
            Err(e) => return Err(e.into()),
        };
        let kind = kind_of(fstat(&fd)?.st_mode);
        if kind != Entry::File {
            return Err(FileProblem::Wrong(kind));
        }
        Ok(std::fs::File::from(fd))
    }

    /// A regular file's bytes, up to `limit`; `Ok(None)` when nothing is there.
    /// Opened with `O_NOFOLLOW | O_NONBLOCK`: a symlink is refused, a FIFO does not
    /// block.
    pub fn read(&self, name: &str, limit: u64) -> Result<Option<Vec<u8>>, FileProblem> {
        Ok(self.read_with_mode(name, limit)?.map(|(b, _)| b))
    }

    /// As [`Dir::read`], with the file's permission bits.
    pub fn read_with_mode(
        &self,
        name: &str,
        limit: u64,
    ) -> Result<Option<(Vec<u8>, u32)>, FileProblem> {
        use std::io::Read as _;
        let fd = match openat(
            &self.fd,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(Errno::LOOP) => return Err(FileProblem::Symlink),
            Err(e) => return Err(e.into()),
        };
        let st = fstat(&fd)?;
        let kind = kind_of(st.st_mode);
        if kind != Entry::File {
            return Err(FileProblem::Wrong(kind));
        }
        // Refused before reading when it says it is larger (a 1.5 GB state file
        // must not be read into memory); the read is capped in case it grows.
        if u64::try_from(st.st_size).unwrap_or(u64::MAX) > limit {
            return Err(FileProblem::TooLarge(limit));
        }
        let mut buf = Vec::new();
        std::fs::File::from(fd)
            .take(limit.saturating_add(1))
            .read_to_end(&mut buf)
            .map_err(FileProblem::Io)?;
        if buf.len() as u64 > limit {
            return Err(FileProblem::TooLarge(limit));
        }
        Ok(Some((buf, st.st_mode & 0o7777)))
    }

    /// A small text file's first line, trimmed; `None` when missing, unreadable or
    /// not a file (problems logged).
    pub fn read_line(&self, name: &str) -> Option<String> {
        match self.read(name, 4096) {
            Ok(Some(b)) => Some(
                String::from_utf8_lossy(&b)
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_owned(),
            ),
            Ok(None) => None,
            Err(p) => {
                log::warn!("{} {p}; ignored", self.shown(name));
                None
            }
        }
    }

    /// A fresh temporary name next to `name`.
    fn temp_name(name: &str) -> String {
        let n = TEMP_SEQ.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        format!(".{name}.{}.{n}.{nanos:08x}.tmp", std::process::id())
    }

    /// Replaces `name` with `bytes` atomically, the file having exactly `mode` from
    /// its first byte on, fsynced unless the folder is [`Dir::unsynced`] (see the
    /// module docs).
    pub fn write_atomic(&self, name: &str, bytes: &[u8], mode: u32) -> Result<(), Error> {
        use std::io::Write as _;
        let fail = |p: FileProblem| self.error(name, &p);
        let (tmp, fd) = loop {
            let tmp = Self::temp_name(name);
            match openat(
                &self.fd,
                tmp.as_str(),
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(mode),
            ) {
                Ok(fd) => break (tmp, fd),
                Err(Errno::EXIST) => {}
                Err(e) => return Err(fail(e.into())),
            }
        };
        let result = (|| -> Result<(), FileProblem> {
            // The umask may have taken bits away (0644 under umask 077): set them.
            fchmod(&fd, Mode::from_raw_mode(mode))?;
            let mut f = std::fs::File::from(fd);
            f.write_all(bytes).map_err(FileProblem::Io)?;
            if self.synced {
                f.sync_all().map_err(FileProblem::Io)?;
            }
            drop(f);
            renameat(&self.fd, tmp.as_str(), &self.fd, name)?;
            if self.synced {
                fsync(&self.fd)?;
            }
            Ok(())
        })();
        if result.is_err() {
            let _ = rustix::fs::unlinkat(&self.fd, tmp.as_str(), AtFlags::empty());
        }
        result.map_err(fail)
    }

    /// The target of the symlink `name`: `Ok(None)` when nothing is there, an error
    /// when something other than a symlink is.
    pub fn read_link(&self, name: &str) -> Result<Option<String>, FileProblem> {
        match readlinkat(&self.fd, name, Vec::new()) {
            Ok(target) => Ok(Some(
                OsString::from_vec(target.into_bytes())
                    .to_string_lossy()
                    .into_owned(),
            )),
            Err(Errno::NOENT) => Ok(None),
            Err(Errno::INVAL) => Err(FileProblem::Wrong(self.entry(name)?)),
            Err(e) => Err(e.into()),
        }
    }

    /// Points the symlink `name` at `target` atomically (a new link renamed over
    /// it). Anything but a symlink standing there is set aside first.
    pub fn replace_symlink(&self, name: &str, target: &str) -> Result<(), Error> {
        match self.entry(name) {
            Ok(Entry::Missing | Entry::Symlink) => {}
            Ok(other) => {
                let to = self.set_aside(name).map_err(|e| self.error(name, &e))?;
                log::warn!(
                    "{} is {other}, not a symlink; set aside as {to}",
                    self.shown(name)
                );
            }
            Err(p) => return Err(self.error(name, &p)),
        }
        let tmp = loop {
            let tmp = Self::temp_name(name);
            match symlinkat(target, &self.fd, tmp.as_str()) {
                Ok(()) => break tmp,
                Err(Errno::EXIST) => {}
                Err(e) => return Err(self.error(name, &e.into())),
            }
        };
        renameat(&self.fd, tmp.as_str(), &self.fd, name)
            .and_then(|()| fsync(&self.fd))
            .map_err(|e| {
                let _ = rustix::fs::unlinkat(&self.fd, tmp.as_str(), AtFlags::empty());
                self.error(name, &e.into())
            })
    }

    /// Renames `name` to `name.corrupt` (or `.corrupt.1`, ... when taken), never
    /// replacing anything. Returns the new path.
    pub fn set_aside(&self, name: &str) -> Result<String, FileProblem> {
        for n in 0..100 {
            let to = if n == 0 {
                format!("{name}.corrupt")
            } else {
                format!("{name}.corrupt.{n}")
            };
            match renameat_with(
                &self.fd,
                name,
                &self.fd,
                to.as_str(),
                RenameFlags::NOREPLACE,
            ) {
                Ok(()) => {
                    let _ = fsync(&self.fd);
                    return Ok(self.shown(&to));
                }
                Err(Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Err(FileProblem::Io(io::Error::other(
            "100 set-aside copies exist already",
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{PermissionsExt as _, symlink};

    fn base() -> (tempfile::TempDir, Dir) {
        let t = tempfile::tempdir().unwrap();
        let d = Dir::open_trusted(t.path(), false).unwrap().unwrap();
        (t, d)
    }

    /// Only the run-time folder skips the fsyncs: the cache's folders keep them,
    /// the folders below the run folder inherit its choice, and a write there is
    /// still atomic and exact.
    #[test]
    fn only_the_run_folder_skips_the_fsyncs() {
        let (t, d) = base();
        assert!(d.synced);
        assert!(d.child_for_write("cache", 0o755).unwrap().synced);
        assert!(!run_folder_for_write(t.path(), None).unwrap().synced);
        let run = run_folder_for_write(t.path(), Some("iface")).unwrap();
        assert!(!run.synced);
        assert!(!run.child_for_write("sub", 0o755).unwrap().synced);
        run.write_atomic("eth1.json", b"{}", 0o600).unwrap();
        assert_eq!(run.read("eth1.json", 10).unwrap().unwrap(), b"{}");
        assert_eq!(run.names().unwrap(), ["eth1.json", "sub"]);
    }

    /// Issue 20 item 1: one no-follow opener for `run/leasehook` and every folder
    /// below it, whoever asks (the hooks' locks and state files, the IMDS token).
    #[test]
    fn run_folder_refuses_a_symlinked_subfolder_naming_it() {
        let t = tempfile::tempdir().unwrap();
        let outside = t.path().join("outside");
        fs::create_dir_all(&outside).unwrap();
        fs::create_dir_all(t.path().join("run/leasehook")).unwrap();
        symlink(&outside, t.path().join("run/leasehook/iface")).unwrap();
        for create in [false, true] {
            let e = run_folder(t.path(), Some("iface"), create).unwrap_err();
            assert!(
                e.to_string().ends_with(
                    "run/leasehook/iface\": is a symlink, which is never followed; refusing to use it"
                ),
                "{e}"
            );
        }
        let e = run_folder_for_write(t.path(), Some("iface")).unwrap_err();
        assert!(
            e.to_string().contains("leasehook/iface\": is a symlink"),
            "{e}"
        );
        assert!(run_folder(t.path(), Some("lock"), false).unwrap().is_none());
        assert!(run_folder(t.path(), Some("lock"), true).unwrap().is_some());
        assert_eq!(
            fs::read_dir(&outside).unwrap().count(),
            0,
            "created through a link"
        );
    }

    #[test]
    fn writes_are_atomic_with_exact_modes() {
        let (t, d) = base();
        // A restrictive umask must not change the public file's mode.
        let old = rustix::process::umask(Mode::from_raw_mode(0o077));
        d.write_atomic("public", b"one", 0o644).unwrap();
        d.write_atomic("secret", b"two", 0o600).unwrap();
        rustix::process::umask(old);
        let mode = |n: &str| fs::metadata(t.path().join(n)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode("public"), 0o644);
        assert_eq!(mode("secret"), 0o600);
        d.write_atomic("public", b"three", 0o644).unwrap();
        assert_eq!(d.read("public", 10).unwrap().unwrap(), b"three");
        let names: Vec<_> = fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "no temporary files left: {names:?}");
    }

    #[test]
    fn symlinks_are_never_followed() {
        let (t, d) = base();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("target"), b"outside").unwrap();
        symlink(outside.path().join("target"), t.path().join("file")).unwrap();
        symlink(outside.path(), t.path().join("folder")).unwrap();
        assert!(matches!(d.read("file", 100), Err(FileProblem::Symlink)));
        assert!(matches!(d.child("folder"), Err(FileProblem::Symlink)));
        assert_eq!(d.entry("file").unwrap(), Entry::Symlink);
        // Writing over a symlink replaces the link, not its target.
        d.write_atomic("file", b"inside", 0o600).unwrap();
        assert_eq!(fs::read(outside.path().join("target")).unwrap(), b"outside");
        assert_eq!(d.entry("file").unwrap(), Entry::File);
        // A symlinked folder is set aside and a real one made.
        let sub = d.child_for_write("folder", 0o755).unwrap();
        sub.write_atomic("x", b"y", 0o600).unwrap();
        assert!(!outside.path().join("x").exists());
        assert_eq!(d.entry("folder").unwrap(), Entry::Dir);
        assert_eq!(d.entry("folder.corrupt").unwrap(), Entry::Symlink);
        // A folder where a file is wanted, a FIFO, a size limit.
        assert!(matches!(
            d.read("folder", 100),
            Err(FileProblem::Wrong(Entry::Dir))
        ));
        assert!(matches!(
            d.child("file"),
            Err(FileProblem::Wrong(Entry::File))
        ));
        let ok = std::process::Command::new("mkfifo")
            .arg(t.path().join("fifo"))
            .status()
            .unwrap();
        assert!(ok.success());
        assert!(matches!(
            d.read("fifo", 100),
            Err(FileProblem::Wrong(Entry::Other))
        ));
        assert!(matches!(d.read("file", 3), Err(FileProblem::TooLarge(3))));
        assert_eq!(d.read("missing", 3).unwrap(), None);
    }

    #[test]
    fn links_and_setting_aside() {
        let (t, d) = base();
        assert_eq!(d.read_link("instance").unwrap(), None);
        d.replace_symlink("instance", "instances/a").unwrap();
        d.replace_symlink("instance", "instances/b").unwrap();
        assert_eq!(
            d.read_link("instance").unwrap().as_deref(),
            Some("instances/b")
        );
        fs::write(t.path().join("plain"), b"x").unwrap();
        assert!(matches!(
            d.read_link("plain"),
            Err(FileProblem::Wrong(Entry::File))
        ));
        // A file where the link goes is set aside, not deleted.
        d.replace_symlink("plain", "instances/c").unwrap();
        assert_eq!(fs::read(t.path().join("plain.corrupt")).unwrap(), b"x");
        fs::remove_file(t.path().join("plain")).unwrap();
        fs::write(t.path().join("plain"), b"y").unwrap();
        let to = d.set_aside("plain").unwrap();
        assert!(to.ends_with("plain.corrupt.1"), "{to}");
        assert_eq!(fs::read(t.path().join("plain.corrupt")).unwrap(), b"x");
        assert!(matches!(d.set_aside("nothing"), Err(FileProblem::Io(_))));
    }
}

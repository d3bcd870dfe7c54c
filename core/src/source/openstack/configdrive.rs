// SPDX-License-Identifier: Apache-2.0
//! Performs IO: an `OpenStack` config drive, found below the root and read
//! read-only.
//!
//! Nova's config drive is a small ISO 9660 (or vfat) file system labelled
//! `config-2` (cloud-init and ds-identify also accept `CONFIG-2`) holding the
//! metadata service's files under `openstack/latest/`. udev names it in
//! `<root>/dev/disk/by-label/` ([`find`]).
//!
//! # How it is read
//!
//! mount(8), by absolute path and without a shell (`/usr/bin/mount` or
//! `/bin/mount`, arguments as a list): `-o ro,nosuid,nodev,noexec` onto a private
//! folder (mode 0700) `<root>/run/leasehook/configdrive/<pid>-<n>` made for this
//! read, then the few files leasehook needs are read through the no-follow
//! opener of [`crate::fs`] (a symlink on the drive, a FIFO or anything but a
//! regular file is refused; each file capped in size), and the drive is
//! unmounted and the folder removed before the answer is used. The drive is
//! never written (`ro`), and nothing on it can run or be a device (`noexec`,
//! `nodev`, `nosuid`). mount(8) rather than a crate reading ISO 9660 and vfat
//! images: both formats, Rock Ridge and Joliet, loop set-up for an image file,
//! and the kernel's hardened readers come with util-linux, which every target
//! system has, at no cost in the package's size; the price is that reading
//! needs root (the hooks, `refresh` and the boot stage run as root).
//!
//! Nova writes the drive when it builds the instance and does not rewrite it
//! when a port is attached later: a NIC hot-plugged after boot is not on it, and
//! waiting cannot change that (the wait reads the drive once,
//! [`super::wait`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::fs::{Dir, run_folder_for_write};

pub use crate::source::detect::CONFIG_DRIVE_LABELS;

/// Where udev names file systems by label, below the root.
pub const BY_LABEL: &str = "dev/disk/by-label";

/// The folder below `run/leasehook` that holds the mount points.
pub const MOUNT_FOLDER: &str = "configdrive";

/// The most bytes one file read from the drive may have (user-data's cap).
pub const MAX_FILE_BYTES: u64 = crate::constants::IMDS_MAX_USER_DATA_BYTES;

/// mount(8) and umount(8), by absolute path: the first that exists.
const MOUNT: [&str; 2] = ["/usr/bin/mount", "/bin/mount"];
const UMOUNT: [&str; 2] = ["/usr/bin/umount", "/bin/umount"];

static SEQ: AtomicU64 = AtomicU64::new(0);

/// The config drive's device below `root` (`dev/disk/by-label/config-2`, else
/// `CONFIG-2`), when one is there: a block device or (in tests) an image file,
/// udev's symlink followed. Anything else standing there is no drive.
pub fn find(root: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::FileTypeExt as _;
    CONFIG_DRIVE_LABELS.iter().find_map(|label| {
        let p = root.join(BY_LABEL).join(label);
        let md = std::fs::metadata(&p).ok()?;
        (md.file_type().is_block_device() || md.is_file()).then_some(p)
    })
}

/// Whether a config drive is named below `root` (what ds-identify checks: the
/// label, whatever the device).
pub fn present(root: &Path) -> bool {
    CONFIG_DRIVE_LABELS
        .iter()
        .any(|label| root.join(BY_LABEL).join(label).symlink_metadata().is_ok())
}

/// A config drive to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigDrive {
    root: PathBuf,
    device: PathBuf,
}

/// What one read of the drive found: each file asked, `None` when it is not on
/// the drive.
pub type Files = Vec<Option<Vec<u8>>>;

fn tool(candidates: &[&'static str]) -> Result<&'static str> {
    candidates
        .iter()
        .copied()
        .find(|p| Path::new(p).is_file())
        .ok_or_else(|| Error::Io {
            path: candidates.join(" or "),
            message: "not found (util-linux)".to_owned(),
        })
}

fn run(program: &str, args: &[&std::ffi::OsStr]) -> std::result::Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!(
            "{} ({})",
            err.trim().lines().next().unwrap_or("no message"),
            out.status
        ))
    }
}

impl ConfigDrive {
    /// The drive below `root`, if there is one ([`find`]).
    pub fn find(root: &Path) -> Option<Self> {
        find(root).map(|device| Self {
            root: root.to_owned(),
            device,
        })
    }

    /// The drive's device (for `subplatform` and logs).
    pub fn device(&self) -> &Path {
        &self.device
    }

    /// Mounts the drive read-only, reads each of `files` (paths below the drive's
    /// top, `/`-separated, no `..`), unmounts it. A file missing on the drive is
    /// `None`; a symlink, a folder, or a file larger than [`MAX_FILE_BYTES`] is an
    /// error naming it.
    pub fn read(&self, files: &[&str]) -> Result<Files> {
        let mount = tool(&MOUNT)?;
        let umount = tool(&UMOUNT)?;
        let base = run_folder_for_write(&self.root, Some(MOUNT_FOLDER))?;
        let name = format!(
            "{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let point = base.child_for_write(&name, 0o700)?;
        let point_path = point.path().to_owned();
        drop(point);
        let mounted = run(
            mount,
            &[
                "-o".as_ref(),
                "ro,nosuid,nodev,noexec".as_ref(),
                self.device.as_os_str(),
                point_path.as_os_str(),
            ],
        );
        let result = match mounted {
            Ok(()) => {
                let read = read_files(&point_path, files);
                if let Err(e) = run(umount, &[point_path.as_os_str()]) {
                    log::warn!(
                        "config drive: umount {}: {e}; detaching it lazily",
                        point_path.display()
                    );
                    if let Err(e) = run(umount, &["-l".as_ref(), point_path.as_os_str()]) {
                        log::warn!("config drive: umount -l {}: {e}", point_path.display());
                    }
                }
                read
            }
            Err(e) => Err(Error::Io {
                path: format!("{:?}", self.device),
                message: format!("mount read-only: {e}"),
            }),
        };
        if let Err(e) = std::fs::remove_dir(&point_path) {
            log::warn!("config drive: removing {}: {e}", point_path.display());
        }
        result
    }
}

/// Reads `files` below the mounted drive at `top`, no-follow.
fn read_files(top: &Path, files: &[&str]) -> Result<Files> {
    let Some(dir) = Dir::open_trusted(top, false)? else {
        return Err(Error::Io {
            path: format!("{top:?}"),
            message: "the mount point vanished".to_owned(),
        });
    };
    files.iter().map(|f| read_one(&dir, f)).collect()
}

fn read_one(top: &Dir, file: &str) -> Result<Option<Vec<u8>>> {
    let parts: Vec<&str> = file.trim_start_matches('/').split('/').collect();
    let Some((name, folders)) = parts.split_last() else {
        return Ok(None);
    };
    if parts
        .iter()
        .any(|p| p.is_empty() || *p == "." || *p == "..")
    {
        return Err(Error::Io {
            path: file.to_owned(),
            message: "not a plain path below the drive".to_owned(),
        });
    }
    let mut here: Option<Dir> = None;
    for f in folders {
        let parent = here.as_ref().unwrap_or(top);
        match parent.child(f) {
            Ok(Some(d)) => here = Some(d),
            Ok(None) => return Ok(None),
            Err(p) => return Err(parent.error(f, &p)),
        }
    }
    let parent = here.as_ref().unwrap_or(top);
    parent
        .read(name, MAX_FILE_BYTES)
        .map_err(|p| parent.error(name, &p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drive_is_found_by_label_and_only_as_a_device_or_image() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(find(root.path()), None);
        assert!(!present(root.path()));
        let by = root.path().join(BY_LABEL);
        std::fs::create_dir_all(&by).unwrap();
        // A folder, a FIFO: no drive (ds-identify still sees the label).
        std::fs::create_dir(by.join("config-2")).unwrap();
        assert_eq!(find(root.path()), None);
        assert!(present(root.path()));
        std::fs::remove_dir(by.join("config-2")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            by.join("CONFIG-2"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        assert_eq!(find(root.path()), None);
        std::fs::remove_file(by.join("CONFIG-2")).unwrap();
        // An image behind udev's symlink, upper case label.
        std::fs::write(root.path().join("drive.img"), b"x").unwrap();
        std::os::unix::fs::symlink("../../../drive.img", by.join("CONFIG-2")).unwrap();
        assert_eq!(find(root.path()), Some(by.join("CONFIG-2")));
        // A dangling link: named (ds-identify), but no drive to read.
        std::fs::remove_file(root.path().join("drive.img")).unwrap();
        assert_eq!(find(root.path()), None);
        assert!(present(root.path()));
    }

    #[test]
    fn files_are_read_no_follow_and_bounded() {
        let top = tempfile::tempdir().unwrap();
        let latest = top.path().join("openstack/latest");
        std::fs::create_dir_all(&latest).unwrap();
        std::fs::write(latest.join("meta_data.json"), b"{}").unwrap();
        std::os::unix::fs::symlink("/etc/shadow", latest.join("network_data.json")).unwrap();
        let got = read_files(
            top.path(),
            &[
                "openstack/latest/meta_data.json",
                "openstack/latest/user_data",
                "openstack/2012-08-10/meta_data.json",
            ],
        )
        .unwrap();
        assert_eq!(got, [Some(b"{}".to_vec()), None, None]);
        let e = read_files(top.path(), &["openstack/latest/network_data.json"]).unwrap_err();
        assert!(e.to_string().contains("network_data.json"), "{e}");
        let e = read_files(top.path(), &["openstack/../../etc/passwd"]).unwrap_err();
        assert!(e.to_string().contains("plain path"), "{e}");
        let big = vec![b'a'; usize::try_from(MAX_FILE_BYTES).unwrap() + 1];
        std::fs::write(latest.join("user_data"), big).unwrap();
        assert!(read_files(top.path(), &["openstack/latest/user_data"]).is_err());
    }
}

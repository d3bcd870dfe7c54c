// SPDX-License-Identifier: Apache-2.0
//! Performs IO: an `OpenStack` config drive, found below the root and read
//! read-only.
//!
//! Nova's config drive is a small ISO 9660 (or vfat) file system labelled
//! `config-2` (cloud-init and ds-identify also accept `CONFIG-2`) holding the
//! metadata service's files under `openstack/latest/`. udev names it in
//! `<root>/dev/disk/by-label/` ([`find`]).
//!
//! # Which file systems
//!
//! Only ISO 9660 and vfat, as cloud-init's `DataSourceConfigDrive` accepts (it
//! asks blkid for `TYPE=vfat` or `TYPE=iso9660` with the label): the type is
//! identified from the device's first bytes before anything is mounted
//! ([`identify`]: ISO 9660's `CD001` volume descriptor at byte 32769, FAT's boot
//! sector), and mount(8) is told it (`-t iso9660` / `-t vfat`), never left to
//! guess. A device with the label and any other file system (ext2, say) is no
//! config drive: it is logged and ignored, and the metadata service is asked, as
//! when there is no drive (cloud-init's `ConfigDrive` finds no candidate, and the
//! `OpenStack` datasource then asks the service).
//!
//! # Bounded by the event's budget
//!
//! Every step ends by the deadline the caller's budget sets
//! ([`ConfigDrive::find`]): the first bytes are read by head(1) and the drive is
//! mounted and unmounted by mount(8) and umount(8), each a child process waited
//! for until the deadline and killed past it (never waited for again: a process
//! the kernel holds in uninterruptible sleep on a stalled device holds no one but
//! itself); the files are read on a thread that is waited for until the
//! deadline. When a step runs out, the mount point is detached lazily (`umount
//! -l`, given [`UMOUNT_GRACE`] past the deadline at most) and the read fails. A
//! mount point left under `run/leasehook/configdrive/` by an earlier run that was
//! killed (its process is gone) is detached lazily and removed by the next read.
//! One limit remains: a file read the kernel holds in uninterruptible sleep (a
//! block device that answers no I/O) holds the process's exit until the kernel
//! lets that read go, though the answer is given at the deadline.
//!
//! # How it is read
//!
//! mount(8), by absolute path and without a shell (`/usr/bin/mount` or
//! `/bin/mount`, arguments as a list): `-t TYPE -o ro,nosuid,nodev,noexec` onto a private
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

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result, ToolError};
use crate::fs::{Dir, run_folder_for_write};

pub use crate::source::detect::CONFIG_DRIVE_LABELS;

/// Where udev names file systems by label, below the root.
pub const BY_LABEL: &str = "dev/disk/by-label";

/// The folder below `run/leasehook` that holds the mount points.
pub const MOUNT_FOLDER: &str = "configdrive";

/// The most bytes one file read from the drive may have (user-data's cap).
pub const MAX_FILE_BYTES: u64 = crate::constants::IMDS_MAX_USER_DATA_BYTES;

/// mount(8), umount(8) and head(1), by absolute path: the first that exists.
const MOUNT: [&str; 2] = ["/usr/bin/mount", "/bin/mount"];
const UMOUNT: [&str; 2] = ["/usr/bin/umount", "/bin/umount"];
const HEAD: [&str; 2] = ["/usr/bin/head", "/bin/head"];

/// How far past the deadline unmounting may go (a drive that stalled used the
/// budget up; its mount must not be left behind).
pub const UMOUNT_GRACE: Duration = Duration::from_millis(500);

/// The least time a read of the drive is given (a caller whose budget is spent
/// still gets one try, as the metadata clients' one request of 2 s).
pub const MIN_BUDGET: Duration = Duration::from_secs(2);

/// How many first bytes of the device [`identify`] reads: up to the end of
/// ISO 9660's first volume descriptor's `CD001`.
pub const HEAD_BYTES: usize = ISO_MAGIC_AT + 5;

const ISO_MAGIC_AT: usize = 32769;

/// The file systems a config drive may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsType {
    /// ISO 9660 (Nova's default, `genisoimage -V config-2`).
    Iso9660,
    /// vfat (Nova's `config_drive_format = vfat`).
    Vfat,
}

impl FsType {
    /// Its name for `mount -t`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Iso9660 => "iso9660",
            Self::Vfat => "vfat",
        }
    }
}

/// Pure: the file system of a device from its first bytes (at least
/// [`HEAD_BYTES`] for ISO 9660): `CD001` at byte 32769 (the first volume
/// descriptor, ECMA-119 8.1) is ISO 9660; a FAT boot sector (a jump at byte 0,
/// the `0x55 0xAA` signature at 510, `FAT` at 54 (FAT12/16) or 82 (FAT32), a
/// sector size of 512 to 4096) is vfat. Anything else, ext2 included, is
/// `None`.
pub fn identify(head: &[u8]) -> Option<FsType> {
    if head.get(ISO_MAGIC_AT..ISO_MAGIC_AT + 5) == Some(b"CD001") {
        return Some(FsType::Iso9660);
    }
    let jump = matches!(head.first(), Some(0xEB | 0xE9));
    let signature = head.get(510..512) == Some(&[0x55, 0xAA][..]);
    let fat_name = head.get(54..57) == Some(b"FAT") || head.get(82..87) == Some(b"FAT32");
    let sector = head
        .get(11..13)
        .and_then(|b| <[u8; 2]>::try_from(b).ok())
        .map(u16::from_le_bytes)
        .is_some_and(|n| n.is_power_of_two() && (512..=4096).contains(&n));
    (jump && signature && fat_name && sector).then_some(FsType::Vfat)
}

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

/// A config drive to read: a labelled device holding ISO 9660 or vfat, and the
/// deadline every step of reading it keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigDrive {
    root: PathBuf,
    device: PathBuf,
    fs: FsType,
    deadline: Instant,
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

/// A child process of `program` with `args` (no shell, a clean environment,
/// standard input empty, standard output as `stdout`, standard error piped).
fn spawn(program: &str, args: &[&std::ffi::OsStr], stdout: Stdio) -> std::io::Result<Child> {
    Command::new(program)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
}

/// Waits for `child` until `deadline`; past it, kills it and returns `None`
/// without waiting for it (a process held in uninterruptible sleep ends when
/// the kernel lets it; the init process reaps it once we are gone).
fn wait_until(
    child: &mut Child,
    deadline: Instant,
) -> std::io::Result<Option<std::process::ExitStatus>> {
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let _ = child.kill();
            let _ = child.try_wait();
            return Ok(None);
        }
        std::thread::sleep(left.min(Duration::from_millis(5)));
    }
}

/// What is in a pipe now, without blocking (a helper mount(8) started, such as a
/// FUSE daemon, may keep it open).
fn drain(pipe: Option<impl std::io::Read + std::os::fd::AsFd>, limit: u64) -> Vec<u8> {
    let mut buf = Vec::new();
    if let Some(p) = pipe {
        let _ = rustix::fs::fcntl_setfl(&p, rustix::fs::OFlags::NONBLOCK);
        let _ = p.take(limit).read_to_end(&mut buf);
    }
    buf
}

/// Runs `program` until `deadline`: `Ok` when it exits 0, else its first line of
/// standard error and status, or that it was killed at the deadline.
fn run(
    program: &str,
    args: &[&std::ffi::OsStr],
    deadline: Instant,
) -> std::result::Result<(), ToolError> {
    let mut child = spawn(program, args, Stdio::null())?;
    let status = wait_until(&mut child, deadline)?;
    match status {
        Some(s) if s.success() => Ok(()),
        Some(status) => Err(ToolError::Failed {
            message: first_line(&drain(child.stderr.take(), 4096)),
            status,
        }),
        None => Err(ToolError::Killed(
            Path::new(program)
                .file_name()
                .map_or_else(|| program.into(), |n| n.to_string_lossy().into_owned()),
        )),
    }
}

/// The first line of a tool's standard error, blanks around it removed.
fn first_line(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .trim()
        .lines()
        .next()
        .unwrap_or("no message")
        .to_owned()
}

/// The device's first [`HEAD_BYTES`], read by head(1) until `deadline`.
fn read_head(device: &Path, deadline: Instant) -> std::result::Result<Vec<u8>, ToolError> {
    let head = tool(&HEAD).map_err(|e| ToolError::Missing(Box::new(e)))?;
    let count = HEAD_BYTES.to_string();
    let mut child = spawn(
        head,
        &["-c".as_ref(), count.as_ref(), device.as_os_str()],
        Stdio::piped(),
    )?;
    // The pipe holds 64 KiB: head never waits for us.
    match wait_until(&mut child, deadline)? {
        Some(s) if s.success() => Ok(drain(child.stdout.take(), HEAD_BYTES as u64)),
        Some(status) => Err(ToolError::Failed {
            message: first_line(&drain(child.stderr.take(), 4096)),
            status,
        }),
        None => Err(ToolError::HeadTimeout),
    }
}

/// Whether process `pid` is alive (a mount point named after it is in use).
fn alive(pid: &str) -> bool {
    pid.parse::<i32>()
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .is_some_and(|p| {
            rustix::process::test_kill_process(p).is_ok() || Path::new("/proc").join(pid).exists()
        })
}

/// Detaches (lazily) and removes every mount point under `base` left by a run
/// whose process is gone (a hook killed while it read the drive), until
/// `deadline`.
fn sweep(base: &Path, umount: &str, deadline: Instant) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((pid, _)) = name.split_once('-') else {
            continue;
        };
        if pid.parse::<u32>().is_err() || alive(pid) {
            continue;
        }
        let point = entry.path();
        match run(umount, &["-l".as_ref(), point.as_os_str()], deadline) {
            Ok(()) => log::warn!(
                "config drive: {} was left mounted by an earlier run (process {pid} is gone); detached",
                point.display()
            ),
            Err(e) => log::debug!("config drive: umount -l {}: {e}", point.display()),
        }
        if let Err(e) = std::fs::remove_dir(&point) {
            log::warn!("config drive: removing {}: {e}", point.display());
        }
    }
}

/// Unmounts `point` (lazily when a plain unmount fails or runs out), at most
/// [`UMOUNT_GRACE`] past `deadline`.
fn unmount(umount: &str, point: &Path, deadline: Instant) {
    let until = deadline.max(Instant::now()) + UMOUNT_GRACE;
    let plain = if Instant::now() < deadline {
        run(umount, &[point.as_os_str()], until)
    } else {
        Err(ToolError::BudgetSpent)
    };
    if let Err(e) = plain {
        log::warn!(
            "config drive: umount {}: {e}; detaching it lazily",
            point.display()
        );
        if let Err(e) = run(umount, &["-l".as_ref(), point.as_os_str()], until) {
            log::warn!("config drive: umount -l {}: {e}", point.display());
        }
    }
}

impl ConfigDrive {
    /// The drive below `root`, if there is one ([`find`]) and it holds ISO 9660
    /// or vfat ([`identify`]); every step of reading it ends within `budget`
    /// (at least [`MIN_BUDGET`]) from now. A labelled device with another file system, or whose first
    /// bytes cannot be read within the budget, is logged and is no drive (the
    /// metadata service is asked).
    pub fn find(root: &Path, budget: Duration) -> Option<Self> {
        let deadline = Instant::now() + budget.max(MIN_BUDGET);
        let device = find(root)?;
        let head = match read_head(&device, deadline) {
            Ok(h) => h,
            Err(e) => {
                log::warn!(
                    "config drive: {}: {e}; not read (asking the metadata service)",
                    device.display()
                );
                return None;
            }
        };
        let Some(fs) = identify(&head) else {
            log::warn!(
                "config drive: {} is labelled {} but holds neither iso9660 nor vfat; ignored, as cloud-init's ConfigDrive ignores it (asking the metadata service)",
                device.display(),
                device
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
            );
            return None;
        };
        Some(Self {
            root: root.to_owned(),
            device,
            fs,
            deadline,
        })
    }

    /// The drive's file system.
    pub fn fs_type(&self) -> FsType {
        self.fs
    }

    /// The drive's device (for `subplatform` and logs).
    pub fn device(&self) -> &Path {
        &self.device
    }

    /// Mounts the drive read-only (`-t` its type), reads each of `files` (paths
    /// below the drive's top, `/`-separated, no `..`), unmounts it, every step
    /// by the deadline [`ConfigDrive::find`] set. A file missing on the drive is
    /// `None`; a symlink, a folder, or a file larger than [`MAX_FILE_BYTES`] is
    /// an error naming it, and so is a step that ran out of time.
    pub fn read(&self, files: &[&str]) -> Result<Files> {
        let deadline = self.deadline;
        let mount = tool(&MOUNT)?;
        let umount = tool(&UMOUNT)?;
        let base = run_folder_for_write(&self.root, Some(MOUNT_FOLDER))?;
        sweep(base.path(), umount, deadline);
        let name = format!(
            "{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let point = base.child_for_write(&name, 0o700)?;
        let point_path = point.path().to_owned();
        drop(point);
        let device = format!("{:?}", self.device);
        let mounted = run(
            mount,
            &[
                "-t".as_ref(),
                self.fs.name().as_ref(),
                "-o".as_ref(),
                "ro,nosuid,nodev,noexec".as_ref(),
                self.device.as_os_str(),
                point_path.as_os_str(),
            ],
            deadline,
        );
        let result = match mounted {
            Ok(()) => {
                let top = point_path.clone();
                let wanted: Vec<String> = files.iter().map(|f| (*f).to_owned()).collect();
                let read = within(deadline, move || {
                    let refs: Vec<&str> = wanted.iter().map(String::as_str).collect();
                    read_files(&top, &refs)
                })
                .unwrap_or_else(|| {
                    Err(Error::Io {
                        path: device.clone(),
                        message: "reading the files did not finish within the budget".to_owned(),
                    })
                });
                unmount(umount, &point_path, deadline);
                read
            }
            Err(source) => {
                // A mount(8) killed at the deadline may still finish mounting.
                if matches!(source, ToolError::Killed(_)) {
                    unmount(umount, &point_path, deadline);
                }
                Err(Error::Mount { device, source })
            }
        };
        if let Err(e) = std::fs::remove_dir(&point_path) {
            log::warn!("config drive: removing {}: {e}", point_path.display());
        }
        result
    }
}

/// Runs `f` on a thread and waits for its answer until `deadline` (`None`: it did
/// not answer in time; the thread is left to end on its own).
fn within<T: Send + 'static>(
    deadline: Instant,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("configdrive".to_owned())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .ok()?;
    rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        .ok()
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

    /// Runs a tool that makes an image; fails (never skips) when it is missing.
    fn make(cmd: &mut Command) {
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("{cmd:?} (genisoimage, dosfstools, e2fsprogs): {e}"));
        assert!(
            out.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn only_iso9660_and_vfat_images_are_config_drives() {
        // Issue 30, item 1: real images, made by the tools Nova and users use.
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src/openstack/latest");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join("meta_data.json"), b"{}").unwrap();
        let iso = dir.path().join("cd.iso");
        make(
            Command::new("genisoimage")
                .args(["-quiet", "-V", "config-2", "-J", "-r", "-o"])
                .arg(&iso)
                .arg(dir.path().join("src")),
        );
        let fat = dir.path().join("fat.img");
        std::fs::write(&fat, vec![0u8; 2 * 1024 * 1024]).unwrap();
        make(
            Command::new("/usr/sbin/mkfs.vfat")
                .args(["-n", "CONFIG-2"])
                .arg(&fat),
        );
        let fat32 = dir.path().join("fat32.img");
        std::fs::write(&fat32, vec![0u8; 40 * 1024 * 1024]).unwrap();
        make(
            Command::new("/usr/sbin/mkfs.vfat")
                .args(["-F", "32", "-n", "CONFIG-2"])
                .arg(&fat32),
        );
        let ext2 = dir.path().join("ext2.img");
        make(
            Command::new("/usr/sbin/mke2fs")
                .args(["-q", "-F", "-t", "ext2", "-L", "config-2", "-d"])
                .arg(dir.path().join("src"))
                .arg(&ext2)
                .arg("1024"),
        );
        let head = |p: &Path| {
            let b = std::fs::read(p).unwrap();
            b[..HEAD_BYTES.min(b.len())].to_vec()
        };
        assert_eq!(identify(&head(&iso)), Some(FsType::Iso9660));
        assert_eq!(identify(&head(&fat)), Some(FsType::Vfat));
        assert_eq!(identify(&head(&fat32)), Some(FsType::Vfat));
        assert_eq!(identify(&head(&ext2)), None);
        assert_eq!(identify(&vec![0u8; HEAD_BYTES]), None);
        assert_eq!(identify(b""), None);
        // A short read of an ISO (its first 32 KiB only) is not one.
        assert_eq!(identify(&head(&iso)[..ISO_MAGIC_AT]), None);
        // What the drive lookup reads, through head(1), within a budget.
        let got = read_head(&iso, Instant::now() + Duration::from_secs(5)).unwrap();
        assert_eq!(got.len(), HEAD_BYTES);
        assert_eq!(identify(&got), Some(FsType::Iso9660));
        // Below a root: the ext2 image labelled config-2 is no drive; the ISO is.
        let root = dir.path().join("root");
        let by = root.join(BY_LABEL);
        std::fs::create_dir_all(&by).unwrap();
        std::os::unix::fs::symlink(&ext2, by.join("config-2")).unwrap();
        assert!(find(&root).is_some());
        assert_eq!(ConfigDrive::find(&root, Duration::from_secs(5)), None);
        std::fs::remove_file(by.join("config-2")).unwrap();
        std::os::unix::fs::symlink(&iso, by.join("config-2")).unwrap();
        let d = ConfigDrive::find(&root, Duration::from_secs(5)).unwrap();
        assert_eq!(d.fs_type(), FsType::Iso9660);
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

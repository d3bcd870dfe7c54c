// SPDX-License-Identifier: Apache-2.0
//! Config drives in tests: a private mount namespace where mount(8) finds an
//! `iso9660` helper.
//!
//! leasehook mounts a config drive with `mount -t iso9660` (or `-t vfat`), never
//! another type (issue 30, item 1). This project's machines (CI's too) run a
//! kernel with neither file system and no modules, so the tests give mount(8)
//! what util-linux looks for before calling the kernel: a `/sbin/mount.iso9660`
//! helper, here one that mounts the ISO with FUSE (`fuseiso`, Debian's package).
//! It exists only in the calling thread's own mount namespace, as an overlay over
//! `/usr/sbin` (`/sbin` links there on Debian 12), so the machine's real `/sbin`
//! is never changed; the ISO is a real one (`genisoimage`), and leasehook's code
//! path is the product's: mount(8) with `-t iso9660`. Every process the thread
//! starts afterwards (a DHCP client and its hook, `leasehook init`) inherits the
//! namespace. Needs root; panics (never skips) when something is missing.

// A test support module: a panic is how it reports what is missing.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// What the `mount.iso9660` helper does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Helper {
    /// Mounts the ISO with `fuseiso`.
    Fuse,
    /// Never returns (a mount(8) held by a drive that does not answer).
    Stalls,
}

/// The namespace's files; the overlay is detached when dropped.
#[derive(Debug)]
pub struct IsoMountNs {
    dir: PathBuf,
}

fn sh(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Enters a private mount namespace (this thread only) in which mount(8) runs
/// `helper` for `-t iso9660`.
pub fn enter(helper: Helper) -> IsoMountNs {
    assert!(
        Path::new("/usr/bin/fuseiso").exists(),
        "fuseiso is missing (Debian package fuseiso; scripts/test.sh installs it)"
    );
    let dir = std::env::temp_dir().join(format!(
        "leasehook-isons-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let upper = dir.join("upper");
    std::fs::create_dir_all(&upper).unwrap();
    std::fs::create_dir_all(dir.join("work")).unwrap();
    let body: &str = match helper {
        Helper::Fuse => {
            "exec /usr/bin/fuseiso \"$spec\" \"$dir\" -o \"$opts\" </dev/null >/dev/null"
        }
        // Its pid is kept, so the guard can end it (mount(8) killed at the
        // deadline leaves its helper running).
        Helper::Stalls => &format!(
            "echo $$ >> '{}'\nexec sleep 600",
            dir.join("helper.pids").display()
        ),
    };
    let script = format!(
        "#!/bin/sh\n# mount(8)'s helper interface: SPEC DIR [-sfnv] [-N NS] [-o OPTS] [-t TYPE]\nspec=$1 dir=$2\nshift 2\nopts=ro\nwhile [ $# -gt 0 ]; do case $1 in -o) opts=$2; shift 2 ;; *) shift ;; esac; done\n{body}\n"
    );
    let path = upper.join("mount.iso9660");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // Only the mount namespace (no FILES): the thread keeps its descriptors.
    #[allow(deprecated)]
    rustix::thread::unshare(rustix::thread::UnshareFlags::NEWNS)
        .unwrap_or_else(|e| panic!("unshare(CLONE_NEWNS) (root?): {e}"));
    sh(Command::new("mount").args(["--make-rprivate", "/"]));
    sh(Command::new("mount").args([
        "-t",
        "overlay",
        "overlay",
        "-o",
        &format!(
            "lowerdir=/usr/sbin,upperdir={},workdir={}",
            upper.display(),
            dir.join("work").display()
        ),
        "/usr/sbin",
    ]));
    IsoMountNs { dir }
}

impl IsoMountNs {
    /// The mounts of this thread's namespace whose line holds `what`.
    pub fn mounts_holding(&self, what: &str) -> Vec<String> {
        std::fs::read_to_string("/proc/thread-self/mounts")
            .unwrap()
            .lines()
            .filter(|l| l.contains(what))
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for IsoMountNs {
    fn drop(&mut self) {
        // The stalled helpers this namespace started, by their pids.
        let pids = std::fs::read_to_string(self.dir.join("helper.pids")).unwrap_or_default();
        for pid in pids.split_whitespace() {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
        }
        let _ = Command::new("umount").args(["-l", "/usr/sbin"]).status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

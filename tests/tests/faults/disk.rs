//! A full file system: under the interface's state at a RENEW, under the cache
//! at the first boot.

use std::path::{Path, PathBuf};
use std::process::Command;

use leasehook_tests::netns::{leasehook_bin, run};
use leasehook_tests::world::MAC1;

use crate::boot::{BootRoot, lxd_config};
use crate::instance::{INSTANCE_DATA, Imds, Instance, RECORD, THREE_IPS, command, tree_with};
use crate::matrix::{FileWant, Kernel, Row, Seen};

matrix! {
    #[cfg(feature = "netns")]
    disk_full_state => Row {
        name: "disk_full_state",
        fault: "disk full on the state folder (`run/leasehook/iface`, a full tmpfs) at a RENEW that adds an address",
        does: "the state cannot be recorded, so the kernel changes of the run are rolled back; an error names the file",
        exit: Some(1),
        log: "run/leasehook/iface/eth1.json\": No space left on device",
        run: run_disk_full_state,
        ..Row::KEEPS
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
        max_secs: 5.0,
        run: run_disk_full_cache,
        ..Row::KEEPS
    };
}

/// A small tmpfs mounted on a test-owned folder, unmounted when dropped.
pub(crate) struct Tmpfs(PathBuf);

impl Tmpfs {
    pub(crate) fn mount(at: &Path, size: &str) -> Self {
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
    pub(crate) fn fill(&self) {
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
    let mut seen = i.faulted(|i| {
        let url = i.start_imds(
            &tree_with(&[(MAC1, "local-ipv4s", THREE_IPS)]),
            &Imds::healthy(),
        );
        i.shim("RENEW", &url)
    });
    // The mount goes first, then the namespace and folder.
    seen.keep.insert(0, Box::new(fs));
    seen
}

fn run_disk_full_cache() -> Seen {
    let r = BootRoot::new("fdiskc");
    let fs = Tmpfs::mount(&r.path().join("var/lib/leasehook"), "16k");
    fs.fill();
    let d = r.lxd(lxd_config());
    r.faulted(vec![Box::new(fs), Box::new(d)], |r| {
        let (mut out, elapsed) = r.init(&[]);
        // What `leasehook status` says afterwards is part of what a user sees.
        let status = command(None, None, &[], &leasehook_bin())
            .args(["status", "--root"])
            .arg(r.path())
            .output()
            .unwrap();
        out.stderr.extend_from_slice(&status.stdout);
        (out, elapsed)
    })
}

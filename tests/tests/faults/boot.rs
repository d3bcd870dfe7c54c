//! LXD and the boot cache, through `leasehook init --local`: the socket gone or
//! broken on a later boot, and a cache spoiled in every way a disk can spoil it.

use std::collections::BTreeMap;
use std::os::unix::fs::{PermissionsExt as _, symlink};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use leasehook_tests::devlxd::{self, Devlxd, SAMPLE_META_DATA};
use leasehook_tests::netns::{TempDir, leasehook_bin};

use crate::instance::{INSTANCE_DATA, INSTANCE_ID, RECORD, command, timed};
use crate::matrix::{FileWant, Kernel, Ran, Row, Seen, files_under};

/// A boot-stage row: no kernel involved, 5 s at most.
const BOOT: Row = Row {
    kernel: Kernel::NotInvolved,
    max_secs: 5.0,
    ..Row::KEEPS
};

matrix! {
    lxd_socket_missing => Row {
        name: "lxd_socket_missing",
        fault: "LXD socket missing on a later boot (`security.devlxd=false`)",
        does: "warns, uses the cached datasource: the same instance",
        files: &[
            FileWant::Unchanged(RECORD),
            FileWant::Unchanged(INSTANCE_ID),
            FileWant::Holds(INSTANCE_DATA, "\"restored_from_cache\": true"),
        ],
        log: "using the cached LXD \"i-87018aed\"",
        run: || lxd_second_boot(LxdFault::SocketGone),
        ..BOOT
    };
    lxd_500 => Row {
        name: "lxd_500",
        fault: "LXD socket answers 500 to everything on a later boot",
        does: "retries 30 × 100 ms, then the check fails and the cached datasource stands in",
        files: &[
            FileWant::Unchanged(RECORD),
            FileWant::Unchanged(INSTANCE_ID),
            FileWant::Holds(INSTANCE_DATA, "\"restored_from_cache\": true"),
        ],
        log: "HTTP 500 (got \"broken\")",
        not_in_log: "(28 more time(s) at most)",
        max_secs: 8.0,
        run: || lxd_second_boot(LxdFault::Http500),
        ..BOOT
    };
    lxd_not_json => Row {
        name: "lxd_not_json",
        fault: "LXD socket answers HTML to `GET /1.0/config` on the first boot",
        does: "a clear error; no datasource, nothing cached (exit 3: datasource None)",
        exit: Some(3),
        files: &[
            FileWant::Absent("var/lib/leasehook/instances"),
            FileWant::Holds(INSTANCE_DATA, "iid-datasource-none"),
        ],
        log: "LXD GET http://lxd/1.0/config: expected JSON, found something else",
        run: run_lxd_not_json,
        ..BOOT
    };

    cache_corrupt => Row {
        name: "cache_corrupt",
        fault: "boot cache corrupt (not JSON)",
        does: "sets the record aside, boots with datasource None; the instance's data stays",
        exit: Some(3),
        files: &[
            FileWant::Holds("var/lib/leasehook/instances/i-87018aed/datasource.json.corrupt", "garbage"),
            FileWant::Unchanged(INSTANCE_ID),
        ],
        log: "corrupt (not JSON",
        run: || spoiled_cache(Spoil::Corrupt),
        ..BOOT
    };
    cache_truncated => Row {
        name: "cache_truncated",
        fault: "boot cache truncated (half the record)",
        does: "sets the record aside, boots with datasource None; the instance's data stays",
        exit: Some(3),
        files: &[
            FileWant::Holds("var/lib/leasehook/instances/i-87018aed/datasource.json.corrupt", "\"version\""),
            FileWant::Unchanged(INSTANCE_ID),
        ],
        log: "corrupt (truncated",
        run: || spoiled_cache(Spoil::Truncated),
        ..BOOT
    };
    cache_future_version => Row {
        name: "cache_future_version",
        fault: "boot cache written by a newer leasehook (version 7)",
        does: "refuses to guess, sets it aside, boots with datasource None",
        exit: Some(3),
        files: &[
            FileWant::Holds("var/lib/leasehook/instances/i-87018aed/datasource.json.corrupt", "\"version\": 7"),
            FileWant::Unchanged(INSTANCE_ID),
        ],
        log: "unknown cache version (version 7, written by a newer leasehook",
        run: || spoiled_cache(Spoil::Future),
        ..BOOT
    };
    #[cfg(feature = "netns")]
    cache_unreadable => Row {
        name: "cache_unreadable",
        fault: "boot cache unreadable (mode 000, no `CAP_DAC_OVERRIDE`)",
        does: "logs why, boots with datasource None; the record is kept where it is",
        exit: Some(3),
        files: &[FileWant::Holds(RECORD, ""), FileWant::Unchanged(INSTANCE_ID)],
        log: "datasource.json cannot be read: Permission denied (os error 13)",
        run: || spoiled_cache(Spoil::Unreadable),
        ..BOOT
    };
    cache_symlinked => Row {
        name: "cache_symlinked",
        fault: "boot cache record replaced by a symlink to another file",
        does: "never follows it: sets the link aside, boots with datasource None; the target is neither read nor written",
        exit: Some(3),
        files: &[
            FileWant::Holds("var/lib/leasehook/instances/i-87018aed/datasource.json.corrupt", ""),
            FileWant::Unchanged("outside/secret"),
            FileWant::Unchanged(INSTANCE_ID),
        ],
        log: "datasource.json is a symlink, which is never followed",
        run: || spoiled_cache(Spoil::Symlink),
        ..BOOT
    };
    cache_link_outside => Row {
        name: "cache_link_outside",
        fault: "the cache's `instance` link points outside the cache (`/etc`)",
        does: "never follows it: sets it aside, boots with datasource None",
        exit: Some(3),
        files: &[
            FileWant::Holds("var/lib/leasehook/instance.corrupt", ""),
            FileWant::Unchanged(RECORD),
            FileWant::Unchanged(INSTANCE_ID),
        ],
        log: "points at \"/etc\", outside",
        run: || spoiled_cache(Spoil::LinkOutside),
        ..BOOT
    };
}

/// A fake root for the boot stage.
pub(crate) struct BootRoot {
    dir: TempDir,
}

impl BootRoot {
    pub(crate) fn new(tag: &str) -> Self {
        Self {
            dir: TempDir::new(tag),
        }
    }
    pub(crate) fn path(&self) -> &Path {
        &self.dir.0
    }
    pub(crate) fn socket(&self) -> PathBuf {
        self.path().join("dev/lxd/sock")
    }
    pub(crate) fn lxd(&self, config: devlxd::Config) -> Devlxd {
        std::fs::create_dir_all(self.path().join("dev/lxd")).unwrap();
        Devlxd::start(&self.socket(), config).unwrap()
    }
    /// `leasehook init --local` on an LXD container (its standard output
    /// appended to its log).
    pub(crate) fn init(&self, wrap: &[&str]) -> (Output, Duration) {
        let mut cmd = command(None, None, wrap, &leasehook_bin());
        cmd.args(["init", "--local", "--virt", "lxc", "--root"])
            .arg(self.path())
            .env_remove("LEASEHOOK_IMDS_ENDPOINTS");
        timed(cmd)
    }
    /// The first boot with a healthy socket, which is then switched off; then the
    /// reboot empties `run/`.
    fn first_boot_then_socket_off(&self) {
        let d = self.lxd(lxd_config());
        let (out, _) = self.init(&[]);
        assert!(
            out.status.success(),
            "first boot: {}",
            crate::instance::text(&out)
        );
        assert!(self.path().join(RECORD).is_file());
        drop(d);
        let _ = std::fs::remove_file(self.socket());
        let _ = std::fs::remove_dir_all(self.path().join("run"));
    }
    /// The files now, then the faulted run `f`: what the row saw (`keep`
    /// released after the checks, before the root).
    pub(crate) fn faulted<R: Into<Ran>>(
        self,
        keep: Vec<Box<dyn std::any::Any>>,
        f: impl FnOnce(&Self) -> R,
    ) -> Seen {
        let files_before: BTreeMap<PathBuf, Vec<u8>> = files_under(self.path());
        let ran: Ran = f(&self).into();
        let mut keep = keep;
        let root = self.path().to_path_buf();
        keep.push(Box::new(self));
        Seen {
            exit: ran.exit,
            log: ran.log,
            root,
            files_before,
            kernel_before: None,
            kernel_after: None,
            elapsed: ran.elapsed,
            keep,
        }
    }
}

pub(crate) fn lxd_config() -> devlxd::Config {
    devlxd::Config::new(SAMPLE_META_DATA)
        .key("user.user-data", "#cloud-config\n{}\n")
        .key("user.tag", "blue")
}

#[derive(Clone, Copy)]
enum LxdFault {
    SocketGone,
    Http500,
}

fn lxd_second_boot(fault: LxdFault) -> Seen {
    let r = BootRoot::new("flxd");
    r.first_boot_then_socket_off();
    let mut keep: Vec<Box<dyn std::any::Any>> = Vec::new();
    if let LxdFault::Http500 = fault {
        let mut cfg = lxd_config();
        for p in ["/1.0", "/1.0/meta-data", "/1.0/config", "/1.0/devices"] {
            cfg = cfg.rule(p, 500, "broken", None);
        }
        keep.push(Box::new(r.lxd(cfg)));
    }
    r.faulted(keep, |r| r.init(&[]))
}

fn run_lxd_not_json() -> Seen {
    let r = BootRoot::new("fljson");
    let d = r.lxd(lxd_config().rule("/1.0/config", 200, "<html>oops</html>", None));
    r.faulted(vec![Box::new(d)], |r| r.init(&[]))
}

#[derive(Clone, Copy)]
enum Spoil {
    Corrupt,
    Truncated,
    Future,
    Unreadable,
    Symlink,
    LinkOutside,
}

fn spoiled_cache(spoil: Spoil) -> Seen {
    let r = BootRoot::new("fcache");
    r.first_boot_then_socket_off();
    let rec = r.path().join(RECORD);
    let cache = r.path().join("var/lib/leasehook");
    let mut wrap: Vec<&str> = Vec::new();
    match spoil {
        Spoil::Corrupt => std::fs::write(&rec, "\u{0}\u{1} garbage").unwrap(),
        Spoil::Truncated => {
            let t = std::fs::read(&rec).unwrap();
            std::fs::write(&rec, &t[..t.len() / 2]).unwrap();
        }
        Spoil::Future => {
            let t = std::fs::read_to_string(&rec).unwrap();
            assert!(t.contains("\"version\": 1"), "{t}");
            std::fs::write(&rec, t.replace("\"version\": 1", "\"version\": 7")).unwrap();
        }
        Spoil::Unreadable => {
            std::fs::set_permissions(&rec, std::fs::Permissions::from_mode(0o000)).unwrap();
            // Root reads anything; without these capabilities, mode 000 holds.
            wrap = vec![
                "setpriv",
                "--inh-caps=-all",
                "--bounding-set=-dac_override,-dac_read_search",
            ];
        }
        Spoil::Symlink => {
            let outside = r.path().join("outside");
            std::fs::create_dir_all(&outside).unwrap();
            std::fs::write(outside.join("secret"), "do not read or overwrite\n").unwrap();
            std::fs::remove_file(&rec).unwrap();
            symlink(outside.join("secret"), &rec).unwrap();
        }
        Spoil::LinkOutside => {
            std::fs::remove_file(cache.join("instance")).unwrap();
            symlink("/etc", cache.join("instance")).unwrap();
        }
    }
    r.faulted(Vec::new(), |r| r.init(&wrap))
}

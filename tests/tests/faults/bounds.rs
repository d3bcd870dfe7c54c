//! Issue 30, bounds: config drives of the wrong type, stalled or left mounted,
//! Azure's pace lock held, a crowded CNI folder, `apply --plan` with what is not
//! a plan, and `leasehook watch` against a hostile event stream.

use std::ffi::OsStr;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use leasehook_tests::clouds::{Cloud, REFUSED};
use leasehook_tests::netns::leasehook_bin;
use leasehook_tests::world::MAC1;
use serde_json::json;

use crate::boot::{BootRoot, lxd_config};
use crate::instance::{
    BASE_ROUTES, BASE_RULES, Imds, Instance, OPENSTACK_RULES, Proc, STATE, bound_patiently,
    command, renew_healthy, text,
};
use crate::matrix::{FileWant, Kernel, Row, Seen, snap};

matrix! {
    #[cfg(feature = "netns")]
    bounds_ext2_config_drive => Row {
        name: "bounds_ext2_config_drive",
        fault: "an ext2 file system labelled `config-2` holding a `network_data.json`, the OpenStack metadata service up",
        does: "no config drive (only iso9660 and vfat are, as cloud-init's ConfigDrive): never mounted, logged; the metadata service is asked and agrees",
        files: &[FileWant::Holds(STATE, "\"table\":19872"), FileWant::Absent("run/leasehook/configdrive")],
        log: "holds neither iso9660 nor vfat; ignored",
        not_in_log: "mount read-only",
        max_secs: 4.0,
        run: run_bounds_ext2_config_drive,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    bounds_stalled_config_drive => Row {
        name: "bounds_stalled_config_drive",
        fault: "a config drive (ISO 9660) whose mount never returns (mount(8) held), the budget 1 s",
        does: "mount(8) is killed at the budget (at least one request's 2 s); the mount point is detached and removed; keeps the last applied state",
        files: &[FileWant::Unchanged(STATE), FileWant::Holds("run/leasehook/configdrive", "")],
        log: "mount did not finish within the budget; killed",
        max_secs: 4.0,
        run: run_bounds_stalled_config_drive,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    bounds_config_drive_left_mounted => Row {
        name: "bounds_config_drive_left_mounted",
        fault: "a config drive left mounted under `run/leasehook/configdrive/` by a run that was killed",
        does: "the next event detaches it and removes its folder, then reads the drive",
        files: &[FileWant::Holds(STATE, "\"table\":19872"), FileWant::Absent("run/leasehook/configdrive/999999999-0")],
        log: "was left mounted by an earlier run (process 999999999 is gone); detached",
        max_secs: 4.0,
        run: run_bounds_config_drive_left_mounted,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    bounds_azure_pace_lock_held => Row {
        name: "bounds_azure_pace_lock_held",
        fault: "Azure: another process holds the pace file's lock (`run/leasehook/azure-imds.lock`) for 10 s, the budget 1 s",
        does: "waits for the lock until the budget ends, then asks nothing (never an unpaced request); keeps the last applied state",
        log: "held the lock that paces Azure IMDS requests for the whole budget",
        run: run_bounds_azure_pace_lock_held,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    bounds_cni_folder_crowded => Row {
        name: "bounds_cni_folder_crowded",
        fault: "3000 other files beside the AWS VPC CNI's `10-aws.conflist` in `etc/cni/net.d`",
        does: "finds the CNI's file among them: a Kubernetes node (the primary's addresses are the CNI's); eth1, no CNI's ENI, is routed",
        kernel: Kernel::Exactly { rules: BASE_RULES, routes: BASE_ROUTES, addresses: &["eth1 10.98.1.21/32"] },
        files: &[FileWant::Holds(STATE, "\"table\":10001")],
        log: "Kubernetes node (AWS VPC CNI): AWS VPC CNI configuration etc/cni/net.d/10-aws.conflist",
        max_secs: 7.0,
        run: run_bounds_cni_folder_crowded,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    bounds_apply_plan_dev_zero => Row {
        name: "bounds_apply_plan_dev_zero",
        fault: "`leasehook apply --plan /dev/zero`",
        does: "refuses the file (not a regular file) without reading it; changes nothing",
        exit: Some(1),
        log: "failed to read \"/dev/zero\": not a regular file",
        max_secs: 2.0,
        run: || bounds_apply_plan(None),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    bounds_apply_plan_lo => Row {
        name: "bounds_apply_plan_lo",
        fault: "`leasehook apply --plan` with a hand-written plan adding 10.200.0.5/8 to `lo`",
        does: "refuses the plan (the gate: `lo` is no Ethernet NIC); changes nothing",
        exit: Some(1),
        log: "lo: not an Ethernet NIC",
        max_secs: 2.0,
        run: || bounds_apply_plan(Some("lo")),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    bounds_apply_plan_wide => Row {
        name: "bounds_apply_plan_wide",
        fault: "`leasehook apply --plan` with a hand-written plan adding 10.200.0.5/8 to eth1 (no subnet route in it)",
        does: "refuses the plan (the gate: a prefix wider than /24 with no subnet); changes nothing",
        exit: Some(1),
        log: "eth1: address 10.200.0.5/8 refused",
        max_secs: 2.0,
        run: || bounds_apply_plan(Some("eth1")),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    bounds_watch_stream_dropped => Row {
        name: "bounds_watch_stream_dropped",
        fault: "`leasehook watch`: `/1.0/events` accepts the upgrade, then drops every stream at once (4 s, then SIGTERM)",
        does: "reconnects with the doubling backoff (a handshake alone resets nothing: at most 8 connections in 4 s), warns once; exits on SIGTERM",
        kernel: Kernel::NotInvolved,
        files: &[],
        log: "reconnecting with backoff (logged once until it answers)",
        not_in_log: "answers again",
        max_secs: 1.0,
        run: || bounds_watch(leasehook_tests::hostile_ws::Hostile::Drop),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    bounds_watch_bad_frame => Row {
        name: "bounds_watch_bad_frame",
        fault: "`leasehook watch`: `/1.0/events` accepts the upgrade, then sends one frame with a reserved opcode on every stream (4 s, then SIGTERM)",
        does: "the same: doubling backoff, at most 8 connections in 4 s, one warning; exits on SIGTERM",
        kernel: Kernel::NotInvolved,
        files: &[],
        log: "reconnecting with backoff (logged once until it answers)",
        not_in_log: "answers again",
        max_secs: 1.0,
        run: || bounds_watch(leasehook_tests::hostile_ws::Hostile::BadFrame),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    bounds_watch_ping_flood => Row {
        name: "bounds_watch_ping_flood",
        fault: "`leasehook watch`: `/1.0/events` floods pings and reads nothing (SIGTERM after 4 s)",
        does: "writes wait at most a tick: exits on SIGTERM within a second (the run's time is the stop's)",
        kernel: Kernel::NotInvolved,
        files: &[],
        log: "LXD events: following",
        max_secs: 1.0,
        run: || bounds_watch(leasehook_tests::hostile_ws::Hostile::PingFlood),
        ..Row::KEEPS
    };
}

/// An ISO 9660 config drive of the emulator's world at `image`, named
/// `dev/disk/by-label/config-2` below `root`.
fn iso_drive(root: &Path, image: &Path) {
    leasehook_tests::openstack_emulator::make_config_drive(
        &leasehook_tests::openstack_emulator::world_tree(),
        "config-2",
        image,
    );
    let by = root.join("dev/disk/by-label");
    std::fs::create_dir_all(&by).unwrap();
    symlink(image, by.join("config-2")).unwrap();
}

fn run_bounds_ext2_config_drive() -> Seen {
    let mut i = Instance::new("fbext2");
    i.bound_on(Cloud::OpenStack);
    let src = i.dir.0.join("ext2src/openstack/latest");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join("network_data.json"),
        leasehook_tests::openstack_emulator::world_tree()["network_data"].to_string(),
    )
    .unwrap();
    let image = i.dir.0.join("ext2.img");
    let out = Command::new("/usr/sbin/mke2fs")
        .args(["-q", "-F", "-t", "ext2", "-L", "config-2", "-d"])
        .arg(i.dir.0.join("ext2src"))
        .arg(&image)
        .arg("1024")
        .output()
        .unwrap();
    assert!(out.status.success(), "mke2fs: {}", text(&out));
    let by = i.root.join("dev/disk/by-label");
    std::fs::create_dir_all(&by).unwrap();
    symlink(&image, by.join("config-2")).unwrap();
    i.faulted(|i| renew_healthy(i, Cloud::OpenStack))
}

fn run_bounds_stalled_config_drive() -> Seen {
    use leasehook_tests::configdrive::{self, Helper};
    let mut i = Instance::new("fbstall");
    i.bound_on(Cloud::OpenStack);
    // mount(8) runs a helper that never returns (this thread's namespace only).
    let ns = configdrive::enter(Helper::Stalls);
    iso_drive(&i.root, &i.dir.0.join("cd.iso"));
    let mut seen = i.faulted(|i| {
        let (out, elapsed) = i.event(Cloud::OpenStack, "RENEW", REFUSED, &[]);
        let points = i.root.join("run/leasehook/configdrive");
        assert_eq!(
            std::fs::read_dir(&points).unwrap().count(),
            0,
            "mount point left"
        );
        (out, elapsed)
    });
    seen.keep.push(Box::new(ns));
    seen
}

fn run_bounds_config_drive_left_mounted() -> Seen {
    use leasehook_tests::configdrive::{self, Helper};
    let i = Instance::new("fbleft");
    let ns = configdrive::enter(Helper::Fuse);
    let image = i.dir.0.join("cd.iso");
    iso_drive(&i.root, &image);
    let (out, _) = i.event(Cloud::OpenStack, "BOUND", REFUSED, &[]);
    assert!(out.status.success(), "BOUND failed: {}", text(&out));
    assert_eq!(snap(&i.ns).0, OPENSTACK_RULES, "BOUND: {}", text(&out));
    // A run killed while the drive was mounted: its folder, its process gone.
    let left = i.root.join("run/leasehook/configdrive/999999999-0");
    std::fs::create_dir_all(&left).unwrap();
    let out = Command::new("mount")
        .args(["-t", "iso9660", "-o", "ro"])
        .arg(&image)
        .arg(&left)
        .output()
        .unwrap();
    assert!(out.status.success(), "mount: {}", text(&out));
    assert_eq!(ns.mounts_holding(&i.root.display().to_string()).len(), 1);
    let mut seen = i.faulted(|i| {
        let (out, elapsed) = i.event(Cloud::OpenStack, "RENEW", REFUSED, &[]);
        let left_mounted = ns.mounts_holding(&i.root.display().to_string());
        assert!(
            left_mounted.is_empty(),
            "still mounted: {left_mounted:?}; {}",
            text(&out)
        );
        (out, elapsed)
    });
    // What was under the mount is the drive's, not the root's.
    seen.files_before.retain(|p, _| !p.starts_with(&left));
    seen.keep.push(Box::new(ns));
    seen
}

fn run_bounds_azure_pace_lock_held() -> Seen {
    let mut i = Instance::new("fbpace");
    let url = i.start(Cloud::Azure, &Imds::healthy());
    let (out, _) = i.event(Cloud::Azure, "BOUND", &url, &[]);
    assert!(out.status.success(), "BOUND failed: {}", text(&out));
    // Another process (a stopped worker) holds the pace file's lock.
    let lock = i.root.join("run/leasehook/azure-imds.lock");
    assert!(lock.is_file());
    let holder = Proc(
        Command::new("flock")
            .arg(&lock)
            .args(["sleep", "10"])
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(200));
    let mut seen = i.faulted(|i| i.event(Cloud::Azure, "RENEW", &url, &[]));
    seen.keep.push(Box::new(holder));
    seen
}

fn run_bounds_cni_folder_crowded() -> Seen {
    let i = Instance::new("fbcni");
    let dir = i.root.join("etc/cni/net.d");
    std::fs::create_dir_all(&dir).unwrap();
    for n in 0..3000 {
        std::fs::write(dir.join(format!("00-other-{n:05}.conf")), "{}").unwrap();
    }
    std::fs::write(dir.join("10-aws.conflist"), "{}").unwrap();
    i.faulted(bound_patiently)
}

/// A good BOUND, then `leasehook apply --plan` with `/dev/zero` (`None`) or a
/// plan adding 10.200.0.5/8 to `iface`, without a subnet route.
fn bounds_apply_plan(iface: Option<&str>) -> Seen {
    let mut i = Instance::new("fbplan");
    i.bound();
    let plan = match iface {
        None => PathBuf::from("/dev/zero"),
        Some(dev) => {
            let mac = if dev == "lo" {
                "00:00:00:00:00:00"
            } else {
                MAC1
            };
            let body = json!({"profile": "ec2-net-utils", "interfaces": [{
                "name": dev, "mac": mac, "primary": false, "families": ["ipv4"],
                "table": 10050, "metric": null,
                "addresses": [{"addr": "10.200.0.5/8", "dev": dev}],
                "routes": [], "rules": [], "missing": []}]});
            i.dir.file("plan.json", &body.to_string())
        }
    };
    i.faulted(|i| {
        let args = [OsStr::new("apply"), "--plan".as_ref(), plan.as_os_str()];
        let (out, elapsed) = i.leasehook(
            None,
            &[&args[..], &["--root".as_ref(), i.root.as_os_str()]].concat(),
        );
        let lo = i.ns.ip(&["-j", "address", "show", "dev", "lo"]);
        assert!(!lo.contains("10.200.0.5"), "added to lo: {lo}");
        (out, elapsed)
    })
}

/// `leasehook watch` on an LXD root (booted by `leasehook init --local` against
/// the emulator), its socket then replaced by a server that misbehaves as `how`
/// says; SIGTERM after 4 s. The row's time is the stop's (SIGTERM to exit).
fn bounds_watch(how: leasehook_tests::hostile_ws::Hostile) -> Seen {
    use leasehook_tests::hostile_ws::{self, Hostile};
    let b = BootRoot::new("fbwatch");
    let d = b.lxd(lxd_config());
    let (out, _) = b.init(&[]);
    assert!(out.status.success(), "boot: {}", text(&out));
    drop(d);
    let _ = std::fs::remove_file(b.socket());
    let count = hostile_ws::serve(&b.socket(), how);
    b.faulted(Vec::new(), |b| {
        let mut cmd = command(None, None, &[], &leasehook_bin());
        cmd.args(["watch", "--config", "/dev/null", "--root"])
            .arg(b.path())
            .env_remove("LEASEHOOK_ROOT")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let child = cmd.spawn().unwrap();
        std::thread::sleep(Duration::from_secs(4));
        let t = Instant::now();
        let kill = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let out = child.wait_with_output().unwrap();
        let elapsed = t.elapsed();
        let log = text(&out);
        let seen = count.load(std::sync::atomic::Ordering::SeqCst);
        if how == Hostile::PingFlood {
            assert_eq!(seen, 1, "{seen} connections; {log}");
        } else {
            // 100 ms doubling: 0.1 + 0.2 + 0.4 + 0.8 + 1.6 s, about 6 tries in 4 s.
            assert!(seen <= 8, "{seen} connections in 4 s; {log}");
            // The stream's warnings (the resync's own failed requests aside).
            let warnings = log
                .lines()
                .filter(|l| {
                    l.contains("WARN: LXD events: the stream") || l.contains("cannot follow")
                })
                .count();
            assert_eq!(warnings, 1, "{warnings} warnings; {log}");
        }
        (out, elapsed)
    })
}

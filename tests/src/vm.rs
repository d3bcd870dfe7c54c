// SPDX-License-Identifier: Apache-2.0
//! Tests that need 802.1Q VLAN links, on a kernel that has none.
//!
//! This machine's and CI's kernel (Firecracker) has no 802.1Q: `ip link add ...
//! type vlan` says "Unknown device type". A test that needs VLAN links calls
//! [`in_vlan_kernel`] first; where VLAN is missing, that re-runs the same test
//! inside a QEMU VM booted on Debian's distribution kernel, which has the 8021q
//! module. `scripts/fetch-vlan-kernel.sh` provides the kernel and the initramfs
//! under `target/vm/` (`LEASEHOOK_VM_DIR` names another folder).
//!
//! Inside the VM (PID 1 is `tests/vm/init`): the host's root, shared read-only
//! over 9p, under a tmpfs overlay, so every host path is there and writable, and
//! nothing written goes back to the host; fresh tmpfs on `/etc/netns`, `/tmp`, `/run`,
//! `/var/tmp` (unless the checkout, the test executable or the VM's kernel is
//! in one: a clone in `/tmp`), `/dev/shm`; root; the kernel's modules from the fetched tree,
//! loaded on demand by the host's own `modprobe`; no network but loopback
//! (QEMU `-nic none`); this process's environment, its working directory and
//! `LEASEHOOK_IN_VM=1`. The test executable runs with `--exact NAME
//! --nocapture --test-threads=1`, its output comes back on the serial console,
//! and its exit status on a marker line the run script prints after it.
//!
//! KVM is used when `/dev/kvm` opens and the CPU advertises VMX or SVM; else
//! QEMU emulates (TCG: about ten seconds to boot). `LEASEHOOK_VM_ACCEL=kvm|tcg`
//! forces one, `LEASEHOOK_VM_TIMEOUT` (seconds, default 600) bounds the VM.

use std::ffi::OsStr;
use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The line the run script prints when the test starts.
const RUNNING: &str = "leasehook-vm: running";
/// The line the run script prints after the test: this, then the exit status.
const STATUS: &str = "leasehook-vm: exit status ";
/// What `tests/vm/init` prints when it cannot hand over to the run script.
const INIT_FAILED: &str = "leasehook-vm: init failed";

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Whether this kernel can make an 802.1Q VLAN link (tried in a throwaway namespace).
pub fn kernel_has_vlan() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        // An anonymous network namespace that goes when `sh` exits.
        Command::new("unshare")
            .args([
                "--net",
                "sh",
                "-c",
                "ip link add lhv0 type veth peer name lhv1 && \
                 ip link add link lhv0 name lhv0.5 type vlan id 5",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// For a test that needs 802.1Q. Returns `false` when the test should go on here (this kernel
/// has VLAN, or we already are inside the VM). Otherwise runs this same test executable
/// (`std::env::current_exe()`) with `--exact <test_name> --nocapture` inside the VM, prints its
/// output, panics if it failed or the VM could not be booted, and returns `true` (the caller
/// returns: the test ran and passed in the VM).
pub fn in_vlan_kernel(test_name: &str) -> bool {
    if std::env::var_os("LEASEHOOK_IN_VM").is_some_and(|v| v == "1") || kernel_has_vlan() {
        return false;
    }
    run_in_vm(test_name);
    true
}

/// The folder `scripts/fetch-vlan-kernel.sh` fills.
fn vm_dir() -> PathBuf {
    std::env::var_os("LEASEHOOK_VM_DIR")
        .map_or_else(|| crate::workspace_root().join("target/vm"), PathBuf::from)
}

/// The fetched kernel: its image, initramfs and version (`6.12.57+deb13-amd64`).
struct Kernel {
    image: PathBuf,
    initramfs: PathBuf,
    modules: PathBuf,
    version: String,
}

fn fetched_kernel(dir: &Path) -> Kernel {
    let fetch = "run scripts/fetch-vlan-kernel.sh (as root) to fetch Debian's kernel";
    let image = dir.join("vmlinuz");
    let initramfs = dir.join("initramfs.cpio.gz");
    let target = std::fs::read_link(&image).unwrap_or_else(|e| {
        panic!(
            "this kernel has no 802.1Q VLAN and the VM's kernel {} is missing ({e}): {fetch}",
            image.display()
        )
    });
    let version = target
        .file_name()
        .and_then(OsStr::to_str)
        .and_then(|n| n.strip_prefix("vmlinuz-"))
        .unwrap_or_else(|| {
            panic!(
                "{} points at {}: {fetch}",
                image.display(),
                target.display()
            )
        })
        .to_owned();
    let modules = dir.join("kernel/usr/lib/modules").join(&version);
    for f in [&image, &initramfs, &modules.join("modules.dep")] {
        assert!(f.exists(), "{} is missing: {fetch}", f.display());
    }
    // The initramfs holds tests/vm/init: an older one runs an older init.
    let init = crate::workspace_root().join("tests/vm/init");
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if let (Some(built), Some(edited)) = (mtime(&initramfs), mtime(&init)) {
        assert!(
            built >= edited,
            "{} is older than tests/vm/init: {fetch}",
            initramfs.display()
        );
    }
    Kernel {
        image,
        initramfs,
        modules,
        version,
    }
}

/// Whether QEMU should use KVM: `/dev/kvm` opens and the CPU has VMX or SVM
/// (this machine's `/dev/kvm` opens but its nested KVM crashes the guest).
fn use_kvm() -> bool {
    match std::env::var("LEASEHOOK_VM_ACCEL").as_deref() {
        Ok("kvm") => return true,
        Ok("tcg") => return false,
        _ => {}
    }
    let flags = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let virt = flags
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"));
    virt && std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok()
}

/// `s` as one shell word.
fn sh_quote(s: &[u8]) -> Vec<u8> {
    let mut out = b"'".to_vec();
    for &b in s {
        if b == b'\'' {
            out.extend_from_slice(b"'\\''");
        } else {
            out.push(b);
        }
    }
    out.push(b'\'');
    out
}

fn is_shell_name(name: &OsStr) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && !b[0].is_ascii_digit()
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_')
}

/// The script the VM's init hands over to: mounts what a test writes, exports
/// this process's environment, runs the test, prints its status, powers off.
fn run_script(kernel: &Kernel, exe: &Path, test_name: &str) -> Vec<u8> {
    let mut s: Vec<u8> = Vec::new();
    s.extend_from_slice(
        b"# Written by tests/src/vm.rs; run by the VM's init (tests/vm/init).\n\
          # One function, so that the shell has read it all before it mounts.\n\
          main() {\n\
          mkdir -p /dev/shm; mount -t tmpfs -o mode=1777 tmpfs /dev/shm\n",
    );
    // A fresh tmpfs on the host's scratch folders, but never over the
    // checkout, the test executable or the VM's files (a clone in /tmp, as CI
    // makes): those stay the host's, under the overlay, writable all the same.
    let cwd = std::env::current_dir().unwrap_or_default();
    let host_paths = [cwd.as_path(), exe, kernel.image.as_path()];
    for (dir, mode) in [("/tmp", "1777"), ("/var/tmp", "1777"), ("/run", "755")] {
        if host_paths.iter().any(|p| p.starts_with(dir)) {
            continue;
        }
        s.extend_from_slice(
            format!("mkdir -p {dir}; mount -t tmpfs -o mode={mode} tmpfs {dir}\n").as_bytes(),
        );
    }
    // The namespaces' private /etc (`ip netns exec` binds /etc/netns/<ns>/*):
    // the host's tests make and sweep theirs there while the VM runs, and the
    // 9p view of a folder changing underneath is not to be trusted.
    s.extend_from_slice(b"mkdir -p /etc/netns; mount -t tmpfs -o mode=755 tmpfs /etc/netns\n");
    s.extend_from_slice(
        b"mkdir -p /run/lock /dev/pts\n\
          mount -t devpts devpts /dev/pts\n\
          mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null\n\
          mkdir -p /usr/lib/modules\n",
    );
    let dest = Path::new("/usr/lib/modules").join(&kernel.version);
    s.extend_from_slice(b"ln -sfn ");
    s.extend_from_slice(&sh_quote(kernel.modules.as_os_str().as_bytes()));
    s.push(b' ');
    s.extend_from_slice(&sh_quote(dest.as_os_str().as_bytes()));
    s.extend_from_slice(b"\nhostname leasehook-vm\nip link set lo up\n");
    for (k, v) in std::env::vars_os() {
        if !is_shell_name(&k) || k == "LEASEHOOK_IN_VM" || k == "PWD" || k == "OLDPWD" {
            continue;
        }
        s.extend_from_slice(b"export ");
        s.extend_from_slice(k.as_bytes());
        s.push(b'=');
        s.extend_from_slice(&sh_quote(v.as_bytes()));
        s.push(b'\n');
    }
    s.extend_from_slice(b"export LEASEHOOK_IN_VM=1\n");
    if let Ok(cwd) = std::env::current_dir() {
        s.extend_from_slice(b"cd ");
        s.extend_from_slice(&sh_quote(cwd.as_os_str().as_bytes()));
        s.extend_from_slice(b" || exit 1\n");
    }
    s.extend_from_slice(format!("echo '{RUNNING}'\n").as_bytes());
    s.extend_from_slice(&sh_quote(exe.as_os_str().as_bytes()));
    s.extend_from_slice(b" --exact ");
    s.extend_from_slice(&sh_quote(test_name.as_bytes()));
    s.extend_from_slice(b" --nocapture --test-threads=1 2>&1\n");
    s.extend_from_slice(format!("echo \"{STATUS}$?\"\n").as_bytes());
    s.extend_from_slice(b"echo o >/proc/sysrq-trigger\nsleep 60\n}\nmain\n");
    s
}

/// Removes the run script when the run ends, however it ends.
struct Removed(PathBuf);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// QEMU booting the fetched kernel on the host's root, handing over to `script`;
/// no network (`-nic none`), the serial console on standard output.
fn qemu_command(kernel: &Kernel, script: &Path, kvm: bool) -> Command {
    let mut qemu = Command::new("qemu-system-x86_64");
    if kvm {
        qemu.args(["-accel", "kvm", "-cpu", "host", "-smp", "2"]);
    } else {
        // One emulated CPU boots faster than two on a two-core machine.
        qemu.args(["-accel", "tcg", "-cpu", "max", "-smp", "1"]);
    }
    qemu.args([
        "-m",
        "2048",
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
        "-serial",
        "stdio",
        "-nic",
        "none",
    ])
    .arg("-kernel")
    .arg(&kernel.image)
    .arg("-initrd")
    .arg(&kernel.initramfs)
    .arg("-append")
    .arg(format!(
        "console=ttyS0 quiet mitigations=off panic=-1 leasehook.run={}",
        script.display()
    ))
    .args([
        "-virtfs",
        "local,path=/,mount_tag=root,security_model=none,readonly=on,multidevs=remap",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    qemu
}

/// What the VM's console said.
#[derive(Default)]
struct Console {
    /// When the test started, from QEMU's start.
    booted: Option<Duration>,
    /// The test's exit status.
    status: Option<i32>,
    init_failed: bool,
    timed_out: bool,
    exit: Option<std::io::Result<std::process::ExitStatus>>,
}

/// Shows QEMU's console (both its outputs, line by line, through one channel)
/// until QEMU ends or `deadline` passes (QEMU is then killed).
fn watch(child: &mut Child, started: Instant, deadline: Instant) -> Console {
    let (tx, rx) = mpsc::channel::<String>();
    let mut readers = Vec::new();
    let stdout = child
        .stdout
        .take()
        .map(|o| Box::new(o) as Box<dyn std::io::Read + Send>);
    let stderr = child
        .stderr
        .take()
        .map(|o| Box::new(o) as Box<dyn std::io::Read + Send>);
    for out in [stdout, stderr].into_iter().flatten() {
        let tx = tx.clone();
        readers.push(std::thread::spawn(move || {
            for line in BufReader::new(out).split(b'\n').map_while(Result::ok) {
                let line = String::from_utf8_lossy(&line)
                    .trim_end_matches('\r')
                    .to_owned();
                if tx.send(line).is_err() {
                    break;
                }
            }
        }));
    }
    drop(tx);

    let mut seen = Console::default();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                if line == RUNNING {
                    seen.booted = Some(started.elapsed());
                    continue;
                }
                if let Some(code) = line.strip_prefix(STATUS) {
                    seen.status = code.trim().parse().ok();
                }
                seen.init_failed |= line.starts_with(INIT_FAILED);
                eprintln!("vm| {line}");
                let _ = std::io::stderr().flush();
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                seen.timed_out = true;
                let _ = child.kill();
                break;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    seen.exit = Some(child.wait());
    for r in readers {
        let _ = r.join();
    }
    seen
}

fn run_in_vm(test_name: &str) {
    let started = Instant::now();
    let dir = vm_dir();
    let kernel = fetched_kernel(&dir);
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current_exe: {e}"));
    let runs = dir.join("run");
    std::fs::create_dir_all(&runs).unwrap_or_else(|e| panic!("{}: {e}", runs.display()));
    let script = runs.join(format!(
        "{}-{}.sh",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    assert!(
        !script
            .as_os_str()
            .as_bytes()
            .iter()
            .any(u8::is_ascii_whitespace),
        "{}: the kernel command line cannot carry a path with spaces",
        script.display()
    );
    std::fs::write(&script, run_script(&kernel, &exe, test_name))
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    let _removed = Removed(script.clone());

    let kvm = use_kvm();
    let timeout = std::env::var("LEASEHOOK_VM_TIMEOUT")
        .ok()
        .and_then(|t| t.parse().ok())
        .map_or(Duration::from_secs(600), Duration::from_secs);
    let mut qemu = qemu_command(&kernel, &script, kvm);
    let mut child = qemu.spawn().unwrap_or_else(|e| {
        panic!(
            "this kernel has no 802.1Q VLAN and qemu-system-x86_64 cannot run ({e}): \
             install the Debian package qemu-system-x86"
        )
    });

    let accel = if kvm { "kvm" } else { "tcg" };
    eprintln!(
        "vm: {test_name} in Debian's kernel {} (qemu, {accel})",
        kernel.version
    );
    let seen = watch(&mut child, started, started + timeout);
    let Console {
        booted,
        status,
        init_failed,
        timed_out,
        exit,
    } = seen;
    let total = started.elapsed();
    let boot = booted.map_or_else(
        || "never".to_owned(),
        |b| format!("{:.1} s", b.as_secs_f64()),
    );
    eprintln!(
        "vm: booted to the test in {boot}, {:.1} s in all (qemu {accel})",
        total.as_secs_f64()
    );
    assert!(
        !timed_out,
        "the VM for {test_name} did not finish within {} s (LEASEHOOK_VM_TIMEOUT)",
        timeout.as_secs()
    );
    assert!(
        !init_failed && booted.is_some(),
        "the VM for {test_name} did not boot to the test (qemu: {exit:?}; its console is above)"
    );
    match status {
        Some(0) => {}
        Some(code) => panic!("{test_name} failed inside the VLAN kernel's VM (exit status {code})"),
        None => panic!(
            "the VM for {test_name} ended without the test's exit status (qemu: {exit:?}; \
             its console is above)"
        ),
    }
}

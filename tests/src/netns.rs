// SPDX-License-Identifier: Apache-2.0
//! Throwaway network namespaces for tests that need a real kernel, and readers of
//! `ip -j` output to check results independently of leasehook's own netlink code.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Fails (never skips) when the test cannot run: these tests are compiled only with
/// the `netns` feature, which says the caller has root and iproute2.
pub fn require_root() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|u| u.split_whitespace().nth(1));
    assert_eq!(
        euid,
        Some("0"),
        "netns tests need root (they create network namespaces); run them as root"
    );
    assert!(
        Command::new("ip")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success()),
        "netns tests need iproute2's `ip`"
    );
}

/// Runs a command and returns its output, panicking with its stderr when it fails.
pub fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("failed to run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Parses what `ip -j` printed. Output that is not JSON fails the test, loudly:
/// read as "nothing", it would let every "nothing left behind" check pass.
pub fn parse_ip_json(what: &str, stdout: &[u8]) -> Value {
    serde_json::from_slice(stdout).unwrap_or_else(|e| {
        panic!(
            "`{what}` printed something that is not JSON ({e}): {:?}",
            String::from_utf8_lossy(stdout)
        )
    })
}

/// The `protocol` of a rule or route as `ip -j` printed it, leasehook's by its
/// number: where `/etc/iproute2/rt_protos.d/leasehook.conf` is installed (the
/// package test installs the .deb into this machine) `ip` prints `leasehook`
/// for 176, elsewhere `176`; the tests compare `proto 176` either way.
fn protocol(r: &Value) -> &str {
    match r["protocol"].as_str() {
        Some("leasehook") => "176",
        Some(p) => p,
        None => "-",
    }
}

/// Whether a file name is a temporary file a writer leaves when it dies between
/// creating and renaming: the `tempfile` crate's `.tmpXXXXXX` (hooks, state files
/// of older builds) and [`leasehook_core::fs`]'s `.NAME.PID.SEQ.NANOS.tmp` (the
/// boot stage and every run-time file).
pub fn is_temp_file(name: &str) -> bool {
    name.starts_with(".tmp") || leasehook_core::fs::is_temp_name(name)
}

/// A named network namespace, deleted (with everything in it) when dropped.
#[derive(Debug)]
pub struct Netns {
    /// The namespace's name (`ip netns` name).
    pub name: String,
}

impl Netns {
    /// Creates a namespace with a unique name and brings its loopback up.
    pub fn new(tag: &str) -> Self {
        require_root();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("lht-{}-{n}-{tag}", std::process::id());
        run(Command::new("ip").args(["netns", "add", &name]));
        let ns = Self { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// Runs `ip -n NS ARGS...`.
    pub fn ip(&self, args: &[&str]) -> String {
        let out = run(Command::new("ip").arg("-n").arg(&self.name).args(args));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs `ip -j -n NS ARGS...` and parses the JSON.
    pub fn ip_json(&self, args: &[&str]) -> Value {
        let out = run(Command::new("ip")
            .arg("-j")
            .arg("-n")
            .arg(&self.name)
            .args(args));
        parse_ip_json(
            &format!("ip -j -n {} {}", self.name, args.join(" ")),
            &out.stdout,
        )
    }

    /// [`Netns::ip_json`] for a command whose answer is a list.
    fn ip_list(&self, args: &[&str]) -> Vec<Value> {
        match self.ip_json(args) {
            Value::Array(items) => items,
            other => panic!("`ip -j {}` did not answer a list: {other}", args.join(" ")),
        }
    }

    /// A command that runs inside the namespace (`ip netns exec NS PROGRAM`).
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Sets a sysctl inside the namespace.
    pub fn sysctl(&self, key: &str, value: &str) {
        run(self
            .command("sysctl")
            .args(["-q", "-w", &format!("{key}={value}")]));
    }

    /// Adds a veth pair `name` ⇄ `peer` inside this namespace, `name` with `mac`, both up.
    pub fn veth(&self, name: &str, mac: &str, peer: &str) {
        self.ip(&[
            "link", "add", "name", name, "address", mac, "type", "veth", "peer", "name", peer,
        ]);
        self.ip(&["link", "set", name, "up"]);
        self.ip(&["link", "set", peer, "up"]);
    }

    /// Adds a veth pair from this namespace into `other`: `name` here, `peer`
    /// there with `mac` (both still down).
    pub fn veth_to(&self, name: &str, other: &Self, peer: &str, mac: &str) {
        self.ip(&[
            "link",
            "add",
            "name",
            name,
            "type",
            "veth",
            "peer",
            "name",
            peer,
            "netns",
            &other.name,
        ]);
        other.ip(&["link", "set", peer, "address", mac]);
    }

    /// An HTTP GET from this namespace to `to`:`port`, from `src` when given:
    /// the body (trimmed), or `None` when the connection failed.
    pub fn http_get(&self, to: &str, port: u16, src: Option<&str>) -> Option<String> {
        let source = src.map_or_else(String::new, |s| format!(",source_address=('{s}',0)"));
        let code = format!(
            "import socket\ns=socket.create_connection(('{to}',{port}),timeout=2{source})\n\
             s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\nprint(s.makefile('rb').read().split(b'\\r\\n\\r\\n',1)[1].decode())"
        );
        let out = self
            .command("/usr/bin/python3")
            .args(["-c", &code])
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Runs `f` on a thread that entered this namespace first (setns(2) is per
    /// thread, and a netlink socket belongs to the namespace it was opened in);
    /// its result.
    pub fn run_in<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = Path::new("/run/netns").join(&self.name);
        std::thread::spawn(move || {
            let fd = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            rustix::thread::move_into_link_name_space(
                std::os::fd::AsFd::as_fd(&fd),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )
            .unwrap_or_else(|e| panic!("setns {path:?}: {e}"));
            f()
        })
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e))
    }

    /// Runs `during` while `ip monitor` watches this namespace's rules, routes,
    /// addresses and `more` (`link`, ...); its result and what the monitor printed
    /// (from 200 ms before `during`, so that the monitor listens, to 300 ms after,
    /// for events still on their way).
    pub fn monitor<R>(&self, more: &[&str], during: impl FnOnce() -> R) -> (R, String) {
        let mut monitor = self
            .command("ip")
            .args(["monitor", "rule", "route", "address"])
            .args(more)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("ip monitor: {e}"));
        std::thread::sleep(std::time::Duration::from_millis(200));
        let result = during();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let _ = monitor.kill();
        let mut seen = String::new();
        if let Some(mut out) = monitor.stdout.take() {
            use std::io::Read as _;
            let _ = out.read_to_string(&mut seen);
        }
        let _ = monitor.wait();
        (result, seen)
    }

    /// `ip -j rule` for both families, as `(priority, from, table, proto)` strings.
    pub fn rules(&self) -> Vec<String> {
        let mut out = Vec::new();
        for fam in ["-4", "-6"] {
            {
                let rules = self.ip_list(&[fam, "rule"]);
                out.extend(rules.iter().map(|r| {
                    let src = r["src"].as_str().unwrap_or("all");
                    let len = r["srclen"]
                        .as_u64()
                        .map(|l| format!("/{l}"))
                        .unwrap_or_default();
                    // A rule to a destination (leasehook's `nics:` rules) names it.
                    let dst = r["dst"].as_str().map_or_else(String::new, |d| {
                        let len = r["dstlen"]
                            .as_u64()
                            .map(|l| format!("/{l}"))
                            .unwrap_or_default();
                        format!(" to {d}{len}")
                    });
                    format!(
                        "{} from {src}{len}{dst} lookup {} proto {}",
                        r["priority"],
                        r["table"].as_str().unwrap_or("?"),
                        protocol(r)
                    )
                }));
            }
        }
        out
    }

    /// `ip -j route show table all` for both families, without the local table, one
    /// line per route (`dst via dev scope src table proto`).
    pub fn routes(&self) -> Vec<String> {
        let mut out = Vec::new();
        for fam in ["-4", "-6"] {
            {
                let routes = self.ip_list(&[fam, "route", "show", "table", "all"]);
                out.extend(
                    routes
                        .iter()
                        .filter(|r| {
                            r["table"].as_str() != Some("local")
                                && r["type"].as_str().is_none_or(|t| t == "unicast")
                        })
                        .map(|r| {
                            format!(
                                "{} via {} dev {} scope {} src {} table {} proto {}",
                                r["dst"].as_str().unwrap_or("?"),
                                r["gateway"].as_str().unwrap_or("-"),
                                r["dev"].as_str().unwrap_or("?"),
                                r["scope"].as_str().unwrap_or("-"),
                                r["prefsrc"].as_str().unwrap_or("-"),
                                r["table"].as_str().unwrap_or("main"),
                                protocol(r)
                            )
                        }),
                );
            }
        }
        out.sort();
        out
    }

    /// `ip -j address`, as `dev addr/len` lines (link-local IPv6 left out).
    pub fn addresses(&self) -> Vec<String> {
        let mut out = Vec::new();
        {
            for l in self.ip_list(&["address"]) {
                let dev = l["ifname"].as_str().unwrap_or("?");
                for a in l["addr_info"].as_array().into_iter().flatten() {
                    if a["scope"].as_str() != Some("link") && a["scope"].as_str() != Some("host") {
                        out.push(format!(
                            "{dev} {}/{}",
                            a["local"].as_str().unwrap_or("?"),
                            a["prefixlen"]
                        ));
                    }
                }
            }
        }
        out.sort();
        out
    }

    /// Rules, routes and addresses together: a snapshot to compare before/after.
    pub fn snapshot(&self) -> (Vec<String>, Vec<String>, Vec<String>) {
        (self.rules(), self.routes(), self.addresses())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// The argument prefix that runs a command inside `ns` (when given) with the
/// logger on standard error: the logger prefers syslog when `/dev/log` exists,
/// so the command runs in a private mount namespace where `/dev/log` is
/// `/dev/null` (connecting to it fails). Append the command's own argv.
pub fn logging_to_stderr(ns: Option<&Netns>) -> Vec<OsString> {
    let mut argv: Vec<OsString> = Vec::new();
    if let Some(ns) = ns {
        argv.extend(["ip", "netns", "exec", ns.name.as_str()].map(OsString::from));
    }
    if Path::new("/dev/log").exists() {
        argv.extend(
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                "mount --bind /dev/null /dev/log && exec \"$@\"",
                "sh",
            ]
            .map(OsString::from),
        );
    }
    argv
}

/// The `leasehook` binary built beside the test executable (`target/<profile>/`),
/// or `$LEASEHOOK_BIN`.
pub fn leasehook_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("LEASEHOOK_BIN") {
        return PathBuf::from(p);
    }
    sibling_bin("leasehook")
}

/// `leasehook ARGS` (the built binary) with the machine's IMDS endpoints and
/// root out of its environment; its output.
pub fn leasehook_clean(args: &[&str]) -> Output {
    let bin = leasehook_bin();
    Command::new(&bin)
        .args(args)
        .env_remove("LEASEHOOK_IMDS_ENDPOINTS")
        .env_remove("LEASEHOOK_ROOT")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()))
}

/// Copies each of `units` (`hooks/systemd/<name>`, saved as `<as_name>`: a
/// template as one of its instances) into a fresh folder, `ExecStart=` pointing
/// at the built binary (systemd-analyze checks it exists), and asserts that
/// `systemd-analyze verify` finds nothing to say about them.
pub fn assert_units_verify(tag: &str, units: &[(&str, &str)]) {
    let dir = TempDir::new(tag);
    let source = crate::workspace_root().join("hooks/systemd");
    let bin = leasehook_bin();
    for (name, as_name) in units {
        let p = source.join(name);
        let text = std::fs::read_to_string(&p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .replace("/usr/bin/leasehook", &bin.to_string_lossy());
        dir.file(as_name, &text);
    }
    let out = Command::new("systemd-analyze")
        .current_dir(&dir.0)
        // --man=no: the units' Documentation= pages are the package's, not this
        // machine's (xtask/tests/units.rs checks each is one the package ships).
        .args(["verify", "--man=no"])
        .args(units.iter().map(|(_, as_name)| format!("./{as_name}")))
        .output()
        .unwrap_or_else(|e| panic!("systemd-analyze (package systemd) is needed: {e}"));
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The DHCP clients' hook names: each is the `leasehook-hook` binary run under that
/// name (the package installs them as symlinks to it in `/usr/libexec/leasehook/`).
pub const HOOKS: [&str; 5] = [
    "leasehook-dhclient",
    "leasehook-networkd",
    "leasehook-nm",
    "leasehook-dhcpcd",
    "leasehook-udhcpc",
];

/// A workspace binary built beside the test executable (`target/<profile>/NAME`);
/// fails the test when it is missing (`cargo build --workspace --bins` first). A
/// hook name ([`HOOKS`]) is [`hook_link`] to that `leasehook-hook`.
pub fn sibling_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    // target/<profile>/deps/<test> for tests, target/<profile>/<bin> for binaries.
    let mut dir = exe.parent().map(PathBuf::from).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.pop();
    }
    if HOOKS.contains(&name) {
        return hook_link(&sibling_bin("leasehook-hook"), name);
    }
    let bin = dir.join(name);
    assert!(
        bin.exists(),
        "{bin:?} not found: build it first (`cargo build --workspace --bins`)"
    );
    bin
}

/// The hook `name` (`leasehook-dhclient`) as the package installs it: a symlink
/// named so to the `leasehook-hook` binary `bin`, made (or repaired) on demand in
/// `hooks/` beside it. Safe to call from tests running at once: a link is made
/// under a name of its own and renamed into place.
pub fn hook_link(bin: &Path, name: &str) -> PathBuf {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let dir = bin.parent().unwrap_or(Path::new(".")).join("hooks");
    let link = dir.join(name);
    let target = Path::new("..").join(bin.file_name().unwrap_or_default());
    if std::fs::read_link(&link).is_ok_and(|t| t == target) {
        return link;
    }
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}.{seq}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::os::unix::fs::symlink(&target, &tmp))
        .and_then(|()| std::fs::rename(&tmp, &link))
        .unwrap_or_else(|e| panic!("{link:?}: cannot link it to {bin:?}: {e}"));
    link
}

/// A temporary folder, removed when dropped.
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A new empty folder under the system's temporary folder.
    pub fn new(tag: &str) -> Self {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let p =
            std::env::temp_dir().join(format!("leasehook-test-{}-{n}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap_or_else(|e| panic!("failed to create {p:?}: {e}"));
        Self(p)
    }

    /// Writes a file in the folder and returns its path.
    pub fn file(&self, name: &str, body: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, body).unwrap_or_else(|e| panic!("failed to write {p:?}: {e}"));
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A finished command's exit code, standard output and standard error, for an
/// assertion's message.
pub fn show(o: &std::process::Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Sends `child` SIGTERM and waits for it: its exit status, how long it took to
/// exit, and what it wrote to its standard error (which must be piped).
pub fn terminate(mut child: std::process::Child) -> (std::process::ExitStatus, Duration, String) {
    use std::io::Read as _;
    let t = Instant::now();
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap_or_else(|e| panic!("kill: {e}"));
    assert!(kill.success(), "kill -TERM {}", child.id());
    let status = child.wait().unwrap_or_else(|e| panic!("wait: {e}"));
    let took = t.elapsed();
    let mut log = String::new();
    if let Some(mut err) = child.stderr.take() {
        err.read_to_string(&mut log)
            .unwrap_or_else(|e| panic!("the child's standard error: {e}"));
    }
    (status, took, log)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_json_that_is_not_json_fails_loudly() {
        assert_eq!(
            parse_ip_json("ip -j rule", b"[]\n"),
            Value::Array(Vec::new())
        );
        for bad in [
            &b""[..],
            b"[",
            b"Error: ipv4: FIB table does not exist.",
            b"[{\"a\":1}",
        ] {
            let caught = std::panic::catch_unwind(|| parse_ip_json("ip -j rule", bad));
            assert!(
                caught.is_err(),
                "{:?} was read as JSON",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn temporary_files_of_every_writer_are_recognised() {
        for name in [
            ".tmpA1b2C3",
            ".boot.json.4242.0.1a2b3c4d.tmp",
            ".eth1.json.7.12.00000000.tmp",
        ] {
            assert!(is_temp_file(name), "{name}");
        }
        for name in [
            "eth1.json",
            "boot.json",
            "eth1.json.corrupt",
            ".hidden",
            "x.tmp",
        ] {
            assert!(!is_temp_file(name), "{name}");
        }
    }
}

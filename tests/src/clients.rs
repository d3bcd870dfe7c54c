// SPDX-License-Identifier: Apache-2.0
//! The world's instance run by NetworkManager, dhcpcd or busybox udhcpc instead of
//! dhclient, each with leasehook's hook file from `hooks/` and its shim, against
//! the world's dnsmasq and IMDS emulator.
//!
//! Nothing of the machine's own configuration is used or changed: every client
//! runs in the instance's network namespace and in a mount namespace of its own
//! (`ip netns exec` makes one per command), where
//!
//! * NetworkManager's `/etc/NetworkManager` and `/etc/default` are the world's
//!   `/etc/netns/<instance>/NetworkManager` and `/etc/netns/<instance>/default`
//!   (`ip netns exec` bind-mounts those over `/etc`'s), with leasehook's dispatcher
//!   script and `/etc/default/leasehook`; NetworkManager and its dispatcher talk over
//!   a private D-Bus;
//! * dhcpcd's hook folder `/usr/lib/dhcpcd/dhcpcd-hooks` is a bind mount of a world
//!   folder holding only leasehook's hook (so no distribution hook sets the host
//!   name, which is not namespaced);
//! * udhcpc is given leasehook's script with `-s`;
//!
//! and `/run`, `/var/lib/NetworkManager`, `/var/lib/dhcpcd` are tmpfs, `/sys` is
//! read-only (the clients then do not wait for udev), and `/etc/resolv.conf` is a
//! bind mount of the world's own file: the clients' resolver updates (Debian's
//! udhcpc default script writes `/etc/resolv.conf`) land there. Each supervisor
//! script stops (`set -e`) before it starts a client if any of these mounts fails.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::client::Client;
use crate::netns::run;
use crate::world::{World, start_bus, start_ready, wait_until};

/// Mounts shared by every client's supervisor: the world's resolver file, a tmpfs
/// `/run`, a read-only `/sys`.
const PRIVATE_MOUNTS: &str = r#"
set -e
mount --bind "$WORLD/resolv.conf" /etc/resolv.conf
mount -t tmpfs tmpfs /run
umount /sys 2>/dev/null || true
mount -t sysfs -o ro sysfs /sys
"#;

/// NetworkManager's supervisor: its state on tmpfs, nm-dispatcher (kept running:
/// there is no D-Bus activation on the private bus), then NetworkManager itself.
const NM_SUPERVISOR: &str = r#"
mount -t tmpfs tmpfs /var/lib/NetworkManager
grep -q leasehook /etc/NetworkManager/NetworkManager.conf
grep -q LEASEHOOK_NM /etc/default/leasehook
/usr/lib/NetworkManager/nm-dispatcher --persist --debug > "$WORLD/nm-dispatcher.log" 2>&1 &
i=0
until grep -q 'request name for org.freedesktop.nm_dispatcher succeeded' "$WORLD/nm-dispatcher.log"; do
    i=$((i + 1)); [ "$i" -lt 100 ] || { echo "nm-dispatcher did not start" >&2; exit 1; }
    sleep 0.1
done
echo ready
exec /usr/sbin/NetworkManager --no-daemon --debug >> "$WORLD/nm.log" 2>&1
"#;

/// dhcpcd's supervisor: leasehook's hook folder, dhcpcd's lease folder on tmpfs,
/// then `dhcpcd -B` (foreground) with the arguments.
const DHCPCD_SUPERVISOR: &str = r#"
mount --bind "$HOOKS" /usr/lib/dhcpcd/dhcpcd-hooks
mount -t tmpfs tmpfs /var/lib/dhcpcd
exec dhcpcd -B -d "$@"
"#;

/// udhcpc's supervisor: `udhcpc -f` (foreground) with leasehook's script.
const UDHCPC_SUPERVISOR: &str = r#"
exec udhcpc -f -R "$@"
"#;

/// NetworkManager's configuration: only eth0 and eth1 are managed, with the
/// internal DHCP client; no DNS, host name or automatic connections.
const NM_CONF: &str = "# leasehook end-to-end world
[main]
plugins=keyfile
dhcp=internal
dns=none
rc-manager=unmanaged
hostname-mode=none
no-auto-default=*
[keyfile]
unmanaged-devices=except:interface-name:eth0;except:interface-name:eth1
[logging]
level=INFO
";

/// The UUID of the world's NetworkManager connection on `iface`.
pub fn nm_uuid(iface: &str) -> String {
    format!(
        "8d3e1f8a-9a57-4c1e-9d51-00000000000{}",
        iface.trim_start_matches("eth")
    )
}

fn nm_connection(iface: &str, v6: bool) -> String {
    let metric = if iface == "eth0" { 100 } else { 200 };
    let ipv6 = if v6 { "dhcp" } else { "disabled" };
    format!(
        "[connection]\nid=leasehook-{iface}\nuuid={}\ntype=ethernet\ninterface-name={iface}\n\
         [ipv4]\nmethod=auto\nroute-metric={metric}\n[ipv6]\nmethod={ipv6}\n",
        nm_uuid(iface)
    )
}

fn write(path: &std::path::Path, body: &str, mode: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{dir:?}: {e}"));
    }
    std::fs::write(path, body).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    run(Command::new("chmod").arg(mode).arg(path));
}

fn require(path: &str, package: &str) {
    assert!(
        std::path::Path::new(path).exists(),
        "{path} is missing: install Debian's {package} (scripts/test.sh does)"
    );
}

impl World {
    /// `LEASEHOOK_*` settings for a shim, with `var` naming `client`'s shim.
    fn settings(&self, var: &str, client: Client) -> Vec<(String, String)> {
        let mut env = vec![(var.to_owned(), client.shim_path().display().to_string())];
        env.extend(
            self.hook_env
                .iter()
                .filter(|(k, _)| k != "LEASEHOOK_DHCLIENT")
                .cloned(),
        );
        env
    }

    /// A command running `script` (after [`PRIVATE_MOUNTS`]) under `sh` inside the
    /// instance, with a clean environment holding `env`.
    fn supervisor(&self, script: &str, env: &[(String, String)]) -> Command {
        if !self.resolv_conf().exists() {
            self.dir.file("resolv.conf", "");
        }
        let mut cmd = self.inst.command("env");
        cmd.arg("-i")
            .arg("PATH=/usr/sbin:/usr/bin:/sbin:/bin")
            .arg("LANG=C.UTF-8")
            .arg(format!("WORLD={}", self.dir.0.display()))
            .args(env.iter().map(|(k, v)| format!("{k}={v}")))
            .args(["sh", "-c", &format!("{PRIVATE_MOUNTS}{script}"), "sh"]);
        cmd
    }

    /// Runs NetworkManager (and its dispatcher) in the instance, managing eth0 and
    /// eth1 by DHCPv4 (and eth1 by DHCPv6 too with `v6`), with leasehook's
    /// dispatcher script; leasehook's settings are in `/etc/default/leasehook`.
    pub fn start_nm(&mut self, v6: bool) {
        require("/usr/sbin/NetworkManager", "network-manager");
        require("/etc/NetworkManager", "network-manager");
        let nm = self.etc.join("NetworkManager");
        write(&nm.join("NetworkManager.conf"), NM_CONF, "644");
        for iface in ["eth0", "eth1"] {
            write(
                &nm.join(format!("system-connections/{iface}.nmconnection")),
                &nm_connection(iface, v6 && iface == "eth1"),
                "600",
            );
        }
        let script = crate::workspace_root().join("hooks/networkmanager/90-leasehook");
        let body = std::fs::read_to_string(&script).unwrap_or_else(|e| panic!("{script:?}: {e}"));
        write(&nm.join("dispatcher.d/90-leasehook"), &body, "755");
        let mut settings = String::new();
        for (k, v) in self.settings("LEASEHOOK_NM", Client::Nm) {
            assert!(!v.contains('\''), "{v}");
            let _ = writeln!(settings, "{k}='{v}'");
        }
        write(&self.etc.join("default/leasehook"), &settings, "644");

        let (bus, sock) = start_bus(&self.dir, "nm-bus");
        self.services.push(bus);
        let env = vec![(
            "DBUS_SYSTEM_BUS_ADDRESS".to_owned(),
            format!("unix:path={}", sock.display()),
        )];
        let cmd = self.supervisor(NM_SUPERVISOR, &env);
        self.services.push(start_ready(cmd, "NetworkManager"));
    }

    /// Runs `nmcli ARGS` against the world's NetworkManager (over its private bus).
    pub fn nmcli(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new("nmcli");
        cmd.env(
            "DBUS_SYSTEM_BUS_ADDRESS",
            format!("unix:path={}", self.dir.0.join("nm-bus.sock").display()),
        )
        .args(args);
        run(&mut cmd)
    }

    /// The NetworkManager dispatcher's log (it holds the shim's lines) and
    /// NetworkManager's own.
    pub fn nm_log(&self) -> String {
        let read = |f: &str| std::fs::read_to_string(self.dir.0.join(f)).unwrap_or_default();
        format!(
            "--- nm-dispatcher\n{}\n--- NetworkManager\n{}",
            read("nm-dispatcher.log"),
            read("nm.log")
        )
    }

    fn client_tag(client: &str, iface: &str, v6: bool) -> String {
        format!("{client}-{iface}{}", if v6 { "-6" } else { "" })
    }

    /// Starts dhcpcd (foreground, DHCPv4 or with `v6` DHCPv6 IA_NA only) on `iface`
    /// with leasehook's hook; dhcpcd's and the hook's output go to
    /// `dhcpcd-<iface>[-6].log`.
    pub fn dhcpcd_start(&mut self, iface: &str, v6: bool) {
        require("/usr/sbin/dhcpcd", "dhcpcd-base");
        require("/usr/lib/dhcpcd/dhcpcd-hooks", "dhcpcd-base");
        let tag = Self::client_tag("dhcpcd", iface, v6);
        let hooks = self.dir.0.join(format!("{tag}-hooks"));
        let hook = crate::workspace_root().join("hooks/dhcpcd/90-leasehook");
        let body = std::fs::read_to_string(&hook).unwrap_or_else(|e| panic!("{hook:?}: {e}"));
        write(&hooks.join("90-leasehook"), &body, "644");
        // Sourced before leasehook's hook: what the hooks' environment holds
        // ([`World::recorded_hook_env`]), recorded without a shell reading a value.
        write(
            &hooks.join("00-record-env"),
            &record_env_hook(&self.dir.0.join(format!("{tag}.hook-env"))),
            "644",
        );
        // No ARP probe (5 s); ask for the options the hostile test fills, the
        // private option 224 as a string dhcpcd hands to its hooks.
        let conf = if v6 {
            "noarp\nnoipv6rs\nia_na 1\n"
        } else {
            "noarp\noption domain_name, domain_search, host_name\ndefine 224 string lh_hostile\noption lh_hostile\n"
        };
        let conf = self.dir.file(&format!("{tag}.conf"), conf);
        let log = std::fs::File::create(self.dir.0.join(format!("{tag}.log")))
            .unwrap_or_else(|e| panic!("dhcpcd log: {e}"));
        let mut cmd = self.supervisor(
            DHCPCD_SUPERVISOR,
            &[("HOOKS".to_owned(), hooks.display().to_string())],
        );
        cmd.arg(if v6 { "-6" } else { "-4" }).arg("-f").arg(&conf);
        for (k, v) in self.settings("LEASEHOOK_DHCPCD", Client::Dhcpcd) {
            cmd.arg("-e").arg(format!("{k}={v}"));
        }
        cmd.arg(iface).stdout(Stdio::null()).stderr(log);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("failed to start dhcpcd: {e}"));
        self.dhclients.insert(tag, child);
    }

    /// `dhcpcd -k` (release) or `dhcpcd -x` (stop) on `iface`, sent to the running
    /// dhcpcd in its own mount namespace (where its control socket is); waits until
    /// it has exited.
    pub fn dhcpcd_end(&mut self, iface: &str, v6: bool, release: bool) {
        let tag = Self::client_tag("dhcpcd", iface, v6);
        let Some(mut child) = self.dhclients.remove(&tag) else {
            panic!("dhcpcd is not running on {iface}");
        };
        let mut cmd = Command::new("nsenter");
        cmd.arg("-t")
            .arg(child.id().to_string())
            .args(["-m", "-n", "timeout", "30", "dhcpcd"])
            .arg(if v6 { "-6" } else { "-4" })
            .arg(if release { "-k" } else { "-x" })
            .arg(iface);
        let out = run(&mut cmd);
        let _ = child.wait();
        let mut log = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.0.join(format!("{tag}.log")))
            .unwrap_or_else(|e| panic!("dhcpcd log: {e}"));
        let _ = std::io::Write::write_all(&mut log, &out.stderr);
    }

    /// Starts busybox udhcpc (foreground, `-R`: release on exit) on `iface` with
    /// leasehook's script, which chains to Debian's `/etc/udhcpc/default.script`;
    /// udhcpc's, the scripts' and the shim's output go to `udhcpc-<iface>.log`.
    pub fn udhcpc_start(&mut self, iface: &str) {
        require("/sbin/udhcpc", "udhcpc");
        require("/etc/udhcpc/default.script", "udhcpc");
        let tag = Self::client_tag("udhcpc", iface, false);
        let script = crate::workspace_root().join("hooks/udhcpc/leasehook.script");
        let log = std::fs::File::create(self.dir.0.join(format!("{tag}.log")))
            .unwrap_or_else(|e| panic!("udhcpc log: {e}"));
        // The default script leasehook's script chains to, behind a recorder of
        // the environment udhcpc gives its script ([`World::recorded_hook_env`]).
        let default = self.dir.0.join(format!("{tag}-default.script"));
        write(
            &default,
            &format!(
                "#!/bin/sh\n{}exec /etc/udhcpc/default.script \"$@\"\n",
                record_env_hook(&self.dir.0.join(format!("{tag}.hook-env")))
            ),
            "755",
        );
        let mut env = self.settings("LEASEHOOK_UDHCPC", Client::Udhcpc);
        env.push((
            "LEASEHOOK_UDHCPC_DEFAULT".to_owned(),
            default.display().to_string(),
        ));
        let mut cmd = self.supervisor(UDHCPC_SUPERVISOR, &env);
        // -O 224: ask for the private option the hostile test fills (udhcpc
        // hands it to its script as opt224, in hex).
        cmd.arg("-i")
            .arg(iface)
            .arg("-O")
            .arg("224")
            .arg("-s")
            .arg(&script);
        cmd.stdout(Stdio::null()).stderr(log);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("failed to start udhcpc: {e}"));
        self.dhclients.insert(tag, child);
    }

    /// Sends udhcpc on `iface` SIGUSR2: it releases the lease and runs its script
    /// with `deconfig`.
    pub fn udhcpc_release(&self, iface: &str) {
        let tag = Self::client_tag("udhcpc", iface, false);
        let child = self
            .dhclients
            .get(&tag)
            .unwrap_or_else(|| panic!("udhcpc is not running on {iface}"));
        run(Command::new("kill")
            .arg("-USR2")
            .arg(child.id().to_string()));
    }

    /// The log of `client` (`dhcpcd`, `udhcpc`) on `iface` so far.
    pub fn client_log(&self, client: &str, iface: &str, v6: bool) -> String {
        let tag = Self::client_tag(client, iface, v6);
        std::fs::read_to_string(self.dir.0.join(format!("{tag}.log"))).unwrap_or_default()
    }

    /// Waits (up to `secs`) until `iface` holds `address`.
    pub fn wait_address(&self, iface: &str, address: &str, secs: u64) -> bool {
        wait_until(Duration::from_secs(secs), || {
            self.inst.ip(&["addr", "show", iface]).contains(address)
        })
    }

    /// Where the world's clients write their resolver updates.
    pub fn resolv_conf(&self) -> PathBuf {
        self.dir.0.join("resolv.conf")
    }
}

/// leasehook's rules for the secondary NIC eth1 (device-number 1: table 10001).
pub const SECONDARY_RULES: [&str; 2] = [
    "10001 from 10.98.1.20 lookup 10001 proto 176",
    "10001 from 10.98.1.21 lookup 10001 proto 176",
];

/// leasehook's routes in eth1's table.
pub const SECONDARY_ROUTES: [&str; 2] = [
    "default via 10.98.1.1 dev eth1 scope - src - table 10001 proto 176",
    "10.98.1.0/24 via - dev eth1 scope link src 10.98.1.20 table 10001 proto 176",
];

/// Shell lines that append the environment to `file`, NUL-separated, one empty
/// entry after each run (`env -0`: no value is read by a shell).
fn record_env_hook(file: &std::path::Path) -> String {
    let f = file.display();
    format!("/usr/bin/env -0 >> '{f}'\nprintf '\\0' >> '{f}'\n")
}

/// The value of the private option 224 that [`hostile_options`] sends.
pub fn hostile_private_option(marker: &std::path::Path) -> String {
    let m = marker.display();
    format!("x;$(touch {m})|`touch {m}`&")
}

impl World {
    /// Every `KEY=VALUE` of the environments `client`'s hooks got on `iface`
    /// (recorded beside leasehook's hook by dhcpcd's and udhcpc's worlds).
    pub fn recorded_hook_env(&self, client: &str, iface: &str) -> Vec<String> {
        let file = self.dir.0.join(format!(
            "{}.hook-env",
            Self::client_tag(client, iface, false)
        ));
        String::from_utf8_lossy(&std::fs::read(file).unwrap_or_default())
            .split('\0')
            .map(str::to_owned)
            .collect()
    }
}

/// DHCP options whose values would run `touch MARKER` if any reached a shell:
/// `$(...)`, backticks, `;`, and a newline (as hex, so dnsmasq sends it raw), and
/// the private option 224 ([`hostile_private_option`]), which the clients hand to
/// their hooks as they got it (escaped or hex-encoded), so a test can prove it
/// arrived.
pub fn hostile_options(marker: &std::path::Path) -> Vec<String> {
    let m = marker.display().to_string();
    let hex_with_newline: String = format!("x\n$(touch {m})\n")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    vec![
        format!("dhcp-option=option:domain-name,\"$(touch {m});`touch {m}`\""),
        format!("dhcp-option=option:domain-search,a$(touch {m}).example"),
        format!("dhcp-option=12,`touch {m}`;x"),
        format!("dhcp-option=15,{hex_with_newline}"),
        format!("dhcp-option=224,\"{}\"", hostile_private_option(marker)),
    ]
}

impl World {
    /// Whether leasehook's rules and routes for eth1 are all in place.
    pub fn secondary_pbr_installed(&self) -> bool {
        let (rules, routes) = (self.our_rules(), self.our_routes());
        SECONDARY_RULES.iter().all(|r| rules.iter().any(|h| h == r))
            && SECONDARY_ROUTES
                .iter()
                .all(|r| routes.iter().any(|h| h == r))
    }

    /// Whether nothing of leasehook is left for eth1: no rule, no route, no
    /// secondary address, no state file.
    pub fn secondary_pbr_gone(&self) -> bool {
        self.our_rules().is_empty()
            && self.our_routes().is_empty()
            && !self
                .inst
                .addresses()
                .contains(&"eth1 10.98.1.21/32".to_owned())
            && !self.root.join("run/leasehook/iface/eth1.json").exists()
    }

    /// Waits up to 20 s until eth1's rules ([`SECONDARY_RULES`]) are in place;
    /// fails the test otherwise, naming `from` (what should have put them).
    pub fn wait_secondary_rules(&self, from: &str) {
        let bound = || {
            let have = self.our_rules();
            SECONDARY_RULES.iter().all(|r| have.iter().any(|h| h == r))
        };
        assert!(
            wait_until(Duration::from_secs(20), bound),
            "no rules from {from}: {:#?}\n{}",
            self.our_rules(),
            self.log("eth1", false)
        );
    }

    /// Asserts that nothing of leasehook's is left in the kernel after `what`:
    /// no rule, no route, not eth1's secondary address.
    pub fn assert_pbr_removed(&self, what: &str) {
        assert_eq!(
            self.our_rules(),
            Vec::<String>::new(),
            "rules left after {what}"
        );
        assert_eq!(
            self.our_routes(),
            Vec::<String>::new(),
            "routes left after {what}"
        );
        assert!(
            !self
                .inst
                .addresses()
                .contains(&"eth1 10.98.1.21/32".to_owned()),
            "the secondary address is left after {what}"
        );
    }

    /// eth1 as the `cloud-init` profile routes it: the default route in table
    /// 101 (`100 +` its device-number), the secondary address with the
    /// subnet's prefix length (cloud-init's), and traffic from both of eth1's
    /// addresses reaching the echo host.
    pub fn assert_cloud_init_eth1(&self) {
        let route = "default via 10.98.1.1 dev eth1 scope - src - table 101 proto 176";
        let routes = self.our_routes();
        assert!(routes.iter().any(|r| r == route), "{routes:#?}");
        let addresses = self.inst.addresses();
        assert!(
            addresses.iter().any(|a| a == "eth1 10.98.1.21/24"),
            "{addresses:#?}"
        );
        for from in ["10.98.1.20", "10.98.1.21"] {
            assert_eq!(
                self.echo_from(from).as_deref(),
                Some(from),
                "traffic from {from}"
            );
        }
    }

    /// Rules, routes and addresses, for failure messages.
    pub fn pbr_report(&self) -> String {
        format!(
            "rules {:#?}\nroutes {:#?}\naddresses {:#?}",
            self.our_rules(),
            self.our_routes(),
            self.inst.addresses()
        )
    }
}

/// Values that would run `touch MARKER` (or change what a hook does) if a hook
/// file let a shell interpret them: command substitution, backticks, `;`, `|`, `&`,
/// a newline, quotes, `$IFS`, globs, an option-like value, a backslash. For the
/// hook-file tests (`tests/tests/hooks.rs`, `client_hooks.rs`), which set them as
/// the client's variables and arguments and check that the shim got each one
/// byte for byte and no shell ran one.
pub fn hostile_values(marker: &std::path::Path) -> Vec<String> {
    let m = marker.display();
    vec![
        format!("$(touch {m})"),
        format!("`touch {m}`"),
        format!("x; touch {m}"),
        format!("x | touch {m}"),
        format!("x && touch {m} &"),
        format!("x\ntouch {m}\n"),
        format!("'\"$(touch {m})\"'"),
        format!("${{IFS}}$(touch{{,}}{m})"),
        "*".to_owned(),
        "-e".to_owned(),
        format!("\\$(touch {m})\\"),
        format!("eth1 $(touch {m}) --worker eth1"),
    ]
}

/// A fake shim for the hook-file tests: an executable in `dir` that records its
/// environment (`env -0`, no shell expansion of any value) and its arguments (one
/// per NUL) and exits with `status`.
pub fn env_recorder(dir: &std::path::Path, status: u8) -> std::path::PathBuf {
    let path = dir.join("recorder");
    let env = dir.join("seen.env");
    let args = dir.join("seen.args");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\n/usr/bin/env -0 > '{}'\nprintf '%s\\0' \"$@\" > '{}'\nexit {status}\n",
            env.display(),
            args.display()
        ),
    )
    .unwrap_or_else(|e| panic!("{path:?}: {e}"));
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .unwrap_or_else(|e| panic!("{path:?}: {e}"));
    path
}

/// What an [`env_recorder`] saw: its environment (`KEY`, `VALUE`) and its arguments.
pub type Recorded = (Vec<(String, String)>, Vec<String>);

/// What the [`env_recorder`] in `dir` saw; `None` when it did not run.
pub fn recorded(dir: &std::path::Path) -> Option<Recorded> {
    let env = std::fs::read(dir.join("seen.env")).ok()?;
    let args = std::fs::read(dir.join("seen.args")).unwrap_or_default();
    let split = |b: &[u8]| -> Vec<String> {
        b.split(|c| *c == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect()
    };
    let env = split(&env)
        .into_iter()
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
        })
        .collect();
    Some((env, split(&args)))
}

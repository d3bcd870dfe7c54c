// SPDX-License-Identifier: Apache-2.0
//! Differential test against amazon-ec2-net-utils 2.4.1 itself, on generated
//! single-card EC2 instances.
//!
//! Every generated instance (2–4 ENIs, secondary IPs, `ipv4-prefix`, ENIs sharing a
//! subnet, gaps in device numbers) is built twice, each time as a VPC "router"
//! namespace (dnsmasq with a fixed lease per MAC, the IMDS emulator on
//! 169.254.169.254 serving the same tree, the echo host, and an ENI-like source
//! check: strict `rp_filter` on one port per ENI, each ENI's addresses routed to its
//! own port) and an instance namespace:
//!
//! * **ec2-net-utils**: the Debian package's own `setup-policy-routes` and `lib.sh`
//!   (extracted by `scripts/fetch-ec2-net-utils-oracle.sh`, never installed) under
//!   real systemd-networkd, in a private mount namespace (tmpfs `/run`, read-only
//!   `/sys`, private D-Bus), started per interface as its `policy-routes@.service`
//!   does (`EC2_IF_INITIAL_SETUP=true`, `start`, then `cleanup`). Its
//!   `80-ec2.network` matches drivers (`ena ixgbevf vif`); the copy used here
//!   matches `Name=eth*`, the veths, and is otherwise the package's.
//! * **leasehook**: real dhclient on every NIC with leasehook's exit hook.
//!
//! Then the kernels are compared: every rule, every route of every policy table,
//! every global address, and traffic from every address of every ENI must reach the
//! echo host through the source check on both sides. The known, deliberate
//! differences (`docs/migrating.md`) are asserted as such, each on its own; any
//! other difference fails the test.
//!
//! `LEASEHOOK_EC2NU_INSTANCES` (default 24), `LEASEHOOK_EC2NU_SEED` and
//! `LEASEHOOK_EC2NU_PARALLEL` (default 6) change the run; `--nocapture` shows the
//! side-by-side of instance `LEASEHOOK_EC2NU_SHOW` (default 0; `docs/migrating.md`
//! shows one).
//!
//! Compiled with the `netns` feature; needs root, systemd-networkd, dbus-daemon,
//! dnsmasq, dhclient, curl and the extracted oracle, and fails, never skips,
//! without them.

#![cfg(feature = "netns")]
#![cfg(test)]
#![allow(clippy::too_many_lines)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ipnet::Ipv4Net;
use leasehook_tests::netns::{Netns, TempDir, require_root, sibling_bin};
use leasehook_tests::world::{
    ECHO_SERVER, install_hook, kill_namespace, kill_workers, start_bus, start_imds, start_ready,
    wait_until,
};
use leasehook_tests::{Rng, in_ci, workspace_root};
use serde_json::{Value, json};

const DEFAULT_INSTANCES: usize = 24;
const DEFAULT_SEED: u64 = 0xec2_0241_d1ff;
const DEFAULT_PARALLEL: usize = 6;
/// ec2-net-utils' and leasehook's `rule_base`/`table_base`.
const TABLE_BASE: u32 = 10000;
/// ec2-net-utils 2.4.1's `metric_base` (`lib.sh`): `RouteMetric=512 + 10·device`.
const METRIC_BASE: u32 = 512;

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn oracle_root() -> PathBuf {
    std::env::var_os("LEASEHOOK_EC2NU_ORACLE").map_or_else(
        || workspace_root().join("target/oracle/amazon-ec2-net-utils-2.4.1/root"),
        PathBuf::from,
    )
}

// ---------------------------------------------------------------------------
// Generated instances

#[derive(Debug, Clone)]
struct Subnet {
    net: Ipv4Net,
    /// Host offsets still free for addresses.
    free: Vec<u32>,
    /// Offsets of /28 blocks still free for `ipv4-prefix`.
    free_prefixes: Vec<u32>,
}

impl Subnet {
    fn host(&self, offset: u32) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.net.network()) + offset)
    }

    fn gateway(&self) -> Ipv4Addr {
        self.host(1)
    }
}

#[derive(Debug, Clone)]
struct Nic {
    iface: String,
    mac: String,
    eni: String,
    device: u32,
    subnet: usize,
    /// `local-ipv4s`; the first is the one DHCP leases.
    addrs: Vec<Ipv4Addr>,
    prefix: Option<Ipv4Net>,
}

#[derive(Debug, Clone)]
struct Instance {
    id: usize,
    nics: Vec<Nic>,
    subnets: Vec<Subnet>,
}

fn new_subnet(rng: &mut Rng, s: usize) -> Subnet {
    let a = 60 + u8::try_from(s).unwrap();
    let (net, size): (Ipv4Net, u32) = match rng.below(3) {
        0 => (format!("10.{a}.16.0/20").parse().unwrap(), 4096),
        1 => (format!("10.{a}.5.0/24").parse().unwrap(), 256),
        _ => (format!("10.{a}.7.64/26").parse().unwrap(), 64),
    };
    let mut free: Vec<u32> = (4..=40).collect();
    rng.shuffle(&mut free);
    let free_prefixes = [48, 64, 80, 96, 112]
        .into_iter()
        .filter(|o| o + 16 <= size)
        .collect();
    Subnet {
        net,
        free,
        free_prefixes,
    }
}

fn generate(rng: &mut Rng, id: usize) -> Instance {
    let n = usize::try_from(rng.range(2, 4)).unwrap();
    let mut devices: Vec<u32> = if rng.chance(30) {
        (1..).take(n - 1).collect()
    } else {
        let mut pool: Vec<u32> = (1..=7).collect();
        rng.shuffle(&mut pool);
        pool.truncate(n - 1);
        pool.sort_unstable();
        pool
    };
    devices.insert(0, 0);
    let mut subnets: Vec<Subnet> = Vec::new();
    let mut nics = Vec::new();
    for (k, device) in devices.into_iter().enumerate() {
        let subnet = if k > 0 && rng.chance(35) {
            // Two ENIs in one subnet.
            nics.get(usize::try_from(rng.below(k as u64)).unwrap())
                .map_or(0, |n: &Nic| n.subnet)
        } else {
            subnets.push(new_subnet(rng, subnets.len()));
            subnets.len() - 1
        };
        let sn = &mut subnets[subnet];
        let count = usize::try_from(rng.range(1, 3)).unwrap();
        let addrs: Vec<Ipv4Addr> = (0..count)
            .filter_map(|_| sn.free.pop())
            .map(|o| Ipv4Addr::from(u32::from(sn.net.network()) + o))
            .collect();
        let prefix = if rng.chance(40) && !sn.free_prefixes.is_empty() {
            let o = sn.free_prefixes.remove(0);
            Some(Ipv4Net::new(sn.host(o), 28).unwrap())
        } else {
            None
        };
        nics.push(Nic {
            iface: format!("eth{k}"),
            mac: format!("02:00:00:{id:02x}:00:{:02x}", k + 1),
            eni: format!("eni-0e2c{id:04x}{k:02x}"),
            device,
            subnet,
            addrs,
            prefix,
        });
    }
    Instance { id, nics, subnets }
}

impl Instance {
    fn tree(&self) -> Value {
        let mut macs = serde_json::Map::new();
        for nic in &self.nics {
            let mut m = json!({
                "device-number": nic.device.to_string(),
                "interface-id": nic.eni,
                "mac": nic.mac,
                "local-ipv4s": nic.addrs.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"),
                "subnet-ipv4-cidr-block": self.subnets[nic.subnet].net.to_string(),
            });
            if let Some(p) = nic.prefix {
                m["ipv4-prefix"] = json!(p.to_string());
            }
            macs.insert(nic.mac.clone(), m);
        }
        json!({"latest": {"api": {}, "meta-data": {
            "instance-id": format!("i-0e2c{:012x}", self.id),
            "local-ipv4": self.nics[0].addrs[0].to_string(),
            "mac": self.nics[0].mac,
            "placement": {"availability-zone": "us-east-1a", "region": "us-east-1"},
            "network": {"interfaces": {"macs": macs}},
        }}})
    }

    fn describe(&self) -> String {
        let mut s = format!("instance {}:", self.id);
        for n in &self.nics {
            let _ = write!(
                s,
                "\n  {} {} device-number {} subnet {} local-ipv4s {:?}{}",
                n.iface,
                n.mac,
                n.device,
                self.subnets[n.subnet].net,
                n.addrs,
                n.prefix
                    .map(|p| format!(" ipv4-prefix {p}"))
                    .unwrap_or_default()
            );
        }
        s
    }

    fn nic(&self, iface: &str) -> Option<&Nic> {
        self.nics.iter().find(|n| n.iface == iface)
    }
}

// ---------------------------------------------------------------------------
// The VPC and the two instances

fn dnsmasq_conf(inst: &Instance, dir: &Path) -> String {
    let d = dir.display();
    let mut conf = format!(
        "port=0\nno-ping\nkeep-in-foreground\nbind-interfaces\nexcept-interface=lo\n\
         dhcp-authoritative\nlog-dhcp\nlog-facility={d}/dnsmasq.log\n\
         dhcp-leasefile={d}/dnsmasq.leases\npid-file={d}/dnsmasq.pid\n"
    );
    for n in 0..inst.nics.len() {
        let _ = writeln!(conf, "interface=gw{n}");
    }
    for s in &inst.subnets {
        let _ = writeln!(
            conf,
            "dhcp-range={},static,{},2m",
            s.net.network(),
            s.net.netmask()
        );
    }
    for n in &inst.nics {
        let _ = writeln!(conf, "dhcp-host={},{}", n.mac, n.addrs[0]);
    }
    conf
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Oracle,
    Leasehook,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Oracle => "ec2-net-utils",
            Self::Leasehook => "leasehook",
        }
    }
}

/// One side: the VPC router and one instance namespace, and what runs in them.
struct Side {
    kind: Kind,
    router: Netns,
    inst: Netns,
    dir: TempDir,
    root: PathBuf,
    etc: Option<PathBuf>,
    children: Vec<Child>,
}

impl Drop for Side {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        kill_workers(&self.root);
        kill_namespace(&self.inst.name);
        kill_namespace(&self.router.name);
        if let Some(etc) = &self.etc {
            let _ = std::fs::remove_dir_all(etc);
            let _ = std::fs::remove_dir("/etc/netns");
        }
    }
}

/// The ec2-net-utils instance: a private mount namespace with tmpfs on `/run` (the
/// package writes `/run/amazon-ec2-net-utils` and `/run/systemd/network`), on
/// `/etc/systemd/network` and on `/usr/lib/systemd/network` (holding only the
/// package's `80-ec2.network`, matching the veths), a read-only `/sys` (so
/// networkd does not wait for udev), systemd-networkd, then `setup-policy-routes
/// IF start` and `cleanup` for every interface at once, as udev starts
/// `policy-routes@IF.service` for each NIC. `spr.status` gets `IF start-status
/// cleanup-status` lines, `spr.done` (`networkctl status` of every link) the moment
/// all have finished and every link runs on the package's `70-IF.network` and is
/// `configured` again after the package's `networkctl reload`.
const ORACLE_SUPERVISOR: &str = r#"
set -e
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /run/systemd/netif/links /run/systemd/netif/leases /run/systemd/netif/lldp
chown -R systemd-network:systemd-network /run/systemd/netif
umount /sys 2>/dev/null || true
mount -t sysfs -o ro sysfs /sys
mount -t tmpfs tmpfs /etc/systemd/network
mount -t tmpfs tmpfs /usr/lib/systemd/network
sed 's/^Driver=ena ixgbevf vif$/Name=eth*/' "$ORACLE/usr/lib/systemd/network/80-ec2.network" \
    > /usr/lib/systemd/network/80-ec2.network
grep -qx 'Name=eth\*' /usr/lib/systemd/network/80-ec2.network
SYSTEMD_LOG_LEVEL=info /lib/systemd/systemd-networkd > "$WORLD/networkd.log" 2>&1 &
nwd=$!
echo ready
set +e
pids=
for i in $IFACES; do
    (
        EC2_IF_INITIAL_SETUP=true LIBDIR_OVERRIDE="$ORACLE/usr/share/amazon-ec2-net-utils" \
            bash -x "$ORACLE/usr/bin/setup-policy-routes" "$i" start > "$WORLD/spr-$i.log" 2>&1
        s=$?
        LIBDIR_OVERRIDE="$ORACLE/usr/share/amazon-ec2-net-utils" \
            bash -x "$ORACLE/usr/bin/setup-policy-routes" "$i" cleanup >> "$WORLD/spr-$i.log" 2>&1
        echo "$i $s $?" >> "$WORLD/spr.status"
    ) &
    pids="$pids $!"
done
for p in $pids; do wait "$p"; done
# Done when every link runs on the file the package generated for it
# (70-IF.network, after its `networkctl reload`) and is configured again.
n=0
while [ $n -lt 300 ]; do
    ok=1
    for i in $IFACES; do
        st=$(networkctl status --no-pager "$i" 2>&1)
        case "$st" in *"Network File: /run/systemd/network/70-$i.network"*) ;; *) ok=0 ;; esac
        case "$st" in *"State: routable (configured)"*) ;; *) ok=0 ;; esac
    done
    [ $ok = 1 ] && break
    sleep 0.1
    n=$((n + 1))
done
for i in $IFACES; do
    echo "== $i"
    networkctl status --no-pager "$i" 2>&1
done > "$WORLD/spr.links"
mv "$WORLD/spr.links" "$WORLD/spr.done"
wait "$nwd"
"#;

fn build(inst: &Instance, kind: Kind) -> Side {
    let tag = match kind {
        Kind::Oracle => "e2nu",
        Kind::Leasehook => "e2lh",
    };
    let router = Netns::new(&format!("{tag}{}-r", inst.id));
    let ns = Netns::new(&format!("{tag}{}-i", inst.id));
    let dir = TempDir::new(&format!("{tag}{}", inst.id));
    let root = dir.0.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let mut side = Side {
        kind,
        router,
        inst: ns,
        dir,
        root,
        etc: None,
        children: Vec::new(),
    };
    for key in [
        "net.ipv6.conf.all.accept_dad",
        "net.ipv6.conf.default.accept_dad",
    ] {
        side.inst.sysctl(key, "0");
    }
    side.router.sysctl("net.ipv4.conf.all.rp_filter", "1");
    for (k, nic) in inst.nics.iter().enumerate() {
        let gw = format!("gw{k}");
        let sn = &inst.subnets[nic.subnet];
        side.router.veth_to(&gw, &side.inst, &nic.iface, &nic.mac);
        // The same gateway address on every port of a shared subnet; which port
        // owns which address is the router's /32 routes, as the VPC knows which ENI
        // holds which address.
        side.router.ip(&[
            "address",
            "add",
            &format!("{}/{}", sn.gateway(), sn.net.prefix_len()),
            "dev",
            &gw,
            "noprefixroute",
        ]);
        side.router
            .sysctl(&format!("net.ipv4.conf.{gw}.rp_filter"), "1");
        side.router.ip(&["link", "set", &gw, "up"]);
        side.inst.ip(&["link", "set", &nic.iface, "up"]);
        for a in &nic.addrs {
            side.router
                .ip(&["route", "add", &format!("{a}/32"), "dev", &gw]);
        }
        if let Some(p) = nic.prefix {
            side.router
                .ip(&["route", "add", &p.to_string(), "dev", &gw]);
        }
    }
    side.router
        .ip(&["address", "add", "169.254.169.254/32", "dev", "lo"]);
    side.router
        .ip(&["address", "add", "198.51.100.10/32", "dev", "lo"]);

    let conf = side
        .dir
        .file("dnsmasq.conf", &dnsmasq_conf(inst, &side.dir.0));
    let err = std::fs::File::create(side.dir.0.join("dnsmasq.err")).unwrap();
    let mut dnsmasq = side.router.command("dnsmasq");
    dnsmasq
        .arg(format!("--conf-file={}", conf.display()))
        .stdout(Stdio::null())
        .stderr(err);
    let child = dnsmasq
        .spawn()
        .unwrap_or_else(|e| panic!("failed to start dnsmasq (is it installed?): {e}"));
    side.children.push(child);
    let log = side.dir.0.join("dnsmasq.log");
    assert!(
        wait_until(Duration::from_secs(30), || std::fs::read_to_string(&log)
            .is_ok_and(
                |l| l.matches("DHCP, static leases only on").count() >= inst.subnets.len()
            )),
        "dnsmasq did not start: {}",
        std::fs::read_to_string(side.dir.0.join("dnsmasq.err")).unwrap_or_default()
    );
    side.children.push(start_imds(
        &side.router,
        &side.dir.0,
        &inst.tree(),
        &json!({}),
    ));
    let mut echo = side.router.command("/usr/bin/python3");
    echo.args(["-c", ECHO_SERVER]);
    side.children.push(start_ready(echo, "echo host"));

    match kind {
        Kind::Oracle => start_oracle(&mut side, inst),
        Kind::Leasehook => start_leasehook(&mut side, inst),
    }
    side
}

fn start_oracle(side: &mut Side, inst: &Instance) {
    let (bus, sock) = start_bus(&side.dir, "bus");
    side.children.push(bus);
    let ifaces: Vec<&str> = inst.nics.iter().map(|n| n.iface.as_str()).collect();
    let mut cmd = side.inst.command("env");
    cmd.arg("-i")
        .arg("PATH=/usr/sbin:/usr/bin:/sbin:/bin")
        .arg("LANG=C.UTF-8")
        .arg(format!(
            "DBUS_SYSTEM_BUS_ADDRESS=unix:path={}",
            sock.display()
        ))
        .arg(format!("ORACLE={}", oracle_root().display()))
        .arg(format!("WORLD={}", side.dir.0.display()))
        .arg(format!("IFACES={}", ifaces.join(" ")))
        .args(["sh", "-c", ORACLE_SUPERVISOR]);
    side.children.push(start_ready(cmd, "systemd-networkd"));
}

fn start_leasehook(side: &mut Side, inst: &Instance) {
    side.etc = Some(install_hook(&side.inst.name, false));
    let env = [
        (
            "LEASEHOOK_DHCLIENT".to_owned(),
            sibling_bin("leasehook-dhclient").display().to_string(),
        ),
        ("LEASEHOOK_ROOT".to_owned(), side.root.display().to_string()),
        ("LEASEHOOK_LOG_LEVEL".to_owned(), "debug".to_owned()),
    ];
    // The primary first: the main table's default route is the first client's
    // (dhclient-script adds one per interface, and later ones find it taken), and
    // on EC2 it is the primary's.
    for (k, nic) in inst.nics.iter().enumerate() {
        if k == 1 {
            let want = format!("inet {}/", inst.nics[0].addrs[0]);
            assert!(
                wait_until(Duration::from_secs(40), || side
                    .inst
                    .ip(&["-4", "addr", "show", &inst.nics[0].iface])
                    .contains(&want)),
                "{} got no lease: {}",
                inst.nics[0].iface,
                side.file(&format!("dhclient-{}.log", inst.nics[0].iface))
            );
        }
        let i = &nic.iface;
        let log = std::fs::File::create(side.dir.0.join(format!("dhclient-{i}.log"))).unwrap();
        let mut cmd = side.inst.command("dhclient");
        cmd.args(["-d", "-v", "-4"]);
        for (k, v) in &env {
            cmd.arg("-e").arg(format!("{k}={v}"));
        }
        cmd.arg("-lf")
            .arg(side.dir.0.join(format!("dhclient-{i}.leases")))
            .arg("-pf")
            .arg(side.dir.0.join(format!("dhclient-{i}.pid")))
            .arg(i)
            .stdout(Stdio::null())
            .stderr(log);
        side.children.push(
            cmd.spawn()
                .unwrap_or_else(|e| panic!("failed to start dhclient: {e}")),
        );
    }
}

impl Side {
    fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.0.join(name)).unwrap_or_default()
    }

    /// Everything a failure report needs from this side.
    fn logs(&self, inst: &Instance) -> String {
        let mut s = format!(
            "--- {} logs in {}\n",
            self.kind.name(),
            self.dir.0.display()
        );
        let names: Vec<String> = match self.kind {
            Kind::Oracle => ["spr.status", "spr.done", "networkd.log"]
                .into_iter()
                .map(str::to_owned)
                .chain(inst.nics.iter().map(|n| format!("spr-{}.log", n.iface)))
                .collect(),
            Kind::Leasehook => inst
                .nics
                .iter()
                .map(|n| format!("dhclient-{}.log", n.iface))
                .collect(),
        };
        for n in names {
            let body = self.file(&n);
            // The traces are long: their end says what went wrong.
            let tail: Vec<&str> = body.lines().rev().take(60).collect();
            let _ = writeln!(s, "--- {n}");
            for l in tail.into_iter().rev() {
                let _ = writeln!(s, "{l}");
            }
        }
        let _ = writeln!(s, "--- imds.log\n{}", self.file("imds.log"));
        s
    }

    /// Waits until the side's own tool has finished with every NIC, then until the
    /// kernel state holds still for a second.
    fn settle(&self, inst: &Instance) -> Result<Kernel, String> {
        let done = match self.kind {
            Kind::Oracle => wait_until(Duration::from_secs(90), || {
                self.dir.0.join("spr.done").exists()
            }),
            Kind::Leasehook => wait_until(Duration::from_secs(60), || {
                inst.nics.iter().all(|n| {
                    self.root
                        .join("run/leasehook/iface")
                        .join(format!("{}.json", n.iface))
                        .exists()
                        && !self
                            .root
                            .join("run/leasehook/pending")
                            .join(format!("{}.json", n.iface))
                            .exists()
                })
            }),
        };
        if !done {
            return Err(format!("{} did not finish", self.kind.name()));
        }
        if self.kind == Kind::Oracle {
            let status = self.file("spr.status");
            let mut lines: Vec<&str> = status.lines().collect();
            lines.sort_unstable();
            let want: Vec<String> = {
                let mut w: Vec<String> = inst
                    .nics
                    .iter()
                    .map(|n| format!("{} 0 0", n.iface))
                    .collect();
                w.sort();
                w
            };
            if lines != want {
                return Err(format!(
                    "setup-policy-routes did not succeed on every NIC: {lines:?}"
                ));
            }
            let networkctl = self.file("spr.done");
            let blocks: Vec<&str> = networkctl.split("== ").skip(1).collect();
            let configured = blocks.len() == inst.nics.len()
                && inst.nics.iter().zip(&blocks).all(|(n, b)| {
                    let i = &n.iface;
                    b.starts_with(&format!("{i}\n"))
                        && b.contains(&format!(
                            "Network File: /run/systemd/network/70-{i}.network"
                        ))
                        && b.contains("State: routable (configured)")
                });
            if !configured {
                return Err(format!(
                    "networkd did not take the package's configuration on every link: \
                     {networkctl}"
                ));
            }
        }
        let start = Instant::now();
        let mut last = Kernel::read(&self.inst);
        let mut since = Instant::now();
        while since.elapsed() < Duration::from_secs(1) {
            if start.elapsed() > Duration::from_secs(30) {
                return Err(format!("{}: the kernel did not settle", self.kind.name()));
            }
            std::thread::sleep(Duration::from_millis(200));
            let now = Kernel::read(&self.inst);
            if now != last {
                last = now;
                since = Instant::now();
            }
        }
        Ok(last)
    }

    /// For every address: the address the echo host saw (or the error). An
    /// `ADDR@IF` entry sends from ADDR bound to interface IF (the negative control).
    fn echo(&self, targets: &[String]) -> BTreeMap<String, String> {
        const PROBE: &str = "\
import socket, sys
for t in sys.argv[1:]:
    a, _, dev = t.partition('@')
    try:
        s = socket.socket()
        if dev:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, dev.encode())
        s.settimeout(2 if not dev else 1)
        s.bind((a, 0))
        s.connect(('198.51.100.10', 80))
        s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')
        body = s.makefile('rb').read().split(b'\\r\\n\\r\\n', 1)[1].decode()
        print(t, body.strip())
    except Exception as e:
        print(t, 'failed:' + type(e).__name__)
";
        let out = self
            .inst
            .command("/usr/bin/python3")
            .args(["-c", PROBE])
            .args(targets)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(t, r)| (t.to_owned(), r.to_owned()))
            .collect()
    }
}

// ---------------------------------------------------------------------------
// The kernel, read with `ip -j`

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Rule {
    priority: u64,
    from: String,
    table: String,
    proto: String,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Route {
    table: String,
    dst: String,
    gateway: Option<String>,
    dev: String,
    scope: String,
    prefsrc: Option<String>,
    metric: Option<u64>,
    proto: String,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Addr {
    dev: String,
    cidr: String,
    noprefixroute: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Kernel {
    rules: BTreeSet<Rule>,
    routes: BTreeSet<Route>,
    addrs: BTreeSet<Addr>,
    altnames: BTreeMap<String, Vec<String>>,
}

fn s(v: &Value) -> Option<String> {
    v.as_str().map(str::to_owned)
}

impl Kernel {
    fn read(ns: &Netns) -> Self {
        let mut k = Self::default();
        for fam in ["-4", "-6"] {
            for r in ns.ip_json(&[fam, "rule"]).as_array().into_iter().flatten() {
                let src = r["src"].as_str().unwrap_or("all");
                let priority = r["priority"].as_u64().unwrap_or(0);
                // The kernel's own three rules.
                if src == "all" && matches!(priority, 0 | 32766 | 32767) {
                    continue;
                }
                let from = r["srclen"]
                    .as_u64()
                    .map_or_else(|| src.to_owned(), |l| format!("{src}/{l}"));
                k.rules.insert(Rule {
                    priority,
                    from,
                    table: s(&r["table"]).unwrap_or_default(),
                    proto: s(&r["protocol"]).unwrap_or_else(|| "-".into()),
                });
            }
            for r in ns
                .ip_json(&[fam, "route", "show", "table", "all"])
                .as_array()
                .into_iter()
                .flatten()
            {
                let table = s(&r["table"]).unwrap_or_else(|| "main".into());
                let unicast = r["type"].as_str().is_none_or(|t| t == "unicast");
                let dst = s(&r["dst"]).unwrap_or_default();
                if table == "local" || !unicast || dst.starts_with("fe80::") {
                    continue;
                }
                k.routes.insert(Route {
                    table,
                    dst,
                    gateway: s(&r["gateway"]),
                    dev: s(&r["dev"]).unwrap_or_default(),
                    scope: s(&r["scope"]).unwrap_or_else(|| "global".into()),
                    prefsrc: s(&r["prefsrc"]),
                    metric: r["metric"].as_u64(),
                    proto: s(&r["protocol"]).unwrap_or_else(|| "boot".into()),
                });
            }
        }
        for l in ns.ip_json(&["address"]).as_array().into_iter().flatten() {
            let dev = l["ifname"].as_str().unwrap_or("?").to_owned();
            for a in l["addr_info"].as_array().into_iter().flatten() {
                if a["scope"].as_str() == Some("global") {
                    k.addrs.insert(Addr {
                        dev: dev.clone(),
                        cidr: format!("{}/{}", a["local"].as_str().unwrap_or("?"), a["prefixlen"]),
                        noprefixroute: a["noprefixroute"].as_bool().unwrap_or(false),
                    });
                }
            }
        }
        for l in ns.ip_json(&["link"]).as_array().into_iter().flatten() {
            let names: Vec<String> = l["altnames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(s)
                .collect();
            if !names.is_empty() {
                k.altnames
                    .insert(l["ifname"].as_str().unwrap_or("?").to_owned(), names);
            }
        }
        k
    }

    /// `ip`-like lines: rules, routes by table (main last), addresses, altnames.
    fn render(&self) -> Vec<String> {
        let mut out = Vec::new();
        for r in &self.rules {
            out.push(format!(
                "{}: from {} lookup {} proto {}",
                r.priority, r.from, r.table, r.proto
            ));
        }
        let mut routes: Vec<&Route> = self.routes.iter().collect();
        routes.sort_by_key(|r| (r.table == "main", r.table.clone(), r.dst == "default"));
        for r in routes {
            let mut l = r.dst.clone();
            if let Some(g) = &r.gateway {
                let _ = write!(l, " via {g}");
            }
            let _ = write!(l, " dev {}", r.dev);
            if r.table != "main" {
                let _ = write!(l, " table {}", r.table);
            }
            let _ = write!(l, " proto {}", r.proto);
            if r.scope != "global" {
                let _ = write!(l, " scope {}", r.scope);
            }
            if let Some(p) = &r.prefsrc {
                let _ = write!(l, " src {p}");
            }
            if let Some(m) = r.metric {
                let _ = write!(l, " metric {m}");
            }
            out.push(l);
        }
        for a in &self.addrs {
            out.push(format!(
                "{} {}{}",
                a.dev,
                a.cidr,
                if a.noprefixroute {
                    " noprefixroute"
                } else {
                    ""
                }
            ));
        }
        for (dev, names) in &self.altnames {
            out.push(format!("{dev} altname {}", names.join(" altname ")));
        }
        out
    }
}

fn side_by_side(inst: &Instance, ec2: &Kernel, lh: &Kernel) -> String {
    let mut s = format!("{}\n", inst.describe());
    for (name, k) in [("ec2-net-utils 2.4.1", ec2), ("leasehook", lh)] {
        let _ = writeln!(s, "--- {name}");
        for l in k.render() {
            let _ = writeln!(s, "{l}");
        }
    }
    s
}

// ---------------------------------------------------------------------------
// The comparison

fn table_of(nic: &Nic) -> String {
    (TABLE_BASE + nic.device).to_string()
}

/// Compares the two kernels; the known differences are checked one by one and then
/// taken out, and what is left must be equal. Returns every unexplained difference.
fn compare(inst: &Instance, ec2: &Kernel, lh: &Kernel) -> Vec<String> {
    /// A policy route without what the known differences are about.
    type Key = (String, String, Option<String>, String, String);
    let mut errs = Vec::new();
    let primary = &inst.nics[0];
    let primary_table = table_of(primary);

    // Ownership marker: networkd's protocols there, leasehook's 176 here.
    for r in &ec2.rules {
        if r.proto != "static" {
            errs.push(format!("ec2-net-utils rule not proto static: {r:?}"));
        }
    }
    for r in &lh.rules {
        if r.proto != "176" {
            errs.push(format!("leasehook rule not proto 176: {r:?}"));
        }
    }
    let strip = |rules: &BTreeSet<Rule>| -> BTreeSet<(u64, String, String)> {
        rules
            .iter()
            .map(|r| (r.priority, r.from.clone(), r.table.clone()))
            .collect()
    };
    let (er, lr) = (strip(&ec2.rules), strip(&lh.rules));
    for r in er.difference(&lr) {
        errs.push(format!("rule only in ec2-net-utils: {r:?}"));
    }
    for r in lr.difference(&er) {
        errs.push(format!("rule only in leasehook: {r:?}"));
    }
    if er.is_empty() && inst.nics.len() > 1 {
        errs.push("no rules at all".into());
    }

    // Known difference 1: ec2-net-utils fills the primary's table (device 0) too,
    // and no rule looks it up.
    let is_policy = |r: &&Route| r.table != "main" && r.table != "default";
    let ec2_primary: Vec<&Route> = ec2
        .routes
        .iter()
        .filter(is_policy)
        .filter(|r| r.table == primary_table)
        .collect();
    let sn0 = &inst.subnets[primary.subnet];
    let want_primary: BTreeSet<(String, Option<String>, String)> = [
        (
            "default".to_owned(),
            Some(sn0.gateway().to_string()),
            primary.iface.clone(),
        ),
        (sn0.net.to_string(), None, primary.iface.clone()),
    ]
    .into_iter()
    .collect();
    let got_primary: BTreeSet<(String, Option<String>, String)> = ec2_primary
        .iter()
        .map(|r| (r.dst.clone(), r.gateway.clone(), r.dev.clone()))
        .collect();
    if got_primary != want_primary {
        errs.push(format!(
            "known difference 1 changed: ec2-net-utils' table {primary_table} holds {ec2_primary:?}"
        ));
    }
    if ec2
        .rules
        .iter()
        .chain(&lh.rules)
        .any(|r| r.table == primary_table)
    {
        errs.push(format!(
            "a rule looks up the primary's table {primary_table}"
        ));
    }
    if lh.routes.iter().any(|r| r.table == primary_table) {
        errs.push(format!(
            "leasehook filled the primary's table {primary_table}"
        ));
    }

    // Known differences 2 and 3, per route of the other policy tables: leasehook's
    // subnet routes carry `src <leased address>`, ec2-net-utils' do not;
    // ec2-net-utils' default routes carry metric 512 + 10·device (2.4.1's
    // RouteMetric, which the `Gateway=_dhcp4` route of its table inherits),
    // leasehook's none. Protocols: networkd's `dhcp` (default) and `static`
    // (subnet) there, 176 here.
    let norm = |side: Kind, routes: &BTreeSet<Route>, errs: &mut Vec<String>| -> BTreeSet<Key> {
        let mut out = BTreeSet::new();
        for r in routes.iter().filter(is_policy) {
            if side == Kind::Oracle && r.table == primary_table {
                continue;
            }
            let nic = inst.nic(&r.dev);
            let leased = nic.map(|n| n.addrs[0].to_string());
            let device = nic.map_or(u32::MAX, |n| n.device);
            let default = r.dst == "default";
            let (want_src, want_metric, want_proto) = match (side, default) {
                (Kind::Oracle, true) => (None, Some(u64::from(METRIC_BASE + 10 * device)), "dhcp"),
                (Kind::Oracle, false) => (None, None, "static"),
                (Kind::Leasehook, true) => (None, None, "176"),
                (Kind::Leasehook, false) => (leased, None, "176"),
            };
            if r.prefsrc != want_src || r.metric != want_metric || r.proto != want_proto {
                errs.push(format!(
                    "{} route outside the known differences (want src {want_src:?} metric \
                     {want_metric:?} proto {want_proto}): {r:?}",
                    side.name()
                ));
            }
            out.insert((
                r.table.clone(),
                r.dst.clone(),
                r.gateway.clone(),
                r.dev.clone(),
                r.scope.clone(),
            ));
        }
        out
    };
    let et = norm(Kind::Oracle, &ec2.routes, &mut errs);
    let lt = norm(Kind::Leasehook, &lh.routes, &mut errs);
    for r in et.difference(&lt) {
        errs.push(format!("policy route only in ec2-net-utils: {r:?}"));
    }
    for r in lt.difference(&et) {
        errs.push(format!("policy route only in leasehook: {r:?}"));
    }

    // Known difference 3, main table: ec2-net-utils' default route per NIC has
    // metric 512 + 10·device; leasehook puts nothing in the main table (dhclient's
    // own routes are there).
    for nic in &inst.nics {
        let want = u64::from(METRIC_BASE + 10 * nic.device);
        let ok = ec2.routes.iter().any(|r| {
            r.table == "main" && r.dst == "default" && r.dev == nic.iface && r.metric == Some(want)
        });
        if !ok {
            errs.push(format!(
                "known difference 3 changed: no main-table default via {} with metric {want}",
                nic.iface
            ));
        }
    }
    if let Some(r) = lh
        .routes
        .iter()
        .find(|r| r.table == "main" && r.proto == "176")
    {
        errs.push(format!("leasehook route in the main table: {r:?}"));
    }

    // Addresses: the same on both sides; known difference 4: ec2-net-utils' /32s
    // (its secondary addresses, `AddPrefixRoute=false`) carry noprefixroute,
    // leasehook's do not.
    for (side, k) in [(Kind::Oracle, ec2), (Kind::Leasehook, lh)] {
        for a in &k.addrs {
            let host = a.cidr.ends_with("/32");
            let want = side == Kind::Oracle && host;
            if a.noprefixroute != want {
                errs.push(format!(
                    "{} address outside the known differences: {a:?}",
                    side.name()
                ));
            }
        }
    }
    let addrs = |k: &Kernel| -> BTreeSet<(String, String)> {
        k.addrs
            .iter()
            .map(|a| (a.dev.clone(), a.cidr.clone()))
            .collect()
    };
    let (ea, la) = (addrs(ec2), addrs(lh));
    for a in ea.difference(&la) {
        errs.push(format!("address only in ec2-net-utils: {a:?}"));
    }
    for a in la.difference(&ea) {
        errs.push(format!("address only in leasehook: {a:?}"));
    }
    // Both must hold what the metadata says: the leased address with the subnet's
    // length, every other local-ipv4s entry as /32.
    for nic in &inst.nics {
        let len = inst.subnets[nic.subnet].net.prefix_len();
        for (i, a) in nic.addrs.iter().enumerate() {
            let cidr = if i == 0 {
                format!("{a}/{len}")
            } else {
                format!("{a}/32")
            };
            if !la.contains(&(nic.iface.clone(), cidr.clone())) {
                errs.push(format!("{} lacks {cidr}", nic.iface));
            }
        }
    }

    // Known difference 5: ec2-net-utils names each link after its ENI and its
    // device-number (altnames); leasehook names nothing.
    for nic in &inst.nics {
        let want = vec![nic.eni.clone(), format!("device-number-{}", nic.device)];
        if ec2.altnames.get(&nic.iface) != Some(&want) {
            errs.push(format!(
                "known difference 5 changed: {} altnames {:?}",
                nic.iface,
                ec2.altnames.get(&nic.iface)
            ));
        }
    }
    if !lh.altnames.is_empty() {
        errs.push(format!("leasehook side has altnames: {:?}", lh.altnames));
    }
    errs
}

// ---------------------------------------------------------------------------
// The test

struct Outcome {
    errors: Vec<String>,
    echoed: usize,
    side_by_side: String,
}

fn run_instance(inst: &Instance) -> Outcome {
    // Both sides at once: each mostly waits (for DHCP, IMDS, networkd).
    let mut errors = Vec::new();
    let mut kernels = Vec::new();
    let mut sides = Vec::new();
    std::thread::scope(|scope| {
        let handles = [Kind::Oracle, Kind::Leasehook].map(|kind| {
            scope.spawn(move || {
                let side = build(inst, kind);
                let settled = side.settle(inst);
                (side, settled)
            })
        });
        for h in handles {
            let (side, settled) = h.join().unwrap();
            match settled {
                Ok(k) => kernels.push(k),
                Err(e) => {
                    errors.push(format!("{e}\n{}", side.logs(inst)));
                    kernels.push(Kernel::read(&side.inst));
                }
            }
            sides.push(side);
        }
    });
    let (ec2, lh) = (&sides[0], &sides[1]);
    let (ek, lk) = (&kernels[0], &kernels[1]);
    let side_by_side = side_by_side(inst, ek, lk);
    errors.extend(compare(inst, ek, lk));

    // Traffic: every address of every ENI reaches the echo host through the
    // source check, on both sides; and the check is real: a secondary ENI's
    // address sent out of the primary is dropped.
    let mut targets: Vec<String> = inst
        .nics
        .iter()
        .flat_map(|n| n.addrs.iter().map(ToString::to_string))
        .collect();
    let control = format!("{}@{}", inst.nics[1].addrs[0], inst.nics[0].iface);
    targets.push(control.clone());
    let mut echoed = 0;
    let answers: Vec<BTreeMap<String, String>> = std::thread::scope(|scope| {
        let handles = [ec2, lh].map(|side| scope.spawn(|| side.echo(&targets)));
        handles.map(|h| h.join().unwrap()).into()
    });
    for (side, got) in [ec2, lh].into_iter().zip(&answers) {
        for t in &targets {
            let r = got.get(t).map_or("no answer", String::as_str);
            if *t == control {
                if !r.starts_with("failed:") {
                    errors.push(format!(
                        "{}: the source check let {t} through ({r})",
                        side.kind.name()
                    ));
                }
            } else if r == t {
                echoed += 1;
            } else {
                errors.push(format!("{}: traffic from {t}: {r}", side.kind.name()));
            }
        }
    }
    if !errors.is_empty() {
        errors.insert(0, side_by_side.clone());
        if errors.len() > 1 && !errors.iter().any(|e| e.contains("--- ec2-net-utils logs")) {
            errors.push(ec2.logs(inst));
            errors.push(lh.logs(inst));
        }
    }
    Outcome {
        errors,
        echoed,
        side_by_side,
    }
}

/// The oracle must be there (extracted by `scripts/fetch-ec2-net-utils-oracle.sh`),
/// and so must what it calls: a missing one fails the test.
fn require_oracle() {
    require_root();
    let root = oracle_root();
    for f in [
        "usr/bin/setup-policy-routes",
        "usr/share/amazon-ec2-net-utils/lib.sh",
        "usr/lib/systemd/network/80-ec2.network",
    ] {
        assert!(
            root.join(f).is_file(),
            "{} missing: run scripts/fetch-ec2-net-utils-oracle.sh (amazon-ec2-net-utils 2.4.1, \
             extracted, never installed)",
            root.join(f).display()
        );
    }
    let lib = std::fs::read_to_string(root.join("usr/share/amazon-ec2-net-utils/lib.sh")).unwrap();
    assert!(
        lib.contains("declare -i -r rule_base=10000")
            && lib.contains("declare -i -r metric_base=512")
            && lib.contains("metric=$((metric_base+10*ifid))"),
        "the extracted lib.sh is not 2.4.1's"
    );
    for (tool, arg) in [
        ("curl", "--version"),
        ("dhclient", "--version"),
        ("dnsmasq", "--version"),
        ("dbus-daemon", "--version"),
        ("networkctl", "--version"),
        ("/lib/systemd/systemd-networkd", "--version"),
    ] {
        assert!(
            Command::new(tool)
                .arg(arg)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok(),
            "{tool} not found: the ec2-net-utils differential needs it"
        );
    }
}

#[test]
fn ec2_net_utils_and_leasehook_leave_the_same_policy_routing() {
    require_oracle();
    let count = env_or("LEASEHOOK_EC2NU_INSTANCES", DEFAULT_INSTANCES);
    let seed = env_or("LEASEHOOK_EC2NU_SEED", DEFAULT_SEED);
    let parallel = env_or("LEASEHOOK_EC2NU_PARALLEL", DEFAULT_PARALLEL).max(1);
    assert!(
        !in_ci() || count >= 20,
        "CI runs at least 20 instances (LEASEHOOK_EC2NU_INSTANCES={count})"
    );
    let mut rng = Rng::new(seed);
    let instances: Vec<Instance> = (0..count).map(|i| generate(&mut rng, i)).collect();
    let shared = instances.iter().filter(|i| {
        let subnets: BTreeSet<usize> = i.nics.iter().map(|n| n.subnet).collect();
        subnets.len() < i.nics.len()
    });
    let shared = shared.count();
    let gaps = instances
        .iter()
        .filter(|i| {
            i.nics
                .iter()
                .enumerate()
                .any(|(k, n)| n.device as usize != k)
        })
        .count();
    let prefixes = instances
        .iter()
        .filter(|i| i.nics.iter().any(|n| n.prefix.is_some()))
        .count();
    let secondaries = instances
        .iter()
        .filter(|i| i.nics.iter().any(|n| n.addrs.len() > 1))
        .count();
    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let results: Mutex<BTreeMap<usize, Outcome>> = Mutex::new(BTreeMap::new());
    std::thread::scope(|scope| {
        for _ in 0..parallel {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(inst) = instances.get(i) else { break };
                    let out = run_instance(inst);
                    results.lock().unwrap().insert(i, out);
                }
            });
        }
    });
    let results = results.into_inner().unwrap();
    let echoed: usize = results.values().map(|o| o.echoed).sum();
    let failed: Vec<(&usize, &Outcome)> = results
        .iter()
        .filter(|(_, o)| !o.errors.is_empty())
        .collect();
    let show = env_or("LEASEHOOK_EC2NU_SHOW", 0_usize);
    if let Some(shown) = results.get(&show) {
        eprintln!(
            "side by side, instance {show} (seed {seed:#x}):\n{}",
            shown.side_by_side
        );
    }
    eprintln!(
        "ec2-net-utils differential: {} single-card instances (seed {seed:#x}; {shared} with two \
         ENIs in one subnet, {gaps} with gaps in device numbers, {prefixes} with ipv4-prefix, \
         {secondaries} with secondary IPs), {} with unexplained differences, {echoed} addresses \
         echoed through the source check on both sides, {:.1} s",
        results.len(),
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(results.len(), count, "not every instance ran");
    assert!(count < 20 || (shared > 0 && gaps > 0 && prefixes > 0 && secondaries > 0));
    if !failed.is_empty() {
        let mut report = String::new();
        for (i, o) in failed.iter().take(3) {
            let _ = writeln!(report, "==== instance {i}\n{}", o.errors.join("\n"));
        }
        panic!(
            "{} of {count} instances differ beyond the known differences:\n{report}",
            failed.len()
        );
    }
}

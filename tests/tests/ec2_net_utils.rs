// SPDX-License-Identifier: Apache-2.0
//! Differential test against amazon-ec2-net-utils 2.4.1 itself, on generated
//! single-card EC2 instances.
//!
//! Every generated instance (2–4 ENIs, secondary IPs, `ipv4-prefix`, ENIs sharing a
//! subnet, gaps in device numbers; IPv4-only, dual-stack and IPv6-only subnets with
//! `ipv6s`, `ipv6-prefix`) is built twice, each time as a VPC "router" namespace
//! (dnsmasq with a fixed DHCPv4 and DHCPv6 lease per MAC and router advertisements,
//! the IMDS emulator on 169.254.169.254 serving the same tree, the echo hosts, and
//! an ENI-like source check: strict `rp_filter` on one port per ENI, each ENI's
//! addresses routed to its own port, and for IPv6 policy rules per port) and an
//! instance namespace:
//!
//! * **ec2-net-utils**: the Debian package's own `setup-policy-routes` and `lib.sh`
//!   (extracted by `scripts/fetch-ec2-net-utils-oracle.sh`, never installed) under
//!   real systemd-networkd, in a private mount namespace (tmpfs `/run`, read-only
//!   `/sys`, private D-Bus), started per interface as its `policy-routes@.service`
//!   does (`EC2_IF_INITIAL_SETUP=true`, `start`, then `cleanup`). Its
//!   `80-ec2.network` matches drivers (`ena ixgbevf vif`); the copy used here
//!   matches `Name=eth*`, the veths, and is otherwise the package's.
//!   Its refresh (`refresh-policy-routes@.timer`) runs once on an IPv6 ENI whose
//!   IPv6 rules the first `start` left out (it found no IPv6 address yet).
//! * **leasehook**: real dhclient (`-4` on every ENI with IPv4, `-6` on every ENI
//!   with IPv6) with leasehook's exit hook.
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
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ipnet::{Ipv4Net, Ipv6Net};
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
/// The IPv6 echo host (documentation prefix), beside the IPv4 one on the router's `lo`.
const ECHO6: &str = "2001:db8:ec2::10";
/// A UDP sink on both echo addresses, port 81, writing each datagram it receives
/// (the probe's entry) as a line to the file `argv[1]`. The echo hosts show
/// traffic that got an answer; a control sent out of the wrong ENI gets none
/// whether the router drops it or only its reply goes astray (back through the
/// ENI that owns the address, to a socket bound to the other). The sink tells
/// the two apart: a control must never arrive.
const SINK_SERVER: &str = "\
import socket, sys, threading
out = open(sys.argv[1], 'a', buffering=1)
def serve(fam, addr):
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((addr, 81))
    while True:
        out.write(s.recvfrom(512)[0].decode(errors='replace') + '\\n')
for fam, addr in ((socket.AF_INET, '198.51.100.10'), (socket.AF_INET6, '2001:db8:ec2::10')):
    threading.Thread(target=serve, args=(fam, addr), daemon=True).start()
print('ready', flush=True)
threading.Event().wait()
";
/// The IPv6 echo host: the IPv4 one's body (the client's address), on [`ECHO6`].
const ECHO6_SERVER: &str = "\
import http.server, socket
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = self.client_address[0].encode()
        self.send_response(200); self.send_header('Content-Length', str(len(b))); self.end_headers(); self.wfile.write(b)
    def log_message(self, *a): pass
class S(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6
s = S(('2001:db8:ec2::10', 80), H)
print('ready', flush=True)
s.serve_forever()
";

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
    /// The subnet has IPv4 (false: an IPv6-only subnet, whose ENIs list no
    /// `local-ipv4s`).
    v4: bool,
    /// `subnet-ipv6-cidr-blocks` (a /64), for a dual-stack or IPv6-only subnet.
    net6: Option<Ipv6Net>,
    /// Host offsets still free for IPv6 addresses.
    free6: Vec<u16>,
    /// Numbers of /80 blocks still free for `ipv6-prefix`.
    free_prefixes6: Vec<u16>,
}

impl Subnet {
    fn host(&self, offset: u32) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.net.network()) + offset)
    }

    fn gateway(&self) -> Ipv4Addr {
        self.host(1)
    }

    /// The `::offset` host of the IPv6 subnet (offset 1: the router's address).
    fn host6(&self, offset: u16) -> Option<Ipv6Addr> {
        self.net6.map(|n| {
            let mut seg = n.network().segments();
            seg[7] = offset;
            Ipv6Addr::from(seg)
        })
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
    /// Empty on an IPv6-only ENI.
    addrs: Vec<Ipv4Addr>,
    prefix: Option<Ipv4Net>,
    /// `ipv6s`; the first is the one DHCPv6 leases.
    addrs6: Vec<Ipv6Addr>,
    /// `ipv6-prefix` (a /80, as EC2 delegates them).
    prefix6: Option<Ipv6Net>,
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
        v4: true,
        net6: None,
        free6: Vec::new(),
        free_prefixes6: Vec::new(),
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
            addrs6: Vec::new(),
            prefix6: None,
        });
    }
    Instance { id, nics, subnets }
}

/// IPv6 on a generated instance, drawn from its own stream so that the IPv4
/// shapes stay what [`generate`] makes of the seed: each subnet is IPv4-only
/// (30 %), dual-stack (50 %) or IPv6-only (20 %; never the primary's, whose IPv4
/// reaches IMDS at 169.254.169.254 on both sides). An ENI of an IPv6 subnet lists
/// 1–3 `ipv6s` (the first leased by DHCPv6) and sometimes an `ipv6-prefix` /80;
/// an ENI of an IPv6-only subnet lists no `local-ipv4s`, as EC2 serves it.
fn add_ipv6(rng: &mut Rng, inst: &mut Instance) {
    let primary = inst.nics[0].subnet;
    let id = u16::try_from(inst.id).unwrap();
    for (s, sn) in inst.subnets.iter_mut().enumerate() {
        let (v6, v4) = match rng.below(10) {
            0..=2 => (false, true),
            3..=7 => (true, true),
            _ => (true, s == primary),
        };
        sn.v4 = v4;
        if v6 {
            let seg = 0x60 + u16::try_from(s).unwrap();
            sn.net6 =
                Some(Ipv6Net::new(Ipv6Addr::new(0xfd00, seg, id, 0, 0, 0, 0, 0), 64).unwrap());
            let mut free: Vec<u16> = (0x20..=0x3f).collect();
            rng.shuffle(&mut free);
            sn.free6 = free;
            sn.free_prefixes6 = vec![1, 2, 3, 4];
        }
    }
    for nic in &mut inst.nics {
        let sn = &mut inst.subnets[nic.subnet];
        if !sn.v4 {
            nic.addrs.clear();
            nic.prefix = None;
        }
        let Some(net6) = sn.net6 else { continue };
        let count = rng.range(1, 3);
        let offsets: Vec<u16> = (0..count).filter_map(|_| sn.free6.pop()).collect();
        nic.addrs6 = offsets.into_iter().filter_map(|o| sn.host6(o)).collect();
        if rng.chance(35) && !sn.free_prefixes6.is_empty() {
            let k = sn.free_prefixes6.remove(0);
            let mut seg = net6.network().segments();
            seg[4] = k;
            nic.prefix6 = Some(Ipv6Net::new(Ipv6Addr::from(seg), 80).unwrap());
        }
    }
}

/// An IMDS list leaf: one value a line.
fn lines<T: ToString>(values: &[T]) -> String {
    values
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

impl Instance {
    fn tree(&self) -> Value {
        let mut macs = serde_json::Map::new();
        for nic in &self.nics {
            let sn = &self.subnets[nic.subnet];
            let mut m = json!({
                "device-number": nic.device.to_string(),
                "interface-id": nic.eni,
                "mac": nic.mac,
            });
            if !nic.addrs.is_empty() {
                m["local-ipv4s"] = json!(lines(&nic.addrs));
                m["subnet-ipv4-cidr-block"] = json!(sn.net.to_string());
            }
            if let Some(p) = nic.prefix {
                m["ipv4-prefix"] = json!(p.to_string());
            }
            if let Some(net6) = sn.net6 {
                m["ipv6s"] = json!(lines(&nic.addrs6));
                m["subnet-ipv6-cidr-blocks"] = json!(net6.to_string());
            }
            if let Some(p) = nic.prefix6 {
                m["ipv6-prefix"] = json!(p.to_string());
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
            let sn = &self.subnets[n.subnet];
            let _ = write!(s, "\n  {} {} device-number {}", n.iface, n.mac, n.device);
            if !n.addrs.is_empty() {
                let _ = write!(s, " subnet {} local-ipv4s {:?}", sn.net, n.addrs);
            }
            if let Some(p) = n.prefix {
                let _ = write!(s, " ipv4-prefix {p}");
            }
            if let Some(net6) = sn.net6 {
                let _ = write!(s, " subnet {net6} ipv6s {:?}", n.addrs6);
            }
            if let Some(p) = n.prefix6 {
                let _ = write!(s, " ipv6-prefix {p}");
            }
        }
        s
    }

    fn nic(&self, iface: &str) -> Option<&Nic> {
        self.nics.iter().find(|n| n.iface == iface)
    }

    fn has_ipv6(&self) -> bool {
        self.nics.iter().any(|n| !n.addrs6.is_empty())
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
    for s in inst.subnets.iter().filter(|s| s.v4) {
        let _ = writeln!(
            conf,
            "dhcp-range={},static,{},2m",
            s.net.network(),
            s.net.netmask()
        );
    }
    // DHCPv6 (fixed addresses only) and router advertisements with the M flag, as
    // a VPC's router sends them: the default router is the router's link-local
    // address; the address comes from DHCPv6.
    if inst.has_ipv6() {
        conf.push_str("enable-ra\n");
    }
    for net6 in inst.subnets.iter().filter_map(|s| s.net6) {
        let _ = writeln!(conf, "dhcp-range={},static,64,2m", net6.network());
    }
    for n in &inst.nics {
        let mut host = n.mac.clone();
        if let Some(a) = n.addrs.first() {
            let _ = write!(host, ",{a}");
        }
        if let Some(a) = n.addrs6.first() {
            let _ = write!(host, ",[{a}]");
        }
        let _ = writeln!(conf, "dhcp-host={host}");
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
/// `configured` again after the package's `networkctl reload`, every IPv6 ENI
/// (`IFACES6`) holds its DHCPv6 address and RA default route, and the refresh
/// has run where it is needed (`RULES6`; `spr-late6`, `spr-refresh.status`).
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
configured() {
    n=0
    while [ $n -lt 300 ]; do
        ok=1
        for i in $IFACES; do
            st=$(networkctl status --no-pager "$i" 2>&1)
            case "$st" in *"Network File: /run/systemd/network/70-$i.network"*) ;; *) ok=0 ;; esac
            case "$st" in *"State: routable (configured)"*) ;; *) ok=0 ;; esac
        done
        [ $ok = 1 ] && return
        sleep 0.1
        n=$((n + 1))
    done
}
configured
# A link's IPv6 comes on its own time: networkd may call it configured on its
# DHCPv4 lease alone, before its RA and DHCPv6 are through. Wait for both on every
# IPv6 ENI (the DHCPv6 address, the RA's default route), as leasehook's side
# waits for its DHCPv6 lease: the two steady states are what is compared.
n=0
while [ $n -lt 300 ]; do
    ok=1
    for i in $IFACES6; do
        ip -6 address show dev "$i" scope global | grep -q inet6 || ok=0
        [ -n "$(ip -6 route show default dev "$i")" ] || ok=0
    done
    [ $ok = 1 ] && break
    sleep 0.1
    n=$((n + 1))
done
# The package's refresh (refresh-policy-routes@IF.timer: `start` without
# EC2_IF_INITIAL_SETUP, then `cleanup`, 30 s after the first and every 60 s) on
# the secondary IPv6 ENIs whose IPv6 rules the first `start` left out: it writes
# them only if the ENI holds a global IPv6 address at that moment
# (`subnet_supports_ipv6`), and networkd may call a link configured on its
# DHCPv4 lease alone. On every other ENI a refresh rewrites the same files and
# changes nothing (`_install_and_reload`), so it is not run there.
late=
for i in $RULES6; do
    [ -e "/run/systemd/network/70-$i.network.d/ec2net_policy_6.conf" ] || late="$late $i"
done
echo "$late" > "$WORLD/spr-late6"
if [ -n "$late" ]; then
    pids=
    for i in $late; do
        (
            LIBDIR_OVERRIDE="$ORACLE/usr/share/amazon-ec2-net-utils" \
                bash -x "$ORACLE/usr/bin/setup-policy-routes" "$i" start >> "$WORLD/spr-$i.log" 2>&1
            s=$?
            LIBDIR_OVERRIDE="$ORACLE/usr/share/amazon-ec2-net-utils" \
                bash -x "$ORACLE/usr/bin/setup-policy-routes" "$i" cleanup >> "$WORLD/spr-$i.log" 2>&1
            echo "$i $s $?" >> "$WORLD/spr-refresh.status"
        ) &
        pids="$pids $!"
    done
    for p in $pids; do wait "$p"; done
    configured
fi
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
        side.router.sysctl(key, "0");
    }
    // A router: its neighbour advertisements carry the router flag, which a host
    // needs to keep it as its default router.
    side.router.sysctl("net.ipv6.conf.all.forwarding", "1");
    side.router.sysctl("net.ipv4.conf.all.rp_filter", "1");
    for (k, nic) in inst.nics.iter().enumerate() {
        let gw = format!("gw{k}");
        let sn = &inst.subnets[nic.subnet];
        side.router.veth_to(&gw, &side.inst, &nic.iface, &nic.mac);
        // A fixed MAC, so the port's link-local address, the IPv6 default router,
        // is the same on both sides.
        side.router.ip(&[
            "link",
            "set",
            &gw,
            "address",
            &format!("02:ee:00:00:00:{k:02x}"),
        ]);
        // leasehook's side as its docs tell the operator (migrating.md, networkd.md):
        // the primary's default route first in the main table. IPv4's is the first
        // DHCP client's; IPv6's come from the kernel's RA handling, one per NIC
        // with the same metric 1024 unless told, and the kernel may then send the
        // primary's IPv6 traffic (no rules) out of a secondary ENI, whose source
        // check drops it. So each NIC's RA default route gets ec2-net-utils'
        // metric, 512 + 10·device, as networkd gets it on the other side.
        if kind == Kind::Leasehook {
            side.inst.sysctl(
                &format!("net.ipv6.conf.{}.ra_defrtr_metric", nic.iface),
                &(METRIC_BASE + 10 * nic.device).to_string(),
            );
        }
        // The same gateway address on every port of a shared subnet; which port
        // owns which address is the router's /32 routes, as the VPC knows which ENI
        // holds which address.
        if sn.v4 {
            side.router.ip(&[
                "address",
                "add",
                &format!("{}/{}", sn.gateway(), sn.net.prefix_len()),
                "dev",
                &gw,
                "noprefixroute",
            ]);
        }
        if let Some(router6) = sn.host6(1) {
            side.router.ip(&[
                "-6",
                "address",
                "add",
                &format!("{router6}/64"),
                "dev",
                &gw,
                "noprefixroute",
                "nodad",
            ]);
        }
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
        for a in &nic.addrs6 {
            side.router
                .ip(&["-6", "route", "add", &format!("{a}/128"), "dev", &gw]);
        }
        if let Some(p) = nic.prefix6 {
            side.router
                .ip(&["-6", "route", "add", &p.to_string(), "dev", &gw]);
        }
    }
    if inst.has_ipv6() {
        ipv6_source_check(&side.router, inst);
    }
    side.router
        .ip(&["address", "add", "169.254.169.254/32", "dev", "lo"]);
    side.router
        .ip(&["address", "add", "198.51.100.10/32", "dev", "lo"]);
    side.router
        .ip(&["-6", "address", "add", &format!("{ECHO6}/128"), "dev", "lo"]);

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
    let v4 = inst.subnets.iter().filter(|s| s.v4).count();
    let v6 = inst.subnets.iter().filter(|s| s.net6.is_some()).count();
    assert!(
        wait_until(Duration::from_secs(30), || std::fs::read_to_string(&log)
            .is_ok_and(|l| l.matches("DHCP, static leases only on").count()
                >= v4
                && l.matches("DHCPv6, static leases only on").count() >= v6)),
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
    let mut echo6 = side.router.command("/usr/bin/python3");
    echo6.args(["-c", ECHO6_SERVER]);
    side.children.push(start_ready(echo6, "IPv6 echo host"));
    let mut sink = side.router.command("/usr/bin/python3");
    sink.args(["-c", SINK_SERVER])
        .arg(side.dir.0.join("sink.log"));
    side.children.push(start_ready(sink, "UDP sink"));

    match kind {
        Kind::Oracle => start_oracle(&mut side, inst),
        Kind::Leasehook => start_leasehook(&mut side, inst),
    }
    side
}

/// The ENI source check for IPv6, where `rp_filter` does not reach (it is
/// IPv4's): a packet that comes in on a port from a global address that is not
/// that port's ENI's (`ipv6s`, `ipv6-prefix`) is dropped, as the VPC drops a
/// packet an ENI sends from another ENI's address. Policy rules, so that the
/// test needs iproute2 only (`scripts/test.sh` installs neither nftables nor
/// ip6tables): per port, its own sources (and
/// link-local and `::`, for neighbour discovery and DHCPv6) go on to the routing
/// tables, everything else hits a blackhole; the `local` table moves behind them,
/// so packets to the router's own addresses (the echo host) are checked too.
fn ipv6_source_check(router: &Netns, inst: &Instance) {
    const CHECKED: &str = "1000";
    router.ip(&["-6", "rule", "add", "priority", CHECKED, "lookup", "local"]);
    router.ip(&["-6", "rule", "del", "priority", "0", "lookup", "local"]);
    for (k, nic) in inst.nics.iter().enumerate() {
        let gw = format!("gw{k}");
        let own = nic
            .addrs6
            .iter()
            .map(|a| format!("{a}/128"))
            .chain(nic.prefix6.map(|p| p.to_string()))
            .chain(["fe80::/10".to_owned(), "::/128".to_owned()]);
        for from in own {
            router.ip(&[
                "-6", "rule", "add", "priority", "100", "iif", &gw, "from", &from, "goto", CHECKED,
            ]);
        }
        router.ip(&[
            "-6",
            "rule",
            "add",
            "priority",
            "200",
            "iif",
            &gw,
            "blackhole",
        ]);
    }
}

fn start_oracle(side: &mut Side, inst: &Instance) {
    let (bus, sock) = start_bus(&side.dir, "bus");
    side.children.push(bus);
    let ifaces: Vec<&str> = inst.nics.iter().map(|n| n.iface.as_str()).collect();
    let ifaces6: Vec<&str> = inst
        .nics
        .iter()
        .filter(|n| !n.addrs6.is_empty())
        .map(|n| n.iface.as_str())
        .collect();
    // The ENIs ec2-net-utils writes IPv6 rules for: the secondaries with IPv6.
    let rules6: Vec<&str> = inst.nics[1..]
        .iter()
        .filter(|n| !n.addrs6.is_empty())
        .map(|n| n.iface.as_str())
        .collect();
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
        .arg(format!("IFACES6={}", ifaces6.join(" ")))
        .arg(format!("RULES6={}", rules6.join(" ")))
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
    let spawn = |side: &mut Side, i: &str, v6: bool| {
        let tag = if v6 { format!("{i}-6") } else { i.to_owned() };
        let log = std::fs::File::create(side.dir.0.join(format!("dhclient-{tag}.log"))).unwrap();
        let mut cmd = side.inst.command("dhclient");
        cmd.args(["-d", "-v", if v6 { "-6" } else { "-4" }]);
        for (k, v) in &env {
            cmd.arg("-e").arg(format!("{k}={v}"));
        }
        cmd.arg("-lf")
            .arg(side.dir.0.join(format!("dhclient-{tag}.leases")))
            .arg("-pf")
            .arg(side.dir.0.join(format!("dhclient-{tag}.pid")))
            .arg(i)
            .stdout(Stdio::null())
            .stderr(log);
        side.children.push(
            cmd.spawn()
                .unwrap_or_else(|e| panic!("failed to start dhclient: {e}")),
        );
    };
    // The primary first: the main table's default route is the first client's
    // (dhclient-script adds one per interface, and later ones find it taken), and
    // on EC2 it is the primary's. An IPv6-only ENI runs no DHCPv4 client.
    for nic in inst.nics.iter().filter(|n| !n.addrs.is_empty()) {
        if nic.iface != inst.nics[0].iface {
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
        spawn(side, &nic.iface, false);
    }
    // DHCPv6 once the kernel has the link's router from an advertisement: the
    // DHCPv6 lease names no router, so the hook's plan takes the one the kernel
    // learned (`ip -6 route show default dev IF`), and on a VPC the RA that
    // answers the link's router solicitation comes before DHCPv6's four-message
    // exchange. (Were it later, the table's default route would wait for
    // `leasehook refresh`; this test does not run it.)
    for nic in inst.nics.iter().filter(|n| !n.addrs6.is_empty()) {
        let i = &nic.iface;
        assert!(
            wait_until(Duration::from_secs(30), || !side
                .inst
                .ip(&["-6", "route", "show", "default", "dev", i])
                .trim()
                .is_empty()),
            "{i} learned no IPv6 router from the router advertisements"
        );
        spawn(side, i, true);
    }
}

impl Side {
    fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.0.join(name)).unwrap_or_default()
    }

    /// The entries the sink received (what crossed the router's source check).
    fn sunk(&self) -> BTreeSet<String> {
        self.file("sink.log").lines().map(str::to_owned).collect()
    }

    /// Everything a failure report needs from this side.
    fn logs(&self, inst: &Instance) -> String {
        let mut s = format!(
            "--- {} logs in {}\n",
            self.kind.name(),
            self.dir.0.display()
        );
        let names: Vec<String> = match self.kind {
            Kind::Oracle => [
                "spr.status",
                "spr-refresh.status",
                "spr.done",
                "networkd.log",
            ]
            .into_iter()
            .map(str::to_owned)
            .chain(inst.nics.iter().map(|n| format!("spr-{}.log", n.iface)))
            .collect(),
            Kind::Leasehook => inst
                .nics
                .iter()
                .filter(|n| !n.addrs.is_empty())
                .map(|n| format!("dhclient-{}.log", n.iface))
                .chain(
                    inst.nics
                        .iter()
                        .filter(|n| !n.addrs6.is_empty())
                        .map(|n| format!("dhclient-{}-6.log", n.iface)),
                )
                .chain(["dnsmasq.log".to_owned()])
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
            // Every NIC recorded with each family it has a lease of.
            Kind::Leasehook => wait_until(Duration::from_secs(60), || {
                inst.nics.iter().all(|n| {
                    let state: Value = std::fs::read(
                        self.root
                            .join("run/leasehook/iface")
                            .join(format!("{}.json", n.iface)),
                    )
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok())
                    .unwrap_or_default();
                    let has = |f: &str| state["families"].get(f).is_some();
                    (n.addrs.is_empty() || has("ipv4"))
                        && (n.addrs6.is_empty() || has("ipv6"))
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
            let want: Vec<String> = {
                let mut w: Vec<String> = inst
                    .nics
                    .iter()
                    .map(|n| format!("{} 0 0", n.iface))
                    .collect();
                w.sort();
                w
            };
            let late = self.file("spr-late6");
            let want_refresh: Vec<String> = {
                let mut w: Vec<String> = late
                    .split_whitespace()
                    .map(|i| format!("{i} 0 0"))
                    .collect();
                w.sort();
                w
            };
            for (run, want) in [("spr.status", want), ("spr-refresh.status", want_refresh)] {
                let status = self.file(run);
                let mut lines: Vec<&str> = status.lines().collect();
                lines.sort_unstable();
                if lines != want {
                    return Err(format!(
                        "setup-policy-routes did not succeed on every NIC ({run}): {lines:?}"
                    ));
                }
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

    /// For every address: the address the echo host (IPv4's or IPv6's, by the
    /// address's family) saw, or the error. An `ADDR@IF` entry sends from ADDR
    /// bound to interface IF (the negative control; `IP_FREEBIND`, since IPv6 binds
    /// a socket bound to IF only to IF's own addresses). Each entry is also sent as
    /// a UDP datagram to the sink ([`SINK_SERVER`], read with [`Side::sunk`]),
    /// which sees what crossed the source check whatever way a reply would take.
    fn echo(&self, targets: &[String]) -> BTreeMap<String, String> {
        const PROBE: &str = "\
import socket, sys
for t in sys.argv[1:]:
    a, _, dev = t.partition('@')
    v6 = ':' in a
    fam = socket.AF_INET6 if v6 else socket.AF_INET
    try:
        u = socket.socket(fam, socket.SOCK_DGRAM)
        if dev:
            u.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, dev.encode())
            u.setsockopt(socket.SOL_IP, 15, 1)  # IP_FREEBIND
        u.bind((a, 0))
        for _ in range(3):
            u.sendto(t.encode(), ('2001:db8:ec2::10' if v6 else '198.51.100.10', 81))
    except Exception:
        pass
    try:
        s = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET)
        if dev:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, dev.encode())
            s.setsockopt(socket.SOL_IP, 15, 1)  # IP_FREEBIND
        s.settimeout(2 if not dev else 1)
        s.bind((a, 0))
        s.connect(('2001:db8:ec2::10' if v6 else '198.51.100.10', 80))
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
    /// An IPv6 route (`ip -6`).
    v6: bool,
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
                    v6: fam == "-6",
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
        .filter(|r| r.table == primary_table && !r.v6)
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
        for r in routes.iter().filter(is_policy).filter(|r| !r.v6) {
            if side == Kind::Oracle && r.table == primary_table {
                continue;
            }
            let nic = inst.nic(&r.dev);
            let leased = nic.and_then(|n| n.addrs.first()).map(ToString::to_string);
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
    for nic in inst.nics.iter().filter(|n| !n.addrs.is_empty()) {
        let want = u64::from(METRIC_BASE + 10 * nic.device);
        let ok = ec2.routes.iter().any(|r| {
            !r.v6
                && r.table == "main"
                && r.dst == "default"
                && r.dev == nic.iface
                && r.metric == Some(want)
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
        for a in k.addrs.iter().filter(|a| !a.cidr.contains(':')) {
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
            .filter(|a| !a.cidr.contains(':'))
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

    errs.extend(compare_v6(inst, ec2, lh));

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

/// The link-local address of the router's port `k` (its fixed MAC
/// `02:ee:00:00:00:k`, EUI-64): the IPv6 default router of the ENI behind it.
fn router_ll(k: usize) -> String {
    format!("fe80::ee:ff:fe00:{k:x}")
}

/// The IPv6 half of [`compare`]. What amazon-ec2-net-utils 2.4.1's `lib.sh` does
/// for IPv6, and so what is expected of it: per ENI a table holding `[Route]
/// Gateway=_ipv6ra` (the RA's router, which networkd installs with the
/// `[IPv6AcceptRA] RouteMetric` 512 + 10·device, `proto ra`) and a `[Route]
/// Destination=` per `subnet-ipv6-cidr-blocks` entry (`proto static`, the
/// kernel's IPv6 default metric 1024), the primary's table too; `from` rules
/// (`ec2net_policy_6.conf`) for every `ipv6s` entry and `ipv6-prefix` on the
/// secondaries; and no address but the one DHCPv6 leases (its aliases are
/// `local-ipv4s` only), which networkd adds as a /128 `noprefixroute`.
/// leasehook: the same table routes and rules (proto 176, metric 1024 both), no
/// table for the primary, every `ipv6s` entry as a /128 (dhclient-script adds
/// the leased one).
fn compare_v6(inst: &Instance, ec2: &Kernel, lh: &Kernel) -> Vec<String> {
    /// A policy route without what the known differences are about.
    type Key = (String, String, Option<String>, String);
    let mut errs = Vec::new();
    let primary_table = table_of(&inst.nics[0]);
    let port = |dev: &str| inst.nics.iter().position(|n| n.iface == dev);
    let policy = |r: &&Route| r.v6 && r.table != "main" && r.table != "default";

    // Known difference 1, IPv6: ec2-net-utils fills the primary's table with
    // the primary's IPv6 routes too.
    let primary = &inst.nics[0];
    let got: BTreeSet<Key> = ec2
        .routes
        .iter()
        .filter(policy)
        .filter(|r| r.table == primary_table)
        .map(|r| {
            (
                r.table.clone(),
                r.dst.clone(),
                r.gateway.clone(),
                r.dev.clone(),
            )
        })
        .collect();
    let want: BTreeSet<Key> = inst.subnets[primary.subnet]
        .net6
        .filter(|_| !primary.addrs6.is_empty())
        .map(|net6| {
            [
                (
                    primary_table.clone(),
                    "default".to_owned(),
                    Some(router_ll(0)),
                    primary.iface.clone(),
                ),
                (
                    primary_table.clone(),
                    net6.to_string(),
                    None,
                    primary.iface.clone(),
                ),
            ]
        })
        .into_iter()
        .flatten()
        .collect();
    if got != want {
        errs.push(format!(
            "known difference 1 changed (IPv6): ec2-net-utils' table {primary_table} holds {got:?}"
        ));
    }

    // Known differences 2 and 3, IPv6: the table's default route is networkd's
    // `proto ra` with metric 512 + 10·device there, 176 with the kernel's
    // default metric 1024 here; the subnet route has metric 1024 on both sides
    // and no `src` on either (leasehook gives only IPv4's subnet route a source).
    let norm = |side: Kind, routes: &BTreeSet<Route>, errs: &mut Vec<String>| -> BTreeSet<Key> {
        let mut out = BTreeSet::new();
        for r in routes.iter().filter(policy) {
            if side == Kind::Oracle && r.table == primary_table {
                continue;
            }
            let device = inst.nic(&r.dev).map_or(u32::MAX, |n| n.device);
            let default = r.dst == "default";
            let (want_metric, want_proto) = match (side, default) {
                (Kind::Oracle, true) => (u64::from(METRIC_BASE + 10 * device), "ra"),
                (Kind::Oracle, false) => (1024, "static"),
                (Kind::Leasehook, _) => (1024, "176"),
            };
            let want_gw = default.then(|| port(&r.dev).map(router_ll)).flatten();
            if r.prefsrc.is_some()
                || r.metric != Some(want_metric)
                || r.proto != want_proto
                || r.gateway != want_gw
            {
                errs.push(format!(
                    "{} IPv6 route outside the known differences (want gateway {want_gw:?} \
                     metric {want_metric} proto {want_proto}): {r:?}",
                    side.name()
                ));
            }
            out.insert((
                r.table.clone(),
                r.dst.clone(),
                r.gateway.clone(),
                r.dev.clone(),
            ));
        }
        out
    };
    let et = norm(Kind::Oracle, &ec2.routes, &mut errs);
    let lt = norm(Kind::Leasehook, &lh.routes, &mut errs);
    for r in et.difference(&lt) {
        errs.push(format!("IPv6 policy route only in ec2-net-utils: {r:?}"));
    }
    for r in lt.difference(&et) {
        errs.push(format!("IPv6 policy route only in leasehook: {r:?}"));
    }
    // And what the metadata says, whatever the two agree on: each secondary
    // IPv6 ENI's table routes its subnet and defaults to its port's router.
    for nic in inst.nics[1..].iter().filter(|n| !n.addrs6.is_empty()) {
        let t = table_of(nic);
        let net6 = inst.subnets[nic.subnet].net6.map(|n| n.to_string());
        let k = port(&nic.iface).unwrap_or(usize::MAX);
        for (dst, gw) in [
            ("default".to_owned(), Some(router_ll(k))),
            (net6.unwrap_or_default(), None),
        ] {
            if !lt.contains(&(t.clone(), dst.clone(), gw.clone(), nic.iface.clone())) {
                errs.push(format!(
                    "leasehook's table {t} lacks {dst} via {gw:?} dev {}",
                    nic.iface
                ));
            }
        }
    }

    // IPv6 main table: networkd's RA default routes carry the NIC's metric
    // there; here the kernel's do, with the metric the operator gives them
    // (`ra_defrtr_metric`, see `build`). leasehook puts nothing there.
    for (side, k) in [(Kind::Oracle, ec2), (Kind::Leasehook, lh)] {
        for nic in inst.nics.iter().filter(|n| !n.addrs6.is_empty()) {
            let want = u64::from(METRIC_BASE + 10 * nic.device);
            let gw = port(&nic.iface).map(router_ll);
            if !k.routes.iter().any(|r| {
                r.v6 && r.table == "main"
                    && r.dst == "default"
                    && r.dev == nic.iface
                    && r.gateway == gw
                    && r.metric == Some(want)
                    && r.proto == "ra"
            }) {
                errs.push(format!(
                    "{}: no main-table RA default via {gw:?} dev {} metric {want}",
                    side.name(),
                    nic.iface
                ));
            }
        }
    }

    // Known differences 6 and 7, addresses: ec2-net-utils holds the DHCPv6
    // address alone, /128 `noprefixroute` (networkd's); leasehook every `ipv6s`
    // entry as /128 without the flag (dhclient-script's leased one, its own
    // secondaries), whose host route the kernel puts in the main table.
    for (side, k) in [(Kind::Oracle, ec2), (Kind::Leasehook, lh)] {
        let got: BTreeSet<(String, String, bool)> = k
            .addrs
            .iter()
            .filter(|a| a.cidr.contains(':'))
            .map(|a| (a.dev.clone(), a.cidr.clone(), a.noprefixroute))
            .collect();
        let want: BTreeSet<(String, String, bool)> = inst
            .nics
            .iter()
            .flat_map(|n| {
                let held = if side == Kind::Oracle {
                    &n.addrs6[..n.addrs6.len().min(1)]
                } else {
                    &n.addrs6[..]
                };
                held.iter()
                    .map(|a| (n.iface.clone(), format!("{a}/128"), side == Kind::Oracle))
            })
            .collect();
        if got != want {
            errs.push(format!(
                "{} IPv6 addresses outside the known differences: {got:?}, want {want:?}",
                side.name()
            ));
        }
    }
    errs
}

// ---------------------------------------------------------------------------
// The test

struct Outcome {
    errors: Vec<String>,
    echoed: usize,
    /// Secondary IPv6 ENIs whose rules ec2-net-utils' first `start` left out.
    late6: usize,
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
        .chain(
            inst.nics
                .iter()
                .flat_map(|n| n.addrs6.iter().map(ToString::to_string)),
        )
        .collect();
    let mut controls = Vec::new();
    if let Some(n) = inst.nics[1..].iter().find(|n| !n.addrs.is_empty()) {
        controls.push(format!("{}@{}", n.addrs[0], inst.nics[0].iface));
    }
    let v6: Vec<&Nic> = inst.nics.iter().filter(|n| !n.addrs6.is_empty()).collect();
    if let [a, b, ..] = v6[..] {
        controls.push(format!("{}@{}", b.addrs6[0], a.iface));
    }
    targets.extend(controls.iter().cloned());
    let mut echoed = 0;
    let answers: Vec<BTreeMap<String, String>> = std::thread::scope(|scope| {
        let handles = [ec2, lh].map(|side| scope.spawn(|| side.echo(&targets)));
        handles.map(|h| h.join().unwrap()).into()
    });
    // Known difference 6: ec2-net-utils does not add the secondary `ipv6s`, so
    // nothing can be sent from them there.
    let unheld: BTreeSet<String> = inst
        .nics
        .iter()
        .flat_map(|n| n.addrs6.iter().skip(1).map(ToString::to_string))
        .collect();
    for (side, got) in [ec2, lh].into_iter().zip(&answers) {
        // What got an answer has reached the sink too (it proves the sink
        // listens); a control must not have.
        let answered: Vec<&String> = targets.iter().filter(|t| got.get(*t) == Some(*t)).collect();
        wait_until(Duration::from_secs(2), || {
            let sunk = side.sunk();
            answered.iter().all(|t| sunk.contains(*t))
        });
        let sunk = side.sunk();
        for t in &answered {
            if !sunk.contains(*t) {
                errors.push(format!("{}: the sink did not get {t}", side.kind.name()));
            }
        }
        for t in controls.iter().filter(|t| sunk.contains(*t)) {
            errors.push(format!(
                "{}: the source check let {t} through (the sink got it)",
                side.kind.name()
            ));
        }
        for t in &targets {
            let r = got.get(t).map_or("no answer", String::as_str);
            if side.kind == Kind::Oracle && unheld.contains(t) {
                if !r.starts_with("failed:") {
                    errors.push(format!(
                        "ec2-net-utils sent from {t}, which it does not add ({r})"
                    ));
                }
            } else if controls.contains(t) {
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
    let late6 = ec2.file("spr-late6").split_whitespace().count();
    Outcome {
        errors,
        echoed,
        late6,
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
    // IPv6 from a stream of its own: the IPv4 shapes are those of the seed alone.
    let mut rng6 = Rng::new(seed ^ 0x6666_6666);
    let instances: Vec<Instance> = (0..count)
        .map(|i| {
            let mut inst = generate(&mut rng, i);
            add_ipv6(&mut rng6, &mut inst);
            inst
        })
        .collect();
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
    let with = |f: &dyn Fn(&Nic) -> bool| instances.iter().filter(|i| i.nics.iter().any(f)).count();
    let dual = with(&|n| !n.addrs.is_empty() && !n.addrs6.is_empty());
    let v6only = with(&|n| n.addrs.is_empty());
    let prefixes6 = with(&|n| n.prefix6.is_some());
    let secondaries6 = with(&|n| n.addrs6.len() > 1);
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
    let late6: usize = results.values().map(|o| o.late6).sum();
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
         {secondaries} with secondary IPs; IPv6: {dual} with dual-stack ENIs, {v6only} with \
         IPv6-only ENIs, {prefixes6} with ipv6-prefix, {secondaries6} with secondary ipv6s), {} \
         with unexplained differences, {echoed} addresses echoed through the source check on \
         both sides, {late6} IPv6 ENIs whose rules ec2-net-utils' first start left to its \
         refresh, {:.1} s",
        results.len(),
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(results.len(), count, "not every instance ran");
    assert!(count < 20 || (shared > 0 && gaps > 0 && prefixes > 0 && secondaries > 0));
    assert!(count < 20 || (dual > 0 && v6only > 0 && prefixes6 > 0 && secondaries6 > 0));
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

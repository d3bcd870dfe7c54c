// SPDX-License-Identifier: Apache-2.0
//! A throwaway two-namespace world for end-to-end tests and the demo: a VPC
//! "router" namespace and an "instance" namespace joined by two veth pairs.
//!
//! * router: `gw0` 10.98.0.1/24 and `gw1` 10.98.1.1/24 (+ `fd00:98:1::1/64`), dnsmasq
//!   serving both subnets with fixed leases per MAC (and DHCPv6 on `gw1`) and the
//!   DHCP options of the cloud the test plays ([`CloudDhcp`]: EC2's by default;
//!   Oracle's and `OpenStack`'s static network serve `eth0` only; Alibaba's router
//!   `.253` is added on both links), the IMDS
//!   emulator on 169.254.169.254:80, an echo host on 198.51.100.10:80 that answers
//!   with the caller's address, and `rp_filter=1` (an ENI's source/destination
//!   check: a packet whose source belongs to the other subnet is dropped).
//!   With [`WorldOptions::ipv6`] ([`Ipv6World`], issue 34) the router also
//!   speaks IPv6 to both NICs: `gw0` `fd00:98::1/64`, both links' only
//!   link-local address `fe80::1` (the gateway the clouds publish), router
//!   advertisements from dnsmasq, DHCPv6 for both MACs, an IPv6 echo host on
//!   [`ECHO6`] and an IPv6 source check (rules: a packet from the other link's
//!   subnet is dropped).
//! * instance: `eth0` (02:00:00:00:00:01, device-number 0, 10.98.0.10) and `eth1`
//!   (02:00:00:00:00:02, device-number 1, 10.98.1.20 + 10.98.1.21, `fd00:98:1::20`),
//!   where real `dhclient` runs with leasehook's exit hook. The hook is placed in
//!   `/etc/netns/<instance>/dhcp/`, which `ip netns exec` mounts over `/etc/dhcp`
//!   for that namespace only; the machine's own `/etc/dhcp` is never touched.
//!   With [`WorldOptions::installed`] (the Debian package test) there is no such
//!   folder: dhclient sees the machine's `/etc/dhcp` and the hook and shim the
//!   package installed there, with the real root `/`. Either way
//!   `/etc/netns/<instance>/resolv.conf` takes the place of `/etc/resolv.conf`, so
//!   dhclient-script never writes the machine's.
//!
//! Everything (processes, namespaces, `/etc/netns/<instance>`) goes when the
//! [`World`] is dropped.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client::Client;
use crate::netns::{Netns, TempDir, run, sibling_bin};

/// The instance's MACs.
pub const MAC0: &str = "02:00:00:00:00:01";
/// The secondary NIC's MAC.
pub const MAC1: &str = "02:00:00:00:00:02";

/// eth1's DHCPv4 lease (10.98.1.20/24, router 10.98.1.1) as dhclient-script
/// passes it to its hooks for `reason`: `interface` and the `new_*` variables,
/// and for a RENEW the `old_*` ones of the same lease.
pub fn eth1_lease(reason: &str) -> Vec<(&str, &str)> {
    let mut env = vec![
        ("reason", reason),
        ("interface", "eth1"),
        ("new_ip_address", "10.98.1.20"),
        ("new_subnet_mask", "255.255.255.0"),
        ("new_routers", "10.98.1.1"),
        ("new_network_number", "10.98.1.0"),
        ("new_broadcast_address", "10.98.1.255"),
    ];
    if reason == "RENEW" {
        env.extend([
            ("old_ip_address", "10.98.1.20"),
            ("old_subnet_mask", "255.255.255.0"),
            ("old_routers", "10.98.1.1"),
        ]);
    }
    env
}

/// The metadata tree of the world's instance (served by the emulator).
pub fn default_tree() -> Value {
    json!({"latest": {"api": {}, "meta-data": {
        "instance-id": "i-0123456789abcdef0",
        "local-ipv4": "10.98.0.10",
        "mac": MAC0,
        "placement": {"availability-zone": "us-east-1a", "region": "us-east-1"},
        "network": {"interfaces": {"macs": {
            MAC0: {"device-number": "0", "interface-id": "eni-0000000000000001",
                   "local-ipv4s": "10.98.0.10", "subnet-ipv4-cidr-block": "10.98.0.0/24", "mac": MAC0},
            MAC1: {"device-number": "1", "interface-id": "eni-0000000000000002",
                   "local-ipv4s": "10.98.1.20\n10.98.1.21", "subnet-ipv4-cidr-block": "10.98.1.0/24",
                   "ipv6s": "fd00:98:1::20", "subnet-ipv6-cidr-blocks": "fd00:98:1::/64", "mac": MAC1}
        }}}
    }}})
}

/// eth0's DHCPv6 address in the IPv6 worlds ([`Ipv6World`]), in `fd00:98::/64`.
pub const ETH0_V6: &str = "fd00:98::10";
/// eth1's DHCPv6 address, in `fd00:98:1::/64` (the default world's too).
pub const ETH1_V6: &str = "fd00:98:1::20";
/// eth1's secondary IPv6 address in the IPv6 worlds: the metadata lists it,
/// no DHCP leases it (the plan adds it where the cloud's OS must).
pub const ETH1_V6_SECONDARY: &str = "fd00:98:1::21";
/// The IPv6 echo host beyond the router (documentation range, RFC 3849;
/// the address gate lets it pass: `cloud_rows` checks).
pub const ECHO6: &str = "2001:db8:100::10";
/// The link-local address of the router on both links in the IPv6 worlds:
/// the IPv6 gateway the clouds publish, and the source of its router
/// advertisements (the links have no other link-local address).
pub const ROUTER_V6_LINK_LOCAL: &str = "fe80::1";

/// EC2's dual-stack instance ([`Ipv6World`], issue 34's contract): the
/// default tree with `ipv6s` and `subnet-ipv6-cidr-blocks` on both ENIs,
/// eth1 listing its DHCPv6 address and the secondary [`ETH1_V6_SECONDARY`]
/// (newline-separated leaves, as IMDS writes lists). EC2 publishes no IPv6
/// gateway: the router is the one router advertisements name.
pub fn dual_stack_tree() -> Value {
    let mut tree = default_tree();
    let macs = &mut tree["latest"]["meta-data"]["network"]["interfaces"]["macs"];
    macs[MAC0]["ipv6s"] = json!(ETH0_V6);
    macs[MAC0]["subnet-ipv6-cidr-blocks"] = json!("fd00:98::/64");
    macs[MAC1]["ipv6s"] = json!(format!("{ETH1_V6}\n{ETH1_V6_SECONDARY}"));
    macs[MAC1]["subnet-ipv6-cidr-blocks"] = json!("fd00:98:1::/64");
    tree
}

/// EC2's instance whose eth1 is an IPv6-only ENI: [`dual_stack_tree`] with
/// eth1's `local-ipv4s` and `subnet-ipv4-cidr-block` gone (an ENI in an
/// IPv6-only subnet has `ipv6s` and no `local-ipv4s`, as cloud-init's EC2
/// tests carry it).
pub fn ipv6_only_tree() -> Value {
    let mut tree = dual_stack_tree();
    let eth1 = &mut tree["latest"]["meta-data"]["network"]["interfaces"]["macs"][MAC1];
    if let Some(o) = eth1.as_object_mut() {
        o.remove("local-ipv4s");
        o.remove("subnet-ipv4-cidr-block");
    }
    tree
}

/// The IPv6 of a world's instance (issue 34's shared contract): besides
/// today's DHCPv6 on `gw1`, `gw0` gets `fd00:98::1/64`, both router links the
/// link-local [`ROUTER_V6_LINK_LOCAL`] only, dnsmasq sends router
/// advertisements on both (managed: addresses only by DHCPv6, no SLAAC) and
/// leases each NIC its DHCPv6 address (fixed per MAC), the router's IPv6
/// rules drop a packet from the other link's subnet (the clouds' source
/// check: IPv6 has no `rp_filter`), an IPv6 echo host answers on [`ECHO6`],
/// and the instance's eth1 learns its router at a higher metric than eth0's
/// (as an OS gives a secondary NIC), so the main table's IPv6 default is
/// eth0's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6World {
    /// Whether eth1 has IPv4 too (its DHCPv4); false: an IPv6-only NIC,
    /// which no DHCPv4 serves.
    pub eth1_ipv4: bool,
    /// eth0's DHCPv6 address (canonical text, as `ip` shows it).
    pub eth0: String,
    /// eth1's DHCPv6 address.
    pub eth1: String,
    /// eth1's other IPv6 addresses, which the metadata lists and no DHCP leases.
    pub eth1_secondaries: Vec<String>,
}

impl Ipv6World {
    /// Both NICs dual-stack, with the contract's addresses ([`ETH0_V6`],
    /// [`ETH1_V6`], [`ETH1_V6_SECONDARY`]).
    pub fn dual_stack() -> Self {
        Self {
            eth1_ipv4: true,
            eth0: ETH0_V6.to_owned(),
            eth1: ETH1_V6.to_owned(),
            eth1_secondaries: vec![ETH1_V6_SECONDARY.to_owned()],
        }
    }

    /// [`Ipv6World::dual_stack`] with eth1 IPv6-only.
    pub fn ipv6_only() -> Self {
        Self {
            eth1_ipv4: false,
            ..Self::dual_stack()
        }
    }

    /// Every IPv6 address of eth1: the leased one, then the secondaries.
    pub fn eth1_all(&self) -> Vec<&str> {
        std::iter::once(self.eth1.as_str())
            .chain(self.eth1_secondaries.iter().map(String::as_str))
            .collect()
    }
}

/// The metric at which the instance's eth1 learns its IPv6 router in the IPv6
/// worlds (`ra_defrtr_metric`; eth0 keeps the kernel's 1024).
pub const ETH1_RA_METRIC: &str = "2048";

// ---- DHCP options per cloud (issue 31; docs/clouds.md "DHCP options per cloud") ----

/// Whose DHCP the world's dnsmasq plays: each NIC gets the options that cloud's
/// DHCP gives it, never more (the vendors' pages are cited in docs/clouds.md,
/// "DHCP options per cloud"). The world's subnets are 10.98.0.0/24 (`eth0`, the
/// primary) and 10.98.1.0/24 (`eth1`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CloudDhcp {
    /// EC2: every ENI a lease with its subnet's mask and router (the subnet's
    /// first host).
    #[default]
    Ec2,
    /// Google Cloud: every NIC a /32 with its router and option 121 routes: the
    /// gateway's /32 on the link, then the default route (nic0) or the subnet
    /// (every other NIC) through it.
    Gce,
    /// Azure: the primary its mask, router and option 121 (the default route,
    /// the platform's 168.63.129.16 and IMDS's 169.254.169.254, each via the
    /// subnet's gateway, as cloud-init's Azure support reads the lease:
    /// <https://github.com/canonical/cloud-init/pull/5146>); a secondary its
    /// address and mask and no router: "Azure does not assign a default gateway
    /// to additional (secondary) network interfaces"
    /// (<https://learn.microsoft.com/en-us/azure/virtual-machines/windows/multiple-nics#configure-guest-os-for-multiple-nics>).
    Azure,
    /// Alibaba ECS: every ENI its vSwitch's mask and router, the vSwitch's
    /// `.253`, which the router namespace then also holds.
    Aliyun,
    /// Oracle Cloud: the primary VNIC's lease (mask, the virtual router's
    /// address); a secondary VNIC gets no DHCP at all.
    Oracle,
    /// `OpenStack` (Neutron's DHCP agent): every port its subnet's mask and
    /// gateway; a subnet with host routes also option 121, the host routes and
    /// the default route through the gateway (the world's network1 routes
    /// 198.51.100.0/24 through 10.98.1.1).
    OpenStack,
    /// `OpenStack` with `eth1` on a subnet whose DHCP is off (Nova's `ipv4`
    /// network type): the primary's lease only.
    OpenStackStatic,
}

impl CloudDhcp {
    /// The router a NIC's lease names (`n` 0 or 1): the subnet's first host, on
    /// Alibaba the vSwitch's `.253`.
    pub fn router(self, n: u8) -> String {
        match self {
            Self::Aliyun => format!("10.98.{n}.253"),
            _ => format!("10.98.{n}.1"),
        }
    }

    /// Whether NIC `n`'s lease names a router (Azure's secondary NICs' do not).
    pub fn names_router(self, n: u8) -> bool {
        n == 0 || !matches!(self, Self::Azure)
    }

    /// Whether NIC `n` gets DHCP at all.
    pub fn serves(self, n: u8) -> bool {
        n == 0 || !matches!(self, Self::Oracle | Self::OpenStackStatic)
    }

    /// dnsmasq's lines for the options (tags `n0`, `n1`).
    fn dnsmasq_lines(self) -> Vec<String> {
        let mut lines: Vec<String> = [0u8, 1]
            .into_iter()
            .filter(|n| self.serves(*n) && self.names_router(*n))
            .map(|n| format!("dhcp-option=tag:n{n},option:router,{}", self.router(n)))
            .collect();
        match self {
            Self::Gce => lines.extend(
                [
                    "dhcp-option=tag:n0,option:netmask,255.255.255.255",
                    "dhcp-option=tag:n1,option:netmask,255.255.255.255",
                    "dhcp-option=tag:n0,121,10.98.0.1/32,0.0.0.0,0.0.0.0/0,10.98.0.1",
                    "dhcp-option=tag:n1,121,10.98.1.1/32,0.0.0.0,10.98.1.0/24,10.98.1.1",
                ]
                .map(str::to_owned),
            ),
            Self::OpenStack => lines.push(
                "dhcp-option=tag:n1,121,198.51.100.0/24,10.98.1.1,0.0.0.0/0,10.98.1.1".to_owned(),
            ),
            // An option without data is no option at all to dnsmasq (dnsmasq(8),
            // --dhcp-option): without it dnsmasq would name itself the router.
            Self::Azure => lines.extend(
                [
                    "dhcp-option=tag:n0,121,0.0.0.0/0,10.98.0.1,168.63.129.16/32,10.98.0.1,169.254.169.254/32,10.98.0.1",
                    "dhcp-option=tag:n1,option:router",
                ]
                .map(str::to_owned),
            ),
            Self::Ec2 | Self::Aliyun | Self::Oracle | Self::OpenStackStatic => {}
        }
        lines
    }
}

/// How to build a [`World`].
#[derive(Debug, Clone)]
pub struct WorldOptions {
    /// Whose DHCP options dnsmasq gives each NIC ([`CloudDhcp`]; EC2's by default).
    pub dhcp: CloudDhcp,
    /// The IMDS tree; `None` runs no IMDS at all (unreachable).
    pub tree: Option<Value>,
    /// The emulator's scenario (delays, windows, failures).
    pub scenario: Value,
    /// DHCPv4 renewal time T1 in seconds (dnsmasq's minimum lease is 2 min).
    pub t1: Option<u32>,
    /// Extra dnsmasq configuration lines (hostile options, ...).
    pub dnsmasq_extra: Vec<String>,
    /// `LEASEHOOK_IMDS_SYNC_BUDGET_S` for the hook.
    pub sync_budget_s: f64,
    /// `LEASEHOOK_IMDS_BUDGET_S` for the hook.
    pub budget_s: f64,
    /// Another cloud's metadata service in place of the IMDS emulator (whose
    /// `tree` is then ignored); `None`: the IMDS emulator.
    pub metadata: Option<MetadataService>,
    /// Extra environment for every hook (`LEASEHOOK_PROVIDER=gce`, ...).
    pub extra_hook_env: Vec<(String, String)>,
    /// Run the hook and shim the Debian package installed
    /// (`/etc/dhcp/dhclient-exit-hooks.d/zz-leasehook`,
    /// `/usr/libexec/leasehook/leasehook-dhclient`) with the real root `/`, instead
    /// of the workspace's hook (in `/etc/netns/<instance>/dhcp/`), the shim built
    /// beside the tests and a private root.
    pub installed: bool,
    /// The IPv6 world ([`Ipv6World`]); `None`: DHCPv6 on `gw1` only, no
    /// router advertisements, no IPv6 on `gw0` (the default).
    pub ipv6: Option<Ipv6World>,
}

impl Default for WorldOptions {
    fn default() -> Self {
        Self {
            dhcp: CloudDhcp::default(),
            tree: Some(default_tree()),
            scenario: json!({}),
            t1: None,
            dnsmasq_extra: Vec::new(),
            sync_budget_s: 3.0,
            budget_s: 30.0,
            metadata: None,
            extra_hook_env: Vec::new(),
            installed: false,
            ipv6: None,
        }
    }
}

/// The emulator binary, every cloud's (`leasehook-emulator --cloud ec2|gce|...`).
pub const EMULATOR: &str = "leasehook-emulator";

/// `@FILE`: a JSON argument of the emulator read from a file.
pub fn at_file(path: &Path) -> std::ffi::OsString {
    let mut arg = std::ffi::OsString::from("@");
    arg.push(path);
    arg
}

/// A metadata service the world runs in the router namespace in place of the IMDS
/// emulator: an emulator binary built beside the tests, its arguments (the world's
/// folder is appended as `--dir <dir>`), and the addresses it answers on, put on
/// the router's loopback (169.254.169.254 is always there).
#[derive(Debug, Clone)]
pub struct MetadataService {
    /// The cloud it is (`gce`, ...): `leasehook-emulator --cloud` (a binary
    /// built beside the tests, found with [`sibling_bin`]).
    pub cloud: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Addresses to add to the router's `lo` (`100.100.100.200/32`, ...).
    pub addresses: Vec<String>,
}

/// Starts `service` in the router namespace and waits for its ready line.
pub fn start_metadata(router: &Netns, dir: &Path, service: &MetadataService) -> Child {
    for a in &service.addresses {
        router.ip(&["address", "add", a, "dev", "lo"]);
    }
    let mut emu = router.command(sibling_bin(EMULATOR).to_str().unwrap_or_default());
    emu.args(["--cloud", &service.cloud])
        .args(&service.args)
        .arg("--dir")
        .arg(dir);
    start_ready(emu, &format!("{EMULATOR} --cloud {}", service.cloud))
}

/// The running world.
#[derive(Debug)]
pub struct World {
    /// The VPC side.
    pub router: Netns,
    /// The instance.
    pub inst: Netns,
    /// Files of this world (logs, leases, configuration).
    pub dir: TempDir,
    /// `LEASEHOOK_ROOT` of the hooks.
    pub root: PathBuf,
    pub(crate) etc: PathBuf,
    pub(crate) services: Vec<Child>,
    imds: Option<Child>,
    pub(crate) dhclients: BTreeMap<String, Child>,
    pub(crate) hook_env: Vec<(String, String)>,
    /// The IPv6 world it was built with ([`WorldOptions::ipv6`]).
    pub ipv6: Option<Ipv6World>,
}

/// Asserts what [`World::bind_primary_timed`] measured: the primary's BOUND
/// held dhclient less than 1 s (not waited out) and its metadata answered the
/// first round (no retry).
pub fn assert_primary_not_held(held: f64, eth0: &str) {
    assert!(
        held < 1.0,
        "eth0's BOUND held dhclient {held:.3} s:\n{eth0}"
    );
    assert!(
        !eth0.contains("eth0: round "),
        "the primary's event retried:\n{eth0}"
    );
}

/// Polls `f` every 20 ms until it holds or `timeout` passes; whether it held.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts the IMDS emulator on 169.254.169.254:80 in the router namespace.
pub fn start_imds(router: &Netns, dir: &Path, tree: &Value, scenario: &Value) -> Child {
    let tree_path = dir.join("imds-tree.json");
    let scenario_path = dir.join("imds-scenario.json");
    std::fs::write(&tree_path, tree.to_string()).unwrap_or_else(|e| panic!("{tree_path:?}: {e}"));
    std::fs::write(&scenario_path, scenario.to_string())
        .unwrap_or_else(|e| panic!("{scenario_path:?}: {e}"));
    let mut emu = router.command(sibling_bin(EMULATOR).to_str().unwrap_or_default());
    emu.args([
        "--cloud",
        "ec2",
        "--bind",
        "169.254.169.254:80",
        "--require-token",
    ])
    .arg("--tree")
    .arg(at_file(&tree_path))
    .arg("--scenario")
    .arg(at_file(&scenario_path))
    .arg("--log")
    .arg(dir.join("imds.log"));
    start_ready(emu, "leasehook-emulator --cloud ec2")
}

/// dnsmasq's configuration (a file, so hostile option values need no quoting).
fn dnsmasq_conf(dir: &Path, opts: &WorldOptions) -> String {
    let d = dir.display();
    let mut conf = format!(
        "port=0\nno-ping\nkeep-in-foreground\ninterface=gw0\ninterface=gw1\nbind-interfaces\nexcept-interface=lo\n\
         dhcp-authoritative\nlog-dhcp\nlog-facility={d}/dnsmasq.log\ndhcp-leasefile={d}/dnsmasq.leases\n\
         pid-file={d}/dnsmasq.pid\n\
         dhcp-range=set:n0,10.98.0.100,10.98.0.200,255.255.255.0,2m\n"
    );
    // dnsmasq echoes the host name a client sends back as option 12; no cloud's
    // DHCP does that (CloudDhcp: the cloud's options, never more).
    conf.push_str("dhcp-ignore-names\n");
    if opts.dhcp.serves(1) {
        if eth1_ipv4(opts) {
            conf.push_str("dhcp-range=set:n1,10.98.1.100,10.98.1.200,255.255.255.0,2m\n");
        }
        conf.push_str("dhcp-range=set:n1v6,fd00:98:1::100,fd00:98:1::1ff,64,2m\n");
    }
    match &opts.ipv6 {
        None => {
            let _ = writeln!(conf, "dhcp-host={MAC0},10.98.0.10");
            if opts.dhcp.serves(1) {
                let _ = writeln!(conf, "dhcp-host={MAC1},10.98.1.20,[fd00:98:1::20]");
            }
        }
        Some(v6) => {
            // Router advertisements on both links, every 4 s (the instance's
            // router solicitations may go out before dnsmasq listens), the
            // router valid for 600 s (dnsmasq's default, three intervals, could
            // lapse on a loaded machine between two of them). A range
            // without a mode advertises its prefix without the A bit and with
            // the M bit: no SLAAC, addresses only from DHCPv6.
            conf.push_str(
                "dhcp-range=set:n0v6,fd00:98::100,fd00:98::1ff,64,2m\n\
                 enable-ra\nra-param=gw0,4,600\nra-param=gw1,4,600\n",
            );
            let _ = writeln!(conf, "dhcp-host={MAC0},10.98.0.10,[{}]", v6.eth0);
            if opts.dhcp.serves(1) {
                let v4 = if v6.eth1_ipv4 { "10.98.1.20," } else { "" };
                let _ = writeln!(conf, "dhcp-host={MAC1},{v4}[{}]", v6.eth1);
            } else {
                // Advertisements need a range on the link; one serving only
                // hosts named by MAC serves eth1 nothing (no DHCP on eth1).
                conf.push_str("dhcp-range=set:n1v6,fd00:98:1::,static,64,2m\n");
            }
        }
    }
    for l in opts.dhcp.dnsmasq_lines() {
        let _ = writeln!(conf, "{l}");
    }
    if let Some(t1) = opts.t1 {
        let _ = write!(
            conf,
            "dhcp-option=option:T1,{t1}\ndhcp-option=option:T2,{}\n",
            t1 * 3
        );
    }
    for l in &opts.dnsmasq_extra {
        let _ = writeln!(conf, "{l}");
    }
    conf
}

/// Whether eth1 has IPv4 in the world (all but an IPv6-only eth1).
fn eth1_ipv4(opts: &WorldOptions) -> bool {
    opts.ipv6.as_ref().is_none_or(|v6| v6.eth1_ipv4)
}

/// Removes `/etc/netns/lht-PID-...` folders whose test process `PID` is gone and
/// whose namespace is gone too: what a run killed before its [`World`] was
/// dropped leaves behind (a `World` removes its own folder when dropped).
/// Returns the folders removed. Folders of live runs and of other tools stay.
pub fn sweep_dead_runs(etc_netns: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(etc_netns) else {
        return removed;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("lht-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let alive = Path::new("/proc").join(pid.to_string()).exists();
        let namespace = Path::new("/run/netns").join(&name).exists();
        if !alive && !namespace && std::fs::remove_dir_all(e.path()).is_ok() {
            removed.push(e.path());
        }
    }
    removed
}

/// The Debian exit hook's place below `/etc/dhcp/`, as the package installs it:
/// after every hook that installs routes (`rfc3442-classless-routes`).
pub const DHCLIENT_HOOK_NAME: &str = "dhclient-exit-hooks.d/zz-leasehook";

/// Puts the exit hook into `/etc/netns/<ns>/dhcp/`, which `ip netns exec` mounts
/// over `/etc/dhcp` inside that namespace only (unless `installed`: then the
/// namespace sees the machine's `/etc/dhcp`), and an empty resolv.conf that takes
/// the place of `/etc/resolv.conf`; returns `/etc/netns/<ns>`.
pub fn install_hook(ns: &str, installed: bool) -> PathBuf {
    for gone in sweep_dead_runs(Path::new("/etc/netns")) {
        eprintln!("removed {gone:?}, left by a test run that was killed");
    }
    let etc = PathBuf::from("/etc/netns").join(ns);
    if installed {
        std::fs::create_dir_all(&etc).unwrap_or_else(|e| panic!("{etc:?}: {e}"));
        std::fs::write(etc.join("resolv.conf"), "").unwrap_or_else(|e| panic!("{etc:?}: {e}"));
        return etc;
    }
    let dhcp = etc.join("dhcp");
    for sub in ["dhclient-exit-hooks.d", "dhclient-enter-hooks.d"] {
        std::fs::create_dir_all(dhcp.join(sub)).unwrap_or_else(|e| panic!("{dhcp:?}: {e}"));
    }
    let _ = std::fs::write(etc.join("resolv.conf"), "");
    std::fs::copy("/etc/dhcp/dhclient.conf", dhcp.join("dhclient.conf"))
        .unwrap_or_else(|e| panic!("/etc/dhcp/dhclient.conf (is isc-dhcp-client installed?): {e}"));
    let hook = crate::workspace_root().join("hooks/dhclient/leasehook");
    std::fs::copy(&hook, dhcp.join(DHCLIENT_HOOK_NAME)).unwrap_or_else(|e| panic!("{hook:?}: {e}"));
    etc
}

/// The seconds between the start and end marks [`World::time_exit_hooks`]
/// wrote for the first BOUND (or REBOOT), once both are there.
pub fn exit_hooks_seconds(file: &Path) -> Option<f64> {
    exit_hooks_seconds_of(file, &["BOUND", "REBOOT"])
}

/// [`exit_hooks_seconds`] for the first event of one of `reasons` (`BOUND6`).
pub fn exit_hooks_seconds_of(file: &Path, reasons: &[&str]) -> Option<f64> {
    let text = std::fs::read_to_string(file).ok()?;
    let mark = |which: &str| {
        text.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|f| f.len() == 3 && reasons.contains(&f[0]) && f[1] == which)
            .and_then(|f| f[2].parse::<f64>().ok())
    };
    Some(mark("end")? - mark("start")?)
}

/// Starts `cmd` and waits for its first line on standard output (a "ready" line).
pub fn start_ready(cmd: Command, what: &str) -> Child {
    start_first_line(cmd, what).0
}

/// Starts `cmd` and reads its first line on standard output (a "ready" line, or
/// the address it bound), trimmed; fails the test when there is none.
pub fn start_first_line(mut cmd: Command, what: &str) -> (Child, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("failed to start {what}: {e}"));
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        let mut reader = BufReader::new(out);
        let _ = reader.read_line(&mut line);
        // Keep draining in the background so the child never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    }
    if line.trim().is_empty() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{what} did not start");
    }
    (child, line.trim().to_owned())
}

/// The root the hooks use and the environment dhclient passes them (`-e`): the
/// shim built beside the tests and the world's private root, or, for the
/// installed package, neither (its own shim path and `/`).
fn hook_env(opts: &WorldOptions, root: PathBuf) -> (PathBuf, Vec<(String, String)>) {
    let mut hook_env = Vec::new();
    let root = if opts.installed {
        PathBuf::from("/")
    } else {
        hook_env.push((
            "LEASEHOOK_DHCLIENT".to_owned(),
            Client::Dhclient.shim_path().display().to_string(),
        ));
        hook_env.push(("LEASEHOOK_ROOT".to_owned(), root.display().to_string()));
        root
    };
    hook_env.extend([
        (
            "LEASEHOOK_IMDS_SYNC_BUDGET_S".to_owned(),
            opts.sync_budget_s.to_string(),
        ),
        (
            "LEASEHOOK_IMDS_BUDGET_S".to_owned(),
            opts.budget_s.to_string(),
        ),
        ("LEASEHOOK_LOG_LEVEL".to_owned(), "debug".to_owned()),
    ]);
    hook_env.extend(opts.extra_hook_env.iter().cloned());
    (root, hook_env)
}

/// The echo host (python): answers every GET on 198.51.100.10:80 with the caller's
/// address; prints `ready` once it listens.
pub const ECHO_SERVER: &str = "\
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = self.client_address[0].encode()
        self.send_response(200); self.send_header('Content-Length', str(len(b))); self.end_headers(); self.wfile.write(b)
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(('198.51.100.10', 80), H)
print('ready', flush=True)
s.serve_forever()
";

/// The IPv6 echo host (python): [`ECHO_SERVER`] on [`ECHO6`], port 80.
pub const ECHO6_SERVER: &str = "\
import http.server, socket
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = self.client_address[0].encode()
        self.send_response(200); self.send_header('Content-Length', str(len(b))); self.end_headers(); self.wfile.write(b)
    def log_message(self, *a): pass
class S(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6
s = S(('2001:db8:100::10', 80), H)
print('ready', flush=True)
s.serve_forever()
";

/// A router link of an IPv6 world ([`Ipv6World`]), still down: no link-local
/// address of its own, [`ROUTER_V6_LINK_LOCAL`] instead (so its router
/// advertisements come from the address the clouds publish).
fn router_link_ipv6(router: &Netns, gw: &str) {
    router.ip(&["link", "set", gw, "addrgenmode", "none"]);
    router.ip(&[
        "-6",
        "address",
        "add",
        &format!("{ROUTER_V6_LINK_LOCAL}/64"),
        "dev",
        gw,
        "nodad",
    ]);
}

/// The rest of the router's side of an IPv6 world: `fd00:98::1/64` on `gw0`,
/// forwarding (a router's neighbour advertisements carry the router flag;
/// without it the instance drops the default route it learned), the echo
/// host's [`ECHO6`] on `lo`, and the source check: rules, ahead of the local
/// table, that drop a packet coming in on one link from the other link's
/// subnet.
fn router_ipv6(router: &Netns) {
    router.ip(&[
        "-6",
        "address",
        "add",
        "fd00:98::1/64",
        "dev",
        "gw0",
        "nodad",
    ]);
    router.sysctl("net.ipv6.conf.all.forwarding", "1");
    router.ip(&["-6", "address", "add", &format!("{ECHO6}/128"), "dev", "lo"]);
    router.ip(&["-6", "rule", "add", "pref", "1000", "lookup", "local"]);
    router.ip(&["-6", "rule", "del", "pref", "0", "lookup", "local"]);
    for (gw, other) in [("gw0", "fd00:98:1::/64"), ("gw1", "fd00:98::/64")] {
        router.ip(&[
            "-6",
            "rule",
            "add",
            "pref",
            "100",
            "iif",
            gw,
            "from",
            other,
            "blackhole",
        ]);
    }
}

/// Joins the router and the instance: the two links (MACs, addresses, the
/// IPv4 source check), the router's loopback services, and the IPv6 world's
/// router side when `opts` asks for one.
fn wire(router: &Netns, inst: &Netns, opts: &WorldOptions) {
    for key in [
        "net.ipv6.conf.all.accept_dad",
        "net.ipv6.conf.default.accept_dad",
    ] {
        inst.sysctl(key, "0");
        router.sysctl(key, "0");
    }
    for (n, mac) in [(0u8, MAC0), (1, MAC1)] {
        let (gw, eth) = (format!("gw{n}"), format!("eth{n}"));
        router.ip(&[
            "link", "add", "name", &gw, "type", "veth", "peer", "name", &eth, "netns", &inst.name,
        ]);
        inst.ip(&["link", "set", &eth, "address", mac]);
        router.ip(&["address", "add", &format!("10.98.{n}.1/24"), "dev", &gw]);
        let lease_router = opts.dhcp.router(n);
        if lease_router != format!("10.98.{n}.1") {
            router.ip(&["address", "add", &format!("{lease_router}/24"), "dev", &gw]);
        }
        router.sysctl(&format!("net.ipv4.conf.{gw}.rp_filter"), "1");
        if opts.ipv6.is_some() {
            router_link_ipv6(router, &gw);
            if n == 1 {
                inst.sysctl("net.ipv6.conf.eth1.ra_defrtr_metric", ETH1_RA_METRIC);
            }
        }
        router.ip(&["link", "set", &gw, "up"]);
        inst.ip(&["link", "set", &eth, "up"]);
    }
    router.ip(&[
        "-6",
        "address",
        "add",
        "fd00:98:1::1/64",
        "dev",
        "gw1",
        "nodad",
    ]);
    router.sysctl("net.ipv4.conf.all.rp_filter", "1");
    if opts.ipv6.is_some() {
        router_ipv6(router);
    }
    router.ip(&["address", "add", "169.254.169.254/32", "dev", "lo"]);
    router.ip(&["address", "add", "198.51.100.10/32", "dev", "lo"]);
}

impl World {
    /// A world with Debian's option-121 exit hook (isc-dhcp-client's
    /// `rfc3442-classless-routes`, copied from this machine) beside leasehook's,
    /// as on a Debian or Ubuntu image: with option 121 (GCE's, Azure's) the
    /// routes of the lease come from it.
    pub fn with_option_121_hook(tag: &str, opts: &WorldOptions) -> Self {
        let w = Self::new(tag, opts);
        let hook = "/etc/dhcp/dhclient-exit-hooks.d/rfc3442-classless-routes";
        let to = format!(
            "/etc/netns/{}/dhcp/dhclient-exit-hooks.d/rfc3442-classless-routes",
            w.inst.name
        );
        std::fs::copy(hook, &to)
            .unwrap_or_else(|e| panic!("{hook} -> {to} (isc-dhcp-client): {e}"));
        w
    }

    /// Binds eth0 and eth1 (dhclient in the background) and waits until both
    /// NICs' rules are in the kernel and eth1 is recorded.
    pub fn bind_both_routed(&mut self) {
        self.bind("eth0", false);
        self.bind("eth1", false);
        assert!(
            wait_until(std::time::Duration::from_secs(40), || self
                .our_rules()
                .len()
                == 2
                && self.root.join("run/leasehook/iface/eth1.json").exists()),
            "eth1 not routed:\n{}",
            self.pbr_report()
        );
    }

    /// A default world whose eth0 and eth1 are bound by dhclient and recorded:
    /// both NICs' rules in the kernel, then both state files (a refresh sees
    /// only recorded NICs).
    pub fn bound_two(tag: &str) -> Self {
        let mut w = Self::new(tag, &WorldOptions::default());
        w.bind("eth0", false);
        w.bind("eth1", false);
        let recorded = |n: &str| {
            w.root
                .join(format!("run/leasehook/iface/{n}.json"))
                .exists()
        };
        assert!(
            wait_until(std::time::Duration::from_secs(10), || w.our_rules().len()
                == 2
                && recorded("eth0")
                && recorded("eth1")),
            "{}",
            w.log("eth1", false)
        );
        w
    }

    /// Builds the world; panics (failing the test) when any part cannot start.
    pub fn new(tag: &str, opts: &WorldOptions) -> Self {
        let router = Netns::new(&format!("{tag}-r"));
        let inst = Netns::new(&format!("{tag}-i"));
        let dir = TempDir::new(tag);
        let root = dir.0.join("root");
        std::fs::create_dir_all(&root).unwrap_or_else(|e| panic!("{root:?}: {e}"));
        wire(&router, &inst, opts);

        let mut services = Vec::new();
        let conf = dnsmasq_conf(&dir.0, opts);
        let conf_path = dir.file("dnsmasq.conf", &conf);
        let err_path = dir.0.join("dnsmasq.err");
        let err = std::fs::File::create(&err_path).unwrap_or_else(|e| panic!("{err_path:?}: {e}"));
        let mut dnsmasq = router.command("dnsmasq");
        dnsmasq
            .arg(format!("--conf-file={}", conf_path.display()))
            .stdout(Stdio::null())
            .stderr(err);
        let mut child = dnsmasq
            .spawn()
            .unwrap_or_else(|e| panic!("failed to start dnsmasq (is it installed?): {e}"));
        // A DISCOVER sent before dnsmasq listens is retried only seconds later:
        // start clients only once dnsmasq has announced its DHCP ranges.
        let log = dir.0.join("dnsmasq.log");
        let ranges = if opts.dhcp.serves(1) && eth1_ipv4(opts) {
            2
        } else {
            1
        };
        let mut exited = None;
        let ready = wait_until(Duration::from_secs(30), || {
            exited = child.try_wait().ok().flatten();
            exited.is_some()
                || std::fs::read_to_string(&log)
                    .is_ok_and(|l| l.matches("DHCP, IP range").count() >= ranges)
        });
        assert!(
            ready && exited.is_none(),
            "dnsmasq did not start (exit {exited:?}): {}{}",
            std::fs::read_to_string(&err_path).unwrap_or_default(),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        services.push(child);

        let imds = match &opts.metadata {
            Some(service) => Some(start_metadata(&router, &dir.0, service)),
            None => opts
                .tree
                .as_ref()
                .map(|tree| start_imds(&router, &dir.0, tree, &opts.scenario)),
        };
        let mut echo = router.command("/usr/bin/python3");
        echo.args(["-c", ECHO_SERVER]);
        services.push(start_ready(echo, "echo host"));
        if opts.ipv6.is_some() {
            let mut echo6 = router.command("/usr/bin/python3");
            echo6.args(["-c", ECHO6_SERVER]);
            services.push(start_ready(echo6, "IPv6 echo host"));
        }

        let etc = install_hook(&inst.name, opts.installed);
        let (root, hook_env) = hook_env(opts, root);
        Self {
            router,
            inst,
            dir,
            root,
            etc,
            services,
            imds,
            dhclients: BTreeMap::new(),
            hook_env,
            ipv6: opts.ipv6.clone(),
        }
    }

    fn dhclient_args(&self, iface: &str, v6: bool) -> Vec<String> {
        let tag = if v6 {
            format!("{iface}-6")
        } else {
            iface.to_owned()
        };
        let mut args: Vec<String> = vec![if v6 { "-6" } else { "-4" }.to_owned()];
        for (k, v) in &self.hook_env {
            args.push("-e".to_owned());
            args.push(format!("{k}={v}"));
        }
        for (flag, ext) in [("-lf", "leases"), ("-pf", "pid")] {
            args.push(flag.to_owned());
            args.push(
                self.dir
                    .0
                    .join(format!("dhclient-{tag}.{ext}"))
                    .display()
                    .to_string(),
            );
        }
        args
    }

    /// Exit hooks that sort first and last (`run-parts` order) and record, for
    /// `iface`'s events, when dhclient-script began and ended running the exit
    /// hooks: the time the DHCP client is held between them (leasehook's hook and
    /// any `rfc3442-classless-routes` among them). Returns the file they write
    /// (read it with [`exit_hooks_seconds`]).
    pub fn time_exit_hooks(&self, iface: &str) -> PathBuf {
        let file = self.dir.0.join(format!("exit-hook-times-{iface}"));
        let dir = self.etc.join("dhcp/dhclient-exit-hooks.d");
        for (name, mark) in [("0-time-start", "start"), ("zzzz-time-end", "end")] {
            std::fs::write(
                dir.join(format!("{name}-{iface}")),
                format!(
                    "if [ \"$interface\" = {iface} ]; then echo \"$reason {mark} $(date +%s.%N)\" >> '{}'; fi\n",
                    file.display()
                ),
            )
            .unwrap_or_else(|e| panic!("{dir:?}: {e}"));
        }
        file
    }

    /// Binds the primary (`eth0`, dhclient in the background) with its exit
    /// hooks timed ([`World::time_exit_hooks`]) and waits for them: the
    /// seconds its BOUND held dhclient, and `eth0`'s log.
    pub fn bind_primary_timed(&mut self) -> (f64, String) {
        let times = self.time_exit_hooks("eth0");
        self.bind("eth0", false);
        let deadline = Instant::now() + Duration::from_secs(20);
        let held = loop {
            match exit_hooks_seconds(&times) {
                Some(held) => break held,
                None if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                None => panic!(
                    "eth0's exit hooks did not finish:\n{}",
                    self.log("eth0", false)
                ),
            }
        };
        eprintln!(
            "eth0 BOUND: exit hooks held dhclient {:.1} ms",
            held * 1000.0
        );
        (held, self.log("eth0", false))
    }

    /// Starts `dhclient -d` (foreground, so it is this world's child) on `iface`;
    /// its output and the hook's log go to `dhclient-<iface>[-6].log`.
    pub fn dhclient_start(&mut self, iface: &str, v6: bool) {
        let tag = if v6 {
            format!("{iface}-6")
        } else {
            iface.to_owned()
        };
        let log = std::fs::File::create(self.dir.0.join(format!("dhclient-{tag}.log")))
            .unwrap_or_else(|e| panic!("dhclient log: {e}"));
        let mut cmd = self.inst.command("dhclient");
        cmd.arg("-d")
            .arg("-v")
            .args(self.dhclient_args(iface, v6))
            .arg(iface)
            .stdout(Stdio::null())
            .stderr(log);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("failed to start dhclient: {e}"));
        self.dhclients.insert(tag, child);
    }

    /// `dhclient -r` (RELEASE) or `dhclient -x` (STOP) on `iface`: the running
    /// client is told through its pid file and the hook runs once more.
    pub fn dhclient_end(&mut self, iface: &str, v6: bool, release: bool) {
        let tag = if v6 {
            format!("{iface}-6")
        } else {
            iface.to_owned()
        };
        let mut cmd = self.inst.command("timeout");
        cmd.arg("30")
            .arg("dhclient")
            .arg(if release { "-r" } else { "-x" })
            .args(self.dhclient_args(iface, v6))
            .arg(iface);
        let out = run(&mut cmd);
        self.append_client_log(&tag, &out.stderr);
        if let Some(mut c) = self.dhclients.remove(&tag) {
            let _ = c.wait();
        }
    }

    /// What dhclient does when `iface`'s DHCPv6 lease of `address` reaches the
    /// end of its valid lifetime (dnsmasq's shortest lease is 2 minutes, so a
    /// test cannot wait for it): the client, killed here so that it sends
    /// nothing more, would run `dhclient-script` with `reason=EXPIRE6` and the
    /// lease's `old_*` variables, which removes the address and runs the exit
    /// hooks. Run so, with the client's `-e` environment, in the instance; its
    /// output goes to the client's log.
    pub fn dhclient_expire6(&mut self, iface: &str, address: &str) {
        let tag = format!("{iface}-6");
        if let Some(mut c) = self.dhclients.remove(&tag) {
            let _ = c.kill();
            let _ = c.wait();
        }
        let mut cmd = self.inst.command("env");
        cmd.arg("-i")
            .arg("PATH=/usr/sbin:/usr/bin:/sbin:/bin")
            .arg("reason=EXPIRE6")
            .arg(format!("interface={iface}"))
            .arg(format!("old_ip6_address={address}"))
            .arg("old_ip6_prefixlen=128")
            .args(self.hook_env.iter().map(|(k, v)| format!("{k}={v}")))
            .arg("/sbin/dhclient-script");
        let out = run(&mut cmd);
        self.append_client_log(&tag, &out.stderr);
    }

    /// Appends `lines` (a run's stderr: the hook's lines) to the log of the
    /// client `tag` (`eth1`, `eth1-6`), where its own lines go.
    fn append_client_log(&self, tag: &str, lines: &[u8]) {
        let log = self.dir.0.join(format!("dhclient-{tag}.log"));
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&log)
        {
            use std::io::Write as _;
            let _ = f.write_all(lines);
        }
    }

    /// Replaces the IMDS emulator with one serving `tree` under `scenario` (an
    /// operator changing the instance's metadata; the new emulator issues new tokens).
    pub fn restart_imds(&mut self, tree: &Value, scenario: &Value) {
        if let Some(mut old) = self.imds.take() {
            let _ = old.kill();
            let _ = old.wait();
        }
        self.imds = Some(start_imds(&self.router, &self.dir.0, tree, scenario));
    }

    /// Stops the world's metadata service (whichever cloud's it is): from now on
    /// nothing answers at its address, as when the service is down.
    pub fn stop_metadata(&mut self) {
        if let Some(mut old) = self.imds.take() {
            let _ = old.kill();
            let _ = old.wait();
        }
    }

    /// leasehook's rules, routes and the instance's addresses: what a change
    /// leasehook makes shows in (compare before and after).
    pub fn snapshot(&self) -> (Vec<String>, Vec<String>, Vec<String>) {
        (self.our_rules(), self.our_routes(), self.inst.addresses())
    }

    /// The environment the hooks get (`LEASEHOOK_ROOT`, budgets, ...), for running
    /// `leasehook` commands the way the hooks would.
    pub fn hook_env(&self) -> &[(String, String)] {
        &self.hook_env
    }

    /// `leasehook ARGS` inside the instance with the hooks' environment, then
    /// `env` (later values win).
    pub fn leasehook(&self, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
        let bin = crate::netns::leasehook_bin();
        let mut cmd = self.inst.command(&bin.to_string_lossy());
        cmd.envs(self.hook_env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        cmd.envs(env.iter().copied());
        cmd.args(args);
        cmd.output()
            .unwrap_or_else(|e| panic!("{}: {e}", bin.display()))
    }

    /// `leasehook ARGS` as [`World::leasehook`] runs it, asserted to exit 0:
    /// its standard output and error, in one text (`context` says more when it
    /// failed).
    pub fn leasehook_ok(
        &self,
        args: &[&str],
        env: &[(&str, &str)],
        context: impl FnOnce() -> String,
    ) -> String {
        let out = self.leasehook(args, env);
        let text = output_text(&out);
        assert!(
            out.status.success(),
            "{} failed: {text}\n{}",
            args.first().copied().unwrap_or_default(),
            context()
        );
        text
    }

    /// Changes the GCE emulator's tree at `path` (`leasehook-emulator --cloud
    /// gce --set`, from the router namespace where it serves): a change the
    /// instance sees.
    pub fn gce_set(&self, path: &str, value: &Value) {
        let out = self
            .router
            .command(&crate::netns::sibling_bin(EMULATOR).to_string_lossy())
            .args(["--cloud", "gce", "--set", "169.254.169.254:80", path])
            .arg(value.to_string())
            .output()
            .unwrap_or_else(|e| panic!("leasehook-emulator --cloud gce --set: {e}"));
        assert!(out.status.success(), "{out:?}");
    }

    /// The hook's and dhclient's log for `iface` so far.
    pub fn log(&self, iface: &str, v6: bool) -> String {
        let tag = if v6 {
            format!("{iface}-6")
        } else {
            iface.to_owned()
        };
        std::fs::read_to_string(self.dir.0.join(format!("dhclient-{tag}.log"))).unwrap_or_default()
    }

    /// Waits up to `secs` until `iface`'s (IPv4) log holds `text`; fails the
    /// test with the log otherwise (`context` first).
    pub fn wait_logged(&self, iface: &str, text: &str, secs: u64, context: &str) {
        assert!(
            wait_until(Duration::from_secs(secs), || self
                .log(iface, false)
                .contains(text)),
            "{context}{}lacks {text:?}:\n{}",
            if context.is_empty() { "" } else { ": " },
            self.log(iface, false)
        );
    }

    /// The requests the IMDS emulator logged.
    pub fn imds_log(&self) -> String {
        std::fs::read_to_string(self.dir.0.join("imds.log")).unwrap_or_default()
    }

    /// An HTTP GET to the echo host from `src` inside the instance; the address the
    /// echo host saw, or `None` when the connection failed.
    pub fn echo_from(&self, src: &str) -> Option<String> {
        self.inst.http_get("198.51.100.10", 80, Some(src))
    }

    /// Asserts that traffic from each of `sources` reaches the echo host from
    /// that address; `report` says more when it does not.
    pub fn assert_echoes(&self, sources: &[&str], report: impl Fn() -> String) {
        for src in sources {
            assert_eq!(
                self.echo_from(src).as_deref(),
                Some(*src),
                "traffic from {src}:\n{}",
                report()
            );
        }
    }

    /// An HTTP GET to the IPv6 echo host ([`ECHO6`]) from `src` inside the
    /// instance; the address the echo host saw, or `None` when the connection
    /// failed (within 2 s: a packet the source check drops is never answered).
    pub fn echo6_from(&self, src: &str) -> Option<String> {
        self.inst.http_get(ECHO6, 80, Some(src))
    }

    /// Every link of the instance, sorted, as `NAME KIND LOWER ALIAS` (`-` for
    /// none: `eth1.7 vlan eth1 leasehook:42:01:…`, `eth0 veth - -`).
    pub fn link_kinds(&self) -> Vec<String> {
        let shown = self.inst.ip_json(&["-d", "link", "show"]);
        let mut all: Vec<String> = shown
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|l| {
                format!(
                    "{} {} {} {}",
                    l["ifname"].as_str().unwrap_or("?"),
                    l["linkinfo"]["info_kind"].as_str().unwrap_or("-"),
                    l["link"].as_str().unwrap_or("-"),
                    l["ifalias"].as_str().unwrap_or("-")
                )
            })
            .collect();
        all.sort();
        all
    }

    /// leasehook's own rules in the instance (`ip rule` lines with `proto 176`).
    pub fn our_rules(&self) -> Vec<String> {
        self.inst
            .rules()
            .into_iter()
            .filter(|r| r.ends_with("proto 176"))
            .collect()
    }

    /// leasehook's own routes in the instance.
    pub fn our_routes(&self) -> Vec<String> {
        self.inst
            .routes()
            .into_iter()
            .filter(|r| r.ends_with("proto 176"))
            .collect()
    }

    /// Whether a worker is still waiting for `iface`.
    pub fn worker_pending(&self, iface: &str) -> bool {
        self.root
            .join("run/leasehook/pending")
            .join(format!("{iface}.json"))
            .exists()
    }
}

/// Kills every process whose pid a pending hand-over names (detached workers are
/// not our children).
pub fn kill_workers(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root.join("run/leasehook/pending")) else {
        return;
    };
    for e in entries.flatten() {
        let pid = std::fs::read_to_string(e.path())
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| v["pid"].as_u64());
        // Only a live leasehook worker: never a process that got a finished
        // worker's pid (say, another world's dnsmasq).
        let ours = |pid: u64| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|arg| arg == b"--worker"))
        };
        if let Some(pid) = pid.filter(|p| ours(*p)) {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    }
}

/// A private, permissive D-Bus "system" bus for networkd and networkd-dispatcher
/// (never the machine's bus).
pub const BUS_CONF: &str = r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=@SOCK@</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
  </policy>
</busconfig>
"#;

/// Starts a private D-Bus system bus ([`BUS_CONF`]), its socket and
/// configuration in `dir` (`<tag>.sock`, `<tag>.conf`); the daemon and the
/// socket's path.
pub fn start_bus(dir: &TempDir, tag: &str) -> (Child, PathBuf) {
    let sock = dir.0.join(format!("{tag}.sock"));
    let conf = dir.file(
        &format!("{tag}.conf"),
        &BUS_CONF.replace("@SOCK@", &sock.display().to_string()),
    );
    let mut bus = Command::new("dbus-daemon");
    bus.arg(format!("--config-file={}", conf.display()))
        .arg("--nofork")
        .arg("--print-address");
    (start_ready(bus, "dbus-daemon"), sock)
}

/// The instance side of a networkd world, run by `sh` inside the instance's
/// network namespace and a private mount namespace: a tmpfs on `/run/systemd` (also
/// bind-mounted under `LEASEHOOK_ROOT`, where the shim reads lease files) and on
/// `/etc/systemd/network`, a read-only `/sys` (so networkd does not wait for udev),
/// `.network` files for eth0 and eth1, networkd-dispatcher, then systemd-networkd.
const NETWORKD_SUPERVISOR: &str = r#"
set -e
mount -t tmpfs tmpfs /run/systemd
umount /sys 2>/dev/null || true
mount -t sysfs -o ro sysfs /sys
mkdir -p /run/systemd/netif/links /run/systemd/netif/leases /run/systemd/netif/lldp
chown -R systemd-network:systemd-network /run/systemd/netif
mkdir -p "$LEASEHOOK_ROOT/run/systemd"
mount --bind /run/systemd "$LEASEHOOK_ROOT/run/systemd"
mount -t tmpfs tmpfs /etc/systemd/network
printf '[Match]
Name=eth0
[Network]
DHCP=ipv4
IPv6AcceptRA=no
[DHCPv4]
RouteMetric=100
' > /etc/systemd/network/10-eth0.network
printf '[Match]
Name=eth1
[Network]
DHCP=ipv4
IPv6AcceptRA=no
[DHCPv4]
RouteMetric=200
' > /etc/systemd/network/10-eth1.network
if [ -n "$NETWORKD_DROPIN" ]; then
    mkdir -p /run/systemd/networkd.conf.d
    cp "$NETWORKD_DROPIN" /run/systemd/networkd.conf.d/leasehook.conf
fi
/usr/bin/networkd-dispatcher -v -S "$SCRIPTS" > "$WORLD/networkd-dispatcher.log" 2>&1 &
# networkd only once the dispatcher listens: a state change before is never run.
i=0
until grep -q 'Startup complete' "$WORLD/networkd-dispatcher.log"; do
    i=$((i + 1)); [ "$i" -lt 300 ] || { echo "networkd-dispatcher did not start" >&2; exit 1; }
    sleep 0.1
done
echo ready
# networkd is restarted whenever it stops (tests stop it to see what a restart does).
set +e
while :; do
    SYSTEMD_LOG_LEVEL=info /lib/systemd/systemd-networkd >> "$WORLD/networkd.log" 2>&1
    sleep 0.2
done
"#;

impl World {
    /// Runs real systemd-networkd and networkd-dispatcher in the instance (instead
    /// of dhclient), with leasehook's dispatcher script in `routable.d`,
    /// `degraded.d`, `no-carrier.d` and `off.d`, talking over a private D-Bus.
    ///
    /// With `dropin`, leasehook's `networkd.conf.d` drop-in
    /// (`hooks/networkd/leasehook.conf`) is in place.
    pub fn start_networkd(&mut self, dropin: bool) {
        let scripts = self.dir.0.join("nd");
        let shim = Client::Networkd.shim_path().display().to_string();
        let script = crate::workspace_root().join("hooks/networkd-dispatcher/50-leasehook");
        for state in ["routable.d", "degraded.d", "no-carrier.d", "off.d"] {
            let d = scripts.join(state);
            std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{d:?}: {e}"));
            std::fs::copy(&script, d.join("50-leasehook"))
                .unwrap_or_else(|e| panic!("{script:?}: {e}"));
        }
        // networkd-dispatcher runs only scripts whose folder and file are exactly
        // 0755 root:root.
        run(Command::new("chmod").arg("-R").arg("755").arg(&scripts));
        let (bus, sock) = start_bus(&self.dir, "bus");
        self.services.push(bus);
        let mut env = vec![
            (
                "PATH".to_owned(),
                "/usr/sbin:/usr/bin:/sbin:/bin".to_owned(),
            ),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
            (
                "DBUS_SYSTEM_BUS_ADDRESS".to_owned(),
                format!("unix:path={}", sock.display()),
            ),
            ("SCRIPTS".to_owned(), scripts.display().to_string()),
            ("WORLD".to_owned(), self.dir.0.display().to_string()),
            ("LEASEHOOK_NETWORKD".to_owned(), shim),
            (
                "NETWORKD_DROPIN".to_owned(),
                if dropin {
                    crate::workspace_root()
                        .join("hooks/networkd/leasehook.conf")
                        .display()
                        .to_string()
                } else {
                    String::new()
                },
            ),
        ];
        env.extend(
            self.hook_env
                .iter()
                .filter(|(k, _)| k != "LEASEHOOK_DHCLIENT")
                .cloned(),
        );
        let mut cmd = self.inst.command("env");
        cmd.arg("-i")
            .args(env.iter().map(|(k, v)| format!("{k}={v}")))
            .args(["sh", "-c", NETWORKD_SUPERVISOR]);
        self.services.push(start_ready(cmd, "systemd-networkd"));
    }

    /// Stops systemd-networkd in the instance (the supervisor starts it again) and
    /// waits until the new one runs.
    pub fn restart_networkd(&self) {
        let pids = |w: &Self| -> Vec<String> {
            let out = Command::new("ip")
                .args(["netns", "pids", &w.inst.name])
                .output()
                .map(|o| o.stdout)
                .unwrap_or_default();
            String::from_utf8_lossy(&out)
                .split_whitespace()
                .filter(|p| {
                    std::fs::read_to_string(format!("/proc/{p}/comm"))
                        .is_ok_and(|c| c.trim() == "systemd-network")
                })
                .map(str::to_owned)
                .collect()
        };
        let old = pids(self);
        assert!(!old.is_empty(), "systemd-networkd is not running");
        for p in &old {
            let _ = Command::new("kill").arg(p).status();
        }
        assert!(
            wait_until(Duration::from_secs(10), || pids(self)
                .iter()
                .any(|p| !old.contains(p))),
            "networkd did not come back"
        );
    }

    /// The networkd-dispatcher log (which holds the shim's lines).
    pub fn dispatcher_log(&self) -> String {
        std::fs::read_to_string(self.dir.0.join("networkd-dispatcher.log")).unwrap_or_default()
    }
}

/// Kills every process left in network namespace `ns`: SIGTERM, then SIGKILL for
/// what is left after 2 s (dhcpcd's privilege-separation helpers catch SIGTERM to
/// pass it on to their main process, which may be gone already).
pub fn kill_namespace(ns: &str) {
    let pids = || -> Vec<String> {
        Command::new("ip")
            .args(["netns", "pids", ns])
            .output()
            .map(|out| {
                String::from_utf8_lossy(&out.stdout)
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    for pid in pids() {
        let _ = Command::new("kill").arg(pid).status();
    }
    if !wait_until(Duration::from_secs(2), || pids().is_empty()) {
        for pid in pids() {
            let _ = Command::new("kill").arg("-KILL").arg(pid).status();
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        for c in self.dhclients.values_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        kill_workers(&self.root);
        for c in self.services.iter_mut().chain(self.imds.as_mut()) {
            let _ = c.kill();
            let _ = c.wait();
        }
        kill_namespace(&self.inst.name);
        kill_namespace(&self.router.name);
        let _ = std::fs::remove_dir_all(&self.etc);
        let _ = std::fs::remove_dir("/etc/netns");
    }
}

impl World {
    /// Starts dhclient on `iface` and waits (up to 40 s) until the leased address
    /// is on the link; fails the test with dhclient's log otherwise.
    pub fn bind(&mut self, iface: &str, v6: bool) {
        self.dhclient_start(iface, v6);
        let want = match (iface, v6) {
            ("eth0", false) => "10.98.0.10",
            (_, false) => "10.98.1.20",
            ("eth0", true) => self.ipv6.as_ref().map_or(ETH0_V6, |w| w.eth0.as_str()),
            (_, true) => self.ipv6.as_ref().map_or(ETH1_V6, |w| w.eth1.as_str()),
        }
        .to_owned();
        let fam = if v6 { "-6" } else { "-4" };
        let ok = wait_until(Duration::from_secs(40), || {
            self.inst.ip(&[fam, "addr", "show", iface]).contains(&want)
        });
        assert!(ok, "{iface} got no lease:\n{}", self.log(iface, v6));
    }

    /// Waits (up to `secs`) until no worker is pending for `iface`.
    pub fn wait_workers(&self, iface: &str, secs: u64) -> bool {
        wait_until(Duration::from_secs(secs), || !self.worker_pending(iface))
    }

    /// Adds NIC `eth<n>` (`n` ≥ 2, MAC [`static_nic_mac`]) joined to `gw<n>`
    /// (10.98.n.1/24) in the router, with 10.98.n.20/24 set by hand (dnsmasq serves
    /// only eth0 and eth1), then runs the dhclient shim's BOUND event for it, as
    /// dhclient would. The tree needs the NIC's entry ([`add_static_nic_metadata`]).
    pub fn add_static_nic(&self, n: u8) {
        let (gw, eth) = (format!("gw{n}"), format!("eth{n}"));
        self.router
            .veth_to(&gw, &self.inst, &eth, &static_nic_mac(n));
        self.router
            .ip(&["address", "add", &format!("10.98.{n}.1/24"), "dev", &gw]);
        self.router.ip(&["link", "set", &gw, "up"]);
        self.inst.ip(&["link", "set", &eth, "up"]);
        self.inst
            .ip(&["address", "add", &format!("10.98.{n}.20/24"), "dev", &eth]);
        let mut cmd = self
            .inst
            .command(Client::Dhclient.shim_path().to_str().unwrap_or_default());
        cmd.env_clear()
            .envs(self.hook_env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("reason", "BOUND")
            .env("interface", &eth)
            .env("new_ip_address", format!("10.98.{n}.20"))
            .env("new_subnet_mask", "255.255.255.0")
            .env("new_routers", format!("10.98.{n}.1"));
        run(&mut cmd);
    }
}

/// The MAC of the world's NIC `eth<n>`: `02:00:00:00:00:0<n+1>`.
pub fn static_nic_mac(n: u8) -> String {
    format!("02:00:00:00:00:{:02x}", n + 1)
}

/// Adds the IMDS entry of NIC `eth<n>` ([`World::add_static_nic`]) to a tree
/// shaped like [`default_tree`]: device-number `n`, 10.98.n.20 in 10.98.n.0/24.
pub fn add_static_nic_metadata(tree: &mut Value, n: u8) {
    let mac = static_nic_mac(n);
    tree["latest"]["meta-data"]["network"]["interfaces"]["macs"][&mac] = json!({
        "device-number": n.to_string(), "local-ipv4s": format!("10.98.{n}.20"),
        "subnet-ipv4-cidr-block": format!("10.98.{n}.0/24"), "mac": mac});
}

/// A command's standard output, then its standard error, as one text.
pub fn output_text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_killed_runs_netns_folder_is_swept_and_a_live_ones_is_kept() {
        let dir = TempDir::new("sweep");
        // A pid above pid_max can never be a live process.
        let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let dead = dir.0.join(format!("lht-{}-0-x-i", pid_max + 1));
        let live = dir.0.join(format!("lht-{}-0-x-i", std::process::id()));
        let other = dir.0.join("someone-else");
        for d in [&dead, &live, &other] {
            std::fs::create_dir_all(d.join("dhcp")).unwrap();
        }
        assert_eq!(sweep_dead_runs(&dir.0), std::slice::from_ref(&dead));
        assert!(!dead.exists() && live.exists() && other.exists());
    }
}

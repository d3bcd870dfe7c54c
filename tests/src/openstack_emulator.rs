// SPDX-License-Identifier: Apache-2.0
//! Performs IO: an `OpenStack` metadata service emulator (Nova's API behind
//! Neutron's metadata proxy) on `tiny_http`, for tests and benchmarks, from the
//! documented formats. It runs in-process ([`OpenStackEmulator::start`], a thread
//! on a loopback port) or as `leasehook-emulator --cloud openstack` (in the test
//! world's router namespace, on 169.254.169.254:80).
//!
//! # What it serves
//!
//! A tree `{"meta_data": {...}, "network_data": {...}, "user_data": "..."}`:
//! `GET /openstack` lists the versions (`latest` and a dated one), `GET
//! /openstack/latest/` lists the files, `/openstack/latest/meta_data.json` and
//! `/openstack/latest/network_data.json` answer JSON, `/openstack/latest/user_data`
//! the text (404 without one); any other path 404. No header is needed (Nova's
//! service needs none from the instance; Neutron's proxy adds the instance's
//! identity itself).
//!
//! As Nova answers (issue 31; "Metadata service",
//! <https://docs.openstack.org/nova/latest/user/metadata.html>, and Nova's
//! `nova/api/metadata/handler.py`): `GET /` lists the EC2-style versions and
//! `latest` (the EC2-style tree itself is not emulated), `GET /openstack` every
//! dated `OpenStack` version and `latest`, each serving the same files; the handler
//! checks no method, so `HEAD` answers as `GET` without the body and any other
//! method as `GET` too; a 404 is webob's text page (`404 Not Found`, "The
//! resource could not be found.").
//!
//! # The rate limit
//!
//! With [`shell::Config::rate_limit`] (`--rate-limit COUNT/SECONDS`), Neutron's
//! `metadata_rate_limiting` (defaults: 10 requests per 10 s, per source address,
//! sliding window): a request beyond the limit gets 429 `Too Many Requests`
//! (haproxy's deny, no `Retry-After`), and counts.
//!
//! # Scenario
//!
//! ```json
//! {"appear": [{"link": 1, "after": 2.0}],
//!  "rules": [{"path": "/openstack/latest/network_data.json", "status": 503,
//!             "retry_after": 1, "from": 0, "until": 1.5, "count": 3, "delay": 0.5},
//!            {"path": "/openstack", "action": "garbage"}]}
//! ```
//!
//! Times are seconds since the first request. `appear`: the link at index `link`
//! of `network_data.links` (and the networks on it) is not listed until `after`
//! (a port attached while the instance runs). `rules`: the first that matches
//! (path by whole segments, window, `count`) waits `delay`, then answers `status`
//! (+ `Retry-After`, + `body`) or does `action`: `garbage` (200, a body that is
//! neither JSON nor UTF-8), `huge` (200, `size` bytes, default 1 MiB), `drop`
//! (never answered). Neither: only the delay.
//!
//! # Log
//!
//! One line per request, in memory and, when asked, appended to a file (the
//! binary: `DIR/openstack.log`): `SECONDS PEER METHOD PATH STATUS`, `STATUS`
//! the status or the action.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};

pub use crate::shell::LogEntry;
pub use crate::shell::RateLimit;
use crate::shell::{self, Reply, RequestLog, Service, Shell, State};
use crate::world::{MAC0, MAC1, MetadataService};

/// The API root.
pub const ROOT: &str = "/openstack/latest";

/// The log file the binary writes in its `--dir`.
pub const LOG_NAME: &str = "openstack.log";

/// The instance's uuid in [`world_tree`].
pub const INSTANCE_ID: &str = "83679162-1378-4288-a2d4-70e13ec132aa";

/// Nova's dated `OpenStack` metadata versions (`nova/api/metadata/base.py`),
/// oldest first: `GET /openstack` lists them and `latest`.
pub const OPENSTACK_VERSIONS: &[&str] = &[
    "2012-08-10",
    "2013-04-04",
    "2013-10-17",
    "2015-10-15",
    "2016-06-30",
    "2016-10-06",
    "2017-02-22",
    "2018-08-27",
    "2020-10-14",
];

/// Nova's EC2-style versions, which `GET /` lists before `latest`: EC2's
/// oldest nine, up to 2009-04-04.
pub const EC2_VERSIONS: &[&str] = crate::emulator::EC2_VERSIONS.split_at(9).0;

/// webob's 404 page, as Nova sends it.
const NOT_FOUND: &[u8] = b"404 Not Found\n\nThe resource could not be found.\n\n   ";

/// A link that appears late.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Appear {
    /// Its index in `network_data.links`.
    pub link: usize,
    /// Seconds after the first request.
    pub after: f64,
}

/// Late links and misbehaviour (see the module docs): the shell's fault rules
/// ([`crate::shell::Rule`]).
pub type Scenario = shell::Scenario<Appear>;

impl RateLimit {
    /// Neutron's defaults: 10 requests per 10 s.
    pub const NEUTRON: Self = Self {
        count: 10,
        window: Duration::from_secs(10),
    };
}

/// The emulator's configuration: the shell's (log, rate limit: Neutron's, if
/// on) and the tree served, `{"meta_data": ..., "network_data": ...,
/// "user_data": ...}`.
pub type Config = shell::Config<Value, Scenario>;

/// Nova's metadata service as the shell serves it: its configuration and
/// live state.
#[derive(Debug)]
pub struct OpenStack {
    state: State<Value, Scenario, LogEntry>,
}

/// A running emulator; stops when dropped.
pub type OpenStackEmulator = Shell<OpenStack>;

impl Shell<OpenStack> {
    /// Binds `bind` and serves on a thread.
    pub fn start(bind: SocketAddr, config: Config) -> io::Result<Self> {
        let service = OpenStack {
            state: State::open(config)?,
        };
        Shell::bind(bind, "openstack-emulator", service)
    }

    /// How many requests asked for a path containing `part`.
    pub fn count(&self, part: &str) -> usize {
        self.log().iter().filter(|e| e.path.contains(part)).count()
    }
}

/// The world's `network_data.json` (`tests/src/world.rs`), as Nova writes it:
/// `eth0` and `eth1` on DHCP networks (Nova lists no address for them), the
/// secondary's network with its default gateway and an extra route to the echo
/// host's network through it (a subnet host route), and a VLAN on `eth1` that
/// leasehook skips.
pub fn world_network_data() -> Value {
    json!({
        "links": [
            {"id": "tap0a0a0a0a-00", "vif_id": "0a0a0a0a-0000-4000-8000-000000000001",
             "type": "ovs", "mtu": 1500, "ethernet_mac_address": MAC0.to_uppercase()},
            {"id": "tap0b0b0b0b-01", "vif_id": "0b0b0b0b-0000-4000-8000-000000000002",
             "type": "ovs", "mtu": 1500, "ethernet_mac_address": MAC1},
            {"id": "vlan101", "type": "vlan", "vlan_link": "tap0b0b0b0b-01", "vlan_id": 101,
             "vlan_mac_address": MAC1}
        ],
        "networks": [
            {"id": "network0", "type": "ipv4_dhcp", "link": "tap0a0a0a0a-00",
             "network_id": "5b4a2b8c-0000-4000-8000-00000000aaaa"},
            {"id": "network1", "type": "ipv4_dhcp", "link": "tap0b0b0b0b-01",
             "network_id": "5b4a2b8c-0000-4000-8000-00000000bbbb",
             "routes": [
                {"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.98.1.1"},
                {"network": "198.51.100.0", "netmask": "255.255.255.0", "gateway": "10.98.1.1"}
             ]},
            {"id": "network2", "type": "ipv4", "link": "vlan101",
             "ip_address": "10.99.0.5", "netmask": "255.255.255.0",
             "network_id": "5b4a2b8c-0000-4000-8000-00000000cccc"}
        ],
        "services": [{"type": "dns", "address": "10.98.0.2"}]
    })
}

/// eth0's IPv6 address in the dual-stack worlds (`fd00:98:0::10`), in
/// [`ETH0_V6_SUBNET`].
pub const ETH0_V6: &str = "fd00:98::10";

/// eth0's IPv6 subnet in the dual-stack worlds.
pub const ETH0_V6_SUBNET: &str = "fd00:98::/64";

/// eth1's IPv6 addresses in [`dual_stack_world`] and [`ipv6_only_world`]: the
/// one dnsmasq leases by DHCPv6, alone. The contract's secondary
/// `fd00:98:1::21` is not listed: Nova's `network_data.json` names only the
/// port's first address of its network's first IPv6 subnet
/// (`nova/virt/netutils.py`: `_get_first_network`, `subnet['ips'][0]`), so
/// `OpenStack` has no secondary IPv6 address for the OS to add.
pub const ETH1_V6: &[&str] = &["fd00:98:1::20"];

/// eth1's IPv6 subnet in every dual-stack world.
pub const ETH1_V6_SUBNET: &str = "fd00:98:1::/64";

/// eth1's address in [`slaac_world`]: the EUI-64 of `MAC1` inside
/// [`ETH1_V6_SUBNET`], the address Neutron gives a port on a SLAAC subnet and
/// the kernel configures from the router's advertisement.
pub const ETH1_SLAAC: &str = "fd00:98:1::ff:fe00:2";

/// The IPv6 gateway every world's IPv6 network publishes (its `::/0` route):
/// the routers' link-local `fe80::1`, which Neutron accepts as an IPv6
/// subnet's `gateway_ip` (`neutron/ipam/utils.py` `check_gateway_in_subnet`
/// skips the subnet check for a link-local one).
pub const V6_GATEWAY: &str = "fe80::1";

/// An IPv6 network on `link`, as Nova writes one since Pike for a Neutron
/// subnet with `ipv6_address_mode` `mode` (type `ipv6_<mode>`): the port's
/// address with the subnet's netmask, the default route through the subnet's
/// gateway (`nova/virt/netutils.py` `_get_nets`). `network_id` is the
/// port's Neutron network's, whose IPv4 subnet is listed too.
fn v6_network(id: &str, link: &str, mode: &str, address: &str, network_id: &str) -> Value {
    json!({"id": id, "type": format!("ipv6_{mode}"), "link": link,
           "ip_address": address, "netmask": "ffff:ffff:ffff:ffff::",
           "routes": [{"network": "::", "netmask": "::", "gateway": V6_GATEWAY}],
           "network_id": network_id})
}

/// [`world_tree`] with `network_data`.
fn tree_with(network_data: &Value) -> Value {
    json!({
        "meta_data": world_meta_data(),
        "network_data": network_data,
        "user_data": "#cloud-config\n{}\n",
    })
}

/// The world's network data with eth1's IPv6 by `eth1_mode`, eth0's by
/// DHCPv6 (`dhcpv6-stateful`): Nova's networks for two dual-stack ports.
fn dual_stack_network_data(eth1_mode: &str, eth1_address: &str) -> Value {
    let mut nd = world_network_data();
    if let Some(Value::Array(nets)) = nd.get_mut("networks") {
        let (net0, net1) = (
            "5b4a2b8c-0000-4000-8000-00000000aaaa",
            "5b4a2b8c-0000-4000-8000-00000000bbbb",
        );
        let eth0 = v6_network(
            "network0v6",
            "tap0a0a0a0a-00",
            "dhcpv6-stateful",
            ETH0_V6,
            net0,
        );
        nets.insert(1, eth0);
        let eth1 = v6_network(
            "network1v6",
            "tap0b0b0b0b-01",
            eth1_mode,
            eth1_address,
            net1,
        );
        nets.insert(3, eth1);
    }
    nd
}

/// The contract's dual-stack instance (issue 34), as `--tree` takes it: eth0
/// and eth1 on their IPv4 DHCP networks as in [`world_tree`], and each on an
/// IPv6 subnet whose address DHCPv6 hands out (`ipv6_dhcpv6-stateful`, so
/// eth1's is the lease dnsmasq gives, [`ETH1_V6`]), with [`V6_GATEWAY`].
pub fn dual_stack_world() -> Value {
    tree_with(&dual_stack_network_data("dhcpv6-stateful", ETH1_V6[0]))
}

/// The contract's IPv6-only variant: [`dual_stack_world`] with no IPv4
/// network on eth1's link (a port on an IPv6-only Neutron network; Nova lists
/// only the subnets the port has), nor the IPv4 routes.
pub fn ipv6_only_world() -> Value {
    let mut nd = dual_stack_network_data("dhcpv6-stateful", ETH1_V6[0]);
    if let Some(Value::Array(nets)) = nd.get_mut("networks") {
        nets.retain(|n| n["id"] != "network1");
    }
    tree_with(&nd)
}

/// [`dual_stack_world`] with eth1's IPv6 subnet in SLAAC mode
/// (`ipv6_slaac`): Nova lists [`ETH1_SLAAC`], the EUI-64 of `MAC1`, which no
/// DHCPv6 server leases and the kernel configures from the advertisement.
pub fn slaac_world() -> Value {
    tree_with(&dual_stack_network_data("slaac", ETH1_SLAAC))
}

/// The world's `meta_data.json`, as Nova writes it.
pub fn world_meta_data() -> Value {
    json!({
        "uuid": INSTANCE_ID,
        "name": "leasehook-test",
        "hostname": "leasehook-test.novalocal",
        "availability_zone": "nova",
        "launch_index": 0,
        "project_id": "f7ac731cc11f40efbc03a9f9e1d1d21f",
        "public_keys": {"mykey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIleasehooktest test"},
        "keys": [{"name": "mykey", "type": "ssh",
                  "data": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIleasehooktest test"}],
        "devices": [],
        "random_seed": "bGVhc2Vob29rIHRlc3Qgc2VlZA==",
        "meta": {"role": "test"}
    })
}

/// The world's instance: [`world_meta_data`], [`world_network_data`] and a
/// cloud-config user-data.
pub fn world_tree() -> Value {
    json!({
        "meta_data": world_meta_data(),
        "network_data": world_network_data(),
        "user_data": "#cloud-config\n{}\n",
    })
}

/// The world's metadata service: `leasehook-emulator --cloud openstack` on
/// 169.254.169.254:80 in the router namespace, with `args` (`--tree`,
/// `--scenario`, `--rate-limit`).
pub fn service(args: Vec<String>) -> MetadataService {
    let mut all = vec!["--bind".to_owned(), "169.254.169.254:80".to_owned()];
    all.extend(args);
    MetadataService {
        cloud: "openstack".to_owned(),
        args: all,
        addresses: Vec::new(),
    }
}

/// `network_data` without the links (and their networks) not attached yet.
fn visible_network_data(sh: &OpenStack, t: f64) -> Value {
    let mut nd = sh
        .state
        .config
        .world
        .get("network_data")
        .cloned()
        .unwrap_or(Value::Null);
    let scenario = &sh.state.config.scenario;
    let hidden: Vec<usize> = scenario.pending(t, |a| a.after).map(|a| a.link).collect();
    if hidden.is_empty() {
        return nd;
    }
    let mut gone = Vec::new();
    if let Some(Value::Array(links)) = nd.get_mut("links") {
        let kept: Vec<Value> = links
            .drain(..)
            .enumerate()
            .filter_map(|(i, l)| {
                if hidden.contains(&i) {
                    gone.push(l.get("id").cloned().unwrap_or(Value::Null));
                    None
                } else {
                    Some(l)
                }
            })
            .collect();
        *links = kept;
    }
    if let Some(Value::Array(nets)) = nd.get_mut("networks") {
        nets.retain(|n| !gone.contains(n.get("link").unwrap_or(&Value::Null)));
    }
    nd
}

/// The normal answer: status, body, content type.
fn answer(sh: &OpenStack, t: f64, path: &str) -> (u16, Vec<u8>, &'static str) {
    let not_found = (404, NOT_FOUND.to_vec(), "text/plain; charset=UTF-8");
    let listing = |v: &[&str]| {
        let mut all = v.to_vec();
        all.push("latest");
        all.join("\n").into_bytes()
    };
    // `/openstack/<version>/<rest>` with a served version: `<rest>`.
    let served = |p: &str| -> Option<String> {
        let rest = p.strip_prefix("/openstack/")?;
        let (v, tail) = rest.split_once('/').unwrap_or((rest, ""));
        (v == "latest" || OPENSTACK_VERSIONS.contains(&v)).then(|| tail.to_owned())
    };
    match path.trim_end_matches('/') {
        "" => (200, listing(EC2_VERSIONS), "text/plain"),
        "/openstack" => (200, listing(OPENSTACK_VERSIONS), "text/plain"),
        p if served(p).is_some_and(|f| f.is_empty()) => (
            200,
            b"meta_data.json\nnetwork_data.json\nuser_data\nvendor_data.json\nvendor_data2.json"
                .to_vec(),
            "text/plain",
        ),
        p => {
            let file = served(p);
            match file.as_deref() {
                Some("meta_data.json") => sh
                    .state
                    .config
                    .world
                    .get("meta_data")
                    .map_or(not_found, |v| {
                        (200, v.to_string().into_bytes(), "application/json")
                    }),
                Some("network_data.json") => {
                    let v = visible_network_data(sh, t);
                    if v.is_null() {
                        not_found
                    } else {
                        (200, v.to_string().into_bytes(), "application/json")
                    }
                }
                Some("vendor_data.json" | "vendor_data2.json") => {
                    (200, b"{}".to_vec(), "application/json")
                }
                Some("user_data") => match sh.state.config.world.get("user_data") {
                    Some(Value::String(s)) => (200, s.clone().into_bytes(), "text/plain"),
                    _ => not_found,
                },
                _ => not_found,
            }
        }
    }
}

fn response(status: u16, body: Vec<u8>, ctype: &str) -> Reply {
    Reply::new(status, body).content_type(ctype)
}

/// Whether `peer` is over the rate limit now (the request counts either way, as
/// haproxy's stick table counts denied requests).
fn over_limit(sh: &OpenStack, peer: &str, now: Instant) -> bool {
    sh.state
        .config
        .rate_limit
        .is_some_and(|limit| sh.state.limiter.over(limit, peer, now, true))
}

impl Service for OpenStack {
    type Entry = LogEntry;

    fn handle(&self, request: tiny_http::Request) {
        let now = Instant::now();
        let t = self.state.clock.at(now);
        let method = request.method().as_str().to_owned();
        let (path, query) = shell::split_url(request.url());
        let peer = request
            .remote_addr()
            .map(SocketAddr::ip)
            .map_or_else(|| "-".to_owned(), |p: IpAddr| p.to_string());
        let reply = if over_limit(self, &peer, now) {
            response(
                429,
                b"<html><body><h1>429 Too Many Requests</h1>\nYou have sent too many requests in a given amount of time.\n</body></html>\n".to_vec(),
                "text/html",
            )
        } else {
            let normal = || {
                let (status, body, ctype) = answer(self, t, &path);
                response(status, body, ctype)
            };
            self.state
                .rules
                .matching(&method, &path, &query, t)
                .and_then(|r| {
                    shell::fault(r, |status, body| {
                        response(status, body.unwrap_or_default().into(), "text/html")
                    })
                })
                .unwrap_or_else(normal)
        };
        let entry = LogEntry {
            t,
            peer,
            method,
            path,
            status: reply.label().to_owned(),
        };
        self.state.log.answer(entry, reply, request, &[]);
    }

    fn requests(&self) -> &RequestLog<LogEntry> {
        &self.state.log
    }
}

/// Reads a log file written by the emulator.
pub fn read_log(path: &std::path::Path) -> Vec<LogEntry> {
    shell::read_log(path)
}

/// Writes a config drive image labelled `label` (`config-2`) at `image` holding
/// `openstack/latest/{meta_data.json, network_data.json, user_data}` of `tree`,
/// and returns its file system type: ISO 9660 made by `genisoimage`, as Nova's
/// `genisoimage -V config-2 -J -r` makes it. Reading it needs a kernel with
/// ISO 9660 or the test namespace of [`crate::configdrive`]. Panics when it
/// cannot.
pub fn make_config_drive(tree: &Value, label: &str, image: &std::path::Path) -> &'static str {
    let src = image.with_extension("d");
    let latest = src.join("openstack/latest");
    std::fs::create_dir_all(&latest).unwrap_or_else(|e| panic!("{latest:?}: {e}"));
    for (key, file) in [
        ("meta_data", "meta_data.json"),
        ("network_data", "network_data.json"),
    ] {
        if let Some(v) = tree.get(key) {
            std::fs::write(latest.join(file), v.to_string())
                .unwrap_or_else(|e| panic!("{file}: {e}"));
        }
    }
    if let Some(Value::String(ud)) = tree.get("user_data") {
        std::fs::write(latest.join("user_data"), ud).unwrap_or_else(|e| panic!("user_data: {e}"));
    }
    let mut cmd = std::process::Command::new("genisoimage");
    cmd.args(["-quiet", "-o"])
        .arg(image)
        .args(["-V", label, "-J", "-r"])
        .arg(&src);
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?} (is it installed?): {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&src);
    "iso9660"
}

#[cfg(test)]
mod tests {
    use leasehook_core::model::{Family, IfName, Lease, MacAddr, Reason};
    use leasehook_core::source::openstack::nic::{
        Answer, NetworkType, assess, parse_network_data, slaac_address, unleased,
    };
    use leasehook_core::source::provider::NicEvent;

    use super::*;

    fn lease(address: &str, reason: Reason) -> Lease {
        let address: IpAddr = address.parse().unwrap();
        Lease {
            family: Family::of(&address),
            address,
            prefix_len: if address.is_ipv4() { 24 } else { 128 },
            routers: Vec::new(),
            reason,
        }
    }

    fn complete(tree: &Value, mac: &str, l: Lease) -> bool {
        let event = NicEvent::try_new(
            IfName::try_new("eth1").unwrap(),
            mac.parse().unwrap(),
            vec![l],
        )
        .unwrap();
        let body = tree["network_data"].to_string();
        assess(&event, &Answer::Body(body)).unwrap().is_complete()
    }

    /// The kinds of eth1's networks in `tree`.
    fn eth1_kinds(tree: &Value) -> Vec<NetworkType> {
        let d = parse_network_data(&tree["network_data"].to_string()).unwrap();
        let link = d.link(MAC1.parse().unwrap()).unwrap();
        d.networks_of(link).map(|n| n.kind).collect()
    }

    #[test]
    fn the_worlds_are_novas_shapes_and_leasehook_reads_them() {
        let dual = dual_stack_world();
        assert_eq!(
            eth1_kinds(&dual),
            [NetworkType::Ipv4Dhcp, NetworkType::Ipv6Dhcp]
        );
        // dnsmasq's DHCPv6 lease and the DHCPv4 one agree with it; eth0's too.
        assert!(complete(&dual, MAC1, lease(ETH1_V6[0], Reason::Bound)));
        assert!(complete(&dual, MAC1, lease("10.98.1.20", Reason::Bound)));
        assert!(complete(&dual, MAC0, lease(ETH0_V6, Reason::Bound)));
        assert!(!complete(
            &dual,
            MAC1,
            lease("fd00:98:1::21", Reason::Bound)
        ));
        // IPv6-only: no IPv4 network on eth1, its DHCPv6 lease is enough.
        let v6 = ipv6_only_world();
        assert_eq!(eth1_kinds(&v6), [NetworkType::Ipv6Dhcp]);
        assert!(complete(&v6, MAC1, lease(ETH1_V6[0], Reason::Bound)));
        // SLAAC: the EUI-64 of MAC1, an autoconf lease no DHCP server gives.
        let slaac = slaac_world();
        assert_eq!(
            eth1_kinds(&slaac),
            [NetworkType::Ipv4Dhcp, NetworkType::Ipv6Slaac]
        );
        let mac1: MacAddr = MAC1.parse().unwrap();
        let prefix = ETH1_V6_SUBNET.parse().unwrap();
        assert_eq!(
            slaac_address(Some(prefix), mac1)
                .unwrap()
                .addr()
                .to_string(),
            ETH1_SLAAC
        );
        let d = parse_network_data(&slaac["network_data"].to_string()).unwrap();
        let u = unleased(&d);
        assert_eq!(u.len(), 1);
        assert_eq!(u[0].mac, mac1);
        assert_eq!(u[0].leases.len(), 1);
        assert_eq!(u[0].leases[0].reason, Reason::Autoconf);
        assert_eq!(u[0].leases[0].address.to_string(), ETH1_SLAAC);
        assert!(complete(&slaac, MAC1, lease(ETH1_SLAAC, Reason::Autoconf)));
        // Every world still serves the rest of world_tree.
        for t in [&dual, &v6, &slaac] {
            assert_eq!(t["meta_data"]["uuid"], INSTANCE_ID);
            assert!(
                t["network_data"]["networks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|n| n["type"].as_str().unwrap().starts_with("ipv6"))
                    .all(|n| n["routes"][0]["gateway"] == V6_GATEWAY)
            );
        }
    }
}

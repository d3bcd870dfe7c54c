// SPDX-License-Identifier: Apache-2.0
//! Performs IO: an Oracle Cloud Infrastructure (OCI) instance metadata service
//! emulator, IMDS version 2, for tests and benchmarks (never for production),
//! from Oracle's documented formats ("Getting Instance Metadata").
//!
//! * `GET /opc/v2/vnics/`: every VNIC, a JSON list, the primary first
//!   (`vnicId, privateIp, vlanTag, macAddr, virtualRouterIp, subnetCidrBlock`,
//!   `nicIndex` on bare metal, the IPv6 keys when given: `ipv6Addresses`,
//!   `ipv6SubnetCidrBlock`, `ipv6VirtualRouterIp`; an IPv6-only VNIC has no
//!   `privateIp` nor `virtualRouterIp` and `subnetCidrBlock` `"<null>"`). The
//!   worlds: [`world_vnics`] (IPv4), [`dual_stack_world`] and [`ipv6_only_world`]
//!   (issue 34's shared instance). `GET /opc/v2/instance/`
//!   the instance document, and below it any key (`/opc/v2/instance/region`: a
//!   leaf as text, an object as JSON), as OCI serves them.
//! * Enforced as an instance with IMDSv1 disabled: every `/opc/v2/` request must
//!   carry `Authorization: Bearer Oracle` (401 without; Oracle documents such
//!   requests as "rejected"), requests naming a proxy (`Forwarded`,
//!   `X-Forwarded-For`, `X-Forwarded-Host`) are rejected (401 too), the v1 paths
//!   (`/opc/v1/`, `/openstack/`) answer 404, and only `GET` is served (405).
//! * Scenario ([`Scenario`]): VNICs absent until `after` seconds since the first
//!   answered request (the hot-plug race), or while a file in the world's folder
//!   names them ([`DETACHED_FILE`]: one MAC per line, read on every request, so a
//!   test detaches a VNIC when it wants), a fault while a file names one
//!   ([`FAULT_FILE`]), and rules (a path prefix, a time window,
//!   a count) that delay, answer a status (with `Retry-After`), or `drop` /
//!   `garbage` / `not-json`.
//!
//! Every request is logged ([`LogEntry`]: time, peer, method, path, the
//! `Authorization` header, the status or action) in memory and, with
//! [`shell::Config::log_file`], one line per request.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Instant;

use serde_json::{Value, json};

use crate::shell::{
    self, HeaderLogEntry, LoggedHeader, Reply, RequestLog, Service, Shell, State, header,
};
use crate::world::{MAC0, MAC1};

/// The file below the world's folder whose lines (MACs) leave VNICs out of the
/// `/opc/v2/vnics/` answer while it names them: a detached VNIC.
pub const DETACHED_FILE: &str = "oracle-detached";

/// The file below the world's folder that, while it exists, makes every answer
/// a fault: its first word is a status (`401`, `503`, ...), `garbage`,
/// `not-json` or `drop` (read on every request).
pub const FAULT_FILE: &str = "oracle-fault";

/// The log file's name below the world's folder (the binary's `--dir`).
pub const LOG_FILE: &str = "oracle-imds.log";

/// The header every v2 request must carry.
pub const AUTH: &str = "Bearer Oracle";

/// One `/opc/v2/vnics/` entry of a virtual machine: `privateIp` in `subnet`
/// behind `router`, a `vlanTag` as OCI gives every VNIC.
pub fn vnic(mac: &str, ip: &str, subnet: &str, router: &str, vlan_tag: u16) -> Value {
    json!({
        "vnicId": format!("ocid1.vnic.oc1.iad.{}", mac.replace(':', "")),
        "privateIp": ip,
        "vlanTag": vlan_tag,
        "macAddr": mac.to_uppercase(),
        "virtualRouterIp": router,
        "subnetCidrBlock": subnet,
    })
}

/// The test world's VM: `eth0` (the primary VNIC, 10.98.0.10, served by DHCP)
/// and `eth1` (a secondary VNIC, 10.98.1.20, which OCI serves no DHCP).
pub fn world_vnics() -> Value {
    json!([
        vnic(MAC0, "10.98.0.10", "10.98.0.0/24", "10.98.0.1", 1039),
        vnic(MAC1, "10.98.1.20", "10.98.1.0/24", "10.98.1.1", 1041),
    ])
}

/// The IPv6 router every VNIC of the dual-stack worlds publishes
/// (`ipv6VirtualRouterIp`): link-local, as OCI's are (`fe80::200:17ff:fe40:8972`
/// in cloud-init's recorded answers); the namespace world's routers carry it.
pub const IPV6_ROUTER: &str = "fe80::1";

/// eth0's IPv6 in the dual-stack worlds: its address and subnet.
pub const ETH0_IPV6: (&str, &str) = ("fd00:98:0::10", "fd00:98:0::/64");

/// eth1's IPv6 addresses in the dual-stack worlds: the one dnsmasq also leases
/// by DHCPv6 (OCI serves DHCPv6 on every VNIC), then a secondary one.
pub const ETH1_IPV6: [&str; 2] = ["fd00:98:1::20", "fd00:98:1::21"];

/// eth1's IPv6 subnet in the dual-stack worlds.
pub const ETH1_IPV6_SUBNET: &str = "fd00:98:1::/64";

/// `entry` with IPv6: `ipv6Addresses` (a list of strings, as OCI writes it),
/// `ipv6SubnetCidrBlock` and `ipv6VirtualRouterIp` ([`IPV6_ROUTER`]).
pub fn with_ipv6(mut entry: Value, addresses: &[&str], subnet: &str) -> Value {
    entry["ipv6Addresses"] = json!(addresses);
    entry["ipv6SubnetCidrBlock"] = subnet.into();
    entry["ipv6VirtualRouterIp"] = IPV6_ROUTER.into();
    entry
}

/// One `/opc/v2/vnics/` entry of a VNIC in an IPv6-only subnet, in the shape
/// of cloud-init's recorded OCI answers: no `privateIp`, no `virtualRouterIp`,
/// `subnetCidrBlock` the text `"<null>"`; its IPv6 as [`with_ipv6`] gives it.
pub fn ipv6_only_vnic(mac: &str, addresses: &[&str], subnet: &str, vlan_tag: u16) -> Value {
    let entry = json!({
        "vnicId": format!("ocid1.vnic.oc1.iad.{}", mac.replace(':', "")),
        "vlanTag": vlan_tag,
        "macAddr": mac.to_uppercase(),
        "subnetCidrBlock": "<null>",
    });
    with_ipv6(entry, addresses, subnet)
}

/// Issue 34's dual-stack instance, as `--vnics` takes it: eth0 the primary VNIC
/// (10.98.0.10, and `fd00:98:0::10` in `fd00:98:0::/64`), eth1 a secondary VNIC
/// (10.98.1.20, and [`ETH1_IPV6`] in [`ETH1_IPV6_SUBNET`]), each through
/// [`IPV6_ROUTER`].
pub fn dual_stack_world() -> Value {
    json!([
        with_ipv6(
            vnic(MAC0, "10.98.0.10", "10.98.0.0/24", "10.98.0.1", 1039),
            &[ETH0_IPV6.0],
            ETH0_IPV6.1
        ),
        with_ipv6(
            vnic(MAC1, "10.98.1.20", "10.98.1.0/24", "10.98.1.1", 1041),
            &ETH1_IPV6,
            ETH1_IPV6_SUBNET
        ),
    ])
}

/// Issue 34's IPv6-only variant, as `--vnics` takes it: eth0 as in
/// [`dual_stack_world`], eth1 an IPv6-only VNIC ([`ipv6_only_vnic`]) with the
/// same IPv6.
pub fn ipv6_only_world() -> Value {
    json!([
        with_ipv6(
            vnic(MAC0, "10.98.0.10", "10.98.0.0/24", "10.98.0.1", 1039),
            &[ETH0_IPV6.0],
            ETH0_IPV6.1
        ),
        ipv6_only_vnic(MAC1, &ETH1_IPV6, ETH1_IPV6_SUBNET, 1041),
    ])
}

/// The test world's instance document (cloud-init's recorded answer's shape).
pub fn world_instance() -> Value {
    json!({
        "availabilityDomain": "Uocm:US-ASHBURN-AD-1",
        "faultDomain": "FAULT-DOMAIN-2",
        "compartmentId": "ocid1.compartment.oc1..aaaaleasehook",
        "displayName": "leasehook-vm",
        "hostname": "leasehook-vm",
        "id": "ocid1.instance.oc1.iad.anuwcljleasehook",
        "image": "ocid1.image.oc1.iad.aaaaleasehook",
        "metadata": {
            "ssh_authorized_keys": "ssh-ed25519 AAAAC3Nza leasehook@test",
            "user_data": "I2Nsb3VkLWNvbmZpZwo="
        },
        "region": "iad",
        "canonicalRegionName": "us-ashburn-1",
        "ociAdName": "iad-ad-1",
        "shape": "VM.Standard.E4.Flex",
        "state": "Running"
    })
}

/// A VNIC that appears late (its MAC in either case).
pub use crate::shell::LateMac as Appear;

/// What misbehaves, and when: VNICs that appear late and the shell's fault
/// rules ([`crate::shell::Rule`]).
pub type Scenario = shell::Scenario<Appear>;

/// What OCI's IMDS serves (the cloud's part of [`Config`]).
#[derive(Debug, Clone)]
pub struct Served {
    /// The `/opc/v2/vnics/` list.
    pub vnics: Value,
    /// The `/opc/v2/instance/` document.
    pub instance: Value,
    /// The file of detached MACs ([`DETACHED_FILE`]), read on every request.
    pub detached_file: Option<PathBuf>,
    /// The fault file ([`FAULT_FILE`]), read on every request.
    pub fault_file: Option<PathBuf>,
}

impl Default for Served {
    /// The world's VNICs and instance.
    fn default() -> Self {
        Self {
            vnics: world_vnics(),
            instance: world_instance(),
            detached_file: None,
            fault_file: None,
        }
    }
}

/// The emulator's configuration: the shell's (log) and what it serves
/// (`Config::default()`: the world's VNICs and instance, nothing misbehaving).
pub type Config = shell::Config<Served, Scenario>;

/// The header the log keeps: `Authorization`, written `authorization=`.
#[derive(Debug, Clone, PartialEq)]
pub struct OracleAuthorization;

impl LoggedHeader for OracleAuthorization {
    const NAME: &'static str = "authorization";
}

/// One logged request: `SECONDS PEER METHOD URL authorization=H STATUS`.
pub type LogEntry = HeaderLogEntry<OracleAuthorization>;

/// Reads the requests in a log file.
pub fn read_log(path: &std::path::Path) -> Vec<LogEntry> {
    shell::read_log(path)
}

/// OCI IMDS as the shell serves it: its configuration and live state.
#[derive(Debug)]
pub struct Oracle {
    state: State<Served, Scenario, LogEntry>,
}

/// A running emulator; stops when dropped.
pub type Emulator = Shell<Oracle>;

impl Shell<Oracle> {
    /// Binds `bind` and serves on a thread.
    pub fn start(bind: SocketAddr, config: Config) -> io::Result<Self> {
        let service = Oracle {
            state: State::open(config)?,
        };
        Shell::bind(bind, "oracle-emulator", service)
    }
}

impl Service for Oracle {
    type Entry = LogEntry;

    fn handle(&self, request: tiny_http::Request) {
        let now = Instant::now();
        let reply = self.reply(self.state.clock.at(now), &request);
        let t = self.state.clock.since_start(now);
        let entry = LogEntry::of(t, &request, "Authorization", reply.label());
        self.state.log.answer(entry, reply, request, &[]);
    }

    fn requests(&self) -> &RequestLog<LogEntry> {
        &self.state.log
    }
}

fn error(status: u16, code: &str, message: &str) -> Reply {
    Reply::new(
        status,
        json!({ "code": code, "message": message }).to_string(),
    )
    .content_type("application/json")
}

/// An injected status's answer.
fn injected(status: u16, body: Option<&str>) -> Reply {
    error(
        status,
        "Injected",
        body.unwrap_or(&format!("injected {status}")),
    )
}

fn text(body: String) -> Reply {
    Reply::new(200, body).content_type("text/plain")
}

impl Oracle {
    fn reply(&self, t: f64, request: &tiny_http::Request) -> Reply {
        let method = request.method().as_str();
        let (path, query) = shell::split_url(request.url());
        if let Some(r) = self
            .state
            .rules
            .matching(method, &path, &query, t)
            .and_then(|rule| shell::fault(rule, injected))
        {
            return r;
        }
        if let Some(r) = self.state.config.world.fault_file.as_ref().and_then(|f| {
            let text = std::fs::read_to_string(f).ok()?;
            shell::fault_named(text.split_whitespace().next()?, injected)
        }) {
            return r;
        }
        if method != "GET" {
            return error(405, "MethodNotAllowed", "Method not allowed");
        }
        let Some(rest) = path.strip_prefix("/opc/v2/") else {
            // IMDSv1 is disabled on this instance: its paths are not found.
            return error(404, "NotFound", "Not Found");
        };
        if header(request, "Authorization") != Some(AUTH) {
            return error(401, "NotAuthenticated", "Authorization header is missing");
        }
        if ["Forwarded", "X-Forwarded-For", "X-Forwarded-Host"]
            .into_iter()
            .any(|h| header(request, h).is_some())
        {
            return error(401, "NotAuthenticated", "Forwarded requests are rejected");
        }
        let mut segs = rest.split('/').filter(|s| !s.is_empty());
        match segs.next() {
            Some("vnics") if segs.next().is_none() => {
                Reply::new(200, self.vnics(t).to_string()).content_type("application/json")
            }
            Some("instance") => {
                let mut node = &self.state.config.world.instance;
                for seg in segs {
                    match node.get(seg) {
                        Some(n) => node = n,
                        None => return error(404, "NotFound", "Not Found"),
                    }
                }
                match node {
                    Value::String(s) => text(s.clone()),
                    Value::Object(_) | Value::Array(_) => {
                        Reply::new(200, node.to_string()).content_type("application/json")
                    }
                    other => text(other.to_string()),
                }
            }
            _ => error(404, "NotFound", "Not Found"),
        }
    }

    /// The VNIC list at `t`, late and detached VNICs left out.
    fn vnics(&self, t: f64) -> Value {
        let mut list = self.state.config.world.vnics.clone();
        if let Some(a) = list.as_array_mut() {
            shell::without_hidden_macs(
                a,
                "macAddr",
                &self.state.config.scenario.appear,
                t,
                self.state.config.world.detached_file.as_deref(),
                str::to_lowercase,
            );
        }
        list
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::time::Duration;

    /// A raw HTTP/1.0 request: (status, body).
    fn get(base: &str, method: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
        let (status, _, body) = shell::raw_request(base, method, path, headers);
        (status, body)
    }

    const AUTHZ: [(&str, &str); 1] = [("Authorization", "Bearer Oracle")];

    #[test]
    fn the_header_rule_paths_and_leaves() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.world.detached_file = Some(dir.path().join(DETACHED_FILE));
        config.world.fault_file = Some(dir.path().join(FAULT_FILE));
        config.log_file = Some(dir.path().join(LOG_FILE));
        let emu = Emulator::start("127.0.0.1:0".parse().unwrap(), config).unwrap();
        let b = emu.base_url();
        let (s, body) = get(&b, "GET", "/opc/v2/vnics/", &AUTHZ);
        assert_eq!(s, 200);
        let list: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(list.as_array().unwrap().len(), 2);
        assert_eq!(list[0]["macAddr"], MAC0.to_uppercase());
        assert_eq!(get(&b, "GET", "/opc/v2/vnics/", &[]).0, 401);
        assert_eq!(
            get(
                &b,
                "GET",
                "/opc/v2/vnics/",
                &[("Authorization", "Bearer Amazon")]
            )
            .0,
            401
        );
        assert_eq!(
            get(
                &b,
                "GET",
                "/opc/v2/vnics/",
                &[
                    ("Authorization", "Bearer Oracle"),
                    ("X-Forwarded-For", "10.0.0.1")
                ]
            )
            .0,
            401
        );
        assert_eq!(get(&b, "GET", "/opc/v1/vnics/", &[]).0, 404);
        assert_eq!(
            get(&b, "GET", "/openstack/latest/meta_data.json", &[]).0,
            404
        );
        assert_eq!(get(&b, "PUT", "/opc/v2/vnics/", &AUTHZ).0, 405);
        assert_eq!(
            get(&b, "GET", "/opc/v2/instance/canonicalRegionName", &AUTHZ),
            (200, "us-ashburn-1".to_owned())
        );
        let (s, body) = get(&b, "GET", "/opc/v2/instance/", &AUTHZ);
        assert_eq!(s, 200);
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap()["id"],
            "ocid1.instance.oc1.iad.anuwcljleasehook"
        );
        assert_eq!(get(&b, "GET", "/opc/v2/instance/nothing", &AUTHZ).0, 404);
        // A detached VNIC is no longer listed.
        std::fs::write(dir.path().join(DETACHED_FILE), format!("{MAC1}\n")).unwrap();
        let (_, body) = get(&b, "GET", "/opc/v2/vnics/", &AUTHZ);
        assert_eq!(
            serde_json::from_str::<Value>(&body)
                .unwrap()
                .as_array()
                .unwrap()
                .len(),
            1
        );
        // A fault while the fault file names one.
        std::fs::write(dir.path().join(FAULT_FILE), "503\n").unwrap();
        assert_eq!(get(&b, "GET", "/opc/v2/vnics/", &AUTHZ).0, 503);
        std::fs::write(dir.path().join(FAULT_FILE), "not-json").unwrap();
        assert!(
            get(&b, "GET", "/opc/v2/vnics/", &AUTHZ)
                .1
                .starts_with("<html>")
        );
        std::fs::remove_file(dir.path().join(FAULT_FILE)).unwrap();
        assert_eq!(get(&b, "GET", "/opc/v2/vnics/", &AUTHZ).0, 200);
        let log = read_log(&dir.path().join(LOG_FILE));
        assert_eq!(log.len(), 14);
        assert_eq!(log[0].header, "Bearer%20Oracle");
        assert_eq!(log[1].header, "-");
        assert_eq!(log[1].status, "401");
    }

    #[test]
    fn the_dual_stack_and_ipv6_only_worlds_are_what_leasehook_reads() {
        use leasehook_core::model::{Family, Reason};
        use leasehook_core::source::oracle::vnic::{parse_vnics, unleased};

        let c = Config {
            world: Served {
                vnics: dual_stack_world(),
                ..Served::default()
            },
            ..Config::default()
        };
        let e = Emulator::start("127.0.0.1:0".parse().unwrap(), c).unwrap();
        let (s, body) = get(&e.base_url(), "GET", "/opc/v2/vnics/", &AUTHZ);
        assert_eq!(s, 200);
        let net = parse_vnics(&body).unwrap();
        let eth1 = net.vnic(MAC1.parse().unwrap()).unwrap().metadata();
        let listed: Vec<String> = eth1.ipv6s.iter().map(ToString::to_string).collect();
        assert_eq!(listed, ETH1_IPV6);
        assert_eq!(
            eth1.subnet_ipv6_cidr_blocks[0].to_string(),
            ETH1_IPV6_SUBNET
        );
        assert_eq!(eth1.local_ipv4s[0].to_string(), "10.98.1.20");
        let eth0 = net.primary().unwrap().metadata();
        assert_eq!(eth0.ipv6s[0].to_string(), "fd00:98::10");
        let u = unleased(&net);
        let families: Vec<Family> = u.nics[0].leases.iter().map(|l| l.family).collect();
        assert_eq!(families, [Family::V4, Family::V6]);

        // IPv6-only: eth1 has no IPv4 at all, one IPv6 lease through the router.
        let net = parse_vnics(&ipv6_only_world().to_string()).unwrap();
        let eth1 = net.vnic(MAC1.parse().unwrap()).unwrap();
        assert_eq!(eth1.ipv4(), None);
        let u = unleased(&net);
        assert_eq!(u.nics[0].leases.len(), 1);
        let lease = &u.nics[0].leases[0];
        assert_eq!(
            (
                lease.family,
                lease.address.to_string(),
                lease.prefix_len,
                lease.reason
            ),
            (Family::V6, ETH1_IPV6[0].to_owned(), 128, Reason::Metadata)
        );
        assert_eq!(lease.routers[0].to_string(), IPV6_ROUTER);
        assert_eq!(ipv6_only_world()[1]["subnetCidrBlock"], "<null>");
    }

    #[test]
    fn late_vnics_and_injected_faults() {
        let c = Config {
            scenario: Scenario::from_value(json!({
                "appear": [{"mac": MAC1, "after": 0.3}],
                "rules": [{"path": "/opc/v2/instance", "count": 1, "status": 503, "retry_after": 1},
                          {"path": "/opc/v2/instance", "count": 1, "action": "not-json"}]
            }))
            .unwrap(),
            ..Config::default()
        };
        let e = Emulator::start("127.0.0.1:0".parse().unwrap(), c).unwrap();
        let b = e.base_url();
        let count = |b: &str| {
            serde_json::from_str::<Value>(&get(b, "GET", "/opc/v2/vnics/", &AUTHZ).1)
                .unwrap()
                .as_array()
                .unwrap()
                .len()
        };
        assert_eq!(count(&b), 1);
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(count(&b), 2);
        assert_eq!(get(&b, "GET", "/opc/v2/instance/", &AUTHZ).0, 503);
        let (s, body) = get(&b, "GET", "/opc/v2/instance/", &AUTHZ);
        assert_eq!((s, body.starts_with("<html>")), (200, true));
        assert_eq!(get(&b, "GET", "/opc/v2/instance/", &AUTHZ).0, 200);
        assert_eq!(e.log()[3].status, "not-json");
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: a Google Compute Engine metadata server emulator on `tiny_http`,
//! for tests and benchmarks, from Google's documented formats. It runs
//! in-process ([`GceEmulator::start`], a thread on a loopback port) or as
//! `leasehook-emulator --cloud gce` (in the test world's router namespace, on
//! 169.254.169.254:80).
//!
//! # What it serves
//!
//! `/computeMetadata/v1/` over a JSON tree `{"instance": {...}, "project": {...}}`
//! written with the path names (`network-interfaces`, `ip-aliases`, ...). A
//! path walks the tree (a list by index); an object or list answers its listing
//! (one entry a line, containers with a trailing `/`), a string or number its
//! text, `null` or a missing key 404. With `?recursive=true` a container answers
//! JSON whose keys are camelCase (`ipAliases`, `networkInterfaces`), as the real
//! server does, except the user's keys under `attributes`. [`world_tree`] is the
//! test world's IPv4 instance; [`dual_stack_world`] and [`ipv6_only_world`] add
//! GCE's IPv6 keys (issue 34: `ipv6s` written uncompressed, the NIC's /96 in
//! `ipv6`, `gateway-ipv6`), which `?recursive=true` writes `ipv6s`, `ipv6`,
//! `gatewayIpv6`. A test that sets `instance/vlan-network-interfaces` (parent
//! index, then VLAN id, then the Dynamic NIC's entry with `parent-interface`
//! and `vlan`) is served it as the server serves Dynamic NICs; unset, it is a
//! 404, as on an instance without one.
//!
//! # The rules it enforces
//!
//! * A request without `Metadata-Flavor: Google`, or with `X-Forwarded-For`,
//!   gets 403 (the real server's answer to a request that may come through a
//!   proxy).
//! * Every answer carries `Metadata-Flavor: Google` (unless a rule's action is
//!   `no-flavor`, an impostor).
//! * With [`shell::Config::allowed_sources`], a request from any other address gets
//!   403 (the server answers only the instance itself).
//!
//! # As the server answers (issue 31)
//!
//! * `GET` and `HEAD` (the body left out) are served; any other method gets 405
//!   (the server's API is read-only outside guest attributes, which are not
//!   emulated: "Querying VM metadata",
//!   <https://cloud.google.com/compute/docs/metadata/querying-metadata>).
//! * `recursive=true` is read without case: cloud-init's `DataSourceGCE` asks
//!   `instance/attributes/?recursive=True`.
//! * A 404 is Google's HTML error page (`text/html; charset=UTF-8`, "Error 404
//!   (Not Found)!!1") and carries `Metadata-Flavor: Google`, as the server's does
//!   (googleapis/gcp-metadata#657 shows one).
//! * `GET /` answers `0.1/` and `computeMetadata/` even without the
//!   `Metadata-Flavor` header (the Google auth libraries' "on GCE?" probe;
//!   googleapis/google-auth-library-java#282 shows the server doing it).
//!
//! # The long poll (issue 35)
//!
//! Every normal 200 answer carries an `ETag` (a hash of its body). With
//! `wait_for_change=true` the server answers at once when `last_etag` is not the
//! current one; otherwise (or without `last_etag`) it holds the request until the
//! answer changes (looked at every 20 ms: a late NIC appearing, a change
//! through the control path) or `timeout_sec` passes (default 300 s), then
//! answers the current tree and `ETag`, as the real server does ("Waiting for
//! updates", <https://cloud.google.com/compute/docs/metadata/querying-metadata#waitforchange>).
//! A held request is logged when it arrives (status `open`) and again when
//! answered, so a test can count the requests open at a time.
//!
//! # Control (tests only)
//!
//! `PUT /emulator/v1/PATH` with a JSON body replaces the tree's value at `PATH`
//! (path names, below the tree's root: `instance/network-interfaces/1/ip-aliases`),
//! logged with status `set`; [`GceEmulator::set`] does the same in-process and
//! `leasehook-emulator --cloud gce --set ADDR:PORT PATH JSON` is its client.
//!
//! # Scenario
//!
//! ```json
//! {"appear": [{"nic": 1, "after": 2.0}],
//!  "rules": [{"path": "/computeMetadata/v1/instance/network-interfaces", "status": 503,
//!             "retry_after": 1, "from": 0, "until": 1.5, "count": 3, "delay": 0.5},
//!            {"path": "/computeMetadata/v1/instance/id", "action": "garbage"}]}
//! ```
//!
//! Times are seconds since the first request. `appear`: the NIC at index `nic`
//! is not listed in `network-interfaces` until `after` (the hot-plug race).
//! `rules`: the first that matches (path by whole segments, `query` a part of
//! the query, window, `count`)
//! waits `delay`, then answers `status` (+ `Retry-After`, + `body`) or does
//! `action`: `garbage` (200, a body that is neither JSON nor UTF-8), `huge` (200,
//! `size` bytes, default 1 MiB), `no-flavor` (the normal answer without
//! `Metadata-Flavor`), `drop` (never answered). Neither: only the delay.
//!
//! # Log
//!
//! One line per request, in memory and, when asked, appended to a file:
//! `SECONDS PEER METHOD PATH?QUERY STATUS FLAVOR`, where `FLAVOR` is the
//! request's `Metadata-Flavor` value (`-` when absent) and `STATUS` the status or
//! the action.

use std::io;
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::shell::{
    self, Action, LogLine, Reply, RequestLog, Rule, Service, Shell, State, header, under,
};
use crate::world::{MAC0, MAC1};

/// The API root.
pub const ROOT: &str = "/computeMetadata/v1";

/// The server's 404 page (Google's error page, its style sheet left out).
const NOT_FOUND: &[u8] = b"<!DOCTYPE html>\n<html lang=en>\n  <meta charset=utf-8>\n  \
<title>Error 404 (Not Found)!!1</title>\n  <p><b>404.</b> <ins>That\xe2\x80\x99s an error.</ins>\n  \
<p>The requested URL was not found on this server.  <ins>That\xe2\x80\x99s all we know.</ins>\n";
/// Its content type.
const HTML: &str = "text/html; charset=UTF-8";

/// A NIC that appears late.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Appear {
    /// Its index in `network-interfaces`.
    pub nic: usize,
    /// Seconds after the first request.
    pub after: f64,
}

/// The log file's name below the world's folder (`--dir`).
pub const LOG_NAME: &str = "gce.log";

/// Late NICs and misbehaviour (see the module docs): the shell's fault rules
/// ([`crate::shell::Rule`]).
pub type Scenario = shell::Scenario<Appear>;

/// The emulator's configuration: the shell's (log, allowed sources, rate
/// limit) and the tree served, `{"instance": {...}, "project": {...}}` with the
/// path names.
pub type Config = shell::Config<Value, Scenario>;

/// One request as logged: the shell's line (the path with its query), then
/// the request's `Metadata-Flavor` (`-` when absent).
#[derive(Debug, Clone, PartialEq)]
pub struct LogEntry {
    /// Time, peer, method, path and query, status or action.
    pub request: shell::LogEntry,
    /// The request's `Metadata-Flavor`, `-` when absent.
    pub flavor: String,
}

impl std::ops::Deref for LogEntry {
    type Target = shell::LogEntry;

    fn deref(&self) -> &shell::LogEntry {
        &self.request
    }
}

impl LogLine for LogEntry {
    fn line(&self) -> String {
        format!("{} {}", self.request.line(), self.flavor)
    }

    fn parse(line: &str) -> Option<Self> {
        let (request, flavor) = line.rsplit_once(' ')?;
        Some(Self {
            request: shell::LogEntry::parse(request)?,
            flavor: flavor.to_owned(),
        })
    }
}

/// The GCE metadata server as the shell serves it: its configuration and live
/// state.
#[derive(Debug)]
pub struct Gce {
    state: State<Value, Scenario, LogEntry>,
    /// The tree served now (the config's, changed by the control path).
    tree: Mutex<Value>,
}

/// A running emulator; stops when dropped.
pub type GceEmulator = Shell<Gce>;

impl Shell<Gce> {
    /// Binds `bind` and serves on a thread.
    pub fn start(bind: SocketAddr, config: Config) -> io::Result<Self> {
        let service = Gce {
            tree: Mutex::new(config.world.clone()),
            state: State::open(config)?,
        };
        Shell::bind(bind, "gce-emulator", service)
    }

    /// How many requests asked for a path (with query) containing `part`.
    pub fn count(&self, part: &str) -> usize {
        self.log().iter().filter(|e| e.path.contains(part)).count()
    }

    /// Replaces the value at `path` (path names below the tree's root, `/`
    /// separated); held long polls see the change.
    pub fn set(&self, path: &str, value: Value) -> Result<(), String> {
        set_in(self.service(), path, value)
    }

    /// Requests with `wait_for_change=true` that arrived (each logged `open`
    /// when held, or answered at once).
    pub fn long_polls(&self) -> usize {
        long_polls(&self.log())
    }
}

impl Service for Gce {
    type Entry = LogEntry;

    fn handle(&self, request: tiny_http::Request) {
        handle(self, request);
    }

    fn requests(&self) -> &RequestLog<LogEntry> {
        &self.state.log
    }
}

/// The world's instance (`tests/src/world.rs`): nic0 `eth0` 10.98.0.10, nic1
/// `eth1` 10.98.1.20 with the alias 10.98.1.21/32, both subnets /24 behind
/// their first host.
pub fn world_tree() -> Value {
    let nic = |mac: &str, ip: &str, n: u8, aliases: Value| {
        json!({
            "access-configs": [], "dns-servers": ["169.254.169.254"], "forwarded-ips": [],
            "gateway": format!("10.98.{n}.1"), "ip": ip, "ip-aliases": aliases, "mac": mac,
            "mtu": 1460, "network": format!("projects/123456789/networks/net{n}"),
            "subnetmask": "255.255.255.0", "target-instance-ips": []
        })
    };
    json!({
        "instance": {
            "id": 4_520_031_799_277_581_759_u64,
            "hostname": "vm-1.us-central1-a.c.leasehook-test.internal",
            "zone": "projects/123456789/zones/us-central1-a",
            "machine-type": "projects/123456789/machineTypes/e2-standard-2",
            "attributes": {"user-data": "#cloud-config\n{}\n"},
            "network-interfaces": [
                nic(MAC0, "10.98.0.10", 0, json!([])),
                nic(MAC1, "10.98.1.20", 1, json!(["10.98.1.21/32"]))
            ]
        },
        "project": {"project-id": "leasehook-test", "numeric-project-id": 123_456_789}
    })
}

/// eth0's IPv6 address in [`dual_stack_world`]: the first of its /96
/// ([`ETH0_IPV6_RANGE`]), which GCE's DHCPv6 leases. The shared world's
/// `fd00:98:0::10` cannot be: GCE leases the first address of the NIC's /96,
/// whose last 32 bits are 0.
pub const ETH0_IPV6: &str = "fd00:98::10:0:0";

/// eth0's /96 in [`dual_stack_world`], inside the shared world's
/// `fd00:98:0::/64`.
pub const ETH0_IPV6_RANGE: &str = "fd00:98::10:0:0/96";

/// eth1's IPv6 address in [`dual_stack_world`] and [`ipv6_only_world`], the
/// one dnsmasq must lease it on GCE (for the shared world's `fd00:98:1::20`):
/// the first of [`ETH1_IPV6_RANGE`].
pub const ETH1_IPV6: &str = "fd00:98:1::20:0:0";

/// eth1's /96, inside the shared world's `fd00:98:1::/64`.
pub const ETH1_IPV6_RANGE: &str = "fd00:98:1::20:0:0/96";

/// An address of eth1's range other than the leased one (the shared world's
/// secondary `fd00:98:1::21`): GCE lists none besides the first ("applications
/// can use any of the IP addresses in the /96 range"), so the metadata does not
/// name it; the rule from the range covers it.
pub const ETH1_IPV6_SECONDARY: &str = "fd00:98:1::20:0:21";

/// The IPv6 gateway the worlds publish (`gateway-ipv6`), link-local: the shared
/// world gives `gw0` and `gw1` `fe80::1`.
pub const IPV6_GATEWAY: &str = "fe80::1";

/// An address as GCE writes `ipv6s`: every group, none left out
/// (`fd20:172:1610:7003:0:1:0:0` on a real VM).
fn uncompressed(a: &str) -> String {
    let a: std::net::Ipv6Addr = a.parse().unwrap_or_else(|e| panic!("{a}: {e}"));
    a.segments()
        .iter()
        .map(|s| format!("{s:x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Adds a NIC's IPv6 keys as GCE publishes them (`ipv6s`, `ipv6`,
/// `gateway-ipv6`, `dhcpv6-refresh`, `forwarded-ipv6s`; path names, which the
/// recursive answer writes `ipv6s`, `ipv6`, `gatewayIpv6`, ...).
fn with_ipv6(nic: &mut Value, address: &str, range: &str) {
    if let Value::Object(m) = nic {
        m.insert("ipv6s".to_owned(), json!([uncompressed(address)]));
        m.insert("ipv6".to_owned(), json!([range]));
        m.insert("gateway-ipv6".to_owned(), json!(IPV6_GATEWAY));
        m.insert("dhcpv6-refresh".to_owned(), json!("2219726792944608985"));
        m.insert("forwarded-ipv6s".to_owned(), json!([]));
    }
}

/// [`world_tree`] with both NICs dual-stack (issue 34's shared world, in GCE's
/// format): eth0 [`ETH0_IPV6`] in [`ETH0_IPV6_RANGE`], eth1 [`ETH1_IPV6`] in
/// [`ETH1_IPV6_RANGE`], both behind [`IPV6_GATEWAY`].
pub fn dual_stack_world() -> Value {
    let mut tree = world_tree();
    for (i, address, range) in [
        (0, ETH0_IPV6, ETH0_IPV6_RANGE),
        (1, ETH1_IPV6, ETH1_IPV6_RANGE),
    ] {
        if let Some(nic) = tree["instance"]["network-interfaces"].get_mut(i) {
            with_ipv6(nic, address, range);
        }
    }
    tree
}

/// [`dual_stack_world`] with eth1 IPv6-only: its entry has no `ip`, `gateway`,
/// `subnetmask` or `ip-aliases` (an IPv6-only interface has no IPv4 address),
/// its IPv6 keys as in the dual-stack world.
pub fn ipv6_only_world() -> Value {
    let mut tree = dual_stack_world();
    if let Some(Value::Object(nic)) = tree["instance"]["network-interfaces"].get_mut(1) {
        for key in ["ip", "gateway", "subnetmask", "ip-aliases"] {
            nic.remove(key);
        }
    }
    tree
}

/// How many requests of `log` were long polls: held (their `open` line) or
/// answered at once (the answer of a held one, `STATUS:held`, is not counted
/// again).
pub fn long_polls(log: &[LogEntry]) -> usize {
    log.iter()
        .filter(|e| e.path.contains("wait_for_change=true") && !e.status.ends_with(":held"))
        .count()
}

/// How many long polls of `log` are held (logged `open`, not answered yet).
pub fn open_long_polls(log: &[LogEntry]) -> usize {
    let polls = log
        .iter()
        .filter(|e| e.path.contains("wait_for_change=true"));
    let (mut opened, mut answered) = (0usize, 0usize);
    for e in polls {
        if e.status == "open" {
            opened += 1;
        } else if e.status.ends_with(":held") {
            answered += 1;
        }
    }
    opened.saturating_sub(answered)
}

/// Replaces the value at `path` in the served tree.
fn set_in(sh: &Gce, path: &str, value: Value) -> Result<(), String> {
    let mut tree = sh.tree.lock().unwrap_or_else(PoisonError::into_inner);
    let mut node = &mut *tree;
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let Some((last, parents)) = segs.split_last() else {
        return Err("an empty path".to_owned());
    };
    for seg in parents {
        node = match node {
            Value::Object(m) => m.get_mut(*seg),
            Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| format!("{path}: no {seg}"))?;
    }
    match node {
        Value::Object(m) => {
            m.insert((*last).to_owned(), value);
        }
        Value::Array(a) => {
            let i = last
                .parse::<usize>()
                .map_err(|_| format!("{path}: {last} is no index"))?;
            match i.cmp(&a.len()) {
                std::cmp::Ordering::Less => a[i] = value,
                std::cmp::Ordering::Equal => a.push(value),
                std::cmp::Ordering::Greater => return Err(format!("{path}: {i} is past the end")),
            }
        }
        _ => return Err(format!("{path}: not below a container")),
    }
    Ok(())
}

/// The `ETag` of an answer's body.
fn etag(body: &[u8]) -> String {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    body.hash(&mut h);
    format!("{:016x}", h.finish())
}

/// A query parameter's value.
fn param<'q>(query: &'q str, name: &str) -> Option<&'q str> {
    query.split('&').find_map(|p| {
        let (k, v) = p.split_once('=').unwrap_or((p, ""));
        k.eq_ignore_ascii_case(name).then_some(v)
    })
}

/// `network-interfaces` without the NICs that have not appeared yet.
fn visible(sh: &Gce, t: f64) -> Value {
    let mut tree = sh
        .tree
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    if let Some(Value::Array(nics)) = tree
        .get_mut("instance")
        .and_then(|i| i.get_mut("network-interfaces"))
    {
        let scenario = &sh.state.config.scenario;
        let hidden: Vec<usize> = scenario.pending(t, |a| a.after).map(|a| a.nic).collect();
        let kept: Vec<Value> = nics
            .drain(..)
            .enumerate()
            .filter(|(i, _)| !hidden.contains(i))
            .map(|(_, n)| n)
            .collect();
        *nics = kept;
    }
    tree
}

fn camel(key: &str) -> String {
    let mut out = String::new();
    let mut up = false;
    for c in key.chars() {
        if c == '-' {
            up = true;
        } else if up {
            out.extend(c.to_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// The recursive JSON form: camelCase keys, except the user's under `attributes`.
fn recursive(v: &Value, user_keys: bool) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let key = if user_keys { k.clone() } else { camel(k) };
                    (key, recursive(v, k == "attributes"))
                })
                .collect::<Map<String, Value>>(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|v| recursive(v, false)).collect()),
        other => other.clone(),
    }
}

fn listing(v: &Value) -> String {
    let entry = |name: String, v: &Value| {
        if v.is_object() || v.is_array() {
            format!("{name}/\n")
        } else {
            format!("{name}\n")
        }
    };
    match v {
        Value::Object(m) => m.iter().map(|(k, v)| entry(k.clone(), v)).collect(),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, v)| entry(i.to_string(), v))
            .collect(),
        _ => String::new(),
    }
}

/// The normal answer: status, body, content type.
fn answer(sh: &Gce, t: f64, path: &str, query: &str) -> (u16, Vec<u8>, &'static str) {
    let Some(rest) = path.strip_prefix(ROOT) else {
        return if path == "/" {
            (
                200,
                b"0.1/\ncomputeMetadata/\n".to_vec(),
                "application/text",
            )
        } else {
            (404, NOT_FOUND.to_vec(), HTML)
        };
    };
    let tree = visible(sh, t);
    let mut node = &tree;
    let mut under_attributes = false;
    for seg in rest.split('/').filter(|s| !s.is_empty()) {
        match shell::child(node, seg) {
            Some(n) if !n.is_null() => {
                under_attributes = seg == "attributes";
                node = n;
            }
            _ => return (404, NOT_FOUND.to_vec(), HTML),
        }
    }
    let recursive_asked = query
        .split('&')
        .any(|p| p.eq_ignore_ascii_case("recursive=true"));
    match node {
        Value::Object(_) | Value::Array(_) if recursive_asked => (
            200,
            recursive(node, under_attributes).to_string().into_bytes(),
            "application/json",
        ),
        Value::Object(_) | Value::Array(_) => (200, listing(node).into_bytes(), "application/text"),
        Value::String(s) => (200, s.clone().into_bytes(), "application/text"),
        other => (200, other.to_string().into_bytes(), "application/text"),
    }
}

/// What every answer carries, with the flavor or without it (an impostor).
const ALWAYS: [(&str, &str); 2] = [
    ("Server", "Metadata Server for VM"),
    ("Metadata-Flavor", "Google"),
];

fn response(status: u16, body: Vec<u8>, ctype: &str) -> Reply {
    Reply::new(status, body).content_type(ctype)
}

/// With its `ETag`, when it is a 200.
fn tagged(reply: Reply) -> Reply {
    match (reply.status(), reply.body().map(etag)) {
        (Some(200), Some(tag)) => reply.header("ETag", tag),
        _ => reply,
    }
}

/// The answer to a request that passed the header and source checks: what the
/// matching rule says, else the tree's; and whether it carries the flavor.
fn reply(sh: &Gce, t: f64, path: &str, query: &str, rule: Option<&Rule>) -> (Reply, bool) {
    let normal = || {
        let (status, body, ctype) = answer(sh, t, path, query);
        tagged(response(status, body, ctype))
    };
    match rule {
        Some(r) if r.action == Some(Action::NoFlavor) => {
            (normal().labelled(Action::NoFlavor.label()), false)
        }
        Some(r) => (
            shell::fault(r, |status, body| {
                tagged(response(
                    status,
                    body.unwrap_or_default().into(),
                    "text/html",
                ))
            })
            .unwrap_or_else(normal),
            true,
        ),
        None => (normal(), true),
    }
}

/// The control path: `PUT /emulator/v1/PATH` with a JSON body.
fn control(sh: &Gce, t: f64, mut request: tiny_http::Request, path: &str) {
    let mut body = String::new();
    let result = io::Read::read_to_string(request.as_reader(), &mut body)
        .map_err(|e| e.to_string())
        .and_then(|_| serde_json::from_str(&body).map_err(|e| format!("not JSON: {e}")))
        .and_then(|v| set_in(sh, path.trim_start_matches("/emulator/v1"), v));
    let entry = LogEntry {
        request: shell::LogEntry {
            t,
            peer: request
                .remote_addr()
                .map_or_else(|| "-".to_owned(), |p| p.ip().to_string()),
            method: "PUT".to_owned(),
            path: path.to_owned(),
            status: if result.is_ok() { "set" } else { "400" }.to_owned(),
        },
        flavor: "-".to_owned(),
    };
    let reply = match result {
        Ok(()) => response(200, b"set\n".to_vec(), "text/plain"),
        Err(e) => response(400, format!("{e}\n").into_bytes(), "text/plain"),
    };
    sh.state.log.answer(entry, reply, request, &ALWAYS);
}

/// A long poll whose answer has not changed yet: holds it until the answer's
/// `ETag` is not `last` (`None`: the one at arrival) or `timeout_sec` passes;
/// logged `open` first. Whether it was held.
fn hold(sh: &Gce, t: f64, path: &str, query: &str, peer: &str) -> bool {
    let current = |t: f64| {
        let (status, body, _) = answer(sh, t, path, query);
        (status == 200).then(|| etag(&body))
    };
    let last = param(query, "last_etag").map(str::to_owned);
    let at_arrival = current(t);
    let waits_on = last.clone().or_else(|| at_arrival.clone());
    if at_arrival.is_none() || (last.is_some() && at_arrival != last) {
        return false;
    }
    sh.state.log.push(LogEntry {
        request: shell::LogEntry {
            t,
            peer: peer.to_owned(),
            method: "GET".to_owned(),
            path: format!("{path}?{query}"),
            status: "open".to_owned(),
        },
        flavor: "Google".to_owned(),
    });
    let timeout = param(query, "timeout_sec")
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(300.0);
    let end = Instant::now() + Duration::from_secs_f64(timeout.clamp(0.0, 3600.0));
    while Instant::now() < end && current(sh.state.clock.now()) == waits_on {
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

fn handle(sh: &Gce, request: tiny_http::Request) {
    let t = sh.state.clock.now();
    let (path, query) = shell::split_url(request.url());
    if *request.method() == tiny_http::Method::Put && under(&path, "/emulator/v1") {
        control(sh, t, request, &path);
        return;
    }
    let method = request.method().as_str().to_owned();
    let peer = request.remote_addr().map(SocketAddr::ip);
    let flavor = header(&request, "Metadata-Flavor").map(str::to_owned);
    let forwarded = header(&request, "X-Forwarded-For").is_some();
    let rule = sh.state.rules.matching(&method, &path, &query, t);
    let allowed = sh.state.config.allows(peer);
    let method_ok = matches!(
        *request.method(),
        tiny_http::Method::Get | tiny_http::Method::Head
    );
    let (reply, flavored) = if path == "/" && method_ok && !forwarded {
        // The root answers without the header (see the module docs).
        let (status, body, ctype) = answer(sh, t, &path, &query);
        (response(status, body, ctype), true)
    } else if flavor.as_deref() != Some("Google") || forwarded {
        let body = b"Missing Metadata-Flavor:Google header.".to_vec();
        (response(403, body, "text/html"), true)
    } else if !allowed {
        (response(403, b"Forbidden".to_vec(), "text/html"), true)
    } else if !method_ok {
        (response(405, b"Method Not Allowed".to_vec(), HTML), true)
    } else {
        let waits =
            param(&query, "wait_for_change").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let who = peer.map_or_else(|| "-".to_owned(), |p| p.to_string());
        let held = waits && rule.is_none_or(|r| !r.overrides()) && hold(sh, t, &path, &query, &who);
        let (r, flavored) = reply(sh, sh.state.clock.now(), &path, &query, rule);
        let label = format!("{}:held", r.label());
        (if held { r.labelled(&label) } else { r }, flavored)
    };
    let full = if query.is_empty() {
        path
    } else {
        format!("{path}?{query}")
    };
    let entry = LogEntry {
        request: shell::LogEntry {
            t,
            peer: peer.map_or_else(|| "-".to_owned(), |p| p.to_string()),
            method,
            path: full,
            status: reply.label().to_owned(),
        },
        flavor: flavor
            .filter(|f| !f.is_empty() && !f.contains(char::is_whitespace))
            .unwrap_or_else(|| "-".to_owned()),
    };
    let always = if flavored { &ALWAYS[..] } else { &ALWAYS[..1] };
    sh.state.log.answer(entry, reply, request, always);
}

/// Reads a log file written by the emulator.
pub fn read_log(path: &std::path::Path) -> Vec<LogEntry> {
    shell::read_log(path)
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: an `OpenStack` metadata service emulator (Nova's API behind
//! Neutron's metadata proxy) on `tiny_http`, for tests and benchmarks, from the
//! documented formats. It runs in-process ([`OpenStackEmulator::start`], a thread
//! on a loopback port) or as the `openstack-emulator` binary (in the test world's
//! router namespace, on 169.254.169.254:80).
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
//! With [`Config::rate_limit`] (`--rate-limit COUNT/SECONDS`), Neutron's
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

use std::collections::{BTreeMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};

use crate::world::{MAC0, MAC1, MetadataService};

/// The API root.
pub const ROOT: &str = "/openstack/latest";

/// The log file the binary writes in its `--dir`.
pub const LOG_NAME: &str = "openstack.log";

/// The instance's uuid in [`world_tree`].
pub const INSTANCE_ID: &str = "83679162-1378-4288-a2d4-70e13ec132aa";

/// The body size of a `huge` answer without `size`.
const DEFAULT_HUGE: usize = 1024 * 1024;

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

/// Nova's EC2-style versions, which `GET /` lists before `latest`.
pub const EC2_VERSIONS: &[&str] = &[
    "1.0",
    "2007-01-19",
    "2007-03-01",
    "2007-08-29",
    "2007-10-10",
    "2007-12-15",
    "2008-02-01",
    "2008-09-01",
    "2009-04-04",
];

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

/// An action instead of the normal answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// 200 with a body that is neither JSON nor UTF-8.
    Garbage,
    /// 200 with `size` bytes.
    Huge,
    /// Never answered.
    Drop,
}

impl Action {
    fn label(self) -> &'static str {
        match self {
            Self::Garbage => "garbage",
            Self::Huge => "huge",
            Self::Drop => "drop",
        }
    }
}

/// An answer that overrides the normal one.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// The path (and everything below it).
    pub path: String,
    /// From this many seconds (default 0).
    #[serde(default)]
    pub from: Option<f64>,
    /// Until this many seconds (default for ever).
    #[serde(default)]
    pub until: Option<f64>,
    /// Only the first `count` requests it matches.
    #[serde(default)]
    pub count: Option<u64>,
    /// Seconds to wait first.
    #[serde(default)]
    pub delay: f64,
    /// The status to answer.
    #[serde(default)]
    pub status: Option<u16>,
    /// `Retry-After` seconds.
    #[serde(default)]
    pub retry_after: Option<u64>,
    /// The body with `status`.
    #[serde(default)]
    pub body: Option<String>,
    /// What to do instead.
    #[serde(default)]
    pub action: Option<Action>,
    /// The size of a `huge` answer.
    #[serde(default)]
    pub size: Option<usize>,
}

/// Late links and misbehaviour (see the module docs).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Links that appear late.
    #[serde(default)]
    pub appear: Vec<Appear>,
    /// Answers that override the normal ones.
    #[serde(default)]
    pub rules: Vec<Rule>,
}

impl Scenario {
    /// Reads a scenario from JSON.
    pub fn from_value(v: Value) -> Result<Self, String> {
        serde_json::from_value(v).map_err(|e| format!("scenario: {e}"))
    }
}

/// Neutron's rate limit: at most `count` requests per `window` from one source.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Requests allowed in a window.
    pub count: usize,
    /// The sliding window.
    pub window: Duration,
}

impl RateLimit {
    /// Neutron's defaults: 10 requests per 10 s.
    pub const NEUTRON: Self = Self {
        count: 10,
        window: Duration::from_secs(10),
    };

    /// `COUNT/SECONDS`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (c, w) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?}: expected COUNT/SECONDS"))?;
        Ok(Self {
            count: c.parse().map_err(|e| format!("{s:?}: {e}"))?,
            window: Duration::from_secs_f64(w.parse().map_err(|e| format!("{s:?}: {e}"))?),
        })
    }
}

/// What the emulator serves and how.
#[derive(Debug, Clone)]
pub struct Config {
    /// `{"meta_data": ..., "network_data": ..., "user_data": ...}`.
    pub tree: Value,
    /// Late links and misbehaviour.
    pub scenario: Scenario,
    /// Where to append the log, if anywhere.
    pub log_file: Option<PathBuf>,
    /// Neutron's rate limit, if on.
    pub rate_limit: Option<RateLimit>,
}

impl Config {
    /// Serves `tree`, nothing misbehaving, no rate limit.
    pub fn new(tree: Value) -> Self {
        Self {
            tree,
            scenario: Scenario::default(),
            log_file: None,
            rate_limit: None,
        }
    }
}

/// One request as logged.
#[derive(Debug, Clone, PartialEq)]
pub struct LogEntry {
    /// Seconds since the first request.
    pub t: f64,
    /// The peer's address.
    pub peer: String,
    /// The method.
    pub method: String,
    /// The path.
    pub path: String,
    /// The status or the action.
    pub status: String,
}

impl LogEntry {
    /// The log file's line.
    pub fn line(&self) -> String {
        format!(
            "{:.3} {} {} {} {}",
            self.t, self.peer, self.method, self.path, self.status
        )
    }

    /// Parses a log file's line.
    pub fn parse(line: &str) -> Option<Self> {
        let mut p = line.split_whitespace();
        Some(Self {
            t: p.next()?.parse().ok()?,
            peer: p.next()?.to_owned(),
            method: p.next()?.to_owned(),
            path: p.next()?.to_owned(),
            status: p.next()?.to_owned(),
        })
    }
}

struct Shared {
    config: Config,
    rule_hits: Vec<AtomicU64>,
    t0: OnceLock<Instant>,
    log: Mutex<Vec<LogEntry>>,
    log_file: Option<Mutex<File>>,
    seen: Mutex<BTreeMap<String, VecDeque<Instant>>>,
}

/// A running emulator; stops when dropped.
pub struct OpenStackEmulator {
    server: Arc<tiny_http::Server>,
    shared: Arc<Shared>,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for OpenStackEmulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenStackEmulator")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl OpenStackEmulator {
    /// Binds `bind` and serves on a thread.
    pub fn start(bind: SocketAddr, config: Config) -> io::Result<Self> {
        let server = tiny_http::Server::http(bind).map_err(io::Error::other)?;
        let addr = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| io::Error::other("not an IP listener"))?;
        let log_file = match &config.log_file {
            Some(p) => Some(Mutex::new(
                OpenOptions::new().create(true).append(true).open(p)?,
            )),
            None => None,
        };
        let shared = Arc::new(Shared {
            rule_hits: config
                .scenario
                .rules
                .iter()
                .map(|_| AtomicU64::new(0))
                .collect(),
            config,
            t0: OnceLock::new(),
            log: Mutex::new(Vec::new()),
            log_file,
            seen: Mutex::new(BTreeMap::new()),
        });
        let server = Arc::new(server);
        let (srv, sh) = (Arc::clone(&server), Arc::clone(&shared));
        let thread = std::thread::Builder::new()
            .name("openstack-emulator".into())
            .spawn(move || {
                for request in srv.incoming_requests() {
                    let sh = Arc::clone(&sh);
                    std::thread::spawn(move || handle(&sh, request));
                }
            })?;
        Ok(Self {
            server,
            shared,
            addr,
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far.
    pub fn log(&self) -> Vec<LogEntry> {
        self.shared
            .log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many requests asked for a path containing `part`.
    pub fn count(&self, part: &str) -> usize {
        self.log().iter().filter(|e| e.path.contains(part)).count()
    }

    /// Blocks until the server thread ends (for the binary).
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for OpenStackEmulator {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
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

/// The world's metadata service: the `openstack-emulator` binary on
/// 169.254.169.254:80 in the router namespace, with `args` (`--tree`,
/// `--scenario`, `--rate-limit`).
pub fn service(args: Vec<String>) -> MetadataService {
    let mut all = vec!["--bind".to_owned(), "169.254.169.254:80".to_owned()];
    all.extend(args);
    MetadataService {
        emulator: "openstack-emulator".to_owned(),
        args: all,
        addresses: Vec::new(),
    }
}

/// `network_data` without the links (and their networks) not attached yet.
fn visible_network_data(sh: &Shared, t: f64) -> Value {
    let mut nd = sh
        .config
        .tree
        .get("network_data")
        .cloned()
        .unwrap_or(Value::Null);
    let hidden: Vec<usize> = sh
        .config
        .scenario
        .appear
        .iter()
        .filter(|a| t < a.after)
        .map(|a| a.link)
        .collect();
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
fn answer(sh: &Shared, t: f64, path: &str) -> (u16, Vec<u8>, &'static str) {
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
                Some("meta_data.json") => sh.config.tree.get("meta_data").map_or(not_found, |v| {
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
                Some("user_data") => match sh.config.tree.get("user_data") {
                    Some(Value::String(s)) => (200, s.clone().into_bytes(), "text/plain"),
                    _ => not_found,
                },
                _ => not_found,
            }
        }
    }
}

fn under(path: &str, prefix: &str) -> bool {
    let p = prefix.trim_end_matches('/');
    path == p || path.strip_prefix(p).is_some_and(|r| r.starts_with('/'))
}

fn response(status: u16, body: Vec<u8>, ctype: &str) -> Response {
    let mut r = tiny_http::Response::from_data(body).with_status_code(status);
    if let Ok(h) = tiny_http::Header::from_bytes("Content-Type", ctype) {
        r.add_header(h);
    }
    r
}

type Response = tiny_http::Response<io::Cursor<Vec<u8>>>;

/// The answer to a request within the rate limit: what the matching rule says,
/// else the tree's. `None` is never answered.
fn reply(sh: &Shared, t: f64, path: &str, rule: Option<&Rule>) -> (Option<Response>, String) {
    let Some(r) = rule.filter(|r| r.action.is_some() || r.status.is_some()) else {
        let (status, body, ctype) = answer(sh, t, path);
        return (Some(response(status, body, ctype)), status.to_string());
    };
    let resp = match (r.action, r.status) {
        (Some(Action::Drop), _) => None,
        (Some(Action::Garbage), _) => Some(response(
            200,
            vec![0xff, b'{', 0x80, b'[', 0xc3],
            "application/json",
        )),
        (Some(Action::Huge), _) => Some(response(
            200,
            vec![b'{'; r.size.unwrap_or(DEFAULT_HUGE)],
            "application/json",
        )),
        (None, status) => {
            let status = status.unwrap_or(200);
            let mut resp = response(
                status,
                r.body.clone().unwrap_or_default().into_bytes(),
                "text/html",
            );
            if let Some(s) = r.retry_after
                && let Ok(h) = tiny_http::Header::from_bytes("Retry-After", s.to_string())
            {
                resp.add_header(h);
            }
            return (Some(resp), status.to_string());
        }
    };
    (resp, r.action.map_or("200", Action::label).to_owned())
}

/// Whether `peer` is over the rate limit now (the request counts either way, as
/// haproxy's stick table counts denied requests).
fn over_limit(sh: &Shared, peer: &str, now: Instant) -> bool {
    let Some(limit) = sh.config.rate_limit else {
        return false;
    };
    let mut seen = sh.seen.lock().unwrap_or_else(PoisonError::into_inner);
    let q = seen.entry(peer.to_owned()).or_default();
    while q
        .front()
        .is_some_and(|t| now.saturating_duration_since(*t) >= limit.window)
    {
        q.pop_front();
    }
    let over = q.len() >= limit.count;
    q.push_back(now);
    over
}

fn handle(sh: &Shared, request: tiny_http::Request) {
    let now = Instant::now();
    let t = sh.t0.get_or_init(|| now).elapsed().as_secs_f64();
    let url = request.url().to_owned();
    let path = url
        .split_once('?')
        .map_or(url.as_str(), |(p, _)| p)
        .to_owned();
    let peer = request
        .remote_addr()
        .map(SocketAddr::ip)
        .map_or_else(|| "-".to_owned(), |p: IpAddr| p.to_string());
    let (reply, label) = if over_limit(sh, &peer, now) {
        (
            Some(response(
                429,
                b"<html><body><h1>429 Too Many Requests</h1>\nYou have sent too many requests in a given amount of time.\n</body></html>\n".to_vec(),
                "text/html",
            )),
            "429".to_owned(),
        )
    } else {
        let rule = sh
            .config
            .scenario
            .rules
            .iter()
            .zip(&sh.rule_hits)
            .find(|(r, hits)| {
                under(&path, &r.path)
                    && r.from.is_none_or(|f| t >= f)
                    && r.until.is_none_or(|u| t < u)
                    && r.count
                        .is_none_or(|n| hits.fetch_add(1, Ordering::SeqCst) < n)
            })
            .map(|(r, _)| r);
        if let Some(r) = rule
            && r.delay > 0.0
        {
            std::thread::sleep(Duration::from_secs_f64(r.delay));
        }
        reply(sh, t, &path, rule)
    };
    let entry = LogEntry {
        t,
        peer,
        method: request.method().as_str().to_owned(),
        path,
        status: label,
    };
    if let Some(f) = &sh.log_file {
        let mut f = f.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = writeln!(f, "{}", entry.line());
        let _ = f.flush();
    }
    sh.log
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(entry);
    match reply {
        Some(r) => {
            let _ = request.respond(r);
        }
        None => drop(request.into_writer()),
    }
}

/// Reads a log file written by the emulator.
pub fn read_log(path: &std::path::Path) -> Vec<LogEntry> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(LogEntry::parse)
        .collect()
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

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: a Google Compute Engine metadata server emulator on `tiny_http`,
//! for tests and benchmarks, from Google's documented formats. It runs
//! in-process ([`GceEmulator::start`], a thread on a loopback port) or as the
//! `gce-emulator` binary (in the test world's router namespace, on
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
//! server does, except the user's keys under `attributes`.
//!
//! # The rules it enforces
//!
//! * A request without `Metadata-Flavor: Google`, or with `X-Forwarded-For`,
//!   gets 403 (the real server's answer to a request that may come through a
//!   proxy).
//! * Every answer carries `Metadata-Flavor: Google` (unless a rule's action is
//!   `no-flavor`, an impostor).
//! * With [`Config::allowed_sources`], a request from any other address gets
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
//! `gce-emulator --set ADDR:PORT PATH JSON` is its client.
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

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ipnet::IpNet;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::world::{MAC0, MAC1};

/// The API root.
pub const ROOT: &str = "/computeMetadata/v1";

/// The body size of a `huge` answer without `size`.
const DEFAULT_HUGE: usize = 1024 * 1024;

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

/// An action instead of the normal answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// 200 with a body that is neither JSON nor UTF-8.
    Garbage,
    /// 200 with `size` bytes.
    Huge,
    /// The normal answer, without `Metadata-Flavor: Google`.
    NoFlavor,
    /// Never answered.
    Drop,
}

impl Action {
    fn label(self) -> &'static str {
        match self {
            Self::Garbage => "garbage",
            Self::Huge => "huge",
            Self::NoFlavor => "no-flavor",
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
    /// Only requests whose query contains this (`wait_for_change=true`: the
    /// long polls alone).
    #[serde(default)]
    pub query: Option<String>,
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

/// Late NICs and misbehaviour (see the module docs).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// NICs that appear late.
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

/// What the emulator serves and how.
#[derive(Debug, Clone)]
pub struct Config {
    /// `{"instance": {...}, "project": {...}}`, path names.
    pub tree: Value,
    /// Late NICs and misbehaviour.
    pub scenario: Scenario,
    /// Where to append the log, if anywhere.
    pub log_file: Option<PathBuf>,
    /// When not empty, the only source prefixes answered.
    pub allowed_sources: Vec<IpNet>,
}

impl Config {
    /// Serves `tree`, nothing misbehaving.
    pub fn new(tree: Value) -> Self {
        Self {
            tree,
            scenario: Scenario::default(),
            log_file: None,
            allowed_sources: Vec::new(),
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
    /// The path with its query.
    pub path: String,
    /// The status or the action.
    pub status: String,
    /// The request's `Metadata-Flavor`, `-` when absent.
    pub flavor: String,
}

impl LogEntry {
    /// The log file's line.
    pub fn line(&self) -> String {
        format!(
            "{:.3} {} {} {} {} {}",
            self.t, self.peer, self.method, self.path, self.status, self.flavor
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
            flavor: p.next()?.to_owned(),
        })
    }
}

struct Shared {
    config: Config,
    /// The tree served now (the config's, changed by the control path).
    tree: Mutex<Value>,
    rule_hits: Vec<AtomicU64>,
    t0: OnceLock<Instant>,
    log: Mutex<Vec<LogEntry>>,
    log_file: Option<Mutex<File>>,
}

/// A running emulator; stops when dropped.
pub struct GceEmulator {
    server: Arc<tiny_http::Server>,
    shared: Arc<Shared>,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for GceEmulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GceEmulator")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl GceEmulator {
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
            tree: Mutex::new(config.tree.clone()),
            config,
            t0: OnceLock::new(),
            log: Mutex::new(Vec::new()),
            log_file,
        });
        let server = Arc::new(server);
        let (srv, sh) = (Arc::clone(&server), Arc::clone(&shared));
        let thread = std::thread::Builder::new()
            .name("gce-emulator".into())
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

    /// How many requests asked for a path (with query) containing `part`.
    pub fn count(&self, part: &str) -> usize {
        self.log().iter().filter(|e| e.path.contains(part)).count()
    }

    /// Replaces the value at `path` (path names below the tree's root, `/`
    /// separated); held long polls see the change.
    pub fn set(&self, path: &str, value: Value) -> Result<(), String> {
        set_in(&self.shared, path, value)
    }

    /// Requests with `wait_for_change=true` that arrived (each logged `open`
    /// when held, or answered at once).
    pub fn long_polls(&self) -> usize {
        long_polls(&self.log())
    }

    /// Blocks until the server thread ends (for the binary).
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for GceEmulator {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
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
fn set_in(sh: &Shared, path: &str, value: Value) -> Result<(), String> {
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
fn visible(sh: &Shared, t: f64) -> Value {
    let mut tree = sh
        .tree
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    if let Some(Value::Array(nics)) = tree
        .get_mut("instance")
        .and_then(|i| i.get_mut("network-interfaces"))
    {
        let hidden: Vec<usize> = sh
            .config
            .scenario
            .appear
            .iter()
            .filter(|a| t < a.after)
            .map(|a| a.nic)
            .collect();
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
fn answer(sh: &Shared, t: f64, path: &str, query: &str) -> (u16, Vec<u8>, &'static str) {
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
        let next = match node {
            Value::Object(m) => m.get(seg),
            Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        };
        match next {
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

fn header<'r>(request: &'r tiny_http::Request, name: &'static str) -> Option<&'r str> {
    request
        .headers()
        .iter()
        .find(|h| h.field.equiv(name))
        .map(|h| h.value.as_str())
}

fn under(path: &str, prefix: &str) -> bool {
    let p = prefix.trim_end_matches('/');
    path == p || path.strip_prefix(p).is_some_and(|r| r.starts_with('/'))
}

fn response(
    status: u16,
    body: Vec<u8>,
    ctype: &str,
    flavor: bool,
) -> tiny_http::Response<io::Cursor<Vec<u8>>> {
    let mut r = tiny_http::Response::from_data(body).with_status_code(status);
    let mut headers = vec![
        ("Content-Type", ctype.to_owned()),
        ("Server", "Metadata Server for VM".to_owned()),
    ];
    if flavor {
        headers.push(("Metadata-Flavor", "Google".to_owned()));
    }
    for (k, v) in headers {
        if let Ok(h) = tiny_http::Header::from_bytes(k, v) {
            r.add_header(h);
        }
    }
    r
}

type Response = tiny_http::Response<io::Cursor<Vec<u8>>>;

/// The answer to a request that passed the header and source checks: what the
/// matching rule says, else the tree's. `None` is never answered.
fn reply(
    sh: &Shared,
    t: f64,
    path: &str,
    query: &str,
    rule: Option<&Rule>,
) -> (Option<Response>, String) {
    let Some(r) = rule.filter(|r| r.action.is_some() || r.status.is_some()) else {
        let (status, body, ctype) = answer(sh, t, path, query);
        let tag = (status == 200).then(|| etag(&body));
        let mut resp = response(status, body, ctype, true);
        if let Some(tag) = tag
            && let Ok(h) = tiny_http::Header::from_bytes("ETag", tag)
        {
            resp.add_header(h);
        }
        return (Some(resp), status.to_string());
    };
    let resp = match (r.action, r.status) {
        (Some(Action::Drop), _) => None,
        (Some(Action::Garbage), _) => Some(response(
            200,
            vec![0xff, b'{', 0x80, b'[', 0xc3],
            "application/json",
            true,
        )),
        (Some(Action::Huge), _) => Some(response(
            200,
            vec![b'['; r.size.unwrap_or(DEFAULT_HUGE)],
            "application/json",
            true,
        )),
        (Some(Action::NoFlavor), _) => {
            let (status, body, ctype) = answer(sh, t, path, query);
            Some(response(status, body, ctype, false))
        }
        (None, status) => {
            let status = status.unwrap_or(200);
            let body = r.body.clone().unwrap_or_default().into_bytes();
            let tag = etag(&body);
            let mut resp = response(status, body, "text/html", true);
            if status == 200
                && let Ok(h) = tiny_http::Header::from_bytes("ETag", tag)
            {
                resp.add_header(h);
            }
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

fn log_entry(sh: &Shared, entry: LogEntry) {
    if let Some(f) = &sh.log_file {
        let mut f = f.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = writeln!(f, "{}", entry.line());
        let _ = f.flush();
    }
    sh.log
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(entry);
}

/// The control path: `PUT /emulator/v1/PATH` with a JSON body.
fn control(sh: &Shared, t: f64, mut request: tiny_http::Request, path: &str) {
    let mut body = String::new();
    let result = io::Read::read_to_string(request.as_reader(), &mut body)
        .map_err(|e| e.to_string())
        .and_then(|_| serde_json::from_str(&body).map_err(|e| format!("not JSON: {e}")))
        .and_then(|v| set_in(sh, path.trim_start_matches("/emulator/v1"), v));
    log_entry(
        sh,
        LogEntry {
            t,
            peer: request
                .remote_addr()
                .map_or_else(|| "-".to_owned(), |p| p.ip().to_string()),
            method: "PUT".to_owned(),
            path: path.to_owned(),
            status: if result.is_ok() { "set" } else { "400" }.to_owned(),
            flavor: "-".to_owned(),
        },
    );
    let resp = match result {
        Ok(()) => response(200, b"set\n".to_vec(), "text/plain", true),
        Err(e) => response(400, format!("{e}\n").into_bytes(), "text/plain", true),
    };
    let _ = request.respond(resp);
}

/// A long poll whose answer has not changed yet: holds it until the answer's
/// `ETag` is not `last` (`None`: the one at arrival) or `timeout_sec` passes;
/// logged `open` first. Whether it was held.
fn hold(sh: &Shared, t: f64, path: &str, query: &str, peer: &str) -> bool {
    let now = |sh: &Shared| sh.t0.get_or_init(Instant::now).elapsed().as_secs_f64();
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
    log_entry(
        sh,
        LogEntry {
            t,
            peer: peer.to_owned(),
            method: "GET".to_owned(),
            path: format!("{path}?{query}"),
            status: "open".to_owned(),
            flavor: "Google".to_owned(),
        },
    );
    let timeout = param(query, "timeout_sec")
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(300.0);
    let end = Instant::now() + Duration::from_secs_f64(timeout.clamp(0.0, 3600.0));
    while Instant::now() < end && current(now(sh)) == waits_on {
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

fn handle(sh: &Shared, request: tiny_http::Request) {
    let t = sh.t0.get_or_init(Instant::now).elapsed().as_secs_f64();
    let url = request.url().to_owned();
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let (path, query) = (path.to_owned(), query.to_owned());
    if *request.method() == tiny_http::Method::Put && under(&path, "/emulator/v1") {
        control(sh, t, request, &path);
        return;
    }
    let peer = request.remote_addr().map(SocketAddr::ip);
    let flavor = header(&request, "Metadata-Flavor").map(str::to_owned);
    let forwarded = header(&request, "X-Forwarded-For").is_some();
    let rule = sh
        .config
        .scenario
        .rules
        .iter()
        .zip(&sh.rule_hits)
        .find(|(r, hits)| {
            under(&path, &r.path)
                && r.query.as_deref().is_none_or(|q| query.contains(q))
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
    let allowed = sh.config.allowed_sources.is_empty()
        || peer.is_some_and(|p: IpAddr| sh.config.allowed_sources.iter().any(|n| n.contains(&p)));
    let method_ok = matches!(
        *request.method(),
        tiny_http::Method::Get | tiny_http::Method::Head
    );
    let (reply, label) = if path == "/" && method_ok && !forwarded {
        // The root answers without the header (see the module docs).
        let (status, body, ctype) = answer(sh, t, &path, &query);
        (
            Some(response(status, body, ctype, true)),
            status.to_string(),
        )
    } else if flavor.as_deref() != Some("Google") || forwarded {
        (
            Some(response(
                403,
                b"Missing Metadata-Flavor:Google header.".to_vec(),
                "text/html",
                true,
            )),
            "403".to_owned(),
        )
    } else if !allowed {
        (
            Some(response(403, b"Forbidden".to_vec(), "text/html", true)),
            "403".to_owned(),
        )
    } else if !method_ok {
        (
            Some(response(405, b"Method Not Allowed".to_vec(), HTML, true)),
            "405".to_owned(),
        )
    } else {
        let waits =
            param(&query, "wait_for_change").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let who = peer.map_or_else(|| "-".to_owned(), |p| p.to_string());
        let held = waits
            && rule.is_none_or(|r| r.action.is_none() && r.status.is_none())
            && hold(sh, t, &path, &query, &who);
        let t = sh.t0.get_or_init(Instant::now).elapsed().as_secs_f64();
        let (r, label) = reply(sh, t, &path, &query, rule);
        (r, if held { format!("{label}:held") } else { label })
    };
    let full = if query.is_empty() {
        path
    } else {
        format!("{path}?{query}")
    };
    let entry = LogEntry {
        t,
        peer: peer.map_or_else(|| "-".to_owned(), |p| p.to_string()),
        method: request.method().as_str().to_owned(),
        path: full,
        status: label,
        flavor: flavor
            .filter(|f| !f.is_empty() && !f.contains(char::is_whitespace))
            .unwrap_or_else(|| "-".to_owned()),
    };
    log_entry(sh, entry);
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

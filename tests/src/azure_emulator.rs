// SPDX-License-Identifier: Apache-2.0
//! Performs IO: an Azure Instance Metadata Service emulator for tests and
//! benchmarks (never for production), from Microsoft's documented formats.
//!
//! * `GET /metadata/instance[/compute|/network|/...]?api-version=V`: the part of
//!   the instance document below the path, as JSON; a leaf (`compute/vmId`)
//!   needs `format=text` and answers the text. The document is
//!   `{"compute": {...}, "network": {"interface": [...]}}`, MACs as 12 hex digits.
//! * Enforced as IMDS does: the `Metadata: true` header (400 without), no
//!   `X-Forwarded-For` (400 with), an `api-version` (400 without, or with one
//!   that is not a `YYYY-MM-DD` date from 2017-03-01 on), `GET` only (405), and
//!   **at most 5 requests per second** (429 with `Retry-After: 1` beyond; what a
//!   scenario injects does not count).
//! * As IMDS answers the peers (issue 31; "Azure Instance Metadata Service",
//!   <https://learn.microsoft.com/en-us/azure/virtual-machines/instance-metadata-service>):
//!   `format=text` on a folder lists its children one a line, containers with a
//!   trailing `/` (`interface/` answers `0/` and `1/`), as nm-cloud-setup
//!   (`nmcs-provider-azure.c`) and SUSE's cloud-netconfig read it;
//!   `/metadata?format=text` lists `instance/` (cloud-netconfig's availability
//!   check); a trailing `/` on a leaf is the leaf (`subnet/0/prefix/`, as
//!   nm-cloud-setup asks); a 429's body is the text `Too many requests`, which
//!   cloud-netconfig compares; `HEAD` is a method like any other than `GET`:
//!   405 ("Only GET requests are supported").
//! * **Only the primary NIC's primary address is answered**
//!   ([`Config::allowed_sources`]): a request from any other source is read and
//!   never answered (logged `refused`), as IMDS's traffic from a secondary NIC
//!   goes nowhere.
//! * Scenario ([`Scenario`]): NICs absent from `network` until `after` seconds
//!   since the first answered request (the hot-plug race), or while a file in the
//!   world's folder names them ([`HIDDEN_FILE`]: one MAC per line, read on every
//!   request, so a test decides when a NIC appears), and rules (a path prefix, a
//!   time window, a count) that delay, answer a status (with `Retry-After`), or
//!   `drop` / `garbage` / `not-json`.
//!
//! Every request is logged ([`LogEntry`]: time, peer, method, path and query, the
//! `Metadata` header, the status or action) in memory and, with
//! [`Config::log_file`], one line per request.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};

use crate::world::{MAC0, MAC1};

/// The file below the world's folder whose lines (MACs, Azure's or colon form)
/// hide NICs from `network` while it names them.
pub const HIDDEN_FILE: &str = "azure-hidden";

/// The log file's name below the world's folder (the binary's `--dir`).
pub const LOG_FILE: &str = "azure-imds.log";

/// The documented rate limit: requests per second per VM.
pub const RATE_LIMIT: usize = 5;

/// A MAC in Azure's form: 12 upper-case hex digits, no separators.
pub fn azure_mac(mac: &str) -> String {
    mac.replace([':', '-'], "").to_uppercase()
}

/// One `interface[]` entry: private IPv4 addresses (primary first) in
/// `subnet`/`prefix`.
pub fn interface(mac: &str, ipv4: &[&str], subnet: &str, prefix: u8) -> Value {
    let ips: Vec<Value> = ipv4
        .iter()
        .map(|a| json!({"privateIpAddress": a, "publicIpAddress": ""}))
        .collect();
    json!({
        "macAddress": azure_mac(mac),
        "ipv4": {"ipAddress": ips, "subnet": [{"address": subnet, "prefix": prefix.to_string()}]},
        "ipv6": {"ipAddress": []}
    })
}

/// The test world's VM: eth0 (10.98.0.10, primary) and eth1 (10.98.1.20 and
/// 10.98.1.21), the secondary listed FIRST: Azure does not promise an order, and
/// leasehook must not number NICs by it.
pub fn world_instance() -> Value {
    json!({
        "compute": {
            "azEnvironment": "AzurePublicCloud",
            "location": "westeurope",
            "name": "leasehook-vm",
            "osType": "Linux",
            "vmId": "5c08b38e-4d57-4c23-ac45-aca61037f084",
            "vmSize": "Standard_D4s_v5",
            "zone": "1",
            "userData": "I2Nsb3VkLWNvbmZpZwo="
        },
        "network": {"interface": [
            interface(MAC0, &["10.98.0.10"], "10.98.0.0", 24),
            interface(MAC1, &["10.98.1.20", "10.98.1.21"], "10.98.1.0", 24),
        ]}
    })
}

/// A NIC that appears late.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Appear {
    /// Its MAC (either form).
    pub mac: String,
    /// Seconds since the first answered request.
    pub after: f64,
}

/// What a rule does instead of answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Read the request, never answer it.
    Drop,
    /// 200 with a body that is not UTF-8.
    Garbage,
    /// 200 with UTF-8 that is not JSON (a proxy's error page).
    NotJson,
}

/// One answer override.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// The path (and everything below it).
    pub path: String,
    /// From when (default 0).
    #[serde(default)]
    pub from: f64,
    /// Until when (default for ever).
    pub until: Option<f64>,
    /// Only the first `count` matching requests.
    pub count: Option<u64>,
    /// Seconds to wait before answering.
    #[serde(default)]
    pub delay: f64,
    /// The status to answer.
    pub status: Option<u16>,
    /// `Retry-After` seconds to send with it.
    pub retry_after: Option<u64>,
    /// What to do instead.
    pub action: Option<Action>,
}

/// What misbehaves, and when.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// NICs that appear late.
    #[serde(default)]
    pub appear: Vec<Appear>,
    /// Answer overrides.
    #[serde(default)]
    pub rules: Vec<Rule>,
}

impl Scenario {
    /// Reads a scenario from JSON.
    pub fn from_value(v: Value) -> Result<Self, String> {
        serde_json::from_value(v).map_err(|e| format!("scenario: {e}"))
    }
}

/// The emulator's configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The instance document (`compute`, `network`).
    pub instance: Value,
    /// What misbehaves.
    pub scenario: Scenario,
    /// The only source addresses answered (`None`: any, for loopback tests).
    pub allowed_sources: Option<Vec<IpAddr>>,
    /// Where to append one line per request.
    pub log_file: Option<PathBuf>,
    /// The file of hidden MACs ([`HIDDEN_FILE`]), read on every request.
    pub hidden_file: Option<PathBuf>,
    /// Requests per second answered before 429 (`None`: no limit, for the
    /// benchmark, which measures one event at a time from fresh clients).
    pub rate_limit: Option<usize>,
}

impl Config {
    /// Serving `instance`, nothing misbehaving, any source.
    pub fn new(instance: Value) -> Self {
        Self {
            instance,
            scenario: Scenario::default(),
            allowed_sources: None,
            log_file: None,
            hidden_file: None,
            rate_limit: Some(RATE_LIMIT),
        }
    }
}

/// One logged request.
#[derive(Debug, Clone, PartialEq)]
pub struct LogEntry {
    /// Seconds since the emulator started.
    pub t: f64,
    /// The client's address and port.
    pub peer: String,
    /// The method.
    pub method: String,
    /// Path and query, as asked.
    pub url: String,
    /// The `Metadata` header (`-`: none).
    pub metadata: String,
    /// The status, or `refused`, `drop`, `garbage`, `not-json`.
    pub status: String,
}

impl LogEntry {
    /// The log file's line: `SECONDS PEER METHOD URL metadata=H STATUS`.
    pub fn line(&self) -> String {
        format!(
            "{:.3} {} {} {} metadata={} {}",
            self.t, self.peer, self.method, self.url, self.metadata, self.status
        )
    }

    /// Parses a line of the log file.
    pub fn parse(line: &str) -> Option<Self> {
        let mut f = line.split(' ');
        let e = Self {
            t: f.next()?.parse().ok()?,
            peer: f.next()?.to_owned(),
            method: f.next()?.to_owned(),
            url: f.next()?.to_owned(),
            metadata: f.next()?.strip_prefix("metadata=")?.to_owned(),
            status: f.next()?.to_owned(),
        };
        f.next().is_none().then_some(e)
    }

    /// The peer's address without the port.
    pub fn source(&self) -> Option<IpAddr> {
        self.peer.parse::<SocketAddr>().ok().map(|s| s.ip())
    }
}

struct Shared {
    config: Config,
    rule_hits: Vec<AtomicU64>,
    started: Instant,
    first: OnceLock<Instant>,
    recent: Mutex<VecDeque<Instant>>,
    log: Mutex<Vec<LogEntry>>,
    log_file: Option<Mutex<File>>,
}

/// A running emulator; stops when dropped.
pub struct Emulator {
    server: Arc<tiny_http::Server>,
    shared: Arc<Shared>,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Emulator {
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
            started: Instant::now(),
            first: OnceLock::new(),
            recent: Mutex::new(VecDeque::new()),
            log: Mutex::new(Vec::new()),
            log_file,
        });
        let server = Arc::new(server);
        let (srv, sh) = (Arc::clone(&server), Arc::clone(&shared));
        let thread = std::thread::Builder::new()
            .name("azure-emulator".into())
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

    /// Blocks until the server thread ends: for the binary.
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads the requests in a log file.
pub fn read_log(path: &std::path::Path) -> Vec<LogEntry> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(LogEntry::parse)
        .collect()
}

fn header<'r>(request: &'r tiny_http::Request, name: &'static str) -> Option<&'r str> {
    request
        .headers()
        .iter()
        .find(|h| h.field.equiv(name))
        .map(|h| h.value.as_str())
}

fn query<'u>(url: &'u str, key: &str) -> Option<&'u str> {
    url.split_once('?')?
        .1
        .split('&')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

fn valid_api_version(v: &str) -> bool {
    let b = v.as_bytes();
    b.len() == 10
        && b.get(4) == Some(&b'-')
        && b.get(7) == Some(&b'-')
        && v.bytes()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
        && v >= "2017-03-01"
}

/// What to send back.
enum Reply {
    Json(u16, String, Option<u64>),
    /// A `format=text` answer (status, body, `Retry-After`).
    Text(u16, String, Option<u64>),
    Bytes(Vec<u8>, &'static str),
    Silence(&'static str),
}

fn handle(sh: &Shared, request: tiny_http::Request) {
    let now = Instant::now();
    let t = now.saturating_duration_since(sh.started).as_secs_f64();
    let method = request.method().as_str().to_owned();
    let url = request.url().to_owned();
    let path = url.split('?').next().unwrap_or_default().to_owned();
    let peer = request.remote_addr().copied();
    let metadata = header(&request, "Metadata").unwrap_or("-").to_owned();
    let allowed = match (&sh.config.allowed_sources, peer) {
        (None, _) => true,
        (Some(list), Some(p)) => list.contains(&p.ip()),
        (Some(_), None) => false,
    };
    let reply = if allowed {
        reply(sh, now, &method, &url, &path, &request)
    } else {
        Reply::Silence("refused")
    };
    let status = match &reply {
        Reply::Json(s, _, _) | Reply::Text(s, _, _) => s.to_string(),
        Reply::Bytes(_, label) | Reply::Silence(label) => (*label).to_owned(),
    };
    let entry = LogEntry {
        t,
        peer: peer.map_or_else(|| "-".to_owned(), |p| p.to_string()),
        method,
        url: url.replace(' ', "%20"),
        metadata: metadata.replace(' ', "%20"),
        status,
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
        Reply::Json(status, body, retry_after) => {
            let mut r = tiny_http::Response::from_string(body).with_status_code(status);
            if let Ok(h) =
                tiny_http::Header::from_bytes("Content-Type", "application/json; charset=utf-8")
            {
                r.add_header(h);
            }
            if let Some(s) = retry_after
                && let Ok(h) = tiny_http::Header::from_bytes("Retry-After", s.to_string())
            {
                r.add_header(h);
            }
            let _ = request.respond(r);
        }
        Reply::Text(status, body, retry_after) => {
            let mut r = tiny_http::Response::from_string(body).with_status_code(status);
            if let Ok(h) =
                tiny_http::Header::from_bytes("Content-Type", "text/plain; charset=utf-8")
            {
                r.add_header(h);
            }
            if let Some(s) = retry_after
                && let Ok(h) = tiny_http::Header::from_bytes("Retry-After", s.to_string())
            {
                r.add_header(h);
            }
            let _ = request.respond(r);
        }
        Reply::Bytes(body, _) => {
            let _ = request.respond(tiny_http::Response::from_data(body));
        }
        Reply::Silence(_) => drop(request.into_writer()),
    }
}

/// A folder's `format=text` listing: its children one a line, containers with
/// a trailing `/` (a list's children are its indices).
fn text_listing(node: &Value) -> String {
    let entry = |name: String, v: &Value| {
        if v.is_object() || v.is_array() {
            format!("{name}/")
        } else {
            name
        }
    };
    let lines: Vec<String> = match node {
        Value::Object(m) => m.iter().map(|(k, v)| entry(k.clone(), v)).collect(),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, v)| entry(i.to_string(), v))
            .collect(),
        _ => Vec::new(),
    };
    lines.join("\n")
}

fn error(status: u16, message: &str) -> Reply {
    Reply::Json(status, json!({ "error": message }).to_string(), None)
}

/// What the scenario's first matching rule answers instead, if anything (after
/// its delay).
fn injected(sh: &Shared, t: f64, path: &str) -> Option<Reply> {
    let rule = sh
        .config
        .scenario
        .rules
        .iter()
        .zip(&sh.rule_hits)
        .find(|(r, hits)| {
            (path == r.path || path.starts_with(&format!("{}/", r.path.trim_end_matches('/'))))
                && t >= r.from
                && r.until.is_none_or(|u| t < u)
                && r.count
                    .is_none_or(|n| hits.fetch_add(1, Ordering::SeqCst) < n)
        })
        .map(|(r, _)| r)?;
    if rule.delay > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(rule.delay));
    }
    match (rule.action, rule.status) {
        (Some(Action::Drop), _) => Some(Reply::Silence("drop")),
        (Some(Action::Garbage), _) => {
            Some(Reply::Bytes(vec![0xff, 0xfe, b'{', 0x80, b'x'], "garbage"))
        }
        (Some(Action::NotJson), _) => Some(Reply::Bytes(
            b"<html><body>502 Bad Gateway</body></html>".to_vec(),
            "not-json",
        )),
        (None, Some(status)) => Some(Reply::Json(
            status,
            json!({"error": format!("injected {status}")}).to_string(),
            rule.retry_after,
        )),
        (None, None) => None,
    }
}

/// Whether this request is over the documented limit (what the service itself
/// answers counts; injected answers do not).
fn rate_limited(sh: &Shared, now: Instant) -> bool {
    let Some(limit) = sh.config.rate_limit else {
        return false;
    };
    let mut recent = sh.recent.lock().unwrap_or_else(PoisonError::into_inner);
    while recent
        .front()
        .is_some_and(|t0| now.saturating_duration_since(*t0) >= Duration::from_secs(1))
    {
        recent.pop_front();
    }
    if recent.len() >= limit {
        return true;
    }
    recent.push_back(now);
    false
}

fn reply(
    sh: &Shared,
    now: Instant,
    method: &str,
    url: &str,
    path: &str,
    request: &tiny_http::Request,
) -> Reply {
    let first = *sh.first.get_or_init(|| now);
    let t = now.saturating_duration_since(first).as_secs_f64();
    if let Some(r) = injected(sh, t, path) {
        return r;
    }
    if rate_limited(sh, now) {
        return Reply::Text(429, "Too many requests".to_owned(), Some(1));
    }
    if method != "GET" {
        return error(405, "Method not allowed");
    }
    if header(request, "Metadata") != Some("true") {
        return error(400, "Bad request. Required metadata header not specified");
    }
    if header(request, "X-Forwarded-For").is_some() {
        return error(400, "Bad request. X-Forwarded-For header is not allowed");
    }
    match query(url, "api-version") {
        None => {
            return error(
                400,
                "Bad request. api-version was not specified in the request",
            );
        }
        Some(v) if !valid_api_version(v) => return error(400, "Bad request. Invalid api-version"),
        Some(_) => {}
    }
    let text = query(url, "format") == Some("text");
    if path.trim_end_matches('/') == "/metadata" && text {
        return Reply::Text(200, "instance/".to_owned(), None);
    }
    let Some(rest) = path
        .strip_prefix("/metadata/instance")
        .filter(|r| r.is_empty() || r.starts_with('/'))
    else {
        return error(404, "Not found");
    };
    let doc = document(sh, t);
    let mut node = &doc;
    for seg in rest.split('/').filter(|s| !s.is_empty()) {
        let next = match node {
            Value::Object(m) => m.get(seg),
            Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        };
        match next {
            Some(n) => node = n,
            None => return error(404, "Not found"),
        }
    }
    match node {
        Value::Object(_) | Value::Array(_) if text => Reply::Text(200, text_listing(node), None),
        Value::Object(_) | Value::Array(_) => Reply::Json(200, node.to_string(), None),
        leaf if text => Reply::Text(
            200,
            match leaf {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            },
            None,
        ),
        _ => error(
            400,
            "Bad request. Query parameter format=text is required for leaves",
        ),
    }
}

/// The instance document at `t`, late NICs and hidden ones left out.
fn document(sh: &Shared, t: f64) -> Value {
    let mut hidden: Vec<String> = sh
        .config
        .scenario
        .appear
        .iter()
        .filter(|a| t < a.after)
        .map(|a| azure_mac(&a.mac))
        .collect();
    if let Some(f) = &sh.config.hidden_file {
        hidden.extend(
            std::fs::read_to_string(f)
                .unwrap_or_default()
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(azure_mac),
        );
    }
    let mut doc = sh.config.instance.clone();
    if let Some(list) = doc["network"]["interface"].as_array_mut() {
        list.retain(|nic| {
            nic["macAddress"]
                .as_str()
                .is_none_or(|m| !hidden.contains(&azure_mac(m)))
        });
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A raw HTTP/1.0 GET: (status, body, Retry-After); status 0 when the
    /// connection closed without an answer.
    fn get(base: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String, Option<String>) {
        use std::fmt::Write as _;
        use std::io::Read as _;
        let addr = base.trim_start_matches("http://");
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut req = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n");
        for (k, v) in headers {
            let _ = write!(req, "{k}: {v}\r\n");
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let after = head.lines().find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("retry-after: ")
                .map(str::to_owned)
        });
        (status, body.to_owned(), after)
    }

    #[test]
    fn headers_api_version_and_leaves_are_enforced() {
        let e = Emulator::start(
            "127.0.0.1:0".parse().unwrap(),
            Config::new(world_instance()),
        )
        .unwrap();
        let b = e.base_url();
        let md = [("Metadata", "true")];
        let (s, body, _) = get(&b, "/metadata/instance/network?api-version=2021-02-01", &md);
        assert_eq!(s, 200);
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["interface"][1]["macAddress"], "020000000002");
        assert_eq!(
            get(&b, "/metadata/instance/network?api-version=2021-02-01", &[]).0,
            400
        );
        assert_eq!(get(&b, "/metadata/instance/network", &md).0, 400);
        assert_eq!(
            get(&b, "/metadata/instance/network?api-version=latest", &md).0,
            400
        );
        assert_eq!(
            get(
                &b,
                "/metadata/instance/network?api-version=2021-02-01",
                &[("Metadata", "true"), ("X-Forwarded-For", "10.0.0.1")]
            )
            .0,
            400
        );
        std::thread::sleep(Duration::from_secs(1));
        let (s, body, _) = get(
            &b,
            "/metadata/instance/compute/vmId?api-version=2021-02-01&format=text",
            &md,
        );
        assert_eq!(
            (s, body.as_str()),
            (200, "5c08b38e-4d57-4c23-ac45-aca61037f084")
        );
        assert_eq!(
            get(
                &b,
                "/metadata/instance/compute/vmId?api-version=2021-02-01",
                &md
            )
            .0,
            400
        );
        assert_eq!(
            get(&b, "/metadata/instance/nothing?api-version=2021-02-01", &md).0,
            404
        );
        assert_eq!(e.log().len(), 8);
        assert!(
            e.log()
                .iter()
                .all(|l| LogEntry::parse(&l.line()).map(|p| p.line()) == Some(l.line()))
        );
    }

    #[test]
    fn more_than_five_requests_a_second_get_429_with_retry_after() {
        let e = Emulator::start(
            "127.0.0.1:0".parse().unwrap(),
            Config::new(world_instance()),
        )
        .unwrap();
        let b = e.base_url();
        let statuses: Vec<(u16, Option<String>)> = (0..7)
            .map(|_| {
                let (s, _, a) = get(
                    &b,
                    "/metadata/instance/network?api-version=2021-02-01",
                    &[("Metadata", "true")],
                );
                (s, a)
            })
            .collect();
        assert_eq!(statuses[..5].iter().filter(|(s, _)| *s == 200).count(), 5);
        assert_eq!(statuses[5], (429, Some("1".to_owned())));
    }

    #[test]
    fn only_allowed_sources_are_answered() {
        let mut c = Config::new(world_instance());
        c.allowed_sources = Some(vec!["10.98.0.10".parse().unwrap()]);
        let e = Emulator::start("127.0.0.1:0".parse().unwrap(), c).unwrap();
        let (status, _, _) = get(
            &e.base_url(),
            "/metadata/instance?api-version=2021-02-01",
            &[("Metadata", "true")],
        );
        assert_eq!(status, 0, "a refused source got an answer");
        assert_eq!(e.log()[0].status, "refused");
    }
}

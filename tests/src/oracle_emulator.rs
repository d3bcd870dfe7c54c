// SPDX-License-Identifier: Apache-2.0
//! Performs IO: an Oracle Cloud Infrastructure (OCI) instance metadata service
//! emulator, IMDS version 2, for tests and benchmarks (never for production),
//! from Oracle's documented formats ("Getting Instance Metadata").
//!
//! * `GET /opc/v2/vnics/`: every VNIC, a JSON list, the primary first
//!   (`vnicId, privateIp, vlanTag, macAddr, virtualRouterIp, subnetCidrBlock`,
//!   `nicIndex` on bare metal, the IPv6 keys when given). `GET /opc/v2/instance/`
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
//! [`Config::log_file`], one line per request.

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};

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

/// A VNIC that appears late.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Appear {
    /// Its MAC (either case).
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
    /// VNICs that appear late.
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
    /// The `/opc/v2/vnics/` list.
    pub vnics: Value,
    /// The `/opc/v2/instance/` document.
    pub instance: Value,
    /// What misbehaves.
    pub scenario: Scenario,
    /// Where to append one line per request.
    pub log_file: Option<PathBuf>,
    /// The file of detached MACs ([`DETACHED_FILE`]), read on every request.
    pub detached_file: Option<PathBuf>,
    /// The fault file ([`FAULT_FILE`]), read on every request.
    pub fault_file: Option<PathBuf>,
}

impl Config {
    /// Serving the world's VNICs and instance, nothing misbehaving.
    pub fn new() -> Self {
        Self {
            vnics: world_vnics(),
            instance: world_instance(),
            scenario: Scenario::default(),
            log_file: None,
            detached_file: None,
            fault_file: None,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self::new()
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
    /// The `Authorization` header, spaces as `%20` (`-`: none).
    pub authorization: String,
    /// The status, or `drop`, `garbage`, `not-json`.
    pub status: String,
}

impl LogEntry {
    /// The log file's line: `SECONDS PEER METHOD URL authorization=H STATUS`.
    pub fn line(&self) -> String {
        format!(
            "{:.3} {} {} {} authorization={} {}",
            self.t, self.peer, self.method, self.url, self.authorization, self.status
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
            authorization: f.next()?.strip_prefix("authorization=")?.to_owned(),
            status: f.next()?.to_owned(),
        };
        f.next().is_none().then_some(e)
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

struct Shared {
    config: Config,
    rule_hits: Vec<AtomicU64>,
    started: Instant,
    first: OnceLock<Instant>,
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
            log: Mutex::new(Vec::new()),
            log_file,
        });
        let server = Arc::new(server);
        let (srv, sh) = (Arc::clone(&server), Arc::clone(&shared));
        let thread = std::thread::Builder::new()
            .name("oracle-emulator".into())
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

fn header<'r>(request: &'r tiny_http::Request, name: &'static str) -> Option<&'r str> {
    request
        .headers()
        .iter()
        .find(|h| h.field.equiv(name))
        .map(|h| h.value.as_str())
}

/// What to send back.
enum Reply {
    Json(u16, String, Option<u64>),
    Text(String),
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
    let authorization = header(&request, "Authorization").unwrap_or("-").to_owned();
    let reply = reply(sh, now, &method, &path, &request);
    let status = match &reply {
        Reply::Json(s, _, _) => s.to_string(),
        Reply::Text(_) => "200".to_owned(),
        Reply::Bytes(_, label) | Reply::Silence(label) => (*label).to_owned(),
    };
    let entry = LogEntry {
        t,
        peer: peer.map_or_else(|| "-".to_owned(), |p| p.to_string()),
        method,
        url: url.replace(' ', "%20"),
        authorization: authorization.replace(' ', "%20"),
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
            if let Ok(h) = tiny_http::Header::from_bytes("Content-Type", "application/json") {
                r.add_header(h);
            }
            if let Some(s) = retry_after
                && let Ok(h) = tiny_http::Header::from_bytes("Retry-After", s.to_string())
            {
                r.add_header(h);
            }
            let _ = request.respond(r);
        }
        Reply::Text(body) => {
            let mut r = tiny_http::Response::from_string(body);
            if let Ok(h) = tiny_http::Header::from_bytes("Content-Type", "text/plain") {
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

fn error(status: u16, code: &str, message: &str) -> Reply {
    Reply::Json(
        status,
        json!({ "code": code, "message": message }).to_string(),
        None,
    )
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
            path.starts_with(r.path.trim_end_matches('/'))
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
            Some(Reply::Bytes(vec![0xff, 0xfe, b'[', 0x80, b'x'], "garbage"))
        }
        (Some(Action::NotJson), _) => Some(Reply::Bytes(
            b"<html><body>502 Bad Gateway</body></html>".to_vec(),
            "not-json",
        )),
        (None, Some(status)) => Some(Reply::Json(
            status,
            json!({"code": "Injected", "message": format!("injected {status}")}).to_string(),
            rule.retry_after,
        )),
        (None, None) => None,
    }
}

fn reply(
    sh: &Shared,
    now: Instant,
    method: &str,
    path: &str,
    request: &tiny_http::Request,
) -> Reply {
    let first = *sh.first.get_or_init(|| now);
    let t = now.saturating_duration_since(first).as_secs_f64();
    if let Some(r) = injected(sh, t, path) {
        return r;
    }
    if let Some(r) = sh.config.fault_file.as_ref().and_then(|f| file_fault(f)) {
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
        Some("vnics") if segs.next().is_none() => Reply::Json(200, vnics(sh, t).to_string(), None),
        Some("instance") => {
            let mut node = &sh.config.instance;
            for seg in segs {
                match node.get(seg) {
                    Some(n) => node = n,
                    None => return error(404, "NotFound", "Not Found"),
                }
            }
            match node {
                Value::String(s) => Reply::Text(s.clone()),
                Value::Object(_) | Value::Array(_) => Reply::Json(200, node.to_string(), None),
                other => Reply::Text(other.to_string()),
            }
        }
        _ => error(404, "NotFound", "Not Found"),
    }
}

/// The fault the fault file names, if it exists and names one.
fn file_fault(path: &std::path::Path) -> Option<Reply> {
    let text = std::fs::read_to_string(path).ok()?;
    match text.split_whitespace().next()? {
        "drop" => Some(Reply::Silence("drop")),
        "garbage" => Some(Reply::Bytes(vec![0xff, 0xfe, b'[', 0x80, b'x'], "garbage")),
        "not-json" => Some(Reply::Bytes(
            b"<html><body>502 Bad Gateway</body></html>".to_vec(),
            "not-json",
        )),
        status => status.parse::<u16>().ok().map(|s| {
            Reply::Json(
                s,
                json!({"code": "Injected", "message": format!("injected {s}")}).to_string(),
                None,
            )
        }),
    }
}

/// The VNIC list at `t`, late and detached VNICs left out.
fn vnics(sh: &Shared, t: f64) -> Value {
    let mut hidden: Vec<String> = sh
        .config
        .scenario
        .appear
        .iter()
        .filter(|a| t < a.after)
        .map(|a| a.mac.to_lowercase())
        .collect();
    if let Some(f) = &sh.config.detached_file {
        hidden.extend(
            std::fs::read_to_string(f)
                .unwrap_or_default()
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_lowercase),
        );
    }
    let mut list = sh.config.vnics.clone();
    if let Some(a) = list.as_array_mut() {
        a.retain(|v| {
            v["macAddr"]
                .as_str()
                .is_none_or(|m| !hidden.contains(&m.to_lowercase()))
        });
    }
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A raw HTTP/1.0 request: (status, body).
    fn get(base: &str, method: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
        use std::fmt::Write as _;
        use std::io::Read as _;
        let addr = base.trim_start_matches("http://");
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut req = format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\n");
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
        (status, body.to_owned())
    }

    const AUTHZ: [(&str, &str); 1] = [("Authorization", "Bearer Oracle")];

    #[test]
    fn the_header_rule_paths_and_leaves() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::new();
        config.detached_file = Some(dir.path().join(DETACHED_FILE));
        config.fault_file = Some(dir.path().join(FAULT_FILE));
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
        assert_eq!(log[0].authorization, "Bearer%20Oracle");
        assert_eq!(log[1].authorization, "-");
        assert_eq!(log[1].status, "401");
    }

    #[test]
    fn late_vnics_and_injected_faults() {
        let mut c = Config::new();
        c.scenario = Scenario::from_value(json!({
            "appear": [{"mac": MAC1, "after": 0.3}],
            "rules": [{"path": "/opc/v2/instance", "count": 1, "status": 503, "retry_after": 1},
                      {"path": "/opc/v2/instance", "count": 1, "action": "not-json"}]
        }))
        .unwrap();
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

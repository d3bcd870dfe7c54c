// SPDX-License-Identifier: Apache-2.0
//! Performs IO: an EC2 instance metadata service emulator on `tiny_http`, for tests
//! and benchmarks. It runs in-process ([`Emulator::start`], a thread on a loopback
//! port) or as `leasehook-emulator --cloud ec2`.
//!
//! # Tree
//!
//! A JSON object rooted at `/` (`{"latest": {"meta-data": {...}}}`): an object is a
//! folder, whose listing is its keys one per line, subfolders with a trailing `/`;
//! a string or number is a leaf; a list is a leaf of its items joined by newlines;
//! `null` is 404. A folder answers with and without the trailing `/`.
//!
//! # As the service answers (issue 31)
//!
//! * Dated API versions ([`Served::versions`]: `/2018-09-24/meta-data/...`, what
//!   nm-cloud-setup and SUSE's cloud-netconfig ask, `/2009-04-04/...` cloud-init's
//!   oldest) read the same tree as `/latest/...`; `GET /` lists the versions and
//!   `latest`, one a line ("Retrieve instance metadata": "specify the version ...
//!   or use latest",
//!   <https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-retrieval.html>).
//!   A scenario's paths are the `latest` ones; the log shows the path as asked.
//! * `HEAD` answers as `GET` without the body (same status, same token rules):
//!   cloud-netconfig's `check_url` sends `curl -I` before every `GET`.
//! * A `404` carries IMDS's HTML page (`text/html`); every other method than
//!   `GET`, `HEAD` and the token's `PUT` gets 405.
//! * A token `PUT` carrying `X-Forwarded-For` gets 403: IMDSv2 "will not issue
//!   session tokens to any requests that contain an X-Forwarded-For header"
//!   (<https://aws.amazon.com/blogs/security/defense-in-depth-open-firewalls-reverse-proxies-ssrf-vulnerabilities-ec2-instance-metadata-service/>).
//!
//! # IMDSv2
//!
//! `PUT /latest/api/token` with `X-aws-ec2-metadata-token-ttl-seconds: 1..=21600`
//! hands out a random token; a `GET` carrying an unknown or expired token gets 401,
//! and with `require_token` a `GET` carrying none gets 401 too.
//!
//! # Scenario
//!
//! A JSON object with three optional lists. Times are seconds (fractions allowed)
//! since the **first request** the emulator received, so a test's timeline does not
//! depend on how long the process took to start. Paths match by whole segments: a
//! path matches itself and everything below it (`/a/b` matches `/a/b`, `/a/b/` and
//! `/a/b/c`, not `/a/bc`).
//!
//! ```json
//! {
//!   "appear": [
//!     {"path": "/latest/meta-data/network/interfaces/macs/02:00:00:00:00:02", "after": 1.0},
//!     {"path": "/latest/meta-data/network/interfaces/macs/02:00:00:00:00:02/ipv6s", "after": 2.0}
//!   ],
//!   "values": [
//!     {"path": "/latest/meta-data/network/interfaces/macs/02:00:00:00:00:02/device-number",
//!      "value": "0", "from": 0, "until": 1.0}
//!   ],
//!   "rules": [
//!     {"path": "/latest/api/token", "method": "PUT", "status": 503, "retry_after": 1, "count": 1},
//!     {"path": "/latest/meta-data/mac", "status": 500, "from": 0.5, "until": 1.5},
//!     {"path": "/latest/meta-data/mac", "status": 401, "count": 1},
//!     {"path": "/latest/meta-data/instance-id", "delay": 0.3},
//!     {"path": "/latest/meta-data/local-ipv4", "action": "drop"},
//!     {"path": "/latest/meta-data/hostname", "action": "garbage"}
//!   ]
//! }
//! ```
//!
//! * `appear`: the path and everything below it are absent (404, and left out of
//!   their folder's listing) until `after` seconds.
//! * `values`: the leaf at exactly `path` reads `value` (string, number or list)
//!   from `from` (default 0) until `until` (default for ever).
//! * `rules`: the first rule that matches a request decides its answer. A rule
//!   matches by `path`, optional `method` (`GET`, `PUT`), the window `from`/`until`,
//!   and `count` (only the first `count` requests it matches). It may wait `delay`
//!   seconds, then answers `status` (with `retry_after` seconds as `Retry-After`,
//!   and `body`), or does `action`: `drop` (the request is read and never
//!   answered: the client times out, as when the network drops the reply),
//!   `garbage` (200 with a body that is not UTF-8), `not-http` (bytes that are not
//!   an HTTP response), `huge` (200 with `size` bytes, default 1 MiB). A rule with
//!   neither only delays the normal answer.
//!
//! # Log
//!
//! Every request is logged, in memory ([`Emulator::log`]) and, when asked, to a file,
//! one line per request: `SECONDS PEER METHOD PATH STATUS`, where `STATUS` is the
//! HTTP status or the action (`drop`, `not-http`, `garbage`, `huge`). Tokens are not
//! logged.
//!
//! # Connection resets
//!
//! [`Resetter`] (`leasehook-emulator --cloud ec2 --reset`) stands in for an IMDS that resets every
//! connection: it reads each request and answers with a TCP RST; the log line's
//! `STATUS` is `reset`.

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasher, RandomState};
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};

use crate::shell::{
    self, Reply, RequestLog, Rules, Service, Shell, State, header, in_window, under,
};
pub use crate::shell::{Action, LogEntry, Rule};

/// The header a token request names its lifetime in.
const TTL_HEADER: &str = "X-aws-ec2-metadata-token-ttl-seconds";
/// The header a `GET` carries its token in.
const TOKEN_HEADER: &str = "X-aws-ec2-metadata-token";

/// The token headers of a service shaped like IMDS: EC2's by default, Alibaba
/// ECS's in [`crate::aliyun_emulator`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenHeaders {
    /// The `PUT`'s header naming the token's lifetime.
    pub ttl: &'static str,
    /// The `GET`'s header carrying the token.
    pub token: &'static str,
}

/// EC2's IMDSv2 headers.
pub const EC2_HEADERS: TokenHeaders = TokenHeaders {
    ttl: TTL_HEADER,
    token: TOKEN_HEADER,
};
/// The log file's name below the world's folder (`--dir`).
pub const LOG_NAME: &str = "imds.log";
/// The path tokens are `PUT` to.
const TOKEN_PATH: &str = "/latest/api/token";
/// EC2's dated metadata versions (what `GET /` lists before `latest`), oldest
/// first: each serves the same tree as `latest`.
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
    "2011-01-01",
    "2011-05-01",
    "2012-01-12",
    "2014-02-25",
    "2014-11-05",
    "2015-10-20",
    "2016-04-19",
    "2016-06-30",
    "2016-09-02",
    "2018-03-28",
    "2018-08-17",
    "2018-09-24",
    "2019-10-01",
    "2020-10-27",
    "2021-01-03",
    "2021-03-23",
    "2021-07-15",
    "2022-09-24",
    "2024-04-11",
];
/// IMDS's `404` body.
const NOT_FOUND: &str = "<?xml version=\"1.0\" encoding=\"iso-8859-1\"?>\n\
<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0 Transitional//EN\"\n\
\t\"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd\">\n\
<html xmlns=\"http://www.w3.org/1999/xhtml\" xml:lang=\"en\" lang=\"en\">\n \
<head>\n  <title>404 - Not Found</title>\n </head>\n <body>\n  <h1>404 - Not Found</h1>\n </body>\n</html>\n";
/// The longest token lifetime IMDS grants, in seconds.
const MAX_TTL: u64 = 21_600;

/// What makes the emulator misbehave, and when (see the module docs).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Paths that appear late.
    #[serde(default)]
    pub appear: Vec<Appear>,
    /// Leaves that read another value for a while.
    #[serde(default)]
    pub values: Vec<ValueWindow>,
    /// Answers that override the normal ones (the shell's fault rules).
    #[serde(default)]
    pub rules: Vec<Rule>,
}

impl Scenario {
    /// Parses a scenario document.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("scenario: {e}"))?;
        Self::from_value(v)
    }

    /// Reads a scenario from parsed JSON.
    pub fn from_value(v: Value) -> Result<Self, String> {
        let s: Self = serde_json::from_value(v).map_err(|e| format!("scenario: {e}"))?;
        Rules::new(s.rules.clone())?;
        Ok(s)
    }
}

impl shell::ScenarioDoc for Scenario {
    fn from_value(v: Value) -> Result<Self, String> {
        Self::from_value(v)
    }

    fn rules(&self) -> &[Rule] {
        &self.rules
    }
}

/// A path that is absent until `after` seconds.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Appear {
    /// The path (and everything below it).
    pub path: String,
    /// When it appears.
    pub after: f64,
}

/// A leaf that reads `value` in a time window.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValueWindow {
    /// The leaf's exact path.
    pub path: String,
    /// What it reads meanwhile.
    pub value: Value,
    /// From when (default 0).
    #[serde(default)]
    pub from: f64,
    /// Until when (default for ever).
    pub until: Option<f64>,
}

/// What EC2's IMDS serves (the cloud's part of [`Config`]).
#[derive(Debug, Clone)]
pub struct Served {
    /// The metadata tree, rooted at `/`.
    pub tree: Value,
    /// Whether a `GET` without a token gets 401.
    pub require_token: bool,
    /// The token headers (EC2's by default).
    pub headers: TokenHeaders,
    /// Dated API versions served as `latest` and listed at `/` ([`EC2_VERSIONS`]
    /// by default).
    pub versions: &'static [&'static str],
}

impl From<Value> for Served {
    /// Serves `tree` with EC2's headers and versions, tokens optional.
    fn from(tree: Value) -> Self {
        Self {
            tree,
            require_token: false,
            headers: EC2_HEADERS,
            versions: EC2_VERSIONS,
        }
    }
}

/// The emulator's configuration: the shell's (log, allowed sources: a request
/// from any other address gets 403, as Alibaba's metadata service answers
/// addresses of the instance's VPC only) and what it serves.
pub type Config = shell::Config<Served, Scenario>;

/// EC2's IMDS as the shell serves it: its configuration and live state.
#[derive(Debug)]
pub struct Imds {
    state: State<Served, Scenario, LogEntry>,
    tokens: Mutex<HashMap<String, Instant>>,
    token_seq: AtomicU64,
    random: RandomState,
    live: RwLock<Live>,
}

/// Changes made while serving ([`Emulator::set_leaf`], [`Emulator::set_hidden`]).
#[derive(Debug, Default)]
struct Live {
    leaves: HashMap<String, Value>,
    hidden: BTreeSet<String>,
}

/// A running emulator; stops when dropped.
pub type Emulator = Shell<Imds>;

impl Service for Imds {
    type Entry = LogEntry;

    fn handle(&self, request: tiny_http::Request) {
        handle(self, request);
    }

    fn requests(&self) -> &RequestLog<LogEntry> {
        &self.state.log
    }
}

impl Shell<Imds> {
    /// Binds `bind` (use a loopback address: `127.0.0.1:0`, `[::1]:0`) and serves
    /// on a thread.
    pub fn start(bind: SocketAddr, config: Config) -> io::Result<Self> {
        let service = Imds {
            state: State::open(config)?,
            tokens: Mutex::new(HashMap::new()),
            token_seq: AtomicU64::new(0),
            random: RandomState::new(),
            live: RwLock::new(Live::default()),
        };
        Shell::bind(bind, "imds-emulator", service)
    }

    /// How many requests with this method asked for a path ending in `suffix`.
    pub fn count(&self, method: &str, suffix: &str) -> usize {
        self.log()
            .iter()
            .filter(|e| e.method == method && e.path.ends_with(suffix))
            .count()
    }

    /// Every token handed out so far (for tests that check a token leaks nowhere).
    pub fn issued_tokens(&self) -> Vec<String> {
        self.service()
            .tokens
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }

    /// The live state (what the scenario changes while serving), to change.
    fn live(&self) -> std::sync::RwLockWriteGuard<'_, Live> {
        self.service()
            .live
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the leaf at `path` read `value` from now on (`None`: what the tree and
    /// the scenario say again). A change made this way wins over both: tests whose
    /// timeline is only known while they run (the soak test) change the metadata
    /// when their events happen.
    pub fn set_leaf(&self, path: &str, value: Option<Value>) {
        let mut live = self.live();
        let key = path.trim_end_matches('/').to_owned();
        match value {
            Some(v) => live.leaves.insert(key, v),
            None => live.leaves.remove(&key),
        };
    }

    /// Hides `path` and everything below it (404, and left out of its folder's
    /// listing), or shows it again: a scenario's `appear`, decided while serving.
    pub fn set_hidden(&self, path: &str, hidden: bool) {
        let mut live = self.live();
        let key = path.trim_end_matches('/').to_owned();
        if hidden {
            live.hidden.insert(key);
        } else {
            live.hidden.remove(&key);
        }
    }
}

/// A listener that resets every connection: it reads the request, then closes
/// the socket with `SO_LINGER` 0, so the client gets a TCP RST instead of an
/// answer (an IMDS that crashes mid-request, a middlebox killing the flow).
/// `tiny_http` cannot do this, so it is a listener of its own; each reset is
/// logged like an emulator request, with status `reset`.
pub struct Resetter {
    addr: SocketAddr,
    stop: Arc<std::sync::atomic::AtomicBool>,
    log: Arc<RequestLog<LogEntry>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Resetter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resetter")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Resetter {
    /// Binds `bind` (a loopback address) and resets on a thread; `log_file`, when
    /// given, gets one line per reset connection.
    pub fn start(bind: SocketAddr, log_file: Option<&Path>) -> io::Result<Self> {
        let listener = std::net::TcpListener::bind(bind)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let log = Arc::new(RequestLog::open(log_file)?);
        let (stop2, log2) = (Arc::clone(&stop), Arc::clone(&log));
        let thread = std::thread::Builder::new()
            .name("imds-resetter".into())
            .spawn(move || {
                let t0 = Instant::now();
                for conn in listener.incoming() {
                    if stop2.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(mut conn) = conn else { continue };
                    let peer = conn
                        .peer_addr()
                        .map_or_else(|_| "-".to_owned(), |a| a.to_string());
                    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
                    let mut buf = [0u8; 4096];
                    let n = io::Read::read(&mut conn, &mut buf).unwrap_or(0);
                    let head = String::from_utf8_lossy(buf.get(..n).unwrap_or_default());
                    let mut words = head.split_whitespace();
                    let entry = LogEntry {
                        t: t0.elapsed().as_secs_f64(),
                        peer,
                        method: words.next().unwrap_or("-").to_owned(),
                        path: words.next().unwrap_or("-").to_owned(),
                        status: "reset".to_owned(),
                    };
                    log2.push(entry);
                    // Linger 0: close() sends RST, not FIN.
                    let sock = socket2::Socket::from(conn);
                    let _ = sock.set_linger(Some(Duration::ZERO));
                    drop(sock);
                }
            })?;
        Ok(Self {
            addr,
            stop,
            log,
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every connection reset so far.
    pub fn log(&self) -> Vec<LogEntry> {
        self.log.entries()
    }

    /// Blocks until the thread ends (it never does unless stopped): for the binary.
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Resetter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees `stop`.
        let _ = std::net::TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn handle(sh: &Imds, request: tiny_http::Request) {
    let t = sh.state.clock.now();
    let method = request.method().as_str().to_owned();
    let (asked, query) = shell::split_url(request.url());
    let path = canonical(sh.state.config.world.versions, &asked);
    let rule = sh.state.rules.matching(&method, &path, &query, t);
    let refused = !sh
        .state
        .config
        .allows(request.remote_addr().map(SocketAddr::ip));
    let reply = if refused {
        text(403, "source address not allowed")
    } else {
        rule.and_then(|r| shell::fault(r, |status, body| text(status, body.unwrap_or_default())))
            .unwrap_or_else(|| {
                let (status, body) = answer(sh, t, &method, &path, &request);
                text(status, &body)
            })
    };
    let entry = LogEntry {
        t,
        peer: shell::peer(&request),
        method,
        path: asked,
        status: reply.label().to_owned(),
    };
    sh.state.log.answer(entry, reply, request, &[]);
}

fn text(status: u16, body: &str) -> Reply {
    // IMDS's 404 is an HTML page; everything else plain text.
    let ctype = if status == 404 {
        "text/html"
    } else {
        "text/plain"
    };
    Reply::new(status, body).content_type(ctype)
}

fn answer(
    sh: &Imds,
    t: f64,
    method: &str,
    path: &str,
    request: &tiny_http::Request,
) -> (u16, String) {
    let mut tokens = sh.tokens.lock().unwrap_or_else(PoisonError::into_inner);
    match method {
        "PUT" if path == TOKEN_PATH && header(request, "X-Forwarded-For").is_some() => {
            (403, "Forbidden".to_owned())
        }
        "PUT" if path == TOKEN_PATH => {
            let ttl = header(request, sh.state.config.world.headers.ttl)
                .and_then(|v| v.trim().parse::<u64>().ok());
            match ttl {
                Some(ttl @ 1..=MAX_TTL) => {
                    let token = new_token(sh);
                    tokens.insert(token.clone(), Instant::now() + Duration::from_secs(ttl));
                    (200, token)
                }
                _ => (400, "bad TTL".to_owned()),
            }
        }
        "PUT" => (404, NOT_FOUND.to_owned()),
        "GET" | "HEAD" => {
            match header(request, sh.state.config.world.headers.token) {
                Some(tok) if tokens.get(tok).is_none_or(|exp| *exp < Instant::now()) => {
                    return (401, "unauthorized".to_owned());
                }
                None if sh.state.config.world.require_token => {
                    return (401, "unauthorized".to_owned());
                }
                _ => {}
            }
            drop(tokens);
            if path == "/" {
                let mut all: Vec<&str> = sh.state.config.world.versions.to_vec();
                all.push("latest");
                return (200, all.join("\n"));
            }
            lookup(sh, t, path).map_or((404, NOT_FOUND.to_owned()), |b| (200, b))
        }
        _ => (405, "method not allowed".to_owned()),
    }
}

/// `path` with a dated version's first segment read as `latest`
/// (`/2018-09-24/meta-data/` is `/latest/meta-data/`).
fn canonical(versions: &[&str], path: &str) -> String {
    let rest = path.strip_prefix('/').unwrap_or(path);
    let (first, tail) = rest
        .split_once('/')
        .map_or((rest, None), |(a, b)| (a, Some(b)));
    if versions.contains(&first) {
        tail.map_or_else(|| "/latest".to_owned(), |t| format!("/latest/{t}"))
    } else {
        path.to_owned()
    }
}

fn new_token(sh: &Imds) -> String {
    let n = sh.token_seq.fetch_add(1, Ordering::SeqCst);
    let [a, b, c] = [0u64, 1, 2].map(|i| sh.random.hash_one((n, i)));
    format!("{a:016x}{b:016x}{c:016x}")
}

fn hidden(sh: &Imds, t: f64, path: &str) -> bool {
    let live = sh.live.read().unwrap_or_else(PoisonError::into_inner);
    live.hidden.iter().any(|h| under(path, h))
        || sh
            .state
            .config
            .scenario
            .appear
            .iter()
            .any(|a| t < a.after && under(path, &a.path))
}

/// The body at `path` at time `t`, or `None` for 404.
fn lookup(sh: &Imds, t: f64, path: &str) -> Option<String> {
    if hidden(sh, t, path) {
        return None;
    }
    let exact = path.trim_end_matches('/');
    let live = sh
        .live
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .leaves
        .get(exact)
        .cloned();
    if let Some(v) = live {
        return leaf(&v);
    }
    if let Some(v) = sh
        .state
        .config
        .scenario
        .values
        .iter()
        .find(|v| v.path.trim_end_matches('/') == exact && in_window(t, v.from, v.until))
    {
        return leaf(&v.value);
    }
    let mut node = &sh.state.config.world.tree;
    for part in path.split('/').filter(|p| !p.is_empty()) {
        node = node.as_object()?.get(part)?;
    }
    match node {
        Value::Object(folder) => {
            let base = exact.to_owned();
            let names: Vec<String> = folder
                .iter()
                .filter(|(k, _)| !hidden(sh, t, &format!("{base}/{k}")))
                .map(|(k, v)| {
                    if v.is_object() {
                        format!("{k}/")
                    } else {
                        k.clone()
                    }
                })
                .collect();
            Some(names.join("\n"))
        }
        other => leaf(other),
    }
}

fn leaf(v: &Value) -> Option<String> {
    let one = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    };
    match v {
        Value::Array(items) => Some(items.iter().filter_map(one).collect::<Vec<_>>().join("\n")),
        Value::Object(_) => None,
        other => one(other),
    }
}

/// Reads a tree or scenario file.
pub fn read_json(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path:?}: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("{path:?}: {e}"))
}

/// The primary NIC of [`sample_tree`].
pub const SAMPLE_PRIMARY: &str = "02:00:00:00:00:01";
/// The secondary NIC of [`sample_tree`] (device 1, IPv4 and IPv6).
pub const SAMPLE_SECONDARY: &str = "02:00:00:00:00:02";

/// A two-NIC instance with the keys a real EC2 instance serves, for tests,
/// benchmarks and the binary's default.
pub fn sample_tree() -> Value {
    let identity = json!({
        "accountId": "123456789012", "architecture": "x86_64",
        "availabilityZone": "eu-central-1a", "imageId": "ami-0a1b2c3d4e5f60718",
        "instanceId": "i-0fedcba9876543210", "instanceType": "m6i.large",
        "privateIp": "10.20.0.10", "region": "eu-central-1", "version": "2017-09-30"
    });
    let nic = |mac: &str, dev: &str, eni: &str, v4: Value, subnet: &str, extra: Value| {
        let mut n = json!({
            "device-number": dev, "interface-id": eni, "local-hostname": "ip-10-20-0-10.eu-central-1.compute.internal",
            "local-ipv4s": v4, "mac": mac, "owner-id": "123456789012",
            "security-group-ids": "sg-0123456789abcdef0", "security-groups": "default",
            "subnet-id": "subnet-0123456789abcdef0", "subnet-ipv4-cidr-block": subnet,
            "vpc-id": "vpc-0123456789abcdef0", "vpc-ipv4-cidr-block": "10.20.0.0/16",
            "vpc-ipv4-cidr-blocks": "10.20.0.0/16"
        });
        if let (Some(n), Some(e)) = (n.as_object_mut(), extra.as_object()) {
            n.extend(e.clone());
        }
        n
    };
    json!({"latest": {
        "api": {},
        "user-data": "#cloud-config\n{}\n",
        "dynamic": {"instance-identity": {"document": identity.to_string()}},
        "meta-data": {
            "ami-id": "ami-0a1b2c3d4e5f60718", "ami-launch-index": "0",
            "ami-manifest-path": "(unknown)",
            "block-device-mapping": {"ami": "/dev/xvda", "root": "/dev/xvda"},
            "events": {"maintenance": {"history": "[]", "scheduled": "[]"}},
            "hostname": "ip-10-20-0-10.eu-central-1.compute.internal",
            "identity-credentials": {"ec2": {"info": "{\"Code\":\"Success\"}"}},
            "instance-action": "none", "instance-id": "i-0fedcba9876543210",
            "instance-life-cycle": "on-demand", "instance-type": "m6i.large",
            "local-hostname": "ip-10-20-0-10.eu-central-1.compute.internal",
            "local-ipv4": "10.20.0.10", "mac": SAMPLE_PRIMARY,
            "metrics": {"vhostmd": "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"},
            "network": {"interfaces": {"macs": {
                SAMPLE_PRIMARY: nic(SAMPLE_PRIMARY, "0", "eni-0000000000000000a",
                    json!("10.20.0.10"), "10.20.0.0/24", json!({})),
                SAMPLE_SECONDARY: nic(SAMPLE_SECONDARY, "1", "eni-0000000000000000b",
                    json!(["10.20.1.20", "10.20.1.21"]), "10.20.1.0/24",
                    json!({"ipv6s": "2a05:d014:0:1::20",
                           "subnet-ipv6-cidr-blocks": "2a05:d014:0:1::/64",
                           "vpc-ipv6-cidr-blocks": "2a05:d014::/56"}))
            }}},
            "placement": {"availability-zone": "eu-central-1a",
                          "availability-zone-id": "euc1-az2", "region": "eu-central-1"},
            "profile": "default-hvm", "public-keys": {"0": {"openssh-key": "ssh-ed25519 AAAAC3Nza test"}},
            "reservation-id": "r-0123456789abcdef0", "security-groups": "default",
            "services": {"domain": "amazonaws.com", "partition": "aws"},
            "system": "nitro"
        }
    }})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell::LogLine as _;

    #[test]
    fn leaves_and_log_lines() {
        assert_eq!(leaf(&json!("x")).as_deref(), Some("x"));
        assert_eq!(leaf(&json!(3)).as_deref(), Some("3"));
        assert_eq!(leaf(&json!(["a", 1])).as_deref(), Some("a\n1"));
        assert_eq!(leaf(&Value::Null), None);
        let e = LogEntry {
            t: 1.25,
            peer: "127.0.0.1:5".into(),
            method: "GET".into(),
            path: "/latest/meta-data/mac".into(),
            status: "404".into(),
        };
        assert_eq!(e.line(), "1.250 127.0.0.1:5 GET /latest/meta-data/mac 404");
        assert_eq!(LogEntry::parse(&e.line()), Some(e));
        assert_eq!(LogEntry::parse("1.0 a GET /x"), None);
        assert_eq!(LogEntry::parse("x a GET /x 200"), None);
    }

    #[test]
    fn scenarios_are_checked() {
        assert!(Scenario::from_json("{}").is_ok());
        assert!(
            Scenario::from_json(r#"{"rules": [{"path": "/x", "status": 500, "action": "drop"}]}"#)
                .is_err()
        );
        assert!(
            Scenario::from_json(r#"{"rules": [{"path": "/x", "action": "explode"}]}"#).is_err()
        );
        assert!(Scenario::from_json(r#"{"appear": [{"path": "/x"}]}"#).is_err());
        assert!(Scenario::from_json("[").is_err());
    }
}

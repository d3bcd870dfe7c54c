// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the HTTP shell every metadata emulator runs in (issue 32, item 3).
//! Each cloud's module keeps only its answers: what its service serves and how it
//! refuses; the shell is written once for all of them:
//!
//! * [`Shell`]: the `tiny_http` server on a thread (a thread a request, so a
//!   held or delayed request does not hold the others), stopped when dropped;
//! * [`RequestLog`]: every request in memory and, when asked, one line a request
//!   appended to a file ([`LogLine`] is a cloud's line; [`read_log`] reads the
//!   file back);
//! * [`Rules`]: the scenario's fault rules, the same for every cloud (a path by
//!   whole segments, a method, a part of the query, a time window, a count; a
//!   delay, then a status or an [`Action`]);
//! * [`Reply`]: what goes back, an HTTP answer or none at all, with the headers
//!   a cloud puts on every answer.
//! * [`Config`]: what every cloud is started with, the cloud's part (what it
//!   serves) beside the shell's (log file, allowed sources, [`RateLimit`]);
//!   [`State`], the shell's part of a running emulator (the config, its rules,
//!   [`Clock`], log and [`Limiter`]), which each cloud's service holds;
//! * [`EmulatorArgs`]: the options every cloud takes in the one emulator
//!   binary, `leasehook-emulator --cloud <cloud>` (`tests/src/bin/`).

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Deserialize;

/// The body size of a `huge` answer without `size`.
const DEFAULT_HUGE: usize = 1024 * 1024;

/// One logged request, as a cloud writes it: one line of its log file.
pub trait LogLine: Clone + Send + Sync + 'static {
    /// The log file's line (no newline).
    fn line(&self) -> String;
    /// Parses a line of the log file.
    fn parse(line: &str) -> Option<Self>;
}

/// One logged request, the line most emulators write:
/// `SECONDS PEER METHOD PATH STATUS`, where `STATUS` is the HTTP status or the
/// action (`drop`, `not-http`, `garbage`, `huge`, `reset`).
#[derive(Debug, Clone, PartialEq)]
pub struct LogEntry {
    /// Seconds since the first request.
    pub t: f64,
    /// The client's address (and port, where the cloud's log keeps it).
    pub peer: String,
    /// `GET`, `PUT`, ...
    pub method: String,
    /// The path asked for.
    pub path: String,
    /// The status sent, or the action taken.
    pub status: String,
}

impl LogLine for LogEntry {
    fn line(&self) -> String {
        format!(
            "{:.3} {} {} {} {}",
            self.t, self.peer, self.method, self.path, self.status
        )
    }

    fn parse(line: &str) -> Option<Self> {
        let [t, peer, method, path, status] = fields(line)?;
        Some(Self {
            t: t.parse().ok()?,
            peer: peer.to_owned(),
            method: method.to_owned(),
            path: path.to_owned(),
            status: status.to_owned(),
        })
    }
}

/// The request header a cloud's log keeps, by the name it is written under
/// (`metadata=true`, `authorization=Bearer%20Oracle`).
pub trait LoggedHeader: std::fmt::Debug + Clone + PartialEq + Send + Sync + 'static {
    /// The name in the line.
    const NAME: &'static str;
}

/// One logged request with one of its headers:
/// `SECONDS PEER METHOD URL NAME=VALUE STATUS` (spaces in the URL and the value
/// written `%20`; `-`: the header was absent).
#[derive(Debug, Clone, PartialEq)]
pub struct HeaderLogEntry<H> {
    /// Seconds since the emulator started.
    pub t: f64,
    /// The client's address and port.
    pub peer: String,
    /// The method.
    pub method: String,
    /// Path and query, as asked.
    pub url: String,
    /// The header's value.
    pub header: String,
    /// The status, or the action (`refused`, `drop`, ...).
    pub status: String,
    name: std::marker::PhantomData<H>,
}

impl<H: LoggedHeader> HeaderLogEntry<H> {
    /// The entry for `request`, its header `H` read as `name`, answered `status`.
    pub fn of(t: f64, request: &tiny_http::Request, name: &'static str, status: &str) -> Self {
        Self {
            t,
            peer: peer(request),
            method: request.method().as_str().to_owned(),
            url: request.url().replace(' ', "%20"),
            header: header(request, name).unwrap_or("-").replace(' ', "%20"),
            status: status.to_owned(),
            name: std::marker::PhantomData,
        }
    }

    /// The peer's address without the port.
    pub fn source(&self) -> Option<std::net::IpAddr> {
        self.peer.parse::<SocketAddr>().ok().map(|s| s.ip())
    }
}

impl<H: LoggedHeader> LogLine for HeaderLogEntry<H> {
    fn line(&self) -> String {
        format!(
            "{:.3} {} {} {} {}={} {}",
            self.t,
            self.peer,
            self.method,
            self.url,
            H::NAME,
            self.header,
            self.status
        )
    }

    fn parse(line: &str) -> Option<Self> {
        let [t, peer, method, url, header, status] = fields(line)?;
        Some(Self {
            t: t.parse().ok()?,
            peer: peer.to_owned(),
            method: method.to_owned(),
            url: url.to_owned(),
            header: header.strip_prefix(H::NAME)?.strip_prefix('=')?.to_owned(),
            status: status.to_owned(),
            name: std::marker::PhantomData,
        })
    }
}

/// A log line's `N` space-separated fields, exactly `N`.
fn fields<const N: usize>(line: &str) -> Option<[&str; N]> {
    let v: Vec<&str> = line.split(' ').collect();
    v.try_into().ok()
}

/// Every request an emulator answered: in memory and, when opened with a file,
/// appended to it one line a request (flushed, so a test reading the file sees
/// each request once the client has its answer).
#[derive(Debug)]
pub struct RequestLog<E> {
    entries: Mutex<Vec<E>>,
    file: Option<Mutex<File>>,
}

impl<E: LogLine> RequestLog<E> {
    /// A log in memory, appended to `file` too when given.
    pub fn open(file: Option<&Path>) -> io::Result<Self> {
        let file = match file {
            Some(p) => Some(Mutex::new(
                OpenOptions::new().create(true).append(true).open(p)?,
            )),
            None => None,
        };
        Ok(Self {
            entries: Mutex::new(Vec::new()),
            file,
        })
    }

    /// Records one request.
    pub fn push(&self, entry: E) {
        if let Some(f) = &self.file {
            let mut f = f.lock().unwrap_or_else(PoisonError::into_inner);
            let _ = writeln!(f, "{}", entry.line());
            let _ = f.flush();
        }
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(entry);
    }

    /// Records one request, then sends its answer: logged before answering, so
    /// once the client has its answer the log shows it.
    pub fn answer(
        &self,
        entry: E,
        reply: Reply,
        request: tiny_http::Request,
        always: &[(&str, &str)],
    ) {
        self.push(entry);
        reply.send(request, always);
    }

    /// Every request so far.
    pub fn entries(&self) -> Vec<E> {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Reads the requests in a log file an emulator wrote (none when it cannot be
/// read; lines that do not parse are skipped).
pub fn read_log<E: LogLine>(path: &Path) -> Vec<E> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(E::parse)
        .collect()
}

/// Seconds since the first request, so that a scenario's timeline does not
/// depend on how long the process took to start; and since the emulator
/// started, for the logs that count from there.
#[derive(Debug)]
pub struct Clock {
    started: Instant,
    first: OnceLock<Instant>,
}

impl Default for Clock {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            first: OnceLock::new(),
        }
    }
}

impl Clock {
    /// Seconds since the first call (the first request): 0 for that one.
    pub fn now(&self) -> f64 {
        self.at(Instant::now())
    }

    /// Seconds from the first call to `now` (the first call sets it to `now`).
    pub fn at(&self, now: Instant) -> f64 {
        now.saturating_duration_since(*self.first.get_or_init(|| now))
            .as_secs_f64()
    }

    /// Seconds from the emulator's start to `now`.
    pub fn since_start(&self, now: Instant) -> f64 {
        now.saturating_duration_since(self.started).as_secs_f64()
    }
}

/// A container's child: an object's key, a list's index.
pub fn child<'v>(node: &'v serde_json::Value, seg: &str) -> Option<&'v serde_json::Value> {
    match node {
        serde_json::Value::Object(m) => m.get(seg),
        serde_json::Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    }
}

/// What every cloud's emulator is started with: the cloud's own part `world`
/// (what it serves: its tree or documents, its token or control-file options)
/// and its scenario `scenario`, and the shell's part, the same for every cloud
/// (issue 32, item 3): where the log goes, which sources are answered, the rate
/// limit. How a cloud refuses a source or a request over the limit is its own
/// answer (EC2 and GCE 403, Azure silence, `OpenStack` 429).
#[derive(Debug, Clone)]
pub struct Config<W, S> {
    /// The cloud's part: what it serves.
    pub world: W,
    /// Late parts and misbehaviour (the fault rules, delays, windows).
    pub scenario: S,
    /// A file to append one line per request to.
    pub log_file: Option<PathBuf>,
    /// The only sources answered; empty: any (loopback tests).
    pub allowed_sources: Vec<ipnet::IpNet>,
    /// The cloud's rate limit, if on.
    pub rate_limit: Option<RateLimit>,
}

impl<W, S: Default> Config<W, S> {
    /// Serves `world`, nothing misbehaving, not logged to a file, any source, no
    /// rate limit.
    pub fn new(world: impl Into<W>) -> Self {
        Self {
            world: world.into(),
            scenario: S::default(),
            log_file: None,
            allowed_sources: Vec::new(),
            rate_limit: None,
        }
    }
}

impl<W: Default, S: Default> Default for Config<W, S> {
    fn default() -> Self {
        Self::new(W::default())
    }
}

impl<W, S> Config<W, S> {
    /// Whether a request from `peer` is answered ([`Config::allowed_sources`]).
    pub fn allows(&self, peer: Option<std::net::IpAddr>) -> bool {
        self.allowed_sources.is_empty()
            || peer.is_some_and(|p| self.allowed_sources.iter().any(|n| n.contains(&p)))
    }
}

/// The shell's part of a running emulator, the same for every cloud: its
/// [`Config`], the scenario's fault rules, its clock, its request log and its
/// rate limiter. A cloud's service holds it beside its own live state.
#[derive(Debug)]
pub struct State<W, S, E> {
    /// What it was started with.
    pub config: Config<W, S>,
    /// The scenario's fault rules and their counts.
    pub rules: Rules,
    /// Seconds since the first request, and since the start.
    pub clock: Clock,
    /// Every request.
    pub log: RequestLog<E>,
    /// The requests [`Config::rate_limit`] counts.
    pub limiter: Limiter,
}

impl<W, S: ScenarioDoc, E: LogLine> State<W, S, E> {
    /// Checks the scenario's rules and opens the log file.
    pub fn open(config: Config<W, S>) -> io::Result<Self> {
        Ok(Self {
            rules: Rules::new(config.scenario.rules().to_vec()).map_err(io::Error::other)?,
            log: RequestLog::open(config.log_file.as_deref())?,
            config,
            clock: Clock::default(),
            limiter: Limiter::default(),
        })
    }
}

/// A rate limit: at most `count` requests in a sliding `window`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Requests allowed in a window.
    pub count: usize,
    /// The sliding window.
    pub window: Duration,
}

impl RateLimit {
    /// `COUNT/SECONDS` (`10/10`).
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

/// The requests a [`RateLimit`] counts, by key (a source address, or one key
/// for the whole VM).
#[derive(Debug, Default)]
pub struct Limiter {
    seen: Mutex<std::collections::BTreeMap<String, std::collections::VecDeque<Instant>>>,
}

impl Limiter {
    /// Whether a request from `key` at `now` is over `limit`. `count_over`:
    /// whether a request over the limit counts too (haproxy's stick table
    /// counts denied requests; Azure's IMDS does not).
    pub fn over(&self, limit: RateLimit, key: &str, now: Instant, count_over: bool) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let q = seen.entry(key.to_owned()).or_default();
        while q
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= limit.window)
        {
            q.pop_front();
        }
        let over = q.len() >= limit.count;
        if !over || count_over {
            q.push_back(now);
        }
        over
    }
}

/// A source prefix on the command line: `10.98.0.0/16`, or one address
/// (`10.98.0.10`, a /32 or /128).
pub fn parse_prefix(s: &str) -> Result<ipnet::IpNet, String> {
    s.parse::<ipnet::IpNet>()
        .or_else(|_| s.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("{s:?}: not an address or a prefix"))
}

/// A cloud's emulator as the shell runs it: its answers and its log.
pub trait Service: Send + Sync + 'static {
    /// One line of its log.
    type Entry: LogLine;
    /// Answers one request (on its own thread) and logs it.
    fn handle(&self, request: tiny_http::Request);
    /// Its log.
    fn requests(&self) -> &RequestLog<Self::Entry>;
    /// Called when the emulator stops, before the server does (cut streams
    /// that would otherwise hold their threads).
    fn stop(&self) {}
}

/// A running emulator: the server, its thread and the cloud's [`Service`];
/// stops when dropped.
pub struct Shell<S: Service> {
    server: Arc<tiny_http::Server>,
    service: Arc<S>,
    addr: Option<SocketAddr>,
    thread: Option<JoinHandle<()>>,
}

impl<S: Service> std::fmt::Debug for Shell<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shell")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl<S: Service> Shell<S> {
    /// Binds `bind` (a loopback address for in-process tests: `127.0.0.1:0`)
    /// and serves `service` on a thread named `name`.
    pub fn bind(bind: SocketAddr, name: &str, service: S) -> io::Result<Self> {
        let server = tiny_http::Server::http(bind).map_err(io::Error::other)?;
        let addr = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| io::Error::other("not an IP listener"))?;
        Self::serve(server, Some(addr), name, service)
    }

    /// Binds a unix socket at `path` (its folder must exist) and serves
    /// `service` on a thread named `name`.
    pub fn unix(path: &Path, name: &str, service: S) -> io::Result<Self> {
        let server = tiny_http::Server::http_unix(path).map_err(io::Error::other)?;
        Self::serve(server, None, name, service)
    }

    fn serve(
        server: tiny_http::Server,
        addr: Option<SocketAddr>,
        name: &str,
        service: S,
    ) -> io::Result<Self> {
        let server = Arc::new(server);
        let service = Arc::new(service);
        let (srv, svc) = (Arc::clone(&server), Arc::clone(&service));
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                for request in srv.incoming_requests() {
                    let svc = Arc::clone(&svc);
                    std::thread::spawn(move || svc.handle(request));
                }
            })?;
        Ok(Self {
            server,
            service,
            addr,
            thread: Some(thread),
        })
    }

    /// The address it listens on (`0.0.0.0:0` for a unix socket).
    pub fn addr(&self) -> SocketAddr {
        self.addr
            .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// `http://ADDR:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// Every request so far.
    pub fn log(&self) -> Vec<S::Entry> {
        self.service.requests().entries()
    }

    /// The cloud's service (its live state).
    pub fn service(&self) -> &S {
        &self.service
    }

    /// Blocks until the server thread ends (never, unless stopped): for the
    /// binary.
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl<S: Service> Drop for Shell<S> {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            // `wait` took the thread when it returned: nothing left to stop.
            self.service.stop();
            self.server.unblock();
            let _ = t.join();
        }
    }
}

/// What a rule does instead of a status (each cloud's fault rows use those its
/// clients must survive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Read the request, never answer it: the client times out, as when the
    /// network drops the reply.
    Drop,
    /// 200 with a body that is neither UTF-8 nor JSON.
    Garbage,
    /// 200 with UTF-8 that is not JSON (a proxy's error page).
    NotJson,
    /// Bytes that are not an HTTP response.
    NotHttp,
    /// 200 with `size` bytes (default 1 MiB).
    Huge,
    /// GCE: the normal answer without `Metadata-Flavor: Google` (an impostor);
    /// the cloud's module answers it.
    NoFlavor,
}

impl Action {
    /// The log's status for it.
    pub fn label(self) -> &'static str {
        match self {
            Self::Drop => "drop",
            Self::Garbage => "garbage",
            Self::NotJson => "not-json",
            Self::NotHttp => "not-http",
            Self::Huge => "huge",
            Self::NoFlavor => "no-flavor",
        }
    }
}

/// One answer override of a scenario (the same for every cloud).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// The path and everything below it, by whole segments (`/a/b` matches
    /// `/a/b`, `/a/b/` and `/a/b/c`, not `/a/bc`).
    pub path: String,
    /// Only this method (`GET`, `PUT`); any when absent.
    pub method: Option<String>,
    /// Only requests whose query contains this (`wait_for_change=true`).
    pub query: Option<String>,
    /// From when, in seconds since the first request (default 0).
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
    /// The body to send with it (default: the cloud's error body).
    pub body: Option<String>,
    /// What to do instead of answering normally.
    pub action: Option<Action>,
    /// The body size of `huge`.
    pub size: Option<usize>,
}

impl Rule {
    /// Whether it replaces the answer (a rule with neither a status nor an
    /// action only delays it).
    pub fn overrides(&self) -> bool {
        self.status.is_some() || self.action.is_some()
    }
}

/// What misbehaves, and when: the late parts of a cloud's answer (`appear`,
/// each cloud its own kind: a NIC, a link, a VNIC) and the fault rules.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, bound = "A: Deserialize<'de>")]
pub struct Scenario<A> {
    /// What appears late.
    #[serde(default)]
    pub appear: Vec<A>,
    /// Answers that override the normal ones.
    #[serde(default)]
    pub rules: Vec<Rule>,
}

impl<A> Default for Scenario<A> {
    fn default() -> Self {
        Self {
            appear: Vec::new(),
            rules: Vec::new(),
        }
    }
}

impl<A> Scenario<A> {
    /// The late parts not there yet at `t` (`after(a)` is later).
    pub fn pending(&self, t: f64, after: fn(&A) -> f64) -> impl Iterator<Item = &A> {
        self.appear.iter().filter(move |a| t < after(a))
    }
}

impl<A: serde::de::DeserializeOwned> Scenario<A> {
    /// Reads a scenario from JSON, its rules checked ([`Rules::new`]).
    pub fn from_value(v: serde_json::Value) -> Result<Self, String> {
        let s: Self = serde_json::from_value(v).map_err(|e| format!("scenario: {e}"))?;
        Rules::new(s.rules.clone())?;
        Ok(s)
    }
}

/// A NIC that appears late, named by its MAC (a scenario's `appear` where the
/// cloud lists NICs by MAC).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LateMac {
    /// Its MAC (either case; Azure's form or with colons).
    pub mac: String,
    /// Seconds since the first answered request.
    pub after: f64,
}

/// Leaves out of `nics` those whose `key` names a MAC hidden at `t`: one of
/// `late` that has not appeared yet, or one `file` names (a MAC a line, read
/// on every request, so a test decides when a NIC comes and goes). MACs are
/// compared as `norm` writes them.
pub fn without_hidden_macs(
    nics: &mut Vec<serde_json::Value>,
    key: &str,
    late: &[LateMac],
    t: f64,
    file: Option<&Path>,
    norm: fn(&str) -> String,
) {
    let listed = file
        .and_then(|f| std::fs::read_to_string(f).ok())
        .unwrap_or_default();
    let hidden: Vec<String> = late
        .iter()
        .filter(|a| t < a.after)
        .map(|a| a.mac.as_str())
        .chain(listed.lines().map(str::trim).filter(|l| !l.is_empty()))
        .map(norm)
        .collect();
    nics.retain(|nic| {
        nic.get(key)
            .and_then(serde_json::Value::as_str)
            .is_none_or(|m| !hidden.contains(&norm(m)))
    });
}

/// A scenario's rules and how often each has matched.
#[derive(Debug)]
pub struct Rules {
    rules: Vec<Rule>,
    hits: Vec<AtomicU64>,
}

impl Rules {
    /// Checks `rules` (a rule has a status or an action, not both).
    pub fn new(rules: Vec<Rule>) -> Result<Self, String> {
        if let Some(r) = rules
            .iter()
            .find(|r| r.status.is_some() && r.action.is_some())
        {
            return Err(format!(
                "scenario: rule for {:?} has both a status and an action",
                r.path
            ));
        }
        Ok(Self {
            hits: rules.iter().map(|_| AtomicU64::new(0)).collect(),
            rules,
        })
    }

    /// The first rule matching a request at `t`, after waiting its delay (a
    /// rule's `count` counts the requests it matched).
    pub fn matching(&self, method: &str, path: &str, query: &str, t: f64) -> Option<&Rule> {
        let rule = self
            .rules
            .iter()
            .zip(&self.hits)
            .find(|(r, hits)| {
                under(path, &r.path)
                    && r.method
                        .as_deref()
                        .is_none_or(|m| m.eq_ignore_ascii_case(method))
                    && r.query.as_deref().is_none_or(|q| query.contains(q))
                    && in_window(t, r.from, r.until)
                    && r.count
                        .is_none_or(|n| hits.fetch_add(1, Ordering::SeqCst) < n)
            })
            .map(|(r, _)| r)?;
        if rule.delay > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(rule.delay));
        }
        Some(rule)
    }
}

/// What a rule answers instead of the service, if it overrides it: an action's
/// answer, or the cloud's `error` answer for its status and body (`None`: the
/// cloud's own error body), with `Retry-After`. `no-flavor` is the cloud's to
/// answer: `None`.
pub fn fault(rule: &Rule, error: impl FnOnce(u16, Option<&str>) -> Reply) -> Option<Reply> {
    let reply = match (rule.action, rule.status) {
        (Some(Action::Drop), _) => Reply::silence(Action::Drop.label()),
        (Some(Action::NotHttp), _) => Reply {
            kind: Kind::NotHttp,
            label: Action::NotHttp.label().to_owned(),
        },
        (Some(Action::Garbage), _) => Reply::new(200, vec![0xff, 0xfe, b'{', 0x80, b'[', 0xc3])
            .content_type("application/json")
            .labelled(Action::Garbage.label()),
        (Some(Action::NotJson), _) => {
            Reply::new(200, b"<html><body>502 Bad Gateway</body></html>".to_vec())
                .content_type("text/html")
                .labelled(Action::NotJson.label())
        }
        (Some(Action::Huge), _) => Reply::new(200, vec![b'['; rule.size.unwrap_or(DEFAULT_HUGE)])
            .content_type("application/json")
            .labelled(Action::Huge.label()),
        (Some(Action::NoFlavor), _) | (None, None) => return None,
        (None, Some(status)) => error(status, rule.body.as_deref()),
    };
    Some(match rule.retry_after {
        Some(s) => reply.header("Retry-After", s.to_string()),
        None => reply,
    })
}

/// The fault a word names (a status, `503`, or an action, `garbage`), as a
/// fault file holds it: what [`fault`] answers for a rule with it.
pub fn fault_named(word: &str, error: impl FnOnce(u16, Option<&str>) -> Reply) -> Option<Reply> {
    let mut rule = Rule {
        path: "/".to_owned(),
        method: None,
        query: None,
        from: 0.0,
        until: None,
        count: None,
        delay: 0.0,
        status: None,
        retry_after: None,
        body: None,
        action: None,
        size: None,
    };
    match word.parse::<u16>() {
        Ok(status) => rule.status = Some(status),
        Err(_) => rule.action = Some(serde_json::from_value(serde_json::json!(word)).ok()?),
    }
    fault(&rule, error)
}

#[derive(Debug)]
enum Kind {
    Http {
        status: u16,
        body: Vec<u8>,
        headers: Vec<(&'static str, String)>,
    },
    /// No answer at all: the request is read and the connection left.
    Silence,
    /// Bytes that are not HTTP.
    NotHttp,
}

/// What goes back to one request, and its log status.
#[derive(Debug)]
#[must_use]
pub struct Reply {
    kind: Kind,
    label: String,
}

impl Reply {
    /// An HTTP answer, logged as its status.
    pub fn new(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Self {
            kind: Kind::Http {
                status,
                body: body.into(),
                headers: Vec::new(),
            },
            label: status.to_string(),
        }
    }

    /// No answer (logged as `label`): the client waits for one that never
    /// comes.
    pub fn silence(label: &str) -> Self {
        Self {
            kind: Kind::Silence,
            label: label.to_owned(),
        }
    }

    /// With one more header.
    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        if let Kind::Http { headers, .. } = &mut self.kind {
            headers.push((name, value.into()));
        }
        self
    }

    /// With a `Content-Type`.
    pub fn content_type(self, value: &str) -> Self {
        self.header("Content-Type", value)
    }

    /// Logged as `label` instead of its status.
    pub fn labelled(mut self, label: &str) -> Self {
        label.clone_into(&mut self.label);
        self
    }

    /// Its HTTP status, if it is an HTTP answer.
    pub fn status(&self) -> Option<u16> {
        match &self.kind {
            Kind::Http { status, .. } => Some(*status),
            Kind::Silence | Kind::NotHttp => None,
        }
    }

    /// Its body, if it is an HTTP answer.
    pub fn body(&self) -> Option<&[u8]> {
        match &self.kind {
            Kind::Http { body, .. } => Some(body),
            Kind::Silence | Kind::NotHttp => None,
        }
    }

    /// What the log shows: the status, or the action.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Sends it, with the headers `always` the cloud puts on every HTTP answer.
    pub fn send(self, request: tiny_http::Request, always: &[(&str, &str)]) {
        match self.kind {
            Kind::Http {
                status,
                body,
                headers,
            } => {
                let mut r = tiny_http::Response::from_data(body).with_status_code(status);
                let all = headers
                    .iter()
                    .map(|(k, v)| (*k, v.as_str()))
                    .chain(always.iter().copied());
                for (k, v) in all {
                    if let Ok(h) = tiny_http::Header::from_bytes(k, v) {
                        r.add_header(h);
                    }
                }
                let _ = request.respond(r);
            }
            Kind::NotHttp => {
                let mut w = request.into_writer();
                let _ = w.write_all(b"\x00\x01\x02 this is not HTTP \xff\r\n\r\n");
                let _ = w.flush();
            }
            // Take the response writer and let it go without a byte.
            Kind::Silence => drop(request.into_writer()),
        }
    }
}

/// A request header's value.
pub fn header<'r>(request: &'r tiny_http::Request, name: &'static str) -> Option<&'r str> {
    request
        .headers()
        .iter()
        .find(|h| h.field.equiv(name))
        .map(|h| h.value.as_str())
}

/// A request's path and query (`""` without one).
pub fn split_url(url: &str) -> (String, String) {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    (path.to_owned(), query.to_owned())
}

/// A request's peer as the logs write it (`-` when unknown).
pub fn peer(request: &tiny_http::Request) -> String {
    request
        .remote_addr()
        .map_or_else(|| "-".to_owned(), ToString::to_string)
}

/// Whether `path` is `prefix` or below it, by whole segments.
pub fn under(path: &str, prefix: &str) -> bool {
    let p = path.trim_end_matches('/');
    let q = prefix.trim_end_matches('/');
    p == q || p.strip_prefix(q).is_some_and(|rest| rest.starts_with('/'))
}

/// Whether `t` is in `[from, until)` (`until` absent: for ever).
pub fn in_window(t: f64, from: f64, until: Option<f64>) -> bool {
    t >= from && until.is_none_or(|u| t < u)
}

/// A JSON command-line value: the text itself, or `@FILE` for a file's.
pub fn json_arg(what: &str, v: &str) -> Result<serde_json::Value, String> {
    let text = match v.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path).map_err(|e| format!("{what} {path}: {e}"))?,
        None => v.to_owned(),
    };
    serde_json::from_str(&text).map_err(|e| format!("{what}: {e}"))
}

/// A JSON command-line value ([`json_arg`]), or `default()` when not given.
pub fn json_or(
    what: &str,
    v: Option<&str>,
    default: impl FnOnce() -> serde_json::Value,
) -> Result<serde_json::Value, String> {
    v.map_or_else(|| Ok(default()), |v| json_arg(what, v))
}

/// A cloud's scenario document, read from JSON and checked.
pub trait ScenarioDoc: Default + Sized {
    /// Reads a scenario from parsed JSON.
    fn from_value(v: serde_json::Value) -> Result<Self, String>;
    /// Its fault rules.
    fn rules(&self) -> &[Rule];
}

impl<A: serde::de::DeserializeOwned> ScenarioDoc for Scenario<A> {
    fn from_value(v: serde_json::Value) -> Result<Self, String> {
        Self::from_value(v)
    }

    fn rules(&self) -> &[Rule] {
        &self.rules
    }
}

/// The `--scenario` value ([`json_arg`]), checked; none: nothing misbehaves.
pub fn scenario_arg<S: ScenarioDoc>(v: Option<&str>) -> Result<S, String> {
    v.map_or_else(
        || Ok(S::default()),
        |v| S::from_value(json_arg("--scenario", v)?),
    )
}

/// The options every cloud's emulator takes (`#[command(flatten)]`): where to
/// listen, its scenario, where its files go, which sources it answers and its
/// rate limit: the command line of the shell's [`Config`].
#[derive(Debug, clap::Args)]
pub struct EmulatorArgs {
    /// Where to listen; port 0 picks a free port (printed on stdout).
    #[arg(long, visible_alias = "listen", value_name = "ADDR:PORT")]
    pub bind: Option<SocketAddr>,
    /// Late NICs and misbehaviour (fault rules, delays), JSON or @FILE (see
    /// --help).
    #[arg(long, value_name = "JSON")]
    pub scenario: Option<String>,
    /// The test world's folder: the log and the emulator's control files
    /// (hidden, detached NICs, faults) live there.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Append one line per request to FILE (default: the emulator's log in DIR).
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Answer only sources in this prefix or this address (repeatable); none:
    /// the cloud's default (any, or Alibaba's VPC).
    #[arg(long, value_name = "PREFIX", value_parser = parse_prefix)]
    pub allow_source: Vec<ipnet::IpNet>,
    /// The rate limit, COUNT/SECONDS (`OpenStack`: Neutron's, e.g. 10/10, default
    /// off; Azure: default 5/1, IMDS's).
    #[arg(long, value_name = "COUNT/SECONDS", value_parser = RateLimit::parse)]
    pub rate_limit: Option<RateLimit>,
}

impl EmulatorArgs {
    /// The address to listen on: `--bind`, else the cloud's `default`.
    pub fn bind_or(&self, default: SocketAddr) -> SocketAddr {
        self.bind.unwrap_or(default)
    }

    /// The parsed `--scenario` (none: nothing misbehaves).
    pub fn scenario<S: ScenarioDoc>(&self) -> Result<S, String> {
        scenario_arg(self.scenario.as_deref())
    }

    /// The log file: `--log`, else `name` in `--dir`.
    pub fn log_file(&self, name: &str) -> Option<PathBuf> {
        self.log.clone().or_else(|| self.in_dir(name))
    }

    /// The file `name` in `--dir`, when given.
    pub fn in_dir(&self, name: &str) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(name))
    }

    /// The shell's [`Config`] for a cloud serving `world`: its log `log_name`
    /// in `--dir` unless `--log` says, its sources `--allow-source` (none:
    /// `allowed`), its rate limit `--rate-limit` (none: `rate_limit`).
    pub fn config<W, S: ScenarioDoc>(
        &self,
        world: W,
        log_name: &str,
        allowed: Vec<ipnet::IpNet>,
        rate_limit: Option<RateLimit>,
    ) -> Result<Config<W, S>, String> {
        Ok(Config {
            world,
            scenario: self.scenario()?,
            log_file: self.log_file(log_name),
            allowed_sources: if self.allow_source.is_empty() {
                allowed
            } else {
                self.allow_source.clone()
            },
            rate_limit: self.rate_limit.or(rate_limit),
        })
    }
}

/// An emulator binary's end: prints the address it bound on stdout (the test
/// world reads it), then serves until killed.
pub fn announce_and_wait<S: Service>(
    bind: SocketAddr,
    shell: io::Result<Shell<S>>,
) -> Result<(), String> {
    let shell = shell.map_err(|e| format!("binding {bind}: {e}"))?;
    announce(shell.addr())?;
    shell.wait();
    Ok(())
}

/// Prints where an emulator binary listens, one line on stdout, flushed.
pub fn announce(listening: impl std::fmt::Display) -> Result<(), String> {
    let mut out = io::stdout().lock();
    writeln!(out, "{listening}")
        .and_then(|()| out.flush())
        .map_err(|e| format!("stdout: {e}"))
}

/// An emulator binary's `main`: runs `run`, reports its error on stderr.
pub fn main(name: &str, run: impl FnOnce() -> Result<(), String>) -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// A raw HTTP/1.0 request to an emulator at `base` (`http://ADDR:PORT`), for
/// the emulators' unit tests: (status, head, body); status 0 when the
/// connection closed without an answer.
#[cfg(test)]
pub(crate) fn raw_request(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, String, String) {
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
    (status, head.to_owned(), body.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_match_by_whole_segments() {
        assert!(under("/a/b", "/a/b"));
        assert!(under("/a/b/", "/a/b"));
        assert!(under("/a/b/c", "/a/b/"));
        assert!(!under("/a/bc", "/a/b"));
        assert!(!under("/a", "/a/b"));
    }

    #[test]
    fn rules_match_method_query_window_and_count() {
        let rules: Vec<Rule> = serde_json::from_value(serde_json::json!([
            {"path": "/a", "method": "PUT", "status": 503, "count": 1},
            {"path": "/a", "query": "wait=true", "status": 404, "from": 1.0},
            {"path": "/a", "action": "drop", "until": 5.0}
        ]))
        .unwrap();
        let rules = Rules::new(rules).unwrap();
        let status = |m, q, t| {
            rules.matching(m, "/a/b", q, t).map(|r| {
                r.status
                    .map_or_else(|| "drop".to_owned(), |s| s.to_string())
            })
        };
        assert_eq!(status("PUT", "", 0.0).as_deref(), Some("503"));
        assert_eq!(
            status("PUT", "", 0.0).as_deref(),
            Some("drop"),
            "count used up"
        );
        assert_eq!(status("GET", "wait=true", 0.5).as_deref(), Some("drop"));
        assert_eq!(status("GET", "x&wait=true", 1.0).as_deref(), Some("404"));
        assert_eq!(status("GET", "", 5.0), None);
        assert!(rules.matching("GET", "/ab", "", 0.0).is_none());
        let both = serde_json::from_value(
            serde_json::json!([{"path": "/x", "status": 500, "action": "drop"}]),
        );
        assert!(Rules::new(both.unwrap()).is_err());
    }

    #[test]
    fn faults_answer_their_action_or_status() {
        let rule = |v| serde_json::from_value::<Rule>(v).unwrap();
        let error = |s, b: Option<&str>| Reply::new(s, b.unwrap_or("cloud's body").to_owned());
        let r = fault(
            &rule(serde_json::json!({"path": "/", "status": 429, "retry_after": 2})),
            error,
        )
        .unwrap();
        assert_eq!(
            (r.status(), r.body(), r.label()),
            (Some(429), Some(&b"cloud's body"[..]), "429")
        );
        let r = fault(
            &rule(serde_json::json!({"path": "/", "status": 500, "body": "x"})),
            error,
        )
        .unwrap();
        assert_eq!(r.body(), Some(&b"x"[..]));
        let r = fault(
            &rule(serde_json::json!({"path": "/", "action": "garbage"})),
            error,
        )
        .unwrap();
        assert!(std::str::from_utf8(r.body().unwrap()).is_err());
        assert_eq!(r.label(), "garbage");
        let r = fault(
            &rule(serde_json::json!({"path": "/", "action": "huge", "size": 10})),
            error,
        )
        .unwrap();
        assert_eq!((r.body().map(<[u8]>::len), r.label()), (Some(10), "huge"));
        let r = fault(
            &rule(serde_json::json!({"path": "/", "action": "drop"})),
            error,
        )
        .unwrap();
        assert_eq!((r.status(), r.label()), (None, "drop"));
        assert!(fault(&rule(serde_json::json!({"path": "/", "delay": 1.0})), error).is_none());
        assert!(
            fault(
                &rule(serde_json::json!({"path": "/", "action": "no-flavor"})),
                error
            )
            .is_none()
        );
    }
}

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
//!   ([`shell::Config::allowed_sources`]): a request from any other source is read and
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
//! [`shell::Config::log_file`], one line per request.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub use crate::shell::RateLimit;
use crate::shell::{
    self, HeaderLogEntry, LoggedHeader, Reply, RequestLog, Service, Shell, State, header,
};
use crate::world::{MAC0, MAC1};

/// The file below the world's folder whose lines (MACs, Azure's or colon form)
/// hide NICs from `network` while it names them.
pub const HIDDEN_FILE: &str = "azure-hidden";

/// The log file's name below the world's folder (the binary's `--dir`).
pub const LOG_FILE: &str = "azure-imds.log";

/// The documented rate limit: 5 requests per second per VM.
pub const RATE_LIMIT: RateLimit = RateLimit {
    count: 5,
    window: Duration::from_secs(1),
};

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

/// The world's VM dual-stack (issue 34's contract): [`world_instance`] with
/// `ipv6.ipAddress[].privateIpAddress` and `ipv6.subnet[]` on both NICs (the
/// shape cloud-init's Azure tests carry): eth0 `fd00:98::10`, eth1
/// `fd00:98:1::20` (the one DHCPv6 leases) and `fd00:98:1::21`, each in its
/// link's /64. Azure's IMDS has no IPv6 gateway: the router is the one router
/// advertisements name. (Azure has no IPv6-only NIC: every NIC's IP
/// configurations start with an IPv4 one.)
pub fn dual_stack_world() -> Value {
    use crate::world::{ETH0_V6, ETH1_V6, ETH1_V6_SECONDARY};
    let ipv6 = |addresses: &[&str], subnet: &str| {
        let ips: Vec<Value> = addresses
            .iter()
            .map(|a| json!({"privateIpAddress": a}))
            .collect();
        json!({"ipAddress": ips, "subnet": [{"address": subnet, "prefix": "64"}]})
    };
    let mut doc = world_instance();
    if let Some(list) = doc["network"]["interface"].as_array_mut() {
        for nic in list {
            let v6 = match nic["macAddress"].as_str() {
                Some(m) if m == azure_mac(MAC0) => ipv6(&[ETH0_V6], "fd00:98::"),
                Some(m) if m == azure_mac(MAC1) => {
                    ipv6(&[ETH1_V6, ETH1_V6_SECONDARY], "fd00:98:1::")
                }
                _ => continue,
            };
            nic["ipv6"] = v6;
        }
    }
    doc
}

/// A NIC that appears late (its MAC in either form).
pub use crate::shell::LateMac as Appear;

/// What misbehaves, and when: NICs that appear late and the shell's fault
/// rules ([`crate::shell::Rule`]).
pub type Scenario = shell::Scenario<Appear>;

/// What Azure's IMDS serves (the cloud's part of [`Config`]).
#[derive(Debug, Clone)]
pub struct Served {
    /// The instance document (`compute`, `network`).
    pub instance: Value,
    /// The file of hidden MACs ([`HIDDEN_FILE`]), read on every request.
    pub hidden_file: Option<PathBuf>,
}

impl From<Value> for Served {
    fn from(instance: Value) -> Self {
        Self {
            instance,
            hidden_file: None,
        }
    }
}

/// The emulator's configuration: the shell's (log, the only sources answered,
/// the rate limit: [`RATE_LIMIT`], off for the benchmark, which measures one
/// event at a time from fresh clients) and what it serves.
pub type Config = shell::Config<Served, Scenario>;

/// Serving `instance`, nothing misbehaving, any source, IMDS's rate limit.
pub fn config(instance: Value) -> Config {
    let mut c = Config::new(instance);
    c.rate_limit = Some(RATE_LIMIT);
    c
}

/// The header the log keeps: `Metadata`, written `metadata=`.
#[derive(Debug, Clone, PartialEq)]
pub struct AzureMetadata;

impl LoggedHeader for AzureMetadata {
    const NAME: &'static str = "metadata";
}

/// One logged request: `SECONDS PEER METHOD URL metadata=H STATUS`.
pub type LogEntry = HeaderLogEntry<AzureMetadata>;

/// Azure IMDS as the shell serves it: its configuration and live state.
#[derive(Debug)]
pub struct Azure {
    state: State<Served, Scenario, LogEntry>,
}

/// A running emulator; stops when dropped.
pub type Emulator = Shell<Azure>;

impl Shell<Azure> {
    /// Binds `bind` and serves on a thread.
    pub fn start(bind: SocketAddr, config: Config) -> io::Result<Self> {
        let service = Azure {
            state: State::open(config)?,
        };
        Shell::bind(bind, "azure-emulator", service)
    }
}

/// Reads the requests in a log file.
pub fn read_log(path: &std::path::Path) -> Vec<LogEntry> {
    shell::read_log(path)
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

impl Service for Azure {
    type Entry = LogEntry;

    fn handle(&self, request: tiny_http::Request) {
        let now = Instant::now();
        let t = self.state.clock.since_start(now);
        let method = request.method().as_str().to_owned();
        let url = request.url().to_owned();
        let (path, _) = shell::split_url(&url);
        let allowed = self
            .state
            .config
            .allows(request.remote_addr().map(SocketAddr::ip));
        let reply = if allowed {
            self.reply(now, &method, &url, &path, &request)
        } else {
            Reply::silence("refused")
        };
        let entry = LogEntry::of(t, &request, "Metadata", reply.label());
        self.state.log.answer(entry, reply, request, &[]);
    }

    fn requests(&self) -> &RequestLog<LogEntry> {
        &self.state.log
    }
}

/// IMDS's JSON answer.
fn json_reply(status: u16, body: String) -> Reply {
    Reply::new(status, body).content_type("application/json; charset=utf-8")
}

/// A `format=text` answer.
fn text_reply(status: u16, body: String) -> Reply {
    Reply::new(status, body).content_type("text/plain; charset=utf-8")
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
    json_reply(status, json!({ "error": message }).to_string())
}

impl Azure {
    /// Whether this request is over the documented limit (what the service
    /// itself answers counts; injected answers do not).
    fn rate_limited(&self, now: Instant) -> bool {
        self.state
            .config
            .rate_limit
            .is_some_and(|limit| self.state.limiter.over(limit, "", now, false))
    }

    fn reply(
        &self,
        now: Instant,
        method: &str,
        url: &str,
        path: &str,
        request: &tiny_http::Request,
    ) -> Reply {
        let t = self.state.clock.at(now);
        let (_, q) = shell::split_url(url);
        if let Some(r) = self
            .state
            .rules
            .matching(method, path, &q, t)
            .and_then(|rule| {
                shell::fault(rule, |s, body| {
                    error(s, body.unwrap_or(&format!("injected {s}")))
                })
            })
        {
            return r;
        }
        if self.rate_limited(now) {
            return text_reply(429, "Too many requests".to_owned()).header("Retry-After", "1");
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
            Some(v) if !valid_api_version(v) => {
                return error(400, "Bad request. Invalid api-version");
            }
            Some(_) => {}
        }
        let text = query(url, "format") == Some("text");
        if path.trim_end_matches('/') == "/metadata" && text {
            return text_reply(200, "instance/".to_owned());
        }
        let Some(rest) = path
            .strip_prefix("/metadata/instance")
            .filter(|r| r.is_empty() || r.starts_with('/'))
        else {
            return error(404, "Not found");
        };
        let doc = self.document(t);
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
            Value::Object(_) | Value::Array(_) if text => text_reply(200, text_listing(node)),
            Value::Object(_) | Value::Array(_) => json_reply(200, node.to_string()),
            Value::String(s) if text => text_reply(200, s.clone()),
            leaf if text => text_reply(200, leaf.to_string()),
            _ => error(
                400,
                "Bad request. Query parameter format=text is required for leaves",
            ),
        }
    }

    /// The instance document at `t`, late NICs and hidden ones left out.
    fn document(&self, t: f64) -> Value {
        let mut doc = self.state.config.world.instance.clone();
        if let Some(list) = doc["network"]["interface"].as_array_mut() {
            shell::without_hidden_macs(
                list,
                "macAddress",
                &self.state.config.scenario.appear,
                t,
                self.state.config.world.hidden_file.as_deref(),
                azure_mac,
            );
        }
        doc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell::LogLine as _;

    /// A raw HTTP/1.0 GET: (status, body, Retry-After); status 0 when the
    /// connection closed without an answer.
    fn get(base: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String, Option<String>) {
        let (status, head, body) = shell::raw_request(base, "GET", path, headers);
        let after = head.lines().find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("retry-after: ")
                .map(str::to_owned)
        });
        (status, body, after)
    }

    #[test]
    fn headers_api_version_and_leaves_are_enforced() {
        let e = Emulator::start("127.0.0.1:0".parse().unwrap(), config(world_instance())).unwrap();
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
        let e = Emulator::start("127.0.0.1:0".parse().unwrap(), config(world_instance())).unwrap();
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
        let mut c = config(world_instance());
        c.allowed_sources = vec!["10.98.0.10/32".parse().unwrap()];
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

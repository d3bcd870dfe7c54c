// SPDX-License-Identifier: Apache-2.0
//! Performs IO: an LXD dev-lxd emulator on `tiny_http` over a unix socket, for tests
//! and benchmarks. It runs in-process ([`Devlxd::start`], a thread) or as the
//! `devlxd-emulator` binary.
//!
//! It serves what an instance sees at `/dev/lxd/sock` (API 1.0):
//!
//! * `GET /1.0` — `{"api_version": "1.0", ...}`;
//! * `GET /1.0/meta-data` — the meta-data text, as given (duplicate keys and all);
//! * `GET /1.0/config` — a JSON list of `/1.0/config/<key>` routes, in the order the
//!   keys were given to [`Config::key`] (LXD does not sort them; a JSON config file
//!   lists them sorted);
//! * `GET /1.0/config/<key>` — the value, or 404;
//! * `GET /1.0/devices` — the devices JSON, or 404 when there are none (LXD 4.0);
//! * `GET /1.0/events?type=config,device` — a WebSocket upgrade that never ends,
//!   as LXD's: [`Devlxd::set_key`], [`Devlxd::remove_key`] and [`Devlxd::add_nic`]
//!   change what is served and send the `config` / `device` event LXD sends;
//!   [`Devlxd::send_event`] sends any message; [`Devlxd::drop_event_streams`] cuts
//!   every stream without a close frame (a connection that drops). Only the types
//!   the subscriber asked for (`?type=`) are sent;
//! * anything else: 404.
//!
//! The emulator serves whatever socket path it is given: `dev/lxd/sock` or Incus's
//! `dev/incus/sock`.
//!
//! **Rules** make it misbehave: the first rule whose `path` equals the request's
//! path (and whose `count`, when set, is not used up) answers `status` with `body`
//! instead. `{"path": "/1.0/meta-data", "status": 500, "count": 3}` answers 500
//! three times, then normally; `{"path": "/1.0/config", "status": 200, "body":
//! "<html>"}` answers something that is not JSON.
//!
//! Every request is logged (`METHOD PATH STATUS`, [`Devlxd::log`]).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Mutex, PoisonError};

use serde::Deserialize;
use serde_json::{Value, json};

use crate::shell::{LogLine, RequestLog, Service, Shell};

/// One answer override (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// The exact path.
    pub path: String,
    /// The status to answer.
    pub status: u16,
    /// The body to answer.
    #[serde(default)]
    pub body: String,
    /// Only the first `count` matching requests.
    pub count: Option<u64>,
}

/// What the emulator serves.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `/1.0/meta-data`.
    #[serde(rename = "meta-data")]
    pub meta_data: String,
    /// The config keys and their values, in the order `/1.0/config` lists them.
    #[serde(default, deserialize_with = "ordered_pairs")]
    pub config: Vec<(String, String)>,
    /// `/1.0/devices`; `None` answers 404.
    #[serde(default)]
    pub devices: Option<Value>,
    /// Answer overrides.
    #[serde(default)]
    pub rules: Vec<Rule>,
}

/// Reads a JSON object of strings as key/value pairs.
fn ordered_pairs<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Vec<(String, String)>, D::Error> {
    let map = serde_json::Map::<String, Value>::deserialize(d)?;
    map.into_iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k, s)),
            other => Err(serde::de::Error::custom(format!(
                "config value of {k:?} must be a string, not {other}"
            ))),
        })
        .collect()
}

impl Config {
    /// Serves `meta_data`, no config keys, no devices.
    pub fn new(meta_data: &str) -> Self {
        Self {
            meta_data: meta_data.to_owned(),
            ..Self::default()
        }
    }

    /// Adds a config key.
    #[must_use]
    pub fn key(mut self, key: &str, value: &str) -> Self {
        self.config.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Serves these devices.
    #[must_use]
    pub fn devices(mut self, devices: Value) -> Self {
        self.devices = Some(devices);
        self
    }

    /// Adds an answer override.
    #[must_use]
    pub fn rule(mut self, path: &str, status: u16, body: &str, count: Option<u64>) -> Self {
        self.rules.push(Rule {
            path: path.to_owned(),
            status,
            body: body.to_owned(),
            count,
        });
        self
    }

    /// Parses a configuration document (JSON, the fields above; `meta-data` is
    /// required).
    pub fn from_json(text: &str) -> Result<Self, String> {
        serde_json::from_str(text).map_err(|e| format!("devlxd config: {e}"))
    }
}

/// What an event stream's thread is told.
enum Cmd {
    /// Send this text message.
    Send(String),
    /// Drop the connection without a close frame.
    Cut,
}

/// One connected event stream.
struct Subscriber {
    types: Vec<String>,
    tx: Sender<Cmd>,
}

/// LXD's dev-lxd as the shell serves it: its configuration and live state.
#[derive(Debug)]
pub struct Lxd {
    config: Mutex<Config>,
    hits: Vec<AtomicU64>,
    log: RequestLog<String>,
    subscribers: Mutex<Vec<Subscriber>>,
    path: PathBuf,
}

impl std::fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscriber")
            .field("types", &self.types)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A log line is the request itself: `METHOD PATH STATUS`.
impl LogLine for String {
    fn line(&self) -> String {
        self.clone()
    }

    fn parse(line: &str) -> Option<Self> {
        Some(line.to_owned())
    }
}

impl Service for Lxd {
    type Entry = String;

    fn handle(&self, request: tiny_http::Request) {
        handle(self, request);
    }

    fn requests(&self) -> &RequestLog<String> {
        &self.log
    }

    fn stop(&self) {
        drop_event_streams(self);
    }
}

/// A running emulator; stops (and removes its socket) when dropped.
pub type Devlxd = Shell<Lxd>;

impl Shell<Lxd> {
    /// Binds a unix socket at `path` (its folder must exist) and serves on a
    /// thread.
    pub fn start(path: &Path, config: Config) -> io::Result<Self> {
        let service = Lxd {
            hits: config.rules.iter().map(|_| AtomicU64::new(0)).collect(),
            config: Mutex::new(config),
            log: RequestLog::open(None)?,
            subscribers: Mutex::new(Vec::new()),
            path: path.to_owned(),
        };
        Shell::unix(path, "devlxd-emulator", service)
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.service().path
    }

    /// How many requests asked for exactly `path`.
    pub fn count(&self, path: &str) -> usize {
        self.log()
            .iter()
            .filter(|l| l.split(' ').nth(1) == Some(path))
            .count()
    }

    /// Sets a config key (added at the end of `/1.0/config` when new) and sends
    /// the `config` event LXD sends.
    pub fn set_key(&self, key: &str, value: &str) {
        self.change_key(key, Some(value));
    }

    /// Unsets a config key and sends the `config` event (an empty value).
    pub fn remove_key(&self, key: &str) {
        self.change_key(key, None);
    }

    /// Sets (`Some`) or unsets (`None`) a config key and sends LXD's `config`
    /// event with the old value and the new one (empty when unset).
    fn change_key(&self, key: &str, value: Option<&str>) {
        let old = {
            let mut c = lock(&self.service().config);
            let old = c
                .config
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone());
            match (value, c.config.iter_mut().find(|(k, _)| k == key)) {
                (Some(value), Some(kv)) => value.clone_into(&mut kv.1),
                (Some(value), None) => c.config.push((key.to_owned(), value.to_owned())),
                (None, _) => c.config.retain(|(k, _)| k != key),
            }
            old
        };
        self.send_event(&config_event(
            key,
            old.as_deref().unwrap_or(""),
            value.unwrap_or(""),
        ));
    }

    /// Adds a NIC device (`hwaddr` in `/1.0/devices`, as current LXD serves it)
    /// and sends the `device` `added` event, whose config has no MAC.
    pub fn add_nic(&self, name: &str, hwaddr: &str) {
        let config = json!({"type": "nic", "network": "lxdbr1", "name": name});
        {
            let mut c = lock(&self.service().config);
            let devices = c.devices.get_or_insert_with(|| json!({}));
            if let Some(m) = devices.as_object_mut() {
                let mut served = config.clone();
                served["hwaddr"] = json!(hwaddr);
                m.insert(name.to_owned(), served);
            }
        }
        self.send_event(&device_event(name, "added", &config));
    }

    /// Removes a device and sends the `device` `removed` event.
    pub fn remove_device(&self, name: &str) {
        let config = {
            let mut c = lock(&self.service().config);
            c.devices
                .as_mut()
                .and_then(Value::as_object_mut)
                .and_then(|m| m.remove(name))
                .unwrap_or_else(|| json!({}))
        };
        self.send_event(&device_event(name, "removed", &config));
    }

    /// Sends a message to every event stream that asked for its `type` (any
    /// stream when it has none, or is not JSON); returns how many got it.
    pub fn send_event(&self, message: &str) -> usize {
        let kind = serde_json::from_str::<Value>(message)
            .ok()
            .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_owned));
        let mut subs = lock(&self.service().subscribers);
        subs.retain(|s| {
            let wanted = kind
                .as_ref()
                .is_none_or(|k| s.types.is_empty() || s.types.contains(k));
            !wanted || s.tx.send(Cmd::Send(message.to_owned())).is_ok()
        });
        subs.iter()
            .filter(|s| {
                kind.as_ref()
                    .is_none_or(|k| s.types.is_empty() || s.types.contains(k))
            })
            .count()
    }

    /// Cuts every event stream, without a close frame.
    pub fn drop_event_streams(&self) {
        drop_event_streams(self.service());
    }

    /// Event streams connected now.
    pub fn event_streams(&self) -> usize {
        lock(&self.service().subscribers).len()
    }
}

/// Cuts every event stream, without a close frame.
fn drop_event_streams(lxd: &Lxd) {
    for s in lock(&lxd.subscribers).drain(..) {
        let _ = s.tx.send(Cmd::Cut);
    }
}

/// LXD's event message.
pub fn config_event(key: &str, old: &str, value: &str) -> String {
    json!({"type": "config", "timestamp": "2026-01-01T00:00:00.000000000Z",
           "metadata": {"key": key, "old_value": old, "value": value}})
    .to_string()
}

/// LXD's device event message.
pub fn device_event(name: &str, action: &str, config: &Value) -> String {
    json!({"type": "device", "timestamp": "2026-01-01T00:00:00.000000000Z",
           "metadata": {"action": action, "config": config, "name": name}})
    .to_string()
}

/// The `type=` list of a query string.
fn event_types(url: &str) -> Vec<String> {
    url.split_once('?')
        .map(|(_, q)| q)
        .unwrap_or_default()
        .split('&')
        .filter_map(|kv| kv.strip_prefix("type="))
        .flat_map(|v| v.split(','))
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Upgrades `/1.0/events` to a WebSocket and serves it until cut or closed.
fn serve_events(sh: &Lxd, request: tiny_http::Request) {
    let key = request
        .headers()
        .iter()
        .find(|h| h.field.equiv("Sec-WebSocket-Key"))
        .map(|h| h.value.as_str().to_owned());
    let Some(key) = key else {
        let _ = request.respond(
            tiny_http::Response::from_string("not a websocket upgrade").with_status_code(400),
        );
        return;
    };
    let types = event_types(request.url());
    let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
    let mut resp = tiny_http::Response::empty(101);
    if let Ok(h) = tiny_http::Header::from_bytes("Sec-WebSocket-Accept", accept) {
        resp.add_header(h);
    }
    let (tx, rx) = channel();
    lock(&sh.subscribers).push(Subscriber { types, tx });
    sh.log.push("GET /1.0/events 101".to_owned());
    let stream = request.upgrade("websocket", resp);
    let mut ws =
        tungstenite::WebSocket::from_raw_socket(stream, tungstenite::protocol::Role::Server, None);
    for cmd in rx {
        match cmd {
            Cmd::Send(text) => {
                if ws.send(tungstenite::Message::text(text)).is_err() {
                    return;
                }
            }
            Cmd::Cut => return,
        }
    }
}

fn handle(sh: &Lxd, request: tiny_http::Request) {
    let method = request.method().as_str().to_owned();
    let path = request
        .url()
        .split('?')
        .next()
        .unwrap_or_default()
        .to_owned();
    let rule = lock(&sh.config)
        .rules
        .iter()
        .zip(&sh.hits)
        .find(|(r, hits)| {
            r.path == path
                && r.count
                    .is_none_or(|n| hits.fetch_add(1, Ordering::SeqCst) < n)
        })
        .map(|(r, _)| (r.status, r.body.clone()));
    if rule.is_none() && method == "GET" && path == "/1.0/events" {
        serve_events(sh, request);
        return;
    }
    let (status, body, json_body) = match rule {
        Some((status, body)) => (status, body, false),
        None if method != "GET" => (405, "method not allowed".to_owned(), false),
        None => answer(&lock(&sh.config), &path),
    };
    sh.log.push(format!("{method} {path} {status}"));
    let mut resp = tiny_http::Response::from_string(body).with_status_code(status);
    let kind = if json_body {
        "application/json"
    } else {
        "text/plain"
    };
    if let Ok(h) = tiny_http::Header::from_bytes("Content-Type", kind) {
        resp.add_header(h);
    }
    let _ = request.respond(resp);
}

/// The normal answer: status, body, whether the body is JSON.
fn answer(c: &Config, path: &str) -> (u16, String, bool) {
    let not_found = (404, "not found".to_owned(), false);
    match path.trim_end_matches('/') {
        "/1.0" => (
            200,
            json!({"api_version": "1.0", "instance_type": "container", "location": "none", "state": "Started"})
                .to_string(),
            true,
        ),
        "/1.0/meta-data" => (200, c.meta_data.clone(), false),
        "/1.0/config" => {
            let routes: Vec<String> = c
                .config
                .iter()
                .map(|(k, _)| format!("/1.0/config/{k}"))
                .collect();
            (200, json!(routes).to_string(), true)
        }
        "/1.0/devices" => c
            .devices
            .as_ref()
            .map_or(not_found.clone(), |d| (200, d.to_string(), true)),
        other => match other.strip_prefix("/1.0/config/") {
            Some(key) => c
                .config
                .iter()
                .find(|(k, _)| k == key)
                .map_or(not_found, |(_, v)| (200, v.clone(), false)),
            None => not_found,
        },
    }
}

/// Meta-data as LXD serves it when the user set `user.meta-data`: its own keys,
/// then the user's appended, so `instance-id` and `local-hostname` appear twice.
pub const SAMPLE_META_DATA: &str = "#cloud-config\ninstance-id: c1\nlocal-hostname: c1\ninstance-id: i-87018aed\nlocal-hostname: myhost.internal\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_parse_in_order() {
        let c = Config::from_json(
            r#"{"meta-data": "instance-id: i\n", "config": {"user.b": "2", "user.a": "1"},
                "devices": {"eth0": {"type": "nic"}}, "rules": [{"path": "/1.0/meta-data", "status": 500, "count": 2}]}"#,
        )
        .unwrap();
        assert_eq!(c.config.len(), 2);
        assert_eq!(c.rules[0].count, Some(2));
        assert!(Config::from_json(r#"{"config": {}}"#).is_err());
        assert!(Config::from_json(r#"{"meta-data": "", "config": {"user.a": 1}}"#).is_err());
        assert!(Config::from_json(r#"{"meta-data": "", "oops": 1}"#).is_err());
        let (status, body, _) = answer(&c, "/1.0/config");
        assert_eq!((status, body.contains("/1.0/config/user.a")), (200, true));
        assert_eq!(answer(&c, "/1.0/config/user.c").0, 404);
        assert_eq!(answer(&c, "/1.0/config/user.a").1, "1");
        assert_eq!(answer(&Config::new("x"), "/1.0/devices").0, 404);
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the EC2 instance metadata service (IMDS) client, over HTTP, with its
//! token cached under `<root>/run/leasehook/` (SPEC §4.1).
//!
//! * **IMDSv2.** A session token is `PUT` once (`/latest/api/token`, six hours) and
//!   sent with every `GET`. It is cached on disk (`<root>/run/leasehook/imds-token`,
//!   mode 0600, replaced atomically, never through a symlink) so the next hook
//!   process reuses it, and it is replaced when IMDS answers 401. A 403 on the token request
//!   means the instance's metadata endpoint is switched off:
//!   [`ImdsErrorKind::Disabled`], and no IMDSv1 unless
//!   [`Ec2::with_imdsv1_fallback`] asked for it.
//! * **Endpoints.** `http://169.254.169.254`, then `http://[fd00:ec2::254]`
//!   ([`IMDS_ENDPOINTS`]), or the list given to [`Ec2::with_endpoints`]. When one
//!   cannot be connected to, the next is tried, and the one that answered is used
//!   first from then on. Base URLs must name an IP literal: there is no DNS.
//! * **One request.** Connect 1 s, whole request 2 s, one keep-alive connection
//!   (one ureq agent), no proxy, no redirects, answers capped at 64 KiB and required
//!   to be UTF-8. [`Ec2::get`] makes one attempt (plus one token refresh on 401),
//!   and the whole of it — the token `PUT` when one is needed, the `GET`, a 401,
//!   the new token's `PUT` and the `GET` again, the next endpoint when one cannot
//!   be connected to — ends within one request timeout (2 s): each exchange gets
//!   what is left of it, and none starts once it is spent. Waiting and retrying
//!   belong to the consistency wait ([`wait`]), which also honours a 503's
//!   `Retry-After`.
//! * **Minimal fetch.** [`nic`] decides which keys one NIC event needs, [`wait`]
//!   fetches them until IMDS agrees with the lease. [`identity`] fetches the
//!   instance-level keys the boot stage needs (the EC2 datasource).
//!
//! The token never appears in a log line or an error: it is only ever put in the
//! request header.

mod bind;
pub mod detect;
pub mod identity;
pub mod nic;
mod provider;
mod resolver;
mod token;
pub mod wait;

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use ureq::http::Response;
use ureq::unversioned::transport::DefaultConnector;
use ureq::{Agent, Body};

use crate::constants::{
    IMDS_CONNECT_TIMEOUT, IMDS_ENDPOINTS, IMDS_MAX_BODY_BYTES, IMDS_MAX_TOKEN_BYTES,
    IMDS_REQUEST_TIMEOUT, IMDS_TOKEN_CACHE_NAME, IMDS_TOKEN_HEADER, IMDS_TOKEN_PATH,
    IMDS_TOKEN_TTL_HEADER, IMDS_TOKEN_TTL_SECS,
};
use crate::error::{Error, ImdsErrorKind, Problem, Result};

pub use nic::NicEvent;
pub use provider::Ec2Provider;
pub use provider::{CLOUD, SOURCE};
pub use wait::{Clock, Outcome, SystemClock, WaitPolicy, wait_for_nic};

use token::{Token, TokenCache};

/// Reads one IMDS path: the seam between the consistency wait and the transport.
pub trait Fetch {
    /// `GET`s `path` (below the base URL, starting with `/`). `Ok(None)` is a 404:
    /// IMDS does not (yet) have it.
    fn get(&self, path: &str) -> Result<Option<String>>;

    /// Like [`Fetch::get`], for an answer that need not be UTF-8 (user-data, often
    /// gzip), of at most `limit` bytes.
    fn get_bytes(&self, path: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        let _ = limit;
        self.get(path).map(|a| a.map(String::into_bytes))
    }
}

/// What tells EC2's IMDS from a service shaped like it (Alibaba ECS's, at
/// `100.100.100.200`, whose hardened mode is IMDSv2 with its own header names):
/// the default endpoints, the token exchange's path and headers, the token cache
/// file's name, and the configuration key named in an endpoint's error. Everything
/// else (timeouts, bounded bodies, the 401 dance, the endpoint fallback, per-NIC
/// binding) is the same client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Dialect {
    /// The base URLs tried when none are configured.
    pub(crate) endpoints: &'static [&'static str],
    /// The path a session token is `PUT` to.
    pub(crate) token_path: &'static str,
    /// The `PUT`'s header asking for a token of this many seconds.
    pub(crate) ttl_header: &'static str,
    /// The header carrying the token on every `GET`.
    pub(crate) token_header: &'static str,
    /// The token cache's file name in `run/leasehook`.
    pub(crate) cache_name: &'static str,
    /// The configuration key a bad endpoint is reported under.
    pub(crate) endpoints_key: &'static str,
    /// The `provider` label of its requests' metric.
    pub(crate) provider: &'static str,
}

/// EC2's IMDS (SPEC §4.1).
pub(crate) const EC2: Dialect = Dialect {
    endpoints: &IMDS_ENDPOINTS,
    token_path: IMDS_TOKEN_PATH,
    ttl_header: IMDS_TOKEN_TTL_HEADER,
    token_header: IMDS_TOKEN_HEADER,
    cache_name: IMDS_TOKEN_CACHE_NAME,
    endpoints_key: "imds.endpoints",
    provider: "ec2",
};

/// The EC2 IMDS client (and, with another `Dialect`, Alibaba's). One per process
/// is enough; it is `Sync`.
#[derive(Debug)]
pub struct Ec2 {
    dialect: Dialect,
    endpoints: Vec<String>,
    /// The endpoint that answered last, tried first.
    active: AtomicUsize,
    agent: Agent,
    /// Connect and whole-request timeouts the agent was built with.
    timeouts: (Duration, Duration),
    /// The interface requests are bound to, if any.
    binding: Option<bind::Binding>,
    cache: Option<TokenCache>,
    token: Mutex<Option<Token>>,
    imdsv1_fallback: bool,
    /// Set once the token request was refused and `imdsv1_fallback` allowed going on
    /// without one.
    v1: AtomicBool,
}

/// `GET` or `PUT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Get,
    Put,
}

impl Method {
    fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Put => "PUT",
        }
    }
}

impl Ec2 {
    /// A client for the default endpoints whose token cache lives under `root`
    /// (`/` in production: `/run/leasehook/imds-token`).
    pub fn try_new(root: impl AsRef<Path>) -> Result<Self> {
        Ok(Self::with_dialect(root, EC2))
    }

    /// A client for `dialect`'s default endpoints, its token cache under `root`.
    pub(crate) fn with_dialect(root: impl AsRef<Path>, dialect: Dialect) -> Self {
        let endpoints = dialect.endpoints.iter().map(|s| (*s).to_owned()).collect();
        Self {
            dialect,
            endpoints,
            active: AtomicUsize::new(0),
            agent: agent(IMDS_CONNECT_TIMEOUT, IMDS_REQUEST_TIMEOUT, None),
            timeouts: (IMDS_CONNECT_TIMEOUT, IMDS_REQUEST_TIMEOUT),
            binding: None,
            cache: Some(TokenCache::new(root.as_ref(), dialect.cache_name)),
            token: Mutex::new(None),
            imdsv1_fallback: false,
            v1: AtomicBool::new(false),
        }
    }

    /// Replaces the endpoint list (config `imds.endpoints`): `http://` base URLs
    /// whose host is an IP literal, tried in order.
    pub fn with_endpoints<I, S>(mut self, endpoints: I) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut list = Vec::new();
        for e in endpoints {
            list.push(check_endpoint_for(e.as_ref(), self.dialect.endpoints_key)?);
        }
        if list.is_empty() {
            return Err(Error::Argument {
                arg: self.dialect.endpoints_key.to_owned(),
                problem: Problem::bad("at least one endpoint is needed", ""),
            });
        }
        self.endpoints = list;
        self.active = AtomicUsize::new(0);
        Ok(self)
    }

    /// Allows plain IMDSv1 `GET`s when the token request is refused (config
    /// `imdsv1_fallback`; off by default, SPEC §4.1).
    #[must_use]
    pub fn with_imdsv1_fallback(mut self, on: bool) -> Self {
        self.imdsv1_fallback = on;
        self
    }

    /// Replaces the per-request timeouts (connect 1 s, whole request 2 s).
    #[must_use]
    pub fn with_timeouts(mut self, connect: Duration, request: Duration) -> Self {
        self.timeouts = (connect, request);
        self.agent = agent(connect, request, self.binding.as_ref());
        self
    }

    /// Sends every request through interface `device`, from `source` (that NIC's
    /// leased address) where the endpoint's family matches: IMDS throttles per
    /// ENI, and the answer is about this NIC anyway. See the `bind` module.
    #[must_use]
    pub fn with_interface(mut self, device: &str, source: Option<std::net::IpAddr>) -> Self {
        let binding = bind::Binding {
            device: device.to_owned(),
            source,
        };
        self.agent = agent(self.timeouts.0, self.timeouts.1, Some(&binding));
        self.binding = Some(binding);
        self
    }

    /// Keeps the token in memory only.
    #[must_use]
    pub fn without_token_cache(mut self) -> Self {
        self.cache = None;
        self
    }

    /// The base URLs, in the order they are tried.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// The base URL tried first: the one that answered last.
    pub fn active_endpoint(&self) -> &str {
        let n = self.endpoints.len().max(1);
        self.endpoints
            .get(self.active.load(Ordering::Relaxed) % n)
            .map_or("", String::as_str)
    }

    /// The consistency wait for one NIC event, with the real clock: see
    /// [`wait::wait_for_nic`].
    pub fn wait_for_nic(&self, event: &NicEvent, policy: &WaitPolicy) -> Outcome {
        wait_for_nic(self, event, policy, &SystemClock)
    }

    /// The token to send, fetching one when neither memory nor the cache file holds
    /// a fresh one. `None` in IMDSv1 fallback mode. `stale` is a token IMDS just
    /// refused: it is not taken again from the cache.
    fn token(&self, stale: Option<&Token>, deadline: Instant) -> Result<Option<Token>> {
        if self.v1.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let now = SystemTime::now();
        let mut held = self
            .token
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(t) = held.as_ref()
            && t.is_fresh(now)
            && !t.is_same(stale)
        {
            return Ok(Some(t.clone()));
        }
        // Another process may have fetched one already.
        if let Some(t) = self.cache.as_ref().and_then(|c| c.load(now))
            && !t.is_same(stale)
        {
            log::debug!(
                "IMDS token from the cache, {} s left",
                t.remaining_secs(now)
            );
            *held = Some(t.clone());
            return Ok(Some(t));
        }
        match self.fetch_token(deadline) {
            Ok(t) => {
                log::info!(
                    "IMDS: new IMDSv2 token, valid {} s",
                    t.remaining_secs(SystemTime::now())
                );
                if let Some(c) = &self.cache {
                    c.store(&t);
                }
                *held = Some(t.clone());
                Ok(Some(t))
            }
            Err(Error::Imds { kind, url, .. }) if self.imdsv1_fallback && is_refusal(&kind) => {
                log::warn!(
                    "IMDS PUT {url}: {kind}; imdsv1_fallback is set, going on without a token (IMDSv1)"
                );
                self.v1.store(true, Ordering::Relaxed);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// `PUT`s a token request, by `deadline`.
    fn fetch_token(&self, deadline: Instant) -> Result<Token> {
        let (url, mut resp) = self.send(Method::Put, self.dialect.token_path, None, deadline)?;
        let status = resp.status().as_u16();
        let fail = |kind| Error::Imds {
            method: Method::Put.as_str(),
            url: url.clone(),
            kind,
        };
        match status {
            200 => {
                let body = read_body(&mut resp, IMDS_MAX_TOKEN_BYTES).map_err(&fail)?;
                Token::try_new(
                    &body,
                    Duration::from_secs(IMDS_TOKEN_TTL_SECS),
                    SystemTime::now(),
                )
                .map_err(|bad| {
                    fail(ImdsErrorKind::Garbage {
                        reason: bad.to_string(),
                    })
                })
            }
            403 => {
                drain(&mut resp);
                Err(fail(ImdsErrorKind::Disabled))
            }
            _ => {
                drain(&mut resp);
                Err(fail(http_error(&resp)))
            }
        }
    }

    /// One request to the first endpoint that can be connected to, starting with
    /// the one that answered last, ending by `deadline` (body included): each
    /// attempt's whole-request timeout is what is left until then, and none starts
    /// once it has passed. Returns the URL asked and the answer.
    fn send(
        &self,
        method: Method,
        path: &str,
        token: Option<&Token>,
        deadline: Instant,
    ) -> Result<(String, Response<Body>)> {
        let n = self.endpoints.len();
        let first = self.active.load(Ordering::Relaxed) % n.max(1);
        let mut tried = 0;
        loop {
            let idx = (first + tried) % n.max(1);
            let base = self.endpoints.get(idx).map_or("", String::as_str);
            let url = format!("{base}{path}");
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Imds {
                    method: method.as_str(),
                    url,
                    kind: ImdsErrorKind::Timeout {
                        phase: "whole request (token exchange included)".to_owned(),
                    },
                });
            }
            let answer = match method {
                Method::Put => self
                    .agent
                    .put(&url)
                    .config()
                    .timeout_global(Some(left))
                    .build()
                    .header(self.dialect.ttl_header, IMDS_TOKEN_TTL_SECS.to_string())
                    .send_empty(),
                Method::Get => {
                    let req = self
                        .agent
                        .get(&url)
                        .config()
                        .timeout_global(Some(left))
                        .build();
                    match token {
                        Some(t) => req.header(self.dialect.token_header, t.secret()).call(),
                        None => req.call(),
                    }
                }
            };
            tried += 1;
            // Every exchange of the EC2 and Alibaba clients (token PUTs included)
            // passes here, once per attempt.
            crate::metrics::request(
                self.dialect.provider,
                answer.as_ref().ok().map(|r| r.status().as_u16()),
            );
            match answer {
                Ok(resp) => {
                    log::debug!("IMDS {} {url}: {}", method.as_str(), resp.status().as_u16());
                    if idx != first {
                        log::info!("IMDS: using endpoint {base}");
                        self.active.store(idx, Ordering::Relaxed);
                    }
                    return Ok((url, resp));
                }
                Err(e) => {
                    let kind = map_ureq_error(&e);
                    if is_unreachable(&e) && tried < n {
                        log::warn!(
                            "IMDS {} {url}: {kind}; trying the next endpoint",
                            method.as_str()
                        );
                        continue;
                    }
                    log::debug!("IMDS {} {url}: {kind}", method.as_str());
                    return Err(Error::Imds {
                        method: method.as_str(),
                        url,
                        kind,
                    });
                }
            }
        }
    }
}

impl Fetch for Ec2 {
    /// One `GET` with the token; on a 401 the token is replaced once and the `GET`
    /// repeated. 200 is the body, 404 is `None`, anything else an error.
    fn get(&self, path: &str) -> Result<Option<String>> {
        self.get_with(path, |resp| read_body(resp, IMDS_MAX_BODY_BYTES))
    }

    /// As [`Ec2::get`](Fetch::get), without requiring UTF-8, up to `limit` bytes.
    fn get_bytes(&self, path: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        self.get_with(path, |resp| read_bytes(resp, limit))
    }
}

impl Ec2 {
    /// The `GET` behind [`Fetch`]: a 200's body as `read` reads it, `None` for a
    /// 404.
    fn get_with<T>(
        &self,
        path: &str,
        read: impl Fn(&mut Response<Body>) -> Result<T, ImdsErrorKind>,
    ) -> Result<Option<T>> {
        // One request, however many exchanges it takes: the token dance and the
        // endpoint fallback share one request timeout, so a slow, 401-ing IMDS
        // holds the caller no longer than a slow one.
        let deadline = Instant::now() + self.timeouts.1;
        let mut stale = None;
        loop {
            let token = self.token(stale.as_ref(), deadline)?;
            let (url, mut resp) = self.send(Method::Get, path, token.as_ref(), deadline)?;
            let fail = |kind| Error::Imds {
                method: Method::Get.as_str(),
                url: url.clone(),
                kind,
            };
            match resp.status().as_u16() {
                200 => return read(&mut resp).map(Some).map_err(fail),
                404 => {
                    drain(&mut resp);
                    return Ok(None);
                }
                401 if stale.is_none() && token.is_some() => {
                    drain(&mut resp);
                    log::info!("IMDS GET {url}: 401, the token was refused; fetching a new one");
                    stale = token;
                }
                _ => {
                    drain(&mut resp);
                    return Err(fail(http_error(&resp)));
                }
            }
        }
    }
}

/// Builds the one agent a client uses: keep-alive, no proxy, no redirects, statuses
/// as data, IP literals only.
pub(crate) fn agent(
    connect: Duration,
    request: Duration,
    binding: Option<&bind::Binding>,
) -> Agent {
    let config = Agent::config_builder()
        .timeout_connect(Some(connect))
        .timeout_global(Some(request))
        .http_status_as_error(false)
        .max_redirects(0)
        // IMDS is link-local: never route it through $http_proxy.
        .proxy(None)
        .user_agent(concat!("leasehook/", env!("CARGO_PKG_VERSION")))
        .build();
    match binding {
        Some(b) => Agent::with_parts(config, bind::BoundConnector(b.clone()), resolver::IpLiteral),
        None => Agent::with_parts(config, DefaultConnector::new(), resolver::IpLiteral),
    }
}

/// Checks one base URL: `http://`, an IP literal host, an optional port, no path.
pub(crate) fn check_endpoint(url: &str) -> Result<String> {
    check_endpoint_for(url, EC2.endpoints_key)
}

/// [`check_endpoint`], reporting a bad URL under configuration key `key`.
pub(crate) fn check_endpoint_for(url: &str, key: &str) -> Result<String> {
    let bad = |reason: &str| Error::Argument {
        arg: key.to_owned(),
        problem: Problem::bad(reason, url),
    };
    let trimmed = url.trim_end_matches('/');
    let uri: ureq::http::Uri = trimmed.parse().map_err(|_| bad("not a URL"))?;
    if uri.scheme_str() != Some("http") {
        return Err(bad("only http:// is supported (IMDS has no TLS)"));
    }
    if uri
        .path_and_query()
        .is_some_and(|p| p.as_str() != "/" && !p.as_str().is_empty())
    {
        return Err(bad("a base URL has no path"));
    }
    if resolver::socket_addr(&uri).is_none() {
        return Err(bad("the host must be an IP address (no DNS is done)"));
    }
    Ok(trimmed.to_owned())
}

/// Reads a body of at most `limit` bytes.
pub(crate) fn read_bytes(resp: &mut Response<Body>, limit: u64) -> Result<Vec<u8>, ImdsErrorKind> {
    resp.body_mut()
        .with_config()
        .limit(limit)
        .read_to_vec()
        .map_err(|e| map_ureq_error(&e))
}

/// Reads a body of at most `limit` bytes as UTF-8.
pub(crate) fn read_body(resp: &mut Response<Body>, limit: u64) -> Result<String, ImdsErrorKind> {
    let bytes = read_bytes(resp, limit)?;
    String::from_utf8(bytes).map_err(|e| ImdsErrorKind::Garbage {
        reason: format!("not UTF-8 (byte {})", e.utf8_error().valid_up_to()),
    })
}

/// Reads and drops an answer's body, so the connection can serve the next request
/// (ureq closes a connection whose answer was not read to the end).
pub(crate) fn drain(resp: &mut Response<Body>) {
    let _ = resp
        .body_mut()
        .with_config()
        .limit(IMDS_MAX_BODY_BYTES)
        .read_to_vec();
}

/// An HTTP status that is an error, with a 503's `Retry-After` in seconds.
pub(crate) fn http_error(resp: &Response<Body>) -> ImdsErrorKind {
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    ImdsErrorKind::Http {
        status: resp.status().as_u16(),
        retry_after,
    }
}

/// Whether a token failure means "no tokens here" (so IMDSv1 may be tried), rather
/// than "IMDS is not answering".
fn is_refusal(kind: &ImdsErrorKind) -> bool {
    match kind {
        ImdsErrorKind::Disabled => true,
        ImdsErrorKind::Http { status, .. } => (400..500).contains(status),
        _ => false,
    }
}

/// Whether the endpoint could not be reached at all, so the next one may answer.
pub(crate) fn is_unreachable(e: &ureq::Error) -> bool {
    use std::io::ErrorKind as K;
    match e {
        ureq::Error::Timeout(ureq::Timeout::Connect) | ureq::Error::ConnectionFailed => true,
        ureq::Error::Io(io) => matches!(
            io.kind(),
            K::ConnectionRefused | K::NetworkUnreachable | K::HostUnreachable | K::AddrNotAvailable
        ),
        _ => false,
    }
}

pub(crate) fn map_ureq_error(e: &ureq::Error) -> ImdsErrorKind {
    match e {
        ureq::Error::Timeout(t) => ImdsErrorKind::Timeout {
            phase: match t {
                ureq::Timeout::Connect => "connect".to_owned(),
                ureq::Timeout::Global => "whole request".to_owned(),
                other => format!("{other:?}").to_lowercase(),
            },
        },
        ureq::Error::Io(io) => ImdsErrorKind::Io {
            kind: io.kind(),
            message: io.to_string(),
        },
        ureq::Error::Protocol(p) => ImdsErrorKind::Garbage {
            reason: format!("not an HTTP answer ({p})"),
        },
        ureq::Error::BodyExceedsLimit(n) => ImdsErrorKind::Garbage {
            reason: format!("answer larger than {n} bytes"),
        },
        other => ImdsErrorKind::Io {
            kind: std::io::ErrorKind::Other,
            message: other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_must_be_http_ip_literals() {
        let root = tempfile::tempdir().unwrap();
        let ok = Ec2::try_new(root.path())
            .unwrap()
            .with_endpoints(["http://127.0.0.1:8080/", "http://[::1]:9"])
            .unwrap();
        assert_eq!(ok.endpoints(), ["http://127.0.0.1:8080", "http://[::1]:9"]);
        for bad in [
            "https://169.254.169.254",
            "http://instance-data",
            "http://169.254.169.254/latest",
            "169.254.169.254",
            "",
        ] {
            let e = Ec2::try_new(root.path())
                .unwrap()
                .with_endpoints([bad])
                .unwrap_err();
            assert!(e.to_string().starts_with("argument imds.endpoints"), "{e}");
        }
        assert!(
            Ec2::try_new(root.path())
                .unwrap()
                .with_endpoints(Vec::<String>::new())
                .is_err()
        );
        let default = Ec2::try_new(root.path()).unwrap();
        assert_eq!(default.endpoints(), IMDS_ENDPOINTS);
    }

    #[test]
    fn retryable_kinds() {
        use ImdsErrorKind as K;
        let http = |status| K::Http {
            status,
            retry_after: None,
        };
        assert!(http(503).is_retryable());
        assert!(http(500).is_retryable());
        assert!(http(429).is_retryable());
        assert!(!http(400).is_retryable());
        assert!(!K::Disabled.is_retryable());
        assert!(
            K::Timeout {
                phase: "connect".into()
            }
            .is_retryable()
        );
        assert!(!K::Garbage { reason: "x".into() }.is_retryable());
        assert!(is_refusal(&K::Disabled));
        assert!(is_refusal(&http(405)));
        assert!(!is_refusal(&http(503)));
    }

    #[test]
    fn error_messages_name_the_url() {
        let e = Error::Imds {
            method: "GET",
            url: "http://169.254.169.254/latest/meta-data/mac".into(),
            kind: ImdsErrorKind::Http {
                status: 503,
                retry_after: Some(Duration::from_secs(2)),
            },
        };
        assert_eq!(
            e.to_string(),
            "IMDS GET http://169.254.169.254/latest/meta-data/mac: HTTP 503 (retry after 2 s)"
        );
        let d = Error::Imds {
            method: "PUT",
            url: "http://169.254.169.254/latest/api/token".into(),
            kind: ImdsErrorKind::Disabled,
        };
        assert!(d.to_string().contains("IMDS disabled"), "{d}");
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the one HTTP client of every cloud's metadata service (SPEC §4.1,
//! §4.4). A cloud says what sets its service apart in a [`Service`] (its default
//! endpoints, the headers every request carries, the configuration key of its
//! endpoints, what vouches for an answer); the rest is this client's and the same
//! for every cloud:
//!
//! * **Endpoints.** Base URLs naming an IP literal (there is no DNS: the
//!   `resolver` module), tried in order. When one cannot be connected to, the
//!   next is tried, and the one that answered is asked first from then on.
//! * **One request.** Connect 1 s, whole request 2 s (the endpoint fallback
//!   included: each attempt gets what is left, and none starts once it is
//!   spent), one keep-alive connection (one ureq agent), no proxy, no redirects,
//!   answers capped and required to be UTF-8 where text is read.
//! * **Statuses.** [`Http::get_with`]: 200 is an answer, 404 "not there (yet)",
//!   anything else an [`ImdsErrorKind::Http`] with its `Retry-After`, which the
//!   consistency wait ([`super::wait`]) reads: 429 and 5xx are retried within the
//!   budget, other statuses are not ([`ImdsErrorKind::is_retryable`]). Waiting
//!   and retrying belong to the wait and to the datasources' fetch, never to one
//!   request.
//! * **Binding.** [`Http::with_interface`] sends every request through one
//!   interface, from its leased address (the `bind` module): EC2 and Alibaba
//!   throttle per NIC.

mod bind;
mod resolver;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ureq::http::Response;
use ureq::unversioned::transport::DefaultConnector;
use ureq::{Agent, Body, RequestBuilder};

use crate::constants::{IMDS_CONNECT_TIMEOUT, IMDS_MAX_BODY_BYTES, IMDS_REQUEST_TIMEOUT};
use crate::error::{Error, ImdsErrorKind, Problem, Result};

/// Reads one metadata path: the seam between the consistency wait (or a
/// datasource) and the transport; tests hand in a scripted one.
pub trait Fetch {
    /// `GET`s `path` (below the base URL, starting with `/`). `Ok(None)` is a 404:
    /// the service does not (yet) have it.
    fn get(&self, path: &str) -> Result<Option<String>>;

    /// Like [`Fetch::get`], for an answer that need not be UTF-8 (user-data, often
    /// gzip), of at most `limit` bytes.
    fn get_bytes(&self, path: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        let _ = limit;
        self.get(path).map(|a| a.map(String::into_bytes))
    }
}

/// What tells one cloud's metadata service from another's, as far as the client
/// is concerned.
#[derive(Debug, Clone, Copy)]
pub struct Service {
    /// The `provider` label of its requests' metric.
    pub provider: &'static str,
    /// How its log lines name it (`IMDS`, `GCE`, `OCI IMDS`, ...).
    pub label: &'static str,
    /// The base URLs tried when none are configured.
    pub endpoints: &'static [&'static str],
    /// The configuration key a bad endpoint is reported under.
    pub endpoints_key: &'static str,
    /// Headers every request carries.
    pub headers: &'static [(&'static str, &'static str)],
    /// Checks a 200's or a 404's headers: an error when the answer did not come
    /// from this service (GCE's `Metadata-Flavor`), else `Ok`.
    pub vouch: fn(&Response<Body>) -> Result<(), ImdsErrorKind>,
    /// What the whole request's timeout covers, named in its error.
    pub spent: &'static str,
}

impl Service {
    /// The service `provider` (`label` in the log) at `endpoints`, overridden
    /// under `endpoints_key`, with the seam's defaults: no header of its own,
    /// every answer trusted ([`Service::trust`]), the timeout covering the
    /// whole request.
    pub const fn new(
        provider: &'static str,
        label: &'static str,
        endpoints: &'static [&'static str],
        endpoints_key: &'static str,
    ) -> Self {
        Self {
            provider,
            label,
            endpoints,
            endpoints_key,
            headers: &[],
            vouch: Service::trust,
            spent: "whole request",
        }
    }

    /// Every request carries `headers`.
    #[must_use]
    pub const fn with_headers(mut self, headers: &'static [(&'static str, &'static str)]) -> Self {
        self.headers = headers;
        self
    }

    /// Answers are checked by `vouch` ([`Service::vouch`]).
    #[must_use]
    pub const fn vouched_by(
        mut self,
        vouch: fn(&Response<Body>) -> Result<(), ImdsErrorKind>,
    ) -> Self {
        self.vouch = vouch;
        self
    }

    /// The whole request's timeout covers `spent` (named in its error).
    #[must_use]
    pub const fn spending(mut self, spent: &'static str) -> Self {
        self.spent = spent;
        self
    }

    /// Any answer is the service's.
    pub fn trust(_: &Response<Body>) -> Result<(), ImdsErrorKind> {
        Ok(())
    }
}

/// `GET` or `PUT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Reads.
    Get,
    /// EC2's (and Alibaba's) token request.
    Put,
}

impl Method {
    /// The method's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Put => "PUT",
        }
    }
}

/// One cloud's metadata client. One per process is enough; it is `Sync`.
#[derive(Debug)]
pub struct Http {
    service: Service,
    endpoints: Vec<String>,
    /// The endpoint that answered last, tried first.
    active: AtomicUsize,
    agent: Agent,
    /// Connect and whole-request timeouts the agent was built with.
    timeouts: (Duration, Duration),
    /// The interface requests are bound to, if any.
    binding: Option<bind::Binding>,
}

impl Http {
    /// A client for `service`'s default endpoints.
    pub fn new(service: Service) -> Self {
        Self {
            service,
            endpoints: service.endpoints.iter().map(|s| (*s).to_owned()).collect(),
            active: AtomicUsize::new(0),
            agent: agent(IMDS_CONNECT_TIMEOUT, IMDS_REQUEST_TIMEOUT, None),
            timeouts: (IMDS_CONNECT_TIMEOUT, IMDS_REQUEST_TIMEOUT),
            binding: None,
        }
    }

    /// Replaces the endpoint list: `http://` base URLs whose host is an IP
    /// literal, tried in order; at least one.
    pub fn with_endpoints<I, S>(mut self, endpoints: I) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let key = self.service.endpoints_key;
        let list = endpoints
            .into_iter()
            .map(|e| check_endpoint_for(e.as_ref(), key))
            .collect::<Result<Vec<_>>>()?;
        if list.is_empty() {
            return Err(Error::Argument {
                arg: key.to_owned(),
                problem: Problem::bad("at least one endpoint is needed", ""),
            });
        }
        self.endpoints = list;
        self.active = AtomicUsize::new(0);
        Ok(self)
    }

    /// Replaces the per-request timeouts (connect 1 s, whole request 2 s).
    #[must_use]
    pub fn with_timeouts(mut self, connect: Duration, request: Duration) -> Self {
        self.timeouts = (connect, request);
        self.agent = agent(connect, request, self.binding.as_ref());
        self
    }

    /// Sends every request through interface `device`, from `source` (that NIC's
    /// leased address) where the endpoint's family matches. See the `bind` module.
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

    /// The whole-request timeout.
    pub fn request_timeout(&self) -> Duration {
        self.timeouts.1
    }

    /// How log lines name the service.
    pub fn label(&self) -> &'static str {
        self.service.label
    }

    /// One request to the first endpoint that can be connected to, starting with
    /// the one that answered last, ending by `deadline` (body included): each
    /// attempt's whole-request timeout is what is left until then, and none starts
    /// once it has passed. `header` is sent besides the service's. Returns the URL
    /// asked and the answer, whatever its status.
    pub fn send(
        &self,
        method: Method,
        path: &str,
        header: Option<(&str, &str)>,
        deadline: Instant,
    ) -> Result<(String, Response<Body>)> {
        let label = self.service.label;
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
                        phase: self.service.spent.to_owned(),
                    },
                });
            }
            let headers = self.service.headers.iter().copied().chain(header);
            let answer = match method {
                Method::Get => dress(self.agent.get(&url), left, headers).call(),
                Method::Put => dress(self.agent.put(&url), left, headers).send_empty(),
            };
            tried += 1;
            // Every exchange of every cloud's client passes here, once per attempt.
            crate::metrics::request(
                self.service.provider,
                answer.as_ref().ok().map(|r| r.status().as_u16()),
            );
            match answer {
                Ok(resp) => {
                    log::debug!(
                        "{label} {} {url}: {}",
                        method.as_str(),
                        resp.status().as_u16()
                    );
                    if idx != first {
                        log::info!("{label}: using endpoint {base}");
                        self.active.store(idx, Ordering::Relaxed);
                    }
                    return Ok((url, resp));
                }
                Err(e) => {
                    let kind = map_ureq_error(&e);
                    if is_unreachable(&e) && tried < n {
                        log::warn!(
                            "{label} {} {url}: {kind}; trying the next endpoint",
                            method.as_str()
                        );
                        continue;
                    }
                    log::debug!("{label} {} {url}: {kind}", method.as_str());
                    return Err(Error::Imds {
                        method: method.as_str(),
                        url,
                        kind,
                    });
                }
            }
        }
    }

    /// One `GET` of `path` within one request timeout: a 200's body as `read`
    /// reads it, `None` for a 404, an error for anything else and for an answer
    /// the service's `vouch` refuses.
    pub fn get_with<T>(
        &self,
        path: &str,
        read: impl Fn(&mut Response<Body>) -> Result<T, ImdsErrorKind>,
    ) -> Result<Option<T>> {
        self.get_within(path, self.timeouts.1, read)
    }

    /// [`Self::get_with`] with the whole request's time limit `total` (GCE's long
    /// poll's is minutes).
    pub fn get_within<T>(
        &self,
        path: &str,
        total: Duration,
        read: impl Fn(&mut Response<Body>) -> Result<T, ImdsErrorKind>,
    ) -> Result<Option<T>> {
        let (url, resp) = self.send(Method::Get, path, None, Instant::now() + total)?;
        self.answer(&url, resp, read)
    }

    /// What one `GET`'s answer says: see [`Self::get_with`].
    pub fn answer<T>(
        &self,
        url: &str,
        mut resp: Response<Body>,
        read: impl Fn(&mut Response<Body>) -> Result<T, ImdsErrorKind>,
    ) -> Result<Option<T>> {
        let fail = |kind| Error::Imds {
            method: Method::Get.as_str(),
            url: url.to_owned(),
            kind,
        };
        let status = resp.status().as_u16();
        if matches!(status, 200 | 404)
            && let Err(kind) = (self.service.vouch)(&resp)
        {
            drain(&mut resp);
            return Err(fail(kind));
        }
        match status {
            200 => read(&mut resp).map(Some).map_err(fail),
            404 => {
                drain(&mut resp);
                Ok(None)
            }
            _ => {
                drain(&mut resp);
                Err(fail(http_error(&resp)))
            }
        }
    }
}

impl Fetch for Http {
    /// One `GET`: 200 is the body (at most 64 KiB, UTF-8), 404 is `None`,
    /// anything else an error.
    fn get(&self, path: &str) -> Result<Option<String>> {
        self.get_with(path, |resp| read_body(resp, IMDS_MAX_BODY_BYTES))
    }

    /// As [`Http::get`](Fetch::get), without requiring UTF-8, up to `limit` bytes.
    fn get_bytes(&self, path: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        self.get_with(path, |resp| read_bytes(resp, limit))
    }
}

/// A request with what is left of the deadline as its timeout and `headers`.
fn dress<'h, B>(
    req: RequestBuilder<B>,
    left: Duration,
    headers: impl Iterator<Item = (&'h str, &'h str)>,
) -> RequestBuilder<B> {
    let mut req = req.config().timeout_global(Some(left)).build();
    for (name, value) in headers {
        req = req.header(name, value);
    }
    req
}

/// Builds the one agent a client uses: keep-alive, no proxy, no redirects, statuses
/// as data, IP literals only.
fn agent(connect: Duration, request: Duration, binding: Option<&bind::Binding>) -> Agent {
    let config = Agent::config_builder()
        .timeout_connect(Some(connect))
        .timeout_global(Some(request))
        .http_status_as_error(false)
        .max_redirects(0)
        // Metadata services are link-local: never route them through $http_proxy.
        .proxy(None)
        .user_agent(concat!("leasehook/", env!("CARGO_PKG_VERSION")))
        .build();
    match binding {
        Some(b) => Agent::with_parts(config, bind::BoundConnector(b.clone()), resolver::IpLiteral),
        None => Agent::with_parts(config, DefaultConnector::new(), resolver::IpLiteral),
    }
}

/// Checks one base URL: `http://`, an IP literal host, an optional port, no path;
/// a bad one is reported under configuration key `key`.
pub fn check_endpoint_for(url: &str, key: &str) -> Result<String> {
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
pub fn read_bytes(resp: &mut Response<Body>, limit: u64) -> Result<Vec<u8>, ImdsErrorKind> {
    resp.body_mut()
        .with_config()
        .limit(limit)
        .read_to_vec()
        .map_err(|e| map_ureq_error(&e))
}

/// Reads a body of at most `limit` bytes as UTF-8.
pub fn read_body(resp: &mut Response<Body>, limit: u64) -> Result<String, ImdsErrorKind> {
    let bytes = read_bytes(resp, limit)?;
    String::from_utf8(bytes).map_err(|e| ImdsErrorKind::Garbage {
        reason: format!("not UTF-8 (byte {})", e.utf8_error().valid_up_to()),
    })
}

/// Reads and drops an answer's body, so the connection can serve the next request
/// (ureq closes a connection whose answer was not read to the end).
pub fn drain(resp: &mut Response<Body>) {
    let _ = resp
        .body_mut()
        .with_config()
        .limit(IMDS_MAX_BODY_BYTES)
        .read_to_vec();
}

/// An HTTP status that is an error, with its `Retry-After` in seconds (sent with
/// 503 by EC2, with 429 by Azure and Neutron).
pub fn http_error(resp: &Response<Body>) -> ImdsErrorKind {
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

/// Whether the endpoint could not be reached at all, so the next one may answer.
fn is_unreachable(e: &ureq::Error) -> bool {
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

/// What a transport error means for the caller.
pub fn map_ureq_error(e: &ureq::Error) -> ImdsErrorKind {
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

/// Declares a cloud's metadata client: a type over [`Http`] with `service` (a
/// [`Service`] constant), its `new`, `with_endpoint` (one base URL in place of
/// the defaults), `with_timeouts`, `endpoint`, `endpoints` and [`Fetch`]. Clouds
/// whose requests need no more than the service's headers (GCE, `OpenStack`,
/// Oracle) are this and their `Service`.
macro_rules! metadata_client {
    ($(#[$doc:meta])* $name:ident, $service:expr) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name {
            http: $crate::source::provider::http::Http,
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl $name {
            /// A client for the service's default endpoints.
            pub fn new() -> Self {
                Self {
                    http: $crate::source::provider::http::Http::new($service),
                }
            }

            /// Replaces the endpoints with one base URL (the cloud's endpoint
            /// key): `http://`, an IP literal, an optional port, no path.
            pub fn with_endpoint(self, url: &str) -> $crate::error::Result<Self> {
                Ok(Self {
                    http: self.http.with_endpoints([url])?,
                })
            }

            /// Replaces the per-request timeouts (connect 1 s, whole request 2 s).
            #[must_use]
            pub fn with_timeouts(
                self,
                connect: std::time::Duration,
                request: std::time::Duration,
            ) -> Self {
                Self {
                    http: self.http.with_timeouts(connect, request),
                }
            }

            /// The base URL asked first: the one that answered last.
            pub fn endpoint(&self) -> &str {
                self.http.active_endpoint()
            }

            /// The base URLs, in the order they are tried.
            pub fn endpoints(&self) -> &[String] {
                self.http.endpoints()
            }
        }

        impl $crate::source::provider::http::Fetch for $name {
            fn get(&self, path: &str) -> $crate::error::Result<Option<String>> {
                self.http.get(path)
            }

            fn get_bytes(&self, path: &str, limit: u64) -> $crate::error::Result<Option<Vec<u8>>> {
                self.http.get_bytes(path, limit)
            }
        }
    };
}
pub(crate) use metadata_client;

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the Oracle Cloud Infrastructure (OCI) instance metadata service
//! client, IMDS version 2, over HTTP (SPEC §4.4, `reference/clouds-and-clusters.md`
//! §2).
//!
//! * **Endpoints.** `http://169.254.169.254`, then `http://[fd00:c1::a9fe:a9fe]`
//!   (OCI's IPv6 address of the same service, [`ENDPOINTS`]), with the EC2
//!   client's discipline: when one cannot be connected to the next is tried, and
//!   the one that answered is asked first from then on. `oracle.endpoint`
//!   replaces both with one `http://` IP literal (tests on loopback). Paths start
//!   with `/opc/v2/` ([`V2_ROOT`]); the v1 paths (`/opc/v1/`, `/openstack/`) are
//!   never asked: an instance with "IMDSv2 only" answers them 404.
//! * **The header.** Every request carries `Authorization: Bearer Oracle`: OCI
//!   rejects a v2 request without it (the emulator answers 401, as leasehook reads
//!   any 4xx: an error, never data and never "absent"). Requests that name a
//!   proxy (`Forwarded`, `X-Forwarded-*`) are rejected too; none is sent, and no
//!   proxy is ever used.
//! * **From the primary VNIC.** Oracle: "if an instance has multiple VNICs, you
//!   must send the request using the primary VNIC". Requests are never bound to
//!   the event's NIC (EC2's are): the main table sends them out of the primary.
//! * **One request.** Connect 1 s, whole request 2 s (the endpoint fallback
//!   included), one keep-alive agent, no redirects, bodies capped (64 KiB for the
//!   VNIC list, 1 MiB for the instance document, which carries the user-data) and
//!   required to be UTF-8 JSON. 200 is an answer, 404 is "not there (yet)" (OCI
//!   says its IMDS may 404 for milliseconds while it is updated), anything else an
//!   error; retrying belongs to the wait ([`wait`]) and the datasource
//!   ([`identity`]).
//! * **Fewest requests.** `GET /opc/v2/vnics/` answers every VNIC at once
//!   ([`vnic`]): one request per round of the consistency wait, one per
//!   [`crate::source::provider::Provider::unleased`]. The boot stage adds
//!   `/opc/v2/instance/`.

pub mod detect;
pub mod identity;
mod provider;
pub mod vnic;
pub mod wait;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ureq::http::Response;
use ureq::{Agent, Body};

use crate::constants::{IMDS_CONNECT_TIMEOUT, IMDS_MAX_BODY_BYTES, IMDS_REQUEST_TIMEOUT};
use crate::error::{Error, ImdsErrorKind, Result};
use crate::source::ec2::{
    Fetch, agent, check_endpoint_for, drain, http_error, is_unreachable, map_ureq_error, read_body,
    read_bytes,
};

pub use identity::OracleSource;
pub use provider::OracleProvider;
pub use provider::{CLOUD, SOURCE};

/// The metadata service's base URLs, tried in this order.
pub const ENDPOINTS: [&str; 2] = ["http://169.254.169.254", "http://[fd00:c1::a9fe:a9fe]"];

/// The v2 API below the base URL.
pub const V2_ROOT: &str = "/opc/v2";

/// Every VNIC of the instance, primary first (a JSON list).
pub const VNICS_PATH: &str = "/opc/v2/vnics/";

/// The instance document (id, names, region, availability domain, metadata).
pub const INSTANCE_PATH: &str = "/opc/v2/instance/";

/// The header every v2 request carries.
pub const AUTH_HEADER: (&str, &str) = ("Authorization", "Bearer Oracle");

/// The configuration key of the endpoint override.
pub const ENDPOINT_KEY: &str = "oracle.endpoint";

/// The OCI metadata client. One per wait is enough; it is `Sync`.
#[derive(Debug)]
pub struct Oracle {
    endpoints: Vec<String>,
    /// The endpoint that answered last, asked first.
    active: AtomicUsize,
    agent: Agent,
    timeouts: (Duration, Duration),
}

impl Default for Oracle {
    fn default() -> Self {
        Self::new()
    }
}

impl Oracle {
    /// A client for [`ENDPOINTS`].
    pub fn new() -> Self {
        Self {
            endpoints: ENDPOINTS.iter().map(|s| (*s).to_owned()).collect(),
            active: AtomicUsize::new(0),
            agent: agent(IMDS_CONNECT_TIMEOUT, IMDS_REQUEST_TIMEOUT, None),
            timeouts: (IMDS_CONNECT_TIMEOUT, IMDS_REQUEST_TIMEOUT),
        }
    }

    /// Replaces both endpoints with one base URL (config `oracle.endpoint`):
    /// `http://`, an IP literal, an optional port, no path.
    pub fn with_endpoint(mut self, url: &str) -> Result<Self> {
        self.endpoints = vec![check_endpoint(url)?];
        self.active.store(0, Ordering::Relaxed);
        Ok(self)
    }

    /// Replaces the per-request timeouts (connect 1 s, whole request 2 s).
    #[must_use]
    pub fn with_timeouts(mut self, connect: Duration, request: Duration) -> Self {
        self.timeouts = (connect, request);
        self.agent = agent(connect, request, None);
        self
    }

    /// The base URLs, in the order they are tried.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// The base URL asked first: the one that answered last.
    pub fn active_endpoint(&self) -> &str {
        let n = self.endpoints.len().max(1);
        self.endpoints
            .get(self.active.load(Ordering::Relaxed) % n)
            .map_or("", String::as_str)
    }

    /// One `GET` of `path` (below the base URL) with the header, to the first
    /// endpoint that can be connected to, within one request timeout: a 200's body
    /// as `read` reads it, `None` for a 404, an error for anything else.
    fn get_with<T>(
        &self,
        path: &str,
        read: impl Fn(&mut Response<Body>) -> Result<T, ImdsErrorKind>,
    ) -> Result<Option<T>> {
        let deadline = Instant::now() + self.timeouts.1;
        let n = self.endpoints.len().max(1);
        let first = self.active.load(Ordering::Relaxed) % n;
        let mut tried = 0;
        loop {
            let idx = (first + tried) % n;
            let base = self.endpoints.get(idx).map_or("", String::as_str);
            let url = format!("{base}{path}");
            let fail = |kind| Error::Imds {
                method: "GET",
                url: url.clone(),
                kind,
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(fail(ImdsErrorKind::Timeout {
                    phase: "whole request (endpoint fallback included)".to_owned(),
                }));
            }
            tried += 1;
            let answer = self
                .agent
                .get(&url)
                .config()
                .timeout_global(Some(left))
                .build()
                .header(AUTH_HEADER.0, AUTH_HEADER.1)
                .call();
            crate::metrics::request("oracle", answer.as_ref().ok().map(|r| r.status().as_u16()));
            let mut resp = match answer {
                Ok(r) => r,
                Err(e) if is_unreachable(&e) && tried < self.endpoints.len() => {
                    log::warn!(
                        "OCI IMDS GET {url}: {}; trying the next endpoint",
                        map_ureq_error(&e)
                    );
                    continue;
                }
                Err(e) => return Err(fail(map_ureq_error(&e))),
            };
            let status = resp.status().as_u16();
            log::debug!("OCI IMDS GET {url}: {status}");
            if idx != first {
                log::info!("OCI IMDS: using endpoint {base}");
                self.active.store(idx, Ordering::Relaxed);
            }
            return match status {
                200 => read(&mut resp).map(Some).map_err(fail),
                404 => {
                    drain(&mut resp);
                    Ok(None)
                }
                _ => {
                    drain(&mut resp);
                    Err(fail(http_error(&resp)))
                }
            };
        }
    }
}

/// Checks an `oracle.endpoint` value: `http://`, an IP literal, no path.
pub fn check_endpoint(url: &str) -> Result<String> {
    check_endpoint_for(url, ENDPOINT_KEY)
}

impl Fetch for Oracle {
    fn get(&self, path: &str) -> Result<Option<String>> {
        self.get_with(path, |resp| read_body(resp, IMDS_MAX_BODY_BYTES))
    }

    fn get_bytes(&self, path: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        self.get_with(path, |resp| read_bytes(resp, limit))
    }
}

#[cfg(test)]
mod tests {

    use std::net::TcpListener;

    use super::*;
    use crate::source::loopback::{answer, serve};
    use crate::source::provider::wait::is_retryable;

    #[test]
    fn every_request_carries_the_header_and_statuses_mean_what_they_say() {
        let big = vec![b'a'; usize::try_from(IMDS_MAX_BODY_BYTES).unwrap() + 1];
        let (url, h) = serve(vec![
            answer("200 OK", "", b"[]"),
            answer("404 Not Found", "", b""),
            answer("401 Unauthorized", "", b"{}"),
            answer("503 Service Unavailable", "Retry-After: 3\r\n", b""),
            answer("200 OK", "", &big),
            answer("200 OK", "", b"\xff\xfe"),
        ]);
        let o = Oracle::new().with_endpoint(&url).unwrap();
        assert_eq!(o.get(VNICS_PATH).unwrap().as_deref(), Some("[]"));
        assert_eq!(o.get(VNICS_PATH).unwrap(), None);
        let e = o.get(VNICS_PATH).unwrap_err();
        assert!(e.to_string().contains("HTTP 401"), "{e}");
        assert!(!is_retryable(&e), "{e}");
        let e = o.get(VNICS_PATH).unwrap_err();
        assert!(is_retryable(&e), "{e}");
        assert_eq!(
            crate::source::provider::wait::retry_after(&e),
            Some(Duration::from_secs(3))
        );
        let e = o.get(VNICS_PATH).unwrap_err();
        assert!(e.to_string().contains("larger than"), "{e}");
        let e = o.get(VNICS_PATH).unwrap_err();
        assert!(e.to_string().contains("not UTF-8"), "{e}");
        let seen = h.join().unwrap();
        assert_eq!(seen.len(), 6);
        for r in &seen {
            assert!(r.starts_with("GET /opc/v2/vnics/ HTTP/1.1\r\n"), "{r}");
            assert!(
                r.to_ascii_lowercase()
                    .contains("\r\nauthorization: bearer oracle\r\n"),
                "{r}"
            );
            assert!(!r.to_ascii_lowercase().contains("forwarded"), "{r}");
        }
    }

    #[test]
    fn an_unreachable_endpoint_falls_back_to_the_next_and_it_is_kept() {
        // A port nothing listens on, then a live one.
        let dead = TcpListener::bind("127.0.0.1:0").unwrap();
        let dead_url = format!("http://{}", dead.local_addr().unwrap());
        drop(dead);
        let (live, h) = serve(vec![
            answer("200 OK", "", b"[1]"),
            answer("200 OK", "", b"[2]"),
        ]);
        let mut o = Oracle::new();
        o.endpoints = vec![dead_url, live.clone()];
        assert_eq!(o.get(VNICS_PATH).unwrap().as_deref(), Some("[1]"));
        assert_eq!(o.active_endpoint(), live);
        assert_eq!(o.get(VNICS_PATH).unwrap().as_deref(), Some("[2]"));
        assert_eq!(h.join().unwrap().len(), 2);
    }

    #[test]
    fn the_endpoints_are_v4_then_v6_and_an_override_is_an_http_ip_literal() {
        assert_eq!(
            Oracle::new().endpoints(),
            ["http://169.254.169.254", "http://[fd00:c1::a9fe:a9fe]"]
        );
        let o = Oracle::new()
            .with_endpoint("http://127.0.0.1:8080/")
            .unwrap();
        assert_eq!(o.endpoints(), ["http://127.0.0.1:8080"]);
        for bad in [
            "https://169.254.169.254",
            "http://metadata.oraclecloud.com",
            "http://1.2.3.4/opc",
            "",
        ] {
            let e = Oracle::new().with_endpoint(bad).unwrap_err().to_string();
            assert!(e.starts_with("argument oracle.endpoint"), "{bad}: {e}");
        }
    }
}

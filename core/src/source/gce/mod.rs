// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the Google Compute Engine metadata server client, over HTTP
//! (SPEC §4.4, `reference/clouds-and-clusters.md` §2).
//!
//! * **Endpoint.** `http://169.254.169.254` (what `metadata.google.internal`
//!   resolves to; there is no DNS here), or the base URL given to
//!   [`Gce::with_endpoint`] (config `gce.endpoint`): an `http://` IP literal.
//!   Paths start with `/computeMetadata/v1/` ([`GCE_ROOT`]).
//! * **The header, both ways.** Every request carries `Metadata-Flavor: Google`
//!   (the server answers 403 without it) and every 200 or 404 must carry it back:
//!   an answer without it did not come from Google's metadata server (a captive
//!   proxy, another cloud's service at the same address) and is an error, never
//!   data and never "absent".
//! * **One request.** The same discipline as the EC2 client ([`crate::source::ec2`]):
//!   connect 1 s, whole request 2 s, one keep-alive agent, no proxy, no
//!   redirects, answers capped at 64 KiB and required to be UTF-8 (user-data: 1
//!   MiB, bytes). Retrying belongs to the consistency wait ([`wait`]) and to the
//!   datasource's fetch ([`identity`]).
//! * **Fewest requests.** One `instance/network-interfaces/?recursive=true` per
//!   round of the wait answers every NIC at once ([`nic`]); the boot stage adds
//!   `instance/id`, `instance/hostname`, `instance/zone` and the user-data
//!   attributes.
//! * **Live.** `leasehook watch` follows the NIC list with the server's long poll
//!   (`wait_for_change=true&last_etag=E`, one request held for minutes, [`live`]);
//!   which NICs an answer changed is [`change`]'s pure decision.

pub mod change;
pub mod detect;
pub mod identity;
pub mod live;
pub mod nic;
mod provider;
pub mod wait;

use std::time::{Duration, Instant};

use ureq::http::Response;
use ureq::{Agent, Body};

use crate::constants::{IMDS_CONNECT_TIMEOUT, IMDS_MAX_BODY_BYTES, IMDS_REQUEST_TIMEOUT};
use crate::error::{Error, ImdsErrorKind, Result};
use crate::source::ec2::{
    Fetch, agent, check_endpoint, drain, http_error, map_ureq_error, read_body, read_bytes,
};

pub use provider::GceProvider;
pub use provider::{CLOUD, SOURCE};

/// The metadata server's address (`metadata.google.internal`).
pub const GCE_ENDPOINT: &str = "http://169.254.169.254";

/// The root of the v1 API below the base URL.
pub const GCE_ROOT: &str = "/computeMetadata/v1";

/// The header every request carries and every answer must carry back.
pub const GCE_FLAVOR_HEADER: &str = "Metadata-Flavor";

/// The header's value.
pub const GCE_FLAVOR: &str = "Google";

/// The Google Compute Engine metadata client. One per wait is enough; it is `Sync`.
#[derive(Debug)]
pub struct Gce {
    endpoint: String,
    agent: Agent,
    timeouts: (Duration, Duration),
}

impl Default for Gce {
    fn default() -> Self {
        Self::new()
    }
}

impl Gce {
    /// A client for the default endpoint, 169.254.169.254.
    pub fn new() -> Self {
        Self {
            endpoint: GCE_ENDPOINT.to_owned(),
            agent: agent(IMDS_CONNECT_TIMEOUT, IMDS_REQUEST_TIMEOUT, None),
            timeouts: (IMDS_CONNECT_TIMEOUT, IMDS_REQUEST_TIMEOUT),
        }
    }

    /// Replaces the base URL (config `gce.endpoint`): `http://`, an IP literal, an
    /// optional port, no path.
    pub fn with_endpoint(mut self, url: &str) -> Result<Self> {
        self.endpoint = check_endpoint(url).map_err(|e| match e {
            Error::Argument { problem, .. } => Error::Argument {
                arg: "gce.endpoint".to_owned(),
                problem,
            },
            other => other,
        })?;
        Ok(self)
    }

    /// Replaces the per-request timeouts (connect 1 s, whole request 2 s).
    #[must_use]
    pub fn with_timeouts(mut self, connect: Duration, request: Duration) -> Self {
        self.timeouts = (connect, request);
        self.agent = agent(connect, request, None);
        self
    }

    /// The base URL.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// One `GET` of `path` (below the base URL, starting with `/`): a 200's body as
    /// `read` reads it, `None` for a 404, an error for anything else and for an
    /// answer without `Metadata-Flavor: Google`.
    fn get_with<T>(
        &self,
        path: &str,
        read: impl Fn(&mut Response<Body>) -> Result<T, ImdsErrorKind>,
    ) -> Result<Option<T>> {
        self.get_within(path, self.timeouts.1, read)
    }

    /// [`Self::get_with`] with the whole request's time limit `total` (the long
    /// poll's is minutes, [`live`]).
    fn get_within<T>(
        &self,
        path: &str,
        total: Duration,
        read: impl Fn(&mut Response<Body>) -> Result<T, ImdsErrorKind>,
    ) -> Result<Option<T>> {
        let url = format!("{}{path}", self.endpoint);
        let fail = |kind| Error::Imds {
            method: "GET",
            url: url.clone(),
            kind,
        };
        let deadline = Instant::now() + total;
        let left = deadline.saturating_duration_since(Instant::now());
        let resp = self
            .agent
            .get(&url)
            .config()
            .timeout_global(Some(left))
            .build()
            .header(GCE_FLAVOR_HEADER, GCE_FLAVOR)
            .call();
        crate::metrics::request("gce", resp.as_ref().ok().map(|r| r.status().as_u16()));
        let mut resp = resp.map_err(|e| fail(map_ureq_error(&e)))?;
        let status = resp.status().as_u16();
        log::debug!("GCE GET {url}: {status}");
        if matches!(status, 200 | 404) && !is_google(&resp) {
            drain(&mut resp);
            return Err(fail(ImdsErrorKind::Garbage {
                reason: format!(
                    "HTTP {status} without `{GCE_FLAVOR_HEADER}: {GCE_FLAVOR}`: not Google's metadata server"
                ),
            }));
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

/// Whether the answer says it is Google's (`Metadata-Flavor: Google`, exactly one).
fn is_google(resp: &Response<Body>) -> bool {
    let mut values = resp.headers().get_all(GCE_FLAVOR_HEADER).iter();
    matches!(
        (values.next(), values.next()),
        (Some(v), None) if v.to_str().is_ok_and(|v| v.trim() == GCE_FLAVOR)
    )
}

impl Fetch for Gce {
    fn get(&self, path: &str) -> Result<Option<String>> {
        self.get_with(path, |resp| read_body(resp, IMDS_MAX_BODY_BYTES))
    }

    fn get_bytes(&self, path: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        self.get_with(path, |resp| read_bytes(resp, limit))
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::source::loopback::{answer, serve};

    const GOOGLE: &str = "Metadata-Flavor: Google\r\n";

    #[test]
    fn sends_the_header_and_requires_it_back() {
        let (url, h) = serve(vec![
            answer("200 OK", GOOGLE, b"1234"),
            answer("404 Not Found", GOOGLE, b""),
            answer("200 OK", "", b"1234"),
            answer("404 Not Found", "", b""),
            answer("200 OK", "Metadata-Flavor: Amazon\r\n", b"1234"),
        ]);
        let g = Gce::new().with_endpoint(&url).unwrap();
        assert_eq!(
            g.get("/computeMetadata/v1/instance/id").unwrap().as_deref(),
            Some("1234")
        );
        assert_eq!(g.get("/computeMetadata/v1/instance/x").unwrap(), None);
        for _ in 0..3 {
            let e = g.get("/computeMetadata/v1/instance/id").unwrap_err();
            assert!(
                e.to_string().contains("not Google's metadata server"),
                "{e}"
            );
            assert!(!crate::source::provider::wait::is_retryable(&e));
        }
        let seen = h.join().unwrap();
        assert_eq!(seen.len(), 5);
        for r in &seen {
            assert!(
                r.to_ascii_lowercase()
                    .contains("metadata-flavor: google\r\n"),
                "{r}"
            );
        }
    }

    #[test]
    fn errors_are_errors_and_bodies_are_bounded() {
        let big = vec![b'a'; usize::try_from(IMDS_MAX_BODY_BYTES).unwrap() + 1];
        let (url, h) = serve(vec![
            answer("503 Service Unavailable", "Retry-After: 2\r\n", b""),
            answer("403 Forbidden", GOOGLE, b"missing header"),
            answer("200 OK", GOOGLE, &big),
            answer("200 OK", GOOGLE, b"\xff\xfe"),
        ]);
        let g = Gce::new().with_endpoint(&url).unwrap();
        let e = g.get("/a").unwrap_err();
        assert!(crate::source::provider::wait::is_retryable(&e), "{e}");
        assert_eq!(
            crate::source::provider::wait::retry_after(&e),
            Some(Duration::from_secs(2))
        );
        let e = g.get("/a").unwrap_err();
        assert!(e.to_string().contains("HTTP 403"), "{e}");
        let e = g.get("/a").unwrap_err();
        assert!(e.to_string().contains("larger than"), "{e}");
        let e = g.get("/a").unwrap_err();
        assert!(e.to_string().contains("not UTF-8"), "{e}");
        h.join().unwrap();
    }

    #[test]
    fn the_endpoint_is_an_http_ip_literal() {
        for bad in [
            "https://169.254.169.254",
            "http://metadata.google.internal",
            "http://1.2.3.4/x",
        ] {
            let e = Gce::new().with_endpoint(bad).unwrap_err().to_string();
            assert!(e.starts_with("argument gce.endpoint"), "{e}");
        }
        assert_eq!(Gce::new().endpoint(), GCE_ENDPOINT);
        assert_eq!(
            Gce::new()
                .with_endpoint("http://127.0.0.1:8080/")
                .unwrap()
                .endpoint(),
            "http://127.0.0.1:8080"
        );
    }
}

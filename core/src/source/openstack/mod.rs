// SPDX-License-Identifier: Apache-2.0
//! Performs IO: `OpenStack`'s metadata, over HTTP from Nova's metadata service
//! (through Neutron's proxy) or from a config drive (SPEC §4.4,
//! `reference/clouds-and-clusters.md` §2).
//!
//! * **Endpoint.** `http://169.254.169.254` ([`OPENSTACK_ENDPOINT`]), or the base
//!   URL given to [`OpenStack::with_endpoint`] (config `openstack.endpoint`): an
//!   `http://` IP literal. Paths start with `/openstack/latest/`
//!   ([`OPENSTACK_ROOT`]); no header is needed or sent beyond HTTP's own.
//! * **One request.** The same discipline as the EC2 client
//!   ([`crate::source::ec2`]): connect 1 s, whole request 2 s, one keep-alive
//!   agent, no proxy, no redirects, answers capped at 64 KiB and required to be
//!   UTF-8 (user-data: 1 MiB, bytes). Retrying belongs to the consistency wait
//!   ([`wait`]) and to the datasource's fetch ([`identity`]).
//! * **Fewest requests.** Neutron's metadata proxy may limit an instance to 10
//!   requests per 10 s (its `metadata_rate_limiting` defaults; it answers 429
//!   beyond them). One `network_data.json` per round of the wait answers every
//!   NIC at once ([`nic`]); a 429 is retried within the budget, never read as
//!   "empty". The boot stage adds `meta_data.json` and `user_data`.
//! * **The config drive.** With a file system labelled `config-2` ([`configdrive`])
//!   the same files are read from it, read-only, and the metadata service is not
//!   asked at all.

pub mod configdrive;
pub mod detect;
pub mod identity;
pub mod nic;
mod provider;
pub mod wait;

use std::time::{Duration, Instant};

use ureq::Agent;

use crate::constants::{IMDS_CONNECT_TIMEOUT, IMDS_MAX_BODY_BYTES, IMDS_REQUEST_TIMEOUT};
use crate::error::{Error, ImdsErrorKind, Result};
use crate::source::ec2::{
    Fetch, agent, check_endpoint, drain, http_error, map_ureq_error, read_body, read_bytes,
};

pub use provider::OpenStackProvider;
pub use provider::{CLOUD, SOURCE};

/// The metadata service's address.
pub const OPENSTACK_ENDPOINT: &str = "http://169.254.169.254";

/// The root of the `OpenStack` metadata API below the base URL (and the folder
/// on a config drive).
pub const OPENSTACK_ROOT: &str = "/openstack/latest";

/// `network_data.json` below [`OPENSTACK_ROOT`].
pub const NETWORK_DATA_PATH: &str = "/network_data.json";

/// `meta_data.json` below [`OPENSTACK_ROOT`].
pub const META_DATA_PATH: &str = "/meta_data.json";

/// `user_data` below [`OPENSTACK_ROOT`] (404: none).
pub const USER_DATA_PATH: &str = "/user_data";

/// The `OpenStack` metadata client. One per wait is enough; it is `Sync`.
#[derive(Debug)]
pub struct OpenStack {
    endpoint: String,
    agent: Agent,
    timeouts: (Duration, Duration),
}

impl Default for OpenStack {
    fn default() -> Self {
        Self::new()
    }
}

impl OpenStack {
    /// A client for the default endpoint, 169.254.169.254.
    pub fn new() -> Self {
        Self {
            endpoint: OPENSTACK_ENDPOINT.to_owned(),
            agent: agent(IMDS_CONNECT_TIMEOUT, IMDS_REQUEST_TIMEOUT, None),
            timeouts: (IMDS_CONNECT_TIMEOUT, IMDS_REQUEST_TIMEOUT),
        }
    }

    /// Replaces the base URL (config `openstack.endpoint`): `http://`, an IP
    /// literal, an optional port, no path.
    pub fn with_endpoint(mut self, url: &str) -> Result<Self> {
        self.endpoint = check_endpoint(url).map_err(|e| match e {
            Error::Argument { problem, .. } => Error::Argument {
                arg: "openstack.endpoint".to_owned(),
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
    /// `read` reads it, `None` for a 404, an error for anything else.
    fn get_with<T>(
        &self,
        path: &str,
        read: impl Fn(&mut ureq::http::Response<ureq::Body>) -> Result<T, ImdsErrorKind>,
    ) -> Result<Option<T>> {
        let url = format!("{}{path}", self.endpoint);
        let fail = |kind| Error::Imds {
            method: "GET",
            url: url.clone(),
            kind,
        };
        let deadline = Instant::now() + self.timeouts.1;
        let left = deadline.saturating_duration_since(Instant::now());
        let resp = self
            .agent
            .get(&url)
            .config()
            .timeout_global(Some(left))
            .build()
            .call();
        crate::metrics::request("openstack", resp.as_ref().ok().map(|r| r.status().as_u16()));
        let mut resp = resp.map_err(|e| fail(map_ureq_error(&e)))?;
        let status = resp.status().as_u16();
        log::debug!("OpenStack GET {url}: {status}");
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

impl Fetch for OpenStack {
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
    use crate::source::provider::wait::{is_retryable, retry_after};

    #[test]
    fn a_get_is_plain_and_404_is_absent() {
        let (url, h) = serve(vec![
            answer("200 OK", "", b"{\"links\":[]}"),
            answer("404 Not Found", "", b""),
        ]);
        let o = OpenStack::new().with_endpoint(&url).unwrap();
        assert_eq!(
            o.get("/openstack/latest/network_data.json")
                .unwrap()
                .as_deref(),
            Some("{\"links\":[]}")
        );
        assert_eq!(o.get("/openstack/latest/user_data").unwrap(), None);
        let seen = h.join().unwrap();
        assert!(
            seen[0].starts_with("GET /openstack/latest/network_data.json HTTP/1.1\r\n"),
            "{}",
            seen[0]
        );
        // No header of another cloud's metadata service.
        for r in &seen {
            let r = r.to_ascii_lowercase();
            assert!(!r.contains("metadata-flavor"), "{r}");
            assert!(!r.contains("x-aws-ec2-metadata-token"), "{r}");
        }
    }

    #[test]
    fn a_429_is_retryable_errors_are_errors_and_bodies_bounded() {
        let big = vec![b'a'; usize::try_from(IMDS_MAX_BODY_BYTES).unwrap() + 1];
        let (url, h) = serve(vec![
            // Neutron's rate limit (haproxy) answers 429 without Retry-After.
            answer("429 Too Many Requests", "", b"<html>429</html>"),
            answer("503 Service Unavailable", "Retry-After: 2\r\n", b""),
            answer("500 Internal Server Error", "", b""),
            answer("403 Forbidden", "", b""),
            answer("200 OK", "", &big),
            answer("200 OK", "", b"\xff\xfe"),
        ]);
        let o = OpenStack::new().with_endpoint(&url).unwrap();
        let e = o.get("/a").unwrap_err();
        assert!(is_retryable(&e), "{e}");
        assert_eq!(retry_after(&e), None);
        let e = o.get("/a").unwrap_err();
        assert!(is_retryable(&e), "{e}");
        assert_eq!(retry_after(&e), Some(Duration::from_secs(2)));
        let e = o.get("/a").unwrap_err();
        assert!(e.to_string().contains("HTTP 500"), "{e}");
        let e = o.get("/a").unwrap_err();
        assert!(e.to_string().contains("HTTP 403"), "{e}");
        assert!(!is_retryable(&e));
        let e = o.get("/a").unwrap_err();
        assert!(e.to_string().contains("larger than"), "{e}");
        let e = o.get("/a").unwrap_err();
        assert!(e.to_string().contains("not UTF-8"), "{e}");
        h.join().unwrap();
    }

    #[test]
    fn the_endpoint_is_an_http_ip_literal() {
        for bad in [
            "https://169.254.169.254",
            "http://metadata.openstack.internal",
            "http://1.2.3.4/openstack",
        ] {
            let e = OpenStack::new().with_endpoint(bad).unwrap_err().to_string();
            assert!(e.starts_with("argument openstack.endpoint"), "{e}");
        }
        assert_eq!(OpenStack::new().endpoint(), OPENSTACK_ENDPOINT);
        assert_eq!(
            OpenStack::new()
                .with_endpoint("http://127.0.0.1:8080/")
                .unwrap()
                .endpoint(),
            "http://127.0.0.1:8080"
        );
    }
}

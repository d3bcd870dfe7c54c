// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the metadata server's long poll on the NIC list (SPEC §3.10),
//! which `leasehook watch` follows on GCE.
//!
//! ```text
//! GET /computeMetadata/v1/instance/network-interfaces/?recursive=true
//!     &wait_for_change=true&last_etag=E&timeout_sec=S        Metadata-Flavor: Google
//! ```
//!
//! The server answers at once when the list's current `ETag` is not `E`, else
//! holds the request until the list changes or `S` seconds pass, then answers
//! the current list and its `ETag` ("Waiting for updates",
//! <https://cloud.google.com/compute/docs/metadata/querying-metadata#waitforchange>).
//! The first request carries no `wait_for_change` (there is no etag to wait on).
//!
//! * The HTTP request's time limit is the server's `timeout_sec` plus
//!   [`LONG_POLL_SLACK`]; connect is 1 s as every request's.
//! * An answer must carry `Metadata-Flavor: Google` and an `ETag` of
//!   [`MAX_ETAG`] characters at most from `[A-Za-z0-9._~-]` (it goes back in the
//!   query); its body is capped at 64 KiB and must be UTF-8. Anything else is an
//!   error: the caller backs off ([`Backoff`]) and asks again.

use std::time::Duration;

use crate::constants::IMDS_MAX_BODY_BYTES;
use crate::error::{Error, ImdsErrorKind, Result};
use crate::source::provider::http::read_body;

use super::{GCE_ROOT, Gce};

pub use crate::source::provider::live::Backoff;

/// The server-side hold of one long poll (`timeout_sec`).
pub const LONG_POLL_TIMEOUT: Duration = Duration::from_secs(180);

/// How much longer than `timeout_sec` the client waits for the answer.
pub const LONG_POLL_SLACK: Duration = Duration::from_secs(10);

/// The longest `ETag` accepted.
pub const MAX_ETAG: usize = 128;

/// One answer of the NIC list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Polled {
    /// Its `ETag`.
    pub etag: String,
    /// The JSON list, unparsed ([`super::change::Snapshot::parse`]).
    pub body: String,
}

/// The path (below the base URL) of one request: `last_etag` `None` asks at
/// once, else the server holds it up to `timeout`.
pub fn poll_path(last_etag: Option<&str>, timeout: Duration) -> String {
    let base = format!("{GCE_ROOT}/instance/network-interfaces/?recursive=true");
    match last_etag {
        None => base,
        Some(e) => format!(
            "{base}&wait_for_change=true&last_etag={e}&timeout_sec={}",
            timeout.as_secs().max(1)
        ),
    }
}

/// Whether `etag` may go back in the query as it is.
pub fn valid_etag(etag: &str) -> bool {
    !etag.is_empty()
        && etag.len() <= MAX_ETAG
        && etag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'-'))
}

impl Gce {
    /// One request of the long poll (see the module docs): the list and its
    /// `ETag`, when it differs from `last_etag` or `timeout` passed.
    pub fn poll_interfaces(&self, last_etag: Option<&str>, timeout: Duration) -> Result<Polled> {
        let path = poll_path(last_etag, timeout);
        let total = if last_etag.is_some() {
            timeout + LONG_POLL_SLACK
        } else {
            self.http.request_timeout()
        };
        let answer = self.http.get_within(&path, total, |resp| {
            let mut etags = resp.headers().get_all("etag").iter();
            let etag = match (etags.next(), etags.next()) {
                (Some(v), None) => v.to_str().unwrap_or_default().trim().to_owned(),
                (None, _) => String::new(),
                (Some(_), Some(_)) => {
                    return Err(ImdsErrorKind::Garbage {
                        reason: "two ETag headers".to_owned(),
                    });
                }
            };
            if !valid_etag(&etag) {
                return Err(ImdsErrorKind::Garbage {
                    reason: if etag.is_empty() {
                        "no ETag header".to_owned()
                    } else {
                        format!("ETag {etag:?} is not a short token")
                    },
                });
            }
            let body = read_body(resp, IMDS_MAX_BODY_BYTES)?;
            Ok(Polled { etag, body })
        })?;
        answer.ok_or_else(|| Error::Imds {
            method: "GET",
            url: format!("{}{path}", self.endpoint()),
            kind: ImdsErrorKind::Http {
                status: 404,
                retry_after: None,
            },
        })
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::source::loopback::{self, serve};

    #[test]
    fn the_path_waits_only_with_an_etag() {
        let t = Duration::from_secs(180);
        assert_eq!(
            poll_path(None, t),
            "/computeMetadata/v1/instance/network-interfaces/?recursive=true"
        );
        assert_eq!(
            poll_path(Some("ab12"), t),
            "/computeMetadata/v1/instance/network-interfaces/?recursive=true\
             &wait_for_change=true&last_etag=ab12&timeout_sec=180"
        );
        assert!(poll_path(Some("x"), Duration::ZERO).ends_with("timeout_sec=1"));
    }

    #[test]
    fn etags_are_short_tokens() {
        for ok in ["7e2c5c3e5d8c2d3a", "a", "A-b_c.d~e"] {
            assert!(valid_etag(ok), "{ok}");
        }
        let long = "a".repeat(MAX_ETAG + 1);
        for bad in ["", "\"abc\"", "a b", "a&b=c", "é", long.as_str()] {
            assert!(!valid_etag(bad), "{bad}");
        }
    }

    fn answer(headers: &str, body: &str) -> Vec<u8> {
        loopback::answer(
            "200 OK",
            &format!("Metadata-Flavor: Google\r\n{headers}"),
            body.as_bytes(),
        )
    }

    #[test]
    fn answers_need_an_etag_and_the_flavor() {
        let (url, server) = serve(vec![
            answer("ETag: 1a2b\r\n", "[]"),
            answer("", "[]"),
            answer("ETag: \"q\"\r\n", "[]"),
            answer("ETag: a\r\nETag: b\r\n", "[]"),
            loopback::answer("200 OK", "ETag: 1a2b\r\n", b"[]"),
            loopback::answer(
                "500 Internal Server Error",
                "Metadata-Flavor: Google\r\n",
                b"",
            ),
        ]);
        let g = Gce::new().with_endpoint(&url).unwrap();
        let hold = Duration::from_secs(5);
        let p = g.poll_interfaces(Some("0f"), hold).unwrap();
        assert_eq!(
            p,
            Polled {
                etag: "1a2b".to_owned(),
                body: "[]".to_owned()
            }
        );
        for want in [
            "no ETag header",
            "is not a short token",
            "two ETag headers",
            "not Google's metadata server",
            "HTTP 500",
        ] {
            let e = g.poll_interfaces(Some("0f"), hold).unwrap_err().to_string();
            assert!(e.contains(want), "{want}: {e}");
        }
        let seen = server.join().unwrap();
        assert!(
            seen[0].starts_with(
                "GET /computeMetadata/v1/instance/network-interfaces/?recursive=true\
                 &wait_for_change=true&last_etag=0f&timeout_sec=5 "
            ),
            "{}",
            seen[0]
        );
        assert!(
            seen[0]
                .to_ascii_lowercase()
                .contains("metadata-flavor: google")
        );
    }
}

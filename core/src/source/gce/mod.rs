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
//! * **One request.** The seam's client ([`crate::source::provider::http`]):
//!   connect 1 s, whole request 2 s, one keep-alive agent, no proxy, no
//!   redirects, answers capped at 64 KiB and required to be UTF-8 (user-data: 1
//!   MiB, bytes). Retrying belongs to the consistency wait ([`wait`]) and to the
//!   datasource's fetch ([`identity`]).
//! * **Fewest requests.** One `instance/network-interfaces/?recursive=true` per
//!   round of the wait answers every NIC at once ([`nic`]); the boot stage adds
//!   `instance/id`, `instance/hostname`, `instance/zone` and the user-data
//!   attributes; a refresh of every NIC adds
//!   `instance/vlan-network-interfaces/?recursive=true`, the Dynamic NICs
//!   ([`vlan`]).
//! * **Live.** `leasehook watch` follows the NIC list with the server's long poll
//!   (`wait_for_change=true&last_etag=E`, one request held for minutes, [`live`]);
//!   which NICs an answer changed is [`change`]'s pure decision.

pub mod change;
pub mod detect;
mod follow;
pub mod identity;
pub mod live;
pub mod nic;
mod provider;
pub mod services;
pub mod vlan;
pub mod wait;

use ureq::Body;
use ureq::http::Response;

use crate::error::{ImdsErrorKind, Result};
use crate::source::provider::http::{Service, metadata_client};

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

/// Google's metadata server, to the seam's HTTP client.
const SERVICE: Service = Service::new("gce", "GCE", &[GCE_ENDPOINT], "gce.endpoint")
    .with_headers(&[(GCE_FLAVOR_HEADER, GCE_FLAVOR)])
    .vouched_by(is_google);

metadata_client!(
    /// The Google Compute Engine metadata client. One per wait is enough; it is `Sync`.
    Gce,
    SERVICE
);

/// Whether the answer says it is Google's (`Metadata-Flavor: Google`, exactly
/// one): a 200 or a 404 without it did not come from Google's metadata server.
fn is_google(resp: &Response<Body>) -> Result<(), ImdsErrorKind> {
    let mut values = resp.headers().get_all(GCE_FLAVOR_HEADER).iter();
    if matches!(
        (values.next(), values.next()),
        (Some(v), None) if v.to_str().is_ok_and(|v| v.trim() == GCE_FLAVOR)
    ) {
        return Ok(());
    }
    Err(ImdsErrorKind::Garbage {
        reason: format!(
            "HTTP {} without `{GCE_FLAVOR_HEADER}: {GCE_FLAVOR}`: not Google's metadata server",
            resp.status().as_u16()
        ),
    })
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::source::loopback::{answer, serve};
    use crate::source::provider::fake::{endpoint_rows, status_rows};
    use crate::source::provider::http::Fetch;

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
        status_rows(GOOGLE, |url| Gce::new().with_endpoint(url).unwrap());
    }

    #[test]
    fn the_endpoint_is_an_http_ip_literal() {
        assert_eq!(Gce::new().endpoint(), GCE_ENDPOINT);
        endpoint_rows("gce.endpoint", |u| {
            Ok(Gce::new().with_endpoint(u)?.endpoints().to_vec())
        });
    }
}

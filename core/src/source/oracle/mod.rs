// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the Oracle Cloud Infrastructure (OCI) instance metadata service
//! client, IMDS version 2, over HTTP (SPEC §4.4, `reference/clouds-and-clusters.md`
//! §2).
//!
//! * **Endpoints.** `http://169.254.169.254`, then `http://[fd00:c1::a9fe:a9fe]`
//!   (OCI's IPv6 address of the same service, [`ENDPOINTS`]), with the seam's
//!   client's discipline ([`crate::source::provider::http`]): when one cannot be connected to the next is tried, and
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
#[cfg(test)]
mod hook_tests;
pub mod identity;
mod provider;
pub mod services;
pub mod vnic;
pub mod wait;

use crate::error::Result;
use crate::source::provider::http::{Service, check_endpoint_for, metadata_client};

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

/// OCI's metadata service, to the seam's HTTP client.
const SERVICE: Service = Service::new("oracle", "OCI IMDS", &ENDPOINTS, ENDPOINT_KEY)
    .with_headers(&[AUTH_HEADER])
    .spending("whole request (endpoint fallback included)");

metadata_client!(
    /// The OCI metadata client. One per wait is enough; it is `Sync`.
    Oracle,
    SERVICE
);

/// Checks an `oracle.endpoint` value: `http://`, an IP literal, no path.
pub fn check_endpoint(url: &str) -> Result<String> {
    check_endpoint_for(url, ENDPOINT_KEY)
}

#[cfg(test)]
mod tests {

    use std::net::TcpListener;

    use super::*;
    use crate::source::loopback::{answer, serve};
    use crate::source::provider::fake::{endpoint_rows, status_rows};
    use crate::source::provider::http::{Fetch, Http};
    use crate::source::provider::wait::is_retryable;

    #[test]
    fn every_request_carries_the_header_and_statuses_mean_what_they_say() {
        let (url, h) = serve(vec![answer("401 Unauthorized", "", b"{}")]);
        let o = Oracle::new().with_endpoint(&url).unwrap();
        let e = o.get(VNICS_PATH).unwrap_err();
        assert!(e.to_string().contains("HTTP 401"), "{e}");
        assert!(!is_retryable(&e), "{e}");
        let mut seen = h.join().unwrap();
        seen.extend(status_rows("", |url| {
            Oracle::new().with_endpoint(url).unwrap()
        }));
        assert_eq!(seen.len(), 9);
        for r in &seen {
            assert!(r.starts_with("GET /"), "{r}");
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
        let o = Oracle {
            http: Http::new(SERVICE)
                .with_endpoints([dead_url, live.clone()])
                .unwrap(),
        };
        assert_eq!(o.get(VNICS_PATH).unwrap().as_deref(), Some("[1]"));
        assert_eq!(o.endpoint(), live);
        assert_eq!(o.get(VNICS_PATH).unwrap().as_deref(), Some("[2]"));
        assert_eq!(h.join().unwrap().len(), 2);
    }

    #[test]
    fn the_endpoints_are_v4_then_v6_and_an_override_is_an_http_ip_literal() {
        assert_eq!(
            Oracle::new().endpoints(),
            ["http://169.254.169.254", "http://[fd00:c1::a9fe:a9fe]"]
        );
        endpoint_rows("oracle.endpoint", |u| {
            Ok(Oracle::new().with_endpoint(u)?.endpoints().to_vec())
        });
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the EC2 instance metadata service (IMDS) client, over HTTP, with its
//! token cached under `<root>/run/leasehook/` (SPEC §4.1). The client is the
//! provider seam's token-session client ([`Imdsv2`], over
//! [`crate::source::provider::http`]) with EC2's dialect (`EC2`):
//!
//! * **IMDSv2.** A session token is `PUT` once (`/latest/api/token`, six hours) and
//!   sent with every `GET`. It is cached on disk (`<root>/run/leasehook/imds-token`,
//!   mode 0600, replaced atomically, never through a symlink) so the next hook
//!   process reuses it, and it is replaced when IMDS answers 401. A 403 on the token request
//!   means the instance's metadata endpoint is switched off:
//!   [`crate::error::ImdsErrorKind::Disabled`], and no IMDSv1 unless
//!   [`Ec2::with_imdsv1_fallback`] asked for it.
//! * **Endpoints.** `http://169.254.169.254`, then `http://[fd00:ec2::254]`
//!   ([`IMDS_ENDPOINTS`]), or the list given to [`Ec2::with_endpoints`]. When one
//!   cannot be connected to, the next is tried, and the one that answered is used
//!   first from then on. Base URLs must name an IP literal: there is no DNS.
//! * **One request.** Connect 1 s, whole request 2 s, one keep-alive connection
//!   (one ureq agent), no proxy, no redirects, answers capped at 64 KiB and required
//!   to be UTF-8. [`Fetch::get`] makes one attempt (plus one token refresh on 401),
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

pub mod detect;
pub mod identity;
pub mod nic;
mod provider;
pub mod services;
pub mod wait;

use std::path::Path;

use crate::constants::{IMDS_ENDPOINTS, IMDS_TOKEN_CACHE_NAME, IMDS_TOKEN_PATH};
use crate::error::Result;
use crate::source::provider::http::Service;
use crate::source::provider::imdsv2::{Dialect, Imdsv2};

pub use crate::source::provider::http::Fetch;
pub use nic::NicEvent;
pub use provider::Ec2Provider;
pub use provider::{CLOUD, SOURCE};
pub use wait::{Clock, EC2_WAIT, Outcome, SystemClock, WaitPolicy};

/// EC2's IMDS (SPEC §4.1).
pub(crate) const EC2: Dialect = Dialect {
    service: Service::new("ec2", "IMDS", &IMDS_ENDPOINTS, "imds.endpoints")
        .spending("whole request (token exchange included)"),
    token_path: IMDS_TOKEN_PATH,
    // The token's lifetime is asked with the first header, and the token sent
    // back on every `GET` with the second.
    ttl_header: "X-aws-ec2-metadata-token-ttl-seconds",
    token_header: "X-aws-ec2-metadata-token",
    cache_name: IMDS_TOKEN_CACHE_NAME,
};

/// The EC2 IMDS client: the provider seam's token-session client
/// ([`Imdsv2`]) with EC2's dialect. One per process is enough; it is `Sync`.
pub type Ec2 = Imdsv2;

impl Imdsv2 {
    /// An EC2 client for the default endpoints whose token cache lives under
    /// `root` (`/` in production: `/run/leasehook/imds-token`).
    pub fn try_new(root: impl AsRef<Path>) -> Result<Self> {
        Ok(Self::with_dialect(root, EC2))
    }

    /// The consistency wait for one NIC event, with the real clock: see
    /// [`wait::EC2_WAIT`].
    pub fn wait_for_nic(&self, event: &NicEvent, policy: &WaitPolicy) -> Outcome {
        EC2_WAIT.wait(self, event, policy, &SystemClock)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::error::{Error, ImdsErrorKind};

    #[test]
    fn endpoints_must_be_http_ip_literals() {
        let root = tempfile::tempdir().unwrap();
        let ok = Ec2::try_new(root.path())
            .unwrap()
            .with_endpoints(["http://127.0.0.1:8080/", "http://[::1]:9"])
            .unwrap();
        assert_eq!(ok.endpoints(), ["http://127.0.0.1:8080", "http://[::1]:9"]);
        crate::source::provider::fake::endpoint_rows("imds.endpoints", |u| {
            Ok(Ec2::try_new(root.path())?
                .with_endpoints([u])?
                .endpoints()
                .to_vec())
        });
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

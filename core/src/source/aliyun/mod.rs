// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the Alibaba Cloud ECS instance metadata client, over HTTP, with
//! its hardened-mode token cached under `<root>/run/leasehook/` (SPEC §4.4).
//!
//! ECS's metadata service is EC2's IMDS in shape (`/latest/meta-data/`, one leaf
//! per key, `macs/<mac>/` folders) at `http://100.100.100.200`, and its hardened
//! ("security hardening") mode is IMDSv2 with its own header names: a token is
//! `PUT` to `/latest/api/token` with `X-aliyun-ecs-metadata-token-ttl-seconds`
//! (six hours, the most it grants) and sent as `X-aliyun-ecs-metadata-token` on
//! every `GET`. So [`Aliyun`] is the provider seam's token-session client
//! ([`Imdsv2`], EC2's too) with Alibaba's dialect, and it keeps every one of its rules:
//!
//! * the token is cached in `<root>/run/leasehook/aliyun-token` (0600, atomic,
//!   never through a symlink, EC2's token file left alone), replaced when the
//!   service answers 401; a 403 on the token request is
//!   [`crate::error::ImdsErrorKind::Disabled`] (the metadata service switched off
//!   for the instance). A token is asked for in normal mode too: the service
//!   accepts it there, and one client then works in both modes;
//! * connect 1 s, whole request 2 s (the token dance included), one keep-alive
//!   connection, no proxy, no redirects, answers capped at 64 KiB and UTF-8, base
//!   URLs naming an IP literal (no DNS);
//! * per-NIC binding (`imds.bind_interface`): each NIC's requests leave through
//!   that NIC, from its leased address;
//! * the fewest requests: [`nic`] decides what one NIC event needs (five `GET`s
//!   when the metadata agrees), [`wait`] drives the consistency wait over it,
//!   [`identity`] is the boot stage's datasource.
//!
//! The token never appears in a log line or an error.

pub mod detect;
pub mod identity;
pub mod nic;
mod provider;
pub mod services;
pub mod wait;

use std::path::Path;
use std::time::Duration;

use crate::constants::IMDS_TOKEN_PATH;
use crate::error::Result;
use crate::source::provider::http::{Fetch, Service, check_endpoint_for};
use crate::source::provider::imdsv2::{Dialect, Imdsv2};

pub use identity::AliyunSource;
pub use provider::AliyunProvider;
pub use provider::{CLOUD, SOURCE};
pub use wait::ECS_WAIT;

/// The configuration key of the endpoint override.
pub const ENDPOINT_KEY: &str = "aliyun.endpoint";

/// The ECS metadata service's base URL (normal and hardened mode alike).
pub const ENDPOINTS: [&str; 1] = ["http://100.100.100.200"];

/// Alibaba's dialect of the EC2 client.
const ALIYUN: Dialect = Dialect {
    service: Service::new("aliyun", "IMDS", &ENDPOINTS, ENDPOINT_KEY)
        .spending("whole request (token exchange included)"),
    token_path: IMDS_TOKEN_PATH,
    // Hardened mode: the token (`PUT` to EC2's path) is asked for 1 to 21600 s
    // with the first header, and sent back on every `GET` with the second.
    ttl_header: "X-aliyun-ecs-metadata-token-ttl-seconds",
    token_header: "X-aliyun-ecs-metadata-token",
    // Its cache in the run folder: not EC2's, another service's token.
    cache_name: "aliyun-token",
};

/// The ECS metadata client. One per process is enough; it is `Sync`.
#[derive(Debug)]
pub struct Aliyun {
    inner: Imdsv2,
}

impl Aliyun {
    /// A client for `http://100.100.100.200` whose token cache lives under `root`
    /// (`/` in production: `/run/leasehook/aliyun-token`).
    pub fn try_new(root: impl AsRef<Path>) -> Result<Self> {
        Ok(Self {
            inner: Imdsv2::with_dialect(root, ALIYUN),
        })
    }

    /// Replaces the endpoint (config `aliyun.endpoint`): an `http://` base URL
    /// whose host is an IP literal.
    pub fn with_endpoint(self, endpoint: &str) -> Result<Self> {
        Ok(Self {
            inner: self.inner.with_endpoints([endpoint])?,
        })
    }

    /// Replaces the per-request timeouts (connect 1 s, whole request 2 s).
    #[must_use]
    pub fn with_timeouts(self, connect: Duration, request: Duration) -> Self {
        Self {
            inner: self.inner.with_timeouts(connect, request),
        }
    }

    /// Sends every request through interface `device`, from `source` (that NIC's
    /// leased address).
    #[must_use]
    pub fn with_interface(self, device: &str, source: Option<std::net::IpAddr>) -> Self {
        Self {
            inner: self.inner.with_interface(device, source),
        }
    }

    /// Keeps the token in memory only.
    #[must_use]
    pub fn without_token_cache(self) -> Self {
        Self {
            inner: self.inner.without_token_cache(),
        }
    }

    /// The base URL asked.
    pub fn endpoint(&self) -> &str {
        self.inner.active_endpoint()
    }
}

impl Fetch for Aliyun {
    /// One `GET` with the token (a new one once on 401): 200 is the body, 404 is
    /// `None`, anything else an error.
    fn get(&self, path: &str) -> Result<Option<String>> {
        self.inner.get(path)
    }

    fn get_bytes(&self, path: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        self.inner.get_bytes(path, limit)
    }
}

/// Checks an `aliyun.endpoint` value: `http://`, an IP literal, no path.
pub fn check_endpoint(url: &str) -> Result<String> {
    check_endpoint_for(url, ENDPOINT_KEY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::provider::fake::endpoint_rows;

    #[test]
    fn endpoints_are_checked_under_the_aliyun_key() {
        let root = tempfile::tempdir().unwrap();
        let c = Aliyun::try_new(root.path()).unwrap();
        assert_eq!(c.endpoint(), "http://100.100.100.200");
        endpoint_rows("aliyun.endpoint", |u| {
            let c = Aliyun::try_new(root.path())?.with_endpoint(u)?;
            Ok(vec![c.endpoint().to_owned()])
        });
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: `OpenStack`'s metadata, over HTTP from Nova's metadata service
//! (through Neutron's proxy) or from a config drive (SPEC §4.4,
//! `reference/clouds-and-clusters.md` §2).
//!
//! * **Endpoint.** `http://169.254.169.254` ([`OPENSTACK_ENDPOINT`]), or the base
//!   URL given to [`OpenStack::with_endpoint`] (config `openstack.endpoint`): an
//!   `http://` IP literal. Paths start with `/openstack/latest/`
//!   ([`OPENSTACK_ROOT`]); no header is needed or sent beyond HTTP's own.
//! * **One request.** The seam's client
//!   ([`crate::source::provider::http`]): connect 1 s, whole request 2 s, one keep-alive
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
pub mod services;
pub mod wait;

use crate::source::provider::http::{Service, metadata_client};

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

/// Nova's metadata service, to the seam's HTTP client: no header of its own.
const SERVICE: Service = Service::new(
    "openstack",
    "OpenStack",
    &[OPENSTACK_ENDPOINT],
    "openstack.endpoint",
);

metadata_client!(
    /// The `OpenStack` metadata client. One per wait is enough; it is `Sync`.
    OpenStack,
    SERVICE
);

#[cfg(test)]
mod tests {

    use super::*;
    use crate::source::provider::fake::{endpoint_rows, status_rows};

    #[test]
    fn a_get_is_plain_a_429_is_retryable_and_bodies_are_bounded() {
        // Neutron's rate limit (haproxy) answers 429 without Retry-After.
        let seen = status_rows("", |url| OpenStack::new().with_endpoint(url).unwrap());
        // No header of another cloud's metadata service.
        for r in &seen {
            let r = r.to_ascii_lowercase();
            assert!(!r.contains("metadata-flavor"), "{r}");
            assert!(!r.contains("x-aws-ec2-metadata-token"), "{r}");
        }
    }

    #[test]
    fn the_endpoint_is_an_http_ip_literal() {
        assert_eq!(OpenStack::new().endpoint(), OPENSTACK_ENDPOINT);
        endpoint_rows("openstack.endpoint", |u| {
            Ok(OpenStack::new().with_endpoint(u)?.endpoints().to_vec())
        });
    }
}

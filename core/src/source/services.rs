// SPDX-License-Identifier: Apache-2.0
//! Pure: every cloud's own metadata-service addresses, gathered for the address
//! gate ([`crate::gate::metadata_services`]). Each cloud declares its addresses
//! in its folder (`<cloud>/services.rs`), beside the shared link-local address,
//! which the gate holds itself.
//!
//! Apart from [`crate::source`]'s rows ([`crate::source::CLOUDS`]): the gate is
//! pure and below the model, which the sources import, so it can read a list of
//! constants but not the clouds' rows. Both are built from the one list of
//! clouds (`source/clouds.rs`).

use std::net::IpAddr;

use super::clouds::for_each_cloud;

/// Declares [`CLOUD_SERVICES`] from the list of cloud folders.
macro_rules! services {
    ($($cloud:ident),+ $(,)?) => {
        /// The clouds' own metadata-service addresses, each with whose service
        /// it is, one list per cloud.
        pub const CLOUD_SERVICES: &[&[(IpAddr, &str)]] =
            &[$(super::$cloud::services::SERVICES),+];
    };
}

for_each_cloud!(services);

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::CLOUD_SERVICES;
    use crate::gate::{Refusal, check_ip, metadata_services};

    /// The gate refuses every cloud's own address as the service's, and the
    /// union is the table the gate held before the clouds declared their own
    /// (so no cloud's address went missing on the way).
    #[test]
    fn every_clouds_service_address_is_refused_as_its_own() {
        assert_eq!(CLOUD_SERVICES.len(), crate::source::CLOUDS.len());
        let mut all: Vec<String> = metadata_services().map(|(a, _)| a.to_string()).collect();
        all.sort();
        assert_eq!(
            all,
            [
                "100.100.100.200",
                "168.63.129.16",
                "169.254.169.254",
                "fd00:c1::a9fe:a9fe",
                "fd00:ec2::123",
                "fd00:ec2::253",
                "fd00:ec2::254",
            ]
        );
        for (a, s) in metadata_services() {
            match check_ip(*a) {
                Err(Refusal::MetadataService {
                    address,
                    service,
                    covers: false,
                }) if address == *a && service == *s => {}
                other => panic!("{a} ({s}): {other:?}"),
            }
        }
        let wire: IpAddr = "168.63.129.16".parse().unwrap();
        assert!(
            CLOUD_SERVICES
                .iter()
                .any(|c| c.iter().any(|(a, _)| *a == wire))
        );
    }
}

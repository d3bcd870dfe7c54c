// SPDX-License-Identifier: Apache-2.0
//! Pure: the one list of the clouds' folders. What is built for every cloud is
//! built from it: the rows ([`crate::source::CLOUDS`],
//! [`crate::source::CLOUD_SOURCES`]) and, for the pure address gate, which
//! cannot read the rows, the metadata services' addresses
//! ([`crate::source::services`]). A cloud joins them all by its one entry here.

/// Calls the macro `$then` with every cloud folder, in order: `$then![ec2, …]`.
/// The first is the one `provider: auto` falls back to when no verdict names a
/// cloud.
macro_rules! for_each_cloud {
    ($then:ident) => {
        $then![ec2, gce, azure, aliyun, oracle, openstack];
    };
}

pub(crate) use for_each_cloud;

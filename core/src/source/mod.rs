// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the metadata sources, which talk to the cloud (HTTP, the LXD unix
//! socket), read seed files, and keep small caches under `<root>/run/leasehook/`.
//!
//! Each source keeps its transport apart from what it decides: [`ec2::nic`] decides
//! what to ask IMDS next and whether its answers agree with a lease without doing any
//! IO, and [`ec2::Ec2`] only moves bytes. Everything a source touches (base URLs, the
//! root folder, the clock) is handed to it by the caller.
//!
//! Every cloud is a folder with a row ([`provider::Cloud`], the boot stage's
//! [`provider::CloudSource`]); [`CLOUDS`] and [`CLOUD_SOURCES`] list them, built
//! from the one list of the folders (`clouds.rs`), and nothing outside a cloud's
//! folder names it but that list and its `mod` line.
//!
//! The datasources are a closed set, [`SourceKind`]; each implements [`Datasource`]
//! (detect from a snapshot of files, fetch [`InstanceData`], check the instance-id).
//! [`detect`] decides, without network, which of them the instance has.

pub mod aliyun;
pub mod azure;
mod clouds;
pub mod detect;
pub mod ec2;
pub(crate) mod files;
pub mod gce;
mod instance;
mod kind;
#[cfg(test)]
pub(crate) mod loopback;
pub mod lxd;
pub mod nocloud;
mod none;
pub mod openstack;
pub mod oracle;
pub mod provider;
pub mod services;
mod yaml;

pub use instance::{
    InstanceData, META_DATA_CARRIES_USER_VALUE, REDACTED, SENSITIVE_KEYS, contextual_sensitive,
    is_sensitive,
};
#[cfg(test)]
pub(crate) use kind::short;
pub use kind::{Check, Datasource, Finding, SourceKind};
pub use none::{NONE_INSTANCE_ID, NoneSource};

/// Declares [`CLOUDS`] and [`CLOUD_SOURCES`] from the list of cloud folders
/// (`clouds.rs`), so that a cloud joins both in the same order.
macro_rules! clouds {
    ($($cloud:ident),+ $(,)?) => {
        /// Every cloud's row, for the hooks, `refresh`, `plan` and the
        /// configuration. The first is the one `provider: auto` falls back to
        /// when no verdict names a cloud.
        pub static CLOUDS: [&provider::Cloud; [$(stringify!($cloud)),+].len()] =
            [$(&$cloud::CLOUD),+];

        /// Every cloud's datasources, for the boot stage (apart from [`CLOUDS`]:
        /// the hook binary does not link them).
        pub static CLOUD_SOURCES: [&provider::CloudSource; CLOUDS.len()] =
            [$(&$cloud::SOURCE),+];
    };
}

// The clouds, each a folder declared above with its row in its `provider.rs`.
clouds::for_each_cloud!(clouds);

/// Every cloud's region refinements of its instance-data `cloud_id`
/// ([`provider::CloudSource::region_ids`]), for the documents: each names the
/// cloud it applies to, so together they are cloud-init's one table, whichever
/// datasource the data came from.
pub fn region_ids() -> Vec<crate::instance_data::RegionId> {
    CLOUD_SOURCES
        .iter()
        .flat_map(|c| c.region_ids)
        .copied()
        .collect()
}

/// The row of the cloud that answers the datasource `kind`, if one does.
pub fn cloud_source(kind: SourceKind) -> Option<&'static provider::CloudSource> {
    CLOUD_SOURCES
        .iter()
        .find(|c| c.cloud.kinds.contains(&kind))
        .copied()
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the metadata sources, which talk to the cloud (HTTP) and keep small
//! caches under `<root>/run/leasehook/`.
//!
//! Each source keeps its transport apart from what it decides: [`ec2::nic`] decides
//! what to ask IMDS next and whether its answers agree with a lease without doing any
//! IO, and [`ec2::Ec2`] only moves bytes. Everything a source touches (base URLs, the
//! root folder, the clock) is handed to it by the caller.

pub mod ec2;

// SPDX-License-Identifier: Apache-2.0
//! # leasehook-core
//!
//! The pure core of leasehook: it turns a DHCP lease plus the cloud's instance
//! metadata into a source policy-routing plan.
//!
//! Data flows one way: **event → model → plan → diff → apply**.
//!
//! * [`event`] parses DHCP clients' hook environments and lease files into a
//!   [`model::LeaseEvent`];
//! * [`metadata`] parses an IMDS `meta-data/` tree into a [`model::InstanceNetwork`];
//! * [`plan`] computes a [`model::Plan`] for the `ec2-net-utils` or `cloud-init` scheme;
//! * [`diff`] compares a plan with the routing state the kernel holds;
//! * [`render`] prints a plan as `ip` lines, JSON, netplan or networkd drop-ins.
//!
//! Every module here is pure: no files, sockets, clock or environment. IO lives in the
//! binaries and, later, in the sources and the applier, behind seams they are handed.

#![deny(missing_docs)]

pub mod constants;
pub mod diff;
pub mod error;
pub mod event;
pub mod example;
pub mod metadata;
pub mod model;
pub mod plan;
pub mod render;

pub use error::{Error, Result};

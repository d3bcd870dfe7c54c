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
//! * [`gate`] decides what may ever be a rule source or an address leasehook adds
//!   (the planner, the apply validator and every lease parser ask it);
//! * [`explain`] says why an address is or is not routed (`leasehook explain`);
//! * [`diff`] compares a plan with the routing state the kernel holds;
//! * [`render`] prints a plan as `ip` lines, JSON, netplan or networkd drop-ins;
//! * [`apply`] writes a plan to the kernel over netlink, owned, diffed and rolled back;
//! * [`source`] fetches metadata: the EC2 IMDS client and its consistency wait, and
//!   the datasources (EC2, LXD, NoCloud) with [`source::detect`], which decides
//!   without network which of them the instance has;
//! * [`boot`] runs the boot stages: the fallback to the datasource [`cache`], and
//!   [`instance_data`], which [`query`] reads.
//!
//! * [`config`] merges the configuration files, environment and flags;
//! * [`metrics`] counts events, requests, waits, refusals and conflicts across
//!   processes and prints them in the Prometheus text format;
//! * [`hook`] runs one DHCP event end to end for every client's hook (the hook
//!   binary in the `leasehook` crate reads the command line and environment and sets
//!   up logging; the library only uses the `log` macros).
//!
//! The parsers, the planner, the diff and the renderers are pure: no files,
//! sockets, clock or environment. IO lives in [`source`], [`boot`], [`cache`],
//! [`apply::netlink`], [`apply::state`], [`commit`], [`hook`] and [`config::load`],
//! and in the binaries, behind seams they are handed (the [`apply::Applier`] trait,
//! base URLs, a root prefix for every path, a clock).

#![deny(missing_docs)]

pub mod apply;
pub mod boot;
pub mod cache;
pub mod cadence;
pub mod coexist;
pub mod commit;
pub mod config;
pub mod constants;
pub mod diff;
pub mod error;
pub mod event;
pub mod example;
pub mod explain;
pub mod fs;
pub mod gate;
pub mod heal;
pub mod hook;
pub mod instance_data;
pub mod kubernetes;
pub mod metadata;
pub mod metrics;
pub mod model;
pub mod plan;
pub mod query;
pub mod render;
pub mod source;

pub use error::{Error, Result};

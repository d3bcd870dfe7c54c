// SPDX-License-Identifier: Apache-2.0
//! The boot stage: `leasehook init --local` and `leasehook init` find the
//! instance's datasource, cache it, fall back to the cache when no datasource
//! answers, and write instance-data (SPEC §5).
//!
//! * [`decide`] (pure): which stage tries which datasource, whether the cache may
//!   stand in, and why not;
//! * [`config`] (pure): the boot stage's configuration keys;
//! * [`crate::fs`] (performs IO, shared with the hooks): files below leasehook's
//!   folders, never through a symlink, written atomically;
//! * [`crate::cache`] (performs IO; its record is pure): `/var/lib/leasehook` —
//!   records, the `instance` link, `data/instance-id`, `data/previous-instance-id`;
//! * [`state`] (performs IO): `/run/leasehook/boot.json`, the verdict the local
//!   stage hands to the network stage;
//! * [`run`] (performs IO): one stage end to end.
//!
//! What goes into instance-data is [`crate::instance_data`] (pure); how
//! `leasehook query` reads it is [`crate::query`] (pure).

pub mod config;
pub mod decide;
pub mod run;
pub mod state;

pub use crate::instance_data::{Origin, Stage};

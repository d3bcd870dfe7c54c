// SPDX-License-Identifier: Apache-2.0
//! `leasehook status --format prometheus`, and the metrics a `refresh` leaves:
//! the CLI's side of [`leasehook_core::metrics`].

use std::path::Path;

use leasehook_core::apply::Applier;
use leasehook_core::apply::netlink::NetlinkApplier;
use leasehook_core::config::Settings;
use leasehook_core::hook::{self, HookConfig};
use leasehook_core::metrics;

/// The metrics in the Prometheus text format: the stored counters, the records,
/// and the drift against the kernel (left out, with a warning, when netlink
/// cannot be asked).
pub(crate) fn prometheus(root: &Path) -> String {
    match NetlinkApplier::try_new() {
        Ok(mut k) => metrics::render(root, Some(&mut k as &mut dyn Applier)),
        Err(e) => {
            log::warn!("metrics: {e}; drift not shown");
            metrics::render(root, None)
        }
    }
}

/// After a `refresh`: adds what it counted (metadata requests, refusals,
/// conflicts, successes) to the stored counters and rewrites `metrics.textfile`.
/// Nothing when the hooks are inert (`enabled: false`, no datasource): then
/// `refresh` does nothing, and writes nothing either.
pub(crate) fn flush(settings: &Settings) {
    if hook::inert(&HookConfig::from_settings(settings)).is_some() {
        return;
    }
    metrics::flush(&settings.root, settings.metrics_textfile.as_deref());
}

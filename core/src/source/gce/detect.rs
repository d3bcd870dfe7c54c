// SPDX-License-Identifier: Apache-2.0
//! Pure: Google Compute Engine's datasource check, as ds-identify's `dscheck_GCE`. Moved from `source::detect`, which asks it through the
//! cloud's row.

use crate::source::detect::{Probe, Snapshot, quote};
use crate::source::{Finding, SourceKind};

// The cloud's datasource kinds, which its row lists.
crate::model::source_kinds! {
    /// The Google Compute Engine metadata server.
    Gce = ("GCE", "gce", 12);
}

/// The row's check ([`crate::source::provider::Cloud::check`]).
pub(super) fn check(s: &Snapshot, _: SourceKind, _: &Probe<'_>) -> Finding {
    check_gce(s)
}

/// ds-identify's `dscheck_GCE`: DMI product name `Google Compute Engine`, or a
/// product serial starting `GoogleCloud-` (the product name is not guaranteed,
/// LP: #1674861).
fn check_gce(s: &Snapshot) -> Finding {
    if s.dmi.product_name.as_deref() == Some("Google Compute Engine") {
        return Finding::found("DMI product_name \"Google Compute Engine\"");
    }
    if let Some(serial) = &s.dmi.product_serial
        && serial.starts_with("GoogleCloud-")
    {
        return Finding::found(format!("DMI product_serial {}", quote(serial)));
    }
    Finding::not_found("DMI names no Google Compute Engine (product_name, product_serial)")
}

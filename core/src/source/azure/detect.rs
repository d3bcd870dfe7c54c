// SPDX-License-Identifier: Apache-2.0
//! Pure: Azure's datasource check, as ds-identify's `dscheck_Azure`. Moved from `source::detect`, which asks it through the
//! cloud's row.

use crate::source::detect::{Probe, Snapshot, quote};
use crate::source::{Finding, SourceKind};

/// The row's check ([`crate::source::provider::Cloud::check`]).
pub(super) fn check(s: &Snapshot, _: SourceKind, _: &Probe<'_>) -> Finding {
    check_azure(s)
}

/// Azure's chassis asset tag, as ds-identify's `dscheck_Azure` matches it.
pub const AZURE_CHASSIS_ASSET_TAG: &str = "7783-7084-3265-9085-8269-3286-77";

/// Azure's seed, relative to the root.
pub const AZURE_SEED: &str = "var/lib/cloud/seed/azure/ovf-env.xml";

/// ds-identify 25.1.4's `dscheck_Azure`: the chassis asset tag (never in a
/// container, as every DMI match), or the seed `ovf-env.xml`.
fn check_azure(s: &Snapshot) -> Finding {
    if !s.is_container()
        && let Some(tag) = &s.dmi.chassis_asset_tag
        && tag == AZURE_CHASSIS_ASSET_TAG
    {
        return Finding::found(format!("DMI chassis_asset_tag {}", quote(tag)));
    }
    if s.azure_seed {
        return Finding::found(format!("{} is a file", s.shown(AZURE_SEED)));
    }
    Finding::not_found(format!(
        "no Azure chassis asset tag ({AZURE_CHASSIS_ASSET_TAG}) outside a container, and {} is not a file",
        s.shown(AZURE_SEED)
    ))
}

// SPDX-License-Identifier: Apache-2.0
//! Pure: Azure's datasource check, as ds-identify's `dscheck_Azure`. Moved from `source::detect`, which asks it through the
//! cloud's row. Also (performing IO) whether its seed exists, for the detection
//! snapshot (the row's `seeds`).

use std::path::Path;

use crate::source::detect::{Probe, Snapshot, quote};
use crate::source::files::is_file;
use crate::source::{Finding, SourceKind};

// The cloud's datasource kinds, which its row lists.
crate::model::source_kinds! {
    /// Microsoft Azure's instance metadata service.
    Azure = ("Azure", "azure", 4);
}

/// The row's check ([`crate::source::provider::Cloud::check`]).
pub(super) fn check(s: &Snapshot, _: SourceKind, p: &Probe<'_>) -> Finding {
    check_azure(s, p.seeds)
}

/// Azure's chassis asset tag, as ds-identify's `dscheck_Azure` matches it.
pub const AZURE_CHASSIS_ASSET_TAG: &str = "7783-7084-3265-9085-8269-3286-77";

/// Azure's seed, relative to the root.
pub const AZURE_SEED: &str = "var/lib/cloud/seed/azure/ovf-env.xml";

/// The row's seeds ([`crate::source::provider::Cloud::seeds`]): [`AZURE_SEED`]
/// when it is a file.
pub(super) fn seeds(root: &Path) -> Vec<String> {
    if is_file(&root.join(AZURE_SEED)) {
        vec![AZURE_SEED.to_owned()]
    } else {
        Vec::new()
    }
}

/// ds-identify 25.1.4's `dscheck_Azure`: the chassis asset tag (never in a
/// container, as every DMI match), or the seed `ovf-env.xml`.
fn check_azure(s: &Snapshot, seeds: &[String]) -> Finding {
    if !s.is_container()
        && let Some(tag) = &s.dmi.chassis_asset_tag
        && tag == AZURE_CHASSIS_ASSET_TAG
    {
        return Finding::found(format!("DMI chassis_asset_tag {}", quote(tag)));
    }
    if !seeds.is_empty() {
        return Finding::found(format!("{} is a file", s.shown(AZURE_SEED)));
    }
    Finding::not_found(format!(
        "no Azure chassis asset tag ({AZURE_CHASSIS_ASSET_TAG}) outside a container, and {} is not a file",
        s.shown(AZURE_SEED)
    ))
}

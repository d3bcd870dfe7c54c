// SPDX-License-Identifier: Apache-2.0
//! Pure: Oracle Cloud's datasource check, as ds-identify's `dscheck_Oracle`. Moved from `source::detect`, which asks it through the
//! cloud's row.

use crate::source::detect::{Probe, Snapshot, quote};
use crate::source::{Finding, SourceKind};

// The cloud's datasource kinds, which its row lists.
crate::model::source_kinds! {
    /// Oracle Cloud Infrastructure's metadata service (`/opc/v2/`).
    Oracle = ("Oracle", "oracle", 20);
}

/// The row's check ([`crate::source::provider::Cloud::check`]).
pub(super) fn check(s: &Snapshot, _: SourceKind, _: &Probe<'_>) -> Finding {
    check_oracle(s)
}

/// Oracle Cloud's chassis asset tag, as ds-identify's `dscheck_Oracle` and
/// cloud-init's `DataSourceOracle` match it.
pub const ORACLE_CHASSIS_ASSET_TAG: &str = "OracleCloud.com";

/// ds-identify 25.1.4's `dscheck_Oracle`: the chassis asset tag exactly
/// `OracleCloud.com` (a shell `case` pattern without wildcards: no other case, no
/// prefix or suffix), never in a container, whose DMI is the host's.
fn check_oracle(s: &Snapshot) -> Finding {
    match &s.dmi.chassis_asset_tag {
        Some(tag) if tag == ORACLE_CHASSIS_ASSET_TAG && !s.is_container() => {
            Finding::found(format!("DMI chassis_asset_tag {}", quote(tag)))
        }
        Some(tag) if tag == ORACLE_CHASSIS_ASSET_TAG => Finding::not_found(format!(
            "DMI chassis_asset_tag {} but in a container ({}), whose DMI is the host's",
            quote(tag),
            s.virt
        )),
        _ => Finding::not_found(format!(
            "DMI chassis_asset_tag is not {}",
            quote(ORACLE_CHASSIS_ASSET_TAG)
        )),
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Pure: Alibaba Cloud's datasource check, as ds-identify's `dscheck_AliYun`. Moved from `source::detect`, which asks it through the
//! cloud's row.

use crate::constants::{ALIYUN_PRODUCT_NAME, ALIYUN_SEED_DIR};
use crate::source::detect::{Probe, Snapshot, quote};
use crate::source::{Finding, SourceKind};

/// The row's check ([`crate::source::provider::Cloud::check`]).
pub(super) fn check(s: &Snapshot, _: SourceKind, _: &Probe<'_>) -> Finding {
    check_aliyun(s)
}

/// ds-identify's `dscheck_AliYun`: a seed folder with both `meta-data` and
/// `user-data`, else DMI `product_name` exactly `Alibaba Cloud ECS` (never in a
/// container, whose DMI is the host's).
fn check_aliyun(s: &Snapshot) -> Finding {
    if let Some(seed) = &s.aliyun_seed
        && seed.meta_data
        && seed.user_data
    {
        return Finding::found(format!(
            "{} holds meta-data and user-data",
            s.shown(&seed.dir)
        ));
    }
    match &s.dmi.product_name {
        Some(p) if p == ALIYUN_PRODUCT_NAME && !s.is_container() => {
            Finding::found(format!("DMI product_name {}", quote(p)))
        }
        Some(p) if p == ALIYUN_PRODUCT_NAME => Finding::not_found(format!(
            "DMI product_name {} but in a container ({}), whose DMI is the host's",
            quote(p),
            s.virt
        )),
        _ => Finding::not_found(format!(
            "no {} with meta-data and user-data, DMI product_name is not {}",
            s.shown(ALIYUN_SEED_DIR),
            quote(ALIYUN_PRODUCT_NAME)
        )),
    }
}

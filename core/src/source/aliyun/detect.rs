// SPDX-License-Identifier: Apache-2.0
//! Pure: Alibaba Cloud's datasource check, as ds-identify's `dscheck_AliYun`. Moved from `source::detect`, which asks it through the
//! cloud's row. Also (performing IO) whether its seed exists, for the detection
//! snapshot (the row's `seeds`).

use std::path::Path;

use crate::source::detect::{Probe, Snapshot, quote};
use crate::source::files::is_file;
use crate::source::{Finding, SourceKind};

// The cloud's datasource kinds, which its row lists.
crate::model::source_kinds! {
    /// Alibaba Cloud ECS's metadata service, `100.100.100.200`.
    AliYun = ("AliYun", "aliyun", 10);
}

/// cloud-init's `AliYun` seed folder, below the root: with both `meta-data` and
/// `user-data` in it, ds-identify finds `AliYun`.
pub const SEED_DIR: &str = "var/lib/cloud/seed/AliYun";

/// The DMI `product_name` of an Alibaba Cloud ECS instance (ds-identify's
/// `dscheck_AliYun`, cloud-init's `ALIYUN_PRODUCT`).
pub const PRODUCT_NAME: &str = "Alibaba Cloud ECS";

/// The row's seeds ([`crate::source::provider::Cloud::seeds`]): [`SEED_DIR`]
/// when it holds both `meta-data` and `user-data`.
pub(super) fn seeds(root: &Path) -> Vec<String> {
    let d = root.join(SEED_DIR);
    if is_file(&d.join("meta-data")) && is_file(&d.join("user-data")) {
        vec![SEED_DIR.to_owned()]
    } else {
        Vec::new()
    }
}

/// The row's check ([`crate::source::provider::Cloud::check`]).
pub(super) fn check(s: &Snapshot, _: SourceKind, p: &Probe<'_>) -> Finding {
    check_aliyun(s, p.seeds)
}

/// ds-identify's `dscheck_AliYun`: a seed folder with both `meta-data` and
/// `user-data`, else DMI `product_name` exactly `Alibaba Cloud ECS` (never in a
/// container, whose DMI is the host's).
fn check_aliyun(s: &Snapshot, seeds: &[String]) -> Finding {
    if let Some(seed) = seeds.first() {
        return Finding::found(format!("{} holds meta-data and user-data", s.shown(seed)));
    }
    match &s.dmi.product_name {
        Some(p) if p == PRODUCT_NAME && !s.is_container() => {
            Finding::found(format!("DMI product_name {}", quote(p)))
        }
        Some(p) if p == PRODUCT_NAME => Finding::not_found(format!(
            "DMI product_name {} but in a container ({}), whose DMI is the host's",
            quote(p),
            s.virt
        )),
        _ => Finding::not_found(format!(
            "no {} with meta-data and user-data, DMI product_name is not {}",
            s.shown(SEED_DIR),
            quote(PRODUCT_NAME)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_needs_both_files() {
        let root = tempfile::tempdir().unwrap();
        assert!(seeds(root.path()).is_empty());
        let dir = root.path().join(SEED_DIR);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("meta-data"), "").unwrap();
        assert!(seeds(root.path()).is_empty());
        std::fs::write(dir.join("user-data"), "").unwrap();
        assert_eq!(seeds(root.path()), [SEED_DIR]);
    }
}

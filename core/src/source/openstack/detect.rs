// SPDX-License-Identifier: Apache-2.0
//! Pure: `OpenStack`'s datasource checks, as ds-identify's `dscheck_OpenStack` and `dscheck_ConfigDrive`. Moved from `source::detect`, which asks it through the
//! cloud's row. Also (performing IO) which config drive seeds exist, for the
//! detection snapshot (the row's `seeds`).

use std::path::Path;

use crate::source::detect::{CONFIG_DRIVE_LABELS, Probe, Snapshot, quote};
use crate::source::files::is_file;
use crate::source::{Finding, SourceKind};

// The cloud's datasource kinds, which its row lists.
crate::model::source_kinds! {
    /// `OpenStack`'s metadata service (`/openstack/latest/` at 169.254.169.254).
    OpenStack = ("OpenStack", "openstack", 14);
    /// An `OpenStack` config drive (a file system labelled `config-2`).
    ConfigDrive = ("ConfigDrive", "openstack", 1);
}

/// The row's check ([`crate::source::provider::Cloud::check`]): the config
/// drive's, or the metadata service's.
pub(super) fn check(s: &Snapshot, kind: SourceKind, p: &Probe<'_>) -> Finding {
    if kind == SourceKind::ConfigDrive {
        check_config_drive(s, p.seeds)
    } else {
        check_openstack(s, p.seeds)
    }
}

/// Where a config drive may be seeded as a folder (ds-identify's
/// `check_configdrive_v2`): `/config-drive` and cloud-init's seed, below the root.
pub const CONFIG_DRIVE_SEED_DIRS: [&str; 2] = ["config-drive", "var/lib/cloud/seed/config_drive"];

/// The row's seeds ([`crate::source::provider::Cloud::seeds`]): the config drive
/// seed folders ([`CONFIG_DRIVE_SEED_DIRS`]) that hold an `OpenStack`
/// `meta_data.json` (ds-identify's `check_configdrive_v2`):
/// `openstack/YYYY-MM-DD/` in either, `openstack/latest/` in cloud-init's seed
/// only.
pub(super) fn seeds(root: &Path) -> Vec<String> {
    let dated = |name: &str| {
        let b = name.as_bytes();
        b.len() == 10
            && b.first() == Some(&b'2')
            && b.get(4) == Some(&b'-')
            && b.get(7) == Some(&b'-')
    };
    CONFIG_DRIVE_SEED_DIRS
        .iter()
        .filter(|dir| {
            let os = root.join(dir).join("openstack");
            let found = std::fs::read_dir(&os).is_ok_and(|rd| {
                rd.filter_map(std::result::Result::ok).any(|e| {
                    e.file_name().to_str().is_some_and(dated)
                        && is_file(&e.path().join("meta_data.json"))
                })
            });
            found || (dir.starts_with("var/") && is_file(&os.join("latest/meta_data.json")))
        })
        .map(|d| (*d).to_owned())
        .collect()
}

/// The DMI `product_name`s of an `OpenStack` instance (ds-identify's
/// `dscheck_OpenStack`: Nova's, and RDO's Nova), also as chassis asset tags.
pub const OPENSTACK_PRODUCT_NAMES: [&str; 2] = ["OpenStack Nova", "OpenStack Compute"];

/// The DMI chassis asset tags of `OpenStack` clouds ds-identify 25.1.4 names
/// (besides [`OPENSTACK_PRODUCT_NAMES`]).
pub const OPENSTACK_ASSET_TAGS: [&str; 4] = [
    "OpenTelekomCloud",
    "SAP CCloud VM",
    "HUAWEICLOUD",
    "Samsung Cloud Platform",
];

/// ds-identify's `check_configdrive_v2`: a seeded folder, else a file system
/// labelled `config-2` or `CONFIG-2`: what shows it, `None` when there is none
/// ([`NO_CONFIG_DRIVE`]).
fn config_drive(s: &Snapshot, seeds: &[String]) -> Option<String> {
    if let Some(seed) = seeds.first() {
        return Some(format!(
            "{} holds an OpenStack meta_data.json",
            s.shown(seed)
        ));
    }
    // ds-identify cannot see file system labels in a container.
    if !s.is_container()
        && let Some(label) = s
            .fs_labels
            .iter()
            .find(|l| CONFIG_DRIVE_LABELS.contains(&l.as_str()))
    {
        return Some(format!(
            "a file system labelled {label} ({})",
            s.shown(&format!("dev/disk/by-label/{label}"))
        ));
    }
    None
}

/// Why no config drive is found.
const NO_CONFIG_DRIVE: &str = "no config drive seed folder with openstack/<date>/meta_data.json, no file system labelled config-2 or CONFIG-2 (outside a container)";

/// ds-identify's `dscheck_ConfigDrive` (`check_configdrive_v2`).
fn check_config_drive(s: &Snapshot, seeds: &[String]) -> Finding {
    match config_drive(s, seeds) {
        Some(why) => Finding::found(why),
        None => Finding::not_found(NO_CONFIG_DRIVE),
    }
}

/// ds-identify's `dscheck_OpenStack`: never with a config drive (then it is
/// `ConfigDrive`'s); DMI `product_name` `OpenStack Nova` or `OpenStack Compute`
/// (not in a container), `product_name=OpenStack Nova` in pid 1's environment,
/// or a chassis asset tag of [`OPENSTACK_ASSET_TAGS`] or
/// [`OPENSTACK_PRODUCT_NAMES`] (not in a container); else `maybe` on a machine
/// that is not x86 (whose DMI may not say), not found on x86.
fn check_openstack(s: &Snapshot, seeds: &[String]) -> Finding {
    if let Some(why) = config_drive(s, seeds) {
        return Finding::not_found(format!(
            "a config drive is present ({why}): that is ConfigDrive, not the metadata service"
        ));
    }
    let dmi = !s.is_container();
    if dmi
        && let Some(p) = &s.dmi.product_name
        && OPENSTACK_PRODUCT_NAMES.contains(&p.as_str())
    {
        return Finding::found(format!("DMI product_name {}", quote(p)));
    }
    if let Some(p) = &s.pid1_product_name
        && p == OPENSTACK_PRODUCT_NAMES[0]
    {
        return Finding::found(format!(
            "product_name={} in {}",
            quote(p),
            s.shown("proc/1/environ")
        ));
    }
    if dmi
        && let Some(tag) = &s.dmi.chassis_asset_tag
        && (OPENSTACK_ASSET_TAGS.contains(&tag.as_str())
            || OPENSTACK_PRODUCT_NAMES.contains(&tag.as_str()))
    {
        return Finding::found(format!("DMI chassis_asset_tag {}", quote(tag)));
    }
    let x86 = matches!(
        s.machine.as_str(),
        "x86_64" | "x86" | "i386" | "i486" | "i586" | "i686"
    );
    let why = "no OpenStack DMI product name or chassis asset tag (outside a container), no product_name=OpenStack Nova in pid 1's environment";
    if x86 {
        Finding::not_found(why)
    } else {
        Finding::maybe(format!(
            "{why}, but on {} DMI may not say (ds-identify: maybe)",
            if s.machine.is_empty() {
                "this machine"
            } else {
                s.machine.as_str()
            }
        ))
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Pure: EC2's datasource check, as ds-identify's `dscheck_Ec2`: the platform from DMI or Xen, else `strict_id`. Moved from `source::detect`, which asks it through the
//! cloud's row.

use crate::source::detect::config::{self, CloudConfig, Setting};
use crate::source::detect::{Probe, Snapshot, quote};
use crate::source::{Finding, SourceKind};

// The cloud's datasource kinds, which its row lists.
crate::model::source_kinds! {
    /// The EC2 instance metadata service (IMDS).
    Ec2 = ("Ec2", "ec2", 11);
}

/// The row's check ([`crate::source::provider::Cloud::check`]).
pub(super) fn check(s: &Snapshot, _: SourceKind, p: &Probe<'_>) -> Finding {
    check_ec2(s, p.cmdline, p.cloud)
}

/// A cloud that serves the EC2 metadata API, as identified from DMI or Xen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ec2Platform {
    /// Amazon EC2.
    Aws,
    /// Brightbox (product serial `*.brightbox.com`).
    Brightbox,
    /// ZStack (chassis asset tag `*.zstack.io`).
    ZStack,
    /// e24cloud (system vendor `e24cloud`).
    E24cloud,
    /// Outscale (product name `3DS Outscale VM`, vendor `3DS Outscale`).
    Outscale,
}

impl Ec2Platform {
    /// cloud-init's `cloud_name` for it.
    pub fn cloud_name(self) -> &'static str {
        match self {
            Self::Aws => "aws",
            Self::Brightbox => "brightbox",
            Self::ZStack => "zstack",
            Self::E24cloud => "e24cloud",
            Self::Outscale => "outscale",
        }
    }
}

/// Identifies an EC2-API platform as ds-identify's `ec2_identify_platform` does,
/// with the evidence. `None`: unknown.
pub fn ec2_platform(s: &Snapshot) -> Option<(Ec2Platform, String)> {
    let dmi = &s.dmi;
    let field = |v: &Option<String>| v.clone().unwrap_or_default();
    let (serial, tag, vendor, product) = (
        field(&dmi.product_serial),
        field(&dmi.chassis_asset_tag),
        field(&dmi.sys_vendor),
        field(&dmi.product_name),
    );
    if serial.ends_with(".brightbox.com") {
        return Some((
            Ec2Platform::Brightbox,
            format!("DMI product_serial {}", quote(&serial)),
        ));
    }
    if tag.ends_with(".zstack.io") {
        return Some((
            Ec2Platform::ZStack,
            format!("DMI chassis_asset_tag {}", quote(&tag)),
        ));
    }
    if vendor == "e24cloud" {
        return Some((
            Ec2Platform::E24cloud,
            "DMI sys_vendor \"e24cloud\"".to_owned(),
        ));
    }
    if product == "3DS Outscale VM" && vendor == "3DS Outscale" {
        return Some((
            Ec2Platform::Outscale,
            "DMI product_name and sys_vendor name 3DS Outscale".to_owned(),
        ));
    }
    // Xen instances: /sys/hypervisor/uuid starts with "ec2" (case as written).
    if let Some(uuid) = &s.hypervisor_uuid
        && uuid.starts_with("ec2")
    {
        return Some((
            Ec2Platform::Aws,
            format!(
                "{} {} starts with ec2",
                s.shown("sys/hypervisor/uuid"),
                quote(uuid)
            ),
        ));
    }
    let uuid = field(&dmi.product_uuid);
    let first = uuid.split('-').next().unwrap_or_default();
    let b = first.as_bytes();
    if let [e, c, b'2', ..] = b
        && e.eq_ignore_ascii_case(&b'e')
        && c.eq_ignore_ascii_case(&b'c')
    {
        return Some((
            Ec2Platform::Aws,
            format!("DMI product_uuid {} starts with ec2", quote(&uuid)),
        ));
    }
    // Some hypervisors present the UUID's first fields byte-swapped
    // (EC2E1916-... as 1619E2EC-...): the first group then ends in "2?EC".
    if let [.., b'2', x, e, c] = b
        && x.is_ascii_hexdigit()
        && e.eq_ignore_ascii_case(&b'e')
        && c.eq_ignore_ascii_case(&b'c')
    {
        return Some((
            Ec2Platform::Aws,
            format!(
                "DMI product_uuid {} starts with ec2 once byte-swapped",
                quote(&uuid)
            ),
        ));
    }
    None
}

fn check_ec2(s: &Snapshot, cmdline: Option<&str>, cloud: &CloudConfig) -> Finding {
    if s.is_container() {
        return Finding::not_found(format!(
            "running in a container (virt {}): never EC2",
            s.virt
        ));
    }
    if let Some((platform, why)) = ec2_platform(s) {
        return Finding::found(format!("platform {}: {why}", platform.cloud_name()));
    }
    let (strict, from) = ec2_strict_id(s, cmdline, cloud);
    let unknown = "platform not identified (DMI product_uuid, sys/hypervisor/uuid and the known product serials, asset tags and vendors say nothing of EC2)";
    if strict == "true" {
        Finding::not_found(format!("{unknown}, and strict_id is true ({from})"))
    } else {
        Finding::maybe(format!("{unknown}; strict_id is {strict} ({from})"))
    }
}

/// `strict_id` for EC2, as ds-identify reads it: the kernel command line
/// (`ci.datasource.ec2.strict_id=`), then cloud-init's configuration
/// (`datasource: {Ec2: {strict_id: ...}}`), then ds-identify.cfg, then `true`. A
/// value other than `true`, `false`, `warn` or `warn,N` is `true`.
fn ec2_strict_id(s: &Snapshot, cmdline: Option<&str>, cloud: &CloudConfig) -> (String, String) {
    const KEY: &str = "ci.datasource.ec2.strict_id";
    let mut found: Option<(String, String)> = None;
    if let Some(c) = cmdline {
        let padded = format!(" {c} ");
        if let Some(i) = padded.rfind(&format!(" {KEY}=")) {
            let rest = padded.get(i + KEY.len() + 2..).unwrap_or_default();
            let v = rest.split(' ').next().unwrap_or_default();
            let v = if v.is_empty() { "true" } else { v };
            found = Some((v.to_owned(), "kernel command line".to_owned()));
        }
    }
    if found.is_none()
        && let Some(Setting { value, path }) = cloud.datasource_setting("Ec2", "strict_id")
    {
        found = Some((value.clone(), path.clone()));
    }
    if found.is_none()
        && let Some(text) = &s.ds_identify_config
        && let Some(v) = config::ds_identify_value(text, KEY)
    {
        let v = if v.is_empty() { "true".to_owned() } else { v };
        found = Some((v, s.shown(crate::constants::DS_IDENTIFY_CFG)));
    }
    let (v, from) = found.unwrap_or_else(|| ("true".to_owned(), "the default".to_owned()));
    let valid = matches!(v.as_str(), "true" | "false" | "warn")
        || v.strip_prefix("warn,")
            .is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit()));
    if valid {
        (v, from)
    } else {
        (
            "true".to_owned(),
            format!("{from} set {}, which is not valid", quote(&v)),
        )
    }
}

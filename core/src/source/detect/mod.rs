// SPDX-License-Identifier: Apache-2.0
//! Which datasources the instance has, decided without network the way cloud-init's
//! `ds-identify` decides it (SPEC §5), for the sources leasehook implements.
//!
//! Two halves:
//!
//! * [`read::read_snapshot`] (performs IO) reads every file the decision needs, once,
//!   below a root folder — the LXD socket and cloud-init's disabled marker included,
//!   which ds-identify reads from the real `/` whatever its `PATH_ROOT` — into a
//!   [`Snapshot`];
//! * [`decide`] (pure) turns a snapshot into a [`Detection`]: the `datasource_list`
//!   cloud-init would be handed, each check's answer and why.
//!
//! # The decision, in ds-identify's order
//!
//! 1. cloud-init disabled (`etc/cloud/cloud-init.disabled`, or `cloud-init=disabled`
//!    on the kernel command line): nothing is listed.
//! 2. A datasource named on the kernel command line (`ds=`, `ci.ds=`,
//!    `ci.datasource=`, the last one wins, cut at `;`) or by `datasource:` in
//!    `etc/cloud/ds-identify.cfg`: that one and `None`, no checks.
//! 3. The list to check: `cc: ... datasource_list: [...] end_cc` on the kernel command
//!    line, else leasehook's configuration, else cloud-init's `etc/cloud/cloud.cfg`
//!    and `cloud.cfg.d/*.cfg` (the last file that sets it wins), else ds-identify's
//!    built-in list (`NoCloud, Ec2, LXD` of the sources leasehook implements).
//! 4. A list of one entry is taken as is (no `None` added); `[X, None]` is `X` and
//!    `None` without a check.
//! 5. Otherwise each entry is checked ([`check`]); the ones found, in list order,
//!    plus `None`, are the result. `maybe` is reported but not listed (ds-identify's
//!    default policy, `maybe=none`), and nothing found is an empty list.
//!
//! Names leasehook does not implement (`Azure`, `GCE`, ...) are left out of the
//! search and said so in `reasons`. Where leasehook deliberately differs from
//! ds-identify, `docs/datasources.md` says how and why.

pub(crate) mod config;
pub mod read;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use self::config::{CloudConfig, Setting};
use super::kind::{Check, Finding, SourceKind};
use crate::constants::{ALIYUN_PRODUCT_NAME, ALIYUN_SEED_DIR};
use crate::error::Result;

pub use self::read::{ReadOptions, detect, read_snapshot};

/// Virtualisation types that are containers: systemd-detect-virt's container names
/// (ds-identify's list, plus `podman`, `openvz`, `wsl`, `proot` and `pouch`, which
/// systemd also reports as containers) and FreeBSD's `jail`.
pub const CONTAINERS: [&str; 12] = [
    "container-other",
    "lxc",
    "lxc-libvirt",
    "systemd-nspawn",
    "docker",
    "podman",
    "rkt",
    "openvz",
    "wsl",
    "proot",
    "pouch",
    "jail",
];

/// The names the LXD and Incus agents give their virtio serial port: LXD's current
/// and legacy names, and Incus's (which also offers the legacy one).
pub const LXD_VIRTIO_PORT_NAMES: [&str; 3] = [
    "com.canonical.lxd",
    "org.linuxcontainers.lxd",
    "org.linuxcontainers.incus",
];

/// The DMI `board_name` of LXD and Incus virtual machines (their QEMU gets
/// `-smbios type=2,...,product=LXD` or `product=Incus`, on `x86_64` and `aarch64`).
pub const LXD_BOARD_NAMES: [&str; 2] = ["LXD", "Incus"];

/// The file system labels of a NoCloud seed disk.
pub const NOCLOUD_LABELS: [&str; 2] = ["cidata", "CIDATA"];

/// ds-identify's built-in `datasource_list`, reduced to the sources leasehook
/// implements (its order: `... ConfigDrive NoCloud ... Azure ... AliYun Ec2 GCE ... OpenStack
/// ... Oracle ... LXD ...`).
pub const DEFAULT_LIST: [SourceKind; 9] = [
    SourceKind::ConfigDrive,
    SourceKind::NoCloud,
    SourceKind::Azure,
    SourceKind::AliYun,
    SourceKind::Ec2,
    SourceKind::Gce,
    SourceKind::OpenStack,
    SourceKind::Oracle,
    SourceKind::Lxd,
];

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

/// The file system labels of an `OpenStack` config drive, as cloud-init accepts
/// them.
pub const CONFIG_DRIVE_LABELS: [&str; 2] = ["config-2", "CONFIG-2"];

/// Where a config drive may be seeded as a folder (ds-identify's
/// `check_configdrive_v2`): `/config-drive` and cloud-init's seed, below the root.
pub const CONFIG_DRIVE_SEED_DIRS: [&str; 2] = ["config-drive", "var/lib/cloud/seed/config_drive"];

/// Everything the decision reads, read once (see [`read::read_snapshot`]).
///
/// Strings are what the files hold (first line, surrounding blanks removed, bytes
/// that are not UTF-8 replaced), `None` when a file is missing or unreadable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The root every path is below (`/` in production); used to name paths in
    /// reasons.
    pub root: PathBuf,
    /// The virtualisation, as systemd-detect-virt names it (`kvm`, `lxc`, `none`,
    /// ...), or `unavailable`.
    pub virt: String,
    /// Where `virt` came from, for the output.
    pub virt_from: String,
    /// `proc/cmdline` (the kernel command line).
    pub proc_cmdline: Option<String>,
    /// `proc/1/cmdline`, NULs as spaces: what a container sees as its command line.
    pub pid1_cmdline: Option<String>,
    /// `sys/class/dmi/id/*`.
    pub dmi: Dmi,
    /// `sys/hypervisor/uuid` (Xen).
    pub hypervisor_uuid: Option<String>,
    /// What `dev/lxd/sock` is.
    pub lxd_socket: Node,
    /// What `dev/incus/sock` is (Incus's guest API, the same API).
    pub incus_socket: Node,
    /// `sys/class/virtio-ports/*/name`.
    pub virtio_ports: Vec<VirtioPort>,
    /// The NoCloud seed folders.
    pub seeds: Vec<Seed>,
    /// `var/lib/cloud/seed/AliYun`, when it is a folder.
    pub aliyun_seed: Option<Seed>,
    /// The config drive seed folders ([`CONFIG_DRIVE_SEED_DIRS`]) that hold
    /// `openstack/YYYY-MM-DD/meta_data.json` (or, the cloud-init seed only,
    /// `openstack/latest/meta_data.json`), as paths below the root.
    pub config_drive_seeds: Vec<String>,
    /// `product_name=` in `proc/1/environ` (how a container learns it runs on
    /// Nova).
    pub pid1_product_name: Option<String>,
    /// The machine (`uname -m`; leasehook's build target's architecture).
    pub machine: String,
    /// The names in `dev/disk/by-label/` (udev's file system labels).
    pub fs_labels: Vec<String>,
    /// Whether `var/lib/cloud/seed/azure/ovf-env.xml` is a file (Azure's seed).
    pub azure_seed: bool,
    /// Whether `etc/cloud/cloud-init.disabled` is a file.
    pub disabled_marker: bool,
    /// `datasource_list` from leasehook's configuration, when it sets one.
    pub leasehook_datasource_list: Option<ConfiguredList>,
    /// `etc/cloud/cloud.cfg`, then `etc/cloud/cloud.cfg.d/*.cfg` in lexical order.
    pub cloud_config: Vec<ConfigText>,
    /// `etc/cloud/ds-identify.cfg`.
    pub ds_identify_config: Option<String>,
    /// Problems met while reading (an unreadable file, ...).
    pub warnings: Vec<String>,
}

/// leasehook's `datasource_list` setting and where it came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfiguredList {
    /// The names, as written.
    pub names: Vec<String>,
    /// Where the setting came from (`/etc/leasehook/config.yaml line 2`,
    /// `environment LEASEHOOK_DATASOURCE_LIST`).
    pub from: String,
}

/// The DMI (SMBIOS) values the checks read, from `sys/class/dmi/id/`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dmi {
    /// `sys_vendor`.
    pub sys_vendor: Option<String>,
    /// `board_name`.
    pub board_name: Option<String>,
    /// `chassis_asset_tag`.
    pub chassis_asset_tag: Option<String>,
    /// `product_name`.
    pub product_name: Option<String>,
    /// `product_serial`.
    pub product_serial: Option<String>,
    /// `product_uuid`.
    pub product_uuid: Option<String>,
}

/// What is at a path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Node {
    /// Nothing.
    #[default]
    Missing,
    /// A unix socket.
    Socket,
    /// Something else: `regular file`, `directory`, ...
    Other(String),
}

/// One `sys/class/virtio-ports/<port>/name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtioPort {
    /// The port folder (`vport0p1`).
    pub port: String,
    /// Its name file, when readable.
    pub name: Option<String>,
}

/// One NoCloud seed folder and which of its files exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seed {
    /// The folder below the root, for example `var/lib/cloud/seed/nocloud`.
    pub dir: String,
    /// `meta-data` is a file.
    pub meta_data: bool,
    /// `user-data` is a file.
    pub user_data: bool,
}

/// A configuration file's path (as shown to users) and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigText {
    /// The path.
    pub path: String,
    /// The whole text.
    pub text: String,
}

/// The result of the decision; `leasehook detect` prints it as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Detection {
    /// The datasources to try, in order, ending in `None`; empty when none was
    /// found (or cloud-init is disabled).
    pub datasource_list: Vec<SourceKind>,
    /// Each check that ran and its answer.
    pub checks: BTreeMap<SourceKind, Check>,
    /// Why, per datasource name (also for names leasehook does not implement).
    pub reasons: BTreeMap<String, String>,
    /// Where the list of datasources to check came from.
    pub list_from: String,
    /// The virtualisation the checks assumed, and where it came from.
    pub virt: String,
    /// Why nothing is listed, when cloud-init is disabled.
    pub disabled: Option<String>,
    /// Problems met on the way (unreadable or malformed cloud-init files, ...).
    pub warnings: Vec<String>,
}

impl Snapshot {
    /// A path below the root, as shown in reasons.
    fn shown(&self, rel: &str) -> String {
        self.root.join(rel).display().to_string()
    }

    /// Whether `virt` is a container.
    pub fn is_container(&self) -> bool {
        CONTAINERS.contains(&self.virt.as_str())
    }

    /// Whether `virt` is a KVM or QEMU virtual machine (where LXD runs VMs).
    pub fn is_kvm_or_qemu(&self) -> bool {
        matches!(self.virt.as_str(), "kvm" | "qemu")
    }

    /// The kernel command line as the instance sees it: PID 1's command line in a
    /// container (a container's `/proc/cmdline` is the host's), else
    /// `proc/cmdline`.
    pub fn kernel_cmdline(&self) -> Option<&str> {
        if self.is_container() {
            self.pid1_cmdline.as_deref()
        } else {
            self.proc_cmdline.as_deref()
        }
    }
}

/// A value as shown in a reason: quoted, escaped and at most 64 characters.
fn quote(v: &str) -> String {
    const MAX: usize = 64;
    if v.chars().count() > MAX {
        let s: String = v.chars().take(MAX).collect();
        format!("{s:?}…")
    } else {
        format!("{v:?}")
    }
}

/// Decides the datasource list from a snapshot (pure; see the module docs).
///
/// The only error is a malformed leasehook configuration file: cloud-init's own
/// files are foreign, so their problems are warnings and they are skipped.
pub fn decide(s: &Snapshot) -> Result<Detection> {
    let mut d = Detection {
        datasource_list: Vec::new(),
        checks: BTreeMap::new(),
        reasons: BTreeMap::new(),
        list_from: String::new(),
        virt: format!("{} ({})", s.virt, s.virt_from),
        disabled: None,
        warnings: s.warnings.clone(),
    };
    let cmdline = s.kernel_cmdline();

    // 1. Disabled.
    if s.disabled_marker {
        d.disabled = Some(format!(
            "{} exists",
            s.shown(crate::constants::CLOUD_INIT_DISABLED_MARKER)
        ));
        return Ok(d);
    }
    if cmdline.is_some_and(|c| c.contains("cloud-init=disabled")) {
        d.disabled = Some("cloud-init=disabled on the kernel command line".to_owned());
        return Ok(d);
    }

    // 2. A datasource named outright.
    if let Some((name, from)) = named_datasource(s, cmdline) {
        d.list_from = from;
        match SourceKind::from_name(&name) {
            Some(kind) => {
                d.reasons
                    .insert(kind.name().to_owned(), format!("named by {}", d.list_from));
                d.datasource_list.push(kind);
                if kind != SourceKind::None {
                    d.datasource_list.push(SourceKind::None);
                }
            }
            None => {
                d.reasons.insert(name, not_implemented(&d.list_from));
            }
        }
        return Ok(d);
    }

    // 3. The list to check.
    let cloud = CloudConfig::parse(&s.cloud_config);
    d.warnings.extend(cloud.warnings.iter().cloned());
    let (names, from) = list_to_check(s, cmdline, &cloud);
    d.list_from = from;

    // 4. One entry, or one entry and None: taken as is.
    let entries: Vec<(String, Option<SourceKind>)> = dedupe(&names, &mut d.warnings);
    let single = match entries.as_slice() {
        [(name, kind)] => Some((name, *kind, false)),
        [(name, kind), (_, Some(SourceKind::None))] => Some((name, *kind, true)),
        _ => None,
    };
    if let Some((name, kind, with_none)) = single {
        match kind {
            Some(k) => {
                d.reasons.insert(
                    k.name().to_owned(),
                    format!(
                        "the only entry of datasource_list ({}), taken without a check",
                        d.list_from
                    ),
                );
                d.datasource_list.push(k);
                if with_none && k != SourceKind::None {
                    d.datasource_list.push(SourceKind::None);
                }
            }
            None => {
                d.reasons
                    .insert(name.clone(), not_implemented(&d.list_from));
            }
        }
        return Ok(d);
    }

    // 5. Check each entry.
    for (name, kind) in entries {
        let Some(kind) = kind else {
            d.reasons.insert(name, not_implemented(&d.list_from));
            continue;
        };
        let v = check_with(kind, s, cmdline, &cloud);
        if v.check == Check::Found {
            d.datasource_list.push(kind);
        }
        d.checks.insert(kind, v.check);
        d.reasons.insert(kind.name().to_owned(), v.reason);
    }
    if !d.datasource_list.is_empty() && !d.datasource_list.contains(&SourceKind::None) {
        d.datasource_list.push(SourceKind::None);
    }
    Ok(d)
}

fn not_implemented(from: &str) -> String {
    format!("named by {from}, but leasehook does not implement this datasource; left out")
}

/// Drops repeated entries (keeping the first), mapping each name to a kind.
fn dedupe(names: &[String], warnings: &mut Vec<String>) -> Vec<(String, Option<SourceKind>)> {
    let mut out: Vec<(String, Option<SourceKind>)> = Vec::new();
    for n in names {
        let kind = SourceKind::from_name(n);
        let seen = out.iter().any(|(name, k)| match (k, kind) {
            (Some(a), Some(b)) => *a == b,
            _ => name == n,
        });
        if seen {
            warnings.push(format!(
                "datasource_list names {} twice; checked once",
                quote(n)
            ));
        } else {
            out.push((n.clone(), kind));
        }
    }
    out
}

/// The datasource named on the kernel command line or in ds-identify.cfg, and
/// where, as ds-identify reads it (`read_config`): the config file first, then each
/// command-line word `ds=`, `ci.ds=`, `ci.datasource=` in turn (so the last one
/// wins), the value cut at the first `;`. An empty value names nothing.
fn named_datasource(s: &Snapshot, cmdline: Option<&str>) -> Option<(String, String)> {
    let mut named: Option<(String, String)> = None;
    if let Some(text) = &s.ds_identify_config
        && let Some(v) = config::ds_identify_value(text, "datasource")
    {
        named = Some((
            v,
            format!(
                "datasource: in {}",
                s.shown(crate::constants::DS_IDENTIFY_CFG)
            ),
        ));
    }
    for word in cmdline.unwrap_or_default().split_whitespace() {
        let (key, value) = word.split_once('=').unwrap_or((word, word));
        if matches!(key, "ds" | "ci.ds" | "ci.datasource") {
            let value = value.split(';').next().unwrap_or_default();
            named = Some((
                value.to_owned(),
                format!("{key}= on the kernel command line"),
            ));
        }
    }
    named.filter(|(v, _)| !v.is_empty())
}

/// The names to check and where they came from.
fn list_to_check(
    s: &Snapshot,
    cmdline: Option<&str>,
    cloud: &CloudConfig,
) -> (Vec<String>, String) {
    if let Some(list) = cmdline.and_then(config::cmdline_datasource_list) {
        return (
            list,
            "datasource_list in cc: on the kernel command line".to_owned(),
        );
    }
    if let Some(c) = &s.leasehook_datasource_list {
        return (c.names.clone(), format!("datasource_list in {}", c.from));
    }
    match &cloud.datasource_list {
        Some(Setting { value, path }) if !value.is_empty() => {
            (value.clone(), format!("datasource_list in {path}"))
        }
        _ => (
            DEFAULT_LIST.iter().map(|k| k.name().to_owned()).collect(),
            "ds-identify's built-in list (nothing configured)".to_owned(),
        ),
    }
}

/// Checks one datasource against a snapshot (pure): what [`decide`] asks of each
/// kind in the list.
pub fn check(kind: SourceKind, s: &Snapshot) -> Finding {
    let cloud = CloudConfig::parse(&s.cloud_config);
    check_with(kind, s, s.kernel_cmdline(), &cloud)
}

fn check_with(
    kind: SourceKind,
    s: &Snapshot,
    cmdline: Option<&str>,
    cloud: &CloudConfig,
) -> Finding {
    match kind {
        SourceKind::Ec2 => check_ec2(s, cmdline, cloud),
        SourceKind::Gce => check_gce(s),
        SourceKind::Lxd => check_lxd(s),
        SourceKind::NoCloud => check_nocloud(s, cloud),
        SourceKind::Azure => check_azure(s),
        SourceKind::None => Finding::not_found("None is never detected; it only ends the list"),
        SourceKind::AliYun => check_aliyun(s),
        SourceKind::Oracle => check_oracle(s),
        SourceKind::ConfigDrive => check_config_drive(s),
        SourceKind::OpenStack => check_openstack(s),
    }
}

/// ds-identify's `check_configdrive_v2`: a seeded folder, else a file system
/// labelled `config-2` or `CONFIG-2`: what shows it, `None` when there is none
/// ([`NO_CONFIG_DRIVE`]).
fn config_drive(s: &Snapshot) -> Option<String> {
    if let Some(seed) = s.config_drive_seeds.first() {
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
fn check_config_drive(s: &Snapshot) -> Finding {
    match config_drive(s) {
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
fn check_openstack(s: &Snapshot) -> Finding {
    if let Some(why) = config_drive(s) {
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

/// The cloud DMI alone says this is (pure): the first datasource of ds-identify's
/// built-in list ([`DEFAULT_LIST`]) whose check finds it from `dmi` and nothing
/// else (no seed, socket, kernel command line or configuration). What
/// `provider: auto` goes by when the boot stage left no verdict: cheap (a few
/// small files, no network, no `systemd-detect-virt`), and only a `found` counts.
pub fn cloud_from_dmi(dmi: &Dmi) -> Option<SourceKind> {
    let s = Snapshot {
        dmi: dmi.clone(),
        virt: "unavailable".to_owned(),
        ..Snapshot::default()
    };
    DEFAULT_LIST
        .into_iter()
        .find(|k| check(*k, &s).check == Check::Found)
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
        && let Some(Setting { value, path }) = &cloud.ec2_strict_id
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

fn check_lxd(s: &Snapshot) -> Finding {
    if s.incus_socket == Node::Socket {
        return Finding::found(format!(
            "{} is a socket (Incus)",
            s.shown(crate::constants::INCUS_SOCKET)
        ));
    }
    let sock = s.shown(crate::constants::LXD_SOCKET);
    match &s.lxd_socket {
        Node::Socket => return Finding::found(format!("{sock} is a socket")),
        Node::Missing => {}
        Node::Other(kind) => {
            if !s.is_kvm_or_qemu() {
                return Finding::not_found(format!("{sock} is a {kind}, not a socket"));
            }
        }
    }
    if !s.is_kvm_or_qemu() {
        return Finding::not_found(format!(
            "{sock} does not exist, and this is not a KVM/QEMU virtual machine (virt {})",
            s.virt
        ));
    }
    // An LXD or Incus VM: the socket appears only once the agent runs, later in boot.
    if let Some(board) = s
        .dmi
        .board_name
        .as_deref()
        .filter(|b| LXD_BOARD_NAMES.contains(b))
    {
        return Finding::found(format!(
            "virt {} and DMI board_name {}",
            s.virt,
            quote(board)
        ));
    }
    for p in &s.virtio_ports {
        if let Some(name) = &p.name
            && LXD_VIRTIO_PORT_NAMES.contains(&name.as_str())
        {
            return Finding::found(format!(
                "virt {} and {} is {}",
                s.virt,
                s.shown(&format!("sys/class/virtio-ports/{}/name", p.port)),
                quote(name)
            ));
        }
    }
    Finding::not_found(format!(
        "{sock} is not a socket; virt {}, but neither DMI board_name \"LXD\"/\"Incus\" nor an LXD or Incus virtio port",
        s.virt
    ))
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

fn check_nocloud(s: &Snapshot, cloud: &CloudConfig) -> Finding {
    if let Some(serial) = &s.dmi.product_serial
        && format!(" {serial} ").contains(" ds=nocloud")
    {
        return Finding::found(format!("DMI product_serial {}", quote(serial)));
    }
    for seed in &s.seeds {
        if seed.meta_data && seed.user_data {
            return Finding::found(format!(
                "{} holds meta-data and user-data",
                s.shown(&seed.dir)
            ));
        }
    }
    // ds-identify cannot see file system labels in a container.
    if !s.is_container()
        && let Some(label) = s
            .fs_labels
            .iter()
            .find(|l| NOCLOUD_LABELS.contains(&l.as_str()))
    {
        return Finding::found(format!(
            "a file system labelled {label} ({})",
            s.shown(&format!("dev/disk/by-label/{label}"))
        ));
    }
    if let Some(why) = cloud.nocloud_configured() {
        return Finding::found(why);
    }
    let half: Vec<String> = s
        .seeds
        .iter()
        .filter(|sd| sd.meta_data != sd.user_data)
        .map(|sd| s.shown(&sd.dir))
        .collect();
    let base = "no ds=nocloud DMI serial, no seed with both meta-data and user-data, no cidata file system, no NoCloud seed in cloud-init's configuration";
    if half.is_empty() {
        Finding::not_found(base)
    } else {
        Finding::not_found(format!(
            "{base} ({} holds only one of meta-data and user-data)",
            half.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests;

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
/// implements: every kind but `None`, in [`SourceKind::all`]'s order, which is
/// ds-identify's (`... ConfigDrive NoCloud ... Azure ... AliYun Ec2 GCE ...
/// OpenStack ... Oracle ... LXD ...`).
pub fn default_list() -> impl Iterator<Item = SourceKind> {
    SourceKind::all()
        .into_iter()
        .filter(|k| *k != SourceKind::None)
}

/// The file system labels of an `OpenStack` config drive, as cloud-init accepts
/// them.
pub const CONFIG_DRIVE_LABELS: [&str; 2] = ["config-2", "CONFIG-2"];

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
    /// Each cloud's seeds that exist, as paths below the root, by the cloud's
    /// name: what its row's [`crate::source::provider::Cloud::seeds`] found
    /// (read them with [`Snapshot::seeds_of`]).
    pub cloud_seeds: BTreeMap<&'static str, Vec<String>>,
    /// `product_name=` in `proc/1/environ` (how a container learns it runs on
    /// Nova).
    pub pid1_product_name: Option<String>,
    /// The machine (`uname -m`; leasehook's build target's architecture).
    pub machine: String,
    /// The names in `dev/disk/by-label/` (udev's file system labels).
    pub fs_labels: Vec<String>,
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
    pub(crate) fn shown(&self, rel: &str) -> String {
        self.root.join(rel).display().to_string()
    }

    /// The seeds of the cloud `name` that exist, as paths below the root (none
    /// when it has no seed, or none was found).
    pub fn seeds_of(&self, name: &str) -> &[String] {
        self.cloud_seeds.get(name).map_or(&[], Vec::as_slice)
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
pub(crate) fn quote(v: &str) -> String {
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
            default_list().map(|k| k.name().to_owned()).collect(),
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
        SourceKind::Lxd => check_lxd(s),
        SourceKind::NoCloud => check_nocloud(s, cloud),
        SourceKind::None => Finding::not_found("None is never detected; it only ends the list"),
        // A cloud's datasource: its row's check (`source/<cloud>/detect.rs`).
        other => match crate::source::CLOUDS
            .iter()
            .find(|c| c.kinds.contains(&other))
        {
            Some(c) => {
                let seeds = s.seeds_of(c.name);
                (c.check)(
                    s,
                    other,
                    &Probe {
                        cmdline,
                        cloud,
                        seeds,
                    },
                )
            }
            None => Finding::not_found("no cloud's row checks this datasource"),
        },
    }
}

/// What a cloud's check ([`crate::source::provider::Cloud::check`]) reads
/// besides the snapshot: the kernel command line in force and cloud-init's
/// configuration.
#[derive(Debug, Clone, Copy)]
pub struct Probe<'a> {
    /// The kernel command line (pid 1's in a container).
    pub cmdline: Option<&'a str>,
    /// cloud-init's configuration files, parsed.
    pub(crate) cloud: &'a CloudConfig,
    /// The seeds of the cloud checked that exist ([`Snapshot::seeds_of`]).
    pub seeds: &'a [String],
}

/// The cloud DMI alone says this is (pure): the first datasource of ds-identify's
/// built-in list ([`default_list`]) whose check finds it from `dmi` and nothing
/// else (no seed, socket, kernel command line or configuration). What
/// `provider: auto` goes by when the boot stage left no verdict: cheap (a few
/// small files, no network, no `systemd-detect-virt`), and only a `found` counts.
pub fn cloud_from_dmi(dmi: &Dmi) -> Option<SourceKind> {
    let s = Snapshot {
        dmi: dmi.clone(),
        virt: "unavailable".to_owned(),
        ..Snapshot::default()
    };
    default_list().find(|k| check(*k, &s).check == Check::Found)
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

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: reads the [`Snapshot`] the decision needs, every path below a root
//! folder (`/` in production; a fake root in tests and with `leasehook detect
//! --root`), the LXD socket and cloud-init's disabled marker included.
//!
//! Files are opened without blocking (a FIFO planted in place of a DMI file or a
//! configuration file cannot hang the boot) and only regular files are read, each
//! up to a size limit. A missing or unreadable file reads as absent; an unreadable
//! configuration file is also a warning. The only errors are leasehook's own
//! configuration file named with `--config` being unreadable.
//!
//! **Virtualisation** comes from `--virt`, else `<root>/run/systemd/container` (which
//! systemd writes inside containers), else — only when the root is `/`, since both
//! describe the machine leasehook runs on rather than a root folder —
//! `$SYSTEMD_VIRTUALIZATION` (set for generators) or `systemd-detect-virt`.
//! Otherwise it is `unavailable`.

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::FileTypeExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{ConfigText, ConfiguredList, Detection, Dmi, Node, Seed, Snapshot, VirtioPort, decide};
use crate::constants::{
    CLOUD_CFG, CLOUD_CFG_D, CLOUD_INIT_DISABLED_MARKER, CONFIG_MAX_BYTES, DS_IDENTIFY_CFG,
    INCUS_SOCKET, LXD_SOCKET, NOCLOUD_SEED_DIRS, UBUNTU_CORE_WRITABLE,
};
use crate::error::Result;
use crate::source::files::{first_line, is_file, read_limited, read_text};

/// The most bytes read from `proc/1/cmdline`.
const CMDLINE_MAX_BYTES: u64 = 64 * 1024;
/// The most entries read from one folder (virtio ports, labels, `cloud.cfg.d`).
const MAX_ENTRIES: usize = 1024;

/// Where and how to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOptions {
    /// The root every path is below.
    pub root: PathBuf,
    /// The virtualisation to assume instead of detecting it (`--virt`).
    pub virt: Option<String>,
    /// leasehook's own `datasource_list` setting, from the configuration the caller
    /// loaded (detection reads no configuration itself); `None` when it is not set.
    pub datasource_list: Option<ConfiguredList>,
}

impl ReadOptions {
    /// Reading below `root`, detecting the virtualisation, the default config.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            virt: None,
            datasource_list: None,
        }
    }

    /// Assumes this virtualisation (`kvm`, `lxc`, `none`, ...).
    #[must_use]
    pub fn with_virt(mut self, virt: impl Into<String>) -> Self {
        self.virt = Some(virt.into());
        self
    }

    /// Takes leasehook's `datasource_list` setting (see
    /// [`crate::config::Loaded::datasource_list`]).
    #[must_use]
    pub fn with_datasource_list(mut self, list: Option<ConfiguredList>) -> Self {
        self.datasource_list = list;
        self
    }
}

/// Reads the snapshot and decides: what `leasehook detect` runs.
pub fn detect(options: &ReadOptions) -> Result<Detection> {
    decide(&read_snapshot(options)?)
}

/// The DMI values alone, below `root` (`sys/class/dmi/id/*`, first lines): what
/// [`super::cloud_from_dmi`] decides from.
pub fn read_dmi(root: &Path) -> Dmi {
    let dir = root.join("sys/class/dmi/id");
    let dmi = |f: &str| first_line(&dir.join(f));
    Dmi {
        sys_vendor: dmi("sys_vendor"),
        board_name: dmi("board_name"),
        chassis_asset_tag: dmi("chassis_asset_tag"),
        product_name: dmi("product_name"),
        product_serial: dmi("product_serial"),
        product_uuid: dmi("product_uuid"),
    }
}

/// Reads every file the decision needs (see the module docs); leasehook's own
/// configuration comes in `o.datasource_list`, loaded by the caller.
pub fn read_snapshot(o: &ReadOptions) -> Result<Snapshot> {
    let root = o.root.as_path();
    let at = |rel: &str| root.join(rel);
    let mut warnings = Vec::new();
    let (virt, virt_from) = virt(o, &mut warnings);
    let cloud_config = cloud_config_files(root, &mut warnings);
    Ok(Snapshot {
        root: o.root.clone(),
        virt,
        virt_from,
        proc_cmdline: first_line(&at("proc/cmdline")),
        pid1_cmdline: read_limited(&at("proc/1/cmdline"), CMDLINE_MAX_BYTES)
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " ")),
        dmi: read_dmi(root),
        hypervisor_uuid: first_line(&at("sys/hypervisor/uuid")),
        lxd_socket: node(&at(LXD_SOCKET)),
        incus_socket: node(&at(INCUS_SOCKET)),
        virtio_ports: sorted_entries(&at("sys/class/virtio-ports"))
            .into_iter()
            .map(|p| VirtioPort {
                port: file_name(&p),
                name: first_line(&p.join("name")),
            })
            .collect(),
        seeds: seeds(root),
        cloud_seeds: crate::source::CLOUDS
            .iter()
            .map(|c| (c.name, (c.seeds)(root)))
            .filter(|(_, found)| !found.is_empty())
            .collect(),
        pid1_product_name: read_limited(&at("proc/1/environ"), CMDLINE_MAX_BYTES).and_then(|b| {
            b.split(|c| *c == 0)
                .find_map(|kv| kv.strip_prefix(b"product_name="))
                .map(|v| String::from_utf8_lossy(v).into_owned())
        }),
        machine: std::env::consts::ARCH.to_owned(),
        fs_labels: sorted_entries(&at("dev/disk/by-label"))
            .iter()
            .map(|p| file_name(p))
            .collect(),
        disabled_marker: is_file(&at(CLOUD_INIT_DISABLED_MARKER)),
        leasehook_datasource_list: o.datasource_list.clone(),
        cloud_config,
        ds_identify_config: config_file(&at(DS_IDENTIFY_CFG), &mut warnings).map(|c| c.text),
        warnings,
    })
}

fn virt(o: &ReadOptions, warnings: &mut Vec<String>) -> (String, String) {
    if let Some(v) = &o.virt {
        return (v.clone(), "--virt".to_owned());
    }
    let container = o.root.join("run/systemd/container");
    if let Some(v) = first_line(&container).filter(|v| !v.is_empty()) {
        return (v, container.display().to_string());
    }
    if o.root != Path::new("/") {
        return (
            "unavailable".to_owned(),
            "not detected below a root other than /; pass --virt".to_owned(),
        );
    }
    if let Ok(v) = std::env::var("SYSTEMD_VIRTUALIZATION")
        && let Some((_, name)) = v.split_once(':')
        && !name.is_empty()
    {
        return (name.to_owned(), "$SYSTEMD_VIRTUALIZATION".to_owned());
    }
    match Command::new("systemd-detect-virt").output() {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            // It prints "none" and exits 1 on bare metal.
            if !text.is_empty() && (out.status.success() || text == "none") {
                (text, "systemd-detect-virt".to_owned())
            } else {
                warnings.push(format!("systemd-detect-virt failed ({})", out.status));
                (
                    "unavailable".to_owned(),
                    "systemd-detect-virt failed".to_owned(),
                )
            }
        }
        Err(e) => {
            warnings.push(format!("systemd-detect-virt: {e}"));
            (
                "unavailable".to_owned(),
                format!("systemd-detect-virt: {e}"),
            )
        }
    }
}

/// cloud-init's configuration files below `root`: `etc/cloud/cloud.cfg`, then
/// `etc/cloud/cloud.cfg.d/*.cfg` in lexical order. Unreadable ones are warnings.
pub(crate) fn cloud_config_files(root: &Path, warnings: &mut Vec<String>) -> Vec<ConfigText> {
    let mut out = Vec::new();
    if let Some(c) = config_file(&root.join(CLOUD_CFG), warnings) {
        out.push(c);
    }
    for p in sorted_entries(&root.join(CLOUD_CFG_D)) {
        if p.extension().is_some_and(|e| e == "cfg")
            && let Some(c) = config_file(&p, warnings)
        {
            out.push(c);
        }
    }
    out
}

/// A foreign configuration file, when it is a file; problems are warnings.
fn config_file(path: &Path, warnings: &mut Vec<String>) -> Option<ConfigText> {
    if !path.exists() {
        return None;
    }
    match read_text(path, CONFIG_MAX_BYTES) {
        Ok(text) => Some(ConfigText {
            path: path.display().to_string(),
            text,
        }),
        Err(e) => {
            warnings.push(format!("{}: {e}; skipped", path.display()));
            None
        }
    }
}

/// The NoCloud seed folders, and their Ubuntu Core twins when
/// `<root>/writable/system-data` exists.
fn seeds(root: &Path) -> Vec<Seed> {
    let mut dirs: Vec<String> = NOCLOUD_SEED_DIRS.iter().map(|d| (*d).to_owned()).collect();
    if root.join(UBUNTU_CORE_WRITABLE).is_dir() {
        dirs.extend(
            NOCLOUD_SEED_DIRS
                .iter()
                .map(|d| format!("{UBUNTU_CORE_WRITABLE}/{d}")),
        );
    }
    dirs.into_iter()
        .map(|dir| {
            let d = root.join(&dir);
            Seed {
                meta_data: is_file(&d.join("meta-data")),
                user_data: is_file(&d.join("user-data")),
                dir,
            }
        })
        .collect()
}

/// What is at `path`, following symlinks as ds-identify's `[ -S ]` does.
fn node(path: &Path) -> Node {
    match fs::metadata(path) {
        Ok(m) => {
            let t = m.file_type();
            if t.is_socket() {
                Node::Socket
            } else if t.is_file() {
                Node::Other("regular file".to_owned())
            } else if t.is_dir() {
                Node::Other("directory".to_owned())
            } else {
                Node::Other("special file".to_owned())
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Node::Missing,
        Err(e) => Node::Other(format!("unreadable path ({e})")),
    }
}

/// A folder's entries, sorted by name (bytes), at most [`MAX_ENTRIES`].
fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<OsString> = rd
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .take(MAX_ENTRIES)
        .collect();
    names.sort();
    names.into_iter().map(|n| dir.join(n)).collect()
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceKind;

    /// Options with the list leasehook's configuration below `root` (or `file`, and
    /// the `LEASEHOOK_*` variables in `env`) sets, loaded as the callers load it.
    fn configured(root: &Path, env: crate::event::Env, file: Option<&Path>) -> Result<ReadOptions> {
        let layers = crate::config::Layers::from_env(env)
            .with_root(Some(root.to_path_buf()))
            .with_file(file.map(Path::to_path_buf));
        let loaded = crate::config::load(&layers)?;
        Ok(ReadOptions::new(root)
            .with_virt("kvm")
            .with_datasource_list(loaded.datasource_list()))
    }

    fn write(root: &Path, rel: &str, body: &[u8]) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, body).unwrap();
    }

    #[test]
    #[allow(clippy::too_many_lines)] // one fake root, checked field by field
    fn reads_a_fake_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "proc/cmdline", b"ro quiet\n");
        write(root, "proc/1/cmdline", b"/sbin/init\0ds=nocloud\0");
        write(
            root,
            "sys/class/dmi/id/product_uuid",
            b"  EC2E1916-9099-7CAF-FD21-012345ABCDEF \nsecond line\n",
        );
        write(root, "sys/class/dmi/id/board_name", b"\xffLXD\n");
        write(
            root,
            "sys/class/virtio-ports/vport0p1/name",
            b"com.canonical.lxd\n",
        );
        write(root, "sys/class/virtio-ports/vport0p0/other", b"x\n");
        write(
            root,
            "var/lib/cloud/seed/nocloud/meta-data",
            b"instance-id: i\n",
        );
        write(
            root,
            "writable/system-data/var/lib/cloud/seed/nocloud-net/user-data",
            b"",
        );
        write(
            root,
            "etc/cloud/cloud.cfg",
            b"datasource_list: [ Ec2, None ]\n",
        );
        write(root, "etc/cloud/cloud.cfg.d/90.cfg", b"a: 1\n");
        write(root, "etc/cloud/cloud.cfg.d/10.cfg", b"b: 1\n");
        write(root, "etc/cloud/cloud.cfg.d/README", b"not a cfg\n");
        write(root, "etc/cloud/cloud.cfg.d/bad.cfg", b"\xff\xfe");
        write(root, "etc/cloud/cloud-init.disabled", b"");
        fs::create_dir_all(root.join("dev/disk/by-label")).unwrap();
        std::os::unix::fs::symlink("../../vdb", root.join("dev/disk/by-label/cidata")).unwrap();
        fs::create_dir_all(root.join("dev/lxd")).unwrap();
        let _sock = std::os::unix::net::UnixListener::bind(root.join("dev/lxd/sock")).unwrap();

        let s = read_snapshot(&ReadOptions::new(root)).unwrap();
        assert_eq!(s.virt, "unavailable");
        assert!(s.virt_from.contains("pass --virt"), "{}", s.virt_from);
        assert_eq!(s.proc_cmdline.as_deref(), Some("ro quiet"));
        assert_eq!(s.pid1_cmdline.as_deref(), Some("/sbin/init ds=nocloud "));
        assert_eq!(
            s.dmi.product_uuid.as_deref(),
            Some("EC2E1916-9099-7CAF-FD21-012345ABCDEF")
        );
        assert_eq!(s.dmi.board_name.as_deref(), Some("\u{fffd}LXD"));
        assert_eq!(s.dmi.sys_vendor, None);
        assert_eq!(s.lxd_socket, Node::Socket);
        assert_eq!(
            s.virtio_ports,
            [
                VirtioPort {
                    port: "vport0p0".into(),
                    name: None
                },
                VirtioPort {
                    port: "vport0p1".into(),
                    name: Some("com.canonical.lxd".into())
                },
            ]
        );
        let seeds: Vec<(&str, bool, bool)> = s
            .seeds
            .iter()
            .map(|x| (x.dir.as_str(), x.meta_data, x.user_data))
            .collect();
        assert_eq!(
            seeds,
            [
                ("var/lib/cloud/seed/nocloud", true, false),
                ("var/lib/cloud/seed/nocloud-net", false, false),
                (
                    "writable/system-data/var/lib/cloud/seed/nocloud",
                    false,
                    false
                ),
                (
                    "writable/system-data/var/lib/cloud/seed/nocloud-net",
                    false,
                    true
                ),
            ]
        );
        assert_eq!(s.fs_labels, ["cidata"]);
        assert!(s.disabled_marker);
        let names: Vec<String> = s
            .cloud_config
            .iter()
            .map(|c| file_name(Path::new(&c.path)))
            .collect();
        assert_eq!(names, ["cloud.cfg", "10.cfg", "90.cfg"]);
        assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
        assert!(
            s.warnings[0].contains("bad.cfg: not UTF-8"),
            "{:?}",
            s.warnings
        );
        assert_eq!(s.leasehook_datasource_list, None);

        let s = read_snapshot(&ReadOptions::new(root).with_virt("lxc")).unwrap();
        assert_eq!((s.virt.as_str(), s.virt_from.as_str()), ("lxc", "--virt"));
        assert_eq!(s.kernel_cmdline(), Some("/sbin/init ds=nocloud "));
    }

    #[test]
    fn fifos_and_odd_nodes_do_not_hang_or_count() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("sys/class/dmi/id")).unwrap();
        fs::create_dir_all(root.join("etc/cloud")).unwrap();
        fs::create_dir_all(root.join("dev/lxd/sock")).unwrap();
        for fifo in [
            "sys/class/dmi/id/product_uuid",
            "etc/cloud/cloud.cfg",
            "run/systemd/container",
        ] {
            fs::create_dir_all(root.join(fifo).parent().unwrap()).unwrap();
            let ok = Command::new("mkfifo")
                .arg(root.join(fifo))
                .status()
                .unwrap();
            assert!(ok.success());
        }
        let s = read_snapshot(&ReadOptions::new(root).with_virt("kvm")).unwrap();
        assert_eq!(s.dmi.product_uuid, None);
        assert!(s.cloud_config.is_empty());
        assert_eq!(s.lxd_socket, Node::Other("directory".into()));
        assert!(
            s.warnings
                .iter()
                .any(|w| w.contains("cloud.cfg: not a regular file")),
            "{:?}",
            s.warnings
        );
        let d = detect(&ReadOptions::new(root).with_virt("kvm")).unwrap();
        assert!(d.datasource_list.is_empty());
        assert!(d.reasons["LXD"].contains("is not a socket"), "{d:#?}");
    }

    #[test]
    fn leasehook_config_explicit_or_below_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(
            root,
            "etc/leasehook/config.yaml",
            b"datasource_list: [LXD]\n",
        );
        let d = detect(&configured(root, crate::event::Env::new(), None).unwrap()).unwrap();
        assert_eq!(d.datasource_list, [SourceKind::Lxd]);
        assert!(
            d.list_from.ends_with("etc/leasehook/config.yaml line 1"),
            "{}",
            d.list_from
        );
        write(
            root,
            "etc/leasehook/config.d/50-nocloud.yaml",
            b"datasource_list: [NoCloud]\n",
        );
        let d = detect(&configured(root, crate::event::Env::new(), None).unwrap()).unwrap();
        assert_eq!(d.datasource_list, [SourceKind::NoCloud]);
        let env = [("LEASEHOOK_DATASOURCE_LIST".to_owned(), "Ec2".to_owned())].into();
        let d = detect(&configured(root, env, None).unwrap()).unwrap();
        assert_eq!(
            d.list_from,
            "datasource_list in environment LEASEHOOK_DATASOURCE_LIST"
        );

        let other = root.join("other.yaml");
        fs::write(&other, "datasource_list: [NoCloud, None]\n").unwrap();
        let d = detect(&configured(root, crate::event::Env::new(), Some(&other)).unwrap()).unwrap();
        assert_eq!(d.datasource_list, [SourceKind::NoCloud, SourceKind::None]);

        let e = configured(
            root,
            crate::event::Env::new(),
            Some(&root.join("missing.yaml")),
        )
        .unwrap_err();
        assert!(e.to_string().contains("missing.yaml"), "{e}");
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: runs cloud-init's own `ds-identify` (from the extracted 25.1.4
//! oracle tree) against a fake root, for the parity test and the benchmark.
//!
//! ds-identify honours `PATH_ROOT` for most of what it reads. It is sourced with
//! `DI_MAIN=noop`, then the probes that would look at this machine rather than the
//! root are pinned: `DI_VIRT` (else `systemd-detect-virt` of the host),
//! `DI_BLKID_EXPORT_OUT` (else the host's `blkid`), `is_socket_file` and
//! `is_disabled` (ds-identify reads `/dev/lxd/sock` and
//! `/etc/cloud/cloud-init.disabled` from the real `/`: the same tests, below the
//! root), and `dmi_decode` (never the host's `dmidecode`). `PATH_RUN` is pinned
//! below the root too. Then `main --force` runs; `<root>/run/cloud-init/cloud.cfg`
//! and `.ds-identify.result` hold the answer.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::workspace_root;

/// The shell script that sources ds-identify and runs it (arguments: root,
/// ds-identify, virt, blkid's `-o export` text).
pub const HARNESS: &str = r#"
PATH_ROOT=$1; export PATH_ROOT
PATH_RUN="$PATH_ROOT/run"; PATH_RUN_CI="$PATH_ROOT/run/cloud-init"
DI_LOG=stderr
DEBUG_LEVEL=${DEBUG_LEVEL:-2}
DI_MAIN=noop
. "$2"
DI_VIRT=$3
DI_BLKID_EXPORT_OUT=$4
is_socket_file() { [ -S "${PATH_ROOT}$1" ]; }
is_disabled() {
    [ -f "${PATH_ROOT}/etc/cloud/cloud-init.disabled" ] && return 0
    [ "${KERNEL_CMDLINE:-}" = "cloud-init=disabled" ] && return 0
    case "$DI_KERNEL_CMDLINE" in *cloud-init=disabled*) return 0;; esac
    return 1
}
dmi_decode() { return 1; }
main --force
"#;

/// blkid's `-o export` text for a root file system and no other.
pub const ROOT_FS_BLKID: &str = "DEVNAME=/dev/vda1\nUUID=0f0e0d0c-0000-4000-8000-000000000001\nTYPE=ext4\nLABEL=cloudimg-rootfs\n";

/// The extracted cloud-init 25.1.4 package (`LEASEHOOK_CLOUDINIT_ROOT`, else
/// `target/oracle/cloud-init-25.1.4/root`).
pub fn oracle_root() -> PathBuf {
    std::env::var_os("LEASEHOOK_CLOUDINIT_ROOT").map_or_else(
        || workspace_root().join("target/oracle/cloud-init-25.1.4/root"),
        PathBuf::from,
    )
}

/// ds-identify in the oracle tree.
pub fn ds_identify() -> PathBuf {
    oracle_root().join("usr/lib/cloud-init/ds-identify")
}

/// Writes [`HARNESS`] into `dir`; returns its path.
pub fn write_harness(dir: &Path) -> std::io::Result<PathBuf> {
    let p = dir.join("ds-identify-harness.sh");
    std::fs::write(&p, HARNESS)?;
    Ok(p)
}

/// The command that runs ds-identify on `root` (with a clean environment).
pub fn command(
    harness: &Path,
    ds_identify: &Path,
    root: &Path,
    virt: &str,
    blkid: &str,
) -> Command {
    let mut c = Command::new("/bin/sh");
    c.arg(harness)
        .arg(root)
        .arg(ds_identify)
        .arg(virt)
        .arg(blkid)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
    c
}

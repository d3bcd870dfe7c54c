// SPDX-License-Identifier: Apache-2.0
//! `leasehook detect`: decides, without network, which datasources the instance has
//! (as cloud-init's ds-identify does) and prints the decision as JSON.

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use clap::Args;
use leasehook_core::config;
use leasehook_core::source::detect::{ReadOptions, detect};

/// Decide which datasources this instance has, without network, and print the
/// decision as JSON.
///
/// Decides the way cloud-init's ds-identify does: EC2 from DMI (`product_uuid` or
/// /sys/hypervisor/uuid starting with `ec2`, also byte-swapped), LXD from
/// /dev/lxd/sock or, under kvm/qemu, DMI `board_name` and virtio port names,
/// NoCloud from seed folders, a `cidata` filesystem, the kernel command line or the
/// DMI serial; `datasource_list` from the configuration and `ds=` on the kernel
/// command line are honoured. The JSON holds `datasource_list` (what to try, in
/// order, ending in `None`; empty when none was found), `checks` (each check that
/// ran: found, maybe, not-found), `reasons` (why, per datasource), `list_from`,
/// `virt`, `disabled` and `warnings`.
///
/// Example: leasehook detect --root /tmp/fakeroot --virt kvm
#[derive(Debug, Args)]
pub(crate) struct DetectArgs {
    /// Read every path below DIR instead of / (the LXD socket and cloud-init's
    /// disabled marker too).
    #[arg(long, value_name = "DIR", env = "LEASEHOOK_ROOT", default_value = "/")]
    root: PathBuf,

    /// Assume this virtualisation, as systemd-detect-virt names it (kvm, qemu, xen,
    /// lxc, docker, none, ...), instead of detecting it. Below a root other than /
    /// it is not detected: without --virt it is "unavailable".
    #[arg(long, value_name = "NAME")]
    virt: Option<String>,

    /// Read this configuration file instead of ROOT/etc/leasehook/config.yaml and
    /// config.d (detection reads its `datasource_list`; /dev/null: none).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

pub(crate) fn run(args: &DetectArgs) -> anyhow::Result<String> {
    if !args.root.is_dir() {
        bail!("--root {:?} is not a folder", args.root);
    }
    let layers = config::Layers::from_env(leasehook_core::hook::process_env())
        .with_root(Some(args.root.clone()))
        .with_file(args.config.clone());
    let loaded = config::load(&layers).context("failed to detect the datasource")?;
    let mut options = ReadOptions::new(&args.root).with_datasource_list(loaded.datasource_list());
    if let Some(virt) = &args.virt {
        crate::init_cmd::check_virt(virt)?;
        options = options.with_virt(virt);
    }
    let detection = detect(&options).context("failed to detect the datasource")?;
    let json = serde_json::to_string_pretty(&detection).context("failed to write JSON")?;
    Ok(json + "\n")
}

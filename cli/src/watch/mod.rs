// SPDX-License-Identifier: Apache-2.0
//! Performs IO: `leasehook watch`, the resident watcher (`leasehook-watch.service`;
//! SPEC §3.10 and §4.5).
//!
//! One process, one thread per follower, all stopped by the same flag (SIGTERM,
//! SIGINT). Each follower is a file of its own with one entry point
//! `follow(&Context, &AtomicBool)`, started here when it applies to this machine:
//!
//! * [`heal`]: self-healing, on every machine: puts back the rules, routes and
//!   addresses a record says must exist when someone else removes them;
//! * [`lxd`]: the LXD/Incus instance's events (config changes, NIC hot-plug),
//!   only on an LXD or Incus instance ([`lxd_applies`]);
//! * [`hotplug`]: a NIC the hooks just routed for the first time, refreshed every
//!   5 s for a minute (`leasehook_core::cadence`);
//! * [`live`]: the cloud's NIC list followed live (GCE's long poll), only when
//!   the provider's row says it can be ([`live::applies`]).

mod heal;
mod hotplug;
mod live;
mod lxd;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context as _;
use leasehook_core::config::Loaded;
use leasehook_core::hook::{self, HookConfig};

use crate::cli::WatchArgs;

/// What every follower is handed: the root, the configuration, the flags.
pub(crate) struct Context<'a> {
    /// Prefix of every path (`/` in production).
    pub(crate) root: &'a Path,
    /// The configuration `main` loaded.
    pub(crate) loaded: &'a Loaded,
    /// The hook's part of it.
    pub(crate) cfg: HookConfig,
    /// `leasehook watch`'s flags.
    pub(crate) args: &'a WatchArgs,
}

/// `watch` below `root`, with the configuration `main` loaded: runs every
/// follower until SIGTERM or SIGINT.
pub(crate) fn run(args: &WatchArgs, root: &Path, loaded: &Loaded) -> anyhow::Result<String> {
    let cfg = HookConfig::from_settings(&loaded.settings);
    if let Some(why) = hook::inert(&cfg) {
        log::debug!("{why}");
        return Ok(String::new());
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&stop)).context("signal handler")?;
    }
    let ctx = Context {
        root,
        loaded,
        cfg,
        args,
    };
    let lxd = lxd_applies(root);
    if !lxd {
        log::debug!("not an LXD or Incus instance: LXD events not followed");
    }
    std::thread::scope(|s| {
        let (ctx, stop) = (&ctx, &*stop);
        s.spawn(move || heal::follow(ctx, stop));
        if lxd {
            s.spawn(move || lxd::follow(ctx, stop));
        }
        s.spawn(move || hotplug::follow(ctx, stop));
        if let Some(cloud) = live::applies(ctx) {
            s.spawn(move || live::follow(ctx, cloud, stop));
        }
    });
    Ok(String::new())
}

/// The paths whose presence below the root makes this an LXD or Incus instance:
/// the dev-lxd or Incus socket, or (in a VM, whose agent makes the socket later)
/// one of the virtio ports. The same list the unit's conditions held before the
/// watcher ran everywhere.
const LXD_PATHS: [&str; 5] = [
    "dev/lxd/sock",
    "dev/incus/sock",
    "dev/virtio-ports/com.canonical.lxd",
    "dev/virtio-ports/org.linuxcontainers.lxd",
    "dev/virtio-ports/org.linuxcontainers.incus",
];

/// Whether the LXD/Incus follower applies below `root`: one of [`LXD_PATHS`]
/// exists, or the boot stage found the LXD datasource this boot.
fn lxd_applies(root: &Path) -> bool {
    LXD_PATHS.iter().any(|p| root.join(p).exists())
        || leasehook_core::boot::state::read(
            root,
            leasehook_core::boot::state::boot_id(root).as_deref(),
        )
        .and_then(|b| b.datasource)
        .is_some_and(|d| d == leasehook_core::source::SourceKind::Lxd)
}

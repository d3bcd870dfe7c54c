// SPDX-License-Identifier: Apache-2.0
//! Performs IO: `leasehook watch`'s follower of dev-lxd's events (SPEC §4.5,
//! docs/lxd.md).
//!
//! The stream itself (connection, backoff, coalescing, stop) is
//! `leasehook_core::source::lxd::stream`; this file is what the events make it do:
//!
//! * a `user.*` / `cloud-init.*` config change (or a reconnection): fetch the
//!   datasource again and, when what it says changed, write both instance-data
//!   files (the same rendering and redaction as `init`, each file atomically) and
//!   the cache record — only while boot.json says this boot's data came from LXD
//!   and the instance-id is the same (a new instance-id is left to the next boot);
//! * a NIC device added or updated: its MAC from `/1.0/devices` (`hwaddr`), then,
//!   once a link with that MAC exists (looked at every tick, for at most
//!   `--link-wait` seconds), the refresh path the timer runs, for that interface;
//!   a NIC removed: once its link is gone, the same refresh (which takes its
//!   routing away).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use leasehook_core::apply::Applier as _;
use leasehook_core::apply::netlink::NetlinkApplier;
use leasehook_core::apply::state::{self as apply_state, Paths};
use leasehook_core::boot::{run as boot_run, state as boot_state};
use leasehook_core::cache::Cache;
use leasehook_core::cache::record::CacheRecord;
use leasehook_core::constants::INSTANCE_DATA_SENSITIVE;
use leasehook_core::hook::{self, HookConfig, RefreshOutcome};
use leasehook_core::instance_data::Origin;
use leasehook_core::instance_data::{self, Provenance};
use leasehook_core::model::{IfName, MacAddr};

use super::Context;
use leasehook_core::source::detect::{ReadOptions, read_snapshot};
use leasehook_core::source::lxd::events::{DeviceAction, NicWork, Work, nic_hwaddrs};
use leasehook_core::source::lxd::stream::{Handler, Watcher};
use leasehook_core::source::lxd::{Lxd, socket_below};
use leasehook_core::source::{Datasource as _, InstanceData, SourceKind};
use serde_json::Value;

/// How long a refresh that failed waits before it is tried again.
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// A NIC waiting for its link to appear (or go).
#[derive(Debug, Clone)]
struct Waiting {
    mac: MacAddr,
    present: bool,
    until: Instant,
    next_try: Instant,
}

struct WatchHandler {
    root: PathBuf,
    socket: PathBuf,
    virt: String,
    lxd: Lxd,
    cfg: HookConfig,
    link_wait: Duration,
    /// Device name → MAC, as `/1.0/devices` last said (a removed device's MAC is
    /// no longer served).
    known: BTreeMap<String, MacAddr>,
    waiting: BTreeMap<String, Waiting>,
    applier: Option<NetlinkApplier>,
    /// A rewrite that failed (the socket went away mid-fetch, ...): its keys, when
    /// to try again, and the pause after that (doubling to a minute).
    retry: Option<(Vec<String>, Instant, Duration)>,
}

/// Follows the instance's LXD/Incus events below `ctx.root` until `stop` is set.
pub(super) fn follow(ctx: &Context<'_>, stop: &AtomicBool) {
    let virt = read_snapshot(
        &ReadOptions::new(ctx.root).with_datasource_list(ctx.loaded.datasource_list()),
    )
    .map_or_else(
        |e| {
            log::warn!("{e}");
            "unavailable".to_owned()
        },
        |s| s.virt,
    );
    let socket = socket_below(ctx.root);
    let mut handler = WatchHandler {
        root: ctx.root.to_path_buf(),
        lxd: Lxd::at_socket(&socket).with_virt(&virt),
        socket: socket.clone(),
        virt,
        cfg: ctx.cfg.clone(),
        link_wait: Duration::from_secs(ctx.args.link_wait),
        known: BTreeMap::new(),
        waiting: BTreeMap::new(),
        applier: None,
        retry: None,
    };
    let stats = Watcher::new(socket).run(stop, &mut handler);
    log::info!(
        "LXD events: stopped ({} event(s) in {} connection(s), {} batch(es), {} outage(s))",
        stats.events,
        stats.connections,
        stats.batches,
        stats.outages
    );
}

/// The parts of an instance-data document the datasource decides.
fn same_data(old: &Value, new: &Value) -> bool {
    ["ds", "v1", "userdata", "vendordata"]
        .iter()
        .all(|k| old.get(k) == new.get(k))
}

impl WatchHandler {
    /// Fetches the datasource again and writes instance-data when it changed.
    fn rewrite(&self, keys: &[String]) -> anyhow::Result<()> {
        let why = if keys.is_empty() {
            "resync after connecting".to_owned()
        } else {
            format!("config {} changed", keys.join(", "))
        };
        let boot = boot_state::read(&self.root, boot_state::boot_id(&self.root).as_deref());
        let Some(boot) = boot.filter(|b| b.datasource == Some(SourceKind::Lxd)) else {
            log::warn!(
                "LXD events: {why}, but this boot's data is not LXD's (has `leasehook init` run?); instance-data left alone"
            );
            return Ok(());
        };
        let data: InstanceData = self.lxd.fetch()?;
        if boot.instance_id.as_deref() != Some(data.instance_id.as_str()) {
            log::warn!(
                "LXD events: {why}: the instance-id is now {:?} (this boot: {:?}); instance-data left alone until the next boot decides",
                data.instance_id,
                boot.instance_id
            );
            return Ok(());
        }
        let now = apply_state::unix_ms();
        let prov = Provenance {
            origin: Origin::Fetched,
            stage: boot.stage,
            cache: format!("fetched again by leasehook watch ({why})"),
            fetched_at_ms: Some(now),
            decided_at_ms: boot.decided_at_ms,
        };
        let new = instance_data::document(&data, &prov, &leasehook_core::source::region_ids());
        if let Some(old) = self.current_document()
            && same_data(&old, &new)
        {
            log::debug!("LXD events: {why}; instance-data unchanged");
            return Ok(());
        }
        boot_run::publish(&self.root, &data, &prov)?;
        if let Err(e) = Cache::new(&self.root).store(&CacheRecord::new(data, now)) {
            log::warn!("{e}; the cache keeps the data of the boot");
        }
        log::info!("LXD events: {why}; instance-data rewritten");
        Ok(())
    }

    /// Rewrites, or on failure (logged once until it works) tries again after
    /// `pause`.
    fn try_rewrite(&mut self, keys: Vec<String>, pause: Duration) {
        match self.rewrite(&keys) {
            Ok(()) => {}
            Err(e) => {
                if pause == RETRY_PAUSE {
                    log::warn!("LXD events: instance-data not rewritten: {e:#}; trying again");
                } else {
                    log::debug!("LXD events: instance-data not rewritten: {e:#}");
                }
                self.retry = Some((keys, Instant::now() + pause, pause));
            }
        }
    }

    /// The sensitive instance-data document as written now (`None`: missing or
    /// unreadable; then it is written).
    fn current_document(&self) -> Option<Value> {
        let dir = boot_state::run_dir_if_present(&self.root).ok().flatten()?;
        let bytes = dir
            .read(INSTANCE_DATA_SENSITIVE, 128 * 1024 * 1024)
            .ok()
            .flatten()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// `/1.0/devices`' NICs, remembered; `None` when they cannot be read.
    fn nic_macs(&mut self) -> Option<BTreeMap<String, MacAddr>> {
        let devices = match self.lxd.devices() {
            Ok(Some(d)) => d,
            Ok(None) => {
                log::warn!(
                    "LXD events: this LXD serves no /1.0/devices; NICs are left to the DHCP hooks"
                );
                return None;
            }
            Err(e) => {
                log::warn!("LXD events: {e}");
                return None;
            }
        };
        let macs: BTreeMap<String, MacAddr> = nic_hwaddrs(&devices)
            .into_iter()
            .filter_map(|(name, mac)| mac.parse().ok().map(|m| (name, m)))
            .collect();
        self.known.extend(macs.clone());
        Some(macs)
    }

    fn wait_for(&mut self, device: &str, mac: MacAddr, present: bool) {
        let now = Instant::now();
        log::info!(
            "LXD events: NIC {device} ({mac}) {}; waiting for its link to {}",
            if present {
                "added or updated"
            } else {
                "removed"
            },
            if present { "appear" } else { "go" }
        );
        self.waiting.insert(
            device.to_owned(),
            Waiting {
                mac,
                present,
                until: now + self.link_wait,
                next_try: now,
            },
        );
    }

    fn nics(&mut self, nics: Vec<NicWork>) {
        for nic in nics {
            match nic {
                NicWork::One(device, DeviceAction::Removed) => match self.known.remove(&device) {
                    Some(mac) => self.wait_for(&device, mac, false),
                    None => log::info!(
                        "LXD events: NIC {device} removed; its MAC was never served: left to the refresh timer"
                    ),
                },
                NicWork::One(device, _) => {
                    let Some(macs) = self.nic_macs() else {
                        continue;
                    };
                    match macs.get(&device) {
                        Some(mac) => self.wait_for(&device, *mac, true),
                        None => log::warn!(
                            "LXD events: NIC {device}: /1.0/devices has no hwaddr for it; left to the DHCP hook"
                        ),
                    }
                }
                NicWork::All => {
                    let before = self.known.clone();
                    let Some(macs) = self.nic_macs() else {
                        continue;
                    };
                    for (device, mac) in &macs {
                        self.wait_for(device, *mac, true);
                    }
                    for (device, mac) in before {
                        if !macs.contains_key(&device) {
                            self.known.remove(&device);
                            self.wait_for(&device, mac, false);
                        }
                    }
                }
            }
        }
    }

    /// The interface to refresh for a MAC: the recorded one (it may have another
    /// name now), else the link's.
    fn interface_for(&self, mac: MacAddr, link: Option<&IfName>) -> Option<IfName> {
        let (states, _) = apply_state::list_states(&Paths::new(&self.root));
        states
            .into_iter()
            .find(|s| s.mac == mac)
            .map(|s| s.name)
            .or_else(|| link.cloned())
    }

    /// The one place the watch changes routing: the refresh path the timer runs,
    /// for one interface. `Err`: try again later.
    fn refresh_nic(&self, ifname: &IfName) -> anyhow::Result<()> {
        for outcome in hook::refresh(Some(ifname), &self.cfg)? {
            match outcome {
                RefreshOutcome::Refreshed(name, report) => {
                    log::info!(
                        "LXD events: {name} refreshed ({} change(s))",
                        report.ops.len()
                    );
                }
                RefreshOutcome::LinkGone(name, report) => log::info!(
                    "LXD events: {name}: link gone, {} change(s)",
                    report.ops.len()
                ),
                RefreshOutcome::Renamed { from, to, .. } => {
                    log::info!("LXD events: {from} is {to} now; routing moved");
                }
                RefreshOutcome::Addressed(name, report)
                | RefreshOutcome::Unlisted(name, report) => {
                    log::info!(
                        "LXD events: {name} configured from the metadata ({} change(s))",
                        report.ops.len()
                    );
                }
                RefreshOutcome::Kept(name, why) => {
                    log::info!("LXD events: {name}: unchanged ({why})");
                }
                RefreshOutcome::Unchecked(name, why) => {
                    log::warn!("LXD events: {name}: not checked: {why}");
                }
            }
        }
        Ok(())
    }

    /// Looks at the NICs that wait for their links.
    fn check_links(&mut self) {
        if self.waiting.is_empty() {
            return;
        }
        let now = Instant::now();
        if self.applier.is_none() {
            match NetlinkApplier::try_new() {
                Ok(a) => self.applier = Some(a),
                Err(e) => {
                    log::warn!("LXD events: {e}");
                    return;
                }
            }
        }
        let links = match self.applier.as_mut().map(NetlinkApplier::links) {
            Some(Ok(l)) => l,
            Some(Err(e)) => {
                log::warn!("LXD events: {e}");
                return;
            }
            None => return,
        };
        let waiting = std::mem::take(&mut self.waiting);
        for (device, w) in waiting {
            let link = links.iter().find(|l| l.mac == Some(w.mac)).map(|l| &l.name);
            let ready = link.is_some() == w.present;
            if !ready || now < w.next_try {
                if now >= w.until {
                    log::warn!(
                        "LXD events: NIC {device} ({}): its link did not {} within {:?}; left to the refresh timer",
                        w.mac,
                        if w.present { "appear" } else { "go" },
                        self.link_wait
                    );
                } else {
                    self.waiting.insert(device, w);
                }
                continue;
            }
            let Some(ifname) = self.interface_for(w.mac, link) else {
                log::info!(
                    "LXD events: NIC {device} ({}): nothing recorded; nothing to do",
                    w.mac
                );
                continue;
            };
            if let Err(e) = self.refresh_nic(&ifname) {
                if now + RETRY_PAUSE < w.until {
                    log::warn!("LXD events: {ifname}: {e:#}; trying again");
                    self.waiting.insert(
                        device,
                        Waiting {
                            next_try: now + RETRY_PAUSE,
                            ..w
                        },
                    );
                } else {
                    log::warn!("LXD events: {ifname}: {e:#}; left to the refresh timer");
                }
            }
        }
    }
}

impl Handler for WatchHandler {
    fn work(&mut self, work: Work) {
        if work.rewrite.as_ref().is_some_and(Vec::is_empty) {
            // A (re)connection: a new client, so that no kept-alive connection to
            // the server before the outage is used again.
            self.lxd = Lxd::at_socket(&self.socket).with_virt(&self.virt);
        }
        if let Some(keys) = work.rewrite.clone() {
            self.retry = None;
            self.try_rewrite(keys, RETRY_PAUSE);
        }
        if work.rewrite.as_ref().is_some_and(Vec::is_empty) && self.known.is_empty() {
            // First connection (or a reconnection): learn the NICs' MACs, so that a
            // removal can be matched to its link.
            let _ = self.nic_macs();
        }
        self.nics(work.nics);
        self.check_links();
    }

    fn tick(&mut self) {
        if let Some((keys, at, pause)) = self.retry.take() {
            if Instant::now() >= at {
                self.try_rewrite(keys, (pause * 2).min(Duration::from_secs(60)));
            } else {
                self.retry = Some((keys, at, pause));
            }
        }
        self.check_links();
    }
}

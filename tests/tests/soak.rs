// SPDX-License-Identifier: Apache-2.0
//! The soak test (issue 10, item 3): four NICs in a network namespace, many random
//! DHCP events fed to the real `leasehook-dhclient` shim with a synthetic
//! dhclient-script environment, against the IMDS emulator (in this process, bound
//! to 169.254.169.254 inside its own router namespace), whose metadata for a NIC or
//! address the test makes appear only a random delay after the event, so some
//! events hand over to the detached worker.
//!
//! * Events: BOUND, RENEW, REBIND, RELEASE, EXPIRE and BOUND6, RENEW6, RELEASE6,
//!   EXPIRE6, some fired at once on one NIC (a DHCPv4 and a DHCPv6 event, or the same
//!   lease twice) and, by a shared time grid, at once on several NICs.
//! * Before an event the test does what dhclient-script does before its exit hook:
//!   it puts the leased address on the link (flushing the family's addresses when the
//!   lease changed) and takes it away on RELEASE/EXPIRE.
//! * The expected kernel state is computed by leasehook-core's planner from the same
//!   inputs (the metadata the emulator serves for the leased address, the link, the
//!   lease), never from what the hook recorded; which events took effect follows
//!   from the schedule and the clock when each step fires (see `decide`).
//! * Checked at every quiet point of a NIC and at the end: leasehook's rules, routes
//!   (protocol 176) and addresses equal the plan of the NIC's last effective event per
//!   family; at the end also: no duplicate rule, no worker alive, no lock held, no
//!   pending hand-over, every hook exited 0 within its synchronous budget, and each
//!   hook's peak RSS (`/usr/bin/time -f %M`, wait4's `ru_maxrss`) below 8 MiB.
//!
//! Size: `LEASEHOOK_SOAK_EVENTS` (default 200; `scripts/test.sh` runs 60), seed:
//! `LEASEHOOK_SOAK_SEED` (printed on every run, so a failure can be replayed).
//! See `docs/soak.md`. Compiled with the `netns` feature; needs root and fails,
//! never skips, without it.

#![cfg(feature = "netns")]
#![cfg(test)]
#![allow(
    clippy::too_many_lines,
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehook_core::model::{Family, IfName, Lease, Link, MacAddr, Reason};
use leasehook_core::plan::{InterfaceLease, PlanConfig, PlanInput, plan};
use leasehook_tests::Rng;
use leasehook_tests::emulator::{Config, Emulator};
use leasehook_tests::netns::{Netns, TempDir, hook_link, sibling_bin};
use leasehook_tests::world::wait_until;
use serde_json::{Value, json};

/// NICs of the instance: `eth0` (the primary, device-number 0) to `eth3`.
const NICS: usize = 4;
/// `LEASEHOOK_IMDS_SYNC_BUDGET_S`: how long a hook may hold the DHCP client.
const SYNC: f64 = 1.0;
/// `LEASEHOOK_IMDS_BUDGET_S`: the whole wait (never reached: delays are shorter).
const BUDGET: f64 = 20.0;
/// Distance kept from every timing boundary, so that the schedule alone decides
/// which events take effect (see `decide`).
const MARGIN: f64 = 0.4;
/// The settle time after IMDS agrees: the worker polls at least every 2 s (jitter
/// included), then applies.
const SETTLE: f64 = 2.6;
/// What a hook may take beyond the synchronous budgets it waits for (start-up,
/// netlink writes, a loaded machine).
const HOLD_SLACK: f64 = 1.0;
/// The time grid of the schedule: NICs whose steps fall on the same point fire at
/// once.
const GRID: f64 = 0.25;
/// How long a NIC may take to become quiet (no hook, hand-over or worker): the
/// whole budget and then some.
const QUIET_TIMEOUT: f64 = BUDGET + 15.0;
/// Peak resident memory allowed for one hook process.
const RSS_LIMIT_KB: u64 = 8 * 1024;

fn mac(n: usize) -> String {
    format!("02:00:00:77:00:{:02x}", n + 1)
}

fn ifname(n: usize) -> String {
    format!("eth{n}")
}

fn table(n: usize) -> u32 {
    10_000 + n as u32
}

fn fam_index(f: Family) -> usize {
    usize::from(f == Family::V6)
}

/// The two leases DHCP may hand out per NIC and family.
fn pool(n: usize, f: Family) -> [IpAddr; 2] {
    let n8 = n as u8;
    match f {
        Family::V4 => [
            IpAddr::V4(Ipv4Addr::new(10, 77, n8, 10)),
            IpAddr::V4(Ipv4Addr::new(10, 77, n8, 20)),
        ],
        Family::V6 => [
            IpAddr::V6(Ipv6Addr::new(0xfd00, 0x77, n as u16, 0, 0, 0, 0, 0x10)),
            IpAddr::V6(Ipv6Addr::new(0xfd00, 0x77, n as u16, 0, 0, 0, 0, 0x20)),
        ],
    }
}

/// What IMDS lists (`local-ipv4s` / `ipv6s`) once it agrees with a lease of `a`:
/// the leased address first, then secondary addresses that no lease ever uses.
fn md_list(n: usize, a: IpAddr) -> Vec<String> {
    let secondaries: &[u8] = if a == pool(n, Family::of(&a))[0] {
        &[0x11]
    } else {
        &[0x21, 0x22]
    };
    let mut out = vec![a.to_string()];
    for s in secondaries {
        out.push(match a {
            IpAddr::V4(v) => {
                let [net @ .., _] = v.octets();
                Ipv4Addr::from([net[0], net[1], net[2], *s]).to_string()
            }
            IpAddr::V6(v) => {
                let mut seg = v.segments();
                seg[7] = u16::from(*s);
                Ipv6Addr::from(seg).to_string()
            }
        });
    }
    out
}

fn nic_folder(n: usize, v4: IpAddr, v6: IpAddr) -> Value {
    json!({
        "device-number": n.to_string(),
        "interface-id": format!("eni-00000000000077{n:02}"),
        "mac": mac(n),
        "local-ipv4s": md_list(n, v4),
        "subnet-ipv4-cidr-block": format!("10.77.{n}.0/24"),
        "ipv6s": md_list(n, v6),
        "subnet-ipv6-cidr-blocks": format!("fd00:77:{n}::/64"),
    })
}

/// The metadata tree at the start: every NIC lists its first pool addresses.
fn tree() -> Value {
    let macs: serde_json::Map<String, Value> = (0..NICS)
        .map(|n| {
            (
                mac(n),
                nic_folder(n, pool(n, Family::V4)[0], pool(n, Family::V6)[0]),
            )
        })
        .collect();
    json!({"latest": {"api": {}, "meta-data": {
        "instance-id": "i-0000000000soak",
        "mac": mac(0),
        "network": {"interfaces": {"macs": macs}},
    }}})
}

// ---------------------------------------------------------------------------------
// The schedule: generated from the seed before anything runs.

/// One DHCP event as dhclient-script would hand it to its exit hook.
#[derive(Debug, Clone)]
struct Ev {
    /// Unique per event of the schedule (copies fired at once share it).
    id: usize,
    nic: usize,
    family: Family,
    /// dhclient's `reason`.
    reason: &'static str,
    /// The lease now in force (`new_*`), for apply reasons.
    new: Option<IpAddr>,
    /// The lease before (`old_*`).
    old: Option<IpAddr>,
    /// How long after the event IMDS's address list switches to `new`, when it
    /// lists another lease's.
    delay: f64,
    /// How long after the NIC's first event its metadata folder appears.
    appear_delay: f64,
    /// When IMDS would agree with `new` if the step fired on time (the generator's
    /// plan; the run computes it again from when the step really fires).
    agree: f64,
}

impl Ev {
    fn applies(&self) -> bool {
        self.new.is_some()
    }
}

/// Events fired at once on one NIC.
#[derive(Debug, Clone)]
struct Step {
    /// When to fire (seconds since the start).
    t: f64,
    events: Vec<Ev>,
}

/// When IMDS's address list of one NIC and family changes: `(time, leased address)`.
type Switches = Vec<(f64, IpAddr)>;

#[derive(Debug)]
struct Schedule {
    /// Per NIC, its steps in time order.
    steps: Vec<Vec<Step>>,
}

/// What IMDS says of one NIC over time: when its folder appears, and per family
/// when its address list switches to which lease's.
#[derive(Debug, Clone)]
struct Timeline {
    appear: Option<f64>,
    switches: [Switches; 2],
}

/// What one apply event does to IMDS, and when IMDS first agrees with it.
#[derive(Debug, Clone, Copy)]
struct Effect {
    agree: f64,
    /// The NIC's folder appears then (its first event).
    appear: Option<f64>,
    /// The family's list switches to the event's lease then.
    switch: Option<f64>,
}

impl Timeline {
    fn new(n: usize) -> Self {
        Self {
            // The primary's folder is there from the start; the others hot-plug.
            appear: (n == 0).then_some(0.0),
            switches: [
                vec![(0.0, pool(n, Family::V4)[0])],
                vec![(0.0, pool(n, Family::V6)[0])],
            ],
        }
    }

    /// An apply event of lease `a` at `t`: the folder appears `appear_delay` after
    /// the NIC's first event; the list switches to `a` `delay` later (at least 0.3 s
    /// after the switch before, so switches keep their order) unless its last switch
    /// is to `a` already. IMDS agrees at the first time at or after `t` when the
    /// folder is there and the list is `a`'s. A switch away from `a` only comes with
    /// a later event, which supersedes this one or waits until it took effect.
    fn apply(&mut self, a: IpAddr, t: f64, delay: f64, appear_delay: f64) -> Effect {
        let mut effect = Effect {
            agree: f64::INFINITY,
            appear: None,
            switch: None,
        };
        let appear = *self.appear.get_or_insert_with(|| {
            effect.appear = Some(t + appear_delay);
            t + appear_delay
        });
        let sw = &mut self.switches[fam_index(Family::of(&a))];
        if sw.last().is_none_or(|(_, last)| *last != a) {
            let after = sw.last().map_or(0.0, |(s, _)| s + 0.3);
            let at = (t + delay).max(after);
            sw.push((at, a));
            effect.switch = Some(at);
        }
        let from = t.max(appear);
        effect.agree = sw
            .iter()
            .enumerate()
            .filter(|(_, (_, addr))| *addr == a)
            .filter_map(|(i, (s, _))| {
                let end = sw.get(i + 1).map_or(f64::INFINITY, |(e, _)| *e);
                (end > from).then_some(s.max(from))
            })
            .fold(f64::INFINITY, f64::min);
        effect
    }
}

fn grid(t: f64) -> f64 {
    (t / GRID).ceil() * GRID
}

fn uniform(rng: &mut Rng, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * (rng.below(1_000_000) as f64 / 1_000_000.0)
}

/// A propagation delay that is clearly inside the synchronous budget or clearly
/// beyond it (never near the boundary, where the outcome would be up to chance).
fn delay(rng: &mut Rng) -> f64 {
    if rng.chance(30) {
        uniform(rng, 0.1, SYNC - MARGIN - 0.1)
    } else {
        uniform(rng, SYNC + MARGIN + 0.1, SYNC + 2.5)
    }
}

/// The per-NIC generator state.
struct NicGen {
    n: usize,
    /// dhclient's lease per family.
    lease: [Option<IpAddr>; 2],
    /// IMDS, as planned.
    timeline: Timeline,
    ids: usize,
}

impl NicGen {
    /// A random event of `family` at `t`, as dhclient would send it next.
    fn event(&mut self, rng: &mut Rng, family: Family, t: f64) -> Ev {
        let fi = fam_index(family);
        let cur = self.lease[fi];
        let v6 = family == Family::V6;
        let pick = |rng: &mut Rng, n| pool(n, family)[usize::from(rng.chance(50))];
        let (reason, new) = match cur {
            None => (if v6 { "BOUND6" } else { "BOUND" }, Some(pick(rng, self.n))),
            Some(a) => match rng.below(100) {
                0..40 => (
                    match (v6, rng.chance(50)) {
                        (true, _) => "RENEW6",
                        (false, true) => "RENEW",
                        (false, false) => "REBIND",
                    },
                    Some(a),
                ),
                40..65 => (if v6 { "BOUND6" } else { "BOUND" }, Some(pick(rng, self.n))),
                _ => (
                    match (v6, rng.chance(50)) {
                        (true, true) => "RELEASE6",
                        (true, false) => "EXPIRE6",
                        (false, true) => "RELEASE",
                        (false, false) => "EXPIRE",
                    },
                    None,
                ),
            },
        };
        let (switch_delay, appear_delay) = (delay(rng), delay(rng));
        let agree = new.map_or(t, |a| {
            self.timeline.apply(a, t, switch_delay, appear_delay).agree
        });
        self.lease[fi] = new;
        self.ids += 1;
        Ev {
            id: self.n * 100_000 + self.ids,
            nic: self.n,
            family,
            reason,
            new,
            old: cur,
            delay: switch_delay,
            appear_delay,
            agree,
        }
    }
}

fn random_family(rng: &mut Rng) -> Family {
    if rng.chance(50) {
        Family::V4
    } else {
        Family::V6
    }
}

fn generate(seed: u64, events: usize) -> Schedule {
    let mut rng = Rng::new(seed);
    let mut steps = Vec::new();
    for n in 0..NICS {
        let quota = events / NICS + usize::from(n < events % NICS);
        let mut g = NicGen {
            n,
            lease: [None, None],
            timeline: Timeline::new(n),
            ids: 0,
        };
        let mut list: Vec<Step> = Vec::new();
        let mut t = grid(uniform(&mut rng, 0.3, 1.0));
        let mut count = 0;
        while count < quota {
            let left = quota - count;
            let kind = rng.below(100);
            let mut evs = Vec::new();
            if kind < 15 && left >= 2 {
                // A DHCPv4 and a DHCPv6 event at once: kept only when both are settled
                // within their synchronous wait, so that their order (decided by the
                // lock) cannot matter.
                let saved = (g.lease, g.timeline.clone());
                let a = g.event(&mut rng, Family::V4, t);
                let b = g.event(&mut rng, Family::V6, t);
                if [&a, &b].iter().all(|e| e.agree <= t + SYNC - MARGIN) {
                    evs = vec![a, b];
                } else {
                    (g.lease, g.timeline) = saved;
                }
            } else if kind < 30 && left >= 2 {
                // The same event two or three times at once: one lease, so any order
                // the lock picks ends in the same plan.
                let fam = random_family(&mut rng);
                let first = g.event(&mut rng, fam, t);
                if first.applies() {
                    let copies = 1 + usize::from(left >= 3 && rng.chance(40));
                    for _ in 0..copies {
                        evs.push(first.clone());
                    }
                    evs.push(first);
                } else {
                    evs.push(first);
                }
            }
            if evs.is_empty() {
                let fam = random_family(&mut rng);
                evs.push(g.event(&mut rng, fam, t));
            }
            count += evs.len();
            // The next step: before this step's worker can apply (it is superseded), or
            // after it has (it took effect), or soon after a step settled at once.
            let waits_end = t + SYNC * evs.len() as f64;
            let handover = evs
                .iter()
                .filter(|e| e.applies() && e.agree > t + SYNC - MARGIN)
                .map(|e| e.agree)
                .fold(f64::NEG_INFINITY, f64::max);
            let next = if handover.is_finite() {
                let latest = handover - MARGIN - 0.3;
                if rng.chance(60) && latest >= t + 0.25 && handover >= waits_end + MARGIN {
                    uniform(&mut rng, t + 0.25, latest)
                } else {
                    handover + SETTLE + uniform(&mut rng, 0.0, 0.75)
                }
            } else {
                t + uniform(&mut rng, 0.25, 2.0)
            };
            list.push(Step { t, events: evs });
            t = grid(next);
        }
        steps.push(list);
    }
    Schedule { steps }
}

// ---------------------------------------------------------------------------------
// The world: a router namespace with the emulator, an instance namespace with four
// NICs and a management link to IMDS for requests that are not bound to a NIC.

struct Soak {
    router: Netns,
    inst: Netns,
    dir: TempDir,
    root: PathBuf,
    emulator: Option<Emulator>,
}

impl Soak {
    fn new() -> Self {
        let router = Netns::new("soak-r");
        let inst = Netns::new("soak-i");
        let dir = TempDir::new("soak");
        let root = dir.0.join("root");
        fs::create_dir_all(&root).unwrap();
        for ns in [&router, &inst] {
            ns.sysctl("net.ipv6.conf.all.accept_dad", "0");
            ns.sysctl("net.ipv6.conf.default.accept_dad", "0");
            ns.sysctl("net.ipv6.conf.default.accept_ra", "0");
        }
        for n in 0..NICS {
            let (gw, eth) = (format!("gw{n}"), ifname(n));
            router.ip(&[
                "link", "add", "name", &gw, "type", "veth", "peer", "name", &eth, "netns",
                &inst.name,
            ]);
            inst.ip(&["link", "set", &eth, "address", &mac(n)]);
            router.ip(&["address", "add", &format!("10.77.{n}.1/24"), "dev", &gw]);
            router.ip(&[
                "-6",
                "address",
                "add",
                &format!("fd00:77:{n}::1/64"),
                "dev",
                &gw,
                "nodad",
            ]);
            router.ip(&["link", "set", &gw, "up"]);
            inst.ip(&["link", "set", &eth, "up"]);
        }
        router.ip(&[
            "link", "add", "name", "gwm", "type", "veth", "peer", "name", "mgmt0", "netns",
            &inst.name,
        ]);
        router.ip(&["address", "add", "10.77.250.1/24", "dev", "gwm"]);
        router.ip(&["link", "set", "gwm", "up"]);
        inst.ip(&["address", "add", "10.77.250.2/24", "dev", "mgmt0"]);
        inst.ip(&["link", "set", "mgmt0", "up"]);
        inst.ip(&["route", "add", "169.254.169.254/32", "via", "10.77.250.1"]);
        router.ip(&["address", "add", "169.254.169.254/32", "dev", "lo"]);

        let emulator = start_emulator(&router, &dir.0.join("imds.log"));
        // Every NIC but the primary is hot-plugged: its folder appears after its
        // first event (see `Timeline`).
        for n in 1..NICS {
            emulator.set_hidden(&mac_path(n), true);
        }
        Self {
            router,
            inst,
            dir,
            root,
            emulator: Some(emulator),
        }
    }

    fn emulator(&self) -> &Emulator {
        self.emulator
            .as_ref()
            .expect("the emulator runs until the end")
    }

    fn run_dir(&self) -> PathBuf {
        self.root.join("run/leasehook")
    }

    fn generation(&self, n: usize) -> usize {
        fs::read_to_string(self.run_dir().join("generation").join(ifname(n)))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    fn pending(&self, n: usize) -> bool {
        self.run_dir()
            .join("pending")
            .join(format!("{}.json", ifname(n)))
            .exists()
    }
}

impl Drop for Soak {
    fn drop(&mut self) {
        drop(self.emulator.take());
        // Not through a `Cleanup`: its drop would delete the namespaces, which the
        // `Netns` fields do next.
        kill_all(&self.root, &[&self.inst.name, &self.router.name]);
    }
}

impl Soak {
    /// What [`Cleanup`] needs to take this world down.
    fn cleanup(&self) -> Cleanup {
        Cleanup {
            root: self.root.clone(),
            namespaces: vec![self.inst.name.clone(), self.router.name.clone()],
        }
    }
}

/// Takes the world down when dropped, also when the test fails while hook threads
/// still hold the world: workers (detached, found by their `LEASEHOOK_ROOT`), every
/// process in the two namespaces (the emulator too), then the namespaces.
struct Cleanup {
    root: PathBuf,
    namespaces: Vec<String>,
}

/// Kills this world's workers and every process in its namespaces.
fn kill_all(root: &Path, namespaces: &[&str]) {
    for (pid, _) in workers(root) {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    for ns in namespaces {
        let out = Command::new("ip").args(["netns", "pids", ns]).output();
        for pid in
            String::from_utf8_lossy(&out.map(|o| o.stdout).unwrap_or_default()).split_whitespace()
        {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let names: Vec<&str> = self.namespaces.iter().map(String::as_str).collect();
        kill_all(&self.root, &names);
        for ns in &self.namespaces {
            if Path::new("/run/netns").join(ns).exists() {
                let _ = Command::new("ip").args(["netns", "del", ns]).status();
            }
        }
    }
}

/// The IMDS emulator, in this process but listening on 169.254.169.254:80 inside
/// the router namespace: a thread enters the namespace and binds there (the
/// emulator's threads start from it), so the test can change the metadata while
/// it serves.
fn start_emulator(router: &Netns, log: &Path) -> Emulator {
    let mut config = Config::new(tree());
    config.world.require_token = true;
    config.log_file = Some(log.to_path_buf());
    router
        .run_in(move || Emulator::start("169.254.169.254:80".parse().unwrap(), config))
        .expect("the IMDS emulator")
}

/// The IMDS path of NIC `n`'s folder.
fn mac_path(n: usize) -> String {
    format!("/latest/meta-data/network/interfaces/macs/{}", mac(n))
}

/// Live workers started for this test's root: `(pid, interface)`.
fn workers(root: &Path) -> Vec<(u32, String)> {
    let want = format!("LEASEHOOK_ROOT={}", root.display());
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let Some(i) = args.iter().position(|a| *a == b"--worker") else {
            continue;
        };
        let ours = fs::read(e.path().join("environ"))
            .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == want.as_bytes()));
        if ours {
            let iface = args
                .get(i + 1)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .unwrap_or_default();
            out.push((pid, iface));
        }
    }
    out
}

fn vm_hwm_kb(pid: u32) -> Option<u64> {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

// ---------------------------------------------------------------------------------
// Kernel state, read with `ip -j`, and the expected state from the planner.

/// leasehook's objects of one NIC and family, as comparable lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Objects {
    rules: BTreeSet<String>,
    routes: BTreeSet<String>,
    addresses: BTreeSet<String>,
}

impl Objects {
    fn extend(&mut self, o: Objects) {
        self.rules.extend(o.rules);
        self.routes.extend(o.routes);
        self.addresses.extend(o.addresses);
    }
}

fn host_len(a: &str) -> u8 {
    if a.contains(':') { 128 } else { 32 }
}

fn prefix(addr: &str, len: Option<u64>) -> String {
    if addr == "default" {
        return "default".to_owned();
    }
    if addr.contains('/') {
        return addr.to_owned();
    }
    format!("{addr}/{}", len.map_or(u64::from(host_len(addr)), |l| l))
}

fn rule_line(prio: u64, from: &str, table: &str) -> String {
    format!("{prio} from {from} lookup {table}")
}

fn route_line(dst: &str, via: &str, dev: &str, scope: &str, src: &str, table: &str) -> String {
    format!("{dst} via {via} dev {dev} scope {scope} src {src} table {table}")
}

/// Every rule with protocol 176, as lines (duplicates kept).
fn kernel_rules(ns: &Netns, fam: Family) -> Vec<String> {
    let flag = if fam == Family::V4 { "-4" } else { "-6" };
    let Value::Array(rules) = ns.ip_json(&[flag, "rule"]) else {
        return Vec::new();
    };
    rules
        .iter()
        .filter(|r| r["protocol"].as_str() == Some("176"))
        .map(|r| {
            rule_line(
                r["priority"].as_u64().unwrap_or(0),
                &prefix(r["src"].as_str().unwrap_or("all"), r["srclen"].as_u64()),
                r["table"].as_str().unwrap_or("?"),
            )
        })
        .collect()
}

/// Every route with protocol 176, as `(dev, line)`.
fn kernel_routes(ns: &Netns, fam: Family) -> Vec<(String, String)> {
    let flag = if fam == Family::V4 { "-4" } else { "-6" };
    let Value::Array(routes) = ns.ip_json(&[flag, "route", "show", "table", "all"]) else {
        return Vec::new();
    };
    routes
        .iter()
        .filter(|r| r["protocol"].as_str() == Some("176"))
        .map(|r| {
            let dev = r["dev"].as_str().unwrap_or("?").to_owned();
            let dst = match r["dst"].as_str().unwrap_or("?") {
                "default" if fam == Family::V4 => "0.0.0.0/0".to_owned(),
                "default" => "::/0".to_owned(),
                d => prefix(d, None),
            };
            let line = route_line(
                &dst,
                r["gateway"].as_str().unwrap_or("-"),
                &dev,
                r["scope"].as_str().unwrap_or("-"),
                r["prefsrc"].as_str().unwrap_or("-"),
                r["table"].as_str().unwrap_or("main"),
            );
            (dev, line)
        })
        .collect()
}

/// The global addresses of a link, `addr/len`.
fn kernel_addresses(ns: &Netns, dev: &str, fam: Family) -> Vec<String> {
    let flag = if fam == Family::V4 { "-4" } else { "-6" };
    let Value::Array(links) = ns.ip_json(&[flag, "address", "show", "dev", dev]) else {
        return Vec::new();
    };
    links
        .iter()
        .flat_map(|l| l["addr_info"].as_array().cloned().unwrap_or_default())
        .filter(|a| a["scope"].as_str() == Some("global"))
        .map(|a| {
            format!(
                "{}/{}",
                a["local"].as_str().unwrap_or("?"),
                a["prefixlen"].as_u64().unwrap_or(0)
            )
        })
        .collect()
}

/// The leased address as dhclient-script puts it on the link.
fn link_address(a: IpAddr) -> String {
    match a {
        IpAddr::V4(_) => format!("{a}/24"),
        IpAddr::V6(_) => format!("{a}/128"),
    }
}

/// leasehook's objects of NIC `n`, family `fam`, in the kernel now. `dhcp` is the
/// address dhclient-script put on the link (not leasehook's; it must still be there).
fn observe(ns: &Netns, n: usize, fam: Family, dhcp: Option<IpAddr>) -> (Objects, Vec<String>) {
    let mut problems = Vec::new();
    let dev = ifname(n);
    let t = table(n).to_string();
    let rules = kernel_rules(ns, fam)
        .into_iter()
        .filter(|r| r.ends_with(&format!("lookup {t}")))
        .collect();
    let routes = kernel_routes(ns, fam)
        .into_iter()
        .filter(|(d, _)| *d == dev)
        .map(|(_, l)| l)
        .collect();
    let mut addresses: BTreeSet<String> = kernel_addresses(ns, &dev, fam).into_iter().collect();
    if let Some(a) = dhcp
        && !addresses.remove(&link_address(a))
    {
        problems.push(format!(
            "{dev}: the DHCP address {} is gone from the link",
            link_address(a)
        ));
    }
    (
        Objects {
            rules,
            routes,
            addresses,
        },
        problems,
    )
}

/// What leasehook-core's planner says NIC `n` must hold for a lease of `a`, given
/// what IMDS lists for that address.
fn expected(ns_ra: Option<Ipv6Addr>, n: usize, a: IpAddr) -> Objects {
    let fam = Family::of(&a);
    let (v4, v6) = match fam {
        Family::V4 => (a, pool(n, Family::V6)[0]),
        Family::V6 => (pool(n, Family::V4)[0], a),
    };
    let mut md = tree();
    md["latest"]["meta-data"]["network"]["interfaces"]["macs"][mac(n)] = nic_folder(n, v4, v6);
    let network = leasehook_core::metadata::parse_tree(&md).unwrap();
    let name = IfName::try_new(&ifname(n)).unwrap();
    let link = Link {
        name: name.clone(),
        mac: mac(n).parse::<MacAddr>().unwrap(),
        ipv6_router: ns_ra,
    };
    let lease = Lease {
        family: fam,
        address: a,
        prefix_len: if fam == Family::V4 { 24 } else { 128 },
        routers: match a {
            IpAddr::V4(_) => vec![IpAddr::V4(Ipv4Addr::new(10, 77, n as u8, 1))],
            IpAddr::V6(_) => Vec::new(),
        },
        reason: Reason::Bound,
    };
    let p = plan(
        &PlanInput {
            metadata: &network,
            links: &[link],
            leases: &[InterfaceLease {
                interface: name,
                lease,
            }],
            link_addresses: &[],
            next_hops: &[],
        },
        &PlanConfig::default(),
    )
    .unwrap();
    let mut o = Objects::default();
    for ip in &p.interfaces {
        assert!(
            ip.missing.is_empty(),
            "expected plan incomplete: {:?}",
            ip.missing
        );
        o.rules
            .extend(ip.rules.iter().filter(|r| r.family() == fam).map(|r| {
                rule_line(
                    u64::from(r.priority.unwrap()),
                    &r.from.to_string(),
                    &r.table.to_string(),
                )
            }));
        o.routes
            .extend(ip.routes.iter().filter(|r| r.family() == fam).map(|r| {
                route_line(
                    &r.to.to_string(),
                    &r.via.map_or("-".to_owned(), |v| v.to_string()),
                    r.dev.as_str(),
                    if r.scope.is_some() { "link" } else { "-" },
                    &r.src.map_or("-".to_owned(), |v| v.to_string()),
                    &r.table.to_string(),
                )
            }));
        o.addresses.extend(
            ip.addresses
                .iter()
                .filter(|a| a.family() == fam)
                .map(|a| a.addr.to_string()),
        );
    }
    o
}

// ---------------------------------------------------------------------------------
// Running the schedule.

/// What the model knows of one NIC and family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    /// Nothing of leasehook's.
    Empty,
    /// The plan for a lease of this address.
    Applied(IpAddr),
    /// The family's last event was superseded by the other family's event before
    /// its worker could apply it (the documented limitation: one hand-over per
    /// interface), after dhclient-script had changed the link: not a plan's state.
    Stale,
}

#[derive(Debug)]
struct HookRun {
    id: usize,
    nic: usize,
    reason: &'static str,
    status: Option<i32>,
    wall: f64,
    bound: f64,
    rss_kb: Option<u64>,
    handed_over: bool,
    /// Its worker applied the event.
    worker_applied: bool,
    log: String,
}

struct Shared {
    soak: Soak,
    shim: PathBuf,
    t0: Instant,
    failures: Mutex<Vec<String>>,
    hooks: Mutex<Vec<HookRun>>,
    /// Hooks running per NIC and family.
    running: Vec<[AtomicUsize; 2]>,
    fired_at: Mutex<Vec<(usize, f64)>>,
    /// Events the model says the next step superseded.
    superseded: Mutex<BTreeSet<usize>>,
    counter: AtomicUsize,
    supersede: AtomicUsize,
    settle: AtomicUsize,
    checkpoints: AtomicUsize,
}

impl Shared {
    fn now(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    fn fail(&self, what: String) {
        println!("FAILURE: {what}");
        self.failures.lock().unwrap().push(what);
    }

    fn running(&self, n: usize) -> usize {
        self.running[n]
            .iter()
            .map(|r| r.load(Ordering::SeqCst))
            .sum()
    }
}

/// The environment dhclient-script exports to its exit hooks, plus leasehook's
/// settings.
fn hook_env(sh: &Shared, ev: &Ev) -> Vec<(String, String)> {
    let n = ev.nic;
    let mut env: Vec<(String, String)> = [
        ("PATH", "/usr/sbin:/usr/bin:/sbin:/bin".to_owned()),
        ("reason", ev.reason.to_owned()),
        ("interface", ifname(n)),
        ("LEASEHOOK_ROOT", sh.soak.root.display().to_string()),
        ("LEASEHOOK_IMDS_SYNC_BUDGET_S", SYNC.to_string()),
        ("LEASEHOOK_IMDS_BUDGET_S", BUDGET.to_string()),
        ("LEASEHOOK_LOG_LEVEL", "info".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    for (prefix, a) in [("new_", ev.new), ("old_", ev.old)] {
        let vars: Vec<(&str, String)> = match a {
            Some(IpAddr::V4(v)) => vec![
                ("ip_address", v.to_string()),
                ("subnet_mask", "255.255.255.0".to_owned()),
                ("network_number", format!("10.77.{n}.0")),
                ("broadcast_address", format!("10.77.{n}.255")),
                ("routers", format!("10.77.{n}.1")),
            ],
            Some(IpAddr::V6(v)) => vec![
                ("ip6_address", v.to_string()),
                ("ip6_prefixlen", "128".to_owned()),
            ],
            None => Vec::new(),
        };
        env.extend(vars.into_iter().map(|(k, v)| (format!("{prefix}{k}"), v)));
    }
    env
}

/// Runs one hook as dhclient-script would (through `/usr/bin/time`, which reports
/// the process's peak RSS from wait4) and records how it went.
fn run_hook(sh: &Shared, ev: &Ev, bound: f64) {
    let idx = sh.counter.fetch_add(1, Ordering::SeqCst);
    let log_path = sh.soak.dir.0.join(format!("hook-{idx:04}.log"));
    let rss_path = sh.soak.dir.0.join(format!("hook-{idx:04}.rss"));
    let log = fs::File::create(&log_path).unwrap();
    let mut cmd = Command::new("ip");
    cmd.env_clear()
        .envs(hook_env(sh, ev))
        .args([
            "netns",
            "exec",
            &sh.soak.inst.name,
            "/usr/bin/time",
            "-f",
            "%M",
            "-o",
        ])
        .arg(&rss_path)
        .arg(&sh.shim)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    let start = Instant::now();
    let status = cmd.status();
    let wall = start.elapsed().as_secs_f64();
    sh.running[ev.nic][fam_index(ev.family)].fetch_sub(1, Ordering::SeqCst);
    let rss_kb = fs::read_to_string(&rss_path)
        .ok()
        .and_then(|t| t.lines().last()?.trim().parse().ok());
    let text = fs::read_to_string(&log_path).unwrap_or_default();
    sh.hooks.lock().unwrap().push(HookRun {
        id: ev.id,
        nic: ev.nic,
        reason: ev.reason,
        status: status.ok().and_then(|s| s.code()),
        wall,
        bound,
        rss_kb,
        handed_over: text.contains("finishes the wait"),
        worker_applied: text
            .lines()
            .any(|l| l.contains(" worker: ") && l.contains(" change(s) for ")),
        log: log_path.display().to_string(),
    });
}

/// What dhclient-script does to the link before it runs its exit hooks (Debian's
/// script: a changed or ended IPv4 lease flushes the interface's IPv4 addresses; an
/// IPv6 lease's address is replaced or deleted on its own).
/// Returns what failed (the DHCP address not where dhclient left it, say).
fn dhclient_script(ns: &Netns, ev: &Ev) -> Vec<String> {
    let dev = ifname(ev.nic);
    let mut cmds: Vec<Vec<String>> = Vec::new();
    let mut cmd = |args: &[&str]| cmds.push(args.iter().map(|a| (*a).to_owned()).collect());
    match (ev.family, ev.new, ev.old) {
        (Family::V4, new, old) => {
            if old.is_some() && old != new {
                cmd(&["-4", "address", "flush", "dev", &dev, "label", &dev]);
            }
            if let Some(a) = new {
                cmd(&["-4", "address", "replace", &link_address(a), "dev", &dev]);
            }
        }
        (Family::V6, new, old) => {
            if let Some(o) = old.filter(|o| Some(*o) != new) {
                cmd(&["-6", "address", "del", &link_address(o), "dev", &dev]);
            }
            if let Some(a) = new {
                let a = link_address(a);
                cmd(&["-6", "address", "replace", &a, "dev", &dev, "nodad"]);
            }
        }
    }
    cmds.iter()
        .filter_map(|args| {
            let out = Command::new("ip")
                .arg("-n")
                .arg(&ns.name)
                .args(args)
                .output();
            match out {
                Ok(o) if o.status.success() => None,
                Ok(o) => Some(format!(
                    "dhclient-script: ip {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&o.stderr).trim()
                )),
                Err(e) => Some(format!("dhclient-script: ip: {e}")),
            }
        })
        .collect()
}

/// The NIC's IPv6 default router learned from router advertisements (none in this
/// world: nobody sends them), for the planner's `Link`.
fn ra_router(ns: &Netns, n: usize) -> Option<Ipv6Addr> {
    let Value::Array(routes) = ns.ip_json(&["-6", "route", "show", "default", "dev", &ifname(n)])
    else {
        return None;
    };
    routes
        .iter()
        .filter(|r| r["protocol"].as_str() == Some("ra"))
        .find_map(|r| r["gateway"].as_str()?.parse().ok())
}

/// Compares NIC `n`'s leasehook objects with the model; returns the mismatches.
fn check_nic(sh: &Shared, n: usize, known: &[Known; 2], dhcp: &[Option<IpAddr>; 2]) -> Vec<String> {
    let ns = &sh.soak.inst;
    let mut problems = Vec::new();
    for fam in [Family::V4, Family::V6] {
        let fi = fam_index(fam);
        let want = match known[fi] {
            Known::Stale => continue,
            Known::Empty => Objects::default(),
            Known::Applied(a) => expected(ra_router(ns, n), n, a),
        };
        let (have, mut p) = observe(ns, n, fam, dhcp[fi]);
        problems.append(&mut p);
        if have != want {
            problems.push(format!(
                "{} {fam}: kernel state differs from the plan for {:?}\n  want {want:#?}\n  have {have:#?}",
                ifname(n),
                known[fi]
            ));
        }
    }
    problems
}

/// Whether NIC `n` is quiet: no hook running, no hand-over pending, no worker.
fn quiet(sh: &Shared, n: usize) -> bool {
    let eth = ifname(n);
    sh.running(n) == 0
        && !sh.soak.pending(n)
        && !workers(&sh.soak.root).iter().any(|(_, i)| *i == eth)
}

/// One change to IMDS, made by a timer thread.
type ImdsChange = Box<dyn FnOnce(&Emulator) + Send>;

/// Makes IMDS change as `effect` says, when it says: the NIC's folder appears, the
/// family's address list becomes lease `a`'s.
fn schedule_imds(sh: &Arc<Shared>, n: usize, a: IpAddr, effect: Effect) {
    let key = match Family::of(&a) {
        Family::V4 => "local-ipv4s",
        Family::V6 => "ipv6s",
    };
    let mut changes: Vec<(f64, ImdsChange)> = Vec::new();
    if let Some(at) = effect.appear {
        changes.push((
            at,
            Box::new(move |e: &Emulator| e.set_hidden(&mac_path(n), false)),
        ));
    }
    if let Some(at) = effect.switch {
        let list = json!(md_list(n, a));
        let path = format!("{}/{key}", mac_path(n));
        changes.push((
            at,
            Box::new(move |e: &Emulator| e.set_leaf(&path, Some(list))),
        ));
    }
    for (at, change) in changes {
        let sh = Arc::clone(sh);
        std::thread::spawn(move || {
            sleep_until(&sh, at);
            change(sh.soak.emulator());
        });
    }
}

/// Waits until NIC `n` is quiet.
fn settle(sh: &Shared, n: usize, timeout: f64) -> bool {
    wait_until(Duration::from_secs_f64(timeout), || quiet(sh, n))
}

fn sleep_until(sh: &Shared, t: f64) {
    let now = sh.now();
    if t > now {
        std::thread::sleep(Duration::from_secs_f64(t - now));
    }
}

/// Drives NIC `n` through its steps; returns the model's final knowledge and the
/// addresses dhclient-script left on the link.
fn drive(sh: &Arc<Shared>, n: usize, steps: &[Step]) -> ([Known; 2], [Option<IpAddr>; 2]) {
    let mut known = [Known::Empty, Known::Empty];
    let mut dhcp: [Option<IpAddr>; 2] = [None, None];
    let mut fired = 0;
    // The step before: when it fired, how many hooks of the NIC were running then,
    // the step, and when IMDS agrees with each of its events.
    let mut prev: Option<(f64, usize, &Step, Vec<f64>)> = None;
    // IMDS as it is: the switches happen relative to when the steps really fire.
    let mut timeline = Timeline::new(n);
    // From the step holding the first of the two families' last events on, every
    // step waits for the one before to take effect: the final state is then the
    // plan of each family's last event.
    let last = |fam| {
        steps
            .iter()
            .rposition(|s| s.events.iter().any(|e| e.family == fam))
    };
    let tail = [last(Family::V4), last(Family::V6)]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(0);
    let mut hooks = Vec::new();
    // What happened on this NIC, for the failure message.
    let mut history = String::new();
    for (k, step) in steps.iter().enumerate() {
        sleep_until(sh, step.t);
        if let Some((f, ahead, p, agree)) = prev.take() {
            // Every hook of the step before has taken the lock (so they come first),
            // and, as with a real dhclient, a family's script runs only after that
            // family's hook before has returned.
            if !wait_until(Duration::from_secs(30), || sh.soak.generation(n) >= fired) {
                sh.fail(format!(
                    "{}: hooks did not take the lock in 30 s",
                    ifname(n)
                ));
            }
            for e in &step.events {
                let fi = fam_index(e.family);
                wait_until(Duration::from_secs(30), || {
                    sh.running[n][fi].load(Ordering::SeqCst) == 0
                });
            }
            let superseded = decide(sh, n, f, ahead, &agree, k > tail);
            for i in superseded.iter().flatten() {
                sh.superseded.lock().unwrap().insert(p.events[*i].id);
            }
            apply_model(&mut known, p, superseded.as_deref().unwrap_or_default());
            let _ = writeln!(
                history,
                "    then at {:.2} s: {}; model {known:?}",
                sh.now(),
                superseded
                    .as_ref()
                    .map_or("waited for quiet".to_owned(), |v| {
                        format!("superseded events {v:?}")
                    })
            );
            // Checked when the NIC is quiet: after waiting for it, or when it is
            // already (every event of the step before settled within its hook).
            let quiet = superseded.is_none()
                || superseded.as_ref().is_some_and(Vec::is_empty) && quiet(sh, n);
            if quiet {
                sh.checkpoints.fetch_add(1, Ordering::SeqCst);
                for problem in check_nic(sh, n, &known, &dhcp) {
                    sh.fail(format!(
                        "at {:.2} s, before step {k}: {problem}\n  {} so far:\n{history}",
                        sh.now(),
                        ifname(n)
                    ));
                }
            }
        }
        // What the step's events do to IMDS, from now (copies share their effect).
        let now = sh.now();
        let mut effects: HashMap<usize, f64> = HashMap::new();
        let agree: Vec<f64> = step
            .events
            .iter()
            .map(|e| match e.new {
                None => now,
                Some(a) => *effects.entry(e.id).or_insert_with(|| {
                    let effect = timeline.apply(a, now, e.delay, e.appear_delay);
                    schedule_imds(sh, n, a, effect);
                    effect.agree
                }),
            })
            .collect();
        // A DHCPv4 and a DHCPv6 event at once fire when IMDS agrees with both, so
        // that the order the lock picks cannot matter.
        if effects.len() > 1 {
            sleep_until(sh, agree.iter().copied().fold(now, f64::max) + 0.05);
        }
        // Copies of one event (fired at once) share one run of the script.
        let mut scripted = BTreeSet::new();
        for e in step.events.iter().filter(|e| scripted.insert(e.id)) {
            for problem in dhclient_script(&sh.soak.inst, e) {
                sh.fail(format!("{} before step {k}: {problem}", ifname(n)));
            }
            dhcp[fam_index(e.family)] = e.new;
        }
        let ahead = sh.running(n);
        let fire = sh.now();
        let _ = writeln!(
            history,
            "  step {k} planned {:.2} s, fired {fire:.2} s behind {ahead} hook(s): {}",
            step.t,
            step.events
                .iter()
                .zip(&agree)
                .map(|(e, a)| format!(
                    "{} {:?}<-{:?} (IMDS agrees at {a:.2} s)",
                    e.reason, e.new, e.old
                ))
                .collect::<Vec<_>>()
                .join(", ")
        );
        sh.fired_at.lock().unwrap().push((n, fire));
        for e in &step.events {
            sh.running[n][fam_index(e.family)].fetch_add(1, Ordering::SeqCst);
            // Each hook may wait for those of the NIC already running and for the
            // others of its step, each held at most the synchronous budget; never
            // for a worker.
            let bound = SYNC * (ahead + step.events.len()) as f64 + HOLD_SLACK;
            let (sh, e) = (Arc::clone(sh), e.clone());
            hooks.push(std::thread::spawn(move || run_hook(&sh, &e, bound)));
        }
        fired += step.events.len();
        prev = Some((fire, ahead, step, agree));
    }
    for h in hooks {
        h.join().unwrap();
    }
    if !settle(sh, n, QUIET_TIMEOUT) {
        sh.fail(format!("{}: workers still running at the end", ifname(n)));
    }
    if let Some((_, _, p, _)) = prev {
        apply_model(&mut known, p, &[]);
    }
    (known, dhcp)
}

/// Decides, for the step fired at `fired` while `ahead` hooks of the NIC were
/// still running, whose events IMDS agrees with at `agree` (a removal: when fired),
/// which of its events the next step supersedes (`Some(indexes)`),
/// or waits until the NIC is quiet (`None`: every event of the step took effect).
///
/// An event IMDS agrees with before any of its hooks' synchronous waits can end
/// (`SYNC` after firing) takes effect under the lock, before the next step's hooks
/// get it. Every hook's wait has ended by the time the hooks ahead and those of
/// the step have each had the lock for `SYNC`: an event IMDS agrees with only
/// after that was handed over by all of its hooks, and is superseded when the next
/// step comes before IMDS agrees. In between (a copy or a queued hook may have
/// applied it), near a boundary, when late, and in the tail, the next step waits.
fn decide(
    sh: &Shared,
    n: usize,
    fired: f64,
    ahead: usize,
    agree: &[f64],
    tail: bool,
) -> Option<Vec<usize>> {
    let now = sh.now();
    let waits_end = fired + SYNC * (ahead + agree.len()) as f64;
    let mut superseded = Vec::new();
    let mut wait = tail;
    for (i, a) in agree.iter().copied().enumerate() {
        if a <= fired + SYNC - MARGIN {
            continue;
        }
        if a >= waits_end + MARGIN && now <= a - MARGIN {
            superseded.push(i);
        } else {
            wait = true;
        }
    }
    if wait {
        sh.settle.fetch_add(1, Ordering::SeqCst);
        if !settle(sh, n, QUIET_TIMEOUT) {
            sh.fail(format!(
                "{}: not quiet {QUIET_TIMEOUT} s after a step",
                ifname(n)
            ));
        }
        return None;
    }
    if !superseded.is_empty() {
        sh.supersede.fetch_add(1, Ordering::SeqCst);
    }
    Some(superseded)
}

fn apply_model(known: &mut [Known; 2], p: &Step, superseded: &[usize]) {
    for (i, e) in p.events.iter().enumerate() {
        let k = &mut known[fam_index(e.family)];
        *k = match (e.new, superseded.contains(&i)) {
            (None, _) => Known::Empty,
            (Some(a), false) => Known::Applied(a),
            // Nothing of leasehook's was there, or the same lease's plan stays.
            (Some(_), true) if *k == Known::Empty => Known::Empty,
            (Some(a), true) if *k == Known::Applied(a) => Known::Applied(a),
            (Some(_), true) => Known::Stale,
        };
    }
}

/// The shim under test: `$LEASEHOOK_DHCLIENT`, else the release build beside this
/// test's profile folder. The 8 MiB limit is about the binary that ships (the release
/// profile: `opt-level = "s"`, LTO); a debug build is half again as large in memory.
fn shim() -> PathBuf {
    if let Some(p) = std::env::var_os("LEASEHOOK_DHCLIENT") {
        return PathBuf::from(p);
    }
    let debug = sibling_bin(leasehook_tests::world::EMULATOR);
    let release = debug
        .parent()
        .and_then(Path::parent)
        .map(|t| t.join("release/leasehook-hook"))
        .unwrap_or_default();
    let build = "cargo build --release --locked -p leasehook-hook";
    let mtime = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).ok();
    assert!(
        release.exists(),
        "{release:?} not found: build the release binary first (`{build}`) or set LEASEHOOK_DHCLIENT"
    );
    // Built before the last change to its sources, it would test older code.
    let root = leasehook_tests::workspace_root();
    let newest = ["core/src", "hook/src", "cli/src/logging.rs"]
        .iter()
        .flat_map(|d| files(&root.join(d)))
        .filter_map(|f| mtime(&f).map(|m| (m, f)))
        .max();
    if let (Some((changed, file)), Some(built)) = (newest, mtime(&release)) {
        assert!(
            changed <= built,
            "{release:?} is older than {file:?}: rebuild it (`{build}`)"
        );
    }
    // The dhclient hook is that binary run under the hook's name, as installed.
    hook_link(&release, "leasehook-dhclient")
}

/// Every file under `p` (or `p` itself).
fn files(p: &Path) -> Vec<PathBuf> {
    match fs::read_dir(p) {
        Ok(entries) => entries.flatten().flat_map(|e| files(&e.path())).collect(),
        Err(_) => vec![p.to_path_buf()],
    }
}

fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

#[test]
fn soak_random_lease_events_on_four_nics() {
    let events: usize = std::env::var("LEASEHOOK_SOAK_EVENTS")
        .ok()
        .map_or(200, |v| v.parse().expect("LEASEHOOK_SOAK_EVENTS: a number"));
    let seed: u64 = std::env::var("LEASEHOOK_SOAK_SEED").ok().map_or_else(
        || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        },
        |v| v.parse().expect("LEASEHOOK_SOAK_SEED: a number"),
    );
    println!("soak: {events} events, seed {seed} (replay: LEASEHOOK_SOAK_SEED={seed})");
    let schedule = generate(seed, events);
    let soak = Soak::new();
    let _cleanup = soak.cleanup();
    let shim = shim();
    assert!(
        Path::new("/usr/bin/time").exists(),
        "/usr/bin/time (Debian package `time`) is needed"
    );
    let t0 = Instant::now();
    let sh = Arc::new(Shared {
        soak,
        shim,
        t0,
        failures: Mutex::new(Vec::new()),
        hooks: Mutex::new(Vec::new()),
        running: (0..NICS)
            .map(|_| [AtomicUsize::new(0), AtomicUsize::new(0)])
            .collect(),
        fired_at: Mutex::new(Vec::new()),
        superseded: Mutex::new(BTreeSet::new()),
        counter: AtomicUsize::new(0),
        supersede: AtomicUsize::new(0),
        settle: AtomicUsize::new(0),
        checkpoints: AtomicUsize::new(0),
    });

    // Workers are detached: sample their peak RSS from /proc while they live.
    let stop = Arc::new(AtomicBool::new(false));
    let worker_hwm: Arc<Mutex<HashMap<u32, u64>>> = Arc::default();
    let sampler = {
        let (stop, hwm, root) = (stop.clone(), worker_hwm.clone(), sh.soak.root.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                for (pid, _) in workers(&root) {
                    if let Some(kb) = vm_hwm_kb(pid) {
                        let mut m = hwm.lock().unwrap();
                        let e = m.entry(pid).or_insert(0);
                        *e = (*e).max(kb);
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };

    let finals: Vec<([Known; 2], [Option<IpAddr>; 2])> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..NICS)
            .map(|n| {
                let (sh, steps) = (&sh, &schedule.steps[n]);
                s.spawn(move || drive(sh, n, steps))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let wall = sh.now();
    stop.store(true, Ordering::SeqCst);
    sampler.join().unwrap();

    // The final state, NIC by NIC, and then as a whole.
    let ns = &sh.soak.inst;
    let mut want_all = Objects::default();
    for (n, (known, dhcp)) in finals.iter().enumerate() {
        for p in check_nic(&sh, n, known, dhcp) {
            sh.fail(format!("final: {p}"));
        }
        sh.checkpoints.fetch_add(1, Ordering::SeqCst);
        for (fi, k) in known.iter().enumerate() {
            match k {
                Known::Applied(a) => want_all.extend(expected(ra_router(ns, n), n, *a)),
                Known::Stale => sh.fail(format!("final: {} family {fi} is not known", ifname(n))),
                Known::Empty => {}
            }
        }
    }
    let mut have_all = Objects::default();
    let mut rules_listed = Vec::new();
    for fam in [Family::V4, Family::V6] {
        let rules = kernel_rules(ns, fam);
        rules_listed.extend(rules.iter().cloned());
        have_all.rules.extend(rules);
        have_all
            .routes
            .extend(kernel_routes(ns, fam).into_iter().map(|(_, l)| l));
        for (n, (_, dhcp)) in finals.iter().enumerate() {
            let dhcp = dhcp[fam_index(fam)].map(link_address);
            have_all.addresses.extend(
                kernel_addresses(ns, &ifname(n), fam)
                    .into_iter()
                    .filter(|a| Some(a) != dhcp.as_ref()),
            );
        }
    }
    if have_all != want_all {
        sh.fail(format!(
            "final: leasehook's objects in the namespace differ from the plans\n  want {want_all:#?}\n  have {have_all:#?}"
        ));
    }
    let unique: BTreeSet<&String> = rules_listed.iter().collect();
    if unique.len() != rules_listed.len() {
        sh.fail(format!("final: duplicate rules: {rules_listed:#?}"));
    }
    let left = workers(&sh.soak.root);
    if !left.is_empty() {
        sh.fail(format!("final: workers still alive: {left:?}"));
    }
    let run_dir = sh.soak.run_dir();
    for entry in fs::read_dir(run_dir.join("lock"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let f = fs::File::open(entry.path()).unwrap();
        if f.try_lock().is_err() {
            sh.fail(format!("final: lock {:?} is held", entry.path()));
        }
    }
    let pending: Vec<_> = fs::read_dir(run_dir.join("pending"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    if !pending.is_empty() {
        sh.fail(format!("final: hand-overs left: {pending:?}"));
    }

    // Every hook: exit 0, within its synchronous budget, under the memory limit.
    let hooks = sh.hooks.lock().unwrap();
    assert_eq!(hooks.len(), events, "every event ran its hook");
    let mut rss: Vec<u64> = Vec::new();
    for h in hooks.iter() {
        if h.status != Some(0) {
            sh.fail(format!(
                "{} on eth{}: exit {:?} (log {})",
                h.reason, h.nic, h.status, h.log
            ));
        }
        if h.worker_applied && sh.superseded.lock().unwrap().contains(&h.id) {
            sh.fail(format!(
                "{} on eth{}: a newer event came before IMDS agreed, yet its worker applied it (log {})",
                h.reason, h.nic, h.log
            ));
        }
        if h.wall > h.bound {
            sh.fail(format!(
                "{} on eth{}: held the DHCP client {:.2} s (at most {:.2} s) (log {})",
                h.reason, h.nic, h.wall, h.bound, h.log
            ));
        }
        match h.rss_kb {
            Some(kb) if kb < RSS_LIMIT_KB => rss.push(kb),
            Some(kb) => {
                rss.push(kb);
                sh.fail(format!(
                    "{} on eth{}: peak RSS {kb} KiB (log {})",
                    h.reason, h.nic, h.log
                ));
            }
            None => sh.fail(format!(
                "{} on eth{}: no RSS from /usr/bin/time",
                h.reason, h.nic
            )),
        }
    }
    let mut worker_rss: Vec<u64> = worker_hwm.lock().unwrap().values().copied().collect();
    for kb in &worker_rss {
        if *kb >= RSS_LIMIT_KB {
            sh.fail(format!("a worker's peak RSS is {kb} KiB"));
        }
    }

    // The summary.
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for h in hooks.iter() {
        *by_kind.entry(h.reason).or_default() += 1;
    }
    let fired = sh.fired_at.lock().unwrap();
    let together = fired
        .iter()
        .filter(|(n, t)| fired.iter().any(|(m, u)| m != n && (t - u).abs() < 0.02))
        .count();
    let same_nic = schedule
        .steps
        .iter()
        .flatten()
        .filter(|s| s.events.len() > 1)
        .count();
    let handovers = hooks.iter().filter(|h| h.handed_over).count();
    let rss_max = rss.iter().copied().max().unwrap_or(0);
    let rss_median = median(&mut rss);
    let mut summary = String::new();
    let _ = writeln!(summary, "soak summary (seed {seed})");
    let _ = writeln!(summary, "  events:        {} {by_kind:?}", hooks.len());
    let _ = writeln!(
        summary,
        "  concurrency:   {same_nic} steps with several events on one NIC, {together} steps fired within 20 ms of another NIC's"
    );
    let _ = writeln!(
        summary,
        "  hand-overs:    {handovers} events handed over to a worker ({} workers sampled alive); next step superseded a waiting event {} times, waited for the NIC to settle {} times",
        worker_rss.len(),
        sh.supersede.load(Ordering::SeqCst),
        sh.settle.load(Ordering::SeqCst)
    );
    let mut held: Vec<u64> = hooks.iter().map(|h| (h.wall * 1000.0) as u64).collect();
    let _ = writeln!(
        summary,
        "  wall time:     {wall:.1} s; a hook held its DHCP client at most {} ms (median {} ms)",
        held.iter().max().copied().unwrap_or(0),
        median(&mut held)
    );
    let _ = writeln!(
        summary,
        "  hook peak RSS: max {rss_max} KiB, median {rss_median} KiB (limit {RSS_LIMIT_KB} KiB; /usr/bin/time)"
    );
    let wmax = worker_rss.iter().copied().max().unwrap_or(0);
    let wmed = median(&mut worker_rss);
    let _ = writeln!(
        summary,
        "  worker VmHWM:  max {wmax} KiB, median {wmed} KiB (sampled from /proc every 20 ms)"
    );
    let failures = sh.failures.lock().unwrap();
    let _ = writeln!(
        summary,
        "  checks:        {} state checkpoints; {}",
        sh.checkpoints.load(Ordering::SeqCst),
        if failures.is_empty() {
            "final state = plans, no duplicate rule, no worker, no lock held, no hand-over left: OK"
                .to_owned()
        } else {
            format!("{} FAILURES", failures.len())
        }
    );
    println!("{summary}");
    if !failures.is_empty() {
        // Keep the evidence: the world's folder (hook logs, emulator log) survives.
        let keep = std::env::temp_dir().join(format!("leasehook-soak-{seed}"));
        let _ = fs::remove_dir_all(&keep);
        let _ = Command::new("cp")
            .arg("-a")
            .arg(&sh.soak.dir.0)
            .arg(&keep)
            .status();
        panic!(
            "soak failed (seed {seed}, logs in {keep:?}):\n{}",
            failures.join("\n")
        );
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Unit tests of the lease path with its effects handed in: the recording kernel,
//! a scripted provider and a fake clock, below a temporary root.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::path::Path;
use std::time::{Duration, Instant};

use super::*;
use crate::apply::record::RecordingApplier;
use crate::apply::state::{self, InterfaceState, Paths};
use crate::config::Unmanaged;
use crate::error::{Error, ImdsErrorKind};
use crate::model::{Family, InstanceNetwork, Lease, Missing, Reason};
use crate::source::provider::{Clock, NicEvent, Outcome, ProviderKind, WaitPolicy};

/// A provider that answers each wait with the next scripted outcome and records
/// what it was asked.
#[derive(Debug, Default)]
pub(super) struct Scripted {
    outcomes: RefCell<VecDeque<Outcome>>,
    asked: RefCell<Vec<(IfName, Duration)>>,
}

impl Scripted {
    pub(super) fn new(outcomes: impl IntoIterator<Item = Outcome>) -> Self {
        Self {
            outcomes: RefCell::new(outcomes.into_iter().collect()),
            asked: RefCell::default(),
        }
    }
}

impl Provider for Scripted {
    fn kind(&self) -> ProviderKind {
        ProviderKind::from_name("ec2").unwrap()
    }

    fn wait_for_nic(&self, nic: &NicEvent, policy: &WaitPolicy, _clock: &dyn Clock) -> Outcome {
        self.asked
            .borrow_mut()
            .push((nic.interface().clone(), policy.budget));
        self.outcomes
            .borrow_mut()
            .pop_front()
            .unwrap_or_else(|| Outcome::Failed(disabled()))
    }
}

/// [`Scripted`] whose every wait first sleeps `pause` on the clock it is
/// handed (a wait that paused between rounds).
struct Pausing<'a>(&'a Scripted, Duration);

impl std::fmt::Debug for Pausing<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Pausing").field(&self.1).finish()
    }
}

impl Provider for Pausing<'_> {
    fn kind(&self) -> ProviderKind {
        self.0.kind()
    }

    fn wait_for_nic(&self, nic: &NicEvent, policy: &WaitPolicy, clock: &dyn Clock) -> Outcome {
        clock.sleep(self.1);
        self.0.wait_for_nic(nic, policy, clock)
    }
}

/// A clock that only moves when slept on.
struct FakeClock {
    start: Instant,
    elapsed: Cell<Duration>,
}

impl FakeClock {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            elapsed: Cell::new(Duration::ZERO),
        }
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        self.start + self.elapsed.get()
    }
    fn sleep(&self, pause: Duration) {
        self.elapsed.set(self.elapsed.get() + pause);
    }
}

fn disabled() -> Error {
    Error::Imds {
        method: "PUT",
        url: "http://169.254.169.254/latest/api/token".to_owned(),
        kind: ImdsErrorKind::Disabled,
    }
}

fn eth1() -> IfName {
    IfName::try_new("eth1").unwrap()
}

const ETH1_MAC: &str = "02:00:00:00:00:02";

/// Links `eth0`, `eth1`, ... with `macs`.
pub(super) fn links(macs: &[&str]) -> Vec<crate::model::Link> {
    macs.iter()
        .enumerate()
        .map(|(i, m)| crate::model::Link {
            name: IfName::try_new(&format!("eth{i}")).unwrap(),
            mac: m.parse().unwrap(),
            ipv6_router: None,
        })
        .collect()
}

/// eth0 (primary) and eth1 in the kernel; the configuration defaults (no worker:
/// the whole budget is the synchronous one) below a temporary root.
fn world() -> (RecordingApplier, HookConfig, tempfile::TempDir) {
    let kernel = RecordingApplier::with_links(links(&["02:00:00:00:00:01", ETH1_MAC]));
    let root = tempfile::tempdir().unwrap();
    let cfg = HookConfig::for_test(root.path(), &[("LEASEHOOK_IMDS_BUDGET_S", "3")]);
    (kernel, cfg, root)
}

/// What IMDS says of eth1; `subnet: false` leaves its subnet out (not propagated).
fn network(subnet: bool) -> InstanceNetwork {
    let mut eth1 = serde_json::json!({"device-number": "1", "local-ipv4s": "10.0.1.20"});
    if subnet {
        eth1["subnet-ipv4-cidr-block"] = "10.0.1.0/24".into();
    }
    crate::metadata::parse_tree(&serde_json::json!({
        "mac": "02:00:00:00:00:01",
        "network": {"interfaces": {"macs": {ETH1_MAC: eth1}}}
    }))
    .unwrap()
}

fn bound() -> LeaseEvent {
    let lease = Lease {
        family: Family::V4,
        address: "10.0.1.20".parse().unwrap(),
        prefix_len: 24,
        routers: vec!["10.0.1.1".parse().unwrap()],
        reason: Reason::Bound,
    };
    LeaseEvent {
        interface: eth1(),
        family: Family::V4,
        reason: Reason::Bound,
        new: Some(lease),
        old: None,
    }
}

fn released() -> LeaseEvent {
    let mut ev = bound();
    ev.reason = Reason::Release;
    ev.old = ev.new.take();
    ev
}

/// Runs `f` on effects made of `kernel`, `provider` and a clock that moves only
/// when slept on.
fn with_effects<T>(
    kernel: &mut RecordingApplier,
    provider: &dyn Provider,
    f: impl FnOnce(&mut Effects<'_>) -> Result<T>,
) -> T {
    let clock = FakeClock::new();
    let mut fx = Effects {
        kernel,
        provider,
        clock: &clock,
    };
    f(&mut fx).unwrap()
}

/// Runs `event` through the event path with the effects handed in.
pub(super) fn run(
    kernel: &mut RecordingApplier,
    provider: &Scripted,
    cfg: &HookConfig,
    event: &LeaseEvent,
) -> HookOutcome {
    // No worker is ever started here: the budget leaves nothing to hand over.
    let worker = Path::new("/nonexistent/leasehook-worker");
    with_effects(kernel, provider, |fx| handle_with(fx, event, cfg, worker))
}

fn rules(k: &RecordingApplier) -> Vec<String> {
    k.owned.rules.iter().map(ToString::to_string).collect()
}

fn recorded(cfg: &HookConfig) -> Option<InterfaceState> {
    state::read_state_or_set_aside(&Paths::new(&cfg.root), &eth1())
}

#[test]
fn a_complete_answer_is_applied_and_recorded_with_its_lease() {
    let (mut k, cfg, _root) = world();
    let provider = Scripted::new([Outcome::Complete(network(true))]);
    let out = run(&mut k, &provider, &cfg, &bound());
    assert!(matches!(out, HookOutcome::Applied(_)), "{out:?}");
    assert_eq!(rules(&k), ["from 10.0.1.20/32 lookup 10001 priority 10001"]);
    // The provider was asked about eth1 within the synchronous budget.
    assert_eq!(
        provider.asked.borrow().as_slice(),
        [(eth1(), cfg.sync_budget)]
    );
    let st = recorded(&cfg).unwrap();
    assert_eq!(st.leases(), [bound().new.unwrap()]);
}

/// Issue 32, item 4: the links an event found its NIC in are the snapshot's
/// when the metadata answered at once (one links dump per event); a wait that
/// paused reads them again, as a link may have come, gone or been renamed.
#[test]
fn the_links_are_dumped_once_unless_the_wait_paused() {
    for (pause, dumps) in [
        (Duration::ZERO, 1),
        (crate::constants::LINKS_FRESH, 1),
        (crate::constants::IMDS_BACKOFF_MIN, 2),
    ] {
        let (mut k, cfg, _root) = world();
        let scripted = Scripted::new([Outcome::Complete(network(true))]);
        let provider = Pausing(&scripted, pause);
        let worker = Path::new("/nonexistent/leasehook-worker");
        let out = with_effects(&mut k, &provider, |fx| {
            handle_with(fx, &bound(), &cfg, worker)
        });
        assert!(matches!(out, HookOutcome::Applied(_)), "{pause:?}: {out:?}");
        assert_eq!(k.link_dumps, dumps, "{pause:?}");
        assert_eq!(rules(&k), ["from 10.0.1.20/32 lookup 10001 priority 10001"]);
    }
}

#[test]
fn a_partial_answer_after_the_wait_applies_what_the_lease_proves_once() {
    let (mut k, cfg, _root) = world();
    let partial = || Outcome::Partial {
        network: network(false),
        missing: vec![Missing::Subnet { family: Family::V4 }],
    };
    let provider = Scripted::new([partial(), partial()]);
    let out = run(&mut k, &provider, &cfg, &bound());
    assert!(matches!(out, HookOutcome::AppliedPartial(_)), "{out:?}");
    assert_eq!(rules(&k), ["from 10.0.1.20/32 lookup 10001 priority 10001"]);
    // Once something is applied for the family, an incomplete answer keeps it.
    let before = k.owned.clone();
    let again = run(&mut k, &provider, &cfg, &bound());
    let HookOutcome::Kept(why) = again else {
        panic!("{again:?}")
    };
    assert!(why.contains("keeping the IPv4 state"), "{why}");
    assert_eq!(k.owned, before);
}

#[test]
fn an_imds_error_keeps_the_last_applied_state() {
    let (mut k, cfg, _root) = world();
    let provider = Scripted::new([
        Outcome::Complete(network(true)),
        Outcome::Failed(disabled()),
    ]);
    run(&mut k, &provider, &cfg, &bound());
    let (before, st_before) = (k.owned.clone(), recorded(&cfg));
    let out = run(&mut k, &provider, &cfg, &bound());
    let HookOutcome::Kept(why) = out else {
        panic!("{out:?}")
    };
    assert!(why.contains("IMDS did not answer usefully"), "{why}");
    assert_eq!(k.owned, before);
    assert_eq!(recorded(&cfg), st_before);
    assert!(!k.owned.rules.is_empty());
}

#[test]
fn an_unmanaged_nic_is_left_alone_without_asking_the_cloud() {
    let (mut k, mut cfg, _root) = world();
    cfg.unmanaged = vec![Unmanaged::Mac(ETH1_MAC.parse().unwrap())];
    let provider = Scripted::new([Outcome::Complete(network(true))]);
    assert_eq!(
        run(&mut k, &provider, &cfg, &bound()),
        HookOutcome::Unmanaged
    );
    assert!(provider.asked.borrow().is_empty());
    assert!(k.writes.is_empty() && recorded(&cfg).is_none());
}

#[test]
fn a_release_removes_the_family_and_forgets_it() {
    let (mut k, cfg, _root) = world();
    let provider = Scripted::new([Outcome::Complete(network(true))]);
    run(&mut k, &provider, &cfg, &bound());
    assert!(!k.owned.rules.is_empty());
    let out = run(&mut k, &provider, &cfg, &released());
    let HookOutcome::Removed(report) = out else {
        panic!("{out:?}")
    };
    assert_eq!(report.writes(), 3);
    assert!(k.owned.rules.is_empty() && k.owned.routes.is_empty());
    assert!(recorded(&cfg).is_none());
    // A removal never asks the cloud.
    assert_eq!(provider.asked.borrow().len(), 1);
}

/// eth1's BOUND handed over as event 1 to the worker `pid`, as a hook writes it.
fn hand_over_bound(cfg: &HookConfig, pid: u32) -> Paths {
    let pending = serde_json::json!({
        "generation": 1,
        "pid": pid,
        "event": bound(),
        "deadline_ms": state::unix_ms() + 30_000,
    });
    let paths = Paths::new(&cfg.root);
    state::write_run_file(
        &paths,
        Some("pending"),
        "eth1.json",
        pending.to_string().as_bytes(),
        0o600,
    )
    .unwrap();
    paths
}

#[test]
fn a_newer_event_stops_the_waiting_worker() {
    let (mut k, cfg, _root) = world();
    // A worker for eth1 as the hand-over names it (`--worker eth1` in its
    // command line); `; :` keeps the shell from exec'ing sleep.
    let mut worker = std::process::Command::new("sh")
        .args(["-c", "sleep 30; :", "--worker", "eth1"])
        .spawn()
        .unwrap();
    // `spawn` returns once the child has left the parent's memory, a moment
    // before the kernel sets its new command line (empty until then): wait for
    // it, as a real worker's is set long before a newer event looks.
    let until = Instant::now() + Duration::from_secs(10);
    while !super::worker::is_our_worker(worker.id(), &eth1()) {
        assert!(
            Instant::now() < until,
            "the worker's command line never showed"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let paths = hand_over_bound(&cfg, worker.id());
    let provider = Scripted::new([Outcome::Complete(network(true))]);
    let out = run(&mut k, &provider, &cfg, &bound());
    assert!(matches!(out, HookOutcome::Applied(_)), "{out:?}");
    let status = worker.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(15)
    );
    // The superseded hand-over is gone.
    assert!(
        state::read_run_file(&paths, Some("pending"), "eth1.json", 4096)
            .unwrap()
            .is_none()
    );
}

#[test]
fn a_worker_whose_event_was_superseded_stands_down() {
    let (mut k, cfg, _root) = world();
    let paths = hand_over_bound(&cfg, std::process::id());
    // A newer event counted since.
    state::write_run_file(&paths, Some("generation"), "eth1", b"2", 0o600).unwrap();
    let provider = Scripted::new([Outcome::Complete(network(true))]);
    let out = with_effects(&mut k, &provider, |fx| run_worker_with(fx, &eth1(), &cfg));
    assert_eq!(
        out,
        HookOutcome::Kept("a newer event superseded this one".to_owned())
    );
    assert!(provider.asked.borrow().is_empty() && k.writes.is_empty());
}

#[test]
fn refresh_keeps_the_state_on_an_imds_error_and_drops_a_gone_link() {
    let (mut k, cfg, _root) = world();
    let provider = Scripted::new([
        Outcome::Complete(network(true)),
        Outcome::Failed(disabled()),
    ]);
    run(&mut k, &provider, &cfg, &bound());
    let before = k.owned.clone();
    let out = with_effects(&mut k, &provider, |fx| refresh_with(fx, None, &cfg));
    assert!(
        matches!(&out[..], [RefreshOutcome::Unchecked(n, why)] if *n == eth1() && why.contains("IMDS did not answer")),
        "{out:?}"
    );
    assert_eq!(k.owned, before);
    // A check that failed is no refresh: the stamp is not written.
    let paths = crate::apply::state::Paths::new(&cfg.root);
    assert_eq!(super::refreshed_at(&paths, &eth1()), None);
    // eth1 is detached: refresh takes its rules, routes and state with it.
    k.links.retain(|l| l.name != eth1());
    let out = with_effects(&mut k, &provider, |fx| refresh_with(fx, None, &cfg));
    assert!(
        matches!(&out[..], [RefreshOutcome::LinkGone(n, _)] if *n == eth1()),
        "{out:?}"
    );
    assert!(k.owned.rules.is_empty() && recorded(&cfg).is_none());
}

/// [`Scripted`] as GCE's provider.
#[derive(Debug)]
struct AsGce<'a>(&'a Scripted);

impl Provider for AsGce<'_> {
    fn kind(&self) -> ProviderKind {
        ProviderKind::from_name("gce").unwrap()
    }

    fn wait_for_nic(&self, nic: &NicEvent, policy: &WaitPolicy, clock: &dyn Clock) -> Outcome {
        self.0.wait_for_nic(nic, policy, clock)
    }
}

/// Issue 35 item 2: while `leasehook watch`'s GCE long poll is live (a fresh
/// heartbeat listing the MAC) the timer's refresh asks nothing for that NIC and
/// says why; the follower's own refresh asks; a stale heartbeat, another MAC or
/// another cloud: asked as before.
#[test]
fn refresh_leaves_a_nic_the_gce_long_poll_follows_to_it() {
    use super::live::{Heartbeat, write};
    let (mut k, cfg, _root) = world();
    let scripted = Scripted::new([Outcome::Complete(network(true))]);
    run(&mut k, &scripted, &cfg, &bound());
    let paths = Paths::new(&cfg.root);
    let mac = ETH1_MAC.parse().unwrap();
    let beat = |at_ms: u64, macs: Vec<crate::model::MacAddr>| Heartbeat {
        pid: 42,
        at_ms,
        answered_ms: at_ms,
        etag: "e1".to_owned(),
        macs,
    };
    let refresh = |k: &mut RecordingApplier, p: &dyn Provider, changed: bool| {
        with_effects(k, p, |fx| {
            if changed {
                refresh_changed_with(fx, None, &cfg)
            } else {
                refresh_with(fx, None, &cfg)
            }
        })
    };
    write(&paths, "gce", &beat(state::unix_ms(), vec![mac])).unwrap();
    let gce = Scripted::new([]);
    let out = refresh(&mut k, &AsGce(&gce), false);
    assert!(
        matches!(&out[..], [RefreshOutcome::Kept(n, why)] if *n == eth1()
            && why.contains("followed live by `leasehook watch`")),
        "{out:?}"
    );
    assert!(gce.asked.borrow().is_empty());
    // The follower's refresh asks.
    let gce = Scripted::new([Outcome::Complete(network(true))]);
    let out = refresh(&mut k, &AsGce(&gce), true);
    assert!(
        matches!(&out[..], [RefreshOutcome::Refreshed(..)]),
        "{out:?}"
    );
    assert_eq!(gce.asked.borrow().len(), 1);
    // Another cloud, another MAC, a stale record: asked.
    let ec2 = Scripted::new([Outcome::Complete(network(true))]);
    refresh(&mut k, &ec2, false);
    assert_eq!(ec2.asked.borrow().len(), 1);
    for hb in [
        beat(state::unix_ms(), vec!["02:00:00:00:00:09".parse().unwrap()]),
        beat(state::unix_ms() - 60_000, vec![mac]),
    ] {
        write(&paths, "gce", &hb).unwrap();
        let gce = Scripted::new([Outcome::Complete(network(true))]);
        let out = refresh(&mut k, &AsGce(&gce), false);
        assert!(
            matches!(&out[..], [RefreshOutcome::Refreshed(..)]),
            "{out:?}"
        );
        assert_eq!(gce.asked.borrow().len(), 1, "{hb:?}");
    }
    // A link gone is still the timer's.
    write(&paths, "gce", &beat(state::unix_ms(), vec![mac])).unwrap();
    k.links.retain(|l| l.name != eth1());
    let out = refresh(&mut k, &AsGce(&Scripted::new([])), false);
    assert!(
        matches!(&out[..], [RefreshOutcome::LinkGone(..)]),
        "{out:?}"
    );
}

/// A provider of a cloud that serves eth1 no DHCP (OCI's secondary VNICs): each
/// refresh's `unleased` gets the next scripted answer.
#[derive(Debug, Default)]
struct Unleasing {
    answers: RefCell<VecDeque<Result<crate::source::provider::Unleased>>>,
}

impl Provider for Unleasing {
    fn kind(&self) -> ProviderKind {
        ProviderKind::from_name("ec2").unwrap()
    }

    fn wait_for_nic(&self, _nic: &NicEvent, _policy: &WaitPolicy, _clock: &dyn Clock) -> Outcome {
        Outcome::Failed(disabled())
    }

    fn unleased(
        &self,
        _policy: &WaitPolicy,
        _clock: &dyn Clock,
    ) -> Option<Result<crate::source::provider::Unleased>> {
        Some(
            self.answers
                .borrow_mut()
                .pop_front()
                .unwrap_or_else(|| Err(disabled())),
        )
    }
}

/// The metadata listing eth1 without DHCP at `address` (in 10.0.1.0/24), or not
/// at all.
#[allow(clippy::unnecessary_wraps)]
fn unleased(address: Option<&str>) -> Result<crate::source::provider::Unleased> {
    use crate::source::provider::{Unleased, UnleasedNic};
    let mut network = network(true);
    let nics = address
        .map(|a| {
            let nic = network
                .nics
                .iter_mut()
                .find(|n| n.mac.to_string() == ETH1_MAC);
            nic.unwrap().local_ipv4s = vec![a.parse().unwrap()];
            UnleasedNic {
                mac: ETH1_MAC.parse().unwrap(),
                leases: vec![Lease {
                    family: Family::V4,
                    address: a.parse().unwrap(),
                    prefix_len: 24,
                    routers: vec!["10.0.1.1".parse().unwrap()],
                    reason: Reason::Metadata,
                }],
                link: None,
            }
        })
        .into_iter()
        .collect();
    if address.is_none() {
        network.nics.retain(|n| n.mac.to_string() != ETH1_MAC);
    }
    Ok(Unleased {
        nics,
        network,
        owns_links: false,
    })
}

fn refresh_unleasing(
    k: &mut RecordingApplier,
    provider: &Unleasing,
    cfg: &HookConfig,
    only: Option<&IfName>,
) -> Vec<RefreshOutcome> {
    with_effects(k, provider, |fx| refresh_with(fx, only, cfg))
}

fn addresses(k: &RecordingApplier) -> Vec<String> {
    k.owned.addresses.iter().map(ToString::to_string).collect()
}

#[test]
fn refresh_configures_a_nic_without_dhcp_and_follows_the_metadata() {
    let (mut k, cfg, _root) = world();
    k.down.insert(3);
    let provider = Unleasing::default();
    provider.answers.borrow_mut().extend([
        unleased(Some("10.0.1.20")),
        unleased(Some("10.0.1.20")),
        Err(disabled()),
        unleased(Some("10.0.1.30")),
        unleased(None),
    ]);
    // First seen: brought up, its address (with the subnet's length), rules, table.
    let out = refresh_unleasing(&mut k, &provider, &cfg, None);
    assert!(
        matches!(&out[..], [RefreshOutcome::Addressed(n, r)] if *n == eth1() && r.writes() > 0),
        "{out:?}"
    );
    assert!(k.down.is_empty(), "eth1 was not brought up");
    assert_eq!(addresses(&k), ["10.0.1.20/24 dev eth1"]);
    assert_eq!(rules(&k), ["from 10.0.1.20/32 lookup 10001 priority 10001"]);
    let st = recorded(&cfg).unwrap();
    assert!(st.leases().iter().all(|l| l.reason == Reason::Metadata));
    // The same answer again: nothing written.
    let writes = k.writes.len();
    let out = refresh_unleasing(&mut k, &provider, &cfg, None);
    assert!(
        matches!(&out[..], [RefreshOutcome::Refreshed(_, r)] if r.writes() == 0),
        "{out:?}"
    );
    assert_eq!(k.writes.len(), writes);
    // The metadata does not answer: nothing changes.
    let before = k.owned.clone();
    let out = refresh_unleasing(&mut k, &provider, &cfg, None);
    assert!(
        matches!(&out[..], [RefreshOutcome::Unchecked(_, why)] if why.contains("did not answer")),
        "{out:?}"
    );
    assert_eq!(k.owned, before);
    // A new address replaces the old one, rule and all.
    refresh_unleasing(&mut k, &provider, &cfg, None);
    assert_eq!(addresses(&k), ["10.0.1.30/24 dev eth1"]);
    assert_eq!(rules(&k), ["from 10.0.1.30/32 lookup 10001 priority 10001"]);
    // The metadata no longer lists it (detached, the link stays): everything goes.
    let out = refresh_unleasing(&mut k, &provider, &cfg, None);
    assert!(
        matches!(&out[..], [RefreshOutcome::Unlisted(n, _)] if *n == eth1()),
        "{out:?}"
    );
    assert!(k.owned.addresses.is_empty() && k.owned.rules.is_empty() && k.owned.routes.is_empty());
    assert!(recorded(&cfg).is_none());
}

#[test]
fn an_address_another_tool_put_there_is_left_alone_and_survives_the_flush() {
    let (mut k, cfg, _root) = world();
    let theirs = crate::model::Address {
        addr: "10.0.1.20/24".parse().unwrap(),
        dev: eth1(),
    };
    k.foreign.addresses.insert(theirs.clone());
    let provider = Unleasing::default();
    provider
        .answers
        .borrow_mut()
        .extend([unleased(Some("10.0.1.20")), unleased(None)]);
    let out = refresh_unleasing(&mut k, &provider, &cfg, None);
    assert!(
        matches!(&out[..], [RefreshOutcome::Addressed(..)]),
        "{out:?}"
    );
    // Not claimed, not written; the rules and the table are still leasehook's.
    assert!(k.owned.addresses.is_empty(), "{:?}", k.owned.addresses);
    assert!(
        !k.writes
            .iter()
            .any(|o| matches!(o, crate::diff::Op::AddAddress(_)))
    );
    assert_eq!(rules(&k), ["from 10.0.1.20/32 lookup 10001 priority 10001"]);
    refresh_unleasing(&mut k, &provider, &cfg, None);
    assert!(k.owned.rules.is_empty());
    assert!(k.foreign.addresses.contains(&theirs));
    assert!(
        !k.writes
            .iter()
            .any(|o| matches!(o, crate::diff::Op::DelAddress(_)))
    );
}

#[test]
fn only_the_named_interface_is_configured_and_a_dhcp_cloud_asks_nothing() {
    let (mut k, cfg, _root) = world();
    let provider = Unleasing::default();
    provider
        .answers
        .borrow_mut()
        .extend([unleased(Some("10.0.1.20")), unleased(Some("10.0.1.20"))]);
    let eth0 = IfName::try_new("eth0").unwrap();
    let out = refresh_unleasing(&mut k, &provider, &cfg, Some(&eth0));
    assert!(
        matches!(&out[..], [RefreshOutcome::Kept(n, why)] if *n == eth0 && why == "no recorded plan"),
        "{out:?}"
    );
    assert!(k.writes.is_empty());
    let out = refresh_unleasing(&mut k, &provider, &cfg, Some(&eth1()));
    assert!(
        matches!(&out[..], [RefreshOutcome::Addressed(..)]),
        "{out:?}"
    );
    // On a cloud whose every NIC has DHCP, the recorded NIC is left as it is.
    let writes = k.writes.len();
    let dhcp_only = Scripted::new([]);
    let out = with_effects(&mut k, &dhcp_only, |fx| refresh_with(fx, None, &cfg));
    assert!(
        matches!(&out[..], [RefreshOutcome::Kept(_, why)] if why.contains("serves every NIC DHCP")),
        "{out:?}"
    );
    assert_eq!(k.writes.len(), writes);
    assert!(dhcp_only.asked.borrow().is_empty());
}

#[test]
fn a_dhcp_clients_failure_does_not_remove_a_nic_configured_from_the_metadata() {
    let (mut k, cfg, _root) = world();
    let provider = Unleasing::default();
    provider
        .answers
        .borrow_mut()
        .push_back(unleased(Some("10.0.1.20")));
    refresh_unleasing(&mut k, &provider, &cfg, None);
    let before = k.owned.clone();
    assert!(!before.addresses.is_empty());
    // A DHCP client started on the NIC anyway gets no answer and says so.
    let mut failed = released();
    failed.reason = Reason::Fail;
    let out = run(&mut k, &Scripted::new([]), &cfg, &failed);
    assert!(
        matches!(&out, HookOutcome::Removed(r) if r.writes() == 0),
        "{out:?}"
    );
    assert_eq!(k.owned, before);
    assert!(recorded(&cfg).is_some());
}

#[test]
fn the_udev_paths_refresh_leaves_a_nic_with_dhcp_to_its_client() {
    let (mut k, cfg, _root) = world();
    let provider = Scripted::new([Outcome::Complete(network(true))]);
    run(&mut k, &provider, &cfg, &bound());
    let writes = k.writes.len();
    // `refresh --without-dhcp --iface eth1` on a cloud whose every NIC has DHCP.
    let out = with_effects(&mut k, &provider, |fx| {
        address_unleased_with(fx, &cfg, Some(&eth1()))
    });
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(
        provider.asked.borrow().len(),
        1,
        "the metadata was asked again"
    );
    assert_eq!(k.writes.len(), writes);
}

/// `unleased(Some(address))` with `extra` NICs listed besides eth1 (no link has
/// their MAC), each with a device number and an address.
fn unleased_with(
    address: &str,
    extra: &[(&str, u32, &str)],
) -> Result<crate::source::provider::Unleased> {
    let mut u = unleased(Some(address))?;
    for (mac, device, ip) in extra {
        let mut n = crate::model::NicMetadata::empty(mac.parse().unwrap());
        n.device_number = Some(*device);
        n.local_ipv4s = vec![ip.parse().unwrap()];
        u.network.nics.push(n);
    }
    Ok(u)
}

#[test]
fn a_nic_whose_every_value_is_refused_stays_down_unrecorded_and_is_configured_later() {
    // Issue 30, items 4 and 5: the metadata's one address for eth1 is the
    // metadata service's (refused by the gate), then a good one.
    let (mut k, cfg, _root) = world();
    k.down.insert(3);
    let provider = Unleasing::default();
    provider.answers.borrow_mut().extend([
        unleased(Some("169.254.169.254")),
        unleased(Some("169.254.169.254")),
        unleased(Some("10.0.1.20")),
    ]);
    for _ in 0..2 {
        let out = refresh_unleasing(&mut k, &provider, &cfg, None);
        assert!(
            matches!(&out[..], [RefreshOutcome::Kept(n, why)] if *n == eth1() && why.contains("nothing to configure")),
            "{out:?}"
        );
        assert!(k.down.contains(&3), "eth1 was brought up for nothing");
        assert!(k.writes.is_empty(), "{:?}", k.writes);
        assert!(recorded(&cfg).is_none(), "{:?}", recorded(&cfg));
    }
    let out = refresh_unleasing(&mut k, &provider, &cfg, None);
    assert!(
        matches!(&out[..], [RefreshOutcome::Addressed(n, r)] if *n == eth1() && r.writes() > 0),
        "{out:?}"
    );
    assert!(k.down.is_empty());
    assert_eq!(addresses(&k), ["10.0.1.20/24 dev eth1"]);
    assert_eq!(rules(&k), ["from 10.0.1.20/32 lookup 10001 priority 10001"]);
}

#[test]
fn a_table_collision_records_nothing_and_the_nic_is_configured_once_it_is_gone() {
    // Issue 30, item 5: another VNIC whose slot (device number) is eth1's is
    // listed (attached), then no longer (detached).
    let (mut k, cfg, _root) = world();
    let provider = Unleasing::default();
    provider.answers.borrow_mut().extend([
        unleased_with("10.0.1.20", &[("02:00:00:00:00:09", 1, "10.0.9.9")]),
        unleased(Some("10.0.1.20")),
    ]);
    let out = refresh_unleasing(&mut k, &provider, &cfg, None);
    assert!(
        matches!(&out[..], [RefreshOutcome::Kept(_, why)] if why.contains("nothing to configure")),
        "{out:?}"
    );
    assert!(k.writes.is_empty() && recorded(&cfg).is_none());
    let out = refresh_unleasing(&mut k, &provider, &cfg, None);
    assert!(
        matches!(&out[..], [RefreshOutcome::Addressed(..)]),
        "{out:?}"
    );
    assert_eq!(rules(&k), ["from 10.0.1.20/32 lookup 10001 priority 10001"]);
}

#[test]
fn a_state_that_holds_nothing_is_evaluated_again() {
    // Issue 30, item 5: an empty state an earlier version (or a table
    // conflict) recorded for eth1 is no plan: the next refresh configures it.
    let (mut k, cfg, _root) = world();
    let paths = Paths::new(&cfg.root);
    let empty = crate::model::InterfacePlan::empty(eth1(), ETH1_MAC.parse().unwrap(), false);
    state::write_state(
        &paths,
        &InterfaceState::record(None, &empty, crate::model::Profile::Ec2NetUtils),
    )
    .unwrap();
    let provider = Unleasing::default();
    provider
        .answers
        .borrow_mut()
        .extend([unleased(Some("10.0.1.20")), unleased(Some("10.0.1.20"))]);
    let out = refresh_unleasing(&mut k, &provider, &cfg, None);
    assert!(
        matches!(&out[..], [RefreshOutcome::Addressed(n, _)] if *n == eth1()),
        "{out:?}"
    );
    assert_eq!(addresses(&k), ["10.0.1.20/24 dev eth1"]);
    let st = recorded(&cfg).unwrap();
    assert!(st.leases().iter().all(|l| l.reason == Reason::Metadata));
    // From then on it is followed as any NIC without DHCP.
    let out = refresh_unleasing(&mut k, &provider, &cfg, None);
    assert!(
        matches!(&out[..], [RefreshOutcome::Refreshed(_, r)] if r.writes() == 0),
        "{out:?}"
    );
}

#[test]
fn a_mac_that_is_nobodys_matches_no_link() {
    // Issue 30, item 1: the metadata lists a NIC without DHCP under the
    // all-zero MAC, which a kernel link reports too (`lo`, as netlink did
    // before links were filtered): refused, nothing touched.
    let (mut k, cfg, _root) = world();
    k.links.push(crate::apply::KernelLink {
        index: 1,
        name: IfName::try_new("lo").unwrap(),
        mac: Some(crate::model::MacAddr::new([0; 6])),
    });
    k.down.insert(1);
    let provider = Unleasing::default();
    let mut u = unleased(Some("10.0.1.20")).unwrap();
    for nic in &mut u.nics {
        nic.mac = crate::model::MacAddr::new([0; 6]);
        nic.leases[0].address = "10.200.0.5".parse().unwrap();
        nic.leases[0].prefix_len = 8;
    }
    for n in &mut u.network.nics {
        if n.mac.to_string() == ETH1_MAC {
            n.mac = crate::model::MacAddr::new([0; 6]);
            n.local_ipv4s = vec!["10.200.0.5".parse().unwrap()];
            n.subnet_ipv4_cidr_blocks = vec!["10.0.0.0/8".parse().unwrap()];
        }
    }
    provider.answers.borrow_mut().push_back(Ok(u));
    let out = refresh_unleasing(&mut k, &provider, &cfg, None);
    assert!(out.is_empty(), "{out:?}");
    assert!(k.writes.is_empty() && k.down.contains(&1), "{:?}", k.writes);
}

/// Every plan this thread made ([`crate::plan::plan`], whoever asked: the
/// hook's [`super::planning::plan_one`], a wait's completeness check).
fn plans() -> usize {
    crate::plan::PLANS.with(Cell::get)
}

/// Issue 32, item 4: an event, its worker and a refresh each plan the NIC once
/// (one kernel snapshot, one plan, applied on it), whichever path waited.
#[test]
fn each_path_plans_its_nic_once() {
    let (mut k, cfg, _root) = world();
    let provider = Scripted::new([
        Outcome::Complete(network(true)),
        Outcome::Complete(network(true)),
        Outcome::Complete(network(true)),
    ]);
    for reason in [Reason::Bound, Reason::Renew] {
        let mut event = bound();
        event.reason = reason;
        let before = plans();
        let out = run(&mut k, &provider, &cfg, &event);
        assert!(matches!(out, HookOutcome::Applied(_)), "{out:?}");
        assert_eq!(plans() - before, 1, "{reason}");
    }
    let before = plans();
    let out = with_effects(&mut k, &provider, |fx| refresh_with(fx, None, &cfg));
    assert!(
        matches!(&out[..], [RefreshOutcome::Refreshed(..)]),
        "{out:?}"
    );
    assert_eq!(plans() - before, 1, "refresh");
}

/// EC2's own wait over a scripted IMDS that agrees with [`bound`] at once.
#[derive(Debug)]
struct AgreeingEc2;

impl Provider for AgreeingEc2 {
    fn kind(&self) -> ProviderKind {
        ProviderKind::from_name("ec2").unwrap()
    }

    fn wait_for_nic(&self, nic: &NicEvent, policy: &WaitPolicy, clock: &dyn Clock) -> Outcome {
        let eth1 = format!("/latest/meta-data/network/interfaces/macs/{ETH1_MAC}");
        let imds = crate::source::provider::fake::Scripted::answering([
            ("/latest/meta-data/mac".to_owned(), "02:00:00:00:00:01"),
            (
                format!("{eth1}/"),
                "device-number\nlocal-ipv4s\nsubnet-ipv4-cidr-block",
            ),
            (format!("{eth1}/device-number"), "1"),
            (format!("{eth1}/local-ipv4s"), "10.0.1.20"),
            (format!("{eth1}/subnet-ipv4-cidr-block"), "10.0.1.0/24"),
        ]);
        crate::source::ec2::EC2_WAIT.wait(&imds, nic, policy, clock)
    }
}

/// Issue 32, item 4, the whole event: a BOUND event whose metadata agrees at
/// once plans once, its wait included: the wait's completeness check of what
/// it fetched lists what the plan would lack without planning
/// ([`crate::source::provider::complete::missing`]), and the hook plans on the
/// kernel as it is after the wait.
#[test]
fn a_bound_event_plans_once_its_wait_included() {
    let (mut k, cfg, _root) = world();
    let before = plans();
    let worker = Path::new("/nonexistent/leasehook-worker");
    let out = with_effects(&mut k, &AgreeingEc2, |fx| {
        handle_with(fx, &bound(), &cfg, worker)
    });
    assert!(matches!(out, HookOutcome::Applied(_)), "{out:?}");
    assert_eq!(rules(&k), ["from 10.0.1.20/32 lookup 10001 priority 10001"]);
    assert_eq!(plans() - before, 1);
}

/// Issue 34: addresses the kernel configured from router advertisements.
mod autoconf;

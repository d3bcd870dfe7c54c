// SPDX-License-Identifier: Apache-2.0
//! The self-healing's decisions with a fake clock, and one check at a time
//! against the in-memory kernel below a temporary root.

use std::time::{Duration, Instant};

use super::run::Healer;
use super::*;
use crate::apply::apply_plan;
use crate::apply::record::RecordingApplier;
use crate::apply::state::{self, InterfaceState, Paths};
use crate::diff::Op;
use crate::model::{Plan, Profile, Rule};
use crate::plan::{PlanConfig, PlanInput, plan};
use crate::{example, metadata};

fn name(n: &str) -> IfName {
    IfName::try_new(n).unwrap()
}

fn rule(from: &str, table: u32, priority: Option<u32>) -> Rule {
    Rule {
        from: from.parse().unwrap(),
        to: None,
        table,
        priority,
    }
}

fn recorded() -> State {
    State {
        rules: [rule("10.0.1.20/32", 10001, Some(10001))].into(),
        ..State::default()
    }
}

fn nic<'a>(n: &'a IfName, want: &'a State) -> Nic<'a> {
    Nic {
        name: n,
        recorded: want,
        link: true,
        lock_free: true,
        stopped: false,
    }
}

#[test]
fn missing_is_what_the_record_has_and_the_kernel_does_not() {
    let want = State {
        rules: [
            rule("10.0.1.20/32", 10001, Some(10001)),
            rule("10.0.1.21/32", 10001, None),
        ]
        .into(),
        ..State::default()
    };
    // The kernel chose 32765 for the rule recorded without a priority.
    let have = State {
        rules: [rule("10.0.1.21/32", 10001, Some(32765))].into(),
        ..State::default()
    };
    assert_eq!(
        missing(&want, &have).rules,
        [rule("10.0.1.20/32", 10001, Some(10001))].into()
    );
    assert!(missing(&want, &want).is_empty());
    assert!(
        missing(&State::default(), &have).is_empty(),
        "extra is not missing"
    );
}

#[test]
fn three_repairs_within_a_minute_then_it_gives_up_until_the_record_is_cleared() {
    let (eth1, want) = (name("eth1"), recorded());
    let empty = State::default();
    let t0 = Instant::now();
    let mut e = Engine::new();
    assert_eq!(e.decide(&nic(&eth1, &want), &want, t0), Verdict::Intact);
    for i in 0..3 {
        let at = t0 + Duration::from_millis(200 * i);
        assert_eq!(
            e.decide(&nic(&eth1, &want), &empty, at),
            Verdict::Repair(want.clone()),
            "repair {i}"
        );
    }
    let fourth = t0 + Duration::from_millis(800);
    assert_eq!(
        e.decide(&nic(&eth1, &want), &empty, fourth),
        Verdict::GiveUp(want.clone())
    );
    // The conflict is recorded: stopped, whatever the kernel holds.
    let stopped = Nic {
        stopped: true,
        ..nic(&eth1, &want)
    };
    assert_eq!(e.decide(&stopped, &empty, fourth), Verdict::Stopped);
    // A refresh committed the NIC and cleared the record: the count starts again
    // (without that, the three repairs still in the window would stop it at once).
    let later = fourth + Duration::from_secs(1);
    assert_eq!(
        e.decide(&nic(&eth1, &want), &empty, later),
        Verdict::Repair(want.clone())
    );
    assert_eq!(e.repairs(&eth1), 1);
}

#[test]
fn repairs_older_than_the_window_do_not_count() {
    let (eth1, want) = (name("eth1"), recorded());
    let empty = State::default();
    let t0 = Instant::now();
    let mut e = Engine::new();
    for i in 0..3 {
        let at = t0 + Duration::from_secs(25 * i);
        assert!(matches!(
            e.decide(&nic(&eth1, &want), &empty, at),
            Verdict::Repair(_)
        ));
    }
    // 0 s, 25 s, 50 s; at 61 s the first is out of the window.
    let at = t0 + Duration::from_secs(61);
    assert!(matches!(
        e.decide(&nic(&eth1, &want), &empty, at),
        Verdict::Repair(_)
    ));
    // At 70 s three (25, 50, 61) are within it.
    let at = t0 + Duration::from_secs(70);
    assert!(matches!(
        e.decide(&nic(&eth1, &want), &empty, at),
        Verdict::GiveUp(_)
    ));
}

#[test]
fn a_busy_lock_a_gone_link_and_another_nic_are_left_alone() {
    let (eth1, eth2, want) = (name("eth1"), name("eth2"), recorded());
    let empty = State::default();
    let now = Instant::now();
    let mut e = Engine::new();
    let busy = Nic {
        lock_free: false,
        ..nic(&eth1, &want)
    };
    assert_eq!(e.decide(&busy, &empty, now), Verdict::Busy);
    let gone = Nic {
        link: false,
        ..nic(&eth1, &want)
    };
    assert_eq!(e.decide(&gone, &empty, now), Verdict::NoLink);
    assert_eq!(e.repairs(&eth1), 0, "neither counts as a repair");
    // Repairs of one NIC do not count against another.
    for _ in 0..3 {
        assert!(matches!(
            e.decide(&nic(&eth1, &want), &empty, now),
            Verdict::Repair(_)
        ));
    }
    assert!(matches!(
        e.decide(&nic(&eth2, &want), &empty, now),
        Verdict::Repair(_)
    ));
}

#[test]
fn one_check_per_burst_and_a_storm_is_checked_anyway() {
    let t0 = Instant::now();
    let mut d = Debounce::default();
    assert!(!d.due(t0 + Duration::from_secs(3600)), "nothing noted");
    assert_eq!(
        d.wait(t0, Duration::from_millis(200)),
        Duration::from_millis(200)
    );
    d.note(t0);
    d.note(t0 + Duration::from_millis(100));
    assert!(
        !d.due(t0 + Duration::from_millis(200)),
        "still in the burst"
    );
    assert!(d.due(t0 + Duration::from_millis(250)), "quiet for 150 ms");
    assert_eq!(
        d.wait(t0 + Duration::from_millis(200), Duration::from_millis(200)),
        Duration::from_millis(50)
    );
    d.checked();
    assert!(!d.due(t0 + Duration::from_secs(10)));
    // A notification every 100 ms forever: checked 500 ms after the first.
    for i in 0..10 {
        d.note(t0 + Duration::from_millis(100 * i));
    }
    assert!(d.due(t0 + Duration::from_millis(500)));
    d.checked();
    d.retry_at(t0 + BUSY_RETRY);
    assert!(!d.due(t0) && d.due(t0 + BUSY_RETRY));
}

/// A kernel with the example's links and its plan applied, the states recorded
/// below a temporary root.
fn world() -> (RecordingApplier, tempfile::TempDir, Plan) {
    let md = metadata::parse_tree(&example::metadata()).unwrap();
    let p = plan(
        &PlanInput {
            metadata: &md,
            links: &example::links(),
            leases: &example::leases(),
            link_addresses: &[],
            next_hops: &[],
        },
        &PlanConfig::default(),
    )
    .unwrap();
    let mut k = RecordingApplier::with_links(example::links());
    apply_plan(&mut k, &p, &[]).unwrap();
    let root = tempfile::tempdir().unwrap();
    let paths = Paths::new(root.path());
    for ip in &p.interfaces {
        state::write_state(
            &paths,
            &InterfaceState::record(None, ip, Profile::Ec2NetUtils),
        )
        .unwrap();
    }
    k.writes.clear();
    (k, root, p)
}

#[test]
fn a_check_puts_back_only_what_is_missing_and_touches_nothing_else() {
    let (mut k, root, p) = world();
    let mut h = Healer::new(root.path(), None);
    let now = Instant::now();
    assert_eq!(h.check(&mut k, now).unwrap(), run::Checked::default());
    assert!(k.writes.is_empty(), "nothing missing, nothing written");
    // Someone deletes one of eth1's rules and flushes its table; another
    // protocol's rule sits at the same priority.
    let eth1 = &p.interfaces[1];
    let theirs = rule("192.0.2.9/32", 10001, eth1.rules[0].priority);
    k.foreign.rules.insert(theirs.clone());
    let gone_rule = eth1.rules[0].clone();
    k.owned.rules.remove(&gone_rule);
    k.owned.routes.retain(|r| r.dev != eth1.name);
    let checked = h.check(&mut k, now).unwrap();
    assert_eq!(checked.repaired, [eth1.name.to_string()]);
    let added: Vec<&Op> = k.writes.iter().collect();
    assert!(
        added
            .iter()
            .all(|op| matches!(op, Op::AddRoute(_) | Op::AddRule(_))),
        "only adds: {added:?}"
    );
    assert_eq!(added.last(), Some(&&Op::AddRule(gone_rule)), "rules last");
    assert_eq!(
        added.len(),
        1 + eth1.routes.len(),
        "the rule and the table's routes"
    );
    assert!(k.foreign.rules.contains(&theirs), "theirs untouched");
    // The kernel agrees with the records again.
    k.writes.clear();
    h.check(&mut k, now).unwrap();
    assert!(k.writes.is_empty());
}

#[test]
fn a_held_lock_is_left_to_its_holder_and_a_fourth_removal_is_a_conflict() {
    let (mut k, root, p) = world();
    let paths = Paths::new(root.path());
    let eth1 = &p.interfaces[1];
    let mut h = Healer::new(root.path(), None);
    let t0 = Instant::now();
    let lock = state::try_lock_interface(&paths, &eth1.name)
        .unwrap()
        .unwrap();
    k.owned.rules.remove(&eth1.rules[0]);
    let checked = h.check(&mut k, t0).unwrap();
    assert_eq!(checked.busy, [eth1.name.to_string()]);
    assert!(k.writes.is_empty(), "a hook holds the lock: its business");
    drop(lock);
    for i in 0..3 {
        k.owned.rules.remove(&eth1.rules[0]);
        let checked = h
            .check(&mut k, t0 + Duration::from_millis(200 * i))
            .unwrap();
        assert_eq!(checked.repaired, [eth1.name.to_string()], "repair {i}");
    }
    k.owned.rules.remove(&eth1.rules[0]);
    k.writes.clear();
    let checked = h.check(&mut k, t0 + Duration::from_millis(800)).unwrap();
    assert_eq!(checked.gave_up, [eth1.name.to_string()]);
    assert!(k.writes.is_empty(), "stopped fighting");
    let conflicts = crate::commit::recorded_conflicts(&paths);
    assert_eq!(conflicts.len(), 1, "{conflicts:?}");
    assert_eq!(conflicts[0].0, "eth1");
    assert!(
        conflicts[0].1.contains(&format!("rule {}", eth1.rules[0]))
            && conflicts[0].1.contains("after 3 repairs"),
        "{conflicts:?}"
    );
    // Later checks leave it alone while the record is there.
    h.check(&mut k, t0 + Duration::from_secs(2)).unwrap();
    assert!(k.writes.is_empty());
    // A commit of the NIC (a lease event, a refresh) clears the record and puts
    // the rule back; the watcher fights for it again.
    let st = state::read_state(&paths, &eth1.name).unwrap().unwrap();
    let one = Plan {
        interfaces: vec![eth1.clone()],
        ..p.clone()
    };
    crate::commit::commit(&mut k, &paths, &one, &[st], &[]).unwrap();
    assert!(crate::commit::recorded_conflicts(&paths).is_empty());
    k.owned.rules.remove(&eth1.rules[0]);
    let checked = h.check(&mut k, t0 + Duration::from_secs(3)).unwrap();
    assert_eq!(checked.repaired, [eth1.name.to_string()]);
}

#[test]
fn a_nic_whose_link_now_has_another_mac_is_not_repaired() {
    let (mut k, root, p) = world();
    let eth1 = &p.interfaces[1];
    for l in &mut k.links {
        if l.name == eth1.name {
            l.mac = Some(crate::model::MacAddr::new([2, 0, 0, 0, 0x99, 0x99]));
        }
    }
    k.owned.rules.remove(&eth1.rules[0]);
    let mut h = Healer::new(root.path(), None);
    let checked = h.check(&mut k, Instant::now()).unwrap();
    assert!(checked.repaired.is_empty(), "{checked:?}");
    assert!(k.writes.is_empty());
}

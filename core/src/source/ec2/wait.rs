// SPDX-License-Identifier: Apache-2.0
//! Performs IO: EC2's consistency wait, the seam's session
//! ([`crate::source::provider::session`]) over EC2's keys: the pure [`nic`]
//! module decides what to ask next and whether IMDS agrees, the fetch it is
//! handed asks (in production the [`super::Ec2`] client, bound to the NIC).

use super::nic::{self, Fetched, Request};
use crate::source::provider::session::Keyed;

pub use crate::source::provider::wait::{Clock, Outcome, SystemClock, WaitPolicy};

/// EC2's consistency wait: [`Keyed::wait`] over the [`nic`] module's answers.
pub static EC2_WAIT: Keyed<Fetched, Request> = Keyed {
    primary_mac: Request::PrimaryMac,
    path: Request::path,
    record: Fetched::record,
    assess: nic::assess,
    next_request: nic::next_request,
};

#[cfg(test)]
mod tests {

    use std::time::Duration;

    use super::*;
    use crate::error::{Error, ImdsErrorKind, Result};
    use crate::model::{Family, IfName, Lease, Missing, Reason};
    use crate::source::ec2::Fetch;
    use crate::source::provider::NicEvent;
    use crate::source::provider::PrimaryUse;
    use crate::source::provider::fake::{FakeClock, Scripted, bound, http, policy};

    const MACS: &str = "/latest/meta-data/network/interfaces/macs";
    const SECONDARY: &str = "02:00:00:00:00:02";

    fn secondary(imds: Scripted<'_>) -> Scripted<'_> {
        imds.value("/latest/meta-data/mac", "02:00:00:00:00:01")
            .value(
                &format!("{MACS}/{SECONDARY}/"),
                "device-number\ninterface-id\nlocal-ipv4s\nsubnet-ipv4-cidr-block\nmac",
            )
            .value(&format!("{MACS}/{SECONDARY}/device-number"), "1")
            .value(&format!("{MACS}/{SECONDARY}/interface-id"), "eni-2")
            .value(&format!("{MACS}/{SECONDARY}/local-ipv4s"), "10.0.1.20")
            .value(
                &format!("{MACS}/{SECONDARY}/subnet-ipv4-cidr-block"),
                "10.0.1.0/24",
            )
    }

    fn event(addr: &str) -> NicEvent {
        bound("eth1", SECONDARY, addr, 24, "10.0.1.1")
    }

    /// Whether the wait failed with HTTP `status` (and this `Retry-After`).
    fn failed_with_http(out: &Outcome, want: u16, after: Option<u64>) -> bool {
        matches!(out, Outcome::Failed(Error::Imds {
            kind: ImdsErrorKind::Http { status, retry_after },
            ..
        }) if *status == want && retry_after.map(|d| d.as_secs()) == after)
    }

    #[test]
    fn consistent_imds_takes_one_round() {
        let clock = FakeClock::new();
        let imds = secondary(Scripted::new(&clock));
        let out = EC2_WAIT.wait(&imds, &event("10.0.1.20"), &policy(30_000), &clock);
        let Outcome::Complete(net) = out else {
            panic!("{out:?}")
        };
        assert_eq!(net.nics[0].device_number, Some(1));
        // mac, the listing, four keys, and the primary's network-card (404: a
        // single-card type), which tells that this NIC's absent one means card 0.
        assert_eq!(imds.requests().len(), 7);
        assert_eq!(imds.count_of("/02:00:00:00:00:01/network-card"), 1);
        assert!(clock.sleeps.borrow().is_empty());
    }

    /// The primary's folder, every key of it served.
    fn primary(imds: Scripted<'_>) -> Scripted<'_> {
        const P: &str = "02:00:00:00:00:01";
        imds.value("/latest/meta-data/mac", P)
            .value(
                &format!("{MACS}/{P}/"),
                "device-number\ninterface-id\nlocal-ipv4s\nsubnet-ipv4-cidr-block\nmac",
            )
            .value(&format!("{MACS}/{P}/device-number"), "0")
            .value(&format!("{MACS}/{P}/interface-id"), "eni-1")
            .value(&format!("{MACS}/{P}/local-ipv4s"), "10.0.0.10\n10.0.0.11")
            .value(&format!("{MACS}/{P}/subnet-ipv4-cidr-block"), "10.0.0.0/24")
    }

    fn primary_event(use_: PrimaryUse) -> NicEvent {
        NicEvent::try_new(
            IfName::try_new("eth0").unwrap(),
            "02:00:00:00:00:01".parse().unwrap(),
            vec![Lease {
                family: Family::V4,
                address: "10.0.0.10".parse().unwrap(),
                prefix_len: 24,
                routers: vec!["10.0.0.1".parse().unwrap()],
                reason: Reason::Bound,
            }],
        )
        .unwrap()
        .with_primary_use(use_)
    }

    #[test]
    fn the_primary_costs_what_its_plan_uses() {
        let count = |ev: NicEvent| {
            let clock = FakeClock::new();
            let imds = primary(Scripted::new(&clock));
            let out = EC2_WAIT.wait(&imds, &ev, &policy(30_000), &clock);
            assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
            imds.requests()
        };
        // Rules on the primary: mac, the listing and its four keys, as before.
        assert_eq!(count(primary_event(PrimaryUse::Everything)).len(), 6);
        // Its secondary addresses: mac and local-ipv4s.
        assert_eq!(
            count(primary_event(PrimaryUse::SecondaryAddresses)),
            [
                "/latest/meta-data/mac".to_owned(),
                format!("{MACS}/02:00:00:00:00:01/local-ipv4s")
            ]
        );
        // Nothing to add: mac alone.
        assert_eq!(
            count(primary_event(PrimaryUse::Nothing)),
            ["/latest/meta-data/mac"]
        );
        // Known to be the primary (refresh): not even mac.
        assert_eq!(
            count(primary_event(PrimaryUse::SecondaryAddresses).known_primary()),
            [format!("{MACS}/02:00:00:00:00:01/local-ipv4s")]
        );
        assert!(count(primary_event(PrimaryUse::Nothing).known_primary()).is_empty());
    }

    #[test]
    fn a_secondary_whose_primary_is_recorded_is_not_asked_mac() {
        // Issue 35: refresh knows the primary from its record; the answer is the
        // same as when `mac` is asked, one request less.
        let run = |ev: NicEvent| {
            let clock = FakeClock::new();
            let imds = secondary(Scripted::new(&clock));
            let out = EC2_WAIT.wait(&imds, &ev, &policy(30_000), &clock);
            let Outcome::Complete(network) = out else {
                panic!("{out:?}")
            };
            (network, imds.requests())
        };
        let (asked, with_mac) = run(event("10.0.1.20"));
        let (known, without) =
            run(event("10.0.1.20").with_known_primary_mac("02:00:00:00:00:01".parse().unwrap()));
        assert_eq!(asked, known);
        assert!(with_mac.contains(&"/latest/meta-data/mac".to_owned()));
        assert!(!without.contains(&"/latest/meta-data/mac".to_owned()));
        assert_eq!(without.len() + 1, with_mac.len(), "{without:?}");
    }

    #[test]
    fn the_primary_keeps_the_error_policy() {
        // An error on its one key is retried and never read as empty.
        let clock = FakeClock::new();
        let imds = primary(Scripted::new(&clock))
            .leaf(&format!("{MACS}/02:00:00:00:00:01/local-ipv4s"), |_| {
                Err(http(500, None))
            });
        let ev = primary_event(PrimaryUse::SecondaryAddresses);
        let out = EC2_WAIT.wait(&imds, &ev, &policy(2_000), &clock);
        assert!(failed_with_http(&out, 500, None), "{out:?}");
        assert!(imds.count_of("/local-ipv4s") > 1);
        assert_eq!(imds.count_of("device-number"), 0);
    }

    #[test]
    fn backoff_doubles_to_the_cap_within_the_budget() {
        // The subnet never appears: rounds at 0, 0.1, 0.3, 0.7, 1.5, 3.1, 5.1, ...
        let clock = FakeClock::new();
        let imds = secondary(Scripted::new(&clock)).leaf(
            &format!("{MACS}/{SECONDARY}/subnet-ipv4-cidr-block"),
            |_| Ok(None),
        );
        let out = EC2_WAIT.wait(&imds, &event("10.0.1.20"), &policy(6_000), &clock);
        let Outcome::Partial { network, missing } = out else {
            panic!("{out:?}")
        };
        assert_eq!(missing, [Missing::Subnet { family: Family::V4 }]);
        // What IMDS did say is kept.
        assert_eq!(network.nics[0].local_ipv4s.len(), 1);
        let ms: Vec<u128> = clock
            .sleeps
            .borrow()
            .iter()
            .map(Duration::as_millis)
            .collect();
        // Each round costs 1 ms per request in the fake. The next pause (2 s from
        // 5.1 s) would end after the budget, and no request may start then: the
        // wait gives up at once instead of sleeping for nothing.
        assert_eq!(ms, [100, 200, 400, 800, 1600, 2000]);
        // One full first round, then only the subnet, once per round.
        assert_eq!(imds.count_of("subnet-ipv4-cidr-block"), 7);
        assert_eq!(imds.requests().len(), 6 + 7, "{:?}", imds.requests());
        assert!(clock.t() < Duration::from_secs(6), "{:?}", clock.t());
    }

    #[test]
    fn no_request_starts_after_the_budget() {
        // Issue 18, item 5: every answer is a 500 after 0.95 s. The first round
        // ends at 0.95 s with 50 ms of the 1 s budget left; a pause and another
        // request then would hold the caller to about 2 s. No request may start
        // at or after the budget, whatever round it would open.
        // When each request started (the fake logs it once its answer's delay
        // has passed), and when the wait ended, with `budget_ms`.
        let run = |budget_ms: u64| {
            let clock = FakeClock::new();
            let imds = SlowImds {
                inner: secondary(Scripted::new(&clock))
                    .leaf("/latest/meta-data/mac", |_| Err(http(500, None))),
                each: Duration::from_millis(949),
            };
            let out = EC2_WAIT.wait(&imds, &event("10.0.1.20"), &policy(budget_ms), &clock);
            assert!(failed_with_http(&out, 500, None), "{out:?}");
            let starts: Vec<Duration> = imds
                .inner
                .log
                .borrow()
                .iter()
                .map(|(t, _)| t.saturating_sub(imds.each))
                .collect();
            (starts, clock.t())
        };
        let (starts, end) = run(1_000);
        assert_eq!(starts.len(), 1, "{starts:?}");
        assert!(end <= Duration::from_millis(1_000 + 950), "{end:?}");
        // With a longer budget the next round does start, while some is left.
        let (starts, end) = run(3_000);
        assert!(starts.len() >= 2, "{starts:?}");
        assert!(
            starts.iter().all(|t| *t < Duration::from_secs(3)),
            "a request started after the budget: {starts:?}"
        );
        assert!(end <= Duration::from_millis(3_000 + 950), "{end:?}");
    }

    /// A fake IMDS whose every answer takes `each` of fake time.
    struct SlowImds<'c> {
        inner: Scripted<'c>,
        each: Duration,
    }

    impl Fetch for SlowImds<'_> {
        fn get(&self, path: &str) -> Result<Option<String>> {
            if let Some(c) = self.inner.clock {
                c.advance(self.each);
            }
            self.inner.get(path)
        }
    }

    #[test]
    fn a_slow_imds_is_cut_off_mid_round_at_the_budget() {
        // Every answer is in time (0.5 s), but a round of six takes 3 s: the wait
        // must stop asking once the 1 s budget is spent, not finish the round.
        // Found by the fault matrix (tests/tests/faults.rs, row `imds_slow`).
        let clock = FakeClock::new();
        let imds = SlowImds {
            inner: secondary(Scripted::new(&clock)),
            each: Duration::from_millis(500),
        };
        let out = EC2_WAIT.wait(&imds, &event("10.0.1.20"), &policy(1_000), &clock);
        let Outcome::Partial { missing, .. } = out else {
            panic!("{out:?}")
        };
        assert!(!missing.is_empty());
        assert_eq!(
            imds.inner.requests().len(),
            2,
            "{:?}",
            imds.inner.requests()
        );
        assert!(
            clock.t() <= Duration::from_millis(1_000 + 502),
            "{:?}",
            clock.t()
        );
        assert!(clock.sleeps.borrow().is_empty());
    }

    #[test]
    fn errors_until_a_slow_budget_ends_still_fail() {
        // Each answer takes 0.3 s and local-ipv4s always fails: the last round,
        // cut short by the budget before it reaches local-ipv4s, must not turn
        // the errors into `Partial`.
        let clock = FakeClock::new();
        let imds = SlowImds {
            inner: secondary(Scripted::new(&clock))
                .leaf(&format!("{MACS}/{SECONDARY}/local-ipv4s"), |_| {
                    Err(http(500, None))
                }),
            each: Duration::from_millis(300),
        };
        let out = EC2_WAIT.wait(&imds, &event("10.0.1.20"), &policy(2_000), &clock);
        assert!(failed_with_http(&out, 500, None), "{out:?}");
    }

    #[test]
    fn jitter_stays_between_the_base_and_the_cap() {
        let p = WaitPolicy {
            jitter_seed: Some(7),
            ..WaitPolicy::default()
        };
        let got: Vec<Duration> = p.backoff().take(12).collect();
        let mut base = Duration::from_millis(100);
        for d in got {
            assert!(
                d >= base.min(p.max_delay) && d <= p.max_delay,
                "{d:?} {base:?}"
            );
            base = (base * 2).min(p.max_delay);
        }
        // Seeded: the same sequence every time.
        let again: Vec<Duration> = p.backoff().take(12).collect();
        assert_eq!(again, p.backoff().take(12).collect::<Vec<_>>());
    }

    #[test]
    fn device_number_zero_on_a_secondary_is_waited_out() {
        let clock = FakeClock::new();
        let imds = secondary(Scripted::new(&clock)).leaf(
            &format!("{MACS}/{SECONDARY}/device-number"),
            |t| {
                Ok(Some(
                    if t < Duration::from_secs(1) { "0" } else { "1" }.into(),
                ))
            },
        );
        let out = EC2_WAIT.wait(&imds, &event("10.0.1.20"), &policy(30_000), &clock);
        assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
        // Rounds at ~0, 0.1, 0.3, 0.7 read 0; the one at ~1.5 s reads 1.
        assert_eq!(imds.count_of("device-number"), 5);
        assert_eq!(imds.requests().len(), 7 + 4);
    }

    /// A secondary on network card 1 with device-number 0 (the layout of p4d, p5,
    /// trn1): the primary reports a `network-card`, this NIC's appears at `late`.
    fn card_one_device_zero(imds: Scripted<'_>, late: Duration) -> Scripted<'_> {
        let listing = move |t: Duration| {
            let card = if t < late { "" } else { "network-card\n" };
            Ok(Some(format!(
                "device-number\ninterface-id\nlocal-ipv4s\n{card}subnet-ipv4-cidr-block\nmac"
            )))
        };
        secondary(imds)
            .leaf(&format!("{MACS}/{SECONDARY}/"), listing)
            .value(&format!("{MACS}/{SECONDARY}/device-number"), "0")
            .leaf(&format!("{MACS}/{SECONDARY}/network-card"), move |t| {
                Ok((t >= late).then(|| "1".to_owned()))
            })
            .value(&format!("{MACS}/02:00:00:00:00:01/network-card"), "0")
    }

    #[test]
    fn device_number_zero_on_network_card_one_is_trusted_at_once() {
        let clock = FakeClock::new();
        let imds = card_one_device_zero(Scripted::new(&clock), Duration::ZERO);
        let out = EC2_WAIT.wait(&imds, &event("10.0.1.20"), &policy(30_000), &clock);
        let Outcome::Complete(net) = out else {
            panic!("{out:?}")
        };
        assert_eq!(net.nics[0].network_card, Some(1));
        assert_eq!(net.nics[0].device_number, Some(0));
        // The NIC lists its own network-card: the primary is not asked.
        assert_eq!(imds.requests().len(), 7, "{:?}", imds.requests());
        assert_eq!(imds.count_of("/02:00:00:00:00:01/network-card"), 0);
        assert!(clock.sleeps.borrow().is_empty());
    }

    #[test]
    fn a_late_network_card_on_a_multi_card_type_is_waited_for() {
        let clock = FakeClock::new();
        let imds = card_one_device_zero(Scripted::new(&clock), Duration::from_secs(1));
        let out = EC2_WAIT.wait(&imds, &event("10.0.1.20"), &policy(30_000), &clock);
        let Outcome::Complete(net) = out else {
            panic!("{out:?}")
        };
        let nic = net.nic(SECONDARY.parse().unwrap()).unwrap();
        assert_eq!((nic.network_card, nic.device_number), (Some(1), Some(0)));
        // Round 1 asks the primary once; rounds at ~0.1, 0.3, 0.7 s ask only this
        // NIC's network-card (404), the one at ~1.5 s reads 1.
        assert_eq!(imds.count_of("/02:00:00:00:00:01/network-card"), 1);
        assert_eq!(imds.count_of(&format!("{SECONDARY}/network-card")), 4);
        assert_eq!(imds.requests().len(), 7 + 4, "{:?}", imds.requests());
        assert_eq!(clock.sleeps.borrow().len(), 4);
    }

    #[test]
    fn a_network_card_that_never_comes_leaves_the_nic_unrouted() {
        // Card 1, device 2: without the primary's answer this would be planned
        // as card 0 (table 10002, another NIC's); the wait must not say so.
        let clock = FakeClock::new();
        let imds = card_one_device_zero(Scripted::new(&clock), Duration::MAX)
            .value(&format!("{MACS}/{SECONDARY}/device-number"), "2");
        let out = EC2_WAIT.wait(&imds, &event("10.0.1.20"), &policy(3_000), &clock);
        let Outcome::Partial { missing, .. } = out else {
            panic!("{out:?}")
        };
        assert_eq!(missing, [Missing::NetworkCardNotPropagated]);
    }

    #[test]
    fn errors_are_retried_and_never_read_as_empty() {
        // 500 until 0.5 s, then fine.
        let clock = FakeClock::new();
        let imds = secondary(Scripted::new(&clock)).leaf("/latest/meta-data/mac", |t| {
            if t < Duration::from_millis(500) {
                Err(http(500, None))
            } else {
                Ok(Some("02:00:00:00:00:01".into()))
            }
        });
        let out = EC2_WAIT.wait(&imds, &event("10.0.1.20"), &policy(30_000), &clock);
        assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
        assert_eq!(imds.count_of("/mac"), 4);

        // 500 for ever: Failed, with the error, not Partial with nothing in it.
        let clock = FakeClock::new();
        let imds = secondary(Scripted::new(&clock))
            .leaf("/latest/meta-data/mac", |_| Err(http(500, None)));
        let out = EC2_WAIT.wait(&imds, &event("10.0.1.20"), &policy(2_000), &clock);
        assert!(failed_with_http(&out, 500, None), "{out:?}");
    }

    #[test]
    fn errors_that_waiting_cannot_fix_end_the_wait_at_once() {
        let clock = FakeClock::new();
        let disabled = || Error::Imds {
            method: "PUT",
            url: "http://imds/latest/api/token".into(),
            kind: ImdsErrorKind::Disabled,
        };
        let imds = secondary(Scripted::new(&clock))
            .leaf("/latest/meta-data/mac", move |_| Err(disabled()));
        let out = EC2_WAIT.wait(&imds, &event("10.0.1.20"), &policy(30_000), &clock);
        assert!(
            matches!(
                &out,
                Outcome::Failed(Error::Imds {
                    method: "PUT",
                    kind: ImdsErrorKind::Disabled,
                    ..
                })
            ),
            "{out:?}"
        );
        assert_eq!(imds.requests().len(), 1);
        assert!(clock.sleeps.borrow().is_empty());

        // A value that does not parse.
        let clock = FakeClock::new();
        let imds = secondary(Scripted::new(&clock))
            .value(&format!("{MACS}/{SECONDARY}/device-number"), "one");
        let out = EC2_WAIT.wait(&imds, &event("10.0.1.20"), &policy(30_000), &clock);
        let Outcome::Failed(e) = out else {
            panic!("{out:?}")
        };
        assert!(e.to_string().contains("device-number"), "{e}");
    }

    #[test]
    fn retry_after_is_honoured_within_the_budget() {
        let clock = FakeClock::new();
        let imds = secondary(Scripted::new(&clock)).leaf("/latest/meta-data/mac", |t| {
            if t < Duration::from_millis(100) {
                Err(http(503, Some(3)))
            } else {
                Ok(Some("02:00:00:00:00:01".into()))
            }
        });
        let out = EC2_WAIT.wait(&imds, &event("10.0.1.20"), &policy(30_000), &clock);
        assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
        assert_eq!(*clock.sleeps.borrow(), [Duration::from_secs(3)]);

        // A Retry-After beyond the budget ends the wait now, with the error.
        let clock = FakeClock::new();
        let imds = secondary(Scripted::new(&clock))
            .leaf("/latest/meta-data/mac", |_| Err(http(503, Some(60))));
        let out = EC2_WAIT.wait(&imds, &event("10.0.1.20"), &policy(5_000), &clock);
        assert!(failed_with_http(&out, 503, Some(60)), "{out:?}");
        assert!(clock.sleeps.borrow().is_empty());
    }
}

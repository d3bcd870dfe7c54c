// SPDX-License-Identifier: Apache-2.0
//! Performs IO (through the [`Fetch`] it is handed): Azure's consistency wait, the
//! seam's session ([`crate::source::provider::session`]) over one document,
//! `GET /metadata/instance/network`, which answers every NIC. The session is
//! complete when the pure [`nic::assess`] finds the event's MAC listed with the
//! leased address and its subnet. An answer that does not parse ends the wait
//! as `Failed` (never as "no NIC"); a 429 or 5xx is retried with the driver's
//! backoff and the answer's `Retry-After`.

use super::Fetch;
use super::nic::{self, AzureNetwork};
use crate::error::Result;
use crate::source::provider::http;
use crate::source::provider::session::Document;
use crate::source::provider::wait::{Clock, Outcome, WaitPolicy};
use crate::source::provider::{Assessment, NicEvent};

impl Document for AzureNetwork {
    fn path() -> String {
        super::NETWORK_PATH.to_owned()
    }

    fn read(answer: Option<String>, _previous: Option<&Self>) -> Result<Option<Self>> {
        answer.map(|text| nic::parse_network(&text)).transpose()
    }

    fn assess(event: &NicEvent, kept: Option<&Self>) -> Result<Assessment> {
        nic::assess(event, kept)
    }
}

/// Azure's client as the seam's session asks it: only a 200 is an answer (a
/// 404 is an error), so every answer has a body.
struct Answering<'a>(&'a dyn Fetch);

impl http::Fetch for Answering<'_> {
    fn get(&self, path: &str) -> Result<Option<String>> {
        self.0.get(path).map(Some)
    }
}

/// Waits until Azure IMDS agrees with `event`'s lease(s), fetching through
/// `fetch` and sleeping on `clock`, within `policy.budget`.
pub fn wait_for_nic(
    fetch: &dyn Fetch,
    event: &NicEvent,
    policy: &WaitPolicy,
    clock: &dyn Clock,
) -> Outcome {
    AzureNetwork::wait(&Answering(fetch), event, policy, clock)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::error::{Error, ImdsErrorKind};
    use crate::source::provider::fake::{FakeClock, Scripted, bound, http, policy};
    use crate::source::provider::session::rows;

    /// Azure's client answers only a 200: the scripted service's 404 is an error.
    impl Fetch for Scripted<'_> {
        fn get(&self, path: &str) -> Result<String> {
            crate::source::provider::http::Fetch::get(self, path)?.ok_or_else(|| http(404, None))
        }
    }

    const ONE: &str = r#"{"interface":[{"macAddress":"000D3A000001","ipv4":{"ipAddress":[{"privateIpAddress":"10.0.0.4"}],"subnet":[{"address":"10.0.0.0","prefix":"24"}]}}]}"#;
    const TWO: &str = r#"{"interface":[{"macAddress":"000D3A000001","ipv4":{"ipAddress":[{"privateIpAddress":"10.0.0.4"}],"subnet":[{"address":"10.0.0.0","prefix":"24"}]}},{"macAddress":"000D3A000002","ipv4":{"ipAddress":[{"privateIpAddress":"10.0.1.20"}],"subnet":[{"address":"10.0.1.0","prefix":"24"}]}}]}"#;

    fn event() -> NicEvent {
        bound("eth1", "00:0d:3a:00:00:02", "10.0.1.20", 24, "10.0.1.1")
    }

    #[test]
    fn consistent_metadata_takes_one_request() {
        let clock = FakeClock::new();
        let imds = Scripted::every(&clock, |_| Ok(Some(TWO.to_owned())));
        let out = wait_for_nic(&imds, &event(), &policy(30_000), &clock);
        let Outcome::Complete(net) = out else {
            panic!("{out:?}")
        };
        assert_eq!(imds.count(), 1);
        assert_eq!(imds.log.borrow()[0].1, "/metadata/instance/network");
        let nic = net.nic("00:0d:3a:00:00:02".parse().unwrap()).unwrap();
        assert_eq!(nic.device_number, Some(1));
        assert!(clock.sleeps.borrow().is_empty());
    }

    #[test]
    fn a_nic_that_appears_late_is_waited_for_one_request_per_round() {
        let clock = FakeClock::new();
        let imds = Scripted::every(&clock, |t| {
            Ok(Some(
                if t < Duration::from_secs(2) { ONE } else { TWO }.to_owned(),
            ))
        });
        let out = wait_for_nic(&imds, &event(), &policy(30_000), &clock);
        assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
        // Rounds at 0, 0.1, 0.3, 0.7, 1.5 read ONE; the one at ~3.1 s reads TWO.
        assert_eq!(imds.count(), 6);
        // Never more than 5 requests in any second.
        let starts: Vec<Duration> = imds.log.borrow().iter().map(|(t, _)| *t).collect();
        for (i, t) in starts.iter().enumerate() {
            let within = starts[i..]
                .iter()
                .filter(|s| **s < *t + Duration::from_secs(1))
                .count();
            assert!(within <= 5, "{starts:?}");
        }
    }

    /// [`TWO`] with eth1's IPv6 (`ipv6.ipAddress[]`, `ipv6.subnet[]`).
    const TWO_V6: &str = r#"{"interface":[{"macAddress":"000D3A000001","ipv4":{"ipAddress":[{"privateIpAddress":"10.0.0.4"}],"subnet":[{"address":"10.0.0.0","prefix":"24"}]}},{"macAddress":"000D3A000002","ipv4":{"ipAddress":[{"privateIpAddress":"10.0.1.20"}],"subnet":[{"address":"10.0.1.0","prefix":"24"}]},"ipv6":{"ipAddress":[{"privateIpAddress":"fd00:98:1::20"}],"subnet":[{"address":"fd00:98:1::","prefix":"64"}]}}]}"#;

    /// Issue 34: the wait is per family. While IMDS lists eth1 without its
    /// IPv6 (published 2 s late), eth1's DHCPv4 lease completes at once and its
    /// DHCPv6 lease waits; the IPv6 half then completes.
    #[test]
    fn an_ipv6_address_published_late_holds_only_the_ipv6_lease() {
        let late = |t: Duration| {
            Ok(Some(
                if t < Duration::from_secs(2) {
                    TWO
                } else {
                    TWO_V6
                }
                .to_owned(),
            ))
        };
        let clock = FakeClock::new();
        let imds = Scripted::every(&clock, late);
        let out = wait_for_nic(&imds, &event(), &policy(30_000), &clock);
        assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
        assert_eq!(imds.count(), 1);

        let v6 = bound("eth1", "00:0d:3a:00:00:02", "fd00:98:1::20", 128, "fe80::1");
        let clock = FakeClock::new();
        let imds = Scripted::every(&clock, late);
        let out = wait_for_nic(&imds, &v6, &policy(30_000), &clock);
        let Outcome::Complete(net) = out else {
            panic!("{out:?}")
        };
        assert!(imds.count() > 1, "{}", imds.count());
        let nic = net.nic("00:0d:3a:00:00:02".parse().unwrap()).unwrap();
        assert_eq!(
            nic.ipv6s,
            ["fd00:98:1::20".parse::<std::net::Ipv6Addr>().unwrap()]
        );

        // Never published: the DHCPv6 lease ends partial, missing eth1's IPv6.
        let clock = FakeClock::new();
        let imds = Scripted::every(&clock, |_| Ok(Some(TWO.to_owned())));
        let out = wait_for_nic(&imds, &v6, &policy(3_000), &clock);
        assert!(matches!(out, Outcome::Partial { .. }), "{out:?}");
    }

    #[test]
    fn a_429_is_retried_after_its_retry_after_and_never_read_as_empty() {
        let clock = FakeClock::new();
        let imds = Scripted::every(&clock, |t| {
            if t < Duration::from_millis(10) {
                Err(http(429, Some(2)))
            } else {
                Ok(Some(TWO.to_owned()))
            }
        });
        let out = wait_for_nic(&imds, &event(), &policy(30_000), &clock);
        assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
        assert_eq!(*clock.sleeps.borrow(), [Duration::from_secs(2)]);
        assert_eq!(imds.count(), 2);

        // 429 until the budget ends: Failed with the 429, not Partial.
        let clock = FakeClock::new();
        let imds = Scripted::every(&clock, |_| Err(http(429, Some(1))));
        let out = wait_for_nic(&imds, &event(), &policy(4_000), &clock);
        assert!(
            matches!(
                &out,
                Outcome::Failed(Error::Imds {
                    kind: ImdsErrorKind::Http { status: 429, .. },
                    ..
                })
            ),
            "{out:?}"
        );
    }

    #[test]
    fn a_400_or_garbage_ends_the_wait_at_once() {
        let clock = FakeClock::new();
        let imds = Scripted::every(&clock, |_| Err(http(400, None)));
        let out = wait_for_nic(&imds, &event(), &policy(30_000), &clock);
        assert!(matches!(out, Outcome::Failed(_)), "{out:?}");
        assert_eq!(imds.count(), 1);

        let clock = FakeClock::new();
        let imds = Scripted::every(&clock, |_| {
            Ok(Some("<html>gateway error</html>".to_owned()))
        });
        let out = wait_for_nic(&imds, &event(), &policy(30_000), &clock);
        let Outcome::Failed(e) = out else {
            panic!("{out:?}")
        };
        assert!(e.to_string().contains("Azure IMDS network"), "{e}");
        assert_eq!(imds.count(), 1);
    }

    #[test]
    fn a_slow_imds_holds_the_caller_at_most_one_request_past_the_budget() {
        let clock = FakeClock::new();
        let mut imds = Scripted::every(&clock, |_| Err(http(503, None)));
        imds.each = Duration::from_millis(1_900);
        let out = wait_for_nic(&imds, &event(), &policy(3_000), &clock);
        assert!(matches!(out, Outcome::Failed(_)), "{out:?}");
        assert!(
            clock.elapsed.get() <= Duration::from_millis(3_000 + 1_900),
            "{:?}",
            clock.elapsed.get()
        );
        assert!(
            imds.log
                .borrow()
                .iter()
                .all(|(t, _)| *t < Duration::from_secs(3))
        );
    }

    #[test]
    fn the_document_rows() {
        let docs = rows::Documents {
            event: event(),
            path: "/metadata/instance/network",
            without: ONE,
            with: TWO,
            garbage: ("<html>gateway error</html>", "Azure IMDS network"),
        };
        rows::run(&docs, |f, e, p, c| wait_for_nic(f, e, p, c));
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO (through the [`Fetch`] or the drive it is handed): `OpenStack`'s
//! consistency wait.
//!
//! * **The metadata service**: the generic driver
//!   ([`crate::source::provider::wait`]) over a session of one request per round,
//!   `openstack/latest/network_data.json`, which answers every NIC at once (the
//!   fewest requests under Neutron's rate limit; a 429 is retried with the
//!   driver's backoff, within the budget).
//! * **A config drive**: read once. Nova does not rewrite the drive after the
//!   instance is built, so a second read could not say more: the outcome is
//!   `Complete`, or `Partial` at once (the caller applies what the lease alone
//!   proves), never a wait for the budget.
//!
//! What the answer means is the pure [`nic`] module's.

use std::collections::BTreeSet;

use super::nic::{self, Answer, parse_network_data};
use super::{NETWORK_DATA_PATH, OPENSTACK_ROOT};
use crate::error::Result;
use crate::model::{IfName, Missing};
use crate::source::provider::http::Fetch;
use crate::source::provider::{self, Assessment, Clock, NicEvent, NicSession, Outcome, WaitPolicy};

/// The one request of a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Request {
    /// `openstack/latest/network_data.json`.
    NetworkData,
}

impl Request {
    /// The path below the base URL.
    pub fn path(self) -> String {
        match self {
            Self::NetworkData => format!("{OPENSTACK_ROOT}{NETWORK_DATA_PATH}"),
        }
    }
}

/// Logs what the document's model skipped (VLAN and bond links, ...), once.
pub(crate) fn log_skipped(answer: &Answer) {
    if let Answer::Body(body) = answer
        && let Ok(data) = parse_network_data(body)
    {
        for s in &data.skipped {
            log::info!("OpenStack network_data.json: skipped {s}");
        }
    }
}

/// One NIC event's wait against the metadata service: the last answer, and the
/// way to ask again.
struct Session<'a> {
    fetch: &'a dyn Fetch,
    event: &'a NicEvent,
    answer: Answer,
    logged: bool,
}

impl NicSession for Session<'_> {
    type Request = Request;

    fn interface(&self) -> &IfName {
        self.event.interface()
    }

    fn assess(&self) -> Result<Assessment> {
        nic::assess(self.event, &self.answer)
    }

    /// One request per round, whatever is missing: it answers everything.
    fn next_request(&self, _missing: &[Missing], asked: &BTreeSet<Request>) -> Option<Request> {
        (!asked.contains(&Request::NetworkData)).then_some(Request::NetworkData)
    }

    fn ask(&mut self, request: Request) -> Result<()> {
        self.answer = self
            .fetch
            .get(&request.path())?
            .map_or(Answer::NotFound, Answer::Body);
        if !self.logged && matches!(self.answer, Answer::Body(_)) {
            log_skipped(&self.answer);
            self.logged = true;
        }
        Ok(())
    }
}

/// Waits until the metadata service agrees with `event`'s lease, asking through
/// `fetch` and sleeping on `clock`, within `policy.budget`.
pub fn wait_for_nic(
    fetch: &dyn Fetch,
    event: &NicEvent,
    policy: &WaitPolicy,
    clock: &dyn Clock,
) -> Outcome {
    let mut s = Session {
        fetch,
        event,
        answer: Answer::NotAsked,
        logged: false,
    };
    provider::wait::wait(&mut s, policy, clock)
}

/// What one read of a config drive says about `event`: `read` is the drive's
/// `network_data.json` (`None`: not on the drive). An error reading the drive or
/// a document that does not parse is [`Outcome::Failed`].
pub fn from_drive(read: Result<Option<String>>, event: &NicEvent) -> Outcome {
    let answer = match read {
        Ok(Some(body)) => Answer::Body(body),
        Ok(None) => Answer::NotFound,
        Err(e) => {
            log::warn!(
                "{}: config drive: {e}; keeping the last applied state",
                event.interface()
            );
            return Outcome::Failed(e);
        }
    };
    log_skipped(&answer);
    match nic::assess(event, &answer) {
        Ok(a) if a.is_complete() => {
            log::info!(
                "{}: the config drive's network_data.json agrees with the lease",
                event.interface()
            );
            Outcome::Complete(a.network)
        }
        Ok(a) => {
            log::warn!(
                "{}: the config drive's network_data.json does not agree with the lease (a NIC attached after boot is not on the drive)",
                event.interface()
            );
            Outcome::Partial {
                network: a.network,
                missing: a.missing,
            }
        }
        Err(e) => {
            log::warn!(
                "{}: config drive: {e}; keeping the last applied state",
                event.interface()
            );
            Outcome::Failed(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::source::openstack::nic::tests::{ONLY0, TWO};
    use crate::source::provider::fake::{FakeClock, Scripted, bound, http, policy};

    fn event() -> NicEvent {
        bound("eth1", "fa:16:3e:00:01:14", "10.0.1.20", 24, "10.0.1.1")
    }

    #[test]
    fn one_request_when_the_metadata_agrees() {
        let clock = FakeClock::new();
        let f = Scripted::every(&clock, |_| Ok(Some(TWO.to_owned())));
        let out = wait_for_nic(&f, &event(), &policy(30_000), &clock);
        let Outcome::Complete(net) = out else {
            panic!("{out:?}")
        };
        let nic = net.nic("fa:16:3e:00:01:14".parse().unwrap()).unwrap();
        assert_eq!(nic.routes.len(), 2);
        let asked: Vec<String> = f.log.borrow().iter().map(|(_, p)| p.clone()).collect();
        assert_eq!(asked, ["/openstack/latest/network_data.json"]);
        assert!(clock.sleeps.borrow().is_empty());
    }

    #[test]
    fn a_late_link_is_waited_for_one_request_a_round_within_neutrons_rate_limit() {
        // The hot-plugged port appears at 1 s: rounds at ~0, 0.1, 0.3, 0.7 see
        // eth0 only, the one at ~1.5 s sees both.
        let clock = FakeClock::new();
        let f = Scripted::every(&clock, |t| {
            Ok(Some(
                if t < Duration::from_secs(1) {
                    ONLY0
                } else {
                    TWO
                }
                .to_owned(),
            ))
        });
        let out = wait_for_nic(&f, &event(), &policy(30_000), &clock);
        assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
        assert_eq!(f.log.borrow().len(), 5);
        // Never appearing: Partial, and never more than 10 requests in any 10 s
        // (Neutron's default limit) over a whole 30 s budget.
        let clock = FakeClock::new();
        let f = Scripted::every(&clock, |_| Ok(Some(ONLY0.to_owned())));
        let out = wait_for_nic(&f, &event(), &policy(30_000), &clock);
        let Outcome::Partial { missing, .. } = out else {
            panic!("{out:?}")
        };
        assert_eq!(missing, [Missing::MacFolder]);
        let times: Vec<Duration> = f.log.borrow().iter().map(|(t, _)| *t).collect();
        for (i, t) in times.iter().enumerate() {
            let within = times[i..]
                .iter()
                .take_while(|u| **u < *t + Duration::from_secs(10))
                .count();
            assert!(
                within <= 10,
                "{within} requests within 10 s of {t:?}: {times:?}"
            );
        }
    }

    #[test]
    fn errors_are_never_read_as_empty() {
        // 503 or 429 for ever: Failed, not Partial.
        for status in [503, 429] {
            let clock = FakeClock::new();
            let f = Scripted::every(&clock, move |_| Err(http(status, None)));
            let out = wait_for_nic(&f, &event(), &policy(2_000), &clock);
            assert!(matches!(out, Outcome::Failed(_)), "{status}: {out:?}");
        }
        // 403: at once.
        let clock = FakeClock::new();
        let f = Scripted::every(&clock, move |_| Err(http(403, None)));
        let out = wait_for_nic(&f, &event(), &policy(30_000), &clock);
        assert!(matches!(out, Outcome::Failed(_)), "{out:?}");
        assert_eq!(f.log.borrow().len(), 1);
        // Garbage: at once, naming the key.
        let clock = FakeClock::new();
        let f = Scripted::every(&clock, |_| Ok(Some("{\"links\": 1}".to_owned())));
        let out = wait_for_nic(&f, &event(), &policy(30_000), &clock);
        let Outcome::Failed(e) = out else {
            panic!("{out:?}")
        };
        assert!(e.to_string().contains("network_data.json/links"), "{e}");
        // 429 (the rate limit) then fine: retried.
        let clock = FakeClock::new();
        let f = Scripted::every(&clock, move |t| {
            if t < Duration::from_millis(200) {
                Err(http(429, None))
            } else {
                Ok(Some(TWO.to_owned()))
            }
        });
        let out = wait_for_nic(&f, &event(), &policy(30_000), &clock);
        assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
    }

    #[test]
    fn a_drive_is_read_once_and_never_waited_for() {
        assert!(matches!(
            from_drive(Ok(Some(TWO.to_owned())), &event()),
            Outcome::Complete(_)
        ));
        let out = from_drive(Ok(Some(ONLY0.to_owned())), &event());
        let Outcome::Partial { missing, .. } = out else {
            panic!("{out:?}")
        };
        assert_eq!(missing, [Missing::MacFolder]);
        assert!(matches!(
            from_drive(Ok(None), &event()),
            Outcome::Partial { .. }
        ));
        assert!(matches!(
            from_drive(Ok(Some("[".to_owned())), &event()),
            Outcome::Failed(_)
        ));
        assert!(matches!(
            from_drive(Err(http(500, None)), &event()),
            Outcome::Failed(_)
        ));
    }
}

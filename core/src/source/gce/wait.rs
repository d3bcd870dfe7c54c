// SPDX-License-Identifier: Apache-2.0
//! Performs IO (through the [`Fetch`] it is handed): GCE's consistency wait, the
//! generic driver ([`crate::source::provider::wait`]) over a session of one
//! request per round, `instance/network-interfaces/?recursive=true`, which answers
//! every NIC at once; the pure [`nic`] module says what the answer means.

use std::collections::BTreeSet;

use super::GCE_ROOT;
use super::nic::{self, Answer, INTERFACES_PATH};
use crate::error::Result;
use crate::model::{IfName, Missing};
use crate::source::provider::http::Fetch;
use crate::source::provider::{self, Assessment, Clock, NicEvent, NicSession, Outcome, WaitPolicy};

/// The one request of a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Request {
    /// `instance/network-interfaces/?recursive=true`.
    Interfaces,
}

impl Request {
    /// The path below the base URL.
    pub fn path(self) -> String {
        match self {
            Self::Interfaces => format!("{GCE_ROOT}{INTERFACES_PATH}"),
        }
    }
}

/// One NIC event's wait on GCE: the last answer, and the way to ask again.
struct Session<'a> {
    fetch: &'a dyn Fetch,
    event: &'a NicEvent,
    answer: Answer,
}

impl<'a> Session<'a> {
    /// A session asking through `fetch` about `event`.
    fn new(fetch: &'a dyn Fetch, event: &'a NicEvent) -> Self {
        Self {
            fetch,
            event,
            answer: Answer::NotAsked,
        }
    }
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
        (!asked.contains(&Request::Interfaces)).then_some(Request::Interfaces)
    }

    fn ask(&mut self, request: Request) -> Result<()> {
        self.answer = self
            .fetch
            .get(&request.path())?
            .map_or(Answer::NotFound, Answer::Body);
        Ok(())
    }
}

/// Waits until the metadata server agrees with `event`'s lease, asking through
/// `fetch` and sleeping on `clock`, within `policy.budget`.
pub fn wait_for_nic(
    fetch: &dyn Fetch,
    event: &NicEvent,
    policy: &WaitPolicy,
    clock: &dyn Clock,
) -> Outcome {
    provider::wait::wait(&mut Session::new(fetch, event), policy, clock)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::error::{Error, ImdsErrorKind};
    use crate::source::provider::fake::{FakeClock, Scripted, bound, policy};

    const ONLY0: &str = r#"[{"mac":"42:01:0a:00:00:0a","ip":"10.0.0.10","gateway":"10.0.0.1","subnetmask":"255.255.255.0"}]"#;
    const TWO: &str = r#"[{"mac":"42:01:0a:00:00:0a","ip":"10.0.0.10","gateway":"10.0.0.1","subnetmask":"255.255.255.0"},
        {"mac":"42:01:0a:00:01:14","ip":"10.0.1.20","gateway":"10.0.1.1","subnetmask":"255.255.255.0","ipAliases":["10.0.1.64/30"]}]"#;

    fn event() -> NicEvent {
        bound("eth1", "42:01:0a:00:01:14", "10.0.1.20", 32, "10.0.1.1")
    }

    #[test]
    fn one_request_when_the_metadata_agrees() {
        let clock = FakeClock::new();
        let f = Scripted::every(&clock, |_| Ok(Some(TWO.to_owned())));
        let out = wait_for_nic(&f, &event(), &policy(30_000), &clock);
        let Outcome::Complete(net) = out else {
            panic!("{out:?}")
        };
        let nic = net.nic("42:01:0a:00:01:14".parse().unwrap()).unwrap();
        assert_eq!(nic.device_number, Some(1));
        assert_eq!(nic.ipv4_prefixes.len(), 1);
        assert_eq!(
            f.requests(),
            ["/computeMetadata/v1/instance/network-interfaces/?recursive=true"]
        );
        assert!(clock.sleeps.borrow().is_empty());
    }

    #[test]
    fn a_late_entry_is_waited_for_one_request_a_round() {
        // The hot-plugged NIC's entry appears at 1 s: rounds at ~0, 0.1, 0.3, 0.7
        // see nic0 only, the one at ~1.5 s sees both.
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
        assert_eq!(f.count(), 5);
        // Never appearing: Partial with the entry missing, within the budget.
        let clock = FakeClock::new();
        let f = Scripted::every(&clock, |_| Ok(Some(ONLY0.to_owned())));
        let out = wait_for_nic(&f, &event(), &policy(3_000), &clock);
        let Outcome::Partial { missing, .. } = out else {
            panic!("{out:?}")
        };
        assert_eq!(missing, [Missing::MacFolder]);
        assert!(clock.elapsed.get() < Duration::from_secs(3));
    }

    #[test]
    fn errors_are_never_read_as_empty() {
        let http = |status| Error::Imds {
            method: "GET",
            url: "http://gce/x".into(),
            kind: ImdsErrorKind::Http {
                status,
                retry_after: None,
            },
        };
        // 503 for ever: Failed, not Partial.
        let clock = FakeClock::new();
        let f = Scripted::every(&clock, move |_| Err(http(503)));
        let out = wait_for_nic(&f, &event(), &policy(2_000), &clock);
        assert!(matches!(out, Outcome::Failed(_)), "{out:?}");
        // 403 (the header refused): at once.
        let clock = FakeClock::new();
        let f = Scripted::every(&clock, move |_| Err(http(403)));
        let out = wait_for_nic(&f, &event(), &policy(30_000), &clock);
        assert!(matches!(out, Outcome::Failed(_)), "{out:?}");
        assert_eq!(f.count(), 1);
        // Garbage: at once, naming the key.
        let clock = FakeClock::new();
        let f = Scripted::every(&clock, |_| Ok(Some("[{\"mac\": 1}]".to_owned())));
        let out = wait_for_nic(&f, &event(), &policy(30_000), &clock);
        let Outcome::Failed(e) = out else {
            panic!("{out:?}")
        };
        assert!(e.to_string().contains("network-interfaces/0/mac"), "{e}");
        // 429 then fine: retried.
        let clock = FakeClock::new();
        let f = Scripted::every(&clock, move |t| {
            if t < Duration::from_millis(200) {
                Err(http(429))
            } else {
                Ok(Some(TWO.to_owned()))
            }
        });
        let out = wait_for_nic(&f, &event(), &policy(30_000), &clock);
        assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
    }

    #[test]
    fn a_slow_server_holds_the_caller_one_request_past_the_budget_at_most() {
        let clock = FakeClock::new();
        let mut f = Scripted::every(&clock, |_| Ok(Some(ONLY0.to_owned())));
        f.each = Duration::from_millis(900);
        let out = wait_for_nic(&f, &event(), &policy(1_000), &clock);
        assert!(matches!(out, Outcome::Partial { .. }), "{out:?}");
        assert!(
            clock.elapsed.get() <= Duration::from_millis(1_000 + 900),
            "{:?}",
            clock.elapsed.get()
        );
    }
}

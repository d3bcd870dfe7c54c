// SPDX-License-Identifier: Apache-2.0
//! Performs IO (through the fetch or the drive it is handed): `OpenStack`'s
//! consistency wait.
//!
//! * **The metadata service**: the seam's session
//!   ([`crate::source::provider::session`]) over one document, one request per
//!   round, `openstack/latest/network_data.json`, which answers every NIC at once (the
//!   fewest requests under Neutron's rate limit; a 429 is retried with the
//!   driver's backoff, within the budget).
//! * **A config drive**: read once. Nova does not rewrite the drive after the
//!   instance is built, so a second read could not say more: the outcome is
//!   `Complete`, or `Partial` at once (the caller applies what the lease alone
//!   proves), never a wait for the budget.
//!
//! What the answer means is the pure [`nic`] module's.

use super::nic::{self, Answer, parse_network_data};
use super::{NETWORK_DATA_PATH, OPENSTACK_ROOT};
use crate::error::Result;
use crate::source::provider::session::Document;
use crate::source::provider::{Assessment, NicEvent, Outcome};

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

/// The metadata service's last answer, and whether what its model skipped was
/// logged (once per wait, at the first body): the [`Document`] of its wait.
#[derive(Debug)]
pub struct ServiceAnswer {
    answer: Answer,
    logged: bool,
}

impl Document for ServiceAnswer {
    fn path() -> String {
        format!("{OPENSTACK_ROOT}{NETWORK_DATA_PATH}")
    }

    /// The body as it came: [`nic::assess`] parses it.
    fn read(answer: Option<String>, previous: Option<&Self>) -> Result<Option<Self>> {
        let answer = answer.map_or(Answer::NotFound, Answer::Body);
        let mut logged = previous.is_some_and(|p| p.logged);
        if !logged && matches!(answer, Answer::Body(_)) {
            log_skipped(&answer);
            logged = true;
        }
        Ok(Some(Self { answer, logged }))
    }

    fn assess(event: &NicEvent, kept: Option<&Self>) -> Result<Assessment> {
        nic::assess(event, kept.map_or(&Answer::NotAsked, |r| &r.answer))
    }
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
    use crate::model::Missing;
    use crate::source::openstack::nic::tests::{ONLY0, TWO};
    use crate::source::provider::fake::{FakeClock, Scripted, bound, http, policy};
    use crate::source::provider::session::rows;

    fn event() -> NicEvent {
        bound("eth1", "fa:16:3e:00:01:14", "10.0.1.20", 24, "10.0.1.1")
    }

    #[test]
    fn one_request_when_the_metadata_agrees() {
        let clock = FakeClock::new();
        let f = Scripted::every(&clock, |_| Ok(Some(TWO.to_owned())));
        let out = ServiceAnswer::wait(&f, &event(), &policy(30_000), &clock);
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
    fn the_document_rows() {
        let docs = rows::Documents {
            event: event(),
            path: "/openstack/latest/network_data.json",
            without: ONLY0,
            with: TWO,
            garbage: ("{\"links\": 1}", "network_data.json/links"),
        };
        rows::run(&docs, |f, e, p, c| ServiceAnswer::wait(f, e, p, c));
    }

    #[test]
    fn a_link_that_never_comes_is_asked_within_neutrons_rate_limit() {
        // Never appearing: Partial, and never more than 10 requests in any 10 s
        // (Neutron's default limit) over a whole 30 s budget.
        let clock = FakeClock::new();
        let f = Scripted::every(&clock, |_| Ok(Some(ONLY0.to_owned())));
        let out = ServiceAnswer::wait(&f, &event(), &policy(30_000), &clock);
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

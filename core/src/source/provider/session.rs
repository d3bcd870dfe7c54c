// SPDX-License-Identifier: Apache-2.0
//! Performs IO (through the [`Fetch`] it is handed): one NIC event's session of
//! the consistency wait, written once for every cloud. A cloud says only what
//! its answers are ([`Answers`]: what to ask next, what an answer keeps, what the
//! answers so far mean); the session asks through the fetch, names the
//! interface in the log, and [`wait_for_nic`] hands it to the driver
//! ([`super::wait::wait`]), which backs off, honours `Retry-After` and keeps the
//! budget. The clouds whose one document answers every NIC at once (GCE, Azure,
//! OCI, `OpenStack`) say even less: what the document is ([`Document`]), whose
//! [`Document::wait`] is their wait.

use std::collections::BTreeSet;
use std::fmt;

use super::http::Fetch;
use super::wait::{self, Clock, Outcome, WaitPolicy};
use super::{Assessment, NicEvent, NicSession};
use crate::error::Result;
use crate::model::{IfName, MacAddr, Missing};

/// What one cloud keeps of its answers during a NIC event's wait, and what it
/// makes of them (the cloud's pure `nic` module decides).
pub trait Answers {
    /// One request; a round never asks the same one twice.
    type Request: Copy + Ord + fmt::Debug;

    /// The path `request` asks for `event`, below the client's base URL.
    fn path(&self, event: &NicEvent, request: Self::Request) -> String;

    /// Keeps the answer to `request` (`None`: a 404). An answer that does not
    /// parse is an error naming it, and ends the wait.
    fn record(&mut self, request: Self::Request, answer: Option<String>) -> Result<()>;

    /// What the answers so far say about `event`, and what is still missing for
    /// its leases.
    fn assess(&self, event: &NicEvent) -> Result<Assessment>;

    /// The next request of a round that started from `missing` (empty before
    /// the first assessment) and has asked `asked` already; `None` ends the
    /// round.
    fn next_request(
        &self,
        event: &NicEvent,
        missing: &[Missing],
        asked: &BTreeSet<Self::Request>,
    ) -> Option<Self::Request>;
}

/// One NIC event's wait: the event, what was answered so far, and the way to
/// ask more.
struct Session<'a, A> {
    fetch: &'a dyn Fetch,
    event: &'a NicEvent,
    answers: A,
}

impl<A: Answers> NicSession for Session<'_, A> {
    type Request = A::Request;

    fn interface(&self) -> &IfName {
        self.event.interface()
    }

    fn assess(&self) -> Result<Assessment> {
        self.answers.assess(self.event)
    }

    fn next_request(
        &self,
        missing: &[Missing],
        asked: &BTreeSet<A::Request>,
    ) -> Option<A::Request> {
        self.answers.next_request(self.event, missing, asked)
    }

    fn ask(&mut self, request: A::Request) -> Result<()> {
        let answer = self.fetch.get(&self.answers.path(self.event, request))?;
        self.answers.record(request, answer)
    }
}

/// Waits until the metadata agrees with `event`'s lease(s), starting from
/// `answers` (what is known without asking), asking through `fetch` and
/// sleeping on `clock`, within `policy.budget`.
pub fn wait_for_nic<A: Answers>(
    fetch: &dyn Fetch,
    event: &NicEvent,
    answers: A,
    policy: &WaitPolicy,
    clock: &dyn Clock,
) -> Outcome {
    let mut session = Session {
        fetch,
        event,
        answers,
    };
    wait::wait(&mut session, policy, clock)
}

/// A cloud's metadata document that answers every NIC at once: a round asks
/// it once, whatever is missing, and its last answer is what the wait knows.
pub trait Document: Sized {
    /// The document's path below the client's base URL.
    fn path() -> String;

    /// What an answer keeps (`answer` `None`: a 404), given what the previous
    /// one kept. An answer that does not parse is an error naming it.
    fn read(answer: Option<String>, previous: Option<&Self>) -> Result<Option<Self>>;

    /// What the kept answer says about `event` (`None`: nothing kept yet).
    fn assess(event: &NicEvent, kept: Option<&Self>) -> Result<Assessment>;

    /// [`wait_for_nic`] over this document: one request per round, nothing
    /// known before the first.
    fn wait(
        fetch: &dyn Fetch,
        event: &NicEvent,
        policy: &WaitPolicy,
        clock: &dyn Clock,
    ) -> Outcome {
        wait_for_nic(fetch, event, Latest::<Self>(None), policy, clock)
    }
}

/// The one request of a [`Document`] cloud's round: the whole document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct WholeDocument;

/// What a [`Document`] cloud's wait knows: its last answer.
struct Latest<D>(Option<D>);

impl<D: Document> Answers for Latest<D> {
    type Request = WholeDocument;

    fn path(&self, _event: &NicEvent, _request: WholeDocument) -> String {
        D::path()
    }

    fn record(&mut self, _request: WholeDocument, answer: Option<String>) -> Result<()> {
        self.0 = D::read(answer, self.0.as_ref())?;
        Ok(())
    }

    fn assess(&self, event: &NicEvent) -> Result<Assessment> {
        D::assess(event, self.0.as_ref())
    }

    /// One request per round, whatever is missing: it answers everything.
    fn next_request(
        &self,
        _event: &NicEvent,
        _missing: &[Missing],
        asked: &BTreeSet<WholeDocument>,
    ) -> Option<WholeDocument> {
        (!asked.contains(&WholeDocument)).then_some(WholeDocument)
    }
}

/// A cloud that reads a NIC key by key from a tree of EC2's shape (EC2,
/// Alibaba): its pure module's answers, and the request of the top-level `mac`,
/// which a recorded state may answer without asking.
#[derive(Debug)]
pub struct Keyed<F, R> {
    /// The request of the primary NIC's MAC (`meta-data/mac`).
    pub primary_mac: R,
    /// The path of a request about the NIC with this MAC.
    pub path: fn(R, MacAddr) -> String,
    /// Keeps an answer (`None`: a 404).
    pub record: fn(&mut F, R, Option<String>),
    /// What the answers so far say about the event ([`Answers::assess`]).
    pub assess: fn(&NicEvent, &F) -> Result<Assessment>,
    /// The next request of a round ([`Answers::next_request`]).
    pub next_request: fn(&NicEvent, &F, &[Missing], &BTreeSet<R>) -> Option<R>,
}

impl<F: Default, R: Copy + Ord + fmt::Debug> Keyed<F, R> {
    /// [`wait_for_nic`] from nothing fetched, but the primary's MAC when the
    /// event knows it (a recorded state says which NIC is the primary:
    /// `meta-data/mac` is not asked).
    pub fn wait(
        &self,
        fetch: &dyn Fetch,
        event: &NicEvent,
        policy: &WaitPolicy,
        clock: &dyn Clock,
    ) -> Outcome {
        let mut fetched = F::default();
        if let Some(primary) = event.known_primary_mac() {
            (self.record)(&mut fetched, self.primary_mac, Some(primary.to_string()));
        }
        let answers = KeyedAnswers {
            cloud: self,
            fetched,
        };
        wait_for_nic(fetch, event, answers, policy, clock)
    }
}

/// What a [`Keyed`] cloud's wait fetched so far.
struct KeyedAnswers<'a, F, R> {
    cloud: &'a Keyed<F, R>,
    fetched: F,
}

impl<F, R: Copy + Ord + fmt::Debug> Answers for KeyedAnswers<'_, F, R> {
    type Request = R;

    fn path(&self, event: &NicEvent, request: R) -> String {
        (self.cloud.path)(request, event.mac())
    }

    fn record(&mut self, request: R, answer: Option<String>) -> Result<()> {
        (self.cloud.record)(&mut self.fetched, request, answer);
        Ok(())
    }

    fn assess(&self, event: &NicEvent) -> Result<Assessment> {
        (self.cloud.assess)(event, &self.fetched)
    }

    fn next_request(
        &self,
        event: &NicEvent,
        missing: &[Missing],
        asked: &BTreeSet<R>,
    ) -> Option<R> {
        (self.cloud.next_request)(event, &self.fetched, missing, asked)
    }
}

/// The rows every [`Document`] cloud's wait passes, whatever the document:
/// one request a round, a late NIC waited for, one that never comes partial,
/// and an error never read as "no NIC".
#[cfg(test)]
pub(crate) mod rows {
    use std::time::Duration;

    use super::super::fake::{FakeClock, Scripted, http, policy};
    use super::{NicEvent, Outcome, WaitPolicy};
    use crate::model::Missing;

    /// One cloud's documents for the rows.
    pub(crate) struct Documents {
        /// The NIC the event is about.
        pub event: NicEvent,
        /// The path every round asks.
        pub path: &'static str,
        /// The document without the event's NIC, and with it.
        pub without: &'static str,
        /// The document with it.
        pub with: &'static str,
        /// A body that does not parse, and what its error names.
        pub garbage: (&'static str, &'static str),
    }

    /// Runs the rows through `wait` (the cloud's wait over a scripted service).
    pub(crate) fn run(
        docs: &Documents,
        wait: impl Fn(&Scripted<'_>, &NicEvent, &WaitPolicy, &FakeClock) -> Outcome,
    ) {
        let (without, with) = (docs.without, docs.with);
        let go = |budget_ms: u64, f: &dyn Fn(&FakeClock) -> Scripted<'_>| {
            let clock = FakeClock::new();
            let s = f(&clock);
            let out = wait(&s, &docs.event, &policy(budget_ms), &clock);
            let asked: Vec<String> = s.log.borrow().iter().map(|(_, p)| p.clone()).collect();
            assert!(asked.iter().all(|p| p == docs.path), "{asked:?}");
            (out, asked.len(), clock.elapsed.get())
        };
        // Agreeing at once: one request, no pause.
        let (out, asked, took) = go(30_000, &|c| {
            Scripted::every(c, move |_| Ok(Some(with.to_owned())))
        });
        assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
        assert_eq!((asked, took), (1, Duration::from_millis(1)));
        // The NIC appears at 1 s: rounds at ~0, 0.1, 0.3, 0.7 do not see it, the
        // one at ~1.5 s does.
        let late = move |t: Duration| {
            Ok(Some(
                if t < Duration::from_secs(1) {
                    without
                } else {
                    with
                }
                .to_owned(),
            ))
        };
        let (out, asked, _) = go(30_000, &|c| Scripted::every(c, late));
        assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
        assert_eq!(asked, 5);
        // Never: partial, within the budget.
        let (out, _, took) = go(3_000, &|c| {
            Scripted::every(c, move |_| Ok(Some(without.to_owned())))
        });
        let Outcome::Partial { missing, .. } = out else {
            panic!("{out:?}")
        };
        assert_eq!(missing, [Missing::MacFolder]);
        assert!(took <= Duration::from_secs(3), "{took:?}");
        // A slow service holds the caller one request past the budget at most.
        let (out, _, took) = go(1_000, &|c| {
            let mut s = Scripted::every(c, move |_| Ok(Some(without.to_owned())));
            s.each = Duration::from_millis(900);
            s
        });
        assert!(matches!(out, Outcome::Partial { .. }), "{out:?}");
        assert!(took <= Duration::from_millis(1_000 + 900), "{took:?}");
        // 503 or 429 for ever: failed, never partial.
        for status in [503, 429] {
            let (out, _, _) = go(2_000, &|c| {
                Scripted::every(c, move |_| Err(http(status, None)))
            });
            assert!(matches!(out, Outcome::Failed(_)), "{status}: {out:?}");
        }
        // 429 then fine: retried.
        let (out, asked, _) = go(30_000, &|c| {
            Scripted::every(c, move |t| {
                if t < Duration::from_millis(200) {
                    Err(http(429, None))
                } else {
                    Ok(Some(with.to_owned()))
                }
            })
        });
        assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
        assert!(asked > 1, "{asked}");
        // 403 (refused) and garbage: at once.
        let (out, asked, _) = go(30_000, &|c| {
            Scripted::every(c, move |_| Err(http(403, None)))
        });
        assert!(matches!(out, Outcome::Failed(_)), "{out:?}");
        assert_eq!(asked, 1);
        let (body, names) = docs.garbage;
        let (out, asked, _) = go(30_000, &|c| {
            Scripted::every(c, move |_| Ok(Some(body.to_owned())))
        });
        let Outcome::Failed(e) = out else {
            panic!("{out:?}")
        };
        assert!(e.to_string().contains(names), "{e}");
        assert_eq!(asked, 1);
    }
}

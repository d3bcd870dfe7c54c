// SPDX-License-Identifier: Apache-2.0
//! Performs IO (through what it is handed): the consistency wait's driver loop
//! (SPEC §3.5), written once for every provider. It asks through the
//! [`NicSession`] it is handed and sleeps on the [`Clock`] it is handed; every
//! decision (what to ask, whether the metadata agrees with the lease) is the
//! session's (for EC2 the pure [`crate::source::ec2::nic`] module).
//!
//! A round asks for what is still needed ([`NicSession::next_request`]), then
//! [`NicSession::assess`]es the answers (the first round asks what was never
//! answered: nothing is assessed before anything is fetched). An assessment
//! plans nothing: it lists what the plan would lack
//! ([`super::complete::missing`]), and the caller plans once, after the wait. Between rounds the loop sleeps with jittered
//! exponential backoff: 100 ms doubling up to 2 s (backon's exponential backoff,
//! whose jitter adds up to the same again, clamped to 2 s), or longer when a 503
//! named a `Retry-After`. It stops when IMDS agrees with the lease, when an error
//! cannot go away by waiting, or when the budget (30 s by default) is spent, also
//! in the middle of a round. No request starts once the budget is spent (nor does
//! a pause that would end after it), and a request under way when it runs out
//! finishes: the wait overruns the budget by at most one request, which
//! the provider bounds (EC2: [`crate::source::ec2::Ec2`], one request timeout, 2 s) in total, the token dance
//! (401, a new token's `PUT`, the `GET` again) and the endpoint fallback included.
//!
//! **An IMDS error is never read as "empty".** The result is [`Outcome::Complete`],
//! [`Outcome::Partial`] (IMDS answered, but did not say everything before the budget
//! ran out) or [`Outcome::Failed`] (IMDS did not answer usefully). On `Failed`
//! callers keep the state they applied last and change nothing.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use backon::{BackoffBuilder, ExponentialBuilder};

use super::{Assessment, NicSession};
use crate::constants::{IMDS_BACKOFF_MAX, IMDS_BACKOFF_MIN, IMDS_BUDGET};
use crate::error::{Error, ImdsErrorKind};
use crate::model::{InstanceNetwork, Missing};

/// The time source and sleeper of the wait; tests hand in a fake that advances
/// time when asked to sleep.
pub trait Clock {
    /// The current instant.
    fn now(&self) -> Instant;
    /// Sleeps for `pause`.
    fn sleep(&self, pause: Duration);
}

/// The real clock: [`Instant::now`] and [`std::thread::sleep`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep(&self, pause: Duration) {
        std::thread::sleep(pause);
    }
}

/// How long and how often the wait asks again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitPolicy {
    /// The total time the wait may take (config `imds.budget_s`, default 30 s).
    pub budget: Duration,
    /// The first pause between rounds (100 ms).
    pub min_delay: Duration,
    /// The longest pause between rounds (2 s), `Retry-After` aside.
    pub max_delay: Duration,
    /// Whether pauses are jittered (default on).
    pub jitter: bool,
    /// The jitter's random seed, for reproducible tests; `None` seeds randomly.
    pub jitter_seed: Option<u64>,
    /// An agreement at the first round is logged at debug, not info (`leasehook
    /// refresh`: an unchanged NIC logs nothing at the default level). Off by
    /// default: a lease event says it at info.
    pub quiet: bool,
}

impl Default for WaitPolicy {
    fn default() -> Self {
        Self {
            budget: IMDS_BUDGET,
            min_delay: IMDS_BACKOFF_MIN,
            max_delay: IMDS_BACKOFF_MAX,
            jitter: true,
            jitter_seed: None,
            quiet: false,
        }
    }
}

impl WaitPolicy {
    /// The default policy with another budget.
    #[must_use]
    pub fn with_budget(mut self, budget: Duration) -> Self {
        self.budget = budget;
        self
    }

    pub(crate) fn backoff(&self) -> impl Iterator<Item = Duration> + use<> {
        let mut b = ExponentialBuilder::default()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_factor(2.0)
            .without_max_times();
        if self.jitter {
            b = b.with_jitter();
            if let Some(seed) = self.jitter_seed {
                b = b.with_jitter_seed(seed);
            }
        }
        let cap = self.max_delay;
        b.build().map(move |d| d.min(cap))
    }
}

/// The result of the wait. On [`Outcome::Failed`] callers keep the last applied
/// state: an error says nothing about what IMDS holds.
#[derive(Debug)]
#[must_use]
pub enum Outcome {
    /// IMDS agrees with the lease: the primary MAC and this NIC's metadata.
    Complete(InstanceNetwork),
    /// IMDS answered, but the budget ran out before it said everything; `network`
    /// holds what it did say. Callers apply what the lease alone proves.
    Partial {
        /// What was fetched.
        network: InstanceNetwork,
        /// What IMDS still did not say.
        missing: Vec<Missing>,
    },
    /// IMDS did not answer usefully (disabled, unreachable, errors until the budget
    /// ran out, garbage). Callers change nothing.
    Failed(Error),
}

/// Waits until the metadata `session` reads agrees with its lease(s), asking
/// through it and sleeping on `clock`, within `policy.budget`.
pub fn wait<S: NicSession + ?Sized>(
    session: &mut S,
    policy: &WaitPolicy,
    clock: &dyn Clock,
) -> Outcome {
    let start = clock.now();
    let mut backoff = policy.backoff();
    // The last assessment; none before the first round's answers: nothing is
    // assessed before anything is fetched (the first round asks what was never
    // answered, which no assessment changes).
    let mut last: Option<Assessment> = None;
    let mut rounds = 0u32;
    let mut requests = 0u32;
    // The error the previous round ended with: a round the budget cuts short
    // before it errs says nothing new, and errors until the budget ends are a
    // failure, never `Partial`.
    let mut previous_error: Option<Error> = None;
    loop {
        rounds += 1;
        let missing = last.as_ref().map_or(&[][..], |a| &a.missing[..]);
        let (mut error, round) = ask_round(session, missing, rounds, start, policy, clock);
        requests += round.asked;
        let cut = round.cut;
        if cut && error.is_none() {
            error = previous_error.take();
        }
        let retry_after = match error {
            Some(e) if !is_retryable(&e) => {
                log::warn!(
                    "{}: {e}; keeping the last applied state",
                    session.interface()
                );
                return Outcome::Failed(e);
            }
            Some(e) => {
                log::debug!("{}: round {rounds}: {e}", session.interface());
                let after = retry_after(&e);
                error = Some(e);
                after
            }
            None => {
                match session.assess() {
                    Ok(a) if a.is_complete() => {
                        let level = if policy.quiet && rounds == 1 {
                            log::Level::Debug
                        } else {
                            log::Level::Info
                        };
                        log::log!(
                            level,
                            "{}: IMDS agrees with the lease after {rounds} round(s), {requests} request(s), {} ms",
                            session.interface(),
                            clock.now().saturating_duration_since(start).as_millis()
                        );
                        return Outcome::Complete(a.network);
                    }
                    Ok(a) => {
                        log::debug!(
                            "{}: round {rounds}: IMDS does not say yet: {}",
                            session.interface(),
                            describe(&a.missing)
                        );
                        last = Some(a);
                    }
                    Err(e) => {
                        log::warn!(
                            "{}: {e}; keeping the last applied state",
                            session.interface()
                        );
                        return Outcome::Failed(e);
                    }
                }
                None
            }
        };
        let elapsed = clock.now().saturating_duration_since(start);
        let remaining = policy.budget.saturating_sub(elapsed);
        let pause = backoff
            .next()
            .unwrap_or(policy.max_delay)
            .max(retry_after.unwrap_or_default());
        // A pause that reaches the end of the budget would be followed by no
        // request at all: give up now rather than hold the caller for nothing.
        if pause >= remaining {
            return give_up(session, error, last, elapsed, (rounds, requests));
        }
        clock.sleep(pause);
        previous_error = error;
    }
}

/// How a round's requests ended.
struct Round {
    /// How many requests it made.
    asked: u32,
    /// Whether the budget ran out before the round was done.
    cut: bool,
}

/// One round: asks what `missing` (the assessment the round starts from) still
/// needs, each request once, until the round is done, a request fails (its error
/// returned), or the budget is spent. Only the wait's very first request is
/// always made (a zero budget still asks once).
fn ask_round<S: NicSession + ?Sized>(
    session: &mut S,
    missing: &[Missing],
    round: u32,
    start: Instant,
    policy: &WaitPolicy,
    clock: &dyn Clock,
) -> (Option<Error>, Round) {
    let mut asked = BTreeSet::new();
    let mut count = 0u32;
    while let Some(request) = session.next_request(missing, &asked) {
        // A slow IMDS (each answer in time, but many of them) must not hold the
        // caller past the budget: once it is spent, no request starts, and the
        // one under way was the last.
        let first = round == 1 && asked.is_empty();
        if !first && clock.now().saturating_duration_since(start) >= policy.budget {
            log::debug!(
                "{}: round {round}: budget spent after {} request(s) of the round",
                session.interface(),
                asked.len()
            );
            return (
                None,
                Round {
                    asked: count,
                    cut: true,
                },
            );
        }
        asked.insert(request);
        count += 1;
        if let Err(e) = session.ask(request) {
            return (
                Some(e),
                Round {
                    asked: count,
                    cut: false,
                },
            );
        }
    }
    (
        None,
        Round {
            asked: count,
            cut: false,
        },
    )
}

/// The missing items as one line.
fn describe(missing: &[Missing]) -> String {
    missing.iter().fold(String::new(), |mut s, m| {
        let sep = if s.is_empty() { "" } else { "; " };
        let _ = write!(s, "{sep}{m}");
        s
    })
}

/// The outcome when the budget leaves no room for another round: the last
/// round's error, else what the last assessment says is missing.
fn give_up<S: NicSession + ?Sized>(
    session: &S,
    error: Option<Error>,
    last: Option<Assessment>,
    elapsed: Duration,
    (rounds, requests): (u32, u32),
) -> Outcome {
    let interface = session.interface();
    if let Some(e) = error {
        log::warn!(
            "{}: IMDS still failing after {} ms ({rounds} rounds, {requests} requests): {e}; keeping the last applied state",
            interface,
            elapsed.as_millis()
        );
        return Outcome::Failed(e);
    }
    // A round that ends without an error is assessed, so `last` is there; were
    // it not, what was fetched is assessed now.
    let last = match last.map_or_else(|| session.assess(), Ok) {
        Ok(a) => a,
        Err(e) => {
            log::warn!("{interface}: {e}; keeping the last applied state");
            return Outcome::Failed(e);
        }
    };
    log::warn!(
        "{}: gave up waiting for IMDS after {} ms ({rounds} rounds, {requests} requests); missing: {}",
        interface,
        elapsed.as_millis(),
        describe(&last.missing)
    );
    Outcome::Partial {
        network: last.network,
        missing: last.missing,
    }
}

pub(crate) fn is_retryable(e: &Error) -> bool {
    matches!(e, Error::Imds { kind, .. } if kind.is_retryable())
}

pub(crate) fn retry_after(e: &Error) -> Option<Duration> {
    match e {
        Error::Imds {
            kind: ImdsErrorKind::Http { retry_after, .. },
            ..
        } => *retry_after,
        _ => None,
    }
}

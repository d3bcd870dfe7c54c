// SPDX-License-Identifier: Apache-2.0
//! Performs IO (through the [`Fetch`] and the [`Clock`] it is handed): the one
//! retry of the datasources' fetches (EC2, Alibaba, GCE, `OpenStack`, Azure). A
//! request that fails in a way waiting can fix (a timeout, 429, 5xx:
//! `is_retryable`) is sent again with the consistency wait's backoff, at least
//! its `Retry-After` later, within one budget for the whole fetch; a `Retry-After`
//! past the budget ends it at once. Any other failure ends it too.

use std::cell::Cell;
use std::time::Instant;

use super::http::Fetch;
use super::wait::{Clock, WaitPolicy, is_retryable, retry_after};
use crate::error::Result;

/// One fetch's budget, started when it is made, and its request count.
pub struct Retrying<'a> {
    policy: &'a WaitPolicy,
    clock: &'a dyn Clock,
    /// How the debug log names the service.
    label: &'static str,
    start: Instant,
    requests: Cell<u32>,
}

impl std::fmt::Debug for Retrying<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Retrying")
            .field("policy", self.policy)
            .field("label", &self.label)
            .field("requests", &self.requests.get())
            .finish_non_exhaustive()
    }
}

impl<'a> Retrying<'a> {
    /// Starts the budget now; `label` names the service in the log.
    pub fn new(policy: &'a WaitPolicy, clock: &'a dyn Clock, label: &'static str) -> Self {
        Self {
            policy,
            clock,
            label,
            start: clock.now(),
            requests: Cell::new(0),
        }
    }

    /// Logs (debug) what fetching `name`'s instance data took: the requests
    /// sent, and the time since the start.
    pub fn log_fetched(&self, name: &str) {
        let took = self.clock.now().saturating_duration_since(self.start);
        log::debug!(
            "{name}: instance data in {} request(s), {} ms",
            self.requests.get(),
            took.as_millis()
        );
    }

    /// `op` (one request of `path`), made again while it fails in a way waiting
    /// can fix and the budget allows.
    pub fn retry<T>(&self, path: &str, op: impl Fn() -> Result<T>) -> Result<T> {
        let mut backoff = self.policy.backoff();
        loop {
            self.requests.set(self.requests.get() + 1);
            let e = match op() {
                Ok(v) => return Ok(v),
                Err(e) if is_retryable(&e) => e,
                Err(e) => return Err(e),
            };
            let elapsed = self.clock.now().saturating_duration_since(self.start);
            let remaining = self.policy.budget.saturating_sub(elapsed);
            let after = retry_after(&e);
            if remaining.is_zero() || after.is_some_and(|a| a > remaining) {
                return Err(e);
            }
            let pause = backoff
                .next()
                .unwrap_or(self.policy.max_delay)
                .max(after.unwrap_or_default())
                .min(remaining);
            log::debug!(
                "{} {path}: {e}; again in {} ms",
                self.label,
                pause.as_millis()
            );
            self.clock.sleep(pause);
        }
    }

    /// [`Fetch::get`], sent again while waiting can fix its failure.
    pub fn get(&self, fetch: &dyn Fetch, path: &str) -> Result<Option<String>> {
        self.retry(path, || fetch.get(path))
    }

    /// [`Fetch::get_bytes`], sent again while waiting can fix its failure.
    pub fn get_bytes(&self, fetch: &dyn Fetch, path: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        self.retry(path, || fetch.get_bytes(path, limit))
    }
}

/// A datasource over one cloud's metadata client: the client, and how long and
/// how often its fetch's failing requests are sent again (a [`Retrying`]
/// budget). Each cloud implements [`crate::source::Datasource`] for its own.
#[derive(Debug)]
pub struct ClientSource<C> {
    /// The metadata client.
    pub(crate) client: C,
    /// The retry budget of one fetch.
    pub(crate) policy: WaitPolicy,
}

impl<C> ClientSource<C> {
    /// The datasource behind `client`.
    pub fn new(client: C) -> Self {
        Self {
            client,
            policy: WaitPolicy::default(),
        }
    }

    /// How long and how often failing requests are sent again.
    #[must_use]
    pub fn with_policy(mut self, policy: WaitPolicy) -> Self {
        self.policy = policy;
        self
    }
}

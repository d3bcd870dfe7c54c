// SPDX-License-Identifier: Apache-2.0
//! Test only: the fake clock and the scripted metadata service every cloud's
//! wait and datasource tests run against, so that none carries its own.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::NicEvent;
use super::http::Fetch;
use super::wait::{Clock, WaitPolicy};
use crate::error::{Error, ImdsErrorKind, Result};
use crate::model::{Family, IfName, Lease, Reason};

/// A BOUND event of interface `name` (MAC `mac`): one lease, `address/prefix_len`
/// through `router`.
pub(crate) fn bound(
    name: &str,
    mac: &str,
    address: &str,
    prefix_len: u8,
    router: &str,
) -> NicEvent {
    let address: std::net::IpAddr = address.parse().unwrap();
    NicEvent::try_new(
        IfName::try_new(name).unwrap(),
        mac.parse().unwrap(),
        vec![Lease {
            family: Family::of(&address),
            address,
            prefix_len,
            routers: vec![router.parse().unwrap()],
            reason: Reason::Bound,
        }],
    )
    .unwrap()
}

/// A wait of `budget_ms` without jitter.
pub(crate) fn policy(budget_ms: u64) -> WaitPolicy {
    WaitPolicy {
        jitter: false,
        ..WaitPolicy::default().with_budget(Duration::from_millis(budget_ms))
    }
}

/// A `GET` answered with HTTP `status` (and a `Retry-After` of so many seconds).
pub(crate) fn http(status: u16, retry_after: Option<u64>) -> Error {
    Error::Imds {
        method: "GET",
        url: "http://169.254.169.254/x".into(),
        kind: ImdsErrorKind::Http {
            status,
            retry_after: retry_after.map(Duration::from_secs),
        },
    }
}

/// A clock that sleeping (and each scripted request) advances; nothing waits.
#[derive(Debug)]
pub(crate) struct FakeClock {
    start: Instant,
    /// The time since the start.
    pub(crate) elapsed: Cell<Duration>,
    /// Every pause asked for, in order.
    pub(crate) sleeps: RefCell<Vec<Duration>>,
}

impl FakeClock {
    /// A clock at its start.
    pub(crate) fn new() -> Self {
        Self {
            start: Instant::now(),
            elapsed: Cell::new(Duration::ZERO),
            sleeps: RefCell::new(Vec::new()),
        }
    }

    /// The time since the start.
    pub(crate) fn t(&self) -> Duration {
        self.elapsed.get()
    }

    /// The pauses asked for, added up.
    pub(crate) fn slept(&self) -> Duration {
        self.sleeps.borrow().iter().sum()
    }

    /// Moves the clock on by `d` without a sleep.
    pub(crate) fn advance(&self, d: Duration) {
        self.elapsed.set(self.elapsed.get() + d);
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        self.start + self.elapsed.get()
    }
    fn sleep(&self, pause: Duration) {
        self.sleeps.borrow_mut().push(pause);
        self.advance(pause);
    }
}

/// An answer that depends on the fake time (at the request's end).
pub(crate) type Answer = Box<dyn Fn(Duration) -> Result<Option<String>>>;

/// A scripted metadata service: per path an [`Answer`], or one for every path;
/// any other path is a 404; a path's queued failures come first. Each request
/// takes `each` (1 ms) of the fake clock, if it has one, and is logged with its
/// start.
pub(crate) struct Scripted<'c> {
    /// The clock each request advances (none: requests take no time).
    pub(crate) clock: Option<&'c FakeClock>,
    paths: BTreeMap<String, Answer>,
    every: Option<Answer>,
    failures: RefCell<BTreeMap<String, Vec<Error>>>,
    /// Failures of the next requests, whatever their path.
    failing: RefCell<Vec<Error>>,
    /// How long each request takes.
    pub(crate) each: Duration,
    /// Every request: its start and its path.
    pub(crate) log: RefCell<Vec<(Duration, String)>>,
}

impl<'c> Scripted<'c> {
    /// A service that knows nothing yet.
    pub(crate) fn new(clock: &'c FakeClock) -> Self {
        Self {
            clock: Some(clock),
            ..Scripted::untimed()
        }
    }

    /// A service that knows nothing yet, whose requests take no time.
    pub(crate) fn untimed() -> Self {
        Self {
            clock: None,
            paths: BTreeMap::new(),
            every: None,
            failures: RefCell::new(BTreeMap::new()),
            failing: RefCell::new(Vec::new()),
            each: Duration::from_millis(1),
            log: RefCell::new(Vec::new()),
        }
    }

    /// A service whose requests take no time, answering `answers` (path, body).
    pub(crate) fn answering<K: AsRef<str>, V: AsRef<str>>(
        answers: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        answers
            .into_iter()
            .fold(Self::untimed(), |s, (k, v)| s.value(k.as_ref(), v.as_ref()))
    }

    /// A service answering every path with `f`.
    pub(crate) fn every(
        clock: &'c FakeClock,
        f: impl Fn(Duration) -> Result<Option<String>> + 'static,
    ) -> Self {
        Self {
            every: Some(Box::new(f)),
            ..Self::new(clock)
        }
    }

    /// `path` answered by `f`.
    #[must_use]
    pub(crate) fn leaf(
        mut self,
        path: &str,
        f: impl Fn(Duration) -> Result<Option<String>> + 'static,
    ) -> Self {
        self.paths.insert(path.to_owned(), Box::new(f));
        self
    }

    /// `path` answered `v`, always.
    #[must_use]
    pub(crate) fn value(self, path: &str, v: &str) -> Self {
        let v = v.to_owned();
        self.leaf(path, move |_| Ok(Some(v.clone())))
    }

    /// `path` fails with `errors`, one a request, before it answers.
    pub(crate) fn fail(&self, path: &str, errors: Vec<Error>) {
        self.failures
            .borrow_mut()
            .entry(path.to_owned())
            .or_default()
            .extend(errors);
    }

    /// The next requests fail with `errors`, one a request, whatever their path.
    pub(crate) fn fail_next(&self, errors: Vec<Error>) {
        self.failing.borrow_mut().extend(errors);
    }

    /// `path` no longer answered (a 404).
    #[must_use]
    pub(crate) fn without(mut self, path: &str) -> Self {
        self.paths.remove(path);
        self
    }

    /// The paths asked, in order.
    pub(crate) fn requests(&self) -> Vec<String> {
        self.log.borrow().iter().map(|(_, p)| p.clone()).collect()
    }

    /// How many requests were made.
    pub(crate) fn count(&self) -> usize {
        self.log.borrow().len()
    }

    /// How many requests asked a path ending with `suffix`.
    pub(crate) fn count_of(&self, suffix: &str) -> usize {
        self.requests()
            .iter()
            .filter(|p| p.ends_with(suffix))
            .count()
    }
}

impl Fetch for Scripted<'_> {
    fn get(&self, path: &str) -> Result<Option<String>> {
        let t = |c: Option<&FakeClock>| c.map_or(Duration::ZERO, FakeClock::t);
        self.log.borrow_mut().push((t(self.clock), path.to_owned()));
        if let Some(c) = self.clock {
            c.advance(self.each);
        }
        let mut failing = self.failing.borrow_mut();
        if !failing.is_empty() {
            return Err(failing.remove(0));
        }
        if let Some(q) = self.failures.borrow_mut().get_mut(path)
            && !q.is_empty()
        {
            return Err(q.remove(0));
        }
        match self.paths.get(path).or(self.every.as_ref()) {
            Some(f) => f(t(self.clock)),
            None => Ok(None),
        }
    }
}

/// The rows every cloud's endpoint override passes (the seam's one check): an
/// `http://` IP literal, with a port or not, is kept without its trailing `/`;
/// a name, `https`, a path, no scheme or nothing is refused, naming `key`.
/// `with` overrides a new client's endpoint with its argument and says the
/// endpoints the client then asks.
pub(crate) fn endpoint_rows(key: &str, with: impl Fn(&str) -> Result<Vec<String>>) {
    assert_eq!(
        with("http://127.0.0.1:8080/").unwrap(),
        ["http://127.0.0.1:8080"]
    );
    assert_eq!(with("http://[::1]:80").unwrap(), ["http://[::1]:80"]);
    for bad in [
        "https://169.254.169.254",
        "http://metadata.internal",
        "http://1.2.3.4/x",
        "169.254.169.254",
        "",
    ] {
        let e = with(bad).unwrap_err().to_string();
        assert!(e.starts_with(&format!("argument {key}")), "{bad}: {e}");
    }
}

/// The rows every client over the seam's HTTP passes, against a loopback
/// service whose every answer carries `headers`: a `GET` of `/a` answered 200
/// is its body, a 404 is absent; a 429 without `Retry-After`
/// and a 503 with `Retry-After: 2` are retryable (the pause kept), so is a 500;
/// a 403 is an error waiting cannot fix; a body over the cap or not UTF-8 is an
/// error.
/// `client` builds the client for the service's base URL. The requests the
/// service saw are returned.
pub(crate) fn status_rows<F: Fetch>(headers: &str, client: impl Fn(&str) -> F) -> Vec<String> {
    use super::wait::{is_retryable, retry_after};
    use crate::source::loopback::{answer, serve};
    let big = vec![b'a'; usize::try_from(crate::constants::IMDS_MAX_BODY_BYTES).unwrap() + 1];
    let (url, h) = serve(vec![
        answer("200 OK", headers, b"[]"),
        answer("404 Not Found", headers, b""),
        answer("429 Too Many Requests", headers, b"<html>429</html>"),
        answer(
            "503 Service Unavailable",
            &format!("Retry-After: 2\r\n{headers}"),
            b"",
        ),
        answer("500 Internal Server Error", headers, b""),
        answer("403 Forbidden", headers, b""),
        answer("200 OK", headers, &big),
        answer("200 OK", headers, b"\xff\xfe"),
    ]);
    let c = client(&url);
    assert_eq!(c.get("/a").unwrap().as_deref(), Some("[]"));
    assert_eq!(c.get("/a").unwrap(), None);
    let e = c.get("/a").unwrap_err();
    assert!(is_retryable(&e), "{e}");
    assert_eq!(retry_after(&e), None);
    let e = c.get("/a").unwrap_err();
    assert!(is_retryable(&e), "{e}");
    assert_eq!(retry_after(&e), Some(Duration::from_secs(2)));
    let e = c.get("/a").unwrap_err();
    assert!(
        e.to_string().contains("HTTP 500") && is_retryable(&e),
        "{e}"
    );
    let e = c.get("/a").unwrap_err();
    assert!(e.to_string().contains("HTTP 403"), "{e}");
    assert!(!is_retryable(&e), "{e}");
    let e = c.get("/a").unwrap_err();
    assert!(e.to_string().contains("larger than"), "{e}");
    let e = c.get("/a").unwrap_err();
    assert!(e.to_string().contains("not UTF-8"), "{e}");
    let seen = h.join().unwrap();
    assert!(
        seen.iter().all(|r| r.starts_with("GET /a HTTP/1.1\r\n")),
        "{seen:?}"
    );
    seen
}

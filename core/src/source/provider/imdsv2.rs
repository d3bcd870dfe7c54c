// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the token-session client of the services shaped like EC2's IMDS
//! (EC2's, SPEC §4.1, and Alibaba ECS's, whose hardened mode is IMDSv2 with its
//! own header names): [`Http`] with a session token cached under
//! `<root>/run/leasehook/`.
//!
//! * **The token.** `PUT` once (six hours) and sent with every `GET`; cached on
//!   disk (the `token` module: mode 0600, replaced atomically, never through a
//!   symlink) so the next hook process reuses it, and replaced when the service
//!   answers 401. A 403 on the token request means the metadata endpoint is
//!   switched off: [`ImdsErrorKind::Disabled`], and no plain `GET`s (IMDSv1)
//!   unless [`Imdsv2::with_imdsv1_fallback`] asked for them.
//! * **One request.** [`Imdsv2::get`](Fetch::get) makes one attempt (plus one token
//!   refresh on 401), and the whole of it — the token `PUT` when one is needed,
//!   the `GET`, a 401, the new token's `PUT` and the `GET` again, the next
//!   endpoint when one cannot be connected to — ends within one request timeout
//!   (2 s).
//!
//! The token never appears in a log line or an error: it is only ever put in the
//! request header.

mod token;

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use ureq::Body;
use ureq::http::Response;

use super::http::{self, Fetch, Http, Method, Service};
use crate::constants::{
    IMDS_MAX_BODY_BYTES, IMDS_MAX_TOKEN_BYTES, IMDS_META_DATA, IMDS_TOKEN_TTL_SECS,
};
use crate::error::{Error, ImdsErrorKind, Result};
use crate::metadata::MACS_PATH;
use crate::model::MacAddr;

use token::{Token, TokenCache};

/// What tells EC2's IMDS from a service shaped like it: the HTTP service (its
/// default endpoints, the configuration key named in an endpoint's error, its
/// metric's label), the token exchange's path and headers, and the token cache
/// file's name. Everything else (timeouts, bounded bodies, the 401 dance, the
/// endpoint fallback, per-NIC binding) is the same client.
#[derive(Debug, Clone, Copy)]
pub struct Dialect {
    /// The HTTP service.
    pub service: Service,
    /// The path a session token is `PUT` to.
    pub token_path: &'static str,
    /// The `PUT`'s header asking for a token of this many seconds.
    pub ttl_header: &'static str,
    /// The header carrying the token on every `GET`.
    pub token_header: &'static str,
    /// The token cache's file name in `run/leasehook`.
    pub cache_name: &'static str,
}

/// The IMDSv2-shaped client. One per process is enough; it is `Sync`.
#[derive(Debug)]
pub struct Imdsv2 {
    dialect: Dialect,
    http: Http,
    cache: Option<TokenCache>,
    token: Mutex<Option<Token>>,
    imdsv1_fallback: bool,
    /// Set once the token request was refused and `imdsv1_fallback` allowed going on
    /// without one.
    v1: AtomicBool,
}

impl Imdsv2 {
    /// A client for `dialect`'s default endpoints, its token cache under `root`.
    pub fn with_dialect(root: impl AsRef<Path>, dialect: Dialect) -> Self {
        Self {
            dialect,
            http: Http::new(dialect.service),
            cache: Some(TokenCache::new(root.as_ref(), dialect.cache_name)),
            token: Mutex::new(None),
            imdsv1_fallback: false,
            v1: AtomicBool::new(false),
        }
    }

    /// Replaces the endpoint list: `http://` base URLs whose host is an IP
    /// literal, tried in order.
    pub fn with_endpoints<I, S>(mut self, endpoints: I) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.http = self.http.with_endpoints(endpoints)?;
        Ok(self)
    }

    /// Allows plain IMDSv1 `GET`s when the token request is refused (config
    /// `imdsv1_fallback`; off by default, SPEC §4.1).
    #[must_use]
    pub fn with_imdsv1_fallback(mut self, on: bool) -> Self {
        self.imdsv1_fallback = on;
        self
    }

    /// Replaces the per-request timeouts (connect 1 s, whole request 2 s).
    #[must_use]
    pub fn with_timeouts(mut self, connect: Duration, request: Duration) -> Self {
        self.http = self.http.with_timeouts(connect, request);
        self
    }

    /// Sends every request through interface `device`, from `source` (that NIC's
    /// leased address) where the endpoint's family matches: IMDS throttles per
    /// NIC, and the answer is about this NIC anyway.
    #[must_use]
    pub fn with_interface(mut self, device: &str, source: Option<std::net::IpAddr>) -> Self {
        self.http = self.http.with_interface(device, source);
        self
    }

    /// Keeps the token in memory only.
    #[must_use]
    pub fn without_token_cache(mut self) -> Self {
        self.cache = None;
        self
    }

    /// The base URLs, in the order they are tried.
    pub fn endpoints(&self) -> &[String] {
        self.http.endpoints()
    }

    /// The base URL tried first: the one that answered last.
    pub fn active_endpoint(&self) -> &str {
        self.http.active_endpoint()
    }

    /// The token to send, fetching one when neither memory nor the cache file holds
    /// a fresh one. `None` in IMDSv1 fallback mode. `stale` is a token IMDS just
    /// refused: it is not taken again from the cache.
    fn token(&self, stale: Option<&Token>, deadline: Instant) -> Result<Option<Token>> {
        if self.v1.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let now = SystemTime::now();
        let mut held = self
            .token
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(t) = held.as_ref()
            && t.is_fresh(now)
            && !t.is_same(stale)
        {
            return Ok(Some(t.clone()));
        }
        // Another process may have fetched one already.
        if let Some(t) = self.cache.as_ref().and_then(|c| c.load(now))
            && !t.is_same(stale)
        {
            log::debug!(
                "IMDS token from the cache, {} s left",
                t.remaining_secs(now)
            );
            *held = Some(t.clone());
            return Ok(Some(t));
        }
        match self.fetch_token(deadline) {
            Ok(t) => {
                log::info!(
                    "IMDS: new IMDSv2 token, valid {} s",
                    t.remaining_secs(SystemTime::now())
                );
                if let Some(c) = &self.cache {
                    c.store(&t);
                }
                *held = Some(t.clone());
                Ok(Some(t))
            }
            Err(Error::Imds { kind, url, .. }) if self.imdsv1_fallback && is_refusal(&kind) => {
                log::warn!(
                    "IMDS PUT {url}: {kind}; imdsv1_fallback is set, going on without a token (IMDSv1)"
                );
                self.v1.store(true, Ordering::Relaxed);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// `PUT`s a token request, by `deadline`.
    fn fetch_token(&self, deadline: Instant) -> Result<Token> {
        let ttl = IMDS_TOKEN_TTL_SECS.to_string();
        let (url, mut resp) = self.http.send(
            Method::Put,
            self.dialect.token_path,
            Some((self.dialect.ttl_header, &ttl)),
            deadline,
        )?;
        let status = resp.status().as_u16();
        let fail = |kind| Error::Imds {
            method: Method::Put.as_str(),
            url: url.clone(),
            kind,
        };
        match status {
            200 => {
                let body = http::read_body(&mut resp, IMDS_MAX_TOKEN_BYTES).map_err(&fail)?;
                Token::try_new(
                    &body,
                    Duration::from_secs(IMDS_TOKEN_TTL_SECS),
                    SystemTime::now(),
                )
                .map_err(|bad| {
                    fail(ImdsErrorKind::Garbage {
                        reason: bad.to_string(),
                    })
                })
            }
            403 => {
                http::drain(&mut resp);
                Err(fail(ImdsErrorKind::Disabled))
            }
            _ => {
                http::drain(&mut resp);
                Err(fail(http::http_error(&resp)))
            }
        }
    }

    /// The `GET` behind [`Fetch`]: a 200's body as `read` reads it, `None` for a
    /// 404; on a 401 the token is replaced once and the `GET` repeated.
    fn get_with<T>(
        &self,
        path: &str,
        read: impl Fn(&mut Response<Body>) -> Result<T, ImdsErrorKind>,
    ) -> Result<Option<T>> {
        // One request, however many exchanges it takes: the token dance and the
        // endpoint fallback share one request timeout, so a slow, 401-ing IMDS
        // holds the caller no longer than a slow one.
        let deadline = Instant::now() + self.http.request_timeout();
        let mut stale = None;
        loop {
            let token = self.token(stale.as_ref(), deadline)?;
            let header = token
                .as_ref()
                .map(|t| (self.dialect.token_header, t.secret()));
            let (url, mut resp) = self.http.send(Method::Get, path, header, deadline)?;
            if resp.status().as_u16() == 401 && stale.is_none() && token.is_some() {
                http::drain(&mut resp);
                log::info!("IMDS GET {url}: 401, the token was refused; fetching a new one");
                stale = token;
                continue;
            }
            return self.http.answer(&url, resp, &read);
        }
    }
}

impl Fetch for Imdsv2 {
    /// One `GET` with the token; on a 401 the token is replaced once and the `GET`
    /// repeated. 200 is the body, 404 is `None`, anything else an error.
    fn get(&self, path: &str) -> Result<Option<String>> {
        self.get_with(path, |resp| http::read_body(resp, IMDS_MAX_BODY_BYTES))
    }

    /// As [`Imdsv2::get`](Fetch::get), without requiring UTF-8, up to `limit` bytes.
    fn get_bytes(&self, path: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        self.get_with(path, |resp| http::read_bytes(resp, limit))
    }
}

/// A folder listing's entries, without the trailing `/` of subfolders.
pub fn listing(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.trim().trim_end_matches('/').to_owned())
        .filter(|l| !l.is_empty())
        .collect()
}

/// The most NICs a datasource reads of a tree of EC2's shape (the largest
/// instance types have far fewer).
pub const MAX_NICS: usize = 64;

/// The NICs a tree of EC2's shape (EC2, Alibaba) lists under
/// `meta-data/network/interfaces/macs/`, asked through `get`: at most
/// [`MAX_NICS`], each listed name with its MAC. A name goes into the next URLs,
/// so one that is not a MAC is an error; no listing is no NIC.
pub fn listed_nics(get: impl Fn(&str) -> Result<Option<String>>) -> Result<Vec<(String, MacAddr)>> {
    let macs = get(&format!("{IMDS_META_DATA}/{MACS_PATH}/"))?.unwrap_or_default();
    listing(&macs)
        .into_iter()
        .take(MAX_NICS)
        .map(|name| {
            let mac = name.parse().map_err(|problem| Error::Metadata {
                key: MACS_PATH.to_owned(),
                problem,
            })?;
            Ok((name, mac))
        })
        .collect()
}

/// Whether a token failure means "no tokens here" (so IMDSv1 may be tried), rather
/// than "IMDS is not answering".
fn is_refusal(kind: &ImdsErrorKind) -> bool {
    match kind {
        ImdsErrorKind::Disabled => true,
        ImdsErrorKind::Http { status, .. } => (400..500).contains(status),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals() {
        let http = |status| ImdsErrorKind::Http {
            status,
            retry_after: None,
        };
        assert!(is_refusal(&ImdsErrorKind::Disabled));
        assert!(is_refusal(&http(405)));
        assert!(!is_refusal(&http(503)));
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the Azure Instance Metadata Service (IMDS) client, over HTTP
//! (SPEC §4.4, `reference/clouds-and-clusters.md` §2).
//!
//! * **One request per question.** `GET /metadata/instance/network?api-version=
//!   2021-02-01` answers every NIC at once ([`nic`]); the boot stage's
//!   `GET /metadata/instance?api-version=2021-02-01` answers compute and network
//!   at once ([`identity`]). Every request carries `Metadata: true`; IMDS refuses
//!   one without it (400), and one with `X-Forwarded-For`, which is never sent.
//! * **From the primary NIC only.** IMDS answers only requests whose source is the
//!   primary NIC's primary address. Requests are never bound to the event's NIC
//!   (EC2's are): the kernel's main table sends them out of the primary, whatever
//!   NIC the event is about.
//! * **5 requests/s per VM.** Requests are spaced at least [`MIN_SPACING`]
//!   (250 ms) apart, across every leasehook process of the machine: the hooks of
//!   two NICs and a worker run at once, so the last request's time (Unix ms) is
//!   kept in `<root>/run/leasehook/azure-imds.lock`, read and written under that
//!   file's lock (in-process only when the folder cannot be written). The lock
//!   is waited for until the event's deadline ([`Azure::with_deadline`], else one
//!   whole-request timeout), polled, never blocking: when another process holds
//!   it past that (a stopped worker), the request is not made and the error says
//!   so; a request is never made unpaced.
//!   The wait asks one request per round, so one event costs one request when the
//!   metadata agrees, and the machine never asks more than four a second. A 429 is
//!   an error ("retry"), never "empty", and its `Retry-After` is honoured by the
//!   wait.
//! * **Bounded.** Connect 1 s, whole request 2 s, no proxy (IMDS is link-local, and
//!   a proxy's request would not come from the primary address), no redirects,
//!   answers capped at [`nic::MAX_BODY_BYTES`] and required to be UTF-8 JSON. The
//!   base URL must be an `http://` IP literal (config `azure.endpoint`): no DNS.

pub mod detect;
pub mod identity;
pub mod nic;
mod provider;
pub mod services;
pub mod wait;

use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};
use crate::source::provider::http::{self, Http, Method, Service};

pub use identity::AzureSource;
pub use provider::AzureProvider;
pub use provider::{CLOUD, SOURCE};
pub use wait::wait_for_nic;

/// The IMDS base URL.
pub const ENDPOINT: &str = "http://169.254.169.254";

/// The API version asked for (the oldest that serves everything read here).
pub const API_VERSION: &str = "2021-02-01";

/// The header every request carries.
pub const METADATA_HEADER: (&str, &str) = ("Metadata", "true");

/// Every NIC's network metadata.
pub const NETWORK_PATH: &str = "/metadata/instance/network";

/// The instance's compute and network metadata.
pub const INSTANCE_PATH: &str = "/metadata/instance";

/// The VM id alone (a leaf: `format=text`).
pub const VM_ID_PATH: &str = "/metadata/instance/compute/vmId";

/// The least time between two requests of the machine: IMDS allows 5 a second,
/// and a clock tick of slack keeps four well under it.
pub const MIN_SPACING: Duration = Duration::from_millis(250);

/// The lock file that holds the machine's last request time (Unix ms).
pub const PACE_FILE: &str = "azure-imds.lock";

/// Azure's IMDS, to the seam's HTTP client (connect 1 s, whole request 2 s).
const SERVICE: Service = Service::new("azure", "Azure IMDS", &[ENDPOINT], "azure.endpoint")
    .with_headers(&[METADATA_HEADER]);

/// When the process's last request started (the fallback when the machine-wide
/// pace file cannot be used).
static LAST_REQUEST: Mutex<Option<Instant>> = Mutex::new(None);

/// Reads one IMDS path: the seam between the wait and the transport.
pub trait Fetch {
    /// `GET`s `path` (below the base URL, starting with `/`, with or without a
    /// query; `api-version` is added). Only a 200 is an answer: every other
    /// status, 404 and 429 included, is an error.
    fn get(&self, path: &str) -> Result<String>;
}

/// The Azure IMDS client.
#[derive(Debug)]
pub struct Azure {
    http: Http,
    /// The root whose `run/leasehook/` holds [`PACE_FILE`].
    pace_root: Option<PathBuf>,
    /// The latest time a request may wait for the pace file's lock (`None`: one
    /// whole-request timeout from the request's start).
    deadline: Option<Instant>,
}

impl Default for Azure {
    fn default() -> Self {
        Self::new()
    }
}

impl Azure {
    /// A client for [`ENDPOINT`].
    pub fn new() -> Self {
        Self {
            http: Http::new(SERVICE),
            pace_root: None,
            deadline: None,
        }
    }

    /// Waits for the pace file's lock at most until `deadline` (the event's
    /// budget): past it a request fails without being made.
    #[must_use]
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Paces requests across processes through `<root>/run/leasehook/`
    /// ([`PACE_FILE`]); without it, within this process only.
    #[must_use]
    pub fn with_pace_root(mut self, root: impl AsRef<Path>) -> Self {
        self.pace_root = Some(root.as_ref().to_owned());
        self
    }

    /// Replaces the base URL (config `azure.endpoint`): `http://`, an IP literal,
    /// an optional port, no path.
    pub fn with_endpoint(mut self, url: &str) -> Result<Self> {
        self.http = self.http.with_endpoints([url])?;
        Ok(self)
    }

    /// Replaces the per-request timeouts (connect 1 s, whole request 2 s).
    #[must_use]
    pub fn with_timeouts(mut self, connect: Duration, request: Duration) -> Self {
        self.http = self.http.with_timeouts(connect, request);
        self
    }

    /// The base URL.
    pub fn endpoint(&self) -> &str {
        self.http.active_endpoint()
    }
}

/// How often a held pace file's lock is tried again.
const LOCK_POLL: Duration = Duration::from_millis(10);

/// Takes `file`'s exclusive lock, trying every [`LOCK_POLL`] until `deadline`.
/// `Ok(false)`: another process held it all that time.
fn lock_until(file: &std::fs::File, deadline: Instant) -> std::io::Result<bool> {
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(true),
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(false);
        }
        std::thread::sleep(left.min(LOCK_POLL));
    }
}

/// Waits until [`MIN_SPACING`] has passed since the machine's last request
/// (the time the pace file holds, under its lock), then records this one. The
/// lock is waited for until `deadline`; past it, an error (the request must not
/// be made: unpaced, it could break IMDS's limit).
fn pace(root: Option<&Path>, deadline: Instant) -> Result<()> {
    let Some(root) = root else {
        pace_process();
        return Ok(());
    };
    let opened = crate::fs::run_folder_for_write(root, None).and_then(|dir| {
        let file = dir
            .open_lock(PACE_FILE, 0o600)
            .map_err(|p| dir.error(PACE_FILE, &p))?;
        Ok((dir, file))
    });
    let (dir, mut file) = match opened {
        Ok(held) => held,
        Err(e) => {
            log::debug!("Azure IMDS: {e}; pacing this process's requests only");
            pace_process();
            return Ok(());
        }
    };
    let path = dir.path().join(PACE_FILE);
    match lock_until(&file, deadline) {
        Ok(true) => {}
        Ok(false) => {
            return Err(Error::Io {
                path: path.display().to_string(),
                message: "another process held the lock that paces Azure IMDS requests for the whole budget; not asking (an unpaced request could break IMDS's 5 requests/s)".to_owned(),
            });
        }
        Err(e) => {
            let e = Error::io(&path, &e);
            log::debug!("Azure IMDS: {e}; pacing this process's requests only");
            pace_process();
            return Ok(());
        }
    }
    // The file holds the last request's time (Unix ms, truncated: read back as
    // the end of that millisecond, so the spacing is never a fraction short); a
    // new, empty or garbled one says nothing, and no one waits for it.
    let mut text = String::new();
    let last = (&mut file)
        .take(32)
        .read_to_string(&mut text)
        .ok()
        .and_then(|_| text.trim().parse::<u64>().ok())
        .map(|ms| UNIX_EPOCH + Duration::from_millis(ms.saturating_add(1)));
    if let Some(last) = last {
        let since = SystemTime::now().duration_since(last).unwrap_or_default();
        if since < MIN_SPACING {
            std::thread::sleep(MIN_SPACING.saturating_sub(since));
        }
    }
    let now = crate::fs::unix_ms().to_string();
    let written = file
        .set_len(0)
        .and_then(|()| file.seek(SeekFrom::Start(0)))
        .and_then(|_| file.write_all(now.as_bytes()));
    if let Err(e) = written {
        log::debug!("Azure IMDS: {}", Error::io(&dir.path().join(PACE_FILE), &e));
    }
    drop(file);
    Ok(())
}

/// Waits until [`MIN_SPACING`] has passed since the process's last request.
fn pace_process() {
    let mut last = LAST_REQUEST
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(t) = *last {
        let since = t.elapsed();
        if since < MIN_SPACING {
            std::thread::sleep(MIN_SPACING.saturating_sub(since));
        }
    }
    *last = Some(Instant::now());
}

/// `path` with the API version asked for.
fn versioned(path: &str) -> String {
    let sep = if path.contains('?') { '&' } else { '?' };
    format!("{path}{sep}api-version={API_VERSION}")
}

impl Fetch for Azure {
    fn get(&self, path: &str) -> Result<String> {
        let path = versioned(path);
        let timeout = self.http.request_timeout();
        let deadline = self.deadline.unwrap_or_else(|| Instant::now() + timeout);
        pace(self.pace_root.as_deref(), deadline)?;
        let (url, mut resp) = self
            .http
            .send(Method::Get, &path, None, Instant::now() + timeout)?;
        let fail = |kind| Error::Imds {
            method: "GET",
            url: url.clone(),
            kind,
        };
        // Only a 200 is an answer: a 404 is not "absent" here, and a 429 carries
        // its `Retry-After`.
        if resp.status().as_u16() != 200 {
            let kind = http::http_error(&resp);
            http::drain(&mut resp);
            return Err(fail(kind));
        }
        let limit = u64::try_from(nic::MAX_BODY_BYTES).unwrap_or(u64::MAX);
        http::read_body(&mut resp, limit).map_err(fail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::provider::fake::endpoint_rows;

    #[test]
    fn the_endpoint_is_an_http_ip_literal_and_every_url_names_the_api_version() {
        let a = Azure::new()
            .with_endpoint("http://127.0.0.1:8080/")
            .unwrap();
        assert_eq!(a.endpoint(), "http://127.0.0.1:8080");
        assert_eq!(
            format!("{}{}", a.endpoint(), versioned(NETWORK_PATH)),
            "http://127.0.0.1:8080/metadata/instance/network?api-version=2021-02-01"
        );
        assert_eq!(
            format!(
                "{}{}",
                a.endpoint(),
                versioned("/metadata/instance/compute/vmId?format=text")
            ),
            "http://127.0.0.1:8080/metadata/instance/compute/vmId?format=text&api-version=2021-02-01"
        );
        endpoint_rows("azure.endpoint", |u| {
            Ok(vec![Azure::new().with_endpoint(u)?.endpoint().to_owned()])
        });
        assert_eq!(Azure::new().endpoint(), ENDPOINT);
    }

    #[test]
    fn a_pace_file_held_by_another_process_is_waited_for_until_the_deadline_only() {
        // Issue 30, item 8: a stopped worker holding the lock held every request.
        let root = tempfile::tempdir().unwrap();
        pace(
            Some(root.path()),
            Instant::now() + crate::constants::IMDS_REQUEST_TIMEOUT,
        )
        .unwrap();
        let held = std::fs::File::open(root.path().join("run/leasehook").join(PACE_FILE)).unwrap();
        held.lock().unwrap();
        let start = Instant::now();
        let e = pace(Some(root.path()), start + Duration::from_millis(300)).unwrap_err();
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(300), "{waited:?}");
        assert!(waited < Duration::from_secs(3), "{waited:?}");
        assert!(e.to_string().contains("not asking"), "{e}");
        // Through the client: the request is not made (the endpoint would refuse:
        // a connection error would name it).
        let a = Azure::new()
            .with_endpoint("http://127.0.0.1:9")
            .unwrap()
            .with_pace_root(root.path())
            .with_deadline(Instant::now() + Duration::from_millis(100));
        let e = a.get(NETWORK_PATH).unwrap_err().to_string();
        assert!(e.contains("held the lock"), "{e}");
        drop(held);
        pace(
            Some(root.path()),
            Instant::now() + crate::constants::IMDS_REQUEST_TIMEOUT,
        )
        .unwrap();
    }

    #[test]
    fn requests_are_paced_through_the_shared_pace_file() {
        let root = tempfile::tempdir().unwrap();
        let start = Instant::now();
        for _ in 0..3 {
            pace(
                Some(root.path()),
                Instant::now() + crate::constants::IMDS_REQUEST_TIMEOUT,
            )
            .unwrap();
        }
        // Three requests: two full spacings between them (a lower bound: a sleep
        // never ends early), and the last one recorded in the file another
        // process would read.
        assert!(start.elapsed() >= MIN_SPACING * 2, "{:?}", start.elapsed());
        let dir = crate::fs::run_folder(root.path(), None, false)
            .unwrap()
            .unwrap();
        let last = dir.modified(PACE_FILE).unwrap().unwrap();
        assert!(SystemTime::now().duration_since(last).unwrap() < Duration::from_secs(5));
    }
}

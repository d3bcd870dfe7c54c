// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the LXD datasource, HTTP over the dev-lxd unix socket
//! (`/dev/lxd/sock`, API 1.0; SPEC §4.2), or Incus's `/dev/incus/sock`, the same
//! API (SPEC §4.5): [`Lxd::new`] takes the Incus socket when it is one, else the
//! LXD socket.
//!
//! One ureq agent with a unix-socket transport (`transport.rs`) makes the requests,
//! kept alive on one connection: `GET /1.0/meta-data` (must answer), `GET
//! /1.0/config` (a JSON list of routes; must answer) and then each `user.*` /
//! `cloud-init.*` key it lists (a key that does not answer 200 is skipped), and
//! `GET /1.0/devices` (optional: LXD 4.0 answers 404). An HTTP 500 — LXD's answer
//! while the instance is still starting — is sent again, up to 30 times in all,
//! 100 ms apart. What the answers mean is decided by the pure [`data`] module.
//!
//! A missing socket (`security.devlxd=false`, or an LXD VM whose agent has not
//! started yet) is logged as a warning and is [`Error::NotFound`], so the caller
//! can fall back to its cache (SPEC §5).
//!
//! The identity check reads `/1.0/meta-data` (and `user.meta-data`, which the fetch
//! merges over it) and compares its instance-id with the cached one: unlike
//! cloud-init's LXD datasource, the cache stays valid across boots while the id
//! matches.

pub mod data;
pub mod events;
pub mod stream;
mod transport;

use std::fs;
use std::os::unix::fs::FileTypeExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ureq::Agent;

use self::data::{Flavour, Inputs, Raw};
use super::{Datasource, InstanceData, SourceKind};
use crate::constants::{
    INCUS_SOCKET, LXD_500_ATTEMPTS, LXD_500_PAUSE, LXD_API_VERSION, LXD_MAX_BODY_BYTES,
    LXD_REQUEST_TIMEOUT, LXD_SOCKET,
};
use crate::error::{Error, Problem, Result};

/// The LXD datasource: a dev-lxd client bound to one socket.
#[derive(Debug)]
pub struct Lxd {
    socket: PathBuf,
    flavour: Flavour,
    agent: Agent,
    virt: String,
    machine: String,
    attempts: u32,
    pause: Duration,
}

/// One answer: the status and the body.
#[derive(Debug)]
struct Answer {
    url: String,
    status: u16,
    body: String,
}

/// The machine architecture as `uname -m` names it (`ppc64le`, not `powerpc64`).
fn machine() -> &'static str {
    if cfg!(all(target_arch = "powerpc64", target_endian = "little")) {
        "ppc64le"
    } else {
        std::env::consts::ARCH
    }
}

fn agent(socket: &Path, timeout: Duration) -> Agent {
    let config = Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .max_redirects(0)
        .proxy(None)
        .user_agent(concat!("leasehook/", env!("CARGO_PKG_VERSION")))
        .build();
    Agent::with_parts(
        config,
        transport::UnixConnector::new(socket.to_owned()),
        transport::NoLookup,
    )
}

impl Lxd {
    /// The datasource at `<root>/dev/incus/sock` when that is a socket (Incus),
    /// else at `<root>/dev/lxd/sock`.
    pub fn new(root: impl AsRef<Path>) -> Self {
        Self::at_socket(socket_below(root.as_ref()))
    }

    /// The datasource at this socket (Incus when it is `.../incus/sock`).
    pub fn at_socket(socket: impl Into<PathBuf>) -> Self {
        let socket = socket.into();
        Self {
            agent: agent(&socket, LXD_REQUEST_TIMEOUT),
            flavour: Flavour::of_socket(&socket),
            socket,
            virt: "unavailable".to_owned(),
            machine: machine().to_owned(),
            attempts: LXD_500_ATTEMPTS,
            pause: LXD_500_PAUSE,
        }
    }

    /// The virtualisation (from detection): under `kvm`/`qemu` the default network
    /// config names the VM's NIC instead of `eth0`.
    #[must_use]
    pub fn with_virt(mut self, virt: impl Into<String>) -> Self {
        self.virt = virt.into();
        self
    }

    /// The machine architecture, for the VM NIC name (default: this build's).
    #[must_use]
    pub fn with_machine(mut self, machine: impl Into<String>) -> Self {
        self.machine = machine.into();
        self
    }

    /// How often a request answered with HTTP 500 is sent in all, and the pause
    /// after each 500 (default 30 and 100 ms).
    #[must_use]
    pub fn with_retries(mut self, attempts: u32, pause: Duration) -> Self {
        self.attempts = attempts.max(1);
        self.pause = pause;
        self
    }

    /// The time one whole request may take (default 10 s).
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.agent = agent(&self.socket, timeout);
        self
    }

    /// The socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// LXD or Incus.
    pub fn flavour(&self) -> Flavour {
        self.flavour
    }

    /// Reads everything dev-lxd serves (see the module docs).
    pub fn read(&self) -> Result<Raw> {
        self.present()?;
        let meta_data = Self::must(self.get("/meta-data")?)?;
        let config_answer = Self::must(self.get("/config")?)?;
        let keys = data::config_keys(&config_answer, &format!("GET {}", Self::url("/config")))?;
        let mut config = Vec::with_capacity(keys.len());
        for key in keys {
            let a = self.get(&format!("/config/{key}"))?;
            if a.status == 200 {
                config.push((key, a.body));
            } else {
                log::debug!("LXD GET {}: HTTP {}; skipped", a.url, a.status);
            }
        }
        let a = self.get("/devices")?;
        let devices = if a.status == 200 {
            Some(data::parse_devices(&a.body, &format!("GET {}", a.url))?)
        } else {
            log::debug!("LXD GET {}: HTTP {}; no devices (old LXD)", a.url, a.status);
            None
        };
        Ok(Raw {
            meta_data,
            config,
            devices,
        })
    }

    /// `GET /1.0/devices` alone (`None`: this LXD serves no devices, HTTP 404), for
    /// matching a NIC device to a link by its `hwaddr`.
    pub fn devices(&self) -> Result<Option<serde_json::Value>> {
        self.present()?;
        let a = self.get("/devices")?;
        if a.status == 200 {
            Ok(Some(data::parse_devices(
                &a.body,
                &format!("GET {}", a.url),
            )?))
        } else {
            log::debug!("LXD GET {}: HTTP {}; no devices (old LXD)", a.url, a.status);
            Ok(None)
        }
    }

    /// The meta-data as [`Datasource::fetch`] sees it: `GET /1.0/meta-data` with
    /// `user.meta-data` merged over it (one more request, answered 404 when the key
    /// is not set), so the identity check and the fetch agree on the instance-id
    /// whether or not this LXD appends `user.meta-data` to its own meta-data.
    fn meta_data(&self) -> Result<serde_json::Map<String, serde_json::Value>> {
        self.present()?;
        let text = Self::must(self.get("/meta-data")?)?;
        let mut meta = data::parse_mapping(&text, "meta-data")?;
        let user = self.get("/config/user.meta-data")?;
        if user.status == 200 && !user.body.trim().is_empty() {
            meta.extend(data::parse_mapping(&user.body, "config user.meta-data")?);
        }
        Ok(meta)
    }

    /// `NotFound` (logged as a warning) unless the socket is there.
    fn present(&self) -> Result<()> {
        let shown = self.socket.display();
        let reason = match fs::metadata(&self.socket) {
            Ok(m) if m.file_type().is_socket() => return Ok(()),
            Ok(_) => format!("{shown} is not a socket"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => format!(
                "{shown} does not exist (dev-lxd is off for this instance, security.devlxd=false, or the LXD agent has not started)"
            ),
            Err(e) => format!("{shown}: {e}"),
        };
        log::warn!("LXD: {reason}");
        Err(Error::NotFound {
            datasource: SourceKind::Lxd,
            reason,
        })
    }

    fn url(route: &str) -> String {
        format!("http://lxd/{LXD_API_VERSION}{route}")
    }

    /// The body of a 200 answer; any other status is an error.
    fn must(a: Answer) -> Result<String> {
        if a.status == 200 {
            Ok(a.body)
        } else {
            Err(Error::Datasource {
                datasource: SourceKind::Lxd,
                what: format!("GET {}", a.url),
                problem: Problem::bad(format!("HTTP {}", a.status), &a.body).to_string(),
            })
        }
    }

    /// One `GET` below `/1.0`, sent again after each HTTP 500 up to the attempt
    /// limit.
    fn get(&self, route: &str) -> Result<Answer> {
        let url = Self::url(route);
        let fail = |problem: String| Error::Datasource {
            datasource: SourceKind::Lxd,
            what: format!("GET {url}"),
            problem,
        };
        let mut attempt = 1;
        loop {
            let mut resp = self
                .agent
                .get(&url)
                .call()
                .map_err(|e| fail(describe(&e)))?;
            let status = resp.status().as_u16();
            let bytes = resp
                .body_mut()
                .with_config()
                .limit(LXD_MAX_BODY_BYTES)
                .read_to_vec()
                .map_err(|e| fail(describe(&e)))?;
            if status == 500 && attempt < self.attempts {
                // One warning, not one per attempt: a socket that keeps failing
                // would otherwise fill the boot log with 29 identical lines.
                let level = if attempt == 1 {
                    log::Level::Warn
                } else {
                    log::Level::Debug
                };
                log::log!(
                    level,
                    "LXD GET {url} ({}): HTTP 500, sending it again ({} more time(s) at most)",
                    self.socket.display(),
                    self.attempts - attempt
                );
                attempt += 1;
                std::thread::sleep(self.pause);
                continue;
            }
            let body = String::from_utf8(bytes).map_err(|e| {
                fail(format!(
                    "answer is not UTF-8 (byte {})",
                    e.utf8_error().valid_up_to()
                ))
            })?;
            log::debug!("LXD GET {url}: HTTP {status}");
            return Ok(Answer { url, status, body });
        }
    }
}

/// The socket below `root` a dev-lxd client talks to: `dev/incus/sock` when it is
/// a socket, else `dev/lxd/sock` (which the errors then name).
pub fn socket_below(root: &Path) -> PathBuf {
    let incus = root.join(INCUS_SOCKET);
    if fs::metadata(&incus).is_ok_and(|m| m.file_type().is_socket()) {
        incus
    } else {
        root.join(LXD_SOCKET)
    }
}

/// A ureq error in words.
fn describe(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Io(io) => io.to_string(),
        ureq::Error::Timeout(t) => format!("timed out ({t:?})").to_lowercase(),
        ureq::Error::Protocol(p) => format!("not an HTTP answer ({p})"),
        ureq::Error::BodyExceedsLimit(n) => format!("answer larger than {n} bytes"),
        other => other.to_string(),
    }
}

impl Datasource for Lxd {
    fn kind(&self) -> SourceKind {
        SourceKind::Lxd
    }

    fn fetch(&self) -> Result<InstanceData> {
        let raw = self.read()?;
        data::assemble(
            &raw,
            &Inputs {
                flavour: self.flavour,
                socket: self.socket.display().to_string(),
                virt: self.virt.clone(),
                machine: self.machine.clone(),
            },
        )
    }

    fn check_instance_id(&self, cached: &InstanceData) -> Result<bool> {
        let id = data::instance_id(&self.meta_data()?)?;
        if id != cached.instance_id {
            log::info!(
                "LXD: instance-id is {id:?}, the cache holds {:?}",
                cached.instance_id
            );
        }
        Ok(id == cached.instance_id)
    }
}

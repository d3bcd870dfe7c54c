// SPDX-License-Identifier: Apache-2.0
//! Pure: what dev-lxd's `/1.0/events` stream says and what `leasehook watch` does
//! about it (SPEC §4.5).
//!
//! * [`parse`] reads one event message: `{"type": "config", "metadata": {"key",
//!   "old_value", "value"}}` or `{"type": "device", "metadata": {"name", "action":
//!   added|removed|updated, "config": {...}}}`; anything else is [`Event::Other`],
//!   a message that is not such JSON an error in words (logged, skipped).
//! * [`Pending`] coalesces a burst: any number of config events for `user.*` /
//!   `cloud-init.*` keys are one rewrite of instance-data, and NIC events one entry
//!   per device name (the last action wins), at most [`MAX_PENDING_NICS`] of them;
//!   past that, one "every NIC" entry. A flood of events therefore takes bounded
//!   memory, whatever its length.
//! * [`nic_hwaddr`] finds a NIC device's MAC in the `/1.0/devices` answer (device
//!   events carry no MAC).
//! * [`Backoff`]: the pause before each reconnection, doubling from
//!   [`BACKOFF_MIN`] to [`BACKOFF_MAX`], back to the start once connected.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

/// The route `leasehook watch` subscribes to, below the socket.
pub const EVENTS_ROUTE: &str = "/1.0/events?type=config,device";

/// The most NIC device names a burst keeps apart; past it, every NIC is looked at.
pub const MAX_PENDING_NICS: usize = 64;

/// The longest event message read, in bytes (LXD's are a few hundred).
pub const MAX_EVENT_BYTES: usize = 1024 * 1024;

/// The first pause before reconnecting.
pub const BACKOFF_MIN: Duration = Duration::from_millis(100);

/// The longest pause before reconnecting.
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// What a device event says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DeviceAction {
    /// The device was added.
    Added,
    /// The device was removed.
    Removed,
    /// The device's configuration changed.
    Updated,
}

impl DeviceAction {
    /// The word LXD uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "added",
            Self::Removed => "removed",
            Self::Updated => "updated",
        }
    }
}

/// One event from the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A config key changed (`value` is `None` or empty when it was unset).
    Config {
        /// The key, `user.foo`.
        key: String,
        /// The new value.
        value: Option<String>,
    },
    /// A device was added, removed or updated.
    Device {
        /// The device's name in the instance config (`eth1`).
        name: String,
        /// What happened.
        action: DeviceAction,
        /// Whether its config says `type: nic`.
        nic: bool,
    },
    /// Another event type, or a device action LXD may add later: ignored.
    Other(String),
}

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Why an event message is skipped.
#[derive(Debug, thiserror::Error)]
pub enum BadEvent {
    /// Not JSON; the message, shortened.
    #[error("event is not JSON ({source}): {message}")]
    NotJson {
        /// The JSON reader's error.
        #[source]
        source: serde_json::Error,
        /// The message, shortened.
        message: String,
    },
    /// No `type`; the message, shortened.
    #[error("event has no type: {0}")]
    NoType(String),
    /// A config event without a key; the message, shortened.
    #[error("config event has no key: {0}")]
    NoKey(String),
    /// A device event without a device name; the message, shortened.
    #[error("device event has no name: {0}")]
    NoName(String),
}

/// Reads one event message.
pub fn parse(message: &str) -> Result<Event, BadEvent> {
    let v: Value = serde_json::from_str(message).map_err(|source| BadEvent::NotJson {
        source,
        message: shorten(message),
    })?;
    let Some(kind) = text(&v, "type") else {
        return Err(BadEvent::NoType(shorten(message)));
    };
    let meta = v.get("metadata").unwrap_or(&Value::Null);
    match kind {
        "config" => {
            let key = text(meta, "key")
                .filter(|k| !k.is_empty())
                .ok_or_else(|| BadEvent::NoKey(shorten(message)))?;
            Ok(Event::Config {
                key: key.to_owned(),
                value: text(meta, "value").map(str::to_owned),
            })
        }
        "device" => {
            let name = text(meta, "name")
                .filter(|n| !n.is_empty())
                .ok_or_else(|| BadEvent::NoName(shorten(message)))?;
            let action = match text(meta, "action") {
                Some("added") => DeviceAction::Added,
                Some("removed") => DeviceAction::Removed,
                Some("updated") => DeviceAction::Updated,
                other => {
                    return Ok(Event::Other(format!(
                        "device {name} action {}",
                        other.unwrap_or("(none)")
                    )));
                }
            };
            let nic = meta
                .get("config")
                .and_then(|c| text(c, "type"))
                .is_some_and(|t| t == "nic");
            Ok(Event::Device {
                name: name.to_owned(),
                action,
                nic,
            })
        }
        other => Ok(Event::Other(other.to_owned())),
    }
}

/// At most 200 characters of a message, for a log line.
fn shorten(s: &str) -> String {
    let mut out: String = s.chars().take(200).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// Whether a config key is one instance-data reflects: `user.*` or `cloud-init.*`.
pub fn watched_key(key: &str) -> bool {
    key.starts_with("user.") || key.starts_with("cloud-init.")
}

/// NIC work: one device, or (after more than [`MAX_PENDING_NICS`] names in one
/// burst) every NIC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NicWork {
    /// This device, and the last thing that happened to it.
    One(String, DeviceAction),
    /// Too many names in one burst: look at every NIC.
    All,
}

/// What a burst of events asks for, coalesced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pending {
    /// Rewrite instance-data, because of these keys (at most
    /// [`MAX_PENDING_NICS`] kept, for the log).
    rewrite: Option<Vec<String>>,
    nics: BTreeMap<String, DeviceAction>,
    all_nics: bool,
    /// Events taken in, and events that asked for nothing.
    seen: u64,
    ignored: u64,
}

/// What to do now, taken from [`Pending`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Work {
    /// Rewrite instance-data; the keys that changed (some, for the log).
    pub rewrite: Option<Vec<String>>,
    /// NIC devices to look at.
    pub nics: Vec<NicWork>,
    /// Events coalesced into this work.
    pub events: u64,
    /// Of them, events that asked for nothing (other keys, other devices, other
    /// types).
    pub ignored: u64,
}

impl Work {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.rewrite.is_none() && self.nics.is_empty()
    }
}

impl Pending {
    /// Takes one event in.
    pub fn add(&mut self, event: Event) {
        self.seen += 1;
        match event {
            Event::Config { key, .. } if watched_key(&key) => {
                let keys = self.rewrite.get_or_insert_with(Vec::new);
                if keys.len() < MAX_PENDING_NICS && !keys.contains(&key) {
                    keys.push(key);
                }
            }
            Event::Device {
                name,
                action,
                nic: true,
            } => {
                if self.all_nics {
                    return;
                }
                if self.nics.len() >= MAX_PENDING_NICS && !self.nics.contains_key(&name) {
                    self.nics.clear();
                    self.all_nics = true;
                } else {
                    self.nics.insert(name, action);
                }
            }
            Event::Config { .. } | Event::Device { .. } | Event::Other(_) => self.ignored += 1,
        }
    }

    /// Asks for the whole instance-data again (after a reconnection: events may
    /// have been missed).
    pub fn add_resync(&mut self) {
        self.rewrite.get_or_insert_with(Vec::new);
    }

    /// Events taken in since the last [`Pending::take`].
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// The work, leaving nothing pending.
    pub fn take(&mut self) -> Work {
        let taken = std::mem::take(self);
        let nics = if taken.all_nics {
            vec![NicWork::All]
        } else {
            taken
                .nics
                .into_iter()
                .map(|(n, a)| NicWork::One(n, a))
                .collect()
        };
        Work {
            rewrite: taken.rewrite,
            nics,
            events: taken.seen,
            ignored: taken.ignored,
        }
    }
}

/// The MAC of NIC device `name` in a `/1.0/devices` answer: its `hwaddr`, lower
/// case, when it is six colon-separated hex pairs (`None` otherwise: old LXD
/// serves no `hwaddr`).
pub fn nic_hwaddr(devices: &Value, name: &str) -> Option<String> {
    let dev = devices.get(name)?;
    if text(dev, "type") != Some("nic") {
        return None;
    }
    let mac = text(dev, "hwaddr")?.to_ascii_lowercase();
    let parts: Vec<&str> = mac.split(':').collect();
    let valid = parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()));
    valid.then_some(mac)
}

/// Every NIC device name and MAC in a `/1.0/devices` answer, sorted by name.
pub fn nic_hwaddrs(devices: &Value) -> Vec<(String, String)> {
    devices
        .as_object()
        .map(|m| {
            m.keys()
                .filter_map(|k| nic_hwaddr(devices, k).map(|mac| (k.clone(), mac)))
                .collect()
        })
        .unwrap_or_default()
}

/// The pause before each reconnection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    next: Duration,
    min: Duration,
    max: Duration,
    failures: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new(BACKOFF_MIN, BACKOFF_MAX)
    }
}

impl Backoff {
    /// Doubling from `min` to `max`.
    pub fn new(min: Duration, max: Duration) -> Self {
        let min = min.max(Duration::from_millis(1));
        Self {
            next: min,
            min,
            max: max.max(min),
            failures: 0,
        }
    }

    /// A connection failed (or ended): how long to wait before the next attempt.
    pub fn failed(&mut self) -> Duration {
        let now = self.next;
        self.next = (self.next * 2).min(self.max);
        self.failures = self.failures.saturating_add(1);
        now
    }

    /// Failures since the last success.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Connected: the next failure waits `min` again.
    pub fn succeeded(&mut self) {
        self.next = self.min;
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_parse() {
        let cases = [
            (
                r#"{"type":"config","timestamp":"2026-01-01T00:00:00Z","metadata":{"key":"user.foo","old_value":"","value":"bar"}}"#,
                Event::Config {
                    key: "user.foo".into(),
                    value: Some("bar".into()),
                },
            ),
            (
                r#"{"type":"device","metadata":{"action":"added","config":{"type":"nic","network":"lxdbr0","name":"eth1"},"name":"eth1"}}"#,
                Event::Device {
                    name: "eth1".into(),
                    action: DeviceAction::Added,
                    nic: true,
                },
            ),
            (
                r#"{"type":"device","metadata":{"action":"removed","config":{"type":"disk","path":"/mnt"},"name":"data"}}"#,
                Event::Device {
                    name: "data".into(),
                    action: DeviceAction::Removed,
                    nic: false,
                },
            ),
            (
                r#"{"type":"device","metadata":{"action":"exploded","name":"eth1"}}"#,
                Event::Other("device eth1 action exploded".into()),
            ),
            (
                r#"{"type":"logging","metadata":{}}"#,
                Event::Other("logging".into()),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text).unwrap(), want, "{text}");
        }
        for (bad, want) in [
            ("not json", "event is not JSON"),
            ("[1]", "event has no type"),
            (
                r#"{"type":"config","metadata":{}}"#,
                "config event has no key",
            ),
            (
                r#"{"type":"device","metadata":{"name":""}}"#,
                "device event has no name",
            ),
        ] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.starts_with(want), "{e}");
        }
        let long = "x".repeat(5000);
        assert!(parse(&long).unwrap_err().to_string().chars().count() < 300);
    }

    #[test]
    fn a_burst_is_one_rewrite_and_one_entry_per_nic() {
        let mut p = Pending::default();
        for i in 0..10_000 {
            p.add(Event::Config {
                key: format!("user.k{}", i % 3),
                value: Some(i.to_string()),
            });
            p.add(Event::Config {
                key: "volatile.x".into(),
                value: None,
            });
        }
        p.add(Event::Device {
            name: "eth1".into(),
            action: DeviceAction::Added,
            nic: true,
        });
        p.add(Event::Device {
            name: "eth1".into(),
            action: DeviceAction::Updated,
            nic: true,
        });
        p.add(Event::Device {
            name: "root".into(),
            action: DeviceAction::Updated,
            nic: false,
        });
        assert_eq!(p.seen(), 20_003);
        let w = p.take();
        assert_eq!(
            w.rewrite,
            Some(vec!["user.k0".into(), "user.k1".into(), "user.k2".into()])
        );
        assert_eq!(w.nics, [NicWork::One("eth1".into(), DeviceAction::Updated)]);
        assert_eq!((w.events, w.ignored), (20_003, 10_001));
        assert!(p.take().is_empty());
        assert_eq!(p.seen(), 0);

        // cloud-init.* counts; a key that is neither does not.
        p.add(Event::Config {
            key: "cloud-init.user-data".into(),
            value: None,
        });
        assert!(p.take().rewrite.is_some());
        p.add(Event::Config {
            key: "security.devlxd".into(),
            value: None,
        });
        assert!(p.take().is_empty());
        p.add_resync();
        assert_eq!(p.take().rewrite, Some(vec![]));
    }

    #[test]
    fn too_many_nic_names_become_every_nic() {
        let mut p = Pending::default();
        for i in 0..10_000 {
            p.add(Event::Device {
                name: format!("nic{i}"),
                action: DeviceAction::Added,
                nic: true,
            });
            assert!(p.nics.len() <= MAX_PENDING_NICS);
        }
        assert_eq!(p.take().nics, [NicWork::All]);
        let mut keys = Pending::default();
        for i in 0..10_000 {
            keys.add(Event::Config {
                key: format!("user.k{i}"),
                value: None,
            });
        }
        assert_eq!(keys.take().rewrite.unwrap().len(), MAX_PENDING_NICS);
    }

    #[test]
    fn hwaddrs_come_from_devices() {
        let devices = json!({
            "eth0": {"type": "nic", "hwaddr": "00:16:3E:AA:BB:CC", "name": "eth0"},
            "eth1": {"type": "nic", "network": "lxdbr0"},
            "eth2": {"type": "nic", "hwaddr": "00:16:3e:aa:bb"},
            "eth3": {"type": "nic", "hwaddr": "zz:16:3e:aa:bb:cc"},
            "root": {"type": "disk", "hwaddr": "00:16:3e:aa:bb:cd"}
        });
        assert_eq!(
            nic_hwaddr(&devices, "eth0").as_deref(),
            Some("00:16:3e:aa:bb:cc")
        );
        for name in ["eth1", "eth2", "eth3", "root", "missing"] {
            assert_eq!(nic_hwaddr(&devices, name), None, "{name}");
        }
        assert_eq!(
            nic_hwaddrs(&devices),
            [("eth0".to_owned(), "00:16:3e:aa:bb:cc".to_owned())]
        );
        assert!(nic_hwaddrs(&json!([1])).is_empty());
    }

    #[test]
    fn backoff_doubles_to_its_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let waits: Vec<u128> = (0..6).map(|_| b.failed().as_millis()).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(b.failures(), 6);
        b.succeeded();
        assert_eq!((b.failed(), b.failures()), (Duration::from_millis(100), 1));
        let mut z = Backoff::new(Duration::ZERO, Duration::ZERO);
        assert_eq!(z.failed(), Duration::from_millis(1));
    }
}

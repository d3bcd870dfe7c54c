// SPDX-License-Identifier: Apache-2.0
//! Pure: one `unmanaged` entry (SPEC §7, §3.9) and how it matches a NIC.
//!
//! Name globs and MACs are decided from the link alone, before any metadata
//! request; `device-number:N`, `network-card:N` and `interface-id:ID` need the
//! NIC's metadata and are decided right after it is read, before anything is
//! planned or applied.

use std::fmt;

use crate::error::BadEntry;
use crate::model::{IfName, MacAddr, NicMetadata, Problem};

/// The longest name glob or interface id taken.
const ENTRY_MAX: usize = 128;

/// One `unmanaged` entry: a NIC named by a name glob, its MAC, or what its
/// metadata says of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unmanaged {
    /// An interface name or an fnmatch glob of one (`eth*`, `ens[5-9]`, `?`).
    Name(String),
    /// A MAC address.
    Mac(MacAddr),
    /// `device-number:N`: the NIC's attachment index on its card.
    DeviceNumber(u32),
    /// `network-card:N`: the network card (0 where the metadata names none).
    NetworkCard(u32),
    /// `interface-id:ID`: the provider's id of the NIC (EC2's ENI id, Oracle's
    /// VNIC OCID, ...).
    InterfaceId(String),
}

impl Unmanaged {
    /// Whether this entry names the NIC `name` with MAC `mac`. The forms that
    /// need the metadata never match here ([`Self::matches_nic`]).
    pub fn matches(&self, name: &IfName, mac: Option<MacAddr>) -> bool {
        match self {
            Self::Name(glob) => glob_match(glob.as_bytes(), name.as_str().as_bytes()),
            Self::Mac(m) => mac == Some(*m),
            Self::DeviceNumber(_) | Self::NetworkCard(_) | Self::InterfaceId(_) => false,
        }
    }

    /// Whether this entry needs the NIC's metadata to decide.
    pub fn needs_metadata(&self) -> bool {
        !matches!(self, Self::Name(_) | Self::Mac(_))
    }

    /// Whether this entry names the NIC the metadata describes as `nic`:
    /// `Some(true)` or `Some(false)`, or `None` when the metadata does not say
    /// (no device-number yet, no interface id). Name and MAC forms: `Some(false)`.
    pub fn matches_nic(&self, nic: &NicMetadata) -> Option<bool> {
        match self {
            Self::Name(_) | Self::Mac(_) => Some(false),
            Self::DeviceNumber(n) => nic.device_number.map(|d| d == *n),
            // The planner's reading: no network-card is card 0, once the NIC's
            // position is known at all.
            Self::NetworkCard(n) => nic
                .device_number
                .map(|_| nic.network_card.unwrap_or(0) == *n),
            Self::InterfaceId(id) => nic.interface_id.as_ref().map(|i| i == id),
        }
    }
}

impl fmt::Display for Unmanaged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Name(n) => f.write_str(n),
            Self::Mac(m) => m.fmt(f),
            Self::DeviceNumber(n) => write!(f, "device-number:{n}"),
            Self::NetworkCard(n) => write!(f, "network-card:{n}"),
            Self::InterfaceId(id) => write!(f, "interface-id:{id}"),
        }
    }
}

impl serde::Serialize for Unmanaged {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Unmanaged {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl std::str::FromStr for Unmanaged {
    type Err = BadEntry;
    fn from_str(s: &str) -> Result<Self, BadEntry> {
        let number = |v: &str, what: &str| {
            v.parse::<u32>().map_err(|_| {
                BadEntry::Form(Problem::bad(format!("{what}: expected a whole number"), v))
            })
        };
        if let Some(v) = s.strip_prefix("device-number:") {
            return number(v, "device-number").map(Self::DeviceNumber);
        }
        if let Some(v) = s.strip_prefix("network-card:") {
            return number(v, "network-card").map(Self::NetworkCard);
        }
        if let Some(v) = s.strip_prefix("interface-id:") {
            let ok = !v.is_empty()
                && v.len() <= ENTRY_MAX
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'));
            return if ok {
                Ok(Self::InterfaceId(v.to_owned()))
            } else {
                Err(BadEntry::Form(Problem::bad(
                    "interface-id: expected the provider's NIC id, A-Z a-z 0-9 - _ . :",
                    v,
                )))
            };
        }
        if s.contains(':') {
            return s.parse().map(Self::Mac).map_err(BadEntry::Mac);
        }
        check_glob(s)
            .map(|()| Self::Name(s.to_owned()))
            .map_err(BadEntry::Form)
    }
}

/// A name glob: the bytes of an interface name, `*`, `?` and closed `[...]`
/// classes (`!` or `^` negates, `a-z` ranges).
fn check_glob(s: &str) -> Result<(), Problem> {
    let form = "an interface name or glob (eth*, ens[5-9]), a MAC, device-number:N, \
                network-card:N or interface-id:ID";
    if s.is_empty() || s.len() > ENTRY_MAX {
        return Err(Problem::bad(format!("expected {form}"), s));
    }
    if !s.bytes().all(|b| {
        b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'_' | b'.' | b'*' | b'?' | b'[' | b']' | b'!' | b'^'
            )
    }) {
        return Err(Problem::bad(
            format!("expected {form}; a name holds only A-Z a-z 0-9 - _ . and a glob * ? [...]"),
            s,
        ));
    }
    let b = s.as_bytes();
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        i = if c == b'[' {
            class_end(b, i)
                .ok_or_else(|| Problem::bad(format!("expected {form}: an unclosed ["), s))?
        } else {
            i + 1
        };
    }
    Ok(())
}

/// The index after the `]` closing the class that opens at `b[open]`.
fn class_end(b: &[u8], open: usize) -> Option<usize> {
    let mut i = open + 1;
    if matches!(b.get(i), Some(b'!' | b'^')) {
        i += 1;
    }
    // A `]` first in the class is a member.
    if b.get(i) == Some(&b']') {
        i += 1;
    }
    let k = b.get(i..)?.iter().position(|c| *c == b']')?;
    Some(i + k + 1)
}

/// Whether `c` is in the class whose text between `[` and `]` is `body`.
fn in_class(body: &[u8], c: u8) -> bool {
    let (negated, mut rest) = match body.split_first() {
        Some((b'!' | b'^', r)) => (true, r),
        _ => (false, body),
    };
    let mut found = false;
    while let Some((&lo, tail)) = rest.split_first() {
        if let [b'-', hi, more @ ..] = tail {
            found |= (lo..=*hi).contains(&c);
            rest = more;
        } else {
            found |= lo == c;
            rest = tail;
        }
    }
    found != negated
}

/// fnmatch(3) without flags on bytes: `*` any run, `?` any one byte, `[...]`
/// a class; everything else itself. An unclosed `[` is itself.
pub fn glob_match(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    // Where to go on after the last `*`: the pattern after it, and the name
    // position it has swallowed up to.
    let mut star: Option<(usize, usize)> = None;
    while let Some(&c) = name.get(n) {
        let step = match pattern.get(p) {
            Some(b'*') => {
                star = Some((p + 1, n));
                p += 1;
                continue;
            }
            Some(b'?') => Some(p + 1),
            Some(b'[') => match class_end(pattern, p) {
                Some(end) => pattern
                    .get(p + 1..end - 1)
                    .is_some_and(|body| in_class(body, c))
                    .then_some(end),
                None => (c == b'[').then_some(p + 1),
            },
            Some(&q) => (q == c).then_some(p + 1),
            None => None,
        };
        match (step, star) {
            (Some(next), _) => {
                p = next;
                n += 1;
            }
            (None, Some((after, swallowed))) => {
                star = Some((after, swallowed + 1));
                p = after;
                n = swallowed + 1;
            }
            (None, None) => return false,
        }
    }
    pattern
        .get(p..)
        .is_some_and(|rest| rest.iter().all(|c| *c == b'*'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_fnmatch_does() {
        for (pattern, name, want) in [
            ("eth0", "eth0", true),
            ("eth0", "eth01", false),
            ("eth*", "eth0", true),
            ("eth*", "eth", true),
            ("eth*", "ens5", false),
            ("*", "veth1a2b", true),
            ("veth*", "veth1a2b", true),
            ("?", "a", true),
            ("?", "ab", false),
            ("?", "", false),
            ("ens[5-9]", "ens5", true),
            ("ens[5-9]", "ens9", true),
            ("ens[5-9]", "ens4", false),
            ("ens[5-9]", "ens10", false),
            ("ens[!5-9]", "ens4", true),
            ("ens[^5-9]", "ens5", false),
            ("e[tn][hs]*", "ens5", true),
            ("e[]x]", "e]", true),
            ("e[!]]", "e]", false),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "aXbYcZ", false),
            ("*c", "abcbc", true),
            ("e[t", "e[t", true),
            ("e[t", "et", false),
            ("*.*", "eth0.100", true),
            ("**", "", true),
        ] {
            assert_eq!(
                glob_match(pattern.as_bytes(), name.as_bytes()),
                want,
                "{pattern} ~ {name}"
            );
        }
    }

    #[test]
    fn entries_parse_and_show_as_written() {
        for text in [
            "eth1",
            "eth*",
            "ens[5-9]",
            "?",
            "02:00:00:00:00:09",
            "device-number:2",
            "network-card:1",
            "interface-id:eni-0123456789abcdef0",
            "interface-id:ocid1.vnic.oc1.phx.abc",
        ] {
            let u: Unmanaged = text.parse().unwrap();
            assert_eq!(u.to_string(), text);
        }
        for (bad, says) in [
            ("", "an interface name or glob"),
            ("eth0; reboot", "a name holds only"),
            ("ens[5-9", "unclosed ["),
            ("device-number:x", "device-number: expected a whole number"),
            ("network-card:-1", "network-card: expected a whole number"),
            ("interface-id:", "interface-id: expected"),
            ("interface-id:eni 1", "interface-id: expected"),
            ("02:00:00", "a MAC is six"),
        ] {
            let e = bad.parse::<Unmanaged>().unwrap_err().to_string();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }

    #[test]
    fn metadata_forms_match_only_with_metadata() {
        let mac: MacAddr = "02:00:00:00:00:02".parse().unwrap();
        let name = IfName::try_new("eth1").unwrap();
        let mut nic = NicMetadata::empty(mac);
        for text in ["device-number:1", "network-card:0", "interface-id:eni-2"] {
            let u: Unmanaged = text.parse().unwrap();
            assert!(u.needs_metadata());
            assert!(!u.matches(&name, Some(mac)), "{text}");
            assert_eq!(
                u.matches_nic(&nic),
                None,
                "{text}: the metadata says nothing yet"
            );
        }
        nic.device_number = Some(1);
        nic.interface_id = Some("eni-2".to_owned());
        let m = |t: &str, nic: &NicMetadata| t.parse::<Unmanaged>().unwrap().matches_nic(nic);
        assert_eq!(m("device-number:1", &nic), Some(true));
        assert_eq!(m("device-number:0", &nic), Some(false));
        // No network-card in the metadata: card 0, as the planner reads it.
        assert_eq!(m("network-card:0", &nic), Some(true));
        assert_eq!(m("network-card:1", &nic), Some(false));
        nic.network_card = Some(1);
        assert_eq!(m("network-card:1", &nic), Some(true));
        assert_eq!(m("interface-id:eni-2", &nic), Some(true));
        assert_eq!(m("interface-id:eni-3", &nic), Some(false));
        let by_name: Unmanaged = "eth*".parse().unwrap();
        assert!(!by_name.needs_metadata());
        assert!(by_name.matches(&name, None));
        assert_eq!(by_name.matches_nic(&nic), Some(false));
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Pure: busybox udhcpc's script event and environment → [`LeaseEvent`].
//!
//! udhcpc *executes* its script (`udhcpc -s FILE`) with the event as the first
//! argument — `deconfig`, `bound`, `renew`, `leasefail`, `nak` — and the lease in the
//! environment: `interface`, `ip`, `subnet` (dotted netmask), `mask` (its prefix
//! length, busybox ≥ 1.24), `router` (space-separated), and `dns`, `domain`, `lease`,
//! `serverid`, ... which leasehook does not read. udhcpc only speaks DHCPv4 (its
//! DHCPv6 sibling `udhcpc6` has different variables and is not supported).
//!
//! | event | leasehook |
//! |---|---|
//! | `bound`, `renew` | apply the IPv4 lease |
//! | `deconfig` | remove IPv4 (udhcpc sends it at start, when the lease is lost, after a NAK and on release) |
//! | `leasefail` | remove IPv4, as dhclient's `FAIL` does (no lease could be had) |
//! | `nak` | nothing (udhcpc sends `deconfig` next) |

use super::{Env, Vars};
use crate::error::{Problem, Result};
use crate::model::{Family, Lease, LeaseEvent, Reason};

const SOURCE: &str = "udhcpc";

/// The events udhcpc passes its script as the first argument.
pub const EVENTS: &[&str] = &["deconfig", "bound", "renew", "leasefail", "nak"];

/// What an udhcpc event asks of leasehook.
enum Event {
    /// Handle a lease event with this reason.
    Handle(Reason),
    /// Nothing (`nak`: udhcpc sends `deconfig` next).
    Nothing,
}

/// Maps udhcpc's event; `None` for an event udhcpc does not send.
fn event_of(event: &str) -> Option<Event> {
    Some(match event {
        "bound" => Event::Handle(Reason::Bound),
        "renew" => Event::Handle(Reason::Renew),
        "deconfig" => Event::Handle(Reason::Release),
        "leasefail" => Event::Handle(Reason::Fail),
        "nak" => Event::Nothing,
        _ => return None,
    })
}

/// Parses one udhcpc script run: `event` is the script's first argument, `env` its
/// environment. Returns the events leasehook acts on: none for `nak`.
pub fn parse(event: &str, env: &Env) -> Result<Vec<LeaseEvent>> {
    let vars = Vars {
        source: SOURCE,
        env,
    };
    let reason = match event_of(event) {
        None => {
            return Err(vars.err(
                "event (argument 1)",
                Problem::bad("unknown udhcpc event", event),
            ));
        }
        Some(Event::Nothing) => return Ok(Vec::new()),
        Some(Event::Handle(reason)) => reason,
    };
    let interface = vars.ifname("interface")?;
    let new = match reason {
        Reason::Bound | Reason::Renew => Some(lease(&vars, reason)?),
        _ => None,
    };
    Ok(vec![LeaseEvent {
        interface,
        family: Family::V4,
        reason,
        new,
        old: None,
    }])
}

fn lease(vars: &Vars<'_>, reason: Reason) -> Result<Lease> {
    let lease = vars.lease_v4(reason, ["ip", "subnet", "router"])?;
    if let Some(mask) = vars.opt("mask") {
        // busybox sets both; a `mask` that disagrees with `subnet` is not udhcpc's.
        if mask.parse::<u8>().ok() != Some(lease.prefix_len) {
            return Err(vars.err(
                "mask",
                Problem::bad(
                    format!("not the prefix length of subnet (/{})", lease.prefix_len),
                    mask,
                ),
            ));
        }
    }
    vars.usable("ip", lease)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::env;
    use crate::model::Action;

    /// What busybox 1.35's udhcpc exported for `bound` in the end-to-end world.
    const BOUND: &[(&str, &str)] = &[
        ("interface", "eth1"),
        ("ip", "10.98.1.20"),
        ("subnet", "255.255.255.0"),
        ("mask", "24"),
        ("router", "10.98.1.1"),
        ("broadcast", "10.98.1.255"),
        ("domain", "bad"),
        ("lease", "120"),
        ("serverid", "10.98.1.1"),
        ("siaddr", "10.98.1.1"),
        ("opt53", "05"),
    ];

    #[test]
    fn events() {
        let bound = parse("bound", &env(BOUND)).unwrap();
        assert_eq!(bound.len(), 1);
        let ev = &bound[0];
        let new = ev.new.as_ref().unwrap();
        assert_eq!(
            (
                ev.interface.as_str(),
                ev.family,
                ev.action(),
                new.address.to_string(),
                new.prefix_len,
                new.routers.len()
            ),
            (
                "eth1",
                Family::V4,
                Action::Apply,
                "10.98.1.20".into(),
                24,
                1
            )
        );
        assert_eq!(
            parse("renew", &env(BOUND)).unwrap()[0].reason,
            Reason::Renew
        );
        let deconfig = parse("deconfig", &env(&[("interface", "eth1")])).unwrap();
        assert_eq!(
            (deconfig[0].action(), deconfig[0].new.is_none()),
            (Action::Remove, true)
        );
        assert_eq!(parse("nak", &env(&[])).unwrap(), Vec::new());
        let fail = parse("leasefail", &env(&[("interface", "eth1")])).unwrap();
        assert_eq!(fail[0].action(), Action::Remove);
        // No `mask` (busybox before 1.24): `subnet` alone is enough.
        let mut old = env(BOUND);
        old.remove("mask");
        assert_eq!(
            parse("bound", &old).unwrap()[0]
                .new
                .as_ref()
                .unwrap()
                .prefix_len,
            24
        );
        // No router option: no routers.
        let mut bare = env(BOUND);
        bare.remove("router");
        assert!(
            parse("bound", &bare).unwrap()[0]
                .new
                .as_ref()
                .unwrap()
                .routers
                .is_empty()
        );
    }

    #[test]
    fn bad_values_name_the_variable() {
        let e = parse("BOUND", &env(BOUND)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "udhcpc variable event (argument 1): unknown udhcpc event (got \"BOUND\")"
        );
        let mut m = env(BOUND);
        m.insert("mask".into(), "16".into());
        assert_eq!(
            parse("bound", &m).unwrap_err().to_string(),
            "udhcpc variable mask: not the prefix length of subnet (/24) (got \"16\")"
        );
        let mut missing = env(BOUND);
        missing.remove("ip");
        assert_eq!(
            parse("bound", &missing).unwrap_err().to_string(),
            "udhcpc variable ip: missing"
        );
    }

    #[test]
    fn hostile_values_in_every_variable_are_refused() {
        for var in ["interface", "ip", "subnet", "mask", "router"] {
            for hostile in [
                "$(touch /tmp/pwned)",
                "`id`",
                "eth1; reboot",
                "10.98.1.20\nip=10.0.0.1",
                "../../etc/passwd",
                "10.98.1.20 $(id)",
            ] {
                let mut e = env(BOUND);
                e.insert(var.to_owned(), hostile.to_owned());
                let err = parse("bound", &e).unwrap_err().to_string();
                assert!(
                    err.starts_with(&format!("udhcpc variable {var}: ")),
                    "{var}={hostile:?}: {err}"
                );
                // Escaped: a newline cannot start a forged log line.
                assert!(!err.contains('\n'), "{err}");
            }
        }
        for hostile in ["bound;id", "$(id)", "bound\nrenew", ""] {
            assert!(parse(hostile, &env(BOUND)).is_err(), "{hostile:?}");
        }
        // Variables leasehook does not read cannot hurt it.
        let mut e = env(BOUND);
        e.insert("domain".into(), "$(touch /tmp/pwned)".into());
        e.insert("dns".into(), "`id`".into());
        assert!(parse("bound", &e).is_ok());
    }
}

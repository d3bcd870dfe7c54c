// SPDX-License-Identifier: Apache-2.0
//! Pure: a NetworkManager dispatcher script's arguments and environment →
//! [`LeaseEvent`]s.
//!
//! NetworkManager's dispatcher (`nm-dispatcher`) runs every script in
//! `/etc/NetworkManager/dispatcher.d/` with the interface and the action as
//! arguments, and an environment it builds from scratch: `PATH`, `CONNECTION_UUID`,
//! `CONNECTION_ID`, `DEVICE_IFACE`, `DEVICE_IP_IFACE`, the IP configuration
//! (`IP4_ADDRESS_0`, `IP4_GATEWAY`, ...) and the DHCP lease's options as
//! `DHCP4_<OPTION>` and `DHCP6_<OPTION>` (`DHCP4_IP_ADDRESS`, `DHCP4_SUBNET_MASK`,
//! `DHCP4_ROUTERS`, `DHCP6_IP6_ADDRESS`), as a dump of NetworkManager 1.42 with its
//! internal DHCP client shows.
//!
//! Only the `DHCP4_*`/`DHCP6_*` variables are a lease. An address in `IP4_ADDRESS_*`
//! without them is static configuration, which leasehook leaves alone.
//!
//! | action | leasehook |
//! |---|---|
//! | `up`, `reapply` | apply each family that has a DHCP lease (`DHCP4_IP_ADDRESS`, `DHCP6_IP6_ADDRESS`) |
//! | `dhcp4-change` | apply the DHCPv4 lease (NetworkManager sends it for each renewal); nothing without `DHCP4_IP_ADDRESS` |
//! | `dhcp6-change` | the same for DHCPv6 |
//! | `down`, `pre-down` | remove both families |
//! | `pre-up`, `vpn-up`, `vpn-pre-up`, `vpn-down`, `vpn-pre-down`, `hostname`, `connectivity-change` | nothing |

use super::{Env, Vars};
use crate::error::{Problem, Result};
use crate::model::{Family, IfName, Lease, LeaseEvent, Reason};

const SOURCE: &str = "NetworkManager";

/// The actions NetworkManager's dispatcher passes as the second argument.
pub const ACTIONS: &[&str] = &[
    "up",
    "down",
    "pre-up",
    "pre-down",
    "vpn-up",
    "vpn-down",
    "vpn-pre-up",
    "vpn-pre-down",
    "hostname",
    "dhcp4-change",
    "dhcp6-change",
    "connectivity-change",
    "reapply",
];

/// What a dispatcher run tells leasehook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NmEvent {
    /// `CONNECTION_UUID`, for log lines.
    pub connection_uuid: Option<String>,
    /// The events to handle, in order; empty when the action needs nothing.
    pub events: Vec<LeaseEvent>,
}

/// Parses one dispatcher run: `iface` and `action` are the script's two arguments,
/// `env` its environment.
pub fn parse(iface: &str, action: &str, env: &Env) -> Result<NmEvent> {
    let vars = Vars {
        source: SOURCE,
        env,
    };
    if !ACTIONS.contains(&action) {
        return Err(vars.err(
            "action (argument 2)",
            Problem::bad("unknown NetworkManager dispatcher action", action),
        ));
    }
    let none = NmEvent {
        connection_uuid: None,
        events: Vec::new(),
    };
    if !matches!(
        action,
        "up" | "reapply" | "dhcp4-change" | "dhcp6-change" | "down" | "pre-down"
    ) {
        // `hostname` and `connectivity-change` come with no interface (`none`, "").
        return Ok(none);
    }
    let interface = IfName::try_new(iface).map_err(|p| vars.err("interface (argument 1)", p))?;
    for var in ["DEVICE_IP_IFACE", "DEVICE_IFACE"] {
        if vars.opt(var).is_some() {
            vars.ifname(var)?;
        }
    }
    if let Some(ip_iface) = vars
        .opt("DEVICE_IP_IFACE")
        .filter(|i| *i != interface.as_str())
    {
        return Err(vars.err(
            "DEVICE_IP_IFACE",
            Problem::bad(
                format!("is not the interface argument ({interface})"),
                ip_iface,
            ),
        ));
    }
    let connection_uuid = vars
        .opt("CONNECTION_UUID")
        .map(|u| {
            is_uuid(u)
                .then(|| u.to_owned())
                .ok_or_else(|| vars.err("CONNECTION_UUID", Problem::bad("not a UUID", u)))
        })
        .transpose()?;
    let v4 = dhcp4(&vars)?;
    let v6 = dhcp6(&vars)?;
    let event = |family: Family, reason: Reason, new: Option<Lease>| LeaseEvent {
        interface: interface.clone(),
        family,
        reason,
        new,
        old: None,
    };
    let mut events = Vec::new();
    match action {
        "up" | "reapply" => {
            if let Some(l) = v4 {
                events.push(event(Family::V4, Reason::Bound, Some(l)));
            }
            if let Some(l) = v6 {
                events.push(event(Family::V6, Reason::Bound, Some(l)));
            }
        }
        // NetworkManager 1.42 sends a `dhcp4-change` without any `DHCP4_*` when a
        // connection starts, before `up`: no lease there is not a lost lease. A lease
        // that cannot be renewed ends the connection, which sends `down`.
        "dhcp4-change" => events.extend(v4.map(|l| event(Family::V4, Reason::Renew, Some(l)))),
        "dhcp6-change" => events.extend(v6.map(|l| event(Family::V6, Reason::Renew, Some(l)))),
        _ => {
            events.push(event(Family::V4, Reason::Stop, None));
            events.push(event(Family::V6, Reason::Stop, None));
        }
    }
    Ok(NmEvent {
        connection_uuid,
        events,
    })
}

/// The DHCPv4 lease, `None` when `DHCP4_IP_ADDRESS` is unset.
fn dhcp4(vars: &Vars<'_>) -> Result<Option<Lease>> {
    vars.lease_if_set("DHCP4_IP_ADDRESS", |address| {
        let lease = vars.lease_v4(
            Reason::Bound,
            [address, "DHCP4_SUBNET_MASK", "DHCP4_ROUTERS"],
        )?;
        vars.usable(address, lease)
    })
}

/// The DHCPv6 address, `None` when `DHCP6_IP6_ADDRESS` is unset.
fn dhcp6(vars: &Vars<'_>) -> Result<Option<Lease>> {
    vars.lease_if_set("DHCP6_IP6_ADDRESS", |address| {
        vars.usable(address, vars.ia_na(Reason::Bound, address)?)
    })
}

/// `8-4-4-4-12` hexadecimal digits.
fn is_uuid(u: &str) -> bool {
    let groups: Vec<&str> = u.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::env;
    use crate::model::Action;

    /// NetworkManager 1.42's `eth1 up` in the end-to-end world (less the
    /// `DHCP4_REQUESTED_*` flags).
    const UP: &[(&str, &str)] = &[
        ("CONNECTION_ID", "leasehook-eth1"),
        ("CONNECTION_UUID", "8d3e1f8a-9a57-4c1e-9d51-1c2b3a4d5e61"),
        ("DEVICE_IFACE", "eth1"),
        ("DEVICE_IP_IFACE", "eth1"),
        ("DHCP4_BROADCAST_ADDRESS", "10.98.1.255"),
        ("DHCP4_DHCP_LEASE_TIME", "120"),
        (
            "DHCP4_DOMAIN_NAME",
            "\\036\\040touch \\047tmp\\047pwned\\041\\059\\096id\\096",
        ),
        ("DHCP4_EXPIRY", "1796040611"),
        ("DHCP4_IP_ADDRESS", "10.98.1.20"),
        ("DHCP4_ROUTERS", "10.98.1.1"),
        ("DHCP4_SUBNET_MASK", "255.255.255.0"),
        ("IP4_ADDRESS_0", "10.98.1.20/24 10.98.1.1"),
        ("IP4_GATEWAY", "10.98.1.1"),
        ("IP4_NUM_ADDRESSES", "1"),
        ("NM_DISPATCHER_ACTION", "up"),
    ];

    fn kinds(ev: &NmEvent) -> Vec<(Family, Action, bool)> {
        ev.events
            .iter()
            .map(|e| (e.family, e.action(), e.new.is_some()))
            .collect()
    }

    #[test]
    fn actions() {
        let up = parse("eth1", "up", &env(UP)).unwrap();
        assert_eq!(
            up.connection_uuid.as_deref(),
            Some("8d3e1f8a-9a57-4c1e-9d51-1c2b3a4d5e61")
        );
        assert_eq!(kinds(&up), [(Family::V4, Action::Apply, true)]);
        let l = up.events[0].new.as_ref().unwrap();
        assert_eq!(
            (l.address.to_string(), l.prefix_len, l.routers.len()),
            ("10.98.1.20".into(), 24, 1)
        );
        let mut both = env(UP);
        both.insert("DHCP6_IP6_ADDRESS".into(), "fd00:98:1::20".into());
        assert_eq!(
            kinds(&parse("eth1", "up", &both).unwrap()),
            [
                (Family::V4, Action::Apply, true),
                (Family::V6, Action::Apply, true)
            ]
        );
        let six = parse("eth1", "dhcp6-change", &both).unwrap();
        assert_eq!(six.events[0].new.as_ref().unwrap().prefix_len, 128);
        assert_eq!(
            kinds(&parse("eth1", "dhcp4-change", &env(UP)).unwrap()),
            [(Family::V4, Action::Apply, true)]
        );
        // A DHCP change without a lease (NetworkManager 1.42 sends one as a
        // connection starts, before `up`) needs nothing.
        let lost = env(&[("DEVICE_IP_IFACE", "eth1")]);
        assert_eq!(
            parse("eth1", "dhcp4-change", &lost).unwrap().events,
            Vec::new()
        );
        assert_eq!(
            parse("eth1", "dhcp6-change", &lost).unwrap().events,
            Vec::new()
        );
        for down in ["down", "pre-down"] {
            assert_eq!(
                kinds(&parse("eth1", down, &lost).unwrap()),
                [
                    (Family::V4, Action::Remove, false),
                    (Family::V6, Action::Remove, false)
                ]
            );
        }
        // Static configuration only: not a lease.
        let stat = env(&[("IP4_ADDRESS_0", "10.0.0.5/24 10.0.0.1")]);
        assert_eq!(parse("eth1", "up", &stat).unwrap().events, Vec::new());
        // Actions without an interface, or that need nothing.
        assert_eq!(
            parse("none", "hostname", &env(&[])).unwrap().events,
            Vec::new()
        );
        assert_eq!(
            parse("", "connectivity-change", &env(&[])).unwrap().events,
            Vec::new()
        );
        for a in ["pre-up", "vpn-up", "vpn-down", "vpn-pre-up", "vpn-pre-down"] {
            assert_eq!(
                parse("eth1", a, &env(UP)).unwrap().events,
                Vec::new(),
                "{a}"
            );
        }
    }

    #[test]
    fn bad_values_name_the_variable() {
        for (iface, action, vars, want) in [
            (
                "eth1",
                "UP",
                UP,
                "NetworkManager variable action (argument 2): unknown NetworkManager dispatcher action (got \"UP\")",
            ),
            (
                "eth1;id",
                "up",
                UP,
                "NetworkManager variable interface (argument 1): interface name may only hold A-Z a-z 0-9 - _ . (got \"eth1;id\")",
            ),
            (
                "eth0",
                "up",
                UP,
                "NetworkManager variable DEVICE_IP_IFACE: is not the interface argument (eth0) (got \"eth1\")",
            ),
            (
                "eth1",
                "up",
                &[("DHCP4_IP_ADDRESS", "10.98.1.20")],
                "NetworkManager variable DHCP4_SUBNET_MASK: missing",
            ),
        ] {
            assert_eq!(
                parse(iface, action, &env(vars)).unwrap_err().to_string(),
                want
            );
        }
    }

    #[test]
    fn hostile_values_in_every_variable_are_refused() {
        let mut base = env(UP);
        base.insert("DHCP6_IP6_ADDRESS".into(), "fd00:98:1::20".into());
        assert!(parse("eth1", "up", &base).is_ok());
        let hostile = [
            "$(touch /tmp/pwned)",
            "`id`",
            "eth1; reboot",
            "10.98.1.20\nDHCP4_IP_ADDRESS=10.0.0.1",
            "../../etc/passwd",
            "10.98.1.1 $(id)",
        ];
        for var in [
            "CONNECTION_UUID",
            "DEVICE_IFACE",
            "DEVICE_IP_IFACE",
            "DHCP4_IP_ADDRESS",
            "DHCP4_SUBNET_MASK",
            "DHCP4_ROUTERS",
            "DHCP6_IP6_ADDRESS",
        ] {
            for h in hostile {
                let mut e = base.clone();
                e.insert(var.to_owned(), h.to_owned());
                let err = parse("eth1", "up", &e).unwrap_err().to_string();
                assert!(
                    err.starts_with(&format!("NetworkManager variable {var}: ")),
                    "{var}={h:?}: {err}"
                );
                assert!(!err.contains('\n'), "{err}");
            }
        }
        for h in hostile {
            let err = parse(h, "up", &base).unwrap_err().to_string();
            assert!(
                err.starts_with("NetworkManager variable interface (argument 1): "),
                "{err}"
            );
            assert!(parse("eth1", h, &base).is_err(), "{h:?}");
        }
        // Variables leasehook does not read cannot hurt it.
        let mut e = base.clone();
        e.insert("IP4_ADDRESS_0".into(), "$(touch /tmp/pwned)".into());
        e.insert("CONNECTION_ID".into(), "`id`".into());
        assert!(parse("eth1", "up", &e).is_ok());
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Pure: systemd-networkd's DHCPv4 lease file and networkd-dispatcher's script
//! environment → [`LeaseEvent`] (SPEC §6.2).
//!
//! networkd-dispatcher runs a script per link state with `IFACE`, `STATE`,
//! `IP_ADDRS`, `IP6_ADDRS`, `AdministrativeState` and `OperationalState` set; the
//! lease itself (address, netmask, router) is only in
//! `/run/systemd/netif/leases/<ifindex>`, a `KEY=VALUE` file.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::{Env, Vars, parse_env_dump};
use crate::error::{Problem, Result};
use crate::model::{Family, IfName, Lease, LeaseEvent, Reason};

/// Parses a networkd DHCPv4 lease file (`ADDRESS`, `NETMASK`, `ROUTER`; other keys
/// are ignored).
pub fn parse_lease_file(text: &str) -> Result<Lease> {
    let env = parse_env_dump("networkd lease file", text)?;
    let vars = Vars {
        source: "networkd lease",
        env: &env,
    };
    let lease = vars.lease_v4(Reason::Bound, ["ADDRESS", "NETMASK", "ROUTER"])?;
    vars.usable("ADDRESS", lease)
}

/// What networkd-dispatcher told a script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DispatcherEvent {
    /// `IFACE`: the link.
    pub iface: IfName,
    /// `STATE`: the state whose scripts run (operational or administrative).
    pub state: String,
    /// `AdministrativeState`, when set.
    pub administrative_state: Option<String>,
    /// `OperationalState`, when set.
    pub operational_state: Option<String>,
    /// `IP_ADDRS`: the link's IPv4 addresses.
    pub ip_addrs: Vec<IpAddr>,
    /// `IP6_ADDRS`: the link's global IPv6 addresses.
    pub ip6_addrs: Vec<std::net::Ipv6Addr>,
    /// From `json` (networkctl's status of the link): the `.network` file networkd
    /// configured the link with, for log lines.
    pub network_file: Option<String>,
}

/// The states networkd reports (operational, then administrative).
const STATES: &[&str] = &[
    "missing",
    "off",
    "no-carrier",
    "dormant",
    "degraded-carrier",
    "carrier",
    "degraded",
    "enslaved",
    "routable",
    "pending",
    "initialized",
    "configuring",
    "configured",
    "unmanaged",
    "failed",
    "linger",
];

/// Parses networkd-dispatcher's environment. An unknown state is an error: the
/// dispatcher only runs scripts for the states above.
pub fn parse_dispatcher(env: &Env) -> Result<DispatcherEvent> {
    let vars = Vars {
        source: "networkd-dispatcher",
        env,
    };
    let state_of = |var: &str| -> Result<Option<String>> {
        vars.opt(var)
            .map(|s| {
                if STATES.contains(&s) {
                    Ok(s.to_owned())
                } else {
                    Err(vars.err(var, Problem::bad("unknown networkd state", s)))
                }
            })
            .transpose()
    };
    Ok(DispatcherEvent {
        iface: vars.ifname("IFACE")?,
        state: state_of("STATE")?.ok_or_else(|| vars.err("STATE", Problem::missing()))?,
        administrative_state: state_of("AdministrativeState")?,
        operational_state: state_of("OperationalState")?,
        ip_addrs: vars.ipv4_list("IP_ADDRS")?,
        ip6_addrs: vars.ipv6_list("IP6_ADDRS")?,
        network_file: vars.opt("json").and_then(network_file),
    })
}

/// The `Network File` networkctl reports in networkd-dispatcher's `json` variable
/// (a list of one path). Informational only: a `json` that does not parse, or a
/// value that is not a plain path, is ignored rather than refused.
fn network_file(json: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let file = v.get("Network File")?.get(0)?.as_str()?;
    (file.starts_with('/') && file.len() < 256 && file.chars().all(|c| !c.is_control()))
        .then(|| file.to_owned())
}

/// What a dispatcher state change asks of leasehook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dispatch {
    /// `routable`: apply the DHCPv4 lease (read from networkd's lease file).
    ApplyLease,
    /// Remove these families' policy routing (`off`, `no-carrier`; `degraded` once
    /// the link has no IPv4 address left).
    Remove(Vec<Family>),
    /// Nothing to do for this state.
    Ignore,
}

impl DispatcherEvent {
    /// What this state change asks for (SPEC §6.2):
    ///
    /// * `routable`: the DHCPv4 lease is in force: apply it.
    /// * `off`, `no-carrier`: the link is gone or unplugged: remove both families.
    /// * `degraded` without an IPv4 address in `IP_ADDRS`: the DHCP address was lost
    ///   (the lease expired or was released): remove IPv4, whose rules name an
    ///   address the link no longer has. `degraded` with an IPv4 address left (only
    ///   IPv6 went away, say) changes nothing.
    /// * Any other state (carrier, dormant, the administrative states) is ignored.
    pub fn dispatch(&self) -> Dispatch {
        match self.state.as_str() {
            "routable" => Dispatch::ApplyLease,
            "off" | "no-carrier" => Dispatch::Remove(vec![Family::V4, Family::V6]),
            "degraded" if self.ip_addrs.is_empty() => Dispatch::Remove(vec![Family::V4]),
            _ => Dispatch::Ignore,
        }
    }

    /// The lease event for applying `lease` (from the lease file) on this link.
    pub fn bound(&self, lease: Lease) -> LeaseEvent {
        LeaseEvent {
            interface: self.iface.clone(),
            family: Family::V4,
            reason: Reason::Bound,
            new: Some(lease),
            old: None,
        }
    }

    /// The lease event for removing `family` from this link.
    pub fn removal(&self, family: Family) -> LeaseEvent {
        let reason = if self.state == "degraded" {
            Reason::Expire
        } else {
            Reason::Stop
        };
        LeaseEvent {
            interface: self.iface.clone(),
            family,
            reason,
            new: None,
            old: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Action;

    #[test]
    fn lease_file() {
        let l = parse_lease_file(
            "# This is private data. Do not parse.\nADDRESS=10.99.0.51\nNETMASK=255.255.255.0\nROUTER=10.99.0.1\nLIFETIME=120\n",
        )
        .unwrap();
        assert_eq!(
            (l.address.to_string(), l.prefix_len, l.routers.len()),
            ("10.99.0.51".into(), 24, 1)
        );
        let e = parse_lease_file("ADDRESS=10.99.0.51\n").unwrap_err();
        assert_eq!(e.to_string(), "networkd lease variable NETMASK: missing");
    }

    #[test]
    fn dispatcher_states() {
        let base: Env = [
            ("IFACE", "eth1"),
            ("STATE", "routable"),
            ("IP_ADDRS", "10.0.1.20 10.0.1.21"),
            ("IP6_ADDRS", ""),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        let with = |state: &str, ip_addrs: &str| {
            let mut e = base.clone();
            e.insert("STATE".into(), state.into());
            e.insert("IP_ADDRS".into(), ip_addrs.into());
            parse_dispatcher(&e).unwrap()
        };
        let ev = with("routable", "10.0.1.20 10.0.1.21");
        assert_eq!(ev.ip_addrs.len(), 2);
        assert_eq!(ev.network_file, None);
        assert_eq!(ev.dispatch(), Dispatch::ApplyLease);
        assert_eq!(
            with("off", "").dispatch(),
            Dispatch::Remove(vec![Family::V4, Family::V6])
        );
        assert_eq!(
            with("no-carrier", "10.0.1.20").dispatch(),
            Dispatch::Remove(vec![Family::V4, Family::V6])
        );
        assert_eq!(
            with("degraded", "").dispatch(),
            Dispatch::Remove(vec![Family::V4])
        );
        assert_eq!(with("degraded", "10.0.1.20").dispatch(), Dispatch::Ignore);
        assert_eq!(with("configured", "10.0.1.20").dispatch(), Dispatch::Ignore);
        let removal = with("degraded", "").removal(Family::V4);
        assert_eq!(
            (removal.reason, removal.action()),
            (Reason::Expire, Action::Remove)
        );
    }

    #[test]
    fn hostile_values_in_every_variable_are_refused() {
        let good: Env = [
            ("IFACE", "eth1"),
            ("STATE", "routable"),
            ("AdministrativeState", "configured"),
            ("OperationalState", "routable"),
            ("IP_ADDRS", "10.0.1.20"),
            ("IP6_ADDRS", "2600::1"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        assert!(parse_dispatcher(&good).is_ok());
        for var in [
            "IFACE",
            "STATE",
            "AdministrativeState",
            "OperationalState",
            "IP_ADDRS",
            "IP6_ADDRS",
        ] {
            for hostile in [
                "$(touch /tmp/pwned)",
                "`id`",
                "eth1; reboot",
                "routable\nSTATE=off",
                "../../etc/passwd",
            ] {
                let mut env = good.clone();
                env.insert(var.to_owned(), hostile.to_owned());
                let err = parse_dispatcher(&env).unwrap_err().to_string();
                assert!(
                    err.starts_with(&format!("networkd-dispatcher variable {var}: ")),
                    "{var}={hostile:?}: {err}"
                );
            }
        }
        for hostile in [
            "ADDRESS=$(id)\nNETMASK=255.255.255.0\n",
            "ADDRESS=10.0.1.20\nNETMASK=255.255.255.0\nROUTER=10.0.1.1;reboot\n",
        ] {
            assert!(parse_lease_file(hostile).is_err(), "{hostile:?}");
        }
    }
}

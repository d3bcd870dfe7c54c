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
use crate::error::{Error, Problem, Result};
use crate::model::{Family, IfName, Lease, LeaseEvent, Reason};

/// Parses a networkd DHCPv4 lease file (`ADDRESS`, `NETMASK`, `ROUTER`; other keys
/// are ignored).
pub fn parse_lease_file(text: &str) -> Result<Lease> {
    let env = parse_env_dump("networkd lease file", text)?;
    let vars = Vars {
        source: "networkd lease",
        env: &env,
    };
    Ok(Lease {
        family: Family::V4,
        address: IpAddr::V4(vars.ipv4("ADDRESS")?),
        prefix_len: vars.netmask("NETMASK")?,
        routers: vars.ipv4_list("ROUTER")?,
        reason: Reason::Bound,
    })
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
    })
}

impl DispatcherEvent {
    /// The lease event this state change stands for: `routable` applies the lease,
    /// `off` and `no-carrier` remove the link's policy routing, any other state is
    /// ignored. Applying needs the lease file's content; a routable link without a
    /// DHCP lease is an error the caller logs and leaves alone.
    pub fn lease_event(&self, lease: Option<Lease>) -> Result<LeaseEvent> {
        let reason = match self.state.as_str() {
            "routable" => Reason::Bound,
            "off" | "no-carrier" => Reason::Stop,
            _ => Reason::Preinit,
        };
        let new = match reason {
            Reason::Bound => Some(lease.ok_or_else(|| Error::Event {
                source_name: "networkd",
                var: "lease file".to_owned(),
                problem: Problem::bad("no DHCPv4 lease for a routable link", self.iface.as_str()),
            })?),
            _ => None,
        };
        Ok(LeaseEvent {
            interface: self.iface.clone(),
            family: Family::V4,
            reason,
            new,
            old: None,
        })
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
        let env: Env = [
            ("IFACE", "eth1"),
            ("STATE", "routable"),
            ("IP_ADDRS", "10.0.1.20 10.0.1.21"),
            ("IP6_ADDRS", ""),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        let ev = parse_dispatcher(&env).unwrap();
        assert_eq!(ev.ip_addrs.len(), 2);
        assert!(ev.lease_event(None).is_err());
        let mut off = env.clone();
        off.insert("STATE".into(), "off".into());
        assert_eq!(
            parse_dispatcher(&off)
                .unwrap()
                .lease_event(None)
                .unwrap()
                .action(),
            Action::Remove
        );
        let mut odd = env;
        odd.insert("STATE".into(), "routable;id".into());
        assert!(parse_dispatcher(&odd).is_err());
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Pure: dhcpcd's `dhcpcd-run-hooks` environment → [`LeaseEvent`]s.
//!
//! dhcpcd clears the environment (but `PATH` and what `-e`/`env` adds) and sets
//! `reason`, `interface`, `protocol` and the lease as `new_*` (in force) and `old_*`
//! (the one before), as dhcpcd-run-hooks(8) and a dump of dhcpcd 9.4.1 show:
//! `new_ip_address`, `new_subnet_cidr`, `new_subnet_mask`, `new_routers` for DHCPv4,
//! `new_dhcp6_ia_na1_ia_addr1` (the first address of the first IA_NA) for DHCPv6.
//!
//! | reason | leasehook |
//! |---|---|
//! | `BOUND`, `RENEW`, `REBIND`, `REBOOT` | apply the IPv4 lease |
//! | `BOUND6`, `RENEW6`, `REBIND6`, `REBOOT6` | apply the DHCPv6 address (nothing when the reply held no IA_NA address, as with prefix delegation only) |
//! | `EXPIRE`, `NAK`, `RELEASE`, `STOP`, `FAIL` | remove IPv4 |
//! | `EXPIRE6`, `RELEASE6`, `STOP6` | remove IPv6 |
//! | `NOCARRIER`, `DEPARTED` | remove both (dhcpcd deconfigures the link; the link is gone) |
//! | `PREINIT`, `CARRIER`, `NOCARRIER_ROAMING`, `INFORM`, `INFORM6`, `DELEGATED6`, `IPV4LL`, `STATIC`, `3RDPARTY`, `TIMEOUT`, `RECONFIGURE`, `ROUTERADVERT`, `STOPPED`, `TEST`, `DUMP` | nothing |

use std::net::IpAddr;

use super::{Env, Vars};
use crate::error::{Problem, Result};
use crate::model::{Action, Family, Lease, LeaseEvent, Reason};

const SOURCE: &str = "dhcpcd";

/// The families a reason concerns and what it means; `None` for a reason dhcpcd
/// does not send.
fn reason_of(reason: &str) -> Option<(&'static [Family], Reason)> {
    use Family::{V4, V6};
    const FOUR: &[Family] = &[V4];
    const SIX: &[Family] = &[V6];
    const BOTH: &[Family] = &[V4, V6];
    Some(match reason {
        "BOUND" => (FOUR, Reason::Bound),
        "RENEW" => (FOUR, Reason::Renew),
        "REBIND" => (FOUR, Reason::Rebind),
        "REBOOT" => (FOUR, Reason::Reboot),
        "BOUND6" => (SIX, Reason::Bound),
        "RENEW6" => (SIX, Reason::Renew),
        "REBIND6" => (SIX, Reason::Rebind),
        "REBOOT6" => (SIX, Reason::Reboot),
        "EXPIRE" | "NAK" => (FOUR, Reason::Expire),
        "RELEASE" => (FOUR, Reason::Release),
        "STOP" => (FOUR, Reason::Stop),
        "FAIL" => (FOUR, Reason::Fail),
        "EXPIRE6" => (SIX, Reason::Expire),
        "RELEASE6" => (SIX, Reason::Release),
        "STOP6" => (SIX, Reason::Stop),
        "NOCARRIER" | "DEPARTED" => (BOTH, Reason::Stop),
        "PREINIT" => (FOUR, Reason::Preinit),
        "TIMEOUT" => (FOUR, Reason::Timeout),
        "CARRIER" | "NOCARRIER_ROAMING" | "INFORM" | "INFORM6" | "DELEGATED6" | "IPV4LL"
        | "STATIC" | "3RDPARTY" | "RECONFIGURE" | "ROUTERADVERT" | "STOPPED" | "TEST" | "DUMP" => {
            (&[], Reason::Preinit)
        }
        _ => return None,
    })
}

/// Whether `reason` is one dhcpcd sends (for log lines built from the untrusted
/// environment).
pub fn is_reason(reason: &str) -> bool {
    reason_of(reason).is_some()
}

/// Parses dhcpcd-run-hooks' environment. Returns one event per family the reason
/// concerns; none for reasons leasehook ignores.
///
/// For an apply reason the `new_*` lease is required (for DHCPv6: when the reply
/// holds an IA_NA address at all). An `old_*` lease is read when its address
/// variable is set. Ignored reasons read nothing but `reason`.
pub fn parse(env: &Env) -> Result<Vec<LeaseEvent>> {
    let vars = Vars {
        source: SOURCE,
        env,
    };
    let raw = vars.req("reason")?;
    let (families, reason) = reason_of(raw)
        .ok_or_else(|| vars.err("reason", Problem::bad("unknown dhcpcd reason", raw)))?;
    if families.is_empty() || reason.action() == Action::Ignore {
        return Ok(Vec::new());
    }
    let interface = vars.ifname("interface")?;
    let mut events = Vec::new();
    for &family in families {
        let old = optional(&vars, family, reason, "old_")?;
        let new = match reason.action() {
            Action::Apply => match optional(&vars, family, reason, "new_")? {
                Some(lease) => Some(vars.usable(&address_var(family, "new_"), lease)?),
                None if family == Family::V6 => continue,
                None => return Err(vars.err("new_ip_address", Problem::missing())),
            },
            _ => None,
        };
        events.push(LeaseEvent {
            interface: interface.clone(),
            family,
            reason,
            new,
            old,
        });
    }
    Ok(events)
}

fn address_var(family: Family, prefix: &str) -> String {
    match family {
        Family::V4 => format!("{prefix}ip_address"),
        Family::V6 => format!("{prefix}dhcp6_ia_na1_ia_addr1"),
    }
}

/// The `prefix` lease of `family`, `None` when its address variable is unset.
fn optional(
    vars: &Vars<'_>,
    family: Family,
    reason: Reason,
    prefix: &str,
) -> Result<Option<Lease>> {
    vars.lease_if_set(&address_var(family, prefix), |address| match family {
        Family::V4 => {
            let cidr_var = format!("{prefix}subnet_cidr");
            let prefix_len = vars.prefix_len(&cidr_var, 32)?;
            let mask_var = format!("{prefix}subnet_mask");
            if vars.opt(&mask_var).is_some() && vars.netmask(&mask_var)? != prefix_len {
                return Err(vars.err(
                    &mask_var,
                    Problem::bad(
                        format!("disagrees with {cidr_var} (/{prefix_len})"),
                        vars.opt(&mask_var).unwrap_or_default(),
                    ),
                ));
            }
            Ok(Lease {
                family,
                address: IpAddr::V4(vars.ipv4(address)?),
                prefix_len,
                routers: vars.ipv4_list(&format!("{prefix}routers"))?,
                reason,
            })
        }
        Family::V6 => vars.ia_na(reason, address),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::env;

    type Pairs = &'static [(&'static str, &'static str)];

    /// dhcpcd 9.4.1's BOUND in the end-to-end world (less `PATH` and `if*`).
    const BOUND: &[(&str, &str)] = &[
        ("reason", "BOUND"),
        ("interface", "eth1"),
        ("protocol", "dhcp"),
        ("new_broadcast_address", "10.98.1.255"),
        ("new_dhcp_lease_time", "120"),
        ("new_domain_name", ""),
        ("new_ip_address", "10.98.1.20"),
        ("new_network_number", "10.98.1.0"),
        ("new_routers", "10.98.1.1"),
        ("new_subnet_cidr", "24"),
        ("new_subnet_mask", "255.255.255.0"),
    ];

    /// dhcpcd 9.4.1's BOUND6 (`ia_na 1`) in the end-to-end world.
    const BOUND6: &[(&str, &str)] = &[
        ("reason", "BOUND6"),
        ("interface", "eth1"),
        ("protocol", "dhcp6"),
        ("new_dhcp6_ia_na1_ia_addr1", "fd00:98:1::20"),
        ("new_dhcp6_ia_na1_ia_addr1_pltime", "120"),
        ("new_dhcp6_ia_na1_ia_addr1_vltime", "120"),
        ("new_dhcp6_ia_na1_iaid", "00000001"),
        ("new_dhcp6_status_code", "0"),
    ];

    #[test]
    fn apply_reasons() {
        for reason in ["BOUND", "RENEW", "REBIND", "REBOOT"] {
            let mut e = env(BOUND);
            e.insert("reason".into(), reason.into());
            let evs = parse(&e).unwrap();
            assert_eq!(evs.len(), 1, "{reason}");
            let new = evs[0].new.as_ref().unwrap();
            assert_eq!(
                (
                    evs[0].action(),
                    evs[0].family,
                    new.address.to_string(),
                    new.prefix_len,
                    new.routers.len()
                ),
                (Action::Apply, Family::V4, "10.98.1.20".into(), 24, 1),
                "{reason}"
            );
        }
        let six = parse(&env(BOUND6)).unwrap();
        let new = six[0].new.as_ref().unwrap();
        assert_eq!(
            (six[0].family, new.address.to_string(), new.prefix_len),
            (Family::V6, "fd00:98:1::20".into(), 128)
        );
        // A DHCPv6 reply with only a delegated prefix: no address to plan.
        let pd = env(&[
            ("reason", "BOUND6"),
            ("interface", "eth1"),
            ("new_dhcp6_ia_pd1_prefix1", "fd00:1::"),
        ]);
        assert_eq!(parse(&pd).unwrap(), Vec::new());
        // A DHCPv4 apply reason without an address is malformed.
        let e = parse(&env(&[("reason", "BOUND"), ("interface", "eth1")])).unwrap_err();
        assert_eq!(e.to_string(), "dhcpcd variable new_ip_address: missing");
    }

    #[test]
    fn remove_and_ignore_reasons() {
        let stop = parse(&env(&[
            ("reason", "STOP"),
            ("interface", "eth1"),
            ("old_ip_address", "10.98.1.20"),
            ("old_subnet_cidr", "24"),
            ("old_subnet_mask", "255.255.255.0"),
            ("old_routers", "10.98.1.1"),
        ]))
        .unwrap();
        assert_eq!(
            (
                stop[0].action(),
                stop[0].new.is_none(),
                stop[0].old.is_some()
            ),
            (Action::Remove, true, true)
        );
        for (reason, families) in [
            ("EXPIRE", vec![Family::V4]),
            ("NAK", vec![Family::V4]),
            ("RELEASE", vec![Family::V4]),
            ("FAIL", vec![Family::V4]),
            ("RELEASE6", vec![Family::V6]),
            ("EXPIRE6", vec![Family::V6]),
            ("STOP6", vec![Family::V6]),
            ("NOCARRIER", vec![Family::V4, Family::V6]),
            ("DEPARTED", vec![Family::V4, Family::V6]),
        ] {
            let evs = parse(&env(&[("reason", reason), ("interface", "eth1")])).unwrap();
            assert_eq!(
                evs.iter().map(|e| e.family).collect::<Vec<_>>(),
                families,
                "{reason}"
            );
            assert!(evs.iter().all(|e| e.action() == Action::Remove), "{reason}");
        }
        for reason in [
            "PREINIT",
            "CARRIER",
            "NOCARRIER_ROAMING",
            "INFORM",
            "INFORM6",
            "DELEGATED6",
            "IPV4LL",
            "STATIC",
            "3RDPARTY",
            "TIMEOUT",
            "RECONFIGURE",
            "ROUTERADVERT",
            "STOPPED",
            "TEST",
            "DUMP",
        ] {
            // Ignored reasons read nothing else: even a hostile interface is fine.
            let evs = parse(&env(&[("reason", reason), ("interface", "$(id)")])).unwrap();
            assert_eq!(evs, Vec::new(), "{reason}");
            assert!(is_reason(reason));
        }
        assert!(!is_reason("bound"));
    }

    #[test]
    fn hostile_values_in_every_variable_are_refused() {
        let hostile = [
            "$(touch /tmp/pwned)",
            "`id`",
            "eth1; reboot",
            "10.98.1.20\nreason=STOP",
            "../../etc/passwd",
            "10.98.1.1 $(id)",
        ];
        let cases: [(Pairs, &[&str]); 3] = [
            (
                BOUND,
                &[
                    "reason",
                    "interface",
                    "new_ip_address",
                    "new_subnet_cidr",
                    "new_subnet_mask",
                    "new_routers",
                ],
            ),
            (
                BOUND6,
                &["reason", "interface", "new_dhcp6_ia_na1_ia_addr1"],
            ),
            (
                &[
                    ("reason", "RELEASE"),
                    ("interface", "eth1"),
                    ("old_ip_address", "10.98.1.20"),
                    ("old_subnet_cidr", "24"),
                    ("old_subnet_mask", "255.255.255.0"),
                    ("old_routers", "10.98.1.1"),
                ],
                &[
                    "interface",
                    "old_ip_address",
                    "old_subnet_cidr",
                    "old_subnet_mask",
                    "old_routers",
                ],
            ),
        ];
        for (base, vars) in cases {
            assert!(parse(&env(base)).is_ok());
            for var in vars {
                for h in hostile {
                    let mut e = env(base);
                    e.insert((*var).to_owned(), h.to_owned());
                    let err = parse(&e).unwrap_err().to_string();
                    assert!(
                        err.starts_with(&format!("dhcpcd variable {var}: ")),
                        "{var}={h:?}: {err}"
                    );
                    assert!(!err.contains('\n'), "{err}");
                }
            }
        }
        let mut e = env(BOUND);
        e.insert("new_subnet_mask".into(), "255.255.0.0".into());
        assert_eq!(
            parse(&e).unwrap_err().to_string(),
            "dhcpcd variable new_subnet_mask: disagrees with new_subnet_cidr (/24) (got \"255.255.0.0\")"
        );
        e.insert("new_subnet_mask".into(), "255.255.255.0".into());
        e.insert("new_subnet_cidr".into(), "33".into());
        assert_eq!(
            parse(&e).unwrap_err().to_string(),
            "dhcpcd variable new_subnet_cidr: not a prefix length 0-32 (got \"33\")"
        );
        // Variables leasehook does not read cannot hurt it.
        let mut e = env(BOUND);
        e.insert("new_domain_name".into(), "$(touch /tmp/pwned)".into());
        e.insert("new_host_name".into(), "`id`".into());
        assert!(parse(&e).is_ok());
    }
}

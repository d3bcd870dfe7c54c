// SPDX-License-Identifier: Apache-2.0
//! Pure: ISC dhclient's `dhclient-script` environment → [`LeaseEvent`] (SPEC §6.1).
//!
//! dhclient hands its script `reason`, `interface` and the lease as `new_*` (the lease
//! now in force) and `old_*` (the one before). IPv4 leases carry `*_ip_address`,
//! `*_subnet_mask` and `*_routers`; DHCPv6 leases `*_ip6_address` and
//! `*_ip6_prefixlen`. Which of the two is present depends on the reason: `BOUND` has
//! only `new_*`, `RENEW` both, `EXPIRE`/`RELEASE`/`STOP` only `old_*`, `FAIL` neither.

use std::net::IpAddr;

use super::{Env, Vars};
use crate::error::{Problem, Result};
use crate::model::{Action, Family, Lease, LeaseEvent, Reason};

const SOURCE: &str = "dhclient";

/// Maps dhclient's `reason` to a family and a [`Reason`].
pub fn parse_reason(reason: &str) -> Option<(Family, Reason)> {
    use Family::{V4, V6};
    Some(match reason {
        "BOUND" => (V4, Reason::Bound),
        "RENEW" => (V4, Reason::Renew),
        "REBIND" => (V4, Reason::Rebind),
        "REBOOT" => (V4, Reason::Reboot),
        "EXPIRE" => (V4, Reason::Expire),
        "FAIL" => (V4, Reason::Fail),
        "RELEASE" => (V4, Reason::Release),
        "STOP" => (V4, Reason::Stop),
        "PREINIT" => (V4, Reason::Preinit),
        "MEDIUM" => (V4, Reason::Medium),
        "TIMEOUT" => (V4, Reason::Timeout),
        "ARPCHECK" | "ARPSEND" => (V4, Reason::Arp),
        "BOUND6" => (V6, Reason::Bound),
        "RENEW6" => (V6, Reason::Renew),
        "REBIND6" => (V6, Reason::Rebind),
        "EXPIRE6" => (V6, Reason::Expire),
        "RELEASE6" => (V6, Reason::Release),
        "STOP6" => (V6, Reason::Stop),
        "PREINIT6" => (V6, Reason::Preinit),
        "DEPREF6" => (V6, Reason::Depref),
        _ => return None,
    })
}

/// Parses dhclient-script's environment.
///
/// For a reason that applies (`BOUND`, `RENEW`, ...), the `new_*` lease is required.
/// An `old_*` lease is read when its address variable is set. Ignored reasons
/// (`PREINIT`, ...) read no lease at all, so a half-filled environment cannot fail them.
pub fn parse(env: &Env) -> Result<LeaseEvent> {
    let vars = Vars {
        source: SOURCE,
        env,
    };
    let raw = vars.req("reason")?;
    let (family, reason) = parse_reason(raw)
        .ok_or_else(|| vars.err("reason", Problem::bad("unknown dhclient reason", raw)))?;
    let interface = vars.ifname("interface")?;
    let old = || {
        vars.lease_if_set(&address_var(family, "old_"), |_| {
            lease(&vars, family, reason, "old_")
        })
    };
    let (new, old) = match reason.action() {
        Action::Ignore => (None, None),
        Action::Apply => {
            let new = lease(&vars, family, reason, "new_")?;
            (
                Some(vars.usable(&address_var(family, "new_"), new)?),
                old()?,
            )
        }
        Action::Remove => (None, old()?),
    };
    Ok(LeaseEvent {
        interface,
        family,
        reason,
        new,
        old,
    })
}

/// The name of a lease's address variable: `new_` or `old_` as `prefix`.
fn address_var(family: Family, prefix: &str) -> String {
    match family {
        Family::V4 => format!("{prefix}ip_address"),
        Family::V6 => format!("{prefix}ip6_address"),
    }
}

/// The `prefix` lease of `family`.
fn lease(vars: &Vars<'_>, family: Family, reason: Reason, prefix: &str) -> Result<Lease> {
    let address = address_var(family, prefix);
    match family {
        Family::V4 => vars.lease_v4(
            reason,
            [
                &address,
                &format!("{prefix}subnet_mask"),
                &format!("{prefix}routers"),
            ],
        ),
        Family::V6 => {
            let prefix_len = vars.prefix_len(&format!("{prefix}ip6_prefixlen"), 128)?;
            Ok(Lease {
                family,
                address: IpAddr::V6(vars.ipv6(&address)?),
                prefix_len,
                routers: Vec::new(),
                reason,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::env;

    #[test]
    fn bound_renew_expire_fail() {
        let bound = parse(&env(&[
            ("reason", "BOUND"),
            ("interface", "eth1"),
            ("new_ip_address", "10.0.1.20"),
            ("new_subnet_mask", "255.255.255.0"),
            ("new_routers", "10.0.1.1 10.0.1.2"),
        ]))
        .unwrap();
        let new = bound.new.unwrap();
        assert_eq!((new.prefix_len, new.routers.len()), (24, 2));
        assert_eq!(bound.old, None);

        let renew = parse(&env(&[
            ("reason", "RENEW"),
            ("interface", "eth1"),
            ("new_ip_address", "10.0.1.20"),
            ("new_subnet_mask", "255.255.255.0"),
            ("old_ip_address", "10.0.1.19"),
            ("old_subnet_mask", "255.255.255.0"),
        ]))
        .unwrap();
        assert_eq!(renew.old.unwrap().address.to_string(), "10.0.1.19");

        let expire = parse(&env(&[
            ("reason", "EXPIRE"),
            ("interface", "eth1"),
            ("old_ip_address", "10.0.1.20"),
            ("old_subnet_mask", "255.255.255.0"),
        ]))
        .unwrap();
        assert_eq!(
            (expire.action(), expire.new.is_none(), expire.old.is_some()),
            (Action::Remove, true, true)
        );

        let fail = parse(&env(&[("reason", "FAIL"), ("interface", "eth1")])).unwrap();
        assert_eq!((fail.action(), fail.old), (Action::Remove, None));
    }

    #[test]
    fn bad_values_name_the_variable() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (
                &[("interface", "eth1")],
                "dhclient variable reason: missing",
            ),
            (
                &[("reason", "HACK"), ("interface", "eth1")],
                "dhclient variable reason: unknown dhclient reason (got \"HACK\")",
            ),
            (
                &[("reason", "BOUND"), ("interface", "eth1;reboot")],
                "dhclient variable interface: interface name may only hold A-Z a-z 0-9 - _ . (got \"eth1;reboot\")",
            ),
            (
                &[("reason", "BOUND"), ("interface", "eth1")],
                "dhclient variable new_ip_address: missing",
            ),
            (
                &[
                    ("reason", "BOUND"),
                    ("interface", "eth1"),
                    ("new_ip_address", "10.0.1.20`id`"),
                    ("new_subnet_mask", "255.255.255.0"),
                ],
                "dhclient variable new_ip_address: not an IPv4 address (got \"10.0.1.20`id`\")",
            ),
            (
                &[
                    ("reason", "BOUND"),
                    ("interface", "eth1"),
                    ("new_ip_address", "10.0.1.20"),
                    ("new_subnet_mask", "255.255.255.0"),
                    ("new_routers", "10.0.1.1 $(reboot)"),
                ],
                "dhclient variable new_routers: not a list of IPv4 addresses (got \"10.0.1.1 $(reboot)\")",
            ),
            (
                &[
                    ("reason", "BOUND6"),
                    ("interface", "eth1"),
                    ("new_ip6_address", "fd00::5"),
                    ("new_ip6_prefixlen", "129"),
                ],
                "dhclient variable new_ip6_prefixlen: not a prefix length 0-128 (got \"129\")",
            ),
        ];
        for (vars, want) in cases {
            assert_eq!(parse(&env(vars)).unwrap_err().to_string(), *want);
        }
    }

    #[test]
    fn ignored_reasons_need_no_lease() {
        for r in [
            "PREINIT", "PREINIT6", "MEDIUM", "TIMEOUT", "DEPREF6", "ARPCHECK",
        ] {
            let ev = parse(&env(&[("reason", r), ("interface", "eth0")])).unwrap();
            assert_eq!(ev.action(), Action::Ignore, "{r}");
        }
    }
}

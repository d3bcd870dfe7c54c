// SPDX-License-Identifier: Apache-2.0
//! Pure: DHCP clients' hook environments and lease files → [`LeaseEvent`].
//!
//! Every value comes from a DHCP server leasehook does not control. Each parser reads
//! only the variables it needs, parses each strictly (an address must be an address),
//! and reports the first bad one by name. Nothing here touches the process
//! environment: the binaries collect it and hand it in as an [`Env`] map.
//!
//! [`LeaseEvent`]: crate::model::LeaseEvent

pub mod dhclient;
pub mod dhcpcd;
pub mod networkd;
pub mod nm;
pub mod udhcpc;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::error::{Error, Problem, Result};
use crate::model::{Family, IfName, Lease, Reason};

/// A hook environment: variable name → value.
pub type Env = BTreeMap<String, String>;

/// Parses an environment dump: one `KEY=VALUE` per line, as `env` prints it. Blank
/// lines and lines starting with `#` are skipped; the value is everything after the
/// first `=`. A line without `=`, or with a key that is not a shell variable name,
/// is an error naming the line.
pub fn parse_env_dump(what: &str, text: &str) -> Result<Env> {
    let mut env = Env::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |message: &str| Error::Syntax {
            what: format!("{what} line {}", n + 1),
            message: format!("{message}: {}", Problem::bad("expected KEY=VALUE", line)),
        };
        let (key, value) = line.split_once('=').ok_or_else(|| bad("no `=`"))?;
        if !is_var_name(key) {
            return Err(bad("not a variable name"));
        }
        env.insert(key.to_owned(), value.to_owned());
    }
    Ok(env)
}

fn is_var_name(key: &str) -> bool {
    let mut bytes = key.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Reads variables of one event source and turns parse failures into errors that
/// name the source and the variable.
pub(crate) struct Vars<'a> {
    pub(crate) source: &'static str,
    pub(crate) env: &'a Env,
}

impl Vars<'_> {
    pub(crate) fn err(&self, var: &str, problem: Problem) -> Error {
        Error::Event {
            source_name: self.source,
            var: var.to_owned(),
            problem,
        }
    }

    /// The variable's value, `None` when unset or empty.
    pub(crate) fn opt(&self, var: &str) -> Option<&str> {
        self.env
            .get(var)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    pub(crate) fn req(&self, var: &str) -> Result<&str> {
        self.opt(var)
            .ok_or_else(|| self.err(var, Problem::missing()))
    }

    pub(crate) fn ifname(&self, var: &str) -> Result<IfName> {
        IfName::try_new(self.req(var)?).map_err(|p| self.err(var, p))
    }

    pub(crate) fn ipv4(&self, var: &str) -> Result<Ipv4Addr> {
        let v = self.req(var)?;
        v.parse()
            .map_err(|_| self.err(var, Problem::bad("not an IPv4 address", v)))
    }

    pub(crate) fn ipv6(&self, var: &str) -> Result<Ipv6Addr> {
        let v = self.req(var)?;
        v.parse()
            .map_err(|_| self.err(var, Problem::bad("not an IPv6 address", v)))
    }

    /// Refuses a lease now in force whose address the address gate refuses
    /// ([`crate::gate::check_ip`]: unspecified, loopback, multicast, broadcast,
    /// link-local, a metadata service's): the error names `var` (the lease's address
    /// variable), the value and the reason.
    pub(crate) fn usable(&self, var: &str, lease: Lease) -> Result<Lease> {
        match crate::gate::check_ip(lease.address) {
            Ok(()) => Ok(lease),
            Err(why) => Err(self.err(
                var,
                Problem::bad(
                    format!("refused as a leased address: {why}"),
                    &lease.address.to_string(),
                ),
            )),
        }
    }

    /// The lease `read` reads from the address variable `address` when it is set;
    /// `None` when it is unset or empty (the client holds no such lease).
    pub(crate) fn lease_if_set(
        &self,
        address: &str,
        read: impl FnOnce(&str) -> Result<Lease>,
    ) -> Result<Option<Lease>> {
        self.opt(address).map(|_| read(address)).transpose()
    }

    /// An IPv4 lease from three variables: its address, its dotted netmask and its
    /// space-separated routers (none when unset), read in that order.
    pub(crate) fn lease_v4(
        &self,
        reason: Reason,
        [address, netmask, routers]: [&str; 3],
    ) -> Result<Lease> {
        Ok(Lease {
            family: Family::V4,
            address: IpAddr::V4(self.ipv4(address)?),
            prefix_len: self.netmask(netmask)?,
            routers: self.ipv4_list(routers)?,
            reason,
        })
    }

    /// A DHCPv6 IA_NA address: a single address, which the clients add as /128.
    pub(crate) fn ia_na(&self, reason: Reason, address: &str) -> Result<Lease> {
        Ok(Lease {
            family: Family::V6,
            address: IpAddr::V6(self.ipv6(address)?),
            prefix_len: 128,
            routers: Vec::new(),
            reason,
        })
    }

    /// A prefix length written as a number from 0 to `max`.
    pub(crate) fn prefix_len(&self, var: &str, max: u8) -> Result<u8> {
        let raw = self.req(var)?;
        raw.parse::<u8>().ok().filter(|l| *l <= max).ok_or_else(|| {
            self.err(
                var,
                Problem::bad(format!("not a prefix length 0-{max}"), raw),
            )
        })
    }

    /// A space-separated list of IPv4 addresses; empty when unset.
    pub(crate) fn ipv4_list(&self, var: &str) -> Result<Vec<IpAddr>> {
        self.opt(var).map_or(Ok(Vec::new()), |v| {
            v.split_ascii_whitespace()
                .map(|a| {
                    a.parse::<Ipv4Addr>()
                        .map(IpAddr::V4)
                        .map_err(|_| self.err(var, Problem::bad("not a list of IPv4 addresses", v)))
                })
                .collect()
        })
    }

    /// A space-separated list of IPv6 addresses; empty when unset.
    pub(crate) fn ipv6_list(&self, var: &str) -> Result<Vec<Ipv6Addr>> {
        self.opt(var).map_or(Ok(Vec::new()), |v| {
            v.split_ascii_whitespace()
                .map(|a| {
                    a.parse::<Ipv6Addr>()
                        .map_err(|_| self.err(var, Problem::bad("not a list of IPv6 addresses", v)))
                })
                .collect()
        })
    }

    /// A dotted-quad netmask, returned as its prefix length.
    pub(crate) fn netmask(&self, var: &str) -> Result<u8> {
        let mask = self.ipv4(var)?;
        let bits = u32::from(mask);
        let len = bits.leading_ones();
        if bits.checked_shl(len).unwrap_or(0) != 0 {
            return Err(self.err(
                var,
                Problem::bad("not a contiguous netmask", &mask.to_string()),
            ));
        }
        u8::try_from(len).map_err(|_| self.err(var, Problem::bad("bad netmask", &mask.to_string())))
    }
}

/// A test's environment from `(name, value)` pairs.
#[cfg(test)]
pub(crate) fn env(pairs: &[(&str, &str)]) -> Env {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_dump_parses_and_rejects() {
        let env =
            parse_env_dump("t", "# comment\nreason=BOUND\n\njson={\"a\": \"b=c\"}\n").unwrap();
        assert_eq!(env["reason"], "BOUND");
        assert_eq!(env["json"], "{\"a\": \"b=c\"}");
        let e = parse_env_dump("t", "reason=BOUND\nnot a var\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "t line 2: no `=`: expected KEY=VALUE (got \"not a var\")"
        );
        assert!(parse_env_dump("t", "1x=2").is_err());
        assert!(parse_env_dump("t", "a-b=2").is_err());
    }

    #[test]
    fn netmasks() {
        let mk = |m: &str| {
            let env = env(&[("m", m)]);
            Vars {
                source: "t",
                env: &env,
            }
            .netmask("m")
        };
        assert_eq!(mk("255.255.255.0").unwrap(), 24);
        assert_eq!(mk("255.255.255.255").unwrap(), 32);
        assert_eq!(mk("0.0.0.0").unwrap(), 0);
        assert_eq!(mk("255.255.240.0").unwrap(), 20);
        assert!(mk("255.0.255.0").is_err());
        assert!(mk("255.255.255").is_err());
    }
}

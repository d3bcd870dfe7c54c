// SPDX-License-Identifier: Apache-2.0
//! Pure: which NICs a new answer of the NIC list changed, by MAC (SPEC §3.10).
//!
//! `leasehook watch` holds the last answer of
//! `instance/network-interfaces/?recursive=true` it read ([`Snapshot`]); when the
//! long poll ([`super::live`]) returns another, [`changes`] says which NICs the
//! refresh path must look at again:
//!
//! * **changed**: a MAC in both whose routing view differs: its index (`nicN`,
//!   the table), `ip`, `gateway`, `subnetmask`, `ipAliases`, `ipv6s`, `ipv6`,
//!   `gatewayIpv6` (the parsed [`GceNic`]), or one of [`ROUTING_KEYS`] compared
//!   as the server wrote them (`forwardedIps`, the IPv6 keys);
//! * **added** / **removed**: a MAC only in the new / the old answer (a NIC
//!   attached or detached: the refresh path's business too).
//!
//! Every other key (`accessConfigs`, `dnsServers`, ...) changes nothing that
//! leasehook routes, so a change there asks nothing. The answer is parsed as
//! strictly as the consistency wait parses it ([`parse_interfaces`]): garbage is
//! an error naming its key, never an empty list (which would read as every NIC
//! removed).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::Result;
use crate::model::MacAddr;

use super::nic::{GceNic, parse_interfaces};

pub use crate::source::provider::live::Changes;
use crate::source::provider::live::changes as by_mac;

/// The keys compared as written besides the parsed ones: a change of any of them
/// is a change of what the NIC may route.
pub const ROUTING_KEYS: &[&str] = &[
    "forwardedIps",
    "forwardedIpv6s",
    "ipv6s",
    "ipv6",
    "gatewayIpv6",
];

/// One NIC's routing view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NicView {
    /// The parsed NIC.
    pub nic: GceNic,
    /// [`ROUTING_KEYS`] present in its entry, as written.
    pub extra: BTreeMap<&'static str, Value>,
}

/// An answer of the NIC list, by MAC.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Each NIC's view.
    pub nics: BTreeMap<MacAddr, NicView>,
}

impl Snapshot {
    /// Parses an answer of `instance/network-interfaces/?recursive=true`.
    pub fn parse(body: &str) -> Result<Self> {
        let nics = parse_interfaces(body)?;
        // Parsed once above: a list of objects, or it failed.
        let list: Vec<Value> = serde_json::from_str(body).unwrap_or_default();
        let nics = nics
            .into_iter()
            .map(|nic| {
                let entry = usize::try_from(nic.index)
                    .ok()
                    .and_then(|i| list.get(i))
                    .and_then(Value::as_object);
                let extra = ROUTING_KEYS
                    .iter()
                    .filter_map(|k| Some((*k, entry?.get(*k)?.clone())))
                    .filter(|(_, v)| !v.is_null())
                    .collect();
                (nic.mac, NicView { nic, extra })
            })
            .collect();
        Ok(Self { nics })
    }

    /// The MACs it lists.
    pub fn macs(&self) -> Vec<MacAddr> {
        self.nics.keys().copied().collect()
    }
}

/// Which NICs `new` changed against `old` (the seam's [`changes`](by_mac), by
/// each NIC's view).
pub fn changes(old: &Snapshot, new: &Snapshot) -> Changes {
    by_mac(&old.nics, &new.nics)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const M0: &str = "42:01:0a:00:00:0a";
    const M1: &str = "42:01:0a:00:01:14";

    fn entry(mac: &str, ip: &str) -> Value {
        json!({"mac": mac, "ip": ip, "gateway": "10.0.0.1", "subnetmask": "255.255.0.0",
               "ipAliases": [], "forwardedIps": [], "accessConfigs": [], "mtu": 1460})
    }

    fn snap(list: &Value) -> Snapshot {
        Snapshot::parse(&list.to_string()).unwrap()
    }

    fn mac(s: &str) -> MacAddr {
        s.parse().unwrap()
    }

    #[test]
    fn each_routing_key_is_a_change_of_that_nic_only() {
        let base = json!([entry(M0, "10.0.0.10"), entry(M1, "10.0.1.20")]);
        let old = snap(&base);
        let edits: &[(&str, Value)] = &[
            ("ip", json!("10.0.1.21")),
            ("gateway", json!("10.0.0.2")),
            ("subnetmask", json!("255.255.255.0")),
            ("ipAliases", json!(["10.0.1.32/28"])),
            ("forwardedIps", json!(["192.0.2.7"])),
            ("forwardedIpv6s", json!(["2600:1900::7/128"])),
            ("ipv6s", json!(["2600:1900:4000:1:0:1::"])),
            ("ipv6", json!(["2600:1900:4000:1:0:1::/96"])),
            ("gatewayIpv6", json!("fe80::1")),
        ];
        for (key, value) in edits {
            let mut new = base.clone();
            new[1][*key] = value.clone();
            let c = changes(&old, &snap(&new));
            assert_eq!(c.changed, [mac(M1)], "{key}");
            assert!(c.added.is_empty() && c.removed.is_empty(), "{key}");
            assert_eq!(c.to_string(), format!("changed {M1}"));
        }
    }

    #[test]
    fn other_keys_and_reformatting_change_nothing() {
        let base = json!([entry(M0, "10.0.0.10"), entry(M1, "10.0.1.20")]);
        let mut new = base.clone();
        new[1]["accessConfigs"] = json!([{"externalIp": "203.0.113.9"}]);
        new[1]["mtu"] = json!(8896);
        new[0]["dnsServers"] = json!(["169.254.169.254"]);
        // An alias as a bare address is its /32.
        let mut a = base.clone();
        a[1]["ipAliases"] = json!(["10.0.1.32"]);
        let mut b = base.clone();
        b[1]["ipAliases"] = json!(["10.0.1.32/32"]);
        let c = changes(&snap(&base), &snap(&new));
        assert!(c.is_empty(), "{c:?}");
        assert_eq!(c.to_string(), "nothing routed changed");
        assert!(changes(&snap(&a), &snap(&b)).is_empty());
        // A null key is an absent one.
        let mut n = base.clone();
        n[1]["forwardedIpv6s"] = Value::Null;
        assert!(changes(&snap(&base), &snap(&n)).is_empty());
    }

    #[test]
    fn attached_detached_and_reordered_nics() {
        let one = json!([entry(M0, "10.0.0.10")]);
        let two = json!([entry(M0, "10.0.0.10"), entry(M1, "10.0.1.20")]);
        let swapped = json!([entry(M1, "10.0.1.20"), entry(M0, "10.0.0.10")]);
        let c = changes(&snap(&one), &snap(&two));
        assert_eq!(
            (c.added.clone(), c.removed.clone()),
            (vec![mac(M1)], vec![])
        );
        assert_eq!(c.to_string(), format!("added {M1}"));
        let c = changes(&snap(&two), &snap(&one));
        assert_eq!(c.removed, [mac(M1)]);
        assert_eq!(c.all(), [mac(M1)]);
        // A NIC's index is its table: both moved.
        let c = changes(&snap(&two), &snap(&swapped));
        assert_eq!(c.changed, [mac(M0), mac(M1)]);
        assert!(changes(&Snapshot::default(), &Snapshot::default()).is_empty());
        assert_eq!(snap(&two).macs(), [mac(M0), mac(M1)]);
    }

    #[test]
    fn garbage_is_an_error_never_an_empty_list() {
        for bad in [
            "",
            "not json",
            "{}",
            "[1]",
            r#"[{"ip": "10.0.0.1"}]"#,
            r#"[{"mac": "zz", "ip": "10.0.0.1"}]"#,
        ] {
            let e = Snapshot::parse(bad).unwrap_err().to_string();
            assert!(e.contains("network-interfaces"), "{bad}: {e}");
        }
        assert_eq!(Snapshot::parse("[]").unwrap(), Snapshot::default());
    }
}

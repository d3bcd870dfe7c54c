// SPDX-License-Identifier: Apache-2.0
//! Pure: a [`Plan`] as text for people and other tools (SPEC §3.4).
//!
//! * [`ip`]: `ip rule add` / `ip route add` / `ip address add` lines in a stable
//!   order, with `#` comment lines per interface; golden tests compare this text.
//! * [`json()`]: the plan itself; it deserialises back into the same [`Plan`].
//! * [`netplan`]: a netplan v2 document (`routes`, `routing-policy`, `addresses` of
//!   each ethernet, as cloud-init writes them); the caller serialises it as YAML.
//! * [`networkd`]: systemd-networkd drop-ins (`[Address]`, `[Route]`,
//!   `[RoutingPolicyRule]`), one per interface.

use std::fmt::Write as _;

use ipnet::IpNet;
use serde_json::{Map, Value, json};

use crate::model::{Family, InterfacePlan, Plan, Scope};

/// The plan as `ip` command lines.
pub fn ip(plan: &Plan) -> String {
    let mut out = format!("# profile {}\n", plan.profile);
    for ip in &plan.interfaces {
        let _ = write!(out, "# {} {}", ip.name, ip.mac);
        out.push_str(if ip.primary { " primary" } else { " secondary" });
        if let Some(t) = ip.table {
            let _ = write!(out, " table {t}");
        }
        if let Some(m) = ip.metric {
            let _ = write!(out, " route-metric {m}");
        }
        let families: Vec<&str> = ip
            .families
            .iter()
            .map(|f| if *f == Family::V4 { "ipv4" } else { "ipv6" })
            .collect();
        let _ = writeln!(
            out,
            " families {}",
            if families.is_empty() {
                "none".to_owned()
            } else {
                families.join(",")
            }
        );
        for m in &ip.missing {
            let _ = writeln!(out, "# {} missing: {m}", ip.name);
        }
        for r in &ip.refused {
            let _ = writeln!(out, "# {} refused: {r}", ip.name);
        }
        for a in &ip.addresses {
            // The applier adds an address with a prefix `noprefixroute`: the
            // subnet's route is the plan's, in the NIC's table.
            let flag = if a.no_prefix_route() {
                " noprefixroute"
            } else {
                ""
            };
            let _ = writeln!(out, "ip {} address add {a}{flag}", a.family().ip_flag());
        }
        for r in &ip.routes {
            let _ = writeln!(out, "ip {} route add {r}", r.family().ip_flag());
        }
        for r in &ip.rules {
            let _ = writeln!(out, "ip {} rule add {r}", r.family().ip_flag());
        }
    }
    out
}

/// The plan as pretty-printed JSON.
pub fn json(plan: &Plan) -> String {
    // Serialising plain data with string keys cannot fail; fall back to the Debug
    // form rather than panic if it ever did.
    serde_json::to_string_pretty(plan)
        .unwrap_or_else(|e| format!("{{\"error\": {:?}}}", e.to_string()))
}

/// A host prefix as a bare address (as cloud-init writes `from:`), anything else as CIDR.
fn host_or_net(n: &IpNet) -> String {
    if n.prefix_len() == n.max_prefix_len() {
        n.addr().to_string()
    } else {
        n.to_string()
    }
}

/// The plan as a netplan v2 document: `{"network": {"version": 2, "ethernets": ...}}`.
pub fn netplan(plan: &Plan) -> Value {
    let mut ethernets = Map::new();
    for ip in &plan.interfaces {
        ethernets.insert(ip.name.to_string(), netplan_ethernet(ip));
    }
    json!({"network": {"version": 2, "ethernets": ethernets}})
}

fn netplan_ethernet(ip: &InterfacePlan) -> Value {
    let mut e = Map::new();
    e.insert("match".into(), json!({"macaddress": ip.mac.to_string()}));
    e.insert("set-name".into(), json!(ip.name.to_string()));
    e.insert("dhcp4".into(), json!(true));
    let dhcp6 = ip.families.contains(&Family::V6);
    e.insert("dhcp6".into(), json!(dhcp6));
    if let Some(metric) = ip.metric {
        let mut ov = Map::new();
        ov.insert("route-metric".into(), json!(metric));
        if ip.table.is_some() {
            ov.insert("use-routes".into(), json!(true));
        }
        let ov = Value::Object(ov);
        e.insert("dhcp4-overrides".into(), ov.clone());
        if dhcp6 {
            e.insert("dhcp6-overrides".into(), ov);
        }
    }
    if !ip.addresses.is_empty() {
        e.insert(
            "addresses".into(),
            ip.addresses
                .iter()
                .map(|a| json!(a.addr.to_string()))
                .collect(),
        );
    }
    if !ip.routes.is_empty() {
        let routes = ip.routes.iter().map(|r| {
            let mut m = Map::new();
            m.insert("to".into(), json!(r.to.to_string()));
            if let Some(via) = r.via {
                m.insert("via".into(), json!(via.to_string()));
            }
            if r.scope == Some(Scope::Link) {
                m.insert("scope".into(), json!("link"));
            }
            if let Some(src) = r.src {
                m.insert("from".into(), json!(src.to_string()));
            }
            m.insert("table".into(), json!(r.table));
            Value::Object(m)
        });
        e.insert("routes".into(), routes.collect());
    }
    if !ip.rules.is_empty() {
        let rules = ip.rules.iter().map(|r| {
            let mut m = Map::new();
            // An operator's rule to a destination (`nics[].rules`) is `from all`:
            // netplan writes no `from` for it.
            if r.to.is_none() || r.from.prefix_len() > 0 {
                m.insert("from".into(), json!(host_or_net(&r.from)));
            }
            if let Some(to) = r.to {
                m.insert("to".into(), json!(host_or_net(&to)));
            }
            m.insert("table".into(), json!(r.table));
            if let Some(p) = r.priority {
                m.insert("priority".into(), json!(p));
            }
            Value::Object(m)
        });
        e.insert("routing-policy".into(), rules.collect());
    }
    Value::Object(e)
}

/// The plan as systemd-networkd drop-ins: `(file name, content)` per interface that
/// has anything to configure. The file goes into the `.network.d/` folder of the
/// `.network` file that matches the interface.
pub fn networkd(plan: &Plan) -> Vec<(String, String)> {
    let mut files = Vec::new();
    for ip in &plan.interfaces {
        let mut s = format!(
            "# leasehook: {} {} (profile {})\n",
            ip.name, ip.mac, plan.profile
        );
        if let Some(metric) = ip.metric {
            let _ = write!(s, "\n[DHCPv4]\nRouteMetric={metric}\n");
            if ip.table.is_some() {
                s.push_str("UseRoutes=true\n");
            }
        }
        for a in &ip.addresses {
            let _ = write!(s, "\n[Address]\nAddress={}\n", a.addr);
            // What the applier does (`noprefixroute`): the subnet's route is the
            // plan's, in the NIC's table, never the kernel's in main.
            if a.no_prefix_route() {
                s.push_str("AddPrefixRoute=no\n");
            }
        }
        for r in &ip.routes {
            let _ = write!(s, "\n[Route]\nDestination={}\n", r.to);
            if let Some(via) = r.via {
                let _ = writeln!(s, "Gateway={via}");
            }
            if r.scope == Some(Scope::Link) {
                s.push_str("Scope=link\n");
            }
            if let Some(src) = r.src {
                let _ = writeln!(s, "PreferredSource={src}");
            }
            let _ = writeln!(s, "Table={}", r.table);
        }
        for r in &ip.rules {
            s.push_str("\n[RoutingPolicyRule]\n");
            if r.to.is_none() || r.from.prefix_len() > 0 {
                let _ = writeln!(s, "From={}", r.from);
            }
            if let Some(to) = r.to {
                let _ = writeln!(s, "To={to}");
            }
            let _ = writeln!(s, "Table={}", r.table);
            if let Some(p) = r.priority {
                let _ = writeln!(s, "Priority={p}");
            }
        }
        if ip.metric.is_some()
            || !(ip.addresses.is_empty() && ip.routes.is_empty() && ip.rules.is_empty())
        {
            files.push((format!("{}.network.d/60-leasehook.conf", ip.name), s));
        }
    }
    files
}

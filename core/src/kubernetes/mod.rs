// SPDX-License-Identifier: Apache-2.0
//! Pure: whether this is a Kubernetes node with a VPC-native CNI, and which ENIs
//! are the CNI's (SPEC §3.7, `docs/kubernetes.md`). [`observe`] gathers what the
//! decision reads (performs IO).
//!
//! A VPC-native CNI (the AWS VPC CNI, Cilium in ENI mode) hands the ENIs' secondary
//! IPs and prefixes (the primary's included) to pods and routes them itself, with
//! rules of its own (512/1536; 20/111) and a table per ENI. On such a node:
//!
//! * no secondary IP or prefix of the primary ENI becomes an address of ours or a
//!   rule source ([`crate::plan::PlanConfig::kubernetes`]);
//! * an ENI the CNI routes ([`cni_role`]: a table someone else made holds a default
//!   route through it, or one of the CNI's rules points at a table routed through it)
//!   is left alone: a DHCP event on it is logged and skipped;
//! * every other ENI (`node.k8s.amazonaws.com/no_manage`, run with DHCP for the
//!   node's own use) is routed as on any instance;
//! * leasehook's rule priorities must come after the CNI's ([`check_priorities`]).
//!
//! The decision reads only what the CNI leaves on the node: its configuration file
//! in `etc/cni/net.d/` (below the root), its rules and routes, its pod veths. No
//! EC2 API call, no configuration needed; `kubernetes: on|off` overrides.

pub mod observe;

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::Serialize;

use crate::error::{Error, Problem, Result};
use crate::model::IfName;

/// The `main` routing table.
pub const MAIN_TABLE: u32 = 254;

/// The AWS VPC CNI's rule priorities: 512 `to POD lookup main`, 1536 `from POD
/// lookup <ENI table>` (1024 is reserved by it).
pub const AWS_VPC_CNI_PRIORITIES: [u32; 2] = [512, 1536];

/// Cilium's (ENI mode) rule priorities: 20 `to POD lookup main`, 110 and 111 `from
/// POD lookup <10 + ENI number>`.
pub const CILIUM_PRIORITIES: [u32; 3] = [20, 110, 111];

/// The highest (last-matching) priority a CNI rule has: every rule of ours must
/// come after it.
pub const CNI_LAST_PRIORITY: u32 = 1536;

/// The `kubernetes` configuration key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Detect from what the CNI leaves on the node (the default).
    #[default]
    Auto,
    /// A Kubernetes node, whatever detection says.
    On,
    /// Never a Kubernetes node: leasehook behaves as on any instance.
    Off,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::On => "on",
            Self::Off => "off",
        })
    }
}

impl std::str::FromStr for Mode {
    type Err = Problem;
    fn from_str(s: &str) -> std::result::Result<Self, Problem> {
        match s {
            "auto" => Ok(Self::Auto),
            "on" | "true" | "yes" => Ok(Self::On),
            "off" | "false" | "no" => Ok(Self::Off),
            _ => Err(Problem::bad("expected auto, on or off", s)),
        }
    }
}

/// A CNI leasehook recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Cni {
    /// The AWS VPC CNI (`aws-node`, amazon-vpc-cni-k8s).
    #[serde(rename = "aws-vpc-cni")]
    AwsVpc,
    /// Cilium (ENI mode routes pods through the ENIs).
    #[serde(rename = "cilium")]
    Cilium,
}

impl fmt::Display for Cni {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::AwsVpc => "AWS VPC CNI",
            Self::Cilium => "Cilium",
        })
    }
}

impl Cni {
    /// Its rule priorities.
    pub fn priorities(self) -> &'static [u32] {
        match self {
            Self::AwsVpc => &AWS_VPC_CNI_PRIORITIES,
            Self::Cilium => &CILIUM_PRIORITIES,
        }
    }

    /// The prefix of its host-side pod veths.
    pub fn veth_prefix(self) -> &'static str {
        match self {
            Self::AwsVpc => "eni",
            Self::Cilium => "lxc",
        }
    }

    /// Whether a file name in `etc/cni/net.d/` is this CNI's configuration.
    fn owns_conf(self, name: &str) -> bool {
        let conf = [".conflist", ".conf", ".json"]
            .iter()
            .any(|ext| name.ends_with(ext));
        let word = match self {
            Self::AwsVpc => "aws",
            Self::Cilium => "cilium",
        };
        conf && !name.starts_with('.') && name.to_ascii_lowercase().contains(word)
    }

    const ALL: [Self; 2] = [Self::AwsVpc, Self::Cilium];
}

/// A policy rule leasehook did not make (its protocol is not 176).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct ForeignRule {
    /// Its priority (0 when the kernel reports none).
    pub priority: u32,
    /// `from`, when it has a source selector.
    pub from: Option<IpNet>,
    /// `to`, when it has a destination selector.
    pub to: Option<IpNet>,
    /// `lookup`, for a rule that looks up a table (0 otherwise).
    pub table: u32,
}

/// A route leasehook did not make, in any table but `local`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct ForeignRoute {
    /// Its table.
    pub table: u32,
    /// Its destination.
    pub to: IpNet,
    /// Its gateway.
    pub via: Option<IpAddr>,
    /// Its output device, when it has one leasehook can name.
    pub dev: Option<IfName>,
}

/// Everything the decision reads, gathered by [`observe::node_view`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeView {
    /// File names in `<root>/etc/cni/net.d/`.
    pub cni_confs: Vec<String>,
    /// The rules of other owners.
    pub rules: Vec<ForeignRule>,
    /// The routes of other owners.
    pub routes: Vec<ForeignRoute>,
    /// The names of the links.
    pub links: Vec<IfName>,
}

/// What was decided and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// The configured mode.
    pub mode: Mode,
    /// Whether leasehook treats this as a Kubernetes node with a VPC-native CNI.
    pub node: bool,
    /// The CNIs found.
    pub cnis: Vec<Cni>,
    /// Why, one finding per item.
    pub why: Vec<String>,
}

impl Decision {
    /// One line: `Kubernetes node (AWS VPC CNI): <why>; ...`.
    pub fn summary(&self) -> String {
        let what = if self.node {
            let names: Vec<String> = self.cnis.iter().map(ToString::to_string).collect();
            if names.is_empty() {
                "Kubernetes node".to_owned()
            } else {
                format!("Kubernetes node ({})", names.join(", "))
            }
        } else {
            "not a Kubernetes node".to_owned()
        };
        format!("{what}: {}", self.why.join("; "))
    }
}

fn is_veth_of(cni: Cni, name: &IfName) -> bool {
    name.as_str().starts_with(cni.veth_prefix())
}

/// The CNI's rule signature: `to POD lookup main` at its first priority, or `from
/// POD lookup T` (T not main) at one of the others.
fn has_rule_signature(cni: Cni, rules: &[ForeignRule]) -> Option<u32> {
    let prios = cni.priorities();
    rules.iter().find_map(|r| {
        let ingress = prios.first() == Some(&r.priority) && r.to.is_some() && r.table == MAIN_TABLE;
        let egress = prios.get(1..).is_some_and(|p| p.contains(&r.priority))
            && r.from.is_some()
            && r.table != MAIN_TABLE
            && r.table != 0;
        (ingress || egress).then_some(r.priority)
    })
}

/// Pod veths: links named like the CNI's with a /32 or /128 route of someone else.
fn pod_veths(cni: Cni, view: &NodeView) -> Vec<&IfName> {
    let host_routed: std::collections::BTreeSet<&IfName> = view
        .routes
        .iter()
        .filter(|r| r.to.prefix_len() == r.to.max_prefix_len())
        .filter_map(|r| r.dev.as_ref())
        .filter(|d| is_veth_of(cni, d))
        .collect();
    host_routed.into_iter().collect()
}

/// Decides (see the module docs): in `auto`, a node is a Kubernetes node when a
/// recognised CNI's configuration is in `etc/cni/net.d/`, or the kernel holds that
/// CNI's rules; its pod veths are reported but are not enough alone (a link name
/// proves little).
pub fn decide(mode: Mode, view: &NodeView) -> Decision {
    let mut why = Vec::new();
    let mut cnis = Vec::new();
    if mode == Mode::Off {
        return Decision {
            mode,
            node: false,
            cnis,
            why: vec!["kubernetes: off (configuration)".to_owned()],
        };
    }
    for cni in Cni::ALL {
        let mut confs: Vec<&String> = view.cni_confs.iter().filter(|n| cni.owns_conf(n)).collect();
        confs.sort();
        let rule = has_rule_signature(cni, &view.rules);
        let veths = pod_veths(cni, view);
        if !confs.is_empty() {
            let list: Vec<&str> = confs.iter().map(|s| s.as_str()).collect();
            why.push(format!(
                "{cni} configuration etc/cni/net.d/{}",
                list.join(", ")
            ));
        }
        if let Some(p) = rule {
            why.push(format!("{cni} rule at priority {p}"));
        }
        if !veths.is_empty() {
            why.push(format!(
                "{} pod veth(s) {}* with their /32 routes",
                veths.len(),
                cni.veth_prefix()
            ));
        }
        if !confs.is_empty() || rule.is_some() {
            cnis.push(cni);
        }
    }
    let node = mode == Mode::On || !cnis.is_empty();
    if mode == Mode::On {
        why.insert(0, "kubernetes: on (configuration)".to_owned());
    } else if why.is_empty() {
        why.push("no CNI configuration in etc/cni/net.d, no CNI rule".to_owned());
    } else if !node {
        why.push("no CNI configuration or rule: not enough".to_owned());
    }
    Decision {
        mode,
        node,
        cnis,
        why,
    }
}

/// Whether `iface` is an ENI the CNI routes, and why: a table other than main
/// holds a default route through it that someone else made (the CNI's per-ENI
/// table: the AWS VPC CNI's `device-number + 1`, Cilium's `10 + ENI number`), or a
/// rule at a CNI priority looks up a table with a route through it. `None`: not
/// the CNI's, route it as on any instance. Only meaningful on a Kubernetes node.
pub fn cni_role(view: &NodeView, iface: &IfName) -> Option<String> {
    let other_table = |t: u32| !crate::constants::RESERVED_TABLES.contains(&t);
    // One pass over the routes: the tables routed via the ENI.
    let mut tables = std::collections::BTreeSet::new();
    for r in view.routes.iter().filter(|r| r.dev.as_ref() == Some(iface)) {
        if other_table(r.table) && r.to.prefix_len() == 0 {
            return Some(format!(
                "table {} holds a default route via {iface} that another tool made (a CNI's per-ENI table)",
                r.table
            ));
        }
        tables.insert(r.table);
    }
    view.rules
        .iter()
        .filter(|r| other_table(r.table) && tables.contains(&r.table))
        .find(|r| {
            Cni::ALL
                .iter()
                .any(|c| c.priorities().contains(&r.priority))
        })
        .map(|r| {
            format!(
                "the CNI's rule at priority {} looks up table {}, routed via {iface}",
                r.priority, r.table
            )
        })
}

/// Every link [`cni_role`] takes for the CNI's ENI, with why (for `status`).
pub fn cni_enis(view: &NodeView) -> Vec<(IfName, String)> {
    view.links
        .iter()
        .filter_map(|l| cni_role(view, l).map(|why| (l.clone(), why)))
        .collect()
}

/// On a Kubernetes node every rule of ours must come after the CNI's: refuses a
/// `priority_base` at or below 1536 ([`CNI_LAST_PRIORITY`]). Every priority the
/// planner makes is `priority_base + 100 * card + device`, never below the base.
pub fn check_priorities(node: bool, priority_base: u32) -> Result<()> {
    if !node || priority_base > CNI_LAST_PRIORITY {
        return Ok(());
    }
    Err(Error::Argument {
        arg: "priority_base".to_owned(),
        problem: Problem::bad(
            format!(
                "on a Kubernetes node leasehook's rules must come after the CNI's (priority {CNI_LAST_PRIORITY}): nothing changed"
            ),
            &priority_base.to_string(),
        ),
    })
}

#[cfg(test)]
mod tests;

// SPDX-License-Identifier: Apache-2.0
//! Performs IO (reads only): which other policy-routing tools an image carries,
//! found from their files below a root (`/`, or a test's fake root), so `init`
//! and `status` can say so and a conflict can name its owner (SPEC §3.11).
//!
//! Every path is reached from the root one name at a time without following a
//! symlink ([`crate::fs::Dir`]): a link planted in a fake root, or a loop, is
//! never followed out of it (it reads as absent), a FIFO does not block, a file is
//! read up to [`LIMIT`] bytes and a folder listed up to [`MAX_NAMES`] names. The
//! one symlink read is a unit's or udev rule's, for what it points at
//! (`/dev/null`: masked). Install paths and names are the tools' own; their
//! sources are cited in `docs/migrating.md`.

use std::fmt;
use std::path::Path;

use crate::fs::{Dir, Entry};

/// The most bytes read from one file.
pub const LIMIT: u64 = 256 * 1024;
/// The most names looked at in one folder.
pub const MAX_NAMES: usize = 4096;

/// A routing tool that may fight leasehook over a NIC's tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tool {
    /// amazon-ec2-net-utils (v2): udev → `policy-routes@IF`, networkd drop-ins,
    /// tables and priorities 10000 + 100·card + device.
    Ec2NetUtils,
    /// cloud-init rendering policy routing (netplan `routing-policy`, networkd
    /// `[RoutingPolicyRule]`), tables 100 + i.
    CloudInit,
    /// cloud-init's hot-plug udev rule (re-renders the network on a NIC add).
    CloudInitHotplug,
    /// NetworkManager's nm-cloud-setup, tables 30200 + i and 30400 + i.
    NmCloudSetup,
    /// SUSE's cloud-netconfig, tables 30000 + ifindex and 30400 + ifindex.
    CloudNetconfig,
    /// google-guest-agent's NIC setup (routes of protocol 66 for forwarded IPs).
    GuestAgent,
}

impl Tool {
    /// Its name, as its package calls it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ec2NetUtils => "amazon-ec2-net-utils",
            Self::CloudInit => "cloud-init policy routing",
            Self::CloudInitHotplug => "cloud-init hotplug",
            Self::NmCloudSetup => "nm-cloud-setup",
            Self::CloudNetconfig => "cloud-netconfig",
            Self::GuestAgent => "google-guest-agent",
        }
    }

    /// Whether a route of table `table` and protocol `protocol` may be this
    /// tool's, by the numbers it is known to use.
    pub fn may_own(self, table: u32, protocol: u8) -> bool {
        match self {
            Self::Ec2NetUtils => (10000..20000).contains(&table),
            Self::CloudInit | Self::CloudInitHotplug => (100..200).contains(&table),
            Self::NmCloudSetup => (30200..30500).contains(&table),
            Self::CloudNetconfig => {
                (30000..30200).contains(&table) || (30400..30600).contains(&table)
            }
            Self::GuestAgent => protocol == 66,
        }
    }
}

/// One tool found: which, the file that showed it, and whether it acts now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The tool.
    pub tool: Tool,
    /// The file that showed it, absolute as on the instance (without the root).
    pub path: String,
    /// What the file says (`udev rule`, `routing-policy in netplan`, ...).
    pub what: String,
    /// It acts on NICs now (not masked, enabled, not switched off in its config).
    pub active: bool,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.active { "active" } else { "inactive" };
        write!(
            f,
            "{} ({state}: {} {})",
            self.tool.name(),
            self.what,
            self.path
        )
    }
}

/// The findings as one line: `none`, or each one, `; `-separated.
pub fn summary(found: &[Finding]) -> String {
    if found.is_empty() {
        return "none".to_owned();
    }
    found
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The findings as a JSON list of `{tool, path, what, active}`.
pub fn json(found: &[Finding]) -> serde_json::Value {
    found
        .iter()
        .map(|f| {
            serde_json::json!({
                "tool": f.tool.name(),
                "path": f.path,
                "what": f.what,
                "active": f.active,
            })
        })
        .collect()
}

/// Whether any tool found acts now: `status` is then degraded.
pub fn any_active(found: &[Finding]) -> bool {
    found.iter().any(|f| f.active)
}

/// The tools found active that may own a route of `table` and `protocol`,
/// named: `amazon-ec2-net-utils's (found: /usr/lib/...)`; empty when none.
pub fn owner_of(found: &[Finding], table: u32, protocol: u8) -> String {
    let mut names: Vec<String> = Vec::new();
    for f in found
        .iter()
        .filter(|f| f.active && f.tool.may_own(table, protocol))
    {
        let n = format!("{}'s (found: {})", f.tool.name(), f.path);
        if !names.iter().any(|m| m.starts_with(f.tool.name())) {
            names.push(n);
        }
    }
    names.join(" or ")
}

/// A root's files, reached without following a symlink.
struct Root(Option<Dir>);

impl Root {
    /// The folder `rel` (`a/b/c`); `None` when it is missing or cannot be
    /// reached without a symlink.
    fn dir(&self, rel: &str) -> Option<Dir> {
        let mut d = self.0.as_ref()?.child(".").ok()??;
        for part in rel.split('/').filter(|p| !p.is_empty()) {
            d = d.child(part).ok()??;
        }
        Some(d)
    }

    /// The folder and the last name of `rel`.
    fn parent(&self, rel: &str) -> Option<(Dir, String)> {
        let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        Some((self.dir(dir)?, name.to_owned()))
    }

    /// What is at `rel` (a symlink is not followed).
    fn entry(&self, rel: &str) -> Entry {
        self.parent(rel)
            .and_then(|(d, n)| d.entry(&n).ok())
            .unwrap_or(Entry::Missing)
    }

    /// A regular file's text (bytes that are not UTF-8 replaced), up to [`LIMIT`].
    fn text(&self, rel: &str) -> Option<String> {
        let (d, n) = self.parent(rel)?;
        let bytes = d.read(&n, LIMIT).ok()??;
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// A file that is there and not masked: not a symlink to `/dev/null`, not empty.
    fn effective(&self, rel: &str) -> bool {
        match self.entry(rel) {
            Entry::File => self.text(rel).is_some_and(|t| !t.trim().is_empty()),
            Entry::Symlink => self
                .parent(rel)
                .and_then(|(d, n)| d.read_link(&n).ok().flatten())
                .is_some_and(|t| t != "/dev/null"),
            _ => false,
        }
    }

    /// The names in folder `rel`, at most [`MAX_NAMES`].
    fn names(&self, rel: &str) -> Vec<String> {
        let mut names = self
            .dir(rel)
            .and_then(|d| d.names().ok())
            .unwrap_or_default();
        names.truncate(MAX_NAMES);
        names
    }

    /// The first of `rels` that is there (a file or a link), as an absolute path.
    fn first(&self, rels: &[&str]) -> Option<String> {
        rels.iter()
            .find(|r| self.entry(r) != Entry::Missing)
            .map(|r| format!("/{r}"))
    }

    /// The `*.wants/` link that enables a unit whose name starts with `prefix`
    /// (`/etc/systemd/system/timers.target.wants/nm-cloud-setup.timer`).
    fn wanted(&self, prefix: &str) -> Option<String> {
        const ETC: &str = "etc/systemd/system";
        self.names(ETC)
            .iter()
            .filter(|n| Path::new(n).extension().is_some_and(|e| e == "wants"))
            .find_map(|w| {
                let dir = format!("{ETC}/{w}");
                self.names(&dir)
                    .into_iter()
                    .find(|n| n.starts_with(prefix) && self.effective(&format!("{dir}/{n}")))
                    .map(|n| format!("/{dir}/{n}"))
            })
    }
}

/// Folders where a package puts its udev rules and units (`/lib` only where it
/// is a folder of its own, not merged-usr's link).
const UDEV: [&str; 2] = ["usr/lib/udev/rules.d", "lib/udev/rules.d"];
const UNITS: [&str; 2] = ["usr/lib/systemd/system", "lib/systemd/system"];

fn in_each(dirs: &[&str], name: &str) -> Vec<String> {
    dirs.iter().map(|d| format!("{d}/{name}")).collect()
}

fn first_of(root: &Root, dirs: &[&str], name: &str) -> Option<String> {
    let rels = in_each(dirs, name);
    root.first(&rels.iter().map(String::as_str).collect::<Vec<_>>())
}

/// amazon-ec2-net-utils' udev rule, as it installs it.
const EC2_NET_UTILS_RULE: &str = "99-vpc-policy-routes.rules";
/// cloud-init's netplan file.
const NETPLAN: &str = "etc/netplan/50-cloud-init.yaml";
/// cloud-init's flag that turns its packaged hotplug rule on.
const HOTPLUG_FLAG: &str = "var/lib/cloud/hotplug.enabled";
/// cloud-netconfig's switch (its defaults file, an ifcfg file).
const MANAGE: &str = "CLOUD_NETCONFIG_MANAGE";
/// google-guest-agent's configuration (then `.distro`, `.template`).
const GUEST_CFG: &str = "etc/default/instance_configs.cfg";

/// The tools found below `root`, in [`Tool`] order. Never fails: what cannot be
/// read is not there.
pub fn detect(root: &Path) -> Vec<Finding> {
    let root = Root(Dir::open_trusted(root, false).ok().flatten());
    let mut found = Found(Vec::new());
    ec2_net_utils(&root, &mut found);
    cloud_init(&root, &mut found);
    nm_cloud_setup(&root, &mut found);
    cloud_netconfig(&root, &mut found);
    guest_agent(&root, &mut found);
    found.0
}

/// The findings so far.
struct Found(Vec<Finding>);

impl Found {
    fn add(&mut self, tool: Tool, path: String, what: &str, active: bool) {
        self.0.push(Finding {
            tool,
            path,
            what: what.to_owned(),
            active,
        });
    }
}

/// Its udev rule (masked by a same-named `/etc` link to `/dev/null`), else its
/// unit; a unit enabled; what it wrote in `/run` this boot.
fn ec2_net_utils(root: &Root, found: &mut Found) {
    let mask = format!("etc/udev/rules.d/{EC2_NET_UTILS_RULE}");
    let masked = root.entry(&mask) != Entry::Missing && !root.effective(&mask);
    if let Some(p) = first_of(root, &UDEV, EC2_NET_UTILS_RULE) {
        found.add(Tool::Ec2NetUtils, p, "udev rule", !masked);
    } else if let Some(p) = first_of(root, &UNITS, "policy-routes@.service") {
        found.add(Tool::Ec2NetUtils, p, "unit", false);
    }
    if let Some(p) = root
        .wanted("policy-routes@")
        .or_else(|| root.wanted("refresh-policy-routes@"))
    {
        found.add(Tool::Ec2NetUtils, p, "unit enabled", true);
    }
    let net = "run/systemd/network";
    let dropin = root
        .names(net)
        .iter()
        .filter(|n| {
            (n.starts_with("70-") || n.starts_with("07-"))
                && Path::new(n).extension().is_some_and(|e| e == "d")
        })
        .find_map(|d| {
            root.names(&format!("{net}/{d}"))
                .into_iter()
                .find(|n| n.starts_with("ec2net_"))
                .map(|n| format!("/{net}/{d}/{n}"))
        });
    if let Some(p) = dropin {
        found.add(Tool::Ec2NetUtils, p, "networkd drop-in", true);
    }
}

/// Policy routing in what cloud-init rendered (netplan, networkd), and its
/// hot-plug rule or flag.
fn cloud_init(root: &Root, found: &mut Found) {
    if root
        .text(NETPLAN)
        .is_some_and(|t| t.contains("routing-policy"))
    {
        found.add(
            Tool::CloudInit,
            format!("/{NETPLAN}"),
            "routing-policy in",
            true,
        );
    }
    for dir in ["etc/systemd/network", "run/systemd/network"] {
        if let Some(n) = root.names(dir).into_iter().find(|n| {
            n.starts_with("10-cloud-init-")
                && root
                    .text(&format!("{dir}/{n}"))
                    .is_some_and(|t| t.contains("[RoutingPolicyRule]"))
        }) {
            let p = format!("/{dir}/{n}");
            found.add(Tool::CloudInit, p, "[RoutingPolicyRule] in", true);
        }
    }
    if root.entry(HOTPLUG_FLAG) == Entry::File {
        found.add(
            Tool::CloudInitHotplug,
            format!("/{HOTPLUG_FLAG}"),
            "flag",
            true,
        );
    }
    for name in [
        "10-cloud-init-hook-hotplug.rules",
        "90-cloud-init-hook-hotplug.rules",
    ] {
        let rel = format!("etc/udev/rules.d/{name}");
        if root.entry(&rel) != Entry::Missing {
            let on = root.effective(&rel);
            found.add(Tool::CloudInitHotplug, format!("/{rel}"), "udev rule", on);
        }
    }
}

/// nm-cloud-setup acts when enabled and a provider is switched on in a drop-in.
fn nm_cloud_setup(root: &Root, found: &mut Found) {
    let Some(p) = first_of(root, &UNITS, "nm-cloud-setup.service") else {
        return;
    };
    let dropins = "etc/systemd/system/nm-cloud-setup.service.d";
    let provider = root.names(dropins).iter().any(|n| {
        root.text(&format!("{dropins}/{n}"))
            .is_some_and(|t| t.lines().any(nm_provider_on))
    });
    match root.wanted("nm-cloud-setup.") {
        Some(w) if provider => found.add(Tool::NmCloudSetup, w, "enabled, a provider on:", true),
        Some(w) => found.add(Tool::NmCloudSetup, w, "enabled, no provider on:", false),
        None => found.add(Tool::NmCloudSetup, p, "unit, not enabled:", false),
    }
}

/// cloud-netconfig: under NetworkManager its dispatcher script acts when its
/// defaults say `CLOUD_NETCONFIG_MANAGE="yes"` (`/usr/etc`, then `/etc`); under
/// wicked its netconfig module acts for each ifcfg file that says so.
fn cloud_netconfig(root: &Root, found: &mut Found) {
    if let Some(p) = root.first(&[
        "usr/lib/NetworkManager/dispatcher.d/90-cloud-netconfig",
        "etc/NetworkManager/dispatcher.d/90-cloud-netconfig",
    ]) {
        let on = [
            "usr/etc/default/cloud-netconfig",
            "etc/default/cloud-netconfig",
        ]
        .iter()
        .filter_map(|r| root.text(r).and_then(|t| shell_var(&t, MANAGE)))
        .next_back()
        .is_some_and(|v| v == "yes");
        found.add(
            Tool::CloudNetconfig,
            p,
            "NetworkManager dispatcher script",
            on,
        );
    }
    if let Some(p) = root.first(&["etc/netconfig.d/cloud-netconfig"]) {
        let sys = "etc/sysconfig/network";
        let on = root.names(sys).iter().any(|n| {
            n.starts_with("ifcfg-")
                && root
                    .text(&format!("{sys}/{n}"))
                    .and_then(|t| shell_var(&t, MANAGE))
                    .is_some_and(|v| v == "yes")
        });
        found.add(Tool::CloudNetconfig, p, "netconfig module", on);
    }
}

/// google-guest-agent: its unit, enabled, with `[NetworkInterfaces] setup` on
/// (the default; the last of its three files to say wins).
fn guest_agent(root: &Root, found: &mut Found) {
    let Some(p) = first_of(root, &UNITS, "google-guest-agent.service") else {
        return;
    };
    let setup = [
        GUEST_CFG.to_owned(),
        format!("{GUEST_CFG}.distro"),
        format!("{GUEST_CFG}.template"),
    ]
    .iter()
    .filter_map(|r| {
        root.text(r)
            .and_then(|t| ini_bool(&t, "networkinterfaces", "setup"))
    })
    .next_back()
    .unwrap_or(true);
    match root.wanted("google-guest-agent.service") {
        Some(w) if setup => found.add(Tool::GuestAgent, w, "NIC setup on:", true),
        Some(w) => found.add(Tool::GuestAgent, w, "NIC setup off:", false),
        None => found.add(Tool::GuestAgent, p, "unit, not enabled:", false),
    }
}

/// `Environment=NM_CLOUD_SETUP_<P>=yes` (quoted or not) on a drop-in's line.
fn nm_provider_on(line: &str) -> bool {
    let l = line
        .trim()
        .trim_start_matches("Environment=")
        .replace('"', "");
    l.split_whitespace().any(|kv| {
        kv.strip_prefix("NM_CLOUD_SETUP_")
            .and_then(|r| r.split_once('='))
            .is_some_and(|(k, v)| k != "LOG" && !k.ends_with("_HOST") && v == "yes")
    })
}

/// The last value of shell variable `name` in a sourced defaults file, unquoted.
fn shell_var(text: &str, name: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix(name)?.trim_start().strip_prefix('='))
        .map(|v| v.trim().trim_matches(['"', '\'']).to_owned())
        .next_back()
}

/// Key `key` of INI section `section` (both case-insensitive) as a boolean, when
/// the file sets it (the last setting wins).
fn ini_bool(text: &str, section: &str, key: &str) -> Option<bool> {
    let mut here = false;
    let mut value = None;
    for l in text.lines().map(str::trim) {
        if let Some(s) = l.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            here = s.trim().eq_ignore_ascii_case(section);
        } else if here
            && let Some((k, v)) = l.split_once('=')
            && k.trim().eq_ignore_ascii_case(key)
        {
            value = match v.trim().to_ascii_lowercase().as_str() {
                "true" | "yes" | "1" | "on" => Some(true),
                "false" | "no" | "0" | "off" => Some(false),
                _ => value,
            };
        }
    }
    value
}

/// A route protocol as `ip` names it (`/etc/iproute2/rt_protos`), else its number.
pub fn protocol_name(p: u8) -> String {
    match p {
        2 => "kernel".to_owned(),
        3 => "boot".to_owned(),
        4 => "static".to_owned(),
        9 => "ra".to_owned(),
        16 => "dhcp".to_owned(),
        n => n.to_string(),
    }
}

#[cfg(test)]
mod tests;

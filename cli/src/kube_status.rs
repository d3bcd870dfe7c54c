// SPDX-License-Identifier: Apache-2.0
//! The Kubernetes part of `leasehook status` and `leasehook config show`: what the
//! hooks decide about this node (`kubernetes: auto|on|off`, SPEC §3.7) and why,
//! from the files below the root and the kernel's rules and routes (read-only).

use std::fmt::Write as _;
use std::path::Path;

use leasehook_core::apply::netlink::NetlinkApplier;
use leasehook_core::kubernetes::{self, Decision, Mode, NodeView};
use serde_json::{Value, json};

/// The decision and the CNI's ENIs, or why it could not be made.
fn decide(mode: Mode, root: &Path) -> leasehook_core::Result<(Decision, NodeView)> {
    let mut applier = NetlinkApplier::try_new()?;
    kubernetes::observe::detect(mode, root, &mut applier)
}

/// `kubernetes: ...` lines, each starting with `prefix` (`""` for status, `"# "`
/// for config show).
pub(crate) fn text(mode: Mode, root: &Path, prefix: &str) -> String {
    let mut out = String::new();
    match decide(mode, root) {
        Err(e) => {
            let _ = writeln!(out, "{prefix}kubernetes: not decided ({e})");
        }
        Ok((d, view)) => {
            let _ = writeln!(out, "{prefix}kubernetes ({mode}): {}", d.summary());
            if d.node {
                let _ = writeln!(
                    out,
                    "{prefix}  the primary's secondary IPs and prefixes are left to the pods"
                );
                for (eni, why) in kubernetes::cni_enis(&view) {
                    let _ = writeln!(out, "{prefix}  {eni}: the CNI's, left alone ({why})");
                }
            }
        }
    }
    out
}

/// The `kubernetes` member of the JSON status.
pub(crate) fn json(mode: Mode, root: &Path) -> Value {
    match decide(mode, root) {
        Err(e) => json!({"mode": mode, "error": e.to_string()}),
        Ok((d, view)) => {
            let enis: serde_json::Map<String, Value> = if d.node {
                kubernetes::cni_enis(&view)
                    .into_iter()
                    .map(|(n, why)| (n.to_string(), json!(why)))
                    .collect()
            } else {
                serde_json::Map::new()
            };
            json!({"mode": d.mode, "node": d.node, "cnis": d.cnis, "why": d.why, "cni_enis": enis})
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the Kubernetes gate (SPEC §3.7, [`crate::kubernetes`]) the hook,
//! the worker and `refresh` ask before planning a NIC: on a node with a
//! VPC-native CNI the CNI's ENIs are left alone, and what leasehook applied to
//! one before the CNI took it over goes.

use super::HookConfig;
use super::effects::Kernel;
use crate::apply::state::{self, Paths};
use crate::error::Result;
use crate::model::IfName;

/// What the Kubernetes decision says about planning one interface.
pub(super) enum Gate {
    /// Plan with this configuration (on a Kubernetes node: the primary's pod
    /// addresses left out).
    Plan(Box<HookConfig>),
    /// The CNI's ENI, and why: left alone.
    Cni(String),
}

/// The one place the hooks, the worker and `refresh` ask whether this is a
/// Kubernetes node and whether `name` is the CNI's ENI. On such a node a
/// `priority_base` that would put leasehook's rules before the CNI's is refused.
pub(super) fn kubernetes_gate(
    kernel: &mut dyn Kernel,
    cfg: &HookConfig,
    name: &IfName,
) -> Result<Gate> {
    let (decision, view) = kernel.node_view(cfg.kubernetes, &cfg.root)?;
    if !decision.node {
        return Ok(Gate::Plan(Box::new(cfg.clone())));
    }
    crate::kubernetes::check_priorities(
        true,
        cfg.plan.priority_base.unwrap_or(cfg.plan.table_base),
    )?;
    if let Some(why) = crate::kubernetes::cni_role(&view, name) {
        return Ok(Gate::Cni(format!(
            "{name} is the CNI's ENI ({why}) on this {}: left alone",
            decision.summary()
        )));
    }
    log::debug!("{}", decision.summary());
    let mut cfg = cfg.clone();
    cfg.plan.kubernetes = true;
    Ok(Gate::Plan(Box::new(cfg)))
}

/// Leaves the CNI's ENI `name` to the CNI: what leasehook applied to it before
/// (from before the CNI took it over) goes, only leasehook's own objects (protocol
/// 176). Returns the message to log.
pub(super) fn leave_to_cni(
    applier: &mut dyn Kernel,
    paths: &Paths,
    name: &IfName,
    why: &str,
) -> Result<String> {
    let Some(recorded) = state::read_state_or_set_aside(paths, name) else {
        return Ok(why.to_owned());
    };
    let report = crate::commit::remove(applier, paths, name, None, Some(recorded))?;
    for e in &report.errors {
        log::warn!("{e}");
    }
    Ok(format!(
        "{why}; removed {} object(s) leasehook had applied to it",
        report.writes()
    ))
}

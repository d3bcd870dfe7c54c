// SPDX-License-Identifier: Apache-2.0
//! Pure: the one "is it complete" check of every cloud's consistency wait. What
//! the metadata fetched so far lacks for one NIC event is decided by the planner
//! itself, asked to plan just that NIC with its leases: the wait and the plan
//! cannot disagree about "complete", whatever the cloud.

use crate::error::Result;
use crate::model::{InstanceNetwork, Link, Missing, Profile};
use crate::plan::{InterfaceLease, PlanConfig, PlanInput, plan};

use super::{Assessment, NicEvent};

/// The configuration the check plans with: the `ec2-net-utils` scheme (the
/// table from the device number or the cloud's slot), the defaults otherwise.
pub fn check_config() -> PlanConfig {
    PlanConfig {
        profile: Profile::Ec2NetUtils,
        ..PlanConfig::default()
    }
}

/// What `network` says about `event` with [`check_config`]: the network, and
/// what its plan still lacks.
pub fn assess(event: &NicEvent, network: InstanceNetwork) -> Result<Assessment> {
    let missing = missing(event, &network, &check_config())?;
    Ok(Assessment { network, missing })
}

#[cfg(test)]
thread_local! {
    /// How many plans this thread's completeness checks made ([`missing`]):
    /// with the hook's own, every plan of an event, its wait included.
    pub(crate) static CHECKS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The metadata items `event`'s NIC's plan under `cfg` still lacks in `network`
/// (its link alone, its leases), sorted, each once. Fails when the planner
/// refuses the input.
pub fn missing(
    event: &NicEvent,
    network: &InstanceNetwork,
    cfg: &PlanConfig,
) -> Result<Vec<Missing>> {
    #[cfg(test)]
    CHECKS.with(|n| n.set(n.get() + 1));
    let links = [Link {
        name: event.interface().clone(),
        mac: event.mac(),
        ipv6_router: None,
    }];
    let leases: Vec<InterfaceLease> = event
        .leases()
        .iter()
        .map(|l| InterfaceLease {
            interface: event.interface().clone(),
            lease: l.clone(),
        })
        .collect();
    let p = plan(
        &PlanInput {
            metadata: network,
            links: &links,
            leases: &leases,
            link_addresses: &[],
            next_hops: &[],
        },
        cfg,
    )?;
    let mut missing: Vec<Missing> = p
        .interfaces
        .into_iter()
        .flat_map(|i| i.missing)
        .filter(Missing::is_metadata)
        .collect();
    missing.sort();
    missing.dedup();
    Ok(missing)
}

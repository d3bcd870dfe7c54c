// SPDX-License-Identifier: Apache-2.0
//! Pure: which NICs the `unmanaged` configuration key leaves alone, by name or
//! MAC before anything is asked, and by what the metadata says of a NIC
//! (`device-number:N`, `network-card:N`, `interface-id:ID`) before anything is
//! planned.

use super::HookConfig;
use crate::config;
use crate::model::{IfName, InstanceNetwork, MacAddr};

impl HookConfig {
    /// Whether the NIC `name` (MAC `mac`, when known) is listed in `unmanaged`.
    pub fn is_unmanaged(&self, name: &IfName, mac: Option<MacAddr>) -> bool {
        self.unmanaged.iter().any(|u| u.matches(name, mac))
    }
}

/// What the `unmanaged` entries that need the metadata (`device-number:N`,
/// `network-card:N`, `interface-id:ID`) say of the NIC `mac`, asked right after
/// the metadata is read and before anything is planned: `Some((true, why))`
/// when an entry names it, `Some((false, why))` when, with `partial`, one might
/// and the metadata does not say yet (nothing is applied then either); `None`
/// when the NIC is leasehook's.
pub(super) fn unmanaged_by_metadata(
    cfg: &HookConfig,
    network: &InstanceNetwork,
    mac: MacAddr,
    partial: bool,
) -> Option<(bool, String)> {
    match config::unmanaged_by_metadata(&cfg.unmanaged, network.nic(mac)) {
        config::MetadataVerdict::Managed => None,
        config::MetadataVerdict::Unmanaged(u) => Some((
            true,
            format!("unmanaged (configuration key unmanaged, entry {u}): left alone"),
        )),
        config::MetadataVerdict::Unknown(u) => partial.then(|| {
            (
                false,
                format!(
                    "the metadata does not say yet whether the unmanaged entry {u} names \
                     this NIC: nothing applied"
                ),
            )
        }),
    }
}

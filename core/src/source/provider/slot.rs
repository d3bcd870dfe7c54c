// SPDX-License-Identifier: Apache-2.0
//! Pure: the table slot of a NIC whose cloud gives it no device number
//! (Alibaba, `OpenStack`, Oracle): a function of its MAC, so a NIC keeps its
//! table whatever its place in the metadata's list.

use crate::model::MacAddr;

/// The number of table slots a NIC's MAC is spread over (`1..=SLOTS`).
pub const SLOTS: u32 = 9_999;

/// The NIC's table slot: its MAC (all 48 bits, big-endian) modulo [`SLOTS`], plus
/// one, so never 0.
pub fn device_slot(mac: MacAddr) -> u32 {
    let mut wide = [0u8; 8];
    if let Some(tail) = wide.get_mut(2..) {
        tail.copy_from_slice(&mac.octets());
    }
    let n = u64::from_be_bytes(wide) % u64::from(SLOTS);
    // n < SLOTS, so it fits.
    u32::try_from(n).map_or(1, |n| n + 1)
}

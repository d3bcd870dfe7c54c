// SPDX-License-Identifier: Apache-2.0
//! Support code for leasehook's end-to-end and differential tests.

/// Whether the tests run in CI, where a missing prerequisite must fail the test
/// instead of skipping it.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| v == "true" || v == "1")
}

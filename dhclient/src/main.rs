// SPDX-License-Identifier: Apache-2.0
//! `leasehook-dhclient`: run by the dhclient exit hook with dhclient-script's
//! environment. For now it parses and reports the lease event; fetching metadata and
//! applying the plan arrive with the applier and IMDS client.
//!
//! Exit codes: 0 the event was understood, 2 the environment was malformed. The hook
//! ignores the status either way: a DHCP lease must never fail because of us.

#![allow(clippy::print_stderr)]

use std::process::ExitCode;

use anyhow::Context as _;
use leasehook_core::event::{Env, dhclient};

fn run() -> anyhow::Result<()> {
    // Non-UTF-8 variables cannot be any of the ones we read; skip them.
    let env: Env = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let event = dhclient::parse(&env).context("failed to read dhclient's environment")?;
    eprintln!(
        "leasehook-dhclient: {} {} on {}: {:?}",
        event.family,
        event.reason,
        event.interface,
        event.action()
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("leasehook-dhclient: {e:#}");
            ExitCode::from(2)
        }
    }
}

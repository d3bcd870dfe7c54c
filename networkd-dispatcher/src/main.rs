// SPDX-License-Identifier: Apache-2.0
//! `leasehook-networkd`: run by networkd-dispatcher with the link's state in its
//! environment. For now it parses and reports the state change; reading the lease
//! file, fetching metadata and applying arrive with the networkd integration.
//!
//! Exit codes: 0 the event was understood, 2 the environment was malformed.

#![allow(clippy::print_stderr)]

use std::process::ExitCode;

use anyhow::Context as _;
use leasehook_core::event::{Env, networkd};

fn run() -> anyhow::Result<()> {
    let env: Env = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let event = networkd::parse_dispatcher(&env)
        .context("failed to read networkd-dispatcher's environment")?;
    eprintln!("leasehook-networkd: {} is {}", event.iface, event.state);
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("leasehook-networkd: {e:#}");
            ExitCode::from(2)
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
//! The cloud table of the tests (issue 32, item 3): one row per cloud leasehook
//! serves, with what a test needs to run the same scenario on each — the
//! `provider` value, the environment that points the hook at the cloud's
//! emulator, the emulator binary and its arguments for a scenario, the table the
//! world's secondary NIC (`eth1`, [`MAC1`]) gets and the token file the cloud
//! keeps. A test that repeats one shape for every cloud takes a [`Cloud`] and
//! runs for each of [`Cloud::ALL`] (the fault matrix's `renew` rows,
//! `tests/tests/faults/`); what only one cloud has stays in that cloud's tests.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::world::MAC1;

/// A cloud leasehook serves: Amazon EC2 (IMDSv2, the default provider), Google
/// Compute Engine, Microsoft Azure, Alibaba Cloud ECS, Oracle Cloud (OCI) and
/// `OpenStack` (its metadata service).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cloud {
    Ec2,
    Gce,
    Azure,
    Aliyun,
    Oracle,
    OpenStack,
}

/// An address nothing listens on: connections are refused at once.
pub const REFUSED: &str = "http://127.0.0.1:9";

impl Cloud {
    /// Every cloud, in the order the docs list them.
    pub const ALL: [Self; 6] = [
        Self::Ec2,
        Self::Gce,
        Self::Azure,
        Self::Aliyun,
        Self::Oracle,
        Self::OpenStack,
    ];

    /// The `provider` configuration value (`LEASEHOOK_PROVIDER`).
    pub fn provider(self) -> &'static str {
        match self {
            Self::Ec2 => "ec2",
            Self::Gce => "gce",
            Self::Azure => "azure",
            Self::Aliyun => "aliyun",
            Self::Oracle => "oracle",
            Self::OpenStack => "openstack",
        }
    }

    /// The environment that points the hook (or `leasehook refresh`) at this
    /// cloud's metadata service at `url`: EC2's endpoint list, or the provider and
    /// its `LEASEHOOK_<PROVIDER>_ENDPOINT` with EC2's endpoint refusing (so that
    /// asking the wrong service fails at once).
    pub fn env(self, url: &str) -> Vec<(String, String)> {
        let pair = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        match self {
            Self::Ec2 => vec![pair("LEASEHOOK_IMDS_ENDPOINTS", url)],
            _ => vec![
                pair("LEASEHOOK_IMDS_ENDPOINTS", REFUSED),
                pair("LEASEHOOK_PROVIDER", self.provider()),
                pair(
                    &format!("LEASEHOOK_{}_ENDPOINT", self.provider().to_uppercase()),
                    url,
                ),
            ],
        }
    }

    /// The emulator binary built beside the tests.
    pub fn emulator(self) -> &'static str {
        match self {
            Self::Ec2 => "imds-emulator",
            Self::Gce => "gce-emulator",
            Self::Azure => "azure-emulator",
            Self::Aliyun => "aliyun-emulator",
            Self::Oracle => "oracle-emulator",
            Self::OpenStack => "openstack-emulator",
        }
    }

    /// The emulator's log in `dir` (one request a line).
    pub fn log(self, dir: &Path) -> PathBuf {
        dir.join(format!("{}.log", self.emulator()))
    }

    /// The emulator's arguments to serve the world's instance on an address of
    /// its choosing on 127.0.0.1 (its first line), with `scenario` (each
    /// emulator's own rules: see its `--help`; Oracle's may also carry `vnics`,
    /// the list to serve), its files (log, scenario) in `dir`. `tree` replaces
    /// the world's metadata where the emulator takes one (EC2, `OpenStack`).
    /// EC2's requires the token (IMDSv2 only); Alibaba's is hardened and answers
    /// loopback.
    pub fn emulator_args(
        self,
        tree: Option<&Value>,
        scenario: &Value,
        dir: &Path,
    ) -> Vec<OsString> {
        let file = |name: &str, body: &Value| {
            let p = dir.join(name);
            std::fs::write(&p, body.to_string())
                .unwrap_or_else(|e| panic!("writing {}: {e}", p.display()));
            p
        };
        assert!(
            tree.is_none() || matches!(self, Self::Ec2 | Self::OpenStack),
            "{self:?}'s emulator takes no tree"
        );
        let mut args: Vec<OsString> = vec!["--bind".into(), "127.0.0.1:0".into()];
        match self {
            Self::Ec2 => {
                let tree = match tree {
                    Some(t) => file("imds-tree.json", t),
                    None => file("imds-tree.json", &crate::world::default_tree()),
                };
                args.extend(["--require-token".into(), "--tree".into(), tree.into()]);
                args.extend([
                    "--scenario".into(),
                    file("imds-scenario.json", scenario).into(),
                ]);
            }
            Self::Aliyun => {
                args.extend(["--allow".into(), "127.0.0.0/8".into(), "--scenario".into()]);
                args.push(file("aliyun-scenario.json", scenario).into());
            }
            Self::Oracle => {
                if let Some(v) = scenario.get("vnics") {
                    let f = file("oracle-vnics.json", v);
                    args.extend(["--vnics".into(), format!("@{}", f.display()).into()]);
                }
                let rules = json!({"rules": scenario.get("rules").cloned().unwrap_or(json!([]))});
                let f = file("oracle-scenario.json", &rules);
                args.extend(["--scenario".into(), format!("@{}", f.display()).into()]);
            }
            Self::Gce | Self::Azure | Self::OpenStack => {
                args.extend(["--scenario".into(), scenario.to_string().into()]);
                if let Some(t) = tree {
                    args.extend(["--tree".into(), t.to_string().into()]);
                }
            }
        }
        args.extend(["--log".into(), self.log(dir).into()]);
        args
    }

    /// The policy routing table the world's `eth1` ([`MAC1`]) gets: its
    /// device-number's (`10000 + 1`) where the cloud numbers NICs, else
    /// `10000 + slot(MAC)`.
    pub fn eth1_table(self) -> u32 {
        match self {
            Self::Ec2 | Self::Gce | Self::Azure => 10_001,
            Self::Aliyun | Self::Oracle | Self::OpenStack => {
                let mac = MAC1.parse().unwrap_or_else(|e| panic!("{MAC1}: {e:?}"));
                10_000 + leasehook_core::source::aliyun::nic::device_slot(mac)
            }
        }
    }

    /// The file (relative to the root) where the hook keeps the cloud's session
    /// token, for the clouds that have one.
    pub fn token_file(self) -> Option<&'static str> {
        match self {
            Self::Ec2 => Some("run/leasehook/imds-token"),
            Self::Aliyun => Some("run/leasehook/aliyun-token"),
            Self::Gce | Self::Azure | Self::Oracle | Self::OpenStack => None,
        }
    }

    /// Whether the cloud's DHCP serves a secondary NIC (Oracle's does not: a
    /// secondary VNIC is configured from the metadata by `leasehook refresh`).
    pub fn leases_secondary(self) -> bool {
        !matches!(self, Self::Oracle)
    }
}

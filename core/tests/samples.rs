// SPDX-License-Identifier: Apache-2.0
//! Every hook environment recorded from the real DHCP clients (`tests/data/`: ISC
//! dhclient 4.4.3 v4 and v6 against dnsmasq, networkd-dispatcher 2.2.3 driven by
//! systemd-networkd) parses, and each reason maps to the action SPEC §6 gives it.

#![cfg(test)]

use std::fs;
use std::path::Path;

use leasehook_core::event::{dhclient, networkd, parse_env_dump};
use leasehook_core::model::{Action, Family};

fn dumps(dir: &str) -> Vec<(String, leasehook_core::event::Env)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(dir);
    let mut files: Vec<_> = fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty());
    files
        .into_iter()
        .map(|f| {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            (
                name.clone(),
                parse_env_dump(&name, &fs::read_to_string(&f).unwrap()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn recorded_dhclient_environments() {
    for (dir, family) in [("dhclient-v4", Family::V4), ("dhclient-v6", Family::V6)] {
        for (name, env) in dumps(dir) {
            let ev = dhclient::parse(&env).unwrap_or_else(|e| panic!("{dir}/{name}: {e}"));
            assert_eq!(ev.family, family, "{name}");
            assert_eq!(ev.interface.as_str(), "eth0");
            let reason = env["reason"].trim_end_matches('6');
            let want = match reason {
                "BOUND" | "RENEW" | "REBOOT" => Action::Apply,
                "RELEASE" | "STOP" | "EXPIRE" | "FAIL" => Action::Remove,
                "PREINIT" => Action::Ignore,
                other => panic!("{name}: unexpected reason {other}"),
            };
            assert_eq!(ev.action(), want, "{name}");
            match want {
                Action::Apply => {
                    let lease = ev.new.unwrap();
                    assert_eq!(lease.family, family);
                    if family == Family::V4 {
                        assert_eq!(
                            (lease.address.to_string(), lease.prefix_len),
                            ("10.99.0.58".to_owned(), 24),
                            "{name}"
                        );
                        assert_eq!(lease.routers.len(), 1);
                    } else {
                        assert_eq!(
                            (lease.address.to_string(), lease.prefix_len),
                            ("fd00:99::1d6".to_owned(), 128),
                            "{name}"
                        );
                    }
                }
                Action::Remove if reason != "FAIL" => {
                    assert!(ev.old.is_some(), "{name} has old_* values");
                }
                _ => {}
            }
        }
    }
}

#[test]
fn recorded_networkd_dispatcher_environments() {
    for dir in ["networkd-dispatcher-real", "networkd-dispatcher-driver"] {
        for (name, env) in dumps(dir) {
            let ev =
                networkd::parse_dispatcher(&env).unwrap_or_else(|e| panic!("{dir}/{name}: {e}"));
            assert_eq!(ev.state, env["STATE"], "{name}");
            assert_eq!(ev.iface.as_str(), env["IFACE"]);
            let ip_addrs: Vec<String> = ev.ip_addrs.iter().map(ToString::to_string).collect();
            assert_eq!(ip_addrs.join(" "), env["IP_ADDRS"], "{name}");
            if dir == "networkd-dispatcher-real" && env["IFACE"] == "eth0" {
                assert_eq!(
                    ev.network_file.as_deref(),
                    Some("/etc/systemd/network/10-eth0.network"),
                    "{name}"
                );
            }
        }
    }
}

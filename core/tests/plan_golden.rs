// SPDX-License-Identifier: Apache-2.0
//! Golden tests: every folder under `tests/fixtures/` is a scenario with
//!
//! * `metadata.json` — the IMDS tree;
//! * `links` — one `IFNAME MAC [ra=IPV6]` per line (the OS view);
//! * `*.env` — dhclient environment dumps (the leases; the interface is inside);
//! * `*.networkd` — networkd lease files, named `<ifname>.networkd`;
//! * `config.json` — optional planner config (`PlanConfig` fields);
//! * `plan.txt` — the expected `ip` rendering.
//!
//! `BLESS=1 cargo test -p leasehook-core --test plan_golden` rewrites `plan.txt`.

#![cfg(test)]

use std::fs;
use std::path::Path;

use leasehook_core::event::{dhclient, networkd, parse_env_dump};
use leasehook_core::model::{IfName, Link};
use leasehook_core::plan::{InterfaceLease, PlanConfig, PlanInput, plan};
use leasehook_core::{metadata, render};

fn run_scenario(dir: &Path) -> String {
    let md = metadata::parse_json(&fs::read_to_string(dir.join("metadata.json")).unwrap()).unwrap();
    let links: Vec<Link> = fs::read_to_string(dir.join("links"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut parts = l.split_whitespace();
            let name = IfName::try_new(parts.next().unwrap()).unwrap();
            let mac = parts.next().unwrap().parse().unwrap();
            let ipv6_router = parts
                .next()
                .map(|r| r.strip_prefix("ra=").unwrap().parse().unwrap());
            Link {
                name,
                mac,
                ipv6_router,
            }
        })
        .collect();
    let mut leases = Vec::new();
    let mut files: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in files {
        let text = || fs::read_to_string(&f).unwrap();
        match f.extension().and_then(|e| e.to_str()) {
            Some("env") => {
                let ev = dhclient::parse(&parse_env_dump("fixture", &text()).unwrap()).unwrap();
                leases.push(InterfaceLease {
                    interface: ev.interface,
                    lease: ev.new.unwrap(),
                });
            }
            Some("networkd") => {
                let name = f.file_stem().unwrap().to_str().unwrap();
                leases.push(InterfaceLease {
                    interface: IfName::try_new(name).unwrap(),
                    lease: networkd::parse_lease_file(&text()).unwrap(),
                });
            }
            _ => {}
        }
    }
    let cfg: PlanConfig = match fs::read_to_string(dir.join("config.json")) {
        Ok(t) => serde_json::from_str(&t).unwrap(),
        Err(_) => PlanConfig::default(),
    };
    let p = plan(
        &PlanInput {
            metadata: &md,
            links: &links,
            leases: &leases,
            link_addresses: &[],
            next_hops: &[],
        },
        &cfg,
    )
    .unwrap();
    // The JSON rendering must read back as the same plan (other tools read it back).
    assert_eq!(
        serde_json::from_str::<leasehook_core::model::Plan>(&render::json(&p)).unwrap(),
        p
    );
    render::ip(&p)
}

#[test]
fn golden_plans() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let bless = std::env::var_os("BLESS").is_some();
    let mut dirs: Vec<_> = fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= 10,
        "expected at least 10 scenarios, found {}",
        dirs.len()
    );
    let mut failures = Vec::new();
    for dir in &dirs {
        let got = run_scenario(dir);
        let want_path = dir.join("plan.txt");
        if bless {
            fs::write(&want_path, &got).unwrap();
            continue;
        }
        let want = fs::read_to_string(&want_path).unwrap_or_default();
        if got != want {
            failures.push(format!(
                "--- {}\n--- want\n{want}--- got\n{got}",
                dir.display()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} scenario(s) differ (BLESS=1 rewrites):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

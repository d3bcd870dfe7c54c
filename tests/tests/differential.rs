// SPDX-License-Identifier: Apache-2.0
//! Differential test against cloud-init itself, 25.1.4 (Debian trixie) and 26.2
//! (Debian sid): for generated EC2 metadata trees, `leasehook plan --profile
//! cloud-init --format netplan` must give every ethernet the same `routes`,
//! `routing-policy` and `addresses` as cloud-init's
//! `convert_ec2_metadata_network_config`.
//!
//! The oracles are the Debian packages, extracted (never installed) by
//! `scripts/fetch-cloud-init-oracle.sh` and run by `tests/oracle/ci_oracle.py`
//! under the system Python. Without one this test fails: it is never skipped.

#![cfg(test)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::Command;

use ipnet::IpNet;
use leasehook_core::model::{Family, IfName, Lease, Link, MacAddr, Profile, Reason};
use leasehook_core::plan::{InterfaceLease, PlanConfig, PlanInput, plan};
use leasehook_core::{metadata, render};
use leasehook_tests::{Rng, workspace_root};
use serde_json::{Map, Value, json};

const CASES: u64 = 400;
const CASES_USIZE: usize = 400;
const SEED: u64 = 0x1ea5_e400_c0de;

/// The dist-packages of the extracted cloud-init `version`;
/// `LEASEHOOK_CLOUDINIT_ORACLE_<version with _ for .>` (e.g. `..._25_1_4`)
/// points elsewhere.
fn oracle_pythonpath(version: &str) -> PathBuf {
    let var = format!("LEASEHOOK_CLOUDINIT_ORACLE_{}", version.replace('.', "_"));
    std::env::var_os(var).map_or_else(
        || {
            workspace_root().join(format!(
                "target/oracle/cloud-init-{version}/root/usr/lib/python3/dist-packages"
            ))
        },
        PathBuf::from,
    )
}

/// One leaf's values written in one of the shapes IMDS fixtures use.
fn leaf(rng: &mut Rng, values: &[String]) -> Value {
    match (values, rng.below(3)) {
        ([one], 0) => json!(one),
        (_, 0 | 1) => json!(values.join("\n")),
        _ => json!(values),
    }
}

struct Case {
    tree: Value,
    macs_to_nics: BTreeMap<String, String>,
    gateways: BTreeMap<String, String>,
}

fn generate(rng: &mut Rng, id: u64) -> Case {
    let n = rng.range(1, 8);
    let multi_card = rng.chance(30);
    let mut device_numbers: Vec<u64> = (0..n).collect();
    rng.shuffle(&mut device_numbers);
    let mut macs = Map::new();
    let mut mac_list = Vec::new();
    let mut primary = None;
    for (i, dn) in device_numbers.iter().enumerate() {
        // Random MACs, so MAC order and device order disagree as often as not.
        let mac = format!(
            "0a:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            id % 256,
            rng.below(256),
            rng.below(256),
            rng.below(256),
            i
        );
        let mut nic = Map::new();
        nic.insert("mac".into(), json!(mac));
        nic.insert("interface-id".into(), json!(format!("eni-{id:04x}{i:02x}")));
        let subnet = format!("10.{}.{}.0/24", id % 200, i);
        if *dn == 0 {
            primary = Some(mac.clone());
        }
        if !rng.chance(10) || *dn == 0 {
            nic.insert("device-number".into(), json!(dn.to_string()));
        }
        if multi_card && rng.chance(85) {
            // Cards repeat device numbers (p5-style): card k holds device 1.
            let card = if *dn == 0 { 0 } else { rng.below(4) };
            nic.insert("network-card".into(), json!(card.to_string()));
            if card > 0 && *dn > 1 && rng.chance(50) {
                nic.insert("device-number".into(), json!("1"));
            }
        }
        let v4_count = if rng.chance(15) { 0 } else { rng.range(1, 4) };
        // Hosts whose string order differs from their numeric order, shuffled.
        let mut hosts = [5u64, 9, 10, 42, 100, 200];
        rng.shuffle(&mut hosts);
        let v4: Vec<String> = hosts
            .iter()
            .take(usize::try_from(v4_count).unwrap())
            .map(|h| format!("10.{}.{}.{h}", id % 200, i))
            .collect();
        if !v4.is_empty() {
            nic.insert("local-ipv4s".into(), leaf(rng, &v4));
        }
        if rng.chance(90) {
            nic.insert("subnet-ipv4-cidr-block".into(), json!(subnet));
        }
        let v6_count = if rng.chance(50) { 0 } else { rng.range(1, 3) };
        let v6: Vec<String> = hosts
            .iter()
            .take(usize::try_from(v6_count).unwrap())
            .map(|h| format!("2600:1f16:{id:x}:{i:x}::{h:x}"))
            .collect();
        if !v6.is_empty() {
            nic.insert("ipv6s".into(), leaf(rng, &v6));
            if rng.chance(85) {
                let blocks: Vec<String> = (0..rng.range(1, 2))
                    .map(|b| {
                        if rng.chance(30) {
                            format!("2600:1f16:{id:x}:{i:x}:{b}:0:0:0/80")
                        } else {
                            format!("2600:1f16:{id:x}:{i:x}::/64")
                        }
                    })
                    .collect();
                nic.insert("subnet-ipv6-cidr-blocks".into(), leaf(rng, &blocks));
            }
        }
        macs.insert(mac.clone(), Value::Object(nic));
        mac_list.push(mac);
    }
    // The OS sees most NICs (hot-plug in progress: not all), sometimes one IMDS
    // does not know, under names that need not follow the device order.
    let mut seen: Vec<String> = mac_list
        .iter()
        .filter(|_| rng.chance(90))
        .cloned()
        .collect();
    if rng.chance(15) {
        seen.push(format!("0a:ff:{:02x}:00:00:99", id % 256));
    }
    rng.shuffle(&mut seen);
    let mut macs_to_nics = BTreeMap::new();
    let mut gateways = BTreeMap::new();
    for (k, mac) in seen.iter().enumerate() {
        let name = format!("ens{}", 5 + k);
        if rng.chance(85) {
            gateways.insert(name.clone(), format!("10.{}.{}.1", id % 200, k));
        }
        macs_to_nics.insert(mac.clone(), name);
    }
    let mut md = Map::new();
    md.insert("instance-id".into(), json!(format!("i-{id:017x}")));
    if let Some(p) = primary {
        md.insert("mac".into(), json!(p));
    }
    md.insert("network".into(), json!({"interfaces": {"macs": macs}}));
    Case {
        tree: Value::Object(md),
        macs_to_nics,
        gateways,
    }
}

/// leasehook's netplan `ethernets`, through the YAML text `--format netplan` prints.
fn leasehook_ethernets(case: &Case) -> Value {
    let md = metadata::parse_tree(&case.tree).unwrap();
    let links: Vec<Link> = case
        .macs_to_nics
        .iter()
        .map(|(mac, name)| Link {
            name: IfName::try_new(name).unwrap(),
            mac: mac.parse::<MacAddr>().unwrap(),
            ipv6_router: None,
        })
        .collect();
    let leases: Vec<InterfaceLease> = case
        .gateways
        .iter()
        .map(|(name, gw)| InterfaceLease {
            interface: IfName::try_new(name).unwrap(),
            lease: Lease {
                family: Family::V4,
                address: "10.254.0.2".parse().unwrap(),
                prefix_len: 24,
                routers: vec![gw.parse().unwrap()],
                reason: Reason::Bound,
            },
        })
        .collect();
    let cfg = PlanConfig {
        profile: Profile::CloudInit,
        ..PlanConfig::default()
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
    let yaml = serde_saphyr::to_string(&render::netplan(&p)).unwrap();
    let doc: Value = serde_saphyr::from_str(&yaml).unwrap();
    doc["network"]["ethernets"].clone()
}

fn canon_net(v: &Value) -> String {
    let s = v.as_str().unwrap_or_default();
    s.parse::<IpNet>()
        .map(|n| n.to_string())
        .or_else(|_| s.parse::<IpAddr>().map(|a| a.to_string()))
        .unwrap_or_else(|_| format!("unparsable {s:?}"))
}

/// The compared part of one ethernet, with addresses in canonical text.
fn compared(eth: &Value) -> Value {
    let list = |key: &str| {
        eth.get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let routes: Vec<Value> = list("routes")
        .iter()
        .map(|r| json!({"to": canon_net(&r["to"]), "via": r.get("via").map(canon_net), "table": r["table"]}))
        .collect();
    let policy: Vec<Value> = list("routing-policy")
        .iter()
        .map(|r| json!({"from": canon_net(&r["from"]), "table": r["table"]}))
        .collect();
    let addresses: Vec<Value> = list("addresses")
        .iter()
        .map(|a| json!(canon_net(a)))
        .collect();
    json!({"routes": routes, "routing-policy": policy, "addresses": addresses})
}

#[test]
fn cloud_init_profile_matches_cloud_init_25_1_4() {
    matches_cloud_init("25.1.4");
}

#[test]
fn cloud_init_profile_matches_cloud_init_26_2() {
    matches_cloud_init("26.2");
}

fn matches_cloud_init(version: &str) {
    let pythonpath = oracle_pythonpath(version);
    assert!(
        pythonpath
            .join("cloudinit/sources/DataSourceEc2.py")
            .exists(),
        "cloud-init {version} oracle not found at {pythonpath:?}: run \
         scripts/fetch-cloud-init-oracle.sh (the README's test command does), or point \
         LEASEHOOK_CLOUDINIT_ORACLE_{} at its dist-packages",
        version.replace('.', "_")
    );
    let mut rng = Rng::new(SEED);
    let cases: Vec<Case> = (0..CASES).map(|id| generate(&mut rng, id)).collect();
    let input: Vec<Value> = cases
        .iter()
        .enumerate()
        .map(|(id, c)| json!({"id": id, "metadata": c.tree, "macs_to_nics": c.macs_to_nics, "gateways": c.gateways}))
        .collect();
    let dir = std::env::temp_dir().join(format!(
        "leasehook-differential-{}-{version}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let cases_path = dir.join("cases.json");
    std::fs::write(&cases_path, serde_json::to_vec(&input).unwrap()).unwrap();
    let out = Command::new("/usr/bin/python3")
        .arg(workspace_root().join("tests/oracle/ci_oracle.py"))
        .arg("--log-level")
        .arg("OFF")
        .arg(&cases_path)
        .env("PYTHONPATH", &pythonpath)
        .output()
        .expect("failed to run /usr/bin/python3");
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        out.status.success(),
        "oracle failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let oracle: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(oracle["version"], version);

    let mut report = String::new();
    let (mut compared_ethernets, mut with_rules, mut mismatches) = (0, 0, 0);
    for (id, case) in cases.iter().enumerate() {
        let theirs = &oracle["results"][id.to_string()];
        assert!(
            theirs.get("error").is_none(),
            "cloud-init raised on case {id}: {theirs}"
        );
        let ours = leasehook_ethernets(case);
        let names = |v: &Value| {
            v.as_object()
                .map(|m| m.keys().cloned().collect::<Vec<_>>())
                .unwrap_or_default()
        };
        if names(&ours) != names(theirs) {
            mismatches += 1;
            let _ = writeln!(
                report,
                "case {id}: ethernets differ: ours {:?}, cloud-init {:?}",
                names(&ours),
                names(theirs)
            );
            continue;
        }
        for name in names(theirs) {
            compared_ethernets += 1;
            let (a, b) = (compared(&ours[&name]), compared(&theirs[&name]));
            if !b["routing-policy"].as_array().unwrap().is_empty() {
                with_rules += 1;
            }
            if a != b {
                mismatches += 1;
                let _ = writeln!(
                    report,
                    "case {id} {name}:\n  ours       {a}\n  cloud-init {b}\n  metadata   {}",
                    case.tree
                );
            }
        }
    }
    eprintln!(
        "differential vs cloud-init {version}: {CASES} cases, {compared_ethernets} ethernets compared, {with_rules} with routing-policy, {mismatches} mismatches"
    );
    assert_eq!(mismatches, 0, "{report}");
    // The generator must actually exercise policy routing, not only trivial NICs.
    assert!(
        with_rules > CASES_USIZE / 2,
        "only {with_rules} ethernets had rules"
    );
}

// SPDX-License-Identifier: Apache-2.0
//! Benchmark: plan a large instance — 15 NICs, each with 50 IPv4 and 50 IPv6
//! addresses and 2 delegated prefixes per family, leases in both families — and
//! print the median and 90th percentile of each phase.
//!
//! Run: `cargo bench -p leasehook-core --bench plan`.
//!
//! For `bench/run`: with `LEASEHOOK_BENCH_JSON` set it also appends one JSON line
//! with every number to that file, and with `LEASEHOOK_BENCH_CASE` set it writes
//! the instance as a case of cloud-init's converter (`scripts/cloud-init-ec2-convert.py`,
//! the format of `tests/oracle/ci_oracle.py`): the same metadata, the OS view of
//! the NICs and the DHCPv4 routers.

#![allow(clippy::indexing_slicing)]
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_precision_loss,
    clippy::panic
)]

use std::hint::black_box;
use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use leasehook_core::diff::{State, diff};
use leasehook_core::model::{Family, IfName, Lease, Link, MacAddr, Profile, Reason};
use leasehook_core::plan::{InterfaceLease, PlanConfig, PlanInput, plan};
use leasehook_core::{metadata, render};
use serde_json::{Map, Value, json};

const NICS: u8 = 15;
const ADDRS: u16 = 50;
const ROUNDS: usize = 301;

fn instance() -> (String, Vec<Link>, Vec<InterfaceLease>) {
    let mut macs = Map::new();
    let mut links = Vec::new();
    let mut leases = Vec::new();
    for n in 0..NICS {
        let mac = MacAddr::new([2, 0, 0, 0, 1, n]);
        let v4: Vec<String> = (0..ADDRS)
            .map(|k| format!("10.{n}.{}.{}", k / 200, 10 + k % 200))
            .collect();
        let v6: Vec<String> = (0..ADDRS)
            .map(|k| format!("2600:1f18:0:{n:x}::{:x}", 0x100 + k))
            .collect();
        macs.insert(
            mac.to_string(),
            json!({
                "device-number": n.to_string(), "network-card": "0",
                "local-ipv4s": v4.join("\n"), "ipv6s": v6.join("\n"),
                "subnet-ipv4-cidr-block": format!("10.{n}.0.0/16"),
                "subnet-ipv6-cidr-blocks": format!("2600:1f18:0:{n:x}::/64"),
                "ipv4-prefix": [format!("10.{n}.100.0/28"), format!("10.{n}.100.16/28")],
                "ipv6-prefix": [format!("2600:1f18:0:{n:x}:8000::/80"), format!("2600:1f18:0:{n:x}:8001::/80")],
            }),
        );
        let name = IfName::try_new(&format!("ens{}", 5 + u16::from(n))).unwrap();
        links.push(Link {
            name: name.clone(),
            mac,
            ipv6_router: Some("fe80::1".parse().unwrap()),
        });
        let lease = |address: IpAddr, prefix_len, routers| Lease {
            family: Family::of(&address),
            address,
            prefix_len,
            routers,
            reason: Reason::Bound,
        };
        leases.push(InterfaceLease {
            interface: name.clone(),
            lease: lease(
                IpAddr::V4(Ipv4Addr::new(10, n, 0, 10)),
                16,
                vec![IpAddr::V4(Ipv4Addr::new(10, n, 0, 1))],
            ),
        });
        leases.push(InterfaceLease {
            interface: name,
            lease: lease(
                IpAddr::V6(Ipv6Addr::new(
                    0x2600,
                    0x1f18,
                    0,
                    u16::from(n),
                    0,
                    0,
                    0,
                    0x100,
                )),
                128,
                Vec::new(),
            ),
        });
    }
    let tree = json!({"mac": MacAddr::new([2, 0, 0, 0, 1, 0]).to_string(), "network": {"interfaces": {"macs": Value::Object(macs)}}});
    (tree.to_string(), links, leases)
}

/// Times `f` for `ROUNDS` rounds, prints the median and 90th percentile and
/// records them under `key` in `out`.
fn measure(out: &mut Map<String, Value>, key: &str, name: &str, mut f: impl FnMut()) {
    let mut times: Vec<Duration> = (0..ROUNDS)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    // The sample at (n - 1) * p / 100, as tests/src/bench.rs picks it.
    let (median, p90) = (
        us(times[(ROUNDS - 1) / 2]),
        us(times[(ROUNDS - 1) * 9 / 10]),
    );
    println!("{name:<34} median {median:>9.1} µs   p90 {p90:>9.1} µs   ({ROUNDS} rounds)");
    out.insert(
        key.to_owned(),
        json!({"n": ROUNDS, "median_us": median, "p90_us": p90}),
    );
}

/// The instance as a case of cloud-init's converter (`tests/oracle/ci_oracle.py`
/// format): metadata, MAC -> interface name, interface -> DHCPv4 router.
fn converter_case(tree: &str, links: &[Link], leases: &[InterfaceLease]) -> Value {
    let macs_to_nics: Map<String, Value> = links
        .iter()
        .map(|l| (l.mac.to_string(), json!(l.name.to_string())))
        .collect();
    let gateways: Map<String, Value> = leases
        .iter()
        .filter_map(|l| {
            let router = l.lease.routers.first()?;
            router
                .is_ipv4()
                .then(|| (l.interface.to_string(), json!(router.to_string())))
        })
        .collect();
    let metadata: Value = serde_json::from_str(tree).unwrap();
    json!([{"id": 0, "metadata": metadata, "macs_to_nics": macs_to_nics, "gateways": gateways}])
}

/// Appends `{"bench": "plan", ...}` to `$LEASEHOOK_BENCH_JSON` when it is set.
fn emit(fields: Map<String, Value>) {
    let Some(path) = std::env::var_os("LEASEHOOK_BENCH_JSON") else {
        return;
    };
    let mut line = Map::new();
    line.insert("bench".to_owned(), json!("plan"));
    line.extend(fields);
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("{path:?}: {e}"));
    writeln!(f, "{}", Value::Object(line)).unwrap_or_else(|e| panic!("{path:?}: {e}"));
}

fn main() {
    let (json_text, links, leases) = instance();
    let md = metadata::parse_json(&json_text).unwrap();
    let input = PlanInput::new(&md, &links, &leases);
    let ec2 = PlanConfig::default();
    let ci = PlanConfig {
        profile: Profile::CloudInit,
        ..PlanConfig::default()
    };
    if let Some(path) = std::env::var_os("LEASEHOOK_BENCH_CASE") {
        let case = converter_case(&json_text, &links, &leases);
        std::fs::write(&path, case.to_string()).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    }
    let p = plan(&input, &ec2).unwrap();
    let state = State::of_plan(&p);
    println!(
        "instance: {NICS} NICs x ({ADDRS} IPv4 + {ADDRS} IPv6 + 2+2 prefixes); plan: {} rules, {} routes, {} addresses",
        state.rules.len(),
        state.routes.len(),
        state.addresses.len()
    );
    let mut out = Map::new();
    out.insert(
        "instance".to_owned(),
        json!({
            "nics": NICS, "ipv4_per_nic": ADDRS, "ipv6_per_nic": ADDRS, "prefixes_per_family": 2,
            "metadata_bytes": json_text.len(),
            "rules": state.rules.len(), "routes": state.routes.len(), "addresses": state.addresses.len(),
        }),
    );
    measure(&mut out, "parse", "parse metadata JSON", || {
        black_box(metadata::parse_json(black_box(&json_text)).unwrap());
    });
    measure(&mut out, "plan_ec2", "plan (ec2-net-utils)", || {
        black_box(plan(black_box(&input), &ec2).unwrap());
    });
    measure(&mut out, "plan_cloud_init", "plan (cloud-init)", || {
        black_box(plan(black_box(&input), &ci).unwrap());
    });
    measure(
        &mut out,
        "diff_same",
        "diff against identical state",
        || {
            black_box(diff(black_box(&p), &state));
        },
    );
    measure(&mut out, "diff_empty", "diff against empty state", || {
        black_box(diff(black_box(&p), &State::default()));
    });
    measure(&mut out, "render_ip", "render ip text", || {
        black_box(render::ip(black_box(&p)));
    });
    measure(&mut out, "event", "parse + plan + diff (one event)", || {
        let md = metadata::parse_json(&json_text).unwrap();
        let p = plan(&PlanInput::new(&md, &links, &leases), &ec2).unwrap();
        black_box(diff(&p, &state));
    });
    emit(out);
}

// SPDX-License-Identifier: Apache-2.0
//! Fuzz target: an IMDS `meta-data/` tree as JSON (`metadata::parse_json`), then the
//! planner and the renderers on what parses: two fixed links with leases, plus one
//! link per parsed NIC with a lease on its first addresses, under both profiles.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use leasehook_core::metadata;
use leasehook_core::model::{Family, IfName, Lease, Link, MacAddr, Profile, Reason};
use leasehook_core::plan::{self, InterfaceLease, PlanConfig, PlanInput};
use leasehook_core::render;
use leasehook_fuzz::text;
use libfuzzer_sys::fuzz_target;

fn link(name: &str, mac: MacAddr) -> Option<Link> {
    Some(Link {
        name: IfName::try_new(name).ok()?,
        mac,
        ipv6_router: Some(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1)),
    })
}

fn lease(
    name: &str,
    address: IpAddr,
    prefix_len: u8,
    routers: Vec<IpAddr>,
) -> Option<InterfaceLease> {
    Some(InterfaceLease {
        interface: IfName::try_new(name).ok()?,
        lease: Lease {
            family: if address.is_ipv4() {
                Family::V4
            } else {
                Family::V6
            },
            address,
            prefix_len,
            routers,
            reason: Reason::Bound,
        },
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(md) = metadata::parse_json(&text(data)) else {
        return;
    };
    let mut links = Vec::new();
    let mut leases = Vec::new();
    let fixed = [
        ("eth0", "02:00:00:00:00:01", [10, 0, 0, 10]),
        ("eth1", "02:00:00:00:00:02", [10, 0, 1, 20]),
    ];
    for (name, mac, addr) in fixed {
        let Ok(mac) = mac.parse::<MacAddr>() else {
            return;
        };
        links.extend(link(name, mac));
        let [a, b, c, d] = addr;
        leases.extend(lease(
            name,
            IpAddr::V4(Ipv4Addr::new(a, b, c, d)),
            24,
            vec![IpAddr::V4(Ipv4Addr::new(a, b, c, 1))],
        ));
    }
    leases.extend(lease(
        "eth1",
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x20)),
        128,
        Vec::new(),
    ));
    for (i, nic) in md.nics.iter().take(8).enumerate() {
        let name = format!("nic{i}");
        links.extend(link(&name, nic.mac));
        let prefix = match nic.subnet_ipv4_cidr_blocks.first() {
            Some(net) => net.prefix_len(),
            None => 24,
        };
        if let Some(v4) = nic.local_ipv4s.first() {
            leases.extend(lease(&name, IpAddr::V4(*v4), prefix, vec![IpAddr::V4(*v4)]));
        }
        if let Some(v6) = nic.ipv6s.first() {
            leases.extend(lease(&name, IpAddr::V6(*v6), 128, Vec::new()));
        }
    }
    let input = PlanInput {
        metadata: &md,
        links: &links,
        leases: &leases,
        link_addresses: &[],
    };
    let configs = [
        PlanConfig::default(),
        PlanConfig {
            primary_rules: true,
            secondary_addresses: false,
            ..PlanConfig::default()
        },
        PlanConfig {
            profile: Profile::CloudInit,
            ..PlanConfig::default()
        },
        PlanConfig {
            primary_rules: true,
            kubernetes: true,
            ..PlanConfig::default()
        },
    ];
    for cfg in &configs {
        if let Ok(p) = plan::plan(&input, cfg) {
            let _ = p.is_complete();
            let _ = render::ip(&p);
            let _ = render::json(&p);
            let _ = render::netplan(&p);
            let _ = render::networkd(&p);
        }
    }
    let _ = plan::cloud_init_order(&input);
});

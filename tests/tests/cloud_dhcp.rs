// SPDX-License-Identifier: Apache-2.0
//! Each cloud's test world gives each NIC exactly the DHCP options that cloud's
//! DHCP gives it, never more (issue 31; `docs/clouds.md`, "DHCP options per
//! cloud", cites the vendors' pages): real `dhclient` takes the world's leases
//! (`tests/src/world.rs`, [`CloudDhcp`]) and the options in its lease files are
//! compared with the table, protocol options (lease time, server identifier,
//! message type, T1/T2) and the broadcast address aside.
//!
//! | test | shows |
//! |---|---|
//! | [`each_cloud_gives_each_nic_its_options`] | EC2, GCE, Azure (no router on the secondary), Alibaba, `OpenStack`: the option names and the router, mask and option-121 values of eth0's and eth1's leases; Oracle and `OpenStack`'s static network: dnsmasq serves no range on eth1's link |
//!
//! Compiled with the `netns` feature; needs root, isc-dhcp-client and dnsmasq,
//! and fails, never skips, without them.

#![cfg(feature = "netns")]
#![cfg(test)]
#![allow(clippy::too_many_lines)]

use std::collections::BTreeMap;

use std::time::Duration;

use leasehook_tests::world::{CloudDhcp, World, WorldOptions, wait_until};

/// Options every lease carries whatever the cloud (DHCP's own bookkeeping).
const PROTOCOL: [&str; 6] = [
    "dhcp-lease-time",
    "dhcp-message-type",
    "dhcp-server-identifier",
    "dhcp-renewal-time",
    "dhcp-rebinding-time",
    "broadcast-address",
];

/// A lease's options by name.
type Options = BTreeMap<String, String>;

/// The `option NAME VALUE;` lines of the last lease in a dhclient lease file,
/// protocol options left out (waiting up to 10 s for dhclient to write it: it
/// does after its script ran).
fn lease_options(w: &World, iface: &str) -> BTreeMap<String, String> {
    let path = w.dir.0.join(format!("dhclient-{iface}.leases"));
    let read = || std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        wait_until(Duration::from_secs(10), || read().contains('}')),
        "no lease in {path:?}"
    );
    let text = read();
    let last = text.rsplit("lease {").next().unwrap_or_default();
    last.lines()
        .filter_map(|l| l.trim().strip_prefix("option "))
        .filter_map(|l| l.trim_end_matches(';').split_once(' '))
        .filter(|(k, _)| !PROTOCOL.contains(k))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn want(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn each_cloud_gives_each_nic_its_options() {
    let mask24 = ("subnet-mask", "255.255.255.0");
    let cases: [(CloudDhcp, &str, [Options; 2]); 5] = [
        (
            CloudDhcp::Ec2,
            "dh-ec2",
            [
                want(&[mask24, ("routers", "10.98.0.1")]),
                want(&[mask24, ("routers", "10.98.1.1")]),
            ],
        ),
        (
            CloudDhcp::Gce,
            "dh-gce",
            [
                want(&[
                    ("subnet-mask", "255.255.255.255"),
                    ("routers", "10.98.0.1"),
                    // 10.98.0.1/32 on the link, 0.0.0.0/0 via 10.98.0.1.
                    (
                        "rfc3442-classless-static-routes",
                        "32,10,98,0,1,0,0,0,0,0,10,98,0,1",
                    ),
                ]),
                want(&[
                    ("subnet-mask", "255.255.255.255"),
                    ("routers", "10.98.1.1"),
                    // 10.98.1.1/32 on the link, 10.98.1.0/24 via 10.98.1.1.
                    (
                        "rfc3442-classless-static-routes",
                        "32,10,98,1,1,0,0,0,0,24,10,98,1,10,98,1,1",
                    ),
                ]),
            ],
        ),
        (
            CloudDhcp::Azure,
            "dh-az",
            [
                want(&[
                    mask24,
                    ("routers", "10.98.0.1"),
                    // 0.0.0.0/0, 168.63.129.16/32 and 169.254.169.254/32, each
                    // via 10.98.0.1.
                    (
                        "rfc3442-classless-static-routes",
                        "0,10,98,0,1,32,168,63,129,16,10,98,0,1,32,169,254,169,254,10,98,0,1",
                    ),
                ]),
                // A secondary: its address and mask, no router.
                want(&[mask24]),
            ],
        ),
        (
            CloudDhcp::Aliyun,
            "dh-ecs",
            [
                want(&[mask24, ("routers", "10.98.0.253")]),
                want(&[mask24, ("routers", "10.98.1.253")]),
            ],
        ),
        (
            CloudDhcp::OpenStack,
            "dh-os",
            [
                want(&[mask24, ("routers", "10.98.0.1")]),
                want(&[
                    mask24,
                    ("routers", "10.98.1.1"),
                    // 198.51.100.0/24 via 10.98.1.1 (the host route), 0.0.0.0/0 via it.
                    (
                        "rfc3442-classless-static-routes",
                        "24,198,51,100,10,98,1,1,0,10,98,1,1",
                    ),
                ]),
            ],
        ),
    ];
    for (dhcp, tag, expected) in cases {
        let mut w = World::new(
            tag,
            &WorldOptions {
                dhcp,
                ..WorldOptions::default()
            },
        );
        for (iface, want) in ["eth0", "eth1"].into_iter().zip(expected) {
            w.bind(iface, false);
            assert_eq!(
                lease_options(&w, iface),
                want,
                "{dhcp:?} {iface}:\n{}",
                std::fs::read_to_string(w.dir.0.join(format!("dhclient-{iface}.leases")))
                    .unwrap_or_default()
            );
        }
        // The router the lease names answers from the router namespace.
        assert!(
            w.router
                .ip(&["-4", "addr", "show", "gw1"])
                .contains(&format!("{}/24", dhcp.router(1))),
            "{dhcp:?}: the router does not hold {}",
            dhcp.router(1)
        );
    }
    // A cloud whose secondary gets no DHCP: no range on eth1's link, and eth0's
    // lease is EC2's shape.
    for (dhcp, tag) in [
        (CloudDhcp::Oracle, "dh-oci"),
        (CloudDhcp::OpenStackStatic, "dh-ost"),
    ] {
        let mut w = World::new(
            tag,
            &WorldOptions {
                dhcp,
                ..WorldOptions::default()
            },
        );
        let conf = std::fs::read_to_string(w.dir.0.join("dnsmasq.conf")).unwrap();
        assert!(
            !conf.contains("set:n1") && !conf.contains("tag:n1"),
            "{dhcp:?} serves eth1:\n{conf}"
        );
        w.bind("eth0", false);
        assert_eq!(
            lease_options(&w, "eth0"),
            want(&[mask24, ("routers", "10.98.0.1")]),
            "{dhcp:?} eth0"
        );
    }
}

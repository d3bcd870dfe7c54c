// SPDX-License-Identifier: Apache-2.0
//! Performs IO: an Alibaba Cloud ECS instance metadata service emulator, for
//! tests and benchmarks. It is the IMDS emulator ([`crate::emulator`]: the tree,
//! scenario and log formats, in-process or as a binary) speaking ECS's dialect,
//! from Alibaba's documented formats:
//!
//! * at `100.100.100.200:80` (the binary's default), `/latest/meta-data/` with
//!   one leaf per key and `network/interfaces/macs/<mac>/` folders holding
//!   `primary-ip-address`, `private-ipv4s` (a JSON list), `netmask`, `gateway`,
//!   `vpc-cidr-block`, `vswitch-cidr-block`, `network-interface-id`, and on a
//!   dual-stack instance ([`dual_stack_world`]) `ipv6s` (`[a,b]`: brackets, no
//!   quotes, not JSON), `ipv6-gateway`, `vswitch-ipv6-cidr-block` and
//!   `vpc-ipv6-cidr-blocks` (Alibaba's "instance metadata" page,
//!   <https://help.aliyun.com/zh/ecs/user-guide/view-instance-metadata>; terway's
//!   `pkg/aliyun/metadata/metadata.go` reads `ipv6s` so);
//! * hardened mode (the default): `PUT /latest/api/token` with
//!   `X-aliyun-ecs-metadata-token-ttl-seconds: 1..=21600` hands out a token, and a
//!   `GET` without a valid `X-aliyun-ecs-metadata-token` gets 401; EC2's header
//!   names get nothing (a `PUT` without the TTL header is 400). Normal mode
//!   (`hardened: false`) answers a `GET` without a token too;
//! * the source-address rule: only addresses of the instance's VPC
//!   ([`VPC`], `10.98.0.0/16` in the test world) are answered; any other gets 403.
//! * as IMDS's emulator answers (issue 31): `HEAD` like `GET` without the body,
//!   the dated version nm-cloud-setup asks (`/2016-01-01/meta-data/...`, which
//!   reads the `latest` tree; `GET /` lists it and `latest`), 405 for other
//!   methods, and EC2's `X-Forwarded-For` rule on the token `PUT` (403), which
//!   ECS's hardened mode copies from IMDSv2 (not checked against a vendor page).
//!
//! The scenario's `appear` makes a NIC's folder appear seconds after the first
//! request (the hot-plug race); its `rules` give the fault modes (down: no
//! emulator, 403/400/429 statuses, `garbage`, `delay`). Every request is logged
//! with its source address (`SECONDS PEER METHOD PATH STATUS`): a `GET` that
//! carried no token shows as 401.

use std::io;
use std::net::SocketAddr;

use serde_json::{Value, json};

use crate::emulator::{Config, Emulator, TokenHeaders};

/// The dated versions ECS serves as `latest`: nm-cloud-setup's
/// `NM_ALIYUN_API_VERSION` (NetworkManager's
/// `src/nm-cloud-setup/nmcs-provider-aliyun.c`).
pub const VERSIONS: &[&str] = &["2016-01-01"];
use crate::world::{MAC0, MAC1, MetadataService};

/// ECS's hardened-mode headers.
pub const HEADERS: TokenHeaders = TokenHeaders {
    ttl: "X-aliyun-ecs-metadata-token-ttl-seconds",
    token: "X-aliyun-ecs-metadata-token",
};

/// The metadata service's address.
pub const ADDRESS: &str = "100.100.100.200";

/// The test world's VPC: the addresses the emulator answers.
pub const VPC: &str = "10.98.0.0/16";

/// The log file the binary writes in its `--dir`.
pub const LOG_NAME: &str = "aliyun.log";

/// The instance id of [`world_tree`].
pub const INSTANCE_ID: &str = "i-bp1leasehook0000001";

/// A NIC folder as ECS serves it.
fn nic(mac: &str, primary: &str, all: &[&str], vswitch: &str, gateway: &str, eni: &str) -> Value {
    let list = serde_json::to_string(all).unwrap_or_default();
    json!({
        "mac": mac,
        "primary-ip-address": primary,
        "private-ipv4s": list,
        "netmask": "255.255.255.0",
        "gateway": gateway,
        "vpc-id": "vpc-bp1leasehook",
        "vpc-cidr-block": VPC,
        "vswitch-id": "vsw-bp1leasehook",
        "vswitch-cidr-block": vswitch,
        "network-interface-id": eni,
    })
}

/// The two-NIC instance of the namespace world ([`crate::world`]): `eth0`
/// (10.98.0.10, the primary) and `eth1` (10.98.1.20 and 10.98.1.21), in ECS's
/// shape; each vSwitch's gateway is its `.253`, as on ECS (the world's router
/// holds it with [`crate::world::CloudDhcp::Aliyun`]).
pub fn world_tree() -> Value {
    json!({"latest": {
        "api": {},
        "user-data": "#cloud-config\n{}\n",
        "meta-data": {
            "instance-id": INSTANCE_ID,
            "hostname": "iZbp1leasehookZ",
            "region-id": "cn-hangzhou",
            "zone-id": "cn-hangzhou-i",
            "mac": MAC0,
            "network-type": "vpc",
            "private-ipv4": "10.98.0.10",
            "vpc-id": "vpc-bp1leasehook",
            "vpc-cidr-block": VPC,
            "network": {"interfaces": {"macs": {
                MAC0: nic(MAC0, "10.98.0.10", &["10.98.0.10"], "10.98.0.0/24", "10.98.0.253",
                          "eni-bp1leasehook0"),
                MAC1: nic(MAC1, "10.98.1.20", &["10.98.1.20", "10.98.1.21"], "10.98.1.0/24",
                          "10.98.1.253", "eni-bp1leasehook1"),
            }}}
        }
    }})
}

/// The dual-stack VPC's IPv6 block as [`dual_stack_world`] publishes it in
/// `vpc-ipv6-cidr-blocks` (leasehook does not read it). ECS gives a VPC a /56;
/// the world's two /64s (`fd00:98:0::/64`, `fd00:98:1::/64`, the shared
/// contract) differ in their third group, so no /56 holds both: a /48 does.
pub const VPC_IPV6: &str = "fd00:98::/48";

/// The IPv6 gateway [`dual_stack_world`] publishes on both NICs: the routers'
/// link-local `fe80::1` (the shared contract). ECS's own page shows an address
/// of the vSwitch's /64 (`...:ffff:ffff:ffff:fff7`); leasehook takes either.
pub const IPV6_GATEWAY: &str = "fe80::1";

/// Adds a NIC's IPv6 keys to its folder, as ECS writes them.
fn with_ipv6(mut folder: Value, ipv6s: &[&str], block: &str) -> Value {
    if let Some(f) = folder.as_object_mut() {
        f.insert("ipv6s".into(), json!(format!("[{}]", ipv6s.join(","))));
        f.insert("ipv6-gateway".into(), json!(IPV6_GATEWAY));
        f.insert("vswitch-ipv6-cidr-block".into(), json!(block));
        f.insert(
            "vpc-ipv6-cidr-blocks".into(),
            json!(format!("[{VPC_IPV6}]")),
        );
    }
    folder
}

/// The dual-stack instance of the shared IPv6 world contract, what `--tree`
/// takes: [`world_tree`] with eth0 also holding `fd00:98:0::10` in
/// `fd00:98:0::/64`, and eth1 `fd00:98:1::20` (the address dnsmasq leases by
/// DHCPv6) and `fd00:98:1::21` (a secondary: on ECS the OS adds it, as it adds
/// secondary private IPv4 addresses) in `fd00:98:1::/64`; both NICs name
/// [`IPV6_GATEWAY`]. ECS has no IPv6-only ENI (every ENI has a primary private
/// IPv4 address), so there is no `ipv6_only_world`.
pub fn dual_stack_world() -> Value {
    let mut tree = world_tree();
    for (mac, ipv6s, block) in [
        (MAC0, &["fd00:98:0::10"][..], "fd00:98:0::/64"),
        (
            MAC1,
            &["fd00:98:1::20", "fd00:98:1::21"][..],
            "fd00:98:1::/64",
        ),
    ] {
        let folder = &mut tree["latest"]["meta-data"]["network"]["interfaces"]["macs"][mac];
        *folder = with_ipv6(folder.take(), ipv6s, block);
    }
    tree
}

/// The emulator's configuration: `tree`, ECS's headers, the VPC rule, hardened
/// mode or not.
pub fn config(tree: Value, hardened: bool) -> Config {
    let mut c = Config::new(tree);
    c.world.headers = HEADERS;
    c.world.versions = VERSIONS;
    c.world.require_token = hardened;
    c.allowed_sources = vec![VPC.parse().unwrap_or_else(|e| panic!("{VPC}: {e}"))];
    c
}

/// Starts an in-process emulator on `bind` (a loopback address) answering every
/// source (a loopback client is not in the VPC): for unit-level tests.
pub fn start_loopback(bind: SocketAddr, tree: Value, hardened: bool) -> io::Result<Emulator> {
    Emulator::start(bind, loopback_config(tree, hardened))
}

/// [`config`] answering loopback sources: for in-process tests that also set a
/// scenario.
pub fn loopback_config(tree: Value, hardened: bool) -> Config {
    let mut c = config(tree, hardened);
    c.allowed_sources = vec![
        "127.0.0.0/8".parse().unwrap_or_else(|e| panic!("{e}")),
        "::1/128".parse().unwrap_or_else(|e| panic!("{e}")),
    ];
    c
}

/// The world's metadata service: `leasehook-emulator --cloud aliyun` on
/// `100.100.100.200:80` in the router namespace, with `args` (files for
/// `--tree`, `--scenario`, `--normal-mode`).
pub fn service(args: Vec<String>) -> MetadataService {
    MetadataService {
        cloud: "aliyun".to_owned(),
        args,
        addresses: vec![format!("{ADDRESS}/32")],
    }
}

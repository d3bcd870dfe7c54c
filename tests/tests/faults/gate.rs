//! The address gate (issue 18, items 1-4): hostile prefixes, leases and
//! addresses from the metadata and the DHCP clients, two NICs claiming one table.

use std::ffi::OsStr;
use std::process::{Command, Output};
use std::time::Duration;

use leasehook_tests::clouds::Cloud;
use leasehook_tests::netns::{leasehook_bin, sibling_bin};
use leasehook_tests::world::{MAC1, default_tree};
use serde_json::json;

use crate::instance::{BASE_ROUTES, BASE_RULES, Imds, Instance, STATE, owned, text, tree_with};
use crate::kernel::foreign_then_bound;
use crate::matrix::{FileWant, Kernel, Row, Seen, snap};

matrix! {
    #[cfg(feature = "netns")]
    gate_ipv4_prefix_everything => Row {
        name: "gate_ipv4_prefix_everything",
        fault: "IMDS `ipv4-prefix: 0.0.0.0/0` on eth1 (BOUND)",
        does: "refuses the prefix by value and reason, applies the rest of the plan; no `from all` rule, so the host's traffic stays on eth0",
        kernel: Kernel::Exactly {
            rules: BASE_RULES,
            routes: BASE_ROUTES,
            addresses: &["eth1 10.98.1.21/32"],
        },
        files: &[FileWant::Holds(STATE, "\"kind\":\"everything\"")],
        log: "eth1: refused ipv4-prefix 0.0.0.0/0: a /0 (every address)",
        run: || gate_bound("fg4all", &[(MAC1, "ipv4-prefix", "0.0.0.0/0")], &[]),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gate_ipv6_prefix_everything => Row {
        name: "gate_ipv6_prefix_everything",
        fault: "IMDS `ipv6-prefix: ::/0` on eth1 (BOUND6 for `fd00:98:1::20`)",
        does: "refuses the prefix by value and reason, applies the rest of the IPv6 plan",
        kernel: Kernel::Exactly {
            rules: &["10001 from fd00:98:1::20 lookup 10001 proto 176"],
            routes: &["fd00:98:1::/64 via - dev eth1 scope - src - table 10001 proto 176"],
            addresses: &[],
        },
        files: &[FileWant::Holds(STATE, "\"kind\":\"everything\"")],
        log: "eth1: refused ipv6-prefix ::/0: a /0 (every address)",
        run: || gate_bound("fg6all", &[(MAC1, "ipv6-prefix", "::/0")], &[
            ("reason", "BOUND6"),
            ("new_ip6_address", "fd00:98:1::20"),
            ("new_ip6_prefixlen", "128"),
        ]),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gate_lease_unspecified => Row {
        name: "gate_lease_unspecified",
        fault: "`new_ip_address=0.0.0.0` on eth1, whose device-number IMDS knows (BOUND)",
        does: "the shim refuses the lease before anything is planned: a malformed event, no worker",
        exit: Some(2),
        kernel: Kernel::NONE,
        files: &[FileWant::Absent(STATE), FileWant::Absent("run/leasehook/pending/eth1.json")],
        log: "dhclient variable new_ip_address: refused as a leased address: unspecified (0.0.0.0/32) (got \"0.0.0.0\")",
        run: || gate_bound("fg0", &[], &[("new_ip_address", "0.0.0.0")]),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gate_lease_unspecified_dhcpcd => Row {
        name: "gate_lease_unspecified_dhcpcd",
        fault: "the same lease through dhcpcd (`reason=BOUND new_ip_address=0.0.0.0 new_subnet_cidr=24`)",
        does: "the dhcpcd shim refuses the lease the same way",
        exit: Some(2),
        kernel: Kernel::NONE,
        files: &[FileWant::Absent(STATE)],
        log: "dhcpcd variable new_ip_address: refused as a leased address: unspecified (0.0.0.0/32)",
        run: || gate_shim("fg0d", "leasehook-dhcpcd", &[], &[
            ("reason", "BOUND"), ("interface", "eth1"), ("new_ip_address", "0.0.0.0"),
            ("new_subnet_cidr", "24"), ("new_routers", "10.98.1.1"),
        ]),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gate_lease_unspecified_udhcpc => Row {
        name: "gate_lease_unspecified_udhcpc",
        fault: "the same lease through udhcpc (`bound`, `ip=0.0.0.0 subnet=255.255.255.0`)",
        does: "the udhcpc shim refuses the lease the same way",
        exit: Some(2),
        kernel: Kernel::NONE,
        files: &[FileWant::Absent(STATE)],
        log: "udhcpc variable ip: refused as a leased address: unspecified (0.0.0.0/32)",
        run: || gate_shim("fg0u", "leasehook-udhcpc", &["bound"], &[
            ("interface", "eth1"), ("ip", "0.0.0.0"), ("subnet", "255.255.255.0"),
            ("router", "10.98.1.1"),
        ]),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gate_lease_primary_address => Row {
        name: "gate_lease_primary_address",
        fault: "a RENEW on eth1 leasing the primary's address `10.98.0.10`, and IMDS lists it in eth1's `local-ipv4s` too",
        does: "refuses the lease and the address (eth0 holds it, the kernel says): the IPv4 family is left as it was, the refusal recorded",
        files: &[FileWant::Holds(STATE, "\"owner\":\"eth0\"")],
        log: "eth1: refused lease 10.98.0.10: eth0 holds 10.98.0.10: another NIC's address",
        run: run_gate_lease_primary_address,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gate_local_ipv4s_hostile => Row {
        name: "gate_local_ipv4s_hostile",
        fault: "IMDS `local-ipv4s` of eth1: `10.98.1.20`, `127.0.0.1`, `255.255.255.255`, `169.254.169.254` (BOUND)",
        does: "refuses each hostile value by value and reason: no rule and no /32 for them; the leased address's rule and routes stay",
        kernel: Kernel::Exactly {
            rules: &["10001 from 10.98.1.20 lookup 10001 proto 176"],
            routes: BASE_ROUTES,
            addresses: &[],
        },
        files: &[FileWant::Holds(STATE, "\"kind\":\"metadata-service\"")],
        log: "eth1: refused local-ipv4s 169.254.169.254: the metadata service's address 169.254.169.254",
        run: || gate_bound(
            "fglocal",
            &[(MAC1, "local-ipv4s", "10.98.1.20\n127.0.0.1\n255.255.255.255\n169.254.169.254")],
            &[],
        ),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gate_prefix_halves => Row {
        name: "gate_prefix_halves",
        fault: "IMDS `ipv4-prefix` of eth1: `0.0.0.0/1` and `128.0.0.0/1` (BOUND)",
        does: "refuses both halves of everything; applies the rest of the plan",
        kernel: Kernel::Exactly {
            rules: BASE_RULES,
            routes: BASE_ROUTES,
            addresses: &["eth1 10.98.1.21/32"],
        },
        files: &[FileWant::Holds(STATE, "0.0.0.0/1")],
        log: "eth1: refused ipv4-prefix 128.0.0.0/1: covers multicast (224.0.0.0/4)",
        run: || gate_bound("fghalf", &[(MAC1, "ipv4-prefix", "0.0.0.0/1\n128.0.0.0/1")], &[]),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gate_primary_subnet_on_secondary => Row {
        name: "gate_primary_subnet_on_secondary",
        fault: "IMDS `ipv4-prefix` of eth1: the primary's subnet `10.98.0.0/24` (BOUND)",
        does: "refuses it (eth0 holds 10.98.0.10 in it); applies the rest of the plan",
        kernel: Kernel::Exactly {
            rules: BASE_RULES,
            routes: BASE_ROUTES,
            addresses: &["eth1 10.98.1.21/32"],
        },
        files: &[FileWant::Holds(STATE, "10.98.0.0/24")],
        log: "eth1: refused ipv4-prefix 10.98.0.0/24: eth0 holds 10.98.0.10: another NIC's address",
        run: || gate_bound("fgpsub", &[(MAC1, "ipv4-prefix", "10.98.0.0/24")], &[]),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gate_two_nics_one_device_number => Row {
        name: "gate_two_nics_one_device_number",
        fault: "two NICs with one device-number: eth1 applied (device-number 1), then eth2 `02:00:00:00:00:03` (10.98.2.30, device-number 1 too) sends BOUND",
        does: "a conflict: eth2 gets nothing and eth1's rules are not touched; the error and `leasehook status` name both",
        exit: Some(1),
        files: &[
            FileWant::Unchanged(STATE),
            FileWant::Holds("run/leasehook/iface/eth2.json", "\"kind\":\"table-claimed\""),
        ],
        log: "refused: device-number 1: gives table 10001, which eth1 claims too: neither NIC's rules are touched",
        run: run_gate_two_nics_one_device_number,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gate_from_all_rule_removed => Row {
        name: "gate_from_all_rule_removed",
        fault: "a `from all lookup 10001 proto 176` rule of leasehook's (an older version's), then BOUND",
        does: "the rule reader sees it (a rule of ours without a source): the diff removes it and the plan applies",
        kernel: Kernel::Exactly {
            rules: BASE_RULES,
            routes: BASE_ROUTES,
            addresses: &["eth1 10.98.1.21/32"],
        },
        files: &[FileWant::Holds(STATE, "10.98.1.20/32")],
        log: "6 change(s) for eth1 IPv4",
        not_in_log: "in the way",
        run: || foreign_then_bound(&["rule", "add", "from", "all", "lookup", "10001", "priority", "10001", "proto", "176"]),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gate_from_all_rule_flushed => Row {
        name: "gate_from_all_rule_flushed",
        fault: "the same `from all` rule of leasehook's, then `leasehook flush`",
        does: "flush finds and removes it",
        kernel: Kernel::NONE,
        files: &[],
        log: "1 change(s): 0 added, 1 removed",
        run: run_gate_from_all_rule_flushed,
        ..Row::KEEPS
    };
}

/// Runs `program` (a shim built beside the tests) in the instance's namespace the
/// way its client would (a clean environment: `vars`, the row's `LEASEHOOK_*`),
/// with `args`, against IMDS at `endpoint`.
pub(crate) fn shim_in(
    i: &Instance,
    program: &str,
    args: &[&str],
    vars: &[(&str, &str)],
    endpoint: &str,
) -> (Output, Duration) {
    let mut env = owned(vars);
    env.extend(Cloud::Ec2.env(endpoint));
    env.extend(owned(&[("LEASEHOOK_IMDS_BIND_INTERFACE", "false")]));
    i.run_in(&env, &sibling_bin(program), args)
}

/// eth1's dhclient BOUND environment, with `over` replacing or adding variables.
pub(crate) fn dhclient_vars<'a>(over: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut vars = vec![
        ("reason", "BOUND"),
        ("interface", "eth1"),
        ("new_ip_address", "10.98.1.20"),
        ("new_subnet_mask", "255.255.255.0"),
        ("new_routers", "10.98.1.1"),
    ];
    for (k, v) in over {
        vars.retain(|(key, _)| key != k);
        vars.push((k, v));
    }
    if over.iter().any(|(k, _)| *k == "new_ip6_address") {
        vars.retain(|(k, _)| !k.starts_with("new_") || k.starts_with("new_ip6"));
    }
    vars
}

/// A fresh instance, IMDS serving the world's tree with `set`, and eth1's dhclient
/// BOUND (with `over`).
fn gate_bound(tag: &str, set: &[(&str, &str, &str)], over: &[(&str, &str)]) -> Seen {
    Instance::new(tag).faulted(|i| {
        let url = i.start_imds(&tree_with(set), &Imds::healthy());
        shim_in(i, "leasehook-dhclient", &[], &dhclient_vars(over), &url)
    })
}

/// A fresh instance and one run of another client's shim.
fn gate_shim(tag: &str, program: &str, args: &[&str], vars: &[(&str, &str)]) -> Seen {
    Instance::new(tag).faulted(|i| {
        let url = i.start(Cloud::Ec2, &Imds::healthy());
        shim_in(i, program, args, vars, &url)
    })
}

fn run_gate_lease_primary_address() -> Seen {
    let mut i = Instance::new("fgprim");
    i.bound();
    i.faulted(|i| {
        let url = i.start_imds(
            &tree_with(&[(MAC1, "local-ipv4s", "10.98.0.10\n10.98.1.20\n10.98.1.21")]),
            &Imds::healthy(),
        );
        shim_in(
            i,
            "leasehook-dhclient",
            &[],
            &dhclient_vars(&[
                ("reason", "RENEW"),
                ("new_ip_address", "10.98.0.10"),
                ("old_ip_address", "10.98.1.20"),
                ("old_subnet_mask", "255.255.255.0"),
            ]),
            &url,
        )
    })
}

fn run_gate_two_nics_one_device_number() -> Seen {
    const MAC2: &str = "02:00:00:00:00:03";
    let mut i = Instance::new("fgdev");
    i.bound();
    i.ns.veth("eth2", MAC2, "vpc2");
    i.ns.ip(&["address", "add", "10.98.2.30/24", "dev", "eth2"]);
    i.faulted(|i| {
        let mut tree = default_tree();
        tree["latest"]["meta-data"]["network"]["interfaces"]["macs"][MAC2] = json!({
            "device-number": "1", "interface-id": "eni-0000000000000003", "mac": MAC2,
            "local-ipv4s": "10.98.2.30", "subnet-ipv4-cidr-block": "10.98.2.0/24"
        });
        let url = i.start_imds(&tree, &Imds::healthy());
        let (mut out, elapsed) = shim_in(
            i,
            "leasehook-dhclient",
            &[],
            &dhclient_vars(&[
                ("interface", "eth2"),
                ("new_ip_address", "10.98.2.30"),
                ("new_routers", "10.98.2.1"),
            ]),
            &url,
        );
        assert!(
            text(&out).contains("eth2: table 10001 is claimed by eth1 too (two NICs with one device-number): neither NIC's rules are touched"),
            "{}",
            text(&out)
        );
        // What `leasehook status` shows, after the hook's own lines: degraded (1),
        // eth2's last event a conflict.
        let status = Command::new(leasehook_bin())
            .args(["status", "--root"])
            .arg(&i.root)
            .output()
            .unwrap();
        assert_eq!(status.status.code(), Some(1), "{status:?}");
        out.stderr.extend_from_slice(&status.stdout);
        (out, elapsed)
    })
}

fn run_gate_from_all_rule_flushed() -> Seen {
    let i = Instance::new("fgflush");
    i.ns.ip(&[
        "rule", "add", "from", "all", "lookup", "10001", "priority", "10001", "proto", "176",
    ]);
    let rules = snap(&i.ns).0;
    assert!(
        rules
            .iter()
            .any(|r| r == "10001 from all lookup 10001 proto 176"),
        "{rules:?}"
    );
    // The summary is on standard output; the row reads both.
    i.faulted(|i| {
        i.leasehook(
            None,
            &[
                OsStr::new("flush"),
                OsStr::new("--root"),
                i.root.as_os_str(),
            ],
        )
    })
}

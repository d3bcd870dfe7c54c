// SPDX-License-Identifier: Apache-2.0
//! Each detection on a fake root: present, absent, switched off, garbage, and
//! symlinks (a loop, a link out of the root) that must not be followed.

use std::os::unix::fs::symlink;
use std::path::Path;

use super::*;

fn put(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn link(root: &Path, rel: &str, target: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    symlink(target, p).unwrap();
}

fn tools(root: &Path) -> Vec<(Tool, bool)> {
    detect(root).iter().map(|f| (f.tool, f.active)).collect()
}

#[test]
fn nothing_on_an_empty_or_missing_root() {
    let t = tempfile::tempdir().unwrap();
    assert_eq!(detect(t.path()), []);
    assert_eq!(detect(&t.path().join("nope")), []);
    assert_eq!(summary(&[]), "none");
}

#[test]
fn ec2_net_utils_rule_masked_units_and_dropins() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    put(
        r,
        "usr/lib/udev/rules.d/99-vpc-policy-routes.rules",
        "SUBSYSTEM==\"net\"\n",
    );
    let found = detect(r);
    assert_eq!(found.len(), 1);
    assert!(found[0].active);
    assert_eq!(
        found[0].path,
        "/usr/lib/udev/rules.d/99-vpc-policy-routes.rules"
    );
    assert_eq!(
        found[0].to_string(),
        "amazon-ec2-net-utils (active: udev rule /usr/lib/udev/rules.d/99-vpc-policy-routes.rules)"
    );
    // Masked as docs/migrating.md says: a same-named link to /dev/null in /etc.
    link(
        r,
        "etc/udev/rules.d/99-vpc-policy-routes.rules",
        "/dev/null",
    );
    assert_eq!(tools(r), [(Tool::Ec2NetUtils, false)]);
    // What it wrote in /run this boot is active whatever the rule.
    put(
        r,
        "run/systemd/network/70-eth1.network.d/ec2net_policy_4.conf",
        "[RoutingPolicyRule]\n",
    );
    let found = detect(r);
    assert_eq!(found.len(), 2);
    assert_eq!(
        found[1].path,
        "/run/systemd/network/70-eth1.network.d/ec2net_policy_4.conf"
    );
    assert!(found[1].active && any_active(&found));
    // Another drop-in folder (netplan's, an operator's) is not its.
    let t = tempfile::tempdir().unwrap();
    put(
        t.path(),
        "run/systemd/network/10-netplan-eth1.network.d/x.conf",
        "",
    );
    put(
        t.path(),
        "usr/lib/systemd/system/policy-routes@.service",
        "[Unit]\n",
    );
    assert_eq!(tools(t.path()), [(Tool::Ec2NetUtils, false)]);
    link(
        t.path(),
        "etc/systemd/system/multi-user.target.wants/policy-routes@eth1.service",
        "/usr/lib/systemd/system/policy-routes@.service",
    );
    assert_eq!(
        tools(t.path()),
        [(Tool::Ec2NetUtils, false), (Tool::Ec2NetUtils, true)]
    );
}

#[test]
fn cloud_init_policy_routing_and_hotplug() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    // Its netplan without policy routing (a single NIC): nothing.
    put(
        r,
        "etc/netplan/50-cloud-init.yaml",
        "network:\n  version: 2\n  ethernets:\n    eth0: {dhcp4: true}\n",
    );
    assert_eq!(detect(r), []);
    put(
        r,
        "etc/netplan/50-cloud-init.yaml",
        "network:\n  ethernets:\n    eth1:\n      routing-policy:\n      - from: 10.0.1.20\n        table: 101\n",
    );
    assert_eq!(tools(r), [(Tool::CloudInit, true)]);
    put(
        r,
        "etc/systemd/network/10-cloud-init-eth1.network",
        "[RoutingPolicyRule]\nTable=101\n",
    );
    put(
        r,
        "etc/systemd/network/10-cloud-init-eth0.network",
        "[Match]\nName=eth0\n",
    );
    let found = detect(r);
    assert_eq!(
        found[1].path,
        "/etc/systemd/network/10-cloud-init-eth1.network"
    );
    put(
        r,
        "etc/udev/rules.d/10-cloud-init-hook-hotplug.rules",
        "LABEL=\"cloudinit_hook\"\n",
    );
    assert_eq!(tools(r).last(), Some(&(Tool::CloudInitHotplug, true)));
    // Emptied (how an image builder may switch it off): found, inactive.
    put(r, "etc/udev/rules.d/10-cloud-init-hook-hotplug.rules", "");
    assert_eq!(tools(r).last(), Some(&(Tool::CloudInitHotplug, false)));
    // The flag that turns the packaged rule on.
    put(r, "var/lib/cloud/hotplug.enabled", "");
    assert!(tools(r).contains(&(Tool::CloudInitHotplug, true)));
}

#[test]
fn nm_cloud_setup_needs_enabling_and_a_provider() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    put(
        r,
        "usr/lib/systemd/system/nm-cloud-setup.service",
        "[Unit]\n",
    );
    assert_eq!(tools(r), [(Tool::NmCloudSetup, false)]);
    link(
        r,
        "etc/systemd/system/timers.target.wants/nm-cloud-setup.timer",
        "/usr/lib/systemd/system/nm-cloud-setup.timer",
    );
    assert_eq!(tools(r), [(Tool::NmCloudSetup, false)]);
    put(
        r,
        "etc/systemd/system/nm-cloud-setup.service.d/override.conf",
        "[Service]\nEnvironment=NM_CLOUD_SETUP_EC2=yes\n",
    );
    let found = detect(r);
    assert_eq!(found.len(), 1);
    assert!(found[0].active);
    assert_eq!(
        found[0].path,
        "/etc/systemd/system/timers.target.wants/nm-cloud-setup.timer"
    );
    // A provider switched off, or only its log level: inactive.
    put(
        r,
        "etc/systemd/system/nm-cloud-setup.service.d/override.conf",
        "[Service]\nEnvironment=NM_CLOUD_SETUP_EC2=no NM_CLOUD_SETUP_LOG=yes\n",
    );
    assert_eq!(tools(r), [(Tool::NmCloudSetup, false)]);
}

#[test]
fn cloud_netconfig_when_its_switch_says_yes() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    // NetworkManager: its defaults file (/etc read after /usr/etc) says yes.
    put(
        r,
        "usr/lib/NetworkManager/dispatcher.d/90-cloud-netconfig",
        "#!/bin/bash\n",
    );
    assert_eq!(tools(r), [(Tool::CloudNetconfig, false)]);
    put(
        r,
        "usr/etc/default/cloud-netconfig",
        "# comment\nCLOUD_NETCONFIG_MANAGE=\"yes\"\n",
    );
    assert_eq!(tools(r), [(Tool::CloudNetconfig, true)]);
    put(
        r,
        "etc/default/cloud-netconfig",
        "CLOUD_NETCONFIG_MANAGE='no'\n",
    );
    assert_eq!(tools(r), [(Tool::CloudNetconfig, false)]);
    // wicked: per interface, in its ifcfg file.
    let t = tempfile::tempdir().unwrap();
    put(t.path(), "etc/netconfig.d/cloud-netconfig", "#!/bin/bash\n");
    put(
        t.path(),
        "etc/sysconfig/network/ifcfg-eth0",
        "BOOTPROTO='dhcp'\nCLOUD_NETCONFIG_MANAGE='no'\n",
    );
    assert_eq!(tools(t.path()), [(Tool::CloudNetconfig, false)]);
    put(
        t.path(),
        "etc/sysconfig/network/ifcfg-eth1",
        "CLOUD_NETCONFIG_MANAGE='yes'\n",
    );
    let found = detect(t.path());
    assert_eq!(found[0].path, "/etc/netconfig.d/cloud-netconfig");
    assert!(found[0].active);
}

#[test]
fn guest_agent_enabled_with_nic_setup() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    put(
        r,
        "lib/systemd/system/google-guest-agent.service",
        "[Unit]\n",
    );
    assert_eq!(tools(r), [(Tool::GuestAgent, false)]);
    link(
        r,
        "etc/systemd/system/multi-user.target.wants/google-guest-agent.service",
        "/lib/systemd/system/google-guest-agent.service",
    );
    // setup = true is the agent's default.
    assert_eq!(tools(r), [(Tool::GuestAgent, true)]);
    put(
        r,
        "etc/default/instance_configs.cfg",
        "[NetworkInterfaces]\nsetup = false\n[Other]\nsetup = true\n",
    );
    assert_eq!(tools(r), [(Tool::GuestAgent, false)]);
    // The template is read last and wins.
    put(
        r,
        "etc/default/instance_configs.cfg.template",
        "[networkinterfaces]\nSetup = True\n",
    );
    assert_eq!(tools(r), [(Tool::GuestAgent, true)]);
    // A unit masked (its wants link to /dev/null) is not enabled.
    let t = tempfile::tempdir().unwrap();
    put(
        t.path(),
        "usr/lib/systemd/system/google-guest-agent.service",
        "",
    );
    link(
        t.path(),
        "etc/systemd/system/multi-user.target.wants/google-guest-agent.service",
        "/dev/null",
    );
    assert_eq!(tools(t.path()), [(Tool::GuestAgent, false)]);
}

#[test]
fn garbage_fifos_and_symlinks_are_not_followed() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    // Bytes that are not UTF-8 around the key: still read, no panic.
    let mut bytes = vec![0xff_u8, 0xfe, 0, 1];
    bytes.extend_from_slice(b"routing-policy:\n");
    std::fs::create_dir_all(r.join("etc/netplan")).unwrap();
    std::fs::write(r.join("etc/netplan/50-cloud-init.yaml"), &bytes).unwrap();
    assert_eq!(tools(r), [(Tool::CloudInit, true)]);
    // Larger than the limit: not read.
    std::fs::write(
        r.join("etc/netplan/50-cloud-init.yaml"),
        vec![b'x'; usize::try_from(LIMIT).unwrap() + 1],
    )
    .unwrap();
    assert_eq!(detect(r), []);
    // A FIFO where the file should be: not waited on.
    std::fs::remove_file(r.join("etc/netplan/50-cloud-init.yaml")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(r.join("etc/netplan/50-cloud-init.yaml"))
        .status()
        .unwrap();
    assert!(made.success());
    assert_eq!(detect(r), []);
    // A symlink loop at a folder and at a file: absent, no hang.
    link(r, "etc/systemd/network", "network");
    link(
        r,
        "etc/udev/rules.d/10-cloud-init-hook-hotplug.rules",
        "10-cloud-init-hook-hotplug.rules",
    );
    link(r, "usr/lib/udev", "udev");
    let found = detect(r);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].tool, Tool::CloudInitHotplug);
    // A folder that links out of the root is never followed into.
    let outside = tempfile::tempdir().unwrap();
    put(outside.path(), "99-vpc-policy-routes.rules", "x\n");
    put(outside.path(), "50-cloud-init.yaml", "routing-policy:\n");
    let t = tempfile::tempdir().unwrap();
    link(
        t.path(),
        "usr/lib/udev/rules.d",
        outside.path().to_str().unwrap(),
    );
    link(t.path(), "etc/netplan", outside.path().to_str().unwrap());
    link(
        t.path(),
        "etc/systemd/network/10-cloud-init-eth1.network",
        &outside
            .path()
            .join("50-cloud-init.yaml")
            .display()
            .to_string(),
    );
    assert_eq!(detect(t.path()), []);
}

#[test]
fn owners_by_table_and_protocol() {
    let found = vec![
        Finding {
            tool: Tool::Ec2NetUtils,
            path: "/usr/lib/udev/rules.d/99-vpc-policy-routes.rules".to_owned(),
            what: "udev rule".to_owned(),
            active: true,
        },
        Finding {
            tool: Tool::CloudInit,
            path: "/etc/netplan/50-cloud-init.yaml".to_owned(),
            what: "routing-policy in".to_owned(),
            active: false,
        },
    ];
    assert_eq!(
        owner_of(&found, 10001, 4),
        "amazon-ec2-net-utils's (found: /usr/lib/udev/rules.d/99-vpc-policy-routes.rules)"
    );
    // Inactive, or not its numbers: nobody named.
    assert_eq!(owner_of(&found, 101, 4), "");
    assert_eq!(owner_of(&found, 5000, 16), "");
    assert_eq!(protocol_name(4), "static");
    assert_eq!(protocol_name(16), "dhcp");
    assert_eq!(protocol_name(66), "66");
    let j = json(&found);
    assert_eq!(j[0]["tool"], "amazon-ec2-net-utils");
    assert_eq!(j[1]["active"], false);
}

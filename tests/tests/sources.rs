// SPDX-License-Identifier: Apache-2.0
//! The EC2 and NoCloud datasources end to end: EC2's instance data against the IMDS
//! emulator on loopback, NoCloud from real seed folders and the kernel command line
//! in a temporary root, and all sources behind the one `Datasource` trait.

#![cfg(test)]

use std::fs;
use std::path::Path;
use std::time::Duration;

use leasehook_core::Error;
use leasehook_core::source::detect::{ReadOptions, check, read_snapshot};
use leasehook_core::source::ec2::identity::Ec2Source;
use leasehook_core::source::ec2::{Ec2, WaitPolicy};
use leasehook_core::source::lxd::Lxd;
use leasehook_core::source::nocloud::NoCloud;
use leasehook_core::source::{Check, Datasource, NoneSource, SourceKind};
use leasehook_tests::emulator::{
    Config, Emulator, SAMPLE_PRIMARY, SAMPLE_SECONDARY, Scenario, sample_tree,
};
use serde_json::{Value, json};

fn emulator(tree: Value, scenario: Value) -> Emulator {
    let mut cfg = Config::new(tree);
    cfg.scenario = Scenario::from_value(scenario).unwrap();
    cfg.world.require_token = true;
    Emulator::start("127.0.0.1:0".parse().unwrap(), cfg).unwrap()
}

fn ec2(root: &Path, emu: &Emulator) -> Ec2Source {
    let client = Ec2::try_new(root)
        .unwrap()
        .with_endpoints([emu.base_url()])
        .unwrap();
    Ec2Source::new(client).with_policy(WaitPolicy::default().with_budget(Duration::from_secs(5)))
}

#[test]
fn ec2_instance_data_from_the_emulator_by_keys() {
    let root = tempfile::tempdir().unwrap();
    let emu = emulator(sample_tree(), json!({}));
    let src = ec2(root.path(), &emu);
    let d = src.fetch().unwrap();
    assert_eq!(d.datasource, SourceKind::Ec2);
    assert_eq!(d.instance_id, "i-0fedcba9876543210");
    assert_eq!(d.region.as_deref(), Some("eu-central-1"));
    assert_eq!(d.availability_zone.as_deref(), Some("eu-central-1a"));
    assert_eq!(
        d.local_hostname.as_deref(),
        Some("ip-10-20-0-10.eu-central-1.compute.internal")
    );
    assert_eq!(d.user_data.as_deref(), Some(&b"#cloud-config\n{}\n"[..]));
    assert_eq!((d.cloud_name.as_str(), d.platform.as_str()), ("aws", "ec2"));
    assert_eq!(d.subplatform, format!("metadata ({})", emu.base_url()));
    let macs = &d.ds["meta-data"]["network"]["interfaces"]["macs"];
    assert_eq!(macs[SAMPLE_PRIMARY]["device-number"], "0");
    assert_eq!(
        macs[SAMPLE_SECONDARY]["local-ipv4s"],
        "10.20.1.20\n10.20.1.21"
    );
    assert_eq!(
        macs[SAMPLE_SECONDARY]["subnet-ipv6-cidr-blocks"],
        "2a05:d014:0:1::/64"
    );
    assert!(
        macs[SAMPLE_SECONDARY].get("vpc-id").is_none(),
        "only the keys planning needs"
    );
    assert_eq!(d.ds["meta-data"]["mac"], SAMPLE_PRIMARY);
    let net = leasehook_core::metadata::parse_tree(&d.ds["meta-data"]).unwrap();
    assert_eq!(net.nics.len(), 2);

    // Keys, not a crawl: the token, the document, local-hostname, mac, the MAC
    // folder listing, the primary's listing and its 4 listed planning keys, the
    // secondary's listing and its 6, user-data: 18 requests.
    let log = emu.log();
    let paths: Vec<&str> = log.iter().map(|e| e.path.as_str()).collect();
    assert!(!paths.contains(&"/latest/meta-data/"), "{paths:#?}");
    assert!(
        !paths
            .iter()
            .any(|p| p.contains("block-device-mapping") || p.contains("public-keys"))
    );
    assert!(
        !paths
            .iter()
            .any(|p| p.ends_with("/vpc-id") || p.ends_with("/owner-id"))
    );
    assert_eq!(emu.count("PUT", "/latest/api/token"), 1);
    assert_eq!(log.len(), 18, "{paths:#?}");
    assert!(log.iter().all(|e| e.status == "200"), "{log:#?}");

    // The identity check: one request with the cached token.
    let before = emu.log().len();
    assert!(src.check_instance_id(&d).unwrap());
    let mut other = d.clone();
    other.instance_id = "i-00000000000000000".into();
    assert!(!src.check_instance_id(&other).unwrap());
    let after: Vec<String> = emu.log()[before..].iter().map(|e| e.path.clone()).collect();
    assert_eq!(
        after,
        [
            "/latest/meta-data/instance-id",
            "/latest/meta-data/instance-id"
        ]
    );
}

#[test]
fn ec2_user_data_404_is_none_and_binary_user_data_is_kept() {
    let root = tempfile::tempdir().unwrap();
    let mut tree = sample_tree();
    tree["latest"]["user-data"] = Value::Null;
    let emu = emulator(tree, json!({}));
    let d = ec2(root.path(), &emu).fetch().unwrap();
    assert_eq!(d.user_data, None);
    assert_eq!(emu.count("GET", "/latest/user-data"), 1);

    // gzip user-data is not UTF-8: it arrives as bytes (the emulator's garbage
    // answer), and travels in JSON as ci-b64.
    let emu = emulator(
        sample_tree(),
        json!({"rules": [{"path": "/latest/user-data", "action": "garbage"}]}),
    );
    let d = ec2(root.path(), &emu).fetch().unwrap();
    let ud = d.user_data.clone().unwrap();
    assert!(std::str::from_utf8(&ud).is_err());
    let v = serde_json::to_value(&d).unwrap();
    assert!(
        v["user_data"].as_str().unwrap().starts_with("ci-b64:"),
        "{v}"
    );
}

#[test]
fn ec2_retries_what_waiting_can_fix_and_fails_on_the_rest() {
    let root = tempfile::tempdir().unwrap();
    let emu = emulator(
        sample_tree(),
        json!({"rules": [
            {"path": "/latest/meta-data/mac", "status": 503, "retry_after": 1, "count": 1},
            {"path": "/latest/dynamic/instance-identity/document", "status": 500, "count": 2}
        ]}),
    );
    let d = ec2(root.path(), &emu).fetch().unwrap();
    assert_eq!(d.instance_id, "i-0fedcba9876543210");
    assert_eq!(emu.count("GET", "/latest/meta-data/mac"), 2);
    assert_eq!(
        emu.count("GET", "/latest/dynamic/instance-identity/document"),
        3
    );

    // A disabled IMDS (403 on the token) is not retried. (A fresh root: the
    // first emulator's token is still in the other root's cache.)
    let fresh = tempfile::tempdir().unwrap();
    let emu = emulator(
        sample_tree(),
        json!({"rules": [{"path": "/latest/api/token", "method": "PUT", "status": 403}]}),
    );
    let e = ec2(fresh.path(), &emu).fetch().unwrap_err();
    assert!(e.to_string().contains("IMDS disabled"), "{e}");
    assert_eq!(emu.log().len(), 1, "{:#?}", emu.log());

    // Garbage is an error naming the key.
    let emu = emulator(
        sample_tree(),
        json!({"values": [{"path": format!("/latest/meta-data/network/interfaces/macs/{SAMPLE_SECONDARY}/device-number"), "value": "one"}]}),
    );
    let e = ec2(root.path(), &emu).fetch().unwrap_err();
    assert!(matches!(e, Error::Metadata { .. }), "{e:?}");
    assert!(e.to_string().contains("device-number"), "{e}");
}

fn write(root: &Path, rel: &str, body: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, body).unwrap();
}

#[test]
fn nocloud_from_a_seed_folder() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "proc/cmdline", "ro quiet\n");
    write(
        root,
        "var/lib/cloud/seed/nocloud/meta-data",
        "instance-id: iid-local01\nlocal-hostname: seeded\n",
    );
    write(
        root,
        "var/lib/cloud/seed/nocloud/user-data",
        "#cloud-config\npackages: [htop]\n",
    );
    write(
        root,
        "var/lib/cloud/seed/nocloud/vendor-data",
        "#cloud-config\n{}\n",
    );
    write(
        root,
        "var/lib/cloud/seed/nocloud/network-config",
        "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n",
    );
    // A later, complete seed folder is not read: the first one wins.
    write(
        root,
        "var/lib/cloud/seed/nocloud-net/meta-data",
        "instance-id: other\n",
    );
    write(root, "var/lib/cloud/seed/nocloud-net/user-data", "");
    let src = NoCloud::new(root);
    let d = src.fetch().unwrap();
    assert_eq!(d.instance_id, "iid-local01");
    assert_eq!(d.local_hostname.as_deref(), Some("seeded"));
    assert_eq!(
        d.user_data.as_deref(),
        Some(&b"#cloud-config\npackages: [htop]\n"[..])
    );
    assert_eq!(d.vendor_data.as_deref(), Some(&b"#cloud-config\n{}\n"[..]));
    assert_eq!(
        d.network_config.as_ref().unwrap()["ethernets"]["eth0"]["dhcp4"],
        true
    );
    assert_eq!(
        d.subplatform,
        format!("seed-dir ({}/var/lib/cloud/seed/nocloud)", root.display())
    );
    assert_eq!(d.ds["meta_data"]["instance-id"], "iid-local01");
    assert!(src.check_instance_id(&d).unwrap());

    // The seed changes: another instance.
    write(
        root,
        "var/lib/cloud/seed/nocloud/meta-data",
        "instance-id: iid-local02\n",
    );
    assert!(!src.check_instance_id(&d).unwrap());
}

#[test]
fn nocloud_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "proc/cmdline",
        "BOOT_IMAGE=/vmlinuz ro ds=nocloud;s=file:///srv/seed/;h=cmdline-host quiet\n",
    );
    write(
        root,
        "srv/seed/meta-data",
        "instance-id: from-seedfrom\nlocal-hostname: ignored\n",
    );
    write(root, "srv/seed/user-data", "#cloud-config\n{}\n");
    let d = NoCloud::new(root).fetch().unwrap();
    assert_eq!(d.instance_id, "from-seedfrom");
    // Values on the command line win over the seed's.
    assert_eq!(d.local_hostname.as_deref(), Some("cmdline-host"));
    assert_eq!(d.subplatform, "seed-dir (cmdline,/srv/seed/)");
    assert_eq!(d.meta_data["dsmode"], "local");

    // i= alone is enough; the instance-id otherwise defaults to "nocloud".
    write(root, "proc/cmdline", "ds=nocloud;i=iid-cmdline\n");
    assert_eq!(
        NoCloud::new(root).fetch().unwrap().instance_id,
        "iid-cmdline"
    );
    // In a container the command line is PID 1's.
    write(
        root,
        "proc/1/cmdline",
        "/sbin/init\0ds=nocloud;i=iid-container\0",
    );
    assert_eq!(
        NoCloud::new(root)
            .with_virt("lxc")
            .fetch()
            .unwrap()
            .instance_id,
        "iid-container"
    );

    // A seed named but missing, and a network seed, are clear errors.
    write(root, "proc/cmdline", "ds=nocloud;s=/nowhere/\n");
    let e = NoCloud::new(root).fetch().unwrap_err().to_string();
    assert_eq!(e, "NoCloud seedfrom /nowhere/meta-data: missing");
    write(
        root,
        "proc/cmdline",
        "ds=nocloud-net;s=http://10.0.0.2/seed/\n",
    );
    let e = NoCloud::new(root).fetch().unwrap_err().to_string();
    assert!(e.contains("only local seeds"), "{e}");

    // Nothing at all: not found.
    write(root, "proc/cmdline", "ro\n");
    assert!(matches!(
        NoCloud::new(root).fetch(),
        Err(Error::NotFound {
            datasource: SourceKind::NoCloud,
            ..
        })
    ));
}

#[test]
fn nocloud_from_dmi_and_cloud_cfg() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "sys/class/dmi/id/product_serial",
        "ds=nocloud;s=file:///seed/;i=dmi-id\n",
    );
    write(root, "seed/meta-data", "instance-id: seed-id\n");
    write(root, "seed/user-data", "from dmi seed\n");
    let d = NoCloud::new(root).fetch().unwrap();
    assert_eq!(d.instance_id, "dmi-id");
    assert_eq!(d.user_data.as_deref(), Some(&b"from dmi seed\n"[..]));

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "etc/cloud/cloud.cfg.d/90-nocloud.cfg",
        "datasource:\n  NoCloud:\n    meta-data:\n      instance-id: cfg-id\n    user-data: |\n      #cloud-config\n",
    );
    let d = NoCloud::new(root).fetch().unwrap();
    assert_eq!(d.instance_id, "cfg-id");
    assert_eq!(d.user_data.as_deref(), Some(&b"#cloud-config\n"[..]));
    assert_eq!(d.subplatform, "seed-dir (ds_config)");

    // A cidata file system is detected, but not mounted: a clear error.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("dev/disk/by-label")).unwrap();
    std::os::unix::fs::symlink("../../vdb", root.join("dev/disk/by-label/cidata")).unwrap();
    let e = NoCloud::new(root)
        .with_virt("kvm")
        .fetch()
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not mount file systems"), "{e}");
}

#[test]
fn every_source_behind_one_trait() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "sys/class/dmi/id/product_uuid",
        "ec2e1916-9099-7caf-fd21-012345abcdef\n",
    );
    write(
        root,
        "var/lib/cloud/seed/nocloud/meta-data",
        "instance-id: i\n",
    );
    write(root, "var/lib/cloud/seed/nocloud/user-data", "");
    let emu = emulator(sample_tree(), json!({}));
    let sources: Vec<Box<dyn Datasource>> = vec![
        Box::new(ec2(root, &emu)),
        Box::new(Lxd::new(root).with_virt("kvm")),
        Box::new(NoCloud::new(root).with_virt("kvm")),
        Box::new(NoneSource),
    ];
    let snap = read_snapshot(&ReadOptions::new(root).with_virt("kvm")).unwrap();
    let found: Vec<(SourceKind, Check)> = sources
        .iter()
        .map(|s| (s.kind(), check(s.kind(), &snap).check))
        .collect();
    assert_eq!(
        found,
        [
            (SourceKind::Ec2, Check::Found),
            (SourceKind::Lxd, Check::NotFound),
            (SourceKind::NoCloud, Check::Found),
            (SourceKind::None, Check::NotFound),
        ]
    );
    let fetched: Vec<Result<String, String>> = sources
        .iter()
        .map(|s| s.fetch().map(|d| d.instance_id).map_err(|e| e.to_string()))
        .collect();
    assert_eq!(fetched[0], Ok("i-0fedcba9876543210".to_owned()));
    assert!(
        fetched[1]
            .as_ref()
            .unwrap_err()
            .starts_with("LXD not found:"),
        "{fetched:?}"
    );
    assert_eq!(fetched[2], Ok("i".to_owned()));
    assert_eq!(fetched[3], Ok("iid-datasource-none".to_owned()));
}

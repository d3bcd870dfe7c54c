// SPDX-License-Identifier: Apache-2.0
//! Table tests of the pure decision: one snapshot per row, no files.

#![allow(clippy::too_many_lines)]

use super::*;
use crate::source::azure::detect::AZURE_CHASSIS_ASSET_TAG;
use crate::source::ec2::detect::{Ec2Platform, ec2_platform};
use crate::source::oracle::detect::ORACLE_CHASSIS_ASSET_TAG;
use crate::source::short::{Ec2, Gce, Lxd, NoCloud, NoneDs};

fn base(virt: &str) -> Snapshot {
    Snapshot {
        root: PathBuf::from("/"),
        virt: virt.to_owned(),
        virt_from: "test".to_owned(),
        proc_cmdline: Some("BOOT_IMAGE=/vmlinuz root=/dev/vda1 ro".to_owned()),
        pid1_cmdline: Some("/sbin/init ".to_owned()),
        machine: "x86_64".to_owned(),
        ..Snapshot::default()
    }
}

fn ec2(virt: &str) -> Snapshot {
    let mut s = base(virt);
    s.dmi.product_uuid = Some("ec2e1916-9099-7caf-fd21-012345abcdef".to_owned());
    s.dmi.product_serial = Some("ec2e1916-9099-7caf-fd21-012345abcdef".to_owned());
    s.dmi.sys_vendor = Some("Amazon EC2".to_owned());
    s
}

fn seed(dir: &str, meta: bool, user: bool) -> Seed {
    Seed {
        dir: dir.to_owned(),
        meta_data: meta,
        user_data: user,
    }
}

fn configured(names: &[&str]) -> ConfiguredList {
    ConfiguredList {
        names: names.iter().map(|n| (*n).to_owned()).collect(),
        from: "/etc/leasehook/config.yaml line 1".to_owned(),
    }
}

fn cfg(path: &str, text: &str) -> ConfigText {
    ConfigText {
        path: path.to_owned(),
        text: text.to_owned(),
    }
}

type Edit = fn(&mut Snapshot);

#[test]
fn decisions() {
    let cases: Vec<(&str, Snapshot, Edit, Vec<SourceKind>)> = vec![
        ("ec2 hvm", ec2("kvm"), |_| {}, vec![Ec2, NoneDs]),
        (
            "ec2 byte-swapped uuid",
            base("kvm"),
            |s| {
                s.dmi.product_uuid = Some("AB232AEC-54BE-4843-8A2B-0123456789AB".into());
            },
            vec![Ec2, NoneDs],
        ),
        (
            "ec2 upper-case uuid",
            base("kvm"),
            |s| {
                s.dmi.product_uuid = Some("EC23AEF5-54BE-4843-8A2B-0123456789AB".into());
            },
            vec![Ec2, NoneDs],
        ),
        (
            "ec2 xen hypervisor uuid",
            base("xen"),
            |s| {
                s.hypervisor_uuid = Some("ec2c6e2f-5fac-4fc7-9c82-74127ec14bbb".into());
            },
            vec![Ec2, NoneDs],
        ),
        (
            "hypervisor uuid is case-sensitive",
            base("xen"),
            |s| {
                s.hypervisor_uuid = Some("EC2C6E2F-5FAC-4FC7-9C82-74127EC14BBB".into());
            },
            vec![],
        ),
        (
            "ec2 serial alone is not EC2",
            base("kvm"),
            |s| {
                s.dmi.product_serial = Some("ec2e1916-9099-7caf-fd21-012345abcdef".into());
                s.dmi.product_uuid = Some("11111111-2222-3333-4444-555555555555".into());
            },
            vec![],
        ),
        ("ec2 in a container", ec2("docker"), |_| {}, vec![]),
        ("ec2 in podman", ec2("podman"), |_| {}, vec![]),
        (
            "brightbox",
            base("kvm"),
            |s| {
                s.dmi.product_serial = Some("srv-otuxg.gb1.brightbox.com".into());
            },
            vec![Ec2, NoneDs],
        ),
        (
            "not brightbox",
            base("kvm"),
            |s| {
                s.dmi.product_serial = Some("tricky-host.bobrightbox.com".into());
            },
            vec![],
        ),
        (
            "odd DMI bytes",
            base("kvm"),
            |s| {
                s.dmi.product_uuid = Some("\u{fffd}ec2\u{fffd}-\u{0}".into());
                s.dmi.board_name = Some("\u{fffd}LXD".into());
            },
            vec![],
        ),
        (
            "lxd socket",
            base("lxc"),
            |s| s.lxd_socket = Node::Socket,
            vec![Lxd, NoneDs],
        ),
        (
            "lxd socket on metal",
            base("none"),
            |s| s.lxd_socket = Node::Socket,
            vec![Lxd, NoneDs],
        ),
        (
            "incus socket",
            base("lxc"),
            |s| s.incus_socket = Node::Socket,
            vec![Lxd, NoneDs],
        ),
        (
            "incus socket is a directory",
            base("lxc"),
            |s| s.incus_socket = Node::Other("directory".into()),
            vec![],
        ),
        (
            "incus kvm board name",
            base("kvm"),
            |s| s.dmi.board_name = Some("Incus".into()),
            vec![Lxd, NoneDs],
        ),
        (
            "incus board name in a container",
            base("lxc"),
            |s| s.dmi.board_name = Some("Incus".into()),
            vec![],
        ),
        (
            "incus kvm virtio port",
            base("kvm"),
            |s| {
                s.virtio_ports = vec![VirtioPort {
                    port: "vport1p1".into(),
                    name: Some("org.linuxcontainers.incus".into()),
                }];
            },
            vec![Lxd, NoneDs],
        ),
        (
            "lxd socket is a file",
            base("lxc"),
            |s| {
                s.lxd_socket = Node::Other("regular file".into());
            },
            vec![],
        ),
        (
            "lxd kvm board name",
            base("kvm"),
            |s| s.dmi.board_name = Some("LXD".into()),
            vec![Lxd, NoneDs],
        ),
        (
            "lxd qemu board name",
            base("qemu"),
            |s| s.dmi.board_name = Some("LXD".into()),
            vec![Lxd, NoneDs],
        ),
        (
            "lxd board name in a container",
            base("lxc"),
            |s| {
                s.dmi.board_name = Some("LXD".into());
            },
            vec![],
        ),
        (
            "lxd kvm virtio port",
            base("kvm"),
            |s| {
                s.virtio_ports = vec![
                    VirtioPort {
                        port: "vport0p0".into(),
                        name: None,
                    },
                    VirtioPort {
                        port: "vport0p1".into(),
                        name: Some("com.canonical.lxd".into()),
                    },
                ];
            },
            vec![Lxd, NoneDs],
        ),
        (
            "lxd kvm legacy virtio port",
            base("kvm"),
            |s| {
                s.virtio_ports = vec![VirtioPort {
                    port: "p".into(),
                    name: Some("org.linuxcontainers.lxd".into()),
                }];
            },
            vec![Lxd, NoneDs],
        ),
        (
            "wrong virtio name",
            base("kvm"),
            |s| {
                s.virtio_ports = vec![VirtioPort {
                    port: "p".into(),
                    name: Some("some.other.serial".into()),
                }];
            },
            vec![],
        ),
        (
            "virtio port but not a VM",
            base("none"),
            |s| {
                s.virtio_ports = vec![VirtioPort {
                    port: "p".into(),
                    name: Some("com.canonical.lxd".into()),
                }];
            },
            vec![],
        ),
        (
            "nocloud seed",
            base("kvm"),
            |s| {
                s.seeds = vec![seed("var/lib/cloud/seed/nocloud", true, true)];
            },
            vec![NoCloud, NoneDs],
        ),
        (
            "nocloud half seed",
            base("kvm"),
            |s| {
                s.seeds = vec![
                    seed("var/lib/cloud/seed/nocloud", true, false),
                    seed("var/lib/cloud/seed/nocloud-net", false, true),
                ];
            },
            vec![],
        ),
        (
            "nocloud label",
            base("kvm"),
            |s| s.fs_labels = vec!["cloudimg-rootfs".into(), "CIDATA".into()],
            vec![NoCloud, NoneDs],
        ),
        (
            "nocloud label in a container",
            base("lxc"),
            |s| s.fs_labels = vec!["cidata".into()],
            vec![],
        ),
        (
            "nocloud dmi serial",
            base("kvm"),
            |s| {
                s.dmi.product_serial = Some("ds=nocloud;s=http://10.0.0.1/".into());
            },
            vec![NoCloud, NoneDs],
        ),
        (
            "nocloud dmi serial mid-word",
            base("kvm"),
            |s| {
                s.dmi.product_serial = Some("xds=nocloud".into());
            },
            vec![],
        ),
        (
            "nocloud seedfrom in cloud.cfg",
            base("kvm"),
            |s| {
                s.cloud_config = vec![cfg(
                    "/etc/cloud/cloud.cfg",
                    "datasource:\n  NoCloud:\n    seedfrom: file:///srv/\n",
                )];
            },
            vec![NoCloud, NoneDs],
        ),
        (
            "ds=nocloud short-circuits",
            ec2("kvm"),
            |s| {
                s.proc_cmdline = Some("ro ds=nocloud;s=file:///seed/ quiet".into());
            },
            vec![NoCloud, NoneDs],
        ),
        (
            "ci.ds= and the last one wins",
            base("kvm"),
            |s| {
                s.proc_cmdline = Some("ds=Ec2 ci.ds=lxd".into());
            },
            vec![Lxd, NoneDs],
        ),
        (
            "ds= read from pid 1 in a container",
            base("lxc"),
            |s| {
                s.proc_cmdline = Some("ds=Ec2".into());
                s.pid1_cmdline = Some("/sbin/init ds=nocloud ".into());
            },
            vec![NoCloud, NoneDs],
        ),
        (
            "ds= names a source we lack",
            ec2("kvm"),
            |s| {
                s.proc_cmdline = Some("ds=Hetzner".into());
            },
            vec![],
        ),
        (
            "ds=None",
            ec2("kvm"),
            |s| s.proc_cmdline = Some("ds=None".into()),
            vec![NoneDs],
        ),
        (
            "empty ds= names nothing",
            ec2("kvm"),
            |s| s.proc_cmdline = Some("ds=".into()),
            vec![Ec2, NoneDs],
        ),
        (
            "ds-identify.cfg datasource",
            base("kvm"),
            |s| {
                s.ds_identify_config = Some("datasource: Ec2\n".into());
            },
            vec![Ec2, NoneDs],
        ),
        (
            "single entry taken as is",
            ec2("kvm"),
            |s| {
                s.cloud_config = vec![cfg(
                    "/etc/cloud/cloud.cfg.d/99.cfg",
                    "datasource_list: [ NoCloud ]\n",
                )];
            },
            vec![NoCloud],
        ),
        (
            "entry plus None without a check",
            base("kvm"),
            |s| {
                s.cloud_config = vec![cfg(
                    "/etc/cloud/cloud.cfg",
                    "datasource_list: [ Ec2, None ]\n",
                )];
            },
            vec![Ec2, NoneDs],
        ),
        (
            "configured order",
            ec2("kvm"),
            |s| {
                s.lxd_socket = Node::Socket;
                s.seeds = vec![seed("var/lib/cloud/seed/nocloud", true, true)];
                s.cloud_config = vec![cfg(
                    "/etc/cloud/cloud.cfg",
                    "datasource_list: [ LXD, Hetzner, Ec2, NoCloud, None ]\n",
                )];
            },
            vec![Lxd, Ec2, NoCloud, NoneDs],
        ),
        (
            "default order",
            ec2("kvm"),
            |s| {
                s.lxd_socket = Node::Socket;
                s.seeds = vec![seed("var/lib/cloud/seed/nocloud", true, true)];
            },
            vec![NoCloud, Ec2, Lxd, NoneDs],
        ),
        (
            "multi-line list honoured",
            ec2("kvm"),
            |s| {
                s.cloud_config = vec![cfg(
                    "/etc/cloud/cloud.cfg",
                    "datasource_list:\n  - LXD\n  - NoCloud\n  - None\n",
                )];
            },
            vec![],
        ),
        (
            "leasehook config beats cloud.cfg",
            ec2("kvm"),
            |s| {
                s.lxd_socket = Node::Socket;
                s.cloud_config = vec![cfg(
                    "/etc/cloud/cloud.cfg",
                    "datasource_list: [ Ec2, None ]\n",
                )];
                s.leasehook_datasource_list = Some(configured(&["LXD", "Ec2"]));
            },
            vec![Lxd, Ec2, NoneDs],
        ),
        (
            "cc: on the command line beats config",
            ec2("kvm"),
            |s| {
                s.proc_cmdline = Some("cc: datasource_list: [ LXD ] end_cc".into());
                s.leasehook_datasource_list = Some(configured(&["Ec2"]));
            },
            vec![Lxd],
        ),
        (
            "disabled marker",
            ec2("kvm"),
            |s| s.disabled_marker = true,
            vec![],
        ),
        (
            "disabled on the command line",
            ec2("kvm"),
            |s| {
                s.proc_cmdline = Some("ds=Ec2 cloud-init=disabled".into());
            },
            vec![],
        ),
        ("nothing", base("kvm"), |_| {}, vec![]),
        (
            "only sources we lack",
            ec2("kvm"),
            |s| {
                s.cloud_config = vec![cfg(
                    "/etc/cloud/cloud.cfg",
                    "datasource_list: [ Hetzner, GCE ]\n",
                )];
            },
            vec![],
        ),
        (
            "repeated entries checked once",
            ec2("kvm"),
            |s| {
                s.cloud_config = vec![cfg(
                    "/etc/cloud/cloud.cfg",
                    "datasource_list: [ Ec2, ec2, NoCloud ]\n",
                )];
            },
            vec![Ec2, NoneDs],
        ),
    ];
    for (name, mut snapshot, edit, want) in cases {
        edit(&mut snapshot);
        let d = decide(&snapshot).unwrap();
        assert_eq!(d.datasource_list, want, "{name}: {d:#?}");
        // Every check that ran has a reason.
        for kind in d.checks.keys() {
            assert!(d.reasons.contains_key(kind.name()), "{name}: {d:#?}");
        }
    }
}

#[test]
fn checks_and_reasons_say_why() {
    let mut s = base("kvm");
    s.seeds = vec![seed("var/lib/cloud/seed/nocloud", true, false)];
    let d = decide(&s).unwrap();
    assert_eq!(
        d.list_from,
        "ds-identify's built-in list (nothing configured)"
    );
    assert_eq!(
        d.checks,
        BTreeMap::from([
            (Ec2, Check::NotFound),
            (Gce, Check::NotFound),
            (Lxd, Check::NotFound),
            (NoCloud, Check::NotFound),
            (SourceKind::Azure, Check::NotFound),
            (SourceKind::AliYun, Check::NotFound),
            (SourceKind::OpenStack, Check::NotFound),
            (SourceKind::ConfigDrive, Check::NotFound),
            (SourceKind::Oracle, Check::NotFound),
        ])
    );
    assert!(
        d.reasons["Ec2"].contains("strict_id is true (the default)"),
        "{d:#?}"
    );
    assert!(
        d.reasons["LXD"].contains("/dev/lxd/sock is not a socket"),
        "{d:#?}"
    );
    assert!(
        d.reasons["NoCloud"].contains("/var/lib/cloud/seed/nocloud holds only one of"),
        "{d:#?}"
    );
    assert_eq!(d.virt, "kvm (test)");

    // strict_id off: Ec2 is "maybe", reported but not listed.
    for (edit, from) in [
        (
            (|s: &mut Snapshot| s.proc_cmdline = Some("ci.datasource.ec2.strict_id=warn,5".into()))
                as Edit,
            "kernel command line",
        ),
        (
            |s: &mut Snapshot| {
                s.cloud_config = vec![cfg(
                    "/etc/cloud/cloud.cfg.d/ec2.cfg",
                    "datasource:\n  Ec2:\n    strict_id: false\n",
                )];
            },
            "/etc/cloud/cloud.cfg.d/ec2.cfg",
        ),
        (
            |s: &mut Snapshot| {
                s.ds_identify_config = Some("ci.datasource.ec2.strict_id: warn\n".into());
            },
            "/etc/cloud/ds-identify.cfg",
        ),
    ] {
        let mut s = base("kvm");
        edit(&mut s);
        let d = decide(&s).unwrap();
        assert_eq!(d.checks[&Ec2], Check::Maybe, "{d:#?}");
        assert!(d.reasons["Ec2"].contains(from), "{d:#?}");
        assert!(d.datasource_list.is_empty());
    }
    let mut s = base("kvm");
    s.proc_cmdline = Some("ci.datasource.ec2.strict_id=bogus".into());
    let d = decide(&s).unwrap();
    assert_eq!(d.checks[&Ec2], Check::NotFound);
    assert!(
        d.reasons["Ec2"].contains("\"bogus\", which is not valid"),
        "{d:#?}"
    );
}

#[test]
fn unimplemented_names_and_disabling_are_explained() {
    let mut s = ec2("kvm");
    s.cloud_config = vec![cfg(
        "/etc/cloud/cloud.cfg",
        "datasource_list: [ Hetzner, Ec2, None ]\n",
    )];
    let d = decide(&s).unwrap();
    assert!(
        d.reasons["Hetzner"].contains("does not implement"),
        "{d:#?}"
    );
    assert!(!d.checks.contains_key(&NoCloud));
    assert_eq!(d.list_from, "datasource_list in /etc/cloud/cloud.cfg");

    let mut s = ec2("kvm");
    s.root = PathBuf::from("/tmp/fake");
    s.disabled_marker = true;
    let d = decide(&s).unwrap();
    assert_eq!(
        d.disabled.as_deref(),
        Some("/tmp/fake/etc/cloud/cloud-init.disabled exists")
    );
    assert!(d.checks.is_empty());
}

#[test]
fn foreign_config_problems_are_warnings() {
    let mut s = ec2("kvm");
    s.cloud_config = vec![cfg("/etc/cloud/cloud.cfg", "datasource_list: [ LXD\n")];
    let d = decide(&s).unwrap();
    assert_eq!(d.datasource_list, vec![Ec2, NoneDs]);
    assert!(
        d.warnings.iter().any(|w| w.contains("not valid YAML")),
        "{d:#?}"
    );
}

#[test]
fn per_source_checks_match_the_decision() {
    let mut s = ec2("kvm");
    s.lxd_socket = Node::Socket;
    assert_eq!(check(Ec2, &s).check, Check::Found);
    assert_eq!(check(Lxd, &s).check, Check::Found);
    assert_eq!(check(NoCloud, &s).check, Check::NotFound);
    assert_eq!(check(NoneDs, &s).check, Check::NotFound);
    assert_eq!(ec2_platform(&s).map(|p| p.0), Some(Ec2Platform::Aws));
    let mut b = base("kvm");
    b.dmi.chassis_asset_tag = Some("123.zstack.io".into());
    assert_eq!(ec2_platform(&b).map(|p| p.0.cloud_name()), Some("zstack"));
}

#[test]
fn detection_serialises_as_documented() {
    let d = decide(&ec2("kvm")).unwrap();
    let v = serde_json::to_value(&d).unwrap();
    assert_eq!(v["datasource_list"], serde_json::json!(["Ec2", "None"]));
    assert_eq!(v["checks"]["Ec2"], "found");
    assert_eq!(v["checks"]["LXD"], "not-found");
    assert!(
        v["reasons"]["Ec2"]
            .as_str()
            .unwrap()
            .starts_with("platform aws: DMI product_uuid")
    );
    assert_eq!(v["disabled"], serde_json::Value::Null);
}

#[test]
fn gce_is_found_by_its_dmi_product_name_or_serial() {
    let mut s = base("kvm");
    assert_eq!(check(Gce, &s).check, Check::NotFound);
    s.dmi.product_name = Some("Google Compute Engine".to_owned());
    let f = check(Gce, &s);
    assert_eq!(f.check, Check::Found);
    assert!(f.reason.contains("Google Compute Engine"), "{f:?}");
    assert_eq!(decide(&s).unwrap().datasource_list, [Gce, NoneDs]);
    s.dmi.product_name = Some("Google".to_owned());
    s.dmi.product_serial = Some("GoogleCloud-6E1BF4C5A2B3".to_owned());
    assert_eq!(check(Gce, &s).check, Check::Found);
    s.dmi.product_serial = Some("googlecloud-6E1B".to_owned());
    assert_eq!(check(Gce, &s).check, Check::NotFound);
}

#[test]
fn azure_is_its_chassis_asset_tag_or_its_seed() {
    let mut s = base("microsoft");
    assert_eq!(check(SourceKind::Azure, &s).check, Check::NotFound);
    s.dmi.chassis_asset_tag = Some(AZURE_CHASSIS_ASSET_TAG.into());
    let f = check(SourceKind::Azure, &s);
    assert_eq!(f.check, Check::Found);
    let d = decide(&s).unwrap();
    assert_eq!(d.datasource_list, [SourceKind::Azure, NoneDs]);
    // Not in a container (ds-identify trusts no DMI there); the seed still counts.
    let mut c = base("lxc");
    c.dmi.chassis_asset_tag = Some(AZURE_CHASSIS_ASSET_TAG.into());
    assert_eq!(check(SourceKind::Azure, &c).check, Check::NotFound);
    c.cloud_seeds
        .insert("azure", vec!["var/lib/cloud/seed/azure/ovf-env.xml".into()]);
    assert_eq!(check(SourceKind::Azure, &c).check, Check::Found);
}

#[test]
fn aliyun_by_product_name_or_seed_and_dmi_alone_for_provider_auto() {
    let mut s = base("kvm");
    s.dmi.product_name = Some("Alibaba Cloud ECS".to_owned());
    let d = decide(&s).unwrap();
    assert_eq!(d.datasource_list, [SourceKind::AliYun, NoneDs]);
    assert!(d.reasons["AliYun"].contains("product_name"), "{d:#?}");
    // Never in a container: its DMI is the host's.
    let mut c = s.clone();
    c.virt = "lxc".to_owned();
    assert_eq!(check(SourceKind::AliYun, &c).check, Check::NotFound);
    // Its seed, when its row found one (with both files: `aliyun::detect`'s
    // tests); another cloud's seed is not its.
    let mut seeded = base("kvm");
    seeded
        .cloud_seeds
        .insert("azure", vec!["var/lib/cloud/seed/AliYun".into()]);
    assert_eq!(check(SourceKind::AliYun, &seeded).check, Check::NotFound);
    seeded
        .cloud_seeds
        .insert("aliyun", vec!["var/lib/cloud/seed/AliYun".into()]);
    assert_eq!(check(SourceKind::AliYun, &seeded).check, Check::Found);
    // provider: auto reads DMI only.
    assert_eq!(cloud_from_dmi(&s.dmi), Some(SourceKind::AliYun));
    assert_eq!(cloud_from_dmi(&seeded.dmi), None);
    assert_eq!(cloud_from_dmi(&ec2("kvm").dmi), Some(Ec2));
    let near = Dmi {
        product_name: Some("alibaba cloud ecs".to_owned()),
        ..Dmi::default()
    };
    assert_eq!(cloud_from_dmi(&near), None);
}

#[test]
fn oracle_is_its_chassis_asset_tag_exactly_and_dmi_alone_resolves_auto() {
    let mut s = base("kvm");
    assert_eq!(check(SourceKind::Oracle, &s).check, Check::NotFound);
    s.dmi.chassis_asset_tag = Some(ORACLE_CHASSIS_ASSET_TAG.into());
    let d = decide(&s).unwrap();
    assert_eq!(d.datasource_list, [SourceKind::Oracle, NoneDs]);
    assert!(d.reasons["Oracle"].contains("chassis_asset_tag"), "{d:#?}");
    assert_eq!(cloud_from_dmi(&s.dmi), Some(SourceKind::Oracle));
    // Exactly: no other case, prefix or suffix; never in a container.
    for near in [
        "oraclecloud.com",
        "OracleCloud.com.",
        "xOracleCloud.com",
        "OracleCloud",
    ] {
        let mut n = base("kvm");
        n.dmi.chassis_asset_tag = Some(near.into());
        assert_eq!(
            check(SourceKind::Oracle, &n).check,
            Check::NotFound,
            "{near}"
        );
        assert_eq!(cloud_from_dmi(&n.dmi), None, "{near}");
    }
    let mut c = s.clone();
    c.virt = "lxc".to_owned();
    assert_eq!(check(SourceKind::Oracle, &c).check, Check::NotFound);
}

#[test]
fn openstack_by_product_name_asset_tag_or_pid1_and_never_with_a_config_drive() {
    for (field, value) in [
        ("product_name", "OpenStack Nova"),
        ("product_name", "OpenStack Compute"),
        ("asset", "OpenTelekomCloud"),
        ("asset", "SAP CCloud VM"),
        ("asset", "HUAWEICLOUD"),
        ("asset", "Samsung Cloud Platform"),
        ("asset", "OpenStack Nova"),
        ("asset", "OpenStack Compute"),
    ] {
        let mut s = base("kvm");
        if field == "asset" {
            s.dmi.chassis_asset_tag = Some(value.to_owned());
        } else {
            s.dmi.product_name = Some(value.to_owned());
        }
        let d = decide(&s).unwrap();
        assert_eq!(
            d.datasource_list,
            [SourceKind::OpenStack, NoneDs],
            "{value}: {d:#?}"
        );
        // Never in a container: its DMI is the host's.
        let mut c = s.clone();
        c.virt = "lxc".to_owned();
        assert_eq!(
            check(SourceKind::OpenStack, &c).check,
            Check::NotFound,
            "{value}"
        );
        // A config drive: ConfigDrive, and not the metadata service.
        let mut drive = s.clone();
        drive.fs_labels = vec!["config-2".to_owned()];
        let d = decide(&drive).unwrap();
        assert_eq!(
            d.datasource_list,
            [SourceKind::ConfigDrive, NoneDs],
            "{value}: {d:#?}"
        );
        assert!(d.reasons["OpenStack"].contains("config drive"), "{d:#?}");
    }
    // Near misses are not found.
    let mut s = base("kvm");
    s.dmi.product_name = Some("openstack nova".to_owned());
    s.dmi.chassis_asset_tag = Some("HUAWEICLOUD ".to_owned());
    assert_eq!(check(SourceKind::OpenStack, &s).check, Check::NotFound);
    // pid 1's environment counts, in a container too.
    let mut c = base("lxc");
    c.pid1_product_name = Some("OpenStack Nova".to_owned());
    assert_eq!(check(SourceKind::OpenStack, &c).check, Check::Found);
    c.pid1_product_name = Some("OpenStack Compute".to_owned());
    assert_eq!(check(SourceKind::OpenStack, &c).check, Check::NotFound);
    // Not x86: maybe (ds-identify's default policy lists no maybe).
    let mut arm = base("kvm");
    arm.machine = "aarch64".to_owned();
    assert_eq!(check(SourceKind::OpenStack, &arm).check, Check::Maybe);
    assert!(decide(&arm).unwrap().datasource_list.is_empty());
    // Both labels and the seed folders are a config drive.
    for label in ["config-2", "CONFIG-2"] {
        let mut s = base("kvm");
        s.fs_labels = vec![label.to_owned()];
        assert_eq!(
            check(SourceKind::ConfigDrive, &s).check,
            Check::Found,
            "{label}"
        );
    }
    let mut s = base("kvm");
    s.fs_labels = vec!["Config-2".to_owned()];
    assert_eq!(check(SourceKind::ConfigDrive, &s).check, Check::NotFound);
    s.cloud_seeds.insert(
        "openstack",
        vec!["var/lib/cloud/seed/config_drive".to_owned()],
    );
    assert_eq!(check(SourceKind::ConfigDrive, &s).check, Check::Found);
    assert_eq!(check(SourceKind::OpenStack, &s).check, Check::NotFound);
    // provider: auto reads DMI alone.
    let mut s = base("kvm");
    s.dmi.chassis_asset_tag = Some("OpenTelekomCloud".to_owned());
    assert_eq!(cloud_from_dmi(&s.dmi), Some(SourceKind::OpenStack));
}

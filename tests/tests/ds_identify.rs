// SPDX-License-Identifier: Apache-2.0
//! Parity test: `leasehook detect`'s decision against cloud-init 25.1.4's own
//! `ds-identify`, on fake roots built here in temporary folders.
//!
//! The oracle is `usr/lib/cloud-init/ds-identify` from the Debian trixie cloud-init
//! package that `scripts/fetch-cloud-init-oracle.sh` extracts (never installs) into
//! `target/oracle/`. Without it this test fails: it is never skipped.
//!
//! # Running ds-identify against a fake root
//!
//! As `leasehook_tests::ds_identify` describes: sourced with `DI_MAIN=noop`, only the
//! probes that read this machine instead of the root pinned (virtualisation, blkid's
//! output — built here from the labels the scenario creates under
//! `dev/disk/by-label/` —, the socket and disabled-marker tests moved below the
//! root, no dmidecode), then `main --force`. The test checks that ds-identify
//! created files only in `<root>/run/cloud-init/` and that the real
//! `/run/cloud-init` did not change.
//!
//! # Comparing
//!
//! Only the sources leasehook implements are compared. A name in ds-identify's list
//! that leasehook does not implement (`Hetzner`, `Exoscale`, ...) is dropped, names compare
//! without regard to case (`ds=nocloud` is written as `nocloud`), and a list left
//! holding only `None` because every source found is one leasehook lacks counts as
//! "nothing found" (leasehook prints an empty list). ds-identify's "nothing found"
//! (exit 1) is an empty list; "disabled" (exit 2) is leasehook's `disabled`.
//!
//! Every scenario states the list leasehook must print. Where leasehook differs from
//! ds-identify 25.1.4 on purpose, the scenario states ds-identify's answer too and
//! why (see `docs/datasources.md`); every other scenario must agree.

#![cfg(test)]
#![allow(clippy::too_many_lines)]

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use leasehook_core::source::SourceKind;
use leasehook_core::source::detect::{ReadOptions, detect};
use leasehook_tests::ds_identify::{
    ROOT_FS_BLKID, command, ds_identify, oracle_root, write_harness,
};

/// What either side concluded: the list, `[]` for nothing found, or disabled.
const DISABLED: &str = "<disabled>";

const EC2_UUID: &str = "ec2e1916-9099-7caf-fd21-012345abcdef";

/// One fake root.
struct Case {
    name: &'static str,
    virt: &'static str,
    files: Vec<(String, Vec<u8>)>,
    /// Bind a real unix socket at `dev/lxd/sock`.
    socket: bool,
    /// File system labels (`dev/disk/by-label/<label>`, and blkid's output).
    labels: Vec<&'static str>,
    /// What leasehook must print.
    ours: Vec<&'static str>,
    /// ds-identify's answer where leasehook differs on purpose, and why.
    differs: Option<(Vec<&'static str>, &'static str)>,
}

fn case(name: &'static str, virt: &'static str, ours: &[&'static str]) -> Case {
    Case {
        name,
        virt,
        files: Vec::new(),
        socket: false,
        labels: Vec::new(),
        ours: ours.to_vec(),
        differs: None,
    }
}

impl Case {
    fn file(mut self, rel: &str, body: impl AsRef<[u8]>) -> Self {
        self.files.push((rel.to_owned(), body.as_ref().to_vec()));
        self
    }
    fn dmi(self, field: &str, value: &str) -> Self {
        self.file(&format!("sys/class/dmi/id/{field}"), format!("{value}\n"))
    }
    fn ec2(self) -> Self {
        self.dmi("sys_vendor", "Amazon EC2")
            .dmi("product_name", "m5.large")
            .dmi("chassis_asset_tag", "Amazon EC2")
            .dmi("product_uuid", EC2_UUID)
            .dmi("product_serial", EC2_UUID)
    }
    fn azure(self) -> Self {
        self.dmi("chassis_asset_tag", "7783-7084-3265-9085-8269-3286-77")
            .dmi("sys_vendor", "Microsoft Corporation")
            .dmi("product_name", "Virtual Machine")
    }
    fn cmdline(self, line: &str) -> Self {
        self.file("proc/cmdline", format!("{line}\n"))
    }
    fn cloud_cfg(self, rel: &str, text: &str) -> Self {
        self.file(&format!("etc/cloud/{rel}"), text)
    }
    fn seed(self, dir: &str, files: &[&str]) -> Self {
        files.iter().fold(self, |c, f| {
            c.file(
                &format!("{dir}/{f}"),
                format!("# {f}\ninstance-id: iid-local01\n"),
            )
        })
    }
    fn socket(mut self) -> Self {
        self.socket = true;
        self
    }
    fn label(mut self, l: &'static str) -> Self {
        self.labels.push(l);
        self
    }
    fn differs(mut self, oracle: &[&'static str], why: &'static str) -> Self {
        self.differs = Some((oracle.to_vec(), why));
        self
    }
}

fn scenarios() -> Vec<Case> {
    let nocloud = "var/lib/cloud/seed/nocloud";
    let nocloud_net = "var/lib/cloud/seed/nocloud-net";
    vec![
        // EC2
        case("ec2-hvm", "kvm", &["Ec2", "None"]).ec2(),
        case("ec2-hvm-upper-case-uuid", "kvm", &["Ec2", "None"])
            .dmi("product_uuid", "EC23AEF5-54BE-4843-8D24-8C819F88453E"),
        case("ec2-byte-swapped-uuid", "kvm", &["Ec2", "None"])
            .dmi("product_uuid", "AB232AEC-54BE-4843-8D24-8C819F88453E"),
        case("ec2-xen-hypervisor-uuid", "xen", &["Ec2", "None"])
            .dmi("product_uuid", "4a3c1b2d-0000-4000-8000-000000000001")
            .file("sys/hypervisor/uuid", "ec2c6e2f-5fac-4fc7-9c82-74127ec14bbb\n"),
        case("ec2-in-docker", "docker", &[]).ec2(),
        case("ec2-in-lxc", "lxc", &[]).ec2(),
        case("ec2-serial-only-is-not-ec2", "kvm", &[])
            .dmi("product_serial", EC2_UUID)
            .dmi("product_uuid", "4a3c1b2d-0000-4000-8000-000000000001"),
        case("ec2-brightbox-serial", "kvm", &["Ec2", "None"])
            .dmi("product_serial", "srv-otuxg.gb1.brightbox.com"),
        case("ec2-not-brightbox", "kvm", &[]).dmi("product_serial", "tricky-host.bobrightbox.com"),
        case("ec2-strict-id-off-is-maybe", "kvm", &[])
            .cmdline("ro ci.datasource.ec2.strict_id=false"),
        case("ec2-odd-dmi-bytes", "kvm", &[])
            .file("sys/class/dmi/id/product_uuid", b"\xffec2\xfe-\x01\n")
            .file("sys/class/dmi/id/board_name", b"\xc3LXD\n"),
        case("ec2-in-podman", "podman", &[])
            .ec2()
            .differs(&["Ec2", "None"], "podman is a container; ds-identify's container list lacks it"),
        // LXD
        case("lxd-socket-in-container", "lxc", &["LXD", "None"]).socket(),
        case("lxd-socket-without-virt", "none", &["LXD", "None"]).socket(),
        case("lxd-socket-is-a-regular-file", "lxc", &[]).file("dev/lxd/sock", ""),
        case("lxd-kvm-board-name", "kvm", &["LXD", "None"]).dmi("board_name", "LXD"),
        case("lxd-qemu-board-name", "qemu", &["LXD", "None"]).dmi("board_name", "LXD"),
        case("lxd-board-name-but-container", "lxc", &[]).dmi("board_name", "LXD"),
        case("lxd-kvm-virtio-port-and-board-name", "kvm", &["LXD", "None"])
            .dmi("board_name", "LXD")
            .file("sys/class/virtio-ports/vport0p1/name", "com.canonical.lxd\n"),
        case("lxd-kvm-virtio-port", "kvm", &["LXD", "None"])
            .file("sys/class/virtio-ports/vport0p1/name", "com.canonical.lxd\n")
            .differs(&[], "ds-identify 25.1.4 reads only DMI board_name; newer cloud-init reads the LXD virtio port"),
        case("lxd-kvm-legacy-virtio-port", "kvm", &["LXD", "None"])
            .file("sys/class/virtio-ports/vport0p1/name", "org.linuxcontainers.lxd\n")
            .differs(&[], "ds-identify 25.1.4 reads only DMI board_name; newer cloud-init reads the LXD virtio port"),
        case("lxd-kvm-wrong-virtio-name", "kvm", &[])
            .file("sys/class/virtio-ports/vport0p1/name", "some.other.serial\n"),
        // NoCloud
        case("nocloud-seed", "kvm", &["NoCloud", "None"]).seed(nocloud, &["meta-data", "user-data"]),
        case("nocloud-net-seed", "none", &["NoCloud", "None"])
            .seed(nocloud_net, &["meta-data", "user-data"]),
        case("nocloud-half-seed", "kvm", &[])
            .seed(nocloud, &["meta-data"])
            .seed(nocloud_net, &["user-data"]),
        case("nocloud-ubuntu-core-seed", "kvm", &["NoCloud", "None"])
            .seed("writable/system-data/var/lib/cloud/seed/nocloud-net", &["meta-data", "user-data"]),
        case("nocloud-cidata-label", "kvm", &["NoCloud", "None"]).label("cidata"),
        case("nocloud-CIDATA-label", "kvm", &["NoCloud", "None"]).label("CIDATA"),
        case("nocloud-label-in-container", "lxc", &[]).label("cidata"),
        case("nocloud-other-label", "kvm", &[]).label("cidata2"),
        case("nocloud-dmi-serial", "kvm", &["NoCloud", "None"])
            .dmi("product_serial", "ds=nocloud;s=http://10.0.0.2/seed/"),
        case("nocloud-seedfrom-in-cloud-cfg", "kvm", &["NoCloud", "None"]).cloud_cfg(
            "cloud.cfg.d/50-seed.cfg",
            "datasource:\n  NoCloud:\n    seedfrom: file:///srv/seed/\n",
        ),
        // Azure
        case("azure-chassis-asset-tag", "microsoft", &["Azure", "None"]).azure(),
        case("azure-chassis-asset-tag-on-kvm", "kvm", &["Azure", "None"]).azure(),
        case("azure-chassis-in-container", "lxc", &[]).azure(),
        case("azure-other-asset-tag", "microsoft", &[])
            .dmi("chassis_asset_tag", "7783-7084-3265-9085-8269-3286-78"),
        case("azure-ovf-env-seed", "microsoft", &["Azure", "None"])
            .file("var/lib/cloud/seed/azure/ovf-env.xml", "<Environment/>\n"),
        case("azure-seed-in-container", "lxc", &["Azure", "None"])
            .file("var/lib/cloud/seed/azure/ovf-env.xml", "<Environment/>\n"),
        case("azure-seed-folder-without-ovf-env", "microsoft", &[])
            .file("var/lib/cloud/seed/azure/meta-data", ""),
        case("azure-and-nocloud", "microsoft", &["NoCloud", "Azure", "None"])
            .azure()
            .seed(nocloud, &["meta-data", "user-data"]),
        case("azure-and-ec2-dmi", "kvm", &["Azure", "Ec2", "None"])
            .ec2()
            .dmi("chassis_asset_tag", "7783-7084-3265-9085-8269-3286-77"),
        case("cmdline-ds-azure", "kvm", &["Azure", "None"]).ec2().cmdline("ds=Azure"),
        case("configured-azure-only", "kvm", &["Azure"])
            .azure()
            .cloud_cfg("cloud.cfg.d/90-azure.cfg", "datasource_list: [ Azure ]\n"),
        // The kernel command line
        case("cmdline-ds-nocloud", "kvm", &["NoCloud", "None"])
            .ec2()
            .cmdline("BOOT_IMAGE=/vmlinuz ro ds=nocloud;s=file:///srv/seed/;i=iid-1"),
        case("cmdline-ci-ds-lxd-last-wins", "kvm", &["LXD", "None"]).cmdline("ds=Ec2 ci.ds=LXD"),
        case("cmdline-ds-ec2-in-container", "lxc", &["Ec2", "None"])
            .file("proc/1/cmdline", b"/sbin/init\0ds=Ec2\0"),
        case("cmdline-ds-unimplemented", "kvm", &[]).ec2().cmdline("ds=Hetzner"),
        case("cmdline-cc-datasource-list", "kvm", &["NoCloud", "None"])
            .ec2()
            .seed(nocloud, &["meta-data", "user-data"])
            .cmdline("ro cc: datasource_list: [ LXD, NoCloud, None ] end_cc"),
        case("cmdline-cloud-init-disabled", "kvm", &[DISABLED]).ec2().cmdline("ro cloud-init=disabled"),
        case("disabled-marker", "kvm", &[DISABLED]).ec2().file("etc/cloud/cloud-init.disabled", ""),
        // Configured lists
        case("configured-single-entry", "kvm", &["NoCloud"])
            .ec2()
            .cloud_cfg("cloud.cfg.d/99-single.cfg", "datasource_list: [ NoCloud ]\n"),
        case("configured-entry-and-none", "kvm", &["LXD", "None"])
            .cloud_cfg("cloud.cfg", "datasource_list: [ LXD, None ]\n"),
        case("configured-order", "kvm", &["LXD", "Ec2", "NoCloud", "None"])
            .ec2()
            .socket()
            .seed(nocloud, &["meta-data", "user-data"])
            .cloud_cfg("cloud.cfg", "datasource_list: [ LXD, Azure, Ec2, NoCloud, None ]\n"),
        case("default-order", "kvm", &["NoCloud", "Ec2", "LXD", "None"])
            .ec2()
            .socket()
            .seed(nocloud, &["meta-data", "user-data"]),
        case("cloud-cfg-d-overrides-cloud-cfg", "kvm", &["Ec2", "None"])
            .ec2()
            .seed(nocloud, &["meta-data", "user-data"])
            .cloud_cfg("cloud.cfg", "datasource_list: [ NoCloud, None ]\n")
            .cloud_cfg("cloud.cfg.d/90_dpkg.cfg", "datasource_list: [ LXD, Ec2, None ]\n"),
        case("configured-unimplemented-and-ec2", "kvm", &["Ec2", "None"])
            .ec2()
            .cloud_cfg("cloud.cfg", "datasource_list: [ Azure, Ec2, None ]\n"),
        case("only-unimplemented-found", "kvm", &[]).dmi("sys_vendor", "Hetzner"),
        // Google Compute Engine (issue 21)
        case("gce-product-name", "kvm", &["GCE", "None"])
            .dmi("product_name", "Google Compute Engine")
            .dmi("sys_vendor", "Google"),
        case("gce-product-serial-only", "kvm", &["GCE", "None"])
            .dmi("product_name", "Google")
            .dmi("product_serial", "GoogleCloud-7A3F0E6C5B2D1E4F"),
        case("gce-serial-other-case-is-not-gce", "kvm", &[])
            .dmi("product_serial", "googlecloud-7A3F0E6C5B2D1E4F"),
        case("gce-and-nocloud-in-built-in-order", "kvm", &["NoCloud", "GCE", "None"])
            .dmi("product_name", "Google Compute Engine")
            .seed(nocloud, &["meta-data", "user-data"]),
        case("gce-after-ec2-in-built-in-order", "kvm", &["Ec2", "GCE", "None"])
            .ec2()
            .dmi("product_serial", "GoogleCloud-7A3F0E6C5B2D1E4F"),
        case("gce-configured-first", "kvm", &["GCE", "Ec2", "None"])
            .ec2()
            .dmi("product_serial", "GoogleCloud-7A3F0E6C5B2D1E4F")
            .cloud_cfg("cloud.cfg", "datasource_list: [ GCE, Ec2, None ]\n"),
        case("unimplemented-found-and-nocloud", "kvm", &["NoCloud", "None"])
            .dmi("sys_vendor", "Hetzner")
            .seed(nocloud, &["meta-data", "user-data"]),
        case("multi-line-list", "kvm", &["LXD", "None"])
            .ec2()
            .dmi("board_name", "LXD")
            .cloud_cfg("cloud.cfg.d/10-list.cfg", "datasource_list:\n  - LXD\n  - NoCloud\n  - None\n")
            .differs(
                &["Ec2", "LXD", "None"],
                "ds-identify reads only one-line [..] lists and falls back to its built-in list",
            ),
        case("lower-case-list", "kvm", &["Ec2", "None"])
            .ec2()
            .cloud_cfg("cloud.cfg", "datasource_list: [ nocloud, ec2, None ]\n")
            .differs(&[], "ds-identify has no check for 'ec2' (case); cloud-init itself matches names without case"),
        // Oracle (issue 22): ds-identify's dscheck_Oracle, the chassis asset tag as
        // a `case` pattern without wildcards: exactly OracleCloud.com.
        case("oracle-chassis-asset-tag", "kvm", &["Oracle", "None"])
            .dmi("chassis_asset_tag", "OracleCloud.com"),
        case("oracle-bare-metal-no-virt", "none", &["Oracle", "None"])
            .dmi("chassis_asset_tag", "OracleCloud.com"),
        case("oracle-asset-tag-other-case", "kvm", &[]).dmi("chassis_asset_tag", "oraclecloud.com"),
        case("oracle-asset-tag-prefix", "kvm", &[]).dmi("chassis_asset_tag", "OracleCloud.com.x"),
        case("oracle-asset-tag-in-container", "lxc", &[])
            .dmi("chassis_asset_tag", "OracleCloud.com"),
        case("oracle-and-nocloud-in-built-in-order", "kvm", &["NoCloud", "Oracle", "None"])
            .dmi("chassis_asset_tag", "OracleCloud.com")
            .seed(nocloud, &["meta-data", "user-data"]),
        case("oracle-after-gce-in-built-in-order", "kvm", &["GCE", "Oracle", "None"])
            .dmi("chassis_asset_tag", "OracleCloud.com")
            .dmi("product_serial", "GoogleCloud-7A3F0E6C5B2D1E4F"),
        case("cmdline-ds-oracle", "kvm", &["Oracle", "None"]).cmdline("ds=Oracle"),
        case("configured-oracle-first", "kvm", &["Oracle", "Ec2", "None"])
            .ec2()
            .dmi("chassis_asset_tag", "OracleCloud.com")
            .cloud_cfg("cloud.cfg", "datasource_list: [ Oracle, Ec2, None ]\n"),
        // AliYun (issue 21): ds-identify's dscheck_AliYun
        case("aliyun-product-name", "kvm", &["AliYun", "None"])
            .dmi("product_name", "Alibaba Cloud ECS")
            .dmi("sys_vendor", "Alibaba Cloud"),
        case("aliyun-product-name-in-container", "lxc", &[])
            .dmi("product_name", "Alibaba Cloud ECS"),
        case("aliyun-product-name-case", "kvm", &[]).dmi("product_name", "alibaba cloud ecs"),
        case("aliyun-product-name-longer", "kvm", &[])
            .dmi("product_name", "Alibaba Cloud ECS (g7)"),
        case("aliyun-seed", "none", &["AliYun", "None"])
            .seed("var/lib/cloud/seed/AliYun", &["meta-data", "user-data"]),
        case("aliyun-half-seed", "kvm", &[]).seed("var/lib/cloud/seed/AliYun", &["meta-data"]),
        case("aliyun-lower-case-seed-folder", "kvm", &[])
            .seed("var/lib/cloud/seed/aliyun", &["meta-data", "user-data"]),
        case("aliyun-before-ec2-and-after-nocloud", "kvm", &["NoCloud", "AliYun", "Ec2", "None"])
            .ec2()
            .dmi("product_name", "Alibaba Cloud ECS")
            .seed(nocloud, &["meta-data", "user-data"]),
        case("aliyun-configured-list", "kvm", &["AliYun", "None"])
            .dmi("product_name", "Alibaba Cloud ECS")
            .cloud_cfg("cloud.cfg", "datasource_list: [ AliYun, Ec2, None ]\n"),
        // OpenStack and ConfigDrive (issue 22): ds-identify's dscheck_OpenStack
        // and dscheck_ConfigDrive (check_configdrive_v2)
        case("openstack-nova", "kvm", &["OpenStack", "None"])
            .dmi("product_name", "OpenStack Nova")
            .dmi("sys_vendor", "OpenStack Foundation"),
        case("openstack-compute-rdo", "kvm", &["OpenStack", "None"])
            .dmi("product_name", "OpenStack Compute"),
        case("openstack-nova-in-container", "lxc", &[]).dmi("product_name", "OpenStack Nova"),
        case("openstack-nova-case", "kvm", &[]).dmi("product_name", "openstack nova"),
        case("openstack-asset-otc", "kvm", &["OpenStack", "None"])
            .dmi("chassis_asset_tag", "OpenTelekomCloud"),
        case("openstack-asset-sap", "kvm", &["OpenStack", "None"])
            .dmi("chassis_asset_tag", "SAP CCloud VM"),
        case("openstack-asset-huawei", "kvm", &["OpenStack", "None"])
            .dmi("chassis_asset_tag", "HUAWEICLOUD"),
        case("openstack-asset-samsung", "kvm", &["OpenStack", "None"])
            .dmi("chassis_asset_tag", "Samsung Cloud Platform"),
        case("openstack-asset-nova", "kvm", &["OpenStack", "None"])
            .dmi("chassis_asset_tag", "OpenStack Nova"),
        case("openstack-asset-compute", "kvm", &["OpenStack", "None"])
            .dmi("chassis_asset_tag", "OpenStack Compute"),
        case("openstack-asset-longer", "kvm", &[]).dmi("chassis_asset_tag", "HUAWEICLOUD-2"),
        case("openstack-asset-in-container", "docker", &[])
            .dmi("chassis_asset_tag", "OpenTelekomCloud"),
        case("openstack-pid1-product-name", "lxc", &["OpenStack", "None"])
            .file("proc/1/environ", b"container=lxc\0product_name=OpenStack Nova\0"),
        case("openstack-pid1-product-name-compute", "lxc", &[])
            .file("proc/1/environ", b"container=lxc\0product_name=OpenStack Compute\0"),
        case("configdrive-label", "kvm", &["ConfigDrive", "None"]).label("config-2"),
        case("configdrive-label-upper", "kvm", &["ConfigDrive", "None"]).label("CONFIG-2"),
        case("configdrive-label-mixed-case", "kvm", &[]).label("Config-2"),
        case("configdrive-means-not-openstack", "kvm", &["ConfigDrive", "None"])
            .dmi("product_name", "OpenStack Nova")
            .label("config-2"),
        case("configdrive-asset-tag-not-openstack", "kvm", &["ConfigDrive", "None"])
            .dmi("chassis_asset_tag", "HUAWEICLOUD")
            .label("CONFIG-2"),
        case("configdrive-seed-dated", "kvm", &["ConfigDrive", "None"]).file(
            "var/lib/cloud/seed/config_drive/openstack/2015-10-15/meta_data.json",
            "{}",
        ),
        case("configdrive-seed-latest", "kvm", &["ConfigDrive", "None"]).file(
            "var/lib/cloud/seed/config_drive/openstack/latest/meta_data.json",
            "{}",
        ),
        case("configdrive-seed-undated", "kvm", &[]).file(
            "var/lib/cloud/seed/config_drive/openstack/content/meta_data.json",
            "{}",
        ),
        case("configdrive-before-nocloud", "kvm", &["ConfigDrive", "NoCloud", "None"])
            .label("config-2")
            .seed(nocloud, &["meta-data", "user-data"]),
        case("openstack-after-gce", "kvm", &["GCE", "OpenStack", "None"])
            .dmi("product_name", "Google Compute Engine")
            .dmi("chassis_asset_tag", "OpenStack Nova"),
        case("openstack-configured-list", "kvm", &["OpenStack", "None"])
            .dmi("product_name", "OpenStack Nova")
            .cloud_cfg("cloud.cfg", "datasource_list: [ ConfigDrive, OpenStack, None ]\n"),
        // Nothing
        case("nothing-found", "kvm", &[])
            .dmi("sys_vendor", "QEMU")
            .dmi("product_name", "Standard PC (i440FX + PIIX, 1996)")
            .dmi("product_uuid", "1234"),
    ]
}

/// A root with what every scenario has, then the scenario's files.
fn build(case: &Case, root: &Path) -> Option<UnixListener> {
    let base: [(&str, &[u8]); 5] = [
        (
            "proc/cmdline",
            b"BOOT_IMAGE=/vmlinuz root=/dev/vda1 ro console=ttyS0\n",
        ),
        ("proc/1/cmdline", b"/sbin/init\0"),
        ("proc/1/environ", b""),
        ("proc/uptime", b"12.34 20.00\n"),
        ("sys/class/dmi/id/bios_vendor", b"SeaBIOS\n"),
    ];
    let files = base
        .iter()
        .map(|(p, b)| ((*p).to_owned(), b.to_vec()))
        .chain(case.files.iter().cloned());
    for (rel, body) in files {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, body).unwrap();
    }
    for (i, label) in case.labels.iter().enumerate() {
        let dev = root.join(format!(
            "dev/vd{}",
            char::from(b'b' + u8::try_from(i).unwrap())
        ));
        fs::create_dir_all(root.join("dev/disk/by-label")).unwrap();
        fs::write(&dev, "").unwrap();
        std::os::unix::fs::symlink(&dev, root.join("dev/disk/by-label").join(label)).unwrap();
    }
    case.socket.then(|| {
        fs::create_dir_all(root.join("dev/lxd")).unwrap();
        UnixListener::bind(root.join("dev/lxd/sock")).unwrap()
    })
}

/// blkid's `-o export` text for the scenario: the root file system and each label.
fn blkid(case: &Case) -> String {
    let mut out = ROOT_FS_BLKID.to_owned();
    for (i, label) in case.labels.iter().enumerate() {
        let dev = char::from(b'b' + u8::try_from(i).unwrap());
        let _ = write!(out, "\nDEVNAME=/dev/vd{dev}\nTYPE=iso9660\nLABEL={label}\n");
    }
    out
}

/// Every path below `dir` (not following symlinks), relative to it.
fn walk(dir: &Path, base: &Path, out: &mut BTreeSet<PathBuf>) {
    for e in fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        out.insert(p.strip_prefix(base).unwrap().to_owned());
        if e.file_type().unwrap().is_dir() {
            walk(&p, base, out);
        }
    }
}

/// Runs ds-identify on the root; its conclusion, and its log for failures.
fn oracle(ds_identify: &Path, harness: &Path, case: &Case, root: &Path) -> (Vec<String>, String) {
    let mut before = BTreeSet::new();
    walk(root, root, &mut before);
    let out = command(harness, ds_identify, root, case.virt, &blkid(case))
        .output()
        .expect("failed to run /bin/sh");
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    let mut after = BTreeSet::new();
    walk(root, root, &mut after);
    assert!(
        before.is_subset(&after),
        "{}: ds-identify removed files",
        case.name
    );
    for new in after.difference(&before) {
        assert!(
            new.starts_with("run/cloud-init") || new == Path::new("run"),
            "{}: ds-identify wrote {new:?} outside <root>/run/cloud-init",
            case.name
        );
    }
    let run = root.join("run/cloud-init");
    let result = fs::read_to_string(run.join(".ds-identify.result")).unwrap_or_default();
    let code = out.status.code();
    assert_eq!(
        result.trim(),
        code.map(|c| c.to_string()).unwrap_or_default(),
        "{}: exit status and .ds-identify.result disagree\n{log}",
        case.name
    );
    let conclusion = match code {
        Some(0) => {
            let cfg = fs::read_to_string(run.join("cloud.cfg")).unwrap();
            let line = cfg
                .lines()
                .find_map(|l| l.strip_prefix("datasource_list: "))
                .unwrap_or_else(|| panic!("{}: no datasource_list in {cfg:?}", case.name));
            let names: Vec<String> = line
                .trim()
                .trim_start_matches('[')
                .trim_end_matches(']')
                .split(',')
                .map(|n| n.trim().to_owned())
                .filter(|n| !n.is_empty())
                .collect();
            canonical(&names)
        }
        Some(1) => Vec::new(),
        Some(2) => vec![DISABLED.to_owned()],
        other => panic!("{}: ds-identify exited with {other:?}\n{log}", case.name),
    };
    (conclusion, log)
}

/// ds-identify's list in leasehook's terms (see the module docs).
fn canonical(names: &[String]) -> Vec<String> {
    let mut kinds: Vec<SourceKind> = Vec::new();
    for n in names {
        if let Some(k) = SourceKind::from_name(n)
            && !kinds.contains(&k)
        {
            kinds.push(k);
        }
    }
    let only_none = kinds == [SourceKind::None];
    if kinds.is_empty() || (only_none && names.iter().any(|n| n != "None")) {
        return Vec::new();
    }
    kinds.iter().map(|k| k.name().to_owned()).collect()
}

fn ours(case: &Case, root: &Path) -> (Vec<String>, String) {
    let d = detect(&ReadOptions::new(root).with_virt(case.virt)).unwrap();
    let shown = serde_json::to_string_pretty(&d).unwrap();
    if d.disabled.is_some() {
        return (vec![DISABLED.to_owned()], shown);
    }
    (
        d.datasource_list
            .iter()
            .map(|k| k.name().to_owned())
            .collect(),
        shown,
    )
}

fn real_run_state() -> Option<BTreeSet<PathBuf>> {
    let p = Path::new("/run/cloud-init");
    p.exists().then(|| {
        let mut s = BTreeSet::new();
        walk(p, p, &mut s);
        s
    })
}

#[test]
fn detect_agrees_with_ds_identify_25_1_4() {
    let ds_identify = ds_identify();
    let version = oracle_root().join("usr/lib/python3/dist-packages/cloudinit/version.py");
    assert!(
        ds_identify.is_file(),
        "cloud-init oracle not found at {ds_identify:?}: run scripts/fetch-cloud-init-oracle.sh \
         (the README's test command does), or point LEASEHOOK_CLOUDINIT_ROOT at an extracted \
         cloud-init 25.1.4 package"
    );
    assert!(
        fs::read_to_string(&version)
            .unwrap_or_default()
            .contains("__VERSION__ = \"25.1.4\""),
        "{version:?} is not cloud-init 25.1.4"
    );
    let work = tempfile::tempdir().unwrap();
    let harness = write_harness(work.path()).unwrap();
    let real_run_before = real_run_state();

    let cases = scenarios();
    let (mut agreed, mut differed) = (0, Vec::new());
    let mut report = String::new();
    for case in &cases {
        let root = work.path().join(case.name);
        fs::create_dir_all(&root).unwrap();
        let _socket = build(case, &root);
        let (our_list, our_json) = ours(case, &root);
        let (their_list, log) = oracle(&ds_identify, &harness, case, &root);
        let want: Vec<String> = case.ours.iter().map(|s| (*s).to_owned()).collect();
        let their_want: Vec<String> = case.differs.as_ref().map_or(want.clone(), |(o, _)| {
            o.iter().map(|s| (*s).to_owned()).collect()
        });
        if our_list != want || their_list != their_want {
            let _ = writeln!(
                report,
                "{}: leasehook {our_list:?} (want {want:?}), ds-identify {their_list:?} (want {their_want:?})\n--- leasehook\n{our_json}\n--- ds-identify\n{log}",
                case.name
            );
            continue;
        }
        match &case.differs {
            None => agreed += 1,
            Some((_, why)) => differed.push(format!("{}: {why}", case.name)),
        }
    }
    assert_eq!(
        real_run_before,
        real_run_state(),
        "the real /run/cloud-init changed"
    );
    assert!(report.is_empty(), "{report}");
    eprintln!(
        "ds-identify parity: {} scenarios, {agreed} agree, {} differ on purpose:\n  {}",
        cases.len(),
        differed.len(),
        differed.join("\n  ")
    );
    assert!(agreed >= 20, "only {agreed} scenarios agree");
}

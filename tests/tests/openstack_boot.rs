// SPDX-License-Identifier: Apache-2.0
//! The boot stage on `OpenStack`: `leasehook init` (both stages) on a fake root
//! whose DMI names `OpenStack Nova`, against the metadata service emulator on
//! loopback (`openstack.endpoint`): detection lists `OpenStack`, the network
//! stage fetches it, `instance-data.json` carries cloud-init's v1 keys,
//! `boot.json` records the verdict `provider: auto` then goes by, and a second
//! boot with the service down stands in the cache. With the `netns` feature
//! (root, mount(8)): a root with a config drive is `ConfigDrive`, read in the
//! local stage from the drive, the metadata service never asked.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Output};

use leasehook_tests::netns::{TempDir, leasehook_bin};
use leasehook_tests::openstack_emulator::{Config, INSTANCE_ID, OpenStackEmulator, world_tree};
use serde_json::Value;

fn init(root: &str, local: bool) -> Output {
    let mut cmd = Command::new(leasehook_bin());
    cmd.args(["init", "--root", root, "--virt", "kvm"])
        .env_remove("LEASEHOOK_IMDS_ENDPOINTS")
        .env_remove("LEASEHOOK_OPENSTACK_ENDPOINT");
    if local {
        cmd.arg("--local");
    }
    cmd.output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n{}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn write(root: &Path, rel: &str, body: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, body).unwrap();
}

#[test]
fn init_fetches_openstack_and_writes_instance_data_v1() {
    let dir = TempDir::new("os-init");
    let root = dir.0.join("root");
    let url;
    {
        let emu =
            OpenStackEmulator::start("127.0.0.1:0".parse().unwrap(), Config::new(world_tree()))
                .unwrap();
        url = emu.base_url();
        write(&root, "sys/class/dmi/id/product_name", "OpenStack Nova\n");
        write(
            &root,
            "sys/class/dmi/id/sys_vendor",
            "OpenStack Foundation\n",
        );
        write(&root, "proc/cmdline", "ro quiet\n");
        write(
            &root,
            "etc/leasehook/config.yaml",
            &format!("openstack:\n  endpoint: \"{url}\"\nimds:\n  budget_s: 2\n"),
        );
        let r = root.to_str().unwrap();
        let local = init(r, true);
        assert!(local.status.success(), "{}", text(&local));
        assert!(
            emu.log().is_empty(),
            "the local stage asked the metadata service"
        );
        let net = init(r, false);
        assert!(net.status.success(), "{}", text(&net));
        assert!(
            text(&net).contains(&format!("datasource OpenStack \"{INSTANCE_ID}\", fetched")),
            "{}",
            text(&net)
        );
        // meta_data.json, network_data.json, user_data for the datasource, and
        // network_data.json once more: the boot stage asks which NICs have no
        // DHCP (Provider::unleased).
        let paths: Vec<String> = emu.log().iter().map(|e| e.path.clone()).collect();
        assert_eq!(
            paths,
            [
                "/openstack/latest/meta_data.json",
                "/openstack/latest/network_data.json",
                "/openstack/latest/user_data",
                "/openstack/latest/network_data.json"
            ],
            "{:?}",
            emu.log()
        );
        assert!(
            emu.log().iter().all(|e| e.status == "200"),
            "{:?}",
            emu.log()
        );
    }
    let data = json(&root.join("run/leasehook/instance-data.json"));
    let v1 = &data["v1"];
    assert_eq!(v1["cloud_name"], "openstack", "{data:#}");
    assert_eq!(v1["platform"], "openstack");
    assert_eq!(v1["availability_zone"], "nova");
    assert_eq!(v1["instance_id"], INSTANCE_ID);
    assert_eq!(v1["local_hostname"], "leasehook-test");
    assert_eq!(v1["subplatform"], format!("metadata ({url})"));
    let boot = json(&root.join("run/leasehook/boot.json"));
    assert_eq!(boot["datasource"], "OpenStack", "{boot:#}");

    // The next boot, the service down: the cache stands in for the same instance.
    std::fs::remove_file(root.join("run/leasehook/boot.json")).unwrap();
    let r = root.to_str().unwrap();
    assert!(init(r, true).status.success());
    let net = init(r, false);
    assert!(
        text(&net).contains(&format!("using the cached OpenStack \"{INSTANCE_ID}\"")),
        "{}",
        text(&net)
    );
}

#[cfg(feature = "netns")]
#[test]
fn a_config_drive_is_configdrive_read_in_the_local_stage() {
    use leasehook_tests::openstack_emulator::make_config_drive;
    // mount -t iso9660 through the test's FUSE helper (tests/src/configdrive.rs).
    let _ns = leasehook_tests::configdrive::enter(leasehook_tests::configdrive::Helper::Fuse);
    let dir = TempDir::new("os-cd-init");
    let root = dir.0.join("root");
    write(&root, "sys/class/dmi/id/product_name", "OpenStack Nova\n");
    write(&root, "proc/cmdline", "ro quiet\n");
    // A metadata service that would answer: it must never be asked.
    let emu = OpenStackEmulator::start("127.0.0.1:0".parse().unwrap(), Config::new(world_tree()))
        .unwrap();
    write(
        &root,
        "etc/leasehook/config.yaml",
        &format!("openstack:\n  endpoint: \"{}\"\n", emu.base_url()),
    );
    let image = dir.0.join("config-drive.img");
    make_config_drive(&world_tree(), "config-2", &image);
    std::fs::create_dir_all(root.join("dev/disk/by-label")).unwrap();
    std::os::unix::fs::symlink(&image, root.join("dev/disk/by-label/config-2")).unwrap();
    let r = root.to_str().unwrap();
    let local = init(r, true);
    assert!(local.status.success(), "{}", text(&local));
    assert!(
        text(&local).contains(&format!(
            "datasource ConfigDrive \"{INSTANCE_ID}\", fetched"
        )),
        "{}",
        text(&local)
    );
    let net = init(r, false);
    assert!(net.status.success(), "{}", text(&net));
    let data = json(&root.join("run/leasehook/instance-data.json"));
    let v1 = &data["v1"];
    assert_eq!(v1["cloud_name"], "configdrive", "{data:#}");
    assert_eq!(v1["platform"], "openstack");
    assert_eq!(v1["instance_id"], INSTANCE_ID);
    assert!(
        v1["subplatform"]
            .as_str()
            .unwrap()
            .starts_with("config-disk ("),
        "{data:#}"
    );
    let boot = json(&root.join("run/leasehook/boot.json"));
    assert_eq!(boot["datasource"], "ConfigDrive", "{boot:#}");
    assert!(emu.log().is_empty(), "{:?}", emu.log());
}

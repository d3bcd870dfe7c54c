// SPDX-License-Identifier: Apache-2.0
//! `leasehook detect` as a user runs it: a fake root, the JSON it prints, and every
//! class of bad input, each of which must give one clear error line and exit 1.
//! (Agreement with cloud-init's own ds-identify is `tests/tests/ds_identify.rs`.)

#![cfg(test)]

use std::fs;
use std::path::Path;
use std::process::Output;

use serde_json::Value;

mod common;
use common::{TempDir, leasehook, one_error_line};

fn json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn ec2_root(name: &str) -> TempDir {
    let r = TempDir::new(&format!("detect-{name}"));
    r.file(
        "sys/class/dmi/id/product_uuid",
        "ec2e1916-9099-7caf-fd21-012345abcdef\n",
    );
    r.file("sys/class/dmi/id/sys_vendor", "Amazon EC2\n");
    r.file("proc/cmdline", "ro quiet\n");
    r
}

#[test]
fn prints_the_decision_as_json() {
    let r = ec2_root("ec2");
    let v = json(&leasehook(&["detect", "--root", r.path(), "--virt", "kvm"]));
    assert_eq!(v["datasource_list"], serde_json::json!(["Ec2", "None"]));
    assert_eq!(v["checks"]["Ec2"], "found");
    assert_eq!(v["checks"]["LXD"], "not-found");
    assert_eq!(v["checks"]["NoCloud"], "not-found");
    assert!(
        v["reasons"]["Ec2"]
            .as_str()
            .unwrap()
            .contains("product_uuid")
    );
    assert_eq!(v["virt"], "kvm (--virt)");
    assert_eq!(v["disabled"], Value::Null);

    // In a container EC2 is never found; without --virt below a fake root the
    // virtualisation is unknown (the host's is not taken for the root's).
    let v = json(&leasehook(&[
        "detect",
        "--root",
        r.path(),
        "--virt",
        "docker",
    ]));
    assert_eq!(v["datasource_list"], serde_json::json!([]));
    let v = json(&leasehook(&["detect", "--root", r.path()]));
    assert!(
        v["virt"].as_str().unwrap().starts_with("unavailable"),
        "{v}"
    );
}

#[test]
fn lxd_socket_below_the_root() {
    let r = TempDir::new("detect-lxd");
    fs::create_dir_all(r.0.join("dev/lxd")).unwrap();
    let _listener = std::os::unix::net::UnixListener::bind(r.0.join("dev/lxd/sock")).unwrap();
    let v = json(&leasehook(&["detect", "--root", r.path(), "--virt", "lxc"]));
    assert_eq!(v["datasource_list"], serde_json::json!(["LXD", "None"]));
    assert!(
        v["reasons"]["LXD"]
            .as_str()
            .unwrap()
            .contains("dev/lxd/sock is a socket")
    );
}

#[test]
fn config_file_sets_the_list() {
    let r = ec2_root("config");
    r.file(
        "etc/leasehook/config.yaml",
        "datasource_list: [NoCloud, Ec2]\n",
    );
    let v = json(&leasehook(&["detect", "--root", r.path(), "--virt", "kvm"]));
    assert_eq!(v["datasource_list"], serde_json::json!(["Ec2", "None"]));
    assert_eq!(v["checks"]["NoCloud"], "not-found");
    assert!(v["checks"].get("LXD").is_none(), "{v}");
    assert!(
        v["list_from"]
            .as_str()
            .unwrap()
            .ends_with("etc/leasehook/config.yaml line 1")
    );

    let other = r.0.join("single.yaml");
    fs::write(&other, "datasource_list: [LXD]\n").unwrap();
    let v = json(&leasehook(&[
        "detect",
        "--root",
        r.path(),
        "--virt",
        "kvm",
        "--config",
        other.to_str().unwrap(),
    ]));
    assert_eq!(v["datasource_list"], serde_json::json!(["LXD"]));
}

#[test]
fn bad_input_is_one_clear_error() {
    let r = ec2_root("bad");
    let missing = r.0.join("nope");
    let e = one_error_line(&["detect", "--root", missing.to_str().unwrap()]);
    assert!(e.contains("is not a folder"), "{e}");

    let e = one_error_line(&["detect", "--root", r.path(), "--virt", "k v m"]);
    assert!(e.contains("not a virtualisation name"), "{e}");

    let e = one_error_line(&[
        "detect",
        "--root",
        r.path(),
        "--config",
        missing.to_str().unwrap(),
    ]);
    assert!(e.contains("nope"), "{e}");

    r.file(
        "etc/leasehook/config.yaml",
        "profile: x\ndatasource_list: Ec2\n",
    );
    // The whole file is checked, not only the key detection reads.
    let e = one_error_line(&["detect", "--root", r.path(), "--virt", "kvm"]);
    assert!(e.contains("config.yaml line 1: profile: "), "{e}");
    r.file("etc/leasehook/config.yaml", "datasource_list: Ec2\n");
    let e = one_error_line(&["detect", "--root", r.path(), "--virt", "kvm"]);
    assert!(
        e.contains("config.yaml line 1: datasource_list: expected a list"),
        "{e}"
    );

    // cloud-init's own files are foreign: a broken one is a warning, not an error.
    fs::remove_file(r.0.join("etc/leasehook/config.yaml")).unwrap();
    r.file("etc/cloud/cloud.cfg", "datasource_list: [ LXD\n");
    let v = json(&leasehook(&["detect", "--root", r.path(), "--virt", "kvm"]));
    assert_eq!(v["datasource_list"], serde_json::json!(["Ec2", "None"]));
    assert!(
        v["warnings"][0]
            .as_str()
            .unwrap()
            .contains("not valid YAML"),
        "{v}"
    );
}

#[test]
fn odd_bytes_in_dmi_do_not_panic() {
    let r = TempDir::new("detect-odd");
    for f in [
        "product_uuid",
        "product_serial",
        "board_name",
        "sys_vendor",
        "chassis_asset_tag",
        "product_name",
    ] {
        fs::create_dir_all(r.0.join("sys/class/dmi/id")).unwrap();
        fs::write(
            r.0.join("sys/class/dmi/id").join(f),
            b"\xff\xfe\x00ec2\n\xc3",
        )
        .unwrap();
    }
    fs::write(r.0.join("sys/class/dmi/id/product_uuid"), b"").unwrap();
    let v = json(&leasehook(&["detect", "--root", r.path(), "--virt", "kvm"]));
    assert_eq!(v["datasource_list"], serde_json::json!([]));
    assert!(Path::new(r.path()).exists());
}

// SPDX-License-Identifier: Apache-2.0
//! The boot stage on Alibaba Cloud ECS: `leasehook init` (both stages) on a fake
//! root whose DMI names `Alibaba Cloud ECS`, against the ECS metadata emulator in
//! hardened mode on loopback (`aliyun.endpoint`): detection lists `AliYun`, the
//! network stage fetches it, `instance-data.json` carries cloud-init's v1 keys,
//! `boot.json` records the verdict `provider: auto` then goes by, and a second
//! boot with the service down stands in the cache.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Output};

use leasehook_tests::aliyun_emulator::{INSTANCE_ID, start_loopback, world_tree};
use leasehook_tests::netns::{TempDir, leasehook_bin};
use serde_json::Value;

fn init(root: &str, local: bool) -> Output {
    let mut cmd = Command::new(leasehook_bin());
    cmd.args(["init", "--root", root, "--virt", "kvm"])
        .env_remove("LEASEHOOK_IMDS_ENDPOINTS")
        .env_remove("LEASEHOOK_ALIYUN_ENDPOINT");
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

fn json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn init_fetches_aliyun_and_writes_instance_data_v1() {
    let dir = TempDir::new("ecs-init");
    let root = dir.0.join("root");
    let write = |rel: &str, body: &str| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    };
    let url;
    {
        let emu = start_loopback("127.0.0.1:0".parse().unwrap(), world_tree(), true).unwrap();
        url = emu.base_url();
        write("sys/class/dmi/id/product_name", "Alibaba Cloud ECS\n");
        write("sys/class/dmi/id/sys_vendor", "Alibaba Cloud\n");
        write("proc/cmdline", "ro quiet\n");
        write(
            "etc/leasehook/config.yaml",
            &format!("aliyun:\n  endpoint: \"{url}\"\nimds:\n  budget_s: 2\n"),
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
            text(&net).contains(&format!("datasource AliYun \"{INSTANCE_ID}\", fetched")),
            "{}",
            text(&net)
        );
        // Hardened mode: one token, every GET with it (a GET without gets 401).
        assert_eq!(emu.count("PUT", "/latest/api/token"), 1);
        assert!(
            emu.log().iter().all(|e| e.status != "401"),
            "{:?}",
            emu.log()
        );
        assert!(root.join("run/leasehook/aliyun-token").is_file());
    }
    let data = json(&root.join("run/leasehook/instance-data.json"));
    let v1 = &data["v1"];
    assert_eq!(v1["cloud_name"], "aliyun", "{data:#}");
    assert_eq!(v1["platform"], "aliyun");
    assert_eq!(v1["region"], "cn-hangzhou");
    assert_eq!(v1["availability_zone"], "cn-hangzhou-i");
    assert_eq!(v1["instance_id"], INSTANCE_ID);
    assert_eq!(v1["local_hostname"], "iZbp1leasehookZ");
    assert_eq!(v1["subplatform"], format!("metadata ({url})"));
    let boot = json(&root.join("run/leasehook/boot.json"));
    assert_eq!(boot["datasource"], "AliYun", "{boot:#}");

    // The next boot, the service down: the cache stands in for the same instance.
    std::fs::remove_file(root.join("run/leasehook/boot.json")).unwrap();
    let r = root.to_str().unwrap();
    assert!(init(r, true).status.success());
    let net = init(r, false);
    assert!(
        text(&net).contains(&format!("using the cached AliYun \"{INSTANCE_ID}\"")),
        "{}",
        text(&net)
    );
}

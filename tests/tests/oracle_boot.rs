// SPDX-License-Identifier: Apache-2.0
//! The boot stage on Oracle Cloud: `leasehook init` (both stages) on a fake root
//! whose DMI chassis asset tag is `OracleCloud.com`, against the OCI IMDSv2
//! emulator on loopback (`oracle.endpoint`): detection lists `Oracle`, the local
//! stage asks nothing, the network stage fetches `/opc/v2/instance/` with the
//! header, `instance-data.json` carries cloud-init's v1 keys for OCI, `boot.json`
//! records the verdict `provider: auto` then goes by, and a second boot with the
//! service answering 503 stands in the cache.
//!
//! The emulator lists the primary VNIC only (a MAC no link of this machine has):
//! the network stage's last step (the NICs without DHCP) has nothing to do here.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Output};

use leasehook_tests::netns::{TempDir, leasehook_bin};
use leasehook_tests::oracle_emulator::{Config, Emulator, FAULT_FILE, vnic, world_instance};
use serde_json::{Value, json};

const INSTANCE_ID: &str = "ocid1.instance.oc1.iad.anuwcljleasehook";

fn init(root: &str, local: bool) -> Output {
    let mut cmd = Command::new(leasehook_bin());
    cmd.args(["init", "--root", root, "--virt", "kvm"])
        .env_remove("LEASEHOOK_IMDS_ENDPOINTS")
        .env_remove("LEASEHOOK_ORACLE_ENDPOINT")
        .env_remove("LEASEHOOK_PROVIDER");
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

fn json_file(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn init_fetches_oracle_and_writes_instance_data_v1() {
    let dir = TempDir::new("oci-init");
    let root = dir.0.join("root");
    let write = |rel: &str, body: &str| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    };
    let mut config = Config::new();
    config.vnics = json!([vnic(
        "02:00:17:fe:ed:01",
        "10.250.0.10",
        "10.250.0.0/24",
        "10.250.0.1",
        7
    )]);
    config.instance = world_instance();
    config.fault_file = Some(dir.0.join(FAULT_FILE));
    let emu = Emulator::start("127.0.0.1:0".parse().unwrap(), config).unwrap();
    let url = emu.base_url();
    write("sys/class/dmi/id/chassis_asset_tag", "OracleCloud.com\n");
    write("proc/cmdline", "ro quiet\n");
    write(
        "etc/leasehook/config.yaml",
        &format!("oracle:\n  endpoint: \"{url}\"\nimds:\n  budget_s: 2\n"),
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
        text(&net).contains(&format!("datasource Oracle \"{INSTANCE_ID}\", fetched")),
        "{}",
        text(&net)
    );
    let log = emu.log();
    assert!(log.iter().any(|e| e.url == "/opc/v2/instance/"), "{log:?}");
    assert!(
        log.iter()
            .all(|e| e.authorization == "Bearer%20Oracle" && e.status == "200"),
        "{log:?}"
    );
    let data = json_file(&root.join("run/leasehook/instance-data.json"));
    let v1 = &data["v1"];
    assert_eq!(v1["cloud_name"], "oracle", "{data:#}");
    assert_eq!(v1["platform"], "oracle");
    assert_eq!(v1["subplatform"], format!("metadata ({url}/opc/v2/)"));
    assert_eq!(v1["instance_id"], INSTANCE_ID);
    assert_eq!(v1["local_hostname"], "leasehook-vm");
    assert_eq!(v1["availability_zone"], "iad-ad-1");
    assert_eq!(v1["region"], "us-ashburn-1");
    // The user-data is sensitive: redacted in the world-readable file.
    assert_eq!(
        data["ds"]["metadata"]["user_data"], "redacted for non-root user",
        "{data:#}"
    );
    let sensitive = json_file(&root.join("run/leasehook/instance-data-sensitive.json"));
    assert_eq!(
        sensitive["ds"]["metadata"]["user_data"],
        "I2Nsb3VkLWNvbmZpZwo="
    );
    let boot = json_file(&root.join("run/leasehook/boot.json"));
    assert_eq!(boot["datasource"], "Oracle", "{boot:#}");

    // The next boot, the service failing: the cache stands in for the instance.
    std::fs::write(dir.0.join(FAULT_FILE), "503").unwrap();
    std::fs::remove_file(root.join("run/leasehook/boot.json")).unwrap();
    assert!(init(r, true).status.success());
    let net = init(r, false);
    assert!(
        text(&net).contains(&format!("using the cached Oracle \"{INSTANCE_ID}\"")),
        "{}",
        text(&net)
    );
}

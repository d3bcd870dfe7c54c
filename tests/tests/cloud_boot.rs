// SPDX-License-Identifier: Apache-2.0
//! The boot stage on every cloud, one row of the cloud table a cloud ([`Boot`],
//! `leasehook_tests::clouds::Cloud`): `leasehook init` (both stages) on a fake
//! root whose DMI names the cloud, against its metadata emulator on loopback
//! (`<provider>.endpoint`, EC2's `imds.endpoints`). Every row runs the same
//! function, [`fetch_then_cache`]: detection leaves the cloud to the network
//! stage, which asks nothing before it and then fetches the datasource;
//! `instance-data.json` carries cloud-init's v1 keys and `boot.json` the
//! datasource; a second boot (`run/` emptied) whose service fails stands in the
//! cache for the same instance. What only one cloud has is that row's own checks.
//!
//! | test | shows, beyond the shared row |
//! |---|---|
//! | [`init_fetches_ec2_and_writes_instance_data_v1`] | every request with the IMDSv2 token; IMDS disabled (403 on the token) on the second boot |
//! | [`gce_boot_writes_cloud_init_v1_keys_and_the_cache_takes_over_when_the_server_fails`] | every request with `Metadata-Flavor: Google`; the server answering 503 on the second boot |
//! | [`azure_boot_writes_cloud_init_v1_keys_and_the_cache_takes_over_when_imds_fails`] | one request (`/metadata/instance` answers compute and network), with `Metadata: true`; the user-data in neither file's `ds`; IMDS answering 500 on the second boot |
//! | [`init_fetches_aliyun_and_writes_instance_data_v1`] | hardened mode: one token, every GET with it, the token kept in its own file; the service down on the second boot |
//! | [`init_fetches_oracle_and_writes_instance_data_v1`] | `/opc/v2/instance/` with `Authorization: Bearer Oracle`; the user-data redacted in the world-readable file; the service answering 503 on the second boot |
//! | [`init_fetches_openstack_and_writes_instance_data_v1`] | the documents asked for, in order (`network_data.json` again: the NICs without DHCP); the service down on the second boot |
//! | [`a_config_drive_is_configdrive_read_in_the_local_stage`] | (`OpenStack` only, `netns` feature: root and mount(8)) a root with a config drive is `ConfigDrive`, read in the local stage from the drive, the metadata service never asked |

#![cfg(test)]

use std::path::PathBuf;
use std::process::{Command, Output};

use leasehook_tests::clouds::Cloud;
use leasehook_tests::netns::{TempDir, leasehook_bin};
use serde_json::{Value, json};

/// A cloud's row: how a machine on it looks to detection, and what its
/// datasource must yield.
struct Boot {
    cloud: Cloud,
    /// DMI files (below `sys/class/dmi/id/`) and their contents.
    dmi: &'static [(&'static str, &'static str)],
    /// `--virt`, as systemd-detect-virt would say.
    virt: &'static str,
    /// The datasource's name in the log and `boot.json`.
    datasource: &'static str,
    /// The emulator's instance id.
    id: &'static str,
    /// cloud-init's v1 keys (besides `instance_id`) and their values.
    v1: &'static [(&'static str, &'static str)],
}

/// A metadata service of the test's own on loopback.
trait Service {
    /// Its base URL.
    fn url(&self) -> String;
    /// How many requests it answered.
    fn asked(&self) -> usize;
}

/// A fake root.
struct Root {
    _dir: TempDir,
    path: PathBuf,
}

impl Root {
    fn new(tag: &str) -> Self {
        let dir = TempDir::new(tag);
        let path = dir.0.join("root");
        Self { _dir: dir, path }
    }

    fn write(&self, rel: &str, body: &str) {
        let p = self.path.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }

    fn json(&self, rel: &str) -> Value {
        let p = self.path.join(rel);
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
        serde_json::from_str(&text).unwrap()
    }

    /// `leasehook init` (`--local`: the local stage) with the machine's own
    /// endpoints and provider out of the way; its exit status, standard output
    /// and log, as one text.
    fn init(&self, virt: &str, local: bool) -> (bool, String) {
        let mut cmd = Command::new(leasehook_bin());
        cmd.args(["init", "--root"])
            .arg(&self.path)
            .args(["--virt", virt]);
        for cloud in Cloud::ALL {
            for (k, _) in cloud.env("") {
                cmd.env_remove(k);
            }
        }
        if local {
            cmd.arg("--local");
        }
        let out = cmd.output().unwrap();
        (out.status.success(), text(&out))
    }

    /// Points the configuration at `cloud`'s service `url`, waiting at most
    /// `budget_s` for it.
    fn point_at(&self, cloud: Cloud, url: &str, budget_s: u32) {
        let source = match cloud {
            Cloud::Ec2 => format!("imds:\n  endpoints: [\"{url}\"]\n  budget_s: {budget_s}\n"),
            _ => format!(
                "{}:\n  endpoint: \"{url}\"\nimds:\n  budget_s: {budget_s}\n",
                cloud.provider()
            ),
        };
        self.write("etc/leasehook/config.yaml", &source);
    }
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n{}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The shared row: a first boot against `service`, then `own` (the row's own
/// checks of that boot), then `failing` turns the service into the second
/// boot's (`None`: down), and a second boot stands in the cache.
fn fetch_then_cache<S: Service>(
    row: &Boot,
    service: S,
    own: impl FnOnce(&S, &Root),
    failing: impl FnOnce(S) -> Option<Box<dyn Service>>,
) {
    let root = Root::new(&format!("{}-boot", row.cloud.provider()));
    for (file, body) in row.dmi {
        root.write(&format!("sys/class/dmi/id/{file}"), body);
    }
    root.write("proc/cmdline", "ro quiet\n");
    root.point_at(row.cloud, &service.url(), 2);
    let (ok, local) = root.init(row.virt, true);
    assert!(ok, "{local}");
    assert!(
        local.contains(&format!(
            "tried: {} (local stage): left to the network stage",
            row.datasource
        )),
        "{local}"
    );
    assert_eq!(
        service.asked(),
        0,
        "the local stage asked the metadata service"
    );
    let (ok, net) = root.init(row.virt, false);
    assert!(ok, "{net}");
    let fetched = format!(
        "network stage: datasource {} \"{}\", fetched",
        row.datasource, row.id
    );
    assert!(net.contains(&fetched), "{net}");
    let data = root.json("run/leasehook/instance-data.json");
    for (key, want) in row.v1 {
        assert_eq!(data["v1"][key], *want, "v1.{key}: {data:#}");
    }
    assert_eq!(data["v1"]["instance_id"], row.id, "{data:#}");
    assert_eq!(data["leasehook"]["restored_from_cache"], false, "{data:#}");
    let boot = root.json("run/leasehook/boot.json");
    assert_eq!(boot["datasource"], row.datasource, "{boot:#}");
    own(&service, &root);

    // The next boot (`/run` is a tmpfs), the service failing: the cache stands
    // in for the same instance.
    let failing = failing(service);
    let _ = std::fs::remove_dir_all(root.path.join("run"));
    let url = failing
        .as_ref()
        .map_or_else(|| "http://127.0.0.1:9".to_owned(), |s| s.url());
    root.point_at(row.cloud, &url, 1);
    let (ok, local) = root.init(row.virt, true);
    assert!(ok, "{local}");
    let (ok, net) = root.init(row.virt, false);
    assert!(ok, "{net}");
    for want in [
        format!(
            "network stage: datasource {} \"{}\", restored from the cache (fallback)",
            row.datasource, row.id
        ),
        format!("using the cached {} \"{}\"", row.datasource, row.id),
        "not a new instance".to_owned(),
    ] {
        assert!(net.contains(&want), "lacks {want:?}:\n{net}");
    }
    if let Some(s) = failing {
        assert!(s.asked() > 0, "the failing service was never asked:\n{net}");
    }
    let data = root.json("run/leasehook/instance-data.json");
    assert_eq!(data["v1"]["cloud_name"], row.v1[0].1, "{data:#}");
    assert_eq!(data["leasehook"]["restored_from_cache"], true, "{data:#}");
}

// --- EC2 ---------------------------------------------------------------------------

/// EC2's IMDS emulator (and, hardened, Alibaba's).
type Ec2 = leasehook_tests::emulator::Emulator;

impl Service for Ec2 {
    fn url(&self) -> String {
        self.base_url()
    }
    fn asked(&self) -> usize {
        self.log().len()
    }
}

fn ec2(scenario: Value) -> Ec2 {
    use leasehook_tests::emulator::{Config, Scenario, sample_tree};
    let mut cfg = Config::new(sample_tree());
    cfg.scenario = Scenario::from_value(scenario).unwrap();
    cfg.world.require_token = true;
    Ec2::start("127.0.0.1:0".parse().unwrap(), cfg).unwrap()
}

#[test]
fn init_fetches_ec2_and_writes_instance_data_v1() {
    let row = Boot {
        cloud: Cloud::Ec2,
        dmi: &[
            ("product_uuid", "ec2e1916-9099-7caf-fd21-012345abcdef\n"),
            ("sys_vendor", "Amazon EC2\n"),
        ],
        virt: "kvm",
        datasource: "Ec2",
        id: "i-0fedcba9876543210",
        v1: &[("cloud_name", "aws"), ("platform", "ec2")],
    };
    fetch_then_cache(
        &row,
        ec2(json!({})),
        |emu, _| {
            // IMDSv2 only: every GET carried the token.
            let log = emu.log();
            assert!(log.iter().any(|e| e.method == "PUT"), "{log:?}");
            assert!(log.iter().all(|e| e.status != "401"), "{log:?}");
        },
        |_| {
            Some(Box::new(ec2(json!({"rules": [
                {"path": "/latest/api/token", "method": "PUT", "status": 403}
            ]}))))
        },
    );
}

// --- Google Compute Engine ----------------------------------------------------------

type Gce = leasehook_tests::gce_emulator::GceEmulator;

impl Service for Gce {
    fn url(&self) -> String {
        self.base_url()
    }
    fn asked(&self) -> usize {
        self.log().len()
    }
}

fn gce(scenario: Value) -> Gce {
    use leasehook_tests::gce_emulator::{Config, Scenario, world_tree};
    let mut c = Config::new(world_tree());
    c.scenario = Scenario::from_value(scenario).unwrap();
    Gce::start("127.0.0.1:0".parse().unwrap(), c).unwrap()
}

#[test]
fn gce_boot_writes_cloud_init_v1_keys_and_the_cache_takes_over_when_the_server_fails() {
    let row = Boot {
        cloud: Cloud::Gce,
        dmi: &[
            ("product_name", "Google Compute Engine\n"),
            ("sys_vendor", "Google\n"),
        ],
        virt: "kvm",
        datasource: "GCE",
        id: "4520031799277581759",
        v1: &[
            ("cloud_name", "gce"),
            ("platform", "gce"),
            ("region", "us-central1"),
            ("availability_zone", "us-central1-a"),
            ("local_hostname", "vm-1"),
        ],
    };
    fetch_then_cache(
        &row,
        gce(json!({})),
        |emu, _| {
            // Every request carried the flavor header the server requires.
            assert!(
                emu.log().iter().all(|e| e.flavor == "Google"),
                "{:?}",
                emu.log()
            );
        },
        |_| {
            Some(Box::new(gce(
                json!({"rules": [{"path": "/computeMetadata", "status": 503}]}),
            )))
        },
    );
}

// --- Azure --------------------------------------------------------------------------

type Azure = leasehook_tests::azure_emulator::Emulator;

impl Service for Azure {
    fn url(&self) -> String {
        self.base_url()
    }
    fn asked(&self) -> usize {
        self.log().len()
    }
}

fn azure(scenario: Value) -> Azure {
    use leasehook_tests::azure_emulator::{Scenario, config, world_instance};
    let mut c = config(world_instance());
    c.scenario = Scenario::from_value(scenario).unwrap();
    Azure::start("127.0.0.1:0".parse().unwrap(), c).unwrap()
}

#[test]
fn azure_boot_writes_cloud_init_v1_keys_and_the_cache_takes_over_when_imds_fails() {
    let row = Boot {
        cloud: Cloud::Azure,
        dmi: &[
            ("chassis_asset_tag", "7783-7084-3265-9085-8269-3286-77\n"),
            ("sys_vendor", "Microsoft Corporation\n"),
        ],
        virt: "microsoft",
        datasource: "Azure",
        id: "5c08b38e-4d57-4c23-ac45-aca61037f084",
        v1: &[
            ("cloud_name", "azure"),
            ("platform", "azure"),
            ("region", "westeurope"),
            ("availability_zone", "1"),
            ("local_hostname", "leasehook-vm"),
        ],
    };
    fetch_then_cache(
        &row,
        azure(json!({})),
        |emu, root| {
            // One request: /metadata/instance answers compute and network at once.
            let asked: Vec<String> = emu.log().iter().map(|e| e.url.clone()).collect();
            assert_eq!(asked, ["/metadata/instance?api-version=2021-02-01"]);
            assert!(emu.log().iter().all(|e| e.header == "true"));
            // The user-data is in the sensitive file only, and never in `ds`.
            let sensitive = root.json("run/leasehook/instance-data-sensitive.json");
            assert!(!sensitive.to_string().contains("I2Nsb3Vk"), "{sensitive}");
            let data = root.json("run/leasehook/instance-data.json");
            assert!(!data.to_string().contains("cloud-config"), "{data}");
        },
        |_| {
            Some(Box::new(azure(
                json!({"rules": [{"path": "/metadata", "status": 500}]}),
            )))
        },
    );
}

// --- Alibaba Cloud ECS --------------------------------------------------------------

// The ECS metadata service is EC2's emulator in hardened mode ([`Ec2`]).

#[test]
fn init_fetches_aliyun_and_writes_instance_data_v1() {
    use leasehook_tests::aliyun_emulator::{INSTANCE_ID, start_loopback, world_tree};
    let row = Boot {
        cloud: Cloud::Aliyun,
        dmi: &[
            ("product_name", "Alibaba Cloud ECS\n"),
            ("sys_vendor", "Alibaba Cloud\n"),
        ],
        virt: "kvm",
        datasource: "AliYun",
        id: INSTANCE_ID,
        v1: &[
            ("cloud_name", "aliyun"),
            ("platform", "aliyun"),
            ("region", "cn-hangzhou"),
            ("availability_zone", "cn-hangzhou-i"),
            ("local_hostname", "iZbp1leasehookZ"),
        ],
    };
    let emu = start_loopback("127.0.0.1:0".parse().unwrap(), world_tree(), true).unwrap();
    fetch_then_cache(
        &row,
        emu,
        |emu, root| {
            // Hardened mode: one token, every GET with it (a GET without gets 401).
            assert_eq!(emu.count("PUT", "/latest/api/token"), 1);
            assert!(
                emu.log().iter().all(|e| e.status != "401"),
                "{:?}",
                emu.log()
            );
            assert!(root.path.join("run/leasehook/aliyun-token").is_file());
            let data = root.json("run/leasehook/instance-data.json");
            assert_eq!(
                data["v1"]["subplatform"],
                format!("metadata ({})", emu.base_url())
            );
        },
        |_| None,
    );
}

// --- Oracle Cloud -------------------------------------------------------------------

type Oracle = leasehook_tests::oracle_emulator::Emulator;

impl Service for Oracle {
    fn url(&self) -> String {
        self.base_url()
    }
    fn asked(&self) -> usize {
        self.log().len()
    }
}

/// The emulator lists the primary VNIC only (a MAC no link of this machine has):
/// the network stage's last step (the NICs without DHCP) has nothing to do here.
#[test]
fn init_fetches_oracle_and_writes_instance_data_v1() {
    use leasehook_tests::oracle_emulator::{Config, FAULT_FILE, vnic, world_instance};
    let row = Boot {
        cloud: Cloud::Oracle,
        dmi: &[("chassis_asset_tag", "OracleCloud.com\n")],
        virt: "kvm",
        datasource: "Oracle",
        id: "ocid1.instance.oc1.iad.anuwcljleasehook",
        v1: &[
            ("cloud_name", "oracle"),
            ("platform", "oracle"),
            ("local_hostname", "leasehook-vm"),
            ("availability_zone", "iad-ad-1"),
            ("region", "us-ashburn-1"),
        ],
    };
    let dir = TempDir::new("oci-fault");
    let mut config = Config::default();
    config.world.vnics = json!([vnic(
        "02:00:17:fe:ed:01",
        "10.250.0.10",
        "10.250.0.0/24",
        "10.250.0.1",
        7
    )]);
    config.world.instance = world_instance();
    config.world.fault_file = Some(dir.0.join(FAULT_FILE));
    let emu = Oracle::start("127.0.0.1:0".parse().unwrap(), config).unwrap();
    fetch_then_cache(
        &row,
        emu,
        |emu, root| {
            let log = emu.log();
            assert!(log.iter().any(|e| e.url == "/opc/v2/instance/"), "{log:?}");
            assert!(
                log.iter()
                    .all(|e| e.header == "Bearer%20Oracle" && e.status == "200"),
                "{log:?}"
            );
            let data = root.json("run/leasehook/instance-data.json");
            assert_eq!(
                data["v1"]["subplatform"],
                format!("metadata ({}/opc/v2/)", emu.base_url())
            );
            // The user-data is sensitive: redacted in the world-readable file.
            assert_eq!(
                data["ds"]["metadata"]["user_data"], "redacted for non-root user",
                "{data:#}"
            );
            let sensitive = root.json("run/leasehook/instance-data-sensitive.json");
            assert_eq!(
                sensitive["ds"]["metadata"]["user_data"],
                "I2Nsb3VkLWNvbmZpZwo="
            );
        },
        |emu| {
            // The service failing: 503 to everything.
            std::fs::write(dir.0.join(FAULT_FILE), "503").unwrap();
            Some(Box::new(emu))
        },
    );
}

// --- OpenStack ----------------------------------------------------------------------

type OpenStack = leasehook_tests::openstack_emulator::OpenStackEmulator;

impl Service for OpenStack {
    fn url(&self) -> String {
        self.base_url()
    }
    fn asked(&self) -> usize {
        self.log().len()
    }
}

fn openstack() -> OpenStack {
    use leasehook_tests::openstack_emulator::{Config, world_tree};
    OpenStack::start("127.0.0.1:0".parse().unwrap(), Config::new(world_tree())).unwrap()
}

const OPENSTACK: Boot = Boot {
    cloud: Cloud::OpenStack,
    dmi: &[
        ("product_name", "OpenStack Nova\n"),
        ("sys_vendor", "OpenStack Foundation\n"),
    ],
    virt: "kvm",
    datasource: "OpenStack",
    id: leasehook_tests::openstack_emulator::INSTANCE_ID,
    v1: &[
        ("cloud_name", "openstack"),
        ("platform", "openstack"),
        ("availability_zone", "nova"),
        ("local_hostname", "leasehook-test"),
    ],
};

#[test]
fn init_fetches_openstack_and_writes_instance_data_v1() {
    fetch_then_cache(
        &OPENSTACK,
        openstack(),
        |emu, root| {
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
            let data = root.json("run/leasehook/instance-data.json");
            assert_eq!(
                data["v1"]["subplatform"],
                format!("metadata ({})", emu.base_url())
            );
        },
        |_| None,
    );
}

#[cfg(feature = "netns")]
#[test]
fn a_config_drive_is_configdrive_read_in_the_local_stage() {
    use leasehook_tests::openstack_emulator::{INSTANCE_ID, make_config_drive, world_tree};
    // mount -t iso9660 through the test's FUSE helper (tests/src/configdrive.rs).
    let _ns = leasehook_tests::configdrive::enter(leasehook_tests::configdrive::Helper::Fuse);
    let root = Root::new("os-cd-init");
    root.write("sys/class/dmi/id/product_name", "OpenStack Nova\n");
    root.write("proc/cmdline", "ro quiet\n");
    // A metadata service that would answer: it must never be asked.
    let emu = openstack();
    root.write(
        "etc/leasehook/config.yaml",
        &format!("openstack:\n  endpoint: \"{}\"\n", emu.base_url()),
    );
    let image = root.path.with_file_name("config-drive.img");
    make_config_drive(&world_tree(), "config-2", &image);
    std::fs::create_dir_all(root.path.join("dev/disk/by-label")).unwrap();
    std::os::unix::fs::symlink(&image, root.path.join("dev/disk/by-label/config-2")).unwrap();
    let (ok, local) = root.init("kvm", true);
    assert!(ok, "{local}");
    assert!(
        local.contains(&format!(
            "datasource ConfigDrive \"{INSTANCE_ID}\", fetched"
        )),
        "{local}"
    );
    let (ok, net) = root.init("kvm", false);
    assert!(ok, "{net}");
    let data = root.json("run/leasehook/instance-data.json");
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
    let boot = root.json("run/leasehook/boot.json");
    assert_eq!(boot["datasource"], "ConfigDrive", "{boot:#}");
    assert!(emu.log().is_empty(), "{:?}", emu.log());
}

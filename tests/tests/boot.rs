// SPDX-License-Identifier: Apache-2.0
//! The boot stages as a machine runs them: `leasehook init --local` then `leasehook
//! init`, each a process, on a temporary root, against the IMDS emulator on
//! loopback and the devlxd emulator on a unix socket in the root. A "reboot" empties
//! `<root>/run` (a tmpfs on a real machine) and keeps `<root>/var/lib`.
//!
//! Seed 000's scenario end to end (IMDS disabled, the LXD socket switched off after
//! the first boot), a cache no longer configured (bad caches of every kind are rows
//! of the fault matrix, `tests/tests/faults/`), the
//! network stage asking nothing after the local stage fetched, instance-data modes,
//! `leasehook query` as root and as `nobody` (root only: behind the `netns`
//! feature) — key paths in every form, templates, json/yaml/raw, seed 003's
//! commands as written — and the systemd units. Each cloud's boot (detection,
//! the fetch, its v1 keys, the cache standing in) is a row of
//! `tests/tests/cloud_boot.rs`.

#![cfg(test)]

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use leasehook_tests::devlxd::{self, Devlxd, SAMPLE_META_DATA};
use leasehook_tests::emulator::{self, Emulator, Scenario, sample_tree};
use leasehook_tests::netns::{TempDir, assert_units_verify, leasehook_bin};
use leasehook_tests::workspace_root;
use serde_json::{Value, json};

const EC2_ID: &str = "i-0fedcba9876543210";
const LXD_ID: &str = "i-87018aed";
const REDACTED: &str = "redacted for non-root user";

/// A fake root.
struct Root {
    dir: TempDir,
}

impl Root {
    fn new(tag: &str) -> Self {
        Self {
            dir: TempDir::new(tag),
        }
    }
    fn path(&self) -> &Path {
        &self.dir.0
    }
    fn s(&self) -> &str {
        self.path().to_str().unwrap()
    }
    fn write(&self, rel: &str, body: &str) {
        let p = self.path().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, body).unwrap();
    }
    fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.path().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }
    fn json(&self, rel: &str) -> Value {
        serde_json::from_str(&self.read(rel)).unwrap()
    }
    fn mode(&self, rel: &str) -> u32 {
        fs::metadata(self.path().join(rel))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    }
    /// `/run` is a tmpfs: a reboot empties it.
    fn reboot(&self) {
        let _ = fs::remove_dir_all(self.path().join("run"));
    }
    fn cache(&self) -> PathBuf {
        self.path().join("var/lib/leasehook")
    }
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn from(out: &Output) -> Self {
        Self {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
    fn ok(&self) -> &Self {
        assert_eq!(
            self.code, 0,
            "stdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }
    fn has(&self, needle: &str) -> &Self {
        assert!(
            self.stdout.contains(needle),
            "stdout lacks {needle:?}:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
    fn logs(&self, needle: &str) -> &Self {
        assert!(
            self.stderr.contains(needle),
            "log lacks {needle:?}:\n{}",
            self.stderr
        );
        self
    }
}

fn leasehook(args: &[&str]) -> Run {
    Run::from(
        &Command::new(leasehook_bin())
            .args(args)
            .env_remove("LEASEHOOK_IMDS_ENDPOINTS")
            .output()
            .unwrap(),
    )
}

fn init(root: &Root, local: bool, virt: &str) -> Run {
    let mut args = vec!["init", "--root", root.s(), "--virt", virt];
    if local {
        args.push("--local");
    }
    leasehook(&args)
}

/// Both stages, as one boot.
fn boot(root: &Root, virt: &str) -> (Run, Run) {
    (init(root, true, virt), init(root, false, virt))
}

// --- EC2 -------------------------------------------------------------------------

fn imds(scenario: &Value) -> Emulator {
    let mut cfg = emulator::Config::new(sample_tree());
    cfg.scenario = Scenario::from_value(scenario.clone()).unwrap();
    cfg.world.require_token = true;
    Emulator::start("127.0.0.1:0".parse().unwrap(), cfg).unwrap()
}

/// An EC2 instance (Nitro DMI) whose IMDS is `emu`.
fn ec2_root(tag: &str, emu: &Emulator) -> Root {
    let r = Root::new(tag);
    r.write(
        "sys/class/dmi/id/product_uuid",
        "ec2e1916-9099-7caf-fd21-012345abcdef\n",
    );
    r.write("sys/class/dmi/id/sys_vendor", "Amazon EC2\n");
    r.write("proc/cmdline", "ro quiet\n");
    point_at(&r, emu);
    r
}

fn point_at(r: &Root, emu: &Emulator) {
    r.write(
        "etc/leasehook/config.yaml",
        &format!("imds:\n  endpoints: [\"{}\"]\n", emu.base_url()),
    );
}

#[test]
fn seed_000_imds_disabled_after_the_first_boot_keeps_the_instance() {
    let emu = imds(&json!({}));
    let root = ec2_root("imds-off", &emu);

    // First boot: the local stage leaves EC2 to the network stage, which fetches.
    let local = init(&root, true, "kvm");
    local
        .ok()
        .has("local stage: left to the network stage: Ec2")
        .has("tried: Ec2 (local stage): left to the network stage: IMDS needs the network");
    assert!(emu.log().is_empty(), "the local stage asked IMDS");
    let net = init(&root, false, "kvm");
    net.ok()
        .has(&format!(
            "network stage: datasource Ec2 \"{EC2_ID}\", fetched"
        ))
        .has("a new instance");
    let record = root
        .cache()
        .join(format!("instances/{EC2_ID}/datasource.json"));
    assert!(record.is_file());
    assert_eq!(
        fs::read_link(root.cache().join("instance")).unwrap(),
        Path::new(&format!("instances/{EC2_ID}"))
    );
    assert_eq!(
        root.read("var/lib/leasehook/data/previous-instance-id"),
        "NO_PREVIOUS_INSTANCE_ID\n"
    );
    let doc = root.json("run/leasehook/instance-data.json");
    assert_eq!(doc["v1"]["instance_id"], EC2_ID);
    assert_eq!(doc["leasehook"]["restored_from_cache"], false);
    drop(emu);

    // Second boot: the instance's metadata endpoint is switched off (403 on the token).
    root.reboot();
    let emu = imds(&json!({"rules": [
        {"path": "/latest/api/token", "method": "PUT", "status": 403}
    ]}));
    point_at(&root, &emu);
    let (local, net) = boot(&root, "kvm");
    local.ok();
    net.ok()
        .has(&format!(
            "network stage: datasource Ec2 \"{EC2_ID}\", restored from the cache (fallback)"
        ))
        .has("tried: Ec2 (network stage): instance-id check failed: IMDS PUT ")
        .has("IMDS disabled (the token request was refused with HTTP 403)")
        .has("tried: LXD (local stage): not detected")
        .has("tried: NoCloud (local stage): not detected")
        .has("cache: used: no configured datasource answered")
        .has("not a new instance");
    // The log names every datasource tried and why the cache was used.
    net.logs("no configured datasource answered (tried: ")
        .logs("LXD (local stage): not detected")
        .logs("Ec2 (network stage): instance-id check failed")
        .logs(&format!("using the cached Ec2 \"{EC2_ID}\""));
    // One refused token request, and nothing asked again after it.
    let asked: Vec<String> = emu
        .log()
        .iter()
        .map(|e| format!("{} {} {}", e.method, e.path, e.status))
        .collect();
    assert_eq!(asked, ["PUT /latest/api/token 403"]);
    // Not a new instance.
    assert_eq!(
        root.read("var/lib/leasehook/data/previous-instance-id"),
        format!("{EC2_ID}\n")
    );
    assert_eq!(
        root.read("var/lib/leasehook/data/instance-id"),
        format!("{EC2_ID}\n")
    );
    let doc = root.json("run/leasehook/instance-data.json");
    assert_eq!(doc["v1"]["instance_id"], EC2_ID);
    assert_eq!(doc["leasehook"]["restored_from_cache"], true);
    assert_eq!(doc["leasehook"]["origin"], "cache-fallback");
    assert_eq!(doc["userdata"], REDACTED);
    leasehook(&["status", "--root", root.s()])
        .ok()
        .has(&format!(
            "datasource: Ec2 \"{EC2_ID}\": restored from the cache (fallback); in use since "
        ))
        .has("from the cache: data fetched ");
    let sj: Value =
        serde_json::from_str(&leasehook(&["status", "--json", "--root", root.s()]).stdout).unwrap();
    assert_eq!(sj["datasource"]["from_cache"], true);
    assert_eq!(sj["datasource"]["datasource"], "Ec2");
    assert!(sj["datasource"]["since_ms"].as_u64().unwrap() > 0);
    assert_eq!(sj["interfaces"], json!([]));

    // Third boot: IMDS is back, and one request confirms the instance-id.
    root.reboot();
    let emu = imds(&json!({}));
    point_at(&root, &emu);
    let (_, net) = boot(&root, "kvm");
    net.ok()
        .has("restored from the cache (instance-id confirmed)")
        .has("tried: Ec2 (network stage): instance-id matches the cache");
    let paths: Vec<String> = emu.log().iter().map(|e| e.path.clone()).collect();
    assert_eq!(
        paths,
        ["/latest/api/token", "/latest/meta-data/instance-id"]
    );
}

// --- LXD -------------------------------------------------------------------------

fn lxd_config() -> devlxd::Config {
    devlxd::Config::new(SAMPLE_META_DATA)
        .key("user.user-data", "#cloud-config\npassword: hunter2\n")
        .key(
            "cloud-init.vendor-data",
            "#cloud-config\nvendor: secret-v\n",
        )
        .key("user.tag", "blue")
}

fn lxd_root(tag: &str) -> (Root, Devlxd) {
    let r = Root::new(tag);
    fs::create_dir_all(r.path().join("dev/lxd")).unwrap();
    let d = Devlxd::start(&r.path().join("dev/lxd/sock"), lxd_config()).unwrap();
    (r, d)
}

/// `security.devlxd=false`: the socket is gone.
fn switch_off(root: &Root, d: Devlxd) {
    drop(d);
    let _ = fs::remove_file(root.path().join("dev/lxd/sock"));
    assert!(fs::symlink_metadata(root.path().join("dev/lxd/sock")).is_err());
}

#[test]
fn local_lxd_fetch_means_zero_socket_requests_in_the_network_stage() {
    let (root, d) = lxd_root("lxd-net");
    init(&root, true, "lxc").ok().has(&format!(
        "local stage: datasource LXD \"{LXD_ID}\", fetched"
    ));
    let after_local = d.log().len();
    assert!(after_local >= 3, "{:?}", d.log());
    init(&root, false, "lxc")
        .ok()
        .has("decided earlier this boot by the local stage; no datasource asked again");
    assert_eq!(d.log().len(), after_local, "{:?}", d.log());
    // Run again: still nothing.
    init(&root, false, "lxc").ok();
    assert_eq!(d.log().len(), after_local);
}

#[test]
fn seed_000_lxd_socket_switched_off_keeps_the_instance() {
    let (root, d) = lxd_root("lxd-off");
    boot(&root, "lxc").0.ok();
    switch_off(&root, d);
    root.reboot();
    let (local, net) = boot(&root, "lxc");
    local
        .ok()
        .has(&format!(
            "local stage: datasource LXD \"{LXD_ID}\", restored from the cache (fallback)"
        ))
        .has("tried: LXD (local stage): not detected: ")
        .has("dev/lxd/sock does not exist")
        .has("cache: used: no configured datasource answered")
        .has("not a new instance");
    local.logs("using the cached LXD");
    net.ok().has("decided earlier this boot by the local stage");
    assert_eq!(
        root.read("var/lib/leasehook/data/previous-instance-id"),
        format!("{LXD_ID}\n")
    );
    let doc = root.json("run/leasehook/instance-data.json");
    assert_eq!(doc["leasehook"]["restored_from_cache"], true);
    assert_eq!(doc["ds"]["config"]["user.tag"], "blue");
    assert_eq!(doc["ds"]["config"]["user.user-data"], REDACTED);
}

#[test]
fn a_cache_no_longer_configured_is_not_used_and_the_log_says_so() {
    let (root, d) = lxd_root("lxd-unconf");
    boot(&root, "lxc").0.ok();
    switch_off(&root, d);
    root.reboot();
    root.write(
        "etc/leasehook/config.yaml",
        "datasource_list: [NoCloud, None]\n",
    );
    let local = init(&root, true, "lxc");
    assert_eq!(local.code, 3, "{}\n{}", local.stdout, local.stderr);
    local
        .has("no datasource answered and the cache cannot stand in: datasource None")
        .has("tried: NoCloud (local stage): not found")
        .has("the cached datasource LXD is no longer configured (configured: [NoCloud, None])");
    local.logs("the cache is not used: the cached datasource LXD is no longer configured");
    // The network stage has nothing left to try and says the same.
    let net = init(&root, false, "lxc");
    assert_eq!(net.code, 3);
    let q = leasehook(&["query", "--root", root.s(), "v1.instance_id"]);
    assert_eq!(q.ok().stdout, "iid-datasource-none\n");
    // The last good state is kept.
    assert_eq!(
        root.read("var/lib/leasehook/data/instance-id"),
        format!("{LXD_ID}\n")
    );
    assert!(
        root.cache()
            .join(format!("instances/{LXD_ID}/datasource.json"))
            .is_file()
    );
}

#[test]
fn init_and_query_refuse_bad_input_with_one_line() {
    let root = Root::new("bad-input");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["init", "--root", "/nonexistent/x"], "is not a folder"),
        (vec!["init", "--root", root.s(), "--virt", "KVM;"], "--virt"),
        (
            vec!["query", "--root", root.s(), "v1"],
            "has `leasehook init` run",
        ),
        (vec!["query", "--root", root.s(), "ds..x"], "empty segment"),
        (
            vec!["query", "--root", root.s(), "ds[1.0"],
            "a [ is not closed",
        ),
    ];
    for (args, want) in cases {
        let r = leasehook(&args);
        assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "{args:?}");
        let errors: Vec<&str> = r
            .stderr
            .lines()
            .filter(|l| l.starts_with("leasehook: error: "))
            .collect();
        assert_eq!(errors.len(), 1, "{args:?}: {}", r.stderr);
        assert!(errors[0].contains(want), "{args:?}: {}", r.stderr);
    }
    root.write("etc/leasehook/config.yaml", "fallback: sometimes\n");
    let r = init(&root, true, "kvm");
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("config.yaml") && r.stderr.contains("line 1"),
        "{}",
        r.stderr
    );
    assert!(leasehook(&["query", "--root", root.s()]).code == 2);
}

#[test]
fn query_reads_paths_with_quoted_keys() {
    let (root, _d) = lxd_root("query");
    init(&root, true, "lxc").ok();
    assert_eq!(root.mode("run/leasehook/instance-data.json"), 0o644);
    assert_eq!(
        root.mode("run/leasehook/instance-data-sensitive.json"),
        0o600
    );
    let q = |args: &[&str]| {
        let mut all = vec!["query", "--root", root.s(), "--format", "json"];
        all.extend_from_slice(args);
        let r = leasehook(&all);
        r.ok();
        serde_json::from_str::<Value>(&r.stdout).unwrap()
    };
    // These tests run as root: the sensitive file.
    assert_eq!(
        q(&[r#"ds.config."user.user-data""#]),
        "#cloud-config\npassword: hunter2\n"
    );
    assert_eq!(q(&["userdata"]), "#cloud-config\npassword: hunter2\n");
    assert_eq!(q(&["v1.cloud_name"]), "lxd");
    assert_eq!(
        q(&["--list-keys", "ds.config"]),
        json!(["cloud-init.vendor-data", "user.tag", "user.user-data"])
    );
    assert_eq!(q(&["--all"])["v1"]["instance-id"], LXD_ID);
    let missing = leasehook(&["query", "--root", root.s(), "ds.config.user"]);
    assert_eq!(missing.code, 1);
    assert!(
        missing
            .stderr
            .contains(r#"ds.config has no key "user" (its keys: "cloud-init.vendor-data", "user.tag", "user.user-data")"#),
        "{}",
        missing.stderr
    );
}

#[cfg(feature = "netns")]
#[test]
fn query_as_nobody_sees_only_redacted_secrets() {
    leasehook_tests::netns::require_root();
    let (root, _d) = lxd_root("nobody");
    init(&root, true, "lxc").ok();
    let as_nobody = |args: &[&str]| {
        Run::from(
            &Command::new("setpriv")
                .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
                .arg(leasehook_bin())
                .args(args)
                .output()
                .expect("setpriv (util-linux) is needed"),
        )
    };
    let all = as_nobody(&["query", "--root", root.s(), "--all"]);
    all.ok();
    assert!(!all.stdout.contains("hunter2"), "{}", all.stdout);
    assert!(!all.stdout.contains("secret-v"), "{}", all.stdout);
    let doc: Value = serde_json::from_str(&all.stdout).unwrap();
    assert_eq!(doc["userdata"], REDACTED);
    assert_eq!(doc["vendordata"], REDACTED);
    assert_eq!(doc["ds"]["config"]["user.user-data"], REDACTED);
    assert_eq!(doc["ds"]["config"]["cloud-init.vendor-data"], REDACTED);
    assert_eq!(doc["ds"]["config"]["user.tag"], "blue");
    assert_eq!(doc["v1"]["instance_id"], LXD_ID);
    let ud = as_nobody(&["query", "--root", root.s(), "userdata"]);
    ud.ok();
    assert_eq!(ud.stdout, format!("{REDACTED}\n"));
    // The sensitive file itself is out of reach.
    let cat = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "cat"])
        .arg(
            root.path()
                .join("run/leasehook/instance-data-sensitive.json"),
        )
        .output()
        .unwrap();
    assert!(!cat.status.success());
    assert!(
        String::from_utf8_lossy(&cat.stderr).contains("Permission denied"),
        "{cat:?}"
    );
    // Root reads the secrets.
    let root_ud = leasehook(&["query", "--root", root.s(), "userdata"]);
    assert!(root_ud.ok().stdout.contains("hunter2"));
}

// --- systemd units ---------------------------------------------------------------

#[test]
fn the_boot_units_verify_and_order_around_the_network() {
    assert_units_verify(
        "boot-units",
        &[
            ("leasehook-local.service", "leasehook-local.service"),
            ("leasehook.service", "leasehook.service"),
        ],
    );
    let units = workspace_root().join("hooks/systemd");
    let local = fs::read_to_string(units.join("leasehook-local.service")).unwrap();
    let net = fs::read_to_string(units.join("leasehook.service")).unwrap();
    for (unit, line) in [
        (&local, "Before=network-pre.target"),
        (&local, "Type=oneshot"),
        (&local, "ExecStart=/usr/bin/leasehook init --local"),
        (&net, "After=network-online.target"),
        (&net, "Type=oneshot"),
        (&net, "ExecStart=/usr/bin/leasehook init\n"),
    ] {
        assert!(unit.contains(line), "{line}");
    }
    // The local stage must still reach the LXD socket under /dev.
    assert!(!local.contains("PrivateDevices=yes"));
}

// --- query: paths, templates, formats (issue 13) -----------------------------------

/// Instance data as cloud-init's LXD datasource shapes it (seed 003): the config
/// under the API version `1.0`, meta-data beside it.
fn lxd_cloud_init_doc() -> Value {
    json!({
        "_doc": "LXD-shaped instance data, as in seed 003",
        "v1": {
            "_beta_keys": ["subplatform"],
            "availability-zone": null, "availability_zone": null,
            "cloud-name": "lxd", "cloud_name": "lxd", "cloud_id": "lxd",
            "instance-id": LXD_ID, "instance_id": LXD_ID,
            "local-hostname": "myhost.internal", "local_hostname": "myhost.internal",
            "platform": "lxd", "region": null,
            "subplatform": "LXD socket API v. 1.0 (/dev/lxd/sock)"
        },
        "ds": {
            "_doc": "EXPERIMENTAL",
            "1.0": {
                "config": {
                    "user.meta-data": "instance-id: i-87018aed\nlocal-hostname: myhost.internal",
                    "user.user-data": "#cloud-config\nruncmd:\n - echo 'hi' > /root/hi",
                    "user.vendor-data": "#cloud-config\nbootcmd:\n - echo 'hi from vendor' > /var/tmp/vendor",
                    "user.tag": "blue"
                },
                "meta-data": "#cloud-config\ninstance-id: i-87018aed\nlocal-hostname: myhost.internal"
            },
            "meta-data": "#cloud-config\ninstance-id: i-87018aed\nlocal-hostname: myhost.internal",
            "network-config": {"version": 1, "config": [
                {"type": "physical", "name": "eth0", "subnets": [{"type": "dhcp"}]},
                {"type": "physical", "name": "eth1", "subnets": [{"type": "dhcp6"}]}
            ]}
        },
        "userdata": "#cloud-config\nruncmd:\n - echo 'hi' > /root/hi",
        "vendordata": "#cloud-config\nbootcmd:\n - echo 'hi from vendor' > /var/tmp/vendor"
    })
}

/// A root whose `run/leasehook` holds `doc` as `leasehook init` writes it: the
/// sensitive file 0600, the redacted one 0644.
fn written_root(tag: &str, doc: &Value) -> Root {
    let r = Root::new(tag);
    r.write(
        "run/leasehook/instance-data-sensitive.json",
        &serde_json::to_string_pretty(doc).unwrap(),
    );
    r.write(
        "run/leasehook/instance-data.json",
        &serde_json::to_string_pretty(&leasehook_core::instance_data::redact(doc)).unwrap(),
    );
    for (rel, mode) in [
        ("run", 0o755),
        ("run/leasehook", 0o755),
        ("run/leasehook/instance-data-sensitive.json", 0o600),
        ("run/leasehook/instance-data.json", 0o644),
    ] {
        fs::set_permissions(r.path().join(rel), fs::Permissions::from_mode(mode)).unwrap();
    }
    r
}

fn query(root: &Root, args: &[&str]) -> Run {
    let mut all = vec!["query", "--root", root.s()];
    all.extend_from_slice(args);
    leasehook(&all)
}

/// `query --format json` printing one line of JSON that is `want`.
fn json_at(root: &Root, args: &[&str]) -> Value {
    let r = query(root, &[&["--format", "json"][..], args].concat());
    r.ok();
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {}", r.stdout))
}

/// One `leasehook: error:` line on stderr holding `want`, nothing on stdout, exit 1.
fn fails_with(r: &Run, want: &str) {
    assert_eq!(r.code, 1, "stdout: {}\nstderr: {}", r.stdout, r.stderr);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    let errors: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("leasehook: error: "))
        .collect();
    assert_eq!(errors.len(), 1, "{}", r.stderr);
    assert!(errors[0].contains(want), "want {want:?} in {}", r.stderr);
}

/// An EC2 instance booted against the IMDS emulator: real instance data.
fn ec2_booted(tag: &str) -> (Root, Emulator) {
    let emu = imds(&json!({}));
    let root = ec2_root(tag, &emu);
    boot(&root, "kvm").1.ok();
    (root, emu)
}

#[test]
fn query_paths_in_every_form_on_lxd_and_ec2_instance_data() {
    let lxd = written_root("paths-lxd", &lxd_cloud_init_doc());
    let tag_forms = [
        r#"ds."1.0".config."user.tag""#,
        r#"ds["1.0"].config["user.tag"]"#,
        "ds['1.0'].config['user.tag']",
        "ds[1.0].config[user.tag]",
        r#"ds[1.0]["config"]."user.tag""#,
    ];
    for p in tag_forms {
        assert_eq!(json_at(&lxd, &[p]), "blue", "{p}");
    }
    assert_eq!(json_at(&lxd, &["ds.network-config.config[1].name"]), "eth1");
    assert_eq!(
        json_at(&lxd, &["--list-keys", "ds[1.0].config"]),
        json!([
            "user.meta-data",
            "user.tag",
            "user.user-data",
            "user.vendor-data"
        ])
    );
    // Scripts: raw strings and one key a line; YAML.
    assert_eq!(
        query(&lxd, &["--format", "raw", "ds[1.0].config[user.tag]"])
            .ok()
            .stdout,
        "blue\n"
    );
    assert_eq!(
        query(&lxd, &["--format", "raw", "--list-keys", "ds[1.0]"])
            .ok()
            .stdout,
        "config\nmeta-data\n"
    );
    assert_eq!(
        query(&lxd, &["--format", "raw", "ds.network-config.version"])
            .ok()
            .stdout,
        "1\n"
    );
    let yaml = query(&lxd, &["--format", "yaml", "ds.network-config"]);
    let back: Value = serde_saphyr::from_str(&yaml.ok().stdout).unwrap();
    assert_eq!(back, lxd_cloud_init_doc()["ds"]["network-config"]);
    // Misses name the path, the keys there and the nearest ones.
    fails_with(
        &query(&lxd, &["ds[1.1].config"]),
        r#"instance-data key ds."1.1".config: ds has no key "1.1" (its keys: "1.0", _doc, meta-data, network-config); nearest: "1.0""#,
    );
    fails_with(&query(&lxd, &["ds.meta_data"]), "nearest: meta-data");
    fails_with(
        &query(&lxd, &["ds.network-config.config[2]"]),
        "ds.network-config.config is a list of 2 item(s): [2] is past its end",
    );
    fails_with(
        &query(&lxd, &["--format", "yaml"]),
        "--format yaml needs KEY",
    );
    fails_with(
        &query(&lxd, &["--format", "{{ platform }}", "v1"]),
        "a --format template renders all the instance data",
    );

    // EC2, booted for real against the emulator.
    let (ec2, _emu) = ec2_booted("paths-ec2");
    let mac = emulator::SAMPLE_SECONDARY;
    for p in [
        format!(r#"ds.meta-data.network.interfaces.macs."{mac}".device-number"#),
        format!("ds.meta-data.network.interfaces.macs.{mac}.device-number"),
        format!(r#"ds["meta-data"].network.interfaces.macs["{mac}"]["device-number"]"#),
        format!("ds[meta-data][network].interfaces.macs['{mac}'].device-number"),
    ] {
        assert_eq!(json_at(&ec2, &[&p]), "1", "{p}");
    }
    assert_eq!(
        json_at(&ec2, &["ds.meta-data.placement[availability-zone]"]),
        "eu-central-1a"
    );
    assert_eq!(
        json_at(&ec2, &["--list-keys", "ds.meta-data.placement"]),
        json!(["availability-zone", "region"])
    );
    fails_with(
        &query(&ec2, &["v1.instance-idd"]),
        "v1 has no key \"instance-idd\"",
    );
    fails_with(
        &query(&ec2, &["v1.instance-idd"]),
        "nearest: instance-id, instance_id",
    );
}

#[test]
fn query_templates_with_v1_keys_aliases_loops_and_conditionals() {
    let lxd = written_root("tmpl-lxd", &lxd_cloud_init_doc());
    let render = |root: &Root, t: &str| query(root, &["--format", t]).ok().stdout.clone();
    let cases = [
        ("{{ v1.local_hostname }}", "myhost.internal\n"),
        ("{{ local_hostname }}", "myhost.internal\n"),
        ("{{ v1.cloud_name }}/{{ cloud_name }}", "lxd/lxd\n"),
        ("{{ ds['1.0'].config.user_tag }}", "blue\n"),
        (
            "{{ ('instance-id: ' ~ instance_id) in ds.meta_data }}",
            "True\n",
        ),
        (
            "{% for i in ds.network_config.config %}{{ i.name }}={{ i.subnets[0].type }} {% endfor %}",
            "eth0=dhcp eth1=dhcp6 \n",
        ),
        (
            "{% if availability_zone %}{{ availability_zone }}{% else %}no zone{% endif %}",
            "no zone\n",
        ),
        ("{{ region | default('none', true) }}", "none\n"),
    ];
    for (t, want) in cases {
        assert_eq!(render(&lxd, t), want, "{t}");
    }
    let (ec2, _emu) = ec2_booted("tmpl-ec2");
    let ec2_cases = [
        (
            "{{ availability_zone }} {{ region }}",
            "eu-central-1a eu-central-1\n",
        ),
        ("{{ v1.availability_zone }}", "eu-central-1a\n"),
        (
            "{{ instance_id }} {{ cloud_name }}",
            &format!("{EC2_ID} aws\n"),
        ),
        (
            "{% for mac, nic in ds.meta_data.network.interfaces.macs | items %}{{ nic.device_number }}:{{ nic.interface_id }};{% endfor %}",
            "0:eni-0000000000000000a;1:eni-0000000000000000b;",
        ),
        (
            "{% if v1.cloud_name == 'aws' %}in {{ ds.meta_data.placement.availability_zone }}{% endif %}",
            "in eu-central-1a\n",
        ),
    ];
    for (t, want) in ec2_cases {
        let got = render(&ec2, t);
        assert_eq!(got.trim_end(), want.trim_end(), "{t}");
    }
    // Malformed or naming what is not there: one clear line, exit 1, no output.
    fails_with(
        &query(&lxd, &["--format", "{{ platform "]),
        "the template: syntax error: unexpected end of input",
    );
    fails_with(
        &query(&lxd, &["--format", "{% for x in v1 %}{{ x }}"]),
        "syntax error",
    );
    fails_with(
        &query(&lxd, &["--format", "{{ platform | nosuch }}"]),
        "unknown filter",
    );
    fails_with(
        &query(&lxd, &["--format", "{{ v1.platfrom }}"]),
        r#"undefined value (in --format:1): instance-data key v1.platfrom: v1 has no key "platfrom""#,
    );
    fails_with(
        &query(&lxd, &["--format", "{{ v1.platfrom }}"]),
        "nearest: platform",
    );
}

/// Seed 003's commands, with `leasehook` for `cloud-init` (and `--root` for the
/// test's root), through a shell as written.
#[test]
fn seed_003_query_examples_run_as_written() {
    let root = written_root("seed-003", &lxd_cloud_init_doc());
    let sh = |cmd: &str| {
        let line = cmd.replacen(
            "cloud-init query",
            &format!("{} query --root {}", leasehook_bin().display(), root.s()),
            1,
        );
        // An empty folder: a bracket glob like ds[1.0] matches nothing, as in a
        // fresh login shell's home.
        Run::from(
            &Command::new("sh")
                .arg("-c")
                .arg(&line)
                .current_dir(root.path().join("run/leasehook"))
                .output()
                .unwrap(),
        )
    };
    let ds: Value = serde_json::from_str(&sh("cloud-init query ds").ok().stdout).unwrap();
    assert_eq!(ds["1.0"]["config"]["user.tag"], "blue");
    sh(r#"cloud-init query --format "{{platform}} {{subplatform}}""#)
        .ok()
        .has("lxd LXD socket API v. 1.0 (/dev/lxd/sock)\n");
    let config: Value =
        serde_json::from_str(&sh("cloud-init query ds[1.0].config").ok().stdout).unwrap();
    assert_eq!(config, lxd_cloud_init_doc()["ds"]["1.0"]["config"]);
    // A string prints as is, as cloud-init prints it (issue 31).
    let md = sh(r#"cloud-init query 'ds["1.0"]["meta-data"]'"#)
        .ok()
        .stdout
        .clone();
    assert!(md.contains("local-hostname: myhost.internal"), "{md}");
    assert!(!md.starts_with('"'), "{md}");
    // The thread's `cloud-init query -a`, as root: the secrets are there.
    let all: Value = serde_json::from_str(&sh("cloud-init query -a").ok().stdout).unwrap();
    assert_eq!(
        all["ds"]["1.0"]["config"]["user.user-data"],
        "#cloud-config\nruncmd:\n - echo 'hi' > /root/hi"
    );
}

#[cfg(feature = "netns")]
#[test]
fn query_templates_and_paths_as_nobody_see_only_redacted_secrets() {
    leasehook_tests::netns::require_root();
    let root = written_root("tmpl-nobody", &lxd_cloud_init_doc());
    let as_nobody = |args: &[&str]| {
        Run::from(
            &Command::new("setpriv")
                .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
                .arg(leasehook_bin())
                .args(["query", "--root", root.s()])
                .args(args)
                .output()
                .expect("setpriv (util-linux) is needed"),
        )
    };
    let secrets = ["echo 'hi'", "hi from vendor"];
    let template = "{{ userdata }}|{{ vendordata }}|{{ ds['1.0'].config['user.user-data'] }}|{{ ds['1.0'].config.user_user_data }}|{{ ds['1.0'].config.user_vendor_data }}|{{ ds['1.0'].config['user.tag'] }}";
    let redacted = as_nobody(&["--format", template]);
    redacted.ok();
    assert_eq!(
        redacted.stdout,
        format!("{REDACTED}|{REDACTED}|{REDACTED}|{REDACTED}|{REDACTED}|blue\n")
    );
    for args in [
        vec!["--all", "--format", "yaml"],
        vec!["ds[1.0].config"],
        vec!["--format", "raw", r#"ds["1.0"].config["user.meta-data"]"#],
        vec![
            "--format",
            "{% for k, v in ds['1.0'].config | items %}{{ k }}={{ v }};{% endfor %}",
        ],
    ] {
        let r = as_nobody(&args);
        r.ok();
        for s in secrets {
            assert!(!r.stdout.contains(s), "{args:?} shows {s:?}: {}", r.stdout);
        }
        assert!(r.stdout.contains(REDACTED), "{args:?}: {}", r.stdout);
    }
    // Root renders the same template with the secrets.
    let as_root = query(&root, &["--format", template]);
    assert!(
        as_root
            .ok()
            .stdout
            .starts_with("#cloud-config\nruncmd:\n - echo 'hi' > /root/hi|"),
        "{}",
        as_root.stdout
    );
    assert!(!as_root.stdout.contains(REDACTED), "{}", as_root.stdout);
}

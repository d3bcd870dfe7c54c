// SPDX-License-Identifier: Apache-2.0
//! The LXD datasource against the devlxd emulator on a unix socket in a temporary
//! folder: what it reads, how it merges, and how it fails.

#![cfg(test)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use leasehook_core::Error;
use leasehook_core::source::lxd::Lxd;
use leasehook_core::source::lxd::data::default_network_config;
use leasehook_core::source::{Datasource, SourceKind};
use leasehook_tests::devlxd::{Config, Devlxd, SAMPLE_META_DATA};
use leasehook_tests::world::start_first_line;
use serde_json::json;

/// Every log record of this test binary.
struct Capture(Mutex<Vec<String>>);

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        self.0
            .lock()
            .unwrap()
            .push(format!("{} {}", record.level(), record.args()));
    }
    fn flush(&self) {}
}

fn logs_with(needle: &str) -> Vec<String> {
    static CAPTURE: OnceLock<&'static Capture> = OnceLock::new();
    let c = CAPTURE.get_or_init(|| {
        let c: &'static Capture = Box::leak(Box::new(Capture(Mutex::new(Vec::new()))));
        log::set_logger(c).unwrap();
        log::set_max_level(log::LevelFilter::Debug);
        c
    });
    c.0.lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains(needle))
        .cloned()
        .collect()
}

/// A fake root with `dev/lxd/` and the emulator on `dev/lxd/sock`.
struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    devlxd: Devlxd,
}

fn start(config: Config) -> Fixture {
    let _ = logs_with("");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_owned();
    std::fs::create_dir_all(root.join("dev/lxd")).unwrap();
    let devlxd = Devlxd::start(&root.join("dev/lxd/sock"), config).unwrap();
    Fixture {
        _dir: dir,
        root,
        devlxd,
    }
}

impl Fixture {
    fn lxd(&self) -> Lxd {
        Lxd::new(&self.root).with_virt("lxc")
    }
    fn socket(&self) -> String {
        self.devlxd.path().display().to_string()
    }
}

fn full_config() -> Config {
    Config::new(SAMPLE_META_DATA)
        // Listed unsorted, as LXD lists them.
        .key(
            "user.vendor-data",
            "#cloud-config\nbootcmd: [echo vendor]\n",
        )
        .key("user.user-data", "#cloud-config\nruncmd: [echo user]\n")
        .key(
            "cloud-init.user-data",
            "#cloud-config\nruncmd: [echo cloud-init]\n",
        )
        .key(
            "user.network-config",
            "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n",
        )
        .key("user.meta-data", "local-hostname: from-user-meta-data\n")
        .key("user.tag", "blue")
        .devices(json!({"eth0": {"type": "nic", "network": "lxdbr0", "name": "eth0"}}))
}

#[test]
fn fetch_reads_every_route_and_merges_like_cloud_init() {
    let f = start(full_config());
    let d = f.lxd().fetch().unwrap();
    assert_eq!(d.datasource, SourceKind::Lxd);
    // meta-data repeats instance-id: the last value wins, as PyYAML reads it.
    assert_eq!(d.instance_id, "i-87018aed");
    // user.meta-data is merged over meta-data.
    assert_eq!(d.local_hostname.as_deref(), Some("from-user-meta-data"));
    // cloud-init.* wins over user.*.
    assert_eq!(
        d.user_data.as_deref(),
        Some(&b"#cloud-config\nruncmd: [echo cloud-init]\n"[..])
    );
    assert_eq!(
        d.vendor_data.as_deref(),
        Some(&b"#cloud-config\nbootcmd: [echo vendor]\n"[..])
    );
    assert_eq!(
        d.network_config.as_ref().unwrap()["ethernets"]["eth0"]["dhcp4"],
        true
    );
    assert_eq!((d.cloud_name.as_str(), d.platform.as_str()), ("lxd", "lxd"));
    assert_eq!(
        d.subplatform,
        format!("LXD socket API v. 1.0 ({})", f.socket())
    );
    assert_eq!(d.ds["devices"]["eth0"]["type"], "nic");
    assert_eq!(d.ds["_metadata_api_version"], "1.0");
    assert_eq!(d.ds["meta-data"], SAMPLE_META_DATA);
    assert_eq!(
        d.sensitive_keys(),
        [
            "ds/config/cloud-init.user-data",
            "ds/config/user.meta-data",
            "ds/config/user.user-data",
            "ds/config/user.vendor-data",
            "ds/meta-data",
        ]
    );
    let redacted = d.redacted_ds();
    // LXD appended user.meta-data to its meta-data: the raw text is redacted too.
    assert_eq!(redacted["meta-data"], "redacted for non-root user");
    assert_eq!(
        redacted["config"]["user.user-data"],
        "redacted for non-root user"
    );
    assert_eq!(redacted["config"]["user.tag"], "blue");
    assert_eq!(
        redacted["config"]["user.network-config"],
        "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n"
    );
    // The ignored user.user-data is logged.
    let ignored = logs_with(&format!(
        "LXD {}: ignoring config user.user-data in favour of cloud-init.user-data",
        f.socket()
    ));
    assert_eq!(ignored.len(), 1, "{ignored:?}");
    assert!(ignored[0].starts_with("WARN"));
    // Every route once: meta-data, config, the six keys, devices.
    let log = f.devlxd.log();
    assert_eq!(log.len(), 9, "{log:?}");
    assert_eq!(log[0], "GET /1.0/meta-data 200");
    assert_eq!(log[1], "GET /1.0/config 200");
    assert_eq!(log[2], "GET /1.0/config/cloud-init.user-data 200");
    assert_eq!(log[8], "GET /1.0/devices 200");
}

#[test]
fn every_user_and_cloud_init_key_is_listed_in_ds_config() {
    let mut c = Config::new("instance-id: many\n");
    for i in 0..40 {
        c = c.key(&format!("user.key-{i:02}"), &format!("value {i}"));
    }
    let c = c
        .key("cloud-init.vendor-data", "#cloud-config\n{}\n")
        .key("user.with.dots_and:colons", "x");
    let f = start(c);
    let d = f.lxd().fetch().unwrap();
    let config = d.ds["config"].as_object().unwrap();
    assert_eq!(config.len(), 42);
    assert_eq!(config["user.key-07"], "value 7");
    assert_eq!(config["user.with.dots_and:colons"], "x");
    assert_eq!(d.sensitive_keys(), ["ds/config/cloud-init.vendor-data"]);
    // No network-config given: DHCPv4 on eth0 in a container...
    assert_eq!(d.network_config, Some(default_network_config("eth0")));
    // ...and on the VM NIC under KVM.
    let vm = Lxd::new(&f.root)
        .with_virt("kvm")
        .with_machine("x86_64")
        .fetch()
        .unwrap();
    assert_eq!(vm.network_config, Some(default_network_config("enp5s0")));
    let s390 = Lxd::new(&f.root)
        .with_virt("qemu")
        .with_machine("s390x")
        .fetch()
        .unwrap();
    assert_eq!(s390.network_config, Some(default_network_config("enc9")));
}

#[test]
fn http_500_is_retried_then_succeeds() {
    let f = start(
        Config::new("instance-id: late\n")
            .key("user.tag", "t")
            .rule("/1.0/meta-data", 500, "not ready", Some(3))
            .rule("/1.0/config/user.tag", 500, "not ready", Some(2)),
    );
    let d = f.lxd().fetch().unwrap();
    assert_eq!(d.instance_id, "late");
    assert_eq!(f.devlxd.count("/1.0/meta-data"), 4);
    assert_eq!(f.devlxd.count("/1.0/config/user.tag"), 3);
    assert_eq!(d.ds["config"]["user.tag"], "t");
    let retried = logs_with(&format!(
        "http://lxd/1.0/meta-data ({}): HTTP 500",
        f.socket()
    ));
    assert_eq!(retried.len(), 3, "{retried:?}");
}

#[test]
fn http_500_that_never_ends_is_an_error() {
    let f = start(Config::new("instance-id: x\n").rule("/1.0/meta-data", 500, "broken", None));
    let e = f
        .lxd()
        .with_retries(5, Duration::from_millis(1))
        .fetch()
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "LXD GET http://lxd/1.0/meta-data: HTTP 500 (got \"broken\")"
    );
    assert_eq!(f.devlxd.count("/1.0/meta-data"), 5);
}

#[test]
fn garbage_answers_are_clear_errors() {
    let cases = [
        (
            Config::new("instance-id: x\n").rule("/1.0/config", 200, "<html>oops</html>", None),
            "LXD GET http://lxd/1.0/config: expected JSON, found something else",
        ),
        (
            Config::new("instance-id: x\n").rule("/1.0/config", 200, "{\"user.a\": 1}", None),
            "LXD GET http://lxd/1.0/config: expected a JSON list of config routes",
        ),
        (
            Config::new("instance-id: x\n").devices(json!(["eth0"])),
            "LXD GET http://lxd/1.0/devices: expected a JSON object of devices",
        ),
        (
            Config::new("instance-id: x\n").rule("/1.0/devices", 200, "{nope", None),
            "LXD GET http://lxd/1.0/devices: expected JSON, found something else",
        ),
        (
            Config::new("- not\n- a mapping\n"),
            "LXD meta-data: not a YAML mapping",
        ),
        (
            Config::new("instance-id: [\n"),
            "LXD meta-data: not valid YAML",
        ),
        (
            Config::new("local-hostname: h\n"),
            "LXD meta-data: no instance-id",
        ),
        (
            Config::new("instance-id: x\n").rule("/1.0/meta-data", 404, "gone", None),
            "LXD GET http://lxd/1.0/meta-data: HTTP 404",
        ),
        (
            Config::new("instance-id: x\n").key("user.network-config", "[1, 2]"),
            "LXD network-config: not a YAML mapping",
        ),
    ];
    for (config, want) in cases {
        let f = start(config);
        let e = f.lxd().fetch().unwrap_err();
        assert!(matches!(e, Error::Datasource { .. }), "{e:?}");
        assert!(e.to_string().starts_with(want), "{e}");
    }
}

#[test]
fn devices_404_and_keys_that_vanish_are_tolerated() {
    let f = start(
        Config::new("instance-id: old-lxd\n")
            .key("user.gone", "x")
            .key("user.kept", "y")
            .rule("/1.0/config/user.gone", 404, "not found", None),
    );
    let d = f.lxd().fetch().unwrap();
    assert!(d.ds.get("devices").is_none());
    assert_eq!(d.ds["config"], json!({"user.kept": "y"}));
    assert!(f.devlxd.log().contains(&"GET /1.0/devices 404".to_owned()));
}

#[test]
fn socket_missing_is_not_found_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let lxd = Lxd::new(dir.path());
    let e = lxd.fetch().unwrap_err();
    let Error::NotFound { datasource, reason } = &e else {
        panic!("{e:?}");
    };
    assert_eq!(*datasource, SourceKind::Lxd);
    assert!(reason.contains("does not exist"), "{reason}");
    let sock = dir.path().join("dev/lxd/sock").display().to_string();
    let warned = logs_with(&sock);
    assert!(warned.iter().any(|l| l.starts_with("WARN")), "{warned:?}");

    // A regular file where the socket should be is not a socket either.
    std::fs::create_dir_all(dir.path().join("dev/lxd")).unwrap();
    std::fs::write(dir.path().join("dev/lxd/sock"), "").unwrap();
    let e = lxd.fetch().unwrap_err();
    assert!(e.to_string().contains("is not a socket"), "{e}");
    let cached = start(Config::new("instance-id: x\n"))
        .lxd()
        .fetch()
        .unwrap();
    assert!(matches!(
        lxd.check_instance_id(&cached),
        Err(Error::NotFound { .. })
    ));
}

#[test]
fn a_socket_that_does_not_speak_http_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sock");
    let listener = UnixListener::bind(&path).unwrap();
    let server = std::thread::spawn(move || {
        for _ in 0..1 {
            let (mut s, _) = listener.accept().unwrap();
            let mut line = String::new();
            let _ = BufReader::new(&s).read_line(&mut line);
            let _ = s.write_all(b"\x00\x01 not HTTP \xff\r\n\r\n");
        }
    });
    let e = Lxd::at_socket(&path).fetch().unwrap_err();
    assert!(
        e.to_string()
            .starts_with("LXD GET http://lxd/1.0/meta-data: not an HTTP answer"),
        "{e}"
    );
    server.join().unwrap();
}

#[test]
fn check_instance_id_is_cheap_and_honours_user_meta_data() {
    let f = start(full_config());
    let lxd = f.lxd();
    let d = lxd.fetch().unwrap();
    let before = f.devlxd.log().len();
    assert!(lxd.check_instance_id(&d).unwrap());
    // Two requests: meta-data and user.meta-data; no config listing, no devices.
    let log = f.devlxd.log();
    assert_eq!(
        log.get(before..).unwrap(),
        [
            "GET /1.0/meta-data 200",
            "GET /1.0/config/user.meta-data 200"
        ]
    );
    let mut other = d.clone();
    other.instance_id = "i-other".into();
    assert!(!lxd.check_instance_id(&other).unwrap());

    // user.meta-data naming another instance-id wins in both fetch and check.
    let g =
        start(Config::new("instance-id: lxd-own\n").key("user.meta-data", "instance-id: users\n"));
    let d = g.lxd().fetch().unwrap();
    assert_eq!(d.instance_id, "users");
    assert!(g.lxd().check_instance_id(&d).unwrap());
}

#[test]
fn detect_uses_the_snapshot() {
    use leasehook_core::source::Check;
    use leasehook_core::source::detect::{ReadOptions, check, read_snapshot};
    let f = start(Config::new("instance-id: x\n"));
    let snap = read_snapshot(&ReadOptions::new(&f.root).with_virt("lxc")).unwrap();
    assert_eq!(check(f.lxd().kind(), &snap).check, Check::Found);
    assert_eq!(f.lxd().kind(), SourceKind::Lxd);
}

#[test]
fn the_emulator_binary_serves_a_config_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("dev/lxd")).unwrap();
    let cfg = dir.path().join("devlxd.json");
    std::fs::write(
        &cfg,
        r##"{"meta-data": "instance-id: from-binary\n", "config": {"user.user-data": "#cloud-config\n"},
            "rules": [{"path": "/1.0/meta-data", "status": 500, "count": 1}]}"##,
    )
    .unwrap();
    let sock = dir.path().join("dev/lxd/sock");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_devlxd-emulator"));
    cmd.arg("--socket").arg(&sock).arg("--config").arg(&cfg);
    let (mut child, line) = start_first_line(cmd, "devlxd-emulator");
    assert_eq!(Path::new(&line), sock);
    let d = Lxd::new(dir.path()).fetch();
    child.kill().unwrap();
    child.wait().unwrap();
    let d = d.unwrap();
    assert_eq!(d.instance_id, "from-binary");
    assert_eq!(d.user_data.as_deref(), Some(&b"#cloud-config\n"[..]));

    let bad = Command::new(env!("CARGO_BIN_EXE_devlxd-emulator"))
        .arg("--socket")
        .arg(dir.path().join("other"))
        .arg("--config")
        .arg(dir.path().join("missing.json"))
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("missing.json"));
}

/// A fake root with the emulator on Incus's `dev/incus/sock`.
fn start_incus(config: Config) -> Fixture {
    let _ = logs_with("");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_owned();
    std::fs::create_dir_all(root.join("dev/incus")).unwrap();
    let devlxd = Devlxd::start(&root.join("dev/incus/sock"), config).unwrap();
    Fixture {
        _dir: dir,
        root,
        devlxd,
    }
}

#[test]
fn incus_socket_is_the_same_datasource_and_says_incus() {
    use leasehook_core::source::Check;
    use leasehook_core::source::detect::{ReadOptions, check, decide, read_snapshot};
    use leasehook_core::source::lxd::data::Flavour;
    let f = start_incus(full_config());
    let lxd = f.lxd();
    assert_eq!(lxd.socket(), f.root.join("dev/incus/sock"));
    assert_eq!(lxd.flavour(), Flavour::Incus);
    let d = lxd.fetch().unwrap();
    assert_eq!(d.datasource, SourceKind::Lxd);
    assert_eq!(d.instance_id, "i-87018aed");
    assert_eq!(
        (d.cloud_name.as_str(), d.platform.as_str()),
        ("lxd", "incus")
    );
    assert_eq!(
        d.subplatform,
        format!("Incus socket API v. 1.0 ({})", f.socket())
    );
    assert!(lxd.check_instance_id(&d).unwrap());
    let snap = read_snapshot(&ReadOptions::new(&f.root).with_virt("lxc")).unwrap();
    let v = check(SourceKind::Lxd, &snap);
    assert_eq!(v.check, Check::Found);
    assert!(
        v.reason.contains("dev/incus/sock is a socket (Incus)"),
        "{}",
        v.reason
    );
    assert_eq!(
        decide(&snap).unwrap().datasource_list,
        [SourceKind::Lxd, SourceKind::None]
    );
}

#[test]
fn with_both_sockets_incus_wins_and_without_incus_lxd_stays() {
    let f = start_incus(Config::new("instance-id: on-incus\n"));
    std::fs::create_dir_all(f.root.join("dev/lxd")).unwrap();
    let _old = Devlxd::start(
        &f.root.join("dev/lxd/sock"),
        Config::new("instance-id: on-lxd\n"),
    )
    .unwrap();
    assert_eq!(f.lxd().fetch().unwrap().instance_id, "on-incus");
    // A directory where Incus's socket should be: the LXD socket is used.
    std::fs::remove_file(f.root.join("dev/incus/sock")).unwrap();
    std::fs::create_dir(f.root.join("dev/incus/sock")).unwrap();
    let d = f.lxd().fetch().unwrap();
    assert_eq!(
        (d.instance_id.as_str(), d.platform.as_str()),
        ("on-lxd", "lxd")
    );
}

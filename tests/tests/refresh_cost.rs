// SPDX-License-Identifier: Apache-2.0
//! Issue 35, item 3: what one unchanged `leasehook refresh --iface eth1` costs,
//! in HTTP requests, on every cloud, measured with each cloud's emulator in the
//! two-NIC world (real dhclient for the NICs the cloud serves DHCP; Oracle's
//! secondary VNIC, which has none, configured by a first refresh).
//!
//! One table, [`CLOUDS`]: the cloud, its world, and the requests one unchanged
//! refresh of the secondary makes, token requests counted apart. On the clouds
//! whose metadata answers a NIC in one document (GCE, Azure, Oracle, `OpenStack`)
//! that is one request; EC2 and Alibaba read one key per request (the MAC's
//! folder), their tokens cached under `run/leasehook/` (no token request).
//! `docs/refresh.md` ("What a refresh costs") carries the same table.
//!
//! Compiled with the `netns` feature; needs root, isc-dhcp-client and dnsmasq,
//! and fails, never skips, without them.

#![cfg(feature = "netns")]
#![cfg(test)]

use std::path::PathBuf;
use std::process::Output;

use leasehook_tests::netns::{TempDir, leasehook_bin, show};
use leasehook_tests::world::{CloudDhcp, MetadataService, World, WorldOptions, wait_until};

/// How a cloud's world is built and what its unchanged refresh may cost.
struct Cloud {
    /// `LEASEHOOK_PROVIDER`, and the namespaces' tag.
    provider: &'static str,
    /// The emulator's log file below the world's folder.
    log: &'static str,
    /// Requests of one unchanged `refresh --iface eth1`, token requests included.
    requests: usize,
    /// Token requests among them (EC2's and Alibaba's `PUT /latest/api/token`).
    tokens: usize,
    /// The cloud serves the secondary no DHCP: a first refresh configures it.
    no_dhcp: bool,
}

/// The clouds, cheapest question first.
const CLOUDS: [Cloud; 6] = [
    Cloud {
        provider: "gce",
        log: "gce.log",
        requests: 1,
        tokens: 0,
        no_dhcp: false,
    },
    Cloud {
        provider: "azure",
        log: leasehook_tests::azure_emulator::LOG_FILE,
        requests: 1,
        tokens: 0,
        no_dhcp: false,
    },
    Cloud {
        provider: "oracle",
        log: leasehook_tests::oracle_emulator::LOG_FILE,
        requests: 1,
        tokens: 0,
        no_dhcp: true,
    },
    Cloud {
        provider: "openstack",
        log: leasehook_tests::openstack_emulator::LOG_NAME,
        requests: 1,
        tokens: 0,
        no_dhcp: false,
    },
    Cloud {
        provider: "ec2",
        log: "imds.log",
        requests: 6,
        tokens: 0,
        no_dhcp: false,
    },
    Cloud {
        provider: "aliyun",
        log: leasehook_tests::aliyun_emulator::LOG_NAME,
        requests: 4,
        tokens: 0,
        no_dhcp: false,
    },
];

/// The world of `cloud` (its emulator on its address, its DHCP options); the
/// returned folder holds what the emulator reads and lives as long as the world.
fn world(cloud: &Cloud) -> (World, TempDir) {
    let files = TempDir::new(&format!("pollcost-{}", cloud.provider));
    let on_169 = |cloud: &str, mut extra: Vec<String>| {
        let mut args = vec!["--bind".to_owned(), "169.254.169.254:80".to_owned()];
        args.append(&mut extra);
        Some(MetadataService {
            cloud: cloud.to_owned(),
            args,
            addresses: Vec::new(),
        })
    };
    let (dhcp, metadata) = match cloud.provider {
        "gce" => (CloudDhcp::Gce, on_169("gce", Vec::new())),
        "azure" => (
            CloudDhcp::Azure,
            on_169(
                "azure",
                vec!["--allow-source".to_owned(), "10.98.0.10".to_owned()],
            ),
        ),
        "oracle" => (CloudDhcp::Oracle, on_169("oracle", Vec::new())),
        "openstack" => (
            CloudDhcp::OpenStack,
            Some(leasehook_tests::openstack_emulator::service(Vec::new())),
        ),
        "aliyun" => {
            let sc = files.file("scenario.json", "{}");
            (
                CloudDhcp::Aliyun,
                Some(leasehook_tests::aliyun_emulator::service(vec![
                    "--scenario".to_owned(),
                    format!("@{}", sc.display()),
                ])),
            )
        }
        _ => (CloudDhcp::Ec2, None),
    };
    let opts = WorldOptions {
        dhcp,
        metadata,
        extra_hook_env: vec![("LEASEHOOK_PROVIDER".to_owned(), cloud.provider.to_owned())],
        ..WorldOptions::default()
    };
    let tag = format!("pc{}", cloud.provider);
    let w = if matches!(cloud.provider, "gce" | "azure") {
        // Debian's option-121 exit hook beside leasehook's, as on those images:
        // the primary's route to the metadata service comes from it.
        World::with_option_121_hook(&tag, &opts)
    } else {
        World::new(&tag, &opts)
    };
    (w, files)
}

/// `leasehook ARGS` inside the instance with the hooks' environment.
fn leasehook(w: &World, args: &[&str]) -> Output {
    w.leasehook(args, &[])
}

/// The emulator's log: `(method, path)` per request (every emulator's line
/// starts `SECONDS PEER METHOD PATH`).
fn requests(w: &World, cloud: &Cloud) -> Vec<(String, String)> {
    let path: PathBuf = w.dir.0.join(cloud.log);
    std::fs::read_to_string(&path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace().skip(2);
            Some((f.next()?.to_owned(), f.next()?.to_owned()))
        })
        .collect()
}

fn is_token(method: &str, path: &str) -> bool {
    method == "PUT" && path.contains("/api/token")
}

/// The world of `cloud` with both NICs routed and recorded; the requests of one
/// unchanged `refresh --iface eth1` after a first one.
fn unchanged_refresh(cloud: &Cloud) -> (World, TempDir, Vec<(String, String)>) {
    let (mut w, files) = world(cloud);
    w.bind("eth0", false);
    if !cloud.no_dhcp {
        w.bind("eth1", false);
    }
    let recorded = || w.root.join("run/leasehook/iface/eth1.json").exists();
    if cloud.no_dhcp {
        let o = leasehook(&w, &["refresh", "--iface", "eth1"]);
        assert!(o.status.success(), "{}", show(&o));
    }
    assert!(
        wait_until(std::time::Duration::from_secs(20), || recorded()
            && !w.worker_pending("eth1")),
        "{}: eth1 not recorded\n{}\n{}",
        cloud.provider,
        w.pbr_report(),
        w.log("eth1", false)
    );
    // A first refresh settles whatever the event left (a refresh stamp, a known
    // incomplete key); the second is the one measured.
    let o = leasehook(&w, &["refresh", "--iface", "eth1"]);
    assert!(o.status.success(), "{}", show(&o));
    let before = requests(&w, cloud).len();
    let o = leasehook(&w, &["refresh", "-v", "--iface", "eth1"]);
    assert!(o.status.success(), "{}", show(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("eth1: 0 change(s)"),
        "{}: not an unchanged refresh: {}",
        cloud.provider,
        show(&o)
    );
    let made = requests(&w, cloud).split_off(before);
    (w, files, made)
}

/// The table: each cloud's unchanged refresh of the secondary costs what
/// [`CLOUDS`] says, token requests included in the count and named apart. Every
/// cloud is measured before any is judged, so one failure shows the whole table.
#[test]
fn an_unchanged_refresh_of_one_nic_costs_what_the_table_says() {
    let mut seen = Vec::new();
    let mut wrong = Vec::new();
    for cloud in &CLOUDS {
        let (_w, _files, made) = unchanged_refresh(cloud);
        let tokens = made.iter().filter(|(m, p)| is_token(m, p)).count();
        let line = format!(
            "{}: {} request(s), {} of them token: {:?}",
            cloud.provider,
            made.len(),
            tokens,
            made
        );
        if (made.len(), tokens) != (cloud.requests, cloud.tokens) {
            wrong.push(format!(
                "{} (want {} request(s), {} token)",
                line, cloud.requests, cloud.tokens
            ));
        }
        seen.push(line);
    }
    assert!(
        wrong.is_empty(),
        "not what the table says:\n{}\n--- every cloud\n{}",
        wrong.join("\n"),
        seen.join("\n")
    );
    // The clouds whose one document answers every NIC: one request each.
    for c in CLOUDS
        .iter()
        .filter(|c| c.provider != "ec2" && c.provider != "aliyun")
    {
        assert_eq!(c.requests, 1, "{}", c.provider);
    }
}

/// The secondary NICs of the Azure pacing test: eth1 (dhclient) and eth2..eth5
/// (addresses by hand, their BOUND events run as dhclient would).
const PACED_NICS: [u8; 5] = [1, 2, 3, 4, 5];

/// The Azure world with eth2..eth5 beside eth1, each a NIC of the VM's metadata.
fn azure_world_of_six_nics() -> World {
    use leasehook_tests::azure_emulator::{interface, world_instance};
    let mut instance = world_instance();
    for n in 2..=5u8 {
        let nic = interface(
            &leasehook_tests::world::static_nic_mac(n),
            &[&format!("10.98.{n}.20")],
            &format!("10.98.{n}.0"),
            24,
        );
        instance["network"]["interface"]
            .as_array_mut()
            .unwrap()
            .push(nic);
    }
    let opts = WorldOptions {
        dhcp: CloudDhcp::Azure,
        metadata: Some(MetadataService {
            cloud: "azure".to_owned(),
            args: vec![
                "--bind".to_owned(),
                "169.254.169.254:80".to_owned(),
                "--allow-source".to_owned(),
                "10.98.0.10".to_owned(),
                "--instance".to_owned(),
                instance.to_string(),
            ],
            addresses: Vec::new(),
        }),
        extra_hook_env: vec![
            ("LEASEHOOK_PROVIDER".to_owned(), "azure".to_owned()),
            // Ten processes, paced 250 ms apart, each within its budget.
            ("LEASEHOOK_IMDS_SYNC_BUDGET_S".to_owned(), "10".to_owned()),
        ],
        ..WorldOptions::default()
    };
    let mut w = World::with_option_121_hook("pcazpace", &opts);
    w.bind("eth0", false);
    w.bind("eth1", false);
    for n in 2..=5 {
        w.add_static_nic(n);
    }
    let recorded = |n: u8| {
        w.root
            .join(format!("run/leasehook/iface/eth{n}.json"))
            .exists()
    };
    assert!(
        wait_until(std::time::Duration::from_secs(30), || PACED_NICS
            .iter()
            .all(|n| recorded(*n))),
        "not every NIC recorded\n{}",
        w.pbr_report()
    );
    w
}

/// A dhclient RENEW of `eth<n>` through the shim, as dhclient runs it (not
/// waited for).
fn renew(w: &World, n: u8) -> std::process::Child {
    let mut cmd = w.inst.command(
        leasehook_tests::client::Client::Dhclient
            .shim_path()
            .to_str()
            .unwrap(),
    );
    cmd.env_clear()
        .envs(w.hook_env().iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("reason", "RENEW")
        .env("interface", format!("eth{n}"))
        .env("new_ip_address", format!("10.98.{n}.20"))
        .env("new_subnet_mask", "255.255.255.0")
        .env("new_routers", format!("10.98.{n}.1"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd.spawn().unwrap()
}

/// Azure allows 5 requests a second per VM, and the emulator answers 429 past
/// that. Ten leasehook processes at once, a `refresh --iface` and a RENEW hook
/// for each of five secondaries (each its own interface lock, so nothing but the
/// machine-wide pace file keeps them apart): every request is answered, none
/// gets 429, and every refresh checks its NIC. Seen failing (429s in the log)
/// with the pacing's spacing set to zero.
#[test]
fn concurrent_refreshes_and_hooks_never_exceed_azures_five_a_second() {
    let w = azure_world_of_six_nics();
    let log = w.dir.0.join(leasehook_tests::azure_emulator::LOG_FILE);
    let before = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .count();
    let mut children = Vec::new();
    for n in PACED_NICS {
        let mut cmd = w.inst.command(leasehook_bin().to_str().unwrap());
        cmd.envs(w.hook_env().iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .args(["refresh", "--iface", &format!("eth{n}")])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        children.push(("refresh", n, cmd.spawn().unwrap()));
        children.push(("renew", n, renew(&w, n)));
    }
    for (what, n, child) in children {
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{what} eth{n}: {}", show(&o));
        if what == "refresh" {
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(!err.contains("not checked"), "{what} eth{n}: {}", show(&o));
        }
    }
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let made: Vec<&str> = text.lines().skip(before).collect();
    // Each process asked (a RENEW whose answer agrees at once asks once).
    assert!(made.len() >= PACED_NICS.len() * 2, "{made:#?}");
    let limited: Vec<&&str> = made.iter().filter(|l| l.ends_with(" 429")).collect();
    assert!(
        limited.is_empty(),
        "{} of {} requests rate-limited:\n{}",
        limited.len(),
        made.len(),
        made.join("\n")
    );
    assert!(made.iter().all(|l| l.ends_with(" 200")), "{made:#?}");
}

// SPDX-License-Identifier: Apache-2.0
//! `OpenStack` end to end: the `OpenStack` provider against the metadata service
//! emulator (`leasehook_tests::openstack_emulator`) and against a config drive.
//!
//! * `in_process`: the provider's client, wait and datasource against the
//!   emulator on loopback: one `network_data.json` per round, the hot-plugged
//!   port's late link, Neutron's rate limit (429) retried and never read as
//!   empty, the faults, instance-data v1 (always compiled).
//! * `drive` and `world` (the `netns` feature: root, mount(8), genisoimage): a
//!   config drive image labelled `config-2` below the root, read read-only with
//!   the metadata service down; the two-NIC world with the emulator on
//!   169.254.169.254:80 (Neutron's 10 requests per 10 s on) and
//!   `LEASEHOOK_PROVIDER=openstack`, real dhclient and real systemd-networkd:
//!   the secondary's table holds the lease's default route, its subnet and the
//!   extra route `network_data.json` names, traffic from it passes the router's
//!   source check, RELEASE removes everything; then the same from a config drive
//!   with no metadata service at all; and a NIC on a static network (no DHCP)
//!   configured by `leasehook refresh` from the metadata (its address owned, or
//!   left alone when another tool put it there first), while a link listed
//!   with the all-zero MAC matches no link (`lo` is no NIC; issue 30). Fails,
//!   never skips, without its prerequisites.

#![cfg(test)]
#![allow(clippy::too_many_lines)]

mod in_process {
    use std::net::IpAddr;
    use std::time::Duration;

    use leasehook_core::model::Reason;
    use leasehook_core::source::SourceKind;
    use leasehook_core::source::openstack::OpenStackProvider;
    use leasehook_core::source::provider::{
        Identity as _, NicEvent, Outcome, Provider, SystemClock,
    };
    use leasehook_tests::clouds::{
        assert_hot_plug_waited, assert_waits_fail, budget as policy, eth1_event, wait_faults,
    };
    use leasehook_tests::openstack_emulator::{
        Config, INSTANCE_ID, OpenStackEmulator, RateLimit, Scenario, world_tree,
    };
    use leasehook_tests::world::MAC1;
    use serde_json::json;

    const NETWORK_DATA: &str = "/openstack/latest/network_data.json";

    fn start_with(scenario: serde_json::Value, rate_limit: Option<RateLimit>) -> OpenStackEmulator {
        let mut c = Config::new(world_tree());
        c.scenario = Scenario::from_value(scenario).unwrap();
        c.rate_limit = rate_limit;
        OpenStackEmulator::start("127.0.0.1:0".parse().unwrap(), c).unwrap()
    }

    fn start(scenario: serde_json::Value) -> OpenStackEmulator {
        start_with(scenario, None)
    }

    fn event() -> NicEvent {
        eth1_event(24)
    }

    /// A provider against `url` with an empty root (no config drive).
    fn provider(url: &str) -> (tempfile::TempDir, OpenStackProvider) {
        let root = tempfile::tempdir().unwrap();
        let p = OpenStackProvider::try_new(root.path(), Some(url)).unwrap();
        (root, p)
    }

    fn wait(emu: &OpenStackEmulator, secs: u64) -> Outcome {
        let (_root, p) = provider(&emu.base_url());
        p.wait_for_nic(&event(), &policy(secs), &SystemClock)
    }

    #[test]
    fn one_request_when_the_metadata_agrees_and_the_routes_come_with_it() {
        let emu = start(json!({}));
        let Outcome::Complete(net) = wait(&emu, 10) else {
            panic!("{:?}", emu.log())
        };
        let nic = net.nic(MAC1.parse().unwrap()).unwrap();
        // Nova lists no address for a DHCP network: the lease's.
        assert_eq!(
            nic.local_ipv4s,
            ["10.98.1.20".parse::<std::net::Ipv4Addr>().unwrap()]
        );
        assert_eq!(nic.subnet_ipv4_cidr_blocks[0].to_string(), "10.98.1.0/24");
        let routes: Vec<String> = nic
            .routes
            .iter()
            .map(|r| format!("{} via {}", r.to, r.via))
            .collect();
        assert_eq!(
            routes,
            ["0.0.0.0/0 via 10.98.1.1", "198.51.100.0/24 via 10.98.1.1"]
        );
        let log = emu.log();
        assert_eq!(log.len(), 1, "{log:?}");
        assert_eq!(log[0].path, NETWORK_DATA);
        assert_eq!(log[0].status, "200");
    }

    #[test]
    fn the_hot_plugged_port_is_waited_for_one_request_a_round() {
        assert_hot_plug_waited(
            |after| json!({"appear": [{"link": 1, "after": after}]}),
            start,
            wait,
            |emu| (emu.count("network_data.json"), emu.log().len()),
        );
    }

    #[test]
    fn neutrons_rate_limit_is_retried_and_never_read_as_empty() {
        // Two requests a second: the wait's third and fourth requests get 429,
        // and the one after the window has slid answers.
        let emu = start_with(
            json!({"appear": [{"link": 1, "after": 0.5}]}),
            Some(RateLimit {
                count: 2,
                window: Duration::from_secs(1),
            }),
        );
        let out = wait(&emu, 10);
        assert!(
            matches!(out, Outcome::Complete(_)),
            "{out:?}: {:?}",
            emu.log()
        );
        let log = emu.log();
        assert!(log.iter().any(|e| e.status == "429"), "{log:?}");
        assert_eq!(log.last().unwrap().status, "200", "{log:?}");
        // Neutron's defaults: one wait of 12 s never goes past them.
        let emu = start_with(
            json!({"appear": [{"link": 1, "after": 60.0}]}),
            Some(RateLimit::NEUTRON),
        );
        let out = wait(&emu, 12);
        assert!(matches!(out, Outcome::Partial { .. }), "{out:?}");
        let log = emu.log();
        assert!(log.iter().all(|e| e.status == "200"), "{log:?}");
        assert!(log.len() <= 11, "{log:?}");
    }

    /// Each fault row: the wait fails and never reads the fault as an empty
    /// answer.
    #[test]
    fn faults_fail_the_wait_and_are_never_empty() {
        let mut faults = wait_faults("/openstack", NETWORK_DATA);
        let rule = json!({"rules": [{"path": "/openstack", "status": 500}]});
        faults.push(("500", rule, true));
        assert_waits_fail(
            faults,
            start,
            wait,
            |emu| emu.log().len(),
            |url| {
                let (_root, p) = provider(url);
                p.wait_for_nic(&event(), &policy(1), &SystemClock)
            },
        );
    }

    #[test]
    fn the_datasource_reads_the_identity_as_cloud_init() {
        let emu = start(json!({}));
        let (_root, p) = provider(&emu.base_url());
        let ds = p.datasource(policy(5)).unwrap();
        assert_eq!(ds.kind(), SourceKind::OpenStack);
        let d = ds.fetch().unwrap();
        assert_eq!(d.instance_id, INSTANCE_ID);
        assert_eq!(d.availability_zone.as_deref(), Some("nova"));
        assert_eq!(d.local_hostname.as_deref(), Some("leasehook-test"));
        assert_eq!(d.user_data.as_deref(), Some(&b"#cloud-config\n{}\n"[..]));
        assert!(ds.check_instance_id(&d).unwrap());
        let (doc, public) = leasehook_tests::clouds::fetched_instance_data(&d);
        let v1 = &doc["v1"];
        assert_eq!(v1["cloud_name"], "openstack", "{doc:#}");
        assert_eq!(v1["platform"], "openstack");
        assert_eq!(v1["subplatform"], format!("metadata ({})", emu.base_url()));
        assert_eq!(v1["availability_zone"], "nova");
        assert_eq!(v1["instance_id"], INSTANCE_ID);
        assert_eq!(v1["local_hostname"], "leasehook-test");
        assert!(!String::from_utf8_lossy(&public).contains("random_seed"));
        // meta_data.json, network_data.json, user_data, the check.
        let log = emu.log();
        assert!(log.iter().all(|e| e.status == "200"), "{log:?}");
        assert_eq!(log.len(), 4, "{log:?}");
    }

    #[test]
    fn static_networks_are_the_nics_without_dhcp() {
        let mut tree = world_tree();
        tree["network_data"]["networks"][1] = json!({
            "id": "network1", "type": "ipv4", "link": "tap0b0b0b0b-01",
            "ip_address": "10.98.1.20", "netmask": "255.255.255.0",
            "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.98.1.1"}]});
        let emu =
            OpenStackEmulator::start("127.0.0.1:0".parse().unwrap(), Config::new(tree)).unwrap();
        let (_root, p) = provider(&emu.base_url());
        let u = p.unleased(&policy(5), &SystemClock).unwrap().unwrap();
        assert_eq!(u.nics.len(), 1, "{u:?}");
        assert_eq!(u.nics[0].mac, MAC1.parse().unwrap());
        assert_eq!(u.nics[0].leases[0].reason, Reason::Metadata);
        assert_eq!(u.nics[0].leases[0].prefix_len, 24);
        assert_eq!(
            u.nics[0].leases[0].routers,
            ["10.98.1.1".parse::<IpAddr>().unwrap()]
        );
        assert_eq!(emu.log().len(), 1);
    }
}

/// A config drive image below a fake root, mounted read-only by the provider.
#[cfg(feature = "netns")]
mod drive {
    use std::net::IpAddr;
    use std::path::Path;
    use std::time::Duration;

    use leasehook_core::model::{Family, IfName, Lease, Missing, Reason};
    use leasehook_core::source::SourceKind;
    use leasehook_core::source::openstack::OpenStackProvider;
    use leasehook_core::source::provider::{
        Identity as _, NicEvent, Outcome, Provider, SystemClock, WaitPolicy,
    };
    use leasehook_tests::configdrive::{self, Helper};
    use leasehook_tests::openstack_emulator::{INSTANCE_ID, make_config_drive, world_tree};
    use leasehook_tests::world::MAC1;

    fn event(mac: &str) -> NicEvent {
        let address: IpAddr = "10.98.1.20".parse().unwrap();
        NicEvent::try_new(
            IfName::try_new("eth1").unwrap(),
            mac.parse().unwrap(),
            vec![Lease {
                family: Family::V4,
                address,
                prefix_len: 24,
                routers: vec!["10.98.1.1".parse().unwrap()],
                reason: Reason::Bound,
            }],
        )
        .unwrap()
    }

    /// A root holding `dev/disk/by-label/<label>` → an image of the world's tree.
    fn root_with_drive(label: &str) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let image = root.path().join("config-drive.iso");
        make_config_drive(&world_tree(), label, &image);
        let by = root.path().join("dev/disk/by-label");
        std::fs::create_dir_all(&by).unwrap();
        std::os::unix::fs::symlink(&image, by.join(label)).unwrap();
        root
    }

    fn mounted_below(root: &Path) -> Vec<String> {
        // This thread's namespace (configdrive::enter).
        let mounts = std::fs::read_to_string("/proc/thread-self/mounts").unwrap();
        let root = root.display().to_string();
        mounts
            .lines()
            .filter(|l| l.contains(&root))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn the_drive_is_read_read_only_and_the_service_is_never_asked() {
        let ns = configdrive::enter(Helper::Fuse);
        for label in ["config-2", "CONFIG-2"] {
            let root = root_with_drive(label);
            // The metadata service: a port nothing listens on.
            let port = {
                let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                l.local_addr().unwrap().port()
            };
            let p =
                OpenStackProvider::try_new(root.path(), Some(&format!("http://127.0.0.1:{port}")))
                    .unwrap();
            let policy = WaitPolicy::default().with_budget(Duration::from_secs(10));
            let t = std::time::Instant::now();
            let out = p.wait_for_nic(&event(MAC1), &policy, &SystemClock);
            let Outcome::Complete(net) = out else {
                panic!("{label}: {out:?}")
            };
            let nic = net.nic(MAC1.parse().unwrap()).unwrap();
            assert_eq!(nic.routes.len(), 2, "{nic:?}");
            // A port the drive does not list: Partial at once, never a wait.
            let out = p.wait_for_nic(&event("02:00:00:00:00:09"), &policy, &SystemClock);
            let Outcome::Partial { missing, .. } = out else {
                panic!("{out:?}")
            };
            assert_eq!(missing, [Missing::MacFolder]);
            assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
            // The boot stage's datasource is the drive's.
            let ds = p.datasource(policy.clone()).unwrap();
            assert_eq!(ds.kind(), SourceKind::ConfigDrive);
            let d = ds.fetch().unwrap();
            assert_eq!(d.instance_id, INSTANCE_ID);
            assert_eq!(d.cloud_name, "configdrive");
            assert_eq!(d.platform, "openstack");
            assert!(
                d.subplatform.starts_with("config-disk ("),
                "{}",
                d.subplatform
            );
            assert_eq!(d.user_data.as_deref(), Some(&b"#cloud-config\n{}\n"[..]));
            assert!(ds.check_instance_id(&d).unwrap());
            // Nothing left mounted, no mount point left behind.
            assert!(
                mounted_below(root.path()).is_empty(),
                "{:?}",
                mounted_below(root.path())
            );
            let points = root.path().join("run/leasehook/configdrive");
            assert_eq!(std::fs::read_dir(&points).unwrap().count(), 0);
            assert!(ns.mounts_holding("fuseiso").is_empty());
        }
    }

    /// An ext2 file system labelled `config-2` (issue 30, item 1): no config
    /// drive (cloud-init's `ConfigDrive` takes iso9660 and vfat only); the service
    /// is asked, and nothing is mounted.
    #[test]
    fn an_ext2_drive_is_no_config_drive_and_the_service_is_asked() {
        let root = tempfile::tempdir().unwrap();
        let image = root.path().join("ext2.img");
        let src = root.path().join("src/openstack/latest");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(
            src.join("network_data.json"),
            world_tree()["network_data"].to_string(),
        )
        .unwrap();
        let out = std::process::Command::new("/usr/sbin/mke2fs")
            .args(["-q", "-F", "-t", "ext2", "-L", "config-2", "-d"])
            .arg(root.path().join("src"))
            .arg(&image)
            .arg("1024")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let by = root.path().join("dev/disk/by-label");
        std::fs::create_dir_all(&by).unwrap();
        std::os::unix::fs::symlink(&image, by.join("config-2")).unwrap();
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let p = OpenStackProvider::try_new(root.path(), Some(&format!("http://127.0.0.1:{port}")))
            .unwrap();
        assert!(p.drive(Duration::from_secs(5)).is_none());
        let out = p.wait_for_nic(
            &event(MAC1),
            &WaitPolicy::default().with_budget(Duration::from_millis(300)),
            &SystemClock,
        );
        // The service (nothing listens): a connection error, not the drive's files.
        let Outcome::Failed(e) = out else {
            panic!("{out:?}")
        };
        assert!(e.to_string().contains("127.0.0.1"), "{e}");
        assert!(mounted_below(root.path()).is_empty());
        assert!(!root.path().join("run/leasehook/configdrive").exists());
    }

    /// A drive whose mount(8) never returns (issue 30, item 6): the read ends at
    /// the budget with a clear error, nothing stays mounted, no folder is left;
    /// a mount left by an earlier run that was killed is detached and removed.
    #[test]
    fn a_stalled_drive_is_bounded_by_the_budget_and_leftovers_are_swept() {
        let root = root_with_drive("config-2");
        {
            let _ns = configdrive::enter(Helper::Stalls);
            let p = OpenStackProvider::try_new(root.path(), None).unwrap();
            let policy = WaitPolicy::default().with_budget(Duration::from_secs(1));
            let t = std::time::Instant::now();
            let out = p.wait_for_nic(&event(MAC1), &policy, &SystemClock);
            let took = t.elapsed();
            let Outcome::Failed(e) = out else {
                panic!("{out:?}")
            };
            assert!(
                e.to_string().contains("did not finish within the budget"),
                "{e}"
            );
            assert!(took < Duration::from_secs(3), "{took:?}");
            let points = root.path().join("run/leasehook/configdrive");
            assert_eq!(std::fs::read_dir(&points).unwrap().count(), 0);
        }
        let ns = configdrive::enter(Helper::Fuse);
        // A run killed while the drive was mounted: its point, its process gone.
        let left = root.path().join("run/leasehook/configdrive/999999999-0");
        std::fs::create_dir_all(&left).unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "iso9660", "-o", "ro"])
            .arg(root.path().join("config-drive.iso"))
            .arg(&left)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(mounted_below(root.path()).len(), 1);
        let p = OpenStackProvider::try_new(root.path(), None).unwrap();
        let out = p.wait_for_nic(
            &event(MAC1),
            &WaitPolicy::default().with_budget(Duration::from_secs(5)),
            &SystemClock,
        );
        assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
        assert!(
            mounted_below(root.path()).is_empty(),
            "{:?}",
            mounted_below(root.path())
        );
        assert!(!left.exists());
        assert!(ns.mounts_holding("fuseiso").is_empty());
    }

    #[test]
    fn a_drive_that_does_not_mount_fails_and_changes_nothing() {
        let root = tempfile::tempdir().unwrap();
        let by = root.path().join("dev/disk/by-label");
        std::fs::create_dir_all(&by).unwrap();
        // ISO 9660's volume descriptor and nothing else: identified, unmountable.
        let mut bytes = vec![0u8; 64 * 1024];
        bytes[32769..32774].copy_from_slice(b"CD001");
        std::fs::write(by.join("config-2"), bytes).unwrap();
        let p = OpenStackProvider::try_new(root.path(), None).unwrap();
        let out = p.wait_for_nic(&event(MAC1), &WaitPolicy::default(), &SystemClock);
        let Outcome::Failed(e) = out else {
            panic!("{out:?}")
        };
        assert!(e.to_string().contains("mount read-only"), "{e}");
        assert!(mounted_below(root.path()).is_empty());
    }
}

#[cfg(feature = "netns")]
mod world {
    use leasehook_tests::clouds::Cloud;
    use std::time::Duration;

    use std::process::Output;

    use leasehook_core::source::aliyun::nic::device_slot;
    use leasehook_tests::openstack_emulator::{
        LOG_NAME, LogEntry, make_config_drive, read_log, service, world_tree,
    };
    use leasehook_tests::world::{CloudDhcp, MAC1, World, WorldOptions, wait_until};
    use serde_json::json;

    fn table() -> u32 {
        10_000 + device_slot(MAC1.parse().unwrap())
    }

    fn rules() -> Vec<String> {
        let t = table();
        vec![format!("{t} from 10.98.1.20 lookup {t} proto 176")]
    }

    fn routes() -> Vec<String> {
        let t = table();
        vec![
            format!("default via 10.98.1.1 dev eth1 scope - src - table {t} proto 176"),
            format!("10.98.1.0/24 via - dev eth1 scope link src 10.98.1.20 table {t} proto 176"),
            format!("198.51.100.0/24 via 10.98.1.1 dev eth1 scope - src - table {t} proto 176"),
        ]
    }

    /// The world with the emulator (Neutron's rate limit on) or, with `drive`,
    /// no metadata service at all and a config drive below the root.
    fn options(drive: bool) -> WorldOptions {
        let mut opts = Cloud::OpenStack.world(vec!["--rate-limit".to_owned(), "10/10".to_owned()]);
        if drive {
            opts.metadata = None;
        }
        WorldOptions { tree: None, ..opts }
    }

    fn world(tag: &str, drive: bool) -> World {
        let w = World::new(tag, &options(drive));
        if drive {
            let image = w.dir.0.join("config-drive.iso");
            make_config_drive(&world_tree(), "config-2", &image);
            let by = w.root.join("dev/disk/by-label");
            std::fs::create_dir_all(&by).unwrap();
            std::os::unix::fs::symlink(&image, by.join("config-2")).unwrap();
        }
        w
    }

    fn requests(w: &World) -> Vec<LogEntry> {
        read_log(&w.dir.0.join(LOG_NAME))
    }

    fn report(w: &World) -> String {
        format!(
            "{}\n--- eth1\n{}\n--- {LOG_NAME}\n{}",
            w.pbr_report(),
            w.log("eth1", false),
            std::fs::read_to_string(w.dir.0.join(LOG_NAME)).unwrap_or_default()
        )
    }

    fn installed(w: &World) -> bool {
        let (have_rules, have_routes) = (w.our_rules(), w.our_routes());
        rules().iter().all(|r| have_rules.contains(r))
            && routes().iter().all(|r| have_routes.contains(r))
    }

    fn wait_installed(w: &World, when: &str) {
        assert!(
            wait_until(Duration::from_secs(40), || installed(w)),
            "no OpenStack policy routing for eth1 {when}:\n{}",
            report(w)
        );
    }

    fn assert_traffic(w: &World, sources: &[&str]) {
        w.assert_echoes(sources, || report(w));
    }

    /// Exactly leasehook's rules and routes for eth1, in eth1's table only.
    fn assert_exact(w: &World) {
        let mut have = w.our_routes();
        have.sort();
        let mut want = routes();
        want.sort();
        assert_eq!(have, want, "{}", report(w));
        assert_eq!(w.our_rules(), rules(), "{}", report(w));
    }

    #[test]
    fn dhclient_routes_from_network_data_go_into_the_secondarys_table() {
        let mut w = world("os-apply", false);
        w.bind("eth0", false);
        w.bind("eth1", false);
        wait_installed(&w, "after the lease");
        assert_exact(&w);
        assert_traffic(&w, &["10.98.1.20", "10.98.0.10"]);
        // One network_data.json per event, under Neutron's limit.
        let reqs = requests(&w);
        assert!(reqs.iter().all(|e| e.status == "200"), "{reqs:?}");
        assert_eq!(
            reqs.iter()
                .filter(|e| e.path == "/openstack/latest/network_data.json")
                .count(),
            2,
            "{reqs:?}"
        );
        // The VLAN on eth1 is skipped, and said so.
        assert!(
            w.log("eth1", false).contains("skipped link vlan101"),
            "{}",
            report(&w)
        );
        // RELEASE removes everything of leasehook's for eth1.
        w.dhclient_end("eth1", false, true);
        assert!(
            wait_until(Duration::from_secs(20), || w.our_rules().is_empty()
                && w.our_routes().is_empty()),
            "RELEASE left policy routing:\n{}",
            report(&w)
        );
        assert!(!w.root.join("run/leasehook/iface/eth1.json").exists());
    }

    #[test]
    fn networkd_leases_get_the_same_table_and_routes() {
        let mut w = world("os-nd", false);
        w.start_networkd(true);
        wait_installed(&w, "from networkd's lease");
        assert_exact(&w);
        assert_traffic(&w, &["10.98.1.20"]);
        let reqs = requests(&w);
        assert!(reqs.iter().all(|e| e.status == "200"), "{reqs:?}");
    }

    #[test]
    fn dhclient_with_a_config_drive_and_no_metadata_service() {
        // mount -t iso9660 through the test's FUSE helper (tests/src/configdrive.rs);
        // dhclient and its hooks inherit this thread's mount namespace.
        let _ns = leasehook_tests::configdrive::enter(leasehook_tests::configdrive::Helper::Fuse);
        let mut w = world("os-drive", true);
        w.bind("eth0", false);
        w.bind("eth1", false);
        wait_installed(&w, "from the config drive");
        assert_exact(&w);
        assert_traffic(&w, &["10.98.1.20", "10.98.0.10"]);
        let log = w.log("eth1", false);
        assert!(
            log.contains("reading network_data.json from the config drive")
                && log.contains("the config drive's network_data.json agrees with the lease"),
            "{}",
            report(&w)
        );
        // No metadata service was ever there to ask.
        assert!(!w.dir.0.join(LOG_NAME).exists());
        // Each read unmounted the drive and removed its mount point.
        let points = w.root.join("run/leasehook/configdrive");
        assert_eq!(
            std::fs::read_dir(&points).map_or(0, Iterator::count),
            0,
            "{}",
            report(&w)
        );
        let mounts = std::fs::read_to_string("/proc/thread-self/mounts").unwrap();
        assert!(!mounts.contains(&w.root.display().to_string()), "{mounts}");
    }

    fn leasehook(w: &World, args: &[&str]) -> Output {
        w.leasehook(args, &[])
    }

    fn refresh(w: &World) -> String {
        w.leasehook_ok(&["refresh", "-v"], &[], || report(w))
    }

    /// The world's tree with eth1 on a static network (Nova's `ipv4` type: no
    /// DHCP): its address, netmask and default gateway in `network_data.json`.
    fn static_tree() -> serde_json::Value {
        let mut tree = world_tree();
        tree["network_data"]["networks"][1] = json!({
        "id": "network1", "type": "ipv4", "link": "tap0b0b0b0b-01",
        "ip_address": "10.98.1.20", "netmask": "255.255.255.0",
        "routes": [
            {"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.98.1.1"},
            {"network": "198.51.100.0", "netmask": "255.255.255.0", "gateway": "10.98.1.1"}
        ]});
        tree
    }

    /// The world with eth1 on a static network (Nova's `ipv4` type: no DHCP):
    /// its address, netmask and default gateway in `network_data.json`.
    fn static_world(tag: &str) -> World {
        let tree = static_tree();
        let opts = WorldOptions {
            tree: None,
            dhcp: CloudDhcp::OpenStackStatic,
            metadata: Some(service(vec!["--tree".to_owned(), tree.to_string()])),
            extra_hook_env: vec![("LEASEHOOK_PROVIDER".to_owned(), "openstack".to_owned())],
            ..WorldOptions::default()
        };
        World::new(tag, &opts)
    }

    /// Issue 30, item 1: a link listed with the all-zero MAC, on a static
    /// network of 10.0.0.0/8, beside eth1's static network. `refresh` matches it
    /// to no link (`lo` is no NIC): nothing on `lo`, the gateway and another
    /// subnet's host still leave by eth0, and eth1 is configured as ever.
    #[test]
    fn a_link_whose_mac_is_all_zeros_is_nobodys() {
        let mut tree = static_tree();
        let nd = &mut tree["network_data"];
        nd["links"].as_array_mut().unwrap().push(json!(
            {"id": "tapzero", "type": "ovs", "ethernet_mac_address": "00:00:00:00:00:00"}
        ));
        nd["networks"].as_array_mut().unwrap().push(json!(
            {"id": "networkz", "type": "ipv4", "link": "tapzero",
             "ip_address": "10.200.0.5", "netmask": "255.0.0.0",
             "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.0.0.1"}]}
        ));
        let opts = WorldOptions {
            tree: None,
            metadata: Some(service(vec!["--tree".to_owned(), tree.to_string()])),
            extra_hook_env: vec![("LEASEHOOK_PROVIDER".to_owned(), "openstack".to_owned())],
            ..WorldOptions::default()
        };
        let mut w = World::new("os-zero", &opts);
        w.bind("eth0", false);
        let out = refresh(&w);
        assert!(
            out.contains("00:00:00:00:00:00: listed without DHCP, refused"),
            "{out}"
        );
        let lo: Vec<String> = w
            .inst
            .addresses()
            .into_iter()
            .filter(|a| a.starts_with("lo "))
            .collect();
        assert!(lo.is_empty(), "lo was given {lo:?}: {out}\n{}", report(&w));
        assert!(
            !w.root.join("run/leasehook/iface/lo.json").exists(),
            "{out}"
        );
        for dst in ["10.98.0.1", "10.77.0.9"] {
            let r = &w.inst.ip_json(&["route", "get", dst])[0];
            assert_eq!(
                (r["type"].as_str(), r["dev"].as_str()),
                (None, Some("eth0")),
                "ip route get {dst}: {r}\n{out}"
            );
        }
        wait_installed(&w, "after refresh");
        assert_exact(&w);
        assert_traffic(&w, &["10.98.1.20", "10.98.0.10"]);
    }

    fn has_address(w: &World) -> bool {
        w.inst
            .ip(&["-4", "addr", "show", "eth1"])
            .contains("10.98.1.20/24")
    }

    #[test]
    fn refresh_addresses_a_nic_on_a_static_network_and_flush_takes_it_away() {
        let mut w = static_world("os-static");
        w.bind("eth0", false);
        assert!(!has_address(&w), "{}", report(&w));
        let out = refresh(&w);
        assert!(has_address(&w), "{out}\n{}", report(&w));
        wait_installed(&w, "after refresh");
        assert_exact(&w);
        assert_traffic(&w, &["10.98.1.20"]);
        let out = leasehook(&w, &["flush", "--iface", "eth1"]);
        assert!(out.status.success(), "{out:?}");
        assert!(
            !has_address(&w) && w.our_rules().is_empty(),
            "flush left eth1's address or rules:\n{}",
            report(&w)
        );
    }

    #[test]
    fn a_static_address_another_tool_put_there_is_left_alone() {
        // cloud-init's netplan configures static networks itself: the address is
        // there first; leasehook adds the rules and routes and leaves it.
        let mut w = static_world("os-foreign");
        w.bind("eth0", false);
        w.inst
            .ip(&["address", "add", "10.98.1.20/24", "dev", "eth1"]);
        let out = refresh(&w);
        wait_installed(&w, "after refresh");
        assert_exact(&w);
        assert_traffic(&w, &["10.98.1.20"]);
        let out2 = leasehook(&w, &["flush", "--iface", "eth1"]);
        assert!(out2.status.success(), "{out2:?}");
        assert!(w.our_rules().is_empty(), "{out}\n{}", report(&w));
        assert!(
            has_address(&w),
            "flush removed an address another tool put there:\n{}",
            report(&w)
        );
    }
}

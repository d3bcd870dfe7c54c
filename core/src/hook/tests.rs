// SPDX-License-Identifier: Apache-2.0
//! Unit tests of the hook's configuration, its provider and its inert cases, and
//! of the `cloud-init` profile's lease path.

use super::lease_tests::{Scripted, links, run};
use super::*;
use crate::apply::{
    self,
    state::{self, InterfaceState, Paths},
};
use crate::model::{MacAddr, Profile};
use crate::source::provider::{Outcome, ProviderKind};

/// The provider of the cloud named `name`.
fn kind(name: &str) -> ProviderKind {
    ProviderKind::from_name(name).unwrap()
}

fn env(pairs: &[(&str, &str)]) -> crate::event::Env {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// A three-NIC instance as the hooks see it for eth2's DHCPv4 event with
/// `profile: cloud-init`: eth2's own keys, and only the position keys of the
/// others (what the wait fetches), in a kernel with all three links.
fn cloud_init_world(
    eth2_device: &str,
) -> (
    crate::apply::record::RecordingApplier,
    crate::model::InstanceNetwork,
    LeaseEvent,
    HookConfig,
    tempfile::TempDir,
) {
    let macs = [
        "02:00:00:00:00:01",
        "02:00:00:00:00:02",
        "02:00:00:00:00:03",
    ];
    let network = crate::metadata::parse_tree(&serde_json::json!({
        "mac": macs[0],
        "network": {"interfaces": {"macs": {
            macs[0]: {"device-number": "0"},
            macs[1]: {"device-number": "1"},
            macs[2]: {"device-number": eth2_device, "local-ipv4s": "10.0.2.30\n10.0.2.31",
                      "subnet-ipv4-cidr-block": "10.0.2.0/24",
                      "ipv6s": "2600::30\n2600::31", "subnet-ipv6-cidr-blocks": "2600::/64"}
        }}}
    }))
    .unwrap();
    let applier = crate::apply::record::RecordingApplier::with_links(links(&macs));
    let lease = crate::model::Lease {
        family: crate::model::Family::V4,
        address: "10.0.2.30".parse().unwrap(),
        prefix_len: 24,
        routers: vec!["10.0.2.1".parse().unwrap()],
        reason: crate::model::Reason::Bound,
    };
    let event = LeaseEvent {
        interface: IfName::try_new("eth2").unwrap(),
        family: crate::model::Family::V4,
        reason: crate::model::Reason::Bound,
        new: Some(lease),
        old: None,
    };
    let root = tempfile::tempdir().unwrap();
    let cfg = HookConfig::for_test(root.path(), &[("LEASEHOOK_PROFILE", "cloud-init")]);
    (applier, network, event, cfg, root)
}

/// Runs `event` through the event path with the metadata answering `network`.
fn apply_eth2(
    applier: &mut crate::apply::record::RecordingApplier,
    network: &crate::model::InstanceNetwork,
    event: &LeaseEvent,
    cfg: &HookConfig,
) -> HookOutcome {
    let provider = Scripted::new([Outcome::Complete(network.clone())]);
    run(applier, &provider, cfg, event)
}

#[test]
fn cloud_init_profile_applies_the_events_nic_at_its_position() {
    let (mut k, network, event, cfg, _root) = cloud_init_world("2");
    let out = apply_eth2(&mut k, &network, &event, &cfg);
    assert!(matches!(out, HookOutcome::Applied(_)), "{out:?}");
    // Position 2 of (eth0, eth1, eth2): table 102, whichever leases were seen.
    let rules: Vec<String> = k.owned.rules.iter().map(ToString::to_string).collect();
    assert_eq!(
        rules,
        [
            "from 10.0.2.30/32 lookup 102",
            "from 10.0.2.31/32 lookup 102"
        ]
    );
    let routes: Vec<String> = k.owned.routes.iter().map(ToString::to_string).collect();
    assert_eq!(
        routes,
        [
            "default via 10.0.2.1 dev eth2 table 102",
            "10.0.2.0/24 dev eth2 table 102"
        ]
    );
    // cloud-init's secondary address (the subnet's prefix length), IPv4 only:
    // the IPv6 part waits for a DHCPv6 lease. Nothing on eth0 or eth1.
    let addrs: Vec<String> = k
        .owned
        .addresses
        .iter()
        .map(|a| format!("{} {}", a.dev, a.addr))
        .collect();
    assert_eq!(addrs, ["eth2 10.0.2.31/24"]);
    // Recorded under the cloud-init profile; a second event writes nothing.
    let st = state::read_state_or_set_aside(&Paths::new(&cfg.root), &event.interface).unwrap();
    assert_eq!(st.tables().into_iter().collect::<Vec<_>>(), [102]);
    let again = apply_eth2(&mut k, &network, &event, &cfg);
    assert!(
        matches!(&again, HookOutcome::Applied(r) if r.writes() == 0),
        "{again:?}"
    );
}

#[test]
fn cloud_init_profile_waits_while_its_table_is_another_nics() {
    let (mut k, network, event, cfg, _root) = cloud_init_world("2");
    // eth1 holds table 102 from before (it was third before eth0's... a NIC
    // attached ahead of it moved it): eth2 must not take it over.
    let paths = Paths::new(&cfg.root);
    let held = crate::model::Plan {
        profile: Profile::CloudInit,
        interfaces: vec![crate::model::InterfacePlan {
            name: IfName::try_new("eth1").unwrap(),
            mac: "02:00:00:00:00:02".parse().unwrap(),
            primary: false,
            families: vec![crate::model::Family::V4],
            table: Some(102),
            metric: None,
            addresses: Vec::new(),
            routes: vec![crate::model::Route {
                to: "10.0.1.0/24".parse().unwrap(),
                via: None,
                dev: IfName::try_new("eth1").unwrap(),
                scope: None,
                src: None,
                table: 102,
            }],
            rules: vec![crate::model::Rule {
                from: "10.0.1.20/32".parse().unwrap(),
                to: None,
                table: 102,
                priority: None,
            }],
            missing: Vec::new(),
            refused: Vec::new(),
        }],
    };
    let report = apply::apply_plan(&mut k, &held, &[]).unwrap();
    let ip = &held.interfaces[0];
    state::write_state(
        &paths,
        &InterfaceState::record(None, &report.owned_part(ip), Profile::CloudInit),
    )
    .unwrap();
    let before = k.owned.clone();
    let out = apply_eth2(&mut k, &network, &event, &cfg);
    let HookOutcome::Kept(why) = out else {
        panic!("{out:?}")
    };
    assert!(why.contains("table 102") && why.contains("eth1"), "{why}");
    assert_eq!(k.owned, before);
}

#[test]
fn a_nic_unmanaged_by_its_metadata_is_never_touched() {
    for entry in ["device-number:2", "interface-id:eni-2", "network-card:0"] {
        let (mut k, mut network, event, mut cfg, _root) = cloud_init_world("2");
        cfg.unmanaged = vec![entry.parse().unwrap()];
        let mac: MacAddr = "02:00:00:00:00:03".parse().unwrap();
        if let Some(n) = network.nics.iter_mut().find(|n| n.mac == mac) {
            n.interface_id = Some("eni-2".to_owned());
        }
        let out = apply_eth2(&mut k, &network, &event, &cfg);
        assert_eq!(out, HookOutcome::Unmanaged, "{entry}");
        assert_eq!(
            k.owned,
            crate::apply::record::RecordingApplier::default().owned
        );
        assert!(state::read_state_or_set_aside(&Paths::new(&cfg.root), &event.interface).is_none());
        // Another NIC's number: planned as usual.
        cfg.unmanaged = vec!["device-number:1".parse().unwrap()];
        let out = apply_eth2(&mut k, &network, &event, &cfg);
        assert!(matches!(out, HookOutcome::Applied(_)), "{entry}: {out:?}");
    }
    // A partial answer that does not say the device-number yet: nothing applied.
    let (mut k, mut network, event, mut cfg, _root) = cloud_init_world("2");
    cfg.unmanaged = vec!["device-number:2".parse().unwrap()];
    let mac: MacAddr = "02:00:00:00:00:03".parse().unwrap();
    if let Some(n) = network.nics.iter_mut().find(|n| n.mac == mac) {
        n.device_number = None;
    }
    // The whole budget is the synchronous one: no worker takes the wait over.
    cfg.budget = cfg.sync_budget;
    let provider = Scripted::new([Outcome::Partial {
        network,
        missing: Vec::new(),
    }]);
    let out = run(&mut k, &provider, &cfg, &event);
    let HookOutcome::Kept(why) = out else {
        panic!("{out:?}")
    };
    assert!(why.contains("device-number:2"), "{why}");
    assert_eq!(
        k.owned,
        crate::apply::record::RecordingApplier::default().owned
    );
}

#[test]
fn inert_when_disabled_or_off_cloud_this_boot() {
    let root = tempfile::tempdir().unwrap();
    let mut cfg = HookConfig::for_test(root.path(), &[]);
    assert_eq!(inert(&cfg), None);
    cfg.enabled = false;
    assert!(inert(&cfg).is_some_and(|w| w.contains("enabled is false")));
    cfg.enabled = true;
    let run = root.path().join("run/leasehook");
    std::fs::create_dir_all(&run).unwrap();
    let boot = |verdict: &str, boot_id: &str| {
        serde_json::json!({
            "version": 1, "boot_id": boot_id, "stage": "local", "verdict": verdict,
            "datasource": "None", "instance_id": "iid-datasource-none",
            "origin": "no-datasource", "cache": "", "new_instance": null,
            "previous_instance_id": null, "configured": [], "deferred": [],
            "attempts": [], "fetched_at_ms": null, "decided_at_ms": 0
        })
        .to_string()
    };
    let id = root.path().join(crate::constants::BOOT_ID);
    std::fs::create_dir_all(id.parent().unwrap()).unwrap();
    std::fs::write(&id, "b1\n").unwrap();
    std::fs::write(run.join("boot.json"), boot("no-datasource", "b1")).unwrap();
    assert!(inert(&cfg).is_some_and(|w| w.contains("no datasource this boot")));
    // A named provider is asked all the same.
    cfg.provider = ProviderChoice::Named(kind("ec2"));
    assert_eq!(inert(&cfg), None);
    cfg.provider = ProviderChoice::Auto;
    // Another boot's verdict: DMI decides later, nothing inert.
    std::fs::write(run.join("boot.json"), boot("no-datasource", "b0")).unwrap();
    assert_eq!(inert(&cfg), None);
}

#[test]
fn auto_without_a_boot_verdict_goes_by_dmi() {
    let root = tempfile::tempdir().unwrap();
    let mut cfg = HookConfig::for_test(root.path(), &[]);
    // No boot.json, no DMI: EC2, as before the key.
    assert_eq!(provider(&cfg).unwrap().kind(), kind("ec2"));
    let dmi = root.path().join("sys/class/dmi/id");
    std::fs::create_dir_all(&dmi).unwrap();
    std::fs::write(dmi.join("product_name"), "Alibaba Cloud ECS\n").unwrap();
    assert_eq!(provider(&cfg).unwrap().kind(), kind("aliyun"));
    // A named provider is taken as named.
    cfg.provider = ProviderChoice::Named(kind("ec2"));
    assert_eq!(provider(&cfg).unwrap().kind(), kind("ec2"));
    // Another product: EC2.
    cfg.provider = ProviderChoice::Auto;
    std::fs::write(dmi.join("product_name"), "Alibaba Cloud ECS 2\n").unwrap();
    assert_eq!(provider(&cfg).unwrap().kind(), kind("ec2"));
    // Oracle Cloud's chassis asset tag: the OCI provider, whose answer to
    // `unleased` is asked (the other clouds' is None).
    std::fs::write(dmi.join("chassis_asset_tag"), "OracleCloud.com\n").unwrap();
    let p = provider(&cfg).unwrap();
    assert_eq!(p.kind(), kind("oracle"));
    cfg.cloud_endpoints
        .insert("oracle".to_owned(), "http://127.0.0.1:9".to_owned());
    let p = provider(&cfg).unwrap();
    let policy =
        crate::source::provider::WaitPolicy::default().with_budget(std::time::Duration::ZERO);
    let clock = crate::source::provider::SystemClock;
    assert!(matches!(p.unleased(&policy, &clock), Some(Err(_))));
}

#[test]
fn config_defaults_and_overrides() {
    let d = HookConfig::load(&env(&[("LEASEHOOK_CONFIG", "/dev/null")])).unwrap();
    assert_eq!(
        (d.root.to_str(), d.sync_budget, d.budget),
        (Some("/"), Duration::from_secs(3), Duration::from_secs(30))
    );
    assert_eq!(d.plan, PlanConfig::default());
    let c = HookConfig::load(&env(&[
        ("LEASEHOOK_ROOT", "/nonexistent/leasehook-test"),
        ("LEASEHOOK_TABLE_BASE", "20000"),
        ("LEASEHOOK_PRIMARY_RULES", "yes"),
        ("LEASEHOOK_SECONDARY_ADDRESSES", "false"),
        (
            "LEASEHOOK_IMDS_ENDPOINTS",
            "http://127.0.0.1:8080, http://[::1]:8080",
        ),
        ("LEASEHOOK_IMDS_SYNC_BUDGET_S", "0.5"),
        ("LEASEHOOK_IMDS_BUDGET_S", "0.1"),
        ("LEASEHOOK_UNMANAGED", "eth7"),
    ]))
    .unwrap();
    assert_eq!(c.root.to_str(), Some("/nonexistent/leasehook-test"));
    assert_eq!(c.plan.table_base, 20000);
    assert!(c.plan.primary_rules && !c.plan.secondary_addresses);
    assert_eq!(c.endpoints, ["http://127.0.0.1:8080", "http://[::1]:8080"]);
    assert!(c.is_unmanaged(&IfName::try_new("eth7").unwrap(), None));
    // The total budget is never shorter than the synchronous one.
    assert_eq!(
        (c.sync_budget, c.budget),
        (Duration::from_millis(500), Duration::from_millis(500))
    );
}

#[test]
fn bad_config_values_name_the_variable() {
    for (var, value, want) in [
        (
            "LEASEHOOK_TABLE_BASE",
            "-1",
            "configuration environment LEASEHOOK_TABLE_BASE: table_base: expected a whole number from 0 to 4294967295 (got \"-1\")",
        ),
        (
            "LEASEHOOK_PRIMARY_RULES",
            "maybe",
            "configuration environment LEASEHOOK_PRIMARY_RULES: primary_rules: expected true or false (got \"maybe\")",
        ),
        (
            "LEASEHOOK_IMDS_BUDGET_S",
            "NaN",
            "configuration environment LEASEHOOK_IMDS_BUDGET_S: imds.budget_s: expected seconds from 0 to 3600 (got \"NaN\")",
        ),
        (
            "LEASEHOOK_PROFILE",
            "x",
            "configuration environment LEASEHOOK_PROFILE: profile: expected ec2-net-utils or cloud-init (got \"x\")",
        ),
    ] {
        assert_eq!(
            HookConfig::load(&env(&[("LEASEHOOK_CONFIG", "/dev/null"), (var, value)]))
                .unwrap_err()
                .to_string(),
            want
        );
    }
}

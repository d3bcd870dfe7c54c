//! `OpenStack` (issue 22): its metadata client and config drive through the shim
//! with `provider: openstack`, a RENEW after a good BOUND while the service
//! misbehaves.

use leasehook_tests::clouds::Cloud;
use leasehook_tests::world::MAC1;
use serde_json::json;

use crate::instance::{
    Imds, Instance, OPENSTACK_RULES, STATE, renew, renew_healthy, renew_with, slot_rules,
};
use crate::matrix::{FileWant, Row, Seen};

matrix! {
    #[cfg(feature = "netns")]
    openstack_down => Row {
        name: "openstack_down",
        fault: "OpenStack metadata service down (connection refused)",
        does: "retries with backoff for the budget, then keeps the last applied state",
        log: "Connection refused (os error 111); keeping the last applied state",
        max_secs: 4.0,
        run: || renew(Cloud::OpenStack, &Imds::Down),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    openstack_403 => Row {
        name: "openstack_403",
        fault: "OpenStack metadata service answers 403",
        does: "an error waiting cannot fix: keeps the last applied state at once",
        log: "network_data.json: HTTP 403; keeping the last applied state",
        max_secs: 4.0,
        run: || renew(Cloud::OpenStack, &Imds::Scenario(json!({"rules": [{"path": "/openstack", "status": 403}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    openstack_429 => Row {
        name: "openstack_429",
        fault: "Neutron's metadata rate limit: 429 for the whole budget",
        does: "retries with backoff for the budget, then keeps the last applied state",
        log: "HTTP 429; keeping the last applied state",
        max_secs: 4.0,
        run: || renew(Cloud::OpenStack, &Imds::Scenario(json!({"rules": [{"path": "/openstack", "status": 429}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    openstack_500 => Row {
        name: "openstack_500",
        fault: "OpenStack metadata service answers 500 (Nova unreachable behind the proxy)",
        does: "retries with backoff for the budget, then keeps the last applied state",
        log: "HTTP 500; keeping the last applied state",
        max_secs: 4.0,
        run: || renew(Cloud::OpenStack, &Imds::Scenario(json!({"rules": [{"path": "/openstack", "status": 500}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    openstack_garbage => Row {
        name: "openstack_garbage",
        fault: "OpenStack metadata service answers bytes that are not UTF-8",
        does: "refuses the answer at once; keeps the last applied state",
        log: "unusable answer: not UTF-8 (byte 0); keeping the last applied state",
        max_secs: 4.0,
        run: || renew(Cloud::OpenStack, &Imds::Scenario(json!({"rules": [{"path": "/openstack", "action": "garbage"}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    openstack_bad_link => Row {
        name: "openstack_bad_link",
        fault: "`network_data.json` with a network naming a link that is not listed",
        does: "refuses the document at once, naming the key; keeps the last applied state",
        log: "network_data.json/networks/1/link: names no link listed",
        max_secs: 4.0,
        run: run_openstack_bad_link,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    openstack_slow => Row {
        name: "openstack_slow",
        fault: "OpenStack metadata service slow: its answer takes 1.5 s, the budget is 1 s",
        does: "the round's one request finishes within its 2 s timeout and counts: the metadata agrees, nothing to change",
        files: &[FileWant::Holds(STATE, "\"table\":19872")],
        log: "IMDS agrees with the lease after 1 round(s), 1 request(s)",
        max_secs: 4.0,
        run: || renew(Cloud::OpenStack, &Imds::Scenario(json!({"rules": [{"path": "/openstack", "delay": 1.5}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    openstack_drive_unmountable => Row {
        name: "openstack_drive_unmountable",
        fault: "a config drive labelled `config-2` that does not mount (an ISO 9660 volume descriptor and nothing else), the metadata service up",
        does: "fails at once (the drive is the source, the service is never asked); keeps the last applied state",
        log: "mount read-only: ",
        not_in_log: "HTTP",
        max_secs: 4.0,
        run: run_openstack_drive_unmountable,
        ..Row::KEEPS
    };
}

#[test]
fn openstack_rows_use_the_mac_slot_table() {
    let slot = leasehook_core::source::aliyun::nic::device_slot(MAC1.parse().unwrap());
    assert_eq!(OPENSTACK_RULES, slot_rules(slot, &["10.98.1.20"]));
}

fn run_openstack_bad_link() -> Seen {
    let mut tree = leasehook_tests::openstack_emulator::world_tree();
    tree["network_data"]["networks"][1]["link"] = json!("tap-not-listed");
    renew_with(Cloud::OpenStack, Some(&tree), &Imds::healthy(), &[])
}

fn run_openstack_drive_unmountable() -> Seen {
    let mut i = Instance::new("fosdr");
    i.bound_on(Cloud::OpenStack);
    let by = i.root.join("dev/disk/by-label");
    std::fs::create_dir_all(&by).unwrap();
    let mut bytes = vec![0u8; 64 * 1024];
    bytes[32769..32774].copy_from_slice(b"CD001");
    std::fs::write(by.join("config-2"), bytes).unwrap();
    i.faulted(|i| renew_healthy(i, Cloud::OpenStack))
}

//! Alibaba Cloud ECS (issue 21): its metadata client through the shim with
//! `provider: aliyun`, a RENEW after a good BOUND while the service misbehaves
//! (restarted: the cached token is refused).

use leasehook_tests::clouds::Cloud;
use leasehook_tests::world::MAC1;
use serde_json::json;

use crate::instance::{ALIYUN_RULES, ALIYUN_TOKEN, Imds, STATE, renew, slot_rules};
use crate::matrix::{FileWant, Row};

matrix! {
    #[cfg(feature = "netns")]
    aliyun_down => Row {
        name: "aliyun_down",
        fault: "Alibaba ECS metadata down (connection refused)",
        does: "retries with backoff for the budget, then keeps the last applied state",
        files: &[FileWant::Unchanged(STATE), FileWant::Unchanged(ALIYUN_TOKEN)],
        log: "nothing changed: IMDS did not answer usefully",
        run: || renew(Cloud::Aliyun, &Imds::Down),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    aliyun_disabled => Row {
        name: "aliyun_disabled",
        fault: "Alibaba ECS metadata restarted (cached token refused) and disabled (403 on the token)",
        does: "fails the source at once, no retry; keeps the last applied state",
        log: "IMDS disabled (the token request was refused with HTTP 403)",
        run: || renew(Cloud::Aliyun, &Imds::Scenario(json!({"rules": [{"path": "/latest/api/token", "method": "PUT", "status": 403}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    aliyun_400 => Row {
        name: "aliyun_400",
        fault: "Alibaba ECS metadata answers 400 to every GET",
        does: "fails at once (waiting cannot fix a bad request); keeps the last applied state",
        log: "HTTP 400; keeping the last applied state",
        run: || renew(Cloud::Aliyun, &Imds::Scenario(json!({"rules": [{"path": "/latest/meta-data", "status": 400}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    aliyun_429 => Row {
        name: "aliyun_429",
        fault: "Alibaba ECS metadata throttles (429 to every GET)",
        does: "retries with backoff for the budget, then keeps the last applied state",
        files: &[FileWant::Unchanged(STATE), FileWant::Unchanged(ALIYUN_TOKEN)],
        log: "HTTP 429; keeping the last applied state",
        run: || renew(Cloud::Aliyun, &Imds::Scenario(json!({"rules": [{"path": "/latest/meta-data", "status": 429}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    aliyun_garbage_list => Row {
        name: "aliyun_garbage_list",
        fault: "Alibaba ECS metadata serves `private-ipv4s` that is not a JSON list",
        does: "fails at once, naming the key; keeps the last applied state",
        log: "private-ipv4s: not a JSON list",
        run: || renew(Cloud::Aliyun, &Imds::Scenario(json!({"values": [{"path": format!("/latest/meta-data/network/interfaces/macs/{MAC1}/private-ipv4s"), "value": "10.98.1.20,10.98.1.21"}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    aliyun_garbage_bytes => Row {
        name: "aliyun_garbage_bytes",
        fault: "Alibaba ECS metadata answers garbage (200, body not UTF-8)",
        does: "fails at once (waiting cannot fix garbage); keeps the last applied state",
        log: "unusable answer: not UTF-8",
        run: || renew(Cloud::Aliyun, &Imds::Scenario(json!({"rules": [{"path": "/latest/meta-data", "action": "garbage"}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    aliyun_slow => Row {
        name: "aliyun_slow",
        fault: "Alibaba ECS metadata slow: every answer takes 0.5 s, the budget is 1 s",
        does: "stops asking when the budget is spent; the metadata said too little, so keeps the last applied state",
        log: "nothing changed: IMDS incomplete: keeping the IPv4 state applied before",
        run: || renew(Cloud::Aliyun, &Imds::Scenario(json!({"rules": [{"path": "/latest", "delay": 0.5}]}))),
        ..Row::KEEPS
    };
}

#[test]
fn aliyun_rows_use_the_mac_slot_table() {
    let slot = leasehook_core::source::aliyun::nic::device_slot(MAC1.parse().unwrap());
    assert_eq!(
        ALIYUN_RULES,
        slot_rules(slot, &["10.98.1.20", "10.98.1.21"])
    );
}

//! EC2's IMDS, through `leasehook-dhclient`: a RENEW after a good BOUND while
//! IMDS misbehaves, and a BOUND IMDS has not caught up with.

use leasehook_tests::clouds::Cloud;
use leasehook_tests::world::MAC1;
use serde_json::json;

use crate::instance::{
    BASE_ROUTES, BASE_RULES, Imds, Instance, STATE, THREE_IPS, TOKEN, WITH_22, renew, renew_with,
    tree_with, tree_without_eth1_subnet,
};
use crate::matrix::{FileWant, Kernel, Row, Seen};

matrix! {
    #[cfg(feature = "netns")]
    imds_down => Row {
        name: "imds_down",
        fault: "IMDS down (connection refused)",
        does: "retries with backoff for the budget, then keeps the last applied state",
        files: &[FileWant::Unchanged(STATE), FileWant::Unchanged(TOKEN)],
        log: "nothing changed: IMDS did not answer usefully",
        run: || renew(Cloud::Ec2, &Imds::Down),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    imds_slow => Row {
        name: "imds_slow",
        fault: "IMDS slow: every answer takes 0.5 s, the budget is 1 s",
        does: "stops asking when the budget is spent (overrun: at most the request under way); IMDS said too little, so keeps the last applied state",
        log: "nothing changed: IMDS incomplete: keeping the IPv4 state applied before",
        run: || renew(Cloud::Ec2, &Imds::Scenario(json!({"rules": [{"path": "/latest", "delay": 0.5}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    imds_hangs => Row {
        name: "imds_hangs",
        fault: "IMDS never answers (request read, no reply)",
        does: "each request times out after 2 s; keeps the last applied state",
        log: "timed out (whole request)",
        max_secs: 4.0,
        run: || renew(Cloud::Ec2, &Imds::Scenario(json!({"rules": [{"path": "/latest", "action": "drop"}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    imds_5xx => Row {
        name: "imds_5xx",
        fault: "IMDS answers 500 to everything",
        does: "retries with backoff for the budget, then keeps the last applied state",
        files: &[FileWant::Unchanged(STATE), FileWant::Unchanged(TOKEN)],
        log: "HTTP 500; keeping the last applied state",
        run: || renew(Cloud::Ec2, &Imds::Scenario(json!({"rules": [{"path": "/latest", "status": 500}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    imds_401_mid_run => Row {
        name: "imds_401_mid_run",
        fault: "IMDS restarted (cached token refused) and refuses the new token once mid-run (401)",
        does: "fetches a new token and repeats the request, each time; applies the new address",
        kernel: WITH_22,
        files: &[FileWant::Holds(STATE, "10.98.1.22/32"), FileWant::Holds(TOKEN, "expires")],
        log: "401, the token was refused; fetching a new one",
        run: || renew_with(
            Cloud::Ec2,
            Some(&tree_with(&[(MAC1, "local-ipv4s", THREE_IPS)])),
            &Imds::Scenario(json!({"rules": [
                {"path": "/latest/meta-data/network", "method": "GET", "status": 401, "count": 1}
            ]})),
            &[],
        ),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    imds_403 => Row {
        name: "imds_403",
        fault: "IMDS disabled (403 on the token)",
        does: "fails the source at once, no retry, no IMDSv1; keeps the last applied state",
        log: "IMDS disabled (the token request was refused with HTTP 403)",
        max_secs: 2.0,
        run: || renew(
            Cloud::Ec2,
            &Imds::Scenario(json!({"rules": [{"path": "/latest/api/token", "method": "PUT", "status": 403}]})),
        ),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    imds_partial => Row {
        name: "imds_partial",
        fault: "partial propagation: a new ENI whose subnet key IMDS never serves (BOUND)",
        does: "waits the budget, then applies what the lease alone proves and records what is missing",
        kernel: Kernel::Exactly {
            rules: BASE_RULES,
            routes: BASE_ROUTES,
            addresses: &["eth1 10.98.1.21/32"],
        },
        files: &[FileWant::Holds(STATE, "\"missing\":[{")],
        log: "applying what the lease alone proves (table 10001)",
        run: run_imds_partial,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    imds_garbage => Row {
        name: "imds_garbage",
        fault: "IMDS answers garbage (200, body not UTF-8)",
        does: "fails at once (waiting cannot fix garbage); keeps the last applied state",
        log: "unusable answer: not UTF-8",
        max_secs: 2.0,
        run: || renew(Cloud::Ec2, &Imds::Scenario(json!({"rules": [{"path": "/latest/meta-data", "action": "garbage"}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    imds_reset => Row {
        name: "imds_reset",
        fault: "IMDS resets every connection (TCP RST)",
        does: "retries with backoff for the budget, then keeps the last applied state",
        files: &[FileWant::Unchanged(STATE), FileWant::Unchanged(TOKEN)],
        log: "Connection reset by peer",
        run: || renew(Cloud::Ec2, &Imds::Reset),
        ..Row::KEEPS
    };
}

fn run_imds_partial() -> Seen {
    Instance::new("fpart").faulted(|i| {
        let url = i.start_imds(&tree_without_eth1_subnet(), &Imds::healthy());
        i.shim("BOUND", &url)
    })
}

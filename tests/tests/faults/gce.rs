//! The GCE metadata server, through `leasehook-dhclient` with `provider: gce`
//! (issue 21): a RENEW after a good BOUND while it misbehaves.

use leasehook_tests::clouds::Cloud;
use serde_json::json;

use crate::instance::{Imds, STATE, renew};
use crate::matrix::{FileWant, Row};

matrix! {
    #[cfg(feature = "netns")]
    gce_down => Row {
        name: "gce_down",
        fault: "GCE metadata server down (connection refused)",
        does: "retries with backoff for the budget, then keeps the last applied state",
        log: "Connection refused (os error 111); keeping the last applied state",
        max_secs: 4.0,
        run: || renew(Cloud::Gce, &Imds::Down),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gce_403 => Row {
        name: "gce_403",
        fault: "GCE metadata server answers 403 (the header refused)",
        does: "an error waiting cannot fix: keeps the last applied state at once",
        log: "network-interfaces/?recursive=true: HTTP 403; keeping the last applied state",
        max_secs: 4.0,
        run: || renew(Cloud::Gce, &Imds::Scenario(json!({"rules": [{"path": "/computeMetadata", "status": 403}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gce_400 => Row {
        name: "gce_400",
        fault: "GCE metadata server answers 400",
        does: "an error waiting cannot fix: keeps the last applied state at once",
        log: "network-interfaces/?recursive=true: HTTP 400; keeping the last applied state",
        max_secs: 4.0,
        run: || renew(Cloud::Gce, &Imds::Scenario(json!({"rules": [{"path": "/computeMetadata", "status": 400}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gce_429 => Row {
        name: "gce_429",
        fault: "GCE metadata server answers 429 for the whole budget",
        does: "retries with backoff for the budget, then keeps the last applied state",
        log: "HTTP 429; keeping the last applied state",
        max_secs: 4.0,
        run: || renew(Cloud::Gce, &Imds::Scenario(json!({"rules": [{"path": "/computeMetadata", "status": 429}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gce_garbage => Row {
        name: "gce_garbage",
        fault: "GCE metadata server answers bytes that are not JSON",
        does: "refuses the answer at once; keeps the last applied state",
        log: "unusable answer: not UTF-8 (byte 0); keeping the last applied state",
        max_secs: 4.0,
        run: || renew(Cloud::Gce, &Imds::Scenario(json!({"rules": [{"path": "/computeMetadata", "action": "garbage"}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gce_no_flavor => Row {
        name: "gce_no_flavor",
        fault: "an answer without `Metadata-Flavor: Google` (not Google's server)",
        does: "refuses the answer at once; keeps the last applied state",
        log: "not Google's metadata server; keeping the last applied state",
        max_secs: 4.0,
        run: || renew(Cloud::Gce, &Imds::Scenario(json!({"rules": [{"path": "/computeMetadata", "action": "no-flavor"}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    gce_slow => Row {
        name: "gce_slow",
        fault: "GCE metadata server slow: its answer takes 1.5 s, the budget is 1 s",
        does: "the round's one request finishes within its 2 s timeout and counts: the metadata agrees, nothing to change",
        files: &[FileWant::Holds(STATE, "\"table\":10001")],
        log: "IMDS agrees with the lease after 1 round(s), 1 request(s)",
        max_secs: 4.0,
        run: || renew(Cloud::Gce, &Imds::Scenario(json!({"rules": [{"path": "/computeMetadata", "delay": 1.5}]}))),
        ..Row::KEEPS
    };
}

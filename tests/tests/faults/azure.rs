//! Azure's IMDS, through `leasehook-dhclient` with `provider: azure`: a RENEW
//! after a good BOUND while it misbehaves.

use leasehook_tests::clouds::Cloud;
use leasehook_tests::world::MAC1;
use serde_json::json;

use crate::instance::{Imds, STATE, renew, renew_with};
use crate::matrix::{FileWant, Row};

matrix! {
    #[cfg(feature = "netns")]
    azure_down => Row {
        name: "azure_down",
        fault: "Azure IMDS down (connection refused)",
        does: "retries with backoff for the budget, then keeps the last applied state",
        log: "nothing changed: IMDS did not answer usefully",
        run: || renew(Cloud::Azure, &Imds::Down),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    azure_400 => Row {
        name: "azure_400",
        fault: "Azure IMDS answers 400 (the request refused)",
        does: "fails at once (asking again cannot fix a refused request); keeps the last applied state",
        log: "HTTP 400; keeping the last applied state",
        max_secs: 2.0,
        run: || renew(Cloud::Azure, &Imds::Scenario(json!({"rules": [{"path": "/metadata", "status": 400}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    azure_429_once => Row {
        name: "azure_429_once",
        fault: "Azure IMDS rate-limits the first request (429, `Retry-After: 1`); the budget (synchronous too) is 3 s",
        does: "waits the `Retry-After`, asks once more, finds nothing to change in the kernel and records the renewed lease",
        files: &[FileWant::Holds(STATE, "\"reason\":\"renew\"")],
        log: "IMDS agrees with the lease after 2 round(s), 2 request(s)",
        max_secs: 4.0,
        run: || renew_with(
            Cloud::Azure,
            None,
            &Imds::Scenario(json!({"rules": [{"path": "/metadata", "status": 429, "retry_after": 1, "count": 1}]})),
            &[("LEASEHOOK_IMDS_BUDGET_S", "3"), ("LEASEHOOK_IMDS_SYNC_BUDGET_S", "3")],
        ),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    azure_429 => Row {
        name: "azure_429",
        fault: "Azure IMDS rate-limits every request (429, `Retry-After: 1`); the budget is 1 s",
        does: "a 429 is never read as \"no NIC\": gives up with the error; keeps the last applied state",
        log: "HTTP 429 (retry after 1 s); keeping the last applied state",
        run: || renew(Cloud::Azure, &Imds::Scenario(json!({"rules": [{"path": "/metadata", "status": 429, "retry_after": 1}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    azure_garbage => Row {
        name: "azure_garbage",
        fault: "Azure IMDS answers garbage (200, body not UTF-8)",
        does: "fails at once (waiting cannot fix garbage); keeps the last applied state",
        log: "unusable answer: not UTF-8",
        max_secs: 2.0,
        run: || renew(Cloud::Azure, &Imds::Scenario(json!({"rules": [{"path": "/metadata", "action": "garbage"}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    azure_not_json => Row {
        name: "azure_not_json",
        fault: "Azure IMDS answers an HTML error page with 200",
        does: "fails at once naming the answer; keeps the last applied state",
        log: "Azure IMDS network: expected value",
        max_secs: 2.0,
        run: || renew(Cloud::Azure, &Imds::Scenario(json!({"rules": [{"path": "/metadata", "action": "not-json"}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    azure_slow => Row {
        name: "azure_slow",
        fault: "Azure IMDS slow (every answer takes 0.6 s) and no longer lists eth1; the budget is 1 s",
        does: "stops asking when the budget is spent (overrun: at most the request under way); IMDS said too little, so keeps the last applied state",
        log: "nothing changed: IMDS incomplete: keeping the IPv4 state applied before",
        run: || renew(Cloud::Azure, &Imds::Scenario(json!({
            "appear": [{"mac": MAC1, "after": 1000}],
            "rules": [{"path": "/metadata", "delay": 0.6}]
        }))),
        ..Row::KEEPS
    };
}

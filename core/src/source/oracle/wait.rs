// SPDX-License-Identifier: Apache-2.0
//! Performs IO (through the [`Fetch`] it is handed): OCI's consistency wait, the
//! seam's session ([`crate::source::provider::session`]) over one document,
//! `GET /opc/v2/vnics/`, which answers every VNIC; and the one request of [`crate::source::provider::Provider::unleased`] ([`fetch_unleased`]).
//!
//! The session is complete when the pure [`vnic::assess`] finds the event's MAC
//! listed with the leased address and its subnet. A 404 (OCI's IMDS may answer
//! one for a moment while it is updated) is "nothing listed yet" and asked again;
//! an answer that does not parse ends the wait as `Failed` (never as "no VNIC"); a
//! 429 or 5xx is retried with the driver's backoff and its `Retry-After`.

use std::net::IpAddr;
use std::time::Instant;

use super::VNICS_PATH;
use super::vnic::{self, OciNetwork};
use crate::error::{Error, ImdsErrorKind, Result};
use crate::source::provider::http::Fetch;
use crate::source::provider::session::Document;
use crate::source::provider::wait::{Clock, WaitPolicy, is_retryable, retry_after};
use crate::source::provider::{Assessment, NicEvent, Unleased};

impl Document for OciNetwork {
    fn path() -> String {
        VNICS_PATH.to_owned()
    }

    /// A 404 keeps nothing: nothing is listed yet.
    fn read(answer: Option<String>, _previous: Option<&Self>) -> Result<Option<Self>> {
        answer.map(|text| vnic::parse_vnics(&text)).transpose()
    }

    fn assess(event: &NicEvent, kept: Option<&Self>) -> Result<Assessment> {
        vnic::assess(event, kept)
    }
}

/// Sends `op` again while it fails in a way waiting can fix, or answers 404,
/// with the wait's jittered backoff and `Retry-After`, within `policy.budget`
/// (the first request is always made). A 404 still answered when the budget is
/// spent is an error: it never means "nothing there".
pub(crate) fn retrying<T>(
    policy: &WaitPolicy,
    clock: &dyn Clock,
    path: &str,
    op: impl Fn() -> Result<Option<T>>,
) -> Result<T> {
    let start = clock.now();
    let mut backoff = policy.backoff();
    let mut requests = 0u32;
    loop {
        requests += 1;
        let e = match op() {
            Ok(Some(v)) => {
                log::debug!(
                    "OCI IMDS {path}: answered after {requests} request(s), {} ms",
                    clock.now().saturating_duration_since(start).as_millis()
                );
                return Ok(v);
            }
            Ok(None) => Error::Imds {
                method: "GET",
                url: path.to_owned(),
                kind: ImdsErrorKind::Http {
                    status: 404,
                    retry_after: None,
                },
            },
            Err(e) if is_retryable(&e) => e,
            Err(e) => return Err(e),
        };
        if !again(policy, clock, start, &mut backoff, &e, path) {
            return Err(e);
        }
    }
}

/// Sleeps before the next attempt; `false` when the budget leaves no room for one.
fn again(
    policy: &WaitPolicy,
    clock: &dyn Clock,
    start: Instant,
    backoff: &mut impl Iterator<Item = std::time::Duration>,
    e: &Error,
    path: &str,
) -> bool {
    let elapsed = clock.now().saturating_duration_since(start);
    let remaining = policy.budget.saturating_sub(elapsed);
    let pause = backoff
        .next()
        .unwrap_or(policy.max_delay)
        .max(retry_after(e).unwrap_or_default());
    if pause >= remaining {
        return false;
    }
    log::debug!("OCI IMDS {path}: {e}; again in {} ms", pause.as_millis());
    clock.sleep(pause);
    true
}

/// The VNICs without DHCP: one `GET /opc/v2/vnics/` (asked again within
/// `policy` while it fails in a way waiting can fix), every VNIC but the primary
/// with the leases DHCP would have given ([`vnic::unleased`]). Any error changes
/// nothing for the caller.
pub fn fetch_unleased(
    fetch: &dyn Fetch,
    policy: &WaitPolicy,
    clock: &dyn Clock,
) -> Result<Unleased> {
    let text = retrying(policy, clock, VNICS_PATH, || fetch.get(VNICS_PATH))?;
    let net = vnic::parse_vnics(&text)?;
    let bare_metal = net.is_bare_metal();
    for v in net.vnics.iter().skip(1).filter(|v| v.is_vlan(bare_metal)) {
        let address = v
            .private_ip
            .map(IpAddr::V4)
            .or_else(|| v.ipv6.first().copied().map(IpAddr::V6))
            .map_or_else(|| "no address yet".to_owned(), |a| a.to_string());
        log::debug!(
            "OCI VNIC {} ({address}) is VLAN {} on physical NIC {}: leasehook creates its macvlan and VLAN",
            v.mac,
            v.vlan_tag.unwrap_or_default(),
            v.nic_index.unwrap_or_default()
        );
    }
    Ok(vnic::unleased(&net))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::model::Missing;
    use crate::model::Reason;
    use crate::source::oracle::vnic::tests::VM_TWO;
    use crate::source::provider::Outcome;
    use crate::source::provider::fake::{FakeClock, Scripted, bound, http, policy};
    use crate::source::provider::session::rows;

    const PRIMARY_ONLY: &str = r#"[{"macAddr":"02:00:17:05:D1:DB","privateIp":"10.0.0.230","subnetCidrBlock":"10.0.0.0/24","virtualRouterIp":"10.0.0.1"}]"#;

    fn event(mac: &str, addr: &str, router: &str) -> NicEvent {
        bound("ens4", mac, addr, 24, router)
    }

    fn primary() -> NicEvent {
        event("02:00:17:05:d1:db", "10.0.0.230", "10.0.0.1")
    }

    fn secondary() -> NicEvent {
        event("00:00:17:02:2b:b1", "10.0.1.20", "10.0.1.1")
    }

    #[test]
    fn the_primarys_lease_takes_one_request() {
        let clock = FakeClock::new();
        let imds = Scripted::every(&clock, |_| Ok(Some(VM_TWO.to_owned())));
        let out = OciNetwork::wait(&imds, &primary(), &policy(30_000), &clock);
        let Outcome::Complete(net) = out else {
            panic!("{out:?}")
        };
        assert_eq!(imds.count(), 1);
        assert_eq!(imds.log.borrow()[0].1, "/opc/v2/vnics/");
        assert_eq!(net.primary_mac, Some("02:00:17:05:d1:db".parse().unwrap()));
        assert_eq!(net.nics.len(), 2);
        assert!(clock.sleeps.borrow().is_empty());
    }

    #[test]
    fn a_vnic_that_appears_late_or_a_404_is_waited_for_one_request_per_round() {
        let clock = FakeClock::new();
        let imds = Scripted::every(&clock, |t| {
            Ok(match t {
                t if t < Duration::from_millis(50) => None,
                t if t < Duration::from_secs(2) => Some(PRIMARY_ONLY.to_owned()),
                _ => Some(VM_TWO.to_owned()),
            })
        });
        let out = OciNetwork::wait(&imds, &secondary(), &policy(30_000), &clock);
        assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
        // Rounds at 0, 0.1, 0.3, 0.7, 1.5 read a 404 or the primary alone; ~3.1 s
        // reads both.
        assert_eq!(imds.count(), 6);
    }

    #[test]
    fn a_vnic_that_never_appears_is_partial_and_errors_are_failed() {
        let clock = FakeClock::new();
        let imds = Scripted::every(&clock, |_| Ok(Some(PRIMARY_ONLY.to_owned())));
        let out = OciNetwork::wait(&imds, &secondary(), &policy(3_000), &clock);
        let Outcome::Partial { missing, .. } = out else {
            panic!("{out:?}")
        };
        assert_eq!(missing, [Missing::MacFolder]);

        for (status, after, asked) in [(401, None, 1), (503, Some(1), 3)] {
            let clock = FakeClock::new();
            let imds = Scripted::every(&clock, move |_| Err(http(status, after)));
            let out = OciNetwork::wait(&imds, &primary(), &policy(2_500), &clock);
            assert!(matches!(out, Outcome::Failed(_)), "{out:?}");
            assert!(imds.count() >= asked, "{}", imds.count());
        }
        let clock = FakeClock::new();
        let imds = Scripted::every(&clock, |_| Ok(Some("<html>oops</html>".to_owned())));
        let out = OciNetwork::wait(&imds, &primary(), &policy(30_000), &clock);
        let Outcome::Failed(e) = out else {
            panic!("{out:?}")
        };
        assert!(e.to_string().contains("OCI IMDS vnics"), "{e}");
        assert_eq!(imds.count(), 1);
    }

    #[test]
    fn unleased_asks_once_and_retries_what_waiting_can_fix() {
        let clock = FakeClock::new();
        let imds = Scripted::every(&clock, |_| Ok(Some(VM_TWO.to_owned())));
        let u = fetch_unleased(&imds, &policy(3_000), &clock).unwrap();
        assert_eq!(imds.count(), 1);
        assert_eq!(u.nics.len(), 1);
        assert_eq!(u.nics[0].leases[0].reason, Reason::Metadata);

        // 503 then 404 then the answer: three requests, the 503's Retry-After kept.
        let clock = FakeClock::new();
        let imds = Scripted::every(&clock, |t| match t {
            t if t <= Duration::from_millis(1) => Err(http(503, Some(1))),
            t if t < Duration::from_millis(1_100) => Ok(None),
            _ => Ok(Some(VM_TWO.to_owned())),
        });
        assert!(fetch_unleased(&imds, &policy(10_000), &clock).is_ok());
        assert_eq!(imds.count(), 3);
        assert_eq!(clock.sleeps.borrow()[0], Duration::from_secs(1));

        // A 404 until the budget ends is an error, never "no VNICs"; so is a 401
        // (at once) and garbage.
        let clock = FakeClock::new();
        let imds = Scripted::every(&clock, |_| Ok(None));
        let e = fetch_unleased(&imds, &policy(1_000), &clock).unwrap_err();
        assert!(e.to_string().contains("404"), "{e}");
        assert!(clock.elapsed.get() <= Duration::from_secs(1));
        let clock = FakeClock::new();
        let imds = Scripted::every(&clock, |_| Err(http(401, None)));
        assert!(fetch_unleased(&imds, &policy(10_000), &clock).is_err());
        assert_eq!(imds.count(), 1);
        let clock = FakeClock::new();
        let imds = Scripted::every(&clock, |_| Ok(Some("[]".to_owned())));
        let e = fetch_unleased(&imds, &policy(10_000), &clock).unwrap_err();
        assert!(e.to_string().contains("empty list"), "{e}");
    }

    #[test]
    fn an_ipv6_address_published_late_holds_only_the_dhcpv6_lease() {
        use crate::source::oracle::vnic::tests::DUAL_V6_ONLY_SECONDARY as ANSWER;
        // Every VNIC's IPv6 addresses appear 2 s after the first answer.
        let before = ANSWER
            .replacen(
                r#""ipv6Addresses" : [ "2603:c020:400d:5d7e::20", "2603:c020:400d:5d7e::21" ],"#,
                "",
                1,
            )
            .replacen(r#""ipv6Addresses" : [ "2603:c020:400d:5dbb::10" ],"#, "", 1);
        assert_ne!(before, ANSWER);
        let script = move |t: Duration| {
            Ok(Some(if t < Duration::from_secs(2) {
                before.clone()
            } else {
                ANSWER.to_owned()
            }))
        };
        // The primary's DHCPv4 lease: complete at once, its IPv6 not waited for.
        let clock = FakeClock::new();
        let imds = Scripted::every(&clock, script.clone());
        let v4 = event("02:00:17:0d:6b:be", "10.0.0.183", "10.0.0.1");
        let out = OciNetwork::wait(&imds, &v4, &policy(30_000), &clock);
        assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
        assert_eq!(imds.count(), 1);
        // The secondary's DHCPv6 lease waits for its address, and only it.
        let clock = FakeClock::new();
        let imds = Scripted::every(&clock, script);
        let v6 = NicEvent::try_new(
            crate::model::IfName::try_new("ens4").unwrap(),
            "02:00:17:18:f6:ff".parse().unwrap(),
            vec![crate::model::Lease {
                family: crate::model::Family::V6,
                address: "2603:c020:400d:5d7e::20".parse().unwrap(),
                prefix_len: 128,
                routers: Vec::new(),
                reason: Reason::Bound,
            }],
        )
        .unwrap();
        let out = OciNetwork::wait(&imds, &v6, &policy(30_000), &clock);
        assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
        assert!(imds.count() > 1 && clock.t() >= Duration::from_secs(2));
        // Never published within the budget: Partial, IPv6's addresses missing.
        let clock = FakeClock::new();
        let stale = ANSWER.replacen(
            r#""ipv6Addresses" : [ "2603:c020:400d:5d7e::20", "2603:c020:400d:5d7e::21" ],"#,
            "",
            1,
        );
        let imds = Scripted::every(&clock, move |_| Ok(Some(stale.clone())));
        let out = OciNetwork::wait(&imds, &v6, &policy(2_000), &clock);
        let Outcome::Partial { missing, .. } = out else {
            panic!("{out:?}")
        };
        assert_eq!(
            missing,
            [Missing::Addresses {
                family: crate::model::Family::V6
            }]
        );
    }

    #[test]
    fn the_document_rows() {
        let docs = rows::Documents {
            event: secondary(),
            path: "/opc/v2/vnics/",
            without: PRIMARY_ONLY,
            with: VM_TWO,
            garbage: ("<html>oops</html>", "OCI IMDS vnics"),
        };
        rows::run(&docs, |f, e, p, c| OciNetwork::wait(f, e, p, c));
    }
}

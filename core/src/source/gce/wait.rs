// SPDX-License-Identifier: Apache-2.0
//! Performs IO (through the fetch it is handed): GCE's consistency wait, the
//! seam's session ([`crate::source::provider::session`]) over one document,
//! `instance/network-interfaces/?recursive=true`, which answers every NIC at
//! once; the pure [`nic`] module says what the answer means.

use super::GCE_ROOT;
use super::nic::{self, Answer, INTERFACES_PATH};
use crate::error::Result;
use crate::source::provider::session::Document;
use crate::source::provider::{Assessment, NicEvent};

impl Document for Answer {
    fn path() -> String {
        format!("{GCE_ROOT}{INTERFACES_PATH}")
    }

    /// The body as it came: [`nic::assess`] parses it.
    fn read(answer: Option<String>, _previous: Option<&Self>) -> Result<Option<Self>> {
        Ok(Some(answer.map_or(Self::NotFound, Self::Body)))
    }

    fn assess(event: &NicEvent, kept: Option<&Self>) -> Result<Assessment> {
        nic::assess(event, kept.unwrap_or(&Self::NotAsked))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::provider::Outcome;
    use crate::source::provider::fake::{FakeClock, Scripted, bound, policy};
    use crate::source::provider::session::rows;

    const ONLY0: &str = r#"[{"mac":"42:01:0a:00:00:0a","ip":"10.0.0.10","gateway":"10.0.0.1","subnetmask":"255.255.255.0"}]"#;
    const TWO: &str = r#"[{"mac":"42:01:0a:00:00:0a","ip":"10.0.0.10","gateway":"10.0.0.1","subnetmask":"255.255.255.0"},
        {"mac":"42:01:0a:00:01:14","ip":"10.0.1.20","gateway":"10.0.1.1","subnetmask":"255.255.255.0","ipAliases":["10.0.1.64/30"]}]"#;

    fn event() -> NicEvent {
        bound("eth1", "42:01:0a:00:01:14", "10.0.1.20", 32, "10.0.1.1")
    }

    #[test]
    fn one_request_when_the_metadata_agrees() {
        let clock = FakeClock::new();
        let f = Scripted::every(&clock, |_| Ok(Some(TWO.to_owned())));
        let out = Answer::wait(&f, &event(), &policy(30_000), &clock);
        let Outcome::Complete(net) = out else {
            panic!("{out:?}")
        };
        let nic = net.nic("42:01:0a:00:01:14".parse().unwrap()).unwrap();
        assert_eq!(nic.device_number, Some(1));
        assert_eq!(nic.ipv4_prefixes.len(), 1);
        assert_eq!(
            f.requests(),
            ["/computeMetadata/v1/instance/network-interfaces/?recursive=true"]
        );
        assert!(clock.sleeps.borrow().is_empty());
    }

    #[test]
    fn the_document_rows() {
        let docs = rows::Documents {
            event: event(),
            path: "/computeMetadata/v1/instance/network-interfaces/?recursive=true",
            without: ONLY0,
            with: TWO,
            garbage: ("[{\"mac\": 1}]", "network-interfaces/0/mac"),
        };
        rows::run(&docs, |f, e, p, c| Answer::wait(f, e, p, c));
    }
}

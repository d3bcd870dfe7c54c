// SPDX-License-Identifier: Apache-2.0
//! Performs IO: ECS's consistency wait, the seam's session
//! ([`crate::source::provider::session`]) over ECS's keys: the pure [`nic`]
//! module decides what to ask next and whether the metadata agrees with the lease
//! (the MAC's folder exists, it lists the leased address, the subnet and gateway
//! answer), the fetch it is handed asks (in production the
//! [`super::Aliyun`] client, bound to the NIC).

use super::nic::{self, Fetched, Request};
use crate::source::provider::session::Keyed;

/// ECS's consistency wait: [`Keyed::wait`] over the [`nic`] module's answers.
pub static ECS_WAIT: Keyed<Fetched, Request> = Keyed {
    primary_mac: Request::PrimaryMac,
    path: Request::path,
    record: Fetched::record,
    assess: nic::assess,
    next_request: nic::next_request,
};

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::error::{Error, ImdsErrorKind};
    use crate::model::Missing;
    use crate::source::provider::fake::{FakeClock, Scripted, bound, policy};
    use crate::source::provider::{NicEvent, Outcome};

    const MACS: &str = "/latest/meta-data/network/interfaces/macs";
    const SECONDARY: &str = "00:16:3e:00:00:02";

    /// The ECS metadata service of a secondary NIC that agrees with its lease.
    fn agreeing(clock: &FakeClock) -> Scripted<'_> {
        Scripted::new(clock)
            .value("/latest/meta-data/mac", "00:16:3e:00:00:01")
            .value(
                &format!("{MACS}/{SECONDARY}/primary-ip-address"),
                "192.168.1.20",
            )
            .value(
                &format!("{MACS}/{SECONDARY}/private-ipv4s"),
                r#"["192.168.1.20"]"#,
            )
            .value(
                &format!("{MACS}/{SECONDARY}/vswitch-cidr-block"),
                "192.168.1.0/24",
            )
            .value(&format!("{MACS}/{SECONDARY}/gateway"), "192.168.1.253")
    }

    fn event() -> NicEvent {
        bound("eth1", SECONDARY, "192.168.1.20", 24, "192.168.1.253")
    }

    #[test]
    fn agreeing_metadata_is_five_requests() {
        let c = FakeClock::new();
        let ecs = agreeing(&c);
        let out = ECS_WAIT.wait(&ecs, &event(), &policy(30_000), &c);
        let Outcome::Complete(net) = out else {
            panic!("{out:?}")
        };
        assert_eq!(net.nics.len(), 1);
        assert_eq!(ecs.count(), 5, "{:?}", ecs.requests());
        assert!(c.sleeps.borrow().is_empty());
    }

    #[test]
    fn a_nic_that_appears_late_is_waited_for() {
        // The hot-plug race: the folder and the address appear after 1 s.
        let c = FakeClock::new();
        let late = |v: &'static str| {
            move |t: Duration| Ok((t >= Duration::from_secs(1)).then(|| v.to_owned()))
        };
        let ecs = agreeing(&c)
            .leaf(
                &format!("{MACS}/{SECONDARY}/primary-ip-address"),
                late("192.168.1.20"),
            )
            .leaf(
                &format!("{MACS}/{SECONDARY}/private-ipv4s"),
                late(r#"["192.168.1.20"]"#),
            );
        let out = ECS_WAIT.wait(&ecs, &event(), &policy(30_000), &c);
        assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
        let log = ecs.requests();
        // mac once; the probe each round (0, 0.1, 0.3, 0.7 s: 404; 1.5 s: there),
        // then the three other keys once.
        assert_eq!(log.iter().filter(|p| p.ends_with("/mac")).count(), 1);
        assert_eq!(
            log.iter()
                .filter(|p| p.ends_with("primary-ip-address"))
                .count(),
            5
        );
        assert_eq!(log.len(), 1 + 5 + 3, "{log:?}");
    }

    #[test]
    fn a_folder_that_never_comes_is_partial_and_an_error_is_never_empty() {
        let c = FakeClock::new();
        let ecs = agreeing(&c).leaf(&format!("{MACS}/{SECONDARY}/primary-ip-address"), |_| {
            Ok(None)
        });
        let out = ECS_WAIT.wait(&ecs, &event(), &policy(3_000), &c);
        let Outcome::Partial { missing, .. } = out else {
            panic!("{out:?}")
        };
        assert_eq!(missing, [Missing::MacFolder]);

        for status in [500, 429, 503] {
            let c = FakeClock::new();
            let ecs = agreeing(&c).leaf("/latest/meta-data/mac", move |_| {
                Err(Error::Imds {
                    method: "GET",
                    url: "http://100.100.100.200/latest/meta-data/mac".into(),
                    kind: ImdsErrorKind::Http {
                        status,
                        retry_after: None,
                    },
                })
            });
            let out = ECS_WAIT.wait(&ecs, &event(), &policy(2_000), &c);
            assert!(matches!(out, Outcome::Failed(_)), "{status}: {out:?}");
        }
        // 400 and a disabled service end the wait at once.
        for kind in [
            ImdsErrorKind::Http {
                status: 400,
                retry_after: None,
            },
            ImdsErrorKind::Disabled,
        ] {
            let c = FakeClock::new();
            let k = kind.clone();
            let ecs = agreeing(&c).leaf("/latest/meta-data/mac", move |_| {
                Err(Error::Imds {
                    method: "PUT",
                    url: "http://100.100.100.200/latest/api/token".into(),
                    kind: k.clone(),
                })
            });
            let out = ECS_WAIT.wait(&ecs, &event(), &policy(30_000), &c);
            assert!(matches!(out, Outcome::Failed(_)), "{kind:?}: {out:?}");
            assert_eq!(ecs.count(), 1);
            assert!(c.sleeps.borrow().is_empty());
        }
    }

    #[test]
    fn garbage_fails_the_wait_naming_the_key() {
        let c = FakeClock::new();
        let ecs = agreeing(&c).value(&format!("{MACS}/{SECONDARY}/private-ipv4s"), "<html>");
        let out = ECS_WAIT.wait(&ecs, &event(), &policy(30_000), &c);
        let Outcome::Failed(e) = out else {
            panic!("{out:?}")
        };
        assert!(e.to_string().contains("private-ipv4s"), "{e}");
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: Google Compute Engine as a [`Provider`]: one [`Gce`] client per
//! NIC wait (the metadata server answers from any NIC: requests are not bound),
//! and the boot stage's datasource, [`GceSource`].

use super::identity::GceSource;
use super::nic::{Answer, INTERFACES_PATH, parse_interfaces};
use super::vlan::{VLANS_PATH, parse_vlans};
use super::{GCE_ENDPOINT, GCE_ROOT, Gce, nic, vlan};
use crate::error::{Error, Result};
use crate::model::{InstanceNetwork, Problem};
use crate::source::provider::http::Fetch;
use crate::source::provider::retry::Retrying;
use crate::source::provider::session::Document;
use crate::source::provider::{
    AddressKeys, Clock, Cloud, CloudSource, EndpointKey, Identity, NicEvent, Outcome, Provider,
    ProviderKind, Unleased, WaitPolicy,
};
use crate::source::{Datasource, SourceKind};

/// The GCE provider: the base URL every client it makes asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GceProvider {
    endpoint: String,
}

impl GceProvider {
    /// A provider asking `endpoint` (`None`: 169.254.169.254). Fails on an endpoint
    /// that is not an `http://` IP literal.
    pub fn try_new(endpoint: Option<&str>) -> Result<Self> {
        let p = Self {
            endpoint: endpoint.unwrap_or(GCE_ENDPOINT).to_owned(),
        };
        p.client()?;
        Ok(p)
    }

    /// A client with the provider's settings.
    pub fn client(&self) -> Result<Gce> {
        Gce::new().with_endpoint(&self.endpoint)
    }
}

impl Provider for GceProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::of(&CLOUD)
    }

    fn wait_for_nic(&self, nic: &NicEvent, policy: &WaitPolicy, clock: &dyn Clock) -> Outcome {
        match self.client() {
            Ok(gce) => Answer::wait(&gce, nic, policy, clock),
            Err(e) => Outcome::Failed(e),
        }
    }

    /// The Dynamic NICs, VLANs on a vNIC ([`vlan`]), which nothing serves DHCP.
    fn unleased(&self, policy: &WaitPolicy, clock: &dyn Clock) -> Option<Result<Unleased>> {
        Some(
            self.client()
                .and_then(|gce| fetch_unleased(&gce, policy, clock)),
        )
    }
}

/// One `instance/vlan-network-interfaces/?recursive=true`, and, when it is
/// there, one `network-interfaces/?recursive=true` for the parents' MACs, each
/// asked again within `policy` while it fails in a way waiting can fix. A 404:
/// the instance has no Dynamic NIC (and leasehook's VLAN links go). Any error
/// changes nothing for the caller.
fn fetch_unleased(fetch: &dyn Fetch, policy: &WaitPolicy, clock: &dyn Clock) -> Result<Unleased> {
    let r = Retrying::new(policy, clock, "GCE");
    let Some(body) = r.get(fetch, &format!("{GCE_ROOT}{VLANS_PATH}"))? else {
        return Ok(Unleased {
            nics: Vec::new(),
            network: InstanceNetwork::default(),
            owns_links: true,
        });
    };
    let vnics = r
        .get(fetch, &format!("{GCE_ROOT}{INTERFACES_PATH}"))?
        .ok_or_else(|| Error::Metadata {
            key: format!("{GCE_ROOT}/instance/network-interfaces"),
            problem: Problem::missing(),
        })?;
    let vnics = parse_interfaces(&vnics)?;
    let vlans = parse_vlans(&body, &vnics)?;
    for v in &vlans {
        log::debug!(
            "GCE Dynamic NIC {} ({}) is VLAN {} on nic{}: leasehook creates its VLAN",
            v.gce_name(),
            v.nic.mac,
            v.vlan,
            v.parent
        );
    }
    Ok(vlan::unleased(&vnics, &vlans))
}

impl Identity for GceProvider {
    fn datasource(&self, policy: WaitPolicy) -> Result<Box<dyn Datasource>> {
        Ok(Box::new(GceSource::new(self.client()?).with_policy(policy)))
    }
}

/// GCE for the hooks; `leasehook watch` follows its NIC list live.
pub static CLOUD: Cloud = Cloud {
    name: "gce",
    kinds: &[SourceKind::Gce],
    check: super::detect::check,
    seeds: |_| Vec::new(),
    platform: |_| None,
    endpoint: Some(EndpointKey {
        key: "gce.endpoint",
        env: "LEASEHOOK_GCE_ENDPOINT",
        help: "the Google Compute Engine metadata server's base URL, an http:// IP literal (default http://169.254.169.254)",
        default: GCE_ENDPOINT,
        check: |url| Ok(Gce::new().with_endpoint(url)?.endpoint().to_owned()),
    }),
    provider: |s| Ok(Box::new(GceProvider::try_new(s.endpoint)?)),
    parse_saved: |text| nic::parse_interfaces(text).map(|nics| nic::network(&nics)),
    live: Some(super::follow::LIVE),
    address_keys: AddressKeys {
        ipv4: Some("ip"),
        ipv6: Some("ipv6s"),
        ipv4_prefix: Some("ip-aliases"),
        ipv6_prefix: Some("ipv6"),
    },
};

/// GCE's datasource for the boot stage.
pub static SOURCE: CloudSource = CloudSource {
    cloud: &CLOUD,
    local_stage: |_| Some("the metadata server needs the network"),
    datasource: |s, _, policy| GceProvider::try_new(s.endpoint)?.datasource(policy),
    region_ids: &[],
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceKind;
    use crate::source::provider::ProviderChoice;

    #[test]
    fn auto_resolves_to_gce_on_a_gce_verdict_and_the_name_parses() {
        assert_eq!(
            ProviderChoice::Auto.resolve(Some(SourceKind::Gce)),
            ProviderKind::of(&crate::source::gce::CLOUD)
        );
        assert_eq!(
            "gce".parse::<ProviderChoice>().unwrap(),
            ProviderChoice::Named(ProviderKind::of(&crate::source::gce::CLOUD))
        );
        assert_eq!(
            ProviderKind::of(&crate::source::gce::CLOUD).to_string(),
            "gce"
        );
    }

    #[test]
    fn dynamic_nics_cost_one_request_when_there_are_none_and_two_when_there_are() {
        use crate::source::provider::fake::{FakeClock, Scripted, http, policy};
        let vlans = format!("{GCE_ROOT}{VLANS_PATH}");
        let vnics = format!("{GCE_ROOT}{INTERFACES_PATH}");
        // None (a 404): one request, nothing listed, leasehook's links owned
        // (so they go).
        let clock = FakeClock::new();
        let f = Scripted::new(&clock);
        let u = fetch_unleased(&f, &policy(3_000), &clock).unwrap();
        assert_eq!(f.requests(), std::slice::from_ref(&vlans));
        assert!(u.nics.is_empty() && u.owns_links);
        // One on nic0: its parent's MAC comes from the vNICs' list; a 503 is
        // asked again.
        let clock = FakeClock::new();
        let f = Scripted::new(&clock)
            .value(
                &vlans,
                r#"{"0":{"5":{"mac":"42:01:0a:00:02:1e","ip":"10.0.2.30","gateway":"10.0.2.1","subnetmask":"255.255.255.0"}}}"#,
            )
            .value(&vnics, crate::source::gce::nic::tests::TWO);
        f.fail(&vlans, vec![http(503, None)]);
        let u = fetch_unleased(&f, &policy(3_000), &clock).unwrap();
        assert_eq!(f.requests(), [vlans.as_str(), &vlans, &vnics]);
        assert_eq!(u.nics.len(), 1);
        assert_eq!(
            u.nics[0].link,
            Some(crate::model::NicLink::Vlan {
                parent: crate::model::Parent::Mac("42:01:0a:00:00:0a".parse().unwrap()),
                vlan: 5
            })
        );
        // The vNICs' list missing, or garbage: an error, never "no Dynamic NIC".
        let clock = FakeClock::new();
        let f = Scripted::new(&clock).value(&vlans, "{}");
        let e = fetch_unleased(&f, &policy(1_000), &clock).unwrap_err();
        assert!(e.to_string().contains("network-interfaces"), "{e}");
        let clock = FakeClock::new();
        let f = Scripted::new(&clock)
            .value(&vlans, "<html>")
            .value(&vnics, crate::source::gce::nic::tests::TWO);
        assert!(fetch_unleased(&f, &policy(1_000), &clock).is_err());
    }

    /// GCE as the hooks ask it, over a scripted metadata server.
    struct FakeGce<'c>(crate::source::provider::fake::Scripted<'c>);

    impl std::fmt::Debug for FakeGce<'_> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("FakeGce")
        }
    }

    impl Provider for FakeGce<'_> {
        fn kind(&self) -> ProviderKind {
            ProviderKind::of(&CLOUD)
        }

        fn wait_for_nic(&self, nic: &NicEvent, policy: &WaitPolicy, clock: &dyn Clock) -> Outcome {
            Answer::wait(&self.0, nic, policy, clock)
        }

        fn unleased(&self, policy: &WaitPolicy, clock: &dyn Clock) -> Option<Result<Unleased>> {
            Some(fetch_unleased(&self.0, policy, clock))
        }
    }

    /// Issue 36 item 3 through `refresh`, in process: a Dynamic NIC (VLAN 5
    /// on nic1) gets its VLAN `eth1.5` with its MAC, its /32 and rule in the
    /// same run; the list's 404 takes all of it away, the vNICs stay.
    #[test]
    fn refresh_links_and_routes_a_dynamic_nic_and_takes_it_away() {
        use std::cell::RefCell;
        use std::rc::Rc;

        use crate::apply::record::RecordingApplier;
        use crate::hook::{Effects, HookConfig, refresh_with};
        use crate::model::{IfName, Link};
        use crate::source::provider::fake::{FakeClock, Scripted};

        const DYNAMIC: &str = "42:01:0a:00:02:1e";
        let vlans: Rc<RefCell<Option<String>>> = Rc::new(RefCell::new(Some(format!(
            r#"{{"1":{{"5":{{"mac":"{DYNAMIC}","ip":"10.0.2.30","gateway":"10.0.2.1","subnetmask":"255.255.255.0","vlan":5}}}}}}"#
        ))));
        let served = Rc::clone(&vlans);
        let scripted = Scripted::untimed()
            .value(
                &format!("{GCE_ROOT}{INTERFACES_PATH}"),
                crate::source::gce::nic::tests::TWO,
            )
            .leaf(&format!("{GCE_ROOT}{VLANS_PATH}"), move |_| {
                Ok(served.borrow().clone())
            });
        let gce = FakeGce(scripted);
        let mut k = RecordingApplier::with_links(
            [("eth0", "42:01:0a:00:00:0a"), ("eth1", "42:01:0a:00:01:14")]
                .iter()
                .map(|(n, m)| Link {
                    name: IfName::try_new(n).unwrap(),
                    mac: m.parse().unwrap(),
                    ipv6_router: None,
                })
                .collect(),
        );
        let root = tempfile::tempdir().unwrap();
        let cfg = HookConfig::for_test(root.path(), &[("LEASEHOOK_IMDS_BUDGET_S", "3")]);
        let clock = FakeClock::new();
        let refresh = |k: &mut RecordingApplier| {
            let mut fx = Effects {
                kernel: k,
                provider: &gce,
                clock: &clock,
            };
            refresh_with(&mut fx, None, &cfg).unwrap()
        };
        let out = refresh(&mut k);
        assert_eq!(k.link_names(), ["eth0", "eth1", "eth1.5"], "{out:?}");
        let vlan = k
            .links
            .iter()
            .find(|l| l.name.as_str() == "eth1.5")
            .unwrap();
        assert_eq!(vlan.mac, Some(DYNAMIC.parse().unwrap()));
        let table = 10_000 + crate::source::provider::slot::device_slot(DYNAMIC.parse().unwrap());
        assert!(
            k.owned
                .addresses
                .iter()
                .any(|a| a.dev.as_str() == "eth1.5" && a.addr.to_string() == "10.0.2.30/32"),
            "{:?}",
            k.owned
        );
        assert!(
            k.owned.rules.iter().any(|r| r.table == table),
            "{:?}",
            k.owned
        );
        // Gone from the metadata (a 404 for the list): the VLAN and what was on
        // it go.
        *vlans.borrow_mut() = None;
        refresh(&mut k);
        assert_eq!(k.link_names(), ["eth0", "eth1"]);
        assert!(
            k.owned.addresses.is_empty() && k.owned.rules.is_empty(),
            "{:?}",
            k.owned
        );
    }

    #[test]
    fn the_endpoint_is_checked_when_the_provider_is_built() {
        let e = GceProvider::try_new(Some("http://metadata.google.internal"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("gce.endpoint"), "{e}");
        let p = GceProvider::try_new(None).unwrap();
        assert_eq!(p.kind(), ProviderKind::of(&crate::source::gce::CLOUD));
        assert_eq!(p.client().unwrap().endpoint(), GCE_ENDPOINT);
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Issue 34, `OpenStack`'s SLAAC: the refresh and udev add paths route the
//! address the kernel configured from router advertisements when the metadata
//! vouches for it, never add or remove it, and route nothing else the kernel
//! configured. The provider is `OpenStack`'s own parsing of a
//! `network_data.json` (no HTTP), the kernel the recording one.

use std::cell::RefCell;

use super::*;
use crate::diff::Op;
use crate::model::Address;
use crate::source::openstack::nic::{self, Answer, parse_network_data};
use crate::source::provider::Unleased;
use crate::source::provider::slot::device_slot;

/// `OpenStack` answering from one `network_data.json` (changed between
/// steps): its wait is `nic::assess`, its NICs without DHCP `nic::unleased`.
#[derive(Debug)]
struct Nova(RefCell<String>);

impl Provider for Nova {
    fn kind(&self) -> ProviderKind {
        ProviderKind::from_name("openstack").unwrap()
    }

    fn wait_for_nic(&self, nic: &NicEvent, _policy: &WaitPolicy, _clock: &dyn Clock) -> Outcome {
        match nic::assess(nic, &Answer::Body(self.0.borrow().clone())) {
            Ok(a) if a.is_complete() => Outcome::Complete(a.network),
            Ok(a) => Outcome::Partial {
                network: a.network,
                missing: a.missing,
            },
            Err(e) => Outcome::Failed(e),
        }
    }

    fn unleased(&self, _policy: &WaitPolicy, _clock: &dyn Clock) -> Option<Result<Unleased>> {
        Some(parse_network_data(&self.0.borrow()).map(|d| Unleased {
            nics: nic::unleased(&d),
            network: nic::network(&d),
            owns_links: false,
        }))
    }
}

/// The EUI-64 of eth1's MAC (`02:00:00:00:00:02`) in `fd00:98:1::/64`.
const SLAAC: &str = "fd00:98:1::ff:fe00:2";

/// eth0 on DHCPv4; eth1 on `v4` (when given: an IPv4 network) and an
/// `ipv6_slaac` network listing Nova's address for it, [`SLAAC`].
fn network_data(v4: Option<&str>) -> String {
    let v4 = v4.map_or_else(String::new, |n| format!(r#"{{"type":"{n}","link":"b"}},"#));
    format!(
        r#"{{"links":[
        {{"id":"a","type":"ovs","ethernet_mac_address":"02:00:00:00:00:01"}},
        {{"id":"b","type":"ovs","ethernet_mac_address":"{ETH1_MAC}"}}],
      "networks":[{{"type":"ipv4_dhcp","link":"a"}},{v4}
        {{"type":"ipv6_slaac","link":"b","ip_address":"{SLAAC}",
          "netmask":"ffff:ffff:ffff:ffff::",
          "routes":[{{"network":"::","netmask":"::","gateway":"fd00:98:1::1"}}]}}]}}"#
    )
}

/// An address the kernel holds on eth1 (another protocol's than leasehook's).
fn kernel_address(k: &mut RecordingApplier, addr: &str) -> Address {
    let a = Address {
        addr: addr.parse().unwrap(),
        dev: eth1(),
    };
    k.foreign.addresses.insert(a.clone());
    a
}

fn refresh_nova(k: &mut RecordingApplier, nova: &Nova, cfg: &HookConfig) -> Vec<RefreshOutcome> {
    with_effects(k, nova, |fx| refresh_with(fx, None, cfg))
}

fn table() -> u32 {
    10_000 + device_slot(ETH1_MAC.parse().unwrap())
}

fn routes(k: &RecordingApplier) -> Vec<String> {
    k.owned.routes.iter().map(ToString::to_string).collect()
}

/// No write ever adds or removes an address: the kernel's is its own.
fn no_address_written(k: &RecordingApplier) {
    assert!(
        !k.writes
            .iter()
            .any(|o| matches!(o, Op::AddAddress(_) | Op::DelAddress(_))),
        "{:?}",
        k.writes
    );
}

#[test]
fn refresh_routes_the_kernels_slaac_address_and_nothing_else() {
    let (mut k, cfg, _root) = world();
    let nova = Nova(RefCell::new(network_data(Some("ipv4_dhcp"))));
    let t = table();
    // No router advertisement yet: nothing to route, nothing recorded.
    let link_local = kernel_address(&mut k, "fe80::ff:fe00:2/64");
    let out = refresh_nova(&mut k, &nova, &cfg);
    assert!(
        matches!(&out[..], [RefreshOutcome::Kept(n, why)] if *n == eth1() && why.contains(SLAAC)),
        "{out:?}"
    );
    assert!(k.writes.is_empty() && recorded(&cfg).is_none());
    // An autoconf address the metadata does not vouch for (a privacy one,
    // another prefix's): no rule, and the why names it.
    let privacy = kernel_address(&mut k, "fd00:98:1:0:8c1a:2b3c:4d5e:6f70/64");
    let other = kernel_address(&mut k, "fd00:77::ff:fe00:2/64");
    let out = refresh_nova(&mut k, &nova, &cfg);
    let [RefreshOutcome::Kept(_, why)] = &out[..] else {
        panic!("{out:?}")
    };
    assert!(why.contains("fd00:98:1:0:8c1a:2b3c:4d5e:6f70/64"), "{why}");
    assert!(why.contains("fd00:77::ff:fe00:2/64"), "{why}");
    assert!(!why.contains("fe80::"), "{why}");
    assert!(k.writes.is_empty());
    // The kernel configures the EUI-64 from the RA: rules and table, no address.
    let slaac = kernel_address(&mut k, &format!("{SLAAC}/64"));
    let out = refresh_nova(&mut k, &nova, &cfg);
    assert!(
        matches!(&out[..], [RefreshOutcome::Addressed(n, r)] if *n == eth1() && r.writes() > 0),
        "{out:?}"
    );
    assert_eq!(
        rules(&k),
        [format!("from {SLAAC}/128 lookup {t} priority {t}")]
    );
    assert_eq!(
        routes(&k),
        [
            format!("default via fd00:98:1::1 dev eth1 table {t}"),
            format!("fd00:98:1::/64 dev eth1 table {t}"),
        ]
    );
    assert!(k.owned.addresses.is_empty(), "{:?}", k.owned.addresses);
    no_address_written(&k);
    let st = recorded(&cfg).unwrap();
    assert_eq!(st.leases().len(), 1);
    assert_eq!(st.leases()[0].reason, Reason::Autoconf);
    assert!(st.objects().addresses.is_empty());
    // eth1's DHCPv4 lease comes: its family is added beside, and refresh then
    // follows both (the DHCP lease, the kernel's address), unchanged.
    let bound = LeaseEvent {
        interface: eth1(),
        family: Family::V4,
        reason: Reason::Bound,
        new: Some(Lease {
            family: Family::V4,
            address: "10.98.1.20".parse().unwrap(),
            prefix_len: 24,
            routers: vec!["10.98.1.1".parse().unwrap()],
            reason: Reason::Bound,
        }),
        old: None,
    };
    let worker = Path::new("/nonexistent/leasehook-worker");
    let out = with_effects(&mut k, &nova, |fx| handle_with(fx, &bound, &cfg, worker));
    assert!(matches!(out, HookOutcome::Applied(_)), "{out:?}");
    assert_eq!(rules(&k).len(), 2, "{:?}", rules(&k));
    let writes = k.writes.len();
    let out = refresh_nova(&mut k, &nova, &cfg);
    assert!(
        matches!(&out[..], [RefreshOutcome::Refreshed(_, r)] if r.writes() == 0),
        "{out:?}"
    );
    assert_eq!(k.writes.len(), writes);
    // The kernel drops the address (its prefix's lifetime ran out): the IPv6
    // rules and routes go, the IPv4 ones stay, the kernel's addresses too.
    k.foreign.addresses.remove(&slaac);
    let out = refresh_nova(&mut k, &nova, &cfg);
    assert!(
        matches!(&out[..], [RefreshOutcome::Refreshed(_, r)] if r.writes() > 0),
        "{out:?}"
    );
    assert_eq!(
        rules(&k),
        [format!("from 10.98.1.20/32 lookup {t} priority {t}")]
    );
    assert!(
        routes(&k).iter().all(|r| !r.contains("fd00")),
        "{:?}",
        routes(&k)
    );
    let st = recorded(&cfg).unwrap();
    assert_eq!(
        st.families.keys().copied().collect::<Vec<_>>(),
        [Family::V4]
    );
    for a in [&link_local, &privacy, &other] {
        assert!(k.foreign.addresses.contains(a));
    }
    no_address_written(&k);
}

#[test]
fn the_udev_path_routes_an_ipv6_only_slaac_port_from_the_kernels_address() {
    // No IPv4 network on eth1: the kernel's SLAAC address alone routes it,
    // through `refresh --without-dhcp --iface eth1`; a RELEASE of a DHCP
    // client started on it anyway changes nothing.
    let (mut k, cfg, _root) = world();
    let nova = Nova(RefCell::new(network_data(None)));
    kernel_address(&mut k, &format!("{SLAAC}/64"));
    let out = with_effects(&mut k, &nova, |fx| {
        address_unleased_with(fx, &cfg, Some(&eth1()))
    });
    assert!(
        matches!(&out[..], [RefreshOutcome::Addressed(n, _)] if *n == eth1()),
        "{out:?}"
    );
    let t = table();
    assert_eq!(
        rules(&k),
        [format!("from {SLAAC}/128 lookup {t} priority {t}")]
    );
    no_address_written(&k);
    // Followed as a NIC without DHCP: unchanged, nothing written.
    let writes = k.writes.len();
    let out = with_effects(&mut k, &nova, |fx| {
        address_unleased_with(fx, &cfg, Some(&eth1()))
    });
    assert!(
        matches!(&out[..], [RefreshOutcome::Refreshed(_, r)] if r.writes() == 0),
        "{out:?}"
    );
    assert_eq!(k.writes.len(), writes);
    let mut released = LeaseEvent {
        interface: eth1(),
        family: Family::V6,
        reason: Reason::Release,
        new: None,
        old: None,
    };
    released.reason = Reason::Expire;
    let out = run(&mut k, &Scripted::new([]), &cfg, &released);
    assert!(
        matches!(&out, HookOutcome::Removed(r) if r.writes() == 0),
        "{out:?}"
    );
    assert_eq!(rules(&k).len(), 1);
    // The metadata stops vouching for it (the port moved to a stateful
    // subnet): its rules go, the address stays the kernel's.
    *nova.0.borrow_mut() = network_data(None).replace("ipv6_slaac", "ipv6_dhcpv6-stateful");
    let out = refresh_nova(&mut k, &nova, &cfg);
    assert!(
        matches!(&out[..], [RefreshOutcome::Unlisted(..)]),
        "{out:?}"
    );
    assert!(k.owned.rules.is_empty() && k.owned.routes.is_empty());
    assert_eq!(k.foreign.addresses.len(), 1);
    no_address_written(&k);
}

#[test]
fn a_dhcpv4_nic_gets_its_slaac_half_at_the_timers_refresh() {
    // eth1's DHCPv4 lease is recorded first (the RA comes later): the timer's
    // refresh adds the IPv6 half from the kernel's address beside it, and a
    // refresh while the metadata is down keeps it.
    let (mut k, cfg, _root) = world();
    let nova = Nova(RefCell::new(network_data(Some("ipv4_dhcp"))));
    let bound = LeaseEvent {
        interface: eth1(),
        family: Family::V4,
        reason: Reason::Bound,
        new: Some(Lease {
            family: Family::V4,
            address: "10.98.1.20".parse().unwrap(),
            prefix_len: 24,
            routers: vec!["10.98.1.1".parse().unwrap()],
            reason: Reason::Bound,
        }),
        old: None,
    };
    let worker = Path::new("/nonexistent/leasehook-worker");
    let out = with_effects(&mut k, &nova, |fx| handle_with(fx, &bound, &cfg, worker));
    assert!(matches!(out, HookOutcome::Applied(_)), "{out:?}");
    let t = table();
    assert_eq!(
        rules(&k),
        [format!("from 10.98.1.20/32 lookup {t} priority {t}")]
    );
    kernel_address(&mut k, &format!("{SLAAC}/64"));
    let out = refresh_nova(&mut k, &nova, &cfg);
    assert!(
        matches!(&out[..], [RefreshOutcome::Refreshed(n, r)] if *n == eth1() && r.writes() > 0),
        "{out:?}"
    );
    assert_eq!(
        rules(&k),
        [
            format!("from 10.98.1.20/32 lookup {t} priority {t}"),
            format!("from {SLAAC}/128 lookup {t} priority {t}"),
        ]
    );
    let st = recorded(&cfg).unwrap();
    let reasons: Vec<Reason> = st.leases().iter().map(|l| l.reason).collect();
    assert_eq!(reasons, [Reason::Bound, Reason::Autoconf]);
    no_address_written(&k);
    // The metadata stops answering (a document that does not parse): the
    // recorded address stands, nothing changes.
    *nova.0.borrow_mut() = "garbage".to_owned();
    let before = k.owned.clone();
    let out = refresh_nova(&mut k, &nova, &cfg);
    assert!(
        matches!(&out[..], [RefreshOutcome::Unchecked(..)]),
        "{out:?}"
    );
    assert_eq!(k.owned, before);
}

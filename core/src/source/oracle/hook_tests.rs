// SPDX-License-Identifier: Apache-2.0
//! Test only: Oracle Cloud's IPv6 through the hook and `leasehook refresh`, in
//! process: the recording kernel, a fake clock, and a provider that answers
//! exactly as [`super::OracleProvider`] does (its wait is
//! [`OciNetwork::wait`](super::vnic::OciNetwork), its NICs without DHCP
//! [`fetch_unleased`]) from a `/opc/v2/vnics/` text the test changes, with no
//! HTTP in between. The instance is the shared dual-stack world of issue 34
//! (`tests/src/oracle_emulator.rs` serves the same values): `eth0`, the primary
//! VNIC, and `eth1`, a secondary VNIC that OCI serves no DHCPv4.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::Path;

use serde_json::{Value, json};

use super::vnic::{OciNetwork, device_slot};
use super::wait::fetch_unleased;
use super::{CLOUD, VNICS_PATH};
use crate::apply::record::RecordingApplier;
use crate::apply::state::{self, InterfaceState, Paths};
use crate::error::Result;
use crate::hook::{Effects, HookConfig, HookOutcome, RefreshOutcome, handle_with, refresh_with};
use crate::model::{Family, IfName, Lease, LeaseEvent, Link, MacAddr, Reason};
use crate::source::provider::fake::FakeClock;
use crate::source::provider::http::Fetch;
use crate::source::provider::session::Document;
use crate::source::provider::{
    Clock, NicEvent, Outcome, Provider, ProviderKind, Unleased, WaitPolicy,
};

const MAC0: &str = "02:00:00:00:00:01";
const MAC1: &str = "02:00:00:00:00:02";
const ROUTER6: &str = "fe80::1";

/// One VNIC entry as OCI writes it: `ipv4` (address, subnet, router) or none
/// (an IPv6-only VNIC: `subnetCidrBlock` `"<null>"`, no `privateIp` nor
/// `virtualRouterIp`), and its IPv6 (addresses, subnet) through [`ROUTER6`].
fn vnic(mac: &str, ipv4: Option<(&str, &str, &str)>, ipv6: Option<(&[&str], &str)>) -> Value {
    let mut v = json!({"macAddr": mac.to_uppercase(), "vlanTag": 1039,
                       "vnicId": format!("ocid1.vnic.oc1.iad.{}", mac.replace(':', ""))});
    match ipv4 {
        Some((ip, subnet, router)) => {
            v["privateIp"] = ip.into();
            v["subnetCidrBlock"] = subnet.into();
            v["virtualRouterIp"] = router.into();
        }
        None => v["subnetCidrBlock"] = "<null>".into(),
    }
    if let Some((addresses, subnet)) = ipv6 {
        v["ipv6Addresses"] = json!(addresses);
        v["ipv6SubnetCidrBlock"] = subnet.into();
        v["ipv6VirtualRouterIp"] = ROUTER6.into();
    }
    v
}

const ETH1_V6: (&[&str], &str) = (&["fd00:98:1::20", "fd00:98:1::21"], "fd00:98:1::/64");

/// The dual-stack world; `eth1_v6: None` leaves eth1's IPv6 out (dropped, or
/// not published yet).
fn world(eth1_v6: Option<(&[&str], &str)>) -> String {
    json!([
        vnic(
            MAC0,
            Some(("10.98.0.10", "10.98.0.0/24", "10.98.0.1")),
            Some((&["fd00:98:0::10"], "fd00:98:0::/64"))
        ),
        vnic(
            MAC1,
            Some(("10.98.1.20", "10.98.1.0/24", "10.98.1.1")),
            eth1_v6
        ),
    ])
    .to_string()
}

/// The IPv6-only variant: eth1 has no IPv4 at all.
fn ipv6_only_world() -> String {
    json!([
        vnic(
            MAC0,
            Some(("10.98.0.10", "10.98.0.0/24", "10.98.0.1")),
            Some((&["fd00:98:0::10"], "fd00:98:0::/64"))
        ),
        vnic(MAC1, None, Some(ETH1_V6)),
    ])
    .to_string()
}

/// OCI's metadata service as the provider reads it, answering the text the
/// test sets.
#[derive(Debug)]
struct Oci {
    vnics: RefCell<String>,
}

impl Oci {
    fn new(vnics: String) -> Self {
        Self {
            vnics: RefCell::new(vnics),
        }
    }

    fn set(&self, vnics: String) {
        *self.vnics.borrow_mut() = vnics;
    }
}

impl Fetch for Oci {
    fn get(&self, path: &str) -> Result<Option<String>> {
        assert_eq!(path, VNICS_PATH);
        Ok(Some(self.vnics.borrow().clone()))
    }
}

/// As [`super::OracleProvider`]: the same wait and the same NICs without DHCP.
impl Provider for Oci {
    fn kind(&self) -> ProviderKind {
        ProviderKind::of(&CLOUD)
    }

    fn wait_for_nic(&self, nic: &NicEvent, policy: &WaitPolicy, clock: &dyn Clock) -> Outcome {
        OciNetwork::wait(self, nic, policy, clock)
    }

    fn unleased(&self, policy: &WaitPolicy, clock: &dyn Clock) -> Option<Result<Unleased>> {
        Some(fetch_unleased(self, policy, clock))
    }
}

fn links() -> Vec<Link> {
    [MAC0, MAC1]
        .iter()
        .enumerate()
        .map(|(i, m)| Link {
            name: IfName::try_new(&format!("eth{i}")).unwrap(),
            mac: m.parse().unwrap(),
            ipv6_router: None,
        })
        .collect()
}

fn setup() -> (RecordingApplier, HookConfig, tempfile::TempDir) {
    let root = tempfile::tempdir().unwrap();
    let cfg = HookConfig::for_test(root.path(), &[("LEASEHOOK_IMDS_BUDGET_S", "3")]);
    (RecordingApplier::with_links(links()), cfg, root)
}

fn eth1() -> IfName {
    IfName::try_new("eth1").unwrap()
}

fn table() -> u32 {
    10_000 + device_slot(MAC1.parse::<MacAddr>().unwrap())
}

fn refresh(k: &mut dyn crate::hook::Kernel, oci: &Oci, cfg: &HookConfig) -> Vec<RefreshOutcome> {
    let clock = FakeClock::new();
    let mut fx = Effects {
        kernel: k,
        provider: oci,
        clock: &clock,
    };
    refresh_with(&mut fx, None, cfg).unwrap()
}

fn hook(k: &mut RecordingApplier, oci: &Oci, cfg: &HookConfig, ev: &LeaseEvent) -> HookOutcome {
    let clock = FakeClock::new();
    let mut fx = Effects {
        kernel: k,
        provider: oci,
        clock: &clock,
    };
    handle_with(&mut fx, ev, cfg, Path::new("/nonexistent/leasehook-worker")).unwrap()
}

/// A DHCPv6 client's `reason` for `address` on eth1 (an `IA_NA` address: /128,
/// no router).
fn dhcp6(reason: Reason, address: &str) -> LeaseEvent {
    let lease = Lease {
        family: Family::V6,
        address: address.parse().unwrap(),
        prefix_len: 128,
        routers: Vec::new(),
        reason,
    };
    let (new, old) = match reason {
        Reason::Release | Reason::Expire => (None, Some(lease)),
        _ => (Some(lease), None),
    };
    LeaseEvent {
        interface: eth1(),
        family: Family::V6,
        reason,
        new,
        old,
    }
}

/// What the kernel holds of leasehook's, family `f`, as `ip` lines.
fn owned(k: &RecordingApplier, f: Family) -> BTreeSet<String> {
    let o = &k.owned;
    o.rules
        .iter()
        .filter(|r| r.family() == f)
        .map(ToString::to_string)
        .chain(
            o.routes
                .iter()
                .filter(|r| r.family() == f)
                .map(ToString::to_string),
        )
        .chain(
            o.addresses
                .iter()
                .filter(|a| a.family() == f)
                .map(ToString::to_string),
        )
        .collect()
}

fn recorded(cfg: &HookConfig) -> Option<InterfaceState> {
    state::read_state_or_set_aside(&Paths::new(&cfg.root), &eth1())
}

/// eth1's IPv6 as the metadata path configures it, in `table`.
fn eth1_v6(t: u32) -> BTreeSet<String> {
    [
        "fd00:98:1::20/128 dev eth1".to_owned(),
        "fd00:98:1::21/128 dev eth1".to_owned(),
        format!("default via {ROUTER6} dev eth1 table {t}"),
        format!("fd00:98:1::/64 dev eth1 table {t}"),
        format!("from fd00:98:1::20/128 lookup {t} priority {t}"),
        format!("from fd00:98:1::21/128 lookup {t} priority {t}"),
    ]
    .into()
}

fn writes_of(k: &RecordingApplier, since: usize, f: Family) -> usize {
    k.writes[since..]
        .iter()
        .filter(|op| {
            op.to_string().contains(match f {
                Family::V4 => "ip -4 ",
                Family::V6 => "ip -6 ",
            })
        })
        .count()
}

#[test]
fn refresh_routes_a_vnics_ipv6_at_once_and_follows_the_metadata_dropping_and_adding_it() {
    let (mut k, cfg, _root) = setup();
    let oci = Oci::new(world(Some(ETH1_V6)));
    let out = refresh(&mut k, &oci, &cfg);
    assert!(
        matches!(&out[..], [RefreshOutcome::Addressed(n, _)] if *n == eth1()),
        "{out:?}"
    );
    // Every IPv6 address (/128), the default route through the published
    // link-local router at once (no router advertisement needed), the subnet.
    assert_eq!(owned(&k, Family::V6), eth1_v6(table()));
    let v4 = owned(&k, Family::V4);
    assert!(v4.contains("10.98.1.20/24 dev eth1"), "{v4:?}");

    // The metadata drops eth1's IPv6: its IPv6 half goes, IPv4 untouched.
    oci.set(world(None));
    let before = k.writes.len();
    let out = refresh(&mut k, &oci, &cfg);
    assert!(
        matches!(&out[..], [RefreshOutcome::Refreshed(n, r)] if *n == eth1() && r.writes() == 6),
        "{out:?}"
    );
    assert!(
        owned(&k, Family::V6).is_empty(),
        "{:?}",
        owned(&k, Family::V6)
    );
    assert_eq!(owned(&k, Family::V4), v4);
    assert_eq!(writes_of(&k, before, Family::V4), 0);
    let st = recorded(&cfg).unwrap();
    assert_eq!(
        st.families.keys().copied().collect::<Vec<_>>(),
        [Family::V4]
    );
    // Again: nothing.
    let before = k.writes.len();
    refresh(&mut k, &oci, &cfg);
    assert_eq!(k.writes.len(), before);

    // IPv6 comes back: added, IPv4 untouched.
    oci.set(world(Some(ETH1_V6)));
    let before = k.writes.len();
    refresh(&mut k, &oci, &cfg);
    assert_eq!(owned(&k, Family::V6), eth1_v6(table()));
    assert_eq!(owned(&k, Family::V4), v4);
    assert_eq!(writes_of(&k, before, Family::V4), 0);
}

#[test]
fn an_ipv6_key_published_late_holds_only_the_ipv6_half() {
    let (mut k, cfg, _root) = setup();
    // eth1's addresses listed, its IPv6 subnet not yet.
    let mut late: Vec<Value> = serde_json::from_str(&world(Some(ETH1_V6))).unwrap();
    late[1]
        .as_object_mut()
        .unwrap()
        .remove("ipv6SubnetCidrBlock");
    let oci = Oci::new(Value::Array(late).to_string());
    let out = refresh(&mut k, &oci, &cfg);
    assert!(
        matches!(&out[..], [RefreshOutcome::Addressed(..)]),
        "{out:?}"
    );
    assert!(owned(&k, Family::V6).is_empty());
    assert!(owned(&k, Family::V4).contains("10.98.1.20/24 dev eth1"));
    // Published: the next refresh adds the IPv6 half, and only it.
    oci.set(world(Some(ETH1_V6)));
    let before = k.writes.len();
    refresh(&mut k, &oci, &cfg);
    assert_eq!(owned(&k, Family::V6), eth1_v6(table()));
    assert_eq!(writes_of(&k, before, Family::V4), 0);
}

#[test]
fn an_ipv6_only_vnic_is_configured_from_ipv6_alone() {
    let (mut k, cfg, _root) = setup();
    let oci = Oci::new(ipv6_only_world());
    let out = refresh(&mut k, &oci, &cfg);
    assert!(
        matches!(&out[..], [RefreshOutcome::Addressed(n, _)] if *n == eth1()),
        "{out:?}"
    );
    assert_eq!(owned(&k, Family::V6), eth1_v6(table()));
    assert!(
        owned(&k, Family::V4).is_empty(),
        "{:?}",
        owned(&k, Family::V4)
    );
    let st = recorded(&cfg).unwrap();
    assert_eq!(
        st.families.keys().copied().collect::<Vec<_>>(),
        [Family::V6]
    );
    // A DHCPv6 lease on it never waits for an IPv4 key: complete at once.
    let clock = FakeClock::new();
    let ev = NicEvent::try_new(
        eth1(),
        MAC1.parse().unwrap(),
        dhcp6(Reason::Bound, "fd00:98:1::20")
            .new
            .into_iter()
            .collect(),
    )
    .unwrap();
    let out = oci.wait_for_nic(&ev, &WaitPolicy::default(), &clock);
    assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
    assert!(clock.sleeps.borrow().is_empty());
}

#[test]
fn a_dhcpv6_lease_on_a_secondary_vnic_is_routed_and_never_fights_the_metadata() {
    // The DHCPv6 client first: the hook routes its lease on eth1 as the
    // secondary it is, the default through the published router at once.
    let (mut k, cfg, _root) = setup();
    let oci = Oci::new(world(Some(ETH1_V6)));
    let out = hook(&mut k, &oci, &cfg, &dhcp6(Reason::Bound, "fd00:98:1::20"));
    assert!(
        matches!(&out, HookOutcome::Applied(r) if r.writes() > 0),
        "{out:?}"
    );
    let t = table();
    let mut want = eth1_v6(t);
    // The leased address is the client's, not leasehook's.
    want.remove("fd00:98:1::20/128 dev eth1");
    assert_eq!(owned(&k, Family::V6), want);
    // refresh: the metadata's IPv4 is added, the client's IPv6 left as it is.
    let before = k.writes.len();
    let out = refresh(&mut k, &oci, &cfg);
    assert!(
        matches!(&out[..], [RefreshOutcome::Refreshed(n, r)] if *n == eth1() && r.writes() > 0),
        "{out:?}"
    );
    assert!(owned(&k, Family::V4).contains("10.98.1.20/24 dev eth1"));
    assert_eq!(writes_of(&k, before, Family::V6), 0);
    assert_eq!(owned(&k, Family::V6), want);
    let st = recorded(&cfg).unwrap();
    assert_eq!(
        st.families[&Family::V6].lease.as_ref().map(|l| l.reason),
        Some(Reason::Bound)
    );
    // Again, and the client's renewal: nothing.
    let before = k.writes.len();
    refresh(&mut k, &oci, &cfg);
    let out = hook(&mut k, &oci, &cfg, &dhcp6(Reason::Renew, "fd00:98:1::20"));
    assert!(
        matches!(&out, HookOutcome::Applied(r) if r.writes() == 0),
        "{out:?}"
    );
    assert_eq!(k.writes.len(), before);

    // The metadata first: the client's lease of the address the metadata gave
    // changes nothing (planning it would take leasehook's address away, and the
    // next refresh would add it again).
    let (mut k, cfg, _root) = setup();
    refresh(&mut k, &oci, &cfg);
    assert_eq!(owned(&k, Family::V6), eth1_v6(t));
    let before = k.writes.len();
    for reason in [Reason::Bound, Reason::Renew, Reason::Release] {
        let out = hook(&mut k, &oci, &cfg, &dhcp6(reason, "fd00:98:1::20"));
        assert!(
            matches!(&out, HookOutcome::Kept(why) if why.contains("configured from the metadata"))
                || matches!(&out, HookOutcome::Removed(r) if r.writes() == 0),
            "{reason:?}: {out:?}"
        );
    }
    refresh(&mut k, &oci, &cfg);
    assert_eq!(k.writes.len(), before);
    assert_eq!(owned(&k, Family::V6), eth1_v6(t));
}

#[test]
fn a_hostile_published_ipv6_router_is_refused_and_the_rest_configured() {
    let (mut k, cfg, _root) = setup();
    let mut v: Vec<Value> = serde_json::from_str(&world(Some(ETH1_V6))).unwrap();
    // The metadata service's own address as the router.
    v[1]["ipv6VirtualRouterIp"] = "fd00:c1::a9fe:a9fe".into();
    let oci = Oci::new(Value::Array(v).to_string());
    refresh(&mut k, &oci, &cfg);
    let v6 = owned(&k, Family::V6);
    assert!(
        v6.iter().all(|l| !l.contains("fd00:c1::a9fe:a9fe")),
        "{v6:?}"
    );
    let mut want = eth1_v6(table());
    want.retain(|l| !l.starts_with("default"));
    assert_eq!(v6, want);
}

/// The recording kernel on a Kubernetes node whose CNI routes eth1 (a default
/// route via eth1 in a table of its own, as the AWS VPC CNI's per-ENI table).
struct CniNode(RecordingApplier);

impl crate::apply::Applier for CniNode {
    fn links(&mut self) -> Result<Vec<crate::apply::KernelLink>> {
        self.0.links()
    }

    fn observe(
        &mut self,
        links: &crate::apply::LinkIndex,
        recorded: &BTreeSet<crate::model::Address>,
    ) -> Result<crate::apply::Observed> {
        self.0.observe(links, recorded)
    }

    fn execute(&mut self, op: &crate::diff::Op, links: &crate::apply::LinkIndex) -> Result<()> {
        self.0.execute(op, links)
    }
}

impl crate::apply::links::LinkKernel for CniNode {
    fn link_details(&mut self) -> Result<Vec<crate::apply::links::LinkDetail>> {
        crate::apply::links::LinkKernel::link_details(&mut self.0)
    }

    fn add_link(&mut self, new: &crate::apply::links::NewLink, lower: u32) -> Result<u32> {
        crate::apply::links::LinkKernel::add_link(&mut self.0, new, lower)
    }

    fn del_link(&mut self, index: u32) -> Result<()> {
        crate::apply::links::LinkKernel::del_link(&mut self.0, index)
    }
}

impl crate::hook::Kernel for CniNode {
    fn node_view(
        &mut self,
        _mode: crate::kubernetes::Mode,
        _root: &Path,
    ) -> Result<(crate::kubernetes::Decision, crate::kubernetes::NodeView)> {
        let view = crate::kubernetes::NodeView {
            routes: vec![crate::kubernetes::ForeignRoute {
                table: 3,
                to: "::/0".parse().unwrap(),
                via: Some(ROUTER6.parse::<IpAddr>().unwrap()),
                dev: Some(eth1()),
            }],
            links: vec![IfName::try_new("eth0").unwrap(), eth1()],
            ..crate::kubernetes::NodeView::default()
        };
        Ok((
            crate::kubernetes::decide(crate::kubernetes::Mode::On, &view),
            view,
        ))
    }

    fn bring_up(&mut self, index: u32) -> Result<bool> {
        crate::hook::Kernel::bring_up(&mut self.0, index)
    }
}

#[test]
fn a_vnic_the_cni_owns_gets_no_ipv6_address_either() {
    let (k, cfg, _root) = setup();
    let mut node = CniNode(k);
    let oci = Oci::new(world(Some(ETH1_V6)));
    let out = refresh(&mut node, &oci, &cfg);
    assert!(
        matches!(&out[..], [RefreshOutcome::Kept(n, why)] if *n == eth1() && why.contains("CNI")),
        "{out:?}"
    );
    assert!(node.0.writes.is_empty(), "{:?}", node.0.writes);
    assert!(recorded(&cfg).is_none());
}

/// A bare-metal shape's VNICs: the primary on physical NIC 0 (untagged) and
/// `vlan_mac`'s VNIC as VLAN 100 on physical NIC 1 (eth1).
fn bare_metal(vlan_mac: &str) -> (Value, Value) {
    let mut primary = vnic(
        MAC0,
        Some(("10.98.0.10", "10.98.0.0/24", "10.98.0.1")),
        None,
    );
    primary["nicIndex"] = json!(0);
    primary["vlanTag"] = json!(0);
    let mut vlan = vnic(
        vlan_mac,
        Some(("10.98.1.30", "10.98.1.0/24", "10.98.1.1")),
        None,
    );
    vlan["nicIndex"] = json!(1);
    vlan["vlanTag"] = json!(100);
    (primary, vlan)
}

/// Issue 36 item 3 through `refresh`: a bare-metal VLAN VNIC gets its macvlan
/// and VLAN on physical NIC 1 (eth1) and is configured on the VLAN in the same
/// run; a metadata error changes nothing; detached, its objects and then
/// leasehook's links go, the physical NICs stay.
#[test]
fn a_bare_metal_vlan_vnic_gets_its_links_and_loses_them_when_detached() {
    const VLAN_MAC: &str = "02:00:17:00:00:99";
    let (mut k, cfg, _root) = setup();
    let (primary, vlan) = bare_metal(VLAN_MAC);
    let oci = Oci::new(json!([primary.clone(), vlan]).to_string());
    let out = refresh(&mut k, &oci, &cfg);
    let vname = IfName::try_new("eth1v100").unwrap();
    assert!(
        matches!(&out[..], [RefreshOutcome::Addressed(n, _)] if *n == vname),
        "{out:?}"
    );
    assert_eq!(k.link_names(), ["eth0", "eth1", "eth1.100", "eth1v100"]);
    assert!(
        k.owned
            .addresses
            .iter()
            .any(|a| a.dev == vname && a.addr.to_string() == "10.98.1.30/24"),
        "{:?}",
        k.owned
    );
    // The metadata failing: nothing changes, no link goes.
    let before = (k.links.clone(), k.owned.clone());
    oci.set("not json".to_owned());
    refresh(&mut k, &oci, &cfg);
    assert_eq!((k.links.clone(), k.owned.clone()), before);
    // Detached.
    oci.set(json!([primary]).to_string());
    let out = refresh(&mut k, &oci, &cfg);
    assert!(
        out.iter()
            .any(|o| matches!(o, RefreshOutcome::Unlisted(n, _) if *n == vname)),
        "{out:?}"
    );
    assert_eq!(k.link_names(), ["eth0", "eth1"]);
    assert!(
        k.owned.addresses.is_empty() && k.owned.rules.is_empty(),
        "{:?}",
        k.owned
    );
}

/// A link of the name leasehook would create that it did not create (an
/// operator's macvlan `eth1.100`, no alias): left alone, and the conflict
/// recorded for `status` (`run/leasehook/conflict/link:<MAC>`) until the link
/// is gone and leasehook's own links are made.
#[test]
fn a_link_in_the_way_is_recorded_for_status_until_it_is_gone() {
    const VLAN_MAC: &str = "02:00:17:00:00:99";
    let (mut k, cfg, _root) = setup();
    let (primary, vlan) = bare_metal(VLAN_MAC);
    let parent = k.links.iter().find(|l| l.name == eth1()).unwrap().index;
    k.links.push(crate::apply::KernelLink {
        index: 90,
        name: IfName::try_new("eth1.100").unwrap(),
        mac: Some("02:aa:00:00:00:01".parse().unwrap()),
    });
    k.details.insert(
        90,
        crate::apply::record::LinkExtra {
            kind: crate::apply::links::LinkKind::Macvlan,
            lower: Some(parent),
            alias: None,
        },
    );
    let oci = Oci::new(json!([primary, vlan]).to_string());
    refresh(&mut k, &oci, &cfg);
    let paths = crate::apply::state::Paths::new(&cfg.root);
    let conflicts = crate::commit::recorded_conflicts(&paths);
    assert!(
        matches!(&conflicts[..], [(file, why)]
            if file == &format!("link:{VLAN_MAC}") && why.contains("eth1.100") && why.contains("did not create")),
        "{conflicts:?}"
    );
    assert!(k.links.iter().all(|l| l.name.as_str() != "eth1v100"));
    // The operator removes their link: leasehook makes its own, the record goes.
    k.links.retain(|l| l.index != 90);
    k.details.remove(&90);
    refresh(&mut k, &oci, &cfg);
    assert!(k.links.iter().any(|l| l.name.as_str() == "eth1v100"));
    assert!(
        crate::commit::recorded_conflicts(&paths).is_empty(),
        "{:?}",
        crate::commit::recorded_conflicts(&paths)
    );
}

/// An unmanaged VNIC (`unmanaged:` by MAC, by its OCID, or by the name of the
/// link leasehook made for it) gets no link from leasehook; a link made before
/// it became unmanaged stays while the metadata lists the VNIC.
#[test]
fn an_unmanaged_vlan_vnic_gets_no_link_and_keeps_the_one_it_has() {
    const VLAN_MAC: &str = "02:00:17:00:00:99";
    let (primary, vlan) = bare_metal(VLAN_MAC);
    let ocid = vlan["vnicId"].as_str().unwrap().to_owned();
    let oci = Oci::new(json!([primary, vlan]).to_string());
    let only_physical = |k: &RecordingApplier| k.link_names() == ["eth0", "eth1"];
    for entry in [VLAN_MAC.to_owned(), format!("interface-id:{ocid}")] {
        let (mut k, mut cfg, _root) = setup();
        cfg.unmanaged = vec![entry.parse().unwrap()];
        refresh(&mut k, &oci, &cfg);
        assert!(only_physical(&k), "{entry}: {:?}", k.links);
        assert!(k.owned.addresses.is_empty(), "{entry}: {:?}", k.owned);
    }
    // Made while managed, then unmanaged by the VLAN's name: it stays, and
    // leasehook leaves its address and rules alone too.
    let (mut k, mut cfg, _root) = setup();
    refresh(&mut k, &oci, &cfg);
    assert!(k.links.iter().any(|l| l.name.as_str() == "eth1v100"));
    cfg.unmanaged = vec!["eth1v*".parse().unwrap()];
    let before = k.links.clone();
    refresh(&mut k, &oci, &cfg);
    assert_eq!(k.links, before);
}

/// Hostile metadata: a VLAN VNIC whose MAC no NIC can have (all zero,
/// multicast) gets no link made for it, and nothing else.
#[test]
fn a_vlan_vnic_with_nobodys_mac_gets_no_link() {
    for bad in ["00:00:00:00:00:00", "01:00:5e:00:00:01"] {
        let (mut k, cfg, _root) = setup();
        let (primary, vlan) = bare_metal(bad);
        let oci = Oci::new(json!([primary, vlan]).to_string());
        refresh(&mut k, &oci, &cfg);
        assert_eq!(k.link_names(), ["eth0", "eth1"], "{bad}");
        assert!(k.owned.addresses.is_empty(), "{bad}: {:?}", k.owned);
    }
}

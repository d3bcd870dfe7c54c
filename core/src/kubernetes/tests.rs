// SPDX-License-Identifier: Apache-2.0
//! The Kubernetes decision on node views shaped like the AWS VPC CNI's and
//! Cilium's (ENI mode), and like a plain instance's.

use super::*;

fn n(s: &str) -> IfName {
    IfName::try_new(s).unwrap()
}

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

fn rule(priority: u32, from: Option<&str>, to: Option<&str>, table: u32) -> ForeignRule {
    ForeignRule {
        priority,
        from: from.map(net),
        to: to.map(net),
        table,
    }
}

fn route(table: u32, to: &str, via: Option<&str>, dev: &str) -> ForeignRoute {
    ForeignRoute {
        table,
        to: net(to),
        via: via.map(|v| v.parse().unwrap()),
        dev: Some(n(dev)),
    }
}

/// The kernel's default rules: 0 local, 32766 main, 32767 default.
fn default_rules() -> Vec<ForeignRule> {
    vec![
        rule(0, None, None, 255),
        rule(32766, None, None, MAIN_TABLE),
        rule(32767, None, None, 253),
    ]
}

/// A plain instance: eth0 by DHCP, eth1 by DHCP with a metric (no_manage-like).
fn plain() -> NodeView {
    NodeView {
        cni_confs: Vec::new(),
        rules: default_rules(),
        routes: vec![
            route(MAIN_TABLE, "0.0.0.0/0", Some("10.0.0.1"), "eth0"),
            route(MAIN_TABLE, "10.0.0.0/24", None, "eth0"),
            route(MAIN_TABLE, "0.0.0.0/0", Some("10.0.1.1"), "eth1"),
            route(MAIN_TABLE, "10.0.1.0/24", None, "eth1"),
        ],
        links: vec![n("lo"), n("eth0"), n("eth1")],
    }
}

/// The AWS VPC CNI's layout: a pod on eth0, a pod on eth2 (device 2, table 3).
fn aws(conf: bool) -> NodeView {
    let mut v = plain();
    if conf {
        v.cni_confs = vec!["10-aws.conflist".to_owned()];
    }
    v.links
        .extend([n("eth2"), n("eni1a2b3c4d5e6"), n("eni9f8e7d6c5b4")]);
    v.rules.extend([
        rule(512, None, Some("10.0.0.11/32"), MAIN_TABLE),
        rule(512, None, Some("10.0.2.21/32"), MAIN_TABLE),
        rule(1536, Some("10.0.2.21/32"), None, 3),
    ]);
    v.routes.extend([
        route(MAIN_TABLE, "10.0.0.11/32", None, "eni1a2b3c4d5e6"),
        route(MAIN_TABLE, "10.0.2.21/32", None, "eni9f8e7d6c5b4"),
        route(3, "0.0.0.0/0", Some("10.0.2.1"), "eth2"),
        route(3, "10.0.2.1/32", None, "eth2"),
    ]);
    v
}

/// Cilium in ENI mode: rules 20 and 111, table 10 + 2 for eth2, lxc veths.
fn cilium() -> NodeView {
    let mut v = plain();
    v.cni_confs = vec!["05-cilium.conflist".to_owned()];
    v.links
        .extend([n("eth2"), n("cilium_host"), n("lxc12ab34cd")]);
    v.rules.extend([
        rule(20, None, Some("10.0.2.21/32"), MAIN_TABLE),
        rule(111, Some("10.0.2.21/32"), None, 12),
    ]);
    v.routes.extend([
        route(MAIN_TABLE, "10.0.2.21/32", None, "lxc12ab34cd"),
        route(12, "0.0.0.0/0", Some("10.0.2.1"), "eth2"),
        route(12, "10.0.2.1/32", None, "eth2"),
    ]);
    v
}

#[test]
fn a_plain_instance_is_not_a_kubernetes_node() {
    let d = decide(Mode::Auto, &plain());
    assert!(!d.node && d.cnis.is_empty(), "{d:?}");
    assert_eq!(
        d.summary(),
        "not a Kubernetes node: no CNI configuration in etc/cni/net.d, no CNI rule"
    );
    // Nothing on it is a CNI's.
    assert!(cni_enis(&plain()).is_empty());
}

#[test]
fn the_aws_vpc_cni_is_found_by_its_file_or_by_its_rules() {
    let d = decide(Mode::Auto, &aws(true));
    assert!(d.node, "{d:?}");
    assert_eq!(d.cnis, [Cni::AwsVpc]);
    assert_eq!(
        d.summary(),
        "Kubernetes node (AWS VPC CNI): AWS VPC CNI configuration etc/cni/net.d/10-aws.conflist; \
         AWS VPC CNI rule at priority 512; 2 pod veth(s) eni* with their /32 routes"
    );
    // Without the file (another root, a CNI starting up): its rules are enough.
    let d = decide(Mode::Auto, &aws(false));
    assert!(d.node && d.cnis == [Cni::AwsVpc], "{d:?}");
    // The file alone (no pod yet, so no rule).
    let mut v = plain();
    v.cni_confs = vec!["10-aws.conflist".to_owned()];
    assert!(decide(Mode::Auto, &v).node);
    // Only egress rules at 1536 (no ingress rule seen) still count.
    let mut v = plain();
    v.rules.push(rule(1536, Some("10.0.2.21/32"), None, 3));
    assert_eq!(decide(Mode::Auto, &v).cnis, [Cni::AwsVpc]);
}

#[test]
fn names_alone_are_not_enough() {
    // eni* veths with /32 routes but neither the file nor a rule.
    let mut v = plain();
    v.links.push(n("eni1a2b3c4d5e6"));
    v.routes
        .push(route(MAIN_TABLE, "10.0.0.11/32", None, "eni1a2b3c4d5e6"));
    let d = decide(Mode::Auto, &v);
    assert!(!d.node, "{d:?}");
    assert!(
        d.summary()
            .ends_with("no CNI configuration or rule: not enough")
    );
    // Files that are not a CNI configuration, or hidden, do not count.
    let mut v = plain();
    v.cni_confs = vec![
        "aws-notes.txt".to_owned(),
        ".10-aws.conflist.swp".to_owned(),
        "10-flannel.conflist".to_owned(),
    ];
    assert!(!decide(Mode::Auto, &v).node);
    // A rule at 512 that looks up another table, or at 1536 from nobody, is not the CNI's.
    let mut v = plain();
    v.rules.extend([
        rule(512, None, Some("10.0.0.11/32"), 100),
        rule(1536, None, None, 3),
    ]);
    assert!(!decide(Mode::Auto, &v).node);
}

#[test]
fn cilium_eni_mode_is_found() {
    let d = decide(Mode::Auto, &cilium());
    assert_eq!(d.cnis, [Cni::Cilium]);
    assert!(
        d.why.contains(&"Cilium rule at priority 20".to_owned()),
        "{d:?}"
    );
    assert!(d.why.iter().any(|w| w.contains("lxc*")), "{d:?}");
    let mut v = cilium();
    v.cni_confs.clear();
    assert_eq!(decide(Mode::Auto, &v).cnis, [Cni::Cilium]);
}

#[test]
fn the_configuration_overrides_detection_both_ways() {
    let off = decide(Mode::Off, &aws(true));
    assert!(!off.node);
    assert_eq!(
        off.summary(),
        "not a Kubernetes node: kubernetes: off (configuration)"
    );
    let on = decide(Mode::On, &plain());
    assert!(on.node && on.cnis.is_empty());
    assert_eq!(
        on.summary(),
        "Kubernetes node: kubernetes: on (configuration)"
    );
    // `on` still names what it found.
    assert_eq!(decide(Mode::On, &aws(true)).cnis, [Cni::AwsVpc]);
    for (text, mode) in [("auto", Mode::Auto), ("on", Mode::On), ("off", Mode::Off)] {
        assert_eq!(text.parse::<Mode>().unwrap(), mode);
        assert_eq!(mode.to_string(), text);
    }
    assert!("maybe".parse::<Mode>().is_err());
}

#[test]
fn the_cnis_enis_are_those_it_routes_and_no_others() {
    for view in [aws(true), cilium()] {
        let enis: Vec<IfName> = cni_enis(&view).into_iter().map(|(e, _)| e).collect();
        assert_eq!(enis, [n("eth2")], "{view:?}");
        // The primary (DHCP, main table) and the no_manage ENI are not.
        assert_eq!(cni_role(&view, &n("eth0")), None);
        assert_eq!(cni_role(&view, &n("eth1")), None);
    }
    assert_eq!(
        cni_role(&aws(true), &n("eth2")).unwrap(),
        "table 3 holds a default route via eth2 that another tool made (a CNI's per-ENI table)"
    );
    // A CNI rule pointing at a table routed via the ENI is enough, default route or not.
    let mut v = plain();
    v.links.push(n("eth3"));
    v.rules.push(rule(1536, Some("10.0.3.21/32"), None, 4));
    v.routes.push(route(4, "10.0.3.0/24", None, "eth3"));
    assert_eq!(
        cni_role(&v, &n("eth3")).unwrap(),
        "the CNI's rule at priority 1536 looks up table 4, routed via eth3"
    );
    // A foreign default route in main (DHCP) or in a reserved table is not a CNI's table.
    let mut v = plain();
    v.routes
        .push(route(253, "0.0.0.0/0", Some("10.0.1.1"), "eth1"));
    assert_eq!(cni_role(&v, &n("eth1")), None);
}

#[test]
fn our_priorities_must_come_after_the_cnis() {
    assert!(check_priorities(true, 10_000).is_ok());
    assert!(check_priorities(true, CNI_LAST_PRIORITY + 1).is_ok());
    // Not a Kubernetes node: any base goes.
    assert!(check_priorities(false, 100).is_ok());
    for base in [0, 100, 512, CNI_LAST_PRIORITY] {
        let e = check_priorities(true, base).unwrap_err().to_string();
        assert!(e.contains("priority_base") && e.contains("1536"), "{e}");
    }
    // The constant is the highest priority any recognised CNI uses.
    let highest = Cni::ALL
        .iter()
        .flat_map(|c| c.priorities().iter().copied())
        .max();
    assert_eq!(highest, Some(CNI_LAST_PRIORITY));
}

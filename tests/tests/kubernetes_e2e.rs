// SPDX-License-Identifier: Apache-2.0
//! Kubernetes nodes (issue 19, SPEC §3.7, docs/kubernetes.md) in the end-to-end
//! world, built the way the CNI builds them: pods in their own namespaces behind
//! host veths (`eni*` for the AWS VPC CNI, `lxc*` for Cilium) with /32 routes in
//! main, the CNI's rules (512/1536; 20/111), a CNI-owned secondary ENI `eth2` with
//! its own table and no DHCP, warm-pool IPs in IMDS, and a `no_manage` ENI `eth1`
//! that runs real dhclient for the node's own use. The VPC (the router namespace)
//! delivers a pod's IP to the ENI that holds it (a permanent neighbour entry, as
//! the VPC fabric does) and checks sources (`rp_filter`).
//!
//! After leasehook's hook on the primary and on `eth1`, a DHCP event on the CNI's
//! `eth2`, a refresh with new warm-pool IPs in IMDS and the udev removal path on
//! `eth2`: every pod answers from the VPC and reaches the echo host with its own
//! address, no pod or warm-pool IP is on a host interface, the CNI's rules, tables
//! and routes are byte-identical, and `eth1` is routed (traffic from its addresses
//! passes the source check). `kubernetes: off` shows the harm the default avoids.
//! Compiled with the `netns` feature; needs root.

#![cfg(feature = "netns")]
#![cfg(test)]
#![allow(clippy::too_many_lines)]

use std::fmt::Write as _;
use std::process::{Child, Output};
use std::time::Duration;

use leasehook_tests::netns::{Netns, leasehook_bin, sibling_bin};
use leasehook_tests::world::{
    MAC0, World, WorldOptions, default_tree, start_first_line, static_nic_mac, wait_until,
};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cni {
    Aws,
    Cilium,
}

/// How the node is built.
#[derive(Debug, Clone, Copy)]
struct Layout {
    cni: Cni,
    /// Prefix mode: pods get IPs of `ipv4-prefix` /28 blocks, not secondary IPs.
    prefix: bool,
    /// The `kubernetes` setting (`None`: the default, auto).
    kubernetes: Option<&'static str>,
}

/// A pod: its namespace, address, host veth and the HTTP server in it that
/// answers with the pod's name.
#[derive(Debug)]
struct Pod {
    server: Child,
    name: String,
    ip: String,
    ns: Netns,
}

impl Drop for Pod {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// Pods drop (and their namespaces go) before the world.
#[derive(Debug)]
struct Node {
    pods: Vec<Pod>,
    w: World,
    layout: Layout,
    /// Pod and warm-pool IPs (and the prefixes' addresses): never on a host link.
    pod_ips: Vec<String>,
    prefixes: Vec<ipnet::Ipv4Net>,
}

const POD_SERVER: &str = "\
import http.server, sys
name = sys.argv[1].encode()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header('Content-Length', str(len(name))); self.end_headers(); self.wfile.write(name)
    def log_message(self, *a): pass
s = http.server.HTTPServer(('0.0.0.0', 8080), H)
print('ready', flush=True)
s.serve_forever()
";

/// The CNI's ENI: device-number 2 on card 0.
const ETH2_MAC_N: u8 = 2;

fn cni_table(cni: Cni, device: u32) -> u32 {
    match cni {
        // device-number + 1
        Cni::Aws => device + 1,
        // RouteTableInterfacesOffset (10) + the ENI's number
        Cni::Cilium => 10 + device,
    }
}

/// One ENI's pods: (ENI, pod IPs, warm-pool IPs, prefix).
type EniPods = (
    &'static str,
    Vec<&'static str>,
    Vec<&'static str>,
    Option<&'static str>,
);

/// (ENI, pod IPs, warm-pool IPs, prefix) for the layout. The primary's pods are
/// 10.98.0.x, the CNI ENI's 10.98.2.x.
fn addressing(layout: Layout) -> [EniPods; 2] {
    if layout.prefix {
        [
            (
                "eth0",
                vec!["10.98.0.33", "10.98.0.34"],
                vec![],
                Some("10.98.0.32/28"),
            ),
            ("eth2", vec!["10.98.2.49"], vec![], Some("10.98.2.48/28")),
        ]
    } else {
        [
            (
                "eth0",
                vec!["10.98.0.11", "10.98.0.12"],
                vec!["10.98.0.13", "10.98.0.14"],
                None,
            ),
            (
                "eth2",
                vec!["10.98.2.21"],
                vec!["10.98.2.22", "10.98.2.23"],
                None,
            ),
        ]
    }
}

fn tree(layout: Layout, extra_warm: bool) -> Value {
    let mut t = default_tree();
    let macs = &mut t["latest"]["meta-data"]["network"]["interfaces"]["macs"];
    let [(_, p0, w0, pre0), (_, p2, w2, pre2)] = addressing(layout);
    let list = |first: &str, pods: &[&str], warm: &[&str], more: Option<&str>| {
        let mut all: Vec<&str> = vec![first];
        all.extend(pods.iter().chain(warm));
        all.extend(more);
        all.join("\n")
    };
    let more0 = extra_warm.then_some("10.98.0.15");
    let more2 = extra_warm.then_some("10.98.2.24");
    if layout.prefix {
        macs[MAC0]["local-ipv4s"] = json!(list("10.98.0.10", &[], &[], more0));
        macs[MAC0]["ipv4-prefix"] = json!(pre0.unwrap());
    } else {
        macs[MAC0]["local-ipv4s"] = json!(list("10.98.0.10", &p0, &w0, more0));
    }
    let eth2_mac = static_nic_mac(ETH2_MAC_N);
    let mut eth2 = json!({
        "device-number": "2", "interface-id": "eni-0000000000000003", "mac": eth2_mac,
        "subnet-ipv4-cidr-block": "10.98.2.0/24",
    });
    if layout.prefix {
        eth2["local-ipv4s"] = json!(list("10.98.2.20", &[], &[], more2));
        eth2["ipv4-prefix"] = json!(pre2.unwrap());
    } else {
        eth2["local-ipv4s"] = json!(list("10.98.2.20", &p2, &w2, more2));
    }
    macs[&eth2_mac] = eth2;
    t
}

/// A host veth name like the CNI's: `eni` + 11 hex digits, or `lxc` + 8.
fn veth_name(cni: Cni, n: usize) -> String {
    match cni {
        Cni::Aws => format!("eni{n:011x}"),
        Cni::Cilium => format!("lxc{n:08x}"),
    }
}

/// The CNI's ENI `eth2`, set up as the CNI does it: no DHCP, its primary IP put on
/// it by the CNI, no subnet route in main, its own table with the gateway and a
/// default route.
fn add_cni_eni(w: &World, cni: Cni) {
    let (gw, eth) = ("gw2", "eth2");
    w.router
        .veth_to(gw, &w.inst, eth, &static_nic_mac(ETH2_MAC_N));
    w.router.ip(&["address", "add", "10.98.2.1/24", "dev", gw]);
    w.router.sysctl("net.ipv4.conf.gw2.rp_filter", "1");
    w.router.ip(&["link", "set", gw, "up"]);
    w.inst.ip(&["link", "set", eth, "up"]);
    w.inst.ip(&["address", "add", "10.98.2.20/24", "dev", eth]);
    w.inst
        .ip(&["route", "del", "10.98.2.0/24", "dev", eth, "table", "main"]);
    let table = cni_table(cni, 2).to_string();
    w.inst.ip(&[
        "route",
        "add",
        "10.98.2.1",
        "dev",
        eth,
        "scope",
        "link",
        "table",
        &table,
    ]);
    w.inst.ip(&[
        "route",
        "add",
        "default",
        "via",
        "10.98.2.1",
        "dev",
        eth,
        "table",
        &table,
    ]);
}

/// A pod with `ip` behind a host veth, routed the CNI's way; `eni_table` is the
/// table its egress rule looks up (`None`: main, no egress rule).
fn add_pod(w: &World, cni: Cni, n: usize, ip: &str, eni: &str, eni_table: Option<u32>) -> Pod {
    let ns = Netns::new(&format!("pod{n}"));
    let host = veth_name(cni, n);
    w.inst.ip(&[
        "link", "add", "name", &host, "type", "veth", "peer", "name", "eth0", "netns", &ns.name,
    ]);
    w.inst.ip(&["link", "set", &host, "up"]);
    let host_mac = w.inst.ip_json(&["link", "show", &host])[0]["address"]
        .as_str()
        .unwrap()
        .to_owned();
    ns.ip(&["address", "add", &format!("{ip}/32"), "dev", "eth0"]);
    ns.ip(&["link", "set", "eth0", "up"]);
    ns.ip(&[
        "route",
        "add",
        "169.254.1.1",
        "dev",
        "eth0",
        "scope",
        "link",
    ]);
    ns.ip(&[
        "route",
        "add",
        "default",
        "via",
        "169.254.1.1",
        "dev",
        "eth0",
    ]);
    ns.ip(&[
        "neigh",
        "add",
        "169.254.1.1",
        "lladdr",
        &host_mac,
        "dev",
        "eth0",
        "nud",
        "permanent",
    ]);
    w.inst.ip(&[
        "route",
        "add",
        &format!("{ip}/32"),
        "dev",
        &host,
        "scope",
        "link",
    ]);
    let (ingress, egress) = match cni {
        Cni::Aws => ("512", "1536"),
        Cni::Cilium => ("20", "111"),
    };
    w.inst.ip(&[
        "rule",
        "add",
        "to",
        &format!("{ip}/32"),
        "lookup",
        "main",
        "priority",
        ingress,
    ]);
    if let Some(t) = eni_table {
        w.inst.ip(&[
            "rule",
            "add",
            "from",
            &format!("{ip}/32"),
            "lookup",
            &t.to_string(),
            "priority",
            egress,
        ]);
    }
    // The VPC delivers the pod's IP to the ENI that holds it.
    let (gw, mac) = if eni == "eth0" {
        ("gw0", MAC0.to_owned())
    } else {
        ("gw2", static_nic_mac(ETH2_MAC_N))
    };
    w.router.ip(&[
        "neigh",
        "replace",
        ip,
        "lladdr",
        &mac,
        "dev",
        gw,
        "nud",
        "permanent",
    ]);
    let name = format!("pod{n}");
    let mut cmd = ns.command("/usr/bin/python3");
    cmd.args(["-c", POD_SERVER, &name]);
    let (server, _) = start_first_line(cmd, &format!("{name}'s server"));
    Pod {
        server,
        name,
        ip: ip.to_owned(),
        ns,
    }
}

/// Builds the node and runs leasehook's hook on the primary (and on the
/// `no_manage` eth1, unless the CNI is Cilium with the primary its own).
fn node(tag: &str, layout: Layout) -> Node {
    let opts = WorldOptions {
        tree: Some(tree(layout, false)),
        ..WorldOptions::default()
    };
    let w = World::new(tag, &opts);
    w.inst.sysctl("net.ipv4.ip_forward", "1");
    w.inst.sysctl("net.ipv4.conf.all.rp_filter", "2");
    let conf = match layout.cni {
        Cni::Aws => "10-aws.conflist",
        Cni::Cilium => "05-cilium.conflist",
    };
    let dir = w.root.join("etc/cni/net.d");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(conf),
        "{\"cniVersion\": \"0.4.0\", \"plugins\": []}\n",
    )
    .unwrap();
    if let Some(k) = layout.kubernetes {
        let etc = w.root.join("etc/leasehook");
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::write(etc.join("config.yaml"), format!("kubernetes: {k}\n")).unwrap();
    }
    add_cni_eni(&w, layout.cni);
    let mut pods = Vec::new();
    let mut pod_ips = Vec::new();
    let mut prefixes = Vec::new();
    let mut n = 1;
    for (eni, ips, warm, prefix) in addressing(layout) {
        // Cilium gives the primary ENI a table too (10 + 0); the AWS VPC CNI routes
        // the primary's pods through main.
        let table = match (layout.cni, eni) {
            (Cni::Aws, "eth0") => None,
            (_, "eth0") => Some(cni_table(layout.cni, 0)),
            _ => Some(cni_table(layout.cni, 2)),
        };
        if let (Cni::Cilium, "eth0") = (layout.cni, eni) {
            let t = cni_table(layout.cni, 0).to_string();
            w.inst.ip(&[
                "route",
                "add",
                "10.98.0.1",
                "dev",
                "eth0",
                "scope",
                "link",
                "table",
                &t,
            ]);
            w.inst.ip(&[
                "route",
                "add",
                "default",
                "via",
                "10.98.0.1",
                "dev",
                "eth0",
                "table",
                &t,
            ]);
        }
        for ip in &ips {
            pods.push(add_pod(&w, layout.cni, n, ip, eni, table));
            n += 1;
        }
        pod_ips.extend(ips.iter().chain(&warm).map(|s| (*s).to_owned()));
        prefixes.extend(prefix.map(|p| p.parse::<ipnet::Ipv4Net>().unwrap()));
    }
    Node {
        pods,
        w,
        layout,
        pod_ips,
        prefixes,
    }
}

/// The CNI's objects, as `ip` prints them: every rule but leasehook's, its tables,
/// and the pod routes in main (dhclient's routes in main are not the CNI's).
fn cni_objects(n: &Node) -> String {
    let ip = |args: &[&str]| n.w.inst.ip(args);
    let lines = |text: String, keep: &dyn Fn(&str) -> bool| {
        text.lines()
            .filter(|l| keep(l))
            .fold(String::new(), |mut out, l| {
                let _ = writeln!(out, "{l}");
                out
            })
    };
    let mut out = format!(
        "rules:\n{}",
        lines(ip(&["rule", "show"]), &|l| !l.contains("proto 176"))
    );
    let tables: &[u32] = match n.layout.cni {
        Cni::Aws => &[3],
        Cni::Cilium => &[10, 12],
    };
    for t in tables {
        let _ = write!(
            out,
            "table {t}:\n{}",
            ip(&["route", "show", "table", &t.to_string()])
        );
    }
    let _ = write!(
        out,
        "main, pod routes:\n{}eth2:\n{}",
        lines(ip(&["route", "show", "table", "main"]), &|l| {
            l.contains(" dev eni") || l.contains(" dev lxc")
        }),
        ip(&["-4", "address", "show", "eth2"])
    );
    out
}

/// Every pod answers from the VPC (the router namespace), and reaches the echo
/// host with its own address. Returns the failures.
fn pod_traffic(n: &Node) -> Vec<String> {
    let mut bad = Vec::new();
    for p in &n.pods {
        let answer = n.w.router.http_get(&p.ip, 8080, None);
        if answer.as_deref() != Some(p.name.as_str()) {
            bad.push(format!("{} ({}) from the VPC: {answer:?}", p.name, p.ip));
        }
        let echo = p.ns.http_get("198.51.100.10", 80, None);
        if echo.as_deref() != Some(p.ip.as_str()) {
            bad.push(format!("{} ({}) to the echo host: {echo:?}", p.name, p.ip));
        }
    }
    bad
}

/// Host addresses that are a pod's or warm-pool IP, or inside a pod prefix.
fn stolen(n: &Node) -> Vec<String> {
    n.w.inst
        .addresses()
        .into_iter()
        .filter(|a| {
            let ip = a
                .split_whitespace()
                .nth(1)
                .unwrap_or("")
                .split('/')
                .next()
                .unwrap_or("");
            n.pod_ips.iter().any(|p| p == ip)
                || ip
                    .parse::<std::net::Ipv4Addr>()
                    .is_ok_and(|ip| n.prefixes.iter().any(|p| p.contains(&ip)))
        })
        .collect()
}

fn leasehook(n: &Node, args: &[&str]) -> Output {
    let mut cmd = n.w.inst.command(leasehook_bin().to_str().unwrap());
    cmd.envs(n.w.hook_env().iter().map(|(k, v)| (k.as_str(), v.as_str())));
    cmd.env("LEASEHOOK_IMDS_SYNC_BUDGET_S", "1");
    cmd.args(args);
    cmd.output().unwrap()
}

fn ok_text(o: &Output) -> String {
    assert!(o.status.success(), "{o:?}");
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// A DHCP event on the CNI's eth2, as a client running there would send it.
fn dhcp_event_on_eth2(n: &Node) -> Output {
    let mut cmd =
        n.w.inst
            .command(sibling_bin("leasehook-dhclient").to_str().unwrap());
    cmd.env_clear()
        .envs(n.w.hook_env().iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("reason", "BOUND")
        .env("interface", "eth2")
        .env("new_ip_address", "10.98.2.20")
        .env("new_subnet_mask", "255.255.255.0")
        .env("new_routers", "10.98.2.1");
    cmd.output().unwrap()
}

/// The whole story on one node: the hooks, a DHCP event on the CNI's ENI, a
/// refresh with new warm-pool IPs, the udev removal path; the checks after each.
fn keeps_the_cnis_and_routes_ours(tag: &str, layout: Layout) {
    let mut n = node(tag, layout);
    // Before any lease the primary has no address: only eth2's pods can talk yet.
    let early: Vec<String> = pod_traffic(&n)
        .into_iter()
        .filter(|b| !b.contains("(10.98.0."))
        .collect();
    assert!(early.is_empty(), "before leasehook: {early:?}");
    let before = cni_objects(&n);

    n.w.bind("eth0", false);
    n.w.bind("eth1", false);
    // eth1 (no_manage, DHCP): its table and a rule per address, as on any instance.
    assert!(
        wait_until(Duration::from_secs(10), || n.w.our_rules().len() == 2),
        "{}\n{}",
        n.w.log("eth1", false),
        n.w.our_rules().join("\n")
    );
    // The rules are in the kernel a moment before the hook logs its line (it
    // records the state, and a hot-plug, first): wait for both lines.
    let logged = |iface: &str, line: &str| {
        wait_until(Duration::from_secs(10), || {
            n.w.log(iface, false).contains(line)
        })
    };
    let eth0_line = if layout.cni == Cni::Cilium {
        "eth0 is the CNI's ENI (table 10 holds a default route via eth0"
    } else {
        "change(s) for eth0 IPv4"
    };
    logged("eth0", eth0_line);
    let log0 = n.w.log("eth0", false);
    if layout.cni == Cni::Cilium {
        // Cilium routes the primary through its table 10: the primary is the CNI's.
        assert!(
            log0.contains("eth0 is the CNI's ENI (table 10 holds a default route via eth0"),
            "{log0}"
        );
    } else {
        assert!(log0.contains("change(s) for eth0 IPv4"), "{log0}");
    }
    assert!(
        logged("eth1", "change(s) for eth1 IPv4"),
        "{}",
        n.w.log("eth1", false)
    );

    let ours = |n: &Node| {
        let mut r = n.w.our_rules();
        r.sort();
        r
    };
    let want_rules = [
        "10001 from 10.98.1.20 lookup 10001 proto 176",
        "10001 from 10.98.1.21 lookup 10001 proto 176",
    ];
    let check = |n: &Node, when: &str| {
        assert_eq!(ours(n), want_rules, "{when}: leasehook's rules");
        // Ours all come after the CNI's 512/1536 (and Cilium's 20/111).
        for r in n.w.our_rules() {
            let prio: u32 = r.split_whitespace().next().unwrap().parse().unwrap();
            assert!(prio > 1536, "{when}: {r}");
        }
        let routes: Vec<String> = n.w.our_routes();
        assert!(
            routes
                .iter()
                .all(|r| r.contains("dev eth1") && r.contains("table 10001")),
            "{when}: leasehook's routes {routes:?}"
        );
        assert_eq!(
            stolen(n),
            Vec::<String>::new(),
            "{when}: pod IPs on host links"
        );
        assert!(
            n.w.inst
                .addresses()
                .contains(&"eth1 10.98.1.21/32".to_owned()),
            "{when}: eth1's secondary IP: {:?}",
            n.w.inst.addresses()
        );
        assert_eq!(cni_objects(n), before, "{when}: the CNI's objects changed");
        assert_eq!(pod_traffic(n), Vec::<String>::new(), "{when}: pods");
        // eth1's addresses leave through eth1: the VPC's source check passes.
        for src in ["10.98.1.20", "10.98.1.21"] {
            assert_eq!(
                n.w.echo_from(src).as_deref(),
                Some(src),
                "{when}: from {src}"
            );
        }
    };
    check(&n, "after the hooks");

    // A DHCP client on the CNI's ENI: logged and skipped.
    let out = dhcp_event_on_eth2(&n);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && err.contains("eth2 is the CNI's ENI"),
        "{out:?}"
    );
    assert!(!n.w.root.join("run/leasehook/iface/eth2.json").exists());
    check(&n, "after a DHCP event on eth2");

    // IMDS lists new warm-pool IPs: a refresh changes nothing of the CNI's.
    n.w.restart_imds(&tree(layout, true), &json!({}));
    let text = ok_text(&leasehook(&n, &["refresh", "-v"]));
    assert!(text.contains("eth1: 0 change(s)"), "{text}");
    assert!(
        !text.contains("10.98.0.15") && !text.contains("10.98.2.24"),
        "{text}"
    );
    n.pod_ips
        .extend(["10.98.0.15".to_owned(), "10.98.2.24".to_owned()]);
    check(&n, "after a refresh");

    // The udev removal path on the CNI's ENI and on the primary: nothing of theirs.
    for iface in ["eth2", "eth0"] {
        let text = ok_text(&leasehook(&n, &["flush", "--iface", iface, "-v"]));
        assert!(text.contains("0 change(s)"), "{iface}: {text}");
    }
    check(&n, "after flush --iface");

    // status says what was decided and why.
    let root = n.w.root.display().to_string();
    let status = ok_text(&leasehook(&n, &["status", "--root", &root]));
    let (cni, conf) = match layout.cni {
        Cni::Aws => ("AWS VPC CNI", "10-aws.conflist"),
        Cni::Cilium => ("Cilium", "05-cilium.conflist"),
    };
    assert!(
        status.contains(&format!(
            "kubernetes (auto): Kubernetes node ({cni}): {cni} configuration etc/cni/net.d/{conf}"
        )),
        "{status}"
    );
    assert!(
        status.contains("  eth2: the CNI's, left alone (table"),
        "{status}"
    );
    assert!(!status.contains("  eth1: the CNI's"), "{status}");
    let show = ok_text(&leasehook(&n, &["config", "show", "--root", &root]));
    assert!(
        show.contains("# kubernetes (auto): Kubernetes node"),
        "{show}"
    );

    // A priority base before the CNI's rules is refused, and nothing changes.
    let mut cmd = n.w.inst.command(leasehook_bin().to_str().unwrap());
    cmd.envs(n.w.hook_env().iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("LEASEHOOK_PRIORITY_BASE", "1000")
        .args(["refresh", "-v"]);
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("priority_base") && err.contains("1536"),
        "{out:?}"
    );
    check(&n, "after a refused priority_base");

    // The CNI takes eth1 over (its table for device 1): the next refresh removes
    // leasehook's objects on it, and only those, and leaves it alone from then on.
    let t = cni_table(layout.cni, 1).to_string();
    n.w.inst.ip(&[
        "route",
        "add",
        "default",
        "via",
        "10.98.1.1",
        "dev",
        "eth1",
        "table",
        &t,
    ]);
    let cni_now = cni_objects(&n);
    let text = ok_text(&leasehook(&n, &["refresh", "-v"]));
    assert!(
        text.contains("eth1: unchanged (eth1 is the CNI's ENI")
            && text.contains("removed 5 object(s) leasehook had applied to it"),
        "{text}"
    );
    assert_eq!(n.w.our_rules(), Vec::<String>::new());
    assert_eq!(n.w.our_routes(), Vec::<String>::new());
    assert!(!n.w.root.join("run/leasehook/iface/eth1.json").exists());
    assert!(
        !n.w.inst
            .addresses()
            .contains(&"eth1 10.98.1.21/32".to_owned())
    );
    assert!(
        n.w.inst
            .ip(&["route", "show", "table", &t])
            .contains("default via 10.98.1.1 dev eth1")
    );
    assert_eq!(cni_objects(&n), cni_now);
}

#[test]
fn aws_vpc_cni_node() {
    keeps_the_cnis_and_routes_ours(
        "k8s-aws",
        Layout {
            cni: Cni::Aws,
            prefix: false,
            kubernetes: None,
        },
    );
}

#[test]
fn aws_vpc_cni_node_in_prefix_mode() {
    keeps_the_cnis_and_routes_ours(
        "k8s-pfx",
        Layout {
            cni: Cni::Aws,
            prefix: true,
            kubernetes: None,
        },
    );
}

#[test]
fn cilium_eni_mode_node() {
    keeps_the_cnis_and_routes_ours(
        "k8s-cil",
        Layout {
            cni: Cni::Cilium,
            prefix: false,
            kubernetes: None,
        },
    );
}

/// `kubernetes: off` is today's behaviour on the same node: the pods' and the warm
/// pool's IPs go on eth0, and the host answers for the pods (issue 19's report).
#[test]
fn kubernetes_off_puts_the_pods_ips_on_the_primary_and_breaks_them() {
    let mut n = node(
        "k8s-off",
        Layout {
            cni: Cni::Aws,
            prefix: false,
            kubernetes: Some("off"),
        },
    );
    n.w.bind("eth0", false);
    assert!(
        wait_until(Duration::from_secs(10), || stolen(&n).len() == 4),
        "{}\n{:?}",
        n.w.log("eth0", false),
        n.w.inst.addresses()
    );
    assert_eq!(
        stolen(&n),
        [
            "eth0 10.98.0.11/32",
            "eth0 10.98.0.12/32",
            "eth0 10.98.0.13/32",
            "eth0 10.98.0.14/32"
        ]
    );
    let bad = pod_traffic(&n);
    for p in n.pods.iter().filter(|p| p.ip.starts_with("10.98.0.")) {
        assert!(
            bad.iter()
                .any(|b| b.starts_with(&format!("{} ({}) from the VPC", p.name, p.ip))),
            "{}: {bad:?}",
            p.name
        );
    }
    // And a DHCP event on the CNI's ENI is planned like any NIC's: its pods'
    // addresses go on eth2 and become rule sources into a table of ours, in front
    // of the CNI's own.
    let out = dhcp_event_on_eth2(&n);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("is the CNI's ENI"), "{err}");
    let taken: Vec<String> = stolen(&n)
        .into_iter()
        .filter(|a| a.starts_with("eth2 "))
        .collect();
    assert_eq!(
        taken,
        [
            "eth2 10.98.2.21/32",
            "eth2 10.98.2.22/32",
            "eth2 10.98.2.23/32"
        ]
    );
    let rules = n.w.inst.rules();
    assert!(
        rules
            .iter()
            .any(|r| r == "10002 from 10.98.2.21 lookup 10002 proto 176"),
        "{rules:#?}"
    );
    let root = n.w.root.display().to_string();
    let status = ok_text(&leasehook(&n, &["status", "--root", &root]));
    assert!(
        status.contains("kubernetes (off): not a Kubernetes node: kubernetes: off (configuration)"),
        "{status}"
    );

    // Back to auto: the next refresh takes leasehook's pod addresses off eth0
    // (they are its own, protocol 176) and the pods answer again.
    std::fs::write(
        n.w.root.join("etc/leasehook/config.yaml"),
        "kubernetes: auto\n",
    )
    .unwrap();
    let text = ok_text(&leasehook(&n, &["refresh", "-v"]));
    assert!(
        text.contains("ip -4 address del 10.98.0.11/32 dev eth0"),
        "{text}"
    );
    assert_eq!(stolen(&n), Vec::<String>::new());
    assert_eq!(pod_traffic(&n), Vec::<String>::new());
}

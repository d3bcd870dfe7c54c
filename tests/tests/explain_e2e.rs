// SPDX-License-Identifier: Apache-2.0
//! `leasehook explain` in the namespace lab (issue 33, item 4): an instance
//! namespace with four NICs (eth0 the primary, eth1 a secondary IMDS lists with
//! a second address and the metadata service's address, eth2 and eth3 whose MACs
//! IMDS does not list yet), the IMDS emulator inside it, eth1's and eth2's
//! DHCP BOUND run through `leasehook-dhclient`, then `leasehook explain` for a
//! routed, a refused, a waiting, an unmanaged and an unknown address, each
//! asserting the exit status and the words on the terminal. Needs root.

#![cfg(feature = "netns")]
#![cfg(test)]

use std::path::PathBuf;
use std::process::{Child, Output};

use leasehook_tests::netns::{Netns, TempDir, leasehook_bin, sibling_bin};
use leasehook_tests::world::{
    EMULATOR, MAC0, MAC1, at_file, default_tree, kill_workers, start_first_line,
};
use serde_json::Value;

/// The instance: its namespace, root and IMDS emulator (killed on drop, with
/// any worker still waiting).
struct Instance {
    imds: Child,
    ns: Netns,
    _dir: TempDir,
    root: PathBuf,
    url: String,
}

impl Drop for Instance {
    fn drop(&mut self) {
        kill_workers(&self.root);
        let _ = self.imds.kill();
        let _ = self.imds.wait();
    }
}

impl Instance {
    fn new(tag: &str, config: &str) -> Self {
        let ns = Netns::new(tag);
        let macs = [MAC0, MAC1, "02:00:00:00:00:03", "02:00:00:00:00:04"];
        for (n, mac) in macs.iter().enumerate() {
            let eth = format!("eth{n}");
            ns.veth(&eth, mac, &format!("vpc{n}"));
            let addr = format!("10.98.{n}.{}/24", 10 * (n + 1));
            ns.ip(&["address", "add", &addr, "dev", &eth]);
        }
        let dir = TempDir::new(tag);
        let root = dir.0.join("root");
        std::fs::create_dir_all(root.join("etc/leasehook")).unwrap();
        std::fs::write(root.join("etc/leasehook/config.yaml"), config).unwrap();
        let mut tree = default_tree();
        tree["latest"]["meta-data"]["network"]["interfaces"]["macs"][MAC1]["local-ipv4s"] =
            "10.98.1.20\n10.98.1.21\n169.254.169.254".into();
        let tree = dir.file("tree.json", &tree.to_string());
        let mut cmd = ns.command(sibling_bin(EMULATOR).to_str().unwrap());
        cmd.args(["--cloud", "ec2", "--bind", "127.0.0.1:0", "--tree"])
            .arg(at_file(&tree))
            .arg("--log")
            .arg(dir.0.join("imds.log"));
        let (imds, addr) = start_first_line(cmd, "leasehook-emulator --cloud ec2");
        Self {
            imds,
            ns,
            _dir: dir,
            root,
            url: format!("http://{addr}"),
        }
    }

    /// eth`n`'s dhclient BOUND (a clean environment, as dhclient-script runs
    /// it), the metadata wait's whole budget `budget_s`.
    fn bound(&self, n: u8, budget_s: &str) -> Output {
        let ip = format!("10.98.{n}.{}", 10 * (n + 1));
        let mut cmd = self
            .ns
            .command(sibling_bin("leasehook-dhclient").to_str().unwrap());
        cmd.env_clear().envs([
            ("reason", "BOUND"),
            ("interface", &format!("eth{n}")),
            ("new_ip_address", &ip),
            ("new_subnet_mask", "255.255.255.0"),
            ("new_routers", &format!("10.98.{n}.1")),
            ("LEASEHOOK_IMDS_ENDPOINTS", &self.url),
            ("LEASEHOOK_IMDS_BIND_INTERFACE", "false"),
            ("LEASEHOOK_IMDS_SYNC_BUDGET_S", "1"),
            ("LEASEHOOK_IMDS_BUDGET_S", budget_s),
            ("LEASEHOOK_ROOT", self.root.to_str().unwrap()),
        ]);
        cmd.output().unwrap()
    }

    /// `leasehook explain ARGS` inside the namespace: exit status and stdout
    /// (and stderr).
    fn explain(&self, args: &[&str]) -> (i32, String) {
        self.explain_as(&[], args)
    }

    /// [`Instance::explain`] under `setpriv WRAP`.
    fn explain_as(&self, wrap: &[&str], args: &[&str]) -> (i32, String) {
        let mut cmd = self
            .ns
            .command(if wrap.is_empty() { "env" } else { "setpriv" });
        cmd.args(wrap).arg(leasehook_bin());
        cmd.env_clear()
            .arg("--root")
            .arg(&self.root)
            .arg("explain")
            .args(args);
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        eprintln!("== explain {args:?}\n{text}");
        (out.status.code().unwrap_or(-1), text)
    }
}

/// An instance where eth1 is bound and routed.
fn eth1_bound(tag: &str, config: &str) -> Instance {
    let i = Instance::new(tag, config);
    let out = i.bound(1, "1");
    assert!(
        out.status.success() && i.ns.ip(&["rule"]).contains("10001"),
        "BOUND did not apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    i
}

fn has(text: &str, words: &[&str]) {
    for w in words {
        assert!(text.contains(w), "{w:?} missing from:\n{text}");
    }
}

#[test]
fn a_routed_address_names_its_nic_rule_table_and_the_kernels_answer() {
    let i = eth1_bound("exrouted", "");
    let (code, text) = i.explain(&["10.98.1.21"]);
    assert_eq!(code, 0, "{text}");
    has(
        &text,
        &[
            "ROUTED (routed)",
            "10.98.1.21 is an address of eth1.",
            "secondary address of eth1 (local-ipv4s in ec2's metadata)",
            "Rule `from 10.98.1.21/32 lookup 10001 priority 10001` sends its traffic to table 10001.",
            "The kernel answers now: ip route get 8.8.8.8 from 10.98.1.21: via 10.98.1.1 dev eth1 table 10001.",
        ],
    );
    let (code, text) = i.explain(&["10.98.1.20", "--format", "json"]);
    assert_eq!(code, 0, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["schema_version"], 1, "{v}");
    let e = &v["explanations"][0];
    assert_eq!(
        (&e["verdict"], &e["interface"], &e["table"]),
        (&"routed".into(), &"eth1".into(), &10001.into()),
        "{v}"
    );
    has(
        e["reasons"][1].as_str().unwrap(),
        &["eth1's DHCP lease address"],
    );

    // Drift: someone deletes the rule; the record still has it, the kernel not.
    i.ns.ip(&["rule", "del", "priority", "10001", "from", "10.98.1.21"]);
    let (code, text) = i.explain(&["10.98.1.21"]);
    assert_eq!(code, 1, "{text}");
    has(
        &text,
        &[
            "NOT ROUTED (drift)",
            "the kernel does NOT hold this rule now",
            "The kernel answers now: ip route get 8.8.8.8 from 10.98.1.21: ",
        ],
    );
}

#[test]
fn a_refused_address_names_the_gate_rule() {
    let i = eth1_bound("exrefused", "");
    let (code, text) = i.explain(&["169.254.169.254"]);
    assert_eq!(code, 1, "{text}");
    has(
        &text,
        &[
            "NOT ROUTED (refused)",
            "The address gate refused local-ipv4s 169.254.169.254 for eth1",
            "SPEC §3.8: never the metadata service's addresses",
        ],
    );
}

#[test]
fn a_waiting_address_says_what_the_metadata_has_not_said() {
    let i = eth1_bound("exwait", "");
    // eth2's MAC is not in IMDS: after the budget only what the lease proves.
    let out = i.bound(2, "1");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, text) = i.explain(&["10.98.2.30"]);
    assert_eq!(code, 1, "{text}");
    has(
        &text,
        &[
            "NOT ROUTED (waiting)",
            "eth2 is waiting for the metadata, which does not say yet: no metadata folder for this MAC",
        ],
    );
    // eth3's worker is still waiting (a 30 s budget, 1 s of it in the hook).
    let out = i.bound(3, "30");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, text) = i.explain(&["--iface", "eth3"]);
    assert_eq!(code, 1, "{text}");
    has(
        &text,
        &[
            "NOT ROUTED (waiting)",
            "eth3 is waiting for the metadata: worker ",
        ],
    );
}

#[test]
fn an_unmanaged_nics_address_names_the_entry_and_an_unknown_one_is_unknown() {
    let i = eth1_bound("exunman", "unmanaged: [eth9, \"02:00:00:00:00:01\"]\n");
    let (code, text) = i.explain(&["10.98.0.10"]);
    assert_eq!(code, 1, "{text}");
    has(
        &text,
        &[
            "NOT ROUTED (unmanaged)",
            "eth0 is unmanaged: the configuration's `unmanaged` entry `02:00:00:00:00:01` matches it",
        ],
    );
    let (code, text) = i.explain(&["192.0.2.77"]);
    assert_eq!(code, 1, "{text}");
    has(
        &text,
        &[
            "NOT ROUTED (unknown)",
            "192.0.2.77 is on no link of this host.",
        ],
    );
    let (code, text) = i.explain(&["not-an-address"]);
    assert_eq!(code, 2, "{text}");
    // Not root: the 0600 records are unreadable, which is said, never "unknown".
    let nobody = ["--reuid", "65534", "--regid", "65534", "--clear-groups"];
    let (code, text) = i.explain_as(&nobody, &["10.98.1.20"]);
    assert_eq!(code, 2, "{text}");
    has(&text, &["cannot read leasehook's state", "run as root"]);
}

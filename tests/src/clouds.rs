// SPDX-License-Identifier: Apache-2.0
//! The cloud table of the tests (issue 32, item 3): one row per cloud leasehook
//! serves, with what a test needs to run the same scenario on each — the
//! `provider` value, the environment that points the hook at the cloud's
//! emulator, the emulator binary and its arguments for a scenario, the table the
//! world's secondary NIC (`eth1`, [`MAC1`]) gets and the token file the cloud
//! keeps. A test that repeats one shape for every cloud takes a [`Cloud`] and
//! runs for each of [`Cloud::ALL`] (the fault matrix's `renew` rows,
//! `tests/tests/faults/`); what only one cloud has stays in that cloud's tests.

use std::ffi::OsString;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use leasehook_core::model::{Family, IfName, Lease, Missing, Reason};
use leasehook_core::source::provider::{NicEvent, Outcome, WaitPolicy};
use serde_json::{Value, json};

use crate::world::{CloudDhcp, Ipv6World, MAC1, MetadataService, WorldOptions, at_file};

/// A cloud leasehook serves: Amazon EC2 (IMDSv2, the default provider), Google
/// Compute Engine, Microsoft Azure, Alibaba Cloud ECS, Oracle Cloud (OCI) and
/// `OpenStack` (its metadata service).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cloud {
    Ec2,
    Gce,
    Azure,
    Aliyun,
    Oracle,
    OpenStack,
}

/// An address nothing listens on: connections are refused at once.
pub const REFUSED: &str = "http://127.0.0.1:9";

impl Cloud {
    /// Every cloud, in the order the docs list them.
    pub const ALL: [Self; 6] = [
        Self::Ec2,
        Self::Gce,
        Self::Azure,
        Self::Aliyun,
        Self::Oracle,
        Self::OpenStack,
    ];

    /// The `provider` configuration value (`LEASEHOOK_PROVIDER`).
    pub fn provider(self) -> &'static str {
        match self {
            Self::Ec2 => "ec2",
            Self::Gce => "gce",
            Self::Azure => "azure",
            Self::Aliyun => "aliyun",
            Self::Oracle => "oracle",
            Self::OpenStack => "openstack",
        }
    }

    /// The environment that points the hook (or `leasehook refresh`) at this
    /// cloud's metadata service at `url`: EC2's endpoint list, or the provider and
    /// its `LEASEHOOK_<PROVIDER>_ENDPOINT` with EC2's endpoint refusing (so that
    /// asking the wrong service fails at once).
    pub fn env(self, url: &str) -> Vec<(String, String)> {
        let pair = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        match self {
            Self::Ec2 => vec![pair("LEASEHOOK_IMDS_ENDPOINTS", url)],
            _ => vec![
                pair("LEASEHOOK_IMDS_ENDPOINTS", REFUSED),
                pair("LEASEHOOK_PROVIDER", self.provider()),
                pair(
                    &format!("LEASEHOOK_{}_ENDPOINT", self.provider().to_uppercase()),
                    url,
                ),
            ],
        }
    }

    /// The emulator binary built beside the tests (every cloud's:
    /// [`Cloud::emulator_args`] start with its `--cloud`).
    pub fn emulator(self) -> &'static str {
        crate::world::EMULATOR
    }

    /// The emulator's log in `dir` (one request a line).
    pub fn log(self, dir: &Path) -> PathBuf {
        dir.join(format!("{}-emulator.log", self.provider()))
    }

    /// The emulator's arguments to serve the world's instance on an address of
    /// its choosing on 127.0.0.1 (its first line), with `scenario` (each
    /// emulator's own rules: see its `--help`; Oracle's may also carry `vnics`,
    /// the list to serve), its files (log, scenario) in `dir`. `tree` replaces
    /// the world's metadata where the emulator takes one (EC2, `OpenStack`).
    /// EC2's requires the token (IMDSv2 only); Alibaba's is hardened and answers
    /// loopback.
    pub fn emulator_args(
        self,
        tree: Option<&Value>,
        scenario: &Value,
        dir: &Path,
    ) -> Vec<OsString> {
        let file = |name: &str, body: &Value| {
            let p = dir.join(name);
            std::fs::write(&p, body.to_string())
                .unwrap_or_else(|e| panic!("writing {}: {e}", p.display()));
            p
        };
        assert!(
            tree.is_none() || matches!(self, Self::Ec2 | Self::OpenStack),
            "{self:?}'s emulator takes no tree"
        );
        let mut args: Vec<OsString> = vec![
            "--cloud".into(),
            self.provider().into(),
            "--bind".into(),
            "127.0.0.1:0".into(),
        ];
        match self {
            Self::Ec2 => {
                let tree = match tree {
                    Some(t) => file("imds-tree.json", t),
                    None => file("imds-tree.json", &crate::world::default_tree()),
                };
                args.extend(["--require-token".into(), "--tree".into(), at_file(&tree)]);
                args.extend([
                    "--scenario".into(),
                    at_file(&file("imds-scenario.json", scenario)),
                ]);
            }
            Self::Aliyun => {
                args.extend(["--allow-source".into(), "127.0.0.0/8".into()]);
                args.extend([
                    "--scenario".into(),
                    at_file(&file("aliyun-scenario.json", scenario)),
                ]);
            }
            Self::Oracle => {
                if let Some(v) = scenario.get("vnics") {
                    let f = file("oracle-vnics.json", v);
                    args.extend(["--vnics".into(), format!("@{}", f.display()).into()]);
                }
                let rules = json!({"rules": scenario.get("rules").cloned().unwrap_or(json!([]))});
                let f = file("oracle-scenario.json", &rules);
                args.extend(["--scenario".into(), format!("@{}", f.display()).into()]);
            }
            Self::Gce | Self::Azure | Self::OpenStack => {
                args.extend(["--scenario".into(), scenario.to_string().into()]);
                if let Some(t) = tree {
                    args.extend(["--tree".into(), t.to_string().into()]);
                }
            }
        }
        args.extend(["--log".into(), self.log(dir).into()]);
        args
    }

    /// The policy routing table the world's `eth1` ([`MAC1`]) gets: its
    /// device-number's (`10000 + 1`) where the cloud numbers NICs, else
    /// `10000 + slot(MAC)`.
    pub fn eth1_table(self) -> u32 {
        match self {
            Self::Ec2 | Self::Gce | Self::Azure => 10_001,
            Self::Aliyun | Self::Oracle | Self::OpenStack => {
                let mac = MAC1.parse().unwrap_or_else(|e| panic!("{MAC1}: {e:?}"));
                10_000 + leasehook_core::source::aliyun::nic::device_slot(mac)
            }
        }
    }

    /// The file (relative to the root) where the hook keeps the cloud's session
    /// token, for the clouds that have one.
    pub fn token_file(self) -> Option<&'static str> {
        match self {
            Self::Ec2 => Some("run/leasehook/imds-token"),
            Self::Aliyun => Some("run/leasehook/aliyun-token"),
            Self::Gce | Self::Azure | Self::Oracle | Self::OpenStack => None,
        }
    }

    /// Whether the cloud's DHCP serves a secondary NIC (Oracle's does not: a
    /// secondary VNIC is configured from the metadata by `leasehook refresh`).
    pub fn leases_secondary(self) -> bool {
        !matches!(self, Self::Oracle)
    }
}

// --- The providers' wait, in process ------------------------------------------------

/// eth1's BOUND lease (10.98.1.20/`prefix_len`, router 10.98.1.1) as a
/// provider's wait takes it.
pub fn eth1_event(prefix_len: u8) -> NicEvent {
    let address: IpAddr = [10, 98, 1, 20].into();
    let event = NicEvent::try_new(
        IfName::try_new("eth1").unwrap_or_else(|e| panic!("{e}")),
        MAC1.parse().unwrap_or_else(|e| panic!("{MAC1}: {e:?}")),
        vec![Lease {
            family: Family::V4,
            address,
            prefix_len,
            routers: vec![[10, 98, 1, 1].into()],
            reason: Reason::Bound,
        }],
    );
    event.unwrap_or_else(|e| panic!("{e}"))
}

/// The wait's policy with a budget of `secs`.
pub fn budget(secs: u64) -> WaitPolicy {
    WaitPolicy::default().with_budget(Duration::from_secs(secs))
}

/// A metadata fault for the wait: its name, the emulator's scenario (its
/// `rules`), and whether the wait asks again (waiting could fix it).
pub type WaitFault = (&'static str, Value, bool);

/// The faults every cloud's metadata service can show, on every path below
/// `prefix`, a 403 on `forbidden`: 403, 400, 429, 503 with `Retry-After`,
/// garbage, a huge answer, an answer slower than the budget.
pub fn wait_faults(prefix: &str, forbidden: &str) -> Vec<WaitFault> {
    let rule = |r: Value| json!({"rules": [r]});
    vec![
        (
            "403",
            rule(json!({"path": forbidden, "status": 403})),
            false,
        ),
        ("400", rule(json!({"path": prefix, "status": 400})), false),
        ("429", rule(json!({"path": prefix, "status": 429})), true),
        (
            "503",
            rule(json!({"path": prefix, "status": 503, "retry_after": 1})),
            true,
        ),
        (
            "garbage",
            rule(json!({"path": prefix, "action": "garbage"})),
            false,
        ),
        (
            "huge",
            rule(json!({"path": prefix, "action": "huge"})),
            false,
        ),
        ("slow", rule(json!({"path": prefix, "delay": 3.0})), true),
    ]
}

/// Each fault: the emulator `start`ed with it, the wait (budget 2 s) fails (or
/// gives up) and never reads the fault as an empty answer, within one request
/// timeout past the budget; a fault waiting cannot fix is asked once. Then the
/// service down (nothing listens at the URL `down` is given).
pub fn assert_waits_fail<E>(
    faults: Vec<WaitFault>,
    start: impl Fn(Value) -> E,
    wait: impl Fn(&E, u64) -> Outcome,
    asked: impl Fn(&E) -> usize,
    down: impl FnOnce(&str) -> Outcome,
) {
    for (what, scenario, retried) in faults {
        let emu = start(scenario);
        let t = Instant::now();
        let out = wait(&emu, 2);
        assert!(matches!(out, Outcome::Failed(_)), "{what}: {out:?}");
        // One request timeout (2 s) past the budget at most.
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{what}: {:?}",
            t.elapsed()
        );
        let n = asked(&emu);
        // (A slow answer is logged once its delay is over: after the wait.)
        if retried {
            assert!(n >= 1 || what == "slow", "{what}");
        } else {
            assert_eq!(n, 1, "{what}: waiting cannot fix it");
        }
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_or(9, |a| a.port());
    let out = down(&format!("http://127.0.0.1:{port}"));
    assert!(matches!(out, Outcome::Failed(_)), "down: {out:?}");
}

/// A hot-plugged NIC: the emulator `start`ed with `appear(after)` hides eth1
/// for `after` seconds. Hidden for 1 s, the wait (budget 10 s) completes once
/// eth1 appears, asking one request a round (`asked`: the requests of the
/// cloud's NIC document, and all of them); never appearing within the budget
/// (2 s), the wait ends partial, eth1's entry missing.
pub fn assert_hot_plug_waited<E>(
    appear: impl Fn(f64) -> Value,
    start: impl Fn(Value) -> E,
    wait: impl Fn(&E, u64) -> Outcome,
    asked: impl Fn(&E) -> (usize, usize),
) {
    let emu = start(appear(1.0));
    let t = Instant::now();
    let out = wait(&emu, 10);
    assert!(matches!(out, Outcome::Complete(_)), "{out:?}");
    assert!(t.elapsed() >= Duration::from_millis(900));
    let (n, all) = asked(&emu);
    assert!((2..=8).contains(&n), "{n} requests");
    assert_eq!(n, all, "requests of other documents");
    let emu = start(appear(60.0));
    let Outcome::Partial { missing, .. } = wait(&emu, 2) else {
        panic!("eth1 never appeared, yet the wait did not end partial")
    };
    assert_eq!(missing, [Missing::MacFolder]);
}

// --- The namespace world ----------------------------------------------------------

impl Cloud {
    /// Whose DHCP the world's dnsmasq plays for this cloud.
    pub fn dhcp(self) -> CloudDhcp {
        match self {
            Self::Ec2 => CloudDhcp::Ec2,
            Self::Gce => CloudDhcp::Gce,
            Self::Azure => CloudDhcp::Azure,
            Self::Aliyun => CloudDhcp::Aliyun,
            Self::Oracle => CloudDhcp::Oracle,
            Self::OpenStack => CloudDhcp::OpenStack,
        }
    }

    /// The options of a [`crate::world::World`] on this cloud: its DHCP, its
    /// emulator as the metadata service in the router namespace (at the address
    /// the cloud's service answers on) with `args`, and the hooks' `provider`.
    /// EC2's is the world's IMDS emulator, which `args` do not change.
    pub fn world(self, args: Vec<String>) -> WorldOptions {
        let metadata = match self {
            Self::Ec2 => None,
            Self::Aliyun => Some(crate::aliyun_emulator::service(args)),
            Self::OpenStack => Some(crate::openstack_emulator::service(args)),
            Self::Gce | Self::Azure | Self::Oracle => {
                let mut all = vec!["--bind".to_owned(), "169.254.169.254:80".to_owned()];
                all.extend(args);
                Some(MetadataService {
                    cloud: self.provider().to_owned(),
                    args: all,
                    addresses: Vec::new(),
                })
            }
        };
        let provider = ("LEASEHOOK_PROVIDER".to_owned(), self.provider().to_owned());
        WorldOptions {
            dhcp: self.dhcp(),
            extra_hook_env: if self == Self::Ec2 {
                Vec::new()
            } else {
                vec![provider]
            },
            metadata,
            ..WorldOptions::default()
        }
    }
}

// --- The IPv6 worlds (issue 34) ----------------------------------------------------

impl Cloud {
    /// The world's instance dual-stack (issue 34's contract: eth0
    /// `fd00:98::10`, eth1 `fd00:98:1::20` leased and `fd00:98:1::21`), in
    /// this cloud's own metadata format: what its emulator's `--tree` (Azure:
    /// `--instance`, Oracle: `--vnics`) takes. `None`: the cloud's emulator has
    /// no such world wired here yet, and `cloud_table!` runs no IPv6 row for
    /// it (`cloud_rows::assert_ipv6_rows_listed` checks the two agree).
    pub fn dual_stack_world(self) -> Option<Value> {
        match self {
            Self::Ec2 => Some(crate::world::dual_stack_tree()),
            Self::Gce => Some(crate::gce_emulator::dual_stack_world()),
            Self::Azure => Some(crate::azure_emulator::dual_stack_world()),
            Self::Aliyun => Some(crate::aliyun_emulator::dual_stack_world()),
            Self::Oracle => Some(crate::oracle_emulator::dual_stack_world()),
            Self::OpenStack => Some(crate::openstack_emulator::dual_stack_world()),
        }
    }

    /// The world's instance with eth1 IPv6-only (its cloud's documented
    /// IPv6-only NIC: no IPv4 in the metadata), in the format of
    /// [`Cloud::dual_stack_world`]; `None` where the cloud has no IPv6-only
    /// NIC (Azure, Alibaba) or its world is not wired here yet.
    pub fn ipv6_only_world(self) -> Option<Value> {
        match self {
            Self::Ec2 => Some(crate::world::ipv6_only_tree()),
            Self::Gce => Some(crate::gce_emulator::ipv6_only_world()),
            Self::Oracle => Some(crate::oracle_emulator::ipv6_only_world()),
            Self::OpenStack => Some(crate::openstack_emulator::ipv6_only_world()),
            Self::Azure | Self::Aliyun => None,
        }
    }

    /// The world's IPv6 on this cloud ([`Ipv6World`]: the DHCPv6 leases, eth1's
    /// secondaries), dual-stack or (`ipv6_only`) not: the contract's addresses,
    /// where a cloud's format forces others (GCE's /96) that cloud's.
    pub fn ipv6_world(self, ipv6_only: bool) -> Ipv6World {
        let mut v6 = if ipv6_only {
            Ipv6World::ipv6_only()
        } else {
            Ipv6World::dual_stack()
        };
        if self == Self::Gce {
            // DHCPv6 leases the first address of the NIC's /96, and the
            // metadata lists that one only: the rest of the range is the
            // user's, routed to the VM by the rule from the /96.
            use crate::gce_emulator::{ETH0_IPV6, ETH1_IPV6};
            ETH0_IPV6.clone_into(&mut v6.eth0);
            ETH1_IPV6.clone_into(&mut v6.eth1);
            v6.eth1_secondaries.clear();
        }
        if self == Self::OpenStack {
            // Nova lists the first address of a port's IPv6 subnet only.
            v6.eth1_secondaries.clear();
        }
        v6
    }

    /// The options of a world on this cloud ([`Cloud::world`]) whose metadata
    /// service serves `doc` (a [`Cloud::dual_stack_world`]): EC2's IMDS its
    /// tree, the others' emulator with `doc` as the argument that takes it.
    pub fn world_serving(self, doc: &Value) -> WorldOptions {
        let flag = match self {
            Self::Ec2 => {
                return WorldOptions {
                    tree: Some(doc.clone()),
                    ..self.world(Vec::new())
                };
            }
            Self::Azure => "--instance",
            Self::Oracle => "--vnics",
            Self::Gce | Self::Aliyun | Self::OpenStack => "--tree",
        };
        self.world(vec![flag.to_owned(), doc.to_string()])
    }
}

/// cloud-init's `instance-data.json` for `d` as leasehook writes it after a
/// fetch (network stage): the public document, parsed, and its bytes — what
/// each cloud's datasource test checks its `v1` keys in.
pub fn fetched_instance_data(d: &leasehook_core::source::InstanceData) -> (Value, Vec<u8>) {
    use leasehook_core::instance_data::{Origin, Provenance, Stage, render};
    let provenance = Provenance {
        origin: Origin::Fetched,
        stage: Stage::Network,
        cache: String::new(),
        fetched_at_ms: Some(0),
        decided_at_ms: 0,
    };
    let r = render(d, &provenance, &leasehook_core::source::region_ids())
        .unwrap_or_else(|e| panic!("render: {e}"));
    let doc = serde_json::from_slice(&r.public)
        .unwrap_or_else(|e| panic!("instance-data.json is not JSON: {e}"));
    (doc, r.public)
}

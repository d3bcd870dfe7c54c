//! The kernel: a link deleted between the plan and its apply (the library,
//! driven from a thread in the namespace), and other tools' rules, routes and
//! addresses in leasehook's way.

use std::process::Command;
use std::time::Instant;

use leasehook_tests::clouds::Cloud;
use leasehook_tests::netns::{leasehook_bin, run};
use leasehook_tests::world::{MAC0, MAC1, default_tree};

use crate::instance::{BASE_ROUTES, Imds, Instance, STATE, bound_patiently, text};
use crate::matrix::{FileWant, Kernel, Ran, Row, Seen, snap};

matrix! {
    #[cfg(feature = "netns")]
    link_deleted_before_apply => Row {
        name: "link_deleted_before_apply",
        fault: "link deleted between plan (validated) and apply",
        does: "the first write fails; every write of the run that went through is undone; nothing recorded",
        exit: None,
        kernel: Kernel::NONE,
        files: &[FileWant::Absent(STATE)],
        // The first write: the routes come before the addresses no route uses
        // as its source (the diff adds those after the rules).
        log: "ip -4 route add 10.98.1.0/24 dev eth1 scope link src 10.98.1.20 table 10001: No such device (os error 19)",
        max_secs: 5.0,
        run: run_link_deleted_before_apply,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    foreign_rule_same_but_protocol => Row {
        name: "foreign_rule_same_but_protocol",
        fault: "someone else's rule identical to leasehook's but for its protocol (`proto static`)",
        does: "the kernel keys rules by protocol too (no EEXIST): leasehook adds its own beside it and never touches the foreign one",
        kernel: Kernel::Exactly {
            rules: &[
                "10001 from 10.98.1.20 lookup 10001 proto static",
                "10001 from 10.98.1.20 lookup 10001 proto 176",
                "10001 from 10.98.1.21 lookup 10001 proto 176",
            ],
            routes: BASE_ROUTES,
            addresses: &["eth1 10.98.1.21/32"],
        },
        files: &[FileWant::Holds(STATE, "10.98.1.20/32")],
        log: "5 change(s) for eth1 IPv4",
        run: || foreign_then_bound(&["rule", "add", "from", "10.98.1.20", "lookup", "10001", "priority", "10001", "proto", "static"]),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    foreign_route_eexist => Row {
        name: "foreign_route_eexist",
        fault: "EEXIST: someone else's route in leasehook's table, identical but for its protocol",
        does: "seen before the first write: keeps off eth1 (nothing written, nothing adopted or replaced), the error names the route as `ip` prints it and its protocol, the conflict is recorded",
        exit: Some(1),
        kernel: Kernel::Exactly {
            rules: &[],
            routes: &["10.98.1.0/24 via - dev eth1 scope link src 10.98.1.20 table 10001 proto static"],
            addresses: &[],
        },
        files: &[FileWant::Absent(STATE), FileWant::Holds(CONFLICT, "proto static")],
        log: "eth1: route \"10.98.1.0/24 dev eth1 table 10001 proto static\" is in the way (not leasehook's: proto static): leasehook keeps off eth1, nothing written, until it is gone",
        not_in_log: "File exists",
        run: || foreign_then_bound(&["route", "add", "10.98.1.0/24", "dev", "eth1", "table", "10001", "proto", "static", "scope", "link", "src", "10.98.1.20"]),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    foreign_route_next_event => Row {
        name: "foreign_route_next_event",
        fault: "the same foreign route, amazon-ec2-net-utils' udev rule on the image; BOUND (the conflict, an error), then RENEW",
        does: "RENEW meets the recorded conflict again: nothing written, no EEXIST and no rollback, said at `info` (once as an error, at BOUND), the owner named by the table it uses",
        exit: Some(1),
        kernel: Kernel::Exactly {
            rules: &[],
            routes: &["10.98.1.0/24 via - dev eth1 scope link src 10.98.1.20 table 10001 proto static"],
            addresses: &[],
        },
        files: &[FileWant::Absent(STATE), FileWant::Holds(CONFLICT, "amazon-ec2-net-utils")],
        log: "proto static; amazon-ec2-net-utils's (found: /usr/lib/udev/rules.d/99-vpc-policy-routes.rules)): leasehook keeps off eth1, nothing written, until it is gone (as at the last event)",
        not_in_log: "rolled back",
        run: run_foreign_route_next_event,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    foreign_secondary_address => Row {
        name: "foreign_secondary_address",
        fault: "a secondary address another tool already put on the link (`ip address add 10.98.1.21/32 dev eth1`), then BOUND and RELEASE",
        does: "BOUND applies the rules and routes and leaves the address to its owner (not added, not recorded); RELEASE removes leasehook's objects and not the address",
        kernel: Kernel::Exactly { rules: &[], routes: &[], addresses: &["eth1 10.98.1.21/32"] },
        files: &[],
        log: "10.98.1.21/32 on eth1 is already there and not leasehook's: left to its owner",
        not_in_log: "File exists",
        run: foreign_address_bound_then_released,
        ..Row::KEEPS
    };
}

/// Someone else adds `ip ARGS` in the namespace, then a BOUND with a healthy IMDS.
pub(crate) fn foreign_then_bound(args: &[&str]) -> Seen {
    let i = Instance::new("fforeign");
    i.ns.ip(args);
    i.faulted(bound_patiently)
}

/// Where a conflict is recorded (`leasehook_core::commit::CONFLICT`).
const CONFLICT: &str = "run/leasehook/conflict/eth1";

/// A foreign route in eth1's table and amazon-ec2-net-utils' udev rule in the
/// root; BOUND (checked here: the conflict is an error naming the route, its
/// protocol and the tool) and RENEW (the row: a repeat, nothing tried).
fn run_foreign_route_next_event() -> Seen {
    let i = Instance::new("fforeign2");
    let route =
        "route add 10.98.1.0/24 dev eth1 table 10001 proto static scope link src 10.98.1.20";
    i.ns.ip(&route.split(' ').collect::<Vec<_>>());
    let rule = i
        .root
        .join("usr/lib/udev/rules.d/99-vpc-policy-routes.rules");
    std::fs::create_dir_all(rule.parent().unwrap()).unwrap();
    std::fs::write(&rule, "SUBSYSTEM==\"net\", ACTION==\"add\"\n").unwrap();
    i.faulted(|i| {
        let url = i.start(Cloud::Ec2, &Imds::healthy());
        let env = [
            ("LEASEHOOK_IMDS_BUDGET_S", "5"),
            ("LEASEHOOK_IMDS_SYNC_BUDGET_S", "5"),
        ];
        let (bound, _) = i.shim_env("BOUND", &url, &env);
        let log = text(&bound);
        assert_eq!(bound.status.code(), Some(1), "{log}");
        assert!(
            log.contains("route \"10.98.1.0/24 dev eth1 table 10001 proto static\" is in the way")
                && log.contains("amazon-ec2-net-utils's (found: ")
                && !log.contains("as at the last event"),
            "{log}"
        );
        i.shim_env("RENEW", &url, &env)
    })
}

/// Another tool's secondary address on eth1, then BOUND (checked here: leasehook's
/// rules and routes are in, the state does not claim the address) and RELEASE;
/// the row checks BOUND's log and the kernel after RELEASE.
fn foreign_address_bound_then_released() -> Seen {
    let i = Instance::new("faddr");
    i.ns.ip(&["address", "add", "10.98.1.21/32", "dev", "eth1"]);
    i.faulted(|i| {
        let url = i.start(Cloud::Ec2, &Imds::healthy());
        let (bound, elapsed) = i.shim("BOUND", &url);
        let (rules, routes, _) = snap(&i.ns);
        assert_eq!(rules.len(), 2, "{rules:?}\n{}", text(&bound));
        assert_eq!(routes.len(), 2, "{routes:?}");
        let state = std::fs::read_to_string(i.root.join(STATE)).unwrap();
        // The rule from the address is leasehook's; the address is not.
        assert!(state.contains("\"addresses\":[]"), "{state}");
        let (released, _) = i.shim("RELEASE", &url);
        assert_eq!(released.status.code(), Some(0), "{}", text(&released));
        (bound, elapsed)
    })
}

/// An applier that deletes eth1 right before the first write: after the plan was
/// validated against the links, before anything was written.
struct DeleteLinkFirst {
    inner: leasehook_core::apply::netlink::NetlinkApplier,
    ns: String,
    done: bool,
}

impl leasehook_core::apply::Applier for DeleteLinkFirst {
    fn links(&mut self) -> leasehook_core::error::Result<Vec<leasehook_core::apply::KernelLink>> {
        self.inner.links()
    }
    fn observe(
        &mut self,
        links: &leasehook_core::apply::LinkIndex,
        recorded: &std::collections::BTreeSet<leasehook_core::model::Address>,
    ) -> leasehook_core::error::Result<leasehook_core::apply::Observed> {
        self.inner.observe(links, recorded)
    }
    fn execute(
        &mut self,
        op: &leasehook_core::diff::Op,
        links: &leasehook_core::apply::LinkIndex,
    ) -> leasehook_core::error::Result<()> {
        self.execute_many(std::slice::from_ref(op), links)
            .pop()
            .unwrap_or(Ok(()))
    }
    fn execute_many(
        &mut self,
        ops: &[leasehook_core::diff::Op],
        links: &leasehook_core::apply::LinkIndex,
    ) -> Vec<leasehook_core::error::Result<()>> {
        if !self.done {
            self.done = true;
            run(Command::new("ip").args(["-n", &self.ns, "link", "del", "eth1"]));
        }
        self.inner.execute_many(ops, links)
    }
}

fn run_link_deleted_before_apply() -> Seen {
    use leasehook_core::apply::{self, state};
    let i = Instance::new("flink");
    // The plan, as the hook makes it: eth1's lease and the world's metadata.
    let plan_out = run(Command::new(leasehook_bin())
        .arg("plan")
        .arg("--metadata")
        .arg(i.dir.file(
            "md.json",
            &default_tree()["latest"]["meta-data"].to_string(),
        ))
        .args(["--link", &format!("eth0={MAC0}"), "--link", &format!("eth1={MAC1}")])
        .arg("--lease")
        .arg(i.dir.file(
            "eth1.env",
            "reason=BOUND\ninterface=eth1\nnew_ip_address=10.98.1.20\nnew_subnet_mask=255.255.255.0\nnew_routers=10.98.1.1\n",
        ))
        .args(["--format", "json"]));
    let plan: leasehook_core::model::Plan = serde_json::from_slice(&plan_out.stdout).unwrap();
    assert!(
        plan.interfaces.iter().any(|p| !p.rules.is_empty()),
        "the plan has no rules: {}",
        String::from_utf8_lossy(&plan_out.stdout)
    );
    i.faulted(|i| {
        let (ns, root) = (i.ns.name.clone(), i.root.clone());
        let t = Instant::now();
        let result = i.ns.run_in(move || {
            let mut applier = DeleteLinkFirst {
                inner: apply::netlink::NetlinkApplier::try_new().unwrap(),
                ns,
                done: false,
            };
            let paths = state::Paths::new(&root);
            // What the hook does: apply, then record only what went in.
            apply::apply_plan(&mut applier, &plan, &[]).inspect(|_| {
                for ip in &plan.interfaces {
                    let st = state::InterfaceState::record(None, ip, plan.profile);
                    state::write_state(&paths, &st).unwrap();
                }
            })
        });
        Ran {
            exit: None,
            elapsed: t.elapsed(),
            log: match &result {
                Ok(r) => format!("applied {} change(s)", r.writes()),
                Err(e) => e.to_string(),
            },
        }
    })
}

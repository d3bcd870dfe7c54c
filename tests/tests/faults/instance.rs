//! The instance every kernel row runs on (a namespace with two NICs and a root),
//! its clients' processes and each cloud's metadata service in it, and the
//! paths and plans the rows name.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use leasehook_tests::clouds::{Cloud, REFUSED};
use leasehook_tests::netns::{Netns, TempDir, leasehook_bin, logging_to_stderr, sibling_bin};
use leasehook_tests::world::{MAC0, MAC1, default_tree, eth1_lease, start_first_line};
use serde_json::{Value, json};

use crate::matrix::{Kernel, Ran, Seen, files_under, snap};

/// The plan leasehook applies for eth1's DHCPv4 lease with the world's metadata.
pub(crate) const BASE_RULES: &[&str] = &[
    "10001 from 10.98.1.20 lookup 10001 proto 176",
    "10001 from 10.98.1.21 lookup 10001 proto 176",
];
pub(crate) const BASE_ROUTES: &[&str] = &[
    "10.98.1.0/24 via - dev eth1 scope link src 10.98.1.20 table 10001 proto 176",
    "default via 10.98.1.1 dev eth1 scope - src - table 10001 proto 176",
];
/// The kernel once a RENEW of eth1 applied the address IMDS lists third,
/// 10.98.1.22 ([`THREE_IPS`]), beside the two of the good BOUND.
pub(crate) const WITH_22: Kernel = Kernel::Exactly {
    rules: &[
        "10001 from 10.98.1.20 lookup 10001 proto 176",
        "10001 from 10.98.1.21 lookup 10001 proto 176",
        "10001 from 10.98.1.22 lookup 10001 proto 176",
    ],
    routes: BASE_ROUTES,
    addresses: &["eth1 10.98.1.21/32", "eth1 10.98.1.22/32"],
};

/// eth1's `local-ipv4s` with a third address, 10.98.1.22.
pub(crate) const THREE_IPS: &str = "10.98.1.20\n10.98.1.21\n10.98.1.22";

pub(crate) const STATE: &str = "run/leasehook/iface/eth1.json";
pub(crate) const TOKEN: &str = "run/leasehook/imds-token";
pub(crate) const RECORD: &str = "var/lib/leasehook/instances/i-87018aed/datasource.json";
pub(crate) const INSTANCE_ID: &str = "var/lib/leasehook/data/instance-id";
pub(crate) const INSTANCE_DATA: &str = "run/leasehook/instance-data.json";

/// eth1's plan with the `aliyun` provider: table `10000 + slot(MAC1)`.
pub(crate) const ALIYUN_RULES: &[&str] = &[
    "19872 from 10.98.1.20 lookup 19872 proto 176",
    "19872 from 10.98.1.21 lookup 19872 proto 176",
];
pub(crate) const ALIYUN_TOKEN: &str = "run/leasehook/aliyun-token";

/// eth1's plan with the `oracle` provider: table `10000 + slot(MAC1)`, its one
/// address (configured from the metadata, so no secondary /32).
pub(crate) const ORACLE_RULES: &[&str] = &["19872 from 10.98.1.20 lookup 19872 proto 176"];

/// eth1's plan with the `openstack` provider and the emulator's world:
/// table `10000 + slot(MAC1)`, the lease's address the one rule source.
pub(crate) const OPENSTACK_RULES: &[&str] = &["19872 from 10.98.1.20 lookup 19872 proto 176"];

/// The rules eth1's lease (or, on Oracle, the metadata) gives it on `cloud`.
pub(crate) fn bound_rules(cloud: Cloud) -> &'static [&'static str] {
    match cloud {
        Cloud::Ec2 | Cloud::Gce | Cloud::Azure => BASE_RULES,
        Cloud::Aliyun => ALIYUN_RULES,
        Cloud::Oracle => ORACLE_RULES,
        Cloud::OpenStack => OPENSTACK_RULES,
    }
}

// --- Processes and logs ----------------------------------------------------------

/// A child process, killed when dropped.
pub(crate) struct Proc(pub(crate) Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `cmd` and reads its first line (the address it bound).
pub(crate) fn start_with_addr(cmd: Command, what: &str) -> (Proc, String) {
    let (child, addr) = start_first_line(cmd, what);
    (Proc(child), addr)
}

/// A command running `program` with the log on standard error, inside `ns` when
/// given, under `wrap` (`setpriv ...`), with exactly the environment `env` when
/// given (dhclient-script's is clean).
pub(crate) fn command(
    ns: Option<&Netns>,
    env: Option<&[(String, String)]>,
    wrap: &[&str],
    program: &Path,
) -> Command {
    let mut argv = logging_to_stderr(ns);
    argv.extend(wrap.iter().map(OsString::from));
    if let Some(env) = env {
        argv.push("env".into());
        argv.push("-i".into());
        argv.extend(env.iter().map(|(k, v)| OsString::from(format!("{k}={v}"))));
    }
    argv.push(program.into());
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    cmd
}

pub(crate) fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

// --- The instance -----------------------------------------------------------------

/// A namespace with the instance's two NICs, addressed as dhclient leaves them
/// (eth0 10.98.0.10/24 primary, eth1 10.98.1.20/24 secondary), and a root.
pub(crate) struct Instance {
    /// The metadata service running inside the namespace, if any.
    pub(crate) imds: Option<Proc>,
    pub(crate) ns: Netns,
    pub(crate) dir: TempDir,
    pub(crate) root: PathBuf,
}

/// How the metadata service misbehaves in the faulted run.
pub(crate) enum Imds {
    /// Not running: connections are refused.
    Down,
    /// The emulator with this scenario.
    Scenario(Value),
    /// Every connection reset (EC2's emulator only).
    Reset,
}

impl Imds {
    /// The emulator with no fault.
    pub(crate) fn healthy() -> Self {
        Self::Scenario(json!({}))
    }
}

/// The world's tree with `set` (MAC, key, value) applied.
pub(crate) fn tree_with(set: &[(&str, &str, &str)]) -> Value {
    let mut t = default_tree();
    for (mac, key, value) in set {
        t["latest"]["meta-data"]["network"]["interfaces"]["macs"][*mac][*key] = json!(value);
    }
    t
}

/// The world's tree without eth1's subnet (a new ENI IMDS has not caught up with).
pub(crate) fn tree_without_eth1_subnet() -> Value {
    let mut tree = default_tree();
    tree["latest"]["meta-data"]["network"]["interfaces"]["macs"][MAC1]["subnet-ipv4-cidr-block"] =
        Value::Null;
    tree
}

impl Instance {
    pub(crate) fn new(tag: &str) -> Self {
        let ns = Netns::new(tag);
        for (n, mac) in [(0, MAC0), (1, MAC1)] {
            let eth = format!("eth{n}");
            ns.veth(&eth, mac, &format!("vpc{n}"));
            ns.ip(&[
                "address",
                "add",
                &format!("10.98.{n}.{}/24", 10 * (n + 1)),
                "dev",
                &eth,
            ]);
        }
        let dir = TempDir::new(tag);
        let root = dir.0.join("root");
        std::fs::create_dir_all(&root).unwrap();
        Self {
            imds: None,
            ns,
            dir,
            root,
        }
    }

    /// (Re)starts `cloud`'s metadata service inside the namespace as `how` says
    /// (`tree`, where given, in place of the world's metadata); its base URL.
    pub(crate) fn start_tree(&mut self, cloud: Cloud, tree: Option<&Value>, how: &Imds) -> String {
        self.imds = None;
        let mut cmd = self
            .ns
            .command(sibling_bin(cloud.emulator()).to_str().unwrap());
        match how {
            Imds::Down => return REFUSED.to_owned(),
            Imds::Reset => {
                assert_eq!(cloud, Cloud::Ec2, "only EC2's emulator resets connections");
                cmd.args([
                    "--cloud",
                    "ec2",
                    "--bind",
                    "127.0.0.1:0",
                    "--reset",
                    "--log",
                ])
                .arg(cloud.log(&self.dir.0));
            }
            Imds::Scenario(s) => {
                cmd.args(cloud.emulator_args(tree, s, &self.dir.0));
            }
        }
        let (p, addr) = start_with_addr(cmd, cloud.emulator());
        self.imds = Some(p);
        format!("http://{addr}")
    }

    /// (Re)starts `cloud`'s metadata service on the world's metadata.
    pub(crate) fn start(&mut self, cloud: Cloud, how: &Imds) -> String {
        self.start_tree(cloud, None, how)
    }

    /// (Re)starts EC2's IMDS serving `tree` as `how` says.
    pub(crate) fn start_imds(&mut self, tree: &Value, how: &Imds) -> String {
        self.start_tree(Cloud::Ec2, Some(tree), how)
    }

    /// What makes leasehook look at eth1 on `cloud`, against its metadata
    /// service at `url`: `leasehook-dhclient` for eth1's lease with `reason`, as
    /// dhclient-script would run it (a clean environment), or, where eth1 has no
    /// DHCP (Oracle), `leasehook refresh`; `extra` variables set after the others
    /// (a later `env -i` assignment wins).
    pub(crate) fn event(
        &self,
        cloud: Cloud,
        reason: &str,
        url: &str,
        extra: &[(&str, &str)],
    ) -> (Output, Duration) {
        if !cloud.leases_secondary() {
            return self.refresh_env(cloud, url, extra);
        }
        let mut env = owned(&eth1_lease(reason));
        env.extend(cloud.env(url));
        env.extend(owned(&[("LEASEHOOK_IMDS_BIND_INTERFACE", "false")]));
        env.extend(owned(extra));
        self.run_in::<&str>(&env, &sibling_bin("leasehook-dhclient"), &[])
    }

    /// [`Instance::event`] against EC2's IMDS.
    pub(crate) fn shim(&self, reason: &str, endpoint: &str) -> (Output, Duration) {
        self.event(Cloud::Ec2, reason, endpoint, &[])
    }

    /// [`Instance::event`] against EC2's IMDS, with `extra`.
    pub(crate) fn shim_env(
        &self,
        reason: &str,
        endpoint: &str,
        extra: &[(&str, &str)],
    ) -> (Output, Duration) {
        self.event(Cloud::Ec2, reason, endpoint, extra)
    }

    /// eth1 without its DHCP address (OCI serves a secondary VNIC none).
    pub(crate) fn unaddress_eth1(&self) {
        self.ns
            .ip(&["address", "del", "10.98.1.20/24", "dev", "eth1"]);
    }

    /// The default route a DHCP client on eth0 leaves in main (`default via
    /// 10.98.0.1 dev eth0`): the host's router, and what `ip route get` answers
    /// for every other subnet's host.
    pub(crate) fn default_route_by_eth0(&self) {
        self.ns
            .ip(&["route", "add", "default", "via", "10.98.0.1", "dev", "eth0"]);
    }

    /// Whether eth1 holds its address (10.98.1.20/24: the lease's, or OCI's).
    pub(crate) fn eth1_addressed(&self) -> bool {
        self.ns
            .ip(&["-4", "address", "show", "eth1"])
            .contains("10.98.1.20/24")
    }

    /// Runs `program` with `args` in the namespace with exactly `vars`, the
    /// rows' settings (budget 1 s, log level `info`) and the root; its standard
    /// output appended to its log.
    pub(crate) fn run_in<S: AsRef<OsStr>>(
        &self,
        vars: &[(String, String)],
        program: &Path,
        args: &[S],
    ) -> (Output, Duration) {
        let mut env = owned(&[
            ("LEASEHOOK_IMDS_SYNC_BUDGET_S", "1"),
            ("LEASEHOOK_IMDS_BUDGET_S", "1"),
            ("LEASEHOOK_LOG_LEVEL", "info"),
        ]);
        env.push(("LEASEHOOK_ROOT".to_owned(), self.root.display().to_string()));
        // The row's own variables last: a later `env -i` assignment wins.
        env.extend(vars.iter().cloned());
        let mut cmd = command(Some(&self.ns), Some(&env), &[], program);
        cmd.args(args);
        timed(cmd)
    }

    /// `leasehook ARGS` in the namespace with `env` exactly (`None`: the
    /// test's), its standard output appended to its log.
    pub(crate) fn leasehook<S: AsRef<OsStr>>(
        &self,
        env: Option<&[(String, String)]>,
        args: &[S],
    ) -> (Output, Duration) {
        let mut cmd = command(Some(&self.ns), env, &[], &leasehook_bin());
        cmd.args(args);
        timed(cmd)
    }

    /// `leasehook refresh -v` against `cloud` at `url`, budget 1 s; its standard
    /// output appended to its log.
    pub(crate) fn refresh(&self, cloud: Cloud, url: &str) -> (Output, Duration) {
        self.refresh_env(cloud, url, &[])
    }

    /// [`Instance::refresh`] with `extra` set after the other variables.
    pub(crate) fn refresh_env(
        &self,
        cloud: Cloud,
        url: &str,
        extra: &[(&str, &str)],
    ) -> (Output, Duration) {
        let mut env = cloud.env(url);
        env.retain(|(k, _)| k != "LEASEHOOK_IMDS_ENDPOINTS" || cloud == Cloud::Ec2);
        env.extend(owned(extra));
        // -v: an unchanged NIC, or one left as it is, is printed only so.
        self.run_in(&env, &leasehook_bin(), &["refresh", "-v"])
    }

    /// A good BOUND of eth1 against a healthy `cloud` (where eth1 has no DHCP:
    /// no address, then a good refresh): the last good state every fault starts
    /// from (the metadata service is stopped afterwards).
    pub(crate) fn bound_on(&mut self, cloud: Cloud) {
        if !cloud.leases_secondary() && self.eth1_addressed() {
            self.unaddress_eth1();
        }
        let url = self.start(cloud, &Imds::healthy());
        let (out, _) = self.event(cloud, "BOUND", &url, &[]);
        assert!(out.status.success(), "BOUND failed: {}", text(&out));
        assert!(self.eth1_addressed(), "eth1 has no address: {}", text(&out));
        assert_eq!(
            snap(&self.ns).0,
            bound_rules(cloud),
            "BOUND did not apply the plan: {}",
            text(&out)
        );
        assert!(self.root.join(STATE).is_file());
        if let Some(token) = cloud.token_file() {
            assert!(
                self.root.join(token).is_file(),
                "no {token}: {}",
                text(&out)
            );
        }
        self.imds = None;
    }

    /// [`Instance::bound_on`] EC2.
    pub(crate) fn bound(&mut self) {
        self.bound_on(Cloud::Ec2);
    }

    /// The kernel and the files now, then the faulted run `f`: what the row saw.
    pub(crate) fn faulted<R: Into<Ran>>(mut self, f: impl FnOnce(&mut Self) -> R) -> Seen {
        let kernel_before = snap(&self.ns);
        let files_before = files_under(&self.root);
        let ran: Ran = f(&mut self).into();
        Seen {
            exit: ran.exit,
            log: ran.log,
            root: self.root.clone(),
            files_before,
            kernel_before: Some(kernel_before),
            kernel_after: Some(snap(&self.ns)),
            elapsed: ran.elapsed,
            keep: vec![Box::new(self)],
        }
    }
}

/// A good BOUND of eth1 on `cloud`, then a RENEW while its metadata service
/// misbehaves as `how` says: the shape of every cloud's metadata rows.
pub(crate) fn renew(cloud: Cloud, how: &Imds) -> Seen {
    renew_with(cloud, None, how, &[])
}

/// [`renew`], the faulted service serving `tree` where given, the RENEW with
/// `extra` variables.
pub(crate) fn renew_with(
    cloud: Cloud,
    tree: Option<&Value>,
    how: &Imds,
    extra: &[(&str, &str)],
) -> Seen {
    let mut i = Instance::new(&format!("f{}", cloud.provider()));
    i.bound_on(cloud);
    i.faulted(|i| {
        let url = i.start_tree(cloud, tree, how);
        let (out, elapsed) = i.event(cloud, "RENEW", &url, extra);
        assert!(
            i.eth1_addressed(),
            "the fault took eth1's address: {}",
            text(&out)
        );
        (out, elapsed)
    })
}

/// A RENEW of eth1 (Oracle: a refresh) against a healthy `cloud`: the faulted
/// run of a row whose fault is planted on the host, not in the service.
pub(crate) fn renew_healthy(i: &mut Instance, cloud: Cloud) -> (Output, Duration) {
    let url = i.start(cloud, &Imds::healthy());
    i.event(cloud, "RENEW", &url, &[])
}

/// `vars` as owned pairs.
pub(crate) fn owned(vars: &[(&str, &str)]) -> Vec<(String, String)> {
    vars.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Runs `cmd` to its end: its output (standard output appended to standard
/// error, the log a row reads) and how long it took.
pub(crate) fn timed(mut cmd: Command) -> (Output, Duration) {
    let t = Instant::now();
    let mut out = cmd.output().unwrap();
    let elapsed = t.elapsed();
    let stdout = out.stdout.clone();
    out.stderr.extend_from_slice(&stdout);
    (out, elapsed)
}

/// The rules of eth1's table `10000 + slot`, one from each of `sources`, as
/// [`snap`] shows them.
pub(crate) fn slot_rules(slot: u32, sources: &[&str]) -> Vec<String> {
    let t = 10_000 + slot;
    sources
        .iter()
        .map(|s| format!("{t} from {s} lookup {t} proto 176"))
        .collect()
}

/// A BOUND of eth1 against a healthy IMDS, with a budget the whole wait fits in
/// on a loaded machine (5 s) and the log at `debug`: for the rows about what is
/// on the host, not about the wait.
pub(crate) fn bound_patiently(i: &mut Instance) -> (Output, Duration) {
    let url = i.start(Cloud::Ec2, &Imds::healthy());
    i.shim_env(
        "BOUND",
        &url,
        &[
            ("LEASEHOOK_LOG_LEVEL", "debug"),
            ("LEASEHOOK_IMDS_BUDGET_S", "5"),
            ("LEASEHOOK_IMDS_SYNC_BUDGET_S", "5"),
        ],
    )
}

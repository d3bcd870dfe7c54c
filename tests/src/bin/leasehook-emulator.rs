// SPDX-License-Identifier: Apache-2.0
//! Performs IO: `leasehook-emulator`, every cloud's metadata service emulator
//! for tests and benchmarks (never for production): one HTTP shell, log, fault
//! rules, allowed sources and rate limit (`leasehook_tests::shell`), each cloud
//! only its answers (`leasehook_tests::{emulator, gce_emulator, ...}`).
//!
//! ```text
//! leasehook-emulator --cloud ec2|gce|azure|aliyun|oracle|openstack
//!     [--bind ADDR:PORT] [--scenario JSON|@FILE] [--dir DIR] [--log FILE]
//!     [--allow-source PREFIX]... [--rate-limit COUNT/SECONDS]   (every cloud)
//!     [--tree JSON|@FILE]            (ec2, aliyun, gce, openstack)
//!     [--require-token] [--dump-tree] [--reset]                 (ec2)
//!     [--normal-mode]                                           (aliyun)
//!     [--instance JSON|@FILE]        (azure, oracle)
//!     [--vnics JSON|@FILE]           (oracle)
//! leasehook-emulator --cloud gce --set ADDR:PORT PATH JSON
//! ```
//!
//! It prints the address it bound on stdout (useful with port 0) and serves
//! until killed. With `--dir` (the test world appends its folder) the log goes
//! to the cloud's file there unless `--log` says otherwise, and the cloud's
//! control files (Azure's hidden NICs, Oracle's detached VNICs and fault) are
//! read from it.

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use leasehook_tests::shell::{self, EmulatorArgs, json_or};
use leasehook_tests::{
    aliyun_emulator, azure_emulator, emulator, gce_emulator, openstack_emulator, oracle_emulator,
};

const FORMATS: &str = "\
EVERY CLOUD
  SCENARIO (--scenario JSON|@FILE): {\"appear\": [...], \"rules\": [...]}. Times are
    seconds since the first request. Rules (the shell's, the same for every cloud):
    {\"path\": P, \"method\": \"PUT\", \"query\": Q, \"from\": 0, \"until\": 1, \"count\": 2,
    \"delay\": 0.5, \"status\": 503, \"retry_after\": 1, \"body\": B} or {\"path\": P,
    \"action\": \"drop|garbage|not-json|not-http|huge|no-flavor\", \"size\": N}; paths
    match by whole segments; the first matching rule decides. `appear` is the
    cloud's: ec2/aliyun {\"path\": P, \"after\": S} (and \"values\": [{\"path\": P,
    \"value\": V, \"from\": 0, \"until\": 1}]), gce {\"nic\": N, \"after\": S}, azure and
    oracle {\"mac\": M, \"after\": S}, openstack {\"link\": N, \"after\": S}.
  LOG (--log FILE, or the cloud's file in --dir): one line per request, appended:
    SECONDS PEER METHOD PATH STATUS (gce adds FLAVOR; azure and oracle log
    METHOD URL HEADER=VALUE STATUS); STATUS is the status or the action.
  SOURCES (--allow-source): only those answered; how others are refused is the
    cloud's (ec2, aliyun, gce: 403; azure: read, never answered).
  RATE LIMIT (--rate-limit COUNT/SECONDS): azure: per VM, default 5/1, 429
    `Too many requests` with Retry-After: 1; openstack: per source, default off,
    haproxy's 429 page (Neutron's metadata_rate_limiting, 10/10).

EC2 (--cloud ec2): TREE (--tree) a JSON object rooted at `/` ({\"latest\":
  {\"meta-data\": {...}}}): an object is a folder (its listing: keys one per line,
  subfolders with a trailing `/`), a string or number a leaf, a list a leaf of its
  items joined by newlines, null 404. `/` lists EC2's dated versions and latest,
  each reading the same tree; HEAD answers as GET without the body; other methods
  405. IMDSv2: PUT /latest/api/token with X-aws-ec2-metadata-token-ttl-seconds:
  1..21600 returns a token; a GET with an unknown or expired token gets 401, with
  --require-token one without a token too. --reset: serve nothing, reset each
  connection (TCP RST). --dump-tree: print the tree and exit. Log: DIR/imds.log.

ALIBABA (--cloud aliyun): EC2's emulator in ECS's dialect, on 100.100.100.200:80
  by default. Hardened mode (default): X-aliyun-ecs-metadata-token-ttl-seconds /
  X-aliyun-ecs-metadata-token; --normal-mode answers GETs without a token. Only
  the VPC (10.98.0.0/16 unless --allow-source) is answered. Log: DIR/aliyun.log.

GCE (--cloud gce): TREE {\"instance\": {...}, \"project\": {...}} below
  /computeMetadata/v1/; a container answers its listing, or JSON with camelCase
  keys under ?recursive=true; a leaf its text. Without Metadata-Flavor: Google, or
  with X-Forwarded-For: 403; every answer carries Metadata-Flavor: Google. Long
  poll: ?wait_for_change=true[&last_etag=E][&timeout_sec=S]. --set ADDR:PORT PATH
  JSON replaces a running emulator's value at PATH (PUT /emulator/v1/PATH). Log:
  DIR/gce.log.

AZURE (--cloud azure): --instance {\"compute\": {...}, \"network\": {...}} at
  /metadata/instance?api-version=V (Metadata: true required); format=text leaves
  and listings. NICs named in DIR/azure-hidden are left out. Log:
  DIR/azure-imds.log.

ORACLE (--cloud oracle): IMDS v2, Authorization: Bearer Oracle; --vnics the
  /opc/v2/vnics/ list, --instance the /opc/v2/instance/ document. VNICs named in
  DIR/oracle-detached are left out; while DIR/oracle-fault exists every answer is
  the fault it names. Log: DIR/oracle-imds.log.

OPENSTACK (--cloud openstack): TREE {\"meta_data\": {...}, \"network_data\": {...},
  \"user_data\": \"...\"} as /openstack/latest/meta_data.json, network_data.json and
  user_data, and under every dated version; every method answers as GET. Log:
  DIR/openstack.log.";

/// The cloud whose metadata service is emulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Cloud {
    Ec2,
    Gce,
    Azure,
    Aliyun,
    Oracle,
    Openstack,
}

/// Every cloud's metadata service emulator, for tests and benchmarks.
#[derive(Debug, Parser)]
#[command(name = "leasehook-emulator", version, after_long_help = FORMATS)]
struct Args {
    /// The cloud whose metadata service to serve.
    #[arg(long, value_enum)]
    cloud: Cloud,
    #[command(flatten)]
    common: EmulatorArgs,
    /// The tree, JSON or @FILE (ec2, aliyun, gce, openstack); default: the test
    /// world's instance (ec2: a two-NIC sample instance).
    #[arg(long, value_name = "JSON", help_heading = "Cloud options")]
    tree: Option<String>,
    /// The instance document, JSON or @FILE (azure: `compute`, `network`;
    /// oracle: `/opc/v2/instance/`); default: the test world's.
    #[arg(long, value_name = "JSON", help_heading = "Cloud options")]
    instance: Option<String>,
    /// The `/opc/v2/vnics/` list, JSON or @FILE (oracle); default: the test
    /// world's two VNICs.
    #[arg(long, value_name = "JSON", help_heading = "Cloud options")]
    vnics: Option<String>,
    #[command(flatten)]
    ec2: Ec2Args,
    /// Answer GETs without a token, ECS's normal mode (aliyun).
    #[arg(long, help_heading = "Cloud options")]
    normal_mode: bool,
    /// Change a running emulator's tree instead of serving: ADDR:PORT PATH JSON
    /// (gce).
    #[arg(long, num_args = 3, value_names = ["ADDR:PORT", "PATH", "JSON"],
          help_heading = "Cloud options")]
    set: Vec<String>,
}

/// EC2's own options.
#[derive(Debug, clap::Args)]
struct Ec2Args {
    /// Answer 401 to a GET without a token (ec2).
    #[arg(long, help_heading = "Cloud options")]
    require_token: bool,
    /// Print the tree that would be served (JSON) and exit (ec2).
    #[arg(long, help_heading = "Cloud options")]
    dump_tree: bool,
    /// Serve nothing: read each request and reset the connection (ec2).
    #[arg(long, help_heading = "Cloud options",
          conflicts_with_all = ["tree", "scenario", "require_token", "dump_tree"])]
    reset: bool,
}

impl Args {
    /// Refuses the options `cloud` does not take (each cloud only its own).
    fn check(&self) -> Result<(), String> {
        use Cloud::{Aliyun, Azure, Ec2, Gce, Openstack, Oracle};
        let given: [(&str, bool, &[Cloud]); 8] = [
            (
                "--tree",
                self.tree.is_some(),
                &[Ec2, Aliyun, Gce, Openstack],
            ),
            ("--instance", self.instance.is_some(), &[Azure, Oracle]),
            ("--vnics", self.vnics.is_some(), &[Oracle]),
            ("--require-token", self.ec2.require_token, &[Ec2]),
            ("--dump-tree", self.ec2.dump_tree, &[Ec2]),
            ("--reset", self.ec2.reset, &[Ec2]),
            ("--normal-mode", self.normal_mode, &[Aliyun]),
            ("--set", !self.set.is_empty(), &[Gce]),
        ];
        match given
            .iter()
            .find(|(_, on, clouds)| *on && !clouds.contains(&self.cloud))
        {
            Some((flag, _, _)) => Err(format!(
                "{flag} is not an option of --cloud {}",
                self.cloud
                    .to_possible_value()
                    .map_or_else(String::new, |v| v.get_name().to_owned())
            )),
            None => Ok(()),
        }
    }
}

/// The loopback address an emulator listens on unless `--bind` says.
fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

fn run(args: &Args) -> Result<(), String> {
    args.check()?;
    let c = &args.common;
    match args.cloud {
        Cloud::Ec2 => ec2(args),
        Cloud::Aliyun => {
            let tree = json_or("--tree", args.tree.as_deref(), aliyun_emulator::world_tree)?;
            let ecs = aliyun_emulator::config(tree, !args.normal_mode);
            let config = c.config(
                ecs.world,
                aliyun_emulator::LOG_NAME,
                ecs.allowed_sources,
                None,
            )?;
            let ecs_address = format!("{}:80", aliyun_emulator::ADDRESS);
            let bind = c.bind_or(
                ecs_address
                    .parse()
                    .map_err(|e| format!("{ecs_address}: {e}"))?,
            );
            shell::announce_and_wait(bind, emulator::Emulator::start(bind, config))
        }
        Cloud::Gce if !args.set.is_empty() => gce_set(&args.set),
        Cloud::Gce => {
            let tree = json_or("--tree", args.tree.as_deref(), gce_emulator::world_tree)?;
            let config = c.config(tree, gce_emulator::LOG_NAME, Vec::new(), None)?;
            let bind = c.bind_or(loopback());
            shell::announce_and_wait(bind, gce_emulator::GceEmulator::start(bind, config))
        }
        Cloud::Azure => {
            let served = azure_emulator::Served {
                instance: json_or(
                    "--instance",
                    args.instance.as_deref(),
                    azure_emulator::world_instance,
                )?,
                hidden_file: c.in_dir(azure_emulator::HIDDEN_FILE),
            };
            let config = c.config(
                served,
                azure_emulator::LOG_FILE,
                Vec::new(),
                Some(azure_emulator::RATE_LIMIT),
            )?;
            let bind = c.bind_or(loopback());
            shell::announce_and_wait(bind, azure_emulator::Emulator::start(bind, config))
        }
        Cloud::Oracle => {
            let served = oracle_emulator::Served {
                vnics: json_or(
                    "--vnics",
                    args.vnics.as_deref(),
                    oracle_emulator::world_vnics,
                )?,
                instance: json_or(
                    "--instance",
                    args.instance.as_deref(),
                    oracle_emulator::world_instance,
                )?,
                detached_file: c.in_dir(oracle_emulator::DETACHED_FILE),
                fault_file: c.in_dir(oracle_emulator::FAULT_FILE),
            };
            let config = c.config(served, oracle_emulator::LOG_FILE, Vec::new(), None)?;
            let bind = c.bind_or(loopback());
            shell::announce_and_wait(bind, oracle_emulator::Emulator::start(bind, config))
        }
        Cloud::Openstack => {
            let tree = json_or(
                "--tree",
                args.tree.as_deref(),
                openstack_emulator::world_tree,
            )?;
            let config = c.config(tree, openstack_emulator::LOG_NAME, Vec::new(), None)?;
            let bind = c.bind_or(loopback());
            shell::announce_and_wait(
                bind,
                openstack_emulator::OpenStackEmulator::start(bind, config),
            )
        }
    }
}

/// EC2: serve the tree, or `--reset` every connection, or `--dump-tree`.
fn ec2(args: &Args) -> Result<(), String> {
    let c = &args.common;
    let bind = c.bind_or(loopback());
    if args.ec2.reset {
        let log = c.log_file(emulator::LOG_NAME);
        let r = emulator::Resetter::start(bind, log.as_deref())
            .map_err(|e| format!("binding {bind}: {e}"))?;
        shell::announce(r.addr())?;
        r.wait();
        return Ok(());
    }
    let tree = json_or("--tree", args.tree.as_deref(), emulator::sample_tree)?;
    if args.ec2.dump_tree {
        let text = serde_json::to_string_pretty(&tree).map_err(|e| e.to_string())?;
        return shell::announce(text);
    }
    let mut served = emulator::Served::from(tree);
    served.require_token = args.ec2.require_token;
    let config = c.config(served, emulator::LOG_NAME, Vec::new(), None)?;
    shell::announce_and_wait(bind, emulator::Emulator::start(bind, config))
}

/// GCE's `--set`: one `PUT /emulator/v1/PATH` to a running emulator.
fn gce_set(args: &[String]) -> Result<(), String> {
    use std::io::Read as _;
    let [addr, path, json] = args else {
        return Err("--set needs ADDR:PORT PATH JSON".to_owned());
    };
    let mut s = std::net::TcpStream::connect(addr).map_err(|e| format!("{addr}: {e}"))?;
    let path = path.trim_start_matches('/');
    write!(
        s,
        "PUT /emulator/v1/{path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{json}",
        json.len()
    )
    .map_err(|e| format!("{addr}: {e}"))?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)
        .map_err(|e| format!("{addr}: {e}"))?;
    if answer.starts_with("HTTP/1.1 200") {
        Ok(())
    } else {
        Err(format!(
            "{addr}: {}",
            answer.lines().last().unwrap_or_default()
        ))
    }
}

fn main() -> ExitCode {
    shell::main("leasehook-emulator", || run(&Args::parse()))
}

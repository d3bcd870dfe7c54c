// SPDX-License-Identifier: Apache-2.0
//! The clap definition of the `leasehook` command line, and nothing else: every
//! subcommand's arguments and help text. The binary parses with it (`main.rs`, the
//! behaviour in `*_cmd.rs`); the build-time tool `xtask` includes this file too
//! (`#[path]`) to make the manual pages and shell completions from it, so they
//! cannot drift from `--help` and the generator is not part of the shipped binary.
//! Pure: it depends on clap and on `leasehook-core`'s names and help texts only.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use leasehook_core::config;
use leasehook_core::model::{IfName, Problem};

/// Source policy routing for multi-NIC cloud instances, installed the moment a DHCP
/// lease arrives.
///
/// When a DHCP client binds a lease on a secondary NIC, leasehook's hook in the
/// client's hook folder asks the instance metadata service only for what
/// DHCP cannot tell (device-number, network card, secondary addresses, delegated
/// prefixes, IPv6 subnets) and installs source rules and a routing table for the NIC:
/// table 10000 + 100 × network-card + device-number (amazon-ec2-net-utils' scheme;
/// `profile: cloud-init` keeps cloud-init's EC2 netplan numbering instead, table
/// 100 + the NIC's position). Everything leasehook adds carries protocol 176 (`proto
/// leasehook` in `ip rule` and `ip route` with the package's
/// `/etc/iproute2/rt_protos.d/leasehook.conf`, `proto 176` without it), and it never touches
/// what does not. Settings: /etc/leasehook/config.yaml and config.d (`leasehook config
/// show`, leasehook.yaml(5)).
///
/// This command is the boot stage and the administrator's tool: `init` finds the
/// instance's datasource at boot (EC2 IMDS, LXD's dev-lxd socket, NoCloud seeds) and
/// falls back to the cached one when none answers; `detect` shows which datasources
/// the instance has; `query` reads the instance data `init` wrote; `plan` prints the
/// policy routing for given metadata and leases without touching anything; `apply`,
/// `flush`, `status` and `refresh` put a plan into the kernel, take it out, show it
/// and re-check it against the metadata service; `explain` says why an address
/// is or is not routed. `leasehook SUBCOMMAND --help` (or
/// the leasehook-SUBCOMMAND(1) manual page) describes each.
#[derive(Debug, Parser)]
#[command(name = "leasehook", version, propagate_version = true)]
pub(crate) struct Cli {
    /// Prefix of every path leasehook reads or writes: the configuration, the state
    /// and locks in ROOT/run/leasehook, the cache in ROOT/var/lib/leasehook, the
    /// instance data, the datasources' files and the LXD socket. Given before or
    /// after the subcommand; without it, the `LEASEHOOK_ROOT` variable, else /.
    #[arg(
        long,
        global = true,
        value_name = "DIR",
        env = config::ROOT_ENV,
        default_value = "/"
    )]
    pub(crate) root: PathBuf,

    /// Read this configuration file instead of ROOT/etc/leasehook/config.yaml and
    /// config.d (/dev/null: none, the built-in defaults) [default: the
    /// `LEASEHOOK_CONFIG` variable, else those files].
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,

    #[command(subcommand)]
    pub(crate) command: Command,
}

// The subcommands (each one's help is its arguments' doc comment).
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    Plan(PlanArgs),
    Apply(ApplyArgs),
    Flush(FlushArgs),
    Status(StatusArgs),
    Refresh(RefreshArgs),
    Detect(DetectArgs),
    Init(InitArgs),
    Query(QueryArgs),
    Config(ConfigArgs),
    Watch(WatchArgs),
    Explain(ExplainArgs),
}

// `leasehook plan` (plan_cmd.rs).

/// Print the policy-routing plan for given metadata, leases and links, without
/// touching the system.
///
/// The planner's settings (`profile`, `table_base`, `priority_base`,
/// `primary_rules`, `secondary_addresses`, `nics`) come from the configuration
/// (ROOT/etc/leasehook/config.yaml and config.d, or --config; then `LEASEHOOK_*`
/// variables); the flags below win.
///
/// `nics:` entries (the ec2-net-utils profile) add the operator's routes to a
/// NIC's table, rules `to PREFIX lookup <table> priority P` and the first
/// `prefix_addresses` addresses of each delegated prefix; the plan prints them
/// in every format, and lists under `refused` each one the gate refused (a /0,
/// the host's default router, another NIC's subnet without `allow_default`, a
/// metadata service's address) with the reason.
///
/// NICs no DHCP serves (OCI's secondary VNICs, Google Cloud's Dynamic NICs,
/// `OpenStack`'s static networks) have no lease to plan from a file, nor do the
/// links leasehook creates for them (an OCI bare-metal VNIC's macvlan and VLAN,
/// a Dynamic NIC's VLAN): `leasehook refresh --without-dhcp` configures them
/// from the live metadata, and `leasehook status` shows what it did.
///
/// Example: leasehook plan --metadata md.json --link eth0=02:00:00:00:00:01
/// --link eth1=02:00:00:00:00:02 --lease eth0.env --lease eth1.env
#[derive(Debug, Args)]
pub(crate) struct PlanArgs {
    /// Plan the built-in 3-NIC example instance instead of reading files.
    #[arg(long, conflicts_with_all = ["metadata", "leases", "links"])]
    pub(crate) example: bool,

    /// Instance metadata: a JSON tree shaped like IMDS `meta-data/` (folders as
    /// objects; leaves as strings, newline-separated for several values, or lists).
    #[arg(long, value_name = "FILE", required_unless_present = "example")]
    pub(crate) metadata: Option<PathBuf>,

    /// A lease: a dhclient environment dump (`KEY=VALUE` lines, as `env` prints them),
    /// or, prefixed with the interface name, a systemd-networkd lease file
    /// (`eth1=/run/systemd/netif/leases/3`). Repeatable.
    #[arg(long = "lease", value_name = "[IFNAME=]FILE")]
    pub(crate) leases: Vec<String>,

    /// The operating system's view of a link: its name and MAC, optionally the IPv6
    /// router it learned from router advertisements. Repeatable.
    #[arg(long = "link", value_name = "IFNAME=MAC[,ra=IPV6]")]
    pub(crate) links: Vec<String>,

    /// The routing scheme [default: the configured profile, else ec2-net-utils].
    #[arg(long, value_enum)]
    pub(crate) profile: Option<ProfileArg>,

    /// Whose metadata `--metadata` holds [default: the configured `provider`;
    /// `auto`: ec2]: `ec2` (an IMDS `meta-data/` tree), `gce` (a saved answer of the metadata server's
    /// `instance/network-interfaces/?recursive=true`), `azure` (a saved answer
    /// of Azure IMDS `/metadata/instance` or `/metadata/instance/network`),
    /// `aliyun` (an ECS `meta-data/` tree, as EC2's), `oracle` (a saved answer
    /// of OCI's `/opc/v2/vnics/`) or `openstack` (a saved
    /// `openstack/latest/network_data.json`).
    #[arg(long, value_name = "PROVIDER")]
    pub(crate) provider: Option<String>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = PlanFormat::Ip)]
    pub(crate) format: PlanFormat,

    /// ec2-net-utils profile: table of device 0 on network card 0 [default: the
    /// configured `table_base`, else 10000].
    #[arg(long, value_name = "N")]
    pub(crate) table_base: Option<u32>,

    /// ec2-net-utils profile: rule priority of device 0 on network card 0 [default:
    /// the configured `priority_base`, else the table base].
    #[arg(long, value_name = "N")]
    pub(crate) priority_base: Option<u32>,

    /// ec2-net-utils profile: give the primary NIC rules too.
    #[arg(long)]
    pub(crate) primary_rules: bool,

    /// ec2-net-utils profile: do not add the metadata's secondary addresses to links.
    #[arg(long)]
    pub(crate) no_secondary_addresses: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ProfileArg {
    /// amazon-ec2-net-utils' tables: 10000 + 100*network-card + device-number.
    #[value(name = "ec2-net-utils")]
    Ec2NetUtils,
    /// cloud-init's EC2 netplan rendering: table 100 + position.
    #[value(name = "cloud-init")]
    CloudInit,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum PlanFormat {
    /// `ip rule add` / `ip route add` lines.
    Ip,
    /// The plan as JSON, which reads back into the same plan.
    Json,
    /// A netplan v2 document.
    Netplan,
    /// systemd-networkd drop-ins.
    Networkd,
}

// `leasehook apply`, `flush`, `refresh`, `status` (apply_cmd.rs).

/// Apply a plan (the JSON of `leasehook plan --format json`) to the kernel over
/// netlink.
///
/// Only what leasehook owns is touched: its rules, routes and addresses carry
/// protocol number 176, and the run is limited to the interfaces and families the
/// plan covers. What the kernel holds already is not written again, so applying the
/// same plan twice makes no change. The whole plan is checked before the first
/// write; if a write fails, what this run changed is undone.
#[derive(Debug, Args)]
pub(crate) struct ApplyArgs {
    /// The plan: JSON as printed by `leasehook plan --format json`.
    #[arg(long, value_name = "FILE")]
    pub(crate) plan: PathBuf,

    /// Print every change as an `ip` command line.
    #[arg(long, short)]
    pub(crate) verbose: bool,
}

/// Remove leasehook's rules, routes and secondary addresses.
///
/// With --iface, only that interface's (also when the link is already gone: its
/// rules are found through the recorded state); without, everything leasehook owns.
/// Goes past failures and reports them all. An --iface leasehook never touched (no
/// state, no lock file: udev's remove of a pod's veth) is left at once, and no
/// file is created for it.
#[derive(Debug, Args)]
pub(crate) struct FlushArgs {
    /// Only this interface.
    #[arg(long, value_name = "IFNAME", value_parser = parse_ifname)]
    pub(crate) iface: Option<IfName>,

    /// Only this family.
    #[arg(long, value_enum)]
    pub(crate) family: Option<FamilyArg>,

    /// Print every change as an `ip` command line.
    #[arg(long, short)]
    pub(crate) verbose: bool,
}

/// Re-check every interface with a recorded plan between leases.
///
/// For each interface leasehook applied a lease's plan to (or only --iface), ask
/// IMDS again for that NIC's keys, plan from the recorded leases, and apply the
/// difference: an address the operator added to the ENI gets its rule, a removed
/// one loses it. Nothing changed means no netlink write and no state file written.
/// An IMDS error or an incomplete answer changes nothing. A link that is gone takes
/// its rules and state with it; a link found under another name by its MAC takes
/// them over. Runs under the same per-interface lock as the DHCP hooks. The IMDS and
/// planner settings are the hooks' (the configuration files, then LEASEHOOK_*
/// variables); NICs listed in `unmanaged` are left alone. With `enabled: false`,
/// or when the boot stage found no datasource this boot, it does nothing and asks
/// nothing (exit 0; -v says why).
///
/// On a cloud that serves some NICs no DHCP (Oracle Cloud's secondary VNICs), the
/// metadata is asked once for them: such a NIC with a link and no recorded plan
/// is brought up and given its address, rules and table; a recorded one follows
/// the metadata, and loses everything, its address too, once the metadata no
/// longer lists it. The udev rule runs `refresh --without-dhcp --iface IF`
/// (through leasehook-refresh@IF.service) when a NIC appears.
///
/// Prints what changed, nothing when nothing did (-v: every NIC). Exit 1 when a
/// NIC could not be checked (the metadata unreachable, failing or incomplete for
/// the budget, its table another NIC's): each is named with the cause on standard
/// error, and its refresh time (`status`) is not renewed. A NIC whose metadata is
/// known incomplete is asked one round, without retries.
#[derive(Debug, Args)]
#[command(after_long_help = leasehook_core::config::env_help())]
pub(crate) struct RefreshArgs {
    /// Only this interface.
    #[arg(long, value_name = "IFNAME", value_parser = parse_ifname)]
    pub(crate) iface: Option<IfName>,

    /// Only the NICs the cloud serves no DHCP (Oracle Cloud's secondary VNICs): what
    /// the udev rule's leasehook-refresh@IF.service runs. On a cloud whose every NIC
    /// has DHCP it asks nothing and changes nothing.
    #[arg(long)]
    pub(crate) without_dhcp: bool,

    /// Also print the NICs that did not change, and every change as an `ip`
    /// command line.
    #[arg(long, short)]
    pub(crate) verbose: bool,
}

/// Show whether leasehook is healthy: each interface's last event and its
/// outcome, what is applied and whether the kernel still holds it.
///
/// First the configuration (valid, or its error), the datasource in use and the
/// provider the hooks ask (and how it was chosen). Then per interface: the last event (the DHCP client or `refresh`, its reason, how
/// long ago) and its outcome (applied, unchanged, waiting for the metadata,
/// removed, nothing changed and why, a conflict naming the object in the way, an
/// error with its cause); the rules, routes and addresses applied; drift, the
/// recorded objects the kernel no longer holds (one dump of the kernel, compared
/// with the record); what the metadata still lacked and what the address gate
/// refused; a detached worker still waiting for the metadata, since when and for
/// what.
///
/// Exit status, as `cloud-init status` is scripted: 0 healthy; 1 degraded (an
/// interface's last event failed or met a conflict, drift, a refusal, a worker
/// waiting past its budget, another routing tool active, a conflict recorded); 2 error (the configuration is invalid, or the state
/// cannot be read: the files under ROOT/run/leasehook are root's, so run it as
/// root). The last line of the text says which, and why.
#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// Output format; `json` and `yaml` carry `"schema_version": 1`;
    /// `prometheus` prints the metrics instead.
    #[arg(long, value_enum, default_value_t = StatusFormat::Text)]
    pub(crate) format: StatusFormat,

    /// The same as `--format json`.
    #[arg(long, conflicts_with = "format")]
    pub(crate) json: bool,

    /// Text: list every applied rule, route and address, as `ip` reads them.
    #[arg(long, short)]
    pub(crate) verbose: bool,

    /// Wait until every NIC with a lease (or an address from the metadata) is
    /// applied: a state record, no worker still waiting for the metadata, nothing
    /// missing. Exit 0 then; 1 when a NIC failed (its worker gone, the metadata
    /// incomplete when the budget ended) or the timeout passed, the NICs not ready
    /// and why on standard error. Reads only run-time files (every 200 ms), never
    /// the metadata service. What leasehook-wait-online.service runs.
    #[arg(long)]
    pub(crate) wait: bool,

    /// With --wait: give up after S seconds.
    #[arg(long, value_name = "S", default_value_t = 120, requires = "wait")]
    pub(crate) timeout: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum StatusFormat {
    /// Lines for a person, the verdict last.
    Text,
    /// One JSON document.
    Json,
    /// The JSON document as YAML.
    Yaml,
    /// The metrics in the Prometheus text format, as `metrics.textfile` holds
    /// them (docs/operations.md, "Metrics").
    Prometheus,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum FamilyArg {
    /// IPv4.
    #[value(name = "4")]
    V4,
    /// IPv6.
    #[value(name = "6")]
    V6,
}

/// An interface name flag's value (clap shows the [`Problem`] after the flag).
pub(crate) fn parse_ifname(s: &str) -> Result<IfName, Problem> {
    IfName::try_new(s)
}

// `leasehook config` (config_cmd.rs).

/// Show or check leasehook's configuration.
///
/// Settings come from ROOT/etc/leasehook/config.yaml, then ROOT/etc/leasehook/config.d/*.yaml
/// in lexical order, then LEASEHOOK_* environment variables (a later one wins a
/// key). An unknown key or a bad value is an error naming the file, the line and the
/// key. Every key is described in docs/configuration.md.
///
/// `nics:` (per-NIC routes, rules and prefix addresses) is set in files only: it
/// has no environment variable. Its errors name the entry's key and line
/// (`nics[0].routes[1].via`).
#[derive(Debug, Args)]
pub(crate) struct ConfigArgs {
    #[command(subcommand)]
    pub(crate) action: Action,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Action {
    /// Print the merged settings, each with the file and line (or variable) it came
    /// from; keys nobody set show their default. The YAML output is itself a valid
    /// configuration file. Exit status 1 when a file or variable is bad.
    Show(ShowArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = ShowFormat::Yaml)]
    pub(crate) format: ShowFormat,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ShowFormat {
    /// YAML with the origin of each value in a comment.
    Yaml,
    /// `{"settings": ..., "origins": {"key": "..."}, "files": [...]}`.
    Json,
}

// `leasehook detect` (detect_cmd.rs).

/// Decide which datasources this instance has, without network, and print the
/// decision as JSON.
///
/// Decides the way cloud-init's ds-identify does: EC2 from DMI (`product_uuid` or
/// /sys/hypervisor/uuid starting with `ec2`, also byte-swapped), LXD from
/// /dev/lxd/sock or, under kvm/qemu, DMI `board_name` and virtio port names,
/// NoCloud from seed folders, a `cidata` filesystem, the kernel command line or the
/// DMI serial; `datasource_list` from the configuration and `ds=` on the kernel
/// command line are honoured. The JSON holds `datasource_list` (what to try, in
/// order, ending in `None`; empty when none was found), `checks` (each check that
/// ran: found, maybe, not-found), `reasons` (why, per datasource), `list_from`,
/// `virt`, `disabled` and `warnings`.
///
/// Example: leasehook detect --root /tmp/fakeroot --virt kvm
#[derive(Debug, Args)]
pub(crate) struct DetectArgs {
    /// Assume this virtualisation, as systemd-detect-virt names it (kvm, qemu, xen,
    /// lxc, docker, none, ...), instead of detecting it. Below a root other than /
    /// it is not detected: without --virt it is "unavailable".
    #[arg(long, value_name = "NAME")]
    pub(crate) virt: Option<String>,
}

// `leasehook init` (init_cmd.rs).

/// Find the instance's datasource at boot, cache it, and write instance-data.
///
/// `--local` runs before networking: it reads NoCloud seeds and the LXD socket,
/// checks the cache against them, and leaves EC2 to the network stage. Without it
/// (after network-online.target) the network stage finishes what the local stage
/// left — it never asks again a datasource the local stage fetched, nor repeats a
/// check that failed. When no configured datasource answers, the cached one is used
/// if it still parses, is still configured and fallback is not off; every
/// datasource tried and why the cache was or was not used is logged.
///
/// Writes ROOT/var/lib/leasehook/ (the cache) and ROOT/run/leasehook/ (boot.json,
/// instance-data.json 0644, instance-data-sensitive.json 0600).
///
/// Exit codes: 0 a datasource is in use (fetched or from the cache), or the local
/// stage handed over to the network stage, or cloud-init is disabled, or no
/// datasource was detected on a host that never was an instance ("no datasource:
/// nothing to do"); 3 no datasource answered and no usable cache where one was
/// expected (instance-data then says datasource None); 4 a datasource is in use but the cache (or data/instance-id) could not
/// be written, so the next boot has no fallback (`leasehook status` says so too);
/// 1 an error (bad configuration, unwritable state); 2 bad usage.
///
/// Configuration (ROOT/etc/leasehook/config.yaml and config.d, or --config; then
/// LEASEHOOK_* variables): `datasource_list`, `fallback`,
/// `datasource.<Name>.fallback`, `imds.endpoints`, `imds.budget_s`,
/// `imdsv1_fallback`. `leasehook config show` prints what is in effect.
#[derive(Debug, Args)]
pub(crate) struct InitArgs {
    /// Run the local stage (before networking).
    #[arg(long)]
    pub(crate) local: bool,

    /// Assume this virtualisation (kvm, lxc, none, ...), as `leasehook detect`
    /// takes it.
    #[arg(long, value_name = "NAME")]
    pub(crate) virt: Option<String>,
}

// `leasehook query` (query_cmd.rs).

/// Print instance data written by `leasehook init`, as JSON, YAML, raw text or
/// through a Jinja template.
///
/// KEY is a dotted path (`v1.instance_id`, `ds.meta-data.mac`); a key holding dots
/// is written in double quotes, `ds.config."user.user-data"`, or in brackets with
/// or without quotes: `ds.config["user.user-data"]`, `ds.config[user.tag]`; `[0]` picks
/// a list item. An unknown key is an error naming the keys there and the nearest
/// ones. Root reads instance-data-sensitive.json; other users read
/// instance-data.json, where user-data, vendor-data and other sensitive values read
/// "redacted for non-root user".
///
/// Without `--format` it prints what `cloud-init query` prints: a string as is,
/// anything else as JSON (one space of indent, keys sorted), `--list-keys` one key
/// a line. `--format` is `json` (strings quoted), `yaml` or `raw` (strings
/// unquoted, one key a line for `--list-keys`), or else a Jinja template rendered over all the
/// instance data: the `v1` keys are also at the top level (`{{ platform }}`) and a
/// key holding `-`, `.` or `/` also has an alias with `_` (`{{ local_hostname }}`,
/// `{{ ds.meta_data }}`). A value the data lacks may be tested (`{% if x is defined
/// %}`, `{{ x | default("-") }}`) but not printed.
///
/// Examples: `leasehook query v1.instance_id`, `leasehook query 'ds.config[user.tag]'`,
/// `leasehook query --list-keys ds`, `leasehook query --all --format yaml`,
/// `leasehook query --format '{{platform}} {{subplatform}}'`.
///
/// Exit codes: 0 printed; 1 no instance data, an unreadable file, a bad or unknown
/// key, a template that does not parse or render; 2 bad arguments.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("what").required(true).args(["key", "all", "list_keys", "format"]).multiple(true))]
pub(crate) struct QueryArgs {
    /// The key path to print.
    #[arg(value_name = "KEY")]
    pub(crate) key: Option<String>,

    /// Print everything.
    #[arg(short, long, conflicts_with_all = ["key", "list_keys"])]
    pub(crate) all: bool,

    /// Print the keys of KEY's mapping (of the top level without KEY), sorted.
    #[arg(short, long)]
    pub(crate) list_keys: bool,

    /// `json`, `yaml`, `raw`, or a Jinja template over all the instance data
    /// (without it: as cloud-init prints).
    #[arg(short, long, value_name = "json|yaml|raw|TEMPLATE")]
    pub(crate) format: Option<String>,
}

/// Keep leasehook's routing true between leases: put back what others remove,
/// and follow the LXD (or Incus) instance's events.
///
/// Self-healing, on every machine: it listens to the kernel's link, address,
/// route and rule notifications (netlink, no polling). When a rule, route or
/// address that a NIC's record (ROOT/run/leasehook/iface) says must exist and
/// that carries leasehook's protocol (176) is gone, it is put back once the burst
/// of changes is over (150 ms of quiet, at most 500 ms), with one log line naming
/// the NIC and what was put back. Only leasehook's own recorded objects are ever
/// added; nothing of another protocol is touched, nothing is deleted and no
/// network manager is reloaded. A NIC whose lock a hook, worker or refresh holds
/// is left to it; a NIC whose link is gone is left to the udev rule and the
/// refresh path. Removed again after 3 repairs within 60 s, leasehook stops
/// putting that NIC's objects back and records a conflict
/// (ROOT/run/leasehook/conflict/IF, naming what was removed), which `leasehook
/// status` shows (degraded, exit 1) until the next lease event or refresh of
/// that NIC clears it. Repairs are counted in `leasehook_repairs_total`.
///
/// On an LXD or Incus instance (the socket or the VM's virtio port exists, or the
/// boot stage found LXD) it also subscribes to `/1.0/events?type=config,device`
/// on `/dev/incus/sock` when that is a socket, else `/dev/lxd/sock`: a `user.*`
/// or `cloud-init.*` key that changes rewrites instance-data, and a NIC device
/// added, updated or removed runs the refresh path for it. It reconnects with
/// backoff (100 ms doubling to 30 s) when the socket goes away, logging it once.
///
/// It runs commands nowhere and never applies user-data. `leasehook-watch.service`
/// runs it on every instance; it exits 0 on SIGTERM or SIGINT, and with `enabled:
/// false`, or when the boot stage found no datasource this boot, at once.
#[derive(Debug, Args)]
pub(crate) struct WatchArgs {
    /// The longest a NIC device waits for its link, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub(crate) link_wait: u64,
}

// `leasehook explain` (explain_cmd.rs).

/// Explain why an address (or a NIC) is or is not policy-routed.
///
/// For ADDR it says, in sentences: which NIC holds it and which provider the
/// instance has; how the metadata listed it (the NIC's DHCP lease address, a
/// secondary address, a delegated prefix); the rule and table of leasehook's that
/// route it, whether the kernel still holds that rule, and what the kernel answers
/// now for traffic from it (`ip route get 8.8.8.8 from ADDR`, or the IPv6
/// `2001:4860:4860::8888`, asked over netlink). Or why it is not routed: the address
/// gate refused it (which rule of SPEC §3.8: a /0, loopback or other special
/// range, the metadata service's address, outside or wider than the NIC's subnet,
/// another NIC's address, a router's), the NIC waits for the metadata (a worker
/// still waiting, or what the metadata did not say yet), the NIC is unmanaged
/// (which `unmanaged` entry matched), the Kubernetes CNI's ENI, the record and
/// the kernel disagree (drift), or leasehook does not know the address at all.
/// The primary NIC's own lease address is routed by the main table by design
/// (no rules unless `primary_rules: true`) and counts as routed.
///
/// It reads only: the records in ROOT/run/leasehook (run as root: they are
/// 0600), the boot stage's boot.json, the configuration, and the kernel's links,
/// addresses, rules and routes. It changes nothing.
///
/// Exit codes: 0 routed (with --iface: every address of the NIC is); 1 not
/// routed; 2 bad usage, or the state or the kernel cannot be read.
///
/// Examples: `leasehook explain 10.0.1.21`, `leasehook explain --iface eth1
/// --format json`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("what").required(true).args(["address", "iface"]))]
pub(crate) struct ExplainArgs {
    /// The address to explain (IPv4 or IPv6).
    #[arg(value_name = "ADDR")]
    pub(crate) address: Option<std::net::IpAddr>,

    /// Explain this NIC instead: each address it holds or leasehook recorded for
    /// it (or, with none, the NIC itself).
    #[arg(long, value_name = "IFNAME", value_parser = parse_ifname, conflicts_with = "address")]
    pub(crate) iface: Option<IfName>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = ExplainFormat::Text)]
    pub(crate) format: ExplainFormat,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ExplainFormat {
    /// Sentences, one reason a line, under `ROUTED` or `NOT ROUTED`.
    Text,
    /// `{"schema_version": 1, "routed": ..., "explanations": [{"address",
    /// "verdict", "interface", "table", "rules", "kernel", "reasons"}]}`.
    Json,
    /// The JSON document as YAML.
    Yaml,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    #[test]
    fn clap_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }

    /// Every visible (sub)command's arguments, recursively, with the command's path.
    fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<(String, clap::Command)>) {
        out.push((path.to_owned(), cmd.clone()));
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            walk(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }

    /// `--help` and the man pages are made from these texts: a command, argument or
    /// value without one would show up as a bare name.
    #[test]
    fn every_command_argument_and_value_has_help_text() {
        let mut cmd = super::Cli::command();
        cmd.build();
        let mut all = Vec::new();
        walk(&cmd, "leasehook", &mut all);
        assert!(all.len() >= 9, "subcommands went missing: {}", all.len());
        let mut missing = Vec::new();
        for (path, c) in &all {
            if c.get_about()
                .is_none_or(|a| a.to_string().trim().is_empty())
            {
                missing.push(format!("{path}: no about"));
            }
            for arg in c.get_arguments().filter(|a| !a.is_hide_set()) {
                let id = arg.get_id().as_str();
                let help = arg.get_help().or(arg.get_long_help());
                if help.is_none_or(|h| h.to_string().trim().is_empty()) {
                    missing.push(format!("{path} {id}: no help"));
                }
                for value in arg
                    .get_possible_values()
                    .iter()
                    .filter(|v| !v.is_hide_set())
                {
                    // Boolean flags list true/false: those need no words.
                    if matches!(value.get_name(), "true" | "false") {
                        continue;
                    }
                    if value.get_help().is_none() {
                        missing.push(format!("{path} {id}={}: no help", value.get_name()));
                    }
                }
            }
        }
        assert!(
            missing.is_empty(),
            "help text missing:\n{}",
            missing.join("\n")
        );
    }

    /// The long help of the top level names every visible subcommand.
    #[test]
    fn top_level_help_lists_every_subcommand() {
        let help = super::Cli::command().render_long_help().to_string();
        for sub in super::Cli::command().get_subcommands() {
            let listed = help.contains(&format!("  {} ", sub.get_name()));
            assert_eq!(listed, !sub.is_hide_set(), "{}:\n{help}", sub.get_name());
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Pure: the provider seam (SPEC §4). Everything the hook, the worker, `leasehook
//! refresh` and the boot stage ask a cloud goes through its provider, which
//! answers in cloud-neutral values: "what does the metadata say about the NIC with
//! this MAC, and is it complete for the lease" ([`Provider::wait_for_nic`], an
//! [`InstanceNetwork`] that `plan` reads whatever the cloud) and "who is this
//! instance" ([`Identity::datasource`], the boot stage's [`Datasource`]; a trait
//! of its own, so that the hooks' provider carries none of it).
//!
//! The consistency wait is written once, in [`wait`], over [`NicSession`]: a
//! provider says what to ask next and what its answers so far mean; the driver
//! asks, backs off, honours `Retry-After` and keeps the budget. afterburn's one
//! folder per provider is the model: [`crate::source::ec2`] is the first.
//!
//! # How the next clouds fit (`reference/clouds-and-clusters.md` §2, SPEC §4.4)
//!
//! Google Cloud, Azure, Alibaba, Oracle Cloud and `OpenStack` are built: every
//! cloud SPEC §4 names has its provider, and [`PLANNED`] is empty (a cloud added
//! to the SPEC later is named there until it is built).
//!
//! * **Google Cloud** ([`crate::source::gce`], built): the NIC is found by MAC in
//!   `instance/network-interfaces/?recursive=true` (one JSON answer, header
//!   `Metadata-Flavor: Google` both ways), its index N is the table's device
//!   number, and its answer becomes an [`InstanceNetwork`] NIC like EC2's. Its /32
//!   leases are the planner's concern, not the seam's (the gateway's link route
//!   goes in the table); a session asks that one request per round and is
//!   complete once the NIC's entry lists the leased `ip` and its subnet.
//!   `wait_for_change` long polls would fit [`NicSession::ask`] (one request that
//!   may take the round's budget); they are not used.
//! * **Azure** ([`crate::source::azure`], built): IMDS answers only requests from
//!   the primary NIC's primary address and allows 5 requests/s: its provider never
//!   binds a request to the event's NIC (EC2 does), and its session asks one
//!   request per round (`network?api-version=2021-02-01` answers every NIC at
//!   once), its client spacing requests 200 ms apart; a 429 is retryable with its
//!   `Retry-After`. MACs come without separators and are parsed into [`MacAddr`];
//!   the table number comes from the NIC's rank by MAC, never its list position.
//! * **Alibaba** (`aliyun/`, built): EC2's tree at `100.100.100.200` with its own
//!   token headers in hardened mode, so its client is EC2's with another dialect;
//!   its session asks `mac` and four keys of the MAC folder (no listing: every key
//!   is required), `private-ipv4s` is a JSON list, and with no `device-number` the
//!   NIC's table slot is a function of its MAC
//!   ([`crate::source::aliyun::nic::device_slot`]).
//! * **Oracle Cloud** ([`crate::source::oracle`], built): `/opc/v2/vnics/` lists
//!   every VNIC (primary first, `nicIndex`, `vlanTag`) in one answer, header
//!   `Authorization: Bearer Oracle`, 169.254.169.254 then `[fd00:c1::a9fe:a9fe]`.
//!   The primary's lease waits like Azure's (one request per round). Secondary
//!   VNICs get no DHCP, so `refresh`, the udev add path and the boot stage ask
//!   [`Provider::unleased`] for them: each comes back with the leases a DHCP
//!   server would have given ([`crate::model::Reason::Metadata`]), which the
//!   planner turns into an owned address besides the rules and the table. Tables
//!   come from the VNIC's MAC (Alibaba's slot), never its list position.
//! * **`OpenStack`** ([`crate::source::openstack`], built): `network_data.json`
//!   (from a config drive labelled `config-2` when there is one, else the
//!   metadata service) answers every link at once; a session is one read per
//!   round (Neutron may allow 10 requests per 10 s), complete when the link with
//!   the MAC and a network of the lease's family are listed. The networks'
//!   routes become [`crate::model::NicMetadata::routes`], which the planner puts
//!   in the NIC's table; links on static networks (no DHCP) are
//!   [`Provider::unleased`]; the table is `table_base` plus a slot of the MAC.
//!
//! Each one's datasource (identity, user-data) is its [`Datasource`], as EC2's.

pub mod complete;
pub mod doc;
#[cfg(test)]
pub(crate) mod fake;
pub mod http;
pub mod imdsv2;
pub mod instance;
pub mod live;
pub mod retry;
pub mod session;
pub mod slot;
pub mod wait;

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

use crate::error::{Error, Problem, Result};
use crate::instance_data::RegionId;
use crate::model::{Family, IfName, InstanceNetwork, Lease, MacAddr, Missing};
use crate::source::detect::{Probe, Snapshot};
use crate::source::{Datasource, Finding, SourceKind};

pub use wait::{Clock, Outcome, SystemClock, WaitPolicy};

/// One cloud's row: everything the code outside its folder asks about it (the
/// hooks' provider, its configuration key, `plan --metadata`, the live follower).
/// Each cloud declares its row in its own folder (its `provider.rs`) and
/// [`crate::source::CLOUDS`] lists them; nothing else names a cloud. The boot
/// stage's half, which the hook binary does not carry, is [`CloudSource`].
#[derive(Debug)]
pub struct Cloud {
    /// The configuration name (`provider: gce`), also the cloud's section of
    /// the configuration file (`gce.endpoint`).
    pub name: &'static str,
    /// The datasources whose verdict `provider: auto` resolves to this cloud.
    pub kinds: &'static [SourceKind],
    /// Detection's check of one of [`Cloud::kinds`] (pure: ds-identify's
    /// `dscheck_<Name>`), from the snapshot.
    pub check: fn(&Snapshot, SourceKind, &Probe<'_>) -> Finding,
    /// Reads which of the cloud's seeds exist below the root (performs IO, for
    /// detection's snapshot, [`Snapshot::seeds_of`]): their paths below it, the
    /// evidence its [`Cloud::check`] reads.
    pub seeds: fn(&Path) -> Vec<String>,
    /// The platform detection identifies for instance-data's cloud name
    /// (`aws`, `brightbox`, ... for the EC2 API), `None` when it says nothing.
    pub platform: fn(&Snapshot) -> Option<&'static str>,
    /// Its `<name>.endpoint` key, when it has one.
    pub endpoint: Option<EndpointKey>,
    /// Builds its provider for the hooks, the worker and `refresh`.
    pub provider: fn(&Setup<'_>) -> Result<Box<dyn Provider>>,
    /// Reads a saved metadata answer of the cloud (`leasehook plan --metadata`).
    pub parse_saved: fn(&str) -> Result<InstanceNetwork>,
    /// How `leasehook watch` follows this cloud's NIC list live, when it does
    /// (so the refresh timer may leave a followed NIC to it).
    pub live: Option<live::Live>,
    /// The keys of its metadata that list a NIC's addresses and prefixes, which
    /// `leasehook explain` names when it says where an address came from.
    pub address_keys: AddressKeys,
}

/// Where a cloud's metadata lists a NIC's addresses and delegated prefixes, by
/// family (`None`: the cloud has no such key, or leasehook does not read it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressKeys {
    /// The NIC's IPv4 addresses (`local-ipv4s` on EC2).
    pub ipv4: Option<&'static str>,
    /// The NIC's IPv6 addresses (`ipv6s` on EC2).
    pub ipv6: Option<&'static str>,
    /// The IPv4 prefixes delegated to the NIC (`ipv4-prefix` on EC2).
    pub ipv4_prefix: Option<&'static str>,
    /// The IPv6 prefixes delegated to the NIC (`ipv6-prefix` on EC2).
    pub ipv6_prefix: Option<&'static str>,
}

/// A cloud's `<name>.endpoint` configuration key.
#[derive(Debug, Clone, Copy)]
pub struct EndpointKey {
    /// The key as a file writes it (`gce.endpoint`).
    pub key: &'static str,
    /// Its environment variable.
    pub env: &'static str,
    /// What it does and its default, for `--help` and `config show`.
    pub help: &'static str,
    /// The URL shown when nothing sets it.
    pub default: &'static str,
    /// Checks a configured URL; the form kept.
    pub check: fn(&str) -> Result<String>,
}

/// A cloud's datasource, for the boot stage: apart from [`Cloud`] so that the
/// hook binary, which builds providers, does not link every cloud's identity
/// fetch (a function pointer in a table it reads would keep it).
#[derive(Debug)]
pub struct CloudSource {
    /// The cloud's row: its name, and the datasources it answers
    /// ([`Cloud::kinds`]).
    pub cloud: &'static Cloud,
    /// Why the local stage leaves the datasource to the network stage (its
    /// metadata service needs the network); `None`: the local stage tries it
    /// (a config drive).
    pub local_stage: fn(SourceKind) -> Option<&'static str>,
    /// Builds the datasource `kind` (one of [`Cloud::kinds`]), its fetch
    /// retried within the policy.
    pub datasource: fn(&Setup<'_>, SourceKind, WaitPolicy) -> Result<Box<dyn Datasource>>,
    /// How a region refines the cloud's instance-data `cloud_id` (cloud-init's
    /// `canonical_cloud_id`: `aws-china` for an `aws` region `cn-…`); most
    /// clouds have none.
    pub region_ids: &'static [RegionId],
}

/// What building a cloud's provider or datasource reads from the configuration
/// besides the cloud's own row.
#[derive(Debug, Clone, Copy)]
pub struct Setup<'a> {
    /// Prefix of every path (`/` in production).
    pub root: &'a Path,
    /// The cloud's `<name>.endpoint`, when set (`None`: its defaults).
    pub endpoint: Option<&'a str>,
    /// `imds.endpoints` (empty: the defaults), for the clouds that read them.
    pub imds_endpoints: &'a [String],
    /// `imdsv1_fallback`.
    pub imdsv1_fallback: bool,
    /// `imds.bind_interface` (the hooks; the boot stage binds nothing).
    pub bind_interface: bool,
    /// The platform detection named (`aws`, `brightbox`, ..., `unknown`), for
    /// instance-data's cloud name.
    pub cloud_name: &'a str,
}

impl<'a> Setup<'a> {
    /// Nothing configured: the defaults below `root`.
    pub fn new(root: &'a Path) -> Self {
        Self {
            root,
            endpoint: None,
            imds_endpoints: &[],
            imdsv1_fallback: false,
            bind_interface: false,
            cloud_name: "unknown",
        }
    }
}

/// The provider of a cloud (configuration key `provider`): a handle to its row.
#[derive(Clone, Copy)]
pub struct ProviderKind(&'static Cloud);

impl ProviderKind {
    /// The cloud `row` is.
    pub const fn of(row: &'static Cloud) -> Self {
        Self(row)
    }

    /// The cloud's row.
    pub fn cloud(self) -> &'static Cloud {
        self.0
    }

    /// The configuration name.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// The provider whose configuration name is `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        crate::source::CLOUDS
            .iter()
            .find(|c| c.name == name)
            .map(|c| Self(c))
    }

    /// The provider `auto` falls back to: the registry's first (EC2).
    fn fallback() -> Self {
        Self(crate::source::CLOUDS[0])
    }

    /// Builds this cloud's provider.
    pub fn provider(self, setup: &Setup<'_>) -> Result<Box<dyn Provider>> {
        (self.0.provider)(setup)
    }
}

impl PartialEq for ProviderKind {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for ProviderKind {}

impl PartialOrd for ProviderKind {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ProviderKind {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.name().cmp(other.name())
    }
}

impl std::hash::Hash for ProviderKind {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name().hash(state);
    }
}

impl fmt::Debug for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The cloud names `provider` takes: `auto, ec2, ... or oracle`.
fn choices() -> String {
    let names: Vec<&str> = std::iter::once("auto")
        .chain(crate::source::CLOUDS.iter().map(|c| c.name))
        .collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(", "),
    }
}

/// Providers named in SPEC §4 that are planned, not built: `provider:` refuses
/// them with a message saying so. None since issue 22.
pub const PLANNED: [&str; 0] = [];

/// The configuration key `provider`: `auto` (the default) or a provider's name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ProviderChoice {
    /// The boot stage's verdict recorded in `boot.json`, else the cloud DMI
    /// names ([`crate::source::detect::cloud_from_dmi`]), else EC2.
    #[default]
    Auto,
    /// This provider.
    Named(ProviderKind),
}

impl ProviderChoice {
    /// The provider to use, given the verdict `auto` goes by: the datasource the
    /// boot stage recorded, else the one detection found ([`auto_verdict`]).
    /// Pure: the caller reads `boot.json` and DMI. A cloud with a provider of its
    /// own resolves to it; every other verdict (EC2, LXD, NoCloud, none, or none
    /// at all) to EC2, as before the `provider` key.
    pub fn resolve(self, recorded: Option<SourceKind>) -> ProviderKind {
        match self {
            Self::Named(k) => k,
            // The cloud whose row claims the verdict; else (EC2's verdict, LXD,
            // NoCloud, none, no boot.json) the first row, EC2, as before the key.
            Self::Auto => recorded
                .and_then(|v| {
                    crate::source::CLOUDS
                        .iter()
                        .find(|c| c.kinds.contains(&v))
                        .map(|c| ProviderKind::of(c))
                })
                .unwrap_or_else(ProviderKind::fallback),
        }
    }
}

/// The verdict `auto` goes by (SPEC §4): the boot stage's, else, when there is
/// none (no `boot.json` of this boot, or one without a datasource), what
/// `detect` says (called only then: the hooks' entry point reads DMI in it).
pub fn auto_verdict(
    recorded: Option<SourceKind>,
    detect: impl FnOnce() -> Option<SourceKind>,
) -> Option<SourceKind> {
    recorded.or_else(detect)
}

impl fmt::Display for ProviderChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Named(k) => k.fmt(f),
        }
    }
}

impl std::str::FromStr for ProviderChoice {
    type Err = Problem;
    fn from_str(s: &str) -> std::result::Result<Self, Problem> {
        if s == "auto" {
            return Ok(Self::Auto);
        }
        if let Some(k) = ProviderKind::from_name(s) {
            return Ok(Self::Named(k));
        }
        let expected = format!("expected {}", choices());
        if PLANNED.contains(&s) {
            Err(Problem::bad(
                format!("{expected} (this provider is planned, not built yet)"),
                s,
            ))
        } else {
            Err(Problem::bad(expected, s))
        }
    }
}

/// A cloud, as the hook, the worker and `refresh` ask it about a NIC. Who the
/// instance is, the boot stage's question, is [`Identity`], which every provider
/// also implements.
pub trait Provider: fmt::Debug {
    /// Which provider this is.
    fn kind(&self) -> ProviderKind;

    /// The consistency wait for one NIC: asks the metadata service about `nic`
    /// (its MAC, leases and the OS's other NICs) until its answer is complete for
    /// the leases, or `policy.budget` is spent, sleeping on `clock`. Requests are
    /// the provider's to shape (EC2 binds them to the NIC; Azure could not).
    fn wait_for_nic(&self, nic: &NicEvent, policy: &WaitPolicy, clock: &dyn Clock) -> Outcome;

    /// The NICs this cloud serves no DHCP, whose address the OS must configure
    /// from the metadata (OCI's secondary VNICs): one answer of the metadata
    /// service, asked within `policy` (its retries and budget), sleeping on
    /// `clock`. `None`, the default: every NIC of this cloud has DHCP, and nothing
    /// is asked. An error changes nothing: `refresh` keeps what it applied before.
    fn unleased(&self, policy: &WaitPolicy, clock: &dyn Clock) -> Option<Result<Unleased>> {
        let _ = (policy, clock);
        None
    }
}

/// What a provider's [`Provider::unleased`] answered: every NIC the metadata lists
/// that DHCP does not serve, and the answer they were read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unleased {
    /// One entry per NIC without DHCP that the metadata lists, in its order.
    pub nics: Vec<UnleasedNic>,
    /// The metadata those NICs were read from, as [`Outcome::Complete`] would
    /// carry it (the primary MAC, every NIC listed): what `plan` reads for them.
    pub network: InstanceNetwork,
    /// Whether leasehook's own links are reconciled with this answer (OCI bare
    /// metal, [`crate::apply::links`]): created for each [`UnleasedNic::link`],
    /// deleted when their NIC is no longer listed. `false`: none is looked for.
    pub owns_links: bool,
}

/// One NIC without DHCP: its MAC, and what a DHCP server would have said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnleasedNic {
    /// The NIC's MAC, by which the OS's link is found.
    pub mac: MacAddr,
    /// At most one per family: the address with its subnet's prefix length and
    /// the subnet's router, with [`crate::model::Reason::Metadata`]: the
    /// planner then adds the address to the link (owned, like a secondary
    /// address), which no DHCP client does here. Or, with
    /// [`crate::model::Reason::Autoconf`], the IPv6 address the kernel
    /// configures from router advertisements that the metadata vouches for
    /// (`OpenStack`'s SLAAC networks): `refresh` keeps it only while the kernel
    /// holds it on the link, and the planner routes it but never adds it.
    pub leases: Vec<Lease>,
    /// The link the OS must create for it (OCI bare metal's VLAN VNICs), which
    /// leasehook creates and owns ([`crate::apply::links`]); `None`: the NIC
    /// has a link of its own.
    pub link: Option<crate::model::NicLink>,
}

/// A cloud, as the boot stage asks it: who this instance is. A trait apart from
/// [`Provider`] so that the hooks' `Box<dyn Provider>` does not carry it: a method
/// of that trait object would keep every provider's identity fetch (instance-data,
/// user-data) in the hook binary, which never asks it.
pub trait Identity {
    /// The provider's datasource for the boot stage (identity, user-data), its
    /// fetch retried within `policy`.
    fn datasource(&self, policy: WaitPolicy) -> Result<Box<dyn Datasource>>;
}

/// One NIC's consistency wait as a provider runs it: what to ask next and what the
/// answers so far mean (both pure), and one request (IO). [`wait::wait`] drives it.
pub trait NicSession {
    /// One request; a round never asks the same one twice.
    type Request: Copy + Ord + fmt::Debug;

    /// The interface, for log lines.
    fn interface(&self) -> &IfName;

    /// What the answers so far say, and what is still missing for the leases.
    /// An answer that does not parse is an error naming it.
    fn assess(&self) -> Result<Assessment>;

    /// The next request of a round that started from `missing` (what the last
    /// assessment lacks; empty before the first, which the wait does not make
    /// before anything is fetched) and has asked `asked` already; `None` ends
    /// the round.
    fn next_request(
        &self,
        missing: &[Missing],
        asked: &BTreeSet<Self::Request>,
    ) -> Option<Self::Request>;

    /// Asks `request` and keeps its answer. An error ends the round.
    fn ask(&mut self, request: Self::Request) -> Result<()>;
}

/// The consistency decision for what has been fetched so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assessment {
    /// The metadata fetched so far: the primary MAC, and this NIC when its folder
    /// exists.
    pub network: InstanceNetwork,
    /// What IMDS does not say yet; empty when it agrees with the lease.
    pub missing: Vec<Missing>,
}

impl Assessment {
    /// Whether IMDS agrees with the lease.
    pub fn is_complete(&self) -> bool {
        self.missing.is_empty()
    }
}

/// What leasehook configures on the primary NIC with the configuration in force
/// (SPEC §3.2, §3.7), so what a provider needs to ask about it once it knows the
/// event's NIC is the primary. Providers that read a NIC in one request ignore it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PrimaryUse {
    /// Rules and a table (`primary_rules: true`), or the `cloud-init` profile
    /// (positions, peers, the subnet's prefix): every key, as for a secondary.
    #[default]
    Everything,
    /// Only its secondary addresses (`local-ipv4s[1:]`, extra `ipv6s`).
    SecondaryAddresses,
    /// Nothing: no rule, no table, no address.
    Nothing,
}

impl PrimaryUse {
    /// What `cfg` (after the Kubernetes gate: `kubernetes` set on a node whose
    /// CNI owns the primary's secondary IPs) configures on the primary.
    pub fn of(cfg: &crate::plan::PlanConfig) -> Self {
        if cfg.profile == crate::model::Profile::CloudInit || cfg.primary_rules {
            Self::Everything
        } else if cfg.secondary_addresses && !cfg.kubernetes {
            Self::SecondaryAddresses
        } else {
            Self::Nothing
        }
    }
}

/// What a DHCP event asks about: one interface, its MAC, and the lease(s) in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NicEvent {
    interface: IfName,
    mac: MacAddr,
    leases: Vec<Lease>,
    peers: BTreeSet<MacAddr>,
    primary_use: PrimaryUse,
    /// The primary NIC's MAC, when a recorded state already says it.
    known_primary: Option<MacAddr>,
}

impl NicEvent {
    /// An event with at least one lease and at most one per family.
    pub fn try_new(interface: IfName, mac: MacAddr, leases: Vec<Lease>) -> Result<Self> {
        let bad = |reason: &str| Error::Argument {
            arg: "lease".to_owned(),
            problem: Problem::bad(reason, interface.as_str()),
        };
        if leases.is_empty() {
            return Err(bad("a NIC event needs a lease"));
        }
        let families: BTreeSet<Family> = leases.iter().map(|l| l.family).collect();
        if families.len() != leases.len() {
            return Err(bad("two leases of one family"));
        }
        if leases.iter().any(|l| Family::of(&l.address) != l.family) {
            return Err(bad("a lease's address is not of its family"));
        }
        Ok(Self {
            interface,
            mac,
            leases,
            peers: BTreeSet::new(),
            primary_use: PrimaryUse::Everything,
            known_primary: None,
        })
    }

    /// What the configuration configures on the primary NIC ([`PrimaryUse::of`]):
    /// when this NIC is the primary, only that is asked.
    #[must_use]
    pub fn with_primary_use(mut self, primary_use: PrimaryUse) -> Self {
        self.primary_use = primary_use;
        self
    }

    /// What is asked about this NIC when it is the primary.
    pub fn primary_use(&self) -> PrimaryUse {
        self.primary_use
    }

    /// This NIC is known to be the primary (its recorded state says so: EC2's
    /// primary ENI cannot be detached), so the provider need not ask which NIC
    /// the primary is.
    #[must_use]
    pub fn known_primary(mut self) -> Self {
        self.known_primary = Some(self.mac);
        self
    }

    /// The primary NIC is known to have `mac` (another NIC's recorded state says
    /// it was the primary: the primary cannot be detached, and the records live
    /// in `/run`, one boot), so the provider need not ask which NIC the primary
    /// is: one request less per refresh of a secondary on EC2 and Alibaba.
    #[must_use]
    pub fn with_known_primary_mac(mut self, mac: MacAddr) -> Self {
        self.known_primary = Some(mac);
        self
    }

    /// Whether [`NicEvent::known_primary`] was said (or the known primary's MAC
    /// is this NIC's).
    pub fn is_known_primary(&self) -> bool {
        self.known_primary == Some(self.mac)
    }

    /// The primary's MAC, when it is known without asking.
    pub fn known_primary_mac(&self) -> Option<MacAddr> {
        self.known_primary
    }

    /// Also reads the position keys of the OS's other NICs (`peers`, their MACs):
    /// the `macs/` listing once, then `device-number` of each peer IMDS lists, and
    /// its `network-card` when the instance type serves the key. What the
    /// `cloud-init` profile needs to number this NIC by its position among all
    /// NICs present in both the OS and IMDS, as cloud-init does, from the metadata
    /// and never from which leases were seen. Each is read once per event.
    #[must_use]
    pub fn with_peers(mut self, peers: impl IntoIterator<Item = MacAddr>) -> Self {
        self.peers = peers.into_iter().filter(|m| *m != self.mac).collect();
        self
    }

    /// The other NICs whose position keys this event reads.
    pub fn peers(&self) -> &BTreeSet<MacAddr> {
        &self.peers
    }

    /// The interface.
    pub fn interface(&self) -> &IfName {
        &self.interface
    }

    /// The interface's MAC.
    pub fn mac(&self) -> MacAddr {
        self.mac
    }

    /// The leases.
    pub fn leases(&self) -> &[Lease] {
        &self.leases
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_primary_gets_follows_the_configuration() {
        use crate::model::Profile;
        use crate::plan::PlanConfig;
        let of = |f: fn(&mut PlanConfig)| {
            let mut c = PlanConfig::default();
            f(&mut c);
            PrimaryUse::of(&c)
        };
        assert_eq!(of(|_| {}), PrimaryUse::SecondaryAddresses);
        assert_eq!(of(|c| c.secondary_addresses = false), PrimaryUse::Nothing);
        // A node whose CNI owns the primary's secondary IPs adds none.
        assert_eq!(of(|c| c.kubernetes = true), PrimaryUse::Nothing);
        assert_eq!(of(|c| c.primary_rules = true), PrimaryUse::Everything);
        assert_eq!(
            of(|c| {
                c.profile = Profile::CloudInit;
                c.secondary_addresses = false;
            }),
            PrimaryUse::Everything
        );
    }

    #[test]
    fn auto_goes_by_the_boot_verdict_else_detection() {
        // A verdict is taken as is: detection is not even asked.
        let never = || -> Option<SourceKind> { panic!("detection asked despite a verdict") };
        assert_eq!(
            auto_verdict(Some(SourceKind::Lxd), never),
            Some(SourceKind::Lxd)
        );
        assert_eq!(
            auto_verdict(None, || Some(SourceKind::AliYun)),
            Some(SourceKind::AliYun)
        );
        assert_eq!(auto_verdict(None, || None), None);
        let auto = |v| ProviderChoice::Auto.resolve(v);
        let named = |n| ProviderKind::from_name(n).unwrap();
        assert_eq!(auto(Some(SourceKind::AliYun)), named("aliyun"));
        assert_eq!(auto(Some(SourceKind::ConfigDrive)), named("openstack"));
        for other in [None, Some(SourceKind::Ec2), Some(SourceKind::NoCloud)] {
            assert_eq!(auto(other), named("ec2"));
        }
        assert_eq!(
            ProviderChoice::Named(named("ec2")).resolve(Some(SourceKind::AliYun)),
            named("ec2")
        );
        assert_eq!(
            "aliyun".parse::<ProviderChoice>().unwrap(),
            ProviderChoice::Named(named("aliyun"))
        );
        assert_eq!(named("aliyun").to_string(), "aliyun");
        assert_eq!(
            "digitalocean"
                .parse::<ProviderChoice>()
                .unwrap_err()
                .to_string(),
            "expected auto, ec2, gce, azure, aliyun, oracle or openstack (got \"digitalocean\")"
        );
    }
}

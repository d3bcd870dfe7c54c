// SPDX-License-Identifier: Apache-2.0
//! The data every other module speaks: leases, lease events, instance metadata, the
//! operating system's view of links, and the policy-routing plan. Pure data, no IO.
//!
//! Every value is validated when it is built (an [`IfName`] cannot hold a `/`, a
//! [`MacAddr`] is six bytes), so code further down never re-checks.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use serde::{Deserialize, Serialize};

/// An IP address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Family {
    /// IPv4 (`ip -4`).
    #[serde(rename = "ipv4")]
    V4,
    /// IPv6 (`ip -6`).
    #[serde(rename = "ipv6")]
    V6,
}

impl Family {
    /// The family of an address.
    pub fn of(ip: &IpAddr) -> Self {
        match ip {
            IpAddr::V4(_) => Self::V4,
            IpAddr::V6(_) => Self::V6,
        }
    }

    /// The `ip` flag for this family: `-4` or `-6`.
    pub fn ip_flag(self) -> &'static str {
        match self {
            Self::V4 => "-4",
            Self::V6 => "-6",
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::V4 => "IPv4",
            Self::V6 => "IPv6",
        })
    }
}

/// The longest interface name the kernel accepts (`IFNAMSIZ` minus the NUL).
pub const IFNAME_MAX: usize = 15;

/// A validated network interface name.
///
/// Accepts 1 to 15 characters from `A-Z a-z 0-9 - _ .`, and refuses `.` and `..`.
/// The kernel itself allows more (anything but `/`, `:`, whitespace and NUL), but a
/// name arriving from a DHCP client's environment is untrusted and will end up in
/// file names and log lines: the narrow set covers every name udev, systemd and the
/// clouds generate (`eth0`, `ens5`, `enp0s5`, `enX0`, `veth-a_1`).
///
/// Held inline, not on the heap: a plan copies its NIC's name into every address
/// and route (1,500 copies in the planner's benchmark, a seventh of its time as
/// `String`s). The bytes after the name are zero, and a name holds no zero byte,
/// so the derived order is the names' order as strings.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct IfName {
    bytes: [u8; IFNAME_MAX],
    len: u8,
}

impl IfName {
    /// Validates `name`; the error says what is wrong.
    pub fn try_new(name: &str) -> Result<Self, Problem> {
        let reason = if name.is_empty() {
            Some("empty interface name")
        } else if name.len() > IFNAME_MAX {
            Some("interface name longer than 15 bytes")
        } else if name == "." || name == ".." {
            Some("interface name may not be `.` or `..`")
        } else if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        {
            Some("interface name may only hold A-Z a-z 0-9 - _ .")
        } else {
            None
        };
        if let Some(r) = reason {
            return Err(Problem::bad(r, name));
        }
        let mut bytes = [0; IFNAME_MAX];
        for (to, from) in bytes.iter_mut().zip(name.bytes()) {
            *to = from;
        }
        Ok(Self {
            bytes,
            len: u8::try_from(name.len()).unwrap_or_default(),
        })
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        // ASCII, checked by `try_new`, so never the empty fallback.
        self.bytes
            .get(..usize::from(self.len))
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or_default()
    }
}

impl fmt::Debug for IfName {
    /// `IfName("eth0")`, as when it held a `String`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("IfName").field(&self.as_str()).finish()
    }
}

impl TryFrom<String> for IfName {
    type Error = Problem;
    fn try_from(s: String) -> Result<Self, Problem> {
        Self::try_new(&s)
    }
}

impl From<IfName> for String {
    fn from(n: IfName) -> String {
        n.as_str().to_owned()
    }
}

impl fmt::Display for IfName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An Ethernet MAC address, printed lower-case with colons (as IMDS and netplan do).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MacAddr([u8; 6]);

impl MacAddr {
    /// Builds a MAC from its six bytes.
    pub fn new(bytes: [u8; 6]) -> Self {
        Self(bytes)
    }

    /// The six bytes.
    pub fn octets(self) -> [u8; 6] {
        self.0
    }

    /// Why no NIC can have this MAC (`None`: a NIC may). An all-zero MAC is what
    /// `lo` and other links without a hardware address report; a MAC with the
    /// group bit set (broadcast `ff:ff:ff:ff:ff:ff` among them) names a group of
    /// stations, never one (IEEE 802, the least significant bit of the first
    /// octet). Such a MAC, from the metadata or from the kernel, matches no NIC.
    pub fn nobodys(self) -> Option<&'static str> {
        if self.0 == [0; 6] {
            Some("an all-zero MAC is nobody's")
        } else if self.0 == [0xff; 6] {
            Some("the broadcast MAC is nobody's")
        } else if self.0[0] & 1 == 1 {
            Some("a multicast (group) MAC is nobody's")
        } else {
            None
        }
    }
}

impl FromStr for MacAddr {
    type Err = Problem;
    /// Parses `aa:bb:cc:dd:ee:ff` (either case, exactly six two-digit groups).
    fn from_str(s: &str) -> Result<Self, Problem> {
        let bad = || Problem::bad("not a MAC address (aa:bb:cc:dd:ee:ff)", s);
        let mut out = [0u8; 6];
        let mut groups = s.split(':');
        for byte in &mut out {
            let g = groups.next().ok_or_else(bad)?;
            if g.len() != 2 {
                return Err(bad());
            }
            *byte = u8::from_str_radix(g, 16).map_err(|_| bad())?;
        }
        if groups.next().is_some() {
            return Err(bad());
        }
        Ok(Self(out))
    }
}

impl TryFrom<String> for MacAddr {
    type Error = Problem;
    fn try_from(s: String) -> Result<Self, Problem> {
        s.parse()
    }
}

impl From<MacAddr> for String {
    fn from(m: MacAddr) -> String {
        m.to_string()
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [b0, b1, b2, b3, b4, b5] = self.0;
        write!(f, "{b0:02x}:{b1:02x}:{b2:02x}:{b3:02x}:{b4:02x}:{b5:02x}")
    }
}

/// Why a DHCP client ran its hook. DHCPv6 reasons are the same words; the family is
/// carried next to the reason in [`LeaseEvent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Reason {
    /// A new lease was bound.
    Bound,
    /// The lease was renewed with its server.
    Renew,
    /// The lease was renewed with any server.
    Rebind,
    /// A remembered lease was confirmed at start.
    Reboot,
    /// The lease ran out.
    Expire,
    /// No lease could be had.
    Fail,
    /// The lease was given back.
    Release,
    /// The client stopped; the lease stays valid on the server.
    Stop,
    /// The client is about to start (`PREINIT`, `PREINIT6`).
    Preinit,
    /// Media selection (`MEDIUM`, BSD only).
    Medium,
    /// No server answered; a remembered lease is being tested.
    Timeout,
    /// A DHCPv6 address became deprecated (`DEPREF6`).
    Depref,
    /// An ARP check before binding (`ARPCHECK`, `ARPSEND`).
    Arp,
    /// Not a DHCP client's: the cloud serves this NIC no DHCP, its metadata gave
    /// the address, and leasehook adds it to the link and owns it (OCI's secondary
    /// VNICs, [`crate::source::provider::Provider::unleased`]).
    Metadata,
    /// Not a DHCP client's either: the kernel configured the address itself
    /// from router advertisements (SLAAC; `OpenStack`'s `ipv6_slaac` and
    /// `ipv6_dhcpv6-stateless` networks), and the metadata vouches for it. The
    /// NIC gets its rules and table; the address stays the kernel's (never
    /// added or removed by leasehook), and the lease is in force only while the
    /// kernel holds it.
    Autoconf,
}

/// What leasehook does for an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Plan and apply policy routing for the lease's family.
    Apply,
    /// Remove the family's rules, routes and secondary addresses for the interface.
    Remove,
    /// Nothing to do.
    Ignore,
}

impl Reason {
    /// The action SPEC §6.1 assigns to this reason.
    pub fn action(self) -> Action {
        match self {
            Self::Bound
            | Self::Renew
            | Self::Rebind
            | Self::Reboot
            | Self::Metadata
            | Self::Autoconf => Action::Apply,
            Self::Expire | Self::Fail | Self::Release | Self::Stop => Action::Remove,
            Self::Preinit | Self::Medium | Self::Timeout | Self::Depref | Self::Arp => {
                Action::Ignore
            }
        }
    }
}

impl Reason {
    /// Whether a DHCP client's hook reported it: not [`Reason::Metadata`] nor
    /// [`Reason::Autoconf`], whose leases no DHCP client holds.
    pub fn is_dhcp_client(self) -> bool {
        !matches!(self, Self::Metadata | Self::Autoconf)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Bound => "bound",
            Self::Renew => "renew",
            Self::Rebind => "rebind",
            Self::Reboot => "reboot",
            Self::Expire => "expire",
            Self::Fail => "fail",
            Self::Release => "release",
            Self::Stop => "stop",
            Self::Preinit => "preinit",
            Self::Medium => "medium",
            Self::Timeout => "timeout",
            Self::Depref => "depref",
            Self::Arp => "arp",
            Self::Metadata => "metadata",
            Self::Autoconf => "autoconf",
        })
    }
}

/// One DHCP lease: what the DHCP server told the client about one address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The address family (a DHCPv6 lease is [`Family::V6`]).
    pub family: Family,
    /// The leased address.
    pub address: IpAddr,
    /// The prefix length of the leased address (DHCPv6 IA_NA addresses are `/128`).
    pub prefix_len: u8,
    /// The routers the server named (DHCPv4 option 3); always empty for DHCPv6, whose
    /// router comes from router advertisements.
    pub routers: Vec<IpAddr>,
    /// The reason the client gave with this lease.
    pub reason: Reason,
}

impl Lease {
    /// The leased address with its prefix length, for example `10.0.1.20/24`.
    pub fn interface_net(&self) -> Option<IpNet> {
        IpNet::new(self.address, self.prefix_len).ok()
    }
}

/// A DHCP client's event for one interface and one family.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseEvent {
    /// The interface the client runs on.
    pub interface: IfName,
    /// The family of the client (dhclient `-4` or `-6`).
    pub family: Family,
    /// Why the client ran its hook.
    pub reason: Reason,
    /// The lease now in force (`new_*`), if any.
    pub new: Option<Lease>,
    /// The lease that was in force before (`old_*`), if any.
    pub old: Option<Lease>,
}

impl LeaseEvent {
    /// What leasehook does for this event.
    pub fn action(&self) -> Action {
        self.reason.action()
    }
}

/// The metadata of one network interface (one IMDS `macs/<mac>/` folder). Keys IMDS
/// did not serve are `None` or empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NicMetadata {
    /// The MAC (the folder name).
    pub mac: MacAddr,
    /// `device-number`: the attachment index on its network card.
    pub device_number: Option<u32>,
    /// `network-card`: the network card index (multi-card instance types only).
    pub network_card: Option<u32>,
    /// `local-ipv4s`: the private IPv4 addresses, primary first.
    pub local_ipv4s: Vec<Ipv4Addr>,
    /// `ipv6s`: the IPv6 addresses.
    pub ipv6s: Vec<Ipv6Addr>,
    /// `subnet-ipv4-cidr-block`: the IPv4 subnet (IMDS serves one).
    pub subnet_ipv4_cidr_blocks: Vec<Ipv4Net>,
    /// `subnet-ipv6-cidr-blocks`: the IPv6 subnets.
    pub subnet_ipv6_cidr_blocks: Vec<Ipv6Net>,
    /// `ipv4-prefix`: delegated IPv4 prefixes.
    pub ipv4_prefixes: Vec<Ipv4Net>,
    /// `ipv6-prefix`: delegated IPv6 prefixes.
    pub ipv6_prefixes: Vec<Ipv6Net>,
    /// `interface-id`: the ENI id, for logs.
    pub interface_id: Option<String>,
    /// Routes the metadata names for the NIC besides its subnet and default
    /// route (`OpenStack`'s `network_data.json` `routes`): the planner puts the ones
    /// whose next hop lies on the NIC's subnet into the NIC's own table. Empty for
    /// the clouds that name none (and in state files written before the field).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<NicRoute>,
    /// The NIC's routers the metadata names or implies and no lease may carry
    /// (GCE's and Alibaba's `gateway`, OCI's `virtualRouterIp` and its subnet's
    /// first host, Azure's subnet's first host): never an address or a rule
    /// source of any NIC ([`crate::gate::Routers`]). Empty for the clouds whose
    /// router only the lease names (and in state files written before the field).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gateways: Vec<IpAddr>,
}

/// A route the metadata names for a NIC: a destination and its next hop. A
/// destination of `0.0.0.0/0` or `::/0` is the network's default gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NicRoute {
    /// The destination.
    pub to: IpNet,
    /// The next hop (the gateway).
    pub via: IpAddr,
}

impl NicMetadata {
    /// An entry with only the MAC known.
    pub fn empty(mac: MacAddr) -> Self {
        Self {
            mac,
            device_number: None,
            network_card: None,
            local_ipv4s: Vec::new(),
            ipv6s: Vec::new(),
            subnet_ipv4_cidr_blocks: Vec::new(),
            subnet_ipv6_cidr_blocks: Vec::new(),
            ipv4_prefixes: Vec::new(),
            ipv6_prefixes: Vec::new(),
            interface_id: None,
            routes: Vec::new(),
            gateways: Vec::new(),
        }
    }
}

/// The network part of the instance metadata: which MAC is primary, and each NIC.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct InstanceNetwork {
    /// The top-level `mac` key: the primary NIC.
    pub primary_mac: Option<MacAddr>,
    /// One entry per `macs/<mac>/` folder, sorted by MAC.
    pub nics: Vec<NicMetadata>,
}

impl InstanceNetwork {
    /// The metadata of the NIC with this MAC.
    pub fn nic(&self, mac: MacAddr) -> Option<&NicMetadata> {
        self.nics.iter().find(|n| n.mac == mac)
    }
}

/// The operating system's view of one link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    /// The interface name.
    pub name: IfName,
    /// The link's MAC address.
    pub mac: MacAddr,
    /// The IPv6 default router the kernel learned from router advertisements, if any.
    pub ipv6_router: Option<Ipv6Addr>,
}

/// Which rendering scheme the planner follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum Profile {
    /// amazon-ec2-net-utils' scheme (SPEC §3.2): table `10000 + 100*card + device`.
    #[default]
    #[serde(rename = "ec2-net-utils")]
    Ec2NetUtils,
    /// cloud-init's EC2 netplan scheme (SPEC §3.3): table `100 + position`.
    #[serde(rename = "cloud-init")]
    CloudInit,
}

impl FromStr for Profile {
    type Err = Problem;
    fn from_str(s: &str) -> Result<Self, Problem> {
        match s {
            "ec2-net-utils" => Ok(Self::Ec2NetUtils),
            "cloud-init" => Ok(Self::CloudInit),
            _ => Err(Problem::bad("expected ec2-net-utils or cloud-init", s)),
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Ec2NetUtils => "ec2-net-utils",
            Self::CloudInit => "cloud-init",
        })
    }
}

/// `from PREFIX [to PREFIX] lookup TABLE [priority P]`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Rule {
    /// The source prefix the rule matches (`/0`: `from all`).
    pub from: IpNet,
    /// The destination prefix the rule matches, when it names one (an
    /// operator's `nics[].rules[].to`, SPEC §3.9); the source rules name none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<IpNet>,
    /// The table it looks up.
    pub table: u32,
    /// Its priority; `None` lets the kernel (or networkd) choose.
    pub priority: Option<u32>,
}

impl Rule {
    /// The rule's family.
    pub fn family(&self) -> Family {
        Family::of(&self.from.addr())
    }
}

impl fmt::Display for Rule {
    /// `from 10.0.1.20/32 lookup 10001 priority 10001`, as `ip rule` reads it
    /// (`from 0.0.0.0/0 to 198.51.100.0/24 lookup 10001 priority 9000` for a
    /// rule with a destination).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "from {}", self.from)?;
        if let Some(to) = self.to {
            write!(f, " to {to}")?;
        }
        write!(f, " lookup {}", self.table)?;
        if let Some(p) = self.priority {
            write!(f, " priority {p}")?;
        }
        Ok(())
    }
}

/// A route's scope, when it is not the default (universe).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// `scope link`: the destination is on the link.
    Link,
}

/// `DST [via GW] dev IF [scope link] [src SRC] table T`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Route {
    /// The destination; `0.0.0.0/0` or `::/0` for a default route.
    pub to: IpNet,
    /// The gateway, if the destination is not on the link.
    pub via: Option<IpAddr>,
    /// The output interface.
    pub dev: IfName,
    /// The scope, when not universe.
    pub scope: Option<Scope>,
    /// The preferred source address.
    pub src: Option<IpAddr>,
    /// The table the route lives in.
    pub table: u32,
}

impl Route {
    /// The route's family.
    pub fn family(&self) -> Family {
        Family::of(&self.to.addr())
    }
}

impl fmt::Display for Route {
    /// `default via 10.0.1.1 dev eth1 table 10001`, as `ip route` reads it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.to.prefix_len() == 0 {
            f.write_str("default")?;
        } else {
            write!(f, "{}", self.to)?;
        }
        if let Some(via) = self.via {
            write!(f, " via {via}")?;
        }
        write!(f, " dev {}", self.dev)?;
        if self.scope == Some(Scope::Link) {
            f.write_str(" scope link")?;
        }
        if let Some(src) = self.src {
            write!(f, " src {src}")?;
        }
        write!(f, " table {}", self.table)
    }
}

/// An address to hold on a link: `ADDR/LEN dev IF`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Address {
    /// The address with its prefix length.
    pub addr: IpNet,
    /// The link that holds it.
    pub dev: IfName,
}

impl Address {
    /// The address's family.
    pub fn family(&self) -> Family {
        Family::of(&self.addr.addr())
    }
}

impl Address {
    /// Whether leasehook adds the address with `IFA_F_NOPREFIXROUTE` (`ip
    /// address add ... noprefixroute`): every address with a prefix
    /// (`10.0.1.20/8`, a metadata lease's or the cloud-init profile's). Without
    /// it the kernel would put the prefix's route (`10.0.0.0/8 dev IF proto
    /// kernel`) into the **main** table and send every other host of the prefix
    /// out of this NIC; the subnet's route is the plan's, in the NIC's own table.
    /// A /32 or /128 has no prefix route.
    pub fn no_prefix_route(&self) -> bool {
        self.addr.prefix_len() < self.addr.max_prefix_len()
    }
}

impl fmt::Display for Address {
    /// `10.0.1.21/32 dev eth1`, as `ip address` reads it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} dev {}", self.addr, self.dev)
    }
}

/// Something the metadata does not (yet) say, which kept the plan from being whole.
///
/// The hot-plug consistency wait re-fetches until the list is empty or the budget
/// runs out; `leasehook plan` prints it as `# missing:` lines.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Missing {
    /// The metadata has no folder for this MAC.
    MacFolder,
    /// The top-level `mac` key (which names the primary NIC) is absent.
    PrimaryMac,
    /// The NIC's `device-number` is absent.
    DeviceNumber,
    /// The NIC reads `device-number: 0` but is not the primary: IMDS has not
    /// propagated the real number yet.
    DeviceNumberNotPropagated,
    /// The NIC has no `network-card` while another NIC of the instance has one: a
    /// multi-card instance type whose key for this NIC has not propagated yet.
    NetworkCardNotPropagated,
    /// The leased address is not (yet) in `local-ipv4s` / `ipv6s`.
    LeaseAddress {
        /// The address the DHCP server handed out.
        address: IpAddr,
    },
    /// The family's subnet key (`subnet-ipv4-cidr-block`, `subnet-ipv6-cidr-blocks`)
    /// is absent.
    Subnet {
        /// Which family's subnet.
        family: Family,
    },
    /// The family's address list (`local-ipv4s`, `ipv6s`) is absent.
    Addresses {
        /// Which family's list.
        family: Family,
    },
    /// No router is known for the family's default route (no DHCPv4 lease, or a lease
    /// without option 3).
    Router {
        /// Which family's router.
        family: Family,
    },
}

impl Missing {
    /// Whether waiting for the metadata service can fix this (a missing router cannot).
    pub fn is_metadata(&self) -> bool {
        !matches!(self, Self::Router { .. })
    }

    /// Whether the plan of a primary NIC that gets no rules and no table
    /// (`ec2-net-utils` without `primary_rules`) lacks this, when it adds the
    /// NIC's secondary addresses (`adds_addresses`) or nothing at all. Its
    /// device-number and network-card number nothing; the IPv4 subnet only bounds
    /// the addresses' gate, which the lease's own network bounds as well; the
    /// addresses, their folder and the IPv6 subnet (DHCPv6 leases are /128: the
    /// subnet is the gate's only bound) are needed only to add addresses.
    pub fn concerns_unrouted_primary(&self, adds_addresses: bool) -> bool {
        match self {
            Self::PrimaryMac => true,
            Self::MacFolder | Self::LeaseAddress { .. } | Self::Addresses { .. } => adds_addresses,
            Self::Subnet { family } => adds_addresses && *family == Family::V6,
            Self::DeviceNumber
            | Self::DeviceNumberNotPropagated
            | Self::NetworkCardNotPropagated
            | Self::Router { .. } => false,
        }
    }
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MacFolder => f.write_str("no metadata folder for this MAC"),
            Self::PrimaryMac => f.write_str("top-level `mac` (the primary NIC) not known"),
            Self::DeviceNumber => f.write_str("device-number not known"),
            Self::DeviceNumberNotPropagated => {
                f.write_str("device-number reads 0 on a secondary NIC (not propagated)")
            }
            Self::NetworkCardNotPropagated => f.write_str(
                "network-card absent while another NIC has one (multi-card type, not propagated)",
            ),
            Self::LeaseAddress { address } => write!(
                f,
                "leased address {address} not in {}",
                match address {
                    IpAddr::V4(_) => "local-ipv4s",
                    IpAddr::V6(_) => "ipv6s",
                }
            ),
            Self::Subnet { family: Family::V4 } => f.write_str("subnet-ipv4-cidr-block not known"),
            Self::Subnet { family: Family::V6 } => f.write_str("subnet-ipv6-cidr-blocks not known"),
            Self::Addresses { family: Family::V4 } => f.write_str("local-ipv4s not known"),
            Self::Addresses { family: Family::V6 } => f.write_str("ipv6s not known"),
            Self::Router { family } => write!(f, "no {family} router known"),
        }
    }
}

/// The plan for one interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfacePlan {
    /// The interface.
    pub name: IfName,
    /// Its MAC.
    pub mac: MacAddr,
    /// Whether this is the primary NIC.
    pub primary: bool,
    /// The families this plan covers (those with a lease, in the default profile).
    pub families: Vec<Family>,
    /// The routing table of its rules and routes, when it has any.
    pub table: Option<u32>,
    /// The DHCP route metric to set (cloud-init profile only).
    pub metric: Option<u32>,
    /// Addresses to hold on the link besides the DHCP one.
    pub addresses: Vec<Address>,
    /// Routes in `table`.
    pub routes: Vec<Route>,
    /// Source rules into `table`.
    pub rules: Vec<Rule>,
    /// What kept this plan from being whole.
    pub missing: Vec<Missing>,
    /// What the address gate ([`crate::gate`]) refused: never a rule or an
    /// address, listed so `leasehook plan` prints it and the hooks log it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<crate::gate::Refused>,
}

/// The whole policy-routing plan: a value, rendered by [`crate::render`] and applied
/// by diffing it against what the kernel holds ([`crate::diff`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The scheme the plan follows.
    pub profile: Profile,
    /// One entry per planned interface, in name order (cloud-init profile: NIC order).
    pub interfaces: Vec<InterfacePlan>,
}

impl Plan {
    /// Whether any interface's plan lacks something the metadata should say.
    pub fn is_complete(&self) -> bool {
        self.interfaces
            .iter()
            .all(|i| i.missing.iter().all(|m| !m.is_metadata()))
    }
}

/// What is wrong with a value: a short reason and the value as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Why the value was refused, for example `not an IPv4 address`.
    pub reason: String,
    /// The value as received (`None` when it was missing).
    pub value: Option<String>,
}

impl Problem {
    /// A value that was present but refused.
    pub fn bad(reason: impl Into<String>, value: &str) -> Self {
        Self {
            reason: reason.into(),
            value: Some(value.to_owned()),
        }
    }

    /// A value that was required but absent.
    pub fn missing() -> Self {
        Self {
            reason: "missing".to_owned(),
            value: None,
        }
    }
}

impl std::error::Error for Problem {}

/// What kind of JSON value `v` is, for messages: `a string`, `a list`, ...; `object`
/// is what the caller's document calls a JSON object (`a folder` in a metadata tree,
/// `a mapping` in instance data).
pub(crate) fn json_kind(v: &serde_json::Value, object: &'static str) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => object,
    }
}

/// How many characters of a bad value an error message shows.
const SHOWN_CHARS: usize = 64;

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            None => f.write_str(&self.reason),
            Some(v) => {
                let shown: String = v.chars().take(SHOWN_CHARS).collect();
                // Debug formatting escapes control characters and quotes, so a value
                // carrying a newline cannot start a fake log line.
                write!(f, "{} (got {shown:?}", self.reason)?;
                if v.chars().count() > SHOWN_CHARS {
                    write!(f, "… {} chars in all", v.chars().count())?;
                }
                f.write_str(")")
            }
        }
    }
}

/// A datasource leasehook knows: a handle to its row, [`SourceKindRow`] (as
/// [`crate::source::provider::ProviderKind`] is to a cloud's row).
///
/// The datasources that are no cloud's, [`SourceKind::Lxd`], [`SourceKind::NoCloud`]
/// and [`SourceKind::None`], are declared here; each cloud declares its own in its
/// folder (`source/<cloud>/detect.rs`) and lists them in its row
/// ([`crate::source::provider::Cloud::kinds`]), so this plain value names no
/// cloud. Every kind ([`SourceKind::all`]), finding one by name
/// ([`SourceKind::from_name`]) and so reading one back are beside the rows, in
/// `source/kind.rs`.
///
/// Kinds compare by their place in ds-identify's built-in list; they serialise as
/// cloud-init's name.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SourceKind(&'static SourceKindRow);

/// What a datasource is called and where it stands.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SourceKindRow {
    /// cloud-init's name: `Ec2`, `LXD`, `NoCloud`, `None`.
    pub name: &'static str,
    /// cloud-init's `platform` for instance data: `ec2`, `lxd`, `nocloud`, `none`.
    pub platform: &'static str,
    /// Its place in ds-identify's built-in `datasource_list` (cloud-init 25.1's
    /// `DI_DSLIST_DEFAULT`, counted from 0), which orders the kinds; `None`, which
    /// ends every list, is last.
    pub rank: u8,
}

/// Declares datasource kinds as associated constants of [`SourceKind`]: each
/// `Name = ("cloud-init name", "platform", rank);` with its doc comment. The
/// kinds keep the names they had as the variants of a closed enum (cloud-init's
/// spelling), so that call sites and `match` patterns read as before; a cloud
/// declares its own in its folder.
macro_rules! source_kinds {
    ($($(#[$doc:meta])* $kind:ident = ($name:literal, $platform:literal, $rank:expr);)+) => {
        #[expect(
            non_upper_case_globals,
            reason = "the kinds keep their enum variant names, cloud-init's spelling"
        )]
        impl $crate::model::SourceKind {
            $(
                $(#[$doc])*
                pub const $kind: Self = Self::of(&$crate::model::SourceKindRow {
                    name: $name,
                    platform: $platform,
                    rank: $rank,
                });
            )+
        }
    };
}
pub(crate) use source_kinds;

source_kinds! {
    /// LXD's dev-lxd socket, `/dev/lxd/sock`.
    Lxd = ("LXD", "lxd", 25);
    /// NoCloud seeds: folders, the kernel command line, DMI.
    NoCloud = ("NoCloud", "nocloud", 2);
    /// No datasource: the end of every list ds-identify writes.
    None = ("None", "none", u8::MAX);
}

impl SourceKind {
    /// The kind `row` describes.
    pub const fn of(row: &'static SourceKindRow) -> Self {
        Self(row)
    }

    /// cloud-init's name: `Ec2`, `LXD`, `NoCloud`, `None`.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// cloud-init's `platform` for instance data: `ec2`, `lxd`, `nocloud`, `none`.
    pub fn platform(self) -> &'static str {
        self.0.platform
    }
}

impl PartialOrd for SourceKind {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SourceKind {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.0.rank, self.0.name).cmp(&(other.0.rank, other.0.name))
    }
}

impl fmt::Debug for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for SourceKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which link a created link sits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parent {
    /// The physical NIC the cloud numbers so (OCI's `nicIndex`): the NICs
    /// sorted by the first number in their name, as oci-utils does
    /// ([`crate::apply::links::physical_nics`]).
    NicIndex(u8),
    /// The NIC with this MAC.
    Mac(MacAddr),
}

impl fmt::Display for Parent {
    /// `physical NIC 1` (OCI's `nicIndex`), `NIC with MAC 42:01:…`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NicIndex(i) => write!(f, "physical NIC {i}"),
            Self::Mac(m) => write!(f, "NIC with MAC {m}"),
        }
    }
}

/// The link a NIC of the metadata needs the OS to create; the NIC's MAC is
/// the one the metadata lists for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NicLink {
    /// OCI bare metal: a macvlan with the NIC's MAC on `parent`, named
    /// `<parent>.<vlan>`, and on it the VLAN `vlan`, named `<parent>v<vlan>`
    /// (oci-utils' names), which is the NIC (it inherits the MAC).
    MacvlanVlan {
        /// The physical NIC.
        parent: Parent,
        /// The 802.1Q id (`vlanTag`).
        vlan: u16,
    },
    /// A VLAN `vlan` with the NIC's MAC on `parent`, named `<parent>.<vlan>`
    /// (GCE's VLAN NICs; no source asks for it yet).
    Vlan {
        /// The parent NIC.
        parent: Parent,
        /// The 802.1Q id.
        vlan: u16,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ifname_validation() {
        for ok in [
            "eth0",
            "ens5",
            "enp0s5",
            "enX0",
            "veth-a_1",
            "a.b",
            "x23456789012345",
        ] {
            assert!(IfName::try_new(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "eth0/x",
            "../etc",
            "eth0\0",
            "eth 0",
            "eth0;reboot",
            "$(id)",
            "x234567890123456",
            "eth0:1",
            "é",
        ] {
            assert!(IfName::try_new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn ifname_reads_sorts_and_serializes_as_its_string() {
        let names = ["eth", "eth0", "eth10", "eth2", "x23456789012345", "A.b"];
        let mut sorted: Vec<IfName> = names.iter().map(|n| IfName::try_new(n).unwrap()).collect();
        sorted.sort();
        let mut want = names.to_vec();
        want.sort_unstable();
        assert_eq!(sorted.iter().map(IfName::as_str).collect::<Vec<_>>(), want);
        let n = IfName::try_new("x23456789012345").unwrap();
        assert_eq!(n.to_string(), "x23456789012345");
        assert_eq!(format!("{n:?}"), "IfName(\"x23456789012345\")");
        assert_eq!(serde_json::to_string(&n).unwrap(), "\"x23456789012345\"");
        assert_eq!(
            serde_json::from_str::<IfName>("\"eth1\"").unwrap().as_str(),
            "eth1"
        );
        assert!(serde_json::from_str::<IfName>("\"eth 1\"").is_err());
    }

    #[test]
    fn mac_round_trip() {
        let m: MacAddr = "02:0A:00:00:00:ff".parse().unwrap();
        assert_eq!(m.to_string(), "02:0a:00:00:00:ff");
        for bad in [
            "",
            "02:00:00:00:00",
            "02:00:00:00:00:00:00",
            "2:00:00:00:00:00",
            "zz:00:00:00:00:00",
            "020000000000",
        ] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn all_zero_multicast_and_broadcast_macs_are_nobodys() {
        let m = |s: &str| s.parse::<MacAddr>().unwrap();
        for (mac, why) in [
            ("00:00:00:00:00:00", "all-zero"),
            ("ff:ff:ff:ff:ff:ff", "broadcast"),
            ("01:00:5e:00:00:01", "multicast"),
            ("33:33:00:00:00:01", "multicast"),
            ("03:00:17:02:2b:b1", "multicast"),
        ] {
            let got = m(mac).nobodys();
            assert!(got.is_some_and(|w| w.contains(why)), "{mac}: {got:?}");
        }
        // Unicast MACs, universally or locally administered, are a NIC's: OCI's,
        // OpenStack's (fa:16:3e), EC2's (02:..), a physical NIC's (90:e2:ba).
        for mac in [
            "00:00:17:02:2b:b1",
            "02:00:17:05:d1:db",
            "fa:16:3e:00:00:0a",
            "90:e2:ba:d4:f1:68",
            "00:00:00:00:00:01",
            "fe:ff:ff:ff:ff:ff",
        ] {
            assert_eq!(m(mac).nobodys(), None, "{mac}");
        }
    }

    #[test]
    fn reasons_map_to_actions() {
        assert_eq!(Reason::Renew.action(), Action::Apply);
        assert_eq!(Reason::Expire.action(), Action::Remove);
        assert_eq!(Reason::Preinit.action(), Action::Ignore);
    }

    #[test]
    fn displays_read_like_ip() {
        let r = Route {
            to: "10.0.1.0/24".parse().unwrap(),
            via: None,
            dev: IfName::try_new("eth1").unwrap(),
            scope: Some(Scope::Link),
            src: Some("10.0.1.20".parse().unwrap()),
            table: 10001,
        };
        assert_eq!(
            r.to_string(),
            "10.0.1.0/24 dev eth1 scope link src 10.0.1.20 table 10001"
        );
        let rule = Rule {
            from: "10.0.1.20/32".parse().unwrap(),
            to: None,
            table: 10001,
            priority: Some(10001),
        };
        assert_eq!(
            rule.to_string(),
            "from 10.0.1.20/32 lookup 10001 priority 10001"
        );
    }
}

// SPDX-License-Identifier: Apache-2.0
//! One abstraction over the five DHCP clients the end-to-end worlds run (dhclient,
//! systemd-networkd, NetworkManager, dhcpcd, busybox udhcpc): what differs per client
//! (how it is started in the instance, how its lease is renewed and taken away,
//! whether it has DHCPv6, which hook file and shim it runs, where the hook's lines
//! land, how a hostile option is proven delivered). The scenarios every client goes
//! through are written once, over [`Client`], in [`crate::scenarios`].
//!
//! Performs IO: starts, signals and stops client processes in a [`World`]'s
//! namespaces, reads their logs and lease files.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use leasehook_core::event::{Env, networkd, udhcpc};
use leasehook_core::model::Family;

use crate::clients::{hostile_options, hostile_private_option};
use crate::netns::{run, sibling_bin};
use crate::world::{World, WorldOptions, wait_until};

/// A DHCP client the end-to-end worlds run with leasehook's hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// ISC dhclient, its unmodified `dhclient-script` sourcing leasehook's exit hook.
    Dhclient,
    /// systemd-networkd, with networkd-dispatcher running leasehook's script.
    Networkd,
    /// NetworkManager (internal DHCP client), its dispatcher running leasehook's script.
    Nm,
    /// dhcpcd, its `dhcpcd-run-hooks` sourcing leasehook's hook.
    Dhcpcd,
    /// busybox udhcpc, running leasehook's script (`-s`).
    Udhcpc,
}

/// How the release scenario takes eth1's lease (or link) away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The client releases the lease (`dhclient -r`, `dhcpcd -k`, udhcpc's SIGUSR2).
    Release,
    /// The client stops (`dhclient -x`, `dhcpcd -x`, SIGTERM to `udhcpc -R`).
    Stop,
    /// `nmcli connection down`.
    ConnectionDown,
    /// The VPC side of eth1 goes down (networkd-dispatcher's `no-carrier`).
    CarrierLost,
    /// eth1 itself goes down (networkd-dispatcher's `off`).
    LinkDown,
}

/// What makes the client renew eth1's lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenewTrigger {
    /// The renewal time T1 the world's dnsmasq sends ([`RENEW_T1`] seconds).
    T1,
    /// A signal to the client (busybox udhcpc ignores T1 and renews at half the
    /// lease, a minute here; SIGUSR1 makes it renew at once).
    Signal(&'static str),
}

/// Whether the client runs leasehook's hook for a renewal that keeps the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenewHook {
    /// It does, and the hook logs this line for each renewal (once it is done).
    Runs(&'static str),
    /// It does not, for the reason `why`: the hook line `line` (what the hook would
    /// log for such an event) must not appear during the renewals.
    Silent {
        /// The line the hook would log.
        line: &'static str,
        /// Why the client runs no hook for a renewal.
        why: &'static str,
    },
}

/// Whether the client gets a DHCPv6 lease that leasehook's hook acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ipv6 {
    /// It does (in the world: eth1 by DHCPv6, IA_NA).
    Dhcpv6 {
        /// The hook's line for the DHCPv6 lease.
        bound_line: &'static str,
        /// The hook's line once the DHCPv6 lease is released.
        released_line: &'static str,
    },
    /// It does not, for the reason `why`, which [`Client::assert_no_ipv6_path`]
    /// checks against leasehook's own parser for the client's events.
    Absent {
        /// Why there is no IPv6 for this client.
        why: &'static str,
    },
}

/// The T1 (seconds) the renew scenario's dnsmasq sends.
pub const RENEW_T1: u32 = 3;

/// Every client, in the order of the table in `docs/clients.md`.
pub const ALL: [Client; 5] = [
    Client::Dhclient,
    Client::Networkd,
    Client::Nm,
    Client::Dhcpcd,
    Client::Udhcpc,
];

impl Client {
    /// The client's short name (world tags, markers, messages).
    pub fn name(self) -> &'static str {
        match self {
            Self::Dhclient => "dhclient",
            Self::Networkd => "networkd",
            Self::Nm => "nm",
            Self::Dhcpcd => "dhcpcd",
            Self::Udhcpc => "udhcpc",
        }
    }

    /// The one place that names the shim binary a client's hook file runs.
    pub fn shim(self) -> &'static str {
        match self {
            Self::Dhclient => "leasehook-dhclient",
            Self::Networkd => "leasehook-networkd",
            Self::Nm => "leasehook-nm",
            Self::Dhcpcd => "leasehook-dhcpcd",
            Self::Udhcpc => "leasehook-udhcpc",
        }
    }

    /// The shim built beside the tests.
    pub fn shim_path(self) -> PathBuf {
        sibling_bin(self.shim())
    }

    /// The hook file of `hooks/` the client runs (sources or executes).
    pub fn hook_file(self) -> &'static str {
        match self {
            Self::Dhclient => "hooks/dhclient/leasehook",
            Self::Networkd => "hooks/networkd-dispatcher/50-leasehook",
            Self::Nm => "hooks/networkmanager/90-leasehook",
            Self::Dhcpcd => "hooks/dhcpcd/90-leasehook",
            Self::Udhcpc => "hooks/udhcpc/leasehook.script",
        }
    }

    /// Starts the client on eth0 and eth1 (DHCPv4), eth0 first where the client is
    /// started per interface (IMDS is reached through eth0's default route).
    pub fn start(self, w: &mut World) {
        match self {
            Self::Dhclient => {
                w.bind("eth0", false);
                w.dhclient_start("eth1", false);
            }
            Self::Networkd => w.start_networkd(true),
            Self::Nm => w.start_nm(false),
            Self::Dhcpcd => {
                w.dhcpcd_start("eth0", false);
                self.wait_primary(w);
                w.dhcpcd_start("eth1", false);
            }
            Self::Udhcpc => {
                w.udhcpc_start("eth0");
                self.wait_primary(w);
                w.udhcpc_start("eth1");
            }
        }
    }

    fn wait_primary(self, w: &World) {
        assert!(
            w.wait_address("eth0", "10.98.0.10/24", 20),
            "eth0 got no lease from {}:\n{}",
            self.name(),
            w.client_log(self.name(), "eth0", false)
        );
    }

    /// The ways the release scenario takes eth1's lease away, one after the other.
    pub fn ends(self) -> &'static [End] {
        match self {
            Self::Dhclient | Self::Dhcpcd | Self::Udhcpc => &[End::Release, End::Stop],
            // NetworkManager keeps a connection's configuration when it stops
            // itself: taking the connection down is how its lease goes.
            Self::Nm => &[End::ConnectionDown],
            // networkd has no release command; its dispatcher reports the link.
            Self::Networkd => &[End::CarrierLost, End::LinkDown],
        }
    }

    /// Takes eth1's lease away as `end` says; returns once the client has acted.
    pub fn end(self, w: &mut World, end: End) {
        match (self, end) {
            (Self::Dhclient, End::Release | End::Stop) => {
                dhclient_lease_on_file(w, false);
                w.dhclient_end("eth1", false, end == End::Release);
            }
            (Self::Dhcpcd, End::Release | End::Stop) => {
                w.dhcpcd_end("eth1", false, end == End::Release);
            }
            // SIGUSR2: udhcpc releases the lease and runs its script with
            // `deconfig`, and keeps running.
            (Self::Udhcpc, End::Release) => w.udhcpc_release("eth1"),
            // SIGTERM: `udhcpc -R` releases on exit and runs `deconfig`.
            (Self::Udhcpc, End::Stop) => w.udhcpc_stop("eth1"),
            (Self::Nm, End::ConnectionDown) => {
                w.nmcli(&["connection", "down", "leasehook-eth1"]);
            }
            (Self::Networkd, End::CarrierLost) => {
                w.router.ip(&["link", "set", "gw1", "down"]);
            }
            (Self::Networkd, End::LinkDown) => {
                w.inst.ip(&["link", "set", "eth1", "down"]);
            }
            _ => panic!("{} cannot end a lease by {end:?}", self.name()),
        }
    }

    /// Brings eth1's lease back after `end`.
    pub fn again(self, w: &mut World, end: End) {
        match (self, end) {
            (Self::Dhclient, _) => w.dhclient_start("eth1", false),
            (Self::Dhcpcd, _) => w.dhcpcd_start("eth1", false),
            (Self::Udhcpc, _) => {
                // After a release the client still runs, released: replace it.
                if w.dhclients.contains_key("udhcpc-eth1") {
                    w.udhcpc_stop("eth1");
                }
                w.udhcpc_start("eth1");
            }
            (Self::Nm, _) => {
                w.nmcli(&["connection", "up", "leasehook-eth1"]);
            }
            (Self::Networkd, End::CarrierLost) => {
                w.router.ip(&["link", "set", "gw1", "up"]);
            }
            (Self::Networkd, _) => {
                w.inst.ip(&["link", "set", "eth1", "up"]);
            }
        }
    }

    /// The hook's line once `end` removed leasehook's objects for eth1.
    pub fn end_line(self, end: End) -> &'static str {
        match (self, end) {
            (Self::Dhclient, End::Release) => "eth1 RELEASE: removed",
            // `dhcpcd -k` runs RELEASE, then STOP.
            (Self::Dhclient | Self::Dhcpcd, _) => "eth1 STOP: removed",
            (Self::Udhcpc, _) => "eth1 deconfig: removed",
            (Self::Nm, _) => "eth1 down: removed",
            (Self::Networkd, End::CarrierLost) => "eth1 no-carrier: ",
            (Self::Networkd, _) => "eth1 off: ",
        }
    }

    /// Whether taking the lease away also takes the leased address off eth1 (the
    /// client's business, checked where the client does it, so the release
    /// scenario sees the client really acted). networkd's ends are about the
    /// link, not the lease: it may keep the address.
    pub fn drops_address(self) -> bool {
        !matches!(self, Self::Networkd)
    }

    /// The hook's line for eth1's DHCPv4 lease.
    pub fn bound_line(self) -> &'static str {
        match self {
            Self::Dhclient | Self::Dhcpcd => "eth1 BOUND: ",
            Self::Networkd => "eth1 routable: ",
            Self::Nm => "eth1 up: ",
            Self::Udhcpc => "eth1 bound: ",
        }
    }

    /// What makes the client renew.
    pub fn renew_trigger(self) -> RenewTrigger {
        match self {
            Self::Udhcpc => RenewTrigger::Signal("-USR1"),
            _ => RenewTrigger::T1,
        }
    }

    /// Whether the hook runs for a renewal that keeps the lease.
    pub fn renew_hook(self) -> RenewHook {
        match self {
            Self::Dhclient | Self::Dhcpcd => RenewHook::Runs("eth1 RENEW: 0 change(s)"),
            Self::Udhcpc => RenewHook::Runs("eth1 renew: 0 change(s)"),
            Self::Nm => RenewHook::Silent {
                line: "eth1 dhcp4-change: ",
                why: "NetworkManager 1.42 dispatches no dhcp4-change for a renewal that keeps the lease",
            },
            Self::Networkd => RenewHook::Silent {
                line: "eth1 routable: ",
                why: "networkd-dispatcher runs scripts on state changes, and a renewal leaves eth1 routable",
            },
        }
    }

    /// Sends the renewal trigger once (nothing for T1: dnsmasq's T1 does it).
    pub fn trigger_renew(self, w: &World) {
        if let RenewTrigger::Signal(sig) = self.renew_trigger() {
            w.signal_client(&format!("{}-eth1", self.name()), sig);
        }
    }

    /// Whether the client has DHCPv6 in leasehook.
    pub fn ipv6(self) -> Ipv6 {
        match self {
            Self::Dhclient | Self::Dhcpcd => Ipv6::Dhcpv6 {
                bound_line: "eth1 BOUND6: ",
                released_line: "eth1 RELEASE6: removed",
            },
            Self::Nm => Ipv6::Dhcpv6 {
                bound_line: "eth1 up: ",
                released_line: "eth1 down: removed",
            },
            Self::Networkd => Ipv6::Absent {
                why: "leasehook's networkd shim applies only the DHCPv4 lease file networkd writes (SPEC §6.2); IP6_ADDRS is never applied",
            },
            Self::Udhcpc => Ipv6::Absent {
                why: "busybox udhcpc speaks DHCPv4 only; udhcpc6 has other variables and leasehook ships no hook for it",
            },
        }
    }

    /// Starts eth0 by DHCPv4 and eth1 by DHCPv6 (NetworkManager: eth1 by both).
    pub fn start_v6(self, w: &mut World) {
        match self {
            Self::Dhclient => {
                w.bind("eth0", false);
                w.bind("eth1", true);
            }
            Self::Nm => w.start_nm(true),
            Self::Dhcpcd => {
                w.dhcpcd_start("eth0", false);
                self.wait_primary(w);
                w.dhcpcd_start("eth1", true);
            }
            Self::Networkd | Self::Udhcpc => {
                panic!("{} has no DHCPv6 in leasehook", self.name());
            }
        }
    }

    /// Releases eth1's DHCPv6 lease (NetworkManager: takes the connection down).
    pub fn end_v6(self, w: &mut World) {
        match self {
            Self::Dhclient => {
                dhclient_lease_on_file(w, true);
                w.dhclient_end("eth1", true, true);
            }
            Self::Dhcpcd => w.dhcpcd_end("eth1", true, true),
            Self::Nm => {
                w.nmcli(&["connection", "down", "leasehook-eth1"]);
            }
            Self::Networkd | Self::Udhcpc => {
                panic!("{} has no DHCPv6 in leasehook", self.name());
            }
        }
    }

    /// Checks, against leasehook's own parser of the client's events, that no
    /// event of this client can apply IPv6: the reason [`Ipv6::Absent`] gives.
    pub fn assert_no_ipv6_path(self) {
        let env = |pairs: &[(&str, &str)]| -> Env {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        match self {
            Self::Udhcpc => {
                // What udhcpc6 would export, beside a full DHCPv4 lease.
                let e = env(&[
                    ("interface", "eth1"),
                    ("ip", "10.98.1.20"),
                    ("subnet", "255.255.255.0"),
                    ("mask", "24"),
                    ("router", "10.98.1.1"),
                    ("ipv6", "fd00:98:1::20"),
                    ("ipv6prefix", "fd00:98:1::/64"),
                ]);
                for event in udhcpc::EVENTS {
                    let events = udhcpc::parse(event, &e)
                        .unwrap_or_else(|err| panic!("udhcpc {event}: {err}"));
                    for ev in events {
                        let families = (ev.family, ev.new.as_ref().map(|l| l.family));
                        assert!(
                            matches!(families, (Family::V4, None | Some(Family::V4))),
                            "udhcpc {event} gave an IPv6 event or lease: {ev:?}"
                        );
                    }
                }
                assert!(
                    udhcpc::parse("bound6", &e).is_err(),
                    "udhcpc6's events are not udhcpc's"
                );
            }
            Self::Networkd => {
                for state in ["routable", "degraded", "carrier", "off", "no-carrier"] {
                    let e = env(&[
                        ("IFACE", "eth1"),
                        ("STATE", state),
                        ("IP_ADDRS", "10.98.1.20"),
                        ("IP6_ADDRS", "fd00:98:1::20"),
                        ("AdministrativeState", "configured"),
                        ("OperationalState", state),
                    ]);
                    let ev = networkd::parse_dispatcher(&e)
                        .unwrap_or_else(|err| panic!("networkd {state}: {err}"));
                    match ev.dispatch() {
                        networkd::Dispatch::ApplyLease => {
                            let lease = networkd::parse_lease_file(
                                "ADDRESS=10.98.1.20\nNETMASK=255.255.255.0\nROUTER=10.98.1.1\n",
                            )
                            .unwrap_or_else(|err| panic!("lease file: {err}"));
                            let ev = ev.bound(lease);
                            let families = (ev.family, ev.new.as_ref().map(|l| l.family));
                            assert_eq!(families, (Family::V4, Some(Family::V4)), "{state}");
                        }
                        networkd::Dispatch::Remove(_) | networkd::Dispatch::Ignore => {}
                    }
                }
            }
            Self::Dhclient | Self::Dhcpcd | Self::Nm => {
                panic!("{} has DHCPv6 in leasehook", self.name());
            }
        }
    }

    /// The log holding the hook's lines for eth1 (DHCPv6: `v6`).
    pub fn hook_log(self, w: &World, v6: bool) -> String {
        match self {
            Self::Networkd => w.dispatcher_log(),
            // nm-dispatcher's log (which holds the shim's lines) alone.
            Self::Nm => {
                std::fs::read_to_string(w.dir.0.join("nm-dispatcher.log")).unwrap_or_default()
            }
            _ => self.log(w, v6),
        }
    }

    /// Whether [`Client::start_v6`] leases eth1 by DHCPv4 too (NetworkManager's
    /// connection does both).
    pub fn start_v6_leases_v4(self) -> bool {
        self == Self::Nm
    }

    /// The log holding the hook's lines for eth1 (DHCPv6: `v6`), and the client's.
    pub fn log(self, w: &World, v6: bool) -> String {
        match self {
            Self::Dhclient => w.log("eth1", v6),
            Self::Networkd => format!(
                "{}\n--- networkd\n{}",
                w.dispatcher_log(),
                std::fs::read_to_string(w.dir.0.join("networkd.log")).unwrap_or_default()
            ),
            Self::Nm => w.nm_log(),
            Self::Dhcpcd | Self::Udhcpc => w.client_log(self.name(), "eth1", v6),
        }
    }

    /// The world options of the hostile scenario: dnsmasq sends
    /// [`hostile_options`]; to networkd, which asks for no private option,
    /// option 224 is forced.
    pub fn hostile_world(self, marker: &Path) -> WorldOptions {
        let mut extra = hostile_options(marker);
        if self == Self::Networkd {
            for line in &mut extra {
                if line.starts_with("dhcp-option=224,") {
                    *line = line.replacen("dhcp-option=", "dhcp-option-force=", 1);
                }
            }
        }
        WorldOptions {
            dnsmasq_extra: extra,
            ..WorldOptions::default()
        }
    }

    /// What the hostile scenario sets up before the client starts: dhclient is told
    /// to ask for option 224 as a string, and a recorder sourced beside leasehook's
    /// exit hook keeps the environment both see (dhcpcd's and udhcpc's worlds always
    /// record it, NetworkManager's dispatcher logs it, networkd writes its lease
    /// file).
    pub fn prepare_hostile(self, w: &World) {
        if self != Self::Dhclient {
            return;
        }
        let dhcp = w.etc.join("dhcp");
        let conf = dhcp.join("dhclient.conf");
        let mut text = std::fs::read_to_string(&conf).unwrap_or_else(|e| panic!("{conf:?}: {e}"));
        text.push_str("\noption lh-hostile code 224 = string;\nalso request lh-hostile;\n");
        std::fs::write(&conf, text).unwrap_or_else(|e| panic!("{conf:?}: {e}"));
        let seen = w.dir.0.join("hook-env").display().to_string();
        let recorder = dhcp.join("dhclient-exit-hooks.d/00-record-env");
        std::fs::write(
            &recorder,
            format!("/usr/bin/env -0 >> '{seen}'\nprintf '\\0' >> '{seen}'\n"),
        )
        .unwrap_or_else(|e| panic!("{recorder:?}: {e}"));
    }

    /// Checks that the hostile options reached the client's hooks (so the
    /// scenario's "no shell ran one" is about values that arrived); the reason
    /// otherwise.
    pub fn hostile_delivered(self, w: &World, marker: &Path) -> Result<(), String> {
        let m = marker.display().to_string();
        let sent = hostile_private_option(marker);
        let hex = sent.bytes().fold(String::new(), |mut h, b| {
            let _ = write!(h, "{b:02x}");
            h
        });
        match self {
            Self::Dhclient => {
                let env = std::fs::read(w.dir.0.join("hook-env")).unwrap_or_default();
                let env = String::from_utf8_lossy(&env);
                // dhclient hands it on with its shell characters backslash-escaped;
                // leasehook's hook and shim get exactly this, and run none of it.
                let want = format!("new_lh_hostile=x;\\$(touch {m})\\|\\`touch {m}\\`\\&");
                if env.split('\0').any(|kv| kv == want) {
                    return Ok(());
                }
                Err(format!(
                    "option 224 did not reach the hook's environment as {want:?}: {:?}",
                    env.split('\0')
                        .filter(|kv| kv.starts_with("new_lh"))
                        .collect::<Vec<_>>()
                ))
            }
            Self::Dhcpcd => {
                // As dhcpcd hands it on: shell characters escaped.
                let env = w.recorded_hook_env("dhcpcd", "eth1");
                let got: Vec<&String> = env
                    .iter()
                    .filter(|kv| kv.starts_with("new_lh_hostile="))
                    .collect();
                if got.iter().any(|kv| kv.contains("touch") && kv.contains(&m)) {
                    return Ok(());
                }
                Err(format!(
                    "option 224 ({sent:?}) did not reach the hook's environment: {got:?}"
                ))
            }
            Self::Udhcpc => {
                // udhcpc hands on options it does not know as their bytes in hex.
                let env = w.recorded_hook_env("udhcpc", "eth1");
                if !env.iter().any(|kv| kv == &format!("opt224={hex}")) {
                    return Err(format!(
                        "option 224 ({sent:?}) did not reach the script's environment as opt224={hex}: {:?}",
                        env.iter()
                            .filter(|kv| kv.starts_with("opt"))
                            .collect::<Vec<_>>()
                    ));
                }
                // Debian's default script wrote the (escaped) domain into the
                // world's resolver file, not the machine's.
                let resolv = std::fs::read_to_string(w.resolv_conf()).unwrap_or_default();
                if resolv.contains("domain") {
                    Ok(())
                } else {
                    Err(format!(
                        "no domain in the world's resolver file: {resolv:?}"
                    ))
                }
            }
            Self::Nm => {
                // The dispatcher logs the environment it gives the scripts
                // (escaped by NetworkManager).
                let log = w.nm_log();
                if log.contains("'up' [eth1]: environment: DHCP4_HOST_NAME=\\096touch") {
                    Ok(())
                } else {
                    Err("host name option not in the dispatcher's environment".to_owned())
                }
            }
            Self::Networkd => {
                // networkd keeps private options in its lease file, in hex, where
                // leasehook's shim reads the lease.
                let leases = networkd_leases(w);
                if leases.contains(&format!("OPTION_224={hex}")) {
                    Ok(())
                } else {
                    Err(format!(
                        "option 224 not in networkd's lease files as OPTION_224={hex}: {leases}"
                    ))
                }
            }
        }
    }
}

/// Waits until dhclient has written eth1's lease to its lease file, which it does
/// once `dhclient-script` (and leasehook's hook) returned: `dhclient -r` releases
/// only a lease on file, and a loaded machine can install the rules first.
fn dhclient_lease_on_file(w: &World, v6: bool) {
    let (file, address) = if v6 {
        ("dhclient-eth1-6.leases", "fd00:98:1::20")
    } else {
        ("dhclient-eth1.leases", "10.98.1.20")
    };
    let path = w.dir.0.join(file);
    assert!(
        wait_until(Duration::from_secs(10), || std::fs::read_to_string(&path)
            .is_ok_and(|t| t.contains(address))),
        "dhclient wrote no lease for {address} to {path:?}:\n{}",
        w.log("eth1", v6)
    );
}

/// networkd's lease files, read in networkd's own mount namespace (its
/// `/run/systemd` is a private tmpfs).
fn networkd_leases(w: &World) -> String {
    let pid = w
        .inst_pids()
        .into_iter()
        .find(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm"))
                .is_ok_and(|c| c.trim() == "systemd-network")
        })
        .unwrap_or_else(|| panic!("systemd-networkd is not running"));
    let out = run(Command::new("nsenter").args([
        "-t",
        &pid,
        "-m",
        "sh",
        "-c",
        "cat /run/systemd/netif/leases/*",
    ]));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl World {
    /// Sends `signal` (`-USR1`, ...) to the client process this world started
    /// under `tag` (`udhcpc-eth1`).
    pub fn signal_client(&self, tag: &str, signal: &str) {
        let child = self
            .dhclients
            .get(tag)
            .unwrap_or_else(|| panic!("{tag} is not running"));
        run(Command::new("kill").arg(signal).arg(child.id().to_string()));
    }

    /// Stops udhcpc on `iface` (SIGTERM; with `-R` it releases and runs its script
    /// with `deconfig` first) and waits until it has exited.
    pub fn udhcpc_stop(&mut self, iface: &str) {
        let tag = format!("udhcpc-{iface}");
        let Some(mut child) = self.dhclients.remove(&tag) else {
            panic!("udhcpc is not running on {iface}");
        };
        let _ = Command::new("kill").arg(child.id().to_string()).status();
        let exited = wait_until(Duration::from_secs(10), || {
            child.try_wait().ok().flatten().is_some()
        });
        if !exited {
            let _ = child.kill();
            let _ = child.wait();
            panic!("udhcpc on {iface} did not stop on SIGTERM");
        }
    }

    /// The pids of the processes in the instance's network namespace.
    pub fn inst_pids(&self) -> Vec<String> {
        let out = Command::new("ip")
            .args(["netns", "pids", &self.inst.name])
            .output()
            .map(|o| o.stdout)
            .unwrap_or_default();
        String::from_utf8_lossy(&out)
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    }

    /// How many DHCPv4 ACKs dnsmasq sent for eth1's lease (the first bind and each
    /// renewal), whichever client asked.
    pub fn secondary_acks(&self) -> usize {
        std::fs::read_to_string(self.dir.0.join("dnsmasq.log"))
            .unwrap_or_default()
            .matches("DHCPACK(gw1) 10.98.1.20 ")
            .count()
    }
}

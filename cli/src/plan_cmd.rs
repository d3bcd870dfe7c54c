// SPDX-License-Identifier: Apache-2.0
//! `leasehook plan`: reads the files named on the command line, plans, renders.

use std::fs::File;
use std::io::Read as _;
use std::path::Path;

use anyhow::{Context as _, bail};
use leasehook_core::config::{Layers, Loaded};
use leasehook_core::event::{Env, dhclient, networkd, parse_env_dump};
use leasehook_core::kubernetes;
use leasehook_core::model::{IfName, InstanceNetwork, Link, MacAddr, Profile};
use leasehook_core::plan::{InterfaceLease, PlanConfig, PlanInput, plan};
use leasehook_core::source::provider::ProviderChoice;
use leasehook_core::{example, metadata, render};

use crate::cli::{PlanArgs, PlanFormat as Format, ProfileArg};

/// The most we read of any input file: real ones are a few kilobytes.
const MAX_INPUT: u64 = 4 * 1024 * 1024;

fn read_input(path: &Path) -> anyhow::Result<String> {
    let file = File::open(path).with_context(|| format!("failed to open {path:?}"))?;
    let mut text = String::new();
    file.take(MAX_INPUT + 1)
        .read_to_string(&mut text)
        .with_context(|| format!("failed to read {path:?} (is it UTF-8 text?)"))?;
    if text.len() as u64 > MAX_INPUT {
        bail!("{path:?} is larger than {MAX_INPUT} bytes");
    }
    Ok(text)
}

/// The configuration's sources with the planner flags on top (they win, and
/// `config show`-style origins name them).
pub(crate) fn with_flags(sources: Layers, args: &PlanArgs) -> Layers {
    let profile = args.profile.map(|p| match p {
        ProfileArg::Ec2NetUtils => Profile::Ec2NetUtils,
        ProfileArg::CloudInit => Profile::CloudInit,
    });
    sources
        .with_flag("profile", "--profile", profile.map(|p| p.to_string()))
        .with_flag(
            "table_base",
            "--table-base",
            args.table_base.map(|n| n.to_string()),
        )
        .with_flag(
            "priority_base",
            "--priority-base",
            args.priority_base.map(|n| n.to_string()),
        )
        .with_flag(
            "primary_rules",
            "--primary-rules",
            args.primary_rules.then(|| "true".to_owned()),
        )
        .with_flag(
            "secondary_addresses",
            "--no-secondary-addresses",
            args.no_secondary_addresses.then(|| "false".to_owned()),
        )
}

/// The planner's settings from the configuration `main` loaded (the flags of
/// [`with_flags`] included).
fn plan_config(loaded: &Loaded) -> anyhow::Result<PlanConfig> {
    let settings = &loaded.settings;
    let mut plan = settings.plan.clone();
    // `plan` reads no kernel: in auto, the CNI's configuration below the root decides.
    plan.kubernetes = match settings.kubernetes {
        kubernetes::Mode::On => true,
        kubernetes::Mode::Off => false,
        kubernetes::Mode::Auto => {
            let view = kubernetes::NodeView {
                cni_confs: kubernetes::observe::cni_confs(&settings.root)?,
                ..kubernetes::NodeView::default()
            };
            kubernetes::decide(kubernetes::Mode::Auto, &view).node
        }
    };
    Ok(plan)
}

pub(crate) fn run(args: &PlanArgs, loaded: &Loaded) -> anyhow::Result<String> {
    let cfg = plan_config(loaded)?;
    let (md, links, leases) = if args.example {
        let md = metadata::parse_tree(&example::metadata())
            .context("the built-in example is invalid")?;
        (md, example::links(), example::leases())
    } else {
        inputs(args, loaded.settings.provider)?
    };
    let plan = plan(&PlanInput::new(&md, &links, &leases), &cfg)?;
    Ok(match args.format {
        Format::Ip => render::ip(&plan),
        Format::Json => render::json(&plan) + "\n",
        Format::Netplan => {
            serde_saphyr::to_string(&render::netplan(&plan)).context("failed to write YAML")?
        }
        Format::Networkd => render::networkd(&plan)
            .into_iter()
            .map(|(name, body)| format!("# file: {name}\n{body}"))
            .collect::<Vec<_>>()
            .join("\n"),
    })
}

/// The plan's inputs from the files the flags name; `--metadata` is read as the
/// metadata of `--provider`, else of the configured `provider` (`auto`: EC2's tree).
fn inputs(
    args: &PlanArgs,
    configured: ProviderChoice,
) -> anyhow::Result<(InstanceNetwork, Vec<Link>, Vec<InterfaceLease>)> {
    let Some(md_path) = &args.metadata else {
        bail!("--metadata FILE is required (or use --example)")
    };
    let text = read_input(md_path)?;
    let choice = match args.provider.as_deref() {
        None => configured,
        Some(p) => p
            .parse::<ProviderChoice>()
            .map_err(|e| anyhow::anyhow!("--provider: {e}"))?,
    };
    // `auto` with no verdict to go by: the registry's first cloud, as the hooks.
    let provider = choice.resolve(None);
    let md = (provider.cloud().parse_saved)(&text)
        .with_context(|| format!("bad {provider} metadata in {md_path:?}"))?;
    let links = args
        .links
        .iter()
        .map(|l| parse_link(l))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let leases = args
        .leases
        .iter()
        .map(|l| read_lease(l))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok((md, links, leases))
}

/// `IFNAME=MAC[,ra=IPV6]`.
fn parse_link(arg: &str) -> anyhow::Result<Link> {
    let (name, rest) = arg
        .split_once('=')
        .with_context(|| format!("--link {arg:?}: expected IFNAME=MAC"))?;
    let name = IfName::try_new(name).map_err(|p| anyhow::anyhow!("--link {arg:?}: {p}"))?;
    let (mac, ra) =
        match rest.split_once(',') {
            Some((mac, opt)) => {
                let ra = opt.strip_prefix("ra=").with_context(|| {
                    format!("--link {arg:?}: unknown option {opt:?} (expected ra=IPV6)")
                })?;
                (
                    mac,
                    Some(ra.parse().with_context(|| {
                        format!("--link {arg:?}: {ra:?} is not an IPv6 address")
                    })?),
                )
            }
            None => (rest, None),
        };
    let mac: MacAddr = mac
        .parse()
        .map_err(|p| anyhow::anyhow!("--link {arg:?}: {p}"))?;
    Ok(Link {
        name,
        mac,
        ipv6_router: ra,
    })
}

/// `[IFNAME=]FILE`: a dhclient environment dump or a networkd lease file.
fn read_lease(arg: &str) -> anyhow::Result<InterfaceLease> {
    let (ifname, path) = match arg.split_once('=') {
        Some((n, p)) if IfName::try_new(n).is_ok() => (IfName::try_new(n).ok(), Path::new(p)),
        _ => (None, Path::new(arg)),
    };
    let text = read_input(path)?;
    let env: Env = parse_env_dump(&path.display().to_string(), &text)?;
    if env.contains_key("reason") {
        let event = dhclient::parse(&env)
            .with_context(|| format!("bad dhclient environment in {path:?}"))?;
        if let Some(n) = ifname.as_ref().filter(|n| **n != event.interface) {
            bail!(
                "--lease {arg:?}: the file is for interface {}, not {n}",
                event.interface
            );
        }
        let Some(lease) = event.new else {
            bail!(
                "--lease {arg:?}: reason {} carries no lease in force",
                event.reason
            );
        };
        Ok(InterfaceLease {
            interface: event.interface,
            lease,
        })
    } else if env.contains_key("ADDRESS") {
        let Some(interface) = ifname else {
            bail!(
                "--lease {arg:?}: a networkd lease file does not name its interface; write IFNAME={arg}"
            );
        };
        let lease = networkd::parse_lease_file(&text)
            .with_context(|| format!("bad networkd lease file {path:?}"))?;
        Ok(InterfaceLease { interface, lease })
    } else {
        bail!(
            "--lease {arg:?}: neither a dhclient environment (no `reason=`) nor a networkd lease file (no `ADDRESS=`)"
        )
    }
}

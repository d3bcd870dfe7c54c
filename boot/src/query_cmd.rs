// SPDX-License-Identifier: Apache-2.0
//! `leasehook query`: prints instance data (or part of it) as JSON. Root reads
//! `instance-data-sensitive.json`, anyone else the redacted `instance-data.json`.

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use clap::Args;
use leasehook_core::boot::nofollow::Problem;
use leasehook_core::boot::state::run_dir_if_present;
use leasehook_core::constants::{INSTANCE_DATA, INSTANCE_DATA_SENSITIVE};
use leasehook_core::query::{self, KeyPath};
use serde_json::Value;

/// The largest instance-data file read, in bytes.
const MAX_BYTES: u64 = 128 * 1024 * 1024;

/// Print instance data written by `leasehook init`, as JSON.
///
/// KEY is a dotted path (`v1.instance_id`, `ds.meta-data.mac`); a key holding dots
/// is written in double quotes, `ds.config."user.user-data"`, or in brackets with
/// or without quotes: `ds.config["user.user-data"]`, `ds[1.0].config`; `[0]` picks
/// a list item. Root reads
/// instance-data-sensitive.json; other users read instance-data.json, where
/// user-data, vendor-data and other sensitive values read "redacted for non-root
/// user".
///
/// Examples: `leasehook query v1.instance_id`, `leasehook query --list-keys ds`,
/// `leasehook query --all`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("what").required(true).args(["key", "all", "list_keys"]).multiple(true))]
pub(crate) struct QueryArgs {
    /// The key path to print.
    #[arg(value_name = "KEY")]
    key: Option<String>,

    /// Print everything.
    #[arg(long, conflicts_with_all = ["key", "list_keys"])]
    all: bool,

    /// Print the keys of KEY's mapping (of the top level without KEY), sorted.
    #[arg(long)]
    list_keys: bool,

    /// Read below DIR instead of /.
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
}

fn read(args: &QueryArgs) -> anyhow::Result<Value> {
    let root_user = rustix::process::geteuid().is_root();
    let Some(dir) = run_dir_if_present(&args.root)? else {
        bail!(
            "no instance data in {:?}: has `leasehook init` run this boot?",
            args.root.join("run/leasehook")
        );
    };
    let load = |name: &str| -> anyhow::Result<Option<Vec<u8>>> {
        match dir.read(name, MAX_BYTES) {
            Ok(b) => Ok(b),
            Err(Problem::Io(e)) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                bail!("no read permission on {}; try sudo", dir.shown(name))
            }
            Err(p) => bail!("{} {p}", dir.shown(name)),
        }
    };
    let bytes = if root_user {
        if let Some(b) = load(INSTANCE_DATA_SENSITIVE)? {
            Some(b)
        } else {
            log::warn!(
                "{} is missing; using the redacted {} instead",
                dir.shown(INSTANCE_DATA_SENSITIVE),
                dir.shown(INSTANCE_DATA)
            );
            load(INSTANCE_DATA)?
        }
    } else {
        load(INSTANCE_DATA)?
    };
    let Some(bytes) = bytes else {
        bail!(
            "no instance data at {}: has `leasehook init` run this boot?",
            dir.shown(INSTANCE_DATA)
        );
    };
    serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not JSON", dir.shown(INSTANCE_DATA)))
}

pub(crate) fn run(args: &QueryArgs) -> anyhow::Result<String> {
    // Parse the key before reading anything: a typo fails the same for everyone.
    let path: Option<KeyPath> = args.key.as_deref().map(str::parse).transpose()?;
    let doc = read(args)?;
    let value = match &path {
        Some(p) => query::lookup(&doc, p)?,
        None => &doc,
    };
    let out = if args.list_keys {
        let shown = path
            .as_ref()
            .map_or_else(|| "instance data".to_owned(), ToString::to_string);
        serde_json::to_string_pretty(&query::list_keys(value, &shown)?)?
    } else {
        serde_json::to_string_pretty(value)?
    };
    Ok(out + "\n")
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: `leasehook query` prints instance data (or part of it) as JSON,
//! YAML or raw text, or renders a template over it. Root reads
//! `instance-data-sensitive.json`, anyone else the redacted `instance-data.json`.

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use clap::Args;
use leasehook_core::boot::state::run_dir_if_present;
use leasehook_core::constants::{INSTANCE_DATA, INSTANCE_DATA_SENSITIVE};
use leasehook_core::fs::Problem;
use leasehook_core::query::{self, KeyPath};
use serde_json::Value;

use crate::template;

/// The largest instance-data file read, in bytes.
const MAX_BYTES: u64 = 128 * 1024 * 1024;

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
/// `--format` is `json` (the default), `yaml` or `raw` (strings unquoted, one key
/// a line for `--list-keys`), or else a Jinja template rendered over all the
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
    key: Option<String>,

    /// Print everything.
    #[arg(short, long, conflicts_with_all = ["key", "list_keys"])]
    all: bool,

    /// Print the keys of KEY's mapping (of the top level without KEY), sorted.
    #[arg(short, long)]
    list_keys: bool,

    /// `json`, `yaml`, `raw`, or a Jinja template over all the instance data.
    #[arg(short, long, value_name = "json|yaml|raw|TEMPLATE")]
    format: Option<String>,

    /// Read below DIR instead of /.
    #[arg(long, value_name = "DIR", env = "LEASEHOOK_ROOT", default_value = "/")]
    root: PathBuf,
}

/// How to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Output<'a> {
    Json,
    Yaml,
    Raw,
    Template(&'a str),
}

impl QueryArgs {
    fn output(&self) -> anyhow::Result<Output<'_>> {
        let out = match self.format.as_deref() {
            None | Some("json") => Output::Json,
            Some("yaml") => Output::Yaml,
            Some("raw") => Output::Raw,
            Some(t) => Output::Template(t),
        };
        let picked = self.key.is_some() || self.all || self.list_keys;
        match out {
            Output::Template(_) if picked => bail!(
                "a --format template renders all the instance data: give no KEY, --all or --list-keys (name keys inside the template)"
            ),
            Output::Json | Output::Yaml | Output::Raw if !picked => bail!(
                "--format {} needs KEY, --all or --list-keys",
                self.format.as_deref().unwrap_or("json")
            ),
            _ => Ok(out),
        }
    }
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

/// `value` as `out` says (not for templates).
fn print(value: &Value, out: Output<'_>) -> anyhow::Result<String> {
    let text = match (out, value) {
        (Output::Yaml, v) => return Ok(serde_saphyr::to_string(v)?),
        (Output::Raw, Value::String(s)) => s.clone(),
        (Output::Raw, v @ (Value::Bool(_) | Value::Number(_) | Value::Null)) => v.to_string(),
        (_, v) => serde_json::to_string_pretty(v)?,
    };
    Ok(text + "\n")
}

pub(crate) fn run(args: &QueryArgs) -> anyhow::Result<String> {
    // Check the arguments and parse the key before reading anything: a typo fails
    // the same for everyone.
    let out = args.output()?;
    let path: Option<KeyPath> = args.key.as_deref().map(str::parse).transpose()?;
    let doc = read(args)?;
    if let Output::Template(t) = out {
        return Ok(template::render(t, &doc)? + "\n");
    }
    let value = match &path {
        Some(p) => query::lookup(&doc, p)?,
        None => &doc,
    };
    if args.list_keys {
        let shown = path
            .as_ref()
            .map_or_else(|| "instance data".to_owned(), ToString::to_string);
        let keys = query::list_keys(value, &shown)?;
        if out == Output::Raw {
            return Ok(keys.join("\n") + "\n");
        }
        return print(&Value::from(keys), out);
    }
    print(value, out)
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: `leasehook query` prints instance data (or part of it) as JSON,
//! YAML or raw text, or renders a template over it. Root reads
//! `instance-data-sensitive.json`, anyone else the redacted `instance-data.json`.

use std::path::Path;

use anyhow::{Context as _, bail};
use leasehook_core::boot::state::run_dir_if_present;
use leasehook_core::constants::{INSTANCE_DATA, INSTANCE_DATA_SENSITIVE};
use leasehook_core::fs::FileProblem;
use leasehook_core::query::{self, KeyPath};
use serde_json::Value;

use crate::cli::QueryArgs;
use crate::template;

/// The largest instance-data file read, in bytes.
const MAX_BYTES: u64 = 128 * 1024 * 1024;

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

/// The instance data below `root`.
fn read(root: &Path) -> anyhow::Result<Value> {
    let root_user = rustix::process::geteuid().is_root();
    let Some(dir) = run_dir_if_present(root)? else {
        bail!(
            "no instance data in {:?}: has `leasehook init` run this boot?",
            root.join("run/leasehook")
        );
    };
    let load = |name: &str| -> anyhow::Result<Option<Vec<u8>>> {
        match dir.read(name, MAX_BYTES) {
            Ok(b) => Ok(b),
            Err(FileProblem::Io(e)) if e.kind() == std::io::ErrorKind::PermissionDenied => {
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

/// `query` of the instance data below `root`.
pub(crate) fn run(args: &QueryArgs, root: &Path) -> anyhow::Result<String> {
    // Check the arguments and parse the key before reading anything: a typo fails
    // the same for everyone.
    let out = args.output()?;
    let path: Option<KeyPath> = args.key.as_deref().map(str::parse).transpose()?;
    let doc = read(root)?;
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

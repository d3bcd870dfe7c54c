// SPDX-License-Identifier: Apache-2.0
//! Performs IO: `leasehook query` prints instance data (or part of it) as JSON,
//! YAML or raw text, or renders a template over it. Root reads
//! `instance-data-sensitive.json`, anyone else the redacted `instance-data.json`.

use std::fmt::Write as _;
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
    /// No `--format`: as cloud-init's `query` prints (cloud-init 25.1.4
    /// `cmd/query.py`): a string as is, anything else as its `json_dumps` (one
    /// space of indent, keys sorted, non-ASCII escaped), `--list-keys` one key a
    /// line. `ID=$(leasehook query v1.instance_id)` works as with cloud-init.
    CloudInit,
    Json,
    Yaml,
    Raw,
    Template(&'a str),
}

impl QueryArgs {
    fn output(&self) -> anyhow::Result<Output<'_>> {
        let out = match self.format.as_deref() {
            None => Output::CloudInit,
            Some("json") => Output::Json,
            Some("yaml") => Output::Yaml,
            Some("raw") => Output::Raw,
            Some(t) => Output::Template(t),
        };
        let picked = self.key.is_some() || self.all || self.list_keys;
        match out {
            Output::Template(_) if picked => bail!(
                "a --format template renders all the instance data: give no KEY, --all or --list-keys (name keys inside the template)"
            ),
            Output::CloudInit | Output::Json | Output::Yaml | Output::Raw if !picked => bail!(
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
        (Output::CloudInit | Output::Raw, Value::String(s)) => s.clone(),
        (Output::CloudInit, v) => python_json_dumps(v),
        (Output::Raw, v @ (Value::Bool(_) | Value::Number(_) | Value::Null)) => v.to_string(),
        (_, v) => serde_json::to_string_pretty(v)?,
    };
    Ok(text + "\n")
}

/// `value` as Python's `json.dumps(value, indent=1, sort_keys=True,
/// separators=(",", ": "))` writes it (cloud-init's `atomic_helper.json_dumps`):
/// one space of indent per level, keys sorted (a `serde_json` map is sorted by
/// code point, as Python sorts), and, Python's default `ensure_ascii`, every
/// character of a string outside printable ASCII escaped (`\n`, `\t`, ... or
/// `\uXXXX` in UTF-16 units, lower-case hex).
fn python_json_dumps(value: &Value) -> String {
    let mut out = String::new();
    dump(value, 0, &mut out);
    out
}

fn dump(value: &Value, depth: usize, out: &mut String) {
    let pad = |out: &mut String, depth: usize| {
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', depth));
    };
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => python_string(s, out),
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Object(map) if map.is_empty() => out.push_str("{}"),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                pad(out, depth + 1);
                dump(item, depth + 1, out);
            }
            pad(out, depth);
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                pad(out, depth + 1);
                python_string(k, out);
                out.push_str(": ");
                dump(v, depth + 1, out);
            }
            pad(out, depth);
            out.push('}');
        }
    }
}

/// A JSON string as Python's `json` writes it with `ensure_ascii`.
fn python_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    // Writing to a String cannot fail.
                    let _ = write!(out, "\\u{u:04x}");
                }
            }
        }
    }
    out.push('"');
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
        if matches!(out, Output::Raw | Output::CloudInit) {
            return Ok(keys.join("\n") + "\n");
        }
        return print(&Value::from(keys), out);
    }
    print(value, out)
}

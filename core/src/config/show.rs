// SPDX-License-Identifier: Apache-2.0
//! Pure: the merged settings as `leasehook config show` prints them — YAML that
//! could be a configuration file, each value followed by where it came from — or
//! as JSON.

use std::fmt::Write as _;

use serde_json::{Map, Value, json};

use super::{KEYS, Loaded, SettingOrigin};

/// Writes one `key: value  # origin` line.
fn line(
    out: &mut String,
    indent: &str,
    name: &str,
    value: &Value,
    origin: &SettingOrigin,
    help: &str,
) {
    // A JSON scalar or list of scalars is also a YAML flow value.
    let text = format!("{indent}{name}: {value}");
    let note = match origin {
        SettingOrigin::Default => format!("default; {help}"),
        o => o.to_string(),
    };
    let _ = writeln!(out, "{text:<48} # {note}");
}

/// The settings as YAML with the origin of every value in a comment.
pub fn show_yaml(loaded: &Loaded) -> String {
    let s = &loaded.settings;
    let mut out = String::from("# leasehook configuration, merged from: defaults");
    for f in &loaded.files {
        let _ = write!(out, ", {f}");
    }
    out.push_str(", LEASEHOOK_* environment, flags\n");
    let _ = writeln!(
        out,
        "# root: {} ({})",
        s.root.display(),
        loaded.origin("root")
    );
    // The section (`imds`, `azure`, ...) whose header was printed last.
    let mut section: Option<&str> = None;
    for key in KEYS.iter() {
        let (indent, name) = if let Some((parent, child)) = key.name.split_once('.') {
            if section != Some(parent) {
                let _ = writeln!(out, "{parent}:");
                section = Some(parent);
            }
            ("  ", child)
        } else {
            section = None;
            ("", key.name)
        };
        let help = key.help.split(" (").next().unwrap_or(key.help);
        line(
            &mut out,
            indent,
            name,
            &(key.show)(key, s),
            &loaded.origin(key.name),
            help,
        );
    }
    if s.fallback.per_datasource.is_empty() {
        out.push_str(
            "datasource: {}                                   # default; per-datasource settings\n",
        );
    } else {
        out.push_str("datasource:\n");
        for (kind, on) in &s.fallback.per_datasource {
            let key = loaded
                .origins
                .keys()
                .find(|k| {
                    k.strip_prefix("datasource.")
                        .and_then(|k| k.strip_suffix(".fallback"))
                        .and_then(super::datasource_kind)
                        == Some(*kind)
                })
                .cloned()
                .unwrap_or_default();
            let _ = writeln!(out, "  {}:", kind.name());
            line(
                &mut out,
                "    ",
                "fallback",
                &json!(on),
                &loaded.origin(&key),
                "",
            );
        }
    }
    out
}

/// The settings as JSON: `{"settings": {...}, "origins": {"key": "..."}, "files": [...]}`.
pub fn show_json(loaded: &Loaded) -> Value {
    let s = &loaded.settings;
    let mut settings = Map::new();
    let mut origins = Map::new();
    for key in KEYS.iter() {
        let value = (key.show)(key, s);
        match key.name.split_once('.') {
            Some((parent, child)) => {
                if let Value::Object(m) = settings
                    .entry(parent)
                    .or_insert_with(|| Value::Object(Map::new()))
                {
                    m.insert(child.to_owned(), value);
                }
            }
            None => {
                settings.insert(key.name.to_owned(), value);
            }
        }
        origins.insert(
            key.name.to_owned(),
            json!(loaded.origin(key.name).to_string()),
        );
    }
    let per: Map<String, Value> = s
        .fallback
        .per_datasource
        .iter()
        .map(|(k, on)| (k.name().to_owned(), json!({ "fallback": on })))
        .collect();
    settings.insert("datasource".to_owned(), Value::Object(per));
    settings.insert("root".to_owned(), json!(s.root));
    for (k, o) in &loaded.origins {
        origins
            .entry(k.clone())
            .or_insert_with(|| json!(o.to_string()));
    }
    json!({ "settings": settings, "origins": origins, "files": loaded.files })
}

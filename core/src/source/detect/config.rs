// SPDX-License-Identifier: Apache-2.0
//! Pure: the configuration the decision reads — `datasource_list`, each
//! datasource's scalar settings (which a cloud's check reads: `strict_id`) and
//! NoCloud's seed settings from cloud-init's YAML files,
//! ds-identify.cfg's `key: value` lines,
//! and the `cc: ... end_cc` form of the kernel command line.
//!
//! cloud-init's files are read as YAML 1.1 the way PyYAML reads them (serde-saphyr;
//! a repeated key keeps its last value), so a list written over several lines counts
//! (ds-identify only sees one-line `[...]` lists). They are foreign files: one that
//! does not parse is a warning and is skipped. leasehook's own `datasource_list`
//! comes from [`crate::config`], which is strict.

use serde_json::{Map, Value};

use super::ConfigText;
use crate::source::yaml::{scalar_text, yaml};

/// A setting and the file it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Setting<T> {
    pub(crate) value: T,
    pub(crate) path: String,
}

/// What the decision needs from cloud-init's configuration files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CloudConfig {
    /// `datasource_list`, from the last file that sets it.
    pub(super) datasource_list: Option<Setting<Vec<String>>>,
    /// `datasource: {<Name>: {<key>: <scalar>}}` for every datasource and key,
    /// each from the last file that sets it to a scalar (read them with
    /// [`CloudConfig::datasource_setting`]).
    scalars: Vec<((String, String), Setting<String>)>,
    /// `datasource: {NoCloud: {...}}`, the files' keys merged (a later file wins a
    /// key), with the file that set each key.
    pub(super) nocloud: Vec<(String, String)>,
    /// `datasource: {NoCloud: {...}}`'s values, merged the same way.
    pub(crate) nocloud_values: Map<String, Value>,
    /// Files that were skipped, and why.
    pub(crate) warnings: Vec<String>,
}

impl CloudConfig {
    /// Reads cloud-init's files in the order given (`cloud.cfg` first).
    pub(crate) fn parse(files: &[ConfigText]) -> Self {
        let mut c = Self::default();
        let mut nocloud: Map<String, Value> = Map::new();
        let mut nocloud_from: Vec<(String, String)> = Vec::new();
        for f in files {
            let doc = match yaml(&f.text) {
                Ok(Value::Object(m)) => m,
                Ok(Value::Null) => continue,
                Ok(_) => {
                    c.warnings
                        .push(format!("{}: not a YAML mapping; skipped", f.path));
                    continue;
                }
                Err(e) => {
                    c.warnings
                        .push(format!("{}: not valid YAML ({e}); skipped", f.path));
                    continue;
                }
            };
            if let Some(v) = doc.get("datasource_list") {
                match names(v) {
                    Some(list) => {
                        c.datasource_list = Some(Setting {
                            value: list,
                            path: f.path.clone(),
                        });
                    }
                    None => c.warnings.push(format!(
                        "{}: datasource_list is not a list of names; ignored",
                        f.path
                    )),
                }
            }
            let Some(Value::Object(ds)) = doc.get("datasource") else {
                continue;
            };
            for (name, settings) in ds {
                let Value::Object(settings) = settings else {
                    continue;
                };
                for (key, v) in settings {
                    // A mapping or a list is no scalar setting (NoCloud's
                    // `meta-data` may be one); it leaves an earlier value as is.
                    let Some(value) = scalar_text(v) else {
                        continue;
                    };
                    let at = (name.clone(), key.clone());
                    c.scalars.retain(|(k, _)| *k != at);
                    c.scalars.push((
                        at,
                        Setting {
                            value,
                            path: f.path.clone(),
                        },
                    ));
                }
            }
            if let Some(Value::Object(nc)) = ds.get("NoCloud") {
                for (k, v) in nc {
                    nocloud.insert(k.clone(), v.clone());
                    nocloud_from.retain(|(key, _)| key != k);
                    nocloud_from.push((k.clone(), f.path.clone()));
                }
            }
        }
        c.nocloud = nocloud_from;
        c.nocloud_values = nocloud;
        c
    }

    /// `datasource: {<datasource>: {<key>: ...}}`, a scalar, from the last file
    /// that sets it.
    pub(crate) fn datasource_setting(
        &self,
        datasource: &str,
        key: &str,
    ) -> Option<&Setting<String>> {
        self.scalars
            .iter()
            .find(|((d, k), _)| d == datasource && k == key)
            .map(|(_, s)| s)
    }

    /// Why cloud-init's configuration makes NoCloud a seed (ds-identify: `seedfrom`,
    /// or both `user-data` and `meta-data`, under `datasource: NoCloud:`).
    pub(super) fn nocloud_configured(&self) -> Option<String> {
        let from = |key: &str| {
            self.nocloud
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, p)| p.clone())
        };
        if let Some(p) = from("seedfrom") {
            return Some(format!("datasource.NoCloud.seedfrom is set in {p}"));
        }
        match (from("user-data"), from("meta-data")) {
            (Some(u), Some(m)) if u == m => Some(format!(
                "datasource.NoCloud holds user-data and meta-data in {u}"
            )),
            (Some(u), Some(m)) => Some(format!(
                "datasource.NoCloud holds user-data ({u}) and meta-data ({m})"
            )),
            _ => None,
        }
    }
}

/// A YAML list of scalars as names.
fn names(v: &Value) -> Option<Vec<String>> {
    v.as_array()?.iter().map(scalar_text).collect()
}

/// The value of `key` in a ds-identify.cfg-style text (`key: value` lines, `#`
/// comments, values unquoted), as ds-identify's `_read_config` reads it: the last
/// line setting it wins.
pub(crate) fn ds_identify_value(text: &str, key: &str) -> Option<String> {
    let mut found = None;
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default();
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        if k.trim() == key {
            found = Some(unquote(v.trim()).to_owned());
        }
    }
    found
}

/// `datasource_list` from the kernel command line's `cc:` form
/// (`cc: datasource_list: [ NoCloud, None ] end_cc`), cut out as ds-identify does:
/// after the last `datasource_list`, up to the next `]`, after the last `[` before
/// it. `None` when absent or empty.
pub(super) fn cmdline_datasource_list(cmdline: &str) -> Option<Vec<String>> {
    const KEY: &str = "datasource_list";
    let cc = cmdline.find("cc:")?;
    let after_cc = cmdline.get(cc..)?;
    let start = after_cc.rfind(KEY)?;
    let t = after_cc.get(start + KEY.len()..)?;
    let t = t.split(']').next().unwrap_or_default();
    let t = t.rsplit('[').next().unwrap_or_default();
    let list = yaml_array_words(t);
    (!list.is_empty()).then_some(list)
}

/// ds-identify's `parse_yaml_array` followed by its word split: items separated by
/// commas, each trimmed and unquoted, then split at blanks.
fn yaml_array_words(s: &str) -> Vec<String> {
    let s = s.strip_prefix('[').unwrap_or(s);
    let s = s.strip_suffix(']').unwrap_or(s);
    s.split(',')
        .map(|item| unquote(item.trim()))
        .flat_map(str::split_whitespace)
        .map(str::to_owned)
        .collect()
}

/// Removes one pair of matching quotes around a value.
fn unquote(v: &str) -> &str {
    for q in ['"', '\''] {
        if v.len() >= 2
            && let Some(inner) = v.strip_prefix(q).and_then(|r| r.strip_suffix(q))
        {
            return inner;
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, text: &str) -> ConfigText {
        ConfigText {
            path: path.into(),
            text: text.into(),
        }
    }

    #[test]
    fn cloud_config_last_file_wins_and_bad_files_are_skipped() {
        let c = CloudConfig::parse(&[
            file(
                "/etc/cloud/cloud.cfg",
                "datasource_list: [ NoCloud, None ]\nusers: [default]\n",
            ),
            file(
                "/etc/cloud/cloud.cfg.d/10.cfg",
                "datasource_list:\n  - LXD\n  - 'Ec2'\n  - None\n",
            ),
            file(
                "/etc/cloud/cloud.cfg.d/20.cfg",
                "datasource_list: [ broken\n",
            ),
            file("/etc/cloud/cloud.cfg.d/30.cfg", "- a list\n"),
            file("/etc/cloud/cloud.cfg.d/40.cfg", "datasource_list: Ec2\n"),
            file(
                "/etc/cloud/cloud.cfg.d/50.cfg",
                "datasource:\n  Ec2:\n    strict_id: false\n  NoCloud:\n    seedfrom: file:///srv/seed/\n",
            ),
            file("/etc/cloud/cloud.cfg.d/60.cfg", "# only a comment\n"),
        ]);
        assert_eq!(
            c.datasource_list,
            Some(Setting {
                value: vec!["LXD".into(), "Ec2".into(), "None".into()],
                path: "/etc/cloud/cloud.cfg.d/10.cfg".into()
            })
        );
        assert_eq!(
            c.datasource_setting("Ec2", "strict_id")
                .map(|s| s.value.as_str()),
            Some("false")
        );
        assert_eq!(
            c.nocloud_configured().as_deref(),
            Some("datasource.NoCloud.seedfrom is set in /etc/cloud/cloud.cfg.d/50.cfg")
        );
        assert_eq!(c.warnings.len(), 3, "{:?}", c.warnings);
        assert!(c.warnings[0].starts_with("/etc/cloud/cloud.cfg.d/20.cfg: not valid YAML"));
        assert!(c.warnings[1].contains("30.cfg: not a YAML mapping"));
        assert!(c.warnings[2].contains("40.cfg: datasource_list is not a list"));
    }

    #[test]
    fn nocloud_needs_seedfrom_or_both_user_and_meta_data() {
        let only_user = CloudConfig::parse(&[file(
            "a",
            "datasource:\n  NoCloud:\n    user-data: |\n      #cloud-config\n",
        )]);
        assert_eq!(only_user.nocloud_configured(), None);
        let both = CloudConfig::parse(&[
            file("a", "datasource:\n  NoCloud:\n    user-data: x\n"),
            file(
                "b",
                "datasource:\n  NoCloud:\n    meta-data: {instance-id: i}\n",
            ),
        ]);
        assert_eq!(
            both.nocloud_configured().as_deref(),
            Some("datasource.NoCloud holds user-data (a) and meta-data (b)")
        );
    }

    #[test]
    fn ds_identify_cfg_lines() {
        let text = "policy: search,found=all # comment\n datasource : 'Ec2'\nnoise\ndatasource: \"LXD\"\nci.datasource.ec2.strict_id: warn\n";
        assert_eq!(
            ds_identify_value(text, "datasource").as_deref(),
            Some("LXD")
        );
        assert_eq!(
            ds_identify_value(text, "ci.datasource.ec2.strict_id").as_deref(),
            Some("warn")
        );
        assert_eq!(ds_identify_value(text, "missing"), None);
        assert_eq!(ds_identify_value("# datasource: Ec2\n", "datasource"), None);
    }

    #[test]
    fn kernel_command_line_cc_lists() {
        let cases = [
            (
                "ro cc: datasource_list: [ NoCloud, None ] end_cc quiet",
                Some(vec!["NoCloud", "None"]),
            ),
            ("cc:{'datasource_list': ['LXD']} end_cc", Some(vec!["LXD"])),
            (
                "cc: datasource_list: [\"Ec2\", 'None'] end_cc",
                Some(vec!["Ec2", "None"]),
            ),
            ("cc: datasource_list: [] end_cc", None),
            ("datasource_list: [Ec2] without the cc marker", None),
            ("cc: something else end_cc", None),
        ];
        for (line, want) in cases {
            let want = want.map(|v| v.into_iter().map(str::to_owned).collect::<Vec<_>>());
            assert_eq!(cmdline_datasource_list(line), want, "{line}");
        }
    }
}

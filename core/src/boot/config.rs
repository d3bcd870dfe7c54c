// SPDX-License-Identifier: Apache-2.0
//! Pure: what the boot stage reads from leasehook's configuration file (SPEC §7),
//! until the configuration system proper arrives: the same file `detect` reads
//! `datasource_list` from, read as strictly.
//!
//! ```yaml
//! fallback: true                # use the cached datasource when none answers
//! datasource:
//!   Ec2: {fallback: false}      # ... but not for this one (a source's own wins)
//! imds:
//!   endpoints: [http://169.254.169.254, "http://[fd00:ec2::254]"]
//!   budget_s: 30                # how long EC2 requests are retried, in all
//! imdsv1_fallback: false
//! ```
//!
//! Other keys belong to other parts of leasehook and are left alone here. A value
//! of the wrong type, a repeated key or a datasource name leasehook does not know
//! is an error naming the file (and, where the parser knows it, the line).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::decide::FallbackPolicy;
use crate::error::{Error, Result};
use crate::source::SourceKind;
use crate::source::detect::ConfigText;

/// The boot stage's settings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BootConfig {
    /// `fallback` and `datasource.<Name>.fallback`.
    pub fallback: FallbackPolicy,
    /// `imds.endpoints` (`None`: the defaults).
    pub imds_endpoints: Option<Vec<String>>,
    /// `imds.budget_s` (`None`: the default, 30 s).
    pub imds_budget: Option<Duration>,
    /// `imdsv1_fallback`.
    pub imdsv1_fallback: bool,
}

#[derive(Debug, Default, Deserialize)]
struct File {
    #[serde(default)]
    fallback: Option<bool>,
    #[serde(default)]
    datasource: Option<BTreeMap<String, PerSource>>,
    #[serde(default)]
    imds: Option<Imds>,
    #[serde(default)]
    imdsv1_fallback: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
struct PerSource {
    #[serde(default)]
    fallback: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
struct Imds {
    #[serde(default)]
    endpoints: Option<Vec<String>>,
    #[serde(default)]
    budget_s: Option<f64>,
}

/// Reads the boot stage's settings from leasehook's configuration file.
pub fn parse(file: &ConfigText) -> Result<BootConfig> {
    let bad = |message: String| Error::Syntax {
        what: format!("leasehook configuration {}", file.path),
        message,
    };
    let options = serde_saphyr::options! {
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::Error,
        with_snippet: false,
    };
    let f: Option<File> = serde_saphyr::from_str_with_options(&file.text, options).map_err(|e| {
        bad(format!(
            "{e} (fallback and imdsv1_fallback are true or false; datasource is a mapping of datasource names; imds.endpoints a list of URLs; imds.budget_s seconds)"
        ))
    })?;
    let f = f.unwrap_or_default();
    let mut per_datasource = BTreeMap::new();
    for (name, settings) in f.datasource.unwrap_or_default() {
        let Some(kind) = SourceKind::from_name(&name).filter(|k| *k != SourceKind::None) else {
            return Err(bad(format!(
                "datasource.{name}: not a datasource leasehook implements (Ec2, LXD, NoCloud)"
            )));
        };
        if let Some(on) = settings.fallback {
            per_datasource.insert(kind, on);
        }
    }
    let imds = f.imds.unwrap_or_default();
    if let Some(list) = &imds.endpoints
        && list.is_empty()
    {
        return Err(bad("imds.endpoints is empty".to_owned()));
    }
    let budget = match imds.budget_s {
        None => None,
        Some(s) if s.is_finite() && (0.0..=3600.0).contains(&s) => Some(Duration::from_secs_f64(s)),
        Some(s) => {
            return Err(bad(format!(
                "imds.budget_s is {s}: expected seconds between 0 and 3600"
            )));
        }
    };
    Ok(BootConfig {
        fallback: FallbackPolicy {
            global: f.fallback,
            per_datasource,
        },
        imds_endpoints: imds.endpoints,
        imds_budget: budget,
        imdsv1_fallback: f.imdsv1_fallback.unwrap_or(false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> ConfigText {
        ConfigText {
            path: "/etc/leasehook/config.yaml".into(),
            text: text.into(),
        }
    }

    #[test]
    fn reads_the_boot_keys_and_leaves_the_rest() {
        let c = parse(&file(
            "datasource_list: [Ec2, None]\nprofile: cloud-init\nfallback: false\ndatasource:\n  lxd: {fallback: true}\n  Ec2:\n    fallback: false\n    strict_id: true\n  NoCloud: {}\nimds:\n  endpoints: [\"http://127.0.0.1:8080\"]\n  budget_s: 2.5\nimdsv1_fallback: yes\n",
        ))
        .unwrap();
        assert_eq!(c.fallback.global, Some(false));
        assert_eq!(
            c.fallback.per_datasource,
            [(SourceKind::Lxd, true), (SourceKind::Ec2, false)].into()
        );
        assert_eq!(
            c.imds_endpoints.as_deref(),
            Some(&["http://127.0.0.1:8080".to_owned()][..])
        );
        assert_eq!(c.imds_budget, Some(Duration::from_millis(2500)));
        assert!(c.imdsv1_fallback);
        assert_eq!(parse(&file("")).unwrap(), BootConfig::default());
        assert_eq!(parse(&file("# nothing\n")).unwrap(), BootConfig::default());
    }

    #[test]
    fn mistakes_name_the_file_and_key() {
        let cases = [
            ("fallback: maybe\n", "line 1"),
            ("fallback: true\nfallback: false\n", "line 2"),
            ("datasource: [Ec2]\n", "line 1"),
            (
                "datasource:\n  Azure: {fallback: false}\n",
                "datasource.Azure: not a datasource",
            ),
            (
                "datasource:\n  None: {fallback: false}\n",
                "datasource.None",
            ),
            ("imds:\n  endpoints: http://x\n", "line 2"),
            ("imds:\n  endpoints: []\n", "imds.endpoints is empty"),
            ("imds:\n  budget_s: -1\n", "imds.budget_s is -1"),
            ("- a\n", "line 1"),
        ];
        for (text, want) in cases {
            let e = parse(&file(text)).unwrap_err().to_string();
            assert!(
                e.starts_with("leasehook configuration /etc/leasehook/config.yaml: ")
                    && e.contains(want),
                "{text:?}: {e}"
            );
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Pure: the boot stage's part of leasehook's [configuration](crate::config):
//! `fallback`, `datasource.<Name>.fallback`, `imds.endpoints`, `imds.budget_s`,
//! `imdsv1_fallback` and each cloud's `<name>.endpoint`. (`datasource_list` reaches the boot stage through detection.)

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::FallbackPolicy;
use crate::config::{Loaded, Settings};

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
    /// Each cloud's `<name>.endpoint` that is set, by the cloud's name.
    pub cloud_endpoints: BTreeMap<String, String>,
}

impl BootConfig {
    /// The boot stage's part of merged settings; `imds.budget_s` counts only when
    /// something set it (the default budget is the EC2 client's own).
    pub fn from_config(loaded: &Loaded) -> Self {
        let s: &Settings = &loaded.settings;
        Self {
            fallback: s.fallback.clone(),
            imds_endpoints: s.imds.endpoints.clone(),
            imds_budget: loaded
                .origins
                .contains_key("imds.budget_s")
                .then_some(s.imds.budget),
            imdsv1_fallback: s.imdsv1_fallback,
            cloud_endpoints: s.cloud_endpoints.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Layers, SettingOrigin, merge, parse_file};
    use crate::source::SourceKind;

    #[test]
    fn takes_the_boot_keys() {
        let layer = parse_file(
            "/etc/leasehook/config.yaml",
            "datasource_list: [Ec2, None]\nprofile: cloud-init\nfallback: false\ndatasource:\n  lxd: {fallback: true}\n  Ec2:\n    fallback: false\n  NoCloud: {}\nimds:\n  endpoints: [\"http://127.0.0.1:8080\"]\n  budget_s: 2.5\nimdsv1_fallback: yes\n",
        )
        .unwrap();
        let loaded = merge(
            std::path::Path::new("/"),
            SettingOrigin::Default,
            &[layer],
            &Layers::default(),
        )
        .unwrap();
        let c = BootConfig::from_config(&loaded);
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
        assert_eq!(
            BootConfig::from_config(&Loaded::default()),
            BootConfig::default()
        );
    }
}

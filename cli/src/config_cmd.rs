// SPDX-License-Identifier: Apache-2.0
//! `leasehook config`: shows the merged configuration and where each value came from.

use anyhow::Context as _;
use leasehook_core::config::{self, Loaded};

use crate::cli::{Action, ConfigArgs, ShowFormat as Format};

/// `config show` of the configuration `main` loaded (its layers and origins).
pub(crate) fn run(args: &ConfigArgs, loaded: &Loaded) -> anyhow::Result<String> {
    match &args.action {
        Action::Show(a) => {
            let (mode, root) = (loaded.settings.kubernetes, &loaded.settings.root);
            Ok(match a.format {
                Format::Yaml => {
                    config::show_yaml(loaded) + &crate::kube_status::text(mode, root, "# ")
                }
                Format::Json => {
                    let mut v = config::show_json(loaded);
                    if let Some(obj) = v.as_object_mut() {
                        obj.insert(
                            "kubernetes".to_owned(),
                            crate::kube_status::json(mode, root),
                        );
                    }
                    serde_json::to_string_pretty(&v).context("failed to write JSON")? + "\n"
                }
            })
        }
    }
}

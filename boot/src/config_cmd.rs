// SPDX-License-Identifier: Apache-2.0
//! `leasehook config`: shows the merged configuration and where each value came from.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};
use leasehook_core::config::{self, Layers};

/// Show or check leasehook's configuration.
///
/// Settings come from ROOT/etc/leasehook/config.yaml, then ROOT/etc/leasehook/config.d/*.yaml
/// in lexical order, then LEASEHOOK_* environment variables (a later one wins a
/// key). An unknown key or a bad value is an error naming the file, the line and the
/// key. Every key is described in docs/configuration.md.
#[derive(Debug, Args)]
pub(crate) struct ConfigArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, Subcommand)]
enum Action {
    /// Print the merged settings, each with the file and line (or variable) it came
    /// from; keys nobody set show their default. The YAML output is itself a valid
    /// configuration file. Exit status 1 when a file or variable is bad.
    Show(ShowArgs),
}

#[derive(Debug, Args)]
struct ShowArgs {
    /// Read the configuration below DIR [default: the `LEASEHOOK_ROOT` variable, else /].
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,

    /// Read this file instead of ROOT/etc/leasehook/config.yaml and config.d
    /// (/dev/null: none).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Yaml)]
    format: Format,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    /// YAML with the origin of each value in a comment.
    Yaml,
    /// `{"settings": ..., "origins": {"key": "..."}, "files": [...]}`.
    Json,
}

pub(crate) fn run(args: &ConfigArgs) -> anyhow::Result<String> {
    match &args.action {
        Action::Show(a) => {
            let sources = Layers::from_env(leasehook_core::hook::process_env())
                .with_root(a.root.clone())
                .with_file(a.config.clone());
            let loaded = config::load(&sources)?;
            let (mode, root) = (loaded.settings.kubernetes, &loaded.settings.root);
            Ok(match a.format {
                Format::Yaml => {
                    config::show_yaml(&loaded) + &crate::kube_status::text(mode, root, "# ")
                }
                Format::Json => {
                    let mut v = config::show_json(&loaded);
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

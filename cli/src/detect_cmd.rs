// SPDX-License-Identifier: Apache-2.0
//! `leasehook detect`: decides, without network, which datasources the instance has
//! (as cloud-init's ds-identify does) and prints the decision as JSON.

use std::path::Path;

use anyhow::{Context as _, bail};
use leasehook_core::config::Loaded;
use leasehook_core::source::detect::{ReadOptions, detect};

use crate::cli::DetectArgs;

/// Detection below `root` (every path, the LXD socket and cloud-init's disabled
/// marker too), with the `datasource_list` of the configuration `main` loaded.
pub(crate) fn run(args: &DetectArgs, root: &Path, loaded: &Loaded) -> anyhow::Result<String> {
    if !root.is_dir() {
        bail!("--root {root:?} is not a folder");
    }
    let mut options = ReadOptions::new(root).with_datasource_list(loaded.datasource_list());
    if let Some(virt) = &args.virt {
        crate::init_cmd::check_virt(virt)?;
        options = options.with_virt(virt);
    }
    let detection = detect(&options).context("failed to detect the datasource")?;
    let json = serde_json::to_string_pretty(&detection).context("failed to write JSON")?;
    Ok(json + "\n")
}

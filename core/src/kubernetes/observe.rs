// SPDX-License-Identifier: Apache-2.0
//! Performs IO: gathers the [`NodeView`] the Kubernetes decision reads — the file
//! names in `<root>/etc/cni/net.d/` (names only: no CNI file is opened) and, over
//! netlink, the links and the rules and routes other tools made. Read-only.

use std::path::Path;

use super::{Decision, Mode, NodeView, decide};
use crate::apply::Applier as _;
use crate::apply::netlink::NetlinkApplier;
use crate::error::{Error, Result};

/// Where a CNI writes its configuration, below the root.
pub const CNI_CONF_DIR: &str = "etc/cni/net.d";

/// At most this many CNI configuration names are kept (real nodes hold one or
/// two). Every entry of the folder is looked at, however many there are: only
/// the names a known CNI owns are kept, so memory stays bounded without a cap on
/// the entries that could hide the CNI's file (issue 30, item 9). Past this many
/// kept names the node is a Kubernetes node already; the rest are not listed.
const MAX_CONFS: usize = 256;

/// The names in `<root>/etc/cni/net.d/` that a known CNI owns (the AWS VPC CNI's
/// `10-aws.conflist`, Cilium's `05-cilium.conflist`; see [`super::Cni`]), sorted:
/// none when the folder does not exist or is not a folder (a file, a FIFO: no CNI
/// wrote it); a folder that cannot be read, or an entry that cannot be read, is an
/// error (the hook then changes nothing rather than guess). Other names (a
/// bridge or loopback plugin's, backups) are counted, never kept.
pub fn cni_confs(root: &Path) -> Result<Vec<String>> {
    let dir = root.join(CNI_CONF_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        // ENOTDIR
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.raw_os_error() == Some(libc::ENOTDIR) =>
        {
            return Ok(Vec::new());
        }
        Err(e) => return Err(Error::io(&dir, &e)),
    };
    let mut names: Vec<String> = Vec::new();
    let (mut seen, mut dropped) = (0_usize, 0_usize);
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(&dir, &e))?;
        seen += 1;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !super::Cni::ALL.iter().any(|c| c.owns_conf(&name)) {
            continue;
        }
        if names.len() < MAX_CONFS {
            names.push(name);
        } else {
            dropped += 1;
        }
    }
    if dropped > 0 {
        log::warn!(
            "{}: {dropped} more CNI configuration file(s) than the {MAX_CONFS} listed ({seen} entries); a Kubernetes node either way",
            dir.display()
        );
    } else if seen > MAX_CONFS {
        log::debug!("{}: {seen} entries, {} a CNI's", dir.display(), names.len());
    }
    names.sort();
    Ok(names)
}

/// Everything [`decide`] and [`super::cni_role`] read, from the files below `root`
/// and the kernel of the current network namespace. The routes are dumped only
/// when `mode` is `on` or the files and rules already make this a Kubernetes node:
/// a plain instance pays for one rule dump, not a dump of every table.
pub fn node_view(mode: Mode, root: &Path, applier: &mut NetlinkApplier) -> Result<NodeView> {
    let mut view = NodeView {
        cni_confs: cni_confs(root)?,
        rules: applier.foreign_rules()?,
        ..NodeView::default()
    };
    if !decide(mode, &view).node {
        return Ok(view);
    }
    let kernel_links = applier.links()?;
    let index = kernel_links
        .iter()
        .map(|l| (l.name.clone(), l.index))
        .collect();
    view.routes = applier.foreign_routes(&index)?;
    view.links = kernel_links.into_iter().map(|l| l.name).collect();
    Ok(view)
}

/// Detects: `off` reads nothing; otherwise the node's view is gathered and decided on.
pub fn detect(
    mode: Mode,
    root: &Path,
    applier: &mut NetlinkApplier,
) -> Result<(Decision, NodeView)> {
    let view = if mode == Mode::Off {
        NodeView::default()
    } else {
        node_view(mode, root, applier)?
    };
    Ok((decide(mode, &view), view))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_read_and_odd_folders_are_no_configuration() {
        let root = std::env::temp_dir().join(format!("leasehook-cni-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(cni_confs(&root).unwrap(), Vec::<String>::new());
        std::fs::create_dir_all(root.join("etc/cni")).unwrap();
        // A file where the folder should be: no CNI wrote it.
        std::fs::write(root.join(CNI_CONF_DIR), "x").unwrap();
        assert_eq!(cni_confs(&root).unwrap(), Vec::<String>::new());
        std::fs::remove_file(root.join(CNI_CONF_DIR)).unwrap();
        std::fs::create_dir_all(root.join(CNI_CONF_DIR)).unwrap();
        for name in ["10-aws.conflist", "05-cilium.conflist"] {
            std::fs::write(root.join(CNI_CONF_DIR).join(name), "{}").unwrap();
        }
        assert_eq!(
            cni_confs(&root).unwrap(),
            ["05-cilium.conflist", "10-aws.conflist"]
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn the_cnis_file_is_found_among_thousands_of_other_entries() {
        // Issue 30, item 9: 256 other names used to hide the AWS CNI's file.
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join(CNI_CONF_DIR);
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..3000 {
            std::fs::write(dir.join(format!("00-other-{i:05}.conf")), "{}").unwrap();
        }
        std::fs::write(dir.join("10-aws.conflist"), "{}").unwrap();
        assert_eq!(cni_confs(root.path()).unwrap(), ["10-aws.conflist"]);
        // More CNI-owned names than are kept: still a CNI's (a node), bounded.
        for i in 0..(MAX_CONFS + 10) {
            std::fs::write(dir.join(format!("{i:05}-cilium.conf")), "{}").unwrap();
        }
        let got = cni_confs(root.path()).unwrap();
        assert_eq!(got.len(), MAX_CONFS);
        let view = NodeView {
            cni_confs: got,
            ..NodeView::default()
        };
        assert!(decide(Mode::Auto, &view).node);
    }
}

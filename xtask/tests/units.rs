// SPDX-License-Identifier: Apache-2.0
//! Every systemd unit in `hooks/systemd/` says where its documentation is
//! (`Documentation=`, which `systemctl help UNIT` and `systemctl status` show),
//! and everything it names is shipped: each `man:PAGE(SECTION)` is a page this
//! build-time tool makes, each `file:` a document both packages install. The
//! units' `systemd-analyze verify` tests run with `--man=no` (the pages are the
//! package's, not the test machine's); this test stands in for that check.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The pages `xtask man` writes, as `NAME.SECTION` file names.
fn pages() -> Vec<String> {
    let dir = std::env::temp_dir().join(format!("leasehook-units-man-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("man")
        .arg(&dir)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|p| {
            Path::new(p)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

/// The documents the packages install in /usr/share/doc/leasehook/: every
/// `docs/*.md` but the developers' ones (`packaging/developer-docs`), gzipped.
fn shipped_docs(root: &Path) -> Vec<String> {
    let developers = std::fs::read_to_string(root.join("packaging/developer-docs")).unwrap();
    std::fs::read_dir(root.join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| Path::new(n).extension().is_some_and(|e| e == "md"))
        .filter(|n| !developers.lines().any(|l| l.trim() == n))
        .map(|n| format!("/usr/share/doc/leasehook/{n}.gz"))
        .collect()
}

#[test]
fn every_unit_documents_itself_with_what_the_packages_ship() {
    let root = workspace_root();
    let pages = pages();
    let docs = shipped_docs(&root);
    let mut units: Vec<PathBuf> = std::fs::read_dir(root.join("hooks/systemd"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    units.sort();
    assert!(units.len() >= 6, "{units:?}");
    for unit in &units {
        let text = std::fs::read_to_string(unit).unwrap();
        let entries: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("Documentation="))
            .flat_map(str::split_whitespace)
            .collect();
        let name = unit.file_name().unwrap().to_string_lossy();
        assert!(
            entries.iter().any(|e| e.starts_with("man:")),
            "{name}: no Documentation=man:..."
        );
        for entry in entries {
            if let Some(man) = entry.strip_prefix("man:") {
                let (page, section) = man
                    .strip_suffix(')')
                    .and_then(|m| m.split_once('('))
                    .unwrap_or_else(|| panic!("{name}: {entry} is not man:PAGE(SECTION)"));
                let file = format!("{page}.{section}");
                assert!(
                    pages.contains(&file),
                    "{name}: {entry}, but xtask makes no {file}: {pages:?}"
                );
            } else if let Some(path) = entry.strip_prefix("file:") {
                assert!(
                    docs.iter().any(|d| d == path),
                    "{name}: {entry} is not a document the packages install: {docs:?}"
                );
            } else {
                panic!("{name}: {entry}: only man: and file: entries are expected");
            }
        }
    }
}

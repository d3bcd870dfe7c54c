// SPDX-License-Identifier: Apache-2.0
//! What the CLI's integration tests share: running the built `leasehook`, the one
//! error line a bad invocation must give, and a scratch folder.

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Output};

/// Runs the built `leasehook` with `args`.
pub(crate) fn leasehook(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_leasehook"))
        .args(args)
        .output()
        .expect("failed to run leasehook")
}

/// Runs a bad invocation and returns its single standard-error line: it must exit
/// 1, print nothing on standard output and one `leasehook: error: ` line.
pub(crate) fn one_error_line(args: &[&str]) -> String {
    let out = leasehook(args);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(out.stdout.is_empty(), "{args:?} printed to stdout");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "{args:?}: expected one error line, got {stderr:?}"
    );
    assert!(lines[0].starts_with("leasehook: error: "), "{stderr}");
    lines[0].to_owned()
}

/// A scratch folder, `leasehook-<name>-<pid>` in the temporary folder: emptied when
/// made, removed when dropped.
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    pub(crate) fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("leasehook-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        Self(p)
    }

    /// Writes `body` to `rel` below the folder (its folders made) and returns the
    /// file's path.
    pub(crate) fn file(&self, rel: &str, body: &str) -> String {
        let p = self.0.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, body).unwrap();
        p.to_str().unwrap().to_owned()
    }

    /// The folder's path.
    pub(crate) fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

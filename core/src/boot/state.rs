// SPDX-License-Identifier: Apache-2.0
//! The boot stages' verdict, `<root>/run/leasehook/boot.json`: how the local stage
//! tells the network stage what it already found, so nothing is crawled twice and
//! no failed check is repeated, and what `leasehook status` shows.
//!
//! The types are pure; [`read()`] and [`write()`] perform IO (through
//! [`crate::fs`], the file replaced atomically, mode 0644: it holds no
//! secret). `/run` is a tmpfs, so a verdict lives for one boot; it also records the
//! kernel's boot id, and a verdict of another boot is ignored.

use serde::{Deserialize, Serialize};

use super::decide::Attempt;
use crate::constants::{BOOT_STATE, RUN_NAME, RUN_PARENT};
use crate::error::{Error, Result};
use crate::fs::Dir;
use crate::instance_data::{Origin, Stage};
use crate::source::SourceKind;

/// The version of `boot.json` this leasehook writes and reads.
pub const BOOT_STATE_VERSION: u32 = 1;

/// What the stage concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// A datasource is in use (fetched, or restored from the cache).
    Found,
    /// The local stage left datasources to the network stage.
    NeedsNetwork,
    /// No datasource answered and the cache could not stand in: `None`.
    NoDatasource,
    /// cloud-init (and so leasehook's boot stage) is disabled.
    Disabled,
}

impl Verdict {
    /// Whether the network stage has nothing left to do.
    pub fn is_final(self) -> bool {
        !matches!(self, Self::NeedsNetwork)
    }
}

/// The content of `boot.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootState {
    /// [`BOOT_STATE_VERSION`].
    pub version: u32,
    /// The kernel's boot id when it was written (`None` where it cannot be read).
    pub boot_id: Option<String>,
    /// The stage that wrote it.
    pub stage: Stage,
    /// What it concluded.
    pub verdict: Verdict,
    /// The datasource in use (with [`Verdict::Found`], `None` for no datasource).
    pub datasource: Option<SourceKind>,
    /// Its instance-id.
    pub instance_id: Option<String>,
    /// Where the data in use came from.
    pub origin: Option<Origin>,
    /// Why the cache was or was not used.
    pub cache: String,
    /// Whether this boot is the instance's first (`data/instance-id` named another
    /// or none).
    pub new_instance: Option<bool>,
    /// `data/instance-id` before this boot.
    pub previous_instance_id: Option<String>,
    /// What the configuration names.
    pub configured: Vec<SourceKind>,
    /// Left to the network stage (with [`Verdict::NeedsNetwork`]).
    pub deferred: Vec<SourceKind>,
    /// Every datasource tried, in both stages, in order.
    pub attempts: Vec<Attempt>,
    /// When the data in use was fetched, in milliseconds since the epoch.
    pub fetched_at_ms: Option<u64>,
    /// When the stage decided, in milliseconds since the epoch.
    pub decided_at_ms: u64,
    /// Why the data in use could not be cached or `data/instance-id` not updated
    /// (empty when both were written): the next boot then has no fallback, which
    /// `init` (exit 4) and `leasehook status` say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cache_errors: Vec<String>,
}

/// The run-time folder `<root>/run/leasehook`, for writing: the same folder, opened
/// the same way, as the hooks' ([`crate::apply::state::Paths::run_folder`]; a
/// symlink there is refused).
pub fn run_dir(root: &std::path::Path) -> Result<Dir> {
    crate::apply::state::Paths::new(root)
        .run_folder(None, true)?
        .ok_or_else(|| Error::Io {
            path: format!("{:?}", root.join(RUN_PARENT).join(RUN_NAME)),
            message: "vanished".to_owned(),
        })
}

/// The run-time folder for reading; `Ok(None)` when it does not exist.
pub fn run_dir_if_present(root: &std::path::Path) -> Result<Option<Dir>> {
    crate::apply::state::Paths::new(root).run_folder(None, false)
}

/// The kernel's boot id below `root` (`proc/sys/kernel/random/boot_id`).
pub fn boot_id(root: &std::path::Path) -> Option<String> {
    std::fs::read_to_string(root.join(crate::constants::BOOT_ID))
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// Reads `boot.json`: `None` when there is none, or when it is unreadable, of
/// another version or of another boot (each logged; a bad file is set aside).
pub fn read(root: &std::path::Path, boot_id: Option<&str>) -> Option<BootState> {
    let dir = match run_dir_if_present(root) {
        Ok(Some(d)) => d,
        Ok(None) => return None,
        Err(e) => {
            log::warn!("{e}; no verdict of an earlier stage is read");
            return None;
        }
    };
    let bytes = match dir.read(BOOT_STATE, 1024 * 1024) {
        Ok(Some(b)) => b,
        Ok(None) => return None,
        Err(p) => {
            let to = dir.set_aside(BOOT_STATE);
            log::warn!("{} {p}; set aside ({to:?})", dir.shown(BOOT_STATE));
            return None;
        }
    };
    let state: BootState = match serde_json::from_slice::<BootState>(&bytes) {
        Ok(s) if s.version == BOOT_STATE_VERSION => s,
        Ok(s) => {
            log::warn!(
                "{} is of version {}, not {BOOT_STATE_VERSION}; ignored",
                dir.shown(BOOT_STATE),
                s.version
            );
            return None;
        }
        Err(e) => {
            let to = dir.set_aside(BOOT_STATE);
            log::warn!(
                "{} is corrupt ({e}); set aside ({to:?})",
                dir.shown(BOOT_STATE)
            );
            return None;
        }
    };
    if state.boot_id.as_deref() != boot_id {
        log::info!(
            "{} was written in another boot ({:?}, now {boot_id:?}); ignored",
            dir.shown(BOOT_STATE),
            state.boot_id
        );
        return None;
    }
    Some(state)
}

/// Writes `boot.json` atomically (0644).
pub fn write(root: &std::path::Path, state: &BootState) -> Result<()> {
    let dir = run_dir(root)?;
    let mut bytes = serde_json::to_vec_pretty(state).map_err(|e| Error::Syntax {
        what: "boot state".to_owned(),
        message: e.to_string(),
    })?;
    bytes.push(b'\n');
    dir.write_atomic(BOOT_STATE, &bytes, 0o644)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boot::decide::Tried;

    fn state(boot: Option<&str>) -> BootState {
        BootState {
            version: BOOT_STATE_VERSION,
            boot_id: boot.map(str::to_owned),
            stage: Stage::Local,
            verdict: Verdict::NeedsNetwork,
            datasource: None,
            instance_id: None,
            origin: None,
            cache: "not decided yet".into(),
            new_instance: None,
            previous_instance_id: None,
            configured: vec![SourceKind::Ec2, SourceKind::None],
            deferred: vec![SourceKind::Ec2],
            attempts: vec![Attempt {
                datasource: SourceKind::Ec2,
                stage: Stage::Local,
                result: Tried::Deferred,
                detail: "IMDS needs the network".into(),
            }],
            fetched_at_ms: None,
            decided_at_ms: 5,
            cache_errors: Vec::new(),
        }
    }

    #[test]
    fn round_trip_per_boot() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(read(t.path(), None), None);
        write(t.path(), &state(Some("b1"))).unwrap();
        assert_eq!(read(t.path(), Some("b1")), Some(state(Some("b1"))));
        // Another boot's verdict is stale.
        assert_eq!(read(t.path(), Some("b2")), None);
        assert_eq!(read(t.path(), None), None);
        let text = std::fs::read_to_string(t.path().join("run/leasehook/boot.json")).unwrap();
        assert!(text.contains("\"verdict\": \"needs-network\""), "{text}");
        // Garbage is set aside.
        std::fs::write(t.path().join("run/leasehook/boot.json"), "{").unwrap();
        assert_eq!(read(t.path(), None), None);
        assert!(t.path().join("run/leasehook/boot.json.corrupt").is_file());
        assert!(Verdict::Found.is_final() && !Verdict::NeedsNetwork.is_final());
    }

    #[test]
    fn boot_ids_come_from_proc() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(boot_id(t.path()), None);
        std::fs::create_dir_all(t.path().join("proc/sys/kernel/random")).unwrap();
        std::fs::write(t.path().join("proc/sys/kernel/random/boot_id"), "abc\n").unwrap();
        assert_eq!(boot_id(t.path()).as_deref(), Some("abc"));
    }
}

// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the datasource cache, `<root>/var/lib/leasehook/` (SPEC §5).
//!
//! ```text
//! var/lib/leasehook/
//!   instance -> instances/<instance-id>        the current instance (a symlink)
//!   instances/<instance-id>/datasource.json    the cache record (0600)
//!   data/instance-id                           the instance this machine last was
//!   data/previous-instance-id                  the one before (NO_PREVIOUS_INSTANCE_ID)
//! ```
//!
//! Everything is reached through [`crate::fs`]: no symlink below
//! `var/lib/leasehook` is followed. The `instance` link is *read* (its target must
//! be `instances/<name>` with a safe name) and resolved by leasehook itself, never
//! by the kernel. A bad entry — an unknown version, a corrupt or truncated record,
//! a symlink where a file or folder belongs, a link pointing elsewhere — is logged
//! and set aside as `NAME.corrupt`, never deleted.

use std::path::{Path, PathBuf};

pub mod record;

use self::record::CacheRecord;
use crate::constants::{CACHE_MAX_BYTES, CACHE_NAME, CACHE_PARENT, NO_PREVIOUS_INSTANCE_ID};
use crate::error::Result;
use crate::fs::{Dir, FileProblem};

const INSTANCE_LINK: &str = "instance";
const INSTANCES: &str = "instances";
const RECORD: &str = "datasource.json";
const DATA: &str = "data";
const INSTANCE_ID: &str = "instance-id";
const PREVIOUS_INSTANCE_ID: &str = "previous-instance-id";

/// What reading the cache found.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    /// No cache (no `instance` link).
    Missing,
    /// A cache that cannot be used, and why (it has been set aside).
    Bad(String),
    /// A readable record.
    Valid(Box<CacheRecord>),
}

/// The cache below a root folder.
#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
}

/// What [`Cache::reflect`] found and wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reflected {
    /// `data/instance-id` before this boot (`None`: there was none).
    pub previous: Option<String>,
    /// Whether this is another instance than the machine last was.
    pub new_instance: bool,
}

impl Cache {
    /// The cache below `root` (`/` in production).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// `<root>/var/lib/leasehook`.
    pub fn path(&self) -> PathBuf {
        self.root.join(CACHE_PARENT).join(CACHE_NAME)
    }

    /// The cache folder, opened without following a symlink, else what
    /// [`Self::load`] answers: [`Lookup::Missing`] when it does not exist,
    /// [`Lookup::Bad`] when it cannot be opened (a symlink or a file in its place
    /// is set aside).
    fn open(&self) -> std::result::Result<Dir, Lookup> {
        let parent = self.root.join(CACHE_PARENT);
        let base = match Dir::open_trusted(&parent, false) {
            Ok(Some(base)) => base,
            Ok(None) => return Err(Lookup::Missing),
            Err(e) => return Err(Lookup::Bad(e.to_string())),
        };
        sub_folder(&base, CACHE_NAME, || Lookup::Missing)
    }

    /// The cache folder for writing, created (0755) when missing.
    fn open_for_write(&self) -> Result<Dir> {
        let parent = self.root.join(CACHE_PARENT);
        let base = Dir::open_trusted(&parent, true)?.ok_or_else(|| crate::Error::Io {
            path: format!("{parent:?}"),
            message: "vanished".to_owned(),
        })?;
        base.child_for_write(CACHE_NAME, 0o755)
    }

    /// Reads the current instance's record (see the module docs).
    pub fn load(&self) -> Lookup {
        let dir = match self.open() {
            Ok(d) => d,
            Err(answer) => return answer,
        };
        let target = match dir.read_link(INSTANCE_LINK) {
            Ok(Some(t)) => t,
            Ok(None) => return Lookup::Missing,
            Err(p) => return Lookup::Bad(bad_entry(&dir, INSTANCE_LINK, &p)),
        };
        // The link must name one folder below instances/, by a relative path.
        let name = target
            .strip_prefix("instances/")
            .filter(|n| !n.contains('/') && record::instance_dir_name(n).as_deref() == Ok(*n));
        let Some(name) = name else {
            let why = format!(
                "{} points at {target:?}, outside {}/; not followed",
                dir.shown(INSTANCE_LINK),
                dir.shown(INSTANCES)
            );
            return Lookup::Bad(set_aside(&dir, INSTANCE_LINK, &why));
        };
        // A link to a folder that does not exist is set aside.
        let dangling = || {
            let why = format!(
                "{} points at {target}, which does not exist",
                dir.shown(INSTANCE_LINK)
            );
            Lookup::Bad(set_aside(&dir, INSTANCE_LINK, &why))
        };
        let folder = match sub_folder(&dir, INSTANCES, dangling)
            .and_then(|instances| sub_folder(&instances, name, dangling))
        {
            Ok(d) => d,
            Err(answer) => return answer,
        };
        let bytes = match folder.read(RECORD, CACHE_MAX_BYTES) {
            Ok(Some(b)) => b,
            Ok(None) => {
                return Lookup::Bad(format!("{} is missing", folder.shown(RECORD)));
            }
            Err(p) => return Lookup::Bad(bad_entry(&folder, RECORD, &p)),
        };
        match record::parse(&bytes, name) {
            Ok(r) => Lookup::Valid(Box::new(r)),
            Err(p) => {
                let why = format!("{} is {p}", folder.shown(RECORD));
                Lookup::Bad(set_aside(&folder, RECORD, &why))
            }
        }
    }

    /// Writes `record` as the current instance's and points `instance` at it.
    pub fn store(&self, record: &CacheRecord) -> Result<PathBuf> {
        let name = record::instance_dir_name(&record.instance_id).map_err(|problem| {
            crate::Error::CacheName {
                path: format!("{:?}", self.path().join(INSTANCES)),
                problem,
            }
        })?;
        let dir = self.open_for_write()?;
        let instances = dir.child_for_write(INSTANCES, 0o755)?;
        let folder = instances.child_for_write(&name, 0o700)?;
        folder.write_atomic(RECORD, &record.encode(), 0o600)?;
        dir.replace_symlink(INSTANCE_LINK, &format!("{INSTANCES}/{name}"))?;
        Ok(folder.path().join(RECORD))
    }

    /// `data/instance-id`: the instance this machine last was (`None`: none, or
    /// unreadable, logged).
    pub fn instance_id(&self) -> Option<String> {
        let dir = self.open().ok()?;
        let data = match dir.child(DATA) {
            Ok(d) => d?,
            Err(p) => {
                log::warn!("{} {p}; ignored", dir.shown(DATA));
                return None;
            }
        };
        data.read_line(INSTANCE_ID).filter(|s| !s.is_empty())
    }

    /// Records that this machine is now `instance_id`: `data/previous-instance-id`
    /// takes what `data/instance-id` held (or `NO_PREVIOUS_INSTANCE_ID`), and
    /// `data/instance-id` the new id. `again`: this boot was already reflected for
    /// this instance, so nothing is written (a stage run twice must not make the
    /// instance look old-as-new).
    pub fn reflect(&self, instance_id: &str, again: bool) -> Result<Reflected> {
        let previous = self.instance_id();
        let new_instance = previous.as_deref() != Some(instance_id);
        if again {
            return Ok(Reflected {
                previous,
                new_instance: false,
            });
        }
        let dir = self.open_for_write()?;
        let data = dir.child_for_write(DATA, 0o755)?;
        let prev = previous.as_deref().unwrap_or(NO_PREVIOUS_INSTANCE_ID);
        data.write_atomic(PREVIOUS_INSTANCE_ID, format!("{prev}\n").as_bytes(), 0o644)?;
        data.write_atomic(INSTANCE_ID, format!("{instance_id}\n").as_bytes(), 0o644)?;
        Ok(Reflected {
            previous,
            new_instance,
        })
    }

    /// The root the cache is below.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

/// `dir`'s sub-folder `name`, else what [`Cache::load`] answers: `missing()` when it
/// does not exist, [`Lookup::Bad`] when it cannot be opened (a symlink or a file in
/// its place is set aside).
fn sub_folder(
    dir: &Dir,
    name: &str,
    missing: impl FnOnce() -> Lookup,
) -> std::result::Result<Dir, Lookup> {
    match dir.child(name) {
        Ok(Some(d)) => Ok(d),
        Ok(None) => Err(missing()),
        Err(p) => Err(Lookup::Bad(bad_entry(dir, name, &p))),
    }
}

/// Sets `name` aside and says why and where (or why it could not be).
fn set_aside(dir: &Dir, name: &str, why: &str) -> String {
    match dir.set_aside(name) {
        Ok(to) => format!("{why}; set aside as {to}"),
        Err(e) => format!("{why}; could not set it aside ({e})"),
    }
}

/// A bad entry met while reading: symlinks and wrong kinds are set aside; other
/// errors (permissions, ...) are only reported.
fn bad_entry(dir: &Dir, name: &str, p: &FileProblem) -> String {
    let why = format!("{} {p}", dir.shown(name));
    match p {
        FileProblem::Symlink | FileProblem::Wrong(_) | FileProblem::TooLarge(_) => {
            set_aside(dir, name, &why)
        }
        FileProblem::Io(_) => why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::InstanceData;
    use std::fs;
    use std::os::unix::fs::symlink;

    fn record(id: &str) -> CacheRecord {
        CacheRecord::new(
            InstanceData {
                user_data: Some(b"#cloud-config\n".to_vec()),
                ..InstanceData::lxd_example(id)
            },
            7,
        )
    }

    fn cache() -> (tempfile::TempDir, Cache, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let c = Cache::new(t.path());
        let p = c.path();
        (t, c, p)
    }

    #[test]
    fn store_load_and_reflect() {
        let (_t, c, p) = cache();
        assert_eq!(c.load(), Lookup::Missing);
        let r = record("c1");
        c.store(&r).unwrap();
        assert_eq!(c.load(), Lookup::Valid(Box::new(r.clone())));
        assert_eq!(
            fs::read_link(p.join("instance")).unwrap(),
            Path::new("instances/c1")
        );
        let first = c.reflect("c1", false).unwrap();
        assert_eq!(
            first,
            Reflected {
                previous: None,
                new_instance: true
            }
        );
        assert_eq!(
            fs::read_to_string(p.join("data/previous-instance-id")).unwrap(),
            "NO_PREVIOUS_INSTANCE_ID\n"
        );
        let second = c.reflect("c1", false).unwrap();
        assert_eq!(
            second,
            Reflected {
                previous: Some("c1".into()),
                new_instance: false
            }
        );
        assert_eq!(
            fs::read_to_string(p.join("data/previous-instance-id")).unwrap(),
            "c1\n"
        );
        // Another instance: the link moves, the old record stays.
        c.store(&record("c2")).unwrap();
        let third = c.reflect("c2", false).unwrap();
        assert!(third.new_instance);
        assert!(p.join("instances/c1/datasource.json").is_file());
        assert_eq!(c.instance_id().as_deref(), Some("c2"));
        // Reflected already this boot: nothing written.
        let again = c.reflect("c2", true).unwrap();
        assert!(!again.new_instance);
        assert_eq!(
            fs::read_to_string(p.join("data/previous-instance-id")).unwrap(),
            "c1\n"
        );
    }

    #[test]
    fn bad_caches_are_set_aside_never_followed_never_lost() {
        // A record of another version.
        let (_t, c, p) = cache();
        c.store(&record("c1")).unwrap();
        let file = p.join("instances/c1/datasource.json");
        let text = fs::read_to_string(&file)
            .unwrap()
            .replace("\"version\": 1", "\"version\": 9");
        fs::write(&file, &text).unwrap();
        let Lookup::Bad(why) = c.load() else { panic!() };
        assert!(why.contains("unknown cache version (version 9"), "{why}");
        assert!(why.contains("set aside as"), "{why}");
        assert_eq!(
            fs::read_to_string(p.join("instances/c1/datasource.json.corrupt")).unwrap(),
            text
        );
        assert_eq!(
            c.load(),
            Lookup::Bad(format!("{} is missing", file.display()))
        );

        // A symlink planted at the record, pointing outside.
        let (_t, c, p) = cache();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret");
        fs::write(&secret, record("c1").encode()).unwrap();
        c.store(&record("c1")).unwrap();
        let file = p.join("instances/c1/datasource.json");
        fs::remove_file(&file).unwrap();
        symlink(&secret, &file).unwrap();
        let Lookup::Bad(why) = c.load() else { panic!() };
        assert!(
            why.contains("is a symlink, which is never followed"),
            "{why}"
        );
        assert!(
            fs::symlink_metadata(p.join("instances/c1/datasource.json.corrupt"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(secret.is_file());

        // The instance link pointing outside the cache.
        let (_t, c, p) = cache();
        c.store(&record("c1")).unwrap();
        fs::remove_file(p.join("instance")).unwrap();
        symlink(outside.path(), p.join("instance")).unwrap();
        let Lookup::Bad(why) = c.load() else { panic!() };
        assert!(why.contains("outside"), "{why}");
        assert!(fs::symlink_metadata(p.join("instance.corrupt")).is_ok());
        for target in [
            "instances/../../etc",
            "/var/lib/leasehook/instances/c1",
            "instances/c1/..",
        ] {
            fs::remove_file(p.join("instance")).ok();
            symlink(target, p.join("instance")).unwrap();
            assert!(
                matches!(c.load(), Lookup::Bad(w) if w.contains("not followed")),
                "{target}"
            );
        }

        // The instances folder itself a symlink.
        let (_t, c, p) = cache();
        c.store(&record("c1")).unwrap();
        fs::rename(p.join("instances"), outside.path().join("moved")).unwrap();
        symlink(outside.path().join("moved"), p.join("instances")).unwrap();
        let Lookup::Bad(why) = c.load() else { panic!() };
        assert!(why.contains("instances is a symlink"), "{why}");
        // Storing again makes a real folder and leaves the planted one alone.
        c.store(&record("c1")).unwrap();
        assert!(fs::symlink_metadata(p.join("instances")).unwrap().is_dir());
        assert!(matches!(c.load(), Lookup::Valid(_)));
        assert!(outside.path().join("moved/c1/datasource.json").is_file());

        // The whole cache folder a symlink.
        let t = tempfile::tempdir().unwrap();
        fs::create_dir_all(t.path().join("var/lib")).unwrap();
        symlink(outside.path(), t.path().join("var/lib/leasehook")).unwrap();
        let c = Cache::new(t.path());
        assert!(matches!(c.load(), Lookup::Bad(w) if w.contains("is a symlink")));
        assert!(fs::symlink_metadata(t.path().join("var/lib/leasehook.corrupt")).is_ok());
    }

    #[test]
    fn a_symlinked_data_file_is_replaced_not_written_through() {
        let (_t, c, p) = cache();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("passwd");
        fs::write(&target, "root:x:0:0\n").unwrap();
        fs::create_dir_all(p.join("data")).unwrap();
        symlink(&target, p.join("data/instance-id")).unwrap();
        // Read: refused (and the boot treats the machine as having no previous id).
        assert_eq!(c.instance_id(), None);
        c.reflect("c1", false).unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "root:x:0:0\n");
        assert_eq!(c.instance_id().as_deref(), Some("c1"));
    }
}

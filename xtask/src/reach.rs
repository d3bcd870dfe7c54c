// SPDX-License-Identifier: Apache-2.0
//! `xtask cloud-reach`: how far each cloud reaches outside its own folder (issue
//! 32's measure of "one row per cloud").
//!
//! A cloud is a folder `core/src/source/<cloud>/` holding a `provider.rs`. For
//! each, the product `.rs` files outside that folder (below `core/src`, `cli/src`
//! and `hook/src`) whose code names the cloud are counted: the folder's name
//! anywhere in a line, in any case, comments and test code left out (`//`
//! lines, trailing `//` comments, `#[cfg(test)]` modules, `tests.rs`,
//! `*_tests.rs` and files below a `tests` or `*_tests` folder). It reads text, not Rust: a
//! `//` inside a string (a URL) ends that line's code there too.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// The product trees the count reads, below the repository's root.
const PRODUCT: [&str; 3] = ["core/src", "cli/src", "hook/src"];

/// Where the clouds' folders are.
const SOURCES: &str = "core/src/source";

/// One cloud's reach: the files outside its folder naming it, with the lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reach {
    /// The cloud's folder name (`gce`).
    pub(crate) cloud: String,
    /// Each file (relative to the root) and its line numbers that name the cloud.
    pub(crate) files: Vec<(String, Vec<usize>)>,
}

impl Reach {
    /// How many lines name the cloud outside its folder.
    pub(crate) fn lines(&self) -> usize {
        self.files.iter().map(|(_, l)| l.len()).sum()
    }
}

/// The clouds below `root` (folders of `core/src/source` with a `provider.rs`),
/// sorted.
pub(crate) fn clouds(root: &Path) -> anyhow::Result<Vec<String>> {
    let dir = root.join(SOURCES);
    let mut found = Vec::new();
    for entry in fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        if entry.path().join("provider.rs").is_file() {
            found.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    found.sort();
    Ok(found)
}

/// Every cloud's reach below `root`.
pub(crate) fn measure(root: &Path) -> anyhow::Result<Vec<Reach>> {
    let mut files = Vec::new();
    for top in PRODUCT {
        rust_files(&root.join(top), &mut files)?;
    }
    files.sort();
    let mut code = Vec::new();
    for path in files {
        let rel = path.strip_prefix(root).unwrap_or(&path);
        let rel = rel.to_string_lossy().into_owned();
        if is_test_file(&rel) {
            continue;
        }
        let text = fs::read_to_string(&path).with_context(|| format!("reading {rel}"))?;
        code.push((rel, code_lines(&text)));
    }
    clouds(root)?
        .into_iter()
        .map(|cloud| {
            let own = format!("{SOURCES}/{cloud}/");
            let files = code
                .iter()
                .filter(|(rel, _)| !rel.starts_with(&own))
                .filter_map(|(rel, lines)| {
                    let hits: Vec<usize> = lines
                        .iter()
                        .filter(|(_, l)| names(l, &cloud))
                        .map(|(n, _)| *n)
                        .collect();
                    (!hits.is_empty()).then(|| (rel.clone(), hits))
                })
                .collect();
            Ok(Reach { cloud, files })
        })
        .collect()
}

/// Issue 32's goal for every cloud: at most this many files ...
pub(crate) const GOAL_FILES: usize = 2;
/// ... and this many lines outside its folder.
pub(crate) const GOAL_LINES: usize = 3;

/// How far each cloud reaches today, (files, lines): the ratchet the test
/// `no_cloud_reaches_further_than_recorded` holds, so that the count only goes
/// down. Lower it with every step towards [`GOAL_FILES`]/[`GOAL_LINES`]; a new
/// cloud starts at the goal.
pub(crate) const RECORDED: [(&str, usize, usize); 6] = [
    ("aliyun", 2, 2),
    ("azure", 2, 2),
    ("ec2", 2, 2),
    ("gce", 2, 2),
    ("openstack", 2, 2),
    ("oracle", 2, 2),
];

/// The most `cloud` may reach, (files, lines): its [`RECORDED`] count, else the
/// goal.
pub(crate) fn limit(cloud: &str) -> (usize, usize) {
    RECORDED
        .iter()
        .find(|(c, _, _)| *c == cloud)
        .map_or((GOAL_FILES, GOAL_LINES), |(_, f, l)| (*f, *l))
}

/// The peer tool amazon-ec2-net-utils and the planner profile named after it
/// (`ec2-net-utils`, `Ec2NetUtils`, `ec2_net_utils`), and the prefix of the
/// networkd drop-ins the tool writes (`ec2net_alias.conf`, which `coexist`
/// looks for), lower-cased: they name a program whose table scheme the planner
/// imitates, not the EC2 cloud, and the profile's configuration value cannot
/// change. They are cut from a line before it is searched for `ec2`.
const NOT_A_CLOUD: [&str; 5] = [
    "amazon-ec2-net-utils",
    "ec2-net-utils",
    "ec2netutils",
    "ec2_net_utils",
    "ec2net_",
];

/// Whether the code `line` names `cloud` (any case), the peer tool's names
/// ([`NOT_A_CLOUD`]) left out.
fn names(line: &str, cloud: &str) -> bool {
    let mut line = line.to_ascii_lowercase();
    for peer in NOT_A_CLOUD {
        line = line.replace(peer, " ");
    }
    line.contains(cloud)
}

/// The table `cloud-reach` prints: one line per cloud, and with `verbose` each
/// file and its lines below it.
pub(crate) fn report(reach: &[Reach], verbose: bool) -> String {
    let mut out = String::new();
    for r in reach {
        let _ = writeln!(
            out,
            "{:<10} {:>3} file(s) {:>4} line(s)",
            r.cloud,
            r.files.len(),
            r.lines()
        );
        if verbose {
            for (file, lines) in &r.files {
                let lines: Vec<String> = lines.iter().map(ToString::to_string).collect();
                let _ = writeln!(out, "    {file}: {}", lines.join(", "));
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

fn is_test_file(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    name == "tests.rs"
        || name.ends_with("_tests.rs")
        || rel
            .split('/')
            .any(|c| c == "tests" || c.ends_with("_tests"))
}

/// The lines of `text` that are code (1-based numbers): comment lines, trailing
/// comments and `#[cfg(test)]` modules left out.
fn code_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut depth: i64 = 0;
    // The depth a test module opened at, while inside one.
    let mut test_module: Option<i64> = None;
    let mut cfg_test = false;
    for (i, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        let trimmed = line.trim();
        let opens = count(code, '{') - count(code, '}');
        if let Some(at) = test_module {
            depth += opens;
            if depth <= at {
                test_module = None;
            }
            continue;
        }
        if trimmed.starts_with("#[cfg(test)]") {
            cfg_test = true;
            continue;
        }
        // More attributes between `#[cfg(test)]` and its module
        // (`#[allow(...)]`) keep it a test module.
        if cfg_test && trimmed.starts_with("#[") {
            continue;
        }
        if cfg_test && declares_module(trimmed) {
            cfg_test = false;
            if !trimmed.ends_with(';') {
                test_module = Some(depth);
                depth += opens;
            }
            continue;
        }
        cfg_test = false;
        depth += opens;
        if !code.trim().is_empty() {
            out.push((i + 1, code.to_owned()));
        }
    }
    out
}

/// Whether the (trimmed) line declares a module: `mod m`, `pub mod m`,
/// `pub(crate) mod m`, `pub(super) mod m`.
fn declares_module(line: &str) -> bool {
    let rest = line.strip_prefix("pub").map_or(line, |r| {
        r.strip_prefix("(crate)")
            .or_else(|| r.strip_prefix("(super)"))
            .unwrap_or(r)
            .trim_start()
    });
    rest.starts_with("mod ")
}

fn count(s: &str, c: char) -> i64 {
    i64::try_from(s.matches(c).count()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_test_modules_do_not_count() {
        let text = "use a::gce; // gce\n// gce only here\nfn f() {\n    let x = \"GCE\";\n}\n\
                    #[cfg(test)]\nmod tests {\n    fn g() { gce(); }\n}\nfn h() {}\n";
        let lines: Vec<usize> = code_lines(text)
            .into_iter()
            .filter(|(_, l)| l.to_ascii_lowercase().contains("gce"))
            .map(|(n, _)| n)
            .collect();
        assert_eq!(lines, [1, 4]);
    }

    #[test]
    fn a_test_module_of_any_visibility_does_not_count() {
        let text = "#[cfg(test)]\npub(crate) mod short {\n    const G: K = K::Gce;\n}\n\
                    #[cfg(test)]\npub(super) mod t;\nfn gce() {}\n";
        let lines: Vec<usize> = code_lines(text).into_iter().map(|(n, _)| n).collect();
        assert_eq!(lines, [7]);
        assert!(declares_module("pub mod x {"));
        assert!(!declares_module("pub fn modx() {"));
        assert!(!declares_module("pub(crate) fn f() {"));
    }

    #[test]
    fn attributes_after_cfg_test_keep_it_a_test_module() {
        let text = "#[cfg(test)]\n#[allow(clippy::x)]\nmod tests {\n    const G: K = K::Gce;\n}\n\
                    #[allow(dead_code)]\nfn gce() {}\n";
        let lines: Vec<usize> = code_lines(text).into_iter().map(|(n, _)| n).collect();
        assert_eq!(lines, [6, 7]);
    }

    #[test]
    fn no_cloud_reaches_further_than_recorded() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let over: Vec<String> = measure(&root)
            .expect("the tree is readable")
            .iter()
            .filter_map(|r| {
                let (files, lines) = limit(&r.cloud);
                (r.files.len() > files || r.lines() > lines).then(|| {
                    format!(
                        "{}: {} file(s), {} line(s), at most {files}, {lines}",
                        r.cloud,
                        r.files.len(),
                        r.lines()
                    )
                })
            })
            .collect();
        assert!(
            over.is_empty(),
            "a cloud reaches further outside its folder than recorded (put what it \
             needs in its row, core/src/source/<cloud>/provider.rs): {over:?}\n{}",
            report(&measure(&root).unwrap_or_default(), true)
        );
    }

    #[test]
    fn the_peer_tool_is_not_the_cloud() {
        assert!(!names("Profile::Ec2NetUtils => \"ec2-net-utils\",", "ec2"));
        assert!(!names("// amazon-ec2-net-utils' scheme", "ec2"));
        assert!(!names("fn ec2_net_utils_table()", "ec2"));
        assert!(!names(".find(|n| n.starts_with(\"ec2net_\"))", "ec2"));
        assert!(names("const EC2NET: &str = \"ec2net\";", "ec2"));
        assert!(names("use crate::source::ec2::Ec2Provider;", "ec2"));
        assert!(names("ProfileArg::Ec2NetUtils => Ec2::new()", "ec2"));
    }

    #[test]
    fn test_files_are_left_out() {
        assert!(is_test_file("core/src/apply/tests.rs"));
        assert!(is_test_file("core/src/hook/lease_tests.rs"));
        assert!(is_test_file("core/src/boot/run/tests/x.rs"));
        // A test module's own folder (`mod autoconf;` inside `lease_tests.rs`).
        assert!(is_test_file("core/src/hook/lease_tests/autoconf.rs"));
        assert!(!is_test_file("core/src/hook/refresh.rs"));
    }

    #[test]
    fn the_repository_has_its_six_clouds() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let reach = measure(&root).expect("the tree is readable");
        let names: Vec<&str> = reach.iter().map(|r| r.cloud.as_str()).collect();
        assert_eq!(
            names,
            ["aliyun", "azure", "ec2", "gce", "openstack", "oracle"]
        );
        // Every cloud is named somewhere outside its folder (at least where the
        // folder is declared), so a count of zero means the reader is broken.
        assert!(reach.iter().all(|r| r.lines() > 0), "{reach:?}");
    }
}

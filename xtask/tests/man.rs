// SPDX-License-Identifier: Apache-2.0
//! The manual pages and completion scripts as the package ships them: made by the
//! build-time tool (`cargo run -p xtask -- man|completions DIR`, what `make deb`
//! and `make rpm` run), rendered by groff and man-db without a warning, and the
//! bash completion loaded by bash. "What `--help` says" is the help of the
//! `leasehook` binary's own clap definition, this very file included below.
//!
//! Needs groff (groff-base), man (man-db) and bash; `scripts/test.sh` installs them.
//! Without them these tests fail, never skip.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use clap::CommandFactory as _;

// `leasehook`'s command line, the file its binary parses with.
#[path = "../../cli/src/cli.rs"]
#[allow(dead_code)]
mod cli;

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("leasehook-man-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the xtask: the paths it wrote.
fn generate(what: &str, out: &Path) -> Vec<PathBuf> {
    let o = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg(what)
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(PathBuf::from)
        .collect()
}

fn tool(cmd: &mut Command, what: &str) -> Output {
    cmd.output().unwrap_or_else(|e| {
        panic!(
            "cannot run {what} ({e}): install it (scripts/test.sh installs groff-base and man-db)"
        )
    })
}

/// The subcommands `leasehook ARGS --help` lists (the help subcommand aside).
fn commands_of(args: &[&str]) -> Vec<String> {
    let mut cmd = cli::Cli::command();
    for a in args {
        cmd = cmd.find_subcommand(a).unwrap().clone();
    }
    let help = cmd.render_help().to_string();
    help.split("Commands:\n")
        .nth(1)
        .unwrap_or_default()
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|s| *s != "help")
        .map(str::to_owned)
        .collect()
}

/// Every subcommand path as its page names it: `plan`, ..., `config-show`.
fn subcommands() -> Vec<String> {
    let mut out = Vec::new();
    for sub in commands_of(&[]) {
        let nested = commands_of(&[&sub]);
        out.push(sub.clone());
        out.extend(nested.into_iter().map(|n| format!("{sub}-{n}")));
    }
    out
}

#[test]
fn every_page_renders_without_a_warning_and_says_what_help_says() {
    let dir = TempDir::new("pages");
    let pages = generate("man", &dir.0);
    let subs = subcommands();
    assert!(subs.len() >= 8, "{subs:?}");
    let mut want: Vec<String> = vec!["leasehook.1".to_owned()];
    want.extend(subs.iter().map(|s| format!("leasehook-{s}.1")));
    // The configuration file's page.
    want.push("leasehook.yaml.5".to_owned());
    let mut have: Vec<String> = pages
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    have.sort();
    want.sort();
    assert_eq!(have, want, "one page per subcommand, and leasehook.yaml(5)");

    for page in &pages {
        // groff with every warning on: a roff mistake (an unknown macro, a bad
        // escape, a stray character) fails here.
        let g = tool(
            Command::new("groff")
                .args(["-man", "-Tutf8", "-ww", "-z"])
                .arg(page),
            "groff",
        );
        let warnings = String::from_utf8_lossy(&g.stderr);
        assert!(
            g.status.success() && warnings.is_empty(),
            "{page:?}: {warnings}"
        );
        // man-db, as `man leasehook` runs it.
        let m = tool(
            Command::new("man")
                .args(["-l", "-P", "cat"])
                .arg(page)
                .env("MANWIDTH", "80")
                .env("LC_ALL", "C.UTF-8"),
            "man",
        );
        let text = String::from_utf8_lossy(&m.stdout);
        assert!(
            m.status.success(),
            "{page:?}: {}",
            String::from_utf8_lossy(&m.stderr)
        );
        let sections: &[&str] = if page.extension().is_some_and(|e| e == "5") {
            &[
                "NAME",
                "SYNOPSIS",
                "DESCRIPTION",
                "KEYS",
                "EXAMPLE",
                "SEE ALSO",
            ]
        } else {
            &["NAME", "SYNOPSIS", "DESCRIPTION", "SEE ALSO", "VERSION"]
        };
        for section in sections {
            assert!(
                text.lines().any(|l| l == *section),
                "{page:?} renders without {section}:\n{text}"
            );
        }
    }

    // The top page names every subcommand's page; a subcommand page holds what
    // its --help holds.
    let top = man_text(&dir.0.join("leasehook.1"));
    for s in &subs {
        assert!(top.contains(&format!("leasehook-{s}(1)")), "{s}:\n{top}");
    }
    for section in ["EXIT STATUS", "FILES", "SUBCOMMANDS"] {
        assert!(top.lines().any(|l| l == section), "{section}:\n{top}");
    }
    let plan = man_text(&dir.0.join("leasehook-plan.1"));
    for opt in [
        "--metadata",
        "--lease",
        "--link",
        "--profile",
        "--format",
        "--table-base",
    ] {
        assert!(plan.contains(opt), "{opt}:\n{plan}");
    }
    assert!(plan.contains("ec2-net-utils") && plan.contains("cloud-init"));
    // The global --root and --config, on every subcommand's page.
    for s in &subs {
        let page = man_text(&dir.0.join(format!("leasehook-{s}.1")));
        assert!(
            page.contains("--root <DIR> [default: /]") && page.contains("--config <FILE>"),
            "{s}:\n{page}"
        );
    }
}

fn man_text(page: &Path) -> String {
    let m = Command::new("man")
        .args(["-l", "-P", "cat"])
        .arg(page)
        .env("MANWIDTH", "200")
        .env("LC_ALL", "C.UTF-8")
        .output()
        .unwrap();
    // Undo the hyphenation and adjustment man may still apply.
    String::from_utf8_lossy(&m.stdout).replace('\u{2010}', "-")
}

#[test]
fn bash_loads_the_completion_and_it_completes_subcommands() {
    let dir = TempDir::new("completions");
    let files = generate("completions", &dir.0);
    let names: Vec<PathBuf> = ["leasehook.bash", "_leasehook", "leasehook.fish"]
        .iter()
        .map(|n| dir.0.join(n))
        .collect();
    assert_eq!(files, names);
    // Load it, then ask the completion function what `leasehook pl<TAB>` and
    // `leasehook plan --form<TAB>` offer.
    let script = format!(
        "source {:?} || exit 1\ncomplete -p leasehook || exit 1\n\
         f=$(complete -p leasehook | sed -n 's/.*-F \\([^ ]*\\).*/\\1/p')\n\
         COMP_WORDS=(leasehook pl); COMP_CWORD=1; COMP_LINE='leasehook pl'; COMP_POINT=12\n\
         $f leasehook pl leasehook; echo \"sub: ${{COMPREPLY[*]}}\"\n\
         COMP_WORDS=(leasehook plan --form); COMP_CWORD=2; COMP_LINE='leasehook plan --form'; COMP_POINT=21\n\
         $f leasehook --form plan; echo \"opt: ${{COMPREPLY[*]}}\"\n\
         COMP_WORDS=(leasehook apply --ro); COMP_CWORD=2; COMP_LINE='leasehook apply --ro'; COMP_POINT=20\n\
         $f leasehook --ro apply; echo \"global: ${{COMPREPLY[*]}}\"\n",
        files[0]
    );
    let o = tool(Command::new("bash").args(["--norc", "-c", &script]), "bash");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("sub: plan"), "{out}");
    assert!(out.contains("opt: --format"), "{out}");
    // The global --root is offered after a subcommand too.
    assert!(out.contains("global: --root"), "{out}");
    for file in &files[1..] {
        let text = std::fs::read_to_string(file).unwrap();
        for s in commands_of(&[]).into_iter().chain(commands_of(&["config"])) {
            assert!(text.contains(&s), "{file:?} lacks {s}");
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
//! The Debian package on the real machine (issue 9, "Show"): `dpkg -i` the .deb
//! that `make deb` built, check every installed file's path, mode and owner
//! against the list below, read `man leasehook`, load the bash completion, run the
//! dhclient scenario against the *installed* hook and shim (the instance namespace
//! sees the machine's `/etc/dhcp`), then `dpkg --purge` and check that no file, no
//! enable link, no state and no rule or route is left.
//!
//! This is the one test that writes the machine's `/etc` and `/usr`. It is
//! compiled only with the `package` feature and run by `scripts/test.sh` after
//! every other test (the installed networkd drop-in and dhcpcd/NetworkManager hooks
//! would otherwise be seen by the other clients' end-to-end tests), with
//! `LEASEHOOK_DEB` naming the .deb; without it, it fails. It refuses (fails) when a
//! leasehook package it did not install is on the machine, so it never purges an
//! operator's install.

#![cfg(feature = "package")]
#![cfg(test)]
#![allow(clippy::too_many_lines)]

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use leasehook_tests::world::{World, WorldOptions};

/// The DHCP clients' hooks: symlinks to the hook binary, which picks the client by
/// the name it runs under (`leasehook-hook`, relative as Debian policy asks).
const HOOK_LINKS: &[&str] = &[
    "/usr/libexec/leasehook/leasehook-dhclient",
    "/usr/libexec/leasehook/leasehook-networkd",
    "/usr/libexec/leasehook/leasehook-nm",
    "/usr/libexec/leasehook/leasehook-dhcpcd",
    "/usr/libexec/leasehook/leasehook-udhcpc",
];

/// The package's ELF files (issue 20: at most two): the CLI and the hook binary.
/// And what it may install in all (`Installed-Size`, KiB): issue 20's 8 MiB (five
/// shims and the CLI were 22,297 KiB; docs/packaging.md has today's numbers).
const ELF_FILES: &[&str] = &[
    "/usr/bin/leasehook",
    "/usr/libexec/leasehook/leasehook-hook",
];
const MAX_INSTALLED_KIB: u64 = 8 * 1024;

/// Every file the package installs (directories aside) with its mode; all owned
/// by root:root. The documentation is checked apart (one file per `docs/*.md`).
const FILES: &[(&str, u32)] = &[
    ("/usr/bin/leasehook", 0o755),
    ("/usr/libexec/leasehook/leasehook-hook", 0o755),
    ("/usr/libexec/leasehook/udhcpc.script", 0o755),
    ("/etc/dhcp/dhclient-exit-hooks.d/zz-leasehook", 0o644),
    (
        "/usr/lib/networkd-dispatcher/routable.d/50-leasehook",
        0o755,
    ),
    (
        "/usr/lib/networkd-dispatcher/degraded.d/50-leasehook",
        0o755,
    ),
    (
        "/usr/lib/networkd-dispatcher/no-carrier.d/50-leasehook",
        0o755,
    ),
    ("/usr/lib/networkd-dispatcher/off.d/50-leasehook", 0o755),
    ("/usr/lib/systemd/networkd.conf.d/leasehook.conf", 0o644),
    ("/etc/NetworkManager/dispatcher.d/90-leasehook", 0o755),
    ("/usr/lib/dhcpcd/dhcpcd-hooks/90-leasehook", 0o644),
    ("/usr/lib/udev/rules.d/90-leasehook.rules", 0o644),
    ("/usr/lib/systemd/system/leasehook-local.service", 0o644),
    ("/usr/lib/systemd/system/leasehook.service", 0o644),
    ("/usr/lib/systemd/system/leasehook-refresh.service", 0o644),
    ("/usr/lib/systemd/system/leasehook-refresh.timer", 0o644),
    ("/usr/lib/systemd/system/leasehook-refresh@.service", 0o644),
    ("/usr/lib/systemd/system/leasehook-watch.service", 0o644),
    (
        "/usr/lib/systemd/system/leasehook-wait-online.service",
        0o644,
    ),
    ("/etc/leasehook/config.yaml", 0o644),
    ("/etc/iproute2/rt_protos.d/leasehook.conf", 0o644),
    ("/usr/share/man/man1/leasehook.1.gz", 0o644),
    ("/usr/share/man/man1/leasehook-plan.1.gz", 0o644),
    ("/usr/share/man/man1/leasehook-apply.1.gz", 0o644),
    ("/usr/share/man/man1/leasehook-flush.1.gz", 0o644),
    ("/usr/share/man/man1/leasehook-status.1.gz", 0o644),
    ("/usr/share/man/man1/leasehook-refresh.1.gz", 0o644),
    ("/usr/share/man/man1/leasehook-detect.1.gz", 0o644),
    ("/usr/share/man/man1/leasehook-init.1.gz", 0o644),
    ("/usr/share/man/man1/leasehook-query.1.gz", 0o644),
    ("/usr/share/man/man1/leasehook-config.1.gz", 0o644),
    ("/usr/share/man/man1/leasehook-config-show.1.gz", 0o644),
    ("/usr/share/man/man1/leasehook-watch.1.gz", 0o644),
    ("/usr/share/man/man1/leasehook-explain.1.gz", 0o644),
    ("/usr/share/man/man5/leasehook.yaml.5.gz", 0o644),
    ("/usr/share/bash-completion/completions/leasehook", 0o644),
    ("/usr/share/zsh/vendor-completions/_leasehook", 0o644),
    ("/usr/share/fish/vendor_completions.d/leasehook.fish", 0o644),
    ("/usr/share/doc/leasehook/README.md.gz", 0o644),
    ("/usr/share/doc/leasehook/copyright", 0o644),
];

/// The files dpkg keeps as conffiles (everything the package puts in /etc).
const CONFFILES: &[&str] = &[
    "/etc/dhcp/dhclient-exit-hooks.d/zz-leasehook",
    "/etc/NetworkManager/dispatcher.d/90-leasehook",
    "/etc/leasehook/config.yaml",
    "/etc/iproute2/rt_protos.d/leasehook.conf",
];

/// What the postinst creates besides the package's files: the enable links
/// (deb-systemd-helper) and the empty drop-in folder.
const ENABLE_LINKS: &[(&str, &str)] = &[
    (
        "/etc/systemd/system/multi-user.target.wants/leasehook-local.service",
        "/usr/lib/systemd/system/leasehook-local.service",
    ),
    (
        "/etc/systemd/system/multi-user.target.wants/leasehook.service",
        "/usr/lib/systemd/system/leasehook.service",
    ),
    (
        "/etc/systemd/system/timers.target.wants/leasehook-refresh.timer",
        "/usr/lib/systemd/system/leasehook-refresh.timer",
    ),
    (
        "/etc/systemd/system/multi-user.target.wants/leasehook-watch.service",
        "/usr/lib/systemd/system/leasehook-watch.service",
    ),
];

/// Where to look for anything left behind: every file below these, before the
/// install and after the purge, must be the same set.
const WATCHED: &[&str] = &[
    "/etc",
    "/usr/bin",
    "/usr/lib",
    "/usr/libexec",
    "/usr/share/man",
    "/usr/share/doc",
    "/usr/share/bash-completion",
    "/usr/share/zsh",
    "/usr/share/fish",
    "/var/lib/systemd",
    "/var/lib/leasehook",
    "/run/leasehook",
];

/// Records that this test installed the package (so an interrupted run can be
/// told from an operator's install): a file in cargo's per-target temp folder.
fn marker() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("leasehook-package-test.installed")
}

/// `dpkg-query`'s status letters for leasehook: `None` when dpkg knows no such
/// package or it is not installed (not even its conffiles).
fn installed_state() -> Option<String> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${db:Status-Abbrev}", "leasehook"])
        .output()
        .expect("dpkg-query (is this Debian?)");
    let abbrev = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    // Second letter: n = not installed; anything else (i, c, h, ...) is there.
    (out.status.success() && abbrev.chars().nth(1).is_some_and(|c| c != 'n')).then_some(abbrev)
}

fn sh(cmd: &mut Command) -> (bool, String) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("failed to run {cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn purge(cmd: &mut Command) {
    let (ok, text) = sh(cmd.args(["dpkg", "--purge", "leasehook"]));
    assert!(ok, "dpkg --purge failed:\n{text}");
}

/// Purges the package when the test ends early (a failed assertion), so a
/// failing run leaves the machine as it found it.
struct Installed {
    done: bool,
}

impl Drop for Installed {
    fn drop(&mut self) {
        if !self.done {
            let _ = Command::new("dpkg").args(["--purge", "leasehook"]).status();
            let _ = std::fs::remove_file(marker());
        }
    }
}

fn list(roots: &[&str]) -> BTreeSet<String> {
    fn walk(p: &Path, out: &mut BTreeSet<String>) {
        let Ok(meta) = std::fs::symlink_metadata(p) else {
            return;
        };
        out.insert(p.display().to_string());
        if meta.is_dir() {
            for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
                walk(&e.path(), out);
            }
        }
    }
    let mut out = BTreeSet::new();
    for r in roots {
        walk(Path::new(r), &mut out);
    }
    // Namespaces this or another test made come and go; dpkg's own bookkeeping
    // is not the package's.
    out.retain(|p| !p.starts_with("/etc/netns") && !p.starts_with("/var/lib/dpkg"));
    out
}

fn workspace_docs() -> Vec<String> {
    leasehook_tests::packaged_docs()
}

/// The watcher runs on every instance (issue 35): its installed unit has no
/// condition, and the postinst starts it on a running systemd (cargo-deb's
/// `deb-systemd-invoke start`) as it does the refresh timer.
fn check_watch_unit() {
    let unit = std::fs::read_to_string("/usr/lib/systemd/system/leasehook-watch.service").unwrap();
    assert!(!unit.lines().any(|l| l.starts_with("Condition")), "{unit}");
    assert!(
        unit.contains("AF_NETLINK") && unit.contains("CAP_NET_ADMIN"),
        "{unit}"
    );
    let postinst = std::fs::read_to_string("/var/lib/dpkg/info/leasehook.postinst").unwrap();
    assert!(
        postinst
            .lines()
            .any(|l| l.contains("deb-systemd-invoke") && l.contains("leasehook-watch.service")),
        "the postinst does not start the watcher:\n{postinst}"
    );
}

fn check_installed_files() {
    check_watch_unit();
    let (ok, listing) = sh(Command::new("dpkg").args(["-L", "leasehook"]));
    assert!(ok, "dpkg -L: {listing}");
    let mut want: BTreeSet<String> = FILES.iter().map(|(p, _)| (*p).to_owned()).collect();
    want.extend(HOOK_LINKS.iter().map(|p| (*p).to_owned()));
    want.extend(workspace_docs());
    let mut have = BTreeSet::new();
    let mut elf_files = Vec::new();
    for path in listing.lines().filter(|l| l.starts_with('/')) {
        let meta = std::fs::symlink_metadata(path)
            .unwrap_or_else(|e| panic!("dpkg lists {path}, which is missing: {e}"));
        assert_eq!((meta.uid(), meta.gid()), (0, 0), "{path} is not root:root");
        if meta.is_dir() {
            // Folders dpkg made for us (or shares with other packages).
            assert_eq!(
                meta.mode() & 0o7777,
                0o755,
                "{path}: folder mode {:o}",
                meta.mode()
            );
            continue;
        }
        if meta.is_symlink() {
            assert!(
                HOOK_LINKS.contains(&path),
                "{path} is an unexpected symlink"
            );
            let target = std::fs::read_link(path).unwrap();
            assert_eq!(target, Path::new("leasehook-hook"), "{path}");
            have.insert(path.to_owned());
            continue;
        }
        assert!(meta.is_file(), "{path} is not a regular file");
        let elf = std::fs::read(path).unwrap().starts_with(b"\x7fELF");
        assert_eq!(elf, ELF_FILES.contains(&path), "{path}: ELF {elf}");
        if elf {
            elf_files.push(path.to_owned());
        }
        let mode = meta.mode() & 0o7777;
        let expected = FILES
            .iter()
            .find(|(p, _)| *p == path)
            .map_or(0o644, |(_, m)| *m);
        assert_eq!(mode, expected, "{path}: mode {mode:o}, want {expected:o}");
        have.insert(path.to_owned());
    }
    assert_eq!(
        have.difference(&want).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "installed but not expected"
    );
    assert_eq!(
        want.difference(&have).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "expected but not installed"
    );
    // The documentation is the tree's, compressed (gzip -n: reproducible).
    for doc in workspace_docs() {
        let (ok, text) = sh(Command::new("gzip").arg("-dc").arg(&doc));
        let name = doc.trim_start_matches("/usr/share/doc/leasehook/");
        let source = leasehook_tests::workspace_root()
            .join("docs")
            .join(name.trim_end_matches(".gz"));
        assert!(ok, "gzip -dc {doc}: {text}");
        assert_eq!(
            text,
            std::fs::read_to_string(&source).unwrap(),
            "{doc} is not {source:?} compressed"
        );
    }
    let (ok, text) = sh(Command::new("gzip")
        .arg("-dc")
        .arg("/usr/share/doc/leasehook/README.md.gz"));
    assert!(
        ok && text
            == std::fs::read_to_string(leasehook_tests::workspace_root().join("README.md"))
                .unwrap(),
        "README.md.gz is not README.md compressed"
    );
    // Exactly two ELF files (issue 20: at most two; the hooks are not the CLI).
    elf_files.sort();
    assert_eq!(elf_files, ELF_FILES, "the package's ELF files");

    let (ok, size) =
        sh(Command::new("dpkg-query").args(["-W", "-f=${Installed-Size}", "leasehook"]));
    let kib: u64 = size
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("Installed-Size: {size} ({ok})"));
    assert!(
        kib <= MAX_INSTALLED_KIB,
        "Installed-Size {kib} KiB, more than {MAX_INSTALLED_KIB}"
    );

    let (_, conffiles) =
        sh(Command::new("dpkg-query").args(["-W", "-f=${Conffiles}", "leasehook"]));
    let mut conf: Vec<&str> = conffiles
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    conf.sort_unstable();
    let mut want_conf = CONFFILES.to_vec();
    want_conf.sort_unstable();
    assert_eq!(conf, want_conf, "conffiles");

    for (link, target) in ENABLE_LINKS {
        let t = std::fs::read_link(link)
            .unwrap_or_else(|e| panic!("{link}: not enabled by the postinst: {e}"));
        // deb-systemd-helper names the unit by /lib/systemd/system/ when that is
        // the same folder (merged /usr): the link must resolve to our unit.
        assert!(
            t.is_absolute()
                && std::fs::canonicalize(link).unwrap() == std::fs::canonicalize(target).unwrap(),
            "{link} -> {t:?}, not {target}"
        );
    }
    let dropins = std::fs::metadata("/etc/leasehook/config.d").expect("config.d");
    assert!(dropins.is_dir() && dropins.mode() & 0o7777 == 0o755);
    assert_eq!(
        std::fs::read_dir("/etc/leasehook/config.d")
            .unwrap()
            .count(),
        0
    );
    assert_eq!(
        std::fs::read("/etc/leasehook/config.yaml").unwrap(),
        std::fs::read(leasehook_tests::workspace_root().join("hooks/config/config.yaml")).unwrap()
    );
}

fn check_man_and_completion() {
    for page in ["leasehook", "leasehook-plan", "leasehook-refresh"] {
        let (ok, text) = sh(Command::new("man")
            .args(["-P", "cat", page])
            .env("MANWIDTH", "100")
            .env("LC_ALL", "C.UTF-8"));
        assert!(ok, "man {page}: {text}");
        assert!(
            text.contains(&format!("{}(1)", page.to_uppercase())) && text.contains("SYNOPSIS"),
            "man {page}:\n{text}"
        );
    }
    let (ok, text) = sh(Command::new("man")
        .args(["-P", "cat", "5", "leasehook.yaml"])
        .env("MANWIDTH", "100")
        .env("LC_ALL", "C.UTF-8"));
    assert!(
        ok && text.contains("LEASEHOOK.YAML(5)") && text.contains("table_base"),
        "man 5 leasehook.yaml: {text}"
    );
    let (_, top) = sh(Command::new("man")
        .args(["-P", "cat", "leasehook"])
        .env("MANWIDTH", "200")
        .env("LC_ALL", "C.UTF-8"));
    for sub in [
        "plan",
        "apply",
        "flush",
        "status",
        "refresh",
        "detect",
        "init",
        "query",
        "config",
        "config-show",
    ] {
        assert!(
            top.contains(&format!("leasehook-{sub}(1)")),
            "{sub}:\n{top}"
        );
    }
    let (ok, text) = sh(Command::new("bash").args([
        "--norc",
        "-c",
        "source /usr/share/bash-completion/completions/leasehook && complete -p leasehook",
    ]));
    assert!(ok && text.contains("leasehook"), "bash completion: {text}");
    let (ok, text) = sh(Command::new("/usr/bin/leasehook").arg("--version"));
    assert!(ok && text.starts_with("leasehook "), "{text}");
}

fn dhclient_scenario_then_purge() {
    let mut w = World::new(
        "pkg",
        &WorldOptions {
            installed: true,
            ..WorldOptions::default()
        },
    );
    // The namespace sees the machine's /etc/dhcp: the installed hook, no copy.
    let (ok, hooks) = sh(w
        .inst
        .command("ls")
        .args(["-l", "/etc/dhcp/dhclient-exit-hooks.d/"]));
    assert!(ok && hooks.contains(" zz-leasehook\n"), "{hooks}");
    assert!(
        !Path::new("/etc/netns")
            .join(&w.inst.name)
            .join("dhcp")
            .exists()
    );

    w.bind("eth0", false);
    w.bind("eth1", false);
    w.wait_secondary_rules("the installed hook");
    let routes = w.our_routes();
    for want in [
        "default via 10.98.1.1 dev eth1 scope - src - table 10001 proto 176",
        "10.98.1.0/24 via - dev eth1 scope link src 10.98.1.20 table 10001 proto 176",
    ] {
        assert!(routes.iter().any(|r| r == want), "{want}: {routes:#?}");
    }
    // The installed /etc/iproute2/rt_protos.d/leasehook.conf names protocol 176.
    let (ok, rules) = sh(Command::new("ip").args(["-n", &w.inst.name, "rule"]));
    assert!(
        ok && rules.contains("from 10.98.1.20 lookup 10001 proto leasehook"),
        "ip rule with the package installed:\n{rules}"
    );
    assert!(
        w.inst
            .addresses()
            .contains(&"eth1 10.98.1.21/32".to_owned())
    );
    assert!(!w.our_rules().iter().any(|r| r.contains("10.98.0.")));
    assert_eq!(w.echo_from("10.98.1.20").as_deref(), Some("10.98.1.20"));
    assert_eq!(w.echo_from("10.98.1.21").as_deref(), Some("10.98.1.21"));
    assert_eq!(w.echo_from("10.98.0.10").as_deref(), Some("10.98.0.10"));
    assert!(w.log("eth1", false).contains("eth1 BOUND: "));
    // The installed shim keeps its state under the real /run/leasehook, and the
    // installed `leasehook status` reads it.
    assert!(Path::new("/run/leasehook/iface/eth1.json").exists());
    let (ok, status) = sh(w.inst.command("/usr/bin/leasehook").arg("status"));
    assert!(ok && status.contains("eth1"), "{status}");

    // Purge as on the instance: inside its namespace (where the rules are), with
    // dhclient still running. Only the prerm's `leasehook flush` removes them.
    purge(&mut w.inst.command("env"));
    w.assert_pbr_removed("purge");
    assert!(
        w.echo_from("10.98.1.21").is_none(),
        "traffic from the secondary address still works without leasehook"
    );
}

#[test]
fn install_check_run_the_dhclient_scenario_and_purge() {
    leasehook_tests::netns::require_root();
    let deb = std::env::var_os("LEASEHOOK_DEB").map(PathBuf::from).expect(
        "LEASEHOOK_DEB must name the .deb (scripts/test.sh builds it with `make deb` and sets it)",
    );
    assert!(deb.is_file(), "{deb:?} does not exist");

    if let Some(state) = installed_state() {
        assert!(
            marker().exists(),
            "a leasehook package ({state}) that this test did not install is on this machine: \
             refusing to install over it or purge it"
        );
        // A run of this test was interrupted after installing: take it out.
        purge(&mut Command::new("env"));
    }
    let before = list(WATCHED);

    std::fs::write(marker(), deb.display().to_string()).unwrap();
    let mut guard = Installed { done: false };
    let (ok, text) = sh(Command::new("dpkg").arg("-i").arg(&deb));
    assert!(ok, "dpkg -i failed:\n{text}");
    assert!(installed_state().is_some_and(|s| s.starts_with("ii")));

    check_installed_files();
    check_man_and_completion();
    dhclient_scenario_then_purge();

    // Nothing of the package is left: not its files, not the enable links and
    // deb-systemd-helper state, not the folders it made or its state.
    assert_eq!(installed_state(), None, "dpkg still knows the package");
    for (path, _) in FILES {
        assert!(!Path::new(path).exists(), "{path} left after purge");
    }
    for (link, _) in ENABLE_LINKS {
        assert!(std::fs::symlink_metadata(link).is_err(), "{link} left");
    }
    for dir in [
        "/etc/leasehook",
        "/var/lib/leasehook",
        "/run/leasehook",
        "/usr/libexec/leasehook",
        "/usr/share/doc/leasehook",
    ] {
        assert!(!Path::new(dir).exists(), "{dir} left after purge");
    }
    let after = list(WATCHED);
    assert_eq!(
        after.difference(&before).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "files left behind by the package"
    );
    assert_eq!(
        before.difference(&after).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "files the package removed that it had not installed"
    );
    guard.done = true;
    std::fs::remove_file(marker()).unwrap();
}

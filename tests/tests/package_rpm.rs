// SPDX-License-Identifier: Apache-2.0
//! The RPM (issue 24, "Show"), never installed into this machine's `/`:
//!
//! 1. `rpm -qlpv`, `rpm -qp --configfiles` and the file flags of the package
//!    `make rpm` built, against the explicit list below (path, type, mode, owner,
//!    `%config`/`noreplace`/`%doc`), and its scriptlets and relations;
//! 2. the scriptlets run by `/bin/sh` (dash, and bash, which is the RHEL family's
//!    `sh`) in a throwaway `chroot` with a stubbed `systemctl` and `leasehook`,
//!    row by row of [`TABLE`]: install, upgrade, erase, with and without a running
//!    systemd, the hooks' symlinks (%posttrans) included;
//! 3. `rpm --root DIR -i --nodeps --noscripts` into a throwaway root laid out like
//!    a RHEL `filesystem` package, every file checked; the RHEL dhclient hook
//!    (`/etc/dhcp/dhclient.d/leasehook.sh`) from that root run by real dhclient in
//!    the namespace lab the way RHEL's `dhclient-script` runs `dhclient.d`
//!    (every executable `*.sh` sourced by bash, then `NAME_config` or
//!    `NAME_restore`), with the shim from that root: rules installed, traffic
//!    passing, rules removed on RELEASE; then `rpm --root DIR -e` and nothing of
//!    the package is left.
//!
//! Compiled only with the `rpm` feature (scripts/test.sh runs it after the
//! Debian package test, `LEASEHOOK_RPM` naming the .rpm); needs root, `rpm`
//! (the Debian package), dash, bash, isc-dhcp-client and dnsmasq, and fails,
//! never skips, without them.

#![cfg(feature = "rpm")]
#![cfg(test)]
#![allow(clippy::too_many_lines, clippy::struct_excessive_bools)]

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Command;

use leasehook_tests::netns::TempDir;
use leasehook_tests::world::{World, WorldOptions};

/// Every file of the package but the documentation (one file per `docs/*.md`,
/// checked apart): path, `-` (a regular file), mode, and the file flags as `rpm
/// --qf %{FILEFLAGS:fflags}` prints them (`c` config, `n` noreplace, `d` doc).
/// Everything is root:root. The package lists no folders (cargo-generate-rpm
/// 0.21.1 cannot): rpm makes [`MADE_FOLDERS`] as it installs.
/// A file of the package: its path, type (`-`: a regular file), mode and
/// `rpm` flags.
type Entry = (&'static str, char, u32, &'static str);

/// An executable file.
const fn exe(path: &'static str) -> Entry {
    (path, '-', 0o755, "")
}

/// A file, not executable.
const fn file(path: &'static str) -> Entry {
    (path, '-', 0o644, "")
}

/// A documentation file (`%doc`, man pages).
const fn doc(path: &'static str) -> Entry {
    (path, '-', 0o644, "d")
}

/// A configuration file the administrator's changes survive (`%config(noreplace)`).
const fn config(path: &'static str) -> Entry {
    (path, '-', 0o644, "cn")
}

const ENTRIES: &[Entry] = &[
    // The two ELF files (ELF_FILES): the CLI, and the DHCP clients' hook binary
    // (the hooks' names are symlinks to it, see HOOK_LINKS).
    exe("/usr/bin/leasehook"),
    exe("/usr/libexec/leasehook/leasehook-hook"),
    exe("/usr/libexec/leasehook/udhcpc.script"),
    // Executable: RHEL's dhclient-script skips a dhclient.d/*.sh that is not.
    exe("/etc/dhcp/dhclient.d/leasehook.sh"),
    exe("/etc/NetworkManager/dispatcher.d/90-leasehook"),
    exe("/usr/lib/networkd-dispatcher/routable.d/50-leasehook"),
    exe("/usr/lib/networkd-dispatcher/degraded.d/50-leasehook"),
    exe("/usr/lib/networkd-dispatcher/no-carrier.d/50-leasehook"),
    exe("/usr/lib/networkd-dispatcher/off.d/50-leasehook"),
    file("/usr/lib/systemd/networkd.conf.d/leasehook.conf"),
    file("/usr/lib/dhcpcd/dhcpcd-hooks/90-leasehook"),
    file("/usr/lib/udev/rules.d/90-leasehook.rules"),
    file("/usr/lib/systemd/system/leasehook-local.service"),
    file("/usr/lib/systemd/system/leasehook.service"),
    file("/usr/lib/systemd/system/leasehook-refresh.service"),
    file("/usr/lib/systemd/system/leasehook-refresh.timer"),
    file("/usr/lib/systemd/system/leasehook-refresh@.service"),
    file("/usr/lib/systemd/system/leasehook-watch.service"),
    // What `systemctl preset` enables (%post's %systemd_post).
    file("/usr/lib/systemd/system-preset/80-leasehook.preset"),
    file("/usr/lib/systemd/system/leasehook-wait-online.service"),
    config("/etc/leasehook/config.yaml"),
    // The protocol number's name for `ip`: the code's, not %config.
    file("/etc/iproute2/rt_protos.d/leasehook.conf"),
    doc("/usr/share/man/man1/leasehook.1.gz"),
    doc("/usr/share/man/man1/leasehook-plan.1.gz"),
    doc("/usr/share/man/man1/leasehook-apply.1.gz"),
    doc("/usr/share/man/man1/leasehook-flush.1.gz"),
    doc("/usr/share/man/man1/leasehook-status.1.gz"),
    doc("/usr/share/man/man1/leasehook-refresh.1.gz"),
    doc("/usr/share/man/man1/leasehook-detect.1.gz"),
    doc("/usr/share/man/man1/leasehook-init.1.gz"),
    doc("/usr/share/man/man1/leasehook-query.1.gz"),
    doc("/usr/share/man/man1/leasehook-config.1.gz"),
    doc("/usr/share/man/man1/leasehook-config-show.1.gz"),
    doc("/usr/share/man/man1/leasehook-watch.1.gz"),
    doc("/usr/share/man/man5/leasehook.yaml.5.gz"),
    doc("/usr/share/man/man1/leasehook-explain.1.gz"),
    file("/usr/share/bash-completion/completions/leasehook"),
    file("/usr/share/zsh/site-functions/_leasehook"),
    file("/usr/share/fish/vendor_completions.d/leasehook.fish"),
    doc("/usr/share/doc/leasehook/README.md.gz"),
];

/// The DHCP clients' hooks: symlinks to `leasehook-hook` that `%posttrans`
/// makes and `%postun` removes on erase (cargo-generate-rpm 0.21.1 packages
/// regular files only), relative to the folder, as the .deb ships them.
const HOOK_LINKS: &[&str] = &[
    "usr/libexec/leasehook/leasehook-dhclient",
    "usr/libexec/leasehook/leasehook-networkd",
    "usr/libexec/leasehook/leasehook-nm",
    "usr/libexec/leasehook/leasehook-dhcpcd",
    "usr/libexec/leasehook/leasehook-udhcpc",
];
const HOOK_TARGET: &str = "leasehook-hook";

/// The package's ELF files (issue 20: at most two): the CLI and the hook binary.
const ELF_FILES: &[&str] = &[
    "/usr/bin/leasehook",
    "/usr/libexec/leasehook/leasehook-hook",
];

/// At most what the package installs, in bytes as `rpm -qp --qf %{SIZE}` counts
/// them: issue 20's 8 MiB (the five shims and the CLI were 22,297 KiB).
const MAX_SIZE: u64 = 8 * 1024 * 1024;

/// Makes the hooks' symlinks below `root` as `%posttrans` does.
fn make_hook_links(root: &Path) {
    for l in HOOK_LINKS {
        std::os::unix::fs::symlink(HOOK_TARGET, root.join(l)).unwrap();
    }
}

/// The folders rpm makes for the package's files in a RHEL base ([`BASE`]), 0755
/// root:root, and leaves after an erase (it removes only folders a package
/// lists): the package's own ones (`true`), which its `%postun` removes on
/// erase ([`TABLE`]), and the DHCP clients' hook folders, which stay.
const MADE_FOLDERS: &[(&str, bool)] = &[
    ("/etc/NetworkManager", false),
    ("/etc/NetworkManager/dispatcher.d", false),
    ("/etc/dhcp", false),
    ("/etc/dhcp/dhclient.d", false),
    ("/etc/iproute2", false),
    ("/etc/iproute2/rt_protos.d", false),
    ("/etc/leasehook", true),
    ("/usr/lib/dhcpcd", false),
    ("/usr/lib/dhcpcd/dhcpcd-hooks", false),
    ("/usr/lib/networkd-dispatcher", false),
    ("/usr/lib/networkd-dispatcher/degraded.d", false),
    ("/usr/lib/networkd-dispatcher/no-carrier.d", false),
    ("/usr/lib/networkd-dispatcher/off.d", false),
    ("/usr/lib/networkd-dispatcher/routable.d", false),
    ("/usr/lib/systemd/networkd.conf.d", false),
    ("/usr/libexec/leasehook", true),
    ("/usr/share/bash-completion", false),
    ("/usr/share/bash-completion/completions", false),
    ("/usr/share/doc/leasehook", true),
    ("/usr/share/fish", false),
    ("/usr/share/fish/vendor_completions.d", false),
    ("/usr/share/zsh", false),
    ("/usr/share/zsh/site-functions", false),
];

/// Files of the package that are the workspace's files unchanged.
const VERBATIM: &[(&str, &str)] = &[
    (
        "/etc/dhcp/dhclient.d/leasehook.sh",
        "hooks/dhclient/leasehook.sh",
    ),
    (
        "/etc/NetworkManager/dispatcher.d/90-leasehook",
        "hooks/networkmanager/90-leasehook",
    ),
    (
        "/usr/lib/networkd-dispatcher/off.d/50-leasehook",
        "hooks/networkd-dispatcher/50-leasehook",
    ),
    (
        "/usr/lib/dhcpcd/dhcpcd-hooks/90-leasehook",
        "hooks/dhcpcd/90-leasehook",
    ),
    ("/etc/leasehook/config.yaml", "hooks/config/config.yaml"),
    (
        "/etc/iproute2/rt_protos.d/leasehook.conf",
        "packaging/iproute2/leasehook.conf",
    ),
    (
        "/usr/lib/systemd/system/leasehook-refresh.timer",
        "hooks/systemd/leasehook-refresh.timer",
    ),
    (
        "/usr/lib/systemd/system-preset/80-leasehook.preset",
        "packaging/systemd/80-leasehook.preset",
    ),
];

/// What a RHEL system has before leasehook (the `filesystem`, systemd and udev
/// packages' folders): the package must not own these, and must leave them.
const BASE: &[&str] = &[
    "/etc",
    "/run",
    "/usr",
    "/usr/bin",
    "/usr/lib",
    "/usr/lib/systemd",
    "/usr/lib/systemd/system",
    "/usr/lib/systemd/system-preset",
    "/usr/lib/udev",
    "/usr/lib/udev/rules.d",
    "/usr/libexec",
    "/usr/share",
    "/usr/share/doc",
    "/usr/share/man",
    "/usr/share/man/man1",
    "/usr/share/man/man5",
    "/var",
    "/var/lib",
];

fn rpm_file() -> PathBuf {
    leasehook_tests::netns::require_root();
    let ok = Command::new("rpm")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(ok, "the rpm tests need `rpm` (Debian package rpm)");
    let rpm = std::env::var_os("LEASEHOOK_RPM").map(PathBuf::from).expect(
        "LEASEHOOK_RPM must name the .rpm (scripts/test.sh builds it with `make rpm` and sets it)",
    );
    assert!(rpm.is_file(), "{rpm:?} does not exist");
    rpm
}

/// Runs a command; (succeeded, stdout, stderr).
fn sh(cmd: &mut Command) -> (bool, String, String) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("failed to run {cmd:?}: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn query(rpm: &Path, args: &[&str]) -> String {
    let (ok, out, err) = sh(Command::new("rpm").arg("-qp").args(args).arg(rpm));
    assert!(ok, "rpm -qp {args:?}: {err}");
    out
}

fn docs() -> Vec<String> {
    leasehook_tests::packaged_docs()
}

/// Every entry the package must hold: path → (type, mode, flags).
fn expected() -> BTreeMap<String, (char, u32, String)> {
    let mut want: BTreeMap<String, (char, u32, String)> = ENTRIES
        .iter()
        .map(|(p, t, m, f)| ((*p).to_owned(), (*t, *m, (*f).to_owned())))
        .collect();
    for d in docs() {
        want.insert(d, ('-', 0o644, "d".to_owned()));
    }
    want
}

/// `-rwxr-xr-x` → ('-', 0o755).
fn parse_perms(s: &str) -> (char, u32) {
    let kind = s.chars().next().unwrap();
    let mode = s
        .chars()
        .skip(1)
        .zip([
            0o400, 0o200, 0o100, 0o040, 0o020, 0o010, 0o004, 0o002, 0o001,
        ])
        .filter(|(c, _)| *c != '-')
        .map(|(_, bit)| bit)
        .sum();
    (kind, mode)
}

#[test]
fn the_package_lists_every_file_with_its_mode_owner_and_flags() {
    let rpm = rpm_file();
    let want = expected();

    // rpm -qlpv: type, mode, owner, group, path.
    let mut have = BTreeMap::new();
    for line in query(&rpm, &["-lv"]).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert!(f.len() >= 9, "rpm -qlpv line: {line}");
        let path = f[f.len() - 1].to_owned();
        assert_eq!((f[2], f[3]), ("root", "root"), "{path} is not root:root");
        let (kind, mode) = parse_perms(f[0]);
        have.insert(path, (kind, mode));
    }
    let want_modes: BTreeMap<String, (char, u32)> = want
        .iter()
        .map(|(p, (t, m, _))| (p.clone(), (*t, *m)))
        .collect();
    for (path, (t, m)) in &want_modes {
        let got = have.get(path);
        assert_eq!(
            got,
            Some(&(*t, *m)),
            "{path}: want {t}{m:o}, the package has {got:?}"
        );
    }
    let extra: Vec<&String> = have.keys().filter(|p| !want.contains_key(*p)).collect();
    assert!(
        extra.is_empty(),
        "in the package but not expected: {extra:?}"
    );

    // The file flags (%config, noreplace, %doc).
    for line in query(&rpm, &["--qf", "[%{FILENAMES}\t%{FILEFLAGS:fflags}\n]"]).lines() {
        let (path, flags) = line.split_once('\t').unwrap();
        let (_, _, want_flags) = &want[path];
        assert_eq!(flags, want_flags, "{path}: file flags");
    }
    assert_eq!(
        query(&rpm, &["--configfiles"]).trim(),
        "/etc/leasehook/config.yaml",
        "config files"
    );

    // At most 8 MiB installed (the two ELF files are checked once installed).
    let size: u64 = query(&rpm, &["--qf", "%{SIZE}"]).trim().parse().unwrap();
    assert!(
        size <= MAX_SIZE,
        "the package installs {size} bytes, more than {MAX_SIZE}"
    );

    // The scriptlets are packaging/rpm/*, run by /bin/sh, and there are no others.
    for (tag, file) in [
        ("POSTIN", "post"),
        ("PREUN", "preun"),
        ("POSTUN", "postun"),
        ("POSTTRANS", "posttrans"),
    ] {
        let body = query(&rpm, &["--qf", &format!("%{{{tag}}}")]);
        let src = std::fs::read_to_string(
            leasehook_tests::workspace_root()
                .join("packaging/rpm")
                .join(file),
        )
        .unwrap();
        assert_eq!(
            body.trim_end(),
            src.trim_end(),
            "%{tag} is not packaging/rpm/{file}"
        );
        let prog = query(&rpm, &["--qf", &format!("%{{{tag}PROG}}")]);
        assert_eq!(prog.trim(), "/bin/sh", "%{tag}'s interpreter");
    }
    let scripts = query(&rpm, &["--scripts"]);
    let headers: Vec<&str> = scripts
        .lines()
        .filter(|l| l.contains("scriptlet (using"))
        .collect();
    assert_eq!(
        headers,
        [
            "postinstall scriptlet (using /bin/sh):",
            "preuninstall scriptlet (using /bin/sh):",
            "postuninstall scriptlet (using /bin/sh):",
            "posttrans scriptlet (using /bin/sh):",
        ],
        "{scripts}"
    );

    // Relations: never beside amazon-ec2-net-utils; libc and sh only.
    assert_eq!(query(&rpm, &["--conflicts"]).trim(), "amazon-ec2-net-utils");
    let requires = query(&rpm, &["--requires"]);
    assert!(requires.lines().any(|l| l == "/bin/sh"), "{requires}");
    assert!(
        requires.lines().all(|l| [
            "/bin/sh",
            "rpmlib(",
            "rtld(GNU_HASH)",
            "config(leasehook) = ",
            "libc.so.6",
            "libm.so.6",
            "libgcc_s.so.1"
        ]
        .iter()
        .any(|p| l.starts_with(p))),
        "a Requires beyond glibc, libgcc and sh: {requires}"
    );
    assert_eq!(query(&rpm, &["--recommends"]).trim(), "systemd");
    let info = query(&rpm, &["-i"]);
    assert!(
        info.contains("Name        : leasehook") && info.contains("Release     : 1"),
        "{info}"
    );
}

/// One row of the scriptlet table.
struct Row {
    script: &'static str,
    /// `$1`.
    arg: &'static str,
    /// `/run/systemd/system` exists.
    running: bool,
    /// A `systemctl` on PATH (a minimal container has none).
    systemctl: bool,
    /// `/usr/lib/systemd/systemd-update-helper` (systemd 246 and later: AL2023,
    /// RHEL 9, Fedora), which the `%systemd_*` macros call.
    helper: bool,
    /// The stubbed `systemctl`, helper and `leasehook` exit with status 1.
    failing: bool,
    /// The calls, in order.
    calls: &'static [&'static str],
    /// `/etc/leasehook`, `/var/lib/leasehook`, `/run/leasehook` and
    /// `/etc/default/leasehook` are removed.
    removes_state: bool,
}

const fn row(
    script: &'static str,
    arg: &'static str,
    running: bool,
    calls: &'static [&'static str],
    removes_state: bool,
) -> Row {
    Row {
        script,
        arg,
        running,
        systemctl: true,
        helper: true,
        failing: false,
        calls,
        removes_state,
    }
}

/// `%systemd_post`: the presets applied to the four units that have an `[Install]`.
const PRESET: &str = "systemd-update-helper install-system-units leasehook-local.service leasehook.service leasehook-refresh.timer leasehook-watch.service";
/// The same without systemd-update-helper (systemd before 246), as the macro did.
const PRESET_OLD: &str = "systemctl --no-reload preset leasehook-local.service leasehook.service leasehook-refresh.timer leasehook-watch.service";
/// %post starts the timer and the watcher on a first install, each only when
/// the presets enabled it.
const IS_ENABLED: &str = "systemctl --quiet is-enabled leasehook-refresh.timer";
const START: &str = "systemctl start leasehook-refresh.timer";
const IS_ENABLED_WATCH: &str = "systemctl --quiet is-enabled leasehook-watch.service";
const START_WATCH: &str = "systemctl start leasehook-watch.service";
/// `%systemd_preun`: disable, and stop on a running systemd (the helper decides).
const REMOVE: &str = "systemd-update-helper remove-system-units leasehook-local.service leasehook.service leasehook-refresh.timer leasehook-refresh.service leasehook-watch.service";
const DISABLE_NOW_OLD: &str = "systemctl --no-reload disable --now leasehook-local.service leasehook.service leasehook-refresh.timer leasehook-refresh.service leasehook-watch.service";
const DISABLE_OLD: &str = "systemctl --no-reload disable leasehook-local.service leasehook.service leasehook-refresh.timer leasehook-refresh.service leasehook-watch.service";
/// `%systemd_postun_with_restart`: the helper marks the timer and the watcher,
/// systemd's file trigger restarts them after the transaction.
const MARK_RESTART: &str = "systemd-update-helper mark-restart-system-units leasehook-refresh.timer leasehook-watch.service";
const TRY_RESTART_OLD: &str =
    "systemctl try-restart leasehook-refresh.timer leasehook-watch.service";
const FLUSH: &str = "leasehook flush";
const RELOAD: &str = "systemctl daemon-reload";

/// What each scriptlet does. rpm's order: install = %post 1; upgrade = the new
/// package's %post 2, then the old one's %preun 1 and %postun 1; erase = %preun
/// 0, the files go, %postun 0; %posttrans once the transaction is done (install
/// and upgrade). Every %posttrans row checks it made the hooks' symlinks; every
/// %postun row starts with them, and an erase must take them. The units go
/// through the `%systemd_*` macros' expansions: systemd-update-helper where
/// systemd has it (the rows by default), `systemctl` directly where not.
const TABLE: &[Row] = &[
    // After an install or an upgrade: the hooks' names link to the binary.
    row("posttrans", "1", true, &[], false),
    row("posttrans", "1", false, &[], false),
    // First install: the presets (no systemd needed); start the timer and the
    // watcher, each only when the presets enabled it.
    row(
        "post",
        "1",
        true,
        &[
            PRESET,
            RELOAD,
            IS_ENABLED,
            START,
            IS_ENABLED_WATCH,
            START_WATCH,
        ],
        false,
    ),
    row("post", "1", false, &[PRESET], false),
    // Upgrade: the operator's enablement stays; nothing started.
    row("post", "2", true, &[RELOAD], false),
    row("post", "2", false, &[], false),
    // The old package's %preun on upgrade: no stop, no flush, no disable.
    row("preun", "1", true, &[], false),
    row("preun", "1", false, &[], false),
    // Erase: disable and stop (the helper stops only on a running systemd),
    // then flush.
    row("preun", "0", true, &[REMOVE, FLUSH], false),
    row("preun", "0", false, &[REMOVE, FLUSH], false),
    // The old package's %postun on upgrade: restart the timer, keep the state.
    row("postun", "1", true, &[RELOAD, MARK_RESTART], false),
    row("postun", "1", false, &[MARK_RESTART], false),
    // After an erase: nothing of leasehook's state is left.
    row("postun", "0", true, &[RELOAD], true),
    row("postun", "0", false, &[], true),
    // systemd without systemd-update-helper: the macros' older expansions.
    Row {
        helper: false,
        ..row(
            "post",
            "1",
            true,
            &[
                PRESET_OLD,
                RELOAD,
                IS_ENABLED,
                START,
                IS_ENABLED_WATCH,
                START_WATCH,
            ],
            false,
        )
    },
    Row {
        helper: false,
        ..row("post", "1", false, &[PRESET_OLD], false)
    },
    Row {
        helper: false,
        ..row("preun", "0", true, &[DISABLE_NOW_OLD, FLUSH], false)
    },
    Row {
        helper: false,
        ..row("preun", "0", false, &[DISABLE_OLD, FLUSH], false)
    },
    Row {
        helper: false,
        ..row("postun", "1", true, &[RELOAD, TRY_RESTART_OLD], false)
    },
    Row {
        helper: false,
        ..row("postun", "1", false, &[], false)
    },
    // A failing systemctl, helper or flush never fails the transaction; a timer
    // the presets left disabled (is-enabled fails) is not started.
    Row {
        failing: true,
        ..row(
            "post",
            "1",
            true,
            &[PRESET, RELOAD, IS_ENABLED, IS_ENABLED_WATCH],
            false,
        )
    },
    Row {
        failing: true,
        ..row("preun", "0", true, &[REMOVE, FLUSH], false)
    },
    Row {
        failing: true,
        ..row("postun", "1", true, &[RELOAD, MARK_RESTART], false)
    },
    // No systemd at all (a container): install and erase still work.
    Row {
        systemctl: false,
        helper: false,
        ..row("post", "1", false, &[], false)
    },
    Row {
        systemctl: false,
        helper: false,
        ..row("preun", "0", false, &[FLUSH], false)
    },
    Row {
        systemctl: false,
        helper: false,
        ..row("postun", "0", true, &[], true)
    },
];

/// Copies `bin` and the libraries `ldd` names into `root` at the same paths.
fn copy_with_libs(bin: &Path, root: &Path, as_path: &str) {
    let dest = root.join(as_path.trim_start_matches('/'));
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::copy(bin, &dest).unwrap_or_else(|e| panic!("{bin:?}: {e}"));
    let (ok, out, err) = sh(Command::new("ldd").arg(bin));
    assert!(ok, "ldd {bin:?}: {err}");
    for lib in out.lines().filter_map(|l| {
        let l = l.trim();
        l.split_once("=> ")
            .map_or(Some(l), |(_, r)| Some(r))
            .and_then(|r| r.split_whitespace().next())
            .filter(|p| p.starts_with('/'))
    }) {
        let to = root.join(lib.trim_start_matches('/'));
        if !to.exists() {
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(lib, &to).unwrap_or_else(|e| panic!("{lib}: {e}"));
        }
    }
}

fn write_exec(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

const STATE: &[&str] = &[
    "etc/leasehook/config.yaml.rpmsave",
    "etc/leasehook/config.d/10-site.yaml",
    "etc/default/leasehook",
    "var/lib/leasehook/data/instance-id",
    "run/leasehook/iface/eth1.json",
];

/// The package's own folders besides `/etc/leasehook` (rpm leaves them empty).
const OWN_FOLDERS: &[&str] = &["usr/libexec/leasehook", "usr/share/doc/leasehook"];

/// Runs one row's scriptlet (extracted from the package) with `shell` as
/// `/bin/sh` in a fresh chroot; the calls it made and whether the state is left.
fn run_row(shell: &Path, body: &str, r: &Row) -> (Vec<String>, bool) {
    let dir = TempDir::new("rpm-scriptlet");
    let root = &dir.0;
    copy_with_libs(shell, root, "/bin/sh");
    copy_with_libs(Path::new("/bin/rm"), root, "/bin/rm");
    // The scriptlets send output to /dev/null, as every system has it.
    std::fs::create_dir_all(root.join("dev")).unwrap();
    let (ok, _, err) = sh(Command::new("mknod")
        .args(["-m", "666"])
        .arg(root.join("dev/null"))
        .args(["c", "1", "3"]));
    assert!(ok, "mknod: {err}");
    for tool in ["rmdir", "mkdir", "chmod", "ln"] {
        copy_with_libs(&Path::new("/bin").join(tool), root, &format!("/bin/{tool}"));
    }
    let status = if r.failing { "1" } else { "0" };
    if r.systemctl {
        write_exec(
            &root.join("usr/bin/systemctl"),
            &format!("#!/bin/sh\necho \"systemctl $*\" >> /calls\nexit {status}\n"),
        );
    }
    if r.helper {
        write_exec(
            &root.join("usr/lib/systemd/systemd-update-helper"),
            &format!("#!/bin/sh\necho \"systemd-update-helper $*\" >> /calls\nexit {status}\n"),
        );
    }
    write_exec(
        &root.join("usr/bin/leasehook"),
        &format!("#!/bin/sh\necho \"leasehook $*\" >> /calls\nexit {status}\n"),
    );
    if r.running {
        std::fs::create_dir_all(root.join("run/systemd/system")).unwrap();
    }
    for s in STATE {
        let p = root.join(s);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "x").unwrap();
    }
    // The package's own folders, emptied by rpm before %postun; a client's.
    for d in OWN_FOLDERS.iter().chain(&["etc/dhcp/dhclient.d"]) {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    // Left by %posttrans; rpm does not own them, so they are still there.
    if r.script == "postun" {
        make_hook_links(root);
    }
    std::fs::write(root.join("scriptlet"), body).unwrap();
    let (ok, out, err) = sh(Command::new("chroot")
        .arg(root)
        .args(["/bin/sh", "/scriptlet", r.arg])
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"));
    assert!(ok, "{} {} ({shell:?}) failed: {out}{err}", r.script, r.arg);
    let calls = std::fs::read_to_string(root.join("calls"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect();
    let left: Vec<bool> = STATE.iter().map(|s| root.join(s).exists()).collect();
    assert!(
        left.iter().all(|l| *l) || left.iter().all(|l| !*l),
        "{} {}: part of the state removed: {left:?}",
        r.script,
        r.arg
    );
    // The removal takes the folders, not just the files, and never a client's.
    if left[0] {
        for d in OWN_FOLDERS {
            assert!(root.join(d).is_dir(), "{} {}: {d} removed", r.script, r.arg);
        }
    } else {
        for d in ["etc/leasehook", "var/lib/leasehook", "run/leasehook"]
            .iter()
            .chain(OWN_FOLDERS)
        {
            assert!(!root.join(d).exists(), "{d} left");
        }
    }
    assert!(
        root.join("etc/dhcp/dhclient.d").is_dir(),
        "a client's folder removed"
    );
    // %posttrans links the hooks' names; only an erase takes them.
    if r.script == "posttrans" || (r.script == "postun" && left[0]) {
        for l in HOOK_LINKS {
            let t = std::fs::read_link(root.join(l));
            assert_eq!(
                t.ok().as_deref(),
                Some(Path::new(HOOK_TARGET)),
                "{} {}: {l}",
                r.script,
                r.arg
            );
        }
    }
    // %post makes the drop-in folder, on install and upgrade alike.
    if r.script == "post" {
        let m = std::fs::metadata(root.join("etc/leasehook/config.d")).expect("config.d");
        assert!(m.is_dir() && m.mode() & 0o7777 == 0o755, "config.d");
    }
    (calls, left[0])
}

#[test]
fn scriptlets_do_what_the_table_says() {
    let rpm = rpm_file();
    let bodies: BTreeMap<&str, String> = [
        ("post", "POSTIN"),
        ("preun", "PREUN"),
        ("postun", "POSTUN"),
        ("posttrans", "POSTTRANS"),
    ]
    .into_iter()
    .map(|(name, tag)| (name, query(&rpm, &["--qf", &format!("%{{{tag}}}")])))
    .collect();
    for shell in ["/usr/bin/dash", "/usr/bin/bash"] {
        assert!(Path::new(shell).exists(), "{shell} is needed");
        for r in TABLE {
            let (calls, state_left) = run_row(Path::new(shell), &bodies[r.script], r);
            let what = format!(
                "{} {} (shell {shell}, systemd {}, systemctl {}, helper {}, failing {})",
                r.script,
                r.arg,
                if r.running { "running" } else { "not running" },
                r.systemctl,
                r.helper,
                r.failing
            );
            assert_eq!(calls, r.calls, "{what}: calls");
            assert_eq!(!state_left, r.removes_state, "{what}: state removed?");
        }
    }
}

/// Every path below `root` (as `/...`), the rpm database's contents aside.
fn tree(root: &Path) -> BTreeMap<String, std::fs::Metadata> {
    fn walk(root: &Path, p: &Path, out: &mut BTreeMap<String, std::fs::Metadata>) {
        let meta = std::fs::symlink_metadata(p).unwrap();
        let rel = format!("/{}", p.strip_prefix(root).unwrap().display());
        if rel.starts_with("/var/lib/rpm/") {
            return;
        }
        let is_dir = meta.is_dir();
        out.insert(rel, meta);
        if is_dir {
            for e in std::fs::read_dir(p).unwrap().flatten() {
                walk(root, &e.path(), out);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out.remove("/");
    out
}

fn rpm_root(root: &Path) -> Command {
    let mut c = Command::new("rpm");
    c.arg("--root").arg(root).args(["--dbpath", "/var/lib/rpm"]);
    c
}

/// The exit hook that makes Debian's dhclient-script (which never reads
/// `dhclient.d`) run it the way RHEL's does: on a configure reason every
/// executable `/etc/dhcp/dhclient.d/*.sh` is sourced by bash and its
/// `NAME_config` called, on a deconfigure reason `NAME_restore`. `SHIM` is the
/// shim the package installed.
const RHEL_DHCLIENT_D: &str = r#"# Test scaffolding: RHEL's dhclient.d loop, run from Debian's exit hooks.
case "$reason" in
BOUND|RENEW|REBIND|REBOOT|BOUND6|RENEW6|REBIND6) rhel_action=config ;;
EXPIRE|FAIL|RELEASE|STOP|EXPIRE6|RELEASE6|STOP6) rhel_action=restore ;;
*) rhel_action= ;;
esac
if [ -n "$rhel_action" ]; then
    echo "dhclient.d: $reason -> $rhel_action" >&2
    LEASEHOOK_DHCLIENT=@SHIM@ bash -c '
        for f in /etc/dhcp/dhclient.d/*.sh; do
            if [ -x "$f" ]; then
                name=${f%.sh}
                name=${name##*/}
                . "$f"
                echo "dhclient.d: ${name}_$1" >&2
                "${name}_$1"
            fi
        done' dhclient-d "$rhel_action"
fi
"#;

#[test]
fn install_into_a_throwaway_root_run_the_rhel_dhclient_hook_then_erase() {
    let rpm = rpm_file();
    let dir = TempDir::new("rpm-root");
    let root = dir.0.join("root");
    for d in BASE {
        std::fs::create_dir_all(root.join(d.trim_start_matches('/'))).unwrap();
    }
    // rpm resolves the files' owners in the root's own user database.
    std::fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    std::fs::write(root.join("etc/group"), "root:x:0:\n").unwrap();
    let (ok, _, err) = sh(rpm_root(&root).arg("--initdb"));
    assert!(ok, "rpm --initdb: {err}");
    let before: BTreeSet<String> = tree(&root).into_keys().collect();

    let (ok, out, err) = sh(rpm_root(&root)
        .args(["-i", "--nodeps", "--noscripts"])
        .arg(&rpm));
    assert!(ok, "rpm --root -i: {out}{err}");
    let (ok, out, _) = sh(rpm_root(&root).args(["-q", "leasehook"]));
    assert!(ok && out.starts_with("leasehook-"), "{out}");
    // rpm checks every installed file against its header: no output.
    let (ok, out, err) = sh(rpm_root(&root).args(["-V", "--nodeps", "leasehook"]));
    assert!(ok && out.is_empty(), "rpm -V: {out}{err}");

    // Exactly the package's files, at their modes, root:root; the base folders
    // are left as they were.
    let want = expected();
    let installed = tree(&root);
    let mut new = BTreeSet::new();
    let mut elf_files = Vec::new();
    for (path, meta) in &installed {
        if before.contains(path) {
            continue;
        }
        if meta.is_dir() && MADE_FOLDERS.iter().any(|(f, _)| f == path) {
            assert_eq!((meta.uid(), meta.gid()), (0, 0), "{path} is not root:root");
            assert_eq!(
                meta.mode() & 0o7777,
                0o755,
                "{path}: folder mode {:o}",
                meta.mode()
            );
            continue;
        }
        new.insert(path.clone());
        let Some((kind, mode, _)) = want.get(path) else {
            panic!("{path} installed but not expected");
        };
        assert_eq!((meta.uid(), meta.gid()), (0, 0), "{path} is not root:root");
        assert_eq!(
            if meta.is_dir() {
                'd'
            } else if meta.is_file() {
                '-'
            } else {
                '?'
            },
            *kind,
            "{path}: type"
        );
        assert_eq!(
            meta.mode() & 0o7777,
            *mode,
            "{path}: mode {:o}",
            meta.mode()
        );
        let elf = std::fs::read(root.join(path.trim_start_matches('/')))
            .unwrap()
            .starts_with(b"\x7fELF");
        assert_eq!(elf, ELF_FILES.contains(&path.as_str()), "{path}: ELF {elf}");
        if elf {
            elf_files.push(path.clone());
        }
    }
    // Exactly two ELF files (issue 20: at most two; the hooks are not the CLI).
    elf_files.sort();
    assert_eq!(elf_files, ELF_FILES, "the package's ELF files");
    let missing: Vec<&String> = want.keys().filter(|p| !new.contains(*p)).collect();
    assert!(
        missing.is_empty(),
        "expected but not installed: {missing:?}"
    );
    for (installed, src) in VERBATIM {
        assert_eq!(
            std::fs::read(root.join(installed.trim_start_matches('/'))).unwrap(),
            std::fs::read(leasehook_tests::workspace_root().join(src)).unwrap(),
            "{installed} is not {src}"
        );
    }
    let (ok, out, _) = sh(Command::new(root.join("usr/bin/leasehook")).arg("--version"));
    assert!(ok && out.starts_with("leasehook "), "{out}");

    // --noscripts: the hooks' symlinks, as %posttrans makes them (the scriptlet
    // table runs %posttrans itself); each is that client's front end.
    make_hook_links(&root);
    for l in HOOK_LINKS {
        let (ok, out, err) = sh(Command::new(root.join(l)).arg("--help"));
        let name = Path::new(l).file_name().unwrap().to_string_lossy();
        assert!(ok && out.contains(&*name), "{l} --help: {out}{err}");
    }
    rhel_dhclient_scenario(&root);

    let (ok, out, err) = sh(rpm_root(&root).args(["-e", "--nodeps", "--noscripts", "leasehook"]));
    assert!(ok, "rpm --root -e: {out}{err}");
    // What %postun does with them on erase (the scriptlet table shows it).
    for l in HOOK_LINKS {
        std::fs::remove_file(root.join(l)).unwrap();
    }
    let (ok, _, _) = sh(rpm_root(&root).args(["-q", "leasehook"]));
    assert!(!ok, "rpm still knows leasehook after the erase");
    // Only the folders rpm made and does not remove: the package's own ones go
    // with %postun (the scriptlet table shows it), the clients' stay.
    let after: BTreeSet<String> = tree(&root).into_keys().collect();
    let folders: Vec<&str> = MADE_FOLDERS.iter().map(|(f, _)| *f).collect();
    assert_eq!(
        after
            .difference(&before)
            .map(String::as_str)
            .collect::<Vec<_>>(),
        folders,
        "left behind by the erase (besides the folders rpm made)"
    );
    for f in &folders {
        let left: Vec<_> = std::fs::read_dir(root.join(f.trim_start_matches('/')))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| !p.is_dir())
            .collect();
        assert!(
            left.is_empty(),
            "{f} is not empty after the erase: {left:?}"
        );
    }
    assert_eq!(
        before.difference(&after).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "removed by the erase but not the package's"
    );
}

/// Real dhclient in the lab runs the packaged `dhclient.d/leasehook.sh` through
/// RHEL's loop, with the packaged shim.
fn rhel_dhclient_scenario(root: &Path) {
    let mut w = World::new("rpm", &WorldOptions::default());
    let dhcp = PathBuf::from("/etc/netns").join(&w.inst.name).join("dhcp");
    // The Debian hook is not in the RPM: only the RHEL loop may run leasehook.
    std::fs::remove_file(dhcp.join(leasehook_tests::world::DHCLIENT_HOOK_NAME)).unwrap();
    let shim = root.join("usr/libexec/leasehook/leasehook-dhclient");
    std::fs::write(
        dhcp.join("dhclient-exit-hooks.d/rhel-dhclient-d"),
        RHEL_DHCLIENT_D.replace("@SHIM@", &shim.display().to_string()),
    )
    .unwrap();
    std::fs::create_dir_all(dhcp.join("dhclient.d")).unwrap();
    // fs::copy keeps the mode the package gave the hook.
    std::fs::copy(
        root.join("etc/dhcp/dhclient.d/leasehook.sh"),
        dhcp.join("dhclient.d/leasehook.sh"),
    )
    .unwrap();

    w.bind("eth0", false);
    w.bind("eth1", false);
    w.wait_secondary_rules("dhclient.d/leasehook.sh");
    let log = w.log("eth1", false);
    assert!(
        log.contains("dhclient.d: leasehook_config") && log.contains("eth1 BOUND: "),
        "{log}"
    );
    let routes = w.our_routes();
    for want in [
        "default via 10.98.1.1 dev eth1 scope - src - table 10001 proto 176",
        "10.98.1.0/24 via - dev eth1 scope link src 10.98.1.20 table 10001 proto 176",
    ] {
        assert!(routes.iter().any(|r| r == want), "{want}: {routes:#?}");
    }
    assert!(
        w.inst
            .addresses()
            .contains(&"eth1 10.98.1.21/32".to_owned())
    );
    assert!(!w.our_rules().iter().any(|r| r.contains("10.98.0.")));
    assert_eq!(w.echo_from("10.98.1.20").as_deref(), Some("10.98.1.20"));
    assert_eq!(w.echo_from("10.98.1.21").as_deref(), Some("10.98.1.21"));
    assert_eq!(w.echo_from("10.98.0.10").as_deref(), Some("10.98.0.10"));

    // RELEASE: RHEL's script calls leasehook_restore, which takes it all out.
    w.dhclient_end("eth1", false, true);
    let log = w.log("eth1", false);
    assert!(log.contains("dhclient.d: leasehook_restore"), "{log}");
    w.assert_pbr_removed("RELEASE");
    assert!(w.echo_from("10.98.1.21").is_none());
}

// SPDX-License-Identifier: Apache-2.0
//! The manual pages and shell completion scripts of `leasehook`, made from the same
//! clap definition that parses its command line (`cli/src/cli.rs`), so they
//! cannot drift from `--help`. [`man_pages`] and [`completion`] are pure;
//! [`write()`] performs IO: it writes their output into a folder.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;
use clap_complete::Shell;
use roff::{Roff, bold, italic, roman};

/// The program name every page and script is made for.
const BIN: &str = "leasehook";

/// Exit codes of every subcommand (`init` adds 3, see its page).
const EXIT_STATUS: &[(&str, &str)] = &[
    ("0", "Success."),
    (
        "1",
        "A runtime error: an unreadable or malformed file, a netlink or IMDS failure, bad input. One line on standard error says what.",
    ),
    ("2", "Bad usage (reported by the argument parser)."),
    (
        "3",
        "init only: no datasource answered and no usable cache stood in.",
    ),
];

/// The files the top-level page lists.
const FILES: &[(&str, &str)] = &[
    (
        "/etc/leasehook/config.yaml",
        "Settings; every key is listed there, commented out at its default.",
    ),
    (
        "/etc/leasehook/config.d/*.yaml",
        "More settings, read after config.yaml in lexical order.",
    ),
    (
        "/run/leasehook/",
        "Run-time state: the applied plan per interface (iface/), per-interface locks (lock/), pending hand-overs to a worker (pending/), the IMDS token cache, boot.json, instance-data.json (0644) and instance-data-sensitive.json (0600).",
    ),
    (
        "/var/lib/leasehook/",
        "The datasource cache: instances/INSTANCE-ID/datasource.json, the instance link, data/instance-id and data/previous-instance-id.",
    ),
    (
        "/usr/libexec/leasehook/",
        "The DHCP clients' hook binary leasehook-hook, the names the hooks run it as (leasehook-dhclient, leasehook-networkd, leasehook-nm, leasehook-dhcpcd, leasehook-udhcpc: symlinks to it) and the udhcpc script.",
    ),
    (
        "/etc/dhcp/dhclient-exit-hooks.d/zz-leasehook",
        "The ISC dhclient exit hook (sourced by dhclient-script).",
    ),
    (
        "/usr/lib/networkd-dispatcher/*.d/50-leasehook",
        "The networkd-dispatcher scripts (routable.d, degraded.d, no-carrier.d, off.d).",
    ),
    (
        "/usr/lib/systemd/networkd.conf.d/leasehook.conf",
        "Keeps systemd-networkd from removing leasehook's rules and routes.",
    ),
    (
        "/etc/NetworkManager/dispatcher.d/90-leasehook",
        "The NetworkManager dispatcher script; its settings come from /etc/default/leasehook.",
    ),
    (
        "/usr/lib/dhcpcd/dhcpcd-hooks/90-leasehook",
        "The dhcpcd hook.",
    ),
    (
        "/usr/lib/systemd/system/leasehook-local.service, leasehook.service",
        "The boot stages (leasehook init --local, leasehook init).",
    ),
    (
        "/usr/lib/systemd/system/leasehook-refresh.timer",
        "Runs leasehook refresh every minute.",
    ),
    (
        "/usr/lib/udev/rules.d/90-leasehook.rules",
        "Flushes an interface's rules when its link is removed.",
    ),
    (
        "/usr/share/doc/leasehook/",
        "The documentation (the planner, apply, the clients, the boot stage).",
    ),
];

/// Other pages the top-level page points to, after the subcommands' own.
const SEE_ALSO_EXTERNAL: &[(&str, &str)] = &[
    ("ip-rule", "8"),
    ("ip-route", "8"),
    ("dhclient-script", "8"),
    ("networkd-dispatcher", "8"),
    ("NetworkManager-dispatcher", "8"),
    ("dhcpcd-run-hooks", "8"),
    ("udhcpc", "8"),
];

/// One manual page per visible command: `(file name, roff)`, the top-level page
/// first. Pure.
pub(crate) fn man_pages(cmd: clap::Command) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut cmd = cmd.name(BIN).disable_help_subcommand(true);
    // Building gives each subcommand its display name (`leasehook-plan`), which
    // names its page.
    cmd.build();
    let version = cmd.get_version().unwrap_or_default().to_owned();
    // Every visible subcommand at any depth (`config show` too), parents first.
    let mut subs: Vec<clap::Command> = Vec::new();
    let mut todo: Vec<clap::Command> = visible(&cmd);
    todo.reverse();
    while let Some(sub) = todo.pop() {
        let mut children = visible(&sub);
        children.reverse();
        todo.extend(children);
        subs.push(sub);
    }
    let sub_names: Vec<String> = subs.iter().map(page_name).collect();

    let mut pages = Vec::with_capacity(subs.len() + 1);
    let mut extra = Roff::new();
    exit_status(&mut extra);
    environment(&mut extra);
    extra.control("SH", ["FILES"]);
    for (path, what) in FILES {
        extra
            .control("TP", [])
            .text([bold(*path)])
            .text([roman(*what)]);
    }
    let mut see: Vec<(&str, &str)> = sub_names.iter().map(|n| (n.as_str(), "1")).collect();
    see.push((CONFIG_PAGE, "5"));
    see.extend_from_slice(SEE_ALSO_EXTERNAL);
    see_also(&mut extra, &see);
    pages.push(page(&cmd, &extra, &version)?);

    for sub in &subs {
        let mut extra = Roff::new();
        if sub.get_name() == "refresh" {
            environment(&mut extra);
        }
        let mut see = vec![(BIN, "1")];
        if page_name(sub).starts_with("leasehook-config") {
            see.push((CONFIG_PAGE, "5"));
        }
        see_also(&mut extra, &see);
        pages.push(page(sub, &extra, &version)?);
    }
    pages.push(config_page(&version));
    Ok(pages)
}

/// The configuration file's page, `leasehook.yaml(5)` (`leasehook-config(1)` is
/// the `config` subcommand's).
pub(crate) const CONFIG_PAGE: &str = "leasehook.yaml";

/// What the configuration page says before and after the keys. Pure text; the
/// keys themselves come from [`leasehook_core::config::KEYS`], the table the
/// files are parsed with, so the page cannot drift from the parser.
const CONFIG_DESCRIPTION: &[&str] = &[
    "Every leasehook program (the boot stage, the admin commands, the DHCP clients' hooks and the refresh timer) reads the same settings, merged from these layers, a later one winning a key: the built-in defaults; /etc/leasehook/config.yaml; /etc/leasehook/config.d/*.yaml in lexical order of the file names (names not ending in .yaml are skipped); the LEASEHOOK_* environment variables; command-line flags.",
    "The files are YAML, read as YAML 1.1 (yes, no, on and off are booleans). Nested keys are written nested: imds.budget_s is budget_s under imds. A key with no value, or null, is unset and takes the value of the layers below. The package's config.yaml lists every key commented out at its default: an empty file behaves the same.",
    "The files are read strictly. An unknown key, a repeated key, or a value of the wrong type or out of range is an error naming the file, the line and the key; nothing of the configuration is used then: the hooks change nothing and exit 2, the other commands say so and fail.",
    "leasehook config show prints the merged settings, each with where it came from; its YAML output is itself a valid configuration file. configuration.md.gz in /usr/share/doc/leasehook/ explains every key at length.",
];

/// An example drop-in, after the keys.
const CONFIG_EXAMPLE: &str = "# /etc/leasehook/config.d/50-site.yaml\n\
table_base: 20000\n\
unmanaged: [eth3, \"02:00:00:00:00:09\"]\n\
imds:\n  budget_s: 10\n";

/// `leasehook.yaml.5`: the configuration file, every key of
/// [`leasehook_core::config::KEYS`] with its environment variable and help
/// (which states its default). Pure.
pub(crate) fn config_page(version: &str) -> (String, Vec<u8>) {
    use leasehook_core::config::{CONFIG_ENV, KEYS, ROOT_ENV};
    let mut r = Roff::new();
    r.control(
        "TH",
        [
            CONFIG_PAGE.to_uppercase().as_str(),
            "5",
            "",
            format!("{BIN} {version}").as_str(),
            "leasehook manual",
        ],
    );
    r.control("SH", ["NAME"]);
    r.text([roman(format!(
        "{CONFIG_PAGE} - the configuration of leasehook"
    ))]);
    r.control("SH", ["SYNOPSIS"]);
    r.text([bold("/etc/leasehook/config.yaml")]);
    r.control("br", []);
    r.text([bold("/etc/leasehook/config.d/*.yaml")]);
    r.control("SH", ["DESCRIPTION"]);
    for (i, para) in CONFIG_DESCRIPTION.iter().enumerate() {
        if i > 0 {
            r.control("PP", []);
        }
        r.text([roman(*para)]);
    }
    r.control("SH", ["KEYS"]);
    for key in KEYS.iter() {
        r.control("TP", []);
        r.text([bold(key.name)]);
        r.text([roman(key.help)]);
        if let Some(env) = key.env {
            r.control("br", []);
            r.text([roman("Environment: "), bold(env), roman(".")]);
        }
    }
    r.control("TP", []);
    r.text([bold("datasource."), italic("NAME"), bold(".fallback")]);
    r.text([roman(
        "Whether the cached datasource NAME (AliYun, Ec2, LXD, NoCloud, ...) may stand in when none answers at boot; wins over fallback for that datasource (default: fallback's value). Files only.",
    )]);
    r.control("SH", ["ENVIRONMENT"]);
    r.text([roman(
        "Each key's variable is named with it above (lists are comma-separated). Besides them:",
    )]);
    for (var, what) in [
        (
            ROOT_ENV,
            "prefix of every file path, the configuration files included (default /; for tests and images)",
        ),
        (
            CONFIG_ENV,
            "read this one file instead of config.yaml and config.d (/dev/null: no file, the defaults)",
        ),
    ] {
        r.control("TP", []).text([bold(var)]).text([roman(what)]);
    }
    r.control("SH", ["EXAMPLE"]);
    r.control("nf", []);
    r.control("RS", ["4"]);
    for line in CONFIG_EXAMPLE.lines() {
        r.text([roman(line)]);
    }
    r.control("RE", []);
    r.control("fi", []);
    see_also(&mut r, &[(BIN, "1"), ("leasehook-config-show", "1")]);
    (format!("{CONFIG_PAGE}.5"), ascii(r.to_roff().as_bytes()))
}

/// A command's visible subcommands (never clap's own `help`).
fn visible(cmd: &clap::Command) -> Vec<clap::Command> {
    cmd.get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .cloned()
        .collect()
}

/// `leasehook-plan` for the `plan` subcommand, `leasehook` for the top.
fn page_name(cmd: &clap::Command) -> String {
    cmd.get_display_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_owned()
}

/// One page: `clap_mangen`'s sections, then `extra`, then the version.
fn page(cmd: &clap::Command, extra: &Roff, version: &str) -> anyhow::Result<(String, Vec<u8>)> {
    let man = clap_mangen::Man::new(cmd.clone())
        .title(page_name(cmd).to_uppercase())
        .source(format!("{BIN} {version}"))
        .manual("leasehook manual");
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut out)?;
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        man.render_subcommands_section(&mut out)?;
    }
    out.extend_from_slice(extra.to_roff().as_bytes());
    man.render_version_section(&mut out)?;
    Ok((man.get_filename(), ascii(&out)))
}

/// `roff` with every non-ASCII character written as a groff escape (`\[u00D7]`),
/// so the page renders the same with or without preconv and in any locale.
fn ascii(roff: &[u8]) -> Vec<u8> {
    let mut out = String::with_capacity(roff.len());
    for c in String::from_utf8_lossy(roff).chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let _ = write!(out, "\\[u{:04X}]", u32::from(c));
        }
    }
    out.into_bytes()
}

fn exit_status(roff: &mut Roff) {
    roff.control("SH", ["EXIT STATUS"]);
    for (code, what) in EXIT_STATUS {
        roff.control("TP", [])
            .text([bold(*code)])
            .text([roman(*what)]);
    }
}

/// The `LEASEHOOK_*` variables, which override the configuration files (for
/// every command, and the hooks).
fn environment(roff: &mut Roff) {
    use leasehook_core::config;
    roff.control("SH", ["ENVIRONMENT"]);
    for (var, what) in config::environment() {
        roff.control("TP", []).text([bold(var)]).text([roman(what)]);
    }
}

fn see_also(roff: &mut Roff, pages: &[(&str, &str)]) {
    roff.control("SH", ["SEE ALSO"]);
    // Page names are neither hyphenated nor spread out.
    roff.control("nh", []);
    roff.control("ad", ["l"]);
    let mut line = Vec::new();
    for (i, (name, section)) in pages.iter().enumerate() {
        if i > 0 {
            line.push(roman(", "));
        }
        line.push(bold(*name));
        line.push(roman(format!("({section})")));
    }
    roff.text(line);
    roff.control("PP", []);
    roff.text([
        roman("The documentation in "),
        italic("/usr/share/doc/leasehook/"),
        roman("."),
    ]);
}

/// The completion script for `shell`: `(file name, script)`. Pure.
pub(crate) fn completion(cmd: clap::Command, shell: Shell) -> (String, Vec<u8>) {
    let mut cmd = cmd.name(BIN);
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, BIN, &mut out);
    let name = match shell {
        Shell::Bash => format!("{BIN}.bash"),
        Shell::Zsh => format!("_{BIN}"),
        Shell::Fish => format!("{BIN}.fish"),
        other => format!("{BIN}.{other}"),
    };
    (name, out)
}

/// Writes `files` (`(file name, body)`) into `dir`, created when missing; the
/// paths written, one a line.
pub(crate) fn write(dir: &Path, files: Vec<(String, Vec<u8>)>) -> anyhow::Result<String> {
    std::fs::create_dir_all(dir).with_context(|| format!("failed to create {dir:?}"))?;
    let mut written = String::new();
    for (name, body) in files {
        let path = dir.join(&name);
        std::fs::write(&path, body).with_context(|| format!("failed to write {path:?}"))?;
        let _ = writeln!(written, "{}", path.display());
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use clap::CommandFactory as _;

    use super::*;

    fn pages() -> Vec<(String, String)> {
        man_pages(crate::cli::Cli::command())
            .unwrap()
            .into_iter()
            .map(|(n, b)| (n, String::from_utf8(b).unwrap()))
            .collect()
    }

    #[test]
    fn one_page_per_visible_subcommand() {
        let names: Vec<String> = pages().into_iter().map(|(n, _)| n).collect();
        let mut want = vec!["leasehook.1".to_owned()];
        for s in crate::cli::Cli::command()
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
        {
            want.push(format!("leasehook-{}.1", s.get_name()));
            for nested in s.get_subcommands().filter(|n| !n.is_hide_set()) {
                want.push(format!(
                    "leasehook-{}-{}.1",
                    s.get_name(),
                    nested.get_name()
                ));
            }
        }
        want.push("leasehook.yaml.5".to_owned());
        assert_eq!(names, want);
        assert!(names.iter().any(|n| n == "leasehook-config-show.1"));
        assert!(names.iter().any(|n| n == "leasehook-plan.1"));
    }

    #[test]
    fn pages_hold_every_section_and_every_option() {
        for (name, roff) in pages().into_iter().filter(|(n, _)| n.ends_with(".1")) {
            for section in [
                ".SH NAME",
                ".SH SYNOPSIS",
                ".SH DESCRIPTION",
                ".SH \"SEE ALSO\"",
                ".SH VERSION",
            ] {
                assert!(roff.contains(section), "{name}: no {section}");
            }
            assert!(roff.contains(".TH LEASEHOOK"), "{name}: no title");
            assert!(roff.is_ascii(), "{name}: not ASCII");
        }
        let all = pages();
        let top = &all[0].1;
        for section in [".SH SUBCOMMANDS", ".SH \"EXIT STATUS\"", ".SH FILES"] {
            assert!(top.contains(section), "leasehook.1: no {section}");
        }
        assert!(top.contains("leasehook\\-plan(1)") || top.contains("leasehook\\-plan"));
        let plan = &all.iter().find(|(n, _)| n == "leasehook-plan.1").unwrap().1;
        for opt in [
            "metadata",
            "lease",
            "link",
            "profile",
            "format",
            "table\\-base",
        ] {
            assert!(
                plan.contains(&format!("\\-\\-{opt}")),
                "plan page lacks --{opt}"
            );
        }
        let refresh = &all
            .iter()
            .find(|(n, _)| n == "leasehook-refresh.1")
            .unwrap()
            .1;
        assert!(
            refresh.contains(".SH ENVIRONMENT") && refresh.contains("LEASEHOOK_IMDS_ENDPOINTS")
        );
    }

    /// The configuration page lists every key of the table the files are parsed
    /// with, each with its variable, and the per-datasource key, so a key added
    /// to `KEYS` is on the page with nothing else to edit.
    #[test]
    fn the_configuration_page_lists_every_key() {
        let all = pages();
        let (name, roff) = all.last().unwrap();
        assert_eq!(name, "leasehook.yaml.5");
        assert!(roff.is_ascii());
        assert!(roff.contains(".TH LEASEHOOK.YAML 5"), "{roff}");
        for section in [
            ".SH NAME",
            ".SH SYNOPSIS",
            ".SH DESCRIPTION",
            ".SH KEYS",
            ".SH ENVIRONMENT",
            ".SH EXAMPLE",
            ".SH \"SEE ALSO\"",
        ] {
            assert!(roff.contains(section), "no {section}");
        }
        let keys = roff.split(".SH KEYS").nth(1).unwrap();
        let keys = keys.split(".SH ENVIRONMENT").next().unwrap();
        let listed: Vec<&str> = keys
            .split(".TP\n\\fB")
            .skip(1)
            .filter_map(|entry| entry.split("\\fR").next())
            .collect();
        let mut want: Vec<String> = leasehook_core::config::KEYS
            .iter()
            .map(|k| k.name.replace('-', "\\-"))
            .collect();
        want.push("datasource.".to_owned());
        assert_eq!(listed, want);
        for key in leasehook_core::config::KEYS.iter() {
            if let Some(env) = key.env {
                assert!(
                    keys.contains(&format!("Environment: \\fB{env}\\fR")),
                    "{}: no {env}",
                    key.name
                );
            }
        }
        // The top page and config show's point to it.
        for page in ["leasehook.1", "leasehook-config-show.1"] {
            let text = &all.iter().find(|(n, _)| n == page).unwrap().1;
            assert!(text.contains("\\fBleasehook.yaml\\fR(5)"), "{page}");
        }
    }

    #[test]
    fn non_ascii_characters_become_groff_escapes() {
        assert_eq!(
            ascii("100 \u{d7} card \u{2014} x".as_bytes()),
            b"100 \\[u00D7] card \\[u2014] x"
        );
    }

    #[test]
    fn completions_know_every_subcommand() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let (_, script) = completion(crate::cli::Cli::command(), shell);
            let script = String::from_utf8(script).unwrap();
            for sub in crate::cli::Cli::command()
                .get_subcommands()
                .filter(|s| !s.is_hide_set())
            {
                assert!(
                    script.contains(sub.get_name()),
                    "{shell}: {}",
                    sub.get_name()
                );
            }
        }
    }
}

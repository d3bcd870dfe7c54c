// SPDX-License-Identifier: Apache-2.0
//! The hook files as dhclient-script uses them: sourced inside a function, with
//! dhclient's variables set. They must call the shim (by `LEASEHOOK_DHCLIENT` here),
//! never exit the sourcing shell, leave its variables and options alone, and ignore
//! the shim's status.

#![cfg(test)]

use std::process::Command;

use leasehook_tests::netns::{TempDir, assert_units_verify, sibling_bin};
use leasehook_tests::workspace_root;

/// Runs `script` under `sh` with a fake shim that records its calls and fails.
fn sh(script: &str) -> (String, String) {
    let dir = TempDir::new("hooks");
    let calls = dir.0.join("calls");
    let shim = dir.file(
        "shim",
        &format!(
            "#!/bin/sh\necho \"$reason $interface\" >> {}\nexit 3\n",
            calls.display()
        ),
    );
    Command::new("chmod")
        .arg("755")
        .arg(&shim)
        .status()
        .unwrap();
    let hooks = workspace_root().join("hooks/dhclient");
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .env("HOOKS", &hooks)
        .env("LEASEHOOK_DHCLIENT", &shim)
        .env("reason", "BOUND")
        .env("interface", "eth1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8(out.stdout).unwrap(),
        std::fs::read_to_string(&calls).unwrap_or_default(),
    )
}

#[test]
fn debian_exit_hook_runs_the_shim_and_changes_nothing() {
    // As dhclient-script's run_hook does it: sourced in a function, status kept.
    let (out, calls) = sh(
        "set -u; new_ip_address=10.0.1.20; run_hook() { exit_status=0; . \"$HOOKS/leasehook\"; echo \"status=$?\"; }; \
         run_hook; echo \"after ip=$new_ip_address opts=$-\"",
    );
    assert_eq!(calls, "BOUND eth1\n");
    assert!(
        out.contains("status=0\n"),
        "the shim's failure must not fail the hook: {out}"
    );
    assert!(out.contains("after ip=10.0.1.20 opts=u"), "{out}");
}

#[test]
fn debian_exit_hook_skips_a_failed_dhclient_script() {
    let (out, calls) = sh("exit_status=1; . \"$HOOKS/leasehook\"; echo ran-on");
    assert_eq!(calls, "");
    assert_eq!(out, "ran-on\n");
}

#[test]
fn rhel_hook_functions_run_the_shim() {
    let (out, calls) = sh(
        ". \"$HOOKS/leasehook.sh\"; leasehook_config; echo \"c=$?\"; reason=RELEASE leasehook_restore; echo \"r=$?\"",
    );
    assert_eq!(out, "c=0\nr=0\n");
    assert_eq!(calls, "BOUND eth1\nRELEASE eth1\n");
}

#[test]
fn the_debian_hook_name_passes_run_parts() {
    let out = Command::new("run-parts")
        .arg("--list")
        .arg(workspace_root().join("hooks/dhclient"))
        .output()
        .unwrap();
    let listed = String::from_utf8(out.stdout).unwrap();
    assert!(
        listed.lines().any(|l| l.ends_with("/leasehook")),
        "{listed}"
    );
    assert!(
        !listed.contains("leasehook.sh"),
        "the RHEL file belongs in dhclient.d only"
    );
}

#[test]
fn the_systemd_units_verify() {
    assert_units_verify(
        "units",
        &[
            ("leasehook-refresh.service", "leasehook-refresh.service"),
            ("leasehook-refresh.timer", "leasehook-refresh.timer"),
            // The template the udev rule starts, as the instance it starts.
            (
                "leasehook-refresh@.service",
                "leasehook-refresh@eth1.service",
            ),
            (
                "leasehook-wait-online.service",
                "leasehook-wait-online.service",
            ),
        ],
    );
}

/// A NIC's `add` event: the udev rule hands over to `leasehook-refresh@IF.service`
/// (udev's programs have no network), which runs `leasehook refresh --without-dhcp
/// --iface IF` (the NICs without DHCP only: a NIC with DHCP costs no request);
/// virtual links (veth, bridges, VLANs) start nothing.
#[test]
fn a_nic_that_appears_is_refreshed_through_a_systemd_unit() {
    assert_eq!(
        leasehook_tests::udev_add_command("ens5"),
        [
            "/usr/bin/leasehook",
            "refresh",
            "--without-dhcp",
            "--iface",
            "ens5"
        ]
    );
    let rules =
        std::fs::read_to_string(workspace_root().join("hooks/udev/90-leasehook.rules")).unwrap();
    let add = rules
        .lines()
        .find(|l| l.starts_with("ACTION==\"add\""))
        .unwrap();
    assert!(add.contains("DEVPATH!=\"/devices/virtual/*\""), "{add}");
}

/// Sources `script` with every dhclient variable the hook could touch set to a
/// hostile value: no shell may run one, and the shim must get each unchanged.
#[test]
fn hostile_values_reach_the_shim_unchanged_and_no_shell() {
    use leasehook_tests::clients::{env_recorder, hostile_values, recorded};
    let vars = [
        "interface",
        "new_ip_address",
        "new_domain_name",
        "new_domain_search",
        "new_host_name",
        "new_routers",
        "old_ip_address",
        "new_dhcp6_name_servers",
    ];
    for (file, script) in [
        (
            "leasehook",
            "run_hook() { exit_status=0; . \"$HOOKS/leasehook\"; }; run_hook",
        ),
        (
            "leasehook.sh",
            ". \"$HOOKS/leasehook.sh\"; leasehook_config; leasehook_restore",
        ),
    ] {
        for value in hostile_values(std::path::Path::new("/nonexistent-placeholder")) {
            let dir = TempDir::new("hostilehook");
            let marker = dir.0.join("pwned");
            let value = value.replace("/nonexistent-placeholder", marker.to_str().unwrap());
            let shim = env_recorder(&dir.0, 3);
            let mut cmd = Command::new("sh");
            cmd.arg("-c")
                .arg(script)
                .current_dir(&dir.0)
                .env("HOOKS", workspace_root().join("hooks/dhclient"))
                .env("LEASEHOOK_DHCLIENT", &shim)
                .env("reason", "BOUND");
            for v in vars {
                cmd.env(v, &value);
            }
            let out = cmd.output().unwrap();
            assert!(out.status.success(), "{file} with {value:?}: {out:?}");
            assert!(!marker.exists(), "{file}: {value:?} reached a shell");
            let (env, _) =
                recorded(&dir.0).unwrap_or_else(|| panic!("{file}: the shim did not run"));
            for v in vars {
                assert!(
                    env.iter().any(|(k, got)| k == v && *got == value),
                    "{file}: {v} did not reach the shim as {value:?}"
                );
            }
        }
    }
}

/// The hook binary runs a hook only for a client it is named for (argv\[0\]
/// `leasehook-<client>` or a first argument); anything else is a usage error (2),
/// never the CLI. The CLI no longer takes a client's name (issue 20: two binaries).
#[test]
fn the_hook_binary_runs_only_the_clients_and_the_cli_none() {
    let hook = sibling_bin("leasehook-hook");
    let run = |bin: &std::path::Path, args: &[&str]| {
        let out = Command::new(bin)
            .args(args)
            .env("LEASEHOOK_ROOT", "/nonexistent-leasehook-root")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for args in [&[][..], &["plan"], &["--help"], &["leasehook-dhclient"]] {
        let (code, out, err) = run(&hook, args);
        assert_eq!(code, Some(2), "leasehook-hook {args:?}: {out}{err}");
        assert!(
            err.contains("usage: leasehook-hook <client>"),
            "{args:?}: {err}"
        );
    }
    for name in leasehook_tests::netns::HOOKS {
        let client = name.trim_start_matches("leasehook-");
        // By a first argument, and by the name the package's symlink gives it.
        for (bin, args) in [
            (hook.clone(), vec![client, "--help"]),
            (sibling_bin(name), vec!["--help"]),
        ] {
            let (code, out, err) = run(&bin, &args);
            assert_eq!(code, Some(0), "{bin:?} {args:?}: {out}{err}");
            assert!(
                out.contains(&format!("Usage: {name}")),
                "{bin:?} {args:?}: {out}"
            );
        }
    }
    // `leasehook dhclient` is an unknown subcommand of the CLI (clap: 2).
    let (code, out, err) = run(&sibling_bin("leasehook"), &["dhclient", "--help"]);
    assert_eq!(code, Some(2), "leasehook dhclient: {out}{err}");
    assert!(err.contains("unrecognized subcommand"), "{err}");
}

// SPDX-License-Identifier: Apache-2.0
//! The NetworkManager, dhcpcd and udhcpc hook files as their clients run them, with
//! a fake shim that records its arguments and fails: the dhcpcd hook is sourced and
//! must not exit or change anything; the udhcpc script runs the distribution's
//! default script first and keeps its status; the NetworkManager script hands its
//! two arguments on.

#![cfg(test)]

use std::process::Command;

use leasehook_tests::netns::TempDir;
use leasehook_tests::workspace_root;

/// An executable file in `dir` that appends `$*` (tagged) to `calls` and exits
/// with `status`.
fn recorder(dir: &TempDir, name: &str, status: u8) -> String {
    let calls = dir.0.join("calls");
    let path = dir.file(
        name,
        &format!(
            "#!/bin/sh\necho \"{name} $* reason=${{reason:-}}\" >> {}\nexit {status}\n",
            calls.display()
        ),
    );
    Command::new("chmod")
        .arg("755")
        .arg(&path)
        .status()
        .unwrap();
    path.display().to_string()
}

fn calls(dir: &TempDir) -> String {
    std::fs::read_to_string(dir.0.join("calls")).unwrap_or_default()
}

#[test]
fn dhcpcd_hook_runs_the_shim_and_changes_nothing() {
    let dir = TempDir::new("dhcpcdhook");
    let shim = recorder(&dir, "shim", 3);
    let hook = workspace_root().join("hooks/dhcpcd/90-leasehook");
    // As dhcpcd-run-hooks does it: sourced in a loop, then more hooks run.
    let out = Command::new("sh")
        .arg("-c")
        .arg(
            "set -u; new_ip_address=10.0.1.20; for hook in \"$HOOK\"; do . \"$hook\"; done; \
             echo \"status=$? ip=$new_ip_address opts=$-\"",
        )
        .env("HOOK", &hook)
        .env("LEASEHOOK_DHCPCD", &shim)
        .env("reason", "BOUND")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "status=0 ip=10.0.1.20 opts=u\n"
    );
    assert_eq!(calls(&dir), "shim  reason=BOUND\n");
}

fn udhcpc(event: &str, default_status: Option<u8>) -> (Option<i32>, String) {
    let dir = TempDir::new("udhcpchook");
    let shim = recorder(&dir, "shim", 3);
    let mut cmd = Command::new(workspace_root().join("hooks/udhcpc/leasehook.script"));
    cmd.arg(event)
        .env("LEASEHOOK_UDHCPC", &shim)
        .env("reason", "-");
    match default_status {
        Some(s) => {
            cmd.env("LEASEHOOK_UDHCPC_DEFAULT", recorder(&dir, "default", s));
        }
        None => {
            cmd.env("LEASEHOOK_UDHCPC_DEFAULT", dir.0.join("absent"));
        }
    }
    let status = cmd.status().unwrap();
    (status.code(), calls(&dir))
}

#[test]
fn udhcpc_script_chains_to_the_default_script_first() {
    assert_eq!(
        udhcpc("bound", Some(0)),
        (
            Some(0),
            "default bound reason=-\nshim -- bound reason=-\n".to_owned()
        )
    );
    // The default script failed to configure the lease: no policy routing for it,
    // and udhcpc sees the default script's status.
    assert_eq!(
        udhcpc("bound", Some(4)),
        (Some(4), "default bound reason=-\n".to_owned())
    );
    // Removal runs whatever happened to the address.
    assert_eq!(
        udhcpc("deconfig", Some(4)),
        (
            Some(4),
            "default deconfig reason=-\nshim -- deconfig reason=-\n".to_owned()
        )
    );
}

/// A default script that cannot run (127): nothing configured the address, so
/// nothing is applied; a removal still goes through.
#[test]
fn udhcpc_script_with_a_missing_default_script_applies_nothing() {
    assert_eq!(udhcpc("bound", None), (Some(127), String::new()));
    assert_eq!(
        udhcpc("deconfig", None),
        (Some(127), "shim -- deconfig reason=-\n".to_owned())
    );
}

#[test]
fn nm_dispatcher_script_hands_on_its_two_arguments() {
    let dir = TempDir::new("nmhook");
    let shim = recorder(&dir, "shim", 3);
    let status = Command::new(workspace_root().join("hooks/networkmanager/90-leasehook"))
        .args(["eth1", "dhcp4-change", "extra"])
        .env("LEASEHOOK_NM", &shim)
        .status()
        .unwrap();
    // The script execs the shim: its status is the shim's, which nm-dispatcher
    // only logs.
    assert_eq!(status.code(), Some(3));
    assert_eq!(calls(&dir), "shim -- eth1 dhcp4-change reason=\n");
}

/// Runs one hook with hostile values in its client's variables and arguments;
/// returns what its shim saw (`None`: not run) and whether a shell ran a value.
fn hostile_run(
    build: impl Fn(&std::path::Path, &std::path::Path) -> Command,
) -> Vec<(String, Option<leasehook_tests::clients::Recorded>)> {
    use leasehook_tests::clients::{env_recorder, hostile_values, recorded};
    let mut seen = Vec::new();
    for value in hostile_values(std::path::Path::new("/nonexistent-placeholder")) {
        let dir = TempDir::new("hostileclient");
        let marker = dir.0.join("pwned");
        let value = value.replace("/nonexistent-placeholder", marker.to_str().unwrap());
        let shim = env_recorder(&dir.0, 3);
        let mut cmd = build(&shim, &dir.0);
        for v in [
            "interface",
            "new_ip_address",
            "new_domain_name",
            "new_host_name",
            "ip",
            "domain",
            "hostname",
            "router",
            "IFACE",
            "DHCP4_HOST_NAME",
        ] {
            cmd.env(v, &value);
        }
        cmd.env("HOSTILE", &value).current_dir(&dir.0);
        let out = cmd.output().unwrap();
        assert!(!marker.exists(), "{value:?} reached a shell: {out:?}");
        seen.push((value, recorded(&dir.0)));
    }
    seen
}

fn env_has(env: &[(String, String)], value: &str, vars: &[&str]) -> bool {
    vars.iter()
        .all(|v| env.iter().any(|(k, got)| k == v && got == value))
}

#[test]
fn hostile_values_reach_every_client_shim_unchanged_and_no_shell() {
    // dhcpcd: sourced by dhcpcd-run-hooks.
    let hook = workspace_root().join("hooks/dhcpcd/90-leasehook");
    for (value, seen) in hostile_run(|shim, _| {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg("for hook in \"$HOOK\"; do . \"$hook\"; done")
            .env("HOOK", &hook)
            .env("LEASEHOOK_DHCPCD", shim)
            .env("reason", "BOUND");
        c
    }) {
        let (env, _) = seen.unwrap_or_else(|| panic!("dhcpcd: no shim run for {value:?}"));
        assert!(
            env_has(
                &env,
                &value,
                &["interface", "new_ip_address", "new_domain_name"]
            ),
            "dhcpcd {value:?}"
        );
    }
    // udhcpc: run as the client's script, the event hostile too.
    let script = workspace_root().join("hooks/udhcpc/leasehook.script");
    for (value, seen) in hostile_run(|shim, dir| {
        let ok = dir.join("default-ok");
        std::fs::write(&ok, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&ok, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg("exec \"$SCRIPT\" \"$HOSTILE\"")
            .env("SCRIPT", &script)
            .env("LEASEHOOK_UDHCPC", shim)
            .env("LEASEHOOK_UDHCPC_DEFAULT", &ok);
        c
    }) {
        let (env, args) = seen.unwrap_or_else(|| panic!("udhcpc: no shim run for {value:?}"));
        assert!(
            env_has(
                &env,
                &value,
                &["interface", "ip", "domain", "hostname", "router"]
            ),
            "udhcpc {value:?}"
        );
        assert_eq!(args, ["--", value.as_str()], "udhcpc {value:?}");
    }
    // NetworkManager: the dispatcher's two arguments, hostile.
    let nm = workspace_root().join("hooks/networkmanager/90-leasehook");
    for (value, seen) in hostile_run(|shim, _| {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg("exec \"$NM_HOOK\" \"$HOSTILE\" \"$HOSTILE\"")
            .env("NM_HOOK", &nm)
            .env("LEASEHOOK_NM", shim);
        c
    }) {
        let (env, args) = seen.unwrap_or_else(|| panic!("nm: no shim run for {value:?}"));
        assert!(
            env_has(&env, &value, &["IFACE", "DHCP4_HOST_NAME"]),
            "nm {value:?}"
        );
        assert_eq!(args, ["--", value.as_str(), value.as_str()], "nm {value:?}");
    }
    // networkd-dispatcher: run with its variables set.
    let nd = workspace_root().join("hooks/networkd-dispatcher/50-leasehook");
    for (value, seen) in hostile_run(|shim, _| {
        let mut c = Command::new(&nd);
        c.env("LEASEHOOK_NETWORKD", shim).env("STATE", "routable");
        c
    }) {
        let (env, _) = seen.unwrap_or_else(|| panic!("networkd: no shim run for {value:?}"));
        assert!(env_has(&env, &value, &["IFACE"]), "networkd {value:?}");
    }
}

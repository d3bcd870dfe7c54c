// SPDX-License-Identifier: Apache-2.0
//! Instance data that leasehook itself wrote, from the devlxd emulator (and the
//! IMDS emulator), as `leasehook query` reads it: every `leasehook query` example
//! the documentation offers (`docs/query.md`, `docs/boot.md`, `README.md`,
//! `leasehook query --help`) runs through `sh` as written against that data and
//! must print something, and every documented key-error line is reproduced
//! exactly. Also the redaction of LXD's raw meta-data when `user.meta-data` is set
//! (issue 23 items 3 and 4).

#![cfg(test)]
#![allow(clippy::too_many_lines)]

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use leasehook_tests::devlxd::{Config, Devlxd};
use leasehook_tests::emulator::{self, Emulator, Scenario, sample_tree};
use leasehook_tests::netns::{TempDir, leasehook_bin, leasehook_clean as leasehook};
use leasehook_tests::workspace_root;
use serde_json::{Value, json};

const REDACTED: &str = "redacted for non-root user";
const USER_META_SECRET: &str = "user-meta-secret-1f3a";

fn write(root: &Path, rel: &str, body: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, body).unwrap();
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Both boot stages, as one boot.
fn boot(root: &Path, virt: &str) {
    let r = root.to_str().unwrap();
    ok(&leasehook(&[
        "init", "--root", r, "--virt", virt, "--local",
    ]));
    ok(&leasehook(&["init", "--root", r, "--virt", virt]));
}

/// What the LXD instance's owner set: user-data, vendor-data, a user key, and
/// `user.meta-data` (which LXD appends to its own meta-data) holding a secret.
fn lxd_config() -> Config {
    let user_meta = format!("local-hostname: myhost.internal\napi-token: {USER_META_SECRET}\n");
    // LXD serves its own meta-data with the user's appended.
    Config::new(&format!("instance-id: c1\nlocal-hostname: c1\n{user_meta}"))
    .key("user.user-data", "#cloud-config\npassword: hunter2\n")
    .key(
        "cloud-init.vendor-data",
        "#cloud-config\nvendor: secret-v\n",
    )
    .key("user.meta-data", &user_meta)
    .key("user.tag", "blue")
    .devices(json!({"eth0": {"type": "nic", "network": "lxdbr0", "name": "eth0", "hwaddr": "00:16:3e:aa:bb:cc"}}))
}

/// An LXD container booted by `leasehook init` against the emulator.
fn lxd_booted() -> (TempDir, Devlxd) {
    let root = TempDir::new("lxd-query");
    fs::create_dir_all(root.0.join("dev/lxd")).unwrap();
    let d = Devlxd::start(&root.0.join("dev/lxd/sock"), lxd_config()).unwrap();
    boot(&root.0, "lxc");
    (root, d)
}

/// An EC2 instance (Nitro DMI) booted against the IMDS emulator.
fn ec2_booted() -> (TempDir, Emulator) {
    let mut cfg = emulator::Config::new(sample_tree());
    cfg.scenario = Scenario::from_value(json!({})).unwrap();
    cfg.world.require_token = true;
    let emu = Emulator::start("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let root = TempDir::new("ec2-query");
    write(
        &root.0,
        "sys/class/dmi/id/product_uuid",
        "ec2e1916-9099-7caf-fd21-012345abcdef\n",
    );
    write(&root.0, "sys/class/dmi/id/sys_vendor", "Amazon EC2\n");
    write(&root.0, "proc/cmdline", "ro quiet\n");
    write(
        &root.0,
        "etc/leasehook/config.yaml",
        &format!("imds:\n  endpoints: [\"{}\"]\n", emu.base_url()),
    );
    boot(&root.0, "kvm");
    (root, emu)
}

fn json_file(root: &Path, rel: &str) -> Value {
    serde_json::from_str(&fs::read_to_string(root.join(rel)).unwrap()).unwrap()
}

#[test]
fn lxd_raw_meta_data_with_user_meta_data_is_redacted_in_the_public_file() {
    let (root, _d) = lxd_booted();
    let public_text = fs::read_to_string(root.0.join("run/leasehook/instance-data.json")).unwrap();
    assert!(
        !public_text.contains(USER_META_SECRET),
        "user.meta-data leaked into instance-data.json:\n{public_text}"
    );
    let public = json_file(&root.0, "run/leasehook/instance-data.json");
    let sensitive = json_file(&root.0, "run/leasehook/instance-data-sensitive.json");
    assert_eq!(public["ds"]["meta-data"], REDACTED);
    assert_eq!(public["ds"]["config"]["user.meta-data"], REDACTED);
    assert!(
        sensitive["ds"]["meta-data"]
            .as_str()
            .unwrap()
            .contains(USER_META_SECRET)
    );
    assert!(
        sensitive["sensitive_keys"]
            .as_array()
            .unwrap()
            .contains(&json!("ds/meta-data"))
    );
    assert_eq!(public["sensitive_keys"], sensitive["sensitive_keys"]);
    // What is not a secret stays readable: the merged hostname, the user's tag.
    assert_eq!(public["v1"]["local_hostname"], "myhost.internal");
    assert_eq!(public["ds"]["config"]["user.tag"], "blue");
}

/// A documented example: where it was found and the shell text.
#[derive(Debug)]
struct Example {
    from: String,
    text: String,
}

/// The backticked spans of a line.
fn spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// Whether a span is a command to run (not `leasehook query KEY` or a bare name).
fn runnable(span: &str) -> bool {
    let Some(at) = span.find("leasehook query ") else {
        return false;
    };
    let args = &span[at + "leasehook query ".len()..];
    let placeholder = args
        .split(|c: char| !c.is_ascii_alphabetic())
        .any(|w| w.len() >= 3 && w.chars().all(|c| c.is_ascii_uppercase()) && w != "TBD");
    !args.trim().is_empty() && !placeholder
}

/// Every `leasehook query` example in a Markdown file: lines of `sh` blocks (a
/// quoted argument may span lines), inline spans, and the key paths of the "Key
/// paths" table (run as `leasehook query 'PATH'`). The key-error lines of plain
/// code blocks go to `errors`.
fn examples_in(name: &str, text: &str, out: &mut Vec<Example>, errors: &mut Vec<String>) {
    let mut fence: Option<String> = None;
    let mut pending = String::new();
    let mut in_paths_table = false;
    for (n, line) in text.lines().enumerate() {
        let from = format!("{name}:{}", n + 1);
        if let Some(rest) = line.trim_start().strip_prefix("```") {
            fence = if fence.is_some() {
                None
            } else {
                Some(rest.trim().to_owned())
            };
            continue;
        }
        match fence.as_deref() {
            Some("sh") => {
                if !pending.is_empty() {
                    pending.push('\n');
                    pending.push_str(line);
                } else if line.trim_start().starts_with("leasehook query") {
                    line.clone_into(&mut pending);
                }
                if !pending.is_empty() && pending.matches('\'').count().is_multiple_of(2) {
                    out.push(Example {
                        from,
                        text: std::mem::take(&mut pending),
                    });
                }
                continue;
            }
            Some(_) => {
                if line.starts_with("leasehook: error: instance-data key ") {
                    errors.push(line.to_owned());
                }
                continue;
            }
            None => {}
        }
        if line.starts_with('#') {
            in_paths_table = line.starts_with("## Key paths");
        }
        let cells: Vec<&str> = line.split('|').collect();
        if in_paths_table && cells.len() > 3 && !line.contains("---") {
            for path in spans(cells[2]) {
                out.push(Example {
                    from: from.clone(),
                    text: format!("leasehook query '{path}'"),
                });
            }
        }
        for span in spans(line) {
            if runnable(span) {
                out.push(Example {
                    from: from.clone(),
                    text: span.to_owned(),
                });
            }
        }
    }
}

/// An assignment example (`hostname=$(leasehook query ...)`) prints the variable
/// afterwards, so that what it assigned is checked too.
fn with_echo(text: &str) -> String {
    match text.split_once("=$(") {
        Some((var, _)) if var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') => {
            format!("{text}\nprintf '%s\\n' \"${var}\"")
        }
        _ => text.to_owned(),
    }
}

/// Runs shell text with `leasehook` being the built binary and `LEASEHOOK_ROOT`
/// set, in an empty folder (no file for a bracket glob to match).
fn sh(text: &str, root: &Path, cwd: &Path) -> Output {
    let script = format!("leasehook() {{ \"$LEASEHOOK_TEST_BIN\" \"$@\"; }}\n{text}\n");
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(cwd)
        .env("LEASEHOOK_TEST_BIN", leasehook_bin())
        .env("LEASEHOOK_ROOT", root)
        .env_remove("LEASEHOOK_IMDS_ENDPOINTS")
        .output()
        .unwrap()
}

#[test]
fn every_documented_query_example_works_on_data_leasehook_wrote() {
    let (lxd, _d) = lxd_booted();
    let (ec2, _e) = ec2_booted();
    let mut examples = Vec::new();
    let mut errors = Vec::new();
    for doc in ["docs/query.md", "docs/boot.md", "README.md"] {
        let text = fs::read_to_string(workspace_root().join(doc)).unwrap();
        examples_in(doc, &text, &mut examples, &mut errors);
    }
    let help = ok(&leasehook(&["query", "--help"]));
    examples_in("leasehook query --help", &help, &mut examples, &mut errors);
    // The extraction found what the documents hold (a broken parser would pass
    // every example by finding none).
    assert!(examples.len() >= 25, "{examples:#?}");
    assert!(
        examples
            .iter()
            .any(|e| e.from.starts_with("leasehook query --help"))
    );
    assert!(!errors.is_empty());
    let cwd = TempDir::new("query-cwd");
    let mut failed = Vec::new();
    for e in &examples {
        let runs: Vec<(&str, Output)> = [("LXD", &lxd.0), ("EC2", &ec2.0)]
            .into_iter()
            .map(|(name, root)| (name, sh(&with_echo(&e.text), root, &cwd.0)))
            .collect();
        let works = runs
            .iter()
            .any(|(_, o)| o.status.success() && !o.stdout.is_empty() && o.stderr.is_empty());
        if !works {
            let why: Vec<String> = runs
                .iter()
                .map(|(name, o)| {
                    format!(
                        "{name}: {} {}",
                        o.status,
                        String::from_utf8_lossy(&o.stderr).trim()
                    )
                })
                .collect();
            failed.push(format!(
                "{}: {}\n    {}",
                e.from,
                e.text,
                why.join("\n    ")
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "documented examples that fail on instance data leasehook wrote:\n{}",
        failed.join("\n")
    );
    // The documented key errors are what `query` prints, word for word.
    for line in &errors {
        let key = line
            .strip_prefix("leasehook: error: instance-data key ")
            .and_then(|rest| rest.split(": ").next())
            .unwrap();
        let printed: Vec<String> = [&lxd.0, &ec2.0]
            .iter()
            .map(|root| {
                let o = leasehook(&["query", "--root", root.to_str().unwrap(), key]);
                String::from_utf8_lossy(&o.stderr).trim().to_owned()
            })
            .collect();
        assert!(
            printed.iter().any(|p| p == line),
            "documented: {line}\nprinted: {printed:#?}"
        );
    }
}

#[test]
fn the_example_extraction_sees_every_form() {
    let md = "## Key paths\n\n| form | example | means |\n|---|---|---|\n| dotted | `v1.a`, `ds.b` | x |\n\n## Other\n\nRun `leasehook query --all` or `leasehook query KEY`, not `leasehook query`.\n\n```sh\nleasehook query -f '{% for a in b %}\n{% endfor %}'\nleasehook query v1.x   # comment\n```\n\n```\nleasehook: error: instance-data key a.b: nope\n```\n";
    let (mut ex, mut err) = (Vec::new(), Vec::new());
    examples_in("t", md, &mut ex, &mut err);
    let texts: Vec<&str> = ex.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "leasehook query 'v1.a'",
            "leasehook query 'ds.b'",
            "leasehook query --all",
            "leasehook query -f '{% for a in b %}\n{% endfor %}'",
            "leasehook query v1.x   # comment",
        ]
    );
    assert_eq!(err, ["leasehook: error: instance-data key a.b: nope"]);
}

#[test]
fn init_and_detect_on_an_incus_socket_write_platform_incus() {
    let root = TempDir::new("incus-init");
    fs::create_dir_all(root.0.join("dev/incus")).unwrap();
    let _d = Devlxd::start(&root.0.join("dev/incus/sock"), lxd_config()).unwrap();
    let r = root.0.to_str().unwrap();
    let detect = ok(&leasehook(&["detect", "--root", r, "--virt", "lxc"]));
    assert!(
        detect.contains("dev/incus/sock is a socket (Incus)"),
        "{detect}"
    );
    boot(&root.0, "lxc");
    let public = json_file(&root.0, "run/leasehook/instance-data.json");
    assert_eq!(public["v1"]["platform"], "incus");
    assert_eq!(public["v1"]["cloud_name"], "lxd");
    assert_eq!(public["leasehook"]["datasource"], "LXD");
    let sock = root.0.join("dev/incus/sock");
    assert_eq!(
        public["v1"]["subplatform"],
        format!("Incus socket API v. 1.0 ({})", sock.display())
    );
    // The same redaction on Incus.
    assert_eq!(public["ds"]["meta-data"], REDACTED);
    let q = ok(&leasehook(&[
        "query",
        "--root",
        r,
        "--format",
        "raw",
        "v1.platform",
    ]));
    assert_eq!(q, "incus\n");
}

/// cloud-init 25.1.4's own `query` (`cloudinit.cmd.query.handle_args`, through
/// `tests/oracle/ci_query.py`) on `data`; the oracle is the extracted Debian
/// package (`scripts/fetch-cloud-init-oracle.sh`), and without it this fails.
fn cloud_init_query(data: &Path, args: &[&str]) -> Output {
    let pythonpath = std::env::var_os("LEASEHOOK_CLOUDINIT_ORACLE_25_1_4").map_or_else(
        || {
            workspace_root()
                .join("target/oracle/cloud-init-25.1.4/root/usr/lib/python3/dist-packages")
        },
        std::path::PathBuf::from,
    );
    assert!(
        pythonpath.join("cloudinit/cmd/query.py").exists(),
        "cloud-init 25.1.4 oracle not found at {pythonpath:?}: run scripts/fetch-cloud-init-oracle.sh"
    );
    Command::new("/usr/bin/python3")
        .arg(workspace_root().join("tests/oracle/ci_query.py"))
        .arg(data)
        .args(args)
        .env("PYTHONPATH", &pythonpath)
        .output()
        .unwrap()
}

/// Issue 31 item 2: `leasehook query KEY` prints what `cloud-init query KEY`
/// prints, byte for byte, on the same instance data: a string raw (so
/// `ID=$(leasehook query v1.instance_id)` works as with cloud-init), anything
/// else as cloud-init's `json_dumps` (one space of indent, keys sorted,
/// non-ASCII escaped), `--list-keys` one key a line; a missing key or a
/// `--list-keys` on a non-mapping exits 1 with a message on stderr and nothing on
/// stdout, as cloud-init does. `--format json` still quotes. Checked on data of
/// every JSON type and on the instance data `leasehook init` wrote on EC2.
#[test]
fn query_prints_what_cloud_init_25_1_4_query_prints() {
    let synthetic = json!({
        "v1": {
            "instance_id": "inc-0f1e2d", "region": null, "nics": 2, "ratio": 1.5,
            "negative": -3, "big": 12_345_678_901_234_i64, "ok": true, "off": false,
            "empty_string": "", "quote": "say \"hi\"\n\t\\ \u{8}\u{c}\r\u{1}\u{7f}",
            "unicode": "café \u{1f600}", "zones": ["a", "bé", 3, null, [], {}],
            "meta": {"b": 1, "a": "xé", "nested": {"z": [1, {"q": []}], "y": {}}},
            "empty_map": {}, "empty_list": []
        },
        "ds": {"config": {"user.tag": "blue", "user.role": "web"}}
    });
    let root = TempDir::new("query-oracle");
    let text = serde_json::to_string(&synthetic).unwrap();
    write(&root.0, "run/leasehook/instance-data.json", &text);
    write(&root.0, "run/leasehook/instance-data-sensitive.json", &text);
    let (ec2_root, _emu) = ec2_booted();
    let mut failures = Vec::new();
    for (root, cases) in [
        (
            &root.0,
            &[
                &["v1.instance_id"][..],
                &["v1.region"],
                &["v1.nics"],
                &["v1.ratio"],
                &["v1.negative"],
                &["v1.big"],
                &["v1.ok"],
                &["v1.off"],
                &["v1.empty_string"],
                &["v1.quote"],
                &["v1.unicode"],
                &["v1.zones"],
                &["v1.meta"],
                &["v1.meta.nested"],
                &["v1.empty_map"],
                &["v1.empty_list"],
                &["v1"],
                &["ds.config"],
                &["--list-keys", "v1"],
                &["--list-keys", "v1.meta"],
                &["--list-keys", "v1.empty_map"],
                // Errors: exit 1, stderr, nothing on stdout.
                &["v1.missing"],
                &["v1.meta.missing"],
                &["nothing.at.all"],
                &["--list-keys", "v1.zones"],
                &["--list-keys", "v1.instance_id"],
            ][..],
        ),
        (
            &ec2_root.0,
            &[
                &["v1.instance_id"][..],
                &["v1.cloud_name"],
                &["v1.region"],
                &["v1.availability_zone"],
                &["v1.platform"],
                &["v1.local_hostname"],
                &["v1"],
                &["ds.meta-data.instance-id"],
                &["--list-keys", "v1"],
                &["--list-keys", "ds"],
                &["v1.no_such_key"],
            ][..],
        ),
    ] {
        let sensitive = root.join("run/leasehook/instance-data-sensitive.json");
        for args in cases {
            let ours =
                leasehook(&[&["query", "--root", root.to_str().unwrap()][..], args].concat());
            let theirs = cloud_init_query(&sensitive, args);
            let show = |o: &Output| {
                format!(
                    "exit {:?}, stdout {:?}, stderr {:?}",
                    o.status.code(),
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                )
            };
            eprintln!(
                "query {args:?}:\n  leasehook  {}\n  cloud-init {}",
                show(&ours),
                show(&theirs)
            );
            let same = ours.status.code() == theirs.status.code()
                && ours.stdout == theirs.stdout
                && ours.stderr.is_empty() == theirs.stderr.is_empty();
            if !same {
                failures.push(format!(
                    "query {args:?}:\n  leasehook  {}\n  cloud-init {}",
                    show(&ours),
                    show(&theirs)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // `--format json` still quotes a string, when asked.
    let r = root.0.to_str().unwrap();
    assert_eq!(
        ok(&leasehook(&[
            "query",
            "--root",
            r,
            "--format",
            "json",
            "v1.instance_id"
        ])),
        "\"inc-0f1e2d\"\n"
    );
    assert_eq!(
        ok(&leasehook(&[
            "query",
            "--root",
            r,
            "-f",
            "raw",
            "v1.instance_id"
        ])),
        "inc-0f1e2d\n"
    );
    // A script written for cloud-init.
    let out = sh(
        "ID=$(leasehook query v1.instance_id); ROLE=$(leasehook query 'ds.config[user.role]'); \
         [ \"$ID\" = inc-0f1e2d ] && [ \"$ROLE\" = web ] && echo yes",
        &root.0,
        &root.0,
    );
    assert_eq!(ok(&out), "yes\n");
}

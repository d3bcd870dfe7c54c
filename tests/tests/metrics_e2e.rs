// SPDX-License-Identifier: Apache-2.0
//! The metrics (issue 33 item 3, SPEC §3.11) as Prometheus reads them: the hook
//! runs for eth1's BOUND and RENEW against the IMDS emulator in a private network
//! namespace, and the textfile and `leasehook status --format prometheus` are
//! parsed with a real text-format parser (`prometheus-parse`), their values
//! checked against what the events imply: the events by reason and outcome, the
//! applied interface and its table, the metadata requests the emulator logged,
//! the consistency waits, a refused address, drift after `ip rule del`, and a
//! conflict with a route another owner holds.
//!
//! Compiled with the `netns` feature; needs root and iproute2, and fails, never
//! skips, without them.

#![cfg(feature = "netns")]
#![cfg(test)]
#![allow(
    clippy::too_many_lines,
    // The values compared are counts, whole numbers an f64 holds exactly.
    clippy::float_cmp,
)]

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::process::{Child, Command, Output};

use leasehook_tests::emulator::LogEntry;
use leasehook_tests::netns::{Netns, TempDir, leasehook_bin, logging_to_stderr, sibling_bin};
use leasehook_tests::shell::LogLine as _;
use leasehook_tests::world::{
    EMULATOR, MAC0, MAC1, at_file, default_tree, eth1_lease, start_first_line,
};
use prometheus_parse::{Sample, Scrape, Value};
use serde_json::json;

/// Where the textfile goes, below the test's root.
const TEXTFILE: &str = "/var/lib/node_exporter/leasehook.prom";

/// A child process, killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// eth0 and eth1 addressed as dhclient leaves them, the IMDS emulator inside,
/// and a root.
struct Lab {
    ns: Netns,
    _dir: TempDir,
    root: PathBuf,
    imds_log: PathBuf,
    url: String,
    _imds: Proc,
}

impl Lab {
    fn new() -> Self {
        let ns = Netns::new("metrics");
        for (n, mac) in [(0, MAC0), (1, MAC1)] {
            let eth = format!("eth{n}");
            ns.veth(&eth, mac, &format!("vpc{n}"));
            let addr = format!("10.98.{n}.{}/24", 10 * (n + 1));
            ns.ip(&["address", "add", &addr, "dev", &eth]);
        }
        let dir = TempDir::new("metrics");
        let root = dir.0.join("root");
        std::fs::create_dir_all(root.join("var/lib/node_exporter")).unwrap();
        // eth1's metadata lists the metadata service's own address: refused by
        // the gate (SPEC §3.8), the rest applied.
        let mut tree = default_tree();
        tree["latest"]["meta-data"]["network"]["interfaces"]["macs"][MAC1]["local-ipv4s"] =
            json!("10.98.1.20\n10.98.1.21\n169.254.169.254");
        let imds_log = dir.0.join("imds.log");
        let mut cmd = ns.command(sibling_bin(EMULATOR).to_str().unwrap());
        cmd.args([
            "--cloud",
            "ec2",
            "--bind",
            "127.0.0.1:0",
            "--require-token",
            "--log",
        ])
        .arg(&imds_log)
        .arg("--tree")
        .arg(at_file(&dir.file("tree.json", &tree.to_string())));
        let (child, addr) = start_first_line(cmd, "leasehook-emulator --cloud ec2");
        Self {
            ns,
            _dir: dir,
            root,
            imds_log,
            url: format!("http://{addr}"),
            _imds: Proc(child),
        }
    }

    /// Runs `leasehook-dhclient` for eth1 with `reason`, in a clean environment
    /// as dhclient-script does, its log on standard error.
    fn hook(&self, reason: &str) -> Output {
        let mut env = eth1_lease(reason);
        env.extend([
            ("LEASEHOOK_IMDS_ENDPOINTS", self.url.as_str()),
            ("LEASEHOOK_IMDS_BIND_INTERFACE", "false"),
            ("LEASEHOOK_IMDS_SYNC_BUDGET_S", "2"),
            ("LEASEHOOK_IMDS_BUDGET_S", "2"),
            ("LEASEHOOK_METRICS_TEXTFILE", TEXTFILE),
        ]);
        let root = self.root.display().to_string();
        env.push(("LEASEHOOK_ROOT", &root));
        let mut argv = vec!["env".to_owned(), "-i".to_owned()];
        argv.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
        argv.push(sibling_bin("leasehook-dhclient").display().to_string());
        in_ns_logging_to_stderr(&self.ns, &argv).output().unwrap()
    }

    /// `leasehook refresh` inside the namespace, with the hooks' settings.
    fn refresh(&self, extra: &[&str]) -> Output {
        let mut argv = vec![
            "env".to_owned(),
            format!("LEASEHOOK_IMDS_ENDPOINTS={}", self.url),
            "LEASEHOOK_IMDS_BIND_INTERFACE=false".to_owned(),
            format!("LEASEHOOK_METRICS_TEXTFILE={TEXTFILE}"),
        ];
        argv.extend(extra.iter().map(|e| (*e).to_owned()));
        argv.extend([
            leasehook_bin().display().to_string(),
            "--root".to_owned(),
            self.root.display().to_string(),
            "refresh".to_owned(),
        ]);
        in_ns_logging_to_stderr(&self.ns, &argv).output().unwrap()
    }

    /// `leasehook status --format prometheus` inside the namespace.
    fn status(&self) -> (Output, Scrape) {
        let argv = [
            leasehook_bin().display().to_string(),
            "--root".to_owned(),
            self.root.display().to_string(),
            "status".to_owned(),
            "--format".to_owned(),
            "prometheus".to_owned(),
        ];
        let out = in_ns_logging_to_stderr(&self.ns, &argv).output().unwrap();
        // The health check's exit status in every format: 1 (degraded) once the
        // gate refused an address, never 2 (an error).
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{:?}: {}",
            out.status,
            stderr(&out)
        );
        let text = String::from_utf8(out.stdout.clone()).unwrap();
        (out, parse(&text))
    }

    fn textfile(&self) -> PathBuf {
        self.root.join(TEXTFILE.trim_start_matches('/'))
    }

    /// The requests the emulator logged.
    fn requests(&self) -> Vec<LogEntry> {
        std::fs::read_to_string(&self.imds_log)
            .unwrap_or_default()
            .lines()
            .filter_map(LogEntry::parse)
            .collect()
    }
}

/// `argv` run inside `ns`, the logger's `/dev/log` hidden so that it writes to
/// standard error (the logger prefers syslog when `/dev/log` exists).
fn in_ns_logging_to_stderr(ns: &Netns, argv: &[String]) -> Command {
    let mut all = logging_to_stderr(Some(ns));
    all.extend(argv.iter().map(OsString::from));
    let mut cmd = Command::new(&all[0]);
    cmd.args(&all[1..]);
    cmd
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn parse(text: &str) -> Scrape {
    Scrape::parse(text.lines().map(|l| Ok(l.to_owned())))
        .unwrap_or_else(|e| panic!("not the Prometheus text format ({e}):\n{text}"))
}

/// The sum of `name`'s counter samples, whatever their labels.
fn counter_sum(s: &Scrape, name: &str) -> f64 {
    s.samples
        .iter()
        .filter(|x| x.metric == name)
        .map(|x| match x.value {
            Value::Counter(v) => v,
            _ => panic!("{x:?}"),
        })
        .sum()
}

/// eth1's `leasehook_interface_drift_objects`.
fn eth1_drift(s: &Scrape) -> Option<f64> {
    value(
        s,
        "leasehook_interface_drift_objects",
        &[("interface", "eth1")],
    )
}

/// The value of the sample `name` whose labels include `labels`; `None` when
/// there is none.
fn value(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let found: Vec<&Sample> = s
        .samples
        .iter()
        .filter(|x| x.metric == name && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .collect();
    assert!(found.len() <= 1, "{name} {labels:?}: {found:#?}");
    found.first().map(|x| match &x.value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
        Value::Histogram(h) => h.iter().map(|b| b.count).fold(0.0, f64::max),
        Value::Summary(_) => panic!("{name} is a summary"),
    })
}

/// The `_count` of the histogram `name`.
fn histogram_count(s: &Scrape, name: &str) -> f64 {
    let sample = s.samples.iter().find(|x| x.metric == name).unwrap();
    let Value::Histogram(buckets) = &sample.value else {
        panic!("{name} is not a histogram: {sample:?}")
    };
    // The +Inf bucket holds every observation.
    buckets
        .iter()
        .find(|b| b.less_than.is_infinite())
        .map(|b| b.count)
        .unwrap()
}

#[test]
fn metrics_say_what_the_events_did() {
    let lab = Lab::new();
    let out = lab.hook("BOUND");
    assert!(out.status.success(), "BOUND: {}", stderr(&out));
    assert!(
        stderr(&out).contains("refused local-ipv4s 169.254.169.254"),
        "{}",
        stderr(&out)
    );
    let out = lab.hook("RENEW");
    assert!(out.status.success(), "RENEW: {}", stderr(&out));

    // The textfile: written by the hook, readable by node-exporter's user, no
    // temporary file left beside it.
    let file = lab.textfile();
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
    let names: Vec<_> = std::fs::read_dir(file.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["leasehook.prom"]);
    let text = std::fs::read_to_string(&file).unwrap();
    let (_, from_status) = lab.status();
    for s in [parse(&text), from_status] {
        let events = |reason, outcome| {
            value(
                &s,
                "leasehook_events_total",
                &[
                    ("client", "dhclient"),
                    ("reason", reason),
                    ("outcome", outcome),
                ],
            )
        };
        assert_eq!(events("bound", "applied"), Some(1.0), "{text}");
        assert_eq!(events("renew", "unchanged"), Some(1.0), "{text}");
        assert_eq!(
            value(
                &s,
                "leasehook_interface_applied",
                &[("interface", "eth1"), ("table", "10001")]
            ),
            Some(1.0)
        );
        let last = value(
            &s,
            "leasehook_interface_last_success_timestamp_seconds",
            &[("interface", "eth1")],
        )
        .unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(now - last < 120.0 && last <= now + 1.0, "{last} vs {now}");
        assert_eq!(eth1_drift(&s), Some(0.0));
        // Every request the emulator answered, by status; none without an answer.
        let logged = lab.requests();
        assert!(!logged.is_empty());
        for code in ["200", "404"] {
            let n = logged.iter().filter(|e| e.status == code).count();
            let counted = value(
                &s,
                "leasehook_metadata_requests_total",
                &[("provider", "ec2"), ("code", code)],
            )
            .unwrap_or(0.0);
            #[allow(clippy::cast_precision_loss)]
            let n = n as f64;
            assert_eq!(counted, n, "code {code}: {logged:#?}\n{text}");
        }
        assert_eq!(
            value(
                &s,
                "leasehook_metadata_requests_total",
                &[("provider", "ec2"), ("code", "error")]
            ),
            None
        );
        assert_eq!(histogram_count(&s, "leasehook_metadata_wait_seconds"), 2.0);
        // The refused address, once per event that planned it.
        let refused = counter_sum(&s, "leasehook_refusals_total");
        assert_eq!(refused, 2.0, "{text}");
        assert_eq!(
            value(
                &s,
                "leasehook_refusals_total",
                &[("reason", "metadata-service")]
            ),
            Some(2.0)
        );
        assert_eq!(value(&s, "leasehook_conflicts_total", &[]), Some(0.0));
        assert_eq!(
            value(
                &s,
                "leasehook_build_info",
                &[("version", env!("CARGO_PKG_VERSION"))]
            ),
            Some(1.0)
        );
    }

    // Drift: a rule of eth1's taken away by someone else.
    lab.ns
        .ip(&["rule", "del", "from", "10.98.1.21", "lookup", "10001"]);
    let (_, s) = lab.status();
    assert_eq!(eth1_drift(&s), Some(1.0));

    // A conflict: eth1's default route replaced by another owner's (proto
    // static); the next RENEW puts the rule back, runs into the route (EEXIST),
    // rolls back and fails.
    lab.ns.ip(&["route", "del", "default", "table", "10001"]);
    lab.ns.ip(&[
        "route",
        "add",
        "default",
        "via",
        "10.98.1.1",
        "dev",
        "eth1",
        "table",
        "10001",
        "proto",
        "static",
    ]);
    let out = lab.hook("RENEW");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let s = parse(&std::fs::read_to_string(lab.textfile()).unwrap());
    assert_eq!(value(&s, "leasehook_conflicts_total", &[]), Some(1.0));
    assert_eq!(
        value(
            &s,
            "leasehook_events_total",
            &[
                ("client", "dhclient"),
                ("reason", "renew"),
                ("outcome", "conflict")
            ]
        ),
        Some(1.0)
    );
    // The counters survived four processes; a corrupt file restarts them from
    // zero without failing the event.
    lab.ns.ip(&["route", "del", "default", "table", "10001"]);
    let counted_before_reset = lab.requests().len();
    let counters = lab.root.join("run/leasehook/metrics/counters");
    std::fs::write(&counters, "leasehook_events_total{oops 1\n").unwrap();
    let out = lab.hook("RENEW");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the counters start again from zero"),
        "{}",
        stderr(&out)
    );
    let s = parse(&std::fs::read_to_string(lab.textfile()).unwrap());
    assert_eq!(value(&s, "leasehook_conflicts_total", &[]), Some(0.0));
    let renew = |outcome| {
        value(
            &s,
            "leasehook_events_total",
            &[
                ("client", "dhclient"),
                ("reason", "renew"),
                ("outcome", outcome),
            ],
        )
    };
    assert_eq!((renew("applied"), renew("conflict")), (Some(1.0), None));
    assert_eq!(eth1_drift(&s), Some(0.0));

    // An event the hook cannot read (a reason with a line feed): exit 2, and
    // counted.
    let out = lab.hook("BOUND\nX");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let s = parse(&std::fs::read_to_string(lab.textfile()).unwrap());
    assert_eq!(
        value(
            &s,
            "leasehook_events_total",
            &[
                ("client", "dhclient"),
                ("reason", "unknown"),
                ("outcome", "malformed")
            ]
        ),
        Some(1.0)
    );

    // `leasehook refresh` adds its requests and rewrites the textfile: every
    // request the emulator logged since the counters restarted, across the
    // three processes since, is counted.
    let before = std::fs::metadata(lab.textfile())
        .unwrap()
        .modified()
        .unwrap();
    let out = lab.refresh(&[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(lab.textfile()).unwrap();
    assert!(
        std::fs::metadata(lab.textfile())
            .unwrap()
            .modified()
            .unwrap()
            > before
    );
    let s = parse(&text);
    let logged = lab.requests();
    let counted = counter_sum(&s, "leasehook_metadata_requests_total");
    #[allow(clippy::cast_precision_loss)]
    let n = (logged.len() - counted_before_reset) as f64;
    assert_eq!(counted, n, "{logged:#?}\n{text}");

    // Switched off, refresh does nothing: it writes no metrics either.
    std::fs::remove_file(lab.textfile()).unwrap();
    let out = lab.refresh(&["LEASEHOOK_ENABLED=0"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!lab.textfile().exists());
}

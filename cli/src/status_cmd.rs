// SPDX-License-Identifier: Apache-2.0
//! `leasehook status`: the truth and a health check (issue 33, item 1). The
//! configuration's validity, the datasource and provider, and per interface its
//! last event and outcome (`run/leasehook/last-event/`), the applied objects
//! (`run/leasehook/iface/`), drift (the recorded objects the kernel no longer
//! holds: one dump, compared with the record) and a worker still waiting
//! (`run/leasehook/pending/`).
//!
//! Exit status as `cloud-init status`: 0 healthy, 1 degraded, 2 error (an
//! invalid configuration, state that cannot be read).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use leasehook_core::apply::netlink::NetlinkApplier;
use leasehook_core::apply::state::{self, InterfaceState, Paths};
use leasehook_core::apply::{Applier as _, LinkIndex};
use leasehook_core::config::Loaded;
use leasehook_core::diff::State;
use leasehook_core::hook::{self, LastEvent, Waiting};
use leasehook_core::model::IfName;
use leasehook_core::source::provider::{ProviderChoice, auto_verdict};
use serde_json::{Value, json};

use crate::cli::{StatusArgs, StatusFormat};

/// The version of the JSON and YAML documents.
const SCHEMA_VERSION: u32 = 1;

/// How long past its budget a worker may still be seen (its last request's
/// timeout, and the writes) before it counts as stuck.
const WORKER_GRACE_MS: u64 = 3000;

/// "12 s ago" for a time in milliseconds since the Unix epoch.
fn ago(ms: u64, now: u64) -> String {
    if ms == 0 {
        return "never".to_owned();
    }
    let s = now.saturating_sub(ms) / 1000;
    match s {
        0..120 => format!("{s} s ago"),
        120..7200 => format!("{} min ago", s / 60),
        _ => format!("{} h ago", s / 3600),
    }
}

fn refreshed_ms(paths: &Paths, name: &IfName) -> u64 {
    hook::refreshed_at(paths, name)
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The health verdict: errors (exit 2) and what degrades it (exit 1).
#[derive(Default)]
struct Health {
    errors: Vec<String>,
    degraded: Vec<String>,
}

impl Health {
    fn code(&self) -> u8 {
        match (self.errors.is_empty(), self.degraded.is_empty()) {
            (false, _) => 2,
            (true, false) => 1,
            (true, true) => 0,
        }
    }

    fn word(&self) -> &'static str {
        match self.code() {
            0 => "healthy",
            1 => "degraded",
            _ => "error",
        }
    }
}

/// What is read of one interface.
#[derive(Default)]
struct Nic {
    state: Option<InterfaceState>,
    last: Option<LastEvent>,
    waiting: Option<Waiting>,
    /// Recorded objects the kernel does not hold, as `ip` reads them.
    drift: Vec<String>,
    /// Times `leasehook watch` put back what something else removed, since boot.
    repairs: u64,
}

/// The provider `status` names, and how it was chosen.
fn provider(root: &Path, choice: ProviderChoice) -> (String, String) {
    match choice {
        ProviderChoice::Named(k) => (k.to_string(), "configured (key provider)".to_owned()),
        ProviderChoice::Auto => {
            let boot = leasehook_core::boot::state::read(
                root,
                leasehook_core::boot::state::boot_id(root).as_deref(),
            )
            .and_then(|b| b.datasource);
            let mut how = String::new();
            let found = auto_verdict(boot, || {
                let dmi = leasehook_core::source::detect::cloud_from_dmi(
                    &leasehook_core::source::detect::read::read_dmi(root),
                );
                how = format!(
                    "auto: no boot-stage verdict; DMI says {}",
                    dmi.map_or("no cloud", |k| k.name())
                );
                dmi
            });
            if let (Some(ds), true) = (boot, how.is_empty()) {
                how = format!("auto: the boot stage found {ds}");
            }
            (choice.resolve(found).to_string(), how)
        }
    }
}

/// Each NIC's repairs by `leasehook watch` since boot (the stored counters) and
/// its drift (the kernel); a kernel that cannot be read is an error.
fn kernel_and_counters(root: &Path, nics: &mut BTreeMap<IfName, Nic>, health: &mut Health) {
    let stored = leasehook_core::metrics::counters(root);
    for (name, nic) in nics.iter_mut() {
        nic.repairs = leasehook_core::metrics::repairs(&stored, name);
    }
    if let Err(e) = drift(nics) {
        health.errors.push(format!(
            "the kernel cannot be read to check for drift: {e:#}"
        ));
    }
}

/// The recorded objects the kernel does not hold: one dump of each kind
/// (leasehook's protocol), compared with every state.
fn drift(nics: &mut BTreeMap<IfName, Nic>) -> anyhow::Result<()> {
    let recorded: Vec<(&IfName, State)> = nics
        .iter()
        .filter_map(|(n, nic)| Some((n, nic.state.as_ref()?.objects())))
        .collect();
    if recorded.is_empty() {
        return Ok(());
    }
    let mut applier = NetlinkApplier::try_new()?;
    let index: LinkIndex = applier
        .links()?
        .into_iter()
        .map(|l| (l.name, l.index))
        .collect();
    let addresses: BTreeSet<_> = recorded
        .iter()
        .flat_map(|(_, s)| s.addresses.iter().cloned())
        .collect();
    let seen = applier.observe(&index, &addresses)?.owned;
    let mut found: Vec<(IfName, Vec<String>)> = Vec::new();
    for (name, want) in recorded {
        let mut missing: Vec<String> = want
            .rules
            .difference(&seen.rules)
            .map(|r| format!("rule {r}"))
            .collect();
        missing.extend(
            want.routes
                .difference(&seen.routes)
                .map(|r| format!("route {r}")),
        );
        missing.extend(
            want.addresses
                .difference(&seen.addresses)
                .map(|a| format!("address {a}")),
        );
        found.push((name.clone(), missing));
    }
    for (name, missing) in found {
        if let Some(nic) = nics.get_mut(&name) {
            nic.drift = missing;
        }
    }
    Ok(())
}

/// The other routing tools found below `root` ([`leasehook_core::coexist`]), for
/// `status`: its text line, its JSON list, and whether it makes the status
/// degraded (a tool found active).
fn other_tools(root: &Path) -> (String, serde_json::Value, bool) {
    let found = leasehook_core::coexist::detect(root);
    let degraded = leasehook_core::coexist::any_active(&found);
    let line = format!(
        "other routing tools: {}{}\n",
        leasehook_core::coexist::summary(&found),
        if degraded {
            " (degraded: docs/migrating.md)"
        } else {
            ""
        }
    );
    (line, leasehook_core::coexist::json(&found), degraded)
}

/// Whether process `pid` is alive.
fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn waiting_line(w: &Waiting, now: u64) -> String {
    let who = w.pid.map_or_else(
        || "a worker not started yet".to_owned(),
        |p| format!("worker {p}"),
    );
    let since = if w.since_ms == 0 {
        String::new()
    } else {
        format!(" since {}", ago(w.since_ms, now))
    };
    let budget = if now <= w.deadline_ms {
        format!(
            "its budget ends in {} s",
            (w.deadline_ms - now).div_ceil(1000)
        )
    } else {
        format!("its budget ENDED {}", ago(w.deadline_ms, now))
    };
    let what = if w.queued {
        "for the interface's lock".to_owned()
    } else if w.missing.is_empty() {
        "for the metadata".to_owned()
    } else {
        format!("for the metadata (missing: {})", w.missing.join("; "))
    };
    format!("{who}: {} waiting {what}{since}; {budget}", w.reason)
}

/// What degrades the health, per interface: a failed last event, a refresh
/// the metadata did not answer, drift, a refusal, a worker past its budget or
/// gone.
fn judge(nics: &BTreeMap<IfName, Nic>, health: &mut Health, now: u64) {
    for (name, nic) in nics {
        if let Some(ev) = &nic.last
            && ev.outcome.failed()
        {
            health.degraded.push(format!(
                "{name}: its last event ({} {}) failed: {}",
                ev.client, ev.reason, ev.outcome
            ));
        }
        if let Some(ev) = &nic.last
            && let leasehook_core::hook::last_event::EventOutcome::Unchecked(why) = &ev.outcome
        {
            health.degraded.push(format!(
                "{name}: not checked by its last refresh ({why}): the routing applied before \
                 stays, a change of the NIC's metadata is not followed until it answers"
            ));
        }
        if !nic.drift.is_empty() {
            health.degraded.push(format!(
                "{name}: drift, {} recorded object(s) missing from the kernel: {}",
                nic.drift.len(),
                nic.drift.join("; ")
            ));
        }
        if let Some(st) = &nic.state
            && !st.refused.is_empty()
        {
            let list: Vec<String> = st.refused.iter().map(ToString::to_string).collect();
            health
                .degraded
                .push(format!("{name}: refused: {}", list.join("; ")));
        }
        if let Some(w) = &nic.waiting {
            if now > w.deadline_ms.saturating_add(WORKER_GRACE_MS) {
                health.degraded.push(format!(
                    "{name}: waiting past its budget ({})",
                    waiting_line(w, now)
                ));
            } else if let Some(pid) = w.pid.filter(|p| !alive(*p)) {
                health.degraded.push(format!(
                    "{name}: its worker {pid} is gone, its hand-over left behind"
                ));
            }
        }
    }
}

/// `status` of what is recorded below `root`, with the configuration `main`
/// loaded (or why it could not be).
pub(crate) fn run(
    args: &StatusArgs,
    root: &Path,
    loaded: Result<&Loaded, &anyhow::Error>,
) -> anyhow::Result<(String, ExitCode)> {
    let paths = Paths::new(root);
    let now = state::unix_ms();
    let mut health = Health::default();
    let settings = loaded.ok().map(|l| &l.settings);
    let kube_mode =
        settings.map_or_else(leasehook_core::kubernetes::Mode::default, |s| s.kubernetes);
    let config_error = loaded.err().map(crate::one_line);
    if let Some(e) = &config_error {
        health.errors.push(format!(
            "the configuration is invalid (the hooks change nothing): {e}"
        ));
    }
    let (provider, chosen) = provider(root, settings.map_or(ProviderChoice::Auto, |s| s.provider));

    let mut nics: BTreeMap<IfName, Nic> = BTreeMap::new();
    let (states, mut unreadable) = state::list_states(&paths);
    for st in states {
        let name = st.name.clone();
        nics.entry(name).or_default().state = Some(st);
    }
    let (events, errors) = hook::last_event::list(&paths);
    unreadable.extend(errors);
    for (name, ev) in events {
        nics.entry(name).or_default().last = Some(ev);
    }
    let (waiting, errors) = hook::waiting(&paths);
    unreadable.extend(errors);
    for w in waiting {
        let name = w.name.clone();
        nics.entry(name).or_default().waiting = Some(w);
    }
    let root_user = rustix::process::geteuid().is_root();
    for e in &unreadable {
        health.errors.push(format!("state cannot be read: {e}"));
    }
    if !unreadable.is_empty() && !root_user {
        health.errors.push(
            "run as root: leasehook's state under run/leasehook is readable by root only"
                .to_owned(),
        );
    }
    kernel_and_counters(root, &mut nics, &mut health);

    judge(&nics, &mut health, now);
    let (tools_line, tools, tools_active) = other_tools(root);
    if tools_active {
        health.degraded.push(tools_line.trim_end().to_owned());
    }
    let conflicts = leasehook_core::commit::recorded_conflicts(&paths);
    let mut extra = tools_line;
    for (_, message) in &conflicts {
        health.degraded.push(format!("conflict: {message}"));
        let _ = writeln!(extra, "conflict: {message}");
    }

    let code = health.code();
    let format = if args.json {
        StatusFormat::Json
    } else {
        args.format
    };
    let out = match format {
        StatusFormat::Prometheus => crate::metrics_cmd::prometheus(root),
        StatusFormat::Text => text(
            root,
            &paths,
            (kube_mode, &extra),
            (config_error.as_deref(), loaded.ok()),
            (&provider, &chosen),
            &nics,
            &health,
            (now, args.verbose),
        ),
        StatusFormat::Json | StatusFormat::Yaml => {
            let mut doc = document(
                root,
                &paths,
                (kube_mode, settings.is_none_or(|s| s.enabled)),
                config_error.as_deref(),
                (&provider, &chosen),
                &nics,
                &health,
            );
            if let Value::Object(m) = &mut doc {
                m.insert("other_routing_tools".to_owned(), tools);
                let list: Vec<Value> = conflicts
                    .iter()
                    .map(|(i, m)| json!({"interface": i, "message": m}))
                    .collect();
                m.insert("conflicts".to_owned(), Value::Array(list));
            }
            if format == StatusFormat::Json {
                serde_json::to_string_pretty(&doc)? + "\n"
            } else {
                serde_saphyr::to_string(&doc)?
            }
        }
    };
    Ok((out, ExitCode::from(code)))
}

#[allow(clippy::too_many_arguments)] // one call, from `run`
fn text(
    root: &Path,
    paths: &Paths,
    (kube_mode, extra): (leasehook_core::kubernetes::Mode, &str),
    (config_error, loaded): (Option<&str>, Option<&Loaded>),
    (provider, chosen): (&str, &str),
    nics: &BTreeMap<IfName, Nic>,
    health: &Health,
    (now, verbose): (u64, bool),
) -> String {
    let mut out = String::new();
    match (config_error, loaded) {
        (Some(e), _) => {
            let _ = writeln!(out, "configuration: INVALID: {e}");
        }
        (None, Some(l)) if !l.files.is_empty() => {
            let _ = writeln!(out, "configuration: valid ({})", l.files.join(", "));
        }
        _ => out.push_str("configuration: valid (no file: the built-in defaults)\n"),
    }
    out.push_str(&crate::boot_status::text(root));
    if loaded.is_some_and(|l| !l.settings.enabled) {
        out.push_str(
            "disabled (configuration key enabled is false): the hooks, refresh and watch do nothing\n",
        );
    }
    let _ = writeln!(out, "provider: {provider} ({chosen})");
    out.push_str(&crate::kube_status::text(kube_mode, root, ""));
    out.push_str(extra);
    if nics.is_empty() && health.errors.is_empty() {
        out.push_str("no interface has an applied plan or a recorded event\n");
    }
    for (name, nic) in nics {
        match &nic.state {
            Some(st) => {
                let table = st
                    .table
                    .map_or_else(|| "no table".to_owned(), |t| format!("table {t}"));
                let _ = writeln!(out, "{name} {} ({}, profile {})", st.mac, table, st.profile);
            }
            None => {
                let _ = writeln!(out, "{name} (nothing applied)");
            }
        }
        if let Some(ev) = &nic.last {
            let _ = writeln!(
                out,
                "  last event: {} {} {}: {}",
                ev.client,
                ev.reason,
                ago(ev.at_ms, now),
                ev.outcome
            );
        }
        if let Some(st) = &nic.state {
            state_lines(&mut out, paths, st, now, verbose);
        }
        if nic.repairs > 0 {
            let _ = writeln!(
                out,
                "  repaired by leasehook watch: {} time(s) since boot (what was put back: its log)",
                nic.repairs
            );
        }
        for d in &nic.drift {
            let _ = writeln!(out, "  DRIFT: not in the kernel: {d}");
        }
        if let Some(w) = &nic.waiting {
            let _ = writeln!(out, "  waiting: {}", waiting_line(w, now));
        }
    }
    let _ = write!(out, "status: {}", health.word());
    let reasons: Vec<&String> = health.errors.iter().chain(&health.degraded).collect();
    if reasons.is_empty() {
        out.push('\n');
    } else {
        out.push_str(":\n");
        for r in reasons {
            let _ = writeln!(out, "  {r}");
        }
    }
    out
}

fn state_lines(out: &mut String, paths: &Paths, st: &InterfaceState, now: u64, verbose: bool) {
    let _ = writeln!(
        out,
        "  applied {}, refreshed {}",
        ago(st.applied_at_ms, now),
        ago(refreshed_ms(paths, &st.name), now)
    );
    for (fam, f) in &st.families {
        let lease = f.lease.as_ref().map_or_else(String::new, |l| {
            if l.reason == leasehook_core::model::Reason::Metadata {
                format!(
                    ", address {}/{} from the metadata (no DHCP)",
                    l.address, l.prefix_len
                )
            } else if l.reason == leasehook_core::model::Reason::Autoconf {
                format!(
                    ", address {}/{} the kernel configured from router advertisements",
                    l.address, l.prefix_len
                )
            } else {
                format!(", lease {}/{}", l.address, l.prefix_len)
            }
        });
        let _ = writeln!(
            out,
            "  {fam}: {} rule(s), {} route(s), {} address(es){lease}",
            f.rules.len(),
            f.routes.len(),
            f.addresses.len()
        );
        if verbose {
            for r in &f.rules {
                let _ = writeln!(out, "    rule {r}");
            }
            for r in &f.routes {
                let _ = writeln!(out, "    route {r}");
            }
            for a in &f.addresses {
                let _ = writeln!(out, "    address {a}");
            }
        }
    }
    for m in &st.missing {
        let _ = writeln!(out, "  IMDS still missing: {m}");
    }
    for r in &st.refused {
        let _ = writeln!(out, "  refused: {r}");
    }
}

fn document(
    root: &Path,
    paths: &Paths,
    (kube_mode, enabled): (leasehook_core::kubernetes::Mode, bool),
    config_error: Option<&str>,
    (provider, chosen): (&str, &str),
    nics: &BTreeMap<IfName, Nic>,
    health: &Health,
) -> Value {
    let interfaces: Vec<Value> = nics
        .iter()
        .map(|(name, nic)| {
            let mut v = match nic.state.as_ref().map(serde_json::to_value) {
                Some(Ok(Value::Object(m))) => m,
                _ => serde_json::Map::new(),
            };
            v.insert("name".to_owned(), json!(name.as_str()));
            v.insert(
                "refreshed_at_ms".to_owned(),
                json!(refreshed_ms(paths, name)),
            );
            v.insert(
                "last_event".to_owned(),
                nic.last.as_ref().map_or(Value::Null, LastEvent::to_json),
            );
            v.insert("drift".to_owned(), json!(nic.drift));
            v.insert("repairs".to_owned(), json!(nic.repairs));
            let waiting = nic.waiting.as_ref().map_or(Value::Null, |w| {
                json!({
                    "pid": w.pid,
                    "reason": w.reason,
                    "since_ms": w.since_ms,
                    "deadline_ms": w.deadline_ms,
                    "queued": w.queued,
                    "missing": w.missing,
                })
            });
            v.insert("waiting".to_owned(), waiting);
            Value::Object(v)
        })
        .collect();
    json!({
        "schema_version": SCHEMA_VERSION,
        "status": health.word(),
        "exit_code": health.code(),
        "errors": health.errors,
        "degraded": health.degraded,
        "enabled": enabled,
        "configuration": {"valid": config_error.is_none(), "error": config_error},
        "datasource": crate::boot_status::json(root),
        "provider": {"name": provider, "chosen": chosen},
        "kubernetes": crate::kube_status::json(kube_mode, root),
        "interfaces": interfaces,
    })
}

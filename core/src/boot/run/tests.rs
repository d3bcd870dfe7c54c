// SPDX-License-Identifier: Apache-2.0
//! Performs IO (a temporary root): both stages with scripted datasources, checking
//! what each stage asks, what it decides, and what it leaves on disk.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::rc::Rc;

use serde_json::{Map, Value, json};

use super::*;
use crate::error::ImdsErrorKind;
use crate::source::Check;

type Calls = Rc<RefCell<Vec<String>>>;

#[derive(Debug, Clone)]
struct Fake {
    kind: SourceKind,
    fetch: Rc<Result<InstanceData>>,
    check: Rc<Result<bool>>,
    calls: Calls,
}

/// A scripted answer, given again: the error type is not `Clone`, so the
/// scripted errors are built anew.
fn again<T: Clone>(r: &Result<T>) -> Result<T> {
    match r {
        Ok(v) => Ok(v.clone()),
        Err(Error::NotFound { datasource, .. }) => Err(not_found(*datasource)),
        Err(Error::Imds {
            kind: ImdsErrorKind::Disabled,
            ..
        }) => Err(imds_disabled()),
        Err(Error::Datasource {
            datasource,
            what,
            problem,
        }) => Err(Error::Datasource {
            datasource: *datasource,
            what: what.clone(),
            problem: problem.clone(),
        }),
        Err(e) => panic!("not a scripted error: {e}"),
    }
}

impl Datasource for Fake {
    fn kind(&self) -> SourceKind {
        self.kind
    }
    fn fetch(&self) -> Result<InstanceData> {
        self.calls.borrow_mut().push(format!("fetch {}", self.kind));
        again(&self.fetch)
    }
    fn check_instance_id(&self, cached: &InstanceData) -> Result<bool> {
        self.calls
            .borrow_mut()
            .push(format!("check {} {}", self.kind, cached.instance_id));
        again(&self.check)
    }
}

struct Script {
    fakes: BTreeMap<SourceKind, Fake>,
    calls: Calls,
}

impl Datasources for Script {
    fn source(&self, kind: SourceKind) -> Result<Box<dyn Datasource>> {
        Ok(match self.fakes.get(&kind) {
            Some(f) => Box::new(f.clone()),
            None => Box::new(Fake {
                kind,
                fetch: Rc::new(Err(not_found(kind))),
                check: Rc::new(Err(not_found(kind))),
                calls: Rc::clone(&self.calls),
            }),
        })
    }
}

fn not_found(kind: SourceKind) -> Error {
    Error::NotFound {
        datasource: kind,
        reason: "scripted: not there".into(),
    }
}

fn imds_disabled() -> Error {
    Error::Imds {
        method: "PUT",
        url: "http://127.0.0.1:1/latest/api/token".into(),
        kind: ImdsErrorKind::Disabled,
    }
}

fn data(kind: SourceKind, id: &str) -> InstanceData {
    InstanceData {
        datasource: kind,
        instance_id: id.into(),
        local_hostname: Some("host".into()),
        cloud_name: "aws".into(),
        platform: kind.platform().into(),
        subplatform: "scripted".into(),
        region: Some("eu-central-1".into()),
        availability_zone: None,
        meta_data: Map::new(),
        user_data: Some(b"#cloud-config\nsecret: hunter2\n".to_vec()),
        vendor_data: None,
        network_config: None,
        ds: json!({"meta-data": {"instance-id": id}}),
    }
}

impl Script {
    fn new() -> Self {
        Self {
            fakes: BTreeMap::new(),
            calls: Rc::new(RefCell::new(Vec::new())),
        }
    }
    fn with(mut self, kind: SourceKind, fetch: Result<InstanceData>, check: Result<bool>) -> Self {
        self.fakes.insert(
            kind,
            Fake {
                kind,
                fetch: Rc::new(fetch),
                check: Rc::new(check),
                calls: Rc::clone(&self.calls),
            },
        );
        self
    }
    fn calls(&self) -> Vec<String> {
        self.calls.borrow_mut().drain(..).collect()
    }
}

fn detection(list: &[SourceKind], checked: &[(SourceKind, Check)]) -> Detection {
    Detection {
        datasource_list: list.to_vec(),
        checks: checked.iter().copied().collect(),
        reasons: checked
            .iter()
            .map(|(k, c)| (k.name().to_owned(), format!("scripted {c:?}")))
            .collect(),
        list_from: "scripted".into(),
        virt: "lxc (--virt)".into(),
        disabled: None,
        warnings: Vec::new(),
    }
}

fn ctx(root: &Path, d: Detection) -> Facts {
    Facts {
        root: root.to_owned(),
        detection: d,
        config: BootConfig::default(),
        virt: "lxc".into(),
        lxd_socket_present: true,
        cloud_name: "aws".into(),
        boot_id: None,
        now_ms: 1_000,
    }
}

/// A reboot: `/run` is a tmpfs.
fn reboot(root: &Path) {
    let _ = fs::remove_dir_all(root.join("run"));
}

fn read(root: &Path, rel: &str) -> String {
    fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn json_at(root: &Path, rel: &str) -> Value {
    serde_json::from_str(&read(root, rel)).unwrap()
}

fn mode(root: &Path, rel: &str) -> u32 {
    fs::metadata(root.join(rel)).unwrap().permissions().mode() & 0o777
}

use crate::source::short::{Ec2, Lxd, NoCloud, NoneDs};

#[test]
fn lxd_found_locally_and_the_network_stage_asks_nothing() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let s = Script::new().with(Lxd, Ok(data(Lxd, "c1")), Ok(true));
    let c = ctx(
        root,
        detection(
            &[Lxd, NoneDs],
            &[(Lxd, Check::Found), (Ec2, Check::NotFound)],
        ),
    );
    let local = run(Stage::Local, &c, &s).unwrap();
    assert_eq!(local.state.verdict, Verdict::Found);
    assert_eq!(local.state.origin, Some(Origin::Fetched));
    assert_eq!(local.state.new_instance, Some(true));
    assert_eq!(s.calls(), ["fetch LXD"]);
    // Ec2 was configured but not detected: said so.
    assert!(
        local
            .state
            .attempts
            .iter()
            .any(|a| a.datasource == Ec2 && a.result == Tried::NotDetected)
    );
    assert_eq!(mode(root, "run/leasehook/instance-data.json"), 0o644);
    assert_eq!(
        mode(root, "run/leasehook/instance-data-sensitive.json"),
        0o600
    );
    assert!(!read(root, "run/leasehook/instance-data.json").contains("hunter2"));
    assert!(read(root, "run/leasehook/instance-data-sensitive.json").contains("hunter2"));
    assert_eq!(read(root, "var/lib/leasehook/data/instance-id"), "c1\n");
    assert_eq!(
        read(root, "var/lib/leasehook/data/previous-instance-id"),
        "NO_PREVIOUS_INSTANCE_ID\n"
    );
    assert_eq!(
        mode(root, "var/lib/leasehook/instances/c1/datasource.json"),
        0o600
    );

    let net = run(Stage::Network, &c, &s).unwrap();
    assert!(net.trusted);
    assert_eq!(net.state, local.state);
    assert!(s.calls().is_empty(), "the network stage asked a datasource");

    // Instance-data removed by hand: written again from the cache, still no call.
    fs::remove_file(root.join("run/leasehook/instance-data.json")).unwrap();
    run(Stage::Network, &c, &s).unwrap();
    assert!(s.calls().is_empty());
    assert_eq!(
        json_at(root, "run/leasehook/instance-data.json")["v1"]["instance_id"],
        "c1"
    );
}

#[test]
fn imds_disabled_after_the_first_boot_restores_the_cache() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let c = ctx(
        root,
        detection(
            &[Ec2, NoneDs],
            &[(Ec2, Check::Found), (Lxd, Check::NotFound)],
        ),
    );
    // First boot: the local stage leaves EC2 to the network stage, which fetches.
    let s = Script::new().with(Ec2, Ok(data(Ec2, "i-1")), Ok(true));
    let local = run(Stage::Local, &c, &s).unwrap();
    assert_eq!(local.state.verdict, Verdict::NeedsNetwork);
    assert_eq!(local.state.deferred, [Ec2]);
    assert!(s.calls().is_empty());
    let net = run(Stage::Network, &c, &s).unwrap();
    assert_eq!(net.state.origin, Some(Origin::Fetched));
    assert_eq!(s.calls(), ["fetch Ec2"]);
    // The local stage's attempts are kept in the final verdict.
    assert!(
        net.state
            .attempts
            .iter()
            .any(|a| a.stage == Stage::Local && a.result == Tried::Deferred)
    );

    // Second boot: IMDS refuses tokens.
    reboot(root);
    let s = Script::new().with(Ec2, Err(imds_disabled()), Err(imds_disabled()));
    run(Stage::Local, &c, &s).unwrap();
    let net = run(Stage::Network, &c, &s).unwrap();
    // One check, no fetch after the check failed.
    assert_eq!(s.calls(), ["check Ec2 i-1"]);
    assert_eq!(net.state.verdict, Verdict::Found);
    assert_eq!(net.state.origin, Some(Origin::CacheFallback));
    assert_eq!(net.state.new_instance, Some(false));
    assert!(
        net.state
            .cache
            .starts_with("used: no configured datasource answered"),
        "{}",
        net.state.cache
    );
    let failed = net
        .state
        .attempts
        .iter()
        .find(|a| a.result == Tried::CheckFailed)
        .unwrap();
    assert!(failed.detail.contains("IMDS disabled"), "{failed}");
    assert_eq!(
        read(root, "var/lib/leasehook/data/previous-instance-id"),
        "i-1\n"
    );
    assert_eq!(read(root, "var/lib/leasehook/data/instance-id"), "i-1\n");
    let doc = json_at(root, "run/leasehook/instance-data.json");
    assert_eq!(doc["leasehook"]["restored_from_cache"], true);
    assert_eq!(doc["leasehook"]["origin"], "cache-fallback");
    assert_eq!(doc["v1"]["instance_id"], "i-1");
}

#[test]
fn a_matching_cache_is_used_without_a_fetch_and_a_new_id_is_a_new_instance() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let c = ctx(root, detection(&[Lxd, NoneDs], &[]));
    let s = Script::new().with(Lxd, Ok(data(Lxd, "c1")), Ok(true));
    run(Stage::Local, &c, &s).unwrap();
    s.calls();
    reboot(root);
    let st = run(Stage::Local, &c, &s).unwrap().state;
    assert_eq!(s.calls(), ["check LXD c1"]);
    assert_eq!(st.origin, Some(Origin::CacheChecked));
    assert_eq!(st.new_instance, Some(false));

    // The instance was copied: LXD names another id.
    reboot(root);
    let s = Script::new().with(Lxd, Ok(data(Lxd, "c2")), Ok(false));
    let st = run(Stage::Local, &c, &s).unwrap().state;
    assert_eq!(s.calls(), ["check LXD c1", "fetch LXD"]);
    assert_eq!(st.origin, Some(Origin::Fetched));
    assert_eq!(st.new_instance, Some(true));
    assert_eq!(
        read(root, "var/lib/leasehook/data/previous-instance-id"),
        "c1\n"
    );
    assert_eq!(read(root, "var/lib/leasehook/data/instance-id"), "c2\n");
    assert!(
        root.join("var/lib/leasehook/instances/c1/datasource.json")
            .is_file()
    );

    // Another id, and then the fetch fails: the old cache must not stand in.
    reboot(root);
    let s = Script::new().with(
        Lxd,
        Err(Error::Datasource {
            datasource: Lxd,
            what: "GET /1.0/config".into(),
            problem: "HTTP 500".into(),
        }),
        Ok(false),
    );
    let st = run(Stage::Local, &c, &s).unwrap().state;
    assert_eq!(st.verdict, Verdict::NoDatasource);
    assert!(st.cache.contains("instance-id mismatch"), "{}", st.cache);
    // The last good state is kept.
    assert_eq!(read(root, "var/lib/leasehook/data/instance-id"), "c2\n");
}

#[test]
fn the_cache_is_not_used_when_no_longer_configured_or_disabled() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let s = Script::new().with(Lxd, Ok(data(Lxd, "c1")), Ok(true));
    run(Stage::Local, &ctx(root, detection(&[Lxd, NoneDs], &[])), &s).unwrap();

    // datasource_list changed to NoCloud only, and NoCloud is not there.
    reboot(root);
    let s = Script::new();
    let st = run(
        Stage::Local,
        &ctx(root, detection(&[NoCloud, NoneDs], &[])),
        &s,
    )
    .unwrap()
    .state;
    assert_eq!(s.calls(), ["fetch NoCloud"]);
    assert_eq!(st.verdict, Verdict::NoDatasource);
    assert_eq!(st.datasource, Some(NoneDs));
    assert!(
        st.cache.contains(
            "the cached datasource LXD is no longer configured (configured: [NoCloud, None])"
        ),
        "{}",
        st.cache
    );
    let doc = json_at(root, "run/leasehook/instance-data.json");
    assert_eq!(doc["v1"]["instance_id"], "iid-datasource-none");
    assert_eq!(doc["leasehook"]["origin"], "no-datasource");
    // Nothing of the last good state is lost.
    assert_eq!(read(root, "var/lib/leasehook/data/instance-id"), "c1\n");
    assert!(
        root.join("var/lib/leasehook/instances/c1/datasource.json")
            .is_file()
    );

    // Configured, the socket gone (not detected), but fallback off for LXD.
    reboot(root);
    let mut c = ctx(root, detection(&[], &[(Lxd, Check::NotFound)]));
    c.config.fallback.per_datasource.insert(Lxd, false);
    let st = run(Stage::Local, &c, &s).unwrap().state;
    assert!(s.calls().is_empty());
    assert_eq!(st.verdict, Verdict::NoDatasource);
    assert!(
        st.cache.contains("datasource.LXD.fallback is false"),
        "{}",
        st.cache
    );
    // ... and on: the socket being gone is what the cache is for.
    reboot(root);
    c.config.fallback.per_datasource.clear();
    let st = run(Stage::Local, &c, &s).unwrap().state;
    assert_eq!(st.origin, Some(Origin::CacheFallback));
    let not_detected = &st.attempts[0];
    assert_eq!(
        (not_detected.datasource, not_detected.result),
        (Lxd, Tried::NotDetected)
    );
}

#[test]
fn a_corrupt_cache_is_set_aside_and_reported() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let c = ctx(root, detection(&[], &[(Lxd, Check::NotFound)]));
    let s = Script::new().with(Lxd, Ok(data(Lxd, "c1")), Ok(true));
    run(Stage::Local, &ctx(root, detection(&[Lxd, NoneDs], &[])), &s).unwrap();
    reboot(root);
    let rec = root.join("var/lib/leasehook/instances/c1/datasource.json");
    let text = fs::read_to_string(&rec).unwrap();
    fs::write(&rec, text.get(..text.len() / 3).unwrap()).unwrap();
    let st = run(Stage::Local, &c, &s).unwrap().state;
    assert_eq!(st.verdict, Verdict::NoDatasource);
    assert!(st.cache.contains("truncated"), "{}", st.cache);
    assert!(
        root.join("var/lib/leasehook/instances/c1/datasource.json.corrupt")
            .is_file()
    );
}

#[test]
fn disabled_and_the_network_stage_alone() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let mut d = detection(&[], &[]);
    d.disabled = Some("etc/cloud/cloud-init.disabled exists".into());
    let s = Script::new();
    let st = run(Stage::Local, &ctx(root, d.clone()), &s).unwrap().state;
    assert_eq!(st.verdict, Verdict::Disabled);
    assert!(!root.join("run/leasehook/instance-data.json").exists());
    let net = run(Stage::Network, &ctx(root, d), &s).unwrap();
    assert!(net.trusted);
    assert!(s.calls().is_empty());

    // No local verdict at all: the network stage searches every detected source.
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let s = Script::new().with(Ec2, Ok(data(Ec2, "i-9")), Ok(true));
    let st = run(
        Stage::Network,
        &ctx(root, detection(&[NoCloud, Ec2, NoneDs], &[])),
        &s,
    )
    .unwrap()
    .state;
    assert_eq!(s.calls(), ["fetch NoCloud", "fetch Ec2"]);
    assert_eq!(st.origin, Some(Origin::Fetched));
    assert_eq!(st.stage, Stage::Network);
}

#[test]
fn a_stage_run_twice_in_one_boot_keeps_the_previous_instance_id() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let c = ctx(root, detection(&[Lxd, NoneDs], &[]));
    let s = Script::new().with(Lxd, Ok(data(Lxd, "c1")), Ok(true));
    run(Stage::Local, &c, &s).unwrap();
    let again = run(Stage::Local, &c, &s).unwrap().state;
    assert_eq!(again.new_instance, Some(true));
    assert_eq!(
        read(root, "var/lib/leasehook/data/previous-instance-id"),
        "NO_PREVIOUS_INSTANCE_ID\n"
    );
}

#[test]
fn an_lxd_vm_without_its_socket_yet_is_left_to_the_network_stage() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let mut c = ctx(root, detection(&[Lxd, NoneDs], &[]));
    c.virt = "kvm".into();
    c.lxd_socket_present = false;
    let s = Script::new().with(Lxd, Ok(data(Lxd, "vm1")), Ok(true));
    let st = run(Stage::Local, &c, &s).unwrap().state;
    assert_eq!(st.verdict, Verdict::NeedsNetwork);
    assert!(s.calls().is_empty());
    let st = run(Stage::Network, &c, &s).unwrap().state;
    assert_eq!(s.calls(), ["fetch LXD"]);
    assert_eq!(st.origin, Some(Origin::Fetched));
}

#[test]
fn a_failed_cache_write_is_recorded_not_hidden() {
    // Issue 18, item 9: `init` warned and exited 0 when the cache or the
    // instance-id could not be stored, and the next boot's fallback was silently
    // gone. Here `var/lib` is a file, so neither can be written.
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    fs::create_dir_all(root.join("var")).unwrap();
    fs::write(root.join("var/lib"), b"not a folder").unwrap();
    let s = Script::new().with(Lxd, Ok(data(Lxd, "c1")), Ok(true));
    let c = ctx(root, detection(&[Lxd, NoneDs], &[(Lxd, Check::Found)]));
    let local = run(Stage::Local, &c, &s).unwrap();
    assert_eq!(local.state.verdict, Verdict::Found);
    let errors = &local.state.cache_errors;
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].ends_with("the datasource was not cached"),
        "{errors:?}"
    );
    assert!(
        errors[1].ends_with("data/instance-id not updated"),
        "{errors:?}"
    );
    // boot.json keeps it for `leasehook status`.
    let st = json_at(root, "run/leasehook/boot.json");
    assert_eq!(st["cache_errors"].as_array().map(Vec::len), Some(2), "{st}");
    // The data is still in use.
    assert_eq!(
        json_at(root, "run/leasehook/instance-data.json")["v1"]["instance_id"],
        "c1"
    );
    // A good write leaves no error behind.
    fs::remove_file(root.join("var/lib")).unwrap();
    reboot(root);
    let again = run(Stage::Local, &c, &s).unwrap();
    assert!(
        again.state.cache_errors.is_empty(),
        "{:?}",
        again.state.cache_errors
    );
    assert!(
        json_at(root, "run/leasehook/boot.json")
            .get("cache_errors")
            .is_none()
    );
}

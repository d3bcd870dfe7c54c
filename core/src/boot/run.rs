// SPDX-License-Identifier: Apache-2.0
//! Performs IO: one boot stage end to end — `leasehook init --local` and `leasehook
//! init` — using the pure decisions of [`super::decide`].
//!
//! Both stages:
//!
//! 1. read the verdict of this boot so far (`boot.json`); the network stage trusts
//!    a final one — a datasource found and fetched, restored from the cache, or
//!    none — and makes no request at all;
//! 2. read the cache, setting a bad one aside;
//! 3. **cache check**: when the cached datasource is configured, detected and
//!    tried in this stage, ask it whether the instance-id is still the cache's
//!    (LXD: the socket's meta-data; NoCloud: its seed or command line; EC2: one
//!    request, network stage). Yes → the cache is used without a full fetch. No →
//!    a new instance: search on. It cannot tell → that source is failed for this
//!    stage and not asked again;
//! 4. **search** the detected list in order: the local stage fetches NoCloud and
//!    LXD and leaves EC2 (and an LXD VM's socket that is not there yet) to the
//!    network stage; the network stage fetches what was left;
//! 5. nothing answered and nothing is left for the network stage → **fallback**:
//!    the cached datasource, when [`super::decide::fallback`] allows it; else the
//!    `None` datasource.
//!
//! A datasource found is cached (fetched data only), the instance reflected in
//! `data/instance-id` and `data/previous-instance-id`, instance-data written, and
//! the verdict recorded. Every datasource tried is logged with its result, and the
//! cache decision with its reason.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::config::BootConfig;
use super::decide::{self, Attempt, CacheView, Role, Tried};
use super::state::{self, BOOT_STATE_VERSION, BootState, Verdict};
use crate::cache::record::CacheRecord;
use crate::cache::{Cache, Lookup};
use crate::constants::{INSTANCE_DATA, INSTANCE_DATA_SENSITIVE};
use crate::error::{Error, Result};
use crate::instance_data::{self, Provenance};
use crate::instance_data::{Origin, Stage};
use crate::source::detect::{Detection, Node, ReadOptions, decide as decide_list, read_snapshot};
use crate::source::lxd::Lxd;
use crate::source::nocloud::NoCloud;
use crate::source::provider::{Setup, WaitPolicy};
use crate::source::{Datasource, InstanceData, NoneSource, SourceKind};

/// What a stage is told by its command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Every path below this root (`/` in production).
    pub root: PathBuf,
    /// The virtualisation to assume (`--virt`).
    pub virt: Option<String>,
    /// leasehook's configuration file (`--config`); default below the root.
    pub config: Option<PathBuf>,
    /// The environment (`LEASEHOOK_*` settings are read from it).
    pub env: crate::event::Env,
}

/// Everything a stage decides from, gathered before it starts.
#[derive(Debug, Clone)]
pub struct Facts {
    /// The root.
    pub root: PathBuf,
    /// Which datasources the instance has (ds-identify's decision).
    pub detection: Detection,
    /// The boot stage's settings.
    pub config: BootConfig,
    /// The virtualisation.
    pub virt: String,
    /// Whether `dev/lxd/sock` or `dev/incus/sock` is a socket.
    pub lxd_socket_present: bool,
    /// The platform detection identified (`aws`, ... for the EC2 API; a
    /// cloud's row says, [`crate::source::provider::Cloud::platform`];
    /// `unknown`).
    pub cloud_name: String,
    /// The kernel's boot id.
    pub boot_id: Option<String>,
    /// Now, in milliseconds since the epoch.
    pub now_ms: u64,
}

impl Facts {
    /// Reads the detection snapshot and leasehook's configuration below the root.
    pub fn gather(o: &Options) -> Result<Self> {
        let loaded = crate::config::load(
            &crate::config::Layers::from_env(o.env.clone())
                .with_root(Some(o.root.clone()))
                .with_file(o.config.clone()),
        )?;
        Self::gather_with(o, &loaded)
    }

    /// Reads the detection snapshot below the root, with leasehook's configuration
    /// already loaded (the CLI loads it once per process).
    pub fn gather_with(o: &Options, loaded: &crate::config::Loaded) -> Result<Self> {
        let mut ro = ReadOptions::new(&o.root);
        if let Some(v) = &o.virt {
            ro = ro.with_virt(v);
        }
        let ro = ro.with_datasource_list(loaded.datasource_list());
        let snapshot = read_snapshot(&ro)?;
        let detection = decide_list(&snapshot)?;
        let config = BootConfig::from_config(loaded);
        Ok(Self {
            root: o.root.clone(),
            config,
            virt: snapshot.virt.clone(),
            lxd_socket_present: snapshot.lxd_socket == Node::Socket
                || snapshot.incus_socket == Node::Socket,
            cloud_name: crate::source::CLOUDS
                .iter()
                .find_map(|c| (c.platform)(&snapshot))
                .unwrap_or("unknown")
                .to_owned(),
            boot_id: state::boot_id(&o.root),
            now_ms: crate::fs::unix_ms(),
            detection,
        })
    }
}

/// Builds the datasource of a kind: the seam tests replace.
pub trait Datasources {
    /// The datasource `kind`, ready to check or fetch.
    fn source(&self, kind: SourceKind) -> Result<Box<dyn Datasource>>;
}

/// The real datasources, below the context's root.
#[derive(Debug, Clone)]
pub struct RealSources {
    root: PathBuf,
    virt: String,
    cloud_name: String,
    config: BootConfig,
}

impl RealSources {
    /// The datasources a context describes.
    pub fn new(ctx: &Facts) -> Self {
        Self {
            root: ctx.root.clone(),
            virt: ctx.virt.clone(),
            cloud_name: ctx.cloud_name.clone(),
            config: ctx.config.clone(),
        }
    }
}

impl Datasources for RealSources {
    fn source(&self, kind: SourceKind) -> Result<Box<dyn Datasource>> {
        if let Some(cloud) = crate::source::cloud_source(kind) {
            let mut policy = WaitPolicy::default();
            if let Some(b) = self.config.imds_budget {
                policy = policy.with_budget(b);
            }
            let endpoints = self.config.imds_endpoints.clone().unwrap_or_default();
            let setup = Setup {
                endpoint: self
                    .config
                    .cloud_endpoints
                    .get(cloud.cloud.name)
                    .map(String::as_str),
                imds_endpoints: &endpoints,
                imdsv1_fallback: self.config.imdsv1_fallback,
                cloud_name: &self.cloud_name,
                ..Setup::new(&self.root)
            };
            return (cloud.datasource)(&setup, kind, policy);
        }
        Ok(match kind {
            SourceKind::Lxd => Box::new(Lxd::new(&self.root).with_virt(&self.virt)),
            SourceKind::NoCloud => Box::new(NoCloud::new(&self.root).with_virt(&self.virt)),
            SourceKind::None => Box::new(NoneSource),
            // Every other kind is a cloud's, built by its row above.
            other => {
                return Err(Error::NotFound {
                    datasource: other,
                    reason: "no cloud's row answers this datasource".to_owned(),
                });
            }
        })
    }
}

/// What a stage did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunReport {
    /// The verdict as recorded in `boot.json`.
    pub state: BootState,
    /// The network stage found a final verdict of this boot and trusted it: no
    /// datasource was asked anything.
    pub trusted: bool,
}

/// Writes both instance-data files: the sensitive one (0600), then the public one
/// (0644), each atomically; the public one is redacted before it is written, so it
/// never holds a secret, not even for a moment.
pub fn publish(root: &Path, data: &InstanceData, p: &Provenance) -> Result<()> {
    let r = instance_data::render(data, p, &crate::source::region_ids())?;
    let dir = state::run_dir(root)?;
    dir.write_atomic(INSTANCE_DATA_SENSITIVE, &r.sensitive, 0o600)?;
    dir.write_atomic(INSTANCE_DATA, &r.public, 0o644)
}

/// One stage's work, with its sources built on demand (once each).
struct StageRun<'a> {
    stage: Stage,
    ctx: &'a Facts,
    sources: &'a dyn Datasources,
    built: BTreeMap<SourceKind, Box<dyn Datasource>>,
    cache: Cache,
    attempts: Vec<Attempt>,
    previous_state: Option<BootState>,
    previous_instance_id: Option<String>,
    configured: Vec<SourceKind>,
}

impl StageRun<'_> {
    fn source(&mut self, kind: SourceKind) -> Result<&dyn Datasource> {
        let s = match self.built.entry(kind) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => e.insert(self.sources.source(kind)?),
        };
        Ok(&**s)
    }

    fn record(&mut self, datasource: SourceKind, result: Tried, detail: impl Into<String>) {
        let a = Attempt {
            datasource,
            stage: self.stage,
            result,
            detail: detail.into(),
        };
        match result {
            Tried::Fetched | Tried::CacheMatched | Tried::Deferred | Tried::NotDetected => {
                log::info!("{a}");
            }
            Tried::CacheMismatch | Tried::CheckFailed | Tried::NotFound | Tried::Failed => {
                log::warn!("{a}");
            }
        }
        self.attempts.push(a);
    }

    fn state(&self, verdict: Verdict) -> BootState {
        BootState {
            version: BOOT_STATE_VERSION,
            boot_id: self.ctx.boot_id.clone(),
            stage: self.stage,
            verdict,
            datasource: None,
            instance_id: None,
            origin: None,
            cache: String::new(),
            new_instance: None,
            previous_instance_id: self.previous_instance_id.clone(),
            configured: self.configured.clone(),
            deferred: Vec::new(),
            attempts: self.attempts.clone(),
            fetched_at_ms: None,
            decided_at_ms: self.ctx.now_ms,
            cache_errors: Vec::new(),
        }
    }

    /// A datasource's data is in use: cache (fetched data only), reflect, publish,
    /// record.
    fn found(
        &mut self,
        origin: Origin,
        data: &InstanceData,
        fetched_at_ms: u64,
        cache_note: String,
    ) -> Result<BootState> {
        // A failed cache write is not hidden: it is recorded in boot.json (shown
        // by `leasehook status`) and `init` exits 4, as the next boot's fallback
        // is gone.
        let mut cache_errors = Vec::new();
        if origin == Origin::Fetched {
            match self
                .cache
                .store(&CacheRecord::new(data.clone(), fetched_at_ms))
            {
                Ok(path) => log::info!("{} cached in {}", data.datasource, path.display()),
                Err(e) => {
                    log::error!("{e}; the datasource was not cached");
                    cache_errors.push(format!("{e}; the datasource was not cached"));
                }
            }
        }
        // A stage run again in the same boot must not turn this instance into its
        // own predecessor.
        let again = self.previous_state.as_ref().is_some_and(|s| {
            s.verdict == Verdict::Found && s.instance_id.as_deref() == Some(&data.instance_id)
        });
        let new_instance = match self.cache.reflect(&data.instance_id, again) {
            Ok(r) => {
                if again {
                    self.previous_state.as_ref().and_then(|s| s.new_instance)
                } else {
                    Some(r.new_instance)
                }
            }
            Err(e) => {
                log::error!("{e}; data/instance-id not updated");
                cache_errors.push(format!("{e}; data/instance-id not updated"));
                None
            }
        };
        let prov = Provenance {
            origin,
            stage: self.stage,
            cache: cache_note.clone(),
            fetched_at_ms: Some(fetched_at_ms),
            decided_at_ms: self.ctx.now_ms,
        };
        publish(&self.ctx.root, data, &prov)?;
        let mut st = self.state(Verdict::Found);
        st.datasource = Some(data.datasource);
        st.instance_id = Some(data.instance_id.clone());
        st.origin = Some(origin);
        st.cache = cache_note;
        st.new_instance = new_instance;
        st.fetched_at_ms = Some(fetched_at_ms);
        st.cache_errors = cache_errors;
        match new_instance {
            Some(true) => log::info!(
                "{} {:?}: a new instance (data/instance-id was {:?})",
                data.datasource,
                data.instance_id,
                self.previous_instance_id
            ),
            Some(false) => log::info!(
                "{} {:?}: {}, not a new instance",
                data.datasource,
                data.instance_id,
                origin
            ),
            None => {}
        }
        Ok(st)
    }

    /// No datasource and no usable cache: `None`, as cloud-init's `DataSourceNone`.
    /// Neither the cache nor `data/` is touched: the last good state is kept.
    fn no_datasource(&mut self, why: &decide::NotUsed) -> Result<BootState> {
        let note = format!("not used: {why}");
        let data = NoneSource.fetch()?;
        let prov = Provenance {
            origin: Origin::NoDatasource,
            stage: self.stage,
            cache: note.clone(),
            fetched_at_ms: None,
            decided_at_ms: self.ctx.now_ms,
        };
        publish(&self.ctx.root, &data, &prov)?;
        let mut st = self.state(Verdict::NoDatasource);
        st.datasource = Some(SourceKind::None);
        st.instance_id = Some(data.instance_id);
        st.origin = Some(Origin::NoDatasource);
        st.cache = note;
        Ok(st)
    }
}

fn describe(view: &CacheView) -> String {
    match view {
        CacheView::Missing => "there was no cache".to_owned(),
        CacheView::Corrupt(why) => format!("the cache was unusable ({why})"),
        CacheView::Valid {
            datasource,
            instance_id,
        } => format!("the cache held {datasource} {instance_id:?}"),
    }
}

/// Runs one stage (see the module docs) and records its verdict.
#[allow(clippy::too_many_lines)] // the stage reads top to bottom, as the module docs list it
pub fn run(stage: Stage, ctx: &Facts, sources: &dyn Datasources) -> Result<RunReport> {
    let previous_state = state::read(&ctx.root, ctx.boot_id.as_deref());
    let cache = Cache::new(&ctx.root);
    let mut r = StageRun {
        stage,
        ctx,
        sources,
        built: BTreeMap::new(),
        cache,
        attempts: Vec::new(),
        previous_instance_id: None,
        configured: decide::configured(&ctx.detection),
        previous_state,
    };

    // The network stage trusts a final verdict of this boot.
    let handed_over = match (&r.previous_state, stage) {
        (Some(prev), Stage::Network) if prev.verdict.is_final() => {
            log::info!(
                "the {} stage decided already ({}); nothing is asked again",
                prev.stage,
                prev.datasource
                    .map_or("no datasource".to_owned(), |d| format!(
                        "{d} {:?}",
                        prev.instance_id.clone().unwrap_or_default()
                    ))
            );
            let prev = prev.clone();
            republish_if_missing(ctx, &prev);
            return Ok(RunReport {
                state: prev,
                trusted: true,
            });
        }
        (Some(prev), Stage::Network) => Some(prev.clone()),
        _ => None,
    };

    if let Some(why) = &ctx.detection.disabled {
        log::info!("disabled: {why}; no datasource is looked for");
        let mut st = r.state(Verdict::Disabled);
        st.cache = format!("not used: disabled ({why})");
        state::write(&ctx.root, &st)?;
        return Ok(RunReport {
            state: st,
            trusted: false,
        });
    }

    r.previous_instance_id = r.cache.instance_id();
    let loaded = r.cache.load();
    let view = match &loaded {
        Lookup::Missing => CacheView::Missing,
        Lookup::Bad(why) => {
            log::warn!("cache: {why}");
            CacheView::Corrupt(why.clone())
        }
        Lookup::Valid(rec) => CacheView::Valid {
            datasource: rec.datasource,
            instance_id: rec.instance_id.clone(),
        },
    };

    let to_try: Vec<SourceKind> = if let Some(prev) = &handed_over {
        r.attempts.clone_from(&prev.attempts);
        prev.deferred.clone()
    } else {
        if stage == Stage::Network {
            log::info!("no verdict of the local stage this boot; searching every datasource");
        }
        for k in r.configured.clone() {
            if k != SourceKind::None && !ctx.detection.datasource_list.contains(&k) {
                let why = ctx
                    .detection
                    .reasons
                    .get(k.name())
                    .cloned()
                    .unwrap_or_default();
                r.record(k, Tried::NotDetected, why);
            }
        }
        ctx.detection.datasource_list.clone()
    };
    let role = |k| {
        decide::role(
            k,
            stage,
            ctx.lxd_socket_present,
            &ctx.virt,
            crate::source::cloud_source(k),
        )
    };

    // Cache check.
    let mut failed_check = None;
    if let Lookup::Valid(rec) = &loaded {
        let k = rec.datasource;
        if r.configured.contains(&k) && to_try.contains(&k) && role(k) == Role::Try {
            let answer = r.source(k)?.check_instance_id(&rec.instance_data);
            match answer {
                Ok(true) => {
                    r.record(
                        k,
                        Tried::CacheMatched,
                        format!("instance-id {:?}", rec.instance_id),
                    );
                    let note = format!(
                        "used: {k} confirmed the cached instance-id {:?}",
                        rec.instance_id
                    );
                    let st = r.found(
                        Origin::CacheChecked,
                        &rec.instance_data,
                        rec.fetched_at_ms,
                        note,
                    )?;
                    state::write(&ctx.root, &st)?;
                    return Ok(RunReport {
                        state: st,
                        trusted: false,
                    });
                }
                Ok(false) => r.record(
                    k,
                    Tried::CacheMismatch,
                    format!(
                        "an instance-id other than the cached {:?} (a new instance)",
                        rec.instance_id
                    ),
                ),
                Err(e) => {
                    r.record(k, Tried::CheckFailed, e.to_string());
                    failed_check = Some(k);
                }
            }
        }
    }

    // Search.
    let mut deferred = Vec::new();
    for k in to_try {
        if Some(k) == failed_check {
            continue;
        }
        match role(k) {
            Role::Skip => {}
            Role::Defer(why) => {
                deferred.push(k);
                r.record(k, Tried::Deferred, why);
            }
            Role::Try => match r.source(k)?.fetch() {
                Ok(data) => {
                    r.record(
                        k,
                        Tried::Fetched,
                        format!("instance-id {:?}", data.instance_id),
                    );
                    let note = format!("not needed: {k} answered; {}", describe(&view));
                    let st = r.found(Origin::Fetched, &data, ctx.now_ms, note)?;
                    state::write(&ctx.root, &st)?;
                    return Ok(RunReport {
                        state: st,
                        trusted: false,
                    });
                }
                Err(Error::NotFound { reason, .. }) => r.record(k, Tried::NotFound, reason),
                Err(e) => r.record(k, Tried::Failed, e.to_string()),
            },
        }
    }

    if !deferred.is_empty() {
        let mut st = r.state(Verdict::NeedsNetwork);
        st.deferred = deferred;
        st.cache = format!("not decided yet; {}", describe(&view));
        log::info!(
            "left to the network stage: {}",
            st.deferred
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(", ")
        );
        state::write(&ctx.root, &st)?;
        return Ok(RunReport {
            state: st,
            trusted: false,
        });
    }

    // Fallback.
    let tried: Vec<String> = r.attempts.iter().map(ToString::to_string).collect();
    let decision = decide::fallback(
        &view,
        &r.configured,
        &ctx.config.fallback,
        r.previous_instance_id.as_deref(),
        &r.attempts,
    );
    let st = match (decision, &loaded) {
        (Ok(()), Lookup::Valid(rec)) => {
            log::warn!(
                "no configured datasource answered (tried: {}); using the cached {} {:?}, fetched at {} ms since the epoch",
                if tried.is_empty() {
                    "none".to_owned()
                } else {
                    tried.join("; ")
                },
                rec.datasource,
                rec.instance_id,
                rec.fetched_at_ms
            );
            let note = format!(
                "used: no configured datasource answered; the cached {} {:?} is still configured",
                rec.datasource, rec.instance_id
            );
            r.found(
                Origin::CacheFallback,
                &rec.instance_data,
                rec.fetched_at_ms,
                note,
            )?
        }
        (Ok(()), _) => r.no_datasource(&decide::NotUsed::Missing)?,
        (Err(why), _) => {
            log::warn!(
                "no configured datasource answered (tried: {}); the cache is not used: {why}; datasource None",
                if tried.is_empty() {
                    "none".to_owned()
                } else {
                    tried.join("; ")
                },
            );
            r.no_datasource(&why)?
        }
    };
    state::write(&ctx.root, &st)?;
    Ok(RunReport {
        state: st,
        trusted: false,
    })
}

/// The network stage trusted a verdict, but instance-data is gone (removed by
/// hand): write it again from the cache (or as `None`), asking no datasource.
fn republish_if_missing(ctx: &Facts, prev: &BootState) {
    let present = state::run_dir_if_present(&ctx.root)
        .ok()
        .flatten()
        .is_some_and(|d| {
            d.entry(INSTANCE_DATA)
                .is_ok_and(|e| e == crate::fs::Entry::File)
        });
    if present || prev.verdict == Verdict::Disabled {
        return;
    }
    let data = match (prev.verdict, Cache::new(&ctx.root).load()) {
        (Verdict::NoDatasource, _) => NoneSource.fetch().ok(),
        (Verdict::Found, Lookup::Valid(rec))
            if Some(&rec.instance_id) == prev.instance_id.as_ref() =>
        {
            Some(rec.instance_data)
        }
        _ => None,
    };
    let Some(data) = data else {
        log::warn!("instance-data is missing and the cache no longer holds the data in use");
        return;
    };
    let provenance = Provenance {
        origin: prev.origin.unwrap_or(Origin::NoDatasource),
        stage: prev.stage,
        cache: prev.cache.clone(),
        fetched_at_ms: prev.fetched_at_ms,
        decided_at_ms: prev.decided_at_ms,
    };
    match publish(&ctx.root, &data, &provenance) {
        Ok(()) => log::warn!("instance-data was missing; written again from the cache"),
        Err(e) => log::warn!("instance-data is missing and cannot be written: {e}"),
    }
}

#[cfg(test)]
mod tests;

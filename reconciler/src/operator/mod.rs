//! The scoped operator loops: an operator runtime that sees only its own
//! Camel K resources and takes part in handoffs.
//!
//! # Expected flow
//! 1. [`run`] starts the operator lock ([`crate::lock`]) and one watch per
//!    kind (and per namespace when limited to some), each with the server-side
//!    label selector `camel.apache.org/operator.id=<id>`: nothing else is
//!    received or cached. Handoff requests addressed to it come through a
//!    watch of Leases labelled `camelk.dev/handoff-from=<id>`.
//! 2. On every event and every resync tick, while it leads, it first releases
//!    what it may (`crate::camel_k::release::owner_may_release`; up to
//!    [`FLIPS_IN_FLIGHT`](crate::handoff::FLIPS_IN_FLIGHT) fenced flips at once, each of another
//!    resource), then moves each owned resource one step along the
//!    reference lifecycle (`lifecycle`), through fenced writes (`writer`).
//!
//! # Guarantees
//! - Only the leading replica writes, and only while its last renewal is
//!   younger than the renew deadline.
//! - Every status write is fenced on the owner label and on the version the
//!   decision was made on; a resource being handed off gets no new work, only
//!   the work in flight is finished before it is released.
//! - A resource whose annotation names another operator (label and
//!   annotation disagree) is not acted on: by the one owner rule it is that
//!   operator's.
//! - A child it creates (kit, Build, a Pipe's Integration) counts as made
//!   only when the cache shows it with an owner reference to the resource's
//!   uid. A child of the same name left by a deleted namesake (the garbage
//!   collector has not removed it yet) holds the step back until it is gone;
//!   a 409 on the create is never taken as made.
//! - Every watch backs off after an error (kube's default backoff), so an
//!   API outage or a 403 is not retried in a tight loop.

pub(crate) mod lifecycle;
pub(crate) mod writer;

pub use lifecycle::{Effect, Step};
pub use writer::{WriteOutcome, Writer};

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use futures::stream::{BoxStream, SelectAll};
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use tokio_util::sync::CancellationToken;

use crate::api::OperatorId;
use crate::camel_k::release::owner_may_release;
use crate::camel_k::release::work_in_flight;
use crate::camel_k::status::phase;
use crate::camel_k::{CamelKind, OPERATOR_ID_KEY, owner_id};
use crate::connect::Clients;
use crate::handoff::fence::FlipGuard;
use crate::handoff::owner_writes::{FlipResult, flip};
use crate::handoff::request::{FROM_LABEL, HandoffRequest};
use crate::inventory::watch::{CachedObject, Scope, ScopedEvent, WatchCache, map_event};
use crate::lock::{Leadership, LockTiming, OperatorLock};
use lifecycle::{Context, is_child_of, next_step};

/// Kinds the operator reconciles.
pub(crate) const RECONCILED: [CamelKind; 6] = [
    CamelKind::Integration,
    CamelKind::IntegrationKit,
    CamelKind::Build,
    CamelKind::IntegrationPlatform,
    CamelKind::Pipe,
    CamelKind::CamelCatalog,
];
/// Kinds the operator only reads.
pub(crate) const READ_ONLY: [CamelKind; 2] = [CamelKind::Kamelet, CamelKind::IntegrationProfile];

/// Configuration of one operator replica.
#[derive(Clone, Debug)]
pub struct OperatorConfig {
    /// The operator id this replica runs as (its lock and its owner-key value).
    pub id: OperatorId,
    /// Namespace of the operator's lock Lease.
    pub lock_namespace: String,
    /// Namespaces to watch; empty means all.
    pub namespaces: Vec<String>,
    /// Identity of this replica in the lock.
    pub identity: String,
    /// The operator version written into status and on the Deployments it creates.
    pub version: String,
    /// How long the reference lifecycle's builds take.
    pub build_time: Duration,
    /// The durations of its lock.
    pub timing: LockTiming,
    /// Reconcile everything this often even without events.
    pub resync: Duration,
}

/// Source of a watch event: a Camel K kind, or the handoff requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Watched {
    Camel(CamelKind),
    Requests,
}

type Events = BoxStream<'static, ScopedEvent<Watched, CachedObject>>;

fn lease_resource() -> ApiResource {
    ApiResource::erase::<Lease>(&())
}

/// One label-selected watch per kind (and namespace), merged; polling them
/// keeps `cache` current.
fn watches(
    client: &Client,
    cfg: &OperatorConfig,
    cache: &mut WatchCache<Watched, CachedObject>,
) -> SelectAll<Events> {
    let owner_selector = format!("{OPERATOR_ID_KEY}={}", cfg.id);
    let request_selector = format!("{FROM_LABEL}={}", cfg.id);
    let namespaces: Vec<Option<String>> = if cfg.namespaces.is_empty() {
        vec![None]
    } else {
        cfg.namespaces.iter().cloned().map(Some).collect()
    };
    let mut sources: Vec<(Watched, ApiResource, String)> = RECONCILED
        .iter()
        .chain(READ_ONLY.iter())
        .map(|k| (Watched::Camel(*k), k.api_resource(), owner_selector.clone()))
        .collect();
    sources.push((Watched::Requests, lease_resource(), request_selector));
    let mut all = SelectAll::new();
    for ns in &namespaces {
        for (kind, resource, selector) in &sources {
            let api: Api<DynamicObject> = match ns {
                Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
                None => Api::all_with(client.clone(), resource),
            };
            let scope = Scope {
                kind: *kind,
                namespace: ns.clone(),
            };
            // Backed off as every watch of the crate: an API error (403, the
            // API server down) would otherwise be retried at once, in a tight loop.
            let events = watcher(api, watcher::Config::default().labels(selector))
                .default_backoff()
                .map(|event| event.map(|e| map_event(e, CachedObject)));
            all.push(cache.reflect(scope, events).boxed());
        }
    }
    all
}

/// Runs the operator until `shutdown`.
pub async fn run(clients: Clients, cfg: OperatorConfig, shutdown: CancellationToken) {
    let client = clients.work;
    let lock = OperatorLock::new(
        clients.lock,
        &cfg.lock_namespace,
        cfg.id.as_str(),
        &cfg.identity,
        cfg.timing,
    );
    let leadership = lock.leadership();
    let lock_task = tokio::spawn(lock.run(shutdown.clone()));
    let mut loops = Loops {
        cache: WatchCache::default(),
        writer: Writer {
            client: client.clone(),
            operator_id: cfg.id.to_string(),
            version: cfg.version.clone(),
        },
        client: client.clone(),
        build_started: HashMap::new(),
        acted: HashMap::new(),
        released: HashMap::new(),
        cfg: cfg.clone(),
    };
    let mut events = watches(&client, &cfg, &mut loops.cache);
    let mut tick = tokio::time::interval(cfg.resync);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tracing::info!(id = %cfg.id, namespaces = ?cfg.namespaces, "operator started");
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            // Polling the watches applies their events to the cache.
            Some((_, event)) = events.next() => match event {
                Ok(_) => {
                    // Drain what is already queued before reconciling.
                    while let Some(Some((_, Ok(_)))) = events.next().now_or_never() {}
                }
                Err(e) => tracing::warn!(error = %e, "watch error; the watcher retries"),
            },
            _ = tick.tick() => {}
        }
        if leadership.is_leading() {
            pass_while_watching(&mut loops, &leadership, &mut events, &shutdown).await;
        }
    }
    let _ = lock_task.await;
    tracing::info!(id = %cfg.id, "operator stopped");
}

/// Runs reconcile passes, reading the watches while each one writes, until
/// a pass sees no new event arrive (or `shutdown`). An unread watch makes the
/// API server hold (and at last drop) this operator's events, and a stale
/// cache makes the next pass resend writes the fences then refuse. The cache is a concurrent
/// store; each write stays fenced on the version its decision was made on.
async fn pass_while_watching(
    loops: &mut Loops,
    leadership: &Leadership,
    events: &mut SelectAll<Events>,
    shutdown: &CancellationToken,
) {
    loop {
        let mut changed = false;
        {
            let pass = loops.pass(leadership);
            tokio::pin!(pass);
            loop {
                tokio::select! {
                    () = &mut pass => break,
                    Some((_, event)) = events.next() => match event {
                        Ok(_) => changed = true,
                        Err(e) => tracing::warn!(error = %e, "watch error; the watcher retries"),
                    },
                }
            }
        }
        if !changed || !leadership.is_leading() || shutdown.is_cancelled() {
            return;
        }
    }
}

struct Loops {
    cache: WatchCache<Watched, CachedObject>,
    writer: Writer,
    client: Client,
    cfg: OperatorConfig,
    /// When this process first saw each Build running (the build timer).
    build_started: HashMap<(String, String), Instant>,
    /// Resource version each object had when it was last acted on.
    acted: HashMap<(CamelKind, String, String), String>,
    /// Resource version each requested object had when this replica sent its
    /// release. That version is not flipped again: the flip went through, or
    /// the fence refused it because the object changed since; either way the
    /// watch brings a newer version (or the object leaves it).
    released: HashMap<(CamelKind, String, String), String>,
}

impl Loops {
    /// One reconcile pass: releases first, then lifecycle steps.
    async fn pass(&mut self, leadership: &Leadership) {
        let pending = self.release(leadership).await;
        self.lifecycle(leadership, &pending).await;
    }

    /// Releases every requested resource that has no work in flight; returns
    /// the requested resources still held.
    async fn release(&mut self, leadership: &Leadership) -> BTreeSet<(CamelKind, String, String)> {
        let requests: Vec<HandoffRequest> = self
            .cache
            .all(&Watched::Requests)
            .iter()
            .filter_map(|obj| {
                let lease: Lease =
                    serde_json::from_value(serde_json::to_value(&obj.0).ok()?).ok()?;
                HandoffRequest::from_lease(&lease).ok()
            })
            .collect();
        let cache = &self.cache;
        self.released
            .retain(|(kind, ns, name), _| cache.get(&Watched::Camel(*kind), ns, name).is_some());
        let mut held = BTreeSet::new();
        for request in requests {
            let builds = self.cache.all(&Watched::Camel(CamelKind::Build));
            let builds: Vec<&DynamicObject> = builds
                .iter()
                .filter(|b| b.metadata.namespace.as_deref() == Some(request.namespace.as_str()))
                .map(|b| &b.0)
                .collect();
            let mut releasable = Vec::new();
            for item in &request.spec.items {
                let Some(obj) =
                    self.cache
                        .get(&Watched::Camel(item.kind), &request.namespace, &item.name)
                else {
                    continue;
                };
                if obj.metadata.uid.as_deref() != Some(item.uid.as_str()) {
                    continue;
                }
                let key = (item.kind, request.namespace.clone(), item.name.clone());
                let version = obj.metadata.resource_version.clone().unwrap_or_default();
                if self.released.get(&key) == Some(&version) {
                    continue;
                }
                match owner_may_release(item.kind, &obj, &builds) {
                    Some(reason) => {
                        tracing::debug!(resource = %item.name, %reason, "release waits for work in flight");
                        held.insert((item.kind, request.namespace.clone(), item.name.clone()));
                    }
                    None => releasable.push((item.kind, obj.clone())),
                }
            }
            let client = &self.client;
            let id = self.cfg.id.as_str();
            let to = request.spec.to.as_str();
            let results: Vec<_> = futures::stream::iter(releasable)
                .map(move |(kind, obj)| async move {
                    // Checked as each flip starts: a replica that stopped
                    // leading starts no more.
                    if !leadership.is_leading() {
                        return None;
                    }
                    let result = flip(client, kind, &obj, id, to, &FlipGuard::default()).await;
                    Some((kind, obj, result))
                })
                .buffer_unordered(crate::handoff::FLIPS_IN_FLIGHT)
                .collect()
                .await;
            for (kind, obj, result) in results.into_iter().flatten() {
                let name = obj.metadata.name.clone().unwrap_or_default();
                match result {
                    Ok(result) => {
                        let key = (kind, request.namespace.clone(), name.clone());
                        let version = obj.metadata.resource_version.clone().unwrap_or_default();
                        self.released.insert(key, version);
                        if matches!(result, FlipResult::Flipped(_)) {
                            tracing::info!(%kind, namespace = %request.namespace, %name, %to, "released");
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, %name, "release failed");
                        held.insert((kind, request.namespace.clone(), name));
                    }
                }
            }
            if !leadership.is_leading() {
                return held;
            }
        }
        held
    }

    async fn lifecycle(
        &mut self,
        leadership: &Leadership,
        held: &BTreeSet<(CamelKind, String, String)>,
    ) {
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let now_instant = Instant::now();
        // Start build timers for builds seen running.
        for b in self.cache.all(&Watched::Camel(CamelKind::Build)) {
            if phase(&b) == Some("Running") {
                let key = (
                    b.metadata.namespace.clone().unwrap_or_default(),
                    b.metadata.name.clone().unwrap_or_default(),
                );
                self.build_started.entry(key).or_insert(now_instant);
            }
        }
        let mut steps = Vec::new();
        for kind in RECONCILED {
            for obj in self.cache.all(&Watched::Camel(kind)) {
                let ns = obj.metadata.namespace.clone().unwrap_or_default();
                let name = obj.metadata.name.clone().unwrap_or_default();
                let rv = obj.metadata.resource_version.clone().unwrap_or_default();
                let key = (kind, ns.clone(), name.clone());
                if self.acted.get(&key) == Some(&rv) {
                    continue;
                }
                // The label selector shows it, but by the one owner rule a
                // resource whose annotation names another operator is that
                // operator's (upstream obeys the annotation): it waits here
                // until the sync sets its label right.
                if owner_id(&obj.metadata).as_deref() != Some(self.cfg.id.as_str()) {
                    continue;
                }
                // A resource being handed over gets no new work: only work in flight finishes.
                if held.contains(&key)
                    && work_in_flight(kind, Some(phase(&obj).unwrap_or(""))).is_none()
                {
                    continue;
                }
                let uid = obj.metadata.uid.clone().unwrap_or_default();
                // Only this resource's children count: one of the same name
                // left by a deleted namesake is not its kit, Build or Integration.
                let phase_of = |k: CamelKind| {
                    let (ns, uid) = (ns.clone(), uid.clone());
                    let cache = &self.cache;
                    move |n: &str| {
                        cache
                            .get(&Watched::Camel(k), &ns, n)
                            .filter(|o| is_child_of(o, &uid))
                            .map(|o| phase(&o).map(str::to_string))
                    }
                };
                let kit_phase = phase_of(CamelKind::IntegrationKit);
                let build_phase = phase_of(CamelKind::Build);
                let integration_phase = phase_of(CamelKind::Integration);
                let started = &self.build_started;
                let running_for = |n: &str| {
                    started
                        .get(&(ns.clone(), n.to_string()))
                        .map(|t| t.elapsed())
                };
                let platform = self
                    .cache
                    .all(&Watched::Camel(CamelKind::IntegrationPlatform))
                    .into_iter()
                    .find(|p| p.metadata.namespace.as_deref() == Some(ns.as_str()))
                    .and_then(|p| p.metadata.name.clone());
                let cx = Context {
                    operator_id: self.cfg.id.as_str(),
                    version: &self.cfg.version,
                    build_time: self.cfg.build_time,
                    kit_phase: &kit_phase,
                    build_phase: &build_phase,
                    integration_phase: &integration_phase,
                    platform: platform.as_deref(),
                    build_running_for: &running_for,
                    now_rfc3339: &now,
                };
                let Some(mut step) = next_step(kind, &obj, &cx) else {
                    continue;
                };
                if let Some((child_kind, child)) = step.effect.as_ref().and_then(|e| e.child(&name))
                {
                    match self.cache.get(&Watched::Camel(child_kind), &ns, &child) {
                        Some(existing) if is_child_of(&existing, &uid) => step.effect = None,
                        Some(_) => {
                            // The garbage collector has not removed a deleted
                            // namesake's child yet: retried when it is gone.
                            tracing::debug!(%kind, %name, %child_kind, %child, "waits for the previous child of that name to go");
                            continue;
                        }
                        None => {}
                    }
                }
                steps.push((kind, obj.clone(), step, key, rv));
            }
        }
        for (kind, obj, step, key, rv) in steps {
            if !leadership.is_leading() {
                return;
            }
            match self.writer.perform(kind, &obj, &step).await {
                // Not acted on: the next pass reads the child from the cache.
                Ok(WriteOutcome::ChildNameTaken) => {
                    tracing::debug!(%kind, name = %key.2, "child's name taken; retried");
                }
                Ok(outcome) => {
                    if outcome == WriteOutcome::Fenced {
                        tracing::debug!(kind = %kind, name = %key.2, "write fenced");
                    }
                    self.acted.insert(key, rv);
                }
                Err(e) => tracing::warn!(kind = %kind, name = %key.2, error = %e, "write failed"),
            }
        }
    }
}

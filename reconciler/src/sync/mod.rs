//! `reconciler sync`: continuous GitOps sync of the `OperatorAssignment`
//! manifest, executing the planned migration through the handoff protocol.
//!
//! # Expected flow of one round ([`Syncer::round`])
//! 1. Fetch the tracked branch ([`crate::source`]).
//! 2. Validate the manifest ([`crate::manifest`]). An invalid revision is
//!    never acted on: the status names it as last attempted, with every
//!    `file:line:column` diagnostic, and the round ends (the cluster keeps
//!    the last good revision).
//! 3. Apply the manifest's object server-side (spec only), so the object in
//!    the cluster carries what Git says and the status below.
//! 4. Read live ownership ([`crate::inventory::cluster`], metadata only) and
//!    give unowned resources their owner (fenced first assignment,
//!    [`crate::handoff::fence::assign`]) and adopt those the annotation
//!    alone names (the label added, fenced on the annotation).
//! 5. Plan the revision against the last applied one ([`rollout::plan`], the
//!    plan a pull request shows) and find the first step not done
//!    ([`rollout::position`]).
//! 6. Step by step: hand the step's pending moves over through
//!    [`Coordinator`] (one request per namespace, source and target; requests
//!    a killed predecessor left are driven to their end first), then the
//!    health gate ([`health`]), then the manifest's `pause`. A gate that
//!    fails, a stalled handoff or a dead target pauses the rollout with the
//!    reason; the next round retries from the same position.
//! 7. Record: `lastAppliedRevision` once every step is done and healthy.
//!
//! # Guarantees
//! - Owner keys change only through the handoff library and the fenced first
//!   assignment; nothing else of a user's resource is written.
//! - Only the replica that holds the Lease `camelk-reconciler-lock` acts; it
//!   checks before every step.
//! - No local state: the position comes from live owners, the revision and
//!   the status (`rollout.completedSteps`), so a restarted reconciler neither
//!   repeats nor skips a step.
//!
//! # Steady state
//! Live ownership is watched ([`live`], metadata only): a round decides from
//! the watch cache whether it has anything to do and lists (metadata only)
//! only when it acts after having written owner keys itself, so a cluster in
//! sync costs one GET of the object per interval and no LIST. Ownership
//! changes and edits of the object (suspend, a sync request) wake the loop at
//! once.
//!
//! # Limits
//! - A rollout in progress waits while the branch head is invalid.

pub mod health;
pub mod live;
pub mod rollout;
pub mod server;
pub mod status;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::api::{
    self, DriftPolicy, ForcePolicy as ManifestForce, GateFailure, MigrationRecord,
    OperatorAssignment, OperatorAssignmentSpec, OperatorAssignmentStatus, Protocol, RolloutStatus,
    parse_duration,
};
use crate::camel_k::{CamelKind, OPERATOR_ID_KEY, OwnerKey, owner_from_keys, owner_of_meta};
use crate::handoff::executor::{FlipResult, HandoffError};
use crate::handoff::fence::FlipGuard;
use crate::handoff::request::{FROM_LABEL, HandoffRequest, TO_LABEL};
use crate::handoff::{
    self, Coordinator, ForcePolicy, HandoffOptions, HandoffOutcome, MoveBatch, ReleaseMode, release,
};
use crate::inventory::cluster::{self, ClusterReadError};
use crate::inventory::{self, Inventory, ResourceRef};
use crate::lock::{Leadership, LockTiming, OperatorLock};
use crate::manifest::{FieldPath, Manifest, ManifestError, Tree, tree};
use crate::plan::{self, Actual, Batch};
use crate::source::{Revision, Source, SourceError, short_sha};
use rollout::LiveOwners;
use status::{
    DRIFTED, FIELD_MANAGER, READY, RECONCILING, STALLED, SUSPENDED, has_condition, is_true,
    set_condition,
};

/// Annotation on the `OperatorAssignment` object that suspends the sync
/// (`"true"`), as `flux suspend` does; removing it resumes.
pub const SUSPEND_ANNOTATION: &str = "camelk.dev/suspend";

/// How long a round waits for the watch cache's initial lists before it
/// lists for itself.
const CACHE_PATIENCE: Duration = Duration::from_secs(30);

/// Annotation on the `OperatorAssignment` object that asks for a round now
/// (`kubectl camelk sync`, as Flux's `reconcile.fluxcd.io/requestedAt`); a
/// round that ends copies its value to `status.lastHandledReconcileAt`.
pub const RECONCILE_REQUEST_ANNOTATION: &str = "camelk.dev/reconcile-requested-at";

/// Rollout states that stop it: a later round retries a `Paused` step; a
/// `RolledBack` one waits for a new revision.
const PAUSED: &str = "Paused";
const ROLLED_BACK: &str = "RolledBack";

/// Whether `object` carries [`SUSPEND_ANNOTATION`]` = "true"`.
pub fn is_suspended(object: &OperatorAssignment) -> bool {
    object
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SUSPEND_ANNOTATION))
        .is_some_and(|v| v == "true")
}

/// Operator id of the reconciler's own lock: its Lease is `camelk-reconciler-lock`.
pub const LOCK_ID: &str = "camelk-reconciler";

/// How the sync runs (the manifest decides everything about the rollout).
#[derive(Clone, Debug)]
pub struct SyncConfig {
    /// Namespace of the `OperatorAssignment` object.
    pub namespace: String,
    /// This replica, in the reconciler's lock and in Events.
    pub identity: String,
    /// Namespace of the reconciler's lock; also the default of operators' locks.
    pub lock_namespace: String,
    /// Timing of the reconciler's own lock.
    pub lock_timing: LockTiming,
    /// Lease timing of the operators' locks, to judge them alive or dead.
    pub operator_lock_timing: LockTiming,
    /// How often the branch is fetched.
    pub interval: Duration,
    /// How often handoffs and health gates are polled.
    pub poll: Duration,
    /// What the watches of Camel K resources keep.
    pub live_cache: live::LiveCacheMode,
}

/// Why a round failed (it is retried at the next interval).
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error("applying OperatorAssignment {name}: {source}")]
    Apply {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("writing the status of OperatorAssignment {name}: {source}")]
    Status {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Inventory(#[from] ClusterReadError),
    #[error("assigning {resource}: {source}")]
    Assign {
        resource: ResourceRef,
        #[source]
        source: kube::Error,
    },
    #[error("listing handoff requests in {namespace}: {source}")]
    Requests {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Handoff(#[from] HandoffError),
    #[error(transparent)]
    Gate(#[from] health::GateError),
    #[error("this replica no longer leads")]
    NotLeading,
    #[error("cancelled")]
    Cancelled,
}

/// Runs the sync until `shutdown`: leader election, then a round every
/// interval or at once when a valid webhook arrives. With a `listener`, the
/// HTTP endpoints of [`server`] are served on it.
pub async fn run(
    client: Client,
    source: Source,
    cfg: SyncConfig,
    listener: Option<tokio::net::TcpListener>,
    webhook_secret: Option<Vec<u8>>,
    shutdown: CancellationToken,
) {
    let lock = OperatorLock::new(
        client.clone(),
        &cfg.lock_namespace,
        LOCK_ID,
        &cfg.identity,
        cfg.lock_timing,
    );
    let leadership = lock.leadership();
    let lock_task = tokio::spawn(lock.run(shutdown.clone()));
    let telemetry = Arc::new(server::Telemetry::default());
    let trigger = Arc::new(tokio::sync::Notify::new());
    if let Some(listener) = listener {
        let endpoints = server::Endpoints {
            telemetry: telemetry.clone(),
            trigger: trigger.clone(),
            webhook_secret: webhook_secret.map(Arc::new),
            leadership: leadership.clone(),
        };
        let stop = shutdown.clone();
        tokio::spawn(async move {
            if let Err(e) = server::serve(listener, endpoints, stop).await {
                tracing::error!(error = %e, "HTTP endpoints stopped");
            }
        });
    }
    // Ownership changes re-plan against the revision already fetched; the
    // interval, the webhook and edits of the object fetch first.
    let cluster_changed = Arc::new(tokio::sync::Notify::new());
    let live = live::LiveCache::start(&client, cfg.live_cache, cluster_changed.clone(), &shutdown);
    live::watch_assignments(
        client.clone(),
        &cfg.namespace,
        trigger.clone(),
        shutdown.clone(),
    );
    let mut syncer = Syncer::new(client, source, cfg, telemetry.clone()).with_live_cache(live);
    tracing::info!(url = %syncer.source.url(), path = %syncer.source.path(), "sync started");
    let mut next_fetch = tokio::time::Instant::now();
    let mut fetch_asked = true;
    loop {
        if !leadership.is_leading() {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(syncer.cfg.lock_timing.retry_period) => continue,
            }
        }
        let started = Instant::now();
        let fetch = fetch_asked || tokio::time::Instant::now() >= next_fetch;
        if fetch {
            next_fetch = tokio::time::Instant::now() + syncer.cfg.interval;
        }
        // A webhook or an edit of the object interrupts the waits of a round
        // (health gate, pause), which a later round resumes from status.
        let round_cancel = shutdown.child_token();
        let interrupter = {
            let (trigger, cancel) = (trigger.clone(), round_cancel.clone());
            tokio::spawn(async move {
                trigger.notified().await;
                cancel.cancel();
            })
        };
        tokio::select! {
            _ = shutdown.cancelled() => break,
            result = syncer.round(&leadership, &round_cancel, fetch) => {
                telemetry.sync_duration.observe(started.elapsed().as_secs_f64());
                match result {
                    Err(e) if e.is_cancelled() && round_cancel.is_cancelled() => {
                        tracing::info!("round interrupted by a trigger; fetching now");
                    }
                    Err(e) => {
                        telemetry
                            .errors
                            .get_or_create(&server::KindLabel { kind: e.kind().into() })
                            .inc();
                        tracing::warn!(error = %e, "sync round failed; retrying at the next interval");
                        syncer.report_failure(&e).await;
                    }
                    Ok(()) => {}
                }
            }
        }
        interrupter.abort();
        if round_cancel.is_cancelled() {
            // The trigger was spent on the interruption: fetch at once.
            fetch_asked = true;
            continue;
        }
        fetch_asked = tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep_until(next_fetch) => true,
            _ = trigger.notified() => true,
            _ = cluster_changed.notified() => false,
        };
    }
    let _ = lock_task.await;
    tracing::info!("sync stopped");
}

impl SyncError {
    /// Whether the round stopped because it was cancelled, not because
    /// something failed.
    pub fn is_cancelled(&self) -> bool {
        matches!(
            self,
            SyncError::Cancelled | SyncError::Gate(health::GateError::Cancelled)
        )
    }

    /// The step that failed, for the errors metric.
    pub fn kind(&self) -> &'static str {
        match self {
            SyncError::Source(_) => "source",
            SyncError::Apply { .. } => "apply",
            SyncError::Status { .. } => "status",
            SyncError::Inventory(_) => "inventory",
            SyncError::Assign { .. } => "assign",
            SyncError::Requests { .. } | SyncError::Handoff(_) => "handoff",
            SyncError::Gate(_) => "health_gate",
            SyncError::NotLeading => "leadership",
            SyncError::Cancelled => "cancelled",
        }
    }
}

/// Steps up to `done` passed their gate.
fn step_healthy(ro: &mut RolloutStatus, done: usize) {
    ro.completed_steps = done as u32;
    ro.step_completed_at = Some(status::now());
    ro.step_started_at = None;
    ro.health_check_started_at = None;
    ro.failing.clear();
}

/// How a step's handoffs ended.
enum StepResult {
    /// Everything pending moved; these were moved by this round.
    Moved(BTreeSet<(String, String)>),
    /// A handoff could not finish; the reason.
    Paused(String),
}

/// One sync loop's working parts; it keeps no rollout state between rounds.
pub struct Syncer {
    client: Client,
    source: Source,
    cfg: SyncConfig,
    coordinator: Coordinator,
    recorder: Recorder,
    /// Name of the object of the last valid revision, to report an invalid one.
    last_name: Option<String>,
    telemetry: Arc<server::Telemetry>,
    /// Whether this round wrote the status already (then it writes its end too).
    wrote: AtomicBool,
    /// Watched live ownership; without it every round lists.
    live: Option<live::LiveCache>,
    /// The revision fetched last, planned again when the cluster changes.
    last_fetched: Option<Revision>,
    /// Whether this process has written owner keys (then the watch cache
    /// may lag its own writes).
    wrote_owners: bool,
}

impl Syncer {
    pub fn new(
        client: Client,
        source: Source,
        cfg: SyncConfig,
        telemetry: Arc<server::Telemetry>,
    ) -> Syncer {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: LOCK_ID.into(),
                instance: Some(cfg.identity.clone()),
            },
        );
        Syncer {
            coordinator: Coordinator::new(client.clone()),
            client,
            source,
            cfg,
            recorder,
            last_name: None,
            telemetry,
            wrote: AtomicBool::new(false),
            live: None,
            last_fetched: None,
            wrote_owners: false,
        }
    }

    /// Decides from `cache` whether a round has anything to do, so that a
    /// round in steady state lists nothing.
    pub fn with_live_cache(mut self, cache: live::LiveCache) -> Syncer {
        self.live = Some(cache);
        self
    }

    /// One round (see the module doc).
    /// With `fetch` false, the revision fetched last is planned again (a
    /// change in the cluster woke the loop).
    pub async fn round(
        &mut self,
        leading: &Leadership,
        cancel: &CancellationToken,
        fetch: bool,
    ) -> Result<(), SyncError> {
        let rev = match self.last_fetched.take() {
            Some(mut rev) if !fetch => {
                rev.rewound = false;
                rev
            }
            _ => match self.source.fetch().await {
                Ok(rev) => rev,
                Err(e) => {
                    self.report_unavailable(&e).await;
                    return Err(e.into());
                }
            },
        };
        self.last_fetched = Some(rev.clone());
        let manifest = match Manifest::parse(&rev.file, rev.text.clone()) {
            Ok(m) => m,
            Err(e) => return self.report_invalid(&rev, &e).await,
        };
        let name = manifest
            .assignment
            .metadata
            .name
            .clone()
            .unwrap_or_default();
        self.last_name = Some(name.clone());
        let current = self.current(&name).await?;
        if let Some(object) = &current
            && self.suspended(object).await?
        {
            return Ok(());
        }
        // Applied only when it differs: no write in steady state. An object
        // that is the source itself is never applied (deleted since fetched: no round).
        let object = match current {
            Some(object) if self.source.is_the_object() || carries(&object, &manifest) => object,
            None if self.source.is_the_object() => return Ok(()),
            _ => self.apply(&name, &manifest).await?,
        };
        let before = object.status.clone();
        self.wrote.store(false, Ordering::Relaxed);
        if rev.rewound {
            tracing::warn!(revision = %rev.short(), "branch rewound or force-pushed; its new head is the truth");
            self.event(
                &object,
                EventType::Warning,
                "BranchRewound",
                format!(
                    "the branch was rewound or force-pushed; following its new head {}",
                    rev.short()
                ),
            )
            .await;
        }
        let mut status = object.status.clone().unwrap_or_default();
        let generation = object.metadata.generation;
        status.observed_generation = generation;
        status.last_attempted_revision = Some(rev.sha.clone());
        let head = &manifest.assignment.spec;
        let base = self.base(&status, &rev).await;
        let reach = Reach::of(head, base.as_ref());

        let cached = match &self.live {
            Some(live) => live.synced_snapshot(&reach, CACHE_PATIENCE).await,
            None => None,
        };
        let mut inventory = match cached {
            // About to act after writing owner keys before: read
            // authoritatively, the cache may lag those writes.
            Some(cached)
                if self.wrote_owners && !idle(head, base.as_ref(), &status, &rev.sha, &cached) =>
            {
                self.read(&reach).await?
            }
            Some(cached) => cached,
            None => self.read(&reach).await?,
        };
        let planned = plan::plan(head, Actual::OwnerKeys, &inventory);
        let assigned = self.assign(head, &planned).await?;
        if assigned > 0 {
            self.event(
                &object,
                EventType::Normal,
                "Assigned",
                format!(
                    "gave {assigned} resources their operator's label ({} unowned, {} named by annotation only)",
                    planned.first_assignments.len(),
                    planned.adoptions.len()
                ),
            )
            .await;
            inventory = self.read(&reach).await?;
        }
        let mut plan = rollout::plan(head, base.as_ref(), &inventory);
        let unfinished = status.last_applied_revision.as_deref() != Some(rev.sha.as_str())
            || status
                .rollout
                .as_ref()
                .is_none_or(|r| r.state != "Complete");
        if unfinished && plan.move_count() > 0 {
            if let Some(reason) = self.resume_left_requests(head, &plan).await? {
                let ro = status.rollout.clone().unwrap_or_default();
                return self
                    .pause_on_handoff(&object, &name, status, ro, reason)
                    .await;
            }
            inventory = self.read(&reach).await?;
            plan = rollout::plan(head, base.as_ref(), &inventory);
        }
        let live = LiveOwners::new(&inventory);
        let mut position = rollout::position(&plan, &live);
        status.counts = live.counts(head);
        self.publish_counts(&status.counts);
        set_condition(&mut status, SUSPENDED, false, "Resumed", "", generation);

        // Applied already, yet owners differ: someone changed owner keys by hand.
        let (drifted, conflicts) =
            if status.last_applied_revision.as_deref() == Some(rev.sha.as_str()) {
                drift(&plan, &live)
            } else {
                Default::default()
            };
        let report_only = head.drift_policy == DriftPolicy::Report;
        if report_only && !drifted.is_empty() {
            // The applied revision's moves are not made again.
            plan.batches.clear();
            position = rollout::position(&plan, &live);
        }
        if !drifted.is_empty() || !conflicts.is_empty() {
            let all: Vec<&String> = drifted.iter().chain(&conflicts).take(20).collect();
            let message = format!(
                "{} resources differ from revision {}{}: {}",
                drifted.len() + conflicts.len(),
                rev.short(),
                match (drifted.is_empty(), report_only) {
                    (true, _) => "",
                    (false, true) => " (driftPolicy report: left as they are)",
                    (false, false) => " (driftPolicy revert: moving them back)",
                },
                all.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            );
            tracing::warn!(%message, "drift detected");
            set_condition(
                &mut status,
                DRIFTED,
                true,
                "DriftDetected",
                &message,
                generation,
            );
            self.event(&object, EventType::Warning, "DriftDetected", message)
                .await;
        }

        let mut ro = match status.rollout.take() {
            Some(r) if r.revision == rev.sha => r,
            _ => {
                if let Some(prev) = status.history.first_mut()
                    && prev.finished_at.is_none()
                {
                    prev.result = "Superseded".into();
                    prev.finished_at = Some(status::now());
                }
                status::record_history(
                    &mut status,
                    MigrationRecord {
                        revision: rev.sha.clone(),
                        started_at: status::now(),
                        finished_at: None,
                        moves: plan.move_count() as u64,
                        first_assignments: assigned as u64,
                        steps: plan.batches.len() as u32,
                        result: "Progressing".into(),
                    },
                );
                if plan.move_count() > 0 {
                    tracing::info!(revision = %rev.short(), moves = plan.move_count(), steps = plan.batches.len(), "new rollout");
                    self.event(
                        &object,
                        EventType::Normal,
                        "RolloutStarted",
                        format!(
                            "revision {}: {} moves in {} steps",
                            rev.short(),
                            plan.move_count(),
                            plan.batches.len()
                        ),
                    )
                    .await;
                }
                RolloutStatus {
                    revision: rev.sha.clone(),
                    ..Default::default()
                }
            }
        };
        // Once applied, the recorded rollout stays as it ended; moving drift
        // back is a small rollout of its own.
        let steady = status.last_applied_revision.as_deref() == Some(rev.sha.as_str());
        let recorded = ro.clone();
        if steady && !plan.batches.is_empty() {
            ro = RolloutStatus {
                revision: rev.sha.clone(),
                ..Default::default()
            };
        }
        if !steady || !plan.batches.is_empty() {
            ro.total_steps = plan.batches.len() as u32;
        }

        let rollout_cfg = &head.rollout;
        let pause = parse_duration(&rollout_cfg.pause).unwrap_or(Duration::ZERO);

        // A rolled-back step waits for a new revision.
        if ro.state == ROLLED_BACK && !steady {
            status.rollout = Some(ro);
            handled(&object, &mut status);
            if before.as_ref() != Some(&status) {
                self.write(&name, &status).await?;
            }
            return Ok(());
        }

        // Steps done (by this or an earlier process) but not yet found healthy.
        if (ro.completed_steps as usize) < position.done {
            let steps = &plan.batches[ro.completed_steps as usize..position.done];
            ro.current_step = position.done as u32;
            // A rollout paused by the gate stays paused while it checks again.
            if ro.state != PAUSED {
                ro.state = "WaitingForHealth".into();
                ro.message = format!(
                    "checking the health of {} moved resources",
                    steps.iter().map(|b| b.moves.len()).sum::<usize>()
                );
            }
            ro.health_check_started_at.get_or_insert_with(status::now);
            status.rollout = Some(ro.clone());
            if before.as_ref() != Some(&status) {
                self.write(&name, &status).await?;
            }
            if !self
                .gate_passes(&object, head, steps, &status, &ro, cancel)
                .await?
            {
                return Ok(());
            }
            step_healthy(&mut ro, position.done);
        }

        for (i, batch) in plan.batches.iter().enumerate().skip(position.done) {
            if i > 0 && !pause.is_zero() {
                let waited = status::elapsed_since(ro.step_completed_at.as_deref());
                if let Some(rest) = pause.checked_sub(waited) {
                    ro.state = "Pausing".into();
                    ro.message = format!("pause of {} before step {}", rollout_cfg.pause, i + 1);
                    status.rollout = Some(ro.clone());
                    self.write(&name, &status).await?;
                    tokio::select! {
                        _ = cancel.cancelled() => return Err(SyncError::Cancelled),
                        _ = tokio::time::sleep(rest) => {}
                    }
                }
            }
            if !leading.is_leading() {
                return Err(SyncError::NotLeading);
            }
            let live = LiveOwners::new(&self.read(&reach).await?);
            // A retried step keeps the time it first started: what an
            // earlier attempt moved is judged against that time too.
            ro.step_started_at.get_or_insert_with(status::now);
            ro.current_step = (i + 1) as u32;
            ro.state = "Progressing".into();
            if let Some(record) = status
                .history
                .iter_mut()
                .find(|r| r.revision == rev.sha && r.finished_at.is_none())
            {
                record.result = "Progressing".into();
            }
            ro.message = format!(
                "step {} of {}: moving {} resources",
                i + 1,
                plan.batches.len(),
                batch.moves.len()
            );
            status.rollout = Some(ro.clone());
            set_condition(
                &mut status,
                RECONCILING,
                true,
                "Progressing",
                &ro.message,
                generation,
            );
            set_condition(
                &mut status,
                READY,
                false,
                "Progressing",
                &ro.message,
                generation,
            );
            set_condition(&mut status, STALLED, false, "Progressing", "", generation);
            self.write(&name, &status).await?;
            tracing::info!(revision = %rev.short(), step = i + 1, of = plan.batches.len(), moves = batch.moves.len(), "step started");

            let step = format!(
                "revision {} step {} of {}",
                rev.short(),
                i + 1,
                plan.batches.len()
            );
            let moved = match self.execute(head, batch, &live, &step).await? {
                StepResult::Moved(moved) => moved,
                StepResult::Paused(reason) => {
                    return self
                        .pause_on_handoff(&object, &name, status, ro, reason)
                        .await;
                }
            };
            self.event(
                &object,
                EventType::Normal,
                "StepMoved",
                format!(
                    "step {} of {}: {} resources handed over",
                    i + 1,
                    plan.batches.len(),
                    moved.len()
                ),
            )
            .await;
            ro.state = "WaitingForHealth".into();
            ro.message = format!(
                "step {} of {}: waiting for {} moved resources to be healthy",
                i + 1,
                plan.batches.len(),
                batch.moves.len()
            );
            ro.health_check_started_at = Some(status::now());
            status.rollout = Some(ro.clone());
            self.write(&name, &status).await?;
            let steps = std::slice::from_ref(batch);
            if !self
                .gate_passes(&object, head, steps, &status, &ro, cancel)
                .await?
            {
                return Ok(());
            }
            step_healthy(&mut ro, i + 1);
            status.counts = LiveOwners::new(&self.read(&reach).await?).counts(head);
            self.publish_counts(&status.counts);
            status.rollout = Some(ro.clone());
            self.write(&name, &status).await?;
            tracing::info!(revision = %rev.short(), step = i + 1, "step done and healthy");
        }

        // Keys that disagree are set right too, unless drift is only reported.
        let repaired = if steady && !report_only && !plan.errors.is_empty() {
            self.repair_keys(head, &plan.errors, &inventory).await?
        } else {
            0
        };

        // Every step done and healthy: the revision is applied.
        let newly_applied = status.last_applied_revision.as_deref() != Some(rev.sha.as_str());
        status.last_applied_revision = Some(rev.sha.clone());
        if steady && plan.batches.is_empty() {
            status.rollout = Some(recorded);
        } else {
            ro.current_step = ro.total_steps;
            ro.state = "Complete".into();
            ro.message = format!("revision {} applied", rev.short());
            status.rollout = Some(ro);
        }
        if let Some(record) = status.history.iter_mut().find(|r| r.revision == rev.sha)
            && record.finished_at.is_none()
        {
            record.finished_at = Some(status::now());
            record.result = "Succeeded".into();
        }
        let settled = repaired >= conflicts.len() && (!report_only || drifted.is_empty());
        if settled && !(drifted.is_empty() && conflicts.is_empty()) {
            let message = format!(
                "{} drifted resources moved back",
                drifted.len() + conflicts.len()
            );
            set_condition(
                &mut status,
                DRIFTED,
                false,
                "DriftReverted",
                &message,
                generation,
            );
        } else if settled && (is_true(&status, DRIFTED) || !has_condition(&status, DRIFTED)) {
            // A False condition keeps its reason (DriftReverted stays readable).
            set_condition(&mut status, DRIFTED, false, "NoDrift", "", generation);
        }
        let message = format!("applied revision {}", rev.short());
        set_condition(
            &mut status,
            READY,
            true,
            "ReconciliationSucceeded",
            &message,
            generation,
        );
        set_condition(
            &mut status,
            RECONCILING,
            false,
            "ReconciliationSucceeded",
            &message,
            generation,
        );
        set_condition(
            &mut status,
            STALLED,
            false,
            "ReconciliationSucceeded",
            "",
            generation,
        );
        handled(&object, &mut status);
        if self.wrote.load(Ordering::Relaxed) || before.as_ref() != Some(&status) {
            self.write(&name, &status).await?;
        }
        if newly_applied {
            tracing::info!(revision = %rev.short(), "revision applied");
            self.event(
                &object,
                EventType::Normal,
                "ReconciliationSucceeded",
                message,
            )
            .await;
        }
        Ok(())
    }

    fn publish_counts(&self, counts: &BTreeMap<String, u64>) {
        self.telemetry.resources.clear();
        for (operator, n) in counts {
            self.telemetry
                .resources
                .get_or_create(&server::OperatorLabel {
                    operator: operator.clone(),
                })
                .set(i64::try_from(*n).unwrap_or(i64::MAX));
        }
    }

    /// The object in the cluster, if any.
    async fn current(&self, name: &str) -> Result<Option<OperatorAssignment>, SyncError> {
        let api: Api<OperatorAssignment> =
            Api::namespaced(self.client.clone(), &self.cfg.namespace);
        api.get_opt(name).await.map_err(|source| SyncError::Status {
            name: name.to_string(),
            source,
        })
    }

    /// Whether the object carries [`SUSPEND_ANNOTATION`]` = "true"`; if so,
    /// records `Suspended=True` (once) and nothing else happens this round.
    async fn suspended(&self, object: &OperatorAssignment) -> Result<bool, SyncError> {
        let name = object.metadata.name.as_deref().unwrap_or_default();
        if !is_suspended(object) {
            return Ok(false);
        }
        let mut status = object.status.clone().unwrap_or_default();
        let answered = handled(object, &mut status);
        if !status::is_true(&status, SUSPENDED) {
            let message = format!(
                "{SUSPEND_ANNOTATION} is true: no fetch result is acted on until it is removed"
            );
            set_condition(
                &mut status,
                SUSPENDED,
                true,
                "Suspended",
                &message,
                object.metadata.generation,
            );
            self.write(name, &status).await?;
            tracing::info!("suspended");
            self.event(object, EventType::Normal, "Suspended", message)
                .await;
        } else if answered {
            self.write(name, &status).await?;
        }
        Ok(true)
    }

    /// The manifest of the last applied revision, when it differs from `rev`.
    async fn base(
        &self,
        status: &OperatorAssignmentStatus,
        rev: &Revision,
    ) -> Option<OperatorAssignmentSpec> {
        let sha = status
            .last_applied_revision
            .as_deref()
            .filter(|s| *s != rev.sha)?;
        let text = match self.source.read_at(sha).await {
            Ok(text) => text,
            Err(e) => {
                tracing::warn!(error = %e, "last applied revision unreadable; planning against live owners");
                return None;
            }
        };
        Manifest::parse(&format!("{}@{}", rev.file, short_sha(sha)), text)
            .ok()
            .map(|m| m.assignment.spec)
    }

    /// Live resources of the kinds and namespaces `reach` covers (metadata only).
    async fn read(&self, reach: &Reach) -> Result<Inventory, SyncError> {
        Ok(
            cluster::read_in(&self.client, &reach.kinds, reach.namespaces.as_deref())
                .await?
                .inventory,
        )
    }

    /// Server-side apply of the manifest's object (spec only).
    async fn apply(
        &self,
        name: &str,
        manifest: &Manifest,
    ) -> Result<OperatorAssignment, SyncError> {
        let api: Api<OperatorAssignment> =
            Api::namespaced(self.client.clone(), &self.cfg.namespace);
        let meta = &manifest.assignment.metadata;
        let body = json!({
            "apiVersion": format!("{}/{}", api::GROUP, api::VERSION),
            "kind": api::KIND,
            "metadata": { "name": name, "labels": meta.labels, "annotations": meta.annotations },
            "spec": manifest.assignment.spec,
        });
        api.patch(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(body),
        )
        .await
        .map_err(|source| SyncError::Apply {
            name: name.to_string(),
            source,
        })
    }

    async fn write(&self, name: &str, status: &OperatorAssignmentStatus) -> Result<(), SyncError> {
        self.wrote.store(true, Ordering::Relaxed);

        status::write(&self.client, &self.cfg.namespace, name, status)
            .await
            .map_err(|source| SyncError::Status {
                name: name.to_string(),
                source,
            })
    }

    /// Fenced first assignments and adoptions; returns how many were
    /// written. An unowned resource that has a phase is the work of the
    /// manifest's unowned handler: it leaves that operator only in a phase
    /// its release rule judges stable, else it waits for a later round.
    async fn assign(
        &mut self,
        head: &OperatorAssignmentSpec,
        planned: &plan::Plan,
    ) -> Result<usize, SyncError> {
        let mut written = 0;
        let firsts = planned.first_assignments.iter().map(|a| (a, false));
        let adoptions = planned.adoptions.iter().map(|a| (a, true));
        for (a, adopt) in firsts.chain(adoptions) {
            self.wrote_owners = true;
            let id = &a.resource;
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), &id.namespace, &id.kind.api_resource());
            let err = |source| SyncError::Assign {
                resource: id.clone(),
                source,
            };
            let Some(object) = api.get_opt(&id.name).await.map_err(err)? else {
                continue;
            };
            let owner = owner_of_meta(&object.metadata);
            let client = &self.client;
            let to = a.to.as_str();
            let result = match (adopt, owner) {
                (true, Some(o)) if o.key == OwnerKey::Annotation && o.id == to => {
                    handoff::executor::flip(client, id.kind, &object, to, to, &FlipGuard::default())
                        .await
                }
                // Changed since it was read: the next round decides again.
                (_, Some(_)) | (true, None) => continue,
                (false, None) => {
                    let handler = head.unowned_handler().filter(|h| {
                        h.id != a.to && release::phase(&object).is_some_and(|p| !p.is_empty())
                    });
                    let guard = match handler {
                        None => FlipGuard::default(),
                        Some(h) => match release::upstream_stable(id.kind, &object) {
                            Ok(phase) => FlipGuard { phase: Some(phase) },
                            Err(why) => {
                                tracing::info!(resource = %id, handler = %h.id, %why, "unowned resource busy with its handler; assigned once stable");
                                continue;
                            }
                        },
                    };
                    handoff::executor::assign(client, id.kind, &object, to, &guard).await
                }
            };
            match result.map_err(err)? {
                FlipResult::Flipped(_) => {
                    written += 1;
                    let what = if adopt { "adopted" } else { "assigned" };
                    tracing::info!(resource = %id, to = %a.to, because = %a.because, "{what}");
                }
                FlipResult::Refused | FlipResult::Gone => {}
            }
        }
        Ok(written)
    }

    fn options(&self, spec: &OperatorAssignmentSpec, from: &api::OperatorId) -> HandoffOptions {
        let protocol = spec
            .operators
            .iter()
            .find(|o| &o.id == from)
            .map(|o| o.protocol)
            .unwrap_or_default();
        let drain = parse_duration(&spec.handoff.drain_timeout).unwrap_or(Duration::from_secs(300));
        let (drain_timeout, force) = match spec.handoff.force {
            ManifestForce::Never => (drain, ForcePolicy::Never),
            ManifestForce::AfterTimeout => {
                let after = spec
                    .handoff
                    .force_after
                    .as_deref()
                    .and_then(parse_duration)
                    .unwrap_or(Duration::ZERO);
                (drain + after, ForcePolicy::AfterDrainTimeout)
            }
        };
        HandoffOptions {
            coordinator: format!("{LOCK_ID}/{}", self.cfg.identity),
            mode: match protocol {
                Protocol::Handoff => ReleaseMode::Protocol,
                Protocol::Upstream => ReleaseMode::Upstream,
            },
            drain_timeout,
            force,
            lock_timing: self.cfg.operator_lock_timing,
            lock_namespaces: spec
                .operators
                .iter()
                .map(|o| (o.id.to_string(), o.namespace.clone()))
                .collect(),
            default_lock_namespace: self.cfg.lock_namespace.clone(),
            poll: self.cfg.poll,
        }
    }

    /// Drives to their end the handoff requests an earlier process left for
    /// the plan's moves (it was killed while they were pending), so that
    /// nothing is requested twice and no request Lease is left behind.
    async fn resume_left_requests(
        &mut self,
        spec: &OperatorAssignmentSpec,
        plan: &plan::Plan,
    ) -> Result<Option<String>, SyncError> {
        let groups: BTreeSet<(String, api::OperatorId, api::OperatorId)> = plan
            .moves()
            .map(|m| (m.resource.namespace.clone(), m.from.clone(), m.to.clone()))
            .collect();
        for (namespace, from, to) in groups {
            let leases: Api<Lease> = Api::namespaced(self.client.clone(), &namespace);
            let selector = format!("{FROM_LABEL}={from},{TO_LABEL}={to}");
            let left = leases
                .list(&ListParams::default().labels(&selector))
                .await
                .map_err(|source| SyncError::Requests {
                    namespace: namespace.clone(),
                    source,
                })?;
            for lease in left.items {
                let Ok(request) = HandoffRequest::from_lease(&lease) else {
                    continue;
                };
                tracing::info!(request = %request.name, "resuming a handoff request left by an earlier run");
                self.wrote_owners = true;
                let group = MoveBatch {
                    namespace: namespace.clone(),
                    from: from.clone(),
                    to: to.clone(),
                    resources: request
                        .spec
                        .items
                        .iter()
                        .map(|i| (i.kind, i.name.clone()))
                        .collect(),
                };
                let opts = self.options(spec, &from);
                let outcome = self
                    .coordinator
                    .drive(&request, &group, &opts, vec![], &mut |_| {})
                    .await;
                if let Err(reason) = outcome_moved(&group, outcome, &mut BTreeSet::new())? {
                    return Ok(Some(reason));
                }
            }
        }
        Ok(None)
    }

    /// Hands a step's pending moves over, one request per namespace, source
    /// and target.
    async fn execute(
        &mut self,
        spec: &OperatorAssignmentSpec,
        batch: &Batch,
        live: &LiveOwners,
        step: &str,
    ) -> Result<StepResult, SyncError> {
        let mut moved = BTreeSet::new();
        for group in rollout::handoffs(batch, live) {
            if let Err(reason) = self.hand_over(spec, &group, step, &mut moved).await? {
                return Ok(StepResult::Paused(reason));
            }
        }
        Ok(StepResult::Moved(moved))
    }

    /// One handoff through the coordinator, timed in the metrics, with a
    /// `Moved` Event per resource it moved (added to `moved`);
    /// `Ok(Err(reason))` when it could not finish.
    async fn hand_over(
        &mut self,
        spec: &OperatorAssignmentSpec,
        group: &MoveBatch,
        step: &str,
        moved: &mut BTreeSet<(String, String)>,
    ) -> Result<Result<(), String>, SyncError> {
        self.wrote_owners = true;
        let opts = self.options(spec, &group.from);
        self.telemetry.handoffs_in_progress.inc();
        let started = Instant::now();
        // A resource that is not where the plan saw it (another owner, or
        // deleted) is left out and the rest of the group goes on; one that
        // changed hands makes the step stall, naming it.
        let mut group = group.clone();
        let mut left_out = Vec::new();
        let outcome = loop {
            let outcome = self
                .coordinator
                .execute(&group, &opts, &mut |p| {
                    tracing::debug!(done = p.done, total = p.total, waiting_on = ?p.waiting_on, "handoff progress");
                })
                .await;
            let (kind, name) = match &outcome {
                Err(HandoffError::WrongOwner { kind, name, .. }) => {
                    let e = outcome.as_ref().unwrap_err();
                    tracing::warn!(error = %e, "left out of the handoff");
                    left_out.push(e.to_string());
                    (*kind, name.clone())
                }
                Err(HandoffError::NotFound { kind, name, .. }) => (*kind, name.clone()),
                _ => break outcome,
            };
            group.resources.retain(|r| *r != (kind, name.clone()));
            if group.resources.is_empty() {
                break Ok(HandoffOutcome::Completed {
                    moved: vec![],
                    already_there: vec![],
                    taken_over: vec![],
                    gone: vec![],
                });
            }
        };
        self.telemetry.handoffs_in_progress.dec();
        self.telemetry
            .handoff_duration
            .observe(started.elapsed().as_secs_f64());
        let mut now = BTreeSet::new();
        let mut result = outcome_moved(&group, outcome, &mut now)?;
        self.moved_events(&group, &now, step).await;
        moved.extend(now);
        if result.is_ok() && !left_out.is_empty() {
            result = Err(format!(
                "not moved, owned by someone else than the plan saw: {}",
                left_out.join("; ")
            ));
        }
        Ok(result)
    }

    /// Owner keys that disagree, under `driftPolicy: revert`; returns how many
    /// were set right. The label is what operators select by, so it names who
    /// holds the resource now: when it is the desired owner only the annotation
    /// is set to match (fenced on the label); otherwise the resource is handed
    /// from the label's operator to the desired one, whose flip sets both keys.
    /// A label that is no valid id is left for a person.
    /// Every write is fenced on the label, so `inventory` may come from the
    /// watch cache.
    async fn repair_keys(
        &mut self,
        head: &OperatorAssignmentSpec,
        errors: &[plan::ResourceError],
        inventory: &Inventory,
    ) -> Result<usize, SyncError> {
        let by_id: std::collections::HashMap<&ResourceRef, &inventory::Resource> =
            inventory.resources.iter().map(|r| (&r.id, r)).collect();
        let desired = crate::manifest::Desired::new(head);
        let mut handoffs: BTreeMap<(String, api::OperatorId, api::OperatorId), Vec<_>> =
            BTreeMap::new();
        let mut repaired = 0;
        for error in errors {
            let Some(resource) = by_id.get(&error.resource) else {
                continue;
            };
            // The owner by the one rule: with both keys set, the label.
            let label = resource.labels.get(OPERATOR_ID_KEY).map(String::as_str);
            let owner = owner_from_keys(label, resource.owner_annotation.as_deref());
            let (Some(label), Some(decision)) = (
                owner.and_then(|o| api::OperatorId::new(o.id).ok()),
                desired.decide(resource),
            ) else {
                continue;
            };
            let id = &resource.id;
            if label != decision.operator {
                handoffs
                    .entry((id.namespace.clone(), label, decision.operator))
                    .or_default()
                    .push((id.kind, id.name.clone()));
                continue;
            }
            self.wrote_owners = true;
            let result = handoff::executor::match_annotation(
                &self.client,
                id.kind,
                &id.namespace,
                &id.name,
                label.as_str(),
            )
            .await
            .map_err(|source| SyncError::Assign {
                resource: id.clone(),
                source,
            })?;
            // Refused or gone: changed since it was read, the next round decides again.
            if matches!(result, FlipResult::Flipped(_)) {
                repaired += 1;
                tracing::info!(resource = %id, owner = %label, "owner annotation set back");
            }
        }
        for ((namespace, from, to), resources) in handoffs {
            let group = MoveBatch {
                namespace,
                from,
                to,
                resources,
            };
            let mut moved = BTreeSet::new();
            let result = self
                .hand_over(head, &group, "owner keys set right", &mut moved)
                .await?;
            repaired += moved.len();
            if let Err(reason) = result {
                tracing::warn!(%reason, "setting owner keys right stalled; the next round retries");
            }
        }
        Ok(repaired)
    }

    /// One `Moved` Event on each resource of `group` that `moved` holds.
    async fn moved_events(
        &self,
        group: &MoveBatch,
        moved: &BTreeSet<(String, String)>,
        step: &str,
    ) {
        for (kind, name) in &group.resources {
            if !moved.contains(&(group.namespace.clone(), format!("{kind}/{name}"))) {
                continue;
            }
            let regarding = reference(&kind.api_version(), kind.kind(), &group.namespace, name);
            let note = format!("handed over from {} to {} ({step})", group.from, group.to);
            self.publish(regarding, EventType::Normal, "Moved", "Handoff", note)
                .await;
        }
    }

    /// This round's share of the health gate of `steps`, whose moves are
    /// done. It checks until the gate's deadline (`healthCheckStartedAt`
    /// plus `healthGate.timeout`), but for one interval at most, so that a
    /// new revision, a suspension or a sync request is acted on while a gate
    /// waits. `true`: healthy, the round goes on. Otherwise the round ends
    /// here: waiting (a later round goes on with the same gate), or, once
    /// the deadline has passed, paused or rolled back.
    async fn gate_passes(
        &mut self,
        object: &OperatorAssignment,
        head: &OperatorAssignmentSpec,
        steps: &[Batch],
        status: &OperatorAssignmentStatus,
        ro: &RolloutStatus,
        cancel: &CancellationToken,
    ) -> Result<bool, SyncError> {
        let gate = &head.rollout.health_gate;
        let timeout = parse_duration(&gate.timeout).unwrap_or(Duration::from_secs(600));
        let left =
            timeout.saturating_sub(status::elapsed_since(ro.health_check_started_at.as_deref()));
        let budget = left.min(self.cfg.interval);
        let failing = health::wait(
            &self.client,
            &watches(steps, step_started(ro)),
            gate.require_ready,
            budget,
            self.cfg.poll,
            cancel,
        )
        .await?;
        if failing.is_empty() {
            return Ok(true);
        }
        let name = object.metadata.name.clone().unwrap_or_default();
        let mut status = status.clone();
        if budget < left {
            if handled(object, &mut status) {
                self.write(&name, &status).await?;
            }
        } else {
            self.on_unhealthy(object, head, steps, status, ro.clone(), failing, timeout)
                .await?;
        }
        Ok(false)
    }

    /// A failed health gate: pauses the rollout, or first hands the moves of
    /// `steps` back (`healthGate.onFailure: Rollback`) and then waits for a
    /// new revision.
    #[allow(clippy::too_many_arguments)]
    async fn on_unhealthy(
        &mut self,
        object: &OperatorAssignment,
        head: &OperatorAssignmentSpec,
        steps: &[Batch],
        status: OperatorAssignmentStatus,
        mut ro: RolloutStatus,
        failing: Vec<String>,
        timeout: Duration,
    ) -> Result<(), SyncError> {
        let name = object.metadata.name.clone().unwrap_or_default();
        let unhealthy = format!(
            "step {} of {}: {} moved resources not healthy within {timeout:?}",
            ro.current_step,
            ro.total_steps,
            failing.len()
        );
        let listed = failing.join("; ");
        ro.failing = failing;
        if head.rollout.health_gate.on_failure == GateFailure::Pause {
            let summary = format!("{unhealthy}; rollout paused");
            let message = format!("{summary}: {listed}");
            return self
                .pause(
                    object,
                    &name,
                    status,
                    ro,
                    summary,
                    message,
                    "HealthCheckFailed",
                    PAUSED,
                )
                .await;
        }
        let back = Batch {
            step: ro.current_step as usize,
            moves: steps
                .iter()
                .flat_map(|b| &b.moves)
                .map(|m| plan::Move {
                    from: m.to.clone(),
                    to: m.from.clone(),
                    ..m.clone()
                })
                .collect(),
        };
        let live = LiveOwners::new(&self.read(&Reach::of(head, None)).await?);
        let label = format!("rollback of step {} of {}", ro.current_step, ro.total_steps);
        tracing::warn!(%unhealthy, moves = back.moves.len(), "health gate failed; rolling the step back");
        if let StepResult::Paused(reason) = self.execute(head, &back, &live, &label).await? {
            let summary = format!("{unhealthy}; the rollback stalled: {reason}");
            return self
                .pause(
                    object,
                    &name,
                    status,
                    ro,
                    summary.clone(),
                    summary,
                    "HandoffStalled",
                    PAUSED,
                )
                .await;
        }
        let summary = format!(
            "{unhealthy}; {} resources handed back; the rollout waits for a new revision",
            back.moves.len()
        );
        let message = format!("{summary}: {listed}");
        self.pause(
            object,
            &name,
            status,
            ro,
            summary,
            message,
            "RolledBack",
            ROLLED_BACK,
        )
        .await
    }

    async fn pause_on_handoff(
        &self,
        object: &OperatorAssignment,
        name: &str,
        status: OperatorAssignmentStatus,
        ro: RolloutStatus,
        reason: String,
    ) -> Result<(), SyncError> {
        let summary = format!("step {} of {}: {reason}", ro.current_step, ro.total_steps);
        self.pause(
            object,
            name,
            status,
            ro,
            summary.clone(),
            summary,
            "HandoffStalled",
            PAUSED,
        )
        .await
    }

    /// Pauses the rollout: `state` with `summary` on the rollout, Ready and
    /// Reconciling false and Stalled true with `reason` and `message`, and a
    /// warning Event.
    #[allow(clippy::too_many_arguments)]
    async fn pause(
        &self,
        object: &OperatorAssignment,
        name: &str,
        mut status: OperatorAssignmentStatus,
        mut ro: RolloutStatus,
        summary: String,
        message: String,
        reason: &str,
        state: &str,
    ) -> Result<(), SyncError> {
        let generation = object.metadata.generation;
        handled(object, &mut status);
        // The migration's history row says how it stands until it goes on.
        if let Some(record) = status
            .history
            .iter_mut()
            .find(|r| r.revision == ro.revision && r.finished_at.is_none())
        {
            record.result = state.into();
            // A rolled-back revision is not retried: its migration has ended.
            if state == ROLLED_BACK {
                record.finished_at = Some(status::now());
            }
        }
        ro.state = state.into();
        ro.message = summary;
        status.rollout = Some(ro);
        for (condition, value) in [(READY, false), (RECONCILING, false), (STALLED, true)] {
            set_condition(&mut status, condition, value, reason, &message, generation);
        }
        // A paused rollout checks again every round; most find it as it was.
        if object.status.as_ref() != Some(&status) {
            self.write(name, &status).await?;
        }
        tracing::warn!(%message, reason, "rollout paused");
        self.event(object, EventType::Warning, reason, message)
            .await;
        Ok(())
    }

    /// An invalid revision: status and an Event, nothing else.
    async fn report_invalid(
        &mut self,
        rev: &Revision,
        error: &ManifestError,
    ) -> Result<(), SyncError> {
        let message = format!(
            "revision {} is invalid; nothing was changed:\n{error}",
            rev.short()
        );
        tracing::warn!(revision = %rev.short(), %error, "invalid revision not acted on");
        let named = Tree::parse(&rev.text).ok().and_then(|t| {
            match &t.get(&FieldPath::parse("metadata.name"))?.value {
                tree::Value::Scalar(name) if !name.is_empty() => Some(name.clone()),
                _ => None,
            }
        });
        let Some(name) = named.or_else(|| self.last_name.clone()) else {
            return Ok(());
        };
        let api: Api<OperatorAssignment> =
            Api::namespaced(self.client.clone(), &self.cfg.namespace);
        let Some(object) = api
            .get_opt(&name)
            .await
            .map_err(|source| SyncError::Status {
                name: name.clone(),
                source,
            })?
        else {
            tracing::warn!(%name, "no OperatorAssignment object to report the invalid revision on");
            return Ok(());
        };
        let generation = object.metadata.generation;
        let mut status = object.status.clone().unwrap_or_default();
        handled(&object, &mut status);
        status.last_attempted_revision = Some(rev.sha.clone());
        set_condition(
            &mut status,
            READY,
            false,
            "ValidationFailed",
            &message,
            generation,
        );
        set_condition(
            &mut status,
            RECONCILING,
            false,
            "ValidationFailed",
            &message,
            generation,
        );
        set_condition(
            &mut status,
            STALLED,
            true,
            "ValidationFailed",
            &message,
            generation,
        );
        self.write(&name, &status).await?;
        self.event(&object, EventType::Warning, "ValidationFailed", message)
            .await;
        Ok(())
    }

    /// The source could not be read: the last good state stays, the condition says why.
    async fn report_unavailable(&self, error: &SourceError) {
        let Some(name) = self.last_name.clone() else {
            return;
        };
        let api: Api<OperatorAssignment> =
            Api::namespaced(self.client.clone(), &self.cfg.namespace);
        let Ok(Some(object)) = api.get_opt(&name).await else {
            return;
        };
        let generation = object.metadata.generation;
        let mut status = object.status.clone().unwrap_or_default();
        handled(&object, &mut status);
        let message = format!("{error}; keeping the last applied revision");
        set_condition(
            &mut status,
            READY,
            false,
            "FetchFailed",
            &message,
            generation,
        );
        if let Err(e) = self.write(&name, &status).await {
            tracing::warn!(error = %e, "could not report the fetch failure");
        }
    }

    /// A round that failed: a `SyncFailed` Event on the object (the condition
    /// stays as the last finished round left it; the next round retries).
    async fn report_failure(&self, error: &SyncError) {
        if matches!(error, SyncError::Cancelled | SyncError::NotLeading) {
            return;
        }
        let Some(name) = &self.last_name else {
            return;
        };
        let api_version = format!("{}/{}", api::GROUP, api::VERSION);
        let regarding = reference(&api_version, api::KIND, &self.cfg.namespace, name);
        let note = format!("{}: {error}", error.kind());
        self.publish(regarding, EventType::Warning, "SyncFailed", "Sync", note)
            .await;
    }

    async fn event(
        &self,
        object: &OperatorAssignment,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        self.publish(object.object_ref(&()), type_, reason, "Sync", note)
            .await;
    }

    /// Records an Event about `regarding`; a failure is only logged.
    async fn publish(
        &self,
        regarding: ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note.chars().take(1000).collect()),
            action: action.into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &regarding).await {
            tracing::debug!(error = %e, reason, "event not recorded");
        }
    }
}

/// A reference to an object by API version, kind, namespace and name.
fn reference(api_version: &str, kind: &str, namespace: &str, name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.into()),
        kind: Some(kind.into()),
        namespace: Some(namespace.into()),
        name: Some(name.into()),
        ..Default::default()
    }
}

/// The kinds and namespaces the head and base manifests govern: what the
/// round reads.
struct Reach {
    kinds: Vec<CamelKind>,
    /// `None`: every namespace.
    namespaces: Option<Vec<String>>,
}

impl Reach {
    fn covers_namespace(&self, namespace: &str) -> bool {
        self.namespaces
            .as_ref()
            .is_none_or(|all| all.iter().any(|n| n == namespace))
    }

    fn of(head: &OperatorAssignmentSpec, base: Option<&OperatorAssignmentSpec>) -> Reach {
        let specs: Vec<&OperatorAssignmentSpec> = std::iter::once(head).chain(base).collect();
        let kinds = CamelKind::ALL
            .into_iter()
            .filter(|k| specs.iter().any(|s| s.scope.covers_kind(*k)))
            .collect();
        let namespaces = specs
            .iter()
            .all(|s| !s.scope.namespaces.is_empty())
            .then(|| {
                let set: BTreeSet<String> = specs
                    .iter()
                    .flat_map(|s| s.scope.namespaces.iter().cloned())
                    .collect();
                set.into_iter().collect()
            });
        Reach { kinds, namespaces }
    }
}

/// Records in `status` that the object's sync request (if any) was handled;
/// whether that changed anything.
fn handled(object: &OperatorAssignment, status: &mut OperatorAssignmentStatus) -> bool {
    let requested = object
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(RECONCILE_REQUEST_ANNOTATION));
    if requested.is_none() || status.last_handled_reconcile_at.as_ref() == requested {
        return false;
    }
    status.last_handled_reconcile_at = requested.cloned();
    true
}

/// Whether a round at revision `sha` has nothing to do on `inventory`: the
/// revision is applied, no resource waits for its first owner, and no move
/// of the plan is pending.
fn idle(
    head: &OperatorAssignmentSpec,
    base: Option<&OperatorAssignmentSpec>,
    status: &OperatorAssignmentStatus,
    sha: &str,
    inventory: &Inventory,
) -> bool {
    let applied = status.last_applied_revision.as_deref() == Some(sha)
        && status
            .rollout
            .as_ref()
            .is_some_and(|r| r.state == "Complete");
    applied
        && {
            let planned = plan::plan(head, Actual::OwnerKeys, inventory);
            planned.first_assignments.is_empty() && planned.adoptions.is_empty()
        }
        && {
            let plan = rollout::plan(head, base, inventory);
            rollout::position(&plan, &LiveOwners::new(inventory)).done == plan.batches.len()
        }
}

/// Adds what a handoff moved to `moved` (as `(namespace, "Kind/name")`);
/// `Ok(Err(reason))` when it could not finish and the rollout must pause.
fn outcome_moved(
    group: &MoveBatch,
    outcome: Result<HandoffOutcome, HandoffError>,
    moved: &mut BTreeSet<(String, String)>,
) -> Result<Result<(), String>, SyncError> {
    match outcome {
        Ok(HandoffOutcome::Completed {
            moved: m,
            taken_over,
            ..
        }) => {
            for r in m.into_iter().chain(taken_over) {
                moved.insert((group.namespace.clone(), r));
            }
            Ok(Ok(()))
        }
        Ok(HandoffOutcome::Stalled { waiting, .. }) => {
            let why: Vec<String> = waiting
                .iter()
                .map(|(r, why)| format!("{}/{r}: {why}", group.namespace))
                .collect();
            Ok(Err(format!(
                "handoff from {} to {} stalled: {}",
                group.from,
                group.to,
                why.join("; ")
            )))
        }
        Ok(HandoffOutcome::TargetDead { remaining, .. }) => Ok(Err(format!(
            "target operator {} stopped renewing its lock; handoff withdrawn, still with {}: {}",
            group.to,
            group.from,
            remaining.join(", ")
        ))),
        Err(e @ HandoffError::TargetNotAlive(..)) => Ok(Err(e.to_string())),
        Err(e) => Err(e.into()),
    }
}

/// Whether `object` already carries the manifest's spec, labels and annotations.
fn carries(object: &OperatorAssignment, manifest: &Manifest) -> bool {
    let wanted = &manifest.assignment;
    let has_all = |want: &Option<BTreeMap<String, String>>,
                   have: &Option<BTreeMap<String, String>>| {
        want.iter()
            .flatten()
            .all(|(k, v)| have.as_ref().and_then(|h| h.get(k)) == Some(v))
    };
    object.spec == wanted.spec
        && has_all(&wanted.metadata.labels, &object.metadata.labels)
        && has_all(&wanted.metadata.annotations, &object.metadata.annotations)
}

/// Drift in the plan of an applied revision: owners changed by hand (moved
/// back by the rollout) and owner keys that disagree (only reported), each
/// described.
fn drift(plan: &plan::Plan, live: &LiveOwners) -> (Vec<String>, Vec<String>) {
    let moved = plan
        .moves()
        .filter(|m| live.state(m) == rollout::MoveState::Pending)
        .map(|m| format!("{} is with {}, not {}", m.resource, m.from, m.to))
        .collect();
    let conflicts = plan
        .errors
        .iter()
        .map(|e| format!("{}: {}", e.resource, e.message))
        .collect();
    (moved, conflicts)
}

/// The gate's watches for `batches`: every move, judged fresh against `since`.
fn watches(batches: &[Batch], since: Option<k8s_openapi::jiff::Timestamp>) -> Vec<health::Watch> {
    batches
        .iter()
        .flat_map(|b| &b.moves)
        .map(|m| health::Watch {
            resource: m.resource.clone(),
            owner: m.to.clone(),
            since,
        })
        .collect()
}

/// When the step the rollout waits on first started, as recorded in status.
fn step_started(ro: &RolloutStatus) -> Option<k8s_openapi::jiff::Timestamp> {
    ro.step_started_at.as_deref()?.parse().ok()
}

//! `reconciler sync`: continuous GitOps sync of the `OperatorAssignment`
//! manifest, executing the planned migration through the handoff protocol.
//!
//! # Where things are
//! - [`run`] (`run.rs`): the loop: leadership, wake-ups (interval, webhook,
//!   edits of the object, ownership changes) and interrupts.
//! - `round.rs`: one round as a list of named stages (below).
//! - `execute.rs`: what a round writes to Camel K resources, all through
//!   [`crate::handoff`]: first assignments and adoptions, co-owned keys,
//!   hand-overs, requests a killed predecessor left.
//! - `newcomers.rs`: first owners of resources that appear without owner
//!   keys, from the watch event, between rounds.
//! - `gate.rs`: the health gate and what a failed one does.
//! - `reads.rs`: what a round reads of live ownership (the watch cache, or
//!   a metadata list of what the manifests govern).
//! - `status_writer.rs`: the one writer of the status: at the round's end,
//!   and before it only at checkpoints people watch (a step started,
//!   waiting for health, pausing, healthy, stopped).
//! - `report.rs`: the object, the ends of rounds, Events and metrics;
//!   `progress.rs` decides, without I/O, what the status says.
//! - The moves themselves are decided by the plan engine
//!   (`crate::plan::rollout`).
//!
//! # Expected flow of one round (`Syncer::round`)
//! 1. **fetch** the tracked branch ([`crate::source`]).
//! 2. **validate** the manifest ([`crate::manifest`]). An invalid revision is
//!    never acted on: the status names it as last attempted, with every
//!    `file:line:column` diagnostic, and the round ends (the cluster keeps
//!    the last good revision).
//! 3. **apply object**: the manifest's object server-side (spec only), so
//!    the object in the cluster carries what Git says and the status below;
//!    a suspended object ends the round here.
//! 4. **first assignments**: read live ownership (`crate::inventory::metadata_list`,
//!    metadata only), give unowned resources their owner (fenced first
//!    assignment, `crate::handoff::fence::assign`), adopt those the
//!    annotation names alone or against the label (the label set, fenced on
//!    the annotation), and co-own owner keys another tool applies. From
//!    here on, resources that appear without keys get their owner from this
//!    revision's manifest at once (`newcomers.rs`).
//! 5. **plan** the revision against the last applied one
//!    (`crate::plan::rollout::plan`, the plan a pull request shows), drive
//!    to their end requests an earlier process left, find the first step not
//!    done (`crate::plan::rollout::position`) and the drift.
//! 6. **steps**, one by one: hand the step's pending moves over through
//!    [`Coordinator`](crate::handoff::Coordinator) (one request per namespace,
//!    source and target), then the health gate (`health`), then the
//!    manifest's `pause`. A gate that fails, a stalled handoff or a dead
//!    target pauses the rollout with the reason; the next round retries from
//!    the same position.
//! 7. **finish**: `lastAppliedRevision` once every step is done and healthy,
//!    the conditions and one Event; a pause instead while another tool
//!    applies owner keys the revision would move.
//!
//! # Guarantees
//! - Owner keys change only through [`crate::handoff`] (its executor's
//!   fenced patches); the sync itself writes only its `OperatorAssignment`
//!   object and that object's status. Nothing else of a user's resource is
//!   written.
//! - Only the replica that holds the Lease `camelk-reconciler-lock` acts; it
//!   checks before every step.
//! - No local state: the position comes from live owners, the revision and
//!   the status (`rollout.completedSteps`), so a restarted reconciler neither
//!   repeats nor skips a step.
//!
//! # Steady state
//! Live ownership is watched (`owner_watch`, metadata only): a round decides from
//! the watch cache whether it has anything to do and lists (metadata only)
//! only when it acts after having written owner keys itself, so a cluster in
//! sync costs one GET of the object per interval and no LIST. Ownership
//! changes and edits of the object (suspend, a sync request) wake the loop at
//! once.
//!
//! # Limits
//! - A rollout in progress waits while the branch head is invalid.

mod analysis;
mod approval;
#[cfg(test)]
mod argocd_health;
mod clock;
mod execute;
mod gate;
mod gate_cache;
pub(crate) mod health;
mod newcomers;
mod notifications;
mod notify;
pub(crate) mod owner_watch;
mod plan_endpoint;
mod progress;
mod reads;
mod report;
mod round;
mod run;
pub(crate) mod server;
pub(crate) mod status;
mod status_writer;

use std::sync::Arc;
use std::time::Duration;

use kube::Client;

use crate::api::OperatorAssignmentSpec;
use crate::handoff::coordinator::HandoffError;
use crate::inventory::ResourceRef;
use crate::inventory::metadata_list::ClusterReadError;
use crate::lock::LockTiming;
use crate::source::{Revision, Source, SourceError};

pub use clock::Clock;
pub use owner_watch::LiveCacheMode;
pub use run::{Serving, run};
// The webhook's signature check, public for the fuzz target (`fuzz/`).
pub use server::{SignatureError, verify_signature};

use crate::api::{RECONCILE_REQUEST_ANNOTATION, SUSPEND_ANNOTATION, is_suspended};

/// Operator id of the reconciler's own lock: its Lease is `camelk-reconciler-lock`.
pub(crate) const LOCK_ID: &str = crate::lock::RECONCILER_ID;

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
    pub live_cache: owner_watch::LiveCacheMode,
    /// The clock freeze windows (`rollout.windows`) are judged by.
    pub clock: Clock,
    /// Where the Secrets that notifications name are mounted, one folder
    /// each (`<dir>/<name>/<key>`).
    pub notification_secrets: std::path::PathBuf,
}

/// Why a round failed (it is retried at the next interval).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SyncError {
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
    #[error(
        "listing RolloutApprovals in {namespace}: {source} (a step waits for approval; is the RolloutApproval CRD installed? `reconciler crds | kubectl apply -f -`)"
    )]
    Approvals {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    #[error("this replica no longer leads")]
    NotLeading,
    #[error("cancelled")]
    Cancelled,
}

impl SyncError {
    /// Whether the round stopped because it was cancelled, not because
    /// something failed.
    pub(crate) fn is_cancelled(&self) -> bool {
        matches!(
            self,
            SyncError::Cancelled | SyncError::Gate(health::GateError::Cancelled)
        )
    }

    /// The step that failed, for the errors metric.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            SyncError::Source(_) => "source",
            SyncError::Apply { .. } => "apply",
            SyncError::Status { .. } => "status",
            SyncError::Inventory(_) => "inventory",
            SyncError::Assign { .. } => "assign",
            SyncError::Requests { .. } | SyncError::Handoff(_) => "handoff",
            SyncError::Gate(_) => "health_gate",
            SyncError::Approvals { .. } => "approval",
            SyncError::NotLeading => "leadership",
            SyncError::Cancelled => "cancelled",
        }
    }
}

/// One sync loop's working parts; it keeps no rollout state between rounds.
///
/// Each stage of a round (`round.rs`) works through the one part it needs:
/// what it reads ([`reads::LiveReads`]), writes to owner keys
/// ([`execute::OwnerWrites`]), judges ([`gate::HealthGate`]) or tells
/// ([`report::Report`]); the status goes through a round's
/// [`status_writer::StatusWriter`].
pub(crate) struct Syncer {
    cfg: SyncConfig,
    source: Source,
    /// The revision fetched last, planned again when the cluster changes.
    last_fetched: Option<Revision>,
    /// Name of the object of the last valid revision, to report an invalid one.
    last_name: Option<String>,
    reads: reads::LiveReads,
    owners: execute::OwnerWrites,
    gate: gate::HealthGate,
    report: report::Report,
    /// Where steps that wait for a person find their approvals.
    approvals: approval::Approvals,
    /// Gives resources that appear without owner keys their owner at once.
    newcomers: Option<newcomers::Newcomers>,
    /// How long until a freeze window lets the waiting step start: the loop
    /// runs a round then, if nothing wakes it before.
    wake_in: Option<Duration>,
}

impl Syncer {
    pub(crate) fn new(
        client: Client,
        source: Source,
        cfg: SyncConfig,
        telemetry: Arc<server::Telemetry>,
    ) -> Syncer {
        let events = report::Events::new(client.clone(), &cfg.identity);
        let defaults = execute::HandoffDefaults {
            identity: cfg.identity.clone(),
            lock_timing: cfg.operator_lock_timing,
            lock_namespace: cfg.lock_namespace.clone(),
            poll: cfg.poll,
        };
        Syncer {
            reads: reads::LiveReads::new(client.clone()),
            owners: execute::OwnerWrites::new(
                client.clone(),
                defaults,
                events.clone(),
                telemetry.clone(),
            ),
            gate: gate::HealthGate::new(client.clone(), cfg.interval, cfg.poll),
            approvals: approval::Approvals::new(client.clone(), &cfg.namespace),
            report: report::Report::new(
                client.clone(),
                cfg.namespace.clone(),
                events,
                telemetry,
                notifications::Notifications::new(cfg.notification_secrets.clone(), source.url()),
            ),
            source,
            cfg,
            last_fetched: None,
            last_name: None,
            newcomers: None,
            wake_in: None,
        }
    }

    /// Decides from `cache` whether a round has anything to do, so that a
    /// round in steady state lists nothing.
    pub(crate) fn with_live_cache(mut self, cache: owner_watch::LiveCache) -> Syncer {
        self.reads.with_cache(cache);
        self
    }

    /// Lets `newcomers` assign new resources by the manifest the rounds follow.
    pub(crate) fn with_newcomers(mut self, newcomers: newcomers::Newcomers) -> Syncer {
        self.newcomers = Some(newcomers);
        self
    }

    /// New resources get their owner by `spec` (`None`: by none, while the
    /// object is suspended).
    fn follow(&self, spec: Option<&OperatorAssignmentSpec>) {
        if let Some(newcomers) = &self.newcomers {
            newcomers.follow(spec);
        }
    }

    /// When the round that just ended asked for the next (a freeze window
    /// opening); asked once.
    pub(crate) fn take_wake_in(&mut self) -> Option<Duration> {
        self.wake_in.take()
    }

    /// A round that failed: an Event on the object (see [`report::Report::failure`]).
    pub(crate) async fn report_failure(&self, error: &SyncError) {
        self.report.failure(error, self.last_name.as_deref()).await;
    }
}

//! One round of the sync as a list of named stages (see the flow in the
//! [module doc](super)): fetch → validate → apply object → first
//! assignments → plan → steps → finish.
//!
//! Contract: each stage either hands the round on (`Continue`) or ends it
//! (`Break`, with the status already written by the stage that ended it);
//! a failure is an `Err` and the next round starts over. What a stage
//! decides without I/O lives in [`crate::plan::rollout`] (moves) and
//! [`super::progress`] (status); stages only read, write and wait.

use std::ops::ControlFlow::{self, Break, Continue};
use std::time::Duration;

use kube::runtime::events::EventType;
use tokio_util::sync::CancellationToken;

use super::gate::Gate;
use super::notify::Kind;
use super::reads::Reach;
use super::report::{Pause, handled};
use super::status_writer::{Checkpoint, StatusWriter};
use super::{SyncError, Syncer, progress, status};
use crate::api::{
    DriftPolicy, MigrationResult, OperatorAssignment, OperatorAssignmentSpec,
    OperatorAssignmentStatus, RolloutState, RolloutStatus, parse_duration,
};
use crate::inventory::Inventory;
use crate::lock::Leadership;
use crate::manifest::Manifest;
use crate::manifest::windows;
use crate::plan::rollout::{self, Drift, LiveOwners, Position};
use crate::plan::{self, Actual, Batch, Plan};
use crate::source::{Revision, short_sha};

/// What a round knows once its revision is valid and its object applied.
struct Round {
    rev: Revision,
    head: OperatorAssignmentSpec,
    object: OperatorAssignment,
    /// The status the round carries, written by `writer` at checkpoints
    /// and at the end.
    status: OperatorAssignmentStatus,
    writer: StatusWriter,
    base: Option<OperatorAssignmentSpec>,
    reach: Reach,
    inventory: Inventory,
    /// First assignments and adoptions written this round.
    assigned: usize,
}

impl Round {
    fn generation(&self) -> Option<i64> {
        self.object.metadata.generation
    }

    /// Whether the revision is applied already (a round then repairs drift).
    fn applied(&self) -> bool {
        self.status.last_applied_revision.as_deref() == Some(self.rev.sha.as_str())
    }
}

/// The rollout a round executes, as the plan stage found it.
struct Rollout {
    plan: Plan,
    position: Position,
    drift: Drift,
    /// `driftPolicy: report`: drift is reported, never moved back.
    report_only: bool,
    ro: RolloutStatus,
    /// The rollout as recorded before (see [`progress::Opened`]).
    recorded: RolloutStatus,
    /// The revision was applied when the round began.
    steady: bool,
}

impl Syncer {
    /// One round (see the module doc).
    /// With `fetch` false, the revision fetched last is planned again (a
    /// change in the cluster woke the loop).
    pub(crate) async fn round(
        &mut self,
        leading: &Leadership,
        cancel: &CancellationToken,
        fetch: bool,
    ) -> Result<(), SyncError> {
        let rev = self.fetch(fetch).await?;
        let Continue(manifest) = self.validate(&rev).await? else {
            return Ok(());
        };
        let Continue(object) = self.apply_object(&rev, &manifest).await? else {
            return Ok(());
        };
        let mut round = self.begin(rev, manifest, object).await?;
        self.first_assignments(&mut round).await?;
        let Continue(mut rollout) = self.plan_rollout(&mut round).await? else {
            return Ok(());
        };
        let Continue(()) = self
            .steps(leading, cancel, &mut round, &mut rollout)
            .await?
        else {
            return Ok(());
        };
        self.finish(round, rollout).await
    }

    /// Stage 1, fetch: the branch head, or the revision fetched last.
    async fn fetch(&mut self, fetch: bool) -> Result<Revision, SyncError> {
        let rev = match self.last_fetched.take() {
            Some(mut rev) if !fetch => {
                rev.rewound = false;
                rev
            }
            _ => match self.source.fetch().await {
                Ok(rev) => rev,
                Err(e) => {
                    self.report.unavailable(&e, self.last_name.as_deref()).await;
                    return Err(e.into());
                }
            },
        };
        self.last_fetched = Some(rev.clone());
        Ok(rev)
    }

    /// Stage 2, validate: an invalid revision is reported and not acted on.
    async fn validate(&mut self, rev: &Revision) -> Result<ControlFlow<(), Manifest>, SyncError> {
        match Manifest::parse(&rev.file, rev.text.clone()) {
            Ok(manifest) => Ok(Continue(manifest)),
            Err(e) => {
                self.report
                    .invalid(rev, &e, self.last_name.as_deref())
                    .await?;
                Ok(Break(()))
            }
        }
    }

    /// Stage 3, apply object: the manifest's object as Git says, applied only
    /// when it differs (no write in steady state). A suspended object ends
    /// the round; an object that is the source itself is never applied
    /// (deleted or edited since fetched: no round).
    async fn apply_object(
        &mut self,
        rev: &Revision,
        manifest: &Manifest,
    ) -> Result<ControlFlow<(), OperatorAssignment>, SyncError> {
        let name = manifest
            .assignment
            .metadata
            .name
            .clone()
            .unwrap_or_default();
        self.last_name = Some(name.clone());
        let current = self.report.current(&name).await?;
        if let Some(object) = &current
            && self.report.suspended(object).await?
        {
            self.follow(None);
            return Ok(Break(()));
        }
        if let Some(object) = &current
            && !self.source.still_at(rev, object.metadata.generation)
        {
            // Edited since the fetch: a round on the old generation would
            // record the new one as observed, and a Flux or Argo CD waiting
            // on the object would take it as applied. The edit's watch event
            // starts the next round, which fetches.
            tracing::debug!(revision = %rev.short(), "the object changed since it was fetched");
            self.last_fetched = None;
            return Ok(Break(()));
        }
        Ok(Continue(match current {
            Some(object) if self.source.is_the_object() || carries(&object, manifest) => object,
            None if self.source.is_the_object() => return Ok(Break(())),
            _ => self.report.apply(&name, manifest).await?,
        }))
    }

    /// What the round starts from: the status it will write, the base
    /// revision's manifest and live ownership.
    async fn begin(
        &mut self,
        rev: Revision,
        manifest: Manifest,
        object: OperatorAssignment,
    ) -> Result<Round, SyncError> {
        if rev.rewound {
            tracing::warn!(revision = %rev.short(), "branch rewound or force-pushed; its new head is the truth");
            let note = format!(
                "the branch was rewound or force-pushed; following its new head {}",
                rev.short()
            );
            self.report
                .events
                .on(&object, EventType::Warning, "BranchRewound", note)
                .await;
        }
        let mut status = object.status.clone().unwrap_or_default();
        status.observed_generation = object.metadata.generation;
        status.last_attempted_revision = Some(rev.sha.clone());
        let head = manifest.assignment.spec;
        for why in self.report.notifications.follow(&head.notifications).await {
            tracing::warn!(%why, "notification left out");
            self.report
                .events
                .on(&object, EventType::Warning, "NotificationLeftOut", why)
                .await;
        }
        let base = self.base(&status, &rev).await;
        let reach = Reach::of(&head, base.as_ref());
        let wrote_owners = self.owners.wrote_any();
        let inventory = self
            .reads
            .ownership(&head, &status, &rev.sha, &reach, wrote_owners)
            .await?;
        Ok(Round {
            writer: self.report.writer(&object),
            rev,
            head,
            object,
            status,
            base,
            reach,
            inventory,
            assigned: 0,
        })
    }

    /// Stage 4, first assignments: unowned resources get their owner, those
    /// the annotation alone names (or names against the label) are adopted,
    /// and owner keys another tool applies are co-owned.
    async fn first_assignments(&mut self, r: &mut Round) -> Result<(), SyncError> {
        self.follow(Some(&r.head));
        let planned = plan::plan(&r.head, Actual::OwnerKeys, &r.inventory);
        self.owners.co_own(&r.inventory).await?;
        r.assigned = self.owners.assign(&r.head, &planned).await?;
        if r.assigned > 0 {
            let note = format!(
                "gave {} resources their operator's label ({} unowned, {} named by annotation only or against the label)",
                r.assigned,
                planned.first_assignments.len(),
                planned.adoptions.len()
            );
            self.report
                .events
                .on(&r.object, EventType::Normal, "Assigned", note)
                .await;
            r.inventory = self.reads.read(&r.reach).await?;
        }
        // Keys that disagree are never silent: each round that finds them
        // says so, set right (an adoption above) or left to the tool that
        // applies them.
        if !planned.conflicts.is_empty() {
            let shown: Vec<String> = planned
                .conflicts
                .iter()
                .take(20)
                .map(ToString::to_string)
                .collect();
            let note = format!(
                "{} resources have a label and an annotation naming different operators: {}",
                planned.conflicts.len(),
                shown.join("; ")
            );
            tracing::warn!(%note, "owner keys disagree");
            self.report
                .events
                .on(&r.object, EventType::Warning, "OwnerKeysDisagree", note)
                .await;
        }
        Ok(())
    }

    /// Stage 5, plan: the revision's rollout, requests a killed predecessor
    /// left driven to their end, where the rollout stands, and the drift.
    async fn plan_rollout(&mut self, r: &mut Round) -> Result<ControlFlow<(), Rollout>, SyncError> {
        let mut plan = rollout::plan(&r.head, r.base.as_ref(), &r.inventory);
        let unfinished = !r.applied()
            || r.status
                .rollout
                .as_ref()
                .is_none_or(|ro| ro.state != RolloutState::Complete);
        if unfinished && plan.move_count() > 0 {
            let left = self.owners.resume_left_requests(&r.head, &plan).await?;
            if let Some(stall) = left.stalled() {
                let ro = r.status.rollout.clone().unwrap_or_default();
                let pause = Pause::handoff(&ro, stall);
                self.report
                    .stop(&mut r.writer, &r.object, r.status.clone(), ro, pause)
                    .await?;
                return Ok(Break(()));
            }
            r.inventory = self.reads.read(&r.reach).await?;
            plan = rollout::plan(&r.head, r.base.as_ref(), &r.inventory);
        }
        let live = LiveOwners::new(&r.inventory);
        let mut position = rollout::position(&plan, &live);
        r.status.counts = live.counts(&r.head);
        self.report.counts(&r.status.counts);
        let generation = r.generation();
        progress::resumed(&mut r.status, generation);

        // Applied already, yet owners differ: someone changed owner keys by hand.
        let steady = r.applied();
        let drift = if steady {
            rollout::drift(&plan, &live)
        } else {
            Drift::default()
        };
        let report_only = r.head.drift_policy == DriftPolicy::Report;
        if report_only && !drift.moved.is_empty() {
            // The applied revision's moves are not made again.
            plan.batches.clear();
            position = rollout::position(&plan, &live);
        }
        if !drift.is_empty() {
            let message = progress::drift_message(&drift, r.rev.short(), report_only);
            tracing::warn!(%message, "drift detected");
            progress::drift_detected(&mut r.status, &message, generation);
            self.report
                .events
                .on(&r.object, EventType::Warning, "DriftDetected", message)
                .await;
        }
        let opened = progress::open_rollout(&mut r.status, &r.rev.sha, &plan, r.assigned, steady);
        if opened.started {
            progress::describe_commit(
                &mut r.status,
                &r.rev.sha,
                r.rev.commit.as_ref(),
                r.rev.origin.as_ref(),
            );
        }
        // What the notifications count as moved: the steps found healthy.
        let healthy = (opened.rollout.completed_steps as usize).min(plan.batches.len());
        let moved: usize = plan.batches[..healthy].iter().map(|b| b.moves.len()).sum();
        self.report.notifications.moved_so_far(moved as u64);
        if opened.started && plan.move_count() > 0 {
            let (moves, steps) = (plan.move_count(), plan.batches.len());
            tracing::info!(revision = %r.rev.short(), moves, steps, "new rollout");
            let note = format!("revision {}: {moves} moves in {steps} steps", r.rev.short());
            self.report
                .notifications
                .send(Kind::Started, &r.object, &opened.rollout, &note);
            self.report
                .events
                .on(&r.object, EventType::Normal, "RolloutStarted", note)
                .await;
        }
        let rollout = Rollout {
            plan,
            position,
            drift,
            report_only,
            ro: opened.rollout,
            recorded: opened.recorded,
            steady,
        };
        // A rolled-back step waits for a new revision.
        if rollout.ro.state == RolloutState::RolledBack && !steady {
            r.status.rollout = Some(rollout.ro);
            handled(&r.object, &mut r.status);
            r.writer.write(&r.status, Checkpoint::RoundEnd).await?;
            return Ok(Break(()));
        }
        Ok(Continue(rollout))
    }

    /// Stage 6, steps: the health of steps done earlier, then each step
    /// left: pause, hand-overs, health gate.
    async fn steps(
        &mut self,
        leading: &Leadership,
        cancel: &CancellationToken,
        r: &mut Round,
        rollout: &mut Rollout,
    ) -> Result<ControlFlow<()>, SyncError> {
        let Continue(()) = self.earlier_steps_healthy(cancel, r, rollout).await? else {
            return Ok(Break(()));
        };
        let plan = std::mem::take(&mut rollout.plan);
        let pause = parse_duration(&r.head.rollout.pause).unwrap_or(Duration::ZERO);
        for (i, batch) in plan.batches.iter().enumerate().skip(rollout.position.done) {
            if i > 0 && !pause.is_zero() {
                self.pause_between_steps(cancel, r, &mut rollout.ro, pause, i)
                    .await?;
            }
            if !leading.is_leading() {
                return Err(SyncError::NotLeading);
            }
            let Continue(()) = self
                .approved(r, &mut rollout.ro, i + 1, plan.batches.len())
                .await?
            else {
                return Ok(Break(()));
            };
            let Continue(()) = self
                .window_open(r, &mut rollout.ro, i + 1, plan.batches.len())
                .await?
            else {
                return Ok(Break(()));
            };
            let step = Step {
                index: i,
                total: plan.batches.len(),
                batch,
            };
            let Continue(()) = self.step(cancel, r, &mut rollout.ro, step).await? else {
                return Ok(Break(()));
            };
        }
        rollout.plan = plan;
        Ok(Continue(()))
    }

    /// Steps done (by this or an earlier process) but not yet found healthy.
    async fn earlier_steps_healthy(
        &mut self,
        cancel: &CancellationToken,
        r: &mut Round,
        rollout: &mut Rollout,
    ) -> Result<ControlFlow<()>, SyncError> {
        let (done, ro) = (rollout.position.done, &mut rollout.ro);
        if ro.completed_steps as usize >= done {
            return Ok(Continue(()));
        }
        let steps = &rollout.plan.batches[ro.completed_steps as usize..done];
        ro.current_step = done as u32;
        // A rollout paused by the gate stays paused while it checks again.
        if ro.state != RolloutState::Paused {
            ro.state = RolloutState::WaitingForHealth;
            ro.message = format!(
                "checking the health of {} moved resources",
                steps.iter().map(|b| b.moves.len()).sum::<usize>()
            );
        }
        ro.health_check_started_at.get_or_insert_with(status::now);
        r.status.rollout = Some(ro.clone());
        r.writer
            .write(&r.status, Checkpoint::WaitingForHealth)
            .await?;
        let gate = Gate {
            object: &r.object,
            head: &r.head,
            steps,
        };
        if !self
            .gate_passes(gate, &mut r.writer, &r.status, ro, cancel)
            .await?
        {
            return Ok(Break(()));
        }
        let moves: usize = steps.iter().map(|b| b.moves.len()).sum();
        progress::step_healthy(ro, done);
        self.step_done(&r.object, ro, moves);
        Ok(Continue(()))
    }

    /// Tells the notifications that the steps up to `ro.completed_steps`
    /// are done, `moves` more resources moved.
    fn step_done(&self, object: &OperatorAssignment, ro: &RolloutStatus, moves: usize) {
        let notifications = &self.report.notifications;
        notifications.moved_more(moves as u64);
        let (n, total) = (ro.completed_steps, ro.total_steps);
        let note = format!("step {n} of {total} done: {moves} resources moved and healthy");
        notifications.send(Kind::StepDone, object, ro, &note);
    }

    /// The manifest's `rollout.pause` before step `i + 1`, counted from when
    /// the step before it was found healthy.
    async fn pause_between_steps(
        &mut self,
        cancel: &CancellationToken,
        r: &mut Round,
        ro: &mut RolloutStatus,
        pause: Duration,
        i: usize,
    ) -> Result<(), SyncError> {
        let waited = status::elapsed_since(ro.step_completed_at.as_deref());
        let Some(rest) = pause.checked_sub(waited) else {
            return Ok(());
        };
        ro.state = RolloutState::Pausing;
        ro.message = format!("pause of {} before step {}", r.head.rollout.pause, i + 1);
        r.status.rollout = Some(ro.clone());
        r.writer.write(&r.status, Checkpoint::Pausing).await?;
        tokio::select! {
            _ = cancel.cancelled() => Err(SyncError::Cancelled),
            _ = tokio::time::sleep(rest) => Ok(()),
        }
    }

    /// Whether step `n` may start as far as approval goes: it needs none,
    /// its approval is recorded, or one is found now (recorded, with an
    /// Event). Otherwise the rollout waits for one and the round ends.
    async fn approved(
        &mut self,
        r: &mut Round,
        ro: &mut RolloutStatus,
        n: usize,
        total: usize,
    ) -> Result<ControlFlow<()>, SyncError> {
        let step = n as u32;
        if !r.head.rollout.approval.requires(step)
            || progress::recorded_approval(&r.status, &r.rev.sha, step).is_some()
        {
            return Ok(Continue(()));
        }
        let name = r.object.metadata.name.clone().unwrap_or_default();
        let generation = r.generation();
        if let Some(approval) = self.approvals.find(&name, &r.rev.sha, step).await? {
            let note = format!(
                "step {n} of {total} of revision {} approved by {}",
                r.rev.short(),
                approval.approver
            );
            tracing::info!(revision = %r.rev.short(), step = n, approver = %approval.approver, "step approved");
            progress::approved(&mut r.status, &r.rev.sha, approval, generation);
            r.status.rollout = Some(ro.clone());
            r.writer.write(&r.status, Checkpoint::StepStarted).await?;
            self.report
                .events
                .on(&r.object, EventType::Normal, "Approved", note)
                .await;
            return Ok(Continue(()));
        }
        let message = format!(
            "step {n} of {total} of revision {} waits for approval: kubectl camelk approve {name} --step {n} -n {}",
            r.rev.short(),
            self.cfg.namespace
        );
        self.wait_before_step(r, ro, step, RolloutState::WaitingForApproval, message)
            .await
    }

    /// Whether the freeze windows (`rollout.windows`) let step `n` start
    /// now, by the sync's clock. Otherwise the rollout waits, saying when
    /// the step may start; the round ends and the loop runs one then.
    async fn window_open(
        &mut self,
        r: &mut Round,
        ro: &mut RolloutStatus,
        n: usize,
        total: usize,
    ) -> Result<ControlFlow<()>, SyncError> {
        let now = self.cfg.clock.now();
        let Some((why, opens_at)) = window_closed(&r.head, now) else {
            return Ok(Continue(()));
        };
        ro.next_step_at = opens_at.map(|t| t.to_string());
        let next = match opens_at {
            Some(at) => format!("it may start at {at}"),
            None => "no window lets it start within 400 days".to_string(),
        };
        let message = format!(
            "step {n} of {total} of revision {} waits: {why}; {next}",
            r.rev.short()
        );
        self.wake_in = opens_at
            .and_then(|at| Duration::try_from(at.duration_since(now)).ok())
            .map(|wait| wait + Duration::from_secs(1));
        self.wait_before_step(r, ro, n as u32, RolloutState::WaitingForWindow, message)
            .await
    }

    /// The rollout waits before `step` (for approval, for a window): its
    /// status says so with `message`, an Event too when it starts waiting,
    /// and the round ends. A later round, woken when what it waits for
    /// comes, checks again.
    async fn wait_before_step(
        &mut self,
        r: &mut Round,
        ro: &mut RolloutStatus,
        step: u32,
        state: RolloutState,
        message: String,
    ) -> Result<ControlFlow<()>, SyncError> {
        let newly = !(ro.state == state && ro.current_step == step);
        ro.current_step = step;
        ro.state = state;
        ro.message = message;
        let generation = r.generation();
        progress::waiting(&mut r.status, state.as_str(), &ro.message, generation);
        progress::history_result(&mut r.status, &r.rev.sha, MigrationResult::Progressing);
        r.status.rollout = Some(ro.clone());
        handled(&r.object, &mut r.status);
        r.writer.write(&r.status, Checkpoint::RoundEnd).await?;
        if newly {
            tracing::info!(revision = %r.rev.short(), step, message = %ro.message, "step waits");
            if state == RolloutState::WaitingForApproval {
                self.report.notifications.send(
                    Kind::WaitingForApproval,
                    &r.object,
                    ro,
                    &ro.message,
                );
            }
            self.report
                .events
                .on(
                    &r.object,
                    EventType::Normal,
                    state.as_str(),
                    ro.message.clone(),
                )
                .await;
        }
        Ok(Break(()))
    }

    /// One step: its pending moves handed over, then its health gate.
    async fn step(
        &mut self,
        cancel: &CancellationToken,
        r: &mut Round,
        ro: &mut RolloutStatus,
        step: Step<'_>,
    ) -> Result<ControlFlow<()>, SyncError> {
        let (n, total, moves) = (step.index + 1, step.total, step.batch.moves.len());
        let live = LiveOwners::new(&self.reads.read(&r.reach).await?);
        // A retried step keeps the time it first started: what an
        // earlier attempt moved is judged against that time too.
        ro.step_started_at.get_or_insert_with(status::now);
        // A paused step tried again stays paused, as people see it, until
        // it moves: a retry that stalls the same way changes nothing, so a
        // Flux or Argo CD waiting on the object sees it stalled, not
        // flapping between stalled and progressing at every round.
        let retry = ro.state == RolloutState::Paused && ro.current_step == n as u32;
        if !retry {
            started(r, ro, &step);
            r.writer.write(&r.status, Checkpoint::StepStarted).await?;
        }
        tracing::info!(revision = %r.rev.short(), step = n, of = total, moves, retry, "step started");

        let label = format!("revision {} step {n} of {total}", r.rev.short());
        let outcome = self
            .owners
            .execute(&r.head, step.batch, &live, &label)
            .await?;
        if let Some(stall) = outcome.stalled() {
            let pause = Pause::handoff(ro, stall);
            let status = r.status.clone();
            self.report
                .stop(&mut r.writer, &r.object, status, ro.clone(), pause)
                .await?;
            return Ok(Break(()));
        }
        if retry {
            started(r, ro, &step);
        }
        let note = format!(
            "step {n} of {total}: {} resources handed over",
            outcome.moved().len()
        );
        self.report
            .events
            .on(&r.object, EventType::Normal, "StepMoved", note)
            .await;
        ro.state = RolloutState::WaitingForHealth;
        ro.message =
            format!("step {n} of {total}: waiting for {moves} moved resources to be healthy");
        // A window that closed while the step ran does not stop it.
        if let Some((why, _)) = window_closed(&r.head, self.cfg.clock.now()) {
            ro.message = format!(
                "{}; {why}: this step, started before, finishes; the next waits",
                ro.message
            );
        }
        ro.health_check_started_at = Some(status::now());
        r.status.rollout = Some(ro.clone());
        r.writer
            .write(&r.status, Checkpoint::WaitingForHealth)
            .await?;
        let gate = Gate {
            object: &r.object,
            head: &r.head,
            steps: std::slice::from_ref(step.batch),
        };
        if !self
            .gate_passes(gate, &mut r.writer, &r.status, ro, cancel)
            .await?
        {
            return Ok(Break(()));
        }
        progress::step_healthy(ro, n);
        r.status.counts = LiveOwners::new(&self.reads.read(&r.reach).await?).counts(&r.head);
        self.report.counts(&r.status.counts);
        r.status.rollout = Some(ro.clone());
        r.writer.write(&r.status, Checkpoint::StepHealthy).await?;
        tracing::info!(revision = %r.rev.short(), step = n, "step done and healthy");
        self.step_done(&r.object, ro, moves);
        Ok(Continue(()))
    }

    /// Stage 7, finish: the revision recorded as applied, the conditions,
    /// and an Event when it is newly applied; or, while another tool applies
    /// the owner keys of resources the revision moves, a pause naming them
    /// (no round writes those keys, so none fights that tool).
    async fn finish(&mut self, mut r: Round, rollout: Rollout) -> Result<(), SyncError> {
        let Rollout {
            plan,
            drift,
            report_only,
            ro,
            recorded,
            steady,
            ..
        } = rollout;
        if let Some(pause) = Pause::keys_applied(&plan) {
            return self
                .report
                .stop(&mut r.writer, &r.object, r.status, ro, pause)
                .await;
        }
        let newly_applied = !r.applied();
        let generation = r.generation();
        let kept = (steady && plan.batches.is_empty()).then_some(recorded);
        progress::applied(&mut r.status, &r.rev.sha, r.rev.short(), ro, kept);
        progress::drift_settled(&mut r.status, &drift, report_only, generation);
        let message = format!("applied revision {}", r.rev.short());
        progress::succeeded(&mut r.status, &message, generation);
        handled(&r.object, &mut r.status);
        r.writer.write(&r.status, Checkpoint::RoundEnd).await?;
        if newly_applied {
            tracing::info!(revision = %r.rev.short(), "revision applied");
            if let Some(ro) = &r.status.rollout {
                self.report
                    .notifications
                    .send(Kind::Applied, &r.object, ro, &message);
            }
            self.report
                .events
                .on(&r.object, EventType::Normal, progress::SUCCEEDED, message)
                .await;
        }
        Ok(())
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
}

/// Why the freeze windows of `head` keep a step from starting at `now`, and
/// when one may (`None`: none within the search's horizon); `None` when
/// they do not.
fn window_closed(
    head: &OperatorAssignmentSpec,
    now: jiff::Timestamp,
) -> Option<(String, Option<jiff::Timestamp>)> {
    if head.rollout.windows.is_empty() {
        return None;
    }
    match windows::judge(&windows::compile_all(&head.rollout.windows), now) {
        windows::Gate::Open => None,
        windows::Gate::Closed { why, opens_at } => Some((why, opens_at)),
    }
}

/// Records in the round's status that `step` is progressing.
fn started(r: &mut Round, ro: &mut RolloutStatus, step: &Step<'_>) {
    let (n, total) = (step.index + 1, step.total);
    ro.current_step = n as u32;
    ro.state = RolloutState::Progressing;
    ro.target_not_alive = None;
    ro.next_step_at = None;
    progress::history_result(&mut r.status, &r.rev.sha, MigrationResult::Progressing);
    ro.message = format!(
        "step {n} of {total}: moving {} resources",
        step.batch.moves.len()
    );
    r.status.rollout = Some(ro.clone());
    let generation = r.generation();
    progress::progressing(&mut r.status, &ro.message, generation);
}

/// One step of the plan, for [`Syncer::step`].
struct Step<'a> {
    /// From 0.
    index: usize,
    /// Steps in the plan.
    total: usize,
    batch: &'a Batch,
}

/// Whether `object` already carries the manifest's spec, labels and annotations.
fn carries(object: &OperatorAssignment, manifest: &Manifest) -> bool {
    let wanted = &manifest.assignment;
    let has_all = |want: &Option<std::collections::BTreeMap<String, String>>,
                   have: &Option<std::collections::BTreeMap<String, String>>| {
        want.iter()
            .flatten()
            .all(|(k, v)| have.as_ref().and_then(|h| h.get(k)) == Some(v))
    };
    object.spec == wanted.spec
        && has_all(&wanted.metadata.labels, &object.metadata.labels)
        && has_all(&wanted.metadata.annotations, &object.metadata.annotations)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "apiVersion: camelk.dev/v1alpha1\nkind: OperatorAssignment\nmetadata:\n  name: a\n  labels: {team: x}\nspec:\n  operators: [{id: operator-1, namespace: x}, {id: operator-2, namespace: x}]\n  defaultOperator: operator-1\n";

    fn manifest() -> Manifest {
        Manifest::parse("a.yaml", TEXT.to_string()).unwrap()
    }

    #[test]
    fn an_object_that_carries_the_manifest_is_not_applied_again() {
        let m = manifest();
        let mut object = m.assignment.clone();
        assert!(carries(&object, &m));
        // Labels someone else added do not matter; one the manifest sets does.
        object
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("other".into(), "y".into());
        assert!(carries(&object, &m));
        object.metadata.labels = None;
        assert!(!carries(&object, &m));
        let mut object = m.assignment.clone();
        object.spec.default_operator = crate::api::OperatorId::new("operator-2").unwrap();
        assert!(!carries(&object, &m));
    }
}

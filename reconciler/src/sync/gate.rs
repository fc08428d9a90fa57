//! The health gate between steps, and what a failed one does.
//!
//! # Expected flow
//! 1. A step's moves are done; the gate starts (`healthCheckStartedAt`).
//! 2. Each round checks for at most one interval ([`health::wait`]), so a
//!    new revision, a suspension or a sync request is acted on while a gate
//!    waits; a later round goes on with the same gate.
//! 3. Healthy: with `healthGate.soak`, the soak starts (`soakStartedAt`) and
//!    each round checks again, every poll, that all stay healthy; one that
//!    does not fails the gate at once. Healthy (and soaked): the rollout goes
//!    on. Past the deadline (`healthCheckStartedAt` plus
//!    `healthGate.timeout`), or failed during the soak: the rollout pauses
//!    (`onFailure: Pause`; the soak starts again once all are healthy), or
//!    the step's moves are handed back ([`rollout::reversal`]) and it waits
//!    for a new revision (`onFailure: Rollback`).

use std::time::Duration;

use kube::Client;
use tokio_util::sync::CancellationToken;

use super::report::{Pause, handled};
use super::status_writer::{Checkpoint, StatusWriter};
use super::{SyncError, Syncer, health, status};
use crate::api::{
    Analysis, AnalysisStatus, GateFailure, OperatorAssignment, OperatorAssignmentSpec,
    OperatorAssignmentStatus, RolloutState, RolloutStatus, parse_duration,
};
use crate::manifest::analysis::{self as plan_analysis, Standing};
use crate::plan::Batch;
use crate::plan::rollout::{self, LiveOwners};

/// The steps a gate judges, on the object that records them.
pub(super) struct Gate<'a> {
    pub(crate) object: &'a OperatorAssignment,
    pub(crate) head: &'a OperatorAssignmentSpec,
    /// Steps whose moves are done.
    pub(crate) steps: &'a [Batch],
}

/// What a gate's check found.
pub(super) enum Verdict {
    /// Every moved resource is healthy: the rollout goes on.
    Healthy,
    /// Not yet, and the deadline has not passed: a later round checks again.
    Waiting,
    /// All healthy, and soaking since `since` (RFC 3339): a later round
    /// checks again.
    Soaking { since: String, left: Duration },
    /// All healthy (and soaked since `soak_since`), the metric analysis
    /// under way as `analysis` says: a later round measures again.
    Analyzing {
        soak_since: Option<String>,
        analysis: AnalysisStatus,
    },
    /// The metric analysis failed: why, naming the queries and their values.
    AnalysisFailed {
        why: String,
        analysis: AnalysisStatus,
    },
    /// These resources are not healthy: past the deadline, or during the soak.
    Failed {
        failing: Vec<String>,
        /// How they failed, for people ("not healthy within 10m0s").
        how: String,
    },
}

/// Checks the health of moved resources; keeps what it watches across
/// rounds while the same step is judged.
pub(super) struct HealthGate {
    client: Client,
    /// The most a round waits for the gate.
    interval: Duration,
    /// How often a resource without a watch is read again.
    poll: Duration,
    memory: health::GateMemory,
}

impl HealthGate {
    pub(super) fn new(client: Client, interval: Duration, poll: Duration) -> HealthGate {
        HealthGate {
            client,
            interval,
            poll,
            memory: health::GateMemory::default(),
        }
    }

    /// This round's share of the gate (see the module doc): it waits at
    /// most an interval, and at most until the deadline.
    pub(super) async fn check(
        &mut self,
        gate: &Gate<'_>,
        ro: &RolloutStatus,
        cancel: &CancellationToken,
    ) -> Result<Verdict, SyncError> {
        let rules = &gate.head.rollout.health_gate;
        let timeout = parse_duration(&rules.timeout).unwrap_or(Duration::from_secs(600));
        let left =
            timeout.saturating_sub(status::elapsed_since(ro.health_check_started_at.as_deref()));
        let budget = left.min(self.interval);
        let failing = health::wait(
            &self.client,
            &watches(gate.steps, step_started(ro)),
            rules.require_ready,
            budget,
            self.poll,
            &mut self.memory,
            cancel,
        )
        .await?;
        if !failing.is_empty() {
            return Ok(if budget < left {
                Verdict::Waiting
            } else {
                Verdict::Failed {
                    failing,
                    how: format!("not healthy within {timeout:?}"),
                }
            });
        }
        let soak = parse_duration(&rules.soak).unwrap_or_default();
        let since = ro.soak_started_at.clone().unwrap_or_else(status::now);
        let mut verdict = self
            .soak(gate, ro, soak, &since, rules.require_ready, cancel)
            .await?;
        if let (Verdict::Healthy, Some(analysis)) = (&verdict, &rules.analysis) {
            let soak_since = (!soak.is_zero()).then_some(since);
            verdict = self.analyze(gate, ro, analysis, soak_since, cancel).await?;
        }
        if matches!(verdict, Verdict::Healthy) {
            self.memory.cache = Default::default(); // its watches end with the gate
        }
        Ok(verdict)
    }

    /// All are healthy now: this round's share of the soak. It checks
    /// every poll, for at most an interval, that all stay healthy.
    async fn soak(
        &mut self,
        gate: &Gate<'_>,
        ro: &RolloutStatus,
        soak: Duration,
        since: &str,
        require_ready: bool,
        cancel: &CancellationToken,
    ) -> Result<Verdict, SyncError> {
        let since = since.to_string();
        let until_round_ends = tokio::time::Instant::now() + self.interval;
        let watches = watches(gate.steps, step_started(ro));
        loop {
            let left = soak.saturating_sub(status::elapsed_since(Some(&since)));
            if left.is_zero() {
                return Ok(Verdict::Healthy);
            }
            let now = tokio::time::Instant::now();
            if now >= until_round_ends {
                return Ok(Verdict::Soaking { since, left });
            }
            let nap = self.poll.min(left).min(until_round_ends - now);
            tokio::select! {
                _ = cancel.cancelled() => return Err(SyncError::Cancelled),
                _ = tokio::time::sleep(nap) => {}
            }
            let failing = health::wait(
                &self.client,
                &watches,
                require_ready,
                Duration::ZERO,
                self.poll,
                &mut self.memory,
                cancel,
            )
            .await?;
            if !failing.is_empty() {
                return Ok(Verdict::Failed {
                    failing,
                    how: format!("failed during the soak of {soak:?}"),
                });
            }
        }
    }
}

impl HealthGate {
    /// All are healthy (and soaked): this round's share of the metric
    /// analysis (see [`crate::manifest::analysis`]). It measures every
    /// `interval`, for at most an interval of the sync.
    async fn analyze(
        &mut self,
        gate: &Gate<'_>,
        ro: &RolloutStatus,
        analysis: &Analysis,
        soak_since: Option<String>,
        cancel: &CancellationToken,
    ) -> Result<Verdict, SyncError> {
        let mut state = ro.analysis.clone().unwrap_or_default();
        let every = parse_duration(&analysis.interval).unwrap_or(Duration::from_secs(30));
        let moved = moved(gate.steps);
        let queries: Vec<(String, String)> = analysis
            .queries
            .iter()
            .map(|q| (q.name.clone(), plan_analysis::expand(&q.query, &moved)))
            .collect();
        let until_round_ends = tokio::time::Instant::now() + self.interval;
        loop {
            if state.measurements >= analysis.count {
                return Ok(Verdict::Healthy);
            }
            let wait = state
                .last_measured_at
                .as_deref()
                .map_or(Duration::ZERO, |at| {
                    every.saturating_sub(status::elapsed_since(Some(at)))
                });
            if tokio::time::Instant::now() + wait > until_round_ends {
                return Ok(Verdict::Analyzing {
                    soak_since,
                    analysis: state,
                });
            }
            tokio::select! {
                _ = cancel.cancelled() => return Err(SyncError::Cancelled),
                _ = tokio::time::sleep(wait) => {}
            }
            let readings = super::analysis::measure(&analysis.prometheus, queries.clone()).await;
            match plan_analysis::record(analysis, &mut state, &readings, status::now()) {
                Standing::Running => {}
                Standing::Passed => return Ok(Verdict::Healthy),
                Standing::Failed(why) => {
                    return Ok(Verdict::AnalysisFailed {
                        why,
                        analysis: state,
                    });
                }
            }
        }
    }
}

/// The names, namespaces and new operators of what `batches` moved.
fn moved(batches: &[Batch]) -> plan_analysis::Moved {
    let mut moved = plan_analysis::Moved::default();
    for m in batches.iter().flat_map(|b| &b.moves) {
        moved.names.push(m.resource.name.clone());
        moved.namespaces.push(m.resource.namespace.clone());
        moved.operators.push(m.to.to_string());
    }
    moved
}

impl Syncer {
    /// The gate of `gate`'s steps, and what its verdict does. `true`:
    /// healthy, the round goes on. Otherwise the round ends here: waiting,
    /// or, once the deadline has passed, paused or rolled back.
    pub(super) async fn gate_passes(
        &mut self,
        gate: Gate<'_>,
        writer: &mut StatusWriter,
        status: &OperatorAssignmentStatus,
        ro: &RolloutStatus,
        cancel: &CancellationToken,
    ) -> Result<bool, SyncError> {
        match self.gate.check(&gate, ro, cancel).await? {
            Verdict::Healthy => Ok(true),
            Verdict::Waiting => {
                // A sync request is answered even while the gate waits.
                let mut status = status.clone();
                if handled(gate.object, &mut status) {
                    writer.write(&status, Checkpoint::WaitingForHealth).await?;
                }
                Ok(false)
            }
            Verdict::Soaking { since, left } => {
                let mut status = status.clone();
                let mut ro = ro.clone();
                if ro.soak_started_at.is_none() {
                    tracing::info!(step = ro.current_step, soak = %gate.head.rollout.health_gate.soak, "moved resources healthy; soaking");
                }
                ro.soak_started_at = Some(since);
                if ro.state != RolloutState::Paused {
                    ro.message = format!(
                        "step {} of {}: all moved resources healthy; soaking {}s more",
                        ro.current_step,
                        ro.total_steps,
                        left.as_secs()
                    );
                }
                status.rollout = Some(ro);
                handled(gate.object, &mut status);
                writer.write(&status, Checkpoint::WaitingForHealth).await?;
                Ok(false)
            }
            Verdict::Analyzing {
                soak_since,
                analysis,
            } => {
                let mut status = status.clone();
                let mut ro = ro.clone();
                let count = gate
                    .head
                    .rollout
                    .health_gate
                    .analysis
                    .as_ref()
                    .map_or(0, |a| a.count);
                if ro.state != RolloutState::Paused {
                    ro.message = format!(
                        "step {} of {}: all moved resources healthy; metric analysis: {} of {count} measurements taken, {} failed",
                        ro.current_step, ro.total_steps, analysis.measurements, analysis.failures
                    );
                }
                ro.soak_started_at = soak_since;
                ro.analysis = Some(analysis);
                status.rollout = Some(ro);
                handled(gate.object, &mut status);
                writer.write(&status, Checkpoint::WaitingForHealth).await?;
                Ok(false)
            }
            Verdict::AnalysisFailed { why, analysis } => {
                let mut ro = ro.clone();
                ro.analysis = Some(analysis);
                let failed = format!(
                    "step {} of {}: the metric analysis failed",
                    ro.current_step, ro.total_steps
                );
                tracing::warn!(%why, "metric analysis failed; moving the step back");
                let mut pause = self.roll_back(&gate, &ro, &failed, &why).await?;
                if pause.state == RolloutState::RolledBack {
                    pause.reason = "AnalysisFailed";
                }
                self.report
                    .stop(writer, gate.object, status.clone(), ro, pause)
                    .await?;
                Ok(false)
            }
            Verdict::Failed { failing, how } => {
                let status = status.clone();
                self.on_unhealthy(gate, writer, status, ro.clone(), failing, how)
                    .await?;
                Ok(false)
            }
        }
    }

    /// A failed health gate: pauses the rollout, or first hands the moves of
    /// the gate's steps back (`healthGate.onFailure: Rollback`) and then
    /// waits for a new revision.
    async fn on_unhealthy(
        &mut self,
        gate: Gate<'_>,
        writer: &mut StatusWriter,
        status: OperatorAssignmentStatus,
        mut ro: RolloutStatus,
        failing: Vec<String>,
        how: String,
    ) -> Result<(), SyncError> {
        let unhealthy = format!(
            "step {} of {}: {} moved resources {how}",
            ro.current_step,
            ro.total_steps,
            failing.len()
        );
        let listed = failing.join("; ");
        ro.failing = failing;
        // A soak starts again only once all are healthy again.
        ro.soak_started_at = None;
        let pause = if gate.head.rollout.health_gate.on_failure == GateFailure::Pause {
            let summary = format!("{unhealthy}; rollout paused");
            Pause {
                message: format!("{summary}: {listed}"),
                summary,
                reason: "HealthCheckFailed",
                state: RolloutState::Paused,
                target_not_alive: None,
            }
        } else {
            self.roll_back(&gate, &ro, &unhealthy, &listed).await?
        };
        self.report
            .stop(writer, gate.object, status, ro, pause)
            .await
    }

    /// Hands the moves of the gate's steps back; how the rollout then stops.
    async fn roll_back(
        &mut self,
        gate: &Gate<'_>,
        ro: &RolloutStatus,
        unhealthy: &str,
        listed: &str,
    ) -> Result<Pause, SyncError> {
        let back = rollout::reversal(gate.steps, ro.current_step as usize);
        let reach = super::reads::Reach::of(gate.head, None);
        let live = LiveOwners::new(&self.reads.read(&reach).await?);
        let label = format!("rollback of step {} of {}", ro.current_step, ro.total_steps);
        tracing::warn!(%unhealthy, moves = back.moves.len(), "health gate failed; rolling the step back");
        let outcome = self.owners.execute(gate.head, &back, &live, &label).await?;
        if let Some(stall) = outcome.stalled() {
            let summary = format!("{unhealthy}; the rollback stalled: {}", stall.message);
            return Ok(Pause::stalled(summary.clone(), summary, stall));
        }
        let summary = format!(
            "{unhealthy}; {} resources handed back; the rollout waits for a new revision",
            back.moves.len()
        );
        Ok(Pause {
            message: format!("{summary}: {listed}"),
            summary,
            reason: "RolledBack",
            state: RolloutState::RolledBack,
            target_not_alive: None,
        })
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::OperatorId;
    use crate::camel_k::CamelKind;
    use crate::inventory::ResourceRef;
    use crate::plan::{Move, Reason};

    #[test]
    fn the_gate_watches_every_move_at_its_target_since_the_step_started() {
        let m = |name: &str| Move {
            resource: ResourceRef {
                kind: CamelKind::Integration,
                namespace: "a".into(),
                name: name.into(),
            },
            from: OperatorId::new("operator-1").unwrap(),
            to: OperatorId::new("operator-2").unwrap(),
            because: Reason::Default,
        };
        let steps = [
            Batch {
                step: 1,
                moves: vec![m("x")],
            },
            Batch {
                step: 2,
                moves: vec![m("y"), m("z")],
            },
        ];
        let started = "2026-01-02T03:04:05Z";
        let ro = RolloutStatus {
            step_started_at: Some(started.into()),
            ..Default::default()
        };
        let since = step_started(&ro);
        assert_eq!(since, Some(started.parse().unwrap()));
        let all = watches(&steps, since);
        assert_eq!(all.len(), 3);
        assert!(
            all.iter()
                .all(|w| w.owner.as_str() == "operator-2" && w.since == since)
        );
        assert_eq!(step_started(&RolloutStatus::default()), None);
    }
}

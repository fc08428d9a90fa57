//! How a round's findings change the status, decided without I/O: the
//! rollout record, the history row and the conditions.
//!
//! Contract (pure; the clock is read only for time stamps):
//! - Every condition a round sets goes through one of the few outcomes here
//!   ([`progressing`], [`stalled`], [`succeeded`], [`fetch_failed`], the
//!   drift and suspension pairs), so one outcome always sets the same
//!   conditions in the same order.
//! - One history row per revision; a row ends once (`finishedAt`), as
//!   `Succeeded`, `RolledBack` or `Superseded`; `Paused` and `Progressing`
//!   rows go on.
//! - [`open_rollout`] keeps the recorded rollout of the revision, so a round
//!   resumes where the last one stopped; a new revision supersedes the row
//!   of one that never ended.

use crate::api::{
    ApprovalRecord, MigrationRecord, MigrationResult, OperatorAssignmentStatus, RolloutState,
    RolloutStatus,
};
use crate::plan::Plan;
use crate::plan::rollout::Drift;
use crate::source::Commit;
use crate::source::origin::Origin;

use super::status::{
    self, DRIFTED, READY, RECONCILING, STALLED, SUSPENDED, WAITING_FOR_APPROVAL, set_condition,
};

/// Reason of the conditions of a round that applied its revision.
pub(crate) const SUCCEEDED: &str = "ReconciliationSucceeded";

/// A step's handoffs run: Reconciling, not Ready, not Stalled.
pub(crate) fn progressing(
    status: &mut OperatorAssignmentStatus,
    message: &str,
    generation: Option<i64>,
) {
    set_condition(
        status,
        RECONCILING,
        true,
        "Progressing",
        message,
        generation,
    );
    set_condition(status, READY, false, "Progressing", message, generation);
    set_condition(status, STALLED, false, "Progressing", "", generation);
}

/// The round cannot go on by itself: not Ready, not Reconciling, Stalled,
/// all three with `reason` and `message`.
pub(crate) fn stalled(
    status: &mut OperatorAssignmentStatus,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) {
    for (condition, value) in [(READY, false), (RECONCILING, false), (STALLED, true)] {
        set_condition(status, condition, value, reason, message, generation);
    }
}

/// The revision is applied: Ready, neither Reconciling nor Stalled.
pub(crate) fn succeeded(
    status: &mut OperatorAssignmentStatus,
    message: &str,
    generation: Option<i64>,
) {
    set_condition(status, READY, true, SUCCEEDED, message, generation);
    set_condition(status, RECONCILING, false, SUCCEEDED, message, generation);
    set_condition(status, STALLED, false, SUCCEEDED, "", generation);
}

/// The next step waits (for approval, for a freeze window; `reason` says
/// which): Reconciling (the revision is not applied, and goes on by itself
/// once what it waits for comes), not Ready, not Stalled, all with
/// `reason` and `message`. Waiting for approval also sets
/// `WaitingForApproval=True`.
pub(crate) fn waiting(
    status: &mut OperatorAssignmentStatus,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) {
    set_condition(status, RECONCILING, true, reason, message, generation);
    set_condition(status, READY, false, reason, message, generation);
    set_condition(status, STALLED, false, reason, "", generation);
    if reason == WAITING_FOR_APPROVAL {
        set_condition(
            status,
            WAITING_FOR_APPROVAL,
            true,
            reason,
            message,
            generation,
        );
    }
}

/// The approval of a step was found: recorded on the revision's history row
/// (once per step), and `WaitingForApproval=False` naming the approver.
pub(crate) fn approved(
    status: &mut OperatorAssignmentStatus,
    revision: &str,
    approval: ApprovalRecord,
    generation: Option<i64>,
) {
    let message = format!("step {} approved by {}", approval.step, approval.approver);
    set_condition(
        status,
        WAITING_FOR_APPROVAL,
        false,
        "Approved",
        &message,
        generation,
    );
    if let Some(row) = status.history.iter_mut().find(|r| r.revision == revision)
        && !row.approvals.iter().any(|a| a.step == approval.step)
    {
        row.approvals.push(approval);
        row.approvals.sort_by_key(|a| a.step);
    }
}

/// The approval of step `step` of `revision` recorded in history, if any.
pub(crate) fn recorded_approval<'a>(
    status: &'a OperatorAssignmentStatus,
    revision: &str,
    step: u32,
) -> Option<&'a ApprovalRecord> {
    status
        .history
        .iter()
        .find(|r| r.revision == revision)?
        .approvals
        .iter()
        .find(|a| a.step == step)
}

/// The source could not be read; the rest of the status stays as it was.
pub(crate) fn fetch_failed(
    status: &mut OperatorAssignmentStatus,
    message: &str,
    generation: Option<i64>,
) {
    set_condition(status, READY, false, "FetchFailed", message, generation);
}

/// Records `Suspended=True`; whether it was not already.
pub(crate) fn suspend(
    status: &mut OperatorAssignmentStatus,
    message: &str,
    generation: Option<i64>,
) -> bool {
    if status::is_true(status, SUSPENDED) {
        return false;
    }
    set_condition(status, SUSPENDED, true, "Suspended", message, generation);
    true
}

/// The round acts again: `Suspended=False`.
pub(crate) fn resumed(status: &mut OperatorAssignmentStatus, generation: Option<i64>) {
    set_condition(status, SUSPENDED, false, "Resumed", "", generation);
}

/// What drift a round found, for people: how many, against which
/// revision, what the policy does, and the first 20 of them.
pub(crate) fn drift_message(drift: &Drift, short: &str, report_only: bool) -> String {
    let all: Vec<&str> = drift
        .moved
        .iter()
        .chain(&drift.conflicts)
        .take(20)
        .map(String::as_str)
        .collect();
    format!(
        "{} resources differ from revision {short}{}: {}",
        drift.len(),
        match (drift.moved.is_empty(), report_only) {
            (true, _) => "",
            (false, true) => " (driftPolicy report: left as they are)",
            (false, false) => " (driftPolicy revert: moving them back)",
        },
        all.join("; ")
    )
}

/// `Drifted=True` with `message`.
pub(crate) fn drift_detected(
    status: &mut OperatorAssignmentStatus,
    message: &str,
    generation: Option<i64>,
) {
    set_condition(status, DRIFTED, true, "DriftDetected", message, generation);
}

/// `Drifted` once a round ends: `DriftReverted` when all the drift it found
/// was set right, `NoDrift` when there was none; unchanged while some is
/// left (reported only, or a repair still to finish). A `False` condition
/// keeps its reason, so `DriftReverted` stays readable.
pub(crate) fn drift_settled(
    status: &mut OperatorAssignmentStatus,
    drift: &Drift,
    report_only: bool,
    generation: Option<i64>,
) {
    let settled = drift.conflicts.is_empty() && (!report_only || drift.moved.is_empty());
    if !settled {
        return;
    }
    if !drift.is_empty() {
        let message = format!("{} drifted resources moved back", drift.len());
        set_condition(
            status,
            DRIFTED,
            false,
            "DriftReverted",
            &message,
            generation,
        );
    } else if status::is_true(status, DRIFTED) || !status::has_condition(status, DRIFTED) {
        set_condition(status, DRIFTED, false, "NoDrift", "", generation);
    }
}

/// The rollout a round works on, as [`open_rollout`] finds it.
#[derive(Debug, PartialEq)]
pub(crate) struct Opened {
    /// What this round updates.
    pub(crate) rollout: RolloutStatus,
    /// The rollout status recorded before: kept as it ended once the
    /// revision is applied and nothing moves.
    pub(crate) recorded: RolloutStatus,
    /// Whether a new revision's rollout started here.
    pub(crate) started: bool,
}

/// The rollout of revision `sha` on `status` (taken out of it), or a new
/// one with its history row (the unfinished row before it superseded).
/// Once `sha` is applied (`steady`), the recorded rollout stays as it ended
/// and moving drift back is a small rollout of its own.
pub(crate) fn open_rollout(
    status: &mut OperatorAssignmentStatus,
    sha: &str,
    plan: &Plan,
    assigned: usize,
    steady: bool,
) -> Opened {
    let (mut rollout, started) = match status.rollout.take() {
        Some(r) if r.revision == sha => (r, false),
        _ => {
            if let Some(prev) = status.history.first_mut()
                && prev.finished_at.is_none()
            {
                prev.result = MigrationResult::Superseded;
                prev.finished_at = Some(status::now());
            }
            status::record_history(
                status,
                MigrationRecord {
                    revision: sha.to_string(),
                    started_at: status::now(),
                    finished_at: None,
                    moves: plan.move_count() as u64,
                    first_assignments: assigned as u64,
                    steps: plan.batches.len() as u32,
                    result: MigrationResult::Progressing,
                    ..Default::default()
                },
            );
            (new_rollout(sha), true)
        }
    };
    let recorded = rollout.clone();
    if steady && !plan.batches.is_empty() {
        rollout = new_rollout(sha);
    }
    if !steady || !plan.batches.is_empty() {
        rollout.total_steps = plan.batches.len() as u32;
    }
    Opened {
        rollout,
        recorded,
        started,
    }
}

fn new_rollout(sha: &str) -> RolloutStatus {
    RolloutStatus {
        revision: sha.to_string(),
        ..Default::default()
    }
}

/// Steps up to `done` passed their gate.
pub(crate) fn step_healthy(ro: &mut RolloutStatus, done: usize) {
    ro.completed_steps = done as u32;
    ro.step_completed_at = Some(status::now());
    ro.step_started_at = None;
    ro.health_check_started_at = None;
    ro.soak_started_at = None;
    ro.analysis = None;
    ro.failing.clear();
}

/// Names the commit of `revision`'s history row: its author and message,
/// or the Git revision the tool that applied the object reports.
pub(crate) fn describe_commit(
    status: &mut OperatorAssignmentStatus,
    revision: &str,
    commit: Option<&Commit>,
    origin: Option<&Origin>,
) {
    let Some(row) = status.history.iter_mut().find(|r| r.revision == revision) else {
        return;
    };
    if let Some(commit) = commit {
        row.author = Some(commit.author.clone());
        row.message = Some(commit.subject.clone());
    }
    if let Some(origin) = origin {
        row.source_revision = Some(origin.revision.clone());
        row.applied_by = Some(origin.applied_by.clone());
    }
}

/// Sets the result of the unfinished history row of `revision`; a result
/// that ends the migration ends the row.
pub(crate) fn history_result(
    status: &mut OperatorAssignmentStatus,
    revision: &str,
    result: MigrationResult,
) {
    if let Some(record) = status
        .history
        .iter_mut()
        .find(|r| r.revision == revision && r.finished_at.is_none())
    {
        record.result = result;
        if result == MigrationResult::RolledBack {
            record.finished_at = Some(status::now());
        }
    }
}

/// The revision `sha` is applied: its rollout `Complete` (or, when a
/// steady round moved nothing, as `recorded`), its history row `Succeeded`.
pub(crate) fn applied(
    status: &mut OperatorAssignmentStatus,
    sha: &str,
    short: &str,
    mut rollout: RolloutStatus,
    recorded: Option<RolloutStatus>,
) {
    status.last_applied_revision = Some(sha.to_string());
    status.rollout = Some(match recorded {
        Some(recorded) => recorded,
        None => {
            rollout.current_step = rollout.total_steps;
            rollout.state = RolloutState::Complete;
            rollout.message = format!("revision {short} applied");
            // Whatever it waited for, it waits no more.
            rollout.target_not_alive = None;
            rollout
        }
    });
    if let Some(record) = status.history.iter_mut().find(|r| r.revision == sha)
        && record.finished_at.is_none()
    {
        record.finished_at = Some(status::now());
        record.result = MigrationResult::Succeeded;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Batch, Move, Reason};

    fn condition<'a>(s: &'a OperatorAssignmentStatus, type_: &str) -> (&'a str, &'a str, &'a str) {
        let c = s.conditions.iter().find(|c| c.type_ == type_).unwrap();
        (c.status.as_str(), c.reason.as_str(), c.message.as_str())
    }

    fn plan_of(moves: usize, steps: usize) -> Plan {
        let m = Move {
            resource: crate::inventory::ResourceRef {
                kind: crate::camel_k::CamelKind::Integration,
                namespace: "a".into(),
                name: "x".into(),
            },
            from: crate::api::OperatorId::new("operator-1").unwrap(),
            to: crate::api::OperatorId::new("operator-2").unwrap(),
            because: Reason::Default,
        };
        Plan {
            batches: (1..=steps)
                .map(|step| Batch {
                    step,
                    moves: vec![m.clone(); moves / steps],
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn each_outcome_sets_its_three_conditions_in_order() {
        let mut s = OperatorAssignmentStatus::default();
        stalled(&mut s, "HandoffStalled", "why", Some(3));
        let types: Vec<&str> = s.conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, vec![READY, RECONCILING, STALLED]);
        assert_eq!(condition(&s, STALLED), ("True", "HandoffStalled", "why"));
        assert_eq!(condition(&s, READY), ("False", "HandoffStalled", "why"));
        progressing(&mut s, "step 1", Some(3));
        assert_eq!(
            condition(&s, RECONCILING),
            ("True", "Progressing", "step 1")
        );
        assert_eq!(condition(&s, STALLED), ("False", "Progressing", ""));
        succeeded(&mut s, "applied revision abc", Some(3));
        assert_eq!(
            condition(&s, READY),
            ("True", SUCCEEDED, "applied revision abc")
        );
        assert_eq!(
            condition(&s, RECONCILING),
            ("False", SUCCEEDED, "applied revision abc")
        );
        assert_eq!(condition(&s, STALLED), ("False", SUCCEEDED, ""));
        assert!(
            s.conditions
                .iter()
                .all(|c| c.observed_generation == Some(3))
        );
        fetch_failed(&mut s, "down", None);
        assert_eq!(condition(&s, READY), ("False", "FetchFailed", "down"));
    }

    #[test]
    fn suspension_is_recorded_once() {
        let mut s = OperatorAssignmentStatus::default();
        assert!(suspend(&mut s, "stop", None));
        assert!(!suspend(&mut s, "stop", None));
        assert_eq!(condition(&s, SUSPENDED), ("True", "Suspended", "stop"));
        resumed(&mut s, None);
        assert_eq!(condition(&s, SUSPENDED), ("False", "Resumed", ""));
    }

    #[test]
    fn drift_is_described_and_settles_by_policy() {
        let drift = Drift {
            moved: vec!["Integration a/x is with operator-2, not operator-1".into()],
            conflicts: vec![],
        };
        assert_eq!(
            drift_message(&drift, "abc1234", false),
            "1 resources differ from revision abc1234 (driftPolicy revert: moving them back): \
             Integration a/x is with operator-2, not operator-1"
        );
        assert!(drift_message(&drift, "abc1234", true).contains("driftPolicy report"));
        let mut s = OperatorAssignmentStatus::default();
        drift_detected(&mut s, "m", None);
        // Reported only: the drift stays.
        drift_settled(&mut s, &drift, true, None);
        assert_eq!(condition(&s, DRIFTED), ("True", "DriftDetected", "m"));
        // Reverted: said so, and the reason stays while nothing drifts.
        drift_settled(&mut s, &drift, false, None);
        assert_eq!(
            condition(&s, DRIFTED),
            ("False", "DriftReverted", "1 drifted resources moved back")
        );
        drift_settled(&mut s, &Drift::default(), false, None);
        assert_eq!(condition(&s, DRIFTED).1, "DriftReverted");
        // Keys the sync cannot set right keep it detected.
        let torn = Drift {
            moved: vec![],
            conflicts: vec!["Integration a/y: keys".into()],
        };
        let mut s = OperatorAssignmentStatus::default();
        drift_detected(&mut s, "m", None);
        drift_settled(&mut s, &torn, false, None);
        assert_eq!(condition(&s, DRIFTED).0, "True");
        // Never drifted: NoDrift.
        let mut s = OperatorAssignmentStatus::default();
        drift_settled(&mut s, &Drift::default(), false, None);
        assert_eq!(condition(&s, DRIFTED), ("False", "NoDrift", ""));
    }

    #[test]
    fn a_new_revision_supersedes_the_unfinished_one_and_a_known_one_resumes() {
        let mut s = OperatorAssignmentStatus::default();
        let opened = open_rollout(&mut s, "r1", &plan_of(4, 2), 1, false);
        assert!(opened.started);
        assert_eq!(opened.rollout.total_steps, 2);
        assert_eq!(opened.rollout.state, RolloutState::New);
        assert_eq!(s.history.len(), 1);
        assert_eq!(
            (
                s.history[0].moves,
                s.history[0].first_assignments,
                s.history[0].steps
            ),
            (4, 1, 2)
        );
        let mut ro = opened.rollout;
        ro.state = RolloutState::Paused;
        ro.current_step = 2;
        s.rollout = Some(ro.clone());
        // Same revision: the recorded rollout goes on.
        let again = open_rollout(&mut s, "r1", &plan_of(4, 2), 0, false);
        assert!(!again.started);
        assert_eq!(again.rollout, ro);
        assert_eq!(s.history.len(), 1);
        // A new revision: the old row is superseded.
        s.rollout = Some(ro);
        let next = open_rollout(&mut s, "r2", &plan_of(2, 1), 0, false);
        assert!(next.started);
        assert_eq!(s.history[0].revision, "r2");
        assert_eq!(s.history[1].result, MigrationResult::Superseded);
        assert!(s.history[1].finished_at.is_some());
    }

    #[test]
    fn an_applied_revision_keeps_its_record_and_repairs_drift_in_a_rollout_of_its_own() {
        let mut s = OperatorAssignmentStatus::default();
        let mut done = new_rollout("r1");
        done.state = RolloutState::Complete;
        done.total_steps = 3;
        s.rollout = Some(done.clone());
        let calm = open_rollout(&mut s, "r1", &Plan::default(), 0, true);
        assert_eq!(
            (calm.rollout.total_steps, calm.recorded.clone()),
            (3, done.clone())
        );
        s.rollout = Some(done.clone());
        let repair = open_rollout(&mut s, "r1", &plan_of(1, 1), 0, true);
        assert_eq!(repair.rollout.state, RolloutState::New);
        assert_eq!(repair.rollout.total_steps, 1);
        assert_eq!(repair.recorded, done);
    }

    #[test]
    fn history_rows_end_once() {
        let mut s = OperatorAssignmentStatus::default();
        open_rollout(&mut s, "r1", &plan_of(1, 1), 0, false);
        history_result(&mut s, "r1", MigrationResult::Paused);
        assert_eq!(s.history[0].result, MigrationResult::Paused);
        assert!(s.history[0].finished_at.is_none());
        history_result(&mut s, "r1", MigrationResult::RolledBack);
        assert!(s.history[0].finished_at.is_some());
        // Ended: no later result changes it.
        history_result(&mut s, "r1", MigrationResult::Progressing);
        assert_eq!(s.history[0].result, MigrationResult::RolledBack);

        let mut s = OperatorAssignmentStatus::default();
        let mut opened = open_rollout(&mut s, "r2", &plan_of(2, 2), 0, false);
        // Paused on a dead target in an earlier round, then applied.
        opened.rollout.target_not_alive = Some("operator-2".into());
        applied(&mut s, "r2", "r2", opened.rollout, None);
        let ro = s.rollout.as_ref().unwrap();
        assert_eq!((ro.state, ro.current_step), (RolloutState::Complete, 2));
        assert_eq!(ro.target_not_alive, None);
        assert_eq!(ro.message, "revision r2 applied");
        assert_eq!(s.history[0].result, MigrationResult::Succeeded);
        assert_eq!(s.last_applied_revision.as_deref(), Some("r2"));
    }

    #[test]
    fn a_healthy_step_clears_its_gate() {
        let mut ro = new_rollout("r1");
        ro.failing = vec!["x".into()];
        ro.step_started_at = Some(status::now());
        ro.health_check_started_at = Some(status::now());
        step_healthy(&mut ro, 2);
        assert_eq!(ro.completed_steps, 2);
        assert!(ro.failing.is_empty() && ro.step_started_at.is_none());
        assert!(ro.health_check_started_at.is_none() && ro.step_completed_at.is_some());
    }
}

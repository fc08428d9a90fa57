//! [`RolloutApproval`]: a person's go-ahead for one step of one revision's
//! rollout (`rollout.approval.steps`).
//!
//! Contract:
//! - Its own kind, so that approving is granted apart from editing: the
//!   `create` verb on `rolloutapprovals` (the shipped ClusterRole
//!   `camelk-rollout-approver`), never `patch` on the assignment.
//! - It names the revision and the step it approves, so an approval written
//!   for an older revision, or for another step, lets nothing start: the
//!   sync accepts only an exact match (see [`RolloutApproval::approves`]).
//! - `approver` is who created it: the shipped admission policy
//!   (`examples/deploy/admission/approval-policy.yaml`) refuses any other
//!   name and any change after creation, so the name the sync records in
//!   history and Events is the API server's, not a claim.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A go-ahead for one step of one revision's rollout.
#[derive(CustomResource, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "camelk.dev",
    version = "v1alpha1",
    kind = "RolloutApproval",
    namespaced,
    category = "camelk",
    printcolumn = r#"{"name":"Assignment","type":"string","jsonPath":".spec.assignment"}"#,
    printcolumn = r#"{"name":"Revision","type":"string","jsonPath":".spec.revision"}"#,
    printcolumn = r#"{"name":"Step","type":"integer","jsonPath":".spec.step"}"#,
    printcolumn = r#"{"name":"Approver","type":"string","jsonPath":".spec.approver"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RolloutApprovalSpec {
    /// The `OperatorAssignment` (same namespace) whose rollout it approves.
    pub assignment: String,
    /// The revision whose rollout it approves, as `status.rollout.revision`
    /// names it (a full commit SHA or `generation-<N>`).
    pub revision: String,
    /// The step (from 1) that may start.
    pub step: u32,
    /// Who approves: the user who created it, as the API server names them.
    pub approver: String,
}

impl RolloutApproval {
    /// Whether this approves step `step` of `revision` of `assignment`.
    pub fn approves(&self, assignment: &str, revision: &str, step: u32) -> bool {
        self.spec.assignment == assignment
            && self.spec.revision == revision
            && self.spec.step == step
    }

    /// The name `kubectl camelk approve` gives an approval: one per
    /// assignment, revision and step, so approving twice is refused as
    /// already there rather than piling up.
    pub fn name_for(assignment: &str, revision: &str, step: u32) -> String {
        let short: String = revision.chars().take(12).collect();
        format!("{assignment}-{short}-step-{step}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approval(revision: &str, step: u32) -> RolloutApproval {
        RolloutApproval::new(
            "a",
            RolloutApprovalSpec {
                assignment: "fleet".into(),
                revision: revision.into(),
                step,
                approver: "alice".into(),
            },
        )
    }

    #[test]
    fn only_the_same_assignment_revision_and_step_is_approved() {
        let a = approval("abc", 2);
        assert!(a.approves("fleet", "abc", 2));
        assert!(!a.approves("fleet", "abc", 3), "another step");
        assert!(!a.approves("fleet", "old", 2), "another revision");
        assert!(!a.approves("other", "abc", 2), "another assignment");
    }

    #[test]
    fn names_are_short_and_one_per_step() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(
            RolloutApproval::name_for("fleet", sha, 2),
            "fleet-0123456789ab-step-2"
        );
        assert_eq!(
            RolloutApproval::name_for("fleet", "generation-3", 1),
            "fleet-generation-3-step-1"
        );
    }
}

//! Steps that wait for a person (`rollout.approval.steps`): where a round
//! finds their approvals, and the watch that wakes the loop when one is
//! created.
//!
//! # Expected flow
//! 1. A round reaches a step that needs approval and has none recorded in
//!    the revision's history row: it lists the [`RolloutApproval`]s of the
//!    object's namespace and takes the first that names this assignment,
//!    revision and step ([`Approvals::find`]).
//! 2. None: the rollout waits (`WaitingForApproval`) and the round ends.
//!    `kubectl camelk approve` creates one; the watch wakes the loop.
//! 3. Found: the approver is recorded in history and in an Event, and the
//!    step starts. A later round of the same step (a retry after a pause)
//!    finds it in history and does not ask again.
//!
//! Approvals of another revision or step are never taken: an approval is
//! for what its approver saw.

use std::sync::Arc;

use futures::StreamExt;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::SyncError;
use crate::api::{ApprovalRecord, RolloutApproval};

/// The approvals of one namespace, as a round reads them.
pub(super) struct Approvals {
    api: Api<RolloutApproval>,
    namespace: String,
}

impl Approvals {
    pub(super) fn new(client: Client, namespace: &str) -> Approvals {
        Approvals {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
        }
    }

    /// The first approval (oldest) of `step` of `revision` of `assignment`.
    pub(super) async fn find(
        &self,
        assignment: &str,
        revision: &str,
        step: u32,
    ) -> Result<Option<ApprovalRecord>, SyncError> {
        let list =
            self.api
                .list(&Default::default())
                .await
                .map_err(|source| SyncError::Approvals {
                    namespace: self.namespace.clone(),
                    source,
                })?;
        Ok(first_approval(list.items, assignment, revision, step))
    }
}

/// The oldest of `approvals` that approves `step` of `revision` of `assignment`.
fn first_approval(
    approvals: Vec<RolloutApproval>,
    assignment: &str,
    revision: &str,
    step: u32,
) -> Option<ApprovalRecord> {
    approvals
        .into_iter()
        .filter(|a| a.approves(assignment, revision, step))
        .min_by_key(|a| a.metadata.creation_timestamp.clone().map(|t| t.0))
        .map(|a| ApprovalRecord {
            step,
            approver: a.spec.approver,
            approved_at: a
                .metadata
                .creation_timestamp
                .map(|t| t.0.to_string())
                .unwrap_or_default(),
        })
}

/// Wakes the loop whenever an approval is created in `namespace`: the
/// rollout waiting for it goes on at once rather than at the next interval.
/// Without the CRD installed the watch retries with its backoff, quietly;
/// a round that needs an approval says what is missing.
pub(super) fn watch(
    client: Client,
    namespace: &str,
    wake: Arc<Notify>,
    shutdown: CancellationToken,
) {
    let api: Api<RolloutApproval> = Api::namespaced(client, namespace);
    tokio::spawn(async move {
        let mut events = watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        loop {
            let event = tokio::select! {
                _ = shutdown.cancelled() => return,
                event = events.next() => event,
            };
            match event {
                Some(Ok(watcher::Event::Apply(_))) => wake.notify_one(),
                Some(_) => {}
                None => return,
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::RolloutApprovalSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn approval(revision: &str, step: u32, approver: &str, at: &str) -> RolloutApproval {
        let mut a = RolloutApproval::new(
            approver,
            RolloutApprovalSpec {
                assignment: "fleet".into(),
                revision: revision.into(),
                step,
                approver: approver.into(),
            },
        );
        a.metadata.creation_timestamp = Some(Time(at.parse().unwrap()));
        a
    }

    #[test]
    fn the_oldest_matching_approval_counts_and_no_other() {
        let all = vec![
            approval("new", 2, "carol", "2026-12-07T10:00:03Z"),
            approval("old", 2, "mallory", "2026-12-07T10:00:00Z"),
            approval("new", 3, "dave", "2026-12-07T10:00:00Z"),
            approval("new", 2, "alice", "2026-12-07T10:00:01Z"),
        ];
        let found = first_approval(all.clone(), "fleet", "new", 2).unwrap();
        assert_eq!(found.approver, "alice");
        assert_eq!(found.approved_at, "2026-12-07T10:00:01Z");
        assert_eq!(found.step, 2);
        assert_eq!(first_approval(all.clone(), "fleet", "new", 1), None);
        assert_eq!(first_approval(all, "other", "new", 2), None);
    }
}

//! The `OperatorAssignment` status as Flux and Argo CD users read it:
//! kstatus conditions (`Ready`, `Reconciling`, `Stalled`, plus `Suspended` and
//! `Drifted`), last applied and
//! last attempted revision, counts per operator, the rollout's position and a
//! bounded history.
//!
//! Contract: [`set_condition`] keeps `lastTransitionTime` while a condition's
//! status does not change (Kubernetes conventions); [`record_history`] keeps
//! the newest [`HISTORY_LIMIT`] entries, one per revision. [`write`] applies
//! the whole status server-side on the status subresource, as the only
//! manager of it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::api::{MigrationRecord, OperatorAssignment, OperatorAssignmentStatus};

/// Field manager of every write the sync makes.
pub(crate) const FIELD_MANAGER: &str = "camelk-reconciler";
/// Migrations kept in `status.history`.
pub(crate) const HISTORY_LIMIT: usize = 10;

pub(crate) const READY: &str = "Ready";
pub(crate) const RECONCILING: &str = "Reconciling";
pub(crate) const STALLED: &str = "Stalled";
pub(crate) const SUSPENDED: &str = "Suspended";
pub(crate) const DRIFTED: &str = "Drifted";
/// A step waits for `kubectl camelk approve` (`rollout.approval`).
pub(crate) const WAITING_FOR_APPROVAL: &str = "WaitingForApproval";

/// Sets condition `type_` on `status`, keeping its transition time when its
/// status is unchanged.
pub(crate) fn set_condition(
    status: &mut OperatorAssignmentStatus,
    type_: &str,
    value: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) {
    let value = if value { "True" } else { "False" };
    let previous = status.conditions.iter().position(|c| c.type_ == type_);
    let transition = previous
        .map(|i| &status.conditions[i])
        .filter(|c| c.status == value)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| Time(Timestamp::now()));
    let condition = Condition {
        type_: type_.to_string(),
        status: value.to_string(),
        reason: reason.to_string(),
        // The API server limits messages to 32 KiB.
        message: message.chars().take(30_000).collect(),
        last_transition_time: transition,
        observed_generation: generation,
    };
    match previous {
        Some(i) => status.conditions[i] = condition,
        None => status.conditions.push(condition),
    }
}

/// Whether condition `type_` is `True`.
pub(crate) fn is_true(status: &OperatorAssignmentStatus, type_: &str) -> bool {
    status
        .conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == "True")
}

pub(crate) fn has_condition(status: &OperatorAssignmentStatus, type_: &str) -> bool {
    status.conditions.iter().any(|c| c.type_ == type_)
}

/// Inserts or replaces the record of `record.revision`, newest first.
pub(crate) fn record_history(status: &mut OperatorAssignmentStatus, record: MigrationRecord) {
    status.history.retain(|r| r.revision != record.revision);
    status.history.insert(0, record);
    status.history.truncate(HISTORY_LIMIT);
}

/// Now, in RFC 3339.
pub(crate) fn now() -> String {
    Timestamp::now().to_string()
}

/// Time since `stamp` (RFC 3339, as [`now`] writes it); zero when there is
/// none, it does not parse, or it lies ahead of this clock.
pub(crate) fn elapsed_since(stamp: Option<&str>) -> std::time::Duration {
    stamp
        .and_then(|t| t.parse::<Timestamp>().ok())
        .and_then(|t| std::time::Duration::try_from(Timestamp::now().duration_since(t)).ok())
        .unwrap_or_default()
}

/// Applies `status` to the object `namespace/name`.
pub(crate) async fn write(
    client: &Client,
    namespace: &str,
    name: &str,
    status: &OperatorAssignmentStatus,
) -> Result<(), kube::Error> {
    let api: Api<OperatorAssignment> = Api::namespaced(client.clone(), namespace);
    let body = json!({
        "apiVersion": format!("{}/{}", crate::api::GROUP, crate::api::VERSION),
        "kind": crate::api::KIND,
        "metadata": { "name": name },
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(body),
    )
    .await
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_since_a_stamp_and_zero_without_one() {
        use std::time::Duration;
        let ago = (Timestamp::now() - Duration::from_secs(90)).to_string();
        let elapsed = elapsed_since(Some(&ago));
        assert!(elapsed >= Duration::from_secs(90) && elapsed < Duration::from_secs(100));
        assert_eq!(elapsed_since(None), Duration::ZERO);
        assert_eq!(elapsed_since(Some("yesterday")), Duration::ZERO);
        let ahead = (Timestamp::now() + Duration::from_secs(60)).to_string();
        assert_eq!(elapsed_since(Some(&ahead)), Duration::ZERO);
    }

    #[test]
    fn transition_time_moves_only_when_the_status_changes() {
        let mut s = OperatorAssignmentStatus::default();
        set_condition(&mut s, READY, false, "Progressing", "a", Some(1));
        let t0 = s.conditions[0].last_transition_time.clone();
        std::thread::sleep(std::time::Duration::from_millis(5));
        set_condition(&mut s, READY, false, "Progressing", "b", Some(2));
        assert_eq!(s.conditions[0].last_transition_time, t0);
        assert_eq!(s.conditions[0].message, "b");
        set_condition(&mut s, READY, true, "Succeeded", "c", Some(2));
        assert_ne!(s.conditions[0].last_transition_time, t0);
        assert!(is_true(&s, READY));
        assert_eq!(s.conditions.len(), 1);
    }

    #[test]
    fn history_is_bounded_and_one_per_revision() {
        let mut s = OperatorAssignmentStatus::default();
        for i in 0..15 {
            record_history(
                &mut s,
                MigrationRecord {
                    revision: format!("r{i}"),
                    ..Default::default()
                },
            );
        }
        record_history(
            &mut s,
            MigrationRecord {
                revision: "r14".into(),
                result: crate::api::MigrationResult::Succeeded,
                ..Default::default()
            },
        );
        assert_eq!(s.history.len(), HISTORY_LIMIT);
        assert_eq!(s.history[0].revision, "r14");
        assert_eq!(s.history[0].result, "Succeeded");
        assert_eq!(s.history[1].revision, "r13");
    }
}

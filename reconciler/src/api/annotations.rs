//! Annotations a user (or `kubectl camelk`) sets on the `OperatorAssignment`
//! object to steer the sync, as Flux's `reconcile.fluxcd.io/*` annotations do.

use super::OperatorAssignment;

/// Suspends the sync (`"true"`), as `flux suspend` does; removing it resumes.
pub const SUSPEND_ANNOTATION: &str = "camelk.dev/suspend";

/// Asks for a round now (`kubectl camelk sync`, as Flux's
/// `reconcile.fluxcd.io/requestedAt`); a round that ends copies its value to
/// `status.lastHandledReconcileAt`.
pub const RECONCILE_REQUEST_ANNOTATION: &str = "camelk.dev/reconcile-requested-at";

/// Whether `object` carries [`SUSPEND_ANNOTATION`]` = "true"`.
pub fn is_suspended(object: &OperatorAssignment) -> bool {
    object
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SUSPEND_ANNOTATION))
        .is_some_and(|v| v == "true")
}

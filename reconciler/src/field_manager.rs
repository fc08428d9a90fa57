//! Who a write says it is. Every patch the reconciler, its operators and
//! the plugin send names its writer in `managedFields` (`kubectl get -o yaml
//! --show-managed-fields`), so a user reading an object sees which part of
//! the system last touched it instead of `unknown`.

use kube::api::PatchParams;

/// A JSON or merge patch sent as `manager`.
///
/// Server-side applies take their manager in `PatchParams::apply`; this is
/// the same for every other kind of patch.
pub fn update_as(manager: &str) -> PatchParams {
    PatchParams {
        field_manager: Some(manager.to_string()),
        ..Default::default()
    }
}

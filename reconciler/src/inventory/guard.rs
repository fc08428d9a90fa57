//! Is the owner-keys policy in force?
//!
//! A GitOps tool that applies a resource's owner keys from Git sets them
//! back at its next apply, undoing a move. The MutatingAdmissionPolicy
//! [`POLICY`] (`examples/deploy/admission/owner-keys.yaml`, Kubernetes 1.36
//! and later) keeps the stored keys on such a tool's writes instead, so its
//! applies go on (nothing refused, no drift left) while the move stands.
//! The plan moves resources whose keys another tool applies only while the
//! policy and its binding exist ([`crate::inventory::Inventory::keys_guarded`]).
//!
//! Read with two GETs of cluster-scoped objects, and only by an inventory
//! that holds a resource whose keys another tool applies
//! ([`super::metadata_list::mark_guarded`]): elsewhere the answer changes nothing.
//! A reader that may not read them (403), or a cluster that does not serve
//! the API (404), finds no policy, and such moves stay blocked.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding,
};
use kube::{Api, Client};

/// Name of the owner-keys MutatingAdmissionPolicy and of its binding.
pub(crate) const POLICY: &str = "camelk-owner-keys";

/// Whether the owner-keys policy exists and a binding of that name binds it.
pub(crate) async fn keys_guarded(client: &Client) -> Result<bool, kube::Error> {
    let bindings: Api<MutatingAdmissionPolicyBinding> = Api::all(client.clone());
    let bound = match bindings.get_opt(POLICY).await {
        Ok(binding) => binding
            .and_then(|b| b.spec)
            .and_then(|s| s.policy_name)
            .is_some_and(|p| p == POLICY),
        Err(kube::Error::Api(s)) if matches!(s.code, 403 | 404) => false,
        Err(e) => return Err(e),
    };
    if !bound {
        return Ok(false);
    }
    let policies: Api<MutatingAdmissionPolicy> = Api::all(client.clone());
    match policies.get_opt(POLICY).await {
        Ok(policy) => Ok(policy.is_some()),
        Err(kube::Error::Api(s)) if matches!(s.code, 403 | 404) => Ok(false),
        Err(e) => Err(e),
    }
}

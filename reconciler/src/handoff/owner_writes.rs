//! The writes of owner keys: every change of an existing Camel K resource's
//! `camel.apache.org/operator.id` label or annotation is sent from here, and
//! from nowhere else (an operator names itself on the children it creates,
//! which is not a change of owner).
//!
//! # Expected flow
//! 1. A caller has read the resource and decided the write: a releasing
//!    operator (`crate::operator`) or the [`Coordinator`](super::Coordinator)
//!    flips an owner ([`flip`]); the sync assigns a first owner (`assign`),
//!    adopts a resource its annotation alone names ([`flip`] with
//!    `from == to`) or co-owns the keys another tool applies (`co_own_keys`).
//! 2. The patch is built by [`fence`] (pure) and sent once.
//! 3. The caller gets a [`FlipResult`]: flipped, refused or gone.
//!
//! # Guarantees
//! - Each write is fenced on what was read: a JSON patch whose `test` ops
//!   check the key the owner was read from (or the resourceVersion, where no
//!   key or only the annotation names it) and any guarded phase; or a
//!   server-side apply that carries the resourceVersion and is not forced.
//!   A stale write is refused by the API server; it never clobbers a newer
//!   owner.
//! - Label and annotation change together, in one write.
//! - A refused fence (409, 422) and a deleted object are results, not errors.
//!
//! # Assumptions
//! - Callers decide what to write (the plan engine, the release rules);
//!   this module decides nothing and reads nothing from the cluster. Of the
//!   handoff it uses only [`fence`] and the field manager
//!   [`FIELD_MANAGER`](super::FIELD_MANAGER); nothing here calls the
//!   coordinator, so data flows one way: coordinator → owner writes → fence.

use std::collections::BTreeMap;

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};

use super::fence::{self, FlipGuard};
use crate::camel_k::appliers::CO_OWNER;
use crate::camel_k::{CamelKind, OPERATOR_ID_KEY};
use crate::field_manager::update_as;

/// Result of one fenced flip.
#[derive(Debug)]
pub enum FlipResult {
    /// The patch was accepted; the object as the API server returned it.
    Flipped(Box<DynamicObject>),
    /// The API server refused the fence (422): the owner or guarded phase
    /// changed since the object was read. Nothing was written.
    Refused,
    /// The object no longer exists.
    Gone,
}

/// Flips a releasing operator or the coordinator has in flight at once. Each
/// is one fenced write to a different resource, so they need no order among
/// them, and a few in flight hide the round trip that a handoff (or a
/// takeover) of hundreds of resources would otherwise pay one after another.
pub const FLIPS_IN_FLIGHT: usize = 4;

/// Writes the change of owner of `object` from `from` to `to` (one fenced
/// JSON patch, [`fence::flip`]); with `from == to`, the adoption of a
/// resource its annotation alone names (or whose label names another
/// operator). Owner keys are written only here, in `assign` and in
/// `co_own_keys`.
pub async fn flip(
    client: &Client,
    kind: CamelKind,
    object: &DynamicObject,
    from: &str,
    to: &str,
    guard: &FlipGuard,
) -> Result<FlipResult, kube::Error> {
    let ns = object.metadata.namespace.as_deref().unwrap_or_default();
    let name = object.metadata.name.as_deref().unwrap_or_default();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &kind.api_resource());
    patch_owner_keys(&api, name, fence::flip(object, from, to, guard)).await
}

/// Writes the first owner of `object`, which has no owner key ([`fence::assign`]:
/// only while it is unchanged since read and, with a guard, in the phase
/// judged stable).
// Only the sync loop (feature `server`) calls this; the plugin builds without it.
#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) async fn assign(
    client: &Client,
    kind: CamelKind,
    object: &DynamicObject,
    to: &str,
    guard: &FlipGuard,
) -> Result<FlipResult, kube::Error> {
    let ns = object.metadata.namespace.as_deref().unwrap_or_default();
    let name = object.metadata.name.as_deref().unwrap_or_default();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &kind.api_resource());
    patch_owner_keys(&api, name, fence::assign(object, to, guard)).await
}

/// Makes the reconciler a co-owner of `object`'s owner keys, as they are
/// now (both, or the one it carries), by a server-side apply of just those
/// fields under
/// [`crate::camel_k::appliers::CO_OWNER`]. Another tool that applies them
/// (a GitOps tool deploying the resource from a manifest that names its
/// operator) then shares them: when it stops applying them, the API server
/// keeps them, where it would remove a field its last manager dropped. The
/// apply carries the resourceVersion read and is not forced, so it changes
/// no value: an object changed since (or keys another manager holds with
/// other values) is refused (409), and the next round tries again.
// Only the sync loop (feature `server`) calls this; the plugin builds without it.
#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) async fn co_own_keys(
    client: &Client,
    kind: CamelKind,
    object: &DynamicObject,
) -> Result<FlipResult, kube::Error> {
    let meta = &object.metadata;
    let key = |map: &Option<BTreeMap<String, String>>| {
        map.as_ref()
            .and_then(|m| m.get(OPERATOR_ID_KEY))
            .filter(|v| !v.is_empty())
            .cloned()
    };
    let (label, annotation) = (key(&meta.labels), key(&meta.annotations));
    // Only keys that agree are co-owned, as they are.
    if label.is_none() && annotation.is_none()
        || label.is_some() && annotation.is_some() && label != annotation
    {
        return Ok(FlipResult::Refused);
    }
    let ns = meta.namespace.as_deref().unwrap_or_default();
    let name = meta.name.as_deref().unwrap_or_default();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &kind.api_resource());
    let mut keys = serde_json::json!({
        "apiVersion": kind.api_version(),
        "kind": kind.kind(),
        "metadata": {
            "name": name,
            "namespace": ns,
            "resourceVersion": meta.resource_version,
        },
    });
    if let Some(label) = label {
        keys["metadata"]["labels"] = serde_json::json!({ OPERATOR_ID_KEY: label });
    }
    if let Some(annotation) = annotation {
        keys["metadata"]["annotations"] = serde_json::json!({ OPERATOR_ID_KEY: annotation });
    }
    let params = PatchParams::apply(CO_OWNER);
    match api.patch(name, &params, &Patch::Apply(keys)).await {
        Ok(obj) => Ok(FlipResult::Flipped(Box::new(obj))),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(FlipResult::Gone),
        Err(kube::Error::Api(s)) if matches!(s.code, 409 | 422) => Ok(FlipResult::Refused),
        Err(e) => Err(e),
    }
}

/// Sends one owner-key patch; a refused fence (422, or 409) and a deleted
/// object are results, not errors.
async fn patch_owner_keys(
    api: &Api<DynamicObject>,
    name: &str,
    patch: json_patch::Patch,
) -> Result<FlipResult, kube::Error> {
    match api
        .patch(
            name,
            &update_as(super::FIELD_MANAGER),
            &Patch::<()>::Json(patch),
        )
        .await
    {
        Ok(obj) => Ok(FlipResult::Flipped(Box::new(obj))),
        Err(kube::Error::Api(s)) if s.code == 422 || s.code == 409 => Ok(FlipResult::Refused),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(FlipResult::Gone),
        Err(e) => Err(e),
    }
}

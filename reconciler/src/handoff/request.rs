//! The handoff request: one Lease in the resources' namespace that names the
//! move (from, to, which resources) and is owned by every resource it moves,
//! so it is garbage-collected with them. A batch costs this one write to
//! create and one to delete, whatever its size.
//!
//! The Lease carries labels `camelk.dev/handoff-from` and
//! `camelk.dev/handoff-to`, so each operator watches, server-side filtered,
//! only the requests addressed to it; the move itself is a JSON annotation.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, OwnerReference};
use kube::api::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::api::OperatorId;
use crate::camel_k::CamelKind;

/// Label on a handoff request Lease naming the operator resources move from.
pub const FROM_LABEL: &str = "camelk.dev/handoff-from";
pub(crate) const TO_LABEL: &str = "camelk.dev/handoff-to";
pub(crate) const SPEC_ANNOTATION: &str = "camelk.dev/handoff";
/// Annotation on a handoff request Lease recording how far it got
/// (`Stalled`, ...), for `kubectl camelk` and people.
pub const STATE_ANNOTATION: &str = "camelk.dev/handoff-state";

/// Who performs the release of a resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReleaseMode {
    /// The current owner speaks the protocol and releases itself.
    Protocol,
    /// The current owner is a plain upstream Camel K operator: the
    /// coordinator releases for it, once the resource is in a stable phase.
    Upstream,
}

/// What happens when a live owner does not release within the drain timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum ForcePolicy {
    /// Report the handoff `Stalled` and wait.
    #[default]
    Never,
    /// Flip the remaining resources after the drain timeout.
    AfterDrainTimeout,
}

/// One resource of a handoff, pinned by uid so that a deleted and re-created
/// object of the same name is not moved by an old request.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct HandoffItem {
    /// The resource's kind.
    pub kind: CamelKind,
    /// The resource's name (the request's namespace is its).
    pub name: String,
    /// `metadata.uid` of the resource when the request was written.
    pub uid: String,
}

/// The move a handoff Lease requests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HandoffSpec {
    /// The operator releasing the items.
    pub from: OperatorId,
    /// The operator receiving them.
    pub to: OperatorId,
    /// Who performs the release.
    pub mode: ReleaseMode,
    /// The resources to move, all in the Lease's namespace.
    pub items: Vec<HandoffItem>,
}

/// A handoff request as stored in a Lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandoffRequest {
    /// Namespace of the Lease (and of every item).
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// The requested move.
    pub spec: HandoffSpec,
}

/// Why a Lease is not a readable handoff request.
// Requests are read by their receivers only (an operator, the sync), never
// by the plugin.
#[cfg(any(feature = "server", feature = "reference-operator"))]
#[derive(Debug, thiserror::Error)]
pub(crate) enum RequestError {
    #[error("lease {0} has no {SPEC_ANNOTATION} annotation")]
    MissingSpec(String),
    #[error("lease {name}: unreadable {SPEC_ANNOTATION} annotation: {source}")]
    BadSpec {
        name: String,
        #[source]
        source: serde_json::Error,
    },
}

impl HandoffRequest {
    /// A request for `items` (sorted, so the Lease name is deterministic and
    /// a repeated request finds the existing Lease instead of adding one).
    pub(crate) fn new(namespace: &str, mut spec: HandoffSpec) -> HandoffRequest {
        spec.items.sort();
        spec.items.dedup();
        let digest = fnv1a(spec.items.iter().map(|i| i.uid.as_str()));
        let name = format!("camelk-handoff-{}-{}-{digest:016x}", spec.from, spec.to);
        let name = if name.len() > 253 {
            format!("camelk-handoff-{digest:016x}")
        } else {
            name
        };
        HandoffRequest {
            namespace: namespace.to_string(),
            name,
            spec,
        }
    }

    /// Whether this request moves the resource `kind`/`name` with `uid`.
    pub(crate) fn covers(&self, kind: CamelKind, name: &str, uid: &str) -> bool {
        self.spec
            .items
            .iter()
            .any(|i| i.kind == kind && i.name == name && i.uid == uid)
    }

    /// The Lease that carries the request, held by `coordinator`.
    pub(crate) fn to_lease(&self, coordinator: &str) -> Lease {
        let owners = self
            .spec
            .items
            .iter()
            .map(|i| OwnerReference {
                api_version: i.kind.api_version(),
                kind: i.kind.kind().to_string(),
                name: i.name.clone(),
                uid: i.uid.clone(),
                ..Default::default()
            })
            .collect();
        Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: Some(BTreeMap::from([
                    (FROM_LABEL.to_string(), self.spec.from.to_string()),
                    (TO_LABEL.to_string(), self.spec.to.to_string()),
                ])),
                annotations: Some(BTreeMap::from([(
                    SPEC_ANNOTATION.to_string(),
                    serde_json::to_string(&self.spec).expect("serializable spec"),
                )])),
                owner_references: Some(owners),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(coordinator.to_string()),
                acquire_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
                ..Default::default()
            }),
        }
    }

    #[cfg(any(feature = "server", feature = "reference-operator"))]
    pub(crate) fn from_lease(lease: &Lease) -> Result<HandoffRequest, RequestError> {
        let name = lease.metadata.name.clone().unwrap_or_default();
        let raw = lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SPEC_ANNOTATION))
            .ok_or_else(|| RequestError::MissingSpec(name.clone()))?;
        let spec = serde_json::from_str(raw).map_err(|source| RequestError::BadSpec {
            name: name.clone(),
            source,
        })?;
        Ok(HandoffRequest {
            namespace: lease.metadata.namespace.clone().unwrap_or_default(),
            name,
            spec,
        })
    }
}

/// 64-bit FNV-1a over the parts, separated by NUL: stable across runs and builds.
fn fnv1a<'a>(parts: impl Iterator<Item = &'a str>) -> u64 {
    let mut hash: u64 = 0xcbf29ce484222325;
    for part in parts {
        for b in part.bytes().chain([0]) {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x100000001b3);
        }
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(uids: &[&str]) -> HandoffSpec {
        HandoffSpec {
            from: OperatorId::new("operator-1").unwrap(),
            to: OperatorId::new("operator-2").unwrap(),
            mode: ReleaseMode::Protocol,
            items: uids
                .iter()
                .map(|u| HandoffItem {
                    kind: CamelKind::Integration,
                    name: format!("it-{u}"),
                    uid: u.to_string(),
                })
                .collect(),
        }
    }

    #[test]
    fn name_is_deterministic_and_order_free() {
        let a = HandoffRequest::new("shop", spec(&["a", "b"]));
        let b = HandoffRequest::new("shop", spec(&["b", "a"]));
        assert_eq!(a.name, b.name);
        assert_ne!(a.name, HandoffRequest::new("shop", spec(&["a"])).name);
        assert!(a.name.starts_with("camelk-handoff-operator-1-operator-2-"));
    }

    #[cfg(any(feature = "server", feature = "reference-operator"))]
    #[test]
    fn lease_round_trips_and_owns_every_item() {
        let req = HandoffRequest::new("shop", spec(&["a", "b"]));
        let lease = req.to_lease("kubectl-camelk");
        assert_eq!(lease.metadata.owner_references.as_ref().unwrap().len(), 2);
        assert_eq!(
            lease.metadata.labels.as_ref().unwrap()[FROM_LABEL],
            "operator-1"
        );
        let back = HandoffRequest::from_lease(&lease).unwrap();
        assert_eq!(back, req);
        assert!(back.covers(CamelKind::Integration, "it-a", "a"));
        assert!(!back.covers(CamelKind::Integration, "it-a", "other-uid"));
    }
}

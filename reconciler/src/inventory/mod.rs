//! Actual state: the Camel K resources that exist, with their owner keys,
//! labels and phase, read from an inventory file ([`file`](mod@file)) or the live
//! cluster ([`cluster`]); [`watch`] keeps what watches deliver (the caches
//! of the operator loops, the handoff's progress and the sync).
//!
//! Contract: an [`Inventory`] is plain data; readers fill it, the plan engine
//! only reads it. A resource's actual owner is the value of the
//! `camel.apache.org/operator.id` label and annotation (`Resource::owner`).

pub mod cluster;
pub mod file;
pub mod watch;

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde::{Deserialize, Serialize};

use crate::api::{Labels, OperatorId};
use crate::camel_k::release::BlockReason;
use crate::camel_k::{CamelKind, OPERATOR_ID_KEY, OwnerKey, owner_from_keys};

/// Identity of one Camel K resource. Orders by kind, namespace, then name:
/// the order of every list the plan prints.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ResourceRef {
    /// The resource's kind.
    pub kind: CamelKind,
    /// The resource's namespace.
    pub namespace: String,
    /// The resource's name.
    pub name: String,
}

impl fmt::Display for ResourceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// One resource as it is now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resource {
    /// Which resource it is.
    pub id: ResourceRef,
    /// Its `metadata.labels`.
    pub labels: Labels,
    /// Value of the owner annotation (the key upstream operators read).
    pub owner_annotation: Option<String>,
    /// `status.phase`; `None` when unknown (a metadata-only read).
    pub phase: Option<String>,
    /// Why the owner must not release it now, when a live read of the whole
    /// object (and its kit's Builds) looked; `None` when nobody looked.
    pub in_flight: Option<BlockReason>,
    /// The Pipe (or KameletBinding) that created this Integration, from its
    /// controller owner reference. Upstream copies the Pipe's annotations
    /// onto it, so the Integration's owner follows its Pipe's.
    pub created_by: Option<ResourceRef>,
}

/// The Pipe or KameletBinding among `owners` that controls an Integration in
/// `namespace`; `None` for other kinds or owners.
fn created_by(kind: CamelKind, namespace: &str, owners: &[OwnerReference]) -> Option<ResourceRef> {
    if kind != CamelKind::Integration {
        return None;
    }
    owners.iter().find_map(|o| {
        let group = o.api_version.split('/').next().unwrap_or_default();
        let owner_kind = [CamelKind::Pipe, CamelKind::KameletBinding]
            .into_iter()
            .find(|k| k.kind() == o.kind)?;
        (o.controller == Some(true) && group == crate::camel_k::GROUP).then(|| ResourceRef {
            kind: owner_kind,
            namespace: namespace.to_string(),
            name: o.name.clone(),
        })
    })
}

/// Who owns a resource now, according to its owner keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// Neither the label nor the annotation is set.
    Nobody,
    /// Label and annotation agree, or only one of them is set.
    Operator(OperatorId),
    /// The two keys disagree, or the value is not a valid id.
    Conflict(String),
}

impl Resource {
    /// The resource an object's metadata describes (its owner annotation
    /// taken apart from the other annotations, which are not kept).
    pub(crate) fn from_metadata(
        kind: CamelKind,
        meta: ObjectMeta,
        phase: Option<String>,
    ) -> Resource {
        let mut annotations = meta.annotations.unwrap_or_default();
        let namespace = meta.namespace.unwrap_or_default();
        let created_by = created_by(
            kind,
            &namespace,
            meta.owner_references.as_deref().unwrap_or_default(),
        );
        Resource {
            id: ResourceRef {
                kind,
                namespace,
                name: meta.name.unwrap_or_default(),
            },
            labels: meta.labels.unwrap_or_default().into_iter().collect(),
            owner_annotation: annotations.remove(OPERATOR_ID_KEY),
            phase,
            in_flight: None,
            created_by,
        }
    }

    /// Its owner by the one rule ([`crate::camel_k::owner_of`]): the label,
    /// else the annotation. Keys that name two operators are a conflict the
    /// sync sets right (the label's operator holds it meanwhile).
    pub(crate) fn owner(&self) -> Owner {
        let label = self.labels.get(OPERATOR_ID_KEY).map(String::as_str);
        let Some(read) = owner_from_keys(label, self.owner_annotation.as_deref()) else {
            return Owner::Nobody;
        };
        if read.keys_disagree {
            return Owner::Conflict(format!(
                "its {OPERATOR_ID_KEY} label says `{}` but its annotation says `{}`",
                read.id,
                self.owner_annotation.as_deref().unwrap_or_default()
            ));
        }
        match OperatorId::new(read.id) {
            Ok(id) => Owner::Operator(id),
            Err(e) => Owner::Conflict(e.to_string()),
        }
    }

    /// Whether its owner is named by the annotation alone (as `kamel`
    /// creates resources): the label is still to be added.
    pub(crate) fn owned_by_annotation_only(&self) -> bool {
        let label = self.labels.get(OPERATOR_ID_KEY).map(String::as_str);
        owner_from_keys(label, self.owner_annotation.as_deref())
            .is_some_and(|o| o.key == OwnerKey::Annotation)
    }
}

/// The resources of one read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inventory {
    /// Every resource read, in no particular order.
    pub resources: Vec<Resource>,
}

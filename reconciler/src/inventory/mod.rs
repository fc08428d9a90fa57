//! Actual state: the Camel K resources that exist, with their owner keys,
//! labels and phase, read from an inventory file (`file`) or the live
//! cluster (`metadata_list`); [`watch`] keeps what watches deliver (the caches
//! of the operator loops, the handoff's progress and the sync).
//!
//! Contract: an [`Inventory`] is plain data; readers fill it, the plan engine
//! only reads it. A resource's actual owner is the value of the
//! `camel.apache.org/operator.id` label and annotation (`Resource::owner`).

pub(crate) mod file;
pub(crate) mod guard;
pub(crate) mod metadata_list;
pub mod watch;

pub use file::{InventoryFileError, parse as parse_file, read as read_file};
pub use metadata_list::{ClusterReadError, LiveInventory, fill_phases, read, read_in};

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde::{Deserialize, Serialize};

use crate::api::{Labels, OperatorId};
use crate::camel_k::appliers::{KeyMap, keys_co_owned, owner_key_applier};
use crate::camel_k::release::BlockReason;
use crate::camel_k::{CamelKind, OPERATOR_ID_KEY, OwnerKey, ReadOwner, owner_from_keys};

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
    /// Who else writes its owner keys, from its `managedFields`.
    pub key_managers: KeyManagers,
}

#[cfg(test)]
impl Resource {
    /// An Integration `namespace/name` whose owner keys (label and
    /// annotation) both name `owner`, or that has none; for unit tests.
    pub(crate) fn integration(namespace: &str, name: &str, owner: Option<&str>) -> Resource {
        Resource {
            id: ResourceRef {
                kind: crate::camel_k::CamelKind::Integration,
                namespace: namespace.to_string(),
                name: name.to_string(),
            },
            labels: owner
                .map(|o| {
                    [(crate::camel_k::OPERATOR_ID_KEY.to_string(), o.to_string())]
                        .into_iter()
                        .collect()
                })
                .unwrap_or_default(),
            owner_annotation: owner.map(str::to_string),
            phase: None,
            in_flight: None,
            created_by: None,
            key_managers: KeyManagers::default(),
        }
    }
}

/// Who, besides this project, manages a resource's owner keys
/// (`crate::camel_k::appliers`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyManagers {
    /// The tool that applies the owner label from its manifests, if one
    /// does: its next apply would set the label back.
    pub label_applier: Option<String>,
    /// The tool that applies the owner annotation, if one does.
    pub annotation_applier: Option<String>,
    /// The reconciler co-owns both keys by server-side apply, so they stay
    /// when the applier stops applying them.
    pub co_owned: bool,
}

impl KeyManagers {
    /// The key managers `meta`'s `managedFields` name.
    pub fn of(meta: &ObjectMeta) -> KeyManagers {
        KeyManagers {
            label_applier: owner_key_applier(meta, KeyMap::Label),
            annotation_applier: owner_key_applier(meta, KeyMap::Annotation),
            co_owned: keys_co_owned(meta),
        }
    }

    /// The tool that applies either owner key, if one does.
    pub fn applier(&self) -> Option<&str> {
        self.annotation_applier
            .as_deref()
            .or(self.label_applier.as_deref())
    }
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
    /// The operator the keys name (the annotation's when they disagree).
    Operator(OperatorId),
    /// The value is not a valid id.
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
        let key_managers = KeyManagers::of(&meta);
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
            key_managers,
        }
    }

    /// Its owner keys as read by the one rule ([`owner_from_keys`]).
    pub(crate) fn read_owner(&self) -> Option<ReadOwner> {
        let label = self.labels.get(OPERATOR_ID_KEY).map(String::as_str);
        owner_from_keys(label, self.owner_annotation.as_deref())
    }

    /// Its owner by the one rule ([`crate::camel_k::owner_of`]): the label,
    /// else the annotation, and the annotation (which upstream obeys) when
    /// the two disagree. An owner that is not a valid id is a conflict.
    pub(crate) fn owner(&self) -> Owner {
        let Some(read) = self.read_owner() else {
            return Owner::Nobody;
        };
        match OperatorId::new(read.id) {
            Ok(id) => Owner::Operator(id),
            Err(e) => Owner::Conflict(e.to_string()),
        }
    }

    /// Whether its label is still to be set to the owner its annotation
    /// names: missing (as `kamel` creates resources) or naming another
    /// operator.
    pub(crate) fn label_to_set(&self) -> bool {
        self.read_owner()
            .is_some_and(|o| o.key == OwnerKey::Annotation)
    }

    /// Whether another tool applies one of its owner keys and the reconciler
    /// does not co-own them yet. Only keys that agree are co-owned, as they
    /// are (the annotation alone, as `kamel` writes it, too).
    // Only the sync loop (feature `server`) calls this; the plugin builds without it.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn needs_co_owner(&self) -> bool {
        self.key_managers.applier().is_some()
            && !self.key_managers.co_owned
            && self.read_owner().is_some_and(|o| !o.keys_disagree())
    }

    /// The label's value when it disagrees with the annotation.
    pub fn disagreeing_label(&self) -> Option<String> {
        self.read_owner().and_then(|o| o.disagreeing_label)
    }
}

/// The resources of one read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inventory {
    /// Every resource read, in no particular order.
    pub resources: Vec<Resource>,
    /// The owner-keys policy is in force: an applier's write cannot change
    /// an owner key (it keeps the stored value), so a resource whose keys
    /// another tool applies may move ([`KeyManagers::applier`]).
    pub keys_guarded: bool,
}

impl From<Vec<Resource>> for Inventory {
    fn from(resources: Vec<Resource>) -> Inventory {
        Inventory {
            resources,
            keys_guarded: false,
        }
    }
}

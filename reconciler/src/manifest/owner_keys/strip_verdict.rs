//! Whether removing a resource's owner keys from its manifest moves it:
//! the verdict of `kubectl camelk strip-owner-keys` for each resource.
//!
//! Once the keys leave the manifest, the tool that applied them stops
//! applying them. What the API server then does decides the verdict:
//! - a server-side applier (Flux's kustomize-controller, `kubectl apply
//!   --server-side`, Argo CD with `ServerSideApply=true`) drops its hold on
//!   the fields, and the API server removes a field only once no manager
//!   holds it: the keys stay when the reconciler co-owns them (field
//!   manager [`CO_OWNER`](crate::camel_k::appliers::CO_OWNER)), and go otherwise;
//! - a client-side applier (`kubectl apply`, Argo CD's default sync, Helm's
//!   three-way merge) sends a patch that deletes a key its last apply set
//!   and its manifest no longer names, whoever else holds it: the keys go,
//!   co-owned or not;
//! - with the owner-keys policy in force ([`crate::inventory::guard`]) the
//!   API server sets the stored keys back on such a tool's write: they stay;
//! - keys that no tool applies are not touched by any apply: they stay.
//!
//! A resource whose keys go loses its owner: no upstream operator
//! reconciles it until an owner is written again, and one that handles
//! resources with no owner may take it. [`verdict`] says which case holds;
//! [`read`] reads what it needs with one metadata GET per resource (its
//! `managedFields` tell the appliers apart), and the policy with two GETs.

use std::collections::BTreeMap;
use std::fmt;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};
use kube::Client;
use kube::api::{Api, DynamicObject};

use crate::camel_k::appliers::holds_owner_key;
use crate::camel_k::owner_of_meta;
use crate::inventory::metadata_list::{ClusterReadError, guarded};
use crate::inventory::{KeyManagers, ResourceRef};

/// What the cluster says about one resource's owner keys.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveKeys {
    /// Its owner by the one rule ([`crate::camel_k::owner_of`]), if any.
    pub owner: Option<String>,
    /// The tool that applies either key from its manifests, if one does.
    pub applied_by: Option<String>,
    /// The reconciler co-owns every owner key it carries
    /// ([`CO_OWNER`](crate::camel_k::appliers::CO_OWNER)).
    pub co_owned: bool,
    /// A tool applies a key client-side (a patch, which deletes what its
    /// manifest stops naming).
    pub client_side: bool,
}

impl LiveKeys {
    /// What `meta` (with its `managedFields`) says.
    pub fn of(meta: &ObjectMeta) -> LiveKeys {
        let managers = KeyManagers::of(meta);
        let client_side = [&managers.label_applier, &managers.annotation_applier]
            .into_iter()
            .flatten()
            .any(|tool| applies_client_side(meta, tool));
        LiveKeys {
            owner: owner_of_meta(meta).map(|o| o.id),
            applied_by: managers.applier().map(str::to_string),
            co_owned: managers.co_owned,
            client_side,
        }
    }
}

/// Whether `tool` applies an owner key of `meta` client-side: an `Update`
/// entry of its `managedFields` holds one, or none of its entries does (it
/// was found from kubectl's last-applied configuration,
/// [`crate::camel_k::appliers::LAST_APPLIED`]). An `Apply` entry
/// holding a key is server-side.
fn applies_client_side(meta: &ObjectMeta, tool: &str) -> bool {
    let holding: Vec<&ManagedFieldsEntry> = meta
        .managed_fields
        .iter()
        .flatten()
        .filter(|e| e.manager.as_deref() == Some(tool) && holds_owner_key(e))
        .collect();
    holding.is_empty()
        || holding
            .iter()
            .any(|e| e.operation.as_deref() == Some("Update"))
}

/// Why a resource would lose its owner.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase", tag = "because")]
pub enum Loss {
    /// A server-side applier holds the keys alone: they go with its hold.
    NotCoOwned,
    /// A client-side applier deletes them, co-owned or not.
    ClientSide {
        /// The tool.
        tool: String,
    },
}

/// What removing the keys from a resource's manifest does to it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase", tag = "verdict")]
pub enum Verdict {
    /// Its keys stay: it keeps its owner.
    Stays {
        /// The owner it keeps.
        owner: String,
    },
    /// Its keys go at the tool's next apply.
    LosesOwner {
        /// Why.
        #[serde(flatten)]
        loss: Loss,
    },
    /// The resource does not exist in the cluster (yet): nothing to lose.
    NotInCluster,
    /// It has no owner keys in the cluster: nothing to lose.
    Unowned,
    /// The cluster was not read.
    NotChecked,
}

impl Verdict {
    /// Whether it would lose its owner (what `--force` overrides).
    pub fn loses_owner(&self) -> bool {
        matches!(self, Verdict::LosesOwner { .. })
    }
}

/// The verdict's words, stable for scripts: `stays with OWNER`, `would
/// lose its owner: ...`, `not in the cluster`, `has no owner in the
/// cluster`, `not checked`.
impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Stays { owner } => write!(f, "stays with {owner}"),
            Verdict::LosesOwner {
                loss: Loss::NotCoOwned,
            } => f.write_str(
                "would lose its owner: not co-owned yet (the reconciler co-owns keys a tool \
                 applies within a round; run again after reconciler sync ran)",
            ),
            Verdict::LosesOwner {
                loss: Loss::ClientSide { tool },
            } => write!(
                f,
                "would lose its owner: {tool} applies its keys client-side, which deletes a key \
                 its manifest drops even when co-owned (make it apply server-side, or install \
                 the owner-keys policy, first)"
            ),
            Verdict::NotInCluster => f.write_str("not in the cluster"),
            Verdict::Unowned => f.write_str("has no owner in the cluster"),
            Verdict::NotChecked => f.write_str("not checked"),
        }
    }
}

/// The verdict for a resource that `live` describes (`None`: not in the
/// cluster), `keys_guarded` when the owner-keys policy is in force.
pub(crate) fn verdict(live: Option<&LiveKeys>, keys_guarded: bool) -> Verdict {
    let Some(live) = live else {
        return Verdict::NotInCluster;
    };
    let Some(owner) = live.owner.clone() else {
        return Verdict::Unowned;
    };
    match &live.applied_by {
        Some(_) if keys_guarded => Verdict::Stays { owner },
        Some(tool) if live.client_side => Verdict::LosesOwner {
            loss: Loss::ClientSide { tool: tool.clone() },
        },
        Some(_) if !live.co_owned => Verdict::LosesOwner {
            loss: Loss::NotCoOwned,
        },
        _ => Verdict::Stays { owner },
    }
}

/// The owner keys of some resources, as the cluster has them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveOwners {
    /// Each resource asked for: `None` when it does not exist.
    pub resources: BTreeMap<ResourceRef, Option<LiveKeys>>,
    /// The owner-keys policy is in force.
    pub keys_guarded: bool,
}

impl LiveOwners {
    /// The verdict for `id` (`verdict`); not checked when it was not asked for.
    pub fn verdict(&self, id: &ResourceRef) -> Verdict {
        match self.resources.get(id) {
            Some(live) => verdict(live.as_ref(), self.keys_guarded),
            None => Verdict::NotChecked,
        }
    }
}

/// Metadata GETs in flight at once.
const CONCURRENT_GETS: usize = 16;

/// Reads the owner keys of `ids` (one metadata GET each) and whether the
/// owner-keys policy is in force. A resource that does not exist, or whose
/// kind is not served, is `None`.
pub async fn read(client: &Client, ids: &[ResourceRef]) -> Result<LiveOwners, ClusterReadError> {
    let keys_guarded = guarded(client).await?;
    let resources = futures::stream::iter(ids.iter().cloned())
        .map(|id| async move {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), &id.namespace, &id.kind.api_resource());
            match api.get_metadata_opt(&id.name).await {
                Ok(found) => Ok((id, found.map(|object| LiveKeys::of(&object.metadata)))),
                Err(source) => Err(ClusterReadError::Get {
                    resource: id,
                    source,
                }),
            }
        })
        .buffered(CONCURRENT_GETS)
        .try_collect()
        .await?;
    Ok(LiveOwners {
        resources,
        keys_guarded,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::camel_k::OPERATOR_ID_KEY;
    use crate::camel_k::appliers::CO_OWNER;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1;
    use serde_json::json;

    fn entry(manager: &str, operation: &str, maps: &[&str]) -> ManagedFieldsEntry {
        let mut metadata = serde_json::Map::new();
        for map in maps {
            metadata.insert(
                format!("f:{map}"),
                json!({ format!("f:{OPERATOR_ID_KEY}"): {} }),
            );
        }
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some(operation.into()),
            fields_v1: Some(FieldsV1(json!({ "f:metadata": metadata }))),
            ..Default::default()
        }
    }

    fn meta(entries: Vec<ManagedFieldsEntry>) -> ObjectMeta {
        let keys = [(OPERATOR_ID_KEY.to_string(), "operator-1".to_string())];
        ObjectMeta {
            labels: Some(keys.clone().into()),
            annotations: Some(keys.into()),
            managed_fields: Some(entries),
            ..Default::default()
        }
    }

    fn said(meta: &ObjectMeta, guarded: bool) -> String {
        verdict(Some(&LiveKeys::of(meta)), guarded).to_string()
    }

    #[test]
    fn co_owned_keys_of_a_server_side_applier_stay() {
        let flux = entry("kustomize-controller", "Apply", &["annotations"]);
        let co_owner = entry(CO_OWNER, "Apply", &["labels", "annotations"]);
        let live = meta(vec![flux.clone(), co_owner]);
        assert_eq!(
            LiveKeys::of(&live),
            LiveKeys {
                owner: Some("operator-1".into()),
                applied_by: Some("kustomize-controller".into()),
                co_owned: true,
                client_side: false,
            }
        );
        assert_eq!(said(&live, false), "stays with operator-1");

        let alone = meta(vec![flux]);
        assert_eq!(
            said(&alone, false),
            "would lose its owner: not co-owned yet (the reconciler co-owns keys a tool \
             applies within a round; run again after reconciler sync ran)"
        );
        assert!(verdict(Some(&LiveKeys::of(&alone)), false).loses_owner());
        // The owner-keys policy sets them back on the tool's write.
        assert_eq!(said(&alone, true), "stays with operator-1");
    }

    #[test]
    fn a_client_side_applier_deletes_keys_even_when_co_owned() {
        let argo = entry("argocd-controller", "Update", &["labels", "annotations"]);
        let co_owner = entry(CO_OWNER, "Apply", &["labels", "annotations"]);
        let live = meta(vec![argo, co_owner]);
        assert!(LiveKeys::of(&live).client_side);
        assert!(
            said(&live, false).starts_with(
                "would lose its owner: argocd-controller applies its keys client-side"
            )
        );
        assert_eq!(said(&live, true), "stays with operator-1");
    }

    #[test]
    fn keys_no_tool_applies_stay_and_absent_resources_lose_nothing() {
        let ours = meta(vec![entry("camelk-handoff", "Update", &["labels"])]);
        assert_eq!(said(&ours, false), "stays with operator-1");
        assert_eq!(verdict(None, false), Verdict::NotInCluster);
        let unowned = LiveKeys::default();
        assert_eq!(verdict(Some(&unowned), false), Verdict::Unowned);
        assert_eq!(
            serde_json::to_value(verdict(Some(&LiveKeys::of(&ours)), false)).unwrap(),
            json!({ "verdict": "stays", "owner": "operator-1" })
        );
        assert_eq!(
            serde_json::to_value(Verdict::LosesOwner {
                loss: Loss::NotCoOwned
            })
            .unwrap(),
            json!({ "verdict": "losesOwner", "because": "notCoOwned" })
        );
    }
}

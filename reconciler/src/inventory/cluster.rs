//! Live actual state, read from the cluster with metadata-only lists.
//!
//! Contract:
//! - [`read`] lists each Camel K kind in scope with `list_metadata` (labels and
//!   annotations only, never specs), in one namespace or all; a kind whose CRD
//!   is not installed is skipped and reported in [`LiveInventory::missing_kinds`].
//! - Phases are not in metadata. [`fill_phases`] reads the full object of
//!   only the resources named (the plan's would-be moves), so traffic grows
//!   with the change, not with the cluster.

use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};

use super::{Inventory, Resource, ResourceRef};
use crate::camel_k::CamelKind;

/// Why the cluster could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ClusterReadError {
    #[error("listing {kind} resources: {source}")]
    List {
        kind: CamelKind,
        #[source]
        source: kube::Error,
    },
    #[error("reading {resource}: {source}")]
    Get {
        resource: ResourceRef,
        #[source]
        source: kube::Error,
    },
}

/// An inventory read from the cluster.
pub struct LiveInventory {
    pub inventory: Inventory,
    /// Kinds whose CustomResourceDefinition is not installed.
    pub missing_kinds: Vec<CamelKind>,
}

fn api(client: &Client, kind: CamelKind, namespace: Option<&str>) -> Api<DynamicObject> {
    let resource = kind.api_resource();
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

/// Objects per list page: bounds what one response holds in memory.
const PAGE: u32 = 500;

/// Lists `kinds` in `namespace` (all namespaces when `None`).
/// Lists are paged ([`PAGE`] objects per response).
pub async fn read(
    client: &Client,
    kinds: &[CamelKind],
    namespace: Option<&str>,
) -> Result<LiveInventory, ClusterReadError> {
    let mut resources = Vec::new();
    let mut missing_kinds = Vec::new();
    for &kind in kinds {
        let api = api(client, kind, namespace);
        let mut params = ListParams::default().limit(PAGE);
        loop {
            let page = match api.list_metadata(&params).await {
                Ok(page) => page,
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    missing_kinds.push(kind);
                    break;
                }
                Err(source) => return Err(ClusterReadError::List { kind, source }),
            };
            resources.extend(
                page.items
                    .into_iter()
                    .map(|item| Resource::from_metadata(kind, item.metadata, None)),
            );
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
    }
    Ok(LiveInventory {
        inventory: Inventory { resources },
        missing_kinds,
    })
}

/// Reads `status.phase` of each resource in `wanted` into `inventory`.
pub async fn fill_phases(
    client: &Client,
    inventory: &mut Inventory,
    wanted: &[ResourceRef],
) -> Result<(), ClusterReadError> {
    let wanted: std::collections::HashSet<&ResourceRef> = wanted.iter().collect();
    for resource in inventory
        .resources
        .iter_mut()
        .filter(|r| wanted.contains(&r.id))
    {
        let id = &resource.id;
        let object = match api(client, id.kind, Some(&id.namespace))
            .get_opt(&id.name)
            .await
        {
            Ok(object) => object,
            Err(source) => {
                return Err(ClusterReadError::Get {
                    resource: id.clone(),
                    source,
                });
            }
        };
        resource.phase = object.and_then(|o| {
            o.data
                .get("status")?
                .get("phase")?
                .as_str()
                .map(str::to_string)
        });
    }
    Ok(())
}

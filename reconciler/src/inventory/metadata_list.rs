//! Live actual state, read from the cluster with metadata-only lists.
//!
//! Contract:
//! - [`read`] lists each Camel K kind in scope with `list_metadata` (labels and
//!   annotations only, never specs), in one namespace or all; a kind whose CRD
//!   is not installed is skipped and reported in [`LiveInventory::missing_kinds`].
//! - Phases are not in metadata. [`fill_phases`] reads the full object of
//!   only the resources named (the plan's would-be moves), so traffic grows
//!   with the change, not with the cluster. It judges each one with the rule
//!   an owner applies before it releases (`owner_may_release`), so an
//!   Integration whose kit is still being built shows as blocked; the Builds
//!   are listed once per namespace that has such an Integration.

use std::collections::{HashMap, HashSet};

use futures::{StreamExt, TryStreamExt};
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};

use super::{Inventory, Resource, ResourceRef};
use crate::camel_k::CamelKind;
use crate::camel_k::release::owner_may_release;
use crate::camel_k::status::{kit_name, phase};

/// Why the cluster could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ClusterReadError {
    /// Listing a kind failed.
    #[error("listing {kind} resources: {source}")]
    List {
        /// The kind being listed.
        kind: CamelKind,
        /// The API server's error.
        #[source]
        source: kube::Error,
    },
    /// Reading whether the owner-keys policy is in force failed.
    #[error("reading the owner-keys policy {}: {source}", super::guard::POLICY)]
    Guard {
        /// The API server's error.
        #[source]
        source: kube::Error,
    },
    /// Reading one resource failed.
    #[error("reading {resource}: {source}")]
    Get {
        /// The resource being read.
        resource: ResourceRef,
        /// The API server's error.
        #[source]
        source: kube::Error,
    },
}

/// An inventory read from the cluster.
pub struct LiveInventory {
    /// The resources read.
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

/// Lists `kinds` in `namespace` (all namespaces when `None`), and whether
/// the owner-keys policy is in force (`super::guard`).
/// Lists are paged (`PAGE` objects per response).
pub async fn read(
    client: &Client,
    kinds: &[CamelKind],
    namespace: Option<&str>,
) -> Result<LiveInventory, ClusterReadError> {
    let mut live = list(client, kinds, namespace).await?;
    mark_guarded(client, &mut live.inventory).await?;
    Ok(live)
}

/// Sets [`Inventory::keys_guarded`]: whether the owner-keys policy is in
/// force ([`super::guard::keys_guarded`]). It only matters for resources
/// whose owner keys another tool applies, so the policy is read only when
/// the inventory holds one: a cluster where no tool applies owner keys pays
/// no request for it. Also for an inventory read from a watch cache.
pub(crate) async fn mark_guarded(
    client: &Client,
    inventory: &mut Inventory,
) -> Result<(), ClusterReadError> {
    let applied = inventory
        .resources
        .iter()
        .any(|r| r.key_managers.applier().is_some());
    inventory.keys_guarded = applied && guarded(client).await?;
    Ok(())
}

/// Whether the owner-keys policy is in force ([`super::guard::keys_guarded`]).
pub(crate) async fn guarded(client: &Client) -> Result<bool, ClusterReadError> {
    super::guard::keys_guarded(client)
        .await
        .map_err(|source| ClusterReadError::Guard { source })
}

async fn list(
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
        inventory: Inventory::from(resources),
        missing_kinds,
    })
}

/// Lists `kinds` in each of `namespaces`, or in every namespace when `None`.
/// Listing namespace by namespace is what a user (or a reconciler) allowed
/// into a few namespaces only can do.
pub async fn read_in(
    client: &Client,
    kinds: &[CamelKind],
    namespaces: Option<&[String]>,
) -> Result<LiveInventory, ClusterReadError> {
    let Some(namespaces) = namespaces else {
        return read(client, kinds, None).await;
    };
    let mut all = LiveInventory {
        inventory: Inventory::default(),
        missing_kinds: Vec::new(),
    };
    for namespace in namespaces {
        let part = list(client, kinds, Some(namespace)).await?;
        all.inventory.resources.extend(part.inventory.resources);
        for kind in part.missing_kinds {
            if !all.missing_kinds.contains(&kind) {
                all.missing_kinds.push(kind);
            }
        }
    }
    mark_guarded(client, &mut all.inventory).await?;
    Ok(all)
}

/// GETs in flight at once in [`fill_phases`]: a plan with thousands of moves
/// then waits for a few round trips per batch, not one per move.
const CONCURRENT_GETS: usize = 16;

/// Reads `status.phase` of each resource in `wanted` into `inventory`, and
/// whether its owner may release it now (`in_flight`).
pub async fn fill_phases(
    client: &Client,
    inventory: &mut Inventory,
    wanted: &[ResourceRef],
) -> Result<(), ClusterReadError> {
    let wanted: HashSet<&ResourceRef> = wanted.iter().collect();
    let targets: Vec<(usize, ResourceRef)> = inventory
        .resources
        .iter()
        .enumerate()
        .filter(|(_, r)| wanted.contains(&r.id))
        .map(|(index, r)| (index, r.id.clone()))
        .collect();
    // In order, and each object dropped once judged: memory stays bounded by
    // the GETs in flight, not the number of moves.
    // Owned items: a closure over references would make the future not
    // `Send` (an HTTP handler, the plan endpoint, awaits it).
    let mut objects = futures::stream::iter(targets)
        .map(|(index, id)| async move {
            api(client, id.kind, Some(&id.namespace))
                .get_opt(&id.name)
                .await
                .map(|object| (index, object))
                .map_err(|source| ClusterReadError::Get {
                    resource: id,
                    source,
                })
        })
        .buffered(CONCURRENT_GETS);
    let mut builds: HashMap<String, Vec<DynamicObject>> = HashMap::new();
    while let Some((index, object)) = objects.try_next().await? {
        let resource = &mut inventory.resources[index];
        let id = &resource.id;
        let Some(object) = object else {
            resource.phase = None;
            resource.in_flight = None;
            continue;
        };
        if id.kind == CamelKind::Integration
            && kit_name(&object).is_some()
            && !builds.contains_key(&id.namespace)
        {
            let listed = list_builds(client, &id.namespace).await?;
            builds.insert(id.namespace.clone(), listed);
        }
        let in_namespace: Vec<&DynamicObject> = builds
            .get(&id.namespace)
            .map(|b| b.iter().collect())
            .unwrap_or_default();
        resource.phase = phase(&object).map(str::to_string);
        resource.in_flight = owner_may_release(id.kind, &object, &in_namespace);
    }
    Ok(())
}

/// The Builds of `namespace`; none when the Build CRD is not installed or
/// the caller may not list Builds (the plan then judges by phase alone, and
/// the handoff still checks the Builds before anything is released).
async fn list_builds(
    client: &Client,
    namespace: &str,
) -> Result<Vec<DynamicObject>, ClusterReadError> {
    let kind = CamelKind::Build;
    let api = api(client, kind, Some(namespace));
    let mut params = ListParams::default().limit(PAGE);
    let mut builds = Vec::new();
    loop {
        let page = match api.list(&params).await {
            Ok(page) => page,
            Err(kube::Error::Api(status)) if matches!(status.code, 403 | 404) => {
                return Ok(Vec::new());
            }
            Err(source) => return Err(ClusterReadError::List { kind, source }),
        };
        builds.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(builds),
        }
    }
}

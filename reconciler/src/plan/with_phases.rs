//! The plan of live resources: the one place the plan engine's input needs a
//! read beyond owner keys. Phases are not in metadata, so they are read for
//! the would-be moves only and the plan made again with them (a move whose
//! owner is mid-work is blocked). `kubectl camelk plan` and the reconciler's
//! plan endpoint both plan through here, so they agree.

use kube::Client;

use super::{Actual, Plan, plan};
use crate::api::OperatorAssignmentSpec;
use crate::inventory::Inventory;
use crate::inventory::metadata_list::{ClusterReadError, fill_phases};

/// Plans `desired` against `inventory` (owner keys as listed), reading the
/// phases of the resources that would move.
pub async fn plan_reading_phases(
    client: &Client,
    desired: &OperatorAssignmentSpec,
    actual: Actual<'_>,
    mut inventory: Inventory,
) -> Result<Plan, ClusterReadError> {
    let first = plan(desired, actual, &inventory);
    let candidates: Vec<_> = first.moves().map(|m| m.resource.clone()).collect();
    if candidates.is_empty() {
        return Ok(first);
    }
    fill_phases(client, &mut inventory, &candidates).await?;
    Ok(plan(desired, actual, &inventory))
}

/// Fills `plan.restarts` ([`super::restarts`]): the Deployments of the
/// Integrations it moves (`apps/v1`, one list per namespace, by the label
/// `camel.apache.org/integration` that Camel K sets) and the Camel K
/// version of each operator (its IntegrationPlatform's `status.version`, by
/// the platform's owner keys). A platform that cannot be read leaves
/// versions out; a Deployment list that is refused is an error.
pub async fn read_restart_forecast(client: &Client, plan: &mut Plan) -> Result<(), kube::Error> {
    use std::collections::{BTreeMap, BTreeSet};

    use k8s_openapi::api::apps::v1::Deployment;
    use kube::api::{Api, DynamicObject, ListParams};

    use super::restarts::{Strategy, Workload, forecast};
    use crate::camel_k::CamelKind;
    use crate::inventory::ResourceRef;

    let namespaces: BTreeSet<String> = plan
        .moves()
        .filter(|m| m.resource.kind == CamelKind::Integration)
        .map(|m| m.resource.namespace.clone())
        .collect();
    if namespaces.is_empty() {
        return Ok(());
    }
    let mut workloads = BTreeMap::new();
    let labelled = ListParams::default().labels("camel.apache.org/integration");
    for ns in namespaces {
        let api: Api<Deployment> = Api::namespaced(client.clone(), &ns);
        for d in api.list(&labelled).await?.items {
            let Some(name) = d
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("camel.apache.org/integration"))
                .cloned()
            else {
                continue;
            };
            let spec = d.spec;
            let strategy = match spec.strategy.as_ref().and_then(|s| s.type_.as_deref()) {
                Some("Recreate") => Strategy::Recreate,
                _ => Strategy::RollingUpdate {
                    max_unavailable: spec
                        .strategy
                        .and_then(|s| s.rolling_update)
                        .and_then(|r| r.max_unavailable)
                        .map_or("25%".to_string(), |v| match v {
                            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n) => {
                                n.to_string()
                            }
                            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(
                                s,
                            ) => s,
                        }),
                },
            };
            let id = ResourceRef {
                kind: CamelKind::Integration,
                namespace: ns.clone(),
                name,
            };
            workloads.insert(
                id,
                Workload {
                    replicas: spec.replicas.unwrap_or(1),
                    strategy,
                },
            );
        }
    }
    let mut versions = BTreeMap::new();
    let platforms: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &CamelKind::IntegrationPlatform.api_resource(),
    );
    if let Ok(list) = platforms.list(&ListParams::default()).await {
        for p in list.items {
            let owner = crate::camel_k::owner_id(&p.metadata)
                .and_then(|id| crate::api::OperatorId::new(&id).ok());
            let version = p.data["status"]["version"].as_str().map(String::from);
            if let (Some(owner), Some(version)) = (owner, version) {
                versions.insert(owner, version);
            }
        }
    }
    plan.restarts = forecast(plan, &workloads, &versions);
    Ok(())
}

/// What the reconciler's plan endpoint answers: the plan of `head` against
/// `base` on the live cluster, and what it was made of.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServedPlan {
    /// The `OperatorAssignment` the manifest at `head` declares:
    /// `NAMESPACE/NAME`, or `NAME` when it names no namespace.
    pub assignment: String,
    /// The commit `base` resolved to; `None` when no base was asked for or
    /// the manifest does not exist there (then actual owners are the owner
    /// keys the resources carry now).
    pub base: Option<String>,
    /// The commit `head` resolved to.
    pub head: String,
    /// The plan.
    pub plan: Plan,
}

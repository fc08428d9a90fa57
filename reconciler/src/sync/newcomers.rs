//! First owners at once: a Camel K resource that appears with no owner key
//! (a GitOps tool applying a manifest that names no operator, a plain
//! `kubectl apply`) gets its owner from the watch event that shows it, not
//! from the next round. A round can be busy for minutes (a rollout's health
//! gate, a pause), and until the resource has an owner no operator acts on
//! it, or, with Camel K 2.11, every operator does.
//!
//! Contract:
//! - The live cache ([`super::owner_watch`]) sends each resource whose watch event
//!   shows it without owner keys (created so, or its keys removed), unless
//!   a Pipe created it (upstream gives it the Pipe's owner).
//! - The owner is decided by the manifest the last round followed
//!   ([`Newcomers::follow`]); none while no round has, or while the object is
//!   suspended.
//! - The write is the round's own first assignment ([`super::execute::assign_one`]):
//!   read again, fenced on the resourceVersion, and for a resource with a
//!   phase, the unowned handler's stable-phase rule. A resource the round
//!   assigns too is written once: the second writer finds a key and stops.
//! - Only the leader writes.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use kube::Client;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::execute::assign_one;
use crate::api::OperatorAssignmentSpec;
use crate::inventory::{Resource, ResourceRef};
use crate::lock::Leadership;
use crate::plan::{Assignment, Desired};

/// First assignments written at once, as a burst of creates arrives.
const IN_FLIGHT: usize = 8;

/// The manifest new resources are assigned by, as the rounds publish it.
pub(crate) struct Newcomers {
    spec: watch::Sender<Option<Arc<OperatorAssignmentSpec>>>,
}

impl Newcomers {
    /// Starts assigning the resources `arrivals` sends, until `shutdown`.
    pub(crate) fn start(
        client: Client,
        leadership: Leadership,
        arrivals: mpsc::UnboundedReceiver<Resource>,
        shutdown: CancellationToken,
    ) -> Newcomers {
        let (spec, followed) = watch::channel(None);
        tokio::spawn(assign_arrivals(
            client, leadership, arrivals, followed, shutdown,
        ));
        Newcomers { spec }
    }

    /// New resources get their owner by `spec` from now on; `None`: by no
    /// manifest (the object is suspended).
    pub(crate) fn follow(&self, spec: Option<&OperatorAssignmentSpec>) {
        self.spec.send_if_modified(|followed| {
            let changed = followed.as_deref() != spec;
            if changed {
                *followed = spec.cloned().map(Arc::new);
            }
            changed
        });
    }
}

async fn assign_arrivals(
    client: Client,
    leadership: Leadership,
    mut arrivals: mpsc::UnboundedReceiver<Resource>,
    followed: watch::Receiver<Option<Arc<OperatorAssignmentSpec>>>,
    shutdown: CancellationToken,
) {
    loop {
        let first = tokio::select! {
            _ = shutdown.cancelled() => return,
            arrival = arrivals.recv() => match arrival {
                Some(resource) => resource,
                None => return,
            },
        };
        // What arrived meanwhile goes in the same batch, once per resource.
        let mut batch: BTreeMap<ResourceRef, Resource> = BTreeMap::new();
        batch.insert(first.id.clone(), first);
        while let Ok(resource) = arrivals.try_recv() {
            batch.insert(resource.id.clone(), resource);
        }
        let Some(head) = followed.borrow().clone() else {
            continue;
        };
        if !leadership.is_leading() {
            continue;
        }
        let desired = Desired::new(&head);
        let owners: Vec<Assignment> = batch
            .values()
            .filter_map(|r| first_owner(&desired, r))
            .collect();
        futures::stream::iter(owners)
            .for_each_concurrent(IN_FLIGHT, |a| {
                let (client, head) = (&client, &head);
                async move {
                    if let Err(e) = assign_one(client, head, &a, false).await {
                        tracing::warn!(resource = %a.resource, error = %e, "first owner not written; the next round retries");
                    }
                }
            })
            .await;
    }
}

/// The first owner `desired` gives `resource`, if it has no owner key, is
/// in scope and was not created by a Pipe.
fn first_owner(desired: &Desired<'_>, resource: &Resource) -> Option<Assignment> {
    if resource.read_owner().is_some()
        || resource.created_by.is_some()
        || !desired.in_scope(resource.id.kind, &resource.id.namespace)
    {
        return None;
    }
    let decision = desired.decide(resource)?;
    Some(Assignment {
        resource: resource.id.clone(),
        to: decision.operator,
        because: decision.because,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::camel_k::{CamelKind, OPERATOR_ID_KEY};
    use crate::manifest::Manifest;

    fn spec() -> OperatorAssignmentSpec {
        let text = "apiVersion: camelk.dev/v1alpha1\nkind: OperatorAssignment\nmetadata:\n  name: t\nspec:\n  operators:\n    - id: op-1\n      namespace: a\n  scope:\n    namespaces: [shop]\n  defaultOperator: op-1\n";
        Manifest::parse("t.yaml", text.to_string())
            .unwrap()
            .assignment
            .spec
    }

    fn resource(namespace: &str, owner: Option<&str>) -> Resource {
        Resource {
            id: ResourceRef {
                kind: CamelKind::Integration,
                namespace: namespace.into(),
                name: "it".into(),
            },
            labels: owner
                .map(|o| (OPERATOR_ID_KEY.to_string(), o.to_string()))
                .into_iter()
                .collect(),
            owner_annotation: None,
            phase: None,
            in_flight: None,
            created_by: None,
            key_managers: Default::default(),
        }
    }

    #[test]
    fn only_unowned_resources_in_scope_not_made_by_a_pipe_get_a_first_owner() {
        let spec = spec();
        let desired = Desired::new(&spec);
        let a = first_owner(&desired, &resource("shop", None)).unwrap();
        assert_eq!(a.to.as_str(), "op-1");
        assert!(first_owner(&desired, &resource("shop", Some("op-1"))).is_none());
        assert!(first_owner(&desired, &resource("elsewhere", None)).is_none());
        let mut by_pipe = resource("shop", None);
        by_pipe.created_by = Some(ResourceRef {
            kind: CamelKind::Pipe,
            namespace: "shop".into(),
            name: "p".into(),
        });
        assert!(first_owner(&desired, &by_pipe).is_none());
    }
}

//! The resources a health gate waits on, as watches keep them: one full
//! watch per namespace and kind its step moved, opened when the gate first
//! looks and stopped when the step changes or the cache is dropped. A gate
//! that waits then costs its watches' events, not a read of every moved
//! resource on every poll (a 1,000-resource rollout to upstream operators
//! made 66,500 such reads, 43 % of what the API server served meanwhile).
//!
//! Contract:
//! - [`GateCache::object`] answers only from a watch that finished its first
//!   list, and `None` otherwise or when that list does not hold the object:
//!   the caller then reads it itself, so a watch that cannot start (a
//!   namespace the reconciler may not list, a kind not installed) slows a
//!   gate to the reads it made before, never stops it.
//! - While a watch makes its first list, for [`LIST_GRACE`] at most,
//!   [`GateCache::listing`] says so: the gate waits for the list rather than
//!   read each resource a second time.
//! - A kept object has no spec: the gate judges its owner keys and status.
//! - Its owner ([`super::health::GateMemory`]) drops it when the step changes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use tokio::task::JoinHandle;

use crate::camel_k::CamelKind;
use crate::inventory::ResourceRef;
use crate::inventory::watch::{CachedObject, Scope, WatchCache, map_event};

/// How long the gate waits for a new watch's first list before it reads
/// the resources itself (a watch that cannot list never does).
const LIST_GRACE: Duration = Duration::from_secs(5);

/// The watches of one step's health gate.
#[derive(Default)]
pub(crate) struct GateCache {
    cache: WatchCache<CamelKind, CachedObject>,
    /// When each watch was opened.
    opened: HashMap<Scope<CamelKind>, Instant>,
    tasks: Vec<JoinHandle<()>>,
}

fn scope_of(resource: &ResourceRef) -> Scope<CamelKind> {
    Scope {
        kind: resource.kind,
        namespace: Some(resource.namespace.clone()),
    }
}

impl GateCache {
    /// Starts watching the namespace and kind of `resource`, unless a watch
    /// of them runs already.
    pub(crate) fn watch(&mut self, client: &Client, resource: &ResourceRef) {
        let scope = scope_of(resource);
        if self.opened.contains_key(&scope) {
            return;
        }
        self.opened.insert(scope.clone(), Instant::now());
        let api: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            &resource.namespace,
            &resource.kind.api_resource(),
        );
        let events = watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .map_ok(|e| map_event(e, without_spec));
        let reflected = self.cache.reflect(scope, events);
        self.tasks.push(tokio::spawn(reflected.for_each(
            |(scope, event)| async move {
                if let Err(error) = event {
                    tracing::debug!(%error, kind = ?scope.kind, namespace = ?scope.namespace, "health gate watch error; it retries");
                }
            },
        )));
    }

    /// Whether `resource`'s watch is still making its first list, and was
    /// opened less than [`LIST_GRACE`] ago.
    pub(crate) fn listing(&self, resource: &ResourceRef) -> bool {
        !self.cache.synced_in(&resource.kind, &resource.namespace)
            && self
                .opened
                .get(&scope_of(resource))
                .is_some_and(|at| at.elapsed() < LIST_GRACE)
    }

    /// `resource` as its watch has it, once that watch has listed.
    pub(crate) fn object(&self, resource: &ResourceRef) -> Option<Arc<CachedObject>> {
        if !self.cache.synced_in(&resource.kind, &resource.namespace) {
            return None;
        }
        self.cache
            .get(&resource.kind, &resource.namespace, &resource.name)
    }
}

impl Drop for GateCache {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// `object` as the gate keeps it: no spec.
fn without_spec(mut object: DynamicObject) -> CachedObject {
    if let Some(fields) = object.data.as_object_mut() {
        fields.remove("spec");
    }
    CachedObject(object)
}

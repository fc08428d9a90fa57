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
//! - A kept object has no spec: the gate judges its owner keys and status.
//! - [`GateCache::for_step`] keeps the watches of the same step (its start
//!   time, as [`super::health::FirstSeen`] keys what it saw).

use std::collections::HashSet;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use tokio::task::JoinHandle;

use crate::camel_k::CamelKind;
use crate::inventory::ResourceRef;
use crate::inventory::watch::{CachedObject, Scope, WatchCache, map_event};

/// The watches of one step's health gate.
#[derive(Default)]
pub(crate) struct GateCache {
    since: Option<Timestamp>,
    cache: WatchCache<CamelKind, CachedObject>,
    scopes: HashSet<Scope<CamelKind>>,
    tasks: Vec<JoinHandle<()>>,
}

impl GateCache {
    /// The cache of the step that started at `since`; the watches of another
    /// step are stopped.
    pub(crate) fn for_step(&mut self, since: Option<Timestamp>) -> &mut GateCache {
        if self.since != since {
            *self = GateCache::default();
            self.since = since;
        }
        self
    }

    /// Starts watching the namespace and kind of `resource`, unless a watch
    /// of them runs already.
    pub(crate) fn watch(&mut self, client: &Client, resource: &ResourceRef) {
        let scope = Scope {
            kind: resource.kind,
            namespace: Some(resource.namespace.clone()),
        };
        if !self.scopes.insert(scope.clone()) {
            return;
        }
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

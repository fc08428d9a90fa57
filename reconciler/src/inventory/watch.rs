//! Watch caches: what a set of watches delivers, kept in kube-runtime's
//! reflector stores ([`kube::runtime::reflector`](mod@kube::runtime::reflector)), one store per watch, read
//! by kind. The scoped operator loops, the handoff's progress view and the
//! sync's live owners all keep their watched objects here.
//!
//! # Expected flow
//! 1. The caller opens one watch per [`Scope`] (a kind, and the one namespace
//!    it is limited to, if any), usually label-selected, maps its events to
//!    what it keeps ([`map_event`], e.g. into a [`CachedObject`]) and hands
//!    the stream to [`WatchCache::reflect`]: a store is registered for the
//!    scope and the same events come back tagged with it.
//! 2. Polling those streams keeps the stores current (as
//!    [`reflector`](kube::runtime::reflector()) does); a caller that must see
//!    each event before the store applies it (the sync's wake-up on ownership
//!    changes) takes the store's [`Writer`] from [`WatchCache::writer`] and
//!    applies the events itself.
//! 3. Readers ask by kind: [`WatchCache::get`], [`WatchCache::all`],
//!    [`WatchCache::count`], [`WatchCache::synced`].
//!
//! # Guarantees
//! - A watch (re)start replaces its scope's objects only once its list is
//!   complete (the store swaps the whole list in on `InitDone`): a relist never
//!   shows a half-empty view, and an object deleted while the watch was down
//!   is gone once the relist is done. A relist touches only its own scope.
//! - A kind is [`synced`](WatchCache::synced) once every scope of it finished
//!   its first list, and stays so through later relists (which serve the
//!   previous view until they are done).
//! - [`WatchCache::all`] lists in `(namespace, name)` order.
//!
//! # Assumptions
//! - The scopes of one kind do not overlap (one cluster-wide scope, or
//!   distinct namespaces): an object is kept by the one watch that sees it.
//! - Objects are keyed by namespace and name alone ([`Lookup`] with no
//!   dynamic type), so a store's key costs two strings per object, not a
//!   copy of the kind's `ApiResource`, resourceVersion and uid as a
//!   [`DynamicObject`]'s own key would.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use futures::{FutureExt, Stream, StreamExt};
use kube::api::DynamicObject;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{self, Lookup, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};

/// Which watch an event came from: a kind and the namespace it is limited to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Scope<K> {
    /// The kind watched.
    pub kind: K,
    /// The namespace the watch is limited to; none: all namespaces.
    pub namespace: Option<String>,
}

/// A whole object as a watch cache keeps it, keyed by namespace and name.
#[derive(Clone, Debug)]
pub struct CachedObject(pub DynamicObject);

impl std::ops::Deref for CachedObject {
    type Target = DynamicObject;
    fn deref(&self) -> &DynamicObject {
        &self.0
    }
}

impl Lookup for CachedObject {
    type DynamicType = ();
    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn name(&self) -> Option<Cow<'_, str>> {
        self.0.metadata.name.as_deref().map(Cow::Borrowed)
    }
    fn namespace(&self) -> Option<Cow<'_, str>> {
        self.0.metadata.namespace.as_deref().map(Cow::Borrowed)
    }
    // Not kept in the key: readers take them from the object.
    fn resource_version(&self) -> Option<Cow<'_, str>> {
        None
    }
    fn uid(&self) -> Option<Cow<'_, str>> {
        None
    }
}

/// The key of `namespace/name` in a store of `T`.
pub(crate) fn key<T: Lookup<DynamicType = ()>>(namespace: &str, name: &str) -> ObjectRef<T> {
    let key = ObjectRef::new_with(name, ());
    if namespace.is_empty() {
        key
    } else {
        key.within(namespace)
    }
}

/// `event` with each object passed through `f` (markers unchanged).
pub fn map_event<A, B>(event: Event<A>, f: impl FnOnce(A) -> B) -> Event<B> {
    match event {
        Event::Apply(a) => Event::Apply(f(a)),
        Event::Delete(a) => Event::Delete(f(a)),
        Event::Init => Event::Init,
        Event::InitApply(a) => Event::InitApply(f(a)),
        Event::InitDone => Event::InitDone,
    }
}

/// An event of one watch, with the scope it came from.
pub(crate) type ScopedEvent<K, T> = (Scope<K>, watcher::Result<Event<T>>);

/// The stores of a set of watches, by kind.
pub struct WatchCache<K, T: Lookup<DynamicType = ()> + Clone + 'static> {
    stores: HashMap<K, Vec<ScopeStore<T>>>,
}

/// The store of one watch, and the namespace it is limited to.
struct ScopeStore<T: Lookup<DynamicType = ()> + Clone + 'static> {
    namespace: Option<String>,
    store: Store<T>,
}

impl<K, T: Lookup<DynamicType = ()> + Clone + 'static> Default for WatchCache<K, T> {
    fn default() -> Self {
        WatchCache {
            stores: HashMap::new(),
        }
    }
}

impl<K, T> WatchCache<K, T>
where
    K: Clone + Eq + Hash + Send + 'static,
    T: Lookup<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    /// Registers a store for `scope` and returns its writer: every event of
    /// the scope's watch must be applied to it, in order.
    pub fn writer(&mut self, scope: &Scope<K>) -> Writer<T> {
        let writer = Writer::new(());
        self.stores
            .entry(scope.kind.clone())
            .or_default()
            .push(ScopeStore {
                namespace: scope.namespace.clone(),
                store: writer.as_reader(),
            });
        writer
    }

    /// Registers a store for `scope`, fed by `events` as they are polled;
    /// yields the same events tagged with `scope`.
    pub fn reflect<S>(
        &mut self,
        scope: Scope<K>,
        events: S,
    ) -> impl Stream<Item = ScopedEvent<K, T>> + Send + 'static
    where
        S: Stream<Item = watcher::Result<Event<T>>> + Send + 'static,
    {
        let writer = self.writer(&scope);
        reflector::reflector(writer, events).map(move |event| (scope.clone(), event))
    }

    fn stores(&self, kind: &K) -> impl Iterator<Item = &ScopeStore<T>> {
        self.stores.get(kind).into_iter().flatten()
    }

    /// The object `namespace/name` of `kind`, if a watch of it has it.
    pub fn get(&self, kind: &K, namespace: &str, name: &str) -> Option<Arc<T>> {
        self.stores(kind)
            .filter(|s| s.namespace.as_deref().is_none_or(|ns| ns == namespace))
            .find_map(|s| s.store.get(&key(namespace, name)))
    }

    /// Every object of `kind`, in `(namespace, name)` order.
    pub fn all(&self, kind: &K) -> Vec<Arc<T>> {
        let mut all: Vec<Arc<T>> = self.stores(kind).flat_map(|s| s.store.state()).collect();
        all.sort_by(|a, b| (a.namespace(), a.name()).cmp(&(b.namespace(), b.name())));
        all
    }

    /// How many objects of `kind` are kept.
    pub fn count(&self, kind: &K) -> usize {
        self.stores(kind).map(|s| s.store.len()).sum()
    }

    /// Whether a store of `kind` is registered.
    pub fn watches(&self, kind: &K) -> bool {
        self.stores.contains_key(kind)
    }

    /// Whether a watch of `kind` that covers `namespace` finished its first
    /// list.
    pub fn synced_in(&self, kind: &K, namespace: &str) -> bool {
        self.stores(kind)
            .filter(|s| s.namespace.as_deref().is_none_or(|ns| ns == namespace))
            .any(|s| ready(&s.store))
    }

    /// Whether `kind` is watched and each of its watches finished its first
    /// list.
    pub fn synced(&self, kind: &K) -> bool {
        self.watches(kind) && self.stores(kind).all(|s| ready(&s.store))
    }
}

/// Whether `store` has received its first complete list.
fn ready<T: Lookup<DynamicType = ()> + Clone + 'static>(store: &Store<T>) -> bool {
    matches!(store.wait_until_ready().now_or_never(), Some(Ok(())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::ResourceExt;
    use serde_json::json;

    fn obj(ns: &str, name: &str) -> CachedObject {
        CachedObject(serde_json::from_value(json!({ "apiVersion": "v1", "kind": "X", "metadata": { "name": name, "namespace": ns } })).unwrap())
    }

    fn names(c: &WatchCache<&'static str, CachedObject>, kind: &'static str) -> Vec<String> {
        c.all(&kind)
            .iter()
            .map(|o| {
                format!(
                    "{}/{}",
                    o.metadata.namespace.as_deref().unwrap(),
                    o.name_any()
                )
            })
            .collect()
    }

    #[test]
    fn relist_replaces_only_its_scope_when_done() {
        let mut c: WatchCache<&str, CachedObject> = WatchCache::default();
        let a = Scope {
            kind: "it",
            namespace: Some("a".into()),
        };
        let b = Scope {
            kind: "it",
            namespace: Some("b".into()),
        };
        let mut wa = c.writer(&a);
        let mut wb = c.writer(&b);
        for w in [&mut wa, &mut wb] {
            w.apply_watcher_event(&Event::Init);
            w.apply_watcher_event(&Event::InitDone);
        }
        wa.apply_watcher_event(&Event::Apply(obj("a", "one")));
        wb.apply_watcher_event(&Event::Apply(obj("b", "two")));
        wa.apply_watcher_event(&Event::Init);
        wa.apply_watcher_event(&Event::InitApply(obj("a", "three")));
        assert!(
            c.get(&"it", "a", "one").is_some(),
            "old view kept until the relist is done"
        );
        assert!(c.synced(&"it"), "a relist does not unsync");
        wa.apply_watcher_event(&Event::InitDone);
        assert!(c.get(&"it", "a", "one").is_none());
        assert!(c.get(&"it", "a", "three").is_some());
        assert!(c.get(&"it", "b", "two").is_some(), "other scopes untouched");
        assert!(
            c.get(&"it", "a", "two").is_none(),
            "read from its own scope"
        );
        wb.apply_watcher_event(&Event::Delete(obj("b", "two")));
        assert_eq!(c.count(&"it"), 1);
    }

    #[test]
    fn synced_once_every_scope_listed_and_all_in_name_order() {
        let mut c: WatchCache<&str, CachedObject> = WatchCache::default();
        assert!(!c.synced(&"it"), "an unwatched kind is not synced");
        let mut all = c.writer(&Scope {
            kind: "it",
            namespace: None,
        });
        let mut other = c.writer(&Scope {
            kind: "other",
            namespace: None,
        });
        all.apply_watcher_event(&Event::Init);
        for (ns, name) in [("b", "x"), ("a", "z"), ("a", "y")] {
            all.apply_watcher_event(&Event::InitApply(obj(ns, name)));
        }
        assert!(!c.synced(&"it"));
        assert_eq!(c.count(&"it"), 0, "nothing shown before the list is done");
        all.apply_watcher_event(&Event::InitDone);
        assert!(c.synced(&"it"));
        assert!(!c.synced(&"other"));
        assert_eq!(names(&c, "it"), ["a/y", "a/z", "b/x"]);
        assert!(
            c.get(&"it", "b", "x").is_some(),
            "a cluster-wide scope serves every namespace"
        );
        other.apply_watcher_event(&Event::Init);
        other.apply_watcher_event(&Event::InitDone);
        assert!(c.synced(&"other"));
    }
}

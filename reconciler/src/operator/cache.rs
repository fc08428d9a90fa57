//! What a scoped operator sees: the objects its label-selected watches
//! deliver, kept by kind and `(namespace, name)`. A watch (re)start replaces
//! the objects of its scope once its initial list is complete, so a relist
//! never shows a half-empty view.

use std::collections::{BTreeMap, HashMap};

use kube::api::DynamicObject;
use kube::runtime::watcher::Event;

/// Which watch an event came from: a kind and the namespace it is limited to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Scope<K> {
    pub kind: K,
    pub namespace: Option<String>,
}

type Key = (String, String);

/// Objects by kind and `(namespace, name)`.
#[derive(Debug)]
pub struct Cache<K: Clone + Eq + std::hash::Hash> {
    objects: HashMap<K, BTreeMap<Key, DynamicObject>>,
    relisting: HashMap<Scope<K>, BTreeMap<Key, DynamicObject>>,
}

impl<K: Clone + Eq + std::hash::Hash> Default for Cache<K> {
    fn default() -> Self {
        Cache {
            objects: HashMap::new(),
            relisting: HashMap::new(),
        }
    }
}

fn key(obj: &DynamicObject) -> Key {
    (
        obj.metadata.namespace.clone().unwrap_or_default(),
        obj.metadata.name.clone().unwrap_or_default(),
    )
}

impl<K: Clone + Eq + std::hash::Hash> Cache<K> {
    pub fn apply(&mut self, scope: &Scope<K>, event: Event<DynamicObject>) {
        match event {
            Event::Apply(obj) => {
                self.objects
                    .entry(scope.kind.clone())
                    .or_default()
                    .insert(key(&obj), obj);
            }
            Event::Delete(obj) => {
                if let Some(m) = self.objects.get_mut(&scope.kind) {
                    m.remove(&key(&obj));
                }
            }
            Event::Init => {
                self.relisting.insert(scope.clone(), BTreeMap::new());
            }
            Event::InitApply(obj) => {
                self.relisting
                    .entry(scope.clone())
                    .or_default()
                    .insert(key(&obj), obj);
            }
            Event::InitDone => {
                let fresh = self.relisting.remove(scope).unwrap_or_default();
                let m = self.objects.entry(scope.kind.clone()).or_default();
                m.retain(|(ns, _), _| scope.namespace.as_ref().is_some_and(|s| s != ns));
                m.extend(fresh);
            }
        }
    }

    pub fn get(&self, kind: &K, namespace: &str, name: &str) -> Option<&DynamicObject> {
        self.objects
            .get(kind)?
            .get(&(namespace.to_string(), name.to_string()))
    }

    pub fn all(&self, kind: &K) -> impl Iterator<Item = &DynamicObject> {
        self.objects.get(kind).into_iter().flat_map(|m| m.values())
    }

    pub fn count(&self, kind: &K) -> usize {
        self.objects.get(kind).map_or(0, BTreeMap::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(ns: &str, name: &str) -> DynamicObject {
        serde_json::from_value(json!({ "apiVersion": "v1", "kind": "X", "metadata": { "name": name, "namespace": ns } })).unwrap()
    }

    #[test]
    fn relist_replaces_only_its_scope_when_done() {
        let mut c: Cache<&str> = Cache::default();
        let a = Scope {
            kind: "it",
            namespace: Some("a".into()),
        };
        let b = Scope {
            kind: "it",
            namespace: Some("b".into()),
        };
        c.apply(&a, Event::Apply(obj("a", "one")));
        c.apply(&b, Event::Apply(obj("b", "two")));
        c.apply(&a, Event::Init);
        c.apply(&a, Event::InitApply(obj("a", "three")));
        assert!(
            c.get(&"it", "a", "one").is_some(),
            "old view kept until the relist is done"
        );
        c.apply(&a, Event::InitDone);
        assert!(c.get(&"it", "a", "one").is_none());
        assert!(c.get(&"it", "a", "three").is_some());
        assert!(c.get(&"it", "b", "two").is_some(), "other scopes untouched");
        c.apply(&b, Event::Delete(obj("b", "two")));
        assert_eq!(c.count(&"it"), 1);
    }
}

//! The cluster side the sync watches: who owns each Camel K resource, kept
//! by one watch per kind, and the `OperatorAssignment` objects themselves.
//!
//! Contract:
//! - `LiveCache::start` opens one cluster-wide watch per Camel K kind a
//!   manifest governs, when a round first asks for it. In
//!   [`LiveCacheMode::Metadata`] (the default) they are metadata-only watches
//!   and the cache keeps per resource only what ownership needs (its labels
//!   and owner annotation), never a spec; [`LiveCacheMode::Full`] watches full
//!   objects and keeps them, as a plain informer would (the benchmark's
//!   comparison).
//! - After each kind's initial list the cache follows watch events only; the
//!   watcher lists again only if the API server expired its resourceVersion
//!   (410 Gone), and the relisted view replaces the old one only when it is
//!   complete (a kube-runtime reflector store per kind, kept in a
//!   [`WatchCache`]). A kind whose CRD is not installed counts as synced and
//!   empty and is retried with back-off.
//! - Every change of a resource's ownership inputs (created, deleted, labels
//!   or owner annotation changed, another tool starting or stopping to apply
//!   the owner keys) wakes the sync loop; status-only updates do not. A
//!   resource that shows up without owner keys is also sent on at once
//!   ([`super::newcomers`]). `watch_assignments` wakes it when an
//!   `OperatorAssignment`'s annotations change (suspend, resume, `kubectl
//!   camelk sync`), or its spec when the object is the source; not on its
//!   status, nor on the sync's own apply of a Git manifest.
//! - `LiveCache::snapshot` answers only once every kind asked for is synced
//!   (a round waits a bounded time for that); the sync decides from it
//!   whether there is anything to do, and reads authoritatively (a metadata
//!   list) only when it is about to act after having written owner keys
//!   itself, because a watch cache may lag those writes by a moment.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{Lookup, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use super::reads::Reach;
use crate::api::OperatorAssignment;
use crate::camel_k::CamelKind;
use crate::inventory::watch::{Scope, WatchCache, key, map_event};
use crate::inventory::{Inventory, Resource};

/// What the watches of Camel K resources fetch and keep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LiveCacheMode {
    /// Metadata-only watches; labels and the owner annotation are kept.
    #[default]
    Metadata,
    /// Full-object watches; whole objects are kept.
    Full,
}

impl std::str::FromStr for LiveCacheMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "metadata" => Ok(LiveCacheMode::Metadata),
            "full" => Ok(LiveCacheMode::Full),
            other => Err(format!(
                "unknown live cache mode {other:?} (metadata, full)"
            )),
        }
    }
}

/// One cached resource: what ownership needs, not the object's metadata.
#[derive(Clone)]
struct Entry {
    resource: Resource,
    /// The whole object, in [`LiveCacheMode::Full`] only (boxed: an absent
    /// object then costs a pointer per entry, not an object's size).
    _object: Option<Box<DynamicObject>>,
}

/// Kept in a reflector store by namespace and name.
impl Lookup for Entry {
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
        Some(Cow::Borrowed(&self.resource.id.name))
    }
    fn namespace(&self) -> Option<Cow<'_, str>> {
        let ns = &self.resource.id.namespace;
        (!ns.is_empty()).then_some(Cow::Borrowed(ns.as_str()))
    }
    fn resource_version(&self) -> Option<Cow<'_, str>> {
        None
    }
    fn uid(&self) -> Option<Cow<'_, str>> {
        None
    }
}

/// Live ownership of the Camel K kinds asked for, kept by watches.
#[derive(Clone)]
pub(crate) struct LiveCache {
    /// One cluster-wide store per kind, present once its watch was started.
    stores: Arc<Mutex<WatchCache<CamelKind, Entry>>>,
    watches: Option<Arc<Watches>>,
}

/// What starting a watch needs.
struct Watches {
    client: Client,
    mode: LiveCacheMode,
    wake: Arc<Notify>,
    arrivals: Arrivals,
    shutdown: CancellationToken,
}

/// Where resources seen without owner keys are sent ([`super::newcomers`]).
pub(crate) type Arrivals = Option<mpsc::UnboundedSender<Resource>>;

impl LiveCache {
    /// A cache whose watches start when a kind is first asked for (only the
    /// kinds a manifest governs are watched); each change of ownership
    /// inputs notifies `wake`, and a resource that shows up without owner
    /// keys is also sent to `arrivals`. The watches stop with `shutdown`.
    pub(crate) fn start(
        client: &Client,
        mode: LiveCacheMode,
        wake: Arc<Notify>,
        arrivals: Arrivals,
        shutdown: &CancellationToken,
    ) -> LiveCache {
        LiveCache {
            stores: Arc::new(Mutex::new(WatchCache::default())),
            watches: Some(Arc::new(Watches {
                client: client.clone(),
                mode,
                wake,
                arrivals,
                shutdown: shutdown.clone(),
            })),
        }
    }

    /// The resources of `reach`, or `None` while a kind it needs is not
    /// synced (its watch is started then, if it was not).
    pub(super) fn snapshot(&self, reach: &Reach) -> Option<Inventory> {
        let mut stores = self.stores.lock().expect("live cache lock");
        if let Some(watches) = &self.watches {
            for &kind in &reach.kinds {
                if !stores.watches(&kind) {
                    let feed = Feed::new(&mut stores, kind, watches.arrivals.clone());
                    watch(watches, kind, feed);
                }
            }
        }
        if !reach.kinds.iter().all(|kind| stores.synced(kind)) {
            return None;
        }
        let total = reach.kinds.iter().map(|kind| stores.count(kind)).sum();
        let mut resources = Vec::with_capacity(total);
        for kind in &reach.kinds {
            resources.extend(
                stores
                    .all(kind)
                    .iter()
                    .filter(|e| reach.covers_namespace(&e.resource.id.namespace))
                    .map(|e| e.resource.clone()),
            );
        }
        Some(Inventory::from(resources))
    }

    /// [`LiveCache::snapshot`], waiting up to `patience` for the kinds of
    /// `reach` to finish their initial list.
    pub(super) async fn synced_snapshot(
        &self,
        reach: &Reach,
        patience: std::time::Duration,
    ) -> Option<Inventory> {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            if let Some(inventory) = self.snapshot(reach) {
                return Some(inventory);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
}

fn watch(watches: &Watches, kind: CamelKind, feed: Feed) {
    let task = follow(
        watches.client.clone(),
        kind,
        watches.mode,
        feed,
        watches.wake.clone(),
    );
    let stop = watches.shutdown.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = task => {}
        }
    });
}

async fn follow(
    client: Client,
    kind: CamelKind,
    mode: LiveCacheMode,
    mut feed: Feed,
    wake: Arc<Notify>,
) {
    let resource = kind.api_resource();
    let config = watcher::Config::default();
    match mode {
        LiveCacheMode::Metadata => {
            let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client, &resource);
            let mut events = watcher::watcher(api, config).default_backoff().boxed();
            while let Some(event) = events.next().await {
                let event = event.map(|e| {
                    map_event(e, |meta| Entry {
                        resource: Resource::from_metadata(kind, meta.metadata, None),
                        _object: None,
                    })
                });
                feed.apply(kind, event, &wake);
            }
        }
        LiveCacheMode::Full => {
            let api: Api<DynamicObject> = Api::all_with(client, &resource);
            let mut events = watcher::watcher(api, config).default_backoff().boxed();
            while let Some(event) = events.next().await {
                let event = event.map(|e| {
                    map_event(e, |object| {
                        let phase = object
                            .data
                            .pointer("/status/phase")
                            .and_then(|p| p.as_str())
                            .map(str::to_string);
                        Entry {
                            resource: Resource::from_metadata(kind, object.metadata.clone(), phase),
                            _object: Some(Box::new(object)),
                        }
                    })
                });
                feed.apply(kind, event, &wake);
            }
        }
    }
}

/// The writing end of one kind's store. It applies each event itself, not
/// through [`reflector`](kube::runtime::reflector()), because it compares
/// an update with the stored state before the store takes it (to wake the
/// sync on ownership changes only) and empties the store of a kind whose
/// CRD is missing.
struct Feed {
    writer: Writer<Entry>,
    store: Store<Entry>,
    arrivals: Arrivals,
}

impl Feed {
    /// Registers the cluster-wide store of `kind` in `stores`.
    fn new(stores: &mut WatchCache<CamelKind, Entry>, kind: CamelKind, arrivals: Arrivals) -> Feed {
        let writer = stores.writer(&Scope {
            kind,
            namespace: None,
        });
        let store = writer.as_reader();
        Feed {
            writer,
            store,
            arrivals,
        }
    }

    fn apply(
        &mut self,
        kind: CamelKind,
        event: Result<Event<Entry>, watcher::Error>,
        wake: &Notify,
    ) {
        let stored = |entry: &Entry| {
            let id = &entry.resource.id;
            self.store.get(&key(&id.namespace, &id.name))
        };
        let changed = match &event {
            Ok(Event::Init | Event::InitApply(_)) => false,
            Ok(Event::InitDone) => true,
            Ok(Event::Apply(entry)) => {
                let changed =
                    stored(entry).is_none_or(|old| !same_ownership(&old.resource, &entry.resource));
                if changed
                    && entry.resource.read_owner().is_none()
                    && let Some(arrivals) = &self.arrivals
                {
                    // Closed only when the sync stops.
                    let _ = arrivals.send(entry.resource.clone());
                }
                changed
            }
            Ok(Event::Delete(entry)) => stored(entry).is_some(),
            Err(watcher::Error::InitialListFailed(kube::Error::Api(s))) if s.code == 404 => {
                // The CRD is not installed: nothing of this kind exists.
                if !matches!(
                    futures::FutureExt::now_or_never(self.store.wait_until_ready()),
                    Some(Ok(()))
                ) {
                    tracing::debug!(%kind, "kind not installed; retrying with back-off");
                }
                self.writer.apply_watcher_event(&Event::Init);
                self.writer.apply_watcher_event(&Event::InitDone);
                false
            }
            Err(e) => {
                tracing::warn!(%kind, error = %e, "watch failed; retrying with back-off");
                false
            }
        };
        if let Ok(event) = &event {
            self.writer.apply_watcher_event(event);
            if matches!(event, Event::InitDone) {
                tracing::debug!(%kind, resources = self.store.len(), "live cache synced");
            }
        }
        if changed {
            wake.notify_one();
        }
    }
}

/// Wakes `wake` whenever an `OperatorAssignment` in `namespace` changes its
/// annotations (suspend, resume, `kubectl camelk sync`), or, when the object
/// is the source (`spec_is_source`: Argo CD or Flux applies it), its spec
/// (generation), until `shutdown`. With a Git source the spec is the sync's
/// own apply of the manifest: waking on it would interrupt the very round
/// that applied it. A new object is found by the next interval's round.
pub(crate) fn watch_assignments(
    client: Client,
    namespace: &str,
    spec_is_source: bool,
    wake: Arc<Notify>,
    shutdown: CancellationToken,
) {
    let api: Api<OperatorAssignment> = Api::namespaced(client, namespace);
    tokio::spawn(async move {
        // Per object: its generation and annotations as last seen.
        type Seen = (
            Option<i64>,
            Option<std::collections::BTreeMap<String, String>>,
        );
        let mut seen: HashMap<String, Seen> = HashMap::new();
        let mut events = watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        loop {
            let event = tokio::select! {
                _ = shutdown.cancelled() => return,
                event = events.next() => event,
            };
            let Some(Ok(Event::Apply(object) | Event::InitApply(object))) = event else {
                continue;
            };
            let now = (
                object.metadata.generation.filter(|_| spec_is_source),
                object.metadata.annotations.clone(),
            );
            // A first sighting does not wake: at start the first round runs
            // anyway, and with a Git source the object is the sync's own.
            if seen
                .insert(object.name_any(), now.clone())
                .is_some_and(|before| before != now)
            {
                wake.notify_one();
            }
        }
    });
}

/// Whether two states of a resource have the same ownership inputs (labels,
/// because rules select by label, the owner annotation, and who else
/// manages the owner keys).
fn same_ownership(a: &Resource, b: &Resource) -> bool {
    a.labels == b.labels
        && a.owner_annotation == b.owner_annotation
        && a.created_by == b.created_by
        && a.key_managers == b.key_managers
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::camel_k::OPERATOR_ID_KEY;
    use crate::inventory::ResourceRef;

    fn entry(name: &str, owner: &str) -> Entry {
        Entry {
            resource: Resource {
                id: ResourceRef {
                    kind: CamelKind::Integration,
                    namespace: "ns".into(),
                    name: name.into(),
                },
                labels: [(OPERATOR_ID_KEY.to_string(), owner.to_string())]
                    .into_iter()
                    .collect(),
                owner_annotation: Some(owner.into()),
                phase: None,
                in_flight: None,
                created_by: None,
                key_managers: Default::default(),
            },
            _object: None,
        }
    }

    fn reach() -> Reach {
        Reach {
            kinds: vec![CamelKind::Integration],
            namespaces: None,
        }
    }

    fn woken(wake: &Notify) -> bool {
        futures::FutureExt::now_or_never(wake.notified()).is_some()
    }

    fn cache() -> LiveCache {
        LiveCache {
            stores: Arc::new(Mutex::new(WatchCache::default())),
            watches: None,
        }
    }

    fn feed(cache: &LiveCache, kind: CamelKind) -> Feed {
        Feed::new(&mut cache.stores.lock().unwrap(), kind, None)
    }

    #[test]
    fn answers_only_after_the_initial_list_and_wakes_on_ownership_changes_only() {
        let cache = cache();
        let wake = Notify::new();
        let kind = CamelKind::Integration;
        assert!(
            cache.snapshot(&reach()).is_none(),
            "nothing before the list"
        );
        let mut feed = feed(&cache, kind);
        assert!(
            cache.snapshot(&reach()).is_none(),
            "nothing before the list"
        );
        feed.apply(kind, Ok(Event::Init), &wake);
        feed.apply(kind, Ok(Event::InitApply(entry("a", "op-1"))), &wake);
        assert!(cache.snapshot(&reach()).is_none(), "list not complete");
        assert!(!woken(&wake));
        feed.apply(kind, Ok(Event::InitDone), &wake);
        assert!(woken(&wake));
        assert_eq!(cache.snapshot(&reach()).unwrap().resources.len(), 1);

        // A status-only update (same labels and annotation) does not wake.
        let mut same = entry("a", "op-1");
        same.resource.phase = Some("Running".into());
        feed.apply(kind, Ok(Event::Apply(same)), &wake);
        assert!(!woken(&wake));

        feed.apply(kind, Ok(Event::Apply(entry("a", "op-2"))), &wake);
        assert!(woken(&wake));
        feed.apply(kind, Ok(Event::Delete(entry("a", "op-2"))), &wake);
        assert!(woken(&wake));
        assert!(cache.snapshot(&reach()).unwrap().resources.is_empty());
        feed.apply(kind, Ok(Event::Delete(entry("a", "op-2"))), &wake);
        assert!(!woken(&wake), "deleting what is not cached changes nothing");
    }

    #[test]
    fn a_resource_seen_without_owner_keys_is_sent_on_once() {
        let cache = cache();
        let wake = Notify::new();
        let kind = CamelKind::Integration;
        let (arrivals, mut arrived) = mpsc::unbounded_channel();
        let mut feed = Feed::new(&mut cache.stores.lock().unwrap(), kind, Some(arrivals));
        for event in [Event::Init, Event::InitDone] {
            feed.apply(kind, Ok(event), &wake);
        }
        let mut unowned = entry("new", "op-1");
        unowned.resource.labels = Default::default();
        unowned.resource.owner_annotation = None;
        feed.apply(kind, Ok(Event::Apply(unowned.clone())), &wake);
        assert_eq!(arrived.try_recv().unwrap().id.name, "new");
        // A status update of it is no new arrival; an owned one is none.
        unowned.resource.phase = Some("Initialization".into());
        feed.apply(kind, Ok(Event::Apply(unowned)), &wake);
        feed.apply(kind, Ok(Event::Apply(entry("owned", "op-1"))), &wake);
        assert!(arrived.try_recv().is_err());
    }

    #[test]
    fn a_relist_replaces_the_entries_only_when_complete() {
        let cache = cache();
        let wake = Notify::new();
        let kind = CamelKind::Integration;
        let mut feed = feed(&cache, kind);
        for event in [
            Event::Init,
            Event::InitApply(entry("a", "op-1")),
            Event::InitApply(entry("b", "op-1")),
            Event::InitDone,
            Event::Init,
            Event::InitApply(entry("b", "op-1")),
        ] {
            feed.apply(kind, Ok(event), &wake);
        }
        assert_eq!(cache.snapshot(&reach()).unwrap().resources.len(), 2);
        feed.apply(kind, Ok(Event::InitDone), &wake);
        let names: Vec<String> = cache
            .snapshot(&reach())
            .unwrap()
            .resources
            .into_iter()
            .map(|r| r.id.name)
            .collect();
        assert_eq!(names, vec!["b".to_string()], "a deleted while relisting");
    }

    #[test]
    fn a_kind_not_installed_is_synced_and_empty() {
        let cache = cache();
        let wake = Notify::new();
        let kind = CamelKind::Integration;
        let mut feed = feed(&cache, kind);
        let missing = || {
            Err(watcher::Error::InitialListFailed(kube::Error::Api(
                kube::core::Status::failure("not found", "NotFound")
                    .with_code(404)
                    .boxed(),
            )))
        };
        feed.apply(kind, missing(), &wake);
        assert_eq!(cache.snapshot(&reach()).unwrap().resources.len(), 0);
        for event in [
            Event::Init,
            Event::InitApply(entry("a", "op-1")),
            Event::InitDone,
        ] {
            feed.apply(kind, Ok(event), &wake);
        }
        assert_eq!(cache.snapshot(&reach()).unwrap().resources.len(), 1);
        // The CRD removed: what was cached is gone.
        feed.apply(kind, missing(), &wake);
        assert!(cache.snapshot(&reach()).unwrap().resources.is_empty());
    }
}

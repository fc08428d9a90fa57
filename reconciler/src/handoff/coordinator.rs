//! The coordinating side of a handoff: the [`Coordinator`] checks a batch,
//! writes the request Lease, waits for releases, releases for upstream
//! owners, takes over from dead ones, reports a stall and withdraws the
//! request when done or when the target dies (the flow is in the module doc
//! of [`crate::handoff`]).
//!
//! It writes owner keys only through [`owner_writes`](super::owner_writes);
//! its own writes are to the request Lease (create, `Stalled` state,
//! delete).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::SelectAll;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PostParams};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

use super::fence::FlipGuard;
use super::owner_writes::{FLIPS_IN_FLIGHT, FlipResult, flip};
use super::request::{
    ForcePolicy, HandoffItem, HandoffRequest, HandoffSpec, ReleaseMode, STATE_ANNOTATION,
};
use crate::api::OperatorId;
use crate::camel_k::release::{self, work_in_flight};
use crate::camel_k::status;
use crate::camel_k::{CamelKind, OPERATOR_ID_KEY, OwnerKey, owner_id, owner_of_meta};
use crate::field_manager::update_as;
use crate::inventory::watch::{CachedObject, Scope, WatchCache, map_event};
use crate::lock::{LeaseObserver, Liveness, LockTiming, lock_name};

/// Resources of one namespace to move from one operator to another.
#[derive(Clone, Debug)]
pub struct MoveBatch {
    /// The namespace of every resource in the batch.
    pub namespace: String,
    /// The operator that owns them now.
    pub from: OperatorId,
    /// The operator that gets them.
    pub to: OperatorId,
    /// The resources, by kind and name.
    pub resources: Vec<(CamelKind, String)>,
}

/// How the coordinator runs a handoff.
#[derive(Clone, Debug)]
pub struct HandoffOptions {
    /// Recorded as the holder of the request Lease.
    pub coordinator: String,
    /// Who releases each resource: the coordinator or the operator that owns it.
    pub mode: ReleaseMode,
    /// How long the live owner may take to release before the handoff stalls (or, with
    /// `force`, is forced).
    pub drain_timeout: Duration,
    /// When the coordinator may take over without the owner's release.
    pub force: ForcePolicy,
    /// Lease timing of the operators' locks, to judge them alive or dead.
    pub lock_timing: LockTiming,
    /// Namespace of each operator's lock; `default_lock_namespace` otherwise.
    pub lock_namespaces: BTreeMap<String, String>,
    /// Namespace of the lock of an operator not in `lock_namespaces`.
    pub default_lock_namespace: String,
    /// How often the coordinator re-reads the resources and locks while it waits.
    pub poll: Duration,
}

impl HandoffOptions {
    fn lock_namespace(&self, id: &OperatorId) -> &str {
        self.lock_namespaces
            .get(id.as_str())
            .map(String::as_str)
            .unwrap_or(&self.default_lock_namespace)
    }
}

/// What [`Coordinator::request`] did.
#[derive(Debug)]
pub enum Requested {
    /// Nothing to move (everything is with the target already).
    Nothing(HandoffOutcome),
    /// The request Lease is written.
    Pending {
        /// The request as written.
        request: HandoffRequest,
        /// Resources of the batch already with the target, as `kind/name`; they are
        /// not part of the request.
        already_there: Vec<String>,
    },
}

/// How a handoff ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HandoffOutcome {
    /// Every resource is with the target, or gone.
    Completed {
        /// Resources flipped by this handoff, as `kind/name`.
        moved: Vec<String>,
        /// Resources that were with the target before it started.
        already_there: Vec<String>,
        /// Resources flipped without their owner's release (the owner was dead or
        /// the force policy allowed it).
        taken_over: Vec<String>,
        /// Resources deleted while the handoff ran.
        gone: Vec<String>,
    },
    /// The live owner did not release within the drain timeout.
    Stalled {
        /// Resources flipped before it stalled, as `kind/name`.
        moved: Vec<String>,
        /// Each resource still waiting, as `kind/name`, with what it waits for.
        waiting: Vec<(String, String)>,
    },
    /// The target operator stopped renewing its lock; the request was withdrawn.
    TargetDead {
        /// Resources flipped before the target died, as `kind/name`.
        moved: Vec<String>,
        /// Resources that were not moved.
        remaining: Vec<String>,
    },
}

/// Progress of a running handoff, for displays.
#[derive(Clone, Debug)]
pub struct Progress {
    /// Resources in the handoff.
    pub total: usize,
    /// Resources with the target now.
    pub done: usize,
    /// A resource still with its old owner, as `kind/name`, for a status line.
    pub waiting_on: Option<String>,
}

/// Why a handoff could not run.
#[derive(Debug, thiserror::Error)]
pub enum HandoffError {
    /// A resource of the batch does not exist.
    #[error("{kind} {namespace}/{name} not found")]
    NotFound {
        /// The resource's kind.
        kind: CamelKind,
        /// The resource's namespace.
        namespace: String,
        /// The resource's name.
        name: String,
    },
    /// A resource of the batch is owned by another operator than the batch's source.
    #[error("{kind} {namespace}/{name} is owned by {actual}, not {expected}")]
    WrongOwner {
        /// The resource's kind.
        kind: CamelKind,
        /// The resource's namespace.
        namespace: String,
        /// The resource's name.
        name: String,
        /// The operator the batch moves it from.
        expected: String,
        /// The operator its owner keys name.
        actual: String,
    },
    /// The target operator's lock is not renewed: moving resources to it would
    /// leave them unreconciled. Holds the operator id and the lock's name.
    #[error(
        "target operator {0} is not alive: its lock {1} was not seen renewing within the lease duration"
    )]
    TargetNotAlive(String, String),
    /// A call to the API server failed.
    #[error("{context}: {source}")]
    Api {
        /// What was being done, for the message.
        context: String,
        /// The API server's error.
        #[source]
        source: kube::Error,
    },
}

fn api_err(context: impl Into<String>) -> impl FnOnce(kube::Error) -> HandoffError {
    let context = context.into();
    move |source| HandoffError::Api { context, source }
}

/// Drives handoff requests; keeps its observations of operator locks across
/// batches, so liveness is judged from local observation over time.
pub struct Coordinator {
    client: Client,
    observer: LeaseObserver,
}

impl Coordinator {
    /// A coordinator that talks to the cluster through `client`.
    pub fn new(client: Client) -> Coordinator {
        Coordinator {
            client,
            observer: LeaseObserver::new(),
        }
    }

    async fn liveness(
        &mut self,
        id: &OperatorId,
        opts: &HandoffOptions,
    ) -> Result<Liveness, HandoffError> {
        let ns = opts.lock_namespace(id).to_string();
        let name = lock_name(id.as_str());
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &ns);
        let lease = match api.get_opt(&name).await {
            Ok(lease) => lease,
            Err(e) => {
                self.observer.read_failed();
                return Err(api_err(format!("reading lock {ns}/{name}"))(e));
            }
        };
        Ok(self.observer.observe(
            &ns,
            &name,
            lease.as_ref(),
            opts.lock_timing.lease_duration,
            Instant::now(),
        ))
    }

    /// Waits until `id`'s lock is seen renewing (alive) or a lease duration
    /// passes without a change.
    pub async fn wait_alive(
        &mut self,
        id: &OperatorId,
        opts: &HandoffOptions,
    ) -> Result<bool, HandoffError> {
        loop {
            match self.liveness(id, opts).await? {
                Liveness::Alive { .. } => return Ok(true),
                Liveness::Expired { .. } => return Ok(false),
                Liveness::Unknown => tokio::time::sleep(opts.poll).await,
            }
        }
    }

    /// Moves `batch` (see the flow in the module doc of [`crate::handoff`]):
    /// [`request`](Self::request), then [`drive`](Self::drive) to the end.
    pub async fn execute(
        &mut self,
        batch: &MoveBatch,
        opts: &HandoffOptions,
        on_progress: &mut dyn FnMut(&Progress),
    ) -> Result<HandoffOutcome, HandoffError> {
        match self.request(batch, opts).await? {
            Requested::Nothing(outcome) => Ok(outcome),
            Requested::Pending {
                request,
                already_there,
            } => {
                self.drive(&request, batch, opts, already_there, on_progress)
                    .await
            }
        }
    }

    /// Checks the resources and the target, and writes the handoff request.
    pub async fn request(
        &mut self,
        batch: &MoveBatch,
        opts: &HandoffOptions,
    ) -> Result<Requested, HandoffError> {
        let ns = batch.namespace.as_str();
        let mut items = Vec::new();
        let mut already_there = Vec::new();
        // One metadata-only list per kind instead of a read per resource.
        let mut current: BTreeMap<(CamelKind, String), DynamicObject> = BTreeMap::new();
        let kinds: BTreeSet<CamelKind> = batch.resources.iter().map(|(k, _)| *k).collect();
        for kind in kinds {
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), ns, &kind.api_resource());
            let list = api
                .list_metadata(&ListParams::default())
                .await
                .map_err(api_err(format!("listing {kind} in {ns}")))?;
            for m in list.items {
                let name = m.metadata.name.clone().unwrap_or_default();
                current.insert((kind, name), metadata_only(m));
            }
        }
        for (kind, name) in &batch.resources {
            let obj =
                current
                    .get(&(*kind, name.clone()))
                    .ok_or_else(|| HandoffError::NotFound {
                        kind: *kind,
                        namespace: ns.into(),
                        name: name.clone(),
                    })?;
            let read = owner_of_meta(&obj.metadata);
            let owner = read.as_ref().map(|o| o.id.clone()).unwrap_or_default();
            if owner == batch.to.as_str() {
                // Named by its annotation alone: adopted (the label added), no handoff.
                if read.is_some_and(|o| o.key == OwnerKey::Annotation) {
                    let to = batch.to.as_str();
                    flip(&self.client, *kind, obj, to, to, &FlipGuard::default())
                        .await
                        .map_err(api_err(format!("adopting {kind}/{name}")))?;
                }
                already_there.push(format!("{kind}/{name}"));
                continue;
            }
            if owner != batch.from.as_str() {
                return Err(HandoffError::WrongOwner {
                    kind: *kind,
                    namespace: ns.into(),
                    name: name.clone(),
                    expected: batch.from.to_string(),
                    actual: if owner.is_empty() {
                        "nobody".into()
                    } else {
                        owner
                    },
                });
            }
            items.push(HandoffItem {
                kind: *kind,
                name: name.clone(),
                uid: obj.metadata.uid.clone().unwrap_or_default(),
            });
        }
        if items.is_empty() {
            return Ok(Requested::Nothing(HandoffOutcome::Completed {
                moved: vec![],
                already_there,
                taken_over: vec![],
                gone: vec![],
            }));
        }
        if !self.wait_alive(&batch.to, opts).await? {
            return Err(HandoffError::TargetNotAlive(
                batch.to.to_string(),
                lock_name(batch.to.as_str()),
            ));
        }

        let request = HandoffRequest::new(
            ns,
            HandoffSpec {
                from: batch.from.clone(),
                to: batch.to.clone(),
                mode: opts.mode,
                items,
            },
        );
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), ns);
        match leases
            .create(&PostParams::default(), &request.to_lease(&opts.coordinator))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => {
                return Err(api_err(format!(
                    "creating handoff request {}",
                    request.name
                ))(e));
            }
        }
        tracing::info!(request = %request.name, namespace = ns, from = %batch.from, to = %batch.to,
            resources = request.spec.items.len(), "handoff requested");
        Ok(Requested::Pending {
            request,
            already_there,
        })
    }

    /// Drives a written request to its end: releases for upstream owners,
    /// takes over from dead ones, reports a stall, withdraws if the target dies.
    pub async fn drive(
        &mut self,
        request: &HandoffRequest,
        batch: &MoveBatch,
        opts: &HandoffOptions,
        already_there: Vec<String>,
        on_progress: &mut dyn FnMut(&Progress),
    ) -> Result<HandoffOutcome, HandoffError> {
        let request = request.clone();
        let started = Instant::now();
        let total = request.spec.items.len();
        let mut taken_over = BTreeSet::new();
        // Progress comes from metadata-only watches of what the old owner may
        // own (its label, or no label and its annotation): an item leaves
        // them when it is flipped or deleted. No re-listing.
        let kinds: BTreeSet<CamelKind> = request.spec.items.iter().map(|i| i.kind).collect();
        let mut view: WatchCache<(CamelKind, usize), CachedObject> = WatchCache::default();
        let mut watches = SelectAll::new();
        for kind in &kinds {
            for (i, selector) in owner_selectors(&request.spec.from).into_iter().enumerate() {
                let api: Api<PartialObjectMeta<DynamicObject>> = Api::namespaced_with(
                    self.client.clone(),
                    &request.namespace,
                    &kind.api_resource(),
                );
                let scope = Scope {
                    kind: (*kind, i),
                    namespace: Some(request.namespace.clone()),
                };
                // Backed off: an API error would otherwise be retried at once.
                let events = watcher(api, watcher::Config::default().labels(&selector))
                    .default_backoff()
                    .map(|event| event.map(|e| map_event(e, |m| CachedObject(metadata_only(m)))));
                watches.push(view.reflect(scope, events).boxed());
            }
        }
        let scopes: Vec<(CamelKind, usize)> =
            kinds.iter().flat_map(|k| [(*k, 0), (*k, 1)]).collect();
        let uids = item_uids(&request);
        let mut tick = tokio::time::interval(opts.poll);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let ticked = tokio::select! {
                // Polling the watches applies their events to `view`.
                Some((_, event)) = watches.next() => {
                    // Apply what is already queued too: a burst of flips is
                    // counted once, not once per event.
                    let mut next = Some(event);
                    while let Some(event) = next {
                        if let Err(e) = event {
                            tracing::warn!(error = %e, "handoff progress watch failed; retrying");
                        }
                        next = watches.next().now_or_never().flatten().map(|(_, e)| e);
                    }
                    false
                }
                _ = tick.tick() => true,
            };
            if !scopes.iter().all(|scope| view.synced(scope)) {
                continue;
            }
            let watched = covered(&request, &uids, &view);
            on_progress(&Progress {
                total,
                done: total - watched.len(),
                waiting_on: watched.first().map(|(k, o)| describe(*k, &o.0)),
            });
            if watched.is_empty() {
                break;
            }
            if !ticked {
                continue;
            }
            // One reading of the clock for the tick: read twice, a tick could
            // skip the phases and then stall, saying why without them.
            let overdue = started.elapsed() >= opts.drain_timeout;
            // Phases are needed only to release for upstream owners and to say
            // why a move stalls; otherwise the watched metadata is enough.
            let need_phase = opts.mode == ReleaseMode::Upstream || overdue;
            let remaining = if need_phase {
                self.remaining(&request, true).await?
            } else {
                watched.iter().map(|(k, o)| (*k, o.0.clone())).collect()
            };
            // A fresh read ahead of the watches: every item has moved, so the
            // handoff is done, whatever the target's lock says now.
            if remaining.is_empty() {
                break;
            }
            if let Liveness::Expired { .. } = self.liveness(&batch.to, opts).await? {
                self.withdraw(&request).await?;
                let moved = self.with_owner(&request, &batch.to).await?;
                return Ok(HandoffOutcome::TargetDead {
                    moved,
                    remaining: remaining.iter().map(|(k, o)| describe(*k, o)).collect(),
                });
            }
            let owner_dead = matches!(
                self.liveness(&batch.from, opts).await?,
                Liveness::Expired { .. }
            );
            let forced = overdue && opts.force == ForcePolicy::AfterDrainTimeout;
            let waiting = self
                .flip_releasable(&remaining, batch, opts, owner_dead, forced, &mut taken_over)
                .await?;
            if overdue && !forced && !owner_dead && !waiting.is_empty() {
                self.mark_stalled(&request, &waiting).await?;
                let moved = self.with_owner(&request, &batch.to).await?;
                return Ok(HandoffOutcome::Stalled { moved, waiting });
            }
        }
        self.withdraw(&request).await?;
        let moved = self.with_owner(&request, &batch.to).await?;
        let gone = request
            .spec
            .items
            .iter()
            .map(|i| format!("{}/{}", i.kind, i.name))
            .filter(|r| !moved.contains(r))
            .collect();
        Ok(HandoffOutcome::Completed {
            moved: moved
                .into_iter()
                .filter(|m| !taken_over.contains(m))
                .collect(),
            already_there,
            taken_over: taken_over.into_iter().collect(),
            gone,
        })
    }

    /// One tick of releases: flips every remaining item the release rules
    /// allow now, [`FLIPS_IN_FLIGHT`] at a time, upstream Pipes before the
    /// Integrations they create, and says why each other item waits. Items
    /// flipped by takeover (the owner is dead, or the drain timeout forces
    /// it) are added to `taken_over`.
    async fn flip_releasable(
        &self,
        remaining: &[(CamelKind, DynamicObject)],
        batch: &MoveBatch,
        opts: &HandoffOptions,
        owner_dead: bool,
        forced: bool,
        taken_over: &mut BTreeSet<String>,
    ) -> Result<Vec<(String, String)>, HandoffError> {
        let takeover = owner_dead || forced;
        let mut waiting = Vec::new();
        // Pipes still with the old owner after this tick's flips.
        let mut pipes_left = BTreeSet::new();
        let mut first_error = None;
        for wave in upstream_flip_waves(remaining) {
            let mut flips = Vec::new();
            for (kind, obj) in wave {
                if opts.mode == ReleaseMode::Upstream
                    && !takeover
                    && let Some(pipe) = controlling_pipe(kind, obj)
                    && pipes_left.contains(&pipe)
                {
                    waiting.push((describe(kind, obj), format!("waits for its Pipe {pipe}")));
                    continue;
                }
                match release_guard(kind, obj, opts.mode, takeover, &batch.from) {
                    Ok(guard) => flips.push((kind, obj, guard)),
                    Err(why) => {
                        waiting.push((describe(kind, obj), why));
                        if creates_integration(kind) {
                            pipes_left.insert(obj.metadata.name.clone().unwrap_or_default());
                        }
                    }
                }
            }
            // Each flip is fenced on its own object, so they need no order
            // within a wave; a few in flight hide the round trips.
            let results: Vec<_> = futures::stream::iter(flips)
                .map(|(kind, obj, guard)| async move {
                    let result = flip(
                        &self.client,
                        kind,
                        obj,
                        batch.from.as_str(),
                        batch.to.as_str(),
                        &guard,
                    )
                    .await;
                    (kind, obj, result)
                })
                .buffered(FLIPS_IN_FLIGHT)
                .collect()
                .await;
            for (kind, obj, result) in results {
                let result = match result {
                    Ok(result) => result,
                    Err(e) => {
                        first_error.get_or_insert_with(|| {
                            api_err(format!("flipping {}", describe(kind, obj)))(e)
                        });
                        continue;
                    }
                };
                if creates_integration(kind) && matches!(result, FlipResult::Refused) {
                    pipes_left.insert(obj.metadata.name.clone().unwrap_or_default());
                }
                if matches!(result, FlipResult::Flipped(_)) && takeover {
                    taken_over.insert(describe(kind, obj));
                    tracing::warn!(resource = %describe(kind, obj), owner_dead, forced, "owner did not release; taken over");
                }
            }
            // What the other flips of this wave did is recorded; the error
            // stops the tick before the next wave.
            if let Some(e) = first_error {
                return Err(e);
            }
        }
        Ok(waiting)
    }

    /// Items of the request the old owner still owns (`full` objects, or
    /// metadata only).
    async fn remaining(
        &self,
        request: &HandoffRequest,
        full: bool,
    ) -> Result<Vec<(CamelKind, DynamicObject)>, HandoffError> {
        self.items_owned_by(request, &request.spec.from, full).await
    }

    async fn with_owner(
        &self,
        request: &HandoffRequest,
        owner: &OperatorId,
    ) -> Result<Vec<String>, HandoffError> {
        Ok(self
            .items_owned_by(request, owner, false)
            .await?
            .iter()
            .map(|(k, o)| format!("{k}/{}", o.metadata.name.as_deref().unwrap_or_default()))
            .collect())
    }

    /// Items of the request owned by `owner` ([`owner_of_meta`]), read with
    /// [`owner_selectors`]: two lists per kind, never the whole namespace.
    async fn items_owned_by(
        &self,
        request: &HandoffRequest,
        owner: &OperatorId,
        full: bool,
    ) -> Result<Vec<(CamelKind, DynamicObject)>, HandoffError> {
        let kinds: BTreeSet<CamelKind> = request.spec.items.iter().map(|i| i.kind).collect();
        let mut out = Vec::new();
        for kind in kinds {
            let api: Api<DynamicObject> = Api::namespaced_with(
                self.client.clone(),
                &request.namespace,
                &kind.api_resource(),
            );
            for selector in owner_selectors(owner) {
                let params = ListParams::default().labels(&selector);
                let context = format!("listing {kind} in {}", request.namespace);
                let objects = if full {
                    api.list(&params).await.map_err(api_err(context))?.items
                } else {
                    api.list_metadata(&params)
                        .await
                        .map_err(api_err(context))?
                        .items
                        .into_iter()
                        .map(metadata_only)
                        .collect()
                };
                for obj in objects {
                    let name = obj.metadata.name.clone().unwrap_or_default();
                    let uid = obj.metadata.uid.clone().unwrap_or_default();
                    if request.covers(kind, &name, &uid)
                        && owner_id(&obj.metadata).as_deref() == Some(owner.as_str())
                    {
                        out.push((kind, obj));
                    }
                }
            }
        }
        Ok(out)
    }

    async fn withdraw(&self, request: &HandoffRequest) -> Result<(), HandoffError> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), &request.namespace);
        match leases.delete(&request.name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(api_err(format!(
                "deleting handoff request {}",
                request.name
            ))(e)),
        }
    }

    async fn mark_stalled(
        &self,
        request: &HandoffRequest,
        waiting: &[(String, String)],
    ) -> Result<(), HandoffError> {
        let reason: Vec<String> = waiting
            .iter()
            .map(|(r, why)| format!("{r}: {why}"))
            .collect();
        let state = json!({ "state": "Stalled", "reason": reason.join("; ") }).to_string();
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), &request.namespace);
        let patch =
            Patch::Merge(json!({ "metadata": { "annotations": { STATE_ANNOTATION: state } } }));
        match leases
            .patch(&request.name, &update_as(super::FIELD_MANAGER), &patch)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(api_err(format!("marking {} stalled", request.name))(e)),
        }
    }
}

/// Label selectors that together find every resource `owner` may own: its
/// label, or no label at all (then its annotation decides, read by
/// [`owner_of_meta`]). What another operator's label names is never read.
fn owner_selectors(owner: &OperatorId) -> [String; 2] {
    [
        format!("{OPERATOR_ID_KEY}={owner}"),
        format!("!{OPERATOR_ID_KEY}"),
    ]
}

/// The request's items by kind and name, to the uid each was requested with:
/// one lookup per watched object instead of a scan of the request, since
/// progress is recounted at every burst of watch events.
fn item_uids(request: &HandoffRequest) -> HashMap<(CamelKind, &str), &str> {
    request
        .spec
        .items
        .iter()
        .map(|i| ((i.kind, i.name.as_str()), i.uid.as_str()))
        .collect()
}

/// The request's items among `view`'s objects (uid-checked against `uids`,
/// from [`item_uids`]) that the old owner still owns, in order.
fn covered(
    request: &HandoffRequest,
    uids: &HashMap<(CamelKind, &str), &str>,
    view: &WatchCache<(CamelKind, usize), CachedObject>,
) -> Vec<(CamelKind, Arc<CachedObject>)> {
    let kinds: BTreeSet<CamelKind> = request.spec.items.iter().map(|i| i.kind).collect();
    let mut out = Vec::new();
    for kind in kinds {
        for o in view.all(&(kind, 0)).into_iter().chain(view.all(&(kind, 1))) {
            let name = o.metadata.name.as_deref().unwrap_or_default();
            let uid = o.metadata.uid.as_deref().unwrap_or_default();
            if uids.get(&(kind, name)) == Some(&uid)
                && owner_id(&o.metadata).as_deref() == Some(request.spec.from.as_str())
            {
                out.push((kind, o));
            }
        }
    }
    out.sort_by(|a, b| (a.0, &a.1.metadata.name).cmp(&(b.0, &b.1.metadata.name)));
    out
}

/// A metadata-only read as a [`DynamicObject`] without data.
fn metadata_only(m: PartialObjectMeta<DynamicObject>) -> DynamicObject {
    DynamicObject {
        types: m.types,
        metadata: m.metadata,
        data: serde_json::Value::Null,
    }
}

fn describe(kind: CamelKind, obj: &DynamicObject) -> String {
    format!(
        "{kind}/{}",
        obj.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The waves an upstream release flips items in: Pipes (and KameletBindings)
/// before the Integrations they create. Upstream's Pipe controller rebuilds
/// a Pipe whose Integration names another operator: flipping the Integration
/// first makes the old owner reset its Pipe to phase `""` and recreate the
/// Integration, which it no longer may, so the Pipe never reaches a stable
/// phase. Flipped first, the Pipe is rebuilt by its new owner, which takes
/// its Integration once that is flipped right after.
fn upstream_flip_waves(
    remaining: &[(CamelKind, DynamicObject)],
) -> [Vec<(CamelKind, &DynamicObject)>; 2] {
    let (pipes, rest) = remaining
        .iter()
        .map(|(k, o)| (*k, o))
        .partition(|(k, _)| creates_integration(*k));
    [pipes, rest]
}

/// A Pipe or KameletBinding: a kind whose controller creates an Integration.
fn creates_integration(kind: CamelKind) -> bool {
    matches!(kind, CamelKind::Pipe | CamelKind::KameletBinding)
}

/// The Pipe (or KameletBinding) that created an Integration: its controller.
fn controlling_pipe(kind: CamelKind, object: &DynamicObject) -> Option<String> {
    if kind != CamelKind::Integration {
        return None;
    }
    object
        .metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|r| {
            r.controller == Some(true) && matches!(r.kind.as_str(), "Pipe" | "KameletBinding")
        })
        .map(|r| r.name.clone())
}

/// The guard of the flip the coordinator may make for `obj` now, or why it
/// must wait. A takeover flips unguarded; for an upstream owner, only a stable
/// phase is released, guarded on that phase; an owner that speaks the protocol
/// releases by itself, so the coordinator only says what it waits for.
fn release_guard(
    kind: CamelKind,
    obj: &DynamicObject,
    mode: ReleaseMode,
    takeover: bool,
    from: &OperatorId,
) -> Result<FlipGuard, String> {
    if takeover {
        return Ok(FlipGuard::default());
    }
    if mode == ReleaseMode::Upstream {
        return release::upstream_stable(kind, obj).map(|phase| FlipGuard { phase: Some(phase) });
    }
    Err(work_in_flight(kind, Some(status::phase(obj).unwrap_or("")))
        .map(|r| r.to_string())
        .unwrap_or_else(|| format!("{from} has not released it yet")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(kind: &str, name: &str, pipe: Option<&str>) -> DynamicObject {
        let mut meta = json!({ "name": name, "namespace": "shop" });
        if let Some(p) = pipe {
            meta["ownerReferences"] = json!([{ "apiVersion": "camel.apache.org/v1",
                "kind": "Pipe", "name": p, "uid": "u", "controller": true }]);
        }
        serde_json::from_value(
            json!({ "apiVersion": "camel.apache.org/v1", "kind": kind, "metadata": meta }),
        )
        .unwrap()
    }

    #[test]
    fn pipes_are_flipped_before_the_integrations_they_create() {
        let remaining = vec![
            (CamelKind::Integration, obj("Integration", "p", Some("p"))),
            (CamelKind::Integration, obj("Integration", "svc", None)),
            (CamelKind::Pipe, obj("Pipe", "p", None)),
        ];
        let order: Vec<_> = upstream_flip_waves(&remaining)
            .concat()
            .into_iter()
            .map(|(k, o)| (k, o.metadata.name.clone().unwrap()))
            .collect();
        assert_eq!(
            order,
            [
                (CamelKind::Pipe, "p".to_string()),
                (CamelKind::Integration, "p".to_string()),
                (CamelKind::Integration, "svc".to_string()),
            ]
        );
        assert_eq!(
            controlling_pipe(CamelKind::Integration, &remaining[0].1).as_deref(),
            Some("p")
        );
        assert_eq!(
            controlling_pipe(CamelKind::Integration, &remaining[1].1),
            None
        );
    }

    fn with_status(kind: &str, status: serde_json::Value) -> DynamicObject {
        let mut o = obj(kind, "orders", None);
        o.data = json!({ "status": status });
        o
    }

    #[test]
    fn release_guards_follow_owner_and_phase() {
        let from = OperatorId::new("operator-1").unwrap();
        let running = with_status(
            "Integration",
            json!({ "phase": "Running", "conditions": [{ "type": "Ready", "status": "True" }] }),
        );
        let building = with_status("Integration", json!({ "phase": "Building Kit" }));
        let upstream = ReleaseMode::Upstream;
        let guard = release_guard(CamelKind::Integration, &running, upstream, false, &from);
        assert_eq!(guard.unwrap().phase.as_deref(), Some("Running"));
        let why = release_guard(CamelKind::Integration, &building, upstream, false, &from);
        assert_eq!(why.unwrap_err(), "phase `Building Kit` is not stable");
        // A takeover flips whatever the phase, with no phase guard.
        let taken = release_guard(CamelKind::Integration, &building, upstream, true, &from);
        assert_eq!(taken.unwrap().phase, None);
        // An owner that speaks the protocol releases by itself: the coordinator
        // only says what it waits for.
        let protocol = ReleaseMode::Protocol;
        let why = release_guard(CamelKind::Integration, &building, protocol, false, &from);
        assert!(why.unwrap_err().starts_with("phase `Building Kit`"));
        let why = release_guard(CamelKind::Integration, &running, protocol, false, &from);
        assert_eq!(why.unwrap_err(), "operator-1 has not released it yet");
    }
}

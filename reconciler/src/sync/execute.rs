//! What a round writes to Camel K resources, all through [`crate::handoff`]:
//! first assignments and adoptions ([`owner_writes::assign`], [`owner_writes::flip`]),
//! a step's hand-overs ([`Coordinator`]) and the requests a killed
//! predecessor left.
//!
//! Contract:
//! - Which moves to make comes from the plan engine
//!   ([`crate::plan::rollout`]); this module only carries them out and says
//!   how it went ([`StepOutcome`]).
//! - Every owner-key write is one of [`owner_writes`]' fenced patches;
//!   a refused fence or a deleted resource is left for the next round.
//! - Handoff durations and the handoffs in progress are counted in the
//!   metrics; each resource moved gets a `Moved` Event.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};

use super::report::Events;
use super::{LOCK_ID, SyncError, server};
use crate::api::{
    self, ForcePolicy as ManifestForce, OperatorAssignmentSpec, OperatorId, Protocol,
    parse_duration,
};
use crate::camel_k::{OwnerKey, owner_of_meta};
use crate::handoff::coordinator::HandoffError;
use crate::handoff::fence::FlipGuard;
use crate::handoff::owner_writes::{self, FlipResult};
use crate::handoff::request::{FROM_LABEL, HandoffRequest, TO_LABEL};
use crate::handoff::{
    Coordinator, ForcePolicy, HandoffOptions, HandoffOutcome, MoveBatch, ReleaseMode,
};
use crate::inventory::Inventory;
use crate::lock::LockTiming;
use crate::plan::rollout::{self, Handover, LiveOwners};
use crate::plan::{self, Batch};

/// How the hand-overs of a step (or of a repair) ended. Resources moved are
/// named `(namespace, "Kind/name")`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum StepOutcome {
    /// Everything pending moved; these were moved now.
    Moved(BTreeSet<(String, String)>),
    /// A hand-over could not finish: the rollout pauses. What moved before
    /// it stays moved.
    Stalled {
        moved: BTreeSet<(String, String)>,
        stall: Stall,
    },
}

/// Why a hand-over could not finish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stall {
    /// For people: what is left, and why.
    pub(crate) message: String,
    /// The target operator whose lock was not seen renewing, when that is
    /// why: the step waits for that operator, not for an owner's release.
    pub(crate) target_not_alive: Option<OperatorId>,
}

impl Stall {
    /// A stall for any other reason than a target that is not alive.
    fn waiting(message: String) -> Stall {
        Stall {
            message,
            target_not_alive: None,
        }
    }

    /// The conditions' and the Event's reason: `TargetNotAlive` or
    /// `HandoffStalled`, so an alert can tell an operator that is down from
    /// a release that is slow.
    pub(crate) fn reason(&self) -> &'static str {
        match self.target_not_alive {
            Some(_) => "TargetNotAlive",
            None => "HandoffStalled",
        }
    }
}

impl StepOutcome {
    /// What moved, finished or not.
    pub(crate) fn moved(&self) -> &BTreeSet<(String, String)> {
        match self {
            StepOutcome::Moved(moved) | StepOutcome::Stalled { moved, .. } => moved,
        }
    }

    /// Why it stalled, if it did.
    pub(crate) fn stalled(&self) -> Option<&Stall> {
        match self {
            StepOutcome::Moved(_) => None,
            StepOutcome::Stalled { stall, .. } => Some(stall),
        }
    }

    /// The outcome of `self` followed by `next`.
    fn then(self, next: StepOutcome) -> StepOutcome {
        let mut moved = match self {
            StepOutcome::Moved(moved) | StepOutcome::Stalled { moved, .. } => moved,
        };
        match next {
            StepOutcome::Moved(m) => {
                moved.extend(m);
                StepOutcome::Moved(moved)
            }
            StepOutcome::Stalled { moved: m, stall } => {
                moved.extend(m);
                StepOutcome::Stalled { moved, stall }
            }
        }
    }
}

/// The [`crate::handoff::Coordinator`]'s batch for a planned hand-over.
fn move_batch(h: Handover) -> MoveBatch {
    MoveBatch {
        namespace: h.namespace,
        from: h.from,
        to: h.to,
        resources: h.resources,
    }
}

/// One fenced first assignment (`adopt` false) or adoption (`adopt` true)
/// of `a`, read again first; whether it was written. A resource changed
/// since it was planned (an owner key set, or gone) is left for the next
/// round. An unowned resource that has a phase is the work of the
/// manifest's unowned handler: it leaves that operator only in a phase its
/// release rule judges stable, else it waits for a later round.
pub(super) async fn assign_one(
    client: &Client,
    head: &OperatorAssignmentSpec,
    a: &plan::Assignment,
    adopt: bool,
) -> Result<bool, SyncError> {
    let id = &a.resource;
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &id.namespace, &id.kind.api_resource());
    let err = |source| SyncError::Assign {
        resource: id.clone(),
        source,
    };
    let Some(object) = api.get_opt(&id.name).await.map_err(err)? else {
        return Ok(false);
    };
    let owner = owner_of_meta(&object.metadata);
    let to = a.to.as_str();
    let result = match (adopt, owner) {
        (true, Some(o)) if o.key == OwnerKey::Annotation && o.id == to => {
            owner_writes::flip(client, id.kind, &object, to, to, &FlipGuard::default()).await
        }
        // Changed since it was read: the next round decides again.
        (_, Some(_)) | (true, None) => return Ok(false),
        (false, None) => {
            let handler = head.unowned_handler().filter(|h| {
                h.id != a.to
                    && crate::camel_k::status::phase(&object).is_some_and(|p| !p.is_empty())
            });
            let guard = match handler {
                None => FlipGuard::default(),
                Some(h) => match crate::camel_k::release::upstream_stable(id.kind, &object) {
                    Ok(phase) => FlipGuard { phase: Some(phase) },
                    Err(why) => {
                        tracing::info!(resource = %id, handler = %h.id, %why, "unowned resource busy with its handler; assigned once stable");
                        return Ok(false);
                    }
                },
            };
            owner_writes::assign(client, id.kind, &object, to, &guard).await
        }
    };
    match result.map_err(err)? {
        FlipResult::Flipped(_) => {
            let what = if adopt { "adopted" } else { "assigned" };
            tracing::info!(resource = %id, to = %a.to, because = %a.because, "{what}");
            Ok(true)
        }
        FlipResult::Refused | FlipResult::Gone => Ok(false),
    }
}

/// What hands a step over: the only part of the sync that writes owner
/// keys.
pub(super) struct OwnerWrites {
    client: Client,
    coordinator: Coordinator,
    /// What every handoff request of this sync shares.
    defaults: HandoffDefaults,
    events: Events,
    telemetry: Arc<server::Telemetry>,
    /// Whether this process has written owner keys (then the watch cache
    /// may lag its own writes).
    wrote: bool,
}

/// What every handoff request of this sync shares, whatever the manifest.
pub(super) struct HandoffDefaults {
    /// This replica, as the requests' coordinator.
    pub(super) identity: String,
    /// Lease timing of the operators' locks, to judge them alive or dead.
    pub(super) lock_timing: LockTiming,
    /// Namespace of an operator's lock the manifest does not name.
    pub(super) lock_namespace: String,
    /// How often a handoff is polled.
    pub(super) poll: Duration,
}

impl OwnerWrites {
    pub(super) fn new(
        client: Client,
        defaults: HandoffDefaults,
        events: Events,
        telemetry: Arc<server::Telemetry>,
    ) -> OwnerWrites {
        OwnerWrites {
            coordinator: Coordinator::new(client.clone()),
            client,
            defaults,
            events,
            telemetry,
            wrote: false,
        }
    }

    /// Whether this process has written owner keys.
    pub(super) fn wrote_any(&self) -> bool {
        self.wrote
    }

    /// Fenced first assignments and adoptions ([`assign_one`]); returns how
    /// many were written.
    pub(super) async fn assign(
        &mut self,
        head: &OperatorAssignmentSpec,
        planned: &plan::Plan,
    ) -> Result<usize, SyncError> {
        let mut written = 0;
        let firsts = planned.first_assignments.iter().map(|a| (a, false));
        let adoptions = planned.adoptions.iter().map(|a| (a, true));
        for (a, adopt) in firsts.chain(adoptions) {
            self.wrote = true;
            if assign_one(&self.client, head, a, adopt).await? {
                written += 1;
            }
        }
        Ok(written)
    }

    /// Co-owns the owner keys of each resource of `inventory` that another
    /// tool applies ([`owner_writes::co_own_keys`]): removing the keys from
    /// that tool's manifests then leaves them in place. Returns how many
    /// were written; a refused write is left for the next round.
    pub(super) async fn co_own(&mut self, inventory: &Inventory) -> Result<usize, SyncError> {
        let mut written = 0;
        for id in inventory
            .resources
            .iter()
            .filter(|r| r.needs_co_owner())
            .map(|r| &r.id)
        {
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), &id.namespace, &id.kind.api_resource());
            let err = |source| SyncError::Assign {
                resource: id.clone(),
                source,
            };
            let Some(object) = api.get_opt(&id.name).await.map_err(err)? else {
                continue;
            };
            if let FlipResult::Flipped(_) =
                owner_writes::co_own_keys(&self.client, id.kind, &object)
                    .await
                    .map_err(err)?
            {
                written += 1;
                tracing::info!(resource = %id, "co-owning owner keys another tool applies");
            }
        }
        Ok(written)
    }

    fn options(&self, spec: &OperatorAssignmentSpec, from: &api::OperatorId) -> HandoffOptions {
        let protocol = spec
            .operators
            .iter()
            .find(|o| &o.id == from)
            .map(|o| o.protocol)
            .unwrap_or_default();
        let drain = parse_duration(&spec.handoff.drain_timeout).unwrap_or(Duration::from_secs(300));
        let (drain_timeout, force) = match spec.handoff.force {
            ManifestForce::Never => (drain, ForcePolicy::Never),
            ManifestForce::AfterTimeout => {
                let after = spec
                    .handoff
                    .force_after
                    .as_deref()
                    .and_then(parse_duration)
                    .unwrap_or(Duration::ZERO);
                (drain + after, ForcePolicy::AfterDrainTimeout)
            }
        };
        HandoffOptions {
            coordinator: format!("{LOCK_ID}/{}", self.defaults.identity),
            mode: match protocol {
                Protocol::Handoff => ReleaseMode::Protocol,
                Protocol::Upstream => ReleaseMode::Upstream,
            },
            drain_timeout,
            force,
            lock_timing: self.defaults.lock_timing,
            lock_namespaces: spec
                .operators
                .iter()
                .map(|o| (o.id.to_string(), o.namespace.clone()))
                .collect(),
            default_lock_namespace: self.defaults.lock_namespace.clone(),
            poll: self.defaults.poll,
        }
    }

    /// Drives to their end the handoff requests an earlier process left for
    /// the plan's moves (it was killed while they were pending), so that
    /// nothing is requested twice and no request Lease is left behind.
    pub(super) async fn resume_left_requests(
        &mut self,
        spec: &OperatorAssignmentSpec,
        plan: &plan::Plan,
    ) -> Result<StepOutcome, SyncError> {
        let mut outcome = StepOutcome::Moved(BTreeSet::new());
        for (namespace, from, to) in rollout::pairs(plan) {
            let leases: Api<Lease> = Api::namespaced(self.client.clone(), &namespace);
            let selector = format!("{FROM_LABEL}={from},{TO_LABEL}={to}");
            let left = leases
                .list(&ListParams::default().labels(&selector))
                .await
                .map_err(|source| SyncError::Requests {
                    namespace: namespace.clone(),
                    source,
                })?;
            for lease in left.items {
                let Ok(request) = HandoffRequest::from_lease(&lease) else {
                    continue;
                };
                tracing::info!(request = %request.name, "resuming a handoff request left by an earlier run");
                self.wrote = true;
                let group = MoveBatch {
                    namespace: namespace.clone(),
                    from: from.clone(),
                    to: to.clone(),
                    resources: request
                        .spec
                        .items
                        .iter()
                        .map(|i| (i.kind, i.name.clone()))
                        .collect(),
                };
                let opts = self.options(spec, &from);
                let driven = self
                    .coordinator
                    .drive(&request, &group, &opts, vec![], &mut |_| {})
                    .await;
                outcome = outcome.then(outcome_of(&group, driven)?);
                if outcome.stalled().is_some() {
                    return Ok(outcome);
                }
            }
        }
        Ok(outcome)
    }

    /// Hands a step's pending moves over, one request per namespace, source
    /// and target; stops at the first that cannot finish.
    pub(super) async fn execute(
        &mut self,
        spec: &OperatorAssignmentSpec,
        batch: &Batch,
        live: &LiveOwners,
        step: &str,
    ) -> Result<StepOutcome, SyncError> {
        let mut outcome = StepOutcome::Moved(BTreeSet::new());
        for group in rollout::handoffs(batch, live) {
            outcome = outcome.then(self.hand_over(spec, move_batch(group), step).await?);
            if outcome.stalled().is_some() {
                break;
            }
        }
        Ok(outcome)
    }

    /// One handoff through the coordinator, timed in the metrics, with a
    /// `Moved` Event per resource it moved.
    async fn hand_over(
        &mut self,
        spec: &OperatorAssignmentSpec,
        mut group: MoveBatch,
        step: &str,
    ) -> Result<StepOutcome, SyncError> {
        self.wrote = true;
        let opts = self.options(spec, &group.from);
        self.telemetry.handoffs_in_progress.inc();
        let started = Instant::now();
        // A resource that is not where the plan saw it (another owner, or
        // deleted) is left out and the rest of the group goes on; one that
        // changed hands makes the step stall, naming it.
        let mut left_out = Vec::new();
        let outcome = loop {
            let outcome = self
                .coordinator
                .execute(&group, &opts, &mut |p| {
                    tracing::debug!(done = p.done, total = p.total, waiting_on = ?p.waiting_on, "handoff progress");
                })
                .await;
            let (kind, name) = match &outcome {
                Err(e @ HandoffError::WrongOwner { kind, name, .. }) => {
                    tracing::warn!(error = %e, "left out of the handoff");
                    left_out.push(e.to_string());
                    (*kind, name.clone())
                }
                Err(HandoffError::NotFound { kind, name, .. }) => (*kind, name.clone()),
                _ => break outcome,
            };
            group.resources.retain(|r| *r != (kind, name.clone()));
            if group.resources.is_empty() {
                break Ok(HandoffOutcome::Completed {
                    moved: vec![],
                    already_there: vec![],
                    taken_over: vec![],
                    gone: vec![],
                });
            }
        };
        self.telemetry.handoffs_in_progress.dec();
        self.telemetry
            .handoff_duration
            .observe(started.elapsed().as_secs_f64());
        let outcome = outcome_of(&group, outcome)?;
        self.events.moved(&group, outcome.moved(), step).await;
        Ok(match outcome {
            StepOutcome::Moved(moved) if !left_out.is_empty() => StepOutcome::Stalled {
                moved,
                stall: Stall::waiting(format!(
                    "not moved, owned by someone else than the plan saw: {}",
                    left_out.join("; ")
                )),
            },
            outcome => outcome,
        })
    }
}

/// What a handoff of `group` moved, or why it could not finish (the rollout
/// pauses); an error that is no reason to pause fails the round.
fn outcome_of(
    group: &MoveBatch,
    outcome: Result<HandoffOutcome, HandoffError>,
) -> Result<StepOutcome, SyncError> {
    let stalled = |stall| StepOutcome::Stalled {
        moved: BTreeSet::new(),
        stall,
    };
    let not_alive = |message| {
        stalled(Stall {
            message,
            target_not_alive: Some(group.to.clone()),
        })
    };
    match outcome {
        Ok(HandoffOutcome::Completed {
            moved, taken_over, ..
        }) => Ok(StepOutcome::Moved(
            moved
                .into_iter()
                .chain(taken_over)
                .map(|r| (group.namespace.clone(), r))
                .collect(),
        )),
        Ok(HandoffOutcome::Stalled { waiting, .. }) => {
            let why: Vec<String> = waiting
                .iter()
                .map(|(r, why)| format!("{}/{r}: {why}", group.namespace))
                .collect();
            Ok(stalled(Stall::waiting(format!(
                "handoff from {} to {} stalled: {}",
                group.from,
                group.to,
                why.join("; ")
            ))))
        }
        Ok(HandoffOutcome::TargetDead { remaining, .. }) => Ok(not_alive(format!(
            "target operator {} stopped renewing its lock; handoff withdrawn, still with {}: {}",
            group.to,
            group.from,
            remaining.join(", ")
        ))),
        Err(e @ HandoffError::TargetNotAlive(..)) => Ok(not_alive(e.to_string())),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::OperatorId;
    use crate::camel_k::CamelKind;

    fn group() -> MoveBatch {
        MoveBatch {
            namespace: "a".into(),
            from: OperatorId::new("operator-1").unwrap(),
            to: OperatorId::new("operator-2").unwrap(),
            resources: vec![(CamelKind::Integration, "x".into())],
        }
    }

    fn set(items: &[&str]) -> BTreeSet<(String, String)> {
        items
            .iter()
            .map(|i| ("a".to_string(), i.to_string()))
            .collect()
    }

    #[test]
    fn a_completed_handoff_names_what_moved_and_what_was_taken_over() {
        let done = outcome_of(
            &group(),
            Ok(HandoffOutcome::Completed {
                moved: vec!["Integration/x".into()],
                already_there: vec!["Integration/y".into()],
                taken_over: vec!["Integration/z".into()],
                gone: vec![],
            }),
        )
        .unwrap();
        assert_eq!(
            done,
            StepOutcome::Moved(set(&["Integration/x", "Integration/z"]))
        );
    }

    #[test]
    fn a_dead_target_stalls_the_step_naming_what_is_left() {
        let dead = outcome_of(
            &group(),
            Ok(HandoffOutcome::TargetDead {
                moved: vec![],
                remaining: vec!["Integration/x".into()],
            }),
        );
        let stall = dead.unwrap().stalled().cloned().unwrap();
        assert_eq!(
            stall.message,
            "target operator operator-2 stopped renewing its lock; handoff withdrawn, \
             still with operator-1: Integration/x"
        );
        assert_eq!(stall.reason(), "TargetNotAlive");
        assert_eq!(stall.target_not_alive.unwrap().as_str(), "operator-2");
    }

    #[test]
    fn a_target_down_is_told_apart_from_a_slow_release() {
        let reason = |outcome| {
            let stall = outcome_of(&group(), outcome).unwrap().stalled().cloned();
            let stall = stall.expect("a stall");
            (
                stall.reason(),
                stall.target_not_alive.map(|id| id.to_string()),
            )
        };
        let before = Err(HandoffError::TargetNotAlive(
            "operator-2".into(),
            "camel-k-lock".into(),
        ));
        assert_eq!(
            reason(before),
            ("TargetNotAlive", Some("operator-2".to_string()))
        );
        let slow = Ok(HandoffOutcome::Stalled {
            moved: vec![],
            waiting: vec![("Integration/x".into(), "phase Building".into())],
        });
        assert_eq!(reason(slow), ("HandoffStalled", None));
    }

    #[test]
    fn outcomes_add_up_and_a_stall_ends_them() {
        let first = StepOutcome::Moved(set(&["Integration/x"]));
        let both = first.then(StepOutcome::Moved(set(&["Integration/y"])));
        assert_eq!(both.moved().len(), 2);
        assert_eq!(both.stalled(), None);
        let stalled = both.then(StepOutcome::Stalled {
            moved: set(&["Integration/z"]),
            stall: Stall::waiting("why".into()),
        });
        assert_eq!(stalled.moved().len(), 3);
        let stall = stalled.stalled().unwrap();
        assert_eq!(
            (stall.message.as_str(), stall.reason()),
            ("why", "HandoffStalled")
        );
    }
}

//! Where a rollout stands and which moves come next, derived from the
//! cluster and two revisions only: the one place that decides the sync's
//! moves (rollout steps, drift repair, key repair and a rollback's reversal).
//!
//! Contract (pure, no I/O):
//! - The rollout of revision `head` is the plan engine's plan of `head`
//!   against the manifest of the last applied revision (`base`), the plan a
//!   pull request showed ([`plan`]); without a base, against live owner keys.
//!   Phases are left unknown, so the batches depend only on the two manifests
//!   and the resources' labels: the same plan comes out however far the
//!   rollout went. A move whose owner is mid-work is not skipped: the handoff
//!   waits for the owner to release it.
//! - The cluster need not be where `base` says: a rollout that a newer
//!   revision superseded moved some resources and not others. A move starts
//!   from its resource's live owner, and a resource `head` wants elsewhere
//!   that the two manifests leave alone moves in one last step. So a revision
//!   is applied only once every resource is where it says.
//! - Each move is [`MoveState::Done`] once its live owner is its target, and
//!   [`MoveState::Pending`] while its live owner is its source. A step is
//!   done when none of its moves is pending; [`position`] is the first step
//!   that is not. Killed and restarted, the reconciler finds the same
//!   position: it never repeats a finished step nor skips an unfinished one.
//! - Once a revision is applied, a pending move is drift ([`drift`]): an
//!   owner changed by hand, moved back by the same steps (owner keys that
//!   disagree are set right before, as adoptions: [`crate::plan::Plan::adoptions`]);
//!   a failed gate under `onFailure: Rollback` hands a step's moves back
//!   ([`reversal`]).
//! - Every move leaves here as a [`Handover`] (one namespace, one source,
//!   one target); the handoff executor carries it out. A move asked for by
//!   hand (`kubectl camelk move`) is grouped the same way ([`by_hand`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::api::{OperatorAssignmentSpec, OperatorId};
use crate::camel_k::CamelKind;
use crate::inventory::{Inventory, Owner, ResourceRef};
use crate::plan::{self, Actual, Batch, Desired, Move, Plan};

/// The rollout plan of `head` from `base` (see the module doc).
pub(crate) fn plan(
    head: &OperatorAssignmentSpec,
    base: Option<&OperatorAssignmentSpec>,
    inventory: &Inventory,
) -> Plan {
    // The sync's own reads are metadata only, so a copy without phases is
    // rarely needed; at 10,000 resources it would be a few MiB.
    let labels_only;
    let inventory = if inventory
        .resources
        .iter()
        .all(|r| r.phase.is_none() && r.in_flight.is_none())
    {
        inventory
    } else {
        let mut copy = inventory.clone();
        for resource in &mut copy.resources {
            resource.phase = None;
            resource.in_flight = None;
        }
        labels_only = copy;
        &labels_only
    };
    let Some(base) = base else {
        return plan::plan(head, Actual::OwnerKeys, inventory);
    };
    let mut planned = plan::plan(head, Actual::Manifest(base), inventory);
    from_live_owners(&mut planned, head, inventory);
    planned
}

/// Makes `planned` (of `head` from a base manifest) start from the live
/// owners of `inventory`: a move not yet done starts from its resource's
/// live owner, and the resources `head` wants elsewhere that `planned`
/// leaves alone move in one last step. A done move reads as planned, so the
/// batches stay the same as the rollout advances; the last step goes once
/// it is done.
fn from_live_owners(planned: &mut Plan, head: &OperatorAssignmentSpec, inventory: &Inventory) {
    let live = plan::plan(head, Actual::OwnerKeys, inventory);
    if live.batches.is_empty() {
        return;
    }
    let mut live_from: HashMap<&ResourceRef, &OperatorId> =
        live.moves().map(|m| (&m.resource, &m.from)).collect();
    for m in planned.batches.iter_mut().flat_map(|b| &mut b.moves) {
        if let Some(from) = live_from.remove(&m.resource) {
            m.from = from.clone();
        }
    }
    let mut moves: Vec<Move> = live
        .moves()
        .filter(|m| live_from.contains_key(&m.resource))
        .cloned()
        .collect();
    if moves.is_empty() {
        return;
    }
    let step = planned.batches.last().map_or(1, |b| b.step + 1);
    moves.sort_by(|a, b| a.resource.cmp(&b.resource));
    planned.batches.push(Batch { step, moves });
}

/// A planned move, as the cluster shows it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum MoveState {
    /// The live owner is the move's target.
    Done,
    /// The live owner is the move's source: the handoff is still to do.
    Pending,
    /// Nobody owns it: a first assignment gives it its owner.
    Unowned,
    /// Someone else owns it, or its keys disagree; the rollout leaves it.
    Diverged(String),
    /// It no longer exists.
    Gone,
}

/// Live owners by resource.
pub(crate) struct LiveOwners(HashMap<ResourceRef, Owner>);

impl LiveOwners {
    pub(crate) fn new(inventory: &Inventory) -> LiveOwners {
        LiveOwners(
            inventory
                .resources
                .iter()
                .map(|r| (r.id.clone(), r.owner()))
                .collect(),
        )
    }

    pub(crate) fn state(&self, m: &Move) -> MoveState {
        match self.0.get(&m.resource) {
            None => MoveState::Gone,
            Some(Owner::Nobody) => MoveState::Unowned,
            Some(Owner::Operator(o)) if *o == m.to => MoveState::Done,
            Some(Owner::Operator(o)) if *o == m.from => MoveState::Pending,
            Some(Owner::Operator(o)) => MoveState::Diverged(format!("owned by {o}")),
            Some(Owner::Conflict(why)) => MoveState::Diverged(why.clone()),
        }
    }

    /// Resources per current owner, of those `spec` governs.
    pub(crate) fn counts(&self, spec: &OperatorAssignmentSpec) -> BTreeMap<String, u64> {
        let scope = Desired::new(spec);
        let mut counts = BTreeMap::new();
        for (id, owner) in &self.0 {
            if !scope.in_scope(id.kind, &id.namespace) {
                continue;
            }
            let key = match owner {
                Owner::Operator(o) => o.to_string(),
                Owner::Nobody => "(unassigned)".to_string(),
                Owner::Conflict(_) => "(conflict)".to_string(),
            };
            *counts.entry(key).or_default() += 1;
        }
        counts
    }
}

/// Where a rollout stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Position {
    /// Leading batches with no pending move.
    pub(crate) done: usize,
    /// Batches in the plan.
    pub(crate) total: usize,
}

impl Position {
    #[cfg(test)]
    fn is_complete(&self) -> bool {
        self.done == self.total
    }
}

/// The first batch with a pending move (all batches after it are counted
/// as not done even if some of their moves happen to be).
pub(crate) fn position(plan: &Plan, live: &LiveOwners) -> Position {
    let done = plan
        .batches
        .iter()
        .take_while(|b| !b.moves.iter().any(|m| live.state(m) == MoveState::Pending))
        .count();
    Position {
        done,
        total: plan.batches.len(),
    }
}

/// Resources of one namespace to hand from one operator to another: one
/// handoff request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handover {
    /// Namespace of every resource of the request.
    pub namespace: String,
    /// The operator that owns them now.
    pub from: OperatorId,
    /// The operator they go to.
    pub to: OperatorId,
    /// Kind and name of each resource, in the order they were named or planned.
    pub resources: Vec<(CamelKind, String)>,
}

/// Groups `moves` into handovers, ordered by namespace, source and target.
fn handovers<'a>(moves: impl Iterator<Item = &'a Move>) -> Vec<Handover> {
    let mut groups: BTreeMap<(String, OperatorId, OperatorId), Vec<(CamelKind, String)>> =
        BTreeMap::new();
    for m in moves {
        groups
            .entry((m.resource.namespace.clone(), m.from.clone(), m.to.clone()))
            .or_default()
            .push((m.resource.kind, m.resource.name.clone()));
    }
    groups
        .into_iter()
        .map(|((namespace, from, to), resources)| Handover {
            namespace,
            from,
            to,
            resources,
        })
        .collect()
}

/// The pending moves of `batch`, one handoff per namespace, source and target.
pub(crate) fn handoffs(batch: &Batch, live: &LiveOwners) -> Vec<Handover> {
    handovers(
        batch
            .moves
            .iter()
            .filter(|m| live.state(m) == MoveState::Pending),
    )
}

/// The namespaces, sources and targets `plan` hands resources between: where
/// a handoff request an earlier process left may wait.
pub(crate) fn pairs(plan: &Plan) -> BTreeSet<(String, OperatorId, OperatorId)> {
    plan.moves()
        .map(|m| (m.resource.namespace.clone(), m.from.clone(), m.to.clone()))
        .collect()
}

/// Whether every resource of `inventory` is where `head` says: none waits
/// for its first owner or its adoption, and none is owned elsewhere. As a
/// rollout starts from live owners, this is also when the rollout of `head`
/// from any base is complete. Unlike [`Plan::has_changes`], resources the
/// plan cannot decide about do not count, nor moves held by a tool that
/// applies the owner keys: no round settles them, and with them counted a
/// round would never trust the watch cache again.
pub(crate) fn settled(head: &OperatorAssignmentSpec, inventory: &Inventory) -> bool {
    let planned = plan::plan(head, Actual::OwnerKeys, inventory);
    planned.first_assignments.is_empty()
        && planned.adoptions.is_empty()
        && planned.batches.is_empty()
        && planned
            .blocked
            .iter()
            .all(|b| matches!(b.why, plan::BlockReason::KeysApplied { .. }))
}

/// How the cluster differs from an applied revision, each difference
/// described for people.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Drift {
    /// Owners changed by hand: the rollout moves them back (under
    /// `driftPolicy: revert`).
    pub(crate) moved: Vec<String>,
    /// Owner keys that disagree and that the sync cannot set right (another
    /// tool applies them), and owners that are no valid id.
    pub(crate) conflicts: Vec<String>,
}

impl Drift {
    pub(crate) fn is_empty(&self) -> bool {
        self.moved.is_empty() && self.conflicts.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.moved.len() + self.conflicts.len()
    }
}

/// Drift in the plan of an applied revision (see [`Drift`]).
pub(crate) fn drift(plan: &Plan, live: &LiveOwners) -> Drift {
    Drift {
        moved: plan
            .moves()
            .filter(|m| live.state(m) == MoveState::Pending)
            .map(|m| format!("{} is with {}, not {}", m.resource, m.from, m.to))
            .collect(),
        conflicts: plan
            .conflicts
            .iter()
            .filter(|c| !c.mended)
            .map(ToString::to_string)
            .chain(
                plan.errors
                    .iter()
                    .map(|e| format!("{}: {}", e.resource, e.message)),
            )
            .collect(),
    }
}

/// The moves of `steps` handed back, as one batch numbered `step`: a
/// rollback after a failed health gate.
pub(crate) fn reversal(steps: &[Batch], step: usize) -> Batch {
    Batch {
        step,
        moves: steps
            .iter()
            .flat_map(|b| &b.moves)
            .map(|m| Move {
                from: m.to.clone(),
                to: m.from.clone(),
                ..m.clone()
            })
            .collect(),
    }
}

/// A resource named in a move asked for by hand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Named {
    /// Its Camel K kind.
    pub kind: CamelKind,
    /// Its name, in the move's namespace.
    pub name: String,
    /// Its live owner, by the one owner rule (label, else annotation).
    pub owner: Option<String>,
}

/// Why a move asked for by hand cannot be planned.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ByHandError {
    /// The resource carries no owner key: it needs its first assignment,
    /// which comes from Git.
    #[error("{kind} {namespace}/{name} has no owner yet")]
    Unowned {
        /// Kind of the resource.
        kind: CamelKind,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The owner key holds something that is not an operator id.
    #[error("{kind} {namespace}/{name} names an invalid owner `{owner}`: {reason}")]
    InvalidOwner {
        /// Kind of the resource.
        kind: CamelKind,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The owner key's value.
        owner: String,
        /// Why it is not a valid operator id.
        reason: String,
    },
}

/// The handovers of a move asked for by hand: every named resource of
/// `namespace` goes from its live owner to `to`, one handover per owner,
/// ordered by owner. A resource already with `to` stays in a handover from
/// `to` to `to`, which the executor reports as already there. A resource
/// with no owner cannot be moved (it needs its first assignment, from Git).
pub fn by_hand(
    namespace: &str,
    to: &OperatorId,
    named: Vec<Named>,
) -> Result<Vec<Handover>, ByHandError> {
    let mut groups: BTreeMap<OperatorId, Vec<(CamelKind, String)>> = BTreeMap::new();
    for Named { kind, name, owner } in named {
        let Some(owner) = owner else {
            return Err(ByHandError::Unowned {
                kind,
                namespace: namespace.to_string(),
                name,
            });
        };
        let from = OperatorId::new(owner.clone()).map_err(|e| ByHandError::InvalidOwner {
            kind,
            namespace: namespace.to_string(),
            name: name.clone(),
            owner,
            reason: e.to_string(),
        })?;
        groups.entry(from).or_default().push((kind, name));
    }
    Ok(groups
        .into_iter()
        .map(|(from, resources)| Handover {
            namespace: namespace.to_string(),
            from,
            to: to.clone(),
            resources,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{OperatorAssignment, Step};
    use crate::camel_k::OPERATOR_ID_KEY;
    use crate::inventory::Resource;

    fn spec(yaml: &str) -> OperatorAssignmentSpec {
        serde_saphyr::from_str::<OperatorAssignment>(yaml)
            .unwrap()
            .spec
    }

    const BASE: &str = "apiVersion: camelk.dev/v1alpha1\nkind: OperatorAssignment\nmetadata: {name: a}\nspec:\n  operators: [{id: operator-1, namespace: x}, {id: operator-2, namespace: x}]\n  defaultOperator: operator-1\n";

    fn head() -> OperatorAssignmentSpec {
        let mut s = spec(BASE);
        s.staged_moves = vec![crate::api::StagedMove {
            from: OperatorId::new("operator-1").unwrap(),
            to: OperatorId::new("operator-2").unwrap(),
            selector: None,
            steps: vec![Step::Percent(10), Step::Percent(50), Step::Percent(100)],
        }];
        s
    }

    fn inventory(owners: &[(&str, &str, Option<&str>)]) -> Inventory {
        Inventory {
            keys_guarded: false,
            resources: owners
                .iter()
                .map(|(ns, name, owner)| Resource {
                    phase: Some("Building Kit".into()),
                    ..Resource::integration(ns, name, *owner)
                })
                .collect(),
        }
    }

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("it-{i:02}")).collect()
    }

    #[test]
    fn the_plan_and_its_batches_do_not_change_as_the_rollout_advances() {
        let all = names(10);
        let before: Vec<_> = all
            .iter()
            .map(|n| ("a", n.as_str(), Some("operator-1")))
            .collect();
        let base = spec(BASE);
        let p0 = plan(&head(), Some(&base), &inventory(&before));
        assert_eq!(
            p0.batches.iter().map(|b| b.moves.len()).collect::<Vec<_>>(),
            vec![1, 4, 5]
        );
        assert!(p0.blocked.is_empty(), "phases never block the rollout plan");
        // After the first two steps (5 moved), the same plan and position 2.
        let mut after = before.clone();
        for entry in after.iter_mut().take(5) {
            entry.2 = Some("operator-2");
        }
        let inv = inventory(&after);
        let p1 = plan(&head(), Some(&base), &inv);
        assert_eq!(p0, p1);
        let live = LiveOwners::new(&inv);
        assert_eq!(position(&p1, &live), Position { done: 2, total: 3 });
        let groups = handoffs(&p1.batches[2], &live);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].resources.len(), 5);
        // Killed mid-step: the step is not done, and only its remainder is handed off.
        after[6].2 = Some("operator-2");
        let inv = inventory(&after);
        let live = LiveOwners::new(&inv);
        assert_eq!(position(&p1, &live).done, 2);
        assert_eq!(handoffs(&p1.batches[2], &live)[0].resources.len(), 4);
        assert_eq!(live.counts(&head())["operator-2"], 6);
        let mut elsewhere = head();
        elsewhere.scope.namespaces = vec!["b".into()];
        assert!(live.counts(&elsewhere).is_empty());
    }

    #[test]
    fn moves_are_grouped_by_namespace_and_states_are_named() {
        let inv = inventory(&[
            ("a", "x", Some("operator-1")),
            ("b", "y", Some("operator-1")),
            ("b", "z", None),
            ("b", "w", Some("operator-3")),
        ]);
        let p = plan(&head(), Some(&spec(BASE)), &inv);
        let live = LiveOwners::new(&inv);
        let all: Vec<&Move> = p.moves().collect();
        assert_eq!(all.len(), 4);
        let states: Vec<MoveState> = all.iter().map(|m| live.state(m)).collect();
        assert!(states.contains(&MoveState::Unowned));
        // The plan starts from live owners: operator-3 hands `w` over.
        assert_eq!(
            states.iter().filter(|s| **s == MoveState::Pending).count(),
            3
        );
        let groups: Vec<(String, String, usize)> = p
            .batches
            .iter()
            .flat_map(|b| handoffs(b, &live))
            .map(|g| (g.namespace, g.from.to_string(), g.resources.len()))
            .collect();
        assert_eq!(
            groups,
            vec![
                ("a".to_string(), "operator-1".to_string(), 1),
                ("b".to_string(), "operator-3".to_string(), 1),
                ("b".to_string(), "operator-1".to_string(), 1),
            ]
        );
        // Read again after another owner took `y`: that move has diverged.
        let now = inventory(&[("b", "y", Some("operator-3"))]);
        let y = all.iter().find(|m| m.resource.name == "y").unwrap();
        assert_eq!(
            LiveOwners::new(&now).state(y),
            MoveState::Diverged("owned by operator-3".into())
        );
    }

    #[test]
    fn a_superseded_rollout_is_finished_by_the_revision_after_it() {
        // Applied: everything with operator-1. A rollout of everything to
        // operator-2 moved a0, a1 and b0, then a revision that wants only
        // namespace `a` with operator-2 superseded it.
        let (base, only_a) = (revision(0), revision(2));
        let mut owners = vec![
            ("a", "a0", Some("operator-2")),
            ("a", "a1", Some("operator-2")),
            ("a", "a2", Some("operator-1")),
            ("b", "b0", Some("operator-2")),
            ("b", "b1", Some("operator-1")),
        ];
        let p = plan(&only_a, Some(&base), &inventory(&owners));
        let steps: Vec<Vec<(&str, &str, &str)>> = p
            .batches
            .iter()
            .map(|b| {
                b.moves
                    .iter()
                    .map(|m| (m.resource.name.as_str(), m.from.as_str(), m.to.as_str()))
                    .collect()
            })
            .collect();
        assert_eq!(
            steps,
            vec![
                vec![
                    ("a0", "operator-1", "operator-2"),
                    ("a1", "operator-1", "operator-2"),
                    ("a2", "operator-1", "operator-2"),
                ],
                // The revisions leave b0 alone; the cluster does not.
                vec![("b0", "operator-2", "operator-1")],
            ]
        );
        let live = LiveOwners::new(&inventory(&owners));
        assert_eq!(position(&p, &live), Position { done: 0, total: 2 });
        // Step 1 done: the same plan, at its last step.
        owners[2].2 = Some("operator-2");
        let inv = inventory(&owners);
        assert_eq!(plan(&only_a, Some(&base), &inv), p);
        assert_eq!(position(&p, &LiveOwners::new(&inv)).done, 1);
        assert!(!settled(&only_a, &inv));
        // b0 back: the last step is gone, and nothing is left.
        owners[3].2 = Some("operator-1");
        let inv = inventory(&owners);
        let done = plan(&only_a, Some(&base), &inv);
        assert_eq!(done.batches, p.batches[..1]);
        assert!(settled(&only_a, &inv));
    }

    fn with_keys(ns: &str, name: &str, label: Option<&str>, annotation: Option<&str>) -> Resource {
        Resource {
            id: ResourceRef {
                kind: CamelKind::Integration,
                namespace: ns.to_string(),
                name: name.to_string(),
            },
            labels: label
                .map(|o| {
                    [(OPERATOR_ID_KEY.to_string(), o.to_string())]
                        .into_iter()
                        .collect()
                })
                .unwrap_or_default(),
            owner_annotation: annotation.map(str::to_string),
            phase: None,
            in_flight: None,
            created_by: None,
            key_managers: Default::default(),
        }
    }

    #[test]
    fn drift_names_owners_changed_by_hand_and_keys_that_disagree() {
        let base = spec(BASE);
        let inv = Inventory {
            keys_guarded: false,
            resources: vec![
                with_keys("a", "kept", Some("operator-1"), Some("operator-1")),
                with_keys("a", "taken", Some("operator-2"), Some("operator-2")),
                with_keys("a", "torn", Some("operator-1"), Some("operator-2")),
            ],
        };
        // Applied: everything with operator-1. By hand: one moved, one torn.
        let p = plan(&base, None, &inv);
        let live = LiveOwners::new(&inv);
        let d = drift(&p, &live);
        // Torn keys: the annotation owns (upstream obeys it), so the
        // resource is with operator-2; the label is set right as an
        // adoption, which drift does not list.
        assert_eq!(
            d.moved,
            vec![
                "Integration a/taken is with operator-2, not operator-1".to_string(),
                "Integration a/torn is with operator-2, not operator-1".to_string(),
            ]
        );
        assert!(d.conflicts.is_empty(), "{d:?}");
        assert_eq!(d.len(), 2);
        // A tool that applies the torn keys keeps them torn: reported.
        let mut applied = inv.clone();
        applied.resources[2].key_managers.label_applier = Some("kustomize-controller".into());
        let d = drift(&plan(&base, None, &applied), &LiveOwners::new(&applied));
        assert_eq!(d.conflicts.len(), 1, "{d:?}");
        assert!(
            d.conflicts[0].starts_with("Integration a/torn: its label says `operator-1`")
                && d.conflicts[0].contains("kustomize-controller"),
            "{d:?}"
        );
        // Nothing differs: no drift.
        let calm = Inventory {
            keys_guarded: false,
            resources: vec![with_keys("a", "kept", Some("operator-1"), None)],
        };
        let p = plan(&base, None, &calm);
        assert!(drift(&p, &LiveOwners::new(&calm)).is_empty());
    }

    #[test]
    fn a_reversal_hands_every_move_of_its_steps_back() {
        let inv = inventory(
            &names(10)
                .iter()
                .map(|n| ("a", n.as_str(), Some("operator-1")))
                .collect::<Vec<_>>(),
        );
        let p = plan(&head(), Some(&spec(BASE)), &inv);
        let back = reversal(&p.batches[..2], 2);
        assert_eq!(back.step, 2);
        assert_eq!(back.moves.len(), 5);
        assert!(
            back.moves
                .iter()
                .all(|m| m.from.as_str() == "operator-2" && m.to.as_str() == "operator-1")
        );
        let first: Vec<&ResourceRef> = p.batches[0].moves.iter().map(|m| &m.resource).collect();
        assert_eq!(back.moves[0].resource, *first[0]);
    }

    #[test]
    fn pairs_and_settled_say_what_is_left() {
        let before: Vec<_> = names(4).into_iter().map(|n| ("a".to_string(), n)).collect();
        let owned = |owner: &'static str| {
            inventory(
                &before
                    .iter()
                    .map(|(ns, n)| (ns.as_str(), n.as_str(), Some(owner)))
                    .collect::<Vec<_>>(),
            )
        };
        let base = spec(BASE);
        let start = owned("operator-1");
        let p = plan(&head(), Some(&base), &start);
        let all: Vec<_> = pairs(&p).into_iter().collect();
        assert_eq!(
            all,
            vec![(
                "a".to_string(),
                OperatorId::new("operator-1").unwrap(),
                OperatorId::new("operator-2").unwrap()
            )]
        );
        assert!(!settled(&head(), &start));
        assert!(settled(&head(), &owned("operator-2")));
        // A resource without an owner waits for its first assignment.
        let mut unowned = owned("operator-2");
        unowned.resources[0].labels.clear();
        unowned.resources[0].owner_annotation = None;
        assert!(!settled(&head(), &unowned));
        // One named by the annotation alone waits for its adoption.
        let mut annotated = owned("operator-2");
        annotated.resources[0].labels.clear();
        assert!(!settled(&head(), &annotated));
    }

    #[test]
    fn a_move_by_hand_groups_by_live_owner_and_refuses_unowned() {
        let id = |s: &str| OperatorId::new(s).unwrap();
        let named = |name: &str, owner: Option<&str>| Named {
            kind: CamelKind::Integration,
            name: name.into(),
            owner: owner.map(str::to_string),
        };
        let handovers = by_hand(
            "shop",
            &id("operator-2"),
            vec![
                named("b", Some("operator-3")),
                named("a", Some("operator-1")),
                named("c", Some("operator-1")),
                named("d", Some("operator-2")),
            ],
        )
        .unwrap();
        let summary: Vec<(String, String, Vec<String>)> = handovers
            .iter()
            .map(|h| {
                assert_eq!(
                    (h.namespace.as_str(), h.to.as_str()),
                    ("shop", "operator-2")
                );
                let names = h.resources.iter().map(|(_, n)| n.clone()).collect();
                (h.from.to_string(), h.to.to_string(), names)
            })
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "operator-1".into(),
                    "operator-2".into(),
                    vec!["a".into(), "c".into()]
                ),
                ("operator-2".into(), "operator-2".into(), vec!["d".into()]),
                ("operator-3".into(), "operator-2".into(), vec!["b".into()]),
            ]
        );
        let err = by_hand("shop", &id("operator-2"), vec![named("a", None)]).unwrap_err();
        assert_eq!(err.to_string(), "Integration shop/a has no owner yet");
        let err = by_hand("shop", &id("operator-2"), vec![named("a", Some("-bad"))]);
        assert!(
            matches!(err, Err(ByHandError::InvalidOwner { .. })),
            "{err:?}"
        );
    }

    /// Four manifests a revision may be: everything with operator-1, a
    /// staged move of everything to operator-2, namespace `a` with
    /// operator-2, everything with operator-3.
    fn revision(i: usize) -> OperatorAssignmentSpec {
        let mut s = spec(
            "apiVersion: camelk.dev/v1alpha1\nkind: OperatorAssignment\nmetadata: {name: a}\nspec:\n  operators: [{id: operator-1, namespace: x}, {id: operator-2, namespace: x}, {id: operator-3, namespace: x}]\n  defaultOperator: operator-1\n",
        );
        match i {
            0 => {}
            1 => s.staged_moves = head().staged_moves,
            2 => {
                s.rules = vec![crate::api::Rule {
                    name: None,
                    matches: crate::api::Match {
                        namespaces: vec!["a".into()],
                        ..Default::default()
                    },
                    operator: OperatorId::new("operator-2").unwrap(),
                }]
            }
            _ => s.default_operator = OperatorId::new("operator-3").unwrap(),
        }
        s
    }

    proptest::proptest! {
        /// Whatever an earlier rollout left, a revision's rollout carried out
        /// step by step (planned again before each, as a restarted sync
        /// does) keeps its steps and ends with every owned resource where
        /// the revision wants it.
        #[test]
        fn a_rollout_ends_where_its_revision_says_from_any_cluster(
            base in 0..4usize,
            head_at in 0..4usize,
            owners in proptest::collection::btree_map((0..2usize, 0..6usize), proptest::option::of(1..4usize), 0..12),
        ) {
            let (base, head) = (revision(base), revision(head_at));
            let mut live: Vec<(String, String, Option<String>)> = owners
                .into_iter()
                .map(|((ns, i), o)| (["a", "b"][ns].to_string(), format!("it-{i}"), o.map(|o| format!("operator-{o}"))))
                .collect();
            let inventory_of = |live: &[(String, String, Option<String>)]| {
                let borrowed: Vec<(&str, &str, Option<&str>)> = live
                    .iter()
                    .map(|(ns, n, o)| (ns.as_str(), n.as_str(), o.as_deref()))
                    .collect();
                inventory(&borrowed)
            };
            // The round's first assignments come before its plan.
            let wanted = Desired::new(&head);
            let resources: Vec<Resource> = inventory_of(&live).resources;
            for (entry, r) in live.iter_mut().zip(resources) {
                if entry.2.is_none() {
                    entry.2 = wanted.decide(&r).map(|d| d.operator.to_string());
                }
            }
            let first = plan(&head, Some(&base), &inventory_of(&live));
            let mut done = 0;
            for _ in 0..first.batches.len() {
                let inv = inventory_of(&live);
                let now = plan(&head, Some(&base), &inv);
                let current = LiveOwners::new(&inv);
                let at = position(&now, &current);
                // Never back, and the steps not yet done as first planned.
                proptest::prop_assert!(at.done >= done);
                done = at.done;
                if at.is_complete() {
                    break;
                }
                proptest::prop_assert_eq!(&now.batches[done..], &first.batches[done..]);
                for m in now.batches[done].moves.iter().filter(|m| current.state(m) == MoveState::Pending) {
                    let entry = live.iter_mut().find(|e| e.1 == m.resource.name && e.0 == m.resource.namespace).unwrap();
                    entry.2 = Some(m.to.to_string());
                }
            }
            let inv = inventory_of(&live);
            proptest::prop_assert!(position(&plan(&head, Some(&base), &inv), &LiveOwners::new(&inv)).is_complete());
            proptest::prop_assert!(settled(&head, &inv));
            for r in &inv.resources {
                if let (Owner::Operator(o), Some(d)) = (r.owner(), wanted.decide(r)) {
                    proptest::prop_assert_eq!(o, d.operator, "{}", r.id);
                }
            }
        }
    }
}

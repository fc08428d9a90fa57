//! Where a rollout stands, derived from the cluster and two revisions only.
//!
//! Contract (pure, no I/O):
//! - The rollout of revision `head` is the plan engine's plan of `head`
//!   against the manifest of the last applied revision (`base`), the plan a
//!   pull request showed ([`plan`]); without a base, against live owner keys.
//!   Phases are left unknown, so the batches depend only on the two manifests
//!   and the resources' labels: the same plan comes out however far the
//!   rollout went. A move whose owner is mid-work is not skipped: the handoff
//!   waits for the owner to release it.
//! - Each move is [`MoveState::Done`] once its live owner is its target, and
//!   [`MoveState::Pending`] while its live owner is its source. A step is
//!   done when none of its moves is pending; [`position`] is the first step
//!   that is not. Killed and restarted, the reconciler finds the same
//!   position: it never repeats a finished step nor skips an unfinished one.

use std::collections::{BTreeMap, HashMap};

use crate::api::{OperatorAssignmentSpec, OperatorId};
use crate::camel_k::CamelKind;
use crate::handoff::MoveBatch;
use crate::inventory::{Inventory, Owner, ResourceRef};
use crate::plan::{self, Actual, Batch, Desired, Move, Plan};

/// The rollout plan of `head` from `base` (see the module doc).
pub fn plan(
    head: &OperatorAssignmentSpec,
    base: Option<&OperatorAssignmentSpec>,
    inventory: &Inventory,
) -> Plan {
    let actual = match base {
        Some(spec) => Actual::Manifest(spec),
        None => Actual::OwnerKeys,
    };
    // The sync's own reads are metadata only, so a copy without phases is
    // rarely needed; at 10,000 resources it would be a few MiB.
    if inventory
        .resources
        .iter()
        .all(|r| r.phase.is_none() && r.in_flight.is_none())
    {
        return plan::plan(head, actual, inventory);
    }
    let mut labels_only = inventory.clone();
    for resource in &mut labels_only.resources {
        resource.phase = None;
        resource.in_flight = None;
    }
    plan::plan(head, actual, &labels_only)
}

/// A planned move, as the cluster shows it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MoveState {
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
pub struct LiveOwners(HashMap<ResourceRef, Owner>);

impl LiveOwners {
    pub fn new(inventory: &Inventory) -> LiveOwners {
        LiveOwners(
            inventory
                .resources
                .iter()
                .map(|r| (r.id.clone(), r.owner()))
                .collect(),
        )
    }

    pub fn state(&self, m: &Move) -> MoveState {
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
    pub fn counts(&self, spec: &OperatorAssignmentSpec) -> BTreeMap<String, u64> {
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
pub struct Position {
    /// Leading batches with no pending move.
    pub done: usize,
    /// Batches in the plan.
    pub total: usize,
}

impl Position {
    pub fn is_complete(&self) -> bool {
        self.done == self.total
    }
}

/// The first batch with a pending move (all batches after it are counted
/// as not done even if some of their moves happen to be).
pub fn position(plan: &Plan, live: &LiveOwners) -> Position {
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

/// The pending moves of `batch`, one handoff per namespace, source and target.
pub fn handoffs(batch: &Batch, live: &LiveOwners) -> Vec<MoveBatch> {
    let mut groups: BTreeMap<(String, OperatorId, OperatorId), Vec<(CamelKind, String)>> =
        BTreeMap::new();
    for m in batch
        .moves
        .iter()
        .filter(|m| live.state(m) == MoveState::Pending)
    {
        groups
            .entry((m.resource.namespace.clone(), m.from.clone(), m.to.clone()))
            .or_default()
            .push((m.resource.kind, m.resource.name.clone()));
    }
    groups
        .into_iter()
        .map(|((namespace, from, to), resources)| MoveBatch {
            namespace,
            from,
            to,
            resources,
        })
        .collect()
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
            resources: owners
                .iter()
                .map(|(ns, name, owner)| Resource {
                    id: ResourceRef {
                        kind: CamelKind::Integration,
                        namespace: ns.to_string(),
                        name: name.to_string(),
                    },
                    labels: owner
                        .map(|o| [(OPERATOR_ID_KEY.to_string(), o.to_string())].into())
                        .unwrap_or_default(),
                    owner_annotation: owner.map(str::to_string),
                    phase: Some("Building Kit".into()),
                    in_flight: None,
                    created_by: None,
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
        assert!(states.contains(&MoveState::Diverged("owned by operator-3".into())));
        let groups: Vec<(String, usize)> = p
            .batches
            .iter()
            .flat_map(|b| handoffs(b, &live))
            .map(|g| (g.namespace, g.resources.len()))
            .collect();
        assert_eq!(groups, vec![("a".to_string(), 1), ("b".to_string(), 1)]);
    }
}

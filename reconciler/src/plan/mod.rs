//! The plan engine: desired owners (a manifest) against actual owners (an
//! [`Inventory`]) gives a [`Plan`].
//!
//! Expected flow:
//! 1. `crate::manifest::desired` decides each resource's desired owner (pin, first rule,
//!    default, then staged moves);
//! 2. its actual owner comes from its owner keys (`Resource::owner`);
//! 3. equal owners count as unchanged (an owner named by the annotation
//!    alone, or by an annotation the label disagrees with, is also listed
//!    for adoption: the label is set to it); a resource without an owner is
//!    a first assignment; an owner that is no valid id is an error;
//!    otherwise a move. Label and annotation that disagree are listed as
//!    [`Plan::conflicts`] too;
//! 4. a move whose current owner is mid-work ([`phase`](crate::camel_k::status::phase)) is blocked now,
//!    and so is a move (or an adoption, which is then left out) of a
//!    resource whose owner keys another tool applies
//!    ([`crate::inventory::KeyManagers::applier`]) unless the inventory says
//!    the owner-keys policy keeps them ([`Inventory::keys_guarded`]);
//! 5. the other moves are grouped by their rollout (a staged move's own steps,
//!    or `spec.rollout.steps`) and split into batches (`batch`);
//! 6. an Integration created by a Pipe in scope ([`Resource::created_by`])
//!    is decided as its Pipe is (upstream copies the Pipe's owner onto it),
//!    moves in its Pipe's batch (in the first one when only it is off), and
//!    is blocked while its Pipe's move is.
//!
//! Guarantees: pure (no I/O, no clock, no randomness); the same inputs give
//! the same plan, every list ordered by kind, namespace and name; every
//! resource in scope lands in exactly one of moves, first assignments,
//! blocked, errors or unchanged. The same code prints a pull request's plan
//! and will drive the reconciler's moves.
//!
//! Assumptions: the inventory lists each resource once (the cluster's lists
//! do; the inventory file reader refuses a repeated item). `fuzz/` checks
//! these guarantees on arbitrary inventories and manifests.

pub(crate) mod batch;
pub mod restarts;
pub(crate) mod with_phases;
// Rollout positions, drift and reversal drive the sync loop (feature
// `server`) only; the plugin builds the library without it.
#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) mod rollout;

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

pub use crate::camel_k::release::BlockReason;
pub use crate::manifest::desired::{Decision, Desired, Reason};
pub use batch::split as split_into_batches;
pub use rollout::{ByHandError, Handover, Named, by_hand};
pub use with_phases::{ServedPlan, plan_reading_phases, read_restart_forecast};

use crate::api::{OperatorAssignmentSpec, OperatorId, Step};
use crate::inventory::{Inventory, Owner, Resource, ResourceRef};

/// One resource changing hands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Move {
    /// The resource that moves.
    pub resource: ResourceRef,
    /// The operator that owns it now.
    pub from: OperatorId,
    /// The operator that gets it.
    pub to: OperatorId,
    /// Which part of the manifest wants it moved.
    pub because: Reason,
}

/// Moves that may run together; a batch starts when the one before it is
/// done and healthy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Batch {
    /// Step number, from 1.
    pub step: usize,
    /// The moves of the step, in resource order.
    pub moves: Vec<Move>,
}

/// A resource nobody owns yet, and who gets it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Assignment {
    /// The resource without an owner.
    pub resource: ResourceRef,
    /// The operator it gets.
    pub to: OperatorId,
    /// Which part of the manifest decided it.
    pub because: Reason,
}

/// A move that cannot start now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Blocked {
    /// The move that waits.
    #[serde(rename = "move")]
    pub change: Move,
    /// Why it cannot start now.
    pub why: BlockReason,
}

/// A resource whose owner label and annotation name different operators.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyConflict {
    /// The resource.
    pub resource: ResourceRef,
    /// What its label says.
    pub label: String,
    /// What its annotation says: its owner, since upstream obeys it.
    pub annotation: String,
    /// The tool that applies its owner keys, if another one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applier: Option<String>,
    /// Whether the sync sets the label to the annotation's operator (it does
    /// not while an unguarded applier would set it back).
    pub mended: bool,
}

impl std::fmt::Display for KeyConflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: its label says `{}` but its annotation says `{}`, which upstream obeys",
            self.resource, self.label, self.annotation
        )?;
        match (&self.applier, self.mended) {
            (_, true) => write!(f, "; the label is set to match"),
            (Some(applier), false) => write!(
                f,
                "; {applier} applies its owner keys, so they are not set right (docs/gitops-tools.md)"
            ),
            (None, false) => Ok(()),
        }
    }
}

/// A resource the plan cannot decide about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceError {
    /// The resource.
    pub resource: ResourceRef,
    /// Why no owner could be decided.
    pub message: String,
}

/// Resources that stay where they are.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Unchanged {
    /// How many resources stay with their owner.
    pub total: usize,
    /// How many stay with each operator.
    pub by_operator: BTreeMap<OperatorId, usize>,
    /// Resources outside the manifest's scope (never touched).
    pub out_of_scope: usize,
}

/// What a manifest does to a set of resources.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// The moves, in rollout steps; one batch without a rollout.
    pub batches: Vec<Batch>,
    /// Resources that get their first owner (no handoff needed).
    pub first_assignments: Vec<Assignment>,
    /// Moves that cannot start now, with the reason.
    pub blocked: Vec<Blocked>,
    /// Resources the plan cannot decide about.
    pub errors: Vec<ResourceError>,
    /// Resources whose label is to be set to the owner their annotation
    /// names, in one fenced write, with no handoff: unchanged or blocked ones
    /// named by the annotation alone (as `kamel` creates them), and any whose
    /// label disagrees with the annotation (a move of it then starts from the
    /// annotation's operator, once the label is set right).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adoptions: Vec<Assignment>,
    /// Resources whose label and annotation disagree (each also placed as
    /// its annotation's owner says: unchanged, moved or blocked).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<KeyConflict>,
    /// Things worth knowing that change nothing (a pin to a resource that
    /// does not exist, ...).
    pub notes: Vec<String>,
    /// Resources that stay where they are.
    pub unchanged: Unchanged,
    /// Whether each moved Integration's pods roll, and whether that can
    /// lose capacity (read from the cluster: [`read_restart_forecast`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restarts: Vec<restarts::Restart>,
}

impl Plan {
    /// Every move of every batch, in order.
    pub fn moves(&self) -> impl Iterator<Item = &Move> {
        self.batches.iter().flat_map(|b| &b.moves)
    }

    /// How many moves the plan has, over all batches.
    pub fn move_count(&self) -> usize {
        self.batches.iter().map(|b| b.moves.len()).sum()
    }

    /// Whether applying the manifest would change anything, or cannot be
    /// decided for some resource (`kubectl camelk diff` exits 1 then).
    pub fn has_changes(&self) -> bool {
        !self.batches.is_empty()
            || !self.first_assignments.is_empty()
            || !self.blocked.is_empty()
            || !self.errors.is_empty()
    }
}

/// Where actual owners come from.
#[derive(Clone, Copy)]
pub enum Actual<'a> {
    /// The owner keys of each resource (live state or an inventory file).
    OwnerKeys,
    /// The desired owners of another manifest, as if it were applied: what a
    /// pull request changes relative to its base.
    Manifest(&'a OperatorAssignmentSpec),
}

/// Plans `desired` against `inventory`.
pub fn plan(desired: &OperatorAssignmentSpec, actual: Actual<'_>, inventory: &Inventory) -> Plan {
    let target = Desired::new(desired);
    let base = match &actual {
        Actual::Manifest(spec) => Some(Desired::new(spec)),
        Actual::OwnerKeys => None,
    };
    let mut out = Plan::default();
    let mut groups: BTreeMap<Option<usize>, Vec<Move>> = BTreeMap::new();
    // Moves of Integrations that follow their Pipe, placed once the Pipes'
    // batches are known.
    let mut followers: Vec<(Move, &Resource)> = Vec::new();
    // Only the Pipes some Integration names: most inventories name none.
    let named: HashSet<&ResourceRef> = inventory
        .resources
        .iter()
        .filter_map(|r| r.created_by.as_ref())
        .collect();
    let pipes: HashMap<&ResourceRef, &Resource> = if named.is_empty() {
        HashMap::new()
    } else {
        inventory
            .resources
            .iter()
            .filter(|r| named.contains(&r.id))
            .map(|r| (&r.id, r))
            .collect()
    };
    let decide = |desired: &Desired<'_>, resource: &Resource| -> Option<Decision> {
        if !desired.in_scope(resource.id.kind, &resource.id.namespace) {
            return None;
        }
        // A Pipe outside the scope decides nothing: the Integration then
        // goes by the manifest's own precedence.
        if let Some(pipe) = resource.created_by.as_ref().and_then(|p| pipes.get(p))
            && let Some(d) = desired.decide(pipe)
        {
            return Some(Decision {
                operator: d.operator,
                because: Reason::Follows {
                    kind: pipe.id.kind,
                    name: pipe.id.name.clone(),
                },
            });
        }
        desired.decide(resource)
    };

    // A tool that applies an owner key undoes what the sync writes to it,
    // unless the owner-keys policy keeps the key.
    let unguarded = |applier: Option<&str>| -> Option<String> {
        applier
            .filter(|_| !inventory.keys_guarded)
            .map(str::to_string)
    };

    let mut resources: Vec<&Resource> = inventory.resources.iter().collect();
    resources.sort_unstable_by(|a, b| a.id.cmp(&b.id));
    for resource in resources {
        let Some(decision) = decide(&target, resource) else {
            out.unchanged.out_of_scope += 1;
            continue;
        };
        let managers = &resource.key_managers;
        // A move writes both keys; setting the label right, only the label.
        let keys_held = unguarded(managers.applier());
        let label_held = unguarded(managers.label_applier.as_deref());
        if let Some(read) = resource.read_owner()
            && let Some(label) = read.disagreeing_label
        {
            out.conflicts.push(KeyConflict {
                resource: resource.id.clone(),
                label,
                annotation: read.id,
                applier: managers.applier().map(str::to_string),
                mended: base.is_none() && label_held.is_none(),
            });
        }
        let owner = match &base {
            None => resource.owner(),
            Some(base) => match decide(base, resource) {
                Some(d) => Owner::Operator(d.operator),
                None => Owner::Nobody,
            },
        };
        match owner {
            Owner::Nobody => out.first_assignments.push(Assignment {
                resource: resource.id.clone(),
                to: decision.operator,
                because: decision.because,
            }),
            Owner::Conflict(message) => out.errors.push(ResourceError {
                resource: resource.id.clone(),
                message,
            }),
            Owner::Operator(current) if current == decision.operator => {
                if base.is_none() && resource.label_to_set() && label_held.is_none() {
                    out.adoptions.push(Assignment {
                        resource: resource.id.clone(),
                        to: current.clone(),
                        because: decision.because,
                    });
                }
                out.unchanged.total += 1;
                *out.unchanged.by_operator.entry(current).or_default() += 1;
            }
            Owner::Operator(current) => {
                let in_flight = resource.in_flight.clone().or_else(|| {
                    crate::camel_k::release::work_in_flight(
                        resource.id.kind,
                        resource.phase.as_deref(),
                    )
                });
                let held = keys_held.map(|applier| BlockReason::KeysApplied { applier });
                let why = held.or(in_flight);
                // The label is set right before a move starts from the
                // annotation's operator (one that selects by label must see
                // what it hands over), and while a move cannot start (so
                // that its keys can be co-owned and filtered on meanwhile).
                let adopt = resource.disagreeing_label().is_some()
                    || (resource.label_to_set() && why.is_some());
                if base.is_none() && adopt && label_held.is_none() {
                    out.adoptions.push(Assignment {
                        resource: resource.id.clone(),
                        to: current.clone(),
                        because: decision.because.clone(),
                    });
                }
                let change = Move {
                    resource: resource.id.clone(),
                    from: current,
                    to: decision.operator,
                    because: decision.because,
                };
                match why {
                    Some(why) => out.blocked.push(Blocked { change, why }),
                    None if matches!(change.because, Reason::Follows { .. }) => {
                        followers.push((change, resource));
                    }
                    None => {
                        let group = match change.because {
                            Reason::StagedMove { index } => Some(index),
                            _ => None,
                        };
                        groups.entry(group).or_default().push(change);
                    }
                }
            }
        }
    }

    let mut by_step: BTreeMap<usize, Vec<Move>> = BTreeMap::new();
    for (group, moves) in groups {
        let steps: &[Step] = match group {
            Some(index) if !desired.staged_moves[index].steps.is_empty() => {
                &desired.staged_moves[index].steps
            }
            _ => &desired.rollout.steps,
        };
        for (step, batch) in batch::split(moves, steps) {
            by_step.entry(step).or_default().extend(batch);
        }
    }
    if !followers.is_empty() {
        place_followers(followers, &mut by_step, &mut out.blocked, &pipes);
    }
    out.batches = by_step
        .into_iter()
        .map(|(step, mut moves)| {
            moves.sort_by(|a, b| a.resource.cmp(&b.resource));
            Batch { step, moves }
        })
        .collect();

    out.notes = missing_pins(desired, inventory);
    out
}

/// A note for each pin of `desired` that names no resource of `inventory`.
fn missing_pins(desired: &OperatorAssignmentSpec, inventory: &Inventory) -> Vec<String> {
    let present: HashSet<(crate::camel_k::CamelKind, &str, &str)> = inventory
        .resources
        .iter()
        .map(|r| (r.id.kind, r.id.namespace.as_str(), r.id.name.as_str()))
        .collect();
    desired
        .pins
        .iter()
        .enumerate()
        .filter(|(_, pin)| !present.contains(&(pin.kind, pin.namespace.as_str(), pin.name.as_str())))
        .map(|(i, pin)| {
            format!(
                "pin #{} names {} {}/{}, which does not exist; it will apply once the resource is created",
                i + 1,
                pin.kind,
                pin.namespace,
                pin.name
            )
        })
        .collect()
}

/// Puts each follower (an Integration that follows its Pipe) in its Pipe's
/// step, in step 1 when the Pipe does not move, or among the blocked moves,
/// for the Pipe's reason, while the Pipe's move is blocked.
fn place_followers(
    followers: Vec<(Move, &Resource)>,
    by_step: &mut BTreeMap<usize, Vec<Move>>,
    blocked: &mut Vec<Blocked>,
    pipes: &HashMap<&ResourceRef, &Resource>,
) {
    let step_of: HashMap<ResourceRef, usize> = by_step
        .iter()
        .flat_map(|(step, moves)| moves.iter().map(move |m| (m, *step)))
        .filter(|(m, _)| pipes.contains_key(&m.resource))
        .map(|(m, step)| (m.resource.clone(), step))
        .collect();
    let mut blocked_followers = Vec::new();
    {
        let why_blocked: HashMap<&ResourceRef, &BlockReason> = blocked
            .iter()
            .map(|b| (&b.change.resource, &b.why))
            .collect();
        for (change, resource) in followers {
            let pipe = resource.created_by.as_ref().expect("a follower has a Pipe");
            if let Some(&pipe_why) = why_blocked.get(pipe) {
                let why = match pipe_why {
                    BlockReason::WorkInFlight { phase, detail } => BlockReason::WorkInFlight {
                        phase: phase.clone(),
                        detail: format!(
                            "its {} {} cannot move yet: {detail}",
                            pipe.kind, pipe.name
                        ),
                    },
                    other => other.clone(),
                };
                blocked_followers.push(Blocked { change, why });
                continue;
            }
            let step = step_of.get(pipe).copied().unwrap_or(1);
            by_step.entry(step).or_default().push(change);
        }
    }
    blocked.extend(blocked_followers);
    blocked.sort_by(|a, b| a.change.resource.cmp(&b.change.resource));
}

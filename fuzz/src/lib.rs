//! What the fuzz targets share: the plan engine's promises, checked on any
//! plan (`plan` and `inventory` targets).
//!
//! The promises come from the documentation of `camelk_reconciler::plan`:
//! pure and deterministic; every resource in scope lands in exactly one of
//! moves, first assignments, blocked, errors or unchanged (one desired owner
//! per resource); the batches partition the moves in step order; every list is
//! ordered by resource; planning a manifest against itself changes nothing.

use std::collections::{BTreeMap, BTreeSet};

use camelk_reconciler::api::{OperatorAssignmentSpec, OperatorId};
use camelk_reconciler::camel_k::{OPERATOR_ID_KEY, owner_from_keys};
use camelk_reconciler::inventory::{Inventory, Resource, ResourceRef};
use camelk_reconciler::plan::{self, Actual, Desired, Plan, Reason};

/// The owner the plan must read from a resource's keys (the annotation's
/// when they disagree): `Ok(None)` for nobody, `Err(())` for an owner that
/// is no valid operator id.
fn actual_owner(resource: &Resource) -> Result<Option<OperatorId>, ()> {
    let label = resource.labels.get(OPERATOR_ID_KEY).map(String::as_str);
    match owner_from_keys(label, resource.owner_annotation.as_deref()) {
        None => Ok(None),
        Some(read) => OperatorId::new(read.id).map(Some).map_err(|_| ()),
    }
}

/// The desired owner of `resource` as the plan's docs state it: an
/// Integration created by a Pipe in scope goes where its Pipe goes, anything
/// else by the manifest's precedence.
fn desired_owner(
    desired: &Desired<'_>,
    resource: &Resource,
    by_id: &BTreeMap<&ResourceRef, &Resource>,
) -> Option<OperatorId> {
    if !desired.in_scope(resource.id.kind, &resource.id.namespace) {
        return None;
    }
    if let Some(pipe) = resource.created_by.as_ref().and_then(|p| by_id.get(p))
        && let Some(d) = desired.decide(pipe)
    {
        return Some(d.operator);
    }
    desired.decide(resource).map(|d| d.operator)
}

fn sorted<T>(items: &[T], key: impl Fn(&T) -> &ResourceRef) -> bool {
    items.windows(2).all(|w| key(&w[0]) < key(&w[1]))
}

/// Checks every promise of `plan::plan(spec, actual, inventory)` on `got`.
/// `inventory` must list each resource once (every reader guarantees it).
pub fn check_plan(
    spec: &OperatorAssignmentSpec,
    base: Option<&OperatorAssignmentSpec>,
    inventory: &Inventory,
    got: &Plan,
) {
    let by_id: BTreeMap<&ResourceRef, &Resource> =
        inventory.resources.iter().map(|r| (&r.id, r)).collect();
    assert_eq!(
        by_id.len(),
        inventory.resources.len(),
        "the caller passes unique resources"
    );
    let target = Desired::new(spec);
    let base_desired = base.map(Desired::new);

    // One place per resource in scope.
    let mut placed: BTreeSet<&ResourceRef> = BTreeSet::new();
    let mut place = |r: &'_ ResourceRef, what: &str| {
        let r = by_id
            .get_key_value(r)
            .unwrap_or_else(|| panic!("{what} names {r}, which is not in the inventory"))
            .0;
        assert!(placed.insert(r), "{r} is placed twice (again as {what})");
    };

    // Batches partition the moves: non-empty, in increasing step order, each
    // sorted by resource.
    let mut previous_step = 0;
    for batch in &got.batches {
        assert!(!batch.moves.is_empty(), "empty batch {}", batch.step);
        assert!(batch.step > previous_step, "steps out of order");
        previous_step = batch.step;
        assert!(sorted(&batch.moves, |m| &m.resource), "batch not sorted");
        for m in &batch.moves {
            place(&m.resource, "a move");
            assert_ne!(m.from, m.to, "a move to its own owner: {}", m.resource);
        }
    }
    assert_eq!(got.move_count(), got.moves().count());
    for a in &got.first_assignments {
        place(&a.resource, "a first assignment");
    }
    for b in &got.blocked {
        place(&b.change.resource, "a blocked move");
        assert_ne!(b.change.from, b.change.to);
    }
    for e in &got.errors {
        place(&e.resource, "an error");
    }
    assert!(sorted(&got.first_assignments, |a| &a.resource));
    assert!(sorted(&got.blocked, |b| &b.change.resource));
    assert!(sorted(&got.errors, |e| &e.resource));
    assert!(sorted(&got.adoptions, |a| &a.resource));

    // Everything else is unchanged or out of scope, and counted once.
    let out_of_scope = inventory
        .resources
        .iter()
        .filter(|r| !target.in_scope(r.id.kind, &r.id.namespace))
        .count();
    assert_eq!(got.unchanged.out_of_scope, out_of_scope);
    assert_eq!(
        placed.len() + got.unchanged.total + got.unchanged.out_of_scope,
        inventory.resources.len(),
        "every resource lands in exactly one place"
    );
    assert_eq!(
        got.unchanged.by_operator.values().sum::<usize>(),
        got.unchanged.total
    );

    // Each resource's fate agrees with its desired and actual owners.
    for resource in &inventory.resources {
        let Some(want) = desired_owner(&target, resource, &by_id) else {
            assert!(
                !placed.contains(&resource.id),
                "{} is out of scope",
                resource.id
            );
            continue;
        };
        let have = match &base_desired {
            Some(base) => Ok(desired_owner(base, resource, &by_id)),
            None => actual_owner(resource),
        };
        let id = &resource.id;
        let moved = got
            .moves()
            .chain(got.blocked.iter().map(|b| &b.change))
            .find(|m| &m.resource == id);
        match have {
            Err(()) => assert!(got.errors.iter().any(|e| &e.resource == id), "{id}"),
            Ok(None) => {
                let a = got.first_assignments.iter().find(|a| &a.resource == id);
                assert_eq!(a.map(|a| &a.to), Some(&want), "{id}: first owner");
            }
            Ok(Some(have)) if have == want => {
                assert!(!placed.contains(id), "{id} keeps its owner");
                let adopted = got.adoptions.iter().find(|a| &a.resource == id);
                if let Some(a) = adopted {
                    assert!(base.is_none(), "adoption against a manifest");
                    assert_eq!(a.to, want);
                }
            }
            Ok(Some(have)) => {
                let m = moved.unwrap_or_else(|| panic!("{id} must move"));
                assert_eq!((&m.from, &m.to), (&have, &want), "{id}");
            }
        }
    }
    // An adoption changes no owner: the resource is unchanged or its move
    // blocked, or its keys disagree and its move starts from the
    // annotation's operator.
    for a in &got.adoptions {
        let torn = got.conflicts.iter().any(|c| c.resource == a.resource);
        let blocked = got.blocked.iter().any(|b| b.change.resource == a.resource);
        assert!(
            !placed.contains(&a.resource) || torn || blocked,
            "an adoption of {} that is neither unchanged, blocked nor torn",
            a.resource
        );
    }
    // A blocked move waits on work in flight (its own, or its Pipe's), or
    // on a tool that applies its owner keys with no policy keeping them.
    for b in &got.blocked {
        let r = by_id[&b.change.resource];
        assert!(
            r.in_flight.is_some()
                || r.phase.is_some()
                || (r.key_managers.applier().is_some() && !inventory.keys_guarded)
                || matches!(b.change.because, Reason::Follows { .. }),
            "{} is blocked without work in flight",
            r.id
        );
    }
    // Every disagreement of the keys is listed, once, in resource order.
    let torn = inventory
        .resources
        .iter()
        .filter(|r| target.in_scope(r.id.kind, &r.id.namespace))
        .filter(|r| {
            let label = r.labels.get(OPERATOR_ID_KEY).map(String::as_str);
            owner_from_keys(label, r.owner_annotation.as_deref())
                .is_some_and(|o| o.keys_disagree())
        })
        .count();
    assert_eq!(got.conflicts.len(), torn, "one conflict per torn resource");
    assert!(sorted(&got.conflicts, |c| &c.resource));
    assert_eq!(
        got.has_changes(),
        !got.batches.is_empty()
            || !got.first_assignments.is_empty()
            || !got.blocked.is_empty()
            || !got.errors.is_empty()
    );
}

/// Plans `spec` against `inventory` (owner keys, and `base` when given) and
/// checks every promise, determinism (another input order gives the same
/// plan) and that a manifest planned against itself changes nothing.
pub fn plan_and_check(
    spec: &OperatorAssignmentSpec,
    base: Option<&OperatorAssignmentSpec>,
    inventory: &Inventory,
) {
    let got = plan::plan(spec, Actual::OwnerKeys, inventory);
    check_plan(spec, None, inventory, &got);
    let mut reversed = inventory.clone();
    reversed.resources.reverse();
    assert_eq!(
        plan::plan(spec, Actual::OwnerKeys, &reversed),
        got,
        "the plan depends on the inventory's order"
    );

    if let Some(base) = base {
        let against = plan::plan(spec, Actual::Manifest(base), inventory);
        check_plan(spec, Some(base), inventory, &against);
    }

    let itself = plan::plan(spec, Actual::Manifest(spec), inventory);
    assert!(
        !itself.has_changes() && itself.adoptions.is_empty(),
        "a manifest planned against itself changes nothing: {itself:?}"
    );
    assert_eq!(
        itself.unchanged.total + itself.unchanged.out_of_scope,
        inventory.resources.len()
    );
}

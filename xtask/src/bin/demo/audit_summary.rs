//! What the API server's audit log says the rollout did: moves, writes per
//! move, dual-owner writes, writes refused by the admission policy.

use std::collections::BTreeMap;
use std::time::Duration;

use camelk_reconciler::api::OperatorAssignmentStatus;
use camelk_reconciler::camel_k::{CamelKind, owner_of};
use camelk_reconciler::plan::restarts::Restart;
use camelk_testkit::AuditEvent;
use serde_json::Value;

use crate::{APPS, OPERATORS};

/// Successful writes by the reconciler to Camel K resources, as (resource,
/// name, object after the write).
pub(crate) fn reconciler_writes(events: &[AuditEvent]) -> Vec<(String, String, Value)> {
    events
        .iter()
        .filter(|e| {
            e.stage == "ResponseComplete"
                && e.is_successful_write()
                && e.user.username == "reconciler"
                && e.object_ref.as_ref().and_then(|o| o.api_group.as_deref())
                    == Some("camel.apache.org")
        })
        .filter_map(|e| {
            let o = e.object_ref.as_ref()?;
            Some((
                o.resource.clone(),
                o.name.clone().unwrap_or_default(),
                e.response_object.clone().unwrap_or_default(),
            ))
        })
        .collect()
}

/// The owner (label, else annotation) an object names.
fn owner_in(object: &Value) -> Option<String> {
    let map = |key: &str| -> Option<BTreeMap<String, String>> {
        serde_json::from_value(object["metadata"][key].clone()).ok()
    };
    owner_of(map("labels").as_ref(), map("annotations").as_ref()).map(|o| o.id)
}

/// Owner changes of Camel K resources (from → to), in commit order, with the
/// identity that wrote each.
fn owner_changes(events: &[AuditEvent]) -> Vec<(String, String, String, String, String, u64)> {
    let mut writes: Vec<(u64, String, String, Option<String>, String)> = events
        .iter()
        .filter(|e| {
            e.stage == "ResponseComplete"
                && e.is_successful_write()
                && e.object_ref.as_ref().and_then(|o| o.api_group.as_deref())
                    == Some("camel.apache.org")
        })
        .filter_map(|e| {
            let r = e.response_object.as_ref()?;
            Some((
                r["metadata"]["resourceVersion"].as_str()?.parse().ok()?,
                e.resource()?.to_string(),
                r["metadata"]["name"].as_str()?.to_string(),
                owner_in(r),
                e.user.username.clone(),
            ))
        })
        .collect();
    // By commit order; a write that changed nothing answers with the
    // resourceVersion it found, and stays after the write that made it.
    writes.sort_by_key(|w| w.0);
    let mut last: BTreeMap<(String, String), (u64, Option<String>)> = BTreeMap::new();
    let mut changes = Vec::new();
    for (rv, resource, name, owner, writer) in writes {
        let key = (resource.clone(), name.clone());
        if let Some((seen, Some(previous))) = last.get(&key)
            && *seen != rv
            && let Some(to) = &owner
            && previous != to
        {
            changes.push((resource, name, previous.clone(), to.clone(), writer, rv));
        }
        last.insert(key, (rv, owner));
    }
    changes
}

/// The plan's restart forecast against the ReplicaSets the rollout created
/// (the `rollout` slice of the audit log), Integration by Integration.
pub(crate) fn restarts_summary(forecast: &[Restart], rollout: &[AuditEvent]) {
    let created = camelk_testkit::audit::replica_sets_created(rollout);
    let mismatches: Vec<String> = forecast
        .iter()
        .filter(|r| r.rolls != created.contains_key(&r.resource.name))
        .map(|r| {
            format!(
                "{}: forecast {}, {} new ReplicaSet",
                r.resource.name,
                if r.rolls { "roll" } else { "stay" },
                created.get(&r.resource.name).copied().unwrap_or(0)
            )
        })
        .collect();
    let rolls = forecast.iter().filter(|r| r.rolls).count();
    let risky = forecast
        .iter()
        .filter(|r| r.capacity_risk.is_some())
        .count();
    println!(
        "pods rolled:           {} Integrations got a new ReplicaSet; the plan forecast {rolls} of {} \
         ({risky} with a capacity risk); matches for every Integration: {}",
        created.len(),
        forecast.len(),
        if mismatches.is_empty() { "yes" } else { "NO" }
    );
    for m in mismatches {
        println!("  {m}");
    }
}

pub(crate) fn summary(
    events: &[AuditEvent],
    rollout: &[AuditEvent],
    expected: &[(CamelKind, String, String, String)],
    status: &OperatorAssignmentStatus,
    elapsed: Duration,
) {
    // Over the whole log, so each write is compared with the one before it.
    let moves = owner_changes(events);
    let mut executed: Vec<(String, String, String, String)> = moves
        .iter()
        .map(|(resource, name, from, to, _, _)| {
            (resource.clone(), name.clone(), from.clone(), to.clone())
        })
        .collect();
    executed.sort();
    let mut planned: Vec<(String, String, String, String)> = expected
        .iter()
        .map(|(kind, n, f, t)| (kind.plural().to_string(), n.clone(), f.clone(), t.clone()))
        .collect();
    planned.sort();
    let by_reconciler = moves.iter().filter(|m| m.4 == "reconciler").count();
    let writes = |filter: &dyn Fn(&AuditEvent) -> bool| {
        rollout
            .iter()
            .filter(|e| {
                e.stage == "ResponseComplete"
                    && e.is_successful_write()
                    && e.user.username == "reconciler"
                    && filter(e)
            })
            .count()
    };
    let camel_writes = writes(&|e| {
        e.object_ref.as_ref().and_then(|o| o.api_group.as_deref()) == Some("camel.apache.org")
    });
    let request_writes = writes(&|e| e.resource() == Some("leases"));
    let event_writes = writes(&|e| e.resource() == Some("events"));
    let refused: BTreeMap<&str, usize> = rollout
        .iter()
        .filter(|e| {
            e.stage == "ResponseComplete"
                && e.code() == Some(403)
                && OPERATORS.contains(&e.user.username.as_str())
        })
        .fold(BTreeMap::new(), |mut m, e| {
            *m.entry(e.user.username.as_str()).or_default() += 1;
            m
        });
    // Moved resources whose status the new owner wrote after the flip: it
    // reconciled them anew (an upgrade resets the status of what it takes).
    let taken_up = moves
        .iter()
        .filter(|(resource, name, _, to, _, flipped)| {
            events.iter().any(|e| {
                e.stage == "ResponseComplete"
                    && e.is_successful_write()
                    && e.user.username == *to
                    && e.object_ref.as_ref().is_some_and(|o| {
                        o.resource == *resource && o.name.as_deref() == Some(name.as_str())
                    })
                    && e.response_object
                        .as_ref()
                        .and_then(|r| r["metadata"]["resourceVersion"].as_str())
                        .and_then(|rv| rv.parse::<u64>().ok())
                        .is_some_and(|rv| rv > *flipped)
            })
        })
        .count();
    let steps = status.rollout.as_ref().map(|r| r.total_steps).unwrap_or(0);
    let n = moves.len().max(1) as f64;
    println!(
        "moves executed:        {} in {steps} steps ({} planned; identical: {}), {by_reconciler} flipped by the reconciler",
        moves.len(),
        expected.len(),
        if executed == planned { "yes" } else { "NO" }
    );
    if executed != planned {
        for m in executed.iter().filter(|m| !planned.contains(m)) {
            println!("  executed, not planned: {m:?}");
        }
        for m in planned.iter().filter(|m| !executed.contains(m)) {
            println!("  planned, not executed: {m:?}");
        }
    }
    println!(
        "reconciled anew:       {taken_up} of {} moved resources, by their new owner after the flip \
         (then Running and Ready again, or the gate would have held)",
        moves.len()
    );
    println!(
        "time, merge to done:   {:.1}s (handoffs, operator-2 reconciling each anew, health gates, pauses)",
        elapsed.as_secs_f64()
    );
    println!(
        "API writes per move:   {:.2} ({} writes for {} moves: {camel_writes} owner flips, \
         {request_writes} handoff-request writes; plus {event_writes} Kubernetes Events)",
        (camel_writes + request_writes) as f64 / n,
        camel_writes + request_writes,
        moves.len()
    );
    let violations = camelk_testkit::audit::single_owner_violations(events, APPS, &OPERATORS);
    println!(
        "dual-owner writes:     {} (every operator write judged against the owner just before it)",
        violations.len()
    );
    println!(
        "refused by admission:  {} (operator writes to a resource it did not own at that instant)",
        if refused.is_empty() {
            "none".to_string()
        } else {
            refused
                .iter()
                .map(|(o, n)| format!("{n} from {o}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    let mut owners: BTreeMap<String, u64> = status.counts.clone();
    owners.retain(|_, v| *v > 0);
    println!(
        "owners now:            {}",
        owners
            .iter()
            .map(|(o, n)| format!("{n} with {o}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

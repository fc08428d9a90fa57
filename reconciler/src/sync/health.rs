//! The health gate between rollout steps: every resource moved in a step
//! must be healthy under its new owner before the next step starts.
//!
//! Contract:
//! - Healthy ([`judge`], pure): the owner label names the new owner, and an
//!   Integration is `Running` with `Ready=True` (the condition only when the
//!   gate requires it); a Pipe or KameletBinding is `Ready`; other kinds only
//!   need the owner.
//! - Fresh: right after a handoff an Integration still carries the status its
//!   old owner wrote, and keeps it while the new owner is stopped. So a
//!   healthy-looking status counts only when its `Ready` condition turned
//!   true after the step first started ([`Watch::since`], recorded in status
//!   so a later round or process judges against the same time) or, for a
//!   resource already with its new owner then (moved by a rollout the
//!   revision superseded), after its owner keys were last written, when it
//!   names a kit the new owner built (its own work, as when a resource goes
//!   back to the operator that built it), or, failing those, once the object
//!   has changed since the gate first saw it (the new owner has reconciled
//!   it). What the gate first saw is kept across rounds ([`FirstSeen`]): a
//!   gate is checked one interval a round, and an object the new owner
//!   reconciled between two rounds, never to change again, would otherwise
//!   look stale forever. The first rule compares the operator's clock with this process's,
//!   so a skew larger than a step can let a stale status pass; the gate is
//!   about health, not about who may write. Without a recorded start (a
//!   status written before it was kept), health alone decides. Pipes are
//!   judged on their phase alone.
//! - [`wait`] polls until every resource is healthy or the timeout passes,
//!   and then names each failing resource with the reason. It reads the
//!   resources from the step's watches ([`GateCache`]), waits a few seconds
//!   for a new watch's first list, and reads from the API server only what
//!   the watches cannot answer.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, DynamicObject};
use tokio_util::sync::CancellationToken;

use super::gate_cache::GateCache;
use crate::api::OperatorId;
use crate::camel_k::status::{condition, condition_cause, condition_field, kit_name, phase};
use crate::camel_k::{CamelKind, OPERATOR_ID_KEY, owner_id, owner_of_meta};
use crate::inventory::ResourceRef;

/// One moved resource the gate watches.
#[derive(Clone, Debug)]
pub(crate) struct Watch {
    pub(crate) resource: ResourceRef,
    pub(crate) owner: OperatorId,
    /// When the step that moved it first started; `None` when unknown.
    pub(crate) since: Option<Timestamp>,
}

/// The resourceVersion at which a gate first saw each resource it watches,
/// for one step (its start time); kept by the caller across rounds.
#[derive(Debug, Default)]
pub(crate) struct FirstSeen {
    since: Option<Timestamp>,
    versions: HashMap<ResourceRef, String>,
}

impl FirstSeen {
    /// The versions seen for the step that started at `since`; those of
    /// another step are forgotten.
    fn for_step(&mut self, since: Option<Timestamp>) -> &mut HashMap<ResourceRef, String> {
        if self.since != since {
            self.since = since;
            self.versions.clear();
        }
        &mut self.versions
    }
}

/// What the gate of the current step keeps across rounds: the versions it
/// first saw, and the watches it reads the moved resources from.
#[derive(Default)]
pub(crate) struct GateMemory {
    pub(crate) first_seen: FirstSeen,
    pub(crate) cache: GateCache,
}

impl GateMemory {
    /// The watches of the step that started at `since`; another step's are
    /// stopped (the step is the one [`FirstSeen`] keys its versions by).
    fn cache_for(&mut self, since: Option<Timestamp>) -> &mut GateCache {
        if self.first_seen.since != since {
            self.cache = GateCache::default();
        }
        &mut self.cache
    }
}

/// Why the gate could not pass.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GateError {
    #[error("reading {resource}: {source}")]
    Read {
        resource: ResourceRef,
        #[source]
        source: kube::Error,
    },
    #[error("cancelled")]
    Cancelled,
}

/// Whether `object` is healthy under `owner`, or why not.
pub(crate) fn judge(
    kind: CamelKind,
    object: &DynamicObject,
    owner: &OperatorId,
    require_ready: bool,
) -> Result<(), String> {
    // The one owner rule: with keys that disagree, the annotation's.
    let read = owner_of_meta(&object.metadata);
    if let Some(label) = read.as_ref().and_then(|r| r.disagreeing_label.as_deref()) {
        return Err(format!(
            "its owner label says {label} but its annotation says {} (another tool may apply it)",
            read.as_ref().map_or("", |r| r.id.as_str())
        ));
    }
    let current = read.map(|r| r.id);
    if current.as_deref() != Some(owner.as_str()) {
        return Err(format!(
            "owned by {}, not {owner}",
            current.as_deref().unwrap_or("nobody")
        ));
    }
    let p = phase(object).unwrap_or("");
    match kind {
        CamelKind::Integration => {
            if p != "Running" {
                // An operator that failed says why in `Ready`; upstream Camel K
                // leaves an Integration failed at initialization until its spec
                // changes or `kamel rebuild` clears its status.
                let why = match condition_cause(object, "Ready") {
                    Some(cause) if p == "Error" => format!(" ({cause})"),
                    _ => String::new(),
                };
                return Err(format!("phase `{p}`{why}, not Running, under {owner}"));
            }
            if require_ready && condition(object, "Ready") != Some("True") {
                return Err(format!("Running but not Ready under {owner}"));
            }
            Ok(())
        }
        CamelKind::Pipe | CamelKind::KameletBinding if p != "Ready" => {
            Err(format!("phase `{p}`, not Ready, under {owner}"))
        }
        _ => Ok(()),
    }
}

/// When the `Ready` condition last changed, as the object's owner wrote it.
fn ready_since(object: &DynamicObject) -> Option<Timestamp> {
    condition_field(object, "Ready", "lastTransitionTime")?
        .parse()
        .ok()
}

/// When `object`'s owner keys were last written: the latest time of the
/// managed-fields entries (the object's, not its status's) that hold the
/// owner label or annotation. Kubernetes records these times in whole
/// seconds.
fn owner_keys_written(object: &DynamicObject) -> Option<Timestamp> {
    let holds_owner_key = |fields: &serde_json::Value| {
        ["f:labels", "f:annotations"].iter().any(|map| {
            fields["f:metadata"][map]
                .get(format!("f:{OPERATOR_ID_KEY}"))
                .is_some()
        })
    };
    object
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|entry| entry.subresource.as_deref().unwrap_or("").is_empty())
        .filter(|entry| {
            entry
                .fields_v1
                .as_ref()
                .is_some_and(|f| holds_owner_key(&f.0))
        })
        .filter_map(|entry| entry.time.as_ref())
        .map(|time| time.0)
        .max()
}

/// Whether a `Ready` condition that last changed at `ready` changed after
/// `since`. Kubernetes writes condition times in whole seconds, so `since` is
/// compared truncated to its second: an operator that turns an Integration
/// Ready within the second its step started (upstream Camel K does, for a
/// prebuilt image) would otherwise look stale forever, its status never
/// changing again.
fn turned_ready_since(ready: Timestamp, since: Timestamp) -> bool {
    let since = Timestamp::from_second(since.as_second()).unwrap_or(since);
    ready >= since
}

/// Who built each kit read so far, by namespace and name: a kit's builder
/// never changes, so one wait reads each kit once however often it polls.
type KitBuilders = HashMap<(String, String), Option<String>>;

/// Whether `integration`'s status names a kit that `owner` built: then the
/// status is the new owner's own work (say, a resource handed back to the
/// operator that built it, which finds nothing to redo), not one left by
/// the previous owner. A kit that cannot be read does not count.
async fn runs_on_kit_of(
    client: &Client,
    builders: &mut KitBuilders,
    integration: &DynamicObject,
    owner: &OperatorId,
) -> bool {
    let Some(name) = kit_name(integration) else {
        return false;
    };
    let namespace = integration.data["status"]["integrationKit"]["namespace"]
        .as_str()
        .or(integration.metadata.namespace.as_deref())
        .unwrap_or_default();
    let key = (namespace.to_string(), name.to_string());
    if !builders.contains_key(&key) {
        let api: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            namespace,
            &CamelKind::IntegrationKit.api_resource(),
        );
        let Ok(Some(kit)) = api.get_opt(name).await else {
            return false; // not cached: it may be readable on the next poll
        };
        builders.insert(key.clone(), owner_id(&kit.metadata));
    }
    builders[&key].as_deref() == Some(owner.as_str())
}

/// What one look at a watched resource tells.
#[derive(Debug, PartialEq)]
enum Verdict {
    Healthy,
    Unhealthy(String),
    /// Healthy-looking, but neither changed since the gate first saw it nor
    /// turned `Ready` since its step started: the status may be the old
    /// owner's, unless it runs on a kit the new owner built.
    Unproven,
}

/// Judges `object` for `w`, recording the version first seen of it.
fn verdict(
    w: &Watch,
    object: &DynamicObject,
    require_ready: bool,
    first_seen: &mut FirstSeen,
) -> Verdict {
    let id = &w.resource;
    let rv = object.metadata.resource_version.clone().unwrap_or_default();
    // Only a version that has the new owner counts as first seen: a watch
    // may still hold the version from before the move, and the move itself
    // must not count as the new owner's work.
    let has_new_owner = owner_id(&object.metadata).as_deref() == Some(w.owner.as_str());
    let changed = has_new_owner
        && *first_seen
            .for_step(w.since)
            .entry(id.clone())
            .or_insert_with(|| rv.clone())
            != rv;
    if let Err(why) = judge(id.kind, object, &w.owner, require_ready) {
        return Verdict::Unhealthy(why);
    }
    let Some(since) = w.since else {
        return Verdict::Healthy;
    };
    // A resource already with its new owner when the step started (a move a
    // superseded rollout made) may have been reconciled before then, never to
    // change again: its owner's work counts from when it became the owner.
    let since = owner_keys_written(object).map_or(since, |written| written.min(since));
    let turned_ready = ready_since(object).is_some_and(|t| turned_ready_since(t, since));
    if id.kind != CamelKind::Integration || changed || turned_ready {
        Verdict::Healthy
    } else {
        Verdict::Unproven
    }
}

/// Waits until every watched resource is healthy, up to `timeout`. Returns
/// the failing resources, each with its reason (empty: the gate passed).
pub(crate) async fn wait(
    client: &Client,
    watches: &[Watch],
    require_ready: bool,
    timeout: Duration,
    poll: Duration,
    memory: &mut GateMemory,
    cancel: &CancellationToken,
) -> Result<Vec<String>, GateError> {
    let deadline = Instant::now() + timeout;
    let mut pending: Vec<usize> = (0..watches.len()).collect();
    let mut builders = KitBuilders::new();
    let cache = memory.cache_for(watches.first().and_then(|w| w.since));
    for w in watches {
        cache.watch(client, &w.resource);
    }
    let GateMemory { first_seen, cache } = memory;
    loop {
        let mut failing = Vec::new();
        let mut still = Vec::new();
        for &i in &pending {
            let w = &watches[i];
            let id = &w.resource;
            if cache.listing(id) {
                failing.push(format!("{id}: not listed yet by the gate's watch"));
                still.push(i);
                continue;
            }
            let cached = cache.object(id);
            let read = match cached {
                Some(_) => None,
                None => read(client, id).await?,
            };
            let Some(object) = cached.as_deref().map(|c| &c.0).or(read.as_ref()) else {
                continue; // deleted: nothing to wait for
            };
            let verdict = match verdict(w, object, require_ready, first_seen) {
                Verdict::Healthy => Ok(()),
                Verdict::Unhealthy(why) => Err(why),
                Verdict::Unproven => {
                    if runs_on_kit_of(client, &mut builders, object, &w.owner).await {
                        Ok(())
                    } else {
                        Err(format!(
                            "status not yet reconciled by {} since the move",
                            w.owner
                        ))
                    }
                }
            };
            if let Err(why) = verdict {
                failing.push(format!("{id}: {why}"));
                still.push(i);
            }
        }
        pending = still;
        if pending.is_empty() || Instant::now() >= deadline {
            return Ok(failing);
        }
        tokio::select! {
            _ = cancel.cancelled() => return Err(GateError::Cancelled),
            _ = tokio::time::sleep(poll) => {}
        }
    }
}

/// `id` read from the API server (`None`: deleted).
async fn read(client: &Client, id: &ResourceRef) -> Result<Option<DynamicObject>, GateError> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &id.namespace, &id.kind.api_resource());
    api.get_opt(&id.name)
        .await
        .map_err(|source| GateError::Read {
            resource: id.clone(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_status_the_new_owner_wrote_between_two_rounds_passes_the_next() {
        let w = watch("2026-12-05T07:17:41Z");
        let at = |rv: &str| left_ready(rv, "operator-2");
        let mut seen = FirstSeen::default();
        // Round 1 sees the flipped object; the new owner then reconciles it
        // (version 120) before round 2, and never changes it again.
        assert_eq!(verdict(&w, &at("100"), true, &mut seen), Verdict::Unproven);
        assert_eq!(verdict(&w, &at("120"), true, &mut seen), Verdict::Healthy);
        assert_eq!(verdict(&w, &at("120"), true, &mut seen), Verdict::Healthy);
        // Had round 2 started its memory afresh, it would wait forever.
        let mut afresh = FirstSeen::default();
        assert_eq!(
            verdict(&w, &at("120"), true, &mut afresh),
            Verdict::Unproven
        );
        // The next step starts from nothing: what step 2 saw says nothing of it.
        let next = Watch {
            since: Some(t("2026-12-05T07:22:04Z")),
            ..w.clone()
        };
        assert_eq!(
            verdict(&next, &at("120"), true, &mut seen),
            Verdict::Unproven
        );
        // Unhealthy is unhealthy whatever changed.
        let mut building = at("130");
        building.data["status"] = json!({ "phase": "Building Kit" });
        assert!(matches!(
            verdict(&next, &building, true, &mut seen),
            Verdict::Unhealthy(_)
        ));
    }

    #[test]
    fn a_version_from_before_the_move_is_not_where_changes_count_from() {
        let w = watch("2026-12-05T07:17:41Z");
        let at = left_ready;
        let mut seen = FirstSeen::default();
        // A watch lagging the move shows the old owner's version first, then
        // the move's: the old owner's status is still all there is.
        assert!(matches!(
            verdict(&w, &at("99", "operator-1"), true, &mut seen),
            Verdict::Unhealthy(_)
        ));
        assert_eq!(
            verdict(&w, &at("100", "operator-2"), true, &mut seen),
            Verdict::Unproven
        );
        assert_eq!(
            verdict(&w, &at("120", "operator-2"), true, &mut seen),
            Verdict::Healthy
        );
    }

    #[test]
    fn a_move_made_before_its_step_started_counts_from_the_owner_keys_write() {
        // A superseded rollout moved it at 07:10:05 and the new owner turned
        // it Ready at once; the revision's step that carries it started later.
        let w = watch("2026-12-05T07:10:09.500Z");
        let moved_at = |handoff: &str, ready: &str| {
            let mut o = obj(
                "Integration",
                "operator-2",
                json!({ "phase": "Running", "conditions": [{
                    "type": "Ready", "status": "True", "lastTransitionTime": ready }] }),
            );
            o.metadata.managed_fields = serde_json::from_value(json!([
                { "manager": "kamel", "operation": "Update", "time": "2026-12-05T07:00:00Z",
                  "fieldsV1": { "f:metadata": { "f:annotations": { "f:team.example.com/owner": {} } } } },
                { "manager": "camelk-handoff", "operation": "Update", "time": handoff,
                  "fieldsV1": { "f:metadata": { "f:labels": { format!("f:{OPERATOR_ID_KEY}"): {} } } } },
                { "manager": "kamel", "operation": "Update", "subresource": "status",
                  "time": "2026-12-05T07:10:20Z", "fieldsV1": { "f:status": {} } }
            ]))
            .unwrap();
            o
        };
        let mut seen = FirstSeen::default();
        let fresh = moved_at("2026-12-05T07:10:05Z", "2026-12-05T07:10:05Z");
        assert_eq!(owner_keys_written(&fresh), Some(t("2026-12-05T07:10:05Z")));
        assert_eq!(verdict(&w, &fresh, true, &mut seen), Verdict::Healthy);
        // Ready since before the owner keys changed: the old owner's status.
        let mut seen = FirstSeen::default();
        let stale = moved_at("2026-12-05T07:10:05Z", "2026-12-05T07:02:00Z");
        assert_eq!(verdict(&w, &stale, true, &mut seen), Verdict::Unproven);
        // Moved by this step (after it started): judged from the step's start,
        // as before.
        let mut seen = FirstSeen::default();
        let late = moved_at("2026-12-05T07:10:30Z", "2026-12-05T07:10:09Z");
        assert_eq!(verdict(&w, &late, true, &mut seen), Verdict::Healthy);
        let mut seen = FirstSeen::default();
        let late_stale = moved_at("2026-12-05T07:10:30Z", "2026-12-05T07:09:00Z");
        assert_eq!(verdict(&w, &late_stale, true, &mut seen), Verdict::Unproven);
    }

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    /// Integration `n/x` moved to operator-2 by a step started at `since`.
    fn watch(since: &str) -> Watch {
        Watch {
            resource: ResourceRef {
                kind: CamelKind::Integration,
                namespace: "n".into(),
                name: "x".into(),
            },
            owner: OperatorId::new("operator-2").unwrap(),
            since: Some(t(since)),
        }
    }

    /// Integration `n/x` labelled for `owner` at version `rv`, Running and
    /// Ready since before the move, as the old owner left it.
    fn left_ready(rv: &str, owner: &str) -> DynamicObject {
        let mut o = obj(
            "Integration",
            owner,
            json!({ "phase": "Running", "conditions": [{
                "type": "Ready", "status": "True",
                "lastTransitionTime": "2026-12-05T07:02:00Z" }] }),
        );
        o.metadata.resource_version = Some(rv.into());
        o
    }

    fn obj(kind: &str, owner: &str, status: serde_json::Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "camel.apache.org/v1", "kind": kind,
            "metadata": { "name": "x", "namespace": "n", "labels": { OPERATOR_ID_KEY: owner } },
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn a_ready_condition_of_the_second_the_step_started_is_fresh() {
        let since = t("2026-12-04T06:23:01.703Z");
        assert!(turned_ready_since(t("2026-12-04T06:23:01Z"), since));
        assert!(turned_ready_since(t("2026-12-04T06:23:02Z"), since));
        assert!(!turned_ready_since(t("2026-12-04T06:23:00Z"), since));
    }

    #[test]
    fn integrations_need_running_and_ready_under_the_new_owner() {
        let op2 = OperatorId::new("operator-2").unwrap();
        let ready =
            json!({ "phase": "Running", "conditions": [{ "type": "Ready", "status": "True" }] });
        let i = CamelKind::Integration;
        assert!(
            judge(
                i,
                &obj("Integration", "operator-2", ready.clone()),
                &op2,
                true
            )
            .is_ok()
        );
        let err = judge(i, &obj("Integration", "operator-1", ready), &op2, true).unwrap_err();
        assert!(err.contains("owned by operator-1"), "{err}");
        let building = obj(
            "Integration",
            "operator-2",
            json!({ "phase": "Building Kit" }),
        );
        assert!(
            judge(i, &building, &op2, true)
                .unwrap_err()
                .contains("Building Kit")
        );
        let not_ready = obj("Integration", "operator-2", json!({ "phase": "Running" }));
        assert!(judge(i, &not_ready, &op2, true).is_err());
        assert!(judge(i, &not_ready, &op2, false).is_ok());
        let pipe = obj("Pipe", "operator-2", json!({ "phase": "Creating" }));
        assert!(judge(CamelKind::Pipe, &pipe, &op2, true).is_err());
        let pipe = obj("Pipe", "operator-2", json!({ "phase": "Ready" }));
        assert!(judge(CamelKind::Pipe, &pipe, &op2, true).is_ok());
    }

    #[test]
    fn a_failed_integration_says_why_its_operator_failed_it() {
        let op2 = OperatorId::new("operator-2").unwrap();
        // As upstream Camel K 2.10.1 left one whose trait hit a 403 in the
        // instant after a kube-apiserver restart.
        let failed = obj(
            "Integration",
            "operator-2",
            json!({ "phase": "Error", "conditions": [{
                "type": "Ready", "status": "False", "reason": "InitializationFailed",
                "message": "error during trait customization: forbidden" }] }),
        );
        let err = judge(CamelKind::Integration, &failed, &op2, true).unwrap_err();
        assert_eq!(
            err,
            "phase `Error` (InitializationFailed: error during trait customization: \
             forbidden), not Running, under operator-2"
        );
        // A phase on its way says only the phase.
        let building = obj(
            "Integration",
            "operator-2",
            json!({ "phase": "Building Kit", "conditions": [{
                "type": "Ready", "status": "False", "reason": "IntegrationKitAvailable" }] }),
        );
        let err = judge(CamelKind::Integration, &building, &op2, true).unwrap_err();
        assert_eq!(err, "phase `Building Kit`, not Running, under operator-2");
    }

    #[test]
    fn keys_that_disagree_are_never_healthy_and_say_so() {
        let op2 = OperatorId::new("operator-2").unwrap();
        let ready =
            json!({ "phase": "Running", "conditions": [{ "type": "Ready", "status": "True" }] });
        // Moved to operator-2, then a GitOps tool set the annotation back.
        let mut torn = obj("Integration", "operator-2", ready);
        torn.metadata.annotations =
            Some([(OPERATOR_ID_KEY.to_string(), "operator-1".to_string())].into());
        let err = judge(CamelKind::Integration, &torn, &op2, true).unwrap_err();
        assert!(
            err.contains("label says operator-2 but its annotation says operator-1"),
            "{err}"
        );
    }
}

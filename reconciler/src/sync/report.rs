//! What a round tells people besides the status's progress: the ends of
//! rounds, Events and metrics.
//!
//! Contract:
//! - The status is written only through a [`StatusWriter`]; what it says is
//!   decided by [`super::progress`].
//! - Events go through [`Events`] (on the object, or `Moved` on a resource);
//!   a failed Event is only logged.
//! - The ends that stop a rollout ([`Report::stop`]) and the ends of rounds
//!   that act on nothing (an invalid revision, an unreadable source, a
//!   suspended object, a failed round) are written here, each in one place.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use serde_json::json;

use super::execute::Stall;
use super::notifications::Notifications;
use super::notify::Kind;
use super::status::FIELD_MANAGER;
use super::status_writer::{Checkpoint, StatusWriter};
use super::{LOCK_ID, RECONCILE_REQUEST_ANNOTATION, SUSPEND_ANNOTATION, SyncError, is_suspended};
use super::{progress, server};
use crate::api::{
    self, MigrationResult, OperatorAssignment, OperatorAssignmentStatus, OperatorId, RolloutState,
    RolloutStatus,
};
use crate::camel_k::OPERATOR_ID_KEY;
use crate::handoff::MoveBatch;
use crate::manifest::{FieldPath, Manifest, ManifestError, Tree, tree};
use crate::plan::{BlockReason, Plan};
use crate::source::{Revision, SourceError};

/// A rollout that stops: what its status and Event say.
pub(super) struct Pause {
    /// The rollout's message.
    pub(crate) summary: String,
    /// The conditions' message and the Event's note.
    pub(crate) message: String,
    /// The conditions' reason and the Event's.
    pub(crate) reason: &'static str,
    /// `Paused` (a later round retries) or `RolledBack` (it waits for a new
    /// revision).
    pub(crate) state: RolloutState,
    /// The operator the rollout waits for, when it is not alive.
    pub(crate) target_not_alive: Option<OperatorId>,
}

impl Pause {
    /// A handoff that could not finish: the step waits, paused.
    pub(crate) fn handoff(ro: &RolloutStatus, stall: &Stall) -> Pause {
        let summary = format!(
            "step {} of {}: {}",
            ro.current_step, ro.total_steps, stall.message
        );
        Pause::stalled(summary.clone(), summary, stall)
    }

    /// A paused rollout that waits on `stall`, with its words for people.
    pub(crate) fn stalled(summary: String, message: String, stall: &Stall) -> Pause {
        Pause {
            summary,
            message,
            reason: stall.reason(),
            state: RolloutState::Paused,
            target_not_alive: stall.target_not_alive.clone(),
        }
    }
}

impl Pause {
    /// Moves the plan leaves out because another tool applies the owner
    /// keys ([`BlockReason::KeysApplied`]): the revision cannot be applied
    /// until the keys leave that tool's manifests or the owner-keys policy
    /// keeps them. `None` when there are none.
    pub(crate) fn keys_applied(plan: &Plan) -> Option<Pause> {
        let held: Vec<String> = plan
            .blocked
            .iter()
            .filter_map(|b| match &b.why {
                BlockReason::KeysApplied { applier } => {
                    Some(format!("{} ({applier})", b.change.resource))
                }
                BlockReason::WorkInFlight { .. } => None,
            })
            .collect();
        if held.is_empty() {
            return None;
        }
        let shown: Vec<&str> = held.iter().take(20).map(String::as_str).collect();
        let message = format!(
            "{} resources keep their owner: another tool applies their {OPERATOR_ID_KEY} and \
             would undo a move: {}{}; remove the key from the manifests it applies (kubectl \
             camelk strip-owner-keys), or install the owner-keys policy (docs/gitops-tools.md)",
            held.len(),
            shown.join(", "),
            if held.len() > shown.len() {
                ", ..."
            } else {
                ""
            },
        );
        Some(Pause {
            summary: message.clone(),
            message,
            reason: KEYS_APPLIED,
            state: RolloutState::Paused,
            target_not_alive: None,
        })
    }
}

/// Reason of the conditions and the Event of a rollout held by owner keys
/// another tool applies.
pub(crate) const KEYS_APPLIED: &str = "OwnerKeysApplied";

/// The `OperatorAssignment` object as the sync sees it: read, applied (its
/// spec, as Git says), and what a round tells people through it besides
/// the progress: the ends of rounds, Events and metrics.
pub(super) struct Report {
    client: Client,
    namespace: String,
    pub(super) events: Events,
    telemetry: Arc<server::Telemetry>,
    /// The manifest's notifications (webhooks, Slack, commit statuses).
    pub(super) notifications: Notifications,
}

impl Report {
    pub(super) fn new(
        client: Client,
        namespace: String,
        events: Events,
        telemetry: Arc<server::Telemetry>,
        notifications: Notifications,
    ) -> Report {
        Report {
            client,
            namespace,
            events,
            telemetry,
            notifications,
        }
    }

    /// The writer of `object`'s status.
    pub(super) fn writer(&self, object: &OperatorAssignment) -> StatusWriter {
        StatusWriter::new(&self.client, object)
    }

    /// Stops the rollout: `pause.state` with `pause.summary` on the rollout
    /// and its history row, Ready and Reconciling false and Stalled true
    /// with the reason and message, and a warning Event.
    pub(super) async fn stop(
        &self,
        writer: &mut StatusWriter,
        object: &OperatorAssignment,
        mut status: OperatorAssignmentStatus,
        mut ro: RolloutStatus,
        pause: Pause,
    ) -> Result<(), SyncError> {
        let generation = object.metadata.generation;
        handled(object, &mut status);
        // The migration's history row says how it stands until it goes on.
        progress::history_result(
            &mut status,
            &ro.revision,
            MigrationResult::from(pause.state),
        );
        ro.state = pause.state;
        ro.message = pause.summary;
        ro.target_not_alive = pause.target_not_alive.map(|id| id.to_string());
        // Told once per stop: a paused step checked again each round is not news.
        let before = object.status.as_ref().and_then(|s| s.rollout.as_ref());
        let news = before.is_none_or(|b| {
            (b.revision.as_str(), b.current_step, b.state)
                != (ro.revision.as_str(), ro.current_step, pause.state)
        });
        if news {
            let kind = if pause.state == RolloutState::RolledBack {
                Kind::RolledBack
            } else {
                Kind::Stalled
            };
            self.notifications.send(kind, object, &ro, &pause.message);
        }
        status.rollout = Some(ro);
        progress::stalled(&mut status, pause.reason, &pause.message, generation);
        // A paused rollout checks again every round; most find it as it was.
        writer.write(&status, Checkpoint::Stopped).await?;
        tracing::warn!(message = %pause.message, reason = pause.reason, "rollout paused");
        self.events
            .on(object, EventType::Warning, pause.reason, pause.message)
            .await;
        Ok(())
    }

    /// Whether the object carries [`SUSPEND_ANNOTATION`]` = "true"`; if so,
    /// records `Suspended=True` (once) and nothing else happens this round.
    pub(super) async fn suspended(&self, object: &OperatorAssignment) -> Result<bool, SyncError> {
        if !is_suspended(object) {
            return Ok(false);
        }
        let mut status = object.status.clone().unwrap_or_default();
        handled(object, &mut status);
        let message = format!(
            "{SUSPEND_ANNOTATION} is true: no fetch result is acted on until it is removed"
        );
        let newly = progress::suspend(&mut status, &message, object.metadata.generation);
        self.writer(object)
            .write(&status, Checkpoint::RoundEnd)
            .await?;
        if newly {
            tracing::info!("suspended");
            self.events
                .on(object, EventType::Normal, "Suspended", message)
                .await;
        }
        Ok(true)
    }

    /// An invalid revision: status and an Event on its object (named by the
    /// revision, else `last_name`), nothing else.
    pub(super) async fn invalid(
        &self,
        rev: &Revision,
        error: &ManifestError,
        last_name: Option<&str>,
    ) -> Result<(), SyncError> {
        let message = format!(
            "revision {} is invalid; nothing was changed:\n{error}",
            rev.short()
        );
        tracing::warn!(revision = %rev.short(), %error, "invalid revision not acted on");
        let named = Tree::parse(&rev.text).ok().and_then(|t| {
            match &t.get(&FieldPath::parse("metadata.name"))?.value {
                tree::Value::Scalar(name) if !name.is_empty() => Some(name.clone()),
                _ => None,
            }
        });
        let Some(name) = named.or_else(|| last_name.map(str::to_string)) else {
            return Ok(());
        };
        let Some(object) = self.current(&name).await? else {
            tracing::warn!(%name, "no OperatorAssignment object to report the invalid revision on");
            return Ok(());
        };
        let mut status = object.status.clone().unwrap_or_default();
        handled(&object, &mut status);
        status.last_attempted_revision = Some(rev.sha.clone());
        // This generation was seen, and found invalid: status readers
        // (kstatus, so a Flux Kustomization's `wait`) then see it failed,
        // not still in progress.
        status.observed_generation = object.metadata.generation;
        progress::stalled(
            &mut status,
            "ValidationFailed",
            &message,
            object.metadata.generation,
        );
        self.writer(&object)
            .write(&status, Checkpoint::RoundEnd)
            .await?;
        self.events
            .on(&object, EventType::Warning, "ValidationFailed", message)
            .await;
        Ok(())
    }

    /// The source could not be read: the last good state stays, the
    /// condition of object `last_name` says why.
    pub(super) async fn unavailable(&self, error: &SourceError, last_name: Option<&str>) {
        let Some(name) = last_name else {
            return;
        };
        let Ok(Some(object)) = self.current(name).await else {
            return;
        };
        let mut status = object.status.clone().unwrap_or_default();
        handled(&object, &mut status);
        let message = format!("{error}; keeping the last applied revision");
        progress::fetch_failed(&mut status, &message, object.metadata.generation);
        let written = self
            .writer(&object)
            .write(&status, Checkpoint::RoundEnd)
            .await;
        if let Err(e) = written {
            tracing::warn!(error = %e, "could not report the fetch failure");
        }
    }

    /// A round that failed: a `SyncFailed` Event on object `last_name` (the
    /// condition stays as the last finished round left it; the next round
    /// retries).
    pub(super) async fn failure(&self, error: &SyncError, last_name: Option<&str>) {
        if matches!(error, SyncError::Cancelled | SyncError::NotLeading) {
            return;
        }
        let Some(name) = last_name else {
            return;
        };
        let api_version = format!("{}/{}", api::GROUP, api::VERSION);
        let regarding = reference(&api_version, api::KIND, &self.namespace, name);
        let note = format!("{}: {error}", error.kind());
        self.events
            .publish(regarding, EventType::Warning, "SyncFailed", "Sync", note)
            .await;
    }

    /// Resources per owner, in the metrics.
    pub(super) fn counts(&self, counts: &BTreeMap<String, u64>) {
        self.telemetry.resources.clear();
        for (operator, n) in counts {
            self.telemetry
                .resources
                .get_or_create(&server::OperatorLabel {
                    operator: operator.clone(),
                })
                .set(i64::try_from(*n).unwrap_or(i64::MAX));
        }
    }

    /// Server-side apply of the manifest's object (spec only).
    pub(super) async fn apply(
        &self,
        name: &str,
        manifest: &Manifest,
    ) -> Result<OperatorAssignment, SyncError> {
        let api: Api<OperatorAssignment> = Api::namespaced(self.client.clone(), &self.namespace);
        let meta = &manifest.assignment.metadata;
        let body = json!({
            "apiVersion": format!("{}/{}", api::GROUP, api::VERSION),
            "kind": api::KIND,
            "metadata": { "name": name, "labels": meta.labels, "annotations": meta.annotations },
            "spec": manifest.assignment.spec,
        });
        api.patch(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(body),
        )
        .await
        .map_err(|source| SyncError::Apply {
            name: name.to_string(),
            source,
        })
    }

    /// The object in the cluster, if any.
    pub(super) async fn current(
        &self,
        name: &str,
    ) -> Result<Option<OperatorAssignment>, SyncError> {
        let api: Api<OperatorAssignment> = Api::namespaced(self.client.clone(), &self.namespace);
        api.get_opt(name).await.map_err(|source| SyncError::Status {
            name: name.to_string(),
            source,
        })
    }
}

/// Records Events as the sync; a failed Event is only logged.
#[derive(Clone)]
pub(super) struct Events {
    recorder: Recorder,
}

impl Events {
    /// Events reported by `identity`, this replica.
    pub(super) fn new(client: Client, identity: &str) -> Events {
        let reporter = Reporter {
            controller: LOCK_ID.into(),
            instance: Some(identity.to_string()),
        };
        Events {
            recorder: Recorder::new(client, reporter),
        }
    }

    /// One `Moved` Event on each resource of `group` that `moved` holds.
    pub(super) async fn moved(
        &self,
        group: &MoveBatch,
        moved: &BTreeSet<(String, String)>,
        step: &str,
    ) {
        for (kind, name) in &group.resources {
            if !moved.contains(&(group.namespace.clone(), format!("{kind}/{name}"))) {
                continue;
            }
            let regarding = reference(&kind.api_version(), kind.kind(), &group.namespace, name);
            let note = format!("handed over from {} to {} ({step})", group.from, group.to);
            self.publish(regarding, EventType::Normal, "Moved", "Handoff", note)
                .await;
        }
    }

    /// An Event on the object.
    pub(super) async fn on(
        &self,
        object: &OperatorAssignment,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        self.publish(object.object_ref(&()), type_, reason, "Sync", note)
            .await;
    }

    /// Records an Event about `regarding`; a failure is only logged.
    async fn publish(
        &self,
        regarding: ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note.chars().take(1000).collect()),
            action: action.into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &regarding).await {
            tracing::debug!(error = %e, reason, "event not recorded");
        }
    }
}

/// A reference to an object by API version, kind, namespace and name.
fn reference(api_version: &str, kind: &str, namespace: &str, name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.into()),
        kind: Some(kind.into()),
        namespace: Some(namespace.into()),
        name: Some(name.into()),
        ..Default::default()
    }
}

/// Records in `status` that the object's sync request (if any) was handled;
/// whether that changed anything.
pub(super) fn handled(object: &OperatorAssignment, status: &mut OperatorAssignmentStatus) -> bool {
    let requested = object
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(RECONCILE_REQUEST_ANNOTATION));
    if requested.is_none() || status.last_handled_reconcile_at.as_ref() == requested {
        return false;
    }
    status.last_handled_reconcile_at = requested.cloned();
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(annotations: &[(&str, &str)]) -> OperatorAssignment {
        let mut o: OperatorAssignment = serde_saphyr::from_str(
            "apiVersion: camelk.dev/v1alpha1\nkind: OperatorAssignment\nmetadata: {name: a}\nspec:\n  operators: [{id: operator-1, namespace: x}]\n  defaultOperator: operator-1\n",
        )
        .unwrap();
        o.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        o
    }

    #[test]
    fn a_sync_request_is_answered_once() {
        let mut status = OperatorAssignmentStatus::default();
        assert!(!handled(&object(&[]), &mut status));
        let asked = object(&[(RECONCILE_REQUEST_ANNOTATION, "t1")]);
        assert!(handled(&asked, &mut status));
        assert_eq!(status.last_handled_reconcile_at.as_deref(), Some("t1"));
        assert!(!handled(&asked, &mut status));
        assert!(is_suspended(&object(&[(SUSPEND_ANNOTATION, "true")])));
        assert!(!is_suspended(&object(&[(SUSPEND_ANNOTATION, "yes")])));
    }

    #[test]
    fn a_stalled_handoff_pauses_its_step() {
        let ro = RolloutStatus {
            current_step: 2,
            total_steps: 3,
            ..Default::default()
        };
        let slow = Stall {
            message: "owner slow".into(),
            target_not_alive: None,
        };
        let pause = Pause::handoff(&ro, &slow);
        assert_eq!(pause.summary, "step 2 of 3: owner slow");
        assert_eq!(pause.message, pause.summary);
        assert_eq!(
            (pause.reason, pause.state, pause.target_not_alive),
            ("HandoffStalled", RolloutState::Paused, None)
        );
        let down = Stall {
            message: "target gone".into(),
            target_not_alive: Some(OperatorId::new("operator-2").unwrap()),
        };
        let pause = Pause::handoff(&ro, &down);
        assert_eq!(pause.reason, "TargetNotAlive");
        assert_eq!(pause.target_not_alive.unwrap().as_str(), "operator-2");
    }
}

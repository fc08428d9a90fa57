//! The one writer of an `OperatorAssignment`'s status.
//!
//! A round changes the status it carries as it goes, without writing it.
//! The status is written at the round's end ([`Checkpoint::RoundEnd`]) and,
//! before that, only at the [`Checkpoint`]s where people watch a rollout
//! move (`kubectl camelk status --watch`, a Flux `wait`, Argo CD's health):
//! a step starts, waits for health, pauses between steps, is found healthy,
//! or the rollout stops.
//!
//! Contract:
//! - Nothing else writes the status ([`status::write`] is called from here
//!   only), always whole, server-side applied, stamped with this
//!   reconciler's version.
//! - A write is skipped when the object holds that status already (as the
//!   round read it, or as this writer last wrote it), so a round in steady
//!   state writes nothing, and a round that wrote a checkpoint writes its end
//!   even when that end equals what the round first read.

use kube::Client;

use super::{SyncError, status};
use crate::api::{OperatorAssignment, OperatorAssignmentStatus};

/// Where a round writes its status before its end: what people watching
/// the rollout see change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Checkpoint {
    /// A step starts handing its resources over (`Progressing`).
    StepStarted,
    /// Moved resources wait for the health gate (`WaitingForHealth`).
    WaitingForHealth,
    /// The manifest's pause between two steps (`Pausing`).
    Pausing,
    /// A step's resources were found healthy.
    StepHealthy,
    /// The rollout stops: paused, rolled back or held (`Stalled`).
    Stopped,
    /// A round's end, or the end of a round that acts on nothing (an
    /// invalid revision, an unreadable source, a suspended object).
    RoundEnd,
}

/// Writes one object's status, skipping what the object already holds.
pub(super) struct StatusWriter {
    client: Client,
    namespace: String,
    name: String,
    /// The status the object holds, as far as this writer knows.
    held: Option<OperatorAssignmentStatus>,
}

impl StatusWriter {
    /// A writer for `object`, which holds the status it was read with.
    pub(super) fn new(client: &Client, object: &OperatorAssignment) -> StatusWriter {
        StatusWriter {
            client: client.clone(),
            namespace: object.metadata.namespace.clone().unwrap_or_default(),
            name: object.metadata.name.clone().unwrap_or_default(),
            held: object.status.clone(),
        }
    }

    /// Writes `status` at `at`, unless the object holds it already.
    pub(super) async fn write(
        &mut self,
        status: &OperatorAssignmentStatus,
        at: Checkpoint,
    ) -> Result<(), SyncError> {
        let status = stamped(status);
        if self.held.as_ref() == Some(&status) {
            return Ok(());
        }
        status::write(&self.client, &self.namespace, &self.name, &status)
            .await
            .map_err(|source| SyncError::Status {
                name: self.name.clone(),
                source,
            })?;
        tracing::debug!(checkpoint = ?at, object = %self.name, "status written");
        self.held = Some(status);
        Ok(())
    }
}

/// `status` as this reconciler writes it: with its own version.
fn stamped(status: &OperatorAssignmentStatus) -> OperatorAssignmentStatus {
    OperatorAssignmentStatus {
        reconciler_version: Some(env!("CARGO_PKG_VERSION").to_string()),
        ..status.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client whose every request fails: a write that reaches the network
    /// shows as an error.
    fn unreachable() -> Client {
        let url = "http://127.0.0.1:9".parse().unwrap();
        Client::try_from(kube::Config::new(url)).unwrap()
    }

    fn object(status: Option<OperatorAssignmentStatus>) -> OperatorAssignment {
        let mut o: OperatorAssignment = serde_saphyr::from_str(
            "apiVersion: camelk.dev/v1alpha1\nkind: OperatorAssignment\nmetadata: {name: a, namespace: n}\nspec:\n  operators: [{id: operator-1, namespace: x}]\n  defaultOperator: operator-1\n",
        )
        .unwrap();
        o.status = status;
        o
    }

    #[tokio::test]
    async fn only_a_status_the_object_does_not_hold_is_written() {
        let held = stamped(&OperatorAssignmentStatus {
            last_attempted_revision: Some("r1".into()),
            ..Default::default()
        });
        let mut writer = StatusWriter::new(&unreachable(), &object(Some(held.clone())));
        // What the object holds: no request at all.
        writer.write(&held, Checkpoint::RoundEnd).await.unwrap();
        let changed = OperatorAssignmentStatus {
            last_attempted_revision: Some("r2".into()),
            ..held
        };
        let tried = writer.write(&changed, Checkpoint::StepStarted).await;
        assert!(matches!(tried, Err(SyncError::Status { .. })), "{tried:?}");
        // An object read without a status holds none: the first write goes out.
        let mut writer = StatusWriter::new(&unreachable(), &object(None));
        let tried = writer.write(&changed, Checkpoint::RoundEnd).await;
        assert!(tried.is_err());
    }
}

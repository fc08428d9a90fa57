//! The plan of live resources: the one place the plan engine's input needs a
//! read beyond owner keys. Phases are not in metadata, so they are read for
//! the would-be moves only and the plan made again with them (a move whose
//! owner is mid-work is blocked). `kubectl camelk plan` and the reconciler's
//! plan endpoint both plan through here, so they agree.

use kube::Client;

use super::{Actual, Plan, plan};
use crate::api::OperatorAssignmentSpec;
use crate::inventory::Inventory;
use crate::inventory::metadata_list::{ClusterReadError, fill_phases};

/// Plans `desired` against `inventory` (owner keys as listed), reading the
/// phases of the resources that would move.
pub async fn plan_reading_phases(
    client: &Client,
    desired: &OperatorAssignmentSpec,
    actual: Actual<'_>,
    mut inventory: Inventory,
) -> Result<Plan, ClusterReadError> {
    let first = plan(desired, actual, &inventory);
    let candidates: Vec<_> = first.moves().map(|m| m.resource.clone()).collect();
    if candidates.is_empty() {
        return Ok(first);
    }
    fill_phases(client, &mut inventory, &candidates).await?;
    Ok(plan(desired, actual, &inventory))
}

/// What the reconciler's plan endpoint answers: the plan of `head` against
/// `base` on the live cluster, and what it was made of.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServedPlan {
    /// The `OperatorAssignment` the manifest at `head` declares:
    /// `NAMESPACE/NAME`, or `NAME` when it names no namespace.
    pub assignment: String,
    /// The commit `base` resolved to; `None` when no base was asked for or
    /// the manifest does not exist there (then actual owners are the owner
    /// keys the resources carry now).
    pub base: Option<String>,
    /// The commit `head` resolved to.
    pub head: String,
    /// The plan.
    pub plan: Plan,
}

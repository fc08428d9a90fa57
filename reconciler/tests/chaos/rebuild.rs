//! What a user does for an Integration that upstream Camel K failed during a
//! fault: `kamel rebuild`, which clears its status.
//!
//! Seen with 2.10.1 after a kube-apiserver restart: for about 0.1 s the new
//! server answers 403 before its RBAC caches are filled; an operator whose
//! trait asked discovery then (`/apis/image.openshift.io/v1`) sets the
//! Integration to `Error` with `Ready` reason `InitializationFailed`, and
//! upstream leaves it so until its spec changes or it is rebuilt. No owner
//! can make it healthy: left alone, the rollout's health gate pauses on it at
//! its timeout, naming the cause (`phase `Error` (InitializationFailed: ...)`).
//! With upstream operators the scenarios rebuild each Integration failed so
//! since the fault began, as soon as it shows, then check that the rollout
//! finishes as usual, and count the rebuilds in their table.

use std::collections::BTreeSet;
use std::time::Duration;

use camelk_reconciler::camel_k::CamelKind;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{DynamicObject, ListParams, PostParams};
use tokio::sync::oneshot;

use crate::world;

/// Rebuilds, until `stop` fires, every Integration whose operator failed it
/// at initialization at or after `since` (whole seconds, as conditions
/// record time). Returns each one rebuilt with the cause its operator gave.
pub async fn failed_since(
    client: Client,
    since: Timestamp,
    mut stop: oneshot::Receiver<()>,
) -> Vec<(String, String)> {
    let api = world::api(&client, CamelKind::Integration);
    let since = Timestamp::from_second(since.as_second()).unwrap_or(since);
    let mut done: BTreeSet<(String, String)> = BTreeSet::new();
    let mut rebuilt = Vec::new();
    loop {
        if let Ok(list) = api.list(&ListParams::default()).await {
            for it in &list.items {
                let Some((failed_at, cause)) = failed_at_initialization(it) else {
                    continue;
                };
                let name = it.metadata.name.clone().unwrap_or_default();
                if failed_at < since || !done.insert((name.clone(), failed_at.to_string())) {
                    continue;
                }
                let mut cleared = it.clone();
                cleared.data["status"] = serde_json::json!({});
                match api
                    .replace_status(&name, &PostParams::default(), &cleared)
                    .await
                {
                    Ok(_) => rebuilt.push((name, cause)),
                    // Changed since the list: the next pass sees it again.
                    Err(_) => {
                        done.remove(&(name, failed_at.to_string()));
                    }
                }
            }
        }
        tokio::select! {
            _ = &mut stop => return rebuilt,
            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
        }
    }
}

/// When and why an Integration's operator failed it at initialization.
fn failed_at_initialization(it: &DynamicObject) -> Option<(Timestamp, String)> {
    let status = it.data.get("status")?;
    if status.get("phase")?.as_str()? != "Error" {
        return None;
    }
    let ready = status
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?;
    if ready["reason"] != "InitializationFailed" {
        return None;
    }
    let at = ready["lastTransitionTime"].as_str()?.parse().ok()?;
    Some((at, ready["message"].as_str().unwrap_or("").to_string()))
}

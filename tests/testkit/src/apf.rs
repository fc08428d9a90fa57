//! API Priority and Fairness set against one user: the way a test makes the
//! API server refuse that user's requests (429) while it serves everyone else.

use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

/// Puts every request of `user` in a priority level of its own
/// (`throttle-<user>`) with no nominal seats, no borrowing and no queue. API
/// Priority and Fairness then serves its requests about one at a time and
/// answers the others 429 at once (seen in the audit log: concurrent LISTs,
/// a lease GET next to an Event). Returns once the API server has taken the
/// FlowSchema in (its `Dangling` condition is set).
pub async fn throttle(admin: &Client, user: &str) -> Result<(), kube::Error> {
    let name = format!("throttle-{user}");
    let level = json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "PriorityLevelConfiguration",
        "metadata": { "name": name },
        "spec": { "type": "Limited", "limited": {
            "nominalConcurrencyShares": 0,
            "lendablePercent": 0,
            "borrowingLimitPercent": 0,
            "limitResponse": { "type": "Reject" }
        } }
    });
    let schema = json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": { "name": name },
        "spec": {
            "priorityLevelConfiguration": { "name": name },
            // Ahead of the suggested schemas a plain user matches (`global-default`).
            "matchingPrecedence": 100,
            "distinguisherMethod": { "type": "ByUser" },
            "rules": [{
                "subjects": [{ "kind": "User", "user": { "name": user } }],
                "resourceRules": [{ "verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                    "namespaces": ["*"], "clusterScope": true }],
                "nonResourceRules": [{ "verbs": ["*"], "nonResourceURLs": ["*"] }]
            }]
        }
    });
    let apply = PatchParams::apply("camelk-testkit").force();
    Api::<PriorityLevelConfiguration>::all(admin.clone())
        .patch(&name, &apply, &Patch::Apply(&level))
        .await?;
    let schemas = Api::<FlowSchema>::all(admin.clone());
    schemas.patch(&name, &apply, &Patch::Apply(&schema)).await?;
    // The API server's configuration controller marks a schema it has read.
    let dangling_set = |s: &FlowSchema| {
        s.status
            .iter()
            .flat_map(|s| s.conditions.iter().flatten())
            .any(|c| c.type_ == "Dangling")
    };
    crate::poll::until(
        std::time::Duration::from_secs(30),
        || async { schemas.get_opt(&name).await.ok().flatten() },
        dangling_set,
    )
    .await
    .unwrap_or_else(|last| panic!("FlowSchema {name} not taken in after 30 s: {last:?}"));
    Ok(())
}

//! Proof that the local control plane is a real Kubernetes and behaves as one:
//! the version it reports, server-side label selection on watches (and the
//! audit log recording it), RBAC, garbage collection by kube-controller-manager,
//! and the two fencing primitives the handoff protocol relies on.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use camelk_testkit::binaries::pinned_kube_version;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::Client;
use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::json;

fn integrations(client: Client, ns: &str) -> Api<DynamicObject> {
    camelk_testkit::scenario::camel_api(client, CamelKind::Integration, ns)
}

/// A fresh namespace named after `prefix` on the shared control plane, and
/// its Integrations as the admin.
async fn integrations_in(prefix: &str) -> (camelk_testkit::TestNamespace, Api<DynamicObject>) {
    let cluster = camelk_testkit::shared();
    let ns = cluster.namespace(prefix).await;
    let api = integrations(cluster.admin().await, &ns.name);
    (ns, api)
}

async fn create_integration(
    api: &Api<DynamicObject>,
    name: &str,
    owner: Option<&str>,
) -> DynamicObject {
    let mut labels = serde_json::Map::new();
    if let Some(owner) = owner {
        labels.insert(OPERATOR_ID_KEY.into(), json!(owner));
    }
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": CamelKind::Integration.api_version(),
        "kind": "Integration",
        "metadata": { "name": name, "labels": labels },
        "spec": { "sources": [{ "name": "route.yaml", "content": "- from: timer:x" }] }
    }))
    .unwrap();
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating integration {name}: {e}"))
}

fn status_code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

fn owner_label(obj: &DynamicObject) -> Option<String> {
    obj.metadata.labels.as_ref()?.get(OPERATOR_ID_KEY).cloned()
}

/// Decodes %XX escapes (the audit log records the request URI as sent).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn version_is_the_pinned_kubernetes() {
    let cluster = camelk_testkit::shared();
    let info = cluster.admin().await.apiserver_version().await.unwrap();
    assert_eq!(info.git_version, pinned_kube_version());
    assert_eq!(format!("v{}.{}", info.major, info.minor), {
        let v = pinned_kube_version();
        v[..v.rfind('.').unwrap()].to_string()
    });
}

#[tokio::test]
async fn label_selected_watch_delivers_only_matching_objects() {
    let (ns, api) = integrations_in("watch").await;
    create_integration(&api, "mine-before", Some("operator-1")).await;
    create_integration(&api, "other-before", Some("operator-2")).await;
    create_integration(&api, "unlabelled-before", None).await;

    let selector = format!("{OPERATOR_ID_KEY}=operator-1");
    let params = WatchParams::default().labels(&selector).timeout(5);
    let mut stream = api.watch(&params, "0").await.unwrap().boxed();

    create_integration(&api, "mine-after", Some("operator-1")).await;
    create_integration(&api, "other-after", Some("operator-2")).await;
    create_integration(&api, "unlabelled-after", None).await;

    let mut seen = BTreeSet::new();
    // The server ends the watch after its 5 s timeout; everything sent is in by then.
    while let Some(event) = stream.next().await {
        match event.unwrap() {
            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                seen.insert(o.metadata.name.unwrap());
            }
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => panic!("watch error: {e:?}"),
        }
    }
    assert_eq!(
        seen,
        BTreeSet::from(["mine-after".to_string(), "mine-before".to_string()])
    );

    let events = camelk_testkit::shared()
        .audit_log()
        .events_in(&ns.name)
        .unwrap();
    let watch = events
        .iter()
        .find(|e| e.verb == "watch" && e.resource() == Some("integrations"))
        .expect("the watch is in the audit log");
    assert!(
        percent_decode(&watch.request_uri).contains(&format!("labelSelector={selector}")),
        "audit log records the selector: {}",
        watch.request_uri
    );
}

#[tokio::test]
async fn unprivileged_identity_may_patch_only_after_a_role_grants_it() {
    let cluster = camelk_testkit::shared();
    let ns = cluster.namespace("rbac").await;
    let admin = cluster.admin().await;
    create_integration(
        &integrations(admin.clone(), &ns.name),
        "orders",
        Some("operator-1"),
    )
    .await;

    let as_developer = integrations(cluster.client_as("developer").await, &ns.name);
    let patch =
        Patch::Merge(json!({ "metadata": { "labels": { OPERATOR_ID_KEY: "operator-2" } } }));
    let denied = as_developer
        .patch("orders", &PatchParams::default(), &patch)
        .await
        .expect_err("no role yet");
    assert_eq!(status_code(&denied), Some(403), "{denied}");

    let may_patch = PolicyRule {
        api_groups: Some(vec!["camel.apache.org".into()]),
        resources: Some(vec!["integrations".into()]),
        verbs: vec!["get".into(), "patch".into()],
        ..Default::default()
    };
    cluster
        .grant_in_namespace(
            &ns.name,
            "developer",
            "integration-patcher",
            vec![may_patch],
        )
        .await;

    // The authorizer learns of new bindings through its informer: allow it a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    let patched = loop {
        match as_developer
            .patch("orders", &PatchParams::default(), &patch)
            .await
        {
            Ok(obj) => break obj,
            Err(e) if status_code(&e) == Some(403) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(e) => panic!("patch after the grant: {e}"),
        }
    };
    assert_eq!(owner_label(&patched).as_deref(), Some("operator-2"));

    // Still nothing beyond the grant: delete stays forbidden.
    let denied = as_developer
        .delete("orders", &DeleteParams::default())
        .await
        .expect_err("delete is not granted");
    assert_eq!(status_code(&denied), Some(403));
}

#[tokio::test]
async fn lease_owned_by_an_integration_is_garbage_collected_with_it() {
    let cluster = camelk_testkit::shared();
    let ns = cluster.namespace("gc").await;
    let admin = cluster.admin().await;
    let its = integrations(admin.clone(), &ns.name);
    let owner = create_integration(&its, "orders", Some("operator-1")).await;
    let survivor = create_integration(&its, "billing", Some("operator-1")).await;

    let leases: Api<Lease> = Api::namespaced(admin, &ns.name);
    for (lease_name, it) in [("orders-handoff", &owner), ("billing-handoff", &survivor)] {
        let lease: Lease = serde_json::from_value(json!({
            "metadata": {
                "name": lease_name,
                "ownerReferences": [{
                    "apiVersion": CamelKind::Integration.api_version(),
                    "kind": "Integration",
                    "name": it.metadata.name,
                    "uid": it.metadata.uid,
                }]
            },
            "spec": { "holderIdentity": "operator-1" }
        }))
        .unwrap();
        leases.create(&PostParams::default(), &lease).await.unwrap();
    }

    its.delete("orders", &DeleteParams::background())
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while leases.get_opt("orders-handoff").await.unwrap().is_some() {
        assert!(
            Instant::now() < deadline,
            "the dependent Lease was not garbage-collected within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        leases.get_opt("billing-handoff").await.unwrap().is_some(),
        "a Lease whose owner still exists is kept"
    );
}

#[tokio::test]
async fn failed_json_patch_test_is_refused_and_changes_nothing() {
    let (_ns, api) = integrations_in("fence").await;
    let before = create_integration(&api, "orders", Some("operator-2")).await;

    let fenced_flip = |expected_owner: &str| {
        let ops = json!([
            { "op": "test", "path": "/metadata/labels/camel.apache.org~1operator.id", "value": expected_owner },
            { "op": "replace", "path": "/metadata/labels/camel.apache.org~1operator.id", "value": "operator-3" }
        ]);
        Patch::<()>::Json(serde_json::from_value(ops).unwrap())
    };

    let params = PatchParams::default();
    let refused = api
        .patch("orders", &params, &fenced_flip("operator-1"))
        .await
        .expect_err("the label names operator-2, not operator-1");
    assert_eq!(status_code(&refused), Some(422), "{refused}");
    let after = api.get("orders").await.unwrap();
    assert_eq!(owner_label(&after).as_deref(), Some("operator-2"));
    assert_eq!(
        after.metadata.resource_version,
        before.metadata.resource_version
    );

    // The same patch with the right expectation goes through: the test op is what refused it.
    let flipped = api
        .patch("orders", &params, &fenced_flip("operator-2"))
        .await
        .unwrap();
    assert_eq!(owner_label(&flipped).as_deref(), Some("operator-3"));
}

#[tokio::test]
async fn stale_resource_version_precondition_is_a_conflict() {
    let (_ns, api) = integrations_in("rv").await;
    let before = create_integration(&api, "orders", Some("operator-1")).await;
    let stale = before.metadata.resource_version.clone().unwrap();

    api.patch(
        "orders",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "annotations": { "touched": "yes" } } })),
    )
    .await
    .unwrap();

    let guarded = Patch::Merge(json!({
        "metadata": { "resourceVersion": stale, "labels": { OPERATOR_ID_KEY: "operator-2" } }
    }));
    let conflict = api
        .patch("orders", &PatchParams::default(), &guarded)
        .await
        .expect_err("resourceVersion is stale");
    assert_eq!(status_code(&conflict), Some(409), "{conflict}");
    let after = api.get("orders").await.unwrap();
    assert_eq!(owner_label(&after).as_deref(), Some("operator-1"));

    // With the current resourceVersion the same precondition passes.
    let current = after.metadata.resource_version.clone().unwrap();
    let ok = Patch::Merge(json!({
        "metadata": { "resourceVersion": current, "labels": { OPERATOR_ID_KEY: "operator-2" } }
    }));
    let updated = api
        .patch("orders", &PatchParams::default(), &ok)
        .await
        .unwrap();
    assert_eq!(owner_label(&updated).as_deref(), Some("operator-2"));
}

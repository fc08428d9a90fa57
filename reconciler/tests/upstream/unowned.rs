//! An unowned resource that an upstream operator already reconciles: a
//! namespaced upstream Camel K operator (v2.10) handles every resource of its
//! namespace that carries no owner key. The manifest names it
//! (`handlesUnowned: true`), so a first assignment to another operator goes
//! through the upstream release rule (a stable phase, guarded in the write),
//! not a bare write under the running operator's feet.
//!
//! It shares operator-2 with the other tests of this binary; its operator-3,
//! namespaced, takes turns ([`crate::OPERATOR_3`]) with the global operator-3
//! of `adoption`, which would take this one's IntegrationPlatform (annotated
//! `operator-3`) for its own.

use std::time::Duration;

use crate::NAME;
use crate::support::*;
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY, owner_id};
use camelk_reconciler::camel_k::{condition, phase};
use camelk_testkit::manifest::{Assignment, Operator};
use camelk_testkit::upstream::UpstreamOptions;
use kube::api::{DynamicObject, PostParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn an_unowned_resource_leaves_its_handler_through_the_release_rule() {
    let _operator_3 = crate::OPERATOR_3.lock().await;
    let cluster = camelk_testkit::shared();
    let (ns, admin) =
        policed_sync_namespace(cluster, "up-unowned", &OPERATORS, Some("operator-3")).await;
    crate::shared_operators(cluster).await;
    // Namespaced: it lives in, watches, and locks in the apps' namespace.
    let mut opts = UpstreamOptions::new("operator-3");
    opts.namespace = ns.name.clone();
    opts.watch_namespace = ns.name.clone();
    let op3 = cluster.upstream_operator_with(&opts).await;
    op3.ready_platform(&admin)
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    // No owner key at all: operator-3 runs it all the same.
    let legacy: DynamicObject = serde_json::from_value(json!({
        "apiVersion": CamelKind::Integration.api_version(), "kind": "Integration",
        "metadata": { "name": "legacy" },
        "spec": { "traits": { "container": { "image": "docker.io/library/camelk-e2e:1.0" } } },
    }))
    .unwrap();
    let api = camel_api(admin.clone(), CamelKind::Integration, &ns.name);
    api.create(&PostParams::default(), &legacy).await.unwrap();
    wait_for(&admin, CamelKind::Integration, &ns.name, "legacy")
        .within(Duration::from_secs(180))
        .until(
            "Running and Ready with no owner key, under operator-3",
            |o| {
                phase(o) == Some("Running")
                    && condition(o, "Ready") == Some("True")
                    && owner_id(&o.metadata).is_none()
            },
        )
        .await;

    let manifest = Assignment::new(NAME)
        .upstream_operator("operator-2", "camel-k-op2")
        .with_operator(
            Operator::new("operator-3", &ns.name)
                .upstream()
                .handles_unowned(),
        )
        .scope(&[&ns.name], &[CamelKind::Integration])
        .default_operator("operator-2")
        .render();
    let (_git, _sync) = crate::sync_applied(cluster, &ns.name, &manifest).await;
    let moved = wait_for(&admin, CamelKind::Integration, &ns.name, "legacy")
        .within(Duration::from_secs(180))
        .until(
            "Running and Ready under operator-2",
            ready_under("operator-2"),
        )
        .await;
    assert_eq!(
        moved
            .metadata
            .labels
            .unwrap_or_default()
            .get(OPERATOR_ID_KEY)
            .map(String::as_str),
        Some("operator-2")
    );
    // The first assignment was guarded on the phase operator-3 left it in.
    let assignment = cluster
        .audit_log()
        .events_by(&ns.name, "reconciler")
        .unwrap()
        .into_iter()
        .find(|e| {
            e.stage == "ResponseComplete"
                && e.is_successful_write()
                && e.object_ref.as_ref().and_then(|o| o.name.as_deref()) == Some("legacy")
        })
        .expect("the reconciler assigned legacy");
    let patch = assignment.request_object.clone().unwrap_or_default();
    assert!(
        patch
            .as_array()
            .is_some_and(|ops| ops.iter().any(|op| op["op"] == "test"
                && op["path"] == "/status/phase"
                && op["value"] == "Running")),
        "the write tests the phase judged stable: {patch}"
    );

    assert_single_owner_with(cluster, &ns.name, Some("operator-3"));
    drop(op3);
}

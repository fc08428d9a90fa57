//! A resource deleted and re-created under the same name while the garbage
//! collector still holds the children of the deleted one: the reference
//! operator must not take a namesake's child for the new resource's. A
//! finalizer keeps the old children alive, so the race happens every time.

use std::time::{Duration, Instant};

use crate::support::*;
use camelk_reconciler::camel_k::CamelKind;
use camelk_reconciler::camel_k::phase;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

/// A finalizer of this test's: the garbage collector marks the object
/// deleted but cannot remove it until the test lets go.
const HOLD: &str = "camelk.dev/e2e-hold";
const MINUTE: Duration = Duration::from_secs(60);

async fn set_finalizers(api: &Api<DynamicObject>, name: &str, finalizers: serde_json::Value) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "finalizers": finalizers } })),
    )
    .await
    .unwrap_or_else(|e| panic!("finalizers of {name}: {e}"));
}

/// Deletes `name` in the background (its children go through the garbage
/// collector) and waits until it is gone and `child` is marked deleted.
async fn delete_leaving(
    parent: &Api<DynamicObject>,
    name: &str,
    child: &Api<DynamicObject>,
    child_name: &str,
) {
    parent
        .delete(name, &DeleteParams::background())
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let parent_gone = parent.get_opt(name).await.unwrap().is_none();
        let child_marked = child
            .get_opt(child_name)
            .await
            .unwrap()
            .is_some_and(|c| c.metadata.deletion_timestamp.is_some());
        if parent_gone && child_marked {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} deleted, {child_name} not marked deleted by the garbage collector"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn create_pipe(client: &kube::Client, ns: &str, name: &str, owner: &str) -> DynamicObject {
    let pipe: DynamicObject = serde_json::from_value(json!({
        "apiVersion": CamelKind::Pipe.api_version(), "kind": "Pipe",
        "metadata": { "name": name,
            "labels": { camelk_reconciler::camel_k::OPERATOR_ID_KEY: owner },
            "annotations": { camelk_reconciler::camel_k::OPERATOR_ID_KEY: owner } },
        "spec": {}
    }))
    .unwrap();
    camel_api(client.clone(), CamelKind::Pipe, ns)
        .create(&PostParams::default(), &pipe)
        .await
        .unwrap_or_else(|e| panic!("creating pipe {name}: {e}"))
}

/// Waits (a minute at most) until Pipe `name` is `Ready`.
async fn wait_pipe_ready(admin: &kube::Client, ns: &str, name: &str) {
    wait_for(admin, CamelKind::Pipe, ns, name)
        .within(MINUTE)
        .until("ready", in_phase("Ready"))
        .await;
}

fn owner_uids(meta: &ObjectMeta) -> Vec<&str> {
    meta.owner_references
        .iter()
        .flatten()
        .map(|r| r.uid.as_str())
        .collect()
}

#[tokio::test]
async fn re_created_resources_wait_for_their_namesakes_children_to_go() {
    let cluster = camelk_testkit::shared();
    let (ns, admin) = namespace_and_admin(cluster, "recreated").await;
    let op = start_operator(cluster, "operator-1", &ns.name, "op1", "1s").await;
    let integrations = camel_api(admin.clone(), CamelKind::Integration, &ns.name);
    let pipes = camel_api(admin.clone(), CamelKind::Pipe, &ns.name);
    let kits = camel_api(admin.clone(), CamelKind::IntegrationKit, &ns.name);
    let builds = camel_api(admin.clone(), CamelKind::Build, &ns.name);
    let kit = "orders-kit-operator-1";

    // An Integration and a Pipe run; their children are held by a finalizer.
    create_integration(&admin, &ns.name, "orders", Some("operator-1")).await;
    create_pipe(&admin, &ns.name, "feed", "operator-1").await;
    wait_running(&admin, &ns.name, "orders", "operator-1", MINUTE.as_secs()).await;
    wait_pipe_ready(&admin, &ns.name, "feed").await;
    set_finalizers(&kits, kit, json!([HOLD])).await;
    set_finalizers(&integrations, "feed", json!([HOLD])).await;
    delete_leaving(&integrations, "orders", &kits, kit).await;
    delete_leaving(&pipes, "feed", &integrations, "feed").await;

    // Re-created under the same names: a kit and an Integration of those
    // names exist, but they are the deleted namesakes'.
    let orders = create_integration(&admin, &ns.name, "orders", Some("operator-1")).await;
    let feed = create_pipe(&admin, &ns.name, "feed", "operator-1").await;
    let orders_uid = orders.metadata.uid.clone().unwrap();
    let feed_uid = feed.metadata.uid.clone().unwrap();
    // Many passes (a resync every 300 ms, builds of 1 s): neither moves past
    // the step that needs its child.
    let held_until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < held_until {
        let it = integrations.get("orders").await.unwrap();
        assert!(
            matches!(phase(&it), None | Some("Initialization")),
            "orders went on with its namesake's kit: phase {:?}\n{}",
            phase(&it),
            op.log_tail()
        );
        let pipe = pipes.get("feed").await.unwrap();
        assert_eq!(
            phase(&pipe),
            None,
            "feed went on with its namesake's Integration\n{}",
            op.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        phase(&integrations.get("orders").await.unwrap()),
        Some("Initialization")
    );

    // Once the garbage collector may remove the old children, each gets its own.
    set_finalizers(&kits, kit, json!(null)).await;
    set_finalizers(&integrations, "feed", json!(null)).await;
    let running = wait_running(&admin, &ns.name, "orders", "operator-1", MINUTE.as_secs()).await;
    assert_eq!(running.metadata.uid.as_deref(), Some(orders_uid.as_str()));
    let new_kit = kits.get(kit).await.unwrap();
    assert_eq!(owner_uids(&new_kit.metadata), [orders_uid.as_str()]);
    let build = builds.get(kit).await.unwrap();
    assert_eq!(
        owner_uids(&build.metadata),
        [new_kit.metadata.uid.as_deref().unwrap()]
    );
    let deployment = Api::<Deployment>::namespaced(admin.clone(), &ns.name)
        .get("orders")
        .await
        .unwrap();
    assert_eq!(owner_uids(&deployment.metadata), [orders_uid.as_str()]);
    wait_pipe_ready(&admin, &ns.name, "feed").await;
    let feed_integration = integrations.get("feed").await.unwrap();
    assert_eq!(owner_uids(&feed_integration.metadata), [feed_uid.as_str()]);
    assert_eq!(phase(&feed_integration), Some("Running"));
    assert_single_owner(cluster, &ns.name);
}

//! A real upstream Apache Camel K operator (`kamel operator`, the pinned
//! release) on the local control plane: with its IntegrationPlatform Ready, an
//! Integration annotated with its id and given a prebuilt image skips the
//! build and runs (its Deployment's pod is scheduled to the KWOK node and made
//! ready), so it reaches `Running` with `Ready=True`; one that must be built
//! fails here (no Maven, no registry) and ends in `Error`.

use std::time::{Duration, Instant};

use camelk_testkit::upstream::OPERATOR_ID_ANNOTATION;
use k8s_openapi::api::apps::v1::Deployment;
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

fn integrations(client: Client, ns: &str) -> Api<DynamicObject> {
    camelk_testkit::scenario::camel_api(
        client,
        camelk_reconciler::camel_k::CamelKind::Integration,
        ns,
    )
}

async fn create(api: &Api<DynamicObject>, name: &str, owner: &str, spec: Value) {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "camel.apache.org/v1",
        "kind": "Integration",
        "metadata": { "name": name, "annotations": { OPERATOR_ID_ANNOTATION: owner } },
        "spec": spec,
    }))
    .unwrap();
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating integration {name}: {e}"));
}

fn ready_status(obj: &DynamicObject) -> Option<String> {
    obj.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")
        .and_then(|c| c["status"].as_str())
        .map(str::to_string)
}

/// Waits until `accept(phase, Ready status)`; panics with the last status and the operator's log.
async fn wait_for(
    api: &Api<DynamicObject>,
    name: &str,
    timeout: Duration,
    log: &dyn Fn() -> String,
    accept: impl Fn(&str, Option<&str>) -> bool,
) -> DynamicObject {
    let deadline = Instant::now() + timeout;
    loop {
        let obj = api.get(name).await.unwrap();
        let phase = obj.data["status"]["phase"].as_str().unwrap_or_default();
        if accept(phase, ready_status(&obj).as_deref()) {
            return obj;
        }
        if Instant::now() > deadline {
            panic!(
                "integration {name} after {timeout:?}: status {}\noperator log:\n{}",
                serde_json::to_string_pretty(&obj.data["status"]).unwrap(),
                log()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_operator_runs_a_prebuilt_integration_and_fails_a_build() {
    let cluster = camelk_testkit::shared();
    let ns = cluster.namespace("upstream-smoke").await;
    let admin = cluster.admin().await;
    let operator = cluster.upstream_operator("operator-1").await;
    operator
        .ready_platform(&admin)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let log = || operator.log_tail(40);

    let api = integrations(admin.clone(), &ns.name);
    create(
        &api,
        "prebuilt",
        "operator-1",
        json!({ "traits": { "container": { "image": "docker.io/library/camelk-smoke:1.0" } } }),
    )
    .await;
    create(
        &api,
        "needs-build",
        "operator-1",
        json!({ "sources": [{ "name": "route.yaml", "content": "- from:\n    uri: timer:tick\n    steps:\n    - log: tick\n" }] }),
    )
    .await;

    wait_for(
        &api,
        "prebuilt",
        Duration::from_secs(180),
        &log,
        |phase, ready| phase == "Running" && ready == Some("True"),
    )
    .await;
    let deployment = Api::<Deployment>::namespaced(admin.clone(), &ns.name)
        .get("prebuilt")
        .await
        .expect("the operator made a Deployment");
    assert_eq!(
        deployment.status.and_then(|s| s.ready_replicas),
        Some(1),
        "its pod runs on the simulated node"
    );

    wait_for(
        &api,
        "needs-build",
        Duration::from_secs(180),
        &log,
        |phase, _| phase == "Error",
    )
    .await;
}

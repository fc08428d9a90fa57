//! A real upstream Apache Camel K operator (`kamel operator`, the pinned
//! release) on the local control plane: with its IntegrationPlatform Ready, an
//! Integration annotated with its id and given a prebuilt image skips the
//! build and runs (its Deployment's pod is scheduled to the KWOK node and made
//! ready), so it reaches `Running` with `Ready=True`; one that must be built
//! fails here (no Maven, no registry) and ends in `Error`.

use std::time::{Duration, Instant};

use camelk_testkit::cli;
use k8s_openapi::api::apps::v1::Deployment;
use kube::Client;
use kube::api::{Api, DynamicObject};

/// A prebuilt image: an Integration that runs it needs no build.
const IMAGE: &str = "docker.io/library/camelk-smoke:1.0";

fn integrations(client: Client, ns: &str) -> Api<DynamicObject> {
    camelk_testkit::scenario::camel_api(
        client,
        camelk_reconciler::camel_k::CamelKind::Integration,
        ns,
    )
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
                "integration {name} after {timeout:?}: status {}\n{}\noperator log:\n{}",
                serde_json::to_string_pretty(&obj.data["status"]).unwrap(),
                camelk_testkit::upstream::camel_k_state(&api.clone().into_client()).await,
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
    cli::kamel_run(&api, "prebuilt", "operator-1", cli::prebuilt(IMAGE)).await;
    cli::kamel_run(&api, "needs-build", "operator-1", cli::to_build()).await;

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

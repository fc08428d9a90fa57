//! The reference Camel K lifecycle of the scoped operator loops, on a real
//! control plane with three operator processes sharing one namespace: each
//! reconciles only its own Integrations, Pipes and IntegrationPlatforms.

use std::time::Duration;

use crate::support::*;
use camelk_reconciler::camel_k::phase;
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::json;

async fn create(client: &kube::Client, ns: &str, kind: CamelKind, name: &str, owner: &str) {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": kind.api_version(), "kind": kind.kind(),
        "metadata": { "name": name, "labels": { OPERATOR_ID_KEY: owner }, "annotations": { OPERATOR_ID_KEY: owner } },
        "spec": {}
    }))
    .unwrap();
    camel_api(client.clone(), kind, ns)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating {kind} {name}: {e}"));
}

#[tokio::test]
async fn three_operators_each_run_only_their_own_work() {
    let cluster = camelk_testkit::shared();
    let (ns, admin) = namespace_and_admin(cluster, "three").await;
    let mut _ops = Vec::new();
    for id in OPERATORS {
        _ops.push(start_operator(cluster, id, &ns.name, id, "1s").await);
    }
    for id in OPERATORS {
        create(
            &admin,
            &ns.name,
            CamelKind::Integration,
            &format!("it-{id}"),
            id,
        )
        .await;
        create(&admin, &ns.name, CamelKind::IntegrationPlatform, id, id).await;
    }
    for id in OPERATORS {
        wait_running(&admin, &ns.name, &format!("it-{id}"), id, 60).await;
        wait_for(&admin, CamelKind::IntegrationPlatform, &ns.name, id)
            .within(Duration::from_secs(30))
            .until("ready", in_phase("Ready"))
            .await;
    }
    // Several platforms share the namespace; each operator uses its own, and keeps its Maven
    // settings under its id. (Integrations created after the platforms are Ready.)
    for id in OPERATORS {
        let name = format!("late-{id}");
        create(&admin, &ns.name, CamelKind::Integration, &name, id).await;
        let it = wait_running(&admin, &ns.name, &name, id, 60).await;
        assert_eq!(
            it.data["status"]["platform"], id,
            "{name} uses its operator's platform"
        );
    }
    let config_maps: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns.name);
    for id in OPERATORS {
        let cm = config_maps
            .get(&format!("{id}-maven-settings"))
            .await
            .unwrap();
        assert_eq!(cm.metadata.labels.unwrap()[OPERATOR_ID_KEY], id);
    }
    // Secondary objects carry their creator's id; the Deployment its operator's id and version.
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns.name);
    for id in OPERATORS {
        let kit = camel_api(admin.clone(), CamelKind::IntegrationKit, &ns.name)
            .get(&format!("it-{id}-kit-{id}"))
            .await
            .unwrap();
        assert_eq!(owner(&kit).as_deref(), Some(id));
        let build = camel_api(admin.clone(), CamelKind::Build, &ns.name)
            .get(&format!("it-{id}-kit-{id}"))
            .await
            .unwrap();
        assert_eq!(
            (owner(&build).as_deref(), phase(&build)),
            (Some(id), Some("Succeeded"))
        );
        let d = deployments.get(&format!("it-{id}")).await.unwrap();
        assert_eq!(d.metadata.labels.as_ref().unwrap()[OPERATOR_ID_KEY], id);
        assert!(
            d.metadata
                .annotations
                .as_ref()
                .unwrap()
                .contains_key("camelk.dev/operator-version")
        );
        let owner_ref = &d.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner_ref.kind.as_str(), owner_ref.name.as_str()),
            ("Integration", format!("it-{id}").as_str())
        );
    }
    // Each operator wrote only its own objects.
    let events = cluster.audit_log().events_in(&ns.name).unwrap();
    for e in events
        .iter()
        .filter(|e| e.is_successful_write() && e.stage == "ResponseComplete")
    {
        let user = e.user.username.as_str();
        if !OPERATORS.contains(&user) {
            continue;
        }
        let name = e
            .object_ref
            .as_ref()
            .and_then(|o| o.name.clone())
            .unwrap_or_default();
        assert!(
            name.contains(user),
            "{user} wrote {:?} {name}",
            e.resource()
        );
    }
    assert_single_owner(cluster, &ns.name);
}

#[tokio::test]
async fn pipe_creates_its_integration_under_the_same_operator() {
    let cluster = camelk_testkit::shared();
    let (ns, admin) = namespace_and_admin(cluster, "pipe").await;
    let _op = start_operator(cluster, "operator-2", &ns.name, "op2", "1s").await;
    create(
        &admin,
        &ns.name,
        CamelKind::Pipe,
        "orders-pipe",
        "operator-2",
    )
    .await;
    let pipe = wait_for(&admin, CamelKind::Pipe, &ns.name, "orders-pipe")
        .within(Duration::from_secs(60))
        .until("ready", in_phase("Ready"))
        .await;
    let it = wait_running(&admin, &ns.name, "orders-pipe", "operator-2", 5).await;
    let owner_ref = &it.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner_ref.kind.as_str(), owner_ref.uid.as_str()),
        ("Pipe", pipe.metadata.uid.as_deref().unwrap())
    );
    assert_eq!(
        it.metadata.annotations.as_ref().unwrap()[OPERATOR_ID_KEY],
        "operator-2"
    );
    assert_single_owner(cluster, &ns.name);
}

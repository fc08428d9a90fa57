//! The local control plane runs workloads as far as the API can tell: the
//! deployment and replicaset controllers make pods, kube-scheduler binds them
//! to the simulated node, and KWOK reports them running and ready, so a
//! Deployment becomes ready as in a real cluster (no container runs).

use std::time::{Duration, Instant};

use camelk_testkit::cluster::KWOK_NODE;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

#[tokio::test]
async fn a_deployment_gets_a_ready_pod_on_the_simulated_node() {
    let cluster = camelk_testkit::shared();
    let ns = cluster.namespace("workloads").await;
    let admin = cluster.admin().await;
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns.name);
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": "web" },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": "web" } },
            "template": {
                "metadata": { "labels": { "app": "web" } },
                "spec": { "containers": [{ "name": "web", "image": "example.invalid/web:1" }] }
            }
        }
    }))
    .unwrap();
    let started = Instant::now();
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();

    let pods: Api<Pod> = Api::namespaced(admin, &ns.name);
    let deadline = started + Duration::from_secs(60);
    loop {
        let live = deployments.get("web").await.unwrap();
        if live.status.as_ref().and_then(|s| s.ready_replicas) == Some(1) {
            break;
        }
        if Instant::now() > deadline {
            let pods = pods.list(&ListParams::default()).await.unwrap();
            panic!(
                "Deployment not ready after 60 s: {:?}\npods: {:#?}",
                live.status,
                pods.items
                    .iter()
                    .map(|p| (&p.spec.as_ref().unwrap().node_name, &p.status))
                    .collect::<Vec<_>>()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!("Deployment ready after {:?}", started.elapsed());

    let pods = pods.list(&ListParams::default()).await.unwrap();
    let [pod] = pods.items.as_slice() else {
        panic!("one pod expected, got {}", pods.items.len())
    };
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some(KWOK_NODE));
    let status = pod.status.as_ref().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Running"));
    assert!(status.pod_ip.is_some(), "KWOK gives it an IP");
}

//! `kubectl camelk move`, `get` and `operators` against the real control
//! plane, with the scoped operator loops of operator-1 and operator-2
//! running (in-process, each with its own identity and lock).

use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::common::{
    follow, live_camelk, live_camelk_as, start_operator, wait_for_line, wait_running,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn move_get_and_operators_on_a_live_cluster() {
    let cluster = camelk_testkit::shared();
    cluster.grant_camelk_roles().await;
    let ns = cluster.namespace("move").await;
    let stop = CancellationToken::new();
    start_operator(cluster, "operator-1", &ns.name, &stop).await;
    start_operator(cluster, "operator-2", &ns.name, &stop).await;
    let admin = cluster.admin().await;
    let api: Api<DynamicObject> =
        Api::namespaced_with(admin, &ns.name, &CamelKind::Integration.api_resource());
    for name in ["orders", "billing"] {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": CamelKind::Integration.api_version(), "kind": "Integration",
            "metadata": { "name": name, "labels": { OPERATOR_ID_KEY: "operator-1" }, "annotations": { OPERATOR_ID_KEY: "operator-1" } },
            "spec": {}
        }))
        .unwrap();
        api.create(&PostParams::default(), &obj).await.unwrap();
        wait_running(&api, name, "operator-1").await;
    }
    let kubeconfig = cluster.kubeconfig();

    let out = live_camelk(
        &kubeconfig,
        &ns.name,
        &crate::common::words("move integration/orders --to operator-2 --wait -o json"),
    );
    camelk_testkit::assert_success(&out, "move failed");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["result"], "Completed");
    assert_eq!(result["moved"], json!(["Integration/orders"]));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("1/1 moved"),
        "progress is shown on stderr"
    );
    wait_running(&api, "orders", "operator-2").await;

    let out = live_camelk(&kubeconfig, &ns.name, &["get", "integration", "-o", "json"]);
    camelk_testkit::assert_success(&out, "get integration -o json");
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let items = &listed["items"];
    let owners: Vec<(&str, &str)> = camelk_testkit::str_fields(items, "name")
        .into_iter()
        .zip(camelk_testkit::str_fields(items, "operator"))
        .collect();
    assert_eq!(
        owners,
        [("billing", "operator-1"), ("orders", "operator-2")]
    );
    let out = live_camelk(&kubeconfig, &ns.name, &["get", "--operator", "operator-2"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("orders") && !table.contains("billing"),
        "{table}"
    );
    // As kubectl: -o name for scripts, -o wide with both owner keys as they are.
    let out = live_camelk(&kubeconfig, &ns.name, &["get", "integration", "-o", "name"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "integration.camel.apache.org/billing\nintegration.camel.apache.org/orders\n"
    );
    let out = live_camelk(&kubeconfig, &ns.name, &["get", "integration", "-o", "wide"]);
    let wide = String::from_utf8_lossy(&out.stdout);
    let header: Vec<&str> = wide.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAMESPACE",
            "KIND",
            "NAME",
            "OPERATOR",
            "PHASE",
            "LABEL",
            "ANNOTATION",
            "KEYS-APPLIED-BY"
        ]
    );
    let orders: Vec<&str> = wide
        .lines()
        .find(|l| l.contains("orders"))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        orders[5..],
        ["operator-2", "operator-2", "<none>"],
        "{wide}"
    );
    let out = live_camelk(&kubeconfig, &ns.name, &["plan", "-o", "name"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("-o name is for `get` and `status`; `plan` prints"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = live_camelk(
        &kubeconfig,
        &ns.name,
        &["operators", "--observe", "2500ms", "-o", "json"],
    );
    camelk_testkit::assert_success(&out, "operators --observe");
    let ops: Value = serde_json::from_slice(&out.stdout).unwrap();
    for id in ["operator-1", "operator-2"] {
        let op = ops["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["id"] == id && o["namespace"] == ns.name.as_str())
            .unwrap_or_else(|| panic!("{id} listed: {ops}"));
        assert_eq!(op["alive"], true, "{id} renews its lock");
        assert_eq!(op["holder"], format!("{id}-test"));
    }
    // An operator's version comes from its Deployment (upstream's reads its id
    // from OPERATOR_ID), for whoever may list Deployments.
    let deployment: k8s_openapi::api::apps::v1::Deployment = serde_json::from_value(json!({
        "metadata": { "name": "camel-k-operator" },
        "spec": {
            "selector": { "matchLabels": { "app": "camel-k" } },
            "template": {
                "metadata": { "labels": { "app": "camel-k" } },
                "spec": { "containers": [{ "name": "camel-k-operator",
                    "image": "docker.io/apache/camel-k:2.10.1",
                    "env": [{ "name": "OPERATOR_ID", "value": "operator-1" }] }] }
            }
        }
    }))
    .unwrap();
    Api::namespaced(cluster.admin().await, &ns.name)
        .create(&Default::default(), &deployment)
        .await
        .unwrap();
    let out = live_camelk_as("admin", &kubeconfig, &ns.name)
        .args(["operators", "--observe", "1s", "-o", "json"])
        .output()
        .unwrap();
    let ops: Value = serde_json::from_slice(&out.stdout).unwrap();
    let version = |id: &str| {
        ops["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["id"] == id && o["namespace"] == ns.name.as_str())
            .map(|o| o["version"].clone())
    };
    assert_eq!(version("operator-1"), Some(json!("2.10.1")), "{ops:#}");
    let field = |id: &str, field: &str| {
        ops["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["id"] == id && o["namespace"] == ns.name.as_str())
            .map(|o| o[field].clone())
            .unwrap_or_default()
    };
    assert_eq!(
        field("operator-1", "versionSource"),
        json!({ "from": "image", "deployment": "camel-k-operator",
            "image": "docker.io/apache/camel-k:2.10.1" }),
        "{ops:#}"
    );
    assert_eq!(
        version("operator-2"),
        Some(Value::Null),
        "no Deployment runs it"
    );
    let why = field("operator-2", "versionUnknown");
    assert!(
        why.as_str().is_some_and(|why| why.starts_with(&format!(
            "no Deployment in {} runs it (started some other way: a process, a bare Pod)",
            ns.name
        ))),
        "why the version is not known: {ops:#}"
    );
    // A user who may read Camel K resources and Leases everywhere, and no
    // Deployments (the reconciler may list those, for its plans' restart
    // forecast).
    let rule = |group: &str, resources: &[&str]| k8s_openapi::api::rbac::v1::PolicyRule {
        api_groups: Some(vec![group.into()]),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        verbs: vec!["get".into(), "list".into(), "watch".into()],
        ..Default::default()
    };
    cluster
        .grant_cluster_wide(
            "developer",
            "camel-k-and-leases-reader",
            vec![
                rule(camelk_reconciler::camel_k::GROUP, &["*"]),
                rule("coordination.k8s.io", &["leases"]),
            ],
        )
        .await;
    let operators_wide = || {
        live_camelk_as("developer", &kubeconfig, &ns.name)
            .args(["operators", "--observe", "1s", "-o", "wide"])
            .output()
            .unwrap()
    };
    let mut out = operators_wide();
    // The authorizer learns of the binding through its informer.
    for _ in 0..20 {
        if out.status.success() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        out = operators_wide();
    }
    let wide = String::from_utf8_lossy(&out.stdout);
    let header: Vec<&str> = wide
        .lines()
        .next()
        .unwrap()
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        header[header.len() - 3..],
        ["OWNS", "VERSION-SOURCE", "LEASE DURATION"],
        "{wide}"
    );
    let row = wide
        .lines()
        .find(|l| l.starts_with("operator-1 ") && l.contains(&ns.name))
        .unwrap_or_else(|| panic!("{wide}"));
    assert!(row.ends_with(" 4s"), "the lock's duration: {row}");
    let marker = row
        .split("<unknown> ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| {
            panic!("a user who may not list Deployments still gets the rest: {row}")
        });
    // The marker points to the reason, under the table.
    let reason = format!(
        "{marker} operator-1 in {}: the Deployments of {} may not be listed",
        ns.name, ns.name
    );
    assert!(
        wide.lines().any(|l| l.starts_with(&reason)),
        "{reason:?} in {wide}"
    );

    // get -w prints the row again once billing's owner changes below.
    let mut watch = live_camelk_as("reconciler", &kubeconfig, &ns.name);
    let (mut watch, rows) = follow(watch.args(["get", "integration", "-w"]));
    wait_for_line(&rows, "get -w", |l| {
        l.contains("billing") && l.contains("operator-1")
    });

    // Without --wait only the request is written; the owner releases by itself.
    let out = live_camelk(
        &kubeconfig,
        &ns.name,
        &["move", "it/billing", "--to", "operator-2", "-o", "json"],
    );
    camelk_testkit::assert_success(&out, "move it/billing without --wait");
    let requested: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(requested["result"], "Requested", "{requested}");
    assert_eq!(requested["resources"], json!(["Integration/billing"]));
    assert!(
        requested["request"]
            .as_str()
            .is_some_and(|r| r.starts_with("camelk-handoff-operator-1-operator-2")),
        "{requested}"
    );
    wait_running(&api, "billing", "operator-2").await;
    wait_for_line(&rows, "get -w", |l| {
        l.split_whitespace().collect::<Vec<_>>()[2..] == ["billing", "operator-2", "Running"]
    });
    let _ = watch.kill();
    let _ = watch.wait();
    let out = live_camelk(
        &kubeconfig,
        &ns.name,
        &["move", "it/billing", "--to", "operator-1"],
    );
    camelk_testkit::assert_success(&out, "move it/billing back");
    assert!(String::from_utf8_lossy(&out.stdout).contains("handoff requested"));
    wait_running(&api, "billing", "operator-1").await;

    // Bad input: a kind that is not Camel K's, and a move to an operator that runs nowhere.
    for (target, to, refusal) in [
        ("deployment/x", "operator-2", "not a Camel K kind"),
        ("integration/", "operator-2", "expected KIND/NAME"),
        ("integration/orders", "operator-7", "operator-7 has no lock"),
    ] {
        let out = live_camelk(&kubeconfig, &ns.name, &["move", target, "--to", to]);
        assert_eq!(out.status.code(), Some(1));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(refusal),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // An operator run by no Deployment (here, a loop of this process) writes
    // its version on the IntegrationPlatform named after it, as upstream does.
    let platforms: Api<DynamicObject> = camelk_testkit::scenario::camel_api(
        cluster.admin().await,
        CamelKind::IntegrationPlatform,
        &ns.name,
    );
    let platform: DynamicObject = serde_json::from_value(json!({
        "apiVersion": CamelKind::IntegrationPlatform.api_version(), "kind": "IntegrationPlatform",
        "metadata": { "name": "operator-2", "labels": { OPERATOR_ID_KEY: "operator-2" },
            "annotations": { OPERATOR_ID_KEY: "operator-2" } },
        "spec": {}
    }))
    .unwrap();
    platforms
        .create(&PostParams::default(), &platform)
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while platforms.get("operator-2").await.unwrap().data["status"]["version"] != "test" {
        assert!(
            std::time::Instant::now() < deadline,
            "operator-2 did not write its version on its platform"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let out = live_camelk_as("admin", &kubeconfig, &ns.name)
        .args(["operators", "--observe", "1s", "-o", "json"])
        .output()
        .unwrap();
    let ops: Value = serde_json::from_slice(&out.stdout).unwrap();
    let op2 = ops["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "operator-2" && o["namespace"] == ns.name.as_str())
        .unwrap_or_else(|| panic!("{ops:#}"));
    assert_eq!(op2["version"], "test", "{op2:#}");
    assert_eq!(
        op2["versionSource"],
        json!({ "from": "integrationPlatform", "name": "operator-2" })
    );
    assert_eq!(op2["versionUnknown"], Value::Null);
    stop.cancel();
}

//! `kubectl camelk check` on the real control plane warns about upstream
//! operators whose scopes overlap, read from their Deployments' environment,
//! and names the resources with no owner key that both would write.
//!
//! The Deployments are objects only (the simulated node runs their pods, no
//! operator runs): their environment is all `check` reads.

use k8s_openapi::api::apps::v1::Deployment;
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};

use crate::common::{live_camelk_as, shared_namespace};

/// A Deployment running `kamel operator` as the release's manifests install
/// it, its own namespace from the downward API.
fn operator_deployment(id: &str, watch: Option<&str>, image: &str, replicas: i32) -> Deployment {
    let watch = match watch {
        Some(ns) => json!({ "name": "WATCH_NAMESPACE", "value": ns }),
        None => json!({ "name": "WATCH_NAMESPACE", "value": "" }),
    };
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": "camel-k-operator" },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": "camel-k" } },
            "template": {
                "metadata": { "labels": { "app": "camel-k" } },
                "spec": { "containers": [{
                    "name": "camel-k-operator", "image": image, "command": ["kamel", "operator"],
                    "env": [
                        watch,
                        { "name": "OPERATOR_ID", "value": id },
                        { "name": "NAMESPACE", "valueFrom": { "fieldRef": { "fieldPath": "metadata.namespace" } } },
                    ],
                }] },
            },
        },
    }))
    .unwrap()
}

async fn create_deployment(admin: &Client, ns: &str, deployment: &Deployment) {
    Api::<Deployment>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), deployment)
        .await
        .unwrap_or_else(|e| panic!("creating a Deployment in {ns}: {e}"));
}

async fn create_integration(admin: &Client, ns: &str, name: &str, owner: Option<&str>) {
    let mut meta = json!({ "name": name });
    if let Some(owner) = owner {
        meta["annotations"] = json!({ OPERATOR_ID_KEY: owner });
    }
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": CamelKind::Integration.api_version(), "kind": "Integration",
        "metadata": meta, "spec": {},
    }))
    .unwrap();
    camelk_testkit::scenario::camel_api(admin.clone(), CamelKind::Integration, ns)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating Integration {ns}/{name}: {e}"));
}

/// The overlaps the report gives between Deployments of `namespaces` only
/// (other tests may run operators' Deployments of their own).
fn overlaps_among<'a>(report: &'a Value, namespaces: &[&str]) -> Vec<&'a Value> {
    report["operatorScopes"]["overlaps"]
        .as_array()
        .expect("overlaps in the JSON report")
        .iter()
        .filter(|o| {
            o["deployments"].as_array().unwrap().iter().all(|d| {
                let ns = d.as_str().unwrap().split('/').next().unwrap();
                namespaces.contains(&ns)
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_warns_about_operators_that_both_handle_unowned_resources() {
    let (cluster, apps, admin) = shared_namespace("scopes-apps").await;
    let home_a = cluster.namespace("scopes-a").await;
    let home_b = cluster.namespace("scopes-b").await;
    let home_c = cluster.namespace("scopes-c").await;
    let home_d = cluster.namespace("scopes-d").await;
    let v2_10 = "docker.io/apache/camel-k:2.10.1";
    for (home, id, watch, replicas) in [
        // Two local operators watching apps: under v2.10 both take what has
        // no owner key there.
        (&home_a, "team-a", Some(&apps.name), 1),
        (&home_b, "team-b", Some(&apps.name), 1),
        // A global operator with an id of its own: none of it under v2.10,
        // all of it under 2.11.
        (&home_c, "team-c", None, 1),
        // Scaled to zero: it runs nothing, so it overlaps with nobody.
        (&home_d, "team-d", Some(&apps.name), 0),
    ] {
        let deployment = operator_deployment(id, watch.map(String::as_str), v2_10, replicas);
        create_deployment(&admin, &home.name, &deployment).await;
    }
    for i in 0..7 {
        create_integration(&admin, &apps.name, &format!("orphan-{i}"), None).await;
    }
    create_integration(&admin, &apps.name, "owned", Some("team-a")).await;

    let kubeconfig = cluster.kubeconfig();
    let ours = [
        home_a.name.as_str(),
        home_b.name.as_str(),
        home_c.name.as_str(),
        home_d.name.as_str(),
    ];
    let out = live_camelk_as("admin", &kubeconfig, &apps.name)
        .args(["check", "--observe", "1s", "-o", "json"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let overlaps = overlaps_among(&report, &ours);
    // (the two Deployments' namespaces, when, where, resources at risk)
    let mut got: Vec<(Vec<String>, String, Value, u64)> = overlaps
        .iter()
        .map(|o| {
            let mut pair: Vec<String> = o["deployments"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_str().unwrap().split('/').next().unwrap().to_string())
                .collect();
            pair.sort();
            let when = o["when"].as_str().unwrap().to_string();
            (
                pair,
                when,
                o["namespaces"].clone(),
                o["unownedResources"].as_u64().unwrap(),
            )
        })
        .collect();
    let (a, b, c) = (&home_a.name, &home_b.name, &home_c.name);
    let entry = |x: &str, y: &str, when: &str, only: &[&str]| {
        let mut pair = vec![x.to_string(), y.to_string()];
        pair.sort();
        let mut only: Vec<&str> = only.to_vec();
        only.sort();
        (
            pair,
            when.to_string(),
            json!({ "all": false, "only": only }),
            7,
        )
    };
    let upgrade = "after an upgrade to 2.11";
    let mut expected = vec![
        entry(a, b, "now", &[&apps.name]),
        entry(a, c, upgrade, &[&apps.name, a]),
        entry(b, c, upgrade, &[&apps.name, b]),
    ];
    expected.sort_by(|x, y| (&x.0, &x.1).cmp(&(&y.0, &y.1)));
    got.sort_by(|x, y| (&x.0, &x.1).cmp(&(&y.0, &y.1)));
    assert_eq!(got, expected, "{:#}", report["operatorScopes"]);
    let now = overlaps
        .iter()
        .find(|o| o["when"] == "now")
        .expect("the pair of today");
    assert_eq!(now["rules"], json!(["v2.10", "v2.10"]));
    let named: Vec<&str> = camelk_testkit::str_fields(&now["resources"], "name");
    assert_eq!(named.len(), 5, "the list is capped: {named:?}");
    assert!(named.iter().all(|n| n.starts_with("orphan-")), "{named:?}");

    // The same in the table: one warning for the pair, its resources named
    // and counted, with the fix.
    let out = live_camelk_as("admin", &kubeconfig, &apps.name)
        .args(["check", "--observe", "1s"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let warning = text
        .lines()
        .find(|l| {
            l.starts_with("! ")
                && l.contains(&format!(
                    "team-a ({a}/camel-k-operator, watching {}, v2.10 rules)",
                    apps.name
                ))
                && l.contains(&format!(
                    "team-b ({b}/camel-k-operator, watching {}, v2.10 rules)",
                    apps.name
                ))
        })
        .unwrap_or_else(|| panic!("no warning for team-a and team-b in:\n{text}"));
    assert!(
        warning.contains(&format!(
            "both reconcile Camel K resources with no owner key in {}, each writing them unfenced: \
             7 have no owner key: ",
            apps.name
        )),
        "{warning}"
    );
    assert!(warning.ends_with(", 2 more"), "{warning}");
    assert!(
        !text.contains("team-d"),
        "a Deployment scaled to zero runs no operator:\n{text}"
    );
    let at = text.find(warning).unwrap();
    assert!(
        text[at..]
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("  fix: ")),
        "the warning says how to fix it:\n{text}"
    );
    for home in [&home_a, &home_b, &home_c, &home_d] {
        Api::<Deployment>::namespaced(admin.clone(), &home.name)
            .delete("camel-k-operator", &Default::default())
            .await
            .unwrap();
    }
}

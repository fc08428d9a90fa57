//! The restart forecast of `kubectl camelk plan` against what a rollout of
//! real upstream operators does: for every moved Integration, whether its
//! pods roll is exactly whether its Deployment got a new ReplicaSet (the
//! API server's audit log), and the Deployment that stops every pod at once
//! is named as a capacity risk.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::NAME;
use crate::adoption::{fleet, kamel_run, manifest, setup, wait_ready_under};
use crate::support::*;
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY, phase};
use camelk_testkit::manifest::Rollout;
use kube::api::{DynamicObject, PostParams};
use serde_json::{Value, json};

const IMAGE: &str = "docker.io/library/camelk-e2e:1.0";

/// An Integration as `kamel run -x --trait deployment.strategy=Recreate`
/// creates it, with a prebuilt image.
async fn kamel_run_recreate(admin: &kube::Client, ns: &str, name: &str) {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": CamelKind::Integration.api_version(),
        "kind": "Integration",
        "metadata": { "name": name, "annotations": { OPERATOR_ID_KEY: "operator-1" } },
        "spec": { "traits": {
            "container": { "image": IMAGE },
            "deployment": { "strategy": "Recreate" },
        } },
    }))
    .unwrap();
    camel_api(admin.clone(), CamelKind::Integration, ns)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_plans_restart_forecast_matches_the_replica_sets_the_rollout_creates() {
    let (cluster, ns, admin) = setup("up-restarts").await;
    kamel_run(&admin, &ns.name, "it-rolling", Some("operator-1"), true).await;
    kamel_run_recreate(&admin, &ns.name, "it-recreate").await;
    // Built from sources: the build fails here (no Maven), so it never runs.
    kamel_run(&admin, &ns.name, "it-built", Some("operator-1"), false).await;
    for name in ["it-rolling", "it-recreate"] {
        wait_ready_under(&admin, &ns.name, name, "operator-1").await;
    }
    let api = camel_api(admin.clone(), CamelKind::Integration, &ns.name);
    camelk_testkit::poll::until(
        Duration::from_secs(240),
        || {
            let api = api.clone();
            async move { api.get_opt("it-built").await.ok().flatten() }
        },
        |o| phase(o) == Some("Error"),
    )
    .await
    .unwrap_or_else(|last| panic!("it-built not in Error: {last:#?}"));

    let git = GitRemote::new();
    let rev1 = git.push(&manifest(&ns.name, "operator-1"), "operators");
    let sync = start_sync(cluster, &ns.name, &git, "reconciler", &[]);
    let assignment = SyncedAssignment::new(&admin, &ns.name, NAME, &sync);
    assignment.wait(120, "applied", applied(&rev1)).await;

    // Everything to operator-2, in one step. The one that never runs fails
    // the gate after 30 s and the rollout pauses: every move is made by then.
    let head = fleet(&ns.name)
        .default_operator("operator-2")
        .rollout(Rollout::new().require_ready(true).gate_timeout("30s"))
        .render();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("operator-assignment.yaml");
    std::fs::write(&file, &head).unwrap();
    let out = std::process::Command::new(camelk_testkit::workspace_binary(
        "kubectl-camelk",
        "kubectl-camelk",
    ))
    .arg("--kubeconfig")
    .arg(cluster.kubeconfig())
    .args([
        "--context",
        "admin",
        "-n",
        &ns.name,
        "plan",
        "-o",
        "json",
        "-f",
    ])
    .arg(&file)
    .output()
    .unwrap();
    camelk_testkit::assert_success(&out, "kubectl camelk plan");
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let forecast: BTreeMap<String, (bool, Option<String>)> = plan["restarts"]
        .as_array()
        .unwrap_or_else(|| panic!("a restart forecast: {plan:#}"))
        .iter()
        .map(|r| {
            (
                r["resource"]["name"].as_str().unwrap().to_string(),
                (
                    r["rolls"].as_bool().unwrap(),
                    r["capacityRisk"].as_str().map(String::from),
                ),
            )
        })
        .collect();
    assert_eq!(
        forecast.keys().collect::<Vec<_>>(),
        ["it-built", "it-recreate", "it-rolling"],
        "every moved Integration: {plan:#}"
    );
    assert_eq!(forecast["it-rolling"], (true, None));
    assert!(
        forecast["it-recreate"].0
            && forecast["it-recreate"]
                .1
                .as_deref()
                .is_some_and(|r| r.contains("strategy Recreate")),
        "{plan:#}"
    );
    assert_eq!(forecast["it-built"], (false, None));

    let created_before = camelk_testkit::audit::replica_sets_created(
        &cluster.audit_log().events_in(&ns.name).unwrap(),
    );
    let rev2 = git.push(&head, "operator-2 takes over");
    let paused = assignment
        .wait(300, "paused on the one that never runs", |s| {
            s.rollout.as_ref().is_some_and(|r| {
                r.revision == rev2 && r.state == camelk_reconciler::api::RolloutState::Paused
            })
        })
        .await;
    let failing = &paused.rollout.as_ref().unwrap().failing;
    assert!(
        failing.len() == 1 && failing[0].contains("it-built"),
        "{failing:#?}"
    );
    for name in ["it-rolling", "it-recreate"] {
        wait_ready_under(&admin, &ns.name, name, "operator-2").await;
    }
    let created_after = camelk_testkit::audit::replica_sets_created(
        &cluster.audit_log().events_in(&ns.name).unwrap(),
    );
    let rolled: BTreeSet<&String> = created_after
        .iter()
        .filter(|(deployment, n)| created_before.get(*deployment) != Some(n))
        .map(|(deployment, _)| deployment)
        .collect();
    let forecast_rolls: BTreeSet<&String> = forecast
        .iter()
        .filter(|(_, (rolls, _))| *rolls)
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        rolled, forecast_rolls,
        "the forecast against the ReplicaSets created (before: {created_before:?}, after: {created_after:?})"
    );
    assert_single_owner(cluster, &ns.name);
}

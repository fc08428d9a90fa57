//! `kubectl camelk check` on the real control plane, run as a cluster admin:
//! green on a whole installation (a `reconciler sync` loop under its shipped
//! RBAC holding its lock, two operators renewing theirs, the shipped
//! admission policy bound with its identities), then each broken part named,
//! with the command that fixes it.

use std::path::Path;
use std::process::{Command, Output};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::common::{admin_and_sync_namespace, git, repo_with, start_operator};
use crate::live_sync::{manifest, start_sync, wait_applied};

fn check(kubeconfig: &Path, ns: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kubectl-camelk"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["-n", ns, "check", "--observe", "3s"])
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_is_green_on_a_whole_installation_and_names_each_broken_part() {
    let cluster = camelk_testkit::shared();
    let (admin, ns) = admin_and_sync_namespace(cluster, "plugin-check").await;
    let operators = ["operator-1", "operator-2"];
    camelk_testkit::admission::enforce_in(&admin, &ns.name, &["reconciler"], &operators)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let stops = [CancellationToken::new(), CancellationToken::new()];
    for (id, stop) in operators.iter().zip(&stops) {
        start_operator(cluster, id, &ns.name, stop).await;
    }
    let repo = repo_with(&manifest(&ns.name, None));
    let cache = tempfile::tempdir().unwrap();
    let sync_stop = CancellationToken::new();
    let sync = start_sync(
        cluster,
        &ns.name,
        repo.path(),
        cache.path(),
        &sync_stop,
        None,
    )
    .await;
    let assignments = Api::namespaced(admin.clone(), &ns.name);
    wait_applied(
        &assignments,
        git(repo.path(), &["rev-parse", "HEAD"]).trim(),
    )
    .await;
    let kubeconfig = cluster.kubeconfig();

    let out = check(&kubeconfig, &ns.name, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for expected in [
        "✔ integrations.camel.apache.org served at camel.apache.org/v1",
        "✔ operatorassignments.camelk.dev served at camelk.dev/v1alpha1",
        &format!(
            "✔ reconciler: camelk-reconciler-lock in {} renewed by",
            ns.name
        ),
        &format!("✔ operator-1: operator-1-lock in {} renewed by", ns.name),
        &format!("✔ operator-2: operator-2-lock in {} renewed by", ns.name),
        "✔ policy camelk-operator-id installed",
        "names every operator: operator-1, operator-2",
        "✔ all checks passed",
    ] {
        assert!(text.contains(expected), "missing `{expected}` in:\n{text}");
    }

    // Break three parts: operator-2 stops, the reconciler stops, and the
    // identities lose operator-2.
    stops[1].cancel();
    sync_stop.cancel();
    sync.join().unwrap();
    let identities: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns.name);
    identities
        .patch(
            camelk_testkit::admission::IDENTITIES,
            &PatchParams::default(),
            &Patch::Merge(json!({ "data": { "operator.operator-2": null } })),
        )
        .await
        .unwrap();

    let out = check(&kubeconfig, &ns.name, &["-o", "json"]);
    assert_eq!(out.status.code(), Some(1), "a broken part fails the check");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let failed: Vec<(String, String)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["verdict"] == "fail")
        .map(|f| {
            assert!(f["fix"].is_string(), "a failure says how to fix it: {f}");
            (
                f["part"].as_str().unwrap().to_string(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(report["failed"], 3, "{report:#}");
    let parts: Vec<&str> = failed.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        parts,
        ["reconciler", "operators", "admission"],
        "{failed:?}"
    );
    assert!(
        failed[0]
            .1
            .starts_with("reconciler: camelk-reconciler-lock")
    );
    assert!(failed[1].1.starts_with("operator-2: operator-2-lock"));
    assert!(failed[2].1.contains("no identity for operator operator-2"));
    stops[0].cancel();
}

//! The Helm chart (`charts/camelk-reconciler`) against Helm itself (built from
//! its Go module, `tests/helm/build.sh`), against `examples/deploy` (the same
//! image, rules, policy, bindings and pod), and against a real API server
//! (server-side apply, dry run, strict field validation).

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

use crate::deploy::{apply, create_namespace, find, id, rendered_deploy, root, str_at};

const CHART: &str = "charts/camelk-reconciler";

/// The values that make the chart install what `examples/deploy` does.
const AS_EXAMPLES: [&str; 8] = [
    "git.repository=https://git.example.com/platform/gitops.git",
    "git.branch=main",
    "git.path=clusters/prod/operator-assignment.yaml",
    "git.interval=1m",
    "git.credentials.secretName=camelk-reconciler-git",
    "webhook.secretName=camelk-reconciler-webhook",
    "planEndpoint.tokenSecretName=camelk-reconciler-plan-token",
    "admission.operators.operator-1=system:serviceaccount:camelk-system:camelk-operator-1",
];

fn helm() -> Command {
    let dir: PathBuf =
        camelk_testkit::binaries::helm_bin_dir().unwrap_or_else(|e| panic!("building helm: {e}"));
    let mut cmd = Command::new(dir.join("helm"));
    // Helm's own state (repositories, cache) stays out of the user's home.
    let home = std::env::temp_dir().join("camelk-e2e-helm");
    for var in ["HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"] {
        cmd.env(var, home.join(var));
    }
    cmd
}

fn output(cmd: &mut Command) -> Output {
    cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"))
}

/// `helm template` of the chart in `namespace` with `sets` (`--set` each).
fn template(namespace: &str, sets: &[&str], extra: &[&str]) -> Output {
    let mut cmd = helm();
    cmd.args(["template", "camelk"])
        .arg(root().join(CHART))
        .args(["--namespace", namespace])
        .args(extra);
    for set in sets {
        cmd.args(["--set", set]);
    }
    output(&mut cmd)
}

fn rendered(namespace: &str, sets: &[&str], extra: &[&str]) -> Vec<Value> {
    let out = template(namespace, sets, extra);
    assert!(
        out.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("helm output is YAML");
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// `value` with every run of whitespace in its strings made one space and
/// every number a float: `kubectl kustomize` re-emits a folded scalar whose
/// next line is more indented (the policy's CEL) with a blank line added, where
/// Helm keeps one line break (CEL reads both alike), and the CRD's `0.0` as `0`.
fn normalized(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(s.split_whitespace().collect::<Vec<_>>().join(" ")),
        Value::Array(items) => Value::Array(items.iter().map(normalized).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), normalized(v)))
                .collect(),
        ),
        Value::Number(n) => serde_json::json!(n.as_f64()),
        other => other.clone(),
    }
}

#[test]
fn helm_lint_passes_strictly() {
    let mut cmd = helm();
    cmd.args(["lint", "--strict"]).arg(root().join(CHART));
    for set in AS_EXAMPLES {
        cmd.args(["--set", set]);
    }
    let out = output(&mut cmd);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_repository_is_required() {
    let out = template("camelk-system", &[], &[]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("git.repository is required"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_chart_installs_what_examples_deploy_installs() {
    let chart = rendered("camelk-system", &AS_EXAMPLES, &["--include-crds"]);
    let kustomize = rendered_deploy();
    let same = |kind: &str, name: &str, pointer: &str| {
        let (ours, theirs) = (find(&chart, kind, name), find(&kustomize, kind, name));
        assert_eq!(
            ours.pointer(pointer).map(normalized),
            theirs.pointer(pointer).map(normalized),
            "{kind} {name} {pointer}: the chart and examples/deploy differ"
        );
        assert!(ours.pointer(pointer).is_some(), "{kind} {name} {pointer}");
    };
    // The same rules, so the suites that run under examples/deploy's RBAC
    // prove the chart's too.
    same("ClusterRole", "camelk-reconciler", "/rules");
    same("Role", "camelk-reconciler", "/rules");
    same("ClusterRoleBinding", "camelk-reconciler", "/subjects");
    same("RoleBinding", "camelk-reconciler", "/subjects");
    same("ValidatingAdmissionPolicy", "camelk-operator-id", "/spec");
    same(
        "ValidatingAdmissionPolicyBinding",
        "camelk-operator-id",
        "/spec",
    );
    same(
        "ValidatingAdmissionPolicyBinding",
        "camelk-operator-id-delete",
        "/spec",
    );
    same("ConfigMap", "camelk-operator-identities", "/data");
    same("Service", "camelk-reconciler", "/spec/ports");
    same(
        "CustomResourceDefinition",
        "operatorassignments.camelk.dev",
        "/spec",
    );
    for pointer in [
        "/spec/template/spec/serviceAccountName",
        "/spec/template/spec/securityContext",
        "/spec/template/spec/volumes",
        "/spec/template/spec/containers/0/image",
        "/spec/template/spec/containers/0/args",
        "/spec/template/spec/containers/0/env",
        "/spec/template/spec/containers/0/ports",
        "/spec/template/spec/containers/0/livenessProbe",
        "/spec/template/spec/containers/0/readinessProbe",
        "/spec/template/spec/containers/0/resources",
        "/spec/template/spec/containers/0/securityContext",
        "/spec/template/spec/containers/0/volumeMounts",
    ] {
        same("Deployment", "camelk-reconciler", pointer);
    }
    // The Service selects the Deployment's pods.
    let deployment = find(&chart, "Deployment", "camelk-reconciler");
    let service = find(&chart, "Service", "camelk-reconciler");
    let labels = deployment
        .pointer("/spec/template/metadata/labels")
        .unwrap();
    for (key, value) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&labels[key], value, "the Service selects the pods by {key}");
    }
}

#[test]
fn a_service_monitor_scrapes_the_metrics_port_when_asked() {
    let without = rendered("camelk-system", &AS_EXAMPLES, &[]);
    assert!(without.iter().all(|o| o["kind"] != "ServiceMonitor"));
    let mut sets = AS_EXAMPLES.to_vec();
    sets.extend([
        "metrics.serviceMonitor.enabled=true",
        "metrics.serviceMonitor.labels.release=kps",
    ]);
    let with = rendered("camelk-system", &sets, &[]);
    let monitor = find(&with, "ServiceMonitor", "camelk-reconciler");
    let service = find(&with, "Service", "camelk-reconciler");
    assert_eq!(
        monitor["spec"]["selector"]["matchLabels"],
        service["spec"]["selector"]
    );
    assert_eq!(str_at(monitor, "/spec/endpoints/0/port"), "http");
    assert_eq!(str_at(monitor, "/spec/endpoints/0/path"), "/metrics");
    assert_eq!(str_at(monitor, "/metadata/labels/release"), "kps");
}

#[tokio::test]
async fn every_chart_object_is_accepted_by_a_server_side_dry_run() {
    let cluster = camelk_testkit::shared();
    let admin = cluster.admin().await;
    // A release namespace of its own: nothing here collides with examples/deploy.
    let ns = "camelk-chart";
    create_namespace(&admin, ns).await;
    let objects = rendered(ns, &AS_EXAMPLES, &["--include-crds"]);
    let kinds: Vec<&str> = objects.iter().map(|o| str_at(o, "/kind")).collect();
    for kind in [
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "Service",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "ConfigMap",
    ] {
        assert!(
            kinds.contains(&kind),
            "the chart renders a {kind}: {kinds:?}"
        );
    }
    let mut refused = Vec::new();
    for obj in &objects {
        if let Err(e) = apply(&admin, obj, true).await {
            refused.push(format!("{}: {e}", id(obj)));
        }
    }
    assert!(
        refused.is_empty(),
        "refused by the API server:\n{}",
        refused.join("\n")
    );
}

//! The Helm chart (`charts/camelk-reconciler`) against Helm itself (built from
//! its Go module, `tests/helm/build.sh`), against `examples/deploy` (the same
//! image, rules, policy, bindings and pod; with `source: cluster`, against
//! `examples/deploy` with the Component `reconciler/source-cluster`), against
//! the `reconciler` binary (it accepts the arguments the chart passes), and
//! against a real API server (server-side apply, dry run, strict field
//! validation).

use std::path::{Component, Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::deploy::{
    apply, create_namespace, find, id, rendered_deploy, root, run, str_at, workspace_binary,
};

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

/// The values that make the chart install what `examples/deploy` with the
/// Component `reconciler/source-cluster` does: `reconciler sync --source
/// cluster`. The Git values of [`AS_EXAMPLES`] stay set, as when a release
/// switches its source: they are ignored.
const AS_SOURCE_CLUSTER_EXAMPLES: [&str; 9] = [
    "source=cluster",
    "cluster.name=camel-k",
    "cluster.interval=1m",
    "git.repository=https://git.example.com/platform/gitops.git",
    "git.branch=main",
    "git.path=clusters/prod/operator-assignment.yaml",
    "git.interval=5m",
    "git.credentials.secretName=camelk-reconciler-git",
    "admission.operators.operator-1=system:serviceaccount:camelk-system:camelk-operator-1",
];

/// The Component of `examples/deploy` that makes its reconciler follow the
/// object in the cluster.
const SOURCE_CLUSTER_COMPONENT: &str = "examples/deploy/reconciler/source-cluster";

/// The flags of `reconciler sync` that only a Git source uses.
const GIT_FLAGS: [&str; 11] = [
    "--repo",
    "--branch",
    "--path",
    "--cache-dir",
    "--token-file",
    "--username",
    "--ssh-key-file",
    "--ssh-passphrase-file",
    "--known-hosts-file",
    "--credentials-secret",
    "--plan-token-file",
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

/// `helm template` with `sets` fails, saying `expected` on stderr.
fn template_fails(sets: &[&str], extra: &[&str], expected: &str) {
    let out = template("camelk-system", sets, extra);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{sets:?} rendered");
    assert!(stderr.contains(expected), "{sets:?}: {stderr}");
}

/// `helm lint --strict` of the chart with `sets`.
fn lint(sets: &[&str]) -> Output {
    let mut cmd = helm();
    cmd.args(["lint", "--strict"]).arg(root().join(CHART));
    for set in sets {
        cmd.args(["--set", set]);
    }
    output(&mut cmd)
}

/// `path` (absolute) from the directory `from` (absolute), as `../..` and
/// the rest: kustomize takes no absolute path of a base or Component.
fn relative(from: &Path, path: &Path) -> PathBuf {
    let up = from
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .map(|_| "..");
    let mut out: PathBuf = up.collect();
    out.push(path.strip_prefix("/").expect("an absolute path"));
    out
}

/// `kubectl kustomize` of `examples/deploy` with the Component
/// `reconciler/source-cluster`, as a kustomization of a user's own lists
/// them (one beside examples/deploy: kustomize refuses a base that holds
/// the kustomization).
fn rendered_deploy_with_source_cluster() -> Vec<Value> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let here = dir.path().canonicalize().unwrap();
    let kustomization = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\n\
         kind: Kustomization\n\
         resources:\n- {}\n\
         components:\n- {}\n",
        relative(&here, &root().join("examples/deploy")).display(),
        relative(&here, &root().join(SOURCE_CLUSTER_COMPONENT)).display(),
    );
    std::fs::write(here.join("kustomization.yaml"), kustomization).unwrap();
    let out = run(Command::new("kubectl").arg("kustomize").arg(&here));
    let text = String::from_utf8(out.stdout).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("kustomize output is YAML");
    assert!(!docs.is_empty());
    docs
}

/// The container of the reconciler's Deployment in `objects`.
fn reconciler_container(objects: &[Value]) -> &Value {
    &find(objects, "Deployment", "camelk-reconciler")["spec"]["template"]["spec"]["containers"][0]
}

/// The arguments of the reconciler's container in `objects`.
fn reconciler_args(objects: &[Value]) -> Vec<&str> {
    reconciler_container(objects)["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect()
}

/// Every flag of `args` (`--flag=value` or `--flag`), without its value.
fn flags<'a>(args: &[&'a str]) -> Vec<&'a str> {
    args.iter()
        .filter(|a| a.starts_with("--"))
        .map(|a| a.split('=').next().unwrap())
        .collect()
}

/// The RBAC objects of the reconciler in `objects`: (kind, name).
fn reconciler_rbac(objects: &[Value]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = objects
        .iter()
        .filter(|o| {
            matches!(
                o["kind"].as_str(),
                Some("Role" | "RoleBinding" | "ClusterRole" | "ClusterRoleBinding")
            ) && str_at(o, "/metadata/name").starts_with("camelk-reconciler")
        })
        .map(|o| {
            (
                str_at(o, "/kind").to_string(),
                str_at(o, "/metadata/name").to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

/// The chart's objects (`chart`) are what kustomize renders (`kustomize`):
/// the same reconciler RBAC objects with the same rules and subjects, the
/// same policy, bindings, identities, Service ports, CRD, and pod.
fn assert_the_same_install(chart: &[Value], kustomize: &[Value]) {
    let same = |kind: &str, name: &str, pointer: &str| {
        let (ours, theirs) = (find(chart, kind, name), find(kustomize, kind, name));
        assert_eq!(
            ours.pointer(pointer).map(normalized),
            theirs.pointer(pointer).map(normalized),
            "{kind} {name} {pointer}: the chart and examples/deploy differ"
        );
        assert!(ours.pointer(pointer).is_some(), "{kind} {name} {pointer}");
    };
    // The same rules, so the suites that run under examples/deploy's RBAC
    // prove the chart's too; and no role of the reconciler in one only.
    assert_eq!(
        reconciler_rbac(chart),
        reconciler_rbac(kustomize),
        "the chart and examples/deploy grant the reconciler through different objects"
    );
    for (kind, name) in reconciler_rbac(chart) {
        let pointer = if kind.ends_with("Binding") {
            "/subjects"
        } else {
            "/rules"
        };
        same(&kind, &name, pointer);
        if kind.ends_with("Binding") {
            same(&kind, &name, "/roleRef");
        }
    }
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
    let deployment = find(chart, "Deployment", "camelk-reconciler");
    let service = find(chart, "Service", "camelk-reconciler");
    let labels = deployment
        .pointer("/spec/template/metadata/labels")
        .unwrap();
    for (key, value) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&labels[key], value, "the Service selects the pods by {key}");
    }
}

/// (verbs, resourceNames) of the rules of `role` on `group`/`resource`.
fn rules_on(role: &Value, group: &str, resource: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    };
    role["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .filter(|r| {
            strings(&r["apiGroups"]).iter().any(|g| g == group)
                && strings(&r["resources"]).iter().any(|x| x == resource)
        })
        .map(|r| (strings(&r["verbs"]), strings(&r["resourceNames"])))
        .collect()
}

fn owned(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
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
    for sets in [&AS_EXAMPLES[..], &AS_SOURCE_CLUSTER_EXAMPLES[..]] {
        let out = lint(sets);
        assert!(
            out.status.success(),
            "{sets:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
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
    // Said so with `source: git` given too.
    template_fails(&["source=git"], &[], "git.repository is required");
}

#[test]
fn with_source_cluster_the_object_name_is_required_and_the_repository_is_not() {
    template_fails(
        &["source=cluster"],
        &[],
        "cluster.name is required with source: cluster",
    );
    let objects = rendered(
        "camelk-system",
        &["source=cluster", "cluster.name=camel-k"],
        &[],
    );
    let args = reconciler_args(&objects);
    assert!(args.contains(&"--name=camel-k"), "{args:?}");
}

#[test]
fn a_source_other_than_git_or_cluster_fails_template_and_lint() {
    let sets = [
        "source=svn",
        "git.repository=https://git.example.com/gitops.git",
    ];
    // values.schema.json: before any template, and in `helm lint` too.
    template_fails(
        &sets,
        &[],
        "at '/source': value must be one of 'git', 'cluster'",
    );
    let out = lint(&sets);
    assert!(!out.status.success(), "helm lint --strict passed {sets:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("value must be one of 'git', 'cluster'"),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The templates say so themselves when the schema is skipped.
    template_fails(
        &sets,
        &["--skip-schema-validation"],
        r#"source must be "git" (follow git.path in git.repository) or "cluster""#,
    );
    template_fails(&sets, &["--skip-schema-validation"], r#"not "svn""#);
    // Not a string either, nor empty.
    template_fails(&["source=true"], &[], "at '/source'");
    template_fails(&["source="], &[], "at '/source'");
}

#[test]
fn with_source_cluster_the_plan_endpoint_is_refused() {
    let mut sets = AS_SOURCE_CLUSTER_EXAMPLES.to_vec();
    sets.push("planEndpoint.tokenSecretName=camelk-reconciler-plan-token");
    template_fails(&sets, &[], "planEndpoint.tokenSecretName needs source: git");
}

#[test]
fn with_source_cluster_the_pod_reads_the_object_and_nothing_of_git() {
    let objects = rendered("camelk-system", &AS_SOURCE_CLUSTER_EXAMPLES, &[]);
    let args = reconciler_args(&objects);
    assert_eq!(args[0], "sync");
    assert!(args.contains(&"--source=cluster"), "{args:?}");
    assert!(args.contains(&"--name=camel-k"), "{args:?}");
    // cluster.interval, not git.interval.
    assert!(args.contains(&"--interval=1m"), "{args:?}");
    for flag in flags(&args) {
        assert!(
            !GIT_FLAGS.contains(&flag),
            "with source: cluster the chart passes the Git flag {flag}: {args:?}"
        );
    }
    let c = reconciler_container(&objects);
    let pod = &find(&objects, "Deployment", "camelk-reconciler")["spec"]["template"]["spec"];
    let volumes: Vec<&str> = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(volumes, ["tmp"], "no Git credentials, no clone cache");
    let mounts: Vec<&str> = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["mountPath"].as_str().unwrap())
        .collect();
    assert_eq!(mounts, ["/tmp"]);
    assert!(!serde_json::to_string(pod).unwrap().contains("secret"));

    // The same values with source: git: the Git flags and volumes, with
    // git.interval.
    let mut sets = AS_SOURCE_CLUSTER_EXAMPLES.to_vec();
    sets[0] = "source=git";
    let objects = rendered("camelk-system", &sets, &[]);
    let args = reconciler_args(&objects);
    for flag in [
        "--repo",
        "--branch",
        "--path",
        "--cache-dir",
        "--token-file",
    ] {
        assert!(flags(&args).contains(&flag), "{flag}: {args:?}");
    }
    for flag in ["--source", "--name"] {
        assert!(!flags(&args).contains(&flag), "{flag}: {args:?}");
    }
    assert!(args.contains(&"--interval=5m"), "{args:?}");

    // A webhook stays possible with source: cluster (a round on demand).
    let mut sets = AS_SOURCE_CLUSTER_EXAMPLES.to_vec();
    sets.push("webhook.secretName=camelk-reconciler-webhook");
    let objects = rendered("camelk-system", &sets, &[]);
    let args = reconciler_args(&objects);
    assert!(
        args.contains(&"--webhook-secret-file=/etc/camelk/webhook/secret"),
        "{args:?}"
    );
    let mounts = &reconciler_container(&objects)["volumeMounts"];
    assert!(
        mounts
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["mountPath"] == "/etc/camelk/webhook"),
        "{mounts}"
    );
}

#[test]
fn with_source_cluster_the_chart_renders_the_rbac_of_that_source() {
    let git = rendered("camelk-system", &AS_EXAMPLES, &[]);
    let cluster = rendered("camelk-system", &AS_SOURCE_CLUSTER_EXAMPLES, &[]);
    let (git_role, role) = (
        find(&git, "Role", "camelk-reconciler"),
        find(&cluster, "Role", "camelk-reconciler"),
    );
    // The object: applied with source: git (create, patch), only read and
    // watched with source: cluster; its status written in both.
    assert_eq!(
        rules_on(git_role, "camelk.dev", "operatorassignments"),
        [(owned(&["get", "list", "watch", "create", "patch"]), vec![])]
    );
    assert_eq!(
        rules_on(role, "camelk.dev", "operatorassignments"),
        [(owned(&["get", "list", "watch"]), vec![])]
    );
    for r in [git_role, role] {
        assert_eq!(
            rules_on(r, "camelk.dev", "operatorassignments/status"),
            [(owned(&["patch"]), vec![])]
        );
        assert_eq!(
            rules_on(r, "coordination.k8s.io", "leases"),
            [(owned(&["update"]), owned(&["camelk-reconciler-lock"]))]
        );
    }
    // The revision snapshots: created, then read and replaced by name only.
    assert_eq!(rules_on(git_role, "", "configmaps"), []);
    assert_eq!(
        rules_on(role, "", "configmaps"),
        [
            (owned(&["create"]), vec![]),
            (owned(&["get", "update"]), owned(&["camel-k-revisions"])),
        ]
    );
    // Flux Kustomizations and Argo CD Applications, read cluster-wide for
    // the Git revision they applied, with source: cluster only.
    assert!(
        git.iter()
            .all(|o| o["metadata"]["name"] != "camelk-reconciler-source-cluster"),
        "source: git renders no role of source: cluster"
    );
    let reader = find(&cluster, "ClusterRole", "camelk-reconciler-source-cluster");
    assert_eq!(
        rules_on(reader, "kustomize.toolkit.fluxcd.io", "kustomizations"),
        [(owned(&["get", "list"]), vec![])]
    );
    assert_eq!(
        rules_on(reader, "argoproj.io", "applications"),
        [(owned(&["get", "list"]), vec![])]
    );
    assert_eq!(reader["rules"].as_array().unwrap().len(), 2, "{reader}");
    let binding = find(
        &cluster,
        "ClusterRoleBinding",
        "camelk-reconciler-source-cluster",
    );
    assert_eq!(
        str_at(binding, "/roleRef/name"),
        "camelk-reconciler-source-cluster"
    );
    assert_eq!(
        binding["subjects"],
        find(&cluster, "ClusterRoleBinding", "camelk-reconciler")["subjects"]
    );
    // The cluster-wide rules of both sources are the same.
    assert_eq!(
        find(&git, "ClusterRole", "camelk-reconciler")["rules"],
        find(&cluster, "ClusterRole", "camelk-reconciler")["rules"]
    );
}

/// `kubectl kustomize examples/deploy/owner-keys`, as objects.
fn rendered_owner_keys() -> Vec<Value> {
    let out = std::process::Command::new("kubectl")
        .args(["kustomize"])
        .arg(root().join("examples/deploy/owner-keys"))
        .output()
        .expect("kubectl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_saphyr::from_multiple(&String::from_utf8(out.stdout).unwrap()).unwrap()
}

#[test]
fn the_owner_keys_policy_comes_where_the_api_is_served_and_is_the_examples_one() {
    let kinds = |objects: &[Value]| -> Vec<String> {
        objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap_or_default().to_string())
            .filter(|k| k.starts_with("MutatingAdmissionPolicy"))
            .collect()
    };
    // `auto`: only where the API server serves MutatingAdmissionPolicy v1.
    let old_cluster = rendered("camelk-system", &AS_EXAMPLES, &[]);
    assert!(kinds(&old_cluster).is_empty(), "{:?}", kinds(&old_cluster));
    let served = [
        "--api-versions",
        "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy",
    ];
    let new_cluster = rendered("camelk-system", &AS_EXAMPLES, &served);
    assert_eq!(
        kinds(&new_cluster),
        ["MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"]
    );
    let mut forced = AS_EXAMPLES.to_vec();
    forced.push("ownerKeys.enabled=true");
    assert_eq!(kinds(&rendered("camelk-system", &forced, &[])).len(), 2);
    let mut off = AS_EXAMPLES.to_vec();
    off.push("ownerKeys.enabled=false");
    assert!(kinds(&rendered("camelk-system", &off, &served)).is_empty());
    template_fails(&["ownerKeys.enabled=maybe"], &[], "ownerKeys");

    let examples = rendered_owner_keys();
    for kind in ["MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"] {
        assert_eq!(
            find(&new_cluster, kind, "camelk-owner-keys")
                .pointer("/spec")
                .map(normalized),
            find(&examples, kind, "camelk-owner-keys")
                .pointer("/spec")
                .map(normalized),
            "{kind}: the chart and examples/deploy/owner-keys differ"
        );
    }
}

#[test]
fn the_chart_installs_what_examples_deploy_installs() {
    let chart = rendered("camelk-system", &AS_EXAMPLES, &["--include-crds"]);
    let kustomize = rendered_deploy();
    assert_the_same_install(&chart, &kustomize);
}

#[test]
fn with_source_cluster_the_chart_installs_what_the_source_cluster_component_installs() {
    let chart = rendered(
        "camelk-system",
        &AS_SOURCE_CLUSTER_EXAMPLES,
        &["--include-crds"],
    );
    let kustomize = rendered_deploy_with_source_cluster();
    assert_the_same_install(&chart, &kustomize);
    assert!(
        reconciler_rbac(&kustomize)
            .iter()
            .any(|(_, name)| name == "camelk-reconciler-source-cluster"),
        "the Component adds its ClusterRole"
    );
}

/// A Deployment with a flag the binary refuses (or a combination it
/// refuses, such as --repo with --source cluster) is accepted by the API
/// server and then crash-loops: `reconciler` parses the chart's arguments,
/// of either source, and gets as far as reading the kubeconfig (exit 1),
/// not to a usage error (exit 2).
#[test]
fn the_reconciler_accepts_the_arguments_the_chart_passes() {
    let binary = workspace_binary("camelk-reconciler", "reconciler");
    let missing = std::env::temp_dir().join("camelk-e2e-chart-no-such-kubeconfig");
    for sets in [&AS_EXAMPLES[..], &AS_SOURCE_CLUSTER_EXAMPLES[..]] {
        let objects = rendered("camelk-system", sets, &[]);
        let args = reconciler_args(&objects);
        let out = output(
            Command::new(&binary)
                .args(&args)
                .arg("--kubeconfig")
                .arg(&missing)
                .env_remove("KUBECONFIG"),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "reconciler {}: {stderr}",
            args.join(" ")
        );
        assert!(stderr.contains("reading kubeconfig"), "{stderr}");
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
    let mut refused = Vec::new();
    // The local control plane (Kubernetes 1.37) serves MutatingAdmissionPolicy v1.
    let served = [
        "--include-crds",
        "--api-versions",
        "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy",
    ];
    for sets in [&AS_EXAMPLES[..], &AS_SOURCE_CLUSTER_EXAMPLES[..]] {
        let objects = rendered(ns, sets, &served);
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
            "MutatingAdmissionPolicy",
            "MutatingAdmissionPolicyBinding",
            "ConfigMap",
        ] {
            assert!(
                kinds.contains(&kind),
                "the chart renders a {kind}: {kinds:?}"
            );
        }
        for obj in &objects {
            if let Err(e) = apply(&admin, obj, true).await {
                refused.push(format!("{} ({}): {e}", id(obj), sets[0]));
            }
        }
    }
    assert!(
        refused.is_empty(),
        "refused by the API server:\n{}",
        refused.join("\n")
    );
}

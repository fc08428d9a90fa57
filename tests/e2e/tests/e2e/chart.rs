//! The Helm chart (`charts/camelk-reconciler`) against Helm itself (built from
//! its Go module, `tests/helm/build.sh`), against `examples/deploy` (the same
//! image, rules, policy, bindings and pod; with `source: cluster`, against
//! `examples/deploy` with the Component `reconciler/source-cluster`), against
//! the `reconciler` binary (it accepts the arguments the chart passes), and
//! against a real API server (server-side apply, dry run, strict field
//! validation), and its `helm test` hook against `kubectl camelk check` (the
//! hook's RBAC lets check read all it reads).

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Output};

use camelk_testkit::workspace_binary;
use serde_json::Value;

use crate::deploy::{apply, create_namespace, find, id, rendered_deploy, root, run, str_at};

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
    "admission.operators.operator-1=system:serviceaccount:camel-k:camel-k-operator",
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
    "admission.operators.operator-1=system:serviceaccount:camel-k:camel-k-operator",
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

/// All that the process of `out` printed: its stdout, then its stderr.
fn printed(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
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

pub(crate) fn rendered(namespace: &str, sets: &[&str], extra: &[&str]) -> Vec<Value> {
    let out = template(namespace, sets, extra);
    camelk_testkit::assert_success(&out, "helm template");
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
    lint_with(sets, &[])
}

/// `helm lint --strict` of the chart with `sets` and `extra` arguments.
fn lint_with(sets: &[&str], extra: &[&str]) -> Output {
    let mut cmd = helm();
    cmd.args(["lint", "--strict"])
        .arg(root().join(CHART))
        .args(extra);
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
        assert!(out.status.success(), "{sets:?}: {}", printed(&out));
    }
}

#[test]
fn the_repository_is_required() {
    template_fails(&[], &[], "git.repository is required");
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
        "{}",
        printed(&out)
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
    let volumes: Vec<&str> = camelk_testkit::str_fields(&pod["volumes"], "name");
    assert_eq!(volumes, ["tmp"], "no Git credentials, no clone cache");
    let mounts: Vec<&str> = camelk_testkit::str_fields(&c["volumeMounts"], "mountPath");
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
        [
            (owned(&["get", "list", "watch"]), vec![]),
            // A standby passes a webhook on through the object's annotation.
            (owned(&["patch"]), owned(&["camel-k"])),
        ]
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
    camelk_testkit::assert_success(&out, "kubectl kustomize");
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
    let chart = without_hooks(rendered("camelk-system", &AS_EXAMPLES, &[]));
    let kustomize = rendered_deploy();
    assert_the_same_install(&chart, &kustomize);
}

#[test]
fn with_source_cluster_the_chart_installs_what_the_source_cluster_component_installs() {
    let chart = without_hooks(rendered("camelk-system", &AS_SOURCE_CLUSTER_EXAMPLES, &[]));
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
    let with_credentials_secret = [AS_EXAMPLES[0], "git.credentialsSecret=gitops-credentials"];
    for sets in [
        &AS_EXAMPLES[..],
        &AS_SOURCE_CLUSTER_EXAMPLES[..],
        &EVERY_VALUE[..],
        &with_credentials_secret[..],
    ] {
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
        "--api-versions",
        "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy",
    ];
    let openshift = [&served[..], &["-f", OPENSHIFT_VALUES_PATH.as_str()]].concat();
    let with_credentials_secret = [
        AS_EXAMPLES[0],
        "git.credentialsSecret=camelk-reconciler-git",
    ];
    for (sets, extra) in [
        (&AS_EXAMPLES[..], &served[..]),
        (&AS_SOURCE_CLUSTER_EXAMPLES[..], &served[..]),
        (&EVERY_VALUE[..], &served[..]),
        (&with_credentials_secret[..], &served[..]),
        (&AS_EXAMPLES[..], &openshift[..]),
    ] {
        let objects = rendered(ns, sets, extra);
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
            "Pod",
        ] {
            assert!(
                kinds.contains(&kind),
                "the chart renders a {kind}: {kinds:?}"
            );
        }
        // A Pod (the test hook's) is refused when its ServiceAccount does not
        // exist, which a dry run does not create: the accounts for real first.
        for obj in objects.iter().filter(|o| o["kind"] == "ServiceAccount") {
            if let Err(e) = apply(&admin, obj, false).await {
                refused.push(format!("{} ({}): {e}", id(obj), sets[0]));
            }
        }
        for obj in &objects {
            if let Err(e) = apply(&admin, obj, true).await {
                refused.push(format!("{} ({} {extra:?}): {e}", id(obj), sets[0]));
            }
        }
    }
    assert!(
        refused.is_empty(),
        "refused by the API server:\n{}",
        refused.join("\n")
    );
}

// ---------------------------------------------------------------- values for real setups

/// A value of every kind the chart takes beyond [`AS_EXAMPLES`]: SSH key and
/// passphrase, known_hosts, the extras, security contexts, scheduling, pod
/// metadata, two replicas (so a PodDisruptionBudget).
const EVERY_VALUE: [&str; 26] = [
    "git.repository=ssh://git@git.example.com/platform/gitops.git",
    "git.path=clusters/prod/operator-assignment.yaml",
    "git.credentials.username=deploy",
    "git.ssh.secretName=camelk-reconciler-ssh",
    "git.ssh.passphrase=true",
    "git.ssh.knownHosts=git.example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl",
    "webhook.secretName=camelk-reconciler-webhook",
    "extraArgs[0]=--operator-lease-duration=30s",
    "extraEnv[0].name=SSL_CERT_FILE",
    "extraEnv[0].value=/etc/camelk/ca/ca.crt",
    "extraVolumes[0].name=private-ca",
    "extraVolumes[0].configMap.name=private-ca",
    "extraVolumeMounts[0].name=private-ca",
    "extraVolumeMounts[0].mountPath=/etc/camelk/ca",
    "extraVolumeMounts[0].readOnly=true",
    "imagePullSecrets[0].name=registry",
    "podLabels.team=platform",
    "podLabels.app\\.kubernetes\\.io/name=not-the-selector",
    "podAnnotations.example\\.com/owner=platform",
    "priorityClassName=system-cluster-critical",
    "replicaCount=2",
    "podSecurityContext.runAsUser=null",
    "containerSecurityContext.readOnlyRootFilesystem=true",
    "containerSecurityContext.runAsNonRoot=true",
    "test.image.tag=v9.9.9",
    "admission.operators.operator-1=system:serviceaccount:camel-k:camel-k-operator",
];

/// `charts/camelk-reconciler/examples/openshift-values.yaml`, absolute.
static OPENSHIFT_VALUES_PATH: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    root()
        .join(CHART)
        .join("examples/openshift-values.yaml")
        .display()
        .to_string()
});

/// The chart's objects but its `helm test` hooks.
fn without_hooks(objects: Vec<Value>) -> Vec<Value> {
    objects.into_iter().filter(|o| !is_hook(o)).collect()
}

fn is_hook(obj: &Value) -> bool {
    obj.pointer("/metadata/annotations/helm.sh~1hook").is_some()
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .map(|a| a.iter().map(|v| str_at(v, "/name")).collect())
        .unwrap_or_default()
}

/// The reconciler's pod spec in `objects`.
fn reconciler_pod(objects: &[Value]) -> &Value {
    &find(objects, "Deployment", "camelk-reconciler")["spec"]["template"]["spec"]
}

#[test]
fn helm_lint_passes_strictly_with_every_value_and_the_openshift_example() {
    for (sets, extra) in [
        (&EVERY_VALUE[..], &[][..]),
        (
            &AS_EXAMPLES[..],
            &["-f", OPENSHIFT_VALUES_PATH.as_str()][..],
        ),
    ] {
        let out = lint_with(sets, extra);
        assert!(
            out.status.success(),
            "{sets:?} {extra:?}: {}",
            printed(&out)
        );
    }
}

/// values.schema.json gives every value a type: `helm lint --strict` (and
/// install, and template) refuse a value of the wrong type or an unknown key,
/// naming it, before any template runs.
#[test]
fn helm_lint_refuses_a_value_of_the_wrong_type() {
    for (set, path) in [
        ("replicaCount=two", "/replicaCount"),
        ("extraArgs=--poll=1s", "/extraArgs"),
        ("extraEnv[0].value=x", "/extraEnv/0"),
        ("podLabels.team=1", "/podLabels/team"),
        ("crds.keep=sometimes", "/crds/keep"),
        ("git.ssh.passphrase=yes", "/git/ssh/passphrase"),
        ("git.interval=often", "/git/interval"),
        (
            "podDisruptionBudget.minAvailable=half",
            "/podDisruptionBudget/minAvailable",
        ),
        ("imagePullSecrets[0]=registry", "/imagePullSecrets/0"),
        ("test.image.pullPolicy=Sometimes", "/test/image/pullPolicy"),
        ("logFormat=xml", "/logFormat"),
        ("extraVolume[0].name=typo", ""),
    ] {
        let sets = [AS_EXAMPLES[0], set];
        let out = lint(&sets);
        let said = printed(&out);
        assert!(!out.status.success(), "helm lint --strict passed {set}");
        let at = format!("at '{path}'");
        assert!(said.contains(&at), "{set}: no {at} in {said}");
    }
    // `--set-string` gives a string: the number of a label is then right.
    let out = lint_with(&[AS_EXAMPLES[0]], &["--set-string", "podLabels.team=1"]);
    assert!(out.status.success(), "{}", printed(&out));
}

/// Every value of values.yaml is declared in values.schema.json, with a
/// type (or an enum): a value added to one and not the other fails here.
#[test]
fn the_schema_declares_every_value_of_values_yaml() {
    let values: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(root().join(CHART).join("values.yaml")).unwrap(),
    )
    .unwrap();
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join(CHART).join("values.schema.json")).unwrap(),
    )
    .unwrap();
    fn walk(value: &Value, schema: &Value, path: &str, missing: &mut Vec<String>) {
        let Some(map) = value.as_object() else {
            return;
        };
        // A map of the user's (labels, operators): keys are not declared.
        if schema.get("properties").is_none() {
            return;
        }
        for (key, child) in map {
            let path = format!("{path}/{key}");
            match schema.pointer(&format!("/properties/{key}")) {
                Some(s)
                    if s.get("type").is_some()
                        || s.get("enum").is_some()
                        || s.get("oneOf").is_some() =>
                {
                    walk(child, s, &path, missing)
                }
                Some(_) => missing.push(format!("{path} (no type)")),
                None => missing.push(path),
            }
        }
    }
    let mut missing = Vec::new();
    walk(&values, &schema, "", &mut missing);
    assert!(missing.is_empty(), "values.schema.json lacks {missing:?}");
    assert_eq!(
        schema["additionalProperties"], false,
        "an unknown top-level key is refused"
    );
}

#[test]
fn ssh_key_known_hosts_and_username_reach_the_reconciler_as_mounted_files() {
    let objects = rendered("camelk-system", &EVERY_VALUE, &[]);
    let args = reconciler_args(&objects);
    for arg in [
        "--repo=ssh://git@git.example.com/platform/gitops.git",
        "--username=deploy",
        "--ssh-key-file=/etc/camelk/ssh/ssh-privatekey",
        "--ssh-passphrase-file=/etc/camelk/ssh/ssh-passphrase",
        "--known-hosts-file=/etc/camelk/known-hosts/known_hosts",
    ] {
        assert!(args.contains(&arg), "{arg}: {args:?}");
    }
    assert!(
        !flags(&args).contains(&"--token-file"),
        "no token: {args:?}"
    );
    assert!(!flags(&args).contains(&"--credentials-secret"), "{args:?}");
    let pod = reconciler_pod(&objects);
    let volume = |name: &str| {
        pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no volume {name}: {}", pod["volumes"]))
    };
    assert_eq!(
        str_at(volume("git-ssh"), "/secret/secretName"),
        "camelk-reconciler-ssh"
    );
    assert_eq!(
        str_at(volume("known-hosts"), "/configMap/name"),
        "camelk-reconciler-known-hosts"
    );
    let known_hosts = find(&objects, "ConfigMap", "camelk-reconciler-known-hosts");
    assert!(
        str_at(known_hosts, "/data/known_hosts").starts_with("git.example.com ssh-ed25519 "),
        "{known_hosts}"
    );
    // Each file flag names a file under a mount of its volume.
    let mounts = reconciler_container(&objects)["volumeMounts"]
        .as_array()
        .unwrap();
    for (flag, volume) in [
        ("--ssh-key-file=", "git-ssh"),
        ("--ssh-passphrase-file=", "git-ssh"),
        ("--known-hosts-file=", "known-hosts"),
    ] {
        let path = args.iter().find_map(|a| a.strip_prefix(flag)).unwrap();
        let mount = mounts.iter().find(|m| m["name"] == volume).unwrap();
        assert!(
            path.starts_with(str_at(mount, "/mountPath")),
            "{flag}{path}: {mount}"
        );
        assert_eq!(mount["readOnly"], true, "{volume}");
    }
    // Still no Secret read through the API: no Role on Secrets.
    assert!(
        objects.iter().all(|o| !serde_json::to_string(&o["rules"])
            .unwrap()
            .contains("secrets")),
        "a role on Secrets without git.credentialsSecret"
    );

    // An existing ConfigMap instead of the chart's.
    let objects = rendered(
        "camelk-system",
        &[AS_EXAMPLES[0], "git.ssh.knownHostsConfigMap=ssh-hosts"],
        &[],
    );
    assert!(
        objects
            .iter()
            .all(|o| o["metadata"]["name"] != "camelk-reconciler-known-hosts")
    );
    let pod = reconciler_pod(&objects);
    assert!(
        serde_json::to_string(&pod["volumes"])
            .unwrap()
            .contains(r#""name":"ssh-hosts""#)
    );

    // source: cluster reads no Git: none of it is passed or mounted.
    let mut sets = EVERY_VALUE.to_vec();
    sets.extend(["source=cluster", "cluster.name=camel-k"]);
    let objects = rendered("camelk-system", &sets, &[]);
    for flag in flags(&reconciler_args(&objects)) {
        assert!(!GIT_FLAGS.contains(&flag), "{flag} with source: cluster");
    }
    assert!(
        objects
            .iter()
            .all(|o| o["metadata"]["name"] != "camelk-reconciler-known-hosts")
    );
}

#[test]
fn a_credentials_secret_is_read_through_the_api_with_get_on_that_secret_only() {
    let sets = [AS_EXAMPLES[0], "git.credentialsSecret=gitops-credentials"];
    let objects = rendered("camelk-ops", &sets, &[]);
    let args = reconciler_args(&objects);
    assert!(
        args.contains(&"--credentials-secret=camelk-ops/gitops-credentials"),
        "{args:?}"
    );
    let role = find(&objects, "Role", "camelk-reconciler-credentials");
    assert_eq!(
        rules_on(role, "", "secrets"),
        [(owned(&["get"]), owned(&["gitops-credentials"]))]
    );
    assert_eq!(role["rules"].as_array().unwrap().len(), 1, "{role}");
    let binding = find(&objects, "RoleBinding", "camelk-reconciler-credentials");
    assert_eq!(
        str_at(binding, "/roleRef/name"),
        "camelk-reconciler-credentials"
    );
    assert_eq!(str_at(binding, "/subjects/0/name"), "camelk-reconciler");
    assert!(
        !serde_json::to_string(reconciler_pod(&objects))
            .unwrap()
            .contains("secretName")
    );

    // Files and the Secret together: the binary refuses it, so does the chart.
    for other in [
        "git.credentials.secretName=camelk-reconciler-git",
        "git.ssh.secretName=camelk-reconciler-ssh",
        "git.ssh.knownHosts=git.example.com ssh-ed25519 AAAA",
    ] {
        template_fails(
            &[sets[0], sets[1], other],
            &[],
            "git.credentialsSecret (read through the API) excludes",
        );
    }
    template_fails(
        &[AS_EXAMPLES[0], "git.ssh.passphrase=true"],
        &[],
        "git.ssh.passphrase needs git.ssh.secretName",
    );
    template_fails(
        &[
            AS_EXAMPLES[0],
            "git.ssh.knownHosts=h k",
            "git.ssh.knownHostsConfigMap=c",
        ],
        &[],
        "git.ssh.knownHosts and git.ssh.knownHostsConfigMap: set one",
    );
}

#[test]
fn extras_are_added_after_the_charts_own() {
    let base = rendered("camelk-system", &AS_EXAMPLES, &[]);
    let mut sets = AS_EXAMPLES.to_vec();
    sets.extend(&EVERY_VALUE[7..15]);
    let objects = rendered("camelk-system", &sets, &[]);
    let (before, after) = (reconciler_container(&base), reconciler_container(&objects));
    let (args_before, args_after) = (reconciler_args(&base), reconciler_args(&objects));
    assert_eq!(args_after[..args_before.len()], args_before[..]);
    assert_eq!(
        args_after[args_before.len()..],
        ["--operator-lease-duration=30s"]
    );
    let env = after["env"].as_array().unwrap();
    assert_eq!(
        env[..before["env"].as_array().unwrap().len()],
        before["env"].as_array().unwrap()[..]
    );
    assert_eq!(
        env.last().unwrap(),
        &serde_json::json!({ "name": "SSL_CERT_FILE", "value": "/etc/camelk/ca/ca.crt" })
    );
    assert_eq!(
        after["volumeMounts"].as_array().unwrap().last().unwrap(),
        &serde_json::json!({ "name": "private-ca", "mountPath": "/etc/camelk/ca", "readOnly": true })
    );
    assert_eq!(
        reconciler_pod(&objects)["volumes"]
            .as_array()
            .unwrap()
            .last()
            .unwrap(),
        &serde_json::json!({ "name": "private-ca", "configMap": { "name": "private-ca" } })
    );
}

#[test]
fn pod_metadata_scheduling_and_pull_secrets_come_from_values() {
    let objects = rendered("camelk-system", &EVERY_VALUE, &[]);
    let deployment = find(&objects, "Deployment", "camelk-reconciler");
    let template = &deployment["spec"]["template"];
    assert_eq!(template["metadata"]["labels"]["team"], "platform");
    // A pod label never changes the selector, which must keep matching.
    for (key, value) in deployment["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(&template["metadata"]["labels"][key], value, "{key}");
    }
    assert_eq!(
        template["metadata"]["annotations"]["example.com/owner"],
        "platform"
    );
    let pod = &template["spec"];
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert_eq!(names(&pod["imagePullSecrets"]), ["registry"]);
    let hook = find(&objects, "Pod", "camelk-reconciler-test");
    assert_eq!(names(&hook["spec"]["imagePullSecrets"]), ["registry"]);
    // Without them, no key at all.
    let plain = reconciler_pod(&rendered("camelk-system", &AS_EXAMPLES, &[])).clone();
    for key in ["priorityClassName", "imagePullSecrets"] {
        assert!(plain.get(key).is_none(), "{key}: {plain}");
    }
}

/// OpenShift's restricted-v2 assigns the UID and fsGroup: the example values
/// drop the chart's, and nothing else of the hardening.
#[test]
fn security_contexts_can_be_overridden_and_the_openshift_example_names_no_user() {
    let objects = rendered(
        "camelk-system",
        &AS_EXAMPLES,
        &["-f", OPENSHIFT_VALUES_PATH.as_str()],
    );
    let pods: Vec<&Value> = [
        reconciler_pod(&objects),
        &find(&objects, "Pod", "camelk-reconciler-test")["spec"],
    ]
    .into();
    for pod in pods {
        let text = serde_json::to_string(pod).unwrap();
        for key in ["runAsUser", "runAsGroup", "fsGroup"] {
            assert!(
                !text.contains(key),
                "{key} with the OpenShift values: {text}"
            );
        }
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            str_at(pod, "/securityContext/seccompProfile/type"),
            "RuntimeDefault"
        );
        let c = &pod["containers"][0]["securityContext"];
        assert_eq!(c["allowPrivilegeEscalation"], false);
        assert_eq!(c["readOnlyRootFilesystem"], true);
        assert_eq!(strings(&c["capabilities"]["drop"]), ["ALL"]);
    }
    assert_eq!(
        find(&objects, "ConfigMap", "camelk-operator-identities")["data"]["operator.camel-k"],
        "system:serviceaccount:openshift-operators:camel-k-operator"
    );

    // A key added, one dropped, and the whole context dropped.
    let objects = rendered(
        "camelk-system",
        &[
            AS_EXAMPLES[0],
            "podSecurityContext.runAsUser=1000700000",
            "podSecurityContext.fsGroup=null",
            "containerSecurityContext.runAsNonRoot=true",
        ],
        &[],
    );
    let pod = reconciler_pod(&objects);
    assert_eq!(pod["securityContext"]["runAsUser"], 1000700000);
    assert!(pod["securityContext"].get("fsGroup").is_none());
    assert_eq!(
        pod["containers"][0]["securityContext"]["runAsNonRoot"],
        true
    );
    let objects = rendered(
        "camelk-system",
        &[AS_EXAMPLES[0], "podSecurityContext=null"],
        &[],
    );
    assert!(reconciler_pod(&objects).get("securityContext").is_none());
}

#[test]
fn a_pod_disruption_budget_comes_with_more_than_one_replica_or_when_asked() {
    let budget = |sets: &[&str]| -> Option<Value> {
        let mut all = vec![AS_EXAMPLES[0]];
        all.extend(sets);
        rendered("camelk-system", &all, &[])
            .into_iter()
            .find(|o| o["kind"] == "PodDisruptionBudget")
    };
    assert!(
        budget(&[]).is_none(),
        "one replica: a budget would block every drain"
    );
    let two = budget(&["replicaCount=2"]).expect("a budget with two replicas");
    assert_eq!(two["spec"]["minAvailable"], 1);
    assert!(two["spec"].get("maxUnavailable").is_none());
    let objects = rendered("camelk-system", &[AS_EXAMPLES[0], "replicaCount=2"], &[]);
    assert_eq!(
        two["spec"]["selector"]["matchLabels"],
        find(&objects, "Deployment", "camelk-reconciler")["spec"]["selector"]["matchLabels"]
    );
    assert!(budget(&["replicaCount=2", "podDisruptionBudget.enabled=false"]).is_none());
    assert!(budget(&["podDisruptionBudget.enabled=true"]).is_some());
    let percent = budget(&["replicaCount=3", "podDisruptionBudget.maxUnavailable=34%"]).unwrap();
    assert_eq!(percent["spec"]["maxUnavailable"], "34%");
    assert!(percent["spec"].get("minAvailable").is_none());
    template_fails(
        &[AS_EXAMPLES[0], "podDisruptionBudget.enabled=maybe"],
        &[],
        "podDisruptionBudget",
    );
}

#[test]
fn the_crds_are_templates_upgrades_update_and_keep_leaves_in_place() {
    assert!(
        !root().join(CHART).join("crds").exists(),
        "crds/ is installed once and never upgraded by Helm"
    );
    let crds = |sets: &[&str]| -> Vec<Value> {
        let mut all = vec![AS_EXAMPLES[0]];
        all.extend(sets);
        rendered("camelk-system", &all, &[])
            .into_iter()
            .filter(|o| o["kind"] == "CustomResourceDefinition")
            .collect()
    };
    let kept = crds(&[]);
    let files = [
        "operatorassignments.camelk.dev.yaml",
        "rolloutapprovals.camelk.dev.yaml",
    ];
    assert_eq!(kept.len(), files.len(), "every CRD by default");
    for (kept, file) in kept.iter().zip(files) {
        let shipped: Value = serde_saphyr::from_str(
            &std::fs::read_to_string(root().join(CHART).join("files/crds").join(file)).unwrap(),
        )
        .unwrap();
        // The same definition (a YAML round trip writes 0 for 0.0).
        assert_eq!(
            normalized(&kept["spec"]),
            normalized(&shipped["spec"]),
            "{file}"
        );
        assert_eq!(
            kept["metadata"]["annotations"]["helm.sh/resource-policy"], "keep",
            "kept on uninstall by default: deleting it deletes every object of its kind"
        );
        assert_eq!(
            kept["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "Helm"
        );
    }
    for dropped in crds(&["crds.keep=false"]) {
        assert!(
            dropped["metadata"].get("annotations").is_none(),
            "{}",
            dropped["metadata"]
        );
    }
    assert!(crds(&["crds.enabled=false"]).is_empty());
}

#[test]
fn the_approval_policy_is_the_shipped_one() {
    let shipped =
        std::fs::read_to_string(root().join("examples/deploy/admission/approval-policy.yaml"))
            .unwrap();
    let copy =
        std::fs::read_to_string(root().join(CHART).join("files/approval-policy.yaml")).unwrap();
    assert_eq!(
        copy, shipped,
        "copy examples/deploy/admission/approval-policy.yaml to the chart's files/"
    );
}

#[test]
fn notes_name_the_next_command_and_the_secrets_to_create() {
    let mut cmd = helm();
    cmd.args(["install", "camelk"])
        .arg(root().join(CHART))
        .args(["--namespace", "camelk-ops", "--dry-run=client"]);
    for set in AS_EXAMPLES {
        cmd.args(["--set", set]);
    }
    let out = output(&mut cmd);
    assert!(out.status.success(), "{}", printed(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let notes = &stdout[stdout.find("NOTES:").expect("NOTES")..];
    for said in [
        "kubectl camelk check -n camelk-ops",
        "helm test camelk -n camelk-ops",
        "camelk-reconciler-git  key token",
        "camelk-reconciler-webhook  key secret",
        "camelk-reconciler-plan-token  key token",
        "It starts no Camel K operator",
    ] {
        assert!(notes.contains(said), "NOTES lack {said:?}:\n{notes}");
    }
}

#[test]
fn the_test_hook_runs_check_from_the_plugins_image() {
    let objects = rendered("camelk-ops", &AS_EXAMPLES, &[]);
    let hooks: Vec<String> = objects.iter().filter(|o| is_hook(o)).map(id).collect();
    assert_eq!(
        hooks.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        BTreeSet::from([
            "ServiceAccount camelk-ops/camelk-reconciler-test",
            "ClusterRole camelk-reconciler-test",
            "ClusterRoleBinding camelk-reconciler-test",
            "Role camelk-ops/camelk-reconciler-test",
            "RoleBinding camelk-ops/camelk-reconciler-test",
            "Pod camelk-ops/camelk-reconciler-test",
        ])
    );
    for o in objects.iter().filter(|o| is_hook(o)) {
        assert_eq!(
            o["metadata"]["annotations"]["helm.sh/hook"],
            "test",
            "{}",
            id(o)
        );
    }
    let pod = find(&objects, "Pod", "camelk-reconciler-test");
    let version = env!("CARGO_PKG_VERSION");
    let c = &pod["spec"]["containers"][0];
    assert_eq!(
        str_at(c, "/image"),
        format!("ghcr.io/camelk-gitops/kubectl-camelk:v{version}")
    );
    assert_eq!(strings(&c["args"]), ["check", "--namespace=camelk-ops"]);
    assert_eq!(pod["spec"]["restartPolicy"], "Never");
    assert_eq!(
        str_at(pod, "/spec/serviceAccountName"),
        "camelk-reconciler-test"
    );
    // The hook's RBAC grants reads only.
    for o in objects
        .iter()
        .filter(|o| is_hook(o) && o.get("rules").is_some())
    {
        for rule in o["rules"].as_array().unwrap() {
            for verb in strings(&rule["verbs"]) {
                assert!(["get", "list"].contains(&verb), "{}: {verb}", id(o));
            }
        }
    }
    let tagged = rendered("camelk-ops", &EVERY_VALUE, &[]);
    assert!(
        str_at(
            find(&tagged, "Pod", "camelk-reconciler-test"),
            "/spec/containers/0/image"
        )
        .ends_with(":v9.9.9")
    );
    let off = rendered("camelk-ops", &[AS_EXAMPLES[0], "test.enabled=false"], &[]);
    assert!(off.iter().all(|o| !is_hook(o)));
}

/// `kubectl camelk check`, run as the hook's ServiceAccount (impersonated,
/// with the groups a pod's token carries) against the real API server with
/// the hook's objects applied: every read it makes is allowed. Whether the
/// installation is whole (no reconciler runs here) is beside the point.
#[tokio::test]
async fn check_reads_everything_it_needs_under_the_test_hooks_rbac() {
    let cluster = camelk_testkit::shared();
    let admin = cluster.admin().await;
    let ns = "camelk-chart-test";
    create_namespace(&admin, ns).await;
    // The hook's objects and the identities it reads, nothing cluster-wide of
    // the release: the reconciler's ClusterRoleBinding is examples/deploy's
    // too, which other tests apply.
    let objects = rendered(ns, &AS_EXAMPLES, &[]);
    for obj in objects
        .iter()
        .filter(|o| (is_hook(o) && o["kind"] != "Pod") || o["kind"] == "ConfigMap")
    {
        apply(&admin, obj, false)
            .await
            .unwrap_or_else(|e| panic!("{} refused: {e}", id(obj)));
    }
    let plugin = workspace_binary("kubectl-camelk", "kubectl-camelk");
    let account = format!("system:serviceaccount:{ns}:camelk-reconciler-test");
    let groups = [
        "system:serviceaccounts".to_string(),
        format!("system:serviceaccounts:{ns}"),
        "system:authenticated".to_string(),
    ];
    let check = || {
        let mut cmd = Command::new(&plugin);
        cmd.args(["check", "--observe=1s", "-n", ns, "-o", "json"])
            .arg("--kubeconfig")
            .arg(cluster.kubeconfig())
            .args(["--context", "admin", "--as", &account])
            .env("NO_COLOR", "1");
        for group in &groups {
            cmd.args(["--as-group", group]);
        }
        let out = output(&mut cmd);
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let refused = |said: &str| {
        ["forbidden", "not allowed", "could not read"]
            .iter()
            .any(|word| said.contains(word))
    };
    // The authorizer learns new bindings through an informer: a refusal at
    // first may be its lag, one after 15 s is the RBAC's.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let (stdout, stderr) = loop {
        let (stdout, stderr) = check();
        if !refused(&format!("{stdout}{stderr}")) || std::time::Instant::now() > deadline {
            break (stdout, stderr);
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    };
    assert!(
        !refused(&format!("{stdout}{stderr}")),
        "check as {account} was refused a read:\n{stdout}{stderr}"
    );
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("check -o json: {e}\n{stdout}{stderr}"));
    let parts: BTreeSet<&str> = report["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("no findings: {report}"))
        .iter()
        .filter_map(|f| f["part"].as_str())
        .collect();
    assert!(
        parts.len() >= 3,
        "check judged the CRDs, the reconciler, the policy: {report}"
    );
}

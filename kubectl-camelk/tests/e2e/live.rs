//! `plan` and `diff` against live resources on the real control plane of
//! the test kit (etcd + kube-apiserver on loopback), and the generated CRD
//! as the real API server takes it.

use std::time::{Duration, Instant};

use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use camelk_reconciler::manifest::Manifest;
use camelk_testkit::manifest::{Assignment, Rule};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{camelk, repo_with, shared_namespace, words};

fn api(client: Client, kind: CamelKind, ns: &str) -> Api<DynamicObject> {
    camelk_testkit::scenario::camel_api(client, kind, ns)
}

/// Creates a resource owned by `owner` (label and annotation) in `phase`.
async fn create(
    client: &Client,
    ns: &str,
    kind: CamelKind,
    name: &str,
    owner: Option<&str>,
    phase: Option<&str>,
) {
    post(
        client,
        ns,
        kind,
        object(kind, name, owner, json!([])),
        phase,
    )
    .await;
}

/// [`create`], controlled by the existing resource `controller` (an owner
/// reference with `controller: true`, as an operator sets on what it creates).
async fn create_controlled(
    client: &Client,
    ns: &str,
    (kind, name): (CamelKind, &str),
    owner: Option<&str>,
    phase: Option<&str>,
    controller: (CamelKind, &str),
) {
    let uid = api(client.clone(), controller.0, ns)
        .get(controller.1)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let reference = json!([{
        "apiVersion": controller.0.api_version(), "kind": controller.0.kind(),
        "name": controller.1, "uid": uid, "controller": true, "blockOwnerDeletion": true
    }]);
    post(
        client,
        ns,
        kind,
        object(kind, name, owner, reference),
        phase,
    )
    .await;
}

/// Resource `kind` `name` owned by `owner` (label and annotation), with
/// `owner_references`.
fn object(
    kind: CamelKind,
    name: &str,
    owner: Option<&str>,
    owner_references: serde_json::Value,
) -> DynamicObject {
    let keys = owner
        .map(|o| json!({ OPERATOR_ID_KEY: o }))
        .unwrap_or(json!({}));
    serde_json::from_value(json!({
        "apiVersion": kind.api_version(),
        "kind": kind.kind(),
        "metadata": {
            "name": name, "labels": keys, "annotations": keys,
            "ownerReferences": owner_references
        },
        "spec": {}
    }))
    .unwrap()
}

/// Creates `object`, of `kind`, in `ns`, then sets its `phase`.
async fn post(
    client: &Client,
    ns: &str,
    kind: CamelKind,
    object: DynamicObject,
    phase: Option<&str>,
) {
    let name = object.metadata.name.clone().expect("a name");
    let api = api(client.clone(), kind, ns);
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("creating {kind} {name}: {e}"));
    if let Some(phase) = phase {
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "phase": phase } })),
        )
        .await
        .unwrap_or_else(|e| panic!("setting the phase of {name}: {e}"));
    }
}

/// An IntegrationKit `kit` and its Build `<kit>-build` (owned by the kit, as
/// the operator creates it) in `build_phase`.
async fn kit_with_build(client: &Client, ns: &str, kit: &str, build_phase: &str) {
    let kind = CamelKind::IntegrationKit;
    create(client, ns, kind, kit, Some("operator-1"), None).await;
    let build = format!("{kit}-build");
    let phase = Some(build_phase);
    create_controlled(
        client,
        ns,
        (CamelKind::Build, &build),
        Some("operator-1"),
        phase,
        (kind, kit),
    )
    .await;
}

/// An Integration owned by operator-1, `Running` on the kit `kit`.
async fn integration_using_kit(client: &Client, ns: &str, name: &str, kit: &str) {
    create(
        client,
        ns,
        CamelKind::Integration,
        name,
        Some("operator-1"),
        None,
    )
    .await;
    api(client.clone(), CamelKind::Integration, ns)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": {
                "phase": "Running",
                "integrationKit": { "name": kit, "namespace": ns }
            } })),
        )
        .await
        .unwrap();
}

/// The Integration a Pipe `name` creates: same name, owned by operator-1,
/// `Running`, its controller owner reference naming the Pipe.
async fn integration_of_pipe(client: &Client, ns: &str, name: &str) {
    let it = (CamelKind::Integration, name);
    let pipe = (CamelKind::Pipe, name);
    create_controlled(client, ns, it, Some("operator-1"), Some("Running"), pipe).await;
}

/// Operators 1 and 2, Integrations and Pipes of `ns`, operator-1 by default;
/// canaries, and the Pipe `stream`, to operator-2.
fn manifest(ns: &str) -> String {
    Assignment::new("live")
        .operator("operator-1", "camel-k")
        .operator("operator-2", "camel-k")
        .scope(&[ns], &[CamelKind::Integration, CamelKind::Pipe])
        .default_operator("operator-1")
        .rule(Rule::to("operator-2").names(&["canary-*"]))
        .rule(
            Rule::to("operator-2")
                .kinds(&[CamelKind::Pipe])
                .names(&["stream"]),
        )
        .render()
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_reads_owners_and_phases_from_the_cluster() {
    let (cluster, ns, client) = shared_namespace("plan").await;
    for (kind, name, owner, phase) in [
        (
            CamelKind::Integration,
            "orders",
            Some("operator-1"),
            Some("Running"),
        ),
        (
            CamelKind::Integration,
            "canary-a",
            Some("operator-1"),
            Some("Running"),
        ),
        (
            CamelKind::Integration,
            "canary-b",
            Some("operator-1"),
            Some("Building Kit"),
        ),
        (CamelKind::Integration, "fresh", None, None),
        (CamelKind::Pipe, "events", Some("operator-2"), Some("Ready")),
    ] {
        create(&client, &ns.name, kind, name, owner, phase).await;
    }
    // Running, but its kit's Build has not finished: blocked. Its twin's
    // kit was built already: it moves.
    kit_with_build(&client, &ns.name, "kit-c", "Running").await;
    kit_with_build(&client, &ns.name, "kit-d", "Succeeded").await;
    integration_using_kit(&client, &ns.name, "canary-c", "kit-c").await;
    integration_using_kit(&client, &ns.name, "canary-d", "kit-d").await;
    // A Pipe the rules send to operator-2, and the Integration it created:
    // by the manifest alone that one stays with operator-1 (the default),
    // but it follows its Pipe.
    create(
        &client,
        &ns.name,
        CamelKind::Pipe,
        "stream",
        Some("operator-1"),
        Some("Ready"),
    )
    .await;
    integration_of_pipe(&client, &ns.name, "stream").await;
    // Outside the scope's kinds: never planned.
    create(
        &client,
        &ns.name,
        CamelKind::Kamelet,
        "timer-source",
        Some("operator-2"),
        None,
    )
    .await;

    let repo = repo_with(&manifest(&ns.name));
    let kubeconfig = cluster.kubeconfig();
    let output = camelk(repo.path())
        .args(["plan", "--kubeconfig", kubeconfig.to_str().unwrap()])
        .args(["--context", "admin", "-n", &ns.name, "-o", "json"])
        .output()
        .unwrap();
    camelk_testkit::assert_success(&output, "plan -o json");
    let plan: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();

    let moves = moves_of(&plan);
    assert_eq!(
        moves,
        vec![
            ("canary-a".into(), "operator-1".into(), "operator-2".into()),
            ("canary-d".into(), "operator-1".into(), "operator-2".into()),
            ("stream".into(), "operator-1".into(), "operator-2".into()),
            ("events".into(), "operator-2".into(), "operator-1".into()),
            ("stream".into(), "operator-1".into(), "operator-2".into()),
        ],
        "{plan:#}"
    );
    assert_eq!(
        plan["batches"][0]["moves"][2]["because"],
        json!({ "by": "follows", "kind": "Pipe", "name": "stream" })
    );
    assert_eq!(plan["blocked"][0]["move"]["resource"]["name"], "canary-b");
    assert_eq!(plan["blocked"][0]["why"]["phase"], "Building Kit");
    assert_eq!(plan["blocked"][1]["move"]["resource"]["name"], "canary-c");
    assert_eq!(plan["blocked"][1]["why"]["phase"], "Running", "{plan:#}");
    assert_eq!(
        plan["blocked"][1]["why"]["detail"],
        "build kit-c-build of kit kit-c has not finished"
    );
    assert_eq!(plan["blocked"].as_array().unwrap().len(), 2);
    assert_eq!(plan["firstAssignments"][0]["resource"]["name"], "fresh");
    assert_eq!(plan["unchanged"]["total"], 1);

    // The same through $KUBECONFIG as a merged list (a missing file is
    // skipped, the first file's current-context wins), and diff's exit code.
    let other = repo.path().join("other-config");
    std::fs::write(
        &other,
        "apiVersion: v1\nkind: Config\ncurrent-context: other\nclusters:\n- name: other\n  cluster: {server: \"https://127.0.0.1:1\"}\nusers:\n- name: other\n  user: {token: x}\ncontexts:\n- name: other\n  context: {cluster: other, user: other}\n",
    )
    .unwrap();
    let merged = format!(
        "{}:{}:{}",
        repo.path().join("missing-config").display(),
        other.display(),
        kubeconfig.display()
    );
    camelk(repo.path())
        .env("KUBECONFIG", &merged)
        .args(["diff", "--context", "admin", "-n", &ns.name])
        .assert()
        .code(1);
    // Without --context, the first file's current-context (an unreachable server) is used.
    camelk(repo.path())
        .env("KUBECONFIG", &merged)
        .args(["diff", "-n", &ns.name])
        .assert()
        .code(2);
}

/// Every move of a plan printed as JSON: (name, from, to), in order.
pub(crate) fn moves_of(plan: &serde_json::Value) -> Vec<(String, String, String)> {
    plan["batches"]
        .as_array()
        .unwrap_or_else(|| panic!("a plan: {plan:#}"))
        .iter()
        .flat_map(|b| b["moves"].as_array().unwrap().clone())
        .map(|m| {
            let text = |v: &serde_json::Value| v.as_str().unwrap().to_string();
            (
                text(&m["resource"]["name"]),
                text(&m["from"]),
                text(&m["to"]),
            )
        })
        .collect()
}

/// `rollout`, `assign` and `revert` plan their change against the cluster
/// the kubeconfig reaches, as `plan --base --head` would; a cluster that
/// does not answer is a note saying what was not seen, never a failure.
#[tokio::test(flavor = "multi_thread")]
async fn edits_plan_against_the_live_cluster_or_say_what_they_could_not_see() {
    let (cluster, ns, client) = shared_namespace("edit-plan").await;
    let integration = CamelKind::Integration;
    for name in ["a", "b", "c"] {
        create(
            &client,
            &ns.name,
            integration,
            name,
            Some("operator-1"),
            Some("Running"),
        )
        .await;
    }
    create(
        &client,
        &ns.name,
        CamelKind::Pipe,
        "p",
        Some("operator-1"),
        Some("Ready"),
    )
    .await;
    let manifest = Assignment::new("edits")
        .operator("operator-1", "camel-k")
        .operator("operator-2", "camel-k")
        .scope(&[&ns.name], &[CamelKind::Integration, CamelKind::Pipe])
        .default_operator("operator-1")
        .render();
    let repo = repo_with(&manifest);
    let kubeconfig = cluster.kubeconfig();
    let edit = |args: &[&str]| {
        let output = camelk(repo.path())
            .args(args)
            .args(["--kubeconfig", kubeconfig.to_str().unwrap()])
            .args(["--context", "admin", "-o", "json"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "{args:?}: {stderr}");
        let plan: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&output.stdout))
        });
        (plan, stderr)
    };
    let everything: Vec<(String, String, String)> = ["a", "b", "c", "p"]
        .iter()
        .map(|n| (n.to_string(), "operator-1".into(), "operator-2".into()))
        .collect();

    let (rollout, stderr) = edit(&words(
        "rollout --from operator-1 --to operator-2 --steps 50%,100% --branch rollout",
    ));
    let mut moved = moves_of(&rollout);
    moved.sort();
    assert_eq!(moved, everything, "{rollout:#}");
    assert_eq!(
        rollout["batches"].as_array().unwrap().len(),
        2,
        "{rollout:#}"
    );
    assert_eq!(rollout["notes"], json!([]), "{rollout:#}");
    assert!(!stderr.contains("not installed"), "{stderr}");
    let rolled_out = crate::common::git(repo.path(), &["rev-parse", "HEAD"]);

    // Against the manifest the rollout committed: `a` is operator-2's
    // already, so pinning it there moves nothing; `b` moves back.
    let assign_a = format!(
        "assign integration/a --to operator-2 -n {} --dry-run",
        ns.name
    );
    let (assign, _) = edit(&words(&assign_a));
    assert_eq!(moves_of(&assign), [], "{assign:#}");
    let assign_b = format!(
        "assign integration/b --to operator-1 -n {} --dry-run",
        ns.name
    );
    let (assign, _) = edit(&words(&assign_b));
    assert_eq!(
        moves_of(&assign),
        [(
            "b".to_string(),
            "operator-2".to_string(),
            "operator-1".to_string()
        )],
        "{assign:#}"
    );
    assert_eq!(assign["unchanged"]["total"], 3, "{assign:#}");

    // Undoing the rollout moves every resource back.
    let (revert, _) = edit(&["revert", rolled_out.trim(), "--dry-run"]);
    let mut back = moves_of(&revert);
    back.sort();
    let reversed: Vec<_> = everything
        .iter()
        .map(|(n, from, to)| (n.clone(), to.clone(), from.clone()))
        .collect();
    assert_eq!(back, reversed, "{revert:#}");

    // A kubeconfig whose server does not answer: the edit still works, and
    // its plan says what it could not see and what fixes it.
    let down = repo.path().join("down-config");
    std::fs::write(
        &down,
        "apiVersion: v1\nkind: Config\ncurrent-context: down\nclusters:\n- name: down\n  cluster: {server: \"https://127.0.0.1:1\"}\nusers:\n- name: down\n  user: {token: x}\ncontexts:\n- name: down\n  context: {cluster: down, user: down}\n",
    )
    .unwrap();
    let started = Instant::now();
    let output = camelk(repo.path())
        .env("KUBECONFIG", &down)
        .args(words(&assign_b))
        .output()
        .unwrap();
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    camelk_testkit::assert_success(&output, "assign --dry-run");
    let note = "- the cluster was not read: the API server https://127.0.0.1:1/ did not answer";
    assert!(stdout.contains(note), "{stdout}");
    for said in [
        &format!(
            "not seen: every Integration and Pipe in namespace {}",
            ns.name
        ),
        "this plan shows only the resource named on the command line",
        "pick another cluster with --context NAME",
    ] {
        assert!(stdout.contains(said), "{said:?} in {stdout}");
    }
    assert!(took < Duration::from_secs(10), "gave up in {took:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_user_who_may_not_read_builds_still_gets_a_plan() {
    let (cluster, ns, client) = shared_namespace("plan-rbac").await;
    kit_with_build(&client, &ns.name, "kit-c", "Running").await;
    integration_using_kit(&client, &ns.name, "canary-c", "kit-c").await;
    // `viewer` may read Integrations and Pipes there, and nothing else.
    let read = k8s_openapi::api::rbac::v1::PolicyRule {
        api_groups: Some(vec![camelk_reconciler::camel_k::GROUP.into()]),
        resources: Some(vec!["integrations".into(), "pipes".into()]),
        verbs: vec!["get".into(), "list".into()],
        ..Default::default()
    };
    cluster
        .grant_in_namespace(&ns.name, "viewer", "camel-k-reader", vec![read])
        .await;
    // The authorizer learns of the binding through its informer.
    let as_viewer = &api(cluster.client_as("viewer").await, CamelKind::Pipe, &ns.name);
    let lists =
        move || async move { Some(as_viewer.list_metadata(&Default::default()).await.is_ok()) };
    camelk_testkit::poll::until(Duration::from_secs(10), lists, |ok: &bool| *ok)
        .await
        .expect("the grant to viewer never took effect");

    let repo = repo_with(&manifest(&ns.name));
    let kubeconfig = cluster.kubeconfig();
    let plan_as = |context: &str, namespace: &[&str]| {
        let output = camelk(repo.path())
            .args(["plan", "--kubeconfig", kubeconfig.to_str().unwrap()])
            .args(["--context", context, "-o", "json"])
            .args(namespace)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "{context}: {stderr}");
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    // The admin sees the kit's running Build: blocked.
    let admin = plan_as("admin", &["-n", &ns.name]);
    assert_eq!(
        admin["blocked"][0]["move"]["resource"]["name"], "canary-c",
        "{admin:#}"
    );
    // The viewer cannot list Builds: the plan judges by phase alone (the
    // handoff still checks the Build before anything is released).
    let viewer = plan_as("viewer", &["-n", &ns.name]);
    assert_eq!(viewer["blocked"], json!([]), "{viewer:#}");
    assert_eq!(
        viewer["batches"][0]["moves"][0]["resource"]["name"],
        "canary-c"
    );
    // Without -n the plan lists the scope's namespaces one by one, which the
    // viewer may do, not the whole cluster, which it may not.
    assert_eq!(plan_as("viewer", &[]), viewer);
}

#[tokio::test(flavor = "multi_thread")]
async fn kubeconfig_flags_follow_kubectl() {
    let cluster = camelk_testkit::shared();
    let ns = cluster.namespace("kubeconfig").await;
    let repo = repo_with(&manifest(&ns.name));
    let kubeconfig = cluster.kubeconfig();
    std::fs::write(repo.path().join("broken-config"), "not: [a kubeconfig").unwrap();
    // --kubeconfig wins over $KUBECONFIG.
    camelk(repo.path())
        .env("KUBECONFIG", repo.path().join("broken-config"))
        .args(["diff", "--kubeconfig", kubeconfig.to_str().unwrap()])
        .args(["--context", "admin", "-n", &ns.name])
        .assert()
        .code(0);
    // A user without rights: an error naming the refusal, exit 2 for diff;
    // the same refusal for the admin impersonating that user, as kubectl --as.
    for (who, says) in [
        (
            &["--context", "viewer"][..],
            "listing Integration resources",
        ),
        (&["--context", "admin", "--as", "viewer"][..], "\"viewer\""),
    ] {
        let output = camelk(repo.path())
            .args(["diff", "--kubeconfig", kubeconfig.to_str().unwrap(), "-A"])
            .args(who)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{who:?}: {stderr}");
        assert!(
            stderr.contains(says) && stderr.contains("forbidden"),
            "{who:?}: {stderr}"
        );
    }
    // An unknown context is an error too.
    camelk(repo.path())
        .args(["plan", "--kubeconfig", kubeconfig.to_str().unwrap()])
        .args(["--context", "nobody"])
        .assert()
        .code(1);
}

#[test]
fn request_timeout_gives_up_on_a_server_that_never_answers() {
    // Accepts connections and never writes a byte.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        let mut open = Vec::new();
        for stream in listener.incoming().take(8) {
            open.push(stream);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    std::fs::write(
        &config,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: mute\n\
             clusters: [{{name: mute, cluster: {{server: \"http://127.0.0.1:{port}\"}}}}]\n\
             users: [{{name: u, user: {{token: t}}}}]\n\
             contexts: [{{name: mute, context: {{cluster: mute, user: u}}}}]\n"
        ),
    )
    .unwrap();
    let started = Instant::now();
    let output = camelk(dir.path())
        .args(["operators", "--kubeconfig", config.to_str().unwrap()])
        .args(["--request-timeout", "1s"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.to_lowercase().contains("timed out") || stderr.contains("timeout"),
        "{stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "gave up after {:?}",
        started.elapsed()
    );
    drop(held);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_generated_crd_is_accepted_and_serves_manifests() {
    let (cluster, ns, client) = shared_namespace("crd").await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = camelk_reconciler::api::crd();
    let name = crd.metadata.name.clone().unwrap();
    crds.patch(
        &name,
        &PatchParams::apply("kubectl-camelk-test").force(),
        &Patch::Apply(&crd),
    )
    .await
    .unwrap_or_else(|e| panic!("the API server refused the CRD: {e}"));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let current = crds.get(&name).await.unwrap();
        let established = current
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the CRD never became established"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let text = std::fs::read_to_string(crate::common::fixture(
        "../../examples/operator-assignment.yaml",
    ))
    .unwrap();
    let manifest = Manifest::parse("operator-assignment.yaml", text).unwrap();
    let mut object = manifest.assignment.clone();
    object.metadata.namespace = Some(ns.name.clone());
    let api: Api<camelk_reconciler::api::OperatorAssignment> = Api::namespaced(client, &ns.name);
    let created = api
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("creating the example OperatorAssignment: {e}"));
    assert_eq!(created.spec, manifest.assignment.spec);

    // What the reconciler reports there, as `kubectl camelk status` shows it.
    let name = created.metadata.name.clone().unwrap();
    let status = json!({ "status": {
        "observedGeneration": 1,
        "lastAppliedRevision": "0123456789abcdef0123",
        "lastAttemptedRevision": "fedcba9876543210fedc",
        "conditions": [{ "type": "Ready", "status": "False", "reason": "HealthCheckFailed",
            "message": "Integration shop/orders is not Ready under operator-2",
            "lastTransitionTime": "2026-12-02T10:00:00Z" }],
        "counts": { "operator-1": 7, "operator-2": 3 },
        "rollout": { "revision": "fedcba9876543210fedc", "totalSteps": 3, "currentStep": 2,
            "completedSteps": 1, "state": "Paused", "message": "health gate failed",
            "failing": ["Integration shop/orders: not Ready"] }
    }});
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = cluster.kubeconfig();
    let kubeconfig = kubeconfig.to_str().unwrap();
    // `kubectl camelk status ARGS` in the test's namespace.
    let status = |args: &[&str]| {
        camelk(dir.path())
            .args(["--kubeconfig", kubeconfig, "-n", &ns.name, "status"])
            .args(args)
            .output()
            .unwrap()
    };
    let out = status(&[name.as_str()]);
    camelk_testkit::assert_success(&out, "status");
    let text = String::from_utf8_lossy(&out.stdout);
    for expected in [
        "Applied revision:  0123456789ab",
        "Rollout:           Paused step 2/3 (completed 1): health gate failed",
        "failing:         Integration shop/orders: not Ready",
        "Owners:            operator-1=7, operator-2=3",
        "HealthCheckFailed",
    ] {
        assert!(text.contains(expected), "missing `{expected}` in:\n{text}");
    }
    let out = status(&["-o", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["items"][0]["status"]["rollout"]["currentStep"], 2);
    let out = status(&["-o", "name"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("operatorassignment.camelk.dev/{name}\n")
    );

    // Plain kubectl shows the same state through the CRD's printer columns, as Flux's do.
    let out = std::process::Command::new("kubectl")
        .args(["--kubeconfig", kubeconfig, "-n", &ns.name])
        .args(["get", "operatorassignments", "-o", "wide"])
        .output()
        .expect("kubectl (installed by .ci/run)");
    let table = String::from_utf8_lossy(&out.stdout);
    camelk_testkit::assert_success(&out, "kubectl get operatorassignments");
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .collect();
    assert_eq!(
        rows[0],
        ["NAME", "READY", "STATUS", "REVISION", "DEFAULT", "AGE"],
        "{table}"
    );
    assert_eq!(
        rows[1][..5],
        [
            name.as_str(),
            "False",
            "Integration shop/orders is not Ready under operator-2",
            "0123456789abcdef0123",
            manifest
                .assignment
                .spec
                .default_operator
                .to_string()
                .as_str(),
        ],
        "{table}"
    );
    assert_eq!(
        json["items"][0]["status"]["conditions"][0]["reason"],
        "HealthCheckFailed"
    );
    let out = status(&["missing"]);
    assert_eq!(out.status.code(), Some(1), "an unknown name is an error");

    // suspend / resume set and remove the annotation `reconciler sync` honours.
    let suspended = |a: &camelk_reconciler::api::OperatorAssignment| {
        a.metadata
            .annotations
            .as_ref()
            .and_then(|m| m.get("camelk.dev/suspend"))
            .cloned()
    };
    camelk(dir.path())
        .args(["--kubeconfig", kubeconfig, "-n", &ns.name, "suspend", &name])
        .assert()
        .success();
    assert_eq!(
        suspended(&api.get(&name).await.unwrap()).as_deref(),
        Some("true")
    );
    camelk(dir.path())
        .args(["--kubeconfig", kubeconfig, "-n", &ns.name, "resume"])
        .assert()
        .success();
    assert_eq!(suspended(&api.get(&name).await.unwrap()), None);
}

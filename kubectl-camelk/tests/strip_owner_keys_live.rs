//! `strip-owner-keys` against the real control plane of the test kit
//! (kube-apiserver and etcd on loopback; a binary of its own, so one more
//! control plane, about 8 s): the verdict of each resource read from its
//! `managedFields`, and the API server's own answer to what happens once the
//! keys leave the manifest.
//!
//! The tools are played by their field managers and their kinds of write:
//! Flux's kustomize-controller applies server-side (and only when its dry
//! run differs from the live object), Argo CD's default sync
//! (`argocd-controller`) writes client-side; the reconciler's co-owning is
//! the server-side apply of both keys as `camelk-owner-keys` that
//! `reconciler sync` makes.

mod common;

use std::path::Path;
use std::process::Output;

use camelk_reconciler::camel_k::CO_OWNER;
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use camelk_reconciler::manifest::owner_keys::LiveKeys;
use camelk_reconciler::manifest::owner_keys::{MARKER_KEY, MARKER_VALUE};
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use common::{camelk, git};

fn api(client: &Client, kind: CamelKind, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &kind.api_resource())
}

/// A manifest of `kind`/`name` in `ns`, with both owner keys naming
/// operator-1 when `keys`.
fn manifest(kind: CamelKind, name: &str, ns: &str, keys: bool) -> Value {
    let mut metadata = json!({ "name": name, "namespace": ns });
    if keys {
        metadata["labels"] = json!({ OPERATOR_ID_KEY: "operator-1" });
        metadata["annotations"] = json!({ OPERATOR_ID_KEY: "operator-1" });
    }
    json!({
        "apiVersion": kind.api_version(),
        "kind": kind.kind(),
        "metadata": metadata,
        "spec": {},
    })
}

/// The YAML a person would keep in the apps repository for it.
fn yaml(kind: CamelKind, name: &str, ns: &str) -> String {
    format!(
        "# {name}, deployed from Git.\napiVersion: {}\nkind: {}\nmetadata:\n  name: {name}\n  \
         namespace: {ns}\n  labels:\n    {OPERATOR_ID_KEY}: operator-1\n  annotations:\n    \
         {OPERATOR_ID_KEY}: operator-1   # who runs it\nspec: {{}}\n",
        kind.api_version(),
        kind.kind()
    )
}

/// What Flux does at its next apply of a manifest: a server-side apply of
/// it, as kustomize-controller (forced, as Flux forces).
async fn flux_applies(client: &Client, kind: CamelKind, object: Value) {
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    let ns = object["metadata"]["namespace"]
        .as_str()
        .unwrap()
        .to_string();
    api(client, kind, &ns)
        .patch(
            &name,
            &PatchParams::apply("kustomize-controller").force(),
            &Patch::Apply(object),
        )
        .await
        .unwrap();
}

/// What kustomize-controller does at a reconcile of a manifest: a
/// server-side dry run, then an apply only if the result differs from the
/// live object in its labels, annotations or spec (fluxcd/pkg/ssa looks for
/// drift there, not in `managedFields`). Whether it applied.
async fn flux_reconciles(client: &Client, kind: CamelKind, object: Value) -> bool {
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    let ns = object["metadata"]["namespace"]
        .as_str()
        .unwrap()
        .to_string();
    let api = api(client, kind, &ns);
    let live = api.get(&name).await.unwrap();
    let dry_run = api
        .patch(
            &name,
            &PatchParams::apply("kustomize-controller").force().dry_run(),
            &Patch::Apply(&object),
        )
        .await
        .unwrap();
    let compared = |o: &DynamicObject| {
        (
            o.metadata.labels.clone(),
            o.metadata.annotations.clone(),
            o.data.get("spec").cloned(),
        )
    };
    if compared(&dry_run) == compared(&live) {
        return false;
    }
    flux_applies(client, kind, object).await;
    true
}

/// What `reconciler sync` does to keys a tool applies: a server-side apply
/// of both, as they are, under its own field manager.
async fn reconciler_co_owns(client: &Client, kind: CamelKind, name: &str, ns: &str) {
    let mut keys = manifest(kind, name, ns, true);
    keys.as_object_mut().unwrap().remove("spec");
    api(client, kind, ns)
        .patch(name, &PatchParams::apply(CO_OWNER), &Patch::Apply(keys))
        .await
        .unwrap();
}

/// The owner keys the API server has for a resource: (label, annotation).
async fn live_keys(
    client: &Client,
    kind: CamelKind,
    name: &str,
    ns: &str,
) -> (Option<String>, Option<String>) {
    let object = api(client, kind, ns).get(name).await.unwrap();
    let key = |map: Option<&std::collections::BTreeMap<String, String>>| {
        map.and_then(|m| m.get(OPERATOR_ID_KEY)).cloned()
    };
    (
        key(object.metadata.labels.as_ref()),
        key(object.metadata.annotations.as_ref()),
    )
}

fn strip(dir: &Path, kubeconfig: &Path, ns: &str, args: &[&str]) -> Output {
    camelk(dir)
        .args(["strip-owner-keys", "--kubeconfig"])
        .arg(kubeconfig)
        .args(["--context", "admin", "-n", ns])
        .args(args)
        .output()
        .unwrap()
}

/// The last five columns of the table row of `name`: REMOVED, OWNER,
/// APPLIED BY, CO-OWNED, VERDICT (cells are three spaces or more apart).
fn row(stdout: &str, name: &str) -> Vec<String> {
    let cells: Vec<String> = stdout
        .lines()
        .map(|l| {
            l.split("   ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .find(|cells| cells.len() == 9 && cells[3] == name)
        .unwrap_or_else(|| panic!("no row for {name} in:\n{stdout}"));
    cells[4..].to_vec()
}

const NOT_CO_OWNED: &str = "would lose its owner: not co-owned yet (the reconciler co-owns keys \
                            a tool applies within a round; run again after reconciler sync ran)";

#[tokio::test(flavor = "multi_thread")]
async fn keys_leave_git_only_once_the_api_server_keeps_them() {
    let cluster = camelk_testkit::shared();
    let ns = cluster.namespace("strip").await;
    let ns = ns.name.as_str().to_string();
    let client = cluster.admin().await;
    let kubeconfig = cluster.kubeconfig();

    // Flux deploys `orders` server-side; Argo CD deploys `feed` client-side.
    flux_applies(
        &client,
        CamelKind::Integration,
        manifest(CamelKind::Integration, "orders", &ns, true),
    )
    .await;
    let argocd = PostParams {
        field_manager: Some("argocd-controller".into()),
        ..Default::default()
    };
    api(&client, CamelKind::Pipe, &ns)
        .create(
            &argocd,
            &serde_json::from_value(manifest(CamelKind::Pipe, "feed", &ns, true)).unwrap(),
        )
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    git(repo, &["init", "-q", "-b", "main"]);
    git(repo, &["config", "user.name", "Test User"]);
    git(repo, &["config", "user.email", "test@example.com"]);
    std::fs::create_dir_all(repo.join("apps")).unwrap();
    for (file, kind, name) in [
        ("orders.yaml", CamelKind::Integration, "orders"),
        ("feed.yaml", CamelKind::Pipe, "feed"),
        // Merged in Git, not deployed yet.
        ("later.yaml", CamelKind::Integration, "later"),
    ] {
        std::fs::write(repo.join("apps").join(file), yaml(kind, name, &ns)).unwrap();
    }
    git(repo, &["add", "."]);
    git(repo, &["commit", "-q", "-m", "apps"]);
    let refs = git(repo, &["for-each-ref"]);

    // 1. Nobody co-owns the keys yet: both deployed resources would lose
    //    their owner, and nothing is written.
    let output = strip(repo, &kubeconfig, &ns, &["apps"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}{stderr}");
    assert_eq!(output.status.code(), Some(1), "{stdout}\n{stderr}");
    let both = "label=operator-1 annotation=operator-1";
    assert_eq!(
        row(&stdout, "orders"),
        [
            both,
            "operator-1",
            "kustomize-controller",
            "no",
            NOT_CO_OWNED
        ]
    );
    assert_eq!(
        row(&stdout, "feed"),
        [
            both,
            "operator-1",
            "argocd-controller",
            "no",
            "would lose its owner: argocd-controller applies its keys client-side, which \
             deletes a key its manifest drops even when co-owned (make it apply server-side, \
             or install the owner-keys policy, first)"
        ]
    );
    assert_eq!(
        row(&stdout, "later"),
        [both, "-", "-", "-", "not in the cluster"]
    );
    assert!(
        stdout.contains("6 keys removed from 3 files; 2 resources change owner"),
        "{stdout}"
    );
    assert!(
        stderr.contains("error: 2 resources would lose their owner; nothing written"),
        "{stderr}"
    );
    assert_eq!(git(repo, &["for-each-ref"]), refs);
    assert_eq!(git(repo, &["status", "--porcelain"]), "");

    // 2. The reconciler co-owns both resources' keys. The server-side
    //    applier's keys now stay; the client-side applier's still go.
    reconciler_co_owns(&client, CamelKind::Integration, "orders", &ns).await;
    reconciler_co_owns(&client, CamelKind::Pipe, "feed", &ns).await;
    let output = strip(repo, &kubeconfig, &ns, &["apps", "-o", "json", "--dry-run"]);
    assert_eq!(output.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let verdicts: Vec<(&str, &str, Option<&str>, bool)> = report["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap(),
                r["verdict"].as_str().unwrap(),
                r["live"]["owner"].as_str(),
                r["live"]["coOwned"] == json!(true),
            )
        })
        .collect();
    assert_eq!(
        verdicts,
        [
            ("feed", "losesOwner", Some("operator-1"), true),
            ("later", "notInCluster", None, false),
            ("orders", "stays", Some("operator-1"), true),
        ]
    );
    assert_eq!(report["changeOwner"], 1);
    assert_eq!(report["ownerKeysPolicy"], false);

    // 3. Without the client-side resource, nothing changes owner: written.
    let output = strip(
        repo,
        &kubeconfig,
        &ns,
        &["apps/orders.yaml", "apps/later.yaml"],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        row(&stdout, "orders"),
        [
            both,
            "operator-1",
            "kustomize-controller",
            "yes",
            "stays with operator-1"
        ]
    );
    assert!(
        stdout.contains("4 keys removed from 2 files; 0 resources change owner"),
        "{stdout}"
    );
    assert_eq!(
        git(repo, &["diff", "--name-only", "main", "HEAD"]),
        "apps/later.yaml\napps/orders.yaml\n"
    );

    // 4. What the verdicts said, as the API server does it. Flux reconciles
    //    the stripped manifest. With the keys merely removed, its dry run
    //    would equal the live object (the co-owner keeps them): no drift, no
    //    apply, and its claim on the keys would stay forever.
    let stripped: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(repo.join("apps/orders.yaml")).unwrap())
            .unwrap();
    assert_eq!(stripped["metadata"].get("labels"), None);
    assert_eq!(
        stripped["metadata"]["annotations"],
        json!({ MARKER_KEY: MARKER_VALUE })
    );
    let mut unmarked = stripped.clone();
    unmarked["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("annotations");
    assert!(!flux_reconciles(&client, CamelKind::Integration, unmarked).await);
    //    The marker is a difference: Flux applies once, which drops its
    //    claim; the co-owned keys stay, and no tool applies them any more.
    assert!(flux_reconciles(&client, CamelKind::Integration, stripped.clone()).await);
    assert_eq!(
        live_keys(&client, CamelKind::Integration, "orders", &ns).await,
        (Some("operator-1".into()), Some("operator-1".into()))
    );
    let orders = api(&client, CamelKind::Integration, &ns)
        .get("orders")
        .await
        .unwrap();
    assert_eq!(
        LiveKeys::of(&orders.metadata),
        LiveKeys {
            owner: Some("operator-1".into()),
            applied_by: None,
            co_owned: true,
            client_side: false,
        }
    );
    //    And the next reconcile finds nothing to apply.
    assert!(!flux_reconciles(&client, CamelKind::Integration, stripped).await);
    //    Argo CD's client-side apply of a manifest without the keys deletes
    //    them (kubectl apply's patch sets them to null), co-owned or not.
    api(&client, CamelKind::Pipe, &ns)
        .patch(
            "feed",
            &PatchParams {
                field_manager: Some("argocd-controller".into()),
                ..Default::default()
            },
            &Patch::Merge(json!({ "metadata": {
                "labels": { OPERATOR_ID_KEY: null },
                "annotations": { OPERATOR_ID_KEY: null },
            } })),
        )
        .await
        .unwrap();
    assert_eq!(
        live_keys(&client, CamelKind::Pipe, "feed", &ns).await,
        (None, None)
    );
    //    And a server-side applier's keys nobody co-owns go with its hold.
    flux_applies(
        &client,
        CamelKind::Integration,
        manifest(CamelKind::Integration, "alone", &ns, true),
    )
    .await;
    flux_applies(
        &client,
        CamelKind::Integration,
        manifest(CamelKind::Integration, "alone", &ns, false),
    )
    .await;
    assert_eq!(
        live_keys(&client, CamelKind::Integration, "alone", &ns).await,
        (None, None)
    );
}

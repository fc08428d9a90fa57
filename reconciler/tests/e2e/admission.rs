//! The admission policy of `examples/deploy/admission` on a real API server:
//! only a coordinator (the reconciler) or the current owner, handing over,
//! may change a Camel K resource's `camel.apache.org/operator.id`; and an
//! operator identity creates, updates (status included) and deletes only the
//! resources it owns (label, else annotation), or unowned ones when it is the
//! `unownedHandler`. Each test binds the policy to its own namespace, with
//! identities of its own, so the other tests of the cluster are not affected.

use std::time::{Duration, Instant};

use crate::support::*;
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use camelk_reconciler::handoff::{Coordinator, HandoffOutcome};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

/// Binds the shipped policy to `ns`: `reconciler` coordinates, `operator-N`
/// owns what is labelled `operator-N`.
async fn enforce(cluster: &camelk_testkit::TestCluster, ns: &str) {
    camelk_testkit::admission::enforce_in(
        &cluster.admin().await,
        ns,
        &["reconciler"],
        &["operator-1", "operator-2"],
    )
    .await
    .expect("the policy is enforced");
}

/// A namespace of the test's own, with the reconciler's RBAC, where the
/// operators' identities write directly, as any operator (upstream included)
/// may.
async fn operators_namespace(
    cluster: &camelk_testkit::TestCluster,
    name: &str,
) -> camelk_testkit::TestNamespace {
    grant_rbac(cluster).await;
    let ns = cluster.namespace(name).await;
    cluster.grant_operators_in(&ns.name).await;
    ns
}

/// Lets the user `developer` do `verbs` on the Integrations of `ns`, by the
/// Role `role`.
async fn grant_developer(
    cluster: &camelk_testkit::TestCluster,
    ns: &str,
    role: &str,
    verbs: &[&str],
) {
    cluster
        .grant_in_namespace(
            ns,
            "developer",
            role,
            vec![PolicyRule {
                api_groups: Some(vec!["camel.apache.org".into()]),
                resources: Some(vec!["integrations".into()]),
                verbs: verbs.iter().map(|v| v.to_string()).collect(),
                ..Default::default()
            }],
        )
        .await;
}

/// Sets the owner label and annotation of Integration `name` as `client`;
/// `Err` holds the API server's refusal (code, message).
async fn set_owner(
    client: &kube::Client,
    ns: &str,
    name: &str,
    label: &str,
    annotation: &str,
) -> Result<(), (u16, String)> {
    let patch = json!({ "metadata": {
        "labels": { OPERATOR_ID_KEY: label },
        "annotations": { OPERATOR_ID_KEY: annotation },
    }});
    camel_api(client.clone(), CamelKind::Integration, ns)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|e| match e {
            kube::Error::Api(status) => (status.code, status.message),
            other => panic!("patching {name}: {other}"),
        })
}

fn refused(result: Result<(), (u16, String)>, expected: &str) {
    match result {
        Ok(()) => panic!("allowed; expected a refusal saying `{expected}`"),
        Err((code, message)) => {
            assert_eq!(code, 403, "{message}");
            assert!(message.contains(expected), "{message}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn only_a_coordinator_or_the_owner_handing_over_may_change_the_operator_id() {
    let cluster = camelk_testkit::shared();
    let ns = operators_namespace(cluster, "admission").await;
    let ns = ns.name.as_str();
    grant_developer(cluster, ns, "edit-integrations", &["get", "patch"]).await;
    let admin = cluster.admin().await;
    create_integration(&admin, ns, "orders", Some("operator-1")).await;
    enforce(cluster, ns).await;
    let as_user = |user: &'static str| cluster.client_as(user);

    // A person with edit rights, and the cluster admin, may not move it...
    let developer = as_user("developer").await;
    refused(
        set_owner(&developer, ns, "orders", "operator-2", "operator-2").await,
        "only a camelk coordinator or the current owner (operator-1) may change \
         camel.apache.org/operator.id; developer may not",
    );
    refused(
        set_owner(&admin, ns, "orders", "operator-2", "operator-2").await,
        "admin may not",
    );
    // ...but may edit everything else.
    camel_api(developer.clone(), CamelKind::Integration, ns)
        .patch(
            "orders",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": { "tier": "gold" } } })),
        )
        .await
        .expect("other labels stay editable");

    // Another operator may not take it.
    let op1 = as_user("operator-1").await;
    let op2 = as_user("operator-2").await;
    refused(
        set_owner(&op2, ns, "orders", "operator-2", "operator-2").await,
        "the current owner (operator-1)",
    );
    // The owner hands over with both keys in one write, not half of them.
    refused(
        set_owner(&op1, ns, "orders", "operator-2", "operator-1").await,
        "by setting label and annotation camel.apache.org/operator.id to the same new operator",
    );
    set_owner(&op1, ns, "orders", "operator-2", "operator-2")
        .await
        .expect("the owner hands over");
    // Having handed over, operator-1 is no owner any more.
    refused(
        set_owner(&op1, ns, "orders", "operator-1", "operator-1").await,
        "the current owner (operator-2)",
    );
    // The reconciler may set any owner, an unowned resource's too.
    let reconciler = as_user("reconciler").await;
    set_owner(&reconciler, ns, "orders", "operator-1", "operator-1")
        .await
        .expect("the coordinator moves it");
    create_integration(&admin, ns, "unowned", None).await;
    refused(
        set_owner(&developer, ns, "unowned", "operator-1", "operator-1").await,
        "the current owner (none)",
    );
    set_owner(&reconciler, ns, "unowned", "operator-1", "operator-1")
        .await
        .expect("the coordinator assigns it");

    // Membership of a coordinator group counts too: make the admins' group one.
    Api::<ConfigMap>::namespaced(admin.clone(), ns)
        .patch(
            camelk_testkit::admission::IDENTITIES,
            &PatchParams::default(),
            &Patch::Merge(
                json!({ "data": { "coordinatorGroups": "camelk:coordinators system:masters" } }),
            ),
        )
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while set_owner(&admin, ns, "orders", "operator-2", "operator-2")
        .await
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "a coordinator group member was still refused"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn operators_and_the_handoff_work_under_the_policy() {
    let cluster = camelk_testkit::shared();
    grant_rbac(cluster).await;
    let ns = cluster.namespace("admission-handoff").await;
    let ns = ns.name.as_str();
    enforce(cluster, ns).await;
    let admin = cluster.admin().await;
    let _op1 = start_operator(cluster, "operator-1", ns, "op1", "1s").await;
    let _op2 = start_operator(cluster, "operator-2", ns, "op2", "1s").await;
    for name in ["orders", "billing"] {
        create_integration(&admin, ns, name, Some("operator-1")).await;
        wait_running(&admin, ns, name, "operator-1", 60).await;
    }

    // operator-1 releases each by flipping both keys: the policy lets it.
    let mut coordinator = Coordinator::new(cluster.client_as("reconciler").await);
    let options = handoff_options("admission-e2e", ns, Duration::from_secs(60));
    let batch = integration_batch(ns, "operator-1", "operator-2", &["orders", "billing"]);
    let outcome = coordinator
        .execute(&batch, &options, &mut |_| {})
        .await
        .expect("the handoff runs");
    assert!(
        matches!(&outcome, HandoffOutcome::Completed { moved, .. } if moved.len() == 2),
        "{outcome:?}"
    );
    // operator-2 runs them: none of its writes is refused.
    for name in ["orders", "billing"] {
        wait_running(&admin, ns, name, "operator-2", 60).await;
    }
    assert_single_owner(cluster, ns);
}

// An operator writes only what it owns: every create, update (status
// included) and delete by an identity named in an `operator.<id>` key.

/// Binds the shipped policy to `ns` as [`enforce`] does, `unowned` (if any)
/// being the identities' `unownedHandler`.
async fn enforce_unowned(cluster: &camelk_testkit::TestCluster, ns: &str, unowned: Option<&str>) {
    camelk_testkit::admission::enforce_with_unowned_handler(
        &cluster.admin().await,
        ns,
        &["reconciler"],
        &["operator-1", "operator-2"],
        unowned,
    )
    .await
    .expect("the policy is enforced");
}

/// A `kind` object named `name` with the owner `label` and `annotation`
/// given (none where `None`).
fn camel_object(
    kind: CamelKind,
    name: &str,
    label: Option<&str>,
    annotation: Option<&str>,
) -> kube::api::DynamicObject {
    let mut meta =
        json!({ "name": name, "labels": { "app": name }, "annotations": { "team": "shop" } });
    if let Some(id) = label {
        meta["labels"][OPERATOR_ID_KEY] = json!(id);
    }
    if let Some(id) = annotation {
        meta["annotations"][OPERATOR_ID_KEY] = json!(id);
    }
    // The fields the upstream CRDs require.
    let spec = match kind {
        CamelKind::CamelCatalog => json!({
            "runtime": {
                "version": "3.15.3",
                "provider": "quarkus",
                "applicationClass": "io.quarkus.bootstrap.runner.QuarkusEntryPoint",
                "dependencies": [],
            },
            "artifacts": {},
            "loaders": {},
        }),
        _ => json!({}),
    };
    serde_json::from_value(json!({
        "apiVersion": kind.api_version(),
        "kind": kind.kind(),
        "metadata": meta,
        "spec": spec,
    }))
    .unwrap()
}

/// The API server's answer to a write: `Err` holds a refusal (code, message).
fn answer<T>(result: Result<T, kube::Error>, what: &str) -> Result<(), (u16, String)> {
    result.map(|_| ()).map_err(|e| match e {
        kube::Error::Api(status) => (status.code, status.message),
        other => panic!("{what}: {other}"),
    })
}

/// Creates the `kind` object `name` in `ns` as `client`, with the owner
/// `label` and `annotation` given ([`camel_object`]).
async fn create_as(
    client: &kube::Client,
    kind: CamelKind,
    ns: &str,
    name: &str,
    label: Option<&str>,
    annotation: Option<&str>,
) -> Result<(), (u16, String)> {
    answer(
        camel_api(client.clone(), kind, ns)
            .create(
                &kube::api::PostParams::default(),
                &camel_object(kind, name, label, annotation),
            )
            .await,
        "creating",
    )
}

/// Merge-patches `status.phase` of Integration `name` as `client`, the way an
/// upstream Camel K operator writes status: a merge patch on the status
/// subresource, computed from its cache, with no resourceVersion and no test.
async fn patch_status(
    client: &kube::Client,
    ns: &str,
    name: &str,
    phase: &str,
) -> Result<(), (u16, String)> {
    answer(
        camel_api(client.clone(), CamelKind::Integration, ns)
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": { "phase": phase } })),
            )
            .await,
        "patching the status",
    )
}

/// Adds label `key: value` to Integration `name` as `client`.
async fn patch_label(
    client: &kube::Client,
    ns: &str,
    name: &str,
    key: &str,
    value: &str,
) -> Result<(), (u16, String)> {
    answer(
        camel_api(client.clone(), CamelKind::Integration, ns)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "metadata": { "labels": { key: value } } })),
            )
            .await,
        "patching a label",
    )
}

async fn phase_of(client: &kube::Client, ns: &str, name: &str) -> Option<String> {
    let obj = camel_api(client.clone(), CamelKind::Integration, ns)
        .get(name)
        .await
        .unwrap();
    obj.data["status"]["phase"].as_str().map(str::to_string)
}

/// The words of the refusal of `operator`'s `write` (`update
/// integrations/status orders`) of a resource owned by `owner`.
fn not_its_own(operator: &str, write: &str, owner: &str) -> String {
    format!(
        "operator {operator} ({operator}) may not {write}: its owner is {owner}, \
         and an operator writes only the Camel K resources it owns"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn an_operator_writes_the_status_only_of_what_it_owns() {
    let cluster = camelk_testkit::shared();
    let ns = operators_namespace(cluster, "admission-status").await;
    let ns = ns.name.as_str();
    grant_developer(cluster, ns, "edit-integrations", &["get", "patch"]).await;
    let admin = cluster.admin().await;
    let it = CamelKind::Integration;
    // As `kamel` creates them: the annotation only.
    create_as(&admin, it, ns, "by-annotation", None, Some("operator-1"))
        .await
        .unwrap();
    create_as(
        &admin,
        it,
        ns,
        "by-label",
        Some("operator-1"),
        Some("operator-1"),
    )
    .await
    .unwrap();
    // Label and annotation disagree: the annotation, which upstream obeys, wins.
    create_as(
        &admin,
        it,
        ns,
        "disagreeing",
        Some("operator-2"),
        Some("operator-1"),
    )
    .await
    .unwrap();
    create_as(&admin, it, ns, "unowned", None, None)
        .await
        .unwrap();
    enforce(cluster, ns).await;
    let op1 = cluster.client_as("operator-1").await;
    let op2 = cluster.client_as("operator-2").await;

    for name in ["by-annotation", "by-label"] {
        refused(
            patch_status(&op2, ns, name, "Error").await,
            &not_its_own(
                "operator-2",
                &format!("update integrations/status {name}"),
                "operator-1",
            ),
        );
        // Nor anything else of it.
        refused(
            patch_label(&op2, ns, name, "tier", "gold").await,
            &not_its_own(
                "operator-2",
                &format!("update integrations {name}"),
                "operator-1",
            ),
        );
        patch_status(&op1, ns, name, "Running")
            .await
            .unwrap_or_else(|e| panic!("the owner writes the status of {name}: {e:?}"));
        assert_eq!(phase_of(&admin, ns, name).await.as_deref(), Some("Running"));
    }
    refused(
        patch_status(&op2, ns, "disagreeing", "Error").await,
        &not_its_own(
            "operator-2",
            "update integrations/status disagreeing",
            "operator-1",
        ),
    );
    patch_status(&op1, ns, "disagreeing", "Running")
        .await
        .expect("the annotation's operator writes");
    // No unownedHandler is configured here: no operator writes what has no owner.
    refused(
        patch_status(&op1, ns, "unowned", "Running").await,
        "operator operator-1 (operator-1) may not update integrations/status unowned: \
         it has no owner, and only the unownedHandler (none configured) writes",
    );

    // Other identities are not concerned: a developer's and the admin's
    // edits pass, the reconciler's too.
    patch_label(
        &cluster.client_as("developer").await,
        ns,
        "by-label",
        "tier",
        "gold",
    )
    .await
    .expect("a developer edits a label");
    patch_status(&admin, ns, "by-label", "Error")
        .await
        .expect("the admin edits the status");
    patch_status(&admin, ns, "unowned", "Error")
        .await
        .expect("the admin edits an unowned status");
    // The owner still hands over, both keys in one write; then it is the
    // new owner's to write, and no more the old one's.
    set_owner(&op1, ns, "by-label", "operator-2", "operator-2")
        .await
        .expect("the owner hands over");
    refused(
        patch_status(&op1, ns, "by-label", "Running").await,
        &not_its_own(
            "operator-1",
            "update integrations/status by-label",
            "operator-2",
        ),
    );
    patch_status(&op2, ns, "by-label", "Running")
        .await
        .expect("the new owner writes");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_late_unfenced_write_after_a_flip_is_refused() {
    let cluster = camelk_testkit::shared();
    let ns = operators_namespace(cluster, "admission-late").await;
    let ns = ns.name.as_str();
    let admin = cluster.admin().await;
    create_integration(&admin, ns, "orders", Some("operator-1")).await;
    enforce(cluster, ns).await;
    let op1 = cluster.client_as("operator-1").await;
    let op2 = cluster.client_as("operator-2").await;
    patch_status(&op1, ns, "orders", "Building Kit")
        .await
        .expect("the owner writes");

    // operator-1's cache still holds the old copy when the coordinator flips
    // both keys, as the reconciler releases for an upstream operator.
    let cached = camel_api(op1.clone(), CamelKind::Integration, ns)
        .get("orders")
        .await
        .unwrap();
    assert_eq!(owner(&cached).as_deref(), Some("operator-1"));
    set_owner(
        &cluster.client_as("reconciler").await,
        ns,
        "orders",
        "operator-2",
        "operator-2",
    )
    .await
    .expect("the coordinator flips the owner");

    // operator-1's late write, decided on that cache, unfenced: refused.
    refused(
        patch_status(&op1, ns, "orders", "Error").await,
        &not_its_own(
            "operator-1",
            "update integrations/status orders",
            "operator-2",
        ),
    );
    patch_status(&op2, ns, "orders", "Initialization")
        .await
        .expect("the new owner writes");
    assert_eq!(
        phase_of(&admin, ns, "orders").await.as_deref(),
        Some("Initialization")
    );
    // The audit log agrees: no write by an operator that did not own the resource.
    assert_single_owner(cluster, ns);
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_unowned_handler_writes_unowned_resources() {
    let cluster = camelk_testkit::shared();
    let ns = operators_namespace(cluster, "admission-unowned").await;
    let ns = ns.name.as_str();
    let admin = cluster.admin().await;
    let it = CamelKind::Integration;
    create_as(&admin, it, ns, "unowned", None, None)
        .await
        .unwrap();
    enforce_unowned(cluster, ns, Some("operator-1")).await;
    let op1 = cluster.client_as("operator-1").await;
    let op2 = cluster.client_as("operator-2").await;

    patch_status(&op1, ns, "unowned", "Running")
        .await
        .expect("the unowned handler writes");
    refused(
        patch_status(&op2, ns, "unowned", "Error").await,
        "operator operator-2 (operator-2) may not update integrations/status unowned: \
         it has no owner, and only the unownedHandler (operator-1) writes",
    );
    // Creates follow the same rule: the handler creates unowned kits...
    let kit = CamelKind::IntegrationKit;
    create_as(&op1, kit, ns, "kit-unowned-1", None, None)
        .await
        .expect("the unowned handler creates an unowned kit");
    refused(
        create_as(&op2, kit, ns, "kit-unowned-2", None, None).await,
        "operator operator-2 (operator-2) may not create integrationkits kit-unowned-2: \
         it has no owner",
    );
    // ...but handling unowned resources gives no right to set an owner.
    refused(
        set_owner(&op1, ns, "unowned", "operator-1", "operator-1").await,
        "the current owner (none)",
    );
    assert_eq!(
        phase_of(&admin, ns, "unowned").await.as_deref(),
        Some("Running")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_operator_creates_and_deletes_only_what_it_owns() {
    let cluster = camelk_testkit::shared();
    let ns = operators_namespace(cluster, "admission-create").await;
    let ns = ns.name.as_str();
    // Upstream operators delete the kits and builds they own: grant the
    // delete the testkit's operator role lacks, and a developer's create.
    let delete = |resources: &[&str]| {
        vec![PolicyRule {
            api_groups: Some(vec!["camel.apache.org".into()]),
            resources: Some(resources.iter().map(|r| r.to_string()).collect()),
            verbs: vec!["delete".into()],
            ..Default::default()
        }]
    };
    for op in ["operator-1", "operator-2"] {
        cluster
            .grant_in_namespace(
                ns,
                op,
                &format!("{op}-delete"),
                delete(&["integrationkits", "builds"]),
            )
            .await;
    }
    grant_developer(cluster, ns, "create-integrations", &["create"]).await;
    enforce(cluster, ns).await;
    let op1 = cluster.client_as("operator-1").await;
    let op2 = cluster.client_as("operator-2").await;
    let (kit, build, catalog, it) = (
        CamelKind::IntegrationKit,
        CamelKind::Build,
        CamelKind::CamelCatalog,
        CamelKind::Integration,
    );

    // As upstream operator-1 creates its kits, builds and catalogs: annotated
    // with its own id; and a Pipe's Integration with the Pipe's id, both keys.
    create_as(&op1, kit, ns, "kit-1", None, Some("operator-1"))
        .await
        .expect("operator-1 creates its kit");
    create_as(&op1, build, ns, "build-1", None, Some("operator-1"))
        .await
        .expect("operator-1 creates its build");
    create_as(&op1, catalog, ns, "catalog-1", None, Some("operator-1"))
        .await
        .expect("operator-1 creates its catalog");
    create_as(
        &op1,
        it,
        ns,
        "pipe-1",
        Some("operator-1"),
        Some("operator-1"),
    )
    .await
    .expect("operator-1 creates its Pipe's Integration");
    // Owned by another operator, or by nobody (no unownedHandler here): refused.
    refused(
        create_as(&op1, kit, ns, "kit-2", None, Some("operator-2")).await,
        &not_its_own("operator-1", "create integrationkits kit-2", "operator-2"),
    );
    refused(
        // Disagreeing keys: the annotation, which upstream obeys, owns.
        create_as(
            &op1,
            it,
            ns,
            "pipe-2",
            Some("operator-1"),
            Some("operator-2"),
        )
        .await,
        &not_its_own("operator-1", "create integrations pipe-2", "operator-2"),
    );
    refused(
        create_as(&op1, kit, ns, "kit-none", None, None).await,
        "it has no owner, and only the unownedHandler (none configured) writes",
    );
    // A user still picks any owner when creating.
    create_as(
        &cluster.client_as("developer").await,
        it,
        ns,
        "picked",
        Some("operator-2"),
        Some("operator-2"),
    )
    .await
    .expect("a user creates a resource for operator-2");

    // Deleting a resource is writing it: only its owner may.
    let kits = camel_api(op2.clone(), kit, ns);
    refused(
        answer(kits.delete("kit-1", &Default::default()).await, "deleting"),
        &not_its_own("operator-2", "delete integrationkits kit-1", "operator-1"),
    );
    let builds = camel_api(op1.clone(), build, ns);
    answer(
        builds.delete("build-1", &Default::default()).await,
        "deleting",
    )
    .expect("operator-1 deletes its build");
    answer(
        camel_api(op1.clone(), kit, ns)
            .delete("kit-1", &Default::default())
            .await,
        "deleting",
    )
    .expect("operator-1 deletes its kit");
}

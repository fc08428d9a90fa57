//! Real Flux applying a Camel K Integration from Git, with real parts only:
//! a Git repository served over smart HTTP behind Basic authentication
//! ([`AppsRepo`]), source-controller and kustomize-controller of the
//! pinned release running as processes under their own ServiceAccount
//! identities ([`camelk_testkit::flux`]), and the pinned upstream Camel K CRDs.
//!
//! It records what Flux does to an owner key: kustomize-controller creates
//! the Integration by server-side apply (a `patch` answered 201), each apply
//! after a dry run of the object and with `force=true`, so it takes over any
//! field another manager holds; it owns the `operator.id` annotation in
//! `managedFields` under its own name (`kustomize-controller`, `Apply`), and
//! the audit log names its ServiceAccount as the writer. A later commit
//! reaches the cluster when a reconcile is requested, as `flux reconcile`
//! requests it.

use std::time::Duration;

use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use camelk_testkit::AuditEvent;
use camelk_testkit::apps_repo::{AppsRepo, BRANCH, GIT_PASSWORD, GIT_USER};
use camelk_testkit::flux::{
    self, FluxKind, GitRepositorySpec, KUSTOMIZE_CONTROLLER, KustomizationSpec,
};
use kube::api::{Api, DynamicObject};
use kube::{Client, ResourceExt};

/// Flux's objects in the test namespace, all named after the folder they apply.
const APPS: &str = "apps";
const INTEGRATION: &str = "hello";
const VERSION_LABEL: &str = "app.kubernetes.io/version";
/// Longer than the test: after the first reconcile, only a requested one runs.
const INTERVAL: Duration = Duration::from_secs(3600);

fn integrations(client: Client, ns: &str) -> Api<DynamicObject> {
    camelk_testkit::scenario::camel_api(client, CamelKind::Integration, ns)
}

/// The Integration as a user commits it: owned by operator-1, with a
/// prebuilt image (nothing to build), no namespace (the Kustomization's
/// `targetNamespace` sets it).
fn integration_manifest(version: &str) -> String {
    format!(
        "apiVersion: camel.apache.org/v1
kind: Integration
metadata:
  name: {INTEGRATION}
  annotations:
    {OPERATOR_ID_KEY}: operator-1
  labels:
    {VERSION_LABEL}: \"{version}\"
spec:
  traits:
    container:
      image: docker.io/library/camelk-flux-smoke:{version}
"
    )
}

/// The (manager, operation) pairs whose `managedFields` entry holds the
/// field at `path` (`["f:metadata", "f:annotations", "f:<key>"]`).
fn managers_of(object: &DynamicObject, path: &[&str]) -> Vec<(String, String)> {
    object
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|entry| {
            entry.fields_v1.as_ref().is_some_and(|fields| {
                path.iter()
                    .try_fold(&fields.0, |node, key| node.get(key))
                    .is_some()
            })
        })
        .map(|entry| {
            (
                entry.manager.clone().unwrap_or_default(),
                entry.operation.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// The answered requests to the Integration that changed something or
/// would have (dry runs), oldest first.
fn writes_to_integration(cluster: &camelk_testkit::TestCluster, ns: &str) -> Vec<AuditEvent> {
    cluster
        .audit_log()
        .events_in(ns)
        .expect("the audit log")
        .into_iter()
        .filter(|e| {
            e.stage == "ResponseComplete"
                && e.resource() == Some("integrations")
                && e.object_ref.as_ref().and_then(|o| o.name.as_deref()) == Some(INTEGRATION)
                && matches!(e.verb.as_str(), "create" | "update" | "patch" | "delete")
        })
        .collect()
}

fn describe(events: &[AuditEvent]) -> String {
    events
        .iter()
        .map(|e| {
            format!(
                "{} {} by {} -> {:?}{}",
                e.verb,
                e.request_uri,
                e.user.username,
                e.code(),
                if e.is_dry_run() { " (dry run)" } else { "" }
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Flux dry-runs an object before each apply, and applies with `force`:
/// it takes over any field another manager holds with another value.
fn assert_dry_run_then_forced_apply(writes: &[AuditEvent]) {
    let mut dry_run_since_last_apply = false;
    for write in writes {
        assert!(
            write.request_uri.contains("force=true"),
            "Flux forces its applies:\n{}",
            describe(writes)
        );
        if write.is_dry_run() {
            dry_run_since_last_apply = true;
        } else {
            assert!(
                dry_run_since_last_apply,
                "a dry run before each apply:\n{}",
                describe(writes)
            );
            dry_run_since_last_apply = false;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_applies_an_integration_from_git_as_its_service_account() {
    let cluster = camelk_testkit::shared();
    let ns = cluster.namespace("flux").await;
    let flux = flux::start_watching(cluster.dir(), &ns.name).await;

    let repo = AppsRepo::new();
    let first = repo.commit(
        &[("apps/hello.yaml", &integration_manifest("1"))],
        "hello, version 1",
    );
    flux.create_basic_auth_secret(&ns.name, "git-credentials", GIT_USER, GIT_PASSWORD)
        .await
        .unwrap();
    let repository = GitRepositorySpec::new(APPS, &repo.url())
        .branch(BRANCH)
        .secret_ref("git-credentials")
        .interval(INTERVAL);
    flux.create_git_repository(&ns.name, &repository)
        .await
        .unwrap();
    let kustomization = KustomizationSpec::new(APPS, APPS, "./apps")
        .target_namespace(&ns.name)
        .interval(INTERVAL);
    flux.create_kustomization(&ns.name, &kustomization)
        .await
        .unwrap();

    flux.wait_commit_applied(&ns.name, APPS, &first, Duration::from_secs(120))
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    let api = integrations(cluster.admin().await, &ns.name);
    let hello = api.get(INTEGRATION).await.expect("Flux created it");
    assert_eq!(
        hello.annotations().get(OPERATOR_ID_KEY).map(String::as_str),
        Some("operator-1")
    );
    // Flux labels what it applies with the Kustomization that applied it.
    assert_eq!(
        hello
            .labels()
            .get("kustomize.toolkit.fluxcd.io/name")
            .map(String::as_str),
        Some(APPS)
    );
    let owner_key = [
        "f:metadata",
        "f:annotations",
        &format!("f:{OPERATOR_ID_KEY}"),
    ];
    assert_eq!(
        managers_of(&hello, &owner_key),
        [(KUSTOMIZE_CONTROLLER.to_string(), "Apply".to_string())],
        "the owner key's only manager: {:#?}",
        hello.metadata.managed_fields
    );

    let flux_user = flux::service_account_user(KUSTOMIZE_CONTROLLER);
    let writes = writes_to_integration(cluster, &ns.name);
    assert!(
        writes.iter().all(|e| e.user.username == flux_user),
        "only {flux_user} writes to it:\n{}",
        describe(&writes)
    );
    let stored: Vec<&AuditEvent> = writes.iter().filter(|e| e.is_successful_write()).collect();
    let created = stored
        .first()
        .unwrap_or_else(|| panic!("no stored write to the Integration:\n{}", describe(&writes)));
    // Server-side apply creates with a PATCH: the audit log says `patch`, 201.
    assert_eq!(
        (created.verb.as_str(), created.code()),
        ("patch", Some(201)),
        "the first stored write created it:\n{}",
        describe(&writes)
    );
    assert_eq!(created.user.username, flux_user);
    assert_eq!(stored.len(), 1, "one stored write:\n{}", describe(&writes));
    assert_dry_run_then_forced_apply(&writes);

    let second = repo.commit(
        &[("apps/hello.yaml", &integration_manifest("2"))],
        "hello, version 2",
    );
    for kind in [FluxKind::GitRepository, FluxKind::Kustomization] {
        flux.request_reconcile(kind, &ns.name, APPS)
            .await
            .unwrap_or_else(|e| panic!("requesting a reconcile of {kind:?}: {e}"));
    }
    flux.wait_commit_applied(&ns.name, APPS, &second, Duration::from_secs(90))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let hello = api.get(INTEGRATION).await.unwrap();
    assert_eq!(
        hello.labels().get(VERSION_LABEL).map(String::as_str),
        Some("2")
    );
    let writes = writes_to_integration(cluster, &ns.name);
    assert!(
        writes.iter().all(|e| e.user.username == flux_user),
        "only {flux_user} writes to it:\n{}",
        describe(&writes)
    );
    assert_dry_run_then_forced_apply(&writes);

    // While Flux still runs, so that it removes its finalizers; with `prune`,
    // deleting the Kustomization deletes what it applied.
    for kind in [FluxKind::Kustomization, FluxKind::GitRepository] {
        flux.delete(kind, &ns.name, APPS, Duration::from_secs(60))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    assert!(
        api.get_opt(INTEGRATION).await.unwrap().is_none(),
        "pruned with its Kustomization"
    );
}

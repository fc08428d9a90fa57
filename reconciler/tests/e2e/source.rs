//! End-to-end tests of the sync's sources with real parts: Git over HTTP
//! (`git http-backend` behind Basic authentication on loopback) with a token
//! from a file or from a Secret on the real control plane, and the
//! `OperatorAssignment` object itself as the source (`--source cluster`),
//! with real `reconciler operator` and `reconciler sync` processes.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::support::*;
use camelk_reconciler::api::OperatorAssignmentStatus;
use camelk_reconciler::camel_k::CamelKind;
use camelk_reconciler::source::SecretRef;
use camelk_reconciler::source::{CredentialConfig, GitSource, SourceError};
use camelk_testkit::TestCluster;
use camelk_testkit::git_http::GitHttpServer;
use camelk_testkit::manifest::{Assignment, Rollout};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

const NAME: &str = "camel-k";

/// A manifest for operator-1 and operator-2 locked in `ns`, Integrations of
/// `ns` in scope, operator-1 by default, and `pins` (name, operator).
fn manifest(ns: &str, pins: &[(&str, &str)]) -> String {
    pins.iter()
        .fold(two_operators(NAME, ns, None), |assignment, (name, op)| {
            assignment.pin(CamelKind::Integration, ns, name, op)
        })
        .rollout(Rollout::new().gate_timeout("90s"))
        .drain_timeout("2m")
        .render()
}

/// What the reconciler needs beyond the coordinator role, in `ns` only:
/// the revision snapshots of the cluster source, and the credentials Secret.
async fn grant_source_access(cluster: &TestCluster, ns: &str) {
    let rule = |resource: &str, verbs: &[&str]| PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec![resource.into()]),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    };
    let rules = vec![
        rule("configmaps", &["get", "create", "update"]),
        rule("secrets", &["get"]),
    ];
    cluster
        .grant_in_namespace(ns, "reconciler", "camelk-sync-source", rules)
        .await;
}

/// Starts `reconciler sync` as the `reconciler` identity with `args` (the
/// source) and `env`, its object and lock in `ns`.
fn start_sync_process(
    cluster: &TestCluster,
    ns: &str,
    identity: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> OperatorProcess {
    spawn_sync(ns, identity, &cluster.kubeconfig(), args, &[], env)
}

fn condition<'a>(s: &'a OperatorAssignmentStatus, type_: &str) -> Option<(&'a str, &'a str)> {
    s.conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.reason.as_str(), c.message.as_str()))
}

/// The whole error, its sources included, as a person would see it.
fn chain(error: &SourceError) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(e) = source {
        text.push_str(&format!(": {e}"));
        source = e.source();
    }
    text
}

/// A source following `main` of `server`'s `remote.git` with `credentials`,
/// its clone cached in `cache`.
fn branch_of(server: &GitHttpServer, cache: &Path, credentials: CredentialConfig) -> GitSource {
    GitSource::new(
        &server.url("remote.git"),
        "main",
        "operator-assignment.yaml",
        cache,
    )
    .with_credentials(credentials)
}

// --- Git over HTTPS-style Basic auth -------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn a_token_file_authenticates_the_fetch_and_a_wrong_token_fails_without_appearing() {
    let git = GitRemote::new();
    let rev = git.push(&manifest("shop", &[]), "first");
    let server = GitHttpServer::start(git.dir.path(), "x-access-token", "right-token-4821");
    let token_file = git.dir.path().join("token");
    std::fs::write(&token_file, "right-token-4821\n").unwrap();
    let mut source = branch_of(
        &server,
        &git.cache("http"),
        CredentialConfig {
            token_file: Some(token_file.clone()),
            ..Default::default()
        },
    );

    let fetched = source.fetch().await.expect("fetch with the right token");
    assert_eq!(fetched.sha, rev);

    // The token file is read at every fetch: a wrong one now fails.
    std::fs::write(&token_file, "wrong-token-7315").unwrap();
    let refused_before = server.refused();
    let error = source.fetch().await.expect_err("a wrong token must fail");
    let text = chain(&error);
    assert!(matches!(error, SourceError::Fetch { .. }), "{text}");
    assert!(
        server.refused() > refused_before,
        "the server saw no refused request"
    );
    assert!(
        !text.contains("wrong-token") && !text.contains("right-token"),
        "a token leaked into the error: {text}"
    );
    assert!(
        text.contains("fetching branch `main` from http://127.0.0.1:"),
        "{text}"
    );

    // And the right one again, with an explicit username.
    std::fs::write(&token_file, "right-token-4821").unwrap();
    let mut source = branch_of(
        &server,
        &git.cache("http"),
        CredentialConfig {
            token_file: Some(token_file),
            username: Some("x-access-token".into()),
            ..Default::default()
        },
    );
    assert_eq!(source.fetch().await.unwrap().sha, rev);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_credentials_secret_is_read_at_each_fetch_so_a_rotation_takes_effect() {
    let cluster = camelk_testkit::shared();
    let ns = cluster.namespace("source-secret").await;
    let admin = cluster.admin().await;
    let git = GitRemote::new();
    let rev = git.push(&manifest(&ns.name, &[]), "first");
    let server = GitHttpServer::start(git.dir.path(), "bot", "token-one-1111");
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), &ns.name);
    let secret = |token: &str| Secret {
        metadata: ObjectMeta {
            name: Some("git-auth".into()),
            ..Default::default()
        },
        string_data: Some(BTreeMap::from([
            ("username".to_string(), "bot".to_string()),
            ("token".to_string(), token.to_string()),
        ])),
        ..Default::default()
    };
    secrets
        .create(&PostParams::default(), &secret("token-one-1111"))
        .await
        .unwrap();
    let mut source = branch_of(
        &server,
        &git.cache("secret"),
        CredentialConfig {
            secret: Some(SecretRef {
                client: admin.clone(),
                namespace: ns.name.clone(),
                name: "git-auth".into(),
            }),
            ..Default::default()
        },
    );
    assert_eq!(source.fetch().await.expect("first token").sha, rev);

    // The host rotates the token; the Secret still has the old one.
    server.set_password("token-two-2222");
    let error = source.fetch().await.expect_err("the old token is refused");
    let text = chain(&error);
    assert!(
        !text.contains("token-one") && !text.contains("token-two"),
        "a token leaked: {text}"
    );

    // The Secret is updated: the very next fetch uses it.
    secrets
        .replace(
            "git-auth",
            &PostParams::default(),
            &secret("token-two-2222"),
        )
        .await
        .unwrap();
    assert_eq!(source.fetch().await.expect("rotated token").sha, rev);

    // A Secret that does not exist is an error naming it, not a panic.
    let mut missing = branch_of(
        &server,
        &git.cache("missing"),
        CredentialConfig {
            secret: Some(SecretRef {
                client: admin,
                namespace: ns.name.clone(),
                name: "nope".into(),
            }),
            ..Default::default()
        },
    );
    let error = missing.fetch().await.unwrap_err();
    assert!(
        matches!(error, SourceError::CredentialSecret { .. })
            && error.to_string().contains(&format!("{}/nope", ns.name)),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn reconciler_sync_with_credentials_secret_reports_fetch_failed_then_recovers_on_rotation() {
    let cluster = camelk_testkit::shared();
    let ns = cluster.namespace("source-sync-secret").await;
    grant_rbac(cluster).await;
    cluster.grant_sync_namespace(&ns.name).await;
    install_assignment_crd(cluster).await;
    grant_source_access(cluster, &ns.name).await;
    let admin = cluster.admin().await;
    let git = GitRemote::new();
    let rev1 = git.push(&manifest(&ns.name, &[]), "first");
    let server = GitHttpServer::start(git.dir.path(), "x-access-token", "alpha-token-9911");
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), &ns.name);
    let secret = |token: &str| Secret {
        metadata: ObjectMeta {
            name: Some("git-auth".into()),
            ..Default::default()
        },
        string_data: Some(BTreeMap::from([("token".to_string(), token.to_string())])),
        ..Default::default()
    };
    secrets
        .create(&PostParams::default(), &secret("alpha-token-9911"))
        .await
        .unwrap();
    let secret_ref = format!("{}/git-auth", ns.name);
    let cache = git.cache("sync");
    let sync = start_sync_process(
        cluster,
        &ns.name,
        "sync-secret",
        &[
            &git_source_flags(&server.url("remote.git"), &cache)[..],
            &["--credentials-secret", &secret_ref],
        ]
        .concat(),
        &[],
    );
    let assignment = SyncedAssignment::new(&admin, &ns.name, NAME, &sync);
    assignment.wait(60, "applied", applied(&rev1)).await;

    server.set_password("beta-token-5523");
    let failed = assignment
        .wait(30, "FetchFailed", |s| {
            condition(s, "Ready").is_some_and(|(reason, _)| reason == "FetchFailed")
        })
        .await;
    let (_, message) = condition(&failed, "Ready").unwrap();
    assert!(
        !message.contains("alpha-token") && !message.contains("beta-token"),
        "a token leaked into status: {message}"
    );
    assert_eq!(failed.last_applied_revision.as_deref(), Some(rev1.as_str()));

    let rev2 = git.push(&manifest(&ns.name, &[("it-x", "operator-2")]), "second");
    secrets
        .replace(
            "git-auth",
            &PostParams::default(),
            &secret("beta-token-5523"),
        )
        .await
        .unwrap();
    assignment
        .wait(60, "applied after the rotation", applied(&rev2))
        .await;
    let log = std::fs::read_to_string(&sync.log).unwrap_or_default();
    assert!(
        !log.contains("alpha-token") && !log.contains("beta-token"),
        "a token leaked into the log"
    );
}

// --- Git over HTTPS with a private CA ------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn a_git_host_with_a_private_ca_is_followed_once_ssl_cert_file_names_that_ca() {
    let cluster = camelk_testkit::shared();
    let ns = cluster.namespace("source-tls").await;
    grant_rbac(cluster).await;
    cluster.grant_sync_namespace(&ns.name).await;
    install_assignment_crd(cluster).await;
    let admin = cluster.admin().await;
    let git = GitRemote::new();
    let rev = git.push(&manifest(&ns.name, &[]), "first");
    let server = GitHttpServer::start_tls(git.dir.path(), "x-access-token", "tls-token-6102");
    let token_file = git.dir.path().join("token");
    std::fs::write(&token_file, "tls-token-6102").unwrap();

    // Trusting only the system's CAs, the fetch stops at the certificate,
    // before any credential is sent, and says how to trust the CA.
    let mut source = branch_of(
        &server,
        &git.cache("untrusted"),
        CredentialConfig {
            token_file: Some(token_file.clone()),
            ..Default::default()
        },
    );
    let error = source.fetch().await.expect_err("an unknown CA must fail");
    let text = chain(&error);
    assert!(
        matches!(error, SourceError::UntrustedCertificate { .. }),
        "{text}"
    );
    assert!(
        text.contains("the remote's TLS certificate is not trusted here")
            && text.contains("SSL_CERT_FILE"),
        "{text}"
    );
    assert_eq!(server.refused(), 0, "no request reached the server");

    // `reconciler sync` with SSL_CERT_FILE naming the CA (a mounted PEM file).
    let ca = git.dir.path().join("git-ca.pem");
    std::fs::write(&ca, server.ca_cert().unwrap()).unwrap();
    let cache = git.cache("sync");
    let sync = start_sync_process(
        cluster,
        &ns.name,
        "sync-tls",
        &[
            &git_source_flags(&server.url("remote.git"), &cache)[..],
            &["--token-file", token_file.to_str().unwrap()],
        ]
        .concat(),
        &[("SSL_CERT_FILE", ca.to_str().unwrap())],
    );
    let assignment = SyncedAssignment::new(&admin, &ns.name, NAME, &sync);
    assignment.wait(60, "applied", applied(&rev)).await;
}

// --- The OperatorAssignment object as the source -------------------------

#[tokio::test(flavor = "multi_thread")]
async fn the_in_cluster_object_is_the_source_of_moves_and_is_never_applied() {
    let cluster = camelk_testkit::shared();
    let ns = cluster.namespace("source-cluster").await;
    grant_rbac(cluster).await;
    cluster.grant_sync_namespace(&ns.name).await;
    install_assignment_crd(cluster).await;
    grant_source_access(cluster, &ns.name).await;
    let admin = cluster.admin().await;
    let _op1 = start_operator(cluster, "operator-1", &ns.name, "op1", "1s").await;
    let _op2 = start_operator(cluster, "operator-2", &ns.name, "op2", "1s").await;
    let names = ["it-00", "it-01", "it-02"];
    for name in names {
        create_integration(&admin, &ns.name, name, Some("operator-1")).await;
    }
    for name in names {
        wait_running(&admin, &ns.name, name, "operator-1", 90).await;
    }

    // Argo CD (here: the admin) applies the object; the reconciler follows it.
    let assignments: Api<camelk_reconciler::api::OperatorAssignment> =
        Api::namespaced(admin.clone(), &ns.name);
    let object: camelk_reconciler::api::OperatorAssignment =
        serde_saphyr::from_str(&manifest(&ns.name, &[("it-00", "operator-2")])).unwrap();
    assignments
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    let sync = start_sync_process(
        cluster,
        &ns.name,
        "sync-cluster",
        &["--source", "cluster", "--name", NAME],
        &[],
    );
    let assignment = SyncedAssignment::new(&admin, &ns.name, NAME, &sync);
    assignment
        .wait(120, "generation-1 applied", applied("generation-1"))
        .await;
    wait_running(&admin, &ns.name, "it-00", "operator-2", 90).await;

    // A spec change is a new revision, planned against the last applied one
    // (read back from the snapshot ConfigMap).
    let pin = |name: &str, op: &str| json!({ "kind": "Integration", "namespace": ns.name, "name": name, "operator": op });
    assignments
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "pins": [
                pin("it-00", "operator-2"), pin("it-01", "operator-2")
            ] } })),
        )
        .await
        .unwrap();
    let status = assignment
        .wait(120, "generation-2 applied", applied("generation-2"))
        .await;
    assert_eq!(
        status.history.first().map(|h| h.moves),
        Some(1),
        "{status:#?}"
    );
    wait_running(&admin, &ns.name, "it-01", "operator-2", 90).await;
    let snapshots = Api::<ConfigMap>::namespaced(admin.clone(), &ns.name)
        .get(&format!("{NAME}-revisions"))
        .await
        .unwrap();
    let keys: Vec<&String> = snapshots.data.as_ref().unwrap().keys().collect();
    assert_eq!(keys, ["generation-1", "generation-2"]);
    let owner_ref = &snapshots.metadata.owner_references.as_ref().unwrap()[0];
    let live = assignments.get(NAME).await.unwrap();
    assert_eq!(
        (owner_ref.kind.as_str(), Some(&owner_ref.uid)),
        ("OperatorAssignment", live.metadata.uid.as_ref())
    );

    // An invalid object (the CRD schema lets an unknown operator through):
    // nothing moves, status names the error at its position.
    assignments
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "pins": [
                pin("it-00", "operator-2"), pin("it-01", "operator-2"), pin("it-02", "operator-9")
            ] } })),
        )
        .await
        .unwrap();
    let status = assignment
        .wait(60, "generation-3 rejected", |s| {
            s.last_attempted_revision.as_deref() == Some("generation-3")
        })
        .await;
    let (reason, message) = condition(&status, "Ready").unwrap();
    assert_eq!(reason, "ValidationFailed", "{message}");
    assert!(
        message.contains(&format!("OperatorAssignment/{}/{NAME}:", ns.name))
            && message.contains("operator-9"),
        "{message}"
    );
    assert_eq!(
        status.last_applied_revision.as_deref(),
        Some("generation-2")
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let it02 = camel_api(admin.clone(), CamelKind::Integration, &ns.name)
        .get("it-02")
        .await
        .unwrap();
    assert_eq!(owner(&it02).as_deref(), Some("operator-1"));

    // The reconciler never wrote the object itself, only its status.
    let writes: Vec<String> = cluster
        .audit_log()
        .events_by(&ns.name, "reconciler")
        .unwrap()
        .into_iter()
        .filter(|e| {
            e.is_successful_write()
                && e.resource() == Some("operatorassignments")
                && !e.request_uri.contains("/status")
        })
        .map(|e| format!("{} {}", e.verb, e.request_uri))
        .collect();
    assert!(
        writes.is_empty(),
        "the reconciler wrote the object: {writes:?}"
    );
    assert_single_owner(cluster, &ns.name);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cluster_source_keeps_earlier_specs_bounded_and_per_object() {
    use camelk_reconciler::source::ClusterSource;
    use camelk_reconciler::source::KEEP;
    let cluster = camelk_testkit::shared();
    let ns = cluster.namespace("source-snapshots").await;
    install_assignment_crd(cluster).await;
    let admin = cluster.admin().await;
    let assignments: Api<camelk_reconciler::api::OperatorAssignment> =
        Api::namespaced(admin.clone(), &ns.name);
    let object: camelk_reconciler::api::OperatorAssignment =
        serde_saphyr::from_str(&manifest(&ns.name, &[])).unwrap();
    assignments
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    let mut source = ClusterSource::new(admin.clone(), &ns.name, NAME);
    let first = source.fetch().await.unwrap();
    assert_eq!(first.sha, "generation-1");
    assert_eq!(first.file, format!("OperatorAssignment/{}/{NAME}", ns.name));
    // Fetching again without a change writes nothing new and reads the same.
    assert_eq!(source.fetch().await.unwrap(), first);

    // The sync records generation-1 as applied; many spec changes follow.
    assignments
        .patch_status(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "lastAppliedRevision": "generation-1" } })),
        )
        .await
        .unwrap();
    let mut last = first.clone();
    for i in 0..KEEP + 2 {
        assignments
            .patch(
                NAME,
                &PatchParams::default(),
                &Patch::Merge(
                    json!({ "spec": { "handoff": { "drainTimeout": format!("{}m", i + 3) } } }),
                ),
            )
            .await
            .unwrap();
        last = source.fetch().await.unwrap();
    }
    assert_eq!(last.sha, format!("generation-{}", KEEP + 3));
    assert_eq!(source.read_at("generation-1").await.unwrap(), first.text);
    assert_eq!(source.read_at(&last.sha).await.unwrap(), last.text);
    let err = source.read_at("generation-2").await.unwrap_err();
    assert!(matches!(err, SourceError::UnknownRevision { .. }), "{err}");
    let kept = Api::<ConfigMap>::namespaced(admin.clone(), &ns.name)
        .get(&format!("{NAME}-revisions"))
        .await
        .unwrap()
        .data
        .unwrap();
    assert_eq!(kept.len(), KEEP + 1, "{:?}", kept.keys());

    // Deleted and created again: the old object's snapshots are not its own.
    assignments.delete(NAME, &Default::default()).await.unwrap();
    let err = source.fetch().await.unwrap_err();
    assert!(matches!(err, SourceError::NoObject { .. }), "{err}");
    assignments
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    let again = source.fetch().await.unwrap();
    assert_eq!(again.sha, "generation-1");
    assert!(source.read_at(&last.sha).await.is_err());
}

/// Flux applies the `OperatorAssignment` from Git with `wait: true`, and
/// `reconciler sync --source cluster` (under the shipped source-cluster RBAC)
/// executes it: the Kustomization is Ready only once the migration is
/// applied, the history names the Git revision Flux applied, and a rollout
/// that stalls fails the Kustomization.
#[tokio::test(flavor = "multi_thread")]
async fn a_kustomization_waiting_on_the_assignment_it_applies_follows_its_migration() {
    use camelk_testkit::apps_repo::{AppsRepo, BRANCH};
    use camelk_testkit::flux::{self, FluxKind, KustomizationSpec};

    let cluster = camelk_testkit::shared();
    let ns = cluster.namespace("source-flux").await;
    grant_rbac(cluster).await;
    cluster.grant_sync_namespace(&ns.name).await;
    install_assignment_crd(cluster).await;
    let admin = cluster.admin().await;
    camelk_testkit::reconciler_rbac::apply_source_cluster(&admin, "reconciler", &ns.name)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let _op1 = start_operator(cluster, "operator-1", &ns.name, "op1", "1s").await;
    let _op2 = start_operator(cluster, "operator-2", &ns.name, "op2", "1s").await;
    for name in ["it-00", "it-01"] {
        create_integration(&admin, &ns.name, name, Some("operator-1")).await;
        wait_running(&admin, &ns.name, name, "operator-1", 90).await;
    }
    let sync = start_sync_process(
        cluster,
        &ns.name,
        "sync-flux",
        &["--source", "cluster", "--name", NAME],
        &[],
    );

    // The platform repository holds the assignment; Flux applies it and
    // waits for it to be ready.
    let flux = flux::start_watching(cluster.dir(), &ns.name).await;
    // What a new commit asks Flux to reconcile at once: the source, then the
    // Kustomization that applies it.
    let flux_objects = [
        (FluxKind::GitRepository, "platform"),
        (FluxKind::Kustomization, "camelk"),
    ];
    let platform = AppsRepo::new();
    let path = "camelk/operator-assignment.yaml";
    let first = platform.commit(&[(path, &manifest(&ns.name, &[]))], "the operators");
    flux.create_basic_auth_secret(
        &ns.name,
        "platform-git",
        camelk_testkit::apps_repo::GIT_USER,
        camelk_testkit::apps_repo::GIT_PASSWORD,
    )
    .await
    .unwrap();
    flux.create_git_repository(
        &ns.name,
        &flux::GitRepositorySpec::new("platform", &platform.url())
            .branch(BRANCH)
            .secret_ref("platform-git")
            .interval(Duration::from_secs(3600)),
    )
    .await
    .unwrap();
    flux.create_kustomization(
        &ns.name,
        &KustomizationSpec::new("camelk", "platform", "./camelk")
            .target_namespace(&ns.name)
            .prune(false)
            .wait(true)
            .timeout(Duration::from_secs(60))
            .interval(Duration::from_secs(3600)),
    )
    .await
    .unwrap();
    let assignments: Api<camelk_reconciler::api::OperatorAssignment> =
        Api::namespaced(admin.clone(), &ns.name);
    let applied_when_ready = |revision: String| {
        let assignments = assignments.clone();
        async move {
            let object = assignments.get(NAME).await.unwrap();
            let status = object.status.unwrap_or_default();
            (
                status.last_applied_revision,
                object.metadata.generation,
                status.history.into_iter().find(|r| r.revision == revision),
            )
        }
    };
    flux.wait_commit_applied(&ns.name, "camelk", &first, Duration::from_secs(120))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", sync.log_tail()));
    let (applied, generation, _) = applied_when_ready("generation-1".into()).await;
    assert_eq!(
        (applied.as_deref(), generation),
        (Some("generation-1"), Some(1)),
        "Ready once applied"
    );

    // A move: Ready again only once it is applied, and the history row names
    // the commit Flux applied it from.
    let second = platform.commit(
        &[(path, &manifest(&ns.name, &[("it-00", "operator-2")]))],
        "it-00 to operator-2",
    );
    for (kind, name) in flux_objects {
        flux.request_reconcile(kind, &ns.name, name).await.unwrap();
    }
    flux.wait_commit_applied(&ns.name, "camelk", &second, Duration::from_secs(120))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", sync.log_tail()));
    let (applied, _, row) = applied_when_ready("generation-2".into()).await;
    assert_eq!(
        applied.as_deref(),
        Some("generation-2"),
        "Ready once applied"
    );
    let row = row.expect("a history row of generation-2");
    assert_eq!(
        row.source_revision.as_deref(),
        Some(flux::git_revision(BRANCH, &second).as_str())
    );
    assert_eq!(
        row.applied_by.as_deref(),
        Some(format!("Kustomization {}/camelk", ns.name).as_str())
    );
    let it00 = camel_api(admin.clone(), CamelKind::Integration, &ns.name)
        .get("it-00")
        .await
        .unwrap();
    assert_eq!(owner(&it00).as_deref(), Some("operator-2"));

    // A move to an operator that is not running stalls: the Kustomization
    // fails instead of waiting out its timeout as Ready.
    let third = platform.commit(
        &[(
            path,
            &Assignment::new(NAME)
                .operator("operator-1", &ns.name)
                .operator("operator-2", &ns.name)
                .operator("operator-3", &ns.name)
                .scope(&[&ns.name], &[CamelKind::Integration])
                .default_operator("operator-1")
                .pin(CamelKind::Integration, &ns.name, "it-00", "operator-2")
                .pin(CamelKind::Integration, &ns.name, "it-01", "operator-3")
                .rollout(Rollout::new().gate_timeout("90s"))
                .drain_timeout("2m")
                .render(),
        )],
        "it-01 to operator-3, which does not run",
    );
    for (kind, name) in flux_objects {
        flux.request_reconcile(kind, &ns.name, name).await.unwrap();
    }
    let kustomizations: Api<kube::api::DynamicObject> = Api::namespaced_with(
        admin.clone(),
        &ns.name,
        &FluxKind::Kustomization.api_resource(),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let failed = loop {
        let k = kustomizations.get("camelk").await.unwrap();
        let ready = flux::conditions(&k)
            .into_iter()
            .find(|c| c.type_ == "Ready");
        let attempted = k.data["status"]["lastAttemptedRevision"].as_str()
            == Some(flux::git_revision(BRANCH, &third).as_str());
        if attempted && ready.as_ref().is_some_and(|c| c.status == "False") {
            break ready.unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the Kustomization did not fail: {:?}\nits status: {}\n{}\n{}",
            ready,
            k.data["status"],
            flux.log_tail(30),
            sync.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let status = assignments.get(NAME).await.unwrap().status.unwrap();
    let stalled = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Stalled")
        .expect("a Stalled condition");
    assert_eq!(
        (stalled.status.as_str(), stalled.reason.as_str()),
        ("True", "TargetNotAlive")
    );
    assert!(
        failed.message.contains("OperatorAssignment"),
        "Flux names the stalled object: {}",
        failed.message
    );
    println!("Flux says: {}", failed.message);

    for kind in [FluxKind::Kustomization, FluxKind::GitRepository] {
        flux.delete(
            kind,
            &ns.name,
            if kind == FluxKind::Kustomization {
                "camelk"
            } else {
                "platform"
            },
            Duration::from_secs(60),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    }
}

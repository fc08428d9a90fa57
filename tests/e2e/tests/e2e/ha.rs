//! Two replicas of `reconciler sync` as the Helm chart runs them, and a
//! webhook the Service happened to send to the standby.
//!
//! The chart is rendered by Helm (as [`crate::chart`] does) with
//! `replicaCount: 2` and a webhook Secret; its ServiceAccount, CRD and RBAC
//! are applied to the real API server, its cluster-scoped roles and
//! bindings under names of their own (`<name>-<namespace>`), since other
//! tests of this binary apply `examples/deploy`'s objects of the same
//! names. No kubelet runs the Deployment: each replica is a `reconciler`
//! process started from the Deployment's pod, as a kubelet would start it
//! ([`camelk_testkit::pod`]: its args and env, its mounted Secrets as files,
//! a loopback port of its own, the chart's ServiceAccount's token).
//!
//! With `source: cluster` (the issue's setup) and with a Git source (served
//! over HTTP with a token), a signed push event sent to the standby must be
//! synced by the leader within [`WITHIN`]; with a Git source the standby's
//! `GET /plan` is 503 with `Retry-After` and the leader's is the plan.

use std::time::{Duration, Instant};

use camelk_reconciler::api::{OperatorAssignment, RECONCILE_REQUEST_ANNOTATION};
use camelk_reconciler::camel_k::CamelKind;
use camelk_testkit::TestCluster;
use camelk_testkit::apps_repo::{AppsRepo, GIT_PASSWORD, GIT_USER};
use camelk_testkit::manifest::Assignment;
use camelk_testkit::pod::{self, PodProcess};
use k8s_openapi::api::core::v1::{PodSpec, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::chart::rendered;
use camelk_testkit::workspace_binary;

use crate::deploy::{apply, find, str_at};

/// The OperatorAssignment the replicas follow.
const NAME: &str = "camel-k";
const WEBHOOK_SECRET: &str = "camelk-reconciler-webhook";
const WEBHOOK_KEY: &[u8] = b"ha-webhook-5150";
const PLAN_TOKEN_SECRET: &str = "camelk-reconciler-plan-token";
const PLAN_TOKEN: &str = "ha-plan-token-4711";
const GIT_SECRET: &str = "camelk-reconciler-git";
/// How soon after the webhook the leader must have synced.
const WITHIN: Duration = Duration::from_secs(1);

/// The values every test sets: two replicas, the webhook Secret, no
/// admission policies (cluster-wide, and not what this test is about), logs
/// for people. Each test sets an interval longer than itself, so only the
/// webhook can start the round it waits for.
const HA_VALUES: [&str; 5] = [
    "replicaCount=2",
    "webhook.secretName=camelk-reconciler-webhook",
    "admission.enabled=false",
    "ownerKeys.enabled=false",
    "logFormat=text",
];

/// The manifest: operator-1 owns the Integrations of `ns` (there are none).
fn manifest(ns: &str) -> String {
    Assignment::new(NAME)
        .operator("operator-1", ns)
        .scope(&[ns], &[CamelKind::Integration])
        .default_operator("operator-1")
        .render()
}

/// A Secret: its name and its keys with their values.
type SecretData<'a> = (&'a str, &'a [(&'a str, &'a [u8])]);

/// A Secret `name` in `ns` holding `data`.
async fn create_secret(admin: &Client, ns: &str, name: &str, data: &[(&str, &[u8])]) {
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), k8s_openapi::ByteString(v.to_vec())))
                .collect(),
        ),
        ..Default::default()
    };
    Api::<Secret>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap_or_else(|e| panic!("creating Secret {ns}/{name}: {e}"));
}

/// Applies what the replicas need of the rendered chart: its
/// ServiceAccount, CRD, roles and bindings (cluster-scoped ones renamed
/// `<name>-<ns>`, see the module doc). Returns the renamed cluster-scoped
/// objects, for [`delete_cluster_scoped`].
async fn apply_chart(admin: &Client, ns: &str, objects: &[Value]) -> Vec<Value> {
    let mut cluster_scoped = Vec::new();
    for object in objects {
        let kind = str_at(object, "/kind");
        // `helm test` hooks run only under `helm test`.
        if object
            .pointer("/metadata/annotations/helm.sh~1hook")
            .is_some()
        {
            continue;
        }
        let mut object = object.clone();
        match kind {
            "ServiceAccount" | "Role" | "RoleBinding" | "CustomResourceDefinition" => {}
            "ClusterRole" | "ClusterRoleBinding" => {
                let renamed = format!("{}-{ns}", str_at(&object, "/metadata/name"));
                object["metadata"]["name"] = json!(renamed);
                if kind == "ClusterRoleBinding" {
                    let role = format!("{}-{ns}", str_at(&object, "/roleRef/name"));
                    object["roleRef"]["name"] = json!(role);
                }
                cluster_scoped.push(object.clone());
            }
            // The Deployment runs as processes below; the rest routes or
            // guards pods no kubelet runs here.
            _ => continue,
        }
        apply(admin, &object, false)
            .await
            .unwrap_or_else(|e| panic!("applying {kind}: {e}"));
    }
    cluster_scoped
}

async fn delete_cluster_scoped(admin: &Client, objects: &[Value]) {
    for object in objects {
        let name = str_at(object, "/metadata/name");
        let params = kube::api::DeleteParams::default();
        let _ = match str_at(object, "/kind") {
            "ClusterRole" => Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(admin.clone())
                .delete(name, &params)
                .await
                .map(|_| ()),
            _ => Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(admin.clone())
                .delete(name, &params)
                .await
                .map(|_| ()),
        };
    }
}

/// `/readyz`'s body of `replica`: `leader` or `standby`.
async fn role(replica: &PodProcess) -> Option<String> {
    let (status, _, body) = http(replica.address(), "GET", "/readyz", &[], b"")
        .await
        .ok()?;
    (status == 200).then(|| body.trim().to_string())
}

/// One HTTP/1.1 request; (status, head, body) of the answer.
async fn http(
    address: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<(u16, String, String)> {
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: camelk-reconciler\r\nConnection: close\r\n\
         Content-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await?;
    stream.write_all(body).await?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await?;
    let answer = String::from_utf8_lossy(&answer).to_string();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    Ok((status, head.to_string(), body.to_string()))
}

/// HMAC-SHA256 of `message` under `key` (RFC 2104), in hex: how a Git host
/// signs a webhook, computed here independently of the reconciler's check.
fn hmac_sha256(key: &[u8], message: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.iter().map(|k| k ^ byte).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    let outer = Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize();
    outer.iter().map(|b| format!("{b:02x}")).collect()
}

/// A GitHub push event to `/hooks/git` of `replica`, signed with the
/// webhook Secret's key.
async fn push_event(replica: &PodProcess) -> (u16, String, String) {
    let body = br#"{"ref":"refs/heads/main","commits":[]}"#;
    let signature = format!("sha256={}", hmac_sha256(WEBHOOK_KEY, body));
    http(
        replica.address(),
        "POST",
        "/hooks/git",
        &[
            ("Content-Type", "application/json"),
            ("X-GitHub-Event", "push"),
            ("X-Hub-Signature-256", &signature),
        ],
        body,
    )
    .await
    .expect("the standby answers")
}

/// Waits until one replica leads and the others stand by; (leader, standby).
async fn leader_and_standby(replicas: &[PodProcess]) -> (&PodProcess, &PodProcess) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut roles = Vec::new();
        for replica in replicas {
            roles.push(role(replica).await);
        }
        let leader = roles.iter().position(|r| r.as_deref() == Some("leader"));
        let standby = roles.iter().position(|r| r.as_deref() == Some("standby"));
        if let (Some(leader), Some(standby)) = (leader, standby) {
            return (&replicas[leader], &replicas[standby]);
        }
        assert!(
            Instant::now() < deadline,
            "no leader and standby: {roles:?}\n{}",
            log_tails(replicas)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The last 40 lines of each replica's log, under its pod's name.
fn log_tails(replicas: &[PodProcess]) -> String {
    replicas
        .iter()
        .map(|r| format!("{}:\n{}", r.pod(), r.log_tail(40)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Waits until `check` holds of the object, polling every 10 ms; the
/// object then.
async fn until(
    api: &Api<OperatorAssignment>,
    timeout: Duration,
    what: &str,
    check: impl Fn(&OperatorAssignment) -> bool,
) -> OperatorAssignment {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(object) = api.get_opt(NAME).await.expect("reading the object")
            && check(&object)
        {
            return object;
        }
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn handled(object: &OperatorAssignment) -> Option<&str> {
    object
        .status
        .as_ref()
        .and_then(|s| s.last_handled_reconcile_at.as_deref())
}

fn requested(object: &OperatorAssignment) -> Option<&str> {
    object
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(RECONCILE_REQUEST_ANNOTATION))
        .map(String::as_str)
}

/// Renders the chart with `values` in `ns`, applies it, and starts two
/// replicas; the webhook Secret (and any in `secrets`) is created first,
/// `applied` (the object a GitOps tool applies) once the chart's CRD is
/// installed, before the replicas start: the sync finds an object created
/// later only at its next interval. The replicas keep their files in the
/// scratch folder returned first: bound first, it is dropped after them.
async fn two_replicas(
    cluster: &TestCluster,
    admin: &Client,
    ns: &str,
    values: &[&str],
    secrets: &[SecretData<'_>],
    applied: Option<&OperatorAssignment>,
) -> (tempfile::TempDir, Vec<PodProcess>, Vec<Value>) {
    let scratch_dir = tempfile::tempdir().unwrap();
    let scratch = scratch_dir.path();
    create_secret(admin, ns, WEBHOOK_SECRET, &[("secret", WEBHOOK_KEY)]).await;
    for (name, data) in secrets {
        create_secret(admin, ns, name, data).await;
    }
    let sets: Vec<&str> = HA_VALUES.iter().chain(values).copied().collect();
    let objects = rendered(ns, &sets, &[]);
    let deployment = find(&objects, "Deployment", "camelk-reconciler");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let cluster_scoped = apply_chart(admin, ns, &objects).await;
    if let Some(object) = applied {
        create_when_served(admin, ns, object).await;
    }
    let template: PodSpec = serde_json::from_value(deployment["spec"]["template"]["spec"].clone())
        .expect("the rendered pod template");
    let kubeconfig = scratch.join("kubeconfig");
    pod::template_kubeconfig(&cluster.kubeconfig(), admin, ns, &template, &kubeconfig)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let binary = workspace_binary("camelk-reconciler", "reconciler");
    let mut replicas = Vec::new();
    for name in ["camelk-reconciler-7d9f-a", "camelk-reconciler-7d9f-b"] {
        let replica = pod::start(admin, ns, &template, name, &binary, &kubeconfig, scratch)
            .await
            .unwrap_or_else(|e| panic!("starting replica {name}: {e:#}"));
        replicas.push(replica);
    }
    (scratch_dir, replicas, cluster_scoped)
}

/// Creates `object` in `ns` as soon as the API server serves its kind (a
/// CRD just applied takes a moment).
async fn create_when_served(admin: &Client, ns: &str, object: &OperatorAssignment) {
    let api: Api<OperatorAssignment> = Api::namespaced(admin.clone(), ns);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match api.create(&PostParams::default(), object).await {
            Ok(_) => return,
            Err(kube::Error::Api(status)) if status.code == 404 && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("creating OperatorAssignment {ns}/{NAME}: {e}"),
        }
    }
}

/// The leader's first round has ended: the object's status says which
/// revision it attempted.
async fn first_round_done(api: &Api<OperatorAssignment>, replicas: &[PodProcess]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let object = api.get_opt(NAME).await.unwrap();
        if object
            .as_ref()
            .and_then(|o| o.status.as_ref())
            .is_some_and(|s| s.last_attempted_revision.is_some())
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no round ended: {:?}\n{}",
            object.and_then(|o| o.status),
            log_tails(replicas)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sends a signed push event to the standby and checks that the leader's
/// round answers it within [`WITHIN`]; the time it took.
async fn webhook_to_the_standby_is_synced(
    api: &Api<OperatorAssignment>,
    standby: &PodProcess,
    leader: &PodProcess,
) -> Duration {
    let before = api.get(NAME).await.unwrap();
    let sent = Instant::now();
    let (status, _, body) = push_event(standby).await;
    assert_eq!(status, 202, "{body}\n{}", standby.log_tail(40));
    assert!(
        body.contains("standby") && body.contains(NAME),
        "the standby says it passed the hook on: {body}"
    );
    let asked = api.get(NAME).await.unwrap();
    let token = requested(&asked)
        .expect("the standby set the requested-at annotation")
        .to_string();
    assert_ne!(requested(&before), Some(token.as_str()), "a fresh request");
    assert_ne!(handled(&before), Some(token.as_str()));
    until(api, WITHIN * 10, "the leader handles the request", |o| {
        handled(o) == Some(token.as_str())
    })
    .await;
    let took = sent.elapsed();
    assert!(
        took <= WITHIN,
        "the leader synced {took:?} after the webhook reached the standby\n{}:\n{}",
        leader.pod(),
        leader.log_tail(40)
    );
    took
}

#[test]
fn the_test_signs_as_rfc_4231_says() {
    // RFC 4231, test case 2.
    assert_eq!(
        hmac_sha256(b"Jefe", b"what do ya want for nothing?"),
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
}

#[tokio::test]
async fn a_webhook_sent_to_the_standby_starts_a_sync_within_a_second() {
    let cluster = camelk_testkit::shared();
    let admin = cluster.admin().await;
    let ns = cluster.namespace("ha").await;
    // The object Argo CD or Flux would apply.
    let mut object: OperatorAssignment = serde_saphyr::from_str(&manifest(&ns.name)).unwrap();
    object.metadata.namespace = Some(ns.name.clone());
    let api: Api<OperatorAssignment> = Api::namespaced(admin.clone(), &ns.name);
    let values = [
        "source=cluster",
        "cluster.name=camel-k",
        "cluster.interval=1h",
    ];
    let (_scratch, replicas, cluster_scoped) =
        two_replicas(cluster, &admin, &ns.name, &values, &[], Some(&object)).await;
    let (leader, standby) = leader_and_standby(&replicas).await;
    first_round_done(&api, &replicas).await;

    let took = webhook_to_the_standby_is_synced(&api, standby, leader).await;
    eprintln!("source: cluster: synced {took:?} after the webhook reached the standby");
    // Still one leader: the standby only passed the hook on.
    assert_eq!(role(standby).await.as_deref(), Some("standby"));
    assert_eq!(role(leader).await.as_deref(), Some("leader"));

    // With source: cluster the plan endpoint is off (GET /plan plans Git
    // revisions), on every replica alike.
    for replica in [leader, standby] {
        let (status, _, body) = http(replica.address(), "GET", "/plan?head=main", &[], b"")
            .await
            .unwrap();
        assert_eq!(status, 404, "{}: {body}", replica.pod());
    }
    drop(replicas);
    delete_cluster_scoped(&admin, &cluster_scoped).await;
}

#[tokio::test]
async fn with_a_git_source_the_standby_passes_webhooks_on_and_sends_plans_to_the_leader() {
    let cluster = camelk_testkit::shared();
    let admin = cluster.admin().await;
    let ns = cluster.namespace("ha-git").await;
    let repo = AppsRepo::new();
    let head = repo.commit(
        &[("operator-assignment.yaml", &manifest(&ns.name))],
        "operator-1 owns the Integrations",
    );
    let repository = format!("git.repository={}", repo.url());
    let username = format!("git.credentials.username={GIT_USER}");
    let values = [
        repository.as_str(),
        "git.path=operator-assignment.yaml",
        "git.interval=1h",
        "git.credentials.secretName=camelk-reconciler-git",
        username.as_str(),
        "planEndpoint.tokenSecretName=camelk-reconciler-plan-token",
    ];
    let secrets: [SecretData; 2] = [
        (GIT_SECRET, &[("token", GIT_PASSWORD.as_bytes())]),
        (PLAN_TOKEN_SECRET, &[("token", PLAN_TOKEN.as_bytes())]),
    ];
    let (_scratch, replicas, cluster_scoped) =
        two_replicas(cluster, &admin, &ns.name, &values, &secrets, None).await;
    let api: Api<OperatorAssignment> = Api::namespaced(admin.clone(), &ns.name);
    let (leader, standby) = leader_and_standby(&replicas).await;
    // The leader applies the object from Git in its first round.
    first_round_done(&api, &replicas).await;

    let took = webhook_to_the_standby_is_synced(&api, standby, leader).await;
    eprintln!("source: git: synced {took:?} after the webhook reached the standby");

    // GET /plan: the standby checks the token, then sends the client to the
    // leader (503, Retry-After); the leader plans from its warm cache.
    let bearer = format!("Bearer {PLAN_TOKEN}");
    // A branch, which the endpoint fetches by name (the test's Git server,
    // as many, refuses to send a commit asked for by its id alone).
    let plan = "/plan?head=main";
    // `GET` of the plan from `replica`, authorised by `authorization`.
    let get_plan = |replica: &PodProcess, authorization: &str| {
        let (address, authorization) = (replica.address(), authorization.to_string());
        async move {
            let headers = [("Authorization", authorization.as_str())];
            http(address, "GET", plan, &headers, b"").await.unwrap()
        }
    };
    let (status, _, body) = get_plan(standby, "Bearer guess").await;
    assert_eq!(status, 401, "a wrong token is refused first: {body}");
    let (status, head_text, body) = get_plan(standby, &bearer).await;
    assert_eq!(status, 503, "{body}");
    assert!(
        head_text
            .to_ascii_lowercase()
            .contains("\r\nretry-after: 1"),
        "{head_text}"
    );
    assert!(body.contains("stands by"), "{body}");
    let (status, _, body) = get_plan(leader, &bearer).await;
    assert_eq!(status, 200, "{body}\n{}", leader.log_tail(40));
    let served: Value = serde_json::from_str(&body).expect("the plan is JSON");
    assert_eq!(served["head"], head.as_str(), "{served}");
    drop(replicas);
    delete_cluster_scoped(&admin, &cluster_scoped).await;
}

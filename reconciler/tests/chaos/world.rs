//! One scenario's world: a control plane of its own, two reference
//! operators, `reconciler sync` following a Git remote, and N Integrations
//! and Pipes in namespace `apps`, with what a scenario needs to check that
//! nothing was lost.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use camelk_reconciler::api::OperatorAssignmentStatus;
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use camelk_testkit::TestCluster;
use camelk_testkit::cluster::{self, ClusterDir, StartOptions};
use camelk_testkit::crds::CrdSource;
use camelk_testkit::manifest::{Assignment, Rollout, Rule};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::proxy::Proxy;
use crate::support::{self, GitRemote, OperatorProcess};

/// Which connection of the world runs through a [`Proxy`] a fault can cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plumbing {
    /// Nothing: every process talks to the servers directly.
    Direct,
    /// The sync fetches from a Git smart-HTTP server through the proxy.
    Git,
    /// The leading sync replica reaches the API server through the proxy; a
    /// second replica, direct, stands by.
    Sync,
    /// operator-1 reaches the API server through the proxy.
    Operator1,
}

pub const NS: &str = "apps";
pub const NAME: &str = "fleet";
/// The rollout's steps.
pub const STEPS: [&str; 4] = ["25%", "50%", "75%", "100%"];
/// Labels and annotations of a user's, kept through every fault.
const USER_KEY: &str = "team.example.com/owner";

pub struct World {
    pub cluster: TestCluster,
    pub admin: Client,
    pub remote: GitRemote,
    pub operators: Vec<OperatorProcess>,
    pub sync: OperatorProcess,
    /// Every resource the scenario created, by (plural, name).
    pub names: Vec<(CamelKind, String)>,
    /// The digest of each resource's spec, user labels and annotations.
    pub before: BTreeMap<(CamelKind, String), String>,
    /// The proxy of [`Plumbing`], when there is one.
    pub proxy: Option<Proxy>,
    /// The standby sync replica of [`Plumbing::Sync`].
    pub standby: Option<OperatorProcess>,
    _git_server: Option<camelk_testkit::git_http::GitHttpServer>,
    /// The control plane's state (audit log, logs); deleted unless kept.
    state: Option<tempfile::TempDir>,
}

impl Drop for World {
    fn drop(&mut self) {
        for op in &mut self.operators {
            op.kill();
        }
        self.sync.kill();
        if let Some(standby) = &mut self.standby {
            standby.kill();
        }
        cluster::stop(self.cluster.dir());
    }
}

/// A resource name: `<kind>-<a|b>-<i>`; the group lets a manifest pick half.
fn name_of(kind: CamelKind, i: usize) -> String {
    let group = if i.is_multiple_of(2) { "a" } else { "b" };
    format!("{}-{group}-{i:04}", kind.plural().trim_end_matches('s'))
}

fn object(kind: CamelKind, name: &str, i: usize) -> DynamicObject {
    let spec = match kind {
        CamelKind::Pipe => json!({
            "source": { "ref": { "kind": "Kamelet", "apiVersion": "camel.apache.org/v1", "name": "timer-source" } },
            "sink": { "uri": format!("log:pipe-{i}") }
        }),
        _ => {
            json!({ "replicas": 1 + i % 3, "flows": [{ "from": { "uri": format!("timer:t{i}"), "steps": [{ "to": "log:x" }] } }] })
        }
    };
    serde_json::from_value(json!({
        "apiVersion": kind.api_version(),
        "kind": kind.kind(),
        "metadata": {
            "name": name,
            "labels": { OPERATOR_ID_KEY: "operator-1", USER_KEY: format!("team-{}", i % 7) },
            "annotations": { OPERATOR_ID_KEY: "operator-1", USER_KEY: format!("note {i}") }
        },
        "spec": spec
    }))
    .expect("a Camel K object")
}

/// What must survive every fault: spec, and the labels and annotations that
/// are not the owner keys.
pub fn fingerprint(obj: &DynamicObject) -> String {
    let user = |map: &Option<BTreeMap<String, String>>| {
        map.iter()
            .flatten()
            .filter(|(k, _)| k.as_str() != OPERATOR_ID_KEY)
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
    };
    let text = json!({
        "spec": obj.data.get("spec"),
        "labels": user(&obj.metadata.labels),
        "annotations": user(&obj.metadata.annotations),
    })
    .to_string();
    hex::encode(Sha256::digest(text.as_bytes()))
}

pub fn owner(obj: &DynamicObject) -> Option<String> {
    obj.metadata.labels.as_ref()?.get(OPERATOR_ID_KEY).cloned()
}

pub fn api(client: &Client, kind: CamelKind) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), NS, &kind.api_resource())
}

/// The manifest everything starts from: operator-1 owns all.
pub fn manifest_start() -> String {
    base().render()
}

/// The rollout: everything to operator-2 in [`STEPS`].
pub fn manifest_rollout() -> String {
    base()
        .staged_move("operator-1", "operator-2", &STEPS)
        .render()
}

/// A revision that reverses half the moves: group `b` back with operator-1.
pub fn manifest_half() -> String {
    base()
        .rule(Rule::to("operator-2").named("group-a").names(&["*-a-*"]))
        .render()
}

fn base() -> Assignment {
    Assignment::new(NAME)
        .operator("operator-1", NS)
        .operator("operator-2", NS)
        .scope(&[NS], &[CamelKind::Integration, CamelKind::Pipe])
        .default_operator("operator-1")
        .rollout(Rollout::new().gate_timeout("5m"))
        .drain_timeout("2m")
}

impl World {
    /// Starts the world with `n` resources (half Integrations, half Pipes),
    /// everything owned by operator-1 and running, the start manifest applied.
    pub async fn start(scenario: &str, n: usize, plumbing: Plumbing) -> anyhow::Result<World> {
        let state = tempfile::Builder::new()
            .prefix(&format!("camelk-chaos-{scenario}-"))
            .tempdir()?;
        let dir = ClusterDir::new(state.path().join("cluster"));
        let opts = StartOptions {
            dir: dir.clone(),
            bin_dir: camelk_testkit::binaries::control_plane_bin_dir()?,
            crds: CrdSource::locate(),
        };
        cluster::start(&opts).await?;
        let cluster = TestCluster::attach(dir);
        let admin = cluster.admin().await;
        cluster.grant_camelk_roles().await;
        support::install_assignment_crd(&cluster).await;
        let namespace: Namespace = serde_json::from_value(json!({ "metadata": { "name": NS } }))?;
        Api::<Namespace>::all(admin.clone())
            .create(&PostParams::default(), &namespace)
            .await?;
        cluster.grant_sync_namespace(NS).await;

        let mut names = Vec::new();
        for i in 0..n {
            let kind = if i.is_multiple_of(2) {
                CamelKind::Integration
            } else {
                CamelKind::Pipe
            };
            names.push((kind, name_of(kind, i)));
        }
        futures::stream::iter(names.iter().enumerate())
            .map(|(i, (kind, name))| {
                let api = api(&admin, *kind);
                async move {
                    api.create(&PostParams::default(), &object(*kind, name, i))
                        .await
                }
            })
            .buffer_unordered(16)
            .try_collect::<Vec<_>>()
            .await?;

        let api_server = api_server_addr(&cluster.kubeconfig())?;
        let mut proxy = None;
        let mut operators = Vec::new();
        for id in ["operator-1", "operator-2"] {
            if id == "operator-1" && plumbing == Plumbing::Operator1 {
                let p = Proxy::start(api_server).await?;
                let kubeconfig = through(&cluster.kubeconfig(), api_server, &p, state.path())?;
                cluster.grant_operator(id, NS, NS).await;
                operators.push(support::spawn_operator(
                    id,
                    NS,
                    NS,
                    id,
                    "200ms",
                    &kubeconfig,
                ));
                proxy = Some(p);
            } else {
                operators.push(support::start_operator(&cluster, id, NS, id, "200ms").await);
            }
        }
        let remote = GitRemote::new();
        remote.push(&manifest_start(), "operator-1 owns everything");
        let mut git_server = None;
        let mut standby = None;
        let sync = match plumbing {
            Plumbing::Git => {
                let server = camelk_testkit::git_http::GitHttpServer::start(
                    remote.dir.path(),
                    "x-access-token",
                    "chaos-token",
                );
                let url = server.url("remote.git");
                let port: u16 = url
                    .rsplit(':')
                    .next()
                    .and_then(|p| p.split('/').next())
                    .and_then(|p| p.parse().ok())
                    .expect("the server's port");
                let p = Proxy::start(([127, 0, 0, 1], port).into()).await?;
                let token = state.path().join("git-token");
                std::fs::write(&token, "chaos-token")?;
                let sync = support::start_sync_via(
                    NS,
                    &format!("http://{}/remote.git", p.addr),
                    "r1",
                    &remote.cache("r1"),
                    &cluster.kubeconfig(),
                    &["--token-file", token.to_str().expect("a UTF-8 path")],
                );
                proxy = Some(p);
                git_server = Some(server);
                sync
            }
            Plumbing::Sync => {
                let p = Proxy::start(api_server).await?;
                let kubeconfig = through(&cluster.kubeconfig(), api_server, &p, state.path())?;
                let url = format!("file://{}", remote.url().display());
                let sync =
                    support::start_sync_via(NS, &url, "r1", &remote.cache("r1"), &kubeconfig, &[]);
                support::wait_lock_holder(&admin, NS, "camelk-reconciler-lock", "r1").await;
                standby = Some(support::start_sync(
                    &cluster,
                    NS,
                    &remote.url(),
                    "r2",
                    &remote.cache("r2"),
                ));
                proxy = Some(p);
                sync
            }
            Plumbing::Direct | Plumbing::Operator1 => {
                support::start_sync(&cluster, NS, &remote.url(), "r1", &remote.cache("r1"))
            }
        };
        let mut world = World {
            cluster,
            admin,
            remote,
            operators,
            sync,
            names,
            before: BTreeMap::new(),
            proxy,
            standby,
            _git_server: git_server,
            state: Some(state),
        };
        let head = world.remote_head();
        world
            .wait_status(
                Duration::from_secs(300),
                "the start manifest applied",
                |s| s.last_applied_revision.as_deref() == Some(head.as_str()),
            )
            .await?;
        world.wait_all_running("operator-1").await?;
        world.before = world.fingerprints().await?;
        Ok(world)
    }

    /// Keeps the state directory (audit log, process logs) for a look
    /// afterwards; returns where it is.
    pub fn keep(&mut self) -> Option<std::path::PathBuf> {
        self.state.take().map(|dir| dir.keep())
    }

    pub fn remote_head(&self) -> String {
        let repo = git2::Repository::open_bare(self.remote.url()).expect("the remote");
        repo.refname_to_id("refs/heads/main")
            .expect("main")
            .to_string()
    }

    pub async fn status(&self) -> Option<OperatorAssignmentStatus> {
        support::assignment(&self.admin, NS, NAME)
            .await
            .and_then(|a| a.status)
    }

    /// Polls the status until `check` holds, or fails after `timeout`.
    pub async fn wait_status(
        &self,
        timeout: Duration,
        what: &str,
        check: impl Fn(&OperatorAssignmentStatus) -> bool,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            // A restarting API server answers nothing for a while: keep asking.
            if let Ok(Some(o)) = Api::<camelk_reconciler::api::OperatorAssignment>::namespaced(
                self.admin.clone(),
                NS,
            )
            .get_opt(NAME)
            .await
                && o.status.as_ref().is_some_and(&check)
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "not {what} after {timeout:?}; status: {:#?}\nsync log:\n{}",
                    self.status().await.map(|s| (s.rollout, s.conditions)),
                    self.sync.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Waits until every created resource is owned by `id` and, for
    /// Integrations, running.
    async fn wait_all_running(&self, id: &str) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            let integrations = api(&self.admin, CamelKind::Integration)
                .list(&ListParams::default())
                .await?;
            let running = integrations
                .items
                .iter()
                .filter(|o| {
                    owner(o).as_deref() == Some(id)
                        && camelk_reconciler::camel_k::status::phase(o) == Some("Running")
                })
                .count();
            if running >= integrations.items.len() && !integrations.items.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "{running} of {} Integrations running under {id}",
                    integrations.items.len()
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Every created resource that exists.
    async fn created(&self) -> anyhow::Result<BTreeMap<(CamelKind, String), DynamicObject>> {
        let mut out = BTreeMap::new();
        for kind in [CamelKind::Integration, CamelKind::Pipe] {
            for obj in api(&self.admin, kind)
                .list(&ListParams::default())
                .await?
                .items
            {
                let key = (kind, obj.metadata.name.clone().unwrap_or_default());
                if self.names.contains(&key) {
                    out.insert(key, obj);
                }
            }
        }
        Ok(out)
    }

    /// The fingerprint of every created resource that exists.
    pub async fn fingerprints(&self) -> anyhow::Result<BTreeMap<(CamelKind, String), String>> {
        Ok(self
            .created()
            .await?
            .into_iter()
            .map(|(key, obj)| (key, fingerprint(&obj)))
            .collect())
    }

    /// The owner of every created resource that exists.
    pub async fn owners(&self) -> anyhow::Result<BTreeMap<(CamelKind, String), Option<String>>> {
        Ok(self
            .created()
            .await?
            .into_iter()
            .map(|(key, obj)| (key, owner(&obj)))
            .collect())
    }

    /// Handoff request Leases left in `apps` (locks excepted).
    pub async fn requests_left(&self) -> anyhow::Result<Vec<String>> {
        Ok(Api::<Lease>::namespaced(self.admin.clone(), NS)
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter_map(|l| l.metadata.name)
            .filter(|n| !n.ends_with("-lock"))
            .collect())
    }

    /// The writes the moves cost (owner-key changes of Camel K resources
    /// and writes of handoff request Leases, by anyone), the moves (owner
    /// changes, Integrations of Pipes included), and dual-owner writes, from
    /// the audit log.
    pub fn audit(&self) -> anyhow::Result<(usize, usize, Vec<String>)> {
        let events = self.cluster.audit_log().events_in(NS)?;
        let flips = support::owner_changes(&self.cluster, NS).len();
        let requests = events
            .iter()
            .filter(|e| {
                e.stage == "ResponseComplete"
                    && e.is_successful_write()
                    && e.object_ref.as_ref().is_some_and(|o| {
                        o.resource == "leases"
                            && !o.name.as_deref().unwrap_or_default().ends_with("-lock")
                    })
            })
            .count();
        let writes = flips + requests;
        let violations = camelk_testkit::audit::single_owner_violations(
            &events,
            NS,
            &["operator-1", "operator-2"],
        );
        Ok((writes, flips, violations))
    }
}

/// The API server's address, from the kubeconfig the cluster wrote.
fn api_server_addr(kubeconfig: &std::path::Path) -> anyhow::Result<std::net::SocketAddr> {
    let text = std::fs::read_to_string(kubeconfig)?;
    let server = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: https://"))
        .ok_or_else(|| anyhow::anyhow!("no server in {}", kubeconfig.display()))?;
    Ok(server.parse()?)
}

/// A copy of `kubeconfig` whose server is `proxy` instead of `server` (the
/// certificate names 127.0.0.1, which the proxy listens on too).
fn through(
    kubeconfig: &std::path::Path,
    server: std::net::SocketAddr,
    proxy: &Proxy,
    dir: &std::path::Path,
) -> anyhow::Result<std::path::PathBuf> {
    let text = std::fs::read_to_string(kubeconfig)?.replace(
        &format!("https://{server}"),
        &format!("https://{}", proxy.addr),
    );
    let path = dir.join(format!("kubeconfig-{}", proxy.addr.port()));
    std::fs::write(&path, text)?;
    Ok(path)
}

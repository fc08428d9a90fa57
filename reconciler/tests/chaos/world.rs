//! One scenario's world: a control plane of its own, two operators (the
//! reference ones or real upstream Camel K ones, [`Flavour`]), `reconciler
//! sync` following a Git remote, and N Integrations and Pipes in namespace
//! `apps`, with what a scenario needs to check that nothing was lost.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use camelk_reconciler::api::OperatorAssignmentStatus;
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY, owner_id};
use camelk_testkit::TestCluster;
use camelk_testkit::cluster::{self, ClusterDir, StartOptions};
use camelk_testkit::crds::CrdSource;
use camelk_testkit::manifest::{Assignment, Operator as ManifestOperator, Rollout, Rule};
use camelk_testkit::upstream::{self, UpstreamOperator, UpstreamOptions};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::support::{self, GitRemote, OperatorProcess};
use camelk_testkit::proxy::Proxy;

/// Which operators the world runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// `reconciler operator` processes: owner label and annotation, fenced
    /// writes.
    Reference,
    /// Real upstream operators (`kamel operator` of the pinned release), each
    /// locked in its own namespace, on resources as `kamel run -x` and `kamel
    /// bind -x` create them (the owner annotation only), with the owner
    /// admission policy enforced, as the docs tell users of upstream to do.
    Upstream,
}

impl Flavour {
    pub fn name(self) -> &'static str {
        match self {
            Flavour::Reference => "reference",
            Flavour::Upstream => "upstream",
        }
    }

    /// How long a step of the set-up or the rollout, or the recovery after a
    /// fault, may take with `n` resources: a guard against a hang, not a
    /// measure, so generous for a loaded machine. Upstream operators get more
    /// time a resource: their client is held to 20 requests a second, and each
    /// reconcile of an Integration also asks discovery for the OpenShift and
    /// Knative APIs (a third of an operator's requests in a world's audit log).
    pub fn patience(self, n: usize) -> Duration {
        let per_resource = match self {
            Flavour::Reference => Duration::from_millis(600),
            Flavour::Upstream => Duration::from_millis(1500),
        };
        Duration::from_secs(300) + per_resource * n as u32
    }
}

/// Which operators of the world handle Camel K resources with no owner key
/// in `apps`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handlers {
    /// None. Reference operators watch by the owner label and never see such
    /// a resource; upstream v2.10 operators that are global and have ids of
    /// their own leave it to a `camel-k` or a local operator.
    None,
    /// Both, with upstream operators: each is local (`WATCH_NAMESPACE=apps`)
    /// and keeps its lock and platform in a namespace of its own, so neither
    /// yields to the other, as every operator will under Camel K 2.11.
    /// operator-1 is the manifest's `handlesUnowned` and the policy's
    /// `unownedHandler`. Reference operators stay as in [`Handlers::None`]:
    /// they have no such mode.
    Both,
}

/// The operator the manifest and the policy name to handle resources with
/// no owner key in `apps`, with [`Handlers::Both`] and upstream operators.
pub fn unowned_handler(flavour: Flavour, handlers: Handlers) -> Option<&'static str> {
    (flavour == Flavour::Upstream && handlers == Handlers::Both).then_some("operator-1")
}

/// An operator of either [`Flavour`], running or killed by the scenario.
pub struct Operator {
    process: Process,
    /// When the scenario killed it (SIGKILL).
    killed: Option<Instant>,
    /// When the scenario cut it off from the API server.
    cut: Option<Instant>,
}

enum Process {
    Reference(OperatorProcess),
    Upstream(UpstreamOperator),
}

impl Operator {
    fn new(process: Process) -> Operator {
        Operator {
            process,
            killed: None,
            cut: None,
        }
    }

    /// SIGKILL: no lock released. Noted as a time it went down.
    pub fn kill(&mut self) {
        match &mut self.process {
            Process::Reference(p) => p.kill(),
            Process::Upstream(p) => p.kill(),
        }
        self.killed.get_or_insert_with(Instant::now);
    }

    /// Noted as a time it went down: cut off from the API server, it cannot
    /// renew its lock, and to the cluster it is as good as gone.
    pub fn cut_off(&mut self) {
        self.cut.get_or_insert_with(Instant::now);
    }

    /// Its operator id.
    pub fn id(&self) -> &str {
        match &self.process {
            Process::Reference(p) => &p.id,
            Process::Upstream(p) => p.id(),
        }
    }

    /// When it went down: killed, cut off, or exited by itself and then
    /// started again (upstream only: the reference operator does not exit
    /// when it loses its lock).
    pub fn downs(&self) -> Vec<Instant> {
        let exits = match &self.process {
            Process::Reference(_) => Vec::new(),
            Process::Upstream(p) => p.exits(),
        };
        exits
            .into_iter()
            .chain(self.killed)
            .chain(self.cut)
            .collect()
    }
}

/// The image of upstream Integrations: prebuilt, so no build runs (there is
/// no Maven here); the simulated node runs its pods.
const IMAGE: &str = "docker.io/library/camelk-chaos:1.0";

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

/// Where a scenario's share of a world's history begins: the audit log of
/// a world that several scenarios share in turn is judged from there.
#[derive(Clone, Copy, Debug)]
struct Since {
    /// etcd's revision (commit order, as resourceVersions count it).
    revision: u64,
    /// The API server's clock: the audit log's timestamps.
    at: k8s_openapi::jiff::Timestamp,
    /// This process's clock: when operators went down.
    instant: Instant,
}

impl Since {
    fn includes(&self, event: &camelk_testkit::AuditEvent) -> bool {
        event.received_at().is_some_and(|t| t >= self.at)
    }
}

/// A `Stalled` report, when first seen.
struct StallSeen {
    at: Instant,
    reason: String,
    message: String,
    /// `status.rollout.targetNotAlive` at that time.
    target_not_alive: Option<String>,
}

pub struct World {
    pub cluster: TestCluster,
    pub admin: Client,
    pub remote: GitRemote,
    pub operators: Vec<Operator>,
    pub flavour: Flavour,
    /// Who handles resources with no owner key.
    pub handlers: Handlers,
    /// The API server address operators dial: a proxy's for operator-1 in
    /// [`Plumbing::Operator1`].
    operator1_server: Option<std::net::SocketAddr>,
    pub sync: OperatorProcess,
    /// Every resource the world's scenarios created, by (plural, name).
    pub names: Vec<(CamelKind, String)>,
    /// The digest of each resource's spec, user labels and annotations, as
    /// the last scenario left it.
    pub before: BTreeMap<(CamelKind, String), String>,
    /// Who owns what, as the last scenario left it.
    pub layout: Layout,
    /// The proxy of [`Plumbing`], when there is one.
    pub proxy: Option<Proxy>,
    /// The standby sync replica of [`Plumbing::Sync`].
    pub standby: Option<OperatorProcess>,
    /// The revision the last scenario left applied (the start manifest's
    /// before the first).
    pub settled_revision: String,
    /// Where the scenario under way began: [`World::begin_scenario`].
    since: Since,
    /// The world's slug, part of every process identity so that the logs of
    /// worlds run at once do not mix.
    tag: String,
    /// Each distinct `Stalled` report [`World::wait_status`] saw since the
    /// scenario began.
    stalled: Mutex<Vec<StallSeen>>,
    _git_server: Option<camelk_testkit::git_http::GitHttpServer>,
    /// The control plane's state (audit log, logs); deleted unless kept.
    state: std::path::PathBuf,
    keep_state: bool,
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
        if !self.keep_state {
            let _ = std::fs::remove_dir_all(&self.state);
        }
    }
}

/// A resource name: `<kind>-<a|b>-<i>`; the group lets a manifest pick half.
/// Each group has both kinds, so the steps that come before a revision
/// reversing half the moves have moved some of the half it reverses.
fn name_of(kind: CamelKind, i: usize) -> String {
    let group = if i % 4 < 2 { "a" } else { "b" };
    format!("{}-{group}-{i:04}", kind.plural().trim_end_matches('s'))
}

/// Which operator holds each group of resources (`<kind>-a-…` and
/// `<kind>-b-…`, [`name_of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub a: &'static str,
    pub b: &'static str,
}

impl Layout {
    /// As a world starts: group `a` with operator-1, group `b` with
    /// operator-2. A rollout swaps them, so both operators release and take
    /// over at once, each at its own pace (an upstream one's client is held
    /// to 20 requests a second).
    pub const START: Layout = Layout {
        a: "operator-1",
        b: "operator-2",
    };

    /// The owner of resource `name`.
    pub fn owner(self, name: &str) -> &'static str {
        if name.contains("-a-") { self.a } else { self.b }
    }

    /// Where a rollout from this layout ends: each group with the other
    /// operator.
    pub fn swapped(self) -> Layout {
        let other = |id| {
            if id == "operator-1" {
                "operator-2"
            } else {
                "operator-1"
            }
        };
        Layout {
            a: other(self.a),
            b: other(self.b),
        }
    }

    /// Where the revision that reverses half of a rollout from this layout
    /// ends: group `a` goes on to its new operator, group `b` stays.
    pub fn half_swapped(self) -> Layout {
        Layout {
            a: self.swapped().a,
            b: self.b,
        }
    }
}

fn object(kind: CamelKind, name: &str, i: usize, flavour: Flavour) -> DynamicObject {
    let flow = json!([{ "from": { "uri": format!("timer:t{i}"), "steps": [{ "to": "log:x" }] } }]);
    let spec = match (kind, flavour) {
        (CamelKind::Pipe, Flavour::Reference) => json!({
            "source": { "ref": { "kind": "Kamelet", "apiVersion": "camel.apache.org/v1", "name": "timer-source" } },
            "sink": { "uri": format!("log:pipe-{i}") }
        }),
        // Endpoints by URI (no Kamelet to install) and an image: the Pipe's
        // Integration runs without a build.
        (CamelKind::Pipe, Flavour::Upstream) => json!({
            "source": { "uri": format!("timer:p{i}") },
            "sink": { "uri": format!("log:pipe-{i}") },
            "traits": { "container": { "image": IMAGE } }
        }),
        (_, Flavour::Reference) => json!({ "replicas": 1 + i % 3, "flows": flow }),
        (_, Flavour::Upstream) => {
            json!({ "flows": flow, "traits": { "container": { "image": IMAGE } } })
        }
    };
    let owner = Layout::START.owner(name);
    let mut labels = json!({ USER_KEY: format!("team-{}", i % 7) });
    if flavour == Flavour::Reference {
        labels[OPERATOR_ID_KEY] = json!(owner);
    }
    serde_json::from_value(json!({
        "apiVersion": kind.api_version(),
        "kind": kind.kind(),
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": { OPERATOR_ID_KEY: owner, USER_KEY: format!("note {i}") }
        },
        "spec": spec
    }))
    .expect("a Camel K object")
}

/// Resource `name` as a GitOps tool applies a manifest that names no
/// operator: no owner label, no owner annotation.
pub fn unowned_object(kind: CamelKind, name: &str, i: usize, flavour: Flavour) -> DynamicObject {
    let mut obj = object(kind, name, i, flavour);
    for keys in [&mut obj.metadata.labels, &mut obj.metadata.annotations]
        .into_iter()
        .flatten()
    {
        keys.remove(OPERATOR_ID_KEY);
    }
    obj
}

/// The name of the `i`th resource of `kind`: [`name_of`], for resources a
/// scenario creates itself.
pub fn resource_name(kind: CamelKind, i: usize) -> String {
    name_of(kind, i)
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

pub fn api(client: &Client, kind: CamelKind) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), NS, &kind.api_resource())
}

/// The manifest of `layout`, with no rollout: what a world starts from
/// ([`Layout::START`]), and the revision that reverses half the moves of a
/// rollout ([`Layout::half_swapped`]).
pub fn manifest_at(flavour: Flavour, handlers: Handlers, n: usize, layout: Layout) -> String {
    base(flavour, handlers, n, layout).render()
}

/// The rollout from `layout` to its [`Layout::swapped`]: the two groups
/// swap operators in [`STEPS`], each step moving a quarter of each group.
pub fn manifest_rollout(flavour: Flavour, handlers: Handlers, n: usize, layout: Layout) -> String {
    base(flavour, handlers, n, layout)
        .staged_move("operator-1", "operator-2", &STEPS)
        .staged_move("operator-2", "operator-1", &STEPS)
        .render()
}

/// The operators of `flavour` (the one that handles unowned resources
/// marked so), a rule for each group of `layout`, and a world of `n`
/// resources' timeouts.
fn base(flavour: Flavour, handlers: Handlers, n: usize, layout: Layout) -> Assignment {
    let operators = match flavour {
        Flavour::Reference => Assignment::new(NAME)
            .operator("operator-1", NS)
            .operator("operator-2", NS),
        Flavour::Upstream => ["operator-1", "operator-2"].into_iter().fold(
            Assignment::new(NAME),
            |assignment, id| {
                let operator =
                    ManifestOperator::new(id, &upstream::default_namespace(id)).upstream();
                assignment.with_operator(if unowned_handler(flavour, handlers) == Some(id) {
                    operator.handles_unowned()
                } else {
                    operator
                })
            },
        ),
    };
    operators
        .scope(&[NS], &[CamelKind::Integration, CamelKind::Pipe])
        .rule(Rule::to(layout.a).named("group-a").names(&["*-a-*"]))
        .rule(Rule::to(layout.b).named("group-b").names(&["*-b-*"]))
        .default_operator("operator-1")
        // A step's health gate waits as long as a step may take: upstream
        // operators take over ~85 moved Integrations a minute (each starts
        // again from Initialization), so a 500-move step outlasts 5 minutes.
        .rollout(Rollout::new().gate_timeout(&format!("{}s", flavour.patience(n).as_secs())))
        .drain_timeout("2m")
}

/// What a world is made of: which scenario it serves, its size and its parts.
#[derive(Clone, Copy, Debug)]
pub struct Blueprint<'a> {
    pub scenario: &'a str,
    /// Resources: half Integrations, half Pipes.
    pub n: usize,
    pub plumbing: Plumbing,
    pub flavour: Flavour,
    pub handlers: Handlers,
}

impl World {
    /// Starts the world of `blueprint`, each resource owned as
    /// [`Layout::START`] has it and running, the start manifest applied.
    /// When that fails, its control plane is stopped and its state kept.
    pub async fn start(blueprint: Blueprint<'_>) -> anyhow::Result<World> {
        let state = tempfile::Builder::new()
            .prefix(&format!("camelk-chaos-{}-", blueprint.scenario))
            .tempdir()?
            .keep();
        match World::start_in(&state, blueprint).await {
            Ok(world) => Ok(world),
            Err(e) => {
                cluster::stop(&ClusterDir::new(state.join("cluster")));
                Err(e.context(format!("state kept in {}", state.display())))
            }
        }
    }

    async fn start_in(state: &std::path::Path, blueprint: Blueprint<'_>) -> anyhow::Result<World> {
        let Blueprint {
            scenario,
            n,
            plumbing,
            flavour,
            handlers,
        } = blueprint;
        let dir = ClusterDir::new(state.join("cluster"));
        let opts = StartOptions {
            dir: dir.clone(),
            bin_dir: camelk_testkit::binaries::control_plane_bin_dir()?,
            crds: CrdSource::locate(),
        };
        let started = cluster::start(&opts).await?;
        // The certificate names 127.0.0.1, which a proxy listens on too.
        let api_server: std::net::SocketAddr = started
            .server
            .trim_start_matches("https://")
            .trim_end_matches('/')
            .parse()?;
        // Stopped even if this process is killed; the state stays for Drop.
        let cluster = TestCluster::guard(dir, &[])?;
        let admin = cluster.admin().await;
        cluster.grant_camelk_roles().await;
        support::install_assignment_crd(&cluster).await;
        let namespace: Namespace = serde_json::from_value(json!({ "metadata": { "name": NS } }))?;
        Api::<Namespace>::all(admin.clone())
            .create(&PostParams::default(), &namespace)
            .await?;
        cluster.grant_sync_namespace(NS).await;
        if flavour == Flavour::Upstream {
            camelk_testkit::admission::enforce_with_unowned_handler(
                &admin,
                NS,
                &["reconciler"],
                &["operator-1", "operator-2"],
                unowned_handler(flavour, handlers),
            )
            .await?;
        }

        let mut names = Vec::new();
        for i in 0..n {
            let kind = if i.is_multiple_of(2) {
                CamelKind::Integration
            } else {
                CamelKind::Pipe
            };
            names.push((kind, name_of(kind, i)));
        }

        let mut proxy = None;
        let mut operator1_server = None;
        if plumbing == Plumbing::Operator1 {
            let p = Proxy::start(api_server).await?;
            operator1_server = Some(p.addr);
            proxy = Some(p);
        }
        let identity = |base: &str| format!("{base}-{scenario}");
        let remote = GitRemote::new();
        remote.push(
            &manifest_at(flavour, handlers, n, Layout::START),
            "a to operator-1, b to operator-2",
        );
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
                let token = state.join("git-token");
                std::fs::write(&token, "chaos-token")?;
                let sync = support::start_sync_via(
                    NS,
                    &format!("http://{}/remote.git", p.addr),
                    &identity("r1"),
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
                let kubeconfig = through(cluster.dir(), p.addr, state)?;
                let url = format!("file://{}", remote.url().display());
                let sync = support::start_sync_via(
                    NS,
                    &url,
                    &identity("r1"),
                    &remote.cache("r1"),
                    &kubeconfig,
                    &[],
                );
                support::wait_lock_holder(&admin, NS, "camelk-reconciler-lock", &identity("r1"))
                    .await;
                standby = Some(support::start_sync(
                    &cluster,
                    NS,
                    &remote,
                    &identity("r2"),
                    &[],
                ));
                proxy = Some(p);
                sync
            }
            Plumbing::Direct | Plumbing::Operator1 => {
                support::start_sync(&cluster, NS, &remote, &identity("r1"), &[])
            }
        };
        let mut world = World {
            cluster,
            admin,
            remote,
            operators: Vec::new(),
            flavour,
            handlers,
            operator1_server,
            sync,
            names,
            before: BTreeMap::new(),
            layout: Layout::START,
            proxy,
            standby,
            settled_revision: String::new(),
            since: Since {
                revision: 0,
                at: k8s_openapi::jiff::Timestamp::now(),
                instant: Instant::now(),
            },
            tag: scenario.to_string(),
            stalled: Mutex::default(),
            _git_server: git_server,
            state: state.to_path_buf(),
            // Until the start succeeds: a failed one is looked at afterwards.
            keep_state: true,
        };
        for id in ["operator-1", "operator-2"] {
            let operator = world.start_operator(id, id).await?;
            world.operators.push(operator);
        }
        // Created once the operators run, as users install Camel K before
        // `kamel run`: an upstream (v2.10.1) Integration that had waited for
        // its platform was seen building a kit despite its image, and no
        // build can succeed here.
        futures::stream::iter(world.names.iter().enumerate())
            .map(|(i, (kind, name))| {
                let api = api(&world.admin, *kind);
                async move {
                    api.create(&PostParams::default(), &object(*kind, name, i, flavour))
                        .await
                }
            })
            .buffer_unordered(16)
            .try_collect::<Vec<_>>()
            .await?;
        let head = world.remote_head();
        world.settled_revision = head.clone();
        world
            .wait_status(flavour.patience(n), "the start manifest applied", |s| {
                s.last_applied_revision.as_deref() == Some(head.as_str())
            })
            .await?;
        world.wait_all_running().await?;
        world.before = world.fingerprints().await?;
        world.keep_state = false;
        Ok(world)
    }

    /// Starts operator `id` of the world's flavour as `identity` (reference
    /// operators; an upstream one acts as its id), through the proxy when it
    /// is operator-1 of [`Plumbing::Operator1`]; returns once it runs.
    pub async fn start_operator(&self, id: &str, identity: &str) -> anyhow::Result<Operator> {
        let server = self.operator1_server.filter(|_| id == "operator-1");
        Ok(match self.flavour {
            Flavour::Reference => {
                let identity = self.identity(identity);
                self.cluster.grant_operator(id, NS, NS).await;
                match server {
                    Some(addr) => {
                        let kubeconfig = through(self.cluster.dir(), addr, &self.state)?;
                        Operator::new(Process::Reference(support::spawn_operator(
                            id,
                            NS,
                            NS,
                            &identity,
                            "200ms",
                            &kubeconfig,
                        )))
                    }
                    None => Operator::new(Process::Reference(
                        support::start_operator(&self.cluster, id, NS, &identity, "200ms").await,
                    )),
                }
            }
            Flavour::Upstream => {
                let opts = UpstreamOptions {
                    server: server.map(|addr| format!("https://{addr}")),
                    // As in a Deployment: an operator that lost its lock
                    // (etcd stopped past its renew deadline) exits, and runs again.
                    restart_on_exit: true,
                    // Local, so that it handles resources with no owner key.
                    watch_namespace: match self.handlers {
                        Handlers::Both => NS.to_string(),
                        Handlers::None => String::new(),
                    },
                    ..UpstreamOptions::new(id)
                };
                let operator = upstream::start(self.cluster.dir(), &opts).await?;
                // Its platform, once: a restarted operator finds it Ready.
                operator.ready_platform(&self.admin).await?;
                Operator::new(Process::Upstream(operator))
            }
        })
    }

    /// Marks where a scenario begins: what it is judged on (the audit log,
    /// `Stalled` reports, operators going down) starts here. Waits until
    /// every resource runs under its owner, as a world ready for the first
    /// scenario does: a rollout is `Ready` before its last takeovers have
    /// all run again.
    pub async fn begin_scenario(&mut self) -> anyhow::Result<()> {
        self.wait_all_running().await?;
        let revision = camelk_testkit::audit::current_revision(&self.admin).await?;
        self.since = Since {
            revision,
            at: k8s_openapi::jiff::Timestamp::now(),
            instant: Instant::now(),
        };
        self.stalled.lock().unwrap().clear();
        Ok(())
    }

    /// The identity of process `base` (`r1`, `operator-2`, ...) in this world.
    pub fn identity(&self, base: &str) -> String {
        format!("{base}-{}", self.tag)
    }

    /// Keeps the state directory (audit log, process logs) for a look
    /// afterwards; returns where it is.
    pub fn keep(&mut self) -> std::path::PathBuf {
        self.keep_state = true;
        // The reconcilers log outside the state directory, where the next
        // world of the same scenario would write over them.
        for process in std::iter::once(&self.sync).chain(&self.standby) {
            if let Some(name) = process.log.file_name() {
                let _ = std::fs::copy(&process.log, self.state.join(name));
            }
        }
        self.state.clone()
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
                && let Some(status) = &o.status
            {
                if let Some(c) = status
                    .conditions
                    .iter()
                    .find(|c| c.type_ == "Stalled" && c.status == "True")
                {
                    let mut seen = self.stalled.lock().unwrap();
                    if !seen.iter().any(|s| s.message == c.message) {
                        seen.push(StallSeen {
                            at: Instant::now(),
                            reason: c.reason.clone(),
                            message: c.message.clone(),
                            target_not_alive: status
                                .rollout
                                .as_ref()
                                .and_then(|r| r.target_not_alive.clone()),
                        });
                    }
                }
                if check(status) {
                    return Ok(());
                }
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

    /// Waits until every created Integration, and the Integration of every
    /// created Pipe (named after it), runs under its [`World::layout`] owner. A watch
    /// keeps each Integration's owner and phase: listing them every few
    /// seconds instead cost the API server ~7 MB of JSON a look at 1,000 (an
    /// upstream Integration's status is long), in every world at once.
    async fn wait_all_running(&self) -> anyhow::Result<()> {
        type Seen = BTreeMap<String, (Option<String>, Option<String>)>;
        let state = |o: &DynamicObject| {
            let phase = camelk_reconciler::camel_k::phase(o).map(str::to_string);
            (
                o.metadata.name.clone().unwrap_or_default(),
                (owner_id(&o.metadata), phase),
            )
        };
        let running = |seen: &Seen, name: &str| matches!(seen.get(name), Some((Some(o), Some(p))) if o == self.layout.owner(name) && p == "Running");
        let waiting = |seen: &Seen| -> Vec<String> {
            self.names
                .iter()
                .filter(|(_, name)| !running(seen, name))
                .map(|(_, name)| match seen.get(name) {
                    Some((o, p)) => format!("{name} (owner {o:?}, phase {p:?})"),
                    None => format!("{name} (no Integration)"),
                })
                .collect()
        };
        let deadline = tokio::time::Instant::now() + self.flavour.patience(self.names.len());
        let mut events = std::pin::pin!(
            watcher(
                api(&self.admin, CamelKind::Integration),
                watcher::Config::default()
            )
            .default_backoff()
        );
        // What the watch's current list has delivered so far, and the view.
        let (mut listing, mut seen, mut listed) = (Seen::new(), Seen::new(), false);
        loop {
            let event = match tokio::time::timeout_at(deadline, events.next()).await {
                Ok(Some(Ok(event))) => event,
                // Backed off and retried by the watcher.
                Ok(Some(Err(_))) => continue,
                Ok(None) => anyhow::bail!("the watch of Integrations ended"),
                Err(_) => {
                    let waiting = waiting(&seen);
                    anyhow::bail!(
                        "{} of {} not running under their owner: {}",
                        waiting.len(),
                        self.names.len(),
                        waiting[..waiting.len().min(5)].join(", ")
                    );
                }
            };
            match event {
                watcher::Event::Init => listing.clear(),
                watcher::Event::InitApply(o) => {
                    let (name, s) = state(&o);
                    listing.insert(name, s);
                }
                watcher::Event::InitDone => {
                    seen = std::mem::take(&mut listing);
                    listed = true;
                }
                watcher::Event::Apply(o) => {
                    let (name, s) = state(&o);
                    seen.insert(name, s);
                }
                watcher::Event::Delete(o) => {
                    seen.remove(&state(&o).0);
                }
            }
            if listed && self.names.iter().all(|(_, name)| running(&seen, name)) {
                return Ok(());
            }
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
            .map(|(key, obj)| (key, owner_id(&obj.metadata)))
            .collect())
    }

    /// Kills every operator (SIGKILL: no lock released); they stay in
    /// [`World::operators`], down, for [`World::stalls`].
    pub fn kill_operators(&mut self) {
        for op in &mut self.operators {
            op.kill();
        }
    }

    /// How many `Stalled` reports the scenario saw (distinct messages), and
    /// the ones no real outage during it explains. A handoff to an operator that is down
    /// does stall, and saying so is right: the scenario killed it or cut it
    /// off from the API server, or, upstream, it exited when it could not renew its lock (etcd stopped
    /// past its renew deadline) and runs again after a back-off. So a report
    /// is explained only when the sync said that target was not alive
    /// (reason `TargetNotAlive`, the operator in `rollout.targetNotAlive`)
    /// and it had gone down before the report was seen.
    pub fn stalls(&self) -> (usize, Vec<String>) {
        let down_before = |id: &str, seen: Instant| {
            self.operators
                .iter()
                .filter(|o| o.id() == id)
                .flat_map(Operator::downs)
                .any(|at| self.since.instant <= at && at <= seen)
        };
        let seen = self.stalled.lock().unwrap();
        let unexplained = seen
            .iter()
            .filter(|s| match (s.reason.as_str(), &s.target_not_alive) {
                ("TargetNotAlive", Some(id)) => !down_before(id, s.at),
                _ => true,
            })
            .map(|s| format!("{}: {}", s.reason, s.message))
            .collect();
        (seen.len(), unexplained)
    }

    /// Whether the sync said `reason` in an Event about the assignment.
    pub async fn event_seen(&self, reason: &str) -> anyhow::Result<bool> {
        Ok(Api::<Event>::namespaced(self.admin.clone(), NS)
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some(reason)))
    }

    /// Requests of `user` that API Priority and Fairness refused (429)
    /// during the scenario.
    pub fn throttled_requests(&self, user: &str) -> anyhow::Result<usize> {
        Ok(self
            .cluster
            .audit_log()
            .events()?
            .iter()
            .filter(|e| self.since.includes(e) && e.user.username == user && e.code() == Some(429))
            .count())
    }

    /// Operator writes to Camel K resources in `apps` that the audit log
    /// records as failed by the server (5xx). A SIGKILLed client's request
    /// in flight is logged so (504, no response object) even when etcd
    /// committed it: a release flip among them leaves the owner change out
    /// of the histories the judge reads, which is why the judge accepts a
    /// write whose own fence tested its writer as the owner.
    pub fn operator_writes_failed_by_server(&self) -> anyhow::Result<usize> {
        self.operator_answers_counted(|e| {
            ["create", "update", "patch"].contains(&e.verb.as_str())
                && e.object_ref
                    .as_ref()
                    .is_some_and(|o| o.api_group.as_deref() == Some("camel.apache.org"))
                && e.code().is_some_and(|c| c >= 500)
        })
    }

    /// Operator requests on Camel K resources of `apps` named one of `names`
    /// that the admission policy refused (403).
    pub fn operator_writes_refused(&self, names: &[&str]) -> anyhow::Result<usize> {
        self.operator_answers_counted(|e| {
            e.code() == Some(403)
                && e.object_ref.as_ref().is_some_and(|o| {
                    o.api_group.as_deref() == Some("camel.apache.org")
                        && o.name.as_deref().is_some_and(|n| names.contains(&n))
                })
        })
    }

    /// How many requests of `apps` by an operator identity the audit log
    /// records as answered (stage `ResponseComplete`) during the scenario and
    /// `matching` holds for.
    fn operator_answers_counted(
        &self,
        matching: impl Fn(&camelk_testkit::AuditEvent) -> bool,
    ) -> anyhow::Result<usize> {
        Ok(self
            .cluster
            .audit_log()
            .events_in(NS)?
            .iter()
            .filter(|e| {
                e.stage == "ResponseComplete"
                    && self.since.includes(e)
                    && ["operator-1", "operator-2"].contains(&e.user.username.as_str())
                    && matching(e)
            })
            .count())
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

    /// The writes the scenario's moves cost (owner-key changes of Camel K
    /// resources and writes of handoff request Leases, by anyone), the moves
    /// (owner changes, Integrations of Pipes included), and dual-owner
    /// writes, from the audit log. The judge reads the whole history (who
    /// owned what when) and reports the writes made since the scenario began.
    pub fn audit(&self) -> anyhow::Result<(usize, usize, Vec<String>)> {
        let events = self.cluster.audit_log().events_in(NS)?;
        // Moves between operators: the first label an upstream resource gets
        // (adoption, from no owner label) is not one.
        let flips = support::owner_changes(&self.cluster, NS)
            .iter()
            .filter(|c| {
                c.resource_version > self.since.revision && c.from.is_some() && c.to.is_some()
            })
            .count();
        let requests = events
            .iter()
            .filter(|e| {
                e.stage == "ResponseComplete"
                    && self.since.includes(e)
                    && e.is_successful_write()
                    && e.object_ref.as_ref().is_some_and(|o| {
                        o.resource == "leases"
                            && !o.name.as_deref().unwrap_or_default().ends_with("-lock")
                    })
            })
            .count();
        let writes = flips + requests;
        // The operator the policy lets write what has no owner yet may.
        let violations = camelk_testkit::audit::single_owner_violations_after(
            &events,
            NS,
            &["operator-1", "operator-2"],
            unowned_handler(self.flavour, self.handlers),
            self.since.revision,
        );
        Ok((writes, flips, violations))
    }
}

/// A copy of the cluster's kubeconfig that dials `proxy` (the certificate
/// names 127.0.0.1, which the proxy listens on too).
fn through(
    cluster: &ClusterDir,
    proxy: std::net::SocketAddr,
    dir: &std::path::Path,
) -> anyhow::Result<std::path::PathBuf> {
    let path = dir.join(format!("kubeconfig-{}", proxy.port()));
    cluster::write_kubeconfig_copy(cluster, Some(&format!("https://{proxy}")), None, &path)?;
    Ok(path)
}

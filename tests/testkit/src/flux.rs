//! Real Flux controllers on a local control plane: `source-controller` and
//! `kustomize-controller` of the release `tests/flux/build.sh` pins, each run
//! as a process of its own under the identity Flux gives it in a cluster, so
//! that a test sees what Flux really writes, and the audit log says who wrote it.
//!
//! # Expected flow of [`start`]
//! 1. Build the controllers and copy their CRDs (once per pinned release, then
//!    cached: [`crate::binaries::flux_dir`]).
//! 2. Install the CRDs by server-side apply and wait until they are served.
//! 3. Create the namespace [`NAMESPACE`], the ServiceAccounts
//!    [`SOURCE_CONTROLLER`] and [`KUSTOMIZE_CONTROLLER`] in it, and the RBAC of
//!    Flux's default install: the ClusterRole [`CRD_CONTROLLER_ROLE`] (Flux's
//!    own kinds; reading namespaces, secrets, config maps and service
//!    accounts; events; leases) bound to both, and `cluster-admin` bound to
//!    kustomize-controller ([`CLUSTER_RECONCILER_BINDING`]).
//! 4. Ask the TokenRequest API for a token of each ServiceAccount and write a
//!    kubeconfig holding it: the API server, and so its audit log, knows each
//!    controller as `system:serviceaccount:flux-system:<name>`
//!    ([`service_account_user`]), as in a cluster.
//! 5. Start source-controller (its artifacts stored under the cluster's
//!    directory, served and advertised on a loopback port, where
//!    kustomize-controller fetches them), then kustomize-controller; wait
//!    until each one's `/readyz` answers.
//!
//! # Guarantees
//! - Steps 2 and 3 are idempotent: every test of a binary sharing one control
//!   plane ([`crate::shared`]) may start a Flux of its own.
//! - Each process is killed when the [`Flux`] handle drops and, through a
//!   [`Watchdog`], when the test process exits in any way.
//! - Their logs are `logs/source-controller-<namespace>.log` and
//!   `logs/kustomize-controller-<namespace>.log` in the cluster's directory
//!   (without `-<namespace>` when watching every namespace).
//!
//! # Assumptions
//! - The API server signs service-account tokens (`--service-account-issuer`
//!   and `--service-account-signing-key-file`, as [`crate::cluster::start`]
//!   starts it).
//!
//! # Caveats
//! - Flux takes no `--kubeconfig` flag: its flags are `pflag`'s, and
//!   controller-runtime registers `--kubeconfig` on Go's own flag set, which
//!   Flux never parses. The kubeconfig is given in `KUBECONFIG`.
//! - Two Flux instances watching one namespace would both reconcile its
//!   objects: [`FluxOptions::watching`] keeps each test's Flux to its namespace.
//! - Flux puts finalizers on its objects: delete them while Flux runs
//!   ([`Flux::delete`]), or their namespace stays `Terminating` (harmless on
//!   a test binary's own control plane, not on a reused one).
//! - The tokens last [`TOKEN_LIFETIME`]; nothing renews them.
//!
//! ```no_run
//! # async fn example() -> Result<(), camelk_testkit::Error> {
//! use camelk_testkit::flux::{self, FluxOptions, GitRepositorySpec, KustomizationSpec};
//! let cluster = camelk_testkit::shared();
//! let ns = cluster.namespace("flux").await;
//! let flux = flux::start(cluster.dir(), &FluxOptions::watching(&ns.name)).await?;
//! flux.create_basic_auth_secret(&ns.name, "git", "user", "password").await?;
//! let repo = GitRepositorySpec::new("apps", "http://127.0.0.1:8080/apps.git").secret_ref("git");
//! flux.create_git_repository(&ns.name, &repo).await?;
//! flux.create_kustomization(&ns.name, &KustomizationSpec::new("apps", "apps", "./apps")).await?;
//! let revision = flux::git_revision("main", "0123456789abcdef0123456789abcdef01234567");
//! flux.wait_kustomization_ready(&ns.name, "apps", &revision, std::time::Duration::from_secs(90))
//!     .await?;
//! # Ok(())
//! # }
//! ```

use std::fs;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams,
};
use kube::config::Kubeconfig;
use serde_json::json;

use crate::Error;
use crate::cluster::{self, ClusterDir, io};
use crate::crds::{self, CrdSource};
use crate::identity::ADMIN;
use crate::watchdog::Watchdog;

/// The namespace Flux runs in, where its ServiceAccounts live.
pub const NAMESPACE: &str = "flux-system";
/// The controller that fetches sources and serves them as artifacts.
pub const SOURCE_CONTROLLER: &str = "source-controller";
/// The controller that applies artifacts to the cluster.
pub const KUSTOMIZE_CONTROLLER: &str = "kustomize-controller";
/// The ClusterRole Flux's default install gives its controllers.
pub const CRD_CONTROLLER_ROLE: &str = "crd-controller-flux-system";
/// The binding of `cluster-admin` to kustomize-controller in Flux's default install.
pub const CLUSTER_RECONCILER_BINDING: &str = "cluster-reconciler-flux-system";
/// The annotation `flux reconcile` sets to ask for a reconcile now.
pub const REQUESTED_AT_ANNOTATION: &str = "reconcile.fluxcd.io/requestedAt";
/// How long the controllers' tokens are valid: longer than any test runs.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(24 * 3600);

const FIELD_MANAGER: &str = "camelk-testkit";
/// On 2 busy cores a controller's first start (its caches filled) takes a
/// few seconds; a minute means it is broken.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(250);

/// How to run Flux.
#[derive(Clone, Debug, Default)]
pub struct FluxOptions {
    /// Reconcile only the Flux objects of this namespace
    /// (`--watch-all-namespaces=false` and `RUNTIME_NAMESPACE`), so that
    /// tests sharing a control plane may each run a Flux; `None`: every
    /// namespace, as Flux's default install does.
    pub watch_namespace: Option<String>,
    /// `--log-level` (`info` when unset; or `debug`, `trace`, `error`).
    pub log_level: Option<String>,
}

impl FluxOptions {
    /// A Flux that reconciles only the objects of `namespace`.
    pub fn watching(namespace: &str) -> FluxOptions {
        FluxOptions {
            watch_namespace: Some(namespace.into()),
            log_level: None,
        }
    }
}

/// `system:serviceaccount:flux-system:<controller>`: the user the API
/// server knows a Flux controller as.
pub fn service_account_user(controller: &str) -> String {
    format!("system:serviceaccount:{NAMESPACE}:{controller}")
}

/// The revision Flux gives a Git commit of `branch`, as in a Kustomization's
/// `status.lastAppliedRevision`: `main@sha1:<40 hex digits>`.
pub fn git_revision(branch: &str, commit: &str) -> String {
    format!("{branch}@sha1:{commit}")
}

/// The kinds the helpers of [`Flux`] write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FluxKind {
    GitRepository,
    Kustomization,
}

impl FluxKind {
    /// Its API resource (version `v1` of Flux's groups).
    pub fn api_resource(self) -> ApiResource {
        let (group, kind, plural) = match self {
            FluxKind::GitRepository => (
                "source.toolkit.fluxcd.io",
                "GitRepository",
                "gitrepositories",
            ),
            FluxKind::Kustomization => (
                "kustomize.toolkit.fluxcd.io",
                "Kustomization",
                "kustomizations",
            ),
        };
        ApiResource {
            group: group.into(),
            version: "v1".into(),
            api_version: format!("{group}/v1"),
            kind: kind.into(),
            plural: plural.into(),
        }
    }
}

/// A `GitRepository` to create: a branch of a Git URL, fetched every `interval`.
#[derive(Clone, Debug)]
pub struct GitRepositorySpec {
    pub name: String,
    /// `http(s)://` or `ssh://`: source-controller takes no other scheme.
    pub url: String,
    pub branch: String,
    pub interval: Duration,
    /// A Secret of the same namespace with `username` and `password` (Basic authentication).
    pub secret_ref: Option<String>,
}

impl GitRepositorySpec {
    /// Branch `main`, fetched every minute, no credentials.
    pub fn new(name: &str, url: &str) -> GitRepositorySpec {
        GitRepositorySpec {
            name: name.into(),
            url: url.into(),
            branch: "main".into(),
            interval: Duration::from_secs(60),
            secret_ref: None,
        }
    }

    pub fn branch(mut self, branch: &str) -> GitRepositorySpec {
        self.branch = branch.into();
        self
    }

    pub fn interval(mut self, interval: Duration) -> GitRepositorySpec {
        self.interval = interval;
        self
    }

    pub fn secret_ref(mut self, secret: &str) -> GitRepositorySpec {
        self.secret_ref = Some(secret.into());
        self
    }

    /// The object, in `namespace`.
    pub fn to_object(&self, namespace: &str) -> DynamicObject {
        let mut spec = json!({
            "url": self.url,
            "interval": go_duration(self.interval),
            "ref": { "branch": self.branch },
        });
        if let Some(secret) = &self.secret_ref {
            spec["secretRef"] = json!({ "name": secret });
        }
        flux_object(FluxKind::GitRepository, namespace, &self.name, spec)
    }
}

/// A `Kustomization` to create: a folder of a GitRepository's artifact,
/// applied every `interval`.
#[derive(Clone, Debug)]
pub struct KustomizationSpec {
    pub name: String,
    /// The GitRepository (same namespace) whose artifact is applied.
    pub source: String,
    /// The folder in the artifact (`./apps`); without a `kustomization.yaml`
    /// there, Flux applies every manifest under it.
    pub path: String,
    pub interval: Duration,
    /// Delete what a later revision no longer holds (and everything, when
    /// the Kustomization is deleted).
    pub prune: bool,
    /// Put every namespaced object in this namespace.
    pub target_namespace: Option<String>,
    /// Ready only once every applied object is ready (kstatus).
    pub wait: bool,
    /// How long an apply and its `wait` may take (Flux's default: the interval).
    pub timeout: Option<Duration>,
    /// Apply as this ServiceAccount (of the Kustomization's namespace),
    /// impersonated, instead of as kustomize-controller itself.
    pub service_account_name: Option<String>,
}

impl KustomizationSpec {
    /// `path` of GitRepository `source`, applied every minute, pruned, no wait.
    pub fn new(name: &str, source: &str, path: &str) -> KustomizationSpec {
        KustomizationSpec {
            name: name.into(),
            source: source.into(),
            path: path.into(),
            interval: Duration::from_secs(60),
            prune: true,
            target_namespace: None,
            wait: false,
            timeout: None,
            service_account_name: None,
        }
    }

    pub fn interval(mut self, interval: Duration) -> KustomizationSpec {
        self.interval = interval;
        self
    }

    pub fn prune(mut self, prune: bool) -> KustomizationSpec {
        self.prune = prune;
        self
    }

    pub fn target_namespace(mut self, namespace: &str) -> KustomizationSpec {
        self.target_namespace = Some(namespace.into());
        self
    }

    pub fn wait(mut self, wait: bool) -> KustomizationSpec {
        self.wait = wait;
        self
    }

    pub fn timeout(mut self, timeout: Duration) -> KustomizationSpec {
        self.timeout = Some(timeout);
        self
    }

    pub fn service_account_name(mut self, name: &str) -> KustomizationSpec {
        self.service_account_name = Some(name.into());
        self
    }

    /// The object, in `namespace`.
    pub fn to_object(&self, namespace: &str) -> DynamicObject {
        let mut spec = json!({
            "interval": go_duration(self.interval),
            "path": self.path,
            "prune": self.prune,
            "wait": self.wait,
            "sourceRef": { "kind": "GitRepository", "name": self.source },
        });
        if let Some(target) = &self.target_namespace {
            spec["targetNamespace"] = json!(target);
        }
        if let Some(account) = &self.service_account_name {
            spec["serviceAccountName"] = json!(account);
        }
        if let Some(timeout) = self.timeout {
            spec["timeout"] = json!(go_duration(timeout));
        }
        flux_object(FluxKind::Kustomization, namespace, &self.name, spec)
    }
}

fn flux_object(
    kind: FluxKind,
    namespace: &str,
    name: &str,
    spec: serde_json::Value,
) -> DynamicObject {
    let resource = kind.api_resource();
    let mut object = DynamicObject::new(name, &resource).within(namespace);
    object.data = json!({ "spec": spec });
    object
}

/// A duration as Go's `time.ParseDuration` reads it, which Flux's
/// `interval` fields take (`90s`, `1500ms`).
fn go_duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// Running Flux controllers; killed when dropped. Its helpers act as `admin`,
/// as a cluster administrator creating Flux objects would.
pub struct Flux {
    // Dropped first: kustomize-controller stops before the source it reads.
    kustomize: Controller,
    source: Controller,
    admin: Client,
    storage_address: String,
}

/// [`start`] watching namespace `namespace` only, as a test runs Flux;
/// panics when it does not start.
pub async fn start_watching(dir: &ClusterDir, namespace: &str) -> Flux {
    start(dir, &FluxOptions::watching(namespace))
        .await
        .unwrap_or_else(|e| panic!("starting Flux: {e}"))
}

/// Starts source-controller and kustomize-controller on the cluster in `dir`
/// (see the module doc for the flow).
pub async fn start(dir: &ClusterDir, opts: &FluxOptions) -> Result<Flux, Error> {
    let flux_dir = crate::binaries::flux_dir()?;
    let admin = cluster::client_for(dir, ADMIN).await?;
    crds::install(&admin, &CrdSource::Upstream(flux_dir.join("crds")).load()?).await?;
    ensure_namespace(&admin, NAMESPACE).await?;
    for controller in [SOURCE_CONTROLLER, KUSTOMIZE_CONTROLLER] {
        ensure_service_account(&admin, controller).await?;
    }
    apply_rbac(&admin).await?;

    let home = dir
        .root()
        .join("flux")
        .join(opts.watch_namespace.as_deref().unwrap_or("all"));
    let storage = home.join("storage");
    fs::create_dir_all(&storage).map_err(io("creating Flux's artifact storage"))?;
    fs::create_dir_all(dir.root().join("logs")).map_err(io("creating the logs directory"))?;
    let launcher = Launcher {
        dir,
        flux_dir: &flux_dir,
        home: &home,
        opts,
    };
    let [storage_port] = cluster::free_ports()?;
    let storage_address = format!("127.0.0.1:{storage_port}");

    let mut source = launcher.spawn(
        SOURCE_CONTROLLER,
        &launcher.kubeconfig(&admin, SOURCE_CONTROLLER).await?,
        &[
            format!("--storage-path={}", storage.display()),
            format!("--storage-addr={storage_address}"),
            // The host in the artifact URLs kustomize-controller downloads.
            format!("--storage-adv-addr={storage_address}"),
        ],
    )?;
    source.wait_ready(READY_TIMEOUT).await?;
    // The artifact server starts once the manager leads (at once, without
    // leader election), a moment after `/readyz`.
    source.wait_port_open(storage_port, READY_TIMEOUT).await?;

    let mut kustomize = launcher.spawn(
        KUSTOMIZE_CONTROLLER,
        &launcher.kubeconfig(&admin, KUSTOMIZE_CONTROLLER).await?,
        // Remote bases would be fetched from the internet, which tests never use.
        &["--no-remote-bases=true".to_string()],
    )?;
    kustomize.wait_ready(READY_TIMEOUT).await?;
    Ok(Flux {
        kustomize,
        source,
        admin,
        storage_address,
    })
}

impl Flux {
    /// `host:port` of source-controller's artifact server.
    pub fn storage_address(&self) -> &str {
        &self.storage_address
    }

    /// source-controller's log.
    pub fn source_log(&self) -> &Path {
        &self.source.log
    }

    /// kustomize-controller's log.
    pub fn kustomize_log(&self) -> &Path {
        &self.kustomize.log
    }

    /// The last `lines` lines of both controllers' logs, each under its name.
    pub fn log_tail(&self, lines: usize) -> String {
        format!(
            "{SOURCE_CONTROLLER} log:\n{}\n{KUSTOMIZE_CONTROLLER} log:\n{}",
            tail(&self.source.log, lines),
            tail(&self.kustomize.log, lines)
        )
    }

    /// Creates the Secret a GitRepository's `secretRef` names for HTTP Basic
    /// authentication (`username`, `password`).
    pub async fn create_basic_auth_secret(
        &self,
        namespace: &str,
        name: &str,
        username: &str,
        password: &str,
    ) -> Result<Secret, Error> {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(namespace.into()),
                ..Default::default()
            },
            string_data: Some(
                [
                    ("username".to_string(), username.to_string()),
                    ("password".to_string(), password.to_string()),
                ]
                .into(),
            ),
            ..Default::default()
        };
        Ok(Api::<Secret>::namespaced(self.admin.clone(), namespace)
            .create(&PostParams::default(), &secret)
            .await?)
    }

    /// Points Flux at `path` of the apps repository at `url` (served with
    /// [`crate::apps_repo`]'s credentials), as a platform team does: the
    /// Basic-auth Secret, a GitRepository and a pruning Kustomization that
    /// applies into `namespace`, all named `name` and reconciled every
    /// `interval`.
    pub async fn deploy(
        &self,
        namespace: &str,
        name: &str,
        url: &str,
        path: &str,
        interval: Duration,
    ) -> Result<(), Error> {
        use crate::apps_repo::{BRANCH, GIT_PASSWORD, GIT_USER};
        let secret = format!("{name}-git");
        self.create_basic_auth_secret(namespace, &secret, GIT_USER, GIT_PASSWORD)
            .await?;
        let repository = GitRepositorySpec::new(name, url)
            .branch(BRANCH)
            .secret_ref(&secret)
            .interval(interval);
        self.create_git_repository(namespace, &repository).await?;
        let kustomization = KustomizationSpec::new(name, name, path)
            .target_namespace(namespace)
            .prune(true)
            .interval(interval);
        self.create_kustomization(namespace, &kustomization).await?;
        Ok(())
    }

    /// Creates a GitRepository in `namespace`.
    pub async fn create_git_repository(
        &self,
        namespace: &str,
        spec: &GitRepositorySpec,
    ) -> Result<DynamicObject, Error> {
        self.create(
            FluxKind::GitRepository,
            namespace,
            &spec.to_object(namespace),
        )
        .await
    }

    /// Creates a Kustomization in `namespace`.
    pub async fn create_kustomization(
        &self,
        namespace: &str,
        spec: &KustomizationSpec,
    ) -> Result<DynamicObject, Error> {
        self.create(
            FluxKind::Kustomization,
            namespace,
            &spec.to_object(namespace),
        )
        .await
    }

    async fn create(
        &self,
        kind: FluxKind,
        namespace: &str,
        object: &DynamicObject,
    ) -> Result<DynamicObject, Error> {
        Ok(self
            .api(kind, namespace)
            .create(&PostParams::default(), object)
            .await?)
    }

    /// Asks for a reconcile now, as `flux reconcile` does: sets
    /// [`REQUESTED_AT_ANNOTATION`] to the current time, which the controller
    /// copies to `status.lastHandledReconcileAt` once it has acted on it.
    /// Returns the value set.
    pub async fn request_reconcile(
        &self,
        kind: FluxKind,
        namespace: &str,
        name: &str,
    ) -> Result<String, Error> {
        let requested_at = Timestamp::now().to_string();
        let patch =
            json!({ "metadata": { "annotations": { REQUESTED_AT_ANNOTATION: requested_at } } });
        self.api(kind, namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(requested_at)
    }

    /// [`Flux::wait_kustomization_ready`] for `commit` of the branch the
    /// tests' repositories serve ([`crate::apps_repo::BRANCH`]).
    pub async fn wait_commit_applied(
        &self,
        namespace: &str,
        name: &str,
        commit: &str,
        timeout: Duration,
    ) -> Result<DynamicObject, Error> {
        let revision = git_revision(crate::apps_repo::BRANCH, commit);
        self.wait_kustomization_ready(namespace, name, &revision, timeout)
            .await
    }

    /// Waits until Kustomization `namespace/name` is `Ready=True` for its
    /// current generation with `revision` ([`git_revision`]) applied; returns
    /// it. On timeout the error holds its last conditions and names the one
    /// that changed last, with the tails of both controllers' logs.
    pub async fn wait_kustomization_ready(
        &self,
        namespace: &str,
        name: &str,
        revision: &str,
        timeout: Duration,
    ) -> Result<DynamicObject, Error> {
        let api = self.api(FluxKind::Kustomization, namespace);
        let deadline = Instant::now() + timeout;
        loop {
            let live = api.get_opt(name).await?;
            if let Some(kustomization) = &live
                && is_ready_at(kustomization, revision)
            {
                return Ok(live.expect("just matched"));
            }
            if Instant::now() >= deadline {
                let conditions = live.as_ref().map(conditions).unwrap_or_default();
                let applied = live
                    .as_ref()
                    .and_then(|k| k.data["status"]["lastAppliedRevision"].as_str())
                    .unwrap_or("none");
                let message = format!(
                    "not Ready at {revision} after {timeout:?} (last applied: {applied}); \
                     last condition: {}; conditions: {}\n{}",
                    last_condition(&conditions).map_or("none".into(), describe),
                    conditions
                        .iter()
                        .map(describe)
                        .collect::<Vec<_>>()
                        .join("; "),
                    self.log_tail(20)
                );
                return Err(Error::NotReady {
                    object: format!("Kustomization {namespace}/{name}"),
                    conditions,
                    message,
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Deletes a Flux object and waits until it is gone, i.e. until its
    /// controller has finished with it and removed its finalizer (a
    /// Kustomization with `prune` first deletes what it applied).
    pub async fn delete(
        &self,
        kind: FluxKind,
        namespace: &str,
        name: &str,
        timeout: Duration,
    ) -> Result<(), Error> {
        let api = self.api(kind, namespace);
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        let deadline = Instant::now() + timeout;
        while let Some(live) = api.get_opt(name).await? {
            if Instant::now() >= deadline {
                let conditions = conditions(&live);
                return Err(Error::NotReady {
                    object: format!("{:?} {namespace}/{name}", kind),
                    message: format!(
                        "still there {timeout:?} after its deletion (finalizers {:?}); last condition: {}\n{}",
                        live.metadata.finalizers.unwrap_or_default(),
                        last_condition(&conditions).map_or("none".into(), describe),
                        self.log_tail(20)
                    ),
                    conditions,
                });
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(())
    }

    fn api(&self, kind: FluxKind, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.admin.clone(), namespace, &kind.api_resource())
    }
}

/// Whether `kustomization` is `Ready=True` for its current generation, with
/// `revision` applied.
pub fn is_ready_at(kustomization: &DynamicObject, revision: &str) -> bool {
    let status = &kustomization.data["status"];
    let current = status["observedGeneration"].as_i64().is_some()
        && status["observedGeneration"].as_i64() == kustomization.metadata.generation;
    current
        && status["lastAppliedRevision"].as_str() == Some(revision)
        && conditions(kustomization)
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// The `status.conditions` of a Flux object (none when unreadable).
pub fn conditions(object: &DynamicObject) -> Vec<Condition> {
    serde_json::from_value(object.data["status"]["conditions"].clone()).unwrap_or_default()
}

/// The condition that changed last (the latest `lastTransitionTime`).
fn last_condition(conditions: &[Condition]) -> Option<&Condition> {
    conditions.iter().max_by_key(|c| c.last_transition_time.0)
}

/// `Ready=False (ArtifactFailed): message`.
fn describe(condition: &Condition) -> String {
    format!(
        "{}={} ({}): {}",
        condition.type_, condition.status, condition.reason, condition.message
    )
}

/// One controller process.
struct Controller {
    name: &'static str,
    child: Child,
    // Kills the controller if this process exits first.
    watchdog: Option<Watchdog>,
    log: PathBuf,
    health_port: u16,
}

/// What both controllers of one [`start`] share: the cluster, the built
/// release, their folder and options.
struct Launcher<'a> {
    dir: &'a ClusterDir,
    flux_dir: &'a Path,
    home: &'a Path,
    opts: &'a FluxOptions,
}

impl Launcher<'_> {
    /// A kubeconfig for controller `name` holding a fresh token of its
    /// ServiceAccount.
    async fn kubeconfig(&self, admin: &Client, name: &str) -> Result<PathBuf, Error> {
        let path = self.home.join(format!("{name}.kubeconfig"));
        let token = request_token(admin, name).await?;
        write_kubeconfig(self.dir, name, &token, &path)?;
        Ok(path)
    }

    /// `logs/<name>-<namespace>.log`, or `logs/<name>.log` watching all.
    fn log(&self, name: &str) -> PathBuf {
        self.dir.log(&match &self.opts.watch_namespace {
            Some(ns) => format!("{name}-{ns}"),
            None => name.to_string(),
        })
    }

    /// Starts controller `name` as `kubeconfig`'s user with the flags every
    /// Flux controller takes, then `extra`.
    fn spawn(
        &self,
        name: &'static str,
        kubeconfig: &Path,
        extra: &[String],
    ) -> Result<Controller, Error> {
        let opts = self.opts;
        let log = self.log(name);
        let [metrics_port, health_port] = cluster::free_ports()?;
        let binary = self.flux_dir.join("bin").join(name);
        let mut command = Command::new(&binary);
        command
            .args([
                "--enable-leader-election=false".to_string(),
                format!("--metrics-addr=127.0.0.1:{metrics_port}"),
                format!("--health-addr=127.0.0.1:{health_port}"),
                format!("--watch-all-namespaces={}", opts.watch_namespace.is_none()),
                // Two cores: Flux's defaults are 2 (source) and 4 (kustomize).
                "--concurrent=2".to_string(),
                format!(
                    "--log-level={}",
                    opts.log_level.as_deref().unwrap_or("info")
                ),
            ])
            .args(extra)
            .current_dir(self.home)
            .env("KUBECONFIG", kubeconfig)
            // The namespace Flux watches when not watching all; in a cluster
            // the Deployment sets it to Flux's own (downward API).
            .env(
                "RUNTIME_NAMESPACE",
                opts.watch_namespace.as_deref().unwrap_or(NAMESPACE),
            )
            // Keep a developer's ~/.docker, ~/.gitconfig and the like out.
            .env("HOME", self.home)
            // Read by Flux, and would override what the flags set up.
            .env_remove("EVENTS_ADDR")
            .env_remove("SOURCE_CONTROLLER_LOCALHOST")
            .env_remove("SOURCE_WATCHER_LOCALHOST");
        let child = cluster::spawn_logged(&mut command, name, &log)?;
        let watchdog = Watchdog::kill_on_exit(child.id()).ok();
        Ok(Controller {
            name,
            child,
            watchdog,
            log,
            health_port,
        })
    }
}

impl Controller {
    /// Waits until `/readyz` answers 200; fails at once if the process exits.
    async fn wait_ready(&mut self, timeout: Duration) -> Result<(), Error> {
        let port = self.health_port;
        self.wait_until(timeout, "/readyz not ok", move || {
            crate::upstream::http_ok(port, "/readyz")
        })
        .await
    }

    /// Waits until something listens on loopback `port`.
    async fn wait_port_open(&mut self, port: u16, timeout: Duration) -> Result<(), Error> {
        self.wait_until(timeout, &format!("port {port} not open"), move || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        })
        .await
    }

    async fn wait_until(
        &mut self,
        timeout: Duration,
        what: &str,
        done: impl Fn() -> bool,
    ) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        loop {
            if done() {
                return Ok(());
            }
            let exited = self.child.try_wait().ok().flatten();
            if exited.is_some() || Instant::now() >= deadline {
                let why = match exited {
                    Some(status) => format!("exited with {status}"),
                    None => format!("{what} after {timeout:?}"),
                };
                return Err(Error::Start {
                    process: self.name.into(),
                    message: format!("{why}; log:\n{}", tail(&self.log, 30)),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        crate::watchdog::kill_and_reap(&mut self.child, &mut self.watchdog);
    }
}

async fn ensure_namespace(admin: &Client, name: &str) -> Result<(), Error> {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    match Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &namespace)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn ensure_service_account(admin: &Client, name: &str) -> Result<(), Error> {
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NAMESPACE.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    match Api::<ServiceAccount>::namespaced(admin.clone(), NAMESPACE)
        .create(&PostParams::default(), &account)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Applies the ClusterRole and the two ClusterRoleBindings of Flux's default
/// install (server-side apply: idempotent).
async fn apply_rbac(admin: &Client) -> Result<(), Error> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    Api::<ClusterRole>::all(admin.clone())
        .patch(
            CRD_CONTROLLER_ROLE,
            &params,
            &Patch::Apply(&crd_controller_role()),
        )
        .await?;
    let bindings = Api::<ClusterRoleBinding>::all(admin.clone());
    for binding in [
        binding(
            CRD_CONTROLLER_ROLE,
            CRD_CONTROLLER_ROLE,
            &[SOURCE_CONTROLLER, KUSTOMIZE_CONTROLLER],
        ),
        binding(
            CLUSTER_RECONCILER_BINDING,
            "cluster-admin",
            &[KUSTOMIZE_CONTROLLER],
        ),
    ] {
        let name = binding.metadata.name.clone().unwrap_or_default();
        bindings
            .patch(&name, &params, &Patch::Apply(&binding))
            .await?;
    }
    Ok(())
}

/// What every Flux controller may do: anything to Flux's own kinds; read
/// the namespaces, secrets (credentials), config maps and service accounts
/// its objects name; record events; hold leases (leader election, off
/// here); and request tokens (object-level workload identity).
fn crd_controller_role() -> ClusterRole {
    let rule = |groups: &[&str], resources: &[&str], verbs: &[&str]| PolicyRule {
        api_groups: Some(groups.iter().map(|g| g.to_string()).collect()),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    };
    let read = ["get", "list", "watch"];
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(CRD_CONTROLLER_ROLE.into()),
            ..Default::default()
        },
        rules: Some(vec![
            rule(
                &["source.toolkit.fluxcd.io", "kustomize.toolkit.fluxcd.io"],
                &["*"],
                &["*"],
            ),
            rule(
                &[""],
                &["namespaces", "secrets", "configmaps", "serviceaccounts"],
                &read,
            ),
            rule(&["", "events.k8s.io"], &["events"], &["create", "patch"]),
            rule(
                &["coordination.k8s.io"],
                &["leases"],
                &[
                    "get", "list", "watch", "create", "update", "patch", "delete",
                ],
            ),
            rule(&[""], &["serviceaccounts/token"], &["create"]),
        ]),
        ..Default::default()
    }
}

/// A ClusterRoleBinding `name` of ClusterRole `role` to Flux's `controllers`.
fn binding(name: &str, role: &str, controllers: &[&str]) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: role.into(),
        },
        subjects: Some(
            controllers
                .iter()
                .map(|controller| Subject {
                    kind: "ServiceAccount".into(),
                    name: controller.to_string(),
                    namespace: Some(NAMESPACE.into()),
                    ..Default::default()
                })
                .collect(),
        ),
    }
}

/// A token of ServiceAccount `flux-system/<name>` from the TokenRequest API,
/// for the API server's own audience, valid [`TOKEN_LIFETIME`].
async fn request_token(admin: &Client, name: &str) -> Result<String, Error> {
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(TOKEN_LIFETIME.as_secs() as i64),
            ..Default::default()
        }),
        ..Default::default()
    };
    let answer = Api::<ServiceAccount>::namespaced(admin.clone(), NAMESPACE)
        .create_token_request(name, &PostParams::default(), &request)
        .await?;
    answer
        .status
        .and_then(|s| s.token)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| Error::Start {
            process: name.into(),
            message: format!(
                "the TokenRequest for {} returned no token",
                service_account_user(name)
            ),
        })
}

/// A kubeconfig at `path` (mode 0600) for the cluster in `dir` whose only
/// user is `controller`'s ServiceAccount with `token`.
fn write_kubeconfig(
    dir: &ClusterDir,
    controller: &str,
    token: &str,
    path: &Path,
) -> Result<(), Error> {
    let cluster = Kubeconfig::read_from(dir.kubeconfig())?;
    let cluster_name = cluster
        .clusters
        .first()
        .map(|c| c.name.clone())
        .unwrap_or_default();
    let user = service_account_user(controller);
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": serde_json::to_value(&cluster.clusters).expect("clusters serialize"),
        "users": [{ "name": user, "user": { "token": token } }],
        "contexts": [{
            "name": controller,
            "context": { "cluster": cluster_name, "user": user, "namespace": NAMESPACE },
        }],
        "current-context": controller,
    });
    let text = serde_json::to_string_pretty(&config).expect("a kubeconfig serializes");
    cluster::write_private(path, &text)
}

/// The last `lines` lines of a log file.
fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_written_as_go_reads_them() {
        assert_eq!(go_duration(Duration::from_secs(600)), "600s");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1500ms");
    }

    #[test]
    fn a_git_repository_names_its_branch_and_credentials() {
        let object = GitRepositorySpec::new("apps", "http://127.0.0.1:1/apps.git")
            .interval(Duration::from_secs(30))
            .secret_ref("git")
            .to_object("team-a");
        assert_eq!(object.metadata.namespace.as_deref(), Some("team-a"));
        assert_eq!(
            object.types.as_ref().map(|t| t.api_version.as_str()),
            Some("source.toolkit.fluxcd.io/v1")
        );
        assert_eq!(
            object.data["spec"],
            json!({
                "url": "http://127.0.0.1:1/apps.git",
                "interval": "30s",
                "ref": { "branch": "main" },
                "secretRef": { "name": "git" },
            })
        );
    }

    #[test]
    fn a_kustomization_leaves_out_what_is_not_set() {
        let plain = KustomizationSpec::new("apps", "repo", "./apps").to_object("team-a");
        assert!(plain.data["spec"].get("targetNamespace").is_none());
        assert!(plain.data["spec"].get("serviceAccountName").is_none());
        let full = KustomizationSpec::new("apps", "repo", "./apps")
            .prune(false)
            .wait(true)
            .target_namespace("team-b")
            .service_account_name("deployer")
            .to_object("team-a");
        assert_eq!(full.data["spec"]["prune"], false);
        assert_eq!(full.data["spec"]["wait"], true);
        assert_eq!(full.data["spec"]["targetNamespace"], "team-b");
        assert_eq!(full.data["spec"]["serviceAccountName"], "deployer");
        assert_eq!(
            full.data["spec"]["sourceRef"],
            json!({ "kind": "GitRepository", "name": "repo" })
        );
    }

    fn kustomization(generation: i64, status: serde_json::Value) -> DynamicObject {
        let mut object = KustomizationSpec::new("apps", "repo", "./apps").to_object("ns");
        object.metadata.generation = Some(generation);
        object.data["status"] = status;
        object
    }

    #[test]
    fn ready_means_this_generation_this_revision_and_ready_true() {
        let revision = git_revision("main", "abc");
        let ready = json!({
            "observedGeneration": 2,
            "lastAppliedRevision": "main@sha1:abc",
            "conditions": [{
                "type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
                "message": "Applied revision: main@sha1:abc",
                "lastTransitionTime": "2026-12-06T12:00:00Z",
            }],
        });
        assert!(is_ready_at(&kustomization(2, ready.clone()), &revision));
        assert!(!is_ready_at(&kustomization(3, ready.clone()), &revision));
        assert!(!is_ready_at(
            &kustomization(2, ready.clone()),
            "main@sha1:def"
        ));
        let mut failed = ready;
        failed["conditions"][0]["status"] = json!("False");
        assert!(!is_ready_at(&kustomization(2, failed), &revision));
    }

    #[test]
    fn the_last_condition_is_the_latest_transition() {
        let object = kustomization(
            1,
            json!({ "conditions": [
                { "type": "Ready", "status": "False", "reason": "ArtifactFailed",
                  "message": "no artifact", "lastTransitionTime": "2026-12-06T12:00:05Z" },
                { "type": "Reconciling", "status": "True", "reason": "Progressing",
                  "message": "reconciling", "lastTransitionTime": "2026-12-06T12:00:01Z" },
            ]}),
        );
        let conditions = conditions(&object);
        assert_eq!(
            last_condition(&conditions).map(describe).as_deref(),
            Some("Ready=False (ArtifactFailed): no artifact")
        );
    }
}

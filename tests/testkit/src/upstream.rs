//! Real upstream Apache Camel K operators (`kamel operator`) on a local control plane.
//!
//! [`start`] runs one operator as its own process, off-cluster: the `kamel`
//! binary of the pinned release (`tests/camel-k/build.sh`), a kubeconfig whose
//! current context is the operator's identity (`operator-1`, `operator-2`,
//! `operator-3`: static-token users), the RBAC of
//! `examples/deploy/upstream-operator/` bound to that identity, and the
//! environment upstream reads: `OPERATOR_ID`, `NAMESPACE` (its own namespace,
//! where its lock `<id>-lock` lives) and `WATCH_NAMESPACE` (empty: global).
//! Its log is `logs/kamel-operator-<id>.log` in the cluster directory
//! (`kamel-operator-<id>-<namespace>.log` outside its default namespace, so
//! that two operators of one id, in two namespaces, keep their logs apart).
//!
//! An operator handles nothing until its IntegrationPlatform exists:
//! [`UpstreamOperator::ready_platform`] creates it (named after the id,
//! annotated with the id, with a registry address) and waits until it is `Ready`.
//!
//! The process is killed when the [`UpstreamOperator`] is dropped, and, through
//! a watchdog holding a pipe, when the process that started it exits. With
//! [`UpstreamOptions::restart_on_exit`] it is started again when it exits by
//! itself, as the kubelet restarts the container of a Deployment's pod: an
//! upstream operator exits when it cannot renew its lock within the renew
//! deadline (etcd stopped longer than 10 s, say).
//!
//! ```no_run
//! # async fn example() {
//! let cluster = camelk_testkit::shared();
//! let op1 = cluster.upstream_operator("operator-1").await;
//! op1.ready_platform(&cluster.admin().await).await.unwrap();
//! # }
//! ```

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use camelk_reconciler::camel_k::CamelKind;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

use crate::Error;
use crate::binaries::{CAMEL_K_VERSION, camel_k_dir};
use crate::cluster::{self, ClusterDir, free_ports, io};
use crate::identity::ADMIN;
use crate::watchdog::Watchdog;

/// The annotation upstream reads to tell which operator handles a resource.
pub const OPERATOR_ID_ANNOTATION: &str = "camel.apache.org/operator.id";
/// The registry address every platform is given: any address will do, since
/// nothing is pushed (a build fails earlier, with no Maven here).
pub const REGISTRY_ADDRESS: &str = "registry.camelk.invalid:5000";

const RBAC_DIR: &str = "examples/deploy/upstream-operator";
const CLUSTER_ROLE: &str =
    include_str!("../../../examples/deploy/upstream-operator/clusterrole.yaml");
const BINDING: &str = include_str!("../../../examples/deploy/upstream-operator/binding.yaml");
const LOCK: &str = include_str!("../../../examples/deploy/upstream-operator/lock.yaml");
const FIELD_MANAGER: &str = "camelk-testkit";
const HEALTHY_TIMEOUT: Duration = Duration::from_secs(60);
/// The kubelet's container restart back-off: 10 s, doubled after each
/// restart up to 5 min, and back to 10 s once a container ran 10 min.
const RESTART_DELAY: Duration = Duration::from_secs(10);
const MAX_RESTART_DELAY: Duration = Duration::from_secs(300);
const BACKOFF_RESET: Duration = Duration::from_secs(600);

/// How to run one upstream operator.
#[derive(Clone, Debug)]
pub struct UpstreamOptions {
    /// `OPERATOR_ID`, also the kubeconfig context (identity) it acts as.
    pub id: String,
    /// `NAMESPACE`: its own namespace (lock, platform, catalogs, kits, builds); created if missing.
    pub namespace: String,
    /// Camel K release (a folder of `tests/camel-k/`).
    pub version: String,
    /// `WATCH_NAMESPACE`; empty means global (every namespace).
    pub watch_namespace: String,
    /// `LOG_LEVEL` (`info` when unset, or `debug`, `error`, a number).
    pub log_level: Option<String>,
    /// The API server address it dials (`https://host:port`): the cluster's
    /// when unset, a fault-injecting proxy's in chaos tests.
    pub server: Option<String>,
    /// Start the process again when it exits by itself, after the kubelet's
    /// back-off, as a Deployment would. Off by default, so that a test sees
    /// an exit.
    pub restart_on_exit: bool,
}

impl UpstreamOptions {
    /// A global operator `id` of the pinned release in [`default_namespace`]`(id)`.
    pub fn new(id: &str) -> UpstreamOptions {
        UpstreamOptions {
            id: id.into(),
            namespace: default_namespace(id),
            version: CAMEL_K_VERSION.into(),
            watch_namespace: String::new(),
            log_level: None,
            server: None,
            restart_on_exit: false,
        }
    }
}

/// `operator-1` → `camel-k-op1`; any other id → `camel-k-<id>`.
pub fn default_namespace(id: &str) -> String {
    match id.strip_prefix("operator-") {
        Some(n) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => {
            format!("camel-k-op{n}")
        }
        _ => format!("camel-k-{id}"),
    }
}

/// A running upstream operator process. Killed (SIGKILL) when dropped.
pub struct UpstreamOperator {
    launch: Arc<Launch>,
    process: Arc<Mutex<Process>>,
}

/// The operator's current process; replaced when restarted.
struct Process {
    child: Child,
    // Kills the operator if this process exits first.
    watchdog: Option<Watchdog>,
    /// Killed on purpose: not to be restarted.
    killed: bool,
    /// How often the operator was started again after exiting by itself.
    restarts: usize,
    /// When it exited by itself, each time.
    exits: Vec<Instant>,
}

/// What starts the operator's process, again at each restart.
struct Launch {
    kamel: PathBuf,
    home: PathBuf,
    kubeconfig: PathBuf,
    log: PathBuf,
    opts: UpstreamOptions,
    health_port: u16,
    monitoring_port: u16,
}

/// Starts `kamel operator` for `opts` on the cluster in `dir`: builds the
/// release if needed, creates its namespace, applies its RBAC, and returns
/// once its health endpoint answers.
pub async fn start(dir: &ClusterDir, opts: &UpstreamOptions) -> Result<UpstreamOperator, Error> {
    let kamel = camel_k_dir(&opts.version)?.join("bin/kamel");
    let admin = cluster::client_for(dir, ADMIN).await?;
    ensure_namespace(&admin, &opts.namespace).await?;
    apply_rbac(&admin, &opts.id, &opts.namespace).await?;

    // Named after the id alone in its default namespace, as the demo and the
    // docs say; with the namespace too elsewhere.
    let name = if opts.namespace == default_namespace(&opts.id) {
        opts.id.clone()
    } else {
        format!("{}-{}", opts.id, opts.namespace)
    };
    let home = dir.root().join("upstream").join(&name);
    fs::create_dir_all(&home).map_err(io("creating the operator's directory"))?;
    let kubeconfig = home.join("kubeconfig");
    cluster::write_kubeconfig_copy(dir, opts.server.as_deref(), Some(&opts.id), &kubeconfig)?;
    fs::create_dir_all(dir.root().join("logs")).map_err(io("creating the logs directory"))?;
    let log = dir.log(&format!("kamel-operator-{name}"));
    // A new log for a new operator; restarts of its process append to it.
    fs::File::create(&log).map_err(io("creating the operator's log"))?;
    let [health_port, monitoring_port] = free_ports()?;
    let launch = Arc::new(Launch {
        kamel,
        home,
        kubeconfig,
        log,
        opts: opts.clone(),
        health_port,
        monitoring_port,
    });
    let process = Arc::new(Mutex::new(launch.spawn()?));
    let mut operator = UpstreamOperator {
        launch: Arc::clone(&launch),
        process: Arc::clone(&process),
    };
    operator.wait_healthy(HEALTHY_TIMEOUT).await?;
    if opts.restart_on_exit {
        std::thread::spawn(move || supervise(&process, &launch));
    }
    Ok(operator)
}

impl Launch {
    /// Starts `kamel operator`, its output appended to the log.
    fn spawn(&self) -> Result<Process, Error> {
        let opts = &self.opts;
        let out = fs::File::options()
            .append(true)
            .open(&self.log)
            .map_err(io("opening the operator's log"))?;
        let err = out.try_clone().map_err(io("opening the operator's log"))?;
        let mut command = Command::new(&self.kamel);
        command
            .args([
                "operator".to_string(),
                format!("--health-port={}", self.health_port),
                format!("--monitoring-port={}", self.monitoring_port),
            ])
            .current_dir(&self.home)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("OPERATOR_ID", &opts.id)
            .env("NAMESPACE", &opts.namespace)
            .env("WATCH_NAMESPACE", &opts.watch_namespace)
            // The bundled Kamelet catalog is fetched with Maven, which is not here;
            // and its default folder (/tmp/kamelets) would be shared by all operators.
            .env("KAMEL_INSTALL_DEFAULT_KAMELETS", "false")
            .env("KAMELET_CATALOG_DIR", self.home.join("kamelets"))
            .env_remove("KAMEL_OPERATOR_ID")
            .env_remove("POD_NAME")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        match &opts.log_level {
            Some(level) => command.env("LOG_LEVEL", level),
            None => command.env_remove("LOG_LEVEL"),
        };
        let child = command.spawn().map_err(|e| Error::Start {
            process: format!("kamel operator {}", opts.id),
            message: format!("{}: {e}", self.kamel.display()),
        })?;
        let watchdog = Watchdog::kill_on_exit(child.id()).ok();
        Ok(Process {
            child,
            watchdog,
            killed: false,
            restarts: 0,
            exits: Vec::new(),
        })
    }

    /// A line of the test kit's in the operator's log.
    fn note(&self, line: &str) {
        if let Ok(mut log) = fs::File::options().append(true).open(&self.log) {
            let _ = writeln!(log, "testkit: {line}");
        }
    }
}

/// Restarts the operator each time it exits by itself, until it is killed.
fn supervise(process: &Mutex<Process>, launch: &Launch) {
    let mut delay = RESTART_DELAY;
    let mut started = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let status: ExitStatus = {
            let mut p = lock(process);
            if p.killed {
                return;
            }
            match p.child.try_wait() {
                Ok(Some(status)) => {
                    p.exits.push(Instant::now());
                    status
                }
                _ => continue,
            }
        };
        if started.elapsed() >= BACKOFF_RESET {
            delay = RESTART_DELAY;
        }
        launch.note(&format!(
            "kamel operator exited ({status}); started again in {delay:?}, as by the kubelet"
        ));
        std::thread::sleep(delay);
        let mut p = lock(process);
        if p.killed {
            return;
        }
        match launch.spawn() {
            Ok(next) => {
                let old = std::mem::replace(&mut *p, next);
                p.restarts = old.restarts + 1;
                p.exits = old.exits;
                // The old pid is reaped: its watchdog must not kill a reuse of it.
                if let Some(watchdog) = old.watchdog {
                    watchdog.retire();
                }
            }
            Err(e) => launch.note(&format!("restart failed: {e}")),
        }
        started = Instant::now();
        delay = (delay * 2).min(MAX_RESTART_DELAY);
    }
}

fn lock(process: &Mutex<Process>) -> MutexGuard<'_, Process> {
    // A panic while holding it left a consistent Process: use it anyway.
    process
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl UpstreamOperator {
    /// `OPERATOR_ID`, also the identity it acts as.
    pub fn id(&self) -> &str {
        &self.launch.opts.id
    }

    /// Its own namespace (lock, platform, catalogs, kits, builds).
    pub fn namespace(&self) -> &str {
        &self.launch.opts.namespace
    }

    /// The Camel K release it runs.
    pub fn version(&self) -> &str {
        &self.launch.opts.version
    }

    /// The operator's log (stdout and stderr, and the test kit's restart notes).
    pub fn log(&self) -> &Path {
        &self.launch.log
    }

    /// Its kubeconfig (current context: its identity).
    pub fn kubeconfig(&self) -> &Path {
        &self.launch.kubeconfig
    }

    /// The port of its health endpoint (`/healthz`).
    pub fn health_port(&self) -> u16 {
        self.launch.health_port
    }

    /// The port of its metrics endpoint (`/metrics`).
    pub fn monitoring_port(&self) -> u16 {
        self.launch.monitoring_port
    }

    /// The pid of its current process.
    pub fn pid(&self) -> u32 {
        lock(&self.process).child.id()
    }

    /// How often it was started again after exiting by itself
    /// ([`UpstreamOptions::restart_on_exit`]).
    pub fn restarts(&self) -> usize {
        lock(&self.process).restarts
    }

    /// When it exited by itself ([`UpstreamOptions::restart_on_exit`]
    /// notices an exit within half a second).
    pub fn exits(&self) -> Vec<Instant> {
        lock(&self.process).exits.clone()
    }

    /// Whether the process is still alive (a stopped process counts as alive).
    pub fn is_running(&mut self) -> bool {
        matches!(lock(&self.process).child.try_wait(), Ok(None))
    }

    /// SIGKILL, and reap it: the operator dies without releasing its lock,
    /// and is not restarted.
    pub fn kill(&mut self) {
        let mut p = lock(&self.process);
        p.killed = true;
        let p = &mut *p;
        crate::watchdog::kill_and_reap(&mut p.child, &mut p.watchdog);
    }

    /// SIGSTOP: frozen mid-flight, its lock unrenewed, its cache going stale.
    pub fn stop(&self) {
        self.signal(Signal::SIGSTOP);
    }

    /// SIGCONT: resumes a stopped operator, which acts on what it had cached.
    pub fn cont(&self) {
        self.signal(Signal::SIGCONT);
    }

    fn signal(&self, signal: Signal) {
        let _ = kill(Pid::from_raw(self.pid() as i32), signal);
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = fs::read_to_string(self.log()).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Creates (or keeps) its IntegrationPlatform: named after the id, in its
    /// namespace, annotated with the id, with [`REGISTRY_ADDRESS`] (insecure).
    pub async fn create_platform(&self, client: &Client) -> Result<DynamicObject, Error> {
        let api = platforms(client, self.namespace());
        let platform: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "camel.apache.org/v1",
            "kind": "IntegrationPlatform",
            "metadata": {
                "name": self.id(),
                "namespace": self.namespace(),
                "annotations": { OPERATOR_ID_ANNOTATION: self.id() },
            },
            "spec": { "build": { "registry": { "address": REGISTRY_ADDRESS, "insecure": true } } },
        }))
        .expect("static platform");
        match api.create(&PostParams::default(), &platform).await {
            Ok(created) => Ok(created),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(api.get(self.id()).await?),
            Err(e) => Err(e.into()),
        }
    }

    /// Waits until its IntegrationPlatform's phase is `Ready`; see
    /// [`ready_platform`](Self::ready_platform) for when it never is.
    pub async fn wait_platform_ready(
        &self,
        client: &Client,
        timeout: Duration,
    ) -> Result<(), Error> {
        let api = &platforms(client, self.namespace());
        let id = self.id();
        let not_ready = move || async move {
            let phase = api
                .get_opt(id)
                .await?
                .and_then(|p| p.data["status"]["phase"].as_str().map(str::to_string))
                .unwrap_or_default();
            Ok::<_, Error>((phase != "Ready").then_some(phase))
        };
        self.poll_started(timeout, not_ready, |phase| {
            format!(
                "IntegrationPlatform {}/{id} not Ready after {timeout:?} (phase {phase:?})",
                self.namespace()
            )
        })
        .await
    }

    /// [`create_platform`](Self::create_platform), then
    /// [`wait_platform_ready`](Self::wait_platform_ready), three times at
    /// most. Upstream has a start race: the platform's first check may not
    /// find the CamelCatalog it has just created (not yet in its cache), so
    /// the platform goes `Error` while the catalog waits for a Ready platform,
    /// and only a new platform breaks the wait (the controller ignores
    /// metadata changes). So a platform not Ready in 20 s is created anew.
    pub async fn ready_platform(&self, client: &Client) -> Result<(), Error> {
        let api = platforms(client, self.namespace());
        for attempt in 1..=3 {
            self.create_platform(client).await?;
            match self
                .wait_platform_ready(client, Duration::from_secs(20))
                .await
            {
                Ok(()) => return Ok(()),
                Err(e) if attempt == 3 => return Err(e),
                Err(_) => {
                    api.delete(self.id(), &Default::default()).await?;
                    let deadline = Instant::now() + Duration::from_secs(30);
                    while api.get_opt(self.id()).await?.is_some() {
                        if Instant::now() > deadline {
                            return Err(self.start_error(format!(
                                "IntegrationPlatform {}/{} not deleted within 30 s",
                                self.namespace(),
                                self.id()
                            )));
                        }
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }
        }
        unreachable!("the last attempt returns")
    }

    /// The error of a start of this operator that did not come about.
    fn start_error(&self, message: String) -> Error {
        Error::Start {
            process: format!("kamel operator {}", self.id()),
            message,
        }
    }

    /// The name of its lock, the Lease `<id>-lock` in its namespace.
    pub fn lock_name(&self) -> String {
        format!("{}-lock", self.id())
    }

    /// Waits until its lock names a holder (it leads and its controllers run).
    pub async fn wait_leading(&self, client: &Client, timeout: Duration) -> Result<(), Error> {
        let api = &Api::<Lease>::namespaced(client.clone(), self.namespace());
        let lock = &self.lock_name();
        let no_holder = move || async move {
            let holder = api
                .get_opt(lock)
                .await?
                .and_then(|lease| lease.spec?.holder_identity)
                .unwrap_or_default();
            Ok::<_, Error>(holder.is_empty().then_some(holder))
        };
        self.poll_started(timeout, no_holder, |_| {
            format!(
                "no holder of Lease {}/{lock} after {timeout:?}",
                self.namespace()
            )
        })
        .await
    }

    /// Asks `not_yet` every 250 ms until it answers `None`: what it waits for
    /// came about. After `timeout`, fails with what `missing` makes of its last
    /// answer, and the tail of this operator's log.
    async fn poll_started<Probe, Answer>(
        &self,
        timeout: Duration,
        mut not_yet: Probe,
        missing: impl FnOnce(&str) -> String,
    ) -> Result<(), Error>
    where
        Probe: FnMut() -> Answer,
        Answer: Future<Output = Result<Option<String>, Error>>,
    {
        let deadline = Instant::now() + timeout;
        let mut last = String::new();
        while Instant::now() < deadline {
            match not_yet().await? {
                None => return Ok(()),
                Some(state) => last = state,
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Err(self.start_error(format!("{}; log:\n{}", missing(&last), self.log_tail(30))))
    }

    async fn wait_healthy(&mut self, timeout: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        loop {
            if http_ok(self.health_port(), "/healthz") {
                return Ok(());
            }
            let exited = lock(&self.process).child.try_wait().ok().flatten();
            if exited.is_some() || Instant::now() > deadline {
                let why = match exited {
                    Some(status) => format!("exited with {status}"),
                    None => format!("/healthz not ok after {timeout:?}"),
                };
                return Err(self.start_error(format!("{why}; log:\n{}", self.log_tail(30))));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for UpstreamOperator {
    fn drop(&mut self) {
        // A stopped process dies of SIGKILL as well.
        self.kill();
    }
}

fn platforms(client: &Client, ns: &str) -> Api<DynamicObject> {
    crate::scenario::camel_api(client.clone(), CamelKind::IntegrationPlatform, ns)
}

/// What decides whether an upstream operator runs a prebuilt Integration or
/// builds a kit for it, in every namespace: each IntegrationPlatform's and
/// CamelCatalog's phase and conditions not `True`, and each IntegrationKit's
/// phase. For the failure message of a test waiting on an Integration: an
/// operator whose cached platform is not `Ready` skips the container trait,
/// and the Integration goes `Building Kit` (see `docs/upstream-camel-k.md`).
pub async fn camel_k_state(client: &Client) -> String {
    let mut lines = Vec::new();
    for kind in [
        CamelKind::IntegrationPlatform,
        CamelKind::CamelCatalog,
        CamelKind::IntegrationKit,
    ] {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &kind.api_resource());
        match api.list(&Default::default()).await {
            Err(e) => lines.push(format!("{kind}s: unreadable: {e}")),
            Ok(list) if list.items.is_empty() => lines.push(format!("{kind}s: none")),
            Ok(list) => lines.extend(list.items.iter().take(20).map(|o| describe(kind, o))),
        }
    }
    lines.join("\n")
}

/// `Kind ns/name: phase P; Type=False (Reason: message), ...`.
fn describe(kind: CamelKind, object: &DynamicObject) -> String {
    let status = &object.data["status"];
    let conditions: Vec<String> = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["status"] != "True")
        .map(|c| {
            format!(
                "{}={} ({}: {})",
                c["type"].as_str().unwrap_or_default(),
                c["status"].as_str().unwrap_or_default(),
                c["reason"].as_str().unwrap_or_default(),
                c["message"].as_str().unwrap_or_default()
            )
        })
        .collect();
    format!(
        "{kind} {}/{}: phase {:?}{}",
        object.metadata.namespace.as_deref().unwrap_or_default(),
        object.metadata.name.as_deref().unwrap_or_default(),
        status["phase"].as_str().unwrap_or_default(),
        if conditions.is_empty() {
            String::new()
        } else {
            format!("; {}", conditions.join(", "))
        }
    )
}

async fn ensure_namespace(admin: &Client, name: &str) -> Result<(), Error> {
    let api: Api<Namespace> = Api::all(admin.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Applies `examples/deploy/upstream-operator/` for operator `id` in `ns`:
/// the ClusterRole as it is; the binding and the lock Role named and bound for `id`.
pub async fn apply_rbac(admin: &Client, id: &str, ns: &str) -> Result<(), Error> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let role: ClusterRole = parse(CLUSTER_ROLE, "clusterrole.yaml")?;
    Api::<ClusterRole>::all(admin.clone())
        .patch(&role.name_any(), &params, &Patch::Apply(&role))
        .await?;

    let mut binding: ClusterRoleBinding = parse(BINDING, "binding.yaml")?;
    binding.metadata.name = Some(format!("{}-{id}", role.name_any()));
    for subject in binding.subjects.iter_mut().flatten() {
        subject.name = id.into();
    }
    Api::<ClusterRoleBinding>::all(admin.clone())
        .patch(&binding.name_any(), &params, &Patch::Apply(&binding))
        .await?;

    let mut docs = LOCK.split("\n---\n");
    let mut lock_role: Role = parse(docs.next().unwrap_or_default(), "lock.yaml")?;
    let mut lock_binding: RoleBinding = parse(docs.next().unwrap_or_default(), "lock.yaml")?;
    lock_role.metadata.namespace = Some(ns.into());
    lock_binding.metadata.namespace = Some(ns.into());
    for subject in lock_binding.subjects.iter_mut().flatten() {
        subject.name = id.into();
    }
    Api::<Role>::namespaced(admin.clone(), ns)
        .patch(&lock_role.name_any(), &params, &Patch::Apply(&lock_role))
        .await?;
    Api::<RoleBinding>::namespaced(admin.clone(), ns)
        .patch(
            &lock_binding.name_any(),
            &params,
            &Patch::Apply(&lock_binding),
        )
        .await?;
    Ok(())
}

fn parse<T: serde::de::DeserializeOwned>(text: &str, file: &str) -> Result<T, Error> {
    serde_saphyr::from_str(text).map_err(|e| Error::Start {
        process: "upstream operator RBAC".into(),
        message: format!("{RBAC_DIR}/{file}: {e}"),
    })
}

/// Whether `GET http://127.0.0.1:port/path` answers 200.
pub(crate) fn http_ok(port: u16, path: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.") && &head[9..12] == b"200"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_platform_is_described_by_its_phase_and_the_conditions_that_fail() {
        let platform: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "camel.apache.org/v1",
            "kind": "IntegrationPlatform",
            "metadata": { "name": "operator-2", "namespace": "camel-k-op2" },
            "status": {
                "phase": "Error",
                "conditions": [
                    { "type": "IntegrationPlatformAvailable", "status": "True", "reason": "x", "message": "" },
                    { "type": "CamelCatalogAvailable", "status": "False", "reason": "CamelCatalogNotAvailable", "message": "catalog not found" }
                ]
            }
        }))
        .unwrap();
        assert_eq!(
            describe(CamelKind::IntegrationPlatform, &platform),
            "IntegrationPlatform camel-k-op2/operator-2: phase \"Error\"; \
             CamelCatalogAvailable=False (CamelCatalogNotAvailable: catalog not found)"
        );
    }
}

//! Starting and stopping one local control plane: etcd, kube-apiserver,
//! kube-scheduler, kube-controller-manager and KWOK on free loopback ports,
//! all state in one directory.
//!
//! Flow of [`start`]:
//! 1. refuse if the directory belongs to a running cluster; otherwise wipe it;
//! 2. write the PKI, the static token file and the audit policy (mode 0700 dir);
//! 3. start etcd and wait until its client port accepts connections;
//! 4. start kube-apiserver (RBAC, token authentication, audit log) and wait for
//!    `/readyz` as admin;
//! 5. write the kubeconfig (one context per identity); start kube-scheduler
//!    and KWOK (which plays the kubelet of one simulated node, [`KWOK_NODE`]:
//!    it marks the node ready and the pods bound to it running and ready);
//!    install the Camel K CRDs and wait until they are `Established`; create
//!    the node;
//! 6. start kube-controller-manager with the garbage-collector, namespace,
//!    deployment and replicaset controllers, so a Deployment gets ready pods.
//!    It starts after the CRDs so that its garbage collector sees their types
//!    at once instead of on its 30 s resync.
//!
//! Every process runs in its own process group, so a terminal's Ctrl-C does
//! not reach it; [`stop`] ends them by process id, recorded in `pids`.
//! A start that fails (a port taken between choosing and binding it) stops
//! what it started and is retried with new ports.

use std::fs;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::Error;
use crate::audit;
use crate::crds::{self, CrdSource};
use crate::identity::{ADMIN, Identity};
use crate::pki::Pki;

const START_ATTEMPTS: usize = 3;
const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// The files of a control plane's state directory.
#[derive(Clone, Debug)]
pub struct ClusterDir {
    root: PathBuf,
}

impl ClusterDir {
    pub fn new(root: impl Into<PathBuf>) -> ClusterDir {
        ClusterDir { root: root.into() }
    }
    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn kubeconfig(&self) -> PathBuf {
        self.root.join("kubeconfig")
    }
    pub fn audit_log(&self) -> PathBuf {
        self.root.join("audit.log")
    }
    pub fn pids(&self) -> PathBuf {
        self.root.join("pids")
    }
    pub fn log(&self, process: &str) -> PathBuf {
        self.root.join("logs").join(format!("{process}.log"))
    }
    fn pki(&self, file: &str) -> PathBuf {
        self.root.join("pki").join(file)
    }
}

/// The simulated node pods of Deployments are scheduled to.
pub const KWOK_NODE: &str = "kwok-node-0";
/// The annotation that hands a node to KWOK (`--manage-nodes-with-annotation-selector`).
pub const KWOK_NODE_ANNOTATION: (&str, &str) = ("kwok.x-k8s.io/node", "fake");

/// The controllers kube-controller-manager runs: garbage collection and
/// namespace deletion, and Deployment → ReplicaSet → Pod.
pub const CONTROLLERS: &str =
    "garbage-collector-controller,namespace-controller,deployment-controller,replicaset-controller";

/// KWOK's stages (its `Stage` API, `kwok.x-k8s.io/v1alpha1`): a managed node
/// becomes Ready with room for any pod; a pod bound to it goes from Pending to
/// Running with every container ready; a pod being deleted is removed at once
/// (no kubelet waits out its grace period). No heartbeats and no node lease:
/// nothing here watches node health, and the audit log stays quiet.
const KWOK_STAGES: &str = r#"apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.status.phase'
      operator: 'NotIn'
      values: ['Running']
  next:
    statusTemplate: |
      {{ $now := Now }}
      phase: Running
      conditions:
      - type: Ready
        status: "True"
        reason: KwokReady
        message: simulated by kwok
        lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $now | Quote }}
      addresses:
      - type: InternalIP
        address: 127.0.0.1
      - type: Hostname
        address: {{ .metadata.name | Quote }}
      allocatable: {cpu: "1k", memory: 1Ti, pods: "10k"}
      capacity: {cpu: "1k", memory: 1Ti, pods: "10k"}
      nodeInfo:
        architecture: amd64
        operatingSystem: linux
        kubeletVersion: kwok
        kubeProxyVersion: kwok
        containerRuntimeVersion: kwok
        kernelVersion: kwok
        osImage: kwok
        machineID: ""
        systemUUID: ""
        bootID: ""
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-running
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Pending']
  next:
    statusTemplate: |
      {{ $now := Now }}
      phase: Running
      startTime: {{ $now | Quote }}
      hostIP: 127.0.0.1
      podIP: {{ PodIP | Quote }}
      conditions:
      - {type: PodScheduled, status: "True", lastTransitionTime: {{ $now | Quote }}}
      - {type: Initialized, status: "True", lastTransitionTime: {{ $now | Quote }}}
      - {type: ContainersReady, status: "True", lastTransitionTime: {{ $now | Quote }}}
      - {type: Ready, status: "True", lastTransitionTime: {{ $now | Quote }}}
      containerStatuses:
      {{ range .spec.containers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: true
        started: true
        restartCount: 0
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
  next:
    delete: true
"#;

/// What [`start`] needs.
#[derive(Clone, Debug)]
pub struct StartOptions {
    pub dir: ClusterDir,
    pub bin_dir: PathBuf,
    pub crds: CrdSource,
}

/// A started control plane.
#[derive(Debug)]
pub struct LocalCluster {
    pub dir: ClusterDir,
    pub server: String,
    pub identities: Vec<Identity>,
    /// (process name, pid), in start order.
    pub processes: Vec<(String, u32)>,
}

/// Starts a control plane in `opts.dir` (see the module doc for the flow).
pub async fn start(opts: &StartOptions) -> Result<LocalCluster, Error> {
    let running = running_processes(&opts.dir);
    if !running.is_empty() {
        let pids: Vec<String> = running.iter().map(|(n, p)| format!("{n}={p}")).collect();
        return Err(Error::AlreadyRunning(format!(
            "a local control plane is already running from {} ({}); stop it first",
            opts.dir.root().display(),
            pids.join(", ")
        )));
    }
    let crds = opts.crds.load()?;
    let kwok_bin_dir = crate::binaries::kwok_bin_dir()?;
    let mut last_error = None;
    for _ in 0..START_ATTEMPTS {
        prepare_dir(&opts.dir)?;
        let mut children = Vec::new();
        match start_once(opts, &kwok_bin_dir, &crds, &mut children).await {
            Ok(cluster) => return Ok(cluster),
            Err(e) => {
                for (_, child) in children.iter_mut().rev() {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                last_error = Some(e);
            }
        }
    }
    Err(last_error.expect("at least one attempt"))
}

async fn start_once(
    opts: &StartOptions,
    kwok_bin_dir: &Path,
    crds: &[k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition],
    children: &mut Vec<(String, Child)>,
) -> Result<LocalCluster, Error> {
    let dir = &opts.dir;
    let identities = Identity::standard_set().map_err(io("generating tokens"))?;
    write_secrets(dir, &identities)?;

    let [etcd_port, etcd_peer_port, api_port] = free_ports()?;
    let etcd_url = format!("http://127.0.0.1:{etcd_port}");
    let etcd_peer = format!("http://127.0.0.1:{etcd_peer_port}");
    let etcd = spawn(
        dir,
        &opts.bin_dir,
        "etcd",
        &[
            "--name=default".into(),
            format!("--data-dir={}", dir.root().join("etcd").display()),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls={etcd_peer}"),
            format!("--initial-advertise-peer-urls={etcd_peer}"),
            format!("--initial-cluster=default={etcd_peer}"),
            "--unsafe-no-fsync=true".into(),
            "--max-request-bytes=4194304".into(),
            "--log-level=warn".into(),
        ],
    )?;
    children.push(("etcd".into(), etcd));
    wait_for_port(etcd_port, children).await?;

    let server = format!("https://127.0.0.1:{api_port}");
    let apiserver = spawn(
        dir,
        &opts.bin_dir,
        "kube-apiserver",
        &[
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={api_port}"),
            "--advertise-address=127.0.0.1".into(),
            "--endpoint-reconciler-type=none".into(),
            format!("--tls-cert-file={}", dir.pki("apiserver.crt").display()),
            format!(
                "--tls-private-key-file={}",
                dir.pki("apiserver.key").display()
            ),
            format!("--client-ca-file={}", dir.pki("ca.crt").display()),
            format!("--token-auth-file={}", dir.pki("tokens.csv").display()),
            "--anonymous-auth=false".into(),
            "--authorization-mode=RBAC".into(),
            format!("--service-account-issuer={server}"),
            format!("--service-account-key-file={}", dir.pki("sa.pub").display()),
            format!(
                "--service-account-signing-key-file={}",
                dir.pki("sa.key").display()
            ),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            // TaintNodesByCondition would create the KWOK node tainted not-ready,
            // a taint only the node-lifecycle controller (not run here) removes.
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition".into(),
            format!(
                "--audit-policy-file={}",
                dir.pki("audit-policy.yaml").display()
            ),
            format!("--audit-log-path={}", dir.audit_log().display()),
            "--audit-log-format=json".into(),
            "--audit-log-mode=blocking".into(),
            "--audit-log-maxsize=0".into(),
            "--profiling=false".into(),
            "--v=1".into(),
        ],
    )?;
    children.push(("kube-apiserver".into(), apiserver));

    write_kubeconfig(dir, &server, &identities)?;
    let client = admin_client(dir).await?;
    wait_until_ready(&client, children).await?;

    // Scheduler and KWOK start while the CRDs install; neither needs them.
    let kubeconfig = format!("--kubeconfig={}", dir.kubeconfig().display());
    let scheduler = spawn(
        dir,
        &opts.bin_dir,
        "kube-scheduler",
        &[
            kubeconfig.clone(),
            "--leader-elect=false".into(),
            "--bind-address=127.0.0.1".into(),
            "--secure-port=0".into(),
            "--v=1".into(),
        ],
    )?;
    children.push(("kube-scheduler".into(), scheduler));
    let kwok_home = dir.root().join("kwok");
    fs::create_dir_all(&kwok_home).map_err(io("creating the kwok directory"))?;
    let stages = kwok_home.join("stages.yaml");
    fs::write(&stages, KWOK_STAGES).map_err(io("writing the kwok stages"))?;
    let (key, value) = KWOK_NODE_ANNOTATION;
    let kwok = spawn_with(
        dir,
        kwok_bin_dir,
        "kwok",
        &[
            kubeconfig.clone(),
            format!("--config={}", stages.display()),
            "--manage-all-nodes=false".into(),
            format!("--manage-nodes-with-annotation-selector={key}={value}"),
            "--cidr=10.244.0.0/16".into(),
            "--node-ip=127.0.0.1".into(),
            "--node-lease-duration-seconds=0".into(),
        ],
        // Its default configuration file lives under $HOME/.kwok; keep a
        // user's own out of this cluster.
        &[("HOME", kwok_home.as_os_str())],
    )?;
    children.push(("kwok".into(), kwok));

    crds::install(&client, crds).await?;
    create_kwok_node(&client).await?;

    let kcm = spawn(
        dir,
        &opts.bin_dir,
        "kube-controller-manager",
        &[
            kubeconfig,
            format!("--controllers={CONTROLLERS}"),
            "--leader-elect=false".into(),
            "--bind-address=127.0.0.1".into(),
            "--secure-port=0".into(),
            "--v=1".into(),
        ],
    )?;
    children.push(("kube-controller-manager".into(), kcm));
    // Give them a moment to fail on bad flags before we report success.
    tokio::time::sleep(Duration::from_millis(500)).await;
    check_alive(children)?;

    let processes: Vec<(String, u32)> = children
        .iter()
        .map(|(name, child)| (name.clone(), child.id()))
        .collect();
    let pid_lines: String = processes
        .iter()
        .map(|(n, p)| format!("{n} {p}\n"))
        .collect();
    fs::write(dir.pids(), pid_lines).map_err(io("writing pids"))?;
    Ok(LocalCluster {
        dir: dir.clone(),
        server,
        identities,
        processes,
    })
}

/// A copy of the kubeconfig of the cluster in `dir` at `path` (JSON, which
/// is YAML; mode 0600): dialing `server` instead when given (a proxy a fault
/// test can cut), with `context` (which must exist) current when given.
pub fn write_kubeconfig_copy(
    dir: &ClusterDir,
    server: Option<&str>,
    context: Option<&str>,
    path: &Path,
) -> Result<(), Error> {
    let mut config = Kubeconfig::read_from(dir.kubeconfig())?;
    if let Some(server) = server {
        for named in &mut config.clusters {
            if let Some(cluster) = named.cluster.as_mut() {
                cluster.server = Some(server.to_string());
            }
        }
    }
    if let Some(context) = context {
        if !config.contexts.iter().any(|c| c.name == context) {
            return Err(Error::Start {
                process: format!("a client as {context}"),
                message: format!("no context {context} in {}", dir.kubeconfig().display()),
            });
        }
        config.current_context = Some(context.into());
    }
    let text = serde_json::to_string_pretty(&config).expect("a kubeconfig serializes");
    write_private(path, &text)
}

/// A client for `context` (an identity's name) of the cluster in `dir`.
pub async fn client_for(dir: &ClusterDir, context: &str) -> Result<Client, Error> {
    Ok(Client::try_from(config_for(dir, context).await?)?)
}

/// The client configuration of `context` (an identity) of the cluster in `dir`.
pub async fn config_for(dir: &ClusterDir, context: &str) -> Result<kube::Config, Error> {
    let kubeconfig = Kubeconfig::read_from(dir.kubeconfig())?;
    let options = KubeConfigOptions {
        context: Some(context.to_string()),
        ..Default::default()
    };
    Ok(kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?)
}

async fn admin_client(dir: &ClusterDir) -> Result<Client, Error> {
    client_for(dir, ADMIN).await
}

/// Processes recorded in `dir/pids` that are still alive and still ours (the
/// command line names the directory, so a reused pid is not mistaken for one).
pub fn running_processes(dir: &ClusterDir) -> Vec<(String, u32)> {
    let Ok(text) = fs::read_to_string(dir.pids()) else {
        return vec![];
    };
    let root = dir.root().to_string_lossy().into_owned();
    text.lines()
        .filter_map(|l| {
            let (name, pid) = l.split_once(' ')?;
            Some((name.to_string(), pid.trim().parse().ok()?))
        })
        .filter(|(_, pid)| is_ours(*pid, &root))
        .collect()
}

fn is_ours(pid: u32, root: &str) -> bool {
    let Ok(status) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // Field 3 of /proc/PID/stat is the state; Z is a zombie.
    let zombie = status
        .rsplit_once(')')
        .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    !zombie && String::from_utf8_lossy(&cmdline).contains(root)
}

/// Stops the processes of the cluster in `dir`: SIGTERM in reverse start
/// order, then SIGKILL for any still alive after 15 s. Returns what it stopped.
pub fn stop(dir: &ClusterDir) -> Vec<(String, u32)> {
    let running = running_processes(dir);
    let root = dir.root().to_string_lossy().into_owned();
    for (_, pid) in running.iter().rev() {
        let _ = kill(Pid::from_raw(*pid as i32), Signal::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    while running.iter().any(|(_, p)| is_ours(*p, &root)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    for (_, pid) in &running {
        if is_ours(*pid, &root) {
            let _ = kill(Pid::from_raw(*pid as i32), Signal::SIGKILL);
        }
    }
    let _ = fs::remove_file(dir.pids());
    running
}

/// The pid of the running `process` of the cluster in `dir`.
pub fn pid_of(dir: &ClusterDir, process: &str) -> Option<u32> {
    running_processes(dir)
        .into_iter()
        .find(|(name, _)| name == process)
        .map(|(_, pid)| pid)
}

/// Kills `process` (SIGKILL, as a crash) and starts it again with the same
/// command line, its log appended to; returns the new pid. For fault tests:
/// kube-apiserver restarted on the same etcd, etcd on the same data.
pub fn restart(dir: &ClusterDir, process: &str) -> Result<u32, Error> {
    let not_running = || Error::Start {
        process: process.into(),
        message: "not running".into(),
    };
    let pid = pid_of(dir, process).ok_or_else(not_running)?;
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).map_err(io("reading a command line"))?;
    let argv: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let (program, args) = argv.split_first().ok_or_else(not_running)?;
    let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
    // Reaped when this process started it, so its ports are free again.
    let _ = nix::sys::wait::waitpid(Pid::from_raw(pid as i32), None);
    let root = dir.root().to_string_lossy().into_owned();
    let deadline = Instant::now() + Duration::from_secs(10);
    while is_ours(pid, &root) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // The port it listened on may take a moment to be free: a start that
    // fails at once is tried again.
    let mut attempts = 0;
    let child = loop {
        attempts += 1;
        let mut child = spawn_logged(Command::new(program).args(args), process, &dir.log(process))?;
        std::thread::sleep(Duration::from_secs(2));
        match child.try_wait() {
            Ok(Some(_)) if attempts < 15 => continue,
            Ok(Some(status)) => {
                return Err(Error::Start {
                    process: process.into(),
                    message: format!("exited with {status} after a restart"),
                });
            }
            _ => break child,
        }
    };
    let new_pid = child.id();
    let text = fs::read_to_string(dir.pids()).map_err(io("reading pids"))?;
    let lines: String = text
        .lines()
        .map(|l| match l.split_once(' ') {
            Some((name, _)) if name == process => format!("{name} {new_pid}\n"),
            _ => format!("{l}\n"),
        })
        .collect();
    fs::write(dir.pids(), lines).map_err(io("writing pids"))?;
    Ok(new_pid)
}

/// Sends `signal` to `process` of the cluster in `dir` (SIGSTOP and SIGCONT
/// freeze and thaw it).
pub fn signal(dir: &ClusterDir, process: &str, signal: Signal) -> Result<(), Error> {
    let pid = pid_of(dir, process).ok_or_else(|| Error::Start {
        process: process.into(),
        message: "not running".into(),
    })?;
    kill(Pid::from_raw(pid as i32), signal).map_err(|e| Error::Start {
        process: process.into(),
        message: e.to_string(),
    })
}

fn prepare_dir(dir: &ClusterDir) -> Result<(), Error> {
    if dir.root().exists() {
        fs::remove_dir_all(dir.root()).map_err(io("clearing the state directory"))?;
    }
    for sub in ["pki", "logs", "etcd"] {
        fs::create_dir_all(dir.root().join(sub)).map_err(io("creating the state directory"))?;
    }
    for d in [
        dir.root().to_path_buf(),
        dir.root().join("pki"),
        dir.root().join("etcd"),
    ] {
        fs::set_permissions(&d, fs::Permissions::from_mode(0o700))
            .map_err(io("securing the state directory"))?;
    }
    Ok(())
}

fn write_secrets(dir: &ClusterDir, identities: &[Identity]) -> Result<(), Error> {
    let pki = Pki::generate().map_err(|e| Error::Start {
        process: "pki".into(),
        message: e.to_string(),
    })?;
    let tokens: String = identities.iter().map(Identity::token_file_line).collect();
    for (file, content) in [
        ("ca.crt", pki.ca_cert.as_str()),
        ("apiserver.crt", pki.serving_cert.as_str()),
        ("apiserver.key", pki.serving_key.as_str()),
        ("sa.key", pki.service_account_key.as_str()),
        ("sa.pub", pki.service_account_public_key.as_str()),
        ("tokens.csv", tokens.as_str()),
        ("audit-policy.yaml", audit::POLICY),
    ] {
        write_private(&dir.pki(file), content)?;
    }
    Ok(())
}

fn write_kubeconfig(dir: &ClusterDir, server: &str, identities: &[Identity]) -> Result<(), Error> {
    let ca = dir.pki("ca.crt");
    let mut out = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: camelk-local\n  cluster:\n    server: {server}\n    certificate-authority: {}\nusers:\n",
        ca.display()
    );
    for id in identities {
        out.push_str(&format!(
            "- name: {0}\n  user:\n    token: {1}\n",
            id.name, id.token
        ));
    }
    out.push_str("contexts:\n");
    for id in identities {
        out.push_str(&format!(
            "- name: {0}\n  context:\n    cluster: camelk-local\n    user: {0}\n    namespace: default\n",
            id.name
        ));
    }
    out.push_str(&format!("current-context: {ADMIN}\n"));
    write_private(&dir.kubeconfig(), &out)
}

/// Writes `content` to `path`, readable by its owner only (a credential).
pub(crate) fn write_private(path: &Path, content: &str) -> Result<(), Error> {
    let mut file = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .map_err(io_path("writing", path))?;
    file.write_all(content.as_bytes())
        .map_err(io_path("writing", path))
}

/// The simulated node, handed to KWOK by its annotation.
async fn create_kwok_node(client: &Client) -> Result<(), Error> {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{ObjectMeta, PostParams};
    let (key, value) = KWOK_NODE_ANNOTATION;
    let node = Node {
        metadata: ObjectMeta {
            name: Some(KWOK_NODE.into()),
            annotations: Some([(key.to_string(), value.to_string())].into()),
            labels: Some(
                [
                    ("kubernetes.io/hostname".to_string(), KWOK_NODE.to_string()),
                    ("kubernetes.io/os".to_string(), "linux".to_string()),
                    ("kubernetes.io/arch".to_string(), "amd64".to_string()),
                    ("type".to_string(), "kwok".to_string()),
                ]
                .into(),
            ),
            ..Default::default()
        },
        ..Default::default()
    };
    match kube::Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(Error::Start {
            process: "kwok".into(),
            message: format!("creating node {KWOK_NODE}: {e}"),
        }),
    }
}

fn spawn(dir: &ClusterDir, bin_dir: &Path, name: &str, args: &[String]) -> Result<Child, Error> {
    spawn_with(dir, bin_dir, name, args, &[])
}

fn spawn_with(
    dir: &ClusterDir,
    bin_dir: &Path,
    name: &str,
    args: &[String],
    env: &[(&str, &std::ffi::OsStr)],
) -> Result<Child, Error> {
    let mut command = Command::new(bin_dir.join(name));
    command.args(args).envs(env.iter().copied());
    spawn_logged(&mut command, name, &dir.log(name))
}

/// Starts `command` as `process`, in a process group of its own (a signal
/// to the test's group leaves it alone), reading nothing, its output
/// appended to `log` (kept across restarts).
pub(crate) fn spawn_logged(
    command: &mut Command,
    process: &str,
    log: &Path,
) -> Result<Child, Error> {
    let out = fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(log)
        .map_err(io("opening a log file"))?;
    let err = out.try_clone().map_err(io("opening a log file"))?;
    command
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|e| Error::Start {
            process: process.into(),
            message: format!("{}: {e}", command.get_program().to_string_lossy()),
        })
}

/// Fails with the tail of the log of any process that has exited.
fn check_alive(children: &mut [(String, Child)]) -> Result<(), Error> {
    for (name, child) in children.iter_mut() {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(Error::Start {
                process: name.clone(),
                message: format!("exited with {status}"),
            });
        }
    }
    Ok(())
}

/// Runs `probe` every `every` until it answers `Ok`. Fails as soon as one of
/// `children` has exited, or after [`READY_TIMEOUT`] naming `process` and what
/// the probe last said.
async fn wait_started<Probe, Answer>(
    process: &str,
    every: Duration,
    children: &mut [(String, Child)],
    mut probe: Probe,
) -> Result<(), Error>
where
    Probe: FnMut() -> Answer,
    Answer: Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let Err(last) = probe().await else {
            return Ok(());
        };
        check_alive(children)?;
        if Instant::now() > deadline {
            return Err(Error::Start {
                process: process.into(),
                message: format!("{last} after {READY_TIMEOUT:?}"),
            });
        }
        tokio::time::sleep(every).await;
    }
}

async fn wait_for_port(port: u16, children: &mut [(String, Child)]) -> Result<(), Error> {
    let open = move || async move {
        TcpStream::connect(("127.0.0.1", port))
            .map(drop)
            .map_err(|_| format!("port {port} not open"))
    };
    wait_started("etcd", Duration::from_millis(50), children, open).await
}

async fn wait_until_ready(client: &Client, children: &mut [(String, Child)]) -> Result<(), Error> {
    let ready = move || async move {
        let request = http::Request::get("/readyz")
            .body(Vec::new())
            .expect("static request");
        match client.request_text(request).await {
            Ok(body) if body.trim() == "ok" => Ok(()),
            result => Err(format!("/readyz not ok ({result:?})")),
        }
    };
    wait_started(
        "kube-apiserver",
        Duration::from_millis(200),
        children,
        ready,
    )
    .await
}

pub(crate) fn free_ports<const N: usize>() -> Result<[u16; N], Error> {
    // Hold all listeners at once so the ports are distinct.
    let listeners: Vec<TcpListener> = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()
        .map_err(io("choosing free ports"))?;
    let mut ports = [0u16; N];
    for (slot, l) in ports.iter_mut().zip(&listeners) {
        *slot = l.local_addr().map_err(io("choosing free ports"))?.port();
    }
    Ok(ports)
}

pub(crate) fn io(context: &'static str) -> impl Fn(std::io::Error) -> Error {
    move |source| Error::Io {
        context: context.to_string(),
        source,
    }
}

fn io_path<'a>(verb: &'static str, path: &'a Path) -> impl Fn(std::io::Error) -> Error + 'a {
    move |source| Error::Io {
        context: format!("{verb} {}", path.display()),
        source,
    }
}

//! Helpers shared by the end-to-end tests: real Git repositories in
//! temporary directories, driven by the `git` program, and the plugin binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use std::time::{Duration, Instant};

use camelk_reconciler::api::OperatorId;
use camelk_reconciler::camel_k::OPERATOR_ID_KEY;
use camelk_reconciler::camel_k::phase;
use camelk_reconciler::connect::Clients;
use camelk_reconciler::lock::LockTiming;
use camelk_reconciler::operator::{self, OperatorConfig};
use kube::api::{Api, DynamicObject};
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;

pub const MANIFEST: &str = "operator-assignment.yaml";

/// The edit most tests make: pin Integration shop/orders to operator-2.
pub const ASSIGN_ORDERS: [&str; 6] = [
    "assign",
    "integration/orders",
    "--to",
    "operator-2",
    "-n",
    "shop",
];

/// The words of `line`, for `args`: a test writes a command as its user
/// types it.
pub fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// The plugin, isolated from the developer's kubeconfig and colour settings.
pub fn camelk(dir: &Path) -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::new(env!("CARGO_BIN_EXE_kubectl-camelk"));
    cmd.current_dir(dir)
        .env_remove("KUBECONFIG")
        .env_remove("CAMELK_GIT_TOKEN")
        .env_remove("CAMELK_PLAN_TOKEN")
        .env("NO_COLOR", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir);
    cmd
}

/// A loopback port free right now, for a server a test starts.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits (up to 20 s) until `what` listens on loopback `port`.
pub fn wait_for_port(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `git` in `dir` and returns its stdout; panics when it fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("running git");
    camelk_testkit::assert_success(&output, &format!("git {args:?} failed"));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Creates Integration `name` through `api`, owned by `owner` (label and
/// annotation), with an empty spec.
pub async fn create_owned_integration(api: &Api<DynamicObject>, name: &str, owner: &str) {
    let obj: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": camelk_reconciler::camel_k::CamelKind::Integration.api_version(),
        "kind": "Integration",
        "metadata": { "name": name, "labels": { OPERATOR_ID_KEY: owner }, "annotations": { OPERATOR_ID_KEY: owner } },
        "spec": {}
    }))
    .unwrap();
    api.create(&kube::api::PostParams::default(), &obj)
        .await
        .unwrap();
}

/// Reads `name` through `api` ([`camelk_testkit::poll::until`]) until
/// `check` holds, and returns it; after `timeout`, panics saying it is not
/// `what`, with what `seen` tells of the last copy.
pub async fn poll_until(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    timeout: Duration,
    check: impl Fn(&DynamicObject) -> bool,
    seen: impl Fn(&DynamicObject) -> String,
) -> DynamicObject {
    let read = || async { Some(api.get(name).await.unwrap()) };
    match camelk_testkit::poll::until(timeout, read, check).await {
        Ok(passed) => passed,
        Err(last) => {
            let seen = last.as_ref().map(seen).unwrap_or_default();
            let state = camelk_testkit::upstream::camel_k_state(&api.clone().into_client()).await;
            panic!("{name}: not {what}; {seen}\n{state}")
        }
    }
}

/// A work tree on branch `main` whose first commit holds `manifest`.
pub fn repo_with(manifest: &str) -> TempDir {
    repo_with_bytes(manifest.as_bytes())
}

/// [`repo_with`], for a manifest that need not be UTF-8.
pub fn repo_with_bytes(manifest: &[u8]) -> TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path();
    git(path, &["init", "-q", "-b", "main"]);
    git(path, &["config", "user.name", "Test User"]);
    git(path, &["config", "user.email", "test@example.com"]);
    std::fs::write(path.join(MANIFEST), manifest).unwrap();
    std::fs::write(path.join("README"), "gitops repo\n").unwrap();
    git(path, &["add", "."]);
    git(path, &["commit", "-q", "-m", "initial"]);
    dir
}

/// Asserts that the message of the last commit in `dir` starts with
/// `subject` and holds each of `lines`.
pub fn assert_last_commit_message(dir: &Path, subject: &str, lines: &[&str]) {
    let message = git(dir, &["log", "-1", "--format=%B"]);
    assert!(message.starts_with(subject), "{subject:?}: {message}");
    for line in lines {
        assert!(message.contains(line), "{line:?}: {message}");
    }
}

/// A bare repository `name` under `root` holding `work`'s `main`.
pub fn bare_remote(root: &Path, name: &str, work: &Path) -> PathBuf {
    let bare = root.join(name);
    git(root, &["init", "-q", "--bare", name]);
    git(work, &["push", "-q", &bare.display().to_string(), "main"]);
    bare
}

/// Everything a command could change in a repository.
#[derive(Debug, PartialEq, Eq)]
pub struct RepoState {
    pub head: String,
    pub refs: String,
    pub status: String,
    pub manifest: Option<Vec<u8>>,
}

pub fn state(dir: &Path) -> RepoState {
    RepoState {
        head: git(dir, &["rev-parse", "--symbolic-full-name", "HEAD"])
            + &git(dir, &["rev-parse", "HEAD"]),
        refs: git(dir, &["for-each-ref"]),
        status: git(dir, &["status", "--porcelain", "--untracked-files=all"]),
        manifest: std::fs::read(dir.join(MANIFEST)).ok(),
    }
}

/// Runs `cmd` (the plugin in `dir`), which must exit with code 1 saying each
/// of `says` on stderr, and leave the repository as it was.
pub fn refuses_and_writes_nothing(dir: &Path, cmd: &mut assert_cmd::Command, says: &[&str]) {
    let before = state(dir);
    let output = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    for said in says {
        assert!(stderr.contains(said), "{said:?} in {stderr}");
    }
    assert_eq!(state(dir), before, "the refused command wrote something");
}

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(name)
}

/// A valid manifest with two operators, a rule, and one pin.
pub const SHOP: &str = "\
# The shop's operators.
apiVersion: camelk.dev/v1alpha1
kind: OperatorAssignment
metadata:
  name: shop
spec:
  operators:
    - id: operator-1   # current
      namespace: camel-k
    - id: operator-2   # next
      namespace: camel-k
  defaultOperator: operator-1
  rules:
    - name: canary
      match:
        names: [\"canary-*\"]
      operator: operator-2
  pins:
    - kind: Integration
      namespace: shop
      name: orders
      operator: operator-1   # keep during the sale
  rollout:
    steps: [\"50%\"]
";

/// The manifest of [`SHOP`] with a rule that can never match: valid, with
/// a warning at line 18, column 7.
pub fn manifest_with_a_warning() -> String {
    SHOP.replace(
        "  pins:\n",
        "    - name: shadowed\n      match:\n        names: [\"canary-1\"]\n      operator: operator-1\n  pins:\n",
    )
}

/// Runs the scoped operator loop of `id` in this process (its own identity's
/// client, under the shipped operator RBAC, its lock in `ns`) until `stop`.
pub async fn start_operator(
    cluster: &camelk_testkit::TestCluster,
    id: &str,
    ns: &str,
    stop: &CancellationToken,
) {
    cluster.grant_operator(id, ns, ns).await;
    let clients = Clients::new(cluster.config_as(id).await).unwrap();
    let cfg = OperatorConfig {
        id: OperatorId::new(id).unwrap(),
        lock_namespace: ns.into(),
        namespaces: vec![ns.into()],
        identity: format!("{id}-test"),
        version: "test".into(),
        build_time: Duration::from_millis(500),
        timing: LockTiming::new(
            Duration::from_secs(4),
            Duration::from_secs(3),
            Duration::from_secs(1),
        )
        .unwrap(),
        resync: Duration::from_millis(300),
    };
    tokio::spawn(operator::run(clients, cfg, stop.clone()));
}

/// Waits until `name` runs under `owner` (label and phase).
pub async fn wait_running(api: &Api<DynamicObject>, name: &str, owner: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let obj = api.get(name).await.unwrap();
        let labelled = obj
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(OPERATOR_ID_KEY))
            .map(String::as_str);
        if phase(&obj) == Some("Running") && labelled == Some(owner) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} not running under {owner}: {:?}",
            phase(&obj)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Runs the plugin against a live cluster as the `reconciler` identity in `ns`.
pub fn live_camelk(kubeconfig: &Path, ns: &str, args: &[&str]) -> std::process::Output {
    live_camelk_as("reconciler", kubeconfig, ns)
        .args(args)
        .output()
        .unwrap()
}

/// The plugin against a live cluster as `context` (a user of the test
/// kubeconfig) in `ns`, without colours; add the command's arguments.
pub fn live_camelk_as(context: &str, kubeconfig: &Path, ns: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubectl-camelk"));
    cmd.arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--context", context, "-n", ns])
        .env("NO_COLOR", "1");
    cmd
}

/// Starts `cmd` with its stdout read line by line on a thread of its own.
pub fn follow(
    cmd: &mut std::process::Command,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    use std::io::BufRead;
    let mut child = cmd.stdout(std::process::Stdio::piped()).spawn().unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let (send, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            let _ = send.send(line);
        }
    });
    (child, lines)
}

/// Waits up to 30 s for a line `what` prints that `wanted` accepts.
pub fn wait_for_line(
    lines: &std::sync::mpsc::Receiver<String>,
    what: &str,
    wanted: impl Fn(&str) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    while !seen.iter().any(|l: &String| wanted(l)) {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => panic!("{what} printed no such line: {seen:#?}"),
        }
    }
}

/// The shared control plane, a fresh namespace there named after `prefix`,
/// and the cluster admin's client: where a test on the cluster starts.
pub async fn shared_namespace(
    prefix: &str,
) -> (
    &'static camelk_testkit::TestCluster,
    camelk_testkit::TestNamespace,
    kube::Client,
) {
    let cluster = camelk_testkit::shared();
    let ns = cluster.namespace(prefix).await;
    let admin = cluster.admin().await;
    (cluster, ns, admin)
}

/// The cluster admin's client, once the camelk roles are granted and the
/// OperatorAssignment CRD is served: where a test of the reconciler starts.
pub async fn admin_with_crd(cluster: &camelk_testkit::TestCluster) -> kube::Client {
    cluster.grant_camelk_roles().await;
    let admin = cluster.admin().await;
    install_crd(&admin).await;
    admin
}

/// [`admin_with_crd`], then a fresh namespace named after `prefix` where a
/// sync may run (`grant_sync_namespace`).
pub async fn admin_and_sync_namespace(
    cluster: &camelk_testkit::TestCluster,
    prefix: &str,
) -> (kube::Client, camelk_testkit::TestNamespace) {
    let admin = admin_with_crd(cluster).await;
    let ns = cluster.namespace(prefix).await;
    cluster.grant_sync_namespace(&ns.name).await;
    (admin, ns)
}

/// Installs the OperatorAssignment CRD and waits until it is served.
pub async fn install_crd(admin: &kube::Client) {
    camelk_testkit::crds::install_assignment_crd(admin, "camelk-e2e").await;
}

/// Runs a `reconciler sync` loop as `reconciler` until `stop`, its object and
/// lock in `ns`, following branch `main` of `repo`
/// ([`camelk_testkit::in_process_sync`]). With `endpoints` (a listener and a
/// token file), it serves its HTTP endpoints on the listener, the plan
/// endpoint with the token in the file.
pub async fn start_sync(
    cluster: &camelk_testkit::TestCluster,
    ns: &str,
    repo: &std::path::Path,
    cache: &std::path::Path,
    stop: &CancellationToken,
    endpoints: Option<(std::net::TcpListener, std::path::PathBuf)>,
) -> std::thread::JoinHandle<()> {
    let options = camelk_testkit::in_process_sync::Options {
        endpoints,
        ..Default::default()
    };
    let url = repo.display().to_string();
    camelk_testkit::in_process_sync::start(cluster, ns, &url, cache, options, stop).await
}

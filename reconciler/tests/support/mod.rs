//! Shared set-up of the operator and handoff end-to-end tests: RBAC for the
//! operator and coordinator identities, operator processes, Camel K objects,
//! and waiting for conditions.

#![allow(dead_code)]

use std::fs::File;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use camelk_reconciler::camel_k::phase;
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use camelk_testkit::TestCluster;
use camelk_testkit::watchdog::Watchdog;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, DynamicObject};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

// Each test binary that includes this module uses a part of the testkit's.
#[allow(unused_imports)]
pub use camelk_testkit::scenario::{
    GitRemote, Scenario, World, camel_api, create_integration, owner, ready_under, two_operators,
    upstream_fleet, wait_for,
};

pub const OPERATORS: [&str; 3] = ["operator-1", "operator-2", "operator-3"];
/// The lease of [`camelk_testkit::SHORT_LOCK_ARGS`], which every
/// `reconciler` process a test starts runs with.
pub const LEASE: Duration = Duration::from_secs(4);
/// Grants `reconciler` the cluster-wide half of its shipped RBAC (a sync also
/// needs `grant_sync_namespace`); each operator gets its own as it starts.
pub async fn grant_rbac(cluster: &TestCluster) {
    cluster.grant_camelk_roles().await;
}

/// The options of a handoff that coordinator `coordinator` runs by the
/// protocol, its locks in `ns` with the tests' short [`LEASE`], never forced,
/// polling every 300 ms.
pub fn handoff_options(
    coordinator: &str,
    ns: &str,
    drain_timeout: Duration,
) -> camelk_reconciler::handoff::HandoffOptions {
    use camelk_reconciler::handoff::{ForcePolicy, HandoffOptions, ReleaseMode};
    HandoffOptions {
        coordinator: coordinator.into(),
        mode: ReleaseMode::Protocol,
        drain_timeout,
        force: ForcePolicy::Never,
        lock_timing: camelk_reconciler::lock::LockTiming::new(
            LEASE,
            Duration::from_secs(3),
            Duration::from_secs(1),
        )
        .unwrap(),
        lock_namespaces: Default::default(),
        default_lock_namespace: ns.into(),
        poll: Duration::from_millis(300),
    }
}

/// The move of the Integrations `names` of `ns` from `from` to `to`.
pub fn integration_batch(
    ns: &str,
    from: &str,
    to: &str,
    names: &[&str],
) -> camelk_reconciler::handoff::MoveBatch {
    use camelk_reconciler::api::OperatorId;
    camelk_reconciler::handoff::MoveBatch {
        namespace: ns.into(),
        from: OperatorId::new(from).unwrap(),
        to: OperatorId::new(to).unwrap(),
        resources: names
            .iter()
            .map(|n| (CamelKind::Integration, n.to_string()))
            .collect(),
    }
}

/// A fresh namespace named after `prefix` and the admin's client, once
/// [`grant_rbac`] ran: where a handoff test starts.
pub async fn namespace_and_admin(
    cluster: &TestCluster,
    prefix: &str,
) -> (camelk_testkit::TestNamespace, Client) {
    grant_rbac(cluster).await;
    let ns = cluster.namespace(prefix).await;
    let admin = cluster.admin().await;
    (ns, admin)
}

/// A running `reconciler` process (an operator or a sync), killed when
/// dropped, or when this test process exits first, however it exits.
pub struct OperatorProcess {
    pub id: String,
    pub child: Child,
    pub log: std::path::PathBuf,
    watchdog: Option<Watchdog>,
}

impl OperatorProcess {
    pub fn new(id: &str, child: Child, log: std::path::PathBuf) -> OperatorProcess {
        let watchdog = Watchdog::kill_on_exit(child.id()).ok();
        OperatorProcess {
            id: id.into(),
            child,
            log,
            watchdog,
        }
    }
    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }
    pub fn signal(&self, signal: Signal) {
        kill(self.pid(), signal).expect("signal the operator");
    }
    pub fn kill(&mut self) {
        camelk_testkit::watchdog::kill_and_reap(&mut self.child, &mut self.watchdog);
    }
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        let _ = kill(self.pid(), Signal::SIGCONT);
        self.kill();
    }
}

/// Starts operator `id` (as the identity of the same name, under the shipped
/// operator RBAC) watching `namespace`, its lock in `namespace` too.
/// `identity` tells replicas apart.
pub async fn start_operator(
    cluster: &TestCluster,
    id: &str,
    namespace: &str,
    identity: &str,
    build_time: &str,
) -> OperatorProcess {
    start_operator_watching(cluster, id, namespace, namespace, identity, build_time).await
}

/// [`start_operator`] with its lock in `lock_namespace` but watching
/// `watched`, which may be another namespace (a misconfigured operator). It
/// is granted the shipped operator RBAC in both.
pub async fn start_operator_watching(
    cluster: &TestCluster,
    id: &str,
    watched: &str,
    lock_namespace: &str,
    identity: &str,
    build_time: &str,
) -> OperatorProcess {
    cluster.grant_operator(id, watched, lock_namespace).await;
    spawn_operator(
        id,
        watched,
        lock_namespace,
        identity,
        build_time,
        &cluster.kubeconfig(),
    )
}

/// Spawns `reconciler operator` as [`start_operator_watching`] does, reaching
/// the API server through `kubeconfig` (a proxy's, in fault tests), without
/// granting anything.
pub fn spawn_operator(
    id: &str,
    watched: &str,
    lock_namespace: &str,
    identity: &str,
    build_time: &str,
    kubeconfig: &std::path::Path,
) -> OperatorProcess {
    let log = std::env::temp_dir().join(format!("camelk-e2e-{lock_namespace}-{identity}.log"));
    let out = File::create(&log).expect("operator log");
    let child = Command::new(env!("CARGO_BIN_EXE_reconciler"))
        .args([
            "operator",
            "--id",
            id,
            "--namespace",
            watched,
            "--lock-namespace",
            lock_namespace,
        ])
        .args(["--identity", identity, "--build-time", build_time])
        .args(camelk_testkit::SHORT_LOCK_ARGS)
        .args(["--resync", "300ms"])
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--context", id])
        .env("RUST_LOG", "info,camelk_reconciler=debug")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("start the reconciler binary");
    OperatorProcess::new(id, child, log)
}

/// Who holds the lock Lease `name` in `ns`, if anyone.
pub async fn lock_holder(client: &Client, ns: &str, name: &str) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .expect("read the lock Lease")
        .and_then(|l| l.spec?.holder_identity)
        .filter(|h| !h.is_empty())
}

/// Waits until `identity` holds the lock Lease `name` in `ns`.
pub async fn wait_lock_holder(client: &Client, ns: &str, name: &str, identity: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while lock_holder(client, ns, name).await.as_deref() != Some(identity) {
        assert!(
            Instant::now() < deadline,
            "{identity} did not take the lock {ns}/{name}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub fn in_phase<'a>(p: &'a str) -> impl Fn(&DynamicObject) -> bool + 'a {
    move |o| phase(o) == Some(p)
}

/// Waits (up to `timeout_secs`) until Integration `ns/name` runs under
/// operator `id` ([`running_under`]).
pub async fn wait_running(
    client: &Client,
    ns: &str,
    name: &str,
    id: &str,
    timeout_secs: u64,
) -> DynamicObject {
    let timeout = Duration::from_secs(timeout_secs);
    let what = format!("running under {id}");
    wait_for(client, CamelKind::Integration, ns, name)
        .within(timeout)
        .until(&what, running_under(id))
        .await
}

/// The audit-log judge for one test namespace: no successful write to a Camel
/// K resource by an operator that did not own it at that moment.
pub fn assert_single_owner(cluster: &TestCluster, ns: &str) {
    assert_single_owner_with(cluster, ns, None);
}

/// [`assert_single_owner`] where `unowned_handler` may also write what has no owner.
pub fn assert_single_owner_with(cluster: &TestCluster, ns: &str, unowned_handler: Option<&str>) {
    let events = cluster.audit_log().events_in(ns).unwrap();
    let violations = camelk_testkit::audit::single_owner_violations_with(
        &events,
        ns,
        &OPERATORS,
        unowned_handler,
    );
    assert!(
        violations.is_empty(),
        "dual-owner writes:\n{}",
        violations.join("\n")
    );
}

/// Running under operator `id`, from a kit that operator built.
pub fn running_under(id: &str) -> impl Fn(&DynamicObject) -> bool + '_ {
    move |o| {
        phase(o) == Some("Running")
            && owner(o).as_deref() == Some(id)
            && camelk_reconciler::camel_k::kit_name(o)
                .is_some_and(|k| k.ends_with(&format!("-kit-{id}")))
    }
}

/// Installs the `OperatorAssignment` CRD (server-side apply, idempotent) and
/// waits until it is served.
pub async fn install_assignment_crd(cluster: &TestCluster) {
    let admin = cluster.admin().await;
    camelk_testkit::crds::install_assignment_crd(&admin, "camelk-e2e").await;
}

/// A namespace named after `prefix` that a sync can act on: the shipped RBAC
/// granted (cluster-wide and in it), the `OperatorAssignment` CRD installed,
/// and the owner policy enforced there for the `reconciler` and `operators`,
/// `unowned_handler` (if any) the one that may write what has no owner.
/// Returns it with an admin client.
pub async fn policed_sync_namespace(
    cluster: &TestCluster,
    prefix: &str,
    operators: &[&str],
    unowned_handler: Option<&str>,
) -> (camelk_testkit::TestNamespace, Client) {
    grant_rbac(cluster).await;
    install_assignment_crd(cluster).await;
    let ns = cluster.namespace(prefix).await;
    cluster.grant_sync_namespace(&ns.name).await;
    let admin = cluster.admin().await;
    camelk_testkit::admission::enforce_with_unowned_handler(
        &admin,
        &ns.name,
        &["reconciler"],
        operators,
        unowned_handler,
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
    (ns, admin)
}

/// Starts `reconciler sync` as `identity`, following branch `main` of `git`
/// (its clone cached beside the remote, one per identity), its object and
/// lock in `namespace`, with `extra` arguments: `--interval`, `--poll` and
/// `--listen` given there replace the defaults.
pub fn start_sync(
    cluster: &TestCluster,
    namespace: &str,
    git: &GitRemote,
    identity: &str,
    extra: &[&str],
) -> OperatorProcess {
    let url = format!("file://{}", git.url().display());
    let cache = git.cache(identity);
    start_sync_via(
        namespace,
        &url,
        identity,
        &cache,
        &cluster.kubeconfig(),
        extra,
    )
}

/// [`start_sync`] following the repository at `url`, reaching the API
/// server through `kubeconfig` (a proxy's, in fault tests).
pub fn start_sync_via(
    namespace: &str,
    url: &str,
    identity: &str,
    cache: &std::path::Path,
    kubeconfig: &std::path::Path,
    extra: &[&str],
) -> OperatorProcess {
    let source = git_source_flags(url, cache);
    spawn_sync(namespace, identity, kubeconfig, &source, extra, &[])
}

/// The flags of a sync following branch `main` of `url` (the manifest at its
/// usual path), its cache in `cache`.
pub fn git_source_flags<'a>(url: &'a str, cache: &'a std::path::Path) -> [&'a str; 8] {
    let cache = cache.to_str().expect("a UTF-8 path");
    [
        "--repo",
        url,
        "--branch",
        "main",
        "--path",
        "operator-assignment.yaml",
        "--cache-dir",
        cache,
    ]
}

/// Spawns `reconciler sync` as the `reconciler` identity, its object and lock
/// in `namespace`, following `source` (its flags), with `extra` flags and
/// `env`; `--interval`, `--poll` and `--listen` given in `extra` replace
/// the defaults. The token variable of the environment this test runs in is
/// not passed on: only what a test gives is.
pub fn spawn_sync(
    namespace: &str,
    identity: &str,
    kubeconfig: &std::path::Path,
    source: &[&str],
    extra: &[&str],
    env: &[(&str, &str)],
) -> OperatorProcess {
    let log = std::env::temp_dir().join(format!("camelk-e2e-{namespace}-{identity}.log"));
    let out = File::create(&log).expect("sync log");
    let child = Command::new(env!("CARGO_BIN_EXE_reconciler"))
        .arg("sync")
        .args(source)
        .args(
            [
                ("--interval", "1s"),
                ("--poll", "300ms"),
                ("--listen", "127.0.0.1:0"),
            ]
            .into_iter()
            .filter(|(flag, _)| !extra.contains(flag))
            .flat_map(|(flag, value)| [flag, value]),
        )
        .args(["--namespace", namespace, "--identity", identity])
        .args(camelk_testkit::SHORT_LOCK_ARGS)
        .args(["--operator-lease-duration", "4s"])
        .args(extra)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--context", "reconciler"])
        .env("RUST_LOG", "info,camelk_reconciler=debug")
        .env_remove(camelk_reconciler::git::TOKEN_ENV)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("start reconciler sync");
    OperatorProcess::new("reconciler", child, log)
}

/// The `OperatorAssignment` in `namespace`.
pub async fn assignment(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Option<camelk_reconciler::api::OperatorAssignment> {
    Api::<camelk_reconciler::api::OperatorAssignment>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .unwrap()
}

/// Polls the `OperatorAssignment` until `check` holds of its status, or
/// panics after `timeout` with `what` and the sync's log.
pub async fn wait_status(
    client: &Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
    what: &str,
    sync: &OperatorProcess,
    check: impl Fn(&camelk_reconciler::api::OperatorAssignmentStatus) -> bool,
) -> camelk_reconciler::api::OperatorAssignmentStatus {
    let read = move || async move {
        assignment(client, namespace, name)
            .await
            .and_then(|o| o.status)
    };
    camelk_testkit::poll::until(timeout, read, check)
        .await
        .unwrap_or_else(|last| {
            panic!(
                "status of {namespace}/{name}: not {what} after {timeout:?}; last: {last:#?}\nsync log:\n{}",
                sync.log_tail()
            )
        })
}

/// The `OperatorAssignment` `name` in `namespace`, read as `client`, and the
/// sync acting on it (whose log explains a wait that timed out).
pub struct SyncedAssignment<'a> {
    pub client: &'a Client,
    pub namespace: &'a str,
    pub name: &'a str,
    pub sync: &'a OperatorProcess,
}

impl<'a> SyncedAssignment<'a> {
    pub fn new(
        client: &'a Client,
        namespace: &'a str,
        name: &'a str,
        sync: &'a OperatorProcess,
    ) -> SyncedAssignment<'a> {
        SyncedAssignment {
            client,
            namespace,
            name,
            sync,
        }
    }

    /// [`wait_status`] of this assignment, up to `timeout_secs`.
    pub async fn wait(
        &self,
        timeout_secs: u64,
        what: &str,
        check: impl Fn(&camelk_reconciler::api::OperatorAssignmentStatus) -> bool,
    ) -> camelk_reconciler::api::OperatorAssignmentStatus {
        let timeout = Duration::from_secs(timeout_secs);
        let (client, namespace, name) = (self.client, self.namespace, self.name);
        wait_status(client, namespace, name, timeout, what, self.sync, check).await
    }
}

/// For [`wait_status`]: revision `sha` is applied.
pub fn applied(
    sha: &str,
) -> impl Fn(&camelk_reconciler::api::OperatorAssignmentStatus) -> bool + '_ {
    move |s| s.last_applied_revision.as_deref() == Some(sha)
}

/// One change of a Camel K resource's owner label, as the audit log shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerChange {
    /// Plural of the kind (`integrations`).
    pub resource: String,
    pub name: String,
    pub from: Option<String>,
    pub to: Option<String>,
    /// The resourceVersion the change produced (etcd's commit order).
    pub resource_version: u64,
}

/// The requests `user` made in `namespace` that the API server answered, from
/// the audit log, in order.
pub fn answered_requests(
    cluster: &TestCluster,
    namespace: &str,
    user: &str,
) -> Vec<camelk_testkit::audit::AuditEvent> {
    cluster
        .audit_log()
        .events_in(namespace)
        .unwrap()
        .into_iter()
        .filter(|e| e.stage == "ResponseComplete" && e.user.username == user)
        .collect()
}

/// Changes of owner label of Camel K resources in `namespace`, from the audit
/// log, in commit order.
pub fn owner_changes(cluster: &TestCluster, namespace: &str) -> Vec<OwnerChange> {
    let mut writes: Vec<(u64, String, String, Option<String>)> = cluster
        .audit_log()
        .events_in(namespace)
        .unwrap()
        .into_iter()
        .filter(|e| {
            e.stage == "ResponseComplete"
                && e.is_successful_write()
                && e.object_ref.as_ref().and_then(|o| o.api_group.as_deref())
                    == Some("camel.apache.org")
        })
        .filter_map(|e| {
            let response = e.response_object.as_ref()?;
            let rv: u64 = response["metadata"]["resourceVersion"]
                .as_str()?
                .parse()
                .ok()?;
            let name = response["metadata"]["name"].as_str()?.to_string();
            let owner = response["metadata"]["labels"][OPERATOR_ID_KEY]
                .as_str()
                .map(str::to_string);
            Some((rv, e.resource()?.to_string(), name, owner))
        })
        .collect();
    writes.sort();
    let mut last: std::collections::HashMap<(String, String), Option<String>> = Default::default();
    let mut changes = Vec::new();
    for (rv, resource, name, owner) in writes {
        let key = (resource.clone(), name.clone());
        match last.get(&key) {
            Some(previous) if *previous != owner => changes.push(OwnerChange {
                resource,
                name,
                from: previous.clone(),
                to: owner.clone(),
                resource_version: rv,
            }),
            _ => {}
        }
        last.insert(key, owner);
    }
    changes
}

//! The control plane a test binary shares, and a fresh namespace per test.
//!
//! The first call to [`shared`] starts a control plane in a temporary
//! directory (or, when `CAMELK_TEST_KUBECONFIG` names the kubeconfig of a
//! running one, such as `make local-cluster`'s, reuses it). Tests of one binary
//! run in parallel on it, each in its own namespace; so a crate gathers its
//! end-to-end tests in one binary (`tests/e2e/main.rs`) to start one control
//! plane, not one per file. Each start prints one line on stderr
//! (`camelk-testkit: control plane started in ...`), past the harness's
//! capture, to count and time them.
//!
//! Tear-down cannot rely on destructors of statics, which Rust never runs, so
//! a [`Watchdog`] stops the control plane when the test binary exits in any
//! way and removes its directory
//! (`CAMELK_TEST_KEEP=1` keeps the directory for a post-mortem). A test that
//! starts control planes of its own guards them the same way
//! ([`TestCluster::guard`]).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

use crate::Error;
use crate::audit::AuditLog;
use crate::binaries::control_plane_bin_dir;
use crate::cluster::{self, ClusterDir, StartOptions};
use crate::crds::{self, CrdSource};
use crate::identity::{ADMIN, RECONCILER, random_hex};
use crate::watchdog::Watchdog;

pub const REUSE_ENV: &str = "CAMELK_TEST_KUBECONFIG";
const KEEP_ENV: &str = "CAMELK_TEST_KEEP";
/// Label put on every namespace a test creates.
pub const TEST_NAMESPACE_LABEL: &str = "camelk.dev/test";

/// A control plane shared by the tests of one binary.
pub struct TestCluster {
    dir: ClusterDir,
    // Stops the cluster when this process exits (see the module doc).
    _watchdog: Option<Watchdog>,
}

static SHARED: OnceLock<Result<TestCluster, String>> = OnceLock::new();

/// The control plane of this test binary, started on first use.
///
/// Panics with the reason when it cannot be started: every test that needs a
/// cluster fails loudly rather than passing without one.
pub fn shared() -> &'static TestCluster {
    let result = SHARED.get_or_init(|| {
        // Start on a thread of its own so callers inside a Tokio runtime can block.
        std::thread::spawn(|| boot().map_err(|e| e.to_string()))
            .join()
            .unwrap_or_else(|_| Err("control plane start-up panicked".into()))
    });
    match result {
        Ok(cluster) => cluster,
        Err(e) => panic!("no control plane for the tests: {e}"),
    }
}

fn boot() -> Result<TestCluster, Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| Error::Io {
            context: "starting a runtime".into(),
            source,
        })?;
    if let Some(kubeconfig) = std::env::var_os(REUSE_ENV) {
        let kubeconfig = PathBuf::from(kubeconfig);
        let root = kubeconfig
            .parent()
            .map(|p| p.to_path_buf())
            .unwrap_or_else(|| PathBuf::from("."));
        let dir = ClusterDir::new(root);
        runtime.block_on(async {
            let client = cluster::client_for(&dir, ADMIN).await?;
            crds::install(&client, &CrdSource::locate().load()?).await
        })?;
        return Ok(TestCluster {
            dir,
            _watchdog: None,
        });
    }

    let root = std::env::temp_dir().join(format!(
        "camelk-test-{}-{}",
        std::process::id(),
        random_hex(4).map_err(|source| Error::Io {
            context: "naming the state directory".into(),
            source
        })?
    ));
    let opts = StartOptions {
        dir: ClusterDir::new(&root),
        bin_dir: control_plane_bin_dir()?,
        crds: CrdSource::locate(),
    };
    let began = std::time::Instant::now();
    let started = runtime.block_on(cluster::start(&opts))?;
    // Past the test harness's output capture (it takes only `print!`s): one
    // line per start, to count the control planes a run starts and time them.
    let _ = writeln!(
        std::io::stderr(),
        "camelk-testkit: control plane started in {:.1}s for {} ({})",
        began.elapsed().as_secs_f64(),
        std::env::args().next().unwrap_or_default(),
        root.display()
    );
    TestCluster::guard(started.dir, &[&root])
}

impl TestCluster {
    /// A control plane this process started itself with [`cluster::start`]
    /// (the demo's): no watchdog, the caller stops it with [`cluster::stop`].
    pub fn attach(dir: ClusterDir) -> TestCluster {
        TestCluster {
            dir,
            _watchdog: None,
        }
    }

    /// A control plane this process started with [`cluster::start`], which a
    /// watchdog stops when this process exits in any way, killed included,
    /// then removes the directories `remove` (`CAMELK_TEST_KEEP=1` keeps
    /// them). A caller may still stop it earlier with [`cluster::stop`].
    pub fn guard(dir: ClusterDir, remove: &[&Path]) -> Result<TestCluster, Error> {
        let keep = std::env::var_os(KEEP_ENV).is_some();
        let watchdog =
            Watchdog::stop_cluster_on_exit(&dir, remove, keep).map_err(|source| Error::Io {
                context: "starting the watchdog".into(),
                source,
            })?;
        Ok(TestCluster {
            dir,
            _watchdog: Some(watchdog),
        })
    }

    pub fn dir(&self) -> &ClusterDir {
        &self.dir
    }

    /// Path of the kubeconfig; its contexts are named after the identities.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.kubeconfig()
    }

    pub fn audit_log(&self) -> AuditLog {
        AuditLog::new(self.dir.audit_log())
    }

    /// A client acting as the privileged `admin` identity.
    pub async fn admin(&self) -> Client {
        self.client_as(ADMIN).await
    }

    /// The client configuration of `identity` (a context of the kubeconfig).
    pub async fn config_as(&self, identity: &str) -> kube::Config {
        cluster::config_for(&self.dir, identity)
            .await
            .unwrap_or_else(|e| panic!("client configuration for {identity}: {e}"))
    }

    /// A client that acts as `identity` (a context of the cluster's kubeconfig).
    pub async fn client_as(&self, identity: &str) -> Client {
        cluster::client_for(&self.dir, identity)
            .await
            .unwrap_or_else(|e| panic!("client for {identity}: {e}"))
    }

    /// Lets `user` make the calls of `rules` in `ns` only: a Role and a
    /// RoleBinding, both named `name`. The authorizer learns of a new binding
    /// through its informer, so the first call may still be refused for a
    /// moment.
    pub async fn grant_in_namespace(
        &self,
        ns: &str,
        user: &str,
        name: &str,
        rules: Vec<k8s_openapi::api::rbac::v1::PolicyRule>,
    ) {
        use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
        let admin = self.admin().await;
        let metadata = ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            ..Default::default()
        };
        let role = Role {
            metadata: metadata.clone(),
            rules: Some(rules),
        };
        let binding = RoleBinding {
            metadata,
            role_ref: role_ref("Role", name),
            subjects: Some(vec![user_subject(user)]),
        };
        let params = PostParams::default();
        Api::<Role>::namespaced(admin.clone(), ns)
            .create(&params, &role)
            .await
            .unwrap_or_else(|e| panic!("creating Role {ns}/{name}: {e}"));
        Api::<RoleBinding>::namespaced(admin, ns)
            .create(&params, &binding)
            .await
            .unwrap_or_else(|e| panic!("creating RoleBinding {ns}/{name}: {e}"));
    }

    /// Lets `user` make the calls of `rules` in every namespace: a
    /// ClusterRole and a ClusterRoleBinding, both named `name` (applied,
    /// so idempotent). As with [`grant_in_namespace`](Self::grant_in_namespace),
    /// the first call may still be refused for a moment.
    pub async fn grant_cluster_wide(
        &self,
        user: &str,
        name: &str,
        rules: Vec<k8s_openapi::api::rbac::v1::PolicyRule>,
    ) {
        use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
        use kube::api::{Patch, PatchParams};
        let admin = self.admin().await;
        let metadata = ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        };
        let role = ClusterRole {
            metadata: metadata.clone(),
            rules: Some(rules),
            ..Default::default()
        };
        let binding = ClusterRoleBinding {
            metadata,
            role_ref: role_ref("ClusterRole", name),
            subjects: Some(vec![user_subject(user)]),
        };
        let params = PatchParams::apply("camelk-testkit").force();
        Api::<ClusterRole>::all(admin.clone())
            .patch(name, &params, &Patch::Apply(&role))
            .await
            .unwrap_or_else(|e| panic!("applying ClusterRole {name}: {e}"));
        Api::<ClusterRoleBinding>::all(admin)
            .patch(name, &params, &Patch::Apply(&binding))
            .await
            .unwrap_or_else(|e| panic!("applying ClusterRoleBinding {name}: {e}"));
    }

    /// Grants `reconciler` the cluster-wide half of the reconciler's shipped
    /// RBAC ([`crate::reconciler_rbac`]); idempotent. A `reconciler sync` also
    /// needs [`grant_sync_namespace`](Self::grant_sync_namespace) where its
    /// object lives; an operator, [`grant_operator`](Self::grant_operator).
    pub async fn grant_camelk_roles(&self) {
        crate::reconciler_rbac::apply_cluster_wide(&self.admin().await, RECONCILER)
            .await
            .unwrap_or_else(|e| panic!("the reconciler's shipped RBAC: {e:#}"));
    }

    /// Grants the identity named as operator `id` the reference operator's
    /// shipped RBAC ([`crate::operator_rbac`]) for watching `watched` with its
    /// lock in `lock_namespace`, and nothing else; idempotent.
    pub async fn grant_operator(&self, id: &str, watched: &str, lock_namespace: &str) {
        let placement = crate::operator_rbac::Placement {
            id,
            watched,
            lock_namespace,
        };
        crate::operator_rbac::apply(&self.admin().await, &placement)
            .await
            .unwrap_or_else(|e| panic!("the operator's shipped RBAC for {id} in {watched}: {e:#}"));
    }

    /// Grants the operator identities (`operator-1..3`) every call an operator
    /// may make, deletes excepted ([`operator_cluster_role`]), in `ns` only:
    /// for tests that write as an arbitrary operator (upstream's rights are
    /// wider than the reference operator's) to exercise the admission policy.
    ///
    /// [`operator_cluster_role`]: camelk_reconciler::handoff::operator_cluster_role
    pub async fn grant_operators_in(&self, ns: &str) {
        use camelk_reconciler::handoff::operator_cluster_role;
        let rules = operator_cluster_role("any").rules.unwrap_or_default();
        for user in ["operator-1", "operator-2", "operator-3"] {
            self.grant_in_namespace(ns, user, &format!("camelk-{user}-any"), rules.clone())
                .await;
        }
    }

    /// Grants `reconciler` the namespaced half of its shipped RBAC in `ns`, the
    /// namespace of a `reconciler sync`'s object and lock.
    pub async fn grant_sync_namespace(&self, ns: &str) {
        crate::reconciler_rbac::apply_in(&self.admin().await, RECONCILER, ns)
            .await
            .unwrap_or_else(|e| panic!("the reconciler's shipped Role in {ns}: {e:#}"));
    }

    /// Starts a real upstream Camel K operator `id` (`operator-1`..`operator-3`)
    /// of the pinned release, global, in its own namespace
    /// ([`crate::upstream::default_namespace`]); killed when the handle drops.
    pub async fn upstream_operator(&self, id: &str) -> crate::upstream::UpstreamOperator {
        self.upstream_operator_with(&crate::upstream::UpstreamOptions::new(id))
            .await
    }

    /// [`upstream_operator`](Self::upstream_operator) with other options
    /// (release, namespace, watched namespace, log level).
    pub async fn upstream_operator_with(
        &self,
        opts: &crate::upstream::UpstreamOptions,
    ) -> crate::upstream::UpstreamOperator {
        crate::upstream::start(&self.dir, opts)
            .await
            .unwrap_or_else(|e| panic!("upstream operator {}: {e}", opts.id))
    }

    /// Creates a namespace with a unique name starting with `prefix`; it is
    /// deleted when the returned guard is dropped.
    pub async fn namespace(&self, prefix: &str) -> TestNamespace {
        let name = format!("{prefix}-{}", random_hex(4).expect("random bytes"));
        let client = self.admin().await;
        let api: Api<Namespace> = Api::all(client);
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some([(TEST_NAMESPACE_LABEL.to_string(), "true".to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        api.create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
        TestNamespace {
            name,
            dir: self.dir.clone(),
        }
    }
}

/// A namespace of one test, deleted (with everything in it) on drop.
pub struct TestNamespace {
    pub name: String,
    dir: ClusterDir,
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let name = self.name.clone();
        let dir = self.dir.clone();
        // Drop cannot be async; delete from a short-lived runtime on its own thread.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let client = cluster::client_for(&dir, ADMIN).await.ok()?;
                let api: Api<Namespace> = Api::all(client);
                api.delete(&name, &DeleteParams::default()).await.ok()
            })
        })
        .join();
    }
}

fn role_ref(kind: &str, name: &str) -> k8s_openapi::api::rbac::v1::RoleRef {
    k8s_openapi::api::rbac::v1::RoleRef {
        api_group: Some("rbac.authorization.k8s.io".into()),
        kind: kind.into(),
        name: name.into(),
    }
}

fn user_subject(name: &str) -> k8s_openapi::api::rbac::v1::Subject {
    k8s_openapi::api::rbac::v1::Subject {
        kind: "User".into(),
        name: name.into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        ..Default::default()
    }
}

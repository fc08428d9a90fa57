//! The world of an end-to-end test, stated once: a namespace, the Camel K
//! resources in it (each with an owner or none), the `OperatorAssignment`
//! manifest pushed to a Git remote of its own. A test builds a [`Scenario`],
//! says only what differs from the defaults, and gets a [`World`] to act on.
//!
//! Operators are not started here: `reconciler operator` is a binary of the
//! crate under test (its path is known to that crate's tests only) and
//! upstream ones are shared by a test binary ([`crate::upstream`]); a test
//! starts them beside its [`World`].
//!
//! Also here, for every test crate: the one owner helper ([`owner`]) and the
//! one Git helper ([`GitRemote`]) every commit of a test goes through.
//!
//! ```no_run
//! # async fn example() {
//! use camelk_testkit::manifest::Assignment;
//! use camelk_testkit::scenario::Scenario;
//! let world = Scenario::new("my-test")
//!     .integrations(["orders", "billing"], Some("operator-1"))
//!     .manifest(|ns| Assignment::new("camel-k").operator("operator-1", ns), "operators")
//!     .build(camelk_testkit::shared())
//!     .await;
//! let _revision = world.revision;
//! # }
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY, condition, owner_id, phase};
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::json;

use crate::apps_repo::{BRANCH, git};
use crate::manifest::{Assignment, Rollout};
use crate::{TestCluster, TestNamespace};

/// The file of the manifest in every test's Git remote.
pub const MANIFEST_PATH: &str = "operator-assignment.yaml";

/// The owner a Camel K object's label names: the key operators select on.
/// Only the label, so that a test can tell a missing label from a present
/// annotation.
pub fn owner(obj: &DynamicObject) -> Option<String> {
    obj.metadata.labels.as_ref()?.get(OPERATOR_ID_KEY).cloned()
}

/// The resources of `kind` in `ns`, as `client`.
pub fn camel_api(client: Client, kind: CamelKind, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client, ns, &kind.api_resource())
}

/// Whether `obj` runs, `Ready`, under operator `id` by the one owner rule
/// (label, else annotation): an Integration an upstream operator runs.
pub fn ready_under(id: &str) -> impl Fn(&DynamicObject) -> bool + '_ {
    move |obj| {
        phase(obj) == Some("Running")
            && condition(obj, "Ready") == Some("True")
            && owner_id(&obj.metadata).as_deref() == Some(id)
    }
}

/// Creates Integration `name` (an `app` label, a user annotation, one route),
/// owned by `owner` (label and annotation, as `kamel run` writes them) or by
/// no one.
pub async fn create_integration(
    client: &Client,
    ns: &str,
    name: &str,
    owner: Option<&str>,
) -> DynamicObject {
    let mut meta =
        json!({ "name": name, "labels": { "app": name }, "annotations": { "team": "shop" } });
    if let Some(o) = owner {
        meta["labels"][OPERATOR_ID_KEY] = json!(o);
        meta["annotations"][OPERATOR_ID_KEY] = json!(o);
    }
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": CamelKind::Integration.api_version(),
        "kind": "Integration",
        "metadata": meta,
        "spec": { "sources": [{ "name": "route.yaml", "content": format!("- from: timer:{name}") }] }
    }))
    .expect("an Integration");
    camel_api(client.clone(), CamelKind::Integration, ns)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating integration {name}: {e}"))
}

/// Waiting on one Camel K object, `kind ns/name` as `client`:
/// `wait_for(..).within(timeout).until(what, check)` polls it until `check`
/// holds, or panics after `timeout` (60 s unless said) naming `what` and the
/// phase and owner it last showed.
pub struct Wait<'a> {
    client: &'a Client,
    kind: CamelKind,
    ns: &'a str,
    name: &'a str,
    timeout: Duration,
    explain: Option<Box<dyn Fn() -> String + 'a>>,
}

/// A [`Wait`] on `kind ns/name` as `client`.
pub fn wait_for<'a>(client: &'a Client, kind: CamelKind, ns: &'a str, name: &'a str) -> Wait<'a> {
    Wait {
        client,
        kind,
        ns,
        name,
        timeout: Duration::from_secs(60),
        explain: None,
    }
}

impl<'a> Wait<'a> {
    /// Gives up after `timeout`.
    pub fn within(self, timeout: Duration) -> Self {
        Wait { timeout, ..self }
    }

    /// Adds what `explain` says (the logs of the processes at work) to the
    /// failure of a wait that times out.
    pub fn explained_by(self, explain: impl Fn() -> String + 'a) -> Self {
        Wait {
            explain: Some(Box::new(explain)),
            ..self
        }
    }

    /// Polls until `check` holds and returns the object that passed it.
    pub async fn until(self, what: &str, check: impl Fn(&DynamicObject) -> bool) -> DynamicObject {
        let Wait {
            client,
            kind,
            ns,
            name,
            timeout,
            explain,
        } = self;
        let api = &camel_api(client.clone(), kind, ns);
        let read = move || async move {
            api.get_opt(name)
                .await
                .unwrap_or_else(|e| panic!("reading {kind} {ns}/{name}: {e}"))
        };
        match crate::poll::until(timeout, read, check).await {
            Ok(passed) => passed,
            Err(last) => panic!(
                "{kind} {ns}/{name}: not {what} after {timeout:?}; last seen: phase {:?}, owner {:?}\n{}\n{}",
                last.as_ref().and_then(|o| phase(o).map(str::to_string)),
                last.as_ref().and_then(owner),
                crate::upstream::camel_k_state(client).await,
                explain.map(|f| f()).unwrap_or_default()
            ),
        }
    }
}

/// A bare Git repository and a work tree that commits and force-pushes
/// `main` to it, with the `git` command line ([`git`]: no user or system
/// configuration read). Every commit a test makes goes through
/// [`GitRemote::commit`].
pub struct GitRemote {
    /// The folder holding both (and whatever a test keeps beside them: a
    /// cache clone, a token file).
    pub dir: tempfile::TempDir,
    bare: PathBuf,
}

impl GitRemote {
    /// An empty remote at `remote.git` in a folder of its own.
    pub fn new() -> GitRemote {
        GitRemote::with_bare("remote.git")
    }

    /// An empty remote at `bare` (relative to [`GitRemote::dir`]).
    pub fn with_bare(bare: &str) -> GitRemote {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let bare = dir.path().join(bare);
        std::fs::create_dir_all(&bare).expect("the bare repository's folder");
        git(
            &bare,
            &["init", "--quiet", "--bare", "--initial-branch", BRANCH],
        );
        git(
            dir.path(),
            &["init", "--quiet", "--initial-branch", BRANCH, "work"],
        );
        GitRemote { dir, bare }
    }

    /// The bare repository (what a reconciler follows as `file://`).
    pub fn url(&self) -> PathBuf {
        self.bare.clone()
    }

    /// The work tree whose commits [`GitRemote::commit`] pushes.
    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// A folder for a reconciler's cache clone.
    pub fn cache(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("cache-{name}"))
    }

    /// Writes `files` (paths relative to the work tree), commits them on
    /// `main` (also when nothing changed) and force-pushes it; returns the
    /// commit id.
    pub fn commit<P: AsRef<str>, T: AsRef<str>>(&self, files: &[(P, T)], message: &str) -> String {
        let work = self.work();
        for (path, text) in files {
            let path = work.join(path.as_ref());
            std::fs::create_dir_all(path.parent().expect("a file in a folder"))
                .expect("the file's folder");
            std::fs::write(path, text.as_ref()).expect("the file");
        }
        git(&work, &["add", "--all"]);
        git(
            &work,
            &["commit", "--quiet", "--allow-empty", "--message", message],
        );
        self.push_branch(BRANCH)
    }

    /// Commits `text` as the manifest ([`MANIFEST_PATH`]) and pushes it;
    /// returns the commit id.
    pub fn push(&self, text: &str, message: &str) -> String {
        self.commit(&[(MANIFEST_PATH, text)], message)
    }

    /// Rewinds `main` to `sha`, commits `text` on it and force-pushes: the
    /// remote's branch no longer contains its previous head.
    pub fn force_push_from(&self, sha: &str, text: &str, message: &str) -> String {
        git(&self.work(), &["reset", "--quiet", "--hard", sha]);
        self.push(text, message)
    }

    /// Pushes `branch` of the work tree to `main` of the remote (a merge of
    /// that branch, or a rewind); returns the commit id.
    pub fn push_branch(&self, branch: &str) -> String {
        let work = self.work();
        git(
            &work,
            &[
                "push",
                "--quiet",
                "--force",
                path_str(&self.bare),
                &format!("{branch}:{BRANCH}"),
            ],
        );
        git(&work, &["rev-parse", branch])
    }
}

impl Default for GitRemote {
    fn default() -> Self {
        GitRemote::new()
    }
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// Upstream operators `ids` (`kamel operator`, each in its default
/// namespace), each started and its IntegrationPlatform `Ready`.
pub async fn ready_upstream_operators(
    cluster: &TestCluster,
    ids: &[&str],
) -> Vec<crate::UpstreamOperator> {
    let admin = cluster.admin().await;
    let mut operators = Vec::new();
    for id in ids {
        operators.push(cluster.upstream_operator(id).await);
    }
    for operator in &operators {
        operator
            .ready_platform(&admin)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    operators
}

/// The assignment of tests on upstream operators: `ids` as `protocol:
/// Upstream` operators, each locked in its default namespace
/// ([`crate::upstream::default_namespace`]), `kinds` of `ns` in scope, Ready
/// required within 3 minutes of a step, 2 minutes to drain.
pub fn upstream_fleet(name: &str, ns: &str, ids: &[&str], kinds: &[CamelKind]) -> Assignment {
    ids.iter()
        .fold(Assignment::new(name), |assignment, id| {
            assignment.upstream_operator(id, &crate::upstream::default_namespace(id))
        })
        .scope(&[ns], kinds)
        .rollout(Rollout::new().require_ready(true).gate_timeout("3m"))
        .drain_timeout("2m")
}

/// The assignment most tests start from: operator-1 and operator-2 locked
/// in `ns`, the Integrations of `ns` in scope, operator-1 by default;
/// `staged` adds a move of everything from operator-1 to operator-2 in those
/// steps.
pub fn two_operators(name: &str, ns: &str, staged: Option<&[&str]>) -> Assignment {
    let assignment = Assignment::new(name)
        .operator("operator-1", ns)
        .operator("operator-2", ns)
        .scope(&[ns], &[CamelKind::Integration])
        .default_operator("operator-1");
    match staged {
        Some(steps) => assignment.staged_move("operator-1", "operator-2", steps),
        None => assignment,
    }
}

/// One Camel K resource a [`Scenario`] creates.
#[derive(Clone, Debug)]
pub struct Resource {
    pub kind: CamelKind,
    pub name: String,
    /// Its owner keys' value, or `None`: created without owner keys.
    pub owner: Option<String>,
}

/// What a test starts from; see the [module](self) documentation.
pub struct Scenario {
    prefix: String,
    system_prefix: Option<String>,
    resources: Vec<Resource>,
    manifest: Option<(ManifestOf, String)>,
}

/// Renders the manifest of a namespace whose name is known once it exists.
type ManifestOf = Box<dyn FnOnce(&str) -> Assignment + Send>;

impl Scenario {
    /// A namespace named after `prefix`, nothing in it, nothing pushed.
    pub fn new(prefix: &str) -> Scenario {
        Scenario {
            prefix: prefix.into(),
            system_prefix: None,
            resources: Vec::new(),
            manifest: None,
        }
    }

    /// A second namespace, for what runs apart from the resources it acts on
    /// (the sync's object, lock and Role in a real cluster).
    pub fn system_namespace(mut self, prefix: &str) -> Scenario {
        self.system_prefix = Some(prefix.into());
        self
    }

    /// Integrations `names`, each owned by `owner` (label and annotation)
    /// or by no one.
    pub fn integrations<I, S>(mut self, names: I, owner: Option<&str>) -> Scenario
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.resources
            .extend(names.into_iter().map(|name| Resource {
                kind: CamelKind::Integration,
                name: name.into(),
                owner: owner.map(str::to_string),
            }));
        self
    }

    /// Pushes the manifest `assignment` renders, with commit `message`,
    /// once the resources exist. `assignment` names the test's namespace:
    /// `build` passes it in.
    pub fn manifest(
        mut self,
        assignment: impl FnOnce(&str) -> Assignment + Send + 'static,
        message: &str,
    ) -> Scenario {
        self.manifest = Some((Box::new(assignment), message.into()));
        self
    }

    /// Creates the namespaces, the Git remote and the resources, then
    /// pushes the manifest, in that order.
    pub async fn build(self, cluster: &'static TestCluster) -> World {
        let ns = cluster.namespace(&self.prefix).await;
        let system = match &self.system_prefix {
            Some(prefix) => Some(cluster.namespace(prefix).await),
            None => None,
        };
        let admin = cluster.admin().await;
        for resource in &self.resources {
            match resource.kind {
                CamelKind::Integration => {
                    create_integration(&admin, &ns.name, &resource.name, resource.owner.as_deref())
                        .await;
                }
                other => panic!("a Scenario creates Integrations only, not {other}"),
            }
        }
        let git = GitRemote::new();
        let revision = self
            .manifest
            .map(|(assignment, message)| git.push(&assignment(&ns.name).render(), &message));
        World {
            cluster,
            ns,
            system,
            admin,
            git,
            resources: self.resources,
            revision,
        }
    }
}

/// A [`Scenario`] built: everything in it exists.
pub struct World {
    pub cluster: &'static TestCluster,
    /// Where the resources live (deleted with them on drop).
    pub ns: TestNamespace,
    /// The namespace [`Scenario::system_namespace`] asked for, if any.
    pub system: Option<TestNamespace>,
    pub admin: Client,
    pub git: GitRemote,
    pub resources: Vec<Resource>,
    /// The commit that pushed the manifest, if the scenario had one.
    pub revision: Option<String>,
}

impl World {
    /// The namespace of the resources.
    pub fn tenant(&self) -> &str {
        &self.ns.name
    }

    /// The system namespace, else the namespace of the resources.
    pub fn system(&self) -> &str {
        self.system.as_ref().unwrap_or(&self.ns).name.as_str()
    }

    /// The names of the scenario's resources of `kind`.
    pub fn names(&self, kind: CamelKind) -> impl Iterator<Item = &str> {
        self.resources
            .iter()
            .filter(move |r| r.kind == kind)
            .map(|r| r.name.as_str())
    }

    /// The resources of `kind` in the tenant namespace, as the admin.
    pub fn api(&self, kind: CamelKind) -> Api<DynamicObject> {
        camel_api(self.admin.clone(), kind, self.tenant())
    }

    /// [`wait_for`] `kind name` in the tenant namespace, as the admin.
    pub fn wait_for<'a>(&'a self, kind: CamelKind, name: &'a str) -> Wait<'a> {
        wait_for(&self.admin, kind, self.tenant(), name)
    }

    /// The owner label of Integration `name` now; panics if it is missing.
    pub async fn owner_of(&self, name: &str) -> Option<String> {
        let obj = self
            .api(CamelKind::Integration)
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("reading Integration {}/{name}: {e}", self.tenant()));
        owner(&obj)
    }
}

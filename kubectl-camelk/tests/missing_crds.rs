//! A CustomResourceDefinition a command needs is not installed: every
//! command that talks to the cluster, and `reconciler sync` and
//! `reconciler operator`, stop before doing anything, name the missing CRD
//! and how to install it, exit non-zero and write nothing (checked in the
//! API server's audit log: the only requests are discovery reads).
//!
//! The tests install and delete CRDs, so they run on a control plane of
//! their own (started once for this binary with no CRD at all, never the
//! shared one), one test at a time, each first bringing the CRDs to the
//! state it needs.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use camelk_reconciler::camel_k::{CamelKind, generated_crd};
use camelk_reconciler::preflight::{self, Crd};
use camelk_testkit::TestCluster;
use camelk_testkit::cluster::{self, ClusterDir, StartOptions};
use camelk_testkit::crds::CrdSource;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};

use common::{SHOP, camelk, repo_with, state};

/// What the hint for the project's CRD says.
const OUR_FIX: &str = "reconciler crds | kubectl apply --server-side -f -";
/// What the hint for Camel K's CRDs says.
const CAMEL_K_FIX: &str =
    "kubectl apply --server-side -k 'github.com/apache/camel-k/v2/pkg/resources/config/crd?ref=";
const OURS: &str = "operatorassignments.camelk.dev";
const INTEGRATIONS: &str = "integrations.camel.apache.org";

/// The control plane of this binary and the `reconciler` binary.
struct Plane {
    cluster: TestCluster,
    reconciler: PathBuf,
}

static PLANE: OnceLock<Result<Plane, String>> = OnceLock::new();

fn plane() -> &'static Plane {
    PLANE
        .get_or_init(|| {
            std::thread::spawn(boot)
                .join()
                .unwrap_or_else(|_| Err("control plane start-up panicked".into()))
        })
        .as_ref()
        .unwrap_or_else(|e| panic!("no control plane for the tests: {e}"))
}

fn boot() -> Result<Plane, String> {
    let name = format!("camelk-missing-crds-{}", std::process::id());
    let root = std::env::temp_dir().join(&name);
    // An empty folder of CRDs: the control plane starts with none.
    let no_crds = std::env::temp_dir().join(format!("{name}-no-crds"));
    std::fs::create_dir_all(&no_crds).map_err(|e| e.to_string())?;
    let opts = StartOptions {
        dir: ClusterDir::new(&root),
        bin_dir: camelk_testkit::binaries::control_plane_bin_dir().map_err(|e| e.to_string())?,
        crds: CrdSource::Upstream(no_crds.clone()),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let started = runtime
        .block_on(cluster::start(&opts))
        .map_err(|e| e.to_string())?;
    // Stopped, and both folders removed, when this binary exits.
    let cluster = TestCluster::guard(started.dir, &[&root, &no_crds]).map_err(|e| e.to_string())?;
    Ok(Plane {
        cluster,
        reconciler: reconciler_binary(),
    })
}

/// The `reconciler` binary of this workspace, built by cargo now (a no-op
/// when it is up to date), so the test never runs a stale one.
fn reconciler_binary() -> PathBuf {
    camelk_testkit::workspace_binary("camelk-reconciler", "reconciler")
}

/// Every CRD the tests may install.
fn every_crd() -> Vec<Crd> {
    std::iter::once(Crd::OperatorAssignment)
        .chain(preflight::camel_kinds(&CamelKind::ALL))
        .collect()
}

/// What Camel K v2.10.1 ships: every kind but KameletBinding.
fn camel_k_2_10() -> Vec<Crd> {
    preflight::camel_kinds(&CamelKind::ALL)
        .into_iter()
        .filter(|c| *c != Crd::Camel(CamelKind::KameletBinding))
        .collect()
}

/// One test at a time: each sets the CRDs it needs, and reads the audit log
/// for its own requests.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Waits for this test's turn, then installs exactly `installed` (deleting
/// the others) and waits until discovery says so.
async fn with_crds(installed: &[Crd]) -> tokio::sync::MutexGuard<'static, ()> {
    let turn = TURN.lock().await;
    let admin = plane().cluster.admin().await;
    let all = every_crd();
    let absent = |admin: kube::Client| {
        let all = all.clone();
        async move {
            let absent = preflight::check_crds(&admin, &[], &all).await.unwrap();
            absent.into_iter().collect::<BTreeSet<Crd>>()
        }
    };
    let now_absent = absent(admin.clone()).await;
    let api: Api<CustomResourceDefinition> = Api::all(admin.clone());
    for crd in &all {
        let wanted = installed.contains(crd);
        let present = !now_absent.contains(crd);
        if wanted && !present {
            let object = match crd {
                Crd::OperatorAssignment => camelk_reconciler::api::crd(),
                Crd::Camel(kind) => generated_crd(*kind),
            };
            api.patch(
                &crd.name(),
                &PatchParams::apply("missing-crds-test").force(),
                &Patch::Apply(&object),
            )
            .await
            .unwrap_or_else(|e| panic!("installing {crd}: {e}"));
        } else if present && !wanted {
            api.delete(&crd.name(), &DeleteParams::default())
                .await
                .unwrap_or_else(|e| panic!("deleting {crd}: {e}"));
        }
    }
    let expected: BTreeSet<Crd> = all
        .iter()
        .filter(|c| !installed.contains(c))
        .copied()
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = absent(admin.clone()).await;
        if now == expected {
            return turn;
        }
        assert!(
            Instant::now() < deadline,
            "CRDs not installed/removed in time: absent {now:?}, expected {expected:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Runs the plugin in `dir` as `context`.
fn plugin(dir: &Path, context: &str, args: &[&str]) -> Output {
    camelk(dir)
        .args(args)
        .arg("--kubeconfig")
        .arg(plane().cluster.kubeconfig())
        .args(["--context", context])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap()
}

/// Runs `kubectl camelk ARGS -n NS` as `developer`.
fn developer_in(dir: &Path, ns: &str, args: &[&str]) -> Output {
    let mut full = args.to_vec();
    full.extend(["-n", ns]);
    plugin(dir, "developer", &full)
}

/// Runs `reconciler ARGS` as `context`, waiting (up to 60 s) for it to exit.
fn reconciler(context: &str, args: &[&str]) -> Output {
    let mut child = Command::new(&plane().reconciler)
        .args(args)
        .arg("--kubeconfig")
        .arg(plane().cluster.kubeconfig())
        .args(["--context", context])
        .env_remove("KUBECONFIG")
        .env_remove("POD_NAMESPACE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the reconciler");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "reconciler {args:?} did not stop: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `out` failed with `code`, naming each of `crds` and each of `fixes`,
/// and not as the API server's bare 404.
fn assert_refused(what: &str, out: &Output, code: i32, crds: &[&str], fixes: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "{what}: {err}");
    for crd in crds {
        assert!(err.contains(crd), "{what} should name {crd}: {err}");
    }
    for fix in fixes {
        assert!(err.contains(fix), "{what} should say `{fix}`: {err}");
    }
    assert!(
        !err.contains("404 page not found") && !err.contains("Failed to parse"),
        "{what}: {err}"
    );
    assert!(
        out.stdout.is_empty(),
        "{what} printed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Since `mark`, `user` only asked discovery (`GET /apis/GROUP/VERSION`):
/// no read, and above all no write, of any object.
fn assert_only_discovery(mark: u64, user: &str, what: &str) {
    let (requests, _) = plane()
        .cluster
        .audit_log()
        .requests_since(mark)
        .expect("reading the audit log");
    let mine: Vec<_> = requests
        .iter()
        .filter(|r| r.user.username == user && r.is_request_start())
        .collect();
    assert!(!mine.is_empty(), "{what}: no request by {user} audited");
    for r in mine {
        assert!(
            r.verb == "get" && r.object_ref.is_none() && r.request_uri.starts_with("/apis/"),
            "{what}: {user} made {} {} beyond discovery",
            r.verb,
            r.request_uri
        );
    }
}

fn mark() -> u64 {
    plane().cluster.audit_log().mark().unwrap()
}

/// Nothing in `ns` a run could have left: no Lease, no Event.
async fn assert_nothing_in(ns: &str, what: &str) {
    let admin = plane().cluster.admin().await;
    let leases = Api::<Lease>::namespaced(admin.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(leases.items.is_empty(), "{what} created a Lease in {ns}");
    let events = Api::<Event>::namespaced(admin, ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(events.items.is_empty(), "{what} created an Event in {ns}");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_camel_k_crds_every_cluster_command_names_integrations_and_writes_nothing() {
    let _turn = with_crds(&[]).await;
    let ns = plane().cluster.namespace("no-crds").await;
    let repo = repo_with(SHOP);
    let before = state(repo.path());
    let commands: [&[&str]; 11] = [
        &["status"],
        &["get"],
        &["get", "pipe"],
        &["operators"],
        &["move", "integration/orders", "--to", "operator-2"],
        &["sync"],
        &["sync", "shop", "--wait"],
        &["suspend"],
        &["resume", "shop"],
        &["plan"],
        &["diff"],
    ];
    for args in commands {
        let what = format!("kubectl camelk {}", args.join(" "));
        let mark = mark();
        let out = developer_in(repo.path(), &ns.name, args);
        // `diff` says errors with 2, every other command with 1.
        let code = if args[0] == "diff" { 2 } else { 1 };
        let assignments = ["status", "sync", "suspend", "resume"].contains(&args[0]);
        let mut crds = vec![INTEGRATIONS];
        let mut fixes = vec![CAMEL_K_FIX];
        if assignments {
            crds.push(OURS);
            fixes.push(OUR_FIX);
        }
        if args == ["get", "pipe"] {
            crds.push("pipes.camel.apache.org");
        }
        assert_refused(&what, &out, code, &crds, &fixes);
        assert!(
            stderr(&out).starts_with("error: "),
            "{what}: {}",
            stderr(&out)
        );
        assert_only_discovery(mark, "developer", &what);
    }
    assert_eq!(state(repo.path()), before);
    assert_nothing_in(&ns.name, "the plugin").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn without_camel_k_crds_the_reconciler_names_them_and_writes_nothing() {
    let _turn = with_crds(&[Crd::OperatorAssignment]).await;
    let ns = plane().cluster.namespace("no-camel-k").await;
    let repo = repo_with(SHOP);
    let before = state(repo.path());
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().join("clone");
    let url = format!("file://{}", repo.path().display());

    let mark = mark();
    let out = reconciler(
        "reconciler",
        &[
            "sync",
            "--repo",
            &url,
            "--namespace",
            &ns.name,
            "--listen",
            "127.0.0.1:0",
            "--cache-dir",
            cache_dir.to_str().unwrap(),
        ],
    );
    assert_refused("reconciler sync", &out, 1, &[INTEGRATIONS], &[CAMEL_K_FIX]);
    assert!(!stderr(&out).contains(OURS), "{}", stderr(&out));
    assert_only_discovery(mark, "reconciler", "reconciler sync");
    assert!(!cache_dir.exists(), "reconciler sync cloned the repository");
    assert_eq!(state(repo.path()), before);

    let mark = self::mark();
    let out = reconciler(
        "operator-1",
        &[
            "operator",
            "--id",
            "operator-1",
            "--lock-namespace",
            &ns.name,
        ],
    );
    assert_refused(
        "reconciler operator",
        &out,
        1,
        &[
            INTEGRATIONS,
            "integrationkits.camel.apache.org",
            "builds.camel.apache.org",
        ],
        &[CAMEL_K_FIX],
    );
    assert_only_discovery(mark, "operator-1", "reconciler operator");
    assert_nothing_in(&ns.name, "the reconciler").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn without_the_operator_assignment_crd_commands_name_it_and_write_nothing() {
    let _turn = with_crds(&camel_k_2_10()).await;
    let ns = plane().cluster.namespace("no-assignment").await;
    let repo = repo_with(SHOP);
    let before = state(repo.path());
    let commands: [&[&str]; 5] = [
        &["status"],
        &["status", "shop"],
        &["sync", "--wait"],
        &["suspend", "shop"],
        &["resume"],
    ];
    for args in commands {
        let what = format!("kubectl camelk {}", args.join(" "));
        let mark = mark();
        let out = developer_in(repo.path(), &ns.name, args);
        assert_refused(&what, &out, 1, &[OURS], &[OUR_FIX]);
        assert!(!stderr(&out).contains(INTEGRATIONS), "{}", stderr(&out));
        assert_only_discovery(mark, "developer", &what);
    }

    let cache = tempfile::tempdir().unwrap();
    let url = format!("file://{}", repo.path().display());
    for (what, args) in [
        (
            "reconciler sync --source git",
            vec!["sync", "--repo", &url, "--namespace", &ns.name],
        ),
        (
            "reconciler sync --source cluster",
            vec![
                "sync",
                "--source",
                "cluster",
                "--name",
                "shop",
                "--namespace",
                &ns.name,
            ],
        ),
    ] {
        let mark = mark();
        let cache_dir = cache.path().join(what.replace(' ', "-"));
        let mut args = args.clone();
        args.extend([
            "--listen",
            "127.0.0.1:0",
            "--cache-dir",
            cache_dir.to_str().unwrap(),
        ]);
        let out = reconciler("reconciler", &args);
        assert_refused(what, &out, 1, &[OURS], &[OUR_FIX]);
        assert!(!stderr(&out).contains(INTEGRATIONS), "{}", stderr(&out));
        assert_only_discovery(mark, "reconciler", what);
        assert!(!cache_dir.exists(), "{what} cloned the repository");
    }
    assert_eq!(state(repo.path()), before);
    assert_nothing_in(&ns.name, "a command without the OperatorAssignment CRD").await;
}

/// What a note on a skipped KameletBinding says.
const BINDING_NOTE: &str = "note: the KameletBinding CustomResourceDefinition \
                            (kameletbindings.camel.apache.org) is not installed; skipped";
/// The hint that says what replaced KameletBinding.
const PIPE_HINT: &str = "is the Camel K v1 kind that Pipe replaced in v2: name pipes instead";

/// Camel K v2.10.1 ships no KameletBinding CRD. A kind nobody named is
/// skipped silently by `get`, `plan` and `check`; named on the command line
/// it is an error, and named by the manifest (or an OperatorAssignment, for
/// `check`) a note, each with the fix.
#[tokio::test(flavor = "multi_thread")]
async fn a_missing_optional_kind_is_silent_unless_named_then_said_with_the_fix() {
    let mut installed = camel_k_2_10();
    installed.push(Crd::OperatorAssignment);
    let _turn = with_crds(&installed).await;
    let ns = plane().cluster.namespace("optional").await;
    let repo = repo_with(SHOP);

    let get = plugin(repo.path(), "admin", &["get", "-n", &ns.name]);
    assert_eq!(get.status.code(), Some(0), "{}", stderr(&get));
    assert_eq!(stderr(&get), "", "get names no kind: nothing said");
    assert!(
        !String::from_utf8_lossy(&get.stdout).contains("KameletBinding"),
        "{}",
        String::from_utf8_lossy(&get.stdout)
    );
    let plan = plugin(repo.path(), "admin", &["plan", "-n", &ns.name]);
    assert_eq!(plan.status.code(), Some(0), "{}", stderr(&plan));
    assert!(
        !stderr(&plan).contains("is not installed"),
        "SHOP names no KameletBinding: {}",
        stderr(&plan)
    );
    let check = plugin(repo.path(), "admin", &["check", "-n", &ns.name]);
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(
        report.contains("integrations.camel.apache.org served"),
        "{report}"
    );
    assert!(!report.contains("kameletbindings"), "{report}");

    // A manifest that names the kind gets the note, with the fix.
    let naming = SHOP.replace(
        "  defaultOperator: operator-1\n",
        "  scope:\n    kinds: [Integration, KameletBinding]\n  defaultOperator: operator-1\n",
    );
    assert_ne!(naming, SHOP);
    std::fs::write(repo.path().join(common::MANIFEST), &naming).unwrap();
    let plan = plugin(repo.path(), "admin", &["plan", "-n", &ns.name]);
    assert_eq!(plan.status.code(), Some(0), "{}", stderr(&plan));
    let plan_err = stderr(&plan);
    let said: Vec<&str> = plan_err.lines().collect();
    assert_eq!(said.first(), Some(&BINDING_NOTE), "plan: {plan_err}");
    assert!(plan_err.contains(CAMEL_K_FIX), "plan: {plan_err}");
    assert!(plan_err.contains(PIPE_HINT), "plan: {plan_err}");
    assert_eq!(
        plan_err.matches("is not installed").count(),
        1,
        "once: {plan_err}"
    );

    // So does `check`, once an OperatorAssignment there names it.
    let object = camelk_reconciler::manifest::Manifest::parse("naming.yaml", naming)
        .unwrap()
        .assignment;
    Api::<camelk_reconciler::api::OperatorAssignment>::namespaced(
        plane().cluster.admin().await,
        &ns.name,
    )
    .create(&Default::default(), &object)
    .await
    .unwrap();
    let check = plugin(repo.path(), "admin", &["check", "-n", &ns.name]);
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(
        report.contains(
            "! kameletbindings.camel.apache.org is not installed, but OperatorAssignment shop \
             names KameletBinding: its resources are skipped"
        ),
        "{report}"
    );
    assert!(
        report.contains("fix: install the CRDs of your Camel K release"),
        "{report}"
    );

    for args in [
        vec!["get", "kameletbinding"],
        vec!["get", "klb", "-A"],
        vec!["move", "klb/legacy", "--to", "operator-2"],
    ] {
        let what = format!("kubectl camelk {}", args.join(" "));
        let mark = mark();
        let mut full = args.clone();
        full.extend(["-n", &ns.name]);
        let out = plugin(repo.path(), "developer", &full);
        assert_refused(
            &what,
            &out,
            1,
            &["kameletbindings.camel.apache.org"],
            &[CAMEL_K_FIX, PIPE_HINT],
        );
        assert!(!stderr(&out).contains(INTEGRATIONS), "{}", stderr(&out));
        assert_only_discovery(mark, "developer", &what);
    }
}

/// Discovery needs no rights: a user who may read nothing gets past the
/// check when the CRDs are there, and is refused by RBAC, not told a CRD
/// is missing.
#[tokio::test(flavor = "multi_thread")]
async fn the_check_needs_no_rights_on_crds() {
    let _turn = with_crds(&camel_k_2_10()).await;
    let ns = plane().cluster.namespace("rights").await;
    let repo = repo_with(SHOP);
    let out = plugin(
        repo.path(),
        "viewer",
        &["get", "integration", "-n", &ns.name],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("forbidden"), "{err}");
    assert!(!err.contains("not installed"), "{err}");
}

/// `get` is silent about a kind it skips that nobody asked for, whichever
/// way it is asked (every namespace, one operator, JSON or YAML), and still
/// lists the kinds that are installed.
#[tokio::test(flavor = "multi_thread")]
async fn get_is_silent_about_kinds_nobody_asked_for_with_every_filter_and_output() {
    let _turn = with_crds(&camel_k_2_10()).await;
    let ns = plane().cluster.namespace("get-notes").await;
    let admin = plane().cluster.admin().await;
    camelk_testkit::scenario::create_integration(&admin, &ns.name, "orders", Some("operator-1"))
        .await;
    let repo = repo_with(SHOP);

    for args in [
        vec!["get", "-A"],
        vec!["get", "--operator", "operator-1", "-n", &ns.name],
        vec!["get", "-o", "json", "-n", &ns.name],
        vec!["get", "-o", "yaml", "-A"],
    ] {
        let what = format!("kubectl camelk {}", args.join(" "));
        let out = plugin(repo.path(), "admin", &args);
        assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr(&out));
        assert_eq!(stderr(&out), "", "{what}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("orders"), "{what}: {stdout}");
        if args.contains(&"json") {
            let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(listed["items"][0]["name"], "orders", "{what}");
            assert_eq!(listed["items"][0]["operator"], "operator-1", "{what}");
        }
    }
}

//! The README's quickstart, run as the README writes it.
//!
//! The shell block under "Quickstart" is read from README.md, its names and
//! URL replaced by this test's own (each replaced string must still be in
//! it, so an edit of the README that this test does not follow fails here),
//! and each command run in a user's clone of a Git repository with
//! `kubectl`, `kubectl-camelk` and `helm` on `PATH` and `KUBECONFIG` naming
//! the cluster admin. A comment line that says "merge" is done as a merge
//! on the Git host would do it: main fast-forwarded to the branch just
//! pushed.
//!
//! The cluster: a real API server, two real upstream Camel K operators
//! (`kamel operator` of the pinned release, global, operator-1 and
//! operator-2, each with its IntegrationPlatform) and Integrations created
//! as `kamel run -x` creates them (the owner annotation only), running
//! under operator-1. `helm install` installs the chart for real; no kubelet
//! runs its Deployment, so the test starts the reconciler from the pod
//! template the API server holds ([`camelk_testkit::pod`]), under the
//! chart's ServiceAccount and RBAC, as the pod would run. The API server's
//! audit log judges every write: no resource ever has two writers.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use camelk_testkit::pod::{self, PodProcess};
use camelk_testkit::upstream::OPERATOR_ID_ANNOTATION;
use camelk_testkit::{TestCluster, workspace_binary};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::json;

const README: &str = include_str!("../../../README.md");
/// Where the chart installs the reconciler (the README's `-n`).
const SYSTEM: &str = "camelk-system";
const INTEGRATIONS: [&str; 4] = ["orders", "payments", "billing", "audit"];
const IMAGE: &str = "docker.io/library/camelk-quickstart:1.0";

/// The README's quickstart block: one command per entry (continuation
/// lines joined), comments kept as they are.
fn quickstart_block() -> Vec<String> {
    let section = README
        .split("\n## ")
        .find(|s| s.starts_with("Quickstart"))
        .expect("README.md has a Quickstart section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("the Quickstart section has a ```sh block");
    let mut commands = Vec::new();
    let mut current = String::new();
    for line in block.lines() {
        match line.trim_end().strip_suffix('\\') {
            Some(head) => current.push_str(head),
            None => {
                current.push_str(line);
                commands.push(std::mem::take(&mut current));
            }
        }
    }
    commands
}

/// `command` with each (README's, this test's) pair replaced; panics when
/// a pair no longer appears in the README's block.
fn localised(commands: &[String], pairs: &[(&str, String)]) -> Vec<String> {
    let whole = commands.join("\n");
    for (from, _) in pairs {
        assert!(
            whole.contains(from),
            "the README's quickstart no longer says {from:?}: update this test"
        );
    }
    commands
        .iter()
        .map(|c| {
            pairs
                .iter()
                .fold(c.clone(), |c, (from, to)| c.replace(from, to))
        })
        .collect()
}

fn integrations(client: Client, ns: &str) -> Api<DynamicObject> {
    camelk_testkit::scenario::camel_api(
        client,
        camelk_reconciler::camel_k::CamelKind::Integration,
        ns,
    )
}

fn owner_keys(o: &DynamicObject) -> (Option<String>, Option<String>) {
    let key = |map: &Option<std::collections::BTreeMap<String, String>>| {
        map.as_ref()
            .and_then(|m| m.get(OPERATOR_ID_ANNOTATION))
            .cloned()
    };
    (key(&o.metadata.labels), key(&o.metadata.annotations))
}

fn running_and_ready(o: &DynamicObject) -> bool {
    o.data["status"]["phase"] == "Running"
        && o.data["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// Waits until every Integration of `ns` satisfies `accept`.
async fn wait_all(
    api: &Api<DynamicObject>,
    timeout: Duration,
    what: &str,
    logs: &dyn Fn() -> String,
    accept: impl Fn(&DynamicObject) -> bool,
) {
    let deadline = Instant::now() + timeout;
    loop {
        let list = api.list(&ListParams::default()).await.unwrap();
        if list.items.len() == INTEGRATIONS.len() && list.items.iter().all(&accept) {
            return;
        }
        if Instant::now() > deadline {
            let states: Vec<String> = list
                .items
                .iter()
                .map(|o| {
                    format!(
                        "{}: keys {:?}, status {}",
                        o.metadata.name.as_deref().unwrap_or_default(),
                        owner_keys(o),
                        o.data["status"]
                    )
                })
                .collect();
            panic!(
                "not {what} after {timeout:?}:\n{}\n{}",
                states.join("\n"),
                logs()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Git in `dir` as the user runs it.
fn git(dir: &Path, home: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    camelk_testkit::assert_success(&out, &format!("git {args:?}"));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The user's shell: each command in the clone, with the plugin, Helm and
/// kubectl on `PATH` and the admin's kubeconfig.
struct Shell {
    clone: PathBuf,
    home: PathBuf,
    path: String,
    kubeconfig: PathBuf,
}

impl Shell {
    fn run(&self, command: &str) -> String {
        let out = Command::new("bash")
            .args(["-c", command])
            .current_dir(&self.clone)
            .env("PATH", &self.path)
            .env("HOME", &self.home)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("NO_COLOR", "1")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("bash runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "`{command}` failed ({}):\n{text}",
            out.status
        );
        text
    }

    /// What a merge of the branch just pushed does on the Git host: main
    /// fast-forwarded to it.
    fn merge(&self) {
        git(&self.clone, &self.home, &["push", "origin", "HEAD:main"]);
    }
}

/// Starts the reconciler as the Deployment `helm install` made would run it.
async fn start_reconciler(cluster: &TestCluster, admin: &Client, scratch: &Path) -> PodProcess {
    let deployments = Api::<Deployment>::namespaced(admin.clone(), SYSTEM)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(
        deployments.items.len(),
        1,
        "the chart installs one Deployment, the reconciler's"
    );
    let template = deployments.items[0]
        .spec
        .template
        .spec
        .clone()
        .expect("the Deployment has a pod template");
    let kubeconfig = scratch.join("reconciler.kubeconfig");
    pod::template_kubeconfig(&cluster.kubeconfig(), admin, SYSTEM, &template, &kubeconfig)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let binary = workspace_binary("camelk-reconciler", "reconciler");
    pod::start(
        admin,
        SYSTEM,
        &template,
        "camelk-reconciler-0",
        &binary,
        &kubeconfig,
        scratch,
    )
    .await
    .unwrap_or_else(|e| panic!("starting the reconciler: {e:#}"))
}

/// Waits until `holder` leads through the Lease `ns/name`.
async fn wait_leading(
    admin: &Client,
    ns: &str,
    name: &str,
    holder: &str,
    logs: &dyn Fn() -> String,
) {
    let api = Api::<Lease>::namespaced(admin.clone(), ns);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let leader = api
            .get_opt(name)
            .await
            .unwrap()
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity);
        if leader.as_deref() == Some(holder) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{holder} does not lead {ns}/{name} (holder {leader:?}):\n{}",
            logs()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_quickstart_runs_as_written() {
    let cluster = camelk_testkit::shared();
    let admin = cluster.admin().await;
    let operator_1 = cluster.upstream_operator("operator-1").await;
    let operator_2 = cluster.upstream_operator("operator-2").await;
    for operator in [&operator_1, &operator_2] {
        operator
            .ready_platform(&admin)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let operator_logs = || {
        format!(
            "operator-1:\n{}\noperator-2:\n{}",
            operator_1.log_tail(20),
            operator_2.log_tail(20)
        )
    };

    // What `kamel run -x operator-1` made, running.
    let apps = cluster.namespace("shop").await;
    let api = integrations(admin.clone(), &apps.name);
    for name in INTEGRATIONS {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "camel.apache.org/v1",
            "kind": "Integration",
            "metadata": { "name": name, "annotations": { OPERATOR_ID_ANNOTATION: "operator-1" } },
            "spec": { "traits": { "container": { "image": IMAGE } } },
        }))
        .unwrap();
        api.create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("creating Integration {name}: {e}"));
    }
    wait_all(
        &api,
        Duration::from_secs(240),
        "Running and Ready under operator-1",
        &operator_logs,
        running_and_ready,
    )
    .await;

    // The Git host and the user's clone of it.
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join(".gitconfig"),
        "[user]\n\tname = Platform Engineer\n\temail = platform@example.com\n[init]\n\tdefaultBranch = main\n",
    )
    .unwrap();
    let host = scratch.path().join("gitops.git");
    git(
        scratch.path(),
        &home,
        &["init", "-q", "--bare", "-b", "main", "gitops.git"],
    );
    git(
        scratch.path(),
        &home,
        &["clone", "-q", host.to_str().unwrap(), "gitops"],
    );
    let clone = scratch.path().join("gitops");
    std::fs::write(clone.join("README.md"), "Platform GitOps\n").unwrap();
    git(&clone, &home, &["add", "README.md"]);
    git(&clone, &home, &["commit", "-q", "-m", "Start"]);
    git(&clone, &home, &["push", "-q", "origin", "main"]);

    let plugin = workspace_binary("kubectl-camelk", "kubectl-camelk");
    let helm = camelk_testkit::binaries::helm_bin_dir().unwrap_or_else(|e| panic!("{e}"));
    let shell = Shell {
        clone: clone.clone(),
        home: home.clone(),
        path: camelk_testkit::path_with(&[plugin.parent().unwrap(), &helm]),
        kubeconfig: cluster.kubeconfig(),
    };
    let chart = camelk_testkit::workspace_root()
        .canonicalize()
        .unwrap()
        .join("charts/camelk-reconciler");
    let commands = localised(
        &quickstart_block(),
        &[
            (
                "https://git.example.com/platform/gitops.git",
                format!("file://{}", host.display()),
            ),
            ("./charts/camelk-reconciler", chart.display().to_string()),
            (
                "operator-2=system:serviceaccount:camel-k-next:camel-k-operator",
                "operator-2=operator-2".into(),
            ),
            (
                "operator-1=system:serviceaccount:camel-k:camel-k-operator",
                "operator-1=operator-1".into(),
            ),
            (
                "operator-2=camel-k-next",
                format!("operator-2={}", operator_2.namespace()),
            ),
            (
                "operator-1=camel-k ",
                format!("operator-1={} ", operator_1.namespace()),
            ),
        ],
    );

    let mut reconciler: Option<PodProcess> = None;
    let reconciler_log = |r: &Option<PodProcess>| {
        r.as_ref()
            .map(|r| format!("reconciler:\n{}", r.log_tail(40)))
            .unwrap_or_default()
    };
    let mut ran = Vec::new();
    for command in &commands {
        if command.trim_start().starts_with('#') {
            if command.contains("merge") {
                shell.merge();
                ran.push("(merge)".to_string());
            }
            continue;
        }
        if command.starts_with("kubectl camelk check") {
            // A user runs `check` once the pod has started: the reconciler
            // leads and has applied the manifest main holds.
            let logs = || reconciler_log(&reconciler);
            wait_leading(
                &admin,
                SYSTEM,
                "camelk-reconciler-lock",
                "camelk-reconciler-0",
                &logs,
            )
            .await;
            wait_all(
                &api,
                Duration::from_secs(120),
                "adopted by operator-1 (both keys)",
                &|| format!("{}\n{}", logs(), operator_logs()),
                |o| {
                    owner_keys(o) == (Some("operator-1".into()), Some("operator-1".into()))
                        && running_and_ready(o)
                },
            )
            .await;
        }
        let started = Instant::now();
        let output = shell.run(command);
        eprintln!("quickstart: {command:?} took {:.1?}", started.elapsed());
        ran.push(command.clone());
        if command.starts_with("helm install") {
            reconciler = Some(start_reconciler(cluster, &admin, scratch.path()).await);
        }
        if command.starts_with("kubectl camelk rollout") {
            assert!(
                output.contains("move"),
                "rollout prints the plan of its change:\n{output}"
            );
        }
    }
    assert!(
        ran.iter()
            .any(|c| c.starts_with("kubectl camelk sync --wait")),
        "the quickstart ends by following the rollout: {ran:?}"
    );

    // `sync --wait` returned 0: the rollout is applied. Every Integration
    // runs under operator-2, both keys say so, and no write had two owners.
    let logs = || format!("{}\n{}", reconciler_log(&reconciler), operator_logs());
    wait_all(
        &api,
        Duration::from_secs(60),
        "Running and Ready under operator-2",
        &logs,
        |o| {
            owner_keys(o) == (Some("operator-2".into()), Some("operator-2".into()))
                && running_and_ready(o)
        },
    )
    .await;
    let events = cluster.audit_log().events().unwrap();
    let violations = camelk_testkit::audit::single_owner_violations(
        &events,
        &apps.name,
        &["operator-1", "operator-2"],
    );
    assert!(
        violations.is_empty(),
        "dual-owner writes:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_quickstart_block_is_read_as_commands() {
    let commands = quickstart_block();
    assert!(
        commands
            .iter()
            .any(|c| c.starts_with("kubectl camelk init"))
    );
    let helm = commands
        .iter()
        .find(|c| c.starts_with("helm install"))
        .expect("the quickstart installs the chart");
    assert!(
        helm.contains("--set git.repository=") && !helm.contains('\\'),
        "continuation lines are joined: {helm}"
    );
}

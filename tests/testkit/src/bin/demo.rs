//! `demo` (`make demo`): the whole story on a local control plane, with real
//! upstream Apache Camel K operators, in about two minutes.
//!
//! 1. starts a local control plane ([`camelk_testkit::cluster::start`]: etcd,
//!    kube-apiserver, kube-scheduler, kube-controller-manager and a KWOK node
//!    that runs the pods of Deployments) with the Camel K CRDs of the new
//!    release, and enforces the owner admission policy in the apps' namespace;
//! 2. starts two real, unmodified Camel K operators (`kamel operator`, see
//!    [`camelk_testkit::upstream`]), each as its own identity, in its own
//!    namespace, with its IntegrationPlatform `Ready`: operator-1 on the old
//!    release (v2.8.0), operator-2 on the new one (v2.10.1). When v2.8.0 does
//!    not build, both run v2.10.1 and the demo says why;
//! 3. creates Integrations and Pipes as `kamel run -x` and `kamel bind -x`
//!    create them: the owner annotation only, a prebuilt image each (no Maven
//!    build can run here), so each runs `Ready` on the simulated node;
//! 4. starts `reconciler sync` on a Git repository holding
//!    `examples/demo/operator-assignment.yaml`: it adopts what `kamel` created
//!    (one write each, adding the owner label);
//! 5. commits a rollout operator-1 → operator-2 in three steps with
//!    `kubectl camelk rollout`, prints `kubectl camelk plan --base --head`,
//!    merges it, and shows the live progress from the object's status;
//! 6. ends with a summary from the API server's audit log: moves, time, API
//!    writes per move, and dual-owner writes (which must be 0); and shows the
//!    admission policy refusing a cluster admin's hand edit of an owner.
//!
//! It needs the `reconciler` and `kubectl-camelk` binaries next to its own
//! and the two `kamel` releases (`make demo` builds them all). Everything
//! stops on exit, Ctrl-C included; the state directory (logs, audit log) is
//! kept for a look afterwards.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use camelk_reconciler::api::{OperatorAssignment, OperatorAssignmentStatus};
use camelk_reconciler::camel_k::status::{condition, phase};
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY, owner_id, owner_of};
use camelk_reconciler::inventory::cluster as live;
use camelk_reconciler::manifest::Manifest;
use camelk_reconciler::plan::{self, Actual};
use camelk_testkit::binaries::{
    CAMEL_K_PREVIOUS_VERSION, CAMEL_K_VERSION, camel_k_dir, control_plane_bin_dir,
};
use camelk_testkit::cluster::{self, ClusterDir, StartOptions};
use camelk_testkit::crds::CrdSource;
use camelk_testkit::upstream::{self, UpstreamOperator, UpstreamOptions};
use camelk_testkit::{AuditEvent, TestCluster};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

/// Namespace of the demo's Camel K resources.
const APPS: &str = "shop";
/// Namespace of the OperatorAssignment object and the reconciler's lock.
const CONTROL: &str = "camel-k";
const ASSIGNMENT: &str = "camel-k";
/// Integrations besides `orders` and `canary-checkout`.
const SERVICES: usize = 24;
const PIPES: usize = 6;
const BRANCH: &str = "rollout-operator-2";
const OPERATORS: [&str; 2] = ["operator-1", "operator-2"];

fn main() -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let state = std::env::temp_dir().join("camelk-demo");
    let mut demo = Demo {
        dir: ClusterDir::new(&state),
        children: Vec::new(),
        operators: Vec::new(),
    };
    let result = runtime.block_on(async {
        tokio::select! {
            result = demo.run() => result,
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
        }
    });
    demo.stop();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("\ndemo failed: {e:#}");
            eprintln!("logs: {}", state.join("logs").display());
            ExitCode::FAILURE
        }
    }
}

struct Demo {
    dir: ClusterDir,
    children: Vec<(String, Child)>,
    operators: Vec<UpstreamOperator>,
}

fn section(title: &str) {
    // anstream drops the style off a terminal and under NO_COLOR.
    let bold = anstyle::Style::new().bold();
    anstream::println!("\n{bold}== {title}{bold:#}");
}

/// The releases of operator-1 and operator-2, and why they are the same when they are.
fn releases() -> (&'static str, &'static str, Option<String>) {
    match camel_k_dir(CAMEL_K_PREVIOUS_VERSION) {
        Ok(_) => (CAMEL_K_PREVIOUS_VERSION, CAMEL_K_VERSION, None),
        Err(e) => (
            CAMEL_K_VERSION,
            CAMEL_K_VERSION,
            Some(format!(
                "Camel K {CAMEL_K_PREVIOUS_VERSION} did not build ({e}); \
                 both operators run {CAMEL_K_VERSION}: the same rollout, without the release change"
            )),
        ),
    }
}

impl Demo {
    fn stop(&mut self) {
        // Dropping an UpstreamOperator kills it.
        self.operators.clear();
        for (_, child) in self.children.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let stopped = cluster::stop(&self.dir);
        if !stopped.is_empty() {
            println!(
                "\nstopped the operators, the reconciler and the control plane; state kept in {}",
                self.dir.root().display()
            );
        }
    }

    async fn run(&mut self) -> anyhow::Result<()> {
        let bins = binaries()?;
        println!(
            "Camel K {CAMEL_K_PREVIOUS_VERSION} (operator-1) and {CAMEL_K_VERSION} (operator-2): \
             built from the Go module proxy on first use, then cached"
        );
        let (old, new, same_release) = releases();
        let started = Instant::now();

        section("1. A local Kubernetes control plane");
        let opts = StartOptions {
            dir: self.dir.clone(),
            bin_dir: control_plane_bin_dir()?,
            crds: CrdSource::locate(),
        };
        let local = cluster::start(&opts).await?;
        println!(
            "kube-apiserver {} ready in {:.1}s (etcd, kube-apiserver, kube-scheduler, \
             kube-controller-manager, a KWOK node that runs pods)",
            local.server,
            started.elapsed().as_secs_f64()
        );
        println!("Camel K CRDs of {new} installed (CRDs first, as an upgrade applies them)");
        let cluster = TestCluster::attach(self.dir.clone());
        let admin = cluster.admin().await;
        cluster.grant_camelk_roles().await;
        install_assignment_crd(&admin).await?;
        for ns in [CONTROL, APPS] {
            create_namespace(&admin, ns).await?;
        }
        cluster.grant_sync_namespace(CONTROL).await;
        camelk_testkit::admission::enforce_in(&admin, APPS, &["reconciler"], &OPERATORS).await?;
        println!(
            "admission policy {} enforced in {APPS}: only the reconciler changes an owner; \
             an operator writes only what it owns",
            camelk_testkit::admission::POLICY
        );

        section("2. Two real Camel K operators: the old release and the new one");
        if let Some(why) = &same_release {
            println!("note: {why}");
        }
        let t = Instant::now();
        let options = |id: &str, version: &str| UpstreamOptions {
            version: version.into(),
            ..UpstreamOptions::new(id)
        };
        let (opts1, opts2) = (options("operator-1", old), options("operator-2", new));
        let (op1, op2) = tokio::join!(
            upstream::start(&self.dir, &opts1),
            upstream::start(&self.dir, &opts2),
        );
        self.operators.push(op1?);
        self.operators.push(op2?);
        let (p1, p2) = tokio::join!(
            self.operators[0].ready_platform(&admin),
            self.operators[1].ready_platform(&admin),
        );
        p1?;
        p2?;
        for op in &self.operators {
            println!(
                "kamel operator {:<7} id {}  namespace {}  pid {:<7} IntegrationPlatform {} Ready",
                op.version(),
                op.id(),
                op.namespace(),
                op.pid(),
                op.id()
            );
        }
        println!(
            "both up in {:.1}s; global (WATCH_NAMESPACE empty), each as its own identity, \
             leading through its Lease <id>-lock",
            t.elapsed().as_secs_f64()
        );
        let kubeconfig = self.dir.kubeconfig();
        println!("\n$ kubectl camelk operators");
        run_shown(
            &bins.kubectl_camelk,
            &["--context", "admin", "operators"],
            &kubeconfig,
        )?;

        section("3. Integrations and Pipes, created as `kamel` creates them");
        println!(
            "$ kamel run -x operator-1 --name svc-01 --image {}   (orders, svc-01..svc-{SERVICES:02})",
            image("svc-01")
        );
        println!(
            "$ kamel run -x operator-2 --name canary-checkout --image {}",
            image("canary-checkout")
        );
        println!(
            "$ kamel bind -x operator-1 --name pipe-01 timer:tick-1 log:info --trait container.image={}   (pipe-01..pipe-{PIPES:02})",
            image("pipe-01")
        );
        let names = create_resources(&admin).await?;
        println!(
            "created {} Integrations and {PIPES} Pipes in {APPS}: the owner annotation only, no label",
            names.len()
        );
        println!(
            "each with a prebuilt image: no Maven build can run here, and a Pipe built from source \
             would end in Error, which the requireReady gate would rightly refuse to pass"
        );
        let t = Instant::now();
        wait_all_running(&admin, None, Duration::from_secs(180)).await?;
        println!(
            "all running after {:.1}s: {}",
            t.elapsed().as_secs_f64(),
            describe_counts(&owners(&admin).await?)
        );

        section("4. A Git repository and the reconciler: adoption");
        let git = self.dir.root().join("git");
        let repo = GitRepo::create(&git)?;
        let manifest_text = std::fs::read_to_string(
            camelk_testkit::workspace_root().join("examples/demo/operator-assignment.yaml"),
        )
        .context("reading examples/demo/operator-assignment.yaml")?;
        let rev1 = repo.commit_and_push(&manifest_text, "Operators for the shop")?;
        println!(
            "{}: operator-assignment.yaml at {} (protocol: Upstream for both operators)",
            repo.remote.display(),
            &rev1[..12]
        );
        let logs = self.dir.root().join("logs");
        let remote_url = format!("file://{}", repo.remote.display());
        let metrics_port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let listen = format!("127.0.0.1:{metrics_port}");
        let cache = self.dir.root().join("sync-cache");
        let sync = spawn(
            &bins.reconciler,
            &logs.join("reconciler-sync.log"),
            &[
                "sync",
                "--repo",
                &remote_url,
                "--branch",
                "main",
                "--path",
                "operator-assignment.yaml",
                "--interval",
                "2s",
                "--poll",
                "300ms",
                "--namespace",
                CONTROL,
                "--identity",
                "reconciler-0",
                "--cache-dir",
                path_str(&cache)?,
                "--listen",
                &listen,
                "--context",
                "reconciler",
            ],
            &kubeconfig,
        )?;
        println!(
            "reconciler sync pid {} (following {remote_url}, branch main); logs: {}",
            sync.id(),
            logs.display()
        );
        self.children.push(("sync".into(), sync));
        let adopt_from = cluster.audit_log().events_in(APPS)?.len();
        let t = Instant::now();
        wait_all_running(&admin, Some(&rev1), Duration::from_secs(120)).await?;
        let events = cluster.audit_log().events_in(APPS)?;
        let adoption = reconciler_writes(&events[adopt_from.min(events.len())..]);
        let label_only = adoption
            .iter()
            .filter(|(_, _, after)| {
                after["metadata"]["labels"][OPERATOR_ID_KEY]
                    == after["metadata"]["annotations"][OPERATOR_ID_KEY]
            })
            .count();
        println!(
            "applied after {:.1}s: {} adopted with {} writes ({label_only} adding the label \
             next to the annotation kamel wrote); no handoff, nothing restarted",
            t.elapsed().as_secs_f64(),
            describe_counts(&owners(&admin).await?),
            adoption.len()
        );

        section("5. A rolling upgrade from operator-1 to operator-2 in three steps, from Git");
        println!(
            "$ kubectl camelk rollout --from operator-1 --to operator-2 --steps 10%,50%,100% --branch {BRANCH}"
        );
        run_shown(
            &bins.kubectl_camelk,
            &[
                "rollout",
                "--repo",
                path_str(&repo.work)?,
                "--from",
                "operator-1",
                "--to",
                "operator-2",
                "--steps",
                "10%,50%,100%",
                "--branch",
                BRANCH,
            ],
            &kubeconfig,
        )?;
        println!("\n$ kubectl camelk plan --base main --head {BRANCH} -A");
        run_shown(
            &bins.kubectl_camelk,
            &[
                "--context",
                "admin",
                "-A",
                "plan",
                "--repo",
                path_str(&repo.work)?,
                "--base",
                "main",
                "--head",
                BRANCH,
            ],
            &kubeconfig,
        )?;
        let head_text = repo.read_branch(BRANCH)?;
        let expected = planned_moves(&admin, &manifest_text, &head_text).await?;

        section("6. Merged: the reconciler executes the planned migration");
        let rollout_from = cluster.audit_log().events_in(APPS)?.len();
        let merged_at = Instant::now();
        let rev2 = repo.merge(BRANCH)?;
        println!("main is now {} (merge of {BRANCH})", &rev2[..12]);
        let status = progress(&admin, &rev2, expected.len(), merged_at).await?;
        let elapsed = merged_at.elapsed();
        wait_all_running(&admin, Some(&rev2), Duration::from_secs(60)).await?;

        section("7. Summary, from the API server's audit log");
        let events = cluster.audit_log().events_in(APPS)?;
        let rollout_events = &events[rollout_from.min(events.len())..];
        summary(&events, rollout_events, &expected, &status, elapsed);
        if let Some(why) = &same_release {
            println!("release change:        none ({why})");
        } else {
            println!("release change:        Camel K {old} → {new}, one step at a time");
        }
        let violations = camelk_testkit::audit::single_owner_violations(&events, APPS, &OPERATORS);
        if !violations.is_empty() {
            bail!("dual-owner writes:\n{}", violations.join("\n"));
        }
        hand_edit_is_refused(&admin).await?;
        if let Some((_, sync)) = self.children.iter().find(|(n, _)| n == "sync") {
            let rss = std::fs::read_to_string(format!("/proc/{}/status", sync.id()))
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find(|l| l.starts_with("VmRSS:"))
                        .map(|l| l.trim_start_matches("VmRSS:").trim().to_string())
                });
            if let Some(rss) = rss {
                println!("reconciler sync RSS:   {rss}");
            }
        }
        println!("\n$ curl http://{listen}/metrics   (reconciler sync, excerpt)");
        for line in metrics(metrics_port)?.lines().filter(|l| {
            l.starts_with("camelk_resources")
                || l.starts_with("camelk_handoff_duration_seconds_sum")
                || l.starts_with("camelk_handoff_duration_seconds_count")
                || l.starts_with("camelk_sync_errors")
        }) {
            println!("  {line}");
        }
        println!(
            "\naudit log: {}\noperator logs: {}\ndemo done in {:.0}s",
            cluster.audit_log().path().display(),
            self.operators
                .iter()
                .map(|o| o.log().display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }
}

/// A cluster admin handing an Integration of operator-2 back to operator-1
/// by hand is refused by the admission policy (the demo fails if it is not).
async fn hand_edit_is_refused(admin: &Client) -> anyhow::Result<()> {
    let owners = owners(admin).await?;
    let Some(((_, name), _)) = owners.iter().find(|((kind, _), owner)| {
        *kind == CamelKind::Integration && owner.as_deref() == Some("operator-2")
    }) else {
        bail!("no Integration with operator-2 to relabel");
    };
    println!(
        "\n$ kubectl --context admin -n {APPS} label integration/{name} {OPERATOR_ID_KEY}=operator-1 --overwrite"
    );
    let patch = json!({ "metadata": { "labels": { OPERATOR_ID_KEY: "operator-1" } } });
    match camel(admin, CamelKind::Integration)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Err(kube::Error::Api(status)) if status.code == 403 => {
            println!("Error from server (Forbidden): {}", status.message);
            Ok(())
        }
        Ok(_) => bail!("the admission policy let a hand edit of {name}'s owner through"),
        Err(e) => Err(e).context("relabelling by hand"),
    }
}

/// `GET /metrics` of the reconciler, over plain HTTP/1.1.
fn metrics(port: u16) -> anyhow::Result<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default())
}

struct Binaries {
    reconciler: PathBuf,
    kubectl_camelk: PathBuf,
}

/// `reconciler` and `kubectl-camelk`, built next to this binary by `make demo`.
fn binaries() -> anyhow::Result<Binaries> {
    let exe = std::env::current_exe().context("locating the demo binary")?;
    let dir = exe.parent().context("the demo binary has no directory")?;
    let find = |name: &str| {
        let path = dir.join(name);
        if path.is_file() {
            Ok(path)
        } else {
            bail!(
                "{} not found; run the demo with `make demo`, which builds it",
                path.display()
            )
        }
    };
    Ok(Binaries {
        reconciler: find("reconciler")?,
        kubectl_camelk: find("kubectl-camelk")?,
    })
}

fn path_str(path: &Path) -> anyhow::Result<&str> {
    path.to_str().context("a non-UTF-8 path")
}

fn spawn(bin: &Path, log: &Path, args: &[&str], kubeconfig: &Path) -> anyhow::Result<Child> {
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    Command::new(bin)
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))
}

/// Runs a command with its output on the terminal.
fn run_shown(bin: &Path, args: &[&str], kubeconfig: &Path) -> anyhow::Result<()> {
    let status = Command::new(bin)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("NO_COLOR", "1")
        .status()
        .with_context(|| format!("running {}", bin.display()))?;
    // `plan` exits 1 when there are changes, as `kubectl diff` does.
    if status.code().is_none_or(|c| c > 1) {
        bail!("{} {} failed: {status}", bin.display(), args.join(" "));
    }
    Ok(())
}

async fn install_assignment_crd(admin: &Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let crd = camelk_reconciler::api::crd();
    let name = crd.metadata.name.clone().unwrap_or_default();
    crds.patch(
        &name,
        &PatchParams::apply("camelk-demo").force(),
        &Patch::Apply(&crd),
    )
    .await?;
    let api: Api<OperatorAssignment> = Api::all(admin.clone());
    let deadline = Instant::now() + Duration::from_secs(30);
    while api.list(&ListParams::default()).await.is_err() {
        if Instant::now() > deadline {
            bail!("the OperatorAssignment CRD is not served after 30s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

async fn create_namespace(admin: &Client, name: &str) -> anyhow::Result<()> {
    let api: Api<Namespace> = Api::all(admin.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    api.create(&PostParams::default(), &ns).await?;
    Ok(())
}

fn camel(client: &Client, kind: CamelKind) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), APPS, &kind.api_resource())
}

/// The image an app runs: built elsewhere (CI), so the operator skips the
/// build. Nothing pulls it: the simulated node only reports its pods running.
fn image(name: &str) -> String {
    format!("registry.shop.invalid/{name}:1.0")
}

/// Integrations as `kamel run -x OPERATOR --image IMAGE` creates them
/// (orders and services for operator-1, a canary for operator-2), and Pipes
/// as `kamel bind -x operator-1 timer:tick log:info --trait
/// container.image=IMAGE` does: the owner annotation only. A Pipe's
/// Integration would otherwise need a Maven build, which cannot run here and
/// ends in `Error`; with the image it runs, and the Pipe becomes `Ready`, so
/// the health gate judges Pipes as it judges Integrations.
async fn create_resources(admin: &Client) -> anyhow::Result<Vec<String>> {
    let mut apps = vec![
        ("orders".to_string(), "operator-1"),
        ("canary-checkout".to_string(), "operator-2"),
    ];
    apps.extend((1..=SERVICES).map(|i| (format!("svc-{i:02}"), "operator-1")));
    for (name, owner) in &apps {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": CamelKind::Integration.api_version(),
            "kind": "Integration",
            "metadata": { "name": name, "annotations": { OPERATOR_ID_KEY: owner } },
            "spec": { "traits": { "container": { "image": image(name) } } }
        }))?;
        camel(admin, CamelKind::Integration)
            .create(&PostParams::default(), &obj)
            .await
            .with_context(|| format!("creating Integration {name}"))?;
    }
    for i in 1..=PIPES {
        let name = format!("pipe-{i:02}");
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": CamelKind::Pipe.api_version(),
            "kind": "Pipe",
            "metadata": {
                "name": name,
                "annotations": {
                    OPERATOR_ID_KEY: "operator-1",
                    "trait.camel.apache.org/container.image": image(&name),
                },
            },
            "spec": {
                "source": { "uri": format!("timer:tick-{i}") },
                "sink": { "uri": "log:info" }
            }
        }))?;
        camel(admin, CamelKind::Pipe)
            .create(&PostParams::default(), &obj)
            .await
            .with_context(|| format!("creating Pipe {name}"))?;
    }
    Ok(apps.into_iter().map(|(name, _)| name).collect())
}

/// Owner (label, else annotation) of every Integration and Pipe in the demo namespace.
async fn owners(admin: &Client) -> anyhow::Result<BTreeMap<(CamelKind, String), Option<String>>> {
    let mut out = BTreeMap::new();
    for kind in [CamelKind::Integration, CamelKind::Pipe] {
        for obj in camel(admin, kind)
            .list_metadata(&ListParams::default())
            .await?
        {
            let owner = owner_id(&obj.metadata);
            out.insert((kind, obj.metadata.name.unwrap_or_default()), owner);
        }
    }
    Ok(out)
}

fn counts(owners: &BTreeMap<(CamelKind, String), Option<String>>) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for owner in owners.values() {
        *counts
            .entry(owner.clone().unwrap_or_else(|| "nobody".into()))
            .or_default() += 1;
    }
    counts
}

fn describe_counts(owners: &BTreeMap<(CamelKind, String), Option<String>>) -> String {
    let pipes = owners.keys().filter(|(k, _)| *k == CamelKind::Pipe).count();
    let from_pipes = owners.len() - pipes;
    let by_owner = counts(owners)
        .iter()
        .map(|(o, n)| format!("{n} with {o}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!("{by_owner} ({from_pipes} Integrations, {pipes} Pipes)")
}

async fn assignment_status(admin: &Client) -> anyhow::Result<Option<OperatorAssignmentStatus>> {
    let api: Api<OperatorAssignment> = Api::namespaced(admin.clone(), CONTROL);
    Ok(api.get_opt(ASSIGNMENT).await?.and_then(|o| o.status))
}

/// Until every Integration runs with `Ready=True` and every Pipe is `Ready`;
/// with `rev`, also until `rev` is applied and every resource carries the
/// owner label (adopted).
async fn wait_all_running(
    admin: &Client,
    rev: Option<&str>,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    let mut printed = Instant::now()
        .checked_sub(Duration::from_secs(1))
        .unwrap_or_else(Instant::now);
    loop {
        let applied = match rev {
            Some(rev) => {
                assignment_status(admin)
                    .await?
                    .and_then(|s| s.last_applied_revision)
                    .as_deref()
                    == Some(rev)
            }
            None => true,
        };
        let mut total = 0;
        let mut ready = 0;
        let mut labelled = 0;
        let mut phases: BTreeMap<String, usize> = BTreeMap::new();
        for kind in [CamelKind::Integration, CamelKind::Pipe] {
            for obj in camel(admin, kind).list(&ListParams::default()).await? {
                total += 1;
                let p = phase(&obj).unwrap_or("").to_string();
                let ok = match kind {
                    CamelKind::Integration => {
                        p == "Running" && condition(&obj, "Ready") == Some("True")
                    }
                    _ => p == "Ready",
                };
                if !ok {
                    let key = if p.is_empty() { "no phase".into() } else { p };
                    *phases.entry(format!("{} {key}", kind.kind())).or_default() += 1;
                }
                ready += usize::from(ok);
                labelled += usize::from(
                    obj.labels()
                        .get(OPERATOR_ID_KEY)
                        .is_some_and(|l| Some(l) == obj.annotations().get(OPERATOR_ID_KEY)),
                );
            }
        }
        let waiting = phases
            .iter()
            .map(|(p, n)| format!("{n} {p}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut line = format!("  {ready}/{total} running and ready");
        if rev.is_some() {
            line.push_str(&format!(", {labelled}/{total} adopted"));
        }
        if !waiting.is_empty() {
            line.push_str(&format!("  (not yet: {waiting})"));
        }
        let adopted = rev.is_none() || labelled == total;
        let done = applied && adopted && total > 0 && ready == total;
        if line != last && (done || printed.elapsed() >= Duration::from_secs(1)) {
            println!("{line}");
            last = line;
            printed = Instant::now();
        }
        if done {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("resources not all running after {timeout:?} ({ready}/{total})");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Successful writes by the reconciler to Camel K resources, as (resource,
/// name, object after the write).
fn reconciler_writes(events: &[AuditEvent]) -> Vec<(String, String, Value)> {
    events
        .iter()
        .filter(|e| {
            e.stage == "ResponseComplete"
                && e.is_successful_write()
                && e.user.username == "reconciler"
                && e.object_ref.as_ref().and_then(|o| o.api_group.as_deref())
                    == Some("camel.apache.org")
        })
        .filter_map(|e| {
            let o = e.object_ref.as_ref()?;
            Some((
                o.resource.clone(),
                o.name.clone().unwrap_or_default(),
                e.response_object.clone().unwrap_or_default(),
            ))
        })
        .collect()
}

/// The moves `plan --base --head` shows, computed by the same library call.
async fn planned_moves(
    admin: &Client,
    base: &str,
    head: &str,
) -> anyhow::Result<Vec<(CamelKind, String, String, String)>> {
    let base = Manifest::parse("operator-assignment.yaml@main", base.to_string())?;
    let head = Manifest::parse(
        &format!("operator-assignment.yaml@{BRANCH}"),
        head.to_string(),
    )?;
    let kinds = [CamelKind::Integration, CamelKind::Pipe];
    let inventory = live::read(admin, &kinds, None).await?.inventory;
    let planned = plan::plan(
        &head.assignment.spec,
        Actual::Manifest(&base.assignment.spec),
        &inventory,
    );
    Ok(planned
        .moves()
        .map(|m| {
            (
                m.resource.kind,
                m.resource.name.clone(),
                m.from.to_string(),
                m.to.to_string(),
            )
        })
        .collect())
}

/// Shows the rollout as the status reports it, until `rev` is applied.
async fn progress(
    admin: &Client,
    rev: &str,
    planned: usize,
    since: Instant,
) -> anyhow::Result<OperatorAssignmentStatus> {
    let deadline = since + Duration::from_secs(300);
    let mut last = String::new();
    let mut last_stalled = String::new();
    loop {
        let status = assignment_status(admin).await?.unwrap_or_default();
        let owners = owners(admin).await?;
        let with_2 = counts(&owners).get("operator-2").copied().unwrap_or(0);
        let total = owners.len().max(1);
        let line = match status.rollout.as_ref().filter(|r| r.revision == rev) {
            Some(r) => {
                let width = 30;
                let filled = with_2 * width / total;
                format!(
                    "step {}/{} {:<16} operator-2 [{}{}] {with_2}/{total}  {}",
                    r.current_step,
                    r.total_steps,
                    r.state,
                    "█".repeat(filled),
                    "░".repeat(width - filled),
                    r.message
                )
            }
            None => "waiting for the reconciler to fetch the new revision".into(),
        };
        if line != last {
            println!("[{:>5.1}s] {line}", since.elapsed().as_secs_f64());
            last = line;
        }
        if status.last_applied_revision.as_deref() == Some(rev) {
            return Ok(status);
        }
        if let Some(stalled) = status
            .conditions
            .iter()
            .find(|c| c.type_ == "Stalled" && c.status == "True")
            && stalled.message != last_stalled
        {
            println!("  stalled: {}", stalled.message);
            last_stalled = stalled.message.clone();
        }
        if Instant::now() > deadline {
            bail!("the rollout of {planned} moves did not finish within 5 minutes");
        }
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
}

/// The owner (label, else annotation) an object names.
fn owner_in(object: &Value) -> Option<String> {
    let map = |key: &str| -> Option<BTreeMap<String, String>> {
        serde_json::from_value(object["metadata"][key].clone()).ok()
    };
    owner_of(map("labels").as_ref(), map("annotations").as_ref()).map(|o| o.id)
}

/// Owner changes of Camel K resources (from → to), in commit order, with the
/// identity that wrote each.
fn owner_changes(events: &[AuditEvent]) -> Vec<(String, String, String, String, String, u64)> {
    let mut writes: Vec<(u64, String, String, Option<String>, String)> = events
        .iter()
        .filter(|e| {
            e.stage == "ResponseComplete"
                && e.is_successful_write()
                && e.object_ref.as_ref().and_then(|o| o.api_group.as_deref())
                    == Some("camel.apache.org")
        })
        .filter_map(|e| {
            let r = e.response_object.as_ref()?;
            Some((
                r["metadata"]["resourceVersion"].as_str()?.parse().ok()?,
                e.resource()?.to_string(),
                r["metadata"]["name"].as_str()?.to_string(),
                owner_in(r),
                e.user.username.clone(),
            ))
        })
        .collect();
    // By commit order; a write that changed nothing answers with the
    // resourceVersion it found, and stays after the write that made it.
    writes.sort_by_key(|w| w.0);
    let mut last: BTreeMap<(String, String), (u64, Option<String>)> = BTreeMap::new();
    let mut changes = Vec::new();
    for (rv, resource, name, owner, writer) in writes {
        let key = (resource.clone(), name.clone());
        if let Some((seen, Some(previous))) = last.get(&key)
            && *seen != rv
            && let Some(to) = &owner
            && previous != to
        {
            changes.push((resource, name, previous.clone(), to.clone(), writer, rv));
        }
        last.insert(key, (rv, owner));
    }
    changes
}

fn summary(
    events: &[AuditEvent],
    rollout: &[AuditEvent],
    expected: &[(CamelKind, String, String, String)],
    status: &OperatorAssignmentStatus,
    elapsed: Duration,
) {
    // Over the whole log, so each write is compared with the one before it.
    let moves = owner_changes(events);
    let mut executed: Vec<(String, String, String, String)> = moves
        .iter()
        .map(|(resource, name, from, to, _, _)| {
            (resource.clone(), name.clone(), from.clone(), to.clone())
        })
        .collect();
    executed.sort();
    let mut planned: Vec<(String, String, String, String)> = expected
        .iter()
        .map(|(kind, n, f, t)| (kind.plural().to_string(), n.clone(), f.clone(), t.clone()))
        .collect();
    planned.sort();
    let by_reconciler = moves.iter().filter(|m| m.4 == "reconciler").count();
    let writes = |filter: &dyn Fn(&AuditEvent) -> bool| {
        rollout
            .iter()
            .filter(|e| {
                e.stage == "ResponseComplete"
                    && e.is_successful_write()
                    && e.user.username == "reconciler"
                    && filter(e)
            })
            .count()
    };
    let camel_writes = writes(&|e| {
        e.object_ref.as_ref().and_then(|o| o.api_group.as_deref()) == Some("camel.apache.org")
    });
    let request_writes = writes(&|e| e.resource() == Some("leases"));
    let event_writes = writes(&|e| e.resource() == Some("events"));
    let refused: BTreeMap<&str, usize> = rollout
        .iter()
        .filter(|e| {
            e.stage == "ResponseComplete"
                && e.code() == Some(403)
                && OPERATORS.contains(&e.user.username.as_str())
        })
        .fold(BTreeMap::new(), |mut m, e| {
            *m.entry(e.user.username.as_str()).or_default() += 1;
            m
        });
    // Moved resources whose status the new owner wrote after the flip: it
    // reconciled them anew (an upgrade resets the status of what it takes).
    let taken_up = moves
        .iter()
        .filter(|(resource, name, _, to, _, flipped)| {
            events.iter().any(|e| {
                e.stage == "ResponseComplete"
                    && e.is_successful_write()
                    && e.user.username == *to
                    && e.object_ref.as_ref().is_some_and(|o| {
                        o.resource == *resource && o.name.as_deref() == Some(name.as_str())
                    })
                    && e.response_object
                        .as_ref()
                        .and_then(|r| r["metadata"]["resourceVersion"].as_str())
                        .and_then(|rv| rv.parse::<u64>().ok())
                        .is_some_and(|rv| rv > *flipped)
            })
        })
        .count();
    let steps = status.rollout.as_ref().map(|r| r.total_steps).unwrap_or(0);
    let n = moves.len().max(1) as f64;
    println!(
        "moves executed:        {} in {steps} steps ({} planned; identical: {}), {by_reconciler} flipped by the reconciler",
        moves.len(),
        expected.len(),
        if executed == planned { "yes" } else { "NO" }
    );
    if executed != planned {
        for m in executed.iter().filter(|m| !planned.contains(m)) {
            println!("  executed, not planned: {m:?}");
        }
        for m in planned.iter().filter(|m| !executed.contains(m)) {
            println!("  planned, not executed: {m:?}");
        }
    }
    println!(
        "reconciled anew:       {taken_up} of {} moved resources, by their new owner after the flip \
         (then Running and Ready again, or the gate would have held)",
        moves.len()
    );
    println!(
        "time, merge to done:   {:.1}s (handoffs, operator-2 reconciling each anew, health gates, pauses)",
        elapsed.as_secs_f64()
    );
    println!(
        "API writes per move:   {:.2} ({} writes for {} moves: {camel_writes} owner flips, \
         {request_writes} handoff-request writes; plus {event_writes} Kubernetes Events)",
        (camel_writes + request_writes) as f64 / n,
        camel_writes + request_writes,
        moves.len()
    );
    let violations = camelk_testkit::audit::single_owner_violations(events, APPS, &OPERATORS);
    println!(
        "dual-owner writes:     {} (every operator write judged against the owner just before it)",
        violations.len()
    );
    println!(
        "refused by admission:  {} (operator writes to a resource it did not own at that instant)",
        if refused.is_empty() {
            "none".to_string()
        } else {
            refused
                .iter()
                .map(|(o, n)| format!("{n} from {o}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    let mut owners: BTreeMap<String, u64> = status.counts.clone();
    owners.retain(|_, v| *v > 0);
    println!(
        "owners now:            {}",
        owners
            .iter()
            .map(|(o, n)| format!("{n} with {o}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

/// A bare "remote" and a clone with a committer identity of its own.
struct GitRepo {
    remote: PathBuf,
    work: PathBuf,
    repo: git2::Repository,
}

impl GitRepo {
    fn create(dir: &Path) -> anyhow::Result<GitRepo> {
        let remote = dir.join("remote.git");
        let work = dir.join("work");
        let bare = git2::Repository::init_bare(&remote)?;
        bare.set_head("refs/heads/main")?;
        let repo = git2::Repository::init(&work)?;
        repo.set_head("refs/heads/main")?;
        let mut config = repo.config()?;
        config.set_str("user.name", "camelk demo")?;
        config.set_str("user.email", "demo@camelk.invalid")?;
        repo.remote("origin", path_str(&remote)?)?;
        Ok(GitRepo { remote, work, repo })
    }

    /// Commits the manifest on `main` and pushes it; returns the SHA.
    fn commit_and_push(&self, text: &str, message: &str) -> anyhow::Result<String> {
        std::fs::write(self.work.join("operator-assignment.yaml"), text)?;
        let mut index = self.repo.index()?;
        index.add_path(Path::new("operator-assignment.yaml"))?;
        index.write()?;
        let tree = self.repo.find_tree(index.write_tree()?)?;
        let sig = self.repo.signature()?;
        let id = self
            .repo
            .commit(Some("HEAD"), &sig, &sig, message, &tree, &[])?;
        self.push("refs/heads/main:refs/heads/main")?;
        Ok(id.to_string())
    }

    fn push(&self, refspec: &str) -> anyhow::Result<()> {
        self.repo.find_remote("origin")?.push(&[refspec], None)?;
        Ok(())
    }

    fn read_branch(&self, branch: &str) -> anyhow::Result<String> {
        let commit = self
            .repo
            .find_branch(branch, git2::BranchType::Local)?
            .get()
            .peel_to_commit()?;
        let blob = commit
            .tree()?
            .get_path(Path::new("operator-assignment.yaml"))?
            .to_object(&self.repo)?
            .peel_to_blob()?;
        Ok(String::from_utf8_lossy(blob.content()).into_owned())
    }

    /// Fast-forwards `main` to `branch` and pushes it, as merging the pull request would.
    fn merge(&self, branch: &str) -> anyhow::Result<String> {
        let head = self
            .repo
            .find_branch(branch, git2::BranchType::Local)?
            .get()
            .peel_to_commit()?
            .id();
        self.repo
            .reference("refs/heads/main", head, true, "merge the rollout")?;
        self.push("refs/heads/main:refs/heads/main")?;
        Ok(head.to_string())
    }
}

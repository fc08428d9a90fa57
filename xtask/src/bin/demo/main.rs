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
//!
//! Its parts: [`resources`] (the apps `kamel` creates), [`git_repo`], [`rollout`]
//! (the plan and the live progress), [`audit_summary`] and [`processes`] (the
//! `reconciler` and `kubectl-camelk` it runs).

mod audit_summary;
mod git_repo;
mod processes;
mod resources;
mod rollout;

use std::path::Path;
use std::process::{Child, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use camelk_reconciler::api::OperatorAssignment;
use camelk_reconciler::camel_k::OPERATOR_ID_KEY;
use camelk_testkit::TestCluster;
use camelk_testkit::binaries::{
    CAMEL_K_PREVIOUS_VERSION, CAMEL_K_VERSION, camel_k_dir, control_plane_bin_dir,
};
use camelk_testkit::cluster::{self, ClusterDir, StartOptions};
use camelk_testkit::crds::CrdSource;
use camelk_testkit::upstream::{self, UpstreamOperator, UpstreamOptions};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};

use audit_summary::{reconciler_writes, restarts_summary, summary};
use git_repo::GitRepo;
use processes::{binaries, metrics, run_shown, spawn};
use resources::{
    create_resources, describe_counts, hand_edit_is_refused, image, owners, wait_all_running,
};
use rollout::{planned_moves, progress};

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
        let (expected, restarts) = planned_moves(&admin, &manifest_text, &head_text).await?;

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
        restarts_summary(&restarts, rollout_events);
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

fn path_str(path: &Path) -> anyhow::Result<&str> {
    path.to_str().context("a non-UTF-8 path")
}

async fn install_assignment_crd(admin: &Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    // Both of the project's kinds, as a user's install has them.
    for crd in camelk_reconciler::api::crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        crds.patch(
            &name,
            &PatchParams::apply("camelk-demo").force(),
            &Patch::Apply(&crd),
        )
        .await?;
    }
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

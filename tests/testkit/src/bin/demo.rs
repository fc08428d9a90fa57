//! `demo` (`make demo`): the whole story on a local control plane, in a
//! few minutes.
//!
//! 1. starts a local control plane ([`camelk_testkit::cluster::start`]);
//! 2. creates a Git repository (a bare "remote" and a clone) holding
//!    `examples/demo/operator-assignment.yaml`, starts `reconciler operator`
//!    for operator-1 and operator-2 and `reconciler sync` following the remote,
//!    each as its own identity;
//! 3. creates a few dozen Integrations and Pipes without an operator; the
//!    sync gives each its owner from the manifest's rules;
//! 4. commits a rollout operator-1 → operator-2 in three steps with
//!    `kubectl camelk rollout`, prints `kubectl camelk plan --base --head`,
//!    merges it, and shows the live progress from the object's status;
//! 5. ends with a summary from the API server's audit log: moves, time, API
//!    writes per move, and dual-owner writes (which must be 0); and shows the
//!    admission policy (enforced in the apps' namespace from the start)
//!    refusing a cluster admin's hand edit of an owner.
//!
//! It needs the `reconciler` and `kubectl-camelk` binaries next to its own
//! (`make demo` builds them). Everything stops on exit, Ctrl-C included; the
//! state directory (logs, audit log) is kept for a look afterwards.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use camelk_reconciler::api::{OperatorAssignment, OperatorAssignmentStatus};
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use camelk_reconciler::handoff::release::{condition, phase};
use camelk_reconciler::inventory::cluster as live;
use camelk_reconciler::manifest::Manifest;
use camelk_reconciler::plan::{self, Actual};
use camelk_testkit::binaries::control_plane_bin_dir;
use camelk_testkit::cluster::{self, ClusterDir, StartOptions};
use camelk_testkit::crds::CrdSource;
use camelk_testkit::{AuditEvent, TestCluster};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

/// Namespace of the demo's Camel K resources.
const APPS: &str = "shop";
/// Namespace of the OperatorAssignment object and the reconciler's lock.
const CONTROL: &str = "camel-k";
const ASSIGNMENT: &str = "camel-k";
const SERVICES: usize = 28;
const PIPES: usize = 6;
const BRANCH: &str = "rollout-operator-2";

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
}

fn section(title: &str) {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none() {
        println!("\n\x1b[1m== {title}\x1b[0m");
    } else {
        println!("\n== {title}");
    }
}

impl Demo {
    fn stop(&mut self) {
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
        let started = Instant::now();

        section("1. A local Kubernetes control plane");
        let opts = StartOptions {
            dir: self.dir.clone(),
            bin_dir: control_plane_bin_dir()?,
            crds: CrdSource::locate(),
        };
        let local = cluster::start(&opts).await?;
        println!(
            "kube-apiserver {} ready in {:.1}s (etcd, kube-apiserver, kube-controller-manager)",
            local.server,
            started.elapsed().as_secs_f64()
        );
        let cluster = TestCluster::attach(self.dir.clone());
        let admin = cluster.admin().await;
        cluster.grant_camelk_roles().await;
        install_assignment_crd(&admin).await?;
        for ns in [CONTROL, "camel-k-next", APPS] {
            create_namespace(&admin, ns).await?;
        }
        camelk_testkit::admission::enforce_in(
            &admin,
            APPS,
            &["reconciler"],
            &["operator-1", "operator-2"],
        )
        .await?;
        println!(
            "admission policy {} enforced in {APPS}: only the reconciler, or the owner handing over, changes an owner",
            camelk_testkit::admission::POLICY
        );

        section("2. A Git repository, two operators and the reconciler");
        let git = self.dir.root().join("git");
        let repo = GitRepo::create(&git)?;
        let manifest_text = std::fs::read_to_string(
            camelk_testkit::workspace_root().join("examples/demo/operator-assignment.yaml"),
        )
        .context("reading examples/demo/operator-assignment.yaml")?;
        let rev1 = repo.commit_and_push(&manifest_text, "Operators for the shop")?;
        println!(
            "{}: operator-assignment.yaml at {}",
            repo.remote.display(),
            &rev1[..12]
        );
        let kubeconfig = self.dir.kubeconfig();
        let logs = self.dir.root().join("logs");
        for (id, lock_ns) in [("operator-1", CONTROL), ("operator-2", "camel-k-next")] {
            let child = spawn(
                &bins.reconciler,
                &logs.join(format!("{id}.log")),
                &[
                    "operator",
                    "--id",
                    id,
                    "--lock-namespace",
                    lock_ns,
                    "--identity",
                    id,
                    "--build-time",
                    "2s",
                    "--resync",
                    "500ms",
                    "--context",
                    id,
                ],
                &kubeconfig,
            )?;
            println!("reconciler operator --id {id:<11} pid {}", child.id());
            self.children.push((id.into(), child));
        }
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
                "--namespace",
                CONTROL,
                "--identity",
                "reconciler-0",
                "--cache-dir",
                cache.to_str().unwrap_or_default(),
                "--listen",
                &listen,
                "--context",
                "reconciler",
            ],
            &kubeconfig,
        )?;
        println!(
            "reconciler sync             pid {} (following {remote_url}, branch main)",
            sync.id()
        );
        self.children.push(("sync".into(), sync));
        println!("logs: {}", logs.display());

        section("3. A few dozen Integrations and Pipes, created without an operator");
        let names = create_resources(&admin).await?;
        println!(
            "created {} Integrations and {PIPES} Pipes in namespace {APPS} (each Pipe creates its Integration)",
            names.len()
        );
        println!(
            "reconciler sync gives each its owner from the manifest's rules (fenced first assignment)..."
        );
        let t = Instant::now();
        wait_all_running(&admin, &rev1, Duration::from_secs(180)).await?;
        let owners = owners(&admin).await?;
        println!(
            "all running after {:.1}s: {}",
            t.elapsed().as_secs_f64(),
            describe_counts(&owners)
        );

        section("4. A rollout from operator-1 to operator-2 in three steps, from Git");
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

        section("5. Merged: the reconciler executes the planned migration");
        let merged_at = Instant::now();
        let rev2 = repo.merge(BRANCH)?;
        println!("main is now {} (merge of {BRANCH})", &rev2[..12]);
        let status = progress(&admin, &rev2, expected.len(), merged_at).await?;
        let elapsed = merged_at.elapsed();

        section("6. Summary, from the API server's audit log");
        let events = cluster.audit_log().events_in(APPS)?;
        summary(&events, &expected, &status, elapsed);
        let violations = camelk_testkit::audit::single_owner_violations(
            &events,
            APPS,
            &["operator-1", "operator-2", "operator-3"],
        );
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
            "\naudit log: {}\ndemo done in {:.0}s",
            cluster.audit_log().path().display(),
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

/// Integrations (orders, a canary, services) and Pipes, none with an owner.
async fn create_resources(admin: &Client) -> anyhow::Result<Vec<String>> {
    let mut names = vec!["orders".to_string(), "canary-checkout".to_string()];
    names.extend((1..=SERVICES).map(|i| format!("svc-{i:02}")));
    for name in &names {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": CamelKind::Integration.api_version(),
            "kind": "Integration",
            "metadata": { "name": name, "labels": { "app": name } },
            "spec": { "sources": [{ "name": "route.yaml", "content": format!("- from: timer:{name}") }] }
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
            "metadata": { "name": name },
            "spec": {
                "source": { "ref": { "kind": "Kamelet", "apiVersion": "camel.apache.org/v1", "name": "timer-source" } },
                "sink": { "ref": { "kind": "Kamelet", "apiVersion": "camel.apache.org/v1", "name": "log-sink" } }
            }
        }))?;
        camel(admin, CamelKind::Pipe)
            .create(&PostParams::default(), &obj)
            .await
            .with_context(|| format!("creating Pipe {name}"))?;
    }
    Ok(names)
}

/// Owner of every Integration and Pipe in the demo namespace.
async fn owners(admin: &Client) -> anyhow::Result<BTreeMap<(CamelKind, String), Option<String>>> {
    let mut out = BTreeMap::new();
    for kind in [CamelKind::Integration, CamelKind::Pipe] {
        for obj in camel(admin, kind)
            .list_metadata(&ListParams::default())
            .await?
        {
            let owner = obj
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(OPERATOR_ID_KEY))
                .cloned();
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
    counts(owners)
        .iter()
        .map(|(o, n)| format!("{n} with {o}"))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn assignment_status(admin: &Client) -> anyhow::Result<Option<OperatorAssignmentStatus>> {
    let api: Api<OperatorAssignment> = Api::namespaced(admin.clone(), CONTROL);
    Ok(api.get_opt(ASSIGNMENT).await?.and_then(|o| o.status))
}

/// Until `rev` is applied and every Integration runs Ready and every Pipe is Ready.
async fn wait_all_running(admin: &Client, rev: &str, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    loop {
        let applied = assignment_status(admin)
            .await?
            .and_then(|s| s.last_applied_revision)
            .as_deref()
            == Some(rev);
        let mut total = 0;
        let mut ready = 0;
        for kind in [CamelKind::Integration, CamelKind::Pipe] {
            for obj in camel(admin, kind).list(&ListParams::default()).await? {
                total += 1;
                let ok = match kind {
                    CamelKind::Integration => {
                        phase(&obj) == Some("Running") && condition(&obj, "Ready") == Some("True")
                    }
                    _ => phase(&obj) == Some("Ready"),
                };
                ready += usize::from(ok);
            }
        }
        let line = format!("  {ready}/{total} ready");
        if line != last {
            println!("{line}");
            last = line;
        }
        if applied && total > 0 && ready == total {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("resources not all running after {timeout:?} ({ready}/{total})");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
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
        {
            println!("  stalled: {}", stalled.message);
        }
        if Instant::now() > deadline {
            bail!("the rollout of {planned} moves did not finish within 5 minutes");
        }
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
}

/// Owner changes in the demo namespace (from → to), in commit order.
fn owner_changes(events: &[AuditEvent]) -> Vec<(String, String, Option<String>, String)> {
    let mut writes: Vec<(u64, String, String, Option<String>)> = events
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
                r["metadata"]["labels"][OPERATOR_ID_KEY]
                    .as_str()
                    .map(str::to_string),
            ))
        })
        .collect();
    writes.sort();
    let mut last: BTreeMap<(String, String), Option<String>> = BTreeMap::new();
    let mut changes = Vec::new();
    for (_, resource, name, owner) in writes {
        let key = (resource.clone(), name.clone());
        if let Some(previous) = last.get(&key)
            && *previous != owner
            && let Some(to) = &owner
        {
            changes.push((resource, name, previous.clone(), to.clone()));
        }
        last.insert(key, owner);
    }
    changes
}

fn summary(
    events: &[AuditEvent],
    expected: &[(CamelKind, String, String, String)],
    status: &OperatorAssignmentStatus,
    elapsed: Duration,
) {
    let moves: Vec<_> = owner_changes(events)
        .into_iter()
        .filter(|(_, _, from, _)| from.is_some())
        .collect();
    let mut executed: Vec<(String, String, String)> = moves
        .iter()
        .map(|(_, name, from, to)| (name.clone(), from.clone().unwrap_or_default(), to.clone()))
        .collect();
    executed.sort();
    let mut planned: Vec<(String, String, String)> = expected
        .iter()
        .map(|(_, n, f, t)| (n.clone(), f.clone(), t.clone()))
        .collect();
    planned.sort();
    let request_writes = events
        .iter()
        .filter(|e| {
            e.stage == "ResponseComplete"
                && e.is_successful_write()
                && e.resource() == Some("leases")
                && e.object_ref
                    .as_ref()
                    .and_then(|o| o.name.clone())
                    .or_else(|| {
                        e.response_object
                            .as_ref()
                            .and_then(|r| r["metadata"]["name"].as_str().map(str::to_string))
                    })
                    .is_some_and(|n| n.starts_with("camelk-handoff"))
        })
        .count();
    let steps = status.rollout.as_ref().map(|r| r.total_steps).unwrap_or(0);
    let n = moves.len().max(1) as f64;
    println!(
        "moves executed:        {} in {steps} steps ({} planned; identical: {})",
        moves.len(),
        expected.len(),
        if executed == planned { "yes" } else { "NO" }
    );
    println!(
        "time, merge to done:   {:.1}s (handoffs, health gates, pauses between steps)",
        elapsed.as_secs_f64()
    );
    println!(
        "API writes per move:   {:.2} ({} owner flips + {request_writes} handoff-request writes, for {} moves)",
        (moves.len() + request_writes) as f64 / n,
        moves.len(),
        moves.len()
    );
    let violations = camelk_testkit::audit::single_owner_violations(
        events,
        APPS,
        &["operator-1", "operator-2", "operator-3"],
    );
    println!("dual-owner writes:     {}", violations.len());
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

//! `policy-proof`: does the owner admission policy matter? Measured with
//! real upstream Camel K operators on a local control plane.
//!
//! One control plane, upstream operator-1 and operator-2 (`kamel operator`
//! of the pinned release, global, platforms Ready), and two rounds that
//! differ only in the policy: off in the first round's namespace, on
//! (`examples/deploy/admission`, bound to that namespace) in the second's.
//! Each round:
//!
//! 1. creates `--count` Integrations as `kamel run` does (the owner
//!    annotation `operator-1` only) with a prebuilt image, and waits until
//!    operator-1 has them all Running and Ready on the simulated node;
//! 2. makes operator-1 busy: changes every Integration's image, so it resets
//!    each one's status and deploys it again (several writes per
//!    Integration, behind its client-side limit of 20 requests a second);
//! 3. freezes operator-1 (SIGSTOP) once it has started on that work, with
//!    the rest still queued and one reconcile typically mid-flight;
//! 4. flips every Integration to operator-2 as the coordinator does: one
//!    fenced JSON patch each (`handoff::flip`), as `reconciler`;
//! 5. waits until operator-2 has written each one Running, and it is
//!    Running and Ready under operator-2;
//! 6. resumes operator-1 (SIGCONT), which acts on what it had cached, and
//!    waits `--late-window` seconds for its late writes.
//!
//! The audit log then says, per round, how many writes (create, update,
//! patch, status included) operator-1 made to those Integrations after
//! their flip: accepted (2xx, resourceVersion at or after the flip's) or
//! refused by the policy (403), and how many dual-owner writes the
//! single-owner judge finds. Exits non-zero when the round with the policy
//! accepted any late write.
//!
//! The control plane runs in a temporary directory removed at exit
//! (`CAMELK_TEST_KEEP=1` keeps it, logs and audit log included).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Seek, SeekFrom};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY, owner_id};
use camelk_reconciler::camel_k::{condition, phase};
use camelk_reconciler::handoff::fence::FlipGuard;
use camelk_reconciler::handoff::{FlipResult, flip};
use camelk_testkit::audit::single_owner_violations;
use camelk_testkit::upstream::{self, UpstreamOperator, UpstreamOptions};
use camelk_testkit::{AuditEvent, TestCluster};
use clap::Parser;
use futures::{StreamExt, TryStreamExt, stream};
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const OLD: &str = "operator-1";
const NEW: &str = "operator-2";
const COORDINATOR: &str = "reconciler";
const OPERATORS: [&str; 3] = ["operator-1", "operator-2", "operator-3"];
const IMAGE: &str = "docker.io/library/camelk-proof:1.0";
const IMAGE_TOUCHED: &str = "docker.io/library/camelk-proof:1.1";
const PARALLEL: usize = 16;

/// Flip Integrations from a real upstream operator-1 to operator-2 while
/// operator-1 is busy (frozen by SIGSTOP, resumed after the flip), once
/// without and once with the owner admission policy, and count operator-1's
/// late writes from the audit log.
#[derive(Parser, Debug)]
#[command(name = "policy-proof")]
struct Cli {
    /// Integrations per round.
    #[arg(long, default_value_t = 200)]
    count: usize,
    /// Seconds to wait for operator-1's late writes after SIGCONT.
    #[arg(long, default_value_t = 20)]
    late_window: u64,
    /// SIGSTOP operator-1 once it has reset the status of this many of the
    /// touched Integrations (the rest still queued).
    #[arg(long, default_value_t = 10)]
    stop_after: usize,
    /// Seconds to wait for all Integrations to be Running under an operator.
    #[arg(long, default_value_t = 420)]
    timeout: u64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.count == 0 {
        eprintln!("error: --count must be at least 1");
        return ExitCode::from(2);
    }
    let started = Instant::now();
    println!("starting a local control plane...");
    // Starts a control plane of its own (it blocks: outside the runtime).
    let cluster = camelk_testkit::shared();
    println!(
        "  state directory: {} (CAMELK_TEST_KEEP=1 keeps it)",
        cluster.dir().root().display()
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = runtime.block_on(async {
        tokio::select! {
            result = run(cluster, &cli) => result,
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
        }
    });
    let wall = started.elapsed().as_secs_f64();
    match result {
        Ok(rounds) => {
            print_table(&rounds, cli.count, wall);
            let on = rounds.iter().filter(|r| r.policy);
            let failed = on
                .clone()
                .any(|r| r.late_accepted > 0 || !r.violations.is_empty());
            if failed {
                eprintln!("\nFAIL: with the policy, operator-1 wrote after the flip");
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("\npolicy-proof failed after {wall:.0} s: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// What one round measured.
#[derive(Debug, Default)]
struct Round {
    policy: bool,
    namespace: String,
    /// Integrations operator-1 had reset (phase left Running) when frozen,
    /// and those it had not reconciled since the touch (observedGeneration behind).
    busy_at_stop: usize,
    queued_at_stop: usize,
    /// Flip attempts refused by the fence (re-read and retried).
    flip_retries: usize,
    /// Seconds operator-1 was frozen.
    frozen_secs: f64,
    /// operator-1's writes to the round's Integrations after their flip.
    late_accepted: usize,
    late_accepted_status: usize,
    late_accepted_detail: Vec<String>,
    late_refused: usize,
    late_other: Vec<String>,
    /// Integrations that got at least one late write (accepted or refused).
    late_integrations: usize,
    /// The single-owner judge's findings in the round's namespace.
    violations: Vec<String>,
    /// Integrations Running and Ready under operator-2 at the end.
    final_running: usize,
    /// What operator-1 logged after SIGCONT.
    log_ignoring: usize,
    log_forbidden: usize,
    log_errors: usize,
    op1_exited: bool,
    secs: f64,
}

async fn run(cluster: &'static TestCluster, cli: &Cli) -> anyhow::Result<Vec<Round>> {
    cluster.grant_camelk_roles().await;
    let admin = cluster.admin().await;
    let coordinator = cluster.client_as(COORDINATOR).await;

    println!("starting upstream operator-1 and operator-2 (kamel operator)...");
    let mut op1 = start_operator(cluster, OLD).await?;
    let op2 = start_operator(cluster, NEW).await?;
    for op in [&op1, &op2] {
        op.ready_platform(&admin)
            .await
            .with_context(|| format!("platform of {}", op.id()))?;
    }
    println!("  both platforms Ready");

    let mut rounds = Vec::new();
    for (i, policy) in [false, true].into_iter().enumerate() {
        let prefix = if policy { "proof-on" } else { "proof-off" };
        let ns = cluster.namespace(prefix).await;
        // The whole control plane goes at exit; the namespace is kept for a look.
        let ns_name = ns.name.clone();
        std::mem::forget(ns);
        println!(
            "\nround {}: policy {} in namespace {ns_name}",
            i + 1,
            if policy { "ON" } else { "OFF" }
        );
        if policy {
            camelk_testkit::admission::enforce_in(&admin, &ns_name, &[COORDINATOR], &OPERATORS)
                .await
                .context("enforcing the policy")?;
            println!("  policy enforced (coordinator: {COORDINATOR})");
        }
        let round = round(
            cluster,
            cli,
            &admin,
            &coordinator,
            &op1,
            &op2,
            &ns_name,
            policy,
        )
        .await
        .with_context(|| format!("round {} ({ns_name})", i + 1))?;
        let exited = !op1.is_running();
        let round = Round {
            op1_exited: exited,
            ..round
        };
        print_round(&round);
        rounds.push(round);
        if exited && i == 0 {
            // Keep its log, then start it again for the next round.
            let _ = std::fs::copy(op1.log(), op1.log().with_extension("round-1.log"));
            println!("  operator-1 exited after SIGCONT; starting it again");
            drop(op1);
            op1 = start_operator(cluster, OLD).await?;
            op1.ready_platform(&admin).await?;
        }
    }
    drop(op1);
    drop(op2);
    Ok(rounds)
}

async fn start_operator(cluster: &TestCluster, id: &str) -> anyhow::Result<UpstreamOperator> {
    upstream::start(cluster.dir(), &UpstreamOptions::new(id))
        .await
        .with_context(|| format!("starting upstream {id}"))
}

#[allow(clippy::too_many_arguments)]
async fn round(
    cluster: &TestCluster,
    cli: &Cli,
    admin: &Client,
    coordinator: &Client,
    op1: &UpstreamOperator,
    op2: &UpstreamOperator,
    ns: &str,
    policy: bool,
) -> anyhow::Result<Round> {
    let started = Instant::now();
    let api = integrations(admin, ns);
    let names: Vec<String> = (0..cli.count).map(|i| format!("it-{i:04}")).collect();
    let timeout = Duration::from_secs(cli.timeout);

    // 1. As `kamel run` creates them: the annotation only.
    stream::iter(names.iter().map(|name| {
        let api = api.clone();
        async move {
            let obj: DynamicObject = serde_json::from_value(json!({
                "apiVersion": CamelKind::Integration.api_version(),
                "kind": "Integration",
                "metadata": { "name": name, "annotations": { OPERATOR_ID_KEY: OLD } },
                "spec": { "traits": { "container": { "image": IMAGE } } },
            }))?;
            api.create(&PostParams::default(), &obj)
                .await
                .with_context(|| format!("creating {name}"))?;
            anyhow::Ok(())
        }
    }))
    .buffer_unordered(PARALLEL)
    .try_collect::<Vec<_>>()
    .await?;
    let t = Instant::now();
    wait_all(
        &api,
        cli.count,
        timeout,
        "Running and Ready under operator-1",
        |o| running_ready(o) && owner_id(&o.metadata).as_deref() == Some(OLD),
    )
    .await
    .map_err(|e| with_logs(e, op1, op2))?;
    println!(
        "  {} Integrations Running and Ready under operator-1 ({:.0} s)",
        cli.count,
        t.elapsed().as_secs_f64()
    );

    // 2. Busy: a new image for each; operator-1 resets and redeploys them all.
    let touch = json!({ "spec": { "traits": { "container": { "image": IMAGE_TOUCHED } } } });
    stream::iter(names.iter().map(|name| {
        let api = api.clone();
        let touch = &touch;
        async move {
            api.patch(name, &PatchParams::default(), &Patch::Merge(touch))
                .await
                .with_context(|| format!("touching {name}"))
        }
    }))
    .buffer_unordered(PARALLEL)
    .try_collect::<Vec<_>>()
    .await?;

    // 3. Freeze operator-1 once it is at work on them.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (busy, queued) = loop {
        let list = api.list(&ListParams::default()).await?.items;
        let busy = list
            .iter()
            .filter(|o| phase(o).is_some_and(|p| p != "Running"))
            .count();
        if busy >= cli.stop_after.min(cli.count) {
            op1.stop();
            let queued = list.iter().filter(|o| !observed(o)).count();
            break (busy, queued);
        }
        if Instant::now() > deadline {
            bail!(
                "operator-1 did not start on the touched Integrations within 60 s:\n{}",
                op1.log_tail(20)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let frozen_at = Instant::now();
    println!(
        "  operator-1 frozen (SIGSTOP, pid {}) with {busy} Integrations reset and {queued} not yet reconciled since the touch",
        op1.pid()
    );

    // 4. Flip each as the coordinator does, fenced on operator-1's annotation.
    let audit = cluster.audit_log();
    let flips: Vec<(String, u64, usize)> = stream::iter(names.iter().map(|name| {
        let client = coordinator.clone();
        async move { flip_one(&client, ns, name).await }
    }))
    .buffer_unordered(PARALLEL)
    .try_collect()
    .await?;
    let flip_retries = flips.iter().map(|(_, _, r)| r).sum();
    let flip_rv: BTreeMap<String, u64> =
        flips.into_iter().map(|(name, rv, _)| (name, rv)).collect();
    println!(
        "  flipped {} Integrations to operator-2 as {COORDINATOR} ({flip_retries} fence refusals retried)",
        flip_rv.len()
    );

    // 5. operator-2 takes them over: each written Running by operator-2
    //    after its flip, and Running and Ready under operator-2 now.
    let t = Instant::now();
    let mut tail = AuditTail::new(audit.path().to_path_buf(), ns);
    let mut written_running: BTreeSet<String> = BTreeSet::new();
    let deadline = Instant::now() + timeout;
    let mut last_report = Instant::now();
    loop {
        for e in tail.next_events()? {
            if e.user.username == NEW
                && e.stage == "ResponseComplete"
                && e.is_successful_write()
                && e.resource() == Some("integrations")
                && let Some(obj) = &e.response_object
                && obj["status"]["phase"] == "Running"
                && let Some(name) = obj["metadata"]["name"].as_str()
                && rv_of(obj).is_some_and(|rv| flip_rv.get(name).is_some_and(|f| rv > *f))
            {
                written_running.insert(name.to_string());
            }
        }
        let list = api.list(&ListParams::default()).await?.items;
        let ready = list
            .iter()
            .filter(|o| {
                running_ready(o)
                    && owner_id(&o.metadata).as_deref() == Some(NEW)
                    && o.metadata
                        .name
                        .as_ref()
                        .is_some_and(|n| written_running.contains(n))
            })
            .count();
        if ready >= cli.count {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "operator-2 has {ready}/{} Running and Ready after {timeout:?}\n{}",
                cli.count,
                logs(op1, op2)
            );
        }
        if last_report.elapsed() > Duration::from_secs(15) {
            println!("    operator-2: {ready}/{} Running and Ready", cli.count);
            last_report = Instant::now();
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    println!(
        "  operator-2 has all {} Running and Ready ({:.0} s)",
        cli.count,
        t.elapsed().as_secs_f64()
    );

    // 6. Resume operator-1 and give it time to act on its stale cache.
    let log_before = std::fs::metadata(op1.log()).map(|m| m.len()).unwrap_or(0);
    op1.cont();
    let frozen_secs = frozen_at.elapsed().as_secs_f64();
    println!(
        "  operator-1 resumed (SIGCONT) after {frozen_secs:.0} s frozen; watching {} s for late writes",
        cli.late_window
    );
    tokio::time::sleep(Duration::from_secs(cli.late_window)).await;

    let list = api.list(&ListParams::default()).await?.items;
    let final_running = list
        .iter()
        .filter(|o| running_ready(o) && owner_id(&o.metadata).as_deref() == Some(NEW))
        .count();
    let after = read_from(op1.log(), log_before);
    let count = |needle: &str| after.lines().filter(|l| l.contains(needle)).count();

    let events = ns_events(audit.path(), ns)?;
    let mut round = Round {
        policy,
        namespace: ns.to_string(),
        busy_at_stop: busy,
        queued_at_stop: queued,
        flip_retries,
        frozen_secs,
        final_running,
        log_ignoring: count("not assigned to current operator"),
        log_forbidden: count("forbidden"),
        log_errors: count("\"level\":\"error\""),
        violations: single_owner_violations(&events, ns, &OPERATORS),
        ..Round::default()
    };
    count_late_writes(&events, &flip_rv, &mut round);
    round.secs = started.elapsed().as_secs_f64();
    Ok(round)
}

/// operator-1's writes to the flipped Integrations after their flip.
fn count_late_writes(events: &[AuditEvent], flip_rv: &BTreeMap<String, u64>, round: &mut Round) {
    let mut touched = BTreeSet::new();
    for e in events {
        let Some(obj_ref) = &e.object_ref else {
            continue;
        };
        let Some(name) = obj_ref.name.as_deref() else {
            continue;
        };
        if e.user.username != OLD
            || e.stage != "ResponseComplete"
            || obj_ref.resource != "integrations"
            || !matches!(e.verb.as_str(), "create" | "update" | "patch")
            || e.is_dry_run()
        {
            continue;
        }
        let Some(&flipped) = flip_rv.get(name) else {
            continue;
        };
        let status = e
            .request_uri
            .split('?')
            .next()
            .unwrap_or("")
            .ends_with("/status");
        match e.code() {
            Some(c) if (200..300).contains(&c) => {
                let rv = e.response_object.as_ref().and_then(rv_of);
                if rv.is_some_and(|rv| rv >= flipped) {
                    round.late_accepted += 1;
                    round.late_accepted_status += usize::from(status);
                    touched.insert(name.to_string());
                    let wrote = e
                        .request_object
                        .as_ref()
                        .and_then(|o| o["status"]["phase"].as_str())
                        .map(|p| format!(", setting status.phase {p}"))
                        .unwrap_or_default();
                    round.late_accepted_detail.push(format!(
                        "{} {name}{} at {}{wrote}",
                        e.verb,
                        if status { "/status" } else { "" },
                        e.stage_timestamp.as_deref().unwrap_or("?")
                    ));
                }
            }
            Some(403) if refused_by_policy(e) => {
                round.late_refused += 1;
                touched.insert(name.to_string());
            }
            code => {
                // Any other answer (a conflict, a missing object), at any time in the round.
                round
                    .late_other
                    .push(format!("{} {name} -> {code:?}", e.verb));
            }
        }
    }
    round.late_integrations = touched.len();
}

fn refused_by_policy(e: &AuditEvent) -> bool {
    e.response_object
        .as_ref()
        .and_then(|o| o["message"].as_str())
        .is_some_and(|m| m.contains("ValidatingAdmissionPolicy"))
}

/// One fenced flip, re-read and retried while the fence refuses it.
/// Returns the name, the resourceVersion the flip produced and the retries.
async fn flip_one(client: &Client, ns: &str, name: &str) -> anyhow::Result<(String, u64, usize)> {
    let api = integrations(client, ns);
    for retries in 0..20 {
        let obj = api.get(name).await?;
        match flip(
            client,
            CamelKind::Integration,
            &obj,
            OLD,
            NEW,
            &FlipGuard::default(),
        )
        .await?
        {
            FlipResult::Flipped(after) => {
                let rv = after
                    .metadata
                    .resource_version
                    .as_deref()
                    .and_then(|v| v.parse().ok())
                    .context("a flipped object has a resourceVersion")?;
                return Ok((name.to_string(), rv, retries));
            }
            FlipResult::Refused => tokio::time::sleep(Duration::from_millis(100)).await,
            FlipResult::Gone => bail!("{ns}/{name} is gone"),
        }
    }
    bail!("{ns}/{name}: the fence refused 20 flips in a row")
}

fn integrations(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &CamelKind::Integration.api_resource())
}

fn running_ready(o: &DynamicObject) -> bool {
    phase(o) == Some("Running") && condition(o, "Ready") == Some("True")
}

/// Whether the status has caught up with the spec (observedGeneration).
fn observed(o: &DynamicObject) -> bool {
    o.data["status"]["observedGeneration"].as_i64() == o.metadata.generation
}

fn rv_of(obj: &Value) -> Option<u64> {
    obj["metadata"]["resourceVersion"].as_str()?.parse().ok()
}

async fn wait_all(
    api: &Api<DynamicObject>,
    count: usize,
    timeout: Duration,
    what: &str,
    ok: impl Fn(&DynamicObject) -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let mut last_report = Instant::now();
    loop {
        let list = api.list(&ListParams::default()).await?.items;
        let done = list.iter().filter(|o| ok(o)).count();
        if done >= count {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{done}/{count} {what} after {timeout:?}");
        }
        if last_report.elapsed() > Duration::from_secs(15) {
            println!("    {done}/{count} {what}");
            last_report = Instant::now();
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

fn logs(op1: &UpstreamOperator, op2: &UpstreamOperator) -> String {
    format!(
        "operator-1 log:\n{}\noperator-2 log:\n{}",
        op1.log_tail(15),
        op2.log_tail(15)
    )
}

fn with_logs(e: anyhow::Error, op1: &UpstreamOperator, op2: &UpstreamOperator) -> anyhow::Error {
    e.context(logs(op1, op2))
}

fn read_from(path: &std::path::Path, offset: u64) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let start = (offset as usize).min(text.len());
    String::from_utf8_lossy(&text[start..]).into_owned()
}

/// Whether an audit line can matter here: about `ns`, and a write (reads,
/// lists and watches, the bulk of the log, are skipped before parsing).
fn relevant(line: &[u8], ns_field: &[u8]) -> bool {
    let head = &line[..line.len().min(1024)];
    let contains = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
    contains(line, ns_field)
        && [
            &b"\"verb\":\"create\""[..],
            b"\"verb\":\"update\"",
            b"\"verb\":\"patch\"",
            b"\"verb\":\"delete\"",
        ]
        .iter()
        .any(|v| contains(head, v))
}

/// The write events of the audit log about `ns`, in log order.
fn ns_events(path: &std::path::Path, ns: &str) -> anyhow::Result<Vec<AuditEvent>> {
    let mut tail = AuditTail::new(path.to_path_buf(), ns);
    tail.next_events()
}

/// Reads the audit log on from where it stopped, keeping the writes about one namespace.
struct AuditTail {
    path: std::path::PathBuf,
    ns: String,
    ns_field: Vec<u8>,
    offset: u64,
}

impl AuditTail {
    fn new(path: std::path::PathBuf, ns: &str) -> AuditTail {
        AuditTail {
            path,
            ns: ns.to_string(),
            ns_field: format!("\"namespace\":\"{ns}\"").into_bytes(),
            offset: 0,
        }
    }

    fn next_events(&mut self) -> anyhow::Result<Vec<AuditEvent>> {
        let mut file = std::fs::File::open(&self.path)
            .with_context(|| format!("opening {}", self.path.display()))?;
        file.seek(SeekFrom::Start(self.offset))?;
        let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
        let mut line = Vec::new();
        let mut events = Vec::new();
        loop {
            line.clear();
            let n = reader.read_until(b'\n', &mut line)?;
            if n == 0 || line.last() != Some(&b'\n') {
                break;
            }
            self.offset += n as u64;
            if !relevant(&line, &self.ns_field) {
                continue;
            }
            let event: AuditEvent = serde_json::from_slice(&line)
                .with_context(|| format!("{} at byte {}", self.path.display(), self.offset))?;
            if event.namespace() == Some(self.ns.as_str()) {
                events.push(event);
            }
        }
        Ok(events)
    }
}

fn print_round(r: &Round) {
    println!(
        "  frozen {:.0} s with {} reset and {} not yet reconciled; {} flips retried after a fence refusal",
        r.frozen_secs, r.busy_at_stop, r.queued_at_stop, r.flip_retries
    );
    println!(
        "  late writes by operator-1 after the flip: {} accepted ({} to status), {} refused by the policy, on {} Integrations",
        r.late_accepted, r.late_accepted_status, r.late_refused, r.late_integrations
    );
    for d in r.late_accepted_detail.iter().take(5) {
        println!("    accepted: {d}");
    }
    if !r.late_other.is_empty() {
        println!(
            "  other answers to operator-1's writes: {}",
            r.late_other.len()
        );
        for o in r.late_other.iter().take(5) {
            println!("    {o}");
        }
    }
    println!(
        "  operator-1's log after SIGCONT: {} \"not assigned to current operator\", {} \"forbidden\", {} errors{}",
        r.log_ignoring,
        r.log_forbidden,
        r.log_errors,
        if r.op1_exited {
            "; it exited"
        } else {
            "; still running"
        }
    );
    println!("  dual-owner writes (audit judge): {}", r.violations.len());
    for v in r.violations.iter().take(5) {
        println!("    {v}");
    }
    println!(
        "  at the end: {} Running and Ready under operator-2 ({:.0} s round)",
        r.final_running, r.secs
    );
}

fn print_table(rounds: &[Round], count: usize, wall: f64) {
    println!(
        "\nflip of {count} Running Integrations operator-1 -> operator-2, operator-1 frozen (SIGSTOP) mid-work and resumed after the flip\n"
    );
    println!(
        "{:<7} {:<22} {:>7} {:>9} {:>9} {:>12} {:>10} {:>11}",
        "policy",
        "namespace",
        "frozen",
        "accepted",
        "refused",
        "integrations",
        "dual-owner",
        "Running/op2"
    );
    for r in rounds {
        println!(
            "{:<7} {:<22} {:>6.0}s {:>9} {:>9} {:>12} {:>10} {:>11}",
            if r.policy { "on" } else { "off" },
            r.namespace,
            r.frozen_secs,
            r.late_accepted,
            r.late_refused,
            r.late_integrations,
            r.violations.len(),
            r.final_running
        );
    }
    println!(
        "\naccepted/refused: operator-1's create/update/patch (status included) of the flipped Integrations after their flip, from the audit log"
    );
    println!(
        "provoked by: changing every Integration's image (operator-1 resets and redeploys each), SIGSTOP of operator-1 once it had started, the flip, SIGCONT once operator-2 had them all Running"
    );
    if let Some(off) = rounds.iter().find(|r| !r.policy)
        && off.late_accepted == 0
    {
        println!(
            "note: without the policy operator-1 made no late write this time: nothing to refuse was provoked in that round"
        );
    }
    println!("wall time: {wall:.0} s");
}

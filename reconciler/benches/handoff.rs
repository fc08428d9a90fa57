//! Handoff benchmark on the real local control plane (`cargo bench -p
//! camelk-reconciler --bench handoff`).
//!
//! 1. Moves N Integrations (default 1,000) from operator-1 (a real
//!    `reconciler operator` process) to operator-2 through the handoff
//!    protocol, and, in the same run, relabels N other Integrations with a
//!    plain label patch each. Reports wall time of both, their ratio, and API
//!    writes per moved resource counted from the audit log.
//!    operator-2 is kept alive by its lock only, so its rebuilds do not load
//!    the API server during the measurement.
//! 2. Creates M Integrations (default 10,000), 1/10 owned by operator-1, and
//!    measures the resident memory of a label-selected cache against an
//!    unfiltered one (same code, child processes of this binary), and of a
//!    real operator process.
//!
//! `BENCH_MOVES` and `BENCH_MEMORY_OBJECTS` change N and M.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use camelk_reconciler::api::OperatorId;
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use camelk_reconciler::handoff::{
    Coordinator, ForcePolicy, HandoffOptions, HandoffOutcome, MoveBatch, ReleaseMode,
};
use camelk_reconciler::inventory::watch::{CachedObject, Scope, WatchCache, map_event};
use camelk_reconciler::lock::{LockTiming, OperatorLock};
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(pos) = args.iter().position(|a| a == "--cache-child") {
        return cache_child(&args[pos + 1], &args[pos + 2], args.get(pos + 3).cloned());
    }
    if args.iter().any(|a| a == "--list") {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(bench());
}

async fn bench() {
    let cluster = camelk_testkit::shared();
    let n = env_usize("BENCH_MOVES", 1000);
    let m = env_usize("BENCH_MEMORY_OBJECTS", 10_000);
    let rounds = env_usize("BENCH_ROUNDS", 3);
    let admin = cluster.admin().await;
    cluster.grant_camelk_roles().await;
    let locks = cluster.namespace("bench-locks").await;
    let timing = LockTiming::new(
        Duration::from_secs(15),
        Duration::from_secs(10),
        Duration::from_secs(2),
    )
    .unwrap();
    let stop_lock = tokio_util::sync::CancellationToken::new();
    tokio::spawn(
        OperatorLock::new(
            admin.clone(),
            &locks.name,
            "operator-2",
            "bench-operator-2",
            timing,
        )
        .run(stop_lock.clone()),
    );

    println!(
        "handoff benchmark: {n} Integrations moved by the protocol vs {n} relabelled by plain patches, {rounds} rounds"
    );
    let mut ratios = Vec::new();
    for round in 1..=rounds {
        let r = measure_round(cluster, &locks.name, n, timing, round % 2 == 0).await;
        let ratio = r.handoff.as_secs_f64() / r.plain.as_secs_f64();
        ratios.push(ratio);
        println!(
            "  round {round}: handoff {:>7.3}s, plain {:>7.3}s, ratio {ratio:.2}; API writes {} = {:.3} per move ({} owner flips + {} per batch)",
            r.handoff.as_secs_f64(),
            r.plain.as_secs_f64(),
            r.writes,
            r.writes as f64 / n as f64,
            r.flips,
            r.writes - r.flips
        );
    }
    stop_lock.cancel();
    ratios.sort_by(f64::total_cmp);
    println!(
        "  median ratio handoff/plain: {:.2} (min {:.2}, max {:.2})",
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() - 1]
    );
    let locks_name = locks.name.clone();
    let admin = cluster.admin().await;

    // Memory: a label-selected cache against an unfiltered one.
    let mem_ns = cluster.namespace("bench-memory").await;
    let t = Instant::now();
    create_settled(&admin, &mem_ns.name, m, |i| {
        if i % 10 == 0 {
            "operator-1"
        } else {
            "operator-9"
        }
    })
    .await;
    println!(
        "memory benchmark: {m} Integrations, 1/10 owned by operator-1 (created in {:.1}s)",
        t.elapsed().as_secs_f64()
    );
    let kubeconfig = cluster.kubeconfig().display().to_string();
    let empty = cache_rss(
        &kubeconfig,
        &mem_ns.name,
        Some("camel.apache.org/operator.id=nobody"),
    );
    let filtered = cache_rss(
        &kubeconfig,
        &mem_ns.name,
        Some("camel.apache.org/operator.id=operator-1"),
    );
    let unfiltered = cache_rss(&kubeconfig, &mem_ns.name, None);
    println!(
        "  cache of 0 objects (baseline):      {:>8.1} MiB RSS",
        mib(empty.1)
    );
    println!(
        "  label-selected cache ({:>5} objs):  {:>8.1} MiB RSS",
        filtered.0,
        mib(filtered.1)
    );
    println!(
        "  unfiltered cache     ({:>5} objs):  {:>8.1} MiB RSS",
        unfiltered.0,
        mib(unfiltered.1)
    );
    let part = |rss: u64| rss.saturating_sub(empty.1) as f64;
    println!(
        "  cache part, selected/unfiltered:    {:>8.3}",
        part(filtered.1) / part(unfiltered.1)
    );

    cluster
        .grant_operator("operator-1", &mem_ns.name, &locks_name)
        .await;
    let mut op = Command::new(env!("CARGO_BIN_EXE_reconciler"))
        .args([
            "operator",
            "--id",
            "operator-1",
            "--namespace",
            &mem_ns.name,
            "--lock-namespace",
            &locks_name,
        ])
        .args(["--identity", "bench-mem", "--resync", "5s"])
        .args(["--kubeconfig", &kubeconfig, "--context", "operator-1"])
        .env("RUST_LOG", "warn")
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let op_rss = rss(op.id());
    let _ = op.kill();
    let _ = op.wait();
    println!(
        "  reconciler operator (owns {:>5}):    {:>8.1} MiB RSS",
        filtered.0,
        mib(op_rss)
    );
}

struct Round {
    handoff: Duration,
    plain: Duration,
    writes: usize,
    flips: usize,
}

/// One side-by-side measurement in fresh namespaces; `plain_first` alternates the order.
async fn measure_round(
    cluster: &camelk_testkit::TestCluster,
    locks: &str,
    n: usize,
    timing: LockTiming,
    plain_first: bool,
) -> Round {
    let admin = cluster.admin().await;
    let moved_ns = cluster.namespace("bench-handoff").await;
    let plain_ns = cluster.namespace("bench-plain").await;
    create_settled(&admin, &moved_ns.name, n, |_| "operator-1").await;
    create_settled(&admin, &plain_ns.name, n, |_| "operator-1").await;
    cluster
        .grant_operator("operator-1", &moved_ns.name, locks)
        .await;
    let mut op1 = Command::new(env!("CARGO_BIN_EXE_reconciler"))
        .args([
            "operator",
            "--id",
            "operator-1",
            "--namespace",
            &moved_ns.name,
            "--lock-namespace",
            locks,
        ])
        .args(["--identity", "bench-op1", "--resync", "1s"])
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig())
        .args(["--context", "operator-1"])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut coordinator = Coordinator::new(cluster.client_as("reconciler").await);
    let opts = HandoffOptions {
        coordinator: "bench".into(),
        mode: ReleaseMode::Protocol,
        drain_timeout: Duration::from_secs(600),
        force: ForcePolicy::Never,
        lock_timing: timing,
        lock_namespaces: BTreeMap::new(),
        default_lock_namespace: locks.to_string(),
        poll: Duration::from_millis(200),
    };
    // Both operators seen alive (and operator-1's cache filled) outside the measurement.
    for id in ["operator-1", "operator-2"] {
        assert!(
            coordinator
                .wait_alive(&OperatorId::new(id).unwrap(), &opts)
                .await
                .unwrap()
        );
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let batch = MoveBatch {
        namespace: moved_ns.name.clone(),
        from: OperatorId::new("operator-1").unwrap(),
        to: OperatorId::new("operator-2").unwrap(),
        resources: (0..n).map(|i| (CamelKind::Integration, name(i))).collect(),
    };
    let api = Api::<DynamicObject>::namespaced_with(
        admin.clone(),
        &plain_ns.name,
        &CamelKind::Integration.api_resource(),
    );
    let plain_relabel = || async {
        let t = Instant::now();
        for i in 0..n {
            let patch = json!({ "metadata": {
                "labels": { OPERATOR_ID_KEY: "operator-2" },
                "annotations": { OPERATOR_ID_KEY: "operator-2" } } });
            api.patch(&name(i), &PatchParams::default(), &Patch::Merge(patch))
                .await
                .unwrap();
        }
        t.elapsed()
    };
    let mut plain = Duration::ZERO;
    if plain_first {
        plain = plain_relabel().await;
    }
    let t = Instant::now();
    let outcome = coordinator
        .execute(&batch, &opts, &mut |_| {})
        .await
        .unwrap();
    let handoff = t.elapsed();
    if !plain_first {
        plain = plain_relabel().await;
    }
    let HandoffOutcome::Completed { moved, .. } = outcome else {
        panic!("handoff did not complete: {outcome:?}")
    };
    assert_eq!(moved.len(), n);
    let _ = op1.kill();
    let _ = op1.wait();

    let events = cluster.audit_log().events_in(&moved_ns.name).unwrap();
    let successful: Vec<_> = events
        .iter()
        .filter(|e| {
            e.stage == "ResponseComplete" && e.is_successful_write() && e.user.username != "admin"
        })
        .collect();
    let flips = successful
        .iter()
        .filter(|e| e.resource() == Some("integrations") && e.user.username == "operator-1")
        .count();
    Round {
        handoff,
        plain,
        writes: successful.len(),
        flips,
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn name(i: usize) -> String {
    format!("it-{i:05}")
}

/// Creates `count` Integrations already Running under their owner (so the
/// owner has nothing to do), 16 requests at a time.
async fn create_settled(
    client: &kube::Client,
    ns: &str,
    count: usize,
    owner: impl Fn(usize) -> &'static str,
) {
    let api = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        ns,
        &CamelKind::Integration.api_resource(),
    );
    let owner = &owner;
    futures::stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            async move {
                let o = owner(i);
                let obj: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": CamelKind::Integration.api_version(), "kind": "Integration",
                    "metadata": { "name": name(i), "labels": { OPERATOR_ID_KEY: o }, "annotations": { OPERATOR_ID_KEY: o } },
                    "spec": { "sources": [{ "name": "route.yaml", "content": format!("- from: timer:{i}\n  steps:\n    - log: hello {i}") }] }
                }))
                .unwrap();
                api.create(&PostParams::default(), &obj).await.unwrap();
                let status = json!({ "status": { "phase": "Running",
                    "integrationKit": { "name": format!("{}-kit-{o}", name(i)) },
                    "conditions": [{ "type": "Ready", "status": "True" }] } });
                api.patch_status(&name(i), &PatchParams::default(), &Patch::Merge(status)).await.unwrap();
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
}

/// Runs this binary as a cache-only child; returns (objects cached, RSS).
fn cache_rss(kubeconfig: &str, ns: &str, selector: Option<&str>) -> (usize, u64) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--cache-child", kubeconfig, ns]);
    if let Some(s) = selector {
        cmd.arg(s);
    }
    let out = cmd.stderr(Stdio::inherit()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text.split_whitespace();
    let count = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let rss = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    (count, rss)
}

/// Child mode: fill the operator's cache from one watch, then print the
/// object count and this process's resident memory.
fn cache_child(kubeconfig: &str, ns: &str, selector: Option<String>) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let config = camelk_reconciler::connect::config(
            Some(std::path::Path::new(kubeconfig)),
            Some("admin"),
        )
        .await
        .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let api = Api::<DynamicObject>::namespaced_with(
            client,
            ns,
            &CamelKind::Integration.api_resource(),
        );
        let mut cfg = watcher::Config::default();
        if let Some(s) = &selector {
            cfg = cfg.labels(s);
        }
        let scope = Scope {
            kind: CamelKind::Integration,
            namespace: Some(ns.to_string()),
        };
        let mut cache: WatchCache<CamelKind, CachedObject> = WatchCache::default();
        let events = watcher(api, cfg).map_ok(|e| map_event(e, CachedObject));
        let mut stream = cache.reflect(scope, events).boxed();
        while let Some((_, event)) = stream.next().await {
            if matches!(event.unwrap(), watcher::Event::InitDone) {
                break;
            }
        }
        // Let allocator and runtime settle before reading RSS.
        tokio::time::sleep(Duration::from_millis(500)).await;
        println!(
            "{} {}",
            cache.count(&CamelKind::Integration),
            rss(std::process::id())
        );
    });
}

fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

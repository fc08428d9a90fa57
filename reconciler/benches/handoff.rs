//! Handoff benchmark on the real local control plane (`cargo bench -p
//! camelk-reconciler --bench handoff`).
//!
//! 1. Moves N Integrations (default 1,000) from operator-1 (a real
//!    `reconciler operator` process) to operator-2 through the handoff
//!    protocol, and, in the same run, relabels N other Integrations with a
//!    plain label patch each. Reports wall time of both, their ratio, and API
//!    writes per moved resource counted from the audit log. operator-1 has
//!    up to `FLIPS_IN_FLIGHT` flips in flight, the plain patches go one
//!    after another (what a script does); so the same N are also relabelled
//!    back with that many plain patches in flight, and the ratio to that is
//!    printed too: the protocol's cost at equal concurrency.
//!    operator-2 is kept alive by its lock only, so its rebuilds do not load
//!    the API server during the measurement.
//!    For each round it also prints, from the audit log, where the handoff's
//!    time went (request written, first and last flip, request deleted), the
//!    requests each user made during it by verb, and the unowned window of
//!    each move, p50 and p99.
//!
//! The unowned window of a move is the time in which neither operator acts on
//! the resource: from the moment the API server receives operator-1's flip
//! (its `requestReceivedTimestamp`; operator-1 writes nothing after it, and
//! the flip commits a little later, so this errs long) to the moment the
//! resource arrives in operator-2's label-selected watch, the earliest moment
//! operator-2 can act on it. operator-2 does not run here (see above), so a
//! watch with its selector, in this process, stands in for its informer; a
//! real operator-2's first write comes after that by its own reconcile time.
//! 2. Creates M Integrations (default 10,000), 1/10 owned by operator-1, and
//!    measures the resident memory of a label-selected cache against an
//!    unfiltered one (same code, child processes of this binary), and of a
//!    real operator process.
//!
//! `BENCH_MOVES` and `BENCH_MEMORY_OBJECTS` change N and M.

#[path = "common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use camelk_reconciler::api::OperatorId;
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use camelk_reconciler::handoff::FLIPS_IN_FLIGHT;
use camelk_reconciler::handoff::{
    Coordinator, ForcePolicy, HandoffOptions, HandoffOutcome, MoveBatch, ReleaseMode,
};
use camelk_reconciler::inventory::watch::{CachedObject, Scope, WatchCache, map_event};
use camelk_reconciler::lock::{LockTiming, OperatorLock};
use camelk_testkit::audit::{AuditEvent, owner_flips, quantile, unowned_windows};
use common::{env_usize, stats};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;
use tokio_util::sync::CancellationToken;

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
    let mut concurrent_ratios = Vec::new();
    let mut p99s = Vec::new();
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
        let concurrent_ratio = r.handoff.as_secs_f64() / r.plain_concurrent.as_secs_f64();
        concurrent_ratios.push(concurrent_ratio);
        println!(
            "    plain with {FLIPS_IN_FLIGHT} in flight (as operator-1's flips) {:>7.3}s, ratio {concurrent_ratio:.2}",
            r.plain_concurrent.as_secs_f64()
        );
        println!("    time split: {}", r.split);
        println!(
            "    requests during the handoff, by user and verb: {}",
            r.requests
        );
        let ms = |q| quantile(&r.windows, q).map_or(f64::NAN, |d| d.as_secs_f64() * 1e3);
        println!(
            "    unowned window over {} moves: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            r.windows.len(),
            ms(0.5),
            ms(0.99),
            ms(1.0)
        );
        if let Some(p99) = quantile(&r.windows, 0.99) {
            p99s.push(p99);
        }
    }
    stop_lock.cancel();
    let (median, min, max) = stats(&ratios);
    println!("  median ratio handoff/plain: {median:.2} (min {min:.2}, max {max:.2})");
    let (median, min, max) = stats(&concurrent_ratios);
    println!(
        "  median ratio handoff/plain with {FLIPS_IN_FLIGHT} in flight: {median:.2} (min {min:.2}, max {max:.2})"
    );
    if let (Some(median), Some(worst)) = (quantile(&p99s, 0.5), p99s.iter().max()) {
        println!(
            "  unowned window p99, median over rounds: {:.1} ms (worst round {:.1} ms)",
            median.as_secs_f64() * 1e3,
            worst.as_secs_f64() * 1e3
        );
    }
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
    let mut op = operator_1(cluster, &mem_ns.name, &locks_name, "bench-mem", "5s");
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

/// Starts `reconciler operator` as operator-1 (identity `identity`) over
/// `namespace`, its lock in `locks`, resyncing every `resync`.
fn operator_1(
    cluster: &camelk_testkit::TestCluster,
    namespace: &str,
    locks: &str,
    identity: &str,
    resync: &str,
) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_reconciler"))
        .args(["operator", "--id", "operator-1", "--namespace", namespace])
        .args([
            "--lock-namespace",
            locks,
            "--identity",
            identity,
            "--resync",
            resync,
        ])
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig())
        .args(["--context", "operator-1"])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
}

struct Round {
    handoff: Duration,
    plain: Duration,
    /// The plain relabelling with as many patches in flight as operator-1's flips.
    plain_concurrent: Duration,
    writes: usize,
    flips: usize,
    /// The unowned window of each move (see the module doc).
    windows: Vec<Duration>,
    /// Where the handoff's time went, from the audit log.
    split: String,
    /// Requests made during the handoff, by user and verb.
    requests: String,
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
    let mut op1 = operator_1(cluster, &moved_ns.name, locks, "bench-op1", "1s");
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
    let api =
        camelk_testkit::scenario::camel_api(admin.clone(), CamelKind::Integration, &plain_ns.name);
    let relabel = |i: usize, to: &'static str| {
        let api = api.clone();
        async move {
            let patch = json!({ "metadata": {
                "labels": { OPERATOR_ID_KEY: to },
                "annotations": { OPERATOR_ID_KEY: to } } });
            api.patch(&name(i), &PatchParams::default(), &Patch::Merge(patch))
                .await
                .unwrap();
        }
    };
    // One after another to operator-2, then back with as many in flight as
    // operator-1's releases: each a real change of both keys.
    let plain_relabel = || async {
        let t = Instant::now();
        for i in 0..n {
            relabel(i, "operator-2").await;
        }
        let sequential = t.elapsed();
        let t = Instant::now();
        futures::stream::iter(0..n)
            .map(|i| relabel(i, "operator-1"))
            .buffer_unordered(FLIPS_IN_FLIGHT)
            .collect::<Vec<()>>()
            .await;
        (sequential, t.elapsed())
    };
    let (mut plain, mut plain_concurrent) = (Duration::ZERO, Duration::ZERO);
    if plain_first {
        (plain, plain_concurrent) = plain_relabel().await;
    }
    let stop_arrivals = CancellationToken::new();
    let arrivals = watch_arrivals(&admin, &moved_ns.name, "operator-2", &stop_arrivals).await;
    let audit = cluster.audit_log();
    let mark = audit.mark().unwrap();
    let started = Timestamp::now();
    let t = Instant::now();
    let outcome = coordinator
        .execute(&batch, &opts, &mut |_| {})
        .await
        .unwrap();
    let handoff = t.elapsed();
    let (requests, _) = audit.requests_since(mark).unwrap();
    // The last arrivals may trail the coordinator's own watch a little.
    let deadline = Instant::now() + Duration::from_secs(10);
    while arrivals.lock().unwrap().len() < n && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop_arrivals.cancel();
    let arrivals = arrivals.lock().unwrap().clone();
    if !plain_first {
        (plain, plain_concurrent) = plain_relabel().await;
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
    let flip_times = owner_flips(&events, &moved_ns.name, "operator-1", "operator-2");
    Round {
        handoff,
        plain,
        plain_concurrent,
        writes: successful.len(),
        flips,
        windows: unowned_windows(&flip_times, &arrivals),
        split: time_split(&events, started, handoff),
        requests: by_user_and_verb(&requests),
    }
}

/// Stands in for operator-2's informer: the watch a scoped operator runs
/// (Integrations labelled with its id), recording when each resource first
/// arrives in it. Returns once the watch has listed.
async fn watch_arrivals(
    client: &kube::Client,
    ns: &str,
    owner: &str,
    stop: &CancellationToken,
) -> Arc<Mutex<BTreeMap<String, Timestamp>>> {
    let api = camelk_testkit::scenario::camel_api(client.clone(), CamelKind::Integration, ns);
    let config = watcher::Config::default().labels(&format!("{OPERATOR_ID_KEY}={owner}"));
    let arrivals = Arc::new(Mutex::new(BTreeMap::new()));
    let (listed, on_listed) = tokio::sync::oneshot::channel();
    let (seen, stop) = (arrivals.clone(), stop.clone());
    tokio::spawn(async move {
        let mut events = watcher(api, config).boxed();
        let mut listed = Some(listed);
        loop {
            let event = tokio::select! {
                () = stop.cancelled() => break,
                Some(event) = events.next() => event,
            };
            let at = Timestamp::now();
            match event {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                    if let Some(name) = o.metadata.name {
                        seen.lock().unwrap().entry(name).or_insert(at);
                    }
                }
                Ok(watcher::Event::InitDone) => {
                    if let Some(tx) = listed.take() {
                        let _ = tx.send(());
                    }
                }
                Ok(_) => {}
                Err(e) => eprintln!("operator-2 stand-in watch: {e}"),
            }
        }
    });
    on_listed.await.expect("the stand-in watch lists");
    arrivals
}

/// Seconds since `started` of the handoff's milestones in the audit log:
/// request written, first flip received, last flip answered, request
/// deletion received; and when `execute` returned.
fn time_split(events: &[AuditEvent], started: Timestamp, took: Duration) -> String {
    let since =
        |t: Option<Timestamp>| t.map_or(f64::NAN, |t| t.duration_since(started).as_secs_f64());
    let ok = |e: &&AuditEvent| e.stage == "ResponseComplete" && e.is_successful_write();
    let lease = |verb: &str| {
        events
            .iter()
            .filter(ok)
            .find(|e| e.resource() == Some("leases") && e.verb == verb)
            .cloned()
    };
    let flips: Vec<&AuditEvent> = events
        .iter()
        .filter(ok)
        .filter(|e| e.resource() == Some("integrations") && e.user.username == "operator-1")
        .collect();
    format!(
        "request written +{:.3}s, first flip +{:.3}s, last flip +{:.3}s, request deleted +{:.3}s, returned +{:.3}s",
        since(lease("create").and_then(|e| e.completed_at())),
        since(flips.iter().filter_map(|e| e.received_at()).min()),
        since(flips.iter().filter_map(|e| e.completed_at()).max()),
        since(lease("delete").and_then(|e| e.received_at())),
        took.as_secs_f64()
    )
}

/// `user: verb count, ...; ...` over the requests (refused writes, 4xx,
/// counted apart), users by their request count.
fn by_user_and_verb(requests: &[camelk_testkit::audit::AuditRequest]) -> String {
    let mut counts: BTreeMap<&str, BTreeMap<String, usize>> = BTreeMap::new();
    for r in requests.iter().filter(|r| r.is_request_start()) {
        let refused = r
            .response_status
            .as_ref()
            .and_then(|s| s.code)
            .is_some_and(|c| (400..500).contains(&c));
        let verb = if refused {
            format!("{} refused", r.verb)
        } else {
            r.verb.clone()
        };
        *counts
            .entry(r.user.username.as_str())
            .or_default()
            .entry(verb)
            .or_default() += 1;
    }
    let mut users: Vec<_> = counts.into_iter().collect();
    users.sort_by_key(|(_, verbs)| std::cmp::Reverse(verbs.values().sum::<usize>()));
    users
        .iter()
        .map(|(user, verbs)| {
            let verbs: Vec<String> = verbs.iter().map(|(v, c)| format!("{v} {c}")).collect();
            format!("{user}: {}", verbs.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
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
    let api = camelk_testkit::scenario::camel_api(client.clone(), CamelKind::Integration, ns);
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
        let api = camelk_testkit::scenario::camel_api(client, CamelKind::Integration, ns);
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

//! `reconciler sync` benchmark on the real local control plane and a real Git
//! repository (a local bare repository followed through a `file://` URL):
//! `cargo bench -p camelk-reconciler --bench sync`.
//!
//! (a) Commit-to-first-move latency, webhook against polling. Two real
//!     `reconciler operator` processes (operator-1, operator-2) run one
//!     Integration; the `reconciler sync` binary is started twice, once
//!     polling every hour with a webhook secret (a GitHub-style push, signed
//!     with HMAC-SHA256, is POSTed to `/hooks/git` right after each push), once
//!     polling every `BENCH_SYNC_POLL_INTERVAL` (default 2s) without a
//!     webhook. Each repetition pushes a commit whose pin moves the
//!     Integration to the other operator and times, from the moment the push
//!     returned, the first change of its `camel.apache.org/operator.id`
//!     label (seen by a watch), and the revision's `lastAppliedRevision`.
//!     The push of each repetition is delayed by a varying fraction of the
//!     poll interval so that polling is sampled at different phases.
//! (b) Steady state with `BENCH_SYNC_OBJECTS` (default 10,000) Integrations
//!     spread over `BENCH_SYNC_NAMESPACES` (default 4) namespaces, all owned
//!     as the manifest says (no moves, no operators running). After the
//!     initial sync (`lastAppliedRevision` set), for `BENCH_SYNC_WINDOW`
//!     (default 60s): the sync process's resident memory (VmRSS sampled every
//!     second, VmHWM) and the API requests made as the `reconciler` identity,
//!     by verb, from the control plane's audit log. Run once per live cache
//!     (`--live-cache metadata` and `--live-cache full`) when the binary has
//!     that flag; otherwise once with its default, and the comparison is
//!     reported as unavailable. `BENCH_SYNC_OBJECTS` may list sizes
//!     (`10000,100000`): the objects are created up to each size in turn
//!     (`BENCH_SYNC_CREATE_IN_FLIGHT`, default 64, requests at a time; timed),
//!     (b) runs at each, and the growth between sizes is reported as bytes of
//!     resident memory per additional tracked resource (target ≤ 2 KiB).
//!
//! (c) First owner of a new resource: `BENCH_SYNC_NEWCOMERS` (default 100)
//!     Integrations are created without owner keys, one every 100 ms, as a
//!     GitOps tool creates them from manifests that name no operator; each
//!     is timed from just before its create to the moment a watch sees its
//!     owner label. Once with the sync idle (its revision applied), once
//!     while its round waits in a rollout's 10-minute pause between steps
//!     (two real operators move two other Integrations). With
//!     `BENCH_SYNC_BASELINE_BIN` set to another `reconciler` binary (an
//!     older build), (c) runs for it too, in the same run, for a ratio;
//!     what it did not assign within `BENCH_SYNC_NEWCOMER_PATIENCE`
//!     (default 60s) is counted as not assigned.
//!
//! `BENCH_SYNC_REPS` (default 5) sets the repetitions of (a),
//! `BENCH_SYNC_PARTS` (default `a,b,c`) which parts run,
//! `BENCH_SYNC_SKIP_LATENCY=1` skips (a),
//! `BENCH_SYNC_STEADY_INTERVAL` (default 10s) the `--interval` of (b).

#[path = "common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use camelk_reconciler::api::{OperatorAssignment, OperatorAssignmentStatus, parse_duration};
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use camelk_reconciler::camel_k::{kit_name, phase};
use camelk_testkit::TestCluster;
use common::{env_usize, stats};
use futures::{StreamExt, TryStreamExt};
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use kube::runtime::watcher;
use serde_json::json;

const NAME: &str = "camel-k";
const RECONCILER: &str = "reconciler";
const RSS_TARGET_MIB: f64 = 64.0;
/// Resident memory a sync may grow by per additional tracked resource.
const GROWTH_TARGET_BYTES: f64 = 2048.0;
/// Moves of (a) before the counted repetitions, one to each operator.
const WARM_UP: usize = 2;
/// Lock timing of (a), as the end-to-end tests use: a killed sync or
/// operator is noticed within seconds. (b) runs with the binary's defaults.
fn short_leases<'a>() -> impl Iterator<Item = &'a str> {
    camelk_testkit::SHORT_LOCK_ARGS
        .into_iter()
        .chain(["--operator-lease-duration", "4s"])
}

/// A duration from the environment, as the binary's flags spell them (`2s`).
fn env_duration(name: &str, default: &str) -> (String, Duration) {
    let text = std::env::var(name).unwrap_or_else(|_| default.to_string());
    let value = parse_duration(&text)
        .unwrap_or_else(|| panic!("{name}={text} is not a duration (like 500ms, 2s, 1m)"));
    (text, value)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(bench());
}

async fn bench() {
    let cluster = camelk_testkit::shared();
    cluster.grant_camelk_roles().await;
    install_assignment_crd(cluster).await;
    let reps = env_usize("BENCH_SYNC_REPS", 5).max(1);
    let (poll_text, poll) = env_duration("BENCH_SYNC_POLL_INTERVAL", "2s");
    let sizes = env_sizes("BENCH_SYNC_OBJECTS", 10_000);
    let in_flight = env_usize("BENCH_SYNC_CREATE_IN_FLIGHT", 64).max(1);
    let skip_latency = std::env::var("BENCH_SYNC_SKIP_LATENCY").is_ok_and(|v| v == "1");
    let spread = env_usize("BENCH_SYNC_NAMESPACES", 4).max(1);
    let (window_text, window) = env_duration("BENCH_SYNC_WINDOW", "60s");
    let (steady_interval, _) = env_duration("BENCH_SYNC_STEADY_INTERVAL", "10s");
    let live_cache = live_cache_flag();

    println!("sync benchmark");
    println!("  setup:");
    println!(
        "    control plane: the test kit's (etcd, kube-apiserver, kube-controller-manager on loopback), {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!("    binary: {}", env!("CARGO_BIN_EXE_reconciler"));
    println!(
        "    Git: a local bare repository, followed as file://…/remote.git, branch main, operator-assignment.yaml"
    );
    println!(
        "    sync: identity `reconciler` (its own token, coordinator role), --poll 500ms (default), RUST_LOG=info"
    );
    println!(
        "    (a) {reps} repetitions per mode after {WARM_UP} warm-up moves; operators: `reconciler operator --id operator-N --build-time 1s --resync 300ms`, lease 4s/3s/1s"
    );
    println!(
        "    (a) webhook mode: --interval 1h --webhook-secret-file, POST /hooks/git with X-Hub-Signature-256 right after the push"
    );
    println!("    (a) poll mode: --interval {poll_text}, no webhook");
    println!(
        "    (a) sync lock lease 4s/3s/1s, --operator-lease-duration 4s; (b) the binary's defaults (15s/10s/2s, 15s)"
    );
    if skip_latency {
        println!("    (a) SKIPPED (BENCH_SYNC_SKIP_LATENCY=1)");
    }
    println!(
        "    (b) {} Integrations over {spread} namespaces (created {in_flight} at a time), owned as the manifest says, no operators running; --interval {steady_interval}; window {window_text}",
        sizes
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", then ")
    );
    match &live_cache {
        Some(modes) => println!(
            "    (b) live caches compared: {} (`reconciler sync --live-cache`)",
            modes.join(", ")
        ),
        None => println!(
            "    (b) `reconciler sync --help` has no --live-cache: the default cache only, NO metadata/full comparison"
        ),
    }
    println!();

    let parts = std::env::var("BENCH_SYNC_PARTS").unwrap_or_else(|_| "a,b,c".into());
    let part = |p: &str| parts.split(',').any(|q| q.trim() == p);
    if !skip_latency && part("a") {
        report_latency(cluster, reps, poll, &poll_text).await;
    }
    if part("c") {
        report_newcomers(cluster).await;
    }
    if !part("b") {
        return;
    }

    let modes: Vec<Option<&str>> = match &live_cache {
        Some(modes) => modes.iter().map(|m| Some(*m)).collect(),
        None => vec![None],
    };
    let namespaces = steady_namespaces(cluster, spread).await;
    let mut created = 0;
    let mut by_size = Vec::new();
    for &objects in &sizes {
        create_steady_objects(cluster, &namespaces, created..objects, in_flight).await;
        created = objects;
        let mut steady = Vec::new();
        for mode in &modes {
            let s = steady_state(
                cluster,
                &namespaces,
                objects,
                *mode,
                &steady_interval,
                window,
            );
            steady.push(s.await);
        }
        print_steady(&steady, objects, spread, &window_text, &steady_interval);
        by_size.push((objects, steady));
    }
    print_growth(&by_size);
    if live_cache.is_none() {
        println!(
            "  metadata/full comparison UNAVAILABLE: this `reconciler sync` has no --live-cache flag"
        );
    }
}

/// Runs (c) for this binary, and for the baseline when one is given, and
/// prints its table.
async fn report_newcomers(cluster: &TestCluster) {
    let creates = env_usize("BENCH_SYNC_NEWCOMERS", 100).max(1);
    let (patience_text, patience) = env_duration("BENCH_SYNC_NEWCOMER_PATIENCE", "60s");
    let mut binaries = vec![("this build".to_string(), this_binary().to_path_buf())];
    if let Ok(baseline) = std::env::var("BENCH_SYNC_BASELINE_BIN") {
        println!("  (c) baseline: {baseline}");
        binaries.push(("baseline".to_string(), PathBuf::from(baseline)));
    }
    println!(
        "  (c) first owner of {creates} Integrations created without owner keys, one every 100 ms; not assigned within {patience_text}: counted apart"
    );
    println!(
        "  (c) {:<40} {:>6} {:>9} {:>9} {:>9} {:>13}",
        "binary, sync state", "n", "p50 s", "p99 s", "max s", "not assigned"
    );
    for (i, (label, binary)) in binaries.iter().enumerate() {
        let rows = newcomers(cluster, binary, i, creates, patience).await;
        for (state, (times, missing)) in ["idle", "round in a pause"].iter().zip(rows) {
            let q = |p: f64| quantile(&times, p).map_or("-".into(), |v| format!("{v:.3}"));
            println!(
                "  (c) {:<40} {:>6} {:>9} {:>9} {:>9} {:>13}",
                format!("{label}, {state}"),
                times.len(),
                q(0.5),
                q(0.99),
                q(1.0),
                missing
            );
        }
    }
    println!();
}

/// Nearest-rank quantile `p` of `values`; `None` when empty.
fn quantile(values: &[f64], p: f64) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len().max(1));
    v.get(rank - 1).copied()
}

/// The assignment every part of this benchmark starts from: operator-1 and
/// operator-2, their locks in `lock_ns`, Integrations of `namespaces` on
/// operator-1.
fn two_operators(lock_ns: &str, namespaces: &[&str]) -> camelk_testkit::manifest::Assignment {
    camelk_testkit::manifest::Assignment::new(NAME)
        .operator("operator-1", lock_ns)
        .operator("operator-2", lock_ns)
        .scope(namespaces, &[CamelKind::Integration])
        .default_operator("operator-1")
}

/// The manifest of (c): operator-1 by default; with `pause`, a staged move
/// of everything to operator-2 in two steps with that pause between them.
fn newcomer_manifest(ns: &str, pause: Option<&str>) -> String {
    use camelk_testkit::manifest::Rollout;
    let assignment = two_operators(ns, &[ns]);
    let assignment = match pause {
        Some(_) => assignment.staged_move("operator-1", "operator-2", &["50%", "100%"]),
        None => assignment,
    };
    assignment
        .rollout(
            Rollout::new()
                .gate_timeout("60s")
                .pause(pause.unwrap_or("0s")),
        )
        .drain_timeout("2m")
        .render()
}

/// (c) of one binary: first-owner times (s) and how many were not assigned
/// within `patience`, sync idle, then with its round in a pause.
async fn newcomers(
    cluster: &TestCluster,
    binary: &Path,
    run: usize,
    creates: usize,
    patience: Duration,
) -> [(Vec<f64>, usize); 2] {
    let admin = cluster.admin().await;
    let guard = cluster
        .namespace(&format!("bench-sync-newcomers-{run}"))
        .await;
    let ns = guard.name.clone();
    cluster.grant_sync_namespace(&ns).await;
    let git = GitRepo::new();
    let _op1 = spawn_operator(cluster, "operator-1", &ns).await;
    let _op2 = spawn_operator(cluster, "operator-2", &ns).await;
    for (i, name) in ["it-0", "it-1"].into_iter().enumerate() {
        create_integration(&admin, &ns, name, "operator-1", i).await;
        wait_running_under(&admin, &ns, name, "operator-1").await;
    }
    let rev0 = git.push(&newcomer_manifest(&ns, None), "start");
    let mut extra = vec!["--interval", "30s"];
    extra.extend(short_leases());
    let sync = spawn_sync(
        binary,
        cluster,
        &git,
        &ns,
        &format!("bench-new-{run}"),
        &extra,
    );
    wait_applied(&admin, &ns, &rev0, Duration::from_secs(120), &sync).await;
    let idle = first_owners(&admin, &ns, "idle", creates, patience).await;

    git.push(&newcomer_manifest(&ns, Some("10m")), "rollout with a pause");
    let objects = Api::<OperatorAssignment>::namespaced(admin.clone(), &ns);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !objects
        .get_opt(NAME)
        .await
        .unwrap()
        .and_then(|o| o.status)
        .and_then(|s| s.rollout)
        .is_some_and(|r| r.state == camelk_reconciler::api::RolloutState::Pausing)
    {
        assert!(
            Instant::now() < deadline,
            "(c) the rollout did not reach its pause\nsync log:\n{}",
            sync.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let busy = first_owners(&admin, &ns, "busy", creates, patience).await;
    [idle, busy]
}

/// Creates `creates` Integrations without owner keys in `ns`, one every
/// 100 ms; each one's time from before its create to its owner label seen
/// by a watch, and how many had none after `patience`.
async fn first_owners(
    admin: &Client,
    ns: &str,
    prefix: &str,
    creates: usize,
    patience: Duration,
) -> (Vec<f64>, usize) {
    use std::sync::{Arc, Mutex};
    let api = camelk_testkit::scenario::camel_api(admin.clone(), CamelKind::Integration, ns);
    let owned: Arc<Mutex<BTreeMap<String, Instant>>> = Arc::default();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let watch = {
        let (api, owned) = (api.clone(), owned.clone());
        tokio::spawn(async move {
            let mut ready = Some(ready_tx);
            let mut stream = watcher(api, watcher::Config::default()).boxed();
            while let Ok(Some(event)) = stream.try_next().await {
                match event {
                    watcher::Event::InitDone => {
                        if let Some(r) = ready.take() {
                            let _ = r.send(());
                        }
                    }
                    watcher::Event::Apply(o) if owner(&o).is_some() => {
                        let name = o.metadata.name.clone().unwrap_or_default();
                        owned
                            .lock()
                            .unwrap()
                            .entry(name)
                            .or_insert_with(Instant::now);
                    }
                    _ => {}
                }
            }
        })
    };
    ready_rx.await.expect("watch started");
    let mut started = BTreeMap::new();
    for i in 0..creates {
        let name = format!("{prefix}-{i:04}");
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": CamelKind::Integration.api_version(),
            "kind": "Integration",
            "metadata": { "name": name },
            "spec": { "sources": [{ "name": "r.yaml", "content": "- from: timer:x" }] }
        }))
        .unwrap();
        started.insert(name, Instant::now());
        api.create(&PostParams::default(), &obj).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let deadline = Instant::now() + patience;
    while owned.lock().unwrap().len() < creates && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    watch.abort();
    let owned = owned.lock().unwrap();
    let times: Vec<f64> = started
        .iter()
        .filter_map(|(name, t0)| owned.get(name).map(|t| t.duration_since(*t0).as_secs_f64()))
        .collect();
    let missing = creates - times.len();
    (times, missing)
}

/// Runs (a) in both modes and prints its table.
async fn report_latency(cluster: &TestCluster, reps: usize, poll: Duration, poll_text: &str) {
    let webhook = latency(cluster, reps, poll, true).await;
    let polling = latency(cluster, reps, poll, false).await;
    println!();
    println!(
        "(a) commit → first move of the Integration (first change of its owner label), seconds"
    );
    println!(
        "  {:<26} {:>7} {:>7} {:>7}   {:>15}   samples",
        "mode", "median", "min", "max", "applied median"
    );
    for (label, r) in [
        ("webhook (interval 1h)".to_string(), &webhook),
        (format!("poll (interval {poll_text})"), &polling),
    ] {
        let (med, min, max) = stats(&r.first_move);
        let (applied, _, _) = stats(&r.applied);
        println!(
            "  {label:<26} {med:>7.3} {min:>7.3} {max:>7.3}   {applied:>15.3}   {}",
            r.first_move
                .iter()
                .map(|s| format!("{s:.2}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    println!(
        "  ratio webhook/poll, median first move: {:.3}; median applied: {:.3}",
        stats(&webhook.first_move).0 / stats(&polling.first_move).0,
        stats(&webhook.applied).0 / stats(&polling.applied).0
    );
}

/// `name` as a comma-separated list of sizes, ascending (`10000,100000`).
fn env_sizes(name: &str, default: usize) -> Vec<usize> {
    let Ok(text) = std::env::var(name) else {
        return vec![default];
    };
    let mut sizes: Vec<usize> = text
        .split(',')
        .map(|n| {
            n.trim()
                .replace('_', "")
                .parse()
                .unwrap_or_else(|_| panic!("{name}={text}: `{n}` is not a count"))
        })
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// The live-cache modes to compare, when `reconciler sync` has `--live-cache`.
fn live_cache_flag() -> Option<Vec<&'static str>> {
    let out = Command::new(env!("CARGO_BIN_EXE_reconciler"))
        .args(["sync", "--help"])
        .stdin(Stdio::null())
        .output()
        .expect("run reconciler sync --help");
    let help = String::from_utf8_lossy(&out.stdout);
    help.contains("--live-cache")
        .then(|| vec!["metadata", "full"])
}

// ---------------------------------------------------------------- (a) latency

struct Latency {
    first_move: Vec<f64>,
    applied: Vec<f64>,
}

/// The manifest of (a): operator-1 by default, `it-0` pinned to `pinned`.
fn latency_manifest(ns: &str, pinned: &str, tag: &str) -> String {
    use camelk_testkit::manifest::Rollout;
    let assignment = two_operators(ns, &[ns])
        .pin(CamelKind::Integration, ns, "it-0", pinned)
        .rollout(Rollout::new().gate_timeout("60s").pause("0s"))
        .drain_timeout("2m");
    format!("{assignment}# {tag}\n")
}

/// One mode of (a) in a namespace of its own, with its own operators.
async fn latency(cluster: &TestCluster, reps: usize, poll: Duration, webhook: bool) -> Latency {
    let mode = if webhook { "webhook" } else { "poll" };
    let admin = cluster.admin().await;
    let guard = cluster.namespace(&format!("bench-sync-{mode}")).await;
    let ns = guard.name.clone();
    cluster.grant_sync_namespace(&ns).await;
    let git = GitRepo::new();
    let _op1 = spawn_operator(cluster, "operator-1", &ns).await;
    let _op2 = spawn_operator(cluster, "operator-2", &ns).await;
    create_integration(&admin, &ns, "it-0", "operator-1", 0).await;
    wait_running_under(&admin, &ns, "it-0", "operator-1").await;

    let secret_file = git.dir.path().join("webhook-secret");
    std::fs::write(&secret_file, "bench-secret\n").unwrap();
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let interval = if webhook {
        "1h".to_string()
    } else {
        format!("{}ms", poll.as_millis())
    };
    let mut extra = vec!["--interval", interval.as_str(), "--listen", listen.as_str()];
    extra.extend(short_leases());
    if webhook {
        extra.extend(["--webhook-secret-file", secret_file.to_str().unwrap()]);
    }
    let rev0 = git.push(&latency_manifest(&ns, "operator-1", "start"), "start");
    let sync = spawn_sync(
        this_binary(),
        cluster,
        &git,
        &ns,
        &format!("bench-{mode}"),
        &extra,
    );
    wait_applied(&admin, &ns, &rev0, Duration::from_secs(120), &sync).await;

    let api = camelk_testkit::scenario::camel_api(admin.clone(), CamelKind::Integration, &ns);
    let mut result = Latency {
        first_move: Vec::new(),
        applied: Vec::new(),
    };
    let mut owner = "operator-1";
    // The first handoff to each target waits to see that target's lock
    // renew (up to one retry period); two warm-up moves, one to each
    // operator, keep that once-per-process cost out of the samples.
    for rep in 1..=reps + WARM_UP {
        let counted = rep > WARM_UP;
        let target = if owner == "operator-1" {
            "operator-2"
        } else {
            "operator-1"
        };
        // Push at a different phase of the poll interval each time.
        let phase = (rep as f64 * 0.618_034).fract();
        tokio::time::sleep(poll.mul_f64(phase)).await;
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let moved = tokio::spawn(first_owner_change(
            api.clone(),
            "it-0".into(),
            owner.to_string(),
            ready_tx,
        ));
        ready_rx.await.expect("watch of it-0 started");
        let text = latency_manifest(&ns, target, &format!("repetition {rep}"));
        let sha = git.push(&text, &format!("move it-0 to {target}"));
        let pushed = Instant::now();
        if webhook {
            let body = r#"{"ref":"refs/heads/main"}"#;
            let signature = github_signature(b"bench-secret", body);
            let code = post_hook(port, body, &signature);
            assert_eq!(code, 202, "webhook refused");
        }
        let first = tokio::time::timeout(Duration::from_secs(120), moved)
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{mode}: it-0 not moved after 120s\nsync log:\n{}",
                    sync.log_tail()
                )
            })
            .unwrap();
        wait_applied(&admin, &ns, &sha, Duration::from_secs(120), &sync).await;
        let applied = pushed.elapsed().as_secs_f64();
        let first = first.duration_since(pushed).as_secs_f64();
        let which = if counted {
            format!("repetition {}", rep - WARM_UP)
        } else {
            format!("warm-up {rep} (not counted)")
        };
        println!(
            "  (a) {mode:<7} {which}: first move {first:.3}s, applied {applied:.3}s ({owner} → {target})"
        );
        if counted {
            result.first_move.push(first);
            result.applied.push(applied);
        }
        owner = target;
    }
    drop(sync);
    result
}

/// The instant `name`'s owner label first differs from `from`; `ready` fires
/// once the watch has seen the current state (where it must still be `from`).
async fn first_owner_change(
    api: Api<DynamicObject>,
    name: String,
    from: String,
    ready: tokio::sync::oneshot::Sender<()>,
) -> Instant {
    let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut stream = watcher(api, cfg).boxed();
    let mut ready = Some(ready);
    while let Some(event) = stream.try_next().await.expect("watch") {
        match event {
            watcher::Event::InitDone => {
                if let Some(r) = ready.take() {
                    let _ = r.send(());
                }
            }
            watcher::Event::InitApply(o) | watcher::Event::Apply(o) => {
                let owner = owner(&o);
                if owner.as_deref() != Some(from.as_str()) {
                    assert!(
                        ready.is_none(),
                        "{name} is owned by {owner:?} before the push, not {from}"
                    );
                    return Instant::now();
                }
            }
            _ => {}
        }
    }
    panic!("watch of {name} ended")
}

fn owner(o: &DynamicObject) -> Option<String> {
    o.metadata.labels.as_ref()?.get(OPERATOR_ID_KEY).cloned()
}

async fn wait_running_under(client: &Client, ns: &str, name: &str, id: &str) {
    let api = camelk_testkit::scenario::camel_api(client.clone(), CamelKind::Integration, ns);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(o) = api.get_opt(name).await.unwrap()
            && phase(&o) == Some("Running")
            && owner(&o).as_deref() == Some(id)
            && kit_name(&o).is_some_and(|k| k.ends_with(&format!("-kit-{id}")))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{ns}/{name} not running under {id}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn github_signature(secret: &[u8], body: &str) -> String {
    use hmac::{KeyInit, Mac};
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret).unwrap();
    mac.update(body.as_bytes());
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// POSTs a GitHub push event to `/hooks/git`; returns the HTTP status.
fn post_hook(port: u16, body: &str, signature: &str) -> u16 {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let request = format!(
        "POST /hooks/git HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Content-Type: application/json\r\nX-GitHub-Event: push\r\n\
         X-Hub-Signature-256: {signature}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

// ----------------------------------------------------------- (b) steady state

struct Steady {
    mode: String,
    /// Integrations tracked.
    objects: usize,
    initial_sync: f64,
    initial_lists: usize,
    window: f64,
    rss: u64,
    max_sampled: u64,
    hwm: u64,
    /// Requests by verb during the window.
    verbs: BTreeMap<String, usize>,
    /// LISTs during the window, by resource.
    lists: BTreeMap<String, usize>,
    /// Requests during the window, by verb and resource.
    detail: BTreeMap<String, usize>,
    exited: Option<String>,
}

fn steady_manifest(namespaces: &[String], lock_ns: &str, tag: &str) -> String {
    let namespaces: Vec<&str> = namespaces.iter().map(String::as_str).collect();
    let assignment = two_operators(lock_ns, &namespaces);
    format!("{assignment}# {tag}\n")
}

/// The namespaces of (b), kept for the whole run.
async fn steady_namespaces(
    cluster: &TestCluster,
    spread: usize,
) -> Vec<camelk_testkit::TestNamespace> {
    let mut namespaces = Vec::new();
    for _ in 0..spread {
        namespaces.push(cluster.namespace("bench-steady").await);
    }
    namespaces
}

/// Creates Integrations `range` (by index, round robin over `namespaces`),
/// owned by operator-1, `in_flight` requests at a time; prints how long it
/// took and how the control plane holds up.
async fn create_steady_objects(
    cluster: &TestCluster,
    namespaces: &[camelk_testkit::TestNamespace],
    range: std::ops::Range<usize>,
    in_flight: usize,
) {
    let admin = cluster.admin().await;
    let names: Vec<String> = namespaces.iter().map(|n| n.name.clone()).collect();
    let count = range.len();
    let t = Instant::now();
    futures::stream::iter(range.clone())
        .map(|i| {
            let admin = admin.clone();
            let ns = names[i % names.len()].clone();
            async move { create_integration(&admin, &ns, &format!("it-{i:06}"), "operator-1", i).await }
        })
        .buffer_unordered(in_flight)
        .collect::<Vec<_>>()
        .await;
    let took = t.elapsed().as_secs_f64();
    let root = cluster.dir().root();
    let etcd_db = std::fs::metadata(root.join("etcd/member/snap/db")).map_or(0, |m| m.len());
    let apiserver = camelk_testkit::cluster::pid_of(cluster.dir(), "kube-apiserver")
        .map_or(0, |pid| proc_status(pid, "VmRSS:"));
    let etcd = camelk_testkit::cluster::pid_of(cluster.dir(), "etcd")
        .map_or(0, |pid| proc_status(pid, "VmRSS:"));
    println!();
    println!(
        "  (b) created Integrations {}..{} ({count}) over {} namespaces in {took:.1}s ({:.0}/s, {in_flight} in flight); etcd db {:.0} MiB (quota: etcd's default, 2 GiB), etcd VmRSS {:.0} MiB, kube-apiserver VmRSS {:.0} MiB",
        range.start,
        range.end,
        names.len(),
        count as f64 / took,
        mib(etcd_db),
        mib(etcd),
        mib(apiserver)
    );
}

async fn steady_state(
    cluster: &TestCluster,
    namespaces: &[camelk_testkit::TestNamespace],
    objects: usize,
    mode: Option<&str>,
    interval: &str,
    window: Duration,
) -> Steady {
    let label = mode.map_or("default (no --live-cache)".to_string(), |m| {
        format!("--live-cache {m}")
    });
    let admin = cluster.admin().await;
    let home_guard = cluster.namespace("bench-steady-sync").await;
    let home = home_guard.name.clone();
    cluster.grant_sync_namespace(&home).await;
    let names: Vec<String> = namespaces.iter().map(|n| n.name.clone()).collect();
    let git = GitRepo::new();
    let rev = git.push(&steady_manifest(&names, &home, &label), "steady");
    let mut extra = vec!["--interval", interval, "--listen", "127.0.0.1:0"];
    if let Some(m) = mode {
        extra.extend(["--live-cache", m]);
    }
    let audit = cluster.audit_log();
    let start_mark = audit.mark().unwrap();
    let started = Instant::now();
    let mut sync = spawn_sync(this_binary(), cluster, &git, &home, "bench-steady", &extra);
    // The initial list and plan grow with the objects: 300 s, plus 5 s per thousand past 20,000.
    let timeout = Duration::from_secs(300 + 5 * (objects.saturating_sub(20_000) / 1000) as u64);
    wait_applied(&admin, &home, &rev, timeout, &sync).await;
    let initial_sync = started.elapsed().as_secs_f64();
    let pid = sync.child.id();

    let mark = audit.mark().unwrap();
    let (initial, _) = audit.requests_since(start_mark).unwrap();
    let mut initial_detail: BTreeMap<String, usize> = BTreeMap::new();
    for r in initial
        .iter()
        .filter(|r| r.user.username == RECONCILER && r.is_request_start())
    {
        *initial_detail
            .entry(format!("{} {}", r.verb, r.resource().unwrap_or("-")))
            .or_insert(0) += 1;
    }
    let initial_lists = initial
        .iter()
        .filter(|r| r.user.username == RECONCILER && r.is_request_start() && r.verb == "list")
        .count();
    println!(
        "  (b) {label} at {objects}: requests until the initial sync was applied: {}",
        initial_detail
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let window_start = Instant::now();
    let mut max_sampled = 0;
    let mut exited = None;
    while window_start.elapsed() < window {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Ok(Some(status)) = sync.child.try_wait() {
            exited = Some(format!("{status}"));
            break;
        }
        max_sampled = max_sampled.max(proc_status(pid, "VmRSS:"));
    }
    let elapsed = window_start.elapsed().as_secs_f64();
    let rss = proc_status(pid, "VmRSS:");
    let hwm = proc_status(pid, "VmHWM:");
    let (requests, _) = audit.requests_since(mark).unwrap();
    let mut verbs = BTreeMap::new();
    let mut lists = BTreeMap::new();
    let mut detail = BTreeMap::new();
    for r in requests
        .iter()
        .filter(|r| r.user.username == RECONCILER && r.is_request_start())
    {
        *verbs.entry(r.verb.clone()).or_insert(0) += 1;
        *detail
            .entry(format!("{} {}", r.verb, r.resource().unwrap_or("-")))
            .or_insert(0) += 1;
        if r.verb == "list" {
            *lists
                .entry(r.resource().unwrap_or("?").to_string())
                .or_insert(0) += 1;
        }
    }
    if let Some(status) = &exited {
        println!(
            "  (b) {label}: the sync process exited ({status}) during the window\n{}",
            sync.log_tail()
        );
    }
    println!(
        "  (b) {label} at {objects}: initial sync {initial_sync:.1}s, window {elapsed:.0}s, VmRSS {:.1} MiB, VmHWM {:.1} MiB",
        mib(rss),
        mib(hwm)
    );
    sync.kill();
    Steady {
        mode: label,
        objects,
        initial_sync,
        initial_lists,
        window: elapsed,
        rss,
        max_sampled,
        hwm,
        verbs,
        lists,
        detail,
        exited,
    }
}

fn print_steady(rows: &[Steady], objects: usize, spread: usize, window: &str, interval: &str) {
    println!();
    println!(
        "(b) steady state: {objects} Integrations in {spread} namespaces, --interval {interval}, window {window} after the initial sync"
    );
    println!(
        "    requests: the `reconciler` identity's, from the audit log (a watch counted when it opens)"
    );
    println!(
        "    max VmRSS: sampled every second in the window; VmHWM: the peak over the process's life"
    );
    let verbs = ["list", "watch", "get", "patch", "update", "create"];
    print!(
        "  {:<26} {:>8} {:>9} {:>9} {:>9} {:>8} |",
        "mode", "init s", "init LIST", "VmRSS MiB", "max VmRSS", "VmHWM"
    );
    for v in verbs {
        print!(" {v:>7}/m");
    }
    println!(" {:>7}/m | {:>11}", "other", "LISTs after");
    for r in rows {
        let per_min = |n: usize| n as f64 * 60.0 / r.window;
        print!(
            "  {:<26} {:>8.1} {:>9} {:>9.1} {:>9.1} {:>8.1} |",
            r.mode,
            r.initial_sync,
            r.initial_lists,
            mib(r.rss),
            mib(r.max_sampled),
            mib(r.hwm)
        );
        for v in verbs {
            print!(" {:>9.1}", per_min(r.verbs.get(v).copied().unwrap_or(0)));
        }
        let other: usize = r
            .verbs
            .iter()
            .filter(|(v, _)| !verbs.contains(&v.as_str()))
            .map(|(_, n)| n)
            .sum();
        println!(
            " {:>9.1} | {:>11}",
            per_min(other),
            r.verbs.get("list").copied().unwrap_or(0)
        );
    }
    for r in rows {
        let lists = r.verbs.get("list").copied().unwrap_or(0);
        println!(
            "  {}: LISTs after the initial sync {lists} (target 0: {}), by resource {:?}; RSS {:.1} MiB (target ≤ {RSS_TARGET_MIB} MiB: {}), peak {:.1} MiB{}",
            r.mode,
            if lists == 0 { "met" } else { "MISSED" },
            r.lists,
            mib(r.rss),
            if mib(r.rss) <= RSS_TARGET_MIB {
                "met"
            } else {
                "MISSED"
            },
            mib(r.hwm),
            r.exited
                .as_ref()
                .map(|s| format!("; EXITED during the window ({s})"))
                .unwrap_or_default()
        );
    }
    for r in rows {
        println!(
            "  {}: requests/min by verb and resource: {}",
            r.mode,
            r.detail
                .iter()
                .map(|(k, n)| format!("{k} {:.1}", *n as f64 * 60.0 / r.window))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let [metadata, full] = rows {
        let total = |r: &Steady| r.verbs.values().sum::<usize>() as f64 * 60.0 / r.window;
        println!(
            "  ratio metadata/full: RSS {:.3}, peak RSS {:.3}, requests/min {:.3}, initial sync time {:.3}",
            metadata.rss as f64 / full.rss as f64,
            metadata.hwm as f64 / full.hwm as f64,
            total(metadata) / total(full),
            metadata.initial_sync / full.initial_sync
        );
    }
}

/// Each size side by side, per live cache: memory per tracked resource,
/// LISTs per minute, and the growth from one size to the next.
fn print_growth(by_size: &[(usize, Vec<Steady>)]) {
    if by_size.len() < 2 {
        return;
    }
    println!();
    println!("(b) by size: resident memory per tracked Integration and LISTs per minute");
    println!(
        "  {:<26} {:>8} {:>8} {:>9} {:>8} {:>9} {:>8} {:>8} {:>10}",
        "mode",
        "objects",
        "init s",
        "VmRSS MiB",
        "B/object",
        "VmHWM MiB",
        "B/object",
        "LIST/m",
        "requests/m"
    );
    let modes = by_size[0].1.len();
    for m in 0..modes {
        for (_, rows) in by_size {
            let r = &rows[m];
            let per_min = |n: usize| n as f64 * 60.0 / r.window;
            println!(
                "  {:<26} {:>8} {:>8.1} {:>9.1} {:>8.0} {:>9.1} {:>8.0} {:>8.1} {:>10.1}",
                r.mode,
                r.objects,
                r.initial_sync,
                mib(r.rss),
                r.rss as f64 / r.objects as f64,
                mib(r.hwm),
                r.hwm as f64 / r.objects as f64,
                per_min(r.verbs.get("list").copied().unwrap_or(0)),
                per_min(r.verbs.values().sum())
            );
        }
    }
    println!(
        "  growth: (memory at the larger size − at the smaller) / additional Integrations; target ≤ {GROWTH_TARGET_BYTES:.0} B (2 KiB) per tracked resource, on VmRSS after the window"
    );
    for pair in by_size.windows(2) {
        let [(small, a), (large, b)] = pair else {
            continue;
        };
        let added = (large - small) as f64;
        for (a, b) in a.iter().zip(b) {
            let rss = (b.rss as f64 - a.rss as f64) / added;
            let hwm = (b.hwm as f64 - a.hwm as f64) / added;
            println!(
                "  {:<26} {small} → {large}: VmRSS {:+.1} MiB, {rss:.0} B per added Integration (target: {}); VmHWM {:+.1} MiB, {hwm:.0} B per added Integration; initial sync ×{:.2}",
                a.mode,
                mib(b.rss) - mib(a.rss),
                if rss <= GROWTH_TARGET_BYTES {
                    "met"
                } else {
                    "MISSED"
                },
                mib(b.hwm) - mib(a.hwm),
                b.initial_sync / a.initial_sync
            );
        }
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// A `kB` field of /proc/<pid>/status, in bytes (0 when gone).
fn proc_status(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

// ------------------------------------------------------------------- set-up

/// An Integration owned (label and annotation) by `owner`, with a small route.
async fn create_integration(client: &Client, ns: &str, name: &str, owner: &str, i: usize) {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": CamelKind::Integration.api_version(), "kind": "Integration",
        "metadata": { "name": name, "labels": { OPERATOR_ID_KEY: owner, "app": name },
                      "annotations": { OPERATOR_ID_KEY: owner } },
        "spec": { "sources": [{ "name": "route.yaml", "content": format!(
            "- from:\n    uri: timer:tick-{i}\n    parameters: {{period: 5000}}\n    steps:\n      - setBody:\n          constant: hello from {name}\n      - log: ${{body}}\n") }] }
    }))
    .unwrap();
    camelk_testkit::scenario::camel_api(client.clone(), CamelKind::Integration, ns)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating {ns}/{name}: {e}"));
}

/// Installs the `OperatorAssignment` CRD and waits until it is served.
async fn install_assignment_crd(cluster: &TestCluster) {
    let admin = cluster.admin().await;
    camelk_testkit::crds::install_assignment_crd(&admin, "camelk-bench").await;
}

/// Waits until the `OperatorAssignment` in `ns` has applied `sha` completely.
async fn wait_applied(client: &Client, ns: &str, sha: &str, timeout: Duration, sync: &Process) {
    let api: Api<OperatorAssignment> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + timeout;
    let done = |s: &OperatorAssignmentStatus| {
        s.last_applied_revision.as_deref() == Some(sha)
            && s.rollout.as_ref().is_none_or(|r| r.state == "Complete")
    };
    loop {
        let status = api
            .get_opt(NAME)
            .await
            .ok()
            .flatten()
            .and_then(|o| o.status);
        if status.as_ref().is_some_and(done) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{ns}: revision {sha} not applied after {timeout:?}; status {status:#?}\nsync log:\n{}",
            sync.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A child process with its log, killed when dropped.
struct Process {
    child: Child,
    log: PathBuf,
}

/// The binary under test; (c) may also run a baseline (`BENCH_SYNC_BASELINE_BIN`).
fn this_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_reconciler"))
}

impl Process {
    fn spawn(args: &[String], log: PathBuf, rust_log: &str) -> Process {
        Process::spawn_binary(this_binary(), args, log, rust_log)
    }

    fn spawn_binary(binary: &Path, args: &[String], log: PathBuf, rust_log: &str) -> Process {
        let out = File::create(&log).expect("log file");
        let child = Command::new(binary)
            .args(args)
            .env("RUST_LOG", rust_log)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("start the reconciler binary");
        Process { child, log }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

async fn spawn_operator(cluster: &TestCluster, id: &str, ns: &str) -> Process {
    cluster.grant_operator(id, ns, ns).await;
    let mut args = strings(&[
        "operator",
        "--id",
        id,
        "--namespace",
        ns,
        "--lock-namespace",
        ns,
        "--identity",
        &format!("bench-{id}"),
        "--build-time",
        "1s",
        "--resync",
        "300ms",
        "--context",
        id,
    ]);
    args.extend(strings(&camelk_testkit::SHORT_LOCK_ARGS));
    args.push("--kubeconfig".into());
    args.push(cluster.kubeconfig().display().to_string());
    let log = std::env::temp_dir().join(format!("camelk-bench-sync-{ns}-{id}.log"));
    Process::spawn(&args, log, "warn")
}

/// `reconciler sync` of `binary` (this package's: [`this_binary`]) as
/// `identity` following `git`, its object and lock in `ns`; `extra` adds flags.
fn spawn_sync(
    binary: &Path,
    cluster: &TestCluster,
    git: &GitRepo,
    ns: &str,
    identity: &str,
    extra: &[&str],
) -> Process {
    let mut args = strings(&[
        "sync",
        "--branch",
        "main",
        "--path",
        "operator-assignment.yaml",
        "--namespace",
        ns,
        "--identity",
        identity,
        "--context",
        RECONCILER,
    ]);
    args.extend(strings(extra));
    args.push("--repo".into());
    args.push(format!("file://{}", git.remote().display()));
    args.push("--cache-dir".into());
    args.push(git.dir.path().join("cache").display().to_string());
    args.push("--kubeconfig".into());
    args.push(cluster.kubeconfig().display().to_string());
    let log = std::env::temp_dir().join(format!("camelk-bench-sync-{ns}-{identity}.log"));
    Process::spawn_binary(binary, &args, log, "info")
}

/// A bare repository (the remote the sync follows) and a clone pushing to it.
struct GitRepo {
    dir: tempfile::TempDir,
    work: git2::Repository,
}

impl GitRepo {
    fn new() -> GitRepo {
        let dir = tempfile::tempdir().unwrap();
        git2::Repository::init_bare(dir.path().join("remote.git")).unwrap();
        let work = git2::Repository::init(dir.path().join("work")).unwrap();
        work.remote("origin", dir.path().join("remote.git").to_str().unwrap())
            .unwrap();
        GitRepo { dir, work }
    }

    fn remote(&self) -> PathBuf {
        self.dir.path().join("remote.git")
    }

    /// Commits `text` as the manifest on `main`, pushes it; returns the SHA.
    fn push(&self, text: &str, message: &str) -> String {
        let file = Path::new("operator-assignment.yaml");
        std::fs::write(self.work.workdir().unwrap().join(file), text).unwrap();
        let mut index = self.work.index().unwrap();
        index.add_path(file).unwrap();
        index.write().unwrap();
        let tree = self.work.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("bench", "bench@example.com").unwrap();
        let parent = self
            .work
            .refname_to_id("refs/heads/main")
            .ok()
            .map(|id| self.work.find_commit(id).unwrap());
        let parents: Vec<&git2::Commit> = parent.iter().collect();
        let id = self
            .work
            .commit(
                Some("refs/heads/main"),
                &sig,
                &sig,
                message,
                &tree,
                &parents,
            )
            .unwrap();
        self.work
            .find_remote("origin")
            .unwrap()
            .push(&["refs/heads/main:refs/heads/main"], None)
            .unwrap();
        id.to_string()
    }
}

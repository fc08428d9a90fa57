//! The faults, each injected in the middle of a rollout step, and the checks
//! that follow them.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use camelk_reconciler::camel_k::CamelKind;
use camelk_testkit::cluster;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use nix::sys::signal::Signal;
use serde_json::json;

use crate::world::{self, Blueprint, Flavour, Handlers, NS, Plumbing, World};
use crate::{rebuild, support};
use camelk_testkit::proxy::Mode;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// kube-apiserver killed and started again on the same etcd.
    ApiServerRestart,
    /// etcd frozen (SIGSTOP) for a while, then thawed.
    EtcdPause(Duration),
    /// Both operators killed and started again at once.
    OperatorsRestart,
    /// A third party patching spec, labels and annotations of every resource
    /// for a while.
    ThirdPartyWriter(Duration),
    /// The manifest edited mid-rollout: a revision that reverses half the moves.
    ManifestEdit,
    /// Resources deleted and created again under the same name mid-handoff.
    DeleteRecreate,
    /// The Git host accepts connections and never answers, for at least
    /// this long and until the sync reports `FetchFailed`.
    GitHang(Duration),
    /// The leading reconciler cut off from the API server for longer than
    /// its lease, while a second replica takes over; then reconnected.
    ReconcilerCut(Duration),
    /// operator-1 cut off from the API server while it owns resources being
    /// moved; then reconnected.
    OperatorCut(Duration),
    /// API Priority and Fairness serves the reconciler about one request at
    /// a time and answers the rest 429, until the rollout is done.
    Throttled,
    /// The Git host answers a rewritten history: `main` goes back to the
    /// start and gets a commit that moves only half.
    GitRewrite,
    /// Integrations and Pipes created with no owner key (as a GitOps tool
    /// applies manifests that name no operator) in a namespace that both
    /// operators handle ([`Handlers::Both`]: upstream operators both act on
    /// them; reference ones never do, and the sync alone assigns them).
    UnownedArrivals,
}

impl Fault {
    pub fn name(self) -> String {
        match self {
            Fault::ApiServerRestart => "kube-apiserver restart".into(),
            Fault::EtcdPause(d) => format!("etcd stopped {}s", d.as_secs()),
            Fault::OperatorsRestart => "both operators restarted".into(),
            Fault::ThirdPartyWriter(d) => format!("third-party writer {}s", d.as_secs()),
            Fault::ManifestEdit => "manifest edited mid-rollout".into(),
            Fault::DeleteRecreate => "resources deleted and re-created".into(),
            Fault::GitHang(d) => format!("Git host hangs {}s", d.as_secs()),
            Fault::ReconcilerCut(d) => {
                format!("reconciler cut off {}s, standby leads", d.as_secs())
            }
            Fault::OperatorCut(d) => format!("operator-1 cut off {}s", d.as_secs()),
            Fault::Throttled => "reconciler throttled (APF 429s)".into(),
            Fault::GitRewrite => "Git history rewritten".into(),
            Fault::UnownedArrivals => "unowned resources created, two handlers".into(),
        }
    }

    fn plumbing(self) -> Plumbing {
        match self {
            Fault::GitHang(_) | Fault::GitRewrite => Plumbing::Git,
            Fault::ReconcilerCut(_) => Plumbing::Sync,
            Fault::OperatorCut(_) => Plumbing::Operator1,
            _ => Plumbing::Direct,
        }
    }

    fn handlers(self) -> Handlers {
        match self {
            Fault::UnownedArrivals => Handlers::Both,
            _ => Handlers::None,
        }
    }
}

/// One scenario's figures.
pub struct Outcome {
    pub scenario: String,
    pub resources: usize,
    /// From the fault clearing to the rollout `Ready`.
    pub recovery: Duration,
    /// The whole scenario: rollout, fault, checks, and the world's start
    /// for the first scenario of a world.
    pub wall: Duration,
    pub writes_per_move: f64,
    pub dual_owner_writes: usize,
    pub fields_lost: usize,
    /// Integrations upstream Camel K failed during the fault, rebuilt as a
    /// user would (rebuild.rs).
    pub rebuilt: usize,
    pub problems: Vec<String>,
}

/// The name of `fault` run with operators of `flavour`.
pub fn scenario_name(fault: Fault, flavour: Flavour) -> String {
    format!("{} ({})", fault.name(), flavour.name())
}

/// The worlds `faults` run in: one each, or, `shared`, one for each kind of
/// world (the faults' [`Plumbing`] and [`Handlers`]), in which they take
/// turns in the order given.
pub fn worlds(faults: Vec<Fault>, shared: bool) -> Vec<Vec<Fault>> {
    let mut worlds: Vec<Vec<Fault>> = Vec::new();
    for fault in faults {
        let kind = |f: &Fault| (f.plumbing(), f.handlers());
        match worlds
            .iter_mut()
            .find(|w| shared && kind(&w[0]) == kind(&fault))
        {
            Some(world) => world.push(fault),
            None => worlds.push(vec![fault]),
        }
    }
    worlds
}

/// Runs the scenarios of `faults` in turn in one world of `flavour` with
/// `n` resources, each rolling out from where the one before left it (they
/// share the world's [`Plumbing`] and [`Handlers`]); says each one's figures
/// and problems as it ends. One result per fault: `None` for a scenario that
/// could not be judged, or that was not run because one before it in the
/// world failed (the world is then kept, as that one left it).
pub async fn run(faults: &[Fault], flavour: Flavour, n: usize) -> Vec<Option<Outcome>> {
    let world_name = match faults {
        [fault] => scenario_name(*fault, flavour),
        _ => format!("{} faults in turn ({})", faults.len(), flavour.name()),
    };
    let slug: String = world_name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let (plumbing, handlers) = (faults[0].plumbing(), faults[0].handlers());
    assert!(
        faults
            .iter()
            .all(|f| f.plumbing() == plumbing && f.handlers() == handlers),
        "scenarios that share a world need the same plumbing and handlers"
    );
    let mut started = Instant::now();
    let mut w = match World::start(Blueprint {
        scenario: &slug,
        n,
        plumbing,
        flavour,
        handlers,
    })
    .await
    {
        Ok(w) => w,
        Err(e) => {
            eprintln!("chaos: {world_name}: {e:#}");
            return faults.iter().map(|_| None).collect();
        }
    };
    eprintln!(
        "chaos: {world_name}: world of {n} ready in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let mut outcomes = Vec::new();
    let mut failed = false;
    for fault in faults {
        let name = scenario_name(*fault, flavour);
        if failed {
            eprintln!("chaos: {name}: not run, a scenario before it in its world failed");
            outcomes.push(None);
            continue;
        }
        eprintln!("chaos: {name} with {n} resources");
        let judged = match w.begin_scenario().await {
            Ok(()) => exercise(&mut w, *fault, &name, n, started).await,
            Err(e) => Err(e.context("the world before the scenario")),
        };
        match judged {
            Ok(outcome) => {
                failed = !outcome.problems.is_empty();
                for problem in &outcome.problems {
                    eprintln!("chaos: {name}: {problem}");
                }
                // Each row as it comes: a long matrix shows its figures early.
                eprintln!("chaos: {}", outcome.row());
                outcomes.push(Some(outcome));
            }
            Err(e) => {
                failed = true;
                let kept = w.keep();
                eprintln!("chaos: {name}: {e:#}; state kept in {}", kept.display());
                outcomes.push(None);
            }
        }
        started = Instant::now();
    }
    outcomes
}

/// The rollout from the world's layout to its swap, the fault in its step
/// 2, and the checks of the scenario `started` at that instant. Leaves the
/// world's layout, revision and fingerprints as the scenario ended them.
async fn exercise(
    w: &mut World,
    fault: Fault,
    name: &str,
    n: usize,
    started: Instant,
) -> anyhow::Result<Outcome> {
    let from = w.layout;
    let rollout = w.remote.push(
        &world::manifest_rollout(w.flavour, w.handlers, n, from),
        "the groups swap operators",
    );
    let pushed = Instant::now();
    // The middle of a step: the second one started.
    w.wait_status(w.flavour.patience(n), "at step 2", |s| {
        s.rollout
            .as_ref()
            .is_some_and(|r| r.revision == rollout && r.current_step >= 2)
    })
    .await?;
    eprintln!(
        "chaos: {name}: step 2 reached {:.1} s after the push",
        pushed.elapsed().as_secs_f64()
    );

    let mut problems = Vec::new();
    // The resources created with no owner key.
    let mut arrived: Vec<(CamelKind, String)> = Vec::new();
    let mut expected_fingerprints = w.before.clone();
    let mut final_revision = rollout.clone();
    let mut layout = from.swapped();
    // Upstream Camel K can fail an Integration for good on an error the
    // fault causes; the user's remedy runs from the fault on (rebuild.rs).
    let (stop_rebuilds, stopped) = tokio::sync::oneshot::channel();
    let rebuilds = (w.flavour == Flavour::Upstream).then(|| {
        tokio::spawn(rebuild::failed_since(
            w.admin.clone(),
            k8s_openapi::jiff::Timestamp::now(),
            stopped,
        ))
    });
    match fault {
        Fault::ApiServerRestart => {
            cluster::restart(w.cluster.dir(), "kube-apiserver")?;
        }
        Fault::EtcdPause(d) => {
            cluster::signal(w.cluster.dir(), "etcd", Signal::SIGSTOP)?;
            tokio::time::sleep(d).await;
            cluster::signal(w.cluster.dir(), "etcd", Signal::SIGCONT)?;
        }
        Fault::OperatorsRestart => {
            w.kill_operators();
            for id in ["operator-1", "operator-2"] {
                let operator = w.start_operator(id, &format!("{id}-again")).await?;
                w.operators.push(operator);
            }
        }
        Fault::ThirdPartyWriter(d) => {
            let until = Instant::now() + d;
            let mut round = 0;
            while Instant::now() < until {
                round += 1;
                for (kind, name) in w.names.clone() {
                    let mut patch = json!({
                        "metadata": {
                            "labels": { "chaos.example.com/round": round.to_string() },
                            "annotations": { "chaos.example.com/round": round.to_string() }
                        }
                    });
                    // An autoscaler's pace: 2, 1, 2, ... replicas. With ten
                    // and more, an upstream world of 1,000 had 2,366 pods
                    // mid-run (counted), and its moves waited on their
                    // readiness.
                    if kind == CamelKind::Integration {
                        patch["spec"] = json!({ "replicas": 1 + round % 2 });
                    }
                    // A conflict-free merge patch, as kubectl patch writes it.
                    let _ = world::api(&w.admin, kind)
                        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await;
                }
            }
            // What the third party wrote last is what must be kept.
            for ((kind, name), digest) in w.fingerprints().await? {
                let obj = world::api(&w.admin, kind).get(&name).await?;
                let round_label = obj
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("chaos.example.com/round"))
                    .cloned();
                if round_label.as_deref() == Some(round.to_string().as_str()) {
                    expected_fingerprints.insert((kind, name), digest);
                }
            }
        }
        Fault::ManifestEdit => {
            layout = from.half_swapped();
            final_revision = w.remote.push(
                &world::manifest_at(w.flavour, w.handlers, n, layout),
                "group b stays where it was",
            );
        }
        Fault::GitHang(d) => {
            let proxy = w.proxy.as_ref().expect("the Git proxy");
            proxy.set(Mode::Hang);
            let hang_started = Instant::now();
            // A fetch gives up on a silent host and says so; the last good
            // revision stays what the cluster follows. The next fetch comes
            // when the round in flight ends (a step's handoff may take a
            // while), then waits out the server timeout: the host hangs at
            // least `d`, and until the sync has said FetchFailed.
            let failed = w
                .wait_status(
                    w.flavour.patience(n),
                    "FetchFailed while the host hangs",
                    |s| s.conditions.iter().any(|c| c.reason == "FetchFailed"),
                )
                .await;
            if failed.is_ok() {
                eprintln!(
                    "chaos: {name}: FetchFailed {:.1} s after the host began hanging",
                    hang_started.elapsed().as_secs_f64()
                );
            }
            tokio::time::sleep(d.saturating_sub(hang_started.elapsed())).await;
            proxy.set(Mode::Pass);
            failed?;
        }
        Fault::ReconcilerCut(d) => {
            let proxy = w.proxy.as_ref().expect("the API server proxy");
            proxy.set(Mode::Cut);
            let taken = tokio::time::timeout(
                d,
                support::wait_lock_holder(
                    &w.admin,
                    NS,
                    "camelk-reconciler-lock",
                    &w.identity("r2"),
                ),
            )
            .await;
            tokio::time::sleep(Duration::from_secs(2)).await;
            proxy.set(Mode::Pass);
            taken.map_err(|_| anyhow::anyhow!("the standby did not take the lead within {d:?}"))?;
        }
        Fault::OperatorCut(d) => {
            let proxy = w.proxy.as_ref().expect("the API server proxy");
            proxy.set(Mode::Cut);
            for op in w.operators.iter_mut().filter(|o| o.id() == "operator-1") {
                op.cut_off();
            }
            tokio::time::sleep(d).await;
            proxy.set(Mode::Pass);
        }
        Fault::Throttled => {
            // In place until the end: the rollout has to finish under it, so
            // the recovery is counted from the throttle's start.
            camelk_testkit::apf::throttle(&w.admin, "reconciler").await?;
        }
        Fault::GitRewrite => {
            layout = from.half_swapped();
            final_revision = w.remote.force_push_from(
                &w.settled_revision,
                &world::manifest_at(w.flavour, w.handlers, n, layout),
                "group b stays where it was, history rewritten",
            );
        }
        Fault::DeleteRecreate => {
            for (kind, name) in w.names.iter().take(6) {
                let api = world::api(&w.admin, *kind);
                let old = api.get(name).await?;
                api.delete(name, &DeleteParams::default()).await?;
                let deadline = Instant::now() + Duration::from_secs(60);
                while api.get_opt(name).await?.is_some() && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                let mut again = old.clone();
                again.metadata.uid = None;
                again.metadata.resource_version = None;
                again.metadata.creation_timestamp = None;
                again.metadata.managed_fields = None;
                again.metadata.generation = None;
                again.data.as_object_mut().map(|d| d.remove("status"));
                api.create(&PostParams::default(), &again).await?;
            }
        }
        Fault::UnownedArrivals => {
            let (arrivals, late) = unowned_arrivals(w, name, n).await?;
            arrived = arrivals.keys().cloned().collect();
            expected_fingerprints.extend(arrivals);
            problems.extend(late);
        }
    }
    let cleared = Instant::now();
    w.wait_status(w.flavour.patience(n), "Ready at the final revision", |s| {
        s.last_applied_revision.as_deref() == Some(final_revision.as_str())
            && s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
    })
    .await?;
    let recovery = cleared.elapsed();
    let _ = stop_rebuilds.send(());
    let rebuilt = match rebuilds {
        Some(task) => task.await?,
        None => Vec::new(),
    };
    for (integration, cause) in &rebuilt {
        eprintln!(
            "chaos: {name}: rebuilt Integration {integration}, failed by its operator: {cause}"
        );
    }
    let checks = Instant::now();

    let owners = w.owners().await?;
    for ((kind, name), owner) in &owners {
        let wanted = layout.owner(name);
        if owner.as_deref() != Some(wanted) {
            problems.push(format!("{kind} {name}: owner {owner:?}, wanted {wanted}"));
        }
    }
    // A Pipe's Integration goes with its Pipe. One that an upstream handler
    // made while the Pipe had no owner yet is made with none (seen: the
    // Pipe's new owner then refused on it until the sync gave it the Pipe's).
    for (_, pipe) in arrived.iter().filter(|(k, _)| *k == CamelKind::Pipe) {
        let integration = world::api(&w.admin, CamelKind::Integration)
            .get_opt(pipe)
            .await?;
        let owner = integration
            .as_ref()
            .and_then(|i| camelk_reconciler::camel_k::owner_id(&i.metadata));
        let wanted = layout.owner(pipe);
        if owner.as_deref() != Some(wanted) {
            problems.push(format!(
                "the Integration of Pipe {pipe}: {}, wanted owner {wanted}",
                match integration {
                    Some(_) => format!("owner {owner:?}"),
                    None => "none".into(),
                }
            ));
        }
    }
    if !arrived.is_empty() {
        let names: Vec<&str> = arrived.iter().map(|(_, name)| name.as_str()).collect();
        eprintln!(
            "chaos: {name}: {} operator writes to the resources created without an owner (or their Pipes' Integrations) refused by the policy",
            w.operator_writes_refused(&names)?
        );
    }
    let missing = w.names.len() - owners.len();
    if missing > 0 {
        problems.push(format!("{missing} resources gone"));
    }
    let now = w.fingerprints().await?;
    let fields_lost = expected_fingerprints
        .iter()
        .filter(|(key, digest)| now.get(*key) != Some(*digest))
        .count();
    if fields_lost > 0 {
        problems.push(format!(
            "{fields_lost} resources whose spec, labels or annotations changed"
        ));
    }
    let left = w.requests_left().await?;
    if !left.is_empty() {
        problems.push(format!("handoff requests left: {left:?}"));
    }
    if fault == Fault::Throttled {
        let refused = w.throttled_requests("reconciler")?;
        if refused == 0 {
            problems.push("no request of the reconciler was answered 429".into());
        }
        eprintln!("chaos: {refused} requests of the reconciler answered 429");
    }
    let (seen, unexplained) = w.stalls();
    if !unexplained.is_empty() {
        problems.push(format!("the rollout was reported Stalled: {unexplained:?}"));
    } else if seen > 0 {
        eprintln!(
            "chaos: {name}: reported Stalled {seen} times, each TargetNotAlive about an operator that was down"
        );
    }
    if fault == Fault::OperatorsRestart {
        eprintln!(
            "chaos: {name}: {} operator writes logged as failed by the server (5xx; a killed client's)",
            w.operator_writes_failed_by_server()?
        );
    }
    if fault == Fault::GitRewrite && !w.event_seen("BranchRewound").await? {
        problems.push("no BranchRewound Event for the rewritten history".into());
    }
    let (writes, moves, violations) = w.audit()?;
    problems.extend(violations.iter().take(5).cloned());
    eprintln!(
        "chaos: {name}: recovered in {:.1} s, checked in {:.1} s",
        recovery.as_secs_f64(),
        checks.elapsed().as_secs_f64()
    );
    // CHAOS_KEEP=1 keeps the state of passing scenarios too.
    if !problems.is_empty() || std::env::var_os("CHAOS_KEEP").is_some() {
        eprintln!("chaos: {name}: state kept in {}", w.keep().display());
    }
    w.layout = layout;
    w.settled_revision = final_revision;
    w.before = now;
    Ok(Outcome {
        scenario: name.to_string(),
        resources: n,
        recovery,
        wall: started.elapsed(),
        writes_per_move: writes as f64 / moves.max(1) as f64,
        dual_owner_writes: violations.len(),
        fields_lost,
        rebuilt: rebuilt.len(),
        problems,
    })
}

/// How long a resource created with no owner key may wait for one, with
/// reference operators. Measured: 1.5 s at most at 100 resources. A round in
/// step 2 is busy with its handoff and health gate for longer than that, so
/// a first owner that waited for the next round would mostly be late. (The
/// sync's `--interval` here is 1 s: this cannot tell every late one apart.)
const REFERENCE_UNOWNED_WINDOW: Duration = Duration::from_secs(5);

/// Creates a tenth of `n` resources (4 at least), half Integrations and half
/// Pipes, with no owner key; adds them to the world's resources (their
/// owner is then checked as every other's: the one the manifest wants) and
/// returns the fingerprint each was created with. Waits until the sync has
/// given each an owner, and says how long each waited; with reference
/// operators, the ones that waited longer than [`REFERENCE_UNOWNED_WINDOW`]
/// are the second part returned. Reference operators select by the owner
/// label and never act on an unowned resource: for them the hazard is only
/// that window. Upstream ones both act on it, and the first owner waits until
/// the handler's phase is stable: no bound, only the figures.
async fn unowned_arrivals(
    w: &mut World,
    scenario: &str,
    n: usize,
) -> anyhow::Result<(BTreeMap<(CamelKind, String), String>, Vec<String>)> {
    let count = (n / 10).max(4);
    let made: Vec<(CamelKind, String, usize)> = (n..n + count)
        .map(|i| {
            let kind = if i.is_multiple_of(2) {
                CamelKind::Integration
            } else {
                CamelKind::Pipe
            };
            (kind, world::resource_name(kind, i), i)
        })
        .collect();
    let mut created_at: BTreeMap<String, Instant> = BTreeMap::new();
    let mut fingerprints = BTreeMap::new();
    for (kind, name, i) in &made {
        created_at.insert(name.clone(), Instant::now());
        let obj = world::api(&w.admin, *kind)
            .create(
                &PostParams::default(),
                &world::unowned_object(*kind, name, *i, w.flavour),
            )
            .await?;
        fingerprints.insert((*kind, name.clone()), world::fingerprint(&obj));
        w.names.push((*kind, name.clone()));
    }
    // How long after its creation each was first seen with an owner.
    let mut assigned: BTreeMap<String, Duration> = BTreeMap::new();
    let deadline = Instant::now() + w.flavour.patience(n);
    while assigned.len() < made.len() {
        if Instant::now() > deadline {
            let waiting: Vec<&str> = made
                .iter()
                .map(|(_, name, _)| name.as_str())
                .filter(|name| !assigned.contains_key(*name))
                .collect();
            anyhow::bail!("unowned after {:?}: {waiting:?}", w.flavour.patience(n));
        }
        for ((_, name), owner) in w.owners().await? {
            if let (Some(_), Some(at)) = (owner, created_at.get(&name)) {
                assigned.entry(name).or_insert_with(|| at.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let late = if w.flavour == Flavour::Reference {
        assigned
            .iter()
            .filter(|(_, waited)| **waited > REFERENCE_UNOWNED_WINDOW)
            .map(|(name, waited)| {
                format!("{name} waited {waited:?} for its first owner, more than {REFERENCE_UNOWNED_WINDOW:?}")
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut waits: Vec<Duration> = assigned.into_values().collect();
    waits.sort();
    eprintln!(
        "chaos: {scenario}: {} unowned resources given an owner within {:.1} s of their creation (median {:.1} s)",
        waits.len(),
        waits.last().copied().unwrap_or_default().as_secs_f64(),
        waits[waits.len() / 2].as_secs_f64()
    );
    Ok((fingerprints, late))
}

/// The table of the note.
pub fn table(outcomes: &[Outcome]) -> String {
    let mut out = String::from(
        "| scenario | resources | time to recover | scenario wall time | writes per move | dual-owner writes | fields lost | Integrations rebuilt | result |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for o in outcomes {
        out.push_str(&o.row());
        out.push('\n');
    }
    out
}

impl Outcome {
    /// This scenario's row of [`table`].
    pub fn row(&self) -> String {
        format!(
            "| {} | {} | {:.1} s | {:.1} min | {:.2} | {} | {} | {} | {} |",
            self.scenario,
            self.resources,
            self.recovery.as_secs_f64(),
            self.wall.as_secs_f64() / 60.0,
            self.writes_per_move,
            self.dual_owner_writes,
            self.fields_lost,
            self.rebuilt,
            if self.problems.is_empty() {
                "pass"
            } else {
                "FAIL"
            }
        )
    }
}

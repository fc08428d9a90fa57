//! The fault matrix at scale: each scenario rolls N Integrations and Pipes
//! between two operators in four steps (half of them from operator-1 to
//! operator-2, the other half the other way) through `reconciler sync` and
//! the operators (the reference ones, or real upstream Camel K ones on
//! `kamel run -x` resources) in a world with a control plane of its own,
//! injects its fault in the middle of step 2, and checks afterwards, from
//! the audit log (from the scenario's start on) and the objects: no
//! dual-owner write, every resource's spec, user labels
//! and user annotations as before (or as a third party last wrote them),
//! every resource with the owner the manifest wants, the rollout `Ready`
//! within the flavour's patience of the fault clearing (`Flavour::patience`:
//! 5 minutes and 0.6 s a resource, 1.5 s with upstream operators), no
//! handoff request left.
//!
//! `cargo test` runs the reduced matrix (100 resources, the quickest faults),
//! whose scenarios take turns in one world per flavour, each rolling back
//! from where the one before left it: half of a scenario's time at 100 is
//! building its world. `make chaos` runs the whole one, each scenario in a
//! world of its own, so that none inherits another's outage or leftovers
//! (a throttle stays in place, a standby leads); `CHAOS_WORLDS=own` or
//! `shared` says otherwise. `CHAOS_RESOURCES` (default 100),
//! `CHAOS_SCENARIOS` (`quick`, the default, or `all`), `CHAOS_OPERATORS`
//! (`reference`, `upstream`, or both, the default; `CHAOS_ONLY=etcd,Git`
//! keeps the scenarios whose name contains one of the words; `CHAOS_PARALLEL`
//! (default 2) worlds run at once; `CHAOS_KEEP=1` keeps the state directory of
//! every scenario, not only of failed ones). It prints the table of the figures and fails when
//! any scenario does.

#[path = "../support/mod.rs"]
mod support;

mod rebuild;
mod scenarios;
mod world;

use std::process::ExitCode;
use std::time::Duration;

use futures::StreamExt;
use scenarios::Fault;
use world::Flavour;

fn main() -> ExitCode {
    let resources: usize = std::env::var("CHAOS_RESOURCES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let all = std::env::var("CHAOS_SCENARIOS").as_deref() == Ok("all");
    let faults: Vec<Fault> = if all {
        // Longest first, so that the last worlds to start are short ones
        // (with upstream operators at 1,000: 32 min throttled, 31 the third
        // party, 28 etcd, ..., 14 the rewritten history).
        vec![
            Fault::Throttled,
            Fault::ThirdPartyWriter(Duration::from_secs(20)),
            Fault::EtcdPause(Duration::from_secs(20)),
            Fault::OperatorsRestart,
            Fault::ApiServerRestart,
            Fault::OperatorCut(Duration::from_secs(15)),
            Fault::DeleteRecreate,
            Fault::GitHang(Duration::from_secs(45)),
            Fault::ReconcilerCut(Duration::from_secs(20)),
            Fault::ManifestEdit,
            Fault::UnownedArrivals,
            Fault::GitRewrite,
        ]
    } else {
        vec![
            Fault::ApiServerRestart,
            Fault::EtcdPause(Duration::from_secs(5)),
            Fault::ManifestEdit,
        ]
    };
    let flavours = match std::env::var("CHAOS_OPERATORS").as_deref() {
        Ok("reference") => vec![Flavour::Reference],
        Ok("upstream") => vec![Flavour::Upstream],
        _ => vec![Flavour::Reference, Flavour::Upstream],
    };
    // CHAOS_ONLY=<words>[,<words>...]: only the scenarios whose name contains
    // one of them.
    let only = std::env::var("CHAOS_ONLY").unwrap_or_default();
    // CHAOS_WORLDS=own|shared: a world for each scenario, or one for each
    // flavour whose scenarios take turns in it.
    let shared_worlds = match std::env::var("CHAOS_WORLDS").as_deref() {
        Ok("own") => false,
        Ok("shared") => true,
        _ => !all,
    };
    // The worlds, each with the faults it runs in turn.
    let worlds: Vec<(Vec<Fault>, Flavour)> = flavours
        .iter()
        .map(|flavour| {
            let chosen = faults.iter().copied().filter(|fault| {
                let name = scenarios::scenario_name(*fault, *flavour);
                only.split(',').any(|words| name.contains(words))
            });
            (chosen.collect::<Vec<_>>(), *flavour)
        })
        .flat_map(|(chosen, flavour)| {
            scenarios::worlds(chosen, shared_worlds)
                .into_iter()
                .map(move |faults| (faults, flavour))
        })
        .collect();
    // CHAOS_PARALLEL=<n>: n worlds at a time; two keep both cores of a
    // machine of this kind busy.
    let parallel: usize = std::env::var("CHAOS_PARALLEL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
        .max(1);
    // Upstream worlds first: at 1,000 each takes two to four times a reference
    // one's time (its start alone 6 to 23 minutes), so started last they would
    // set the matrix's tail. The index keeps the table in the matrix's order.
    let mut worlds: Vec<_> = worlds.into_iter().enumerate().collect();
    worlds.sort_by_key(|(_, (_, flavour))| *flavour != Flavour::Upstream);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let started = std::time::Instant::now();
    // Each scenario's problems are said as it ends, not after the matrix. A
    // world that ends frees its place for the next at once (unordered: with
    // `buffered`, a world that ended before an older one held its place).
    let mut results: Vec<(usize, Vec<Option<scenarios::Outcome>>)> = runtime.block_on(
        futures::stream::iter(worlds)
            .map(|(index, (faults, flavour))| async move {
                (index, scenarios::run(&faults, flavour, resources).await)
            })
            .buffer_unordered(parallel)
            .collect(),
    );
    // The table in the matrix's order, whatever order the worlds ended in.
    results.sort_by_key(|(index, _)| *index);
    let results: Vec<Option<scenarios::Outcome>> =
        results.into_iter().flat_map(|(_, o)| o).collect();
    let failed = results
        .iter()
        .any(|r| r.as_ref().is_none_or(|o| !o.problems.is_empty()));
    let outcomes: Vec<_> = results.into_iter().flatten().collect();
    eprintln!(
        "chaos: {} scenarios, {parallel} at a time, in {:.1} min",
        outcomes.len(),
        started.elapsed().as_secs_f64() / 60.0
    );
    println!("{}", scenarios::table(&outcomes));
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

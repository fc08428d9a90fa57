//! The fault matrix at scale: each scenario starts a control plane of its
//! own, rolls N Integrations and Pipes from operator-1 to operator-2 in four
//! steps through `reconciler sync` and two reference operators, injects its
//! fault in the middle of step 2, and checks afterwards, from the audit log
//! and the objects: no dual-owner write, every resource's spec, user labels
//! and user annotations as before (or as a third party last wrote them),
//! every resource with the owner the manifest wants, the rollout `Ready`
//! within 10 minutes of the fault clearing, no handoff request left.
//!
//! `cargo test` runs the reduced matrix (100 resources, the quickest faults);
//! `make chaos` the whole one: `CHAOS_RESOURCES` (default 100) and
//! `CHAOS_SCENARIOS` (`quick`, the default, or `all`; `CHAOS_ONLY=etcd` keeps
//! the scenarios whose name contains it). It prints the table
//! of the figures and fails when any scenario does.

#[path = "../support/mod.rs"]
mod support;

mod proxy;
mod scenarios;
mod world;

use std::process::ExitCode;
use std::time::Duration;

use scenarios::Fault;

fn main() -> ExitCode {
    let resources: usize = std::env::var("CHAOS_RESOURCES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let all = std::env::var("CHAOS_SCENARIOS").as_deref() == Ok("all");
    let faults: Vec<Fault> = if all {
        vec![
            Fault::ApiServerRestart,
            Fault::EtcdPause(Duration::from_secs(20)),
            Fault::OperatorsRestart,
            Fault::ThirdPartyWriter(Duration::from_secs(20)),
            Fault::ManifestEdit,
            Fault::DeleteRecreate,
            Fault::GitHang(Duration::from_secs(45)),
            Fault::ReconcilerCut(Duration::from_secs(20)),
            Fault::OperatorCut(Duration::from_secs(15)),
        ]
    } else {
        vec![
            Fault::ApiServerRestart,
            Fault::EtcdPause(Duration::from_secs(5)),
            Fault::ManifestEdit,
        ]
    };
    // CHAOS_ONLY=<words>: only the scenarios whose name contains them.
    let only = std::env::var("CHAOS_ONLY").unwrap_or_default();
    let faults: Vec<Fault> = faults
        .into_iter()
        .filter(|f| f.name().contains(only.as_str()))
        .collect();
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let mut outcomes = Vec::new();
    let mut failed = false;
    for fault in faults {
        eprintln!("chaos: {} with {resources} resources", fault.name());
        match runtime.block_on(scenarios::run(fault, resources)) {
            Ok(outcome) => {
                for problem in &outcome.problems {
                    eprintln!("chaos: {}: {problem}", outcome.scenario);
                }
                failed |= !outcome.problems.is_empty();
                outcomes.push(outcome);
            }
            Err(e) => {
                eprintln!("chaos: {}: {e:#}", fault.name());
                failed = true;
            }
        }
    }
    println!("{}", scenarios::table(&outcomes));
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

//! The rollout as the plan foresees it and as the reconciler's status reports it.

use std::time::{Duration, Instant};

use anyhow::bail;
use camelk_reconciler::api::{OperatorAssignment, OperatorAssignmentStatus};
use camelk_reconciler::camel_k::CamelKind;
use camelk_reconciler::inventory;
use camelk_reconciler::manifest::Manifest;
use camelk_reconciler::plan::restarts::Restart;
use camelk_reconciler::plan::{self, Actual};
use kube::Client;
use kube::api::Api;

use crate::resources::{counts, owners};
use crate::{ASSIGNMENT, BRANCH, CONTROL};

pub(crate) async fn assignment_status(
    admin: &Client,
) -> anyhow::Result<Option<OperatorAssignmentStatus>> {
    let api: Api<OperatorAssignment> = Api::namespaced(admin.clone(), CONTROL);
    Ok(api.get_opt(ASSIGNMENT).await?.and_then(|o| o.status))
}

/// The moves `plan --base --head` shows, computed by the same library
/// calls, with its restart forecast.
pub(crate) async fn planned_moves(
    admin: &Client,
    base: &str,
    head: &str,
) -> anyhow::Result<(Vec<(CamelKind, String, String, String)>, Vec<Restart>)> {
    let base = Manifest::parse("operator-assignment.yaml@main", base.to_string())?;
    let head = Manifest::parse(
        &format!("operator-assignment.yaml@{BRANCH}"),
        head.to_string(),
    )?;
    let kinds = [CamelKind::Integration, CamelKind::Pipe];
    let inventory = inventory::read(admin, &kinds, None).await?.inventory;
    let mut planned = plan::plan(
        &head.assignment.spec,
        Actual::Manifest(&base.assignment.spec),
        &inventory,
    );
    plan::read_restart_forecast(admin, &mut planned).await?;
    let moves = planned
        .moves()
        .map(|m| {
            (
                m.resource.kind,
                m.resource.name.clone(),
                m.from.to_string(),
                m.to.to_string(),
            )
        })
        .collect();
    Ok((moves, planned.restarts))
}

/// Shows the rollout as the status reports it, until `rev` is applied.
pub(crate) async fn progress(
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

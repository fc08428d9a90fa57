//! `kubectl camelk sync [NAME] [--wait]`: asks `reconciler sync` for a round
//! now, as `flux reconcile` does, and optionally follows it to its end.
//!
//! The request is the annotation `camelk.dev/reconcile-requested-at` set to
//! a fresh timestamp; the reconciler wakes on the change and, when the round
//! ends (applied, paused, invalid or suspended), copies the value to
//! `status.lastHandledReconcileAt`. That receipt is what `--wait` waits for,
//! so an old Ready condition is never mistaken for the answer.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use camelk_reconciler::api::RECONCILE_REQUEST_ANNOTATION;
use camelk_reconciler::api::{OperatorAssignment, OperatorAssignmentStatus};
use camelk_reconciler::source::short_sha;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::cli::{Cli, SyncArgs};
use crate::render;

/// How often --wait reads the object.
const POLL: Duration = Duration::from_millis(500);

pub async fn run(cli: &Cli, args: &SyncArgs) -> anyhow::Result<ExitCode> {
    let (client, default_ns) = super::cluster(cli).await?;
    super::require_crds(&client, &super::ASSIGNMENT_CRDS, &[]).await?;
    let ns = cli.namespace.clone().unwrap_or(default_ns);
    let api: Api<OperatorAssignment> = Api::namespaced(client, &ns);
    let names = super::live::named_or_all(&api, &ns, args.name.as_deref()).await?;
    let token = k8s_openapi::jiff::Timestamp::now().to_string();
    let patch = Patch::Merge(json!({
        "metadata": { "annotations": { RECONCILE_REQUEST_ANNOTATION: token } }
    }));
    for name in &names {
        api.patch(name, &PatchParams::default(), &patch)
            .await
            .with_context(|| format!("requesting a sync of OperatorAssignment {ns}/{name}"))?;
        if !cli.output.is_structured() {
            println!("operatorassignment {ns}/{name} sync requested");
        }
    }
    if !args.wait {
        return Ok(ExitCode::SUCCESS);
    }
    let deadline = Instant::now() + args.timeout;
    let mut results = Vec::new();
    for name in &names {
        results.push(follow(&api, &ns, name, &token, deadline).await?);
    }
    if cli.output.is_structured() {
        let json: Vec<serde_json::Value> = results.iter().map(Outcome::to_json).collect();
        print!("{}", render::structured(&json, cli.output));
    } else {
        for r in &results {
            println!(
                "operatorassignment {ns}/{} {}: {}",
                r.name, r.outcome, r.message
            );
        }
    }
    // As `flux reconcile`: a suspended object did not sync.
    let all_good = results.iter().all(|r| r.outcome == "synced");
    Ok(if all_good {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// How one requested sync ended.
struct Outcome {
    name: String,
    /// `synced`, `suspended` or `failed`.
    outcome: &'static str,
    message: String,
    revision: Option<String>,
}

impl Outcome {
    fn to_json(&self) -> serde_json::Value {
        json!({
            "name": self.name,
            "outcome": self.outcome,
            "message": self.message,
            "lastAppliedRevision": self.revision,
        })
    }
}

/// Reads `name` until the reconciler has handled `token`, printing each new
/// stage of the rollout on stderr.
async fn follow(
    api: &Api<OperatorAssignment>,
    ns: &str,
    name: &str,
    token: &str,
    deadline: Instant,
) -> anyhow::Result<Outcome> {
    let mut last_progress = String::new();
    loop {
        let object = api
            .get(name)
            .await
            .with_context(|| format!("reading OperatorAssignment {ns}/{name}"))?;
        let status = object.status.clone().unwrap_or_default();
        if status.last_handled_reconcile_at.as_deref() == Some(token) {
            return Ok(outcome(name, &object, &status));
        }
        let progress = progress(&status);
        if !progress.is_empty() && progress != last_progress {
            eprintln!("{ns}/{name}: {progress}");
            last_progress = progress;
        }
        if Instant::now() >= deadline {
            return Ok(Outcome {
                name: name.into(),
                outcome: "failed",
                message: format!(
                    "timed out: the reconciler has not handled the request yet (is `reconciler sync` running for namespace {ns}?)"
                ),
                revision: None,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The rollout's stage, as a line for people ("" before any).
fn progress(status: &OperatorAssignmentStatus) -> String {
    match &status.rollout {
        Some(r) if r.state != "Complete" => format!(
            "revision {} step {}/{} {}{}",
            short_sha(&r.revision),
            r.current_step,
            r.total_steps,
            r.state,
            if r.message.is_empty() {
                String::new()
            } else {
                format!(": {}", r.message)
            }
        ),
        _ => String::new(),
    }
}

fn outcome(name: &str, object: &OperatorAssignment, status: &OperatorAssignmentStatus) -> Outcome {
    let condition = |type_: &str| status.conditions.iter().find(|c| c.type_ == type_);
    let suspended = camelk_reconciler::api::is_suspended(object);
    let revision = status.last_applied_revision.clone();
    if suspended {
        return Outcome {
            name: name.into(),
            outcome: "suspended",
            message: "suspended: nothing was done (kubectl camelk resume)".into(),
            revision,
        };
    }
    match condition("Ready") {
        Some(ready) if ready.status == "True" => Outcome {
            name: name.into(),
            outcome: "synced",
            message: ready.message.clone(),
            revision,
        },
        Some(ready) => Outcome {
            name: name.into(),
            outcome: "failed",
            message: format!("{}: {}", ready.reason, ready.message),
            revision,
        },
        None => Outcome {
            name: name.into(),
            outcome: "failed",
            message: "no Ready condition reported".into(),
            revision,
        },
    }
}

//! `kubectl camelk sync [NAME] [--wait]`: asks `reconciler sync` for a round
//! now, as `flux reconcile` does, and optionally follows it to its end.
//!
//! The request is the annotation `camelk.dev/reconcile-requested-at` set to
//! a fresh timestamp; the reconciler wakes on the change and, when the round
//! ends (applied, paused, invalid or suspended), copies the value to
//! `status.lastHandledReconcileAt`. That receipt is what `--wait` waits for,
//! so an old Ready condition is never mistaken for the answer.
//!
//! `--wait` watches the object from the version the request's own write
//! returned (a watch on its name, so it needs `watch` on
//! OperatorAssignments): it sees every change after the request, even a
//! whole rollout that ends before a fresh read could have been made.

use std::process::ExitCode;

use anyhow::Context;
use camelk_reconciler::api::RECONCILE_REQUEST_ANNOTATION;
use camelk_reconciler::api::{OperatorAssignment, OperatorAssignmentStatus};
use camelk_reconciler::source::short_sha;
use futures::{StreamExt, TryStreamExt};
use kube::ResourceExt;
use kube::api::{Api, Patch, WatchEvent, WatchParams};
use serde_json::json;
use tokio::time::Instant;

use crate::cli::{Cli, SyncArgs};
use crate::render;

pub async fn run(cli: &Cli, args: &SyncArgs) -> anyhow::Result<ExitCode> {
    let (client, default_ns) = super::cluster(cli).await?;
    super::require_crds(&client, &super::ASSIGNMENT_CRDS, &[]).await?;
    let ns = cli.namespace.clone().unwrap_or(default_ns);
    let api: Api<OperatorAssignment> = Api::namespaced(client, &ns);
    let names = super::assignments::named_or_all(&api, &ns, args.name.as_deref()).await?;
    let token = k8s_openapi::jiff::Timestamp::now().to_string();
    let patch = Patch::Merge(json!({
        "metadata": { "annotations": { RECONCILE_REQUEST_ANNOTATION: token } }
    }));
    // Each request's own version: where following it starts.
    let mut requested = Vec::new();
    for name in &names {
        let written = api
            .patch(name, &super::plugin_patch(), &patch)
            .await
            .with_context(|| format!("requesting a sync of OperatorAssignment {ns}/{name}"))?;
        if !cli.output.is_structured() {
            println!("operatorassignment {ns}/{name} sync requested");
        }
        requested.push((name, written.resource_version().unwrap_or_default()));
    }
    if !args.wait {
        return Ok(ExitCode::SUCCESS);
    }
    let deadline = Instant::now() + args.timeout;
    let mut results = Vec::new();
    for (name, version) in requested {
        results.push(follow(&api, &ns, name, &token, version, deadline).await?);
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

/// Follows `name` from `version` until the reconciler has handled `token`;
/// at `deadline`, reads it once more and says it timed out unless that read
/// shows the answer.
async fn follow(
    api: &Api<OperatorAssignment>,
    ns: &str,
    name: &str,
    token: &str,
    version: String,
    deadline: Instant,
) -> anyhow::Result<Outcome> {
    let reading = || format!("reading OperatorAssignment {ns}/{name}");
    let watched =
        tokio::time::timeout_at(deadline, until_handled(api, ns, name, token, version)).await;
    let object = match watched {
        Ok(answer) => answer?
            .with_context(|| format!("OperatorAssignment {ns}/{name} was deleted while waiting"))?,
        Err(_elapsed) => {
            let object = api.get(name).await.with_context(reading)?;
            if !object
                .status
                .as_ref()
                .is_some_and(|status| handled(status, token))
            {
                return Ok(Outcome {
                    name: name.into(),
                    outcome: "failed",
                    message: format!(
                        "timed out: the reconciler has not handled the request yet (is `reconciler sync` running for namespace {ns}?)"
                    ),
                    revision: None,
                });
            }
            object
        }
    };
    let status = object.status.clone().unwrap_or_default();
    Ok(outcome(name, &object, &status))
}

/// Watches `name` from `version` until the reconciler has handled `token`,
/// printing each new stage of the rollout on stderr; `None` if the object
/// is deleted first.
async fn until_handled(
    api: &Api<OperatorAssignment>,
    ns: &str,
    name: &str,
    token: &str,
    mut version: String,
) -> anyhow::Result<Option<OperatorAssignment>> {
    let watching = || format!("watching OperatorAssignment {ns}/{name}");
    let params = WatchParams::default().fields(&format!("metadata.name={name}"));
    let mut shown = String::new();
    // A watch ends on the server's timeout; the next goes on from the last
    // version seen.
    loop {
        let mut stream = api
            .watch(&params, &version)
            .await
            .with_context(watching)?
            .boxed();
        while let Some(event) = stream.try_next().await.with_context(watching)? {
            let object = match event {
                WatchEvent::Added(o) | WatchEvent::Modified(o) => o,
                WatchEvent::Deleted(_) => return Ok(None),
                WatchEvent::Bookmark(b) => {
                    version = b.metadata.resource_version;
                    continue;
                }
                // Too old to go on from (compacted): what it is now.
                WatchEvent::Error(status) if status.code == 410 => api
                    .get(name)
                    .await
                    .with_context(|| format!("reading OperatorAssignment {ns}/{name}"))?,
                WatchEvent::Error(status) => {
                    anyhow::bail!(
                        "watching OperatorAssignment {ns}/{name}: {}",
                        status.message
                    )
                }
            };
            version = object.resource_version().unwrap_or_default();
            match seen(&object, token, &shown) {
                Seen::Answered => return Ok(Some(object)),
                Seen::NewStage(stage) => {
                    eprintln!("{ns}/{name}: {stage}");
                    shown = stage;
                }
                Seen::Unchanged => {}
            }
        }
    }
}

/// What one version of the object, as the watch sees it, tells `--wait`.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    /// The reconciler has handled the request.
    Answered,
    /// Not yet; the rollout is at a stage not shown yet.
    NewStage(String),
    /// Not yet, and nothing new to show.
    Unchanged,
}

/// Reads `object` for the answer to `token`, given the stage last `shown`.
fn seen(object: &OperatorAssignment, token: &str, shown: &str) -> Seen {
    let Some(status) = &object.status else {
        return Seen::Unchanged;
    };
    if handled(status, token) {
        return Seen::Answered;
    }
    let stage = progress(status);
    if stage.is_empty() || stage == shown {
        Seen::Unchanged
    } else {
        Seen::NewStage(stage)
    }
}

/// Whether the reconciler has answered the request `token`.
fn handled(status: &OperatorAssignmentStatus, token: &str) -> bool {
    status.last_handled_reconcile_at.as_deref() == Some(token)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn object(status: serde_json::Value) -> OperatorAssignment {
        serde_json::from_value(json!({
            "apiVersion": "camelk.dev/v1alpha1",
            "kind": "OperatorAssignment",
            "metadata": { "name": "shop", "namespace": "camel-k" },
            "spec": {
                "operators": [{ "id": "operator-1", "namespace": "camel-k" }],
                "defaultOperator": "operator-1"
            },
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn the_wait_ends_on_its_own_receipt_and_shows_each_stage_once() {
        let rollout = json!({
            "revision": "0123456789abcdef", "totalSteps": 2, "currentStep": 1,
            "completedSteps": 0, "state": "Progressing", "message": "moving 2",
        });
        let stage = "revision 0123456789ab step 1/2 Progressing: moving 2";
        let at_step_one = object(json!({ "lastHandledReconcileAt": "old", "rollout": rollout }));
        assert_eq!(seen(&at_step_one, "new", ""), Seen::NewStage(stage.into()));
        assert_eq!(seen(&at_step_one, "new", stage), Seen::Unchanged);
        // The receipt of an older request answered that one, not this one.
        assert_eq!(seen(&at_step_one, "old", stage), Seen::Answered);
        let fresh = object(serde_json::Value::Null);
        assert_eq!(seen(&fresh, "new", ""), Seen::Unchanged);
    }
}

//! `kubectl camelk approve [NAME] --step N [--revision REV]`: lets a rollout
//! step that waits for approval (`rollout.approval.steps`) start.
//!
//! It creates a `RolloutApproval` naming the assignment, the revision and
//! the step the rollout waits on (as its status says), and the approver as
//! the API server knows them (a SelfSubjectReview); the shipped admission
//! policy refuses any other approver name. What it refuses:
//! - a step other than the one the rollout waits on (an approval is for
//!   what its approver saw, not for a later step);
//! - `--revision` other than the revision rolling out (an older one, say);
//! - a rollout that waits for nothing.
//!
//! The reconciler takes only an approval of its revision and step, so one
//! created just before a new revision supersedes the rollout lets nothing of
//! the new revision start.

use anyhow::{Context, bail};
use camelk_reconciler::api::{
    OperatorAssignment, RolloutApproval, RolloutApprovalSpec, RolloutState,
};
use camelk_reconciler::source::short_sha;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::cli::{ApproveArgs, Cli};
use crate::render;

pub async fn run(cli: &Cli, args: &ApproveArgs) -> anyhow::Result<()> {
    let (client, default_ns) = super::cluster(cli).await?;
    super::require_crds(&client, &super::ASSIGNMENT_CRDS, &[]).await?;
    let ns = cli.namespace.clone().unwrap_or(default_ns);
    let assignments: Api<OperatorAssignment> = Api::namespaced(client.clone(), &ns);
    let name = match &args.name {
        Some(name) => name.clone(),
        None => only_one(
            super::assignments::named_or_all(&assignments, &ns, None).await?,
            &ns,
        )?,
    };
    let object = assignments
        .get(&name)
        .await
        .with_context(|| format!("reading OperatorAssignment {ns}/{name}"))?;
    let revision = waiting_revision(&object, &ns, &name, args)?;
    let approver = whoami(&client).await?;
    let approval = RolloutApproval::new(
        &RolloutApproval::name_for(&name, &revision, args.step),
        RolloutApprovalSpec {
            assignment: name.clone(),
            revision: revision.clone(),
            step: args.step,
            approver: approver.clone(),
        },
    );
    let approvals: Api<RolloutApproval> = Api::namespaced(client, &ns);
    let created = match approvals.create(&PostParams::default(), &approval).await {
        Ok(created) => created,
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let existing = approvals
                .get(&approval.metadata.name.clone().unwrap_or_default())
                .await
                .context("reading the existing approval")?;
            bail!(
                "step {} of revision {} of {ns}/{name} is already approved by {}",
                args.step,
                short_sha(&revision),
                existing.spec.approver
            );
        }
        Err(kube::Error::Api(e)) if e.code == 404 => bail!(
            "the RolloutApproval CRD is not installed: `reconciler crds | kubectl apply --server-side -f -`, or upgrade the Helm chart"
        ),
        Err(e) => {
            return Err(e).with_context(|| {
                format!(
                    "creating a RolloutApproval in {ns} (approving needs `create` on rolloutapprovals: the ClusterRole camelk-rollout-approver)"
                )
            });
        }
    };
    if cli.output.is_structured() {
        let out = json!({
            "name": created.metadata.name,
            "namespace": ns,
            "assignment": name,
            "revision": revision,
            "step": args.step,
            "approver": approver,
        });
        print!("{}", render::structured(&out, cli.output));
    } else {
        println!(
            "rolloutapproval {ns}/{} created: step {} of revision {} approved by {approver}",
            created.metadata.name.unwrap_or_default(),
            args.step,
            short_sha(&revision)
        );
    }
    Ok(())
}

/// The one assignment of the namespace; more need a name.
fn only_one(names: Vec<String>, ns: &str) -> anyhow::Result<String> {
    match <[String; 1]>::try_from(names) {
        Ok([name]) => Ok(name),
        Err(names) => bail!(
            "{} OperatorAssignments in {ns} ({}): name the one to approve",
            names.len(),
            names.join(", ")
        ),
    }
}

/// The revision whose rollout waits for approval of `args.step`, or why
/// the approval is refused.
fn waiting_revision(
    object: &OperatorAssignment,
    ns: &str,
    name: &str,
    args: &ApproveArgs,
) -> anyhow::Result<String> {
    let Some(rollout) = object.status.as_ref().and_then(|s| s.rollout.as_ref()) else {
        bail!("OperatorAssignment {ns}/{name} has no rollout: nothing waits for approval");
    };
    let short = short_sha(&rollout.revision);
    if let Some(asked) = &args.revision
        && (asked.is_empty() || !rollout.revision.starts_with(asked.as_str()))
    {
        bail!(
            "revision {asked} is not the one rolling out on {ns}/{name} ({short}): an approval is for the revision its approver saw"
        );
    }
    if rollout.state != RolloutState::WaitingForApproval {
        bail!(
            "the rollout of revision {short} on {ns}/{name} does not wait for approval (it is {}, step {} of {})",
            if rollout.state == RolloutState::New {
                "not started"
            } else {
                rollout.state.as_str()
            },
            rollout.current_step,
            rollout.total_steps
        );
    }
    if rollout.current_step != args.step {
        bail!(
            "step {} does not wait for approval: step {} of revision {short} does (kubectl camelk approve {name} --step {} -n {ns})",
            args.step,
            rollout.current_step,
            rollout.current_step
        );
    }
    Ok(rollout.revision.clone())
}

/// The user this client is, as the API server names them.
async fn whoami(client: &kube::Client) -> anyhow::Result<String> {
    let review: SelfSubjectReview = serde_json::from_value(json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "SelfSubjectReview",
    }))
    .context("a SelfSubjectReview")?;
    let api: Api<SelfSubjectReview> = Api::all(client.clone());
    let answer = api
        .create(&PostParams::default(), &review)
        .await
        .context("asking the API server who you are (SelfSubjectReview)")?;
    answer
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .filter(|u| !u.is_empty())
        .context("the API server did not say who you are")
}

#[cfg(test)]
mod tests {
    use super::*;
    use camelk_reconciler::api::{OperatorAssignmentStatus, RolloutStatus};

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    fn waiting(step: u32, state: RolloutState) -> OperatorAssignment {
        let mut o: OperatorAssignment = serde_saphyr::from_str(
            "apiVersion: camelk.dev/v1alpha1\nkind: OperatorAssignment\nmetadata: {name: fleet}\nspec:\n  operators: [{id: operator-1, namespace: x}]\n  defaultOperator: operator-1\n",
        )
        .unwrap();
        o.status = Some(OperatorAssignmentStatus {
            rollout: Some(RolloutStatus {
                revision: SHA.into(),
                total_steps: 3,
                current_step: step,
                state,
                ..Default::default()
            }),
            ..Default::default()
        });
        o
    }

    fn args(step: u32, revision: Option<&str>) -> ApproveArgs {
        ApproveArgs {
            name: None,
            step,
            revision: revision.map(Into::into),
        }
    }

    #[test]
    fn only_the_waiting_step_of_the_rolling_revision_is_approved() {
        let o = waiting(2, RolloutState::WaitingForApproval);
        let ok = |a| waiting_revision(&o, "ns", "fleet", &a);
        assert_eq!(ok(args(2, None)).unwrap(), SHA);
        assert_eq!(ok(args(2, Some("0123456"))).unwrap(), SHA);
        let other_step = ok(args(3, None)).unwrap_err().to_string();
        assert!(
            other_step.contains("step 3 does not wait") && other_step.contains("--step 2"),
            "{other_step}"
        );
        let old = ok(args(2, Some("fedcba9"))).unwrap_err().to_string();
        assert!(old.contains("not the one rolling out"), "{old}");
        assert!(
            ok(args(2, Some(""))).is_err(),
            "an empty revision names none"
        );
    }

    #[test]
    fn a_rollout_that_waits_for_nothing_is_not_approved() {
        let o = waiting(2, RolloutState::WaitingForHealth);
        let e = waiting_revision(&o, "ns", "fleet", &args(2, None))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("does not wait for approval (it is WaitingForHealth"),
            "{e}"
        );
        let mut none = waiting(0, RolloutState::New);
        none.status = None;
        assert!(waiting_revision(&none, "ns", "fleet", &args(1, None)).is_err());
    }
}

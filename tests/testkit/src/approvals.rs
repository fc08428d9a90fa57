//! Approving rollout steps as shipped: the admission policy of
//! `examples/deploy/admission/approval-policy.yaml` (cluster-wide, as a user
//! installs it) and the ClusterRole of `examples/deploy/reconciler/approver.yaml`,
//! bound to a test user in one namespace.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use camelk_reconciler::api::{RolloutApproval, RolloutApprovalSpec};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

const POLICY_FILE: &str = "examples/deploy/admission/approval-policy.yaml";
const ROLE_FILE: &str = "examples/deploy/reconciler/approver.yaml";
const FIELD_MANAGER: &str = "camelk-testkit";

fn shipped(path: &str) -> anyhow::Result<String> {
    let path = crate::workspace_root().join(path);
    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
}

/// Installs the shipped approval policy (idempotent) and returns once the
/// API server refuses, in a dry run in `ns`, an approval that names
/// someone other than its creator.
pub async fn enforce_policy(admin: &Client, ns: &str) -> anyhow::Result<()> {
    let text = shipped(POLICY_FILE)?;
    let mut docs = text.split("\n---\n");
    let (Some(policy), Some(binding), None) = (docs.next(), docs.next(), docs.next()) else {
        bail!("{POLICY_FILE}: expected a policy and its binding");
    };
    let policy: ValidatingAdmissionPolicy = serde_saphyr::from_str(policy)?;
    let binding: ValidatingAdmissionPolicyBinding = serde_saphyr::from_str(binding)?;
    let apply = PatchParams::apply(FIELD_MANAGER).force();
    Api::<ValidatingAdmissionPolicy>::all(admin.clone())
        .patch(&name_of(&policy.metadata)?, &apply, &Patch::Apply(&policy))
        .await
        .context("applying the approval policy")?;
    Api::<ValidatingAdmissionPolicyBinding>::all(admin.clone())
        .patch(
            &name_of(&binding.metadata)?,
            &apply,
            &Patch::Apply(&binding),
        )
        .await
        .context("binding the approval policy")?;

    // The API server loads policies asynchronously.
    let forged = RolloutApproval::new(
        "camelk-approval-probe",
        RolloutApprovalSpec {
            assignment: "probe".into(),
            revision: "probe".into(),
            step: 1,
            approver: "not-the-admin".into(),
        },
    );
    let api: Api<RolloutApproval> = Api::namespaced(admin.clone(), ns);
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match api.create(&dry_run, &forged).await {
            Err(kube::Error::Api(e)) if e.code == 422 || e.code == 403 => return Ok(()),
            Err(e) => return Err(e).context("probing the approval policy"),
            Ok(_) if Instant::now() > deadline => {
                bail!("the approval policy is not enforced after 30 s")
            }
            Ok(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Lets `user` approve rollout steps in `ns`: the shipped ClusterRole
/// (applied, idempotent) bound there to `user`.
pub async fn grant_approver(admin: &Client, ns: &str, user: &str) -> anyhow::Result<()> {
    let role: ClusterRole = serde_saphyr::from_str(&shipped(ROLE_FILE)?)?;
    let role_name = name_of(&role.metadata)?;
    Api::<ClusterRole>::all(admin.clone())
        .patch(
            &role_name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&role),
        )
        .await
        .context("applying the approver ClusterRole")?;
    let binding: RoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": { "name": format!("approver-{user}"), "namespace": ns },
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": role_name,
        },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }],
    }))?;
    Api::<RoleBinding>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &binding)
        .await
        .context("binding the approver role")?;
    Ok(())
}

fn name_of(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> anyhow::Result<String> {
    meta.name.clone().context("a shipped object names itself")
}

//! The owner admission policy of `examples/deploy/admission`, installed as
//! shipped and bound to one namespace, with the local control plane's users
//! as its identities: the policy object is cluster-wide, the bindings (two per
//! namespace: creates and updates, deletes) keep other tests out of its reach.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// Name of the shipped policy.
pub const POLICY: &str = "camelk-operator-id";
/// Name of the identities ConfigMap the binding reads.
pub const IDENTITIES: &str = "camelk-operator-identities";
/// A throwaway Integration, given an owner in dry runs until that is refused.
const PROBE: &str = "camelk-admission-probe";

fn shipped(name: &str) -> anyhow::Result<String> {
    let path = crate::workspace_root()
        .join("examples/deploy/admission")
        .join(name);
    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
}

/// Enforces the policy in `ns`: `coordinators` may change any owner, and each
/// of `operators` (a user named as its operator id) the resources it owns.
/// Returns once the API server refuses a change of owner by `admin`.
pub async fn enforce_in(
    admin: &Client,
    ns: &str,
    coordinators: &[&str],
    operators: &[&str],
) -> anyhow::Result<()> {
    enforce_with_unowned_handler(admin, ns, coordinators, operators, None).await
}

/// [`enforce_in`], with `unowned_handler` (an operator id) as the identities'
/// `unownedHandler`: the one operator that may write resources with no owner.
pub async fn enforce_with_unowned_handler(
    admin: &Client,
    ns: &str,
    coordinators: &[&str],
    operators: &[&str],
    unowned_handler: Option<&str>,
) -> anyhow::Result<()> {
    let policy: ValidatingAdmissionPolicy = serde_saphyr::from_str(&shipped("policy.yaml")?)?;
    Api::<ValidatingAdmissionPolicy>::all(admin.clone())
        .patch(
            POLICY,
            &PatchParams::apply("camelk-testkit").force(),
            &Patch::Apply(&policy),
        )
        .await
        .context("applying the shipped policy")?;

    let mut identities: ConfigMap = serde_saphyr::from_str(&shipped("identities.yaml")?)?;
    identities.metadata.namespace = Some(ns.into());
    let mut data = std::collections::BTreeMap::new();
    data.insert("coordinators".to_string(), coordinators.join(" "));
    data.insert(
        "coordinatorGroups".to_string(),
        "camelk:coordinators".to_string(),
    );
    for id in operators {
        data.insert(format!("operator.{id}"), id.to_string());
    }
    if let Some(id) = unowned_handler {
        data.insert("unownedHandler".to_string(), id.to_string());
    }
    identities.data = Some(data);
    Api::<ConfigMap>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &identities)
        .await
        .context("creating the identities")?;

    // The deletes' binding first: the policy source sees bindings in the
    // order they were created, so once the probe below is refused through
    // the main binding, the deletes' is loaded too.
    for file in ["binding-delete.yaml", "binding.yaml"] {
        let mut binding: Value = serde_saphyr::from_str(&shipped(file)?)?;
        let name = binding["metadata"]["name"]
            .as_str()
            .with_context(|| format!("{file} names its binding"))?
            .to_string();
        binding["metadata"]["name"] = json!(format!("{name}-{ns}"));
        binding["spec"]["paramRef"]["namespace"] = json!(ns);
        binding["spec"]["matchResources"]["namespaceSelector"] =
            json!({ "matchLabels": { "kubernetes.io/metadata.name": ns } });
        let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(binding)?;
        Api::<ValidatingAdmissionPolicyBinding>::all(admin.clone())
            .create(&PostParams::default(), &binding)
            .await
            .with_context(|| format!("binding the policy ({file})"))?;
    }

    wait_enforced(admin, ns).await
}

/// The API server loads policies asynchronously: asks, in dry runs, to give
/// a throwaway Integration an owner as `admin`, until that is refused.
async fn wait_enforced(admin: &Client, ns: &str) -> anyhow::Result<()> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(admin.clone(), ns, &CamelKind::Integration.api_resource());
    let probe: DynamicObject = serde_json::from_value(json!({
        "apiVersion": CamelKind::Integration.api_version(),
        "kind": "Integration",
        "metadata": { "name": PROBE },
    }))?;
    api.create(&PostParams::default(), &probe)
        .await
        .context("creating the probe")?;
    let dry_run = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    let patch = json!({ "metadata": { "labels": { OPERATOR_ID_KEY: "probe" } } });
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match api.patch(PROBE, &dry_run, &Patch::Merge(&patch)).await {
            Ok(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            Ok(_) => bail!("the admission policy did not take effect in {ns} within 30 s"),
            Err(kube::Error::Api(status)) if status.code == 403 => break,
            Err(e) => return Err(e).context("probing the policy"),
        }
    }
    api.delete(PROBE, &DeleteParams::default())
        .await
        .context("deleting the probe")?;
    Ok(())
}

/// Name of the shipped owner-keys MutatingAdmissionPolicy and its binding.
pub const OWNER_KEYS_POLICY: &str = "camelk-owner-keys";
/// A throwaway Integration a GitOps tool's dry runs try to give another owner.
const OWNER_KEYS_PROBE: &str = "camelk-owner-keys-probe";

/// Installs the owner-keys policy of `examples/deploy/owner-keys` as shipped
/// (cluster-wide: it changes only the writes of GitOps tools' field
/// managers). Returns once an apply by `kustomize-controller` in `ns` keeps a
/// probe's owner key.
pub async fn install_owner_keys_policy(admin: &Client, ns: &str) -> anyhow::Result<()> {
    use k8s_openapi::api::admissionregistration::v1::{
        MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding,
    };
    let read = |file: &str| {
        let path = crate::workspace_root()
            .join("examples/deploy/owner-keys")
            .join(file);
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
    };
    let apply = PatchParams::apply("camelk-testkit").force();
    let policy: MutatingAdmissionPolicy = serde_saphyr::from_str(&read("policy.yaml")?)?;
    Api::<MutatingAdmissionPolicy>::all(admin.clone())
        .patch(OWNER_KEYS_POLICY, &apply, &Patch::Apply(&policy))
        .await
        .context("applying the owner-keys policy")?;
    let binding: MutatingAdmissionPolicyBinding = serde_saphyr::from_str(&read("binding.yaml")?)?;
    Api::<MutatingAdmissionPolicyBinding>::all(admin.clone())
        .patch(OWNER_KEYS_POLICY, &apply, &Patch::Apply(&binding))
        .await
        .context("binding the owner-keys policy")?;

    // Loaded asynchronously, as the owner policy: a dry-run apply as a
    // GitOps tool that changes a probe's owner key until the key is kept.
    let api: Api<DynamicObject> =
        Api::namespaced_with(admin.clone(), ns, &CamelKind::Integration.api_resource());
    let probe = |owner: &str| -> anyhow::Result<DynamicObject> {
        Ok(serde_json::from_value(json!({
            "apiVersion": CamelKind::Integration.api_version(),
            "kind": "Integration",
            "metadata": { "name": OWNER_KEYS_PROBE, "annotations": { OPERATOR_ID_KEY: owner } },
        }))?)
    };
    api.create(&PostParams::default(), &probe("probe-a")?)
        .await
        .context("creating the owner-keys probe")?;
    let dry_run = PatchParams {
        dry_run: true,
        ..PatchParams::apply("kustomize-controller").force()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let kept = match api
            .patch(OWNER_KEYS_PROBE, &dry_run, &Patch::Apply(probe("probe-b")?))
            .await
        {
            Ok(o) => {
                o.metadata
                    .annotations
                    .and_then(|a| a.get(OPERATOR_ID_KEY).cloned())
                    == Some("probe-a".into())
            }
            // The owner policy refuses the change while nothing keeps the key.
            Err(kube::Error::Api(status)) if status.code == 403 => false,
            Err(e) => return Err(e).context("probing the owner-keys policy"),
        };
        if kept {
            break;
        }
        if Instant::now() > deadline {
            bail!("the owner-keys policy did not take effect within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    api.delete(OWNER_KEYS_PROBE, &DeleteParams::default())
        .await
        .context("deleting the owner-keys probe")?;
    Ok(())
}

//! The reconciler's RBAC as shipped in `examples/deploy/reconciler/rbac.yaml`,
//! bound to a test identity instead of the shipped ServiceAccount. The
//! end-to-end suites run `reconciler sync` and the handoff coordinator with
//! exactly these rules, so a rule the code needs and the file lacks fails a
//! test rather than a user's rollout.

use anyhow::{Context, bail};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::Value;

const FILE: &str = "examples/deploy/reconciler/rbac.yaml";
const RBAC: &str = include_str!("../../../examples/deploy/reconciler/rbac.yaml");

/// The four objects of the shipped file.
struct Shipped {
    cluster_role: ClusterRole,
    cluster_binding: ClusterRoleBinding,
    role: Role,
    binding: RoleBinding,
}

fn shipped() -> anyhow::Result<Shipped> {
    let (mut cluster_role, mut cluster_binding, mut role, mut binding) = (None, None, None, None);
    for (i, doc) in RBAC.split("\n---\n").enumerate() {
        let value: Value =
            serde_saphyr::from_str(doc).with_context(|| format!("{FILE}: document {}", i + 1))?;
        let kind = value["kind"].as_str().unwrap_or_default().to_string();
        let context = || format!("{FILE}: the {kind}");
        match kind.as_str() {
            "ClusterRole" => {
                cluster_role = Some(serde_json::from_value(value).with_context(context)?)
            }
            "ClusterRoleBinding" => {
                cluster_binding = Some(serde_json::from_value(value).with_context(context)?)
            }
            "Role" => role = Some(serde_json::from_value(value).with_context(context)?),
            "RoleBinding" => binding = Some(serde_json::from_value(value).with_context(context)?),
            other => bail!("{FILE}: unexpected kind {other:?}"),
        }
    }
    match (cluster_role, cluster_binding, role, binding) {
        (Some(cluster_role), Some(cluster_binding), Some(role), Some(binding)) => Ok(Shipped {
            cluster_role,
            cluster_binding,
            role,
            binding,
        }),
        _ => {
            bail!("{FILE}: expected a ClusterRole, a ClusterRoleBinding, a Role and a RoleBinding")
        }
    }
}

fn user(name: &str) -> Vec<Subject> {
    vec![Subject {
        kind: "User".into(),
        name: name.into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        ..Default::default()
    }]
}

/// Binds `identity` instead of the shipped subject, under a name of its own
/// (`<shipped name>-<identity>`): the shipped name stays free for tests that
/// install examples/deploy as it is. Returns the name.
fn bind(
    metadata: &mut ObjectMeta,
    subjects: &mut Option<Vec<Subject>>,
    identity: &str,
) -> anyhow::Result<String> {
    let shipped = metadata.name.as_deref().context("a named binding")?;
    let name = format!("{shipped}-{identity}");
    metadata.name = Some(name.clone());
    *subjects = Some(user(identity));
    Ok(name)
}

fn apply_params() -> PatchParams {
    PatchParams::apply("camelk-testkit").force()
}

/// The cluster-wide half, bound to `identity`: the Camel K resources, handoff
/// Leases, operator locks, Events on moved resources.
pub async fn apply_cluster_wide(admin: &Client, identity: &str) -> anyhow::Result<()> {
    let Shipped {
        cluster_role,
        mut cluster_binding,
        ..
    } = shipped()?;
    let name = cluster_role
        .metadata
        .name
        .clone()
        .context("a named ClusterRole")?;
    Api::<ClusterRole>::all(admin.clone())
        .patch(&name, &apply_params(), &Patch::Apply(&cluster_role))
        .await
        .with_context(|| format!("applying ClusterRole {name}"))?;
    let name = bind(
        &mut cluster_binding.metadata,
        &mut cluster_binding.subjects,
        identity,
    )?;
    Api::<ClusterRoleBinding>::all(admin.clone())
        .patch(&name, &apply_params(), &Patch::Apply(&cluster_binding))
        .await
        .with_context(|| format!("applying ClusterRoleBinding {name}"))?;
    Ok(())
}

/// The half of the sync's own namespace, in `ns` and bound to `identity`: its
/// `OperatorAssignment` and its status, and its lock.
pub async fn apply_in(admin: &Client, identity: &str, ns: &str) -> anyhow::Result<()> {
    let Shipped {
        mut role,
        mut binding,
        ..
    } = shipped()?;
    role.metadata.namespace = Some(ns.into());
    binding.metadata.namespace = Some(ns.into());
    bind(&mut binding.metadata, &mut binding.subjects, identity)?;
    let name = role.metadata.name.clone().context("a named Role")?;
    Api::<Role>::namespaced(admin.clone(), ns)
        .patch(&name, &apply_params(), &Patch::Apply(&role))
        .await
        .with_context(|| format!("applying Role {ns}/{name}"))?;
    let name = binding
        .metadata
        .name
        .clone()
        .context("a named RoleBinding")?;
    Api::<RoleBinding>::namespaced(admin.clone(), ns)
        .patch(&name, &apply_params(), &Patch::Apply(&binding))
        .await
        .with_context(|| format!("applying RoleBinding {ns}/{name}"))?;
    Ok(())
}

/// The RBAC of `--source cluster` as the kustomize Component
/// `examples/deploy/reconciler/source-cluster` ships it, bound to `identity`:
/// its Role in `ns` (in place of [`apply_in`]'s: the object read, never
/// applied, and the snapshot ConfigMap `camel-k-revisions`) and its
/// ClusterRole (the Flux Kustomizations and Argo CD Applications it reads).
pub async fn apply_source_cluster(admin: &Client, identity: &str, ns: &str) -> anyhow::Result<()> {
    const DIR: &str = "examples/deploy/reconciler/source-cluster";
    let read = |file: &str| -> anyhow::Result<Vec<Value>> {
        let path = crate::workspace_root().join(DIR).join(file);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        serde_saphyr::from_multiple(&text).with_context(|| format!("parsing {}", path.display()))
    };
    apply_in(admin, identity, ns).await?;
    for doc in read("role.yaml")?.into_iter().chain(read("rbac.yaml")?) {
        match doc["kind"].as_str().unwrap_or_default() {
            "Role" => {
                let mut role: Role = serde_json::from_value(doc)?;
                role.metadata.namespace = Some(ns.into());
                let name = role.metadata.name.clone().context("a named Role")?;
                Api::<Role>::namespaced(admin.clone(), ns)
                    .patch(&name, &apply_params(), &Patch::Apply(&role))
                    .await
                    .with_context(|| format!("applying Role {ns}/{name}"))?;
            }
            "ClusterRole" => {
                let role: ClusterRole = serde_json::from_value(doc)?;
                let name = role.metadata.name.clone().context("a named ClusterRole")?;
                Api::<ClusterRole>::all(admin.clone())
                    .patch(&name, &apply_params(), &Patch::Apply(&role))
                    .await
                    .with_context(|| format!("applying ClusterRole {name}"))?;
            }
            "ClusterRoleBinding" => {
                let mut binding: ClusterRoleBinding = serde_json::from_value(doc)?;
                let name = bind(&mut binding.metadata, &mut binding.subjects, identity)?;
                Api::<ClusterRoleBinding>::all(admin.clone())
                    .patch(&name, &apply_params(), &Patch::Apply(&binding))
                    .await
                    .with_context(|| format!("applying ClusterRoleBinding {name}"))?;
            }
            other => bail!("{DIR}: unexpected kind {other:?}"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_file_holds_both_halves() {
        let shipped = shipped().unwrap();
        assert_eq!(
            shipped.role.metadata.name,
            Some(shipped.binding.role_ref.name.clone()),
            "the RoleBinding binds the shipped Role"
        );
        assert_eq!(
            shipped.cluster_role.metadata.name,
            Some(shipped.cluster_binding.role_ref.name.clone())
        );
    }
}

//! The reference operator's RBAC as shipped in `examples/test-double-operator/operator/rbac.yaml`
//! (operator-1 watching `camel-apps`, its lock in `camelk-system`), rewritten
//! for another operator id, watched namespace and lock namespace, and bound to
//! the test identity of the operator's id. The end-to-end suites start
//! `reconciler operator` under exactly these rules, so a call the operator
//! makes and the file does not allow fails a test.

use anyhow::{Context, bail};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding, Subject};
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

const FILE: &str = "examples/test-double-operator/operator/rbac.yaml";
const RBAC: &str = include_str!("../../../examples/test-double-operator/operator/rbac.yaml");

/// The names the shipped file is written for.
const SHIPPED_ID: &str = "operator-1";
const SHIPPED_WATCHED: &str = "camel-apps";
const SHIPPED_LOCK_NAMESPACE: &str = "camelk-system";

/// Where operator `id` runs: the namespace it watches and the one of its lock.
pub struct Placement<'a> {
    pub id: &'a str,
    pub watched: &'a str,
    pub lock_namespace: &'a str,
}

impl Placement<'_> {
    fn namespace(&self, shipped: &str) -> anyhow::Result<String> {
        match shipped {
            SHIPPED_WATCHED => Ok(self.watched.into()),
            SHIPPED_LOCK_NAMESPACE => Ok(self.lock_namespace.into()),
            other => bail!(
                "{FILE}: a Role in namespace {other:?}, neither {SHIPPED_WATCHED} nor {SHIPPED_LOCK_NAMESPACE}"
            ),
        }
    }

    /// `camelk-operator-1` → `camelk-<id>`, `operator-1-lock` → `<id>-lock`.
    fn rename(&self, shipped: &str) -> String {
        shipped.replace(SHIPPED_ID, self.id)
    }

    /// Document `i` of the shipped file, read as `K`, named and placed here.
    fn place<K: Resource + DeserializeOwned>(
        &self,
        document: Value,
        i: usize,
    ) -> anyhow::Result<K> {
        let mut object: K = serde_json::from_value(document)
            .with_context(|| format!("{FILE}: document {}", i + 1))?;
        let meta = object.meta_mut();
        meta.namespace = Some(self.namespace(meta.namespace.as_deref().unwrap_or_default())?);
        meta.name = meta.name.as_deref().map(|n| self.rename(n));
        Ok(object)
    }
}

/// The Roles and RoleBindings of the shipped file, for `placement`, each
/// binding's subject the user named as the operator.
fn rewritten(placement: &Placement) -> anyhow::Result<(Vec<Role>, Vec<RoleBinding>)> {
    let (mut roles, mut bindings) = (Vec::new(), Vec::new());
    for (i, doc) in RBAC.split("\n---\n").enumerate() {
        let value: Value =
            serde_saphyr::from_str(doc).with_context(|| format!("{FILE}: document {}", i + 1))?;
        match value["kind"].as_str().unwrap_or_default() {
            "Role" => {
                let mut role: Role = placement.place(value, i)?;
                for rule in role.rules.iter_mut().flatten() {
                    for name in rule.resource_names.iter_mut().flatten() {
                        *name = placement.rename(name);
                    }
                }
                roles.push(role);
            }
            "RoleBinding" => {
                let mut binding: RoleBinding = placement.place(value, i)?;
                binding.role_ref.name = placement.rename(&binding.role_ref.name);
                binding.subjects = Some(vec![Subject {
                    kind: "User".into(),
                    name: placement.id.into(),
                    api_group: Some("rbac.authorization.k8s.io".into()),
                    ..Default::default()
                }]);
                bindings.push(binding);
            }
            other => bail!("{FILE}: unexpected kind {other:?}; the operator gets Roles only"),
        }
    }
    if roles.len() != 2 || bindings.len() != 2 {
        bail!("{FILE}: expected two Roles and two RoleBindings (watched namespace, lock)");
    }
    Ok((roles, bindings))
}

/// Applies the shipped operator RBAC for `placement`; idempotent.
pub async fn apply(admin: &Client, placement: &Placement<'_>) -> anyhow::Result<()> {
    let (roles, bindings) = rewritten(placement)?;
    apply_all(admin, roles).await?;
    apply_all(admin, bindings).await
}

/// Server-side applies each of `objects` (namespaced, named) as the testkit.
async fn apply_all<K>(admin: &Client, objects: Vec<K>) -> anyhow::Result<()>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + Serialize
        + DeserializeOwned,
{
    let params = PatchParams::apply("camelk-testkit").force();
    for object in objects {
        let ns = object.meta().namespace.clone().unwrap_or_default();
        let name = object
            .meta()
            .name
            .clone()
            .with_context(|| format!("a named {}", K::kind(&())))?;
        Api::<K>::namespaced(admin.clone(), &ns)
            .patch(&name, &params, &Patch::Apply(&object))
            .await
            .with_context(|| format!("applying {} {ns}/{name}", K::kind(&())))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_file_is_rewritten_for_another_operator_and_namespaces() {
        let placement = Placement {
            id: "operator-2",
            watched: "shop",
            lock_namespace: "ops",
        };
        let (roles, bindings) = rewritten(&placement).unwrap();
        let names: Vec<_> = roles
            .iter()
            .map(|r| {
                format!(
                    "{}/{}",
                    r.metadata.namespace.as_deref().unwrap(),
                    r.metadata.name.as_deref().unwrap()
                )
            })
            .collect();
        assert_eq!(
            names,
            ["shop/camelk-operator-2", "ops/camelk-operator-2-lock"]
        );
        let lock_rule_names: Vec<_> = roles[1]
            .rules
            .iter()
            .flatten()
            .flat_map(|r| r.resource_names.iter().flatten())
            .collect();
        assert_eq!(lock_rule_names, ["operator-2-lock"]);
        for b in &bindings {
            assert_eq!(b.subjects.as_ref().unwrap()[0].name, "operator-2");
            assert!(b.role_ref.name.starts_with("camelk-operator-2"));
        }
    }
}

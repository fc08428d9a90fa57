//! Who else writes a resource's owner keys.
//!
//! A GitOps tool (Flux's kustomize-controller, Argo CD, Helm, `kubectl
//! apply`) that deploys a Camel K resource from a manifest naming
//! `camel.apache.org/operator.id` sets that key back at its next apply, and
//! so undoes any move. Such a tool is found in the object's `managedFields`:
//! - a server-side applier (operation `Apply`) whose fields hold an owner key;
//! - a client-side applier known by its manager name (operation `Update`:
//!   `kubectl-client-side-apply`, `argocd-controller`, `helm`, ...), whose
//!   fields hold one;
//! - else the `kubectl.kubernetes.io/last-applied-configuration` annotation
//!   of client-side apply, when the configuration it records names a key.
//!
//! The project's own writers ([`is_ours`]) and the Camel K operators (which
//! copy a Pipe's keys onto its Integration) are not appliers.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};
use serde_json::Value;

use super::OPERATOR_ID_KEY;

/// The annotation in which client-side `kubectl apply` (and Argo CD's
/// default sync) records the configuration it applied.
pub(crate) const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Field manager of the reconciler's server-side apply of owner keys that
/// another applier also applies: with it as a co-owner, the keys stay when
/// that applier stops applying them (server-side apply removes a field only
/// once no manager holds it).
pub const CO_OWNER: &str = "camelk-owner-keys";

/// Managers that apply manifests with a client-side patch (operation
/// `Update`), so only their name tells them from a one-off edit.
const CLIENT_SIDE_APPLIERS: [&str; 6] = [
    "kubectl-client-side-apply",
    "argocd-controller",
    "helm",
    "helm-controller",
    "kustomize-controller",
    "kapp",
];

/// Field managers of upstream Camel K operators: they write keys they copy
/// (a Pipe's onto its Integration), which follow the Pipe's owner.
const OPERATORS: [&str; 2] = ["camel-k-operator", "kamel"];

/// Whether `manager` is one of the project's own writers (the handoff, the
/// sync, the plugin, the reference operators, the co-owner).
pub(crate) fn is_ours(manager: &str) -> bool {
    manager.starts_with("camelk-") || manager == "kubectl-camelk"
}

/// One of the two owner keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyMap {
    /// The label `camel.apache.org/operator.id`.
    Label,
    /// The annotation of the same name.
    Annotation,
}

impl KeyMap {
    /// The map's name in `metadata` (`labels`, `annotations`).
    fn name(self) -> &'static str {
        match self {
            KeyMap::Label => "labels",
            KeyMap::Annotation => "annotations",
        }
    }
}

/// The tool that applies the owner key in `map` of `meta`, other than the
/// project's writers and the operators; `None` when no such tool does.
pub(crate) fn owner_key_applier(meta: &ObjectMeta, map: KeyMap) -> Option<String> {
    let entries = meta.managed_fields.as_deref().unwrap_or_default();
    let field_map = format!("f:{}", map.name());
    let foreign = |e: &&ManagedFieldsEntry| {
        let manager = e.manager.as_deref().unwrap_or_default();
        !manager.is_empty()
            && !is_ours(manager)
            && !OPERATORS.contains(&manager)
            && e.subresource.as_deref().unwrap_or_default().is_empty()
    };
    let server_side = entries
        .iter()
        .filter(foreign)
        .filter(|e| e.operation.as_deref() == Some("Apply"));
    let client_side = entries.iter().filter(foreign).filter(|e| {
        e.operation.as_deref() == Some("Update")
            && CLIENT_SIDE_APPLIERS.contains(&e.manager.as_deref().unwrap_or_default())
    });
    if let Some(entry) = server_side
        .chain(client_side)
        .find(|e| holds(e, &field_map, OPERATOR_ID_KEY))
    {
        return entry.manager.clone();
    }
    last_applied_names(meta, map).then(|| {
        entries
            .iter()
            .find(|e| holds(e, "f:annotations", LAST_APPLIED))
            .and_then(|e| e.manager.clone())
            .unwrap_or_else(|| "kubectl apply".to_string())
    })
}

/// Whether the project's co-owner ([`CO_OWNER`]) holds every owner key
/// `meta` carries (at least one), so that they outlive any other applier's
/// stopping to apply them.
pub fn keys_co_owned(meta: &ObjectMeta) -> bool {
    let has = |map: &Option<std::collections::BTreeMap<String, String>>| {
        map.as_ref()
            .is_some_and(|m| m.contains_key(OPERATOR_ID_KEY))
    };
    let wanted: Vec<&str> = [
        (has(&meta.labels), "f:labels"),
        (has(&meta.annotations), "f:annotations"),
    ]
    .into_iter()
    .filter_map(|(present, map)| present.then_some(map))
    .collect();
    !wanted.is_empty()
        && meta.managed_fields.iter().flatten().any(|e| {
            e.manager.as_deref() == Some(CO_OWNER)
                && wanted.iter().all(|map| holds(e, map, OPERATOR_ID_KEY))
        })
}

/// Whether `entry`'s field set holds an owner key (label or annotation).
pub(crate) fn holds_owner_key(entry: &ManagedFieldsEntry) -> bool {
    [KeyMap::Label, KeyMap::Annotation]
        .into_iter()
        .any(|map| holds(entry, &format!("f:{}", map.name()), OPERATOR_ID_KEY))
}

/// Whether `entry`'s field set holds `metadata.<map>.<key>`.
fn holds(entry: &ManagedFieldsEntry, map: &str, key: &str) -> bool {
    entry
        .fields_v1
        .as_ref()
        .and_then(|f| f.0.get("f:metadata"))
        .and_then(|m| m.get(map))
        .is_some_and(|m| m.get(format!("f:{key}")).is_some())
}

/// Whether the last-applied configuration (client-side apply) sets the
/// owner key in `map`.
fn last_applied_names(meta: &ObjectMeta, map: KeyMap) -> bool {
    let Some(text) = meta.annotations.as_ref().and_then(|a| a.get(LAST_APPLIED)) else {
        return false;
    };
    let Ok(applied) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    applied["metadata"][map.name()]
        .get(OPERATOR_ID_KEY)
        .is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1;
    use serde_json::json;

    fn entry(manager: &str, operation: &str, fields: Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some(operation.into()),
            fields_v1: Some(FieldsV1(fields)),
            ..Default::default()
        }
    }

    fn annotation_fields(key: &str) -> Value {
        json!({ "f:metadata": { "f:annotations": { format!("f:{key}"): {} } } })
    }

    fn label_fields() -> Value {
        json!({ "f:metadata": { "f:labels": { format!("f:{OPERATOR_ID_KEY}"): {} } } })
    }

    fn meta(entries: Vec<ManagedFieldsEntry>) -> ObjectMeta {
        ObjectMeta {
            managed_fields: Some(entries),
            ..Default::default()
        }
    }

    #[test]
    fn a_server_side_applier_of_a_key_is_named() {
        let m = meta(vec![
            entry("camelk-handoff", "Update", label_fields()),
            entry(
                "kustomize-controller",
                "Apply",
                annotation_fields(OPERATOR_ID_KEY),
            ),
        ]);
        assert_eq!(
            owner_key_applier(&m, KeyMap::Annotation).as_deref(),
            Some("kustomize-controller")
        );
        assert_eq!(
            owner_key_applier(&m, KeyMap::Label),
            None,
            "the label is ours"
        );
    }

    #[test]
    fn our_writers_operators_and_one_off_edits_are_not_appliers() {
        let m = meta(vec![
            entry("camelk-handoff", "Update", label_fields()),
            entry(CO_OWNER, "Apply", annotation_fields(OPERATOR_ID_KEY)),
            entry(
                "camel-k-operator",
                "Apply",
                annotation_fields(OPERATOR_ID_KEY),
            ),
            entry(
                "kubectl-annotate",
                "Update",
                annotation_fields(OPERATOR_ID_KEY),
            ),
            // An applier that does not hold a key does not apply one.
            entry("kustomize-controller", "Apply", annotation_fields("app")),
        ]);
        assert_eq!(owner_key_applier(&m, KeyMap::Annotation), None);
        assert_eq!(owner_key_applier(&m, KeyMap::Label), None);
    }

    #[test]
    fn a_known_client_side_applier_is_named() {
        let m = meta(vec![entry("argocd-controller", "Update", label_fields())]);
        assert_eq!(
            owner_key_applier(&m, KeyMap::Label).as_deref(),
            Some("argocd-controller")
        );
        assert_eq!(owner_key_applier(&m, KeyMap::Annotation), None);
    }

    #[test]
    fn a_last_applied_configuration_naming_a_key_is_an_applier() {
        let applied = json!({ "metadata": { "annotations": { OPERATOR_ID_KEY: "operator-1" } } });
        let mut m = meta(vec![entry(
            "kubectl-edit",
            "Update",
            annotation_fields(LAST_APPLIED),
        )]);
        m.annotations = Some([(LAST_APPLIED.to_string(), applied.to_string())].into());
        let applier = |m: &ObjectMeta| owner_key_applier(m, KeyMap::Annotation);
        assert_eq!(applier(&m).as_deref(), Some("kubectl-edit"));
        assert_eq!(owner_key_applier(&m, KeyMap::Label), None);
        m.managed_fields = None;
        assert_eq!(applier(&m).as_deref(), Some("kubectl apply"));

        let other = json!({ "metadata": { "annotations": { "app": "x" } } });
        m.annotations = Some([(LAST_APPLIED.to_string(), other.to_string())].into());
        assert_eq!(applier(&m), None);
    }

    #[test]
    fn co_ownership_needs_every_key_the_object_carries() {
        let keys = |label: bool, annotation: bool| {
            let key = || [(OPERATOR_ID_KEY.to_string(), "operator-1".to_string())].into();
            ObjectMeta {
                labels: label.then(key),
                annotations: annotation.then(key),
                ..Default::default()
            }
        };
        let both = json!({ "f:metadata": {
            "f:labels": { format!("f:{OPERATOR_ID_KEY}"): {} },
            "f:annotations": { format!("f:{OPERATOR_ID_KEY}"): {} },
        } });
        let with = |mut m: ObjectMeta, fields: Value| {
            m.managed_fields = Some(vec![entry(CO_OWNER, "Apply", fields)]);
            m
        };
        assert!(keys_co_owned(&with(keys(true, true), both)));
        assert!(!keys_co_owned(&with(keys(true, true), label_fields())));
        // As `kamel` creates it: the annotation alone, co-owned alone.
        let annotation = annotation_fields(OPERATOR_ID_KEY);
        assert!(keys_co_owned(&with(keys(false, true), annotation)));
        assert!(!keys_co_owned(&keys(true, true)));
        assert!(!keys_co_owned(&with(keys(false, false), both_fields())));
    }

    fn both_fields() -> Value {
        json!({ "f:metadata": {
            "f:labels": { format!("f:{OPERATOR_ID_KEY}"): {} },
            "f:annotations": { format!("f:{OPERATOR_ID_KEY}"): {} },
        } })
    }
}

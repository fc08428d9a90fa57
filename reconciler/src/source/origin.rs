//! Which Git revision a GitOps tool applied the `OperatorAssignment` object
//! from, for the migration history of `--source cluster`.
//!
//! - Flux labels what a Kustomization applies with
//!   `kustomize.toolkit.fluxcd.io/name` and `.../namespace`; the
//!   Kustomization's `status.lastAttemptedRevision` (`main@sha1:<sha>`)
//!   names the revision it is applying (`lastAppliedRevision` changes only
//!   once what it applied is ready: with `wait`, after the migration).
//! - Argo CD marks what an Application syncs with the annotation
//!   `argocd.argoproj.io/tracking-id` (`<app>:<group>/<kind>:<ns>/<name>`,
//!   `<namespace>_<app>` for an Application outside Argo CD's namespace) or
//!   the label `app.kubernetes.io/instance`; the Application's
//!   `status.sync.revision` names the revision.
//!
//! What the tool reports when the sync first fetches a generation: a tool
//! that applied two commits in a row between two fetches is reported at the
//! later one. A tool object the reconciler may not read (403) or that does
//! not exist records nothing; the history is never worse for it.

use kube::api::{Api, ApiResource, DynamicObject};
use kube::{Client, ResourceExt};

/// Where an applied object came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The tool's object that applied it (`Kustomization flux-system/apps`).
    pub applied_by: String,
    /// The revision that object reports (`main@sha1:3f2c…`).
    pub revision: String,
}

const FLUX_NAME: &str = "kustomize.toolkit.fluxcd.io/name";
const FLUX_NAMESPACE: &str = "kustomize.toolkit.fluxcd.io/namespace";
const ARGO_TRACKING: &str = "argocd.argoproj.io/tracking-id";
const ARGO_INSTANCE: &str = "app.kubernetes.io/instance";
/// Where Argo CD keeps its Applications unless a tracking id says otherwise.
const ARGO_NAMESPACE: &str = "argocd";

/// The tool object that applied `object`, as (resource, namespace, name),
/// from its labels and annotations.
fn applier_of(object: &DynamicObject) -> Option<(ApiResource, String, String)> {
    let labels = object.labels();
    if let (Some(name), Some(namespace)) = (labels.get(FLUX_NAME), labels.get(FLUX_NAMESPACE)) {
        return Some((kustomization(), namespace.clone(), name.clone()));
    }
    let app = object
        .annotations()
        .get(ARGO_TRACKING)
        .and_then(|id| id.split(':').next())
        .or_else(|| labels.get(ARGO_INSTANCE).map(String::as_str))
        .filter(|app| !app.is_empty())?;
    let (namespace, name) = app.split_once('_').unwrap_or((ARGO_NAMESPACE, app));
    Some((application(), namespace.to_string(), name.to_string()))
}

fn kustomization() -> ApiResource {
    ApiResource {
        group: "kustomize.toolkit.fluxcd.io".into(),
        version: "v1".into(),
        api_version: "kustomize.toolkit.fluxcd.io/v1".into(),
        kind: "Kustomization".into(),
        plural: "kustomizations".into(),
    }
}

fn application() -> ApiResource {
    ApiResource {
        group: "argoproj.io".into(),
        version: "v1alpha1".into(),
        api_version: "argoproj.io/v1alpha1".into(),
        kind: "Application".into(),
        plural: "applications".into(),
    }
}

/// The revision `tool` reports having applied, from its status.
fn reported_revision(tool: &DynamicObject, kind: &str) -> Option<String> {
    let status = &tool.data["status"];
    // Flux records lastAppliedRevision only once what it applied is ready,
    // which for this object means once the migration is done: the revision
    // it is applying is lastAttemptedRevision.
    let revision = match kind {
        "Kustomization" => &status["lastAttemptedRevision"],
        _ => &status["sync"]["revision"],
    };
    revision
        .as_str()
        .filter(|r| !r.is_empty())
        .map(str::to_string)
}

/// Where `object` came from, if a Flux Kustomization or an Argo CD
/// Application applied it and says from which revision.
pub(crate) async fn origin(client: &Client, object: &DynamicObject) -> Option<Origin> {
    let (resource, namespace, name) = applier_of(object)?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &resource);
    let tool = match api.get_opt(&name).await {
        Ok(tool) => tool?,
        Err(e) => {
            tracing::debug!(kind = %resource.kind, %namespace, %name, error = %e, "the object's applier is unreadable; its revision is not recorded");
            return None;
        }
    };
    Some(Origin {
        revision: reported_revision(&tool, &resource.kind)?,
        applied_by: format!("{} {namespace}/{name}", resource.kind),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(metadata: serde_json::Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "camelk.dev/v1alpha1", "kind": "OperatorAssignment", "metadata": metadata
        }))
        .unwrap()
    }

    #[test]
    fn flux_and_argo_cd_marks_name_the_object_that_applied_it() {
        let flux = object(json!({ "name": "a", "labels": {
            FLUX_NAME: "apps", FLUX_NAMESPACE: "flux-system" } }));
        let (resource, ns, name) = applier_of(&flux).unwrap();
        assert_eq!(
            (resource.kind.as_str(), ns.as_str(), name.as_str()),
            ("Kustomization", "flux-system", "apps")
        );
        let argo = object(json!({ "name": "a", "annotations": {
            ARGO_TRACKING: "camelk:camelk.dev/OperatorAssignment:camelk-system/a" } }));
        let (resource, ns, name) = applier_of(&argo).unwrap();
        assert_eq!(
            (resource.kind.as_str(), ns.as_str(), name.as_str()),
            ("Application", "argocd", "camelk")
        );
        let elsewhere = object(json!({ "name": "a", "annotations": {
            ARGO_TRACKING: "team-a_camelk:camelk.dev/OperatorAssignment:camelk-system/a" } }));
        assert_eq!(applier_of(&elsewhere).unwrap().1, "team-a");
        let by_label = object(json!({ "name": "a", "labels": { ARGO_INSTANCE: "camelk" } }));
        assert_eq!(applier_of(&by_label).unwrap().2, "camelk");
        assert!(applier_of(&object(json!({ "name": "a" }))).is_none());
    }

    #[test]
    fn the_revision_comes_from_each_tools_status() {
        let kustomization: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": { "name": "apps" },
            "status": { "lastAttemptedRevision": "main@sha1:3f2c",
                        "lastAppliedRevision": "main@sha1:0a1b" } }))
        .unwrap();
        assert_eq!(
            reported_revision(&kustomization, "Kustomization").as_deref(),
            Some("main@sha1:3f2c")
        );
        let application: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": { "name": "camelk" },
            "status": { "sync": { "revision": "9a1b" } } }))
        .unwrap();
        assert_eq!(
            reported_revision(&application, "Application").as_deref(),
            Some("9a1b")
        );
        assert_eq!(reported_revision(&application, "Kustomization"), None);
    }
}

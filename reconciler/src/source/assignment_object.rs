//! The `OperatorAssignment` object in the cluster as a source
//! (`reconciler sync --source cluster --name NAME`): Argo CD, Flux or a person
//! applies the YAML, and the reconciler acts on what the API server holds.
//!
//! Expected flow of [`ClusterSource::fetch`]:
//! 1. get the object (untyped, so a spec the API server accepted but this
//!    version cannot use is reported by validation with a position, not
//!    as a read error);
//! 2. the revision id is `generation-<metadata.generation>`: the API server
//!    bumps it on every spec change and only then, so the id is stable per
//!    spec;
//! 3. the text is the object rendered as a manifest (`apiVersion`, `kind`,
//!    `metadata` name, namespace, labels and annotations, `spec`), and
//!    diagnostics name it `OperatorAssignment/<namespace>/<name>:line:col`;
//! 4. the text is kept in the ConfigMap `<name>-revisions` under its id;
//! 5. the Git revision a Flux Kustomization or an Argo CD Application that
//!    applied the object reports ([`super::origin`]), for the history.
//!
//! # Why a snapshot ConfigMap
//! The sync plans the head against the manifest of
//! `status.lastAppliedRevision` ([`ClusterSource::read_at`]), yet the object
//! only holds its current spec, and the reconciler keeps no local state.
//! The sync alone decides when a revision is applied, so the source does not
//! try to guess it: it keeps every spec it hands out, keyed by revision, in
//! a ConfigMap in the object's namespace, owned by the object (the garbage
//! collector deletes it with the object). It is bounded: the newest
//! [`KEEP`] revisions plus the object's current `lastAppliedRevision`, which
//! therefore is always readable, however many spec changes arrive while a
//! rollout runs. A snapshot of another object of the same name (deleted and
//! created again, another uid) is never read: the ConfigMap is started anew.
//! Steady state costs two GETs per fetch; the ConfigMap is written only
//! when the generation (or its rendering) changes.
//!
//! # Guarantees
//! - Nothing but that ConfigMap is written; never the object (the sync must
//!   not apply it either: `super::Source::is_the_object`).
//! - Writes replace the ConfigMap at the resourceVersion read, so two
//!   replicas cannot lose each other's snapshot; a conflict fails the fetch,
//!   retried at the next round.
//!
//! # RBAC
//! Besides the coordinator role: `configmaps` get, create and update in the
//! object's namespace; `get` of Flux `kustomizations` and Argo CD
//! `applications` for the history (without it, none is recorded).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::{Revision, SourceError};
use crate::api::{self, OperatorAssignment};

/// How many of the newest revisions the snapshot ConfigMap keeps (the last
/// applied one is kept besides).
pub const KEEP: usize = 5;

/// Prefix of a revision id.
pub(crate) const REVISION_PREFIX: &str = "generation-";

/// `app.kubernetes.io/managed-by` of the snapshot ConfigMap.
const MANAGED_BY: &str = "camelk-reconciler";

/// Annotations of the object left out of the rendered manifest: tools'
/// bookkeeping and requests for a round (`kubectl camelk sync`, a webhook a
/// standby relayed), not desired state, so neither rewrites the snapshot.
const SKIPPED_ANNOTATIONS: [&str; 2] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    api::RECONCILE_REQUEST_ANNOTATION,
];

/// The `OperatorAssignment` `namespace/name` in the cluster.
pub struct ClusterSource {
    client: Client,
    namespace: String,
    name: String,
    file: String,
    /// The uid of the object last fetched: snapshots of any other are ignored.
    uid: Option<String>,
}

impl ClusterSource {
    /// Follows `OperatorAssignment` `namespace/name` through `client`.
    pub fn new(client: Client, namespace: &str, name: &str) -> ClusterSource {
        ClusterSource {
            client,
            namespace: namespace.to_string(),
            name: name.to_string(),
            file: format!("{}/{namespace}/{name}", api::KIND),
            uid: None,
        }
    }

    /// The name of the object followed.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `OperatorAssignment/<namespace>/<name>`, the name in diagnostics.
    pub fn path(&self) -> &str {
        &self.file
    }

    /// Name of the snapshot ConfigMap.
    pub(crate) fn snapshot_name(&self) -> String {
        format!("{}-revisions", self.name)
    }

    fn objects(&self) -> Api<DynamicObject> {
        Api::namespaced_with(
            self.client.clone(),
            &self.namespace,
            &ApiResource::erase::<OperatorAssignment>(&()),
        )
    }

    fn config_maps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The object now, rendered, and kept in the snapshot ConfigMap.
    pub async fn fetch(&mut self) -> Result<Revision, SourceError> {
        let object = self
            .objects()
            .get_opt(&self.name)
            .await
            .map_err(|source| SourceError::Object {
                namespace: self.namespace.clone(),
                name: self.name.clone(),
                source: Box::new(source),
            })?
            .ok_or_else(|| SourceError::NoObject {
                namespace: self.namespace.clone(),
                name: self.name.clone(),
            })?;
        let revision = revision_of(&object);
        let text = render(&object);
        let applied = object.data["status"]["lastAppliedRevision"]
            .as_str()
            .map(str::to_string);
        let uid = object.uid().unwrap_or_default();
        self.snapshot(&uid, &revision, &text, applied.as_deref())
            .await?;
        self.uid = Some(uid);
        Ok(Revision {
            sha: revision,
            text,
            file: self.file.clone(),
            rewound: false,
            commit: None,
            origin: super::origin::origin(&self.client, &object).await,
        })
    }

    /// The manifest of an earlier revision of the object last fetched.
    pub async fn read_at(&self, revision: &str) -> Result<String, SourceError> {
        let unknown = || SourceError::UnknownRevision {
            revision: revision.to_string(),
            namespace: self.namespace.clone(),
            name: self.snapshot_name(),
            keep: KEEP,
        };
        let snapshot = self
            .config_maps()
            .get_opt(&self.snapshot_name())
            .await
            .map_err(|source| self.snapshot_err(revision, source))?
            .ok_or_else(unknown)?;
        if self.uid.is_none() || owner_uid(&snapshot) != self.uid.as_deref() {
            return Err(unknown());
        }
        snapshot
            .data
            .and_then(|mut d| d.remove(revision))
            .ok_or_else(unknown)
    }

    fn snapshot_err(&self, revision: &str, source: kube::Error) -> SourceError {
        SourceError::Snapshot {
            revision: revision.to_string(),
            namespace: self.namespace.clone(),
            name: self.snapshot_name(),
            source: Box::new(source),
        }
    }

    async fn snapshot(
        &self,
        uid: &str,
        revision: &str,
        text: &str,
        applied: Option<&str>,
    ) -> Result<(), SourceError> {
        let api = self.config_maps();
        let name = self.snapshot_name();
        let err = |source| self.snapshot_err(revision, source);
        let existing = api.get_opt(&name).await.map_err(err)?;
        let owner = OwnerReference {
            api_version: format!("{}/{}", api::GROUP, api::VERSION),
            kind: api::KIND.into(),
            name: self.name.clone(),
            uid: uid.to_string(),
            controller: Some(true),
            block_owner_deletion: None,
        };
        match existing {
            None => {
                let config_map = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(name),
                        labels: Some(BTreeMap::from([(
                            "app.kubernetes.io/managed-by".to_string(),
                            MANAGED_BY.to_string(),
                        )])),
                        owner_references: Some(vec![owner]),
                        ..Default::default()
                    },
                    data: Some(BTreeMap::from([(revision.to_string(), text.to_string())])),
                    ..Default::default()
                };
                api.create(&PostParams::default(), &config_map)
                    .await
                    .map_err(err)?;
            }
            Some(mut config_map) => {
                let same_object = owner_uid(&config_map) == Some(uid);
                let mut data = if same_object {
                    config_map.data.take().unwrap_or_default()
                } else {
                    BTreeMap::new()
                };
                if same_object && data.get(revision).map(String::as_str) == Some(text) {
                    return Ok(());
                }
                data.insert(revision.to_string(), text.to_string());
                prune(&mut data, KEEP, applied);
                config_map.data = Some(data);
                config_map.metadata.owner_references = Some(vec![owner]);
                api.replace(&name, &PostParams::default(), &config_map)
                    .await
                    .map_err(err)?;
            }
        }
        Ok(())
    }
}

fn owner_uid(config_map: &ConfigMap) -> Option<&str> {
    config_map
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == api::KIND)
        .map(|o| o.uid.as_str())
}

/// `generation-<N>`.
pub(crate) fn revision_of(object: &DynamicObject) -> String {
    revision_at(object.metadata.generation)
}

/// The revision id of an object at `generation`.
pub(crate) fn revision_at(generation: Option<i64>) -> String {
    format!("{REVISION_PREFIX}{}", generation.unwrap_or(0))
}

/// The object as a manifest a person would write: what the API server adds
/// (uid, resourceVersion, managedFields, status, ...) left out.
pub(crate) fn render(object: &DynamicObject) -> String {
    let mut metadata = serde_json::Map::new();
    metadata.insert("name".into(), json!(object.name_any()));
    if let Some(namespace) = &object.metadata.namespace {
        metadata.insert("namespace".into(), json!(namespace));
    }
    if let Some(labels) = object.metadata.labels.as_ref().filter(|l| !l.is_empty()) {
        metadata.insert("labels".into(), json!(labels));
    }
    let annotations: BTreeMap<&String, &String> = object
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| !SKIPPED_ANNOTATIONS.contains(&k.as_str()))
        .collect();
    if !annotations.is_empty() {
        metadata.insert("annotations".into(), json!(annotations));
    }
    let manifest = json!({
        "apiVersion": format!("{}/{}", api::GROUP, api::VERSION),
        "kind": api::KIND,
        "metadata": Value::Object(metadata),
        "spec": object.data.get("spec").cloned().unwrap_or(json!({})),
    });
    serde_saphyr::to_string(&manifest).unwrap_or_else(|e| format!("# cannot render: {e}\n"))
}

/// Keeps the `keep` newest revisions and `applied`.
fn prune(data: &mut BTreeMap<String, String>, keep: usize, applied: Option<&str>) {
    let generation = |key: &str| {
        key.strip_prefix(REVISION_PREFIX)
            .and_then(|n| n.parse::<i64>().ok())
    };
    let mut ids: Vec<(i64, String)> = data
        .keys()
        .map(|k| (generation(k).unwrap_or(i64::MIN), k.clone()))
        .collect();
    ids.sort();
    let excess = ids.len().saturating_sub(keep);
    for (_, key) in ids.into_iter().take(excess) {
        if Some(key.as_str()) != applied {
            data.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::Manifest;

    fn object(spec: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "camelk.dev/v1alpha1",
            "kind": "OperatorAssignment",
            "metadata": {
                "name": "camel-k", "namespace": "camel-k", "generation": 3, "uid": "u-1",
                "resourceVersion": "42",
                "labels": { "app.kubernetes.io/instance": "gitops" },
                "annotations": { "kubectl.kubernetes.io/last-applied-configuration": "{...}" },
                "managedFields": [{ "manager": "argocd-controller" }],
            },
            "spec": spec,
            "status": { "lastAppliedRevision": "generation-2" },
        }))
        .unwrap()
    }

    #[test]
    fn the_object_renders_as_a_manifest_that_validates_with_positions() {
        let good = object(json!({
            "operators": [{ "id": "operator-1", "namespace": "camel-k" }],
            "defaultOperator": "operator-1",
        }));
        assert_eq!(revision_of(&good), "generation-3");
        let text = render(&good);
        assert!(!text.contains("managedFields") && !text.contains("last-applied"));
        assert!(!text.contains("status") && !text.contains("resourceVersion"));
        let manifest = Manifest::parse("OperatorAssignment/camel-k/camel-k", text).unwrap();
        assert_eq!(
            manifest.assignment.spec,
            serde_json::from_value(good.data["spec"].clone()).unwrap()
        );

        let bad = object(json!({
            "operators": [{ "id": "operator-1", "namespace": "camel-k" }],
            "defaultOperator": "operator-9",
        }));
        let error = Manifest::parse("OperatorAssignment/camel-k/camel-k", render(&bad))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("OperatorAssignment/camel-k/camel-k:") && error.contains("operator-9"),
            "{error}"
        );
    }

    #[test]
    fn pruning_keeps_the_newest_and_the_applied_revision() {
        let mut data: BTreeMap<String, String> = (1..=8)
            .map(|n| (format!("generation-{n}"), n.to_string()))
            .collect();
        prune(&mut data, 3, Some("generation-2"));
        assert_eq!(
            data.keys().collect::<Vec<_>>(),
            [
                "generation-2",
                "generation-6",
                "generation-7",
                "generation-8"
            ]
        );
        // Numeric, not lexical, order.
        let mut data: BTreeMap<String, String> = [9, 10, 11]
            .map(|n| (format!("generation-{n}"), String::new()))
            .into_iter()
            .collect();
        prune(&mut data, 2, None);
        assert_eq!(
            data.keys().collect::<Vec<_>>(),
            ["generation-10", "generation-11"]
        );
    }
}

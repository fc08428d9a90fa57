//! The writes of a scoped operator. Status changes are fenced JSON patches on
//! the status subresource: they apply only while the owner label names this
//! operator and the object is still the version the decision was made on.
//! Secondary objects it creates (kits, builds, the Integration of a Pipe)
//! carry its id; Deployments and ConfigMaps are applied server-side with the
//! operator id as field manager. Nothing here deletes anything.
//!
//! A create refused with 409 AlreadyExists is not taken as made: the object
//! of that name may be one a deleted resource of the same name left for the
//! garbage collector. The caller reads its own watch cache to tell whether the
//! existing object is its resource's (an owner reference with its uid) and
//! retries the step until it is, or until the old one is gone.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::lifecycle::{Effect, Step};
use crate::camel_k::{CamelKind, OPERATOR_ID_KEY};
use crate::field_manager::update_as;
use crate::handoff::fence;

/// Label linking secondary objects to their Integration, as upstream names it.
pub(crate) const INTEGRATION_LABEL: &str = "camel.apache.org/integration";
/// Annotation recording which operator version deployed a workload.
pub(crate) const OPERATOR_VERSION_ANNOTATION: &str = "camelk.dev/operator-version";

/// How a write ended, when it did not fail outright.
#[derive(Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The write was applied.
    Written,
    /// The fence refused it: the owner or the object changed. Nothing written.
    Fenced,
    /// The object the step creates exists already (409), and may not be this
    /// resource's: nothing more written; the step is retried.
    ChildNameTaken,
}

/// Whether an effect's create made its object, or found its name taken.
#[derive(Debug, PartialEq, Eq)]
enum Created {
    Made,
    NameTaken,
}

/// Writes that the owner keys fence: each applies only while the resource is
/// still this operator's, so a handoff in between cannot be overwritten.
pub struct Writer {
    /// The client it writes through.
    pub client: Client,
    /// The operator id every write is fenced on.
    pub operator_id: String,
    /// The operator version written on the Deployments it creates.
    pub version: String,
}

impl Writer {
    /// Performs `step` on `object`: its effect, then its fenced status change.
    pub async fn perform(
        &self,
        kind: CamelKind,
        object: &DynamicObject,
        step: &Step,
    ) -> Result<WriteOutcome, kube::Error> {
        if let Some(effect) = &step.effect
            && self.effect(kind, object, effect).await? == Created::NameTaken
        {
            return Ok(WriteOutcome::ChildNameTaken);
        }
        self.status(kind, object, &step.status).await
    }

    async fn status(
        &self,
        kind: CamelKind,
        object: &DynamicObject,
        fields: &serde_json::Map<String, Value>,
    ) -> Result<WriteOutcome, kube::Error> {
        let mut status = object
            .data
            .get("status")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for (k, v) in fields {
            status.insert(k.clone(), v.clone());
        }
        let patch = fence::fenced(
            &self.operator_id,
            [
                json!({ "op": "test", "path": "/metadata/resourceVersion", "value": object.metadata.resource_version }),
                json!({ "op": "add", "path": "/status", "value": status }),
            ],
        );
        let api = self.api(kind, object);
        let name = object.metadata.name.as_deref().unwrap_or_default();
        match api
            .patch_status(
                name,
                &update_as(&self.operator_id),
                &Patch::<()>::Json(patch),
            )
            .await
        {
            Ok(_) => Ok(WriteOutcome::Written),
            Err(kube::Error::Api(s)) if matches!(s.code, 409 | 422 | 404) => {
                Ok(WriteOutcome::Fenced)
            }
            Err(e) => Err(e),
        }
    }

    async fn effect(
        &self,
        kind: CamelKind,
        object: &DynamicObject,
        effect: &Effect,
    ) -> Result<Created, kube::Error> {
        let ns = object.metadata.namespace.as_deref().unwrap_or_default();
        let name = object.metadata.name.as_deref().unwrap_or_default();
        let owner = owner_ref(kind, object);
        match effect {
            Effect::CreateKit { name: kit } => {
                self.create(
                    CamelKind::IntegrationKit,
                    ns,
                    kit,
                    owner,
                    Some(name),
                    json!({}),
                )
                .await
            }
            Effect::CreateBuild { name: build } => {
                let integration = object
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(INTEGRATION_LABEL))
                    .cloned();
                self.create(
                    CamelKind::Build,
                    ns,
                    build,
                    owner,
                    integration.as_deref(),
                    json!({}),
                )
                .await
            }
            Effect::CreatePipeIntegration => {
                let spec =
                    json!({ "flows": [{ "from": { "uri": format!("kamelet:pipe-{name}") } }] });
                self.create(CamelKind::Integration, ns, name, owner, None, spec)
                    .await
            }
            Effect::ApplyDeployment => self
                .apply_deployment(ns, name, owner)
                .await
                .map(|()| Created::Made),
            Effect::ApplyMavenSettings => {
                self.apply_maven_settings(ns).await.map(|()| Created::Made)
            }
        }
    }

    async fn create(
        &self,
        kind: CamelKind,
        ns: &str,
        name: &str,
        owner: OwnerReference,
        integration: Option<&str>,
        spec: Value,
    ) -> Result<Created, kube::Error> {
        let mut labels = BTreeMap::from([(OPERATOR_ID_KEY.to_string(), self.operator_id.clone())]);
        if let Some(it) = integration {
            labels.insert(INTEGRATION_LABEL.to_string(), it.to_string());
        }
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": kind.api_version(),
            "kind": kind.kind(),
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": labels,
                "annotations": { OPERATOR_ID_KEY: self.operator_id },
                "ownerReferences": [owner],
            },
            "spec": spec,
        }))
        .expect("well-formed object");
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), ns, &kind.api_resource());
        match api.create(&PostParams::default(), &obj).await {
            Ok(_) => Ok(Created::Made),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Created::NameTaken),
            Err(e) => Err(e),
        }
    }

    async fn apply_deployment(
        &self,
        ns: &str,
        integration: &str,
        owner: OwnerReference,
    ) -> Result<(), kube::Error> {
        let selector = BTreeMap::from([(INTEGRATION_LABEL.to_string(), integration.to_string())]);
        let deployment: Deployment = serde_json::from_value(json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": integration,
                "namespace": ns,
                "labels": { OPERATOR_ID_KEY: self.operator_id, INTEGRATION_LABEL: integration },
                "annotations": { OPERATOR_VERSION_ANNOTATION: self.version, OPERATOR_ID_KEY: self.operator_id },
                "ownerReferences": [owner],
            },
            "spec": {
                "replicas": 1,
                "selector": { "matchLabels": selector },
                "template": {
                    "metadata": { "labels": selector },
                    "spec": { "containers": [{ "name": "integration", "image": format!("camel-k/{integration}:{}", self.operator_id) }] }
                }
            }
        }))
        .expect("well-formed deployment");
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), ns);
        api.patch(
            integration,
            &PatchParams::apply(&self.operator_id).force(),
            &Patch::Apply(&deployment),
        )
        .await
        .map(|_| ())
    }

    async fn apply_maven_settings(&self, ns: &str) -> Result<(), kube::Error> {
        let name = format!("{}-maven-settings", self.operator_id);
        let cm: ConfigMap = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": name, "namespace": ns, "labels": { OPERATOR_ID_KEY: self.operator_id } },
            "data": { "settings.xml": format!("<settings><!-- Maven settings of {} --></settings>\n", self.operator_id) }
        }))
        .expect("well-formed config map");
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
        api.patch(
            &name,
            &PatchParams::apply(&self.operator_id).force(),
            &Patch::Apply(&cm),
        )
        .await
        .map(|_| ())
    }

    fn api(&self, kind: CamelKind, object: &DynamicObject) -> Api<DynamicObject> {
        let ns = object.metadata.namespace.as_deref().unwrap_or_default();
        Api::namespaced_with(self.client.clone(), ns, &kind.api_resource())
    }
}

fn owner_ref(kind: CamelKind, object: &DynamicObject) -> OwnerReference {
    OwnerReference {
        api_version: kind.api_version(),
        kind: kind.kind().to_string(),
        name: object.metadata.name.clone().unwrap_or_default(),
        uid: object.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: None,
    }
}

//! Minimal CustomResourceDefinitions for the Camel K kinds, generated from
//! [`CamelKind`]. They are used only where the upstream CRDs are not at hand
//! (a checkout without the team's shared folder): same names, scope, versions
//! and subresources, with schemas that keep every field.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
    CustomResourceDefinitionVersion, CustomResourceSubresourceScale,
    CustomResourceSubresourceStatus, CustomResourceSubresources, CustomResourceValidation,
    JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{CamelKind, GROUP};

/// A CRD for `kind` whose schema preserves unknown fields, with the status
/// subresource (and scale, where upstream has it).
pub fn generated_crd(kind: CamelKind) -> CustomResourceDefinition {
    let open_object = JSONSchemaProps {
        type_: Some("object".into()),
        x_kubernetes_preserve_unknown_fields: Some(true),
        ..Default::default()
    };
    let scale = matches!(
        kind,
        CamelKind::Integration | CamelKind::Pipe | CamelKind::KameletBinding
    )
    .then(|| CustomResourceSubresourceScale {
        spec_replicas_path: ".spec.replicas".into(),
        status_replicas_path: ".status.replicas".into(),
        label_selector_path: Some(".status.selector".into()),
    });
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(kind.crd_name()),
            ..Default::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: GROUP.into(),
            names: CustomResourceDefinitionNames {
                kind: kind.kind().into(),
                list_kind: Some(format!("{}List", kind.kind())),
                plural: kind.plural().into(),
                singular: Some(kind.kind().to_ascii_lowercase()),
                short_names: Some(vec![kind.short_name().into()]),
                categories: Some(vec!["kamel".into(), "camel".into()]),
            },
            scope: "Namespaced".into(),
            versions: vec![CustomResourceDefinitionVersion {
                name: kind.version().into(),
                served: true,
                storage: true,
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(open_object),
                }),
                subresources: Some(CustomResourceSubresources {
                    status: Some(CustomResourceSubresourceStatus(serde_json::json!({}))),
                    scale,
                }),
                ..Default::default()
            }],
            ..Default::default()
        },
        status: None,
    }
}

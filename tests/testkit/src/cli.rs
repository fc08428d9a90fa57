//! What the `kamel` command line creates, for tests that stand where its
//! user would: an Integration as `kamel run --operator-id` makes it, with a
//! spec that runs a prebuilt image or one that must be built.

use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

/// The spec of an Integration that runs the prebuilt `image`: there is
/// nothing to build.
pub fn prebuilt(image: &str) -> Value {
    json!({ "traits": { "container": { "image": image } } })
}

/// The spec of an Integration with one YAML route (a timer that logs): an
/// operator must build it.
pub fn to_build() -> Value {
    json!({ "sources": [{
        "name": "route.yaml",
        "content": "- from:\n    uri: timer:tick\n    steps:\n    - log: tick\n"
    }] })
}

/// Creates Integration `name` through `api` as `kamel run --operator-id
/// owner` does: the owner annotation and no label, and `spec`.
pub async fn kamel_run(api: &Api<DynamicObject>, name: &str, owner: &str, spec: Value) {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": CamelKind::Integration.api_version(),
        "kind": "Integration",
        "metadata": { "name": name, "annotations": { OPERATOR_ID_KEY: owner } },
        "spec": spec,
    }))
    .expect("an Integration");
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating integration {name}: {e}"));
}

//! The reference Camel K lifecycle the scoped operator loops run, as pure
//! functions: given a resource this operator owns and what it sees around it,
//! the next [`Step`]. Enough of upstream's state machine to make handoffs meet
//! real work (kits, builds that take time, deployments), nothing more.
//!
//! - Integration: `""` → `Initialization` → `Building Kit` (creates an
//!   IntegrationKit, whose Build takes the configured time) → `Deploying`
//!   (applies a Deployment) → `Running` with `Ready=True`. An Integration
//!   whose kit was built by another operator (it was handed over) is sent
//!   back to `Initialization`: the new owner rebuilds, as upstream does.
//! - IntegrationKit: `""` → `Build Running` (creates its Build) → `Ready`.
//! - Build: `""` → `Running` → `Succeeded` once the build time has passed.
//! - Pipe: `""` → `Creating` (creates its Integration) → `Ready` when that runs.
//! - IntegrationPlatform: `""` → `Ready`, with the operator's Maven settings
//!   in the ConfigMap `<id>-maven-settings`.
//! - CamelCatalog: `""` → `Ready`.

use std::time::Duration;

use kube::api::DynamicObject;
use serde_json::{Map, Value, json};

use crate::camel_k::CamelKind;
use crate::camel_k::status::{kit_name, phase};

/// A side effect to perform before the status change of a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Create the IntegrationKit `name` for the Integration.
    CreateKit {
        /// The kit's name.
        name: String,
    },
    /// Create the Build `name` for the kit.
    CreateBuild {
        /// The build's name.
        name: String,
    },
    /// Create or update the Integration's Deployment.
    ApplyDeployment,
    /// Create the Integration of a Pipe.
    CreatePipeIntegration,
    /// Create or update the operator's Maven settings ConfigMap.
    ApplyMavenSettings,
}

impl Effect {
    /// The Camel K object the effect creates for the resource `parent`, as
    /// kind and name: it counts as made only once it is that resource's
    /// ([`is_child_of`]).
    pub(crate) fn child(&self, parent: &str) -> Option<(CamelKind, String)> {
        match self {
            Effect::CreateKit { name } => Some((CamelKind::IntegrationKit, name.clone())),
            Effect::CreateBuild { name } => Some((CamelKind::Build, name.clone())),
            Effect::CreatePipeIntegration => Some((CamelKind::Integration, parent.to_string())),
            Effect::ApplyDeployment | Effect::ApplyMavenSettings => None,
        }
    }
}

/// Whether `child` belongs to the resource whose uid is `parent_uid`: an
/// owner reference names that uid. An object of the same name left by a
/// deleted resource of the same name (the garbage collector has not removed
/// it yet) is not.
pub(crate) fn is_child_of(child: &DynamicObject, parent_uid: &str) -> bool {
    !parent_uid.is_empty()
        && child
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|r| r.uid == parent_uid)
}

/// What to do next with one resource: an optional effect, then status fields to set.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// What to do before the status changes, if anything.
    pub effect: Option<Effect>,
    /// `status` fields to merge into the resource.
    pub status: Map<String, Value>,
}

/// What the lifecycle may look at besides the resource itself.
pub(crate) struct Context<'a> {
    /// The id of the operator running the lifecycle.
    pub(crate) operator_id: &'a str,
    /// The operator's version, written into `status.version`.
    pub(crate) version: &'a str,
    /// How long a build takes in this reference lifecycle.
    pub(crate) build_time: Duration,
    /// Phase of a kit this operator owns, by name, in the resource's
    /// namespace; only a kit of this resource ([`is_child_of`]) is seen.
    pub(crate) kit_phase: &'a dyn Fn(&str) -> Option<Option<String>>,
    /// Phase of a Build this operator owns, by name; only this resource's.
    pub(crate) build_phase: &'a dyn Fn(&str) -> Option<Option<String>>,
    /// Phase of an Integration this operator owns, by name; only this resource's.
    pub(crate) integration_phase: &'a dyn Fn(&str) -> Option<Option<String>>,
    /// The IntegrationPlatform this operator owns in the resource's namespace:
    /// the only one it uses, even when others share the namespace.
    pub(crate) platform: Option<&'a str>,
    /// How long a Build has been seen running by this process.
    pub(crate) build_running_for: &'a dyn Fn(&str) -> Option<Duration>,
    pub(crate) now_rfc3339: &'a str,
}

/// Name of the kit operator `id` builds for Integration `integration`.
pub(crate) fn kit_name_for(integration: &str, id: &str) -> String {
    format!("{integration}-kit-{id}")
}

fn step(effect: Option<Effect>, status: Value) -> Option<Step> {
    let Value::Object(status) = status else {
        unreachable!("status is an object")
    };
    Some(Step { effect, status })
}

/// The next step for a resource this operator owns, or `None` when it is settled.
pub(crate) fn next_step(kind: CamelKind, object: &DynamicObject, cx: &Context<'_>) -> Option<Step> {
    let name = object.metadata.name.as_deref().unwrap_or_default();
    let p = phase(object).unwrap_or("");
    match kind {
        CamelKind::Integration => integration(name, object, p, cx),
        CamelKind::IntegrationKit => match p {
            "" => step(
                Some(Effect::CreateBuild {
                    name: name.to_string(),
                }),
                json!({ "phase": "Build Running" }),
            ),
            "Build Running" => match (cx.build_phase)(name).flatten().as_deref() {
                Some("Succeeded") => step(None, json!({ "phase": "Ready", "version": cx.version })),
                Some("Error" | "Interrupted") => step(None, json!({ "phase": "Error" })),
                _ => None,
            },
            _ => None,
        },
        CamelKind::Build => match p {
            "" => step(
                None,
                json!({ "phase": "Running", "startedAt": cx.now_rfc3339 }),
            ),
            "Running" => match (cx.build_running_for)(name) {
                Some(d) if d >= cx.build_time => step(
                    None,
                    json!({ "phase": "Succeeded", "duration": format!("{:.3}s", d.as_secs_f64()) }),
                ),
                _ => None,
            },
            _ => None,
        },
        CamelKind::Pipe | CamelKind::KameletBinding => match p {
            "" => step(
                Some(Effect::CreatePipeIntegration),
                json!({ "phase": "Creating" }),
            ),
            "Creating" => match (cx.integration_phase)(name).flatten().as_deref() {
                Some("Running") => step(
                    None,
                    json!({ "phase": "Ready", "conditions": [ready_condition(cx)] }),
                ),
                Some("Error") => step(None, json!({ "phase": "Error" })),
                _ => None,
            },
            _ => None,
        },
        CamelKind::IntegrationPlatform => match p {
            "" => step(
                Some(Effect::ApplyMavenSettings),
                json!({ "phase": "Ready", "version": cx.version }),
            ),
            _ => None,
        },
        CamelKind::CamelCatalog => match p {
            "" => step(None, json!({ "phase": "Ready" })),
            _ => None,
        },
        CamelKind::Kamelet | CamelKind::IntegrationProfile => None,
    }
}

fn integration(name: &str, object: &DynamicObject, p: &str, cx: &Context<'_>) -> Option<Step> {
    let my_kit = kit_name_for(name, cx.operator_id);
    match p {
        "" => step(
            None,
            json!({ "phase": "Initialization", "lastInitTimestamp": cx.now_rfc3339, "platform": cx.platform }),
        ),
        "Initialization" => step(
            Some(Effect::CreateKit {
                name: my_kit.clone(),
            }),
            json!({ "phase": "Building Kit", "integrationKit": {
                "apiVersion": CamelKind::IntegrationKit.api_version(),
                "kind": "IntegrationKit",
                "name": my_kit,
                "namespace": object.metadata.namespace,
            }}),
        ),
        "Building Kit" => {
            if kit_name(object) != Some(my_kit.as_str()) {
                // Handed over mid-build (a dead owner's takeover): start our own kit.
                return step(None, json!({ "phase": "Initialization" }));
            }
            match (cx.kit_phase)(&my_kit).flatten().as_deref() {
                Some("Ready") => step(
                    None,
                    json!({ "phase": "Deploying", "lastBuildTimestamp": cx.now_rfc3339 }),
                ),
                Some("Error") => step(None, json!({ "phase": "Error" })),
                _ => None,
            }
        }
        "Deploying" => step(
            Some(Effect::ApplyDeployment),
            json!({
                "phase": "Running",
                "version": cx.version,
                "lastDeploymentTimestamp": cx.now_rfc3339,
                "conditions": [ready_condition(cx)],
            }),
        ),
        "Running" | "Error" if kit_name(object) != Some(my_kit.as_str()) => {
            // Another operator built what runs: rebuild under this one.
            step(
                None,
                json!({ "phase": "Initialization", "lastInitTimestamp": cx.now_rfc3339 }),
            )
        }
        _ => None,
    }
}

fn ready_condition(cx: &Context<'_>) -> Value {
    json!({
        "type": "Ready",
        "status": "True",
        "reason": "DeploymentReady",
        "message": format!("running under {}", cx.operator_id),
        "lastTransitionTime": cx.now_rfc3339,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn it(status: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "camel.apache.org/v1", "kind": "Integration",
            "metadata": { "name": "orders", "namespace": "shop" }, "status": status
        }))
        .unwrap()
    }

    fn with_kit<R>(kit: Option<&str>, f: impl FnOnce(&Context<'_>) -> R) -> R {
        let kit = kit.map(str::to_string);
        let kit_phase = move |_: &str| Some(kit.clone());
        let none = |_: &str| None;
        let never = |_: &str| None;
        let cx = Context {
            operator_id: "operator-1",
            version: "2.10.0",
            build_time: Duration::from_secs(1),
            kit_phase: &kit_phase,
            build_phase: &none,
            integration_phase: &none,
            platform: Some("operator-1"),
            build_running_for: &never,
            now_rfc3339: "2026-12-02T00:00:00Z",
        };
        f(&cx)
    }

    #[test]
    fn integration_walks_to_running() {
        with_kit(Some("Ready"), |cx| {
            let s = next_step(CamelKind::Integration, &it(json!({})), cx).unwrap();
            assert_eq!(s.status["phase"], "Initialization");
            assert_eq!(s.status["platform"], "operator-1");
            let s = next_step(
                CamelKind::Integration,
                &it(json!({ "phase": "Initialization" })),
                cx,
            )
            .unwrap();
            assert_eq!(
                s.effect,
                Some(Effect::CreateKit {
                    name: "orders-kit-operator-1".into()
                })
            );
            assert_eq!(s.status["phase"], "Building Kit");
            let building = it(
                json!({ "phase": "Building Kit", "integrationKit": { "name": "orders-kit-operator-1" } }),
            );
            assert_eq!(
                next_step(CamelKind::Integration, &building, cx)
                    .unwrap()
                    .status["phase"],
                "Deploying"
            );
            let deploying = it(
                json!({ "phase": "Deploying", "integrationKit": { "name": "orders-kit-operator-1" } }),
            );
            let s = next_step(CamelKind::Integration, &deploying, cx).unwrap();
            assert_eq!(s.effect, Some(Effect::ApplyDeployment));
            assert_eq!(s.status["conditions"][0]["status"], "True");
            let running = it(
                json!({ "phase": "Running", "integrationKit": { "name": "orders-kit-operator-1" } }),
            );
            assert_eq!(next_step(CamelKind::Integration, &running, cx), None);
        });
    }

    #[test]
    fn a_child_is_known_by_its_owner_uid_not_its_name() {
        let kit = |owner_uid: Option<&str>| -> DynamicObject {
            let refs: Vec<Value> = owner_uid
                .map(|uid| {
                    json!({ "apiVersion": "camel.apache.org/v1", "kind": "Integration",
                    "name": "orders", "uid": uid })
                })
                .into_iter()
                .collect();
            serde_json::from_value(json!({
                "apiVersion": "camel.apache.org/v1", "kind": "IntegrationKit",
                "metadata": { "name": "orders-kit-operator-1", "ownerReferences": refs },
            }))
            .unwrap()
        };
        assert!(is_child_of(&kit(Some("uid-now")), "uid-now"));
        assert!(
            !is_child_of(&kit(Some("uid-before")), "uid-now"),
            "left by a deleted Integration of the same name"
        );
        assert!(!is_child_of(&kit(None), "uid-now"));
        assert!(!is_child_of(&kit(Some("")), ""));
        assert_eq!(
            Effect::CreatePipeIntegration.child("orders"),
            Some((CamelKind::Integration, "orders".into()))
        );
        assert_eq!(Effect::ApplyDeployment.child("orders"), None);
    }

    #[test]
    fn kit_not_ready_waits() {
        with_kit(Some("Build Running"), |cx| {
            let building = it(
                json!({ "phase": "Building Kit", "integrationKit": { "name": "orders-kit-operator-1" } }),
            );
            assert_eq!(next_step(CamelKind::Integration, &building, cx), None);
        });
    }

    #[test]
    fn handed_over_integration_is_rebuilt() {
        with_kit(None, |cx| {
            let running = it(
                json!({ "phase": "Running", "integrationKit": { "name": "orders-kit-operator-2" } }),
            );
            assert_eq!(
                next_step(CamelKind::Integration, &running, cx)
                    .unwrap()
                    .status["phase"],
                "Initialization"
            );
        });
    }
}

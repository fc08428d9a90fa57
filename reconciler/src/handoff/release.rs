//! When may a resource be released? Pure rules over the observed objects.
//!
//! - [`owner_may_release`]: what an operator that speaks the protocol checks
//!   before it flips: no work in flight on the resource (phase rules of
//!   [`crate::plan::phase`]) and no unfinished Build for its kit.
//! - [`upstream_stable`]: what the coordinator checks before it releases for
//!   a plain upstream operator, which cannot tell us it is idle: a stable
//!   phase only (`Running` with `Ready=True`, `Error`, parked `Build Complete`).

use kube::api::DynamicObject;

use crate::camel_k::CamelKind;
use crate::plan::phase::{BlockReason, work_in_flight};

/// `status.phase` of an object, if any.
pub fn phase(object: &DynamicObject) -> Option<&str> {
    object.data.get("status")?.get("phase")?.as_str()
}

/// Status of the condition `type_` (`"True"`, `"False"`, ...), if present.
pub fn condition<'a>(object: &'a DynamicObject, type_: &str) -> Option<&'a str> {
    object
        .data
        .get("status")?
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(|t| t.as_str()) == Some(type_))?
        .get("status")?
        .as_str()
}

/// Name of the IntegrationKit an Integration uses (`status.integrationKit.name`).
pub fn kit_name(integration: &DynamicObject) -> Option<&str> {
    integration
        .data
        .get("status")?
        .get("integrationKit")?
        .get("name")?
        .as_str()
}

fn build_finished(build: &DynamicObject) -> bool {
    // Upstream retries a Failed build, so only these three are final.
    matches!(phase(build), Some("Succeeded" | "Interrupted" | "Error"))
}

fn owned_by(object: &DynamicObject, kind: &str, name: &str) -> bool {
    object
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == kind && o.name == name)
}

/// Why the owner must not release `object` yet, or `None` when it may.
/// `builds` are the Builds the owner can see in the object's namespace.
pub fn owner_may_release(
    kind: CamelKind,
    object: &DynamicObject,
    builds: &[&DynamicObject],
) -> Option<BlockReason> {
    if let Some(reason) = work_in_flight(kind, Some(phase(object).unwrap_or(""))) {
        return Some(reason);
    }
    if kind == CamelKind::Integration
        && let Some(kit) = kit_name(object)
        && let Some(build) = builds
            .iter()
            .find(|b| owned_by(b, "IntegrationKit", kit) && !build_finished(b))
    {
        return Some(BlockReason::WorkInFlight {
            phase: phase(build).unwrap_or("").to_string(),
            detail: format!(
                "build {} of kit {kit} has not finished",
                build.metadata.name.as_deref().unwrap_or("?")
            ),
        });
    }
    None
}

/// Whether a resource of a plain upstream operator is in a phase where
/// taking it away interrupts nothing. Returns the phase it judged, for the
/// flip's guard, or why not.
pub fn upstream_stable(kind: CamelKind, object: &DynamicObject) -> Result<String, String> {
    let p = phase(object).unwrap_or("");
    let stable = match kind {
        CamelKind::Integration => match p {
            "Running" => condition(object, "Ready") == Some("True"),
            "Error" | "Build Complete" => true,
            _ => false,
        },
        CamelKind::Pipe | CamelKind::KameletBinding => {
            matches!(p, "Ready" | "Error" | "Build Complete")
        }
        other => work_in_flight(other, Some(p)).is_none(),
    };
    if stable {
        Ok(p.to_string())
    } else if p == "Running" {
        Err("phase `Running` but not Ready".to_string())
    } else {
        Err(format!("phase `{p}` is not stable"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(
        kind: &str,
        name: &str,
        status: serde_json::Value,
        owner: Option<(&str, &str)>,
    ) -> DynamicObject {
        let mut meta = json!({ "name": name, "namespace": "shop" });
        if let Some((k, n)) = owner {
            meta["ownerReferences"] =
                json!([{ "apiVersion": "camel.apache.org/v1", "kind": k, "name": n, "uid": "u" }]);
        }
        serde_json::from_value(json!({ "apiVersion": "camel.apache.org/v1", "kind": kind, "metadata": meta, "status": status })).unwrap()
    }

    #[test]
    fn running_integration_with_finished_build_may_be_released() {
        let it = obj(
            "Integration",
            "orders",
            json!({ "phase": "Running", "integrationKit": { "name": "kit-1" } }),
            None,
        );
        let build = obj(
            "Build",
            "kit-1",
            json!({ "phase": "Succeeded" }),
            Some(("IntegrationKit", "kit-1")),
        );
        assert_eq!(
            owner_may_release(CamelKind::Integration, &it, &[&build]),
            None
        );
    }

    #[test]
    fn building_kit_or_running_build_blocks_release() {
        let it = obj(
            "Integration",
            "orders",
            json!({ "phase": "Building Kit" }),
            None,
        );
        assert!(owner_may_release(CamelKind::Integration, &it, &[]).is_some());

        let it = obj(
            "Integration",
            "orders",
            json!({ "phase": "Running", "integrationKit": { "name": "kit-1" } }),
            None,
        );
        let build = obj(
            "Build",
            "kit-1",
            json!({ "phase": "Failed" }),
            Some(("IntegrationKit", "kit-1")),
        );
        let reason = owner_may_release(CamelKind::Integration, &it, &[&build]).unwrap();
        assert!(reason.to_string().contains("kit-1"), "{reason}");
    }

    #[test]
    fn upstream_release_needs_ready_running() {
        let ready = obj(
            "Integration",
            "a",
            json!({ "phase": "Running", "conditions": [{ "type": "Ready", "status": "True" }] }),
            None,
        );
        assert_eq!(
            upstream_stable(CamelKind::Integration, &ready),
            Ok("Running".into())
        );
        let not_ready = obj(
            "Integration",
            "a",
            json!({ "phase": "Running", "conditions": [{ "type": "Ready", "status": "False" }] }),
            None,
        );
        assert!(upstream_stable(CamelKind::Integration, &not_ready).is_err());
        let deploying = obj("Integration", "a", json!({ "phase": "Deploying" }), None);
        assert!(upstream_stable(CamelKind::Integration, &deploying).is_err());
        let parked = obj(
            "Integration",
            "a",
            json!({ "phase": "Build Complete" }),
            None,
        );
        assert!(upstream_stable(CamelKind::Integration, &parked).is_ok());
        let pipe = obj("Pipe", "p", json!({ "phase": "Creating" }), None);
        assert!(upstream_stable(CamelKind::Pipe, &pipe).is_err());
    }
}

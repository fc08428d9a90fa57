//! When may a resource be released? Pure rules over upstream Camel K phases
//! (see the project's reference on upstream phases).
//!
//! - [`work_in_flight`]: which `status.phase` values mean an operator is in
//!   the middle of work on a resource, so that taking the resource away now
//!   would leave that work half done. An unknown phase (`None`, as from a
//!   metadata-only read) never blocks: the executor re-checks the live phase
//!   before it releases a resource.
//! - [`owner_may_release`]: what an operator that speaks the protocol checks
//!   before it flips: no work in flight on the resource and no unfinished
//!   Build for its kit.
//! - [`upstream_stable`]: what the coordinator checks before it releases for
//!   a plain upstream operator, which cannot tell us it is idle: a stable
//!   phase only (`Running` with `Ready=True`, `Error`, parked `Build Complete`).
//!
//! Contract: every rule is pure and names the phase in its answer.

use kube::api::DynamicObject;
use serde::{Deserialize, Serialize};

use super::status::{condition, kit_name, phase};
use super::{CamelKind, OPERATOR_ID_KEY};

/// Why a move cannot start now.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "reason")]
pub enum BlockReason {
    /// The current owner is working on the resource.
    WorkInFlight {
        /// The phase the resource is in.
        phase: String,
        /// Why that phase means work in flight, for people.
        detail: String,
    },
    /// Another tool applies the resource's owner keys (a GitOps tool
    /// deploying it from a manifest that names its operator), and nothing
    /// keeps them against that tool's next apply: a move would be undone.
    KeysApplied {
        /// The tool, as its field manager names it (`kustomize-controller`).
        applier: String,
    },
}

impl std::fmt::Display for BlockReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BlockReason::WorkInFlight { phase, detail } => write!(f, "phase `{phase}`: {detail}"),
            BlockReason::KeysApplied { applier } => write!(
                f,
                "{applier} applies its {OPERATOR_ID_KEY} and would undo the move: remove the key \
                 from the manifests it applies (`kubectl camelk strip-owner-keys`), or install the \
                 owner-keys policy (docs/gitops-tools.md)"
            ),
        }
    }
}

/// Whether the current owner of a `kind` resource in `phase` is mid-work.
pub(crate) fn work_in_flight(kind: CamelKind, phase: Option<&str>) -> Option<BlockReason> {
    let phase = phase?;
    let detail = match (kind, phase) {
        (CamelKind::Integration, "Initialization") => "the operator is applying traits",
        (CamelKind::Integration, "Building Kit") => "a kit is being built or looked up",
        (CamelKind::Integration, "Build Submitted" | "BuildSubmitted") => {
            "a build from git was submitted"
        }
        (CamelKind::Integration, "Build Running" | "BuildRunning") => "a build from git is running",
        (CamelKind::Integration, "Deploying") => "the workload is being rolled out",
        (CamelKind::Integration, "Undeploying") => "the workload is being undeployed",
        (CamelKind::Integration, "Unknown") => "the operator is waiting for its platform",
        (CamelKind::IntegrationKit, "") => "the kit has not been initialized yet",
        (CamelKind::IntegrationKit, "Initialization") => "the kit is being initialized",
        (CamelKind::IntegrationKit, "Waiting For Platform") => "the kit waits for a platform",
        (CamelKind::IntegrationKit, "Build Submitted") => "the kit's build was submitted",
        (CamelKind::IntegrationKit, "Build Running") => "the kit's build is running",
        (CamelKind::IntegrationKit, "Waiting For Catalog") => "the kit waits for a catalog",
        (CamelKind::Build, "") => "the build has not been initialized yet",
        (CamelKind::Build, "Initialization" | "Scheduling" | "Pending") => {
            "the build is being scheduled"
        }
        (CamelKind::Build, "Running") => "the build is running",
        (CamelKind::Build, "Failed") => "the failed build will be retried by its operator",
        (CamelKind::Pipe | CamelKind::KameletBinding, "") => {
            "the operator has not picked it up yet"
        }
        (CamelKind::Pipe | CamelKind::KameletBinding, "Creating") => {
            "its Integration is being created"
        }
        (CamelKind::IntegrationPlatform, "") => "the operator has not picked it up yet",
        (CamelKind::IntegrationPlatform, "Creating" | "Warming" | "CreateCatalog") => {
            "the platform is being set up"
        }
        _ => return None,
    };
    Some(BlockReason::WorkInFlight {
        phase: phase.to_string(),
        detail: detail.to_string(),
    })
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
pub(crate) fn owner_may_release(
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
pub(crate) fn upstream_stable(kind: CamelKind, object: &DynamicObject) -> Result<String, String> {
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

    #[test]
    fn stable_phases_do_not_block() {
        for (kind, phase) in [
            (CamelKind::Integration, "Running"),
            (CamelKind::Integration, "Error"),
            (CamelKind::Integration, "Build Complete"),
            (CamelKind::Integration, ""),
            (CamelKind::IntegrationKit, "Ready"),
            (CamelKind::Build, "Succeeded"),
            (CamelKind::Build, "Interrupted"),
            (CamelKind::Pipe, "Ready"),
            (CamelKind::Kamelet, ""),
        ] {
            assert_eq!(work_in_flight(kind, Some(phase)), None, "{kind} {phase}");
        }
        assert_eq!(work_in_flight(CamelKind::Build, None), None);
    }

    #[test]
    fn work_in_flight_blocks() {
        for (kind, phase) in [
            (CamelKind::Integration, "Building Kit"),
            (CamelKind::Integration, "Deploying"),
            (CamelKind::Integration, "BuildRunning"),
            (CamelKind::Build, "Running"),
            (CamelKind::Build, "Failed"),
            (CamelKind::IntegrationKit, "Build Running"),
            (CamelKind::Pipe, "Creating"),
        ] {
            assert!(
                work_in_flight(kind, Some(phase)).is_some(),
                "{kind} {phase}"
            );
        }
    }
}

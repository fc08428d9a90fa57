//! Phase rules: which `status.phase` values mean an operator is in the middle
//! of work on a resource, so that taking the resource away now would leave
//! that work half done (see the project's reference on upstream phases).
//!
//! Contract: [`work_in_flight`] is pure and names the phase in its answer. An
//! unknown phase (`None`, as from a metadata-only read) never blocks: the
//! executor re-checks the live phase before it releases a resource.

use serde::Serialize;

use crate::camel_k::CamelKind;

/// Why a move cannot start now.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase", tag = "reason")]
pub enum BlockReason {
    /// The current owner is working on the resource.
    WorkInFlight { phase: String, detail: String },
}

impl std::fmt::Display for BlockReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BlockReason::WorkInFlight { phase, detail } => write!(f, "phase `{phase}`: {detail}"),
        }
    }
}

/// Whether the current owner of a `kind` resource in `phase` is mid-work.
pub fn work_in_flight(kind: CamelKind, phase: Option<&str>) -> Option<BlockReason> {
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

#[cfg(test)]
mod tests {
    use super::*;

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

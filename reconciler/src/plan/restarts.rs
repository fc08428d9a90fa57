//! The restart forecast of a plan: for each Integration it moves, whether
//! its pods roll, why, and whether the roll can lose capacity.
//!
//! Why a move rolls pods (`docs/upstream-camel-k.md`): a Camel K operator
//! puts its id in the Integration's digest and in its pods'
//! `CAMEL_K_OPERATOR_ID`, so the new owner re-deploys it and the Deployment
//! gets a new ReplicaSet; when the two operators run different Camel K
//! versions, the new one also builds a new kit. An Integration with no
//! Deployment (not running: in error, building) has no pods to roll.
//!
//! Capacity: a Deployment with `strategy: Recreate` stops every pod before
//! starting new ones; a rolling update whose `maxUnavailable` (a count, or
//! a percentage of the replicas rounded down, as Kubernetes rounds it)
//! reaches every replica lets them all be down at once (1 replica and
//! `maxUnavailable` 1 or more, say).
//!
//! Pure: the caller reads the Deployments and the operators' versions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Plan;
use crate::api::OperatorId;
use crate::camel_k::CamelKind;
use crate::inventory::ResourceRef;

/// What the forecast needs of an Integration's Deployment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    /// `spec.replicas` (Kubernetes' default: 1).
    pub replicas: i32,
    /// `spec.strategy`.
    pub strategy: Strategy,
}

/// How a Deployment replaces its pods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Every old pod stops before new ones start.
    Recreate,
    /// New pods replace old ones, some down at once.
    RollingUpdate {
        /// How many may be down: a count or a percentage, as written
        /// (Kubernetes' default `25%`).
        max_unavailable: String,
    },
}

/// The forecast for one moved Integration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Restart {
    /// The Integration.
    pub resource: ResourceRef,
    /// Whether its pods roll (a new ReplicaSet).
    pub rolls: bool,
    /// Why they roll, or why not.
    pub why: Vec<String>,
    /// How the roll can lose capacity; absent when it cannot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_risk: Option<String>,
}

/// The forecast for every Integration `plan` moves, given the Deployments
/// of Integrations (by the Integration) and the Camel K version each
/// operator runs (where known).
pub fn forecast(
    plan: &Plan,
    workloads: &BTreeMap<ResourceRef, Workload>,
    versions: &BTreeMap<OperatorId, String>,
) -> Vec<Restart> {
    plan.moves()
        .filter(|m| m.resource.kind == CamelKind::Integration)
        .map(|m| {
            let Some(workload) = workloads.get(&m.resource) else {
                return Restart {
                    resource: m.resource.clone(),
                    rolls: false,
                    why: vec!["it has no Deployment: nothing of it runs".into()],
                    capacity_risk: None,
                };
            };
            let mut why = vec![format!(
                "its new operator's id is in its digest and its pods' CAMEL_K_OPERATOR_ID ({} → {})",
                m.from, m.to
            )];
            if let (Some(from), Some(to)) = (versions.get(&m.from), versions.get(&m.to))
                && from != to
            {
                why.push(format!("Camel K {from} → {to}: a new kit"));
            }
            Restart {
                resource: m.resource.clone(),
                rolls: true,
                why,
                capacity_risk: capacity_risk(workload),
            }
        })
        .collect()
}

/// How rolling `workload` can lose capacity, if it can.
fn capacity_risk(workload: &Workload) -> Option<String> {
    match &workload.strategy {
        Strategy::Recreate if workload.replicas > 0 => Some(format!(
            "strategy Recreate: its {} pods stop before new ones start",
            workload.replicas
        )),
        Strategy::Recreate => None,
        Strategy::RollingUpdate { max_unavailable } => {
            let down = unavailable(max_unavailable, workload.replicas)?;
            (workload.replicas > 0 && down >= workload.replicas).then(|| {
                format!(
                    "maxUnavailable {max_unavailable} with {} replicas: all may be down at once",
                    workload.replicas
                )
            })
        }
    }
}

/// `max_unavailable` of `replicas` pods, as Kubernetes resolves it (a
/// percentage rounded down); `None` when it reads as neither.
fn unavailable(max_unavailable: &str, replicas: i32) -> Option<i32> {
    match max_unavailable.strip_suffix('%') {
        Some(percent) => {
            let percent: i64 = percent.trim().parse().ok()?;
            i32::try_from(i64::from(replicas) * percent / 100).ok()
        }
        None => max_unavailable.trim().parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Batch, Move, Reason};

    fn id(s: &str) -> OperatorId {
        OperatorId::new(s).unwrap()
    }

    fn it(name: &str) -> ResourceRef {
        ResourceRef {
            kind: CamelKind::Integration,
            namespace: "shop".into(),
            name: name.into(),
        }
    }

    fn plan(resources: &[ResourceRef]) -> Plan {
        Plan {
            batches: vec![Batch {
                step: 1,
                moves: resources
                    .iter()
                    .map(|r| Move {
                        resource: r.clone(),
                        from: id("operator-1"),
                        to: id("operator-2"),
                        because: Reason::Default,
                    })
                    .collect(),
            }],
            ..Default::default()
        }
    }

    fn rolling(replicas: i32, max_unavailable: &str) -> Workload {
        Workload {
            replicas,
            strategy: Strategy::RollingUpdate {
                max_unavailable: max_unavailable.into(),
            },
        }
    }

    #[test]
    fn a_running_integration_rolls_and_one_without_a_deployment_does_not() {
        let pipe = ResourceRef {
            kind: CamelKind::Pipe,
            ..it("p")
        };
        let planned = plan(&[it("a"), it("built"), pipe]);
        let workloads = BTreeMap::from([(it("a"), rolling(1, "25%"))]);
        let versions = BTreeMap::from([
            (id("operator-1"), "2.8.0".to_string()),
            (id("operator-2"), "2.10.1".to_string()),
        ]);
        let forecast = forecast(&planned, &workloads, &versions);
        assert_eq!(forecast.len(), 2, "Integrations only: {forecast:#?}");
        assert!(forecast[0].rolls);
        assert_eq!(forecast[0].why.len(), 2);
        assert!(forecast[0].why[1].contains("Camel K 2.8.0 → 2.10.1"));
        assert_eq!(forecast[0].capacity_risk, None, "25% of 1 is 0");
        assert!(!forecast[1].rolls);
        assert!(forecast[1].why[0].contains("no Deployment"));
        let same = BTreeMap::from([
            (id("operator-1"), "2.10.1".to_string()),
            (id("operator-2"), "2.10.1".to_string()),
        ]);
        assert_eq!(forecast_of(&planned, &workloads, &same).why.len(), 1);
    }

    fn forecast_of(
        planned: &Plan,
        workloads: &BTreeMap<ResourceRef, Workload>,
        versions: &BTreeMap<OperatorId, String>,
    ) -> Restart {
        forecast(planned, workloads, versions).remove(0)
    }

    #[test]
    fn recreate_and_an_unavailable_count_that_reaches_every_replica_lose_capacity() {
        let planned = plan(&[it("a")]);
        let risk = |w: Workload| {
            let workloads = BTreeMap::from([(it("a"), w)]);
            forecast_of(&planned, &workloads, &BTreeMap::new()).capacity_risk
        };
        let recreate = risk(Workload {
            replicas: 2,
            strategy: Strategy::Recreate,
        });
        assert!(recreate.unwrap().contains("strategy Recreate"));
        assert!(
            risk(rolling(1, "1"))
                .unwrap()
                .contains("maxUnavailable 1 with 1 replicas")
        );
        assert!(risk(rolling(1, "100%")).is_some());
        assert_eq!(risk(rolling(2, "1")), None, "one of two stays up");
        assert_eq!(risk(rolling(3, "50%")), None, "50% of 3 is 1");
        assert_eq!(risk(rolling(0, "1")), None, "no pod to lose");
    }
}

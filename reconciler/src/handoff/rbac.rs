//! Least-privilege RBAC for the two sides of a handoff: an operator and the
//! coordinator (the reconciler, or a person running `kubectl camelk move`).
//! Operators never delete anything; only the coordinator deletes, and only
//! handoff Leases. Kept outside the reference operator (a test double behind
//! the `reference-operator` feature) because the shipped manifests and the
//! tests check against both roles.

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::api::ObjectMeta;

use crate::camel_k::{CamelKind, GROUP};

fn rule(group: &str, resources: &[String], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_string()]),
        resources: Some(resources.to_vec()),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    }
}

fn camel_resources(status: bool) -> Vec<String> {
    CamelKind::ALL
        .iter()
        .map(|k| {
            if status {
                format!("{}/status", k.plural())
            } else {
                k.plural().to_string()
            }
        })
        .collect()
}

/// What a scoped operator needs: watch and write its Camel K resources and
/// their status, create kits, builds and Pipe Integrations, apply
/// Deployments and its Maven settings ConfigMap, hold its lock Lease and
/// read handoff Leases.
pub fn operator_cluster_role(name: &str) -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        rules: Some(vec![
            rule(
                GROUP,
                &camel_resources(false),
                &["get", "list", "watch", "create", "patch"],
            ),
            rule(GROUP, &camel_resources(true), &["get", "patch", "update"]),
            rule(
                "coordination.k8s.io",
                &["leases".into()],
                &["get", "list", "watch", "create", "update"],
            ),
            rule("apps", &["deployments".into()], &["get", "create", "patch"]),
            rule("", &["configmaps".into()], &["get", "create", "patch"]),
        ]),
        ..Default::default()
    }
}

/// What the coordinator needs: read Camel K resources, patch their owner
/// keys, and create, mark and delete handoff Leases (and read locks), and
/// read whether the owner-keys policy is installed. As
/// `reconciler sync` it also holds its own lock (update), applies the
/// `OperatorAssignment` object and its status, reads approvals of rollout
/// steps, and records Events.
pub fn coordinator_cluster_role(name: &str) -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        rules: Some(vec![
            rule(
                GROUP,
                &camel_resources(false),
                &["get", "list", "watch", "patch"],
            ),
            rule(
                "coordination.k8s.io",
                &["leases".into()],
                &[
                    "get", "list", "watch", "create", "update", "patch", "delete",
                ],
            ),
            rule(
                crate::api::GROUP,
                &["operatorassignments".into()],
                &["get", "list", "watch", "create", "patch"],
            ),
            rule(
                crate::api::GROUP,
                &["operatorassignments/status".into()],
                &["get", "patch", "update"],
            ),
            // Approvals of rollout steps: read, and watched to go on at once.
            rule(
                crate::api::GROUP,
                &["rolloutapprovals".into()],
                &["get", "list", "watch"],
            ),
            rule("events.k8s.io", &["events".into()], &["create", "patch"]),
            // The restart forecast of served plans: Integrations' Deployments.
            rule("apps", &["deployments".into()], &["list"]),
            rule(
                "admissionregistration.k8s.io",
                &[
                    "mutatingadmissionpolicies".into(),
                    "mutatingadmissionpolicybindings".into(),
                ],
                &["get"],
            ),
        ]),
        ..Default::default()
    }
}

//! `reconciler sync` with real, unmodified upstream Camel K operators
//! (`kamel operator` of the pinned release, each a process with its own
//! identity, lock and IntegrationPlatform) on resources created the way
//! `kamel run -x` / `kamel bind -x` create them: the owner annotation only.
//!
//! The owner admission policy of `examples/deploy/admission` is enforced in
//! every test namespace, and every test ends with the audit-log single-owner
//! judge. Integrations given a prebuilt image (`spec.traits.container.image`)
//! run on the simulated node and become `Ready`.
//!
//! operator-1 and operator-2 are shared by the tests of this binary (global
//! operators: each test works in its own namespace); a test that kills an
//! operator starts its own operator-3.

use std::time::{Duration, Instant};

use crate::NAME;
use crate::support::*;
use crate::{operator_logs, shared_operators};
use camelk_reconciler::api::OperatorAssignmentStatus;
use camelk_reconciler::camel_k::phase;
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY, owner_id, owner_of_meta};
use camelk_testkit::TestCluster;
use camelk_testkit::manifest::Assignment;
use kube::Client;
use kube::api::{DynamicObject, PostParams};
use serde_json::{Value, json};

const IMAGE: &str = "docker.io/library/camelk-e2e:1.0";

/// A namespace with the owner policy enforced, the shipped RBAC granted,
/// the OperatorAssignment CRD installed and operator-1 and operator-2 running.
pub(crate) async fn setup(
    prefix: &str,
) -> (&'static TestCluster, camelk_testkit::TestNamespace, Client) {
    let cluster = camelk_testkit::shared();
    shared_operators(cluster).await;
    let (ns, admin) = policed_sync_namespace(cluster, prefix, &OPERATORS, None).await;
    (cluster, ns, admin)
}

/// The assignment of these tests: `protocol: Upstream` operators 1..3 (each
/// locked in its own namespace) for Integrations and Pipes of `ns`, Ready
/// required within 3 minutes; a test adds the rest.
pub(crate) fn fleet(ns: &str) -> Assignment {
    let kinds = [CamelKind::Integration, CamelKind::Pipe];
    upstream_fleet(NAME, ns, &OPERATORS, &kinds)
}

/// [`fleet`] with everything in scope going to `default_operator`.
pub(crate) fn manifest(ns: &str, default_operator: &str) -> String {
    fleet(ns).default_operator(default_operator).render()
}

/// An Integration as `kamel run -x` creates it: the owner annotation (when
/// given) and no label; `prebuilt` gives it an image, so no build runs.
pub(crate) async fn kamel_run(
    client: &Client,
    ns: &str,
    name: &str,
    owner: Option<&str>,
    prebuilt: bool,
) {
    let mut meta = json!({ "name": name, "annotations": { "team": "shop" } });
    if let Some(o) = owner {
        meta["annotations"][OPERATOR_ID_KEY] = json!(o);
    }
    let spec = if prebuilt {
        json!({ "traits": { "container": { "image": IMAGE } } })
    } else {
        json!({ "sources": [{ "name": "route.yaml",
            "content": "- from:\n    uri: timer:tick\n    steps:\n    - log: tick\n" }] })
    };
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": CamelKind::Integration.api_version(),
        "kind": "Integration",
        "metadata": meta,
        "spec": spec,
    }))
    .unwrap();
    camel_api(client.clone(), CamelKind::Integration, ns)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating integration {name}: {e}"));
}

pub(crate) async fn wait_ready_under(
    client: &Client,
    ns: &str,
    name: &str,
    id: &str,
) -> DynamicObject {
    let what = format!("Running and Ready under {id}");
    let api = camel_api(client.clone(), CamelKind::Integration, ns);
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        if let Some(obj) = api.get_opt(name).await.unwrap()
            && ready_under(id)(&obj)
        {
            return obj;
        }
        if Instant::now() > deadline {
            let last = api.get_opt(name).await.unwrap();
            panic!(
                "Integration {ns}/{name}: not {what}; last: {:#?}\n{}",
                last.map(|o| (
                    o.metadata.labels,
                    o.metadata.annotations,
                    o.data["status"].clone()
                )),
                operator_logs()
            );
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn condition_of<'a>(s: &'a OperatorAssignmentStatus, type_: &str) -> Option<(&'a str, &'a str)> {
    s.conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.as_str(), c.message.as_str()))
}

/// Writes by `user` to Camel K resources of `ns` that succeeded, as
/// (resource, name, verb, object after the write).
fn writes_by(cluster: &TestCluster, ns: &str, user: &str) -> Vec<(String, String, String, Value)> {
    answered_requests(cluster, ns, user)
        .into_iter()
        .filter(|e| {
            e.is_successful_write()
                && e.object_ref.as_ref().and_then(|o| o.api_group.as_deref())
                    == Some("camel.apache.org")
        })
        .map(|e| {
            let obj = e.object_ref.clone().unwrap();
            let after = e.response_object.clone().unwrap_or_default();
            (
                obj.resource,
                obj.name.unwrap_or_default(),
                e.verb.clone(),
                after,
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn kamel_created_integrations_are_adopted_then_rolled_out_in_steps() {
    let (cluster, ns, admin) = setup("up-rollout").await;
    let names = ["it-a", "it-b", "it-c", "it-d"];
    for name in names {
        kamel_run(&admin, &ns.name, name, Some("operator-1"), true).await;
    }
    let mut before = Vec::new();
    for name in names {
        before.push(wait_ready_under(&admin, &ns.name, name, "operator-1").await);
    }

    // Revision 1 says what the cluster already holds: each resource is
    // adopted (its label added in one write), nothing is handed over.
    let git = GitRemote::new();
    let rev1 = git.push(&manifest(&ns.name, "operator-1"), "operators");
    let sync = start_sync(cluster, &ns.name, &git, "reconciler", &[]);
    let assignment = SyncedAssignment::new(&admin, &ns.name, NAME, &sync);
    assignment.wait(90, "applied", applied(&rev1)).await;
    let adoptions = writes_by(cluster, &ns.name, "reconciler");
    assert_eq!(
        adoptions.len(),
        names.len(),
        "one write per resource: {adoptions:#?}"
    );
    for ((resource, name, verb, after), seen) in adoptions.iter().zip(&before) {
        assert_eq!(
            (resource.as_str(), verb.as_str()),
            ("integrations", "patch")
        );
        assert_eq!(Some(name), seen.metadata.name.as_ref());
        assert_eq!(
            after["metadata"]["labels"],
            json!({ OPERATOR_ID_KEY: "operator-1" })
        );
        assert_eq!(
            after["metadata"]["annotations"],
            json!(seen.metadata.annotations),
            "the annotations are as they were"
        );
        assert_eq!(after["spec"], seen.data["spec"], "the spec is untouched");
    }

    // Revision 2 hands everything to operator-2 in two steps, each gated on Ready.
    let rev2 = git.push(
        &fleet(&ns.name)
            .default_operator("operator-1")
            .staged_move("operator-1", "operator-2", &["50%", "100%"])
            .render(),
        "operator-2 takes over",
    );
    let status = assignment.wait(300, "applied", applied(&rev2)).await;
    let rollout = status.rollout.as_ref().unwrap();
    assert_eq!(
        (rollout.total_steps, rollout.state.as_str()),
        (2, "Complete")
    );
    assert_eq!(condition_of(&status, "Ready").map(|c| c.0), Some("True"));
    for name in names {
        let obj = wait_ready_under(&admin, &ns.name, name, "operator-2").await;
        let read = owner_of_meta(&obj.metadata).unwrap();
        assert!(!read.keys_disagree(), "both keys name operator-2");
    }
    assert_single_owner(cluster, &ns.name);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_integration_naming_a_missing_operator_is_untouched_then_taken_over() {
    let (cluster, ns, admin) = setup("up-ghost").await;
    kamel_run(&admin, &ns.name, "ghost", Some("operator-x"), true).await;
    kamel_run(&admin, &ns.name, "moving", Some("operator-1"), true).await;
    wait_ready_under(&admin, &ns.name, "moving", "operator-1").await;

    // No operator has id operator-x: nobody reconciles it.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let ghost = camel_api(admin.clone(), CamelKind::Integration, &ns.name)
        .get("ghost")
        .await
        .unwrap();
    assert_eq!(
        phase(&ghost).unwrap_or(""),
        "",
        "untouched: {:?}",
        ghost.data["status"]
    );
    for op in OPERATORS {
        assert!(
            writes_by(cluster, &ns.name, op)
                .iter()
                .all(|(_, name, _, _)| name != "ghost"),
            "{op} wrote the ghost"
        );
    }

    // The scenario: both resources to operator-2 from Git. The owner
    // the annotation names is read, the dead one (no lock) is taken over.
    let git = GitRemote::new();
    let rev = git.push(&manifest(&ns.name, "operator-2"), "to operator-2");
    let sync = start_sync(cluster, &ns.name, &git, "reconciler", &[]);
    let assignment = SyncedAssignment::new(&admin, &ns.name, NAME, &sync);
    let status = assignment.wait(300, "applied", applied(&rev)).await;
    assert_eq!(condition_of(&status, "Stalled").map(|c| c.0), Some("False"));
    wait_ready_under(&admin, &ns.name, "ghost", "operator-2").await;
    wait_ready_under(&admin, &ns.name, "moving", "operator-2").await;
    assert_single_owner(cluster, &ns.name);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pipe_assigned_to_an_operator_gets_its_integration_from_that_operator() {
    let (cluster, ns, admin) = setup("up-pipe").await;
    // As `kamel bind` creates it, here with no operator at all: global
    // operators whose id is not `camel-k` leave it alone.
    let pipe: DynamicObject = serde_json::from_value(json!({
        "apiVersion": CamelKind::Pipe.api_version(),
        "kind": "Pipe",
        "metadata": { "name": "ticks" },
        "spec": { "source": { "uri": "timer:tick" }, "sink": { "uri": "log:info" } },
    }))
    .unwrap();
    camel_api(admin.clone(), CamelKind::Pipe, &ns.name)
        .create(&PostParams::default(), &pipe)
        .await
        .unwrap();

    let manifest = manifest(&ns.name, "operator-2");
    let (_git, _sync) = crate::sync_applied(cluster, &ns.name, &manifest).await;
    let integration = wait_for(&admin, CamelKind::Integration, &ns.name, "ticks")
        .within(Duration::from_secs(120))
        .until("created by operator-2 for its Pipe", |o| {
            owner_id(&o.metadata).as_deref() == Some("operator-2")
        })
        .await;
    let controller = integration
        .metadata
        .owner_references
        .unwrap_or_default()
        .into_iter()
        .find(|r| r.controller == Some(true))
        .expect("a controller reference");
    assert_eq!(
        (controller.kind.as_str(), controller.name.as_str()),
        ("Pipe", "ticks")
    );
    let created: Vec<_> = writes_by(cluster, &ns.name, "operator-2")
        .into_iter()
        .filter(|(resource, name, verb, _)| {
            resource == "integrations" && name == "ticks" && verb == "create"
        })
        .collect();
    assert_eq!(
        created.len(),
        1,
        "operator-2 created the Pipe's Integration"
    );
    assert!(writes_by(cluster, &ns.name, "operator-1").is_empty());
    assert_single_owner(cluster, &ns.name);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_upstream_operator_is_taken_over_after_its_lease() {
    let _operator_3 = crate::OPERATOR_3.lock().await;
    let (cluster, ns, admin) = setup("up-killed").await;
    let mut op3 = cluster.upstream_operator("operator-3").await;
    op3.ready_platform(&admin)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    kamel_run(&admin, &ns.name, "orphan", Some("operator-3"), true).await;
    wait_ready_under(&admin, &ns.name, "orphan", "operator-3").await;

    let git = GitRemote::new();
    let rev1 = git.push(&manifest(&ns.name, "operator-3"), "operators");
    let sync = start_sync(cluster, &ns.name, &git, "reconciler", &[]);
    let assignment = SyncedAssignment::new(&admin, &ns.name, NAME, &sync);
    assignment.wait(90, "applied", applied(&rev1)).await;

    op3.kill();
    // Created once operator-3 is gone: it never gets a phase, so no release
    // rule ever judges it stable; only the expiry of operator-3's lock frees it.
    kamel_run(&admin, &ns.name, "newborn", Some("operator-3"), true).await;
    let rev2 = git.push(&manifest(&ns.name, "operator-2"), "to operator-2");
    assignment.wait(240, "applied", applied(&rev2)).await;
    wait_ready_under(&admin, &ns.name, "orphan", "operator-2").await;
    wait_ready_under(&admin, &ns.name, "newborn", "operator-2").await;
    let log = std::fs::read_to_string(&sync.log).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("taken over") && l.contains("Integration/newborn")),
        "newborn was taken over from the dead owner:\n{}",
        sync.log_tail()
    );
    assert_single_owner(cluster, &ns.name);
}

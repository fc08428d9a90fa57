//! The admission policy of `examples/deploy/admission` on a real API server:
//! only a coordinator (the reconciler) or the current owner, handing over,
//! may change a Camel K resource's `camel.apache.org/operator.id`. Each test
//! binds the policy to its own namespace, with identities of its own, so the
//! other tests of the cluster are not affected.

mod support;

use std::time::{Duration, Instant};

use camelk_reconciler::api::OperatorId;
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use camelk_reconciler::handoff::{
    Coordinator, ForcePolicy, HandoffOptions, HandoffOutcome, MoveBatch, ReleaseMode,
};
use camelk_reconciler::lock::LockTiming;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use support::*;

/// Binds the shipped policy to `ns`: `reconciler` coordinates, `operator-N`
/// owns what is labelled `operator-N`.
async fn enforce(cluster: &camelk_testkit::TestCluster, ns: &str) {
    camelk_testkit::admission::enforce_in(
        &cluster.admin().await,
        ns,
        &["reconciler"],
        &["operator-1", "operator-2"],
    )
    .await
    .expect("the policy is enforced");
}

/// Sets the owner label and annotation of Integration `name` as `client`;
/// `Err` holds the API server's refusal (code, message).
async fn set_owner(
    client: &kube::Client,
    ns: &str,
    name: &str,
    label: &str,
    annotation: &str,
) -> Result<(), (u16, String)> {
    let patch = json!({ "metadata": {
        "labels": { OPERATOR_ID_KEY: label },
        "annotations": { OPERATOR_ID_KEY: annotation },
    }});
    camel_api(client.clone(), CamelKind::Integration, ns)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|e| match e {
            kube::Error::Api(status) => (status.code, status.message),
            other => panic!("patching {name}: {other}"),
        })
}

fn refused(result: Result<(), (u16, String)>, expected: &str) {
    match result {
        Ok(()) => panic!("allowed; expected a refusal saying `{expected}`"),
        Err((code, message)) => {
            assert_eq!(code, 403, "{message}");
            assert!(message.contains(expected), "{message}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn only_a_coordinator_or_the_owner_handing_over_may_change_the_operator_id() {
    let cluster = camelk_testkit::shared();
    grant_rbac(cluster).await;
    let ns = cluster.namespace("admission").await;
    let ns = ns.name.as_str();
    cluster
        .grant_in_namespace(
            ns,
            "developer",
            "edit-integrations",
            vec![PolicyRule {
                api_groups: Some(vec!["camel.apache.org".into()]),
                resources: Some(vec!["integrations".into()]),
                verbs: vec!["get".into(), "patch".into()],
                ..Default::default()
            }],
        )
        .await;
    let admin = cluster.admin().await;
    create_integration(&admin, ns, "orders", Some("operator-1")).await;
    enforce(cluster, ns).await;
    let as_user = |user: &'static str| cluster.client_as(user);

    // A person with edit rights, and the cluster admin, may not move it...
    let developer = as_user("developer").await;
    refused(
        set_owner(&developer, ns, "orders", "operator-2", "operator-2").await,
        "only a camelk coordinator or the current owner (operator-1) may change \
         camel.apache.org/operator.id; developer may not",
    );
    refused(
        set_owner(&admin, ns, "orders", "operator-2", "operator-2").await,
        "admin may not",
    );
    // ...but may edit everything else.
    camel_api(developer.clone(), CamelKind::Integration, ns)
        .patch(
            "orders",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": { "tier": "gold" } } })),
        )
        .await
        .expect("other labels stay editable");

    // Another operator may not take it.
    let op1 = as_user("operator-1").await;
    let op2 = as_user("operator-2").await;
    refused(
        set_owner(&op2, ns, "orders", "operator-2", "operator-2").await,
        "the current owner (operator-1)",
    );
    // The owner hands over with both keys in one write, not half of them.
    refused(
        set_owner(&op1, ns, "orders", "operator-2", "operator-1").await,
        "by setting label and annotation camel.apache.org/operator.id to the same new operator",
    );
    set_owner(&op1, ns, "orders", "operator-2", "operator-2")
        .await
        .expect("the owner hands over");
    // Having handed over, operator-1 is no owner any more.
    refused(
        set_owner(&op1, ns, "orders", "operator-1", "operator-1").await,
        "the current owner (operator-2)",
    );
    // The reconciler may set any owner, an unowned resource's too.
    let reconciler = as_user("reconciler").await;
    set_owner(&reconciler, ns, "orders", "operator-1", "operator-1")
        .await
        .expect("the coordinator moves it");
    create_integration(&admin, ns, "unowned", None).await;
    refused(
        set_owner(&developer, ns, "unowned", "operator-1", "operator-1").await,
        "the current owner (none)",
    );
    set_owner(&reconciler, ns, "unowned", "operator-1", "operator-1")
        .await
        .expect("the coordinator assigns it");

    // Membership of a coordinator group counts too: make the admins' group one.
    Api::<ConfigMap>::namespaced(admin.clone(), ns)
        .patch(
            camelk_testkit::admission::IDENTITIES,
            &PatchParams::default(),
            &Patch::Merge(
                json!({ "data": { "coordinatorGroups": "camelk:coordinators system:masters" } }),
            ),
        )
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while set_owner(&admin, ns, "orders", "operator-2", "operator-2")
        .await
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "a coordinator group member was still refused"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn operators_and_the_handoff_work_under_the_policy() {
    let cluster = camelk_testkit::shared();
    grant_rbac(cluster).await;
    let ns = cluster.namespace("admission-handoff").await;
    let ns = ns.name.as_str();
    enforce(cluster, ns).await;
    let admin = cluster.admin().await;
    let _op1 = start_operator(cluster, "operator-1", ns, "op1", "1s");
    let _op2 = start_operator(cluster, "operator-2", ns, "op2", "1s");
    for name in ["orders", "billing"] {
        create_integration(&admin, ns, name, Some("operator-1")).await;
        wait_for(
            &admin,
            CamelKind::Integration,
            ns,
            name,
            Duration::from_secs(60),
            "running",
            running_under("operator-1"),
        )
        .await;
    }

    // operator-1 releases each by flipping both keys: the policy lets it.
    let mut coordinator = Coordinator::new(cluster.client_as("reconciler").await);
    let options = HandoffOptions {
        coordinator: "admission-e2e".into(),
        mode: ReleaseMode::Protocol,
        drain_timeout: Duration::from_secs(60),
        force: ForcePolicy::Never,
        lock_timing: LockTiming::new(LEASE, Duration::from_secs(3), Duration::from_secs(1))
            .unwrap(),
        lock_namespaces: Default::default(),
        default_lock_namespace: ns.into(),
        poll: Duration::from_millis(300),
    };
    let batch = MoveBatch {
        namespace: ns.into(),
        from: OperatorId::new("operator-1").unwrap(),
        to: OperatorId::new("operator-2").unwrap(),
        resources: vec![
            (CamelKind::Integration, "orders".into()),
            (CamelKind::Integration, "billing".into()),
        ],
    };
    let outcome = coordinator
        .execute(&batch, &options, &mut |_| {})
        .await
        .expect("the handoff runs");
    assert!(
        matches!(&outcome, HandoffOutcome::Completed { moved, .. } if moved.len() == 2),
        "{outcome:?}"
    );
    // operator-2 runs them: none of its writes is refused.
    for name in ["orders", "billing"] {
        wait_for(
            &admin,
            CamelKind::Integration,
            ns,
            name,
            Duration::from_secs(60),
            "running under operator-2",
            running_under("operator-2"),
        )
        .await;
    }
    assert_single_owner(cluster, ns);
}

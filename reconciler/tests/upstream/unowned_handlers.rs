//! Two upstream operators that both handle unowned resources in one
//! namespace: what Camel K 2.11 does to every cluster with several
//! operators (any operator that watches a resource with no owner key
//! reconciles it), reproduced with released v2.10.1 operators.
//!
//! Under v2.10 an operator handles a resource with no owner key when its id
//! is `camel-k` or it is namespaced (`WATCH_NAMESPACE` set), and a global
//! `camel-k` operator yields in a namespace that holds a local operator's
//! platform and lock. So two local operators watching the same namespace,
//! each with its platform and lock in a namespace of its own, both act on
//! every unowned resource there: operator-3 and operator-4 here.
//!
//! - Without the product (no admission policy, no reconciler), the audit log
//!   shows both operators writing every Integration and Pipe created with no
//!   owner key.
//! - With it (the owner policy naming operator-3 the `unownedHandler`, and
//!   `reconciler sync` assigning each new resource from the watch event that
//!   shows it), the single-owner judge finds no dual-owner write, and every
//!   resource ends with one owner.
//!
//! Its operator-3 takes turns with the other tests' ([`crate::OPERATOR_3`]);
//! operator-1 and operator-2, global, ignore resources with no owner key.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::NAME;
use crate::support::*;
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY, owner_id};
use camelk_reconciler::camel_k::{condition, phase};
use camelk_testkit::TestCluster;
use camelk_testkit::manifest::{Assignment, Operator};
use camelk_testkit::upstream::{UpstreamOperator, UpstreamOptions};
use kube::Client;
use kube::api::{DynamicObject, PostParams};
use serde_json::json;

const IMAGE: &str = "docker.io/library/camelk-e2e:1.0";
/// The two operators that both handle unowned resources of the apps' namespace.
const HANDLERS: [&str; 2] = ["operator-3", "operator-4"];
/// Every operator identity of the cluster, for the judge.
const ALL_OPERATORS: [&str; 4] = ["operator-1", "operator-2", "operator-3", "operator-4"];
const INTEGRATIONS: usize = 4;
const PIPES: usize = 2;

/// operator-3 and operator-4, local: each watches `apps` and keeps its lock
/// and platform (Ready) in a namespace of its own, so `apps` is not locked
/// and neither yields to the other.
async fn start_handlers(
    cluster: &'static TestCluster,
    admin: &Client,
    apps: &str,
) -> (Vec<UpstreamOperator>, Vec<camelk_testkit::TestNamespace>) {
    let mut operators = Vec::new();
    let mut homes = Vec::new();
    for id in HANDLERS {
        let home = cluster.namespace(&format!("up-home-{id}")).await;
        let mut opts = UpstreamOptions::new(id);
        opts.namespace = home.name.clone();
        opts.watch_namespace = apps.to_string();
        let op = cluster.upstream_operator_with(&opts).await;
        op.ready_platform(admin)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        operators.push(op);
        homes.push(home);
    }
    (operators, homes)
}

/// Integrations (with a prebuilt image, so no build runs) and Pipes, as a
/// GitOps tool applies manifests that name no operator: no owner key.
/// Returns (resource, name) of each, as the audit log names them.
async fn create_unowned(client: &Client, ns: &str) -> Vec<(String, String)> {
    let mut made = Vec::new();
    for i in 0..INTEGRATIONS {
        let name = format!("it-{i}");
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": CamelKind::Integration.api_version(), "kind": "Integration",
            "metadata": { "name": name },
            "spec": { "traits": { "container": { "image": IMAGE } } },
        }))
        .unwrap();
        create(client, CamelKind::Integration, ns, &obj).await;
        made.push(("integrations".to_string(), name));
    }
    for i in 0..PIPES {
        let name = format!("pipe-{i}");
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": CamelKind::Pipe.api_version(), "kind": "Pipe",
            "metadata": { "name": name },
            // The image again: a local operator whose kits live in its own
            // namespace is never told that a kit failed (upstream lists the
            // Integrations of the kit's namespace), so a build would leave
            // the Pipe `Creating` for good.
            "spec": { "source": { "uri": format!("timer:{name}") }, "sink": { "uri": "log:info" },
                "traits": { "container": { "image": IMAGE } } },
        }))
        .unwrap();
        create(client, CamelKind::Pipe, ns, &obj).await;
        made.push(("pipes".to_string(), name));
    }
    made
}

/// Creates `obj`, a `kind`, in `ns` as `client`.
async fn create(client: &Client, kind: CamelKind, ns: &str, obj: &DynamicObject) {
    let name = obj.metadata.name.as_deref().unwrap_or_default();
    camel_api(client.clone(), kind, ns)
        .create(&PostParams::default(), obj)
        .await
        .unwrap_or_else(|e| panic!("creating {name}: {e}"));
}

/// Which operator identities made a successful write to each Camel K
/// resource of `ns` (status included), from the audit log.
fn writers_by_resource(
    cluster: &TestCluster,
    ns: &str,
) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut writers: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for e in cluster.audit_log().events_in(ns).unwrap() {
        let Some(obj) = e.camel_write_in(ns) else {
            continue;
        };
        if !ALL_OPERATORS.contains(&e.user.username.as_str()) {
            continue;
        }
        let name = obj.name.clone().or_else(|| {
            e.response_object.as_ref()?["metadata"]["name"]
                .as_str()
                .map(str::to_string)
        });
        writers
            .entry((obj.resource.clone(), name.unwrap_or_default()))
            .or_default()
            .insert(e.user.username.clone());
    }
    writers
}

/// The single-owner judge with operator-3 as the one operator allowed to
/// write what has no owner: one line per write it finds wrong.
fn dual_owner_writes(cluster: &TestCluster, ns: &str) -> Vec<String> {
    let events = cluster.audit_log().events_in(ns).unwrap();
    camelk_testkit::audit::single_owner_violations_with(
        &events,
        ns,
        &ALL_OPERATORS,
        Some(HANDLERS[0]),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn without_the_product_two_handlers_both_write_each_unowned_resource() {
    let _operator_3 = crate::OPERATOR_3.lock().await;
    let cluster = camelk_testkit::shared();
    let ns = cluster.namespace("up-handlers-off").await;
    let admin = cluster.admin().await;
    let (operators, _homes) = start_handlers(cluster, &admin, &ns.name).await;

    let made = create_unowned(&admin, &ns.name).await;
    // Both reconcile each resource at once; poll until the audit log shows
    // it of every resource, or the time is up.
    let deadline = Instant::now() + Duration::from_secs(180);
    let both: BTreeSet<String> = HANDLERS.iter().map(|s| s.to_string()).collect();
    let short_of_both = loop {
        let writers = writers_by_resource(cluster, &ns.name);
        let short: Vec<String> = made
            .iter()
            .filter(|r| !writers.get(*r).is_some_and(|w| w.is_superset(&both)))
            .map(|(resource, name)| {
                format!(
                    "{resource}/{name}: {:?}",
                    writers.get(&(resource.clone(), name.clone()))
                )
            })
            .collect();
        if short.is_empty() || Instant::now() > deadline {
            break short;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    let logs = operators
        .iter()
        .map(|o| format!("{}:\n{}", o.id(), o.log_tail(15)))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        short_of_both.is_empty(),
        "resources not written by both operators within 180 s:\n{}\n{logs}",
        short_of_both.join("\n")
    );
    // The same hazard through the judge the tests with the product use.
    let dual = dual_owner_writes(cluster, &ns.name);
    println!(
        "without the product: {} resources written by both operators, {} dual-owner writes",
        made.len(),
        dual.len()
    );
    assert!(
        dual.iter().any(|line| line.contains("by operator-4")),
        "operator-4 wrote unowned resources, the judge must say so: {dual:?}"
    );
    // Every resource still has no owner: nothing decided who acts.
    for kind in [CamelKind::Integration, CamelKind::Pipe] {
        for obj in camel_api(admin.clone(), kind, &ns.name)
            .list(&Default::default())
            .await
            .unwrap()
        {
            assert_eq!(
                owner_id(&obj.metadata),
                None,
                "{kind} {:?}",
                obj.metadata.name
            );
        }
    }
    drop(operators);
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_product_each_unowned_resource_gets_one_owner_and_one_writer() {
    let _operator_3 = crate::OPERATOR_3.lock().await;
    let cluster = camelk_testkit::shared();
    let (ns, admin) =
        policed_sync_namespace(cluster, "up-handlers-on", &ALL_OPERATORS, Some(HANDLERS[0])).await;
    let (operators, _homes) = start_handlers(cluster, &admin, &ns.name).await;

    // operator-3 is the one the policy lets write what has no owner; new
    // resources go to operator-4.
    let manifest = Assignment::new(NAME)
        .with_operator(
            Operator::new(HANDLERS[0], operators[0].namespace())
                .upstream()
                .handles_unowned(),
        )
        .upstream_operator(HANDLERS[1], operators[1].namespace())
        .scope(&[&ns.name], &[CamelKind::Integration, CamelKind::Pipe])
        .default_operator(HANDLERS[1])
        .render();
    let (_git, sync) = crate::sync_applied(cluster, &ns.name, &manifest).await;

    let created = Instant::now();
    let made = create_unowned(&admin, &ns.name).await;
    for (resource, name) in &made {
        let (kind, what) = if resource == "pipes" {
            (CamelKind::Pipe, "Ready under operator-4")
        } else {
            (CamelKind::Integration, "Running and Ready under operator-4")
        };
        wait_for(&admin, kind, &ns.name, name)
            .within(Duration::from_secs(240))
            // Seen once under a loaded make test: it-0 still unowned, "Waiting For Platform".
            .explained_by(|| {
                let operators: Vec<String> = operators
                    .iter()
                    .map(|o| format!("{}:\n{}", o.id(), o.log_tail(20)))
                    .collect();
                format!("sync:\n{}\n{}", sync.log_tail(), operators.join("\n"))
            })
            .until(what, |o| {
                let owned = owner_id(&o.metadata).as_deref() == Some(HANDLERS[1]);
                let settled = match kind {
                    CamelKind::Pipe => phase(o) == Some("Ready"),
                    _ => phase(o) == Some("Running") && condition(o, "Ready") == Some("True"),
                };
                owned && settled
            })
            .await;
    }
    // Each Pipe's Integration comes from the Pipe's owner.
    for i in 0..PIPES {
        wait_for(
            &admin,
            CamelKind::Integration,
            &ns.name,
            &format!("pipe-{i}"),
        )
        .within(Duration::from_secs(120))
        .until("the Pipe's Integration, Running under operator-4", |o| {
            owner_id(&o.metadata).as_deref() == Some(HANDLERS[1]) && phase(o) == Some("Running")
        })
        .await;
    }
    println!(
        "with the product: {} resources owned by operator-4 after {:?}",
        made.len(),
        created.elapsed()
    );

    // One owner each, both keys naming it.
    for kind in [CamelKind::Integration, CamelKind::Pipe] {
        for obj in camel_api(admin.clone(), kind, &ns.name)
            .list(&Default::default())
            .await
            .unwrap()
        {
            let meta = &obj.metadata;
            let key = |map: &Option<BTreeMap<String, String>>| {
                map.as_ref().and_then(|m| m.get(OPERATOR_ID_KEY)).cloned()
            };
            assert_eq!(
                (key(&meta.labels), key(&meta.annotations)),
                (Some(HANDLERS[1].into()), Some(HANDLERS[1].into())),
                "{kind} {:?}",
                meta.name
            );
        }
    }
    let dual = dual_owner_writes(cluster, &ns.name);
    let refused = cluster
        .audit_log()
        .events_in(&ns.name)
        .unwrap()
        .iter()
        .filter(|e| {
            e.stage == "ResponseComplete"
                && HANDLERS.contains(&e.user.username.as_str())
                && e.code() == Some(403)
        })
        .count();
    println!(
        "with the product: {} dual-owner writes, {refused} operator writes refused by the policy",
        dual.len()
    );
    assert!(
        dual.is_empty(),
        "dual-owner writes with the product:\n{}\nsync log:\n{}",
        dual.join("\n"),
        sync.log_tail()
    );
    drop(sync);
    drop(operators);
}

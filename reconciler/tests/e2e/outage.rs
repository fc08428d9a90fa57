//! An API server outage, as each process sees it: every process dials the
//! API server through a proxy of its own ([`camelk_testkit::proxy`]), the
//! proxies are cut for 10 s, and each counts the connections its process
//! opened meanwhile. Every watch backs off, so the count is bounded by the
//! backoff, not by how fast a process can retry.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::support::*;
use camelk_reconciler::camel_k::CamelKind;
use camelk_reconciler::handoff::FROM_LABEL;
use camelk_reconciler::handoff::{Coordinator, HandoffOptions};
use camelk_testkit::proxy::{Mode, Proxy};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams};

/// How long the API server is cut.
const OUTAGE: Duration = Duration::from_secs(10);

/// The most connections one process may open during [`OUTAGE`]. Measured
/// with every watch backed off (kube's default backoff: 0.8 s doubling,
/// with jitter): 45 for the operator (nine watches and a lock retried every
/// second), 23 for the sync, 3 for the handoff drive (it ends at its first
/// lock read). With the operator's and the drive's watches not backed off:
/// 14,316 and 349.
const MOST_CONNECTIONS: u64 = 100;

#[tokio::test]
async fn every_process_backs_off_while_the_api_server_is_cut() {
    let cluster = camelk_testkit::shared();
    grant_rbac(cluster).await;
    install_assignment_crd(cluster).await;
    let ns = cluster.namespace("outage").await;
    cluster.grant_sync_namespace(&ns.name).await;
    let admin = cluster.admin().await;
    let configs = tempfile::tempdir().unwrap();
    let proxy = || async {
        Proxy::in_front_of_api_server(cluster.dir())
            .await
            .expect("a proxy in front of the API server")
    };
    let (operator_proxy, sync_proxy, drive_proxy) = (proxy().await, proxy().await, proxy().await);

    // operator-1, through its proxy, builds for longer than the test runs:
    // its Integration's release is held, so the handoff below stays pending.
    cluster
        .grant_operator("operator-1", &ns.name, &ns.name)
        .await;
    let operator_config = configs.path().join("operator-1");
    operator_proxy
        .kubeconfig(cluster.dir(), &operator_config)
        .unwrap();
    let operator = spawn_operator(
        "operator-1",
        &ns.name,
        &ns.name,
        "op1",
        "10m",
        &operator_config,
    );
    let _op2 = start_operator(cluster, "operator-2", &ns.name, "op2", "1s").await;
    create_integration(&admin, &ns.name, "orders", Some("operator-1")).await;
    wait_for(&admin, CamelKind::Integration, &ns.name, "orders")
        .within(Duration::from_secs(60))
        .until("building", in_phase("Building Kit"))
        .await;

    // The sync, through its proxy, follows an assignment that leaves
    // `orders` where it is.
    let git = GitRemote::new();
    let rev = git.push(
        &two_operators("camel-k", &ns.name, None).render(),
        "operators",
    );
    let sync_config = configs.path().join("sync");
    sync_proxy.kubeconfig(cluster.dir(), &sync_config).unwrap();
    let sync = start_sync_via(
        &ns.name,
        &format!("file://{}", git.url().display()),
        "sync-outage",
        &git.cache("sync-outage"),
        &sync_config,
        &[],
    );
    let assignment = SyncedAssignment::new(&admin, &ns.name, "camel-k", &sync);
    assignment.wait(60, "applied", applied(&rev)).await;

    // A handoff drive, through its proxy, waiting on operator-1's release.
    let mut coordinator = Coordinator::new(
        drive_proxy
            .client_as(cluster.dir(), "reconciler")
            .await
            .unwrap(),
    );
    let batch = integration_batch(&ns.name, "operator-1", "operator-2", &["orders"]);
    let options = HandoffOptions {
        // The default of `reconciler sync --poll` and of the plugin.
        poll: Duration::from_millis(500),
        ..handoff_options("e2e-outage", &ns.name, Duration::from_secs(600))
    };
    let drive_ended = AtomicBool::new(false);
    let drive = async {
        let result = coordinator.execute(&batch, &options, &mut |_| {}).await;
        drive_ended.store(true, Ordering::Relaxed);
        result
    };
    let proxies = [
        ("reconciler operator", &operator_proxy),
        ("reconciler sync", &sync_proxy),
        ("the handoff drive", &drive_proxy),
    ];
    let outage = async {
        let requests: Api<Lease> = Api::namespaced(admin.clone(), &ns.name);
        let listed = ListParams::default().labels(FROM_LABEL);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while requests.list(&listed).await.unwrap().items.is_empty() {
            assert!(tokio::time::Instant::now() < deadline, "no handoff request");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Time for the drive's watches to list.
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(
            !drive_ended.load(Ordering::Relaxed),
            "the handoff waits on the release"
        );
        let before: Vec<u64> = proxies
            .iter()
            .map(|(_, p)| {
                p.set(Mode::Cut);
                p.connections()
            })
            .collect();
        tokio::time::sleep(OUTAGE).await;
        let during: Vec<(&str, u64)> = proxies
            .iter()
            .zip(&before)
            .map(|((who, p), before)| (*who, p.connections() - before))
            .collect();
        for (_, p) in &proxies {
            p.set(Mode::Pass);
        }
        (before, during)
    };
    let (drive, (before, during)) = tokio::join!(drive, outage);
    eprintln!("connections opened during a {OUTAGE:?} outage: {during:?}");
    for (who, count) in &during {
        assert!(
            *count <= MOST_CONNECTIONS,
            "{who} opened {count} connections during a {OUTAGE:?} outage \
             (at most {MOST_CONNECTIONS} with a backoff): {during:?}"
        );
    }
    // The drive failed on its first read of a lock during the outage; the
    // processes carry on once the API server is back.
    assert!(drive.is_err(), "the drive saw the outage: {drive:?}");
    for lock in ["operator-1-lock", "camelk-reconciler-lock"] {
        renewed(&admin, &ns.name, lock).await;
    }
    assert!(
        operator_proxy.connections() > before[0] + during[0].1,
        "operator-1 reconnected"
    );
    drop(operator);
}

/// Waits until the lock Lease `name` in `ns` is renewed again.
async fn renewed(client: &kube::Client, ns: &str, name: &str) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let renew_time = || async {
        leases
            .get(name)
            .await
            .unwrap()
            .spec
            .and_then(|s| s.renew_time)
    };
    let stale = renew_time().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while renew_time().await == stale {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{ns}/{name} not renewed after the outage"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

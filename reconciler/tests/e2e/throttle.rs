//! A lock under API Priority and Fairness. A process's own work can fill the
//! few seats APF gives its user; a renewal then gets 429 with
//! `Retry-After: 1`. kube's default client waits that second before each new
//! try, and two refusals outlast a short renew deadline (seen in the chaos
//! matrix's throttled scenario). The lock's own client asks again within a
//! few hundred milliseconds.

use std::time::{Duration, Instant};

use camelk_reconciler::connect::Clients;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::api::{Api, ListParams, VersionMatch};

use camelk_testkit::identity::THROTTLED as USER;

/// The longest gap allowed between two tries of the lock's request while
/// APF refuses it: the lock client's backoff tops out at 250 ms; kube's
/// default client waits the 1 s APF asks for.
const MOST_GAP: Duration = Duration::from_millis(600);

#[tokio::test]
async fn the_lock_asks_again_at_once_when_priority_and_fairness_refuses_it() {
    let cluster = camelk_testkit::shared();
    let ns = cluster.namespace("apf-lock").await;
    let rule = PolicyRule {
        api_groups: Some(vec!["coordination.k8s.io".into()]),
        resources: Some(vec!["leases".into()]),
        verbs: vec!["get".into(), "list".into()],
        ..Default::default()
    };
    cluster
        .grant_in_namespace(&ns.name, USER, "apf-lock", vec![rule])
        .await;
    let admin = cluster.admin().await;
    camelk_testkit::apf::throttle(&admin, USER).await.unwrap();
    let mut config = cluster.config_as(USER).await;
    let clients = Clients::new(config.clone()).unwrap();
    // The seat holder asks once, without kube's retries.
    config.default_retry = false;
    let holder = kube::Client::try_from(config).unwrap();
    // Under load the holder may reach the API server after the lock's read:
    // then nothing was refused and nothing is measured, and the test holds
    // the seat again.
    let mut tries = Vec::new();
    for _ in 0..3 {
        tries = lock_read_while_seat_held(cluster, &admin, &holder, &clients.lock, &ns.name).await;
        if tries.iter().any(|(_, code)| *code == 429) {
            break;
        }
    }
    let refused = tries.iter().filter(|(_, code)| *code == 429).count();
    assert!(
        refused >= 1,
        "the seat holder never made the lock's read wait, in 3 tries: {tries:?}"
    );
    let gaps: Vec<Duration> = tries
        .windows(2)
        .map(|pair| pair[1].0.duration_since(pair[0].0).unsigned_abs())
        .collect();
    eprintln!("{refused} refusals, tried again after {gaps:?}");
    let widest = gaps.iter().max().copied().unwrap_or_default();
    assert!(
        widest <= MOST_GAP,
        "{refused} refusals, tried again after {gaps:?}: at most {MOST_GAP:?} each"
    );
}

/// Holds the throttled user's seat with `holder` for about 3 s, reads the
/// lock Lease through `lock` meanwhile, and returns each try of that read the
/// API server answered (when it was received, and its status code), from the
/// audit log.
async fn lock_read_while_seat_held(
    cluster: &camelk_testkit::TestCluster,
    admin: &kube::Client,
    holder: &kube::Client,
    lock: &kube::Client,
    ns: &str,
) -> Vec<(k8s_openapi::jiff::Timestamp, u16)> {
    let leases = |client: &kube::Client| Api::<Lease>::namespaced(client.clone(), ns);
    let current = camelk_testkit::audit::current_revision(admin)
        .await
        .unwrap();
    // A list that must not be older than a resourceVersion etcd has not
    // reached waits in the watch cache for up to 3 s, holding the user's
    // only seat, then fails.
    let future = ListParams {
        resource_version: Some((current + 1_000_000).to_string()),
        version_match: Some(VersionMatch::NotOlderThan),
        ..Default::default()
    };
    let since = k8s_openapi::jiff::Timestamp::now();
    let held = Instant::now();
    let holding = tokio::spawn({
        let api = leases(holder);
        async move { api.list(&future).await.map(|_| ()) }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = Instant::now();
    let got = leases(lock).get_opt("camelk-reconciler-lock").await;
    let answered = asked.elapsed();
    let hold = holding.await.unwrap();
    assert!(got.is_ok(), "the lock's read: {got:?}");
    eprintln!(
        "seat held {:.1} s ({hold:?}); the lock's read answered after {answered:?}",
        held.elapsed().as_secs_f64()
    );
    camelk_testkit::poll::until(
        Duration::from_secs(10),
        || async {
            let events = cluster.audit_log().events_in(ns).ok()?;
            Some(
                events
                    .into_iter()
                    .filter(|e| {
                        e.stage == "ResponseComplete"
                            && e.user.username == USER
                            && e.verb == "get"
                            && e.object_ref.as_ref().and_then(|o| o.name.as_deref())
                                == Some("camelk-reconciler-lock")
                    })
                    .filter_map(|e| Some((e.received_at()?, e.code()?)))
                    .filter(|(at, _)| *at >= since)
                    .collect::<Vec<_>>(),
            )
        },
        |tries| tries.last().is_some_and(|(_, code)| *code != 429),
    )
    .await
    .unwrap_or_else(|last| panic!("the lock's read, answered, not in the audit log: {last:?}"))
}

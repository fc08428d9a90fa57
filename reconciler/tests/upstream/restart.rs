//! The kubelet's part, as the chaos worlds rely on it: an upstream operator
//! started with `restart_on_exit` that exits (killed from outside here, as
//! it exits by itself when it cannot renew its lock) runs again and leads
//! again, as the container of a Deployment's pod would.
//!
//! Its operator-3 is namespaced, in a namespace of its own, and takes turns
//! ([`crate::OPERATOR_3`]) with the other tests' operator-3.

use std::time::{Duration, Instant};

use camelk_testkit::upstream::UpstreamOptions;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

#[tokio::test(flavor = "multi_thread")]
async fn an_operator_that_exits_is_started_again_as_by_the_kubelet() {
    let _operator_3 = crate::OPERATOR_3.lock().await;
    let cluster = camelk_testkit::shared();
    let admin = cluster.admin().await;
    let ns = cluster.namespace("up-restart").await;
    let mut opts = UpstreamOptions::new("operator-3");
    opts.namespace = ns.name.clone();
    opts.watch_namespace = ns.name.clone();
    opts.restart_on_exit = true;
    let mut op3 = cluster.upstream_operator_with(&opts).await;
    op3.wait_leading(&admin, Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let leases: Api<Lease> = Api::namespaced(admin.clone(), &ns.name);
    let lock = op3.lock_name();
    let holder = || async {
        leases
            .get(&lock)
            .await
            .unwrap()
            .spec
            .and_then(|s| s.holder_identity)
    };
    let first_holder = holder().await;
    let first_pid = op3.pid();

    kill(Pid::from_raw(first_pid as i32), Signal::SIGKILL).unwrap();
    // The back-off (10 s), a start, and the dead holder's lease (15 s).
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let again = op3.pid() != first_pid && op3.is_running();
        let leads = holder()
            .await
            .is_some_and(|h| Some(&h) != first_holder.as_ref());
        if again && leads {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not running and leading again 120 s after SIGKILL (pid {} then {}); log:\n{}",
            first_pid,
            op3.pid(),
            op3.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let log = std::fs::read_to_string(op3.log()).unwrap();
    assert!(
        log.contains("testkit: kamel operator exited"),
        "the restart is said in the operator's log"
    );
    assert_eq!(op3.restarts(), 1);
    op3.kill();
    assert!(!op3.is_running());
}

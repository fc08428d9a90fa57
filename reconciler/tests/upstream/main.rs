//! `reconciler sync` with real, unmodified upstream Camel K operators
//! (`kamel operator`), in one test binary and one control plane of their own.
//!
//! Not with the other end-to-end tests (`tests/e2e`): upstream operators are
//! global (`WATCH_NAMESPACE` empty) and act as `operator-1`..`operator-3` on
//! every namespace of the cluster, so they would reconcile the Integrations
//! those tests give these owners and expect only `reconciler operator`
//! processes to touch.
//!
//! Here, operator-1 and operator-2 are started once and shared
//! ([`shared_operators`]); each test works in its own namespace. The tests
//! that start an operator-3 of their own take turns ([`OPERATOR_3`]).

#[path = "../support/mod.rs"]
mod support;

mod adoption;
mod gitops;
mod progressive;
mod restart;
mod restarts;
mod unowned;
mod unowned_handlers;

use camelk_testkit::TestCluster;
use camelk_testkit::upstream::UpstreamOperator;
use tokio::sync::{Mutex, OnceCell};

/// The `OperatorAssignment` every test here pushes.
pub const NAME: &str = "fleet";

/// Pushes `manifest` to a new Git remote and starts `reconciler sync` (as
/// `reconciler`) on it in `ns`; returns once the sync applied it (120 s at
/// most), with the remote, to push more, and the sync, to keep it running.
pub async fn sync_applied(
    cluster: &TestCluster,
    ns: &str,
    manifest: &str,
) -> (support::GitRemote, support::OperatorProcess) {
    let git = support::GitRemote::new();
    let rev = git.push(manifest, "the assignment under test");
    let sync = support::start_sync(cluster, ns, &git, "reconciler", &[]);
    let admin = cluster.admin().await;
    support::SyncedAssignment::new(&admin, ns, NAME, &sync)
        .wait(120, "applied", support::applied(&rev))
        .await;
    (git, sync)
}

/// operator-1 and operator-2, started once for this binary, platforms Ready.
static SHARED: OnceCell<(UpstreamOperator, UpstreamOperator)> = OnceCell::const_new();

/// Held by a test while its own operator-3 runs: a global operator-3 takes
/// every resource annotated `operator-3` in the cluster, the
/// IntegrationPlatform of a namespaced one included.
pub static OPERATOR_3: Mutex<()> = Mutex::const_new(());

/// operator-1 and operator-2 of this binary, started on first use, their
/// IntegrationPlatforms `Ready`.
pub async fn shared_operators(
    cluster: &'static TestCluster,
) -> &'static (UpstreamOperator, UpstreamOperator) {
    SHARED
        .get_or_init(|| async {
            let mut operators = camelk_testkit::scenario::ready_upstream_operators(
                cluster,
                &["operator-1", "operator-2"],
            )
            .await
            .into_iter();
            let (Some(op1), Some(op2)) = (operators.next(), operators.next()) else {
                unreachable!("two operators asked for, two started");
            };
            (op1, op2)
        })
        .await
}

/// The last lines of the shared operators' logs, for a failure message.
pub fn operator_logs() -> String {
    SHARED
        .get()
        .map(|(a, b)| {
            format!(
                "operator-1:\n{}\noperator-2:\n{}",
                a.log_tail(20),
                b.log_tail(20)
            )
        })
        .unwrap_or_default()
}

//! `reconciler sync` in the test's own process, as the `reconciler` identity
//! (so under the shipped RBAC the test granted), for what only the library
//! takes: a clock that the test sets, or a listener for the endpoints.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use camelk_reconciler::connect::Clients;
use camelk_reconciler::lock::LockTiming;
use camelk_reconciler::source::GitSource;
use camelk_reconciler::sync::{self, Clock, SyncConfig};
use tokio_util::sync::CancellationToken;

use crate::TestCluster;
use crate::identity::RECONCILER;
use crate::scenario::MANIFEST_PATH;

/// What the sync is given besides its namespace and repository.
#[derive(Default)]
pub struct Options {
    /// The clock freeze windows are judged by (default: the system's).
    pub clock: Clock,
    /// Where the Secrets notifications name are mounted (default: none).
    pub notification_secrets: Option<PathBuf>,
    /// Serves the HTTP endpoints on this listener, the plan endpoint with
    /// the token in this file.
    pub endpoints: Option<(TcpListener, PathBuf)>,
}

/// Runs a sync loop until `stop`, its object and lock in `ns`, following
/// branch `main` of the repository at `url` (its clone in `cache`). It
/// fetches once an hour, so only a sync request makes it look sooner.
pub async fn start(
    cluster: &TestCluster,
    ns: &str,
    url: &str,
    cache: &Path,
    options: Options,
    stop: &CancellationToken,
) -> std::thread::JoinHandle<()> {
    let timing = LockTiming::new(
        Duration::from_secs(4),
        Duration::from_secs(3),
        Duration::from_secs(1),
    )
    .expect("a valid lock timing");
    let cfg = SyncConfig {
        namespace: ns.into(),
        identity: "in-process-sync".into(),
        lock_namespace: ns.into(),
        lock_timing: timing,
        operator_lock_timing: timing,
        interval: Duration::from_secs(3600),
        poll: Duration::from_millis(300),
        live_cache: Default::default(),
        clock: options.clock,
        notification_secrets: options
            .notification_secrets
            .unwrap_or_else(|| cache.join("no-secrets")),
    };
    let source = GitSource::new(url, "main", MANIFEST_PATH, &cache.join("clone"));
    let config = cluster.config_as(RECONCILER).await;
    let stop = stop.clone();
    let endpoints = options.endpoints;
    // The sync loop's future is not Send (handoff progress callbacks): it
    // gets a runtime of its own, as in the `reconciler` binary.
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("a runtime");
        // The lock client's buffer runs on the runtime that builds it.
        let clients = runtime
            .block_on(async { Clients::new(config) })
            .expect("clients");
        // A listener belongs to the runtime that serves it.
        let serving = endpoints.map(|(listener, token_file)| {
            listener
                .set_nonblocking(true)
                .expect("a non-blocking listener");
            let _entered = runtime.enter();
            sync::Serving {
                listener: tokio::net::TcpListener::from_std(listener).expect("a tokio listener"),
                webhook_secret: None,
                plan_token_file: Some(token_file),
            }
        });
        runtime.block_on(sync::run(clients, source.into(), cfg, serving, stop))
    })
}

//! The sync loop: leadership, wake-ups and interrupts around
//! [`Syncer::round`].
//!
//! # Expected flow
//! 1. Wait to lead (the Lease `camelk-reconciler-lock`). A standby serves
//!    the HTTP endpoints meanwhile and passes webhooks on to the leader
//!    through the object's requested-at annotation ([`server`], "Replicas").
//! 2. Run a round: it fetches first when the interval passed, a webhook
//!    arrived, the object's annotations were edited (among them the
//!    requested-at annotation a standby or `kubectl camelk sync` sets) or,
//!    with the object as the source, its spec; the first round as leader
//!    fetches too. An ownership change alone plans the revision fetched
//!    last again.
//! 3. A webhook or an edit of the object during a round interrupts its waits
//!    (health gate, pause); the next round, which fetches at once, resumes
//!    from the status.
//! 4. Sleep until the next wake-up.
//!
//! # Guarantees
//! - A failed round is counted by kind, logged and reported as a
//!   `SyncFailed` Event; the next wake-up retries it.

use std::sync::Arc;
use std::time::Instant;

use kube::Client;
use tokio_util::sync::CancellationToken;

use super::newcomers::Newcomers;
use super::plan_endpoint::PlanService;
use super::server::{Relay, RelayTarget};
use super::{LOCK_ID, SyncConfig, Syncer, live, server};
use crate::lock::OperatorLock;
use crate::source::Source;

/// The HTTP endpoints of a sync ([`server`]) and what they need.
pub struct Serving {
    /// Where the endpoints are served.
    pub listener: tokio::net::TcpListener,
    /// The webhook's HMAC secret; without it `POST /hooks/git` refuses all.
    pub webhook_secret: Option<Vec<u8>>,
    /// The file of the plan endpoint's bearer token (read at each request);
    /// without it `GET /plan` is off. It needs a Git source.
    pub plan_token_file: Option<std::path::PathBuf>,
}

/// Runs the sync until `shutdown`: leader election, then a round every
/// interval or at once when a valid webhook arrives. With `serving`, the
/// HTTP endpoints of `server` are served.
pub async fn run(
    client: Client,
    source: Source,
    cfg: SyncConfig,
    serving: Option<Serving>,
    shutdown: CancellationToken,
) {
    let lock = OperatorLock::new(
        client.clone(),
        &cfg.lock_namespace,
        LOCK_ID,
        &cfg.identity,
        cfg.lock_timing,
    );
    let leadership = lock.leadership();
    let lock_task = tokio::spawn(lock.run(shutdown.clone()));
    let telemetry = Arc::new(server::Telemetry::default());
    let trigger = Arc::new(tokio::sync::Notify::new());
    // Ownership changes re-plan against the revision already fetched; the
    // interval, the webhook and edits of the object fetch first.
    let cluster_changed = Arc::new(tokio::sync::Notify::new());
    let (arrivals, arrived) = tokio::sync::mpsc::unbounded_channel();
    let live = live::LiveCache::start(
        &client,
        cfg.live_cache,
        cluster_changed.clone(),
        Some(arrivals),
        &shutdown,
    );
    let newcomers = Newcomers::start(
        client.clone(),
        leadership.clone(),
        arrived,
        shutdown.clone(),
    );
    live::watch_assignments(
        client.clone(),
        &cfg.namespace,
        source.is_the_object(),
        trigger.clone(),
        shutdown.clone(),
    );
    if let Some(serving) = serving {
        let plan = match (serving.plan_token_file, &source) {
            (Some(token_file), Source::Git(git)) => Some(Arc::new(PlanService {
                client: client.clone(),
                source: git.for_plans(),
                live: live.clone(),
                token_file,
                fetching: tokio::sync::Mutex::new(()),
                leadership: leadership.clone(),
            })),
            (Some(_), Source::Cluster(_)) => {
                tracing::warn!("the plan endpoint needs a Git source; GET /plan stays off");
                None
            }
            (None, _) => None,
        };
        let relay_target = match &source {
            Source::Cluster(cluster) => RelayTarget::Named(cluster.name().to_string()),
            Source::Git(_) => RelayTarget::AppliedBySync,
        };
        let endpoints = server::Endpoints {
            telemetry: telemetry.clone(),
            trigger: trigger.clone(),
            webhook_secret: serving.webhook_secret.map(Arc::new),
            leadership: leadership.clone(),
            relay: Arc::new(Relay::new(client.clone(), &cfg.namespace, relay_target)),
            plan,
        };
        let stop = shutdown.clone();
        tokio::spawn(async move {
            if let Err(e) = server::serve(serving.listener, endpoints, stop).await {
                tracing::error!(error = %e, "HTTP endpoints stopped");
            }
        });
    }
    let mut syncer = Syncer::new(client, source, cfg, telemetry.clone())
        .with_live_cache(live)
        .with_newcomers(newcomers);
    tracing::info!(url = %syncer.source.url(), path = %syncer.source.path(), "sync started");
    let mut next_fetch = tokio::time::Instant::now();
    let mut fetch_asked = true;
    loop {
        if !leadership.is_leading() {
            // The first round as leader fetches, so a wake-up while standing
            // by (its own relayed annotation, an edit) is spent here: stored,
            // it would interrupt that round.
            fetch_asked = true;
            let _ = futures::FutureExt::now_or_never(trigger.notified());
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(syncer.cfg.lock_timing.retry_period) => continue,
            }
        }
        let started = Instant::now();
        let fetch = fetch_asked || tokio::time::Instant::now() >= next_fetch;
        if fetch {
            next_fetch = tokio::time::Instant::now() + syncer.cfg.interval;
        }
        // A webhook or an edit of the object interrupts the waits of a round
        // (health gate, pause), which a later round resumes from status.
        let round_cancel = shutdown.child_token();
        let interrupter = {
            let (trigger, cancel) = (trigger.clone(), round_cancel.clone());
            tokio::spawn(async move {
                trigger.notified().await;
                cancel.cancel();
            })
        };
        tokio::select! {
            _ = shutdown.cancelled() => break,
            result = syncer.round(&leadership, &round_cancel, fetch) => {
                telemetry.sync_duration.observe(started.elapsed().as_secs_f64());
                match result {
                    Err(e) if e.is_cancelled() && round_cancel.is_cancelled() => {
                        tracing::info!("round interrupted by a trigger; fetching now");
                    }
                    Err(e) => {
                        telemetry
                            .errors
                            .get_or_create(&server::KindLabel { kind: e.kind().into() })
                            .inc();
                        tracing::warn!(error = %e, "sync round failed; retrying at the next interval");
                        syncer.report_failure(&e).await;
                    }
                    Ok(()) => {}
                }
            }
        }
        interrupter.abort();
        if round_cancel.is_cancelled() {
            // The trigger was spent on the interruption: fetch at once.
            fetch_asked = true;
            continue;
        }
        fetch_asked = tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep_until(next_fetch) => true,
            _ = trigger.notified() => true,
            _ = cluster_changed.notified() => false,
        };
    }
    let _ = lock_task.await;
    tracing::info!("sync stopped");
}

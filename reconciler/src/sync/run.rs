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
//!   `SyncFailed` Event, and retried after a backoff ([`RetryAfterFailure`]:
//!   1 s doubling up to the interval, with jitter). Until then only a webhook
//!   or an edit of the object starts a round, not a change in the cluster:
//!   a persistent failure (a Git host down, a missing permission) costs a
//!   round per backoff, not one per event. A round that succeeds resets it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use tokio_util::sync::CancellationToken;

use super::newcomers::Newcomers;
use super::plan_endpoint::PlanService;
use super::server::{Relay, RelayTarget};
use super::{LOCK_ID, SyncConfig, Syncer, owner_watch, server};
use crate::connect::Clients;
use crate::lock::OperatorLock;
use crate::source::Source;

/// The HTTP endpoints of a sync (`server`) and what they need.
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
    clients: Clients,
    source: Source,
    cfg: SyncConfig,
    serving: Option<Serving>,
    shutdown: CancellationToken,
) {
    let client = clients.work;
    let lock = OperatorLock::new(
        clients.lock,
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
    let live = owner_watch::LiveCache::start(
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
    owner_watch::watch_assignments(
        client.clone(),
        &cfg.namespace,
        source.is_the_object(),
        trigger.clone(),
        shutdown.clone(),
    );
    // A step waiting for approval goes on as soon as one is created.
    super::approval::watch(
        client.clone(),
        &cfg.namespace,
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
    let mut retry = RetryAfterFailure::new(syncer.cfg.interval);
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
        // The round starts: a pending retry is spent, whatever woke the loop
        // (also after a spell of standing by).
        retry.started();
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
                        let delay = retry.failed(fetch);
                        tracing::warn!(error = %e, retry_in = ?delay, "sync round failed");
                        syncer.report_failure(&e).await;
                    }
                    Ok(()) => retry.succeeded(),
                }
            }
        }
        interrupter.abort();
        // A freeze window that opens before the next fetch: a round then.
        if let Some(wait) = syncer.take_wake_in() {
            next_fetch = next_fetch.min(tokio::time::Instant::now() + wait);
        }
        if round_cancel.is_cancelled() {
            // The trigger was spent on the interruption: fetch at once.
            fetch_asked = true;
            continue;
        }
        fetch_asked = match retry.pending() {
            // A failed round: its retry (or the interval, if sooner); a
            // change in the cluster waits for it.
            Some((at, refetch)) => tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep_until(next_fetch) => true,
                _ = tokio::time::sleep_until(at) => refetch,
                _ = trigger.notified() => true,
            },
            None => tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep_until(next_fetch) => true,
                _ = trigger.notified() => true,
                _ = cluster_changed.notified() => false,
            },
        };
    }
    let _ = lock_task.await;
    tracing::info!("sync stopped");
}

/// When a failed round is tried again: 1 s after the first failure, then
/// twice as long after each failure in a row (with jitter), never longer than
/// the interval; a round that succeeds starts the count again. The retry
/// fetches when the failed round did.
struct RetryAfterFailure {
    interval: Duration,
    delays: ExponentialBackoff,
    /// The retry of the last failed round, and whether it fetches.
    pending: Option<(tokio::time::Instant, bool)>,
}

impl RetryAfterFailure {
    fn new(interval: Duration) -> Self {
        Self {
            interval,
            delays: Self::delays(interval),
            pending: None,
        }
    }

    fn delays(interval: Duration) -> ExponentialBackoff {
        ExponentialBuilder::default()
            .with_min_delay(Duration::from_secs(1).min(interval))
            .with_max_delay(interval)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times()
            .build()
    }

    /// A round failed: schedules its retry and returns how long until it.
    fn failed(&mut self, fetched: bool) -> Duration {
        let delay = self
            .delays
            .next()
            .unwrap_or(self.interval)
            .min(self.interval);
        self.pending = Some((tokio::time::Instant::now() + delay, fetched));
        delay
    }

    fn succeeded(&mut self) {
        self.delays = Self::delays(self.interval);
    }

    fn pending(&self) -> Option<(tokio::time::Instant, bool)> {
        self.pending
    }

    /// The next round starts: the retry is spent, the failure count kept.
    fn started(&mut self) {
        self.pending = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn failures_in_a_row_wait_longer_up_to_the_interval_and_success_starts_again() {
        let interval = Duration::from_secs(10);
        let mut retry = RetryAfterFailure::new(interval);
        let waits: Vec<Duration> = (0..6)
            .map(|_| {
                let wait = retry.failed(true);
                retry.started();
                wait
            })
            .collect();
        // 1, 2, 4, 8, then the interval; jitter adds up to one more delay.
        for (wait, at_least) in waits.iter().zip([1, 2, 4, 8, 10, 10]) {
            let at_least = Duration::from_secs(at_least);
            assert!(
                *wait >= at_least.min(interval) && *wait <= interval,
                "{waits:?}"
            );
        }
        assert!(waits[0] < Duration::from_secs(2), "{waits:?}");
        retry.succeeded();
        assert!(retry.failed(false) < Duration::from_secs(2));
        assert_eq!(retry.pending().map(|(_, fetch)| fetch), Some(false));
        retry.started();
        assert_eq!(retry.pending(), None);
    }
}

//! Leader election on the operator lock, following client-go's rules (see the
//! module doc of [`crate::lock`]).
//!
//! [`OperatorLock::run`] acquires and renews the Lease; [`Leadership`] is what
//! the writing code asks before every write. It answers from the local
//! instant of the last successful renewal, so a process that was paused (or
//! whose renewals are failing) stops writing once `renew_deadline` has passed,
//! even if the task that renews has not run since.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio_util::sync::CancellationToken;

use super::{LeaseObserver, Liveness, LockTiming, lock_name};

/// Whether this replica leads, as of now.
#[derive(Clone, Debug)]
pub(crate) struct Leadership {
    last_renewed: Arc<Mutex<Option<Instant>>>,
    timing: LockTiming,
}

impl Leadership {
    /// True while the last successful acquire or renew was sent less than
    /// `renew_deadline` ago.
    pub(crate) fn is_leading(&self) -> bool {
        self.last_renewed
            .lock()
            .expect("leadership mutex")
            .is_some_and(|t| t.elapsed() < self.timing.renew_deadline)
    }

    /// Until when this round's requests may run. A leader's renewal may take
    /// as long as its leadership still holds, the rest of its renew deadline,
    /// as client-go gives a renewal the whole deadline rather than a fixed
    /// share: under a throttled or loaded API server a slow renewal that
    /// lands keeps the lock, where a short timeout would drop it. A replica
    /// that does not lead (or no longer does) gets one renew deadline.
    fn round_deadline(&self, now: Instant) -> Instant {
        let last = *self.last_renewed.lock().expect("leadership mutex");
        round_deadline(last, now, self.timing.renew_deadline)
    }

    fn set(&self, at: Option<Instant>) {
        *self.last_renewed.lock().expect("leadership mutex") = at;
    }

    /// A replica's leadership without a lock behind it: leading (renewed
    /// now) or standing by, for tests of what only the leader does (the
    /// sync's endpoints, behind the `server` feature).
    #[cfg(all(test, feature = "server"))]
    pub(crate) fn fixed(leading: bool) -> Leadership {
        let leadership = Leadership {
            last_renewed: Arc::new(Mutex::new(None)),
            // Long enough for any test to keep leading.
            timing: LockTiming {
                lease_duration: Duration::from_secs(7200),
                renew_deadline: Duration::from_secs(3600),
                retry_period: Duration::from_secs(1),
            },
        };
        leadership.set(leading.then(Instant::now));
        leadership
    }
}

/// The lock of one operator id, from the point of view of one replica.
pub struct OperatorLock {
    api: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
    timing: LockTiming,
    observer: LeaseObserver,
    leadership: Leadership,
}

/// Failures of one acquire-or-renew round.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("lock {name}: {source}")]
    Api {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("lock {0}: request timed out")]
    Timeout(String),
}

impl OperatorLock {
    /// The lock `<id>-lock` in `namespace`, for the replica `identity`.
    pub fn new(
        client: Client,
        namespace: &str,
        id: &str,
        identity: &str,
        timing: LockTiming,
    ) -> OperatorLock {
        let leadership = Leadership {
            last_renewed: Arc::new(Mutex::new(None)),
            timing,
        };
        OperatorLock {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            name: lock_name(id),
            identity: identity.to_string(),
            timing,
            observer: LeaseObserver::new(),
            leadership,
        }
    }

    #[cfg(any(feature = "server", feature = "reference-operator"))]
    pub(crate) fn leadership(&self) -> Leadership {
        self.leadership.clone()
    }

    /// Acquires and renews every `retry_period` until `shutdown`; then, if it
    /// leads, releases the Lease so a successor need not wait for expiry.
    pub async fn run(mut self, shutdown: CancellationToken) {
        let mut was_leading = false;
        loop {
            let sent_at = Instant::now();
            match self.try_acquire_or_renew().await {
                Ok(true) => self.leadership.set(Some(sent_at)),
                Ok(false) => self.leadership.set(None),
                Err(e) => tracing::warn!(error = %e, "operator lock round failed"),
            }
            let leading = self.leadership.is_leading();
            if leading != was_leading {
                tracing::info!(lock = %self.name, identity = %self.identity, leading, "leadership changed");
                was_leading = leading;
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(self.timing.retry_period) => {}
            }
        }
        if self.leadership.is_leading() {
            self.leadership.set(None);
            let _ = self.release().await;
        }
    }

    /// One round: create, renew, or take over an expired Lease. Returns
    /// whether this replica holds the lock afterwards.
    pub(crate) async fn try_acquire_or_renew(&mut self) -> Result<bool, LockError> {
        let deadline = self.leadership.round_deadline(Instant::now());
        let read =
            match tokio::time::timeout_at(deadline.into(), self.api.get_opt(&self.name)).await {
                Ok(Ok(read)) => Ok(read),
                Ok(Err(source)) => Err(self.api_error(source)),
                Err(_) => Err(LockError::Timeout(self.name.clone())),
            };
        let current = read.inspect_err(|_| self.observer.read_failed())?;
        let now = Instant::now();
        let Some(lease) = current else {
            let fresh = self.lease(None, 0);
            return self
                .write(deadline, |api, pp| {
                    let fresh = fresh.clone();
                    async move { api.create(&pp, &fresh).await }
                })
                .await;
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let liveness = self.observer.observe(
            &self.namespace,
            &self.name,
            Some(&lease),
            self.timing.lease_duration,
            now,
        );
        let transitions = spec.lease_transitions.unwrap_or(0);
        let next = if holder == self.identity {
            let mut renewed = self.lease(lease.metadata.resource_version.clone(), transitions);
            renewed.spec.as_mut().expect("spec").acquire_time = spec.acquire_time;
            renewed
        } else if holder.is_empty() || matches!(liveness, Liveness::Expired { .. }) {
            self.lease(lease.metadata.resource_version.clone(), transitions + 1)
        } else {
            return Ok(false);
        };
        let name = self.name.clone();
        self.write(deadline, move |api, pp| {
            let next = next.clone();
            let name = name.clone();
            async move { api.replace(&name, &pp, &next).await }
        })
        .await
    }

    /// Gives the lock up (holder cleared), compare-and-swap as every write.
    pub async fn release(&self) -> Result<(), LockError> {
        let Some(lease) = self
            .api
            .get_opt(&self.name)
            .await
            .map_err(|source| self.api_error(source))?
        else {
            return Ok(());
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(&self.identity) {
            return Ok(());
        }
        let mut released = lease.clone();
        released.spec = Some(LeaseSpec {
            holder_identity: None,
            ..spec
        });
        self.api
            .replace(&self.name, &PostParams::default(), &released)
            .await
            .map(|_| ())
            .map_err(|source| self.api_error(source))
    }

    /// A write that answers "do I hold the lock": a conflict (someone else
    /// wrote first) or an existing object means no.
    async fn write<F, Fut>(&self, deadline: Instant, call: F) -> Result<bool, LockError>
    where
        F: FnOnce(Api<Lease>, PostParams) -> Fut,
        Fut: std::future::Future<Output = Result<Lease, kube::Error>>,
    {
        let call = call(self.api.clone(), PostParams::default());
        match tokio::time::timeout_at(deadline.into(), call).await {
            Err(_) => Err(LockError::Timeout(self.name.clone())),
            Ok(Ok(_)) => Ok(true),
            Ok(Err(kube::Error::Api(s))) if s.code == 409 => Ok(false),
            Ok(Err(source)) => Err(self.api_error(source)),
        }
    }

    fn lease(&self, resource_version: Option<String>, transitions: i32) -> Lease {
        let now = MicroTime(Timestamp::now());
        Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                resource_version,
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.identity.clone()),
                lease_duration_seconds: Some(self.timing.lease_duration.as_secs().max(1) as i32),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(transitions),
                ..Default::default()
            }),
        }
    }

    fn api_error(&self, source: kube::Error) -> LockError {
        LockError::Api {
            name: self.name.clone(),
            source,
        }
    }
}

/// The end of a round that starts at `now`: the end of the leadership the
/// last renewal (sent at `last_renewed`) gave, or, without one that still
/// holds, one renew deadline from now.
fn round_deadline(
    last_renewed: Option<Instant>,
    now: Instant,
    renew_deadline: Duration,
) -> Instant {
    last_renewed
        .map(|sent| sent + renew_deadline)
        .filter(|lapses| *lapses > now)
        .unwrap_or(now + renew_deadline)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEADLINE: Duration = Duration::from_secs(10);

    #[test]
    fn a_leader_renews_for_as_long_as_its_leadership_holds() {
        let now = Instant::now();
        let sent = now - Duration::from_secs(4);
        assert_eq!(
            round_deadline(Some(sent), now, DEADLINE),
            now + Duration::from_secs(6)
        );
    }

    #[test]
    fn a_replica_without_leadership_gets_a_whole_renew_deadline() {
        let now = Instant::now();
        assert_eq!(round_deadline(None, now, DEADLINE), now + DEADLINE);
        let lapsed = now - Duration::from_secs(11);
        assert_eq!(round_deadline(Some(lapsed), now, DEADLINE), now + DEADLINE);
    }
}

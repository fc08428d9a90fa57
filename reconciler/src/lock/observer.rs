//! Judging another process's Lease alive or expired from local observation.
//!
//! The observer remembers, per Lease, the last resourceVersion it saw and the
//! local instant it first saw it. A Lease that has not changed for
//! `lease_duration` of local time is expired; renewTime in the object is
//! never compared with this machine's clock.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;

/// What the observer can say about a Lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Liveness {
    /// Seen to change within the lease duration.
    Alive { holder: Option<String> },
    /// Not seen to change yet, and not watched for a whole lease duration.
    Unknown,
    /// Unchanged for at least the lease duration (or absent that long).
    Expired { holder: Option<String> },
}

#[derive(Clone, Debug)]
struct Seen {
    version: Option<String>,
    first_seen: Instant,
    changed_since_start: bool,
}

/// Remembers Leases across observations; feed it every read with [`observe`](Self::observe).
#[derive(Debug, Default)]
pub(crate) struct LeaseObserver {
    seen: HashMap<(String, String), Seen>,
}

impl LeaseObserver {
    pub(crate) fn new() -> LeaseObserver {
        LeaseObserver::default()
    }

    /// Records a read of Lease `namespace/name` (`None`: it does not exist)
    /// at `now`, and judges it with `lease_duration`.
    pub(crate) fn observe(
        &mut self,
        namespace: &str,
        name: &str,
        lease: Option<&Lease>,
        lease_duration: Duration,
        now: Instant,
    ) -> Liveness {
        let version = lease.and_then(|l| l.metadata.resource_version.clone());
        let holder = lease
            .and_then(|l| l.spec.as_ref())
            .and_then(|s| s.holder_identity.clone());
        let key = (namespace.to_string(), name.to_string());
        let entry = self.seen.entry(key).or_insert_with(|| Seen {
            version: version.clone(),
            first_seen: now,
            changed_since_start: false,
        });
        if entry.version != version {
            entry.version = version;
            entry.first_seen = now;
            entry.changed_since_start = true;
        }
        let unchanged_for = now.saturating_duration_since(entry.first_seen);
        if unchanged_for >= lease_duration {
            Liveness::Expired { holder }
        } else if entry.changed_since_start {
            Liveness::Alive { holder }
        } else {
            Liveness::Unknown
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn lease(rv: &str) -> Lease {
        Lease {
            metadata: ObjectMeta {
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            spec: None,
        }
    }

    #[test]
    fn a_renewed_lease_is_alive_and_a_silent_one_expires() {
        let d = Duration::from_secs(10);
        let t0 = Instant::now();
        let mut o = LeaseObserver::new();
        assert_eq!(
            o.observe("ns", "a-lock", Some(&lease("1")), d, t0),
            Liveness::Unknown
        );
        assert_eq!(
            o.observe(
                "ns",
                "a-lock",
                Some(&lease("2")),
                d,
                t0 + Duration::from_secs(3)
            ),
            Liveness::Alive { holder: None }
        );
        assert_eq!(
            o.observe(
                "ns",
                "a-lock",
                Some(&lease("2")),
                d,
                t0 + Duration::from_secs(12)
            ),
            Liveness::Alive { holder: None },
            "9 s since the change it saw: not yet expired"
        );
        assert_eq!(
            o.observe(
                "ns",
                "a-lock",
                Some(&lease("2")),
                d,
                t0 + Duration::from_secs(13)
            ),
            Liveness::Expired { holder: None }
        );
    }

    #[test]
    fn expiry_counts_from_first_observation_not_from_the_object() {
        let d = Duration::from_secs(10);
        let t0 = Instant::now();
        let mut o = LeaseObserver::new();
        // An old renewTime in the object does not matter: only local observation does.
        assert_eq!(
            o.observe("ns", "b-lock", Some(&lease("5")), d, t0),
            Liveness::Unknown
        );
        assert_eq!(
            o.observe(
                "ns",
                "b-lock",
                Some(&lease("5")),
                d,
                t0 + Duration::from_secs(9)
            ),
            Liveness::Unknown
        );
        assert_eq!(
            o.observe(
                "ns",
                "b-lock",
                Some(&lease("5")),
                d,
                t0 + Duration::from_secs(10)
            ),
            Liveness::Expired { holder: None }
        );
        assert_eq!(
            o.observe("ns", "missing", None, d, t0 + Duration::from_secs(10)),
            Liveness::Unknown
        );
    }
}

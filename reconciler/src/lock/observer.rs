//! Judging another process's Lease alive or expired from local observation.
//!
//! The observer remembers, per Lease, the last resourceVersion it saw and the
//! local instant it first saw it. A Lease that has not changed for
//! `lease_duration` of local time is expired; renewTime in the object is
//! never compared with this machine's clock.
//!
//! Only time the observer saw the API server answer counts. When a read
//! failed, or more than half a lease duration passed since the last answer
//! (a slow read, or one that waited behind a write hung on a stopped etcd),
//! the holders may have been as unable to renew as the observer was to see,
//! so the clocks of all Leases start again at this answer.

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
    /// A read failed since the last answer.
    read_failed: bool,
    /// When the last read was answered.
    last_answer: Option<Instant>,
}

impl LeaseObserver {
    pub(crate) fn new() -> LeaseObserver {
        LeaseObserver::default()
    }

    /// Records a read of Lease `namespace/name` (`None`: it does not exist)
    /// answered at `now`, and judges it with `lease_duration`.
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
        let unseen = self
            .last_answer
            .replace(now)
            .is_some_and(|last| now.saturating_duration_since(last) > lease_duration / 2);
        if std::mem::take(&mut self.read_failed) || unseen {
            for seen in self.seen.values_mut() {
                seen.first_seen = now;
            }
        }
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

    /// Records that a read failed: the time until the next answer does not
    /// count as any holder's silence.
    pub(crate) fn read_failed(&mut self) {
        self.read_failed = true;
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

    /// Reads Lease `name` once a second from `from` to `to` seconds after
    /// `t0`, at resourceVersion `rv`; returns the last judgement.
    fn watch(
        o: &mut LeaseObserver,
        name: &str,
        rv: Option<&str>,
        t0: Instant,
        (from, to): (u64, u64),
    ) -> Liveness {
        let d = Duration::from_secs(10);
        let mut last = Liveness::Unknown;
        for s in from..=to {
            let l = rv.map(lease);
            let at = t0 + Duration::from_secs(s);
            last = o.observe("ns", name, l.as_ref(), d, at);
        }
        last
    }

    #[test]
    fn a_renewed_lease_is_alive_and_a_silent_one_expires() {
        let t0 = Instant::now();
        let mut o = LeaseObserver::new();
        assert_eq!(
            watch(&mut o, "a-lock", Some("1"), t0, (0, 2)),
            Liveness::Unknown
        );
        assert_eq!(
            watch(&mut o, "a-lock", Some("2"), t0, (3, 3)),
            Liveness::Alive { holder: None }
        );
        assert_eq!(
            watch(&mut o, "a-lock", Some("2"), t0, (4, 12)),
            Liveness::Alive { holder: None },
            "9 s since the change it saw: not yet expired"
        );
        assert_eq!(
            watch(&mut o, "a-lock", Some("2"), t0, (13, 13)),
            Liveness::Expired { holder: None }
        );
    }

    #[test]
    fn expiry_counts_from_first_observation_not_from_the_object() {
        let t0 = Instant::now();
        let mut o = LeaseObserver::new();
        // An old renewTime in the object does not matter: only local observation does.
        assert_eq!(
            watch(&mut o, "b-lock", Some("5"), t0, (0, 9)),
            Liveness::Unknown
        );
        assert_eq!(
            watch(&mut o, "b-lock", Some("5"), t0, (10, 10)),
            Liveness::Expired { holder: None }
        );
        assert_eq!(
            watch(&mut o, "missing", None, t0, (0, 10)),
            Liveness::Expired { holder: None },
            "absent for a whole lease duration"
        );
    }

    #[test]
    fn time_the_observer_could_not_read_does_not_count_as_silence() {
        let d = Duration::from_secs(10);
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut o = LeaseObserver::new();
        watch(&mut o, "c-lock", Some("1"), t0, (0, 1));
        assert_eq!(
            watch(&mut o, "c-lock", Some("2"), t0, (2, 4)),
            Liveness::Alive { holder: None }
        );
        // Reads fail from 5 s to 19 s (the API server restarting): the same
        // version at 20 s is no proof that the holder died.
        o.read_failed();
        assert_eq!(
            watch(&mut o, "c-lock", Some("2"), t0, (20, 29)),
            Liveness::Alive { holder: None }
        );
        assert_eq!(
            watch(&mut o, "c-lock", Some("2"), t0, (30, 30)),
            Liveness::Expired { holder: None },
            "silent for a lease duration of reads answered"
        );
        // A read answered 13 s after the last (it took 12 s, etcd stopped):
        // the clock starts at its answer.
        let lease2 = lease("2");
        assert_eq!(
            o.observe("ns", "c-lock", Some(&lease2), d, at(43)),
            Liveness::Alive { holder: None }
        );
        assert_eq!(
            watch(&mut o, "c-lock", Some("2"), t0, (44, 53)),
            Liveness::Expired { holder: None }
        );
        // The clocks of the other Leases start again too: the outage was
        // everyone's.
        let mut o = LeaseObserver::new();
        watch(&mut o, "e-lock", Some("1"), t0, (0, 8));
        watch(&mut o, "f-lock", Some("1"), t0, (0, 8));
        o.observe("ns", "e-lock", Some(&lease("1")), d, at(20));
        assert_eq!(
            o.observe("ns", "f-lock", Some(&lease("1")), d, at(20)),
            Liveness::Unknown
        );
        // Up to half the lease duration between answers is only a slow read.
        let mut o = LeaseObserver::new();
        watch(&mut o, "d-lock", Some("2"), t0, (0, 5));
        assert_eq!(
            o.observe("ns", "d-lock", Some(&lease2), d, at(10)),
            Liveness::Expired { holder: None }
        );
    }

    #[test]
    fn time_the_observer_did_not_read_does_not_count_as_silence() {
        // The coordinator reads a Lease, then waits 9 s on a write that hung
        // while etcd was stopped; no read failed, but nobody could renew.
        let t0 = Instant::now();
        let mut o = LeaseObserver::new();
        watch(&mut o, "g-lock", Some("1"), t0, (0, 1));
        watch(&mut o, "g-lock", Some("2"), t0, (2, 4));
        assert_eq!(
            watch(&mut o, "g-lock", Some("2"), t0, (13, 13)),
            Liveness::Alive { holder: None },
            "11 s unchanged, but only 2 of them seen"
        );
        assert_eq!(
            watch(&mut o, "g-lock", Some("2"), t0, (14, 23)),
            Liveness::Expired { holder: None },
            "then silent for a lease duration of reads answered"
        );
    }
}

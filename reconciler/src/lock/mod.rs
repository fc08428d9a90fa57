//! The operator lock: the Lease `<id>-lock` in the operator's namespace (the
//! name upstream Camel K uses for its leader election), held by the leading
//! replica of operator `id`.
//!
//! Timing rules, as client-go's leader election has them:
//! - `lease_duration > renew_deadline > retry_period`;
//! - a Lease is expired when *this process* has not seen it change for
//!   `lease_duration`, measured on the local monotonic clock from the moment
//!   the change was observed. Clocks of different machines are never
//!   compared (`observer`);
//! - every write to the Lease is compare-and-swap on its resourceVersion, and
//!   a round's API calls time out when the leadership they renew would lapse
//!   (one `renew_deadline` after the last renewal was sent), as client-go's
//!   renewal runs under one `renew_deadline` context (`election`); the lock
//!   asks through a client of its own that retries a refusal at once
//!   ([`crate::connect::Clients`]);
//! - a leader that has not renewed for `renew_deadline` stops writing. Since
//!   `renew_deadline < lease_duration`, it stops before any other replica or
//!   coordinator can judge the Lease expired.

pub(crate) mod election;
pub(crate) mod observer;

use std::time::Duration;

// Leadership is read by the loops that lead (the sync, the reference
// operator), never by the plugin.
#[cfg(any(feature = "server", feature = "reference-operator"))]
pub(crate) use election::Leadership;
pub use election::OperatorLock;
pub(crate) use observer::{LeaseObserver, Liveness};

/// The id under which `reconciler sync` holds its own lock: its replicas elect
/// a leader on the Lease `camelk-reconciler-lock`.
pub const RECONCILER_ID: &str = "camelk-reconciler";

/// Name of the lock Lease of operator `id`.
pub(crate) fn lock_name(id: &str) -> String {
    format!("{id}-lock")
}

/// The three durations of a lock, checked to be ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockTiming {
    /// How long a lock stays the holder's without a renewal.
    pub lease_duration: Duration,
    /// How long the holder keeps trying to renew before it gives the lock up;
    /// shorter than `lease_duration`.
    pub renew_deadline: Duration,
    /// How long to wait between attempts to acquire or renew; shorter than
    /// `renew_deadline`.
    pub retry_period: Duration,
}

impl LockTiming {
    /// client-go's defaults: 15 s, 10 s, 2 s.
    pub const DEFAULT: LockTiming = LockTiming {
        lease_duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
    };

    /// The three durations, if they keep the order client-go's leader election
    /// requires: `lease_duration > renew_deadline > retry_period`.
    pub fn new(
        lease_duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Result<LockTiming, String> {
        if !(lease_duration > renew_deadline && renew_deadline > retry_period) {
            return Err(format!(
                "lock timing must satisfy lease duration ({lease_duration:?}) > renew deadline \
                 ({renew_deadline:?}) > retry period ({retry_period:?})"
            ));
        }
        Ok(LockTiming {
            lease_duration,
            renew_deadline,
            retry_period,
        })
    }
}

impl Default for LockTiming {
    fn default() -> Self {
        LockTiming::DEFAULT
    }
}

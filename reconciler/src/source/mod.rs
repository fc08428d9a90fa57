//! Sources of desired state: where `reconciler sync` reads the
//! `OperatorAssignment` manifest from.
//!
//! Contract:
//! - A source yields [`Revision`]s: a commit SHA and the manifest text at that
//!   commit, with the path to name in diagnostics. It never validates (that is
//!   [`crate::manifest`]'s job) and never writes to the remote.
//! - [`git::GitSource`] fetches the tracked branch into a cache clone owned by
//!   the reconciler; the remote's head is the truth, so a branch that was
//!   rewound or force-pushed is followed, and reported as such
//!   ([`Revision::rewound`]).
//! - Any earlier revision the cache has seen can be read again
//!   ([`git::GitSource::read_at`]): the reconciler keeps no local state and
//!   re-reads the last applied revision's manifest from its SHA in status.

pub mod git;

pub use git::{GitSource, SourceError};

/// One revision of the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Revision {
    /// Full commit SHA.
    pub sha: String,
    /// Manifest text at that commit.
    pub text: String,
    /// Name of the file in diagnostics (`path` in the repository).
    pub file: String,
    /// The previous head fetched by this source is not an ancestor of this
    /// one: the branch was rewound or force-pushed.
    pub rewound: bool,
}

impl Revision {
    /// The first 12 characters of the SHA, for people.
    pub fn short(&self) -> &str {
        short_sha(&self.sha)
    }
}

/// The first 12 characters of a SHA.
pub fn short_sha(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

//! Sources of desired state: where `reconciler sync` reads the
//! `OperatorAssignment` manifest from.
//!
//! Contract:
//! - A [`Source`] yields [`Revision`]s: a revision id and the manifest text at
//!   that revision, with the name to use in diagnostics. It never validates
//!   (that is [`crate::manifest`]'s job) and never writes to the remote.
//! - [`git::GitSource`] fetches the tracked branch into a cache clone owned by
//!   the reconciler; the remote's head is the truth, so a branch that was
//!   rewound or force-pushed is followed, and reported as such
//!   ([`Revision::rewound`]). Its credentials are read at every fetch
//!   ([`credentials`]).
//! - [`cluster::ClusterSource`] is the `OperatorAssignment` object in the
//!   cluster itself, as Argo CD or Flux applied it: the revision is its
//!   `metadata.generation`, and the sync must not apply it
//!   ([`Source::is_the_object`]).
//! - Any earlier revision a source handed out can be read again
//!   ([`Source::read_at`]): the reconciler keeps no local state and re-reads
//!   the last applied revision's manifest from its id in status.

pub mod cluster;
pub mod credentials;
pub(crate) mod git;

use std::path::PathBuf;

pub use cluster::ClusterSource;
pub use credentials::CredentialConfig;
pub use git::GitSource;

/// One revision of the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Revision {
    /// The revision id: a full commit SHA, or `generation-<N>` of the object.
    pub sha: String,
    /// Manifest text at that revision.
    pub text: String,
    /// Name of the file in diagnostics (`path` in the repository, or
    /// `OperatorAssignment/<namespace>/<name>`).
    pub file: String,
    /// The previous head fetched by this source is not an ancestor of this
    /// one: the branch was rewound or force-pushed.
    pub(crate) rewound: bool,
}

impl Revision {
    /// The first 12 characters of a SHA (other ids whole), for people.
    pub fn short(&self) -> &str {
        short_sha(&self.sha)
    }
}

/// The first 12 characters of a hexadecimal SHA; any other revision id
/// (`generation-12`) whole.
pub fn short_sha(sha: &str) -> &str {
    if sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        &sha[..sha.len().min(12)]
    } else {
        sha
    }
}

/// Where the desired state comes from.
pub enum Source {
    /// A branch of a Git repository.
    Git(Box<GitSource>),
    /// The `OperatorAssignment` object in the cluster.
    Cluster(ClusterSource),
}

impl Source {
    /// The head revision now.
    pub async fn fetch(&mut self) -> Result<Revision, SourceError> {
        match self {
            Source::Git(git) => git.fetch().await,
            Source::Cluster(cluster) => cluster.fetch().await,
        }
    }

    /// The manifest text of an earlier revision this source handed out.
    pub async fn read_at(&self, revision: &str) -> Result<String, SourceError> {
        match self {
            Source::Git(git) => git.read_at(revision).await,
            Source::Cluster(cluster) => cluster.read_at(revision).await,
        }
    }

    /// Where it reads from, for logs (no password).
    pub fn url(&self) -> &str {
        match self {
            Source::Git(git) => git.url(),
            Source::Cluster(_) => "cluster",
        }
    }

    /// The manifest's name in diagnostics.
    pub fn path(&self) -> &str {
        match self {
            Source::Git(git) => git.path(),
            Source::Cluster(cluster) => cluster.path(),
        }
    }

    /// Whether the source is the `OperatorAssignment` object itself: then
    /// the sync never applies it (it only writes its status).
    // Only the sync loop (feature `server`) calls this; the plugin builds without it.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn is_the_object(&self) -> bool {
        matches!(self, Source::Cluster(_))
    }
}

impl From<GitSource> for Source {
    fn from(git: GitSource) -> Source {
        Source::Git(Box::new(git))
    }
}

impl From<ClusterSource> for Source {
    fn from(cluster: ClusterSource) -> Source {
        Source::Cluster(cluster)
    }
}

/// Why a revision could not be fetched or read. No variant carries a
/// credential value.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("creating the cache directory {path}: {source}")]
    CacheDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("opening the cache clone {path}: {source}")]
    Cache {
        path: PathBuf,
        #[source]
        source: git2::Error,
    },
    #[error("fetching branch `{branch}` from {url}: {source}")]
    Fetch {
        url: String,
        branch: String,
        #[source]
        source: git2::Error,
    },
    #[error(
        "fetching branch `{branch}` from {url}: the remote's TLS certificate is not trusted \
         here ({message}); if a private CA signed it, mount that CA's PEM file and name it in \
         SSL_CERT_FILE"
    )]
    UntrustedCertificate {
        url: String,
        branch: String,
        message: String,
    },
    #[error("branch `{branch}` not found at {url}")]
    NoBranch { url: String, branch: String },
    #[error("commit {sha}: {source}")]
    Commit {
        sha: String,
        #[source]
        source: git2::Error,
    },
    #[error("{path} does not exist at commit {sha}")]
    MissingFile { path: String, sha: String },
    #[error("reading the {what} file {path}: {source}")]
    CredentialFile {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading the Git credentials Secret {namespace}/{name}: {source}")]
    CredentialSecret {
        namespace: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("known_hosts from {from}: {source}")]
    KnownHosts {
        from: String,
        #[source]
        source: crate::git::transport::known_hosts::KnownHostsError,
    },
    #[error("reading OperatorAssignment {namespace}/{name}: {source}")]
    Object {
        namespace: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("OperatorAssignment {namespace}/{name} does not exist")]
    NoObject { namespace: String, name: String },
    #[error("keeping revision {revision} in ConfigMap {namespace}/{name}: {source}")]
    Snapshot {
        revision: String,
        namespace: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error(
        "revision {revision} is not kept in ConfigMap {namespace}/{name} (it keeps the last {keep} and the last applied one)"
    )]
    UnknownRevision {
        revision: String,
        namespace: String,
        name: String,
        keep: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hexadecimal_ids_are_shortened() {
        assert_eq!(
            short_sha("9f1c2b3a4d5e6f708192a3b4c5d6e7f809102132"),
            "9f1c2b3a4d5e"
        );
        assert_eq!(short_sha("generation-12345"), "generation-12345");
    }
}

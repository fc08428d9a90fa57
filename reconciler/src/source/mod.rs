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
//!   (`Revision::rewound`). Its credentials are read at every fetch
//!   (`credential_config`).
//! - [`assignment_object::ClusterSource`] is the `OperatorAssignment` object in the
//!   cluster itself, as Argo CD or Flux applied it: the revision is its
//!   `metadata.generation`, and the sync must not apply it
//!   (`Source::is_the_object`).
//! - Any earlier revision a source handed out can be read again
//!   ([`Source::read_at`]): the reconciler keeps no local state and re-reads
//!   the last applied revision's manifest from its id in status.

pub(crate) mod assignment_object;
pub(crate) mod credential_config;
pub(crate) mod git;
pub(crate) mod origin;

use std::path::PathBuf;

pub use assignment_object::{ClusterSource, KEEP};
pub use credential_config::{CredentialConfig, SecretRef};
pub use git::{GitSource, check_branch};
pub use origin::Origin;

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
    /// Who wrote the commit and why; `None` for the object source.
    pub commit: Option<Commit>,
    /// For the object source: the Git revision the GitOps tool that applied
    /// the object reports (`origin`).
    pub origin: Option<origin::Origin>,
}

/// What a commit says of itself, for the migration history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Commit {
    /// The author's name.
    pub author: String,
    /// The first line of the message.
    pub subject: String,
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

    /// Whether an object read now at `generation` is still revision `rev`.
    /// A Git revision is applied to the object, so it always is; the object
    /// source's is stale once the object changed after the fetch.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn still_at(&self, rev: &Revision, generation: Option<i64>) -> bool {
        match self {
            Source::Git(_) => true,
            Source::Cluster(_) => assignment_object::revision_at(generation) == rev.sha,
        }
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
    /// The cache directory of the clone could not be created.
    #[error("creating the cache directory {path}: {source}")]
    CacheDir {
        /// The directory that could not be created.
        path: PathBuf,
        /// The file system's error.
        #[source]
        source: std::io::Error,
    },
    /// The cached clone exists but could not be opened.
    #[error("opening the cache clone {path}: {source}")]
    Cache {
        /// Where the cached clone lives.
        path: PathBuf,
        /// libgit2's error.
        #[source]
        source: git2::Error,
    },
    /// Fetching the branch failed (network, authentication, missing repository).
    #[error("fetching branch `{branch}` from {url}: {source}")]
    Fetch {
        /// Remote URL, without a password.
        url: String,
        /// The branch that was fetched.
        branch: String,
        /// libgit2's error.
        #[source]
        source: git2::Error,
    },
    /// The remote's TLS certificate is not signed by a CA trusted here.
    #[error(
        "fetching branch `{branch}` from {url}: the remote's TLS certificate is not trusted \
         here ({message}); if a private CA signed it, mount that CA's PEM file and name it in \
         SSL_CERT_FILE"
    )]
    UntrustedCertificate {
        /// Remote URL, without a password.
        url: String,
        /// The branch that was fetched.
        branch: String,
        /// libgit2's description of the certificate failure.
        message: String,
    },
    /// The branch to follow is not a valid Git branch name.
    #[error(
        "`{branch}` is not a valid branch name (Git refuses `..`, spaces, `~^:?*[\\`, `@{{`, \
         a leading `-` and a trailing `.lock`); nothing was fetched"
    )]
    InvalidBranch {
        /// The name as given.
        branch: String,
    },
    /// The manifest's path is a symbolic link in the commit: refused, not followed.
    #[error(
        "{path} at commit {sha} is a symbolic link to `{target}`; the sync reads only a regular \
         file and never follows a link (it could point outside the repository): set --path to \
         the file itself"
    )]
    Symlink {
        /// The manifest's path in the repository.
        path: String,
        /// Where the link points, as stored in the commit.
        target: String,
        /// The commit.
        sha: String,
    },
    /// The manifest at the commit is over [`crate::api::MAX_MANIFEST_BYTES`].
    #[error(
        "{path} at commit {sha} is {size} bytes, over the limit of {} bytes (1.5 MiB, the most \
         etcd stores in one object by default); it was not read",
        crate::api::MAX_MANIFEST_BYTES
    )]
    TooLarge {
        /// The manifest's path in the repository.
        path: String,
        /// The commit.
        sha: String,
        /// Its size in bytes.
        size: usize,
    },
    /// The manifest at the commit is not UTF-8.
    #[error("{path} at commit {sha} is not UTF-8 (at byte {offset}); save it as UTF-8")]
    NotUtf8 {
        /// The manifest's path in the repository.
        path: String,
        /// The commit.
        sha: String,
        /// Offset of the first byte that is not UTF-8.
        offset: usize,
    },
    /// The remote has no such branch.
    #[error("branch `{branch}` not found at {url}")]
    NoBranch {
        /// Remote URL, without a password.
        url: String,
        /// The branch asked for.
        branch: String,
    },
    /// A revision asked for is neither a full commit SHA nor a valid ref or
    /// branch name.
    #[error(
        "`{revision}` is not a revision this can fetch: give a full 40-character commit SHA, \
         a branch name or a ref such as refs/pull/7/head"
    )]
    InvalidRevision {
        /// The revision as given.
        revision: String,
    },
    /// The remote has no such branch, ref or commit.
    #[error("revision `{revision}` not found at {url}")]
    NoRevision {
        /// Remote URL, without a password.
        url: String,
        /// The revision asked for.
        revision: String,
    },
    /// A fetched commit could not be read.
    #[error("commit {sha}: {source}")]
    Commit {
        /// The commit's SHA.
        sha: String,
        /// libgit2's error.
        #[source]
        source: git2::Error,
    },
    /// The manifest file does not exist at the fetched commit.
    #[error("{path} does not exist at commit {sha}")]
    MissingFile {
        /// The manifest's path in the repository.
        path: String,
        /// The commit that lacks it.
        sha: String,
    },
    /// A credential file (token, SSH key, passphrase) could not be read.
    #[error("reading the {what} file {path}: {source}")]
    CredentialFile {
        /// Which credential the file holds (`token`, `SSH key`, `known_hosts`, ...).
        what: &'static str,
        /// The file's path.
        path: PathBuf,
        /// The file system's error.
        #[source]
        source: std::io::Error,
    },
    /// The Secret holding the Git credentials could not be read.
    #[error("reading the Git credentials Secret {namespace}/{name}: {source}")]
    CredentialSecret {
        /// The Secret's namespace.
        namespace: String,
        /// The Secret's name.
        name: String,
        /// The API server's error.
        #[source]
        source: Box<kube::Error>,
    },
    /// The known_hosts entries could not be read or parsed.
    #[error("known_hosts from {from}: {source}")]
    KnownHosts {
        /// Where they came from: a file path or `Secret namespace/name`.
        from: String,
        /// What was wrong with them.
        #[source]
        source: crate::git::transport::known_hosts::KnownHostsError,
    },
    /// Reading the `OperatorAssignment` object failed.
    #[error("reading OperatorAssignment {namespace}/{name}: {source}")]
    Object {
        /// The object's namespace.
        namespace: String,
        /// The object's name.
        name: String,
        /// The API server's error.
        #[source]
        source: Box<kube::Error>,
    },
    /// The `OperatorAssignment` object the source follows does not exist.
    #[error("OperatorAssignment {namespace}/{name} does not exist")]
    NoObject {
        /// The object's namespace.
        namespace: String,
        /// The object's name.
        name: String,
    },
    /// Keeping a revision's manifest text in the snapshot ConfigMap failed.
    #[error("keeping revision {revision} in ConfigMap {namespace}/{name}: {source}")]
    Snapshot {
        /// The revision id (`generation-<N>`).
        revision: String,
        /// The ConfigMap's namespace.
        namespace: String,
        /// The ConfigMap's name.
        name: String,
        /// The API server's error.
        #[source]
        source: Box<kube::Error>,
    },
    /// An earlier revision was asked for that the snapshot ConfigMap no longer keeps.
    #[error(
        "revision {revision} is not kept in ConfigMap {namespace}/{name} (it keeps the last {keep} and the last applied one)"
    )]
    UnknownRevision {
        /// The revision id asked for.
        revision: String,
        /// The ConfigMap's namespace.
        namespace: String,
        /// The ConfigMap's name.
        name: String,
        /// How many recent revisions the ConfigMap keeps.
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

    #[tokio::test]
    async fn the_object_source_is_stale_once_its_generation_moved_on() {
        let url = "http://127.0.0.1:9".parse().unwrap();
        let client = kube::Client::try_from(kube::Config::new(url)).unwrap();
        let source = Source::from(ClusterSource::new(client, "ns", "fleet"));
        let rev = Revision {
            sha: "generation-1".into(),
            text: String::new(),
            file: String::new(),
            rewound: false,
            commit: None,
            origin: None,
        };
        assert!(source.still_at(&rev, Some(1)));
        assert!(!source.still_at(&rev, Some(2)));
    }
}

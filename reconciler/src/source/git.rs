//! A Git repository as a source: a bare cache clone fetched from the remote
//! on every poll.
//!
//! Expected flow of [`GitSource::fetch`]:
//! 1. read the credentials now ([`CredentialConfig::resolve`]: files or a
//!    Secret, so a rotation is used by the next fetch);
//! 2. open the cache clone (a bare repository under the cache directory), or
//!    create it on first use;
//! 3. fetch `+refs/heads/<branch>` from the URL into
//!    `refs/remotes/origin/<branch>` (forced: the remote's head wins); over
//!    `ssh://` with a known_hosts given, the server's host key is checked
//!    before anything is sent ([`crate::git::transport`]);
//! 4. read the manifest blob at `path` in that commit: a regular file of at
//!    most [`crate::api::MAX_MANIFEST_BYTES`] (its size is read from the
//!    object header first) holding UTF-8. A symbolic link is refused, never
//!    followed: its target is named in the error.
//!
//! A branch that is not a valid ref name (`a..b`, `-x`, `x.lock`) is refused
//! ([`check_branch`]) before the cache is created or anything is fetched.
//!
//! Guarantees: nothing is written outside the cache directory; a failed fetch
//! leaves the previous fetch usable; credentials are handed to libgit2 only,
//! never logged, and scrubbed from its error messages (and a password in the
//! URL is left out of every message). URLs: a local path, `file://`, and
//! whatever transports libgit2 was built with (`https://`, `ssh://`).
//! Credentials are offered as [`crate::git::transport`] offers them.

use std::path::{Path, PathBuf};

use git2::{FetchOptions, Oid, Repository};

use super::credential_config::CredentialConfig;
use super::{Commit, Revision, SourceError};
use crate::git::transport::credential_values::GitCredentials;
use crate::git::transport::{self, redact_url, ssh_port};

/// A branch of a Git repository and the manifest's path in it.
#[derive(Clone)]
pub struct GitSource {
    /// The URL as given, for libgit2 only.
    remote_url: String,
    /// The URL without a password, for messages.
    url: String,
    branch: String,
    path: String,
    cache: PathBuf,
    credentials: CredentialConfig,
    last_head: Option<Oid>,
}

impl GitSource {
    /// `url` (a path, `file://`, `https://` or `ssh://`), `branch`, the
    /// manifest's `path` inside the repository, and a cache directory the
    /// source may own. Credentials are the ambient ones until
    /// [`GitSource::with_credentials`].
    pub fn new(url: &str, branch: &str, path: &str, cache: &Path) -> GitSource {
        GitSource {
            remote_url: url.to_string(),
            url: redact_url(url),
            branch: branch.to_string(),
            path: path.trim_start_matches('/').to_string(),
            cache: cache.to_path_buf(),
            credentials: CredentialConfig::default(),
            last_head: None,
        }
    }

    /// Where the credentials are read from at each fetch.
    pub fn with_credentials(mut self, credentials: CredentialConfig) -> GitSource {
        self.credentials = credentials;
        self
    }

    /// The URL, without a password it may carry.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The manifest's path in the repository.
    pub fn path(&self) -> &str {
        &self.path
    }

    fn open(&self) -> Result<Repository, SourceError> {
        let cache_err = |source| SourceError::Cache {
            path: self.cache.clone(),
            source,
        };
        match Repository::open_bare(&self.cache) {
            Ok(repo) => Ok(repo),
            Err(_) => {
                std::fs::create_dir_all(&self.cache).map_err(|source| SourceError::CacheDir {
                    path: self.cache.clone(),
                    source,
                })?;
                Repository::init_bare(&self.cache).map_err(cache_err)
            }
        }
    }

    /// Reads the credentials, fetches the branch and reads the manifest at
    /// its head. Blocks the thread for the Git work (`block_in_place`: needs
    /// the multi-threaded runtime).
    pub async fn fetch(&mut self) -> Result<Revision, SourceError> {
        let credentials = self.credentials.resolve().await?;
        tokio::task::block_in_place(|| self.fetch_with(&credentials))
    }

    fn fetch_with(&mut self, credentials: &GitCredentials) -> Result<Revision, SourceError> {
        check_branch(&self.branch)?;
        let repo = self.open()?;
        let tracking = format!("refs/remotes/origin/{}", self.branch);
        let refspec = format!("+refs/heads/{}:{tracking}", self.branch);
        self.fetch_refspec(&repo, credentials, &refspec, &self.branch)?;
        let head = repo
            .refname_to_id(&tracking)
            .map_err(|_| SourceError::NoBranch {
                url: self.url.clone(),
                branch: self.branch.clone(),
            })?;
        let rewound = match self.last_head {
            Some(previous) if previous != head => {
                !repo.graph_descendant_of(head, previous).unwrap_or(false)
            }
            _ => false,
        };
        self.last_head = Some(head);
        let text = read_blob(&repo, head, &self.path)?;
        Ok(Revision {
            sha: head.to_string(),
            text,
            file: self.path.clone(),
            rewound,
            commit: commit_of(&repo, head),
            origin: None,
        })
    }

    /// Fetches `refspec` from the remote into `repo`; `what` names the
    /// branch or revision in errors.
    fn fetch_refspec(
        &self,
        repo: &Repository,
        credentials: &GitCredentials,
        refspec: &str,
        what: &str,
    ) -> Result<(), SourceError> {
        let fetch_err = |source: git2::Error| {
            let message = credentials
                .scrub(source.message())
                .replace(&self.remote_url, &self.url);
            if transport::is_untrusted_certificate(&source) {
                return SourceError::UntrustedCertificate {
                    url: self.url.clone(),
                    branch: what.to_string(),
                    message,
                };
            }
            SourceError::Fetch {
                url: self.url.clone(),
                branch: what.to_string(),
                source: git2::Error::new(source.code(), source.class(), message),
            }
        };
        let helper_config = repo.config().ok();
        let mut remote = repo.remote_anonymous(&self.remote_url).map_err(fetch_err)?;
        let mut options = FetchOptions::new();
        options.remote_callbacks(transport::callbacks(
            credentials,
            helper_config.as_ref(),
            ssh_port(&self.remote_url),
        ));
        remote
            .fetch(&[refspec], Some(&mut options), None)
            .map_err(fetch_err)
    }

    /// The same repository and manifest, cloned in a cache of its own next to
    /// this one (`<cache>.plans`): the plan endpoint fetches any revision
    /// there while the sync fetches its branch here, never into one
    /// repository at once.
    pub fn for_plans(&self) -> GitSource {
        let mut cache = self.cache.clone().into_os_string();
        cache.push(".plans");
        GitSource {
            cache: PathBuf::from(cache),
            last_head: None,
            ..self.clone()
        }
    }

    /// The manifest at `rev`: a full commit SHA, a branch name or a ref such
    /// as `refs/pull/7/head`. A name is fetched every time (a pull request's
    /// branch moves); a SHA only when the clone lacks it (the remote must
    /// serve commits by SHA, as GitHub and GitLab do). Blocks the thread for
    /// the Git work, as [`GitSource::fetch`].
    pub async fn read_revision(&self, rev: &str) -> Result<Revision, SourceError> {
        let wanted = Wanted::parse(rev)?;
        let credentials = self.credentials.resolve().await?;
        tokio::task::block_in_place(|| {
            let repo = self.open()?;
            let commit = match &wanted {
                Wanted::Sha(oid) => match repo.find_commit(*oid) {
                    Ok(commit) => commit.id(),
                    Err(_) => {
                        let local = format!("refs/camelk/plans/{oid}");
                        self.fetch_refspec(&repo, &credentials, &format!("+{oid}:{local}"), rev)?;
                        repo.refname_to_id(&local).map_err(|_| self.unknown(rev))?
                    }
                },
                Wanted::Ref(remote) => {
                    let local = format!("refs/camelk/plans/{}", remote.trim_start_matches("refs/"));
                    self.fetch_refspec(&repo, &credentials, &format!("+{remote}:{local}"), rev)?;
                    repo.refname_to_id(&local).map_err(|_| self.unknown(rev))?
                }
            };
            // A ref may name a tag: its commit is what is planned.
            let commit = repo
                .find_object(commit, None)
                .and_then(|o| o.peel_to_commit())
                .map_err(|_| self.unknown(rev))?
                .id();
            Ok(Revision {
                sha: commit.to_string(),
                text: read_blob(&repo, commit, &self.path)?,
                file: self.path.clone(),
                rewound: false,
                commit: commit_of(&repo, commit),
                origin: None,
            })
        })
    }

    fn unknown(&self, rev: &str) -> SourceError {
        SourceError::NoRevision {
            url: self.url.clone(),
            revision: rev.to_string(),
        }
    }

    /// The manifest text at an earlier commit `sha` the cache has fetched.
    pub async fn read_at(&self, sha: &str) -> Result<String, SourceError> {
        tokio::task::block_in_place(|| {
            let repo = self.open()?;
            let oid = Oid::from_str(sha).map_err(|source| SourceError::Commit {
                sha: sha.to_string(),
                source,
            })?;
            read_blob(&repo, oid, &self.path)
        })
    }
}

/// A revision asked for by name.
enum Wanted {
    /// A full commit SHA.
    Sha(Oid),
    /// A ref on the remote: `refs/...` as given, or a branch name.
    Ref(String),
}

impl Wanted {
    fn parse(rev: &str) -> Result<Wanted, SourceError> {
        let invalid = || SourceError::InvalidRevision {
            revision: rev.to_string(),
        };
        if rev.len() == 40 && rev.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Oid::from_str(rev).map(Wanted::Sha).map_err(|_| invalid());
        }
        let full = if rev.starts_with("refs/") {
            rev.to_string()
        } else {
            format!("refs/heads/{rev}")
        };
        // A valid ref name only: no `..`, `@{`, spaces or refspec syntax.
        if !git2::Reference::is_valid_name(&full) {
            return Err(invalid());
        }
        Ok(Wanted::Ref(full))
    }
}

/// Refuses a branch name Git would refuse (`a..b`, `a b`, `-x`, `x.lock`,
/// `@{`): before any fetch, so the refspec built from it never reaches the
/// remote.
pub fn check_branch(branch: &str) -> Result<(), SourceError> {
    if git2::Branch::name_is_valid(branch).unwrap_or(false) {
        Ok(())
    } else {
        Err(SourceError::InvalidBranch {
            branch: branch.to_string(),
        })
    }
}

fn commit_of(repo: &Repository, commit: Oid) -> Option<Commit> {
    let commit = repo.find_commit(commit).ok()?;
    Some(Commit {
        author: String::from_utf8_lossy(commit.author().name_bytes()).into_owned(),
        subject: String::from_utf8_lossy(commit.summary_bytes().unwrap_or_default()).into_owned(),
    })
}

fn read_blob(repo: &Repository, commit: Oid, path: &str) -> Result<String, SourceError> {
    let sha = commit.to_string();
    let commit_err = |source| SourceError::Commit {
        sha: sha.clone(),
        source,
    };
    let tree = repo
        .find_commit(commit)
        .and_then(|c| c.tree())
        .map_err(commit_err)?;
    let missing = || SourceError::MissingFile {
        path: path.to_string(),
        sha: sha.clone(),
    };
    let entry = tree.get_path(Path::new(path)).map_err(|_| missing())?;
    if entry.filemode() == i32::from(git2::FileMode::Link) {
        let target = repo
            .find_blob(entry.id())
            .map(|b| String::from_utf8_lossy(b.content()).into_owned())
            .unwrap_or_default();
        return Err(SourceError::Symlink {
            path: path.to_string(),
            target,
            sha,
        });
    }
    let size = repo
        .odb()
        .and_then(|odb| odb.read_header(entry.id()))
        .map(|(size, _)| size)
        .map_err(commit_err)?;
    if size > crate::api::MAX_MANIFEST_BYTES {
        return Err(SourceError::TooLarge {
            path: path.to_string(),
            sha,
            size,
        });
    }
    let blob = entry
        .to_object(repo)
        .and_then(|o| o.peel_to_blob())
        .map_err(|_| missing())?;
    String::from_utf8(blob.content().to_vec()).map_err(|e| SourceError::NotUtf8 {
        path: path.to_string(),
        sha,
        offset: e.utf8_error().valid_up_to(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(repo: &Repository, path: &str, text: &str, parent: Option<Oid>) -> Oid {
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        let blob = repo.blob(text.as_bytes()).unwrap();
        let mut builder = repo.treebuilder(None).unwrap();
        builder.insert(path, blob, 0o100644).unwrap();
        let tree = repo.find_tree(builder.write().unwrap()).unwrap();
        let parents: Vec<git2::Commit> = parent
            .into_iter()
            .map(|p| repo.find_commit(p).unwrap())
            .collect();
        let refs: Vec<&git2::Commit> = parents.iter().collect();
        repo.commit(Some("HEAD"), &sig, &sig, "m", &tree, &refs)
            .unwrap()
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn fetches_follows_new_commits_and_reports_a_rewind() {
        let dir = tempfile::tempdir().unwrap();
        let remote = Repository::init(dir.path().join("remote")).unwrap();
        let first = commit(&remote, "m.yaml", "one", None);
        let branch = remote.head().unwrap().shorthand().unwrap().to_string();
        let url = format!("file://{}", dir.path().join("remote").display());
        let mut source = GitSource::new(&url, &branch, "m.yaml", &dir.path().join("cache"));

        let r1 = source.fetch().await.unwrap();
        assert_eq!(
            (r1.sha.as_str(), r1.text.as_str()),
            (&*first.to_string(), "one")
        );
        assert!(!r1.rewound);
        let second = commit(&remote, "m.yaml", "two", Some(first));
        let r2 = source.fetch().await.unwrap();
        assert_eq!(r2.sha, second.to_string());
        assert!(!r2.rewound);
        assert_eq!(source.read_at(&r1.sha).await.unwrap(), "one");

        // Force-push: a new root commit replaces the branch.
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        let blob = remote.blob(b"three").unwrap();
        let mut builder = remote.treebuilder(None).unwrap();
        builder.insert("m.yaml", blob, 0o100644).unwrap();
        let tree = remote.find_tree(builder.write().unwrap()).unwrap();
        let orphan = remote.commit(None, &sig, &sig, "m", &tree, &[]).unwrap();
        remote
            .reference(&format!("refs/heads/{branch}"), orphan, true, "force")
            .unwrap();
        let r3 = source.fetch().await.unwrap();
        assert_eq!((r3.text.as_str(), r3.rewound), ("three", true));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn missing_branch_and_file_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let remote = Repository::init(dir.path().join("remote")).unwrap();
        commit(&remote, "m.yaml", "one", None);
        let branch = remote.head().unwrap().shorthand().unwrap().to_string();
        let url = dir.path().join("remote").display().to_string();
        let mut nobranch = GitSource::new(&url, "nope", "m.yaml", &dir.path().join("c1"));
        assert!(nobranch.fetch().await.is_err());
        let mut nofile = GitSource::new(&url, &branch, "other.yaml", &dir.path().join("c2"));
        assert!(matches!(
            nofile.fetch().await,
            Err(SourceError::MissingFile { .. })
        ));
    }
}
